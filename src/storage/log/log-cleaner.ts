/**
 * One cleaning pass over one partition log (Apache's Cleaner.doClean is the reference), in three steps:
 *
 * 1. Map: walk the dirty section [firstDirtyOffset, firstUncleanableOffset) and record the latest offset
 *    of every key in the OffsetMap, skipping aborted transactions' records and control batches. A full
 *    map ends the section early; the next pass continues where this one stopped.
 * 2. Clean: rewrite every segment from the start of the log up to the end of the map, in groups whose
 *    total size fits one segment, keeping for each batch what cleaning-rules.ts says (the latest record
 *    of each key, tombstones until their delete horizon, transactions' markers while they are needed,
 *    every producer's last batch). Offsets never change: a rewritten batch keeps its base offset and
 *    offset span, and removed batches leave gaps.
 * 3. Swap each group's new segment in (segment-swap.ts: crash-safe, either the old segments or the new
 *    one survive a kill) and move the cleaner checkpoint.
 *
 * The caller (Partition.clean) supplies what only it knows: the range to clean (bounded by the last
 * stable offset), the aborted transactions, the active producers' last batches, and the log as a
 * CleanableLog, whose swap also hands over the aborted-transaction index entries each group keeps. The
 * same code runs on the broker's thread (the log is the PartitionLog) or on a cleaner thread (the log
 * reads the segment files itself and asks the broker's thread for the checkpoint and the swaps):
 * docs/architecture.md, "Compaction".
 */
import { join } from "node:path";
import { CorruptStateError, FatalError } from "../../errors/errors.ts";
import type { Fs } from "../../platform/fs.ts";
import {
  decideBatch,
  deleteHorizonFor,
  isLastBatchOfProducer,
  retainRecord,
  type ActiveProducer,
  type RecordFacts,
  type CleanableRange,
} from "../../domain/compaction/cleaning-rules.ts";
import type { OffsetMap } from "../../domain/compaction/offset-map.ts";
import { CleaningTxnTracker, type AbortedTxnRange, type ControlKind } from "../../domain/compaction/txn-cleaning.ts";
import {
  BATCH_HEADER_BYTES,
  baseOffsetAt,
  batchSizeAt,
  checkBatch,
  maxTimestampAt,
  parseBatchHeader,
  parseControlRecord,
  type BatchHeader,
} from "../../protocol/records/record-batch.ts";
import { buildBatchFromScan, RecordScan } from "../../protocol/records/record-scan.ts";
import { batchSpecOf } from "../../protocol/records/records.ts";
import { encodeTxnIndexEntries } from "./txn-index.ts";
import { Segment, segmentFileName } from "./segment.ts";
import { cleanedPath } from "./segment-swap.ts";
import type { CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import type { CleanableSegment, CleanedSegment } from "./partition-log.ts";

/** Bytes read from a segment at a time (a larger batch is read whole). */
const READ_CHUNK_BYTES = 1024 * 1024;
/** Cleaned bytes buffered before they are written out. */
const WRITE_CHUNK_BYTES = 1024 * 1024;
const INT32_MAX = 0x7fffffff;

/**
 * The members of a partition log a pass uses. PartitionLog has all but the swap's second half, which
 * Partition.clean adds; a cleaner thread implements them over the segment files and messages.
 */
export interface CleanableLog {
  readonly dir: string;
  /** The log's size now (before the pass, and after its swaps). */
  readonly sizeBytes: number;
  readonly cleanerCheckpoint: CleanerCheckpoint;
  /** The inactive segments, oldest first; the pass's range lies within them and they do not change under it. */
  cleanableSegments(): CleanableSegment[];
  /**
   * Up to `length` bytes at `position` of the inactive segment based at `baseOffset`, read into `into`
   * (at least `length` long, memory the pass reuses from read to read) and returned as a view of it.
   */
  readSegmentBytes(baseOffset: number, position: number, length: number, into: Uint8Array): Promise<Uint8Array>;
  saveCleanerCheckpoint(checkpoint: CleanerCheckpoint): Promise<void>;
  /**
   * Swaps `cleaned` in for the segments it replaces (PartitionLog.replaceSegments) and, synchronously
   * right after the swap, replaces the aborted-transaction index entries of [its base, endOffset) with
   * `keptAborted`, those whose markers it still holds: no read_committed fetch sees one without the other.
   */
  replaceSegments(cleaned: CleanedSegment, endOffset: number, keptAborted: AbortedTxnRange[]): Promise<void>;
}

export interface CleanPassInput {
  fs: Fs;
  log: CleanableLog;
  range: CleanableRange;
  nowMs: number;
  deleteRetentionMs: number;
  /** segment.bytes: a group of cleaned segments is at most this large before cleaning. */
  maxGroupBytes: number;
  indexIntervalBytes: number;
  map: OffsetMap;
  producers: ReadonlyMap<number, ActiveProducer>;
  /** Every aborted transaction whose marker is at or after the log start, by first offset. */
  aborted: readonly AbortedTxnRange[];
  /** Called with the bytes of each batch read; resolves when reading may go on (I/O throttle). */
  throttle: (bytes: number) => Promise<void>;
  /** Stops the pass between batches (shutdown, topic deletion). */
  shouldStop: () => boolean;
}

export interface CleanPassStats {
  /** The cleaner checkpoint after the pass: offsets below it are clean. */
  endOffset: number;
  bytesRead: number;
  bytesWritten: number;
  /** The log's size before and after the cleaned segments were replaced. */
  sizeBeforeBytes: number;
  sizeAfterBytes: number;
  recordsRead: number;
  recordsRemoved: number;
  batchesRemoved: number;
  segmentsCleaned: number;
  /** The earliest delete horizon on a kept tombstone or marker, -1 when none. */
  pendingDeleteHorizonMs: number;
  mapFull: boolean;
  stopped: boolean;
}

/**
 * Walks the batches of an inactive segment in order, reading a chunk at a time into the pass's read
 * buffer: a batch it hands out is valid until the next call (the writer copies what it keeps).
 */
class BatchWalker {
  private buffer: Uint8Array = new Uint8Array(0);
  private bufferStart = 0;
  position = 0;

  /**
   * @param verify check every batch (CRC included). Each batch a pass reads is verified once, before any
   * group is swapped in on the strength of it: the mapping step verifies the dirty segments (the map it
   * builds decides what every group keeps, and the first group is swapped before the last is read
   * again), the cleaning step the segments the mapping did not read whole.
   */
  constructor(
    private readonly log: CleanableLog,
    private readonly segment: CleanableSegment,
    private readonly verify: boolean,
    private readonly reads: ReadBuffer,
  ) {}

  /** The next batch as [bytes, at, size], or undefined at the end of the segment. */
  async next(): Promise<{ bytes: Uint8Array; at: number; size: number } | undefined> {
    const size = this.segment.sizeBytes;
    if (this.position >= size) return undefined;
    let at = await this.ensure(this.position, BATCH_HEADER_BYTES);
    const batchBytes = batchSizeAt(this.buffer, at);
    if (batchBytes < BATCH_HEADER_BYTES || this.position + batchBytes > size) {
      throw new FatalError(`${this.log.dir}: batch at position ${this.position} of segment ${this.segment.baseOffset} has length ${batchBytes}`);
    }
    at = await this.ensure(this.position, batchBytes);
    // The cleaner copies batches and rebuilds others with a fresh CRC: a damaged batch must stop the pass
    // here, or the rewrite would give garbage a valid checksum.
    const checked = this.verify ? checkBatch(this.buffer, at, at + batchBytes, true) : batchBytes;
    if (typeof checked !== "number") {
      throw new CorruptStateError(
        join(this.log.dir, segmentFileName(this.segment.baseOffset, "log", this.segment.epoch ?? 0)),
        `batch at position ${this.position} fails its check (${checked.kind}); the cleaner leaves the partition alone`,
      );
    }
    this.position += batchBytes;
    return { bytes: this.buffer, at, size: batchBytes };
  }

  private async ensure(position: number, length: number): Promise<number> {
    if (position >= this.bufferStart && position + length <= this.bufferStart + this.buffer.length) return position - this.bufferStart;
    const want = Math.max(length, READ_CHUNK_BYTES);
    const bytes = await this.log.readSegmentBytes(this.segment.baseOffset, position, want, this.reads.room(want));
    if (bytes.length < length) throw new FatalError(`${this.log.dir}: segment ${this.segment.baseOffset} is shorter than its size at ${position}`);
    this.buffer = bytes;
    this.bufferStart = position;
    return 0;
  }
}

/**
 * The memory a pass reads segments into, reused from read to read: a fresh megabyte per read cost the
 * page faults of mapping it, about a tenth of an uncompressed pass.
 */
class ReadBuffer {
  private bytes = new Uint8Array(0);

  /** A buffer of at least `length` bytes (this one again unless it is too small). */
  room(length: number): Uint8Array {
    if (this.bytes.length < length) this.bytes = new Uint8Array(Math.max(length, READ_CHUNK_BYTES));
    return this.bytes;
  }
}

/**
 * What a pass keeps from batch to batch: the records of the batch at hand, walked without an object per
 * record (record-scan.ts), the indexes of those it keeps, and which segments it has verified. Each pass
 * has its own, and each use of the scan is synchronous, from the scan to the rebuilt batch.
 */
class PassScratch {
  readonly scan = new RecordScan();
  readonly reads = new ReadBuffer();
  /** The cleaned bytes waiting to be written (CleanedWriter), one group at a time. */
  readonly writes = new Uint8Array(WRITE_CHUNK_BYTES);
  /** Base offsets of the segments the mapping step read whole, and so verified (see BatchWalker). */
  readonly verifiedSegments = new Set<number>();
  kept = new Int32Array(256);
  /** A fact object reused for retainRecord, one record at a time. */
  readonly record: RecordFacts = { offset: 0, keyBytes: new Uint8Array(0), keyStart: 0, keyLength: -1, hasValue: false };

  keepRoom(count: number): Int32Array {
    if (this.kept.length < count) this.kept = new Int32Array(Math.max(count, this.kept.length * 2));
    return this.kept;
  }
}

function controlKindOf(bytes: Uint8Array, at: number, header: BatchHeader): ControlKind {
  if (header.recordsCount === 0) return "empty";
  return parseControlRecord(bytes, at).type;
}

/** Step 1: the offset map over the dirty section. Returns whether it filled up. */
async function buildOffsetMap(input: CleanPassInput, stats: { bytesRead: number }, reuse: PassScratch): Promise<boolean> {
  const { log, map, range } = input;
  map.clear();
  // Everything below the dirty section is clean already: its records count as mapped, so that a pass
  // run only to remove tombstones past their horizon judges them.
  map.updateLatestOffset(range.firstDirtyOffset - 1);
  // Only the aborted transactions that reach into the dirty section (Apache's collectAbortedTransactions
  // from the first dirty offset): one whose marker lies before the walk starts would never see that
  // marker close it, and the same producer's later committed batches would be taken for aborted ones
  // and left out of the map, so that the older values of their keys survived the pass.
  const tracker = new CleaningTxnTracker(input.aborted.filter((txn) => txn.lastOffset >= range.firstDirtyOffset));
  const dirty = log
    .cleanableSegments()
    .filter((s) => s.endOffset > range.firstDirtyOffset && s.baseOffset < range.firstUncleanableOffset);
  for (const segment of dirty) {
    const walker = new BatchWalker(log, segment, true, reuse.reads);
    for (;;) {
      if (input.shouldStop()) return false;
      const batch = await walker.next();
      if (batch === undefined) break;
      stats.bytesRead += batch.size;
      await input.throttle(batch.size);
      const header = parseBatchHeader(batch.bytes, batch.at);
      const lastOffset = header.baseOffset + header.lastOffsetDelta;
      if (header.isControl) {
        tracker.onControlBatch(header.producerId, controlKindOf(batch.bytes, batch.at, header), lastOffset);
      } else if (!tracker.onDataBatch(header.producerId, header.isTransactional, lastOffset)) {
        const { scan } = reuse;
        scan.scan(batch.bytes, batch.at);
        const { section, keyStarts, keyLengths, offsets } = scan;
        for (let i = 0; i < scan.count; i++) {
          const keyLength = keyLengths[i]!;
          const offset = offsets[i]!;
          if (keyLength < 0 || offset < range.firstDirtyOffset) continue;
          const keyStart = keyStarts[i]!;
          if (map.isFull && map.getKey(section, keyStart, keyLength) < 0) return true;
          map.putKey(section, keyStart, keyLength, offset);
        }
      }
      if (lastOffset >= range.firstDirtyOffset) map.updateLatestOffset(lastOffset);
    }
    reuse.verifiedSegments.add(segment.baseOffset);
  }
  return false;
}

/** Groups adjacent segments so that each group's bytes fit one segment (Apache's groupSegmentsBySize). */
function groupSegments(segments: CleanableSegment[], maxGroupBytes: number): CleanableSegment[][] {
  const groups: CleanableSegment[][] = [];
  let group: CleanableSegment[] = [];
  let bytes = 0;
  for (const segment of segments) {
    const fits =
      group.length > 0 && bytes + segment.sizeBytes <= maxGroupBytes && segment.endOffset - 1 - group[0]!.baseOffset <= INT32_MAX;
    if (!fits && group.length > 0) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(segment);
    bytes += segment.sizeBytes;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/**
 * Writes the cleaned bytes of one group to its `.cleaned` log file through one buffer of the pass, into
 * which every batch kept is copied as it comes (the batches handed to `add` live in the read buffer,
 * which the next read reuses).
 */
class CleanedWriter {
  private chunkBytes = 0;
  sizeBytes = 0;

  constructor(
    private readonly handle: Awaited<ReturnType<Fs["open"]>>,
    private readonly buffer: Uint8Array,
  ) {}

  /** Where the next batch added will sit in the file. */
  get position(): number {
    return this.sizeBytes + this.chunkBytes;
  }

  async add(bytes: Uint8Array): Promise<void> {
    if (this.chunkBytes + bytes.length > this.buffer.length) await this.flush();
    if (bytes.length > this.buffer.length) {
      // A batch larger than the buffer goes out on its own, before the read buffer is reused.
      await this.handle.write(bytes, this.sizeBytes);
      this.sizeBytes += bytes.length;
      return;
    }
    this.buffer.set(bytes, this.chunkBytes);
    this.chunkBytes += bytes.length;
  }

  async flush(): Promise<void> {
    if (this.chunkBytes === 0) return;
    await this.handle.write(this.buffer.subarray(0, this.chunkBytes), this.sizeBytes);
    this.sizeBytes += this.chunkBytes;
    this.chunkBytes = 0;
  }
}

async function writeDurably(fs: Fs, path: string, bytes: Uint8Array): Promise<void> {
  const handle = await fs.open(path, "w");
  try {
    if (bytes.length > 0) await handle.write(bytes, 0);
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${path} failed`, { cause: error });
    }
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** Runs one pass (see the file comment). */
export async function cleanLog(input: CleanPassInput): Promise<CleanPassStats> {
  const { log, map, fs, nowMs } = input;
  const stats: CleanPassStats = {
    endOffset: input.range.firstDirtyOffset,
    bytesRead: 0,
    bytesWritten: 0,
    sizeBeforeBytes: log.sizeBytes,
    sizeAfterBytes: log.sizeBytes,
    recordsRead: 0,
    recordsRemoved: 0,
    batchesRemoved: 0,
    segmentsCleaned: 0,
    pendingDeleteHorizonMs: -1,
    mapFull: false,
    stopped: false,
  };
  const reuse = new PassScratch();
  stats.mapFull = await buildOffsetMap(input, stats, reuse);
  if (input.shouldStop()) {
    stats.stopped = true;
    return stats;
  }
  const endOffset = Math.max(input.range.firstDirtyOffset, map.latestOffset + 1);
  stats.endOffset = endOffset;
  const toClean = log.cleanableSegments().filter((s) => s.baseOffset < endOffset && s.baseOffset < input.range.firstUncleanableOffset);
  if (toClean.length === 0) return stats;

  // Recovery must know, before the first swap, that these segments may have gaps from now on.
  const before = log.cleanerCheckpoint;
  const gapsBelowOffset = Math.max(before.gapsBelowOffset, toClean[toClean.length - 1]!.endOffset);
  if (gapsBelowOffset > before.gapsBelowOffset) await log.saveCleanerCheckpoint({ ...before, gapsBelowOffset });

  const tracker = new CleaningTxnTracker(input.aborted);
  for (const group of groupSegments(toClean, input.maxGroupBytes)) {
    const baseOffset = group[0]!.baseOffset;
    const scratch = new Segment(log.dir, baseOffset, nowMs);
    scratch.resetIndexes();
    const keptAborted: AbortedTxnRange[] = [];
    const logPath = cleanedPath(log.dir, baseOffset, "log");
    const handle = await fs.open(logPath, "w");
    const writer = new CleanedWriter(handle, reuse.writes);
    try {
      for (const segment of group) {
        const walker = new BatchWalker(log, segment, !reuse.verifiedSegments.has(segment.baseOffset), reuse.reads);
        for (;;) {
          if (input.shouldStop()) {
            stats.stopped = true;
            break;
          }
          const batch = await walker.next();
          if (batch === undefined) break;
          stats.bytesRead += batch.size;
          await input.throttle(batch.size);
          const kept = cleanBatch(input, tracker, batch.bytes, batch.at, batch.size, stats, keptAborted, reuse);
          if (kept === undefined) continue;
          scratch.indexBatch(baseOffsetAt(kept, 0), writer.position, kept.length, maxTimestampAt(kept, 0), input.indexIntervalBytes);
          await writer.add(kept);
        }
        if (stats.stopped) break;
      }
      await writer.flush();
      if (!stats.stopped) {
        try {
          await handle.fsync();
        } catch (error) {
          throw new FatalError(`fsync of ${logPath} failed`, { cause: error });
        }
      }
    } catch (error) {
      // Nothing was committed: the old segments stay. The half-written file goes now (recovery would
      // remove it at the next start otherwise).
      await handle.close().catch(() => undefined);
      await fs.unlink(logPath).catch(() => undefined);
      throw error;
    }
    await handle.close().catch(() => undefined);
    if (stats.stopped) {
      await fs.unlink(logPath).catch(() => undefined);
      return stats;
    }
    const timeIndex = scratch.timeIndex!;
    scratch.finalizeTimeIndex(timeIndex);
    const txnIndexBytes = encodeTxnIndexEntries(keptAborted);
    await Promise.all([
      writeDurably(fs, cleanedPath(log.dir, baseOffset, "index"), scratch.offsetIndex!.encode()),
      writeDurably(fs, cleanedPath(log.dir, baseOffset, "timeindex"), timeIndex.encode()),
      writeDurably(fs, cleanedPath(log.dir, baseOffset, "txnindex"), txnIndexBytes),
    ]);
    await log.replaceSegments(
      {
        replaced: group.map((s) => s.baseOffset),
        sizeBytes: writer.sizeBytes,
        offsetIndex: scratch.offsetIndex!,
        timeIndex,
        maxTimestampMs: scratch.maxTimestampMs ?? -1,
        offsetOfMaxTimestamp: scratch.offsetOfMaxTimestamp,
        txnIndexBytes: txnIndexBytes.length,
      },
      group[group.length - 1]!.endOffset,
      keptAborted,
    );
    stats.bytesWritten += writer.sizeBytes;
    stats.segmentsCleaned += group.length;
  }
  stats.sizeAfterBytes = log.sizeBytes;
  await log.saveCleanerCheckpoint({ firstDirtyOffset: endOffset, gapsBelowOffset, pendingDeleteHorizonMs: stats.pendingDeleteHorizonMs });
  return stats;
}

/**
 * Decides one batch: undefined when it goes, else the bytes to write (the original batch untouched when
 * nothing in it changes, a rebuilt batch otherwise).
 */
function cleanBatch(
  input: CleanPassInput,
  tracker: CleaningTxnTracker,
  bytes: Uint8Array,
  at: number,
  size: number,
  stats: CleanPassStats,
  keptAborted: AbortedTxnRange[],
  reuse: PassScratch,
): Uint8Array | undefined {
  const { nowMs, map } = input;
  const header = parseBatchHeader(bytes, at);
  const spec = batchSpecOf(bytes, at);
  const lastOffset = header.baseOffset + header.lastOffsetDelta;
  let canDiscard: boolean;
  if (header.isControl) {
    const verdict = tracker.onControlBatch(header.producerId, controlKindOf(bytes, at, header), lastOffset);
    canDiscard = verdict.discardable;
    if (verdict.keepInIndex !== undefined) keptAborted.push(verdict.keepInIndex);
  } else {
    canDiscard = tracker.onDataBatch(header.producerId, header.isTransactional, lastOffset);
  }
  const facts = {
    producerId: header.producerId,
    producerEpoch: header.producerEpoch,
    lastOffset,
    isControl: header.isControl,
    deleteHorizonMs: spec.deleteHorizonMs,
  };
  const decision = decideBatch(facts, canDiscard, isLastBatchOfProducer(facts, input.producers), nowMs);
  stats.recordsRead += header.recordsCount;
  if (decision.retention === "delete") {
    stats.recordsRemoved += header.recordsCount;
    stats.batchesRemoved++;
    return undefined;
  }

  const { scan, record } = reuse;
  let keptCount = 0;
  let keepsTombstone = false;
  if (decision.discardRecords || (header.isControl && header.recordsCount === 0)) {
    keptCount = 0;
  } else {
    scan.scan(bytes, at);
    const kept = reuse.keepRoom(scan.count);
    record.keyBytes = scan.section;
    for (let i = 0; i < scan.count; i++) {
      if (!header.isControl) {
        record.offset = scan.offsets[i]!;
        record.keyStart = scan.keyStarts[i]!;
        record.keyLength = scan.keyLengths[i]!;
        record.hasValue = scan.valueNull[i] === 0;
        if (!retainRecord(map, record, spec.deleteHorizonMs, nowMs)) continue;
        if (!record.hasValue) keepsTombstone = true;
      }
      kept[keptCount++] = i;
    }
  }
  const removed = header.recordsCount - keptCount;
  stats.recordsRemoved += removed;
  if (keptCount === 0 && decision.retention === "delete-empty") {
    stats.batchesRemoved++;
    return undefined;
  }
  const horizonMs = keptCount === 0 ? -1 : deleteHorizonFor(spec.deleteHorizonMs, keepsTombstone || decision.markerForEmptyTxn, nowMs, input.deleteRetentionMs);
  if (horizonMs >= 0 && (stats.pendingDeleteHorizonMs < 0 || horizonMs < stats.pendingDeleteHorizonMs)) stats.pendingDeleteHorizonMs = horizonMs;
  if (removed === 0 && horizonMs === spec.deleteHorizonMs && keptCount === header.recordsCount) {
    // A view of the read buffer, which the writer copies before the next read.
    return bytes.subarray(at, at + size);
  }
  return buildBatchFromScan({ ...spec, deleteHorizonMs: horizonMs }, scan, reuse.kept, keptCount);
}
