/**
 * The read side of one partition log (partition-log.ts is the facade; docs/architecture.md, "The Fetch
 * read path" and "The partition log"): `read` returns whole stored batches from a fetch offset, found
 * through the position the previous read of that offset ended at or the sparse offset index, checking
 * every batch it returns (its header as the window is walked, its CRC-32C once in memory, unless this
 * process checked those bytes already); `offsetForTimestamp` and `maxTimestampOffset` answer ListOffsets
 * through the time indexes.
 */
import { CorruptStateError, FatalError } from "../../errors/errors.ts";
import type { FileHandle } from "../../platform/fs.ts";
import {
  attributesAt,
  BATCH_HEADER_BYTES,
  baseOffsetAt,
  batchSizeAt,
  checkBatch,
  COMPRESSION_CODEC_MASK,
  findRecordInUncompressedBatch,
  lastOffsetDeltaAt,
  MAGIC_AT,
  MAGIC_V2,
  maxTimestampAt,
  TIMESTAMP_TYPE_BIT,
} from "../../protocol/records/record-batch.ts";
import { basename } from "node:path";
import type { BatchDamage, ReadBuffers, ReadOptions, ReadResult, TimestampAndOffset } from "./partition-log-types.ts";
import type { PartitionLogState } from "./partition-state.ts";
import { describeBatchProblem, type Segment } from "./segment.ts";
import type { SegmentHandleCache } from "./segment-handle-cache.ts";
import type { SegmentIndexCache } from "./segment-index-cache.ts";

/** Positions remembered for the offset at which the previous reads ended (tailing consumers). */
const READ_POSITION_CACHE_MAX = 8;
export const EMPTY = new Uint8Array(0);

export class PartitionReader {
  private readonly readPositions = new Map<number, { segment: Segment; position: number }>();

  constructor(
    private readonly state: PartitionLogState,
    private readonly handles: SegmentHandleCache,
    private readonly indexes: SegmentIndexCache,
  ) {}

  /**
   * Reads whole batches starting with the one that contains `fetchOffset`, up to `maxBytes` (the first
   * batch is returned even when larger if `minOneBatch`), from one segment, never past writtenEndOffset
   * or `upToOffset`. The bytes are returned exactly as stored.
   */
  async read(fetchOffset: number, maxBytes: number, options: ReadOptions = {}): Promise<ReadResult> {
    this.state.assertReadable();
    if (this.state.swapping !== undefined) await this.state.swapping;
    this.state.assertReadable();
    if (fetchOffset < this.state.logStart || fetchOffset > this.state.logEnd) {
      return { kind: "offset-out-of-range", logStartOffset: this.state.logStart, logEndOffset: this.state.logEnd };
    }
    const limitOffset = Math.min(options.upToOffset ?? Number.POSITIVE_INFINITY, this.state.writtenEnd);
    if (fetchOffset >= limitOffset) return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
    this.state.inflightReads++;
    let segment: Segment | undefined = this.segmentFor(fetchOffset);
    try {
      // A cleaned segment may hold nothing at or after the fetch offset (the cleaner removed its last
      // batches): the data then starts in a later segment, as in Apache's UnifiedLog.read.
      while (segment !== undefined) {
        const result = await this.readSegment(segment, fetchOffset, limitOffset, Math.max(0, maxBytes), options.minOneBatch ?? false, options.buffers);
        if (result.kind !== "records" || result.bytes.length > 0 || segment === this.state.active) return result;
        // Retention may have removed the segment meanwhile (the fetch offset is then below the log start,
        // which the next fetch learns): answer what was read rather than start over from the front.
        const at = this.state.segments.indexOf(segment);
        const next: Segment | undefined = at < 0 ? undefined : this.state.segments[at + 1];
        if (next === undefined || next.baseOffset >= limitOffset) return result;
        segment = next;
      }
      return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
    } catch (error) {
      // The walk to the fetch offset found bytes that are not batches (an index rebuild refused the
      // segment, a length ran past its end): damage that the read cannot place on one batch.
      if (!(error instanceof CorruptStateError)) throw error;
      const reason = error.reason;
      // The errors of the walk and of a scan name the position (and the offset) of the first bad batch.
      const position = /at position (\d+)/.exec(reason)?.[1];
      const offset = /\(offset (\d+)\)/.exec(reason)?.[1];
      const damage = { file: basename(error.path), position: position === undefined ? -1 : Number(position), offset: offset === undefined ? fetchOffset : Number(offset), reason };
      return { kind: "damaged", damage };
    } finally {
      this.state.endRead();
    }
  }

  private async readSegment(
    segment: Segment,
    fetchOffset: number,
    limitOffset: number,
    maxBytes: number,
    minOneBatch: boolean,
    buffers: ReadBuffers | undefined,
  ): Promise<ReadResult> {
    const handle = await this.handles.acquire(segment);
    try {
      const limitBytes = segment.writtenBytes;
      // A remembered position (a consumer going on where its last read ended) is exact: the window then
      // starts with the fetched batch and reads no more than the answer may hold. From an index entry it
      // also covers the walk to the fetched batch (at most one index interval).
      const remembered = this.readPositions.get(fetchOffset);
      const exact = remembered !== undefined && remembered.segment === segment;
      const readAheadBytes = (exact ? 0 : this.state.config.indexIntervalBytes) + maxBytes + BATCH_HEADER_BYTES;
      const cursor = new ReadCursor(handle, limitBytes, readAheadBytes, buffers);
      const start = await this.locate(segment, cursor, fetchOffset, (base, last) => last >= fetchOffset && base >= 0);
      if (start === undefined) return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };

      // Every batch returned is checked (docs/operations.md, "Damaged data"): its header here, as the
      // window is walked, and its CRC-32C below, once the whole range is in memory. Written data ends at
      // a batch boundary and holds nothing but whole batches, so anything else is damage, never the end.
      const cleaned = this.state.mayBeCleaned(segment);
      const segmentEnd = segment === this.state.active ? this.state.logEnd : segment.endOffset;
      let end = start;
      let total = 0;
      let firstOffset = -1;
      let lastIncluded = -1;
      let expected = -1;
      let damage: BatchDamage | undefined;
      for (;;) {
        const at = await cursor.ensure(end, BATCH_HEADER_BYTES);
        if (at < 0) {
          if (end < limitBytes) damage = { file: segment.logName, position: end, offset: expected, reason: `${limitBytes - end} bytes at the end of the written data hold no batch` };
          break;
        }
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        const last = base + lastOffsetDeltaAt(buf, at);
        const problem = headerProblem(buf, at, size, limitBytes - end, base, last, expected, cleaned, segmentEnd);
        if (problem !== undefined) {
          // A damaged header's own base offset is not to be believed: the offset read up to is.
          damage = { file: segment.logName, position: end, offset: expected >= 0 ? expected : fetchOffset, reason: problem };
          break;
        }
        if (last >= limitOffset) break;
        if (total + size > maxBytes && !(total === 0 && minOneBatch)) break;
        if (firstOffset < 0) firstOffset = base;
        total += size;
        end += size;
        lastIncluded = last;
        expected = last + 1;
        if (total >= maxBytes) break;
      }
      let bytes = total === 0 ? EMPTY : await cursor.slice(start, end);
      // Bytes this process appended, scanned or read before have had their CRCs checked (verified-ranges.ts):
      // reading what was just produced costs no CRC pass.
      const crcChecked = segment.verified.covers(start, end);
      for (let p = 0, lastGood = -1; p < bytes.length; ) {
        const checked = checkBatch(bytes, p, bytes.length, cleaned, !crcChecked);
        if (typeof checked !== "number") {
          damage = { file: segment.logName, position: start + p, offset: p > 0 ? lastGood + 1 : fetchOffset, reason: describeBatchProblem(checked) };
          bytes = bytes.subarray(0, p);
          end = start + p;
          lastIncluded = lastGood;
          break;
        }
        lastGood = baseOffsetAt(bytes, p) + lastOffsetDeltaAt(bytes, p);
        p += checked;
      }
      if (bytes.length === 0) {
        cursor.release(0);
        if (damage !== undefined) {
          if (damage.offset < 0) damage.offset = fetchOffset;
          return { kind: "damaged", damage };
        }
        return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
      }
      cursor.release(end);
      if (!crcChecked) segment.verified.add(start, end);
      this.rememberPosition(lastIncluded + 1, segment, end);
      if (damage !== undefined && damage.offset < 0) damage.offset = lastIncluded + 1;
      return { kind: "records", bytes, firstOffset, nextOffset: lastIncluded + 1, ...(damage === undefined ? {} : { damage }) };
    } finally {
      this.handles.release(segment);
    }
  }

  /**
   * Finds the position of the first batch of `segment` (from the best starting point the read-position
   * cache or the offset index gives for `targetOffset`) for which `wanted(baseOffset, lastOffset, at)`
   * holds; undefined when no written batch does. The starting point is checked against the batch header
   * found there, so an unsound index is detected (and rebuilt) rather than trusted.
   */
  private async locate(
    segment: Segment,
    cursor: ReadCursor,
    targetOffset: number,
    wanted: (baseOffset: number, lastOffset: number, at: number) => boolean,
  ): Promise<number | undefined> {
    for (let attempt = 0; ; attempt++) {
      let position = 0;
      let expectedBase = segment.baseOffset;
      const remembered = this.readPositions.get(targetOffset);
      if (remembered !== undefined && remembered.segment === segment && remembered.position <= cursor.limitBytes) {
        position = remembered.position;
        expectedBase = targetOffset;
      } else {
        const index = await this.indexes.offsetIndexOf(segment);
        const i = index.floor(targetOffset - segment.baseOffset);
        if (i >= 0) {
          position = index.positionAt(i);
          expectedBase = segment.baseOffset + index.relOffsetAt(i);
        }
      }
      // Position 0 is always a batch start, but in a cleaned segment the first batch may start after the
      // segment's base offset (the cleaner removed what was there): only a position from the index or
      // the position cache is checked against the offset it promises.
      let first = position > 0 || !this.state.mayBeCleaned(segment);
      for (let previous = -1; ; ) {
        const at = await cursor.ensure(position, BATCH_HEADER_BYTES);
        if (at < 0) {
          // Batch lengths walked from a batch start end exactly at the written end. (An index entry of the
          // active segment may point past it: appends index their batches before the write completes.)
          if (position < cursor.limitBytes || (position > cursor.limitBytes && segment !== this.state.active)) {
            const where = previous < 0 ? `position ${position}` : `the batch at position ${previous}, whose length leads to ${position}`;
            throw new CorruptStateError(segment.logPath, `${where}: not a batch start below the end of the written data (${cursor.limitBytes} bytes)`);
          }
          return undefined;
        }
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        if (first && base !== expectedBase) break;
        first = false;
        if (size < BATCH_HEADER_BYTES) {
          throw new CorruptStateError(segment.logPath, `batch at position ${position} has invalid length ${size}`);
        }
        if (wanted(base, base + lastOffsetDeltaAt(buf, at), at)) return position;
        previous = position;
        position += size;
      }
      // The starting point was wrong: forget it, rebuild the index if it came from there, and retry.
      this.readPositions.delete(targetOffset);
      if (attempt > 0 || segment === this.state.active) {
        throw new CorruptStateError(segment.logPath, `no batch starts with offset ${expectedBase} at position ${position}`);
      }
      if (remembered === undefined || remembered.segment !== segment) {
        segment.offsetIndex = undefined;
        await this.indexes.rebuildIndexes(segment, true);
      }
    }
  }

  private rememberPosition(offset: number, segment: Segment, position: number): void {
    this.readPositions.delete(offset);
    this.readPositions.set(offset, { segment, position });
    if (this.readPositions.size > READ_POSITION_CACHE_MAX) {
      this.readPositions.delete(this.readPositions.keys().next().value!);
    }
  }

  private segmentFor(offset: number): Segment {
    const segments = this.state.segments;
    let lo = 0;
    let hi = segments.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (segments[mid]!.baseOffset <= offset) lo = mid;
      else hi = mid - 1;
    }
    return segments[lo]!;
  }

  /** Forgets the positions remembered in `segments` (they left the log: a swap replaced them). */
  forgetPositionsIn(segments: readonly Segment[]): void {
    for (const [offset, remembered] of this.readPositions) {
      if (segments.includes(remembered.segment)) this.readPositions.delete(offset);
    }
  }

  // ---- timestamps ---------------------------------------------------------------------------------

  /**
   * ListOffsets by timestamp: the first offset (at or after the log start) of a record whose timestamp
   * is >= `timestampMs`, with that record's timestamp. Batches are found through the time index; inside
   * an uncompressed CreateTime batch the records are walked for the exact record. For a compressed batch
   * the answer is the batch's base offset and max timestamp (records are never decompressed here), which
   * may be a few records early: a consumer seeking there still sees every matching record.
   */
  async offsetForTimestamp(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    this.state.assertReadable();
    if (this.state.swapping !== undefined) await this.state.swapping;
    this.state.assertReadable();
    this.state.inflightReads++;
    try {
      for (const segment of [...this.state.segments]) {
        if (segment.endOffset <= this.state.logStart || segment.retired || segment.writtenBytes === 0) continue;
        if ((await this.indexes.maxTimestampOf(segment)) < timestampMs) continue;
        const found = await this.searchTimestamp(segment, timestampMs);
        if (found !== undefined) return found;
      }
      return undefined;
    } finally {
      this.state.endRead();
    }
  }

  /** ListOffsets MAX_TIMESTAMP: the first record with the largest timestamp in the log. */
  async maxTimestampOffset(): Promise<TimestampAndOffset | undefined> {
    this.state.assertReadable();
    if (this.state.swapping !== undefined) await this.state.swapping;
    this.state.assertReadable();
    this.state.inflightReads++;
    try {
      let best: Segment | undefined;
      let bestMs = -1;
      for (const segment of [...this.state.segments]) {
        if (segment.endOffset <= this.state.logStart || segment.retired || segment.writtenBytes === 0) continue;
        const ms = await this.indexes.maxTimestampOf(segment);
        if (ms > bestMs) {
          best = segment;
          bestMs = ms;
        }
      }
      if (best === undefined) return undefined;
      return await this.searchTimestamp(best, bestMs);
    } finally {
      this.state.endRead();
    }
  }

  private async searchTimestamp(segment: Segment, timestampMs: number): Promise<TimestampAndOffset | undefined> {
    const timeIndex = await this.indexes.timeIndexOf(segment);
    const entry = timeIndex.floor(timestampMs);
    const fromOffset = Math.max(entry >= 0 ? segment.baseOffset + timeIndex.relOffsetAt(entry) : segment.baseOffset, this.state.logStart);
    const logStart = this.state.logStart;
    const handle = await this.handles.acquire(segment);
    try {
      const cursor = new ReadCursor(handle, segment.writtenBytes, 2 * this.state.config.indexIntervalBytes + BATCH_HEADER_BYTES);
      let position = await this.locate(segment, cursor, fromOffset, (_base, last, at) => last >= logStart && maxTimestampAt(cursor.buffer, at) >= timestampMs);
      while (position !== undefined) {
        const at = await cursor.ensure(position, BATCH_HEADER_BYTES);
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        const attributes = attributesAt(buf, at);
        const batchMaxMs = maxTimestampAt(buf, at);
        if (attributes & TIMESTAMP_TYPE_BIT || (attributes & COMPRESSION_CODEC_MASK) !== 0) {
          return { offset: Math.max(base, logStart), timestampMs: batchMaxMs };
        }
        const batch = await cursor.slice(position, position + size);
        let found: TimestampAndOffset | undefined;
        findRecordInUncompressedBatch(batch, 0, (offset, recordMs) => {
          if (offset >= logStart && recordMs >= timestampMs) found = { offset, timestampMs: recordMs };
          return found !== undefined;
        });
        if (found !== undefined) return found;
        // The max timestamp promised a match the records do not hold; keep looking in later batches.
        position += size;
        let next: number | undefined;
        for (;;) {
          const a = await cursor.ensure(position, BATCH_HEADER_BYTES);
          if (a < 0) break;
          if (maxTimestampAt(cursor.buffer, a) >= timestampMs) {
            next = position;
            break;
          }
          position += batchSizeAt(cursor.buffer, a);
        }
        position = next;
      }
      return undefined;
    } finally {
      this.handles.release(segment);
    }
  }
}

/**
 * A read-ahead window over one segment file, bounded by the bytes readers may see. With `buffers` the
 * window is read into memory they hand out (and what the caller keeps of it stays there); without,
 * every read gets fresh memory.
 */
class ReadCursor {
  buffer: Uint8Array = EMPTY;
  private bufferStart = 0;
  /** The window is memory taken from `buffers` (given back in part by `release`). */
  private fromBuffers = false;

  constructor(
    private readonly handle: FileHandle,
    readonly limitBytes: number,
    private readonly readAheadBytes: number,
    private readonly buffers?: ReadBuffers,
  ) {}

  /** Makes [position, position + length) available; returns its index in `buffer`, -1 past the limit. */
  async ensure(position: number, length: number): Promise<number> {
    if (position >= this.bufferStart && position + length <= this.bufferStart + this.buffer.length) return position - this.bufferStart;
    if (position + length > this.limitBytes) return -1;
    const want = Math.min(this.limitBytes - position, Math.max(length, this.readAheadBytes));
    // A window that is moved on from is not kept: its memory goes back before the next one is taken.
    this.release(0);
    const bytes = await this.readAt(want, position);
    if (bytes.length < length) throw new FatalError(`segment file shorter than its written size: read ${bytes.length} of ${want} bytes at ${position}`);
    this.buffer = bytes;
    this.bufferStart = position;
    return 0;
  }

  /** Bytes [from, to): a view of the window when it holds them, one read otherwise. */
  async slice(from: number, to: number): Promise<Uint8Array> {
    if (from >= this.bufferStart && to <= this.bufferStart + this.buffer.length) {
      return this.buffer.subarray(from - this.bufferStart, to - this.bufferStart);
    }
    this.release(0);
    const bytes = await this.readAt(to - from, from);
    if (bytes.length < to - from) throw new FatalError(`segment file shorter than its written size at ${from}`);
    this.buffer = bytes;
    this.bufferStart = from;
    return bytes;
  }

  /**
   * Keeps the window's memory up to file position `keepTo` (what the caller returns a view of) and gives
   * the rest back to `buffers`; 0 gives all of it back.
   */
  release(keepTo: number): void {
    if (!this.fromBuffers) return;
    this.fromBuffers = false;
    const used = Math.max(0, Math.min(this.buffer.length, keepTo - this.bufferStart));
    this.buffers!.giveBack(used);
  }

  private async readAt(length: number, position: number): Promise<Uint8Array> {
    if (this.buffers === undefined || this.handle.readInto === undefined) return this.handle.read(length, position);
    const target = this.buffers.take(length);
    this.fromBuffers = true;
    const read = await this.handle.readInto(target, position);
    return read === length ? target : target.subarray(0, read);
  }
}

/**
 * What is wrong with the batch header at `at` of `buf` (`availableBytes` of written data from there on),
 * as the read path sees it before the batch's CRC is checked; undefined when nothing is. `expected` is the
 * offset the batch must start with (-1 for the first batch of a read).
 */
export function headerProblem(
  buf: Uint8Array,
  at: number,
  size: number,
  availableBytes: number,
  base: number,
  last: number,
  expected: number,
  cleaned: boolean,
  segmentEnd: number,
): string | undefined {
  if (size < BATCH_HEADER_BYTES) return `invalid batch length ${size}`;
  if (size > availableBytes) return `batch length ${size} runs past the written data (${availableBytes} bytes left)`;
  const magic = (buf[at + MAGIC_AT]! << 24) >> 24;
  if (magic !== MAGIC_V2) return `magic ${magic}`;
  if (last < base) return `last offset ${last} below base offset ${base}`;
  if (expected >= 0 && (cleaned ? base < expected : base !== expected)) {
    return `base offset ${base} where ${cleaned ? "at least " : ""}${expected} was expected`;
  }
  if (last >= segmentEnd) return `offsets up to ${last}, beyond the segment's end offset ${segmentEnd}`;
  return undefined;
}
