/**
 * Who leads each partition and who owns each transaction and group slot (docs/architecture.md, "Ownership and
 * cluster mode"). Handlers ask this port and never assume; single-broker mode is one implementation, the
 * shared-volume cluster another.
 */
import type { OwnedResource } from "./cluster-keys.ts";

export const SLOT_COUNT = 50;

export interface BrokerEndpoint {
  brokerId: number;
  /** The inter-broker listener's address (the only one before listeners existed). */
  host: string;
  port: number;
  rack: string | null;
  /** Every advertised listener, by name; absent for a broker that registered only `host:port`. */
  listeners?: readonly NamedEndpoint[];
}

/** One advertised listener of a broker. */
export interface NamedEndpoint {
  name: string;
  host: string;
  port: number;
}

/**
 * The brokers as a client on listener `listenerName` must reach them (Apache's rule: a client on the SSL
 * listener is told every broker's SSL address). A broker without that listener is left out, as Apache's
 * metadata cache leaves it out; one that registered no listeners (an older bunka) is named by its only
 * address. No name: the inter-broker addresses.
 */
export function endpointsFor(brokers: readonly BrokerEndpoint[], listenerName: string | undefined): BrokerEndpoint[] {
  if (listenerName === undefined) return [...brokers];
  const out: BrokerEndpoint[] = [];
  for (const b of brokers) {
    if (b.listeners === undefined) {
      out.push(b);
      continue;
    }
    const l = b.listeners.find((e) => e.name === listenerName);
    if (l !== undefined) out.push({ ...b, host: l.host, port: l.port });
  }
  return out;
}

export interface Ownership {
  /** The broker this process is. */
  readonly selfId: number;
  /**
   * Every live broker, for Metadata, FindCoordinator and DescribeCluster: at its address on listener
   * `listenerName` (the request's own, see `endpointsFor`), or its inter-broker address without one.
   */
  brokers(listenerName?: string): BrokerEndpoint[];
  controllerId(): number;
  /** Leader of a partition, or -1 when none is known. */
  partitionLeader(topic: string, partition: number): number;
  /** The broker that owns slot N of the transaction or group coordinator, or -1 when none is known. */
  slotOwner(kind: "txn" | "group", slot: number): number;
  /**
   * This broker's standing for a resource (docs/architecture.md, "Ownership and cluster mode"):
   * - `owned`: it owns the resource at `epoch` and may serve it;
   * - `loading`: it owns it at `epoch` and is opening it (take-over): answer a retriable error
   *   (COORDINATOR_LOAD_IN_PROGRESS for slots, NOT_LEADER_OR_FOLLOWER for partitions);
   * - `leaving`: it is handing it over (or its lease lapsed): answer NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR;
   * - `elsewhere`: another broker owns it, or nobody does yet (`brokerId` -1).
   * The epoch of a partition is its leader epoch (int32, starts at 0 in single-broker mode and only grows),
   * of a slot the coordinator epoch.
   */
  standing(resource: OwnedResource): Standing;
  /**
   * Whether this broker may still write `resource` at `epoch`: it owns it (or is taking it over) at that
   * epoch and its lease is valid by its own monotonic clock, now. Checked before a write, and again once the
   * write is durable and before it is acknowledged; false means answer a retriable error instead of
   * acknowledging. Serving a request also needs `standing` to be `owned`.
   */
  mayAct(resource: OwnedResource, epoch: number): boolean;
}

export type Standing =
  | { state: "owned"; epoch: number }
  | { state: "loading"; epoch: number }
  | { state: "leaving"; epoch: number }
  /** `epoch`: the owner's epoch where this broker knows it (the owner key it watches), for Metadata. */
  | { state: "elsewhere"; brokerId: number; epoch?: number };

/** Single-broker mode's standing: everything owned at epoch 0. */
const OWNED_AT_ZERO: Standing = Object.freeze({ state: "owned", epoch: 0 });

/** One broker that owns everything. Its advertised endpoint is set once the listener is bound. */
export class SingleBrokerOwnership implements Ownership {
  private endpoint: BrokerEndpoint;
  constructor(readonly selfId: number, host: string, port: number) {
    this.endpoint = { brokerId: selfId, host, port, rack: null };
  }
  setAdvertised(host: string, port: number, listeners?: readonly NamedEndpoint[]): void {
    this.endpoint = { ...this.endpoint, host, port, ...(listeners === undefined ? {} : { listeners }) };
  }
  brokers(listenerName?: string): BrokerEndpoint[] {
    return endpointsFor([this.endpoint], listenerName);
  }
  controllerId(): number {
    return this.selfId;
  }
  partitionLeader(): number {
    return this.selfId;
  }
  slotOwner(): number {
    return this.selfId;
  }
  standing(): Standing {
    return OWNED_AT_ZERO;
  }
  mayAct(_resource: OwnedResource, epoch: number): boolean {
    return epoch === 0;
  }
}

const utf8 = new TextEncoder();

/** fnv1a32, the slot hash of docs/architecture.md, "Storage rules": slot = fnv1a32(key) % 50. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  // One encoder for the process: this runs on every transaction state change.
  const bytes = utf8.encode(text);
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

export function slotOf(key: string): number {
  return fnv1a32(key) % SLOT_COUNT;
}
