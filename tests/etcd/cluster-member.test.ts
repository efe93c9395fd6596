/**
 * A broker's membership from start-up to shutdown against a real etcd (cluster/cluster-member.ts):
 * connect refuses an unreachable etcd and a live duplicate in one line each, and waits out the lease of a
 * process that died without revoking it; join registers and reads the directory; status reports the
 * lease and the members; startOwnership runs the ownership manager over the member's lease and directory;
 * leave revokes the lease, which deregisters the broker at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { listBrokers } from "../../src/cluster/broker-registry.ts";
import { brokerKey, resourceId, type OwnedResource, type ResourceKind } from "../../src/cluster/cluster-keys.ts";
import { ClusterMember, type ClusterMemberOptions } from "../../src/cluster/cluster-member.ts";
import { encodeBrokerRecord, type BrokerRegistration } from "../../src/cluster/cluster-records.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import type { OwnedResourceHost } from "../../src/cluster/ownership-manager.ts";
import { ConfigError } from "../../src/errors/errors.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { EtcdServer, freePort } from "../support/etcd.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;
const members: ClusterMember[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  for (const member of members) await member.leave().catch(() => {});
  client?.close();
  await etcd?.close();
});

let clusterCounter = 0;
const newCluster = () => `member-${++clusterCounter}`;

function registration(brokerId: number, port = 9092): BrokerRegistration {
  return { brokerId, kafka: { host: "127.0.0.1", port }, http: { host: "127.0.0.1", port: port + 1 }, rack: null };
}

function options(clusterId: string, brokerId: number, overrides: Partial<ClusterMemberOptions> = {}): ClusterMemberOptions {
  return { endpoints: [etcd.endpoint], clusterId, brokerId, sessionTimeoutMs: 2000, clock: systemClock, log: silentLogger, predecessorPollMs: 50, ...overrides };
}

async function connected(clusterId: string, brokerId: number, overrides: Partial<ClusterMemberOptions> = {}): Promise<ClusterMember> {
  const member = await ClusterMember.connect(options(clusterId, brokerId, overrides));
  members.push(member);
  return member;
}

async function joined(clusterId: string, brokerId: number, port = 9092, sessionTimeoutMs = 2000): Promise<ClusterMember> {
  const member = await connected(clusterId, brokerId, { sessionTimeoutMs });
  await member.join(registration(brokerId, port));
  return member;
}

/** Runs `fn`, expects a one-line ConfigError, returns its message. */
async function configError(fn: () => Promise<unknown>): Promise<string> {
  const error = await fn().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  const message = (error as Error).message;
  expect(message).not.toContain("\n");
  return message;
}

describe("cluster member", () => {
  test("join registers the broker under its lease; status has the lease and the members; leave deregisters at once", async () => {
    const cluster = newCluster();
    const one = await joined(cluster, 1, 19092);
    const status = one.status();
    expect(status.endpoints).toEqual([etcd.endpoint]);
    expect(status.problem).toBeUndefined();
    expect(status.lease.valid).toBe(true);
    expect(status.lease.ttlSeconds).toBe(2);
    expect(status.lease.validForMs).toBeGreaterThan(0);
    expect(status.lease.validForMs).toBeLessThanOrEqual(2000);
    expect(status.lease.lapses).toBe(0);
    expect(status.members.map((m) => [m.brokerId, m.kafka.port, m.http?.port, m.leaseId])).toEqual([[1, 19092, 19093, status.lease.id]]);
    expect(one.liveBrokers()).toEqual([{ brokerId: 1, host: "127.0.0.1", port: 19092, rack: null }]);

    const two = await joined(cluster, 2, 29092);
    await waitUntil(() => one.status().members.length === 2, "broker 1 sees broker 2");
    expect(two.status().members.map((m) => m.brokerId)).toEqual([1, 2]);

    const leftAtMs = performance.now();
    await two.leave();
    await waitUntil(() => one.status().members.length === 1, "broker 1 sees broker 2 leave", 1_500);
    // Well before the 2 s TTL could have run out: the revocation removed the key.
    expect(performance.now() - leftAtMs).toBeLessThan(1_500);
    expect((await listBrokers(client, cluster)).brokers.map((b) => b.brokerId)).toEqual([1]);
  });

  test("two brokers run the ownership manager: each opens half the slots, a hand-over at stop gives the rest to the other at once, a second start is refused", async () => {
    const cluster = newCluster();
    const one = await joined(cluster, 1, 19092);
    const two = await joined(cluster, 2, 29092);
    await waitUntil(() => one.status().members.length === 2 && two.status().members.length === 2, "both see both");
    const opened = new Map<number, Set<string>>([
      [1, new Set()],
      [2, new Set()],
    ]);
    const name = (resource: OwnedResource) => `${resource.kind}/${resourceId(resource)}`;
    const hostOf = (id: number): OwnedResourceHost => ({
      acquire: async (resource, epoch) => {
        expect(epoch).toBeGreaterThanOrEqual(1);
        for (const [other, set] of opened) if (other !== id) expect(set.has(name(resource))).toBe(false);
        opened.get(id)!.add(name(resource));
      },
      release: async (resource) => void opened.get(id)!.delete(name(resource)),
    });
    const slots = (kind: ResourceKind): OwnedResource[] => (kind === "partition" ? [] : Array.from({ length: 50 }, (_, slot) => ({ kind, slot })));
    const managerOne = await one.startOwnership({ host: hostOf(1), resources: slots });
    const managerTwo = await two.startOwnership({ host: hostOf(2), resources: slots });
    await waitUntil(() => opened.get(1)!.size === 50 && opened.get(2)!.size === 50, "the 100 slots split evenly", 20_000);
    // Each manager learns the other's claims through its watch, so its view may lag the claims by an event.
    const txnZero: OwnedResource = { kind: "txn", slot: 0 };
    await waitUntil(() => managerOne.ownerOf(txnZero) !== -1 && managerOne.ownerOf(txnZero) === managerTwo.ownerOf(txnZero), "both managers to name one owner of txn slot 0");
    expect(opened.get(managerOne.ownerOf(txnZero))!.has(name(txnZero))).toBe(true);
    await expect(one.startOwnership({ host: hostOf(1), resources: slots })).rejects.toThrow("ownership started twice");

    // A hand-over at stop releases the keys: broker 2 takes all without waiting for broker 1's lease.
    const stoppedAtMs = performance.now();
    await one.stopOwnership({ handOver: true });
    expect(opened.get(1)!.size).toBe(0);
    await waitUntil(() => opened.get(2)!.size === 100, "broker 2 takes over everything", 1_900);
    expect(performance.now() - stoppedAtMs).toBeLessThan(2_000);
  }, 30_000);

  test("an unreachable etcd is one line naming each endpoint and why", async () => {
    const closedPort = freePort();
    const message = await configError(() => connected(newCluster(), 1, { endpoints: [`http://127.0.0.1:${closedPort}`, "http://nosuchhost.invalid:2379"] }));
    expect(message).toBe(
      `cannot reach etcd at any of http://127.0.0.1:${closedPort} (connection refused), http://nosuchhost.invalid:2379 (host not found): cluster mode needs etcd to start; is it running, and are these its client URLs? (--etcd, BUNKA_ETCD or etcd.endpoints)`,
    );
  });

  test("a broker id another live process holds (2 s TTL): refused by the deadline, in one line naming the holder", async () => {
    const cluster = newCluster();
    const first = await joined(cluster, 4, 14092);
    const leaseId = first.status().lease.id;
    const startedMs = performance.now();
    const message = await configError(() => connected(cluster, 4));
    expect(message).toBe(
      `broker id 4 is already registered in cluster ${cluster} by another live process (lease ${leaseId}, Kafka listener 127.0.0.1:14092); two brokers cannot share an id`,
    );
    // etcd reports whole seconds left, so a 2 s lease never shows a keep-alive: the holder's TTL and
    // etcd's expiry slack tell, not a wait for ever.
    const waitedMs = performance.now() - startedMs;
    expect(waitedMs).toBeGreaterThan(2_000);
    expect(waitedMs).toBeLessThan(2_000 + 2_000 + 1_000);
    expect(first.status().problem).toBeUndefined();
  });

  test("a broker id another live process holds (6 s TTL): refused once its keep-alive pushes the remaining time up", async () => {
    const cluster = newCluster();
    await joined(cluster, 8, 18092, 6000);
    const startedMs = performance.now();
    expect(await configError(() => connected(cluster, 8))).toStartWith("broker id 8 is already registered");
    // Within one keep-alive interval (2 s) and a poll, well before the 6 s TTL and the slack.
    expect(performance.now() - startedMs).toBeLessThan(3_500);
  });

  test("a key left by a process that died without revoking its lease is waited out, then the broker joins", async () => {
    const cluster = newCluster();
    // What a SIGKILLed broker leaves: its registration under a lease nobody keeps alive any more.
    const orphan = await client.leaseGrant(2);
    await client.put(brokerKey(cluster, 6), encodeBrokerRecord(registration(6, 16092)), { lease: orphan.id });
    const startedMs = performance.now();
    const member = await connected(cluster, 6);
    const waitedMs = performance.now() - startedMs;
    // It waited for the orphan's lease to expire (2 s TTL), and not past the TTL and the slack.
    expect(waitedMs).toBeGreaterThan(1_000);
    expect(waitedMs).toBeLessThan(2_000 + 2_000 + 1_000);
    expect((await client.leaseTimeToLive(orphan.id)).ttlSeconds).toBe(-1);
    await member.join(registration(6, 26092));
    expect((await listBrokers(client, cluster)).brokers.map((b) => b.kafka.port)).toEqual([26092]);
  });

  test("a key without a lease never expires: refused at once", async () => {
    const cluster = newCluster();
    await client.put(brokerKey(cluster, 9), encodeBrokerRecord(registration(9, 19999)));
    const startedMs = performance.now();
    const message = await configError(() => connected(cluster, 9));
    expect(message).toBe(`broker id 9 is already registered in cluster ${cluster} by another live process (lease 0, Kafka listener 127.0.0.1:19999); two brokers cannot share an id`);
    expect(performance.now() - startedMs).toBeLessThan(1_000);
    await client.deleteRange(brokerKey(cluster, 9));
  });

  test("the lease dropped and the id taken meanwhile by another process: the member fails, says so, and tells the broker to stop", async () => {
    const cluster = newCluster();
    const member = await joined(cluster, 5, 15092);
    const failures: string[] = [];
    member.onFailed((error) => failures.push(error.message));
    const ownLease = member.status().lease.id!;
    // Another process with the same id holds the key when this one's lease goes: the key is moved to the
    // intruder's lease first, so revoking this broker's lease leaves it there (no window to race in).
    const intruder = await client.leaseGrant(30);
    await client.put(brokerKey(cluster, 5), encodeBrokerRecord(registration(5, 25092)), { lease: intruder.id });
    await client.leaseRevoke(ownLease);
    await waitUntil(() => failures.length === 1, "the member failed", 5_000);
    expect(failures[0]).toBe(
      `broker id 5 is already registered in cluster ${cluster} by another live process (lease ${intruder.id}, Kafka listener 127.0.0.1:25092); two brokers cannot share an id`,
    );
    expect(member.status().problem).toBe(`this broker stopped being a cluster member: ${failures[0]}`);
    await member.leave();
    // Leaving did not take the other process's registration with it.
    expect((await listBrokers(client, cluster)).brokers.map((b) => [b.kafka.port, b.leaseId])).toEqual([[25092, intruder.id]]);
    await client.leaseRevoke(intruder.id);
  });

  test(
    "etcd stopped: the lease lapses by the broker's clock and status says why; etcd back: valid again, the same lease",
    async () => {
      const cluster = newCluster();
      const member = await joined(cluster, 3);
      const leaseId = member.status().lease.id;
      await etcd.stop();
      try {
        // The keeper's timer at the deadline counts the lapse (validity itself is read off the clock).
        await waitUntil(() => member.status().lease.lapses === 1, "the lease lapsed", 5_000);
        const lapsed = member.status();
        expect(lapsed.lease.valid).toBe(false);
        expect(lapsed.lease.validForMs).toBe(0);
        expect(lapsed.lease.lastError).toContain("no endpoint answered");
        expect(lapsed.problem).toMatch(/^this broker's etcd lease lapsed \d+ s ago \(etcd lease keep-alive: no endpoint answered .*\); it is renewed as soon as etcd at http:\/\/127\.0\.0\.1:\d+ answers$/);
        // The directory keeps what it last heard.
        expect(lapsed.members.map((m) => m.brokerId)).toEqual([3]);
      } finally {
        await etcd.launch();
      }
      await waitUntil(() => member.status().lease.valid, "the lease valid again", 10_000);
      const back = member.status();
      expect(back.problem).toBeUndefined();
      expect(back.lease.lapses).toBe(1);
      expect(back.lease.lastError).toBeUndefined();
      // etcd kept the lease across its restart (a single member refreshes leases when it becomes leader).
      expect(back.lease.id).toBe(leaseId);
    },
    30_000,
  );
});
