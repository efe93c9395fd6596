/**
 * A driver for the pure group state machine in unit tests: parked requests by waiter, timers on a manual
 * clock (fired in deadline order when the test advances time), and the groups whose record was persisted.
 */
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";
import type { GroupStateName } from "../../../../src/domain/groups/classic-group.ts";
import {
  GroupCoordinatorState,
  type GroupCoordinatorConfig,
  type GroupEffect,
  type GroupTimer,
  type JoinGroupInput,
  type JoinGroupOutcome,
  type SyncGroupInput,
  type SyncGroupOutcome,
} from "../../../../src/domain/groups/group-coordinator-state.ts";

export const TEST_CONFIG: GroupCoordinatorConfig = {
  initialRebalanceDelayMs: 3000,
  newMemberJoinTimeoutMs: 300_000,
  minSessionTimeoutMs: 6000,
  maxSessionTimeoutMs: 1_800_000,
  maxSize: 100,
};

export { subscription } from "../../../support/consumer-protocol.ts";
import { subscription } from "../../../support/consumer-protocol.ts";

export interface Pending<T> {
  waiter: number;
  /** The answer, once given. */
  readonly answer: T | undefined;
}

export class GroupHarness {
  nowMs = 1_700_000_000_000;
  readonly sm: GroupCoordinatorState;
  readonly timers = new Map<string, { at: number; seq: number; timer: GroupTimer }>();
  readonly joins = new Map<number, JoinGroupOutcome>();
  readonly syncs = new Map<number, SyncGroupOutcome>();
  /** Every join/sync answer given, in order. */
  readonly answers: { waiter: number; kind: "join" | "sync"; errorCode: number }[] = [];
  readonly persisted: string[] = [];
  private nextWaiter = 1;
  private nextUuid = 1;
  private timerSeq = 0;

  constructor(config: Partial<GroupCoordinatorConfig> = {}) {
    this.sm = new GroupCoordinatorState({ ...TEST_CONFIG, ...config }, () => `uuid${this.nextUuid++}`);
  }

  apply(effects: readonly GroupEffect[]): void {
    for (const e of effects) {
      switch (e.kind) {
        case "join-response":
          if (this.joins.has(e.waiter)) throw new Error(`join waiter ${e.waiter} answered twice`);
          this.joins.set(e.waiter, e.response);
          this.answers.push({ waiter: e.waiter, kind: "join", errorCode: e.response.errorCode });
          break;
        case "sync-response":
          if (this.syncs.has(e.waiter)) throw new Error(`sync waiter ${e.waiter} answered twice`);
          this.syncs.set(e.waiter, e.response);
          this.answers.push({ waiter: e.waiter, kind: "sync", errorCode: e.response.errorCode });
          break;
        case "schedule":
          this.timers.set(e.key, { at: this.nowMs + e.delayMs, seq: this.timerSeq++, timer: e.timer });
          break;
        case "cancel":
          this.timers.delete(e.key);
          break;
        case "persist":
          this.persisted.push(e.groupId);
          break;
      }
    }
  }

  join(input: Partial<JoinGroupInput> & { groupId?: string }): Pending<JoinGroupOutcome> {
    const waiter = this.nextWaiter++;
    const full: JoinGroupInput = {
      groupId: "g",
      memberId: "",
      groupInstanceId: null,
      protocolType: "consumer",
      protocols: [{ name: "range", metadata: subscription(["t"]) }],
      sessionTimeoutMs: 10_000,
      rebalanceTimeoutMs: 60_000,
      clientId: "client",
      clientHost: "/127.0.0.1",
      apiVersion: 9,
      ...input,
    };
    this.apply(this.sm.joinGroup(full, waiter, this.nowMs));
    const joins = this.joins;
    return {
      waiter,
      get answer() {
        return joins.get(waiter);
      },
    };
  }

  /** Joins with v4+ semantics: MEMBER_ID_REQUIRED, then the rejoin with the id, which is parked or answered. */
  joinNew(input: Partial<JoinGroupInput> = {}): { memberId: string; pending: Pending<JoinGroupOutcome> } {
    if (input.groupInstanceId) {
      const pending = this.join(input);
      return { memberId: "", pending };
    }
    const first = this.join(input).answer!;
    if (first.errorCode !== ErrorCode.MEMBER_ID_REQUIRED) throw new Error(`expected MEMBER_ID_REQUIRED, got ${first.errorCode}`);
    return { memberId: first.memberId, pending: this.join({ ...input, memberId: first.memberId }) };
  }

  sync(input: Partial<SyncGroupInput> & { memberId: string; generationId: number }): Pending<SyncGroupOutcome> {
    const waiter = this.nextWaiter++;
    const full: SyncGroupInput = { groupId: "g", groupInstanceId: null, protocolType: null, protocolName: null, assignments: [], ...input };
    this.apply(this.sm.syncGroup(full, waiter, this.nowMs));
    const syncs = this.syncs;
    return {
      waiter,
      get answer() {
        return syncs.get(waiter);
      },
    };
  }

  heartbeat(memberId: string, generationId: number, groupId = "g", groupInstanceId: string | null = null): number {
    const { errorCode, effects } = this.sm.heartbeat({ groupId, memberId, generationId, groupInstanceId }, this.nowMs);
    this.apply(effects);
    return errorCode;
  }

  leave(members: { memberId: string; groupInstanceId?: string | null }[], groupId = "g") {
    const { effects, ...outcome } = this.sm.leaveGroup(groupId, members.map((m) => ({ memberId: m.memberId, groupInstanceId: m.groupInstanceId ?? null })), this.nowMs);
    this.apply(effects);
    return outcome;
  }

  /** Moves time forward, firing due timers in deadline order (timers they schedule fire too if due). */
  advance(ms: number): void {
    const target = this.nowMs + ms;
    for (;;) {
      let next: [string, { at: number; seq: number; timer: GroupTimer }] | undefined;
      for (const entry of this.timers) {
        if (entry[1].at > target) continue;
        if (next === undefined || entry[1].at < next[1].at || (entry[1].at === next[1].at && entry[1].seq < next[1].seq)) next = entry;
      }
      if (next === undefined) break;
      this.timers.delete(next[0]);
      this.nowMs = Math.max(this.nowMs, next[1].at);
      this.apply(this.sm.onTimer(next[1].timer, this.nowMs));
    }
    this.nowMs = target;
  }

  state(groupId = "g"): GroupStateName | undefined {
    return this.sm.peek(groupId)?.state;
  }

  generation(groupId = "g"): number | undefined {
    return this.sm.peek(groupId)?.generationId;
  }

  /** Brings a group of dynamic members to Stable: joins them all, waits out the initial delay, syncs. */
  stableGroup(count: number, input: Partial<JoinGroupInput> = {}): { members: string[]; leader: string; generationId: number } {
    const joined = Array.from({ length: count }, () => this.joinNew(input));
    this.advance(this.sm.config.initialRebalanceDelayMs * (count + 1));
    const answers = joined.map((j) => j.pending.answer!);
    if (answers.some((a) => a === undefined || a.errorCode !== 0)) throw new Error(`join failed: ${JSON.stringify(answers)}`);
    const leader = answers[0]!.leader;
    const generationId = answers[0]!.generationId;
    const members = joined.map((j) => j.memberId);
    for (const m of members) {
      this.sync({
        groupId: input.groupId ?? "g",
        memberId: m,
        generationId,
        assignments: m === leader ? members.map((id) => ({ memberId: id, assignment: new TextEncoder().encode(`a-${id}`) })) : [],
      });
    }
    return { members, leader, generationId };
  }
}
