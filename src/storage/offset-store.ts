/**
 * Durable group state: committed offsets, staged (transactional) offsets and group records, sharded into
 * slots by slot = fnv1a32(group id) % 50 (docs/architecture.md, "Storage rules"), two files per slot:
 *
 *   <data>/__cluster/offsets/slot-N.json      the checkpoint: a state file (state-file.ts: versioned,
 *                                             CRC-32, written atomically) holding the slot's whole state
 *                                             as of journal record lastSeq, and its generation (the fold
 *                                             that wrote it: 1 for the first, one more at every fold)
 *   <data>/__cluster/offsets/slot-N.journal   the writes since: a header naming the checkpoint's
 *                                             generation and lastSeq (journal-file.ts), then one line per
 *                                             write, each a state-file envelope (format
 *                                             "group-offsets-journal") around what the write changed
 *                                             (offset-journal.ts has both bodies)
 *   <data>/__cluster/offsets/clean-shutdown.json  written at close: each slot's journal as it was left
 *                                             (clean-shutdown.ts)
 *
 * Writes: one serial writer per slot with group commit. `mutate(slot, fn)` queues `fn`; the writer takes
 * every queued change at once, applies them in call order to a copy-on-write draft of the durable slot,
 * appends what changed between the durable slot and the draft as one journal record and fsyncs it, and
 * only then publishes the new slot and resolves each caller with its `fn`'s result. Changes queued while a
 * write is in flight share the next write and its fsync, so N concurrent commits cost far fewer than N
 * fsyncs. A batch that changes nothing writes nothing. Reads (`slot(n)`) see only durable state: an answer
 * never rests on state a crash could lose.
 *
 * Why a journal of changes beside the slot-N.json checkpoint: rewriting slot-N.json atomically costs two
 * fsyncs, a rename and a directory fsync per write (~1.5 ms on the reference disk); appending a line and
 * fsyncing it costs one (~0.35 ms), and offset commits (OffsetCommit, TxnOffsetCommit, EndTxn's offset
 * hook) are on the hot path of every consumer group. A record carries only the groups and partitions the
 * write changed, so a TxnOffsetCommit or an EndTxn costs bytes in proportion to its own offsets, not to
 * the slot: with 100 groups x 100 partitions in a slot, a transaction of 10 partitions appends ~1.6 KiB
 * where whole-state records appended 3.7 MiB (docs/benchmarks.md, "Offset store"). The journal is folded
 * into the checkpoint ("compaction", a fold: an atomic rewrite of slot-N.json of the next generation with
 * the durable state and the sequence number of the journal's last record, then the journal is replaced
 * atomically by a header of that generation) once it exceeds max(1 MiB, 2 x the checkpoint), which
 * amortizes the rewrites to O(1) per byte appended and bounds the journal and the replay at load. A crash
 * between the two leaves the previous journal, whose records the checkpoint holds up to exactly its
 * lastSeq; it is replaced at load. A slot's first write puts down a journal header and then an empty
 * checkpoint of generation 1 (`firstFold`), so that every journal with records follows a checkpoint that
 * vouches for its header.
 *
 * Failures: a failed fsync is fatal (FatalError): every waiting and later caller is refused with it and the
 * process must exit. Any other failed write (ENOSPC, EIO) refuses the callers of that batch and cuts the
 * partial record off the journal; the slot in memory keeps its durable state; `onWriteFailed` is told, so
 * that whoever changed other state alongside (the group coordinator) can reconcile.
 *
 * Loading happens at open, for every slot (or, in explicit-load mode, per slot by `loadSlot`): the
 * checkpoint, then every journal record after its lastSeq,
 * replayed in strict sequence. An unterminated last line is a write that never completed (never
 * acknowledged): it is cut off, unless the previous process shut down cleanly. Anything else that fails a
 * check (a bad checkpoint, a bad complete record, records out of sequence or continuing a newer checkpoint
 * than the one present, a record of another slot, a record that changes something the state does not hold,
 * a journal without a header or of another generation than its checkpoint's, a journal that differs from
 * what the clean-shutdown record says it held) raises CorruptStateError naming the file and the record. A
 * slot is never taken for empty: that would silently rewind every consumer. `verify` checks the files
 * against memory while the broker runs.
 *
 * Explicit-load mode (cluster mode: group slots move between brokers sharing the data directory): no slot
 * is loaded at open; `loadSlot` reads one (every check above applies), `releaseSlot` waits for its writer,
 * closes its journal and forgets it. Reads and writes of a slot that is not loaded are refused
 * (SlotNotLoadedError: a bug in the caller), never served from an empty slot. `loadSlot(slot, epoch)`
 * reads the newest coordinator epoch's files and from then on writes only the files of `epoch`,
 * slot-N.eE.json / slot-N.eE.journal (slot-files.ts; epoch 0 is the names above), so that a deposed owner
 * that writes on is never read again. The store-wide clean-shutdown record assumes this store is its
 * slots' only writer, so this mode writes none and removes a stale one at open, as the transaction store
 * does; each slot epoch gets its own record instead, slot-N.eE.clean-shutdown.json, at release and close.
 *
 * Versions: the checkpoint is at version 3 (version 2 had no generation, version 1 no lastSeq either, read
 * as lastSeq 0), the journal's records at version 2 (records of changes; version 1 records held the slot's
 * whole state and are read as records that replace it) after a header. Files written by earlier builds
 * load, and the slot is rewritten at once: its journal gets a header (the same records), then a fold
 * writes a checkpoint of version 3. Anything else is refused.
 */
import { join } from "node:path";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { OFFSET_SLOT_BYTES_MAX, OffsetSlot, type OffsetSlotDraft } from "../domain/groups/offsets.ts";
import { cleanTmpFiles, ensureDir, writeFileAtomic } from "./atomic-file.ts";
import {
  checkAgainstCleanShutdown,
  readCleanShutdown,
  readSlotCleanShutdown,
  removeCleanShutdown,
  removeRecordFile,
  writeCleanShutdown,
  writeSlotCleanShutdown,
  type CleanShutdown,
} from "./clean-shutdown.ts";
import {
  findEpochFile,
  listSlotEpochs,
  NewerSlotEpochError,
  readRacingWriter,
  removableNames,
  slotCheckpointName,
  slotCleanShutdownName,
  slotJournalName,
  sourceEpoch,
  unlinkIfPresent,
} from "./slot-files.ts";
import { checkJournalFollows, checkSequence, holdingWriter, JournalFile, verifySlots, readJournal, verifyJournal, type JournalMark, type StateVerifyReport, type JournalStanding } from "./journal-file.ts";
import {
  applyGroupDelta,
  bodyFromSlot,
  groupsFromBody,
  markPreviousJournalVersion,
  migrateSlotBody,
  parseJournalRecord,
  parseSlotBody,
  ReplayError,
  slotDelta,
  type DeltaRecord,
  type GroupDelta,
  type JournalRecord,
  type ReplayGroups,
  type SlotBody,
} from "./offset-journal.ts";
import { decodeState, encodeState, loadState } from "./state-file.ts";

export const OFFSETS_SLOT_FORMAT = "group-offsets-slot";
export const OFFSETS_SLOT_VERSION = 3;
export const OFFSETS_JOURNAL_FORMAT = "group-offsets-journal";
export const OFFSETS_JOURNAL_VERSION = 2;
export const OFFSETS_SLOT_COUNT_DEFAULT = 50;
/** The journal is folded into the checkpoint once it exceeds max(this, ratio x the checkpoint's bytes). */
export const OFFSETS_JOURNAL_COMPACT_BYTES_MIN = 1024 * 1024;
export const OFFSETS_JOURNAL_COMPACT_RATIO = 2;

const SLOT_FILE = /^slot-(\d+)\.(json|journal)$/;

export function offsetsDir(dataDir: string): string {
  return join(dataDir, "__cluster", "offsets");
}

export function offsetsSlotPath(dataDir: string, slot: number): string {
  return join(offsetsDir(dataDir), `slot-${slot}.json`);
}

export function offsetsJournalPath(dataDir: string, slot: number): string {
  return join(offsetsDir(dataDir), `slot-${slot}.journal`);
}

/** The checkpoint of `slot` at coordinator epoch `epoch` (slot-files.ts; epoch 0 is `offsetsSlotPath`). */
export function offsetsSlotPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(offsetsDir(dataDir), slotCheckpointName(slot, epoch));
}

/** The journal of `slot` at coordinator epoch `epoch` (epoch 0 is `offsetsJournalPath`). */
export function offsetsJournalPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(offsetsDir(dataDir), slotJournalName(slot, epoch));
}

/** The clean-shutdown record of `slot` at coordinator epoch `epoch` >= 1 (cluster mode). */
export function offsetsCleanShutdownPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(offsetsDir(dataDir), slotCleanShutdownName(slot, epoch));
}

/** A change to one slot, applied by its writer; must be synchronous and should not throw. */
export type SlotMutation<R> = (draft: OffsetSlotDraft) => R;

export interface OffsetStoreOptions {
  slotCount?: number;
  /** Told when a write failed without being fatal; the slot kept its durable state. */
  onWriteFailed?: (slot: number, error: unknown) => void;
  /** The size bound of a slot (tests use small ones). */
  slotBytesMax?: number;
  /** Compaction thresholds (tests use small ones). */
  compactBytesMin?: number;
  compactRatio?: number;
  /**
   * Cluster mode: no slot is loaded at open, each is read by `loadSlot` (its take-over, at a coordinator
   * epoch) and dropped by `releaseSlot`; no store-wide clean-shutdown record (each slot epoch has its own).
   * Default false: every slot loads at open, at epoch 0.
   */
  explicitLoad?: boolean;
}

/** A read or write of a slot this store has not loaded (explicit-load mode): the caller's bug, never data. */
export class SlotNotLoadedError extends Error {
  constructor(readonly slot: number) {
    super(`offset slot ${slot} is not loaded on this broker`);
    this.name = "SlotNotLoadedError";
  }
}

interface Queued {
  fn: SlotMutation<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

class SlotWriter {
  queue: Queued[] = [];
  writing = false;
  idle: Promise<void> = Promise.resolve();
  markIdle: () => void = () => undefined;
  /** Completed file writes, for tests and metrics. */
  writes = 0;
  /** Sequence number of the last durable journal record (or of the checkpoint, when the journal has none since). */
  lastSeq = 0;
  /** The checkpoint's size: compaction's threshold grows with it. */
  checkpointBytes = 0;
  /** The checkpoint's generation (0: none yet); the journal's header names it, except while a fold runs. */
  generation = 0;
  /** A fold is writing the checkpoint or replacing the journal (`verify` leaves the slot alone). */
  folding = false;
  /** From the load until an old-format slot is rewritten: the checkpoint's lastSeq and the records after it. */
  checkpointLastSeq = 0;
  replayed: Uint8Array[] = [];
  /** In memory and served (always, outside explicit-load mode). */
  loaded = false;
  /** A `loadSlot` reading the files, shared by concurrent callers. */
  loading: Promise<void> | undefined;
  /** A `releaseSlot` in progress: new changes are refused, the queued ones still written. */
  releasing: Promise<void> | undefined;
  /** The coordinator epoch whose files the slot reads and writes (undefined: explicit-load, not loaded). */
  epoch: number | undefined;
  /** The slot's own clean-shutdown record (epoch >= 1) read at load, removed before the next write. */
  cleanRecord: string | undefined;

  constructor(
    readonly index: number,
    /** The current epoch's checkpoint (epoch 0's until a load names another). */
    public path: string,
    /** Replaced at load by one that knows the length of the valid content. */
    public journal: JournalFile,
    public state: OffsetSlot,
  ) {}

  /** Back to a slot never read (released, or its load failed), with epoch 0's files not yet read. */
  forget(path: string, journal: JournalFile): void {
    this.path = path;
    this.epoch = undefined;
    this.cleanRecord = undefined;
    this.journal = journal;
    this.state = OffsetSlot.empty();
    this.lastSeq = 0;
    this.checkpointBytes = 0;
    this.generation = 0;
    this.checkpointLastSeq = 0;
    this.replayed = [];
    this.loaded = false;
  }
}

export class OffsetStore {
  private readonly slots: SlotWriter[];
  private fatal: FatalError | undefined;
  private closed = false;
  /** The record's removal before the first write (started once). */
  private cleanShutdownRemoved: Promise<void> | undefined;

  private constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    private readonly dataDir: string,
    private readonly explicitLoad: boolean,
    slots: SlotWriter[],
    private readonly onWriteFailed: (slot: number, error: unknown) => void,
    private readonly slotBytesMax: number,
    private readonly compactBytesMin: number,
    private readonly compactRatio: number,
  ) {
    this.slots = slots;
  }

  /**
   * Opens the store under `dataDir` and loads every slot file (CorruptStateError for a damaged one); in
   * explicit-load mode loads none and removes a stale clean-shutdown record.
   */
  static async open(fs: Fs, dataDir: string, options: OffsetStoreOptions = {}): Promise<OffsetStore> {
    const slotCount = options.slotCount ?? OFFSETS_SLOT_COUNT_DEFAULT;
    if (!Number.isSafeInteger(slotCount) || slotCount < 1) throw new RangeError(`invalid slot count ${slotCount}`);
    const dir = offsetsDir(dataDir);
    await ensureDir(fs, dir);
    const slots = Array.from(
      { length: slotCount },
      (_, i) => new SlotWriter(i, offsetsSlotPath(dataDir, i), new JournalFile(fs, dir, offsetsJournalPath(dataDir, i), OFFSETS_JOURNAL_FORMAT), OffsetSlot.empty()),
    );
    const storeOf = () =>
      new OffsetStore(
        fs,
        dir,
        dataDir,
        options.explicitLoad === true,
        slots,
        options.onWriteFailed ?? (() => undefined),
        options.slotBytesMax ?? OFFSET_SLOT_BYTES_MAX,
        options.compactBytesMin ?? OFFSETS_JOURNAL_COMPACT_BYTES_MIN,
        options.compactRatio ?? OFFSETS_JOURNAL_COMPACT_RATIO,
      );
    if (options.explicitLoad === true) {
      // Slots move between brokers: another broker may change a slot after this one released it, so no
      // store-wide record vouches for them (each slot epoch has its own). One left by a single-broker run
      // is stale. Tmp files are not cleaned here: other brokers' writes in flight are among them.
      await removeCleanShutdown(fs, dir);
      const store = storeOf();
      store.cleanShutdownRemoved = Promise.resolve();
      return store;
    }
    // Single-broker mode reads epoch 0's files only: a directory cluster mode wrote is not its to serve.
    const epochFile = await findEpochFile(fs, dir);
    if (epochFile !== undefined) throw new NewerSlotEpochError(join(dir, epochFile.name), epochFile.parsed.slot, 0, epochFile.parsed.epoch);
    await cleanTmpFiles(fs, dir);
    const present = new Set<number>();
    for (const name of (await fs.readdir(dir)).sort()) {
      const match = SLOT_FILE.exec(name);
      if (match === null) continue;
      const index = Number(match[1]);
      if (index >= slotCount) throw new CorruptStateError(join(dir, name), `slot ${index} is outside the ${slotCount} slots of this store`);
      present.add(index);
    }
    for (const slot of slots) slot.epoch = 0;
    const cleanShutdown = await readCleanShutdown(fs, dir, OFFSETS_JOURNAL_FORMAT);
    // A slot the record names must be as it says even when its files are gone.
    for (const index of cleanShutdown?.slots.keys() ?? []) if (index < slotCount) present.add(index);
    const upgrades: SlotWriter[] = [];
    for (const index of [...present].sort((a, b) => a - b)) {
      const standing = await loadSlot(fs, dir, slots[index]!, cleanShutdown, false);
      if (standing !== "current" && standing !== "fresh") upgrades.push(slots[index]!);
    }
    for (const slot of slots) slot.loaded = true;
    const store = storeOf();
    // Only now, with every slot read and checked, may files change.
    for (const slot of upgrades) await store.finishLoad(slot);
    return store;
  }

  /**
   * Explicit-load mode: reads slot `index` from disk (checkpoint, then the journal after it) as the previous
   * owner left it, with every check of a load at open (CorruptStateError for damage: the slot stays
   * unloaded), and finishes what a crash left half done; from then on the slot's files are those of
   * coordinator epoch `epoch` (slot-files.ts). The files read are the newest epoch's whose checkpoint
   * exists (epoch 0's, today's names, when there is none). When that is an older epoch than `epoch` (a
   * take-over), they are only read, never written, and the state read is written as the checkpoint of
   * `epoch`'s own files, durably, before this resolves; files two owners back are removed then. Epoch 0
   * (the default) is today's files read and written in place. A file of an epoch above `epoch` means a
   * newer owner took the slot over: NewerSlotEpochError, nothing read or written. A slot already loaded
   * at `epoch` stays as it is; at another epoch it must be released first.
   */
  async loadSlot(index: number, epoch = 0): Promise<void> {
    const slot = this.writer(index);
    if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > 0x7fffffff) throw new RangeError(`invalid coordinator epoch ${epoch}`);
    if (this.closed) throw new Error("the offset store is closed");
    if (!this.explicitLoad && epoch !== 0) throw new Error("offset slots are loaded at a coordinator epoch only in explicit-load mode");
    await slot.releasing;
    if (slot.epoch !== undefined && slot.epoch !== epoch) {
      throw new Error(`offset slot ${index} is loaded at coordinator epoch ${slot.epoch}, not ${epoch}; release it first`);
    }
    if (slot.loaded) return;
    if (slot.loading === undefined) {
      slot.epoch = epoch;
      slot.loading = this.readSlot(slot, epoch).finally(() => (slot.loading = undefined));
    }
    await slot.loading;
  }

  private async readSlot(slot: SlotWriter, epoch: number): Promise<void> {
    try {
      const epochs = await listSlotEpochs(this.fs, this.dir, slot.index);
      const source = await sourceEpoch(this.fs, this.dir, slot.index, epochs, epoch, OFFSETS_JOURNAL_FORMAT);
      // The files of epoch `e` as the slot's, and their own record: read first, since once it exists its
      // writer wrote nothing more, so the journal read after it is final.
      const readFilesOf = async (e: number, readOnly: boolean): Promise<JournalStanding> => {
        slot.path = offsetsSlotPathAt(this.dataDir, slot.index, e);
        slot.journal = this.journalOf(slot.index, e);
        const hasRecord = e > 0 && epochs.some((f) => f.epoch === e && f.cleanShutdown);
        const record = hasRecord ? await readSlotCleanShutdown(this.fs, offsetsCleanShutdownPathAt(this.dataDir, slot.index, e), OFFSETS_JOURNAL_FORMAT, slot.index) : undefined;
        if (!readOnly) slot.cleanRecord = record?.path;
        return await loadSlot(this.fs, this.dir, slot, record, readOnly);
      };
      if (source === epoch) {
        const standing = await readFilesOf(epoch, false);
        if (standing !== "current" && standing !== "fresh") await this.finishLoad(slot);
      } else {
        await readRacingWriter(async () => void (await readFilesOf(source, true)));
        await this.takeOver(slot, epoch);
        for (const name of [...removableNames(slot.index, epochs, source, epoch), ...(epochs.find((f) => f.epoch === epoch)?.tmp ?? [])]) {
          // Tidiness only (nobody reads these again), hence no directory fsync.
          await unlinkIfPresent(this.fs, this.dir, name);
        }
      }
    } catch (error) {
      // Nothing of a slot that failed its checks stays in memory: a later load reads the files again.
      slot.forget(offsetsSlotPath(this.dataDir, slot.index), this.journalOf(slot.index, 0));
      throw error;
    }
    slot.loaded = true;
  }

  /**
   * The state just read from an older epoch's files becomes the checkpoint of `epoch`'s, as a slot's first
   * write does it: the journal's header first, then the checkpoint, each atomically. A crash in between
   * leaves a header alone, which a later load passes over (the older epoch is read again).
   */
  private async takeOver(slot: SlotWriter, epoch: number): Promise<void> {
    const generation = slot.generation + 1;
    const path = offsetsSlotPathAt(this.dataDir, slot.index, epoch);
    const journal = this.journalOf(slot.index, epoch);
    const body: CheckpointBody = { ...bodyFromSlot(slot.index, slot.lastSeq, slot.state), generation };
    const bytes = encodeState(OFFSETS_SLOT_FORMAT, OFFSETS_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await journal.reset(generation, slot.lastSeq);
      await writeFileAtomic(this.fs, path, bytes);
    } finally {
      slot.folding = false;
    }
    slot.path = path;
    slot.journal = journal;
    slot.checkpointBytes = bytes.length;
    slot.generation = generation;
    slot.checkpointLastSeq = slot.lastSeq;
    slot.replayed = [];
  }

  /** Whether slot `index` is in memory (always true outside explicit-load mode). */
  isLoaded(index: number): boolean {
    return this.writer(index).loaded;
  }

  /**
   * Explicit-load mode: hands slot `index` over. New changes are refused at once; the ones already queued
   * and the write, fold or repair in flight finish; then the journal is closed and the slot forgotten. A
   * later `loadSlot` reads the files again (another broker may have changed them meanwhile).
   */
  releaseSlot(index: number): Promise<void> {
    if (!this.explicitLoad) return Promise.reject(new Error("offset slots are released only in explicit-load mode"));
    const slot = this.writer(index);
    slot.releasing ??= this.release(slot).finally(() => (slot.releasing = undefined));
    return slot.releasing;
  }

  private async release(slot: SlotWriter): Promise<void> {
    await slot.loading?.catch(() => undefined);
    while (slot.writing) await slot.idle;
    if (!slot.loaded) return;
    await slot.journal.close();
    try {
      await this.recordSlotCleanShutdown(slot);
    } finally {
      slot.forget(offsetsSlotPath(this.dataDir, slot.index), this.journalOf(slot.index, 0));
    }
  }

  /**
   * Cluster mode, at release and close: the slot's own record for its epoch (>= 1), with its journal as
   * left, for whoever reads these files next (not after a fatal error or a dirty tail).
   */
  private async recordSlotCleanShutdown(slot: SlotWriter): Promise<void> {
    if (!this.explicitLoad || !slot.loaded || slot.epoch === undefined || slot.epoch === 0) return;
    if (this.fatal !== undefined || slot.journal.dirty) return;
    const path = offsetsCleanShutdownPathAt(this.dataDir, slot.index, slot.epoch);
    await writeSlotCleanShutdown(this.fs, path, OFFSETS_JOURNAL_FORMAT, slot.index, slot.journal.mark() ?? null);
  }

  private journalOf(index: number, epoch: number): JournalFile {
    return new JournalFile(this.fs, this.dir, offsetsJournalPathAt(this.dataDir, index, epoch), OFFSETS_JOURNAL_FORMAT);
  }

  /** A slot whose files are not in the current state: the previous generation's journal, or older formats. */
  private async finishLoad(slot: SlotWriter): Promise<void> {
    await this.beforeWrite(slot);
    const header = slot.journal.header;
    if (header !== undefined && header.generation === slot.generation) return;
    if (header !== undefined && header.generation === slot.generation - 1) {
      // A fold wrote the checkpoint and stopped before replacing the journal.
      await slot.journal.reset(slot.generation, slot.lastSeq);
      return;
    }
    // Files of an older version: first the journal gets a header (generation 0, the same records), then
    // a fold writes the current checkpoint. A crash between the two leaves files this reads again.
    if (header === undefined) await slot.journal.reset(0, slot.checkpointLastSeq, slot.replayed, slot.lastSeq);
    slot.replayed = [];
    await this.fold(slot);
  }

  get slotCount(): number {
    return this.slots.length;
  }

  /** The durable state of a slot (SlotNotLoadedError for one not loaded). */
  slot(index: number): OffsetSlot {
    const slot = this.writer(index);
    if (!slot.loaded) throw new SlotNotLoadedError(index);
    return slot.state;
  }

  /** File writes completed for a slot (tests: group commit). */
  writesOf(index: number): number {
    return this.writer(index).writes;
  }

  /**
   * Queues `fn` for the slot's writer; resolves with its result once a write that includes its change is
   * durable (or at once after a batch that changed nothing). Rejects if the write fails.
   */
  mutate<R>(index: number, fn: SlotMutation<R>): Promise<R> {
    if (this.fatal !== undefined) return Promise.reject(this.fatal);
    if (this.closed) return Promise.reject(new Error("the offset store is closed"));
    const slot = this.writer(index);
    // Never an empty slot made up for a write: its first fold would overwrite what another broker wrote.
    if (!slot.loaded || slot.releasing !== undefined) return Promise.reject(new SlotNotLoadedError(index));
    const done = new Promise<R>((resolve, reject) => slot.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject }));
    this.startWriter(slot);
    return done;
  }

  /** Resolves when no write is queued or in flight in any slot. */
  async idle(): Promise<void> {
    for (const slot of this.slots) await slot.idle;
  }

  /**
   * Waits for writes in flight, then closes the journals and writes the clean-shutdown record (not after a
   * fatal error or a failed write whose bytes could not be cut off, nor in explicit-load mode); later
   * mutations are refused.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    // A slot may start writing while idle() waits for another one: wait until none writes. Nothing can
    // be queued between that check and `closed` (no await in between), so no write meets a closed journal.
    while (this.slots.some((slot) => slot.writing)) await this.idle();
    this.closed = true;
    for (const slot of this.slots) {
      await slot.journal.close();
    }
    if (this.explicitLoad) {
      for (const slot of this.slots) await this.recordSlotCleanShutdown(slot);
      return;
    }
    if (this.fatal !== undefined || this.slots.some((slot) => slot.journal.dirty)) return;
    const marks = new Map<number, JournalMark | null>();
    for (const slot of this.slots) marks.set(slot.index, slot.journal.mark() ?? null);
    await writeCleanShutdown(this.fs, this.dir, OFFSETS_JOURNAL_FORMAT, marks);
  }

  /**
   * Re-reads every written slot's files and checks them against memory: the checkpoint of the slot's
   * generation up to the journal's base, the journal at least as long as what this process wrote, its
   * header and sequence intact, and the record where this process's writes end being the last one it
   * wrote. A slot whose fold runs (or ran) meanwhile is skipped; the next call checks it. For a
   * background scrubber: it reads every written slot's files whole.
   */
  async verify(): Promise<StateVerifyReport> {
    return await verifySlots(this.slots, (slot, generation, mark) => this.verifySlot(slot, generation, mark));
  }

  /**
   * Rewrites the slot that `path` (its checkpoint or journal) belongs to from its durable state in memory,
   * by a fold to the next generation: for damage `verify` found while the broker runs. Waits for the slot's
   * writer and keeps new changes queued until it is done. False when no slot has that file.
   */
  async repair(path: string): Promise<boolean> {
    const slot = this.slots.find((s) => s.loaded && s.releasing === undefined && (s.path === path || s.journal.path === path));
    if (slot === undefined || this.closed) return false;
    try {
      await holdingWriter(slot, () => this.fold(slot), () => {
        if (slot.queue.length > 0) this.startWriter(slot);
      });
    } catch (error) {
      if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
      throw error;
    }
    return true;
  }

  private async verifySlot(slot: SlotWriter, generation: number, mark: JournalMark): Promise<void> {
    const checkpoint = await loadCheckpoint(this.fs, slot.path);
    if (checkpoint === undefined) throw new CorruptStateError(slot.path, `is missing; this broker wrote it at generation ${generation}`);
    if (checkpoint.generation !== generation || checkpoint.lastSeq !== mark.baseSeq) {
      throw new CorruptStateError(
        slot.path,
        `is of generation ${checkpoint.generation}, up to record ${checkpoint.lastSeq}; this broker wrote generation ${generation}, up to record ${mark.baseSeq}`,
      );
    }
    await verifyJournal(this.fs, slot.journal.path, OFFSETS_JOURNAL_FORMAT, mark, (line, where) => decodeJournalRecord(where, line).seq);
  }

  /**
   * Before this process's first write of any slot file, the store-wide clean-shutdown record goes (from now
   * on it is stale); before a slot's next write, the slot's own record read at its load.
   */
  private async beforeWrite(slot: SlotWriter): Promise<void> {
    this.cleanShutdownRemoved ??= removeCleanShutdown(this.fs, this.dir).catch((error: unknown) => {
      this.cleanShutdownRemoved = undefined;
      throw error;
    });
    await this.cleanShutdownRemoved;
    const record = slot.cleanRecord;
    if (record !== undefined) {
      await removeRecordFile(this.fs, this.dir, record);
      if (slot.cleanRecord === record) slot.cleanRecord = undefined;
    }
  }

  private writer(index: number): SlotWriter {
    const slot = this.slots[index];
    if (slot === undefined) throw new RangeError(`offset slot ${index} is out of range`);
    return slot;
  }

  private startWriter(slot: SlotWriter): void {
    if (slot.writing) return;
    slot.writing = true;
    slot.idle = new Promise((resolve) => (slot.markIdle = resolve));
    // Started on a later turn, so that changes issued together share the first write too.
    queueMicrotask(() => void this.writeLoop(slot));
  }

  private async writeLoop(slot: SlotWriter): Promise<void> {
    try {
      while (slot.queue.length > 0) {
        const batch = slot.queue;
        slot.queue = [];
        if (this.fatal !== undefined) {
          for (const q of batch) q.reject(this.fatal);
          continue;
        }
        const draft = slot.state.draft(this.slotBytesMax);
        const outcomes = batch.map((q) => {
          try {
            return { ok: true as const, value: q.fn(draft) };
          } catch (error) {
            return { ok: false as const, error };
          }
        });
        const changed = draft.changed;
        const next = draft.finish();
        // A draft that was touched may still end where it began (a group created and dropped again).
        const groups = changed ? slotDelta(slot.state, next) : [];
        const written = groups.length > 0 || next.nextSeq !== slot.state.nextSeq;
        if (written) {
          try {
            await this.append(slot, groups, next.nextSeq);
          } catch (error) {
            if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
            const refusal = this.fatal ?? error;
            for (const q of batch) q.reject(refusal);
            if (!(error instanceof FatalError)) this.onWriteFailed(slot.index, error);
            continue;
          }
          slot.writes += 1;
        }
        slot.state = next;
        batch.forEach((q, i) => {
          const outcome = outcomes[i]!;
          if (outcome.ok) q.resolve(outcome.value);
          else q.reject(outcome.error);
        });
        if (written) {
          try {
            await this.maybeCompact(slot);
          } catch (error) {
            // A failed fsync is fatal; anything else leaves the journal in charge until the next attempt.
            if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
          }
        }
      }
    } finally {
      slot.writing = false;
      slot.markIdle();
    }
  }

  /** Appends one journal record with the write's changes and makes it durable. */
  private async append(slot: SlotWriter, groups: GroupDelta[], nextSeq: number): Promise<void> {
    await this.beforeWrite(slot);
    // A slot's first write: a journal header and an empty checkpoint of generation 1, which vouches for it.
    if (slot.generation === 0) await this.firstFold(slot);
    // A fold wrote its checkpoint and failed to replace the journal: replace it before appending.
    else if (slot.journal.header?.generation !== slot.generation) await slot.journal.reset(slot.generation, slot.lastSeq);
    const record: DeltaRecord = { seq: slot.lastSeq + 1, slot: slot.index, nextSeq, groups };
    await slot.journal.append(encodeState(OFFSETS_JOURNAL_FORMAT, OFFSETS_JOURNAL_VERSION, record), record.seq);
    slot.lastSeq = record.seq;
  }

  /**
   * Folds the journal into the checkpoint once it is large: the checkpoint is rewritten atomically with
   * the durable state and the sequence number of the last record it includes, then the journal is emptied
   * and that is fsynced before anything else is appended. A crash in between leaves records that the
   * checkpoint already includes, which the load skips by their sequence numbers.
   */
  private async maybeCompact(slot: SlotWriter): Promise<void> {
    if (slot.journal.bytes < Math.max(this.compactBytesMin, this.compactRatio * slot.checkpointBytes)) return;
    await this.fold(slot);
  }

  /**
   * Writes the checkpoint of the next generation from the durable state, then replaces the journal by a
   * header of that generation. A crash in between leaves the previous journal, which the next load
   * recognises (it ends at the checkpoint's lastSeq) and replaces; a failed replacement is retried before
   * the next append.
   */
  private async fold(slot: SlotWriter): Promise<void> {
    await this.beforeWrite(slot);
    const generation = slot.generation + 1;
    const body: CheckpointBody = { ...bodyFromSlot(slot.index, slot.lastSeq, slot.state), generation };
    const bytes = encodeState(OFFSETS_SLOT_FORMAT, OFFSETS_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await writeFileAtomic(this.fs, slot.path, bytes);
      slot.checkpointBytes = bytes.length;
      slot.generation = generation;
      await slot.journal.reset(generation, slot.lastSeq);
    } finally {
      slot.folding = false;
    }
  }

  /**
   * A slot's first checkpoint, in the opposite order to `fold`: the journal (a header of generation 1)
   * first, then the empty checkpoint of generation 1. A crash in between leaves a header alone without a
   * checkpoint, which loads as a slot never written; the other order would leave a checkpoint without a
   * journal, which cannot be told from a journal lost to damage.
   */
  private async firstFold(slot: SlotWriter): Promise<void> {
    await this.beforeWrite(slot);
    const body: CheckpointBody = { ...bodyFromSlot(slot.index, slot.lastSeq, slot.state), generation: 1 };
    const bytes = encodeState(OFFSETS_SLOT_FORMAT, OFFSETS_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await slot.journal.reset(1, slot.lastSeq);
      await writeFileAtomic(this.fs, slot.path, bytes);
      slot.checkpointBytes = bytes.length;
      slot.generation = 1;
    } finally {
      slot.folding = false;
    }
  }
}


/** The checkpoint as written (version 3): the slot's body and its generation (undefined: versions 1 and 2). */
type CheckpointBody = SlotBody & { generation?: number };

/** Marks a checkpoint of an older version (no generation); a symbol, which no JSON body can carry. */
const OLDER_CHECKPOINT = Symbol("group-offsets-slot before version 3");

function loadCheckpoint(fs: Fs, path: string): Promise<CheckpointBody | undefined> {
  return loadState(fs, path, OFFSETS_SLOT_FORMAT, {
    current: OFFSETS_SLOT_VERSION,
    accepted: [2, 1],
    migrate: (raw, version) => {
      const body = version === 1 ? migrateSlotBody(raw) : raw;
      return typeof body === "object" && body !== null ? { ...body, [OLDER_CHECKPOINT]: true } : body;
    },
    parse: (raw): CheckpointBody => {
      const body = parseSlotBody(raw);
      const fields = raw as Record<string | symbol, unknown>;
      if (fields[OLDER_CHECKPOINT] === true) {
        if ("generation" in fields) throw new Error("generation is not a field of versions 1 and 2");
        return body;
      }
      const generation = fields.generation;
      if (typeof generation !== "number" || !Number.isSafeInteger(generation) || generation < 1) throw new Error("invalid generation");
      return { ...body, generation };
    },
  });
}

function decodeJournalRecord(where: string, line: Uint8Array): JournalRecord {
  return decodeState(where, line, OFFSETS_JOURNAL_FORMAT, {
    current: OFFSETS_JOURNAL_VERSION,
    accepted: [OFFSETS_JOURNAL_VERSION - 1],
    migrate: markPreviousJournalVersion,
    parse: parseJournalRecord,
  }) as JournalRecord;
}

/**
 * Loads a slot: its checkpoint, then the journal's records after the checkpoint's lastSeq, replayed in
 * order (CorruptStateError for a damaged file or a record that does not continue the state), checked
 * against the clean-shutdown record when there is one. Writes nothing but the cut of a torn last line (not
 * even that when `readOnly`: a former owner's files): a standing other than "current" or "fresh" is for
 * the store to finish (`finishLoad`) once every slot is read.
 */
async function loadSlot(fs: Fs, dir: string, slot: SlotWriter, cleanShutdown: CleanShutdown | undefined, readOnly: boolean): Promise<JournalStanding> {
  let groups: ReplayGroups = new Map();
  let nextSeq = 0;
  let lastSeq = 0;
  const checkpoint = await loadCheckpoint(fs, slot.path);
  if (checkpoint !== undefined) {
    if (checkpoint.slot !== slot.index) throw new CorruptStateError(slot.path, `holds slot ${checkpoint.slot}, not ${slot.index}`);
    groups = groupsFromBody(checkpoint);
    nextSeq = checkpoint.nextSeq;
    lastSeq = checkpoint.lastSeq;
    slot.checkpointBytes = (await fs.stat(slot.path))?.size ?? 0;
  }
  const checkpointLastSeq = lastSeq;
  const recorded = cleanShutdown?.slots.get(slot.index);
  const replayed: Uint8Array[] = [];
  let previousSeq: number | undefined;
  const contents = await readJournal(fs, slot.journal.path, {
    format: OFFSETS_JOURNAL_FORMAT,
    cutTornTail: recorded === undefined,
    readOnly,
    onRecord: (line, where, header) => {
      const record = decodeJournalRecord(where, line);
      // Before the checks below, so that a gap is reported as one rather than as a missing checkpoint.
      checkSequence(where, record.seq, previousSeq, header);
      if (record.slot !== slot.index) throw new CorruptStateError(where, `holds slot ${record.slot}, not ${slot.index}`);
      if (record.seq > lastSeq + 1) {
        throw new CorruptStateError(where, `record ${record.seq} continues a checkpoint at record ${lastSeq} (${slot.path} missing or older)`);
      }
      previousSeq = record.seq;
      // At or below lastSeq: written before the compaction that made the checkpoint, which includes it.
      if (record.seq <= lastSeq) return record.seq;
      if (record.kind === "state") {
        groups = groupsFromBody(record.state);
        nextSeq = record.state.nextSeq;
      } else {
        if (record.nextSeq < nextSeq) throw new CorruptStateError(where, `nextSeq ${record.nextSeq} is below the slot's ${nextSeq}`);
        try {
          for (const delta of record.groups) applyGroupDelta(groups, delta);
        } catch (error) {
          if (error instanceof ReplayError) throw new CorruptStateError(where, `does not continue the slot's state: it ${error.message}`);
          throw error;
        }
        nextSeq = record.nextSeq;
      }
      lastSeq = record.seq;
      replayed.push(line);
      return record.seq;
    },
  });
  if (cleanShutdown !== undefined && recorded !== undefined) checkAgainstCleanShutdown(cleanShutdown, contents, recorded);
  const standing = checkJournalFollows(contents, slot.path, checkpoint && { generation: checkpoint.generation, lastSeq: checkpoint.lastSeq });
  slot.state = OffsetSlot.fromGroups(groups, nextSeq);
  slot.journal = new JournalFile(fs, dir, slot.journal.path, OFFSETS_JOURNAL_FORMAT, contents);
  slot.lastSeq = lastSeq;
  slot.generation = checkpoint?.generation ?? 0;
  slot.checkpointLastSeq = checkpointLastSeq;
  slot.replayed = standing === "old-format" ? replayed : [];
  return standing;
}
