/**
 * One classic consumer group (the JoinGroup/SyncGroup protocol): its members, generation, selected protocol
 * and state. A data structure with the invariants of Apache Kafka's ClassicGroup; the decisions (who joins,
 * when a rebalance starts or completes, what each request is answered) live in group-coordinator-state.ts.
 *
 * States and the transitions between them (Apache's ClassicGroupState), as one table:
 *
 *   Empty               <- PreparingRebalance
 *   PreparingRebalance  <- Stable, CompletingRebalance, Empty
 *   CompletingRebalance <- PreparingRebalance
 *   Stable              <- CompletingRebalance
 *   Dead                <- every state
 *
 * `transitionTo` refuses anything else: a refused transition is a bug in the caller, never a client error.
 *
 * Parked requests: a member whose JoinGroup (or SyncGroup) is waiting for the rebalance carries an opaque
 * `Waiter` token. Whoever drives the state machine maps tokens to the requests it must answer later.
 */
import { CONSUMER_PROTOCOL_TYPE, subscribedTopicsOf } from "./consumer-protocol.ts";

export type GroupStateName = "Empty" | "PreparingRebalance" | "CompletingRebalance" | "Stable" | "Dead";

export const GROUP_STATES: readonly GroupStateName[] = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"];

const VALID_PREVIOUS_STATES: Record<GroupStateName, readonly GroupStateName[]> = {
  Empty: ["PreparingRebalance"],
  PreparingRebalance: ["Stable", "CompletingRebalance", "Empty"],
  CompletingRebalance: ["PreparingRebalance"],
  Stable: ["CompletingRebalance"],
  Dead: ["Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"],
};

export function isValidTransition(from: GroupStateName, to: GroupStateName): boolean {
  return VALID_PREVIOUS_STATES[to].includes(from);
}

/** A parked request, answered later through an effect naming it. */
export type Waiter = number;

export interface GroupProtocol {
  readonly name: string;
  readonly metadata: Uint8Array;
}

export const EMPTY_ASSIGNMENT: Uint8Array = new Uint8Array(0);

export class GroupMember {
  assignment: Uint8Array = EMPTY_ASSIGNMENT;
  awaitingJoin: Waiter | null = null;
  awaitingSync: Waiter | null = null;
  /** A member added in the current join phase: its session starts only when the phase completes. */
  isNew = false;

  constructor(
    readonly memberId: string,
    readonly groupInstanceId: string | null,
    readonly clientId: string,
    readonly clientHost: string,
    public rebalanceTimeoutMs: number,
    public sessionTimeoutMs: number,
    readonly protocolType: string,
    public protocols: readonly GroupProtocol[],
  ) {}

  get isStatic(): boolean {
    return this.groupInstanceId !== null;
  }

  /** The member's metadata for `protocolName`; empty when it does not support it (a broken invariant upstream). */
  metadata(protocolName: string): Uint8Array {
    return this.protocols.find((p) => p.name === protocolName)?.metadata ?? EMPTY_ASSIGNMENT;
  }

  /** Apache's hasSatisfiedHeartbeat: a parked member is alive, unless it is new in this join phase. */
  hasSatisfiedHeartbeat(): boolean {
    if (this.isNew) return false;
    return this.awaitingJoin !== null || this.awaitingSync !== null;
  }

  /** Same protocols, in the same order, with the same metadata (Apache compares the collections). */
  matches(protocols: readonly GroupProtocol[]): boolean {
    if (protocols.length !== this.protocols.length) return false;
    return protocols.every((p, i) => p.name === this.protocols[i]!.name && bytesEqual(p.metadata, this.protocols[i]!.metadata));
  }

  /** The first of the member's protocols (its preference order) that is a candidate. */
  vote(candidates: ReadonlySet<string>): string {
    const choice = this.protocols.find((p) => candidates.has(p.name));
    if (choice === undefined) throw new Error(`member ${this.memberId} supports none of the candidate protocols`);
    return choice.name;
  }
}

export class ClassicGroup {
  state: GroupStateName;
  previousState: GroupStateName = "Dead";
  /** Wall-clock time of the last transition (Apache's currentStateTimestamp); offsets of an Empty group expire from it. */
  currentStateTimestampMs: number | null;
  protocolType: string | null;
  protocolName: string | null;
  generationId: number;
  leaderId: string | null;
  /** Insertion-ordered: a new leader is the first remaining member. */
  readonly members = new Map<string, GroupMember>();
  /** group.instance.id -> member id. */
  readonly staticMembers = new Map<string, string>();
  /** Member ids handed out with MEMBER_ID_REQUIRED whose second JoinGroup has not arrived yet. */
  readonly pendingJoinMembers = new Set<string>();
  /** Members that got their JoinGroup answer in this generation and have not sent SyncGroup yet. */
  readonly pendingSyncMembers = new Set<string>();
  numMembersAwaitingJoin = 0;
  /** protocol name -> how many members support it. */
  readonly supportedProtocols = new Map<string, number>();
  /** The union of the members' subscriptions (consumer protocol only); null when unknown. */
  subscribedTopics: ReadonlySet<string> | null = null;
  /** Set when a member joins during the initial (delayed) rebalance: the delay is extended. */
  newMemberAdded = false;

  constructor(
    readonly groupId: string,
    init: {
      state?: GroupStateName;
      generationId?: number;
      protocolType?: string | null;
      protocolName?: string | null;
      leaderId?: string | null;
      currentStateTimestampMs: number | null;
    },
  ) {
    this.state = init.state ?? "Empty";
    this.generationId = init.generationId ?? 0;
    this.protocolType = init.protocolType ?? null;
    this.protocolName = init.protocolName ?? null;
    this.leaderId = init.leaderId ?? null;
    this.currentStateTimestampMs = init.currentStateTimestampMs;
    this.subscribedTopics = this.computeSubscribedTopics();
  }

  is(state: GroupStateName): boolean {
    return this.state === state;
  }

  get isEmptyState(): boolean {
    return this.state === "Empty";
  }

  /** A simple group: offsets committed with no group management (no protocol type, nobody joined). */
  get isSimpleGroup(): boolean {
    return this.protocolType === null && this.isEmptyState && this.pendingJoinMembers.size === 0;
  }

  get usesConsumerGroupProtocol(): boolean {
    return this.protocolType === CONSUMER_PROTOCOL_TYPE;
  }

  hasMember(memberId: string): boolean {
    return this.members.has(memberId);
  }

  member(memberId: string): GroupMember | undefined {
    return this.members.get(memberId);
  }

  isLeader(memberId: string): boolean {
    return this.leaderId !== null && this.leaderId === memberId;
  }

  isPendingMember(memberId: string): boolean {
    return this.pendingJoinMembers.has(memberId);
  }

  staticMemberId(groupInstanceId: string): string | undefined {
    return this.staticMembers.get(groupInstanceId);
  }

  /** The largest rebalance timeout of the members: how long a rebalance may wait for them. */
  rebalanceTimeoutMs(): number {
    let max = 0;
    for (const m of this.members.values()) max = Math.max(max, m.rebalanceTimeoutMs);
    return max;
  }

  canRebalance(): boolean {
    return isValidTransition(this.state, "PreparingRebalance");
  }

  transitionTo(target: GroupStateName, nowMs: number): void {
    if (!isValidTransition(this.state, target)) {
      throw new Error(`group ${this.groupId}: invalid transition from ${this.state} to ${target}`);
    }
    this.previousState = this.state;
    this.state = target;
    this.currentStateTimestampMs = nowMs;
  }

  hasAllMembersJoined(): boolean {
    return this.members.size === this.numMembersAwaitingJoin && this.pendingJoinMembers.size === 0;
  }

  /** Adds a member (parked on `waiter` when given). The first member fixes the group's protocol type. */
  add(member: GroupMember, waiter: Waiter | null): void {
    if (member.groupInstanceId !== null) {
      if (this.staticMembers.has(member.groupInstanceId)) {
        throw new Error(`static member ${member.groupInstanceId} is already in group ${this.groupId}`);
      }
      this.staticMembers.set(member.groupInstanceId, member.memberId);
    }
    if (this.members.size === 0) this.protocolType = member.protocolType;
    if (this.protocolType !== member.protocolType) throw new Error(`group ${this.groupId}: protocol type mismatch`);
    if (!this.supportsProtocols(member.protocolType, member.protocols.map((p) => p.name))) {
      throw new Error(`group ${this.groupId}: none of the member's protocols is supported`);
    }
    if (this.leaderId === null) this.leaderId = member.memberId;
    this.members.set(member.memberId, member);
    this.incrementProtocols(member);
    member.awaitingJoin = waiter;
    if (waiter !== null) this.numMembersAwaitingJoin++;
    this.pendingJoinMembers.delete(member.memberId);
  }

  /**
   * Removes a member or pending member. Returns the member removed (with whatever it was parked on, for the
   * caller to answer), or undefined.
   */
  remove(memberId: string): GroupMember | undefined {
    const removed = this.members.get(memberId);
    if (removed !== undefined) {
      this.members.delete(memberId);
      this.decrementProtocols(removed);
      if (removed.awaitingJoin !== null) this.numMembersAwaitingJoin--;
      if (removed.groupInstanceId !== null) this.staticMembers.delete(removed.groupInstanceId);
    }
    if (this.isLeader(memberId)) {
      const next = this.members.keys().next();
      this.leaderId = next.done ? null : next.value;
    }
    this.pendingJoinMembers.delete(memberId);
    this.pendingSyncMembers.delete(memberId);
    return removed;
  }

  addPendingMember(memberId: string): void {
    if (this.hasMember(memberId)) throw new Error(`pending member ${memberId} is already a member of ${this.groupId}`);
    this.pendingJoinMembers.add(memberId);
  }

  /** Updates a member's protocols and timeouts; parks it on `waiter` (or un-parks it with null). */
  updateMember(member: GroupMember, protocols: readonly GroupProtocol[], rebalanceTimeoutMs: number, sessionTimeoutMs: number, waiter: Waiter | null): void {
    this.decrementProtocols(member);
    member.protocols = protocols;
    this.incrementProtocols(member);
    member.rebalanceTimeoutMs = rebalanceTimeoutMs;
    member.sessionTimeoutMs = sessionTimeoutMs;
    if (waiter !== null && member.awaitingJoin === null) this.numMembersAwaitingJoin++;
    else if (waiter === null && member.awaitingJoin !== null) this.numMembersAwaitingJoin--;
    member.awaitingJoin = waiter;
  }

  /** Un-parks a member's JoinGroup; returns the waiter to answer, or null when it was not parked. */
  takeJoinWaiter(member: GroupMember): Waiter | null {
    const waiter = member.awaitingJoin;
    if (waiter === null) return null;
    member.awaitingJoin = null;
    this.numMembersAwaitingJoin--;
    return waiter;
  }

  takeSyncWaiter(member: GroupMember): Waiter | null {
    const waiter = member.awaitingSync;
    member.awaitingSync = null;
    return waiter;
  }

  /**
   * Replaces the member id of a static member (a restarted instance joining with its group.instance.id and
   * no member id). The old member is returned for the caller to fence its parked requests.
   */
  replaceStaticMember(groupInstanceId: string, oldMemberId: string, newMemberId: string): { old: GroupMember; replacement: GroupMember } {
    const old = this.members.get(oldMemberId);
    if (old === undefined) throw new Error(`cannot replace unknown member ${oldMemberId} of ${this.groupId}`);
    this.members.delete(oldMemberId);
    if (old.awaitingJoin !== null) this.numMembersAwaitingJoin--;
    const replacement = new GroupMember(
      newMemberId,
      old.groupInstanceId,
      old.clientId,
      old.clientHost,
      old.rebalanceTimeoutMs,
      old.sessionTimeoutMs,
      old.protocolType,
      old.protocols,
    );
    replacement.assignment = old.assignment;
    this.members.set(newMemberId, replacement);
    if (this.isLeader(oldMemberId)) this.leaderId = newMemberId;
    this.staticMembers.set(groupInstanceId, newMemberId);
    return { old, replacement };
  }

  /**
   * If the leader has not rejoined, the first member that has becomes leader. False when nobody rejoined
   * (the join phase cannot complete yet) or there is no leader at all.
   */
  maybeElectNewJoinedLeader(): boolean {
    if (this.leaderId === null) return false;
    const leader = this.members.get(this.leaderId);
    if (leader !== undefined && leader.awaitingJoin !== null) return true;
    for (const m of this.members.values()) {
      if (m.awaitingJoin !== null) {
        this.leaderId = m.memberId;
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a member with this protocol type and these protocols may join: an Empty group takes any
   * non-empty type with at least one protocol; otherwise the type must match and one of the protocols
   * must be supported by every current member.
   */
  supportsProtocols(protocolType: string, protocolNames: readonly string[]): boolean {
    if (this.isEmptyState) return protocolType.length > 0 && protocolNames.length > 0;
    return this.protocolType === protocolType && protocolNames.some((name) => (this.supportedProtocols.get(name) ?? 0) === this.members.size);
  }

  /** The protocol of the next generation: each member votes for its first candidate; the most votes win. */
  selectProtocol(): string {
    if (this.members.size === 0) throw new Error(`cannot select a protocol for empty group ${this.groupId}`);
    const candidates = new Set<string>();
    for (const [name, count] of this.supportedProtocols) if (count === this.members.size) candidates.add(name);
    const votes = new Map<string, number>();
    for (const m of this.members.values()) {
      const choice = m.vote(candidates);
      votes.set(choice, (votes.get(choice) ?? 0) + 1);
    }
    let best: string | undefined;
    let bestVotes = -1;
    for (const [name, count] of votes) {
      if (count > bestVotes) {
        best = name;
        bestVotes = count;
      }
    }
    return best!;
  }

  /** Next generation: CompletingRebalance with a selected protocol, or Empty when nobody is left. */
  initNextGeneration(nowMs: number): void {
    this.generationId++;
    if (this.members.size > 0) {
      this.protocolName = this.selectProtocol();
      this.subscribedTopics = this.computeSubscribedTopics();
      this.transitionTo("CompletingRebalance", nowMs);
    } else {
      this.protocolName = null;
      this.subscribedTopics = this.computeSubscribedTopics();
      this.transitionTo("Empty", nowMs);
    }
    this.pendingSyncMembers.clear();
  }

  /**
   * The union of the members' subscribed topics, parsed from their metadata for the selected protocol:
   * null for other protocol types or when some metadata does not parse; empty for an Empty consumer group.
   */
  computeSubscribedTopics(): ReadonlySet<string> | null {
    if (this.protocolType !== CONSUMER_PROTOCOL_TYPE) return null;
    if (this.members.size === 0) return new Set();
    if (this.protocolName === null) return null;
    const topics = new Set<string>();
    for (const m of this.members.values()) {
      const subscribed = subscribedTopicsOf(m.metadata(this.protocolName));
      if (subscribed === null) return null;
      for (const t of subscribed) topics.add(t);
    }
    return topics;
  }

  /** When the subscriptions are unknown, a consumer group is taken to be subscribed to everything. */
  isSubscribedToTopic(topic: string): boolean {
    if (this.subscribedTopics !== null) return this.subscribedTopics.has(topic);
    return this.usesConsumerGroupProtocol;
  }

  private incrementProtocols(member: GroupMember): void {
    for (const p of member.protocols) this.supportedProtocols.set(p.name, (this.supportedProtocols.get(p.name) ?? 0) + 1);
  }

  private decrementProtocols(member: GroupMember): void {
    for (const p of member.protocols) this.supportedProtocols.set(p.name, (this.supportedProtocols.get(p.name) ?? 0) - 1);
  }
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
