/**
 * Produced batches whose records are wrong in one way each, with what Apache Kafka 4.1.1 answers and what
 * bunka answers (src/protocol/records/produce-validation.ts), on topics with the default timestamp bounds.
 * `build` takes the broker's now, since timestamps are judged against it. Shared by the unit test of the validation,
 * the wire test against bunka and the reference test that sends the same bytes to Apache Kafka, so that
 * the three cannot drift apart. Every batch has a valid CRC: only what is inside is wrong.
 */
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { compress } from "../../src/protocol/records/compression.ts";
import { ATTRIBUTES_AT, BATCH_HEADER_BYTES, CompressionCodec, recomputeCrc, writeInt16, writeInt32 } from "../../src/protocol/records/record-batch.ts";
import { buildBatch, simpleBatch, type TestRecord } from "./batch-builder.ts";
import { compressBatch } from "./codec-inputs.ts";

export type CaseTopic = "plain" | "compacted";

export interface ProduceCase {
  name: string;
  topic: CaseTopic;
  build(nowMs: number): Uint8Array;
  /** Apache Kafka 4.1.1's error code for it (Produce v7 and v11 alike). */
  apache: number;
  /** bunka's error code; differs from Apache's only where the comment of the case says why. */
  bunka: number;
  /** Indexes of the records Apache (and bunka) name in record errors (Produce v8+), if any. */
  recordErrors?: number[];
}

/** Sets the batch length and CRC after a change. */
function sealed(batch: Uint8Array): Uint8Array {
  writeInt32(batch, 8, batch.length - 12);
  recomputeCrc(batch, 0);
  return batch;
}

/** `batch`'s header (codec bits replaced when `codec` is given) with `section` as its records. */
export function withSection(batch: Uint8Array, section: Uint8Array, codec?: number): Uint8Array {
  const out = new Uint8Array(BATCH_HEADER_BYTES + section.length);
  out.set(batch.subarray(0, BATCH_HEADER_BYTES));
  out.set(section, BATCH_HEADER_BYTES);
  if (codec !== undefined) writeInt16(out, ATTRIBUTES_AT, codec);
  return sealed(out);
}

const records = (nowMs: number, ...keys: (string | null)[]): TestRecord[] => keys.map((key, i) => ({ key, value: `v${i}`, timestampMs: nowMs }));

/** Two records whose second has offset delta 5 instead of 1. */
function wrongOffsetDelta(nowMs: number): Uint8Array {
  const batch = buildBatch({ records: records(nowMs, "a", "b") });
  // The first record's length (one zigzag byte) plus its bytes, then the second record's length,
  // attributes and one-byte timestamp delta: its offset delta comes next.
  const second = BATCH_HEADER_BYTES + 1 + batch[BATCH_HEADER_BYTES]! / 2;
  batch[second + 3] = 2 * 5;
  return sealed(batch);
}

const garbage = (codec: number): ProduceCase => ({
  name: `records that do not decompress (${Object.entries(CompressionCodec).find(([, c]) => c === codec)![0]})`,
  topic: "plain",
  build: (nowMs) => withSection(simpleBatch(3, { timestampMs: nowMs }), Uint8Array.from({ length: 40 }, (_, i) => (i * 37) & 255), codec),
  // Apache fails inside its decompressing iterator (KafkaException: UNKNOWN_SERVER_ERROR); the CRC
  // matched, so the producer made these bytes and INVALID_RECORD tells it a retry will not help.
  apache: ErrorCode.UNKNOWN_SERVER_ERROR,
  bunka: ErrorCode.INVALID_RECORD,
});

export const PRODUCE_CASES: ProduceCase[] = [
  {
    name: "keyless records on a compacted topic",
    topic: "compacted",
    build: (nowMs) => buildBatch({ records: records(nowMs, "a", null, null) }),
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
    recordErrors: [1, 2],
  },
  {
    name: "a keyless record in a gzip batch on a compacted topic",
    topic: "compacted",
    build: (nowMs) => compressBatch(buildBatch({ records: records(nowMs, "a", null) }), CompressionCodec.gzip),
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
    recordErrors: [1],
  },
  {
    name: "a keyless record on a topic that is not compacted (accepted)",
    topic: "plain",
    build: (nowMs) => buildBatch({ records: records(nowMs, null) }),
    apache: ErrorCode.NONE,
    bunka: ErrorCode.NONE,
  },
  {
    name: "a timestamp two hours ahead (message.timestamp.after.max.ms is one hour by default)",
    topic: "plain",
    build: (nowMs) => buildBatch({ records: [{ key: "a", value: "1", timestampMs: nowMs }, { key: "b", value: "2", timestampMs: nowMs + 2 * 3_600_000 }] }),
    apache: ErrorCode.INVALID_TIMESTAMP,
    bunka: ErrorCode.INVALID_TIMESTAMP,
    recordErrors: [1],
  },
  {
    name: "a keyless record and a timestamp ahead on a compacted topic: both named, INVALID_TIMESTAMP",
    topic: "compacted",
    build: (nowMs) =>
      buildBatch({ records: [{ key: null, value: "1", timestampMs: nowMs }, { key: "b", value: "2", timestampMs: nowMs + 2 * 3_600_000 }] }),
    apache: ErrorCode.INVALID_TIMESTAMP,
    bunka: ErrorCode.INVALID_TIMESTAMP,
    recordErrors: [0, 1],
  },
  {
    name: "a timestamp a year old (message.timestamp.before.max.ms is unbounded by default)",
    topic: "plain",
    build: (nowMs) => buildBatch({ records: [{ key: "a", value: "1", timestampMs: nowMs - 365 * 86_400_000 }] }),
    apache: ErrorCode.NONE,
    bunka: ErrorCode.NONE,
  },
  {
    name: "records count above the records present",
    topic: "plain",
    build: (nowMs) => buildBatch({ records: records(nowMs, "a", "b"), recordsCount: 3, lastOffsetDelta: 2 }),
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "records count below the records present",
    topic: "plain",
    build: (nowMs) => buildBatch({ records: records(nowMs, "a", "b", "c"), recordsCount: 2, lastOffsetDelta: 1 }),
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "bytes after the last record",
    topic: "plain",
    build: (nowMs) => {
      const ok = simpleBatch(3, { timestampMs: nowMs });
      return withSection(ok, Uint8Array.from([...ok.subarray(BATCH_HEADER_BYTES), 0, 0]));
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "a record length past the section",
    topic: "plain",
    build: (nowMs) => {
      const ok = simpleBatch(3, { timestampMs: nowMs });
      return withSection(ok, Uint8Array.from([0x7e, ...ok.subarray(BATCH_HEADER_BYTES + 1)]));
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "the last record cut short",
    topic: "plain",
    build: (nowMs) => {
      const ok = simpleBatch(3, { timestampMs: nowMs });
      return withSection(ok, ok.subarray(BATCH_HEADER_BYTES, ok.length - 2));
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "a key length below -1",
    topic: "plain",
    build: (nowMs) => {
      const batch = buildBatch({ records: records(nowMs, "ab") });
      batch[BATCH_HEADER_BYTES + 4] = 0x05; // zigzag -3
      return sealed(batch);
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "a header count that the record does not hold",
    topic: "plain",
    build: (nowMs) => {
      const batch = buildBatch({ records: records(nowMs, "a") });
      batch[batch.length - 1] = 0x03; // zigzag -2
      return sealed(batch);
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "a gzip batch whose records are cut short",
    topic: "plain",
    build: (nowMs) => {
      const ok = simpleBatch(3, { timestampMs: nowMs });
      return withSection(ok, compress(CompressionCodec.gzip, ok.subarray(BATCH_HEADER_BYTES, ok.length - 2)), CompressionCodec.gzip);
    },
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "a gzip batch whose records count is above the records present",
    topic: "plain",
    build: (nowMs) => compressBatch(buildBatch({ records: records(nowMs, "a"), recordsCount: 2, lastOffsetDelta: 1 }), CompressionCodec.gzip),
    apache: ErrorCode.INVALID_RECORD,
    bunka: ErrorCode.INVALID_RECORD,
  },
  garbage(CompressionCodec.gzip),
  garbage(CompressionCodec.snappy),
  garbage(CompressionCodec.lz4),
  garbage(CompressionCodec.zstd),
  {
    name: "an offset delta out of order (uncompressed)",
    topic: "plain",
    build: wrongOffsetDelta,
    // Apache stores it as sent, and consumers then see a record at an offset the batch does not own.
    apache: ErrorCode.NONE,
    bunka: ErrorCode.INVALID_RECORD,
  },
  {
    name: "an offset delta out of order (gzip)",
    topic: "plain",
    build: (nowMs) => compressBatch(wrongOffsetDelta(nowMs), CompressionCodec.gzip),
    // Apache tries to rebuild the batch and fails (UNKNOWN_SERVER_ERROR).
    apache: ErrorCode.UNKNOWN_SERVER_ERROR,
    bunka: ErrorCode.INVALID_RECORD,
  },
];
