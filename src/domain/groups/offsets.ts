/**
 * Committed and staged (transactional) group offsets of one coordinator slot, as a pure value with
 * copy-on-write drafts: `slot.draft()` gives a draft that the serial writer of the slot changes, and
 * `draft.finish()` the next slot value, which becomes visible only once it is durable. Readers therefore
 * never see an offset that a crash could take back.
 *
 * Per group: its durable record (see PersistedGroup), committed offsets by topic and partition, and offsets
 * staged by transactional producers (TxnOffsetCommit), keyed by producer id, invisible until the
 * transaction commits (`completeTransaction(commit)`) and dropped if it aborts.
 *
 * Ordering of transactional and plain commits: every write gets a slot-wide sequence number. When a
 * transaction commits, a staged offset replaces the committed one only if it was staged after that commit
 * was made, so the most recent of the two wins, as in Apache's OffsetMetadataManager (which compares the
 * offsets of the records in __consumer_offsets).
 *
 * Expiry follows Apache's OffsetExpirationCondition (see `expireGroupOffsets`).
 */
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import type { OffsetExpiryView, PersistedGroup } from "./group-coordinator-state.ts";

export interface CommittedOffset {
  readonly offset: number;
  /** -1 when the client sent none. */
  readonly leaderEpoch: number;
  readonly metadata: string;
  readonly commitTimestampMs: number;
  /** An explicit expiry (OffsetCommit v2-v4 retention time); null: offsets.retention.minutes applies. */
  readonly expireTimestampMs: number | null;
  readonly seq: number;
}

export interface StagedOffset {
  readonly offset: number;
  readonly leaderEpoch: number;
  readonly metadata: string;
  readonly commitTimestampMs: number;
  readonly seq: number;
}

export interface OffsetCommitEntry {
  topic: string;
  partition: number;
  offset: number;
  leaderEpoch: number;
  metadata: string;
  commitTimestampMs: number;
  expireTimestampMs: number | null;
}

export interface TopicPartitionRef {
  topic: string;
  partition: number;
}

type ByPartition<T> = Map<string, Map<number, T>>;

export interface GroupOffsets {
  record: PersistedGroup | null;
  committed: ByPartition<CommittedOffset>;
  /** producer id -> offsets staged by its open transaction. */
  staged: Map<number, ByPartition<StagedOffset>>;
}

/**
 * A bound on a slot's size, estimated generously from the strings it holds: the slot file is rewritten
 * whole, and must stay well below the state-file limit of the storage layer. Commits that would pass it are
 * refused with INVALID_COMMIT_OFFSET_SIZE (Apache's answer when an offset commit is too large to store).
 */
export const OFFSET_SLOT_BYTES_MAX = 32 * 1024 * 1024;

function entryBytes(groupId: string, topic: string, metadata: string): number {
  // Worst-case UTF-8 for every string (3 bytes per UTF-16 unit) plus the numbers and field names.
  return 3 * (groupId.length + topic.length + metadata.length) + 192;
}

function recordBytes(record: PersistedGroup): number {
  return 3 * (record.groupId.length + (record.protocolType?.length ?? 0) + (record.protocolName?.length ?? 0) + (record.leaderId?.length ?? 0)) + 256;
}

function getIn<T>(map: ByPartition<T> | undefined, topic: string, partition: number): T | undefined {
  return map?.get(topic)?.get(partition);
}

function cloneByPartition<T>(map: ByPartition<T>): ByPartition<T> {
  const out: ByPartition<T> = new Map();
  for (const [topic, partitions] of map) out.set(topic, new Map(partitions));
  return out;
}

function cloneGroup(g: GroupOffsets): GroupOffsets {
  const staged = new Map<number, ByPartition<StagedOffset>>();
  for (const [pid, offsets] of g.staged) staged.set(pid, cloneByPartition(offsets));
  return { record: g.record, committed: cloneByPartition(g.committed), staged };
}

function hasStaged(g: GroupOffsets, topic: string, partition: number): boolean {
  for (const offsets of g.staged.values()) if (getIn(offsets, topic, partition) !== undefined) return true;
  return false;
}

function isEmptyGroup(g: GroupOffsets): boolean {
  return g.record === null && g.committed.size === 0 && g.staged.size === 0;
}

/** An immutable (by convention) snapshot of one slot's offsets and group records. */
export class OffsetSlot {
  constructor(
    readonly groups: ReadonlyMap<string, GroupOffsets>,
    readonly nextSeq: number,
    readonly approxBytes: number,
  ) {}

  static empty(): OffsetSlot {
    return new OffsetSlot(new Map(), 0, 0);
  }

  /** Builds a slot from loaded parts, computing the size estimate. */
  static fromGroups(groups: Map<string, GroupOffsets>, nextSeq: number): OffsetSlot {
    let bytes = 0;
    for (const [groupId, g] of groups) {
      if (g.record !== null) bytes += recordBytes(g.record);
      for (const [topic, partitions] of g.committed) for (const o of partitions.values()) bytes += entryBytes(groupId, topic, o.metadata);
      for (const offsets of g.staged.values()) {
        for (const [topic, partitions] of offsets) for (const o of partitions.values()) bytes += entryBytes(groupId, topic, o.metadata);
      }
    }
    return new OffsetSlot(groups, nextSeq, bytes);
  }

  committed(groupId: string, topic: string, partition: number): CommittedOffset | undefined {
    return getIn(this.groups.get(groupId)?.committed, topic, partition);
  }

  /** Every committed offset of a group, by topic then partition (insertion order). */
  committedOfGroup(groupId: string): ReadonlyMap<string, ReadonlyMap<number, CommittedOffset>> {
    return this.groups.get(groupId)?.committed ?? new Map();
  }

  stagedOf(groupId: string, producerId: number): ReadonlyMap<string, ReadonlyMap<number, StagedOffset>> {
    return this.groups.get(groupId)?.staged.get(producerId) ?? new Map();
  }

  /** Whether some open transaction has staged an offset for this partition (OffsetFetch require_stable). */
  hasPendingTransactionalOffset(groupId: string, topic: string, partition: number): boolean {
    const g = this.groups.get(groupId);
    return g !== undefined && hasStaged(g, topic, partition);
  }

  hasOpenTransactions(groupId: string): boolean {
    return (this.groups.get(groupId)?.staged.size ?? 0) > 0;
  }

  draft(bytesMax = OFFSET_SLOT_BYTES_MAX): OffsetSlotDraft {
    return new OffsetSlotDraft(this, bytesMax);
  }
}

export class OffsetSlotDraft {
  private readonly groups: Map<string, GroupOffsets>;
  private readonly touched = new Set<string>();
  private nextSeq: number;
  private approxBytes: number;
  private dirty = false;

  constructor(base: OffsetSlot, private readonly bytesMax: number) {
    this.groups = new Map(base.groups);
    this.nextSeq = base.nextSeq;
    this.approxBytes = base.approxBytes;
  }

  /** Whether anything was changed (a slot that did not change need not be written). */
  get changed(): boolean {
    return this.dirty;
  }

  /** The slot as this draft has it now (its groups are shared with later changes of the draft: finish first). */
  view(): OffsetSlot {
    return new OffsetSlot(this.groups, this.nextSeq, this.approxBytes);
  }

  groupIds(): string[] {
    return [...this.groups.keys()];
  }

  private group(groupId: string): GroupOffsets | undefined {
    return this.groups.get(groupId);
  }

  /** The group's data, copied on its first change in this draft so that the base slot stays untouched. */
  private mutable(groupId: string): GroupOffsets {
    this.dirty = true;
    let g = this.groups.get(groupId);
    if (g === undefined) {
      g = { record: null, committed: new Map(), staged: new Map() };
      this.groups.set(groupId, g);
      this.touched.add(groupId);
      return g;
    }
    if (!this.touched.has(groupId)) {
      g = cloneGroup(g);
      this.groups.set(groupId, g);
      this.touched.add(groupId);
    }
    return g;
  }

  private dropIfEmpty(groupId: string): void {
    const g = this.groups.get(groupId);
    if (g !== undefined && isEmptyGroup(g)) this.groups.delete(groupId);
  }

  setRecord(groupId: string, record: PersistedGroup | null): void {
    const existing = this.group(groupId);
    if (existing === undefined && record === null) return;
    const g = this.mutable(groupId);
    if (g.record !== null) this.approxBytes -= recordBytes(g.record);
    g.record = record;
    if (record !== null) this.approxBytes += recordBytes(record);
    this.dropIfEmpty(groupId);
  }

  /**
   * Commits offsets; returns an error code per entry: NONE, or INVALID_COMMIT_OFFSET_SIZE when the slot has
   * no room left for it.
   */
  commit(groupId: string, entries: readonly OffsetCommitEntry[]): number[] {
    const g = this.mutable(groupId);
    const results = entries.map((e) => {
      const previous = getIn(g.committed, e.topic, e.partition);
      const delta = entryBytes(groupId, e.topic, e.metadata) - (previous === undefined ? 0 : entryBytes(groupId, e.topic, previous.metadata));
      if (delta > 0 && this.approxBytes + delta > this.bytesMax) return ErrorCode.INVALID_COMMIT_OFFSET_SIZE;
      this.approxBytes += delta;
      let partitions = g.committed.get(e.topic);
      if (partitions === undefined) g.committed.set(e.topic, (partitions = new Map()));
      partitions.set(e.partition, {
        offset: e.offset,
        leaderEpoch: e.leaderEpoch,
        metadata: e.metadata,
        commitTimestampMs: e.commitTimestampMs,
        expireTimestampMs: e.expireTimestampMs,
        seq: this.nextSeq++,
      });
      return ErrorCode.NONE;
    });
    this.dropIfEmpty(groupId);
    return results;
  }

  /** Stages offsets of `producerId`'s open transaction (a later stage of the same partition replaces it). */
  stage(groupId: string, producerId: number, entries: readonly Omit<OffsetCommitEntry, "expireTimestampMs">[]): number[] {
    const g = this.mutable(groupId);
    let offsets = g.staged.get(producerId);
    if (offsets === undefined) g.staged.set(producerId, (offsets = new Map()));
    const results = entries.map((e) => {
      const previous = getIn(offsets, e.topic, e.partition);
      const delta = entryBytes(groupId, e.topic, e.metadata) - (previous === undefined ? 0 : entryBytes(groupId, e.topic, previous.metadata));
      if (delta > 0 && this.approxBytes + delta > this.bytesMax) return ErrorCode.INVALID_COMMIT_OFFSET_SIZE;
      this.approxBytes += delta;
      let partitions = offsets.get(e.topic);
      if (partitions === undefined) offsets.set(e.topic, (partitions = new Map()));
      partitions.set(e.partition, {
        offset: e.offset,
        leaderEpoch: e.leaderEpoch,
        metadata: e.metadata,
        commitTimestampMs: e.commitTimestampMs,
        seq: this.nextSeq++,
      });
      return ErrorCode.NONE;
    });
    if (offsets.size === 0) g.staged.delete(producerId);
    this.dropIfEmpty(groupId);
    return results;
  }

  /**
   * Ends `producerId`'s transaction for this group: on commit its staged offsets become committed (each only
   * if staged after the partition's current commit); on abort they are dropped. Returns how many staged
   * offsets there were. Idempotent: a second call finds nothing.
   */
  completeTransaction(groupId: string, producerId: number, commit: boolean): number {
    const existing = this.group(groupId);
    if (existing === undefined || !existing.staged.has(producerId)) return 0;
    const g = this.mutable(groupId);
    const offsets = g.staged.get(producerId)!;
    g.staged.delete(producerId);
    let count = 0;
    for (const [topic, partitions] of offsets) {
      for (const [partition, staged] of partitions) {
        count++;
        this.approxBytes -= entryBytes(groupId, topic, staged.metadata);
        if (!commit) continue;
        const current = getIn(g.committed, topic, partition);
        if (current !== undefined && current.seq > staged.seq) continue;
        if (current !== undefined) this.approxBytes -= entryBytes(groupId, topic, current.metadata);
        this.approxBytes += entryBytes(groupId, topic, staged.metadata);
        let byPartition = g.committed.get(topic);
        if (byPartition === undefined) g.committed.set(topic, (byPartition = new Map()));
        byPartition.set(partition, { ...staged, expireTimestampMs: null });
      }
    }
    this.dropIfEmpty(groupId);
    return count;
  }

  /**
   * Deletes the committed offsets of these partitions and whatever open transactions staged for them (an
   * Apache tombstone removes both). Returns how many committed offsets went.
   */
  deleteOffsets(groupId: string, partitions: readonly TopicPartitionRef[]): number {
    if (this.group(groupId) === undefined) return 0;
    const g = this.mutable(groupId);
    let deleted = 0;
    for (const { topic, partition } of partitions) {
      const committed = g.committed.get(topic);
      const current = committed?.get(partition);
      if (current !== undefined) {
        committed!.delete(partition);
        if (committed!.size === 0) g.committed.delete(topic);
        this.approxBytes -= entryBytes(groupId, topic, current.metadata);
        deleted++;
      }
      for (const [pid, offsets] of g.staged) {
        const staged = offsets.get(topic);
        const entry = staged?.get(partition);
        if (entry === undefined) continue;
        staged!.delete(partition);
        if (staged!.size === 0) offsets.delete(topic);
        if (offsets.size === 0) g.staged.delete(pid);
        this.approxBytes -= entryBytes(groupId, topic, entry.metadata);
      }
    }
    this.dropIfEmpty(groupId);
    return deleted;
  }

  /** Deletes a group: its record, committed offsets and staged offsets. Returns how many committed offsets went. */
  deleteGroup(groupId: string): number {
    const g = this.group(groupId);
    if (g === undefined) return 0;
    let deleted = 0;
    if (g.record !== null) this.approxBytes -= recordBytes(g.record);
    for (const [topic, partitions] of g.committed) {
      for (const o of partitions.values()) {
        this.approxBytes -= entryBytes(groupId, topic, o.metadata);
        deleted++;
      }
    }
    for (const offsets of g.staged.values()) {
      for (const [topic, partitions] of offsets) for (const o of partitions.values()) this.approxBytes -= entryBytes(groupId, topic, o.metadata);
    }
    this.groups.delete(groupId);
    this.touched.delete(groupId);
    this.dirty = true;
    return deleted;
  }

  /**
   * Expires a group's committed offsets, as Apache's cleanupExpiredOffsets: which offsets may expire and
   * from when depends on the group (see `expiryBase`); offsets of subscribed topics and offsets with a
   * pending transactional offset never expire. At most `limit` offsets go per call (bounded work).
   * Returns how many expired and whether the group has nothing left that keeps it (no offsets, no open
   * transactions), in which case an Empty group may be deleted.
   */
  expireGroupOffsets(groupId: string, view: OffsetExpiryView | undefined, nowMs: number, retentionMs: number, limit: number): { expired: number; allExpired: boolean } {
    const existing = this.group(groupId);
    if (existing === undefined || existing.committed.size === 0) {
      return { expired: 0, allExpired: existing === undefined || existing.staged.size === 0 };
    }
    const base = expiryBase(view);
    if (base === null) return { expired: 0, allExpired: false };
    const doomed: TopicPartitionRef[] = [];
    let allExpired = true;
    for (const [topic, partitions] of existing.committed) {
      if (view !== undefined && view.isSubscribedToTopic(topic)) {
        allExpired = false;
        continue;
      }
      for (const [partition, o] of partitions) {
        const expired =
          o.expireTimestampMs !== null ? nowMs >= o.expireTimestampMs : nowMs - base(o) >= retentionMs;
        if (expired && doomed.length < limit && !hasStaged(existing, topic, partition)) {
          doomed.push({ topic, partition });
        } else {
          allExpired = false;
        }
      }
    }
    if (doomed.length > 0) this.deleteOffsets(groupId, doomed);
    return { expired: doomed.length, allExpired: allExpired && (this.group(groupId)?.staged.size ?? 0) === 0 };
  }

  finish(): OffsetSlot {
    this.touched.clear();
    return new OffsetSlot(this.groups, this.nextSeq, this.approxBytes);
  }
}

/**
 * From when an offset's retention counts, or null when the group's offsets do not expire now (Apache's
 * ClassicGroup.offsetExpirationCondition):
 * - an Empty group with a protocol type: from when it became Empty (else from the commit);
 * - a Stable consumer group that knows its members' subscriptions: from the commit (only offsets of topics
 *   nobody subscribes to are considered);
 * - a group without protocol type (offsets committed outside group management): from the commit;
 * - otherwise (a rebalance in progress, another protocol type): not at all.
 */
export function expiryBase(view: OffsetExpiryView | undefined): ((o: CommittedOffset) => number) | null {
  if (view === undefined || view.protocolType === null) return (o) => o.commitTimestampMs;
  if (view.state === "Empty") {
    const since = view.currentStateTimestampMs;
    return (o) => since ?? o.commitTimestampMs;
  }
  if (view.usesConsumerGroupProtocol && view.knowsSubscriptions && view.state === "Stable") return (o) => o.commitTimestampMs;
  return null;
}
