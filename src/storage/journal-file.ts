/**
 * An append-only journal of newline-terminated records beside a checkpoint: the mechanics that the
 * transaction-state store and the offset store share (what a record holds and when the journal is folded
 * into its checkpoint are each store's business).
 *
 * Format: the first line is a header, a state-file envelope (format "journal-header") around
 * {journal, generation, baseSeq}: the journal's own format name, the generation of the checkpoint it
 * follows (a counter raised by one at every fold, recorded in the checkpoint too) and the sequence number
 * of the checkpoint's last record. Every later line is one record whose sequence number is one more than
 * the one before it, the first one baseSeq + 1. So a journal that lost records at its end still reads as
 * a valid journal, but one that lost its header (emptied, truncated to nothing), belongs to another
 * checkpoint, or lost or reordered records in the middle does not (`checkJournalFollows`, `readJournal`).
 * What the header cannot show, records lost at the end, the clean-shutdown record shows
 * (clean-shutdown.ts) and, while the broker runs, `verifyJournal`.
 *
 * Journals written before the header existed (no header line) are still read; the stores rewrite them in
 * this format at once (`JournalFile.reset`, then a fold).
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
 * - `reset` replaces the journal atomically (tmp, fsync, rename, fsync of the directory) by a header of a
 *   new generation and nothing else, after the store wrote its checkpoint: after a crash the journal is
 *   either the old one (whose records the checkpoint holds) or the new one, never empty.
 *
 * Reading (`readJournal`): the header, then every complete line handed to the store's decoder in order;
 * an unterminated last line is an append that never completed, hence was never acknowledged, and is cut
 * off (durably), unless the caller knows the previous process shut down cleanly (then it is damage) or
 * reads a journal it does not own (`readOnly`: left in place, and the records before it are what counts).
 */
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { FileHandle, Fs } from "../platform/fs.ts";
import { fsyncDirOrDie, writeFileAtomic } from "./atomic-file.ts";
import { crc32 } from "./crc32.ts";
import { decodeState, encodeState } from "./state-file.ts";

export const JOURNAL_HEADER_FORMAT = "journal-header";
export const JOURNAL_HEADER_VERSION = 1;

export interface JournalHeader {
  /** The journal's format name (its records'), so that a header of another store's journal is refused. */
  readonly journal: string;
  /** The generation of the checkpoint this journal follows. */
  readonly generation: number;
  /** The sequence number of the checkpoint's last record; the journal's first record is baseSeq + 1. */
  readonly baseSeq: number;
}

/** What `readJournal` found. */
export interface JournalContents {
  readonly path: string;
  readonly exists: boolean;
  /** undefined: no header (an absent or empty journal, or one written before headers existed). */
  readonly header: JournalHeader | undefined;
  /** The length of the valid content (header and complete records). */
  readonly bytes: number;
  /** The sequence number of the last record; undefined when there is none. */
  readonly lastSeq: number | undefined;
  /** The last record's line (newline included); undefined when there is none. */
  readonly lastLine: Uint8Array | undefined;
  /** Bytes of an unterminated last line that were cut off. */
  readonly tornBytes: number;
}

export interface ReadJournalOptions {
  /** The format name the header must carry. */
  readonly format: string;
  /**
   * Decodes one record (a complete line, newline included; `where` names the file and the record's
   * position for errors) and returns its sequence number; throws CorruptStateError for a bad one.
   */
  readonly onRecord: (line: Uint8Array, where: string, header: JournalHeader | undefined) => number;
  /** Default true. False: an unterminated last line is damage, not a torn append (after a clean shutdown). */
  readonly cutTornTail?: boolean;
  /**
   * The journal is another writer's (a former owner's, read at a take-over): an unterminated last line is
   * left where it is, not cut off, and only the complete records before it are read. The file is never
   * written.
   */
  readonly readOnly?: boolean;
}

const HEADER_PREFIX = new TextEncoder().encode(`{"format":${JSON.stringify(JOURNAL_HEADER_FORMAT)},`);

export function encodeJournalHeader(header: JournalHeader): Uint8Array {
  return encodeState(JOURNAL_HEADER_FORMAT, JOURNAL_HEADER_VERSION, { baseSeq: header.baseSeq, generation: header.generation, journal: header.journal });
}

function isHeaderLine(line: Uint8Array): boolean {
  if (line.length < HEADER_PREFIX.length) return false;
  for (let i = 0; i < HEADER_PREFIX.length; i++) if (line[i] !== HEADER_PREFIX[i]) return false;
  return true;
}

function decodeHeader(line: Uint8Array, where: string, format: string): JournalHeader {
  const header = decodeState(where, line, JOURNAL_HEADER_FORMAT, { current: JOURNAL_HEADER_VERSION, parse: parseHeaderBody }) as JournalHeader;
  if (header.journal !== format) throw new CorruptStateError(where, `is the header of a ${JSON.stringify(header.journal)} journal, expected ${JSON.stringify(format)}`);
  return header;
}

function parseHeaderBody(body: unknown): JournalHeader {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string, unknown>;
  if (typeof b.journal !== "string") throw new Error("invalid journal");
  for (const field of ["generation", "baseSeq"] as const) {
    const value = b[field];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new Error(`invalid ${field}`);
  }
  return { journal: b.journal, generation: b.generation as number, baseSeq: b.baseSeq as number };
}

/**
 * Reads the journal at `path`: its header, then every record in order, each of which must be numbered one
 * more than the one before it (the first one, baseSeq + 1 after a header). A complete line that does not
 * decode, a record out of sequence or a header anywhere but first is a CorruptStateError. An unterminated
 * last line is cut off (durably) unless `cutTornTail` is false (damage) or `readOnly` (left in place).
 */
export async function readJournal(fs: Fs, path: string, options: ReadJournalOptions): Promise<JournalContents> {
  const stat = await fs.stat(path);
  if (stat === undefined) return { path, exists: false, header: undefined, bytes: 0, lastSeq: undefined, lastLine: undefined, tornBytes: 0 };
  if (stat.isDirectory) throw new CorruptStateError(path, "is a directory, expected a journal");
  const bytes = await fs.readFile(path);
  const parsed = parseJournal(path, bytes, options.format, options.onRecord);
  const tornBytes = bytes.length - parsed.bytes;
  if (tornBytes > 0) {
    if (options.cutTornTail === false) {
      throw new CorruptStateError(path, `ends in ${tornBytes} bytes of an unterminated record after byte ${parsed.bytes}, after a clean shutdown`);
    }
    if (options.readOnly === true) return { ...parsed, path, exists: true, tornBytes };
    const handle = await fs.open(path, "rw");
    try {
      await handle.truncate(parsed.bytes);
      try {
        await handle.fsync();
      } catch (error) {
        throw new FatalError(`fsync of ${path} failed after cutting off a torn record`, { cause: error });
      }
    } finally {
      await handle.close().catch(() => undefined);
    }
  }
  return { ...parsed, path, exists: true, tornBytes };
}

/** The checks of `readJournal` on bytes already read; `bytes` of the result excludes a torn last line. */
function parseJournal(
  path: string,
  bytes: Uint8Array,
  format: string,
  onRecord: (line: Uint8Array, where: string, header: JournalHeader | undefined) => number,
): Omit<JournalContents, "path" | "exists" | "tornBytes"> {
  let header: JournalHeader | undefined;
  let lastSeq: number | undefined;
  let lastLine: Uint8Array | undefined;
  let start = 0;
  for (let end = bytes.indexOf(0x0a, start); end >= 0; end = bytes.indexOf(0x0a, start)) {
    const line = bytes.subarray(start, end + 1);
    const where = `${path} (record at byte ${start})`;
    if (isHeaderLine(line)) {
      if (start !== 0) throw new CorruptStateError(where, "is a journal header after the first line");
      header = decodeHeader(line, `${path} (header)`, format);
      lastSeq = undefined;
    } else {
      const seq = onRecord(line, where, header);
      checkSequence(where, seq, lastSeq, header);
      lastSeq = seq;
      lastLine = line;
    }
    start = end + 1;
  }
  // A copy: a view would keep the whole file's bytes alive for as long as the writer holds its last line.
  return { header, bytes: start, lastSeq, lastLine: lastLine?.slice() };
}

/**
 * Record `seq` must follow `previousSeq` (the record before it; undefined for the first) or, first after
 * a header, the header's baseSeq: CorruptStateError otherwise. Stores call it before their own checks,
 * so that a gap is reported as one.
 */
export function checkSequence(where: string, seq: number, previousSeq: number | undefined, header: JournalHeader | undefined): void {
  if (previousSeq !== undefined) {
    if (seq !== previousSeq + 1) throw new CorruptStateError(where, `record ${seq} follows record ${previousSeq}`);
  } else if (header !== undefined && seq !== header.baseSeq + 1) {
    throw new CorruptStateError(where, `record ${seq} is first after a header at record ${header.baseSeq}`);
  }
}

/** What a checkpoint says about the journal that follows it. */
export interface CheckpointMark {
  /** undefined: a checkpoint written before generations existed. */
  readonly generation: number | undefined;
  readonly lastSeq: number;
}

/**
 * How a journal stands to its checkpoint (`checkJournalFollows`):
 * - "current": it follows the checkpoint; appends go on after its last record;
 * - "previous": it is the journal the checkpoint's fold was replacing when the process stopped, and
 *   the checkpoint holds every record of it: the store replaces it (`reset`) before appending;
 * - "old-format": files written before headers existed (or half way through their rewrite): the store
 *   rewrites them in the current format now;
 * - "fresh": a slot never written: no checkpoint, and no journal content but perhaps the header its first
 *   write put down before it stopped.
 */
export type JournalStanding = "current" | "previous" | "old-format" | "fresh";

/**
 * Checks that the journal `contents` continues the checkpoint at `checkpointPath` (`checkpoint`,
 * undefined when there is none); CorruptStateError naming the journal and what is wrong otherwise.
 */
export function checkJournalFollows(contents: JournalContents, checkpointPath: string, checkpoint: CheckpointMark | undefined): JournalStanding {
  const path = contents.path;
  const header = contents.header;
  const endSeq = contents.lastSeq ?? header?.baseSeq;
  if (checkpoint?.generation !== undefined) {
    const generation = checkpoint.generation;
    if (header === undefined) {
      if (contents.bytes === 0) {
        throw new CorruptStateError(
          path,
          `is ${contents.exists ? "empty" : "missing"}, but ${checkpointPath} (generation ${generation}, up to record ${checkpoint.lastSeq}) is always followed by a journal with a header; records after it may be lost`,
        );
      }
      throw new CorruptStateError(path, `has no header, but ${checkpointPath} (generation ${generation}) is followed by a journal with one`);
    }
    if (header.generation === generation) {
      if (header.baseSeq !== checkpoint.lastSeq) {
        throw new CorruptStateError(path, `follows record ${header.baseSeq}, but ${checkpointPath} (generation ${generation}) holds up to record ${checkpoint.lastSeq}`);
      }
      return "current";
    }
    if (header.generation === generation - 1) {
      // The fold wrote the checkpoint and stopped before replacing this journal: it holds exactly what
      // the checkpoint holds, up to its last record; anything less lost records.
      if (endSeq !== checkpoint.lastSeq) {
        throw new CorruptStateError(path, `of generation ${header.generation} ends at record ${endSeq}, but ${checkpointPath} (generation ${generation}) was folded from it up to record ${checkpoint.lastSeq}`);
      }
      return "previous";
    }
    throw new CorruptStateError(path, `is of generation ${header.generation}, but ${checkpointPath} is of generation ${generation}`);
  }
  const lastSeq = checkpoint?.lastSeq ?? 0;
  // A slot's first write puts the header of generation 1 before the first checkpoint: a crash in
  // between leaves the header alone, and no record was ever written after it.
  if (checkpoint === undefined && header?.generation === 1 && header.baseSeq === 0 && contents.lastSeq === undefined) return "fresh";
  if (header !== undefined) {
    // Only the rewrite of old files writes a header of generation 0, before its first fold.
    if (header.generation !== 0) {
      throw new CorruptStateError(
        path,
        checkpoint === undefined
          ? `is of generation ${header.generation}, but its checkpoint ${checkpointPath} is missing`
          : `is of generation ${header.generation}, but ${checkpointPath} has no generation (an older format)`,
      );
    }
    if (header.baseSeq !== lastSeq) {
      throw new CorruptStateError(path, `follows record ${header.baseSeq}, but ${checkpointPath} holds up to record ${lastSeq}`);
    }
    return "old-format";
  }
  return checkpoint === undefined && contents.bytes === 0 ? "fresh" : "old-format";
}

/**
 * What a store's `verify` found: slots whose files match memory, slots skipped (a fold ran meanwhile; the
 * next call checks them), and the damage found, one CorruptStateError per slot, naming the file.
 */
export interface StateVerifyReport {
  readonly checked: number;
  readonly skipped: number;
  readonly problems: readonly CorruptStateError[];
}

/** What a journal holds, as its writer knows it (for the clean-shutdown record and `verifyJournal`). */
export interface JournalMark {
  readonly generation: number;
  readonly baseSeq: number;
  readonly bytes: number;
  /** The last record's sequence number (baseSeq when there is none). */
  readonly lastSeq: number;
  /** CRC-32 of the last record's line (0 when there is none). */
  readonly lastLineCrc: number;
}

/** The writing end of one journal. One writer at a time (the store's serial writer per slot). */
export class JournalFile {
  private handle: FileHandle | undefined;
  /** Whether the journal's directory entry is known durable (fsynced by this process). */
  private named = false;
  /** A failed write left bytes past `bytes` that could not be cut off yet. */
  private tailDirty = false;
  private validBytes: number;
  private headerOf: JournalHeader | undefined;
  private lastSeqOf: number | undefined;
  private lastLineOf: Uint8Array | undefined;

  /** `contents`: what `readJournal` returned (nothing: a journal not read, taken for absent). */
  constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    readonly path: string,
    readonly format: string,
    contents?: JournalContents,
  ) {
    this.validBytes = contents?.bytes ?? 0;
    this.headerOf = contents?.header;
    this.lastSeqOf = contents?.lastSeq;
    this.lastLineOf = contents?.lastLine;
  }

  /** The length of the valid content; the next record is written here. */
  get bytes(): number {
    return this.validBytes;
  }

  /** The header; undefined until the journal has one (a fresh slot, or files of an older format). */
  get header(): JournalHeader | undefined {
    return this.headerOf;
  }

  /** Whether a write failed and left bytes past the valid content that are not cut off yet. */
  get dirty(): boolean {
    return this.tailDirty;
  }

  /** What the journal holds (undefined without a header). */
  mark(): JournalMark | undefined {
    const header = this.headerOf;
    if (header === undefined) return undefined;
    return {
      generation: header.generation,
      baseSeq: header.baseSeq,
      bytes: this.validBytes,
      lastSeq: this.lastSeqOf ?? header.baseSeq,
      lastLineCrc: this.lastLineOf === undefined ? 0 : crc32(this.lastLineOf),
    };
  }

  /**
   * Appends record `seq` (one newline-terminated line) and makes it durable. The journal must have a
   * header and `seq` must follow its last record: anything else is a broken invariant of the store.
   */
  async append(line: Uint8Array, seq: number): Promise<void> {
    const header = this.headerOf;
    if (header === undefined) throw new FatalError(`${this.path}: append to a journal without a header`);
    const expected = (this.lastSeqOf ?? header.baseSeq) + 1;
    if (seq !== expected) throw new FatalError(`${this.path}: append of record ${seq} where record ${expected} is next`);
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
    this.lastSeqOf = seq;
    this.lastLineOf = line;
  }

  /**
   * Replaces the journal atomically by a header of `generation` after record `baseSeq`, followed by
   * `records` (complete lines numbered from baseSeq + 1; only the rewrite of an old-format journal has
   * any): after a fold, the new generation's empty journal. A crash leaves the old journal or this one.
   */
  async reset(generation: number, baseSeq: number, records: readonly Uint8Array[] = [], lastSeq?: number): Promise<void> {
    const header: JournalHeader = { journal: this.format, generation, baseSeq };
    const headerLine = encodeJournalHeader(header);
    let length = headerLine.length;
    for (const record of records) length += record.length;
    const bytes = new Uint8Array(length);
    bytes.set(headerLine, 0);
    let at = headerLine.length;
    for (const record of records) {
      bytes.set(record, at);
      at += record.length;
    }
    // The handle open on the old journal would keep writing to the file the rename unlinks.
    await this.close();
    await writeFileAtomic(this.fs, this.path, bytes);
    this.named = true;
    this.tailDirty = false;
    this.validBytes = length;
    this.headerOf = header;
    this.lastSeqOf = records.length === 0 ? undefined : (lastSeq ?? baseSeq + records.length);
    this.lastLineOf = records.length === 0 ? undefined : records[records.length - 1];
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

/**
 * Re-reads the journal from disk and checks it against `mark`, what its writer holds in memory (taken
 * when no fold was running): the header of the same generation, every complete record decoding and in
 * sequence, at least `mark.bytes` bytes, and the record that ends there being the last one written.
 * Bytes past `mark.bytes` are appends in flight and are not judged. CorruptStateError when it fails.
 */
export async function verifyJournal(fs: Fs, path: string, format: string, mark: JournalMark, decode: (line: Uint8Array, where: string) => number): Promise<void> {
  // The store's decoder returns the record's sequence number; parseJournal checks it follows.
  const stat = await fs.stat(path);
  if (stat === undefined) throw new CorruptStateError(path, `is missing; this broker wrote ${mark.bytes} bytes to it (up to record ${mark.lastSeq})`);
  if (stat.isDirectory) throw new CorruptStateError(path, "is a directory, expected a journal");
  const bytes = await fs.readFile(path);
  if (bytes.length < mark.bytes) {
    throw new CorruptStateError(path, `is ${bytes.length} bytes, shorter than the ${mark.bytes} this broker wrote (up to record ${mark.lastSeq})`);
  }
  const parsed = parseJournal(path, bytes.subarray(0, mark.bytes), format, decode);
  if (parsed.bytes !== mark.bytes) {
    throw new CorruptStateError(path, `has no complete record ending at byte ${mark.bytes}, where this broker's last record (${mark.lastSeq}) ends`);
  }
  const header = parsed.header;
  if (header === undefined) throw new CorruptStateError(path, `has no header; this broker wrote one of generation ${mark.generation}`);
  if (header.generation !== mark.generation || header.baseSeq !== mark.baseSeq) {
    throw new CorruptStateError(
      path,
      `has a header of generation ${header.generation} after record ${header.baseSeq}; this broker wrote generation ${mark.generation} after record ${mark.baseSeq}`,
    );
  }
  const lastSeq = parsed.lastSeq ?? header.baseSeq;
  const lastLineCrc = parsed.lastLine === undefined ? 0 : crc32(parsed.lastLine);
  if (lastSeq !== mark.lastSeq || lastLineCrc !== mark.lastLineCrc) {
    throw new CorruptStateError(path, `ends at byte ${mark.bytes} in record ${lastSeq}, which is not the record ${mark.lastSeq} this broker wrote there`);
  }
}

/** What a slot store's writer loop keeps per slot that `holdingWriter` needs. */
export interface SlotWriterFlags {
  writing: boolean;
  idle: Promise<void>;
  markIdle: () => void;
}

/**
 * Runs `body` as the slot's writer: after the writer in flight (if any) is idle, and with new writes
 * queued behind it until it is done (a store's `repair`). `then` runs after, to restart the writer for
 * what queued meanwhile.
 */
export async function holdingWriter(slot: SlotWriterFlags, body: () => Promise<void>, then: () => void): Promise<void> {
  while (slot.writing) await slot.idle;
  slot.writing = true;
  slot.idle = new Promise((resolve) => (slot.markIdle = resolve));
  try {
    await body();
  } finally {
    slot.writing = false;
    slot.markIdle();
    then();
  }
}

/** What `verifySlots` needs of a store's slot. */
export interface VerifiableSlot {
  readonly loaded: boolean;
  readonly folding: boolean;
  readonly generation: number;
  readonly journal: JournalFile;
}

/**
 * A store's `verify` over its slots: every loaded slot that was ever written is checked by `verifySlot`
 * (which throws a CorruptStateError naming the damaged file); a slot whose fold runs, or whose journal,
 * generation or loading changed while it was checked (a fold, a release), is skipped for the next call.
 */
export async function verifySlots<S extends VerifiableSlot>(
  slots: readonly S[],
  verifySlot: (slot: S, generation: number, mark: JournalMark) => Promise<void>,
): Promise<StateVerifyReport> {
  let checked = 0;
  let skipped = 0;
  const problems: CorruptStateError[] = [];
  for (const slot of slots) {
    if (!slot.loaded) continue;
    const journal = slot.journal;
    const generation = slot.generation;
    const mark = journal.mark();
    // Never written (at most a header left by a first write that crashed): nothing to check.
    if (mark === undefined || generation === 0) continue;
    const unchanged = () => slot.loaded && !slot.folding && slot.journal === journal && slot.generation === generation && journal.header?.generation === generation;
    if (!unchanged()) {
      skipped += 1;
      continue;
    }
    try {
      await verifySlot(slot, generation, mark);
      checked += 1;
    } catch (error) {
      if (!unchanged()) skipped += 1;
      else if (error instanceof CorruptStateError) problems.push(error);
      else throw error;
    }
  }
  return { checked, skipped, problems };
}
