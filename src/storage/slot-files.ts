/**
 * The names of a slot store's files per coordinator epoch (transaction state and group offsets), and the
 * rules for which epoch's files a load reads (docs/architecture.md, "Storage rules", "Slot take-over").
 *
 *   slot-N.json / slot-N.journal                 epoch 0: single-broker mode, and every directory written
 *                                                before epochs existed (today's names, unchanged)
 *   slot-N.eE.json / slot-N.eE.journal           epoch E >= 1: written only by the broker that took slot N
 *                                                over at coordinator epoch E
 *   slot-N.eE.clean-shutdown.json                that owner's clean-shutdown record of slot N (E >= 1)
 *
 * Why per-epoch files: in cluster mode a former owner may be frozen past its lease and write again (an
 * append, a fold, its clean-shutdown record) after its successor read the slot. Each owner writes only
 * its own epoch's names, and a load reads the newest epoch whose checkpoint exists, so nothing a former
 * owner writes after its successor's checkpoint is durable is ever read again: it lands in files of an
 * older epoch. A take-over writes the journal's header first and then the checkpoint (as a slot's first
 * write does), so an epoch's files count only once its checkpoint exists; a journal of an epoch without
 * its checkpoint is a take-over that stopped half way, harmless while it holds no record.
 */
import { join } from "node:path";
import { CorruptStateError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { isTmpFileName } from "./atomic-file.ts";
import { readJournal } from "./journal-file.ts";

export type SlotFileKind = "checkpoint" | "journal" | "clean-shutdown";

/** `slot-N.json` (epoch 0) or `slot-N.eE.json`. */
export function slotCheckpointName(slot: number, epoch: number): string {
  return epoch === 0 ? `slot-${slot}.json` : `slot-${slot}.e${epoch}.json`;
}

/** `slot-N.journal` (epoch 0) or `slot-N.eE.journal`. */
export function slotJournalName(slot: number, epoch: number): string {
  return epoch === 0 ? `slot-${slot}.journal` : `slot-${slot}.e${epoch}.journal`;
}

/** `slot-N.eE.clean-shutdown.json`; epoch 0 has the store-wide record (clean-shutdown.ts) instead. */
export function slotCleanShutdownName(slot: number, epoch: number): string {
  if (epoch < 1) throw new RangeError(`a slot's own clean-shutdown record is for epochs from 1, not ${epoch}`);
  return `slot-${slot}.e${epoch}.clean-shutdown.json`;
}

const SLOT_FILE_NAME = /^slot-(0|[1-9]\d{0,8})(?:\.e([1-9]\d{0,9}))?\.(json|journal|clean-shutdown\.json)$/;
const TMP_SUFFIX = /\.[0-9a-f]{16}\.tmp$/;

export interface SlotFileName {
  readonly slot: number;
  readonly epoch: number;
  readonly kind: SlotFileKind;
  /** A tmp file of a write of that file (atomic-file.ts), left by a crash or still being written. */
  readonly tmp: boolean;
}

/** What a name in a slot store's directory is; undefined for anything else. */
export function parseSlotFileName(name: string): SlotFileName | undefined {
  const tmp = isTmpFileName(name);
  const match = SLOT_FILE_NAME.exec(tmp ? name.replace(TMP_SUFFIX, "") : name);
  if (match === null) return undefined;
  const epoch = match[2] === undefined ? 0 : Number(match[2]);
  if (match[3] === "clean-shutdown.json" && epoch === 0) return undefined;
  if (!Number.isSafeInteger(epoch) || epoch > 0x7fffffff) return undefined;
  const kind: SlotFileKind = match[3] === "json" ? "checkpoint" : match[3] === "journal" ? "journal" : "clean-shutdown";
  return { slot: Number(match[1]), epoch, kind, tmp };
}

/** The files of one slot in one epoch that exist (tmp files are listed apart). */
export interface EpochFiles {
  readonly epoch: number;
  checkpoint: boolean;
  journal: boolean;
  cleanShutdown: boolean;
  /** Names of tmp files of this epoch's files. */
  readonly tmp: string[];
}

/** Every epoch of which `slot` has a file in `dir` (tmp files included), newest first. */
export async function listSlotEpochs(fs: Fs, dir: string, slot: number): Promise<EpochFiles[]> {
  const epochs = new Map<number, EpochFiles>();
  for (const name of await fs.readdir(dir)) {
    const parsed = parseSlotFileName(name);
    if (parsed === undefined || parsed.slot !== slot) continue;
    let files = epochs.get(parsed.epoch);
    if (files === undefined) {
      files = { epoch: parsed.epoch, checkpoint: false, journal: false, cleanShutdown: false, tmp: [] };
      epochs.set(parsed.epoch, files);
    }
    if (parsed.tmp) files.tmp.push(name);
    else if (parsed.kind === "checkpoint") files.checkpoint = true;
    else if (parsed.kind === "journal") files.journal = true;
    else files.cleanShutdown = true;
  }
  return [...epochs.values()].sort((a, b) => b.epoch - a.epoch);
}

/** The first file in `dir` of an epoch above 0, whatever its slot (single-broker mode refuses to open). */
export async function findEpochFile(fs: Fs, dir: string): Promise<{ name: string; parsed: SlotFileName } | undefined> {
  for (const name of (await fs.readdir(dir)).sort()) {
    const parsed = parseSlotFileName(name);
    if (parsed !== undefined && parsed.epoch > 0 && !parsed.tmp) return { name, parsed };
  }
  return undefined;
}

/**
 * A slot load at a coordinator epoch below one whose files exist: a newer owner took the slot over, so
 * this broker's claim is stale (or, at epoch 0, single-broker mode met a directory cluster mode wrote).
 * Not damage: the files are sound, they are just not this broker's to read or write.
 */
export class NewerSlotEpochError extends Error {
  override readonly name = "NewerSlotEpochError";
  constructor(
    readonly path: string,
    readonly slot: number,
    readonly epoch: number,
    readonly newest: number,
  ) {
    super(`${path}: slot ${slot} has files of coordinator epoch ${newest}, above the epoch ${epoch} of this load: a newer owner took it over`);
  }
}

/** Unlinks `name` in `dir`; one already gone (another broker's clean-up) is fine. */
export async function unlinkIfPresent(fs: Fs, dir: string, name: string): Promise<void> {
  try {
    await fs.unlink(join(dir, name));
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ENOENT") throw error;
  }
}

/**
 * The file names of `epochs` that a take-over at `epoch` from `source` may remove once its checkpoint is
 * durable: every file of an epoch below the source (two owners back: nobody reads them again, and the
 * source's own stay for whoever looks at what the former owner left) and of an epoch between the source
 * and `epoch` (a take-over that stopped before its checkpoint).
 */
export function removableNames(slot: number, epochs: readonly EpochFiles[], source: number, epoch: number): string[] {
  const names: string[] = [];
  for (const files of epochs) {
    if (files.epoch === source || files.epoch >= epoch) continue;
    if (files.checkpoint) names.push(slotCheckpointName(slot, files.epoch));
    if (files.journal) names.push(slotJournalName(slot, files.epoch));
    if (files.cleanShutdown) names.push(slotCleanShutdownName(slot, files.epoch));
    names.push(...files.tmp);
  }
  return names;
}

function someName(slot: number, files: EpochFiles): string {
  if (files.checkpoint) return slotCheckpointName(slot, files.epoch);
  if (files.journal) return slotJournalName(slot, files.epoch);
  if (files.cleanShutdown) return slotCleanShutdownName(slot, files.epoch);
  return files.tmp[0] ?? slotCheckpointName(slot, files.epoch);
}

/**
 * The epoch whose files a load of `slot` at `epoch` reads (`epochs` from `listSlotEpochs`): the newest one
 * whose checkpoint exists, or 0 (today's names, or nothing: a slot never written). Any file of an epoch
 * above `epoch`, even a tmp file, is a newer owner's: NewerSlotEpochError. An epoch passed over for want
 * of its checkpoint must be a take-over that stopped before it, its journal a header alone (the record
 * of `format`); a record there, or a clean-shutdown record, is damage (CorruptStateError): that epoch
 * was served, and its records would be lost.
 */
export async function sourceEpoch(fs: Fs, dir: string, slot: number, epochs: readonly EpochFiles[], epoch: number, format: string): Promise<number> {
  const newest = epochs[0];
  if (newest !== undefined && newest.epoch > epoch) throw new NewerSlotEpochError(join(dir, someName(slot, newest)), slot, epoch, newest.epoch);
  for (const files of epochs) {
    if (files.epoch === 0 || files.checkpoint) return files.epoch;
    const checkpoint = join(dir, slotCheckpointName(slot, files.epoch));
    if (files.cleanShutdown) {
      throw new CorruptStateError(join(dir, slotCleanShutdownName(slot, files.epoch)), `is the clean-shutdown record of epoch ${files.epoch}, whose checkpoint ${checkpoint} is missing`);
    }
    if (!files.journal) continue;
    const path = join(dir, slotJournalName(slot, files.epoch));
    const contents = await readJournal(fs, path, {
      format,
      readOnly: true,
      onRecord: (_line, where) => {
        throw new CorruptStateError(where, `is a record of epoch ${files.epoch}, whose checkpoint ${checkpoint} is missing: records may be lost`);
      },
    });
    if (contents.header === undefined || contents.tornBytes > 0) {
      throw new CorruptStateError(path, `is not the header alone that a take-over leaves before its checkpoint ${checkpoint}, which is missing`);
    }
  }
  return 0;
}

/**
 * Runs `read` of a former owner's files, again when it fails with a CorruptStateError of another kind than
 * the time before (up to `attempts` reads): that owner may still be writing them, frozen past its lease and
 * resumed, and a read between its checkpoint's rename and its journal's sees the two of different
 * generations. Damage fails every read the same way and is reported.
 */
export async function readRacingWriter(read: () => Promise<void>, attempts = 3): Promise<void> {
  let previous: string | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      await read();
      return;
    } catch (error) {
      if (!(error instanceof CorruptStateError) || attempt >= attempts || error.message === previous) throw error;
      previous = error.message;
    }
  }
}
