/**
 * RecordScan and buildBatchFromScan (protocol/records/record-scan.ts) against decodeRecords and buildBatch
 * (records.ts): the same records, the same errors, the same rebuilt bytes.
 */
import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import { CompressionCodec, parseBatchHeader, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT } from "../../../../src/protocol/records/record-batch.ts";
import { buildBatchFromScan, RecordScan } from "../../../../src/protocol/records/record-scan.ts";
import {
  batchSpecOf,
  buildBatch,
  decodeRecords,
  decodeRecordsSection,
  type BatchSpec,
  type KafkaRecord,
} from "../../../../src/protocol/records/records.ts";

function prng(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return Math.floor((state / 4294967296) * n);
  };
}

const T0 = 1_700_000_000_000;
const CODECS = [CompressionCodec.none, CompressionCodec.gzip, CompressionCodec.snappy, CompressionCodec.lz4, CompressionCodec.zstd];

function randomBytes(random: (n: number) => number, length: number): Uint8Array {
  return Uint8Array.from({ length }, () => random(256));
}

/** A batch of random records (null keys and values, headers, timestamps before and after the first). */
function randomBatch(random: (n: number) => number): { bytes: Uint8Array; records: KafkaRecord[] } {
  const count = 1 + random(60);
  const baseOffset = random(1_000_000);
  const records: KafkaRecord[] = [];
  for (let i = 0; i < count; i++) {
    const headerCount = random(4) === 0 ? 1 + random(2) : 0;
    const headers: number[] = [headerCount * 2];
    // Zigzag varints: a key of length 1 ("h"), then a null value (-1) or one of length 1 ("x").
    for (let h = 0; h < headerCount; h++) headers.push(2, 104, ...(random(2) === 0 ? [1] : [2, 120]));
    records.push({
      attributes: 0,
      offset: baseOffset + i,
      timestampMs: T0 + random(100_000) - 50_000,
      key: random(10) === 0 ? null : randomBytes(random, random(30)),
      value: random(8) === 0 ? null : randomBytes(random, random(400)),
      headers: Uint8Array.from(headers),
    });
  }
  const spec: BatchSpec = {
    baseOffset,
    lastOffsetDelta: count - 1 + random(3),
    partitionLeaderEpoch: random(10),
    attributes: CODECS[random(CODECS.length)]! | (random(3) === 0 ? TRANSACTIONAL_BIT : 0) | (random(5) === 0 ? TIMESTAMP_TYPE_BIT : 0),
    producerId: random(1000),
    producerEpoch: random(5),
    baseSequence: random(1000),
    maxTimestampMs: T0 + 77,
    deleteHorizonMs: random(4) === 0 ? T0 + 86_400_000 : -1,
  };
  return { bytes: buildBatch(spec, records), records };
}

describe("RecordScan", () => {
  test("finds every record decodeRecords finds, in every codec", () => {
    const random = prng(3);
    const scan = new RecordScan();
    for (let k = 0; k < 300; k++) {
      const { bytes } = randomBatch(random);
      const decoded = decodeRecords(bytes, 0);
      scan.scan(bytes, 0);
      expect(scan.count).toBe(decoded.length);
      decoded.forEach((record, i) => {
        expect(scan.offsets[i]).toBe(record.offset);
        expect(scan.timestampsMs[i]).toBe(record.timestampMs);
        const keyLength = scan.keyLengths[i]!;
        const key = keyLength < 0 ? null : scan.section.subarray(scan.keyStarts[i]!, scan.keyStarts[i]! + keyLength);
        expect(key).toEqual(record.key);
        expect(scan.valueNull[i]).toBe(record.value === null ? 1 : 0);
        expect((scan.attributes[i]! << 24) >> 24).toBe(record.attributes);
      });
    }
  });

  test("refuses what decodeRecordsSection refuses, and accepts what it accepts", () => {
    const random = prng(5);
    const scan = new RecordScan();
    let refused = 0;
    for (let k = 0; k < 3000; k++) {
      const { bytes } = randomBatch(random);
      const header = { ...parseBatchHeader(bytes, 0), recordsCount: 0 };
      const section = plainSection(bytes);
      const damaged = section.slice();
      for (let f = 0; f < 1 + random(3); f++) damaged[random(damaged.length)] = random(256);
      header.recordsCount = parseBatchHeader(bytes, 0).recordsCount + (random(6) === 0 ? random(3) - 1 : 0);
      const outcome = (run: () => unknown) => {
        try {
          run();
          return "ok";
        } catch (error) {
          expect(error).toBeInstanceOf(DecodeError);
          return (error as Error).message;
        }
      };
      const expected = outcome(() => decodeRecordsSection(header, damaged));
      expect(outcome(() => scan.scanSection(header, damaged))).toBe(expected);
      if (expected !== "ok") refused++;
      else expect(scan.count).toBe(header.recordsCount);
    }
    expect(refused).toBeGreaterThan(500);
  });
});

/** The decompressed records section of a batch, rebuilt uncompressed (the same records). */
function plainSection(bytes: Uint8Array): Uint8Array {
  const spec = batchSpecOf(bytes, 0);
  const plain = buildBatch({ ...spec, attributes: spec.attributes & ~7 }, decodeRecords(bytes, 0));
  return plain.subarray(61);
}

describe("buildBatchFromScan", () => {
  test("writes the bytes buildBatch writes for the same kept records, horizons and codecs", () => {
    const random = prng(9);
    const scan = new RecordScan();
    const kept = new Int32Array(64);
    for (let k = 0; k < 600; k++) {
      const { bytes } = randomBatch(random);
      const records = decodeRecords(bytes, 0);
      scan.scan(bytes, 0);
      const keepAll = random(5) === 0;
      let keptCount = 0;
      const keptRecords: KafkaRecord[] = [];
      records.forEach((record, i) => {
        if (keepAll || random(3) !== 0) {
          kept[keptCount++] = i;
          keptRecords.push(record);
        }
      });
      const spec = batchSpecOf(bytes, 0);
      const horizons = [spec.deleteHorizonMs, -1, T0 + 123_456];
      const rebuilt = { ...spec, deleteHorizonMs: horizons[random(3)]! };
      const expected = buildBatch(rebuilt, keptRecords);
      expect(Buffer.compare(buildBatchFromScan(rebuilt, scan, kept, keptCount), expected)).toBe(0);
    }
  });
});
