/**
 * The metadata gate: every change to topics (create, delete, add partitions, configs) and to dynamic
 * broker configs runs through `MetadataMutations.run` (docs/architecture.md, "Topic changes across
 * brokers").
 *
 * - Single-broker mode (`immediateMutations`, also what a broker without `services.mutations` uses): fn
 *   runs at once; the stores' own queues order the changes as before.
 * - Cluster mode (`GatedMutations`): one run at a time in this process, and across the cluster through a
 *   lock in etcd (cluster/etcd-lock.ts). Holding it, the broker first reads every topic file and the
 *   broker configs again, so that fn decides on the latest state even when an announcement from the
 *   previous holder has not arrived yet; checks that its lease is still valid; runs fn; announces what fn
 *   changed (cluster/topic-feed.ts) and only then lets the lock go, so that the next holder's refresh,
 *   and every broker's watch, sees the change.
 *
 * A change made by this broker outside a run (nothing should, but a path not yet routed through the
 * gate would) is announced at once, so the other brokers still see it.
 *
 * Runs do not nest: fn must not call `run` again (it would wait for itself).
 */
import { EtcdLock, LockUnavailableError, metadataLockKey, type LockHold } from "../cluster/etcd-lock.ts";
import type { EtcdClient } from "../cluster/etcd/etcd-client.ts";
import type { WatchOptions } from "../cluster/etcd/etcd-watch.ts";
import { TopicFeed } from "../cluster/topic-feed.ts";
import { AclFeed } from "../cluster/acl-feed.ts";
import { ScramFeed } from "../cluster/scram-feed.ts";
import type { Logger } from "../platform/logger.ts";
import type { BrokerConfigStore } from "../storage/broker-config-store.ts";
import type { TopicStore } from "../storage/topic-store.ts";
import { reloadBrokerConfigs } from "./config-changes.ts";
import type { BrokerServices } from "./services.ts";

export interface MetadataMutations {
  /** Runs `fn`, which changes topics or broker configs, serialized with every other such change (see the header). */
  run<T>(what: string, fn: () => Promise<T>): Promise<T>;
}

/** Single-broker mode: nobody else changes the files, so there is nothing to wait for or read again. */
export const immediateMutations: MetadataMutations = {
  run: (_what, fn) => fn(),
};

/** The gate a handler uses: the cluster's when one is wired, else single-broker mode's. */
export function mutationsOf(services: Pick<BrokerServices, "mutations">): MetadataMutations {
  return services.mutations ?? immediateMutations;
}

/**
 * The gate could not be taken (this broker's lease is not valid, etcd does not answer, another broker
 * held it too long): nothing was changed, and the request may be tried again.
 */
export class MetadataGateUnavailableError extends Error {
  override readonly name = "MetadataGateUnavailableError";
}

/** Runs `fn` under the gate; `unavailable` answers the request when the gate cannot be taken. */
export async function underGate<T>(services: Pick<BrokerServices, "mutations" | "log">, what: string, fn: () => Promise<T>, unavailable: (reason: string) => T): Promise<T> {
  try {
    return await mutationsOf(services).run(what, fn);
  } catch (error) {
    if (!(error instanceof MetadataGateUnavailableError)) throw error;
    services.log.warn("a metadata change was refused: the cluster's metadata gate cannot be taken", { what, reason: error.message });
    return unavailable(error.message);
  }
}

/** The cluster-wide lock the gate holds (EtcdLock in production, an in-memory one in unit tests). */
export interface GateLock {
  acquire(what: string): Promise<LockHold>;
}

/** Where the gate announces changes (TopicFeed in production). */
export interface ChangeAnnouncer {
  announce(topic: string): Promise<void>;
  announceBrokerConfigs(): Promise<void>;
}

export interface GatedMutationsOptions {
  lock: GateLock;
  topics: TopicStore;
  brokerConfigs: BrokerConfigStore;
  /** Reads the broker configs again and applies them to the running broker (reloadBrokerConfigs). */
  reloadBrokerConfigs(): Promise<unknown>;
  announcer: ChangeAnnouncer;
  log: Logger;
}

interface Pending {
  topics: Set<string>;
  brokerConfigs: boolean;
}

export class GatedMutations implements MetadataMutations {
  private tail: Promise<unknown> = Promise.resolve();
  private pending: Pending | undefined;
  private readonly unsubscribe: (() => void)[] = [];
  /** The token of the hold now running, for logs; undefined between runs. */
  private token: bigint | undefined;

  constructor(private readonly options: GatedMutationsOptions) {
    this.unsubscribe.push(
      options.topics.onChange((change) => {
        if (change.by !== "this-broker") return;
        if (this.pending !== undefined) this.pending.topics.add(change.topic);
        else void this.announceNow({ topics: new Set([change.topic]), brokerConfigs: false });
      }),
      options.brokerConfigs.onChange(() => {
        if (this.pending !== undefined) this.pending.brokerConfigs = true;
        else void this.announceNow({ topics: new Set(), brokerConfigs: true });
      }),
    );
  }

  run<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(() => this.runHeld(what, fn));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** The token of the hold running now (the lock key's create revision), undefined between runs. */
  get currentToken(): bigint | undefined {
    return this.token;
  }

  /** Stops listening to the stores; runs already queued still finish. */
  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
  }

  private async runHeld<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const { lock, topics, log } = this.options;
    let hold: LockHold;
    try {
      hold = await lock.acquire(what);
    } catch (error) {
      if (error instanceof LockUnavailableError) throw new MetadataGateUnavailableError(error.message, { cause: error });
      throw error;
    }
    this.token = hold.token;
    try {
      // Refresh, then act: whatever the previous holder did is in the files by now (it announced before
      // letting go, and its writes were durable before that), so fn decides on the latest state.
      await topics.refreshAll();
      await this.options.reloadBrokerConfigs();
      if (!hold.valid()) throw new MetadataGateUnavailableError(`the lease under which ${what} holds the metadata gate lapsed before the change began`);
      this.pending = { topics: new Set(), brokerConfigs: false };
      try {
        return await fn();
      } finally {
        const pending = this.pending;
        this.pending = undefined;
        await this.announceNow(pending);
        if (!hold.valid()) log.warn("the metadata gate's lease lapsed during a change; another broker may have changed metadata meanwhile", { what, token: String(hold.token) });
      }
    } finally {
      this.token = undefined;
      await hold.release();
    }
  }

  /**
   * Announces, logging a failure rather than throwing: the change is durable either way, and the next
   * holder's refresh reads it from the files; only brokers that change nothing see it later.
   */
  private async announceNow(pending: Pending): Promise<void> {
    const { announcer, log } = this.options;
    for (const topic of [...pending.topics].sort()) {
      await announcer.announce(topic).catch((error: unknown) => log.error("a topic change could not be announced; other brokers read it at their next change", { topic, error: String(error) }));
    }
    if (pending.brokerConfigs) {
      await announcer.announceBrokerConfigs().catch((error: unknown) => log.error("a broker config change could not be announced; other brokers read it at their next change", { error: String(error) }));
    }
  }
}

export interface ClusterMetadata {
  readonly mutations: GatedMutations;
  readonly feed: TopicFeed;
  readonly lock: EtcdLock;
  /** Stops watching and announcing; call before the broker closes. */
  close(): Promise<void>;
}

export interface ClusterMetadataOptions {
  client: EtcdClient;
  clusterId: string;
  /** This broker's lease as of now (ClusterMember.status().lease gives both fields). */
  lease(): { id: bigint | undefined; valid: boolean };
  services: BrokerServices;
  /** How long a change waits for another broker's hold before it is answered with a retriable error. */
  lockWaitMs?: number;
  watch?: WatchOptions;
}

/**
 * Cluster mode's wiring: opens the topic feed (topics and broker configs read again when another broker
 * announces a change), builds the etcd lock and the gate, and installs the gate as `services.mutations`,
 * which every handler that changes metadata reads at each request.
 */
export async function startClusterMetadata(options: ClusterMetadataOptions): Promise<ClusterMetadata> {
  const { client, clusterId, services } = options;
  const selfId = services.config.brokerId;
  const nowMs = () => services.clock.nowMs();
  const feed = await TopicFeed.open({
    client,
    clusterId,
    selfId,
    refresh: async (topic) => void (await services.topics.refresh(topic)),
    refreshBrokerConfigs: async () => void (await reloadBrokerConfigs(services)),
    log: services.log,
    nowMs,
  });
  const lock = new EtcdLock({
    client,
    key: metadataLockKey(clusterId),
    selfId,
    lease: options.lease,
    log: services.log,
    nowMs,
    ...(options.lockWaitMs === undefined ? {} : { waitMs: options.lockWaitMs }),
    ...(options.watch === undefined ? {} : { watch: options.watch }),
  });
  const mutations = new GatedMutations({
    lock,
    topics: services.topics,
    brokerConfigs: services.brokerConfigs,
    reloadBrokerConfigs: () => reloadBrokerConfigs(services),
    announcer: feed,
    log: services.log,
  });
  services.mutations = mutations;
  // ACL changes (CreateAcls, DeleteAcls) run under the same gate and are announced on a key of their
  // own, which every broker with an authorizer watches (broker/authorizer.ts).
  const aclFeed = services.authorizer.enabled
    ? await AclFeed.open({ client, clusterId, selfId, refresh: () => services.authorizer.reload(), log: services.log, nowMs, ...(options.watch === undefined ? {} : { watch: options.watch }) })
    : undefined;
  services.authorizer.useAnnouncer(aclFeed);
  // SCRAM credential changes (AlterUserScramCredentials) likewise: every broker authenticates from them.
  const scramFeed = await ScramFeed.open({ client, clusterId, selfId, refresh: () => services.scramCredentials.store.refresh(), log: services.log, nowMs, ...(options.watch === undefined ? {} : { watch: options.watch }) });
  services.scramCredentials.useAnnouncer(scramFeed);
  return {
    mutations,
    feed,
    lock,
    async close() {
      if (services.mutations === mutations) delete services.mutations;
      mutations.close();
      services.authorizer.useAnnouncer(undefined);
      await aclFeed?.close();
      services.scramCredentials.useAnnouncer(undefined);
      await scramFeed.close();
      await feed.close();
    },
  };
}
