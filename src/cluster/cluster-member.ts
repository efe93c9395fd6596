/**
 * This broker as a member of its cluster (docs/architecture.md, "Ownership and cluster mode"): the etcd
 * client, the lease under which the broker is registered (lease-keeper.ts, broker-registry.ts) and the
 * directory of live brokers, from start-up to the revocation at shutdown.
 *
 * Start-up is in two steps, because the broker's address is known only once its listeners are bound
 * (port 0) while etcd should be found unreachable before a long recovery:
 * - `connect` checks that etcd answers and that no other process holds this broker id. A key held under
 *   a lease is either a live duplicate or this broker's own previous process, which died without
 *   revoking its lease: the key then goes when that lease expires. So the key is watched for at most the
 *   holder's TTL (plus etcd's expiry slack), and the holder is a live duplicate when its key outlives
 *   that, or when its lease's remaining time goes up (someone keeps it alive).
 * - `join` grants the lease, registers under it and opens the directory.
 * - `startOwnership` then runs the ownership manager (ownership-manager.ts), which claims this broker's
 *   share of the partitions and slots and hands over what another broker should have.
 * Every failure of either is one ConfigError line (the CLI prints it and exits 2): the endpoints and why.
 *
 * Once running, a lapsed lease (etcd unreachable for longer than the TTL allows, or the lease gone) is
 * counted and reported by `status` until the keeper has it valid again.
 */
import { ConfigError, DecodeError, FatalError } from "../errors/errors.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import { BrokerDirectory, brokerMembership, deregisterBroker, DuplicateBrokerIdError, type RegisteredBroker } from "./broker-registry.ts";
import { brokerKey, type OwnedResource } from "./cluster-keys.ts";
import { decodeBrokerRecord, type BrokerRegistration } from "./cluster-records.ts";
import { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdServerError, EtcdUnavailableError, type EndpointFailure } from "./etcd/etcd-errors.ts";
import type { LeaseKeeper } from "./lease-keeper.ts";
import { OwnershipManager, type OwnedResourceHost, type OwnershipManagerOptions } from "./ownership-manager.ts";
import { OwnershipRecords } from "./ownership-records.ts";
import type { BrokerEndpoint } from "./ownership.ts";

/** How often a key held by an earlier process is read again while its lease runs out. */
export const PREDECESSOR_POLL_MS_DEFAULT = 250;
/**
 * Past its TTL, etcd removes an expired lease within its next expiry check (every 500 ms) and a raft
 * round; a key still there this long after the TTL belongs to a live lease.
 */
export const LEASE_EXPIRY_SLACK_MS = 2_000;
/** A wait for an earlier registration's lease is logged once it lasted this long (it is logged at its end anyway). */
export const PREDECESSOR_WAIT_SAID_MS = 5_000;

export interface ClusterMemberOptions {
  endpoints: readonly string[];
  clusterId: string;
  brokerId: number;
  /** broker.session.timeout.ms: the lease's TTL, a whole number of seconds. */
  sessionTimeoutMs: number;
  clock: Clock;
  log: Logger;
  timers?: Timers;
  /** Per attempt at one etcd endpoint; the client's default when absent. */
  requestTimeoutMs?: number;
  predecessorPollMs?: number;
}

/** What the side-port and readiness report; plain data of this moment. */
export interface ClusterStatus {
  endpoints: readonly string[];
  lease: {
    /** undefined before the first grant and while a lease etcd dropped is being replaced. */
    id: bigint | undefined;
    ttlSeconds: number;
    /** Validity left by the monotonic clock; 0 when lapsed. */
    validForMs: number;
    valid: boolean;
    lapses: number;
    lastError: string | undefined;
  };
  /** The live brokers, lowest id first (this one included while it is registered). */
  members: RegisteredBroker[];
  /** Why this broker is not a member in good standing; undefined when it is. */
  problem: string | undefined;
  /** Who owns what, once the ownership manager runs (undefined before). */
  ownership: OwnershipStatus | undefined;
}

/** The ownership manager's view: this broker's claims and every owner key it watches. */
export interface OwnershipStatus {
  /** What this broker holds: `loading` and `leaving` are take-overs and hand-overs in progress. */
  held: { resource: OwnedResource; state: "loading" | "owned" | "leaving"; epoch: number }[];
  /** Every owner key in etcd as the watch has it. */
  owners: { resource: OwnedResource; brokerId: number; epoch: number }[];
}

/** What the side-port needs from cluster mode (a fake in unit tests). */
export interface ClusterStatusSource {
  status(): ClusterStatus;
}

/** Reasons etcd's client gives, in words for the one line a person reads. */
const REASON_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ConnectionRefused: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  FailedToOpenSocket: "cannot open a socket",
};

/** `http://a:2379 (connection refused)`, or `any of http://a:2379 (...), http://b:2379 (...)`. */
function describeFailures(failures: readonly EndpointFailure[]): string {
  const each = failures.map((f) => `${f.endpoint} (${REASON_WORDS[f.reason] ?? f.reason})`);
  return each.length === 1 ? each[0]! : `any of ${each.join(", ")}`;
}

/** One line for a failure to join at start-up, naming the endpoints and why; other errors pass through. */
export function startupFailure(error: unknown, endpoints: readonly string[]): unknown {
  const where = endpoints.join(", ");
  const how = "(--etcd, BUNKA_ETCD or etcd.endpoints)";
  if (error instanceof EtcdUnavailableError) {
    return new ConfigError(`cannot reach etcd at ${describeFailures(error.failures)}: cluster mode needs etcd to start; is it running, and are these its client URLs? ${how}`);
  }
  if (error instanceof EtcdServerError) return new ConfigError(`etcd at ${error.endpoint} refused to ${error.operation}: ${error.serverMessage} (gRPC code ${error.code})`);
  if (error instanceof DecodeError) return new ConfigError(`${where} did not answer as etcd's v3 JSON gateway does (${error.message}); are these etcd's client URLs? ${how}`);
  if (error instanceof DuplicateBrokerIdError) return new ConfigError(error.message);
  return error;
}

function holderOf(key: string, kv: { value: string; lease: bigint; createRevision: bigint }): RegisteredBroker | null {
  try {
    return { ...decodeBrokerRecord(key, kv.value), leaseId: kv.lease, registeredRevision: kv.createRevision };
  } catch {
    return null;
  }
}

export class ClusterMember implements ClusterStatusSource {
  private keeper: LeaseKeeper | undefined;
  private directory: BrokerDirectory | undefined;
  private live: RegisteredBroker[] = [];
  private lapses = 0;
  private lapsedAtMs: number | undefined;
  private manager: OwnershipManager | undefined;
  private failure: Error | undefined;
  private readonly failedListeners: ((error: Error) => void)[] = [];
  private readonly timers: Timers;

  private constructor(
    private readonly client: EtcdClient,
    private readonly options: ClusterMemberOptions,
  ) {
    this.timers = options.timers ?? systemTimers;
  }

  /**
   * Reaches etcd and makes sure that no other live process holds this broker id, waiting for the lease
   * of this broker's previous process when it left one behind. Throws a one-line ConfigError otherwise.
   */
  static async connect(options: ClusterMemberOptions): Promise<ClusterMember> {
    const client = new EtcdClient({ endpoints: options.endpoints, ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }) });
    const member = new ClusterMember(client, options);
    try {
      await member.waitForPredecessor();
    } catch (error) {
      client.close();
      throw startupFailure(error, client.endpoints);
    }
    return member;
  }

  /** The etcd client, for the other cluster pieces that talk to etcd (the metadata gate, the topic feed). */
  get etcd(): EtcdClient {
    return this.client;
  }

  get clusterId(): string {
    return this.options.clusterId;
  }

  get endpoints(): readonly string[] {
    return this.client.endpoints;
  }

  /** Grants the lease, registers `registration` under it and reads the directory. One-line ConfigError on failure. */
  async join(registration: BrokerRegistration): Promise<void> {
    if (this.keeper !== undefined) throw new FatalError("cluster member joined twice");
    const { clusterId, clock, log } = this.options;
    const keeper = brokerMembership({
      client: this.client,
      clusterId,
      registration,
      clock,
      log,
      timers: this.timers,
      ttlSeconds: this.options.sessionTimeoutMs / 1000,
    });
    keeper.on("lost", () => {
      this.lapses++;
      this.lapsedAtMs = clock.monotonicMs();
    });
    keeper.on("regained", () => {
      this.lapsedAtMs = undefined;
    });
    keeper.on("failed", (error) => {
      this.failure = error;
      for (const listener of [...this.failedListeners]) listener(error);
    });
    this.keeper = keeper;
    try {
      await keeper.start();
    } catch (error) {
      throw startupFailure(error, this.client.endpoints);
    }
    try {
      this.directory = await BrokerDirectory.open(this.client, clusterId, { onChange: (brokers) => this.membersChanged(brokers) }, log);
    } catch (error) {
      await keeper.stop({ revoke: true });
      throw startupFailure(error, this.client.endpoints);
    }
  }

  /**
   * Starts claiming and handing over (ownership-manager.ts) once the broker is registered: the manager
   * reads the owner keys, watches them, and runs a round whenever the live brokers change, the lease is
   * regained (a fresh lease means every claim under the old one is gone) or `changed` is called (topics).
   * Stopped by `stopOwnership` (at shutdown, handing everything over) or by `leave`.
   */
  async startOwnership(options: {
    host: OwnedResourceHost;
    resources: OwnershipManagerOptions["resources"];
    onMove?: OwnershipManagerOptions["onMove"];
  }): Promise<OwnershipManager> {
    const keeper = this.keeper;
    if (keeper === undefined || this.directory === undefined) throw new FatalError("ownership started before the broker joined its cluster");
    if (this.manager !== undefined) throw new FatalError("ownership started twice");
    const { clusterId, brokerId, clock, log } = this.options;
    const manager = new OwnershipManager({
      records: new OwnershipRecords(this.client, clusterId, log),
      selfId: brokerId,
      lease: keeper,
      host: options.host,
      resources: options.resources,
      liveBrokers: () => this.live.map((b) => b.brokerId),
      clock,
      log,
      timers: this.timers,
      ...(options.onMove === undefined ? {} : { onMove: options.onMove }),
    });
    this.manager = manager;
    keeper.on("regained", (_leaseId, fresh) => void manager.leaseRegained(fresh));
    await manager.start();
    return manager;
  }

  /**
   * Stops the ownership manager. `handOver` (SIGTERM): the registration goes first, so that the other
   * brokers count this one out and claim each resource the moment it is released; then everything held
   * is closed and released. The lease stays until `leave`, since the broker still closes under it.
   */
  async stopOwnership(options: { handOver: boolean }): Promise<void> {
    const manager = this.manager;
    if (manager === undefined) return;
    const leaseId = this.keeper?.leaseId;
    if (options.handOver && leaseId !== undefined) {
      await deregisterBroker(this.client, this.options.clusterId, this.options.brokerId, leaseId).catch((error: unknown) => {
        // etcd unreachable: the hand-over still releases what it can; the others wait for the lease.
        this.options.log.warn("could not remove this broker's registration before handing over", { error: String(error) });
      });
    }
    await manager.stop(options);
  }

  /** Called when the keeper gives up (another process took this broker id): the broker must stop. */
  onFailed(listener: (error: Error) => void): void {
    this.failedListeners.push(listener);
  }

  /** The live brokers as Metadata lists them. */
  liveBrokers(): BrokerEndpoint[] {
    return this.live.map((b) => ({
      brokerId: b.brokerId,
      host: b.kafka.host,
      port: b.kafka.port,
      rack: b.rack,
      ...(b.listeners === undefined ? {} : { listeners: b.listeners.map((l) => ({ name: l.name, host: l.host, port: l.port })) }),
    }));
  }

  status(): ClusterStatus {
    const nowMs = this.options.clock.monotonicMs();
    const keeper = this.keeper;
    const valid = keeper?.isValid(nowMs) ?? false;
    const lastError = keeper?.lastFailure;
    return {
      endpoints: this.client.endpoints,
      lease: {
        id: keeper?.leaseId,
        ttlSeconds: this.options.sessionTimeoutMs / 1000,
        validForMs: valid ? Math.round(keeper!.remainingMs(nowMs)) : 0,
        valid,
        lapses: this.lapses,
        lastError,
      },
      members: [...this.live],
      problem: this.problem(nowMs, valid, lastError),
      ownership:
        this.manager === undefined
          ? undefined
          : {
              held: this.manager.held(),
              owners: this.manager.allOwners().map(({ resource, brokerId, epoch }) => ({ resource, brokerId, epoch })),
            },
    };
  }

  /** Stops renewing and revokes the lease, which removes the registration at once; closes the client. */
  async leave(): Promise<void> {
    await this.manager?.stop({ handOver: false });
    await this.directory?.close();
    await this.keeper?.stop({ revoke: true });
    this.client.close();
  }

  private problem(nowMs: number, valid: boolean, lastError: string | undefined): string | undefined {
    if (this.failure !== undefined) return `this broker stopped being a cluster member: ${this.failure.message}`;
    if (this.keeper === undefined || this.directory === undefined) return "this broker has not joined its cluster in etcd yet";
    if (valid) return undefined;
    const since = this.lapsedAtMs === undefined ? "" : ` ${Math.max(0, Math.round((nowMs - this.lapsedAtMs) / 1000))} s ago`;
    const why = lastError === undefined ? "" : ` (${lastError})`;
    return `this broker's etcd lease lapsed${since}${why}; it is renewed as soon as etcd at ${this.client.endpoints.join(", ")} answers`;
  }

  private membersChanged(brokers: RegisteredBroker[]): void {
    const before = this.live.map((b) => b.brokerId);
    this.live = brokers;
    const after = brokers.map((b) => b.brokerId);
    if (before.length === after.length && before.every((id, i) => id === after[i])) return;
    const { log, brokerId } = this.options;
    log.info("cluster members", { brokerIds: after, self: brokerId });
    this.manager?.changed();
  }

  /**
   * Returns once this broker id has no registration, or throws a DuplicateBrokerIdError when a live
   * process holds it (see the file header for how the two are told apart).
   */
  private async waitForPredecessor(): Promise<void> {
    const { clusterId, brokerId, clock, log } = this.options;
    const key = brokerKey(clusterId, brokerId);
    let watched: { lease: bigint; sinceMs: number; deadlineMs: number; leastTtlSeconds: number; said: boolean } | undefined;
    for (;;) {
      const kv = (await this.client.range(key)).kvs[0];
      if (kv === undefined) {
        if (watched !== undefined) {
          log.info("the earlier registration of this broker id expired with its lease; joining", {
            brokerId,
            leaseId: String(watched.lease),
            waitedMs: Math.round(clock.monotonicMs() - watched.sinceMs),
          });
        }
        return;
      }
      const holder = holderOf(key, kv);
      // A key without a lease never expires: whoever wrote it is not a broker that crashed.
      if (kv.lease === 0n) throw new DuplicateBrokerIdError(clusterId, brokerId, holder);
      const ttl = await this.client.leaseTimeToLive(kv.lease);
      const nowMs = clock.monotonicMs();
      if (ttl.ttlSeconds >= 0) {
        if (watched === undefined || watched.lease !== kv.lease) {
          const deadlineMs = nowMs + ttl.grantedTtlSeconds * 1000 + LEASE_EXPIRY_SLACK_MS;
          watched = { lease: kv.lease, sinceMs: nowMs, deadlineMs, leastTtlSeconds: ttl.ttlSeconds, said: false };
        } else if (ttl.ttlSeconds > watched.leastTtlSeconds || nowMs > watched.deadlineMs) {
          // Its remaining time went up, or it outlived its TTL: someone keeps that lease alive.
          throw new DuplicateBrokerIdError(clusterId, brokerId, holder);
        } else {
          watched.leastTtlSeconds = ttl.ttlSeconds;
          // A live holder with a TTL of 6 s or more shows itself within one keep-alive interval (a third
          // of its TTL; etcd reports whole seconds left, so shorter ones are told by the deadline only):
          // a duplicate is refused in one line, and a wait longer than that is said, once.
          if (!watched.said && nowMs - watched.sinceMs >= Math.max((ttl.grantedTtlSeconds * 1000) / 3 + 1000, PREDECESSOR_WAIT_SAID_MS)) {
            watched.said = true;
            log.warn(
              "this broker id is registered in etcd under a lease nobody seems to renew, probably by this broker's previous process that did not stop cleanly; waiting for that lease to expire",
              {
                brokerId,
                leaseId: String(kv.lease),
                kafka: holder === null ? "unreadable" : `${holder.kafka.host}:${holder.kafka.port}`,
                waitMsMax: Math.max(0, Math.round(watched.deadlineMs - nowMs)),
              },
            );
          }
        }
      }
      await new Promise<void>((resolve) => this.timers.after(this.options.predecessorPollMs ?? PREDECESSOR_POLL_MS_DEFAULT, resolve));
    }
  }
}
