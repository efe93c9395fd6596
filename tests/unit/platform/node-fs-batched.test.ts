import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatchedSync, type FilesystemSyncer } from "../../../src/platform/batched-sync.ts";
import { createNodeFs } from "../../../src/platform/node-fs.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A syncer for `dir`'s device that only counts: the real fsyncs are what the test looks at. */
function countingSyncer(dir: string): FilesystemSyncer & { calls: number } {
  return {
    dev: statSync(dir).dev,
    calls: 0,
    async syncAll() {
      this.calls += 1;
    },
  };
}

describe("the real file system with batched fsyncs", () => {
  test("files fsynced together share one syncfs; a file fsynced alone gets its own fsync", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunka-batched-"));
    dirs.push(dir);
    const syncer = countingSyncer(dir);
    const batches: [string, number][] = [];
    const fs = createNodeFs(new BatchedSync({ syncer, minFilesForSyncfs: 3, onBatch: (m, n) => batches.push([m, n]) }));
    const handles = await Promise.all(["a", "b", "c"].map((name) => fs.open(join(dir, name), "rw")));
    for (const handle of handles) await handle.write(new TextEncoder().encode("x"));
    await Promise.all(handles.map((h) => h.fsync()));
    expect(syncer.calls).toBe(1);
    expect(batches).toEqual([["syncfs", 3]]);

    await handles[0]!.write(new TextEncoder().encode("y"));
    await handles[0]!.fsync();
    await fs.fsyncDir(dir);
    expect(syncer.calls).toBe(1);
    expect(batches).toEqual([
      ["syncfs", 3],
      ["fsync", 1],
      ["fsync", 1],
    ]);
    for (const handle of handles) await handle.close();
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("xy");
  });

  test("close() waits for an fsync that is still waiting for its batch", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bunka-batched-"));
    dirs.push(dir);
    const fs = createNodeFs(new BatchedSync({ syncer: countingSyncer(dir), minFilesForSyncfs: 3 }));
    const handle = await fs.open(join(dir, "a"), "rw");
    await handle.write(new TextEncoder().encode("x"));
    // Not awaited: the fsync only starts at the end of the turn, after close() was called.
    const synced = handle.fsync();
    await handle.close();
    await synced;
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("x");
  });
});
