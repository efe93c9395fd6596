/**
 * RecordBatch v2 (magic 2), handled without decompressing and without re-encoding.
 *
 * The broker validates the 61-byte header and the CRC-32C, rewrites a few header fields in place (base
 * offset, partition leader epoch, and for LogAppendTime topics the max timestamp) and stores the bytes as
 * received. Records themselves are never walked on the produce or fetch path: that would be per-record
 * work, and for compressed batches it would mean decompressing.
 *
 * Layout (big-endian):
 *
 *   0  baseOffset            int64   not covered by the CRC (the broker assigns it)
 *   8  batchLength           int32   bytes after this field
 *  12  partitionLeaderEpoch  int32   not covered by the CRC (the leader sets it)
 *  16  magic                 int8
 *  17  crc                   uint32  CRC-32C of bytes [21, end)
 *  21  attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
 *                                    6 delete horizon (compaction)
 *  23  lastOffsetDelta       int32
 *  27  baseTimestamp         int64
 *  35  maxTimestamp          int64
 *  43  producerId            int64
 *  51  producerEpoch         int16
 *  53  baseSequence          int32
 *  57  recordsCount          int32
 *  61  records...
 *
 * Validation results are data, not exceptions (docs/architecture.md, "Conventions"): the Produce handler maps
 * each `BatchProblem` to a Kafka error code with `errorCodeOfProblem`.
 */
import { DecodeError } from "../../errors/errors.ts";
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import { Reader } from "../reader.ts";
import { crc32c } from "./crc32c.ts";

export const MAGIC_V2 = 2;
/** baseOffset + batchLength: the part of a batch that batchLength does not count. */
export const LOG_OVERHEAD_BYTES = 12;
/** The whole v2 header, up to and including recordsCount (Apache's RECORD_BATCH_OVERHEAD). */
export const BATCH_HEADER_BYTES = 61;
/** The smallest legal batchLength: a header with no records. */
export const BATCH_LENGTH_MIN = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES;

export const BASE_OFFSET_AT = 0;
export const BATCH_LENGTH_AT = 8;
export const PARTITION_LEADER_EPOCH_AT = 12;
export const MAGIC_AT = 16;
export const CRC_AT = 17;
export const ATTRIBUTES_AT = 21;
export const LAST_OFFSET_DELTA_AT = 23;
export const BASE_TIMESTAMP_AT = 27;
export const MAX_TIMESTAMP_AT = 35;
export const PRODUCER_ID_AT = 43;
export const PRODUCER_EPOCH_AT = 51;
export const BASE_SEQUENCE_AT = 53;
export const RECORDS_COUNT_AT = 57;

export const COMPRESSION_CODEC_MASK = 0x07;
export const TIMESTAMP_TYPE_BIT = 0x08;
export const TRANSACTIONAL_BIT = 0x10;
export const CONTROL_BIT = 0x20;
export const DELETE_HORIZON_BIT = 0x40;

/** Codec ids of attributes bits 0-2. 5..7 are unassigned. */
export const CompressionCodec = { none: 0, gzip: 1, snappy: 2, lz4: 3, zstd: 4 } as const;
export type CompressionCodec = (typeof CompressionCodec)[keyof typeof CompressionCodec];
export const COMPRESSION_CODEC_MAX = 4;

export type TimestampType = "create-time" | "log-append-time";

export const NO_TIMESTAMP = -1;
export const NO_PRODUCER_ID = -1;
export const NO_PRODUCER_EPOCH = -1;
export const NO_SEQUENCE = -1;
export const NO_PARTITION_LEADER_EPOCH = -1;

const TWO_POW_32 = 4294967296;
const INT32_MAX = 0x7fffffff;

// ---- big-endian field access on plain Uint8Arrays -------------------------------------------------
// Hand-rolled instead of DataView so that touching a header allocates nothing.

export function readInt16(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16)) >> 16;
}
export function readInt32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!;
}
export function readUint32(bytes: Uint8Array, at: number): number {
  return readInt32(bytes, at) >>> 0;
}
/** int64 as a JS number: exact within ±2^53, which covers every offset, id and timestamp in practice. */
export function readInt64(bytes: Uint8Array, at: number): number {
  return readInt32(bytes, at) * TWO_POW_32 + readUint32(bytes, at + 4);
}
export function writeInt16(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = (value >>> 8) & 0xff;
  bytes[at + 1] = value & 0xff;
}
export function writeInt32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = (value >>> 24) & 0xff;
  bytes[at + 1] = (value >>> 16) & 0xff;
  bytes[at + 2] = (value >>> 8) & 0xff;
  bytes[at + 3] = value & 0xff;
}
export function writeInt64(bytes: Uint8Array, at: number, value: number): void {
  const high = Math.floor(value / TWO_POW_32);
  writeInt32(bytes, at, high);
  writeInt32(bytes, at + 4, value - high * TWO_POW_32);
}

/** Total size of the batch at `at` (LOG_OVERHEAD_BYTES + batchLength); needs 12 bytes at `at`. */
export function batchSizeAt(bytes: Uint8Array, at: number): number {
  return LOG_OVERHEAD_BYTES + readInt32(bytes, at + BATCH_LENGTH_AT);
}
export function baseOffsetAt(bytes: Uint8Array, at: number): number {
  return readInt64(bytes, at + BASE_OFFSET_AT);
}
export function lastOffsetDeltaAt(bytes: Uint8Array, at: number): number {
  return readInt32(bytes, at + LAST_OFFSET_DELTA_AT);
}
export function maxTimestampAt(bytes: Uint8Array, at: number): number {
  return readInt64(bytes, at + MAX_TIMESTAMP_AT);
}
export function baseTimestampAt(bytes: Uint8Array, at: number): number {
  return readInt64(bytes, at + BASE_TIMESTAMP_AT);
}
export function attributesAt(bytes: Uint8Array, at: number): number {
  return readInt16(bytes, at + ATTRIBUTES_AT);
}

// ---- parsed header --------------------------------------------------------------------------------

export interface BatchHeader {
  /** Byte position of the batch inside the buffer it was parsed from. */
  position: number;
  /** LOG_OVERHEAD_BYTES + batchLength. */
  sizeBytes: number;
  baseOffset: number;
  partitionLeaderEpoch: number;
  magic: number;
  crc: number;
  attributes: number;
  compression: number;
  timestampType: TimestampType;
  isTransactional: boolean;
  isControl: boolean;
  lastOffsetDelta: number;
  baseTimestampMs: number;
  maxTimestampMs: number;
  producerId: number;
  producerEpoch: number;
  baseSequence: number;
  recordsCount: number;
}

/** Reads the header fields of the batch at `position`; the caller guarantees BATCH_HEADER_BYTES there. */
export function parseBatchHeader(bytes: Uint8Array, position = 0): BatchHeader {
  if (position < 0 || position + BATCH_HEADER_BYTES > bytes.length) {
    throw new DecodeError(`batch header at ${position} needs ${BATCH_HEADER_BYTES} bytes, buffer has ${bytes.length}`);
  }
  const attributes = readInt16(bytes, position + ATTRIBUTES_AT);
  return {
    position,
    sizeBytes: batchSizeAt(bytes, position),
    baseOffset: readInt64(bytes, position + BASE_OFFSET_AT),
    partitionLeaderEpoch: readInt32(bytes, position + PARTITION_LEADER_EPOCH_AT),
    magic: (bytes[position + MAGIC_AT]! << 24) >> 24,
    crc: readUint32(bytes, position + CRC_AT),
    attributes,
    compression: attributes & COMPRESSION_CODEC_MASK,
    timestampType: attributes & TIMESTAMP_TYPE_BIT ? "log-append-time" : "create-time",
    isTransactional: (attributes & TRANSACTIONAL_BIT) !== 0,
    isControl: (attributes & CONTROL_BIT) !== 0,
    lastOffsetDelta: readInt32(bytes, position + LAST_OFFSET_DELTA_AT),
    baseTimestampMs: readInt64(bytes, position + BASE_TIMESTAMP_AT),
    maxTimestampMs: readInt64(bytes, position + MAX_TIMESTAMP_AT),
    producerId: readInt64(bytes, position + PRODUCER_ID_AT),
    producerEpoch: readInt16(bytes, position + PRODUCER_EPOCH_AT),
    baseSequence: readInt32(bytes, position + BASE_SEQUENCE_AT),
    recordsCount: readInt32(bytes, position + RECORDS_COUNT_AT),
  };
}

export function lastOffsetOf(header: Pick<BatchHeader, "baseOffset" | "lastOffsetDelta">): number {
  return header.baseOffset + header.lastOffsetDelta;
}

/** Last sequence of the batch; sequences wrap from Int32.MAX to 0 (Apache's DefaultRecordBatch). */
export function lastSequenceOf(header: Pick<BatchHeader, "baseSequence" | "lastOffsetDelta">): number {
  if (header.baseSequence === NO_SEQUENCE) return NO_SEQUENCE;
  const increment = header.lastOffsetDelta;
  if (header.baseSequence > INT32_MAX - increment) return increment - (INT32_MAX - header.baseSequence) - 1;
  return header.baseSequence + increment;
}

// ---- structural checks ----------------------------------------------------------------------------

export type BatchProblem =
  /** Fewer bytes than the header or than batchLength claims: a torn or cut-off batch. */
  | { kind: "truncated"; position: number; availableBytes: number; neededBytes: number }
  /** batchLength below the v2 header size (or negative). */
  | { kind: "invalid-length"; position: number; batchLength: number }
  | { kind: "unsupported-magic"; position: number; magic: number }
  | { kind: "crc-mismatch"; position: number; storedCrc: number; computedCrc: number }
  | { kind: "invalid-compression"; position: number; codec: number }
  /** recordsCount < 1 or lastOffsetDelta != recordsCount - 1 (Apache LogValidator.validateBatch). */
  | { kind: "invalid-record-count"; position: number; recordsCount: number; lastOffsetDelta: number }
  // The rules below apply to batches from clients only (validateProduceRecordSet).
  | { kind: "no-batches" }
  | { kind: "multiple-batches"; position: number }
  | { kind: "nonzero-base-offset"; position: number; baseOffset: number }
  | { kind: "control-batch-from-client"; position: number }
  | { kind: "invalid-sequence"; position: number; producerId: number; baseSequence: number }
  | { kind: "log-append-time-from-client"; position: number }
  | { kind: "batch-too-large"; position: number; sizeBytes: number; maxBytes: number };

/**
 * Checks the framing of the batch at `position` of `bytes[.., end)`: enough bytes for the length, a
 * length that can hold a v2 header, magic 2, and all `batchLength` bytes present. Returns the batch size
 * in bytes, or the problem. The magic byte is judged before the length so that a v0/v1 message set is
 * reported as such (INVALID_RECORD) rather than as a short batch.
 */
export function checkFraming(bytes: Uint8Array, position: number, end = bytes.length): number | BatchProblem {
  const available = end - position;
  if (available < LOG_OVERHEAD_BYTES) {
    return { kind: "truncated", position, availableBytes: available, neededBytes: LOG_OVERHEAD_BYTES };
  }
  const batchLength = readInt32(bytes, position + BATCH_LENGTH_AT);
  if (available > MAGIC_AT && batchLength > MAGIC_AT - LOG_OVERHEAD_BYTES) {
    const magic = (bytes[position + MAGIC_AT]! << 24) >> 24;
    if (magic !== MAGIC_V2) return { kind: "unsupported-magic", position, magic };
  }
  if (batchLength < BATCH_LENGTH_MIN) return { kind: "invalid-length", position, batchLength };
  const sizeBytes = LOG_OVERHEAD_BYTES + batchLength;
  if (available < sizeBytes) return { kind: "truncated", position, availableBytes: available, neededBytes: sizeBytes };
  return sizeBytes;
}

/**
 * Checks the batch at `position` of `bytes[.., end)`: framing (see checkFraming), CRC-32C, codec, and the
 * count/offset-delta consistency that Apache's LogValidator requires of v2 batches without looking at
 * the records. Returns the batch size in bytes when it is sound, the problem otherwise. A number rather
 * than an object on success because recovery calls this once per stored batch.
 *
 * `cleaned`: the batch may come from a segment the log cleaner rewrote, where a batch keeps its offset
 * span (last offset delta) with fewer records, or none at all. `verifyCrc` false: everything but the CRC,
 * for bytes whose CRC was checked already (storage/log/verified-ranges.ts).
 */
export function checkBatch(bytes: Uint8Array, position: number, end = bytes.length, cleaned = false, verifyCrc = true): number | BatchProblem {
  const sizeBytes = checkFraming(bytes, position, end);
  if (typeof sizeBytes !== "number") return sizeBytes;
  if (verifyCrc) {
    const storedCrc = readUint32(bytes, position + CRC_AT);
    const computedCrc = crc32c(bytes, position + ATTRIBUTES_AT, position + sizeBytes);
    if (storedCrc !== computedCrc) return { kind: "crc-mismatch", position, storedCrc, computedCrc };
  }
  const codec = readInt16(bytes, position + ATTRIBUTES_AT) & COMPRESSION_CODEC_MASK;
  if (codec > COMPRESSION_CODEC_MAX) return { kind: "invalid-compression", position, codec };
  const recordsCount = readInt32(bytes, position + RECORDS_COUNT_AT);
  const lastOffsetDelta = readInt32(bytes, position + LAST_OFFSET_DELTA_AT);
  const countProblem = cleaned
    ? recordsCount < 0 || lastOffsetDelta < 0 || recordsCount > lastOffsetDelta + 1
    : recordsCount < 1 || lastOffsetDelta !== recordsCount - 1;
  if (countProblem) return { kind: "invalid-record-count", position, recordsCount, lastOffsetDelta };
  return sizeBytes;
}

/**
 * Splits a record set into its batches, checking each with `checkBatch` (no produce-only rules, any
 * number of batches). A trailing partial batch is a "truncated" problem.
 */
export function parseRecordSet(recordSet: Uint8Array): ProduceValidation {
  const batches: BatchHeader[] = [];
  for (let position = 0; position < recordSet.length; ) {
    const checked = checkBatch(recordSet, position);
    if (typeof checked !== "number") return { ok: false, problem: checked };
    batches.push(parseBatchHeader(recordSet, position));
    position += checked;
  }
  return { ok: true, batches };
}

export interface ProduceValidationOptions {
  /** max.message.bytes of the topic: a larger batch is MESSAGE_TOO_LARGE. Unlimited when omitted. */
  maxBatchBytes?: number;
  /**
   * Apache accepts exactly one v2 batch per partition in a produce request (LogValidator:
   * "Compressed outer record has more than one batch"); tests and tools may relax it.
   */
  allowMultipleBatches?: boolean;
}

export type ProduceValidation = { ok: true; batches: BatchHeader[] } | { ok: false; problem: BatchProblem };

/**
 * Validates a record set from a producer, in the order Apache applies its checks: batch framing and
 * magic (ByteBufferLogInputStream, ProduceRequest.validateRecords), one batch only, base offset 0, CRC
 * and size (UnifiedLog.analyzeAndValidateRecords), then LogValidator's header rules. Per-record checks
 * (timestamp bounds, keys of compacted topics, the declared count against the actual records) need the
 * records and are deliberately not done here.
 *
 * Unlike Apache, which silently trims trailing bytes that do not form a whole batch, a trailing partial
 * batch is refused ("truncated" -> CORRUPT_MESSAGE): a producer never sends one, so it means a bug or a
 * corrupted frame, and storing a prefix of what was sent is never what the producer meant.
 */
export function validateProduceRecordSet(recordSet: Uint8Array, options: ProduceValidationOptions = {}): ProduceValidation {
  if (recordSet.length === 0) return { ok: false, problem: { kind: "no-batches" } };
  const batches: BatchHeader[] = [];
  let position = 0;
  while (position < recordSet.length) {
    const framed = checkFraming(recordSet, position);
    if (typeof framed !== "number") return { ok: false, problem: framed };
    if (position > 0 && options.allowMultipleBatches !== true) {
      return { ok: false, problem: { kind: "multiple-batches", position } };
    }
    const baseOffset = readInt64(recordSet, position + BASE_OFFSET_AT);
    if (baseOffset !== 0) return { ok: false, problem: { kind: "nonzero-base-offset", position, baseOffset } };
    const checked = checkBatch(recordSet, position);
    if (typeof checked !== "number" && checked.kind === "crc-mismatch") return { ok: false, problem: checked };
    // Apache checks the size limit after the CRC and before the header rules.
    const tooLarge = sizeProblem(position, framed, options);
    if (tooLarge !== undefined) return { ok: false, problem: tooLarge };
    if (typeof checked !== "number") return { ok: false, problem: checked };
    const header = parseBatchHeader(recordSet, position);
    if (header.isControl) return { ok: false, problem: { kind: "control-batch-from-client", position } };
    if (header.producerId >= 0 && header.baseSequence < 0) {
      return {
        ok: false,
        problem: { kind: "invalid-sequence", position, producerId: header.producerId, baseSequence: header.baseSequence },
      };
    }
    if (header.timestampType === "log-append-time") return { ok: false, problem: { kind: "log-append-time-from-client", position } };
    batches.push(header);
    position += framed;
  }
  return { ok: true, batches };
}

function sizeProblem(position: number, sizeBytes: number, options: ProduceValidationOptions): BatchProblem | undefined {
  if (options.maxBatchBytes !== undefined && sizeBytes > options.maxBatchBytes) {
    return { kind: "batch-too-large", position, sizeBytes, maxBytes: options.maxBatchBytes };
  }
  return undefined;
}

export function errorCodeOfProblem(problem: BatchProblem): number {
  switch (problem.kind) {
    case "truncated":
    case "invalid-length":
    case "crc-mismatch":
      return ErrorCode.CORRUPT_MESSAGE;
    case "unsupported-magic":
      // Produce v3+ answers a v0/v1 message set with INVALID_RECORD (ProduceRequest.validateRecords);
      // a magic byte that no format has is a corrupt frame (ByteBufferLogInputStream).
      return problem.magic >= 0 && problem.magic < MAGIC_V2 ? ErrorCode.INVALID_RECORD : ErrorCode.CORRUPT_MESSAGE;
    case "invalid-compression":
      // Apache fails on the unknown codec id with an IllegalArgumentException (UNKNOWN_SERVER_ERROR);
      // UNSUPPORTED_COMPRESSION_TYPE tells the client what is actually wrong.
      return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE;
    case "batch-too-large":
      return ErrorCode.MESSAGE_TOO_LARGE;
    case "log-append-time-from-client":
      return ErrorCode.INVALID_TIMESTAMP;
    case "invalid-record-count":
    case "no-batches":
    case "multiple-batches":
    case "nonzero-base-offset":
    case "control-batch-from-client":
    case "invalid-sequence":
      return ErrorCode.INVALID_RECORD;
  }
}

// ---- in-place rewrites ----------------------------------------------------------------------------

/** Sets the base offset; not covered by the CRC, so the CRC stays valid. */
export function setBaseOffset(bytes: Uint8Array, position: number, baseOffset: number): void {
  writeInt64(bytes, position + BASE_OFFSET_AT, baseOffset);
}

/** Sets the partition leader epoch; not covered by the CRC. */
export function setPartitionLeaderEpoch(bytes: Uint8Array, position: number, epoch: number): void {
  writeInt32(bytes, position + PARTITION_LEADER_EPOCH_AT, epoch);
}

/**
 * Sets the timestamp type bit and the max timestamp, and recomputes the CRC because both are covered by
 * it (Apache's DefaultRecordBatch.setMaxTimestamp). Nothing is written, and no CRC computed, when both
 * already have the wanted values. Returns whether the batch changed.
 */
export function setMaxTimestamp(bytes: Uint8Array, position: number, timestampType: TimestampType, maxTimestampMs: number): boolean {
  const attributes = readInt16(bytes, position + ATTRIBUTES_AT);
  const wantedAttributes =
    timestampType === "log-append-time" ? attributes | TIMESTAMP_TYPE_BIT : attributes & ~TIMESTAMP_TYPE_BIT;
  if (wantedAttributes === attributes && readInt64(bytes, position + MAX_TIMESTAMP_AT) === maxTimestampMs) return false;
  writeInt16(bytes, position + ATTRIBUTES_AT, wantedAttributes);
  writeInt64(bytes, position + MAX_TIMESTAMP_AT, maxTimestampMs);
  recomputeCrc(bytes, position);
  return true;
}

/** Rewrites the CRC field from the bytes it covers. */
export function recomputeCrc(bytes: Uint8Array, position: number): void {
  const sizeBytes = batchSizeAt(bytes, position);
  writeInt32(bytes, position + CRC_AT, crc32c(bytes, position + ATTRIBUTES_AT, position + sizeBytes));
}

// ---- control batches ------------------------------------------------------------------------------

export type ControlRecordType = "abort" | "commit";
const CONTROL_TYPE_ABORT = 0;
const CONTROL_TYPE_COMMIT = 1;

export interface ControlBatchSpec {
  producerId: number;
  producerEpoch: number;
  commit: boolean;
  coordinatorEpoch: number;
  timestampMs: number;
  /** Usually 0: the log assigns the real base offset on append. */
  baseOffset?: number;
  partitionLeaderEpoch?: number;
}

/** Size of every end-transaction marker batch: the header plus one 17-byte record. */
export const CONTROL_BATCH_BYTES = BATCH_HEADER_BYTES + 17;

/**
 * Builds an end-transaction marker exactly as Apache writes one (MemoryRecords.withEndTransactionMarker):
 * CreateTime, uncompressed, attributes 0x30 (transactional + control), base sequence -1, one record whose
 * timestamp and offset deltas are 0, key = int16 version 0 + int16 type (0 abort, 1 commit), value =
 * int16 version 0 + int32 coordinator epoch, no headers.
 */
export function buildControlBatch(spec: ControlBatchSpec): Uint8Array {
  const bytes = new Uint8Array(CONTROL_BATCH_BYTES);
  writeInt64(bytes, BASE_OFFSET_AT, spec.baseOffset ?? 0);
  writeInt32(bytes, BATCH_LENGTH_AT, CONTROL_BATCH_BYTES - LOG_OVERHEAD_BYTES);
  writeInt32(bytes, PARTITION_LEADER_EPOCH_AT, spec.partitionLeaderEpoch ?? NO_PARTITION_LEADER_EPOCH);
  bytes[MAGIC_AT] = MAGIC_V2;
  writeInt16(bytes, ATTRIBUTES_AT, TRANSACTIONAL_BIT | CONTROL_BIT);
  writeInt32(bytes, LAST_OFFSET_DELTA_AT, 0);
  writeInt64(bytes, BASE_TIMESTAMP_AT, spec.timestampMs);
  writeInt64(bytes, MAX_TIMESTAMP_AT, spec.timestampMs);
  writeInt64(bytes, PRODUCER_ID_AT, spec.producerId);
  writeInt16(bytes, PRODUCER_EPOCH_AT, spec.producerEpoch);
  writeInt32(bytes, BASE_SEQUENCE_AT, NO_SEQUENCE);
  writeInt32(bytes, RECORDS_COUNT_AT, 1);
  let at = BATCH_HEADER_BYTES;
  // Record: every varint below is small and non-negative, so its zigzag form fits one byte (2 * n).
  bytes[at++] = 16 * 2; // length of the rest of the record
  bytes[at++] = 0; // attributes
  bytes[at++] = 0; // timestampDelta
  bytes[at++] = 0; // offsetDelta
  bytes[at++] = 4 * 2; // key length
  writeInt16(bytes, at, 0); // key version
  writeInt16(bytes, at + 2, spec.commit ? CONTROL_TYPE_COMMIT : CONTROL_TYPE_ABORT);
  at += 4;
  bytes[at++] = 6 * 2; // value length
  writeInt16(bytes, at, 0); // value version
  writeInt32(bytes, at + 2, spec.coordinatorEpoch);
  at += 6;
  bytes[at++] = 0; // header count
  recomputeCrc(bytes, 0);
  return bytes;
}

export interface ControlRecord {
  /** Key version (0 in every Kafka release so far). */
  version: number;
  /** 0 abort, 1 commit, other values are control records we do not write (e.g. 2 leader change). */
  typeCode: number;
  type: ControlRecordType | "other";
  /** Only meaningful for abort/commit markers; -1 when the value is absent. */
  coordinatorEpoch: number;
}

/**
 * Reads the control record of the control batch at `position` (recovery reads markers back with this).
 * Raises DecodeError when the batch is not an uncompressed control batch or its record is malformed.
 */
export function parseControlRecord(bytes: Uint8Array, position = 0): ControlRecord {
  const header = parseBatchHeader(bytes, position);
  if (!header.isControl) throw new DecodeError(`batch at ${position} is not a control batch`);
  if (header.compression !== CompressionCodec.none) throw new DecodeError(`control batch at ${position} is compressed`);
  const end = position + header.sizeBytes;
  if (end > bytes.length) throw new DecodeError(`control batch at ${position} is truncated`);
  const reader = new Reader(bytes, position + BATCH_HEADER_BYTES, end);
  const length = reader.varint();
  if (length < 0 || length > reader.remaining) throw new DecodeError(`control record length ${length} out of bounds`);
  const record = new Reader(bytes, reader.offset, reader.offset + length);
  record.int8(); // attributes
  record.varlong(); // timestampDelta
  record.varint(); // offsetDelta
  const keyLength = record.varint();
  if (keyLength < 4) throw new DecodeError(`control record key has ${keyLength} bytes, needs at least 4`);
  const key = new Reader(record.raw(keyLength));
  const version = key.int16();
  const typeCode = key.int16();
  const type: ControlRecord["type"] =
    typeCode === CONTROL_TYPE_ABORT ? "abort" : typeCode === CONTROL_TYPE_COMMIT ? "commit" : "other";
  let coordinatorEpoch = -1;
  const valueLength = record.varint();
  if (valueLength >= 6) {
    const value = new Reader(record.raw(valueLength));
    value.int16(); // value version
    coordinatorEpoch = value.int32();
  } else if (type !== "other") {
    throw new DecodeError(`end-transaction marker value has ${valueLength} bytes, needs 6`);
  }
  return { version, typeCode, type, coordinatorEpoch };
}

// ---- record walking (off the hot path) ------------------------------------------------------------

/**
 * Calls `visit(offset, timestampMs)` for each record of an uncompressed batch until it returns true;
 * returns whether it did. Used only by timestamp lookups (ListOffsets), never by produce or fetch.
 * Raises DecodeError for a compressed batch or malformed records.
 */
export function findRecordInUncompressedBatch(
  bytes: Uint8Array,
  position: number,
  visit: (offset: number, timestampMs: number) => boolean,
): boolean {
  const header = parseBatchHeader(bytes, position);
  if (header.compression !== CompressionCodec.none) throw new DecodeError(`batch at ${position} is compressed`);
  const end = position + header.sizeBytes;
  if (end > bytes.length) throw new DecodeError(`batch at ${position} is truncated`);
  const reader = new Reader(bytes, position + BATCH_HEADER_BYTES, end);
  for (let i = 0; i < header.recordsCount; i++) {
    const length = reader.varint();
    if (length < 0 || length > reader.remaining) throw new DecodeError(`record length ${length} out of bounds`);
    const next = reader.offset + length;
    const record = new Reader(bytes, reader.offset, next);
    record.int8(); // attributes
    const timestampDelta = record.varlong();
    const offsetDelta = record.varint();
    if (visit(header.baseOffset + offsetDelta, header.baseTimestampMs + timestampDelta)) return true;
    reader.offset = next;
  }
  return false;
}
