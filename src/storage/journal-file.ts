/**
 * An append-only journal of newline-terminated records beside a checkpoint: the mechanics that the
 * transaction-state store and the offset store share (what a record holds, how records are checked and
 * when the journal is folded into its checkpoint are each store's business).
 *
 * Durability and failures:
 * - `append` writes a record at the end of the valid content and fsyncs it; the first append of this
 *   process also fsyncs the directory, because even an existing journal's name may not be durable yet
 *   (a previous process may have exited before fsyncing it).
 * - A failed fsync is fatal (FatalError): nobody knows what is on disk. A failed write is an ordinary
 *   error: the record's bytes are cut off again, so that the next record lands on a clean end. If that
 *   cut fails too, it is retried before the next record, and nothing is written until it succeeds: bytes
 *   left past the end would outlive a shorter record written over them, and a complete line among them
 *   would read as a damaged record at the next start.
 * - `empty` truncates to nothing and fsyncs before anything else is appended (after the store wrote its
 *   checkpoint).
 *
 * Reading (`readJournal`): every complete line is handed to the store's decoder in order; an unterminated
 * last line is an append that never completed, hence was never acknowledged, and is cut off (durably).
 */
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { FileHandle, Fs } from "../platform/fs.ts";
import { fsyncDirOrDie } from "./atomic-file.ts";

/**
 * Calls `onRecord` with every complete line of the journal at `path` (newline included) and `where`, a
 * description naming the file and the record's position for errors; cuts off an unterminated last line.
 * Returns the length of the valid content (0 when the journal does not exist).
 */
export async function readJournal(fs: Fs, path: string, onRecord: (line: Uint8Array, where: string) => void): Promise<number> {
  const stat = await fs.stat(path);
  if (stat === undefined) return 0;
  if (stat.isDirectory) throw new CorruptStateError(path, "is a directory, expected a journal");
  const bytes = await fs.readFile(path);
  let start = 0;
  for (let end = bytes.indexOf(0x0a, start); end >= 0; end = bytes.indexOf(0x0a, start)) {
    onRecord(bytes.subarray(start, end + 1), `${path} (record at byte ${start})`);
    start = end + 1;
  }
  if (start < bytes.length) {
    const handle = await fs.open(path, "rw");
    try {
      await handle.truncate(start);
      try {
        await handle.fsync();
      } catch (error) {
        throw new FatalError(`fsync of ${path} failed after cutting off a torn record`, { cause: error });
      }
    } finally {
      await handle.close().catch(() => undefined);
    }
  }
  return start;
}

/** The writing end of one journal. One writer at a time (the store's serial writer per slot). */
export class JournalFile {
  private handle: FileHandle | undefined;
  /** Whether the journal's directory entry is known durable (fsynced by this process). */
  private named = false;
  /** A failed write left bytes past `bytes` that could not be cut off yet. */
  private tailDirty = false;

  /** `validBytes`: the length of the valid content, as `readJournal` returned it. */
  constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    readonly path: string,
    private validBytes = 0,
  ) {}

  /** The length of the valid content; the next record is written here. */
  get bytes(): number {
    return this.validBytes;
  }

  /** Appends one record (newline-terminated) and makes it durable. */
  async append(line: Uint8Array): Promise<void> {
    const handle = await this.opened();
    if (this.tailDirty) {
      await handle.truncate(this.validBytes);
      this.tailDirty = false;
    }
    try {
      await handle.write(line, this.validBytes);
    } catch (error) {
      this.tailDirty = true;
      await handle.truncate(this.validBytes).then(
        () => (this.tailDirty = false),
        () => undefined,
      );
      throw error;
    }
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${this.path} failed; its last record may or may not be on disk`, { cause: error });
    }
    if (!this.named) {
      await fsyncDirOrDie(this.fs, this.dir, `after creating ${this.path}`);
      this.named = true;
    }
    this.validBytes += line.length;
  }

  /** Truncates the journal to nothing, durably (its records are in the checkpoint now). */
  async empty(): Promise<void> {
    const handle = await this.opened();
    await handle.truncate(0);
    this.validBytes = 0;
    this.tailDirty = false;
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${this.path} failed after emptying it`, { cause: error });
    }
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close().catch(() => undefined);
  }

  private async opened(): Promise<FileHandle> {
    this.handle ??= await this.fs.open(this.path, "rw");
    return this.handle;
  }
}
