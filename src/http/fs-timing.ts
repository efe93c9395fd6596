/**
 * A timing decorator for the Fs port: every FileHandle.fsync and Fs.fsyncDir is measured and reported,
 * for the fsync latency histogram of /metrics. Everything else passes straight through.
 *
 * It lives in http/ (the metrics' home) rather than platform/, because platform must not know about
 * metrics; main.ts wraps the real Fs with it before handing it to the broker. A failed fsync is reported
 * with its duration too and then rethrown unchanged: what it means (fatal) is the caller's business.
 */
import type { FileHandle, Fs, OpenMode } from "../platform/fs.ts";
import type { FsyncKind } from "./metrics.ts";

export type FsyncObserver = (kind: FsyncKind, durationMs: number) => void;

async function timed<T>(kind: FsyncKind, monotonicMs: () => number, observe: FsyncObserver, op: () => Promise<T>): Promise<T> {
  const startedMs = monotonicMs();
  try {
    return await op();
  } finally {
    observe(kind, monotonicMs() - startedMs);
  }
}

function timedHandle(handle: FileHandle, monotonicMs: () => number, observe: FsyncObserver): FileHandle {
  return {
    write: (data, position) => handle.write(data, position),
    read: (length, position) => handle.read(length, position),
    ...(handle.readInto === undefined ? {} : { readInto: (target: Uint8Array, position: number) => handle.readInto!(target, position) }),
    truncate: (length) => handle.truncate(length),
    fsync: () => timed("file", monotonicMs, observe, () => handle.fsync()),
    size: () => handle.size(),
    close: () => handle.close(),
  };
}

/** `fs` with its fsyncs timed by `monotonicMs` (a Clock's monotonicMs) and reported to `observe`. */
export function timedFs(fs: Fs, monotonicMs: () => number, observe: FsyncObserver): Fs {
  return {
    open: async (path: string, mode: OpenMode) => timedHandle(await fs.open(path, mode), monotonicMs, observe),
    readFile: (path) => fs.readFile(path),
    rename: (from, to) => fs.rename(from, to),
    fsyncDir: (path) => timed("dir", monotonicMs, observe, () => fs.fsyncDir(path)),
    mkdirp: (path) => fs.mkdirp(path),
    readdir: (path) => fs.readdir(path),
    unlink: (path) => fs.unlink(path),
    rmrf: (path) => fs.rmrf(path),
    stat: (path) => fs.stat(path),
  };
}
