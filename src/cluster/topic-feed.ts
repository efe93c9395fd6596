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
 *
 * Dynamic broker configs (`__cluster/broker-configs.json`) travel the same way under one key,
 * `/bunka/<clusterId>/broker-configs`, when `refreshBrokerConfigs` is given: a broker that changed them
 * announces it, and the others read the file again, so that DescribeConfigs on any broker shows the change.
 */
import type { Logger } from "../platform/logger.ts";
import { clusterPrefix, topicChangeKey, topicOfChangeKey, topicsPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";

export const TOPIC_CHANGE_FORMAT = "bunka-topic-change";
const TOPIC_CHANGE_VERSION = 1;
export const BROKER_CONFIGS_CHANGE_FORMAT = "bunka-broker-configs-change";

/** Put by a broker after it changed the dynamic broker configs, so that every broker reads them again. */
export function brokerConfigsChangeKey(clusterId: string): string {
  return `${clusterPrefix(clusterId)}broker-configs`;
}

export interface TopicFeedOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  /** Reads a topic's file again; resolves once the broker's view is current. */
  refresh(topic: string): Promise<void>;
  /** Reads the dynamic broker configs again; absent: broker config changes are neither watched nor read. */
  refreshBrokerConfigs?(): Promise<void>;
  log: Logger;
  nowMs(): number;
}

export class TopicFeed {
  private watch: EtcdWatch | undefined;
  private configWatch: EtcdWatch | undefined;

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
    if (options.refreshBrokerConfigs !== undefined) {
      const key = brokerConfigsChangeKey(clusterId);
      feed.configWatch = new EtcdWatch(
        client,
        { key, startRevision: now.header.revision + 1n },
        {
          onEvents: async (events) => {
            if (events.some((event) => event.type === "put")) await feed.refreshConfigs();
          },
          onCompacted: async () => {
            const read = await client.range(key);
            await feed.refreshConfigs();
            return read.header.revision + 1n;
          },
        },
        { log },
      );
    }
    return feed;
  }

  /** Tells the other brokers that the dynamic broker configs changed; call once the change is durable. */
  async announceBrokerConfigs(): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(brokerConfigsChangeKey(clusterId), JSON.stringify({ format: BROKER_CONFIGS_CHANGE_FORMAT, version: TOPIC_CHANGE_VERSION, brokerId: selfId, changedAtMs: nowMs() }));
  }

  /** Tells the other brokers that `topic` changed; call once the change is durable. */
  async announce(topic: string): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(topicChangeKey(clusterId, topic), JSON.stringify({ format: TOPIC_CHANGE_FORMAT, version: TOPIC_CHANGE_VERSION, brokerId: selfId, changedAtMs: nowMs() }));
  }

  async close(): Promise<void> {
    await this.watch?.close();
    await this.configWatch?.close();
  }

  private async refreshConfigs(): Promise<void> {
    try {
      await this.options.refreshBrokerConfigs?.();
    } catch (error) {
      this.options.log.error("the broker configs changed by another broker cannot be read again; keeping them as they were", { error: String(error) });
    }
  }

  private async refresh(topic: string): Promise<void> {
    try {
      await this.options.refresh(topic);
    } catch (error) {
      this.options.log.error("a topic changed by another broker cannot be read again; keeping it as it was", { topic, error: String(error) });
    }
  }
}
