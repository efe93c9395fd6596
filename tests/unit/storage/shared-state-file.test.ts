/**
 * The rules the small shared state files keep (storage/shared-state-file.ts): a change is served only once
 * saved, a change to the same value saves nothing, changes and re-reads run in order, a failed save
 * poisons every later change, and a damaged re-read keeps the value held.
 */
import { describe, expect, test } from "bun:test";
import { FatalError } from "../../../src/errors/errors.ts";
import { SharedStateFile } from "../../../src/storage/shared-state-file.ts";

function harness(initial: number[]) {
  const saved: number[][] = [];
  let onDisk = [...initial];
  let failSave: Error | undefined;
  let failLoad: Error | undefined;
  let releaseSave: (() => void) | undefined;
  const file = new SharedStateFile<number[]>(initial, {
    what: "the test store",
    save: async (next) => {
      if (releaseSave === undefined) {
        await new Promise<void>((resolve) => (releaseSave = resolve));
      }
      if (failSave !== undefined) throw failSave;
      saved.push(next);
      onDisk = [...next];
    },
    load: async () => {
      if (failLoad !== undefined) throw failLoad;
      return [...onDisk];
    },
    same: (a, b) => a.length === b.length && a.every((x, i) => x === b[i]),
  });
  return {
    file,
    saved,
    setDisk: (values: number[]) => (onDisk = values),
    failSave: (e: Error) => (failSave = e),
    failLoad: (e: Error | undefined) => (failLoad = e),
    /** Saves complete at once from now on. */
    release: () => {
      const r = releaseSave;
      releaseSave = () => undefined;
      r?.();
    },
  };
}

describe("SharedStateFile", () => {
  test("a change is served only once its save completed, and listeners hear of it then", async () => {
    const h = harness([1]);
    const heard: number[][] = [];
    h.file.onChange(() => heard.push(h.file.value));
    const changed = h.file.change((current) => [...current, 2]);
    await Promise.resolve();
    expect(h.file.value).toEqual([1]);
    expect(heard).toEqual([]);
    h.release();
    await changed;
    expect(h.file.value).toEqual([1, 2]);
    expect(heard).toEqual([[1, 2]]);
  });

  test("changes run in order, each on the value the one before made; the same value saves nothing", async () => {
    const h = harness([]);
    h.release();
    await Promise.all([h.file.change((c) => [...c, 1]), h.file.change((c) => [...c, 2]), h.file.change((c) => c)]);
    expect(h.saved).toEqual([[1], [1, 2]]);
    expect(h.file.value).toEqual([1, 2]);
  });

  test("a failed save poisons the store: the value stays, every later change is a FatalError", async () => {
    const h = harness([1]);
    h.release();
    h.failSave(new Error("EIO"));
    await expect(h.file.change((c) => [...c, 2])).rejects.toThrow("EIO");
    expect(h.file.value).toEqual([1]);
    await expect(h.file.change((c) => [...c, 3])).rejects.toBeInstanceOf(FatalError);
    await expect(h.file.change((c) => [...c, 3])).rejects.toThrow("the test store failed earlier; restart to recover");
  });

  test("refresh serves what the file holds now and says whether it differed; a damaged read keeps the value held", async () => {
    const h = harness([1]);
    h.release();
    expect(await h.file.refresh()).toBe(false);
    h.setDisk([1, 5]);
    expect(await h.file.refresh()).toBe(true);
    expect(h.file.value).toEqual([1, 5]);
    h.failLoad(new Error("damaged"));
    await expect(h.file.refresh()).rejects.toThrow("damaged");
    expect(h.file.value).toEqual([1, 5]);
    // The next change still runs after the failed read.
    h.failLoad(undefined);
    await h.file.change((c) => [...c, 6]);
    expect(h.file.value).toEqual([1, 5, 6]);
  });
});
