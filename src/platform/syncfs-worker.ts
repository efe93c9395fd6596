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
 * The worker is started with postMessage once and from then on lives in a loop of plain system calls:
 * blocked in read(2) on a request pipe, it wakes for 8 bytes from the main thread, syncs, and writes an
 * 8-byte answer (errno, and which call failed) to a reply pipe, which the main thread reads on its own
 * event loop (Bun polls a pipe's stream there). Each call so costs the main thread two small pipe
 * operations and no other thread. Earlier versions were slower: postMessage both ways made Bun's event
 * loop poll instead of sleep while it waited for the answer (0.46 ms of CPU per call against 0.21 ms,
 * scripts/bench-fsync.ts's method, one file), and postMessage one way with the answer read by Bun's
 * file-work pool put a third thread and its wake-ups on every call (in a 16-producer transaction load,
 * 33 against 29 context switches per transaction, and 0.17-0.19 against 0.14 ms of the worker thread's CPU).
 * Closing the request pipe ends the worker's loop; the worker then closes the descriptors it used.
 *
 * Linux 5.8 or later only (glibc's libc.so.6; older kernels' syncfs does not report writeback errors).
 * Anywhere else, or if the library or the first call fails at start-up,
 * `startSyncfsSyncer` answers undefined with the reason and the broker fsyncs file by file.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { closeSync, fstatSync, openSync, writeSync } from "node:fs";
import { release } from "node:os";
import type { FilesystemSyncer } from "./batched-sync.ts";

const WORKER_SOURCE = `
import { dlopen, FFIType, ptr, read } from "bun:ffi";
let libc;
try {
  libc = dlopen("libc.so.6", {
    syncfs: { args: [FFIType.i32], returns: FFIType.i32 },
    fdatasync: { args: [FFIType.i32], returns: FFIType.i32 },
    read: { args: [FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i64 },
    write: { args: [FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i64 },
    close: { args: [FFIType.i32], returns: FFIType.i32 },
    __errno_location: { args: [], returns: FFIType.ptr },
  }).symbols;
  postMessage({ ready: true });
} catch (error) {
  postMessage({ ready: false, reason: String((error && error.message) || error) });
}
const EINTR = 4;
const request = new Int32Array(2);
const requestPtr = ptr(request);
const answer = new Int32Array(2);
const answerPtr = ptr(answer);
onmessage = (event) => {
  const [anchorFd, requestFd, replyFd] = event.data;
  // From here on the thread lives in this loop, blocked in read(2) between calls: a request wakes it
  // directly, with no event loop in between. End of file (the main thread closed its end) ends it.
  for (;;) {
    const got = Number(libc.read(requestFd, requestPtr, 8));
    if (got === 0) break;
    if (got < 0) {
      if (read.i32(libc.__errno_location(), 0) === EINTR) continue;
      break;
    }
    let failedCall = 0;
    let result = libc.syncfs(anchorFd);
    if (result === 0) {
      failedCall = 1;
      result = libc.fdatasync(anchorFd);
    }
    answer[0] = result === 0 ? 0 : read.i32(libc.__errno_location(), 0);
    answer[1] = failedCall;
    // 8 bytes are less than PIPE_BUF: the write is whole or fails; a failure here leaves the caller
    // waiting, so it ends the loop instead, and the main thread sees the reply pipe close.
    if (Number(libc.write(replyFd, answerPtr, 8)) !== 8) break;
  }
  libc.close(replyFd);
  libc.close(requestFd);
  libc.close(anchorFd);
  process.exit(0);
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

/** A pipe: [read end, write end], both close-on-exec. */
function openPipe(): [number, number] {
  const { symbols } = dlopen("libc.so.6", { pipe2: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 } });
  const fds = new Int32Array(2);
  const O_CLOEXEC = 0o2000000;
  if (symbols.pipe2(ptr(fds), O_CLOEXEC) !== 0) throw new Error("pipe2 failed");
  return [fds[0]!, fds[1]!];
}

const REQUEST = new Uint8Array(ANSWER_BYTES);

/** A reader of the pipe's read end. Bun polls a pipe's stream on the event loop itself: no file-work thread. */
function readPipe(fd: number) {
  return Bun.file(fd).stream().getReader();
}

/** syncfs(2) through a worker started by `spawnSyncfsWorker`, on the file system of `anchorFd`. */
export class WorkerSyncer implements FilesystemSyncer {
  /** Callers waiting for an answer, in the order the worker answers them. */
  private readonly waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  private readonly requestWriteFd: number;
  private readonly replyReadFd: number;
  private readonly replies: ReturnType<typeof readPipe>;
  /** Every descriptor handed to or opened for this syncer (the anchor, both ends of both pipes). */
  readonly descriptors: readonly number[];
  /** Reply bytes read but not yet a whole answer (a read may end inside one). */
  private partial = new Uint8Array(0);
  private reading = false;
  private closed = false;
  private broken: Error | undefined;

  /**
   * Hands `anchorFd` (a descriptor on the file system to sync, `dir` in messages) to `worker`, which owns
   * and closes it from now on, with its ends of the two pipes.
   */
  constructor(
    worker: Worker,
    anchorFd: number,
    readonly dev: number,
    private readonly dir: string,
  ) {
    const [requestReadFd, requestWriteFd] = openPipe();
    const [replyReadFd, replyWriteFd] = openPipe();
    this.requestWriteFd = requestWriteFd;
    this.replyReadFd = replyReadFd;
    this.replies = readPipe(replyReadFd);
    this.descriptors = [anchorFd, requestReadFd, requestWriteFd, replyReadFd, replyWriteFd];
    worker.onerror = (event) => this.fail(new Error(`the syncfs worker failed: ${event.message}`));
    worker.postMessage([anchorFd, requestReadFd, replyWriteFd]);
  }

  syncAll(): Promise<void> {
    if (this.broken !== undefined) return Promise.reject(this.broken);
    return new Promise<void>((resolve, reject) => {
      try {
        // 8 bytes are less than PIPE_BUF, and at most a few calls are ever queued: the write is whole.
        writeSync(this.requestWriteFd, REQUEST);
      } catch (error) {
        reject(error);
        return;
      }
      this.waiting.push({ resolve, reject });
      this.readAnswers();
    });
  }

  /**
   * Stops the worker; calls still running are rejected. The worker finishes a call it is inside of, then
   * finds the request pipe closed and closes its own descriptors: a descriptor is only ever closed by the
   * thread that uses it, so no late answer can land in a file that reused its number.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.fail(new Error("the syncfs worker was stopped"));
    closeQuietly(this.requestWriteFd);
    // Cancelling ends a read in progress too; the descriptor is closed once the stream has let go of it.
    this.replies.cancel().then(
      () => closeQuietly(this.replyReadFd),
      () => closeQuietly(this.replyReadFd),
    );
  }

  /** Reads answers while calls wait for them; one read at a time, on the event loop. */
  private readAnswers(): void {
    if (this.reading || this.waiting.length === 0 || this.broken !== undefined) return;
    this.reading = true;
    this.replies.read().then(
      ({ value, done }) => {
        this.reading = false;
        if (this.closed) return;
        if (done) return this.fail(new Error("the syncfs worker stopped answering"));
        this.take(value);
        this.readAnswers();
      },
      (error: unknown) => {
        this.reading = false;
        if (this.closed) return;
        this.fail(new Error(`reading the syncfs worker's answer failed: ${error instanceof Error ? error.message : String(error)}`));
      },
    );
  }

  /** Settles one waiting call per whole answer in `bytes`. */
  private take(bytes: Uint8Array): void {
    let data = bytes;
    if (this.partial.length > 0) {
      data = new Uint8Array(this.partial.length + bytes.length);
      data.set(this.partial);
      data.set(bytes, this.partial.length);
    }
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    let at = 0;
    for (; at + ANSWER_BYTES <= data.length; at += ANSWER_BYTES) {
      const waiter = this.waiting.shift();
      if (waiter === undefined) return this.fail(new Error("the syncfs worker answered a call nobody made"));
      const errno = view.getInt32(at, true);
      if (errno === 0) waiter.resolve();
      else waiter.reject(new SyncfsError(CALL_NAMES[view.getInt32(at + 4, true)] ?? "syncfs", errno, this.dir));
    }
    this.partial = data.slice(at);
  }

  private fail(error: Error): void {
    this.broken ??= error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(error);
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Only a descriptor that is already gone fails to close; nothing was written through it.
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
/**
 * Whether syncfs(2) reports writeback errors on this kernel: Linux does from 5.8 (before, syncfs returned
 * 0 even when pages failed to reach the disk, and a batch would be acknowledged on data never written).
 * `release` is uname's (os.release()); one that cannot be read counts as too old.
 */
export function syncfsReportsErrors(release: string): boolean {
  const match = /^(\d+)\.(\d+)/.exec(release);
  if (match === null) return false;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  return major > 5 || (major === 5 && minor >= 8);
}

export async function startSyncfsSyncer(dir: string, kernelRelease: string = release()): Promise<SyncfsStart> {
  if (process.platform === "linux" && !syncfsReportsErrors(kernelRelease)) {
    return { syncer: undefined, reason: `Linux ${kernelRelease} is older than 5.8, whose syncfs does not report writeback errors` };
  }
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
