/**
 * Cluster mode's ownership: the broker list is this broker plus the live brokers of the directory, lowest
 * id first; the controller is the lowest live id; without an ownership manager every partition and slot
 * is this broker's at epoch 0, with one the owners are the manager's, and an owner that is not live is
 * nobody clients can be sent to.
 */
import { describe, expect, test } from "bun:test";
import { ClusterOwnership } from "../../../src/cluster/cluster-ownership.ts";
import type { OwnershipSource } from "../../../src/cluster/cluster-ownership.ts";
import type { OwnedResource } from "../../../src/cluster/cluster-keys.ts";
import type { BrokerEndpoint, Standing } from "../../../src/cluster/ownership.ts";

const peer = (brokerId: number, port = 9092): BrokerEndpoint => ({ brokerId, host: `10.0.0.${brokerId}`, port, rack: null });

describe("ClusterOwnership", () => {
  test("the live brokers, lowest id first, with this broker's own advertised endpoint", () => {
    let live: BrokerEndpoint[] = [peer(3), { ...peer(2), host: "stale-registration" }, peer(1)];
    const ownership = new ClusterOwnership(2, "127.0.0.1", 0, () => live);
    ownership.setAdvertised("broker-2.example", 19092);
    expect(ownership.brokers()).toEqual([peer(1), { brokerId: 2, host: "broker-2.example", port: 19092, rack: null }, peer(3)]);
    expect(ownership.controllerId()).toBe(1);
    // The directory changes under it: broker 1 left.
    live = [peer(3)];
    expect(ownership.brokers().map((b) => b.brokerId)).toEqual([2, 3]);
    expect(ownership.controllerId()).toBe(2);
  });

  test("this broker is listed even when the directory does not have it (lease lapsed, not registered yet)", () => {
    const ownership = new ClusterOwnership(5, "127.0.0.1", 9092, () => []);
    expect(ownership.brokers()).toEqual([{ brokerId: 5, host: "127.0.0.1", port: 9092, rack: null }]);
    expect(ownership.controllerId()).toBe(5);
  });

  test("without an ownership manager (one active broker, the others standing by) this broker answers for everything at epoch 0", () => {
    const ownership = new ClusterOwnership(7, "127.0.0.1", 9092, () => [peer(1), peer(9)]);
    expect(ownership.selfId).toBe(7);
    expect(ownership.partitionLeader("t", 0)).toBe(7);
    expect(ownership.slotOwner("txn", 3)).toBe(7);
    expect(ownership.standing({ kind: "group", slot: 1 })).toEqual({ state: "owned", epoch: 0 });
    expect(ownership.mayAct({ kind: "group", slot: 1 }, 0)).toBe(true);
    expect(ownership.mayAct({ kind: "group", slot: 1 }, 1)).toBe(false);
  });

  test("with an ownership manager: its owners, its standings, and a dead owner is nobody to send clients to", () => {
    const owners = new Map<string, number>([["partition/t-0", 7], ["partition/t-1", 1], ["partition/t-2", 4], ["txn/3", 9]]);
    const id = (r: OwnedResource) => (r.kind === "partition" ? `partition/${r.topic}-${r.partition}` : `${r.kind}/${r.slot}`);
    const source: OwnershipSource = {
      ownerOf: (r) => owners.get(id(r)) ?? -1,
      standing: (r): Standing => (owners.get(id(r)) === 7 ? { state: "owned", epoch: 3 } : { state: "elsewhere", brokerId: owners.get(id(r)) ?? -1 }),
      mayAct: (r, epoch) => owners.get(id(r)) === 7 && epoch === 3,
    };
    // Broker 4 holds t-2 under a lease that has not expired yet, but it is not live any more.
    const ownership = new ClusterOwnership(7, "127.0.0.1", 9092, () => [peer(1), peer(9)], source);
    expect([0, 1, 2, 3].map((p) => ownership.partitionLeader("t", p))).toEqual([7, 1, -1, -1]);
    expect(ownership.slotOwner("txn", 3)).toBe(9);
    expect(ownership.slotOwner("group", 3)).toBe(-1);
    expect(ownership.standing({ kind: "partition", topic: "t", partition: 0 })).toEqual({ state: "owned", epoch: 3 });
    expect(ownership.standing({ kind: "partition", topic: "t", partition: 1 })).toEqual({ state: "elsewhere", brokerId: 1 });
    expect(ownership.standing({ kind: "partition", topic: "t", partition: 2 })).toEqual({ state: "elsewhere", brokerId: -1 });
    expect(ownership.mayAct({ kind: "partition", topic: "t", partition: 0 }, 3)).toBe(true);
    expect(ownership.mayAct({ kind: "partition", topic: "t", partition: 0 }, 0)).toBe(false);
  });
});
