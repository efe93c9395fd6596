/**
 * Durable group state: committed offsets, staged (transactional) offsets and group records, sharded into
 * slots by slot = fnv1a32(group id) % 50 (docs/architecture.md, "Storage rules"), two files per slot:
 *
 *   <data>/__cluster/offsets/slot-N.json      the checkpoint: a state file (state-file.ts: versioned,
 *                                             CRC-32, written atomically) holding the slot's whole state
 *                                             as of journal record lastSeq
 *   <data>/__cluster/offsets/slot-N.journal   the writes since: one line per write, each a state-file
 *                                             envelope (format "group-offsets-journal") around what the
 *                                             write changed (offset-journal.ts has both bodies)
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
 * into the checkpoint ("compaction": an atomic rewrite of slot-N.json with the durable state and the
 * sequence number of the journal's last record, then the journal is emptied and that is fsynced) once it
 * exceeds max(1 MiB, 2 x the checkpoint), which amortizes the rewrites to O(1) per byte appended and bounds
 * the journal and the replay at load. A crash between the two leaves records the checkpoint already holds;
 * they are recognised by their sequence numbers and skipped.
 *
 * Failures: a failed fsync is fatal (FatalError): every waiting and later caller is refused with it and the
 * process must exit. Any other failed write (ENOSPC, EIO) refuses the callers of that batch and cuts the
 * partial record off the journal; the slot in memory keeps its durable state; `onWriteFailed` is told, so
 * that whoever changed other state alongside (the group coordinator) can reconcile.
 *
 * Loading happens at open, for every slot: the checkpoint, then every journal record after its lastSeq,
 * replayed in strict sequence. An unterminated last line is a write that never completed (never
 * acknowledged): it is cut off. Anything else that fails a check (a bad checkpoint, a bad complete record,
 * records out of sequence or continuing a newer checkpoint than the one present, a record of another slot,
 * a record that changes something the state does not hold) raises CorruptStateError naming the file and
 * the record. A slot is never taken for empty: that would silently rewind every consumer.
 *
 * Versions: the checkpoint is at version 2 (version 1 had no lastSeq and is read as lastSeq 0), the journal
 * at version 2 (records of changes; version 1 records held the slot's whole state and are read as records
 * that replace it, so a data directory written by the previous build loads, and its journal goes on with
 * records of version 2 until the next compaction). Anything else is refused.
 */
import { join } from "node:path";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { OFFSET_SLOT_BYTES_MAX, OffsetSlot, type OffsetSlotDraft } from "../domain/groups/offsets.ts";
import { cleanTmpFiles, ensureDir, writeFileAtomic } from "./atomic-file.ts";
import { JournalFile, readJournal } from "./journal-file.ts";
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
} from "./offset-journal.ts";
import { decodeState, encodeState, loadState } from "./state-file.ts";

export const OFFSETS_SLOT_FORMAT = "group-offsets-slot";
export const OFFSETS_SLOT_VERSION = 2;
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

  constructor(
    readonly index: number,
    readonly path: string,
    /** Replaced at load by one that knows the length of the valid content. */
    public journal: JournalFile,
    public state: OffsetSlot,
  ) {}
}

export class OffsetStore {
  private readonly slots: SlotWriter[];
  private fatal: FatalError | undefined;
  private closed = false;

  private constructor(
    private readonly fs: Fs,
    slots: SlotWriter[],
    private readonly onWriteFailed: (slot: number, error: unknown) => void,
    private readonly slotBytesMax: number,
    private readonly compactBytesMin: number,
    private readonly compactRatio: number,
  ) {
    this.slots = slots;
  }

  /** Opens the store under `dataDir` and loads every slot file (CorruptStateError for a damaged one). */
  static async open(fs: Fs, dataDir: string, options: OffsetStoreOptions = {}): Promise<OffsetStore> {
    const slotCount = options.slotCount ?? OFFSETS_SLOT_COUNT_DEFAULT;
    if (!Number.isSafeInteger(slotCount) || slotCount < 1) throw new RangeError(`invalid slot count ${slotCount}`);
    const dir = offsetsDir(dataDir);
    await ensureDir(fs, dir);
    await cleanTmpFiles(fs, dir);
    const slots = Array.from(
      { length: slotCount },
      (_, i) => new SlotWriter(i, offsetsSlotPath(dataDir, i), new JournalFile(fs, dir, offsetsJournalPath(dataDir, i)), OffsetSlot.empty()),
    );
    const present = new Set<number>();
    for (const name of (await fs.readdir(dir)).sort()) {
      const match = SLOT_FILE.exec(name);
      if (match === null) continue;
      const index = Number(match[1]);
      if (index >= slotCount) throw new CorruptStateError(join(dir, name), `slot ${index} is outside the ${slotCount} slots of this store`);
      present.add(index);
    }
    for (const index of [...present].sort((a, b) => a - b)) await loadSlot(fs, dir, slots[index]!);
    return new OffsetStore(
      fs,
      slots,
      options.onWriteFailed ?? (() => undefined),
      options.slotBytesMax ?? OFFSET_SLOT_BYTES_MAX,
      options.compactBytesMin ?? OFFSETS_JOURNAL_COMPACT_BYTES_MIN,
      options.compactRatio ?? OFFSETS_JOURNAL_COMPACT_RATIO,
    );
  }

  get slotCount(): number {
    return this.slots.length;
  }

  /** The durable state of a slot. */
  slot(index: number): OffsetSlot {
    return this.writer(index).state;
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
    const done = new Promise<R>((resolve, reject) => slot.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject }));
    this.startWriter(slot);
    return done;
  }

  /** Resolves when no write is queued or in flight in any slot. */
  async idle(): Promise<void> {
    for (const slot of this.slots) await slot.idle;
  }

  /** Waits for writes in flight, then closes the journals; later mutations are refused. */
  async close(): Promise<void> {
    // A slot may start writing while idle() waits for another one: wait until none writes. Nothing can
    // be queued between that check and `closed` (no await in between), so no write meets a closed journal.
    while (this.slots.some((slot) => slot.writing)) await this.idle();
    this.closed = true;
    for (const slot of this.slots) {
      await slot.journal.close();
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
    const record: DeltaRecord = { seq: slot.lastSeq + 1, slot: slot.index, nextSeq, groups };
    await slot.journal.append(encodeState(OFFSETS_JOURNAL_FORMAT, OFFSETS_JOURNAL_VERSION, record));
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
    const bytes = encodeState(OFFSETS_SLOT_FORMAT, OFFSETS_SLOT_VERSION, bodyFromSlot(slot.index, slot.lastSeq, slot.state));
    await writeFileAtomic(this.fs, slot.path, bytes);
    slot.checkpointBytes = bytes.length;
    await slot.journal.empty();
  }
}

/**
 * Loads a slot: its checkpoint, then the journal's records after the checkpoint's lastSeq, replayed in
 * order (CorruptStateError for a damaged file or a record that does not continue the state).
 */
async function loadSlot(fs: Fs, dir: string, slot: SlotWriter): Promise<void> {
  let groups: ReplayGroups = new Map();
  let nextSeq = 0;
  let lastSeq = 0;
  const checkpoint = await loadState(fs, slot.path, OFFSETS_SLOT_FORMAT, {
    current: OFFSETS_SLOT_VERSION,
    accepted: [OFFSETS_SLOT_VERSION - 1],
    migrate: migrateSlotBody,
    parse: parseSlotBody,
  });
  if (checkpoint !== undefined) {
    if (checkpoint.slot !== slot.index) throw new CorruptStateError(slot.path, `holds slot ${checkpoint.slot}, not ${slot.index}`);
    groups = groupsFromBody(checkpoint);
    nextSeq = checkpoint.nextSeq;
    lastSeq = checkpoint.lastSeq;
    slot.checkpointBytes = (await fs.stat(slot.path))?.size ?? 0;
  }
  let previousSeq: number | undefined;
  const journalBytes = await readJournal(fs, slot.journal.path, (line, where) => {
    const record = decodeState(where, line, OFFSETS_JOURNAL_FORMAT, {
      current: OFFSETS_JOURNAL_VERSION,
      accepted: [OFFSETS_JOURNAL_VERSION - 1],
      migrate: markPreviousJournalVersion,
      parse: parseJournalRecord,
    }) as JournalRecord;
    if (previousSeq !== undefined && record.seq !== previousSeq + 1) throw new CorruptStateError(where, `record ${record.seq} follows record ${previousSeq}`);
    if (record.slot !== slot.index) throw new CorruptStateError(where, `holds slot ${record.slot}, not ${slot.index}`);
    if (record.seq > lastSeq + 1) {
      throw new CorruptStateError(where, `record ${record.seq} continues a checkpoint at record ${lastSeq} (${slot.path} missing or older)`);
    }
    previousSeq = record.seq;
    // At or below lastSeq: written before the compaction that made the checkpoint, which includes it.
    if (record.seq <= lastSeq) return;
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
  });
  slot.state = OffsetSlot.fromGroups(groups, nextSeq);
  slot.journal = new JournalFile(fs, dir, slot.journal.path, journalBytes);
  slot.lastSeq = lastSeq;
}
