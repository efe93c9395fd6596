/**
 * Ownership in cluster mode (docs/architecture.md, "Ownership and cluster mode").
 *
 * The live brokers come from the directory of registrations in etcd, so Metadata and DescribeCluster list
 * every broker that holds a lease. The controller is the lowest live broker id: Apache's Metadata names
 * its active controller there, bunka has none, and the lowest id is the one answer every broker computes
 * alike from the same directory.
 *
 * Who owns each partition and slot comes from the ownership manager (ownership-manager.ts) when one is
 * given: its claims in etcd, with their epochs, and this broker's lease. The broker starts with
 * NOTHING_OWNED and switches to the manager once it runs (`useSource`). Without any source (tests of
 * membership alone), this broker leads every partition and owns every slot at epoch 0, as in
 * single-broker mode.
 */
import type { OwnedResource } from "./cluster-keys.ts";
import { type BrokerEndpoint, endpointsFor, type NamedEndpoint, type Ownership, type Standing } from "./ownership.ts";

/** What ClusterOwnership asks about moving ownership: the ownership manager. */
export interface OwnershipSource {
  standing(resource: OwnedResource): Standing;
  mayAct(resource: OwnedResource, epoch: number): boolean;
  /** The owner as far as this broker knows, -1 for none (or one being handed over). */
  ownerOf(resource: OwnedResource): number;
}

const OWNED_AT_ZERO: Standing = Object.freeze({ state: "owned", epoch: 0 });
const NOWHERE: Standing = Object.freeze({ state: "elsewhere", brokerId: -1 });

/** Before the ownership manager runs: nothing is owned here, and no owner is known for anything. */
export const NOTHING_OWNED: OwnershipSource = Object.freeze({
  standing: () => NOWHERE,
  mayAct: () => false,
  ownerOf: () => -1,
});

export class ClusterOwnership implements Ownership {
  private self: BrokerEndpoint;

  constructor(
    readonly selfId: number,
    host: string,
    port: number,
    /** The live brokers as the directory has them; this broker may be missing (its lease lapsed, not registered yet). */
    private readonly liveBrokers: () => readonly BrokerEndpoint[],
    private moving?: OwnershipSource,
  ) {
    this.self = { brokerId: selfId, host, port, rack: null };
  }

  /** Who owns what comes from `source` from now on (the ownership manager, once it runs). */
  useSource(source: OwnershipSource): void {
    this.moving = source;
  }

  setAdvertised(host: string, port: number, listeners?: readonly NamedEndpoint[]): void {
    this.self = { ...this.self, host, port, ...(listeners === undefined ? {} : { listeners }) };
  }

  /**
   * This broker (always: a leader missing from the broker list leaves clients with nowhere to send, and
   * this broker answers for what it owns until its lease says otherwise) and the other live brokers,
   * lowest id first.
   */
  brokers(listenerName?: string): BrokerEndpoint[] {
    const others = this.liveBrokers().filter((b) => b.brokerId !== this.selfId);
    return endpointsFor([this.self, ...others].sort((a, b) => a.brokerId - b.brokerId), listenerName);
  }

  controllerId(): number {
    return this.brokers()[0]!.brokerId;
  }

  partitionLeader(topic: string, partition: number): number {
    return this.moving === undefined ? this.selfId : this.known(this.moving.ownerOf({ kind: "partition", topic, partition }));
  }

  slotOwner(kind: "txn" | "group", slot: number): number {
    return this.moving === undefined ? this.selfId : this.known(this.moving.ownerOf({ kind, slot }));
  }

  standing(resource: OwnedResource): Standing {
    if (this.moving === undefined) return OWNED_AT_ZERO;
    const standing = this.moving.standing(resource);
    // An owner that is not live any more (its lease not expired yet) is no one clients can reach.
    if (standing.state === "elsewhere" && standing.brokerId !== -1 && !this.isLive(standing.brokerId)) return { state: "elsewhere", brokerId: -1 };
    return standing;
  }

  mayAct(resource: OwnedResource, epoch: number): boolean {
    return this.moving === undefined ? epoch === 0 : this.moving.mayAct(resource, epoch);
  }

  /** An owner clients can be sent to: this broker or a live one; -1 otherwise. */
  private known(brokerId: number): number {
    return brokerId === this.selfId || (brokerId !== -1 && this.isLive(brokerId)) ? brokerId : -1;
  }

  private isLive(brokerId: number): boolean {
    return this.liveBrokers().some((b) => b.brokerId === brokerId);
  }
}
