/**
 * Topic changes across brokers through a real etcd: one broker's change, once announced, is read again by
 * every other broker from the shared data directory; a damaged topic file is logged and the topic kept.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { TopicFeed } from "../../src/cluster/topic-feed.ts";
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
