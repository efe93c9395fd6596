/**
 * Real Node.js clients against an in-process bunka: kafkajs 2.2.4 and @platformatic/kafka create, list,
 * describe and delete topics and read metadata, exactly as they would against Apache Kafka.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Admin } from "@platformatic/kafka";
import { Kafka, logLevel } from "kafkajs";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
});
afterAll(async () => {
  await broker.stop();
});

describe("kafkajs admin", () => {
  test("createTopics, listTopics, fetchTopicMetadata, describeCluster, deleteTopics", async () => {
    const kafka = new Kafka({ clientId: "interop-kafkajs", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      expect(await admin.createTopics({ topics: [{ topic: "kjs-orders", numPartitions: 4 }], waitForLeaders: true })).toBe(true);
      // A second create of the same topic is not an error for kafkajs: it answers false.
      expect(await admin.createTopics({ topics: [{ topic: "kjs-orders", numPartitions: 4 }] })).toBe(false);
      expect(await admin.listTopics()).toContain("kjs-orders");

      const metadata = await admin.fetchTopicMetadata({ topics: ["kjs-orders"] });
      expect(metadata.topics).toHaveLength(1);
      expect(metadata.topics[0]!.partitions.map((p) => p.partitionId).sort()).toEqual([0, 1, 2, 3]);
      expect(metadata.topics[0]!.partitions.every((p) => p.leader === 0)).toBe(true);

      const cluster = await admin.describeCluster();
      expect(cluster.brokers).toEqual([{ nodeId: 0, host: "127.0.0.1", port: broker.port }]);
      expect(cluster.controller).toBe(0);
      expect(cluster.clusterId).toHaveLength(22);

      const refused = await admin
        .createTopics({ topics: [{ topic: "kjs-bad", numPartitions: 1, replicationFactor: 3 }] })
        .then(() => undefined, (error: { errors?: { type: string }[] }) => error);
      expect(refused?.errors?.map((e) => e.type)).toEqual(["INVALID_REPLICATION_FACTOR"]);

      await admin.deleteTopics({ topics: ["kjs-orders"] });
      expect(await admin.listTopics()).not.toContain("kjs-orders");
    } finally {
      await admin.disconnect();
    }
  });
});

describe("@platformatic/kafka admin", () => {
  test("createTopics, metadata, listTopics, deleteTopics", async () => {
    const admin = new Admin({ clientId: "interop-platformatic", bootstrapBrokers: [broker.bootstrap] });
    try {
      const created = await admin.createTopics({ topics: ["pk-events"], partitions: 3, replicas: 1 });
      expect(created.map((t) => t.name)).toEqual(["pk-events"]);
      expect(created[0]!.partitions).toBe(3);

      const metadata = await admin.metadata({ topics: ["pk-events"] });
      const topic = metadata.topics.get("pk-events");
      expect(topic?.partitionsCount).toBe(3);
      expect(metadata.brokers.get(0)).toEqual({ host: "127.0.0.1", port: broker.port, rack: null });

      expect(await admin.listTopics()).toContain("pk-events");

      await expect(admin.createTopics({ topics: ["pk-events"], partitions: 1, replicas: 1 })).rejects.toThrow();

      await admin.deleteTopics({ topics: ["pk-events"] });
      expect(await admin.listTopics()).not.toContain("pk-events");
    } finally {
      await admin.close();
    }
  });
});
