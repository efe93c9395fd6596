/**
 * The log cleaner's decisions, as Apache's LogCleaner and LogCleanerManager make them, without I/O:
 * which part of a log may be cleaned, whether a log is worth cleaning now, and what happens to each
 * batch and record. The storage layer (storage/log/log-cleaner.ts) reads and writes; everything it
 * decides comes from here, so every rule has a unit test of its own.
 */
import type { OffsetMap } from "./offset-map.ts";

// ---- what may be cleaned --------------------------------------------------------------------------

export interface SegmentExtent {
  baseOffset: number;
  sizeBytes: number;
  /** The largest batch timestamp in the segment (-1 when it holds none). */
  maxTimestampMs: number;
}

export interface CleanableRangeInput {
  /** The inactive segments, oldest first (the active segment is never cleaned). */
  segments: readonly SegmentExtent[];
  activeBaseOffset: number;
  logStartOffset: number;
  /** The last stable offset: nothing at or past the first unstable offset is cleaned. */
  lastStableOffset: number;
  /** Where the previous pass stopped (the cleaner checkpoint), or -1. */
  checkpointOffset: number;
  minCompactionLagMs: number;
  nowMs: number;
}

export interface CleanableRange {
  /** The first offset not yet cleaned (start of the dirty section). */
  firstDirtyOffset: number;
  /** Base offset of the first segment that may not be cleaned; segments wholly below it may be. */
  firstUncleanableOffset: number;
  /** Bytes of the segments below firstDirtyOffset (already clean). */
  cleanBytes: number;
  /** Bytes of the segments in [firstDirtyOffset, firstUncleanableOffset). */
  dirtyBytes: number;
  /** dirtyBytes / (cleanBytes + dirtyBytes), 0 for an empty log. */
  dirtyRatio: number;
  /** The checkpoint was outside the log and was reset to its start (Apache logs a warning then). */
  checkpointReset: boolean;
}

/**
 * The dirty section of a log. The uncleanable point is the lowest of the active segment's base, the
 * last stable offset (an undecided transaction's records must not be judged) and, with
 * min.compaction.lag.ms, the first segment holding a record younger than the lag; it is rounded down
 * to the start of the segment it falls in, since whole segments are cleaned.
 */
export function cleanableRange(input: CleanableRangeInput): CleanableRange {
  const { segments } = input;
  let uncleanable = Math.min(input.activeBaseOffset, input.lastStableOffset);
  if (input.minCompactionLagMs > 0) {
    const youngest = segments.find((s) => s.maxTimestampMs > input.nowMs - input.minCompactionLagMs);
    if (youngest !== undefined) uncleanable = Math.min(uncleanable, youngest.baseOffset);
  }
  // Round down to the base of the segment the point falls in.
  let firstUncleanableOffset = input.activeBaseOffset;
  for (let i = 0; i < segments.length; i++) {
    const end = i + 1 < segments.length ? segments[i + 1]!.baseOffset : input.activeBaseOffset;
    if (uncleanable < end) {
      firstUncleanableOffset = segments[i]!.baseOffset;
      break;
    }
  }
  let firstDirtyOffset = input.checkpointOffset;
  let checkpointReset = false;
  if (firstDirtyOffset < input.logStartOffset || firstDirtyOffset > input.activeBaseOffset) {
    checkpointReset = input.checkpointOffset >= 0;
    firstDirtyOffset = input.logStartOffset;
  }
  let cleanBytes = 0;
  let dirtyBytes = 0;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const end = i + 1 < segments.length ? segments[i + 1]!.baseOffset : input.activeBaseOffset;
    if (end <= firstDirtyOffset) cleanBytes += segment.sizeBytes;
    else if (segment.baseOffset < firstUncleanableOffset) dirtyBytes += segment.sizeBytes;
  }
  const total = cleanBytes + dirtyBytes;
  return { firstDirtyOffset, firstUncleanableOffset, cleanBytes, dirtyBytes, dirtyRatio: total === 0 ? 0 : dirtyBytes / total, checkpointReset };
}

export type CleaningReason = "dirty-ratio" | "max-compaction-lag" | "delete-horizon";

export interface CleaningNeedInput {
  range: CleanableRange;
  minCleanableDirtyRatio: number;
  maxCompactionLagMs: number;
  /** The earliest timestamp in the first dirty segment (-1 when unknown or empty). */
  firstDirtyTimestampMs: number;
  /** The earliest delete horizon a previous pass set on a kept tombstone or marker (-1: none). */
  pendingDeleteHorizonMs: number;
  nowMs: number;
}

/**
 * Whether to clean the log now, and why: the dirty ratio is above min.cleanable.dirty.ratio; or the
 * oldest dirty record waited longer than max.compaction.lag.ms; or tombstones or markers whose
 * delete.retention.ms has passed are waiting for a pass (otherwise they would stay until new dirty data
 * came along). Null when none holds.
 */
export function cleaningReason(input: CleaningNeedInput): CleaningReason | null {
  const { range } = input;
  // Strictly above, as Apache's LogCleanerManager compares: min.cleanable.dirty.ratio=1 never cleans by ratio.
  if (range.dirtyBytes > 0 && range.dirtyRatio > input.minCleanableDirtyRatio) return "dirty-ratio";
  if (
    range.dirtyBytes > 0 &&
    input.firstDirtyTimestampMs >= 0 &&
    input.nowMs - input.firstDirtyTimestampMs > input.maxCompactionLagMs
  ) {
    return "max-compaction-lag";
  }
  if (input.pendingDeleteHorizonMs >= 0 && input.pendingDeleteHorizonMs <= input.nowMs && range.cleanBytes + range.dirtyBytes > 0) {
    return "delete-horizon";
  }
  return null;
}

// ---- what happens to a batch ----------------------------------------------------------------------

/** What the producer state says about a producer the log still knows (its dedupe window and epoch). */
export interface ActiveProducer {
  /** Last offset of the producer's newest data batch, or -1 when it has none (only markers). */
  lastDataOffset: number;
  epoch: number;
}

export interface BatchFacts {
  producerId: number;
  producerEpoch: number;
  lastOffset: number;
  isControl: boolean;
  /** The batch's delete horizon, -1 when it has none. */
  deleteHorizonMs: number;
}

/**
 * The batch that holds a producer's newest data (or, for a producer with only markers, a marker of its
 * current epoch) is kept, emptied if need be: it carries the sequence and epoch that deduplication
 * rebuilds from after a restart.
 */
export function isLastBatchOfProducer(batch: BatchFacts, producers: ReadonlyMap<number, ActiveProducer>): boolean {
  if (batch.producerId < 0) return false;
  const producer = producers.get(batch.producerId);
  if (producer === undefined) return false;
  if (producer.lastDataOffset >= 0) return batch.lastOffset === producer.lastDataOffset;
  return batch.isControl && batch.producerEpoch === producer.epoch;
}

export type BatchRetention =
  /** Drop the batch and every record in it. */
  | "delete"
  /** Keep the batch even with no record left (header only): a producer's last batch. */
  | "retain-empty"
  /** Keep the records that pass `retainRecord`; drop the batch if none does. */
  | "delete-empty";

export interface BatchDecision {
  retention: BatchRetention;
  /** Every record of the batch goes (an aborted transaction's data, a marker past its horizon). */
  discardRecords: boolean;
  /** A marker with no data left behind it: it gets a delete horizon if it has none. */
  markerForEmptyTxn: boolean;
}

/**
 * Apache's batch rule. `canDiscard` comes from the transaction tracker: for data, the batch belongs to
 * an aborted transaction; for a marker, no data of its transaction is left. A marker's records go only
 * once its delete horizon (set on an earlier pass) has passed.
 */
export function decideBatch(batch: BatchFacts, canDiscard: boolean, isLastOfProducer: boolean, nowMs: number): BatchDecision {
  const discardRecords = batch.isControl
    ? canDiscard && batch.deleteHorizonMs >= 0 && batch.deleteHorizonMs <= nowMs
    : canDiscard;
  const retention: BatchRetention = isLastOfProducer ? "retain-empty" : discardRecords ? "delete" : "delete-empty";
  return { retention, discardRecords, markerForEmptyTxn: canDiscard && batch.isControl };
}

// ---- what happens to a record ---------------------------------------------------------------------

export interface RecordFacts {
  offset: number;
  /** The key is keyBytes[keyStart, keyStart + keyLength); keyLength -1 for a null key. */
  keyBytes: Uint8Array;
  keyStart: number;
  keyLength: number;
  /** A null value: a tombstone. */
  hasValue: boolean;
}

/**
 * Whether a data record survives: records past the end of the map are kept (they were not mapped); a
 * record without a key cannot be compacted and goes (a compacted topic refuses such records at produce
 * time); otherwise the record is kept when it is the latest for its key, and a tombstone only until its
 * batch's delete horizon passes (a batch without one keeps its tombstones: this pass sets the horizon).
 */
export function retainRecord(map: OffsetMap, record: RecordFacts, batchDeleteHorizonMs: number, nowMs: number): boolean {
  if (record.offset > map.latestOffset) return true;
  if (record.keyLength < 0) return false;
  const latest = record.offset >= map.getKey(record.keyBytes, record.keyStart, record.keyLength);
  if (!latest) return false;
  if (record.hasValue) return true;
  return batchDeleteHorizonMs < 0 || nowMs < batchDeleteHorizonMs;
}

/**
 * The delete horizon a rewritten batch carries: its own if it has one; now + delete.retention.ms when it
 * keeps a tombstone or is a marker with no data left (the start of its countdown); none otherwise.
 */
export function deleteHorizonFor(existingMs: number, keepsTombstoneOrEmptyTxnMarker: boolean, nowMs: number, deleteRetentionMs: number): number {
  if (existingMs >= 0) return existingMs;
  return keepsTombstoneOrEmptyTxnMarker ? nowMs + deleteRetentionMs : -1;
}
