/**
 * Applies the transaction markers other brokers' coordinators queued for this broker
 * (`__cluster/marker_queue/to-<self>/`, storage/marker-queue.ts): every poll (2 s by default) it reads each
 * queued file, appends the markers of the partitions this broker leads (durably: `writeMarker` resolves
 * once the control batch is on disk), hands the partitions another broker now leads on to that broker's
 * queue, and removes the file once nothing of it is left. What fails retriably stays queued (the file is
 * rewritten with what is left) and is tried again at the next poll.
 *
 * Outcomes of one marker, shared with the coordinator's own marker writes (`markerDisposition`):
 * - written: done;
 * - UNKNOWN_TOPIC_OR_PARTITION: the partition no longer exists (its topic was deleted): dropped, as
 *   Apache's marker channel drops markers for partitions that are gone;
 * - INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: the partition already saw a newer producer or
 *   coordinator epoch, so this transaction was ended there by a later decision: superseded, done;
 * - anything else (not the leader, a storage error): retried.
 * A partition whose leader is unknown (-1) is retried too: losing a marker would pin its LSO forever.
 * What a pass left to retry is looked at again soon, on a backoff (`RETRY_BACKOFF_MS`, doubling up to the
 * poll interval), not only at the next poll: until its marker lands a transaction holds the partition's LSO,
 * and the usual cause, a partition changing leader, is over in well under the poll interval.
 *
 * In cluster mode a wake-up (cluster/waker.ts) for this broker polls at once, a broker that markers are
 * handed on to is woken, and so is the coordinator of a file applied in full (it completes the
 * transaction once none of its files is left); the poll stays the fallback. A coordinator may also ask
 * directly (`applyProducer`, from a peer's WriteTxnMarkers, see broker/27-write-txn-markers.ts): that
 * producer's files are applied at once and the request's answer tells the coordinator, with no etcd round
 * trip either way. Either path takes a producer's lock first, so a file is never applied by two at once.
 *
 * Also the ports the coordinator and this watcher share with the partition side (PartitionManager
 * implements them): `WriteMarker`.
 */
import { basename } from "node:path";
import { eachPartition, toTopicPartitions } from "../domain/txn/txn-state.ts";
import { FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Logger } from "../platform/logger.ts";
import type { MarkerQueue, QueuedMarkers } from "../storage/marker-queue.ts";
import { slotOf, type Ownership } from "./ownership.ts";
import type { Waker } from "./waker.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";

/** How often a broker looks for markers queued for it. */
export const MARKER_QUEUE_POLL_INTERVAL_MS = 2_000;

/** The first look again at what a pass left to retry, doubling on each pass that leaves some, up to the poll interval. */
export const RETRY_BACKOFF_MS = 50;

/** Producers whose queued files one poll applies at once (each a few fsyncs, shared when concurrent). */
const MAX_FILES_AT_ONCE = 64;

/** The producer a queued file belongs to: its name's `<producerId>-` prefix (storage/marker-queue.ts). */
function producerOfFile(path: string): string {
  const name = basename(path);
  return name.slice(0, name.indexOf("-"));
}

export interface MarkerSpec {
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly commit: boolean;
  readonly coordinatorEpoch: number;
}

export type MarkerWriteResult = { readonly ok: true; readonly offset: number } | { readonly ok: false; readonly errorCode: number };

/** Appends a COMMIT or ABORT control batch to a partition this broker leads; resolves once it is durable. */
export type WriteMarker = (topic: string, partition: number, marker: MarkerSpec) => Promise<MarkerWriteResult>;

export type MarkerDisposition = "written" | "dropped" | "superseded" | "retry";

export function markerDisposition(result: MarkerWriteResult): MarkerDisposition {
  if (result.ok) return "written";
  switch (result.errorCode) {
    case ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
      return "dropped";
    case ErrorCode.INVALID_PRODUCER_EPOCH:
    case ErrorCode.TRANSACTION_COORDINATOR_FENCED:
      return "superseded";
    default:
      return "retry";
  }
}

export interface MarkerQueueWatcherDeps {
  queue: MarkerQueue;
  ownership: Ownership;
  writeMarker: WriteMarker;
  log: Logger;
  pollIntervalMs?: number;
  /** Called with a FatalError met in the background (the process must exit). */
  onFatal?: (error: FatalError) => void;
  /**
   * Cluster mode: a wake-up for this broker polls at once (the poll stays the fallback), and a broker
   * markers are handed on to is woken.
   */
  waker?: Waker;
  /** Told of each marker made durable here (the remote verifier forgets the producer's answers then). */
  onMarkerWritten?: (topic: string, partition: number, marker: MarkerSpec) => void;
  /** The retry backoff's timers (systemTimers by default). */
  timers?: Timers;
}

export interface MarkerPollResult {
  /** Files looked at. */
  files: number;
  /** Files removed because everything in them was done. */
  completed: number;
  /** Markers appended to partitions this broker leads. */
  written: number;
  /** Partitions handed on to another broker's queue. */
  forwarded: number;
  /** Partitions left queued for the next poll. */
  retried: number;
}

export class MarkerQueueWatcher {
  private timer: ReturnType<typeof setInterval> | undefined;
  private polling: Promise<MarkerPollResult> | undefined;
  private stopped = false;
  /** Corrupt files already reported, so that the log is not flooded every poll. */
  private readonly reportedCorrupt = new Set<string>();
  private stopWakes: (() => void) | undefined;
  /** A wake-up that came while a poll ran: one more poll after it, for files that poll may have missed. */
  private wokenDuringPoll = false;
  /** The scheduled look again at what was left to retry (what cancels it), and the delay of the next one. */
  private retryCancel: (() => void) | undefined;
  private retryDelayMs = RETRY_BACKOFF_MS;
  /** Per producer (its files' name prefix), the tail of the work on its files: one at a time, in order. */
  private readonly producerTails = new Map<string, Promise<void>>();

  constructor(private readonly deps: MarkerQueueWatcherDeps) {}

  /** A wake-up: poll now (or once more right after the poll in progress). */
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
      if (target.kind === "broker" && target.brokerId === this.deps.ownership.selfId) this.wake();
    });
    this.timer = setInterval(() => {
      this.poll().catch((error: unknown) => this.background(error));
    }, this.deps.pollIntervalMs ?? MARKER_QUEUE_POLL_INTERVAL_MS);
    (this.timer as { unref?: () => void }).unref?.();
  }

  /** One pass over the queue (a pass already running is joined, not doubled). */
  poll(): Promise<MarkerPollResult> {
    this.polling ??= this.pollNow().then((result) => this.afterPass(result, true)).finally(() => {
      this.polling = undefined;
      if (this.wokenDuringPoll) {
        this.wokenDuringPoll = false;
        this.wake();
      }
    });
    return this.polling;
  }

  /**
   * Applies the files queued for this broker of one producer now, in order, and resolves once they are
   * done (applied and removed, or left for the next poll when something failed retriably). Files applied
   * here do not wake their coordinator through etcd: it asked, and is told by its request's answer.
   */
  async applyProducer(producerId: number): Promise<MarkerPollResult> {
    const result: MarkerPollResult = { files: 0, completed: 0, written: 0, forwarded: 0, retried: 0 };
    if (this.stopped) return result;
    const producer = String(producerId);
    await this.withProducer(producer, async () => {
      // Listed inside the lock: a poll that held it may have removed some of the files meanwhile.
      const paths = (await this.deps.queue.list(this.deps.ownership.selfId)).filter((path) => producerOfFile(path) === producer);
      for (const path of paths) {
        if (this.stopped) return;
        await this.applyFile(path, result, { requested: true });
      }
    });
    return this.afterPass(result, false);
  }

  /**
   * After a pass (a poll or a request's): something left to retry schedules a look again after the backoff
   * (one at a time; it doubles while passes keep leaving some, up to the poll interval); a whole poll that
   * left nothing resets the backoff (a request's pass sees one producer's files only).
   */
  private afterPass(result: MarkerPollResult, wholeQueue: boolean): MarkerPollResult {
    const pollIntervalMs = this.deps.pollIntervalMs ?? MARKER_QUEUE_POLL_INTERVAL_MS;
    if (result.retried === 0) {
      if (wholeQueue) this.retryDelayMs = RETRY_BACKOFF_MS;
      return result;
    }
    if (this.stopped || this.retryCancel !== undefined) return result;
    const delayMs = Math.min(this.retryDelayMs, pollIntervalMs);
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, pollIntervalMs);
    this.retryCancel = (this.deps.timers ?? systemTimers).after(delayMs, () => {
      this.retryCancel = undefined;
      this.wake();
    });
    return result;
  }

  /** Runs `work` once the producer's earlier work is done; the next waits for this one. */
  private withProducer(producer: string, work: () => Promise<void>): Promise<void> {
    const previous = this.producerTails.get(producer) ?? Promise.resolve();
    const run = previous.then(work);
    const tail = run.catch(() => undefined);
    this.producerTails.set(producer, tail);
    void tail.then(() => {
      if (this.producerTails.get(producer) === tail) this.producerTails.delete(producer);
    });
    return run;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopWakes?.();
    this.retryCancel?.();
    this.retryCancel = undefined;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.polling?.catch(() => undefined);
  }

  /**
   * The files of different producers are applied at once, so that their markers and removals share
   * fsyncs (with many producers a serial pass made every transaction wait for all those queued before
   * it); one producer's files go one after the other, in `list`'s order (see storage/marker-queue.ts).
   */
  private async pollNow(): Promise<MarkerPollResult> {
    const { queue, ownership } = this.deps;
    const result: MarkerPollResult = { files: 0, completed: 0, written: 0, forwarded: 0, retried: 0 };
    const byProducer = new Map<string, string[]>();
    for (const path of await queue.list(ownership.selfId)) {
      const producer = producerOfFile(path);
      byProducer.set(producer, [...(byProducer.get(producer) ?? []), path]);
    }
    const lanes = [...byProducer];
    const runLane = async (): Promise<void> => {
      for (let lane = lanes.shift(); lane !== undefined; lane = lanes.shift()) {
        const [producer, paths] = lane;
        await this.withProducer(producer, async () => {
          for (const path of paths) {
            if (this.stopped) return;
            await this.applyFile(path, result);
          }
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(MAX_FILES_AT_ONCE, lanes.length) }, runLane));
    return result;
  }

  /** Applies one queued file: this broker's markers written, others handed on, the file removed or rewritten. */
  private async applyFile(path: string, result: MarkerPollResult, how: { requested?: boolean } = {}): Promise<void> {
    const { queue, ownership, log } = this.deps;
    const self = ownership.selfId;
    result.files += 1;
    let markers: QueuedMarkers | undefined;
    try {
      markers = await queue.read(path);
    } catch (error) {
      if (error instanceof FatalError) throw error;
      if (!this.reportedCorrupt.has(path)) {
        this.reportedCorrupt.add(path);
        log.error("a queued transaction marker file cannot be read; it is left in place", { path, error: String(error) });
      }
      return;
    }
    // Gone: applied meanwhile by whoever held the producer's lock before (a poll or a request).
    if (markers === undefined) return;
    const remaining: { topic: string; partition: number }[] = [];
    const forwards = new Map<number, { topic: string; partition: number }[]>();
    const local: { topic: string; partition: number }[] = [];
    let total = 0;
    for (const tp of eachPartition(markers.partitions)) {
      total += 1;
      const leader = ownership.partitionLeader(tp.topic, tp.partition);
      if (leader === self) local.push(tp);
      else if (leader >= 0) forwards.set(leader, [...(forwards.get(leader) ?? []), tp]);
      else remaining.push(tp);
    }
    const spec: MarkerSpec = {
      producerId: markers.producerId,
      producerEpoch: markers.producerEpoch,
      commit: markers.result === "commit",
      coordinatorEpoch: markers.coordinatorEpoch,
    };
    const outcomes = await Promise.all(
      local.map(async (tp) => {
        try {
          return markerDisposition(await this.deps.writeMarker(tp.topic, tp.partition, spec));
        } catch (error) {
          if (error instanceof FatalError) throw error;
          log.warn("writing a queued transaction marker failed; it stays queued", { topic: tp.topic, partition: tp.partition, error: String(error) });
          return "retry" as const;
        }
      }),
    );
    outcomes.forEach((outcome, i) => {
      const tp = local[i]!;
      if (outcome === "retry") remaining.push(tp);
      else if (outcome === "written") {
        result.written += 1;
        this.deps.onMarkerWritten?.(tp.topic, tp.partition, spec);
      } else log.info(`queued transaction marker ${outcome}`, { topic: tp.topic, partition: tp.partition, producerId: markers.producerId, producerEpoch: markers.producerEpoch });
    });
    for (const [broker, tps] of forwards) {
      try {
        await queue.enqueue(broker, { ...markers, partitions: toTopicPartitions(tps) }, self);
        result.forwarded += tps.length;
        this.deps.waker?.wake({ kind: "broker", brokerId: broker });
      } catch (error) {
        if (error instanceof FatalError) throw error;
        remaining.push(...tps);
      }
    }
    if (remaining.length === 0) {
      await queue.remove(path);
      result.completed += 1;
      // The coordinator completes the transaction once none of its files is left: tell it now (unless it
      // asked, and learns it from its request's answer).
      const coordinator = ownership.slotOwner("txn", slotOf(markers.transactionalId));
      if (coordinator >= 0 && how.requested !== true) this.deps.waker?.wake({ kind: "markers-applied", brokerId: coordinator });
    } else {
      result.retried += remaining.length;
      if (remaining.length < total) await queue.replace(path, { ...markers, partitions: toTopicPartitions(remaining) });
    }
  }

  private background(error: unknown): void {
    if (error instanceof FatalError) {
      this.deps.log.error("transaction markers cannot be made durable", { error: String(error) });
      if (this.deps.onFatal !== undefined) this.deps.onFatal(error);
      else
        queueMicrotask(() => {
          throw error;
        });
      return;
    }
    if (!this.stopped) this.deps.log.warn("marker queue poll failed", { error: String(error) });
  }
}
