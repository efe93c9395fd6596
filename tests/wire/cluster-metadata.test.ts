/**
 * Metadata and DescribeCluster in cluster mode, over raw frames against an in-process broker whose live
 * brokers come from a directory the test controls (the etcd directory's stand-in): every live broker is
 * listed, the controller is the lowest live id, and every partition is still led by this broker.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker } from "../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../src/broker/config.ts";
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
  test("every live broker, lowest id first; the lowest id is the controller; this broker leads every partition", async () => {
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
      expect(md.topics[0].partitions.map((p: { leaderId: number }) => p.leaderId)).toEqual([2, 2, 2]);
    }
    const md = await client.request(3, 12, { topics: null });
    expect(brokersOf(md)).toEqual(expected);
    const dc = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(dc.errorCode).toBe(ErrorCode.NONE);
    expect(dc.controllerId).toBe(1);
    expect(brokersOf(dc)).toEqual(expected);
    expect(dc.clusterId).toBe(md.clusterId);
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
    const md = await client.request(3, 12, { topics: null });
    expect(brokersOf(md)).toEqual([self(), { nodeId: 7, host: "10.0.0.7", port: 9092, rack: null }]);
    expect(md.controllerId).toBe(2);
    live = [];
    const alone = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(brokersOf(alone)).toEqual([self()]);
  });
});
