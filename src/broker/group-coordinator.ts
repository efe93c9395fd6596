/**
 * The group coordinator of this broker: drives the pure group state machine (domain/groups), keeps its
 * timers, answers parked JoinGroup/SyncGroup requests, and makes offsets and group records durable through
 * the offset store (one serial writer per slot, group commit). Handlers call it; it knows nothing of wire
 * versions.
 *
 * - Ownership: a group belongs to the owner of its slot (cluster/ownership.ts, slot = fnv1a32 % 50); for a
 *   group of another broker every API answers NOT_COORDINATOR. Single-broker mode owns every slot and
 *   loads them all at open. In cluster mode (`loadAllSlotsAtStart: false`) no slot is loaded at open:
 *   `acquireSlot` reads one from disk and serves its groups, `releaseSlot` stops serving them (parked
 *   JoinGroup/SyncGroup answered NOT_COORDINATOR, as Apache does when it unloads a coordinator partition),
 *   lets the slot's queued writes land and forgets them (docs/architecture.md, "Ownership and cluster mode").
 * - Durability: OffsetCommit, OffsetDelete and DeleteGroups are answered once their change is durable. Group
 *   records (generation, protocol type, Empty or not) are written in the background as they change; members
 *   are not persisted, they rejoin after a restart and find their offsets.
 * - Transactional offsets: staged by TxnOffsetCommit, completed by the transaction coordinator's EndTxn. In
 *   cluster mode (`offsetQueue`) a completion for a slot served elsewhere is queued durably for the slot's
 *   owner, and the completions queued for a served slot are applied once each (at take-over before the
 *   slot is served, on a wake-up, every 2 s, before staging, before require_stable reads), see
 *   `drainCompletions` and docs/architecture.md, "Slot take-over (group coordinator)".
 * - Reads (OffsetFetch) see durable offsets only; with require_stable they first wait for the writes queued
 *   before them (as Apache serves require_stable through its write path).
 * - Expiry: every offsets.retention.check.interval.ms (10 min, Apache's default) a sweep expires offsets per
 *   Apache's rules and deletes Empty groups left with nothing, slot by slot, at most `sweepBatchMax`
 *   offsets per slot write (bounded work per step).
 * - Timers run on the monotonic clock; state timestamps and commit times use the wall clock.
 */
import { randomUUID } from "node:crypto";
import { slotOf, type Ownership } from "../cluster/ownership.ts";
import {
  DEFAULT_GROUP_COORDINATOR_CONFIG,
  GroupCoordinatorState,
  type DescribedGroup,
  type GroupCoordinatorConfig,
  type GroupEffect,
  type JoinGroupInput,
  type JoinGroupOutcome,
  type LeaveGroupOutcome,
  type ListedGroup,
  type MemberIdentity,
  type PersistedGroup,
  type SyncGroupInput,
  type SyncGroupOutcome,
} from "../domain/groups/group-coordinator-state.ts";
import type { OffsetCommitEntry, OffsetSlot, TopicPartitionRef } from "../domain/groups/offsets.ts";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import { OffsetStore } from "../storage/offset-store.ts";
import type { OffsetCompletionQueue, QueuedCompletion } from "../storage/offset-queue.ts";
import type { Waker } from "../cluster/waker.ts";
import { KeyedTimers } from "./group-timers.ts";
import type { TxnOffsetCompletion } from "./txn-coordinator.ts";

/** offset.metadata.max.bytes (Apache's default). */
export const OFFSET_METADATA_MAX_BYTES = 4096;
/** offsets.retention.check.interval.ms (Apache's default). */
export const OFFSETS_RETENTION_CHECK_INTERVAL_MS = 600_000;
/** Offsets expired per slot write by the sweep. */
export const SWEEP_BATCH_MAX = 10_000;
/** How often the queued offset completions of the served slots are looked for when no wake-up came. */
export const OFFSET_QUEUE_POLL_INTERVAL_MS = 2_000;

export interface GroupCoordinatorOptions extends Partial<GroupCoordinatorConfig> {
  offsetsRetentionMs?: number;
  offsetsRetentionCheckIntervalMs?: number;
  offsetMetadataMaxBytes?: number;
  sweepBatchMax?: number;
  /** Start the periodic expiry sweep (tests call sweepExpiredOffsets themselves). */
  sweep?: boolean;
  /**
   * Default true: every offsets slot is loaded and served from open. False (cluster mode): none is, until
   * `acquireSlot` takes it over.
   */
  loadAllSlotsAtStart?: boolean;
  /** Poll the offset completion queue of the served slots (default true when `offsetQueue` is given). */
  offsetQueuePoll?: boolean;
  offsetQueuePollIntervalMs?: number;
  newUuid?: () => string;
}

export interface GroupCoordinatorDeps {
  fs: Fs;
  clock: Clock;
  log: Logger;
  dataDir: string;
  ownership: Ownership;
  options?: GroupCoordinatorOptions;
  /**
   * Cluster mode: completions of transactional offsets whose group slot another broker serves are queued
   * here for the slot's owner, and this coordinator applies those queued for the slots it serves
   * (docs/architecture.md, "Slot take-over (group coordinator)"). Absent: such a completion is refused
   * (retriably) and the transaction coordinator retries it until this broker serves the slot.
   */
  offsetQueue?: OffsetCompletionQueue;
  /** Wakes the owner of a group slot when a completion is queued for it, and wakes this one. */
  waker?: Waker;
}

export interface OffsetCommitPartitionInput {
  topic: string;
  partition: number;
  offset: number;
  leaderEpoch: number;
  metadata: string | null;
  /** OffsetCommit v1 only; -1 means "now". */
  commitTimestampMs: number;
}

export interface OffsetCommitInput {
  groupId: string;
  memberId: string;
  groupInstanceId: string | null;
  generationId: number;
  /** OffsetCommit v2-v4; -1 means offsets.retention.minutes. */
  retentionTimeMs: number;
  apiVersion: number;
  partitions: readonly OffsetCommitPartitionInput[];
}

export interface FetchedOffset {
  partition: number;
  offset: number;
  leaderEpoch: number;
  metadata: string;
  errorCode: number;
}

export interface OffsetFetchOutcome {
  errorCode: number;
  topics: { name: string; partitions: FetchedOffset[] }[];
}

export interface StagedOffsetInput {
  topic: string;
  partition: number;
  offset: number;
  leaderEpoch: number;
  metadata: string | null;
}

type Resolver<T> = (value: T) => void;

export class GroupCoordinator {
  private readonly timers: KeyedTimers;
  private readonly joinWaiters = new Map<number, Resolver<JoinGroupOutcome>>();
  private readonly syncWaiters = new Map<number, Resolver<SyncGroupOutcome>>();
  private nextWaiter = 1;
  /** Groups whose durable record must be rewritten, by slot; one queued store change per slot drains each set. */
  private readonly dirty = new Map<number, Set<string>>();
  private sweepTimer: ReturnType<typeof setInterval> | undefined;
  private sweeping: Promise<number> | undefined;
  private closed = false;
  /** Slots whose groups are in memory and served here, with the coordinator epoch they were taken at. */
  private readonly servedSlots = new Map<number, number>();
  /** Take-overs in progress, by slot (concurrent callers share one). */
  private readonly acquiring = new Map<number, Promise<void>>();
  /**
   * Served slots whose queued offset completions have not been applied since they were loaded: they
   * answer COORDINATOR_LOAD_IN_PROGRESS, as a slot still loading does (its staged offsets are not yet
   * what the transactions decided).
   */
  private readonly undrained = new Set<number>();
  /** The drain of each slot's completion queue in progress (one at a time per slot). */
  private readonly draining = new Map<number, Promise<number>>();
  /** Completion files being written, by path (the groups of one slot in one transaction share a file). */
  private readonly enqueuing = new Map<string, Promise<void>>();
  /** Damaged completion files already reported, so that the log is not flooded every poll. */
  private readonly reportedCorrupt = new Set<string>();
  private queueTimer: ReturnType<typeof setInterval> | undefined;
  private stopWakes: (() => void) | undefined;
  readonly retentionMs: number;
  private readonly loadsAllSlots: boolean;
  private readonly metadataMaxBytes: number;
  private readonly sweepBatchMax: number;

  private constructor(
    private readonly deps: GroupCoordinatorDeps,
    readonly state: GroupCoordinatorState,
    readonly store: OffsetStore,
    options: GroupCoordinatorOptions,
  ) {
    this.timers = new KeyedTimers(() => deps.clock.monotonicMs(), (key, error) => deps.log.error("group timer failed", { key, error: String(error) }));
    this.retentionMs = options.offsetsRetentionMs ?? 7 * 24 * 60 * 60 * 1000;
    this.loadsAllSlots = options.loadAllSlotsAtStart !== false;
    this.metadataMaxBytes = options.offsetMetadataMaxBytes ?? OFFSET_METADATA_MAX_BYTES;
    this.sweepBatchMax = options.sweepBatchMax ?? SWEEP_BATCH_MAX;
  }

  /**
   * Loads every offsets slot (CorruptStateError for a damaged one) and restores the groups it records; with
   * `loadAllSlotsAtStart: false`, none (`acquireSlot` takes each over).
   */
  static async open(deps: GroupCoordinatorDeps): Promise<GroupCoordinator> {
    const options = deps.options ?? {};
    const config: GroupCoordinatorConfig = {
      initialRebalanceDelayMs: options.initialRebalanceDelayMs ?? DEFAULT_GROUP_COORDINATOR_CONFIG.initialRebalanceDelayMs,
      newMemberJoinTimeoutMs: options.newMemberJoinTimeoutMs ?? DEFAULT_GROUP_COORDINATOR_CONFIG.newMemberJoinTimeoutMs,
      minSessionTimeoutMs: options.minSessionTimeoutMs ?? DEFAULT_GROUP_COORDINATOR_CONFIG.minSessionTimeoutMs,
      maxSessionTimeoutMs: options.maxSessionTimeoutMs ?? DEFAULT_GROUP_COORDINATOR_CONFIG.maxSessionTimeoutMs,
      maxSize: options.maxSize ?? DEFAULT_GROUP_COORDINATOR_CONFIG.maxSize,
    };
    const state = new GroupCoordinatorState(config, options.newUuid ?? randomUUID);
    let coordinator: GroupCoordinator | undefined;
    const loadAll = options.loadAllSlotsAtStart !== false;
    const store = await OffsetStore.open(deps.fs, deps.dataDir, {
      onWriteFailed: (slot, error) => coordinator?.reconcile(slot, error),
      explicitLoad: !loadAll,
    });
    coordinator = new GroupCoordinator(deps, state, store, options);
    if (loadAll) {
      let groups = 0;
      for (let slot = 0; slot < store.slotCount; slot++) groups += coordinator.restoreGroups(slot, 0);
      if (groups > 0) deps.log.info("loaded consumer groups", { groups });
    }
    if (options.sweep !== false) coordinator.startSweep(options.offsetsRetentionCheckIntervalMs ?? OFFSETS_RETENTION_CHECK_INTERVAL_MS);
    if (deps.offsetQueue !== undefined) {
      coordinator.stopWakes = deps.waker?.onWake((target) => {
        if (target.kind === "group-slot") coordinator!.wakeSlot(target.slot);
      });
      if (options.offsetQueuePoll !== false) coordinator.startQueuePoll(options.offsetQueuePollIntervalMs ?? OFFSET_QUEUE_POLL_INTERVAL_MS);
      // Every slot loaded at open has its queue applied before it is served.
      await Promise.all(
        [...coordinator.undrained].map((slot) =>
          coordinator!.drainCompletions(slot).catch((error: unknown) => {
            if (error instanceof FatalError) throw error;
            return 0; // logged; the slot stays unserved and the poll tries again
          }),
        ),
      );
    }
    return coordinator;
  }

  /** Loads the groups recorded in a loaded store slot into the state and serves the slot; returns how many. */
  private restoreGroups(slot: number, epoch: number): number {
    const nowMs = this.deps.clock.nowMs();
    const records: PersistedGroup[] = [];
    for (const [groupId, g] of this.store.slot(slot).groups) {
      // Offsets without a record (not written by this build, but harmless) belong to a simple group.
      records.push(g.record ?? simpleGroupRecord(groupId, nowMs));
    }
    this.state.load(records, nowMs);
    this.servedSlots.set(slot, epoch);
    if (this.deps.offsetQueue !== undefined) {
      // Completions queued for the slot while another broker (or nobody) served it are applied before
      // its groups are served (refusal answers COORDINATOR_LOAD_IN_PROGRESS until then).
      this.undrained.add(slot);
      if (!this.loadsAllSlots) this.drainInBackground(slot);
    }
    return records.length;
  }

  // ---- slot take-over (cluster mode) -----------------------------------------------------------

  /**
   * Takes slot `slot` over at coordinator epoch `epoch` (the ownership manager's acquire): reads its files
   * as the previous owner left them (CorruptStateError for damage: the slot stays unserved), restores its
   * groups (records, committed and staged offsets) and serves them; until this resolves, an owned slot
   * answers COORDINATOR_LOAD_IN_PROGRESS. A slot already served stays as it is.
   */
  acquireSlot(slot: number, epoch: number): Promise<void> {
    if (this.closed) return Promise.reject(new Error("the group coordinator is closed"));
    if (this.servedSlots.has(slot)) return Promise.resolve();
    let acquiring = this.acquiring.get(slot);
    if (acquiring === undefined) {
      acquiring = (async () => {
        await this.store.loadSlot(slot, epoch);
        if (this.closed) return;
        const groups = this.restoreGroups(slot, epoch);
        this.deps.log.info("took over a group coordinator slot", { slot, epoch, groups });
      })().finally(() => this.acquiring.delete(slot));
      this.acquiring.set(slot, acquiring);
    }
    return acquiring;
  }

  /**
   * Hands slot `slot` over (the ownership manager's release): its groups are no longer served (requests
   * answer by the slot's standing, parked JoinGroup/SyncGroup requests NOT_COORDINATOR at once, timers
   * stop), the slot's queued and in-flight writes land, then its groups leave memory and the store
   * releases the slot; later writes to it are refused. A later `acquireSlot` reads the files again.
   */
  async releaseSlot(slot: number): Promise<void> {
    if (this.loadsAllSlots) throw new Error("group slots move only when the coordinator is opened with loadAllSlotsAtStart: false");
    await this.acquiring.get(slot)?.catch(() => undefined);
    if (!this.servedSlots.delete(slot)) return;
    const ids = this.state.groupIds().filter((groupId) => slotOf(groupId) === slot);
    this.apply(this.state.resign(ids, ErrorCode.NOT_COORDINATOR));
    // The store lets the queued writes land first; they read the groups' records, so those stay until then.
    await this.store.releaseSlot(slot);
    this.state.forget(ids);
    this.dirty.delete(slot);
  }

  /** Whether the slot's groups are in memory and served here (single-broker mode: every slot). */
  servesSlot(slot: number): boolean {
    return this.servedSlots.has(slot);
  }

  // ---- ownership -------------------------------------------------------------------------------

  slotOf(groupId: string): number {
    return slotOf(groupId);
  }

  /** Whether this broker coordinates the group (its slot's standing here is owned). */
  isCoordinatorFor(groupId: string): boolean {
    return this.refusal(groupId) === undefined;
  }

  /**
   * Why a request about the group cannot be served here, by the slot's standing (cluster/ownership.ts):
   * COORDINATOR_LOAD_IN_PROGRESS while it is loading (or owned and not taken over yet), NOT_COORDINATOR
   * when leaving or elsewhere (or closed).
   */
  private refusal(groupId: string): number | undefined {
    if (this.closed) return ErrorCode.NOT_COORDINATOR;
    const slot = slotOf(groupId);
    const standing = this.deps.ownership.standing({ kind: "group", slot });
    if (standing.state === "owned") return this.servedSlots.has(slot) && !this.undrained.has(slot) ? undefined : ErrorCode.COORDINATOR_LOAD_IN_PROGRESS;
    return standing.state === "loading" ? ErrorCode.COORDINATOR_LOAD_IN_PROGRESS : ErrorCode.NOT_COORDINATOR;
  }

  // ---- membership ------------------------------------------------------------------------------

  joinGroup(input: JoinGroupInput): Promise<JoinGroupOutcome> {
    const refused = this.refusal(input.groupId);
    if (refused !== undefined) {
      return Promise.resolve(errorJoin(input.memberId, refused));
    }
    const waiter = this.nextWaiter++;
    const answered = new Promise<JoinGroupOutcome>((resolve) => this.joinWaiters.set(waiter, resolve));
    this.apply(this.state.joinGroup(input, waiter, this.deps.clock.nowMs()));
    return answered;
  }

  syncGroup(input: SyncGroupInput): Promise<SyncGroupOutcome> {
    const refused = this.refusal(input.groupId);
    if (refused !== undefined) {
      return Promise.resolve({ errorCode: refused, protocolType: null, protocolName: null, assignment: new Uint8Array(0) });
    }
    const waiter = this.nextWaiter++;
    const answered = new Promise<SyncGroupOutcome>((resolve) => this.syncWaiters.set(waiter, resolve));
    this.apply(this.state.syncGroup(input, waiter, this.deps.clock.nowMs()));
    return answered;
  }

  heartbeat(input: { groupId: string; memberId: string; groupInstanceId: string | null; generationId: number }): number {
    const refused = this.refusal(input.groupId);
    if (refused !== undefined) return refused;
    const { errorCode, effects } = this.state.heartbeat(input, this.deps.clock.nowMs());
    this.apply(effects);
    return errorCode;
  }

  leaveGroup(groupId: string, members: readonly MemberIdentity[]): LeaveGroupOutcome {
    const refused = this.refusal(groupId);
    if (refused !== undefined) return { errorCode: refused, members: [] };
    const { effects, ...outcome } = this.state.leaveGroup(groupId, members, this.deps.clock.nowMs());
    this.apply(effects);
    return outcome;
  }

  /** A group described (an unknown one as Dead, as Apache does), or NOT_COORDINATOR. */
  describeGroup(groupId: string): { errorCode: typeof ErrorCode.NONE; group: DescribedGroup } | { errorCode: number; group: null } {
    const refused = this.refusal(groupId);
    if (refused !== undefined) return { errorCode: refused, group: null };
    return { errorCode: ErrorCode.NONE, group: this.state.describeGroup(groupId) };
  }

  /** The groups of the slots this broker owns. */
  listGroups(statesFilter: readonly string[], typesFilter: readonly string[]): ListedGroup[] {
    return this.state.listGroups(statesFilter, typesFilter).filter((g) => this.isCoordinatorFor(g.groupId));
  }

  /** DeleteGroups: every group validated and removed, then the removals made durable, per slot. */
  async deleteGroups(groupIds: readonly string[]): Promise<{ groupId: string; errorCode: number }[]> {
    const results: { groupId: string; errorCode: number }[] = groupIds.map((groupId) => ({ groupId, errorCode: ErrorCode.NONE }));
    const bySlot = new Map<number, string[]>();
    for (const r of results) {
      const refused = this.refusal(r.groupId);
      if (refused !== undefined) {
        r.errorCode = refused;
        continue;
      }
      r.errorCode = this.state.validateDeleteGroup(r.groupId);
      if (r.errorCode !== ErrorCode.NONE) continue;
      this.apply(this.state.deleteGroup(r.groupId, this.deps.clock.nowMs()).effects);
      const slot = slotOf(r.groupId);
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), r.groupId]);
    }
    await Promise.all(
      [...bySlot].map(async ([slot, ids]) => {
        try {
          await this.store.mutate(slot, (draft) => {
            for (const id of ids) draft.deleteGroup(id);
          });
        } catch (error) {
          this.rethrowFatal(error);
          for (const r of results) if (ids.includes(r.groupId)) r.errorCode = ErrorCode.NOT_COORDINATOR;
        }
      }),
    );
    return results;
  }

  // ---- offsets ---------------------------------------------------------------------------------

  /** OffsetCommit for partitions the handler found to exist; resolves once durable, one error code per partition. */
  async commitOffsets(input: OffsetCommitInput): Promise<number[]> {
    const all = (code: number): number[] => input.partitions.map(() => code);
    const refused = this.refusal(input.groupId);
    if (refused !== undefined) return all(refused);
    const nowMs = this.deps.clock.nowMs();
    const { errorCode, effects } = this.state.validateOffsetCommit(
      { groupId: input.groupId, memberId: input.memberId, groupInstanceId: input.groupInstanceId, generationId: input.generationId, apiVersion: input.apiVersion },
      nowMs,
    );
    this.apply(effects);
    if (errorCode !== ErrorCode.NONE) return all(errorCode);
    const expireTimestampMs = input.retentionTimeMs === -1 ? null : nowMs + input.retentionTimeMs;
    const results = all(ErrorCode.NONE);
    const entries: OffsetCommitEntry[] = [];
    const positions: number[] = [];
    input.partitions.forEach((p, i) => {
      // Apache compares the metadata's length in UTF-16 units (Java's String.length), as does JavaScript's.
      if (p.metadata !== null && p.metadata.length > this.metadataMaxBytes) {
        results[i] = ErrorCode.OFFSET_METADATA_TOO_LARGE;
        return;
      }
      entries.push({
        topic: p.topic,
        partition: p.partition,
        offset: p.offset,
        leaderEpoch: p.leaderEpoch,
        metadata: p.metadata ?? "",
        commitTimestampMs: p.commitTimestampMs === -1 ? nowMs : p.commitTimestampMs,
        expireTimestampMs,
      });
      positions.push(i);
    });
    if (entries.length === 0) return results;
    try {
      const slot = slotOf(input.groupId);
      const epoch = this.servedSlots.get(slot);
      const codes = await this.store.mutate(slot, (draft) => draft.commit(input.groupId, entries));
      // Durable, but not answered NONE when the slot could no longer be written at its epoch meanwhile.
      const deposed = epoch !== undefined && !this.stillOwns(slot, epoch);
      codes.forEach((code, j) => (results[positions[j]!] = deposed ? ErrorCode.NOT_COORDINATOR : code));
    } catch (error) {
      this.rethrowFatal(error);
      // Apache answers a failed write to the coordinator's log (KAFKA_STORAGE_ERROR) with NOT_COORDINATOR.
      for (const i of positions) results[i] = ErrorCode.NOT_COORDINATOR;
    }
    return results;
  }

  /**
   * OffsetFetch of one group: the committed offsets of the requested partitions (offset -1 and metadata ""
   * for those without), or of every partition with one when `topics` is null. With `requireStable`, a
   * partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT.
   */
  async fetchOffsets(groupId: string, topics: readonly { name: string; partitions: readonly number[] }[] | null, requireStable: boolean): Promise<OffsetFetchOutcome> {
    const refused = this.refusal(groupId);
    if (refused !== undefined) return { errorCode: refused, topics: [] };
    const slotIndex = slotOf(groupId);
    if (requireStable) {
      // Completions queued for the slot are applied first: a transaction already decided answers stable
      // as soon as possible. Until its completion is applied, its staged offsets answer UNSTABLE_OFFSET_COMMIT.
      await this.ensureDrained(slotIndex).catch((error: unknown) => this.rethrowFatal(error));
      // Let the writes queued before this fetch land first (Apache serves require_stable through its write path).
      await this.store.mutate(slotIndex, () => undefined).catch((error: unknown) => this.rethrowFatal(error));
      // The slot may have been handed over while this fetch waited.
      const refusedNow = this.refusal(groupId);
      if (refusedNow !== undefined) return { errorCode: refusedNow, topics: [] };
    }
    const slot = this.store.slot(slotIndex);
    const groupExists = this.state.hasGroup(groupId);
    const fetched = (topic: string, partition: number): FetchedOffset => {
      if (requireStable && slot.hasPendingTransactionalOffset(groupId, topic, partition)) {
        return { partition, offset: -1, leaderEpoch: -1, metadata: "", errorCode: ErrorCode.UNSTABLE_OFFSET_COMMIT };
      }
      const committed = groupExists ? slot.committed(groupId, topic, partition) : undefined;
      if (committed === undefined) return { partition, offset: -1, leaderEpoch: -1, metadata: "", errorCode: ErrorCode.NONE };
      return { partition, offset: committed.offset, leaderEpoch: committed.leaderEpoch, metadata: committed.metadata, errorCode: ErrorCode.NONE };
    };
    if (topics === null) {
      if (!groupExists) return { errorCode: ErrorCode.NONE, topics: [] };
      return {
        errorCode: ErrorCode.NONE,
        topics: [...slot.committedOfGroup(groupId)].map(([name, partitions]) => ({
          name,
          partitions: [...partitions.keys()].map((p) => fetched(name, p)),
        })),
      };
    }
    return { errorCode: ErrorCode.NONE, topics: topics.map((t) => ({ name: t.name, partitions: t.partitions.map((p) => fetched(t.name, p)) })) };
  }

  /**
   * OffsetDelete for partitions the handler found to exist: a top-level error, or per partition NONE (the
   * offset, and any staged for it, deleted durably) or GROUP_SUBSCRIBED_TO_TOPIC.
   */
  async deleteOffsets(groupId: string, topics: readonly { name: string; partitions: readonly number[] }[]): Promise<{ errorCode: number; topics: { name: string; partitions: { partition: number; errorCode: number }[] }[] }> {
    const refused = this.refusal(groupId);
    if (refused !== undefined) return { errorCode: refused, topics: [] };
    const errorCode = this.state.validateOffsetDelete(groupId);
    if (errorCode !== ErrorCode.NONE) return { errorCode, topics: [] };
    const doomed: TopicPartitionRef[] = [];
    const answer = topics.map((t) => {
      const subscribed = this.state.isSubscribedToTopic(groupId, t.name);
      return {
        name: t.name,
        partitions: t.partitions.map((partition) => {
          if (subscribed) return { partition, errorCode: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC };
          doomed.push({ topic: t.name, partition });
          return { partition, errorCode: ErrorCode.NONE };
        }),
      };
    });
    if (doomed.length > 0) {
      try {
        await this.store.mutate(slotOf(groupId), (draft) => draft.deleteOffsets(groupId, doomed));
      } catch (error) {
        this.rethrowFatal(error);
        return { errorCode: ErrorCode.NOT_COORDINATOR, topics: [] };
      }
    }
    return { errorCode: ErrorCode.NONE, topics: answer };
  }

  /** The durable offsets of a slot (introspection and tests). */
  offsetsSlot(groupId: string): OffsetSlot {
    return this.store.slot(slotOf(groupId));
  }

  // ---- transactional offsets (called by the transaction coordinator) --------------------------

  /**
   * The group checks of TxnOffsetCommit (KIP-447): generation and member as for OffsetCommit, without the
   * REBALANCE_IN_PROGRESS check, ILLEGAL_GENERATION for an unknown group with a generation.
   */
  validateTransactionalOffsetCommit(input: { groupId: string; memberId: string; groupInstanceId: string | null; generationId: number; apiVersion: number }): number {
    const refused = this.refusal(input.groupId);
    if (refused !== undefined) return refused;
    const { errorCode, effects } = this.state.validateOffsetCommit({ ...input, transactional: true }, this.deps.clock.nowMs());
    this.apply(effects);
    return errorCode;
  }

  /** Stages offsets of `producerId`'s open transaction, durably; invisible to OffsetFetch until committed. */
  async stageTransactionalOffsets(groupId: string, producerId: number, offsets: readonly StagedOffsetInput[]): Promise<number[]> {
    const nowMs = this.deps.clock.nowMs();
    const results: number[] = offsets.map(() => ErrorCode.NONE);
    const entries: Omit<OffsetCommitEntry, "expireTimestampMs">[] = [];
    const positions: number[] = [];
    offsets.forEach((o, i) => {
      if (o.metadata !== null && o.metadata.length > this.metadataMaxBytes) {
        results[i] = ErrorCode.OFFSET_METADATA_TOO_LARGE;
        return;
      }
      entries.push({ topic: o.topic, partition: o.partition, offset: o.offset, leaderEpoch: o.leaderEpoch, metadata: o.metadata ?? "", commitTimestampMs: nowMs });
      positions.push(i);
    });
    if (entries.length === 0) return results;
    // A completion queued for this slot is applied (and its file removed, durably) before anything is
    // staged here: the completion names only the producer id, and must not reach this producer's next
    // transaction (storage/offset-queue.ts).
    const slot = slotOf(groupId);
    await this.ensureDrained(slot);
    const epoch = this.servedSlots.get(slot);
    const codes = await this.store.mutate(slot, (draft) => draft.stage(groupId, producerId, entries));
    // Durable, but not answered NONE when the slot could no longer be written at its epoch meanwhile.
    const deposed = epoch !== undefined && !this.stillOwns(slot, epoch);
    codes.forEach((code, j) => (results[positions[j]!] = deposed ? ErrorCode.NOT_COORDINATOR : code));
    return results;
  }

  /**
   * Commits (or discards) what `producerId` staged for the group, durably; idempotent. Returns how many
   * staged offsets there were (0 when the completion was queued for another broker).
   *
   * The group's slot served here: completed in the slot (after any completion queued for it). Served
   * elsewhere, with an offset queue (cluster mode) and the transaction's decision (`txn`): the completion
   * is queued for the slot, durably, and the slot's owner woken; it resolves once the file is durable,
   * which is the hand-off (the owner applies it exactly once, see `drainCompletions`). Without a queue it
   * rejects (retriably: the transaction stays Prepare* and the transaction coordinator's reconcile pass
   * tries again), since the staged offsets are in the slot's files, which another broker may own now.
   */
  async completeTransactionalOffsets(groupId: string, producerId: number, commit: boolean, txn?: TxnOffsetCompletion): Promise<number> {
    const slot = slotOf(groupId);
    const epoch = this.servedSlots.get(slot);
    if (epoch !== undefined) {
      await this.ensureDrained(slot);
      const completed = await this.store.mutate(slot, (draft) => draft.completeTransaction(groupId, producerId, commit));
      // Durable, but perhaps in files a successor has fenced off (the lease lapsed meanwhile): the caller
      // retries, and a retry finds the slot elsewhere and queues the completion for its owner.
      if (!this.stillOwns(slot, epoch)) throw new Error(`group slot ${slot} was handed over while the offsets of group ${JSON.stringify(groupId)} were completed`);
      return completed;
    }
    const queue = this.deps.offsetQueue;
    if (queue === undefined || txn === undefined) {
      throw new Error(`the offsets of group ${JSON.stringify(groupId)} cannot be completed here: its slot ${slot} is not served by this broker`);
    }
    const completion: QueuedCompletion = {
      transactionalId: txn.transactionalId,
      producerId,
      producerEpoch: txn.producerEpoch,
      result: commit ? "commit" : "abort",
      // Every group of the transaction in this slot: the groups' calls share the one file.
      groups: [...new Set([groupId, ...txn.groups.filter((g) => slotOf(g) === slot)])].sort(),
      decidedMs: txn.decidedMs,
    };
    const key = `${slot}/${completion.producerId}-${completion.producerEpoch}-${completion.decidedMs}-${completion.result}`;
    let writing = this.enqueuing.get(key);
    if (writing === undefined) {
      writing = queue.enqueue(slot, completion).then(() => undefined);
      const written = writing;
      this.enqueuing.set(key, written);
      void written.catch(() => undefined).finally(() => {
        if (this.enqueuing.get(key) === written) this.enqueuing.delete(key);
      });
    }
    await writing;
    this.deps.waker?.wake({ kind: "group-slot", slot });
    return 0;
  }

  /** Whether this broker may still write slot `slot` at the epoch it serves it at (ownership's mayAct). */
  private stillOwns(slot: number, epoch: number): boolean {
    return this.deps.ownership.mayAct({ kind: "group", slot }, epoch);
  }

  // ---- the offset completion queue (cluster mode) ----------------------------------------------

  /** A wake-up for a group slot: its queue is drained if the slot is served here. */
  wakeSlot(slot: number): void {
    if (!this.servedSlots.has(slot) || this.closed) return;
    this.drainInBackground(slot);
  }

  private drainInBackground(slot: number): void {
    this.drainCompletions(slot).catch((error: unknown) => {
      if (error instanceof FatalError) return this.backgroundFailure(error);
      // A damaged file was logged where it was found; anything else is tried again at the next poll.
      if (!(error instanceof CorruptStateError)) this.backgroundFailure(error);
    });
  }

  /**
   * Applies the completions queued for a served slot, in decision order: each one's groups completed in
   * one durable slot write, then its file removed (durably). Idempotent: a completion applied again finds
   * nothing staged for its producer. A damaged file stops the drain there (CorruptStateError naming it,
   * logged once): the slot stays unserved (COORDINATOR_LOAD_IN_PROGRESS) rather than serve offsets that
   * a decided transaction has not completed, and the drain is tried again at the next wake-up or poll.
   * Resolves how many completions were applied; a drain already running is joined.
   */
  drainCompletions(slot: number): Promise<number> {
    const running = this.draining.get(slot);
    if (running !== undefined) return running;
    const drain = this.drainNow(slot).finally(() => {
      if (this.draining.get(slot) === drain) this.draining.delete(slot);
    });
    this.draining.set(slot, drain);
    return drain;
  }

  /** Whether the slot's queued completions were applied since it was loaded (tests, introspection). */
  completionsDrained(slot: number): boolean {
    return this.servedSlots.has(slot) && !this.undrained.has(slot);
  }

  private async drainNow(slot: number): Promise<number> {
    const queue = this.deps.offsetQueue;
    if (queue === undefined) return 0;
    let applied = 0;
    for (const path of await queue.list(slot)) {
      if (this.closed || !this.servedSlots.has(slot)) return applied;
      let completion: QueuedCompletion | undefined;
      try {
        completion = await queue.read(path);
      } catch (error) {
        this.rethrowFatal(error);
        if (!this.reportedCorrupt.has(path)) {
          this.reportedCorrupt.add(path);
          this.deps.log.error("a queued offset completion cannot be read; its group slot is not served until it can", { slot, path, error: String(error) });
        }
        throw error;
      }
      if (completion === undefined) continue; // applied and removed by a former owner meanwhile
      const groups = completion.groups.filter((g) => slotOf(g) === slot);
      const commit = completion.result === "commit";
      const { producerId } = completion;
      try {
        await this.store.mutate(slot, (draft) => {
          for (const groupId of groups) draft.completeTransaction(groupId, producerId, commit);
        });
      } catch (error) {
        this.rethrowFatal(error);
        // Released meanwhile, or a write that failed: the file stays for whoever serves the slot next.
        if (!this.servedSlots.has(slot)) return applied;
        throw error;
      }
      // The file goes only if the write is one a successor reads: with the lease lapsed meanwhile it may
      // be in files of a fenced epoch, and the slot's next owner must apply it again.
      const epoch = this.servedSlots.get(slot);
      if (epoch === undefined || !this.stillOwns(slot, epoch)) return applied;
      await queue.remove(path);
      this.reportedCorrupt.delete(path);
      applied += 1;
    }
    if (this.servedSlots.has(slot)) this.undrained.delete(slot);
    return applied;
  }

  /**
   * Resolves once no completion is queued for the slot (after applying those that are): a drain in
   * progress may have listed the queue before a newer file appeared, so the queue is listed again after it.
   */
  private async ensureDrained(slot: number): Promise<void> {
    const queue = this.deps.offsetQueue;
    if (queue === undefined) return;
    for (;;) {
      const running = this.draining.get(slot);
      if (running !== undefined) await running;
      if ((await queue.list(slot)).length === 0) {
        if (this.servedSlots.has(slot)) this.undrained.delete(slot);
        return;
      }
      if (!this.servedSlots.has(slot) || this.closed) return;
      const epoch = this.servedSlots.get(slot)!;
      // A slot this broker may no longer write (its lease lapsed) cannot drain: its next owner will.
      if (!this.stillOwns(slot, epoch)) throw new Error(`group slot ${slot} cannot be written here now (handed over or the lease lapsed)`);
      await this.drainCompletions(slot);
    }
  }

  private startQueuePoll(intervalMs: number): void {
    this.queueTimer = setInterval(() => {
      for (const slot of this.servedSlots.keys()) this.wakeSlot(slot);
    }, intervalMs);
    (this.queueTimer as { unref?: () => void }).unref?.();
  }

  // ---- expiry ----------------------------------------------------------------------------------

  /**
   * One expiry pass over the slots this broker owns; returns how many offsets expired. Each slot is
   * handled by store changes that expire at most `sweepBatchMax` offsets each; an Empty group left with no
   * offsets and no open transaction is deleted (as Apache's cleanupGroupMetadata).
   */
  sweepExpiredOffsets(): Promise<number> {
    this.sweeping ??= this.sweepNow().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async sweepNow(): Promise<number> {
    let total = 0;
    const groupsBySlot = new Map<number, Set<string>>();
    const add = (groupId: string) => {
      const slot = slotOf(groupId);
      if (!this.isCoordinatorFor(groupId)) return;
      let ids = groupsBySlot.get(slot);
      if (ids === undefined) groupsBySlot.set(slot, (ids = new Set()));
      ids.add(groupId);
    };
    for (const groupId of this.state.groupIds()) add(groupId);
    for (const slot of this.servedSlots.keys()) for (const groupId of this.store.slot(slot).groups.keys()) add(groupId);
    for (const [slot, ids] of groupsBySlot) {
      const pending = [...ids];
      while (pending.length > 0 && !this.closed && this.servedSlots.has(slot)) {
        const expired = await this.store
          .mutate(slot, (draft) => {
            let budget = this.sweepBatchMax;
            let count = 0;
            while (pending.length > 0 && budget > 0) {
              const groupId = pending[0]!;
              const view = this.state.offsetExpiryView(groupId);
              const { expired, allExpired } = draft.expireGroupOffsets(groupId, view, this.deps.clock.nowMs(), this.retentionMs, budget);
              count += expired;
              budget -= expired;
              if (budget <= 0 && !allExpired) break; // more of this group next time
              pending.shift();
              if (allExpired && view !== undefined && view.state === "Empty") {
                const { deleted, effects } = this.state.deleteGroup(groupId, this.deps.clock.nowMs());
                this.apply(effects);
                if (deleted) {
                  draft.deleteGroup(groupId);
                  this.deps.log.info("deleted expired group", { groupId });
                }
              }
            }
            return count;
          })
          .catch((error: unknown) => {
            this.rethrowFatal(error);
            this.deps.log.warn("offset expiry could not be written", { slot, error: String(error) });
            pending.length = 0;
            return 0;
          });
        total += expired;
      }
    }
    if (total > 0) this.deps.log.info("expired offsets", { count: total });
    return total;
  }

  private startSweep(intervalMs: number): void {
    this.sweepTimer = setInterval(() => {
      this.sweepExpiredOffsets().catch((error: unknown) => this.backgroundFailure(error));
    }, intervalMs);
    (this.sweepTimer as { unref?: () => void }).unref?.();
  }

  // ---- timers and effects ----------------------------------------------------------------------

  /** Runs the timers that are due (tests with a manual clock call this after moving it). */
  runDueTimers(): number {
    return this.timers.runDue();
  }

  /** How many timers are armed (tests). */
  get timerCount(): number {
    return this.timers.size;
  }

  private apply(effects: readonly GroupEffect[]): void {
    for (const e of effects) {
      switch (e.kind) {
        case "join-response": {
          const resolve = this.joinWaiters.get(e.waiter);
          this.joinWaiters.delete(e.waiter);
          resolve?.(e.response);
          break;
        }
        case "sync-response": {
          const resolve = this.syncWaiters.get(e.waiter);
          this.syncWaiters.delete(e.waiter);
          resolve?.(e.response);
          break;
        }
        case "schedule":
          this.timers.schedule(e.key, e.delayMs, () => this.apply(this.state.onTimer(e.timer, this.deps.clock.nowMs())));
          break;
        case "cancel":
          this.timers.cancel(e.key);
          break;
        case "persist":
          this.persistRecord(e.groupId);
          break;
      }
    }
  }

  /** Queues a background rewrite of the group's record, coalesced per slot. */
  private persistRecord(groupId: string): void {
    if (this.closed) return;
    const slot = slotOf(groupId);
    let ids = this.dirty.get(slot);
    if (ids !== undefined) {
      ids.add(groupId);
      return;
    }
    this.dirty.set(slot, (ids = new Set([groupId])));
    this.store
      .mutate(slot, (draft) => {
        const batch = this.dirty.get(slot) ?? new Set<string>();
        this.dirty.delete(slot);
        for (const id of batch) draft.setRecord(id, this.state.persistedRecord(id));
      })
      .catch((error: unknown) => {
        this.dirty.delete(slot);
        this.backgroundFailure(error);
      });
  }

  /**
   * A slot write failed without being fatal: the slot kept its durable state. Groups this coordinator
   * removed in that write (DeleteGroups, expiry) are still on disk, so they come back, Empty.
   */
  private reconcile(slot: number, error: unknown): void {
    this.deps.log.warn("group state write failed; the slot keeps its durable state", { slot, error: String(error) });
    if (!this.servedSlots.has(slot)) return;
    const missing: PersistedGroup[] = [];
    for (const [groupId, g] of this.store.slot(slot).groups) {
      if (!this.state.hasGroup(groupId)) missing.push(g.record ?? simpleGroupRecord(groupId, this.deps.clock.nowMs()));
    }
    this.state.load(missing, this.deps.clock.nowMs());
  }

  private backgroundFailure(error: unknown): void {
    if (error instanceof FatalError) {
      this.deps.log.error("group state cannot be made durable", { error: String(error) });
      // Out of any request: the process must stop (main.ts exits on an uncaught FatalError).
      queueMicrotask(() => {
        throw error;
      });
      return;
    }
    if (!this.closed) this.deps.log.warn("group state write failed", { error: String(error) });
  }

  private rethrowFatal(error: unknown): void {
    if (error instanceof FatalError) throw error;
  }

  /** Answers every parked request NOT_COORDINATOR, stops the timers and the sweep, waits for writes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.apply(this.state.shutdown(ErrorCode.NOT_COORDINATOR));
    this.closed = true;
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    if (this.queueTimer !== undefined) clearInterval(this.queueTimer);
    this.stopWakes?.();
    await Promise.all([...this.draining.values()].map((drain) => drain.catch(() => 0)));
    this.timers.close();
    await this.sweeping?.catch(() => undefined);
    await this.store.close();
  }
}

function errorJoin(memberId: string, errorCode: number): JoinGroupOutcome {
  return { errorCode, generationId: -1, protocolType: null, protocolName: null, leader: "", skipAssignment: false, memberId, members: [] };
}

function simpleGroupRecord(groupId: string, nowMs: number): PersistedGroup {
  return { groupId, protocolType: null, protocolName: null, generationId: 0, leaderId: null, state: "Empty", stateTimestampMs: nowMs };
}
