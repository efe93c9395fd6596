/**
 * The clean-shutdown record of a slot store (`<store dir>/clean-shutdown.json`): written once, at close,
 * after the last append, with what each slot's journal held (journal-file.ts `JournalMark`: generation,
 * length, last record and its CRC-32). At the next start the store reads it and checks each slot's journal
 * against it as the slot loads; it removes it durably before its first write of any file (so that it
 * never vouches for a journal that changed after it was written), and keeps it in memory for the slots
 * not loaded yet: a journal shorter than recorded, or one that no
 * longer ends in the recorded record, lost acknowledged records even though no crash can explain it.
 *
 * In cluster mode (slots taken over at a coordinator epoch, slot-files.ts) each slot has its own record per
 * epoch, `slot-N.eE.clean-shutdown.json`, written by that epoch's owner when it releases the slot or
 * closes: two live brokers never write the same record, and a record a former owner writes late names
 * its own epoch's files, which nobody reads once a newer epoch's checkpoint exists. It is checked when
 * the slot's files of that epoch are read (by a successor taking over, or by the owner loading it again),
 * and removed by the owner before its next write of them.
 *
 * Without the record (the previous process crashed, or it is the first start of this version) only the
 * journal's own checks apply (header, sequence, the torn-last-line rule). It costs nothing on the hot
 * path: one small state file per store at close, and one removal at start.
 */
import { join } from "node:path";
import { CorruptStateError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { fsyncDirOrDie } from "./atomic-file.ts";
import { crc32 } from "./crc32.ts";
import type { JournalContents, JournalMark } from "./journal-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const CLEAN_SHUTDOWN_FORMAT = "clean-shutdown";
export const CLEAN_SHUTDOWN_VERSION = 1;
export const CLEAN_SHUTDOWN_FILE = "clean-shutdown.json";

/**
 * A record read at start: each slot's journal as the previous process left it, null for a slot it left without a
 * journal; slots whose files that process never read are absent (and not checked).
 */
export interface CleanShutdown {
  readonly path: string;
  readonly slots: ReadonlyMap<number, JournalMark | null>;
}

interface RecordBody {
  store: string;
  slots: Array<{ slot: number; journal: JournalMark | null }>;
}

export function cleanShutdownPath(dir: string): string {
  return join(dir, CLEAN_SHUTDOWN_FILE);
}

/**
 * Reads the record of `store` in `dir`; undefined when there is none (the previous process did not shut
 * down cleanly). A damaged record is a CorruptStateError: it is ours, and a start that ignored it would
 * skip the very checks it exists for. The file stays until `removeCleanShutdown`, which the store calls
 * before its first write: a start that fails on damage fails again at every retry.
 */
export async function readCleanShutdown(fs: Fs, dir: string, store: string): Promise<CleanShutdown | undefined> {
  const path = cleanShutdownPath(dir);
  const body = await loadState(fs, path, CLEAN_SHUTDOWN_FORMAT, { current: CLEAN_SHUTDOWN_VERSION, parse: (raw) => parseBody(raw, store) });
  if (body === undefined) return undefined;
  const slots = new Map<number, JournalMark | null>();
  for (const { slot, journal } of body.slots) slots.set(slot, journal);
  return { path, slots };
}

/** Removes the record durably (nothing when there is none): from now on the journals change. */
export async function removeCleanShutdown(fs: Fs, dir: string): Promise<void> {
  await removeRecordFile(fs, dir, cleanShutdownPath(dir));
}

/** Removes the record at `path` in `dir` durably; one already gone (another broker removed it) is fine. */
export async function removeRecordFile(fs: Fs, dir: string, path: string): Promise<void> {
  if ((await fs.stat(path)) === undefined) return;
  try {
    await fs.unlink(path);
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ENOENT") throw error;
  }
  await fsyncDirOrDie(fs, dir, `after removing ${path}`);
}

/**
 * Reads one slot's own record (cluster mode, `path` of that slot and epoch); undefined when there is none.
 * A record that names other slots than `slot` is damage (CorruptStateError naming it).
 */
export async function readSlotCleanShutdown(fs: Fs, path: string, store: string, slot: number): Promise<CleanShutdown | undefined> {
  const body = await loadState(fs, path, CLEAN_SHUTDOWN_FORMAT, { current: CLEAN_SHUTDOWN_VERSION, parse: (raw) => parseBody(raw, store) });
  if (body === undefined) return undefined;
  if (body.slots.length !== 1 || body.slots[0]!.slot !== slot) {
    throw new CorruptStateError(path, `names slots ${body.slots.map((s) => s.slot).join(", ") || "none"}, expected slot ${slot} alone`);
  }
  return { path, slots: new Map([[slot, body.slots[0]!.journal]]) };
}

/** Writes one slot's own record at `path` (tmp, fsync, rename, fsync of the directory). */
export async function writeSlotCleanShutdown(fs: Fs, path: string, store: string, slot: number, mark: JournalMark | null): Promise<void> {
  const body: RecordBody = { store, slots: [{ slot, journal: mark }] };
  await saveState(fs, path, CLEAN_SHUTDOWN_FORMAT, CLEAN_SHUTDOWN_VERSION, body);
}

/** Writes the record of `store` (tmp, fsync, rename, fsync of the directory). */
export async function writeCleanShutdown(fs: Fs, dir: string, store: string, slots: ReadonlyMap<number, JournalMark | null>): Promise<void> {
  const body: RecordBody = { store, slots: [...slots].sort(([a], [b]) => a - b).map(([slot, journal]) => ({ slot, journal })) };
  await saveState(fs, cleanShutdownPath(dir), CLEAN_SHUTDOWN_FORMAT, CLEAN_SHUTDOWN_VERSION, body);
}

/**
 * Checks a journal read at start against what the clean-shutdown record says it held; CorruptStateError
 * naming the journal otherwise. `mark` null: the slot had no journal then.
 */
export function checkAgainstCleanShutdown(record: CleanShutdown, contents: JournalContents, mark: JournalMark | null): void {
  const path = contents.path;
  const found = {
    generation: contents.header?.generation,
    bytes: contents.bytes,
    lastSeq: contents.lastSeq ?? contents.header?.baseSeq,
    lastLineCrc: contents.lastLine === undefined ? 0 : crc32(contents.lastLine),
  };
  if (mark === null) {
    if (contents.bytes > 0) throw new CorruptStateError(path, `has ${contents.bytes} bytes, but the clean shutdown (${record.path}) left none`);
    return;
  }
  const what = `the clean shutdown (${record.path}) left it at ${mark.bytes} bytes, generation ${mark.generation}, ending in record ${mark.lastSeq}`;
  if (!contents.exists) throw new CorruptStateError(path, `is missing, but ${what}`);
  if (found.bytes < mark.bytes) throw new CorruptStateError(path, `is ${found.bytes} bytes (ending in record ${found.lastSeq ?? "none"}), but ${what}: records were lost`);
  if (found.generation !== mark.generation || found.bytes !== mark.bytes || found.lastSeq !== mark.lastSeq || found.lastLineCrc !== mark.lastLineCrc) {
    throw new CorruptStateError(
      path,
      `is ${found.bytes} bytes, generation ${found.generation ?? "none"}, ending in record ${found.lastSeq ?? "none"}${found.lastSeq === mark.lastSeq && found.lastLineCrc !== mark.lastLineCrc ? " (a different record)" : ""}, but ${what}`,
    );
  }
}

function parseBody(raw: unknown, store: string): RecordBody {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error("body is not an object");
  const b = raw as Record<string, unknown>;
  if (b.store !== store) throw new Error(`is the record of store ${JSON.stringify(b.store)}, expected ${JSON.stringify(store)}`);
  if (!Array.isArray(b.slots)) throw new Error("slots is not an array");
  const slots = b.slots.map((value: unknown, i) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`slots[${i}] is not an object`);
    const entry = value as Record<string, unknown>;
    const int = (o: Record<string, unknown>, field: string, max = Number.MAX_SAFE_INTEGER): number => {
      const v = o[field];
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v > max) throw new Error(`slots[${i}]: ${field} is invalid`);
      return v;
    };
    const slot = int(entry, "slot");
    if (entry.journal === null) return { slot, journal: null };
    if (typeof entry.journal !== "object" || entry.journal === undefined || Array.isArray(entry.journal)) throw new Error(`slots[${i}].journal is not an object`);
    const j = entry.journal as Record<string, unknown>;
    const journal: JournalMark = {
      generation: int(j, "generation"),
      baseSeq: int(j, "baseSeq"),
      bytes: int(j, "bytes"),
      lastSeq: int(j, "lastSeq"),
      lastLineCrc: int(j, "lastLineCrc", 0xffffffff),
    };
    return { slot, journal };
  });
  return { store, slots };
}
