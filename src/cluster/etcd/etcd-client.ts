/**
 * An etcd v3 client over etcd's JSON gateway with Bun's fetch (docs/architecture.md, "Ownership and
 * cluster mode"): no gRPC, no dependency. The request and answer shapes are in gateway-codec.ts; this file
 * is the transport.
 *
 * Endpoints are tried in turn, starting with the last one that answered. Which failures move on to the
 * next endpoint depends on whether the request may have been applied:
 * - a connection that was never made (refused, unknown host, unreachable) moves on for every request;
 * - a timeout, a connection dropped mid-request, or etcd answering UNAVAILABLE (no leader, its own
 *   timeout) moves on for reads and for requests that may be repeated harmlessly (a keep-alive, a lease
 *   grant whose lease would only expire unused), but not for a write: sent twice, a claim could fail
 *   against its own first copy. The write fails with `outcomeUnknown` and the caller reads to find out.
 * Every attempt has its own timeout. Answers are bounded in size.
 */
import { ConfigError, DecodeError } from "../../errors/errors.ts";
import {
  decodeDelete,
  decodeHeader,
  decodeGatewayError,
  decodeLeaseGrant,
  decodeLeaseKeepAlive,
  decodeLeaseTimeToLive,
  decodePut,
  decodeRange,
  decodeStreamMessage,
  decodeTxn,
  encodeDelete,
  encodePut,
  encodeRange,
  encodeTxn,
  int64ToJson,
  type DeleteResult,
  type LeaseGrantResult,
  type LeaseKeepAliveResult,
  type LeaseTimeToLiveResult,
  type PutResult,
  type RangeOptions,
  type RangeResult,
  type ResponseHeader,
  type TxnRequest,
  type TxnResult,
} from "./gateway-codec.ts";
import { EtcdServerError, EtcdUnavailableError, GRPC_DEADLINE_EXCEEDED, GRPC_NOT_FOUND, GRPC_UNAVAILABLE, type EndpointFailure } from "./etcd-errors.ts";

export const ETCD_REQUEST_TIMEOUT_MS_DEFAULT = 5_000;
/** etcd refuses requests over 1.5 MiB by default; its answers to bunka's ranges are far smaller than this. */
export const ETCD_RESPONSE_BYTES_MAX = 64 * 1024 * 1024;
/** More endpoints than any etcd cluster has members (etcd recommends 3 or 5). */
const ENDPOINTS_MAX = 16;

export interface EtcdClientOptions {
  /** `http://a:2379,http://b:2379`, or a list. */
  endpoints: string | readonly string[];
  /** Per attempt at one endpoint. */
  requestTimeoutMs?: number;
}

export interface CallOptions {
  /** Replaces the client's per-attempt timeout for this call. */
  timeoutMs?: number;
}

/** Whether a request that reached an endpoint but got no answer may be sent to the next one. */
type Repeat = "safe" | "write";

/** Parses and checks an endpoint list; a bad one is a ConfigError naming it. */
export function parseEndpoints(spec: string | readonly string[]): string[] {
  const items = (typeof spec === "string" ? spec.split(",") : [...spec]).map((item) => item.trim()).filter((item) => item !== "");
  if (items.length === 0) throw new ConfigError("etcd endpoints: none given (expected e.g. http://127.0.0.1:2379)");
  if (items.length > ENDPOINTS_MAX) throw new ConfigError(`etcd endpoints: ${items.length} given, at most ${ENDPOINTS_MAX}`);
  return items.map((item) => {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new ConfigError(`etcd endpoint ${JSON.stringify(item)} is not a URL (expected e.g. http://127.0.0.1:2379)`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new ConfigError(`etcd endpoint ${item}: only http and https are supported`);
    // The gateway would ignore them, and the endpoints are shown (logs, /v1/cluster): never echo a password.
    if (url.username !== "" || url.password !== "") {
      throw new ConfigError(`etcd endpoint ${url.protocol}//${url.host}: a user name or password in the URL is not supported (bunka does not use etcd authentication)`);
    }
    if (url.pathname !== "/" || url.search !== "" || url.hash !== "") throw new ConfigError(`etcd endpoint ${item}: give the scheme, host and port only`);
    return `${url.protocol}//${url.host}`;
  });
}

/** Connection failures where the request cannot have reached etcd. */
const NEVER_SENT_CODES = new Set(["ECONNREFUSED", "ConnectionRefused", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "FailedToOpenSocket"]);

function failureOf(error: unknown): { sent: boolean; reason: string } {
  const named = error as { name?: unknown; code?: unknown; message?: unknown };
  if (named?.name === "TimeoutError") return { sent: true, reason: "timed out" };
  const code = typeof named?.code === "string" ? named.code : undefined;
  const message = typeof named?.message === "string" ? named.message : String(error);
  if (code !== undefined && NEVER_SENT_CODES.has(code)) return { sent: false, reason: code };
  return { sent: true, reason: code ?? message };
}

/** Reads a body up to `limitBytes`; past it the answer is refused as malformed. */
async function readBounded(response: Response, limitBytes: number): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > limitBytes) throw new DecodeError(`etcd answer of ${declared} bytes is over the limit of ${limitBytes}`);
  if (response.body === null) return "";
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body) {
    total += chunk.byteLength;
    if (total > limitBytes) throw new DecodeError(`etcd answer is over the limit of ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total).toString("utf8");
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new DecodeError(`etcd answer to ${what} is not JSON: ${text.slice(0, 200)}`);
  }
}

export class EtcdClient {
  readonly endpoints: readonly string[];
  private readonly requestTimeoutMs: number;
  /** The endpoint that answered last; the next request starts there. */
  private preferred = 0;
  private readonly closing = new AbortController();

  constructor(options: EtcdClientOptions) {
    this.endpoints = parseEndpoints(options.endpoints);
    this.requestTimeoutMs = options.requestTimeoutMs ?? ETCD_REQUEST_TIMEOUT_MS_DEFAULT;
    if (!(this.requestTimeoutMs > 0)) throw new ConfigError(`etcd request timeout must be positive, got ${this.requestTimeoutMs} ms`);
  }

  /** The endpoint the next request goes to first: the one that answered last. */
  get activeEndpoint(): string {
    return this.endpoints[this.preferred]!;
  }

  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  /** Aborts every request and stream in flight; later calls fail at once. */
  close(): void {
    this.closing.abort();
  }

  /** Aborted when the client is closed, for the streams built on it. */
  get closeSignal(): AbortSignal {
    return this.closing.signal;
  }

  async range(key: string, options?: RangeOptions, call?: CallOptions): Promise<RangeResult> {
    return decodeRange(await this.unary("range", "/v3/kv/range", encodeRange(key, options), "safe", call));
  }

  async put(key: string, value: string, options?: { lease?: bigint; prevKv?: boolean }, call?: CallOptions): Promise<PutResult> {
    return decodePut(await this.unary("put", "/v3/kv/put", encodePut(key, value, options?.lease, options?.prevKv), "write", call));
  }

  async deleteRange(key: string, options?: { prefix?: boolean; prevKv?: boolean }, call?: CallOptions): Promise<DeleteResult> {
    return decodeDelete(await this.unary("delete", "/v3/kv/deleterange", encodeDelete(key, options?.prefix, options?.prevKv), "write", call));
  }

  /** A txn whose compares fail is an answer (`succeeded: false`), not an error. */
  async txn(txn: TxnRequest, call?: CallOptions): Promise<TxnResult> {
    return decodeTxn(await this.unary("txn", "/v3/kv/txn", encodeTxn(txn), "write", call));
  }

  /** Compacts the key-value history up to `revision` (tests, operators: etcd compacts by itself too). */
  async compact(revision: bigint, call?: CallOptions): Promise<ResponseHeader> {
    const answer = (await this.unary("compact", "/v3/kv/compaction", { revision: int64ToJson(revision) }, "safe", call)) as { header?: unknown } | null;
    return decodeHeader(answer?.header);
  }

  /** A lease granted but never used expires by itself, so a repeated grant only leaks a lease for one TTL. */
  async leaseGrant(ttlSeconds: number, call?: CallOptions): Promise<LeaseGrantResult> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) throw new RangeError(`lease TTL must be a positive whole number of seconds, got ${ttlSeconds}`);
    return decodeLeaseGrant(await this.unary("lease grant", "/v3/lease/grant", { TTL: int64ToJson(BigInt(ttlSeconds)) }, "safe", call));
  }

  /**
   * One keep-alive: the lease's TTL starts again when etcd receives it. A lease that is gone is answered
   * `alive: false`. The endpoint is a stream; one request body is one keep-alive and one answer.
   */
  async leaseKeepAlive(id: bigint, call?: CallOptions): Promise<LeaseKeepAliveResult> {
    const body = await this.unary("lease keep-alive", "/v3/lease/keepalive", { ID: int64ToJson(id) }, "safe", call);
    const message = decodeStreamMessage(body);
    if (message.kind === "error") throw new EtcdServerError("lease keep-alive", this.endpoints[this.preferred]!, message.error.code, message.error.message);
    return decodeLeaseKeepAlive(message.result);
  }

  /** Revokes a lease, deleting every key attached to it. Resolves false when the lease was already gone. */
  async leaseRevoke(id: bigint, call?: CallOptions): Promise<boolean> {
    try {
      await this.unary("lease revoke", "/v3/lease/revoke", { ID: int64ToJson(id) }, "safe", call);
      return true;
    } catch (error) {
      if (error instanceof EtcdServerError && error.code === GRPC_NOT_FOUND) return false;
      throw error;
    }
  }

  async leaseTimeToLive(id: bigint, options?: { keys?: boolean }, call?: CallOptions): Promise<LeaseTimeToLiveResult> {
    const body: Record<string, unknown> = { ID: int64ToJson(id) };
    if (options?.keys) body.keys = true;
    return decodeLeaseTimeToLive(await this.unary("lease time-to-live", "/v3/lease/timetolive", body, "safe", call));
  }

  /**
   * Opens a streaming POST (the watch), trying the endpoints in turn: creating a watch is always safe to
   * repeat. Resolves with the endpoint and the response once etcd accepted it; `signal` ends the stream.
   */
  async openStream(operation: string, path: string, body: unknown, signal: AbortSignal): Promise<{ endpoint: string; response: Response }> {
    const failures: EndpointFailure[] = [];
    const count = this.endpoints.length;
    // Read once: another request answered meanwhile moves `preferred`, and this one must still try each endpoint once.
    const first = this.preferred;
    for (let attempt = 0; attempt < count; attempt++) {
      const index = (first + attempt) % count;
      const endpoint = this.endpoints[index]!;
      this.throwIfClosed(operation);
      // The deadline is for the answer's headers; the stream itself lives as long as the caller wants.
      const connecting = new AbortController();
      const deadline = setTimeout(() => connecting.abort(new DOMException("timed out", "TimeoutError")), this.requestTimeoutMs);
      let response: Response;
      try {
        const stopped = AbortSignal.any([signal, this.closing.signal, connecting.signal]);
        response = await fetch(endpoint + path, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" }, signal: stopped });
      } catch (error) {
        this.throwIfClosed(operation);
        if (signal.aborted) throw error;
        failures.push({ endpoint, reason: failureOf(error).reason });
        continue;
      } finally {
        clearTimeout(deadline);
      }
      if (!response.ok) {
        const text = await readBounded(response, ETCD_RESPONSE_BYTES_MAX).catch(() => "");
        failures.push({ endpoint, reason: `HTTP ${response.status} ${text.slice(0, 200)}` });
        continue;
      }
      this.preferred = index;
      return { endpoint, response };
    }
    throw new EtcdUnavailableError(operation, failures, false);
  }

  private throwIfClosed(operation: string): void {
    if (this.closing.signal.aborted) throw new EtcdUnavailableError(operation, [{ endpoint: "(all)", reason: "the client is closed" }], false);
  }

  private async unary(operation: string, path: string, body: unknown, repeat: Repeat, call: CallOptions | undefined): Promise<unknown> {
    const failures: EndpointFailure[] = [];
    const timeoutMs = call?.timeoutMs ?? this.requestTimeoutMs;
    const payload = JSON.stringify(body);
    const count = this.endpoints.length;
    // Read once, as in openStream.
    const first = this.preferred;
    for (let attempt = 0; attempt < count; attempt++) {
      const index = (first + attempt) % count;
      const endpoint = this.endpoints[index]!;
      this.throwIfClosed(operation);
      const signal = AbortSignal.any([this.closing.signal, AbortSignal.timeout(timeoutMs)]);
      let status: number;
      let text: string;
      try {
        const response = await fetch(endpoint + path, { method: "POST", body: payload, headers: { "content-type": "application/json" }, signal });
        status = response.status;
        text = await readBounded(response, ETCD_RESPONSE_BYTES_MAX);
      } catch (error) {
        this.throwIfClosed(operation);
        if (error instanceof DecodeError) throw error;
        const failure = failureOf(error);
        failures.push({ endpoint, reason: failure.reason });
        if (failure.sent && repeat === "write") throw new EtcdUnavailableError(operation, failures, true);
        continue;
      }
      const json = parseJson(text, operation);
      if (status < 200 || status > 299) {
        let error: { code: number; message: string };
        try {
          error = decodeGatewayError(json);
        } catch {
          throw new EtcdServerError(operation, endpoint, -1, `HTTP ${status}: ${text.slice(0, 200)}`);
        }
        if (error.code === GRPC_UNAVAILABLE || error.code === GRPC_DEADLINE_EXCEEDED) {
          failures.push({ endpoint, reason: error.message });
          if (repeat === "write") throw new EtcdUnavailableError(operation, failures, true);
          continue;
        }
        throw new EtcdServerError(operation, endpoint, error.code, error.message);
      }
      this.preferred = index;
      return json;
    }
    throw new EtcdUnavailableError(operation, failures, false);
  }
}
