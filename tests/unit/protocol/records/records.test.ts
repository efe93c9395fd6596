/** Records inside a batch (protocol/records/records.ts): decoding, and rebuilding with some removed. */
import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import {
  checkBatch,
  CompressionCodec,
  DELETE_HORIZON_BIT,
  parseBatchHeader,
} from "../../../../src/protocol/records/record-batch.ts";
import { batchSpecOf, buildBatch, decodeRecords } from "../../../../src/protocol/records/records.ts";
import { buildBatch as buildTestBatch } from "../../../support/batch-builder.ts";

const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
const T0 = 1_700_000_000_000;

function sample(): Uint8Array {
  return buildTestBatch({
    baseOffset: 100,
    producerId: 42,
    producerEpoch: 3,
    baseSequence: 7,
    transactional: true,
    records: [
      { key: "a", value: "1", timestampMs: T0 },
      { key: "b", value: null, timestampMs: T0 + 5, headers: [{ key: "h", value: "x" }] },
      { key: null, value: "3", timestampMs: T0 + 9 },
    ],
  });
}

describe("decodeRecords", () => {
  test("gives every record with its absolute offset and timestamp, null keys and values, headers as stored", () => {
    const records = decodeRecords(sample());
    expect(records.map((r) => [r.offset, r.timestampMs, text(r.key), text(r.value)])).toEqual([
      [100, T0, "a", "1"],
      [101, T0 + 5, "b", null],
      [102, T0 + 9, null, "3"],
    ]);
    expect(records[1]!.headers.length).toBeGreaterThan(1);
    expect(records[0]!.headers).toEqual(new Uint8Array([0]));
  });

  test("a records count that does not match the records present is a DecodeError", () => {
    const bytes = buildTestBatch({ records: [{ key: "a", value: "1" }], recordsCount: 2, lastOffsetDelta: 1 });
    expect(() => decodeRecords(bytes)).toThrow(DecodeError);
    const trailing = buildTestBatch({ records: [{ key: "a", value: "1" }, { key: "b", value: "2" }], recordsCount: 1, lastOffsetDelta: 0 });
    expect(() => decodeRecords(trailing)).toThrow(DecodeError);
  });
});

describe("buildBatch", () => {
  test("a subset keeps base offset, offset span, producer fields and each record's offset and timestamp", () => {
    const original = sample();
    const records = decodeRecords(original);
    const rebuilt = buildBatch(batchSpecOf(original, 0), [records[0]!, records[2]!]);
    const header = parseBatchHeader(rebuilt);
    expect([header.baseOffset, header.lastOffsetDelta, header.recordsCount]).toEqual([100, 2, 2]);
    expect([header.producerId, header.producerEpoch, header.baseSequence, header.isTransactional]).toEqual([42, 3, 7, true]);
    expect([header.baseTimestampMs, header.maxTimestampMs]).toEqual([T0, T0 + 9]);
    expect(decodeRecords(rebuilt).map((r) => [r.offset, r.timestampMs, text(r.key), text(r.value)])).toEqual([
      [100, T0, "a", "1"],
      [102, T0 + 9, null, "3"],
    ]);
    // Stored batches from the cleaner pass the stored-batch check (fewer records than the span).
    expect(checkBatch(rebuilt, 0, rebuilt.length, true)).toBe(rebuilt.length);
    expect(typeof checkBatch(rebuilt, 0, rebuilt.length)).toBe("object");
  });

  test("all records rebuilt give back the same bytes, CRC included", () => {
    const original = sample();
    expect(buildBatch(batchSpecOf(original, 0), decodeRecords(original))).toEqual(original);
  });

  test("a delete horizon goes into the base timestamp with its attribute bit; record timestamps are unchanged", () => {
    const original = sample();
    const records = decodeRecords(original);
    const rebuilt = buildBatch({ ...batchSpecOf(original, 0), deleteHorizonMs: T0 + 86_400_000 }, records);
    const header = parseBatchHeader(rebuilt);
    expect(header.attributes & DELETE_HORIZON_BIT).toBe(DELETE_HORIZON_BIT);
    expect(header.baseTimestampMs).toBe(T0 + 86_400_000);
    expect(batchSpecOf(rebuilt, 0).deleteHorizonMs).toBe(T0 + 86_400_000);
    expect(decodeRecords(rebuilt).map((r) => r.timestampMs)).toEqual([T0, T0 + 5, T0 + 9]);
  });

  test("an emptied batch is a bare header: no codec, no horizon, both timestamps the max timestamp", () => {
    const original = sample();
    const empty = buildBatch({ ...batchSpecOf(original, 0), attributes: batchSpecOf(original, 0).attributes | CompressionCodec.zstd, deleteHorizonMs: T0 }, []);
    const header = parseBatchHeader(empty);
    expect(empty.length).toBe(61);
    expect([header.recordsCount, header.compression, header.lastOffsetDelta, header.baseSequence]).toEqual([0, 0, 2, 7]);
    expect(header.attributes & DELETE_HORIZON_BIT).toBe(0);
    expect([header.baseTimestampMs, header.maxTimestampMs]).toEqual([T0 + 9, T0 + 9]);
    expect(checkBatch(empty, 0, empty.length, true)).toBe(61);
  });

  for (const [name, codec] of [
    ["gzip", CompressionCodec.gzip],
    ["zstd", CompressionCodec.zstd],
    ["snappy", CompressionCodec.snappy],
    ["lz4", CompressionCodec.lz4],
  ] as const) {
    test(`keeps the batch's codec (${name}) and decodes back`, () => {
      const original = sample();
      const spec = { ...batchSpecOf(original, 0), attributes: batchSpecOf(original, 0).attributes | codec };
      const rebuilt = buildBatch(spec, decodeRecords(original));
      expect(parseBatchHeader(rebuilt).compression).toBe(codec);
      expect(checkBatch(rebuilt, 0)).toBe(rebuilt.length);
      expect(decodeRecords(rebuilt).map((r) => text(r.key))).toEqual(["a", "b", null]);
    });
  }
});
