/**
 * Shared helpers for the partition log tests: a small-segment config, batch splitting, a file-system
 * wrapper that counts fsyncs, and byte-level corruption of stored files.
 */
import type { FileHandle, Fs } from "../../../../src/platform/fs.ts";
import { baseOffsetAt, batchSizeAt, lastOffsetDeltaAt } from "../../../../src/protocol/records/record-batch.ts";
import type { LogConfig, PartitionLog } from "../../../../src/storage/log/partition-log.ts";

export const DIR = "/data/topic-0";

export function testConfig(overrides: Partial<LogConfig> = {}): LogConfig {
  return {
    segmentBytes: 1024,
    segmentMs: 7 * 24 * 3600 * 1000,
    retentionMs: -1,
    retentionBytes: -1,
    indexIntervalBytes: 128,
    ...overrides,
  };
}

export interface StoredBatch {
  baseOffset: number;
  lastOffset: number;
  bytes: Uint8Array;
}

/** Splits concatenated batches (a read result or a segment file). */
export function splitBatches(bytes: Uint8Array): StoredBatch[] {
  const out: StoredBatch[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = batchSizeAt(bytes, at);
    const baseOffset = baseOffsetAt(bytes, at);
    out.push({ baseOffset, lastOffset: baseOffset + lastOffsetDeltaAt(bytes, at), bytes: bytes.slice(at, at + size) });
    at += size;
  }
  return out;
}

/** Reads the whole log from its start, batch by batch, through the public read API. */
export async function readAll(log: PartitionLog, maxBytes = 1 << 20): Promise<StoredBatch[]> {
  const out: StoredBatch[] = [];
  let offset = log.logStartOffset;
  while (offset < log.writtenEndOffset) {
    const result = await log.read(offset, maxBytes, { minOneBatch: true });
    if (result.kind !== "records") throw new Error(`unexpected ${result.kind} at ${offset}`);
    if (result.bytes.length === 0) throw new Error(`no progress at ${offset}`);
    out.push(...splitBatches(result.bytes));
    offset = result.nextOffset;
  }
  return out;
}

/** Counts fsync calls on file handles (and directory fsyncs separately) of any Fs. */
export class CountingFs implements Fs {
  fileFsyncs = 0;
  dirFsyncs = 0;
  constructor(private readonly inner: Fs) {}
  async open(path: string, mode: "r" | "rw" | "w"): Promise<FileHandle> {
    const handle = await this.inner.open(path, mode);
    return {
      write: (data, position) => handle.write(data, position),
      read: (length, position) => handle.read(length, position),
      truncate: (length) => handle.truncate(length),
      fsync: async () => {
        this.fileFsyncs++;
        await handle.fsync();
      },
      size: () => handle.size(),
      close: () => handle.close(),
    };
  }
  readFile(path: string): Promise<Uint8Array> {
    return this.inner.readFile(path);
  }
  rename(from: string, to: string): Promise<void> {
    return this.inner.rename(from, to);
  }
  async fsyncDir(path: string): Promise<void> {
    this.dirFsyncs++;
    await this.inner.fsyncDir(path);
  }
  mkdirp(path: string): Promise<void> {
    return this.inner.mkdirp(path);
  }
  readdir(path: string): Promise<string[]> {
    return this.inner.readdir(path);
  }
  unlink(path: string): Promise<void> {
    return this.inner.unlink(path);
  }
  rmrf(path: string): Promise<void> {
    return this.inner.rmrf(path);
  }
  stat(path: string) {
    return this.inner.stat(path);
  }
}

/** Overwrites bytes of a stored file and makes the change durable (as a disk would hold it). */
export async function patchFile(fs: Fs, path: string, position: number, bytes: Uint8Array): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.write(bytes, position);
  await handle.fsync();
  await handle.close();
}

/** Appends bytes to a stored file durably. */
export async function appendToFile(fs: Fs, path: string, bytes: Uint8Array): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.write(bytes, await handle.size());
  await handle.fsync();
  await handle.close();
}

export async function truncateFile(fs: Fs, path: string, length: number): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.truncate(length);
  await handle.fsync();
  await handle.close();
}

export function segmentPath(baseOffset: number, extension = "log"): string {
  return `${DIR}/${String(baseOffset).padStart(20, "0")}.${extension}`;
}
