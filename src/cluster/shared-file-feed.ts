/**
 * Changes to one state file of the shared data directory, told across the brokers of a cluster
 * (docs/architecture.md, "Security"): the ACLs (`__cluster/acls.json`) and the SCRAM credentials
 * (`__cluster/scram-credentials.json`) each live in one file that every broker keeps in memory. A broker
 * that changed the file (under the metadata gate) puts `/bunka/<clusterId>/<key>` once the change is
 * durable and before it lets the gate go, and every broker watching the key reads the file again. The value
 * only says who changed it and when: the file is the truth, so an announcement repeated or overtaken reads
 * the same file. After a compaction made the watch miss events, the file is read again. A read that fails
 * (a damaged file) is logged and what the broker holds is kept.
 */
import type { Logger } from "../platform/logger.ts";
import { clusterPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch, type WatchOptions } from "./etcd/etcd-watch.ts";

/** Which file a feed tells about. */
export interface SharedFile {
  /** The etcd key under the cluster's prefix. */
  readonly key: string;
  /** The announcement's `format` field. */
  readonly format: string;
  readonly version: number;
  /** What the file holds, for log lines ("the ACLs"). */
  readonly what: string;
}

export interface SharedFileFeedOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  /** Reads the file again; resolves once the broker's view is current. */
  refresh(): Promise<unknown>;
  log: Logger;
  nowMs(): number;
  watch?: WatchOptions;
}

/** The key a broker puts after it changed `file`, so that every broker reads it again. */
export function sharedFileChangeKey(clusterId: string, file: SharedFile): string {
  return `${clusterPrefix(clusterId)}${file.key}`;
}

export class SharedFileFeed {
  private watch: EtcdWatch | undefined;

  protected constructor(
    private readonly file: SharedFile,
    private readonly options: SharedFileFeedOptions,
  ) {}

  /**
   * Starts watching from now, and reads the file once more: a change announced between this broker's
   * start and the watch's first revision would otherwise be missed.
   */
  protected static async started<T extends SharedFileFeed>(feed: T): Promise<T> {
    const { client, clusterId, log } = feed.options;
    const key = sharedFileChangeKey(clusterId, feed.file);
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
      { log, ...feed.options.watch },
    );
    return feed;
  }

  /** Tells the other brokers that the file changed; call once the change is durable. */
  async announce(): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(sharedFileChangeKey(clusterId, this.file), JSON.stringify({ format: this.file.format, version: this.file.version, brokerId: selfId, changedAtMs: nowMs() }));
  }

  async close(): Promise<void> {
    await this.watch?.close();
  }

  private async refresh(): Promise<void> {
    try {
      await this.options.refresh();
    } catch (error) {
      this.options.log.error(`${this.file.what} changed by another broker cannot be read again; keeping them as they were`, { error: String(error) });
    }
  }
}
