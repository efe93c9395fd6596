/**
 * The offsets store in explicit-load mode (cluster mode: group slots move between brokers sharing the data
 * directory): nothing loaded at open, loadSlot with every damage check of a load at open, releaseSlot after
 * the slot's queued writes, reads and writes of a slot not loaded refused (never an empty slot made up),
 * and no clean-shutdown record (a stale one removed at open).
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import type { OffsetCommitEntry } from "../../../src/domain/groups/offsets.ts";
import { cleanShutdownPath } from "../../../src/storage/clean-shutdown.ts";
import { OffsetStore, offsetsDir, offsetsJournalPath, offsetsSlotPath, SlotNotLoadedError } from "../../../src/storage/offset-store.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

const entry = (topic: string, partition: number, offset: number): OffsetCommitEntry => ({
  topic,
  partition,
  offset,
  leaderEpoch: 1,
  metadata: "",
  commitTimestampMs: 1_700_000_000_000,
  expireTimestampMs: null,
});

/** Replaces the bytes at `position` of a file (damage on disk). */
async function damage(fs: MemoryFs, path: string, position: number, bytes: string): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.write(new TextEncoder().encode(bytes), position);
  await handle.fsync();
  await handle.close();
}

const explicit = (fs: MemoryFs) => OffsetStore.open(fs, DATA, { explicitLoad: true });

describe("OffsetStore, explicit-load mode", () => {
  test("no slot is loaded at open; loadSlot reads what another store wrote; release forgets it", async () => {
    const fs = new MemoryFs();
    const a = await explicit(fs);
    expect(a.isLoaded(4)).toBe(false);
    await a.loadSlot(4);
    expect(a.isLoaded(4)).toBe(true);
    await a.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]));
    await a.releaseSlot(4);
    expect(a.isLoaded(4)).toBe(false);

    const b = await explicit(fs);
    expect(b.isLoaded(4)).toBe(false);
    await b.loadSlot(4);
    expect(b.slot(4).committed("g", "t", 0)?.offset).toBe(10);
    await b.mutate(4, (d) => d.commit("g", [entry("t", 0, 11)]));
    await b.releaseSlot(4);
    // A loads the slot again from the files, not from its memory.
    await a.loadSlot(4);
    expect(a.slot(4).committed("g", "t", 0)?.offset).toBe(11);
  });

  test("reads and writes of a slot not loaded are refused, and nothing is written for them", async () => {
    const fs = new MemoryFs();
    const store = await explicit(fs);
    expect(() => store.slot(4)).toThrow(SlotNotLoadedError);
    await expect(store.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]))).rejects.toBeInstanceOf(SlotNotLoadedError);
    await store.idle();
    expect(await fs.stat(offsetsSlotPath(DATA, 4))).toBeUndefined();
    expect(await fs.stat(offsetsJournalPath(DATA, 4))).toBeUndefined();
    // After a release too: the slot's files stay as the last write left them.
    await store.loadSlot(4);
    await store.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]));
    await store.releaseSlot(4);
    const journal = await fs.readFile(offsetsJournalPath(DATA, 4));
    await expect(store.mutate(4, (d) => d.commit("g", [entry("t", 0, 99)]))).rejects.toBeInstanceOf(SlotNotLoadedError);
    expect(await fs.readFile(offsetsJournalPath(DATA, 4))).toEqual(journal);
  });

  test("release lets the writes queued before it land and refuses the ones after it", async () => {
    const fs = new MemoryFs();
    const store = await explicit(fs);
    await store.loadSlot(4);
    const queued = store.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]));
    const released = store.releaseSlot(4);
    const late = store.mutate(4, (d) => d.commit("g", [entry("t", 0, 20)]));
    expect(await queued).toEqual([0]);
    await expect(late).rejects.toBeInstanceOf(SlotNotLoadedError);
    await released;
    const other = await explicit(fs);
    await other.loadSlot(4);
    expect(other.slot(4).committed("g", "t", 0)?.offset).toBe(10);
  });

  test("a damaged slot fails its load with CorruptStateError, stays unloaded, and does not stop the open or other slots", async () => {
    const fs = new MemoryFs();
    const a = await explicit(fs);
    await a.loadSlot(4);
    await a.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]));
    await a.mutate(4, (d) => d.commit("g", [entry("t", 0, 11)]));
    await a.releaseSlot(4);
    const path = offsetsJournalPath(DATA, 4);
    const good = await fs.readFile(path);
    // A digit of the first record (not the last line, which could pass for a torn write) changed.
    const text = new TextDecoder().decode(good);
    const at = text.indexOf('"offset":10');
    expect(at).toBeGreaterThan(0);
    await damage(fs, path, at + '"offset":'.length, "7");

    const b = await explicit(fs);
    const error = await b.loadSlot(4).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as CorruptStateError).path).toStartWith(path);
    expect(b.isLoaded(4)).toBe(false);
    expect(() => b.slot(4)).toThrow(SlotNotLoadedError);
    await expect(b.mutate(4, (d) => d.commit("g", [entry("t", 0, 12)]))).rejects.toBeInstanceOf(SlotNotLoadedError);
    await b.loadSlot(5);
    expect(b.isLoaded(5)).toBe(true);
    // Not cached: once the file is sound again, the load succeeds.
    await damage(fs, path, at + '"offset":'.length, "1");
    await b.loadSlot(4);
    expect(b.slot(4).committed("g", "t", 0)?.offset).toBe(11);
  });

  test("no clean-shutdown record is written, and one left by a single-broker run is removed at open", async () => {
    const fs = new MemoryFs();
    const record = cleanShutdownPath(offsetsDir(DATA));
    const single = await OffsetStore.open(fs, DATA);
    await single.mutate(4, (d) => d.commit("g", [entry("t", 0, 10)]));
    await single.close();
    expect(await fs.stat(record)).toBeDefined();

    const store = await explicit(fs);
    expect(await fs.stat(record)).toBeUndefined();
    await store.loadSlot(4);
    await store.mutate(4, (d) => d.commit("g", [entry("t", 0, 11)]));
    await store.close();
    expect(await fs.stat(record)).toBeUndefined();
  });
});
