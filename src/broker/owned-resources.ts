/**
 * What cluster mode's ownership manager opens and closes on this broker (docs/architecture.md, "The
 * ownership manager"): a partition is taken over as recovery opens it at start-up and then led at its new
 * leader epoch; a transaction or group slot is loaded from the shared files, its decided transactions
 * driven on; a release closes each so that the next owner's take-over reads everything this broker wrote.
 *
 * The manager only calls these while the resource stands `loading` (acquire) or `leaving` (release), so
 * no request is served for it in between: the handlers answer by the standing.
 */
import type { OwnedResource, ResourceKind } from "../cluster/cluster-keys.ts";
import type { OwnedResourceHost } from "../cluster/ownership-manager.ts";
import { SLOT_COUNT } from "../cluster/ownership.ts";
import type { TopicStore } from "../storage/topic-store.ts";
import type { GroupCoordinator } from "./group-coordinator.ts";
import type { PartitionManager } from "./partitions.ts";
import type { TxnCoordinator } from "./txn-coordinator.ts";

export interface OwnedResourcesDeps {
  topics: TopicStore;
  partitions: PartitionManager;
  txn: TxnCoordinator;
  groups: GroupCoordinator;
}

export class OwnedResources implements OwnedResourceHost {
  constructor(private readonly deps: OwnedResourcesDeps) {}

  async acquire(resource: OwnedResource, epoch: number): Promise<void> {
    switch (resource.kind) {
      case "partition":
        return this.deps.partitions.acquire(resource.topic, resource.partition, epoch);
      case "txn":
        return this.deps.txn.acquireSlot(resource.slot, epoch);
      case "group":
        return this.deps.groups.acquireSlot(resource.slot, epoch);
    }
  }

  async release(resource: OwnedResource): Promise<void> {
    switch (resource.kind) {
      case "partition":
        return this.deps.partitions.release(resource.topic, resource.partition);
      case "txn":
        return this.deps.txn.releaseSlot(resource.slot);
      case "group":
        return this.deps.groups.releaseSlot(resource.slot);
    }
  }

  /**
   * Every resource of a kind that exists now, in a stable order: every partition of every topic (by
   * topic name, then index; internal topics have none), and the 50 slots of each coordinator.
   */
  resources(kind: ResourceKind): OwnedResource[] {
    if (kind !== "partition") return Array.from({ length: SLOT_COUNT }, (_, slot) => ({ kind, slot }));
    const partitions: OwnedResource[] = [];
    const topics = [...this.deps.topics.list()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const topic of topics) {
      for (let partition = 0; partition < topic.partitions; partition++) partitions.push({ kind: "partition", topic: topic.name, partition });
    }
    return partitions;
  }
}
