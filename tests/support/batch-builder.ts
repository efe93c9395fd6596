/**
 * Builds uncompressed RecordBatch v2 bytes for tests, the way a producer would: records with keys,
 * values, headers and timestamps; optional producer id/epoch/sequence and transactional flag. Overrides
 * let a test build deliberately broken batches (wrong magic, count, codec bits, CRC).
 */
import {
  BATCH_HEADER_BYTES,
  CONTROL_BIT,
  CRC_AT,
  LOG_OVERHEAD_BYTES,
  MAGIC_V2,
  NO_PARTITION_LEADER_EPOCH,
  NO_PRODUCER_EPOCH,
  NO_PRODUCER_ID,
  NO_SEQUENCE,
  recomputeCrc,
  TIMESTAMP_TYPE_BIT,
  TRANSACTIONAL_BIT,
  writeInt32,
  type TimestampType,
} from "../../src/protocol/records/record-batch.ts";
import { Writer } from "../../src/protocol/writer.ts";

export const TEST_BASE_TIMESTAMP_MS = 1_700_000_000_000;

type Bytes = Uint8Array | string | null;

export interface TestHeader {
  key: string;
  value: Bytes;
}

export interface TestRecord {
  key?: Bytes;
  value?: Bytes;
  headers?: TestHeader[];
  /** Absolute timestamp; defaults to the batch's base timestamp. */
  timestampMs?: number;
}

export interface TestBatchSpec {
  records: TestRecord[];
  baseOffset?: number;
  partitionLeaderEpoch?: number;
  /** Defaults to the first record's timestamp, else TEST_BASE_TIMESTAMP_MS. */
  baseTimestampMs?: number;
  producerId?: number;
  producerEpoch?: number;
  baseSequence?: number;
  transactional?: boolean;
  control?: boolean;
  timestampType?: TimestampType;
  /** Codec bits of the attributes only: the records stay uncompressed (for validation tests). */
  compressionCodec?: number;
  // Overrides for broken batches; the CRC is computed after them unless `corruptCrc`.
  magic?: number;
  lastOffsetDelta?: number;
  recordsCount?: number;
  maxTimestampMs?: number;
  corruptCrc?: boolean;
}

const encoder = new TextEncoder();

function toBytes(value: Bytes | undefined): Uint8Array | null {
  if (value === undefined || value === null) return null;
  return typeof value === "string" ? encoder.encode(value) : value;
}

function writeVarBytes(w: Writer, value: Uint8Array | null): void {
  if (value === null) {
    w.varint(-1);
  } else {
    w.varint(value.length);
    w.raw(value);
  }
}

export function encodeRecord(record: TestRecord, offsetDelta: number, baseTimestampMs: number): Uint8Array {
  const body = new Writer(64);
  body.int8(0); // attributes
  body.varlong((record.timestampMs ?? baseTimestampMs) - baseTimestampMs);
  body.varint(offsetDelta);
  writeVarBytes(body, toBytes(record.key));
  writeVarBytes(body, toBytes(record.value));
  const headers = record.headers ?? [];
  body.varint(headers.length);
  for (const header of headers) {
    writeVarBytes(body, encoder.encode(header.key));
    writeVarBytes(body, toBytes(header.value));
  }
  const bodyBytes = body.finish();
  const w = new Writer(bodyBytes.length + 5);
  w.varint(bodyBytes.length);
  w.raw(bodyBytes);
  return w.finish();
}

export function buildBatch(spec: TestBatchSpec): Uint8Array {
  const baseTimestampMs = spec.baseTimestampMs ?? spec.records[0]?.timestampMs ?? TEST_BASE_TIMESTAMP_MS;
  let maxTimestampMs = -1;
  for (const record of spec.records) maxTimestampMs = Math.max(maxTimestampMs, record.timestampMs ?? baseTimestampMs);
  let attributes = (spec.compressionCodec ?? 0) & 0x07;
  if (spec.timestampType === "log-append-time") attributes |= TIMESTAMP_TYPE_BIT;
  if (spec.transactional === true) attributes |= TRANSACTIONAL_BIT;
  if (spec.control === true) attributes |= CONTROL_BIT;

  const w = new Writer(BATCH_HEADER_BYTES + 64 * spec.records.length);
  w.int64(spec.baseOffset ?? 0);
  w.int32(0); // batchLength, patched below
  w.int32(spec.partitionLeaderEpoch ?? NO_PARTITION_LEADER_EPOCH);
  w.int8(spec.magic ?? MAGIC_V2);
  w.uint32(0); // crc, computed below
  w.int16(attributes);
  w.int32(spec.lastOffsetDelta ?? spec.records.length - 1);
  w.int64(baseTimestampMs);
  w.int64(spec.maxTimestampMs ?? maxTimestampMs);
  w.int64(spec.producerId ?? NO_PRODUCER_ID);
  w.int16(spec.producerEpoch ?? NO_PRODUCER_EPOCH);
  w.int32(spec.baseSequence ?? NO_SEQUENCE);
  w.int32(spec.recordsCount ?? spec.records.length);
  spec.records.forEach((record, i) => w.raw(encodeRecord(record, i, baseTimestampMs)));
  const bytes = w.finish().slice();
  writeInt32(bytes, 8, bytes.length - LOG_OVERHEAD_BYTES);
  recomputeCrc(bytes, 0);
  if (spec.corruptCrc === true) bytes[CRC_AT] = bytes[CRC_AT]! ^ 0xff;
  return bytes;
}

/** A batch of `count` records with values "v0", "v1", ... and small keys. */
export function simpleBatch(count: number, spec: Omit<TestBatchSpec, "records"> & { valueBytes?: number; timestampMs?: number } = {}): Uint8Array {
  const records: TestRecord[] = [];
  for (let i = 0; i < count; i++) {
    const value = spec.valueBytes === undefined ? `v${i}` : new Uint8Array(spec.valueBytes).fill(0x61 + (i % 26));
    records.push({ key: `k${i}`, value, ...(spec.timestampMs === undefined ? {} : { timestampMs: spec.timestampMs }) });
  }
  return buildBatch({ ...spec, records });
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
