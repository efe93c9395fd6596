import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SyncfsError, spawnSyncfsWorker, startSyncfsSyncer, syncfsReportsErrors, WorkerSyncer } from "../../../src/platform/syncfs-worker.ts";
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

describe("which kernels' syncfs reports writeback errors", () => {
  test("Linux 5.8 and later; earlier ones, and a release that cannot be read, do not", () => {
    for (const release of ["5.8.0", "5.8.0-63-generic", "5.10.0-28-amd64", "6.1.0", "6.18.44-fc-v1045", "10.0.0"]) expect(syncfsReportsErrors(release)).toBe(true);
    for (const release of ["5.7.19", "5.4.0-150-generic", "4.19.0-26-amd64", "3.10.0-1160.el7.x86_64", "", "unknown"]) expect(syncfsReportsErrors(release)).toBe(false);
  });
});

describe.if(process.platform === "linux")("the syncfs worker", () => {
  test("on a kernel older than 5.8 it is not started: the broker fsyncs file by file, and the reason says why", async () => {
    const start = await startSyncfsSyncer(tempDir(), "5.4.0-150-generic");
    expect(start.syncer).toBeUndefined();
    expect("reason" in start ? start.reason : undefined).toBe("Linux 5.4.0-150-generic is older than 5.8, whose syncfs does not report writeback errors");
  });

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
    // What each descriptor of this process points to: a path, or pipe:[inode].
    const openFiles = () =>
      readdirSync("/proc/self/fd").map((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          return ""; // closed between the listing and the read (the listing's own descriptor)
        }
      });
    const dir = tempDir();
    const start = await startSyncfsSyncer(dir);
    if (start.syncer === undefined) throw new Error(`no syncfs here: ${start.reason}`);
    // The syncer's files, not its descriptor numbers: other code in this test process may open and close
    // descriptors meanwhile, and Bun may hold duplicates of a pipe end, which must be closed too.
    const files = new Set(start.syncer.descriptors.map((fd) => readlinkSync(`/proc/self/fd/${fd}`)));
    const kinds = [...files].map((file) => (file === realpathSync(dir) ? "dir" : file.startsWith("pipe:[") ? "pipe" : file));
    expect(kinds.sort()).toEqual(["dir", "pipe", "pipe"]);
    const running = start.syncer.syncAll();
    start.syncer.close();
    await expect(running).rejects.toThrow("stopped");
    // The worker finishes the running syncfs, which lasts as long as the device needs to write what the
    // whole file system has dirty, then finds the request pipe closed, closes its three and exits.
    let stillOpen = [...files];
    await waitUntil(
      () => (stillOpen = openFiles().filter((file) => files.has(file))).length === 0,
      "the syncer's files to be closed",
      60_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; still open: ${stillOpen.join(", ")}`);
    });
  }, 70_000);

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
