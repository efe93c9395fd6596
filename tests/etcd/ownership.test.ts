/**
 * Ownership records against a real etcd: one owner at a time (contenders are told who holds it), epochs
 * that only grow from claim to claim, a release that cannot delete a successor's key, and a watch that
 * tells everyone when an owner key goes away, whether released or expired with its owner's lease.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { epochKey, ownerKey, type OwnedResource } from "../../src/cluster/cluster-keys.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { EtcdUnavailableError } from "../../src/cluster/etcd/etcd-errors.ts";
import type { EtcdWatch } from "../../src/cluster/etcd/etcd-watch.ts";
import { OwnershipRecords, type OwnerRecord } from "../../src/cluster/ownership-records.ts";
import { CorruptStateError } from "../../src/errors/errors.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { EtcdServer } from "../support/etcd.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;
const watches: EtcdWatch[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  for (const watch of watches) await watch.close();
  client?.close();
  await etcd?.close();
});

let clusterCounter = 0;
function records(): { records: OwnershipRecords; cluster: string } {
  const cluster = `ownership-${++clusterCounter}`;
  return { records: new OwnershipRecords(client, cluster, silentLogger), cluster };
}

async function lease(ttlSeconds = 30): Promise<bigint> {
  return (await client.leaseGrant(ttlSeconds)).id;
}

const SLOT_3: OwnedResource = { kind: "txn", slot: 3 };
const PARTITION: OwnedResource = { kind: "partition", topic: "orders-eu", partition: 7 };

describe("ownership records in etcd", () => {
  test("claim, contend, release, claim again: one owner at a time, epochs that grow", async () => {
    const { records: owners, cluster } = records();
    const one = await lease();
    const two = await lease();
    const first = await owners.claim(SLOT_3, 1, one);
    expect(first.kind).toBe("claimed");
    const epoch1 = (first as { epoch: number }).epoch;
    const revision1 = (first as { revision: bigint }).revision;
    const kv = (await client.range(ownerKey(cluster, SLOT_3))).kvs[0]!;
    expect(epoch1).toBe(1);
    expect(kv.createRevision).toBe(revision1);
    expect(JSON.parse((await client.range(epochKey(cluster, SLOT_3))).kvs[0]!.value).epoch).toBe(1);
    expect(kv.lease).toBe(one);
    // A contender is told who holds it.
    expect(await owners.claim(SLOT_3, 2, two)).toEqual({ kind: "held", owner: { resource: SLOT_3, brokerId: 1, leaseId: one, epoch: epoch1, revision: revision1 } });
    // The owner claiming again (a retry) gets the same epoch.
    expect(await owners.claim(SLOT_3, 1, one)).toEqual({ kind: "claimed", epoch: epoch1, revision: revision1 });
    // Only the claim itself may release it.
    expect(await owners.release(SLOT_3, { leaseId: two, revision: revision1 })).toBe(false);
    expect(await owners.release(SLOT_3, { leaseId: one, revision: revision1 - 1n })).toBe(false);
    expect(await owners.owner(SLOT_3)).toEqual({ resource: SLOT_3, brokerId: 1, leaseId: one, epoch: epoch1, revision: revision1 });
    expect(await owners.release(SLOT_3, { leaseId: one, revision: revision1 })).toBe(true);
    expect(await owners.owner(SLOT_3)).toBeNull();
    const second = await owners.claim(SLOT_3, 2, two);
    expect(second.kind).toBe("claimed");
    const epoch2 = (second as { epoch: number }).epoch;
    expect(epoch2).toBe(epoch1 + 1);
    // The former owner's release of its old claim does not delete its successor's key.
    expect(await owners.release(SLOT_3, { leaseId: one, revision: revision1 })).toBe(false);
    expect((await owners.owner(SLOT_3))?.brokerId).toBe(2);
  });

  test("contenders at once: exactly one claims, the others are told it is held at its epoch", async () => {
    const { records: owners } = records();
    const leases = await Promise.all([1, 2, 3, 4, 5].map(() => lease()));
    const outcomes = await Promise.all(leases.map((id, i) => owners.claim(PARTITION, i + 1, id)));
    const claimed = outcomes.filter((o) => o.kind === "claimed");
    expect(claimed.length).toBe(1);
    const winner = outcomes.findIndex((o) => o.kind === "claimed");
    for (const outcome of outcomes) {
      if (outcome.kind === "held") expect(outcome.owner).toEqual({ resource: PARTITION, brokerId: winner + 1, leaseId: leases[winner]!, epoch: 1, revision: (claimed[0] as { revision: bigint }).revision });
    }
  });

  test("epochs only grow over many claims by different owners, on every kind of resource", async () => {
    const { records: owners } = records();
    const resources: OwnedResource[] = [SLOT_3, { kind: "group", slot: 49 }, PARTITION];
    const leases = [await lease(), await lease(), await lease()];
    for (const resource of resources) {
      let previous = 0;
      for (let round = 0; round < 6; round++) {
        const holder = round % leases.length;
        const outcome = await owners.claim(resource, holder, leases[holder]!);
        if (outcome.kind !== "claimed") throw new Error(`round ${round}: ${outcome.kind}`);
        expect(outcome.epoch).toBe(previous + 1);
        previous = outcome.epoch;
        expect(await owners.release(resource, { leaseId: leases[holder]!, revision: outcome.revision })).toBe(true);
      }
    }
  });

  test("a claim under a lease that is gone is an outcome, not an error", async () => {
    const { records: owners } = records();
    const gone = await lease();
    await client.leaseRevoke(gone);
    expect(await owners.claim(SLOT_3, 1, gone)).toEqual({ kind: "lease-gone" });
    expect(await owners.owner(SLOT_3)).toBeNull();
  });

  test("the watch tells everyone when an owner key goes away: released, or with its owner's lease", async () => {
    const { records: owners } = records();
    const one = await lease();
    const pre = await owners.claim({ kind: "group", slot: 1 }, 1, one);
    const resets: OwnerRecord[][] = [];
    const claimed: string[] = [];
    const released: string[] = [];
    const watch = await owners.watch({
      onReset: (list) => resets.push(list),
      onClaimed: (owner) => claimed.push(`${owner.resource.kind} ${owner.brokerId}`),
      onReleased: (resource, previous) => released.push(`${resource.kind} ${previous?.brokerId ?? "?"} ${previous?.epoch ?? "?"}`),
    });
    watches.push(watch);
    expect(resets).toEqual([[{ resource: { kind: "group", slot: 1 }, brokerId: 1, leaseId: one, epoch: 1, revision: (pre as { revision: bigint }).revision }]]);
    const two = await lease();
    const slot = await owners.claim(SLOT_3, 2, two);
    const partition = await owners.claim(PARTITION, 2, two);
    await waitUntil(() => claimed.length === 2, "two claims seen");
    expect(claimed).toEqual(["txn 2", "partition 2"]);
    await owners.release(SLOT_3, { leaseId: two, revision: (slot as { revision: bigint }).revision });
    await waitUntil(() => released.length === 1, "the release seen");
    expect(released).toEqual([`txn 2 ${(slot as { epoch: number }).epoch}`]);
    // A crashed owner: its lease ends, and its keys go with it.
    await client.leaseRevoke(two);
    await waitUntil(() => released.length === 2, "the partition's key gone with the lease");
    expect(released[1]).toBe(`partition 2 ${(partition as { epoch: number }).epoch}`);
    await watch.close();
  });

  test(
    "a lease that expires takes its owner keys with it, and a successor claims at a larger epoch",
    async () => {
      const { records: owners } = records();
      const short = await lease(2);
      const first = await owners.claim(SLOT_3, 1, short);
      const released: string[] = [];
      const watch = await owners.watch({ onReleased: (resource) => released.push(resource.kind) }, "txn");
      watches.push(watch);
      await waitUntil(() => released.length === 1, "the key expiring with its lease", 10_000);
      const successor = await owners.claim(SLOT_3, 2, await lease());
      expect(successor.kind).toBe("claimed");
      expect((successor as { epoch: number }).epoch).toBe((first as { epoch: number }).epoch + 1);
      await watch.close();
    },
    20_000,
  );

  test("an owner key that bunka cannot read is refused, naming the key", async () => {
    const { records: owners, cluster } = records();
    await client.put(ownerKey(cluster, SLOT_3), JSON.stringify({ format: "bunka-owner", version: 9, brokerId: 1, epoch: 1 }));
    const error = await owners.owner(SLOT_3).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toBe(`etcd key ${ownerKey(cluster, SLOT_3)}: bunka-owner version 9 is not one this broker reads (1)`);
  });
});

describe("ownership records when etcd's answer is lost", () => {
  test("a claim applied but unanswered is found by reading back: claimed, at its epoch", async () => {
    const { cluster } = records();
    const proxy = TcpProxy.start(etcd.clientPort);
    const viaProxy = new EtcdClient({ endpoints: [proxy.endpoint, etcd.endpoint], requestTimeoutMs: 300 });
    try {
      const owners = new OwnershipRecords(viaProxy, cluster, silentLogger);
      const id = await lease();
      proxy.dropResponses = true;
      const outcome = await owners.claim(SLOT_3, 1, id);
      const kv = (await client.range(ownerKey(cluster, SLOT_3))).kvs[0]!;
      // The txn reached etcd through the proxy once, and was not sent again to the second endpoint.
      expect(kv.version).toBe(1n);
      expect(outcome).toEqual({ kind: "claimed", epoch: 1, revision: kv.createRevision });
    } finally {
      viaProxy.close();
      proxy.close();
    }
  });

  test("a claim that never arrived is reported as etcd unavailable, not as held or claimed", async () => {
    const { cluster } = records();
    const hung = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const viaHung = new EtcdClient({ endpoints: [`http://127.0.0.1:${hung.port}`, etcd.endpoint], requestTimeoutMs: 300 });
    try {
      const owners = new OwnershipRecords(viaHung, cluster, silentLogger);
      const error = await owners.claim(SLOT_3, 1, await lease()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EtcdUnavailableError);
      expect((error as EtcdUnavailableError).outcomeUnknown).toBe(true);
      expect((await client.range(ownerKey(cluster, SLOT_3))).kvs).toEqual([]);
    } finally {
      viaHung.close();
      hung.stop(true);
    }
  });
});
