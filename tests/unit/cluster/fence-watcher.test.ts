/**
 * The fence watcher: applies what peers append to their fence logs, incrementally, never its own log,
 * re-reads a log that shrank, skips corrupt lines.
 */
import { describe, expect, test } from "bun:test";
import { FenceWatcher } from "../../../src/cluster/fence-watcher.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { FenceLogWriter, fenceLogPath } from "../../../src/storage/fence-log.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const T0 = 1_700_000_000_000;

function watcherFor(fs: MemoryFs, selfId: number) {
  const applied: [number, number][] = [];
  const watcher = new FenceWatcher({ fs, dataDir: DATA, selfId, apply: (producerId, epoch) => void applied.push([producerId, epoch]), log: silentLogger });
  return { watcher, applied };
}

describe("fence watcher", () => {
  test("applies the fences of every peer once, in order, and skips its own log", async () => {
    const fs = new MemoryFs();
    const self = await FenceLogWriter.open(fs, DATA, 0);
    const peer1 = await FenceLogWriter.open(fs, DATA, 1);
    const peer2 = await FenceLogWriter.open(fs, DATA, 2);
    await self.append({ producerId: 10, epoch: 1, timestampMs: T0 });
    await peer1.append({ producerId: 11, epoch: 1, timestampMs: T0 });
    await peer1.append({ producerId: 11, epoch: 2, timestampMs: T0 });
    await peer2.append({ producerId: 12, epoch: 5, timestampMs: T0 });
    const { watcher, applied } = watcherFor(fs, 0);
    expect((await watcher.poll()).length).toBe(3);
    expect(applied).toEqual([
      [11, 1],
      [11, 2],
      [12, 5],
    ]);
    // Nothing new: nothing applied again.
    expect(await watcher.poll()).toEqual([]);
    await peer2.append({ producerId: 12, epoch: 6, timestampMs: T0 });
    await watcher.poll();
    expect(applied.at(-1)).toEqual([12, 6]);
    expect(applied).toHaveLength(4);
  });

  test("an empty data directory (single broker, no peers) is a quiet no-op", async () => {
    const { watcher, applied } = watcherFor(new MemoryFs(), 0);
    expect(await watcher.poll()).toEqual([]);
    expect(applied).toEqual([]);
  });

  test("a log that shrank is read again from the start; a corrupt line is skipped", async () => {
    const fs = new MemoryFs();
    const peer = await FenceLogWriter.open(fs, DATA, 1);
    await peer.append({ producerId: 1, epoch: 1, timestampMs: T0 });
    await peer.append({ producerId: 2, epoch: 1, timestampMs: T0 });
    const { watcher, applied } = watcherFor(fs, 0);
    await watcher.poll();
    expect(watcher.offsetOf(1)).toBeGreaterThan(0);
    // The peer's log is replaced by a shorter one whose only line is damaged, then a good one follows.
    const path = fenceLogPath(DATA, 1);
    await fs.unlink(path);
    const handle = await fs.open(path, "w");
    await handle.write(new TextEncoder().encode('{"format":"producer-fence","version":1,"crc32":1,"body":{}}\n'), 0);
    await handle.close();
    const replaced = await FenceLogWriter.open(fs, DATA, 1);
    await replaced.append({ producerId: 3, epoch: 4, timestampMs: T0 });
    await watcher.poll();
    expect(applied).toEqual([
      [1, 1],
      [2, 1],
      [3, 4],
    ]);
  });
});
