import { afterEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeFs } from "../../../../src/platform/node-fs.ts";
import { GroupCommit } from "../../../../src/storage/log/group-commit.ts";
import { PartitionLog } from "../../../../src/storage/log/partition-log.ts";
import { simpleBatch } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";
import { CountingFs, DIR, testConfig } from "./support.ts";

const tempDirs: string[] = [];
afterEach(async () => {
  for (const dir of tempDirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe("GroupCommit", () => {
  test("callers during a run share the next run; each sees a run that started after it asked", async () => {
    const starts: number[] = [];
    let release!: () => void;
    let counter = 0;
    const commit = new GroupCommit(async () => {
      starts.push(counter);
      await new Promise<void>((resolve) => (release = resolve));
    });
    counter = 1;
    const first = commit.request();
    counter = 2;
    const joiners = [commit.request(), commit.request(), commit.request()];
    release();
    await first;
    // The second run starts (after all three joiners asked) once the first has settled.
    for (let i = 0; i < 100 && starts.length < 2; i++) await Promise.resolve();
    release();
    await Promise.all(joiners);
    expect(starts).toEqual([1, 2]);
  });

  test("a failed run rejects its callers and the next request runs again", async () => {
    let fail = true;
    const commit = new GroupCommit(async () => {
      if (fail) throw new Error("boom");
    });
    await expect(commit.request()).rejects.toThrow("boom");
    fail = false;
    await commit.request();
    await commit.idle();
  });
});

describe("flush group commit", () => {
  test("N concurrent flush callers share fewer fsyncs than callers (real files)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bunka-log-"));
    tempDirs.push(dir);
    const fs = new CountingFs(nodeFs);
    const log = await PartitionLog.open(fs, join(dir, "t-0"), testConfig({ segmentBytes: 1 << 20 }), new ManualClock());
    const before = fs.fileFsyncs;
    const callers = 50;
    const flushes: Promise<void>[] = [];
    for (let i = 0; i < callers; i++) {
      log.append(simpleBatch(2));
      flushes.push(log.flush());
    }
    await Promise.all(flushes);
    const used = fs.fileFsyncs - before;
    expect(used).toBeGreaterThanOrEqual(1);
    expect(used).toBeLessThanOrEqual(2);
    expect(log.durableEndOffset).toBe(100);
    // Nothing new: no fsync at all.
    await log.flush();
    expect(fs.fileFsyncs - before).toBe(used);
    await log.close();
  });

  test("an fsync covers every append made before the flush started, and only those", async () => {
    const fs = new MemoryFs();
    const log = await PartitionLog.open(fs, DIR, testConfig({ segmentBytes: 1 << 20 }), new ManualClock());
    log.append(simpleBatch(1));
    const first = log.flush();
    log.append(simpleBatch(1)); // after the first flush started: needs the next one
    const second = log.flush();
    await first;
    expect(log.durableEndOffset).toBeGreaterThanOrEqual(1);
    await second;
    expect(log.durableEndOffset).toBe(2);
    await log.close();
  });

  test("a failed fsync fails the log: pending and later operations reject with FatalError", async () => {
    const fs = new MemoryFs();
    const log = await PartitionLog.open(fs, DIR, testConfig({ segmentBytes: 1 << 20 }), new ManualClock());
    log.append(simpleBatch(1));
    fs.failNextFsync(`${DIR}/0`);
    await expect(log.flush()).rejects.toThrow(/fsync/);
    expect(log.failed?.name).toBe("FatalError");
    expect(() => log.append(simpleBatch(1))).toThrow(/fsync/);
    await expect(log.flush()).rejects.toThrow();
    await log.close();
  });

  test("a failed write rejects `written` and fails the log", async () => {
    const fs = new MemoryFs();
    const log = await PartitionLog.open(fs, DIR, testConfig({ segmentBytes: 1 << 20 }), new ManualClock());
    fs.failNextWrite(`${DIR}/0`, { torn: 10 });
    const result = log.append(simpleBatch(1));
    await expect(result.written).rejects.toThrow();
    expect(log.failed).toBeDefined();
    await log.close();
  });
});
