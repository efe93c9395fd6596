/**
 * Reads into caller-owned memory (ReadOptions.buffers, as Fetch's arena): the bytes are the same as a
 * read into fresh memory, land in the arena, keep only what they return, and a consumer going on from
 * where it stopped reads no more than the answer may hold. Also the arena and its pool themselves.
 */
import { describe, expect, test } from "bun:test";
import { FETCH_ARENA_BYTES_MAX, FetchArena, FetchArenaPool } from "../../../../src/broker/fetch-arena.ts";
import { PartitionLog, type LogConfig } from "../../../../src/storage/log/partition-log.ts";
import { simpleBatch } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";
import { DIR, splitBatches, testConfig } from "./support.ts";

async function openLog(overrides: Partial<LogConfig> = {}) {
  const fs = new MemoryFs();
  const log = await PartitionLog.open(fs, DIR, testConfig({ segmentBytes: 1 << 20, indexIntervalBytes: 4096, ...overrides }), new ManualClock());
  return { fs, log };
}

async function append(log: PartitionLog, count: number, records = 2, valueBytes = 100): Promise<Uint8Array[]> {
  const stored: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const batch = simpleBatch(records, { valueBytes });
    log.append(batch);
    stored.push(batch);
  }
  await log.flush();
  return stored;
}

const readLengths = (fs: MemoryFs) =>
  fs.log.filter((line) => line.startsWith("read ") && line.includes(".log ")).map((line) => Number(line.split(" ").at(-1)!.split("@")[0]));

describe("reads into caller memory", () => {
  test("the bytes equal a read into fresh memory and are a view of the arena, which keeps only them", async () => {
    const { log } = await openLog();
    await append(log, 20);
    const fresh = await log.read(0, 1000);
    const arena = new FetchArena(1 << 20);
    const into = await log.read(0, 1000, { buffers: arena });
    if (fresh.kind !== "records" || into.kind !== "records") throw new Error("records expected");
    expect(into.bytes).toEqual(fresh.bytes);
    expect(into.nextOffset).toBe(fresh.nextOffset);
    expect(into.bytes.buffer).toBe(arena.take(0).buffer);
    // From position 0 the window starts with the returned bytes: the arena keeps exactly them.
    expect(arena.usedBytes).toBe(into.bytes.length);
    await log.close();
  });

  test("two reads into one arena do not overlap, and an empty read keeps nothing", async () => {
    const { log } = await openLog();
    const stored = await append(log, 10);
    const arena = new FetchArena(1 << 20);
    const a = await log.read(0, 2 * stored[0]!.length, { buffers: arena });
    const b = await log.read(4, 2 * stored[0]!.length, { buffers: arena });
    const used = arena.usedBytes;
    const empty = await log.read(20, 1000, { buffers: arena });
    if (a.kind !== "records" || b.kind !== "records" || empty.kind !== "records") throw new Error("records expected");
    expect(empty.bytes.length).toBe(0);
    expect(arena.usedBytes).toBe(used);
    expect(splitBatches(a.bytes).map((s) => s.bytes)).toEqual([stored[0]!, stored[1]!]);
    expect(splitBatches(b.bytes).map((s) => s.bytes)).toEqual([stored[2]!, stored[3]!]);
    expect(b.bytes.byteOffset).toBeGreaterThanOrEqual(a.bytes.byteOffset + a.bytes.length);
    await log.close();
  });

  test("a consumer going on from where it stopped reads no more than max bytes and one batch header", async () => {
    const { fs, log } = await openLog();
    const stored = await append(log, 40);
    const maxBytes = 5 * stored[0]!.length;
    const arena = new FetchArena(1 << 20);
    const first = await log.read(0, maxBytes, { buffers: arena });
    if (first.kind !== "records") throw new Error("records expected");
    fs.log.length = 0;
    arena.reset();
    const next = await log.read(first.nextOffset, maxBytes, { buffers: arena });
    if (next.kind !== "records") throw new Error("records expected");
    expect(splitBatches(next.bytes).map((s) => s.bytes)).toEqual(stored.slice(5, 10));
    expect(readLengths(fs)).toEqual([maxBytes + 61]);
    await log.close();
  });

  test("a first batch larger than max bytes (minOneBatch) is read whole into the arena", async () => {
    const { log } = await openLog();
    const stored = await append(log, 3, 5, 400);
    const arena = new FetchArena(1 << 20);
    const one = await log.read(0, 100, { buffers: arena, minOneBatch: true });
    if (one.kind !== "records") throw new Error("records expected");
    expect(one.bytes).toEqual(stored[0]!);
    expect(one.bytes.buffer).toBe(arena.take(0).buffer);
    await log.close();
  });

  test("a read larger than what is left of the arena gets fresh memory and is still right", async () => {
    const { log } = await openLog();
    const stored = await append(log, 10);
    const arena = new FetchArena(stored[0]!.length);
    const all = await log.read(0, 1 << 20, { buffers: arena });
    if (all.kind !== "records") throw new Error("records expected");
    expect(splitBatches(all.bytes).map((s) => s.bytes)).toEqual(stored);
    expect(all.bytes.buffer).not.toBe(arena.take(0).buffer);
    await log.close();
  });
});

describe("FetchArena and its pool", () => {
  test("take hands out consecutive pieces, giveBack shortens the last one, reset frees all", () => {
    const arena = new FetchArena(100);
    const a = arena.take(30);
    const b = arena.take(30);
    expect(b.byteOffset).toBe(a.byteOffset + 30);
    arena.giveBack(10);
    expect(arena.usedBytes).toBe(40);
    // A second giveBack for the same piece changes nothing.
    arena.giveBack(0);
    expect(arena.usedBytes).toBe(40);
    const big = arena.take(70);
    expect(big.buffer).not.toBe(a.buffer);
    arena.giveBack(0);
    expect(arena.usedBytes).toBe(40);
    arena.reset();
    expect(arena.take(100).byteOffset).toBe(a.byteOffset);
  });

  test("the pool reuses idle arenas that are large enough, keeps at most two, and bounds their size", () => {
    const pool = new FetchArenaPool();
    const a = pool.acquire(10);
    const b = pool.acquire(3 << 20);
    expect(a.capacityBytes).toBe(1 << 20);
    pool.release(a);
    pool.release(b);
    expect(pool.acquire(2 << 20)).toBe(b);
    pool.release(b);
    expect(pool.acquire(100)).toBe(a);
    pool.release(a);
    pool.release(pool.acquire(8 << 20));
    expect(pool.idleCount).toBe(2);
    expect(pool.acquire(1 << 30).capacityBytes).toBe(FETCH_ARENA_BYTES_MAX);
  });
});
