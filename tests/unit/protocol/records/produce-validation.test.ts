import { describe, expect, test } from "bun:test";
import { recordTimestampProblem, resolveTopicConfig } from "../../../../src/domain/topic-config.ts";
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";
import { prepareProducedBatch, type ProducedBatchOptions } from "../../../../src/protocol/records/produce-validation.ts";
import { CompressionCodec, checkBatch, parseBatchHeader, validateProduceRecordSet } from "../../../../src/protocol/records/record-batch.ts";
import { buildBatch, simpleBatch, TEST_BASE_TIMESTAMP_MS } from "../../../support/batch-builder.ts";
import { compressBatch, mixedBytes } from "../../../support/codec-inputs.ts";
import { PRODUCE_CASES } from "../../../support/produce-cases.ts";
import { decodeBatch, utf8 } from "../../../support/record-decoder.ts";

const NOW = TEST_BASE_TIMESTAMP_MS;
/** A topic with every default, so timestamp bounds are Apache 4.1's (unbounded behind, one hour ahead). */
const DEFAULT_TOPIC = resolveTopicConfig({});
const options = (overrides: Partial<ProducedBatchOptions> = {}): ProducedBatchOptions => ({
  topicPartition: "t-0",
  compacted: false,
  logAppendTime: false,
  targetCodec: "producer",
  maxBatchBytes: 1 << 20,
  recordTimestampProblem: (timestampMs, offset) => recordTimestampProblem(DEFAULT_TOPIC, timestampMs, offset, NOW),
  ...overrides,
});

function prepare(bytes: Uint8Array, overrides: Partial<ProducedBatchOptions> = {}) {
  const validation = validateProduceRecordSet(bytes);
  if (!validation.ok) throw new Error(`header refused: ${JSON.stringify(validation.problem)}`);
  return prepareProducedBatch(bytes, validation.batches[0]!, options(overrides));
}

describe("prepareProducedBatch: the records inside a produced batch", () => {
  for (const c of PRODUCE_CASES) {
    test(`${c.name}: ${c.bunka === ErrorCode.NONE ? "accepted" : `error ${c.bunka}`}`, () => {
      const bytes = c.build(NOW);
      const before = bytes.slice();
      const result = prepare(bytes, { compacted: c.topic === "compacted" });
      if (c.bunka === ErrorCode.NONE) {
        expect(result.ok).toBe(true);
        return;
      }
      if (result.ok) throw new Error("accepted");
      expect(result.errorCode).toBe(c.bunka);
      expect(result.recordErrors.map((e) => e.batchIndex)).toEqual(c.recordErrors ?? []);
      // A refused batch is left as it came.
      expect(bytes).toEqual(before);
    });
  }

  test("keyless records on a compacted topic are answered with Apache's record errors and message", () => {
    const result = prepare(buildBatch({ records: [{ key: null }, { key: "k" }, { key: null }, { key: null }, { key: null }] }), {
      compacted: true,
      topicPartition: "orders-3",
    });
    if (result.ok) throw new Error("accepted");
    const message = "Compacted topic cannot accept message without key in topic partition orders-3";
    expect(result.recordErrors).toEqual([0, 2, 3, 4].map((batchIndex) => ({ batchIndex, message })));
    expect(result.message).toBe(
      "One or more records have been rejected due to 4 record errors in total, and only showing the first three errors at most: " +
        `[RecordError(batchIndex=0, message='${message}'), RecordError(batchIndex=2, message='${message}'), RecordError(batchIndex=3, message='${message}')]`,
    );
  });

  test("timestamps out of the topic's bounds: INVALID_TIMESTAMP with Apache's message and a record error each", () => {
    // Non-default bounds are not configurable yet (topic-config refuses them); the check takes any.
    const bounded = { ...DEFAULT_TOPIC, messageTimestampBeforeMaxMs: 60_000 };
    const result = prepare(
      buildBatch({ records: [{ key: "a", timestampMs: NOW - 60_001 }, { key: "b", timestampMs: NOW }, { key: "c", timestampMs: NOW + 3_600_001 }] }),
      { recordTimestampProblem: (timestampMs, offset) => recordTimestampProblem(bounded, timestampMs, offset, NOW) },
    );
    if (result.ok) throw new Error("accepted");
    expect([result.errorCode, result.message]).toEqual([ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp"]);
    expect(result.recordErrors).toEqual([
      { batchIndex: 0, message: `Timestamp ${NOW - 60_001} of message with offset 0 is out of range. The timestamp should be within [${NOW - 60_000}, ${NOW + 3_600_000}]` },
      { batchIndex: 2, message: `Timestamp ${NOW + 3_600_001} of message with offset 2 is out of range. The timestamp should be within [${NOW - 60_000}, ${NOW + 3_600_000}]` },
    ]);
    // Exactly on the bounds is within them; without a check nothing is bounded.
    expect(prepare(buildBatch({ records: [{ key: "a", timestampMs: NOW + 3_600_000 }] })).ok).toBe(true);
    expect(prepare(buildBatch({ records: [{ key: "a", timestampMs: NOW + 9e9 }] }), { recordTimestampProblem: undefined }).ok).toBe(true);
  });

  test("a sound batch is accepted as it is: same bytes, same header", () => {
    const bytes = simpleBatch(5, { timestampMs: NOW });
    const before = bytes.slice();
    const result = prepare(bytes);
    if (!result.ok) throw new Error(result.message);
    expect(result.recordSet).toBe(bytes);
    expect(result.recompressed).toBe(false);
    expect(bytes).toEqual(before);
  });

  test("empty keys, null values, headers with null values and long fields all walk", () => {
    const big = mixedBytes(300_000, 1);
    const bytes = buildBatch({
      records: [
        { key: "", value: null, headers: [{ key: "h", value: null }, { key: "", value: "x" }] },
        { key: big, value: big, timestampMs: NOW - 5 },
        { key: "k", value: "", timestampMs: NOW + 7 },
      ],
      baseTimestampMs: NOW,
    });
    const result = prepare(bytes, { compacted: true });
    expect(result.ok).toBe(true);
  });

  test("the max timestamp becomes the largest record timestamp (CRC kept valid), as Apache sets it", () => {
    const bytes = buildBatch({ records: [{ key: "a", timestampMs: NOW + 10 }, { key: "b", timestampMs: NOW + 30 }, { key: "c", timestampMs: NOW }], maxTimestampMs: NOW + 1000 });
    const result = prepare(bytes);
    if (!result.ok) throw new Error(result.message);
    expect(result.batch.maxTimestampMs).toBe(NOW + 30);
    expect(parseBatchHeader(result.recordSet).maxTimestampMs).toBe(NOW + 30);
    expect(typeof checkBatch(result.recordSet, 0)).toBe("number");
    // On a LogAppendTime topic the log stamps it: left alone here.
    const other = buildBatch({ records: [{ key: "a", timestampMs: NOW }], maxTimestampMs: NOW + 1000 });
    const untouched = prepare(other, { logAppendTime: true });
    if (!untouched.ok) throw new Error(untouched.message);
    expect(untouched.batch.maxTimestampMs).toBe(NOW + 1000);
  });

  test("records without timestamps (-1) keep a max timestamp of -1", () => {
    const bytes = buildBatch({ records: [{ key: "a" }, { key: "b" }], baseTimestampMs: -1 });
    const result = prepare(bytes);
    if (!result.ok) throw new Error(result.message);
    expect(result.batch.maxTimestampMs).toBe(-1);
  });

  test("a timestamp delta that takes the timestamp beyond 2^53 is malformed", () => {
    const bytes = buildBatch({ records: [{ key: "a", timestampMs: NOW }, { key: "b", timestampMs: NOW + 2 ** 53 }] });
    const result = prepare(bytes);
    expect(result.ok ? "accepted" : result.errorCode).toBe(ErrorCode.INVALID_RECORD);
  });

  test("a records count that cannot fit the section is refused without walking it", () => {
    const bytes = buildBatch({ records: [{ key: "a" }], recordsCount: 1_000_000, lastOffsetDelta: 999_999 });
    const result = prepare(bytes);
    expect(result.ok ? "accepted" : result.message).toContain("cannot fit");
  });
});

describe("prepareProducedBatch: recompression to the topic's codec", () => {
  const records = Array.from({ length: 50 }, (_, i) => ({
    key: `key-${i}`,
    value: `value ${i} `.repeat(20),
    headers: [{ key: "h", value: String(i) }],
    timestampMs: NOW + (i % 7),
  }));

  for (const [from, to] of [
    ["none", "gzip"],
    ["lz4", "snappy"],
    ["snappy", "zstd"],
    ["zstd", "lz4"],
    ["gzip", "none"],
  ] as const) {
    test(`${from} -> ${to}: records re-encoded, header fields kept, CRC recomputed`, () => {
      const original = buildBatch({ records, producerId: 42, producerEpoch: 3, baseSequence: 100, transactional: true, maxTimestampMs: NOW + 99 });
      const bytes = from === "none" ? original : compressBatch(original, CompressionCodec[from]);
      const result = prepare(bytes, { targetCodec: CompressionCodec[to] });
      if (!result.ok) throw new Error(result.message);
      expect(result.recompressed).toBe(true);
      expect(typeof checkBatch(result.recordSet, 0)).toBe("number");
      const decoded = decodeBatch(result.recordSet);
      const header = decoded.header;
      expect(header.compression).toBe(CompressionCodec[to]);
      expect([header.producerId, header.producerEpoch, header.baseSequence, header.isTransactional]).toEqual([42, 3, 100, true]);
      expect([header.recordsCount, header.lastOffsetDelta, header.timestampType]).toEqual([50, 49, "create-time"]);
      // Base and max timestamps come from the records, not the producer's claim.
      expect([header.baseTimestampMs, header.maxTimestampMs]).toEqual([NOW, NOW + 6]);
      expect(decoded.records.map((r) => [r.offset, utf8(r.key), utf8(r.value), r.timestampMs, r.headers.map((h) => [h.key, utf8(h.value)])])).toEqual(
        records.map((r, i) => [i, r.key, r.value, r.timestampMs, [["h", String(i)]]]),
      );
      expect(result.batch).toEqual(parseBatchHeader(result.recordSet));
    });
  }

  test("the topic's level is used: gzip level 1 stores a larger batch than level 9, both decoding alike", () => {
    const textual = Array.from({ length: 200 }, (_, i) => ({ key: `k${i}`, value: `${i % 13} exactly once semantics `.repeat(8 + (i % 5)) }));
    const sizes = [1, 9].map((targetLevel) => {
      const result = prepare(buildBatch({ records: textual }), { targetCodec: CompressionCodec.gzip, targetLevel });
      if (!result.ok) throw new Error(result.message);
      expect(decodeBatch(result.recordSet).records.map((r) => utf8(r.value))).toEqual(textual.map((r) => r.value));
      return result.recordSet.length;
    });
    expect(sizes[0]!).toBeGreaterThan(sizes[1]!);
  });

  test("a batch already in the topic's codec, or with compression.type=producer, is not rebuilt", () => {
    const bytes = compressBatch(buildBatch({ records }), CompressionCodec.lz4);
    for (const targetCodec of [CompressionCodec.lz4, "producer"] as const) {
      const result = prepare(bytes, { targetCodec });
      if (!result.ok) throw new Error(result.message);
      expect(result.recompressed).toBe(false);
      expect(result.recordSet).toBe(bytes);
    }
  });

  test("a batch that recompression makes larger than max.message.bytes is MESSAGE_TOO_LARGE", () => {
    const noise = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: mixedBytes(2000, i) }));
    const bytes = compressBatch(buildBatch({ records: noise }), CompressionCodec.zstd);
    const result = prepare(bytes, { targetCodec: CompressionCodec.none, maxBatchBytes: bytes.length + 10 });
    expect(result.ok ? "accepted" : [result.errorCode, result.message]).toEqual([
      ErrorCode.MESSAGE_TOO_LARGE,
      expect.stringContaining("which exceeds the maximum configured size of"),
    ]);
  });

  test("keyless records on a compacted topic are refused before any recompression", () => {
    const result = prepare(buildBatch({ records: [{ key: null }] }), { compacted: true, targetCodec: CompressionCodec.gzip });
    expect(result.ok ? "accepted" : result.errorCode).toBe(ErrorCode.INVALID_RECORD);
  });
});
