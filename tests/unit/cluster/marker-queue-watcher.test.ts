/**
 * The marker queue watcher with a fake ownership and a fake partition side: applies the markers queued for
 * this broker to the partitions it leads and removes the file once they are durable, hands partitions led
 * elsewhere on, keeps what failed retriably (rewriting the file with what is left), drops markers of
 * deleted partitions, and leaves a damaged file alone.
 */
import { describe, expect, test } from "bun:test";
import { MarkerQueueWatcher, type MarkerSpec, type MarkerWriteResult } from "../../../src/cluster/marker-queue-watcher.ts";
import type { BrokerEndpoint, Ownership, Standing } from "../../../src/cluster/ownership.ts";
import type { OwnedResource } from "../../../src/cluster/cluster-keys.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { MarkerQueue, type QueuedMarkers } from "../../../src/storage/marker-queue.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { waitUntil } from "../../support/wait.ts";
import type { WakeTarget, Waker } from "../../../src/cluster/waker.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";

const DATA = "/data";

class FakeOwnership implements Ownership {
  readonly leaders = new Map<string, number>();
  constructor(readonly selfId: number) {}
  brokers(): BrokerEndpoint[] {
    return [];
  }
  controllerId(): number {
    return 0;
  }
  partitionLeader(topic: string, partition: number): number {
    return this.leaders.get(`${topic}-${partition}`) ?? this.selfId;
  }
  slotOwner(_kind: "txn" | "group", _slot: number): number {
    return 0;
  }
  standing(resource: OwnedResource): Standing {
    const owner = resource.kind === "partition" ? this.partitionLeader(resource.topic, resource.partition) : this.slotOwner(resource.kind, resource.slot);
    return owner === this.selfId ? { state: "owned", epoch: 0 } : { state: "elsewhere", brokerId: owner };
  }
  mayAct(resource: OwnedResource, epoch: number): boolean {
    const standing = this.standing(resource);
    return standing.state === "owned" && standing.epoch === epoch;
  }
}

const markers = (partitions: number[], overrides: Partial<QueuedMarkers> = {}): QueuedMarkers => ({
  transactionalId: "tx",
  producerId: 4000,
  producerEpoch: 3,
  coordinatorEpoch: 0,
  result: "commit",
  partitions: [{ topic: "orders", partitions }],
  decidedMs: 1_700_000_000_000,
  ...overrides,
});

function setup(selfId = 1, extra: Partial<ConstructorParameters<typeof MarkerQueueWatcher>[0]> = {}) {
  const fs = new MemoryFs();
  const queue = new MarkerQueue(fs, DATA);
  const ownership = new FakeOwnership(selfId);
  const written: string[] = [];
  const failures = new Map<string, number>();
  let durable = true;
  let attempts = 0;
  const writeMarker = async (topic: string, partition: number, m: MarkerSpec): Promise<MarkerWriteResult> => {
    attempts += 1;
    const code = failures.get(`${topic}-${partition}`);
    if (code !== undefined) return { ok: false, errorCode: code };
    // The file must still be there while the marker is being made durable.
    durable = durable && (await queue.list(selfId)).length > 0;
    written.push(`${topic}-${partition} ${m.commit ? "commit" : "abort"} pid=${m.producerId} epoch=${m.producerEpoch}`);
    return { ok: true, offset: written.length };
  };
  // Manual timers: the retry backoff fires only when a test moves them.
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const watcher = new MarkerQueueWatcher({ queue, ownership, writeMarker, log: silentLogger, timers, ...extra });
  return { fs, queue, ownership, written, failures, watcher, timers, attempts: () => attempts, fileStayedUntilWritten: () => durable };
}

describe("marker queue watcher", () => {
  test("tells of each marker made durable (not of dropped or failed ones), and wakes the broker it hands markers on to", async () => {
    const told: string[] = [];
    const woken: WakeTarget[] = [];
    let listener: ((target: WakeTarget) => void) | undefined;
    const waker: Waker = { wake: (t) => void woken.push(t), onWake: (l) => ((listener = l), () => (listener = undefined)), close: async () => undefined };
    const h = setup(1, { waker, onMarkerWritten: (topic, partition, m) => told.push(`${topic}-${partition} pid=${m.producerId} epoch=${m.producerEpoch}`), pollIntervalMs: 3_600_000 });
    h.failures.set("orders-2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    h.failures.set("orders-3", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    h.ownership.leaders.set("orders-4", 3);
    await h.queue.enqueue(1, markers([0, 2, 3, 4]));
    h.watcher.start();
    expect(listener).toBeDefined();
    // Our wake-up polls at once (the timer is an hour away).
    listener!({ kind: "broker", brokerId: 1 });
    await waitUntil(() => woken.length === 1, "the forward woke broker 3");
    expect(told).toEqual(["orders-0 pid=4000 epoch=3"]);
    expect(woken).toEqual([{ kind: "broker", brokerId: 3 }]);
    expect(await h.queue.list(3)).toHaveLength(1);
    await h.watcher.stop();
    expect(listener).toBeUndefined();
  });

  test("files of different producers are applied at once; one producer's files one after the other, in decision order", async () => {
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const writeMarker = async (_topic: string, _partition: number, m: MarkerSpec): Promise<MarkerWriteResult> => {
      order.push(`start ${m.producerId}/${m.producerEpoch}`);
      // Producer 4000's first marker is held until producer 5000's is written: a serial pass would never end.
      if (m.producerId === 4000 && m.producerEpoch === 3) await firstHeld;
      if (m.producerId === 5000) releaseFirst();
      order.push(`done ${m.producerId}/${m.producerEpoch}`);
      return { ok: true, offset: order.length };
    };
    const h = setup(1, { writeMarker });
    await h.queue.enqueue(1, markers([0], { decidedMs: 1_700_000_000_000 }));
    await h.queue.enqueue(1, markers([0], { producerEpoch: 4, decidedMs: 1_700_000_000_500 }));
    await h.queue.enqueue(1, markers([1], { producerId: 5000 }));
    expect(await h.watcher.poll()).toEqual({ files: 3, completed: 3, written: 3, forwarded: 0, retried: 0 });
    expect(order).toEqual(["start 4000/3", "start 5000/3", "done 5000/3", "done 4000/3", "start 4000/4", "done 4000/4"]);
    expect(await h.queue.list(1)).toEqual([]);
  });

  test("a file applied in full wakes its transaction's coordinator; one partly applied does not", async () => {
    const woken: WakeTarget[] = [];
    const waker: Waker = { wake: (t) => void woken.push(t), onWake: () => () => undefined, close: async () => undefined };
    const h = setup(1, { waker });
    h.ownership.slotOwner = () => 7;
    h.failures.set("orders-3", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    await h.queue.enqueue(1, markers([0, 3]));
    await h.watcher.poll();
    expect(woken).toEqual([]);
    h.failures.clear();
    await h.watcher.poll();
    expect(woken).toEqual([{ kind: "markers-applied", brokerId: 7 }]);
  });

  test("a coordinator's request applies that producer's files only, in order, and wakes nobody through etcd (the answer tells it)", async () => {
    const woken: WakeTarget[] = [];
    const waker: Waker = { wake: (t) => void woken.push(t), onWake: () => () => undefined, close: async () => undefined };
    const h = setup(1, { waker });
    h.ownership.slotOwner = () => 7;
    await h.queue.enqueue(1, markers([0], { producerEpoch: 4, decidedMs: 1_700_000_000_500 }));
    await h.queue.enqueue(1, markers([1], { decidedMs: 1_700_000_000_000 }));
    await h.queue.enqueue(1, markers([2], { producerId: 5000 }));
    expect(await h.watcher.applyProducer(4000)).toEqual({ files: 2, completed: 2, written: 2, forwarded: 0, retried: 0 });
    expect(h.written).toEqual(["orders-1 commit pid=4000 epoch=3", "orders-0 commit pid=4000 epoch=4"]);
    expect((await h.queue.list(1)).map((path) => path.split("/").pop())).toEqual(["5000-3-1700000000000-commit.json"]);
    expect(woken).toEqual([]);
    // A poll applies the rest, and wakes that file's coordinator as before.
    await h.watcher.poll();
    expect(woken).toEqual([{ kind: "markers-applied", brokerId: 7 }]);
  });

  test("a request and a poll at once apply each file once: one producer's work waits for the other's", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let writes = 0;
    const writeMarker = async (): Promise<MarkerWriteResult> => {
      writes += 1;
      // The first write (the poll's) is held, so the request arrives while the poll holds the producer.
      if (writes === 1) await held;
      return { ok: true, offset: writes };
    };
    const h = setup(1, { writeMarker });
    await h.queue.enqueue(1, markers([0]));
    const polled = h.watcher.poll();
    await waitUntil(() => writes === 1, "the poll writing the marker");
    const requested = h.watcher.applyProducer(4000);
    release();
    const [poll, request] = await Promise.all([polled, requested]);
    expect(writes).toBe(1);
    expect(poll.completed).toBe(1);
    expect(request).toEqual({ files: 0, completed: 0, written: 0, forwarded: 0, retried: 0 });
    expect(await h.queue.list(1)).toEqual([]);
  });

  test("applies markers queued for this broker, then removes the file", async () => {
    const h = setup(1);
    await h.queue.enqueue(1, markers([0, 2]));
    await h.queue.enqueue(2, markers([5])); // another broker's queue: not ours
    const result = await h.watcher.poll();
    expect(result).toEqual({ files: 1, completed: 1, written: 2, forwarded: 0, retried: 0 });
    expect(h.written).toEqual(["orders-0 commit pid=4000 epoch=3", "orders-2 commit pid=4000 epoch=3"]);
    expect(h.fileStayedUntilWritten()).toBe(true);
    expect(await h.queue.list(1)).toEqual([]);
    expect(await h.queue.list(2)).toHaveLength(1);
    expect((await h.watcher.poll()).files).toBe(0);
  });

  test("a retriable failure keeps just the failed partitions queued, and the next poll finishes them", async () => {
    const h = setup(1);
    const path = await h.queue.enqueue(1, markers([0, 1, 2], { result: "abort" }));
    h.failures.set("orders-1", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    expect(await h.watcher.poll()).toEqual({ files: 1, completed: 0, written: 2, forwarded: 0, retried: 1 });
    expect((await h.queue.read(path))?.partitions).toEqual([{ topic: "orders", partitions: [1] }]);
    h.failures.clear();
    expect((await h.watcher.poll()).completed).toBe(1);
    expect(h.written).toEqual(["orders-0 abort pid=4000 epoch=3", "orders-2 abort pid=4000 epoch=3", "orders-1 abort pid=4000 epoch=3"]);
    expect(await h.queue.list(1)).toEqual([]);
  });

  test("what a pass left to retry is looked at again on a backoff (50 ms doubling up to the poll interval), not only at the next poll", async () => {
    const h = setup(1, { pollIntervalMs: 300 });
    const path = await h.queue.enqueue(1, markers([0, 1]));
    h.failures.set("orders-1", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    // Each look again tries the refused marker once (the other one is done).
    const attempts = h.attempts;
    expect((await h.watcher.poll()).retried).toBe(1);
    expect(h.timers.pending).toBe(1);
    for (const delayMs of [50, 100, 200, 300, 300]) {
      const before = attempts();
      await h.timers.advance(delayMs - 1);
      expect(attempts()).toBe(before);
      await h.timers.advance(1);
      await waitUntil(() => attempts() === before + 1 && h.timers.pending === 1, `a look again after ${delayMs} ms`);
    }
    h.failures.clear();
    await h.timers.advance(300);
    await waitUntil(() => h.written.length === 2, "the marker written at the look again");
    expect(await h.queue.read(path)).toBeUndefined();
    expect(h.timers.pending).toBe(0);
    // The backoff starts again from 50 ms for the next failure.
    await h.queue.enqueue(1, markers([1], { producerId: 4001 }));
    h.failures.set("orders-1", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    await h.watcher.poll();
    const before = attempts();
    await h.timers.advance(50);
    await waitUntil(() => attempts() === before + 1, "the first look again after 50 ms");
    await h.watcher.stop();
    expect(h.timers.pending).toBe(0);
  });

  test("deleted partitions are dropped and superseded markers count as done", async () => {
    const h = setup(1);
    await h.queue.enqueue(1, markers([0, 1]));
    h.failures.set("orders-0", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    h.failures.set("orders-1", ErrorCode.INVALID_PRODUCER_EPOCH);
    expect((await h.watcher.poll()).completed).toBe(1);
    expect(await h.queue.list(1)).toEqual([]);
  });

  test("partitions another broker leads now are handed on to its queue; unknown leaders wait", async () => {
    const h = setup(1);
    h.ownership.leaders.set("orders-1", 3);
    h.ownership.leaders.set("orders-2", -1);
    const path = await h.queue.enqueue(1, markers([0, 1, 2]));
    expect(await h.watcher.poll()).toEqual({ files: 1, completed: 0, written: 1, forwarded: 1, retried: 1 });
    const forwarded = await h.queue.list(3);
    expect(forwarded.map((p) => p.split("/").pop())).toEqual(["4000-3-1700000000000-commit-via-1.json"]);
    expect((await h.queue.read(forwarded[0]!))?.partitions).toEqual([{ topic: "orders", partitions: [1] }]);
    expect((await h.queue.read(path))?.partitions).toEqual([{ topic: "orders", partitions: [2] }]);
    h.ownership.leaders.delete("orders-2");
    expect((await h.watcher.poll()).completed).toBe(1);
  });

  test("a damaged file is left in place and does not stop the others", async () => {
    const h = setup(1);
    const bad = await h.queue.enqueue(1, markers([0], { producerId: 1 }));
    await h.queue.enqueue(1, markers([1], { producerId: 2 }));
    const handle = await h.fs.open(bad, "rw");
    await handle.write(new TextEncoder().encode("X"), 40);
    await handle.close();
    const result = await h.watcher.poll();
    expect(result.files).toBe(2);
    expect(result.completed).toBe(1);
    expect(await h.queue.list(1)).toEqual([bad]);
  });
});
