import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SyncfsError, spawnSyncfsWorker, startSyncfsSyncer, WorkerSyncer } from "../../../src/platform/syncfs-worker.ts";
import { waitUntil } from "../../support/wait.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bunka-syncfs-"));
  dirs.push(dir);
  return dir;
}

describe.if(process.platform === "linux")("the syncfs worker", () => {
  test("starts on a directory's file system, syncs it, and refuses calls once closed", async () => {
    const dir = tempDir();
    const start = await startSyncfsSyncer(dir);
    if (start.syncer === undefined) throw new Error(`no syncfs here: ${start.reason}`);
    const { syncer } = start;
    expect(syncer.dev).toBe(statSync(dir).dev);
    await Bun.write(join(dir, "file"), "some bytes");
    // Several calls in flight at once all complete.
    await Promise.all([syncer.syncAll(), syncer.syncAll(), syncer.syncAll()]);
    syncer.close();
    await expect(syncer.syncAll()).rejects.toThrow("stopped");
  });

  test("close() with a call running rejects it", async () => {
    const start = await startSyncfsSyncer(tempDir());
    if (start.syncer === undefined) throw new Error(`no syncfs here: ${start.reason}`);
    const running = start.syncer.syncAll();
    start.syncer.close();
    await expect(running).rejects.toThrow("stopped");
  });

  test("after close() every descriptor it opened is closed again, by the thread that used it", async () => {
    const openFds = () => new Set(readdirSync("/proc/self/fd"));
    const before = openFds();
    const start = await startSyncfsSyncer(tempDir());
    if (start.syncer === undefined) throw new Error(`no syncfs here: ${start.reason}`);
    const opened = [...openFds()].filter((fd) => !before.has(fd));
    // The anchor and two pipes: five descriptors, two on this side and three the worker owns.
    expect(opened.length).toBeGreaterThanOrEqual(5);
    const running = start.syncer.syncAll();
    start.syncer.close();
    await expect(running).rejects.toThrow("stopped");
    // The worker finishes the running call, finds the request pipe closed, closes its three and exits.
    await waitUntil(() => {
      const now = openFds();
      return opened.every((fd) => !now.has(fd));
    }, `descriptors ${opened.join(", ")} closed`);
  });

  test("a failed syncfs is an error naming the call, the errno and the directory", async () => {
    const spawned = await spawnSyncfsWorker();
    if (spawned.worker === undefined) throw new Error(`no syncfs here: ${spawned.reason}`);
    // A descriptor number nothing has open: syncfs answers EBADF (9).
    const syncer = new WorkerSyncer(spawned.worker, 1_000_000, 0, "/nowhere");
    try {
      const error = await syncer.syncAll().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SyncfsError);
      expect((error as SyncfsError).call).toBe("syncfs");
      expect((error as SyncfsError).errno).toBe(9);
      expect((error as SyncfsError).message).toContain("/nowhere");
    } finally {
      syncer.close();
    }
  });

  test("a missing directory is an error, not a silent fallback", async () => {
    await expect(startSyncfsSyncer(join(tempDir(), "missing"))).rejects.toThrow("ENOENT");
  });
});
