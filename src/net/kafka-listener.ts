/**
 * The Kafka TCP listener: Bun.listen plus everything the wire needs below the protocol codecs.
 *
 * - Framing: every request is an int32 size followed by that many bytes. Incoming chunks are kept as a list
 *   of views and a frame is cut out only once all of its bytes have arrived: a frame inside one chunk is a
 *   zero-copy view, a frame spread over several chunks is copied once into a buffer of exactly its size.
 *   Nothing of the size is allocated before the bytes exist, so a hostile size prefix costs nothing.
 * - A size below 0 or above `maxRequestBytes` (socket.request.max.bytes) closes the connection at once,
 *   dropping whatever was in flight on it, as Apache Kafka does with an InvalidReceiveException.
 * - Pipelining: frames are dispatched as they arrive, concurrently, but responses are written strictly in
 *   request order (a per-connection queue of pending entries, flushed from its head).
 * - A dispatch that throws (a DecodeError, say) dooms its connection: the responses before it are written,
 *   then the connection is ended. Nothing after it is answered.
 * - Backpressure: Bun's `socket.write` is unbuffered — it returns how many bytes the kernel took and keeps
 *   nothing. The rest goes into a per-connection output queue that `drain` empties. While that queue is not
 *   empty, or while `maxInFlightPerConnection` requests are pending, the connection reads nothing
 *   (`socket.pause()`, resumed with `socket.resume()`) and dispatches nothing.
 * - Response bytes held: that alone bounds requests, not bytes (a hundred pipelined Fetches of 50 MiB each
 *   are answered and held). So every connection counts the response bytes it holds: its queued output, the
 *   finished responses waiting for their turn, and what requests being answered have reserved through
 *   their `ResponseBudget` (Fetch reserves before it reads). A connection holding
 *   `maxHeldResponseBytesPerConnection` or more dispatches nothing and reads nothing until it holds less.
 *   Across connections, while the total passes `maxHeldResponseBytes`, only a connection holding less than
 *   an equal share of that bound (the bound divided by the connections holding anything) may dispatch: the
 *   connections holding the most stop first, and one holding nothing is always served, so a client that
 *   reads its socket is never starved by one that does not. The budget grants a request room up to the
 *   same limits; a request on a connection holding nothing else may go past its grant by one batch
 *   (`mayExceed`), Kafka's rule that a fetch returns at least one batch so that a consumer progresses.
 *   The broker-wide bound is therefore soft: it can be passed by such first batches and by equal shares
 *   granted while it is passed. Bytes are counted as the protocol sends them (size prefix included), not as
 *   the buffers that hold them.
 * - Idle connections (no byte in either direction for `idleTimeoutMs`, and no request being worked on) are
 *   closed, like Apache's connections.max.idle.ms.
 * - Each connection has its own state; whatever one connection does (garbage, oversize frames, never reading)
 *   only ever closes that connection.
 * - Listeners (docs/architecture.md, "Listeners and TLS"): one KafkaListener binds every configured
 *   listener (PLAINTEXT, SSL, SASL_*, each its own port), and their connections share the bounds above.
 *   Every connection carries a ConnectionSecurity for its life: its listener's name and security protocol,
 *   the principal (ANONYMOUS, or from a verified client certificate on SSL) and whether it is
 *   authenticated (SASL_* connections start unauthenticated; SASL itself is the dispatcher's). TLS is
 *   Bun's own (Bun.listen's `tls`): the handshake must finish within `tlsHandshakeTimeoutMs` or the
 *   connection is closed; a failed handshake (a plaintext client, an unknown CA, a missing client
 *   certificate) closes that connection only, with one rate-limited line. New certificates (tls-material.ts)
 *   re-bind the listener's port: new connections get them, open ones keep theirs.
 *
 * Response framing: dispatch returns the response WITHOUT its size prefix. To write one response with one
 * `write` call, the listener needs the 4 prefix bytes in front of the body:
 * - a dispatcher that encodes into a buffer with 4 reserved leading bytes returns `withReservedSizePrefix(buf)`
 *   (a view that skips them and is marked as such); the listener fills in the size in place: no copy;
 * - any other response up to `COPY_THRESHOLD_BYTES` is copied behind a fresh prefix (one small copy, one write);
 * - a larger unmarked response goes out as two writes (prefix, then body) rather than copying megabytes.
 * - a gathered frame (protocol/gathered-frame.ts) goes out piece after piece, its prefix already in the first
 *   piece; its release is called once the kernel took the last one.
 * Either way, the response bytes belong to the listener once returned: the dispatcher must not reuse them.
 */
import { ANONYMOUS_PRINCIPAL, type ConnectionSecurity, type SecurityProtocol, usesSasl, usesTls } from "../domain/security/connection-security.ts";
import { DecodeError, FatalError } from "../errors/errors.ts";
import type { TlsMaterialSource } from "./tls-material.ts";
import { principalOfCertificate } from "./tls-principal.ts";
import { LogRateLimit } from "../platform/log-rate-limit.ts";
import { type GatheredFrame, isGatheredFrame } from "../protocol/gathered-frame.ts";
import { listenError } from "../errors/listen-errors.ts";
import type { Logger } from "../platform/logger.ts";

/** Which connection: what a connection error is reported with. */
export interface ConnectionIdentity {
  /** Unique per listener, increasing. */
  readonly id: number;
  readonly remoteAddress: string;
  /** Closes the connection now: in-flight requests on it are dropped unanswered. */
  close(): void;
}

/**
 * What the dispatcher learns about the connection a frame came from. Each request gets its own object
 * (same id, address and close) carrying that request's budget.
 */
export interface ConnectionInfo extends ConnectionIdentity {
  /** Room for this request's response in the connection's and the broker's bounds (see the header). */
  readonly responseBudget: ResponseBudget;
  /** The connection's listener, protocol and principal: one object for the connection's life. */
  readonly security: ConnectionSecurity;
}

/**
 * One request's share of the response-byte bounds, for a handler that builds a large response (Fetch):
 * reserve before reading, adjust to what was read. What a request reserved is released when its response
 * is handed over (the response's own size is counted from then on) or when the connection closes.
 */
export interface ResponseBudget {
  /** Reserves up to `wantedBytes` for the response being built; returns the bytes granted (0 when full). */
  reserve(wantedBytes: number): number;
  /**
   * Changes this request's reservation by `deltaBytes` once the real size is known: negative gives unused
   * room back (never below 0), positive records bytes read past the grant (a first batch that may exceed).
   */
  adjust(deltaBytes: number): void;
  /**
   * True when nothing else on the connection holds response bytes: the request may then go past its grant
   * by one batch, so that a consumer always progresses.
   */
  mayExceed(): boolean;
}

/** A response without its size prefix, a gathered frame (protocol/gathered-frame.ts), or none. */
export type DispatchResult = Uint8Array | GatheredFrame | null;

/** One listener to bind (broker/listener-config.ts resolves them from the settings). */
export interface ListenerEndpoint {
  /** The listener's name as in `listeners` (PLAINTEXT, SSL, CLIENT, ...). */
  name: string;
  securityProtocol: SecurityProtocol;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** SSL and SASL_SSL: the certificate and how clients are checked, reloaded when its files change. */
  tls?: TlsMaterialSource;
}

export interface BoundEndpoint {
  name: string;
  securityProtocol: SecurityProtocol;
  host: string;
  port: number;
}

export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface KafkaListenerOptions {
  /** The one PLAINTEXT listener (named PLAINTEXT) when `endpoints` is absent. */
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** The listeners to bind; they share the connection and response-byte bounds. Absent: host and port. */
  endpoints?: ListenerEndpoint[];
  /** A TLS connection whose handshake has not finished after this long is closed. Default 10 s. */
  tlsHandshakeTimeoutMs?: number;
  /** socket.request.max.bytes: a larger (or negative) size prefix closes the connection. */
  maxRequestBytes: number;
  /** connections.max.idle.ms; 0 or less never closes an idle connection. */
  idleTimeoutMs: number;
  /**
   * Handles one request. `frame` is the request without its size prefix; it stays valid (and unchanged)
   * until the returned promise settles. The view may share its buffer with neighbouring frames, so bytes
   * kept beyond the request (a record batch held in memory) should be copied. Returns the response
   * without its size prefix (see `withReservedSizePrefix` for the zero-copy form), or null for no response
   * (Produce with acks=0); the listener owns the returned bytes from then on. Throwing (or rejecting)
   * closes the connection after the responses to earlier requests are written.
   */
  dispatch: (frame: Uint8Array, conn: ConnectionInfo) => Promise<DispatchResult> | DispatchResult;
  /**
   * Told about every dispatch that threw and every socket error (the listener logs them itself, see
   * `connectionErrorLogLimit`). The connection is closed either way; main.ts uses this to turn a
   * FatalError into a process exit.
   */
  onConnectionError?: (error: unknown, conn: ConnectionIdentity) => void;
  /**
   * How many lines connection errors (malformed frames, oversized requests, socket errors) may write to
   * the log across the listener: at most `lines` per `perMs`, the rest counted into the next line. One
   * connection writes one such line at most. Default 10 per 10 s.
   */
  connectionErrorLogLimit?: { lines: number; perMs: number };
  /** The clock of that limit. Default performance.now. */
  monotonicMs?: () => number;
  log: Logger;
  /** New connections beyond this many are closed at once. Unbounded when absent. */
  maxConnections?: number;
  /** Requests dispatched but not yet answered on one connection before it stops reading. Default 100. */
  maxInFlightPerConnection?: number;
  /**
   * Response bytes one connection may hold (queued output, finished responses waiting for their turn,
   * reservations) before it stops reading and dispatching. Default 100 MiB; 0 or less, or Infinity: no bound.
   */
  maxHeldResponseBytesPerConnection?: number;
  /** The same across all connections, enforced by equal shares (see the header). Default 512 MiB; 0 or less: no bound. */
  maxHeldResponseBytes?: number;
  /** How long close() waits for in-flight requests and unsent responses before cutting connections. Default 10 s. */
  closeTimeoutMs?: number;
}

export interface KafkaListener {
  /** The first listener's bound address (the real port when 0 was asked for). */
  readonly host: string;
  readonly port: number;
  /** Every listener as bound, in the order configured. */
  endpoints(): BoundEndpoint[];
  /**
   * Stops accepting, stops reading, waits for in-flight dispatches to finish and their responses to be
   * flushed, then closes every connection. Bounded by closeTimeoutMs, after which connections are cut.
   */
  close(): Promise<void>;
  connectionCount(): number;
  /** A snapshot per open connection, for metrics and introspection (and for tests to observe backpressure). */
  connectionStats(): ConnectionStats[];
  /** Response bytes all connections hold (the sum of their `heldResponseBytes`). */
  heldResponseBytes(): number;
  /** Connections not reading, by why (a connection closing is not counted). */
  pausedConnections(): Record<PauseReason, number>;
}

/**
 * Why a connection reads nothing: its output is stuck in the kernel's buffer (`output`), it has
 * `maxInFlightPerConnection` requests pending (`in-flight`), it holds its bound of response bytes
 * (`connection-bytes`), or the broker-wide bound is passed and it holds at least its share (`broker-bytes`).
 */
export type PauseReason = "output" | "in-flight" | "connection-bytes" | "broker-bytes";
export const PAUSE_REASONS: readonly PauseReason[] = ["output", "in-flight", "connection-bytes", "broker-bytes"];

export interface ConnectionStats {
  id: number;
  remoteAddress: string;
  listenerName: string;
  securityProtocol: SecurityProtocol;
  principal: string;
  /** A TLS connection still in its handshake. */
  handshaking: boolean;
  /** Requests dispatched and not yet answered (including finished ones waiting for an earlier one). */
  inFlight: number;
  /** Response bytes the kernel has not taken yet. */
  queuedOutputBytes: number;
  /** Queued output, plus finished responses waiting for their turn, plus reservations of requests being answered. */
  heldResponseBytes: number;
  /** True while the connection reads nothing (backpressure, the in-flight bound, or shutting down). */
  readingPaused: boolean;
  /** Why, while it is paused for backpressure; undefined when reading or closing. */
  pauseReason: PauseReason | undefined;
}

export const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION = 100;
export const DEFAULT_MAX_HELD_RESPONSE_BYTES_PER_CONNECTION = 100 * 1024 * 1024;
export const DEFAULT_MAX_HELD_RESPONSE_BYTES = 512 * 1024 * 1024;
export const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
export const DEFAULT_CONNECTION_ERROR_LOG_LIMIT = { lines: 10, perMs: 10_000 };
/** Responses up to this size are copied behind their prefix so that they leave in one write. */
export const COPY_THRESHOLD_BYTES = 64 * 1024;
export const SIZE_PREFIX_BYTES = 4;

/**
 * A registered symbol, so that the protocol layer (which must not import net/) can mark its own frames the
 * same way: `Symbol.for("bunka.reservedSizePrefix")` names the same symbol everywhere.
 */
const reservedPrefix = Symbol.for("bunka.reservedSizePrefix");
/**
 * The same for a frame encoded into pooled memory (protocol/frame-pool.ts): the function that gives the
 * memory back, called once the kernel has taken the frame's every byte, and only then.
 */
const releaseAfterWrite = Symbol.for("bunka.releaseFrameAfterWrite");
type ReleaseAfterWrite = () => void;
type MarkedView = Uint8Array & { [reservedPrefix]?: true; [releaseAfterWrite]?: ReleaseAfterWrite };

/**
 * For a dispatcher that encoded its response into `framed` starting at offset 4 (the 4 bytes before the
 * body are reserved for the size prefix): returns the body view, marked so that the listener writes the
 * prefix into the reserved bytes and sends prefix and body in one write without copying.
 */
export function withReservedSizePrefix(framed: Uint8Array): Uint8Array {
  if (framed.byteLength < SIZE_PREFIX_BYTES) throw new RangeError("framed response shorter than its size prefix");
  const body = framed.subarray(SIZE_PREFIX_BYTES) as MarkedView;
  body[reservedPrefix] = true;
  return body;
}

/**
 * The bytes received on one connection and not yet cut into frames, as a list of chunk views. Bun hands the
 * `data` callback a freshly allocated buffer every time, so keeping views of chunks is safe and free.
 */
export class FrameAssembler {
  private chunks: Uint8Array[] = [];
  /** Index of the first live chunk; consumed chunks before it are dropped in batches. */
  private head = 0;
  private bufferedBytes = 0;

  get buffered(): number {
    return this.bufferedBytes;
  }

  push(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    this.chunks.push(chunk);
    this.bufferedBytes += chunk.byteLength;
  }

  /** The int32 size prefix at the front, or undefined when fewer than 4 bytes are buffered. */
  peekSize(): number | undefined {
    if (this.bufferedBytes < SIZE_PREFIX_BYTES) return undefined;
    const first = this.chunks[this.head]!;
    if (first.byteLength >= SIZE_PREFIX_BYTES) {
      return ((first[0]! << 24) | (first[1]! << 16) | (first[2]! << 8) | first[3]!) | 0;
    }
    // The prefix itself straddles chunks (byte-by-byte senders): gather 4 bytes without consuming.
    let value = 0;
    let got = 0;
    for (let i = this.head; got < SIZE_PREFIX_BYTES; i++) {
      const chunk = this.chunks[i]!;
      for (let j = 0; j < chunk.byteLength && got < SIZE_PREFIX_BYTES; j++, got++) value = (value << 8) | chunk[j]!;
    }
    return value | 0;
  }

  /** Removes and returns the next `n` bytes; a view when they lie in one chunk, else one copy. */
  take(n: number): Uint8Array {
    if (n > this.bufferedBytes) throw new RangeError(`take(${n}) with ${this.bufferedBytes} bytes buffered`);
    this.bufferedBytes -= n;
    if (n === 0) return new Uint8Array(0);
    const first = this.chunks[this.head]!;
    if (first.byteLength >= n) {
      const out = first.subarray(0, n);
      this.consumeHead(first, n);
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[this.head]!;
      const part = Math.min(chunk.byteLength, n - filled);
      out.set(part === chunk.byteLength ? chunk : chunk.subarray(0, part), filled);
      filled += part;
      this.consumeHead(chunk, part);
    }
    return out;
  }

  private consumeHead(chunk: Uint8Array, n: number): void {
    if (n < chunk.byteLength) {
      this.chunks[this.head] = chunk.subarray(n);
      return;
    }
    this.head++;
    if (this.head === this.chunks.length) {
      this.chunks = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.chunks.length) {
      // Drop consumed slots in one splice now and then, so that a frame delivered byte by byte stays linear.
      this.chunks.splice(0, this.head);
      this.head = 0;
    }
  }
}

type EntryState = "pending" | "done" | "failed";
interface PendingEntry {
  state: EntryState;
  response: DispatchResult;
  /** Bytes this entry adds to its connection's held bytes: its reservation while pending, then its response. */
  heldBytes: number;
  /** Taken off the queue unanswered (the connection is doomed or closed): it no longer counts. */
  dropped: boolean;
}

interface ConnState {
  readonly info: ConnectionIdentity;
  readonly security: ConnectionSecurity;
  /** TLS: the handshake has not finished; `handshakeTimer` closes the connection if it does not in time. */
  handshaking: boolean;
  handshakeTimer: ReturnType<typeof setTimeout> | undefined;
  readonly socket: Bun.Socket<ConnRef>;
  readonly frames: FrameAssembler;
  /** Dispatched requests in request order; answered from the head only. */
  readonly pending: PendingEntry[];
  /** Bytes that the kernel did not take yet, in order; the first may be a partly written view. */
  readonly output: Uint8Array[];
  /** For each entry of `output`, what to call once the kernel has taken all of it (pooled frames). */
  readonly outputReleases: (ReleaseAfterWrite | undefined)[];
  outputBytes: number;
  /** outputBytes plus the heldBytes of the pending entries. */
  heldBytes: number;
  paused: boolean;
  pauseReason: PauseReason | undefined;
  /** No more requests are read or dispatched (a dispatch failed, or the listener is closing). */
  stopReading: boolean;
  /** End the socket once `output` is empty. */
  endWhenFlushed: boolean;
  closed: boolean;
  /** This connection already wrote its one line about an error. */
  errorLogged: boolean;
  pumping: boolean;
  lastActivityMs: number;
  idleTimer: ReturnType<typeof setTimeout> | undefined;
  readonly closedPromise: Promise<void>;
  resolveClosed: () => void;
}

/** Socket data: the state is attached in `open`, before any other callback can run. */
interface ConnRef {
  conn: ConnState | undefined;
}

export async function startKafkaListener(opts: KafkaListenerOptions): Promise<KafkaListener> {
  const log = opts.log;
  const maxInFlight = opts.maxInFlightPerConnection ?? DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION;
  const closeTimeoutMs = opts.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
  const maxConnections = opts.maxConnections ?? Number.POSITIVE_INFINITY;
  const idleTimeoutMs = opts.idleTimeoutMs;
  const onConnectionError = opts.onConnectionError;
  const logLimit = opts.connectionErrorLogLimit ?? DEFAULT_CONNECTION_ERROR_LOG_LIMIT;
  const connectionErrorLines = new LogRateLimit(logLimit.lines, logLimit.perMs, opts.monotonicMs ?? (() => performance.now()));
  if (!(maxInFlight >= 1)) throw new RangeError("maxInFlightPerConnection must be at least 1");
  const maxConnBytes = byteBound(opts.maxHeldResponseBytesPerConnection, DEFAULT_MAX_HELD_RESPONSE_BYTES_PER_CONNECTION);
  const maxBrokerBytes = byteBound(opts.maxHeldResponseBytes, DEFAULT_MAX_HELD_RESPONSE_BYTES);

  /**
   * One line per connection at most, and few per listener (`connectionErrorLines`): a client looping on a
   * malformed frame must not fill the disk with the log. Malformed input is the client's mistake, so its
   * line has the message and no stack; anything else is ours and keeps its stack.
   */
  const logConnectionError = (conn: ConnState, message: string, fields: Record<string, unknown>) => {
    if (conn.errorLogged) return;
    conn.errorLogged = true;
    const dropped = connectionErrorLines.admit();
    if (dropped === undefined) return;
    log.warn(message, { conn: conn.info.id, remote: conn.info.remoteAddress, ...fields, ...(dropped > 0 ? { linesDropped: dropped } : {}) });
  };

  /** The callback must not break the listener: what it throws is logged, and the connection still closes. */
  const report = (error: unknown, conn: ConnState) => {
    logConnectionError(conn, error instanceof DecodeError ? "closing connection after a malformed request" : "closing connection after a failed request", {
      error: describe(error),
      ...(error instanceof DecodeError || !(error instanceof Error) || error.stack === undefined ? {} : { stack: error.stack }),
    });
    if (onConnectionError === undefined) return;
    try {
      onConnectionError(error, conn.info);
    } catch (callbackError) {
      log.error("onConnectionError threw", { conn: conn.info.id, error: describe(callbackError) });
    }
  };

  const connections = new Set<ConnState>();
  let nextId = 1;
  let closing = false;
  const now = () => performance.now();

  // ---- response bytes held --------------------------------------------------------------------------------

  let heldTotal = 0;
  /** Connections holding more than 0 bytes: the equal share is the broker-wide bound divided by these. */
  let holdingConnections = 0;
  /** Connections paused by the broker-wide bound; looked at again when bytes are released. */
  const waitingForShare = new Set<ConnState>();
  let wakeScheduled = false;

  function addHeld(conn: ConnState, deltaBytes: number): void {
    if (deltaBytes === 0) return;
    const before = conn.heldBytes;
    conn.heldBytes = before + deltaBytes;
    heldTotal += deltaBytes;
    if (before === 0) holdingConnections++;
    else if (conn.heldBytes === 0) holdingConnections--;
    // Only a total back under the bound, or one connection fewer sharing it, can admit a waiting connection.
    if (deltaBytes < 0 && waitingForShare.size > 0 && (heldTotal < maxBrokerBytes || conn.heldBytes === 0)) scheduleWake();
  }

  /** The broker-wide bound divided by the connections holding bytes, this one counted. */
  function equalShare(conn: ConnState): number {
    return maxBrokerBytes / (holdingConnections + (conn.heldBytes > 0 ? 0 : 1));
  }

  function admittedByBroker(conn: ConnState): boolean {
    return heldTotal < maxBrokerBytes || conn.heldBytes < equalShare(conn);
  }

  /** Bytes a request on `conn` may still reserve: within the connection's bound and the broker's (or the connection's equal share of it). */
  function roomFor(conn: ConnState): number {
    const brokerRoom = Math.max(maxBrokerBytes - heldTotal, equalShare(conn) - conn.heldBytes);
    return Math.max(0, Math.min(maxConnBytes - conn.heldBytes, brokerRoom));
  }

  function scheduleWake(): void {
    if (wakeScheduled) return;
    wakeScheduled = true;
    queueMicrotask(() => {
      wakeScheduled = false;
      for (const conn of [...waitingForShare]) {
        if (conn.closed || !admittedByBroker(conn)) continue;
        waitingForShare.delete(conn);
        pump(conn);
      }
    });
  }

  /** Whether a request's budget still counts: it is being answered on a live connection. */
  const budgetLive = (conn: ConnState, entry: PendingEntry) => !conn.closed && !entry.dropped && entry.state === "pending";

  /** One per request: methods on the prototype, so that a request costs two fields, not three closures. */
  class RequestBudget implements ResponseBudget {
    constructor(
      private readonly conn: ConnState,
      private readonly entry: PendingEntry,
    ) {}

    reserve(wantedBytes: number): number {
      const { conn, entry } = this;
      if (!budgetLive(conn, entry) || !(wantedBytes > 0)) return 0;
      const granted = Math.floor(Math.min(wantedBytes, roomFor(conn)));
      entry.heldBytes += granted;
      addHeld(conn, granted);
      return granted;
    }

    adjust(deltaBytes: number): void {
      const { conn, entry } = this;
      if (!budgetLive(conn, entry) || !Number.isFinite(deltaBytes)) return;
      const change = Math.max(Math.trunc(deltaBytes), -entry.heldBytes);
      entry.heldBytes += change;
      addHeld(conn, change);
    }

    mayExceed(): boolean {
      return budgetLive(this.conn, this.entry) && this.conn.heldBytes === this.entry.heldBytes;
    }
  }

  /** Takes every entry off the queue unanswered, releasing what they held. */
  function dropPending(conn: ConnState): void {
    for (const entry of conn.pending) {
      entry.dropped = true;
      addHeld(conn, -entry.heldBytes);
      entry.heldBytes = 0;
    }
    conn.pending.length = 0;
  }

  function dropOutput(conn: ConnState): void {
    // Unwritten pooled frames are not given back: they are left to the garbage collector.
    conn.output.length = 0;
    conn.outputReleases.length = 0;
    addHeld(conn, -conn.outputBytes);
    conn.outputBytes = 0;
  }

  // ---- output -------------------------------------------------------------------------------------------

  function writeOut(conn: ConnState, bytes: Uint8Array, release?: ReleaseAfterWrite): void {
    if (conn.closed || bytes.byteLength === 0) return;
    if (conn.output.length > 0) {
      queueOutput(conn, bytes, release);
      return;
    }
    const written = conn.socket.write(bytes);
    if (written < 0) return; // The socket is already closed; its close callback cleans up.
    if (written > 0) conn.lastActivityMs = now();
    if (written < bytes.byteLength) queueOutput(conn, bytes.subarray(written), release);
    else release?.();
  }

  function queueOutput(conn: ConnState, bytes: Uint8Array, release: ReleaseAfterWrite | undefined): void {
    conn.output.push(bytes);
    conn.outputReleases.push(release);
    conn.outputBytes += bytes.byteLength;
    addHeld(conn, bytes.byteLength);
  }

  /** Hands queued output to the kernel until it refuses more. Called from `drain`. */
  function flushOutput(conn: ConnState): void {
    while (conn.output.length > 0 && !conn.closed) {
      const head = conn.output[0]!;
      const written = conn.socket.write(head);
      if (written < 0) return;
      if (written > 0) {
        conn.lastActivityMs = now();
        conn.outputBytes -= written;
        addHeld(conn, -written);
      }
      if (written < head.byteLength) {
        conn.output[0] = head.subarray(written);
        return;
      }
      conn.output.shift();
      conn.outputReleases.shift()?.();
    }
  }

  function writeResponse(conn: ConnState, body: Uint8Array | GatheredFrame): void {
    if (isGatheredFrame(body)) {
      // Piece after piece; what the kernel does not take is queued, and the release waits for the last.
      const last = body.pieces.length - 1;
      for (let i = 0; i <= last; i++) writeOut(conn, body.pieces[i]!, i === last ? body.releaseAfterWrite : undefined);
      return;
    }
    const size = body.byteLength;
    if ((body as MarkedView)[reservedPrefix] === true && body.byteOffset >= SIZE_PREFIX_BYTES) {
      const framed = new Uint8Array(body.buffer, body.byteOffset - SIZE_PREFIX_BYTES, size + SIZE_PREFIX_BYTES);
      writeSize(framed, size);
      writeOut(conn, framed, (body as MarkedView)[releaseAfterWrite]);
    } else if (size <= COPY_THRESHOLD_BYTES) {
      const framed = new Uint8Array(size + SIZE_PREFIX_BYTES);
      writeSize(framed, size);
      framed.set(body, SIZE_PREFIX_BYTES);
      writeOut(conn, framed);
    } else {
      const prefix = new Uint8Array(SIZE_PREFIX_BYTES);
      writeSize(prefix, size);
      writeOut(conn, prefix);
      writeOut(conn, body);
    }
  }

  // ---- responses in request order -----------------------------------------------------------------------

  /** Writes every finished response at the head of the queue; stops at the first one still pending. */
  function flushResponses(conn: ConnState): void {
    while (conn.pending.length > 0 && !conn.closed) {
      const head = conn.pending[0]!;
      if (head.state === "pending") break;
      conn.pending.shift();
      // Its bytes move from the queue to the output (what the kernel does not take is counted there).
      addHeld(conn, -head.heldBytes);
      head.heldBytes = 0;
      if (head.state === "failed") {
        // Everything before it is written (or queued); nothing after it is answered.
        dropPending(conn);
        endAfterFlush(conn);
        return;
      }
      if (head.response !== null) writeResponse(conn, head.response);
    }
    if (closing && conn.pending.length === 0) endAfterFlush(conn);
  }

  function settle(conn: ConnState, entry: PendingEntry, state: EntryState, response: DispatchResult, error: unknown) {
    entry.state = state;
    entry.response = response;
    if (conn.closed) return;
    if (!entry.dropped) {
      // The reservation gives way to the response itself, with its size prefix, until it is written.
      const responseBytes = response === null ? 0 : response.byteLength + SIZE_PREFIX_BYTES;
      addHeld(conn, responseBytes - entry.heldBytes);
      entry.heldBytes = responseBytes;
    }
    // A failed request dooms the connection: nothing after it is dispatched, even before its turn comes to
    // be answered (the earlier responses are still written first). It is reported now, not at its turn, so
    // that a FatalError stops the process without waiting for slower requests ahead of it.
    if (state === "failed") {
      conn.stopReading = true;
      report(error, conn);
    }
    flushResponses(conn);
    pump(conn);
  }

  // ---- input ---------------------------------------------------------------------------------------------

  /** Cuts and dispatches every complete frame the connection may dispatch now, then pauses or resumes reading. */
  function pump(conn: ConnState): void {
    if (conn.pumping || conn.closed) return;
    conn.pumping = true;
    try {
      while (!conn.closed && blockReason(conn) === undefined) {
        const size = conn.frames.peekSize();
        if (size === undefined) break;
        if (size < 0 || size > opts.maxRequestBytes) {
          // A TLS ClientHello starts 0x16 0x03: say so, it is the usual mistake (SSL client, PLAINTEXT port).
          const tlsHello = size >>> 16 === 0x1603 && !usesTls(conn.security.securityProtocol);
          if (tlsHello) logConnectionError(conn, "closing connection: a TLS handshake on a listener without TLS", { listener: conn.security.listenerName });
          else logConnectionError(conn, "closing connection: request size out of bounds", { size, maxRequestBytes: opts.maxRequestBytes });
          abort(conn);
          return;
        }
        if (conn.frames.buffered < SIZE_PREFIX_BYTES + size) break;
        conn.frames.take(SIZE_PREFIX_BYTES);
        dispatchFrame(conn, conn.frames.take(size));
      }
      updateReading(conn);
    } finally {
      conn.pumping = false;
    }
  }

  function dispatchFrame(conn: ConnState, frame: Uint8Array): void {
    const entry: PendingEntry = { state: "pending", response: null, heldBytes: 0, dropped: false };
    conn.pending.push(entry);
    const info: ConnectionInfo = {
      id: conn.info.id,
      remoteAddress: conn.info.remoteAddress,
      close: conn.info.close,
      responseBudget: new RequestBudget(conn, entry),
      security: conn.security,
    };
    let result: Promise<DispatchResult> | DispatchResult;
    try {
      result = opts.dispatch(frame, info);
    } catch (error) {
      settle(conn, entry, "failed", null, error);
      return;
    }
    if (isPromiseLike(result)) {
      result.then(
        (response) => settle(conn, entry, "done", response ?? null, undefined),
        (error: unknown) => settle(conn, entry, "failed", null, error),
      );
    } else {
      settle(conn, entry, "done", result ?? null, undefined);
    }
  }

  /** Why the connection may not dispatch now ("closing" once it answers nothing more); undefined when it may. */
  function blockReason(conn: ConnState): PauseReason | "closing" | undefined {
    if (conn.stopReading) return "closing";
    if (conn.output.length > 0) return "output";
    if (conn.pending.length >= maxInFlight) return "in-flight";
    if (conn.heldBytes >= maxConnBytes) return "connection-bytes";
    if (!admittedByBroker(conn)) return "broker-bytes";
    return undefined;
  }

  /** Reads only while the connection may dispatch (blockReason). */
  function updateReading(conn: ConnState): void {
    if (conn.closed) return;
    const reason = blockReason(conn);
    conn.pauseReason = reason === "closing" ? undefined : reason;
    if (reason === "broker-bytes") waitingForShare.add(conn);
    else waitingForShare.delete(conn);
    const shouldPause = reason !== undefined;
    if (shouldPause && !conn.paused) {
      conn.paused = true;
      conn.socket.pause();
    } else if (!shouldPause && conn.paused) {
      conn.paused = false;
      conn.socket.resume();
    }
  }

  // ---- closing -------------------------------------------------------------------------------------------

  function endAfterFlush(conn: ConnState): void {
    conn.stopReading = true;
    conn.endWhenFlushed = true;
    updateReading(conn);
    if (conn.output.length === 0) endSocket(conn);
  }

  /** Graceful close once our output is empty: the kernel still delivers what it holds, then a FIN. */
  function endSocket(conn: ConnState): void {
    if (conn.closed) return;
    conn.socket.end();
    onClosed(conn);
  }

  /**
   * Closes at once, dropping in-flight requests and output the kernel has not taken. `end()` closes the
   * descriptor right away (Bun calls `close` synchronously) while still letting the kernel deliver what it
   * already holds, then a FIN; `terminate()` would send a reset and could discard earlier responses.
   */
  function abort(conn: ConnState): void {
    if (conn.closed) return;
    conn.stopReading = true;
    dropPending(conn);
    dropOutput(conn);
    // In case a future Bun defers the close callback, endSocket releases the state now either way.
    endSocket(conn);
  }

  function armIdleTimer(conn: ConnState, delayMs: number): void {
    conn.idleTimer = setTimeout(() => checkIdle(conn), Math.max(1, Math.ceil(delayMs)));
    // An idle timer must not keep the process alive on its own.
    conn.idleTimer.unref?.();
  }

  /** Re-armed lazily rather than on every byte, so activity costs one timestamp store. */
  function checkIdle(conn: ConnState): void {
    conn.idleTimer = undefined;
    if (conn.closed) return;
    const busy = conn.pending.some((entry) => entry.state === "pending");
    const idleForMs = now() - conn.lastActivityMs;
    if (!busy && idleForMs >= idleTimeoutMs) {
      log.info("closing idle connection", { conn: conn.info.id, remote: conn.info.remoteAddress, idleForMs: Math.round(idleForMs) });
      abort(conn);
      return;
    }
    armIdleTimer(conn, busy ? idleTimeoutMs : idleTimeoutMs - idleForMs);
  }

  function onClosed(conn: ConnState): void {
    if (conn.closed) return;
    dropPending(conn);
    dropOutput(conn);
    conn.closed = true;
    waitingForShare.delete(conn);
    if (conn.idleTimer !== undefined) clearTimeout(conn.idleTimer);
    if (conn.handshakeTimer !== undefined) clearTimeout(conn.handshakeTimer);
    connections.delete(conn);
    conn.resolveClosed();
  }

  // ---- Bun.listen ----------------------------------------------------------------------------------------

  const handshakeTimeoutMs = opts.tlsHandshakeTimeoutMs ?? DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS;

  /** One configured listener and the Bun listeners it has had (a reload re-binds; the old ones keep their connections). */
  interface EndpointState {
    readonly spec: ListenerEndpoint;
    server: Bun.TCPSocketListener<ConnRef>;
    /** Stopped accepting at a reload; stopped for good at close. */
    readonly retired: Bun.TCPSocketListener<ConnRef>[];
    /** The bound port (the real one when 0 was asked for), kept across re-binds. */
    port: number;
  }

  const openConnection = (spec: ListenerEndpoint, socket: Bun.Socket<ConnRef>) => {
    if (closing || connections.size >= maxConnections) {
      // Rate-limited with the connection-error lines: a flood of connections must not flood the log.
      const dropped = closing ? undefined : connectionErrorLines.admit();
      if (dropped !== undefined) log.warn("refusing connection: too many connections", { remote: socket.remoteAddress, maxConnections, ...(dropped > 0 ? { linesDropped: dropped } : {}) });
      socket.end();
      return;
    }
    const id = nextId++;
    let resolveClosed!: () => void;
    const closedPromise = new Promise<void>((resolve) => (resolveClosed = resolve));
    const tls = spec.tls !== undefined;
    const conn: ConnState = {
      info: {
        id,
        remoteAddress: socket.remoteAddress,
        close: () => abort(conn),
      },
      security: {
        listenerName: spec.name,
        securityProtocol: spec.securityProtocol,
        principal: ANONYMOUS_PRINCIPAL,
        authenticated: !usesSasl(spec.securityProtocol),
      },
      handshaking: tls,
      handshakeTimer: undefined,
      socket,
      frames: new FrameAssembler(),
      pending: [],
      output: [],
      outputReleases: [],
      outputBytes: 0,
      heldBytes: 0,
      paused: false,
      pauseReason: undefined,
      stopReading: false,
      endWhenFlushed: false,
      closed: false,
      errorLogged: false,
      pumping: false,
      lastActivityMs: now(),
      idleTimer: undefined,
      closedPromise,
      resolveClosed,
    };
    // Each socket gets its own data object rather than the listener's default one.
    socket.data = { conn };
    connections.add(conn);
    if (idleTimeoutMs > 0) armIdleTimer(conn, idleTimeoutMs);
    if (tls) {
      // A handshake that never finishes (a flood of half-open ones) must not hold a connection slot.
      conn.handshakeTimer = setTimeout(() => {
        conn.handshakeTimer = undefined;
        if (conn.closed || !conn.handshaking) return;
        logConnectionError(conn, "closing connection: TLS handshake not finished in time", { listener: spec.name, handshakeTimeoutMs });
        abort(conn);
      }, handshakeTimeoutMs);
      conn.handshakeTimer.unref?.();
    }
  };

  /**
   * The TLS handshake ended. A failure (a plaintext client, an unknown CA, no certificate where one is
   * required) closes the connection. A client certificate that does not verify closes it too, also when
   * the certificate was only requested (Java's SSLEngine fails such a handshake the same way); a verified
   * one gives an SSL connection its principal.
   */
  const handshakeDone = (spec: ListenerEndpoint, socket: Bun.Socket<ConnRef>, success: boolean, authorizationError: Error | null) => {
    const conn = socket.data?.conn;
    if (conn === undefined || conn.closed) return;
    conn.handshaking = false;
    if (conn.handshakeTimer !== undefined) clearTimeout(conn.handshakeTimer);
    conn.handshakeTimer = undefined;
    conn.lastActivityMs = now();
    if (!success) {
      logConnectionError(conn, "closing connection: TLS handshake failed", { listener: spec.name, error: authorizationError?.message ?? "handshake failed" });
      abort(conn);
      return;
    }
    let certificate: Uint8Array | undefined;
    try {
      certificate = socket.getPeerX509Certificate()?.raw;
    } catch {
      certificate = undefined;
    }
    if (certificate === undefined) return;
    if (!socket.authorized) {
      logConnectionError(conn, "closing connection: client certificate not trusted", { listener: spec.name, error: authorizationError?.message ?? "not verified" });
      abort(conn);
      return;
    }
    // SASL_SSL takes its principal from SASL, as Apache's principal builder does.
    if (spec.securityProtocol !== "SSL") return;
    try {
      conn.security.principal = principalOfCertificate(certificate);
    } catch (error) {
      logConnectionError(conn, "closing connection: client certificate subject unreadable", { listener: spec.name, error: describe(error) });
      abort(conn);
    }
  };

  const handlersFor = (spec: ListenerEndpoint): Bun.SocketHandler<ConnRef, "uint8array"> => ({
    binaryType: "uint8array",
    open(socket) {
      openConnection(spec, socket);
    },
    // Only TLS listeners get a handshake callback: with one, `open` comes at accept, before the handshake.
    ...(spec.tls === undefined
      ? {}
      : {
          handshake(socket: Bun.Socket<ConnRef>, success: boolean, authorizationError: Error | null) {
            handshakeDone(spec, socket, success, authorizationError);
          },
        }),
    data(socket, chunk) {
      const conn = socket.data?.conn;
      if (conn === undefined || conn.closed) return;
      conn.lastActivityMs = now();
      // A doomed or draining connection answers nothing more, so what it sends is dropped. A connection
      // paused for backpressure may still deliver what Bun had already read: that is buffered, and pump()
      // leaves it undispatched until the output drains.
      if (conn.stopReading) return;
      conn.frames.push(chunk);
      pump(conn);
    },
    drain(socket) {
      const conn = socket.data?.conn;
      if (conn === undefined || conn.closed) return;
      flushOutput(conn);
      if (conn.output.length > 0) return;
      if (conn.endWhenFlushed) {
        endSocket(conn);
        return;
      }
      pump(conn);
    },
    close(socket) {
      const conn = socket.data?.conn;
      if (conn !== undefined) onClosed(conn);
    },
    error(socket, error) {
      const conn = socket.data?.conn;
      if (conn === undefined) return;
      report(error, conn);
      abort(conn);
    },
  });

  const bindOne = (spec: ListenerEndpoint, port: number): Bun.TCPSocketListener<ConnRef> => {
    const tls = spec.tls?.current().options;
    return Bun.listen<ConnRef>({
      hostname: spec.host,
      port,
      data: { conn: undefined } as ConnRef,
      ...(tls === undefined ? {} : { tls }),
      socket: handlersFor(spec) as unknown as Bun.SocketHandler<ConnRef>,
    });
  };

  const what = (spec: ListenerEndpoint) => (specs.length === 1 && spec.name === "PLAINTEXT" ? "the Kafka listener" : `the Kafka listener ${spec.name}`);

  /**
   * New TLS material: stop accepting on the old Bun listener (its connections go on) and bind the same
   * port again with the new certificate, in the same turn of the event loop. If that bind fails, the old
   * material is bound again; if even that fails, the broker has lost the port, which is fatal.
   */
  const rebind = (state: EndpointState, previous: Bun.TLSOptions | undefined) => {
    if (closing) return;
    const old = state.server;
    old.stop(false);
    state.retired.push(old);
    try {
      state.server = bindOne(state.spec, state.port);
    } catch (error) {
      log.error("could not bind the listener again with the new certificate; keeping the previous one", { listener: state.spec.name, error: describe(error) });
      try {
        state.server = Bun.listen<ConnRef>({
          hostname: state.spec.host,
          port: state.port,
          data: { conn: undefined } as ConnRef,
          ...(previous === undefined ? {} : { tls: previous }),
          socket: handlersFor(state.spec) as unknown as Bun.SocketHandler<ConnRef>,
        });
      } catch (again) {
        throw new FatalError(`${what(state.spec)} lost its port ${state.port} at a certificate reload: ${describe(again)}`);
      }
    }
  };

  const specs: ListenerEndpoint[] =
    opts.endpoints ?? [{ name: "PLAINTEXT", securityProtocol: "PLAINTEXT", host: opts.host ?? "127.0.0.1", port: opts.port ?? 0 }];
  if (specs.length === 0) throw new RangeError("a Kafka listener needs at least one endpoint");
  const states: EndpointState[] = [];
  for (const spec of specs) {
    let server: Bun.TCPSocketListener<ConnRef>;
    try {
      server = bindOne(spec, spec.port);
    } catch (error) {
      for (const state of states) state.server.stop(true);
      throw listenError(what(spec), spec.host, spec.port, error);
    }
    const state: EndpointState = { spec, server, retired: [], port: server.port };
    states.push(state);
    if (spec.tls !== undefined) {
      let previous = spec.tls.current().options;
      spec.tls.onChange(() => {
        rebind(state, previous);
        previous = spec.tls!.current().options;
      });
    }
    log.debug("kafka listener bound", { listener: spec.name, securityProtocol: spec.securityProtocol, host: server.hostname, port: server.port });
  }
  const bound: BoundEndpoint[] = states.map((s) => ({ name: s.spec.name, securityProtocol: s.spec.securityProtocol, host: s.server.hostname, port: s.port }));

  let closePromise: Promise<void> | undefined;
  async function close(): Promise<void> {
    closing = true;
    // Stop accepting; live connections stay open until their in-flight work is answered.
    for (const state of states) state.server.stop(false);
    for (const conn of connections) {
      conn.stopReading = true;
      updateReading(conn);
      if (conn.pending.length === 0) endAfterFlush(conn);
    }
    const allClosed = Promise.all([...connections].map((conn) => conn.closedPromise));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = await Promise.race([
      allClosed.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), closeTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      log.warn("closing connections that did not finish in time", { connections: connections.size, closeTimeoutMs });
      for (const conn of [...connections]) abort(conn);
      await allClosed;
    }
    for (const state of states) {
      state.server.stop(true);
      for (const retired of state.retired) retired.stop(true);
    }
  }

  return {
    host: bound[0]!.host,
    port: bound[0]!.port,
    endpoints: () => bound.map((b) => ({ ...b })),
    close: () => (closePromise ??= close()),
    connectionCount: () => connections.size,
    connectionStats: () =>
      [...connections].map((conn) => ({
        id: conn.info.id,
        remoteAddress: conn.info.remoteAddress,
        listenerName: conn.security.listenerName,
        securityProtocol: conn.security.securityProtocol,
        principal: conn.security.principal,
        handshaking: conn.handshaking,
        inFlight: conn.pending.length,
        queuedOutputBytes: conn.outputBytes,
        heldResponseBytes: conn.heldBytes,
        readingPaused: conn.paused,
        pauseReason: conn.paused ? conn.pauseReason : undefined,
      })),
    heldResponseBytes: () => heldTotal,
    pausedConnections: () => {
      const counts = Object.fromEntries(PAUSE_REASONS.map((reason) => [reason, 0])) as Record<PauseReason, number>;
      for (const conn of connections) if (conn.paused && conn.pauseReason !== undefined) counts[conn.pauseReason]++;
      return counts;
    },
  };
}

/** A configured byte bound: absent means the default, 0 or less (or Infinity) no bound. */
function byteBound(value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (Number.isNaN(value)) throw new RangeError("a response byte bound must be a number");
  return value > 0 ? value : Number.POSITIVE_INFINITY;
}

function isPromiseLike(value: unknown): value is PromiseLike<DispatchResult> {
  return typeof (value as PromiseLike<unknown> | null)?.then === "function";
}

function writeSize(target: Uint8Array, size: number): void {
  target[0] = size >>> 24;
  target[1] = (size >>> 16) & 0xff;
  target[2] = (size >>> 8) & 0xff;
  target[3] = size & 0xff;
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
