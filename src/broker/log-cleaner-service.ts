/**
 * The log cleaner of the broker (Apache's LogCleaner and LogCleanerManager): background workers that
 * pick the partition of a `cleanup.policy=compact` topic that most needs cleaning and run one pass over
 * it (Partition.clean, storage/log/log-cleaner.ts), then the next, until none needs one; then they
 * wait `log.cleaner.backoff.ms`.
 *
 * - log.cleaner.threads workers run at once, never two on one partition; each has its own offset map,
 *   log.cleaner.dedupe.buffer.size / threads bytes at most (allocated as it fills, released after a pass).
 *   A worker is an async loop here that picks the partitions; with a CleanerThreadPool (the broker on the
 *   real file system) each worker's passes run on a thread of its own (storage/log/cleaner-threads.ts),
 *   which holds the offset map, and only the swaps and the checkpoint come back to the event loop.
 *   Without one (tests on the in-memory file system) the pass runs on the event loop, its CPU work in
 *   slices between which it gives the loop back.
 * - log.cleaner.io.max.bytes.per.second bounds the bytes all workers read together (on threads, through
 *   a budget in shared memory).
 * - A pass that finds damaged data (a CorruptStateError, or records that do not decode) is logged once and the partition is not cleaned
 *   again until the broker restarts (Apache marks such a log uncleanable); any other failure but a
 *   FatalError is logged and tried again next round; a FatalError stops the broker, as every failed write
 *   does.
 * - What each partition's passes did is kept for /metrics, /v1/topics and the dashboard.
 */
import type { CleanerConfig } from "../domain/cleaner-config.ts";
import { OffsetMap } from "../domain/compaction/offset-map.ts";
import { resolveTopicConfigWithDefaults } from "../domain/topic-config.ts";
import { CorruptStateError, DecodeError, FatalError } from "../errors/errors.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { DEFAULT_LOG_CONFIG } from "../storage/log/partition-log.ts";
import type { CleanerThreadPool } from "../storage/log/cleaner-threads.ts";
import type { CompactionConfig, InProcessClean, Partition, ThreadClean } from "../storage/partition.ts";
import type { TopicStore } from "../storage/topic-store.ts";
import type { RuntimeConfig } from "./runtime-config.ts";
import type { PartitionManager } from "./partitions.ts";

/** The broker settings the cleaner reads (log.cleaner.*), read again before every round. */
export type CleanerSettings = Pick<CleanerConfig, "enabled" | "threads" | "ioMaxBytesPerSecond" | "dedupeBufferSizeBytes" | "ioBufferLoadFactor" | "backoffMs">;

/** What the cleaner knows about one partition, for metrics and introspection. */
export interface PartitionCleanerStats {
  topic: string;
  partition: number;
  passes: number;
  bytesRead: number;
  bytesWritten: number;
  /** Bytes the log shrank by, over all passes. */
  bytesReclaimed: number;
  recordsRemoved: number;
  /** The dirty ratio at the last look (before a pass, or when no pass was needed). */
  dirtyRatio: number;
  dirtyBytes: number;
  /** Offsets below this are clean (the cleaner checkpoint). */
  cleanedUpToOffset: number;
  lastPassMs: number;
  lastPassDurationMs: number;
  lastError: string | undefined;
}

/** Where a pass runs (Partition.clean): on the event loop, or on a cleaner thread. */
type PassPlace = InProcessClean | ThreadClean;

/** How long a pass may hold the event loop before it lets other work run (see throttle). */
const YIELD_AFTER_MS = 0.2;

export class LogCleanerService {
  private readonly stats = new Map<string, PartitionCleanerStats>();
  private readonly busy = new Set<string>();
  /** Partitions whose pass found damaged data: never cleaned again by this process. */
  private readonly uncleanable = new Set<string>();
  /** Partitions whose last pass failed or made no progress, left alone until the next round. */
  private readonly failed = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private round: Promise<void> | undefined;
  private stopped = false;
  /** Aborted by stop(): passes on threads stop between batches. */
  private readonly stopping = new AbortController();
  /** Bytes read by every worker since `throttleStartMs` (the I/O throttle's window). */
  private throttledBytes = 0;
  private throttleStartMs = 0;
  /** When a pass last gave the event loop back (see throttle). */
  private lastYieldMs = 0;

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
    /** The broker-level topic defaults in effect, read whenever a topic's configs are resolved. */
    private readonly runtimeConfig: Pick<RuntimeConfig, "topicDefaults">,
    private readonly topics: TopicStore,
    private readonly partitions: PartitionManager,
    private readonly settings: () => CleanerSettings,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    /** Lets the event loop run what is waiting (requests) before the pass goes on. */
    private readonly yieldToLoop: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve)),
    /** Where passes run: on these threads, or (undefined) on the event loop. Closed by stop(). */
    private readonly threads?: CleanerThreadPool,
  ) {}

  /** Starts the rounds (the first one at once). */
  start(): void {
    if (this.stopped || this.timer !== undefined) return;
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.round ??= this.runRound()
        .then(() => undefined)
        .catch((error: unknown) => {
          if (error instanceof FatalError) throw error;
          this.log.error("log cleaner round failed", { error: String(error) });
        })
        .finally(() => {
          this.round = undefined;
          this.schedule(this.settings().backoffMs);
        });
    }, delayMs);
    this.timer.unref?.();
  }

  /** Stops starting passes and waits for the running ones (each stops between two batches). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.round?.catch(() => undefined);
    await this.threads?.close();
  }

  /** The stats of every partition the cleaner has looked at, by `<topic>-<partition>`. */
  partitionStats(): PartitionCleanerStats[] {
    return [...this.stats.values()];
  }

  statsOf(topic: string, partition: number): PartitionCleanerStats | undefined {
    return this.stats.get(`${topic}-${partition}`);
  }

  /**
   * One round: workers clean partitions until none needs it. Returns how many passes ran. Tests and the
   * timer call it; with `force` every compacted partition is cleaned once even if no rule asks.
   */
  async runRound(options: { force?: boolean } = {}): Promise<number> {
    const settings = this.settings();
    // log.cleaner.threads=0 runs no cleaner thread in Apache either.
    if (!settings.enabled || settings.threads < 1) return 0;
    this.failed.clear();
    // A deleted topic's partitions (or ones closed otherwise) leave the metrics.
    const open = new Set((await this.partitions.openPartitions()).map((p) => `${p.topic}-${p.partition}`));
    for (const key of [...this.stats.keys()]) if (!open.has(key)) this.stats.delete(key);
    const threads = settings.threads;
    const mapBytes = Math.floor(settings.dedupeBufferSizeBytes / threads);
    // Apache accepts any double here; a map must be allowed to hold something, and cannot be fuller than full.
    const loadFactor = Math.min(1, Math.max(0.01, Number.isFinite(settings.ioBufferLoadFactor) ? settings.ioBufferLoadFactor : 0.9));
    let passes = 0;
    const forced = new Set<string>();
    this.threads?.retain(threads);
    const worker = async (index: number): Promise<void> => {
      let map: OffsetMap | undefined;
      const runner = this.threads?.runner(index, { memoryBytes: mapBytes, loadFactor });
      for (;;) {
        if (this.stopped) return;
        const next = await this.pickNext(options.force === true ? forced : undefined);
        if (next === undefined) return;
        const key = `${next.partition.topic}-${next.partition.partition}`;
        this.busy.add(key);
        try {
          let where: PassPlace;
          if (runner !== undefined) where = { runner, stopped: this.stopping.signal };
          else {
            map ??= new OffsetMap(mapBytes, loadFactor);
            where = { map, throttle: (bytes) => this.throttle(bytes), shouldStop: () => this.stopped };
          }
          if (await this.cleanOne(next.partition, next.config, where, options.force === true)) passes++;
        } finally {
          this.busy.delete(key);
          // Give the map's memory back between passes; the next pass grows its own from small.
          map?.clear();
        }
      }
    };
    await Promise.all(Array.from({ length: threads }, (_, index) => worker(index)));
    return passes;
  }

  /** The compacted partition with the highest dirty ratio that needs a pass (any, once, with `forced`). */
  private async pickNext(forced: Set<string> | undefined): Promise<{ partition: Partition; config: CompactionConfig } | undefined> {
    let best: { partition: Partition; config: CompactionConfig; ratio: number } | undefined;
    const nowMs = this.clock.nowMs();
    for (const partition of await this.partitions.openPartitions()) {
      const key = `${partition.topic}-${partition.partition}`;
      if (partition.closing || partition.log.failed || this.busy.has(key) || this.failed.has(key) || this.uncleanable.has(key) || forced?.has(key)) {
        continue;
      }
      const config = this.compactionConfigOf(partition.topic);
      if (config === undefined) continue;
      const range = await partition.cleanableRange(nowMs, config);
      const stats = this.statsFor(partition);
      stats.dirtyRatio = range.dirtyRatio;
      stats.dirtyBytes = range.dirtyBytes;
      if (forced === undefined && !(await partition.needsCleaning(nowMs, config, range))) continue;
      if (best === undefined || range.dirtyRatio > best.ratio) best = { partition, config, ratio: range.dirtyRatio };
    }
    if (best !== undefined) forced?.add(`${best.partition.topic}-${best.partition.partition}`);
    return best;
  }

  /** The topic's compaction settings, or undefined when its cleanup.policy has no `compact`. */
  compactionConfigOf(topicName: string): CompactionConfig | undefined {
    const topic = this.topics.get(topicName);
    if (topic === undefined) return undefined;
    const resolved = resolveTopicConfigWithDefaults(topic.configs, this.runtimeConfig.topicDefaults());
    if (!resolved.cleanupPolicy.compact) return undefined;
    return {
      minCleanableDirtyRatio: resolved.minCleanableDirtyRatio,
      minCompactionLagMs: resolved.minCompactionLagMs,
      maxCompactionLagMs: resolved.maxCompactionLagMs,
      deleteRetentionMs: resolved.deleteRetentionMs,
      segmentBytes: resolved.segmentBytes,
      indexIntervalBytes: DEFAULT_LOG_CONFIG.indexIntervalBytes,
    };
  }

  private statsFor(partition: Partition): PartitionCleanerStats {
    const key = `${partition.topic}-${partition.partition}`;
    let stats = this.stats.get(key);
    if (stats === undefined) {
      stats = {
        topic: partition.topic,
        partition: partition.partition,
        passes: 0,
        bytesRead: 0,
        bytesWritten: 0,
        bytesReclaimed: 0,
        recordsRemoved: 0,
        dirtyRatio: 0,
        dirtyBytes: 0,
        cleanedUpToOffset: partition.log.cleanerCheckpoint.firstDirtyOffset,
        lastPassMs: -1,
        lastPassDurationMs: 0,
        lastError: undefined,
      };
      this.stats.set(key, stats);
    }
    return stats;
  }

  /** One pass over one partition; true when it ran. */
  private async cleanOne(partition: Partition, config: CompactionConfig, where: PassPlace, force: boolean): Promise<boolean> {
    const stats = this.statsFor(partition);
    const startedMs = this.clock.monotonicMs();
    try {
      const outcome = await partition.clean({ nowMs: this.clock.nowMs(), config, force, ...where });
      stats.dirtyRatio = outcome.range.dirtyRatio;
      stats.dirtyBytes = outcome.range.dirtyBytes;
      if (outcome.kind !== "cleaned") return false;
      const pass = outcome.stats;
      stats.passes++;
      stats.bytesRead += pass.bytesRead;
      stats.bytesWritten += pass.bytesWritten;
      stats.bytesReclaimed += Math.max(0, pass.sizeBeforeBytes - pass.sizeAfterBytes);
      stats.recordsRemoved += pass.recordsRemoved;
      stats.cleanedUpToOffset = partition.log.cleanerCheckpoint.firstDirtyOffset;
      stats.lastPassMs = this.clock.nowMs();
      stats.lastPassDurationMs = this.clock.monotonicMs() - startedMs;
      stats.lastError = undefined;
      const after = await partition.cleanableRange(this.clock.nowMs(), config);
      stats.dirtyRatio = after.dirtyRatio;
      stats.dirtyBytes = after.dirtyBytes;
      this.log.info("log cleaner pass", {
        partition: `${partition.topic}-${partition.partition}`,
        reason: outcome.reason,
        segments: pass.segmentsCleaned,
        bytesRead: pass.bytesRead,
        sizeBeforeBytes: pass.sizeBeforeBytes,
        sizeAfterBytes: pass.sizeAfterBytes,
        recordsRemoved: pass.recordsRemoved,
        cleanedUpToOffset: pass.endOffset,
        durationMs: stats.lastPassDurationMs,
        ...(pass.mapFull ? { offsetMapFull: true } : {}),
      });
      // A pass that moved nothing forward would be picked again at once: leave the partition until the
      // next round instead of spinning on it.
      if (pass.endOffset <= outcome.range.firstDirtyOffset && pass.recordsRemoved === 0) this.failed.add(`${partition.topic}-${partition.partition}`);
      return true;
    } catch (error) {
      if (error instanceof FatalError) throw error;
      stats.lastError = error instanceof Error ? error.message : String(error);
      const key = `${partition.topic}-${partition.partition}`;
      // Damage in a segment does not go away by itself: like Apache's cleaner, which marks such a log
      // uncleanable, leave the partition alone until the broker restarts (after the operator's repair)
      // rather than failing and logging again every round. Anything else is tried again next round.
      // A DecodeError is damage too: records inside a batch whose CRC holds that do not parse (written before
      // Produce checked records) will not parse next round either.
      const damaged = error instanceof CorruptStateError || error instanceof DecodeError;
      (damaged ? this.uncleanable : this.failed).add(key);
      if (!partition.closing) {
        this.log.error(
          damaged
            ? "log cleaner pass failed on damaged data; the partition is not cleaned again until the broker restarts"
            : "log cleaner pass failed; the partition is skipped until the next round",
          { partition: key, error: stats.lastError },
        );
      }
      return false;
    }
  }

  /**
   * Called between batches of a pass on the event loop: gives the loop back after each slice of work, and
   * holds a worker back while all workers together read faster than log.cleaner.io.max.bytes.per.second.
   */
  private async throttle(bytes: number): Promise<void> {
    const nowMs = this.clock.monotonicMs();
    // A pass's CPU work (decoding, hashing, recompressing) runs on the event loop between its reads and
    // writes; left alone it holds the loop for tens of batches at a time, and every request waits behind
    // it. Giving the loop back once a slice of work has run bounds that wait to about one slice.
    if (nowMs - this.lastYieldMs >= YIELD_AFTER_MS) {
      await this.yieldToLoop();
      this.lastYieldMs = this.clock.monotonicMs();
    }
    const limit = this.settings().ioMaxBytesPerSecond;
    if (!Number.isFinite(limit) || limit <= 0) return;
    // The window restarts every few seconds so that an idle spell does not bank a burst.
    if (nowMs - this.throttleStartMs > 5000) {
      this.throttleStartMs = nowMs;
      this.throttledBytes = 0;
    }
    this.throttledBytes += bytes;
    const aheadMs = (this.throttledBytes / limit) * 1000 - (nowMs - this.throttleStartMs);
    if (aheadMs > 1) await this.sleep(aheadMs);
  }
}
