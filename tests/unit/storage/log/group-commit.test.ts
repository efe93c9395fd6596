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
import type { FileHandle, Fs } from "../../../../src/platform/fs.ts";
import { settle } from "../../../support/manual-timers.ts";
import { waitUntil } from "../../../support/wait.ts";

/** A file system whose file fsyncs wait until the test lets each go (in any order), or fails it. */
class HeldFsyncFs {
  readonly held: { path: string; release: () => void; fail: (error: Error) => void }[] = [];
  /** Off: fsyncs go straight through (close's own writes). */
  holding = true;
  constructor(readonly inner: MemoryFs) {}
  asFs(): Fs {
    return new Proxy(this.inner, {
      get: (target, key) => {
        if (key !== "open") {
          const value = Reflect.get(target, key) as unknown;
          return typeof value === "function" ? value.bind(target) : value;
        }
        return async (path: string, mode: "r" | "rw" | "w"): Promise<FileHandle> => {
          const handle = await target.open(path, mode);
          return new Proxy(handle, {
            get: (h, k) => {
              if (k !== "fsync") {
                const value = Reflect.get(h, k) as unknown;
                return typeof value === "function" ? value.bind(h) : value;
              }
              if (!this.holding) return () => h.fsync();
              return () =>
                new Promise<void>((resolve, reject) => {
                  this.held.push({ path, release: () => void h.fsync().then(resolve, reject), fail: reject });
                });
            },
          });
        };
      },
    }) as unknown as Fs;
  }
}

function tracked(promise: Promise<void>) {
  const state = { settled: false, failed: false };
  promise.then(
    () => (state.settled = true),
    () => ((state.settled = true), (state.failed = true)),
  );
  return state;
}

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

describe("pipelined flush", () => {
  async function openLog() {
    const held = new HeldFsyncFs(new MemoryFs());
    const log = await PartitionLog.open(held.asFs(), DIR, testConfig({ segmentBytes: 1 << 20 }), new ManualClock());
    return { held, log };
  }

  test("a flush asked for while another's fsync is in flight starts its own fsync at once, and ends after the earlier one", async () => {
    const { held, log } = await openLog();
    log.append(simpleBatch(1));
    const first = tracked(log.flush());
    await waitUntil(() => held.held.length === 1, "the first fsync started");
    log.append(simpleBatch(1));
    const second = tracked(log.flush());
    // Not behind the first: its fsync starts while the first is still held.
    await waitUntil(() => held.held.length === 2, "the second fsync started while the first is in flight");
    // The second fsync ends first; its flush still waits for the earlier one.
    held.held[1]!.release();
    await settle();
    expect(second.settled).toBe(false);
    expect(log.durableEndOffset).toBe(0);
    held.held[0]!.release();
    await waitUntil(() => first.settled && second.settled, "both flushes done");
    expect(first.failed || second.failed).toBe(false);
    expect(log.durableEndOffset).toBe(2);
    held.holding = false;
    await log.close();
  });

  test("a flush with nothing new to fsync (everything captured by the flush in flight) waits for that flush", async () => {
    const { held, log } = await openLog();
    log.append(simpleBatch(1));
    const first = tracked(log.flush());
    await waitUntil(() => held.held.length === 1, "the first fsync started");
    const second = tracked(log.flush());
    await settle();
    expect(held.held).toHaveLength(1);
    expect(second.settled).toBe(false);
    held.held[0]!.release();
    await waitUntil(() => first.settled && second.settled, "both flushes done");
    expect(log.durableEndOffset).toBe(1);
    held.holding = false;
    await log.close();
  });

  test("callers that ask while a flush waits for queued writes join it: one fsync for all", async () => {
    const { held, log } = await openLog();
    const flushes: ReturnType<typeof tracked>[] = [];
    for (let i = 0; i < 5; i++) {
      log.append(simpleBatch(1));
      flushes.push(tracked(log.flush()));
    }
    await waitUntil(() => held.held.length === 1, "one fsync started");
    await settle();
    expect(held.held).toHaveLength(1);
    held.held[0]!.release();
    await waitUntil(() => flushes.every((f) => f.settled), "every caller answered");
    expect(log.durableEndOffset).toBe(5);
    held.holding = false;
    await log.close();
  });

  test("an earlier flush's failed fsync fails the later flush too, whose own fsync succeeded: nothing counts as durable", async () => {
    const { held, log } = await openLog();
    log.append(simpleBatch(1));
    const first = tracked(log.flush());
    await waitUntil(() => held.held.length === 1, "the first fsync started");
    log.append(simpleBatch(1));
    const second = tracked(log.flush());
    await waitUntil(() => held.held.length === 2, "the second fsync started");
    held.held[1]!.release();
    held.held[0]!.fail(new Error("EIO"));
    await waitUntil(() => first.settled && second.settled, "both flushes done");
    expect(first.failed).toBe(true);
    expect(second.failed).toBe(true);
    expect(log.durableEndOffset).toBe(0);
    expect(log.failed?.name).toBe("FatalError");
    await log.close();
  });
});
