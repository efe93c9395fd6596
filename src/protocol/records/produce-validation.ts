/**
 * The records inside a produced batch, checked as Apache Kafka's LogValidator checks them, and the batch
 * as it will be stored: its max timestamp made true, and recompressed when the topic's compression.type
 * asks for another codec. Runs after validateProduceRecordSet (record-batch.ts) has accepted the header.
 *
 * What is checked, for every record of the (decompressed) records section:
 *   - the record's length varint is within the section, and its fields use exactly that many bytes;
 *   - attributes, timestamp delta, offset delta, key, value and headers are all there; a key or value
 *     length below -1, a negative header count or header key length, a length past the record is
 *     malformed; the timestamp (base + delta) must fit a safe integer;
 *   - offset deltas are 0, 1, ..., n-1 in order (n = recordsCount; the header check already tied
 *     lastOffsetDelta to n - 1);
 *   - exactly recordsCount records, and no byte after the last one;
 *   - on a topic whose cleanup.policy contains compact, every record has a key;
 *   - a CreateTime record's timestamp is within the topic's message.timestamp.before/after.max.ms of
 *     now (the caller supplies the check; Apache 4.1's default refuses more than an hour ahead).
 *
 * Apache's answers, as Apache Kafka 4.1.1 gives them (tests/interop/produce-validation-reference.test.ts
 * sends it the same bytes): a malformed record section is INVALID_RECORD without record errors (the record iterator's
 * InvalidRecordException). A null key on a compacted topic is INVALID_RECORD with one record error per
 * keyless record ("Compacted topic cannot accept message without key in topic partition t-0") and the
 * top-level message "One or more records have been rejected due to N record errors in total, and only
 * showing the first three errors at most: [RecordError(batchIndex=i, message='...'), ...]". A timestamp
 * out of bounds is INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
 * with a record error per such record (and per keyless one).
 *
 * Where bunka is stricter than Apache: records whose offset deltas are not 0..n-1 are refused (Apache
 * stores an uncompressed one as it is, so consumers see offsets the batch does not own, and answers
 * UNKNOWN_SERVER_ERROR for a compressed one), and a records section that does not decompress is
 * INVALID_RECORD (Apache answers UNKNOWN_SERVER_ERROR): the CRC matched, so the client made the bytes
 * and a retry cannot help, which is what INVALID_RECORD tells it.
 *
 * Uncompressed batches are walked in place, with no allocation per record; a compressed one is
 * decompressed once (bounded by DECOMPRESSED_RECORDS_MAX_BYTES) and the same walk runs on the result.
 */
import { DecodeError } from "../../errors/errors.ts";
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import { compress } from "./compression.ts";
import {
  ATTRIBUTES_AT,
  BATCH_HEADER_BYTES,
  BATCH_LENGTH_AT,
  CompressionCodec,
  COMPRESSION_CODEC_MASK,
  LOG_OVERHEAD_BYTES,
  NO_TIMESTAMP,
  parseBatchHeader,
  readInt16,
  recomputeCrc,
  setMaxTimestamp,
  writeInt16,
  writeInt32,
  type BatchHeader,
} from "./record-batch.ts";
import { batchSpecOf, buildBatch, decodeRecordsSection, DECOMPRESSED_RECORDS_MAX_BYTES, recordsSectionOf } from "./records.ts";

export interface RecordError {
  /** Index of the record inside its batch. */
  batchIndex: number;
  message: string;
}

export interface ProducedBatchOptions {
  /** `<topic>-<partition>`, as Apache names the partition in its messages. */
  topicPartition: string;
  /** cleanup.policy contains compact: every record needs a key. */
  compacted: boolean;
  /** The topic's message.timestamp.type; LogAppendTime batches get their max timestamp from the log. */
  logAppendTime: boolean;
  /**
   * The codec the topic stores batches in (compression.type), or "producer" to keep the producer's.
   * A batch in another codec is decoded and rebuilt in this one.
   */
  targetCodec: number | "producer";
  /** The level to recompress with (compression.<codec>.level); the codec's default when omitted. */
  targetLevel?: number;
  /** max.message.bytes: a batch that recompression made larger than this is MESSAGE_TOO_LARGE. */
  maxBatchBytes: number;
  /**
   * Why a record's timestamp is out of the topic's bounds (message.timestamp.before/after.max.ms), as
   * Apache words the record error, or null when it is within them. Asked for every keyed (or not
   * compacted) record; omitted, timestamps are not bounded.
   */
  recordTimestampProblem?: (timestampMs: number, offset: number) => string | null;
}

export type ProducedBatch =
  /** What to append: the request's own bytes (perhaps with a corrected max timestamp) or a rebuilt batch. */
  | { ok: true; recordSet: Uint8Array; batch: BatchHeader; recompressed: boolean }
  | { ok: false; errorCode: number; message: string; recordErrors: RecordError[] };

/**
 * Checks the records of the one batch `batch` of `recordSet` (already accepted by
 * validateProduceRecordSet) and returns the bytes to append, or the answer that refuses it. Nothing is
 * modified when it is refused.
 */
export function prepareProducedBatch(recordSet: Uint8Array, batch: BatchHeader, options: ProducedBatchOptions): ProducedBatch {
  let section: Uint8Array;
  let start: number;
  let end: number;
  if (batch.compression === CompressionCodec.none) {
    section = recordSet;
    start = batch.position + BATCH_HEADER_BYTES;
    end = batch.position + batch.sizeBytes;
  } else {
    try {
      section = recordsSectionOf(recordSet, batch.position, DECOMPRESSED_RECORDS_MAX_BYTES);
    } catch (error) {
      if (!(error instanceof DecodeError)) throw error;
      return refused(ErrorCode.INVALID_RECORD, `records of ${options.topicPartition} do not decompress: ${error.message}`);
    }
    start = 0;
    end = section.length;
  }

  let walk: RecordsWalk;
  try {
    walk = walkRecords(section, start, end, batch, options);
  } catch (error) {
    if (!(error instanceof DecodeError)) throw error;
    return refused(ErrorCode.INVALID_RECORD, `malformed records in ${options.topicPartition}: ${error.message}`);
  }
  if (walk.recordErrors.length > 0) return recordErrorsRefusal(walk);

  const target = options.targetCodec === "producer" ? batch.compression : options.targetCodec;
  if (target !== batch.compression) {
    const rebuilt = recompress(recordSet, batch, section.subarray(start, end), target, options.targetLevel);
    if (rebuilt.length > options.maxBatchBytes) {
      return refused(
        ErrorCode.MESSAGE_TOO_LARGE,
        `Message batch size is ${rebuilt.length} bytes in append to partition ${options.topicPartition} which exceeds the maximum configured size of ${options.maxBatchBytes}.`,
      );
    }
    return { ok: true, recordSet: rebuilt, batch: parseBatchHeader(rebuilt, 0), recompressed: true };
  }
  // As Apache sets it in place (DefaultRecordBatch.setMaxTimestamp): the largest record timestamp, not
  // the producer's claim. LogAppendTime batches are stamped by the log instead.
  if (!options.logAppendTime && walk.maxTimestampMs !== batch.maxTimestampMs) {
    setMaxTimestamp(recordSet, batch.position, "create-time", walk.maxTimestampMs);
    return { ok: true, recordSet, batch: parseBatchHeader(recordSet, batch.position), recompressed: false };
  }
  return { ok: true, recordSet, batch, recompressed: false };
}

function refused(errorCode: number, message: string, recordErrors: RecordError[] = []): ProducedBatch {
  return { ok: false, errorCode, message, recordErrors };
}

/**
 * Apache's answer to records refused one by one (LogValidator.processRecordErrors): INVALID_TIMESTAMP
 * when any timestamp is out of bounds, else INVALID_RECORD naming the first three record errors; every
 * record error goes into the response either way.
 */
function recordErrorsRefusal(walk: RecordsWalk): ProducedBatch {
  const { recordErrors } = walk;
  if (walk.timestampErrors) {
    return refused(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", recordErrors);
  }
  const shown = recordErrors
    .slice(0, 3)
    .map((e) => `RecordError(batchIndex=${e.batchIndex}, message='${e.message}')`)
    .join(", ");
  return refused(
    ErrorCode.INVALID_RECORD,
    `One or more records have been rejected due to ${recordErrors.length} record errors in total, and only showing the first three errors at most: [${shown}]`,
    recordErrors,
  );
}

/**
 * The batch rebuilt in `codec` (at `level`) from its decompressed records section: header fields kept
 * (base offset, last offset delta, producer id/epoch/sequence, transactional and timestamp-type bits),
 * records re-encoded, base and max timestamps taken from the records as Apache's MemoryRecordsBuilder
 * does, CRC recomputed. Built uncompressed by buildBatch first so that the level can be applied here.
 */
function recompress(recordSet: Uint8Array, batch: BatchHeader, section: Uint8Array, codec: number, level: number | undefined): Uint8Array {
  const spec = batchSpecOf(recordSet, batch.position);
  const records = decodeRecordsSection(batch, section);
  const plain = buildBatch({ ...spec, attributes: spec.attributes & ~COMPRESSION_CODEC_MASK, deleteHorizonMs: -1 }, records);
  if (codec === CompressionCodec.none) return plain;
  const compressed = compress(codec, plain.subarray(BATCH_HEADER_BYTES), level);
  const rebuilt = new Uint8Array(BATCH_HEADER_BYTES + compressed.length);
  rebuilt.set(plain.subarray(0, BATCH_HEADER_BYTES));
  rebuilt.set(compressed, BATCH_HEADER_BYTES);
  writeInt32(rebuilt, BATCH_LENGTH_AT, rebuilt.length - LOG_OVERHEAD_BYTES);
  writeInt16(rebuilt, ATTRIBUTES_AT, readInt16(rebuilt, ATTRIBUTES_AT) | codec);
  recomputeCrc(rebuilt, 0);
  return rebuilt;
}

// ---- the walk -------------------------------------------------------------------------------------

interface RecordsWalk {
  maxTimestampMs: number;
  /** Records refused one by one: keyless ones on a compacted topic, timestamps out of bounds. */
  recordErrors: RecordError[];
  /** Whether any of them is a timestamp's. */
  timestampErrors: boolean;
}

const NO_RECORD_ERRORS: RecordError[] = [];
const MAX_SAFE_TIMESTAMP = Number.MAX_SAFE_INTEGER;

/**
 * Where the walk reads next. Module state rather than an object per call: the walk is synchronous and
 * never re-entered, and this keeps the per-record loop free of allocations.
 */
let cursor = 0;

function varint(bytes: Uint8Array, limit: number, what: string, record: number): number {
  let raw = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (cursor >= limit) throw new DecodeError(`record ${record} ends inside its ${what}`);
    const b = bytes[cursor++]!;
    raw |= (b & 0x7f) << shift;
    if (b < 0x80) return (raw >>> 1) ^ -(raw & 1);
  }
  throw new DecodeError(`record ${record} has a ${what} varint longer than 5 bytes`);
}

function varlong(bytes: Uint8Array, limit: number, what: string, record: number): number {
  let raw = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (cursor >= limit) throw new DecodeError(`record ${record} ends inside its ${what}`);
    const b = bytes[cursor++]!;
    raw += (b & 0x7f) * scale;
    if (b < 0x80) {
      if (raw > MAX_SAFE_TIMESTAMP) throw new DecodeError(`record ${record} has a ${what} beyond 2^53`);
      return raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2;
    }
    scale *= 128;
  }
  throw new DecodeError(`record ${record} has a ${what} varlong longer than 10 bytes`);
}

/** Skips a length-prefixed byte field; returns its length (-1 for null when `nullable`). */
function skipBytes(bytes: Uint8Array, limit: number, what: string, record: number, nullable: boolean): number {
  const length = varint(bytes, limit, `${what} length`, record);
  if (length < (nullable ? -1 : 0)) throw new DecodeError(`record ${record} has ${what} length ${length}`);
  if (length > limit - cursor) throw new DecodeError(`record ${record} has ${what} length ${length}, ${limit - cursor} bytes left in it`);
  if (length > 0) cursor += length;
  return length;
}

/**
 * Walks the records in `bytes[start, end)`; throws DecodeError at the first malformed one. As Apache
 * checks them, a record without a key on a compacted topic is not asked about its timestamp too.
 */
function walkRecords(bytes: Uint8Array, start: number, end: number, batch: BatchHeader, options: ProducedBatchOptions): RecordsWalk {
  const count = batch.recordsCount;
  // Each record takes at least 7 bytes (length, attributes, four varints, header count).
  if (count > (end - start) / 7) throw new DecodeError(`records count ${count} cannot fit ${end - start} bytes`);
  const { compacted, recordTimestampProblem } = options;
  let maxTimestampMs = NO_TIMESTAMP;
  let recordErrors = NO_RECORD_ERRORS;
  let timestampErrors = false;
  cursor = start;
  for (let i = 0; i < count; i++) {
    const length = varint(bytes, end, "length", i);
    if (length < 0 || length > end - cursor) throw new DecodeError(`record ${i} has length ${length}, ${end - cursor} bytes left`);
    const recordEnd = cursor + length;
    if (cursor >= recordEnd) throw new DecodeError(`record ${i} ends inside its attributes`);
    cursor++; // attributes: unused in v2
    const timestampDelta = varlong(bytes, recordEnd, "timestamp delta", i);
    const timestampMs = batch.baseTimestampMs + timestampDelta;
    if (!Number.isSafeInteger(timestampMs)) throw new DecodeError(`record ${i} has timestamp ${timestampMs}, beyond 2^53`);
    if (timestampMs > maxTimestampMs) maxTimestampMs = timestampMs;
    const offsetDelta = varint(bytes, recordEnd, "offset delta", i);
    if (offsetDelta !== i) throw new DecodeError(`record ${i} has offset delta ${offsetDelta}`);
    const keyLength = skipBytes(bytes, recordEnd, "key", i, true);
    let problem: string | null = null;
    if (keyLength < 0 && compacted) {
      problem = `Compacted topic cannot accept message without key in topic partition ${options.topicPartition}`;
    } else if (recordTimestampProblem !== undefined) {
      problem = recordTimestampProblem(timestampMs, i);
      if (problem !== null) timestampErrors = true;
    }
    if (problem !== null) {
      if (recordErrors === NO_RECORD_ERRORS) recordErrors = [];
      recordErrors.push({ batchIndex: i, message: problem });
    }
    skipBytes(bytes, recordEnd, "value", i, true);
    const headers = varint(bytes, recordEnd, "header count", i);
    if (headers < 0) throw new DecodeError(`record ${i} has header count ${headers}`);
    for (let h = 0; h < headers; h++) {
      skipBytes(bytes, recordEnd, "header key", i, false);
      skipBytes(bytes, recordEnd, "header value", i, true);
    }
    if (cursor !== recordEnd) throw new DecodeError(`record ${i} has ${recordEnd - cursor} bytes after its headers`);
  }
  if (cursor !== end) throw new DecodeError(`${end - cursor} bytes after the last of ${count} records`);
  return { maxTimestampMs, recordErrors, timestampErrors };
}
