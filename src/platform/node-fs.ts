/**
 * The real file system behind the `Fs` port, on node:fs/promises (which Bun implements natively).
 * Durability comes only from explicit fsync calls: nothing relies on Bun's write `flush` options.
 *
 * Writes are synchronous underneath (the promise is settled when it is returned). A write only copies
 * into the page cache, a few microseconds for the log's and journals' appends, while an asynchronous one
 * costs two thread hops (to Bun's file-work pool and back through the event loop), each worth more than
 * the copy; on the transaction path that was one extra hop before every fsync. fsync and everything else
 * that may wait on the device stay asynchronous.
 *
 * Reads of bytes this handle wrote itself, within the last RECENT_WRITE_BYTES of what it wrote, are
 * synchronous for the same reason: they are in the page cache (written moments ago), so the read is a
 * copy, while an asynchronous read costs two thread hops per call. A consumer at the end of a log reads
 * exactly those bytes, one partition after another; with 16 producers and a read_committed consumer,
 * serving them synchronously took the consumer's commit-to-visible time from 18–23 ms to 11 ms at p50
 * (docs/benchmarks.md). Anything older, or found in the file when it was opened, may have to come from
 * the device and is read asynchronously.
 */
import { readSync, writeSync } from "node:fs";
import * as fsp from "node:fs/promises";
import type { BatchedSync, SyncTarget } from "./batched-sync.ts";
import type { DiskSpace, FileHandle, FileStat, Fs, OpenMode } from "./fs.ts";

/** How far back from the end of its own writes a handle reads synchronously (see the header). */
export const RECENT_WRITE_BYTES = 4 * 1024 * 1024;

/**
 * Whether a read at `position` is served synchronously: it starts at or after the handle's first own write
 * (`ownWritesFrom`) and within RECENT_WRITE_BYTES of the end of what it wrote (`endPosition`).
 */
export function readsRecentWrite(position: number, ownWritesFrom: number, endPosition: number): boolean {
  return position >= ownWritesFrom && position >= endPosition - RECENT_WRITE_BYTES;
}

class NodeFileHandle implements FileHandle {
  private endPosition: number;
  /** Where this handle's own writes begin: the file's size when it was opened, or a truncation point. */
  private ownWritesFrom: number;
  private readonly syncTarget: SyncTarget;
  private readonly pendingSyncs = new Set<Promise<void>>();
  constructor(
    private readonly handle: fsp.FileHandle,
    size: number,
    dev: number,
    private readonly batched: BatchedSync | undefined,
  ) {
    this.endPosition = size;
    this.ownWritesFrom = size;
    this.syncTarget = { dev, fsync: () => handle.sync() };
  }
  async write(data: Uint8Array, position?: number): Promise<void> {
    let at = position ?? this.endPosition;
    let offset = 0;
    while (offset < data.length) {
      const bytesWritten = writeSync(this.handle.fd, data, offset, data.length - offset, at);
      offset += bytesWritten;
      at += bytesWritten;
    }
    if (at > this.endPosition) this.endPosition = at;
  }
  async read(length: number, position: number): Promise<Uint8Array> {
    const buffer = new Uint8Array(length);
    const total = await this.readInto(buffer, position);
    return total === length ? buffer : buffer.subarray(0, total);
  }
  async readInto(target: Uint8Array, position: number): Promise<number> {
    const length = target.length;
    let total = 0;
    const recent = readsRecentWrite(position, this.ownWritesFrom, this.endPosition);
    while (total < length) {
      const at = position + total;
      const bytesRead = recent
        ? readSync(this.handle.fd, target, total, length - total, at)
        : (await this.handle.read(target, total, length - total, at)).bytesRead;
      if (bytesRead === 0) break;
      total += bytesRead;
    }
    return total;
  }
  async truncate(length: number): Promise<void> {
    await this.handle.truncate(length);
    this.endPosition = length;
    // What this handle wrote before the cut stays its own; a cut below its first write makes everything
    // from the cut on its own (nothing is there until it writes it).
    this.ownWritesFrom = Math.min(this.ownWritesFrom, length);
  }
  async fsync(): Promise<void> {
    if (this.batched === undefined) return this.handle.sync();
    // A batched fsync starts at the end of the turn, or later: a close() called meanwhile must wait for it,
    // as Node's FileHandle.close waits for an fsync already running.
    const synced = this.batched.sync(this.syncTarget);
    this.pendingSyncs.add(synced);
    try {
      await synced;
    } finally {
      this.pendingSyncs.delete(synced);
    }
  }
  async size(): Promise<number> {
    return this.endPosition;
  }
  async close(): Promise<void> {
    if (this.pendingSyncs.size > 0) await Promise.allSettled([...this.pendingSyncs]);
    await this.handle.close();
  }
}

const openFlags: Record<OpenMode, string> = { r: "r", rw: "a+", w: "w+" };

/**
 * The real file system; with `batched`, fsyncs go through it (batched-sync.ts) instead of one fsync(2)
 * per call.
 */
export function createNodeFs(batched?: BatchedSync): Fs {
  return {
    async open(path: string, mode: OpenMode): Promise<FileHandle> {
      // "a+" would force appends to the end on Linux regardless of position; open r+ and create first.
      let handle: fsp.FileHandle;
      if (mode === "rw") {
        try {
          handle = await fsp.open(path, "r+");
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
          handle = await fsp.open(path, "wx+").catch(async (e: NodeJS.ErrnoException) => {
            if (e.code === "EEXIST") return fsp.open(path, "r+");
            throw e;
          });
        }
      } else {
        handle = await fsp.open(path, openFlags[mode]);
      }
      let size: number;
      let dev: number;
      try {
        ({ size, dev } = await handle.stat());
      } catch (error) {
        // Nobody else holds the handle yet: close it here, or the garbage collector would.
        await handle.close().catch(() => undefined);
        throw error;
      }
      return new NodeFileHandle(handle, size, dev, batched);
    },
    async readFile(path: string): Promise<Uint8Array> {
      return new Uint8Array(await fsp.readFile(path));
    },
    async rename(from: string, to: string): Promise<void> {
      await fsp.rename(from, to);
    },
    async fsyncDir(path: string): Promise<void> {
      const handle = await fsp.open(path, "r");
      try {
        if (batched === undefined) await handle.sync();
        else {
          const { dev } = await handle.stat();
          await batched.sync({ dev, fsync: () => handle.sync() });
        }
      } finally {
        await handle.close();
      }
    },
    async mkdirp(path: string): Promise<void> {
      await fsp.mkdir(path, { recursive: true });
    },
    async readdir(path: string): Promise<string[]> {
      return (await fsp.readdir(path)).sort();
    },
    async unlink(path: string): Promise<void> {
      await fsp.unlink(path);
    },
    async rmrf(path: string): Promise<void> {
      await fsp.rm(path, { recursive: true, force: true });
    },
    async stat(path: string): Promise<FileStat | undefined> {
      try {
        const s = await fsp.stat(path);
        return { size: s.size, isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw error;
      }
    },
    async diskSpace(path: string): Promise<DiskSpace> {
      const s = await fsp.statfs(path);
      // Counted in fragments (f_frsize) where the platform says it, as Java's FileStore does; else blocks.
      const unit = (s as { frsize?: number }).frsize ?? s.bsize;
      return { totalBytes: s.blocks * unit, usableBytes: s.bavail * unit };
    },
  };
}

/** The real file system with one fsync(2) per call. */
export const nodeFs: Fs = createNodeFs();
