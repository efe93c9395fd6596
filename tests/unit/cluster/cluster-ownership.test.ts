/**
 * Cluster mode's ownership as far as it is built: the broker list is this broker plus the live brokers of
 * the directory, lowest id first; the controller is the lowest live id; every partition and slot is
 * still this broker's.
 */
import { describe, expect, test } from "bun:test";
import { ClusterOwnership } from "../../../src/cluster/cluster-ownership.ts";
import type { BrokerEndpoint } from "../../../src/cluster/ownership.ts";

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

  test("partitions and coordinator slots are not moved yet: this broker answers for all of them", () => {
    const ownership = new ClusterOwnership(7, "127.0.0.1", 9092, () => [peer(1), peer(9)]);
    expect(ownership.selfId).toBe(7);
    expect(ownership.partitionLeader()).toBe(7);
    expect(ownership.slotOwner()).toBe(7);
  });
});
