/**
 * Wire tests of the group APIs with raw frames: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
 * LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetCommit, OffsetFetch, OffsetDelete. Error
 * codes are the ones Apache Kafka gives for the same requests, by version.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { assignment, subscription } from "../support/consumer-protocol.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 30_000;
const K = { OffsetCommit: 8, OffsetFetch: 9, FindCoordinator: 10, JoinGroup: 11, Heartbeat: 12, LeaveGroup: 13, SyncGroup: 14, DescribeGroups: 15, ListGroups: 16, DeleteGroups: 42, OffsetDelete: 47 };

let broker: TestBroker;
let client: WireClient;

async function createTopic(c: WireClient, name: string, partitions: number): Promise<void> {
  const res = await c.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

function joinBody(groupId: string, memberId: string, extra: Record<string, unknown> = {}) {
  return {
    groupId,
    sessionTimeoutMs: 10_000,
    rebalanceTimeoutMs: 20_000,
    memberId,
    groupInstanceId: null,
    protocolType: "consumer",
    protocols: [{ name: "range", metadata: subscription(["orders"]) }],
    reason: null,
    ...extra,
  };
}

/** JoinGroup v9 the way a client does: MEMBER_ID_REQUIRED, then the rejoin (which may stay parked). */
async function joinV9(c: WireClient, groupId: string, extra: Record<string, unknown> = {}): Promise<{ memberId: string; joined: Promise<any> }> {
  const first = await c.request(K.JoinGroup, 9, joinBody(groupId, "", extra));
  expect(first.errorCode).toBe(ErrorCode.MEMBER_ID_REQUIRED);
  return { memberId: first.memberId, joined: c.request(K.JoinGroup, 9, joinBody(groupId, first.memberId, extra)) };
}

/** One member, Stable, with an assignment of every partition of `orders`. */
async function stableSingleMember(c: WireClient, groupId: string) {
  const { memberId, joined } = await joinV9(c, groupId);
  const join = await joined;
  expect(join.errorCode).toBe(ErrorCode.NONE);
  const sync = await c.request(K.SyncGroup, 5, {
    groupId,
    generationId: join.generationId,
    memberId,
    groupInstanceId: null,
    protocolType: "consumer",
    protocolName: "range",
    assignments: [{ memberId, assignment: assignment({ orders: [0, 1, 2] }) }],
  });
  expect(sync.errorCode).toBe(ErrorCode.NONE);
  return { memberId, generationId: join.generationId as number };
}

const partition = (partitionIndex: number, committedOffset: number, committedMetadata: string | null = "") => ({
  partitionIndex, committedOffset, committedLeaderEpoch: -1, commitTimestamp: -1, committedMetadata,
});

/** Waits for a condition on the broker's state (the request that causes it is in flight on a socket). */
async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not reached");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

beforeAll(async () => {
  broker = await startTestBroker({ groupInitialRebalanceDelayMs: 0, autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  await createTopic(client, "orders", 3);
  await createTopic(client, "payments", 2);
}, TIMEOUT);
afterAll(async () => {
  client.close();
  await broker.stop();
});

describe("FindCoordinator", () => {
  test("v0-v3: a group's coordinator is this broker; errors carry Apache's messages", async () => {
    const v0 = await client.request(K.FindCoordinator, 0, { key: "g" });
    expect(v0).toMatchObject({ errorCode: 0, nodeId: 0, host: "127.0.0.1", port: broker.port });
    for (const v of [1, 2, 3]) {
      const res = await client.request(K.FindCoordinator, v, { key: "g", keyType: 0 });
      expect(res).toMatchObject({ errorCode: 0, errorMessage: "NONE", nodeId: 0, host: "127.0.0.1", port: broker.port });
      const txn = await client.request(K.FindCoordinator, v, { key: "tx", keyType: 1 });
      // The transaction coordinator (key type 1) is this broker too (tests/wire/transactions.test.ts).
      expect(txn).toMatchObject({ errorCode: 0, errorMessage: "NONE", nodeId: 0, host: "127.0.0.1", port: broker.port });
      const bad = await client.request(K.FindCoordinator, v, { key: "g", keyType: 7 });
      expect(bad.errorCode).toBe(ErrorCode.INVALID_REQUEST);
      expect(bad.nodeId).toBe(-1);
    }
  });

  test("v4-v6: batched keys, each with its own answer", async () => {
    for (const v of [4, 5, 6]) {
      const res = await client.request(K.FindCoordinator, v, { keyType: 0, coordinatorKeys: ["a", "b"] });
      expect(res.coordinators).toEqual([
        { key: "a", nodeId: 0, host: "127.0.0.1", port: broker.port, errorCode: 0, errorMessage: "", _unknownTaggedFields: undefined },
        { key: "b", nodeId: 0, host: "127.0.0.1", port: broker.port, errorCode: 0, errorMessage: "", _unknownTaggedFields: undefined },
      ]);
      const txn = await client.request(K.FindCoordinator, v, { keyType: 1, coordinatorKeys: ["t"] });
      expect(txn.coordinators[0]).toMatchObject({ key: "t", nodeId: 0, errorCode: 0 });
      const bad = await client.request(K.FindCoordinator, v, { keyType: 9, coordinatorKeys: ["x", "y"] });
      expect(bad.coordinators.map((c: { errorCode: number }) => c.errorCode)).toEqual([ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]);
      const share = await client.request(K.FindCoordinator, v, { keyType: 2, coordinatorKeys: ["s"] });
      expect(share.coordinators[0].errorCode).toBe(ErrorCode.INVALID_REQUEST);
    }
  });
});

describe("JoinGroup", () => {
  test("v4+: MEMBER_ID_REQUIRED with a generated id, then the rejoin gets generation 1 as leader", async () => {
    const first = await client.request(K.JoinGroup, 5, joinBody("jg-1", ""));
    expect(first).toMatchObject({ errorCode: ErrorCode.MEMBER_ID_REQUIRED, generationId: -1, protocolName: "", leader: "", members: [] });
    expect(first.memberId).toMatch(/^wire-test-[0-9a-f-]{36}$/);
    const joined = await client.request(K.JoinGroup, 5, joinBody("jg-1", first.memberId));
    expect(joined).toMatchObject({ errorCode: 0, generationId: 1, protocolName: "range", leader: first.memberId, memberId: first.memberId });
    expect(joined.members).toEqual([{ memberId: first.memberId, groupInstanceId: null, metadata: subscription(["orders"]), _unknownTaggedFields: undefined }]);
  }, TIMEOUT);

  test("v0-v3: no MEMBER_ID_REQUIRED; v0 uses the session timeout as rebalance timeout", async () => {
    const v0 = await client.request(K.JoinGroup, 0, joinBody("jg-0", ""));
    expect(v0.errorCode).toBe(0);
    expect(v0.generationId).toBe(1);
    const v3 = await client.request(K.JoinGroup, 3, joinBody("jg-3", ""));
    expect(v3.errorCode).toBe(0);
  }, TIMEOUT);

  test("v7+: protocol type returned; the protocol name of an error is null (\"\" before v7)", async () => {
    const v7 = await client.request(K.JoinGroup, 7, joinBody("jg-7", "stale"));
    expect(v7).toMatchObject({ errorCode: ErrorCode.UNKNOWN_MEMBER_ID, memberId: "stale", protocolName: null, protocolType: null, generationId: -1 });
    const v6 = await client.request(K.JoinGroup, 6, joinBody("jg-7", "stale"));
    expect(v6.protocolName).toBe("");
    const first = await client.request(K.JoinGroup, 7, joinBody("jg-7", ""));
    const joined = await client.request(K.JoinGroup, 7, joinBody("jg-7", first.memberId));
    expect(joined).toMatchObject({ errorCode: 0, protocolType: "consumer", protocolName: "range" });
  }, TIMEOUT);

  test("errors: empty group id, session timeout bounds, inconsistent protocol", async () => {
    expect((await client.request(K.JoinGroup, 9, joinBody("", ""))).errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    expect((await client.request(K.JoinGroup, 9, joinBody("jg-e", "", { sessionTimeoutMs: 1000 }))).errorCode).toBe(ErrorCode.INVALID_SESSION_TIMEOUT);
    expect((await client.request(K.JoinGroup, 9, joinBody("jg-e", "", { sessionTimeoutMs: 1_800_001 }))).errorCode).toBe(ErrorCode.INVALID_SESSION_TIMEOUT);
    expect((await client.request(K.JoinGroup, 9, joinBody("jg-e", "", { protocolType: "" }))).errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    await stableSingleMember(client, "jg-proto");
    const other = await client.request(K.JoinGroup, 9, joinBody("jg-proto", "", { protocolType: "connect" }));
    expect(other).toMatchObject({ errorCode: ErrorCode.INCONSISTENT_GROUP_PROTOCOL, memberId: "" });
  }, TIMEOUT);

  test("static membership: a second incarnation fences the first (FENCED_INSTANCE_ID)", async () => {
    const a = await client.request(K.JoinGroup, 9, joinBody("jg-static", "", { groupInstanceId: "instance-1" }));
    expect(a.errorCode).toBe(0);
    expect(a.memberId).toMatch(/^instance-1-/);
    await client.request(K.SyncGroup, 5, {
      groupId: "jg-static", generationId: a.generationId, memberId: a.memberId, groupInstanceId: "instance-1",
      protocolType: "consumer", protocolName: "range", assignments: [{ memberId: a.memberId, assignment: assignment({ orders: [0] }) }],
    });
    const b = await client.request(K.JoinGroup, 9, joinBody("jg-static", "", { groupInstanceId: "instance-1" }));
    expect(b.errorCode).toBe(0);
    expect(b.memberId).not.toBe(a.memberId);
    expect(b.skipAssignment).toBe(true); // the leader, rejoining a Stable group
    const hb = (memberId: string) => client.request(K.Heartbeat, 4, { groupId: "jg-static", generationId: a.generationId, memberId, groupInstanceId: "instance-1" });
    expect((await hb(a.memberId)).errorCode).toBe(ErrorCode.FENCED_INSTANCE_ID);
    expect((await hb(b.memberId)).errorCode).toBe(ErrorCode.NONE);
  }, TIMEOUT);
});

describe("a group of two members over two connections", () => {
  test("join, sync, heartbeat, commit, rebalance on leave, describe, list, delete", async () => {
    const other = await WireClient.connect(broker.port, "127.0.0.1", "second");
    try {
      const g = "two";
      const a = await joinV9(client, g);
      const ja = await a.joined; // alone: completes at once
      expect(ja.generationId).toBe(1);
      await client.request(K.SyncGroup, 5, {
        groupId: g, generationId: 1, memberId: a.memberId, groupInstanceId: null, protocolType: "consumer", protocolName: "range",
        assignments: [{ memberId: a.memberId, assignment: assignment({ orders: [0, 1, 2] }) }],
      });
      // The second member makes the group rebalance; the first learns it from its heartbeat and rejoins.
      const b = await joinV9(other, g);
      expect((await client.request(K.Heartbeat, 4, { groupId: g, generationId: 1, memberId: a.memberId, groupInstanceId: null })).errorCode).toBe(
        ErrorCode.REBALANCE_IN_PROGRESS,
      );
      // A commit during the rebalance with the old generation is still accepted (PreparingRebalance).
      const duringRebalance = await client.request(K.OffsetCommit, 9, {
        groupId: g, generationIdOrMemberEpoch: 1, memberId: a.memberId, groupInstanceId: null,
        topics: [{ name: "orders", partitions: [{ partitionIndex: 0, committedOffset: 5, committedLeaderEpoch: -1, committedMetadata: "m" }] }],
      });
      expect(duringRebalance.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
      const reA = client.request(K.JoinGroup, 9, joinBody(g, a.memberId));
      const [ja2, jb] = await Promise.all([reA, b.joined]);
      expect(ja2.generationId).toBe(2);
      expect(jb.generationId).toBe(2);
      const leader = ja2.leader;
      expect([a.memberId, b.memberId]).toContain(leader);
      const leaderAnswer = leader === a.memberId ? ja2 : jb;
      expect(leaderAnswer.members.length).toBe(2);
      expect((leader === a.memberId ? jb : ja2).members).toEqual([]);

      // During CompletingRebalance a commit is REBALANCE_IN_PROGRESS (Apache: finish the rebalance first).
      const completing = await client.request(K.OffsetCommit, 8, {
        groupId: g, generationIdOrMemberEpoch: 2, memberId: a.memberId, groupInstanceId: null,
        topics: [{ name: "orders", partitions: [{ partitionIndex: 0, committedOffset: 6, committedLeaderEpoch: -1, committedMetadata: "" }] }],
      });
      expect(completing.topics[0].partitions[0].errorCode).toBe(ErrorCode.REBALANCE_IN_PROGRESS);

      const assignments = [
        { memberId: a.memberId, assignment: assignment({ orders: [0, 1] }) },
        { memberId: b.memberId, assignment: assignment({ orders: [2] }) },
      ];
      const syncOf = (c: WireClient, memberId: string) =>
        c.request(K.SyncGroup, 5, {
          groupId: g, generationId: 2, memberId, groupInstanceId: null, protocolType: "consumer", protocolName: "range",
          assignments: memberId === leader ? assignments : [],
        });
      const [sa, sb] = await Promise.all([syncOf(client, a.memberId), syncOf(other, b.memberId)]);
      expect(sa.assignment).toEqual(assignment({ orders: [0, 1] }));
      expect(sb.assignment).toEqual(assignment({ orders: [2] }));
      expect(sa).toMatchObject({ errorCode: 0, protocolType: "consumer", protocolName: "range" });

      const commit = await other.request(K.OffsetCommit, 9, {
        groupId: g, generationIdOrMemberEpoch: 2, memberId: b.memberId, groupInstanceId: null,
        topics: [{ name: "orders", partitions: [{ partitionIndex: 2, committedOffset: 42, committedLeaderEpoch: 0, committedMetadata: "b" }] }],
      });
      expect(commit.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);

      const described = await client.request(K.DescribeGroups, 5, { groups: [g, "no-such-group"], includeAuthorizedOperations: true });
      const [d, dead] = described.groups;
      expect(d).toMatchObject({ errorCode: 0, groupId: g, groupState: "Stable", protocolType: "consumer", protocolData: "range" });
      expect(d.authorizedOperations).toBe((1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11));
      const memberB = d.members.find((m: { memberId: string }) => m.memberId === b.memberId);
      expect(memberB).toMatchObject({ clientId: "second", clientHost: "/127.0.0.1", groupInstanceId: null });
      expect(memberB.memberMetadata).toEqual(subscription(["orders"]));
      expect(memberB.memberAssignment).toEqual(assignment({ orders: [2] }));
      expect(dead).toMatchObject({ errorCode: 0, groupId: "no-such-group", groupState: "Dead", protocolType: "", members: [] });

      const v0 = await client.request(K.DescribeGroups, 0, { groups: [g] });
      expect(v0.groups[0].groupState).toBe("Stable");

      expect((await client.request(K.DeleteGroups, 2, { groupsNames: [g] })).results).toEqual([
        { groupId: g, errorCode: ErrorCode.NON_EMPTY_GROUP, _unknownTaggedFields: undefined },
      ]);

      // LeaveGroup v3 batch: both members leave; the group becomes Empty.
      const left = await client.request(K.LeaveGroup, 3, { groupId: g, members: [{ memberId: a.memberId, groupInstanceId: null }, { memberId: b.memberId, groupInstanceId: null }, { memberId: "ghost", groupInstanceId: null }] });
      expect(left.errorCode).toBe(0);
      expect(left.members.map((m: { errorCode: number }) => m.errorCode)).toEqual([0, 0, ErrorCode.UNKNOWN_MEMBER_ID]);
      const afterLeave = await client.request(K.DescribeGroups, 5, { groups: [g], includeAuthorizedOperations: false });
      expect(afterLeave.groups[0]).toMatchObject({ groupState: "Empty", protocolType: "consumer", members: [], authorizedOperations: -2147483648 });

      const listed = await client.request(K.ListGroups, 5, { statesFilter: ["empty"], typesFilter: ["classic"] });
      expect(listed.groups.find((x: { groupId: string }) => x.groupId === g)).toEqual({
        groupId: g, protocolType: "consumer", groupState: "Empty", groupType: "classic", _unknownTaggedFields: undefined,
      });

      // The offsets survive the members; DeleteGroups removes them with the group.
      const fetched = await client.request(K.OffsetFetch, 8, { groups: [{ groupId: g, topics: null }], requireStable: false });
      expect(fetched.groups[0].topics).toEqual([
        {
          name: "orders",
          partitions: [
            { partitionIndex: 0, committedOffset: 5, committedLeaderEpoch: -1, metadata: "m", errorCode: 0, _unknownTaggedFields: undefined },
            { partitionIndex: 2, committedOffset: 42, committedLeaderEpoch: 0, metadata: "b", errorCode: 0, _unknownTaggedFields: undefined },
          ],
          _unknownTaggedFields: undefined,
        },
      ]);
      const deleted = await client.request(K.DeleteGroups, 1, { groupsNames: [g, g, "no-such-group"] });
      expect(deleted.results.map((r: { groupId: string; errorCode: number }) => [r.groupId, r.errorCode])).toEqual([
        [g, ErrorCode.NONE],
        ["no-such-group", ErrorCode.GROUP_ID_NOT_FOUND],
      ]);
      const gone = await client.request(K.OffsetFetch, 8, { groups: [{ groupId: g, topics: null }], requireStable: false });
      expect(gone.groups[0]).toMatchObject({ groupId: g, errorCode: 0, topics: [] });
      expect((await client.request(K.DescribeGroups, 5, { groups: [g] })).groups[0].groupState).toBe("Dead");
    } finally {
      other.close();
    }
  }, TIMEOUT);
});

describe("SyncGroup, Heartbeat and LeaveGroup errors", () => {
  test("SyncGroup", async () => {
    const { memberId, generationId } = await stableSingleMember(client, "sg");
    const sync = (body: Record<string, unknown>, version = 5) =>
      client.request(K.SyncGroup, version, { groupId: "sg", generationId, memberId, groupInstanceId: null, protocolType: "consumer", protocolName: "range", assignments: [], ...body });
    expect((await sync({ groupId: "unknown" })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await sync({ groupId: "" })).errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    expect((await sync({ memberId: "ghost" })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await sync({ generationId: generationId + 1 })).errorCode).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect((await sync({ protocolName: "roundrobin" })).errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    // v5 requires both fields; older versions do not carry them.
    expect((await sync({ protocolType: null })).errorCode).toBe(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
    const v3 = await sync({}, 3);
    expect(v3.errorCode).toBe(0);
    expect(v3.assignment).toEqual(assignment({ orders: [0, 1, 2] }));
    expect((await sync({ groupInstanceId: "nobody" }, 3)).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
  }, TIMEOUT);

  test("Heartbeat", async () => {
    const { memberId, generationId } = await stableSingleMember(client, "hb");
    const hb = (body: Record<string, unknown>, version = 4) => client.request(K.Heartbeat, version, { groupId: "hb", generationId, memberId, groupInstanceId: null, ...body });
    for (const v of [0, 1, 2, 3, 4]) expect((await hb({}, v)).errorCode).toBe(0);
    expect((await hb({ groupId: "" })).errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    expect((await hb({ groupId: "nope" })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await hb({ memberId: "ghost" })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await hb({ generationId: 99 })).errorCode).toBe(ErrorCode.ILLEGAL_GENERATION);
  }, TIMEOUT);

  test("LeaveGroup v0-v2: one member, one error code", async () => {
    const { memberId } = await stableSingleMember(client, "lg");
    expect((await client.request(K.LeaveGroup, 0, { groupId: "lg", memberId: "ghost" })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await client.request(K.LeaveGroup, 1, { groupId: "no-group", memberId })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await client.request(K.LeaveGroup, 2, { groupId: "", memberId })).errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
    expect((await client.request(K.LeaveGroup, 2, { groupId: "lg", memberId })).errorCode).toBe(ErrorCode.NONE);
    const v5 = await client.request(K.LeaveGroup, 5, { groupId: "no-group", members: [{ memberId: "m", groupInstanceId: null, reason: "bye" }] });
    expect(v5).toMatchObject({ errorCode: 0, members: [{ memberId: "m", groupInstanceId: null, errorCode: ErrorCode.UNKNOWN_MEMBER_ID }] });
  }, TIMEOUT);
});

describe("OffsetCommit", () => {
  test("simple commits (no generation): unknown topics and partitions, metadata too large, every version", async () => {
    for (let v = 0; v <= 9; v++) {
      const res = await client.request(K.OffsetCommit, v, {
        groupId: `simple-${v}`,
        generationIdOrMemberEpoch: -1,
        memberId: "",
        groupInstanceId: null,
        retentionTimeMs: -1,
        topics: [
          { name: "orders", partitions: [partition(0, 10 + v), partition(3, 1), partition(1, 1, "x".repeat(4097)), partition(2, 7, "x".repeat(4096))] },
          { name: "missing", partitions: [partition(0, 1)] },
        ],
      });
      expect(res.topics.map((t: { name: string; partitions: { errorCode: number }[] }) => [t.name, t.partitions.map((p) => p.errorCode)])).toEqual([
        ["orders", [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OFFSET_METADATA_TOO_LARGE, 0]],
        ["missing", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]],
      ]);
      const fetched = await client.request(K.OffsetFetch, Math.min(v, 7), { groupId: `simple-${v}`, topics: [{ name: "orders", partitionIndexes: [0, 1, 2] }], requireStable: false });
      expect(fetched.topics[0].partitions.map((p: { committedOffset: number; metadata: string }) => [p.committedOffset, p.metadata.length])).toEqual([
        [10 + v, 0],
        [-1, 0],
        [7, 4096],
      ]);
    }
  }, TIMEOUT);

  test("member commits: generation and member checks, GROUP_ID_NOT_FOUND from v9", async () => {
    const { memberId, generationId } = await stableSingleMember(client, "oc");
    const commit = (version: number, body: Record<string, unknown>) =>
      client.request(K.OffsetCommit, version, { groupId: "oc", generationIdOrMemberEpoch: generationId, memberId, groupInstanceId: null, topics: [{ name: "orders", partitions: [partition(0, 1)] }], ...body });
    const code = async (version: number, body: Record<string, unknown>) => (await commit(version, body)).topics[0].partitions[0].errorCode;
    expect(await code(9, {})).toBe(0);
    expect(await code(9, { generationIdOrMemberEpoch: generationId + 1 })).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(await code(9, { memberId: "ghost" })).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(await code(9, { generationIdOrMemberEpoch: -1, memberId: "" })).toBe(ErrorCode.UNKNOWN_MEMBER_ID); // not Empty
    expect(await code(7, { groupInstanceId: "nobody" })).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect(await code(0, {})).toBe(ErrorCode.UNKNOWN_MEMBER_ID); // v0 has no member: only for Empty groups
    expect(await code(8, { groupId: "never-seen" })).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(await code(9, { groupId: "never-seen" })).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
  }, TIMEOUT);
});

describe("OffsetFetch", () => {
  test("unknown group: -1 for what was asked, nothing for all; v0/v1 shape", async () => {
    const v1 = await client.request(K.OffsetFetch, 1, { groupId: "nobody", topics: [{ name: "orders", partitionIndexes: [0] }] });
    expect(v1.topics[0].partitions[0]).toMatchObject({ partitionIndex: 0, committedOffset: -1, metadata: "", errorCode: 0 });
    const v2 = await client.request(K.OffsetFetch, 2, { groupId: "nobody", topics: null });
    expect(v2).toMatchObject({ errorCode: 0, topics: [] });
    const v0 = await client.request(K.OffsetFetch, 0, { groupId: "nobody", topics: [{ name: "x", partitionIndexes: [5] }] });
    expect(v0.topics[0].partitions[0].committedOffset).toBe(-1);
  }, TIMEOUT);

  test("v8 batches groups; require_stable answers UNSTABLE_OFFSET_COMMIT while an open transaction staged an offset", async () => {
    await client.request(K.OffsetCommit, 8, { groupId: "fetch-a", generationIdOrMemberEpoch: -1, memberId: "", groupInstanceId: null, topics: [{ name: "orders", partitions: [partition(0, 3), partition(1, 4)] }] });
    await client.request(K.OffsetCommit, 8, { groupId: "fetch-b", generationIdOrMemberEpoch: -1, memberId: "", groupInstanceId: null, topics: [{ name: "payments", partitions: [partition(1, 9)] }] });
    await broker.broker.services.groups.stageTransactionalOffsets("fetch-a", 4242, [{ topic: "orders", partition: 1, offset: 100, leaderEpoch: -1, metadata: null }]);
    const res = await client.request(K.OffsetFetch, 8, {
      groups: [
        { groupId: "fetch-a", topics: [{ name: "orders", partitionIndexes: [0, 1, 2] }] },
        { groupId: "fetch-b", topics: null },
      ],
      requireStable: true,
    });
    expect(res.groups.map((g: any) => [g.groupId, g.errorCode, g.topics.map((t: any) => [t.name, t.partitions.map((p: any) => [p.partitionIndex, p.committedOffset, p.errorCode])])])).toEqual([
      ["fetch-a", 0, [["orders", [[0, 3, 0], [1, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT], [2, -1, 0]]]]],
      ["fetch-b", 0, [["payments", [[1, 9, 0]]]]],
    ]);
    // Without require_stable the committed offset is answered; the staged one stays invisible.
    const v7 = await client.request(K.OffsetFetch, 7, { groupId: "fetch-a", topics: [{ name: "orders", partitionIndexes: [1] }], requireStable: false });
    expect(v7.topics[0].partitions[0]).toMatchObject({ committedOffset: 4, errorCode: 0 });
    // The transaction commits: the staged offset becomes the committed one.
    expect(await broker.broker.services.groups.completeTransactionalOffsets("fetch-a", 4242, true)).toBe(1);
    const after = await client.request(K.OffsetFetch, 7, { groupId: "fetch-a", topics: [{ name: "orders", partitionIndexes: [1] }], requireStable: true });
    expect(after.topics[0].partitions[0]).toMatchObject({ committedOffset: 100, errorCode: 0 });
  }, TIMEOUT);
});

describe("OffsetDelete", () => {
  test("subscribed topics are GROUP_SUBSCRIBED_TO_TOPIC; others are deleted; the errors of Apache", async () => {
    const { memberId, generationId } = await stableSingleMember(client, "od"); // subscribed to "orders"
    await client.request(K.OffsetCommit, 9, {
      groupId: "od", generationIdOrMemberEpoch: generationId, memberId, groupInstanceId: null,
      topics: [{ name: "orders", partitions: [partition(0, 1)] }, { name: "payments", partitions: [partition(0, 2)] }],
    });
    const res = await client.request(K.OffsetDelete, 0, {
      groupId: "od",
      topics: [
        { name: "orders", partitions: [{ partitionIndex: 0 }] },
        { name: "payments", partitions: [{ partitionIndex: 0 }, { partitionIndex: 7 }] },
        { name: "missing", partitions: [{ partitionIndex: 0 }] },
      ],
    });
    expect(res.errorCode).toBe(0);
    expect(res.topics.map((t: any) => [t.name, t.partitions.map((p: any) => p.errorCode)])).toEqual([
      ["orders", [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC]],
      ["payments", [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]],
      ["missing", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]],
    ]);
    const fetched = await client.request(K.OffsetFetch, 8, { groups: [{ groupId: "od", topics: null }], requireStable: false });
    expect(fetched.groups[0].topics.map((t: any) => t.name)).toEqual(["orders"]);
    expect((await client.request(K.OffsetDelete, 0, { groupId: "no-such", topics: [] })).errorCode).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    expect((await client.request(K.OffsetDelete, 0, { groupId: "", topics: [] })).errorCode).toBe(ErrorCode.INVALID_GROUP_ID);
  }, TIMEOUT);
});

describe("ListGroups", () => {
  test("every version; states and types filters", async () => {
    for (let v = 0; v <= 5; v++) {
      const res = await client.request(K.ListGroups, v, { statesFilter: [], typesFilter: [] });
      expect(res.errorCode).toBe(0);
      const ids = res.groups.map((g: { groupId: string }) => g.groupId);
      expect(ids).toContain("sg");
      expect(ids).toContain("simple-0");
      const simple = res.groups.find((g: { groupId: string }) => g.groupId === "simple-0");
      expect(simple.protocolType).toBe("");
    }
    const stable = await client.request(K.ListGroups, 4, { statesFilter: ["Stable"] });
    expect(stable.groups.every((g: { groupState: string }) => g.groupState === "Stable")).toBe(true);
    expect(stable.groups.length).toBeGreaterThan(0);
    expect((await client.request(K.ListGroups, 5, { statesFilter: [], typesFilter: ["consumer"] })).groups).toEqual([]);
  }, TIMEOUT);
});

describe("durability across a restart", () => {
  test("offsets, groups and generations survive; members rejoin", async () => {
    const b = await startTestBroker({ groupInitialRebalanceDelayMs: 0, autoCreateTopicsEnable: false });
    let c = await WireClient.connect(b.port);
    try {
      await createTopic(c, "orders", 3);
      const { memberId, generationId } = await stableSingleMember(c, "durable");
      const commit = await c.request(K.OffsetCommit, 9, {
        groupId: "durable", generationIdOrMemberEpoch: generationId, memberId, groupInstanceId: null,
        topics: [{ name: "orders", partitions: [partition(1, 77, "after-restart")] }],
      });
      expect(commit.topics[0].partitions[0].errorCode).toBe(0);
      await c.request(K.OffsetCommit, 2, { groupId: "simple-durable", generationIdOrMemberEpoch: -1, memberId: "", retentionTimeMs: -1, topics: [{ name: "orders", partitions: [partition(0, 5)] }] });
      c.close();
      await b.restart();
      c = await WireClient.connect(b.listener.port);
      const fetched = await c.request(K.OffsetFetch, 8, { groups: [{ groupId: "durable", topics: [{ name: "orders", partitionIndexes: [1] }] }, { groupId: "simple-durable", topics: null }], requireStable: true });
      expect(fetched.groups[0].topics[0].partitions[0]).toMatchObject({ committedOffset: 77, metadata: "after-restart" });
      expect(fetched.groups[1].topics[0].partitions[0]).toMatchObject({ partitionIndex: 0, committedOffset: 5 });
      const described = await c.request(K.DescribeGroups, 5, { groups: ["durable", "simple-durable"] });
      expect(described.groups.map((g: any) => [g.groupState, g.protocolType, g.members.length])).toEqual([
        ["Empty", "consumer", 0],
        ["Empty", "", 0],
      ]);
      // The old member is gone: its heartbeat is UNKNOWN_MEMBER_ID; it rejoins into the next generation.
      expect((await c.request(K.Heartbeat, 4, { groupId: "durable", generationId, memberId, groupInstanceId: null })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
      const rejoined = await stableSingleMember(c, "durable");
      expect(rejoined.generationId).toBe(generationId + 1);
    } finally {
      c.close();
      await b.stop();
    }
  }, TIMEOUT);
});

describe("timeouts and expiry on a manual clock", () => {
  test("a member that stops heartbeating is expired; offsets of an Empty group expire after the retention", async () => {
    const clock = new ManualClock();
    const retentionMs = 7 * 24 * 60 * 60 * 1000;
    const b = await startTestBroker({ groupInitialRebalanceDelayMs: 0, autoCreateTopicsEnable: false, offsetsRetentionMs: retentionMs }, { clock });
    const c = await WireClient.connect(b.port);
    const groups = b.broker.services.groups;
    try {
      await createTopic(c, "orders", 3);
      const { memberId, generationId } = await stableSingleMember(c, "expiring");
      await c.request(K.OffsetCommit, 9, {
        groupId: "expiring", generationIdOrMemberEpoch: generationId, memberId, groupInstanceId: null,
        topics: [{ name: "orders", partitions: [partition(0, 12)] }],
      });
      clock.advance(9_999);
      groups.runDueTimers();
      expect((await c.request(K.Heartbeat, 4, { groupId: "expiring", generationId, memberId, groupInstanceId: null })).errorCode).toBe(0);
      clock.advance(10_000);
      expect(groups.runDueTimers()).toBeGreaterThan(0);
      // The session expired: the member is gone, the group Empty with a new generation.
      expect((await c.request(K.Heartbeat, 4, { groupId: "expiring", generationId, memberId, groupInstanceId: null })).errorCode).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
      const described = await c.request(K.DescribeGroups, 5, { groups: ["expiring"] });
      expect(described.groups[0]).toMatchObject({ groupState: "Empty", members: [] });

      // Offsets stay for the retention after the group became Empty...
      clock.advance(retentionMs - 1);
      expect(await groups.sweepExpiredOffsets()).toBe(0);
      // ...and then go, with the group.
      clock.advance(1);
      expect(await groups.sweepExpiredOffsets()).toBe(1);
      const fetched = await c.request(K.OffsetFetch, 7, { groupId: "expiring", topics: [{ name: "orders", partitionIndexes: [0] }], requireStable: false });
      expect(fetched.topics[0].partitions[0].committedOffset).toBe(-1);
      expect((await c.request(K.ListGroups, 4, { statesFilter: [] })).groups.map((g: { groupId: string }) => g.groupId)).not.toContain("expiring");
      expect((await c.request(K.DeleteGroups, 2, { groupsNames: ["expiring"] })).results[0].errorCode).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
    } finally {
      c.close();
      await b.stop();
    }
  }, TIMEOUT);

  test("the initial rebalance waits group.initial.rebalance.delay.ms for more members", async () => {
    const clock = new ManualClock();
    const b = await startTestBroker({ groupInitialRebalanceDelayMs: 3000, autoCreateTopicsEnable: false }, { clock });
    const c1 = await WireClient.connect(b.port);
    const c2 = await WireClient.connect(b.port);
    try {
      const groups = b.broker.services.groups;
      const one = await joinV9(c1, "delayed");
      await waitFor(() => groups.state.peek("delayed")?.state === "PreparingRebalance");
      clock.advance(2000);
      groups.runDueTimers();
      const two = await joinV9(c2, "delayed"); // extends the delay
      await waitFor(() => groups.state.peek("delayed")?.numMembersAwaitingJoin === 2);
      clock.advance(1000);
      groups.runDueTimers();
      // The first delay is over, but a member joined during it: another delay.
      expect(groups.state.peek("delayed")!.state).toBe("PreparingRebalance");
      clock.advance(3000);
      b.broker.services.groups.runDueTimers();
      const [j1, j2] = await Promise.all([one.joined, two.joined]);
      expect(j1.generationId).toBe(1);
      expect(j2.generationId).toBe(1);
      expect(j1.leader === one.memberId ? j1.members.length : j2.members.length).toBe(2);
    } finally {
      c1.close();
      c2.close();
      await b.stop();
    }
  }, TIMEOUT);

  test("closing the broker answers parked JoinGroups with NOT_COORDINATOR", async () => {
    const clock = new ManualClock();
    const b = await startTestBroker({ groupInitialRebalanceDelayMs: 3000, autoCreateTopicsEnable: false }, { clock });
    const c = await WireClient.connect(b.port);
    try {
      const groups = b.broker.services.groups;
      const j = await joinV9(c, "parked");
      await waitFor(() => groups.state.peek("parked")?.numMembersAwaitingJoin === 1);
      await groups.close();
      expect((await j.joined).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
      // A closed coordinator coordinates nothing.
      expect((await c.request(K.Heartbeat, 4, { groupId: "parked", generationId: 0, memberId: j.memberId, groupInstanceId: null })).errorCode).toBe(
        ErrorCode.NOT_COORDINATOR,
      );
    } finally {
      c.close();
      await b.stop();
    }
  }, TIMEOUT);
});
