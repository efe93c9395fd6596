/**
 * The live dashboard's history: one sample a second (by default) of what its charts draw, kept in a ring
 * (sample-ring.ts) of five minutes in the broker process, so that a page opened late draws the minutes
 * before it was opened, and every open page draws the same numbers.
 *
 * A sample holds rates and latencies over the second before it: produce and fetch bytes/s, transactions
 * committed and aborted per second, EndTxn latency (as its clients see it: bunka_request_duration_seconds
 * of API key 26) and data-file fsync latency as p50 and p99 (null in a second without any), estimated from
 * the histograms of /metrics as Prometheus' histogram_quantile does (linear within a bucket); and the
 * partitions whose last stable offset is behind (LSO lag) or that hold an open transaction, with the age of
 * the oldest such transaction, at most LIVE_PARTITIONS_MAX of them, the most lagging first.
 *
 * The counters are read by `read` (broker-ports.ts reads the live broker and metrics.ts); deltas between
 * two reads make the rates, over the monotonic clock's elapsed time. Time and timers are injected.
 * Subscribers (the dashboard's event streams) are told after every sample, and told the end when the
 * sampler stops (shutdown), so that no stream outlives the side-port.
 */
import type { Clock } from "../platform/clock.ts";
import type { Timers } from "../platform/timers.ts";
import { SampleRing } from "./sample-ring.ts";

export const LIVE_SAMPLE_INTERVAL_MS_DEFAULT = 1_000;
/** Five minutes of one-second samples. */
export const LIVE_SAMPLES_KEPT_DEFAULT = 300;
/** Partitions kept per sample. */
export const LIVE_PARTITIONS_MAX = 20;
/** Subscribers at once (each is an open dashboard's event stream). */
export const LIVE_SUBSCRIBERS_MAX = 32;

export interface LivePartitionSample {
  topic: string;
  partition: number;
  /** High watermark minus last stable offset. */
  lsoLag: number;
  /** Open transactions on the partition. */
  openTransactions: number;
  /** How long the oldest transaction of this coordinator open on the partition has run; null for none. */
  oldestOpenTxnAgeMs: number | null;
}

export interface LiveSample {
  /** Wall-clock time of the sample. */
  atMs: number;
  produceBytesPerSecond: number;
  fetchBytesPerSecond: number;
  txnCommittedPerSecond: number;
  txnAbortedPerSecond: number;
  endTxnP50Ms: number | null;
  endTxnP99Ms: number | null;
  fsyncP50Ms: number | null;
  fsyncP99Ms: number | null;
  partitions: LivePartitionSample[];
}

/** What one read of the broker gives: counters since start, and the partitions' state now. */
export interface LiveCounters {
  produceBytes: number;
  fetchBytes: number;
  txnCommitted: number;
  txnAborted: number;
  /** Cumulative bucket counts over `endTxnBoundsSeconds`, then +Inf; undefined before the first EndTxn. */
  endTxnBuckets: readonly number[] | undefined;
  /** Cumulative bucket counts over `fsyncBoundsSeconds`, then +Inf. */
  fsyncBuckets: readonly number[];
  partitions: LivePartitionSample[];
}

export interface LiveSamplerDeps {
  read(): Promise<LiveCounters>;
  endTxnBoundsSeconds: readonly number[];
  fsyncBoundsSeconds: readonly number[];
  clock: Clock;
  timers: Timers;
  intervalMs?: number;
  capacity?: number;
}

/**
 * The q-quantile (0..1) of the observations between two cumulative bucket snapshots (`before` may be
 * undefined: nothing before), in the bounds' unit; null when there were none. An observation in +Inf is
 * reported at the largest finite bound, as histogram_quantile does.
 */
export function quantileBetween(bounds: readonly number[], before: readonly number[] | undefined, after: readonly number[] | undefined, q: number): number | null {
  if (after === undefined) return null;
  const delta = after.map((n, i) => n - (before?.[i] ?? 0));
  const total = delta[delta.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (delta[i]! >= rank) {
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const below = i === 0 ? 0 : delta[i - 1]!;
      const inBucket = delta[i]! - below;
      return inBucket <= 0 ? bounds[i]! : lower + (bounds[i]! - lower) * ((rank - below) / inBucket);
    }
  }
  return bounds[bounds.length - 1] ?? null;
}

export class LiveSampler {
  private readonly ring: SampleRing<LiveSample>;
  private readonly listeners = new Map<number, { onSample: () => void; onEnd: () => void }>();
  private nextListener = 0;
  private previous: { counters: LiveCounters; monotonicMs: number } | undefined;
  private cancelTimer: (() => void) | undefined;
  private stopped = false;
  private sampling: Promise<void> = Promise.resolve();
  readonly intervalMs: number;

  constructor(private readonly deps: LiveSamplerDeps) {
    this.intervalMs = deps.intervalMs ?? LIVE_SAMPLE_INTERVAL_MS_DEFAULT;
    this.ring = new SampleRing(deps.capacity ?? LIVE_SAMPLES_KEPT_DEFAULT);
  }

  /** Reads the counters once now (the base of the first rates) and samples every interval from then on. */
  start(): void {
    if (this.stopped || this.cancelTimer !== undefined) return;
    const arm = () => {
      this.cancelTimer = this.deps.timers.after(this.intervalMs, () => {
        this.sampling = this.sample().finally(() => {
          if (!this.stopped) arm();
        });
      });
    };
    this.sampling = this.sample();
    arm();
  }

  /** Stops sampling and ends every subscription (their streams close). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.sampling;
    const listeners = [...this.listeners.values()];
    this.listeners.clear();
    for (const l of listeners) l.onEnd();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** The time the ring spans when full: its capacity of intervals. */
  get windowMs(): number {
    return this.ring.capacity * this.intervalMs;
  }

  /** Every sample held, oldest first. */
  samples(): LiveSample[] {
    return this.ring.toArray();
  }

  /**
   * Calls `onSample` after each new sample and `onEnd` once when the sampler stops; the returned function
   * unsubscribes. Undefined when LIVE_SUBSCRIBERS_MAX are subscribed already, or the sampler stopped.
   */
  subscribe(onSample: () => void, onEnd: () => void): (() => void) | undefined {
    if (this.stopped || this.listeners.size >= LIVE_SUBSCRIBERS_MAX) return undefined;
    const id = this.nextListener++;
    this.listeners.set(id, { onSample, onEnd });
    return () => void this.listeners.delete(id);
  }

  /** One read; from the second one on, a sample pushed and the subscribers told. A failed read is skipped. */
  private async sample(): Promise<void> {
    let counters: LiveCounters;
    try {
      counters = await this.deps.read();
    } catch {
      return; // the next interval tries again; a dashboard must not stop the broker
    }
    const nowMono = this.deps.clock.monotonicMs();
    const previous = this.previous;
    this.previous = { counters, monotonicMs: nowMono };
    if (previous === undefined) return;
    const seconds = Math.max(0.001, (nowMono - previous.monotonicMs) / 1000);
    const rate = (now: number, before: number) => Math.max(0, now - before) / seconds;
    const ms = (seconds: number | null) => (seconds === null ? null : seconds * 1000);
    const p = previous.counters;
    this.ring.push({
      atMs: this.deps.clock.nowMs(),
      produceBytesPerSecond: rate(counters.produceBytes, p.produceBytes),
      fetchBytesPerSecond: rate(counters.fetchBytes, p.fetchBytes),
      txnCommittedPerSecond: rate(counters.txnCommitted, p.txnCommitted),
      txnAbortedPerSecond: rate(counters.txnAborted, p.txnAborted),
      endTxnP50Ms: ms(quantileBetween(this.deps.endTxnBoundsSeconds, p.endTxnBuckets, counters.endTxnBuckets, 0.5)),
      endTxnP99Ms: ms(quantileBetween(this.deps.endTxnBoundsSeconds, p.endTxnBuckets, counters.endTxnBuckets, 0.99)),
      fsyncP50Ms: ms(quantileBetween(this.deps.fsyncBoundsSeconds, p.fsyncBuckets, counters.fsyncBuckets, 0.5)),
      fsyncP99Ms: ms(quantileBetween(this.deps.fsyncBoundsSeconds, p.fsyncBuckets, counters.fsyncBuckets, 0.99)),
      partitions: [...counters.partitions]
        .sort((a, b) => b.lsoLag - a.lsoLag || (b.oldestOpenTxnAgeMs ?? -1) - (a.oldestOpenTxnAgeMs ?? -1))
        .slice(0, LIVE_PARTITIONS_MAX),
    });
    for (const l of [...this.listeners.values()]) l.onSample();
  }
}
