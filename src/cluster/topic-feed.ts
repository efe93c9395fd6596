/**
 * Topic changes across the brokers of a cluster (docs/architecture.md, "Ownership and cluster mode").
 * Topics live in the shared data directory (`__cluster/topics/<topic>.json`), and every broker keeps them
 * in memory; a broker that changed one (created, deleted, partitions added, configs altered) says so by
 * putting `/bunka/<clusterId>/topics/<topic>` once the change is durable, and every broker watching that
 * prefix reads the topic's file again (TopicStore.refresh). The value only says who changed it and when:
 * the file is the truth, so a change announced twice, or announced and then overtaken, reads the same file.
 *
 * After a compaction made the watch miss events, every announced topic is read again. A refresh that
 * fails (a damaged topic file) is logged and the topic kept as it was.
 */
import type { Logger } from "../platform/logger.ts";
import { topicChangeKey, topicOfChangeKey, topicsPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";

export const TOPIC_CHANGE_FORMAT = "bunka-topic-change";
const TOPIC_CHANGE_VERSION = 1;

export interface TopicFeedOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  /** Reads a topic's file again; resolves once the broker's view is current. */
  refresh(topic: string): Promise<void>;
  log: Logger;
  nowMs(): number;
}

export class TopicFeed {
  private watch: EtcdWatch | undefined;

  private constructor(private readonly options: TopicFeedOptions) {}

  /** Starts watching from now: what changed before is already in the files this broker loaded. */
  static async open(options: TopicFeedOptions): Promise<TopicFeed> {
    const feed = new TopicFeed(options);
    const { client, clusterId, log } = options;
    const now = await client.range(topicsPrefix(clusterId), { prefix: true });
    feed.watch = new EtcdWatch(
      client,
      { key: topicsPrefix(clusterId), prefix: true, startRevision: now.header.revision + 1n },
      {
        onEvents: async (events) => {
          const topics = new Set<string>();
          for (const event of events) {
            const topic = topicOfChangeKey(clusterId, event.kv.key);
            if (topic !== undefined) topics.add(topic);
          }
          for (const topic of topics) await feed.refresh(topic);
        },
        onCompacted: async () => {
          const all = await client.range(topicsPrefix(clusterId), { prefix: true });
          for (const kv of all.kvs) {
            const topic = topicOfChangeKey(clusterId, kv.key);
            if (topic !== undefined) await feed.refresh(topic);
          }
          return all.header.revision + 1n;
        },
      },
      { log },
    );
    return feed;
  }

  /** Tells the other brokers that `topic` changed; call once the change is durable. */
  async announce(topic: string): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(topicChangeKey(clusterId, topic), JSON.stringify({ format: TOPIC_CHANGE_FORMAT, version: TOPIC_CHANGE_VERSION, brokerId: selfId, changedAtMs: nowMs() }));
  }

  async close(): Promise<void> {
    await this.watch?.close();
  }

  private async refresh(topic: string): Promise<void> {
    try {
      await this.options.refresh(topic);
    } catch (error) {
      this.options.log.error("a topic changed by another broker cannot be read again; keeping it as it was", { topic, error: String(error) });
    }
  }
}
