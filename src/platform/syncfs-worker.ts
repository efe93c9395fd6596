/**
 * syncfs(2) for the batched fsyncs (batched-sync.ts), run on a worker thread through bun:ffi: Bun has no
 * binding for it, and the call blocks for as long as the device takes, which the event loop must not.
 *
 * Each call is syncfs(anchor) then fdatasync(anchor), the anchor being a descriptor of the data
 * directory. The fdatasync is there for file systems without a journal (ext2, or ext4 made without one,
 * like this project's test machines): their syncfs flushes the device cache before it has waited for the
 * inode-table writes it started, so an appended file's new size could still sit in that cache. A second
 * flush after syncfs returns covers them; on a journalling file system it is a cheap no-op or one more
 * flush.
 *
 * Requests go to the worker with postMessage; answers come back through a pipe, 8 bytes each (errno, and
 * which call failed), read by Bun's file-work pool. Why not postMessage both ways: while the main thread
 * waits for a message from a worker, Bun's event loop polls instead of sleeping, which measured 0.46 ms of
 * CPU per call against 0.21 ms with the pipe (scripts/bench-fsync.ts's method, one file).
 *
 * Linux only (glibc's libc.so.6). Anywhere else, or if the library or the first call fails at start-up,
 * `startSyncfsSyncer` answers undefined with the reason and the broker fsyncs file by file.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { closeSync, fstatSync, openSync, read } from "node:fs";
import type { FilesystemSyncer } from "./batched-sync.ts";

const WORKER_SOURCE = `
import { dlopen, FFIType, ptr, read } from "bun:ffi";
let libc;
try {
  libc = dlopen("libc.so.6", {
    syncfs: { args: [FFIType.i32], returns: FFIType.i32 },
    fdatasync: { args: [FFIType.i32], returns: FFIType.i32 },
    write: { args: [FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i64 },
    __errno_location: { args: [], returns: FFIType.ptr },
  }).symbols;
  postMessage({ ready: true });
} catch (error) {
  postMessage({ ready: false, reason: String((error && error.message) || error) });
}
const answer = new Int32Array(2);
const answerPtr = ptr(answer);
onmessage = (event) => {
  const [anchorFd, replyFd] = event.data;
  let failedCall = 0;
  let result = libc.syncfs(anchorFd);
  if (result === 0) {
    failedCall = 1;
    result = libc.fdatasync(anchorFd);
  }
  answer[0] = result === 0 ? 0 : read.i32(libc.__errno_location(), 0);
  answer[1] = failedCall;
  // 8 bytes are less than PIPE_BUF: the write is whole or fails; a failure here leaves the caller
  // waiting, so it ends the worker instead, which fails every call.
  if (Number(libc.write(replyFd, answerPtr, 8)) !== 8) throw new Error("the syncfs worker could not answer");
};
`;

const CALL_NAMES = ["syncfs", "fdatasync"] as const;
const ANSWER_BYTES = 8;

export class SyncfsError extends Error {
  constructor(
    readonly call: string,
    readonly errno: number,
    dir: string,
  ) {
    super(`${call} of the file system of ${dir} failed (errno ${errno})`);
    this.name = "SyncfsError";
  }
}

/** A pipe from the worker to the main thread: [read end, write end], both close-on-exec. */
function openReplyPipe(): [number, number] {
  const { symbols } = dlopen("libc.so.6", { pipe2: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 } });
  const fds = new Int32Array(2);
  const O_CLOEXEC = 0o2000000;
  if (symbols.pipe2(ptr(fds), O_CLOEXEC) !== 0) throw new Error("pipe2 failed");
  return [fds[0]!, fds[1]!];
}

/** syncfs(2) through a worker started by `spawnSyncfsWorker`, on the file system of `anchorFd`. */
export class WorkerSyncer implements FilesystemSyncer {
  /** Callers waiting for an answer, in the order the worker answers them. */
  private readonly waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  private reading = false;
  private readonly answer = Buffer.alloc(ANSWER_BYTES);
  private readonly replyReadFd: number;
  private readonly replyWriteFd: number;
  private broken: Error | undefined;

  /** Owns `worker` and `anchorFd` (a descriptor on the file system to sync, `dir` in messages) from now on. */
  constructor(
    private readonly worker: Worker,
    private readonly anchorFd: number,
    readonly dev: number,
    private readonly dir: string,
  ) {
    [this.replyReadFd, this.replyWriteFd] = openReplyPipe();
    worker.onerror = (event) => this.fail(new Error(`the syncfs worker failed: ${event.message}`));
  }

  syncAll(): Promise<void> {
    if (this.broken !== undefined) return Promise.reject(this.broken);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.worker.postMessage([this.anchorFd, this.replyWriteFd]);
      this.readAnswer();
    });
  }

  /** Stops the worker; calls still running are rejected. */
  close(): void {
    const busy = this.waiting.length > 0;
    this.fail(new Error("the syncfs worker was stopped"));
    this.worker.terminate();
    // A worker inside syncfs finishes the call before it stops, then writes its answer to the pipe's
    // descriptor number: closed now, that number could by then name a file opened since. So with a call
    // running the descriptors stay open (close() runs at shutdown, just before the process exits).
    if (busy) return;
    for (const fd of [this.replyWriteFd, this.anchorFd]) {
      try {
        closeSync(fd);
      } catch {
        // Only a descriptor that is already gone fails to close; nothing was written through it.
      }
    }
    this.closeReadEnd();
  }

  /** One read per answer, one at a time: each read takes exactly one answer off the pipe. */
  private readAnswer(): void {
    if (this.reading || this.waiting.length === 0 || this.broken !== undefined) return;
    this.reading = true;
    read(this.replyReadFd, this.answer, 0, ANSWER_BYTES, null, (error, bytesRead) => {
      this.reading = false;
      if (this.broken !== undefined) {
        this.closeReadEnd();
        return;
      }
      if (error !== null || bytesRead !== ANSWER_BYTES) {
        this.fail(new Error(`reading the syncfs worker's answer failed: ${error?.message ?? `${bytesRead} bytes`}`));
        return;
      }
      const waiter = this.waiting.shift()!;
      const errno = this.answer.readInt32LE(0);
      if (errno === 0) waiter.resolve();
      else waiter.reject(new SyncfsError(CALL_NAMES[this.answer.readInt32LE(4)] ?? "syncfs", errno, this.dir));
      this.readAnswer();
    });
  }

  private closeReadEnd(): void {
    try {
      closeSync(this.replyReadFd);
    } catch {
      // already closed
    }
  }

  private fail(error: Error): void {
    this.broken ??= error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(error);
  }
}

/** Starts the worker thread and waits until it has loaded syncfs; the reason when it could not. */
export async function spawnSyncfsWorker(): Promise<{ worker: Worker } | { worker: undefined; reason: string }> {
  if (process.platform !== "linux") return { worker: undefined, reason: `syncfs is Linux only (this is ${process.platform})` };
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
  const worker = new Worker(url);
  const ready = await new Promise<{ ready: boolean; reason?: string }>((resolve) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => resolve({ ready: false, reason: event.message });
  });
  URL.revokeObjectURL(url);
  if (ready.ready) return { worker };
  worker.terminate();
  return { worker: undefined, reason: `bun:ffi could not load syncfs from libc.so.6: ${ready.reason}` };
}

export type SyncfsStart = { syncer: WorkerSyncer } | { syncer: undefined; reason: string };

/** Starts the worker for the file system holding `dir` and checks one call; see the file comment. */
export async function startSyncfsSyncer(dir: string): Promise<SyncfsStart> {
  const spawned = await spawnSyncfsWorker();
  if (spawned.worker === undefined) return { syncer: undefined, reason: spawned.reason };
  const { worker } = spawned;
  let syncer: WorkerSyncer;
  try {
    const anchorFd = openSync(dir, "r");
    syncer = new WorkerSyncer(worker, anchorFd, fstatSync(anchorFd).dev, dir);
  } catch (error) {
    worker.terminate();
    throw error;
  }
  try {
    await syncer.syncAll();
  } catch (error) {
    syncer.close();
    return { syncer: undefined, reason: error instanceof Error ? error.message : String(error) };
  }
  // The worker must not keep a finished process alive.
  worker.unref();
  return { syncer };
}
