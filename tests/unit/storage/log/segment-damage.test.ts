/**
 * Damaged segment data is never served silently: the read path checks every batch it returns, recovery
 * takes a cheap look at the segments it trusts without a scan, and the scrubber verifies every batch in
 * the background, within one pass, reporting each damage once.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../../src/errors/errors.ts";
import type { Fs } from "../../../../src/platform/fs.ts";
import { silentLogger, type Logger } from "../../../../src/platform/logger.ts";
import { OffsetMap } from "../../../../src/domain/compaction/offset-map.ts";
import { parseBatchHeader } from "../../../../src/protocol/records/record-batch.ts";
import { PartitionLog, type LogConfig } from "../../../../src/storage/log/partition-log.ts";
import { Partition } from "../../../../src/storage/partition.ts";
import { SegmentDamageRegistry } from "../../../../src/storage/log/segment-damage.ts";
import { SegmentScrubber, type ScrubbedLog } from "../../../../src/storage/log/segment-scrubber.ts";
import { buildBatch, simpleBatch, TEST_BASE_TIMESTAMP_MS, type TestRecord } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { ManualTimers } from "../../../support/manual-timers.ts";
import { until } from "../../../support/wait.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";
import { DIR, patchFile, segmentPath, splitBatches, testConfig, truncateFile } from "./support.ts";

const config = testConfig({ segmentBytes: 600, indexIntervalBytes: 100 });
const PARTITION = "topic-0";

function open(fs: Fs, clock = new ManualClock(), overrides: Partial<LogConfig> = {}): Promise<PartitionLog> {
  return PartitionLog.open(fs, DIR, { ...config, ...overrides }, clock);
}

/** Appends `count` batches of two records and flushes; returns the stored bytes. */
async function fill(log: PartitionLog, count: number): Promise<Uint8Array[]> {
  const stored: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const batch = simpleBatch(2, { valueBytes: 30, timestampMs: TEST_BASE_TIMESTAMP_MS + i });
    log.append(batch);
    stored.push(batch);
  }
  await log.flush();
  return stored;
}

/** A log of several segments, closed cleanly and opened again: every inactive segment is trusted without a scan. */
async function trustedLog(fs: Fs, batches = 30): Promise<{ log: PartitionLog; stored: Uint8Array[] }> {
  const first = await open(fs);
  const stored = await fill(first, batches);
  await first.close();
  const log = await open(fs);
  expect(log.recoveryReport.scannedSegments).toEqual([]);
  expect(log.segmentCount).toBeGreaterThan(2);
  return { log, stored };
}

/** Reads from `offset` on until the log stops it; the batches served and how it stopped. */
async function readUntilStopped(log: PartitionLog, offset = 0) {
  const served: Uint8Array[] = [];
  for (;;) {
    const read = await log.read(offset, 1 << 20, { minOneBatch: true });
    if (read.kind !== "records") return { served, stop: read, offset };
    if (read.bytes.length === 0) return { served, stop: read, offset };
    served.push(...splitBatches(read.bytes).map((b) => b.bytes));
    offset = read.nextOffset;
  }
}

/** Counts the bytes read through file handles. */
class ReadCountingFs extends MemoryFs {
  bytesRead = 0;
  override async open(path: string, mode: "r" | "rw" | "w") {
    const handle = await super.open(path, mode);
    return {
      write: (data: Uint8Array, position: number) => handle.write(data, position),
      read: async (length: number, position: number) => {
        const bytes = await handle.read(length, position);
        this.bytesRead += bytes.length;
        return bytes;
      },
      truncate: (length: number) => handle.truncate(length),
      fsync: () => handle.fsync(),
      size: () => handle.size(),
      close: () => handle.close(),
    };
  }
}

function capturingLogger(): { log: Logger; warnings: string[] } {
  const warnings: string[] = [];
  return { log: { ...silentLogger, warn: (message, fields) => warnings.push(`${message} ${JSON.stringify(fields)}`) }, warnings };
}

describe("the read path", () => {
  test("0xFF over the middle of a trusted segment: the batches before it are served, then the read answers damaged, never records past it", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    const second = log.segmentBaseOffsets[1]!;
    const file = segmentPath(second);
    const size = (await fs.stat(file))!.size;
    const batchBytes = stored[0]!.length;
    // Two batches in, 100 bytes of 0xFF: the third batch of the segment and the start of the fourth.
    await patchFile(fs, file, 2 * batchBytes + 10, new Uint8Array(100).fill(0xff));
    expect(size).toBeGreaterThan(2 * batchBytes + 110);

    const { served, stop, offset } = await readUntilStopped(log);
    expect(stop.kind).toBe("damaged");
    if (stop.kind !== "damaged") return;
    // Everything before the damaged batch, exactly as stored (the segments before it and two batches of it).
    const before = stored.slice(0, second / 2 + 2);
    expect(served).toEqual(before);
    expect(offset).toBe(second + 4);
    expect(stop.damage).toMatchObject({ file: segmentPath(second).slice(DIR.length + 1), position: 2 * batchBytes });
    // Asked again, the same answer: the damage is not skipped over.
    const again = await log.read(offset, 1 << 20, { minOneBatch: true });
    expect(again.kind).toBe("damaged");
    await log.close();
  });

  test("the read that reaches the damage says so with the records before it", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    const batchBytes = stored[0]!.length;
    await patchFile(fs, segmentPath(0), 3 * batchBytes - 2, new Uint8Array([0x00, 0x01]));
    const read = await log.read(0, 1 << 20);
    expect(read.kind).toBe("records");
    if (read.kind !== "records") return;
    expect(splitBatches(read.bytes).map((b) => b.bytes)).toEqual(stored.slice(0, 2));
    expect(read.nextOffset).toBe(4);
    expect(read.damage).toMatchObject({ position: 2 * batchBytes, offset: 4 });
    await log.close();
  });

  test("a batch length that runs past the segment is damage, not the end of the segment", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    const batchBytes = stored[0]!.length;
    // The second batch's length field says 1 MiB.
    await patchFile(fs, segmentPath(0), batchBytes + 8, new Uint8Array([0x00, 0x10, 0x00, 0x00]));
    const { served, stop } = await readUntilStopped(log);
    expect(served).toEqual(stored.slice(0, 1));
    expect(stop.kind).toBe("damaged");
    if (stop.kind === "damaged") expect(stop.damage.reason).toMatch(/runs past the written data/);
    await log.close();
  });

  test("a bad magic byte is damage", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    await patchFile(fs, segmentPath(0), stored[0]!.length + 16, new Uint8Array([1]));
    const { served, stop } = await readUntilStopped(log);
    expect(served).toEqual(stored.slice(0, 1));
    expect(stop.kind === "damaged" && stop.damage.reason).toMatch(/magic 1/);
    await log.close();
  });

  test("a fetch into the damage found through the index answers damaged too, and does not scan the segment at every read", async () => {
    const fs = new ReadCountingFs();
    const { log, stored } = await trustedLog(fs);
    const batchBytes = stored[0]!.length;
    // Everything after the first batch of segment 0 is 0xFF: the index entries point into garbage.
    const size = (await fs.stat(segmentPath(0)))!.size;
    await patchFile(fs, segmentPath(0), batchBytes, new Uint8Array(size - batchBytes).fill(0xff));
    const last = log.segmentBaseOffsets[1]! - 2;
    const before = fs.bytesRead;
    const first = await log.read(last, 10, { minOneBatch: true });
    expect(first.kind).toBe("damaged");
    // The first read scanned the segment (an index rebuild), which refused it.
    expect(fs.bytesRead - before).toBeGreaterThanOrEqual(size);
    const again = fs.bytesRead;
    const second = await log.read(last, 10, { minOneBatch: true });
    expect(second.kind).toBe("damaged");
    // The second one did not read the whole segment again.
    expect(fs.bytesRead - again).toBeLessThan(size);
    await log.close();
  });
});

describe("at open", () => {
  test("an empty first segment of a log with several segments refuses the open, and the file is left as it is", async () => {
    const fs = new MemoryFs();
    const { log } = await trustedLog(fs);
    const next = log.segmentBaseOffsets[1]!;
    await log.close();
    await truncateFile(fs, segmentPath(0), 0);
    let caught: unknown;
    try {
      await open(fs);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CorruptStateError);
    expect((caught as CorruptStateError).path).toBe(segmentPath(0));
    expect((caught as Error).message).toMatch(new RegExp(`is empty, but offsets 0\\.\\.${next - 1} belong to it`));
    expect((await fs.stat(segmentPath(0)))?.size).toBe(0);
  });

  test("a trusted segment that lost its end refuses the open; its bytes are not cut", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    const second = log.segmentBaseOffsets[1]!;
    await log.close();
    const size = (await fs.stat(segmentPath(second)))!.size;
    const kept = size - stored[0]!.length;
    await truncateFile(fs, segmentPath(second), kept);
    await expect(open(fs)).rejects.toBeInstanceOf(CorruptStateError);
    expect((await fs.stat(segmentPath(second)))?.size).toBe(kept);
  });

  test("a trusted segment with a torn batch in its last index interval refuses the open", async () => {
    const fs = new MemoryFs();
    const { log, stored } = await trustedLog(fs);
    await log.close();
    const size = (await fs.stat(segmentPath(0)))!.size;
    await patchFile(fs, segmentPath(0), size - stored[0]!.length + 30, new Uint8Array([0xee]));
    await expect(open(fs)).rejects.toThrow(/CRC mismatch/);
  });

  test("a sound log opens without a scan: the look at trusted segments reads no more than their ends", async () => {
    const fs = new MemoryFs();
    const { log } = await trustedLog(fs);
    expect(log.recoveryReport.scannedSegments).toEqual([]);
    await log.close();
  });
});

describe("the scrubber", () => {
  function scrubberOf(logs: { partition: string; log: ScrubbedLog }[], registry: SegmentDamageRegistry, clock: ManualClock, timers: ManualTimers, bytesPerSecond = 1 << 30, chunkBytes = 512) {
    return new SegmentScrubber({ partitions: async () => logs, damage: registry, clock, timers, log: silentLogger, bytesPerSecond: () => bytesPerSecond, chunkBytes });
  }

  test("finds damage in a segment nobody reads within one pass, records it once, and says it once however many passes find it", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log, stored } = await trustedLog(fs);
    const second = log.segmentBaseOffsets[1]!;
    await patchFile(fs, segmentPath(second), stored[0]!.length + 40, new Uint8Array([0x5a]));
    const { log: logger, warnings } = capturingLogger();
    const registry = new SegmentDamageRegistry(clock, logger);
    const scrubber = scrubberOf([{ partition: PARTITION, log }], registry, clock, new ManualTimers(clock));
    expect(await scrubber.runPass()).toBe(true);
    expect(registry.findings(PARTITION)).toMatchObject([
      { partition: PARTITION, file: segmentPath(second).slice(DIR.length + 1), position: stored[0]!.length, offset: second + 2, foundBy: "scrubber", refused: false },
    ]);
    expect(registry.findings(PARTITION)[0]!.reason).toMatch(/CRC mismatch/);
    expect(scrubber.statistics.damagedBatchesFound).toBe(1);
    expect(warnings.length).toBe(1);
    expect(warnings[0]).toMatch(/"position":\d+/);
    await scrubber.runPass();
    await scrubber.runPass();
    expect(registry.findings(PARTITION).length).toBe(1);
    expect(scrubber.statistics.damagedBatchesFound).toBe(1);
    expect(warnings.length).toBe(1);
    expect(scrubber.statistics.passesCompleted).toBe(3);
    await log.close();
  });

  test("a sound log: every batch verified, every byte counted, no finding", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log, stored } = await trustedLog(fs);
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    const scrubber = scrubberOf([{ partition: PARTITION, log }], registry, clock, new ManualTimers(clock));
    expect(await scrubber.runPass()).toBe(true);
    expect(scrubber.statistics.batchesVerified).toBe(stored.length);
    expect(scrubber.statistics.bytesScrubbed).toBe(stored.reduce((n, b) => n + b.length, 0));
    expect(scrubber.statistics.lastFullPassEndMs).toBe(clock.nowMs());
    expect(registry.damagedPartitions()).toEqual([]);
    await log.close();
  });

  test("bytes checked once are not checked again by reads; damage after the check is served until the scrubber finds it, then refused", async () => {
    for (const how of ["appended by this process", "read once from a trusted segment"] as const) {
      const fs = new MemoryFs();
      const clock = new ManualClock();
      let log: PartitionLog;
      let stored: Uint8Array[];
      if (how === "appended by this process") {
        log = await open(fs, clock);
        stored = await fill(log, 30);
      } else {
        ({ log, stored } = await trustedLog(fs));
        // The first read checks every CRC (and finds nothing wrong).
        expect((await readUntilStopped(log)).served).toEqual(stored);
      }
      const second = log.segmentBaseOffsets[1]!;
      await patchFile(fs, segmentPath(second), stored[0]!.length + 40, new Uint8Array([0x5a]));
      // The changed byte is inside a range already checked: this read does not compute the CRCs again
      // (the limit docs/operations.md states), so the changed batch goes out.
      const unchecked = await readUntilStopped(log);
      expect(unchecked.stop.kind).toBe("records");
      expect(unchecked.served.length).toBe(stored.length);
      // The scrubber checks everything again, finds it, and from then on reads check that segment again.
      const registry = new SegmentDamageRegistry(clock, silentLogger);
      await scrubberOf([{ partition: PARTITION, log }], registry, clock, new ManualTimers(clock)).runPass();
      expect(registry.findings(PARTITION)).toHaveLength(1);
      const checked = await readUntilStopped(log);
      expect(checked.stop.kind, how).toBe("damaged");
      expect(checked.served).toEqual(stored.slice(0, second / 2 + 1));
      await log.close();
    }
  });

  test("a segment shorter than its successor's base offset says (the end offset check)", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log, stored } = await trustedLog(fs);
    // Cut the first segment's last batch while the log is open: its successor still starts after it.
    const size = (await fs.stat(segmentPath(0)))!.size;
    await truncateFile(fs, segmentPath(0), size - stored[0]!.length);
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    const scrubber = scrubberOf([{ partition: PARTITION, log }], registry, clock, new ManualTimers(clock));
    await scrubber.runPass();
    expect(registry.findings(PARTITION).length).toBe(1);
    expect(registry.findings(PARTITION)[0]!.reason).toMatch(/file ends before its size|hold no batch|cut short/);
    await log.close();
  });

  test("skips the active segment's tail that is written but not fsynced", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const log = await open(fs, clock, { segmentBytes: 1 << 20 });
    const flushed = await fill(log, 3);
    const unflushed = simpleBatch(2, { valueBytes: 30 });
    await log.append(unflushed).written;
    const [active] = log.scrubSegments();
    expect(active!.active).toBe(true);
    expect(active!.verifiableBytes).toBe(flushed.reduce((n, b) => n + b.length, 0));
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    const scrubber = scrubberOf([{ partition: PARTITION, log }], registry, clock, new ManualTimers(clock));
    await scrubber.runPass();
    expect(scrubber.statistics.batchesVerified).toBe(3);
    await log.flush();
    await scrubber.runPass();
    expect(scrubber.statistics.batchesVerified).toBe(3 + 4);
    await log.close();
  });

  test("a segment retention deletes while it is being scrubbed is skipped, without a finding, and its old findings go", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log } = await trustedLog(fs);
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    registry.record({ partition: PARTITION, file: segmentPath(0).slice(DIR.length + 1), position: 5, offset: 0, reason: "found by an earlier read", foundBy: "read" });
    let reads = 0;
    const racing: ScrubbedLog = {
      scrubSegments: () => log.scrubSegments(),
      forgetChecked: (segment) => log.forgetChecked(segment),
      async readForScrub(segment, position, length) {
        // After the first chunk of the first segment, retention removes it (DeleteRecords past it).
        if (++reads === 2) {
          await log.deleteRecordsBefore(log.segmentBaseOffsets[1]!);
          expect((await log.enforceRetention(clock.nowMs())).deletedSegments).toBe(1);
        }
        return log.readForScrub(segment, position, length);
      },
    };
    const scrubber = scrubberOf([{ partition: PARTITION, log: racing }], registry, clock, new ManualTimers(clock));
    expect(await scrubber.runPass()).toBe(true);
    expect(reads).toBeGreaterThan(2);
    expect(registry.findings(PARTITION).map((d) => d.foundBy)).toEqual(["read"]);
    // The next pass no longer lists the deleted segment, and drops what was known of it.
    await scrubber.runPass();
    expect(registry.damagedPartitions()).toEqual([]);
    await log.close();
  });

  test("a segment the log cleaner replaces under the same name while it is being scrubbed is skipped, without a finding", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const dir = "/data/compacted-0";
    const partition = await Partition.open({
      fs,
      clock,
      topic: "compacted",
      partition: 0,
      dir,
      logConfig: testConfig({ segmentBytes: 400 }),
      timestampType: "create-time",
      warn: () => {},
    });
    const append = async (records: TestRecord[]) => {
      const bytes = buildBatch({ records });
      const outcome = partition.appendFromProducer(bytes, parseBatchHeader(bytes));
      if (outcome.kind !== "appended") throw new Error(`append refused: ${JSON.stringify(outcome)}`);
      await outcome.written;
      await partition.log.flush();
    };
    for (let round = 0; round < 4; round++) for (let k = 0; k < 3; k++) await append([{ key: `k${k}`, value: `value-${round}` }]);
    await append([{ key: "roll", value: "x".repeat(420) }]);
    await append([{ key: "last", value: "y" }]);
    const sizeBefore = partition.log.cleanableSegments()[0]!.sizeBytes;
    let reads = 0;
    const racing: ScrubbedLog = {
      scrubSegments: () => partition.log.scrubSegments(),
      forgetChecked: (segment) => partition.log.forgetChecked(segment),
      async readForScrub(segment, position, length) {
        // Mid-way through the first segment, a cleaning pass swaps a smaller segment in under its name.
        if (++reads === 3) {
          const outcome = await partition.clean({
            nowMs: clock.nowMs(),
            config: { minCleanableDirtyRatio: 0.5, minCompactionLagMs: 0, maxCompactionLagMs: Number.MAX_SAFE_INTEGER, deleteRetentionMs: 86_400_000, segmentBytes: 400, indexIntervalBytes: 128 },
            map: new OffsetMap(1 << 20, 0.9),
            throttle: async () => {},
            shouldStop: () => false,
            force: true,
          });
          expect(outcome).toMatchObject({ kind: "cleaned" });
          expect(partition.log.cleanableSegments()[0]!.sizeBytes).toBeLessThan(sizeBefore);
        }
        return partition.log.readForScrub(segment, position, length);
      },
    };
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    const scrubber = scrubberOf([{ partition: "compacted-0", log: racing }], registry, clock, new ManualTimers(clock), 1 << 30, 64);
    expect(await scrubber.runPass()).toBe(true);
    expect(reads).toBeGreaterThan(3);
    expect(registry.damagedPartitions()).toEqual([]);
    // The next pass verifies the cleaned segment as what it is.
    await scrubber.runPass();
    expect(registry.damagedPartitions()).toEqual([]);
    await partition.close();
  });

  test("reads at the configured rate: a pass of N bytes takes N / rate", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const { log, stored } = await trustedLog(fs);
    const total = stored.reduce((n, b) => n + b.length, 0);
    const bytesPerSecond = 1000;
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    const scrubber = scrubberOf([{ partition: PARTITION, log }], registry, clock, timers, bytesPerSecond);
    const startedMs = clock.monotonicMs();
    let done = false;
    const pass = scrubber.runPass().then(() => (done = true));
    // Move the clock in steps of 100 ms until the pass is done.
    while (!done) await timers.advance(100);
    await pass;
    const tookMs = clock.monotonicMs() - startedMs;
    expect(scrubber.statistics.bytesScrubbed).toBe(total);
    const read = scrubber.statistics.bytesRead;
    expect(read).toBeGreaterThanOrEqual(total);
    // The pass waits after every read but the last (at most one chunk), in steps of 100 ms here.
    const readMs = (read * 1000) / bytesPerSecond;
    expect(tookMs).toBeGreaterThanOrEqual(readMs - (512 * 1000) / bytesPerSecond);
    expect(tookMs).toBeLessThanOrEqual(readMs + 200);
    await log.close();
  });

  test("a rate of 0 stops the pass at its next read", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log } = await trustedLog(fs);
    const registry = new SegmentDamageRegistry(clock, silentLogger);
    let rate = 1 << 30;
    const scrubber = new SegmentScrubber({ partitions: async () => [{ partition: PARTITION, log }], damage: registry, clock, timers: new ManualTimers(clock), log: silentLogger, bytesPerSecond: () => rate, chunkBytes: 128 });
    rate = 0;
    expect(await scrubber.runPass()).toBe(false);
    expect(scrubber.statistics.bytesScrubbed).toBe(0);
    await log.close();
  });

  test("stop ends every wait at once: the loop's pause and a pass run beside it, paced between its reads", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const { log } = await trustedLog(fs);
    const timers = new ManualTimers(clock);
    // 1 KiB/s with 128-byte reads: the pass beside the loop waits between its reads.
    const scrubber = new SegmentScrubber({ partitions: async () => [{ partition: PARTITION, log }], damage: new SegmentDamageRegistry(clock, silentLogger), clock, timers, log: silentLogger, bytesPerSecond: () => 1024, chunkBytes: 128, pauseBetweenPassesMs: 60_000 });
    scrubber.start();
    const beside = scrubber.runPass();
    await until("both wait on a timer", 2_000, async () => (timers.pending >= 2 ? true : undefined), 1);
    const stopped = await Promise.race([scrubber.stop().then(() => "stopped"), new Promise((r) => setTimeout(() => r("still waiting"), 1_000))]);
    expect(stopped).toBe("stopped");
    expect(await beside).toBe(false);
    await log.close();
  });
});
