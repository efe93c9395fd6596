/**
 * Wire tests of the admin APIs with raw frames: ApiVersions, Metadata, CreateTopics,
 * DeleteTopics, DescribeCluster. Error codes and messages are the ones Apache Kafka gives.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;
let client: WireClient;

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
});
afterAll(async () => {
  client.close();
  await broker.stop();
});

describe("ApiVersions", () => {
  test("v0..v4 answer the registered handlers", async () => {
    for (let v = 0; v <= 4; v++) {
      const res = await client.request(18, v, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
      expect(res.errorCode).toBe(ErrorCode.NONE);
      const metadata = res.apiKeys.find((k: { apiKey: number }) => k.apiKey === 3);
      expect(metadata).toEqual({ apiKey: 3, minVersion: 0, maxVersion: 12, _unknownTaggedFields: undefined });
      expect(res.apiKeys.map((k: { apiKey: number }) => k.apiKey)).toEqual(
        broker.broker.registry.apiVersions().map((k) => k.apiKey),
      );
    }
  });

  test("an unknown ApiVersions version is answered in v0 with UNSUPPORTED_VERSION and the list", async () => {
    const framed = client.encodeRequest(18, 4, {});
    new DataView(framed.buffer, framed.byteOffset).setInt16(6, 99); // request_api_version
    const frame = await client.requestRaw(18, 99, framed);
    const res = client.decodeResponse(18, 0, frame) as { errorCode: number; apiKeys: unknown[] };
    expect(res.errorCode).toBe(ErrorCode.UNSUPPORTED_VERSION);
    expect(res.apiKeys.length).toBe(broker.broker.registry.apiVersions().length);
  });

  test("v3 with an illegal client software name is INVALID_REQUEST", async () => {
    const res = await client.request(18, 3, { clientSoftwareName: "bad name!", clientSoftwareVersion: "1" });
    expect(res.errorCode).toBe(ErrorCode.INVALID_REQUEST);
  });
});

describe("CreateTopics / Metadata / DeleteTopics", () => {
  test("create, describe, delete, and the errors Apache gives", async () => {
    const created = await client.request(19, 7, {
      topics: [
        { name: "orders", numPartitions: 3, replicationFactor: 1, assignments: [], configs: [{ name: "retention.ms", value: "1000" }] },
        { name: "bad/name", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] },
        { name: "zero", numPartitions: 0, replicationFactor: 1, assignments: [], configs: [] },
        { name: "rf3", numPartitions: 1, replicationFactor: 3, assignments: [], configs: [] },
        { name: "badcfg", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [{ name: "segment.bytes", value: "1" }] },
        { name: "dup", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] },
        { name: "dup", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] },
      ],
      timeoutMs: 1000,
      validateOnly: false,
    });
    const byName = (name: string) => created.topics.filter((t: { name: string }) => t.name === name);
    const orders = byName("orders")[0];
    expect(orders.errorCode).toBe(ErrorCode.NONE);
    expect(orders.numPartitions).toBe(3);
    expect(orders.replicationFactor).toBe(1);
    expect(orders.topicId).not.toBe(ZERO_UUID);
    expect(orders.configs.find((c: { name: string }) => c.name === "retention.ms").value).toBe("1000");
    expect(byName("bad/name")[0].errorCode).toBe(ErrorCode.INVALID_TOPIC_EXCEPTION);
    expect(byName("zero")[0].errorCode).toBe(ErrorCode.INVALID_PARTITIONS);
    expect(byName("rf3")[0].errorCode).toBe(ErrorCode.INVALID_REPLICATION_FACTOR);
    expect(byName("badcfg")[0].errorCode).toBe(ErrorCode.INVALID_CONFIG);
    expect(byName("dup").map((t: { errorCode: number }) => t.errorCode)).toEqual([ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]);

    const again = await client.request(19, 4, {
      topics: [{ name: "orders", numPartitions: 1, replicationFactor: -1, assignments: [], configs: [] }],
      timeoutMs: 1000,
    });
    expect(again.topics[0].errorCode).toBe(ErrorCode.TOPIC_ALREADY_EXISTS);
    expect(again.topics[0].errorMessage).toBe("Topic 'orders' already exists.");

    // Metadata in every version sees it, with this broker as leader and controller.
    for (let v = 0; v <= 12; v++) {
      const md = await client.request(3, v, { topics: [{ name: "orders", topicId: ZERO_UUID }], allowAutoTopicCreation: false });
      expect(md.brokers).toHaveLength(1);
      expect(md.brokers[0].port).toBe(broker.port);
      const topic = md.topics[0];
      expect(topic.errorCode).toBe(ErrorCode.NONE);
      expect(topic.partitions.map((p: { partitionIndex: number }) => p.partitionIndex)).toEqual([0, 1, 2]);
      expect(topic.partitions[0].leaderId).toBe(0);
      if (v >= 1) expect(md.controllerId).toBe(0);
      if (v >= 10) expect(topic.topicId).toBe(orders.topicId);
    }

    // By id (v12), unknown id, unknown name, illegal name.
    const byId = await client.request(3, 12, { topics: [{ name: null, topicId: orders.topicId }] });
    expect(byId.topics[0].name).toBe("orders");
    const unknownId = await client.request(3, 12, { topics: [{ name: null, topicId: "11111111-2222-3333-4444-555555555555" }] });
    expect(unknownId.topics[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_ID);
    const missing = await client.request(3, 9, { topics: [{ name: "nope" }, { name: "no way" }], allowAutoTopicCreation: true });
    expect(missing.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual([
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, // auto-creation is off on this broker
      ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]);

    const deleted = await client.request(20, 6, {
      topics: [
        { name: "orders", topicId: ZERO_UUID },
        { name: "nope", topicId: ZERO_UUID },
        { name: null, topicId: "11111111-2222-3333-4444-555555555555" },
      ],
      timeoutMs: 1000,
    });
    expect(deleted.responses.map((r: { errorCode: number }) => r.errorCode)).toEqual([
      ErrorCode.NONE,
      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      ErrorCode.UNKNOWN_TOPIC_ID,
    ]);
    const gone = await client.request(3, 1, { topics: [{ name: "orders" }] });
    expect(gone.topics[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  });

  test("validateOnly creates nothing", async () => {
    const res = await client.request(19, 5, {
      topics: [{ name: "dry", numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 1000,
      validateOnly: true,
    });
    expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
    const md = await client.request(3, 4, { topics: [{ name: "dry" }], allowAutoTopicCreation: false });
    expect(md.topics[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  });

  test("topics survive a restart; a re-created topic gets a new id and no old data", async () => {
    await client.request(19, 7, { topics: [{ name: "durable", numPartitions: 2, replicationFactor: -1, assignments: [], configs: [] }] });
    const before = await client.request(3, 12, { topics: [{ name: "durable" }] });
    client.close();
    await broker.restart();
    client = await WireClient.connect(broker.port);
    const after = await client.request(3, 12, { topics: [{ name: "durable" }] });
    expect(after.topics[0].topicId).toBe(before.topics[0].topicId);
    expect(after.topics[0].partitions).toHaveLength(2);

    await client.request(20, 6, { topics: [{ name: "durable", topicId: ZERO_UUID }] });
    await client.request(19, 7, { topics: [{ name: "durable", numPartitions: 1, replicationFactor: -1, assignments: [], configs: [] }] });
    const recreated = await client.request(3, 12, { topics: [{ name: "durable" }] });
    expect(recreated.topics[0].topicId).not.toBe(before.topics[0].topicId);
    expect(recreated.topics[0].partitions).toHaveLength(1);
  });
});

describe("auto topic creation", () => {
  test("Metadata creates a missing topic when the broker and the request allow it", async () => {
    const auto = await startTestBroker({ autoCreateTopicsEnable: true, numPartitions: 2 });
    const c = await WireClient.connect(auto.port);
    try {
      const refused = await c.request(3, 9, { topics: [{ name: "later" }], allowAutoTopicCreation: false });
      expect(refused.topics[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
      const md = await c.request(3, 9, { topics: [{ name: "later" }], allowAutoTopicCreation: true });
      expect(md.topics[0].errorCode).toBe(ErrorCode.NONE);
      expect(md.topics[0].partitions).toHaveLength(2);
      const v0 = await c.request(3, 0, { topics: [{ name: "older" }] });
      expect(v0.topics[0].errorCode).toBe(ErrorCode.NONE);
    } finally {
      c.close();
      await auto.stop();
    }
  });
});

describe("DescribeCluster", () => {
  test("answers the cluster id, controller and broker; controllers are a mismatched endpoint", async () => {
    const res = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(res.errorCode).toBe(ErrorCode.NONE);
    expect(res.clusterId).toHaveLength(22);
    expect(res.brokers).toEqual([{ brokerId: 0, host: "127.0.0.1", port: broker.port, rack: null, _unknownTaggedFields: undefined }]);
    const md = await client.request(3, 12, { topics: [] });
    expect(md.clusterId).toBe(res.clusterId);
    const controller = await client.request(60, 1, { endpointType: 2 });
    expect(controller.errorCode).toBe(ErrorCode.MISMATCHED_ENDPOINT_TYPE);
  });
});

describe("malformed input", () => {
  test("an unknown API key closes that connection and others keep working", async () => {
    const other = await WireClient.connect(broker.port);
    const framed = other.encodeRequest(18, 0, {});
    new DataView(framed.buffer, framed.byteOffset).setInt16(4, 9999);
    other.send(framed);
    await other.closed;
    const res = await client.request(18, 3, { clientSoftwareName: "x", clientSoftwareVersion: "1" });
    expect(res.errorCode).toBe(ErrorCode.NONE);
  });
});
