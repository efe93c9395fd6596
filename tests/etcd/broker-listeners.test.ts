/**
 * Listeners through a real etcd: each broker registers every advertised listener beside its inter-broker
 * address, and a peer's directory gives them to Metadata (ClusterMember.liveBrokers), so that a client on
 * the SSL listener of any broker is told every broker's SSL address. A broker that registered no listeners
 * (an older bunka) is read as before.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ClusterMember } from "../../src/cluster/cluster-member.ts";
import { endpointsFor } from "../../src/cluster/ownership.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { EtcdServer } from "../support/etcd.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
const members: ClusterMember[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
});
afterAll(async () => {
  for (const member of members) await member.leave().catch(() => {});
  await etcd?.close();
});

async function join(brokerId: number, listeners: boolean): Promise<ClusterMember> {
  const member = await ClusterMember.connect({ endpoints: [etcd.endpoint], clusterId: "listeners", brokerId, sessionTimeoutMs: 2000, clock: systemClock, log: silentLogger });
  members.push(member);
  const base = 9000 + brokerId * 10;
  await member.join({
    brokerId,
    kafka: { host: `b${brokerId}.internal`, port: base },
    ...(listeners
      ? {
          listeners: [
            { name: "PLAINTEXT", host: `b${brokerId}.internal`, port: base },
            { name: "SSL", host: `b${brokerId}.example`, port: base + 1 },
          ],
        }
      : {}),
    http: null,
    rack: null,
  });
  return member;
}

test("every broker's listeners reach the others; an older registration keeps its one address", async () => {
  const one = await join(1, true);
  await join(2, true);
  await join(3, false);
  await waitUntil(() => one.liveBrokers().length === 3, "broker 1 sees brokers 2 and 3");
  const live = one.liveBrokers();
  expect(live.find((b) => b.brokerId === 2)?.listeners).toEqual([
    { name: "PLAINTEXT", host: "b2.internal", port: 9020 },
    { name: "SSL", host: "b2.example", port: 9021 },
  ]);
  expect(live.find((b) => b.brokerId === 3)?.listeners).toBeUndefined();
  expect(endpointsFor(live, "SSL").map((b) => [b.brokerId, b.host, b.port])).toEqual([
    [1, "b1.example", 9011],
    [2, "b2.example", 9021],
    [3, "b3.internal", 9030],
  ]);
  expect(endpointsFor(live, undefined).map((b) => [b.brokerId, b.host, b.port])).toEqual([
    [1, "b1.internal", 9010],
    [2, "b2.internal", 9020],
    [3, "b3.internal", 9030],
  ]);
});
