/**
 * Per-partition producer state: for every producer id that wrote to the partition, its epoch and the
 * metadata of its last five batches (the dedupe window), plus the bookkeeping transactions need (the
 * first offset of its open transaction, the coordinator epoch of its last marker).
 *
 * Pure: no I/O, no clock reads (`nowMs` is an argument), no awaits. Everything here runs under the
 * partition's single writer; nothing is safe to call concurrently with an append in flight.
 *
 * The rules are docs/architecture.md, "Transactions and idempotence", with Apache Kafka's ProducerAppendInfo
 * as the reference where that section is silent:
 * - a non-idempotent batch (producerId -1) is always appended;
 * - no state for the producer id (new, expired, or truncated away): any sequence is accepted;
 * - same epoch and (firstSeq, lastSeq) equal to one of the five remembered batches: a duplicate,
 *   answered with the original offsets and timestamp and never written again. Never
 *   DUPLICATE_SEQUENCE_NUMBER: librdkafka producers die on a retry answered with an error;
 * - an older epoch: INVALID_PRODUCER_EPOCH (47). Produce never answers PRODUCER_FENCED (90);
 * - a newer epoch: accepted only at sequence 0, and the window is cleared when it is applied (the Java
 *   producer bumps its own epoch after sequence trouble, KIP-360);
 * - the same epoch: accepted only if firstSeq follows the newest remembered batch (after 2147483647
 *   comes 0). An entry that has an epoch but no batches (after a marker or a fence) expects 0, as
 *   Apache does;
 * - anything else: OUT_OF_ORDER_SEQUENCE_NUMBER (45);
 * - a valid non-transactional batch while the producer has a transaction open in this partition:
 *   INVALID_TXN_STATE (48), as Apache's ProducerAppendInfo.appendDataBatch answers.
 *
 * Classification never changes state. The caller appends the batch and only after that succeeds
 * applies it (`applyAppend`), so a failed write can never leave the window ahead of the log. For
 * several batches in one request (Apache refuses that in Produce v3+, but log recovery and tests replay
 * many), classify and apply each batch against a `ProducerStateScratch` in turn, so that later batches
 * see the earlier ones, and `commit()` the scratch once the whole write succeeded; drop it otherwise.
 *
 * Memory: an idle producer costs one Map entry plus a fixed slot in column pages (176 bytes for a full
 * window), instead of an object, an array and five batch objects; `scripts/bench-producer-state-memory.ts`
 * measures it. Entries are handed out as fresh plain objects, so callers can never alias the columns.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";

/** How many batches per producer are remembered for dedupe: the Java client's max.in.flight of 5. */
export const PRODUCER_BATCHES_RETAINED = 5;

/** `currentTxnFirstOffset` of a producer without an open transaction in this partition. */
export const NO_TXN_OFFSET = -1;

/** `coordinatorEpoch` before any transaction marker for the producer was seen (Apache's -1). */
export const NO_COORDINATOR_EPOCH = -1;

/** The producer id of a non-idempotent batch. */
export const NO_PRODUCER_ID = -1;

export const INT32_MAX = 2_147_483_647;
const INT32_MIN = -2_147_483_648;
const INT16_MAX = 32_767;

/** One remembered batch: its sequence range, the offsets it got, and its timestamp as appended. */
export interface BatchMetadata {
  readonly firstSeq: number;
  readonly lastSeq: number;
  readonly firstOffset: number;
  readonly lastOffset: number;
  readonly timestampMs: number;
}

export interface ProducerEntry {
  readonly epoch: number;
  /** Oldest first, at most PRODUCER_BATCHES_RETAINED, all of `epoch`. */
  readonly batches: readonly BatchMetadata[];
  /** Timestamp of the last batch or marker applied; what expiry measures idleness from. */
  readonly lastTimestampMs: number;
  /** Offset of the first batch of the producer's open transaction here, or NO_TXN_OFFSET. */
  readonly currentTxnFirstOffset: number;
  /** Coordinator epoch of the last marker, or NO_COORDINATOR_EPOCH. */
  readonly coordinatorEpoch: number;
}

/** What classification needs to know about a data batch (from its RecordBatch v2 header). */
export interface BatchInfo {
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly baseSequence: number;
  /** baseSequence + recordCount - 1, wrapping after INT32_MAX to 0 (record-batch.ts lastSequenceOf). */
  readonly lastSequence: number;
  readonly isTransactional: boolean;
}

/** Where an appended batch landed. */
export interface AppendedBatch {
  readonly firstOffset: number;
  readonly lastOffset: number;
  /** The batch's max timestamp, or the log-append time for LogAppendTime topics (what Apache keeps). */
  readonly timestampMs: number;
}

export type BatchClassificationError =
  | typeof ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
  | typeof ErrorCode.INVALID_PRODUCER_EPOCH
  | typeof ErrorCode.INVALID_TXN_STATE;

export type BatchClassification =
  | { readonly kind: "append" }
  | { readonly kind: "duplicate"; readonly firstOffset: number; readonly lastOffset: number; readonly timestampMs: number }
  | { readonly kind: "error"; readonly errorCode: BatchClassificationError; readonly message: string };

/** Read and replace producer entries: the table itself, or a scratch over it for one request. */
export interface ProducerStateView {
  get(producerId: number): ProducerEntry | undefined;
  set(producerId: number, entry: ProducerEntry): void;
}

// ---- the table ---------------------------------------------------------------------------------

/**
 * Column layout of one slot. Two typed-array pages hold PAGE_SLOTS slots each; the batches of a slot
 * are stored oldest first (`set` rewrites the whole slot, so no ring head is needed).
 */
const PAGE_SLOTS = 1024;
const I_EPOCH = 0;
const I_COORDINATOR_EPOCH = 1;
const I_BATCH_COUNT = 2;
const I_FIRST_SEQ = 3;
const I_LAST_SEQ = I_FIRST_SEQ + PRODUCER_BATCHES_RETAINED;
/** lastOffset - firstOffset: fits an int32 because a batch's lastOffsetDelta is an int32. */
const I_OFFSET_DELTA = I_LAST_SEQ + PRODUCER_BATCHES_RETAINED;
const I_STRIDE = I_OFFSET_DELTA + PRODUCER_BATCHES_RETAINED;
/** The producer id is kept in the slot so that a delete can move the last slot into the hole. */
const F_PRODUCER_ID = 0;
const F_LAST_TIMESTAMP = 1;
const F_TXN_FIRST_OFFSET = 2;
const F_FIRST_OFFSET = 3;
const F_TIMESTAMP = F_FIRST_OFFSET + PRODUCER_BATCHES_RETAINED;
const F_STRIDE = F_TIMESTAMP + PRODUCER_BATCHES_RETAINED;

/** The producer state of one partition. */
export class ProducerStateTable implements ProducerStateView {
  /** producer id -> dense slot index in [0, count). */
  private readonly slots = new Map<number, number>();
  private intPages: Int32Array[] = [];
  private floatPages: Float64Array[] = [];

  get size(): number {
    return this.slots.size;
  }

  has(producerId: number): boolean {
    return this.slots.has(producerId);
  }

  get(producerId: number): ProducerEntry | undefined {
    const slot = this.slots.get(producerId);
    return slot === undefined ? undefined : this.read(slot);
  }

  set(producerId: number, entry: ProducerEntry): void {
    checkProducerId(producerId);
    checkEntry(producerId, entry);
    let slot = this.slots.get(producerId);
    if (slot === undefined) {
      slot = this.slots.size;
      if (slot === this.intPages.length * PAGE_SLOTS) {
        this.intPages.push(new Int32Array(PAGE_SLOTS * I_STRIDE));
        this.floatPages.push(new Float64Array(PAGE_SLOTS * F_STRIDE));
      }
      this.slots.set(producerId, slot);
    }
    this.write(slot, producerId, entry);
  }

  delete(producerId: number): boolean {
    const slot = this.slots.get(producerId);
    if (slot === undefined) return false;
    const last = this.slots.size - 1;
    this.slots.delete(producerId);
    if (slot !== last) {
      // Keep the slots dense: the last slot moves into the hole, so pages can be released.
      const ints = this.intPages[Math.floor(slot / PAGE_SLOTS)]!;
      const floats = this.floatPages[Math.floor(slot / PAGE_SLOTS)]!;
      const lastInts = this.intPages[Math.floor(last / PAGE_SLOTS)]!;
      const lastFloats = this.floatPages[Math.floor(last / PAGE_SLOTS)]!;
      const li = (last % PAGE_SLOTS) * I_STRIDE;
      const lf = (last % PAGE_SLOTS) * F_STRIDE;
      ints.set(lastInts.subarray(li, li + I_STRIDE), (slot % PAGE_SLOTS) * I_STRIDE);
      floats.set(lastFloats.subarray(lf, lf + F_STRIDE), (slot % PAGE_SLOTS) * F_STRIDE);
      this.slots.set(lastFloats[lf + F_PRODUCER_ID]!, slot);
    }
    // Release a page only when the one before it is empty too, so that a producer set that hovers
    // around a page boundary does not allocate and free a page on every change.
    const pagesNeeded = Math.ceil(this.slots.size / PAGE_SLOTS);
    if (this.intPages.length > pagesNeeded + 1) {
      this.intPages.length = pagesNeeded + 1;
      this.floatPages.length = pagesNeeded + 1;
    }
    return true;
  }

  /** Every producer id and its entry, in no particular order. Do not mutate the table meanwhile. */
  *entries(): IterableIterator<[number, ProducerEntry]> {
    for (const [producerId, slot] of this.slots) yield [producerId, this.read(slot)];
  }

  /** Producer ids whose entry matches `predicate`, read straight from the columns (no allocation). */
  producerIdsWhere(predicate: (lastTimestampMs: number, currentTxnFirstOffset: number) => boolean): number[] {
    const matched: number[] = [];
    for (const [producerId, slot] of this.slots) {
      const floats = this.floatPages[Math.floor(slot / PAGE_SLOTS)]!;
      const f = (slot % PAGE_SLOTS) * F_STRIDE;
      if (predicate(floats[f + F_LAST_TIMESTAMP]!, floats[f + F_TXN_FIRST_OFFSET]!)) matched.push(producerId);
    }
    return matched;
  }

  private read(slot: number): ProducerEntry {
    const ints = this.intPages[Math.floor(slot / PAGE_SLOTS)]!;
    const floats = this.floatPages[Math.floor(slot / PAGE_SLOTS)]!;
    const i = (slot % PAGE_SLOTS) * I_STRIDE;
    const f = (slot % PAGE_SLOTS) * F_STRIDE;
    const count = ints[i + I_BATCH_COUNT]!;
    const batches: BatchMetadata[] = [];
    for (let k = 0; k < count; k++) {
      const firstOffset = floats[f + F_FIRST_OFFSET + k]!;
      batches.push({
        firstSeq: ints[i + I_FIRST_SEQ + k]!,
        lastSeq: ints[i + I_LAST_SEQ + k]!,
        firstOffset,
        lastOffset: firstOffset + ints[i + I_OFFSET_DELTA + k]!,
        timestampMs: floats[f + F_TIMESTAMP + k]!,
      });
    }
    return {
      epoch: ints[i + I_EPOCH]!,
      batches,
      lastTimestampMs: floats[f + F_LAST_TIMESTAMP]!,
      currentTxnFirstOffset: floats[f + F_TXN_FIRST_OFFSET]!,
      coordinatorEpoch: ints[i + I_COORDINATOR_EPOCH]!,
    };
  }

  private write(slot: number, producerId: number, entry: ProducerEntry): void {
    const ints = this.intPages[Math.floor(slot / PAGE_SLOTS)]!;
    const floats = this.floatPages[Math.floor(slot / PAGE_SLOTS)]!;
    const i = (slot % PAGE_SLOTS) * I_STRIDE;
    const f = (slot % PAGE_SLOTS) * F_STRIDE;
    ints[i + I_EPOCH] = entry.epoch;
    ints[i + I_COORDINATOR_EPOCH] = entry.coordinatorEpoch;
    ints[i + I_BATCH_COUNT] = entry.batches.length;
    floats[f + F_PRODUCER_ID] = producerId;
    floats[f + F_LAST_TIMESTAMP] = entry.lastTimestampMs;
    floats[f + F_TXN_FIRST_OFFSET] = entry.currentTxnFirstOffset;
    entry.batches.forEach((batch, k) => {
      ints[i + I_FIRST_SEQ + k] = batch.firstSeq;
      ints[i + I_LAST_SEQ + k] = batch.lastSeq;
      ints[i + I_OFFSET_DELTA + k] = batch.lastOffset - batch.firstOffset;
      floats[f + F_FIRST_OFFSET + k] = batch.firstOffset;
      floats[f + F_TIMESTAMP + k] = batch.timestampMs;
    });
  }
}

/**
 * The state of one produce request in progress: reads fall through to the table, writes stay here
 * until `commit()`. Valid only while the partition's writer does nothing else to the table.
 */
export class ProducerStateScratch implements ProducerStateView {
  private readonly changed = new Map<number, ProducerEntry>();

  constructor(readonly base: ProducerStateTable) {}

  get(producerId: number): ProducerEntry | undefined {
    return this.changed.get(producerId) ?? this.base.get(producerId);
  }

  set(producerId: number, entry: ProducerEntry): void {
    checkProducerId(producerId);
    checkEntry(producerId, entry);
    this.changed.set(producerId, entry);
  }

  /** Applies every change to the table (after the write they describe succeeded) and empties the scratch. */
  commit(): void {
    for (const [producerId, entry] of this.changed) this.base.set(producerId, entry);
    this.changed.clear();
  }
}

export function createProducerState(): ProducerStateTable {
  return new ProducerStateTable();
}

// ---- classification and transitions -----------------------------------------------------------

/** True when `nextSeq` directly follows `lastSeq`; after INT32_MAX comes 0. */
export function inSequence(lastSeq: number, nextSeq: number): boolean {
  return nextSeq === lastSeq + 1 || (nextSeq === 0 && lastSeq === INT32_MAX);
}

/** Decides what to do with one data batch. Changes nothing. */
export function classifyBatch(view: ProducerStateView, batch: BatchInfo): BatchClassification {
  if (batch.producerId < 0) return APPEND;
  const entry = view.get(batch.producerId);
  // No state here (new, expired, or truncated away): the window cannot tell, so trust the producer.
  if (entry === undefined) return APPEND;

  if (batch.producerEpoch === entry.epoch) {
    for (const remembered of entry.batches) {
      if (remembered.firstSeq === batch.baseSequence && remembered.lastSeq === batch.lastSequence) {
        return {
          kind: "duplicate",
          firstOffset: remembered.firstOffset,
          lastOffset: remembered.lastOffset,
          timestampMs: remembered.timestampMs,
        };
      }
    }
  }

  if (batch.producerEpoch < entry.epoch) {
    return error(
      ErrorCode.INVALID_PRODUCER_EPOCH,
      `epoch ${batch.producerEpoch} of producer ${batch.producerId} is older than the last seen epoch ${entry.epoch}`,
    );
  }
  if (batch.producerEpoch > entry.epoch) {
    if (batch.baseSequence !== 0) {
      return error(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        `producer ${batch.producerId} started new epoch ${batch.producerEpoch} at sequence ${batch.baseSequence}, expected 0`,
      );
    }
  } else {
    const newest = entry.batches[entry.batches.length - 1];
    // An entry with an epoch but no batches (a marker or a fence came last) expects sequence 0.
    const lastSeq = newest === undefined ? -1 : newest.lastSeq;
    if (!inSequence(lastSeq, batch.baseSequence)) {
      return error(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        `out of order sequence ${batch.baseSequence} for producer ${batch.producerId} epoch ${batch.producerEpoch}, last sequence ${lastSeq}`,
      );
    }
  }

  if (!batch.isTransactional && entry.currentTxnFirstOffset !== NO_TXN_OFFSET) {
    return error(
      ErrorCode.INVALID_TXN_STATE,
      `producer ${batch.producerId} sent a non-transactional batch while its transaction from offset ${entry.currentTxnFirstOffset} is open`,
    );
  }
  return APPEND;
}

/**
 * Records an appended batch: call it only after the append succeeded, with the offsets the batch got.
 * It does not validate (log recovery replays batches that were validated when they were written): a
 * new epoch clears the window, the window keeps the newest PRODUCER_BATCHES_RETAINED batches, and a
 * transactional batch opens a transaction here unless one is open.
 */
export function applyAppend(view: ProducerStateView, batch: BatchInfo, appended: AppendedBatch): void {
  if (batch.producerId < 0) return;
  const entry = view.get(batch.producerId);
  const sameEpoch = entry !== undefined && entry.epoch === batch.producerEpoch;
  const kept = sameEpoch ? entry.batches.slice(-(PRODUCER_BATCHES_RETAINED - 1)) : [];
  kept.push({
    firstSeq: batch.baseSequence,
    lastSeq: batch.lastSequence,
    firstOffset: appended.firstOffset,
    lastOffset: appended.lastOffset,
    timestampMs: appended.timestampMs,
  });
  const openTxn = entry?.currentTxnFirstOffset ?? NO_TXN_OFFSET;
  view.set(batch.producerId, {
    epoch: batch.producerEpoch,
    batches: kept,
    lastTimestampMs: appended.timestampMs,
    currentTxnFirstOffset: batch.isTransactional && openTxn === NO_TXN_OFFSET ? appended.firstOffset : openTxn,
    coordinatorEpoch: entry?.coordinatorEpoch ?? NO_COORDINATOR_EPOCH,
  });
}

export interface MarkerInfo {
  readonly coordinatorEpoch: number;
  /** The offset the control batch got (or will get, for `checkMarker`). */
  readonly offset: number;
  readonly timestampMs: number;
  readonly isCommit: boolean;
}

/** A transaction that a marker ended here, for the aborted-transaction index and the LSO. */
export interface CompletedTxn {
  readonly producerId: number;
  readonly firstOffset: number;
  /** The marker's offset. */
  readonly lastOffset: number;
  readonly isAborted: boolean;
}

export type MarkerCheck =
  | { readonly kind: "ok" }
  | {
      readonly kind: "error";
      readonly errorCode: typeof ErrorCode.INVALID_PRODUCER_EPOCH | typeof ErrorCode.TRANSACTION_COORDINATOR_FENCED;
      readonly message: string;
    };

export type MarkerResult =
  | { readonly kind: "applied"; readonly completedTxn: CompletedTxn | undefined }
  | Extract<MarkerCheck, { kind: "error" }>;

/**
 * Whether a transaction marker may be written: an older producer epoch is refused with
 * INVALID_PRODUCER_EPOCH, an older coordinator epoch with TRANSACTION_COORDINATOR_FENCED (Apache's
 * checkCoordinatorEpoch). Changes nothing.
 */
export function checkMarker(view: ProducerStateView, producerId: number, producerEpoch: number, marker: MarkerInfo): MarkerCheck {
  const entry = view.get(producerId);
  if (entry === undefined) return OK;
  if (producerEpoch < entry.epoch) {
    return {
      kind: "error",
      errorCode: ErrorCode.INVALID_PRODUCER_EPOCH,
      message: `marker epoch ${producerEpoch} of producer ${producerId} is older than the last seen epoch ${entry.epoch}`,
    };
  }
  if (marker.coordinatorEpoch < entry.coordinatorEpoch) {
    return {
      kind: "error",
      errorCode: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
      message: `marker coordinator epoch ${marker.coordinatorEpoch} for producer ${producerId} is older than ${entry.coordinatorEpoch}`,
    };
  }
  return OK;
}

/**
 * Records a transaction marker (after it was appended). Markers never consume a sequence slot: the
 * window is untouched unless the marker carries a newer epoch, which clears it as any epoch change does.
 * The open transaction, if any, ends here and is returned. A marker that `checkMarker` refuses changes
 * nothing and returns the same error.
 */
export function applyMarker(view: ProducerStateView, producerId: number, producerEpoch: number, marker: MarkerInfo): MarkerResult {
  const check = checkMarker(view, producerId, producerEpoch, marker);
  if (check.kind === "error") return check;
  const entry = view.get(producerId);
  const completedTxn: CompletedTxn | undefined =
    entry !== undefined && entry.currentTxnFirstOffset !== NO_TXN_OFFSET
      ? { producerId, firstOffset: entry.currentTxnFirstOffset, lastOffset: marker.offset, isAborted: !marker.isCommit }
      : undefined;
  view.set(producerId, {
    epoch: producerEpoch,
    batches: entry !== undefined && entry.epoch === producerEpoch ? entry.batches : [],
    lastTimestampMs: marker.timestampMs,
    currentTxnFirstOffset: NO_TXN_OFFSET,
    coordinatorEpoch: marker.coordinatorEpoch,
  });
  return { kind: "applied", completedTxn };
}

export type FenceResult = "fenced" | "absent" | "not-newer";

/**
 * Raises a producer's epoch and clears its window (InitProducerId rejoins, the fence log), so that a
 * zombie's batches at the old epoch answer INVALID_PRODUCER_EPOCH. A producer without state here is
 * left absent (it has no window to protect); an epoch at or above `newEpoch` is never lowered. An open
 * transaction stays open: only its marker, at an epoch >= `newEpoch`, may end it.
 */
export function fenceEpoch(view: ProducerStateView, producerId: number, newEpoch: number): FenceResult {
  const entry = view.get(producerId);
  if (entry === undefined) return "absent";
  if (entry.epoch >= newEpoch) return "not-newer";
  view.set(producerId, { ...entry, epoch: newEpoch, batches: [] });
  return "fenced";
}

/**
 * Removes producers idle for `producerIdExpirationMs` or longer (Apache's rule: nowMs - lastTimestampMs
 * >= the expiration) that have no open transaction here. Returns how many were removed.
 */
export function expire(state: ProducerStateTable, nowMs: number, producerIdExpirationMs: number): number {
  const expired = state.producerIdsWhere(
    (lastTimestampMs, currentTxnFirstOffset) =>
      currentTxnFirstOffset === NO_TXN_OFFSET && nowMs - lastTimestampMs >= producerIdExpirationMs,
  );
  for (const producerId of expired) state.delete(producerId);
  return expired.length;
}

// ---- helpers -----------------------------------------------------------------------------------

const APPEND: BatchClassification = { kind: "append" };
const OK: MarkerCheck = { kind: "ok" };

function error(errorCode: BatchClassificationError, message: string): BatchClassification {
  return { kind: "error", errorCode, message };
}

function checkProducerId(producerId: number): void {
  if (!Number.isSafeInteger(producerId) || producerId < 0) throw new RangeError(`invalid producer id ${producerId}`);
}

/**
 * The invariants the columns rely on. A violation is a bug in the caller (or a snapshot decoder that
 * let bad data through), never a client's mistake, hence an exception rather than an error code.
 */
function checkEntry(producerId: number, entry: ProducerEntry): void {
  const fail = (what: string): never => {
    throw new RangeError(`producer ${producerId}: ${what}`);
  };
  if (!Number.isInteger(entry.epoch) || entry.epoch < -1 || entry.epoch > INT16_MAX) fail(`invalid epoch ${entry.epoch}`);
  if (!isInt32(entry.coordinatorEpoch)) fail(`invalid coordinator epoch ${entry.coordinatorEpoch}`);
  if (!Number.isSafeInteger(entry.lastTimestampMs)) fail(`invalid last timestamp ${entry.lastTimestampMs}`);
  if (!Number.isSafeInteger(entry.currentTxnFirstOffset) || entry.currentTxnFirstOffset < NO_TXN_OFFSET) {
    fail(`invalid transaction first offset ${entry.currentTxnFirstOffset}`);
  }
  if (entry.batches.length > PRODUCER_BATCHES_RETAINED) fail(`${entry.batches.length} batches, more than ${PRODUCER_BATCHES_RETAINED}`);
  for (const batch of entry.batches) {
    if (!isInt32(batch.firstSeq) || !isInt32(batch.lastSeq)) fail(`invalid sequence range ${batch.firstSeq}..${batch.lastSeq}`);
    if (!Number.isSafeInteger(batch.firstOffset) || batch.firstOffset < 0) fail(`invalid first offset ${batch.firstOffset}`);
    const delta = batch.lastOffset - batch.firstOffset;
    if (!Number.isSafeInteger(batch.lastOffset) || delta < 0 || delta > INT32_MAX) {
      fail(`invalid offset range ${batch.firstOffset}..${batch.lastOffset}`);
    }
    if (!Number.isSafeInteger(batch.timestampMs)) fail(`invalid batch timestamp ${batch.timestampMs}`);
  }
}

function isInt32(value: number): boolean {
  return Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX;
}
