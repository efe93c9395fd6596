/**
 * Wake-ups through a real etcd: a put of /bunka/<cluster>/wake/<target> reaches the brokers watching, so a
 * marker queued for a broker, a fence, or an offset completion is looked at once rather than at the next
 * poll (the polls here are an hour apart, so only the wake-up can do it); a marker for a partition whose
 * leader moved is handed on to the new leader and that broker is woken too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { FenceWatcher } from "../../src/cluster/fence-watcher.ts";
import { MarkerQueueWatcher, type MarkerSpec } from "../../src/cluster/marker-queue-watcher.ts";
import type { OwnedResource } from "../../src/cluster/cluster-keys.ts";
import { SingleBrokerOwnership, type Ownership } from "../../src/cluster/ownership.ts";
import { EtcdWaker, noopWaker, wakeKey, wakeTargetOfKey, type WakeTarget } from "../../src/cluster/waker.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { FenceLogWriter } from "../../src/storage/fence-log.ts";
import { MarkerQueue, markerQueueBrokerDir } from "../../src/storage/marker-queue.ts";
import { EtcdServer } from "../support/etcd.ts";
import { MemoryFs } from "../support/memory-fs.ts";
import { until, waitUntil } from "../support/wait.ts";

const DATA = "/data";
const HOUR = 3_600_000;
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

function waker(clusterId: string, selfId: number): Promise<EtcdWaker> {
  return EtcdWaker.open({ client, clusterId, selfId, log: silentLogger, nowMs: () => Date.now() });
}

/** Ownership where `leaders` says who leads each partition (`topic-n`), self by default. */
function ownership(selfId: number, leaders: Map<string, number>): Ownership {
  const base = new SingleBrokerOwnership(selfId, "127.0.0.1", 9092);
  return {
    selfId,
    brokers: () => base.brokers(),
    controllerId: () => 0,
    partitionLeader: (topic, partition) => leaders.get(`${topic}-${partition}`) ?? selfId,
    slotOwner: () => selfId,
    standing: (_resource: OwnedResource) => base.standing(),
    mayAct: () => true,
  };
}

describe("wake-ups through etcd", () => {
  test("keys name their targets, and only valid ones", () => {
    expect(wakeKey("c1", { kind: "broker", brokerId: 3 })).toBe("/bunka/c1/wake/broker/3");
    expect(wakeKey("c1", { kind: "group-slot", slot: 49 })).toBe("/bunka/c1/wake/group-slot/49");
    expect(wakeKey("c1", { kind: "fences" })).toBe("/bunka/c1/wake/fences");
    expect(() => wakeKey("c1", { kind: "group-slot", slot: 50 })).toThrow(RangeError);
    expect(wakeKey("c1", { kind: "markers-applied", brokerId: 2 })).toBe("/bunka/c1/wake/markers-applied/2");
    expect(() => wakeKey("c1", { kind: "markers-applied", brokerId: -1 })).toThrow(RangeError);
    expect(wakeTargetOfKey("c1", "/bunka/c1/wake/broker/3")).toEqual({ kind: "broker", brokerId: 3 });
    expect(wakeTargetOfKey("c1", "/bunka/c1/wake/markers-applied/2")).toEqual({ kind: "markers-applied", brokerId: 2 });
    expect(wakeTargetOfKey("c1", "/bunka/c1/wake/markers-applied/x")).toBeUndefined();
    expect(wakeTargetOfKey("c1", "/bunka/c1/wake/group-slot/50")).toBeUndefined();
    expect(wakeTargetOfKey("c1", "/bunka/c1/wake/broker/03")).toBeUndefined();
    expect(wakeTargetOfKey("c2", "/bunka/c1/wake/fences")).toBeUndefined();
    // Single-broker mode: nothing is sent, nothing arrives.
    noopWaker.wake({ kind: "fences" });
    expect(typeof noopWaker.onWake(() => undefined)).toBe("function");
  });

  test("a broker's wake-up (markers queued, markers applied) reaches that broker only; group slots and fences reach every broker", async () => {
    const w1 = await waker("wake-1", 1);
    const w2 = await waker("wake-1", 2);
    const other = await waker("wake-other", 2);
    const seen1: WakeTarget[] = [];
    const seen2: WakeTarget[] = [];
    const seenOther: WakeTarget[] = [];
    w1.onWake((t) => seen1.push(t));
    w2.onWake((t) => seen2.push(t));
    other.onWake((t) => seenOther.push(t));
    w1.wake({ kind: "broker", brokerId: 2 });
    w1.wake({ kind: "group-slot", slot: 7 });
    w2.wake({ kind: "fences" });
    w2.wake({ kind: "markers-applied", brokerId: 1 });
    await waitUntil(() => seen2.length === 3 && seen1.length === 3, "the wake-ups arrived");
    // The puts are sent at once, not one after another: their order is etcd's.
    const sorted = (targets: WakeTarget[]) => targets.map((t) => JSON.stringify(t)).sort();
    expect(sorted(seen2)).toEqual(sorted([{ kind: "broker", brokerId: 2 }, { kind: "group-slot", slot: 7 }, { kind: "fences" }]));
    expect(sorted(seen1)).toEqual(sorted([{ kind: "group-slot", slot: 7 }, { kind: "fences" }, { kind: "markers-applied", brokerId: 1 }]));
    // Another cluster sharing the etcd hears nothing of it.
    other.wake({ kind: "fences" });
    await waitUntil(() => seenOther.length === 1, "the other cluster's own wake-up");
    expect(seenOther).toEqual([{ kind: "fences" }]);
    await Promise.all([w1.close(), w2.close(), other.close()]);
  });

  test("markers queued for a broker are applied when it is woken; a partition whose leader moved is handed on and its leader woken", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    const leadersSeenBy2 = new Map([["orders-1", 3]]);
    const written: string[] = [];
    const watcher = (selfId: number, leaders: Map<string, number>, w: EtcdWaker) =>
      new MarkerQueueWatcher({
        queue,
        ownership: ownership(selfId, leaders),
        writeMarker: async (topic: string, partition: number, marker: MarkerSpec) => {
          written.push(`${selfId}:${topic}-${partition}:${marker.commit ? "commit" : "abort"}`);
          return { ok: true, offset: 0 };
        },
        log: silentLogger,
        pollIntervalMs: HOUR,
        waker: w,
      });
    const w1 = await waker("wake-2", 1);
    const w2 = await waker("wake-2", 2);
    const w3 = await waker("wake-2", 3);
    const m2 = watcher(2, leadersSeenBy2, w2);
    const m3 = watcher(3, new Map(), w3);
    m2.start();
    m3.start();
    // Broker 1's coordinator queued markers for orders-0 and orders-1 with broker 2, which led both then.
    await queue.enqueue(2, { transactionalId: "tx", producerId: 5, producerEpoch: 0, coordinatorEpoch: 1, result: "commit", partitions: [{ topic: "orders", partitions: [0, 1] }], decidedMs: 10 });
    w1.wake({ kind: "broker", brokerId: 2 });
    await waitUntil(() => written.length === 2, "both markers written, one by the new leader");
    expect(written.sort()).toEqual(["2:orders-0:commit", "3:orders-1:commit"]);
    // The forwarded file went to broker 3's own queue (named after the forwarder) and is gone once applied.
    await until("both queues empty", 5_000, async () => ((await queue.list(2)).length === 0 && (await queue.list(3)).length === 0 ? true : undefined));
    expect(await fs.stat(markerQueueBrokerDir(DATA, 3))).toBeDefined();
    await Promise.all([m2.stop(), m3.stop()]);
    await Promise.all([w1.close(), w2.close(), w3.close()]);
  });

  test("a published fence is applied by the peers when they are woken", async () => {
    const fs = new MemoryFs();
    const w1 = await waker("wake-3", 1);
    const w2 = await waker("wake-3", 2);
    const applied: string[] = [];
    const fences = new FenceWatcher({ fs, dataDir: DATA, selfId: 2, apply: (pid, epoch) => void applied.push(`${pid}@${epoch}`), log: silentLogger, pollIntervalMs: HOUR, waker: w2 });
    fences.start();
    const log = await FenceLogWriter.open(fs, DATA, 1);
    await log.append({ producerId: 42, epoch: 3, timestampMs: 1 });
    w1.wake({ kind: "fences" });
    await waitUntil(() => applied.length === 1, "the fence applied on broker 2");
    expect(applied).toEqual(["42@3"]);
    await fences.stop();
    await log.close();
    await Promise.all([w1.close(), w2.close()]);
  });
});
