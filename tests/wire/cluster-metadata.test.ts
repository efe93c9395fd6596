/**
 * Metadata and DescribeCluster in cluster mode, over raw frames against an in-process broker whose live
 * brokers come from a directory the test controls (the etcd directory's stand-in): every live broker is
 * listed, the controller is the lowest live id; partitions are led as the ownership source (the ownership
 * manager's stand-in) says: nobody before it is given, then this broker at its epoch or another live broker.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker } from "../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../src/broker/config.ts";
import type { OwnershipSource } from "../../src/cluster/cluster-ownership.ts";
import type { BrokerEndpoint } from "../../src/cluster/ownership.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { startKafkaListener, type KafkaListener } from "../../src/net/kafka-listener.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";
import { WireClient } from "../support/wire-client.ts";

let dataDir: string;
let broker: Broker;
let listener: KafkaListener;
let client: WireClient;
/** What the directory says is live; this broker (id 2) is in it, as once it registered. */
let live: BrokerEndpoint[] = [];

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "bunka-cluster-metadata-"));
  const config = { ...defaultBrokerConfig(), dataDir, brokerId: 2, listenPort: 0, httpPort: 0, autoCreateTopicsEnable: false };
  broker = await createBroker({ config, fs: nodeFs, clock: systemClock, log: silentLogger, maintenance: false, cleaner: false, liveBrokers: () => live });
  listener = await startKafkaListener({
    host: "127.0.0.1",
    port: 0,
    maxRequestBytes: config.socketRequestMaxBytes,
    idleTimeoutMs: config.connectionsMaxIdleMs,
    maxHeldResponseBytesPerConnection: config.maxHeldResponseBytesPerConnection,
    maxHeldResponseBytes: config.maxHeldResponseBytes,
    dispatch: (frame, conn) => broker.dispatch(frame, conn),
    log: silentLogger,
  });
  broker.setAdvertisedListener(listener.host, listener.port);
  client = await WireClient.connect(listener.port);
  const created = await client.request(19, 7, { topics: [{ name: "orders", numPartitions: 3, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000 });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
});

afterAll(async () => {
  client?.close();
  await listener?.close();
  await broker?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const self = () => ({ nodeId: 2, host: "127.0.0.1", port: listener.port, rack: null });

function brokersOf(res: { brokers: { nodeId?: number; brokerId?: number; host: string; port: number; rack: string | null }[] }) {
  return res.brokers.map((b) => ({ nodeId: b.nodeId ?? b.brokerId, host: b.host, port: b.port, rack: b.rack }));
}

describe("cluster mode: Metadata and DescribeCluster", () => {
  test("before the ownership manager runs, no partition has a leader (LEADER_NOT_AVAILABLE) and Produce is NOT_LEADER_OR_FOLLOWER", async () => {
    live = [{ brokerId: 2, host: "127.0.0.1", port: listener.port, rack: null }];
    const md = await client.request(3, 12, { topics: [{ name: "orders", topicId: "AAAAAAAAAAAAAAAAAAAAAA" }], allowAutoTopicCreation: false });
    expect(md.topics[0].partitions.map((p: { leaderId: number; errorCode: number }) => [p.leaderId, p.errorCode])).toEqual([
      [-1, ErrorCode.LEADER_NOT_AVAILABLE],
      [-1, ErrorCode.LEADER_NOT_AVAILABLE],
      [-1, ErrorCode.LEADER_NOT_AVAILABLE],
    ]);
    // DescribeTopicPartitions (the Java admin client's describeTopics): no leader either, and no error, as Apache answers.
    const dtp = await client.request(75, 0, { topics: [{ name: "orders" }], responsePartitionLimit: 100, cursor: null });
    expect(dtp.topics[0].partitions.map((p: { leaderId: number; errorCode: number; isrNodes: number[] }) => [p.leaderId, p.errorCode, p.isrNodes])).toEqual([
      [-1, ErrorCode.NONE, []],
      [-1, ErrorCode.NONE, []],
      [-1, ErrorCode.NONE, []],
    ]);
    const produced = await client.request(0, 9, { transactionalId: null, acks: -1, timeoutMs: 5000, topicData: [{ name: "orders", partitionData: [{ index: 0, records: null }] }] });
    expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NOT_LEADER_OR_FOLLOWER);
    // From here on, partitions 0 and 1 are this broker's at epoch 3 and partition 2 is broker 7's.
    const source: OwnershipSource = {
      standing: (r) => (r.kind === "partition" && r.partition === 2 ? { state: "elsewhere", brokerId: 7, epoch: 5 } : { state: "owned", epoch: 3 }),
      mayAct: (r, epoch) => epoch === 3 && !(r.kind === "partition" && r.partition === 2),
      ownerOf: (r) => (r.kind === "partition" && r.partition === 2 ? 7 : 2),
    };
    broker.useOwnership(source);
  });

  test("every live broker, lowest id first; the lowest id is the controller; leaders as the ownership says", async () => {
    live = [
      { brokerId: 7, host: "10.0.0.7", port: 9092, rack: null },
      { brokerId: 2, host: "127.0.0.1", port: listener.port, rack: null },
      { brokerId: 1, host: "10.0.0.1", port: 9093, rack: "r1" },
    ];
    const expected = [{ nodeId: 1, host: "10.0.0.1", port: 9093, rack: "r1" }, self(), { nodeId: 7, host: "10.0.0.7", port: 9092, rack: null }];
    for (const version of [1, 9, 12]) {
      const md = await client.request(3, version, { topics: [{ name: "orders", topicId: "AAAAAAAAAAAAAAAAAAAAAA" }], allowAutoTopicCreation: false });
      expect(brokersOf(md).map((b) => b.nodeId)).toEqual([1, 2, 7]);
      expect(md.controllerId).toBe(1);
      expect(md.topics[0].partitions.map((p: { leaderId: number }) => p.leaderId)).toEqual([2, 2, 7]);
      if (version >= 7) expect(md.topics[0].partitions.map((p: { leaderEpoch: number }) => p.leaderEpoch)).toEqual([3, 3, 5]);
    }
    // DescribeTopicPartitions names the same leaders, at the same epochs.
    const dtp = await client.request(75, 0, { topics: [{ name: "orders" }], responsePartitionLimit: 100, cursor: null });
    expect(dtp.topics[0].partitions.map((p: { leaderId: number; leaderEpoch: number; replicaNodes: number[] }) => [p.leaderId, p.leaderEpoch, p.replicaNodes])).toEqual([
      [2, 3, [2]],
      [2, 3, [2]],
      [7, 5, [7]],
    ]);
    const md = await client.request(3, 12, { topics: null });
    expect(brokersOf(md)).toEqual(expected);
    const dc = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(dc.errorCode).toBe(ErrorCode.NONE);
    expect(dc.controllerId).toBe(1);
    expect(brokersOf(dc)).toEqual(expected);
    expect(dc.clusterId).toBe(md.clusterId);
  });

  test("DeleteRecords: a partition another broker leads is NOT_LEADER_OR_FOLLOWER (the admin client retries at the leader); an unknown one UNKNOWN_TOPIC_OR_PARTITION", async () => {
    const res = await client.request(21, 2, { topics: [{ name: "orders", partitions: [{ partitionIndex: 2, offset: -1 }, { partitionIndex: 9, offset: -1 }] }], timeoutMs: 5000 });
    expect(res.topics[0].partitions.map((p: { partitionIndex: number; errorCode: number }) => [p.partitionIndex, p.errorCode])).toEqual([
      [2, ErrorCode.NOT_LEADER_OR_FOLLOWER],
      [9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]);
  });

  test("the answers follow the directory: a broker that leaves is gone, and the controller moves up", async () => {
    live = [
      { brokerId: 2, host: "127.0.0.1", port: listener.port, rack: null },
      { brokerId: 7, host: "10.0.0.7", port: 9092, rack: null },
    ];
    const dc = await client.request(60, 0, { includeClusterAuthorizedOperations: false });
    expect(brokersOf(dc).map((b) => b.nodeId)).toEqual([2, 7]);
    expect(dc.controllerId).toBe(2);
  });

  test("this broker is listed while the directory does not have it (its lease lapsed), so its partitions keep a leader", async () => {
    live = [{ brokerId: 7, host: "10.0.0.7", port: 9092, rack: null }];
    const leaders = await client.request(3, 12, { topics: [{ name: "orders", topicId: "AAAAAAAAAAAAAAAAAAAAAA" }], allowAutoTopicCreation: false });
    expect(leaders.topics[0].partitions.map((p: { leaderId: number }) => p.leaderId)).toEqual([2, 2, 7]);
    const md = await client.request(3, 12, { topics: null });
    expect(brokersOf(md)).toEqual([self(), { nodeId: 7, host: "10.0.0.7", port: 9092, rack: null }]);
    expect(md.controllerId).toBe(2);
    live = [];
    const alone = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(brokersOf(alone)).toEqual([self()]);
  });
});
