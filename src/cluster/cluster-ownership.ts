/**
 * Ownership in cluster mode, as far as it is built (docs/architecture.md, "Ownership and cluster mode").
 *
 * The live brokers come from the directory of registrations in etcd, so Metadata and DescribeCluster list
 * every broker that holds a lease. The controller is the lowest live broker id: Apache's Metadata names
 * its active controller there, bunka has none, and the lowest id is the one answer every broker computes
 * alike from the same directory.
 *
 * Partitions and coordinator slots are not assigned to brokers yet, so this broker still leads every
 * partition and owns every slot, as in single-broker mode: clients must keep to one broker.
 */
import type { OwnedResource } from "./cluster-keys.ts";
import type { BrokerEndpoint, Ownership, Standing } from "./ownership.ts";

export class ClusterOwnership implements Ownership {
  private self: BrokerEndpoint;

  constructor(
    readonly selfId: number,
    host: string,
    port: number,
    /** The live brokers as the directory has them; this broker may be missing (its lease lapsed, not registered yet). */
    private readonly liveBrokers: () => readonly BrokerEndpoint[],
  ) {
    this.self = { brokerId: selfId, host, port, rack: null };
  }

  setAdvertised(host: string, port: number): void {
    this.self = { ...this.self, host, port };
  }

  /**
   * This broker (always: it names itself the leader of every partition, and a leader missing from the
   * broker list leaves clients with nowhere to send) and the other live brokers, lowest id first.
   */
  brokers(): BrokerEndpoint[] {
    const others = this.liveBrokers().filter((b) => b.brokerId !== this.selfId);
    return [this.self, ...others].sort((a, b) => a.brokerId - b.brokerId);
  }

  controllerId(): number {
    return this.brokers()[0]!.brokerId;
  }

  partitionLeader(): number {
    return this.selfId;
  }

  slotOwner(): number {
    return this.selfId;
  }

  standing(): Standing {
    return { state: "owned", epoch: 0 };
  }

  mayAct(_resource: OwnedResource, epoch: number): boolean {
    return epoch === 0;
  }
}
