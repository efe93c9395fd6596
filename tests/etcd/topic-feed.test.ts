/**
 * Topic changes across brokers through a real etcd: one broker's change, once announced, is read again by
 * every other broker from the shared data directory; a damaged topic file is logged and the topic kept.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { brokerConfigsChangeKey, TopicFeed } from "../../src/cluster/topic-feed.ts";
import { writeFileAtomic } from "../../src/storage/atomic-file.ts";
import { TopicStore } from "../../src/storage/topic-store.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { errorCapturingLogger } from "../support/capturing-logger.ts";
import { EtcdServer } from "../support/etcd.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { MemoryFs } from "../support/memory-fs.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  client?.close();
  await etcd?.close();
});

describe("the topic feed", () => {
  test("a topic created, grown, deleted on one broker is seen by the other once announced", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    const a = await TopicStore.open(fs, "/data", clock);
    const b = await TopicStore.open(fs, "/data", clock);
    const log = silentLogger;
    const refreshed: string[] = [];
    const feedA = await TopicFeed.open({ client, clusterId: "feed-1", selfId: 1, refresh: async (t) => void (await a.refresh(t)), log, nowMs: () => clock.nowMs() });
    const feedB = await TopicFeed.open({
      client,
      clusterId: "feed-1",
      selfId: 2,
      refresh: async (t) => {
        refreshed.push(`${t} ${await b.refresh(t)}`);
      },
      log,
      nowMs: () => clock.nowMs(),
    });
    try {
      await a.create({ name: "orders", partitions: 3 });
      await feedA.announce("orders");
      await waitUntil(() => b.get("orders") !== undefined, "broker 2 sees the topic");
      expect(b.get("orders")).toEqual(a.get("orders")!);
      await a.addPartitions("orders", 6);
      await feedA.announce("orders");
      await waitUntil(() => b.get("orders")?.partitions === 6, "broker 2 sees the new partitions");
      await a.delete("orders");
      await feedA.announce("orders");
      await waitUntil(() => b.get("orders") === undefined, "broker 2 forgets the topic");
      expect(refreshed).toEqual(["orders created", "orders changed", "orders deleted"]);
    } finally {
      await feedA.close();
      await feedB.close();
    }
  });

  test("broker config changes: announced by one broker, read again by the others that asked for them", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    let readsB = 0;
    const feedA = await TopicFeed.open({ client, clusterId: "feed-3", selfId: 1, refresh: async () => {}, log: silentLogger, nowMs: () => clock.nowMs() });
    const feedB = await TopicFeed.open({
      client,
      clusterId: "feed-3",
      selfId: 2,
      refresh: async () => {},
      refreshBrokerConfigs: async () => void readsB++,
      log: silentLogger,
      nowMs: () => clock.nowMs(),
    });
    const topicsOnlyC: string[] = [];
    const feedC = await TopicFeed.open({ client, clusterId: "feed-3", selfId: 3, refresh: async (t) => void topicsOnlyC.push(t), log: silentLogger, nowMs: () => clock.nowMs() });
    try {
      await feedA.announceBrokerConfigs();
      await waitUntil(() => readsB === 1, "broker 2 reads the broker configs again");
      const stored = await client.range(brokerConfigsChangeKey("feed-3"));
      expect(JSON.parse(stored.kvs[0]!.value)).toEqual({ format: "bunka-broker-configs-change", version: 1, brokerId: 1, changedAtMs: 1_700_000_000_000 });
      // A broker config change is not a topic change: broker 3 heard of none before this one.
      await feedA.announce("orders");
      await waitUntil(() => topicsOnlyC.length === 1, "broker 3 reads the topic");
      await feedA.announceBrokerConfigs();
      await waitUntil(() => readsB === 2, "broker 2 reads the broker configs once more");
      expect(topicsOnlyC).toEqual(["orders"]);
    } finally {
      await feedA.close();
      await feedB.close();
      await feedC.close();
    }
  });

  test("a damaged topic file is logged and the topic kept as it was", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    const a = await TopicStore.open(fs, "/data", clock);
    await a.create({ name: "orders", partitions: 3 });
    const b = await TopicStore.open(fs, "/data", clock);
    const { log, errors } = errorCapturingLogger();
    const feedB = await TopicFeed.open({ client, clusterId: "feed-2", selfId: 2, refresh: async (t) => void (await b.refresh(t)), log, nowMs: () => clock.nowMs() });
    const feedA = await TopicFeed.open({ client, clusterId: "feed-2", selfId: 1, refresh: async () => {}, log: silentLogger, nowMs: () => clock.nowMs() });
    try {
      await writeFileAtomic(fs, a.topicFile("orders"), new TextEncoder().encode("garbage"));
      await feedA.announce("orders");
      await waitUntil(() => errors.some((line) => line.startsWith("a topic changed by another broker cannot be read again")), "the damage logged");
      expect(b.get("orders")?.partitions).toBe(3);
    } finally {
      await feedA.close();
      await feedB.close();
    }
  });
});
