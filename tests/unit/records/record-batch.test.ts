import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../src/errors/errors.ts";
import { crc32c } from "../../../src/protocol/records/crc32c.ts";
import {
  BATCH_HEADER_BYTES,
  baseOffsetAt,
  buildControlBatch,
  checkBatch,
  CONTROL_BATCH_BYTES,
  errorCodeOfProblem,
  findRecordInUncompressedBatch,
  lastSequenceOf,
  parseBatchHeader,
  parseControlRecord,
  parseRecordSet,
  setBaseOffset,
  setMaxTimestamp,
  setPartitionLeaderEpoch,
  validateProduceRecordSet,
  writeInt32,
  type BatchProblem,
} from "../../../src/protocol/records/record-batch.ts";
import { buildBatch, concatBytes, simpleBatch, TEST_BASE_TIMESTAMP_MS } from "../../support/batch-builder.ts";

function hex(s: string): Uint8Array {
  // "#" starts a comment that runs to the end of the line.
  const clean = s.replace(/#[^\n]*/g, "").replace(/\s+/g, "");
  return Uint8Array.from({ length: clean.length / 2 }, (_, i) => parseInt(clean.slice(i * 2, i * 2 + 2), 16));
}

function problemOf(bytes: Uint8Array, options = {}): BatchProblem {
  const result = validateProduceRecordSet(bytes, options);
  if (result.ok) throw new Error("expected a problem");
  return result.problem;
}

describe("header parsing", () => {
  test("reads every field of a producer batch", () => {
    const batch = buildBatch({
      records: [{ key: "a", value: "1", timestampMs: TEST_BASE_TIMESTAMP_MS }, { value: "2", timestampMs: TEST_BASE_TIMESTAMP_MS + 5 }],
      producerId: 9_000_000_001,
      producerEpoch: 3,
      baseSequence: 17,
      transactional: true,
      partitionLeaderEpoch: 4,
    });
    const h = parseBatchHeader(batch);
    expect(h).toMatchObject({
      position: 0,
      sizeBytes: batch.length,
      baseOffset: 0,
      partitionLeaderEpoch: 4,
      magic: 2,
      compression: 0,
      timestampType: "create-time",
      isTransactional: true,
      isControl: false,
      lastOffsetDelta: 1,
      baseTimestampMs: TEST_BASE_TIMESTAMP_MS,
      maxTimestampMs: TEST_BASE_TIMESTAMP_MS + 5,
      producerId: 9_000_000_001,
      producerEpoch: 3,
      baseSequence: 17,
      recordsCount: 2,
    });
    expect(h.crc).toBe(crc32c(batch, 21));
    expect(lastSequenceOf(h)).toBe(18);
  });

  test("last sequence wraps after Int32.MAX", () => {
    expect(lastSequenceOf({ baseSequence: 0x7fffffff - 1, lastOffsetDelta: 3 })).toBe(1);
    expect(lastSequenceOf({ baseSequence: -1, lastOffsetDelta: 3 })).toBe(-1);
  });
});

describe("produce validation", () => {
  test("accepts a good batch and returns its header", () => {
    const batch = simpleBatch(3, { producerId: 1, producerEpoch: 0, baseSequence: 0 });
    const result = validateProduceRecordSet(batch);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.batches.map((b) => b.recordsCount)).toEqual([3]);
  });

  test("several batches only when allowed (Apache takes exactly one v2 batch)", () => {
    const set = concatBytes(simpleBatch(1), simpleBatch(2));
    expect(problemOf(set)).toMatchObject({ kind: "multiple-batches", position: simpleBatch(1).length });
    const result = validateProduceRecordSet(set, { allowMultipleBatches: true });
    expect(result.ok && result.batches.map((b) => b.position)).toEqual([0, simpleBatch(1).length]);
  });

  test("empty record set", () => {
    expect(problemOf(new Uint8Array(0))).toEqual({ kind: "no-batches" });
  });

  test("trailing partial batch is refused, not trimmed", () => {
    const batch = simpleBatch(1);
    expect(problemOf(concatBytes(batch, batch.subarray(0, 30)), { allowMultipleBatches: true })).toMatchObject({ kind: "truncated", position: batch.length });
    expect(problemOf(concatBytes(batch, batch.subarray(0, 5)))).toMatchObject({ kind: "truncated" });
    expect(problemOf(batch.subarray(0, batch.length - 1))).toMatchObject({ kind: "truncated", neededBytes: batch.length });
  });

  test("length below the v2 header", () => {
    const batch = simpleBatch(1);
    writeInt32(batch, 8, 20);
    const p = problemOf(batch);
    expect(p).toMatchObject({ kind: "invalid-length", batchLength: 20 });
    expect(errorCodeOfProblem(p)).toBe(2);
  });

  test("magic other than 2", () => {
    const v1 = buildBatch({ records: [{ value: "x" }], magic: 1 });
    expect(problemOf(v1)).toMatchObject({ kind: "unsupported-magic", magic: 1 });
    expect(errorCodeOfProblem(problemOf(v1))).toBe(87);
    const v7 = buildBatch({ records: [{ value: "x" }], magic: 7 });
    expect(errorCodeOfProblem(problemOf(v7))).toBe(2);
  });

  test("CRC mismatch is CORRUPT_MESSAGE", () => {
    const p = problemOf(simpleBatch(2, { corruptCrc: true }));
    expect(p.kind).toBe("crc-mismatch");
    expect(errorCodeOfProblem(p)).toBe(2);
    const flipped = simpleBatch(2);
    flipped[flipped.length - 1]! ^= 1;
    expect(problemOf(flipped).kind).toBe("crc-mismatch");
  });

  test("codec ids 5..7 are refused, 0..4 accepted", () => {
    for (let codec = 0; codec <= 4; codec++) expect(validateProduceRecordSet(simpleBatch(1, { compressionCodec: codec })).ok).toBe(true);
    const p = problemOf(simpleBatch(1, { compressionCodec: 5 }));
    expect(p).toMatchObject({ kind: "invalid-compression", codec: 5 });
    expect(errorCodeOfProblem(p)).toBe(76);
  });

  test("records count must be >= 1 and equal lastOffsetDelta + 1", () => {
    expect(problemOf(simpleBatch(2, { lastOffsetDelta: 0 }))).toMatchObject({ kind: "invalid-record-count", recordsCount: 2, lastOffsetDelta: 0 });
    expect(problemOf(simpleBatch(2, { recordsCount: 3 }))).toMatchObject({ kind: "invalid-record-count" });
    const zero = problemOf(simpleBatch(1, { recordsCount: 0, lastOffsetDelta: -1 }));
    expect(zero.kind).toBe("invalid-record-count");
    expect(errorCodeOfProblem(zero)).toBe(87);
  });

  test("client batches must have base offset 0", () => {
    const p = problemOf(simpleBatch(1, { baseOffset: 5 }));
    expect(p).toMatchObject({ kind: "nonzero-base-offset", baseOffset: 5 });
    expect(errorCodeOfProblem(p)).toBe(87);
  });

  test("control batches from clients", () => {
    const p = problemOf(buildControlBatch({ producerId: 1, producerEpoch: 0, commit: true, coordinatorEpoch: 0, timestampMs: 1 }));
    expect(p.kind).toBe("control-batch-from-client");
    expect(errorCodeOfProblem(p)).toBe(87);
  });

  test("a producer id needs a sequence", () => {
    const p = problemOf(simpleBatch(1, { producerId: 5, producerEpoch: 0, baseSequence: -1 }));
    expect(p).toMatchObject({ kind: "invalid-sequence", producerId: 5, baseSequence: -1 });
    expect(errorCodeOfProblem(p)).toBe(87);
  });

  test("LogAppendTime set by a client is INVALID_TIMESTAMP", () => {
    const p = problemOf(simpleBatch(1, { timestampType: "log-append-time" }));
    expect(p.kind).toBe("log-append-time-from-client");
    expect(errorCodeOfProblem(p)).toBe(32);
  });

  test("max batch size is MESSAGE_TOO_LARGE", () => {
    const batch = simpleBatch(10);
    const p = problemOf(batch, { maxBatchBytes: batch.length - 1 });
    expect(p).toMatchObject({ kind: "batch-too-large", sizeBytes: batch.length });
    expect(errorCodeOfProblem(p)).toBe(10);
    expect(validateProduceRecordSet(batch, { maxBatchBytes: batch.length }).ok).toBe(true);
  });

  test("parseRecordSet splits any number of sound batches and reports the first problem", () => {
    const set = concatBytes(simpleBatch(1, { baseOffset: 7 }), simpleBatch(2), buildControlBatch({ producerId: 1, producerEpoch: 0, commit: false, coordinatorEpoch: 0, timestampMs: 1 }));
    const parsed = parseRecordSet(set);
    expect(parsed.ok && parsed.batches.map((b) => [b.baseOffset, b.recordsCount, b.isControl])).toEqual([[7, 1, false], [0, 2, false], [0, 1, true]]);
    expect(parseRecordSet(set.subarray(0, set.length - 1))).toMatchObject({ ok: false, problem: { kind: "truncated" } });
    expect(parseRecordSet(new Uint8Array(0))).toEqual({ ok: true, batches: [] });
  });

  test("checkBatch reports the problem of a batch inside a larger buffer", () => {
    const set = concatBytes(simpleBatch(1), simpleBatch(2, { corruptCrc: true }));
    expect(checkBatch(set, 0)).toBe(simpleBatch(1).length);
    expect(checkBatch(set, simpleBatch(1).length)).toMatchObject({ kind: "crc-mismatch", position: simpleBatch(1).length });
    expect(checkBatch(set, 0, 20)).toMatchObject({ kind: "truncated" });
  });
});

describe("in-place rewrites", () => {
  test("base offset and leader epoch keep the CRC valid", () => {
    const batch = simpleBatch(3);
    setBaseOffset(batch, 0, 1234567890123);
    setPartitionLeaderEpoch(batch, 0, 9);
    expect(checkBatch(batch, 0)).toBe(batch.length);
    expect(baseOffsetAt(batch, 0)).toBe(1234567890123);
    expect(parseBatchHeader(batch).partitionLeaderEpoch).toBe(9);
  });

  test("LogAppendTime sets the bit and max timestamp and recomputes the CRC", () => {
    const batch = simpleBatch(3, { transactional: true, producerId: 1, producerEpoch: 0, baseSequence: 0 });
    expect(setMaxTimestamp(batch, 0, "log-append-time", 1_800_000_000_000)).toBe(true);
    const h = parseBatchHeader(batch);
    expect(h.timestampType).toBe("log-append-time");
    expect(h.isTransactional).toBe(true);
    expect(h.maxTimestampMs).toBe(1_800_000_000_000);
    expect(checkBatch(batch, 0)).toBe(batch.length);
    // Unchanged values: nothing written.
    expect(setMaxTimestamp(batch, 0, "log-append-time", 1_800_000_000_000)).toBe(false);
  });
});

describe("control batches", () => {
  test("commit marker is byte-exact with Apache", () => {
    const bytes = buildControlBatch({
      producerId: 4242,
      producerEpoch: 7,
      commit: true,
      coordinatorEpoch: 5,
      timestampMs: 1_700_000_000_000,
      baseOffset: 0,
    });
    const expected = hex(`
      0000000000000000  # baseOffset 0
      00000042          # batchLength 66 = 78 - 12
      ffffffff          # partitionLeaderEpoch -1 (the log sets it on append)
      02                # magic
      308a4952          # crc32c of everything below
      0030              # attributes: transactional (0x10) + control (0x20), CreateTime, no compression
      00000000          # lastOffsetDelta 0
      0000018bcfe56800  # baseTimestamp 1700000000000
      0000018bcfe56800  # maxTimestamp
      0000000000001092  # producerId 4242
      0007              # producerEpoch 7
      ffffffff          # baseSequence -1
      00000001          # recordsCount 1
      20                # record length 16 (zigzag varint)
      00                # record attributes
      00                # timestampDelta 0
      00                # offsetDelta 0
      08                # key length 4
      0000 0001         # key: version 0, type 1 (commit)
      0c                # value length 6
      0000 00000005     # value: version 0, coordinatorEpoch 5
      00                # header count 0
    `);
    expect(bytes.length).toBe(CONTROL_BATCH_BYTES);
    expect([...bytes]).toEqual([...expected]);
  });

  test("abort marker differs only in the type and the CRC", () => {
    const commit = buildControlBatch({ producerId: 4242, producerEpoch: 7, commit: true, coordinatorEpoch: 5, timestampMs: 1_700_000_000_000 });
    const abort = buildControlBatch({ producerId: 4242, producerEpoch: 7, commit: false, coordinatorEpoch: 5, timestampMs: 1_700_000_000_000 });
    const differing = [...abort.keys()].filter((i) => abort[i] !== commit[i]);
    expect(differing.every((i) => (i >= 17 && i < 21) || i === BATCH_HEADER_BYTES + 8)).toBe(true);
    expect([...abort.subarray(17, 21)]).toEqual([0xc4, 0xb4, 0x9f, 0x1a]);
    expect(abort[BATCH_HEADER_BYTES + 8]).toBe(0);
  });

  test("markers pass the structural check and parse back", () => {
    const bytes = buildControlBatch({ producerId: 77, producerEpoch: 2, commit: false, coordinatorEpoch: 12, timestampMs: 5, partitionLeaderEpoch: 3 });
    expect(checkBatch(bytes, 0)).toBe(bytes.length);
    const h = parseBatchHeader(bytes);
    expect(h).toMatchObject({ isControl: true, isTransactional: true, baseSequence: -1, producerId: 77, producerEpoch: 2, partitionLeaderEpoch: 3, attributes: 0x30 });
    expect(parseControlRecord(bytes)).toEqual({ version: 0, typeCode: 0, type: "abort", coordinatorEpoch: 12 });
    const commit = buildControlBatch({ producerId: 77, producerEpoch: 2, commit: true, coordinatorEpoch: 13, timestampMs: 5 });
    expect(parseControlRecord(concatBytes(simpleBatch(1), commit), simpleBatch(1).length)).toMatchObject({ type: "commit", coordinatorEpoch: 13 });
  });

  test("parsing a data batch as a control record is a DecodeError", () => {
    expect(() => parseControlRecord(simpleBatch(1))).toThrow(DecodeError);
  });
});

describe("record walking for timestamp lookups", () => {
  test("visits offsets and absolute timestamps", () => {
    const batch = buildBatch({
      baseOffset: 100,
      records: [{ value: "a", timestampMs: 1000 }, { value: "b", timestampMs: 3000 }, { value: "c", timestampMs: 2000 }],
    });
    const seen: [number, number][] = [];
    findRecordInUncompressedBatch(batch, 0, (offset, ts) => {
      seen.push([offset, ts]);
      return false;
    });
    expect(seen).toEqual([[100, 1000], [101, 3000], [102, 2000]]);
  });
});
