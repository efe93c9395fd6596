/**
 * The records of a batch walked without making an object per record: the log cleaner looks at every
 * record of every batch it maps and cleans, and KafkaRecord objects (each with three subarrays) cost it
 * more than the parsing. A RecordScan holds, for each record, where its parts lie in the decompressed
 * section, in typed arrays reused from batch to batch; `buildBatchFromScan` writes a batch of some of
 * them, copying each kept record's bytes after its timestamp delta as they are.
 *
 * A scan accepts exactly what decodeRecordsSection (records.ts) accepts, with the same DecodeErrors, and
 * buildBatchFromScan writes exactly the bytes buildBatch writes for the same records (for records whose
 * varints are minimal, as every client writes them; others keep their encoding, which stays valid).
 * tests/unit/protocol/records/record-scan.test.ts compares them.
 */
import { DecodeError } from "../../errors/errors.ts";
import { newDecompressScratch } from "./lz4.ts";
import { BATCH_HEADER_BYTES, TIMESTAMP_TYPE_BIT, COMPRESSION_CODEC_MASK, type BatchHeader, parseBatchHeader } from "./record-batch.ts";
import {
  DECOMPRESSED_RECORDS_MAX_BYTES,
  finishBatchInFrame,
  putVarint,
  putVarlong,
  recordsSectionOf,
  varintAt,
  varintSize,
  varlongAt,
  varlongSize,
  type BatchSpec,
} from "./records.ts";

const INITIAL_CAPACITY = 256;

export class RecordScan {
  /** The decompressed records section the positions refer to. */
  section: Uint8Array = new Uint8Array(0);
  count = 0;
  header!: BatchHeader;
  /** Absolute offset and timestamp (base + delta) of each record. */
  offsets = new Float64Array(INITIAL_CAPACITY);
  timestampsMs = new Float64Array(INITIAL_CAPACITY);
  attributes = new Uint8Array(INITIAL_CAPACITY);
  /** Where the record's bytes after its timestamp delta start (the offset delta), and where it ends. */
  tailStarts = new Int32Array(INITIAL_CAPACITY);
  ends = new Int32Array(INITIAL_CAPACITY);
  keyStarts = new Int32Array(INITIAL_CAPACITY);
  /** -1 for a null key. */
  keyLengths = new Int32Array(INITIAL_CAPACITY);
  /** 1 when the value is null (a tombstone). */
  valueNull = new Uint8Array(INITIAL_CAPACITY);
  private readonly cursor = { at: 0 };
  /** Where compressed batches are decompressed: `section` stays valid until the next scan. */
  private readonly scratch = newDecompressScratch();

  /**
   * Scans the batch at `position` (decompressing it first, into a buffer the next scan reuses). Throws
   * DecodeError as decodeRecords does.
   */
  scan(bytes: Uint8Array, position: number, maxBytes = DECOMPRESSED_RECORDS_MAX_BYTES): void {
    this.scanSection(parseBatchHeader(bytes, position), recordsSectionOf(bytes, position, maxBytes, this.scratch));
  }

  /** Scans an already decompressed records section of the batch whose header is `header`. */
  scanSection(header: BatchHeader, section: Uint8Array): void {
    const count = header.recordsCount;
    if (count < 0 || count > section.length) throw new DecodeError(`records count ${count} does not fit ${section.length} bytes`);
    this.header = header;
    this.section = section;
    this.count = 0;
    this.reserve(count);
    const cursor = this.cursor;
    cursor.at = 0;
    for (let i = 0; i < count; i++) {
      const length = varintAt(section, cursor, section.length);
      if (length < 0 || length > section.length - cursor.at) throw new DecodeError(`record ${i} has length ${length}, ${section.length - cursor.at} bytes left`);
      const end = cursor.at + length;
      if (end === cursor.at) throw new DecodeError(`record ${i} is empty`);
      this.attributes[i] = section[cursor.at++]!;
      const timestampDelta = varlongAt(section, cursor, end);
      this.tailStarts[i] = cursor.at;
      const offsetDelta = varintAt(section, cursor, end);
      const keyLength = nullableLengthAt(section, cursor, end, "key");
      this.keyStarts[i] = cursor.at - Math.max(0, keyLength);
      this.keyLengths[i] = keyLength;
      this.valueNull[i] = nullableLengthAt(section, cursor, end, "value") === -1 ? 1 : 0;
      const headerCount = varintAt(section, cursor, end);
      if (headerCount < 0) throw new DecodeError(`record ${i} has header count ${headerCount}`);
      for (let h = 0; h < headerCount; h++) {
        const keyBytes = varintAt(section, cursor, end);
        if (keyBytes < 0 || keyBytes > end - cursor.at) throw new DecodeError(`record ${i} has a header key of length ${keyBytes}`);
        cursor.at += keyBytes;
        nullableLengthAt(section, cursor, end, "header value");
      }
      if (cursor.at !== end) throw new DecodeError(`record ${i} has ${end - cursor.at} bytes after its headers`);
      this.ends[i] = end;
      this.offsets[i] = header.baseOffset + offsetDelta;
      this.timestampsMs[i] = header.baseTimestampMs + timestampDelta;
      this.count = i + 1;
    }
    if (cursor.at !== section.length) throw new DecodeError(`${section.length - cursor.at} bytes after the last of ${count} records`);
  }

  private reserve(count: number): void {
    if (count <= this.offsets.length) return;
    let capacity = this.offsets.length;
    while (capacity < count) capacity *= 2;
    this.offsets = new Float64Array(capacity);
    this.timestampsMs = new Float64Array(capacity);
    this.attributes = new Uint8Array(capacity);
    this.tailStarts = new Int32Array(capacity);
    this.ends = new Int32Array(capacity);
    this.keyStarts = new Int32Array(capacity);
    this.keyLengths = new Int32Array(capacity);
    this.valueNull = new Uint8Array(capacity);
  }
}

/** A nullable bytes field's length (-1 for null) at `cursor.at`, the cursor moved past its bytes. */
function nullableLengthAt(bytes: Uint8Array, cursor: { at: number }, end: number, what: string): number {
  const length = varintAt(bytes, cursor, end);
  if (length === -1) return -1;
  if (length < 0 || length > end - cursor.at) throw new DecodeError(`${what} length ${length}`);
  cursor.at += length;
  return length;
}

/**
 * buildBatch(spec, the records `kept[0..keptCount)` of `scan`, in order): the same header rules (base
 * timestamp the first kept record's or the delete horizon, max timestamp the largest kept one, an emptied
 * batch written as Apache writes one), each record's timestamp delta re-encoded against the new base and
 * the rest of its bytes copied.
 */
export function buildBatchFromScan(spec: BatchSpec, scan: RecordScan, kept: Int32Array, keptCount: number): Uint8Array {
  if (keptCount === 0) spec = { ...spec, attributes: spec.attributes & ~COMPRESSION_CODEC_MASK, deleteHorizonMs: -1 };
  const timestamps = scan.timestampsMs;
  const logAppendTime = (spec.attributes & TIMESTAMP_TYPE_BIT) !== 0;
  let maxTimestampMs = -1;
  for (let k = 0; k < keptCount; k++) {
    const ts = timestamps[kept[k]!]!;
    if (ts > maxTimestampMs) maxTimestampMs = ts;
  }
  if (logAppendTime || keptCount === 0) maxTimestampMs = spec.maxTimestampMs;
  const baseTimestampMs = spec.deleteHorizonMs >= 0 ? spec.deleteHorizonMs : keptCount > 0 ? timestamps[kept[0]!]! : spec.maxTimestampMs;

  const { tailStarts, ends, attributes, section } = scan;
  let bodyBytes = 0;
  for (let k = 0; k < keptCount; k++) {
    const i = kept[k]!;
    const size = 1 + varlongSize(timestamps[i]! - baseTimestampMs) + (ends[i]! - tailStarts[i]!);
    bodyBytes += varintSize(size) + size;
  }
  // The records go straight after the header's room, so that an uncompressed batch needs no second copy.
  const frame = new Uint8Array(BATCH_HEADER_BYTES + bodyBytes);
  let at = BATCH_HEADER_BYTES;
  for (let k = 0; k < keptCount; k++) {
    const i = kept[k]!;
    const delta = timestamps[i]! - baseTimestampMs;
    const tail = ends[i]! - tailStarts[i]!;
    at = putVarint(frame, at, 1 + varlongSize(delta) + tail);
    frame[at++] = attributes[i]!;
    at = putVarlong(frame, at, delta);
    frame.set(section.subarray(tailStarts[i]!, ends[i]!), at);
    at += tail;
  }
  return finishBatchInFrame(spec, baseTimestampMs, maxTimestampMs, keptCount, frame);
}
