/**
 * Durable group state: committed offsets, staged (transactional) offsets and group records, sharded into
 * slots by slot = fnv1a32(group id) % 50 (docs/architecture.md, "Storage rules"), two files per slot:
 *
 *   <data>/__cluster/offsets/slot-N.json      the checkpoint: a state file (state-file.ts: versioned,
 *                                             CRC-32, written atomically) holding the slot's whole state
 *   <data>/__cluster/offsets/slot-N.journal   the writes since: one line per write, each a state-file
 *                                             envelope (format "group-offsets-journal") around
 *                                             {seq, slot: <the slot's whole state after the write>}
 *
 * A slot's state (in both files) is {slot, nextSeq, groups[], offsets[], staged[]}, sorted so that the
 * same state always gives the same bytes:
 *   groups:  {groupId, protocolType, protocolName, generationId, leaderId, state, stateTimestampMs}
 *   offsets: {groupId, topic, partition, offset, leaderEpoch, metadata, commitTimestampMs, expireTimestampMs, seq}
 *   staged:  {groupId, producerId, topic, partition, offset, leaderEpoch, metadata, commitTimestampMs, seq}
 *
 * Writes: one serial writer per slot with group commit. `mutate(slot, fn)` queues `fn`; the writer takes
 * every queued change at once, applies them in call order to a copy-on-write draft of the durable slot,
 * appends the resulting state to the slot's journal and fsyncs it, and only then publishes the new slot
 * and resolves each caller with its `fn`'s result. Changes queued while a write is in flight share the
 * next write and its fsync, so N concurrent commits cost far fewer than N fsyncs. A batch that changes
 * nothing writes nothing. Reads (`slot(n)`) see only durable state: an answer never rests on state a
 * crash could lose.
 *
 * Why a journal of whole states beside the slot-N.json checkpoint: rewriting slot-N.json atomically costs
 * two fsyncs, a rename and a directory fsync per write (~1.5 ms on the reference disk); appending a line
 * and fsyncing it costs one (~0.35 ms), and offset commits (OffsetCommit, TxnOffsetCommit, EndTxn's offset
 * hook) are on the hot path of every consumer group. Each record is the whole state, so the last complete
 * record is the state and nothing needs replaying; the journal is folded into the checkpoint
 * ("compaction": an atomic rewrite of slot-N.json, then the journal is emptied and that is fsynced) once it
 * exceeds max(1 MiB, 4 x the last record), which keeps it, and the cost of the rewrites, bounded.
 * Whole states rather than changes keep the write O(slot), as before; group commit amortizes it, and a slot
 * is bounded (OFFSET_SLOT_BYTES_MAX) far below the state-file limit.
 *
 * Failures: a failed fsync is fatal (FatalError): every waiting and later caller is refused with it and the
 * process must exit. Any other failed write (ENOSPC, EIO) refuses the callers of that batch and cuts the
 * partial record off the journal; the slot in memory keeps its durable state; `onWriteFailed` is told, so
 * that whoever changed other state alongside (the group coordinator) can reconcile.
 *
 * Loading happens at open, for every slot: the checkpoint, then the journal's last record when there is
 * one. An unterminated last line is a write that never completed (never acknowledged): it is cut off.
 * Anything else that fails a check (a bad checkpoint, a bad complete record, records out of sequence, a
 * record of another slot) raises CorruptStateError naming the file. A slot is never taken for empty: that
 * would silently rewind every consumer.
 */
import { join } from "node:path";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { isGroupStateName, type PersistedGroup } from "../domain/groups/group-coordinator-state.ts";
import {
  OFFSET_SLOT_BYTES_MAX,
  OffsetSlot,
  type CommittedOffset,
  type GroupOffsets,
  type OffsetSlotDraft,
  type StagedOffset,
} from "../domain/groups/offsets.ts";
import { cleanTmpFiles, ensureDir } from "./atomic-file.ts";
import { JournalFile, readJournal } from "./journal-file.ts";
import { decodeState, encodeState, loadState, saveState } from "./state-file.ts";

export const OFFSETS_SLOT_FORMAT = "group-offsets-slot";
export const OFFSETS_SLOT_VERSION = 1;
export const OFFSETS_JOURNAL_FORMAT = "group-offsets-journal";
export const OFFSETS_JOURNAL_VERSION = 1;
export const OFFSETS_SLOT_COUNT_DEFAULT = 50;
/** The journal is folded into the checkpoint once it exceeds max(this, ratio x its last record). */
export const OFFSETS_JOURNAL_COMPACT_BYTES_MIN = 1024 * 1024;
export const OFFSETS_JOURNAL_COMPACT_RATIO = 4;

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
  /** Sequence number of the journal's last record (0: none since the last compaction). */
  journalSeq = 0;
  lastRecordBytes = 0;

  constructor(
    readonly index: number,
    readonly path: string,
    /** Replaced at load by one that knows the length of the valid content. */
    public journal: JournalFile,
    public state: OffsetSlot,
  ) {}
}

interface SlotBody {
  slot: number;
  nextSeq: number;
  groups: PersistedGroup[];
  offsets: (CommittedOffset & { groupId: string; topic: string; partition: number })[];
  staged: (StagedOffset & { groupId: string; producerId: number; topic: string; partition: number })[];
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
        if (changed) {
          try {
            await this.append(slot, bodyFromSlot(slot.index, next));
          } catch (error) {
            if (error instanceof FatalError && this.fatal === undefined) this.fatal = error;
            const refusal = this.fatal ?? error;
            for (const q of batch) q.reject(refusal);
            if (!(error instanceof FatalError)) this.onWriteFailed(slot.index, error);
            continue;
          }
          slot.state = next;
          slot.writes += 1;
        }
        batch.forEach((q, i) => {
          const outcome = outcomes[i]!;
          if (outcome.ok) q.resolve(outcome.value);
          else q.reject(outcome.error);
        });
        if (changed) {
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

  /** Appends the slot's new state as one journal record and makes it durable. */
  private async append(slot: SlotWriter, body: SlotBody): Promise<void> {
    const seq = slot.journalSeq + 1;
    const line = encodeState(OFFSETS_JOURNAL_FORMAT, OFFSETS_JOURNAL_VERSION, { seq, slot: body });
    await slot.journal.append(line);
    slot.journalSeq = seq;
    slot.lastRecordBytes = line.length;
  }

  /**
   * Folds the journal into the checkpoint once it is large: the checkpoint is rewritten atomically with
   * the durable state (which is the journal's last record), then the journal is emptied and that is
   * fsynced before anything else is appended. A crash in between leaves a journal whose last record
   * equals the checkpoint, which loads to the same state.
   */
  private async maybeCompact(slot: SlotWriter): Promise<void> {
    if (slot.journal.bytes < Math.max(this.compactBytesMin, this.compactRatio * slot.lastRecordBytes)) return;
    await saveState(this.fs, slot.path, OFFSETS_SLOT_FORMAT, OFFSETS_SLOT_VERSION, bodyFromSlot(slot.index, slot.state));
    await slot.journal.empty();
    slot.journalSeq = 0;
  }
}

/** Loads a slot's checkpoint and the last record of its journal (CorruptStateError for a damaged file). */
async function loadSlot(fs: Fs, dir: string, slot: SlotWriter): Promise<void> {
  const checkpoint = await loadState(fs, slot.path, OFFSETS_SLOT_FORMAT, { current: OFFSETS_SLOT_VERSION, parse: parseSlotBody });
  if (checkpoint !== undefined) {
    if (checkpoint.slot !== slot.index) throw new CorruptStateError(slot.path, `holds slot ${checkpoint.slot}, not ${slot.index}`);
    slot.state = slotFromBody(checkpoint);
  }
  let last: JournalBody | undefined;
  let lastBytes = 0;
  const journalBytes = await readJournal(fs, slot.journal.path, (line, where) => {
    const record = decodeState(where, line, OFFSETS_JOURNAL_FORMAT, { current: OFFSETS_JOURNAL_VERSION, parse: parseJournalBody }) as JournalBody;
    if (record.seq !== (last?.seq ?? 0) + 1) throw new CorruptStateError(where, `record ${record.seq} follows record ${last?.seq ?? 0}`);
    if (record.slot.slot !== slot.index) throw new CorruptStateError(where, `holds slot ${record.slot.slot}, not ${slot.index}`);
    last = record;
    lastBytes = line.length;
  });
  if (last !== undefined) slot.state = slotFromBody(last.slot);
  slot.journal = new JournalFile(fs, dir, slot.journal.path, journalBytes);
  slot.journalSeq = last?.seq ?? 0;
  slot.lastRecordBytes = lastBytes;
}

interface JournalBody {
  seq: number;
  slot: SlotBody;
}

function parseJournalBody(raw: unknown): JournalBody {
  const body = obj(raw, "body");
  return { seq: int(body, "seq", "body", 1), slot: parseSlotBody(body.slot) };
}

// ---- the file format -------------------------------------------------------------------------------

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function bodyFromSlot(index: number, slot: OffsetSlot): SlotBody {
  const body: SlotBody = { slot: index, nextSeq: slot.nextSeq, groups: [], offsets: [], staged: [] };
  for (const groupId of [...slot.groups.keys()].sort(compare)) {
    const g = slot.groups.get(groupId)!;
    if (g.record !== null) body.groups.push(g.record);
    for (const topic of [...g.committed.keys()].sort(compare)) {
      const partitions = g.committed.get(topic)!;
      for (const partition of [...partitions.keys()].sort((a, b) => a - b)) {
        body.offsets.push({ groupId, topic, partition, ...partitions.get(partition)! });
      }
    }
    for (const producerId of [...g.staged.keys()].sort((a, b) => a - b)) {
      const offsets = g.staged.get(producerId)!;
      for (const topic of [...offsets.keys()].sort(compare)) {
        const partitions = offsets.get(topic)!;
        for (const partition of [...partitions.keys()].sort((a, b) => a - b)) {
          body.staged.push({ groupId, producerId, topic, partition, ...partitions.get(partition)! });
        }
      }
    }
  }
  return body;
}

function slotFromBody(body: SlotBody): OffsetSlot {
  const groups = new Map<string, GroupOffsets>();
  const group = (groupId: string) => {
    let g = groups.get(groupId);
    if (g === undefined) groups.set(groupId, (g = { record: null, committed: new Map(), staged: new Map() }));
    return g;
  };
  const put = <T>(map: Map<string, Map<number, T>>, topic: string, partition: number, value: T) => {
    let partitions = map.get(topic);
    if (partitions === undefined) map.set(topic, (partitions = new Map()));
    partitions.set(partition, value);
  };
  for (const r of body.groups) group(r.groupId).record = r;
  for (const o of body.offsets) {
    const { groupId, topic, partition, ...offset } = o;
    put(group(groupId).committed, topic, partition, offset);
  }
  for (const s of body.staged) {
    const { groupId, producerId, topic, partition, ...offset } = s;
    const g = group(groupId);
    let offsets = g.staged.get(producerId);
    if (offsets === undefined) g.staged.set(producerId, (offsets = new Map()));
    put(offsets, topic, partition, offset);
  }
  return OffsetSlot.fromGroups(groups, body.nextSeq);
}

function fail(what: string): never {
  throw new Error(what);
}

function obj(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${what} is not an object`);
  return value as Record<string, unknown>;
}

function str(o: Record<string, unknown>, key: string, what: string): string {
  const v = o[key];
  if (typeof v !== "string") fail(`${what}.${key} is not a string`);
  return v;
}

function nullableStr(o: Record<string, unknown>, key: string, what: string): string | null {
  const v = o[key];
  if (v === null) return null;
  if (typeof v !== "string") fail(`${what}.${key} is neither a string nor null`);
  return v;
}

function int(o: Record<string, unknown>, key: string, what: string, min = -Number.MAX_SAFE_INTEGER): number {
  const v = o[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) fail(`${what}.${key} is not an integer >= ${min}`);
  return v;
}

function nullableInt(o: Record<string, unknown>, key: string, what: string): number | null {
  return o[key] === null ? null : int(o, key, what);
}

function arr(o: Record<string, unknown>, key: string): unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) fail(`${key} is not an array`);
  return v;
}

/** Checks every field of a slot body; throws (and loadState reports the file corrupt) at the first problem. */
export function parseSlotBody(raw: unknown): SlotBody {
  const body = obj(raw, "body");
  const slot = int(body, "slot", "body", 0);
  const nextSeq = int(body, "nextSeq", "body", 0);
  const seen = new Set<string>();
  const groups = arr(body, "groups").map((value, i) => {
    const what = `groups[${i}]`;
    const g = obj(value, what);
    const state = str(g, "state", what);
    if (!isGroupStateName(state)) fail(`${what}.state ${JSON.stringify(state)} is not a group state`);
    const record: PersistedGroup = {
      groupId: str(g, "groupId", what),
      protocolType: nullableStr(g, "protocolType", what),
      protocolName: nullableStr(g, "protocolName", what),
      generationId: int(g, "generationId", what, 0),
      leaderId: nullableStr(g, "leaderId", what),
      state,
      stateTimestampMs: nullableInt(g, "stateTimestampMs", what),
    };
    if (seen.has(record.groupId)) fail(`${what}: group ${JSON.stringify(record.groupId)} appears twice`);
    seen.add(record.groupId);
    return record;
  });
  const offsets = arr(body, "offsets").map((value, i) => {
    const what = `offsets[${i}]`;
    const o = obj(value, what);
    const seq = int(o, "seq", what, 0);
    if (seq >= nextSeq) fail(`${what}.seq ${seq} is not below nextSeq ${nextSeq}`);
    return {
      groupId: str(o, "groupId", what),
      topic: str(o, "topic", what),
      partition: int(o, "partition", what, 0),
      offset: int(o, "offset", what),
      leaderEpoch: int(o, "leaderEpoch", what),
      metadata: str(o, "metadata", what),
      commitTimestampMs: int(o, "commitTimestampMs", what),
      expireTimestampMs: nullableInt(o, "expireTimestampMs", what),
      seq,
    };
  });
  const staged = arr(body, "staged").map((value, i) => {
    const what = `staged[${i}]`;
    const o = obj(value, what);
    const seq = int(o, "seq", what, 0);
    if (seq >= nextSeq) fail(`${what}.seq ${seq} is not below nextSeq ${nextSeq}`);
    return {
      groupId: str(o, "groupId", what),
      producerId: int(o, "producerId", what, 0),
      topic: str(o, "topic", what),
      partition: int(o, "partition", what, 0),
      offset: int(o, "offset", what),
      leaderEpoch: int(o, "leaderEpoch", what),
      metadata: str(o, "metadata", what),
      commitTimestampMs: int(o, "commitTimestampMs", what),
      seq,
    };
  });
  return { slot, nextSeq, groups, offsets, staged };
}
