/**
 * Who leads each partition and who owns each transaction and group slot (docs/architecture.md, "Ownership and
 * cluster mode"). Handlers ask this port and never assume; single-broker mode is one implementation, the
 * shared-volume cluster another.
 */
export const SLOT_COUNT = 50;

export interface BrokerEndpoint {
  brokerId: number;
  host: string;
  port: number;
  rack: string | null;
}

export interface Ownership {
  /** The broker this process is. */
  readonly selfId: number;
  /** Every live broker, for Metadata and DescribeCluster. */
  brokers(): BrokerEndpoint[];
  controllerId(): number;
  /** Leader of a partition, or -1 when none is known. */
  partitionLeader(topic: string, partition: number): number;
  /** The broker that owns slot N of the transaction or group coordinator. */
  slotOwner(kind: "txn" | "group", slot: number): number;
}

/** One broker that owns everything. Its advertised endpoint is set once the listener is bound. */
export class SingleBrokerOwnership implements Ownership {
  private endpoint: BrokerEndpoint;
  constructor(readonly selfId: number, host: string, port: number) {
    this.endpoint = { brokerId: selfId, host, port, rack: null };
  }
  setAdvertised(host: string, port: number): void {
    this.endpoint = { ...this.endpoint, host, port };
  }
  brokers(): BrokerEndpoint[] {
    return [this.endpoint];
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
