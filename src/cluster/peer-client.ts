/**
 * The inter-broker Kafka client (docs/architecture.md, "Transactional batches verified with a remote
 * coordinator"): a broker asks another broker over the Kafka protocol, as Apache's brokers do for KIP-890
 * verification (AddPartitionsToTxn with verifyOnly). Requests are encoded with the generated codecs.
 *
 * - One connection per remote broker, opened on first use at the address `resolve` gives then (so a
 *   broker that moved its listener is found again), pipelined: requests are written as they come, answers
 *   matched in order by correlation id, as a Kafka broker answers a connection's requests in order.
 * - Every request has a timeout. A request that times out, an answer that does not match the oldest
 *   request in flight, a frame that does not decode or is larger than `maxResponseBytes`, or a closed
 *   socket closes the connection and fails every request in flight on it with a `PeerRequestError`
 *   (retriable for the caller; Apache's NetworkClient also disconnects on a request timeout, since later
 *   answers on the connection can no longer be trusted to line up). The next request reconnects.
 * - Bounded: at most `maxInFlightPerBroker` requests in flight per connection; more are refused at once.
 * - Writes that the socket does not take whole are kept and written on `drain`, in order.
 */
import { DecodeError } from "../errors/errors.ts";
import { apiCodecsByKey } from "../protocol/generated/index.ts";
import { encodeRequestHeader } from "../protocol/generated/request-header.ts";
import { decodeResponseHeader } from "../protocol/generated/response-header.ts";
import { requestHeaderVersion, responseHeaderVersion } from "../protocol/header.ts";
import { Reader } from "../protocol/reader.ts";
import { Writer } from "../protocol/writer.ts";
import type { Logger } from "../platform/logger.ts";

export const PEER_REQUEST_TIMEOUT_MS_DEFAULT = 5_000;
export const PEER_CONNECT_TIMEOUT_MS_DEFAULT = 3_000;
export const PEER_IN_FLIGHT_MAX_DEFAULT = 1_000;
export const PEER_RESPONSE_BYTES_MAX_DEFAULT = 16 * 1024 * 1024;

export interface PeerAddress {
  host: string;
  port: number;
}

/** Why a request to a peer got no answer: retriable for the caller. */
export class PeerRequestError extends Error {
  constructor(
    readonly brokerId: number,
    readonly reason: "unknown-broker" | "connect-failed" | "timeout" | "disconnected" | "protocol" | "overloaded" | "closed",
    message: string,
  ) {
    super(`broker ${brokerId}: ${message}`);
    this.name = "PeerRequestError";
  }
}

export interface PeerClientOptions {
  /** The current address of a broker's Kafka listener, or undefined when none is known. */
  resolve(brokerId: number): PeerAddress | undefined;
  clientId: string;
  log: Logger;
  requestTimeoutMs?: number;
  connectTimeoutMs?: number;
  maxInFlightPerBroker?: number;
  maxResponseBytes?: number;
}

interface InFlight {
  correlationId: number;
  apiKey: number;
  apiVersion: number;
  resolve(body: unknown): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

type Socket = Awaited<ReturnType<typeof Bun.connect<undefined>>>;

class PeerConnection {
  private socket: Socket | undefined;
  private readonly inFlight: InFlight[] = [];
  private readonly unwritten: Uint8Array[] = [];
  private buffered = new Uint8Array(0);
  private nextCorrelationId = 1;
  closed = false;
  readonly ready: Promise<void>;

  constructor(
    readonly brokerId: number,
    address: PeerAddress,
    private readonly options: PeerClientOptions,
    private readonly onClosed: (connection: PeerConnection) => void,
  ) {
    this.ready = this.connect(address);
  }

  private async connect(address: PeerAddress): Promise<void> {
    const timeoutMs = this.options.connectTimeoutMs ?? PEER_CONNECT_TIMEOUT_MS_DEFAULT;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const connecting = Bun.connect<undefined>({
      hostname: address.host,
      port: address.port,
      socket: {
        data: (_socket, chunk) => this.onData(chunk),
        drain: () => this.flush(),
        close: () => this.fail("disconnected", "the connection closed"),
        error: (_socket, error) => this.fail("disconnected", `socket error: ${error.message}`),
      },
    });
    try {
      const socket = await Promise.race([
        connecting,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs))),
      ]);
      if (this.closed) {
        socket.end();
        return;
      }
      this.socket = socket;
      this.flush();
    } catch (error) {
      void connecting.then((socket) => socket.end()).catch(() => undefined);
      this.fail("connect-failed", `cannot connect to ${address.host}:${address.port}: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }

  get inFlightCount(): number {
    return this.inFlight.length;
  }

  request(apiKey: number, apiVersion: number, body: unknown): Promise<unknown> {
    const codecs = apiCodecsByKey.get(apiKey);
    if (codecs === undefined) return Promise.reject(new Error(`no codecs for API key ${apiKey}`));
    if (this.closed) return Promise.reject(new PeerRequestError(this.brokerId, "disconnected", "the connection closed"));
    if (this.inFlight.length >= (this.options.maxInFlightPerBroker ?? PEER_IN_FLIGHT_MAX_DEFAULT)) {
      return Promise.reject(new PeerRequestError(this.brokerId, "overloaded", `${this.inFlight.length} requests in flight already`));
    }
    const correlationId = this.nextCorrelationId;
    this.nextCorrelationId = (this.nextCorrelationId % 0x7fffffff) + 1;
    const w = new Writer();
    w.int32(0);
    encodeRequestHeader(w, requestHeaderVersion(apiKey, apiVersion), { requestApiKey: apiKey, requestApiVersion: apiVersion, correlationId, clientId: this.options.clientId });
    codecs.encodeRequest(w, apiVersion, body);
    const frame = w.finish();
    w.patchInt32(0, frame.length - 4);
    const timeoutMs = this.options.requestTimeoutMs ?? PEER_REQUEST_TIMEOUT_MS_DEFAULT;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => this.fail("timeout", `no answer to API key ${apiKey} within ${timeoutMs} ms`), timeoutMs);
      this.inFlight.push({ correlationId, apiKey, apiVersion, resolve, reject, timer });
      this.unwritten.push(frame);
      this.flush();
    });
  }

  private flush(): void {
    const socket = this.socket;
    if (socket === undefined || this.closed) return;
    while (this.unwritten.length > 0) {
      const head = this.unwritten[0]!;
      const written = socket.write(head);
      if (written < 0) return this.fail("disconnected", "the socket refused a write");
      if (written < head.length) {
        this.unwritten[0] = head.subarray(written);
        return; // the rest on drain
      }
      this.unwritten.shift();
    }
  }

  private onData(chunk: Uint8Array): void {
    if (this.closed) return;
    const joined = new Uint8Array(this.buffered.length + chunk.length);
    joined.set(this.buffered);
    joined.set(chunk, this.buffered.length);
    let offset = 0;
    const maxBytes = this.options.maxResponseBytes ?? PEER_RESPONSE_BYTES_MAX_DEFAULT;
    while (joined.length - offset >= 4) {
      const size = new DataView(joined.buffer, joined.byteOffset + offset, 4).getInt32(0);
      if (size < 4 || size > maxBytes) return this.fail("protocol", `an answer of ${size} bytes (at most ${maxBytes})`);
      if (joined.length - offset - 4 < size) break;
      const frame = joined.subarray(offset + 4, offset + 4 + size);
      offset += 4 + size;
      const waiter = this.inFlight[0];
      if (waiter === undefined) return this.fail("protocol", "an answer to no request");
      let body: unknown;
      try {
        const r = new Reader(frame);
        const header = decodeResponseHeader(r, responseHeaderVersion(waiter.apiKey, waiter.apiVersion));
        if (header.correlationId !== waiter.correlationId) {
          return this.fail("protocol", `answer with correlation id ${header.correlationId}, expected ${waiter.correlationId}`);
        }
        body = apiCodecsByKey.get(waiter.apiKey)!.decodeResponse(r, waiter.apiVersion);
      } catch (error) {
        return this.fail("protocol", `an answer that does not decode: ${error instanceof DecodeError || error instanceof Error ? error.message : String(error)}`);
      }
      this.inFlight.shift();
      clearTimeout(waiter.timer);
      waiter.resolve(body);
    }
    this.buffered = joined.slice(offset);
  }

  /** Closes the connection and fails everything in flight on it. */
  fail(reason: PeerRequestError["reason"], message: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.inFlight.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(new PeerRequestError(this.brokerId, reason, message));
    }
    this.unwritten.length = 0;
    try {
      this.socket?.end();
    } catch {
      // already closed
    }
    if (reason !== "closed") this.options.log.debug("inter-broker connection closed", { brokerId: this.brokerId, reason, message });
    this.onClosed(this);
  }
}

export class PeerClients {
  private readonly connections = new Map<number, PeerConnection>();
  private closed = false;

  constructor(private readonly options: PeerClientOptions) {}

  /** Sends one request to `brokerId` and resolves with its decoded answer; rejects with a PeerRequestError. */
  async request<T = unknown>(brokerId: number, apiKey: number, apiVersion: number, body: unknown): Promise<T> {
    if (this.closed) throw new PeerRequestError(brokerId, "closed", "the inter-broker client is closed");
    let connection = this.connections.get(brokerId);
    if (connection === undefined || connection.closed) {
      const address = this.options.resolve(brokerId);
      if (address === undefined) throw new PeerRequestError(brokerId, "unknown-broker", "no address is known for it");
      connection = new PeerConnection(brokerId, address, this.options, (c) => {
        if (this.connections.get(brokerId) === c) this.connections.delete(brokerId);
      });
      this.connections.set(brokerId, connection);
    }
    return (await connection.request(apiKey, apiVersion, body)) as T;
  }

  /** Open connections (tests, introspection). */
  get connectionCount(): number {
    return this.connections.size;
  }

  /** Closes every connection; requests in flight fail with reason "closed". */
  close(): void {
    this.closed = true;
    for (const connection of [...this.connections.values()]) connection.fail("closed", "the inter-broker client is closed");
    this.connections.clear();
  }
}
