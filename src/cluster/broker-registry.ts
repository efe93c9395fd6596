/**
 * Membership in etcd (docs/architecture.md, "Ownership and cluster mode"): a live broker is a key
 * `/bunka/<clusterId>/brokers/<brokerId>` attached to its lease, whose value is its advertised Kafka
 * listener and side-port. The key goes when the lease does (expiry, revocation), so the keys under the
 * prefix are the live brokers.
 *
 * Registration creates the key only if it does not exist (a txn on create_revision == 0), so two processes
 * configured with the same broker id cannot both be live: the second one is refused with the first one's
 * lease and endpoint in the message.
 */
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import type { Timers } from "../platform/timers.ts";
import { brokerIdOfKey, brokerKey, brokersPrefix } from "./cluster-keys.ts";
import { decodeBrokerRecord, encodeBrokerRecord, type BrokerRegistration } from "./cluster-records.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdUnavailableError } from "./etcd/etcd-errors.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";
import type { KeyValue } from "./etcd/gateway-codec.ts";
import { LeaseKeeper, type LeaseApi } from "./lease-keeper.ts";

/** A live broker as etcd has it. */
export interface RegisteredBroker extends BrokerRegistration {
  leaseId: bigint;
  /** The revision that created its key: a broker that left and came back has a larger one. */
  registeredRevision: bigint;
}

/** Another live process holds this broker id. Fatal: the process must not go on as that broker. */
export class DuplicateBrokerIdError extends FatalError {
  constructor(
    readonly clusterId: string,
    readonly brokerId: number,
    readonly holder: RegisteredBroker | null,
  ) {
    const who = holder === null ? "a key bunka cannot read" : `lease ${holder.leaseId}, Kafka listener ${holder.kafka.host}:${holder.kafka.port}`;
    super(`broker id ${brokerId} is already registered in cluster ${clusterId} by another live process (${who}); two brokers cannot share an id`);
  }
}

function registeredOf(clusterId: string, kv: KeyValue): RegisteredBroker {
  const registration = decodeBrokerRecord(kv.key, kv.value);
  if (brokerIdOfKey(clusterId, kv.key) !== registration.brokerId) {
    throw new CorruptStateError(`etcd key ${kv.key}`, `it registers broker id ${registration.brokerId}`);
  }
  return { ...registration, leaseId: kv.lease, registeredRevision: kv.createRevision };
}

/**
 * Registers `registration` under `leaseId`. Idempotent for the same lease (a retry, or a changed endpoint:
 * the value is rewritten); a key held under any other lease is a DuplicateBrokerIdError.
 */
export async function registerBroker(client: EtcdClient, clusterId: string, registration: BrokerRegistration, leaseId: bigint): Promise<RegisteredBroker> {
  const key = brokerKey(clusterId, registration.brokerId);
  const value = encodeBrokerRecord(registration);
  let existing: KeyValue | undefined;
  try {
    const answer = await client.txn({
      compare: [{ key, target: "create", createRevision: 0n }],
      success: [{ op: "put", key, value, lease: leaseId }],
      failure: [{ op: "range", key }],
    });
    if (answer.succeeded) return { ...registration, leaseId, registeredRevision: answer.header.revision };
    const range = answer.responses[0];
    existing = range?.op === "range" ? range.kvs[0] : undefined;
  } catch (error) {
    // The txn may have been applied: the key says whether it is ours.
    if (!(error instanceof EtcdUnavailableError && error.outcomeUnknown)) throw error;
    existing = (await client.range(key)).kvs[0];
    if (existing === undefined) throw error;
  }
  if (existing === undefined) throw new FatalError(`etcd txn on ${key} failed its compare but the key is not there`);
  if (existing.lease !== leaseId) {
    let holder: RegisteredBroker | null = null;
    try {
      holder = registeredOf(clusterId, existing);
    } catch {
      // An unreadable holder is still a holder.
    }
    throw new DuplicateBrokerIdError(clusterId, registration.brokerId, holder);
  }
  if (existing.value !== value) {
    const answer = await client.txn({
      compare: [{ key, target: "lease", lease: leaseId }],
      success: [{ op: "put", key, value, lease: leaseId }],
    });
    if (!answer.succeeded) throw new DuplicateBrokerIdError(clusterId, registration.brokerId, null);
  }
  return { ...registration, leaseId, registeredRevision: existing.createRevision };
}

/**
 * Removes this broker's registration while keeping its lease (a shutdown that hands over): the other
 * brokers drop it from the live brokers at once, so their assignment gives its share to them and they
 * claim each resource as soon as its owner key is released. Only a key held under `leaseId` is deleted.
 */
export async function deregisterBroker(client: EtcdClient, clusterId: string, brokerId: number, leaseId: bigint): Promise<void> {
  const key = brokerKey(clusterId, brokerId);
  await client.txn({ compare: [{ key, target: "lease", lease: leaseId }], success: [{ op: "delete", key }] });
}

/** The live brokers, and the revision they were read at (to watch from the next one). */
export async function listBrokers(client: EtcdClient, clusterId: string): Promise<{ brokers: RegisteredBroker[]; revision: bigint }> {
  const answer = await client.range(brokersPrefix(clusterId), { prefix: true });
  const brokers = answer.kvs.filter((kv) => brokerIdOfKey(clusterId, kv.key) !== undefined).map((kv) => registeredOf(clusterId, kv));
  return { brokers: brokers.sort((a, b) => a.brokerId - b.brokerId), revision: answer.header.revision };
}

export interface BrokerDirectoryHandlers {
  /** The live brokers changed (or were read again after a compaction); called with all of them. */
  onChange(brokers: RegisteredBroker[]): void;
}

/** A live view of the registered brokers: read once, then kept current by a watch. */
export class BrokerDirectory {
  private readonly brokers = new Map<number, RegisteredBroker>();
  private watch: EtcdWatch | undefined;

  private constructor(
    private readonly client: EtcdClient,
    private readonly clusterId: string,
    private readonly handlers: BrokerDirectoryHandlers,
  ) {}

  static async open(client: EtcdClient, clusterId: string, handlers: BrokerDirectoryHandlers, log: Logger): Promise<BrokerDirectory> {
    const directory = new BrokerDirectory(client, clusterId, handlers);
    const revision = await directory.reload();
    directory.watch = new EtcdWatch(
      client,
      { key: brokersPrefix(clusterId), prefix: true, startRevision: revision + 1n },
      {
        onEvents: (events) => {
          for (const event of events) {
            const brokerId = brokerIdOfKey(clusterId, event.kv.key);
            if (brokerId === undefined) continue;
            if (event.type === "delete") directory.brokers.delete(brokerId);
            else {
              try {
                directory.brokers.set(brokerId, registeredOf(clusterId, event.kv));
              } catch (error) {
                log.error("etcd: a broker registration cannot be read; leaving it out", { key: event.kv.key, error: String(error) });
              }
            }
          }
          handlers.onChange(directory.list());
        },
        onCompacted: async () => (await directory.reload()) + 1n,
      },
      { log },
    );
    return directory;
  }

  list(): RegisteredBroker[] {
    return [...this.brokers.values()].sort((a, b) => a.brokerId - b.brokerId);
  }

  async close(): Promise<void> {
    await this.watch?.close();
  }

  private async reload(): Promise<bigint> {
    const { brokers, revision } = await listBrokers(this.client, this.clusterId);
    this.brokers.clear();
    for (const broker of brokers) this.brokers.set(broker.brokerId, broker);
    this.handlers.onChange(this.list());
    return revision;
  }
}

export interface MembershipOptions {
  client: EtcdClient;
  /** The lease calls, when not the client's own (tests put a switch in between). */
  leases?: LeaseApi;
  clusterId: string;
  registration: BrokerRegistration;
  clock: Clock;
  log: Logger;
  timers?: Timers;
  ttlSeconds?: number;
  safetyMarginMs?: number;
  keepAliveIntervalMs?: number;
}

/**
 * This broker's membership: a lease keeper whose every new lease is registered under the broker's key.
 * `start` rejects with a DuplicateBrokerIdError when another live process has the id.
 */
export function brokerMembership(options: MembershipOptions): LeaseKeeper {
  return new LeaseKeeper({
    leases: options.leases ?? options.client,
    clock: options.clock,
    log: options.log,
    timers: options.timers,
    ttlSeconds: options.ttlSeconds,
    safetyMarginMs: options.safetyMarginMs,
    keepAliveIntervalMs: options.keepAliveIntervalMs,
    onNewLease: async (leaseId) => {
      await registerBroker(options.client, options.clusterId, options.registration, leaseId);
    },
  });
}
