/**
 * One segment of a partition log: `<baseOffset, 20 digits>.log` with its `.index`, `.timeindex` and
 * `.txnindex` (aborted transactions, see txn-index.ts), and the in-memory state the log keeps for it.
 * A segment written by a leader at epoch E >= 1 (cluster mode) carries the epoch in its names,
 * `<baseOffset>.e<E>.log` and so on (docs/architecture.md, "Files of a leader epoch"), so that a former
 * leader can never write into a file of its successor.
 * Also the batch-by-batch scan that recovery and index rebuilds use.
 *
 * Memory per segment is a handful of numbers. Index entries are held in memory only for the active
 * segment (they are appended there) and, on demand, for a couple of recently read inactive segments.
 */
import { VerifiedRanges } from "./verified-ranges.ts";
import { join } from "node:path";
import type { FileHandle } from "../../platform/fs.ts";
import {
  BATCH_HEADER_BYTES,
  baseOffsetAt,
  batchSizeAt,
  checkBatch,
  lastOffsetDeltaAt,
  maxTimestampAt,
  PARTITION_LEADER_EPOCH_AT,
  readInt32,
  type BatchProblem,
} from "../../protocol/records/record-batch.ts";
import { OffsetIndex, TimeIndex } from "./indexes.ts";

/** Groups: 1 the base offset, 2 the epoch (absent for epoch 0), 3 the extension. */
export const SEGMENT_FILE_NAME = /^(\d{20})(?:\.e([1-9]\d*))?\.(log|index|timeindex|txnindex)$/;

export type SegmentExtension = "log" | "index" | "timeindex" | "txnindex";

/** `<base>.<ext>` for epoch 0 (the names single-broker mode always used), `<base>.e<epoch>.<ext>` above. */
export function segmentFileName(baseOffset: number, extension: SegmentExtension, epoch = 0): string {
  return `${String(baseOffset).padStart(20, "0")}${epoch === 0 ? "" : `.e${epoch}`}.${extension}`;
}

export class Segment {
  readonly logPath: string;
  readonly indexPath: string;
  readonly timeIndexPath: string;
  readonly txnIndexPath: string;
  readonly logName: string;

  /** Bytes assigned to the segment; for the active one this includes writes still in flight. */
  sizeBytes = 0;
  /** Bytes whose write has completed: readers never look past this. */
  writtenBytes = 0;
  /** Bytes known fsynced (the whole file once the segment is inactive): the scrubber looks no further. */
  durableBytes = 0;
  /** A full scan of this segment found it damaged: later reads fail with this instead of scanning again. */
  scanFailure: Error | undefined;
  /** What this process has checked of the file, whose CRCs reads need not compute again (verified-ranges.ts). */
  readonly verified = new VerifiedRanges();
  /** One past the last offset assigned to this segment (its next segment's base once inactive). */
  endOffset: number;

  /** In memory for the active segment; loaded on demand (and dropped again) for inactive ones. */
  offsetIndex: OffsetIndex | undefined;
  /** In memory for the active segment only. */
  timeIndex: TimeIndex | undefined;
  /** Largest batch max timestamp in the segment; undefined until known for an inactive segment. */
  maxTimestampMs: number | undefined = -1;
  /** Base offset of the first batch whose max timestamp reached maxTimestampMs (-1 when none). */
  offsetOfMaxTimestamp = -1;
  /** Bytes appended since the last offset index entry. */
  bytesSinceIndexEntry = 0;
  /** Wall-clock time the segment started taking appends in this process (segment.ms rolls). */
  createdMs: number;

  /** Open file handle (read-write for the active segment), shared by writer and readers. */
  handle: FileHandle | undefined;
  opening: Promise<FileHandle> | undefined;
  /** Operations using `handle` right now; the handle is closed only at zero. */
  refs = 0;
  /** The log holds the handle open: the segment takes appends, or its roll has not completed. */
  pinned = false;
  /** Deleted by retention: its files go when the last reference is released. */
  retired = false;
  /** Replaced by a cleaned segment: its file names belong to the new segment (or are gone), so retiring it only closes its handle. */
  filesReplaced = false;
  /** A load or rebuild of the indexes in progress, shared by concurrent readers. */
  indexLoading: Promise<void> | undefined;
  /** Bytes of the `.txnindex` file as this process wrote or found it: where the next entry goes. */
  txnIndexBytes = 0;
  /**
   * A later leader epoch follows this segment (it was found so at open): its files may hold a former
   * leader's late writes past its end, which are no part of the log.
   */
  followedByLaterEpoch = false;

  constructor(
    readonly dir: string,
    readonly baseOffset: number,
    createdMs: number,
    /** The leader epoch whose files these are (0: single-broker names). */
    readonly epoch = 0,
  ) {
    this.logName = segmentFileName(baseOffset, "log", epoch);
    this.logPath = join(dir, this.logName);
    this.indexPath = join(dir, segmentFileName(baseOffset, "index", epoch));
    this.timeIndexPath = join(dir, segmentFileName(baseOffset, "timeindex", epoch));
    this.txnIndexPath = join(dir, segmentFileName(baseOffset, "txnindex", epoch));
    this.endOffset = baseOffset;
    this.createdMs = createdMs;
  }

  /** Starts empty in-memory indexes (a new active segment, or a rebuild). */
  resetIndexes(): void {
    this.offsetIndex = new OffsetIndex();
    this.timeIndex = new TimeIndex();
    this.maxTimestampMs = -1;
    this.offsetOfMaxTimestamp = -1;
    this.bytesSinceIndexEntry = 0;
  }

  /**
   * Accounts for a batch placed at `position`: max timestamp, and an index entry once more than
   * `indexIntervalBytes` were appended since the last one. Both indexes must be in memory.
   */
  indexBatch(baseOffset: number, position: number, sizeBytes: number, maxTimestampMs: number, indexIntervalBytes: number): void {
    if (maxTimestampMs > (this.maxTimestampMs ?? -1)) {
      this.maxTimestampMs = maxTimestampMs;
      this.offsetOfMaxTimestamp = baseOffset;
    }
    if (this.bytesSinceIndexEntry >= indexIntervalBytes) {
      this.offsetIndex!.append(baseOffset - this.baseOffset, position);
      if (this.offsetOfMaxTimestamp >= 0) {
        this.timeIndex!.maybeAppend(this.maxTimestampMs!, this.offsetOfMaxTimestamp - this.baseOffset);
      }
      this.bytesSinceIndexEntry = 0;
    }
    this.bytesSinceIndexEntry += sizeBytes;
  }

  /** Adds the segment's max timestamp as the last time index entry (at roll and at close). */
  finalizeTimeIndex(timeIndex: TimeIndex): void {
    if (this.offsetOfMaxTimestamp >= 0 && this.maxTimestampMs !== undefined) {
      timeIndex.maybeAppend(this.maxTimestampMs, this.offsetOfMaxTimestamp - this.baseOffset);
    }
  }
}

// ---- scanning -------------------------------------------------------------------------------------

/** Bytes read at a time by a scan; a batch larger than this is read whole. */
const SCAN_CHUNK_BYTES = 1024 * 1024;

export interface BadBatch {
  position: number;
  /** The offset the batch at `position` should have started with. */
  expectedOffset: number;
  reason: string;
  /**
   * The bad batch's own length leads to a sound batch whose base offset continues the bad batch's
   * offsets: the damage is inside the log, not at a torn end.
   */
  followedByValidBatch: boolean;
}

export interface ScanResult {
  /** Bytes [0, validBytes) are whole batches with good CRCs and contiguous offsets. */
  validBytes: number;
  /** One past the last offset of those batches (the base offset for an empty segment). */
  endOffset: number;
  bad: BadBatch | undefined;
  /**
   * The scan stopped at a fenced former leader's late write (see ScanFence): the bytes from `position`
   * on are not part of the log. Undefined when the scan read to the end or stopped at a bad batch.
   */
  fenced: { position: number; offset: number; bytes: number } | undefined;
}

/**
 * Where a segment's part of the log ends by leader epoch (docs/architecture.md, "Files of a leader
 * epoch"): at `stopAtOffset` (a later epoch starts there), or at the first batch stamped with an epoch
 * whose successor started at or before the batch's base offset (`fencedFrom(epoch)`). What follows is
 * a former leader's late write: the scan stops there without calling it damage.
 */
export interface ScanFence {
  stopAtOffset: number;
  fencedFrom: (epoch: number) => number;
}

export type BatchVisitor = (bytes: Uint8Array, at: number, position: number, sizeBytes: number) => void;

/** A batch problem in words, for errors and damage findings. */
export function describeBatchProblem(problem: BatchProblem): string {
  switch (problem.kind) {
    case "truncated":
      return `batch cut short (${problem.availableBytes} of ${problem.neededBytes} bytes)`;
    case "invalid-length":
      return `invalid batch length ${problem.batchLength}`;
    case "unsupported-magic":
      return `magic ${problem.magic}`;
    case "crc-mismatch":
      return `CRC mismatch (stored ${problem.storedCrc}, computed ${problem.computedCrc})`;
    case "invalid-compression":
      return `invalid compression codec ${problem.codec}`;
    case "invalid-record-count":
      return `records count ${problem.recordsCount} with last offset delta ${problem.lastOffsetDelta}`;
    default:
      return problem.kind;
  }
}

/**
 * Reads the segment file from the start, checking every batch (framing, CRC-32C, codec, count, and base
 * offsets contiguous from the segment's base offset), and calls `visit` for each sound one. Stops at the
 * first bad batch and reports it; it never modifies the file.
 *
 * `cleaned`: the log cleaner may have rewritten the segment, so base offsets only have to increase (the
 * cleaner leaves gaps where it removed batches) and a batch may hold fewer records than its offset span
 * (down to none: a producer's last batch kept for its sequence). The CRC still covers every field that
 * says so.
 */
export async function scanSegment(
  handle: FileHandle,
  fileBytes: number,
  baseOffset: number,
  visit: BatchVisitor,
  cleaned = false,
  fence?: ScanFence,
): Promise<ScanResult> {
  let buffer: Uint8Array = new Uint8Array(0);
  let bufferStart = 0;
  const ensure = async (position: number, length: number): Promise<number> => {
    const end = Math.min(fileBytes, position + length);
    if (position >= bufferStart && end <= bufferStart + buffer.length) return position - bufferStart;
    buffer = await handle.read(Math.max(end - position, Math.min(SCAN_CHUNK_BYTES, fileBytes - position)), position);
    bufferStart = position;
    return 0;
  };

  let position = 0;
  let expectedOffset = baseOffset;
  while (position < fileBytes) {
    if (fence !== undefined && expectedOffset >= fence.stopAtOffset) {
      return { validBytes: position, endOffset: expectedOffset, bad: undefined, fenced: { position, offset: expectedOffset, bytes: fileBytes - position } };
    }
    let at = await ensure(position, BATCH_HEADER_BYTES);
    const headerBytes = Math.min(buffer.length - at, BATCH_HEADER_BYTES);
    let sizeBytes = headerBytes >= 12 ? batchSizeAt(buffer, at) : BATCH_HEADER_BYTES;
    if (sizeBytes >= BATCH_HEADER_BYTES && position + sizeBytes <= fileBytes) at = await ensure(position, sizeBytes);
    const available = Math.min(buffer.length - at, fileBytes - position);
    const checked = checkBatch(buffer, at, at + available, cleaned);
    let reason: string | undefined;
    if (typeof checked !== "number") {
      reason = describeBatchProblem(checked);
    } else if (cleaned ? baseOffsetAt(buffer, at) < expectedOffset : baseOffsetAt(buffer, at) !== expectedOffset) {
      reason = `base offset ${baseOffsetAt(buffer, at)} where ${cleaned ? "at least " : ""}${expectedOffset} was expected`;
    }
    if (reason === undefined && fence !== undefined && fence.fencedFrom(partitionLeaderEpochAt(buffer, at)) <= baseOffsetAt(buffer, at)) {
      return { validBytes: position, endOffset: expectedOffset, bad: undefined, fenced: { position, offset: expectedOffset, bytes: fileBytes - position } };
    }
    if (reason !== undefined) {
      const followed = await followedByValidBatch(handle, fileBytes, position, expectedOffset, buffer, at, available);
      return { validBytes: position, endOffset: expectedOffset, bad: { position, expectedOffset, reason, followedByValidBatch: followed }, fenced: undefined };
    }
    sizeBytes = checked as number;
    visit(buffer, at, position, sizeBytes);
    expectedOffset = baseOffsetAt(buffer, at) + lastOffsetDeltaAt(buffer, at) + 1;
    position += sizeBytes;
  }
  return { validBytes: position, endOffset: expectedOffset, bad: undefined, fenced: undefined };
}

/** The partitionLeaderEpoch of the batch header at `at` (int32; -1 when the producer left it unset). */
export function partitionLeaderEpochAt(bytes: Uint8Array, at: number): number {
  return readInt32(bytes, at + PARTITION_LEADER_EPOCH_AT);
}

/**
 * Whether the bad batch at `position` is followed by a sound batch at the position its own length field
 * gives, with the base offset its own offsets imply. A crash tears the end of what was being written;
 * it does not leave a damaged batch followed by an intact one that continues it. (With out-of-order page
 * writeback it is possible in principle within unsynced data; the error names the file and position so
 * that an operator can truncate by hand in that unlikely case.)
 */
async function followedByValidBatch(
  handle: FileHandle,
  fileBytes: number,
  position: number,
  expectedOffset: number,
  buffer: Uint8Array,
  at: number,
  available: number,
): Promise<boolean> {
  if (available < BATCH_HEADER_BYTES) return false;
  const sizeBytes = batchSizeAt(buffer, at);
  if (sizeBytes < BATCH_HEADER_BYTES) return false;
  const nextPosition = position + sizeBytes;
  if (nextPosition + BATCH_HEADER_BYTES > fileBytes) return false;
  const header = await handle.read(BATCH_HEADER_BYTES, nextPosition);
  if (header.length < BATCH_HEADER_BYTES) return false;
  const nextSize = batchSizeAt(header, 0);
  if (nextSize < BATCH_HEADER_BYTES || nextPosition + nextSize > fileBytes) return false;
  const next = await handle.read(nextSize, nextPosition);
  if (checkBatch(next, 0) !== nextSize) return false;
  // The damaged batch's own base offset may be what is damaged; its last offset delta is the best
  // remaining evidence of where the next batch must start.
  return baseOffsetAt(next, 0) === expectedOffset + lastOffsetDeltaAt(buffer, at) + 1;
}

/** A visitor that rebuilds a segment's in-memory indexes from scanned batches. */
export function indexingVisitor(segment: Segment, indexIntervalBytes: number): BatchVisitor {
  segment.resetIndexes();
  return (bytes, at, position, sizeBytes) => {
    segment.indexBatch(baseOffsetAt(bytes, at), position, sizeBytes, maxTimestampAt(bytes, at), indexIntervalBytes);
  };
}
