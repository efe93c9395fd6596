/**
 * Wire tests of DescribeLogDirs (35), the feature flags of ApiVersions (18) with UpdateFeatures (57), and
 * DescribeTopicPartitions (75), with raw frames against an in-process broker on the real file system.
 * Codes, messages and paging are the ones Apache Kafka 4.1 gives (tests/interop/admin-tools-reference.test.ts
 * compares the tools' output with a real Apache Kafka broker).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, statSync, statfsSync } from "node:fs";
import { join, resolve } from "node:path";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res, type AclBinding } from "../../src/domain/security/acl.ts";
import { ErrorCode as E } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;
let client: WireClient;

const createTopics = async (c: WireClient, topics: [string, number][]) => {
  const created = await c.request(19, 7, {
    topics: topics.map(([name, numPartitions]) => ({ name, numPartitions, replicationFactor: 1, assignments: [], configs: [] })),
    timeoutMs: 5000,
    validateOnly: false,
  });
  expect(created.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(topics.map(() => E.NONE));
};

const produce = async (topic: string, partition: number, values: string[]) => {
  const res = await client.request(0, 9, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 5000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records: buildBatch({ records: values.map((value) => ({ value })) }) }] }],
  });
  expect(res.responses[0].partitionResponses[0].errorCode).toBe(E.NONE);
};

/** The bytes of a partition's .log files on disk. */
const logFileBytes = (topic: string, partition: number) => {
  const dir = join(broker.dataDir, `${topic}-${partition}`);
  return readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
};

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  await createTopics(client, [["logs-a", 3], ["logs-b", 1]]);
  const altered = await client.request(44, 1, {
    resources: [{ resourceType: 2, resourceName: "logs-a", configs: [{ name: "segment.bytes", configOperation: 0, value: "200" }] }],
    validateOnly: false,
  });
  expect(altered.responses[0].errorCode).toBe(E.NONE);
  // Small segments (set above), so that the size of logs-a-1 spans several .log files.
  for (let i = 0; i < 5; i++) await produce("logs-a", 1, [`value-${i}`, `another value ${i}`]);
  await produce("logs-b", 0, ["b"]);
});
afterAll(async () => {
  client.close();
  await broker.stop();
});

describe("ApiVersions features", () => {
  test("v4 answers the supported features, each at level 0, nothing finalized above 0, epoch 0", async () => {
    const res = await client.request(18, 4, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
    expect(res.supportedFeatures.map((f: { name: string; minVersion: number; maxVersion: number }) => [f.name, f.minVersion, f.maxVersion])).toEqual([
      ["eligible.leader.replicas.version", 0, 0],
      ["group.version", 0, 0],
      ["share.version", 0, 0],
      ["transaction.version", 0, 0],
    ]);
    expect(res.finalizedFeatures).toEqual([]);
    expect(res.finalizedFeaturesEpoch).toBe(0);
  });

  test("v3 leaves out features whose minimum is 0 (older clients cannot read them)", async () => {
    const res = await client.request(18, 3, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
    expect(res.supportedFeatures).toEqual([]);
    expect(res.finalizedFeaturesEpoch).toBe(0);
  });
});

describe("UpdateFeatures", () => {
  const update = (version: number, featureUpdates: { feature: string; maxVersionLevel: number; upgradeType?: number; allowDowngrade?: boolean }[], validateOnly = false) =>
    client.request(57, version, { timeoutMs: 5000, featureUpdates: featureUpdates.map((u) => ({ upgradeType: 1, allowDowngrade: false, ...u })), validateOnly });
  const failedAll = "The update failed for all features since the following feature had an error: ";

  test("a level bunka does not serve is INVALID_UPDATE_VERSION with Apache's message", async () => {
    const res = await update(2, [{ feature: "transaction.version", maxVersionLevel: 2 }]);
    expect(res.errorCode).toBe(E.INVALID_UPDATE_VERSION);
    expect(res.errorMessage).toBe(`${failedAll}Invalid update version 2 for feature transaction.version. Local controller 0 does not support this feature.`);
    const mv = await update(1, [{ feature: "metadata.version", maxVersionLevel: 27 }]);
    expect(mv.errorMessage).toBe(`${failedAll}Invalid update version 27 for feature metadata.version. Local controller 0 does not support this feature.`);
    expect(mv.results).toEqual([]);
  });

  test("the first refused update fails the request; a bad upgrade type and a negative level have their own messages", async () => {
    const res = await update(1, [
      { feature: "group.version", maxVersionLevel: 0 },
      { feature: "group.version", maxVersionLevel: 1, upgradeType: 9 },
    ]);
    expect(res.errorMessage).toBe(`${failedAll}Invalid update version 1 for feature group.version. The controller does not support the given upgrade type.`);
    const negative = await update(2, [{ feature: "share.version", maxVersionLevel: -1, upgradeType: 2 }]);
    expect(negative.errorMessage).toBe(`${failedAll}Invalid update version -1 for feature share.version. A feature version cannot be less than 0.`);
  });

  test("an update to the level a feature is at succeeds and changes nothing; results only before v2", async () => {
    const v1 = await update(1, [{ feature: "group.version", maxVersionLevel: 0, upgradeType: 2 }], true);
    expect(v1.errorCode).toBe(E.NONE);
    expect(v1.results.map((r: { feature: string; errorCode: number }) => [r.feature, r.errorCode])).toEqual([["group.version", E.NONE]]);
    const v2 = await update(2, [{ feature: "transaction.version", maxVersionLevel: 0, upgradeType: 2 }]);
    expect(v2.errorCode).toBe(E.NONE);
    expect(v2.results).toEqual([]);
    const v0 = await update(0, [{ feature: "transaction.version", maxVersionLevel: 0, allowDowngrade: true }]);
    expect(v0.errorCode).toBe(E.NONE);
    const versions = await client.request(18, 4, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
    expect(versions.finalizedFeatures).toEqual([]);
  });
});

describe("DescribeLogDirs", () => {
  test("v4: the data directory with every partition's size on disk, offset lag 0, and the file system's bytes", async () => {
    const res = await client.request(35, 4, { topics: null });
    expect(res.errorCode).toBe(E.NONE);
    expect(res.results.length).toBe(1);
    const dir = res.results[0];
    expect(dir.errorCode).toBe(E.NONE);
    expect(dir.logDir).toBe(resolve(broker.dataDir));
    const fsStat = statfsSync(broker.dataDir);
    expect(dir.totalBytes).toBe(fsStat.blocks * ((fsStat as { frsize?: number }).frsize ?? fsStat.bsize));
    expect(dir.usableBytes).toBeGreaterThan(0);
    expect(dir.usableBytes).toBeLessThanOrEqual(dir.totalBytes);
    const described = dir.topics.flatMap((t: { name: string; partitions: { partitionIndex: number; partitionSize: number; offsetLag: number; isFutureKey: boolean }[] }) =>
      t.partitions.map((p) => [t.name, p.partitionIndex, p.partitionSize, p.offsetLag, p.isFutureKey]),
    );
    expect(described).toEqual([
      ["logs-a", 0, logFileBytes("logs-a", 0), 0, false],
      ["logs-a", 1, logFileBytes("logs-a", 1), 0, false],
      ["logs-a", 2, logFileBytes("logs-a", 2), 0, false],
      ["logs-b", 0, logFileBytes("logs-b", 0), 0, false],
    ]);
    // The produced batches went to several segments of logs-a-1, all counted.
    expect(readdirSync(join(broker.dataDir, "logs-a-1")).filter((n) => n.endsWith(".log")).length).toBeGreaterThan(1);
    expect(logFileBytes("logs-a", 1)).toBeGreaterThan(0);
  });

  test("a topic list names partitions: unknown topics and partitions are left out", async () => {
    const res = await client.request(35, 2, {
      topics: [
        { topic: "logs-a", partitions: [1, 7] },
        { topic: "missing", partitions: [0] },
      ],
    });
    expect(res.results[0].topics.map((t: { name: string; partitions: { partitionIndex: number }[] }) => [t.name, t.partitions.map((p) => p.partitionIndex)])).toEqual([["logs-a", [1]]]);
  });

  test("v0 (not flexible) and v1 answer the same partitions, without the file system's bytes", async () => {
    for (const version of [0, 1]) {
      const res = await client.request(35, version, { topics: [{ topic: "logs-b", partitions: [0] }] });
      expect(res.results[0].logDir).toBe(resolve(broker.dataDir));
      expect(res.results[0].topics[0].partitions[0].partitionSize).toBe(logFileBytes("logs-b", 0));
      expect(res.results[0].totalBytes).toBe(-1);
    }
  });
});

describe("DescribeTopicPartitions", () => {
  beforeAll(async () => {
    await createTopics(client, [["dtp-a", 3], ["dtp-b", 2], ["dtp-c", 1]]);
  });
  type Topic = { errorCode: number; name: string; topicId: string; partitions: { partitionIndex: number; leaderId: number; leaderEpoch: number; replicaNodes: number[]; isrNodes: number[]; eligibleLeaderReplicas: number[]; lastKnownElr: number[]; offlineReplicas: number[] }[] };
  const names = ["dtp-a", "dtp-b", "dtp-c"];
  const request = (topics: string[], responsePartitionLimit = 2000, cursor: { topicName: string; partitionIndex: number } | null = null) =>
    client.request(75, 0, { topics: topics.map((name) => ({ name })), responsePartitionLimit, cursor });

  test("partitions as Metadata answers them, ELR empty, topic ids and authorized operations", async () => {
    const res = await request(names);
    const metadata = await client.request(3, 12, { topics: names.map((name) => ({ name, topicId: ZERO_UUID })), allowAutoTopicCreation: false, includeTopicAuthorizedOperations: true });
    expect(res.nextCursor).toBeNull();
    expect(res.topics.map((t: Topic) => t.name)).toEqual(names);
    for (const [i, t] of (res.topics as Topic[]).entries()) {
      const m = metadata.topics[i];
      expect(t.errorCode).toBe(E.NONE);
      expect(t.topicId).toBe(m.topicId);
      expect((t as unknown as { topicAuthorizedOperations: number }).topicAuthorizedOperations).toBe(m.topicAuthorizedOperations);
      expect(t.partitions.map((p) => [p.partitionIndex, p.leaderId, p.leaderEpoch, p.replicaNodes, p.isrNodes])).toEqual(
        m.partitions.map((p: Topic["partitions"][number]) => [p.partitionIndex, p.leaderId, p.leaderEpoch, p.replicaNodes, p.isrNodes]),
      );
      for (const p of t.partitions) {
        expect(p.eligibleLeaderReplicas).toEqual([]);
        expect(p.lastKnownElr).toEqual([]);
        expect(p.offlineReplicas).toEqual([]);
      }
    }
  });

  test("the partition limit pages with a cursor, as Apache: within a topic and at a topic's start", async () => {
    const seen: string[] = [];
    let cursor: { topicName: string; partitionIndex: number } | null = null;
    const cursors: unknown[] = [];
    for (let page = 0; page < 10; page++) {
      const res = await request(names, 2, cursor);
      for (const t of res.topics as Topic[]) for (const p of t.partitions) seen.push(`${t.name}-${p.partitionIndex}`);
      cursor = res.nextCursor === null ? null : { topicName: res.nextCursor.topicName, partitionIndex: res.nextCursor.partitionIndex };
      cursors.push(cursor);
      if (cursor === null) break;
    }
    expect(seen).toEqual(["dtp-a-0", "dtp-a-1", "dtp-a-2", "dtp-b-0", "dtp-b-1", "dtp-c-0"]);
    expect(cursors).toEqual([{ topicName: "dtp-a", partitionIndex: 2 }, { topicName: "dtp-b", partitionIndex: 1 }, null]);
    // A limit reached exactly at a topic's end: the cursor names the next topic's start.
    const exact = await request(names, 3);
    expect((exact.topics as Topic[]).map((t) => t.name)).toEqual(["dtp-a"]);
    expect(exact.nextCursor).toEqual({ topicName: "dtp-b", partitionIndex: 0, _unknownTaggedFields: undefined });
    // A limit below 1 is 1.
    const zero = await request(names, 0);
    expect(zero.nextCursor).toEqual({ topicName: "dtp-a", partitionIndex: 1, _unknownTaggedFields: undefined });
  });

  test("an empty list is every topic from the cursor's on; unknown topics are left out of it", async () => {
    const res = await request([], 2000, { topicName: "dtp-b", partitionIndex: 1 });
    const answered = (res.topics as Topic[]).map((t) => [t.name, t.partitions.map((p) => p.partitionIndex)]);
    expect(answered[0]).toEqual(["dtp-b", [1]]);
    expect(answered[1]).toEqual(["dtp-c", [0]]);
    expect(answered.map(([name]) => name)).not.toContain("dtp-a");
  });

  test("unknown and illegal names, and a bad cursor", async () => {
    const res = await request(["dtp-c", "no-such-topic", "bad/name"]);
    expect((res.topics as Topic[]).map((t) => [t.name, t.errorCode, t.topicId, t.partitions.length])).toEqual([
      ["bad/name", E.INVALID_TOPIC_EXCEPTION, ZERO_UUID, 0],
      ["dtp-c", E.NONE, expect.any(String), 1],
      ["no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, 0],
    ]);
    const notInList = await request(["dtp-c"], 10, { topicName: "dtp-a", partitionIndex: 0 });
    expect((notInList.topics as Topic[]).map((t) => [t.name, t.errorCode])).toEqual([["dtp-c", E.INVALID_REQUEST]]);
    const negative = await request(["dtp-c"], 10, { topicName: "dtp-c", partitionIndex: -1 });
    expect((negative.topics as Topic[]).map((t) => [t.name, t.errorCode])).toEqual([["dtp-c", E.INVALID_REQUEST]]);
  });
});

describe("authorization", () => {
  let secured: TestBroker;
  let anon: WireClient;
  const allow = (resourceType: number, resourceName: string, operation: number, permissionType: number = Perm.ALLOW): AclBinding => ({
    resourceType,
    resourceName,
    patternType: Pat.LITERAL,
    principal: "User:ANONYMOUS",
    host: "*",
    operation,
    permissionType,
  });
  beforeAll(async () => {
    secured = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, autoCreateTopicsEnable: false });
    anon = await WireClient.connect(secured.port);
    // Every topic but "hidden", CREATE on the cluster; no DESCRIBE and no ALTER on it.
    await secured.broker.services.authorizer.create([
      allow(Res.TOPIC, "*", Op.ALL),
      allow(Res.TOPIC, "hidden", Op.DESCRIBE, Perm.DENY),
      allow(Res.CLUSTER, "kafka-cluster", Op.CREATE),
    ]);
    await createTopics(anon, [["open", 1], ["hidden", 1]]);
  });
  afterAll(async () => {
    anon.close();
    await secured.stop();
  });

  test("DescribeLogDirs needs DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED from v3, no dirs before", async () => {
    const v4 = await anon.request(35, 4, { topics: null });
    expect(v4.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
    expect(v4.results).toEqual([]);
    const v2 = await anon.request(35, 2, { topics: null });
    expect(v2.results).toEqual([]);
  });

  test("UpdateFeatures needs ALTER on the cluster", async () => {
    const res = await anon.request(57, 1, { timeoutMs: 5000, featureUpdates: [{ feature: "group.version", maxVersionLevel: 0, upgradeType: 2 }], validateOnly: true });
    expect(res.errorCode).toBe(E.CLUSTER_AUTHORIZATION_FAILED);
  });

  test("DescribeTopicPartitions: a named topic without DESCRIBE is refused, without its id, last; the all-topics answer leaves it out", async () => {
    const named = await anon.request(75, 0, { topics: [{ name: "hidden" }, { name: "open" }, { name: "absent" }], responsePartitionLimit: 100, cursor: null });
    expect(named.topics.map((t: { name: string; errorCode: number; topicId: string }) => [t.name, t.errorCode, t.topicId === ZERO_UUID])).toEqual([
      ["absent", E.UNKNOWN_TOPIC_OR_PARTITION, true],
      ["open", E.NONE, false],
      ["hidden", E.TOPIC_AUTHORIZATION_FAILED, true],
    ]);
    const all = await anon.request(75, 0, { topics: [], responsePartitionLimit: 100, cursor: null });
    expect(all.topics.map((t: { name: string }) => t.name)).toEqual(["open"]);
  });
});
