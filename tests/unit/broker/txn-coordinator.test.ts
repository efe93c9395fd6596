/**
 * The transaction coordinator service on the in-memory Fs with a fake partition side and a fake offset
 * hook: the effect order of docs/architecture.md, "Transactions and idempotence" (Prepare* durable before any
 * marker, then offsets, markers, Complete*, answer), crash between Prepare* and Complete* (the restart
 * completes it before answering anything), the fence of an open transaction on InitProducerId, the timeout
 * reaper (only on the slot's owner), expiry, the fence log, the marker queue for peer-led partitions, the
 * verifier index, and TxnOffsetCommit's check.
 */
import { describe, expect, test } from "bun:test";
import type { BrokerEndpoint, Ownership, Standing } from "../../../src/cluster/ownership.ts";
import type { OwnedResource } from "../../../src/cluster/cluster-keys.ts";
import { slotOf } from "../../../src/cluster/ownership.ts";
import type { MarkerSpec, MarkerWriteResult } from "../../../src/cluster/marker-queue-watcher.ts";
import { TxnCoordinator, verifyGroup, type EndTxnPhase, type TxnObserver, type TxnOffsetHook, type TxnCoordinatorDeps, type TxnPartitionSide } from "../../../src/broker/txn-coordinator.ts";
import type { FileHandle, OpenMode } from "../../../src/platform/fs.ts";
import { FatalError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { FenceLogWriter, fenceLogPath, readFenceLog } from "../../../src/storage/fence-log.ts";
import { MarkerQueue } from "../../../src/storage/marker-queue.ts";
import { ProducerIdStore } from "../../../src/storage/producer-id-store.ts";
import type { TxnState } from "../../../src/domain/txn/txn-state.ts";
import { TxnStateStore } from "../../../src/storage/txn-state-store.ts";
import type { Waker, WakeTarget } from "../../../src/cluster/waker.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { txnEntryIn } from "../../support/txn-entry.ts";
import { until, waitUntil } from "../../support/wait.ts";

const DATA = "/data";
const DAY_MS = 24 * 60 * 60 * 1000;

class FakeOwnership implements Ownership {
  readonly leaders = new Map<string, number>();
  readonly txnSlotOwners = new Map<number, number>();
  /** Explicit standings of txn slots (cluster-mode tests), ahead of `txnSlotOwners`. */
  readonly txnStandings = new Map<number, Standing>();
  /** Other live brokers. */
  readonly peers = new Set<number>();
  constructor(readonly selfId = 0) {}
  brokers(): BrokerEndpoint[] {
    return [this.selfId, ...this.peers].map((brokerId) => ({ brokerId, host: "127.0.0.1", port: 9092 + brokerId, rack: null }));
  }
  controllerId(): number {
    return this.selfId;
  }
  partitionLeader(topic: string, partition: number): number {
    return this.leaders.get(`${topic}-${partition}`) ?? this.selfId;
  }
  slotOwner(kind: "txn" | "group", slot: number): number {
    return kind === "txn" ? (this.txnSlotOwners.get(slot) ?? this.selfId) : this.selfId;
  }
  standing(resource: OwnedResource): Standing {
    const explicit = resource.kind === "txn" ? this.txnStandings.get(resource.slot) : undefined;
    if (explicit !== undefined) return explicit;
    const owner = resource.kind === "partition" ? this.partitionLeader(resource.topic, resource.partition) : this.slotOwner(resource.kind, resource.slot);
    return owner === this.selfId ? { state: "owned", epoch: 0 } : { state: "elsewhere", brokerId: owner };
  }
  mayAct(resource: OwnedResource, epoch: number): boolean {
    const standing = this.standing(resource);
    return standing.state === "owned" && standing.epoch === epoch;
  }
}

class FakePartitions implements TxnPartitionSide {
  readonly written: { topic: string; partition: number; marker: MarkerSpec }[] = [];
  /** Partitions answering an error, by `<topic>-<partition>`. */
  readonly failures = new Map<string, number>();
  /** Runs before each marker write (inspection, blocking, simulated crashes). */
  beforeWrite: ((topic: string, partition: number) => Promise<void> | void) | undefined;
  constructor(private readonly events: string[]) {}
  async writeMarker(topic: string, partition: number, marker: MarkerSpec): Promise<MarkerWriteResult> {
    await this.beforeWrite?.(topic, partition);
    const code = this.failures.get(`${topic}-${partition}`);
    this.events.push(`marker ${topic}-${partition} ${marker.commit ? "commit" : "abort"} epoch=${marker.producerEpoch}${code === undefined ? "" : ` error=${code}`}`);
    if (code !== undefined) return { ok: false, errorCode: code };
    this.written.push({ topic, partition, marker });
    return { ok: true, offset: this.written.length };
  }
  fenceProducer(producerId: number, newEpoch: number): void {
    this.events.push(`fence ${producerId} epoch=${newEpoch}`);
  }
}

class FakeOffsets implements TxnOffsetHook {
  /** Runs before each commit or discard (timing tests move the clock here). */
  before: (() => void) | undefined;
  constructor(private readonly events: string[]) {}
  async completeTransactionalOffsets(groupId: string, producerId: number, commit: boolean): Promise<number> {
    this.before?.();
    this.events.push(`offsets ${commit ? "commit" : "discard"} ${groupId} ${producerId}`);
    return 1;
  }
}

interface Harness {
  fs: MemoryFs;
  clock: ManualClock;
  ownership: FakeOwnership;
  events: string[];
  partitions: FakePartitions;
  offsets: FakeOffsets;
  store: TxnStateStore;
  queue: MarkerQueue;
  coordinator: TxnCoordinator;
  /** How many times the coordinator looked for a decision's queued files (filesOf). */
  looks: () => number;
  /** The coordinator's backoff timers, when the setup asked for manual ones. */
  backoff: ManualTimers | undefined;
}

async function setup(
  opts: {
    fs?: MemoryFs;
    clock?: ManualClock;
    ownership?: FakeOwnership;
    beforeWrite?: FakePartitions["beforeWrite"];
    ready?: boolean;
    observer?: TxnObserver;
    completionHoldMaxMs?: number;
    onFatal?: (error: FatalError) => void;
    /** Cluster mode: no slot loaded at start, slots read from disk only by acquireSlot. */
    cluster?: boolean;
    /** Complete* waits for peers to apply queued markers (cluster mode's option). */
    queuedMarkersWaitMs?: number;
    queuedMarkersPausesMs?: { firstMs: number; maxMs: number };
    waker?: Waker;
    askPeerToApply?: TxnCoordinatorDeps["askPeerToApply"];
    /** Manual timers for the coordinator's backoff of decided transactions that failed (`backoff` in the harness). */
    backoff?: boolean;
  } = {},
): Promise<Harness> {
  const fs = opts.fs ?? new MemoryFs();
  const clock = opts.clock ?? new ManualClock();
  const ownership = opts.ownership ?? new FakeOwnership();
  const events: string[] = [];
  const partitions = new FakePartitions(events);
  partitions.beforeWrite = opts.beforeWrite;
  const store = await TxnStateStore.open(fs, DATA, { slotOf, explicitLoad: opts.cluster === true });
  const producerIds = await ProducerIdStore.open(fs, DATA, ownership.selfId, { log: () => undefined });
  const fenceLog = await FenceLogWriter.open(fs, DATA, ownership.selfId);
  const queue = new MarkerQueue(fs, DATA);
  const offsets = new FakeOffsets(events);
  let looks = 0;
  const backoff = opts.backoff === true ? new ManualTimers(clock) : undefined;
  const coordinator = new TxnCoordinator({
    store,
    allocateProducerId: () => producerIds.allocate(),
    ownership,
    partitions,
    offsets,
    fenceLog,
    markerQueue: {
      enqueue: async (brokerId, markers) => {
        events.push(`enqueue to-${brokerId} ${markers.result} ${markers.partitions.map((t) => `${t.topic}:${t.partitions.join(",")}`).join(" ")}`);
        return queue.enqueue(brokerId, markers);
      },
      filesOf: (markers) => {
        looks += 1;
        return queue.filesOf(markers);
      },
      read: (path) => queue.read(path),
      remove: (path) => queue.remove(path),
    },
    clock,
    log: silentLogger,
    options: { transactionMaxTimeoutMs: 900_000, timers: false, loadAllSlotsAtStart: opts.cluster !== true, ...(opts.completionHoldMaxMs === undefined ? {} : { completionHoldMaxMs: opts.completionHoldMaxMs }), ...(opts.queuedMarkersWaitMs === undefined ? {} : { queuedMarkersWaitMs: opts.queuedMarkersWaitMs }), ...(opts.queuedMarkersPausesMs === undefined ? {} : { queuedMarkersPausesMs: opts.queuedMarkersPausesMs }) },
    ...(backoff === undefined ? {} : { backoffTimers: backoff }),
    ...(opts.waker === undefined ? {} : { waker: opts.waker }),
    ...(opts.askPeerToApply === undefined ? {} : { askPeerToApply: opts.askPeerToApply }),
    ...(opts.observer === undefined ? {} : { observer: opts.observer }),
    ...(opts.onFatal === undefined ? {} : { onFatal: opts.onFatal }),
  });
  await coordinator.start();
  if (opts.ready !== false) await coordinator.whenReady();
  return { fs, clock, ownership, events, partitions, offsets, store, queue, coordinator, looks: () => looks, backoff };
}

async function init(h: Harness, transactionalId: string, timeoutMs = 60_000): Promise<{ producerId: number; producerEpoch: number }> {
  const answer = await h.coordinator.initProducerId({ transactionalId, timeoutMs, producerId: -1, producerEpoch: -1 });
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return { producerId: answer.producerId, producerEpoch: answer.producerEpoch };
}

function ref(transactionalId: string, p: { producerId: number; producerEpoch: number }) {
  return { transactionalId, producerId: p.producerId, producerEpoch: p.producerEpoch };
}

const orders = (...partitions: number[]) => [{ topic: "orders", partitions }];

describe("commit and abort", () => {
  test("EndTxn(commit): answered once Prepare is durable, then offsets, self-led markers and the peer-led queue at once, Complete", async () => {
    const h = await setup();
    h.ownership.leaders.set("orders-1", 1); // led by a peer
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) })).toBe(ErrorCode.NONE);
    expect(await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" })).toBe(ErrorCode.NONE);
    const seenAtMarker: string[] = [];
    let releaseMarker!: () => void;
    const markerHeld = new Promise<void>((resolve) => (releaseMarker = resolve));
    h.partitions.beforeWrite = async () => {
      // What the store has made durable when the first marker is written; the marker waits for the test.
      seenAtMarker.push((await h.store.get("tx"))!.state);
      await markerHeld;
    };
    h.events.length = 0;
    // The answer comes while the marker cannot be written: it does not wait for the markers or Complete*.
    const answer = await h.coordinator.endTxn({ ...ref("tx", p), commit: true });
    expect(answer).toEqual({ errorCode: ErrorCode.NONE, producerId: p.producerId, producerEpoch: p.producerEpoch });
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    expect(h.partitions.written).toEqual([]);
    releaseMarker();
    await h.coordinator.settled("tx");
    expect(seenAtMarker).toEqual(["PrepareCommit"]);
    // The peer's file is queued while the self-led marker is held: their writes overlap.
    expect(h.events).toEqual([
      `offsets commit g ${p.producerId}`,
      "enqueue to-1 commit orders:1",
      `marker orders-0 commit epoch=${p.producerEpoch}`,
    ]);
    const entry = await h.store.get("tx");
    expect(entry?.state).toBe("CompleteCommit");
    expect(entry?.partitions).toEqual([]);
    expect(entry?.groups).toEqual([]);
    // The peer's file is named after the transaction (its decision time included), so a retry overwrites itself.
    const files = await h.queue.list(1);
    const decidedMs = h.clock.nowMs() + 1; // one ms after AddOffsetsToTxn's transition, the clock standing still
    expect(files.map((f) => f.split("/").pop())).toEqual([`${p.producerId}-${p.producerEpoch}-${decidedMs}-commit.json`]);
    expect(await h.queue.read(files[0]!)).toMatchObject({ partitions: orders(1), decidedMs, result: "commit" });
  });

  test("cluster mode: Complete* waits until the peer applied the queued markers; until then the transaction stays decided", async () => {
    const h = await setup({ queuedMarkersWaitMs: 50 });
    h.ownership.peers.add(1);
    h.ownership.leaders.set("orders-1", 1);
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) })).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled("tx");
    // Nobody applied broker 1's file: still PrepareCommit (the next transaction's requests wait or retry).
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    const [file] = await h.queue.list(1);
    expect(file).toBeDefined();
    // Broker 1 applies it and removes the file: the next attempt completes.
    await h.queue.remove(file!);
    expect(await h.coordinator.completeUnfinished()).toBe(1);
    await h.coordinator.settled("tx");
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
  });

  test("cluster mode: a peer's markers-applied wake-up for this broker ends the wait for the queued markers at once", async () => {
    const listeners = new Set<(target: WakeTarget) => void>();
    const woken: WakeTarget[] = [];
    const waker: Waker = {
      wake: (target) => void woken.push(target),
      onWake: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close: async () => undefined,
    };
    const deliver = (target: WakeTarget) => {
      for (const listener of listeners) listener(target);
    };
    // Pauses of a minute between looks: within the test only the wake-up can end the wait.
    const h = await setup({ queuedMarkersWaitMs: 600_000, queuedMarkersPausesMs: { firstMs: 60_000, maxMs: 60_000 }, waker });
    h.ownership.peers.add(1);
    h.ownership.leaders.set("orders-1", 1);
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    const file = await until("the peer's queued file", 5_000, async () => (await h.queue.list(1))[0]);
    await until("broker 1 woken", 5_000, async () => (woken.some((t) => t.kind === "broker" && t.brokerId === 1) ? true : undefined));
    // Broker 1 applies the markers and removes the file; a wake-up for another broker's coordinator changes nothing.
    await h.queue.remove(file);
    deliver({ kind: "markers-applied", brokerId: h.ownership.selfId + 1 });
    deliver({ kind: "broker", brokerId: h.ownership.selfId });
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    deliver({ kind: "markers-applied", brokerId: h.ownership.selfId });
    await h.coordinator.settled("tx");
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    await h.coordinator.close();
    expect(listeners.size).toBe(0);
  });

  test("cluster mode: the leader is asked to apply its queued file by request, and its answer ends the wait at once, with no etcd wake-up either way", async () => {
    const woken: WakeTarget[] = [];
    const waker: Waker = { wake: (target) => void woken.push(target), onWake: () => () => undefined, close: async () => undefined };
    const asked: string[] = [];
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    // The peer answers when the test says; the coordinator's pauses are a minute long, so only the answer
    // can end its wait within the test.
    const h: Harness = await setup({
      queuedMarkersWaitMs: 600_000,
      queuedMarkersPausesMs: { firstMs: 60_000, maxMs: 60_000 },
      waker,
      askPeerToApply: async (brokerId, markers) => {
        asked.push(`${brokerId} ${markers.producerId} ${markers.result} ${markers.partitions.map((t) => `${t.topic}:${t.partitions.join(",")}`).join(" ")}`);
        await answered;
        return true;
      },
    });
    h.ownership.peers.add(1);
    h.ownership.leaders.set("orders-1", 1);
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) })).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    // The coordinator looked, found broker 1's file, and waits; broker 1 applies it (removes it) and answers.
    await until("the coordinator's first look at the queued files", 5_000, async () => (h.looks() >= 1 ? true : undefined));
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    for (const file of await h.queue.list(1)) await h.queue.remove(file);
    answer();
    await h.coordinator.settled("tx");
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    expect(asked).toEqual([`1 ${p.producerId} commit orders:1`]);
    expect(woken.filter((t) => t.kind === "broker")).toEqual([]);
  });

  test("cluster mode: a leader that cannot be asked (no answer) is woken through etcd instead, and the transaction waits for its file", async () => {
    const listeners = new Set<(target: WakeTarget) => void>();
    const woken: WakeTarget[] = [];
    const waker: Waker = {
      wake: (target) => void woken.push(target),
      onWake: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close: async () => undefined,
    };
    const h = await setup({ queuedMarkersWaitMs: 600_000, queuedMarkersPausesMs: { firstMs: 60_000, maxMs: 60_000 }, waker, askPeerToApply: async () => false });
    h.ownership.peers.add(1);
    h.ownership.leaders.set("orders-1", 1);
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await until("broker 1 woken through etcd", 5_000, async () => (woken.some((t) => t.kind === "broker" && t.brokerId === 1) ? true : undefined));
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    // Broker 1 applies it after the etcd wake-up and says so the etcd way.
    for (const file of await h.queue.list(1)) await h.queue.remove(file);
    for (const listener of listeners) listener({ kind: "markers-applied", brokerId: h.ownership.selfId });
    await h.coordinator.settled("tx");
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    await h.coordinator.close();
  });

  test("cluster mode: markers queued for a broker that left are handed on to the partition's live leader, then the transaction completes", async () => {
    const h = await setup({ queuedMarkersWaitMs: 2_000 });
    h.ownership.peers.add(1);
    h.ownership.leaders.set("orders-1", 1);
    const p = await init(h, "tx");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.NONE);
    let applied = 0;
    // Broker 2, the new leader, applies what reaches its queue.
    const peer2 = (async () => {
      for (;;) {
        const files = await h.queue.list(2);
        if (files.length > 0) {
          expect((await h.queue.read(files[0]!))?.partitions).toEqual(orders(1));
          await h.queue.remove(files[0]!);
          applied++;
          return;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    // Broker 1 leaves before applying anything; broker 2 leads the partition now.
    const ended = h.coordinator.endTxn({ ...ref("tx", p), commit: true });
    expect((await ended).errorCode).toBe(ErrorCode.NONE);
    h.ownership.peers.delete(1);
    h.ownership.peers.add(2);
    h.ownership.leaders.set("orders-1", 2);
    await peer2;
    await h.coordinator.settled("tx");
    expect(applied).toBe(1);
    expect(await h.queue.list(1)).toEqual([]);
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
  });

  test("consecutive transactions of one producer epoch each queue their own file for the peer, in order", async () => {
    const h = await setup();
    h.ownership.leaders.set("orders-1", 1);
    h.ownership.leaders.set("orders-2", 1);
    const p = await init(h, "tx");
    // Transaction version 1: the same producer id and epoch for all three, all within one clock reading.
    const transactions = [
      { partitions: orders(1, 2), commit: true },
      { partitions: orders(1), commit: false },
      { partitions: orders(2), commit: true },
    ];
    for (const t of transactions) {
      expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: t.partitions })).toBe(ErrorCode.NONE);
      expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: t.commit })).errorCode).toBe(ErrorCode.NONE);
    }
    await h.coordinator.settled();
    const queued = await Promise.all((await h.queue.list(1)).map((path) => h.queue.read(path)));
    expect(queued.map((m) => ({ result: m?.result, partitions: m?.partitions, epoch: m?.producerEpoch }))).toEqual([
      { result: "commit", partitions: orders(1, 2), epoch: p.producerEpoch },
      { result: "abort", partitions: orders(1), epoch: p.producerEpoch },
      { result: "commit", partitions: orders(2), epoch: p.producerEpoch },
    ]);
  });

  test("EndTxn(abort) discards the staged offsets and writes ABORT markers; retries answer by state", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(2) });
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    h.events.length = 0;
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: false })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect(h.events).toEqual([`offsets discard g ${p.producerId}`, `marker orders-2 abort epoch=${p.producerEpoch}`]);
    // A retry in the same direction is answered NONE without a second marker; the other direction is refused.
    h.events.length = 0;
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: false })).errorCode).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.INVALID_TXN_STATE);
    expect(h.events).toEqual([]);
  });

  test("an empty transaction (only offsets) completes without markers", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    h.events.length = 0;
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect(h.events).toEqual([`offsets commit g ${p.producerId}`]);
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
  });

  test("a retriable marker failure leaves the decision in Prepare*, answered NONE; the reconcile pass completes it", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    h.partitions.failures.set("orders-0", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    expect(h.coordinator.unfinishedIds()).toEqual(["tx"]);
    // Meanwhile the producer's next requests are told to retry.
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
    expect((await h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 })).errorCode).toBe(
      ErrorCode.CONCURRENT_TRANSACTIONS,
    );
    h.partitions.failures.clear();
    expect(await h.coordinator.completeUnfinished()).toBe(1);
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    expect(h.coordinator.unfinishedIds()).toEqual([]);
  });

  test("a retriable marker failure is tried again on a doubling backoff of its own (50 ms to 1 s), writing only the missing marker, until it completes", async () => {
    const h = await setup({ backoff: true });
    const timers = h.backoff!;
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) });
    h.partitions.failures.set("orders-1", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    const refusals = () => h.events.filter((e) => e === `marker orders-1 commit epoch=${p.producerEpoch} error=${ErrorCode.NOT_LEADER_OR_FOLLOWER}`).length;
    await waitUntil(() => refusals() === 1 && timers.pending === 1, "the answer's own attempt refused, a retry scheduled");
    for (const [i, delayMs] of [50, 100, 200, 400, 800, 1_000, 1_000].entries()) {
      await timers.advance(delayMs - 1);
      expect(refusals()).toBe(i + 1);
      await timers.advance(1);
      await waitUntil(() => refusals() === i + 2 && timers.pending === 1, `retry ${i + 1} after ${delayMs} ms, and the next scheduled`);
    }
    expect(h.events.filter((e) => e.startsWith("marker orders-0"))).toHaveLength(1);
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    h.partitions.failures.clear();
    await timers.advance(1_000);
    await waitUntil(() => h.coordinator.unfinishedIds().length === 0, "the transaction completed");
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    expect(h.partitions.written.map((w) => `${w.topic}-${w.partition}`)).toEqual(["orders-0", "orders-1"]);
    expect(timers.pending).toBe(0);
  });

  test("the backoff stops when the slot is handed over and when the coordinator closes", async () => {
    const h = await setup({ backoff: true });
    const timers = h.backoff!;
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    h.partitions.failures.set("orders-0", ErrorCode.NOT_LEADER_OR_FOLLOWER);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    const attempts = () => h.events.filter((e) => e.startsWith("marker orders-0")).length;
    await waitUntil(() => attempts() === 1 && timers.pending === 1, "a retry scheduled");
    // Handed over: the retry that falls due does nothing, and schedules nothing (the new owner takes it on).
    h.ownership.txnSlotOwners.set(slotOf("tx"), 7);
    await timers.advance(50);
    expect(attempts()).toBe(1);
    expect(timers.pending).toBe(0);
    // Owned again, and the reconcile pass refused again: scheduled again; closing cancels it.
    h.ownership.txnSlotOwners.delete(slotOf("tx"));
    expect(await h.coordinator.completeUnfinished()).toBe(0);
    expect(attempts()).toBe(2);
    expect(timers.pending).toBe(1);
    await h.coordinator.close();
    expect(timers.pending).toBe(0);
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
  });

  test("retries of a pending decision write only the markers still missing; the producer's retry completes it", async () => {
    const h = await setup();
    h.ownership.leaders.set("orders-2", 1);
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1, 2) });
    h.partitions.failures.set("orders-1", ErrorCode.KAFKA_STORAGE_ERROR);
    h.events.length = 0;
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
    h.partitions.failures.clear();
    // The producer's retry (no reconcile pass needed) finishes the decision, then is answered on it.
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    const epoch = p.producerEpoch;
    // The peer's file is queued once, beside the first attempt's self-led markers.
    expect(h.events).toEqual([
      "enqueue to-1 commit orders:2",
      `marker orders-0 commit epoch=${epoch}`,
      `marker orders-1 commit epoch=${epoch} error=${ErrorCode.KAFKA_STORAGE_ERROR}`,
      `marker orders-1 commit epoch=${epoch} error=${ErrorCode.KAFKA_STORAGE_ERROR}`,
      `marker orders-1 commit epoch=${epoch}`,
    ]);
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
  });

  test("markers for a deleted partition are dropped, a superseded one counts as done", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) });
    h.partitions.failures.set("orders-0", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    h.partitions.failures.set("orders-1", ErrorCode.INVALID_PRODUCER_EPOCH);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
  });
});

/** A marker side whose writes wait until `release()`; `started` resolves when the first one is waiting. */
function holdMarkers(h: Harness): { started: Promise<void>; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const startedP = new Promise<void>((resolve) => (started = resolve));
  h.partitions.beforeWrite = async () => {
    started();
    await held;
  };
  return { started: startedP, release };
}

/**
 * A transaction of "tx" on orders-0 whose EndTxn(commit) has been answered while its marker is held: the
 * marker write has started and waits for `markers.release()`.
 */
async function answeredWithMarkersHeld(h: Harness): Promise<{ p: { producerId: number; producerEpoch: number }; markers: ReturnType<typeof holdMarkers> }> {
  const p = await init(h, "tx");
  await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
  const markers = holdMarkers(h);
  expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
  await markers.started;
  return { p, markers };
}

/** Turns of the event loop (no timers), to show that something did not happen meanwhile. */
async function turns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe("requests held while an answered EndTxn completes", () => {
  test("the producer's next AddPartitionsToTxn waits for Complete*, then starts the next transaction", async () => {
    const h = await setup();
    const { p, markers } = await answeredWithMarkersHeld(h);
    let added: number | undefined;
    const adding = h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) }).then((code) => (added = code));
    await turns();
    expect(added).toBeUndefined();
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    markers.release();
    await adding;
    expect(added).toBe(ErrorCode.NONE);
    const entry = await h.store.get("tx");
    expect(entry?.state).toBe("Ongoing");
    expect(entry?.partitions).toEqual(orders(1));
    expect(h.partitions.written.map((w) => `${w.topic}-${w.partition}`)).toEqual(["orders-0"]);
  });

  test("a retried EndTxn, AddOffsetsToTxn, TxnOffsetCommit and InitProducerId are held and answered on the completed entry", async () => {
    const h = await setup();
    const { p, markers } = await answeredWithMarkersHeld(h);
    const retried = h.coordinator.endTxn({ ...ref("tx", p), commit: true });
    const offsets = h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    const staged = h.coordinator.withVerifiedGroup(ref("tx", p), "g", async () => "staged");
    const rejoined = h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: p.producerId, producerEpoch: p.producerEpoch });
    await turns();
    markers.release();
    expect((await retried).errorCode).toBe(ErrorCode.NONE);
    expect(await offsets).toBe(ErrorCode.NONE);
    expect(await staged).toEqual({ errorCode: ErrorCode.NONE, value: "staged" });
    // The rejoin came last: it fences the transaction the AddOffsetsToTxn opened (CONCURRENT_TRANSACTIONS).
    expect((await rejoined).errorCode).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
    await h.coordinator.settled();
    expect((await h.store.get("tx"))?.state).toBe("CompleteAbort");
  });

  test("past the hold bound each request is answered CONCURRENT_TRANSACTIONS, and the completion still lands", async () => {
    const h = await setup({ completionHoldMaxMs: 20 });
    const { p, markers } = await answeredWithMarkersHeld(h);
    const { CONCURRENT_TRANSACTIONS } = ErrorCode;
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(CONCURRENT_TRANSACTIONS);
    expect(await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" })).toBe(CONCURRENT_TRANSACTIONS);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(CONCURRENT_TRANSACTIONS);
    expect(await h.coordinator.withVerifiedGroup(ref("tx", p), "g", async () => "staged")).toEqual({ errorCode: CONCURRENT_TRANSACTIONS });
    const rejoin = await h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    expect(rejoin.errorCode).toBe(CONCURRENT_TRANSACTIONS);
    // Nothing the refused requests asked for happened; the completion goes on once the marker is written.
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
    markers.release();
    await h.coordinator.settled();
    expect((await h.store.get("tx"))?.state).toBe("CompleteCommit");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.NONE);
  });

  test("the held request's write shares Complete*'s journal fsync", async () => {
    const fs = new HookedFsyncFs();
    const h = await setup({ fs });
    const { p, markers } = await answeredWithMarkersHeld(h);
    const adding = h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) });
    await turns();
    let fsyncs = 0;
    fs.onFsync = () => (fsyncs += 1);
    markers.release();
    expect(await adding).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    // One journal line holds CompleteCommit and the next transaction's Ongoing: one fsync for both.
    expect(fsyncs).toBe(1);
    const journal = new TextDecoder().decode(await h.fs.readFile(`${DATA}/__cluster/txn_state/slot-${slotOf("tx")}.journal`)).trim().split("\n");
    expect(journal.at(-1)).toContain("Ongoing");
    expect(journal.at(-2)).toContain("PrepareCommit");
    // After a restart the entry is the next transaction's, and the first one's markers are not written again.
    const restarted = await setup({ fs: h.fs, clock: h.clock });
    expect((await restarted.store.get("tx"))?.partitions).toEqual(orders(1));
    expect(restarted.events).toEqual([]);
  });

  test("a FatalError after the answer goes to onFatal, not to the answered request", async () => {
    const fatal: FatalError[] = [];
    const h = await setup({ onFatal: (error) => fatal.push(error) });
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    h.partitions.beforeWrite = () => {
      throw new FatalError("fsync failed");
    };
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect(fatal.map((e) => e.message)).toEqual(["fsync failed"]);
    expect((await h.store.get("tx"))?.state).toBe("PrepareCommit");
  });
});

/** A MemoryFs whose every file fsync runs `onFsync` once it is done (timing tests move the clock there). */
class HookedFsyncFs extends MemoryFs {
  onFsync: (() => void) | undefined;
  override async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const handle = await super.open(path, mode);
    const fsync = handle.fsync.bind(handle);
    handle.fsync = async () => {
      await fsync();
      this.onFsync?.();
    };
    return handle;
  }
}

describe("EndTxn phase timing", () => {
  class Phases implements TxnObserver {
    readonly seen: [EndTxnPhase, number][] = [];
    onEndTxnPhase(phase: EndTxnPhase, durationMs: number): void {
      this.seen.push([phase, durationMs]);
    }
  }

  test("each step of a decided EndTxn is reported once, in order, with its own duration", async () => {
    const fs = new HookedFsyncFs();
    const observer = new Phases();
    const h = await setup({ fs, observer });
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) });
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    expect(observer.seen).toEqual([]);
    // A journal fsync takes 2 ms, the offset hook 3 ms, each of the two markers 5 ms. The offsets and the
    // markers start together (the markers once the offsets are done here, so that the manual clock says
    // which is which): both are timed from the answer.
    fs.onFsync = () => h.clock.advance(2);
    h.offsets.before = () => h.clock.advance(3);
    h.partitions.beforeWrite = async () => {
      await turns(5);
      h.clock.advance(5);
    };
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect(observer.seen).toEqual([
      ["prepare", 2],
      ["offsets", 3],
      ["markers", 13],
      ["complete", 2],
    ]);
  });

  test("an EndTxn that decides nothing (a retry, a refusal) reports nothing; one without partitions has no markers step", async () => {
    const observer = new Phases();
    const h = await setup({ observer });
    const p = await init(h, "tx");
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await h.coordinator.settled();
    expect(observer.seen.map(([phase]) => phase)).toEqual(["prepare", "offsets", "complete"]);
    observer.seen.length = 0;
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: false })).errorCode).toBe(ErrorCode.INVALID_TXN_STATE);
    expect(observer.seen).toEqual([]);
  });
});

describe("crash between Prepare and Complete", () => {
  test("the restart completes the transaction before it answers anything", async () => {
    const first = await setup();
    const p = await init(first, "tx");
    await first.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) });
    await first.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    first.partitions.beforeWrite = () => {
      // The process dies as it is about to write the first marker: what is durable now is all that survives.
      first.fs.crash();
      throw new Error("killed");
    };
    await first.coordinator.endTxn({ ...ref("tx", p), commit: true });

    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const second = await setup({ fs: first.fs, clock: first.clock, beforeWrite: () => held, ready: false });
    expect((await second.store.get("tx"))?.state).toBe("PrepareCommit");
    // Recovery is writing the markers: nothing is answered from the half-done state.
    expect(second.coordinator.isReady).toBe(false);
    expect(await second.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(2) })).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect((await second.coordinator.list([], [], -1)).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    release();
    await second.coordinator.whenReady();
    expect(second.events).toEqual([
      `offsets commit g ${p.producerId}`,
      `marker orders-0 commit epoch=${p.producerEpoch}`,
      `marker orders-1 commit epoch=${p.producerEpoch}`,
    ]);
    expect((await second.store.get("tx"))?.state).toBe("CompleteCommit");
    // The producer's retry of EndTxn finds the transaction committed.
    expect((await second.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
  });

  test("a crash after the markers and before Complete* is durable: the restart writes them again and completes", async () => {
    const fatal: FatalError[] = [];
    const first = await setup({ onFatal: (error) => fatal.push(error) });
    const p = await init(first, "tx");
    await first.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0, 1) });
    const markers = holdMarkers(first);
    expect((await first.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await markers.started;
    // The next fsync of the transaction state, Complete*'s, fails: the process would exit there.
    first.fs.failNextFsync(`${DATA}/__cluster/txn_state`);
    markers.release();
    await first.coordinator.settled();
    expect(fatal).toHaveLength(1);
    expect(first.partitions.written.map((w) => `${w.topic}-${w.partition}`)).toEqual(["orders-0", "orders-1"]);
    first.fs.crash();

    const second = await setup({ fs: first.fs, clock: first.clock });
    // Recovery found PrepareCommit and wrote both markers again (harmless: a marker for a transaction
    // already ended is written as Apache writes it), then completed.
    expect(second.events).toEqual([`marker orders-0 commit epoch=${p.producerEpoch}`, `marker orders-1 commit epoch=${p.producerEpoch}`]);
    expect((await second.store.get("tx"))?.state).toBe("CompleteCommit");
    expect((await second.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
  });

  test("a crash before Prepare is durable leaves the transaction Ongoing, with no marker anywhere", async () => {
    const first = await setup();
    const p = await init(first, "tx");
    await first.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    first.fs.failNextFsync(`${DATA}/__cluster/txn_state`);
    await expect(first.coordinator.endTxn({ ...ref("tx", p), commit: true })).rejects.toThrow();
    expect(first.events).toEqual([]);
    first.fs.crash();
    const second = await setup({ fs: first.fs, clock: first.clock });
    expect((await second.store.get("tx"))?.state).toBe("Ongoing");
    expect(second.events).toEqual([]);
  });
});

describe("fencing", () => {
  test("InitProducerId on an open transaction fences and aborts it (CONCURRENT_TRANSACTIONS), the retry gets the bumped epoch", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    h.events.length = 0;
    const rejoin = await h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    expect(rejoin).toEqual({ errorCode: ErrorCode.CONCURRENT_TRANSACTIONS, producerId: -1, producerEpoch: -1 });
    const fenced = p.producerEpoch + 1;
    expect(h.events).toEqual([`fence ${p.producerId} epoch=${fenced}`, `offsets discard g ${p.producerId}`, `marker orders-0 abort epoch=${fenced}`]);
    expect((await h.store.get("tx"))?.state).toBe("CompleteAbort");
    const retry = await h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    expect(retry).toEqual({ errorCode: ErrorCode.NONE, producerId: p.producerId, producerEpoch: p.producerEpoch + 2 });
    // The zombie's requests at its old epoch are fenced.
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.PRODUCER_FENCED);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.PRODUCER_FENCED);
    // Every bump went to the fence log for the peers.
    const read = await readFenceLog(h.fs, fenceLogPath(DATA, 0), 0);
    expect(read.fences.map((f) => [f.producerId, f.epoch])).toEqual([
      [p.producerId, p.producerEpoch + 1],
      [p.producerId, p.producerEpoch + 2],
    ]);
  });

  test("a rejoin without an open transaction bumps the epoch and fences it locally and in the log", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    expect(h.events).toEqual([]); // a brand-new id fences nothing
    const again = await init(h, "tx");
    expect(again).toEqual({ producerId: p.producerId, producerEpoch: p.producerEpoch + 1 });
    expect(h.events).toEqual([`fence ${p.producerId} epoch=${p.producerEpoch + 1}`]);
    expect((await readFenceLog(h.fs, fenceLogPath(DATA, 0), 0)).fences).toHaveLength(1);
  });

  test("InitProducerId validates the id and the timeout before anything else", async () => {
    const h = await setup();
    const init0 = (transactionalId: string, timeoutMs: number) => h.coordinator.initProducerId({ transactionalId, timeoutMs, producerId: -1, producerEpoch: -1 });
    expect((await init0("", 1000)).errorCode).toBe(ErrorCode.INVALID_REQUEST);
    expect((await init0("tx", 0)).errorCode).toBe(ErrorCode.INVALID_TRANSACTION_TIMEOUT);
    expect((await init0("tx", 900_001)).errorCode).toBe(ErrorCode.INVALID_TRANSACTION_TIMEOUT);
    expect((await init0("tx", 900_000)).errorCode).toBe(ErrorCode.NONE);
  });
});

describe("ownership", () => {
  test("a slot owned by another broker answers NOT_COORDINATOR, and its reaper does not run here", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    h.ownership.txnSlotOwners.set(slotOf("tx"), 7);
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(1) })).toBe(ErrorCode.NOT_COORDINATOR);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect((await h.coordinator.describe("tx")).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect((await h.coordinator.list([], [], -1)).transactionStates).toEqual([]);
    h.clock.advance(61_000);
    expect(await h.coordinator.abortTimedOutTransactions()).toBe(0);
    expect((await h.store.get("tx"))?.state).toBe("Ongoing");
    // Back on this broker, its reaper takes the transaction.
    h.ownership.txnSlotOwners.clear();
    expect(await h.coordinator.abortTimedOutTransactions()).toBe(1);
  });
});

describe("timeouts and expiry", () => {
  test("the reaper aborts a timed-out transaction with an epoch bump; the producer is then fenced", async () => {
    const h = await setup();
    const p = await init(h, "tx", 10_000);
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    h.clock.advance(10_000); // start + timeout == now: not yet (Apache's strict rule)
    expect(await h.coordinator.abortTimedOutTransactions()).toBe(0);
    h.clock.advance(1);
    h.events.length = 0;
    expect(await h.coordinator.abortTimedOutTransactions()).toBe(1);
    expect(h.events).toEqual([`fence ${p.producerId} epoch=${p.producerEpoch + 1}`, `marker orders-0 abort epoch=${p.producerEpoch + 1}`]);
    const entry = await h.store.get("tx");
    expect(entry?.state).toBe("CompleteAbort");
    expect(entry?.epoch).toBe(p.producerEpoch + 1);
    expect((await h.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.PRODUCER_FENCED);
    // The timed-out producer's batches are now a zombie's.
    expect(h.coordinator.verifier.verifyBatch(p.producerId, p.producerEpoch, "orders", 0)).toBe("fenced");
  });

  test("transactional ids idle for 7 days expire; open transactions never do", async () => {
    const h = await setup();
    await init(h, "idle");
    const busy = await init(h, "busy", 900_000);
    await h.coordinator.addPartitions({ ...ref("busy", busy), partitions: orders(0) });
    h.clock.advance(7 * DAY_MS - 1);
    expect(await h.coordinator.expireTransactionalIds()).toBe(0);
    h.clock.advance(1);
    expect(await h.coordinator.expireTransactionalIds()).toBe(1);
    expect(await h.store.get("idle")).toBeUndefined();
    expect((await h.coordinator.describe("idle")).errorCode).toBe(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND);
    expect((await h.store.get("busy"))?.state).toBe("Ongoing");
  });
});

describe("verifier, TxnOffsetCommit check, listing", () => {
  test("the verifier knows exactly the partitions of ongoing transactions at their epoch, and why a batch is refused", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    const v = h.coordinator.verifier;
    expect(v.verifyBatch(p.producerId, p.producerEpoch, "orders", 0)).toBe("not-in-transaction");
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    expect(v.verifyBatch(p.producerId, p.producerEpoch, "orders", 0)).toBe("in-transaction");
    expect(v.verifyBatch(p.producerId, p.producerEpoch, "orders", 1)).toBe("not-in-transaction");
    expect(v.verifyBatch(p.producerId, p.producerEpoch + 1, "orders", 0)).toBe("fenced");
    expect(v.verifyBatch(p.producerId, p.producerEpoch - 1, "orders", 0)).toBe("fenced");
    expect(v.verifyBatch(p.producerId + 1, p.producerEpoch, "orders", 0)).toBe("unknown-producer");
    // A transaction stops taking batches as soon as it is decided, and says so until it is complete.
    const duringMarkers: string[] = [];
    h.partitions.beforeWrite = () => {
      duringMarkers.push(v.verifyBatch(p.producerId, p.producerEpoch, "orders", 0));
    };
    await h.coordinator.endTxn({ ...ref("tx", p), commit: true });
    await h.coordinator.settled();
    expect(duringMarkers).toEqual(["deciding"]);
    expect(v.verifyBatch(p.producerId, p.producerEpoch, "orders", 0)).toBe("not-in-transaction");
    // Rebuilt from the store at start-up.
    await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(3) });
    const restarted = await setup({ fs: h.fs, clock: h.clock });
    expect(restarted.coordinator.verifier.verifyBatch(p.producerId, p.producerEpoch, "orders", 3)).toBe("in-transaction");
    expect(restarted.coordinator.verifier.verifyBatch(p.producerId + 1, p.producerEpoch, "orders", 3)).toBe("unknown-producer");
  });

  test("the verifier follows a producer id through a fence and an expiry", async () => {
    const h = await setup();
    const first = await init(h, "tx");
    await h.coordinator.addPartitions({ ...ref("tx", first), partitions: orders(0, 1) });
    // A new instance with the same transactional id fences the open transaction (CONCURRENT_TRANSACTIONS,
    // then the bumped epoch on the retry): the zombie's batches are fenced even on a partition where it
    // never wrote, which has no producer state to fence it by.
    expect((await h.coordinator.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 })).errorCode).toBe(
      ErrorCode.CONCURRENT_TRANSACTIONS,
    );
    expect(h.coordinator.verifier.verifyBatch(first.producerId, first.producerEpoch, "orders", 1)).toBe("fenced");
    const second = await init(h, "tx");
    expect(second.producerId).toBe(first.producerId);
    await h.coordinator.addPartitions({ ...ref("tx", second), partitions: orders(1) });
    expect(h.coordinator.verifier.verifyBatch(second.producerId, second.producerEpoch, "orders", 1)).toBe("in-transaction");
    expect(h.coordinator.verifier.verifyBatch(first.producerId, first.producerEpoch, "orders", 1)).toBe("fenced");
    await h.coordinator.endTxn({ ...ref("tx", second), commit: false });
    await h.coordinator.settled();
    // Expired after 7 idle days: the producer id is nobody's any more. (The clock stood still through the
    // transitions above, whose stamps run a few milliseconds ahead of it.)
    h.clock.advance(7 * DAY_MS + 60_000);
    expect(await h.coordinator.expireTransactionalIds()).toBe(1);
    expect(h.coordinator.verifier.verifyBatch(second.producerId, second.producerEpoch, "orders", 1)).toBe("unknown-producer");
  });

  test("TxnOffsetCommit stages only for the current producer of a transaction that added the group", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    const staged: string[] = [];
    const stage = async () => {
      staged.push("staged");
      return [ErrorCode.NONE];
    };
    expect((await h.coordinator.withVerifiedGroup(ref("tx", p), "g", stage)).errorCode).toBe(ErrorCode.TRANSACTION_ABORTABLE);
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    expect((await h.coordinator.withVerifiedGroup(ref("tx", p), "other", stage)).errorCode).toBe(ErrorCode.TRANSACTION_ABORTABLE);
    expect((await h.coordinator.withVerifiedGroup({ ...ref("tx", p), producerEpoch: p.producerEpoch + 1 }, "g", stage)).errorCode).toBe(ErrorCode.PRODUCER_FENCED);
    expect((await h.coordinator.withVerifiedGroup({ ...ref("tx", p), producerId: 999_999 }, "g", stage)).errorCode).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    expect((await h.coordinator.withVerifiedGroup(ref("unknown", p), "g", stage)).errorCode).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    expect(await h.coordinator.withVerifiedGroup(ref("tx", p), "g", stage)).toEqual({ errorCode: ErrorCode.NONE, value: [ErrorCode.NONE] });
    expect(staged).toEqual(["staged"]);
    expect(verifyGroup({ ...(await h.store.get("tx"))!, state: "PrepareCommit" }, ref("tx", p), "g")).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
  });

  test("verifyGroup in every state, for the current producer, another epoch and another producer id", () => {
    const PID = 4000;
    const entry = (state: TxnState, groups: string[]) => txnEntryIn(state, { producerId: PID, partitions: [], groups });
    const current = { transactionalId: "tx", producerId: PID, producerEpoch: 5 };
    const { NONE, CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING } = ErrorCode;
    // [state, groups of the entry, answer to its current producer for group g]
    const table: [TxnState, string[], number][] = [
      ["Empty", [], TRANSACTION_ABORTABLE],
      ["Ongoing", ["g"], NONE],
      ["Ongoing", ["other"], TRANSACTION_ABORTABLE], // g was never added with AddOffsetsToTxn
      ["PrepareCommit", ["g"], CONCURRENT_TRANSACTIONS],
      ["PrepareAbort", ["g"], CONCURRENT_TRANSACTIONS],
      ["CompleteCommit", [], TRANSACTION_ABORTABLE],
      ["CompleteAbort", [], TRANSACTION_ABORTABLE],
      ["PrepareEpochFence", ["g"], TRANSACTION_ABORTABLE],
      ["Dead", [], TRANSACTION_ABORTABLE],
    ];
    for (const [state, groups, expected] of table) {
      const e = entry(state, groups);
      expect([state, verifyGroup(e, current, "g")]).toEqual([state, expected]);
      expect([state, verifyGroup(e, { ...current, producerEpoch: 4 }, "g")]).toEqual([state, PRODUCER_FENCED]);
      expect([state, verifyGroup(e, { ...current, producerId: PID + 1 }, "g")]).toEqual([state, INVALID_PRODUCER_ID_MAPPING]);
    }
    expect(verifyGroup(undefined, current, "g")).toBe(INVALID_PRODUCER_ID_MAPPING);
  });

  test("staging and EndTxn's offset hook never interleave", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    await h.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    let releaseStage!: () => void;
    const stageHeld = new Promise<void>((resolve) => (releaseStage = resolve));
    let stageStarted!: () => void;
    const started = new Promise<void>((resolve) => (stageStarted = resolve));
    const staging = h.coordinator.withVerifiedGroup(ref("tx", p), "g", async () => {
      stageStarted();
      await stageHeld;
      h.events.push("stage g");
      return [];
    });
    await started;
    let ended = false;
    const ending = h.coordinator.endTxn({ ...ref("tx", p), commit: true }).then(() => (ended = true));
    // However long the staging takes, EndTxn does not decide meanwhile (turns of the event loop, no timers).
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(ended).toBe(false);
    expect(h.events).toEqual([]);
    expect((await h.store.get("tx"))?.state).toBe("Ongoing");
    releaseStage();
    await Promise.all([staging, ending]);
    expect(h.events).toEqual(["stage g", `offsets commit g ${p.producerId}`]);
  });

  test("ListTransactions filters by state, producer id and duration; DescribeTransactions shows the entry", async () => {
    const h = await setup();
    const a = await init(h, "a");
    const b = await init(h, "b");
    await h.coordinator.addPartitions({ ...ref("a", a), partitions: [{ topic: "t2", partitions: [1] }, ...orders(0, 2)] });
    const startMs = h.clock.nowMs();
    h.clock.advance(5_000);
    const names = (listed: { transactionStates: { transactionalId: string }[] }) => listed.transactionStates.map((s) => s.transactionalId);
    expect(names(await h.coordinator.list([], [], -1))).toEqual(["a", "b"]);
    expect(names(await h.coordinator.list(["Ongoing"], [], -1))).toEqual(["a"]);
    expect(await h.coordinator.list(["Ongoing", "Bogus"], [], -1)).toEqual({
      errorCode: ErrorCode.NONE,
      unknownStateFilters: ["Bogus"],
      transactionStates: [{ transactionalId: "a", producerId: a.producerId, transactionState: "Ongoing" }],
    });
    expect(names(await h.coordinator.list([], [b.producerId], -1))).toEqual(["b"]);
    expect(names(await h.coordinator.list(["Ongoing"], [], 4_999))).toEqual(["a"]);
    expect(names(await h.coordinator.list(["Ongoing"], [], 5_000))).toEqual([]);
    expect(await h.coordinator.describe("a")).toEqual({
      errorCode: ErrorCode.NONE,
      transactionalId: "a",
      transactionState: "Ongoing",
      transactionTimeoutMs: 60_000,
      transactionStartTimeMs: startMs,
      producerId: a.producerId,
      producerEpoch: a.producerEpoch,
      topics: [
        { topic: "orders", partitions: [0, 2] },
        { topic: "t2", partitions: [1] },
      ],
    });
    expect((await h.coordinator.describe("b")).transactionStartTimeMs).toBe(-1);
    expect((await h.coordinator.describe("")).errorCode).toBe(ErrorCode.INVALID_REQUEST);
  });

  test("a failed (non-fatal) state write answers NOT_COORDINATOR and changes nothing", async () => {
    const h = await setup();
    const p = await init(h, "tx");
    h.fs.failNextWrite(`${DATA}/__cluster/txn_state`);
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) })).toBe(ErrorCode.NOT_COORDINATOR);
    expect((await h.store.get("tx"))?.state).toBe("Empty");
    expect(h.coordinator.verifier.verifyBatch(p.producerId, p.producerEpoch, "orders", 0)).toBe("not-in-transaction");
    expect(await h.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) })).toBe(ErrorCode.NONE);
  });
});

describe("slot take-over (cluster mode)", () => {
  const owned = (epoch: number): Standing => ({ state: "owned", epoch });

  async function clusterBroker(fs: MemoryFs, clock: ManualClock, selfId: number, beforeWrite?: FakePartitions["beforeWrite"]) {
    const ownership = new FakeOwnership(selfId);
    for (let slot = 0; slot < 50; slot++) ownership.txnStandings.set(slot, { state: "elsewhere", brokerId: -1 });
    return setup({ fs, clock, ownership, cluster: true, ...(beforeWrite === undefined ? {} : { beforeWrite }) });
  }

  async function take(h: Harness, slot: number, epoch: number): Promise<void> {
    h.ownership.txnStandings.set(slot, { state: "loading", epoch });
    await h.coordinator.acquireSlot(slot, epoch);
    h.ownership.txnStandings.set(slot, owned(epoch));
  }

  async function hand(h: Harness, slot: number, to: number): Promise<void> {
    h.ownership.txnStandings.set(slot, { state: "leaving", epoch: 0 });
    await h.coordinator.releaseSlot(slot);
    h.ownership.txnStandings.set(slot, { state: "elsewhere", brokerId: to });
  }

  test("no slot is served before it is acquired; loading answers COORDINATOR_LOAD_IN_PROGRESS", async () => {
    const fs = new MemoryFs();
    const a = await clusterBroker(fs, new ManualClock(), 0);
    const slot = slotOf("tx");
    const request = { transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 };
    expect((await a.coordinator.initProducerId(request)).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    a.ownership.txnStandings.set(slot, { state: "loading", epoch: 1 });
    expect((await a.coordinator.initProducerId(request)).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    // Owned, and not loaded yet (the take-over has not run): still loading.
    a.ownership.txnStandings.set(slot, owned(1));
    expect((await a.coordinator.describe("tx")).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect(a.store.isLoaded(slot)).toBe(false);
    await a.coordinator.acquireSlot(slot, 1);
    expect((await a.coordinator.initProducerId(request)).errorCode).toBe(ErrorCode.NONE);
    a.ownership.txnStandings.set(slot, { state: "leaving", epoch: 1 });
    expect((await a.coordinator.describe("tx")).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
  });

  test("B takes over what A wrote: A's transactions, its verifier index, and A's Prepare* completed at B's epoch", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    // A cannot write markers: its decision stays PrepareCommit.
    const a = await clusterBroker(fs, clock, 0, () => {
      throw new Error("partition unavailable");
    });
    const slots = [slotOf("tx"), slotOf("open")];
    for (const slot of new Set(slots)) await take(a, slot, 1);
    const p = await init(a, "tx");
    await a.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    await a.coordinator.addOffsets({ ...ref("tx", p), groupId: "g" });
    expect((await a.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    await a.coordinator.settled();
    expect((await a.store.get("tx"))?.state).toBe("PrepareCommit");
    const q = await init(a, "open");
    await a.coordinator.addPartitions({ ...ref("open", q), partitions: orders(3) });
    for (const slot of new Set(slots)) await hand(a, slot, 1);
    expect(a.coordinator.verifier.verifyBatch(q.producerId, q.producerEpoch, "orders", 3)).toBe("unknown-producer");
    expect(await a.coordinator.addPartitions({ ...ref("open", q), partitions: orders(4) })).toBe(ErrorCode.NOT_COORDINATOR);

    const b = await clusterBroker(fs, clock, 1);
    expect(b.coordinator.verifier.verifyBatch(q.producerId, q.producerEpoch, "orders", 3)).toBe("unknown-producer");
    for (const slot of new Set(slots)) await take(b, slot, 2);
    expect((await b.store.get("tx"))?.state).toBe("CompleteCommit");
    expect(b.events).toEqual([`offsets commit g ${p.producerId}`, `marker orders-0 commit epoch=${p.producerEpoch}`]);
    expect(b.partitions.written[0]?.marker.coordinatorEpoch).toBe(2);
    expect(b.coordinator.verifier.verifyBatch(q.producerId, q.producerEpoch, "orders", 3)).toBe("in-transaction");
    expect((await b.coordinator.describe("open")).transactionState).toBe("Ongoing");
    expect((await b.coordinator.endTxn({ ...ref("open", q), commit: false })).errorCode).toBe(ErrorCode.NONE);
    await b.coordinator.settled();
    expect((await b.store.get("open"))?.state).toBe("CompleteAbort");
  });

  test("release waits for the work in flight on the slot's ids, and a later acquire reads the disk again", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    let releaseMarker!: () => void;
    const markerHeld = new Promise<void>((resolve) => (releaseMarker = resolve));
    const a = await clusterBroker(fs, clock, 0, () => markerHeld);
    const slot = slotOf("tx");
    await take(a, slot, 1);
    const p = await init(a, "tx");
    await a.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    expect((await a.coordinator.endTxn({ ...ref("tx", p), commit: true })).errorCode).toBe(ErrorCode.NONE);
    let released = false;
    const releasing = hand(a, slot, 1).then(() => (released = true));
    // The answered EndTxn's marker and Complete* are still to come: the release waits for them.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(released).toBe(false);
    expect(a.store.isLoaded(slot)).toBe(true);
    releaseMarker();
    await releasing;
    expect(a.store.isLoaded(slot)).toBe(false);
    const b = await clusterBroker(fs, clock, 1);
    await take(b, slot, 2);
    expect((await b.store.get("tx"))?.state).toBe("CompleteCommit");
    // B moves on; A, taking the slot back, sees B's change rather than its own memory.
    const again = await init(b, "tx");
    await hand(b, slot, 0);
    await take(a, slot, 3);
    expect((await a.coordinator.describe("tx")).producerEpoch).toBe(again.producerEpoch);
  });

  test("the reaper, the reconcile pass and the expiry run only on slots owned here", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await clusterBroker(fs, clock, 0);
    const slot = slotOf("tx");
    await take(a, slot, 1);
    const p = await init(a, "tx");
    await a.coordinator.addPartitions({ ...ref("tx", p), partitions: orders(0) });
    clock.advance(61_000);
    a.ownership.txnStandings.set(slot, { state: "leaving", epoch: 1 });
    expect(await a.coordinator.abortTimedOutTransactions()).toBe(0);
    clock.advance(8 * DAY_MS);
    expect(await a.coordinator.expireTransactionalIds()).toBe(0);
    expect((await a.store.get("tx"))?.state).toBe("Ongoing");
    a.ownership.txnStandings.set(slot, owned(1));
    expect(await a.coordinator.abortTimedOutTransactions()).toBe(1);
  });
});
