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
 *   (`socket.pause()`, resumed with `socket.resume()`) and dispatches nothing, so a client that does not
 *   read its responses cannot make the broker buffer without bound.
 * - Idle connections (no byte in either direction for `idleTimeoutMs`, and no request being worked on) are
 *   closed, like Apache's connections.max.idle.ms.
 * - Each connection has its own state; whatever one connection does (garbage, oversize frames, never reading)
 *   only ever closes that connection.
 *
 * Response framing: dispatch returns the response WITHOUT its size prefix. To write one response with one
 * `write` call, the listener needs the 4 prefix bytes in front of the body:
 * - a dispatcher that encodes into a buffer with 4 reserved leading bytes returns `withReservedSizePrefix(buf)`
 *   (a view that skips them and is marked as such); the listener fills in the size in place: no copy;
 * - any other response up to `COPY_THRESHOLD_BYTES` is copied behind a fresh prefix (one small copy, one write);
 * - a larger unmarked response goes out as two writes (prefix, then body) rather than copying megabytes.
 * Either way, the response bytes belong to the listener once returned: the dispatcher must not reuse them.
 */
import type { Logger } from "../platform/logger.ts";

/** What the dispatcher learns about the connection a frame came from. */
export interface ConnectionInfo {
  /** Unique per listener, increasing. */
  readonly id: number;
  readonly remoteAddress: string;
  /** Closes the connection now: in-flight requests on it are dropped unanswered. */
  close(): void;
}

export type DispatchResult = Uint8Array | null;

export interface KafkaListenerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
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
   * Told about a dispatch that threw or a socket error. The connection is closed either way; main.ts uses
   * this to turn a FatalError into a process exit. Defaults to logging a warning.
   */
  onConnectionError?: (error: unknown, conn: ConnectionInfo) => void;
  log: Logger;
  /** New connections beyond this many are closed at once. Unbounded when absent. */
  maxConnections?: number;
  /** Requests dispatched but not yet answered on one connection before it stops reading. Default 100. */
  maxInFlightPerConnection?: number;
  /** How long close() waits for in-flight requests and unsent responses before cutting connections. Default 10 s. */
  closeTimeoutMs?: number;
}

export interface KafkaListener {
  /** The bound address (the real port when 0 was asked for). */
  readonly host: string;
  readonly port: number;
  /**
   * Stops accepting, stops reading, waits for in-flight dispatches to finish and their responses to be
   * flushed, then closes every connection. Bounded by closeTimeoutMs, after which connections are cut.
   */
  close(): Promise<void>;
  connectionCount(): number;
  /** A snapshot per open connection, for metrics and introspection (and for tests to observe backpressure). */
  connectionStats(): ConnectionStats[];
}

export interface ConnectionStats {
  id: number;
  remoteAddress: string;
  /** Requests dispatched and not yet answered (including finished ones waiting for an earlier one). */
  inFlight: number;
  /** Response bytes the kernel has not taken yet. */
  queuedOutputBytes: number;
  /** True while the connection reads nothing (backpressure, the in-flight bound, or shutting down). */
  readingPaused: boolean;
}

export const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION = 100;
export const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
/** Responses up to this size are copied behind their prefix so that they leave in one write. */
export const COPY_THRESHOLD_BYTES = 64 * 1024;
export const SIZE_PREFIX_BYTES = 4;

/**
 * A registered symbol, so that the protocol layer (which must not import net/) can mark its own frames the
 * same way: `Symbol.for("bunka.reservedSizePrefix")` names the same symbol everywhere.
 */
const reservedPrefix = Symbol.for("bunka.reservedSizePrefix");
type MarkedView = Uint8Array & { [reservedPrefix]?: true };

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
}

interface ConnState {
  readonly info: ConnectionInfo;
  readonly socket: Bun.Socket<ConnRef>;
  readonly frames: FrameAssembler;
  /** Dispatched requests in request order; answered from the head only. */
  readonly pending: PendingEntry[];
  /** Bytes that the kernel did not take yet, in order; the first may be a partly written view. */
  readonly output: Uint8Array[];
  paused: boolean;
  /** No more requests are read or dispatched (a dispatch failed, or the listener is closing). */
  stopReading: boolean;
  /** End the socket once `output` is empty. */
  endWhenFlushed: boolean;
  closed: boolean;
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
  const onConnectionError =
    opts.onConnectionError ??
    ((error: unknown, conn: ConnectionInfo) =>
      log.warn("closing connection after a failed request", {
        conn: conn.id,
        remote: conn.remoteAddress,
        error: describe(error),
      }));
  if (!(maxInFlight >= 1)) throw new RangeError("maxInFlightPerConnection must be at least 1");

  /** The callback must not break the listener: what it throws is logged, and the connection still closes. */
  const report = (error: unknown, conn: ConnState) => {
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

  // ---- output -------------------------------------------------------------------------------------------

  function writeOut(conn: ConnState, bytes: Uint8Array): void {
    if (conn.closed || bytes.byteLength === 0) return;
    if (conn.output.length > 0) {
      conn.output.push(bytes);
      return;
    }
    const written = conn.socket.write(bytes);
    if (written < 0) return; // The socket is already closed; its close callback cleans up.
    if (written > 0) conn.lastActivityMs = now();
    if (written < bytes.byteLength) conn.output.push(bytes.subarray(written));
  }

  /** Hands queued output to the kernel until it refuses more. Called from `drain`. */
  function flushOutput(conn: ConnState): void {
    while (conn.output.length > 0 && !conn.closed) {
      const head = conn.output[0]!;
      const written = conn.socket.write(head);
      if (written < 0) return;
      if (written > 0) conn.lastActivityMs = now();
      if (written < head.byteLength) {
        conn.output[0] = head.subarray(written);
        return;
      }
      conn.output.shift();
    }
  }

  function writeResponse(conn: ConnState, body: Uint8Array): void {
    const size = body.byteLength;
    if ((body as MarkedView)[reservedPrefix] === true && body.byteOffset >= SIZE_PREFIX_BYTES) {
      const framed = new Uint8Array(body.buffer, body.byteOffset - SIZE_PREFIX_BYTES, size + SIZE_PREFIX_BYTES);
      writeSize(framed, size);
      writeOut(conn, framed);
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
      if (head.state === "failed") {
        // Everything before it is written (or queued); nothing after it is answered.
        conn.pending.length = 0;
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
      while (!conn.stopReading && !conn.closed && conn.output.length === 0 && conn.pending.length < maxInFlight) {
        const size = conn.frames.peekSize();
        if (size === undefined) break;
        if (size < 0 || size > opts.maxRequestBytes) {
          log.warn("closing connection: request size out of bounds", {
            conn: conn.info.id,
            remote: conn.info.remoteAddress,
            size,
            maxRequestBytes: opts.maxRequestBytes,
          });
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
    const entry: PendingEntry = { state: "pending", response: null };
    conn.pending.push(entry);
    let result: Promise<DispatchResult> | DispatchResult;
    try {
      result = opts.dispatch(frame, conn.info);
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

  /** Reads only while the connection may dispatch: output drained and fewer than maxInFlight pending. */
  function updateReading(conn: ConnState): void {
    if (conn.closed) return;
    const shouldPause = conn.stopReading || conn.output.length > 0 || conn.pending.length >= maxInFlight;
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
    conn.pending.length = 0;
    conn.output.length = 0;
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
    conn.closed = true;
    conn.pending.length = 0;
    conn.output.length = 0;
    if (conn.idleTimer !== undefined) clearTimeout(conn.idleTimer);
    connections.delete(conn);
    conn.resolveClosed();
  }

  // ---- Bun.listen ----------------------------------------------------------------------------------------

  const server = Bun.listen<ConnRef>({
    hostname: opts.host,
    port: opts.port,
    data: { conn: undefined } as ConnRef,
    socket: {
      binaryType: "uint8array",
      open(socket) {
        if (closing || connections.size >= maxConnections) {
          if (!closing) log.warn("refusing connection: too many connections", { remote: socket.remoteAddress, maxConnections });
          socket.end();
          return;
        }
        const id = nextId++;
        let resolveClosed!: () => void;
        const closedPromise = new Promise<void>((resolve) => (resolveClosed = resolve));
        const conn: ConnState = {
          info: {
            id,
            remoteAddress: socket.remoteAddress,
            close: () => abort(conn),
          },
          socket,
          frames: new FrameAssembler(),
          pending: [],
          output: [],
          paused: false,
          stopReading: false,
          endWhenFlushed: false,
          closed: false,
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
      },
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
    },
  });

  const bound = { host: server.hostname, port: server.port };
  log.debug("kafka listener bound", bound);

  let closePromise: Promise<void> | undefined;
  async function close(): Promise<void> {
    closing = true;
    // Stop accepting; live connections stay open until their in-flight work is answered.
    server.stop(false);
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
    server.stop(true);
  }

  return {
    host: bound.host,
    port: bound.port,
    close: () => (closePromise ??= close()),
    connectionCount: () => connections.size,
    connectionStats: () =>
      [...connections].map((conn) => ({
        id: conn.info.id,
        remoteAddress: conn.info.remoteAddress,
        inFlight: conn.pending.length,
        queuedOutputBytes: conn.output.reduce((sum, bytes) => sum + bytes.byteLength, 0),
        readingPaused: conn.paused,
      })),
  };
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
