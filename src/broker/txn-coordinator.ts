/**
 * The transaction coordinator of this broker: runs the pure decisions of domain/txn/coordinator.ts against
 * the durable slot store (storage/txn-state-store.ts) and carries out their effects, in the order of
 * docs/architecture.md, "Transactions and idempotence":
 *
 *   1. the decision is persisted (for EndTxn: Ongoing -> PrepareCommit / PrepareAbort, with the partitions
 *      and groups) and durable before anything else happens, so no marker ever exists without it;
 *   2. EndTxn is answered (Apache's contract: once PrepareCommit is in its transaction log);
 *   3. fence: every local partition raises the producer's epoch (PartitionManager.fenceProducer) and the
 *      bump is appended to this broker's fence log for the peers (storage/fence-log.ts);
 *   4. offsets: the staged transactional offsets of each of the transaction's groups are committed or
 *      discarded (the group coordinator's offset store; when another broker serves the group's slot, the
 *      completion is queued durably for that slot's owner, storage/offset-queue.ts), at the same time as
 *   5. markers: appended durably to the partitions this broker leads, and queued durably for the leaders
 *      of the others (storage/marker-queue.ts, one file per transaction and broker);
 *   6. Prepare* -> Complete* is persisted.
 * Steps 3-6 run after the answer but still under the id's lock, so the producer's next request about the id
 * (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, InitProducerId, a retried EndTxn) is held until the
 * transaction is complete and then answered on the completed entry, instead of CONCURRENT_TRANSACTIONS and a
 * client back-off. The hold is bounded (`completionHoldMaxMs`): past it the request is answered
 * CONCURRENT_TRANSACTIONS. read_committed consumers see nothing before the markers are durable.
 * Every step is idempotent. A step that fails retriably leaves the entry in Prepare*; requests about the id
 * meanwhile try to finish it first and get CONCURRENT_TRANSACTIONS if they cannot, the id is tried again on a
 * backoff of its own (`retrySoon`: 50 ms doubling to 1 s, for as long as it is decided and owned here), and
 * the reconcile pass (every 10 s) stays the fallback. The backoff matters because until its markers land a
 * transaction holds its partitions' LSO, so every read_committed consumer of them waits with it: a marker
 * refused while its partition changes leader must not wait for the next pass, or for a next request that
 * a producer that has stopped never sends (Apache's marker channel retries on its own backoff too). A
 * FatalError (a failed fsync) is never caught: the process exits and start-up recovery finishes the work.
 *
 * Start-up: every slot is loaded (a corrupt slot fails the start), and the entries found in Prepare* are
 * driven to completion before any transactional request is answered (COORDINATOR_LOAD_IN_PROGRESS until
 * then). Entries whose completion fails retriably stay Prepare* (answered CONCURRENT_TRANSACTIONS) and go to
 * the reconcile pass.
 *
 * Concurrency: every change of one transactional id runs under that id's lock (a promise chain), so its
 * decision and its effects never interleave with another request's about the same id (and TxnOffsetCommit's
 * staging, which must not slip in between EndTxn's decision and its offset hook). The store's per-slot
 * serial writer and group commit make the writes of different ids share fsyncs.
 *
 * Ownership (cluster/ownership.ts): only the owner of a transactional id's slot answers for it (standing
 * owned; loading answers COORDINATOR_LOAD_IN_PROGRESS, leaving and elsewhere NOT_COORDINATOR), and only the
 * owner runs the timeout reaper, the expiry and the reconcile pass for it. In cluster mode no slot is loaded
 * at start; `acquireSlot` takes one over from disk (recovering its Prepare* entries) and `releaseSlot`
 * hands it over once the work in flight on its ids is done.
 *
 * Background: every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms) the reaper aborts the
 * Ongoing transactions whose timeout passed, with an epoch bump (the producer is fenced), and the reconcile
 * pass finishes Prepare* entries; every hour (transaction.remove.expired.transaction.cleanup.interval.ms)
 * transactional ids idle for transactional.id.expiration.ms (7 days) are removed.
 *
 * The verifier: `verifier` answers, for the partition side, whether a transactional batch belongs to its
 * producer's ongoing transaction (what stops a batch outside its transaction, i.e. hanging transactions),
 * and if not why, as Apache's coordinator does: unknown producer id, fenced epoch, a decision in progress,
 * or a partition not added. It is an in-memory index of the entries by producer id, updated as their
 * changes become durable; an entry leaving Ongoing changes it as soon as the decision is made.
 *
 * Peers' partitions do not read this index: they ask with AddPartitionsToTxn verifyOnly over the Kafka
 * protocol (broker/remote-txn-verifier.ts), which `verifyPartitions` answers. In cluster mode the `waker`
 * tells the leader a marker was queued for, and every broker when a fence was published, at once.
 *
 * A group coordinator on another broker verifies a TxnOffsetCommit with `verifyPartitions` (the group's
 * `__consumer_offsets` slot); `withVerifiedGroup` is the local form. A former slot owner's late journal
 * writes go to files of its own epoch (storage/slot-files.ts), never read again.
 *
 * Not done here: waiting for a peer to apply queued markers before Complete*
 * (Apache's coordinator completes only once every leader has acknowledged its markers; here the producer's
 * next transaction could reach a peer's partition before the previous one's marker), and transaction
 * version 2 (EndTxn v5).
 */
import { SLOT_COUNT, slotOf, type Ownership } from "../cluster/ownership.ts";
import { markerDisposition, type MarkerSpec, type MarkerWriteResult } from "../cluster/marker-queue-watcher.ts";
import type { Waker } from "../cluster/waker.ts";
import { GROUP_OFFSETS_TOPIC } from "./remote-txn-verifier.ts";
import {
  DEFAULT_COORDINATOR_EPOCH,
  NO_EFFECTS,
  TIMED_OUT_TRANSACTION_SWEEP_INTERVAL_MS,
  TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
  abortOngoing,
  abortTimedOut,
  addOffsets,
  addPartitions,
  completeTxn,
  endTxn,
  expire,
  initProducerId,
  initProducerIdAnswer,
  isExpired,
  isTimedOut,
  needsNewProducerId,
  recoveryEffects,
  verifyPartitions,
  type AddOffsetsInput,
  type AddPartitionsInput,
  type EndTxnInput,
  type FenceEffect,
  type InitProducerIdInput,
  type MarkersEffect,
  type ProducerRef,
  type TxnDecision,
  type VerifiedPartition,
} from "../domain/txn/coordinator.ts";
import {
  NO_PRODUCER_EPOCH,
  NO_PRODUCER_ID,
  TXN_STATES,
  containsPartition,
  eachPartition,
  toTopicPartitions,
  type TopicPartitions,
  type TxnEntry,
  type TxnState,
} from "../domain/txn/txn-state.ts";
import { TxnTimeline } from "../domain/txn/txn-timeline.ts";
import type { TransactionVerifier } from "../domain/txn/verifier.ts";
import { FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Clock } from "../platform/clock.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import type { Logger } from "../platform/logger.ts";
import type { MarkerQueue, QueuedMarkers } from "../storage/marker-queue.ts";
import type { AllocateResult } from "../storage/producer-id-store.ts";
import type { TxnStateStore } from "../storage/txn-state-store.ts";

/** transaction.remove.expired.transaction.cleanup.interval.ms (Apache's default, 1 hour). */
export const TRANSACTIONAL_ID_EXPIRATION_CHECK_INTERVAL_MS = 3_600_000;

/**
 * What the partition side answers for the coordinator: markers on partitions this broker leads, and the
 * fence of an old epoch on every local partition. PartitionManager implements it.
 */
export interface TxnPartitionSide {
  writeMarker(topic: string, partition: number, marker: MarkerSpec): Promise<MarkerWriteResult>;
  fenceProducer(producerId: number, newEpoch: number): void | Promise<void>;
}

/** The decision an offset completion carries, so that a group slot's owner elsewhere can apply it exactly once. */
export interface TxnOffsetCompletion {
  readonly transactionalId: string;
  readonly producerEpoch: number;
  /** The decision time (the Prepare* entry's update time): with the producer, it names the decision. */
  readonly decidedMs: number;
  /** Every group of the transaction. */
  readonly groups: readonly string[];
}

/**
 * The offset hook: commit or discard what a producer staged for a group (GroupCoordinator implements it).
 * Resolves once the completion is durable: applied in the group's slot, or, when another broker serves
 * that slot, queued durably for it (storage/offset-queue.ts), which is the hand-off.
 */
export interface TxnOffsetHook {
  completeTransactionalOffsets(groupId: string, producerId: number, commit: boolean, txn?: TxnOffsetCompletion): Promise<number>;
}

export interface TxnCoordinatorOptions {
  /** transaction.max.timeout.ms */
  transactionMaxTimeoutMs: number;
  /** transactional.id.expiration.ms */
  transactionalIdExpirationMs?: number;
  /** transaction.abort.timed.out.transaction.cleanup.interval.ms */
  abortTimedOutTransactionsIntervalMs?: number;
  /** transaction.remove.expired.transaction.cleanup.interval.ms */
  expirationCheckIntervalMs?: number;
  /** The coordinator epoch written into markers (of every slot loaded at start; `acquireSlot` gives its own). */
  coordinatorEpoch?: number;
  /**
   * Load every slot at start (single-broker mode, the default). False in cluster mode: no slot is loaded
   * until the ownership manager hands it over with `acquireSlot`.
   */
  loadAllSlotsAtStart?: boolean;
  /** Run the reaper, reconcile and expiry timers (tests call the passes themselves). */
  timers?: boolean;
  /**
   * How long a request about a transactional id waits for the previous request's work on it (typically an
   * answered EndTxn's markers and Complete*) before it is answered CONCURRENT_TRANSACTIONS. Default
   * TXN_COMPLETION_HOLD_MAX_MS.
   */
  completionHoldMaxMs?: number;
  /**
   * Cluster mode: Complete* waits until the peers have applied this decision's queued markers (see
   * `queuedMarkersApplied`), for at most this long per attempt; undefined: complete once they are queued.
   */
  queuedMarkersWaitMs?: number;
  /**
   * The pauses between looks at the queued files while waiting (the first, doubling up to the longest);
   * default 5 and 200 ms. A "markers-applied" wake-up for this broker cuts a pause short.
   */
  queuedMarkersPausesMs?: { firstMs: number; maxMs: number };
  /**
   * Test hook, never set in production: called as each step of an EndTxn is done, before the next runs
   * (`prepare`: Prepare* durable, before the answer and any effect; `offsets`: the offset hook done; `markers`:
   * every marker written or queued (and applied, when the coordinator waits for that); `complete`: Complete*
   * durable). main.ts sets it from BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=<phase> to
   * SIGKILL the process there, so a crash test lands in that window deterministically.
   */
  afterEndTxnStep?: (phase: EndTxnPhase, transactionalId: string) => void;
  /**
   * Test hook, never set in production: awaited after an EndTxn decision is answered and before its effects
   * (fence, offsets, markers, Complete*). main.ts sets it from BUNKA_TEST_HOLD_AFTER_ENDTXN_ANSWER=1 to a
   * promise that never settles for the first decision, so that a test can SIGKILL the process once the
   * client has reported the answer, with the decision durable and no marker written.
   */
  afterEndTxnAnswered?: (transactionalId: string) => Promise<void>;
}

/**
 * The default bound on how long a request about a transactional id is held while the id's previous work
 * (an answered EndTxn's markers and Complete*, a few fsyncs) finishes. Well under the clients' request
 * timeouts (30 s and more), far above a healthy completion (milliseconds).
 */
export const TXN_COMPLETION_HOLD_MAX_MS = 5_000;

/**
 * The backoff of `retrySoon`: the first try again of a decided transaction whose effects failed retriably,
 * doubling up to the longest. A leader change takes a lease's time at most, so a second is plenty between
 * tries, and far less than the reconcile pass's 10 s that read_committed consumers would wait otherwise.
 */
export const TXN_RETRY_BACKOFF_MS = { firstMs: 50, maxMs: 1_000 } as const;

/**
 * The steps of an answered EndTxn, in order (docs/architecture.md, "Transactions and idempotence"): `prepare`
 * from taking the id's lock until Prepare* is durable, `offsets` the offset hook (only when groups were
 * added), `markers` until every self-led marker is durable and every peer-led one queued, `complete` until
 * Complete* is durable.
 */
export const ENDTXN_PHASES = ["prepare", "offsets", "markers", "complete"] as const;
export type EndTxnPhase = (typeof ENDTXN_PHASES)[number];

/** Reports an EndTxn phase, timed from `sinceMs` or from the end of the previous phase. */
type PhaseTimer = ((phase: EndTxnPhase, sinceMs?: number) => void) & { nowMs(): number };

/** Told how long each step of every EndTxn that wrote a decision took (for /metrics). */
export interface TxnObserver {
  onEndTxnPhase(phase: EndTxnPhase, durationMs: number): void;
}

export interface TxnCoordinatorDeps {
  store: TxnStateStore;
  allocateProducerId: () => Promise<AllocateResult>;
  ownership: Ownership;
  partitions: TxnPartitionSide;
  offsets: TxnOffsetHook;
  fenceLog: { append(fence: { producerId: number; epoch: number; timestampMs: number }): Promise<void> };
  markerQueue: { enqueue(brokerId: number, markers: QueuedMarkers, viaBroker?: number): Promise<string> } & Partial<Pick<MarkerQueue, "filesOf" | "read" | "remove">>;
  clock: Clock;
  /**
   * The timers of `retrySoon` (systemTimers by default; a test's manual timers make each backoff a step).
   * Given, they run even with `options.timers` false.
   */
  backoffTimers?: Timers;
  log: Logger;
  options: TxnCoordinatorOptions;
  /** Called with a FatalError met in the background (default: rethrown out of any request, so the process exits). */
  onFatal?: (error: FatalError) => void;
  observer?: TxnObserver;
  /**
   * Cluster mode: wakes the leader a marker was queued for, and every broker when a fence was published,
   * once the file is durable (the targets' polls stay the fallback). Absent: nobody is woken.
   */
  waker?: Waker;
  /**
   * Cluster mode: asks the broker a marker file was queued for to apply it now, with a request between
   * brokers (cluster/peer-marker-wake.ts); resolves true once that broker answered (it has applied what it
   * found of the producer's files), false when it could not be asked. Absent, or false: the etcd wake-up
   * instead. Either way the files stay the truth: the answer only makes the coordinator look again.
   */
  askPeerToApply?: (brokerId: number, markers: QueuedMarkers) => Promise<boolean>;
}

export interface ProducerIdAndEpochAnswer {
  errorCode: number;
  producerId: number;
  producerEpoch: number;
}

export interface DescribedTransaction {
  errorCode: number;
  transactionalId: string;
  transactionState: string;
  transactionTimeoutMs: number;
  transactionStartTimeMs: number;
  producerId: number;
  producerEpoch: number;
  topics: { topic: string; partitions: number[] }[];
}

export interface ListedTransactions {
  errorCode: number;
  unknownStateFilters: string[];
  transactionStates: { transactionalId: string; producerId: number; transactionState: string }[];
}

/** A decided transaction's markers that are not done yet: its entry is in Prepare* (introspection). */
export interface PendingTxnMarkers {
  transactionalId: string;
  producerId: number;
  producerEpoch: number;
  coordinatorEpoch: number;
  result: "commit" | "abort";
  /** The partitions whose marker is not yet written, dropped, superseded or queued for its leader. */
  partitions: TopicPartitions[];
  /** When the decision became durable (the entry's updatedMs). */
  decidedMs: number;
}

/** What an operator's abort (`abortTransaction`) did. */
export type AbortTransactionOutcome =
  /** Fenced and aborted; `completed` false when the markers are still being retried (entry in PrepareAbort). */
  | { kind: "aborted"; entry: TxnEntry; completed: boolean }
  | { kind: "unknown" }
  /** Nothing to abort: the entry is not Ongoing (also a decision still in Prepare* after a retry). */
  | { kind: "not-ongoing"; entry: TxnEntry }
  /** NOT_COORDINATOR (another broker's slot, closing, a failed write) or COORDINATOR_LOAD_IN_PROGRESS. */
  | { kind: "unavailable"; errorCode: number };

/** A store write failed without being fatal: answered NOT_COORDINATOR (Apache's answer to KAFKA_STORAGE_ERROR). */
const STORE_FAILED: TxnDecision = { errorCode: ErrorCode.NOT_COORDINATOR, entry: undefined, write: false, effects: NO_EFFECTS };

function noChange(entry: TxnEntry | undefined, errorCode: number = ErrorCode.NONE): TxnDecision {
  return { errorCode, entry, write: false, effects: NO_EFFECTS };
}

function isPrepare(state: TxnState | undefined): boolean {
  return state === "PrepareCommit" || state === "PrepareAbort";
}

export class TxnCoordinator {
  private ready = false;
  private closed = false;
  /** `queuedMarkersApplied` waits between looks, cut short by a "markers-applied" wake-up. */
  private readonly appliedWaiters = new Set<() => void>();
  /** Counts "markers applied" news, so that news arriving while a look runs sends it round again at once. */
  private appliedNews = 0;
  private readonly stopAppliedWakes: (() => void) | undefined;
  private readonly locks = new Map<string, Promise<void>>();
  /**
   * Every entry as tracked (see `track`), by transactional id (the reaper looks for Ongoing ones there) and
   * by its current producer id (the verifier's index).
   */
  private readonly byId = new Map<string, TxnEntry>();
  private readonly byPid = new Map<number, TxnEntry>();
  /** Ids whose entry is in Prepare*: decided, not yet completed. */
  private readonly unfinished = new Set<string>();
  /**
   * Partitions whose marker is already done for a decision not yet completed, by id, with the decision's
   * producer id, epoch and result: a retry of the decision writes only the rest (no duplicate markers on
   * healthy partitions while one partition keeps failing). Memory only: after a restart every marker is
   * written again, which is harmless.
   */
  private readonly markersDone = new Map<string, { key: string; partitions: Set<string>; queued: boolean }>();
  /** The ids waiting for a `retrySoon` attempt, with what cancels its timer. */
  private readonly retryTimers = new Map<string, () => void>();
  /** Complete* writes applied in memory and not yet durable, by id (see `complete`). */
  private readonly completing = new Map<string, Promise<void>>();
  private recovery: Promise<void> | undefined;
  private readonly timers: ReturnType<typeof setInterval>[] = [];
  /** The background passes in flight, by timer. */
  private readonly passes = new Set<Promise<unknown>>();
  private readonly coordinatorEpoch: number;
  /** Slots whose entries are in memory and whose decided transactions were driven on: served here. */
  private readonly loadedSlots = new Set<number>();
  /** The coordinator epoch of each slot taken over with `acquireSlot`. */
  private readonly slotEpochs = new Map<number, number>();
  private readonly expirationMs: number;
  private readonly holdMaxMs: number;
  /** Each id's recent steps with their times, in memory only (the dashboard's transaction page). */
  readonly timeline = new TxnTimeline();

  readonly verifier: TransactionVerifier = {
    verifyBatch: (producerId, producerEpoch, topic, partition) => {
      const entry = this.byPid.get(producerId);
      if (entry === undefined) return "unknown-producer";
      if (entry.epoch !== producerEpoch) return "fenced";
      if (isPrepare(entry.state)) return "deciding";
      return entry.state === "Ongoing" && containsPartition(entry.partitions, topic, partition) ? "in-transaction" : "not-in-transaction";
    },
  };

  constructor(private readonly deps: TxnCoordinatorDeps) {
    this.coordinatorEpoch = deps.options.coordinatorEpoch ?? DEFAULT_COORDINATOR_EPOCH;
    this.expirationMs = deps.options.transactionalIdExpirationMs ?? TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT;
    this.holdMaxMs = deps.options.completionHoldMaxMs ?? TXN_COMPLETION_HOLD_MAX_MS;
    // A peer applied markers this broker queued: the transactions waiting for them look again now.
    this.stopAppliedWakes = deps.waker?.onWake((target) => {
      if (target.kind === "markers-applied" && target.brokerId === deps.ownership.selfId) this.markersApplied();
    });
  }

  /** Peers applied markers this broker queued (a wake-up, or a request's answer): the waiting look again. */
  private markersApplied(): void {
    this.appliedNews += 1;
    const waiting = [...this.appliedWaiters];
    this.appliedWaiters.clear();
    for (const resolve of waiting) resolve();
  }

  /** Tells the leader that markers were queued for it: by request when possible, else by the etcd wake-up. */
  private wakeLeader(brokerId: number, queued: QueuedMarkers): void {
    const { askPeerToApply, waker } = this.deps;
    if (askPeerToApply === undefined) {
      waker?.wake({ kind: "broker", brokerId });
      return;
    }
    void askPeerToApply(brokerId, queued).then(
      (answered) => (answered ? this.markersApplied() : waker?.wake({ kind: "broker", brokerId })),
      () => waker?.wake({ kind: "broker", brokerId }),
    );
  }

  // ---- life cycle ------------------------------------------------------------------------------

  /**
   * Loads every slot (CorruptStateError for a damaged one), builds the in-memory indexes, and starts the
   * recovery of entries in Prepare* (requests answer COORDINATOR_LOAD_IN_PROGRESS until it is done; see
   * `whenReady`). Starts the background timers unless the options say not to.
   */
  async start(): Promise<void> {
    if (this.deps.options.loadAllSlotsAtStart !== false) {
      await this.deps.store.loadAll();
      for (const entry of await this.deps.store.list()) this.track(entry.transactionalId, entry, true);
      for (let slot = 0; slot < SLOT_COUNT; slot++) this.loadedSlots.add(slot);
    }
    this.recovery = this.recover().catch((error: unknown) => this.background(error));
    if (this.deps.options.timers !== false) this.startTimers();
  }

  /** Resolves once start-up recovery is over and requests are answered. */
  async whenReady(): Promise<void> {
    await this.recovery;
  }

  get isReady(): boolean {
    return this.ready && !this.closed;
  }

  private async recover(): Promise<void> {
    const ids = [...this.unfinished].filter((id) => this.owns(id)).sort();
    if (ids.length > 0) this.deps.log.info("completing transactions decided before the restart", { count: ids.length });
    let left = 0;
    try {
      left = await this.completeDecided(ids, "completing a decided transaction failed");
    } finally {
      // Whatever could not be completed stays in Prepare* (answered CONCURRENT_TRANSACTIONS) for the
      // reconcile pass; the coordinator serves everything else.
      if (left > 0) this.deps.log.warn("some decided transactions could not be completed yet; they are retried in the background", { count: left });
      this.ready = true;
    }
  }

  /**
   * Drives decided (Prepare*) transactions to completion, one at a time under each id's lock, until done or
   * closed; resolves how many are left in Prepare* (a retriable failure, logged with `failureMessage`).
   */
  private async completeDecided(ids: readonly string[], failureMessage: string): Promise<number> {
    let left = 0;
    for (const id of ids) {
      if (this.closed) break;
      const done = await this.locked(id, () => this.finish(id)).catch((error: unknown) => {
        if (error instanceof FatalError) throw error;
        this.deps.log.warn(failureMessage, { transactionalId: id, error: String(error) });
        return false;
      });
      if (!done) {
        left += 1;
        this.retrySoon(id);
      }
    }
    return left;
  }

  private startTimers(): void {
    const every = (ms: number, pass: () => Promise<unknown>) => {
      let running: Promise<unknown> | undefined;
      const timer = setInterval(() => {
        if (running !== undefined || !this.ready || this.closed) return; // the previous pass still runs
        const current: Promise<unknown> = pass()
          .catch((error: unknown) => this.background(error))
          .finally(() => {
            running = undefined;
            this.passes.delete(current);
          });
        running = current;
        this.passes.add(current);
      }, ms);
      (timer as { unref?: () => void }).unref?.();
      this.timers.push(timer);
    };
    every(this.deps.options.abortTimedOutTransactionsIntervalMs ?? TIMED_OUT_TRANSACTION_SWEEP_INTERVAL_MS, async () => {
      await this.abortTimedOutTransactions();
      await this.completeUnfinished();
    });
    every(this.deps.options.expirationCheckIntervalMs ?? TRANSACTIONAL_ID_EXPIRATION_CHECK_INTERVAL_MS, () => this.expireTransactionalIds());
  }

  /** Stops the timers, waits for every request and pass in flight, and closes the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopAppliedWakes?.();
    for (const resolve of this.appliedWaiters) resolve();
    this.appliedWaiters.clear();
    for (const timer of this.timers) clearInterval(timer);
    for (const cancel of this.retryTimers.values()) cancel();
    this.retryTimers.clear();
    await this.recovery?.catch(() => undefined);
    await Promise.all([...this.passes]).catch(() => undefined);
    await this.settled();
    await this.deps.store.close();
  }

  // ---- slot take-over (cluster mode) -----------------------------------------------------------

  /**
   * Takes slot `slot` over at coordinator epoch `epoch` (the ownership manager's acquire): reads it from disk
   * as the previous owner left it (checkpoint and journal), indexes its entries (the verifier's among them),
   * and drives every decided (Prepare*) transaction on as start-up recovery does, with `epoch` in the
   * markers; only then is the slot served (COORDINATOR_LOAD_IN_PROGRESS until then). A damaged slot rejects
   * (CorruptStateError) and stays unserved. Entries whose completion fails retriably stay Prepare* for the
   * reconcile pass.
   */
  async acquireSlot(slot: number, epoch: number): Promise<void> {
    if (this.closed) throw new Error("the transaction coordinator is closed");
    if (this.loadedSlots.has(slot)) return;
    this.slotEpochs.set(slot, epoch);
    const entries = await this.deps.store.loadSlot(slot, epoch);
    for (const entry of entries) this.track(entry.transactionalId, entry, true);
    const decided = entries.filter((entry) => isPrepare(entry.state)).map((entry) => entry.transactionalId).sort();
    const left = await this.completeDecided(decided, "completing a decided transaction of a slot taken over failed");
    if (this.closed) return;
    if (left > 0) this.deps.log.warn("some decided transactions of a slot taken over could not be completed yet; they are retried in the background", { slot, count: left });
    this.loadedSlots.add(slot);
  }

  /**
   * Hands slot `slot` over (the ownership manager's release): stops serving it, waits for the work in flight
   * on its transactional ids (their locks, Complete* writes) and for the store's writes of the slot, then
   * forgets its entries and indexes; a later `acquireSlot` reads them from disk again.
   */
  async releaseSlot(slot: number): Promise<void> {
    this.loadedSlots.delete(slot);
    for (;;) {
      const pending = [...this.locks, ...this.completing].filter(([id]) => slotOf(id) === slot).map(([, promise]) => promise);
      if (pending.length === 0) break;
      await Promise.all(pending);
    }
    await this.deps.store.releaseSlot(slot);
    for (const id of [...this.byId.keys()]) if (slotOf(id) === slot) this.track(id, undefined);
    for (const id of [...this.markersDone.keys()]) if (slotOf(id) === slot) this.markersDone.delete(id);
    this.slotEpochs.delete(slot);
  }

  /** The coordinator epoch of the id's slot. */
  private epochOf(transactionalId: string): number {
    return this.slotEpochs.get(slotOf(transactionalId)) ?? this.coordinatorEpoch;
  }

  // ---- ownership and gates ---------------------------------------------------------------------

  /** Whether this broker coordinates the transactional id: its slot is owned here and loaded. */
  owns(transactionalId: string): boolean {
    const slot = slotOf(transactionalId);
    return this.loadedSlots.has(slot) && this.deps.ownership.standing({ kind: "txn", slot }).state === "owned";
  }

  /** NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when a request about the id cannot be served now. */
  private gate(transactionalId: string): number | undefined {
    if (this.closed) return ErrorCode.NOT_COORDINATOR;
    const slot = slotOf(transactionalId);
    const standing = this.deps.ownership.standing({ kind: "txn", slot });
    if (standing.state === "loading") return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS;
    if (standing.state !== "owned") return ErrorCode.NOT_COORDINATOR;
    // Owned, and not loaded yet (a take-over under way, or one that failed and is retried).
    if (!this.ready || !this.loadedSlots.has(slot)) return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS;
    return undefined;
  }

  // ---- requests --------------------------------------------------------------------------------

  /** InitProducerId with a transactional id (the answer's code before the version rewrite). */
  async initProducerId(request: InitProducerIdInput): Promise<ProducerIdAndEpochAnswer> {
    const refused = (errorCode: number): ProducerIdAndEpochAnswer => ({ errorCode, producerId: NO_PRODUCER_ID, producerEpoch: NO_PRODUCER_EPOCH });
    const limits = { transactionMaxTimeoutMs: this.deps.options.transactionMaxTimeoutMs };
    // Apache's order: the id and the timeout are checked before the coordinator looks the id up.
    if (request.transactionalId.length === 0) return refused(ErrorCode.INVALID_REQUEST);
    if (!Number.isSafeInteger(request.timeoutMs) || request.timeoutMs <= 0 || request.timeoutMs > limits.transactionMaxTimeoutMs) {
      return refused(ErrorCode.INVALID_TRANSACTION_TIMEOUT);
    }
    const gated = this.gate(request.transactionalId);
    if (gated !== undefined) return refused(gated);
    const id = request.transactionalId;
    return this.held(id, () => refused(ErrorCode.CONCURRENT_TRANSACTIONS), async () => {
      // Under the id's lock nothing else changes the entry, so what needsNewProducerId saw is what the
      // decision sees; a new producer id is reserved (durably, asynchronously) before the synchronous update.
      await this.retryUnfinished(id);
      await this.completionDurable(id);
      const current = await this.deps.store.get(id);
      let reserved: number | undefined;
      if (needsNewProducerId(current, request, limits, this.now())) {
        const allocated = await this.deps.allocateProducerId();
        if (!allocated.ok) {
          this.deps.log.warn("could not reserve a producer id block", { reason: allocated.reason });
          return refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
        }
        reserved = allocated.producerId;
      }
      const decision = await this.persist(id, (entry) =>
        initProducerId(
          entry,
          request,
          () => {
            const producerId = reserved;
            reserved = undefined;
            return producerId;
          },
          limits,
          this.now(),
          this.epochOf(id),
        ),
      );
      if (decision.write) await this.carryOut(id, decision);
      return initProducerIdAnswer(decision);
    });
  }

  /** AddPartitionsToTxn (client form): one code for every partition. */
  async addPartitions(request: AddPartitionsInput): Promise<number> {
    if (request.transactionalId.length === 0) return ErrorCode.INVALID_REQUEST;
    const gated = this.gate(request.transactionalId);
    if (gated !== undefined) return gated;
    return this.held(request.transactionalId, () => ErrorCode.CONCURRENT_TRANSACTIONS, async () => {
      await this.retryUnfinished(request.transactionalId);
      const decision = await this.persist(request.transactionalId, (entry) => addPartitions(entry, request, this.now()));
      return decision.errorCode;
    });
  }

  /** AddPartitionsToTxn v4+ with verifyOnly: a code per partition, nothing changed. */
  async verifyPartitions(request: AddPartitionsInput): Promise<VerifiedPartition[]> {
    const all = (errorCode: number) => [...eachPartition(request.partitions)].map(({ topic, partition }) => ({ topic, partition, errorCode }));
    if (request.transactionalId.length === 0) return all(ErrorCode.INVALID_REQUEST);
    const gated = this.gate(request.transactionalId);
    if (gated !== undefined) return all(gated);
    const entry = await this.deps.store.get(request.transactionalId);
    // A group coordinator on another broker verifying a TxnOffsetCommit asks for the group's offsets
    // partition (`__consumer_offsets`, partition = the group's slot): answered from the groups the
    // transaction added with AddOffsetsToTxn, as verifyGroup answers it locally.
    const groupSlots = request.partitions.filter((t) => t.topic === GROUP_OFFSETS_TOPIC);
    const data = request.partitions.filter((t) => t.topic !== GROUP_OFFSETS_TOPIC);
    const verified = data.length === 0 ? [] : verifyPartitions(entry, { ...request, partitions: data });
    for (const t of groupSlots) {
      for (const slot of t.partitions) {
        const groups = entry?.groups.filter((g) => slotOf(g) === slot) ?? [];
        const codes = groups.length === 0 ? [verifyGroup(entry, request, "")] : groups.map((g) => verifyGroup(entry, request, g));
        verified.push({ topic: GROUP_OFFSETS_TOPIC, partition: slot, errorCode: codes.includes(ErrorCode.NONE) ? ErrorCode.NONE : codes[0]! });
      }
    }
    return verified;
  }

  /** AddOffsetsToTxn. */
  async addOffsets(request: AddOffsetsInput): Promise<number> {
    if (request.transactionalId.length === 0) return ErrorCode.INVALID_REQUEST;
    const gated = this.gate(request.transactionalId);
    if (gated !== undefined) return gated;
    return this.held(request.transactionalId, () => ErrorCode.CONCURRENT_TRANSACTIONS, async () => {
      await this.retryUnfinished(request.transactionalId);
      const decision = await this.persist(request.transactionalId, (entry) => addOffsets(entry, request, this.now()));
      return decision.errorCode;
    });
  }

  /**
   * EndTxn: answered once the decision (Prepare*) is durable; its effects and Complete* follow under the id's
   * lock, so the producer's next request about the id waits for them (see `held`). The producer id and epoch
   * of the answer (EndTxn v5+ only) are the entry's on success, -1 otherwise. A FatalError before the answer
   * rejects the request; after it, it goes where background failures go (the process exits).
   */
  endTxn(request: EndTxnInput): Promise<ProducerIdAndEpochAnswer> {
    const refused = (errorCode: number): ProducerIdAndEpochAnswer => ({ errorCode, producerId: NO_PRODUCER_ID, producerEpoch: NO_PRODUCER_EPOCH });
    if (request.transactionalId.length === 0) return Promise.resolve(refused(ErrorCode.INVALID_REQUEST));
    const gated = this.gate(request.transactionalId);
    if (gated !== undefined) return Promise.resolve(refused(gated));
    const id = request.transactionalId;
    return new Promise<ProducerIdAndEpochAnswer>((resolve, reject) => {
      let answered = false;
      const answer = (result: ProducerIdAndEpochAnswer) => {
        answered = true;
        resolve(result);
      };
      const work = this.held(id, () => answer(refused(ErrorCode.CONCURRENT_TRANSACTIONS)), async () => {
        const phases = this.phaseTimer();
        await this.retryUnfinished(id);
        const decision = await this.persist(id, (entry) => endTxn(entry, request, this.now(), this.epochOf(id)));
        if (decision.errorCode !== ErrorCode.NONE || decision.entry === undefined) return answer(refused(decision.errorCode));
        const decided = { errorCode: ErrorCode.NONE, producerId: decision.entry.producerId, producerEpoch: decision.entry.epoch };
        if (!decision.write) return answer(decided);
        phases?.("prepare");
        if (isPrepare(decision.entry.state)) this.deps.options.afterEndTxnStep?.("prepare", id);
        answer(decided);
        await this.deps.options.afterEndTxnAnswered?.(id);
        const completed = await this.carryOut(id, decision, phases, true);
        if (!completed) {
          this.deps.log.warn("transaction decided but not completed yet; it is retried in the background", {
            transactionalId: id,
            state: decision.entry.state,
          });
          this.retrySoon(id);
        }
      });
      work.catch((error: unknown) => (answered ? this.background(error) : reject(error)));
    });
  }

  /**
   * TxnOffsetCommit's transaction check (Apache's verification of the group's offsets partition, KIP-890):
   * the producer must be the id's current one (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), not in a
   * decision (CONCURRENT_TRANSACTIONS), and the group must have been added with AddOffsetsToTxn
   * (TRANSACTION_ABORTABLE otherwise). `stage` then runs under the id's lock, so the staged offsets cannot
   * land after an EndTxn's offset hook already ran. The slot need not be owned here: TxnOffsetCommit goes
   * to the group's coordinator.
   */
  async withVerifiedGroup<T>(ref: ProducerRef, groupId: string, stage: () => Promise<T>): Promise<{ errorCode: number; value?: T }> {
    if (ref.transactionalId.length === 0) return { errorCode: ErrorCode.INVALID_REQUEST };
    if (this.closed) return { errorCode: ErrorCode.NOT_COORDINATOR };
    if (!this.ready) return { errorCode: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS };
    // The id's entry is only known where its slot is loaded (cross-broker verification is not done here).
    if (!this.loadedSlots.has(slotOf(ref.transactionalId))) return { errorCode: ErrorCode.NOT_COORDINATOR };
    return this.held<{ errorCode: number; value?: T }>(ref.transactionalId, () => ({ errorCode: ErrorCode.CONCURRENT_TRANSACTIONS }), async () => {
      await this.completionDurable(ref.transactionalId);
      const entry = await this.deps.store.get(ref.transactionalId);
      const errorCode = verifyGroup(entry, ref, groupId);
      if (errorCode !== ErrorCode.NONE) return { errorCode };
      return { errorCode, value: await stage() };
    });
  }

  /** DescribeTransactions of one id. */
  async describe(transactionalId: string): Promise<DescribedTransaction> {
    const described = (errorCode: number, entry?: TxnEntry): DescribedTransaction => ({
      errorCode,
      transactionalId,
      transactionState: entry?.state ?? "",
      transactionTimeoutMs: entry?.timeoutMs ?? 0,
      transactionStartTimeMs: entry?.ongoingSinceMs ?? -1,
      producerId: entry?.producerId ?? NO_PRODUCER_ID,
      producerEpoch: entry?.epoch ?? NO_PRODUCER_EPOCH,
      topics: (entry?.partitions ?? []).map((t) => ({ topic: t.topic, partitions: [...t.partitions] })),
    });
    if (this.closed) return described(ErrorCode.COORDINATOR_NOT_AVAILABLE);
    if (transactionalId.length === 0) return described(ErrorCode.INVALID_REQUEST);
    const gated = this.gate(transactionalId);
    if (gated !== undefined) return described(gated);
    const entry = await this.deps.store.get(transactionalId);
    if (entry === undefined) return described(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND);
    return described(ErrorCode.NONE, entry);
  }

  /**
   * ListTransactions over the slots this broker owns: filters by state (names Apache does not know come
   * back in unknownStateFilters), by producer id, and (v1) by duration: only transactions started more than
   * `durationFilterMs` ago (a negative filter lists all).
   */
  async list(stateFilters: readonly string[], producerIdFilters: readonly number[], durationFilterMs: number): Promise<ListedTransactions> {
    if (this.closed) return { errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, unknownStateFilters: [], transactionStates: [] };
    if (!this.ready) return { errorCode: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknownStateFilters: [], transactionStates: [] };
    const states = new Set<string>();
    const unknownStateFilters: string[] = [];
    for (const name of stateFilters) {
      if ((TXN_STATES as readonly string[]).includes(name)) states.add(name);
      else if (!unknownStateFilters.includes(name)) unknownStateFilters.push(name);
    }
    const producerIds = new Set(producerIdFilters);
    const nowMs = this.now();
    const entries = await this.deps.store.list(
      (entry) =>
        (producerIds.size === 0 || producerIds.has(entry.producerId)) &&
        (stateFilters.length === 0 || states.has(entry.state)) &&
        (durationFilterMs < 0 || nowMs - entry.ongoingSinceMs > durationFilterMs) &&
        this.owns(entry.transactionalId),
    );
    return {
      errorCode: ErrorCode.NONE,
      unknownStateFilters,
      transactionStates: entries.map((e) => ({ transactionalId: e.transactionalId, producerId: e.producerId, transactionState: e.state })),
    };
  }

  /**
   * Appends one marker to a partition this broker leads, on an operator's request (WriteTxnMarkers); the
   * coordinator's state is not involved.
   */
  writeLocalMarker(topic: string, partition: number, marker: MarkerSpec): Promise<MarkerWriteResult> {
    return this.deps.partitions.writeMarker(topic, partition, marker);
  }

  /**
   * An operator's abort of an Ongoing transaction (a hanging one, typically; the HTTP side-port's admin
   * route): the timeout reaper's path whatever the transaction's age, under the id's lock: epoch + 1 (the
   * producer is fenced), PrepareAbort durable, staged offsets discarded, markers, CompleteAbort.
   */
  async abortTransaction(transactionalId: string): Promise<AbortTransactionOutcome> {
    if (transactionalId.length === 0) return { kind: "unknown" };
    const gated = this.gate(transactionalId);
    if (gated !== undefined) return { kind: "unavailable", errorCode: gated };
    return this.locked(transactionalId, async () => {
      await this.retryUnfinished(transactionalId);
      const decision = await this.persist(transactionalId, (entry) => abortOngoing(entry, this.now(), this.epochOf(transactionalId)));
      if (decision.errorCode !== ErrorCode.NONE) return { kind: "unavailable", errorCode: decision.errorCode };
      if (decision.entry === undefined) return { kind: "unknown" };
      if (!decision.write) return { kind: "not-ongoing", entry: decision.entry };
      this.deps.log.info("aborting a transaction on an operator's request", {
        transactionalId,
        producerId: decision.entry.producerId,
        epoch: decision.entry.epoch,
      });
      const completed = await this.carryOut(transactionalId, decision);
      return { kind: "aborted", entry: (await this.deps.store.get(transactionalId)) ?? decision.entry, completed };
    });
  }

  // ---- read-only introspection (the HTTP side-port) --------------------------------------------

  /** The durable entries of the slots this broker owns that satisfy `filter`, by transactional id. */
  entries(filter?: (entry: TxnEntry) => boolean): Promise<TxnEntry[]> {
    return this.deps.store.list((entry) => this.owns(entry.transactionalId) && (filter === undefined || filter(entry)));
  }

  /** The durable entry of an id whose slot this broker owns, or undefined. */
  async entry(transactionalId: string): Promise<TxnEntry | undefined> {
    return this.owns(transactionalId) ? this.deps.store.get(transactionalId) : undefined;
  }

  /**
   * The markers of decided (Prepare*) transactions that are not done yet, by transactional id: those the
   * coordinator still has to write or queue (a partition that keeps failing, a leader that is unknown).
   * Markers already queued for another broker are in the marker queue's files, not here.
   */
  async pendingMarkers(): Promise<PendingTxnMarkers[]> {
    const out: PendingTxnMarkers[] = [];
    for (const id of [...this.unfinished].sort()) {
      const entry = await this.deps.store.get(id);
      const markers = entry === undefined ? undefined : recoveryEffects(entry, this.epochOf(id))?.markers;
      if (entry === undefined || markers === undefined) continue;
      const record = this.markersDone.get(id);
      const done = record?.key === decisionKey(markers) ? record.partitions : new Set<string>();
      const left = [...eachPartition(markers.partitions)].filter((tp) => !done.has(`${tp.topic}\u0000${tp.partition}`));
      if (left.length === 0) continue;
      out.push({
        transactionalId: id,
        producerId: markers.producerId,
        producerEpoch: markers.producerEpoch,
        coordinatorEpoch: markers.coordinatorEpoch,
        result: markers.result,
        partitions: [...toTopicPartitions(left)],
        decidedMs: entry.updatedMs,
      });
    }
    return out;
  }

  // ---- background passes -----------------------------------------------------------------------

  /**
   * The timeout reaper: every Ongoing transaction of a slot this broker owns whose timeout passed is fenced
   * (epoch + 1) and aborted. Returns how many were aborted.
   */
  async abortTimedOutTransactions(): Promise<number> {
    if (!this.isReady) return 0;
    const nowMs = this.now();
    const due = [...this.byId.values()].filter((entry) => isTimedOut(entry, nowMs) && this.owns(entry.transactionalId));
    let aborted = 0;
    for (const found of due) {
      if (this.closed) break;
      const id = found.transactionalId;
      await this.locked(id, async () => {
        if (!this.owns(id)) return; // handed over while the pass waited for the lock
        const decision = await this.persist(id, (entry) =>
          entry === undefined || entry.producerId !== found.producerId ? noChange(entry) : abortTimedOut(entry, this.now(), this.epochOf(id)),
        );
        if (!decision.write) return;
        aborted += 1;
        this.deps.log.info("aborting a timed-out transaction", { transactionalId: id, producerId: found.producerId, epoch: decision.entry?.epoch });
        if (!(await this.carryOut(id, decision))) this.retrySoon(id);
      });
    }
    return aborted;
  }

  /** Drives every decided (Prepare*) transaction of an owned slot that nobody is working on to completion. */
  async completeUnfinished(): Promise<number> {
    if (!this.isReady) return 0;
    let completed = 0;
    for (const id of [...this.unfinished].sort()) {
      if (this.closed) break;
      if (this.locks.has(id) || !this.owns(id)) continue; // a request about it is finishing it
      if (await this.locked(id, async () => this.owns(id) && (await this.finish(id)))) completed += 1;
      else this.retrySoon(id);
    }
    return completed;
  }

  /** Removes transactional ids idle for transactional.id.expiration.ms (owned slots only). */
  async expireTransactionalIds(): Promise<number> {
    if (!this.isReady) return 0;
    const nowMs = this.now();
    const candidates = await this.deps.store.list((entry) => isExpired(entry, nowMs, this.expirationMs) && this.owns(entry.transactionalId));
    let removed = 0;
    for (const candidate of candidates) {
      if (this.closed) break;
      await this.locked(candidate.transactionalId, async () => {
        if (!this.owns(candidate.transactionalId)) return;
        const decision = await this.persist(candidate.transactionalId, (entry) => expire(entry, this.now(), this.expirationMs));
        if (decision.write && decision.entry === undefined) removed += 1;
      });
    }
    if (removed > 0) this.deps.log.info("expired idle transactional ids", { count: removed });
    return removed;
  }

  /**
   * Resolves once the work in flight on `transactionalId` (on every id when absent) is done, including an
   * answered EndTxn's markers and Complete* (tests, shutdown).
   */
  async settled(transactionalId?: string): Promise<void> {
    for (;;) {
      const pending =
        transactionalId === undefined
          ? [...this.locks.values(), ...this.completing.values()]
          : [this.locks.get(transactionalId), this.completing.get(transactionalId)].filter((p) => p !== undefined);
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Ids whose decision is made and not yet completed (tests, introspection). */
  unfinishedIds(): string[] {
    return [...this.unfinished].sort();
  }

  // ---- internals -------------------------------------------------------------------------------

  /**
   * With an observer: a function that reports a phase's duration, measured on the monotonic clock from
   * `sinceMs` (default: the end of the previous phase reported, or the timer's creation for the first).
   */
  private phaseTimer(): PhaseTimer | undefined {
    const observer = this.deps.observer;
    if (observer === undefined) return undefined;
    const clock = this.deps.clock;
    let lastMs = clock.monotonicMs();
    const timer = (phase: EndTxnPhase, sinceMs = lastMs) => {
      const nowMs = clock.monotonicMs();
      observer.onEndTxnPhase(phase, nowMs - sinceMs);
      lastMs = nowMs;
    };
    timer.nowMs = () => clock.monotonicMs();
    return timer;
  }

  private now(): number {
    return this.deps.clock.nowMs();
  }

  /** Runs `fn` after every earlier call for the same id has finished. */
  private locked<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.lockedWithin(id, undefined, fn);
  }

  /**
   * `locked`, for a client's request: the request is held while earlier work on the id (typically an
   * answered EndTxn's markers and Complete*) finishes, for at most `completionHoldMaxMs`; past that,
   * `onTimeout` answers instead and `fn` never runs (the work after it still waits its turn).
   */
  private held<T>(id: string, onTimeout: () => T, fn: () => Promise<T>): Promise<T> {
    return this.lockedWithin(id, { maxWaitMs: this.holdMaxMs, onTimeout }, fn);
  }

  private async lockedWithin<T>(id: string, hold: { maxWaitMs: number; onTimeout: () => T } | undefined, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(id);
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = (previous ?? Promise.resolve()).then(() => mine);
    this.locks.set(id, tail);
    // The id is free once the tail settles: after `fn`, or after the earlier work when this call gave up.
    void tail.then(() => {
      if (this.locks.get(id) === tail) this.locks.delete(id);
    });
    try {
      if (previous !== undefined) {
        if (hold === undefined) await previous;
        else if (!(await settlesWithin(previous, hold.maxWaitMs))) return hold.onTimeout();
      }
      return await fn();
    } finally {
      release();
    }
  }

  /**
   * Applies `decide` to the id's latest entry inside the store's serial writer and resolves once the
   * result is durable (a decision that writes nothing also waits for whatever it read to be durable).
   */
  private async persist(id: string, decide: (entry: TxnEntry | undefined) => TxnDecision): Promise<TxnDecision> {
    let decision: TxnDecision | undefined;
    try {
      await this.deps.store.update(id, (entry) => {
        decision = decide(entry);
        if (decision.reason !== undefined) this.deps.log.error("a transaction transition was refused", { transactionalId: id, reason: decision.reason });
        if (!decision.write) return entry;
        // A transaction leaving Ongoing stops taking batches now, not once the decision is durable.
        if (entry?.state === "Ongoing" && decision.entry?.state !== "Ongoing") this.track(id, decision.entry);
        return decision.entry;
      });
    } catch (error) {
      if (error instanceof FatalError) throw error;
      this.deps.log.warn("a transaction state write failed", { transactionalId: id, error: String(error) });
      // The store rolled the slot back to its durable state; so does the index.
      this.track(id, await this.deps.store.get(id).catch(() => undefined));
      return STORE_FAILED;
    }
    if (decision === undefined) return STORE_FAILED;
    if (decision.write) this.track(id, decision.entry);
    // Cluster mode: durable, but perhaps in files a successor fenced off if the lease lapsed meanwhile. Not
    // answered then (retriable NOT_COORDINATOR) and not driven on here: the slot's next owner reads what was
    // durable in time and drives any decision on, as a take-over does.
    const slot = slotOf(id);
    const epoch = this.slotEpochs.get(slot);
    if (decision.write && epoch !== undefined && !this.deps.ownership.mayAct({ kind: "txn", slot }, epoch)) {
      this.deps.log.warn("a transaction state write became durable after this broker's lease may have lapsed; not answered", { transactionalId: id, slot, epoch });
      return STORE_FAILED;
    }
    return decision;
  }

  /**
   * Keeps the indexes (by id, by producer id), the unfinished set and the timeline in step with the entry
   * of `id`; `loaded`: read from disk (start-up, a take-over) rather than changed by a request.
   */
  private track(id: string, entry: TxnEntry | undefined, loaded = false): void {
    const old = this.byId.get(id);
    this.timeline.onEntry(id, old, entry, this.now(), loaded);
    if (old !== undefined && this.byPid.get(old.producerId) === old) this.byPid.delete(old.producerId);
    if (entry === undefined) this.byId.delete(id);
    else {
      this.byId.set(id, entry);
      this.byPid.set(entry.producerId, entry);
    }
    if (isPrepare(entry?.state)) this.unfinished.add(id);
    else {
      this.unfinished.delete(id);
      this.markersDone.delete(id);
    }
  }

  /**
   * A request about an id whose decision is not completed yet first tries to complete it (under the id's
   * lock), so that the producer's retries drive it on rather than wait for the reconcile pass; if it still
   * cannot complete, the request's decision answers CONCURRENT_TRANSACTIONS.
   */
  private async retryUnfinished(id: string): Promise<void> {
    if (this.unfinished.has(id)) await this.finish(id);
  }

  /**
   * Tries the id's decided transaction again after `delayMs`, under its lock, and again on a doubling
   * backoff while it stays unfinished (see the class comment). Does nothing once the id is completed,
   * handed over or the coordinator closed, or when one attempt is already scheduled; the reconcile pass
   * stays the fallback. Not with `timers: false` unless `backoffTimers` are given (tests that drive the
   * passes themselves).
   */
  private retrySoon(id: string, delayMs: number = TXN_RETRY_BACKOFF_MS.firstMs): void {
    const timers = this.deps.backoffTimers ?? (this.deps.options.timers === false ? undefined : systemTimers);
    if (this.closed || this.retryTimers.has(id) || timers === undefined) return;
    const cancel = timers.after(delayMs, () => {
      this.retryTimers.delete(id);
      if (this.closed || !this.unfinished.has(id) || !this.owns(id)) return;
      const attempt: Promise<unknown> = this.locked(id, async () => this.owns(id) && (await this.finish(id)))
        .then(
          (done) => {
            if (!done) this.retrySoon(id, Math.min(delayMs * 2, TXN_RETRY_BACKOFF_MS.maxMs));
          },
          (error: unknown) => {
            if (error instanceof FatalError) return this.background(error);
            this.deps.log.warn("finishing a decided transaction failed; it is retried", { transactionalId: id, error: String(error) });
            this.retrySoon(id, Math.min(delayMs * 2, TXN_RETRY_BACKOFF_MS.maxMs));
          },
        )
        .finally(() => this.passes.delete(attempt));
      this.passes.add(attempt);
    });
    this.retryTimers.set(id, cancel);
  }

  /** Finishes the id's entry if it is in Prepare* (start-up recovery, the reconcile pass). */
  private async finish(id: string): Promise<boolean> {
    await this.completionDurable(id);
    if (!this.unfinished.has(id)) return true;
    const entry = await this.deps.store.get(id);
    if (entry === undefined) return true;
    const effects = recoveryEffects(entry, this.epochOf(id));
    if (effects === undefined) {
      this.track(id, entry);
      return true;
    }
    return this.carryOut(id, { errorCode: ErrorCode.NONE, entry, write: true, effects });
  }

  /**
   * Carries out a durable decision's effects: the fence, then the offsets and the markers at once, then
   * Complete*. Returns whether everything it asked for is done (false: the entry stays in Prepare* for the
   * reconcile pass). `releaseBeforeDurable`: see `complete`.
   */
  private async carryOut(id: string, decision: TxnDecision, phases?: PhaseTimer, releaseBeforeDurable = false): Promise<boolean> {
    const { effects, entry } = decision;
    try {
      if (effects.fence !== undefined) await this.fence(effects.fence);
      // The offsets and the markers are independent (Apache writes the group's offset marker beside the
      // data partitions' markers), so their waits for the disk overlap.
      const startMs = phases?.nowMs();
      const offsetsDone = (async () => {
        if (effects.offsets === undefined) return;
        const { action, producerId, groups } = effects.offsets;
        const txn: TxnOffsetCompletion = {
          transactionalId: id,
          producerEpoch: entry?.epoch ?? effects.markers?.producerEpoch ?? 0,
          decidedMs: effects.markers?.decidedMs ?? entry?.updatedMs ?? 0,
          groups,
        };
        await Promise.all(groups.map((group) => this.deps.offsets.completeTransactionalOffsets(group, producerId, action === "commit", txn)));
        phases?.("offsets", startMs);
        this.deps.options.afterEndTxnStep?.("offsets", id);
      })();
      const markersDone = (async () => {
        if (effects.markers === undefined) return true;
        const done = await this.writeMarkers(id, effects.markers);
        phases?.("markers", startMs);
        if (done) this.deps.options.afterEndTxnStep?.("markers", id);
        return done;
      })();
      const [, markersWritten] = await Promise.all([offsetsDone, markersDone]);
      if (!effects.completeAfterMarkers) return true;
      if (!markersWritten || entry === undefined) return false;
      const expected = { producerId: entry.producerId, producerEpoch: entry.epoch, result: entry.state === "PrepareCommit" ? ("commit" as const) : ("abort" as const) };
      const completed = await this.complete(id, expected, phases, releaseBeforeDurable);
      if (completed.errorCode !== ErrorCode.NONE) {
        this.deps.log.warn("completing a transaction was refused", { transactionalId: id, errorCode: completed.errorCode });
        return false;
      }
      return true;
    } catch (error) {
      if (error instanceof FatalError) throw error;
      this.deps.log.warn("finishing a transaction failed; it is retried in the background", { transactionalId: id, error: String(error) });
      return false;
    }
  }

  /**
   * Prepare* -> Complete*. With `releaseBeforeDurable` (an answered EndTxn), resolved as soon as the store
   * has applied it in memory: the id's lock is then released while the write is still in flight, so the
   * producer's next request about the id (held until now) lands in the same journal write as Complete* and
   * shares its fsync. That request's answer waits for its own write, which is durable only with Complete*
   * before it. Reads of durable state about the id wait for the write first (`completionDurable`). If the
   * write fails, the store rolls back Complete* and everything after it; the entry is tracked in Prepare*
   * again, and the reconcile pass finishes it. Without it, resolved once the write is durable (STORE_FAILED
   * when it failed).
   */
  private async complete(
    id: string,
    expected: { producerId: number; producerEpoch: number; result: "commit" | "abort" },
    phases: PhaseTimer | undefined,
    releaseBeforeDurable: boolean,
  ): Promise<TxnDecision> {
    let applied!: (decision: TxnDecision) => void;
    const decided = new Promise<TxnDecision>((resolve) => (applied = resolve));
    const write = this.deps.store.update(id, (entry) => {
      const decision = completeTxn(entry, this.now(), expected);
      if (decision.reason !== undefined) this.deps.log.error("a transaction transition was refused", { transactionalId: id, reason: decision.reason });
      applied(decision);
      return decision.write ? decision.entry : entry;
    }, { deferWrite: releaseBeforeDurable });
    // The store applies the function synchronously once the slot is loaded; a failure before that rejects.
    const decision = await Promise.race([decided, write.then(() => decided)]);
    if (!decision.write) {
      await write;
      return decision;
    }
    this.track(id, decision.entry);
    if (!releaseBeforeDurable) {
      try {
        await write;
      } catch (error) {
        if (error instanceof FatalError) throw error;
        this.deps.log.warn("a transaction state write failed", { transactionalId: id, error: String(error) });
        this.track(id, await this.deps.store.get(id).catch(() => undefined));
        return STORE_FAILED;
      }
      phases?.("complete");
      this.deps.options.afterEndTxnStep?.("complete", id);
      return decision;
    }
    const durable = write.then(
      () => {
        phases?.("complete");
        this.deps.options.afterEndTxnStep?.("complete", id);
      },
      async (error: unknown) => {
        if (error instanceof FatalError) return this.background(error);
        this.deps.log.warn("completing a transaction failed; it is retried in the background", { transactionalId: id, error: String(error) });
        this.track(id, await this.deps.store.get(id).catch(() => undefined));
      },
    );
    this.completing.set(id, durable);
    void durable.then(() => {
      if (this.completing.get(id) === durable) this.completing.delete(id);
    });
    return decision;
  }

  /** Resolves once the id's Complete* write in flight (if any) is durable or has failed. */
  private async completionDurable(id: string): Promise<void> {
    await this.completing.get(id);
  }

  private async fence(fence: FenceEffect): Promise<void> {
    await this.deps.partitions.fenceProducer(fence.producerId, fence.epoch);
    await this.deps.fenceLog.append({ producerId: fence.producerId, epoch: fence.epoch, timestampMs: this.now() });
    this.deps.waker?.wake({ kind: "fences" });
  }

  /**
   * Self-led markers appended (durable before the call resolves) while peer-led ones are queued durably
   * for their leaders. Returns whether every partition is done (written, dropped as gone, superseded, or
   * queued).
   */
  private async writeMarkers(id: string, markers: MarkersEffect): Promise<boolean> {
    const { ownership, log } = this.deps;
    const self = ownership.selfId;
    const local: { topic: string; partition: number }[] = [];
    const peers = new Map<number, { topic: string; partition: number }[]>();
    const key = decisionKey(markers);
    let record = this.markersDone.get(id);
    if (record === undefined || record.key !== key) this.markersDone.set(id, (record = { key, partitions: new Set(), queued: false }));
    const finished = record.partitions;
    const tpKey = (tp: { topic: string; partition: number }) => `${tp.topic}\u0000${tp.partition}`;
    let done = true;
    for (const tp of eachPartition(markers.partitions)) {
      if (finished.has(tpKey(tp))) continue;
      const leader = ownership.partitionLeader(tp.topic, tp.partition);
      if (leader === self) local.push(tp);
      else if (leader >= 0) peers.set(leader, [...(peers.get(leader) ?? []), tp]);
      else {
        log.warn("no leader known for a transaction's partition; its marker is retried", { transactionalId: id, topic: tp.topic, partition: tp.partition });
        done = false;
      }
    }
    const spec: MarkerSpec = {
      producerId: markers.producerId,
      producerEpoch: markers.producerEpoch,
      commit: markers.result === "commit",
      coordinatorEpoch: markers.coordinatorEpoch,
    };
    // The self-led markers and the peers' queue files are independent: their fsyncs overlap.
    const written = Promise.all(
      local.map(async (tp) => {
        try {
          return markerDisposition(await this.deps.partitions.writeMarker(tp.topic, tp.partition, spec));
        } catch (error) {
          if (error instanceof FatalError) throw error;
          log.warn("writing a transaction marker failed", { transactionalId: id, topic: tp.topic, partition: tp.partition, error: String(error) });
          return "retry" as const;
        }
      }),
    );
    const queued = Promise.all(
      [...peers].map(async ([broker, tps]) => {
        const queuedMarkers: QueuedMarkers = {
          transactionalId: id,
          producerId: markers.producerId,
          producerEpoch: markers.producerEpoch,
          coordinatorEpoch: markers.coordinatorEpoch,
          result: markers.result,
          partitions: toTopicPartitions(tps),
          decidedMs: markers.decidedMs,
        };
        await this.deps.markerQueue.enqueue(broker, queuedMarkers);
        this.wakeLeader(broker, queuedMarkers);
        for (const tp of tps) {
          finished.add(tpKey(tp));
          this.timeline.onMarker(id, tp.topic, tp.partition, markers.result, `queued for broker ${broker}`, this.now());
        }
        record.queued = true;
      }),
    );
    const [results] = await Promise.all([written, queued]);
    results.forEach((outcome, i) => {
      const tp = local[i]!;
      this.timeline.onMarker(id, tp.topic, tp.partition, markers.result, outcome === "retry" ? "failed, retried" : outcome, this.now());
      if (outcome === "retry") {
        done = false;
        return;
      }
      finished.add(tpKey(tp));
      if (outcome !== "written") log.info(`transaction marker ${outcome}`, { transactionalId: id, topic: tp.topic, partition: tp.partition });
    });
    if (done && record.queued && this.deps.options.queuedMarkersWaitMs !== undefined) done = await this.queuedMarkersApplied(id, markers, this.deps.options.queuedMarkersWaitMs);
    return done;
  }

  /**
   * Waits, for at most `waitMs`, until the peers have applied (and durably removed) every
   * queued file of this decision; false when some are left (the entry stays Prepare* and is retried).
   * Complete* must wait for it: with transaction version 1 the producer's next transaction keeps its id and
   * epoch, and a batch of it reaching a partition before this decision's marker would be ended by that
   * marker, inside the wrong transaction (Apache's coordinator completes only once every leader has
   * acknowledged its markers, for the same reason). A file queued for a broker that is not live any more is
   * handed on by this coordinator to the partitions' current leaders, since nobody else reads that queue.
   */
  private async queuedMarkersApplied(id: string, markers: MarkersEffect, waitMs: number): Promise<boolean> {
    const { markerQueue, ownership, log } = this.deps;
    if (markerQueue.filesOf === undefined) return true;
    // The wait is counted in the pauses it made (5 ms, doubling to 200 ms by default), not read from a clock; a pause cut
    // short because a peer said it applied markers of this broker's counts what the clock says it took (at
    // least 1 ms), and the next pause is no longer.
    const pauses = this.deps.options.queuedMarkersPausesMs ?? QUEUED_MARKERS_PAUSES_MS_DEFAULT;
    let waitedMs = 0;
    let pauseMs = pauses.firstMs;
    let lookedAgain = false;
    for (;;) {
      const newsBefore = this.appliedNews;
      const files = await markerQueue.filesOf(markers);
      if (files.length === 0) return true;
      // A peer said it applied something while the look ran, so the look may predate it: look again at
      // once (once per pause, so that other transactions' news cannot keep this loop from pausing).
      if (!lookedAgain && this.appliedNews !== newsBefore && !this.closed) {
        lookedAgain = true;
        continue;
      }
      lookedAgain = false;
      const live = new Set(ownership.brokers().map((b) => b.brokerId));
      for (const file of files) if (!live.has(file.brokerId)) await this.handOnOrphan(id, file, live);
      if (this.closed || waitedMs >= waitMs) {
        log.info("queued transaction markers are not applied yet; the transaction completes once they are", { transactionalId: id, files: files.length });
        return false;
      }
      const sinceMs = this.now();
      if (await this.appliedOrAfter(pauseMs)) waitedMs += Math.min(pauseMs, Math.max(1, this.now() - sinceMs));
      else {
        waitedMs += pauseMs;
        pauseMs = Math.min(pauseMs * 2, pauses.maxMs);
      }
    }
  }

  /**
   * Resolves after `pauseMs` (false), or at the next "markers-applied" wake-up for this broker if sooner
   * (true). The wake-up carries nothing: the caller looks at the files again either way.
   */
  private appliedOrAfter(pauseMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const settle = (woken: boolean) => {
        clearTimeout(timer);
        this.appliedWaiters.delete(wake);
        resolve(woken);
      };
      const wake = () => settle(true);
      const timer = setTimeout(() => settle(false), pauseMs);
      this.appliedWaiters.add(wake);
    });
  }

  /** Re-queues a file left for a broker that is not live to each partition's current leader, then removes it. */
  private async handOnOrphan(id: string, file: { brokerId: number; path: string }, live: ReadonlySet<number>): Promise<void> {
    const { markerQueue, ownership, log } = this.deps;
    if (markerQueue.read === undefined || markerQueue.remove === undefined) return;
    const queued = await markerQueue.read(file.path);
    if (queued === undefined) return;
    const byLeader = new Map<number, { topic: string; partition: number }[]>();
    for (const tp of eachPartition(queued.partitions)) {
      const leader = ownership.partitionLeader(tp.topic, tp.partition);
      if (leader < 0 || !live.has(leader)) return; // no live leader known yet: the next look tries again
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), tp]);
    }
    for (const [leader, tps] of byLeader) {
      await markerQueue.enqueue(leader, { ...queued, partitions: toTopicPartitions(tps) }, file.brokerId);
      this.wakeLeader(leader, { ...queued, partitions: toTopicPartitions(tps) });
    }
    await markerQueue.remove(file.path);
    log.info("handed on transaction markers queued for a broker that left", { transactionalId: id, from: file.brokerId, to: [...byLeader.keys()] });
  }

  private background(error: unknown): void {
    if (error instanceof FatalError) {
      this.deps.log.error("transaction state cannot be made durable", { error: String(error) });
      if (this.deps.onFatal !== undefined) this.deps.onFatal(error);
      else
        queueMicrotask(() => {
          throw error;
        });
      return;
    }
    if (!this.closed) this.deps.log.warn("transaction coordinator background pass failed", { error: String(error) });
  }
}

/** Cluster mode: how long a completion waits for peers to apply its queued markers before it is left to the retries. */
export const QUEUED_MARKERS_WAIT_MS_DEFAULT = 10_000;

/** Cluster mode: the pauses between looks at a decision's queued files (see `queuedMarkersPausesMs`). */
export const QUEUED_MARKERS_PAUSES_MS_DEFAULT = { firstMs: 5, maxMs: 200 } as const;

/**
 * TxnOffsetCommit's check of the transaction (Apache's handleVerifyPartitionsInTransaction for the group's
 * offsets partition): NONE, or why the offsets may not be staged.
 */
export function verifyGroup(entry: TxnEntry | undefined, ref: ProducerRef, groupId: string): number {
  if (entry === undefined || entry.producerId !== ref.producerId) return ErrorCode.INVALID_PRODUCER_ID_MAPPING;
  if (entry.epoch !== ref.producerEpoch) return ErrorCode.PRODUCER_FENCED;
  if (isPrepare(entry.state)) return ErrorCode.CONCURRENT_TRANSACTIONS;
  if (entry.state !== "Ongoing" || !entry.groups.includes(groupId)) return ErrorCode.TRANSACTION_ABORTABLE;
  return ErrorCode.NONE;
}

/** Whether `promise` (one that never rejects) settles within `ms` milliseconds. */
async function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** One decision of one transaction: what `markersDone` records progress for. */
function decisionKey(markers: MarkersEffect): string {
  return `${markers.producerId}-${markers.producerEpoch}-${markers.decidedMs}-${markers.result}`;
}
