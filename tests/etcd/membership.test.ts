/**
 * Membership against a real etcd: a broker registers under its lease and is listed and watched; a second
 * process with the same broker id is refused while the first lives; when keep-alives stop, the keeper
 * declares the lease lost by its own clock before etcd expires it, etcd then removes the registration,
 * and once etcd is reachable again the broker registers under a fresh lease; an etcd restarted quickly
 * costs the broker neither its lease nor its registration.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BrokerDirectory, DuplicateBrokerIdError, brokerMembership, listBrokers, registerBroker, type RegisteredBroker } from "../../src/cluster/broker-registry.ts";
import { brokerKey } from "../../src/cluster/cluster-keys.ts";
import type { BrokerRegistration } from "../../src/cluster/cluster-records.ts";
import { EtcdClient, type CallOptions } from "../../src/cluster/etcd/etcd-client.ts";
import { EtcdUnavailableError } from "../../src/cluster/etcd/etcd-errors.ts";
import type { LeaseApi, LeaseKeeper } from "../../src/cluster/lease-keeper.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { EtcdServer } from "../support/etcd.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;
const toStop: { stop?: () => Promise<void>; close?: () => Promise<void> }[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  for (const thing of toStop.reverse()) await (thing.stop ?? thing.close)!.call(thing).catch(() => {});
  client?.close();
  await etcd?.close();
});

let clusterCounter = 0;
function clusterId(): string {
  return `membership-${++clusterCounter}`;
}

function registration(brokerId: number, port = 9092): BrokerRegistration {
  return { brokerId, kafka: { host: "127.0.0.1", port }, http: { host: "127.0.0.1", port: 9644 }, rack: null };
}

/** The client's lease calls, with keep-alives that can be cut off (as when etcd is unreachable). */
class SwitchableLeases implements LeaseApi {
  blocked = false;
  /** When the last keep-alive that etcd answered "alive" was sent (monotonic ms). */
  lastConfirmedSentAtMs = -1;
  constructor(private readonly inner: EtcdClient) {}
  leaseGrant(ttlSeconds: number, call?: CallOptions) {
    return this.inner.leaseGrant(ttlSeconds, call);
  }
  async leaseKeepAlive(id: bigint, call?: CallOptions) {
    if (this.blocked) throw new EtcdUnavailableError("lease keep-alive", [{ endpoint: "test", reason: "cut off by the test" }], false);
    const sentAtMs = systemClock.monotonicMs();
    const answer = await this.inner.leaseKeepAlive(id, call);
    if (answer.alive) this.lastConfirmedSentAtMs = sentAtMs;
    return answer;
  }
  leaseRevoke(id: bigint, call?: CallOptions) {
    return this.inner.leaseRevoke(id, call);
  }
  async leaseTimeToLive(id: bigint, options?: { keys?: boolean }, call?: CallOptions) {
    if (this.blocked) throw new EtcdUnavailableError("lease time-to-live", [{ endpoint: "test", reason: "cut off by the test" }], false);
    return this.inner.leaseTimeToLive(id, options, call);
  }
}

function keeperFor(cluster: string, brokerId: number, options: { port?: number; leases?: LeaseApi; ttlSeconds?: number } = {}): LeaseKeeper {
  const keeper = brokerMembership({
    client,
    leases: options.leases,
    clusterId: cluster,
    registration: registration(brokerId, options.port),
    clock: systemClock,
    log: silentLogger,
    ttlSeconds: options.ttlSeconds ?? 2,
    safetyMarginMs: 300,
    keepAliveIntervalMs: 500,
  });
  toStop.push(keeper);
  return keeper;
}

describe("membership in etcd", () => {
  test("a broker registers under its lease with its listener and side-port, and is listed", async () => {
    const cluster = clusterId();
    const keeper = keeperFor(cluster, 1);
    await keeper.start();
    const { brokers } = await listBrokers(client, cluster);
    expect(brokers).toEqual([{ ...registration(1), leaseId: keeper.leaseId!, registeredRevision: brokers[0]!.registeredRevision }]);
    const kv = (await client.range(brokerKey(cluster, 1))).kvs[0]!;
    expect(kv.lease).toBe(keeper.leaseId!);
    expect(JSON.parse(kv.value)).toEqual({ format: "bunka-broker", version: 1, ...registration(1) });
    expect(keeper.isValid(systemClock.monotonicMs())).toBe(true);
    await keeper.stop();
    expect((await listBrokers(client, cluster)).brokers).toEqual([]);
  });

  test("a second process with the same broker id is refused while the first lives, and admitted after it left", async () => {
    const cluster = clusterId();
    const first = keeperFor(cluster, 5, { port: 19092 });
    await first.start();
    const second = keeperFor(cluster, 5, { port: 29092 });
    const error = await second.start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuplicateBrokerIdError);
    expect((error as Error).message).toBe(
      `broker id 5 is already registered in cluster ${cluster} by another live process (lease ${first.leaseId}, Kafka listener 127.0.0.1:19092); two brokers cannot share an id`,
    );
    // The refused one left nothing: the registration is still the first one's.
    expect((await listBrokers(client, cluster)).brokers.map((b) => [b.kafka.port, b.leaseId])).toEqual([[19092, first.leaseId!]]);
    await first.stop();
    const third = keeperFor(cluster, 5, { port: 29092 });
    await third.start();
    expect((await listBrokers(client, cluster)).brokers.map((b) => b.kafka.port)).toEqual([29092]);
  });

  test("registering again under the same lease is idempotent and updates the advertised endpoint", async () => {
    const cluster = clusterId();
    const lease = await client.leaseGrant(30);
    const first = await registerBroker(client, cluster, registration(3, 1000), lease.id);
    const again = await registerBroker(client, cluster, registration(3, 2000), lease.id);
    expect(again.registeredRevision).toBe(first.registeredRevision);
    expect((await listBrokers(client, cluster)).brokers.map((b) => b.kafka.port)).toEqual([2000]);
    const other = await client.leaseGrant(30);
    await expect(registerBroker(client, cluster, registration(3), other.id)).rejects.toBeInstanceOf(DuplicateBrokerIdError);
    await client.leaseRevoke(lease.id);
    await client.leaseRevoke(other.id);
  });

  test("the directory sees brokers join and leave", async () => {
    const cluster = clusterId();
    const views: number[][] = [];
    const directory = await BrokerDirectory.open(client, cluster, { onChange: (brokers) => views.push(brokers.map((b) => b.brokerId)) }, silentLogger);
    toStop.push(directory);
    const one = keeperFor(cluster, 1);
    const two = keeperFor(cluster, 2);
    await one.start();
    await two.start();
    await waitUntil(() => directory.list().length === 2, "both brokers listed");
    await one.stop();
    await waitUntil(() => directory.list().length === 1, "broker 1 gone");
    expect(directory.list().map((b) => b.brokerId)).toEqual([2]);
    expect(views).toEqual([[], [1], [1, 2], [2]]);
    await directory.close();
  });

  test(
    "etcd restarted quickly: the broker keeps its lease and its registration, and is never lost",
    async () => {
      const cluster = clusterId();
      const leases = new SwitchableLeases(client);
      const keeper = keeperFor(cluster, 8, { ttlSeconds: 6, leases });
      const events: string[] = [];
      keeper.on("lost", () => events.push("lost"));
      await keeper.start();
      const leaseId = keeper.leaseId!;
      const before = (await listBrokers(client, cluster)).brokers[0]!;
      await etcd.restart();
      // Keep-alives go through again under the same lease.
      const restartedAtMs = systemClock.monotonicMs();
      await waitUntil(() => leases.lastConfirmedSentAtMs > restartedAtMs, "a keep-alive confirmed after the restart", 10_000);
      expect(keeper.isValid(systemClock.monotonicMs())).toBe(true);
      expect(keeper.leaseId).toBe(leaseId);
      expect(events).toEqual([]);
      const after = (await listBrokers(client, cluster)).brokers[0]!;
      expect(after.leaseId).toBe(leaseId);
      expect(after.registeredRevision).toBe(before.registeredRevision);
      await keeper.stop();
    },
    30_000,
  );

  test(
    "keep-alives stop: lost by the broker's own clock before etcd expires the lease; a fresh lease once etcd is back",
    async () => {
      const cluster = clusterId();
      let goneAtMs: number | undefined;
      let current: RegisteredBroker | undefined;
      const directory = await BrokerDirectory.open(
        client,
        cluster,
        {
          onChange: (brokers) => {
            current = brokers.find((b) => b.brokerId === 7);
            if (current === undefined && goneAtMs === undefined && brokers.length === 0) goneAtMs = systemClock.monotonicMs();
          },
        },
        silentLogger,
      );
      toStop.push(directory);
      const leases = new SwitchableLeases(client);
      const keeper = keeperFor(cluster, 7, { leases });
      const events: string[] = [];
      let lostAtMs: number | undefined;
      keeper.on("lost", (_id, reason) => {
        lostAtMs = systemClock.monotonicMs();
        events.push(`lost ${reason}`);
      });
      keeper.on("regained", (_id, fresh) => events.push(fresh ? "regained fresh" : "regained"));
      await keeper.start();
      const firstLease = keeper.leaseId!;
      goneAtMs = undefined;
      await waitUntil(() => current?.leaseId === firstLease, "the registration seen");
      // Let a keep-alive or two go through, then cut them off.
      await waitUntil(() => leases.lastConfirmedSentAtMs > 0, "a keep-alive confirmed");
      leases.blocked = true;
      const cutAtMs = systemClock.monotonicMs();
      await waitUntil(() => lostAtMs !== undefined, "the lease declared lost", 5_000);
      expect(keeper.isValid(systemClock.monotonicMs())).toBe(false);
      // Lost when the last confirmed keep-alive's send time + TTL - margin passed. The keeper took its send
      // time a few microseconds before this wrapper did, hence the millisecond of slack.
      expect(lostAtMs!).toBeGreaterThanOrEqual(leases.lastConfirmedSentAtMs + 2_000 - 300 - 1);
      // etcd still has the lease then: the registration is there until etcd expires it.
      expect(goneAtMs).toBeUndefined();
      await waitUntil(() => goneAtMs !== undefined, "etcd expiring the lease and the registration", 10_000);
      expect(goneAtMs!).toBeGreaterThan(lostAtMs!);
      expect(goneAtMs! - cutAtMs).toBeGreaterThan(1_000);
      leases.blocked = false;
      await waitUntil(() => events.includes("regained fresh"), "a fresh lease", 5_000);
      expect(keeper.leaseId).not.toBe(firstLease);
      await waitUntil(() => current?.leaseId === keeper.leaseId, "registered again under the fresh lease");
      expect(events).toEqual(["lost expired-locally", "regained fresh"]);
      expect(keeper.isValid(systemClock.monotonicMs())).toBe(true);
      await keeper.stop();
      await directory.close();
    },
    30_000,
  );
});
