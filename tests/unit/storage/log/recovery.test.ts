import { afterEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CorruptStateError } from "../../../../src/errors/errors.ts";
import type { Fs } from "../../../../src/platform/fs.ts";
import { nodeFs } from "../../../../src/platform/node-fs.ts";
import { PartitionLog, type LogConfig } from "../../../../src/storage/log/partition-log.ts";
import { buildBatch, simpleBatch, TEST_BASE_TIMESTAMP_MS } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";
import { appendToFile, DIR, patchFile, readAll, segmentPath, testConfig, truncateFile } from "./support.ts";

const config = testConfig({ segmentBytes: 600, indexIntervalBytes: 100 });

function open(fs: Fs, clock = new ManualClock(), overrides: Partial<LogConfig> = {}, dir = DIR): Promise<PartitionLog> {
  return PartitionLog.open(fs, dir, { ...config, ...overrides }, clock);
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

async function expectCorrupt(promise: Promise<unknown>, file: string, pattern: RegExp): Promise<CorruptStateError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(CorruptStateError);
  const error = caught as CorruptStateError;
  expect(error.path).toBe(file);
  expect(error.message).toMatch(pattern);
  return error;
}

const tempDirs: string[] = [];
afterEach(async () => {
  for (const dir of tempDirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe("restart", () => {
  test("after a clean close nothing is scanned and everything is preserved", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 20);
    const bases = log.segmentBaseOffsets;
    await log.close();
    const reopened = await open(fs);
    expect(reopened.recoveryReport).toMatchObject({ cleanShutdown: true, scannedSegments: [], rebuiltIndexes: [], truncated: undefined });
    expect(reopened.segmentBaseOffsets).toEqual(bases);
    expect([reopened.logStartOffset, reopened.logEndOffset, reopened.durableEndOffset]).toEqual([0, 40, 40]);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    // And it goes on appending where it stopped.
    expect(reopened.append(simpleBatch(1)).baseOffset).toBe(40);
    await reopened.close();
  });

  test("a crash keeps every flushed batch; unflushed appends are lost, not half-kept", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 12);
    await log.append(simpleBatch(2, { valueBytes: 30 })).written;
    fs.crash();
    const reopened = await open(fs);
    expect(reopened.recoveryReport.cleanShutdown).toBe(false);
    expect(reopened.recoveryReport.scannedSegments).toContain(segmentPath(reopened.segmentBaseOffsets.at(-1)!).split("/").pop()!);
    expect(reopened.logEndOffset).toBe(24);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    await reopened.close();
  });

  test("after a crash only the segments at or after the recovery point are scanned", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 30);
    const bases = log.segmentBaseOffsets;
    expect(bases.length).toBeGreaterThan(3);
    // Each roll checkpoints the recovery point at the new segment's base offset (in the background).
    await log.settled();
    fs.crash();
    const reopened = await open(fs);
    expect(reopened.recoveryReport.scannedSegments).toEqual([`${String(bases.at(-1)).padStart(20, "0")}.log`]);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    await reopened.close();
  });

  test("real files: close and reopen preserve data and indexes", async () => {
    const dir = join(await mkdtemp(join(tmpdir(), "bunka-log-")), "t-0");
    tempDirs.push(dirname(dir));
    const log = await open(nodeFs, new ManualClock(), {}, dir);
    const stored = await fill(log, 30);
    await log.close();
    const reopened = await open(nodeFs, new ManualClock(), {}, dir);
    expect(reopened.recoveryReport.cleanShutdown).toBe(true);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    expect(await reopened.offsetForTimestamp(TEST_BASE_TIMESTAMP_MS + 17)).toEqual({ offset: 34, timestampMs: TEST_BASE_TIMESTAMP_MS + 17 });
    await reopened.close();
  });
});

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf("/"));
}

describe("torn tail", () => {
  test("a partial batch at the end of the last segment is truncated", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 10);
    const last = log.segmentBaseOffsets.at(-1)!;
    await log.close();
    const sizeBefore = (await fs.stat(segmentPath(last)))!.size;
    await appendToFile(fs, segmentPath(last), simpleBatch(3).subarray(0, 50));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.truncated).toMatchObject({ position: sizeBefore, bytes: 50 });
    expect((await fs.stat(segmentPath(last)))!.size).toBe(sizeBefore);
    expect(reopened.logEndOffset).toBe(20);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    // Appends continue at the truncation point and survive the next restart.
    const next = simpleBatch(1);
    expect(reopened.append(next).baseOffset).toBe(20);
    await reopened.close();
    const again = await open(fs);
    expect((await readAll(again)).map((b) => b.bytes)).toEqual([...stored, next]);
    await again.close();
  });

  test("a whole-length last batch with a bad CRC is a torn tail", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 10);
    const last = log.segmentBaseOffsets.at(-1)!;
    const lastBatch = stored.at(-1)!;
    fs.crash(); // no clean shutdown: the last segment is scanned
    const size = (await fs.stat(segmentPath(last)))!.size;
    await patchFile(fs, segmentPath(last), size - 3, new Uint8Array([0xde, 0xad, 0xbe]));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.truncated).toMatchObject({ position: size - lastBatch.length, reason: expect.stringContaining("CRC") });
    expect(reopened.logEndOffset).toBe(18);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored.slice(0, -1));
    await reopened.close();
  });

  test("a tail of zeros (size extended, data never written) is truncated", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 5);
    fs.crash();
    await appendToFile(fs, segmentPath(log.segmentBaseOffsets.at(-1)!), new Uint8Array(4096));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.truncated?.bytes).toBe(4096);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    await reopened.close();
  });
});

describe("corruption inside the log is refused, naming the file and position", () => {
  test("a bad batch in a segment before the last one", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 20);
    const [first, second] = log.segmentBaseOffsets;
    expect(second).toBeDefined();
    await log.close();
    const position = stored[0]!.length; // the second batch of the first segment
    await patchFile(fs, segmentPath(first!), position + 70, new Uint8Array([0xff]));
    // A trusted segment is scanned when its index has to be rebuilt...
    await fs.unlink(segmentPath(first!, "index"));
    await expectCorrupt(open(fs), segmentPath(first!), new RegExp(`CRC mismatch .* at position ${position} \\(offset 2\\)`));
    // ...and every segment is scanned when there is no recovery point at all.
    await fs.unlink(`${DIR}/log-checkpoint.json`);
    await expectCorrupt(open(fs), segmentPath(first!), /CRC mismatch .* at position/);
  });

  test("even at the very end of a segment before the last one (no torn tail there)", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    await fill(log, 20);
    const [first] = log.segmentBaseOffsets;
    fs.crash();
    await fs.unlink(`${DIR}/log-checkpoint.json`).catch(() => undefined);
    const size = (await fs.stat(segmentPath(first!)))!.size;
    await truncateFile(fs, segmentPath(first!), size - 10);
    await expectCorrupt(open(fs), segmentPath(first!), /cut short/);
  });

  test("a bad batch in the last segment followed by a valid batch", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 3);
    fs.crash(); // never checkpointed: the recovery point is 0 and the last segment is scanned
    await patchFile(fs, segmentPath(0), stored[0]!.length + 80, new Uint8Array([0x00]));
    await expectCorrupt(open(fs), segmentPath(0), new RegExp(`at position ${stored[0]!.length} \\(offset 2\\) is followed by a valid batch`));
  });

  test("a damaged base offset (not covered by the CRC) followed by a valid batch", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 3);
    fs.crash();
    await patchFile(fs, segmentPath(0), stored[0]!.length + 7, new Uint8Array([0x09]));
    await expectCorrupt(open(fs), segmentPath(0), /base offset 9 where 2 was expected/);
  });

  test("a bad batch below the recovery point, even at the tail", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const log = await open(fs, clock, { recoveryPointCheckpointIntervalMs: 1000 });
    const stored = await fill(log, 3);
    clock.advance(1000);
    log.append(simpleBatch(1));
    await log.flush(); // writes the recovery point (offset 7) in the background
    await log.settled();
    fs.crash();
    const size = (await fs.stat(segmentPath(0)))!.size;
    expect(size).toBeGreaterThan(3 * stored[0]!.length);
    await patchFile(fs, segmentPath(0), size - 1, new Uint8Array([0x55]));
    await expectCorrupt(open(fs, clock), segmentPath(0), /below the recovery point 7/);
  });

  test("a last segment shorter than the durable data", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 3);
    await log.close();
    await truncateFile(fs, segmentPath(0), stored[0]!.length);
    await expectCorrupt(open(fs), segmentPath(0), /ends at offset 2, but offsets below 6 were durable/);
  });

  test("a checkpoint that fails its checksum", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    await fill(log, 3);
    await log.close();
    const path = `${DIR}/log-checkpoint.json`;
    const text = new TextDecoder().decode(await fs.readFile(path)).replace('"recoveryPoint":6', '"recoveryPoint":5');
    await patchFile(fs, path, 0, new TextEncoder().encode(text));
    await expectCorrupt(open(fs), path, /checksum/);
  });
});

describe("indexes", () => {
  test("missing index files of a segment are rebuilt at open", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 20);
    await log.close();
    const original = await fs.readFile(segmentPath(0, "index"));
    const originalTime = await fs.readFile(segmentPath(0, "timeindex"));
    await fs.unlink(segmentPath(0, "index"));
    await fs.unlink(segmentPath(0, "timeindex"));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.rebuiltIndexes).toEqual([segmentPath(0, "index"), segmentPath(0, "timeindex")]);
    expect(await fs.readFile(segmentPath(0, "index"))).toEqual(original);
    expect(await fs.readFile(segmentPath(0, "timeindex"))).toEqual(originalTime);
    expect((await readAll(reopened, 100)).map((b) => b.bytes)).toEqual(stored);
    await reopened.close();
  });

  test("an unsound index file is rebuilt when first used", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 20);
    await log.close();
    const size = (await fs.stat(segmentPath(0, "index")))!.size;
    expect(size).toBeGreaterThan(8);
    await patchFile(fs, segmentPath(0, "index"), 0, new Uint8Array(size).fill(0x7f));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.rebuiltIndexes).toEqual([]);
    const read = await reopened.read(5, 1, { minOneBatch: true });
    expect(read.kind === "records" && read.bytes).toEqual(stored[2]!);
    expect(reopened.recoveryReport.rebuiltIndexes).toContain(segmentPath(0, "index"));
    await reopened.close();
  });

  test("a plausible index pointing at the wrong positions is caught by the batch it lands on", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 20);
    await log.close();
    // One entry: relative offset 4 at position 1, which is no batch boundary.
    await truncateFile(fs, segmentPath(0, "index"), 0);
    await patchFile(fs, segmentPath(0, "index"), 0, new Uint8Array([0, 0, 0, 4, 0, 0, 0, 1]));
    const reopened = await open(fs);
    const read = await reopened.read(5, 1, { minOneBatch: true });
    expect(read.kind === "records" && read.bytes).toEqual(stored[2]!);
    expect(reopened.recoveryReport.rebuiltIndexes).toContain(segmentPath(0, "index"));
    await reopened.close();
  });

  test("a missing index of the last segment after a clean close means a scan", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    const stored = await fill(log, 4);
    await log.close();
    await fs.unlink(segmentPath(0, "index"));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.cleanShutdown).toBe(false);
    expect(reopened.recoveryReport.scannedSegments).toEqual(["00000000000000000000.log"]);
    expect((await readAll(reopened)).map((b) => b.bytes)).toEqual(stored);
    await reopened.close();
  });

  test("orphan index files and leftover tmp files are removed", async () => {
    const fs = new MemoryFs();
    const log = await open(fs);
    await fill(log, 2);
    await log.close();
    await appendToFile(fs, segmentPath(500, "index"), new Uint8Array(8));
    await appendToFile(fs, `${DIR}/log-checkpoint.json.0123456789abcdef.tmp`, new Uint8Array(3));
    const reopened = await open(fs);
    expect(reopened.recoveryReport.removedFiles.sort()).toEqual(["00000000000000000500.index", "log-checkpoint.json.0123456789abcdef.tmp"]);
    expect(await fs.stat(segmentPath(500, "index"))).toBeUndefined();
    await reopened.close();
  });
});

describe("crash at every step", () => {
  /**
   * Appends with flushes across several rolls, moves the log start, enforces retention, and closes;
   * the simulated process dies after `haltAfter` file-system operations. Returns what was acknowledged.
   */
  async function scenario(fs: MemoryFs, clock: ManualClock, haltAfter: number | undefined) {
    const acked: { baseOffset: number; bytes: Uint8Array }[] = [];
    let logStartAcked = 0;
    const log = await PartitionLog.open(fs, DIR, { ...config, segmentBytes: 400, retentionBytes: 700 }, clock);
    if (haltAfter !== undefined) fs.haltAfterOps(haltAfter);
    try {
      for (let i = 0; i < 14; i++) {
        const batch = buildBatch({ records: [{ key: `k${i}`, value: "x".repeat(40 + i) }, { value: "y" }] });
        const result = log.append(batch);
        await log.flush();
        acked.push({ baseOffset: result.baseOffset, bytes: batch });
        if (i === 6) {
          await log.deleteRecordsBefore(5);
          logStartAcked = 5;
        }
        if (i === 9) await log.enforceRetention(clock.nowMs());
      }
      await log.close();
    } catch {
      // The process died here.
    }
    return { acked, logStartAcked };
  }

  test("reopening after a crash after any number of operations keeps every acknowledged batch", async () => {
    const probe = new MemoryFs();
    const probeLog = probe.log;
    await scenario(probe, new ManualClock(), undefined);
    const totalOps = probeLog.length;
    expect(totalOps).toBeGreaterThan(50);
    for (let haltAfter = 0; haltAfter <= totalOps; haltAfter++) {
      const fs = new MemoryFs();
      const clock = new ManualClock();
      const { acked, logStartAcked } = await scenario(fs, clock, haltAfter);
      fs.crash();
      let reopened: PartitionLog;
      try {
        reopened = await PartitionLog.open(fs, DIR, { ...config, segmentBytes: 400, retentionBytes: 700 }, clock);
      } catch (error) {
        throw new Error(`open failed after halting at op ${haltAfter}: ${(error as Error).message}`);
      }
      expect(reopened.logStartOffset).toBeGreaterThanOrEqual(logStartAcked);
      const stored = new Map((await readAll(reopened)).map((b) => [b.baseOffset, b.bytes]));
      for (const batch of acked) {
        if (batch.baseOffset + 1 < reopened.logStartOffset) continue;
        expect({ haltAfter, offset: batch.baseOffset, bytes: stored.get(batch.baseOffset) }).toEqual({ haltAfter, offset: batch.baseOffset, bytes: batch.bytes });
      }
      expect(reopened.logEndOffset).toBeGreaterThanOrEqual(acked.length * 2);
      // The recovered log takes appends and survives another restart.
      reopened.append(simpleBatch(1));
      await reopened.flush();
      await reopened.close();
      const again = await PartitionLog.open(fs, DIR, { ...config, segmentBytes: 400, retentionBytes: 700 }, clock);
      expect(again.recoveryReport.cleanShutdown).toBe(true);
      await again.close();
    }
  });
});
