/**
 * The producer fence log (docs/architecture.md, "Storage rules" and "Transactions and idempotence"): every
 * producer epoch bump a broker's transaction coordinator makes is appended to that broker's own file, so that
 * the other brokers sharing the data directory can fence the old epoch on the partitions they lead (a zombie's
 * batches then fail there too, even on partitions the new session has not touched yet).
 *
 *   <data>/__cluster/producer_fences/<broker>.log
 *
 * Append-only, one line per fence, each line a state-file envelope (state-file.ts: format
 * "producer-fence", version, CRC-32 of the canonical body, then the body {producerId, epoch, brokerId,
 * timestampMs}). Only the owning broker writes its file; everybody may read every file.
 *
 * Durability: `append` resolves once the line is fsynced (and the file's name, once, by an fsync of the
 * directory). A failed fsync is fatal (FatalError), as everywhere. A failed write cuts the partial line off
 * and rejects; nothing was acknowledged.
 *
 * Reading (`readFenceLog`): from a byte offset, complete lines only. An unterminated last line is a write
 * in progress (or one that a crash tore off): it is not returned and the offset stays before it, so the
 * next read sees it once it is complete. A complete line that fails its checks is reported as corrupt and
 * skipped: a fence is defence in depth (the coordinator refuses the old epoch anyway), so a damaged line is
 * logged loudly by the reader's caller but does not stop the fences after it.
 *
 * Growth: one ~120-byte line per epoch bump of a transactional producer, i.e. per producer session. The file
 * is never compacted yet; it is bounded in practice by how often producers restart.
 */
import { join } from "node:path";
import { FatalError } from "../errors/errors.ts";
import type { FileHandle, Fs } from "../platform/fs.ts";
import { ensureDir, fsyncDirOrDie } from "./atomic-file.ts";
import { decodeState, encodeState } from "./state-file.ts";

export const FENCE_LOG_FORMAT = "producer-fence";
export const FENCE_LOG_VERSION = 1;
/** How much of a fence log one read takes at most. */
export const FENCE_LOG_READ_BYTES_MAX = 1024 * 1024;

const FENCE_LOG_NAME = /^(\d+)\.log$/;

export interface ProducerFence {
  readonly producerId: number;
  /** The new epoch: every epoch below it is fenced. */
  readonly epoch: number;
  /** The broker whose coordinator made the bump. */
  readonly brokerId: number;
  readonly timestampMs: number;
}

export function fenceLogDir(dataDir: string): string {
  return join(dataDir, "__cluster", "producer_fences");
}

export function fenceLogPath(dataDir: string, brokerId: number): string {
  return join(fenceLogDir(dataDir), `${brokerId}.log`);
}

/** The broker ids that have a fence log, from the directory listing. */
export async function listFenceLogs(fs: Fs, dataDir: string): Promise<number[]> {
  const dir = fenceLogDir(dataDir);
  if ((await fs.stat(dir)) === undefined) return [];
  const ids: number[] = [];
  for (const name of await fs.readdir(dir)) {
    const match = FENCE_LOG_NAME.exec(name);
    if (match !== null) ids.push(Number(match[1]));
  }
  return ids.sort((a, b) => a - b);
}

/** The writer of this broker's fence log. Appends are serialized. */
export class FenceLogWriter {
  private handle: FileHandle | undefined;
  /** Where the next line goes (the valid length of the file). */
  private endBytes = 0;
  private named = false;
  private queue: Promise<unknown> = Promise.resolve();
  private fatal: FatalError | undefined;

  private constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    readonly path: string,
    readonly brokerId: number,
  ) {}

  /**
   * Opens (creating the directory durably) the log of `brokerId`. A torn last line left by a crash is cut
   * off before the first append, so every line stays whole.
   */
  static async open(fs: Fs, dataDir: string, brokerId: number): Promise<FenceLogWriter> {
    if (!Number.isSafeInteger(brokerId) || brokerId < 0) throw new RangeError(`invalid broker id ${brokerId}`);
    const dir = fenceLogDir(dataDir);
    await ensureDir(fs, dir);
    const writer = new FenceLogWriter(fs, dir, fenceLogPath(dataDir, brokerId), brokerId);
    const stat = await fs.stat(writer.path);
    if (stat !== undefined) {
      const bytes = await fs.readFile(writer.path);
      const lastNewline = bytes.lastIndexOf(0x0a);
      writer.endBytes = lastNewline + 1;
    }
    return writer;
  }

  /** Appends one fence and resolves once it is durable. */
  append(fence: Omit<ProducerFence, "brokerId">): Promise<void> {
    const done = this.queue.then(() => this.appendNow({ ...fence, brokerId: this.brokerId }));
    this.queue = done.catch(() => undefined);
    return done;
  }

  private async appendNow(fence: ProducerFence): Promise<void> {
    if (this.fatal !== undefined) throw this.fatal;
    const line = encodeState(FENCE_LOG_FORMAT, FENCE_LOG_VERSION, fence);
    if (this.handle === undefined) {
      this.handle = await this.fs.open(this.path, "rw");
      // Whatever lies past the last complete line is a torn write nobody acknowledged.
      if ((await this.handle.size()) > this.endBytes) await this.handle.truncate(this.endBytes);
    }
    try {
      await this.handle.write(line, this.endBytes);
    } catch (error) {
      await this.handle.truncate(this.endBytes).catch(() => undefined);
      throw error;
    }
    try {
      await this.handle.fsync();
    } catch (error) {
      this.fatal = new FatalError(`fsync of ${this.path} failed; its last fence may or may not be on disk`, { cause: error });
      throw this.fatal;
    }
    if (!this.named) {
      await fsyncDirOrDie(this.fs, this.dir, `after creating ${this.path}`);
      this.named = true;
    }
    this.endBytes += line.length;
  }

  async close(): Promise<void> {
    await this.queue;
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close().catch(() => undefined);
  }
}

export interface FenceLogRead {
  readonly fences: ProducerFence[];
  /** Where the next read starts: after the last complete line read. */
  readonly nextOffset: number;
  /** Complete lines that failed their checks (skipped), with where they start and why. */
  readonly corrupt: { readonly offset: number; readonly reason: string }[];
  /** The file is shorter than `fromOffset` (it was replaced): the caller should read it again from 0. */
  readonly shrunk: boolean;
}

/**
 * Reads the complete lines of a fence log from `fromOffset` (at most `maxBytes` of it). A missing file
 * reads as empty.
 */
export async function readFenceLog(fs: Fs, path: string, fromOffset: number, maxBytes = FENCE_LOG_READ_BYTES_MAX): Promise<FenceLogRead> {
  const stat = await fs.stat(path);
  if (stat === undefined || stat.isDirectory) return { fences: [], nextOffset: fromOffset, corrupt: [], shrunk: false };
  if (stat.size < fromOffset) return { fences: [], nextOffset: 0, corrupt: [], shrunk: true };
  if (stat.size === fromOffset) return { fences: [], nextOffset: fromOffset, corrupt: [], shrunk: false };
  const handle = await fs.open(path, "r");
  let bytes: Uint8Array;
  try {
    bytes = await handle.read(Math.min(maxBytes, stat.size - fromOffset), fromOffset);
  } finally {
    await handle.close().catch(() => undefined);
  }
  const fences: ProducerFence[] = [];
  const corrupt: { offset: number; reason: string }[] = [];
  let start = 0;
  for (let end = bytes.indexOf(0x0a); end >= 0; end = bytes.indexOf(0x0a, start)) {
    const offset = fromOffset + start;
    try {
      fences.push(decodeState(`${path} (line at byte ${offset})`, bytes.subarray(start, end + 1), FENCE_LOG_FORMAT, {
        current: FENCE_LOG_VERSION,
        parse: parseFence,
      }) as ProducerFence);
    } catch (error) {
      corrupt.push({ offset, reason: error instanceof Error ? error.message : String(error) });
    }
    start = end + 1;
  }
  if (start === 0 && bytes.length >= maxBytes) {
    // One line longer than a whole read: no fence is that long; skip it rather than stall on it forever.
    corrupt.push({ offset: fromOffset, reason: `a line longer than ${maxBytes} bytes` });
    return { fences, nextOffset: fromOffset + bytes.length, corrupt, shrunk: false };
  }
  return { fences, nextOffset: fromOffset + start, corrupt, shrunk: false };
}

function parseFence(body: unknown): ProducerFence {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string, unknown>;
  const int = (key: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const value = b[key];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) throw new Error(`${key} is not a valid integer`);
    return value;
  };
  return { producerId: int("producerId", 0), epoch: int("epoch", 0, 32_767), brokerId: int("brokerId", 0), timestampMs: int("timestampMs", Number.MIN_SAFE_INTEGER) };
}
