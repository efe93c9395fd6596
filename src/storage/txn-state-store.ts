/**
 * Durable transaction coordinator state: one TxnEntry per transactional id, sharded into 50 slots by
 * slot = fnv1a32(transactional.id) % 50 (docs/architecture.md, "Storage rules"), with one serial writer per
 * slot that coalesces concurrent transitions into one write (group commit, docs/architecture.md, "Transactions
 * and idempotence").
 *
 * Files, per slot N, under <data>/__cluster/txn_state/:
 *
 *   slot-N.json      the checkpoint: a state file (state-file.ts: versioned, CRC-32, written atomically)
 *                    whose body is {generation, lastSeq, entries[]}: every entry of the slot as of journal
 *                    record lastSeq, and the fold that wrote it (1 for the first, one more at every fold)
 *   slot-N.journal   the changes since: a header naming the checkpoint's generation and lastSeq
 *                    (journal-file.ts), then one line per write, each line itself a state-file envelope
 *                    (format "txn-state-journal", version, crc32) around {seq, put[], del[]}
 *   clean-shutdown.json  written at close: each slot's journal as it was left (clean-shutdown.ts)
 *
 * Why a journal beside the slot-N.json checkpoint: rewriting the whole slot file on every transition makes
 * a transition cost O(ids in the slot). With 100k transactional ids (2000 per slot) that is a 600 KB
 * rewrite, ~12 ms p50 and ~30 ms p99 on ext4, against ~1 ms for a slot of one id
 * (scripts/bench-txn-store.ts measures both). Appending one short line and fsyncing it costs the same
 * whatever the slot holds, so EndTxn latency stays flat. The checkpoint is rewritten ("compaction") only
 * when the journal has grown past max(1 MiB, 2 x the checkpoint), which amortizes its cost to O(1) per
 * transition and bounds both the journal and the replay at load.
 *
 * Writes and durability:
 * - `update(id, fn)` runs `fn` synchronously on the slot's latest state (including changes not yet
 *   durable), in call order per slot, and applies its result in memory at once; the slot's writer then
 *   appends every change that accumulated while the previous write ran as ONE journal line and fsyncs it
 *   once. Each caller's promise resolves only when a write that includes its change is durable. An update
 *   that changes nothing (fn returns the current entry, or a rejection) also resolves only once everything
 *   it may have read is durable, so no answer ever rests on state a crash could lose.
 * - Reads (`get`, `list`, `entriesInPrepare`) see only durable state.
 * - A failed fsync is fatal (FatalError): the kernel may have dropped the dirty pages, so nobody knows what
 *   is on disk; every waiting and later update rejects with it and the process must exit (recovery runs at
 *   the next start). Any other failed write (ENOSPC, EIO on write) rejects the callers of that write and of
 *   every change applied after it, rolls the slot's memory back to its durable state, and the store goes
 *   on: nothing was acknowledged, and the journal's tail is cut back to its last good record.
 * - Compaction ("fold") writes the checkpoint of the next generation from the durable state only, then
 *   replaces the journal atomically by a header of that generation. A crash between the two leaves the
 *   previous generation's journal, whose records the checkpoint holds: it must end exactly at the
 *   checkpoint's lastSeq and is replaced before the next append. A slot's first write puts down a journal
 *   header and then an empty checkpoint of generation 1 (`firstFold`), so that every journal with records
 *   follows a checkpoint that vouches for its header.
 *
 * Loading (lazily, per slot, at its first use): checkpoint, then every journal record after its lastSeq, in
 * strict sequence. An unterminated last line is a write that never completed (and was never acknowledged):
 * it is cut off, unless the previous process shut down cleanly. Anything else that fails a check (a bad
 * checkpoint, a bad or out-of-sequence complete record, an entry in the wrong slot, a journal without the
 * checkpoint it continues, a journal without a header or of another generation than its checkpoint's, a
 * journal that differs from what the clean-shutdown record says it held) raises CorruptStateError naming
 * the file: a slot is never taken for empty, because that would forget producer ids and open transactions.
 * `verify` checks the files of the loaded slots against memory while the broker runs.
 *
 * Versions: the checkpoint is at version 2 (version 1 had no generation) and journals carry a header;
 * files written before both are read, and the slot is rewritten in the current format as it loads.
 *
 * Cluster mode (`explicitLoad`): slots are loaded by `loadSlot(slot, epoch)` at their take-over, and each
 * owner writes only the files of its coordinator epoch, slot-N.eE.json / slot-N.eE.journal and, at release
 * and close, slot-N.eE.clean-shutdown.json (slot-files.ts), so that a deposed owner that writes on is never
 * read again; epoch 0 is the names above. Within one epoch this store assumes it is the slot's only writer.
 */
import { join } from "node:path";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import { PREPARE_STATES, compareStrings, parseTxnEntry, type TxnEntry } from "../domain/txn/txn-state.ts";
import type { Fs } from "../platform/fs.ts";
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
import { checkJournalFollows, checkSequence, holdingWriter, JournalFile, verifySlots, readJournal, verifyJournal, type JournalMark, type StateVerifyReport } from "./journal-file.ts";
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
import { decodeState, encodeState, loadState } from "./state-file.ts";

export const TXN_SLOT_FORMAT = "txn-state-slot";
export const TXN_SLOT_VERSION = 2;
export const TXN_JOURNAL_FORMAT = "txn-state-journal";
export const TXN_JOURNAL_VERSION = 1;
export const TXN_SLOT_COUNT_DEFAULT = 50;
/** The journal is folded into the checkpoint once it exceeds max(this, ratio x checkpoint bytes). */
export const TXN_JOURNAL_COMPACT_BYTES_MIN = 1024 * 1024;
export const TXN_JOURNAL_COMPACT_RATIO = 2;

export function txnStateDir(dataDir: string): string {
  return join(dataDir, "__cluster", "txn_state");
}

export function txnSlotPath(dataDir: string, slot: number): string {
  return join(txnStateDir(dataDir), `slot-${slot}.json`);
}

export function txnJournalPath(dataDir: string, slot: number): string {
  return join(txnStateDir(dataDir), `slot-${slot}.journal`);
}

/** The checkpoint of `slot` at coordinator epoch `epoch` (slot-files.ts; epoch 0 is `txnSlotPath`). */
export function txnSlotPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(txnStateDir(dataDir), slotCheckpointName(slot, epoch));
}

/** The journal of `slot` at coordinator epoch `epoch` (epoch 0 is `txnJournalPath`). */
export function txnJournalPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(txnStateDir(dataDir), slotJournalName(slot, epoch));
}

/** The clean-shutdown record of `slot` at coordinator epoch `epoch` >= 1 (cluster mode). */
export function txnCleanShutdownPathAt(dataDir: string, slot: number, epoch: number): string {
  return join(txnStateDir(dataDir), slotCleanShutdownName(slot, epoch));
}

/** An update function's "no": nothing is written, and the update resolves to this value. */
export interface TxnRejection {
  readonly rejected: true;
  readonly errorCode: number;
  readonly reason?: string;
}

export function txnRejection(errorCode: number, reason?: string): TxnRejection {
  return reason === undefined ? { rejected: true, errorCode } : { rejected: true, errorCode, reason };
}

export function isTxnRejection(value: unknown): value is TxnRejection {
  return typeof value === "object" && value !== null && (value as { rejected?: unknown }).rejected === true;
}

/**
 * Given the id's current entry (undefined when absent), returns the new entry, undefined to remove the id,
 * the current entry itself for "no change", or a rejection. Must be synchronous and must not throw.
 */
export type TxnUpdateFn = (current: TxnEntry | undefined) => TxnEntry | undefined | TxnRejection;

export interface TxnUpdateOptions {
  /**
   * When this update starts the slot's writer, start it after the event loop's next turn rather than at
   * once, so that updates made meanwhile (the requests its caller releases) share its write and fsync.
   */
  readonly deferWrite?: boolean;
}

export interface TxnStateStoreOptions {
  /** The slot of a transactional id: cluster/ownership.ts slotOf (fnv1a32 % 50), injected to keep the layers. */
  slotOf: (transactionalId: string) => number;
  slotCount?: number;
  compactBytesMin?: number;
  compactRatio?: number;
  /**
   * Cluster mode (slots move between brokers sharing the data directory): a slot is read from disk only by
   * `loadSlot` (its take-over, at a coordinator epoch), never at first use, and `list` covers only loaded
   * slots; `get` and `update` of a slot that is not loaded fail (a plain Error, retriable). Default false:
   * every slot loads lazily, at epoch 0.
   */
  explicitLoad?: boolean;
}

interface SlotBody {
  /** undefined: a checkpoint of version 1, written before generations existed. */
  generation?: number;
  lastSeq: number;
  entries: TxnEntry[];
}


interface JournalBody {
  seq: number;
  put: TxnEntry[];
  del: string[];
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

class Slot {
  /** Latest state: durable plus every change applied in memory and not yet written. */
  live = new Map<string, TxnEntry>();
  /** What the files hold (acknowledged state). */
  durable = new Map<string, TxnEntry>();
  /** Changes applied to `live` since the last write began, by id (undefined: removed). */
  pending = new Map<string, TxnEntry | undefined>();
  /** Callers waiting for the next write (or for the one in flight, when `pending` is empty). */
  waiters: Waiter[] = [];
  /** The writer loop runs (appending, or compacting after an append). */
  writing = false;
  /** A journal append is in flight: its changes are applied in memory and not yet durable. */
  appending = false;
  loaded = false;
  loading: Promise<void> | undefined;
  /** Updates waiting for the load (or behind ones that are), in call order. */
  queuedForLoad = 0;
  /** Updates of this slot called and not yet settled (a release waits for them). */
  updatesInProgress = 0;
  notifyUpdatesDone: () => void = () => undefined;
  /** The coordinator epoch whose files the slot reads and writes (undefined: not loaded nor loading). */
  epoch: number | undefined;
  /** The slot's own clean-shutdown record (epoch >= 1) read at load, removed before the next write. */
  cleanRecord: string | undefined;
  /** Sequence number of the last durable journal record (or of the checkpoint). */
  lastSeq = 0;
  checkpointBytes = 0;
  /** The checkpoint's generation (0: none yet); the journal's header names it, except while a fold runs. */
  generation = 0;
  /** A fold is writing the checkpoint or replacing the journal (`verify` leaves the slot alone). */
  folding = false;
  idle: Promise<void> = Promise.resolve();
  markIdle: () => void = () => undefined;

  constructor(
    readonly index: number,
    /** The current epoch's checkpoint (epoch 0's until a load names another). */
    public checkpointPath: string,
    /** Replaced at load by one that knows the length of the valid content. */
    public journal: JournalFile,
  ) {}
}

/** Which files a slot's read takes its state from. */
interface ReadFrom {
  readonly checkpointPath: string;
  readonly journalPath: string;
  /** The clean-shutdown record that vouches for these files, if any. */
  readonly record: CleanShutdown | undefined;
  /** A former owner's files: never written (a torn tail stays, no rewrite of older formats). */
  readonly readOnly: boolean;
}

export class TxnStateStore {
  private readonly slots: Slot[];
  private fatal: FatalError | undefined;
  private closed = false;
  /** Updates called and not yet settled (close waits for them). */
  private updatesInProgress = 0;
  private notifyUpdatesDone: () => void = () => undefined;

  private constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    private readonly slotOfId: (transactionalId: string) => number,
    private readonly compactBytesMin: number,
    private readonly compactRatio: number,
    private readonly explicitLoad: boolean,
    private readonly dataDir: string,
    slotCount: number,
  ) {
    this.slots = Array.from({ length: slotCount }, (_, i) => new Slot(i, txnSlotPath(dataDir, i), this.journalOf(i)));
  }

  /** What the previous process's clean shutdown recorded (single-broker mode only). */
  private cleanShutdown: CleanShutdown | undefined;
  /** The record's removal before the first write (started once). */
  private cleanShutdownRemoved: Promise<void> | undefined;

  private journalOf(index: number): JournalFile {
    return new JournalFile(this.fs, this.dir, txnJournalPath(this.dataDir, index), TXN_JOURNAL_FORMAT);
  }

  /** Opens the store under `dataDir`, creating its directory durably. Slots are loaded at first use. */
  static async open(fs: Fs, dataDir: string, options: TxnStateStoreOptions): Promise<TxnStateStore> {
    const slotCount = options.slotCount ?? TXN_SLOT_COUNT_DEFAULT;
    if (!Number.isSafeInteger(slotCount) || slotCount < 1) throw new RangeError(`invalid slot count ${slotCount}`);
    const dir = txnStateDir(dataDir);
    await ensureDir(fs, dir);
    const store = new TxnStateStore(
      fs,
      dir,
      options.slotOf,
      options.compactBytesMin ?? TXN_JOURNAL_COMPACT_BYTES_MIN,
      options.compactRatio ?? TXN_JOURNAL_COMPACT_RATIO,
      options.explicitLoad === true,
      dataDir,
      slotCount,
    );
    if (store.explicitLoad) {
      // Slots move between brokers: another broker may change a slot after this one closed, so no
      // store-wide record vouches for them (each slot epoch has its own). One left by a single-broker run
      // is stale. Tmp files are not cleaned here: other brokers' writes in flight are among them.
      await removeCleanShutdown(fs, dir);
      store.cleanShutdownRemoved = Promise.resolve();
    } else {
      await refuseEpochFiles(fs, dir);
      await cleanTmpFiles(fs, dir);
      store.cleanShutdown = await readCleanShutdown(fs, dir, TXN_JOURNAL_FORMAT);
    }
    return store;
  }

  /** The durable entry of a transactional id, or undefined. */
  async get(transactionalId: string): Promise<TxnEntry | undefined> {
    const slot = await this.loadedSlot(this.slotFor(transactionalId));
    return slot.durable.get(transactionalId);
  }

  /**
   * Applies `fn` to the id's latest entry, in call order per slot, and resolves once the result is durable:
   * to the entry now stored (undefined when removed or absent), or to the rejection `fn` returned.
   */
  async update(transactionalId: string, fn: TxnUpdateFn, options: TxnUpdateOptions = {}): Promise<TxnEntry | undefined | TxnRejection> {
    this.checkWritable();
    const slot = this.slotFor(transactionalId);
    this.updatesInProgress += 1;
    slot.updatesInProgress += 1;
    try {
      return await this.updateInSlot(transactionalId, fn, options.deferWrite === true);
    } finally {
      this.updatesInProgress -= 1;
      slot.updatesInProgress -= 1;
      if (this.updatesInProgress === 0) this.notifyUpdatesDone();
      if (slot.updatesInProgress === 0) slot.notifyUpdatesDone();
    }
  }

  private async updateInSlot(transactionalId: string, fn: TxnUpdateFn, deferWrite: boolean): Promise<TxnEntry | undefined | TxnRejection> {
    const slot = this.slotFor(transactionalId);
    if (!slot.loaded || slot.queuedForLoad > 0) {
      // Callers that arrive while earlier ones still wait for the load queue behind them, so that every
      // update of a slot sees the ones called before it.
      slot.queuedForLoad += 1;
      try {
        await this.loadedSlot(slot);
      } finally {
        slot.queuedForLoad -= 1;
      }
    }
    // An update called before close() still completes; only a fatal failure stops it here.
    if (this.fatal !== undefined) throw this.fatal;
    const current = slot.live.get(transactionalId);
    const next = fn(current);
    if (isTxnRejection(next) || next === current) {
      await this.untilDurable(slot);
      return next;
    }
    if (next !== undefined && next.transactionalId !== transactionalId) {
      throw new TypeError(`an update of ${JSON.stringify(transactionalId)} returned the entry of ${JSON.stringify(next.transactionalId)}`);
    }
    if (next === undefined) slot.live.delete(transactionalId);
    else slot.live.set(transactionalId, next);
    slot.pending.set(transactionalId, next);
    await this.untilDurable(slot, deferWrite);
    return next;
  }

  /** Every durable entry that satisfies `filter` (all of them without one), ordered by transactional id. */
  async list(filter?: (entry: TxnEntry) => boolean): Promise<TxnEntry[]> {
    const out: TxnEntry[] = [];
    for (const slot of this.slots) {
      if (this.explicitLoad && !slot.loaded) continue;
      await this.loadedSlot(slot);
      for (const entry of slot.durable.values()) if (filter === undefined || filter(entry)) out.push(entry);
    }
    return out.sort((a, b) => compareStrings(a.transactionalId, b.transactionalId));
  }

  /** Entries whose decision is durable but whose markers may not all exist: start-up recovery drives them on. */
  entriesInPrepare(): Promise<TxnEntry[]> {
    return this.list((entry) => PREPARE_STATES.has(entry.state));
  }

  /** Loads every slot now (start-up), so that a corrupt slot fails the start rather than a later request. */
  async loadAll(): Promise<void> {
    for (const slot of this.slots) await this.load(slot);
  }

  /**
   * Reads slot `index` from disk as the previous owner left it and returns its durable entries; from then
   * on the slot's files are those of coordinator epoch `epoch` (slot-files.ts). The files read are the
   * newest epoch's whose checkpoint exists (epoch 0's, today's names, when there is none). When that is
   * an older epoch than `epoch` (a take-over), they are only read, never written, and the state read is
   * written as the checkpoint of `epoch`'s own files, durably, before this resolves; files two owners
   * back are removed then. At the same epoch they are this store's own, loaded as at open. Epoch 0 (the
   * default) is today's files read and written in place. A file of an epoch above `epoch` means a newer
   * owner took the slot over: NewerSlotEpochError, and nothing is read or written. A slot already
   * loaded at `epoch` is returned as it is; at another epoch it must be released first.
   */
  async loadSlot(index: number, epoch = 0): Promise<TxnEntry[]> {
    const slot = this.slotAt(index);
    if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > 0x7fffffff) throw new RangeError(`invalid coordinator epoch ${epoch}`);
    if (epoch !== 0 && !this.explicitLoad) throw new Error("slots are loaded at a coordinator epoch only in explicit-load mode");
    if (slot.epoch !== undefined && slot.epoch !== epoch) {
      throw new Error(`transaction state slot ${index} is loaded at coordinator epoch ${slot.epoch}, not ${epoch}; release it first`);
    }
    await this.load(slot, epoch);
    return [...slot.durable.values()];
  }

  /** Whether slot `index` is in memory. */
  isLoaded(index: number): boolean {
    return this.slotAt(index).loaded;
  }

  /**
   * Hands slot `index` over: waits for its updates already called and for its writes and compaction in
   * flight, closes its journal and forgets its entries; a later `loadSlot` reads the files again (another
   * broker may have changed them meanwhile). The caller stops calling `update` for the slot first.
   */
  async releaseSlot(index: number): Promise<void> {
    const slot = this.slotAt(index);
    await slot.loading?.catch(() => undefined);
    while (slot.updatesInProgress > 0) await new Promise<void>((resolve) => (slot.notifyUpdatesDone = resolve));
    await slot.idle;
    if (!slot.loaded) return;
    await slot.journal.close();
    try {
      await this.recordSlotCleanShutdown(slot);
    } finally {
      this.forget(slot);
    }
  }

  /** Back to a slot never read (released, or its load failed). */
  private forget(slot: Slot): void {
    slot.loaded = false;
    slot.loading = undefined;
    slot.epoch = undefined;
    slot.cleanRecord = undefined;
    slot.live = new Map();
    slot.durable = new Map();
    slot.pending = new Map();
    slot.lastSeq = 0;
    slot.checkpointBytes = 0;
    slot.generation = 0;
    slot.checkpointPath = txnSlotPath(this.dataDir, slot.index);
    slot.journal = this.journalOf(slot.index);
  }

  /**
   * Refuses new updates, waits for the ones already called and for every write and compaction in flight,
   * then closes the journals.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.updatesInProgress > 0) await new Promise<void>((resolve) => (this.notifyUpdatesDone = resolve));
    for (const slot of this.slots) {
      await slot.idle;
      await slot.journal.close();
    }
    for (const slot of this.slots) await this.recordSlotCleanShutdown(slot);
    await this.recordCleanShutdown();
  }

  /**
   * Re-reads the files of every loaded slot and checks them against memory: the checkpoint of the slot's
   * generation up to the journal's base, the journal at least as long as what this process wrote, its
   * header and sequence intact, and the record where this process's writes end being the last one it
   * wrote. A slot whose fold runs (or ran) meanwhile is skipped; the next call checks it. For a
   * background scrubber: it reads every loaded slot's files whole.
   */
  async verify(): Promise<StateVerifyReport> {
    return await verifySlots(this.slots, (slot, generation, mark) => this.verifySlot(slot, generation, mark));
  }

  /**
   * Rewrites the slot that `path` (its checkpoint or journal) belongs to from what this process holds as
   * durable, by a fold to the next generation: for damage `verify` found while the broker runs, when memory
   * still holds every acknowledged write and the files no longer do. Waits for the slot's writer and keeps
   * new writes waiting until it is done. False when no loaded slot has that file.
   */
  async repair(path: string): Promise<boolean> {
    const slot = this.slots.find((s) => s.loaded && (s.checkpointPath === path || s.journal.path === path));
    if (slot === undefined || this.closed) return false;
    try {
      await holdingWriter(slot, () => this.fold(slot), () => {
        if (slot.pending.size > 0 || slot.waiters.length > 0) this.startWriter(slot, false);
      });
    } catch (error) {
      if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
      throw error;
    }
    return true;
  }

  private async verifySlot(slot: Slot, generation: number, mark: JournalMark): Promise<void> {
    const checkpoint = await loadState(this.fs, slot.checkpointPath, TXN_SLOT_FORMAT, { current: TXN_SLOT_VERSION, parse: parseSlotBody });
    if (checkpoint === undefined) throw new CorruptStateError(slot.checkpointPath, `is missing; this broker wrote it at generation ${generation}`);
    if (checkpoint.generation !== generation || checkpoint.lastSeq !== mark.baseSeq) {
      throw new CorruptStateError(
        slot.checkpointPath,
        `is of generation ${checkpoint.generation}, up to record ${checkpoint.lastSeq}; this broker wrote generation ${generation}, up to record ${mark.baseSeq}`,
      );
    }
    await verifyJournal(this.fs, slot.journal.path, TXN_JOURNAL_FORMAT, mark, (line, where) => decodeJournalRecord(where, line).seq);
  }

  /** At close: each slot's journal as left, for the next start to check (not after a fatal error or a dirty tail). */
  private async recordCleanShutdown(): Promise<void> {
    if (this.explicitLoad || this.fatal !== undefined) return;
    const marks = new Map<number, JournalMark | null>();
    for (const slot of this.slots) {
      if (slot.loaded) {
        if (slot.journal.dirty) return;
        marks.set(slot.index, slot.journal.mark() ?? null);
      } else {
        // Not read by this process, hence unchanged since the previous record (if there was one).
        const previous = this.cleanShutdown?.slots.get(slot.index);
        if (previous !== undefined) marks.set(slot.index, previous);
      }
    }
    await writeCleanShutdown(this.fs, this.dir, TXN_JOURNAL_FORMAT, marks);
  }

  /**
   * Cluster mode, at release and close: the slot's own record for its epoch (>= 1), with its journal as
   * left, for whoever reads these files next (not after a fatal error or a dirty tail).
   */
  private async recordSlotCleanShutdown(slot: Slot): Promise<void> {
    if (!this.explicitLoad || !slot.loaded || slot.epoch === undefined || slot.epoch === 0) return;
    if (this.fatal !== undefined || slot.journal.dirty) return;
    const path = txnCleanShutdownPathAt(this.dataDir, slot.index, slot.epoch);
    await writeSlotCleanShutdown(this.fs, path, TXN_JOURNAL_FORMAT, slot.index, slot.journal.mark() ?? null);
  }

  /**
   * Before this process's first write of any slot file, the store-wide clean-shutdown record goes (from now
   * on it is stale); before a slot's next write, the slot's own record read at its load.
   */
  private async beforeWrite(slot: Slot): Promise<void> {
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

  // ---- internals -------------------------------------------------------------------------------

  private slotFor(transactionalId: string): Slot {
    const index = this.slotOfId(transactionalId);
    const slot = this.slots[index];
    if (slot === undefined) throw new RangeError(`slot ${index} of ${JSON.stringify(transactionalId)} is out of range`);
    return slot;
  }

  private slotAt(index: number): Slot {
    const slot = this.slots[index];
    if (slot === undefined) throw new RangeError(`slot ${index} is out of range`);
    return slot;
  }

  private checkWritable(): void {
    if (this.fatal !== undefined) throw this.fatal;
    if (this.closed) throw new Error("the transaction state store is closed");
  }

  /** Resolves once every change applied to the slot so far is durable (immediately if there is none). */
  private untilDurable(slot: Slot, deferWrite = false): Promise<void> {
    // Nothing pending and no append in flight: everything applied is durable (a compaction may still be
    // running, but it adds no durability anyone waits for).
    if (slot.pending.size === 0 && !slot.appending) return Promise.resolve();
    const done = new Promise<void>((resolve, reject) => slot.waiters.push({ resolve, reject }));
    this.startWriter(slot, deferWrite);
    return done;
  }

  private startWriter(slot: Slot, deferWrite: boolean): void {
    if (slot.writing) return;
    slot.writing = true;
    slot.idle = new Promise((resolve) => (slot.markIdle = resolve));
    // Started on a later turn, so that updates issued together share the first write too; a deferred one
    // after the event loop's next turn, so that the updates its caller's continuation makes join it.
    if (deferWrite) setImmediate(() => void this.writeLoop(slot));
    else queueMicrotask(() => void this.writeLoop(slot));
  }

  private async writeLoop(slot: Slot): Promise<void> {
    try {
      while (slot.pending.size > 0 || slot.waiters.length > 0) {
        if (this.fatal !== undefined) {
          // Another slot's fsync failed: nothing more is written anywhere.
          this.failWrite(slot, [], this.fatal);
          continue;
        }
        const batch = slot.pending;
        const waiters = slot.waiters;
        slot.pending = new Map();
        slot.waiters = [];
        if (batch.size > 0) {
          slot.appending = true;
          try {
            await this.append(slot, batch);
          } catch (error) {
            this.failWrite(slot, waiters, error);
            continue;
          } finally {
            slot.appending = false;
          }
          for (const [id, entry] of batch) {
            if (entry === undefined) slot.durable.delete(id);
            else slot.durable.set(id, entry);
          }
        }
        for (const waiter of waiters) waiter.resolve();
        try {
          await this.maybeCompact(slot);
        } catch (error) {
          if (error instanceof FatalError) this.failWrite(slot, [], error);
          // Any other failure leaves the journal in charge; compaction is tried again after the next write.
        }
      }
    } finally {
      slot.writing = false;
      slot.markIdle();
    }
  }

  /**
   * A write failed: its callers and every caller whose change was applied after it are refused, and the
   * slot's memory goes back to what is durable. A FatalError also stops the whole store.
   */
  private failWrite(slot: Slot, waiters: Waiter[], error: unknown): void {
    if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
    const refused = [...waiters, ...slot.waiters];
    slot.waiters = [];
    slot.pending = new Map();
    slot.live = new Map(slot.durable);
    for (const waiter of refused) waiter.reject(this.fatal ?? error);
  }

  private async append(slot: Slot, batch: Map<string, TxnEntry | undefined>): Promise<void> {
    await this.beforeWrite(slot);
    // A slot's first write: a journal header and an empty checkpoint of generation 1, which vouches for it.
    if (slot.generation === 0) await this.firstFold(slot);
    // A fold wrote its checkpoint and failed to replace the journal: replace it before appending.
    else if (slot.journal.header?.generation !== slot.generation) await slot.journal.reset(slot.generation, slot.lastSeq);
    const seq = slot.lastSeq + 1;
    const body: JournalBody = { seq, put: [], del: [] };
    for (const id of [...batch.keys()].sort(compareStrings)) {
      const entry = batch.get(id);
      if (entry === undefined) body.del.push(id);
      else body.put.push(entry);
    }
    const line = encodeState(TXN_JOURNAL_FORMAT, TXN_JOURNAL_VERSION, body);
    await slot.journal.append(line, seq);
    slot.lastSeq = seq;
  }

  private async maybeCompact(slot: Slot): Promise<void> {
    if (slot.journal.bytes < Math.max(this.compactBytesMin, this.compactRatio * slot.checkpointBytes)) return;
    await this.fold(slot);
  }

  /**
   * Writes the checkpoint of the next generation from the durable state, then replaces the journal by a
   * header of that generation. A crash in between leaves the previous journal, which the next load
   * recognises (it ends at the checkpoint's lastSeq) and replaces; a failed replacement is retried before
   * the next append.
   */
  private async fold(slot: Slot): Promise<void> {
    await this.beforeWrite(slot);
    const generation = slot.generation + 1;
    const body: SlotBody = {
      generation,
      lastSeq: slot.lastSeq,
      entries: [...slot.durable.values()].sort((a, b) => compareStrings(a.transactionalId, b.transactionalId)),
    };
    const bytes = encodeState(TXN_SLOT_FORMAT, TXN_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await writeFileAtomic(this.fs, slot.checkpointPath, bytes);
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
  private async firstFold(slot: Slot): Promise<void> {
    await this.beforeWrite(slot);
    const body: SlotBody = {
      generation: 1,
      lastSeq: slot.lastSeq,
      entries: [...slot.durable.values()].sort((a, b) => compareStrings(a.transactionalId, b.transactionalId)),
    };
    const bytes = encodeState(TXN_SLOT_FORMAT, TXN_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await slot.journal.reset(1, slot.lastSeq);
      await writeFileAtomic(this.fs, slot.checkpointPath, bytes);
      slot.checkpointBytes = bytes.length;
      slot.generation = 1;
    } finally {
      slot.folding = false;
    }
  }

  private async loadedSlot(slot: Slot): Promise<Slot> {
    if (slot.loaded) return slot;
    if (this.explicitLoad && slot.loading === undefined) throw new Error(`transaction state slot ${slot.index} is not loaded on this broker`);
    await this.load(slot);
    return slot;
  }

  /** Loads the slot once (concurrent callers share the read), at `epoch` (always 0 outside explicit-load mode). */
  private async load(slot: Slot, epoch = 0): Promise<void> {
    if (slot.loaded) return;
    if (slot.loading === undefined) {
      slot.epoch = epoch;
      const reading = this.explicitLoad
        ? this.readAtEpoch(slot, epoch)
        : this.read(slot, { checkpointPath: slot.checkpointPath, journalPath: txnJournalPath(this.dataDir, slot.index), record: this.cleanShutdown, readOnly: false });
      slot.loading = reading.then(
        () => {
          slot.loaded = true;
        },
        (error: unknown) => {
          // Not cached: a transient read failure may pass; a corrupt file fails again, loudly, every time.
          // Nothing of the failed read stays (paths of another epoch among it).
          this.forget(slot);
          throw error;
        },
      );
    }
    await slot.loading;
  }

  /**
   * Explicit-load mode: reads the slot as its newest epoch's files (up to `epoch`) say. Its own epoch's
   * files are loaded and finished as at open; an older epoch's are only read (a former owner may still
   * write them), and the state read becomes `epoch`'s checkpoint (`takeOver`).
   */
  private async readAtEpoch(slot: Slot, epoch: number): Promise<void> {
    const epochs = await listSlotEpochs(this.fs, this.dir, slot.index);
    const source = await sourceEpoch(this.fs, this.dir, slot.index, epochs, epoch, TXN_JOURNAL_FORMAT);
    const from = async (e: number, readOnly: boolean): Promise<ReadFrom> => {
      const files = epochs.find((f) => f.epoch === e);
      // The record first: once it exists its writer wrote nothing more, so the journal read after it is final.
      const record =
        e > 0 && files?.cleanShutdown === true ? await readSlotCleanShutdown(this.fs, txnCleanShutdownPathAt(this.dataDir, slot.index, e), TXN_JOURNAL_FORMAT, slot.index) : undefined;
      return { checkpointPath: txnSlotPathAt(this.dataDir, slot.index, e), journalPath: txnJournalPathAt(this.dataDir, slot.index, e), record, readOnly };
    };
    if (source === epoch) {
      const own = await from(epoch, false);
      slot.cleanRecord = own.record?.path;
      await this.read(slot, own);
      return;
    }
    await readRacingWriter(async () => this.read(slot, await from(source, true)));
    await this.takeOver(slot, epoch);
    for (const name of [...removableNames(slot.index, epochs, source, epoch), ...(epochs.find((f) => f.epoch === epoch)?.tmp ?? [])]) {
      // Tidiness only (nobody reads these again), hence no directory fsync.
      await unlinkIfPresent(this.fs, this.dir, name);
    }
  }

  /**
   * The state just read from an older epoch's files becomes the checkpoint of `epoch`'s, as a slot's first
   * write does it: the journal's header first, then the checkpoint, each atomically. A crash in between
   * leaves a header alone, which a later load passes over (the older epoch is read again).
   */
  private async takeOver(slot: Slot, epoch: number): Promise<void> {
    const generation = slot.generation + 1;
    const checkpointPath = txnSlotPathAt(this.dataDir, slot.index, epoch);
    const journal = new JournalFile(this.fs, this.dir, txnJournalPathAt(this.dataDir, slot.index, epoch), TXN_JOURNAL_FORMAT);
    const body: SlotBody = {
      generation,
      lastSeq: slot.lastSeq,
      entries: [...slot.durable.values()].sort((a, b) => compareStrings(a.transactionalId, b.transactionalId)),
    };
    const bytes = encodeState(TXN_SLOT_FORMAT, TXN_SLOT_VERSION, body);
    slot.folding = true;
    try {
      await journal.reset(generation, slot.lastSeq);
      await writeFileAtomic(this.fs, checkpointPath, bytes);
    } finally {
      slot.folding = false;
    }
    slot.journal = journal;
    slot.checkpointPath = checkpointPath;
    slot.checkpointBytes = bytes.length;
    slot.generation = generation;
  }

  private async read(slot: Slot, from: ReadFrom): Promise<void> {
    const entries = new Map<string, TxnEntry>();
    let lastSeq = 0;
    const checkpointPath = from.checkpointPath;
    const checkpoint = await loadState(this.fs, checkpointPath, TXN_SLOT_FORMAT, {
      current: TXN_SLOT_VERSION,
      accepted: [1],
      migrate: markVersion1Checkpoint,
      parse: parseSlotBody,
    });
    if (checkpoint !== undefined) {
      for (const entry of checkpoint.entries) {
        this.checkBelongs(slot, checkpointPath, entry.transactionalId);
        if (entries.has(entry.transactionalId)) {
          throw new CorruptStateError(checkpointPath, `transactional id ${JSON.stringify(entry.transactionalId)} appears twice`);
        }
        entries.set(entry.transactionalId, entry);
      }
      lastSeq = checkpoint.lastSeq;
      slot.checkpointBytes = (await this.fs.stat(checkpointPath))?.size ?? 0;
    }

    const journalPath = from.journalPath;
    const record = from.record;
    const recorded = record?.slots.get(slot.index);
    /** The records after the checkpoint, as read (an old-format journal is rewritten with them). */
    const replayed: Uint8Array[] = [];
    let previousSeq: number | undefined;
    const contents = await readJournal(this.fs, journalPath, {
      format: TXN_JOURNAL_FORMAT,
      cutTornTail: recorded === undefined,
      readOnly: from.readOnly,
      onRecord: (line, where, header) => {
        const body = decodeJournalRecord(where, line);
        // Before the checks below, so that a gap is reported as one rather than as a missing checkpoint.
        checkSequence(where, body.seq, previousSeq, header);
        previousSeq = body.seq;
        if (body.seq > lastSeq + 1) {
          throw new CorruptStateError(where, `record ${body.seq} continues a checkpoint at ${lastSeq} (${checkpointPath} missing or older)`);
        }
        if (body.seq === lastSeq + 1) {
          for (const entry of body.put) {
            this.checkBelongs(slot, where, entry.transactionalId);
            entries.set(entry.transactionalId, entry);
          }
          for (const id of body.del) entries.delete(id);
          lastSeq = body.seq;
          replayed.push(line);
        }
        return body.seq;
      },
    });
    if (record !== undefined && recorded !== undefined) checkAgainstCleanShutdown(record, contents, recorded);
    const standing = checkJournalFollows(contents, checkpointPath, checkpoint && { generation: checkpoint.generation, lastSeq: checkpoint.lastSeq });

    slot.live = new Map(entries);
    slot.durable = entries;
    slot.lastSeq = lastSeq;
    slot.generation = checkpoint?.generation ?? 0;
    slot.checkpointPath = checkpointPath;
    slot.journal = new JournalFile(this.fs, this.dir, journalPath, TXN_JOURNAL_FORMAT, contents);
    // A former owner's files stay as they are: the take-over writes the state read as its own files.
    if (from.readOnly) return;
    if (standing === "previous") {
      await this.beforeWrite(slot);
      await slot.journal.reset(slot.generation, lastSeq);
    } else if (standing === "old-format") {
      // Files of an older version: first the journal gets a header (generation 0, the same records),
      // then a fold writes the current checkpoint. A crash between the two leaves files this reads again.
      await this.beforeWrite(slot);
      if (contents.header === undefined) await slot.journal.reset(0, checkpoint?.lastSeq ?? 0, replayed, lastSeq);
      await this.fold(slot);
    }
  }

  private checkBelongs(slot: Slot, where: string, transactionalId: string): void {
    const index = this.slotOfId(transactionalId);
    if (index !== slot.index) {
      throw new CorruptStateError(where, `transactional id ${JSON.stringify(transactionalId)} belongs in slot ${index}, not ${slot.index}`);
    }
  }
}

/** Marks a checkpoint of version 1 (no generation); a symbol, which no JSON body can carry. */
const VERSION_1_CHECKPOINT = Symbol("txn-state-slot version 1");

function markVersion1Checkpoint(body: unknown): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return body;
  return { ...body, [VERSION_1_CHECKPOINT]: true };
}

function parseSlotBody(body: unknown): SlotBody {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string | symbol, unknown>;
  if (typeof b.lastSeq !== "number" || !Number.isSafeInteger(b.lastSeq) || b.lastSeq < 0) throw new Error("invalid lastSeq");
  if (!Array.isArray(b.entries)) throw new Error("entries is not an array");
  const entries = b.entries.map(parseTxnEntry);
  if (b[VERSION_1_CHECKPOINT] === true) {
    if ("generation" in b) throw new Error("generation is not a field of version 1");
    return { lastSeq: b.lastSeq, entries };
  }
  if (typeof b.generation !== "number" || !Number.isSafeInteger(b.generation) || b.generation < 1) throw new Error("invalid generation");
  return { generation: b.generation, lastSeq: b.lastSeq, entries };
}

function decodeJournalRecord(where: string, line: Uint8Array): JournalBody {
  return decodeState(where, line, TXN_JOURNAL_FORMAT, { current: TXN_JOURNAL_VERSION, parse: parseJournalBody }) as JournalBody;
}

function parseJournalBody(body: unknown): JournalBody {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string, unknown>;
  if (typeof b.seq !== "number" || !Number.isSafeInteger(b.seq) || b.seq < 1) throw new Error("invalid seq");
  if (!Array.isArray(b.put)) throw new Error("put is not an array");
  if (!Array.isArray(b.del) || !b.del.every((id: unknown) => typeof id === "string")) throw new Error("del is not a list of ids");
  return { seq: b.seq, put: b.put.map(parseTxnEntry), del: b.del as string[] };
}

/** Single-broker mode reads epoch 0's files only: a directory cluster mode wrote is not its to serve. */
async function refuseEpochFiles(fs: Fs, dir: string): Promise<void> {
  const found = await findEpochFile(fs, dir);
  if (found !== undefined) throw new NewerSlotEpochError(join(dir, found.name), found.parsed.slot, 0, found.parsed.epoch);
}
