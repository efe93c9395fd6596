import { describe, expect, test } from "bun:test";
import { ConfigError } from "../../../../src/errors/errors.ts";
import { buildControlBatch, checkBatch, parseBatchHeader, parseControlRecord } from "../../../../src/protocol/records/record-batch.ts";
import { PartitionLog, type LogConfig } from "../../../../src/storage/log/partition-log.ts";
import { buildBatch, simpleBatch, TEST_BASE_TIMESTAMP_MS } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";
import { DIR, readAll, segmentPath, splitBatches, testConfig } from "./support.ts";

async function openLog(overrides: Partial<LogConfig> = {}, fs = new MemoryFs(), clock = new ManualClock()) {
  const log = await PartitionLog.open(fs, DIR, testConfig(overrides), clock);
  return { fs, clock, log };
}

/** Appends `count` batches of `records` records each; returns the stored bytes of each batch. */
async function appendBatches(log: PartitionLog, count: number, records = 3, valueBytes = 20): Promise<Uint8Array[]> {
  const stored: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const batch = simpleBatch(records, { valueBytes });
    log.append(batch);
    stored.push(batch);
  }
  await log.flush();
  return stored;
}

describe("append and read", () => {
  test("assigns contiguous offsets from the log end and rewrites base offsets in place", async () => {
    const { log } = await openLog();
    const a = log.append(simpleBatch(3));
    const b = log.append(simpleBatch(1));
    expect([a.baseOffset, a.lastOffset, b.baseOffset, b.lastOffset]).toEqual([0, 2, 3, 3]);
    expect(a.logAppendTimeMs).toBe(-1);
    expect(log.logEndOffset).toBe(4);
    await b.written;
    expect(log.writtenEndOffset).toBe(4);
    const result = await log.read(0, 1 << 20);
    expect(result.kind).toBe("records");
    if (result.kind !== "records") return;
    const batches = splitBatches(result.bytes);
    expect(batches.map((x) => [x.baseOffset, x.lastOffset])).toEqual([[0, 2], [3, 3]]);
    for (const batch of batches) expect(checkBatch(batch.bytes, 0)).toBe(batch.bytes.length);
    expect(result.firstOffset).toBe(0);
    expect(result.nextOffset).toBe(4);
    await log.close();
  });

  test("the batch containing the fetch offset comes first, as Kafka does", async () => {
    const { log } = await openLog();
    await appendBatches(log, 3, 5);
    const result = await log.read(7, 1 << 20);
    if (result.kind !== "records") throw new Error(result.kind);
    expect(result.firstOffset).toBe(5);
    expect(splitBatches(result.bytes)[0]!.lastOffset).toBe(9);
    await log.close();
  });

  test("reads across segment rolls return every batch exactly as appended", async () => {
    const { log } = await openLog({ segmentBytes: 1000 });
    const stored = await appendBatches(log, 40, 2, 30);
    expect(log.segmentCount).toBeGreaterThan(5);
    // Every segment but the active one is within segment.bytes.
    const all = await readAll(log, 300);
    expect(all.map((b) => b.bytes)).toEqual(stored);
    // Each read comes from one segment only.
    const bases = log.segmentBaseOffsets;
    const second = await log.read(bases[1]!, 1 << 20);
    if (second.kind !== "records") throw new Error(second.kind);
    expect(second.nextOffset).toBe(bases[2]!);
    await log.close();
  });

  test("a read position comes from the sparse index, landing mid-segment", async () => {
    const { fs, log } = await openLog({ segmentBytes: 1 << 20, indexIntervalBytes: 256 });
    const stored = await appendBatches(log, 100, 1, 40);
    const batchBytes = stored[0]!.length;
    fs.log.length = 0;
    const result = await log.read(73, 1);
    if (result.kind !== "records") throw new Error(result.kind);
    expect(splitBatches(result.bytes).map((b) => b.baseOffset)).toEqual([]);
    const withOne = await log.read(73, 1, { minOneBatch: true });
    if (withOne.kind !== "records") throw new Error(withOne.kind);
    expect(withOne.bytes).toEqual(stored[73]!);
    const reads = fs.log.filter((line) => line.startsWith(`read ${segmentPath(0)}`));
    const firstPosition = Number(reads[0]!.split("@")[1]);
    // The index put the read within one interval (plus a batch) before batch 73.
    expect(firstPosition).toBeGreaterThan(0);
    expect(firstPosition).toBeLessThanOrEqual(73 * batchBytes);
    expect(73 * batchBytes - firstPosition).toBeLessThanOrEqual(256 + batchBytes);
    // Every offset resolves to its own batch through the index.
    for (const offset of [0, 1, 6, 7, 50, 98, 99]) {
      const r = await log.read(offset, 1, { minOneBatch: true });
      if (r.kind !== "records") throw new Error(r.kind);
      expect(r.bytes).toEqual(stored[offset]!);
    }
    await log.close();
  });

  test("a consumer reading on from where it stopped needs one read call", async () => {
    const { fs, log } = await openLog({ segmentBytes: 1 << 20, indexIntervalBytes: 4096 });
    await appendBatches(log, 50, 1, 40);
    const first = await log.read(0, 500);
    if (first.kind !== "records") throw new Error(first.kind);
    fs.log.length = 0;
    const next = await log.read(first.nextOffset, 500);
    if (next.kind !== "records") throw new Error(next.kind);
    expect(next.firstOffset).toBe(first.nextOffset);
    expect(fs.log.filter((line) => line.startsWith("read ")).length).toBe(1);
    await log.close();
  });

  test("maxBytes: whole batches only; the first batch may exceed it when minOneBatch", async () => {
    const { log } = await openLog({ segmentBytes: 1 << 20 });
    const stored = await appendBatches(log, 4, 2, 50);
    const size = stored[0]!.length;
    const two = await log.read(0, 2 * size + size - 1);
    if (two.kind !== "records") throw new Error(two.kind);
    expect(splitBatches(two.bytes).length).toBe(2);
    expect(two.nextOffset).toBe(4);
    const none = await log.read(0, size - 1);
    if (none.kind !== "records") throw new Error(none.kind);
    expect(none.bytes.length).toBe(0);
    expect(none.nextOffset).toBe(0);
    const one = await log.read(0, size - 1, { minOneBatch: true });
    if (one.kind !== "records") throw new Error(one.kind);
    expect(one.bytes).toEqual(stored[0]!);
    await log.close();
  });

  test("upToOffset stops before batches that reach it", async () => {
    const { log } = await openLog({ segmentBytes: 1 << 20 });
    await appendBatches(log, 4, 2);
    const result = await log.read(0, 1 << 20, { upToOffset: 4 });
    if (result.kind !== "records") throw new Error(result.kind);
    expect(result.nextOffset).toBe(4);
    const nothing = await log.read(4, 1 << 20, { upToOffset: 4 });
    if (nothing.kind !== "records") throw new Error(nothing.kind);
    expect(nothing.bytes.length).toBe(0);
    await log.close();
  });

  test("offsets outside [logStartOffset, logEndOffset] are out of range; the end itself is empty", async () => {
    const { log } = await openLog();
    await appendBatches(log, 2, 2);
    expect(await log.read(5, 100)).toEqual({ kind: "offset-out-of-range", logStartOffset: 0, logEndOffset: 4 });
    expect(await log.read(-1, 100)).toMatchObject({ kind: "offset-out-of-range" });
    expect(await log.read(4, 100)).toEqual({ kind: "records", bytes: new Uint8Array(0), firstOffset: -1, nextOffset: 4 });
    await log.close();
  });

  test("LogAppendTime stamps the batch, keeps its CRC valid and reports the time", async () => {
    const { log, clock } = await openLog();
    clock.setNowMs(1_800_000_000_000);
    const batch = simpleBatch(2, { producerId: 1, producerEpoch: 0, baseSequence: 0 });
    const result = log.append(batch, { timestampType: "log-append-time", partitionLeaderEpoch: 3 });
    expect(result.logAppendTimeMs).toBe(1_800_000_000_000);
    await result.written;
    const read = await log.read(0, 1 << 20);
    if (read.kind !== "records") throw new Error(read.kind);
    const header = parseBatchHeader(read.bytes);
    expect(header).toMatchObject({ timestampType: "log-append-time", maxTimestampMs: 1_800_000_000_000, partitionLeaderEpoch: 3 });
    expect(checkBatch(read.bytes, 0)).toBe(read.bytes.length);
    await log.close();
  });

  test("control batches are appended like any batch and read back", async () => {
    const { log } = await openLog();
    log.append(simpleBatch(2, { producerId: 7, producerEpoch: 1, baseSequence: 0, transactional: true }));
    const marker = log.append(buildControlBatch({ producerId: 7, producerEpoch: 1, commit: true, coordinatorEpoch: 4, timestampMs: 5 }));
    expect(marker.baseOffset).toBe(2);
    await marker.written;
    const read = await log.read(2, 1 << 20);
    if (read.kind !== "records") throw new Error(read.kind);
    expect(parseControlRecord(read.bytes)).toMatchObject({ type: "commit", coordinatorEpoch: 4 });
    await log.close();
  });

  test("segment.ms rolls at the first append after the segment got old", async () => {
    const { log, clock } = await openLog({ segmentBytes: 1 << 20, segmentMs: 60_000 });
    log.append(simpleBatch(1));
    clock.advance(59_999);
    log.append(simpleBatch(1));
    expect(log.segmentCount).toBe(1);
    clock.advance(1);
    log.append(simpleBatch(1));
    expect(log.segmentBaseOffsets).toEqual([0, 2]);
    await log.flush();
    await log.close();
  });

  test("onAppend fires when written and durable ends advance", async () => {
    const { log } = await openLog();
    const seen: [number, number][] = [];
    const off = log.onAppend(() => seen.push([log.writtenEndOffset, log.durableEndOffset]));
    const r = log.append(simpleBatch(2));
    await r.written;
    await log.flush();
    off();
    log.append(simpleBatch(1));
    await log.flush();
    expect(seen).toEqual([[2, 0], [2, 2]]);
    await log.close();
  });

  test("refuses partial batches and bad configs", async () => {
    const { log } = await openLog();
    expect(() => log.append(simpleBatch(1).subarray(0, 40))).toThrow(RangeError);
    expect(() => log.append(new Uint8Array(0))).toThrow(RangeError);
    await log.close();
    expect(() => log.append(simpleBatch(1))).toThrow(/closed/);
    await expect(openLog({ segmentBytes: 0 })).rejects.toThrow(ConfigError);
    await expect(openLog({ retentionMs: -5 })).rejects.toThrow(ConfigError);
  });
});

describe("timestamps", () => {
  function timedBatch(timestamps: number[]): Uint8Array {
    return buildBatch({ records: timestamps.map((t, i) => ({ value: `v${i}`, timestampMs: t })) });
  }

  test("offsetForTimestamp finds the first record at or after the time, across segments", async () => {
    const { fs, log } = await openLog({ segmentBytes: 600, indexIntervalBytes: 100 });
    const t = TEST_BASE_TIMESTAMP_MS;
    // Batch i holds offsets 3i..3i+2 with timestamps t + 10i + {0, 5, 2}: not monotonic inside a batch.
    for (let i = 0; i < 30; i++) log.append(timedBatch([t + 10 * i, t + 10 * i + 5, t + 10 * i + 2]));
    await log.flush();
    expect(log.segmentCount).toBeGreaterThan(2);
    expect(await log.offsetForTimestamp(t - 1000)).toEqual({ offset: 0, timestampMs: t });
    expect(await log.offsetForTimestamp(t + 103)).toEqual({ offset: 31, timestampMs: t + 105 });
    expect(await log.offsetForTimestamp(t + 110)).toEqual({ offset: 33, timestampMs: t + 110 });
    expect(await log.offsetForTimestamp(t + 291)).toEqual({ offset: 88, timestampMs: t + 295 });
    expect(await log.offsetForTimestamp(t + 296)).toBeUndefined();
    expect(await log.maxTimestampOffset()).toEqual({ offset: 88, timestampMs: t + 295 });
    // After a clean restart the inactive segments answer from their index files.
    await log.close();
    const reopened = await PartitionLog.open(fs, DIR, testConfig({ segmentBytes: 600, indexIntervalBytes: 100 }), new ManualClock());
    expect(await reopened.offsetForTimestamp(t + 103)).toEqual({ offset: 31, timestampMs: t + 105 });
    expect(await reopened.maxTimestampOffset()).toEqual({ offset: 88, timestampMs: t + 295 });
    await reopened.close();
  });

  test("a compressed batch answers with its base offset and max timestamp", async () => {
    const { log } = await openLog();
    const t = TEST_BASE_TIMESTAMP_MS;
    log.append(timedBatch([t, t + 1]));
    log.append(buildBatch({ records: [{ value: "x", timestampMs: t + 10 }, { value: "y", timestampMs: t + 20 }], compressionCodec: 1 }));
    await log.flush();
    expect(await log.offsetForTimestamp(t + 15)).toEqual({ offset: 2, timestampMs: t + 20 });
    await log.close();
  });

  test("a LogAppendTime batch answers with its first offset at or after the log start", async () => {
    const { log, clock } = await openLog();
    log.append(timedBatch([1, 2, 3]), { timestampType: "log-append-time" });
    await log.flush();
    expect(await log.offsetForTimestamp(clock.nowMs())).toEqual({ offset: 0, timestampMs: clock.nowMs() });
    await log.deleteRecordsBefore(1);
    expect(await log.offsetForTimestamp(0)).toEqual({ offset: 1, timestampMs: clock.nowMs() });
    await log.close();
  });

  test("an empty log has no timestamps", async () => {
    const { log } = await openLog();
    expect(await log.offsetForTimestamp(0)).toBeUndefined();
    expect(await log.maxTimestampOffset()).toBeUndefined();
    await log.close();
  });
});

describe("retention and DeleteRecords", () => {
  test("retention.ms deletes whole old segments from the front, never the data after them", async () => {
    const { fs, log, clock } = await openLog({ segmentBytes: 500, retentionMs: 60_000 });
    const t = clock.nowMs();
    for (let i = 0; i < 20; i++) log.append(simpleBatch(2, { valueBytes: 30, timestampMs: i < 10 ? t - 120_000 : t }));
    await log.flush();
    const before = log.segmentBaseOffsets;
    const result = await log.enforceRetention(clock.nowMs());
    expect(result.deletedSegments).toBeGreaterThan(0);
    expect(log.logStartOffset).toBe(result.logStartOffset);
    // Only segments whose newest batch is old went; the first young batch (offset 20) is still there.
    expect(log.logStartOffset).toBeLessThanOrEqual(20);
    expect(log.segmentBaseOffsets).toEqual(before.filter((b) => b >= log.logStartOffset));
    for (const base of before.filter((b) => b < log.logStartOffset)) {
      expect(await fs.stat(segmentPath(base))).toBeUndefined();
      expect(await fs.stat(segmentPath(base, "index"))).toBeUndefined();
    }
    expect(await log.read(0, 100)).toMatchObject({ kind: "offset-out-of-range" });
    const all = await readAll(log);
    expect(all.at(-1)!.lastOffset).toBe(39);
    await log.close();
  });

  test("retention.bytes deletes whole segments while the rest stays at least that large (as Apache)", async () => {
    const { log, clock } = await openLog({ segmentBytes: 500, retentionBytes: 1200 });
    await appendBatches(log, 30, 2, 30);
    let result;
    do result = await log.enforceRetention(clock.nowMs());
    while (result.more);
    // Deleting one more segment would take the log below retention.bytes.
    expect(log.sizeBytes).toBeGreaterThanOrEqual(1200);
    expect(log.sizeBytes).toBeLessThan(1200 + 500);
    expect(log.logStartOffset).toBe(log.segmentBaseOffsets[0]!);
    await log.close();
  });

  test("retention deletes a bounded number of segments per call", async () => {
    const { log, clock } = await openLog({ segmentBytes: 200, retentionBytes: 0 });
    await appendBatches(log, 40, 1, 30);
    const segments = log.segmentCount;
    const first = await log.enforceRetention(clock.nowMs());
    expect(first.deletedSegments).toBe(8);
    expect(first.more).toBe(true);
    let total = first.deletedSegments;
    for (let r = first; r.more; ) {
      r = await log.enforceRetention(clock.nowMs());
      total += r.deletedSegments;
    }
    // Everything expired: the active segment was rolled and deleted too; an empty segment remains.
    expect(total).toBe(segments);
    expect(log.segmentBaseOffsets).toEqual([log.logEndOffset]);
    expect(log.logStartOffset).toBe(log.logEndOffset);
    const next = log.append(simpleBatch(1));
    expect(next.baseOffset).toBe(40);
    await log.flush();
    await log.close();
  });

  test("a read in flight keeps a deleted segment's file until it is done", async () => {
    const { fs, log, clock } = await openLog({ segmentBytes: 300, retentionBytes: 0 });
    const stored = await appendBatches(log, 10, 1, 30);
    const reading = log.read(0, 1 << 20);
    const retention = await log.enforceRetention(clock.nowMs());
    expect(retention.deletedSegments).toBeGreaterThan(0);
    const read = await reading;
    if (read.kind !== "records") throw new Error(read.kind);
    expect(read.bytes.subarray(0, stored[0]!.length)).toEqual(stored[0]!);
    // The deletion runs when the read releases the segment: wait for that condition.
    for (let i = 0; i < 100 && (await fs.stat(segmentPath(0))) !== undefined; i++) await Promise.resolve();
    expect(await fs.stat(segmentPath(0))).toBeUndefined();
    await log.close();
  });

  test("only a few file handles of inactive segments stay open", async () => {
    const { fs, log } = await openLog({ segmentBytes: 300 });
    await appendBatches(log, 30, 1, 30);
    await log.close();
    const { log: reopened } = await openLog({ segmentBytes: 300 }, fs);
    expect(reopened.segmentCount).toBeGreaterThan(8);
    await readAll(reopened, 100);
    const opened = fs.log.filter((l) => /^open .*\.log /.test(l)).length;
    const closed = fs.log.filter((l) => /^close .*\.log$/.test(l)).length;
    // The active segment plus at most two inactive ones.
    expect(opened - closed).toBeLessThanOrEqual(3);
    await reopened.close();
  });

  test("retention never deletes data that is not durable", async () => {
    const { log, clock } = await openLog({ segmentBytes: 200, retentionBytes: 0 });
    log.append(simpleBatch(1, { valueBytes: 30 }));
    const result = await log.enforceRetention(clock.nowMs());
    expect(result.deletedSegments).toBe(0);
    await log.close();
  });

  test("deleteRecordsBefore moves the log start durably; retention then drops the segments below it", async () => {
    const fs = new MemoryFs();
    const { log, clock } = await openLog({ segmentBytes: 500 }, fs);
    await appendBatches(log, 20, 2, 30);
    expect(await log.deleteRecordsBefore(41)).toMatchObject({ kind: "offset-out-of-range" });
    expect(await log.deleteRecordsBefore(17)).toEqual({ kind: "ok", logStartOffset: 17 });
    expect(await log.deleteRecordsBefore(5)).toEqual({ kind: "ok", logStartOffset: 17 });
    expect(await log.read(16, 100)).toMatchObject({ kind: "offset-out-of-range", logStartOffset: 17 });
    const read = await log.read(17, 1 << 20);
    if (read.kind !== "records") throw new Error(read.kind);
    expect(read.firstOffset).toBe(16); // the batch holding offset 17 starts at 16
    // Durable without a clean close.
    fs.crash();
    const { log: reopened } = await openLog({ segmentBytes: 500 }, fs, clock);
    expect(reopened.logStartOffset).toBe(17);
    await reopened.enforceRetention(clock.nowMs());
    expect(reopened.segmentBaseOffsets[0]).toBeLessThanOrEqual(17);
    expect(reopened.segmentBaseOffsets[1]).toBeGreaterThan(17);
    expect(reopened.logStartOffset).toBe(17);
    await reopened.close();
  });
});
