/**
 * Every API's authorization check with StandardAuthorizer on, raw frames against an in-process broker
 * (every connection is User:ANONYMOUS). User:ANONYMOUS is granted ALL on every topic, group and
 * transactional id and most cluster operations; each test adds one DENY (which wins over the ALLOW) and
 * checks the code and shape Apache's KafkaApis answers, then removes it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { type AclBinding, AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode as E } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;
let client: WireClient;

const ANON = "User:ANONYMOUS";
const binding = (resourceType: number, resourceName: string, operation: number, permissionType: number = Perm.ALLOW, patternType: number = Pat.LITERAL): AclBinding => ({
  resourceType,
  resourceName,
  patternType,
  principal: ANON,
  host: "*",
  operation,
  permissionType,
});
const deny = (resourceType: number, resourceName: string, operation: number, patternType: number = Pat.LITERAL) => binding(resourceType, resourceName, operation, Perm.DENY, patternType);
const CLUSTER = "kafka-cluster";

/** Runs `fn` with the DENY ACLs in place, then removes them. */
async function denied<T>(acls: AclBinding[], fn: () => Promise<T>): Promise<T> {
  const authorizer = broker.broker.services.authorizer;
  await authorizer.create(acls);
  try {
    return await fn();
  } finally {
    await authorizer.delete(acls.map((a) => ({ ...a, resourceName: a.resourceName })));
  }
}

beforeAll(async () => {
  broker = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, autoCreateTopicsEnable: true });
  client = await WireClient.connect(broker.port);
  await broker.broker.services.authorizer.create([
    binding(Res.TOPIC, "*", Op.ALL),
    binding(Res.GROUP, "*", Op.ALL),
    binding(Res.TRANSACTIONAL_ID, "*", Op.ALL),
    ...[Op.CREATE, Op.DESCRIBE, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS].map((op) => binding(Res.CLUSTER, CLUSTER, op)),
  ]);
  const created = await client.request(19, 7, {
    topics: ["t", "u"].map((name) => ({ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] })),
    timeoutMs: 5000,
    validateOnly: false,
  });
  expect(created.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual([E.NONE, E.NONE]);
});
afterAll(async () => {
  client.close();
  await broker.stop();
});

describe("without any ACL of its own the broker denies", () => {
  test("an authorizer with no matching ACL denies (allow.everyone.if.no.acl.found=false)", async () => {
    await broker.broker.services.authorizer.delete([{ resourceType: Res.TOPIC, resourceName: "*", patternType: Pat.LITERAL, principal: null, host: null, operation: Op.ANY, permissionType: Perm.ANY }]);
    try {
      const res = await client.request(3, 12, { topics: [{ name: "t", topicId: "00000000-0000-0000-0000-000000000000" }], allowAutoTopicCreation: false });
      expect(res.topics[0].errorCode).toBe(E.TOPIC_AUTHORIZATION_FAILED);
    } finally {
      await broker.broker.services.authorizer.create([binding(Res.TOPIC, "*", Op.ALL)]);
    }
  });
});

describe("log APIs", () => {
  const produce = (records: Uint8Array, transactionalId: string | null = null) =>
    client.request(0, 9, { transactionalId, acks: -1, timeoutMs: 5000, topicData: [{ name: "t", partitionData: [{ index: 0, records }] }, { name: "u", partitionData: [{ index: 0, records }] }] });

  test("Produce: WRITE on each topic, per partition", async () => {
    const res = await denied([deny(Res.TOPIC, "t", Op.WRITE)], () => produce(buildBatch({ records: [{ value: "v" }] })));
    expect(res.responses.map((r: { partitionResponses: { errorCode: number }[] }) => r.partitionResponses[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
  });

  test("Produce: transactional records need WRITE on the transactional id, the whole request refused", async () => {
    const init = await client.request(22, 4, { transactionalId: "tx-p", transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    expect(init.errorCode).toBe(E.NONE);
    const records = buildBatch({ records: [{ value: "v" }], producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: 0, transactional: true });
    const res = await denied([deny(Res.TRANSACTIONAL_ID, "tx-p", Op.WRITE)], () => produce(records, "tx-p"));
    expect(res.responses.map((r: { partitionResponses: { errorCode: number }[] }) => r.partitionResponses[0]!.errorCode)).toEqual([
      E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
      E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ]);
  });

  /** Fetch v12 of partition 0 of topics t and u, from a consumer (-1) or a replica (a broker id). */
  const fetchOfTopicsTU = (replicaId: number) => ({
    replicaId,
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes: 1 << 20,
    isolationLevel: 0,
    sessionId: 0,
    sessionEpoch: -1,
    topics: ["t", "u"].map((topic) => ({ topic, partitions: [{ partition: 0, currentLeaderEpoch: -1, fetchOffset: 0, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: 1 << 20 }] })),
    forgottenTopicsData: [],
    rackId: "",
  });

  test("Fetch: READ on each topic", async () => {
    const res = await denied([deny(Res.TOPIC, "t", Op.READ)], () =>
      client.request(1, 12, fetchOfTopicsTU(-1)),
    );
    expect(res.responses.map((r: { partitions: { errorCode: number }[] }) => r.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
    // A replica's fetch (replica id >= 0) needs CLUSTER_ACTION, which nobody was granted: every partition refused.
    const replica = await client.request(1, 12, fetchOfTopicsTU(1));
    expect(replica.responses.map((r: { partitions: { errorCode: number }[] }) => r.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED]);
  });

  test("ListOffsets and OffsetForLeaderEpoch: DESCRIBE on the topic", async () => {
    const [offsets, epochs] = await denied([deny(Res.TOPIC, "t", Op.DESCRIBE)], async () => [
      await client.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: ["t", "u"].map((name) => ({ name, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] })) }),
      await client.request(23, 4, { replicaId: -1, topics: ["t", "u"].map((topic) => ({ topic, partitions: [{ partition: 0, currentLeaderEpoch: -1, leaderEpoch: 0 }] })) }),
    ]);
    expect(offsets.topics.map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
    expect(Number(offsets.topics[0].partitions[0].offset)).toBe(-1);
    expect(epochs.topics.map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
  });

  test("DeleteRecords: DELETE on the topic; DescribeProducers: READ", async () => {
    const [deleted, producers] = await denied([deny(Res.TOPIC, "t", Op.DELETE), deny(Res.TOPIC, "t", Op.READ)], async () => [
      await client.request(21, 2, { topics: ["t", "u"].map((name) => ({ name, partitions: [{ partitionIndex: 0, offset: 0 }] })), timeoutMs: 5000 }),
      await client.request(61, 0, { topics: ["t", "u"].map((name) => ({ name, partitionIndexes: [0] })) }),
    ]);
    expect(deleted.topics.map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
    expect(producers.topics.map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
  });
});

describe("Metadata", () => {
  const metadata = (names: string[] | null, opts: { autoCreate?: boolean; version?: number } = {}) =>
    client.request(3, opts.version ?? 12, {
      topics: names === null ? null : names.map((name) => ({ name, topicId: "00000000-0000-0000-0000-000000000000" })),
      allowAutoTopicCreation: opts.autoCreate ?? false,
      includeTopicAuthorizedOperations: true,
      includeClusterAuthorizedOperations: true,
    });

  test("a topic without DESCRIBE: TOPIC_AUTHORIZATION_FAILED when named, left out of all topics", async () => {
    const [named, all] = await denied([deny(Res.TOPIC, "t", Op.DESCRIBE)], async () => [await metadata(["t", "u"]), await metadata(null)]);
    expect(named.topics.map((t: { name: string; errorCode: number; topicId: string }) => [t.name, t.errorCode])).toEqual([
      ["t", E.TOPIC_AUTHORIZATION_FAILED],
      ["u", E.NONE],
    ]);
    expect(named.topics[0].topicId).toBe("00000000-0000-0000-0000-000000000000");
    expect(all.topics.map((t: { name: string }) => t.name)).toEqual(["u"]);
  });

  test("authorized operations are the principal's", async () => {
    const res = await denied([deny(Res.TOPIC, "u", Op.DELETE)], () => metadata(["u"]));
    const ops = res.topics[0].topicAuthorizedOperations as number;
    expect(ops & (1 << Op.DELETE)).toBe(0);
    expect(ops & (1 << Op.READ)).not.toBe(0);
    const cluster = await metadata(["u"], { version: 10 });
    expect(cluster.clusterAuthorizedOperations & (1 << Op.CLUSTER_ACTION)).toBe(0);
    expect(cluster.clusterAuthorizedOperations & (1 << Op.DESCRIBE)).not.toBe(0);
    const noDescribe = await denied([deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE)], () => metadata(["u"], { version: 10 }));
    expect(noDescribe.clusterAuthorizedOperations).toBe(0);
  });

  test("auto-creation needs CREATE on the cluster or the topic", async () => {
    const refused = await denied([deny(Res.CLUSTER, CLUSTER, Op.CREATE), deny(Res.TOPIC, "auto-", Op.CREATE, Pat.PREFIXED)], () => metadata(["auto-1"], { autoCreate: true }));
    expect(refused.topics[0].errorCode).toBe(E.TOPIC_AUTHORIZATION_FAILED);
    expect(broker.broker.services.topics.get("auto-1")).toBeUndefined();
    // CREATE on the topic is enough without the cluster's.
    const created = await denied([deny(Res.CLUSTER, CLUSTER, Op.CREATE)], () => metadata(["auto-2"], { autoCreate: true }));
    expect(created.topics[0].errorCode).toBe(E.NONE);
  });
});

describe("topic and config admin", () => {
  test("CreateTopics: CREATE on the cluster or the topic; configs hidden without DESCRIBE_CONFIGS", async () => {
    const create = (name: string) => client.request(19, 7, { topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: true });
    const refused = await denied([deny(Res.CLUSTER, CLUSTER, Op.CREATE), deny(Res.TOPIC, "new", Op.CREATE)], () => create("new"));
    expect([refused.topics[0].errorCode, refused.topics[0].errorMessage]).toEqual([E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."]);
    const byTopic = await denied([deny(Res.CLUSTER, CLUSTER, Op.CREATE)], () => create("new"));
    expect(byTopic.topics[0].errorCode).toBe(E.NONE);
    const hidden = await denied([deny(Res.TOPIC, "new", Op.DESCRIBE_CONFIGS)], () => create("new"));
    expect([hidden.topics[0].errorCode, hidden.topics[0].topicConfigErrorCode]).toEqual([E.NONE, E.TOPIC_AUTHORIZATION_FAILED]);
  });

  test("DeleteTopics: DELETE on the topic (or the cluster); a topic not describable refused before whether it exists", async () => {
    const res = await denied([deny(Res.TOPIC, "t", Op.DELETE), deny(Res.TOPIC, "gone", Op.DESCRIBE), deny(Res.TOPIC, "gone2", Op.DELETE)], () =>
      client.request(20, 5, { topicNames: ["t", "gone", "gone2"], timeoutMs: 5000 }),
    );
    expect(res.responses.map((r: { errorCode: number }) => r.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED, E.UNKNOWN_TOPIC_OR_PARTITION]);
    expect(broker.broker.services.topics.get("t")).toBeDefined();
    const id = broker.broker.services.topics.get("t")!.topicId;
    const byId = await denied([deny(Res.TOPIC, "t", Op.DELETE), deny(Res.TOPIC, "t", Op.DESCRIBE)], () => client.request(20, 6, { topics: [{ name: null, topicId: id }], timeoutMs: 5000 }));
    expect(byId.responses[0]).toMatchObject({ name: null, topicId: id, errorCode: E.TOPIC_AUTHORIZATION_FAILED });
    const described = await denied([deny(Res.TOPIC, "t", Op.DELETE)], () => client.request(20, 6, { topics: [{ name: null, topicId: id }], timeoutMs: 5000 }));
    expect(described.responses[0]).toMatchObject({ name: "t", topicId: id, errorCode: E.TOPIC_AUTHORIZATION_FAILED });
  });

  test("CreatePartitions: ALTER on the topic", async () => {
    const res = await denied([deny(Res.TOPIC, "t", Op.ALTER)], () => client.request(37, 3, { topics: [{ name: "t", count: 2, assignments: null }], timeoutMs: 5000, validateOnly: true }));
    expect([res.results[0].errorCode, res.results[0].errorMessage]).toEqual([E.TOPIC_AUTHORIZATION_FAILED, null]);
  });

  test("DescribeConfigs / IncrementalAlterConfigs / AlterConfigs: the topic's or the cluster's *_CONFIGS", async () => {
    const resources = [
      { resourceType: 2, resourceName: "t" },
      { resourceType: 4, resourceName: "0" },
    ];
    const described = await denied([deny(Res.TOPIC, "t", Op.DESCRIBE_CONFIGS), deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)], () =>
      client.request(32, 4, { resources: resources.map((r) => ({ ...r, configurationKeys: null })), includeSynonyms: false, includeDocumentation: false }),
    );
    expect(described.results.map((r: { errorCode: number }) => r.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]);
    const alterDenied = [deny(Res.TOPIC, "t", Op.ALTER_CONFIGS), deny(Res.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)];
    const incremental = await denied(alterDenied, () =>
      client.request(44, 1, { resources: resources.map((r) => ({ ...r, configs: [{ name: "log.retention.ms", configOperation: 0, value: "1000" }] })), validateOnly: true }),
    );
    expect(incremental.responses.map((r: { errorCode: number }) => r.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]);
    const legacy = await denied(alterDenied, () => client.request(33, 2, { resources: resources.map((r) => ({ ...r, configs: [] })), validateOnly: true }));
    expect(legacy.responses.map((r: { errorCode: number }) => r.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]);
    // ALTER_CONFIGS implies DESCRIBE_CONFIGS: with the ALLOW of ALL, describing is allowed.
    const allowed = await client.request(32, 4, { resources: resources.map((r) => ({ ...r, configurationKeys: null })), includeSynonyms: false, includeDocumentation: false });
    expect(allowed.results.map((r: { errorCode: number }) => r.errorCode)).toEqual([E.NONE, E.NONE]);
  });

  test("DescribeCluster: authorized operations 0 without DESCRIBE on the cluster", async () => {
    const res = await denied([deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE)], () => client.request(60, 1, { includeClusterAuthorizedOperations: true, endpointType: 1 }));
    expect([res.errorCode, res.clusterAuthorizedOperations]).toEqual([E.NONE, 0]);
  });
});

describe("groups", () => {
  const commit = (groupId: string, topics = ["t"]) =>
    client.request(8, 8, {
      groupId,
      generationIdOrMemberEpoch: -1,
      memberId: "",
      groupInstanceId: null,
      topics: topics.map((name) => ({ name, partitions: [{ partitionIndex: 0, committedOffset: 0, committedLeaderEpoch: -1, committedMetadata: "" }] })),
    });

  test("OffsetCommit: READ on the group, then READ on each topic", async () => {
    const group = await denied([deny(Res.GROUP, "g", Op.READ)], () => commit("g"));
    expect(group.topics[0].partitions[0].errorCode).toBe(E.GROUP_AUTHORIZATION_FAILED);
    const topic = await denied([deny(Res.TOPIC, "t", Op.READ)], () => commit("g", ["t", "u"]));
    expect(topic.topics.map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.NONE]);
  });

  test("JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group", async () => {
    const codes = await denied([deny(Res.GROUP, "g", Op.READ)], async () => [
      (await client.request(11, 5, { groupId: "g", sessionTimeoutMs: 10000, rebalanceTimeoutMs: 10000, memberId: "", groupInstanceId: null, protocolType: "consumer", protocols: [{ name: "range", metadata: new Uint8Array(0) }] })).errorCode,
      (await client.request(14, 3, { groupId: "g", generationId: 1, memberId: "m", groupInstanceId: null, assignments: [] })).errorCode,
      (await client.request(12, 3, { groupId: "g", generationId: 1, memberId: "m", groupInstanceId: null })).errorCode,
      (await client.request(13, 3, { groupId: "g", members: [{ memberId: "m", groupInstanceId: null }] })).errorCode,
    ]);
    expect(codes).toEqual([E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED]);
  });

  test("OffsetFetch, DescribeGroups, FindCoordinator: DESCRIBE on the group; OffsetFetch also on the topic", async () => {
    expect((await commit("g", ["t", "u"])).topics[0].partitions[0].errorCode).toBe(E.NONE);
    const [fetched, describedGroups, found, foundOld] = await denied([deny(Res.GROUP, "g", Op.DESCRIBE)], async () => [
      await client.request(9, 8, { groups: [{ groupId: "g", topics: null }], requireStable: false }),
      await client.request(15, 5, { groups: ["g"], includeAuthorizedOperations: true }),
      await client.request(10, 4, { keyType: 0, coordinatorKeys: ["g", "h"] }),
      await client.request(10, 3, { key: "g", keyType: 0 }),
    ]);
    expect(fetched.groups[0].errorCode).toBe(E.GROUP_AUTHORIZATION_FAILED);
    expect(describedGroups.groups[0].errorCode).toBe(E.GROUP_AUTHORIZATION_FAILED);
    expect(found.coordinators.map((c: { errorCode: number }) => c.errorCode)).toEqual([E.GROUP_AUTHORIZATION_FAILED, E.NONE]);
    expect([foundOld.errorCode, foundOld.errorMessage]).toEqual([E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."]);

    const byTopic = await denied([deny(Res.TOPIC, "t", Op.DESCRIBE)], async () => [
      await client.request(9, 7, { groupId: "g", topics: [{ name: "t", partitionIndexes: [0] }, { name: "u", partitionIndexes: [0] }], requireStable: false }),
      await client.request(9, 7, { groupId: "g", topics: null, requireStable: false }),
    ]);
    expect(byTopic[0]!.topics.map((t: { name: string; partitions: { errorCode: number }[] }) => [t.name, t.partitions[0]!.errorCode])).toEqual([
      ["u", E.NONE],
      ["t", E.TOPIC_AUTHORIZATION_FAILED],
    ]);
    expect(byTopic[1]!.topics.map((t: { name: string }) => t.name)).toEqual(["u"]);
  });

  test("ListGroups: every group with DESCRIBE on the cluster, else those the principal may DESCRIBE", async () => {
    await commit("g1");
    await commit("g2");
    const list = async () => ((await client.request(16, 4, { statesFilter: [] })).groups as { groupId: string }[]).map((g) => g.groupId).filter((id) => id.startsWith("g")).sort();
    expect(await denied([deny(Res.GROUP, "g1", Op.DESCRIBE)], list)).toContain("g1");
    expect(await denied([deny(Res.GROUP, "g1", Op.DESCRIBE), deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE)], list)).not.toContain("g1");
  });

  test("DeleteGroups and OffsetDelete: DELETE on the group; OffsetDelete READ on the topic", async () => {
    await commit("gd");
    const [deleted, offsets] = await denied([deny(Res.GROUP, "gd", Op.DELETE)], async () => [
      await client.request(42, 2, { groupsNames: ["gd"] }),
      await client.request(47, 0, { groupId: "gd", topics: [{ name: "t", partitions: [{ partitionIndex: 0 }] }] }),
    ]);
    expect(deleted.results).toMatchObject([{ groupId: "gd", errorCode: E.GROUP_AUTHORIZATION_FAILED }]);
    expect(offsets.errorCode).toBe(E.GROUP_AUTHORIZATION_FAILED);
    const byTopic = await denied([deny(Res.TOPIC, "t", Op.READ)], () => client.request(47, 0, { groupId: "gd", topics: [{ name: "t", partitions: [{ partitionIndex: 0 }] }] }));
    expect(byTopic.topics[0].partitions[0].errorCode).toBe(E.TOPIC_AUTHORIZATION_FAILED);
  });
});

describe("transactions and producer ids", () => {
  test("InitProducerId: WRITE on the transactional id; idempotent: IDEMPOTENT_WRITE on the cluster or WRITE on some topic", async () => {
    const init = (transactionalId: string | null) => client.request(22, 4, { transactionalId, transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    expect((await denied([deny(Res.TRANSACTIONAL_ID, "tx-i", Op.WRITE)], () => init("tx-i"))).errorCode).toBe(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    // WRITE on the topics is enough without IDEMPOTENT_WRITE.
    expect((await denied([deny(Res.CLUSTER, CLUSTER, Op.IDEMPOTENT_WRITE)], () => init(null))).errorCode).toBe(E.NONE);
    const neither = await denied([deny(Res.CLUSTER, CLUSTER, Op.IDEMPOTENT_WRITE), deny(Res.TOPIC, "*", Op.WRITE)], () => init(null));
    expect(neither.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
  });

  test("AddPartitionsToTxn: v3 WRITE on the id and the topics; v4 (from brokers) CLUSTER_ACTION", async () => {
    const init = await client.request(22, 4, { transactionalId: "tx-a", transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    const add = () =>
      client.request(24, 3, {
        v3AndBelowTransactionalId: "tx-a",
        v3AndBelowProducerId: init.producerId,
        v3AndBelowProducerEpoch: init.producerEpoch,
        v3AndBelowTopics: [{ name: "t", partitions: [0] }, { name: "u", partitions: [0] }],
      });
    const codes = (res: { resultsByTopicV3AndBelow: { resultsByPartition: { partitionErrorCode: number }[] }[] }) => res.resultsByTopicV3AndBelow.map((t) => t.resultsByPartition[0]!.partitionErrorCode);
    expect(codes(await denied([deny(Res.TRANSACTIONAL_ID, "tx-a", Op.WRITE)], add))).toEqual([E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]);
    expect(codes(await denied([deny(Res.TOPIC, "t", Op.WRITE)], add))).toEqual([E.TOPIC_AUTHORIZATION_FAILED, E.OPERATION_NOT_ATTEMPTED]);
    const v4 = await client.request(24, 4, { transactions: [{ transactionalId: "tx-a", producerId: init.producerId, producerEpoch: init.producerEpoch, verifyOnly: true, topics: [{ name: "t", partitions: [0] }] }] });
    expect(v4.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
  });

  test("AddOffsetsToTxn, TxnOffsetCommit, EndTxn: WRITE on the id, READ on the group", async () => {
    const init = await client.request(22, 4, { transactionalId: "tx-o", transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    const ref = { transactionalId: "tx-o", producerId: init.producerId, producerEpoch: init.producerEpoch };
    const addOffsets = () => client.request(25, 3, { ...ref, groupId: "g" });
    const txnCommit = () =>
      client.request(28, 3, { ...ref, groupId: "g", generationId: -1, memberId: "", groupInstanceId: null, topics: [{ name: "t", partitions: [{ partitionIndex: 0, committedOffset: 0, committedLeaderEpoch: -1, committedMetadata: "" }] }] });
    const endTxn = () => client.request(26, 3, { ...ref, committed: true });
    const idDenied = await denied([deny(Res.TRANSACTIONAL_ID, "tx-o", Op.WRITE)], async () => [(await addOffsets()).errorCode, (await txnCommit()).topics[0].partitions[0].errorCode, (await endTxn()).errorCode]);
    expect(idDenied).toEqual([E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]);
    const groupDenied = await denied([deny(Res.GROUP, "g", Op.READ)], async () => [(await addOffsets()).errorCode, (await txnCommit()).topics[0].partitions[0].errorCode]);
    expect(groupDenied).toEqual([E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED]);
    expect((await denied([deny(Res.TOPIC, "t", Op.READ)], txnCommit)).topics[0].partitions[0].errorCode).toBe(E.TOPIC_AUTHORIZATION_FAILED);
  });

  test("WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster", async () => {
    const res = await client.request(27, 1, { markers: [{ producerId: 1, producerEpoch: 0, transactionResult: true, topics: [{ name: "t", partitionIndexes: [0] }], coordinatorEpoch: 0 }] });
    expect(res.markers[0].topics[0].partitions[0].errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
  });

  test("DescribeTransactions and ListTransactions: DESCRIBE on the id", async () => {
    await client.request(22, 4, { transactionalId: "tx-d", transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    const [described, listed] = await denied([deny(Res.TRANSACTIONAL_ID, "tx-d", Op.DESCRIBE)], async () => [
      await client.request(65, 0, { transactionalIds: ["tx-d", "tx-o"] }),
      await client.request(66, 1, { stateFilters: [], producerIdFilters: [], durationFilter: -1 }),
    ]);
    expect(described.transactionStates.map((s: { errorCode: number }) => s.errorCode)).toEqual([E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.NONE]);
    const ids = (listed.transactionStates as { transactionalId: string }[]).map((s) => s.transactionalId);
    expect(ids).toContain("tx-o");
    expect(ids).not.toContain("tx-d");
  });
});

describe("quotas and SCRAM credentials", () => {
  test("DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster; Describe/AlterUserScramCredentials: DESCRIBE / ALTER", async () => {
    const [quotas, described, altered] = await denied([deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS), deny(Res.CLUSTER, CLUSTER, Op.DESCRIBE), deny(Res.CLUSTER, CLUSTER, Op.ALTER)], async () => [
      await client.request(48, 1, { components: [], strict: false }),
      await client.request(50, 0, { users: null }),
      await client.request(51, 0, { deletions: [{ name: "alice", mechanism: 1 }], upsertions: [] }),
    ]);
    expect(quotas.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
    expect(described.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
    expect(altered.results).toMatchObject([{ user: "alice", errorCode: E.CLUSTER_AUTHORIZATION_FAILED }]);
    expect((await client.request(48, 1, { components: [], strict: false })).errorCode).toBe(E.NONE);
    expect((await client.request(50, 0, { users: null })).errorCode).toBe(E.NONE);
  });
});
