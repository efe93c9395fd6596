/**
 * The transaction coordinator's decisions (docs/architecture.md, "Transactions and idempotence"), as pure
 * functions: given the current TxnEntry of a transactional id (undefined when there is none), a request and
 * `nowMs`, each answers a TxnDecision: the error code to answer, the entry to persist (if anything changes),
 * and the effects the caller must carry out. No I/O, no clock reads, no awaits; the store applies a decision
 * inside its per-slot serial writer, so two decisions about one id never interleave.
 *
 * What the caller does with a decision, in this order:
 *   1. `write`: persist `entry` (or remove the id when `entry` is undefined) and wait until it is durable.
 *      Nothing below happens, and nothing is answered, before that.
 *   2. `effects.fence`: on every local partition, raise the producer's epoch to `fence.epoch` and clear its
 *      dedupe window (producer-state's fenceEpoch); append the bump to the fence log for peers.
 *   3. `effects.offsets`: the offset hook commits or discards the staged offsets of (group, producerId).
 *   4. `effects.markers`: append the control batches to self-led partitions, enqueue the rest for their
 *      leaders (marker_queue). Every one of these steps is idempotent, so a crash anywhere is repaired by
 *      doing them again from an entry found in Prepare* (`entriesInPrepare` at start-up).
 *   5. `effects.completeAfterMarkers`: run `completeTxn` and persist its entry (Prepare* -> Complete*).
 *   6. Answer `errorCode` (rewritten for old request versions by `rewriteForVersion`). An EndTxn decision
 *      (Prepare*) is answered right after step 1, as Apache answers once PrepareCommit is in its log; steps
 *      2-5 follow, and the caller holds the id's next requests until they are done.
 * A decision with `write: false` has no effects: it is answered at once (after the store has made durable
 * whatever state the decision read, see the store's update).
 *
 * Apache Kafka's TransactionCoordinator (handleInitProducerId, handleAddPartitionsToTransaction,
 * handleVerifyPartitionsInTransaction, endTransaction for transaction version 1, abortTimedOutTransactions)
 * and TransactionMetadata (prepareIncrementProducerEpoch, prepareProducerIdRotation,
 * prepareFenceProducerEpoch) are the reference for every answer here. Where bunka differs, it says so:
 * - AddOffsetsToTxn records the group itself instead of the group's __consumer_offsets partition;
 * - Apache crashes (IllegalStateException) on an InitProducerId retry at an exhausted epoch, and on entries
 *   in Dead or PrepareEpochFence; bunka answers the retry properly, and those states are never stored.
 * Transaction version 2 (EndTxn v5, an epoch bump per transaction, KIP-890 part 2) is not served: the
 * broker must not advertise the transaction.version feature at level 2, so clients use version 1.
 */
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import {
  NO_PRODUCER_EPOCH,
  NO_PRODUCER_ID,
  NO_TXN_START_MS,
  PRODUCER_EPOCH_MAX,
  blankTxnEntry,
  compareStrings,
  eachPartition,
  containsPartition,
  includesAllPartitions,
  isEpochExhausted,
  mergePartitions,
  toTopicPartitions,
  transition,
  type TopicPartitions,
  type TransitionResult,
  type TxnEntry,
  type TxnState,
} from "./txn-state.ts";

/** transaction.max.timeout.ms: the largest transaction timeout a producer may ask for (15 minutes). */
export const TRANSACTION_MAX_TIMEOUT_MS_DEFAULT = 900_000;
/** transactional.id.expiration.ms: an id idle this long, with no open transaction, is removed (7 days). */
export const TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT = 604_800_000;
/** How often the owner of a slot looks for timed-out transactions (the timeout reaper, docs/architecture.md). */
export const TIMED_OUT_TRANSACTION_SWEEP_INTERVAL_MS = 10_000;
/** The coordinator epoch of single-broker mode, written into markers (control record value). */
export const DEFAULT_COORDINATOR_EPOCH = 0;

export interface CoordinatorLimits {
  readonly transactionMaxTimeoutMs: number;
}

export type TxnResult = "commit" | "abort";

/** Raise `producerId`'s epoch to `epoch` on every local partition (and via the fence log, on peers). */
export interface FenceEffect {
  readonly producerId: number;
  readonly epoch: number;
}

/** Commit or discard the staged transactional offsets of (group, producerId) for each group. */
export interface OffsetsEffect {
  readonly action: "commit" | "discard";
  readonly producerId: number;
  readonly groups: readonly string[];
}

/** Write a COMMIT or ABORT control batch for the producer to each partition. */
export interface MarkersEffect {
  readonly result: TxnResult;
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly coordinatorEpoch: number;
  readonly partitions: readonly TopicPartitions[];
  /** The Prepare* entry's update time: with the producer id and epoch it names this one transaction. */
  readonly decidedMs: number;
}

export interface TxnEffects {
  readonly fence: FenceEffect | undefined;
  readonly offsets: OffsetsEffect | undefined;
  readonly markers: MarkersEffect | undefined;
  /** After the offsets and markers are done, `completeTxn` must be applied and persisted. */
  readonly completeAfterMarkers: boolean;
}

export interface TxnDecision {
  /** The answer to the request (NONE on success), before `rewriteForVersion`. */
  readonly errorCode: number;
  /** The entry after the decision: the input itself when nothing changed, undefined when removed. */
  readonly entry: TxnEntry | undefined;
  /** Whether `entry` must be persisted (or the id removed) before any effect and before answering. */
  readonly write: boolean;
  readonly effects: TxnEffects;
  /** Set when a transition was refused by the table or its invariants (a bug here), for the caller's log. */
  readonly reason?: string;
}

export const NO_EFFECTS: TxnEffects = { fence: undefined, offsets: undefined, markers: undefined, completeAfterMarkers: false };

function answer(entry: TxnEntry | undefined, errorCode: number): TxnDecision {
  return { errorCode, entry, write: false, effects: NO_EFFECTS };
}

function written(entry: TxnEntry | undefined, errorCode: number, effects: TxnEffects = NO_EFFECTS): TxnDecision {
  return { errorCode, entry, write: true, effects };
}

/**
 * A transition that the checks before it should have made valid, but was refused: a broken invariant of
 * this module, answered INVALID_TXN_STATE (a protocol outcome, non-retriable) rather than thrown, so one bad
 * entry cannot take the coordinator down. `reason` is for the caller's log.
 */
function refused(entry: TxnEntry | undefined, result: TransitionResult & { ok: false }): TxnDecision {
  return { ...answer(entry, ErrorCode.INVALID_TXN_STATE), reason: `${result.from} -> ${result.to}: ${result.reason}` };
}

// ---- InitProducerId ----------------------------------------------------------------------------

export interface InitProducerIdInput {
  readonly transactionalId: string;
  readonly timeoutMs: number;
  /** v3+: the caller's current producer id, or -1. */
  readonly producerId: number;
  /** v3+: the caller's current epoch, or -1. */
  readonly producerEpoch: number;
}

/**
 * Hands out a new producer id when the decision needs one, or undefined when none can be had right now
 * (no durably reserved block), which is answered COORDINATOR_LOAD_IN_PROGRESS (retriable), as the
 * idempotent InitProducerId does. Called at most once per decision, and only when a new id is needed.
 */
export type AllocateProducerId = () => number | undefined;

/**
 * InitProducerId with a transactional id.
 *
 * - Empty transactional id: INVALID_REQUEST. Timeout <= 0 or > transaction.max.timeout.ms:
 *   INVALID_TRANSACTION_TIMEOUT. Only one of (producerId, producerEpoch) set: INVALID_REQUEST.
 * - Unknown id: a new producer id at epoch 0, state Empty.
 * - v3+ caller (producerId, epoch) given: fenced (PRODUCER_FENCED) unless the entry has no epoch yet, the
 *   producer id is the current one, or it is the previous one at an exhausted epoch (a retry of a rotation).
 * - PrepareCommit / PrepareAbort: CONCURRENT_TRANSACTIONS (retriable; the markers are still being written).
 * - Empty / Complete*: epoch + 1 with the same producer id; no caller epoch -> lastEpoch -1 (any older
 *   session is fenced); caller epoch == current -> lastEpoch = it (its retry gets this epoch back); caller
 *   epoch == lastEpoch -> a retry: the current epoch is answered unchanged; anything else PRODUCER_FENCED.
 *   When the epoch is exhausted (>= 32766) and the caller has no epoch or the current one, a new producer
 *   id at epoch 0 instead (lastProducerId = the old id, lastEpoch = the old epoch if the caller gave one).
 * - Ongoing: the old session's transaction is fenced and aborted, never merged into the new session:
 *   Ongoing -> PrepareEpochFence (epoch + 1) -> PrepareAbort, with abort markers at the bumped epoch, the
 *   staged offsets discarded; the answer is CONCURRENT_TRANSACTIONS, and the client's retry (once the abort
 *   is complete) bumps the epoch again and gets it.
 * Every epoch bump or rotation fences the old epoch on local partitions (effects.fence).
 */
export function initProducerId(
  entry: TxnEntry | undefined,
  request: InitProducerIdInput,
  allocateProducerId: AllocateProducerId,
  limits: CoordinatorLimits,
  nowMs: number,
  coordinatorEpoch = DEFAULT_COORDINATOR_EPOCH,
): TxnDecision {
  const { transactionalId, timeoutMs } = request;
  if (transactionalId.length === 0) return answer(entry, ErrorCode.INVALID_REQUEST);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > limits.transactionMaxTimeoutMs) {
    return answer(entry, ErrorCode.INVALID_TRANSACTION_TIMEOUT);
  }
  if ((request.producerId === NO_PRODUCER_ID) !== (request.producerEpoch === NO_PRODUCER_EPOCH)) {
    return answer(entry, ErrorCode.INVALID_REQUEST);
  }
  const expected = request.producerId === NO_PRODUCER_ID ? undefined : { producerId: request.producerId, epoch: request.producerEpoch };

  let current = entry;
  if (current === undefined) {
    const producerId = allocateProducerId();
    if (producerId === undefined) return answer(entry, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    current = blankTxnEntry(transactionalId, producerId, timeoutMs, nowMs);
  }

  if (expected !== undefined) {
    const valid =
      current.epoch === NO_PRODUCER_EPOCH ||
      expected.producerId === current.producerId ||
      (expected.producerId === current.lastProducerId && isEpochExhausted(expected.epoch));
    if (!valid) return answer(entry, ErrorCode.PRODUCER_FENCED);
  }

  switch (current.state) {
    case "PrepareCommit":
    case "PrepareAbort":
      return answer(entry, ErrorCode.CONCURRENT_TRANSACTIONS);
    case "Ongoing":
      return fenceAndAbort(current, nowMs, coordinatorEpoch, ErrorCode.CONCURRENT_TRANSACTIONS);
    case "Empty":
    case "CompleteCommit":
    case "CompleteAbort":
      return bumpOrRotate(entry, current, expected, timeoutMs, allocateProducerId, nowMs);
    default:
      return answer(entry, ErrorCode.INVALID_TXN_STATE);
  }
}

function bumpOrRotate(
  entry: TxnEntry | undefined,
  current: TxnEntry,
  expected: { producerId: number; epoch: number } | undefined,
  timeoutMs: number,
  allocateProducerId: AllocateProducerId,
  nowMs: number,
): TxnDecision {
  const toEmpty = { timeoutMs, partitions: [], groups: [], ongoingSinceMs: NO_TXN_START_MS, lastProducerId: current.producerId };

  if (isEpochExhausted(current.epoch) && (expected === undefined || expected.epoch === current.epoch)) {
    const producerId = allocateProducerId();
    if (producerId === undefined) return answer(entry, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    const result = transition(
      current,
      "Empty",
      { ...toEmpty, producerId, epoch: 0, lastEpoch: expected === undefined ? NO_PRODUCER_EPOCH : current.epoch },
      nowMs,
    );
    if (!result.ok) return refused(entry, result);
    // The old id will never be used again; fencing it one epoch up makes its zombies' batches fail.
    const fence = { producerId: current.producerId, epoch: Math.min(current.epoch + 1, PRODUCER_EPOCH_MAX) };
    return written(result.entry, ErrorCode.NONE, { ...NO_EFFECTS, fence });
  }

  let epoch: number;
  let lastEpoch: number;
  if (expected === undefined) {
    epoch = current.epoch + 1;
    lastEpoch = NO_PRODUCER_EPOCH;
  } else if (current.epoch === NO_PRODUCER_EPOCH || expected.epoch === current.epoch) {
    epoch = current.epoch + 1;
    lastEpoch = current.epoch;
  } else if (expected.epoch === current.lastEpoch) {
    // A retry of a bump whose answer was lost: the current epoch again, nothing fenced anew.
    epoch = current.epoch;
    lastEpoch = current.lastEpoch;
  } else {
    return answer(entry, ErrorCode.PRODUCER_FENCED);
  }
  // Exhausted epochs were rotated above unless this is a retry (no bump) or a fenced caller.
  if (epoch !== current.epoch && isEpochExhausted(current.epoch)) return answer(entry, ErrorCode.PRODUCER_FENCED);

  const result = transition(current, "Empty", { ...toEmpty, epoch, lastEpoch }, nowMs);
  if (!result.ok) return refused(entry, result);
  const bumped = current.epoch !== NO_PRODUCER_EPOCH && epoch !== current.epoch;
  return written(result.entry, ErrorCode.NONE, bumped ? { ...NO_EFFECTS, fence: { producerId: current.producerId, epoch } } : NO_EFFECTS);
}

/**
 * Ongoing -> PrepareEpochFence (epoch + 1, lastEpoch -1) -> PrepareAbort: the fence of InitProducerId on
 * an open transaction and of the timeout reaper. The bumped epoch is never handed to a client.
 */
function fenceAndAbort(current: TxnEntry, nowMs: number, coordinatorEpoch: number, errorCode: number): TxnDecision {
  if (current.epoch >= PRODUCER_EPOCH_MAX) {
    // Unreachable: clients never hold 32767 (exhausted ids rotate first), so an open transaction cannot
    // be at it. Refused rather than overflowing the int16 epoch.
    return answer(current, ErrorCode.INVALID_TXN_STATE);
  }
  const fenced = transition(current, "PrepareEpochFence", { epoch: current.epoch + 1, lastEpoch: NO_PRODUCER_EPOCH }, nowMs);
  if (!fenced.ok) return refused(current, fenced);
  const aborting = transition(fenced.entry, "PrepareAbort", {}, nowMs);
  if (!aborting.ok) return refused(current, aborting);
  return written(aborting.entry, errorCode, {
    ...completionEffects(aborting.entry, "abort", coordinatorEpoch),
    fence: { producerId: current.producerId, epoch: aborting.entry.epoch },
  });
}

/**
 * Whether `initProducerId` would need a new producer id for this entry and request, so that a handler can
 * reserve one (asynchronously) before entering the store's synchronous update. Over-reserving is harmless:
 * producer ids are cluster-unique and never reused, an unused one is simply skipped.
 */
export function needsNewProducerId(entry: TxnEntry | undefined, request: InitProducerIdInput, limits: CoordinatorLimits, nowMs: number): boolean {
  let needed = false;
  initProducerId(
    entry,
    request,
    () => {
      needed = true;
      return 0;
    },
    limits,
    nowMs,
  );
  return needed;
}

/** The InitProducerId answer of a decision: the entry's id and epoch on success, -1/-1 otherwise. */
export function initProducerIdAnswer(decision: TxnDecision): { errorCode: number; producerId: number; producerEpoch: number } {
  if (decision.errorCode !== ErrorCode.NONE || decision.entry === undefined) {
    return { errorCode: decision.errorCode, producerId: NO_PRODUCER_ID, producerEpoch: NO_PRODUCER_EPOCH };
  }
  return { errorCode: ErrorCode.NONE, producerId: decision.entry.producerId, producerEpoch: decision.entry.epoch };
}

// ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

export interface ProducerRef {
  readonly transactionalId: string;
  readonly producerId: number;
  readonly producerEpoch: number;
}

export interface AddPartitionsInput extends ProducerRef {
  readonly partitions: readonly TopicPartitions[];
}

export interface AddOffsetsInput extends ProducerRef {
  readonly groupId: string;
}

/**
 * The checks every request of a producer in a transaction passes first (Apache's order): unknown id or
 * another producer id -> INVALID_PRODUCER_ID_MAPPING; another epoch -> PRODUCER_FENCED; a decision in
 * progress (Prepare*) -> CONCURRENT_TRANSACTIONS. Undefined when the request may go on.
 */
function producerCheck(entry: TxnEntry | undefined, request: ProducerRef): number | undefined {
  if (request.transactionalId.length === 0) return ErrorCode.INVALID_REQUEST;
  if (entry === undefined || entry.producerId !== request.producerId) return ErrorCode.INVALID_PRODUCER_ID_MAPPING;
  if (entry.epoch !== request.producerEpoch) return ErrorCode.PRODUCER_FENCED;
  if (entry.state === "PrepareCommit" || entry.state === "PrepareAbort") return ErrorCode.CONCURRENT_TRANSACTIONS;
  return undefined;
}

/**
 * AddPartitionsToTxn (v0-v3, the client form). Empty / Complete* -> Ongoing, stamping the transaction
 * start; Ongoing -> Ongoing with the partitions added. Partitions already in the open transaction: NONE
 * with no write (Apache's shortcut).
 */
export function addPartitions(entry: TxnEntry | undefined, request: AddPartitionsInput, nowMs: number): TxnDecision {
  const error = producerCheck(entry, request);
  if (error !== undefined) return answer(entry, error);
  const current = entry!;
  const partitions = toTopicPartitions(eachPartition(request.partitions));
  if (current.state === "Ongoing" && includesAllPartitions(current.partitions, partitions)) return answer(entry, ErrorCode.NONE);
  return toOngoing(current, { partitions: mergePartitions(current.partitions, partitions) }, nowMs);
}

/**
 * AddOffsetsToTxn: as AddPartitionsToTxn, for the consumer group whose offsets the transaction will
 * commit (the EndTxn offset hook commits or discards exactly the recorded groups).
 */
export function addOffsets(entry: TxnEntry | undefined, request: AddOffsetsInput, nowMs: number): TxnDecision {
  const error = producerCheck(entry, request);
  if (error !== undefined) return answer(entry, error);
  const current = entry!;
  if (current.state === "Ongoing" && current.groups.includes(request.groupId)) return answer(entry, ErrorCode.NONE);
  const groups = current.groups.includes(request.groupId) ? current.groups : [...current.groups, request.groupId].sort(compareStrings);
  return toOngoing(current, { groups }, nowMs);
}

function toOngoing(current: TxnEntry, changes: { partitions?: readonly TopicPartitions[]; groups?: readonly string[] }, nowMs: number): TxnDecision {
  // A new transaction starts now; an open one keeps its start (the timeout counts from it).
  const ongoingSinceMs = current.state === "Ongoing" ? current.ongoingSinceMs : nowMs;
  const result = transition(current, "Ongoing", { ...changes, ongoingSinceMs }, nowMs);
  if (!result.ok) return refused(current, result);
  return written(result.entry, ErrorCode.NONE);
}

export interface VerifiedPartition {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: number;
}

/**
 * AddPartitionsToTxn v4+ with verifyOnly (what a partition leader asks before appending a transactional
 * batch): for each partition, NONE when it is in the producer's transaction, TRANSACTION_ABORTABLE when
 * not (Apache 4.x; rewritten to INVALID_TXN_STATE for Produce < v11). The producer checks answer every
 * partition with their error. Never changes the entry.
 */
export function verifyPartitions(entry: TxnEntry | undefined, request: AddPartitionsInput): VerifiedPartition[] {
  const error = producerCheck(entry, request);
  const out: VerifiedPartition[] = [];
  for (const { topic, partition } of eachPartition(request.partitions)) {
    const errorCode =
      error ?? (containsPartition(entry!.partitions, topic, partition) ? ErrorCode.NONE : ErrorCode.TRANSACTION_ABORTABLE);
    out.push({ topic, partition, errorCode });
  }
  return out;
}

// ---- EndTxn ------------------------------------------------------------------------------------

export interface EndTxnInput extends ProducerRef {
  readonly commit: boolean;
}

/**
 * EndTxn, phase one (the decision). From Ongoing: PrepareCommit / PrepareAbort, persisted with the
 * transaction's partitions and groups, with the effects that finish it (offsets committed or discarded,
 * markers, then `completeTxn`). A retry finds:
 * - the matching Complete*: NONE, nothing written (the transaction is already done);
 * - the matching Prepare*: CONCURRENT_TRANSACTIONS (retriable: the markers are still being written; the
 *   caller only gets here when holding the retry until the completion did not help);
 * - the opposite direction (in Prepare* or Complete*), or Empty: INVALID_TXN_STATE.
 * Unknown id or another producer id: INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED (a client
 * must use exactly the current epoch, Apache's isFromClient rule).
 */
export function endTxn(entry: TxnEntry | undefined, request: EndTxnInput, nowMs: number, coordinatorEpoch = DEFAULT_COORDINATOR_EPOCH): TxnDecision {
  if (request.transactionalId.length === 0) return answer(entry, ErrorCode.INVALID_REQUEST);
  if (entry === undefined || entry.producerId !== request.producerId) return answer(entry, ErrorCode.INVALID_PRODUCER_ID_MAPPING);
  if (entry.epoch !== request.producerEpoch) return answer(entry, ErrorCode.PRODUCER_FENCED);
  const result: TxnResult = request.commit ? "commit" : "abort";
  const prepared: TxnState = request.commit ? "PrepareCommit" : "PrepareAbort";
  const completed: TxnState = request.commit ? "CompleteCommit" : "CompleteAbort";
  switch (entry.state) {
    case "Ongoing": {
      const decided = transition(entry, prepared, {}, nowMs);
      if (!decided.ok) return refused(entry, decided);
      return written(decided.entry, ErrorCode.NONE, completionEffects(decided.entry, result, coordinatorEpoch));
    }
    case "PrepareCommit":
    case "PrepareAbort":
      return answer(entry, entry.state === prepared ? ErrorCode.CONCURRENT_TRANSACTIONS : ErrorCode.INVALID_TXN_STATE);
    case "CompleteCommit":
    case "CompleteAbort":
      return answer(entry, entry.state === completed ? ErrorCode.NONE : ErrorCode.INVALID_TXN_STATE);
    default:
      return answer(entry, ErrorCode.INVALID_TXN_STATE);
  }
}

/** The effects that finish a transaction found (or just put) in Prepare*. */
export function completionEffects(entry: TxnEntry, result: TxnResult, coordinatorEpoch: number): TxnEffects {
  return {
    fence: undefined,
    offsets: entry.groups.length > 0 ? { action: result === "commit" ? "commit" : "discard", producerId: entry.producerId, groups: entry.groups } : undefined,
    markers:
      entry.partitions.length > 0
        ? { result, producerId: entry.producerId, producerEpoch: entry.epoch, coordinatorEpoch, partitions: entry.partitions, decidedMs: entry.updatedMs }
        : undefined,
    completeAfterMarkers: true,
  };
}

/**
 * The effects to drive an entry found in Prepare* (at start-up, or by the owner's reconcile loop) to
 * completion; undefined for any other state. Same effects as the EndTxn that prepared it: they are
 * idempotent, so doing them twice is harmless.
 */
export function recoveryEffects(entry: TxnEntry, coordinatorEpoch = DEFAULT_COORDINATOR_EPOCH): TxnEffects | undefined {
  if (entry.state === "PrepareCommit") return completionEffects(entry, "commit", coordinatorEpoch);
  if (entry.state === "PrepareAbort") return completionEffects(entry, "abort", coordinatorEpoch);
  return undefined;
}

/**
 * EndTxn, phase two: after the offsets and markers, PrepareCommit -> CompleteCommit or PrepareAbort ->
 * CompleteAbort, clearing partitions and groups. `expected` (the producer and result of the decision being
 * completed) guards against completing a different transaction: a mismatch answers PRODUCER_FENCED /
 * INVALID_PRODUCER_ID_MAPPING / INVALID_TXN_STATE without a write. Already completed (the matching Complete*
 * at the same producer): NONE without a write, so a repeated completion is harmless.
 */
export function completeTxn(
  entry: TxnEntry | undefined,
  nowMs: number,
  expected?: { readonly producerId: number; readonly producerEpoch: number; readonly result: TxnResult },
): TxnDecision {
  if (entry === undefined) return answer(entry, ErrorCode.INVALID_PRODUCER_ID_MAPPING);
  if (expected !== undefined) {
    if (entry.producerId !== expected.producerId) return answer(entry, ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    if (entry.epoch !== expected.producerEpoch) return answer(entry, ErrorCode.PRODUCER_FENCED);
    const matching = expected.result === "commit" ? ["PrepareCommit", "CompleteCommit"] : ["PrepareAbort", "CompleteAbort"];
    if (!matching.includes(entry.state)) return answer(entry, ErrorCode.INVALID_TXN_STATE);
  }
  if (entry.state === "CompleteCommit" || entry.state === "CompleteAbort") return answer(entry, ErrorCode.NONE);
  const target: TxnState | undefined =
    entry.state === "PrepareCommit" ? "CompleteCommit" : entry.state === "PrepareAbort" ? "CompleteAbort" : undefined;
  if (target === undefined) return answer(entry, ErrorCode.INVALID_TXN_STATE);
  const result = transition(entry, target, { partitions: [], groups: [] }, nowMs);
  if (!result.ok) return refused(entry, result);
  return written(result.entry, ErrorCode.NONE);
}

// ---- timeouts and expiry -----------------------------------------------------------------------

/** Apache's rule: an Ongoing transaction is timed out once start + timeout < now (strictly). */
export function isTimedOut(entry: TxnEntry, nowMs: number): boolean {
  return entry.state === "Ongoing" && entry.ongoingSinceMs + entry.timeoutMs < nowMs;
}

/**
 * The timeout reaper's decision for one entry: a timed-out Ongoing transaction is fenced (epoch + 1) and
 * aborted, exactly as InitProducerId fences an open transaction; the producer's next request with the old
 * epoch answers PRODUCER_FENCED. Anything else: no change.
 */
export function abortTimedOut(entry: TxnEntry | undefined, nowMs: number, coordinatorEpoch = DEFAULT_COORDINATOR_EPOCH): TxnDecision {
  if (entry === undefined || !isTimedOut(entry, nowMs)) return answer(entry, ErrorCode.NONE);
  return fenceAndAbort(entry, nowMs, coordinatorEpoch, ErrorCode.NONE);
}

/**
 * An operator's abort of an Ongoing transaction (the HTTP side-port's admin route, for a hanging one): the
 * timeout reaper's fence and abort, whatever the transaction's age. Anything not Ongoing: no change.
 */
export function abortOngoing(entry: TxnEntry | undefined, nowMs: number, coordinatorEpoch = DEFAULT_COORDINATOR_EPOCH): TxnDecision {
  if (entry === undefined || entry.state !== "Ongoing") return answer(entry, ErrorCode.NONE);
  return fenceAndAbort(entry, nowMs, coordinatorEpoch, ErrorCode.NONE);
}

/** Apache's rule: Empty / Complete* and not updated for at least the expiration (updated <= now - expiration). */
export function isExpired(entry: TxnEntry, nowMs: number, expirationMs = TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT): boolean {
  return (
    (entry.state === "Empty" || entry.state === "CompleteCommit" || entry.state === "CompleteAbort") &&
    entry.updatedMs <= nowMs - expirationMs
  );
}

/**
 * Expiry of an idle transactional id: through Dead (the table's check), then removed (`entry` undefined,
 * `write` true). Anything not expired: no change.
 */
export function expire(entry: TxnEntry | undefined, nowMs: number, expirationMs = TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT): TxnDecision {
  if (entry === undefined || !isExpired(entry, nowMs, expirationMs)) return answer(entry, ErrorCode.NONE);
  const dead = transition(entry, "Dead", { partitions: [], groups: [] }, nowMs);
  if (!dead.ok) return refused(entry, dead);
  return written(undefined, ErrorCode.NONE);
}

// ---- error codes by request version ------------------------------------------------------------

export const API_KEY = {
  PRODUCE: 0,
  INIT_PRODUCER_ID: 22,
  ADD_PARTITIONS_TO_TXN: 24,
  ADD_OFFSETS_TO_TXN: 25,
  END_TXN: 26,
  TXN_OFFSET_COMMIT: 28,
} as const;

/**
 * The error code to put on the wire for a request of this API key and version, for clients that predate
 * the code the coordinator answers (Apache's KafkaApis and AddPartitionsToTxnManager):
 * - PRODUCER_FENCED (90) -> INVALID_PRODUCER_EPOCH (47) for InitProducerId < v4 and AddPartitionsToTxn,
 *   AddOffsetsToTxn, EndTxn < v2 (KIP-588 added 90 in those versions); and always for Produce and
 *   TxnOffsetCommit, which never answer 90 (their producers expect 47);
 * - TRANSACTION_ABORTABLE (120) -> INVALID_TXN_STATE (48) for Produce < v11 and TxnOffsetCommit < v4
 *   (KIP-890 added 120 there; it reaches them from partition verification);
 * - COORDINATOR_LOAD_IN_PROGRESS (14) -> COORDINATOR_NOT_AVAILABLE (15) for TxnOffsetCommit < v2.
 * Every other (key, version, code) is returned unchanged.
 */
export function rewriteForVersion(apiKey: number, apiVersion: number, errorCode: number): number {
  switch (apiKey) {
    case API_KEY.INIT_PRODUCER_ID:
      if (errorCode === ErrorCode.PRODUCER_FENCED && apiVersion < 4) return ErrorCode.INVALID_PRODUCER_EPOCH;
      return errorCode;
    case API_KEY.ADD_PARTITIONS_TO_TXN:
    case API_KEY.ADD_OFFSETS_TO_TXN:
    case API_KEY.END_TXN:
      if (errorCode === ErrorCode.PRODUCER_FENCED && apiVersion < 2) return ErrorCode.INVALID_PRODUCER_EPOCH;
      return errorCode;
    case API_KEY.PRODUCE:
      if (errorCode === ErrorCode.PRODUCER_FENCED) return ErrorCode.INVALID_PRODUCER_EPOCH;
      if (errorCode === ErrorCode.TRANSACTION_ABORTABLE && apiVersion < 11) return ErrorCode.INVALID_TXN_STATE;
      return errorCode;
    case API_KEY.TXN_OFFSET_COMMIT:
      if (errorCode === ErrorCode.PRODUCER_FENCED) return ErrorCode.INVALID_PRODUCER_EPOCH;
      if (errorCode === ErrorCode.TRANSACTION_ABORTABLE && apiVersion < 4) return ErrorCode.INVALID_TXN_STATE;
      if (errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS && apiVersion < 2) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
      return errorCode;
    default:
      return errorCode;
  }
}
