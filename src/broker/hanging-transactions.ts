/**
 * The hanging-transaction detector: a pass over this coordinator's entries and this broker's open
 * partitions, on a timer of its own, so that a hanging transaction is noticed (and logged, once) whether or
 * not anyone looks at /metrics or the dashboard; both read its result (docs/operations.md, "Hanging
 * transactions"). Two kinds of warning:
 * - an Ongoing transaction past its timeout (domain/txn/coordinator.ts `isTimedOut`, the reaper's own
 *   test: the reaper aborts those every 10 s, so one still there is stuck);
 * - a partition whose last stable offset stays below its high watermark for `lsoStuckGraceMs` (the first
 *   pass that sees the LSO at a value starts the clock) while no open transaction of this coordinator
 *   accounts for the producer holding it: an orphaned transaction on the partition (Apache's "hanging
 *   transaction"), or a decision whose markers are not being written.
 *
 * Each warning is logged once, when first found, and once more (at info) when it is gone; a warning that
 * comes back is logged again. Passes never overlap: `check()` (a reader wanting the state now) waits for
 * the pass in flight and runs one more. Time comes from the injected clock and timers.
 */
import { formatDuration, formatMs } from "../domain/human-durations.ts";
import { isTimedOut } from "../domain/txn/coordinator.ts";
import { PERSISTED_TXN_STATES, type TxnEntry } from "../domain/txn/txn-state.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Timers } from "../platform/timers.ts";

/** How long a partition's LSO may stay stuck behind its high watermark, unaccounted for, before a warning. */
export const LSO_STUCK_GRACE_MS_DEFAULT = 30_000;
/** How often the detector looks when nobody asks. */
export const HANGING_CHECK_INTERVAL_MS_DEFAULT = 5_000;
/** Warnings kept per result. */
export const HANGING_WARNINGS_MAX = 100;

export interface HangingWarning {
  kind: "timed-out-transaction" | "stuck-lso";
  /** One line, for people. */
  message: string;
  transactionalId: string | null;
  topic: string | null;
  partition: number | null;
  /** Since when: the transaction's start, or when the partition's LSO was first seen stuck. */
  sinceMs: number;
}

export interface HangingCheckResult {
  /** When the pass ran. */
  atMs: number;
  /** Entries per stored state (every state listed, 0 included). */
  byState: Record<string, number>;
  /** Age of the oldest Ongoing transaction, null when none is Ongoing. */
  oldestOngoingAgeMs: number | null;
  /** Oldest first, at most HANGING_WARNINGS_MAX. */
  warnings: HangingWarning[];
}

/** What the detector reads of a partition (storage/partition.ts Partition satisfies it). */
export interface WatchedPartition {
  readonly topic: string;
  readonly partition: number;
  readonly highWatermark: number;
  readonly lastStableOffset: number;
  readonly producers: { producerIdsWhere(keep: (producerId: number, currentTxnFirstOffset: number) => boolean): number[] };
  openTransactionOf(producerId: number): number | undefined;
}

export interface HangingTransactionDetectorDeps {
  /** The coordinator's entries of the slots this broker owns (TxnCoordinator.entries). */
  entries(): Promise<readonly TxnEntry[]>;
  /** The partitions this broker has open (PartitionManager.openPartitions). */
  openPartitions(): Promise<readonly WatchedPartition[]>;
  clock: Clock;
  timers: Timers;
  log: Logger;
  lsoStuckGraceMs?: number;
  intervalMs?: number;
}

function partitionKey(p: { topic: string; partition: number }): string {
  return `${p.topic}\u0000${p.partition}`;
}

/** The key a warning is logged under: the same hanging transaction keeps it from one pass to the next. */
function warningKey(w: HangingWarning): string {
  return `${w.kind}\u0000${w.transactionalId ?? ""}\u0000${w.topic ?? ""}\u0000${w.partition ?? ""}\u0000${w.sinceMs}`;
}

/** The producer whose open transaction starts earliest in the partition (the one holding its LSO), if any. */
function lsoHolder(p: WatchedPartition): { producerId: number; firstOffset: number } | undefined {
  let holder: { producerId: number; firstOffset: number } | undefined;
  for (const producerId of p.producers.producerIdsWhere((_, firstOffset) => firstOffset >= 0)) {
    const firstOffset = p.openTransactionOf(producerId);
    if (firstOffset !== undefined && (holder === undefined || firstOffset < holder.firstOffset)) holder = { producerId, firstOffset };
  }
  return holder;
}

/**
 * One pass's verdict, pure: counts by state, the oldest Ongoing age, and the warnings. `lsoSeen` (per
 * partition whose LSO is behind: that LSO and when it was first seen there) is updated in place.
 */
export function detectHanging(
  entries: readonly TxnEntry[],
  open: readonly WatchedPartition[],
  lsoSeen: Map<string, { lso: number; sinceMs: number }>,
  nowMs: number,
  graceMs: number,
): HangingCheckResult {
  const byState: Record<string, number> = {};
  // Every state an entry may be stored in is counted, 0 included.
  for (const state of PERSISTED_TXN_STATES) byState[state] = 0;
  let oldestSinceMs: number | undefined;
  const warnings: HangingWarning[] = [];
  /** producer id + partition of every open transaction that accounts for a partition's LSO. */
  const accounted = new Set<string>();
  for (const entry of entries) {
    byState[entry.state] = (byState[entry.state] ?? 0) + 1;
    if (entry.state === "Ongoing" && entry.ongoingSinceMs >= 0) {
      if (oldestSinceMs === undefined || entry.ongoingSinceMs < oldestSinceMs) oldestSinceMs = entry.ongoingSinceMs;
      if (isTimedOut(entry, nowMs)) {
        warnings.push({
          kind: "timed-out-transaction",
          message: `transaction ${JSON.stringify(entry.transactionalId)} (producer ${entry.producerId}, epoch ${entry.epoch}) has been Ongoing for ${formatDuration(nowMs - entry.ongoingSinceMs)}, past its timeout of ${formatMs(entry.timeoutMs)}`,
          transactionalId: entry.transactionalId,
          topic: null,
          partition: null,
          sinceMs: entry.ongoingSinceMs,
        });
      }
    }
    // A decision whose markers are still not written after the grace period no longer accounts for the
    // LSO it holds: that is the stuck state to show.
    const accounts = entry.state === "Ongoing" || ((entry.state === "PrepareCommit" || entry.state === "PrepareAbort") && nowMs - entry.updatedMs < graceMs);
    if (accounts) for (const t of entry.partitions) for (const p of t.partitions) accounted.add(`${entry.producerId}\u0000${t.topic}\u0000${p}`);
  }
  // Starts or keeps the stuck clock of every partition whose LSO is behind; forgets the others.
  const behind = new Set<string>();
  for (const p of open) {
    if (p.highWatermark - p.lastStableOffset <= 0) continue;
    const key = partitionKey(p);
    behind.add(key);
    const seen = lsoSeen.get(key);
    if (seen === undefined || seen.lso !== p.lastStableOffset) lsoSeen.set(key, { lso: p.lastStableOffset, sinceMs: nowMs });
  }
  for (const key of lsoSeen.keys()) if (!behind.has(key)) lsoSeen.delete(key);
  for (const p of open) {
    const seen = lsoSeen.get(partitionKey(p));
    if (seen === undefined || nowMs - seen.sinceMs < graceMs) continue;
    const holder = lsoHolder(p);
    // Held by a marker still becoming durable (no open transaction): it moves on by itself.
    if (holder === undefined || accounted.has(`${holder.producerId}\u0000${p.topic}\u0000${p.partition}`)) continue;
    warnings.push({
      kind: "stuck-lso",
      message: `${p.topic}-${p.partition}: the last stable offset has stayed at ${seen.lso}, ${p.highWatermark - seen.lso} behind the high watermark, for ${formatDuration(nowMs - seen.sinceMs)}; producer ${holder.producerId}'s transaction from offset ${holder.firstOffset} is open here and no open transaction of this coordinator accounts for it`,
      transactionalId: null,
      topic: p.topic,
      partition: p.partition,
      sinceMs: seen.sinceMs,
    });
  }
  warnings.sort((a, b) => a.sinceMs - b.sinceMs);
  return {
    atMs: nowMs,
    byState,
    oldestOngoingAgeMs: oldestSinceMs === undefined ? null : Math.max(0, nowMs - oldestSinceMs),
    warnings: warnings.slice(0, HANGING_WARNINGS_MAX),
  };
}

export class HangingTransactionDetector {
  private readonly lsoSeen = new Map<string, { lso: number; sinceMs: number }>();
  /** Keys of the warnings logged and still present. */
  private readonly logged = new Map<string, HangingWarning>();
  private last: HangingCheckResult | undefined;
  private passes: Promise<unknown> = Promise.resolve();
  private cancelTimer: (() => void) | undefined;
  private stopped = false;
  private readonly graceMs: number;
  private readonly intervalMs: number;

  constructor(private readonly deps: HangingTransactionDetectorDeps) {
    this.graceMs = deps.lsoStuckGraceMs ?? LSO_STUCK_GRACE_MS_DEFAULT;
    this.intervalMs = deps.intervalMs ?? HANGING_CHECK_INTERVAL_MS_DEFAULT;
  }

  /** Looks every `intervalMs` from now on, until `stop`. */
  start(): void {
    if (this.stopped || this.cancelTimer !== undefined) return;
    const arm = () => {
      this.cancelTimer = this.deps.timers.after(this.intervalMs, () => {
        void this.check()
          .catch((error: unknown) => this.deps.log.warn("the hanging-transaction check failed", { error: String(error) }))
          .finally(() => {
            if (!this.stopped) arm();
          });
      });
    };
    arm();
  }

  /** Stops the timer and waits for the pass in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.passes.catch(() => undefined);
  }

  /** The last pass's result, undefined before the first. */
  get latest(): HangingCheckResult | undefined {
    return this.last;
  }

  /** Runs a pass now (after the one in flight, if any) and resolves its result. */
  check(): Promise<HangingCheckResult> {
    const pass = this.passes.catch(() => undefined).then(() => this.pass());
    this.passes = pass;
    return pass;
  }

  private async pass(): Promise<HangingCheckResult> {
    const [entries, open] = await Promise.all([this.deps.entries(), this.deps.openPartitions()]);
    const result = detectHanging(entries, open, this.lsoSeen, this.deps.clock.nowMs(), this.graceMs);
    this.report(result.warnings);
    this.last = result;
    return result;
  }

  /** Logs each warning once when it appears, and once when it is gone. */
  private report(warnings: readonly HangingWarning[]): void {
    const current = new Map(warnings.map((w) => [warningKey(w), w]));
    for (const [key, w] of current) {
      if (this.logged.has(key)) continue;
      this.logged.set(key, w);
      this.deps.log.warn(`possibly hanging transaction: ${w.message}`, {
        kind: w.kind,
        ...(w.transactionalId === null ? {} : { transactionalId: w.transactionalId }),
        ...(w.topic === null ? {} : { topic: w.topic, partition: w.partition }),
      });
    }
    for (const [key, w] of this.logged) {
      if (current.has(key)) continue;
      this.logged.delete(key);
      this.deps.log.info("a possibly hanging transaction is no longer seen", {
        kind: w.kind,
        ...(w.transactionalId === null ? {} : { transactionalId: w.transactionalId }),
        ...(w.topic === null ? {} : { topic: w.topic, partition: w.partition }),
      });
    }
  }
}
