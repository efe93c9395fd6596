/**
 * The classic group protocol as a pure state machine over every group of a coordinator: JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, the timers that drive rebalances and expire members, and the group
 * checks of OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups and DeleteGroups. Apache
 * Kafka's GroupMetadataManager (classic part) and ClassicGroup are the reference: every decision and error
 * code below is theirs unless a comment says otherwise.
 *
 * Pure: no I/O, no clock reads, no timers, no randomness of its own (member ids come from `newUuid`). Each
 * operation takes `nowMs` (wall clock, for state timestamps) and returns effects for its driver to carry
 * out, in order:
 *
 * - `join-response` / `sync-response`: answer the request parked on `waiter`. JoinGroup and SyncGroup are
 *   always answered this way, at once or when the rebalance gets there.
 * - `schedule` / `cancel`: a timer under a key (one per group for the join and sync phases, one per member
 *   for its session), as Apache's coordinator timer; scheduling a key again replaces it. When it fires,
 *   the driver calls `onTimer(timer)`.
 * - `persist`: the group's durable record (generation, protocol type, Empty or not) changed; the driver
 *   writes it in the background. Members are not persisted: after a restart they rejoin.
 *
 * Where bunka answers although Apache leaves a request unanswered (never completes its future), because
 * responses on one connection go out in order and one unanswered request would block the connection:
 * a parked JoinGroup or SyncGroup replaced by a newer one of the same member is answered
 * REBALANCE_IN_PROGRESS, and a parked request of a member removed from the group is answered
 * UNKNOWN_MEMBER_ID.
 */
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import {
  ClassicGroup,
  EMPTY_ASSIGNMENT,
  GROUP_STATES,
  GroupMember,
  type GroupProtocol,
  type GroupStateName,
  type Waiter,
} from "./classic-group.ts";

export interface GroupCoordinatorConfig {
  /** group.initial.rebalance.delay.ms */
  initialRebalanceDelayMs: number;
  /** group.classic.new.member.join.timeout.ms (Apache: 5 min): how long a new member's JoinGroup may stay parked. */
  newMemberJoinTimeoutMs: number;
  /** group.min.session.timeout.ms / group.max.session.timeout.ms */
  minSessionTimeoutMs: number;
  maxSessionTimeoutMs: number;
  /** group.max.size */
  maxSize: number;
}

export const DEFAULT_GROUP_COORDINATOR_CONFIG: GroupCoordinatorConfig = {
  initialRebalanceDelayMs: 3000,
  newMemberJoinTimeoutMs: 5 * 60 * 1000,
  minSessionTimeoutMs: 6000,
  maxSessionTimeoutMs: 30 * 60 * 1000,
  // Apache's default is Integer.MAX_VALUE; bunka bounds every collection (docs/architecture.md,
  // "Conventions"), far above any real group.
  maxSize: 100_000,
};

export type GroupTimer =
  | { readonly kind: "heartbeat"; readonly groupId: string; readonly memberId: string }
  | { readonly kind: "join"; readonly groupId: string }
  | { readonly kind: "initial-join"; readonly groupId: string; readonly delayMs: number; readonly remainingMs: number }
  | { readonly kind: "sync"; readonly groupId: string; readonly generationId: number };

export interface JoinGroupResponseMember {
  memberId: string;
  groupInstanceId: string | null;
  metadata: Uint8Array;
}

/** A JoinGroup answer, independent of the wire version (the handler maps nulls per version). */
export interface JoinGroupOutcome {
  errorCode: number;
  generationId: number;
  protocolType: string | null;
  protocolName: string | null;
  leader: string;
  skipAssignment: boolean;
  memberId: string;
  members: JoinGroupResponseMember[];
}

export interface SyncGroupOutcome {
  errorCode: number;
  protocolType: string | null;
  protocolName: string | null;
  assignment: Uint8Array;
}

export type GroupEffect =
  | { readonly kind: "join-response"; readonly waiter: Waiter; readonly response: JoinGroupOutcome }
  | { readonly kind: "sync-response"; readonly waiter: Waiter; readonly response: SyncGroupOutcome }
  | { readonly kind: "schedule"; readonly key: string; readonly delayMs: number; readonly timer: GroupTimer }
  | { readonly kind: "cancel"; readonly key: string }
  | { readonly kind: "persist"; readonly groupId: string };

export interface JoinGroupInput {
  groupId: string;
  memberId: string;
  groupInstanceId: string | null;
  protocolType: string;
  protocols: readonly GroupProtocol[];
  sessionTimeoutMs: number;
  /** Already defaulted to the session timeout for JoinGroup v0. */
  rebalanceTimeoutMs: number;
  clientId: string;
  clientHost: string;
  apiVersion: number;
}

export interface SyncGroupInput {
  groupId: string;
  memberId: string;
  generationId: number;
  groupInstanceId: string | null;
  /** v5+: must match the group's; null (older versions) is not checked. */
  protocolType: string | null;
  protocolName: string | null;
  assignments: readonly { memberId: string; assignment: Uint8Array }[];
}

export interface MemberIdentity {
  memberId: string;
  groupInstanceId: string | null;
}

export interface LeaveGroupOutcome {
  errorCode: number;
  members: (MemberIdentity & { errorCode: number })[];
}

export interface DescribedGroupMember {
  memberId: string;
  groupInstanceId: string | null;
  clientId: string;
  clientHost: string;
  memberMetadata: Uint8Array;
  memberAssignment: Uint8Array;
}

export interface DescribedGroup {
  groupId: string;
  groupState: GroupStateName;
  protocolType: string;
  protocolData: string;
  members: DescribedGroupMember[];
  /** False for a group this coordinator does not know (described as Dead, as Apache does). */
  exists: boolean;
}

export interface ListedGroup {
  groupId: string;
  protocolType: string;
  groupState: GroupStateName;
  groupType: "classic";
}

/** What survives a restart of a group. Members do not: they rejoin. */
export interface PersistedGroup {
  groupId: string;
  protocolType: string | null;
  protocolName: string | null;
  generationId: number;
  leaderId: string | null;
  state: GroupStateName;
  stateTimestampMs: number | null;
}

/** What offset expiry needs to know about a group (Apache's offsetExpirationCondition inputs). */
export interface OffsetExpiryView {
  state: GroupStateName;
  protocolType: string | null;
  currentStateTimestampMs: number | null;
  usesConsumerGroupProtocol: boolean;
  isSubscribedToTopic(topic: string): boolean;
  /** Whether the consumer group knows its members' subscriptions (only then Stable groups expire offsets). */
  knowsSubscriptions: boolean;
}

export const heartbeatKey = (groupId: string, memberId: string) => JSON.stringify(["heartbeat", groupId, memberId]);
export const joinKey = (groupId: string) => JSON.stringify(["join", groupId]);
export const syncKey = (groupId: string) => JSON.stringify(["sync", groupId]);

function joinError(memberId: string, errorCode: number): JoinGroupOutcome {
  return { errorCode, generationId: -1, protocolType: null, protocolName: null, leader: "", skipAssignment: false, memberId, members: [] };
}

function syncError(errorCode: number): SyncGroupOutcome {
  return { errorCode, protocolType: null, protocolName: null, assignment: EMPTY_ASSIGNMENT };
}

/** Apache's validateMember: static identity first (FENCED_INSTANCE_ID), then membership. */
function validateMember(group: ClassicGroup, memberId: string, groupInstanceId: string | null): number {
  if (groupInstanceId !== null) {
    const existing = group.staticMemberId(groupInstanceId);
    if (existing === undefined) return ErrorCode.UNKNOWN_MEMBER_ID;
    if (existing !== memberId) return ErrorCode.FENCED_INSTANCE_ID;
  }
  return group.hasMember(memberId) ? ErrorCode.NONE : ErrorCode.UNKNOWN_MEMBER_ID;
}

export class GroupCoordinatorState {
  private readonly groups = new Map<string, ClassicGroup>();
  private effects: GroupEffect[] = [];

  constructor(
    readonly config: GroupCoordinatorConfig,
    private readonly newUuid: () => string,
  ) {}

  // ---- loading and persistence -----------------------------------------------------------------

  /**
   * Restores groups from their durable records: every group comes back Empty (members are transient),
   * with its generation and protocol type. A group that was not Empty becomes Empty now, so its offsets'
   * retention starts from the restart.
   */
  load(records: readonly PersistedGroup[], nowMs: number): void {
    for (const r of records) {
      const wasEmpty = r.state === "Empty";
      this.groups.set(
        r.groupId,
        new ClassicGroup(r.groupId, {
          state: "Empty",
          generationId: r.generationId,
          protocolType: r.protocolType,
          protocolName: null,
          leaderId: null,
          currentStateTimestampMs: wasEmpty ? r.stateTimestampMs : nowMs,
        }),
      );
    }
  }

  /** The durable record of a group, or null when the group does not exist (its record must go). */
  persistedRecord(groupId: string): PersistedGroup | null {
    const g = this.groups.get(groupId);
    if (g === undefined) return null;
    return {
      groupId,
      protocolType: g.protocolType,
      protocolName: g.protocolName,
      generationId: g.generationId,
      leaderId: g.leaderId,
      state: g.state,
      stateTimestampMs: g.currentStateTimestampMs,
    };
  }

  groupIds(): string[] {
    return [...this.groups.keys()];
  }

  hasGroup(groupId: string): boolean {
    return this.groups.has(groupId);
  }

  /** For tests and introspection; callers must not mutate it. */
  peek(groupId: string): ClassicGroup | undefined {
    return this.groups.get(groupId);
  }

  // ---- JoinGroup -------------------------------------------------------------------------------

  /** JoinGroup. The answer is a `join-response` effect for `waiter`, now or when the join phase completes. */
  joinGroup(req: JoinGroupInput, waiter: Waiter, nowMs: number): GroupEffect[] {
    this.begin();
    if (req.groupId === "") {
      this.respondJoin(waiter, joinError(req.memberId, ErrorCode.INVALID_GROUP_ID));
      return this.end();
    }
    if (req.sessionTimeoutMs < this.config.minSessionTimeoutMs || req.sessionTimeoutMs > this.config.maxSessionTimeoutMs) {
      this.respondJoin(waiter, joinError(req.memberId, ErrorCode.INVALID_SESSION_TIMEOUT));
      return this.end();
    }
    const isUnknownMember = req.memberId === "";
    let group = this.groups.get(req.groupId);
    let isNewGroup = false;
    if (group === undefined) {
      // A group is created only by a member without a member id; a known member of an unknown group is stale.
      if (!isUnknownMember) {
        this.respondJoin(waiter, joinError(req.memberId, ErrorCode.UNKNOWN_MEMBER_ID));
        return this.end();
      }
      group = new ClassicGroup(req.groupId, { currentStateTimestampMs: nowMs });
      this.groups.set(req.groupId, group);
      isNewGroup = true;
    }
    if (!this.acceptJoiningMember(group, req.memberId)) {
      this.removeMember(group, req.memberId);
      this.respondJoin(waiter, joinError("", ErrorCode.GROUP_MAX_SIZE_REACHED));
    } else if (isUnknownMember) {
      this.joinNewMember(group, req, waiter, nowMs);
    } else {
      this.joinExistingMember(group, req, waiter, nowMs);
    }
    if (isNewGroup) this.persist(group);
    return this.end();
  }

  private acceptJoiningMember(group: ClassicGroup, memberId: string): boolean {
    switch (group.state) {
      case "Empty":
      case "Dead":
        return true;
      case "PreparingRebalance":
        // Counting the members awaiting join (not the group size) lets the last rejoining members be kicked
        // out when the group is above a (reduced) maximum.
        return (group.member(memberId)?.awaitingJoin ?? null) !== null || group.numMembersAwaitingJoin < this.config.maxSize;
      case "CompletingRebalance":
      case "Stable":
        return group.hasMember(memberId) || group.members.size < this.config.maxSize;
    }
  }

  private joinNewMember(group: ClassicGroup, req: JoinGroupInput, waiter: Waiter, nowMs: number): void {
    if (group.is("Dead")) {
      this.respondJoin(waiter, joinError("", ErrorCode.COORDINATOR_NOT_AVAILABLE));
      return;
    }
    if (!group.supportsProtocols(req.protocolType, req.protocols.map((p) => p.name))) {
      this.respondJoin(waiter, joinError("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL));
      return;
    }
    const newMemberId = `${req.groupInstanceId ?? req.clientId}-${this.newUuid()}`;
    if (req.groupInstanceId !== null) {
      const existing = group.staticMemberId(req.groupInstanceId);
      if (existing !== undefined) {
        this.updateStaticMemberThenRebalanceOrCompleteJoin(group, req, existing, newMemberId, waiter, nowMs);
      } else {
        this.addMemberThenRebalanceOrCompleteJoin(group, req, newMemberId, waiter, nowMs);
      }
      return;
    }
    if (req.apiVersion >= 4) {
      // KIP-394: the member must come back with this id, so that a client that never receives the answer
      // does not leave a member behind. Until it does, it is pending, expiring after its session timeout.
      group.addPendingMember(newMemberId);
      this.schedule(heartbeatKey(group.groupId, newMemberId), req.sessionTimeoutMs, { kind: "heartbeat", groupId: group.groupId, memberId: newMemberId });
      this.respondJoin(waiter, joinError(newMemberId, ErrorCode.MEMBER_ID_REQUIRED));
      return;
    }
    this.addMemberThenRebalanceOrCompleteJoin(group, req, newMemberId, waiter, nowMs);
  }

  private joinExistingMember(group: ClassicGroup, req: JoinGroupInput, waiter: Waiter, nowMs: number): void {
    const memberId = req.memberId;
    if (group.is("Dead")) {
      this.respondJoin(waiter, joinError(memberId, ErrorCode.COORDINATOR_NOT_AVAILABLE));
      return;
    }
    if (!group.supportsProtocols(req.protocolType, req.protocols.map((p) => p.name))) {
      this.respondJoin(waiter, joinError(memberId, ErrorCode.INCONSISTENT_GROUP_PROTOCOL));
      return;
    }
    if (group.isPendingMember(memberId)) {
      // Pending members are dynamic; Apache throws an IllegalStateException here (UNKNOWN_SERVER_ERROR).
      if (req.groupInstanceId !== null) {
        this.respondJoin(waiter, joinError(memberId, ErrorCode.UNKNOWN_SERVER_ERROR));
        return;
      }
      this.addMemberThenRebalanceOrCompleteJoin(group, req, memberId, waiter, nowMs);
      return;
    }
    const invalid = validateMember(group, memberId, req.groupInstanceId);
    if (invalid !== ErrorCode.NONE) {
      this.respondJoin(waiter, joinError(memberId, invalid));
      return;
    }
    const member = group.member(memberId)!;
    switch (group.state) {
      case "PreparingRebalance":
        this.updateMemberThenRebalanceOrCompleteJoin(group, member, req, waiter, nowMs);
        return;
      case "CompletingRebalance":
        if (member.matches(req.protocols)) {
          // The member lost our answer and asks again with the same metadata: answer with this generation.
          this.respondJoin(waiter, this.currentGenerationAnswer(group, memberId, group.isLeader(memberId)));
        } else {
          this.updateMemberThenRebalanceOrCompleteJoin(group, member, req, waiter, nowMs);
        }
        return;
      case "Stable":
        if (group.isLeader(memberId) || !member.matches(req.protocols)) {
          // A rejoining leader forces a rebalance: that is how it reacts to changes the members' metadata
          // does not show (new partitions of a subscribed topic).
          this.updateMemberThenRebalanceOrCompleteJoin(group, member, req, waiter, nowMs);
        } else {
          this.respondJoin(waiter, this.currentGenerationAnswer(group, memberId, false));
        }
        return;
      default:
        // Empty with a known member cannot happen; let the member reset and rejoin.
        this.respondJoin(waiter, joinError(memberId, ErrorCode.UNKNOWN_MEMBER_ID));
    }
  }

  private currentGenerationAnswer(group: ClassicGroup, memberId: string, withMembers: boolean): JoinGroupOutcome {
    return {
      errorCode: ErrorCode.NONE,
      generationId: group.generationId,
      protocolType: group.protocolType,
      protocolName: group.protocolName,
      leader: group.leaderId ?? "",
      skipAssignment: false,
      memberId,
      members: withMembers ? this.currentMembers(group) : [],
    };
  }

  private currentMembers(group: ClassicGroup): JoinGroupResponseMember[] {
    return [...group.members.values()].map((m) => ({
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      metadata: m.metadata(group.protocolName ?? ""),
    }));
  }

  private updateMemberThenRebalanceOrCompleteJoin(group: ClassicGroup, member: GroupMember, req: JoinGroupInput, waiter: Waiter, nowMs: number): void {
    this.supersedeJoinWaiter(member);
    group.updateMember(member, req.protocols, req.rebalanceTimeoutMs, req.sessionTimeoutMs, waiter);
    this.maybePrepareRebalanceOrCompleteJoin(group, nowMs);
  }

  private addMemberThenRebalanceOrCompleteJoin(group: ClassicGroup, req: JoinGroupInput, memberId: string, waiter: Waiter, nowMs: number): void {
    const member = new GroupMember(
      memberId,
      req.groupInstanceId,
      req.clientId,
      req.clientHost,
      req.rebalanceTimeoutMs,
      req.sessionTimeoutMs,
      req.protocolType,
      req.protocols,
    );
    member.isNew = true;
    // A member joining during the initial rebalance extends its delay.
    if (group.is("PreparingRebalance") && group.previousState === "Empty") group.newMemberAdded = true;
    group.add(member, waiter);
    // A new member cannot heartbeat while its JoinGroup is parked, and a disconnect cannot be seen: its
    // JoinGroup times out instead, so that clients that gave up do not accumulate in the rebalance.
    this.schedule(heartbeatKey(group.groupId, memberId), this.config.newMemberJoinTimeoutMs, { kind: "heartbeat", groupId: group.groupId, memberId });
    this.maybePrepareRebalanceOrCompleteJoin(group, nowMs);
  }

  private updateStaticMemberThenRebalanceOrCompleteJoin(
    group: ClassicGroup,
    req: JoinGroupInput,
    oldMemberId: string,
    newMemberId: string,
    waiter: Waiter,
    nowMs: number,
  ): void {
    const currentLeader = group.leaderId;
    const { old, replacement } = group.replaceStaticMember(req.groupInstanceId!, oldMemberId, newMemberId);
    // Fence the old incarnation's parked requests at once.
    if (old.awaitingJoin !== null) {
      this.respondJoin(old.awaitingJoin, { ...joinError(oldMemberId, ErrorCode.FENCED_INSTANCE_ID), protocolType: null, protocolName: null });
    }
    if (old.awaitingSync !== null) this.respondSync(old.awaitingSync, syncError(ErrorCode.FENCED_INSTANCE_ID));
    // The old member id's session timer now finds no such member and does nothing.
    this.rescheduleHeartbeat(group, replacement);
    group.updateMember(replacement, req.protocols, req.rebalanceTimeoutMs, req.sessionTimeoutMs, waiter);

    switch (group.state) {
      case "Stable": {
        if ((group.protocolName ?? "") === group.selectProtocol()) {
          // The selected protocol stays: no rebalance, the new incarnation takes over the old assignment.
          this.persist(group);
          const isLeader = group.isLeader(newMemberId);
          const answer: JoinGroupOutcome =
            req.apiVersion >= 9
              ? { ...this.currentGenerationAnswer(group, newMemberId, isLeader), skipAssignment: isLeader }
              : { ...this.currentGenerationAnswer(group, newMemberId, false), leader: currentLeader ?? "" };
          const w = group.takeJoinWaiter(replacement);
          if (w !== null) this.respondJoin(w, answer);
        } else {
          this.maybePrepareRebalanceOrCompleteJoin(group, nowMs);
        }
        return;
      }
      case "CompletingRebalance":
        // The leader may already hold the old member id for its assignment: rebalance again.
        this.prepareRebalance(group, nowMs);
        return;
      default:
        this.maybeCompleteJoinPhase(group, nowMs);
    }
  }

  private maybePrepareRebalanceOrCompleteJoin(group: ClassicGroup, nowMs: number): void {
    if (group.canRebalance()) this.prepareRebalance(group, nowMs);
    else this.maybeCompleteJoinPhase(group, nowMs);
  }

  /** Completes the join phase if every member has rejoined, except during the initial (delayed) rebalance. */
  private maybeCompleteJoinPhase(group: ClassicGroup, nowMs: number): void {
    if (!group.is("PreparingRebalance")) return;
    if (group.previousState === "Empty") return;
    if (!group.hasAllMembersJoined()) return;
    this.completeJoin(group, nowMs);
  }

  private prepareRebalance(group: ClassicGroup, nowMs: number): void {
    // Members waiting for their assignment must rejoin instead.
    if (group.is("CompletingRebalance")) this.resetAndPropagateAssignmentWithError(group, ErrorCode.REBALANCE_IN_PROGRESS);
    this.removeSyncExpiration(group);
    const isInitialRebalance = group.is("Empty");
    if (isInitialRebalance) {
      // A new group waits for more members (Apache's InitialDelayedJoin).
      const delayMs = this.config.initialRebalanceDelayMs;
      const remainingMs = Math.max(group.rebalanceTimeoutMs() - delayMs, 0);
      this.schedule(joinKey(group.groupId), delayMs, { kind: "initial-join", groupId: group.groupId, delayMs, remainingMs });
    }
    group.transitionTo("PreparingRebalance", nowMs);
    if (!isInitialRebalance) this.maybeCompleteJoinElseSchedule(group, nowMs);
  }

  private maybeCompleteJoinElseSchedule(group: ClassicGroup, nowMs: number): void {
    if (group.hasAllMembersJoined()) this.completeJoin(group, nowMs);
    else this.schedule(joinKey(group.groupId), group.rebalanceTimeoutMs(), { kind: "join", groupId: group.groupId });
  }

  private tryCompleteInitialRebalanceElseSchedule(group: ClassicGroup, delayMs: number, remainingMs: number, nowMs: number): void {
    if (group.newMemberAdded && remainingMs !== 0) {
      // Somebody joined during the delay: wait another delay, within the rebalance timeout.
      group.newMemberAdded = false;
      const newDelayMs = Math.min(this.config.initialRebalanceDelayMs, remainingMs);
      const newRemainingMs = Math.max(remainingMs - delayMs, 0);
      this.schedule(joinKey(group.groupId), newDelayMs, { kind: "initial-join", groupId: group.groupId, delayMs: newDelayMs, remainingMs: newRemainingMs });
    } else {
      this.completeJoin(group, nowMs);
    }
  }

  /**
   * Ends the join phase: dynamic members that did not rejoin are removed, and the next generation starts
   * (CompletingRebalance, every parked JoinGroup answered, the leader with the member list), or the group
   * becomes Empty.
   */
  private completeJoin(group: ClassicGroup, nowMs: number): void {
    this.cancel(joinKey(group.groupId));
    for (const m of [...group.members.values()]) {
      if (m.awaitingJoin === null && !m.isStatic) {
        this.removeMember(group, m.memberId);
        this.cancel(heartbeatKey(group.groupId, m.memberId));
      }
    }
    if (group.is("Dead")) return;
    if (!group.maybeElectNewJoinedLeader() && group.members.size > 0) {
      // Only static members that have not rejoined are left: wait another rebalance timeout for them.
      this.schedule(joinKey(group.groupId), group.rebalanceTimeoutMs(), { kind: "join", groupId: group.groupId });
      return;
    }
    group.initNextGeneration(nowMs);
    this.persist(group);
    if (group.is("Empty")) return;
    for (const m of group.members.values()) {
      const w = group.takeJoinWaiter(m);
      if (w !== null) {
        this.respondJoin(w, {
          ...this.currentGenerationAnswer(group, m.memberId, group.isLeader(m.memberId)),
        });
      }
      this.rescheduleHeartbeat(group, m);
      m.isNew = false;
      group.pendingSyncMembers.add(m.memberId);
    }
    this.schedule(syncKey(group.groupId), group.rebalanceTimeoutMs(), { kind: "sync", groupId: group.groupId, generationId: group.generationId });
  }

  // ---- SyncGroup -------------------------------------------------------------------------------

  /** SyncGroup. The answer is a `sync-response` effect for `waiter`, now or when the leader's assignment arrives. */
  syncGroup(req: SyncGroupInput, waiter: Waiter, nowMs: number): GroupEffect[] {
    this.begin();
    if (req.groupId === "") {
      this.respondSync(waiter, syncError(ErrorCode.INVALID_GROUP_ID));
      return this.end();
    }
    const group = this.groups.get(req.groupId);
    if (group === undefined || group.is("Empty")) {
      this.respondSync(waiter, syncError(ErrorCode.UNKNOWN_MEMBER_ID));
      return this.end();
    }
    const invalid = this.validateSyncGroup(group, req);
    if (invalid !== ErrorCode.NONE) {
      this.respondSync(waiter, syncError(invalid));
      return this.end();
    }
    const member = group.member(req.memberId)!;
    switch (group.state) {
      case "PreparingRebalance":
        this.respondSync(waiter, syncError(ErrorCode.REBALANCE_IN_PROGRESS));
        break;
      case "CompletingRebalance": {
        if (member.awaitingSync !== null) this.respondSync(member.awaitingSync, syncError(ErrorCode.REBALANCE_IN_PROGRESS));
        member.awaitingSync = waiter;
        this.removePendingSyncMember(group, req.memberId);
        if (group.isLeader(req.memberId)) {
          // Members the leader gave nothing get an empty assignment.
          const assignment = new Map<string, Uint8Array>();
          for (const a of req.assignments) assignment.set(a.memberId, a.assignment);
          for (const m of group.members.values()) m.assignment = assignment.get(m.memberId) ?? EMPTY_ASSIGNMENT;
          this.propagateAssignment(group, ErrorCode.NONE);
          group.transitionTo("Stable", nowMs);
        }
        break;
      }
      case "Stable":
        this.removePendingSyncMember(group, req.memberId);
        this.respondSync(waiter, {
          errorCode: ErrorCode.NONE,
          protocolType: group.protocolType,
          protocolName: group.protocolName,
          assignment: member.assignment,
        });
        break;
      default:
        this.respondSync(waiter, syncError(ErrorCode.UNKNOWN_SERVER_ERROR));
    }
    return this.end();
  }

  private validateSyncGroup(group: ClassicGroup, req: SyncGroupInput): number {
    if (group.is("Dead")) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    const invalid = validateMember(group, req.memberId, req.groupInstanceId);
    if (invalid !== ErrorCode.NONE) return invalid;
    if (req.generationId !== group.generationId) return ErrorCode.ILLEGAL_GENERATION;
    const inconsistent = (requested: string | null, actual: string | null) => requested !== null && requested !== actual;
    if (inconsistent(req.protocolType, group.protocolType) || inconsistent(req.protocolName, group.protocolName)) {
      return ErrorCode.INCONSISTENT_GROUP_PROTOCOL;
    }
    return ErrorCode.NONE;
  }

  private removePendingSyncMember(group: ClassicGroup, memberId: string): void {
    group.pendingSyncMembers.delete(memberId);
    if (group.is("CompletingRebalance") || group.is("Stable")) {
      if (group.pendingSyncMembers.size === 0) this.cancel(syncKey(group.groupId));
    } else {
      this.cancel(syncKey(group.groupId));
    }
  }

  private removeSyncExpiration(group: ClassicGroup): void {
    group.pendingSyncMembers.clear();
    this.cancel(syncKey(group.groupId));
  }

  private resetAndPropagateAssignmentWithError(group: ClassicGroup, errorCode: number): void {
    for (const m of group.members.values()) m.assignment = EMPTY_ASSIGNMENT;
    this.propagateAssignment(group, errorCode);
  }

  private propagateAssignment(group: ClassicGroup, errorCode: number): void {
    const ok = errorCode === ErrorCode.NONE;
    for (const m of group.members.values()) {
      const w = group.takeSyncWaiter(m);
      if (w === null) continue;
      this.respondSync(w, {
        errorCode,
        protocolType: ok ? group.protocolType : null,
        protocolName: ok ? group.protocolName : null,
        assignment: m.assignment,
      });
      // The session restarts once the member has its answer (an expiry during the wait was ignored).
      this.rescheduleHeartbeat(group, m);
    }
  }

  // ---- Heartbeat and LeaveGroup ----------------------------------------------------------------

  heartbeat(req: { groupId: string; memberId: string; groupInstanceId: string | null; generationId: number }, _nowMs: number): { errorCode: number; effects: GroupEffect[] } {
    this.begin();
    const errorCode = this.heartbeatNow(req);
    return { errorCode, effects: this.end() };
  }

  private heartbeatNow(req: { groupId: string; memberId: string; groupInstanceId: string | null; generationId: number }): number {
    if (req.groupId === "") return ErrorCode.INVALID_GROUP_ID;
    const group = this.groups.get(req.groupId);
    if (group === undefined) return ErrorCode.UNKNOWN_MEMBER_ID;
    if (group.is("Dead")) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    const invalid = validateMember(group, req.memberId, req.groupInstanceId);
    if (invalid !== ErrorCode.NONE) return invalid;
    if (req.generationId !== group.generationId) return ErrorCode.ILLEGAL_GENERATION;
    switch (group.state) {
      case "Empty":
        return ErrorCode.UNKNOWN_MEMBER_ID;
      case "PreparingRebalance":
        this.rescheduleHeartbeat(group, group.member(req.memberId)!);
        return ErrorCode.REBALANCE_IN_PROGRESS;
      default:
        // Heartbeats may start right after the JoinGroup answer, before SyncGroup: they count.
        this.rescheduleHeartbeat(group, group.member(req.memberId)!);
        return ErrorCode.NONE;
    }
  }

  /**
   * LeaveGroup (v3+ batch form; older versions are one member with no instance id). A member given only by
   * its group.instance.id (member id "") is removed administratively.
   */
  leaveGroup(groupId: string, members: readonly MemberIdentity[], nowMs: number): LeaveGroupOutcome & { effects: GroupEffect[] } {
    this.begin();
    if (groupId === "") return { errorCode: ErrorCode.INVALID_GROUP_ID, members: [], effects: this.end() };
    const group = this.groups.get(groupId);
    if (group === undefined) {
      return { errorCode: ErrorCode.NONE, members: members.map((m) => ({ ...m, errorCode: ErrorCode.UNKNOWN_MEMBER_ID })), effects: this.end() };
    }
    if (group.is("Dead")) return { errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, members: [], effects: this.end() };
    const results: LeaveGroupOutcome["members"] = [];
    let anyLeft = false;
    for (const m of members) {
      if (m.memberId === "") {
        const staticId = m.groupInstanceId === null ? undefined : group.staticMemberId(m.groupInstanceId);
        if (staticId !== undefined) {
          this.removeCurrentMember(group, staticId);
          results.push({ ...m, errorCode: ErrorCode.NONE });
          anyLeft = true;
        } else {
          results.push({ ...m, errorCode: ErrorCode.UNKNOWN_MEMBER_ID });
        }
      } else if (group.isPendingMember(m.memberId)) {
        group.remove(m.memberId);
        this.cancel(heartbeatKey(groupId, m.memberId));
        results.push({ ...m, errorCode: ErrorCode.NONE });
        anyLeft = true;
      } else {
        const invalid = validateMember(group, m.memberId, m.groupInstanceId);
        if (invalid === ErrorCode.NONE) {
          this.removeCurrentMember(group, m.memberId);
          anyLeft = true;
        }
        results.push({ ...m, errorCode: invalid });
      }
    }
    if (anyLeft) {
      if (group.is("Stable") || group.is("CompletingRebalance")) this.maybePrepareRebalanceOrCompleteJoin(group, nowMs);
      else if (group.is("PreparingRebalance")) this.maybeCompleteJoinPhase(group, nowMs);
    }
    return { errorCode: ErrorCode.NONE, members: results, effects: this.end() };
  }

  private removeCurrentMember(group: ClassicGroup, memberId: string): void {
    this.cancel(heartbeatKey(group.groupId, memberId));
    this.removeMember(group, memberId);
  }

  /**
   * Removes a member, answering whatever it has parked: a JoinGroup with UNKNOWN_MEMBER_ID (as Apache, so a
   * live consumer rejoins), a SyncGroup too (Apache would leave it unanswered).
   */
  private removeMember(group: ClassicGroup, memberId: string): void {
    const member = group.member(memberId);
    if (member !== undefined) {
      const jw = group.takeJoinWaiter(member);
      if (jw !== null) this.respondJoin(jw, joinError("", ErrorCode.UNKNOWN_MEMBER_ID));
      const sw = group.takeSyncWaiter(member);
      if (sw !== null) this.respondSync(sw, syncError(ErrorCode.UNKNOWN_MEMBER_ID));
    }
    group.remove(memberId);
  }

  // ---- timers ----------------------------------------------------------------------------------

  onTimer(timer: GroupTimer, nowMs: number): GroupEffect[] {
    this.begin();
    const group = this.groups.get(timer.groupId);
    if (group !== undefined) {
      switch (timer.kind) {
        case "heartbeat":
          this.expireHeartbeat(group, timer.memberId, nowMs);
          break;
        case "join":
          this.completeJoin(group, nowMs);
          break;
        case "initial-join":
          this.tryCompleteInitialRebalanceElseSchedule(group, timer.delayMs, timer.remainingMs, nowMs);
          break;
        case "sync":
          this.expirePendingSync(group, timer.generationId, nowMs);
          break;
      }
    }
    return this.end();
  }

  private expireHeartbeat(group: ClassicGroup, memberId: string, nowMs: number): void {
    if (group.is("Dead")) return;
    if (group.isPendingMember(memberId)) {
      group.remove(memberId);
      if (group.is("PreparingRebalance") && group.hasAllMembersJoined()) this.completeJoin(group, nowMs);
      return;
    }
    const member = group.member(memberId);
    if (member === undefined || member.hasSatisfiedHeartbeat()) return;
    this.removeMember(group, memberId);
    if (group.is("Stable") || group.is("CompletingRebalance")) this.maybePrepareRebalanceOrCompleteJoin(group, nowMs);
    else if (group.is("PreparingRebalance") && group.hasAllMembersJoined()) this.completeJoin(group, nowMs);
  }

  private expirePendingSync(group: ClassicGroup, generationId: number, nowMs: number): void {
    if (generationId !== group.generationId) return;
    if (!group.is("CompletingRebalance") && !group.is("Stable")) return;
    if (group.pendingSyncMembers.size === 0) return;
    // Members that got their JoinGroup answer but never synced are gone; the others rebalance without them.
    for (const memberId of [...group.pendingSyncMembers]) {
      this.removeMember(group, memberId);
      this.cancel(heartbeatKey(group.groupId, memberId));
    }
    this.prepareRebalance(group, nowMs);
  }

  private rescheduleHeartbeat(group: ClassicGroup, member: GroupMember): void {
    this.schedule(heartbeatKey(group.groupId, member.memberId), member.sessionTimeoutMs, { kind: "heartbeat", groupId: group.groupId, memberId: member.memberId });
  }

  // ---- offsets: the group checks ---------------------------------------------------------------

  /**
   * The group checks of OffsetCommit (and, with `transactional`, of TxnOffsetCommit). An unknown group is
   * created as a simple group when the commit carries no generation (-1): the admin client or a consumer
   * that assigns partitions itself. A member commit keeps its session alive.
   */
  validateOffsetCommit(
    req: { groupId: string; memberId: string; groupInstanceId: string | null; generationId: number; apiVersion: number; transactional?: boolean },
    nowMs: number,
  ): { errorCode: number; effects: GroupEffect[] } {
    this.begin();
    const transactional = req.transactional ?? false;
    let group = this.groups.get(req.groupId);
    if (group === undefined) {
      if (req.generationId < 0) {
        group = new ClassicGroup(req.groupId, { currentStateTimestampMs: nowMs });
        this.groups.set(req.groupId, group);
        this.persist(group);
      } else {
        // OffsetCommit v9 introduced GROUP_ID_NOT_FOUND; older versions (and TxnOffsetCommit) keep ILLEGAL_GENERATION.
        const errorCode = !transactional && req.apiVersion >= 9 ? ErrorCode.GROUP_ID_NOT_FOUND : ErrorCode.ILLEGAL_GENERATION;
        return { errorCode, effects: this.end() };
      }
    }
    const errorCode = this.groupValidateOffsetCommit(group, req.memberId, req.groupInstanceId, req.generationId, transactional);
    if (errorCode === ErrorCode.NONE && !transactional && (group.is("Stable") || group.is("PreparingRebalance"))) {
      const member = group.member(req.memberId);
      if (member !== undefined) this.rescheduleHeartbeat(group, member);
    }
    return { errorCode, effects: this.end() };
  }

  private groupValidateOffsetCommit(group: ClassicGroup, memberId: string, groupInstanceId: string | null, generationId: number, transactional: boolean): number {
    if (group.is("Dead")) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    // No generation and an Empty group: a commit outside group management, accepted.
    if (generationId < 0 && group.is("Empty")) return ErrorCode.NONE;
    if (generationId >= 0 || memberId !== "" || groupInstanceId !== null) {
      const invalid = validateMember(group, memberId, groupInstanceId);
      if (invalid !== ErrorCode.NONE) return invalid;
      if (generationId !== group.generationId) return ErrorCode.ILLEGAL_GENERATION;
    } else if (!transactional && !group.is("Empty")) {
      // No member id and no generation (OffsetCommit v0) is accepted only while nobody is in the group.
      return ErrorCode.UNKNOWN_MEMBER_ID;
    }
    // The member has this generation from its JoinGroup answer but no assignment yet: let it finish the rebalance.
    if (!transactional && group.is("CompletingRebalance")) return ErrorCode.REBALANCE_IN_PROGRESS;
    return ErrorCode.NONE;
  }

  /**
   * The group checks of OffsetDelete: GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for an
   * active group that does not use the consumer protocol (its subscriptions cannot be known).
   */
  validateOffsetDelete(groupId: string): number {
    if (groupId === "") return ErrorCode.INVALID_GROUP_ID;
    const group = this.groups.get(groupId);
    if (group === undefined || group.is("Dead")) return ErrorCode.GROUP_ID_NOT_FOUND;
    if (!group.is("Empty") && !group.usesConsumerGroupProtocol) return ErrorCode.NON_EMPTY_GROUP;
    return ErrorCode.NONE;
  }

  isSubscribedToTopic(groupId: string, topic: string): boolean {
    return this.groups.get(groupId)?.isSubscribedToTopic(topic) ?? false;
  }

  offsetExpiryView(groupId: string): OffsetExpiryView | undefined {
    const g = this.groups.get(groupId);
    if (g === undefined) return undefined;
    return {
      state: g.state,
      protocolType: g.protocolType,
      currentStateTimestampMs: g.currentStateTimestampMs,
      usesConsumerGroupProtocol: g.usesConsumerGroupProtocol,
      knowsSubscriptions: g.subscribedTopics !== null,
      isSubscribedToTopic: (topic) => g.isSubscribedToTopic(topic),
    };
  }

  // ---- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------------

  describeGroup(groupId: string): DescribedGroup {
    const g = this.groups.get(groupId);
    if (g === undefined) {
      return { groupId, groupState: "Dead", protocolType: "", protocolData: "", members: [], exists: false };
    }
    const stable = g.is("Stable");
    return {
      groupId,
      groupState: g.state,
      protocolType: g.protocolType ?? "",
      // The protocol and the members' metadata are shown only once the group is Stable.
      protocolData: stable ? (g.protocolName ?? "") : "",
      members: [...g.members.values()].map((m) => ({
        memberId: m.memberId,
        groupInstanceId: m.groupInstanceId,
        clientId: m.clientId,
        clientHost: m.clientHost,
        memberMetadata: stable ? m.metadata(g.protocolName ?? "") : EMPTY_ASSIGNMENT,
        memberAssignment: m.assignment,
      })),
      exists: true,
    };
  }

  /**
   * ListGroups. States match case-insensitively (Apache lower-cases and trims the filter), types
   * case-insensitively; the only group type here is "classic", and a types filter without it lists nothing.
   */
  listGroups(statesFilter: readonly string[], typesFilter: readonly string[]): ListedGroup[] {
    const states = new Set(statesFilter.map((s) => s.trim().toLowerCase()));
    const types = new Set(typesFilter.map((t) => t.toLowerCase()));
    const listed: ListedGroup[] = [];
    for (const g of this.groups.values()) {
      if (states.size > 0 && !states.has(g.state.toLowerCase())) continue;
      if (types.size > 0 && !types.has("classic")) continue;
      listed.push({ groupId: g.groupId, protocolType: g.protocolType ?? "", groupState: g.state, groupType: "classic" });
    }
    return listed;
  }

  /** The DeleteGroups check: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or NONE for an Empty group. */
  validateDeleteGroup(groupId: string): number {
    const g = this.groups.get(groupId);
    if (g === undefined || g.is("Dead")) return ErrorCode.GROUP_ID_NOT_FOUND;
    if (!g.is("Empty")) return ErrorCode.NON_EMPTY_GROUP;
    return ErrorCode.NONE;
  }

  /**
   * Removes an Empty group (DeleteGroups after validateDeleteGroup, or expiry after its last offset went):
   * it becomes Dead and is forgotten. Pending members' timers are cancelled. No-op for a non-Empty group.
   */
  deleteGroup(groupId: string, nowMs: number): { deleted: boolean; effects: GroupEffect[] } {
    this.begin();
    const g = this.groups.get(groupId);
    if (g === undefined || !g.is("Empty")) return { deleted: false, effects: this.end() };
    for (const pending of g.pendingJoinMembers) this.cancel(heartbeatKey(groupId, pending));
    g.pendingJoinMembers.clear();
    g.transitionTo("Dead", nowMs);
    this.groups.delete(groupId);
    this.cancel(joinKey(groupId));
    this.cancel(syncKey(groupId));
    return { deleted: true, effects: this.end() };
  }

  /**
   * Answers every parked request with `errorCode` and cancels every timer: the coordinator is going away
   * (Apache answers NOT_COORDINATOR when it unloads a group).
   */
  shutdown(errorCode: number): GroupEffect[] {
    return this.resign(this.groups.keys(), errorCode);
  }

  /**
   * The coordinator stops serving these groups (their slot moves to another broker): every parked
   * JoinGroup and SyncGroup of theirs is answered with `errorCode` and their timers are cancelled, as
   * Apache's onGroupUnloaded answers NOT_COORDINATOR. The groups stay, unchanged, until `forget`, so that
   * record writes already queued still read them.
   */
  resign(groupIds: Iterable<string>, errorCode: number): GroupEffect[] {
    this.begin();
    for (const groupId of groupIds) {
      const g = this.groups.get(groupId);
      if (g === undefined) continue;
      for (const m of g.members.values()) {
        const jw = g.takeJoinWaiter(m);
        if (jw !== null) this.respondJoin(jw, joinError(m.memberId, errorCode));
        const sw = g.takeSyncWaiter(m);
        if (sw !== null) this.respondSync(sw, syncError(errorCode));
        this.cancel(heartbeatKey(g.groupId, m.memberId));
      }
      for (const p of g.pendingJoinMembers) this.cancel(heartbeatKey(g.groupId, p));
      this.cancel(joinKey(g.groupId));
      this.cancel(syncKey(g.groupId));
    }
    return this.end();
  }

  /** Drops groups from memory (after `resign`): another broker coordinates them now. */
  forget(groupIds: Iterable<string>): void {
    for (const groupId of groupIds) this.groups.delete(groupId);
  }

  // ---- effects ---------------------------------------------------------------------------------

  private begin(): void {
    this.effects = [];
  }

  private end(): GroupEffect[] {
    const out = this.effects;
    this.effects = [];
    return out;
  }

  private respondJoin(waiter: Waiter, response: JoinGroupOutcome): void {
    this.effects.push({ kind: "join-response", waiter, response });
  }

  private respondSync(waiter: Waiter, response: SyncGroupOutcome): void {
    this.effects.push({ kind: "sync-response", waiter, response });
  }

  /** A member's JoinGroup replaced by a newer one is answered rather than left hanging. */
  private supersedeJoinWaiter(member: GroupMember): void {
    if (member.awaitingJoin !== null) this.respondJoin(member.awaitingJoin, joinError(member.memberId, ErrorCode.REBALANCE_IN_PROGRESS));
  }

  private schedule(key: string, delayMs: number, timer: GroupTimer): void {
    this.effects.push({ kind: "schedule", key, delayMs, timer });
  }

  private cancel(key: string): void {
    this.effects.push({ kind: "cancel", key });
  }

  private persist(group: ClassicGroup): void {
    this.effects.push({ kind: "persist", groupId: group.groupId });
  }
}

/** Apache's state names, for validating ListGroups filters and persisted records. */
export function isGroupStateName(name: string): name is GroupStateName {
  return (GROUP_STATES as readonly string[]).includes(name);
}
