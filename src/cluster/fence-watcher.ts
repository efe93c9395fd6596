/**
 * Applies the producer fences other brokers' coordinators publish (storage/fence-log.ts): every poll (2 s
 * by default) it reads what was appended to each peer's `producer_fences/<broker>.log` since the last poll
 * and raises the fenced producers' epochs on the partitions this broker leads (`apply`, PartitionManager's
 * fenceProducer), so that a zombie's batches at the old epoch fail here too.
 *
 * A new watcher reads every log from the start. That is harmless: a fence never lowers an epoch, and every
 * fence in a log is at or below the epoch its producer id has now, so an old fence changes nothing that a
 * live producer holds. A log that shrank (replaced) is read again from the start; a corrupt line is logged
 * and skipped (fences are defence in depth: the coordinator refuses the old epoch anyway). This broker's own
 * log is skipped: its coordinator fenced its local partitions itself, before it published the fence.
 * In cluster mode a "fences" wake-up (cluster/waker.ts) polls at once; the poll stays the fallback.
 */
import { FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import { fenceLogPath, listFenceLogs, readFenceLog, type ProducerFence } from "../storage/fence-log.ts";
import type { Waker } from "./waker.ts";

export const FENCE_LOG_POLL_INTERVAL_MS = 2_000;
/** Reads per log per poll, so that one huge log cannot hold a poll for long. */
const READS_PER_POLL_MAX = 16;

export interface FenceWatcherDeps {
  fs: Fs;
  dataDir: string;
  selfId: number;
  /** Raise `producerId`'s epoch to `epoch` on every local partition. */
  apply: (producerId: number, epoch: number) => void | Promise<void>;
  log: Logger;
  pollIntervalMs?: number;
  onFatal?: (error: FatalError) => void;
  /** Cluster mode: a "fences" wake-up polls at once (the poll stays the fallback). */
  waker?: Waker;
}

export class FenceWatcher {
  /** Byte offset read so far, per peer broker. */
  private readonly offsets = new Map<number, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private polling: Promise<ProducerFence[]> | undefined;
  private stopped = false;
  private stopWakes: (() => void) | undefined;
  private wokenDuringPoll = false;

  constructor(private readonly deps: FenceWatcherDeps) {}

  /** A wake-up: poll now (or once more right after the poll in progress, which may have read too early). */
  wake(): void {
    if (this.stopped) return;
    if (this.polling !== undefined) {
      this.wokenDuringPoll = true;
      return;
    }
    this.poll().catch((error: unknown) => this.background(error));
  }

  start(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.stopWakes ??= this.deps.waker?.onWake((target) => {
      if (target.kind === "fences") this.wake();
    });
    this.timer = setInterval(() => {
      this.poll().catch((error: unknown) => this.background(error));
    }, this.deps.pollIntervalMs ?? FENCE_LOG_POLL_INTERVAL_MS);
    (this.timer as { unref?: () => void }).unref?.();
  }

  /** One pass over the peers' logs; resolves to the fences applied (a pass already running is joined). */
  poll(): Promise<ProducerFence[]> {
    this.polling ??= this.pollNow().finally(() => {
      this.polling = undefined;
      if (this.wokenDuringPoll) {
        this.wokenDuringPoll = false;
        this.wake();
      }
    });
    return this.polling;
  }

  /** Where this watcher has read a peer's log up to (tests). */
  offsetOf(brokerId: number): number {
    return this.offsets.get(brokerId) ?? 0;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopWakes?.();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.polling?.catch(() => undefined);
  }

  private async pollNow(): Promise<ProducerFence[]> {
    const { fs, dataDir, selfId, log } = this.deps;
    const applied: ProducerFence[] = [];
    for (const brokerId of await listFenceLogs(fs, dataDir)) {
      if (brokerId === selfId) continue;
      const path = fenceLogPath(dataDir, brokerId);
      for (let reads = 0; reads < READS_PER_POLL_MAX && !this.stopped; reads++) {
        const from = this.offsets.get(brokerId) ?? 0;
        const read = await readFenceLog(fs, path, from);
        if (read.shrunk) {
          log.warn("a peer's fence log shrank; reading it again from the start", { path, from });
          this.offsets.set(brokerId, 0);
          continue;
        }
        for (const corrupt of read.corrupt) log.error("skipping a corrupt line of a fence log", { path, offset: corrupt.offset, reason: corrupt.reason });
        for (const fence of read.fences) {
          await this.deps.apply(fence.producerId, fence.epoch);
          applied.push(fence);
        }
        this.offsets.set(brokerId, read.nextOffset);
        if (read.nextOffset === from) break;
      }
    }
    return applied;
  }

  private background(error: unknown): void {
    if (error instanceof FatalError) {
      this.deps.log.error("applying producer fences failed fatally", { error: String(error) });
      if (this.deps.onFatal !== undefined) this.deps.onFatal(error);
      else
        queueMicrotask(() => {
          throw error;
        });
      return;
    }
    if (!this.stopped) this.deps.log.warn("fence log poll failed", { error: String(error) });
  }
}
