/**
 * SCRAM credential changes across the brokers of a cluster (docs/architecture.md, "SASL"). The
 * credentials live in the shared data directory (`__cluster/scram-credentials.json`) and every broker
 * keeps them in memory to authenticate from; a broker that altered them (AlterUserScramCredentials, under
 * the metadata gate) puts `/bunka/<clusterId>/scram-credentials` once the change is durable and before it
 * lets the gate go, and every broker watching the key reads the file again. The value only says who
 * changed them and when: the file is the truth, so a repeated or overtaken announcement reads the same
 * file. After a compaction made the watch miss events, the file is read again. A read that fails (a
 * damaged file) is logged and the credentials held are kept.
 */
import type { Logger } from "../platform/logger.ts";
import { clusterPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch, type WatchOptions } from "./etcd/etcd-watch.ts";

export const SCRAM_CHANGE_FORMAT = "bunka-scram-credentials-change";
const SCRAM_CHANGE_VERSION = 1;

/** Put by a broker after it altered SCRAM credentials, so that every broker reads them again. */
export function scramCredentialsChangeKey(clusterId: string): string {
  return `${clusterPrefix(clusterId)}scram-credentials`;
}

export interface ScramFeedOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  /** Reads the credentials file again; resolves once the broker's view is current. */
  refresh(): Promise<unknown>;
  log: Logger;
  nowMs(): number;
  watch?: WatchOptions;
}

export class ScramFeed {
  private watch: EtcdWatch | undefined;

  private constructor(private readonly options: ScramFeedOptions) {}

  /** Starts watching from now, and reads the file once more (a change made before the watch began). */
  static async open(options: ScramFeedOptions): Promise<ScramFeed> {
    const feed = new ScramFeed(options);
    const { client, clusterId, log } = options;
    const key = scramCredentialsChangeKey(clusterId);
    const now = await client.range(key);
    await feed.refresh();
    feed.watch = new EtcdWatch(
      client,
      { key, startRevision: now.header.revision + 1n },
      {
        onEvents: async (events) => {
          if (events.some((event) => event.type === "put")) await feed.refresh();
        },
        onCompacted: async () => {
          const read = await client.range(key);
          await feed.refresh();
          return read.header.revision + 1n;
        },
      },
      { log, ...options.watch },
    );
    return feed;
  }

  /** Tells the other brokers that the credentials changed; call once the change is durable. */
  async announceScramCredentials(): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(scramCredentialsChangeKey(clusterId), JSON.stringify({ format: SCRAM_CHANGE_FORMAT, version: SCRAM_CHANGE_VERSION, brokerId: selfId, changedAtMs: nowMs() }));
  }

  async close(): Promise<void> {
    await this.watch?.close();
  }

  private async refresh(): Promise<void> {
    try {
      await this.options.refresh();
    } catch (error) {
      this.options.log.error("the SCRAM credentials changed by another broker cannot be read again; keeping them as they were", { error: String(error) });
    }
  }
}
