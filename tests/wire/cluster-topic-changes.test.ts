/**
 * Two in-process brokers on one data directory sharing a real etcd's metadata gate and feed: CreateTopics
 * of one name sent to both at once creates it once (the other answers TOPIC_ALREADY_EXISTS); a topic
 * created, grown or deleted on one is what Metadata on the other answers; a topic config or a cluster-wide
 * broker default set on one is what DescribeConfigs on the other answers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startClusterMetadata, type ClusterMetadata } from "../../src/broker/metadata-mutations.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { EtcdServer } from "../support/etcd.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { waitUntil } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const TOPIC = 2;
const BROKER = 4;
const SET = 0;
const CLUSTER_DEFAULT = 3;
const ZERO = "00000000-0000-0000-0000-000000000000";

let etcd: EtcdServer;
let etcdClient: EtcdClient;
let dataDir: string;
const brokers: TestBroker[] = [];
const clients: WireClient[] = [];
const gates: ClusterMetadata[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  etcdClient = new EtcdClient({ endpoints: etcd.endpoint });
  dataDir = mkdtempSync(join(tmpdir(), "bunka-cluster-topics-"));
  for (const brokerId of [1, 2]) {
    const broker = await startTestBroker({ dataDir, brokerId, autoCreateTopicsEnable: false, numPartitions: 1 }, { cleaner: false });
    brokers.push(broker);
    const lease = await etcdClient.leaseGrant(30);
    gates.push(
      await startClusterMetadata({ client: etcdClient, clusterId: "cluster-topics", lease: () => ({ id: lease.id, valid: true }), services: broker.broker.services }),
    );
    clients.push(await WireClient.connect(broker.port));
  }
});

afterAll(async () => {
  for (const client of clients) client.close();
  for (const gate of gates) await gate.close();
  for (const broker of brokers) await broker.stop();
  etcdClient?.close();
  await etcd?.close();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

const createTopic = (client: WireClient, name: string, partitions: number) =>
  client.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });

const metadata = (client: WireClient, name: string) => client.request(3, 12, { topics: [{ name, topicId: ZERO }], allowAutoTopicCreation: false });

const describeConfigs = (client: WireClient, resourceType: number, resourceName: string) =>
  client.request(32, 4, { resources: [{ resourceType, resourceName, configurationKeys: null }], includeSynonyms: false, includeDocumentation: false });

const alter = (client: WireClient, resourceType: number, resourceName: string, name: string, value: string) =>
  client.request(44, 1, { resources: [{ resourceType, resourceName, configs: [{ name, configOperation: SET, value }] }], validateOnly: false });

describe("topic and config changes across two brokers of one data directory", () => {
  test("CreateTopics of one name on both at once: one creates it, the other answers TOPIC_ALREADY_EXISTS", async () => {
    for (let i = 0; i < 5; i++) {
      const name = `raced-${i}`;
      const [one, two] = await Promise.all([createTopic(clients[0]!, name, 2), createTopic(clients[1]!, name, 3)]);
      const codes = [one.topics[0].errorCode, two.topics[0].errorCode].sort();
      expect(codes).toEqual([ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS].sort());
      const winner = one.topics[0].errorCode === ErrorCode.NONE ? one.topics[0] : two.topics[0];
      // Both brokers answer the winner's topic: its id and its partition count.
      for (const client of clients) {
        const md = await metadata(client, name);
        expect(md.topics[0].errorCode).toBe(ErrorCode.NONE);
        expect(md.topics[0].topicId).toBe(winner.topicId);
        expect(md.topics[0].partitions).toHaveLength(winner.numPartitions);
      }
    }
  });

  test("a topic created, grown and deleted on one broker is what Metadata on the other answers", async () => {
    const [a, b] = clients as [WireClient, WireClient];
    const servicesB = brokers[1]!.broker.services;
    expect((await createTopic(a, "seen-elsewhere", 2)).topics[0].errorCode).toBe(ErrorCode.NONE);
    // Broker 2 changed nothing, so only the announcement can tell it.
    await waitUntil(() => servicesB.topics.get("seen-elsewhere") !== undefined, "broker 2 reads the new topic");
    const md = await metadata(b, "seen-elsewhere");
    expect(md.topics[0].errorCode).toBe(ErrorCode.NONE);
    expect(md.topics[0].partitions).toHaveLength(2);

    const grown = await a.request(37, 3, { topics: [{ name: "seen-elsewhere", count: 4, assignments: null }], timeoutMs: 1000, validateOnly: false });
    expect(grown.results[0].errorCode).toBe(ErrorCode.NONE);
    await waitUntil(() => servicesB.topics.get("seen-elsewhere")?.partitions === 4, "broker 2 reads the new partitions");
    expect((await metadata(b, "seen-elsewhere")).topics[0].partitions).toHaveLength(4);

    // Deleted on broker 2 this time; broker 1 forgets it.
    const deleted = await b.request(20, 6, { topics: [{ name: "seen-elsewhere", topicId: ZERO }], timeoutMs: 1000 });
    expect(deleted.responses[0].errorCode).toBe(ErrorCode.NONE);
    await waitUntil(() => brokers[0]!.broker.services.topics.get("seen-elsewhere") === undefined, "broker 1 forgets the topic");
    expect((await metadata(a, "seen-elsewhere")).topics[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  });

  test("a topic config set on one broker is described on the other", async () => {
    const [a, b] = clients as [WireClient, WireClient];
    expect((await createTopic(a, "configured", 1)).topics[0].errorCode).toBe(ErrorCode.NONE);
    const altered = await alter(a, TOPIC, "configured", "retention.ms", "123456");
    expect(altered.responses[0].errorCode).toBe(ErrorCode.NONE);
    await waitUntil(() => brokers[1]!.broker.services.topics.get("configured")?.configs["retention.ms"] === "123456", "broker 2 reads the topic's configs");
    const described = await describeConfigs(b, TOPIC, "configured");
    const retention = described.results[0].configs.find((c: { name: string }) => c.name === "retention.ms");
    expect([retention.value, retention.configSource]).toEqual(["123456", 1]);
  });

  test("a cluster-wide broker default set on one broker is described, and in effect, on the other", async () => {
    const [a, b] = clients as [WireClient, WireClient];
    const servicesB = brokers[1]!.broker.services;
    const altered = await alter(a, BROKER, "", "log.retention.ms", "7200000");
    expect(altered.responses[0].errorCode).toBe(ErrorCode.NONE);
    await waitUntil(() => servicesB.brokerConfigs.get({ kind: "cluster" })["log.retention.ms"] === "7200000", "broker 2 reads the broker configs");
    expect(servicesB.runtimeConfig.topicDefaults()["retention.ms"]).toBe("7200000");
    const described = await describeConfigs(b, BROKER, "2");
    const retention = described.results[0].configs.find((c: { name: string }) => c.name === "log.retention.ms");
    expect([retention.value, retention.configSource]).toEqual(["7200000", CLUSTER_DEFAULT]);

    // A change on broker 2 merges with broker 1's (it read the file under the gate), and broker 1 sees it.
    expect((await alter(b, BROKER, "", "log.segment.bytes", "1048576")).responses[0].errorCode).toBe(ErrorCode.NONE);
    const servicesA = brokers[0]!.broker.services;
    await waitUntil(() => servicesA.brokerConfigs.get({ kind: "cluster" })["log.segment.bytes"] === "1048576", "broker 1 reads broker 2's change");
    expect(servicesA.brokerConfigs.get({ kind: "cluster" })).toEqual({ "log.retention.ms": "7200000", "log.segment.bytes": "1048576" });
  });
});
