/**
 * Ownership managers of three brokers against a real etcd: every resource gets exactly one owner, shares
 * are even, losing a broker moves only its share once its lease is gone, a broker coming back takes a fair
 * share with the fewest moves, a hand-over closes the resource before its key goes, and a broker whose
 * lease is not valid serves nothing and claims nothing.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type { OwnedResource, ResourceKind } from "../../src/cluster/cluster-keys.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { OwnershipManager, type LeaseView, type OwnedResourceHost } from "../../src/cluster/ownership-manager.ts";
import { OwnershipRecords } from "../../src/cluster/ownership-records.ts";
import { SLOT_COUNT } from "../../src/cluster/ownership.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { EtcdServer } from "../support/etcd.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  client?.close();
  await etcd?.close();
});

const PARTITIONS = 12;
const TOTAL = PARTITIONS + 2 * SLOT_COUNT;

function resourcesOf(kind: ResourceKind): OwnedResource[] {
  if (kind === "partition") return Array.from({ length: PARTITIONS }, (_, partition) => ({ kind, topic: "orders", partition }));
  return Array.from({ length: SLOT_COUNT }, (_, slot) => ({ kind, slot }));
}

const name = (r: OwnedResource) => (r.kind === "partition" ? `partition/${r.topic}-${r.partition}` : `${r.kind}/${r.slot}`);

/** A host that records what it opened and closed, and can be told to fail or to hold a close. */
class RecordingHost implements OwnedResourceHost {
  readonly open = new Map<string, number>();
  /** Every host of the cluster, to catch a resource opened while another broker still has it open. */
  constructor(private readonly cluster: RecordingHost[], readonly violations: string[]) {
    cluster.push(this);
  }
  readonly events: string[] = [];
  failAcquire = new Set<string>();
  failedAttempts = 0;
  /** What the host's manager said about writing while each take-over ran (a take-over writes). */
  readonly mayActWhileLoading: boolean[] = [];
  manager: OwnershipManager | undefined;
  async acquire(resource: OwnedResource, epoch: number): Promise<void> {
    if (this.manager !== undefined) {
      this.mayActWhileLoading.push(this.manager.mayAct(resource, epoch) && !this.manager.mayAct(resource, epoch + 1));
      expect(this.manager.standing(resource)).toEqual({ state: "loading", epoch });
    }
    if (this.failAcquire.has(name(resource))) {
      this.failedAttempts++;
      throw new Error("damaged");
    }
    if (this.cluster.some((other) => other !== this && other.open.has(name(resource)))) this.violations.push(`${name(resource)} opened at epoch ${epoch} while open elsewhere`);
    this.open.set(name(resource), epoch);
    this.events.push(`acquire ${name(resource)} ${epoch}`);
  }
  async release(resource: OwnedResource): Promise<void> {
    this.open.delete(name(resource));
    this.events.push(`release ${name(resource)}`);
  }
}

class TestLease implements LeaseView {
  valid = true;
  constructor(public leaseId: bigint | undefined) {}
  isValid(): boolean {
    return this.valid;
  }
}

let clusterCounter = 0;
const managers: OwnershipManager[] = [];

afterEach(async () => {
  for (const manager of managers.splice(0)) await manager.stop({ handOver: false });
});

interface Node {
  id: number;
  host: RecordingHost;
  lease: TestLease;
  manager: OwnershipManager;
}

async function cluster(ids: number[], options: { failAcquire?: string[] } = {}) {
  const clusterId = `manager-${++clusterCounter}`;
  const records = new OwnershipRecords(client, clusterId, silentLogger);
  const live = new Set<number>();
  const nodes = new Map<number, Node>();
  const hosts: RecordingHost[] = [];
  const violations: string[] = [];
  const start = async (id: number): Promise<Node> => {
    const lease = new TestLease((await client.leaseGrant(60)).id);
    const host = new RecordingHost(hosts, violations);
    for (const resource of options.failAcquire ?? []) host.failAcquire.add(resource);
    const manager = new OwnershipManager({
      records,
      selfId: id,
      lease,
      host,
      resources: resourcesOf,
      liveBrokers: () => [...live],
      clock: systemClock,
      log: silentLogger,
      retryAfterFailureMs: 200,
    });
    managers.push(manager);
    host.manager = manager;
    live.add(id);
    const node = { id, host, lease, manager };
    nodes.set(id, node);
    await manager.start();
    for (const other of nodes.values()) other.manager.changed();
    return node;
  };
  for (const id of ids) await start(id);
  /** What every resource's owner is, as etcd has it. */
  const ownersInEtcd = async () => new Map((await records.list()).owners.map((o) => [name(o.resource), o]));
  /**
   * True once every resource has an owner in etcd, opened by that broker's host and nowhere else, and the
   * shares are even (what the managers converge to; on the way there, a broker that joined late may take
   * over what another was still claiming).
   */
  const settled = async (expectedLive: number[]) => {
    const owners = await ownersInEtcd();
    if (owners.size !== TOTAL || !isEven(owners, expectedLive)) return false;
    for (const [resource, owner] of owners) {
      if (!expectedLive.includes(owner.brokerId)) return false;
      for (const node of nodes.values()) {
        const opened = live.has(node.id) && node.host.open.has(resource);
        if (opened !== (node.id === owner.brokerId)) return false;
        if (node.id === owner.brokerId && node.host.open.get(resource) !== owner.epoch) return false;
      }
    }
    return true;
  };
  const kill = async (id: number) => {
    // A broker that dies: its lease ends (revoked here, rather than waited out) and it drops from the directory.
    const node = nodes.get(id)!;
    await node.manager.stop({ handOver: false });
    live.delete(id);
    // A dead broker has nothing open (the test's stand-in for the process being gone).
    node.host.open.clear();
    await client.leaseRevoke(node.lease.leaseId!);
    for (const other of nodes.values()) if (live.has(other.id)) other.manager.changed();
  };
  const restart = async (id: number) => {
    nodes.delete(id);
    return start(id);
  };
  return { records, nodes, live, violations, ownersInEtcd, settled, kill, restart };
}

async function settle(c: Awaited<ReturnType<typeof cluster>>, live: number[]): Promise<void> {
  let ok = false;
  const deadline = Date.now() + 15_000;
  while (!(ok = await c.settled(live)) && Date.now() < deadline) await Bun.sleep(20);
  if (!ok) {
    const owners = await c.ownersInEtcd();
    const counts = ["partition", "txn", "group"].map((k) => `${k}: ${JSON.stringify([...shares(owners, k)])}`);
    const views = [...c.nodes.values()].map((n) => `broker ${n.id}: held ${n.manager.held().length} (${n.manager.held().filter((h) => h.state !== "owned").map((h) => `${name(h.resource)} ${h.state}`).join(", ")}), open ${n.host.open.size}`);
    throw new Error(`not settled on ${live}: ${owners.size} owners in etcd, ${counts.join("; ")}; ${views.join("; ")}`);
  }
  expect(c.violations).toEqual([]);
  // Every take-over ran standing `loading` and allowed to write at its own epoch only.
  for (const node of c.nodes.values()) expect(node.host.mayActWhileLoading.every((ok) => ok)).toBe(true);
}

function shares(owners: Map<string, { brokerId: number }>, kind: string): Map<number, number> {
  const counts = new Map<number, number>();
  for (const [resource, owner] of owners) if (resource.startsWith(`${kind}/`)) counts.set(owner.brokerId, (counts.get(owner.brokerId) ?? 0) + 1);
  return counts;
}

function isEven(owners: Map<string, { brokerId: number }>, brokers: number[]): boolean {
  for (const [kind, count] of [["partition", PARTITIONS], ["txn", SLOT_COUNT], ["group", SLOT_COUNT]] as const) {
    const counts = shares(owners, kind);
    if (counts.size !== brokers.length) return false;
    for (const n of counts.values()) if (n !== Math.floor(count / brokers.length) && n !== Math.ceil(count / brokers.length)) return false;
  }
  return true;
}

function expectEven(owners: Map<string, { brokerId: number }>, brokers: number[]): void {
  for (const [kind, count] of [["partition", PARTITIONS], ["txn", SLOT_COUNT], ["group", SLOT_COUNT]] as const) {
    const counts = shares(owners, kind);
    expect([...counts.keys()].sort()).toEqual([...brokers].sort());
    for (const n of counts.values()) expect(n === Math.floor(count / brokers.length) || n === Math.ceil(count / brokers.length)).toBe(true);
  }
}

describe("ownership managers of three brokers", () => {
  test("every resource gets one owner at epoch 1, shares are even, and each owner opened what it owns", async () => {
    const c = await cluster([1, 2, 3]);
    await settle(c, [1, 2, 3]);
    const owners = await c.ownersInEtcd();
    expectEven(owners, [1, 2, 3]);
    for (const node of c.nodes.values()) {
      for (const [resource, owner] of owners) {
        const r = owner.resource;
        if (owner.brokerId === node.id) {
          expect(node.manager.standing(r)).toEqual({ state: "owned", epoch: owner.epoch });
          expect(node.manager.mayAct(r, owner.epoch)).toBe(true);
          expect(node.manager.mayAct(r, owner.epoch + 1)).toBe(false);
        } else {
          expect(node.manager.standing(r)).toEqual({ state: "elsewhere", brokerId: owner.brokerId, epoch: owner.epoch });
          expect(node.manager.mayAct(r, owner.epoch)).toBe(false);
        }
        void resource;
      }
    }
  }, 30_000);

  test("losing a broker moves only its share, once its lease is gone, at higher epochs; coming back takes a fair share with the fewest moves", async () => {
    const c = await cluster([1, 2, 3]);
    await settle(c, [1, 2, 3]);
    const before = await c.ownersInEtcd();
    const releasesSince = (id: number, from: number) => c.nodes.get(id)!.host.events.slice(from).filter((e) => e.startsWith("release")).map((e) => e.slice("release ".length));
    const mark = new Map([1, 2].map((id) => [id, c.nodes.get(id)!.host.events.length]));
    await c.kill(3);
    await settle(c, [1, 2]);
    const after = await c.ownersInEtcd();
    expectEven(after, [1, 2]);
    for (const [resource, owner] of before) {
      const now = after.get(resource)!;
      // The survivors kept everything they had, at the same epoch; broker 3's share moved at a higher one.
      if (owner.brokerId !== 3) expect({ brokerId: now.brokerId, epoch: now.epoch }).toEqual({ brokerId: owner.brokerId, epoch: owner.epoch });
      else expect(now.epoch).toBe(owner.epoch + 1);
    }
    // Nothing was handed over between the survivors.
    for (const id of [1, 2]) expect(releasesSince(id, mark.get(id)!)).toEqual([]);
    for (const id of [1, 2]) mark.set(id, c.nodes.get(id)!.host.events.length);

    await c.restart(3);
    await settle(c, [1, 2, 3]);
    const back = await c.ownersInEtcd();
    expectEven(back, [1, 2, 3]);
    let moves = 0;
    for (const [resource, owner] of after) if (back.get(resource)!.brokerId !== owner.brokerId) moves++;
    // Broker 3 gets its fair share and nothing else moves: 4 of 12 partitions, 16 or 17 of each 50 slots.
    expect(moves).toBe([...back.values()].filter((o) => o.brokerId === 3).length);
    expect(moves).toBeLessThanOrEqual(4 + 17 + 17);
    // Every hand-over went to the broker that came back (and closed it on the giver before the receiver
    // opened it: settle checks that no resource was ever open on two brokers at once).
    let handedOver = 0;
    for (const id of [1, 2]) {
      const released = releasesSince(id, mark.get(id)!);
      handedOver += released.length;
      for (const resource of released) expect(back.get(resource)!.brokerId).toBe(3);
    }
    expect(handedOver).toBe(moves);
  }, 60_000);

  test("a broker whose lease is not valid serves nothing it holds and claims nothing", async () => {
    const c = await cluster([1, 2]);
    await settle(c, [1, 2]);
    const node = c.nodes.get(1)!;
    const owned = (await c.ownersInEtcd()).values().find((o) => o.brokerId === 1)!;
    node.lease.valid = false;
    expect(node.manager.standing(owned.resource)).toEqual({ state: "leaving", epoch: owned.epoch });
    expect(node.manager.mayAct(owned.resource, owned.epoch)).toBe(false);
    // Broker 2 leaves cleanly: broker 1, without a valid lease, must not claim its share.
    await c.nodes.get(2)!.manager.stop({ handOver: true });
    c.live.delete(2);
    node.manager.changed();
    await waitUntil(() => c.nodes.get(2)!.host.open.size === 0, "broker 2 closed everything");
    const owners = await c.ownersInEtcd();
    expect([...owners.values()].every((o) => o.brokerId === 1)).toBe(true);
    expect(owners.size).toBeLessThan(TOTAL);
    node.lease.valid = true;
    node.manager.changed();
    await settle(c, [1]);
  }, 30_000);

  test("a take-over that fails is given back and tried again after a pause, not in a loop", async () => {
    const c = await cluster([1], { failAcquire: ["partition/orders-0"] });
    const node = c.nodes.get(1)!;
    await waitUntil(() => node.host.open.size === TOTAL - 1, "everything else taken over");
    await waitUntil(() => node.host.failedAttempts >= 2, "a second attempt after the pause");
    const startedMs = Date.now();
    await Bun.sleep(500);
    // 200 ms between attempts: about three in half a second, not hundreds.
    expect(node.host.failedAttempts).toBeLessThanOrEqual(2 + Math.ceil((Date.now() - startedMs) / 200) + 1);
    expect(node.manager.standing({ kind: "partition", topic: "orders", partition: 0 })).toEqual({ state: "elsewhere", brokerId: -1 });
    node.host.failAcquire.clear();
    await settle(c, [1]);
  }, 30_000);

  test("SIGTERM's hand-over: everything held is closed and its keys deleted, so the others take it at once", async () => {
    const c = await cluster([1, 2, 3]);
    await settle(c, [1, 2, 3]);
    const leaving = c.nodes.get(2)!;
    await leaving.manager.stop({ handOver: true });
    expect(leaving.host.open.size).toBe(0);
    c.live.delete(2);
    for (const id of [1, 3]) c.nodes.get(id)!.manager.changed();
    // No lease expiry waited for: the 60 s leases are all still alive.
    await settle(c, [1, 3]);
    expectEven(await c.ownersInEtcd(), [1, 3]);
  }, 30_000);
});
