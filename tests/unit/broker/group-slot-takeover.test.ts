/**
 * Group coordinator slots that move between brokers (cluster mode, `loadAllSlotsAtStart: false`): two
 * coordinators on one in-memory data directory hand a slot over with releaseSlot / acquireSlot, and the
 * new owner serves what the old one committed (plain and transactional offsets, the group's record); the
 * old owner answers NOT_COORDINATOR, its parked JoinGroup included, and writes nothing more to the slot; a
 * damaged slot is refused; a transaction whose group slot moved away before its EndTxn stays decided and
 * is retried, its offsets kept staged, rather than completed on a slot this broker no longer has.
 */
import { describe, expect, test } from "bun:test";
import { GroupCoordinator } from "../../../src/broker/group-coordinator.ts";
import { TxnCoordinator } from "../../../src/broker/txn-coordinator.ts";
import { SingleBrokerOwnership, slotOf } from "../../../src/cluster/ownership.ts";
import type { JoinGroupInput } from "../../../src/domain/groups/group-coordinator-state.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger, type Logger } from "../../../src/platform/logger.ts";
import { FenceLogWriter } from "../../../src/storage/fence-log.ts";
import { MarkerQueue } from "../../../src/storage/marker-queue.ts";
import { offsetsJournalPathAt, SlotNotLoadedError } from "../../../src/storage/offset-store.ts";
import { ProducerIdStore } from "../../../src/storage/producer-id-store.ts";
import { TxnStateStore } from "../../../src/storage/txn-state-store.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { groupSlotOwnership } from "../../support/group-slot-ownership.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const GROUP = "g";
const SLOT = slotOf(GROUP);
/** Another group of SLOT. */
const NEIGHBOUR = (() => {
  for (let i = 0; ; i++) if (slotOf(`neighbour-${i}`) === SLOT) return `neighbour-${i}`;
})();
/** A group in another slot, which stays served while SLOT moves. */
const OTHER = (() => {
  for (let i = 0; ; i++) if (slotOf(`other-${i}`) !== SLOT) return `other-${i}`;
})();

const clusterOwnership = groupSlotOwnership;

interface Broker {
  ownership: ReturnType<typeof clusterOwnership>;
  groups: GroupCoordinator;
}

async function clusterBroker(fs: MemoryFs, clock: ManualClock, selfId: number, log: Logger = silentLogger): Promise<Broker> {
  const ownership = clusterOwnership(selfId);
  const groups = await GroupCoordinator.open({ fs, clock, log, dataDir: DATA, ownership, options: { sweep: false, loadAllSlotsAtStart: false } });
  return { ownership, groups };
}

async function take(b: Broker, slot: number, epoch: number): Promise<void> {
  b.ownership.groupStandings.set(slot, { state: "loading", epoch });
  await b.groups.acquireSlot(slot, epoch);
  b.ownership.groupStandings.set(slot, { state: "owned", epoch });
}

async function hand(b: Broker, slot: number, to: number): Promise<void> {
  const standing = b.ownership.groupStandings.get(slot);
  b.ownership.groupStandings.set(slot, { state: "leaving", epoch: standing?.state === "owned" ? standing.epoch : 0 });
  await b.groups.releaseSlot(slot);
  b.ownership.groupStandings.set(slot, { state: "elsewhere", brokerId: to });
}

/** OffsetCommit of a group without members (generation -1), as admin tools and simple consumers send. */
function commit(b: Broker, groupId: string, topic: string, partition: number, offset: number): Promise<number[]> {
  return b.groups.commitOffsets({
    groupId,
    memberId: "",
    groupInstanceId: null,
    generationId: -1,
    retentionTimeMs: -1,
    apiVersion: 8,
    partitions: [{ topic, partition, offset, leaderEpoch: 0, metadata: "m", commitTimestampMs: -1 }],
  });
}

async function committed(b: Broker, groupId: string, topic: string, partition: number, requireStable = false): Promise<{ errorCode: number; offset?: number; partitionError?: number }> {
  const answer = await b.groups.fetchOffsets(groupId, [{ name: topic, partitions: [partition] }], requireStable);
  const p = answer.topics[0]?.partitions[0];
  return p === undefined ? { errorCode: answer.errorCode } : { errorCode: answer.errorCode, offset: p.offset, partitionError: p.errorCode };
}

function join(groupId: string): JoinGroupInput {
  return {
    groupId,
    memberId: "",
    groupInstanceId: null,
    protocolType: "consumer",
    protocols: [{ name: "range", metadata: new Uint8Array([1]) }],
    sessionTimeoutMs: 10_000,
    rebalanceTimeoutMs: 10_000,
    clientId: "c",
    clientHost: "/127.0.0.1",
    // v3: no MEMBER_ID_REQUIRED round trip, so the first JoinGroup parks in the initial rebalance delay.
    apiVersion: 3,
  };
}

/** Stages offsets of `producerId` as TxnOffsetCommit does, then completes them as EndTxn's offset hook does. */
async function transactionalCommit(b: Broker, producerId: number, topic: string, partition: number, offset: number, complete: boolean): Promise<void> {
  expect(b.groups.validateTransactionalOffsetCommit({ groupId: GROUP, memberId: "", groupInstanceId: null, generationId: -1, apiVersion: 3 })).toBe(ErrorCode.NONE);
  expect(await b.groups.stageTransactionalOffsets(GROUP, producerId, [{ topic, partition, offset, leaderEpoch: 0, metadata: null }])).toEqual([ErrorCode.NONE]);
  if (complete) expect(await b.groups.completeTransactionalOffsets(GROUP, producerId, true)).toBe(1);
}

describe("group slot take-over (cluster mode)", () => {
  test("B serves what A committed before the hand-over; A answers NOT_COORDINATOR and writes nothing more", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await clusterBroker(fs, clock, 0);
    const b = await clusterBroker(fs, clock, 1);
    // Owned but not taken over yet: loading, not an empty group.
    a.ownership.groupStandings.set(SLOT, { state: "owned", epoch: 1 });
    expect((await committed(a, GROUP, "t", 0)).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect(a.groups.store.isLoaded(SLOT)).toBe(false);
    await take(a, SLOT, 1);
    expect(await commit(a, GROUP, "t", 0, 10)).toEqual([ErrorCode.NONE]);
    await transactionalCommit(a, 7, "t", 1, 20, true);
    // A transaction still open at the hand-over: its staged offset moves with the slot.
    await transactionalCommit(a, 8, "t", 2, 30, false);
    expect(a.groups.describeGroup(GROUP).group?.groupState).toBe("Empty");

    await hand(a, SLOT, 1);
    expect(a.groups.servesSlot(SLOT)).toBe(false);
    expect(a.groups.store.isLoaded(SLOT)).toBe(false);
    expect(a.groups.state.hasGroup(GROUP)).toBe(false);
    expect((await committed(a, GROUP, "t", 0)).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect(a.groups.describeGroup(GROUP).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    expect(await commit(a, GROUP, "t", 0, 99)).toEqual([ErrorCode.NOT_COORDINATOR]);

    expect((await committed(b, GROUP, "t", 0)).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    await take(b, SLOT, 2);
    expect(await committed(b, GROUP, "t", 0)).toEqual({ errorCode: ErrorCode.NONE, offset: 10, partitionError: ErrorCode.NONE });
    expect(await committed(b, GROUP, "t", 1)).toEqual({ errorCode: ErrorCode.NONE, offset: 20, partitionError: ErrorCode.NONE });
    expect(await committed(b, GROUP, "t", 2, true)).toMatchObject({ errorCode: ErrorCode.NONE, partitionError: ErrorCode.UNSTABLE_OFFSET_COMMIT });
    expect(b.groups.describeGroup(GROUP)).toMatchObject({ errorCode: ErrorCode.NONE, group: { groupState: "Empty" } });
    expect(b.groups.listGroups([], []).map((g) => g.groupId)).toEqual([GROUP]);
    // The open transaction's offsets complete on B, the slot's owner now.
    expect(await b.groups.completeTransactionalOffsets(GROUP, 8, true)).toBe(1);
    expect((await committed(b, GROUP, "t", 2, true)).offset).toBe(30);

    // A's writes to the slot are refused, never made on an empty slot of its own over B's files.
    // (B writes the files of its epoch 2; A wrote those of epoch 1.)
    const journals = async () => [await fs.readFile(offsetsJournalPathAt(DATA, SLOT, 1)), await fs.readFile(offsetsJournalPathAt(DATA, SLOT, 2))];
    const before = await journals();
    await expect(a.groups.store.mutate(SLOT, (d) => d.deleteGroup(GROUP))).rejects.toBeInstanceOf(SlotNotLoadedError);
    await expect(a.groups.completeTransactionalOffsets(GROUP, 8, false)).rejects.toThrow(/not served by this broker/);
    expect(await journals()).toEqual(before);

    // Back to A at epoch 3: it reads B's writes from the files, not its own memory.
    expect(await commit(b, GROUP, "t", 0, 11)).toEqual([ErrorCode.NONE]);
    await hand(b, SLOT, 0);
    await take(a, SLOT, 3);
    expect((await committed(a, GROUP, "t", 0)).offset).toBe(11);
    expect((await committed(a, GROUP, "t", 2)).offset).toBe(30);
    await a.groups.close();
    await b.groups.close();
  });

  test("a member parked in JoinGroup is answered NOT_COORDINATOR when its slot is released; other slots' groups go on", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await clusterBroker(fs, clock, 0);
    await take(a, SLOT, 1);
    await take(a, slotOf(OTHER), 1);
    const answers: string[] = [];
    // A commit's write in flight, so that the record of the group the JoinGroup creates is queued behind it.
    const committing = commit(a, NEIGHBOUR, "t", 0, 10);
    // One turn of the microtask queue: the slot's writer (started on the next microtask) has taken the
    // commit and is writing it, so the record change below waits for the next write.
    await Promise.resolve();
    expect(a.groups.store.writesOf(SLOT)).toBe(0);
    const moving = a.groups.joinGroup(join(GROUP)).then((o) => answers.push(`${GROUP} ${o.errorCode}`));
    const staying = a.groups.joinGroup(join(OTHER)).then((o) => answers.push(`${OTHER} ${o.errorCode}`));
    expect(answers).toEqual([]);
    await hand(a, SLOT, 1);
    expect(await committing).toEqual([ErrorCode.NONE]);
    await moving;
    expect(answers).toEqual([`${GROUP} ${ErrorCode.NOT_COORDINATOR}`]);
    // The moved group's timers are gone; the other group's join completes when its delay is over.
    clock.advance(a.groups.state.config.initialRebalanceDelayMs + 1);
    a.groups.runDueTimers();
    await staying;
    expect(answers).toEqual([`${GROUP} ${ErrorCode.NOT_COORDINATOR}`, `${OTHER} ${ErrorCode.NONE}`]);
    expect(a.groups.state.hasGroup(GROUP)).toBe(false);
    // The writes queued before the release (the commit, then the group record the join changed) reached
    // the files: the record read the group before it left memory.
    const b = await clusterBroker(fs, clock, 1);
    await take(b, SLOT, 2);
    expect(b.groups.describeGroup(GROUP)).toMatchObject({ errorCode: ErrorCode.NONE, group: { groupState: "Empty", protocolType: "consumer" } });
    expect((await committed(b, NEIGHBOUR, "t", 0)).offset).toBe(10);
    await a.groups.close();
    await b.groups.close();
  });

  test("a follower parked in SyncGroup is answered NOT_COORDINATOR when its slot is released", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await clusterBroker(fs, clock, 0);
    await take(a, SLOT, 1);
    let answered = 0;
    const joins = [a.groups.joinGroup(join(GROUP)), a.groups.joinGroup(join(GROUP))].map((p) => p.finally(() => (answered += 1)));
    // The initial rebalance delay is extended while members keep joining; a few steps of it end the phase.
    for (let step = 0; step < 10 && answered < 2; step++) {
      clock.advance(a.groups.state.config.initialRebalanceDelayMs + 1);
      a.groups.runDueTimers();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const joined = await Promise.all(joins);
    expect(joined.map((j) => j.errorCode)).toEqual([ErrorCode.NONE, ErrorCode.NONE]);
    const follower = joined.find((j) => j.memberId !== j.leader)!;
    let synced: number | undefined;
    const syncing = a.groups
      .syncGroup({ groupId: GROUP, memberId: follower.memberId, generationId: follower.generationId, groupInstanceId: null, protocolType: "consumer", protocolName: follower.protocolName, assignments: [] })
      .then((o) => (synced = o.errorCode));
    await new Promise<void>((resolve) => setImmediate(resolve));
    // The leader has not sent its assignment: the follower waits.
    expect(synced).toBeUndefined();
    await hand(a, SLOT, 1);
    await syncing;
    expect(synced).toBe(ErrorCode.NOT_COORDINATOR);
    expect(a.groups.timerCount).toBe(0);
    await a.groups.close();
  });

  test("a slot whose files are damaged is refused with CorruptStateError and not served", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await clusterBroker(fs, clock, 0);
    await take(a, SLOT, 1);
    expect(await commit(a, GROUP, "t", 0, 10)).toEqual([ErrorCode.NONE]);
    expect(await commit(a, GROUP, "t", 0, 11)).toEqual([ErrorCode.NONE]);
    await hand(a, SLOT, 1);
    const path = offsetsJournalPathAt(DATA, SLOT, 1);
    const text = new TextDecoder().decode(await fs.readFile(path));
    const at = text.indexOf('"offset":10') + '"offset":'.length;
    const handle = await fs.open(path, "rw");
    await handle.write(new TextEncoder().encode("7"), at);
    await handle.close();

    const b = await clusterBroker(fs, clock, 1);
    b.ownership.groupStandings.set(SLOT, { state: "loading", epoch: 2 });
    const error = await b.groups.acquireSlot(SLOT, 2).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CorruptStateError);
    expect(b.groups.servesSlot(SLOT)).toBe(false);
    expect(b.groups.store.isLoaded(SLOT)).toBe(false);
    // Even marked owned, the slot is not served as an empty one.
    b.ownership.groupStandings.set(SLOT, { state: "owned", epoch: 2 });
    expect((await committed(b, GROUP, "t", 0)).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect(await commit(b, GROUP, "t", 0, 12)).toEqual([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]);
    expect(b.groups.state.hasGroup(GROUP)).toBe(false);
    await b.groups.close();
    await a.groups.close();
  });

  test("EndTxn after the group slot moved away: the transaction stays decided and is retried, its offsets kept staged", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const warnings: string[] = [];
    const log: Logger = { ...silentLogger, warn: (message, fields) => warnings.push(`${message} ${JSON.stringify(fields)}`) };
    const a = await clusterBroker(fs, clock, 0, log);
    const b = await clusterBroker(fs, clock, 1);
    await take(a, SLOT, 1);
    // A's transaction coordinator owns every transaction slot; its offset hook is A's group coordinator.
    const txnStore = await TxnStateStore.open(fs, DATA, { slotOf });
    const producerIds = await ProducerIdStore.open(fs, DATA, 0, { log: () => undefined });
    const queue = new MarkerQueue(fs, DATA);
    const txn = new TxnCoordinator({
      store: txnStore,
      allocateProducerId: () => producerIds.allocate(),
      ownership: a.ownership,
      partitions: { writeMarker: async () => ({ ok: true, offset: 0 }), fenceProducer: () => undefined },
      offsets: a.groups,
      fenceLog: await FenceLogWriter.open(fs, DATA, 0),
      markerQueue: { enqueue: (brokerId, markers) => queue.enqueue(brokerId, markers) },
      clock,
      log,
      options: { transactionMaxTimeoutMs: 900_000, timers: false },
    });
    await txn.start();
    await txn.whenReady();
    const init = await txn.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    const ref = { transactionalId: "tx", producerId: init.producerId, producerEpoch: init.producerEpoch };
    const transaction = async (offset: number) => {
      expect(await txn.addPartitions({ ...ref, partitions: [{ topic: "orders", partitions: [0] }] })).toBe(ErrorCode.NONE);
      expect(await txn.addOffsets({ ...ref, groupId: GROUP })).toBe(ErrorCode.NONE);
      const staged = await txn.withVerifiedGroup(ref, GROUP, () => a.groups.stageTransactionalOffsets(GROUP, ref.producerId, [{ topic: "t", partition: 0, offset, leaderEpoch: 0, metadata: null }]));
      expect(staged).toEqual({ errorCode: ErrorCode.NONE, value: [ErrorCode.NONE] });
    };
    // A first transaction completes while A has the group: its offsets move with the slot.
    await transaction(5);
    expect((await txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await txn.settled();
    expect((await txnStore.get("tx"))?.state).toBe("CompleteCommit");
    // The second one's offsets are staged on A's slot, which moves to B before the EndTxn.
    await transaction(6);
    await hand(a, SLOT, 1);
    await take(b, SLOT, 2);
    expect((await txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await txn.settled();
    // Not completed on a slot A no longer has, and not reported complete: decided, and said so.
    expect((await txnStore.get("tx"))?.state).toBe("PrepareCommit");
    expect(warnings.some((w) => w.includes("not served by this broker"))).toBe(true);
    expect(await committed(b, GROUP, "t", 0)).toMatchObject({ offset: 5 });
    expect(await committed(b, GROUP, "t", 0, true)).toMatchObject({ partitionError: ErrorCode.UNSTABLE_OFFSET_COMMIT });
    expect(await txn.completeUnfinished()).toBe(0);
    // Once A owns the group slot again, the reconcile pass completes the transaction there.
    await hand(b, SLOT, 0);
    await take(a, SLOT, 3);
    expect(await txn.completeUnfinished()).toBe(1);
    expect((await txnStore.get("tx"))?.state).toBe("CompleteCommit");
    expect(await committed(a, GROUP, "t", 0, true)).toMatchObject({ offset: 6, partitionError: ErrorCode.NONE });
    await txn.close();
    await a.groups.close();
    await b.groups.close();
  });

  test("load-all mode (single-broker) serves every slot from open and does not release one", async () => {
    const fs = new MemoryFs();
    const groups = await GroupCoordinator.open({ fs, clock: new ManualClock(), log: silentLogger, dataDir: DATA, ownership: new SingleBrokerOwnership(0, "127.0.0.1", 9092), options: { sweep: false } });
    expect(groups.servesSlot(SLOT)).toBe(true);
    expect(groups.store.isLoaded(SLOT)).toBe(true);
    await groups.acquireSlot(SLOT, 1);
    await expect(groups.releaseSlot(SLOT)).rejects.toThrow(/loadAllSlotsAtStart/);
    expect(groups.servesSlot(SLOT)).toBe(true);
    await groups.close();
  });
});
