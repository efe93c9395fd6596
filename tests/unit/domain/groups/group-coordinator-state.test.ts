/**
 * The classic group state machine, transition by transition: every state change it makes and every error
 * it answers, against Apache Kafka's GroupMetadataManager / ClassicGroup behaviour.
 */
import { describe, expect, test } from "bun:test";
import { ClassicGroup, GROUP_STATES, isValidTransition, type GroupStateName } from "../../../../src/domain/groups/classic-group.ts";
import { heartbeatKey, joinKey, syncKey } from "../../../../src/domain/groups/group-coordinator-state.ts";
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";
import { GroupHarness, subscription } from "./support.ts";

describe("the state table", () => {
  const allowed: Record<GroupStateName, GroupStateName[]> = {
    Empty: ["PreparingRebalance"],
    PreparingRebalance: ["Stable", "CompletingRebalance", "Empty"],
    CompletingRebalance: ["PreparingRebalance"],
    Stable: ["CompletingRebalance"],
    Dead: ["Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"],
  };

  test("every pair of states: allowed exactly as Apache's ClassicGroupState", () => {
    for (const to of GROUP_STATES) {
      for (const from of GROUP_STATES) {
        expect(isValidTransition(from, to)).toBe(allowed[to].includes(from));
      }
    }
  });

  test("transitionTo refuses an invalid transition and records the previous state and time", () => {
    const g = new ClassicGroup("g", { currentStateTimestampMs: 1 });
    expect(() => g.transitionTo("Stable", 2)).toThrow(/invalid transition from Empty to Stable/);
    expect(() => g.transitionTo("CompletingRebalance", 2)).toThrow();
    g.transitionTo("PreparingRebalance", 5);
    expect(g.state).toBe("PreparingRebalance");
    expect(g.previousState).toBe("Empty");
    expect(g.currentStateTimestampMs).toBe(5);
    expect(() => g.transitionTo("Stable", 6)).toThrow();
    g.transitionTo("Dead", 7);
    expect(() => g.transitionTo("Empty", 8)).toThrow();
  });
});

describe("JoinGroup", () => {
  test("v4+: a first join without member id is MEMBER_ID_REQUIRED with a generated id; the group is created Empty", () => {
    const h = new GroupHarness();
    const first = h.join({ clientId: "c1" }).answer!;
    expect(first.errorCode).toBe(ErrorCode.MEMBER_ID_REQUIRED);
    expect(first.memberId).toBe("c1-uuid1");
    expect(first.generationId).toBe(-1);
    expect(h.state()).toBe("Empty");
    expect(h.sm.peek("g")!.isPendingMember("c1-uuid1")).toBe(true);
    expect(h.persisted).toEqual(["g"]);
    // The pending member expires after its session timeout unless it rejoins.
    expect(h.timers.get(heartbeatKey("g", "c1-uuid1"))!.at).toBe(h.nowMs + 10_000);
    h.advance(10_000);
    expect(h.sm.peek("g")!.isPendingMember("c1-uuid1")).toBe(false);
  });

  test("the rejoin with the id is parked; the initial rebalance completes after the delay: generation 1, leader gets the members", () => {
    const h = new GroupHarness();
    const { memberId, pending } = h.joinNew();
    expect(pending.answer).toBeUndefined();
    expect(h.state()).toBe("PreparingRebalance");
    h.advance(2999);
    expect(pending.answer).toBeUndefined();
    h.advance(1);
    const answer = pending.answer!;
    expect(answer.errorCode).toBe(ErrorCode.NONE);
    expect(answer.generationId).toBe(1);
    expect(answer.leader).toBe(memberId);
    expect(answer.protocolType).toBe("consumer");
    expect(answer.protocolName).toBe("range");
    expect(answer.members.map((m) => m.memberId)).toEqual([memberId]);
    expect(h.state()).toBe("CompletingRebalance");
    expect(h.timers.has(syncKey("g"))).toBe(true);
  });

  test("v0-v3: a new member is added at once, without MEMBER_ID_REQUIRED", () => {
    const h = new GroupHarness({ initialRebalanceDelayMs: 0 });
    const p = h.join({ apiVersion: 3 });
    expect(p.answer).toBeUndefined();
    h.advance(0);
    expect(p.answer!.errorCode).toBe(ErrorCode.NONE);
    expect(p.answer!.memberId).toBe("client-uuid1");
  });

  test("invalid group id and session timeouts outside [min, max]", () => {
    const h = new GroupHarness();
    expect(h.join({ groupId: "" }).answer!.errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    expect(h.join({ sessionTimeoutMs: 5999 }).answer!.errorCode).toBe(ErrorCode.INVALID_SESSION_TIMEOUT);
    expect(h.join({ sessionTimeoutMs: 1_800_001 }).answer!.errorCode).toBe(ErrorCode.INVALID_SESSION_TIMEOUT);
    expect(h.sm.hasGroup("g")).toBe(false);
  });

  test("a member id for an unknown group is UNKNOWN_MEMBER_ID and creates nothing", () => {
    const h = new GroupHarness();
    const a = h.join({ memberId: "stale" }).answer!;
    expect(a.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(a.memberId).toBe("stale");
    expect(h.sm.hasGroup("g")).toBe(false);
  });

  test("INCONSISTENT_GROUP_PROTOCOL: empty protocol type or no protocols for an Empty group, another type or no common protocol later", () => {
    const h = new GroupHarness();
    expect(h.join({ protocolType: "" }).answer!.errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    expect(h.join({ protocols: [] }).answer!.errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    h.stableGroup(1);
    expect(h.join({ protocolType: "connect" }).answer!.errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    expect(h.join({ protocols: [{ name: "roundrobin", metadata: new Uint8Array() }] }).answer!.errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    expect(h.join({ protocols: [{ name: "roundrobin", metadata: new Uint8Array() }, { name: "range", metadata: new Uint8Array() }] }).answer!.errorCode).toBe(
      ErrorCode.MEMBER_ID_REQUIRED,
    );
  });

  test("the initial delay is extended while members keep joining, up to the rebalance timeout", () => {
    const h = new GroupHarness({ initialRebalanceDelayMs: 3000 });
    const joined = [h.joinNew({ rebalanceTimeoutMs: 10_000 })];
    // A member joins every 2.5 s: each expiry finds a new member and waits another delay.
    for (let i = 0; i < 3; i++) {
      h.advance(2500);
      joined.push(h.joinNew({ rebalanceTimeoutMs: 10_000 }));
    }
    // Delays: 3000 (then +3000 at 3 s), (+3000 at 6 s), then min(3000, remaining 1000) at 9 s: it ends at 10 s,
    // the rebalance timeout, however many more members come.
    h.advance(2499);
    expect(joined.every((j) => j.pending.answer === undefined)).toBe(true);
    expect(h.state()).toBe("PreparingRebalance");
    h.advance(1);
    expect(joined.every((j) => j.pending.answer!.generationId === 1)).toBe(true);
    expect(joined[0]!.pending.answer!.members.length).toBe(4);
    expect(h.state()).toBe("CompletingRebalance");
  });

  test("without new members the initial rebalance completes after one delay", () => {
    const h = new GroupHarness({ initialRebalanceDelayMs: 3000 });
    const a = h.joinNew();
    const b = h.joinNew();
    h.advance(3000);
    // b joined during the delay, so one more delay.
    expect(a.pending.answer).toBeUndefined();
    h.advance(3000);
    expect(a.pending.answer!.members.length).toBe(2);
    expect(b.pending.answer!.members).toEqual([]);
    expect(b.pending.answer!.leader).toBe(a.memberId);
  });

  test("GROUP_MAX_SIZE_REACHED beyond group.max.size", () => {
    const h = new GroupHarness({ maxSize: 2, initialRebalanceDelayMs: 0 });
    h.stableGroup(2);
    const third = h.join({}).answer!;
    expect(third.errorCode).toBe(ErrorCode.GROUP_MAX_SIZE_REACHED);
    expect(third.memberId).toBe("");
  });

  test("a pending member rejoining with an instance id is refused (Apache: IllegalStateException)", () => {
    const h = new GroupHarness();
    const first = h.join({}).answer!;
    expect(h.join({ memberId: first.memberId, groupInstanceId: "i" }).answer!.errorCode).toBe(ErrorCode.UNKNOWN_SERVER_ERROR);
  });
});

describe("SyncGroup and the Stable group", () => {
  test("followers wait for the leader; the leader's assignment makes the group Stable and answers everyone", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    const b = h.joinNew();
    h.advance(6000);
    const gen = a.pending.answer!.generationId;
    const leader = a.pending.answer!.leader;
    const follower = leader === a.memberId ? b.memberId : a.memberId;
    const followerSync = h.sync({ memberId: follower, generationId: gen });
    expect(followerSync.answer).toBeUndefined();
    const leaderSync = h.sync({
      memberId: leader,
      generationId: gen,
      assignments: [{ memberId: follower, assignment: new Uint8Array([1, 2]) }],
    });
    expect(h.state()).toBe("Stable");
    expect(followerSync.answer).toEqual({ errorCode: 0, protocolType: "consumer", protocolName: "range", assignment: new Uint8Array([1, 2]) });
    // The leader gave itself nothing: an empty assignment.
    expect(leaderSync.answer!.assignment).toEqual(new Uint8Array());
    expect(h.timers.has(syncKey("g"))).toBe(false);
    // A late SyncGroup in Stable gets the current assignment at once.
    expect(h.sync({ memberId: follower, generationId: gen }).answer!.assignment).toEqual(new Uint8Array([1, 2]));
  });

  test("errors: unknown group, Empty group, unknown member, wrong generation, inconsistent protocol, rebalance in progress", () => {
    const h = new GroupHarness();
    expect(h.sync({ memberId: "m", generationId: 1, groupId: "nope" }).answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(h.sync({ memberId: "m", generationId: 1, groupId: "" }).answer!.errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    h.join({});
    expect(h.sync({ memberId: "m", generationId: 0 }).answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID); // Empty
    const { members, generationId } = h.stableGroup(2);
    expect(h.sync({ memberId: "ghost", generationId }).answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(h.sync({ memberId: members[0]!, generationId: generationId + 1 }).answer!.errorCode).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(h.sync({ memberId: members[0]!, generationId, protocolType: "connect", protocolName: "range" }).answer!.errorCode).toBe(
      ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    );
    expect(h.sync({ memberId: members[0]!, generationId, protocolType: "consumer", protocolName: "roundrobin" }).answer!.errorCode).toBe(
      ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    );
    expect(h.sync({ memberId: members[0]!, generationId, protocolType: "consumer", protocolName: "range" }).answer!.errorCode).toBe(ErrorCode.NONE);
    // A new member makes the group rebalance: SyncGroup is then REBALANCE_IN_PROGRESS.
    h.joinNew();
    expect(h.state()).toBe("PreparingRebalance");
    expect(h.sync({ memberId: members[0]!, generationId }).answer!.errorCode).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
  });

  test("a parked SyncGroup is answered REBALANCE_IN_PROGRESS when a rebalance starts before the leader syncs", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    const b = h.joinNew();
    h.advance(6000);
    const gen = a.pending.answer!.generationId;
    const follower = a.pending.answer!.leader === a.memberId ? b.memberId : a.memberId;
    const parked = h.sync({ memberId: follower, generationId: gen });
    h.joinNew();
    expect(parked.answer!.errorCode).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    expect(parked.answer!.protocolName).toBeNull();
  });

  test("a member that does not sync within the rebalance timeout is removed and the group rebalances", () => {
    const h = new GroupHarness();
    const a = h.joinNew({ rebalanceTimeoutMs: 20_000 });
    const b = h.joinNew({ rebalanceTimeoutMs: 20_000 });
    h.advance(6000);
    const gen = a.pending.answer!.generationId;
    const leader = a.pending.answer!.leader;
    const follower = leader === a.memberId ? b.memberId : a.memberId;
    // Heartbeats keep both sessions alive; only the follower syncs.
    const parked = h.sync({ memberId: follower, generationId: gen });
    for (let i = 0; i < 3; i++) {
      h.advance(5000);
      expect(h.heartbeat(leader, gen)).toBe(ErrorCode.NONE);
    }
    expect(h.state()).toBe("CompletingRebalance");
    h.advance(5000);
    expect(h.sm.peek("g")!.hasMember(leader)).toBe(false);
    expect(h.state()).toBe("PreparingRebalance");
    expect(parked.answer!.errorCode).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
  });
});

describe("Heartbeat and session timeouts", () => {
  test("answers by state, and the errors of Apache", () => {
    const h = new GroupHarness();
    expect(h.heartbeat("m", 0, "")).toBe(ErrorCode.INVALID_GROUP_ID);
    expect(h.heartbeat("m", 0, "nope")).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    const { members, generationId } = h.stableGroup(2);
    expect(h.heartbeat(members[0]!, generationId)).toBe(ErrorCode.NONE);
    expect(h.heartbeat("ghost", generationId)).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(h.heartbeat(members[0]!, generationId - 1)).toBe(ErrorCode.ILLEGAL_GENERATION);
    h.joinNew();
    expect(h.heartbeat(members[0]!, generationId)).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
  });

  test("heartbeats during CompletingRebalance count", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    h.advance(3000);
    expect(h.state()).toBe("CompletingRebalance");
    expect(h.heartbeat(a.memberId, 1)).toBe(ErrorCode.NONE);
  });

  test("a member that stops heartbeating is removed after its session timeout; the others must rejoin", () => {
    const h = new GroupHarness();
    const { members, generationId } = h.stableGroup(2);
    const [alive, dead] = members as [string, string];
    // Both sessions start now; then only `alive` keeps heartbeating.
    expect(h.heartbeat(alive, generationId)).toBe(ErrorCode.NONE);
    expect(h.heartbeat(dead, generationId)).toBe(ErrorCode.NONE);
    for (let i = 0; i < 3; i++) {
      h.advance(4000);
      expect(h.heartbeat(alive, generationId)).toBe(i < 2 ? ErrorCode.NONE : ErrorCode.REBALANCE_IN_PROGRESS);
    }
    expect(h.sm.peek("g")!.hasMember(dead)).toBe(false);
    expect(h.state()).toBe("PreparingRebalance");
    const rejoin = h.join({ memberId: alive });
    // The only remaining member rejoined: the join phase completes at once, with the next generation.
    expect(rejoin.answer!.generationId).toBe(generationId + 1);
    expect(rejoin.answer!.members.map((m) => m.memberId)).toEqual([alive]);
  });

  test("a member that does not rejoin within the rebalance timeout is removed when the join phase ends", () => {
    const h = new GroupHarness();
    const { members, generationId } = h.stableGroup(2, { rebalanceTimeoutMs: 30_000 });
    const [stays, leaves] = members as [string, string];
    const rejoin = h.join({ memberId: stays, rebalanceTimeoutMs: 30_000 });
    // A rejoin in Stable: the leader triggers a rebalance; a follower with the same metadata just gets the generation.
    if (rejoin.answer !== undefined) {
      expect(rejoin.answer.generationId).toBe(generationId);
      return;
    }
    expect(h.state()).toBe("PreparingRebalance");
    // `leaves` keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins.
    for (let t = 0; t < 30_000; t += 5000) {
      h.advance(5000);
      if (h.state() === "PreparingRebalance") expect(h.heartbeat(leaves, generationId)).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    }
    expect(rejoin.answer!.generationId).toBe(generationId + 1);
    expect(h.sm.peek("g")!.hasMember(leaves)).toBe(false);
  });

  test("a new member's parked JoinGroup times out after the new-member join timeout with UNKNOWN_MEMBER_ID", () => {
    const h = new GroupHarness({ newMemberJoinTimeoutMs: 50_000 });
    const { members, generationId } = h.stableGroup(1, { rebalanceTimeoutMs: 300_000, sessionTimeoutMs: 100_000 });
    // The old member triggers nothing; a new member parks while the old one never rejoins.
    const newcomer = h.joinNew({ rebalanceTimeoutMs: 300_000, sessionTimeoutMs: 100_000 });
    expect(newcomer.pending.answer).toBeUndefined();
    h.advance(49_999);
    expect(h.heartbeat(members[0]!, generationId)).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    h.advance(1);
    expect(newcomer.pending.answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(newcomer.pending.answer!.memberId).toBe("");
  });
});

describe("rejoining members", () => {
  test("the leader rejoining a Stable group forces a rebalance; a follower with the same metadata gets the current generation", () => {
    const h = new GroupHarness();
    const { members, leader, generationId } = h.stableGroup(2);
    const follower = members.find((m) => m !== leader)!;
    const same = h.join({ memberId: follower });
    expect(same.answer!.generationId).toBe(generationId);
    expect(same.answer!.members).toEqual([]);
    expect(h.state()).toBe("Stable");
    const leaderRejoin = h.join({ memberId: leader });
    expect(leaderRejoin.answer).toBeUndefined();
    expect(h.state()).toBe("PreparingRebalance");
  });

  test("a follower with changed metadata forces a rebalance", () => {
    const h = new GroupHarness();
    const { members, leader } = h.stableGroup(2);
    const follower = members.find((m) => m !== leader)!;
    h.join({ memberId: follower, protocols: [{ name: "range", metadata: subscription(["t", "u"]) }] });
    expect(h.state()).toBe("PreparingRebalance");
  });

  test("a rejoin during CompletingRebalance with the same metadata is answered with the current generation", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    h.advance(3000);
    const again = h.join({ memberId: a.memberId });
    expect(again.answer!.generationId).toBe(1);
    expect(again.answer!.members.length).toBe(1); // the leader gets the members again
    expect(h.state()).toBe("CompletingRebalance");
  });

  test("a second JoinGroup of a parked member supersedes the first, which is answered REBALANCE_IN_PROGRESS", () => {
    const h = new GroupHarness();
    const { members } = h.stableGroup(2);
    const first = h.join({ memberId: members[0]! });
    const second = h.join({ memberId: members[0]! });
    expect(first.answer!.errorCode).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    expect(second.answer).toBeUndefined();
    expect(h.sm.peek("g")!.numMembersAwaitingJoin).toBe(1);
  });
});

describe("LeaveGroup", () => {
  test("leaving members make the group rebalance; the last one leaving makes it Empty with a new generation", () => {
    const h = new GroupHarness();
    const { members, generationId } = h.stableGroup(2);
    const out = h.leave([{ memberId: members[0]! }]);
    expect(out).toEqual({ errorCode: 0, members: [{ memberId: members[0]!, groupInstanceId: null, errorCode: 0 }] });
    expect(h.state()).toBe("PreparingRebalance");
    h.persisted.length = 0;
    h.leave([{ memberId: members[1]! }]);
    expect(h.state()).toBe("Empty");
    expect(h.generation()).toBe(generationId + 1);
    expect(h.persisted).toEqual(["g"]);
    expect(h.sm.persistedRecord("g")).toMatchObject({ state: "Empty", generationId: generationId + 1, protocolType: "consumer", protocolName: null });
  });

  test("per-member errors, pending members, unknown groups", () => {
    const h = new GroupHarness();
    expect(h.leave([{ memberId: "m" }], "")).toEqual({ errorCode: ErrorCode.INVALID_GROUP_ID, members: [] });
    expect(h.leave([{ memberId: "m" }], "nope").members[0]!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    const pending = h.join({}).answer!.memberId;
    expect(h.leave([{ memberId: pending }]).members[0]!.errorCode).toBe(ErrorCode.NONE);
    expect(h.sm.peek("g")!.isPendingMember(pending)).toBe(false);
    expect(h.timers.has(heartbeatKey("g", pending))).toBe(false);
    expect(h.leave([{ memberId: "ghost" }, { memberId: "", groupInstanceId: "nobody" }]).members.map((m) => m.errorCode)).toEqual([
      ErrorCode.UNKNOWN_MEMBER_ID,
      ErrorCode.UNKNOWN_MEMBER_ID,
    ]);
  });

  test("a member leaving while parked in JoinGroup has that JoinGroup answered UNKNOWN_MEMBER_ID", () => {
    const h = new GroupHarness();
    const { members } = h.stableGroup(2);
    const parked = h.join({ memberId: members[0]! });
    if (parked.answer !== undefined) return; // a follower's same-metadata rejoin is answered at once
    h.leave([{ memberId: members[0]! }]);
    expect(parked.answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
  });

  test("a member leaving while parked in SyncGroup has that SyncGroup answered (Apache leaves it hanging)", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    const b = h.joinNew();
    h.advance(6000);
    const follower = a.pending.answer!.leader === a.memberId ? b.memberId : a.memberId;
    const parked = h.sync({ memberId: follower, generationId: 1 });
    h.leave([{ memberId: follower }]);
    expect(parked.answer!.errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
  });
});

describe("static membership", () => {
  function stableStatic(h: GroupHarness) {
    const a = h.join({ groupInstanceId: "ia", clientId: "ca" });
    const b = h.join({ groupInstanceId: "ib", clientId: "cb" });
    h.advance(6000);
    const gen = a.answer!.generationId;
    const leader = a.answer!.leader;
    for (const m of [a.answer!.memberId, b.answer!.memberId]) h.sync({ memberId: m, generationId: gen, groupInstanceId: m === a.answer!.memberId ? "ia" : "ib" });
    expect(h.state()).toBe("Stable");
    return { a: a.answer!.memberId, b: b.answer!.memberId, gen, leader };
  }

  test("static members join without MEMBER_ID_REQUIRED; their member id starts with the instance id", () => {
    const h = new GroupHarness();
    const { a, b } = stableStatic(h);
    expect(a.startsWith("ia-")).toBe(true);
    expect(b.startsWith("ib-")).toBe(true);
  });

  test("a restarted static member takes over without a rebalance; the old member id is fenced", () => {
    const h = new GroupHarness();
    const { a, b, gen } = stableStatic(h);
    const follower = h.sm.peek("g")!.isLeader(a) ? b : a;
    const instance = follower === a ? "ia" : "ib";
    const again = h.join({ groupInstanceId: instance, apiVersion: 8 });
    expect(again.answer!.errorCode).toBe(ErrorCode.NONE);
    expect(again.answer!.generationId).toBe(gen);
    expect(again.answer!.memberId).not.toBe(follower);
    expect(h.state()).toBe("Stable");
    expect(h.heartbeat(follower, gen, "g", instance)).toBe(ErrorCode.FENCED_INSTANCE_ID);
    expect(h.heartbeat(again.answer!.memberId, gen, "g", instance)).toBe(ErrorCode.NONE);
    // The new incarnation inherits the assignment.
    expect(h.sync({ memberId: again.answer!.memberId, generationId: gen, groupInstanceId: instance }).answer!.errorCode).toBe(ErrorCode.NONE);
    // A heartbeat without the instance id for the old member id is simply unknown.
    expect(h.heartbeat(follower, gen)).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
  });

  test("v9: the static leader rejoining gets the members and SkipAssignment", () => {
    const h = new GroupHarness();
    const { leader, gen } = stableStatic(h);
    const instance = leader.startsWith("ia-") ? "ia" : "ib";
    const again = h.join({ groupInstanceId: instance, apiVersion: 9 });
    expect(again.answer!.skipAssignment).toBe(true);
    expect(again.answer!.members.length).toBe(2);
    expect(again.answer!.leader).toBe(again.answer!.memberId);
    expect(again.answer!.generationId).toBe(gen);
  });

  test("a static member whose old incarnation is parked fences it with FENCED_INSTANCE_ID", () => {
    const h = new GroupHarness();
    const { a } = stableStatic(h);
    const parked = h.join({ memberId: a, groupInstanceId: "ia", protocols: [{ name: "range", metadata: subscription(["x"]) }] });
    expect(parked.answer).toBeUndefined();
    h.join({ groupInstanceId: "ia" });
    expect(parked.answer!.errorCode).toBe(ErrorCode.FENCED_INSTANCE_ID);
  });

  test("static members are not removed by the rebalance timeout, and can be removed by instance id", () => {
    const h = new GroupHarness();
    const { a, b, gen } = stableStatic(h);
    const rejoinA = h.join({ memberId: a, groupInstanceId: "ia", protocols: [{ name: "range", metadata: subscription(["x"]) }] });
    expect(h.state()).toBe("PreparingRebalance");
    // b keeps its session alive (REBALANCE_IN_PROGRESS) but does not rejoin.
    for (let t = 0; t < 60_000; t += 5000) {
      expect(h.heartbeat(b, gen, "g", "ib")).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
      h.advance(5000);
    }
    // b did not rejoin, but static members stay: a gets generation gen+1 with b still listed.
    expect(rejoinA.answer!.generationId).toBe(gen + 1);
    expect(h.sm.peek("g")!.hasMember(b)).toBe(true);
    expect(h.leave([{ memberId: "", groupInstanceId: "ib" }]).members[0]!.errorCode).toBe(ErrorCode.NONE);
    expect(h.sm.peek("g")!.hasMember(b)).toBe(false);
    // A member id that does not match the instance's is fenced.
    expect(h.leave([{ memberId: "other", groupInstanceId: "ia" }]).members[0]!.errorCode).toBe(ErrorCode.FENCED_INSTANCE_ID);
  });
});

describe("offset commit checks", () => {
  const commit = (h: GroupHarness, req: { groupId?: string; memberId?: string; groupInstanceId?: string | null; generationId?: number; apiVersion?: number; transactional?: boolean }) => {
    const { errorCode, effects } = h.sm.validateOffsetCommit(
      { groupId: "g", memberId: "", groupInstanceId: null, generationId: -1, apiVersion: 8, ...req },
      h.nowMs,
    );
    h.apply(effects);
    return errorCode;
  };

  test("a simple commit (generation -1) creates an unknown group as a simple Empty group", () => {
    const h = new GroupHarness();
    expect(commit(h, {})).toBe(ErrorCode.NONE);
    expect(h.state()).toBe("Empty");
    expect(h.sm.peek("g")!.isSimpleGroup).toBe(true);
    expect(h.persisted).toEqual(["g"]);
  });

  test("a generation for an unknown group: ILLEGAL_GENERATION up to v8, GROUP_ID_NOT_FOUND from v9", () => {
    const h = new GroupHarness();
    expect(commit(h, { generationId: 1, memberId: "m", apiVersion: 8 })).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(commit(h, { generationId: 1, memberId: "m", apiVersion: 9 })).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    expect(commit(h, { generationId: 1, memberId: "m", apiVersion: 9, transactional: true })).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(h.sm.hasGroup("g")).toBe(false);
  });

  test("member commits need the member and the generation; a simple commit needs an Empty group", () => {
    const h = new GroupHarness();
    const { members, generationId } = h.stableGroup(2);
    expect(commit(h, { memberId: members[0]!, generationId })).toBe(ErrorCode.NONE);
    expect(commit(h, { memberId: members[0]!, generationId: generationId + 1 })).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(commit(h, { memberId: "ghost", generationId })).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(commit(h, {})).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(commit(h, { memberId: members[0]!, generationId, groupInstanceId: "x" })).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    // Transactional commits without member and generation are accepted (old TxnOffsetCommit versions).
    expect(commit(h, { transactional: true })).toBe(ErrorCode.NONE);
  });

  test("a commit keeps the member's session alive (Stable and PreparingRebalance)", () => {
    const h = new GroupHarness();
    const { members, generationId } = h.stableGroup(1);
    h.advance(9000);
    expect(commit(h, { memberId: members[0]!, generationId })).toBe(ErrorCode.NONE);
    h.advance(9000);
    expect(h.sm.peek("g")!.hasMember(members[0]!)).toBe(true);
  });

  test("REBALANCE_IN_PROGRESS while the group completes a rebalance (not for transactional commits)", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    h.advance(3000);
    expect(h.state()).toBe("CompletingRebalance");
    expect(commit(h, { memberId: a.memberId, generationId: 1 })).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    expect(commit(h, { memberId: a.memberId, generationId: 1, transactional: true })).toBe(ErrorCode.NONE);
  });
});

describe("DescribeGroups, ListGroups, DeleteGroups, OffsetDelete checks", () => {
  test("describe: unknown is Dead; metadata and protocol only when Stable", () => {
    const h = new GroupHarness();
    expect(h.sm.describeGroup("nope")).toEqual({ groupId: "nope", groupState: "Dead", protocolType: "", protocolData: "", members: [], exists: false });
    const a = h.joinNew();
    h.advance(3000);
    const completing = h.sm.describeGroup("g");
    expect(completing.groupState).toBe("CompletingRebalance");
    expect(completing.protocolData).toBe("");
    expect(completing.members[0]!.memberMetadata).toEqual(new Uint8Array());
    h.sync({ memberId: a.memberId, generationId: 1, assignments: [{ memberId: a.memberId, assignment: new Uint8Array([7]) }] });
    const stable = h.sm.describeGroup("g");
    expect(stable.groupState).toBe("Stable");
    expect(stable.protocolData).toBe("range");
    expect(stable.members[0]).toEqual({
      memberId: a.memberId,
      groupInstanceId: null,
      clientId: "client",
      clientHost: "/127.0.0.1",
      memberMetadata: subscription(["t"]),
      memberAssignment: new Uint8Array([7]),
    });
  });

  test("list: states filter case-insensitive, types filter", () => {
    const h = new GroupHarness();
    h.stableGroup(1);
    h.sm.validateOffsetCommit({ groupId: "simple", memberId: "", groupInstanceId: null, generationId: -1, apiVersion: 8 }, h.nowMs);
    const ids = (states: string[], types: string[] = []) => h.sm.listGroups(states, types).map((g) => g.groupId).sort();
    expect(ids([])).toEqual(["g", "simple"]);
    expect(ids(["stable"])).toEqual(["g"]);
    expect(ids([" EMPTY "])).toEqual(["simple"]);
    expect(ids(["Dead"])).toEqual([]);
    expect(ids([], ["Classic"])).toEqual(["g", "simple"]);
    expect(ids([], ["consumer"])).toEqual([]);
    expect(h.sm.listGroups([], []).find((g) => g.groupId === "simple")).toEqual({ groupId: "simple", protocolType: "", groupState: "Empty", groupType: "classic" });
  });

  test("delete: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, then an Empty group goes Dead and is forgotten", () => {
    const h = new GroupHarness();
    expect(h.sm.validateDeleteGroup("nope")).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    const { members } = h.stableGroup(1);
    expect(h.sm.validateDeleteGroup("g")).toBe(ErrorCode.NON_EMPTY_GROUP);
    expect(h.sm.deleteGroup("g", h.nowMs).deleted).toBe(false);
    h.leave([{ memberId: members[0]! }]);
    expect(h.sm.validateDeleteGroup("g")).toBe(ErrorCode.NONE);
    const group = h.sm.peek("g")!;
    const { deleted, effects } = h.sm.deleteGroup("g", h.nowMs);
    h.apply(effects);
    expect(deleted).toBe(true);
    expect(group.state).toBe("Dead");
    expect(h.sm.hasGroup("g")).toBe(false);
    expect(h.sm.persistedRecord("g")).toBeNull();
  });

  test("offset delete: unknown group, non-consumer active group, subscriptions from the consumer metadata", () => {
    const h = new GroupHarness();
    expect(h.sm.validateOffsetDelete("nope")).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    expect(h.sm.validateOffsetDelete("")).toBe(ErrorCode.INVALID_GROUP_ID);
    h.stableGroup(1, { protocols: [{ name: "range", metadata: subscription(["orders", "payments"], 3) }] });
    expect(h.sm.validateOffsetDelete("g")).toBe(ErrorCode.NONE);
    expect(h.sm.isSubscribedToTopic("g", "orders")).toBe(true);
    expect(h.sm.isSubscribedToTopic("g", "other")).toBe(false);
    h.stableGroup(1, { groupId: "connect", protocolType: "connect", protocols: [{ name: "default", metadata: new Uint8Array([1]) }] });
    expect(h.sm.validateOffsetDelete("connect")).toBe(ErrorCode.NON_EMPTY_GROUP);
  });

  test("unparseable consumer metadata: the group counts as subscribed to every topic", () => {
    const h = new GroupHarness();
    h.stableGroup(1, { protocols: [{ name: "range", metadata: new Uint8Array([0, 0, 0, 0, 0, 9]) }] });
    expect(h.sm.isSubscribedToTopic("g", "anything")).toBe(true);
  });
});

describe("restart and shutdown", () => {
  test("loaded groups come back Empty with their generation and protocol type; the Empty time is kept", () => {
    const h = new GroupHarness();
    h.sm.load(
      [
        { groupId: "was-empty", protocolType: "consumer", protocolName: null, generationId: 4, leaderId: null, state: "Empty", stateTimestampMs: 123 },
        { groupId: "was-stable", protocolType: "consumer", protocolName: "range", generationId: 7, leaderId: "m", state: "Stable", stateTimestampMs: 456 },
      ],
      h.nowMs,
    );
    expect(h.sm.persistedRecord("was-empty")).toMatchObject({ state: "Empty", generationId: 4, stateTimestampMs: 123 });
    expect(h.sm.persistedRecord("was-stable")).toMatchObject({ state: "Empty", generationId: 7, protocolName: null, leaderId: null, stateTimestampMs: h.nowMs });
    // The next rebalance continues the generations.
    const j = h.joinNew({ groupId: "was-stable" });
    h.advance(3000);
    expect(j.pending.answer!.generationId).toBe(8);
  });

  test("shutdown answers every parked request and cancels every timer", () => {
    const h = new GroupHarness();
    const a = h.joinNew();
    const b = h.joinNew({ groupId: "other" });
    h.apply(h.sm.shutdown(ErrorCode.NOT_COORDINATOR));
    expect(a.pending.answer!.errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect(b.pending.answer!.errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect(h.timers.size).toBe(0);
    expect(h.timers.has(joinKey("g"))).toBe(false);
  });
});
