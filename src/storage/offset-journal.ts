/**
 * The bodies of the offset store's files (storage/offset-store.ts has the files, the writer and loading):
 * the checkpoint's whole-slot body, and the journal's records, which carry only what a write changed.
 *
 * A slot's state, as the checkpoint holds it, is {slot, lastSeq, nextSeq, groups[], offsets[], staged[]},
 * sorted so that the same state always gives the same bytes:
 *   groups:  {groupId, protocolType, protocolName, generationId, leaderId, state, stateTimestampMs}
 *   offsets: {groupId, topic, partition, offset, leaderEpoch, metadata, commitTimestampMs, expireTimestampMs, seq}
 *   staged:  {groupId, producerId, topic, partition, offset, leaderEpoch, metadata, commitTimestampMs, seq}
 * `lastSeq` is the last journal record the checkpoint includes (version 2; version 1 had none: 0).
 * `nextSeq` is the slot's offset sequence counter (domain/groups/offsets.ts: the most recent of a plain and
 * a transactional commit wins), not a journal sequence.
 *
 * A journal record of version 2 is {seq, slot, nextSeq, groups: GroupDelta[]}: the changes of one
 * group-committed write, per group, sorted by group id, topic, producer id and partition:
 *
 *   {groupId, deleted: true}                       the group is gone, with its record and every offset
 *   {groupId,                                      otherwise any of:
 *     record:   PersistedGroup | null              the group's record is now this
 *     endTxn:   [{producerId, committed: [{topic, partitions: [p]}]}]
 *                                                  every offset this producer staged is gone; those of the
 *                                                  listed partitions became the committed offsets (with no
 *                                                  explicit expiry), the rest were discarded
 *     commit:   [{topic, partitions: [{partition, offset, leaderEpoch, metadata, commitTimestampMs,
 *                 expireTimestampMs, seq}]}]       committed offsets set to these
 *     uncommit: [{topic, partitions: [p]}]         committed offsets removed
 *     stage:    [{producerId, topics: [{topic, partitions: [{partition, offset, leaderEpoch, metadata,
 *                 commitTimestampMs, seq}]}]}]     staged offsets set to these
 *     unstage:  [{producerId, topics: [{topic, partitions: [p]}]}]
 *                                                  staged offsets removed
 *   }
 *
 * Replayed in that order (endTxn reads the staged offsets before anything else changes them). Version 1
 * records were {seq, slot: <the slot's whole state after the write>}; they are still read, as a record
 * that replaces the state.
 *
 * Why the delta is computed by comparing the slot before and after the write (`slotDelta`) instead of
 * logging the calls made on the draft: the journal then holds decisions, not rules. Replay sets values
 * and never re-runs a domain rule (which staged offsets win at a commit, which offsets a size bound
 * refused), so it cannot come out differently from what was acknowledged, whatever the rules become.
 * Drafts copy a group on its first change (domain/groups/offsets.ts), so unchanged groups, and unchanged
 * offsets inside a changed group, are the very same objects as before: the comparison costs one pointer
 * check per group of the slot plus the entries of the groups that changed.
 *
 * Replay is strict: a record that removes or completes something the state does not hold does not
 * continue that state, and is refused (CorruptStateError, from the store) rather than skipped.
 */
import { isGroupStateName, type PersistedGroup } from "../domain/groups/group-coordinator-state.ts";
import type { CommittedOffset, GroupOffsets, OffsetSlot, StagedOffset } from "../domain/groups/offsets.ts";

// ---- types -------------------------------------------------------------------------------------------

/** The checkpoint's body (version 2). */
export interface SlotBody {
  slot: number;
  lastSeq: number;
  nextSeq: number;
  groups: PersistedGroup[];
  offsets: (CommittedOffset & { groupId: string; topic: string; partition: number })[];
  staged: (StagedOffset & { groupId: string; producerId: number; topic: string; partition: number })[];
}

export interface TopicPartitions {
  topic: string;
  partitions: number[];
}

export interface TopicOffsets<T> {
  topic: string;
  partitions: (T & { partition: number })[];
}

export interface GroupDelta {
  groupId: string;
  deleted?: true;
  record?: PersistedGroup | null;
  endTxn?: { producerId: number; committed: TopicPartitions[] }[];
  commit?: TopicOffsets<CommittedOffset>[];
  uncommit?: TopicPartitions[];
  stage?: { producerId: number; topics: TopicOffsets<StagedOffset>[] }[];
  unstage?: { producerId: number; topics: TopicPartitions[] }[];
}

/** A journal record of version 2. */
export interface DeltaRecord {
  seq: number;
  slot: number;
  nextSeq: number;
  groups: GroupDelta[];
}

/** A journal record as loaded: a delta (version 2) or a whole state (version 1). */
export type JournalRecord = ({ kind: "delta" } & DeltaRecord) | { kind: "state"; seq: number; slot: number; state: SlotBody };

/** A slot's groups while a load replays records onto them: owned by the load, changed in place. */
export type ReplayGroups = Map<string, GroupOffsets>;

// ---- the delta of one write ----------------------------------------------------------------------------

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byNumber = (a: number, b: number) => a - b;

type ByPartition<T> = ReadonlyMap<string, ReadonlyMap<number, T>>;

/** Collects values by topic, then hands them out sorted by topic and partition. */
class ByTopic<T extends { partition: number } | number> {
  private readonly topics = new Map<string, T[]>();
  add(topic: string, value: T): void {
    let list = this.topics.get(topic);
    if (list === undefined) this.topics.set(topic, (list = []));
    list.push(value);
  }
  get size(): number {
    return this.topics.size;
  }
  sorted(): { topic: string; partitions: T[] }[] {
    const partitionOf = (v: T) => (typeof v === "number" ? v : v.partition);
    return [...this.topics.keys()].sort(compare).map((topic) => ({
      topic,
      partitions: this.topics.get(topic)!.sort((a, b) => partitionOf(a) - partitionOf(b)),
    }));
  }
}

function recordEquals(a: PersistedGroup | null, b: PersistedGroup | null): boolean {
  if (a === b) return true;
  if (a === null || b === null) return false;
  return (
    a.groupId === b.groupId &&
    a.protocolType === b.protocolType &&
    a.protocolName === b.protocolName &&
    a.generationId === b.generationId &&
    a.leaderId === b.leaderId &&
    a.state === b.state &&
    a.stateTimestampMs === b.stateTimestampMs
  );
}

/** Whether `committed` is `staged` made committed by a transaction's commit (same sequence number, same values). */
function isPromotionOf(committed: CommittedOffset, staged: StagedOffset | undefined): boolean {
  return (
    staged !== undefined &&
    committed.seq === staged.seq &&
    committed.offset === staged.offset &&
    committed.leaderEpoch === staged.leaderEpoch &&
    committed.metadata === staged.metadata &&
    committed.commitTimestampMs === staged.commitTimestampMs &&
    committed.expireTimestampMs === null
  );
}

function committedPut(partition: number, o: CommittedOffset): CommittedOffset & { partition: number } {
  return {
    partition,
    offset: o.offset,
    leaderEpoch: o.leaderEpoch,
    metadata: o.metadata,
    commitTimestampMs: o.commitTimestampMs,
    expireTimestampMs: o.expireTimestampMs,
    seq: o.seq,
  };
}

function stagedPut(partition: number, o: StagedOffset): StagedOffset & { partition: number } {
  return { partition, offset: o.offset, leaderEpoch: o.leaderEpoch, metadata: o.metadata, commitTimestampMs: o.commitTimestampMs, seq: o.seq };
}

/** The changes from `before` to `after` of one group (undefined: absent); undefined when there are none. */
export function groupDelta(groupId: string, before: GroupOffsets | undefined, after: GroupOffsets | undefined): GroupDelta | undefined {
  if (before === after) return undefined;
  if (after === undefined) return { groupId, deleted: true };
  const delta: GroupDelta = { groupId };
  if (!recordEquals(before?.record ?? null, after.record)) delta.record = after.record;

  // Producers whose staged offsets are all gone: their transaction ended (or every offset was deleted).
  const ended = new Map<number, { staged: ByPartition<StagedOffset>; committed: ByTopic<number> }>();
  for (const [producerId, staged] of before?.staged ?? []) {
    if (!after.staged.has(producerId)) ended.set(producerId, { staged, committed: new ByTopic() });
  }

  const commit = new ByTopic<CommittedOffset & { partition: number }>();
  for (const [topic, partitions] of after.committed) {
    const previous = before?.committed.get(topic);
    if (previous === partitions) continue;
    for (const [partition, o] of partitions) {
      if (previous?.get(partition) === o) continue;
      let promoted = false;
      for (const end of ended.values()) {
        if (isPromotionOf(o, end.staged.get(topic)?.get(partition))) {
          end.committed.add(topic, partition);
          promoted = true;
          break;
        }
      }
      if (!promoted) commit.add(topic, committedPut(partition, o));
    }
  }
  const uncommit = new ByTopic<number>();
  for (const [topic, partitions] of before?.committed ?? []) {
    const now = after.committed.get(topic);
    if (now === partitions) continue;
    for (const partition of partitions.keys()) if (now?.has(partition) !== true) uncommit.add(topic, partition);
  }

  const stage: NonNullable<GroupDelta["stage"]> = [];
  const unstage: NonNullable<GroupDelta["unstage"]> = [];
  for (const producerId of [...after.staged.keys()].sort(byNumber)) {
    const offsets = after.staged.get(producerId)!;
    const previous = before?.staged.get(producerId);
    if (previous === offsets) continue;
    const puts = new ByTopic<StagedOffset & { partition: number }>();
    for (const [topic, partitions] of offsets) {
      const was = previous?.get(topic);
      if (was === partitions) continue;
      for (const [partition, o] of partitions) if (was?.get(partition) !== o) puts.add(topic, stagedPut(partition, o));
    }
    const removed = new ByTopic<number>();
    for (const [topic, partitions] of previous ?? []) {
      const now = offsets.get(topic);
      if (now === partitions) continue;
      for (const partition of partitions.keys()) if (now?.has(partition) !== true) removed.add(topic, partition);
    }
    if (puts.size > 0) stage.push({ producerId, topics: puts.sorted() });
    if (removed.size > 0) unstage.push({ producerId, topics: removed.sorted() });
  }

  if (ended.size > 0) {
    delta.endTxn = [...ended.keys()].sort(byNumber).map((producerId) => ({ producerId, committed: ended.get(producerId)!.committed.sorted() }));
  }
  if (commit.size > 0) delta.commit = commit.sorted();
  if (uncommit.size > 0) delta.uncommit = uncommit.sorted();
  if (stage.length > 0) delta.stage = stage;
  if (unstage.length > 0) delta.unstage = unstage;
  return Object.keys(delta).length > 1 ? delta : undefined;
}

/** The changes of every group from slot `before` to slot `after`, sorted by group id. */
export function slotDelta(before: OffsetSlot, after: OffsetSlot): GroupDelta[] {
  const deltas: GroupDelta[] = [];
  let added = 0;
  // A draft copies the map and replaces changed groups in place, so both maps usually hold the same groups
  // in the same order: `before`'s group at the same position is checked first (a group object only ever
  // sits under one id, so the same object there is this id's unchanged group), and only a group that is
  // not the same is looked up (with 10k groups in a slot, a third of the cost of looking every one up).
  const beforeGroups = before.groups.values();
  after.groups.forEach((g, groupId) => {
    if (beforeGroups.next().value === g) return;
    const previous = before.groups.get(groupId);
    if (previous === undefined) added++;
    const delta = groupDelta(groupId, previous, g);
    if (delta !== undefined) deltas.push(delta);
  });
  // Groups that went: only looked for when the counts say there are some.
  if (before.groups.size > after.groups.size - added) {
    for (const groupId of before.groups.keys()) if (!after.groups.has(groupId)) deltas.push({ groupId, deleted: true });
  }
  return deltas.sort((a, b) => compare(a.groupId, b.groupId));
}

// ---- replay ------------------------------------------------------------------------------------------

/** Thrown by replay when a record does not continue the state; the store names the file and record. */
export class ReplayError extends Error {}

function emptyGroup(): GroupOffsets {
  return { record: null, committed: new Map(), staged: new Map() };
}

function put<T>(map: Map<string, Map<number, T>>, topic: string, partition: number, value: T): void {
  let partitions = map.get(topic);
  if (partitions === undefined) map.set(topic, (partitions = new Map()));
  partitions.set(partition, value);
}

/** Removes one entry; false when it was not there. */
function remove<T>(map: Map<string, Map<number, T>>, topic: string, partition: number): boolean {
  const partitions = map.get(topic);
  if (partitions?.delete(partition) !== true) return false;
  if (partitions.size === 0) map.delete(topic);
  return true;
}

const where = (groupId: string, topic: string, partition: number) => `group ${JSON.stringify(groupId)} ${topic}-${partition}`;

/** Applies one group's delta to the groups being loaded (ReplayError when it does not fit them). */
export function applyGroupDelta(groups: ReplayGroups, delta: GroupDelta): void {
  const { groupId } = delta;
  if (delta.deleted === true) {
    if (!groups.delete(groupId)) throw new ReplayError(`deletes group ${JSON.stringify(groupId)}, which does not exist`);
    return;
  }
  let g = groups.get(groupId);
  if (g === undefined) groups.set(groupId, (g = emptyGroup()));
  if (delta.record !== undefined) g.record = delta.record;
  for (const { producerId, committed } of delta.endTxn ?? []) {
    const staged = g.staged.get(producerId);
    if (staged === undefined) throw new ReplayError(`ends a transaction of producer ${producerId} in group ${JSON.stringify(groupId)}, which staged nothing`);
    for (const { topic, partitions } of committed) {
      for (const partition of partitions) {
        const s = staged.get(topic)?.get(partition);
        if (s === undefined) throw new ReplayError(`commits an offset of producer ${producerId} for ${where(groupId, topic, partition)}, which it did not stage`);
        put(g.committed, topic, partition, { ...s, expireTimestampMs: null });
      }
    }
    g.staged.delete(producerId);
  }
  for (const { topic, partitions } of delta.commit ?? []) {
    for (const { partition, ...o } of partitions) put(g.committed, topic, partition, o);
  }
  for (const { topic, partitions } of delta.uncommit ?? []) {
    for (const partition of partitions) {
      if (!remove(g.committed, topic, partition)) throw new ReplayError(`removes the committed offset of ${where(groupId, topic, partition)}, which does not exist`);
    }
  }
  for (const { producerId, topics } of delta.stage ?? []) {
    let offsets = g.staged.get(producerId);
    if (offsets === undefined) g.staged.set(producerId, (offsets = new Map()));
    for (const { topic, partitions } of topics) for (const { partition, ...o } of partitions) put(offsets, topic, partition, o);
  }
  for (const { producerId, topics } of delta.unstage ?? []) {
    const offsets = g.staged.get(producerId);
    for (const { topic, partitions } of topics) {
      for (const partition of partitions) {
        if (offsets === undefined || !remove(offsets, topic, partition)) {
          throw new ReplayError(`removes an offset of producer ${producerId} staged for ${where(groupId, topic, partition)}, which does not exist`);
        }
      }
    }
    if (offsets!.size === 0) g.staged.delete(producerId);
  }
  // The draft drops a group with nothing left, and then the delta says `deleted`; a group left empty here
  // is dropped the same way.
  if (g.record === null && g.committed.size === 0 && g.staged.size === 0) groups.delete(groupId);
}

// ---- whole slots ---------------------------------------------------------------------------------------

export function bodyFromSlot(index: number, lastSeq: number, slot: OffsetSlot): SlotBody {
  const body: SlotBody = { slot: index, lastSeq, nextSeq: slot.nextSeq, groups: [], offsets: [], staged: [] };
  for (const groupId of [...slot.groups.keys()].sort(compare)) {
    const g = slot.groups.get(groupId)!;
    if (g.record !== null) body.groups.push(g.record);
    for (const topic of [...g.committed.keys()].sort(compare)) {
      const partitions = g.committed.get(topic)!;
      for (const partition of [...partitions.keys()].sort(byNumber)) {
        body.offsets.push({ groupId, topic, ...committedPut(partition, partitions.get(partition)!) });
      }
    }
    for (const producerId of [...g.staged.keys()].sort(byNumber)) {
      const offsets = g.staged.get(producerId)!;
      for (const topic of [...offsets.keys()].sort(compare)) {
        const partitions = offsets.get(topic)!;
        for (const partition of [...partitions.keys()].sort(byNumber)) {
          body.staged.push({ groupId, producerId, topic, ...stagedPut(partition, partitions.get(partition)!) });
        }
      }
    }
  }
  return body;
}

/** The groups of a whole-slot body, as fresh maps that a replay may change. */
export function groupsFromBody(body: SlotBody): ReplayGroups {
  const groups: ReplayGroups = new Map();
  const group = (groupId: string) => {
    let g = groups.get(groupId);
    if (g === undefined) groups.set(groupId, (g = emptyGroup()));
    return g;
  };
  for (const r of body.groups) group(r.groupId).record = r;
  for (const { groupId, topic, partition, ...offset } of body.offsets) put(group(groupId).committed, topic, partition, offset);
  for (const { groupId, producerId, topic, partition, ...offset } of body.staged) {
    const g = group(groupId);
    let offsets = g.staged.get(producerId);
    if (offsets === undefined) g.staged.set(producerId, (offsets = new Map()));
    put(offsets, topic, partition, offset);
  }
  return groups;
}

// ---- parsing (every field checked; a throw marks the file corrupt, with the message as the reason) ------

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

function arr(o: Record<string, unknown>, key: string, what: string): unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) fail(`${what}.${key} is not an array`);
  return v;
}

/** An optional array field: undefined when absent; present, it must be a non-empty array (the writer omits empty ones). */
function optionalArr(o: Record<string, unknown>, key: string, what: string): unknown[] | undefined {
  if (!(key in o)) return undefined;
  const v = arr(o, key, what);
  if (v.length === 0) fail(`${what}.${key} is empty`);
  return v;
}

function parseRecord(value: unknown, what: string): PersistedGroup {
  const g = obj(value, what);
  const state = str(g, "state", what);
  if (!isGroupStateName(state)) fail(`${what}.state ${JSON.stringify(state)} is not a group state`);
  return {
    groupId: str(g, "groupId", what),
    protocolType: nullableStr(g, "protocolType", what),
    protocolName: nullableStr(g, "protocolName", what),
    generationId: int(g, "generationId", what, 0),
    leaderId: nullableStr(g, "leaderId", what),
    state,
    stateTimestampMs: nullableInt(g, "stateTimestampMs", what),
  };
}

function parseSeq(o: Record<string, unknown>, what: string, nextSeq: number): number {
  const seq = int(o, "seq", what, 0);
  if (seq >= nextSeq) fail(`${what}.seq ${seq} is not below nextSeq ${nextSeq}`);
  return seq;
}

function parseCommitted(o: Record<string, unknown>, what: string, nextSeq: number): CommittedOffset {
  return {
    offset: int(o, "offset", what),
    leaderEpoch: int(o, "leaderEpoch", what),
    metadata: str(o, "metadata", what),
    commitTimestampMs: int(o, "commitTimestampMs", what),
    expireTimestampMs: nullableInt(o, "expireTimestampMs", what),
    seq: parseSeq(o, what, nextSeq),
  };
}

function parseStaged(o: Record<string, unknown>, what: string, nextSeq: number): StagedOffset {
  return {
    offset: int(o, "offset", what),
    leaderEpoch: int(o, "leaderEpoch", what),
    metadata: str(o, "metadata", what),
    commitTimestampMs: int(o, "commitTimestampMs", what),
    seq: parseSeq(o, what, nextSeq),
  };
}

/** Checks every field of a checkpoint body of version 2 (a version 1 body gets lastSeq 0 first: `migrateSlotBody`). */
export function parseSlotBody(raw: unknown): SlotBody {
  const body = obj(raw, "body");
  const slot = int(body, "slot", "body", 0);
  const lastSeq = int(body, "lastSeq", "body", 0);
  const nextSeq = int(body, "nextSeq", "body", 0);
  const seen = new Set<string>();
  const groups = arr(body, "groups", "body").map((value, i) => {
    const what = `groups[${i}]`;
    const record = parseRecord(value, what);
    if (seen.has(record.groupId)) fail(`${what}: group ${JSON.stringify(record.groupId)} appears twice`);
    seen.add(record.groupId);
    return record;
  });
  const offsets = arr(body, "offsets", "body").map((value, i) => {
    const what = `offsets[${i}]`;
    const o = obj(value, what);
    return { groupId: str(o, "groupId", what), topic: str(o, "topic", what), partition: int(o, "partition", what, 0), ...parseCommitted(o, what, nextSeq) };
  });
  const staged = arr(body, "staged", "body").map((value, i) => {
    const what = `staged[${i}]`;
    const o = obj(value, what);
    return {
      groupId: str(o, "groupId", what),
      producerId: int(o, "producerId", what, 0),
      topic: str(o, "topic", what),
      partition: int(o, "partition", what, 0),
      ...parseStaged(o, what, nextSeq),
    };
  });
  return { slot, lastSeq, nextSeq, groups, offsets, staged };
}

/** A checkpoint of version 1 had no lastSeq: its journal's records were numbered from 1 after it. */
export function migrateSlotBody(raw: unknown): unknown {
  const body = obj(raw, "body");
  if ("lastSeq" in body) fail("body.lastSeq is not a field of version 1");
  return { ...body, lastSeq: 0 };
}

function parseTopicPartitions(value: unknown, what: string): TopicPartitions {
  const o = obj(value, what);
  const topic = str(o, "topic", what);
  const partitions = arr(o, "partitions", what).map((p, i) => {
    if (typeof p !== "number" || !Number.isSafeInteger(p) || p < 0) fail(`${what}.partitions[${i}] is not a partition number`);
    return p;
  });
  if (partitions.length === 0) fail(`${what}.partitions is empty`);
  return { topic, partitions };
}

function parseTopicOffsets<T>(value: unknown, what: string, parseEntry: (o: Record<string, unknown>, what: string) => T): TopicOffsets<T> {
  const o = obj(value, what);
  const topic = str(o, "topic", what);
  const partitions = arr(o, "partitions", what).map((p, i) => {
    const w = `${what}.partitions[${i}]`;
    const entry = obj(p, w);
    return { partition: int(entry, "partition", w, 0), ...parseEntry(entry, w) };
  });
  if (partitions.length === 0) fail(`${what}.partitions is empty`);
  return { topic, partitions };
}

const DELTA_KEYS = new Set(["groupId", "deleted", "record", "endTxn", "commit", "uncommit", "stage", "unstage"]);

function parseGroupDelta(value: unknown, what: string, nextSeq: number): GroupDelta {
  const o = obj(value, what);
  for (const key of Object.keys(o)) if (!DELTA_KEYS.has(key)) fail(`${what}.${key} is not a field of a group delta`);
  const groupId = str(o, "groupId", what);
  if ("deleted" in o) {
    if (o.deleted !== true) fail(`${what}.deleted is not true`);
    if (Object.keys(o).length !== 2) fail(`${what} deletes the group and changes it too`);
    return { groupId, deleted: true };
  }
  const delta: GroupDelta = { groupId };
  if ("record" in o) {
    delta.record = o.record === null ? null : parseRecord(o.record, `${what}.record`);
    if (delta.record !== null && delta.record.groupId !== groupId) fail(`${what}.record is the record of group ${JSON.stringify(delta.record.groupId)}`);
  }
  const producerId = (p: Record<string, unknown>, w: string) => int(p, "producerId", w, 0);
  const endTxn = optionalArr(o, "endTxn", what);
  if (endTxn !== undefined) {
    delta.endTxn = endTxn.map((v, i) => {
      const w = `${what}.endTxn[${i}]`;
      const e = obj(v, w);
      return { producerId: producerId(e, w), committed: arr(e, "committed", w).map((t, j) => parseTopicPartitions(t, `${w}.committed[${j}]`)) };
    });
  }
  const commit = optionalArr(o, "commit", what);
  if (commit !== undefined) delta.commit = commit.map((t, i) => parseTopicOffsets(t, `${what}.commit[${i}]`, (e, w) => parseCommitted(e, w, nextSeq)));
  const uncommit = optionalArr(o, "uncommit", what);
  if (uncommit !== undefined) delta.uncommit = uncommit.map((t, i) => parseTopicPartitions(t, `${what}.uncommit[${i}]`));
  const stage = optionalArr(o, "stage", what);
  if (stage !== undefined) {
    delta.stage = stage.map((v, i) => {
      const w = `${what}.stage[${i}]`;
      const s = obj(v, w);
      return { producerId: producerId(s, w), topics: arr(s, "topics", w).map((t, j) => parseTopicOffsets(t, `${w}.topics[${j}]`, (e, ww) => parseStaged(e, ww, nextSeq))) };
    });
  }
  const unstage = optionalArr(o, "unstage", what);
  if (unstage !== undefined) {
    delta.unstage = unstage.map((v, i) => {
      const w = `${what}.unstage[${i}]`;
      const s = obj(v, w);
      return { producerId: producerId(s, w), topics: arr(s, "topics", w).map((t, j) => parseTopicPartitions(t, `${w}.topics[${j}]`)) };
    });
  }
  if (Object.keys(delta).length === 1) fail(`${what} changes nothing`);
  return delta;
}

/** Checks every field of a journal record of version 2. */
export function parseDeltaRecord(raw: unknown): DeltaRecord {
  const body = obj(raw, "body");
  const nextSeq = int(body, "nextSeq", "body", 0);
  const seen = new Set<string>();
  const groups = arr(body, "groups", "body").map((value, i) => {
    const delta = parseGroupDelta(value, `groups[${i}]`, nextSeq);
    if (seen.has(delta.groupId)) fail(`groups[${i}]: group ${JSON.stringify(delta.groupId)} appears twice`);
    seen.add(delta.groupId);
    return delta;
  });
  return { seq: int(body, "seq", "body", 1), slot: int(body, "slot", "body", 0), nextSeq, groups };
}

/** A version 1 record as `decodeState`'s migrate step hands it on (a class, so that no JSON body is taken for one). */
class WholeStateRecord {
  constructor(readonly body: unknown) {}
}

/** decodeState's migrate step for the journal: marks a version 1 body. */
export function markPreviousJournalVersion(body: unknown): unknown {
  return new WholeStateRecord(body);
}

/** decodeState's parse step for the journal: a record of either version. */
export function parseJournalRecord(raw: unknown): JournalRecord {
  if (raw instanceof WholeStateRecord) {
    const body = obj(raw.body, "body");
    const state = parseSlotBody(migrateSlotBody(body.slot));
    return { kind: "state", seq: int(body, "seq", "body", 1), slot: state.slot, state };
  }
  return { kind: "delta", ...parseDeltaRecord(raw) };
}
