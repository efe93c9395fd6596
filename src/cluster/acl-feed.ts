/**
 * ACL changes across the brokers of a cluster (docs/architecture.md, "Security"). The ACLs live in the
 * shared data directory (`__cluster/acls.json`) and every broker with an authorizer keeps them in memory;
 * a broker that changed them (CreateAcls, DeleteAcls, under the metadata gate) puts
 * `/bunka/<clusterId>/acls` once the change is durable and before it lets the gate go, and every broker
 * watching the key reads the file again. The value only says who changed them and when: the file is the
 * truth, so an announcement repeated or overtaken reads the same file. After a compaction made the watch
 * miss events, the file is read again. A read that fails (a damaged file) is logged and the ACLs held are
 * kept.
 */
import type { Logger } from "../platform/logger.ts";
import { clusterPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch, type WatchOptions } from "./etcd/etcd-watch.ts";

export const ACLS_CHANGE_FORMAT = "bunka-acls-change";
const ACLS_CHANGE_VERSION = 1;

/** Put by a broker after it changed the ACLs, so that every broker reads them again. */
export function aclsChangeKey(clusterId: string): string {
  return `${clusterPrefix(clusterId)}acls`;
}

export interface AclFeedOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  /** Reads the ACL file again; resolves once the broker's view is current. */
  refresh(): Promise<unknown>;
  log: Logger;
  nowMs(): number;
  watch?: WatchOptions;
}

export class AclFeed {
  private watch: EtcdWatch | undefined;

  private constructor(private readonly options: AclFeedOptions) {}

  /**
   * Starts watching from now, and reads the file once more: a change announced between this broker's
   * start and the watch's first revision would otherwise be missed.
   */
  static async open(options: AclFeedOptions): Promise<AclFeed> {
    const feed = new AclFeed(options);
    const { client, clusterId, log } = options;
    const key = aclsChangeKey(clusterId);
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

  /** Tells the other brokers that the ACLs changed; call once the change is durable. */
  async announceAcls(): Promise<void> {
    const { client, clusterId, selfId, nowMs } = this.options;
    await client.put(aclsChangeKey(clusterId), JSON.stringify({ format: ACLS_CHANGE_FORMAT, version: ACLS_CHANGE_VERSION, brokerId: selfId, changedAtMs: nowMs() }));
  }

  async close(): Promise<void> {
    await this.watch?.close();
  }

  private async refresh(): Promise<void> {
    try {
      await this.options.refresh();
    } catch (error) {
      this.options.log.error("the ACLs changed by another broker cannot be read again; keeping them as they were", { error: String(error) });
    }
  }
}
