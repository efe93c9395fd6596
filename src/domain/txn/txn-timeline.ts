/**
 * What happened to each transactional id lately, for people: the coordinator's in-memory record of its
 * transactions' steps (begun, partitions and groups added, decided, each partition's marker, completed),
 * each with its time. The dashboard's transaction page and GET /v1/transactions/:id show it
 * (docs/architecture.md, "HTTP side-port").
 *
 * Memory only, never persisted: the durable entry (txn-state.ts) keeps what recovery needs (the start and
 * the last update), and a restart begins every id's timeline afresh, with a "loaded" step saying in which
 * state the entry was found. Changing the durable format for a view would tie every future slot file to it.
 *
 * Derived from the entry changes the coordinator applies (`onEntry`: the entry before and after) plus the
 * marker outcomes it sees (`onMarker`), so the coordinator calls two methods and decides nothing here.
 * Also counts the transactions completed by result since start, for the dashboard's rate chart and
 * /metrics.
 *
 * Bounded: at most `idsMax` ids (the least recently changed is forgotten first) and `eventsMax` steps per id
 * (the oldest dropped first). Pure: times are arguments.
 */
import { eachPartition, type TopicPartitions, type TxnEntry, type TxnState } from "./txn-state.ts";

/**
 * The bounds: at most 2,000 × 64 steps (a step is a small object, a hundred bytes or so), some 10 MB
 * however many ids and partitions the transactions have; 64 steps hold a dozen one-partition transactions,
 * or the last one of sixty partitions.
 */
export const TXN_TIMELINE_IDS_MAX_DEFAULT = 2_000;
export const TXN_TIMELINE_EVENTS_MAX_DEFAULT = 64;

export type TxnTimelineEvent =
  /** The entry was found in this state when its slot was loaded (start-up, a take-over). */
  | { kind: "loaded"; atMs: number; state: TxnState; producerId: number; epoch: number }
  /** InitProducerId: a new producer session (epoch bump or new producer id). */
  | { kind: "initialized"; atMs: number; producerId: number; epoch: number }
  /** The first AddPartitionsToTxn / AddOffsetsToTxn of a transaction. */
  | { kind: "began"; atMs: number; producerId: number; epoch: number; partitions: string[]; groups: string[] }
  /** Partitions or groups added to the open transaction. */
  | { kind: "added"; atMs: number; partitions: string[]; groups: string[] }
  /** EndTxn's decision (or the reaper's or an operator's abort, with the epoch bumped: `fenced`). */
  | { kind: "decided"; atMs: number; result: "commit" | "abort"; fenced: boolean; partitions: number }
  /** One partition's marker: written here, queued for its leader, dropped or superseded, or failed (retried). */
  | { kind: "marker"; atMs: number; topic: string; partition: number; result: "commit" | "abort"; outcome: string }
  /** Complete*: every marker done, offsets committed or discarded. */
  | { kind: "completed"; atMs: number; result: "commit" | "abort" }
  /** A state write failed and the entry went back to what is durable. */
  | { kind: "restored"; atMs: number; state: TxnState }
  /** The id expired (idle past transactional.id.expiration.ms) or its slot was handed to another broker. */
  | { kind: "forgotten"; atMs: number };

export interface TxnTimelineOptions {
  idsMax?: number;
  eventsMax?: number;
}

function partitionNames(set: readonly TopicPartitions[]): string[] {
  return [...eachPartition(set)].map((tp) => `${tp.topic}-${tp.partition}`);
}

const isPrepare = (state: TxnState | undefined) => state === "PrepareCommit" || state === "PrepareAbort";
const isComplete = (state: TxnState | undefined) => state === "CompleteCommit" || state === "CompleteAbort";

export class TxnTimeline {
  private readonly byId = new Map<string, TxnTimelineEvent[]>();
  private readonly idsMax: number;
  private readonly eventsMax: number;
  /** Transactions completed since start, by result. */
  readonly completed = { commit: 0, abort: 0 };

  constructor(opts: TxnTimelineOptions = {}) {
    this.idsMax = Math.max(1, opts.idsMax ?? TXN_TIMELINE_IDS_MAX_DEFAULT);
    this.eventsMax = Math.max(1, opts.eventsMax ?? TXN_TIMELINE_EVENTS_MAX_DEFAULT);
  }

  /** The steps recorded for `transactionalId`, oldest first (a copy). */
  eventsOf(transactionalId: string): TxnTimelineEvent[] {
    return [...(this.byId.get(transactionalId) ?? [])];
  }

  /** Ids with a timeline. */
  get size(): number {
    return this.byId.size;
  }

  /**
   * The entry of `transactionalId` changed from `before` to `after` (undefined: none), at `nowMs`.
   * `loaded`: it was read from disk (start-up, a take-over), not changed by a request.
   */
  onEntry(transactionalId: string, before: TxnEntry | undefined, after: TxnEntry | undefined, nowMs: number, loaded = false): void {
    if (after === undefined) {
      // Only an id with a timeline gets this step: a slot handed over must not start thousands of them.
      if (before !== undefined && this.byId.has(transactionalId)) this.push(transactionalId, { kind: "forgotten", atMs: nowMs });
      return;
    }
    if (loaded) {
      // Only open transactions: the others have no steps left to show, and a start loads every id.
      if (after.state === "Ongoing" || isPrepare(after.state)) {
        this.push(transactionalId, { kind: "loaded", atMs: nowMs, state: after.state, producerId: after.producerId, epoch: after.epoch });
      }
      return;
    }
    if (before === undefined) {
      if (after.state === "Empty") this.push(transactionalId, { kind: "initialized", atMs: after.updatedMs, producerId: after.producerId, epoch: after.epoch });
      return;
    }
    if (before === after) return;
    const atMs = after.updatedMs;
    const from = before.state;
    const to = after.state;
    if (to === "Empty") {
      if (from !== "Empty" || before.epoch !== after.epoch || before.producerId !== after.producerId) {
        this.push(transactionalId, { kind: "initialized", atMs, producerId: after.producerId, epoch: after.epoch });
      }
      return;
    }
    if (to === "Ongoing") {
      if (from !== "Ongoing") {
        this.push(transactionalId, {
          kind: "began",
          atMs: after.ongoingSinceMs >= 0 ? after.ongoingSinceMs : atMs,
          producerId: after.producerId,
          epoch: after.epoch,
          partitions: partitionNames(after.partitions),
          groups: [...after.groups],
        });
        return;
      }
      const old = new Set(partitionNames(before.partitions));
      const partitions = partitionNames(after.partitions).filter((p) => !old.has(p));
      const groups = after.groups.filter((g) => !before.groups.includes(g));
      if (partitions.length > 0 || groups.length > 0) this.push(transactionalId, { kind: "added", atMs, partitions, groups });
      return;
    }
    // A decision follows Ongoing; Prepare* after Complete* is a failed Complete* write rolled back.
    if (isPrepare(to) && (from === "Ongoing" || from === "PrepareEpochFence")) {
      const partitions = partitionNames(after.partitions).length;
      this.push(transactionalId, { kind: "decided", atMs, result: to === "PrepareCommit" ? "commit" : "abort", fenced: after.epoch !== before.epoch, partitions });
      return;
    }
    if (isComplete(to) && isPrepare(from)) {
      const result = to === "CompleteCommit" ? "commit" : "abort";
      this.completed[result] += 1;
      this.push(transactionalId, { kind: "completed", atMs, result });
      return;
    }
    // Anything else is a step back to the durable state after a failed write (Complete* -> Prepare*, ...).
    if (from !== to) this.push(transactionalId, { kind: "restored", atMs: nowMs, state: to });
  }

  /** A marker of the decision `result` on one partition, with what became of it (written, queued, ...). */
  onMarker(transactionalId: string, topic: string, partition: number, result: "commit" | "abort", outcome: string, nowMs: number): void {
    this.push(transactionalId, { kind: "marker", atMs: nowMs, topic, partition, result, outcome });
  }

  private push(transactionalId: string, event: TxnTimelineEvent): void {
    let events = this.byId.get(transactionalId);
    if (events === undefined) events = [];
    // Re-inserted so that the Map's order is the order of last change: the first key is the one to forget.
    this.byId.delete(transactionalId);
    this.byId.set(transactionalId, events);
    events.push(event);
    if (events.length > this.eventsMax) events.splice(0, events.length - this.eventsMax);
    while (this.byId.size > this.idsMax) this.byId.delete(this.byId.keys().next().value!);
  }
}
