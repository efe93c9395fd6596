/**
 * A raw Kafka client for wire tests: encodes requests with the generated codecs, sends size-prefixed frames
 * over a real socket, and matches responses by correlation id. Also sends arbitrary bytes, for fuzzing.
 */
import { apiCodecsByKey } from "../../src/protocol/generated/index.ts";
import { encodeRequestHeader } from "../../src/protocol/generated/request-header.ts";
import { decodeResponseHeader } from "../../src/protocol/generated/response-header.ts";
import { requestHeaderVersion, responseHeaderVersion } from "../../src/protocol/header.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { Writer } from "../../src/protocol/writer.ts";

interface Pending {
  apiKey: number;
  apiVersion: number;
  resolve(frame: Uint8Array): void;
  reject(error: Error): void;
}

export class WireClient {
  private socket!: Awaited<ReturnType<typeof Bun.connect>>;
  private buffered = new Uint8Array(0);
  private readonly pending: Pending[] = [];
  private nextCorrelationId = 1;
  private closedResolve!: () => void;
  /** Settles when the server closes the connection. */
  readonly closed = new Promise<void>((resolve) => (this.closedResolve = resolve));
  isClosed = false;

  static async connect(port: number, host = "127.0.0.1", clientId = "wire-test"): Promise<WireClient> {
    const client = new WireClient(clientId);
    client.socket = await Bun.connect({
      hostname: host,
      port,
      socket: {
        data: (_socket, chunk) => client.onData(chunk),
        close: () => client.onClose(),
        error: () => client.onClose(),
      },
    });
    return client;
  }

  private constructor(readonly clientId: string) {}

  private onData(chunk: Uint8Array): void {
    const joined = new Uint8Array(this.buffered.length + chunk.length);
    joined.set(this.buffered);
    joined.set(chunk, this.buffered.length);
    let offset = 0;
    while (joined.length - offset >= 4) {
      const size = new DataView(joined.buffer, joined.byteOffset + offset).getInt32(0);
      if (joined.length - offset - 4 < size) break;
      const frame = joined.slice(offset + 4, offset + 4 + size);
      offset += 4 + size;
      const waiter = this.pending.shift();
      if (waiter) waiter.resolve(frame);
    }
    this.buffered = joined.slice(offset);
  }

  private onClose(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const p of this.pending.splice(0)) p.reject(new Error("connection closed"));
    this.closedResolve();
  }

  /** Encodes and sends a request; resolves with the decoded response. */
  async request<T = any>(apiKey: number, apiVersion: number, body: unknown): Promise<T> {
    const frame = await this.requestRaw(apiKey, apiVersion, this.encodeRequest(apiKey, apiVersion, body));
    return this.decodeResponse(apiKey, apiVersion, frame) as T;
  }

  encodeRequest(apiKey: number, apiVersion: number, body: unknown, correlationId = this.nextCorrelationId++): Uint8Array {
    const codecs = apiCodecsByKey.get(apiKey);
    if (!codecs) throw new Error(`no codecs for ${apiKey}`);
    const w = new Writer();
    w.int32(0);
    encodeRequestHeader(w, requestHeaderVersion(apiKey, apiVersion), {
      requestApiKey: apiKey,
      requestApiVersion: apiVersion,
      correlationId,
      clientId: this.clientId,
    });
    codecs.encodeRequest(w, apiVersion, body);
    const bytes = w.finish();
    w.patchInt32(0, bytes.length - 4);
    return bytes;
  }

  decodeResponse(apiKey: number, apiVersion: number, frame: Uint8Array): unknown {
    const r = new Reader(frame);
    decodeResponseHeader(r, responseHeaderVersion(apiKey, apiVersion));
    return apiCodecsByKey.get(apiKey)!.decodeResponse(r, apiVersion);
  }

  /** Sends already-framed bytes and waits for the next response frame (header + body, no size prefix). */
  requestRaw(apiKey: number, apiVersion: number, framed: Uint8Array): Promise<Uint8Array> {
    return new Promise<Uint8Array>((resolve, reject) => {
      if (this.isClosed) return reject(new Error("connection closed"));
      this.pending.push({ apiKey, apiVersion, resolve, reject });
      this.socket.write(framed);
    });
  }

  /** Sends bytes without expecting an answer. */
  send(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  close(): void {
    this.socket.end();
  }
}
