/**
 * A watch over etcd's gateway (docs/architecture.md, "Ownership and cluster mode"): `/v3/watch` answers a
 * create request with a stream of newline-separated JSON messages, which this reads and hands to the
 * caller in order.
 *
 * It survives its stream: when the stream ends or breaks (etcd restarted, an endpoint died, nothing
 * arrived for `idleReconnectMs`) it opens a new one, at the next endpoint if need be, from the revision
 * after the last one it delivered, so that no event is lost or delivered twice. When that revision has
 * been compacted away, etcd cancels the watch with the compact revision; the caller is told
 * (`onCompacted`), re-reads what it watches, and returns the revision to go on from (the re-read's header
 * revision + 1).
 *
 * Idle reconnects are there because the gateway gives no way to ping a stream: a connection that a network
 * partition silenced would otherwise be trusted forever. Reconnecting costs one request and loses nothing.
 */
import { DecodeError } from "../../errors/errors.ts";
import type { Logger } from "../../platform/logger.ts";
import type { EtcdClient } from "./etcd-client.ts";
import { decodeStreamMessage, decodeWatchResponse, encodeWatchCreate, type WatchEvent, type WatchRequest, type WatchResponse } from "./gateway-codec.ts";

export const WATCH_BACKOFF_MIN_MS = 50;
export const WATCH_BACKOFF_MAX_MS = 2_000;
export const WATCH_IDLE_RECONNECT_MS_DEFAULT = 60_000;
/** One message of the stream; etcd's own answers stay below its 1.5 MiB request limit plus events. */
export const WATCH_MESSAGE_BYTES_MAX = 64 * 1024 * 1024;

export interface WatchHandlers {
  /** Events in revision order. The next message is read once the returned promise settled. */
  onEvents(events: WatchEvent[], header: WatchResponse["header"]): void | Promise<void>;
  /**
   * The revisions from the watch's next one up to `compactRevision` are gone: events were missed. Re-read
   * the watched keys and resolve with the revision to watch from (the re-read's header revision + 1).
   */
  onCompacted(compactRevision: bigint): Promise<bigint>;
  /** The stream was opened (`connected`, with the revision it starts from) or lost (`disconnected`). */
  onState?(state: "connected" | "disconnected", detail: string): void;
}

export interface WatchOptions {
  log?: Logger;
  idleReconnectMs?: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
}

/**
 * How a stream ended: it broke or was closed (`ended`), etcd refused or canceled the watch for a reason
 * other than compaction (`canceled`: backed off like a failure, however healthy the stream looked), or
 * the revision it needed was compacted away.
 */
type StreamEnd = { kind: "ended"; reason: string; idle?: boolean } | { kind: "canceled"; reason: string } | { kind: "compacted"; compactRevision: bigint };

/** A stream that lived this long was healthy: the reconnect after it starts the back-off again. */
const WATCH_HEALTHY_STREAM_MS = 1_000;

export class EtcdWatch {
  /** The first revision not yet delivered; undefined until the first stream says where "now" is. */
  private nextRevision: bigint | undefined;
  private readonly stopping = new AbortController();
  private readonly running: Promise<void>;
  private connectedFlag = false;
  private streamsOpened = 0;

  constructor(
    private readonly client: EtcdClient,
    private readonly request: Omit<WatchRequest, "startRevision"> & { startRevision?: bigint },
    private readonly handlers: WatchHandlers,
    private readonly options: WatchOptions = {},
  ) {
    this.nextRevision = request.startRevision;
    this.running = this.run();
  }

  /** The first revision the watch has not delivered yet (undefined before its first stream opened). */
  get revision(): bigint | undefined {
    return this.nextRevision;
  }

  get connected(): boolean {
    return this.connectedFlag;
  }

  /** Streams opened so far (1 + the reconnects). */
  get streams(): number {
    return this.streamsOpened;
  }

  async close(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted || this.client.closed;
  }

  private async run(): Promise<void> {
    const backoffMinMs = this.options.backoffMinMs ?? WATCH_BACKOFF_MIN_MS;
    const backoffMaxMs = this.options.backoffMaxMs ?? WATCH_BACKOFF_MAX_MS;
    let backoffMs = backoffMinMs;
    while (!this.stopped) {
      let end: StreamEnd;
      const startedMs = performance.now();
      try {
        end = await this.stream();
      } catch (error) {
        end = { kind: "ended", reason: error instanceof Error ? error.message : String(error) };
      }
      const wasConnected = this.connectedFlag;
      if (wasConnected) {
        this.connectedFlag = false;
        this.handlers.onState?.("disconnected", end.kind === "compacted" ? `compacted at ${end.compactRevision}` : end.reason);
      }
      if (this.stopped) break;
      if (end.kind === "compacted") {
        try {
          this.nextRevision = await this.handlers.onCompacted(end.compactRevision);
          backoffMs = backoffMinMs;
          continue;
        } catch (error) {
          this.options.log?.warn("etcd watch: re-reading after a compaction failed; trying again", { key: this.request.key, error: String(error) });
        }
      } else if (end.kind === "canceled") {
        this.options.log?.warn("etcd watch: etcd canceled the watch; trying again", { key: this.request.key, reason: end.reason });
      } else {
        this.options.log?.debug("etcd watch: stream ended; reconnecting", { key: this.request.key, reason: end.reason });
        // A stream closed for being idle is replaced at once; one that etcd had accepted and that lived a
        // while was healthy, so the back-off starts again (one that keeps breaking at once backs off).
        if (end.idle) backoffMs = 0;
        else if (wasConnected && performance.now() - startedMs >= WATCH_HEALTHY_STREAM_MS) backoffMs = backoffMinMs;
      }
      await this.pause(backoffMs);
      backoffMs = Math.min(Math.max(backoffMs * 2, backoffMinMs), backoffMaxMs);
    }
  }

  private pause(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.stopping.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done);
    });
  }

  /** One stream, from open to end. */
  private async stream(): Promise<StreamEnd> {
    const streamStop = new AbortController();
    const signal = AbortSignal.any([this.stopping.signal, streamStop.signal]);
    const body = encodeWatchCreate({ ...this.request, ...(this.nextRevision === undefined ? {} : { startRevision: this.nextRevision }) });
    const { response } = await this.client.openStream("watch", "/v3/watch", body, signal);
    const idleMs = this.options.idleReconnectMs ?? WATCH_IDLE_RECONNECT_MS_DEFAULT;
    let idle = false;
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    const armIdle = () => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        idle = true;
        streamStop.abort();
      }, idleMs);
    };
    armIdle();
    let created = false;
    let pending = "";
    const decoder = new TextDecoder();
    try {
      if (response.body === null) return { kind: "ended", reason: "empty answer" };
      for await (const chunk of response.body) {
        armIdle();
        pending += decoder.decode(chunk, { stream: true });
        if (pending.length > WATCH_MESSAGE_BYTES_MAX) throw new DecodeError(`etcd watch: a message is over ${WATCH_MESSAGE_BYTES_MAX} bytes`);
        let newline: number;
        while ((newline = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, newline).trim();
          pending = pending.slice(newline + 1);
          if (line === "") continue;
          // A slow handler is not an idle stream: the idle clock stops while the caller works.
          clearTimeout(idleTimer);
          const end = await this.message(line, created);
          if (end !== undefined) return end;
          armIdle();
          created = true;
        }
      }
      return { kind: "ended", reason: "the stream ended" };
    } catch (error) {
      if (idle) return { kind: "ended", reason: `nothing heard for ${idleMs} ms`, idle: true };
      throw error;
    } finally {
      clearTimeout(idleTimer);
      streamStop.abort();
    }
  }

  /** Handles one message; returns how the stream ended when it did. */
  private async message(line: string, created: boolean): Promise<StreamEnd | undefined> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw new DecodeError(`etcd watch: a message is not JSON: ${line.slice(0, 200)}`);
    }
    const message = decodeStreamMessage(parsed);
    if (message.kind === "error") return { kind: "ended", reason: `etcd ended the stream: ${message.error.message} (gRPC code ${message.error.code})` };
    const response = decodeWatchResponse(message.result);
    if (response.canceled) {
      if (response.compactRevision > 0n) return { kind: "compacted", compactRevision: response.compactRevision };
      return { kind: "canceled", reason: `etcd canceled the watch: ${response.cancelReason || "no reason given"}` };
    }
    if (response.created && !created) {
      // A watch from "now": what comes next is after the revision the store was at.
      if (this.nextRevision === undefined) this.nextRevision = response.header.revision + 1n;
      this.streamsOpened++;
      this.connectedFlag = true;
      this.handlers.onState?.("connected", `from revision ${this.nextRevision}`);
      if (response.events.length === 0) return undefined;
    }
    if (response.events.length === 0) {
      // A progress notification: every event up to the header's revision was sent.
      const next = response.header.revision + 1n;
      if (this.nextRevision === undefined || next > this.nextRevision) this.nextRevision = next;
      return undefined;
    }
    // A handler that throws ends the stream before the revision moves on, so the events come again.
    await this.handlers.onEvents(response.events, response.header);
    this.nextRevision = response.events[response.events.length - 1]!.kv.modRevision + 1n;
    return undefined;
  }
}
