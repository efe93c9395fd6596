/**
 * The records inside a RecordBatch v2: decoding them (decompressing first when the batch is compressed)
 * and building a batch from records. Off the produce and fetch hot paths: the log cleaner rewrites
 * batches with some records removed, and produce-time validation walks them.
 *
 * Record layout (every integer a zigzag varint, the timestamp delta a varlong):
 *
 *   length  attributes(int8)  timestampDelta  offsetDelta  keyLength key  valueLength value
 *   headerCount [headerKeyLength headerKey headerValueLength headerValue]...
 *
 * A key or value length of -1 means null. Header bytes are kept as they were read (the section from the
 * header count on), because nothing here needs to look inside them and copying them back verbatim is
 * the only way a rewritten record stays byte-identical to what the producer sent.
 */
import { DecodeError } from "../../errors/errors.ts";
import { compress, decompress } from "./compression.ts";
import {
  ATTRIBUTES_AT,
  BASE_OFFSET_AT,
  BASE_SEQUENCE_AT,
  BASE_TIMESTAMP_AT,
  BATCH_HEADER_BYTES,
  BATCH_LENGTH_AT,
  COMPRESSION_CODEC_MASK,
  CRC_AT,
  DELETE_HORIZON_BIT,
  LAST_OFFSET_DELTA_AT,
  LOG_OVERHEAD_BYTES,
  MAGIC_AT,
  MAGIC_V2,
  MAX_TIMESTAMP_AT,
  PARTITION_LEADER_EPOCH_AT,
  PRODUCER_EPOCH_AT,
  PRODUCER_ID_AT,
  RECORDS_COUNT_AT,
  TIMESTAMP_TYPE_BIT,
  batchSizeAt,
  parseBatchHeader,
  readInt16,
  readInt32,
  readInt64,
  writeInt16,
  writeInt32,
  writeInt64,
  type BatchHeader,
} from "./record-batch.ts";
import { crc32c } from "./crc32c.ts";
import type { DecompressScratch } from "./lz4.ts";

/** One record of a batch, with absolute offset and timestamp. */
export interface KafkaRecord {
  attributes: number;
  offset: number;
  /** The record's timestamp (CreateTime) as computed from the batch's base timestamp. */
  timestampMs: number;
  key: Uint8Array | null;
  value: Uint8Array | null;
  /** The header section exactly as stored: header count followed by the headers. */
  headers: Uint8Array;
}

/**
 * Bounds what a compressed batch may inflate to. A batch is at most max.message.bytes on disk (1 MiB by
 * default); Apache's clients compress well under 100:1 in practice, so 64 MiB leaves room for
 * any real batch while a hostile one cannot make the broker allocate gigabytes.
 */
export const DECOMPRESSED_RECORDS_MAX_BYTES = 64 * 1024 * 1024;

/** The records section of the batch at `position`, decompressed (into the scratch, if given: compression.ts). */
export function recordsSectionOf(bytes: Uint8Array, position: number, maxBytes = DECOMPRESSED_RECORDS_MAX_BYTES, scratch?: DecompressScratch): Uint8Array {
  const sizeBytes = batchSizeAt(bytes, position);
  const end = position + sizeBytes;
  if (sizeBytes < BATCH_HEADER_BYTES || end > bytes.length) throw new DecodeError(`batch at ${position} is truncated`);
  const codec = readInt16(bytes, position + ATTRIBUTES_AT) & COMPRESSION_CODEC_MASK;
  return decompress(codec, bytes.subarray(position + BATCH_HEADER_BYTES, end), maxBytes, scratch);
}

/**
 * Decodes every record of the batch at `position` (decompressing it first). The batch's records count
 * must match the records present, and the section must be consumed exactly; anything else is a
 * DecodeError.
 */
export function decodeRecords(bytes: Uint8Array, position = 0, maxBytes = DECOMPRESSED_RECORDS_MAX_BYTES): KafkaRecord[] {
  const header = parseBatchHeader(bytes, position);
  const section = recordsSectionOf(bytes, position, maxBytes);
  return decodeRecordsSection(header, section);
}

/** Decodes the (already decompressed) records section of a batch whose header is `header`. */
export function decodeRecordsSection(header: BatchHeader, section: Uint8Array): KafkaRecord[] {
  const count = header.recordsCount;
  if (count < 0 || count > section.length) throw new DecodeError(`records count ${count} does not fit ${section.length} bytes`);
  const records: KafkaRecord[] = new Array(count);
  // Parsed by hand over the bytes (no Reader per record): the cleaner decodes every record it keeps or
  // drops, and a DataView per record cost more than the parsing itself.
  const cursor = { at: 0 };
  for (let i = 0; i < count; i++) {
    const length = varintAt(section, cursor, section.length);
    if (length < 0 || length > section.length - cursor.at) throw new DecodeError(`record ${i} has length ${length}, ${section.length - cursor.at} bytes left`);
    const end = cursor.at + length;
    if (end === cursor.at) throw new DecodeError(`record ${i} is empty`);
    const attributes = (section[cursor.at++]! << 24) >> 24;
    const timestampDelta = varlongAt(section, cursor, end);
    const offsetDelta = varintAt(section, cursor, end);
    const key = nullableBytesAt(section, cursor, end, "key");
    const value = nullableBytesAt(section, cursor, end, "value");
    const headersStart = cursor.at;
    const headerCount = varintAt(section, cursor, end);
    if (headerCount < 0) throw new DecodeError(`record ${i} has header count ${headerCount}`);
    for (let h = 0; h < headerCount; h++) {
      const keyLength = varintAt(section, cursor, end);
      if (keyLength < 0 || keyLength > end - cursor.at) throw new DecodeError(`record ${i} has a header key of length ${keyLength}`);
      cursor.at += keyLength;
      nullableBytesAt(section, cursor, end, "header value");
    }
    if (cursor.at !== end) throw new DecodeError(`record ${i} has ${end - cursor.at} bytes after its headers`);
    records[i] = {
      attributes,
      offset: header.baseOffset + offsetDelta,
      timestampMs: header.baseTimestampMs + timestampDelta,
      key,
      value,
      headers: section.subarray(headersStart, end),
    };
  }
  if (cursor.at !== section.length) throw new DecodeError(`${section.length - cursor.at} bytes after the last of ${count} records`);
  return records;
}

/** A zigzag varint (at most 5 bytes) at `cursor.at`, never reading at or past `end`. */
export function varintAt(bytes: Uint8Array, cursor: { at: number }, end: number): number {
  let raw = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (cursor.at >= end) throw new DecodeError("varint runs past the end of its record");
    const b = bytes[cursor.at++]!;
    raw |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) return (raw >>> 1) ^ -(raw & 1);
  }
  throw new DecodeError("varint longer than 5 bytes");
}

/** A zigzag varlong (at most 10 bytes) as a number, exact within 2^53. */
export function varlongAt(bytes: Uint8Array, cursor: { at: number }, end: number): number {
  let raw = 0;
  let multiplier = 1;
  for (let i = 0; i < 10; i++) {
    if (cursor.at >= end) throw new DecodeError("varlong runs past the end of its record");
    const b = bytes[cursor.at++]!;
    raw += (b & 0x7f) * multiplier;
    if ((b & 0x80) === 0) return raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2;
    multiplier *= 128;
  }
  throw new DecodeError("varlong longer than 10 bytes");
}

function nullableBytesAt(bytes: Uint8Array, cursor: { at: number }, end: number, what: string): Uint8Array | null {
  const length = varintAt(bytes, cursor, end);
  if (length === -1) return null;
  if (length < 0 || length > end - cursor.at) throw new DecodeError(`${what} length ${length}`);
  const out = bytes.subarray(cursor.at, cursor.at + length);
  cursor.at += length;
  return out;
}

/** What a rebuilt batch keeps of the batch it came from (everything but its records and the CRC). */
export interface BatchSpec {
  baseOffset: number;
  /** Kept even when the last records are gone: producer state derives the last sequence from it. */
  lastOffsetDelta: number;
  partitionLeaderEpoch: number;
  /** Codec, timestamp type, transactional and control bits; the delete horizon bit is set from `deleteHorizonMs`. */
  attributes: number;
  producerId: number;
  producerEpoch: number;
  baseSequence: number;
  /** The batch's max timestamp for LogAppendTime batches, whose records carry no timestamps of their own. */
  maxTimestampMs: number;
  /** -1: none. Otherwise the base timestamp field holds it and the delete horizon bit is set. */
  deleteHorizonMs: number;
}

/** The header fields of the stored batch at `position`, for rebuilding it with `buildBatch`. */
export function batchSpecOf(bytes: Uint8Array, position: number): BatchSpec {
  const attributes = readInt16(bytes, position + ATTRIBUTES_AT);
  return {
    baseOffset: readInt64(bytes, position + BASE_OFFSET_AT),
    lastOffsetDelta: readInt32(bytes, position + LAST_OFFSET_DELTA_AT),
    partitionLeaderEpoch: readInt32(bytes, position + PARTITION_LEADER_EPOCH_AT),
    attributes,
    producerId: readInt64(bytes, position + PRODUCER_ID_AT),
    producerEpoch: readInt16(bytes, position + PRODUCER_EPOCH_AT),
    baseSequence: readInt32(bytes, position + BASE_SEQUENCE_AT),
    maxTimestampMs: readInt64(bytes, position + MAX_TIMESTAMP_AT),
    deleteHorizonMs: attributes & DELETE_HORIZON_BIT ? readInt64(bytes, position + BASE_TIMESTAMP_AT) : -1,
  };
}

/**
 * Builds a batch holding `records` (a subset of the original batch's, in offset order) with the header
 * of `spec`, compressed with the spec's codec, CRC computed. As Apache's cleaner does, the base offset,
 * the last offset delta and the producer fields stay, so offsets and sequences never change; the base
 * timestamp is the first record's (or the delete horizon when there is one) and the max timestamp the
 * largest record timestamp (the batch's own for LogAppendTime). An empty batch keeps only its header:
 * that is how the last batch of a producer survives cleaning.
 */
export function buildBatch(spec: BatchSpec, records: readonly KafkaRecord[]): Uint8Array {
  // An emptied batch is written as Apache writes one (DefaultRecordBatch.writeEmptyHeader): no codec,
  // no delete horizon, both timestamps the batch's max timestamp.
  if (records.length === 0) spec = { ...spec, attributes: spec.attributes & ~COMPRESSION_CODEC_MASK, deleteHorizonMs: -1 };
  const logAppendTime = (spec.attributes & TIMESTAMP_TYPE_BIT) !== 0;
  let maxTimestampMs = -1;
  for (const record of records) if (record.timestampMs > maxTimestampMs) maxTimestampMs = record.timestampMs;
  if (logAppendTime || records.length === 0) maxTimestampMs = spec.maxTimestampMs;
  const baseTimestampMs =
    spec.deleteHorizonMs >= 0 ? spec.deleteHorizonMs : records.length > 0 ? records[0]!.timestampMs : spec.maxTimestampMs;

  // Sizes first, then one buffer written by hand: no growing writer, no DataView.
  let bodyBytes = 0;
  const inner = new Array<number>(records.length);
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    const keyLength = record.key === null ? -1 : record.key.length;
    const valueLength = record.value === null ? -1 : record.value.length;
    const size =
      1 +
      varlongSize(record.timestampMs - baseTimestampMs) +
      varintSize(record.offset - spec.baseOffset) +
      varintSize(keyLength) +
      Math.max(0, keyLength) +
      varintSize(valueLength) +
      Math.max(0, valueLength) +
      record.headers.length;
    inner[i] = size;
    bodyBytes += varintSize(size) + size;
  }
  const body = new Uint8Array(bodyBytes);
  let at = 0;
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    at = putVarint(body, at, inner[i]!);
    body[at++] = record.attributes & 0xff;
    at = putVarlong(body, at, record.timestampMs - baseTimestampMs);
    at = putVarint(body, at, record.offset - spec.baseOffset);
    at = putVarint(body, at, record.key === null ? -1 : record.key.length);
    if (record.key !== null) {
      body.set(record.key, at);
      at += record.key.length;
    }
    at = putVarint(body, at, record.value === null ? -1 : record.value.length);
    if (record.value !== null) {
      body.set(record.value, at);
      at += record.value.length;
    }
    body.set(record.headers, at);
    at += record.headers.length;
  }
  return finishBatch(spec, baseTimestampMs, maxTimestampMs, records.length, body);
}

/**
 * The batch around an uncompressed records section `body` of `count` records: compressed with the spec's
 * codec, header written, CRC computed. `spec` is as buildBatch leaves it (an emptied batch's codec and
 * delete horizon already cleared).
 */
export function finishBatch(spec: BatchSpec, baseTimestampMs: number, maxTimestampMs: number, count: number, body: Uint8Array): Uint8Array {
  const section = compress(spec.attributes & COMPRESSION_CODEC_MASK, body);
  const bytes = new Uint8Array(BATCH_HEADER_BYTES + section.length);
  bytes.set(section, BATCH_HEADER_BYTES);
  writeHeaderAndCrc(bytes, spec, baseTimestampMs, maxTimestampMs, count);
  return bytes;
}

/**
 * finishBatch for a `frame` whose uncompressed records section already sits after BATCH_HEADER_BYTES of
 * room: an uncompressed batch is finished in place, saving a copy of its records; a compressed one is
 * compressed into a new array as finishBatch does.
 */
export function finishBatchInFrame(spec: BatchSpec, baseTimestampMs: number, maxTimestampMs: number, count: number, frame: Uint8Array): Uint8Array {
  if ((spec.attributes & COMPRESSION_CODEC_MASK) !== 0) {
    return finishBatch(spec, baseTimestampMs, maxTimestampMs, count, frame.subarray(BATCH_HEADER_BYTES));
  }
  writeHeaderAndCrc(frame, spec, baseTimestampMs, maxTimestampMs, count);
  return frame;
}

/** Writes the batch header of `spec` into `bytes[0, BATCH_HEADER_BYTES)` and the CRC over what follows. */
function writeHeaderAndCrc(bytes: Uint8Array, spec: BatchSpec, baseTimestampMs: number, maxTimestampMs: number, count: number): void {
  const sizeBytes = bytes.length;
  writeInt64(bytes, BASE_OFFSET_AT, spec.baseOffset);
  writeInt32(bytes, BATCH_LENGTH_AT, sizeBytes - LOG_OVERHEAD_BYTES);
  writeInt32(bytes, PARTITION_LEADER_EPOCH_AT, spec.partitionLeaderEpoch);
  bytes[MAGIC_AT] = MAGIC_V2;
  const attributes = spec.deleteHorizonMs >= 0 ? spec.attributes | DELETE_HORIZON_BIT : spec.attributes & ~DELETE_HORIZON_BIT;
  writeInt16(bytes, ATTRIBUTES_AT, attributes);
  writeInt32(bytes, LAST_OFFSET_DELTA_AT, spec.lastOffsetDelta);
  writeInt64(bytes, BASE_TIMESTAMP_AT, baseTimestampMs);
  writeInt64(bytes, MAX_TIMESTAMP_AT, maxTimestampMs);
  writeInt64(bytes, PRODUCER_ID_AT, spec.producerId);
  writeInt16(bytes, PRODUCER_EPOCH_AT, spec.producerEpoch);
  writeInt32(bytes, BASE_SEQUENCE_AT, spec.baseSequence);
  writeInt32(bytes, RECORDS_COUNT_AT, count);
  writeInt32(bytes, CRC_AT, crc32c(bytes, ATTRIBUTES_AT, sizeBytes));
}

export function varintSize(value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  let size = 1;
  while (v >= 0x80) {
    v >>>= 7;
    size++;
  }
  return size;
}

export function varlongSize(value: number): number {
  let z = value >= 0 ? value * 2 : -value * 2 - 1;
  let size = 1;
  while (z >= 0x80) {
    z = Math.floor(z / 128);
    size++;
  }
  return size;
}

export function putVarint(bytes: Uint8Array, at: number, value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  while (v >= 0x80) {
    bytes[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  bytes[at++] = v;
  return at;
}

export function putVarlong(bytes: Uint8Array, at: number, value: number): number {
  let z = value >= 0 ? value * 2 : -value * 2 - 1;
  while (z >= 0x80) {
    bytes[at++] = (z % 128) | 0x80;
    z = Math.floor(z / 128);
  }
  bytes[at++] = z;
  return at;
}
