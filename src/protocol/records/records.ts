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
import { Reader } from "../reader.ts";
import { Writer } from "../writer.ts";
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

/** The records section of the batch at `position`, decompressed. */
export function recordsSectionOf(bytes: Uint8Array, position: number, maxBytes = DECOMPRESSED_RECORDS_MAX_BYTES): Uint8Array {
  const sizeBytes = batchSizeAt(bytes, position);
  const end = position + sizeBytes;
  if (sizeBytes < BATCH_HEADER_BYTES || end > bytes.length) throw new DecodeError(`batch at ${position} is truncated`);
  const codec = readInt16(bytes, position + ATTRIBUTES_AT) & COMPRESSION_CODEC_MASK;
  return decompress(codec, bytes.subarray(position + BATCH_HEADER_BYTES, end), maxBytes);
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
  const reader = new Reader(section);
  for (let i = 0; i < count; i++) {
    const length = reader.varint();
    if (length < 0 || length > reader.remaining) throw new DecodeError(`record ${i} has length ${length}, ${reader.remaining} bytes left`);
    const end = reader.offset + length;
    const record = new Reader(section, reader.offset, end);
    const attributes = record.int8();
    const timestampDelta = record.varlong();
    const offsetDelta = record.varint();
    const key = nullableBytes(record, "key");
    const value = nullableBytes(record, "value");
    const headersStart = record.offset;
    const headerCount = record.varint();
    if (headerCount < 0) throw new DecodeError(`record ${i} has header count ${headerCount}`);
    for (let h = 0; h < headerCount; h++) {
      const keyLength = record.varint();
      if (keyLength < 0) throw new DecodeError(`record ${i} has a header key of length ${keyLength}`);
      record.raw(keyLength);
      nullableBytes(record, "header value");
    }
    if (record.offset !== end) throw new DecodeError(`record ${i} has ${end - record.offset} bytes after its headers`);
    records[i] = {
      attributes,
      offset: header.baseOffset + offsetDelta,
      timestampMs: header.baseTimestampMs + timestampDelta,
      key,
      value,
      headers: section.subarray(headersStart, end),
    };
    reader.offset = end;
  }
  if (reader.remaining !== 0) throw new DecodeError(`${reader.remaining} bytes after the last of ${count} records`);
  return records;
}

function nullableBytes(reader: Reader, what: string): Uint8Array | null {
  const length = reader.varint();
  if (length === -1) return null;
  if (length < 0) throw new DecodeError(`${what} length ${length}`);
  return reader.raw(length);
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

  const body = new Writer(1024);
  for (const record of records) {
    const keyLength = record.key === null ? -1 : record.key.length;
    const valueLength = record.value === null ? -1 : record.value.length;
    const timestampDelta = record.timestampMs - baseTimestampMs;
    const offsetDelta = record.offset - spec.baseOffset;
    const inner =
      1 +
      varlongSize(timestampDelta) +
      varintSize(offsetDelta) +
      varintSize(keyLength) +
      Math.max(0, keyLength) +
      varintSize(valueLength) +
      Math.max(0, valueLength) +
      record.headers.length;
    body.varint(inner);
    body.int8(record.attributes);
    body.varlong(timestampDelta);
    body.varint(offsetDelta);
    body.varint(keyLength);
    if (record.key !== null) body.raw(record.key);
    body.varint(valueLength);
    if (record.value !== null) body.raw(record.value);
    body.raw(record.headers);
  }
  const codec = spec.attributes & COMPRESSION_CODEC_MASK;
  const section = compress(codec, body.finish());

  const sizeBytes = BATCH_HEADER_BYTES + section.length;
  const bytes = new Uint8Array(sizeBytes);
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
  writeInt32(bytes, RECORDS_COUNT_AT, records.length);
  bytes.set(section, BATCH_HEADER_BYTES);
  writeInt32(bytes, CRC_AT, crc32c(bytes, ATTRIBUTES_AT, sizeBytes));
  return bytes;
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
