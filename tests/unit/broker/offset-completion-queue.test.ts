/**
 * Transactional offsets completed by the group slot's owner (cluster mode): a transaction coordinator on
 * broker A decides a transaction whose group slot broker B serves; the completion is queued durably for the
 * slot (storage/offset-queue.ts) before Complete*, B applies it once (woken, polled, or when it takes the
 * slot over) and removes the file; require_stable answers UNSTABLE_OFFSET_COMMIT until it is applied; a
 * crash of either side at any point completes the transaction's offsets exactly once, never the producer's
 * next transaction's; a damaged queued file keeps the slot unserved and is named.
 */
import { describe, expect, test } from "bun:test";
import { GroupCoordinator } from "../../../src/broker/group-coordinator.ts";
import { TxnCoordinator, type TxnOffsetHook } from "../../../src/broker/txn-coordinator.ts";
import { SingleBrokerOwnership, slotOf, type Ownership} from "../../../src/cluster/ownership.ts";
import type { WakeTarget, Waker } from "../../../src/cluster/waker.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger, type Logger } from "../../../src/platform/logger.ts";
import { FenceLogWriter } from "../../../src/storage/fence-log.ts";
import { MarkerQueue } from "../../../src/storage/marker-queue.ts";
import { OffsetCompletionQueue } from "../../../src/storage/offset-queue.ts";
import { offsetsDir } from "../../../src/storage/offset-store.ts";
import { ProducerIdStore } from "../../../src/storage/producer-id-store.ts";
import { TxnStateStore } from "../../../src/storage/txn-state-store.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { groupSlotOwnership } from "../../support/group-slot-ownership.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { waitUntil } from "../../support/wait.ts";

const DATA = "/data";
const GROUP = "g";
const SLOT = slotOf(GROUP);
/** A second group of the same slot, and one of another slot. */
const SIBLING = (() => {
  for (let i = 0; ; i++) if (slotOf(`sibling-${i}`) === SLOT) return `sibling-${i}`;
})();

const clusterOwnership = groupSlotOwnership;

/** A waker in memory shared by the brokers of a test: every wake-up is recorded and delivered to all. */
class MemoryWakers {
  readonly woken: WakeTarget[] = [];
  private readonly listeners = new Set<(target: WakeTarget) => void>();
  delivering = true;
  readonly waker: Waker = {
    wake: (target) => {
      this.woken.push(target);
      if (this.delivering) for (const l of this.listeners) l(target);
    },
    onWake: (listener) => {
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    },
    close: async () => undefined,
  };
}

interface GroupSide {
  ownership: ReturnType<typeof clusterOwnership>;
  groups: GroupCoordinator;
}

async function groupSide(fs: MemoryFs, clock: ManualClock, selfId: number, opts: { wakers?: MemoryWakers; queue?: OffsetCompletionQueue; log?: Logger } = {}): Promise<GroupSide> {
  const ownership = clusterOwnership(selfId);
  const groups = await GroupCoordinator.open({
    fs,
    clock,
    log: opts.log ?? silentLogger,
    dataDir: DATA,
    ownership,
    options: { sweep: false, loadAllSlotsAtStart: false, offsetQueuePoll: false },
    offsetQueue: opts.queue ?? new OffsetCompletionQueue(fs, DATA),
    ...(opts.wakers === undefined ? {} : { waker: opts.wakers.waker }),
  });
  return { ownership, groups };
}

async function take(b: GroupSide, slot: number, epoch: number): Promise<void> {
  b.ownership.groupStandings.set(slot, { state: "loading", epoch });
  await b.groups.acquireSlot(slot, epoch);
  b.ownership.groupStandings.set(slot, { state: "owned", epoch });
}

async function hand(b: GroupSide, slot: number, to: number): Promise<void> {
  b.ownership.groupStandings.set(slot, { state: "leaving", epoch: 0 });
  await b.groups.releaseSlot(slot);
  b.ownership.groupStandings.set(slot, { state: "elsewhere", brokerId: to });
}

async function committed(b: GroupSide, groupId: string, requireStable = false): Promise<{ errorCode: number; offset?: number; partitionError?: number }> {
  const answer = await b.groups.fetchOffsets(groupId, [{ name: "t", partitions: [0] }], requireStable);
  const p = answer.topics[0]?.partitions[0];
  return p === undefined ? { errorCode: answer.errorCode } : { errorCode: answer.errorCode, offset: p.offset, partitionError: p.errorCode };
}

interface TxnSide {
  txn: TxnCoordinator;
  store: TxnStateStore;
}

async function txnSide(fs: MemoryFs, clock: ManualClock, ownership: Ownership, offsets: TxnOffsetHook, wakers?: MemoryWakers): Promise<TxnSide> {
  const store = await TxnStateStore.open(fs, DATA, { slotOf });
  const producerIds = await ProducerIdStore.open(fs, DATA, 0, { log: () => undefined });
  const queue = new MarkerQueue(fs, DATA);
  const txn = new TxnCoordinator({
    store,
    allocateProducerId: () => producerIds.allocate(),
    ownership,
    partitions: { writeMarker: async () => ({ ok: true, offset: 0 }), fenceProducer: () => undefined },
    offsets,
    fenceLog: await FenceLogWriter.open(fs, DATA, ownership.selfId),
    markerQueue: { enqueue: (brokerId, markers) => queue.enqueue(brokerId, markers) },
    clock,
    log: silentLogger,
    options: { transactionMaxTimeoutMs: 900_000, timers: false },
    ...(wakers === undefined ? {} : { waker: wakers.waker }),
  });
  await txn.start();
  await txn.whenReady();
  return { txn, store };
}

/**
 * A's transaction with offset `offset` for GROUP (and SIBLING when asked) staged while A serves the slot;
 * the slot then moves to B unless it is there already. Returns the producer's reference.
 */
async function stagedOnA(a: GroupSide, t: TxnSide, offset: number, ref?: { transactionalId: string; producerId: number; producerEpoch: number }, groups = [GROUP]) {
  if (ref === undefined) {
    const init = await t.txn.initProducerId({ transactionalId: "tx", timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    ref = { transactionalId: "tx", producerId: init.producerId, producerEpoch: init.producerEpoch };
  }
  const r = ref;
  expect(await t.txn.addPartitions({ ...r, partitions: [{ topic: "orders", partitions: [0] }] })).toBe(ErrorCode.NONE);
  for (const groupId of groups) {
    expect(await t.txn.addOffsets({ ...r, groupId })).toBe(ErrorCode.NONE);
    const staged = await t.txn.withVerifiedGroup(r, groupId, () => a.groups.stageTransactionalOffsets(groupId, r.producerId, [{ topic: "t", partition: 0, offset, leaderEpoch: 0, metadata: null }]));
    expect(staged).toEqual({ errorCode: ErrorCode.NONE, value: [ErrorCode.NONE] });
  }
  return r;
}

describe("offset completions queued for the group slot's owner", () => {
  for (const commit of [true, false]) {
    test(`${commit ? "commit" : "abort"} with the group slot on another broker: queued durably before Complete*, applied once by the owner`, async () => {
      const fs = new MemoryFs();
      const clock = new ManualClock();
      const wakers = new MemoryWakers();
      const a = await groupSide(fs, clock, 0, { wakers });
      const b = await groupSide(fs, clock, 1, { wakers });
      await take(a, SLOT, 1);
      const t = await txnSide(fs, clock, a.ownership, a.groups, wakers);
      // A first transaction completes while A serves the group.
      const ref = await stagedOnA(a, t, 5);
      expect((await t.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
      await t.txn.settled();
      await stagedOnA(a, t, 6, ref, [GROUP, SIBLING]);
      await hand(a, SLOT, 1);
      wakers.delivering = false; // B is not woken yet: the file waits
      await take(b, SLOT, 2);
      await waitUntil(() => b.groups.completionsDrained(SLOT), "B drained the empty queue at take-over");
      expect(await committed(b, GROUP, true)).toMatchObject({ errorCode: ErrorCode.NONE, partitionError: ErrorCode.UNSTABLE_OFFSET_COMMIT });

      expect((await t.txn.endTxn({ ...ref, commit })).errorCode).toBe(ErrorCode.NONE);
      await t.txn.settled();
      // Complete* only once the completion is durable for the slot, one file for both groups of the slot.
      expect((await t.store.get("tx"))?.state).toBe(commit ? "CompleteCommit" : "CompleteAbort");
      const queue = new OffsetCompletionQueue(fs, DATA);
      const files = await queue.list(SLOT);
      expect(files.length).toBe(1);
      expect(await queue.read(files[0]!)).toMatchObject({ producerId: ref.producerId, result: commit ? "commit" : "abort", groups: [GROUP, SIBLING].sort() });
      expect(wakers.woken).toContainEqual({ kind: "group-slot", slot: SLOT });
      // Not applied yet: a plain fetch still sees the previous commit.
      expect(await committed(b, GROUP)).toMatchObject({ offset: 5 });

      // Woken now: B applies it and removes the file.
      wakers.delivering = true;
      wakers.waker.wake({ kind: "group-slot", slot: SLOT });
      await waitUntil(() => b.groups.offsetsSlot(GROUP).committed(GROUP, "t", 0)?.offset === (commit ? 6 : 5) && !b.groups.offsetsSlot(GROUP).hasPendingTransactionalOffset(GROUP, "t", 0), "B applied the completion");
      expect(await queue.list(SLOT)).toEqual([]);
      expect(await committed(b, GROUP, true)).toMatchObject({ offset: commit ? 6 : 5, partitionError: ErrorCode.NONE });
      expect(await committed(b, SIBLING, true)).toMatchObject({ offset: commit ? 6 : -1, partitionError: ErrorCode.NONE });
      // Applying it again (a former owner's copy, a retried decision) changes nothing.
      await queue.enqueue(SLOT, await Promise.resolve({ transactionalId: "tx", producerId: ref.producerId, producerEpoch: ref.producerEpoch, result: commit ? "abort" : "commit", groups: [GROUP], decidedMs: 1 }));
      expect(await b.groups.drainCompletions(SLOT)).toBe(1);
      expect(await committed(b, GROUP, true)).toMatchObject({ offset: commit ? 6 : 5, partitionError: ErrorCode.NONE });
      await t.txn.close();
      await a.groups.close();
      await b.groups.close();
    });
  }

  test("require_stable answers UNSTABLE_OFFSET_COMMIT while the queued completion cannot be applied yet, stable once it is", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const a = await groupSide(fs, clock, 0);
    const b = await groupSide(fs, clock, 1);
    await take(a, SLOT, 1);
    const t = await txnSide(fs, clock, a.ownership, a.groups);
    const ref = await stagedOnA(a, t, 8);
    await hand(a, SLOT, 1);
    await take(b, SLOT, 2);
    await waitUntil(() => b.groups.completionsDrained(SLOT), "B drained at take-over");
    expect((await t.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await t.txn.settled();
    expect((await t.store.get("tx"))?.state).toBe("CompleteCommit");
    // B's slot write fails: the completion stays queued, and the offset stays unstable.
    fs.failNextWrite(offsetsDir(DATA));
    expect(await committed(b, GROUP, true)).toMatchObject({ errorCode: ErrorCode.NONE, partitionError: ErrorCode.UNSTABLE_OFFSET_COMMIT });
    expect(await committed(b, GROUP)).toMatchObject({ offset: -1, partitionError: ErrorCode.NONE });
    expect((await new OffsetCompletionQueue(fs, DATA).list(SLOT)).length).toBe(1);
    fs.clearFaults();
    expect(await committed(b, GROUP, true)).toMatchObject({ offset: 8, partitionError: ErrorCode.NONE });
    expect(await new OffsetCompletionQueue(fs, DATA).list(SLOT)).toEqual([]);
    await t.txn.close();
    await a.groups.close();
    await b.groups.close();
  });

  test("crash after the completion file is durable and before Complete*: after the restart the offsets are completed once, the next transaction's untouched", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    let a = await groupSide(fs, clock, 0);
    let b = await groupSide(fs, clock, 1);
    await take(a, SLOT, 1);
    let crashAfterHandOff = true;
    const offsets: TxnOffsetHook = {
      completeTransactionalOffsets: async (groupId, producerId, commit, txn) => {
        const n = await a.groups.completeTransactionalOffsets(groupId, producerId, commit, txn);
        // The process dies here: the file is durable, Complete* never written.
        if (crashAfterHandOff) throw new Error("simulated crash after the hand-off");
        return n;
      },
    };
    let t = await txnSide(fs, clock, a.ownership, offsets);
    const ref = await stagedOnA(a, t, 6);
    await hand(a, SLOT, 1);
    await take(b, SLOT, 2);
    expect((await t.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await t.txn.settled();
    expect((await t.store.get("tx"))?.state).toBe("PrepareCommit");
    // B applies the hand-off before A's restart.
    expect(await b.groups.drainCompletions(SLOT)).toBe(1);
    expect(await committed(b, GROUP, true)).toMatchObject({ offset: 6, partitionError: ErrorCode.NONE });

    fs.crash();
    crashAfterHandOff = false;
    a = await groupSide(fs, clock, 0);
    b = await groupSide(fs, clock, 1);
    await take(b, SLOT, 3);
    t = await txnSide(fs, clock, a.ownership, offsets);
    // Start-up recovery queued the completion again and completed the transaction.
    expect((await t.store.get("tx"))?.state).toBe("CompleteCommit");
    expect((await new OffsetCompletionQueue(fs, DATA).list(SLOT)).length).toBe(1);
    // The producer's next transaction stages on B (the slot's owner) before B looked at its queue.
    expect(await t.txn.addOffsets({ ...ref, groupId: GROUP })).toBe(ErrorCode.NONE);
    const staged = await t.txn.withVerifiedGroup(ref, GROUP, () => b.groups.stageTransactionalOffsets(GROUP, ref.producerId, [{ topic: "t", partition: 0, offset: 7, leaderEpoch: 0, metadata: null }]));
    expect(staged).toEqual({ errorCode: ErrorCode.NONE, value: [ErrorCode.NONE] });
    // The repeated completion was applied (finding nothing) before that staging, and is gone.
    expect(await new OffsetCompletionQueue(fs, DATA).list(SLOT)).toEqual([]);
    expect(await committed(b, GROUP)).toMatchObject({ offset: 6 });
    expect(await committed(b, GROUP, true)).toMatchObject({ partitionError: ErrorCode.UNSTABLE_OFFSET_COMMIT });
    expect((await t.txn.endTxn({ ...ref, commit: false })).errorCode).toBe(ErrorCode.NONE);
    await t.txn.settled();
    await b.groups.drainCompletions(SLOT);
    expect(await committed(b, GROUP, true)).toMatchObject({ offset: 6, partitionError: ErrorCode.NONE });
    await t.txn.close();
    await a.groups.close();
    await b.groups.close();
  });

  test("the owner crashes after applying a completion and before removing its file: applied again at take-over, nothing changes", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    class FailingRemove extends OffsetCompletionQueue {
      failures = 1;
      override async remove(path: string): Promise<void> {
        if (this.failures-- > 0) throw new Error("simulated crash before the removal");
        return super.remove(path);
      }
    }
    const a = await groupSide(fs, clock, 0);
    let b = await groupSide(fs, clock, 1, { queue: new FailingRemove(fs, DATA) });
    await take(a, SLOT, 1);
    const t = await txnSide(fs, clock, a.ownership, a.groups);
    const ref = await stagedOnA(a, t, 9);
    await hand(a, SLOT, 1);
    await take(b, SLOT, 2);
    await waitUntil(() => b.groups.completionsDrained(SLOT), "B drained at take-over");
    expect((await t.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await t.txn.settled();
    await expect(b.groups.drainCompletions(SLOT)).rejects.toThrow(/before the removal/);
    expect((await new OffsetCompletionQueue(fs, DATA).list(SLOT)).length).toBe(1);
    await t.txn.close();
    await a.groups.close();
    fs.crash();
    b = await groupSide(fs, clock, 1);
    b.ownership.groupStandings.set(SLOT, { state: "loading", epoch: 3 });
    await b.groups.acquireSlot(SLOT, 3);
    b.ownership.groupStandings.set(SLOT, { state: "owned", epoch: 3 });
    await waitUntil(() => b.groups.completionsDrained(SLOT), "B drained at take-over");
    expect(await new OffsetCompletionQueue(fs, DATA).list(SLOT)).toEqual([]);
    expect(await committed(b, GROUP, true)).toMatchObject({ offset: 9, partitionError: ErrorCode.NONE });
    await b.groups.close();
  });

  test("a slot taken over applies what was queued while nobody served it before serving its groups; a damaged file keeps it unserved, named", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const errors: string[] = [];
    const log: Logger = { ...silentLogger, error: (message, fields) => errors.push(`${message} ${JSON.stringify(fields)}`) };
    const a = await groupSide(fs, clock, 0);
    await take(a, SLOT, 1);
    const t = await txnSide(fs, clock, a.ownership, a.groups);
    const ref = await stagedOnA(a, t, 4);
    await hand(a, SLOT, -1);
    expect((await t.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await t.txn.settled();
    expect((await t.store.get("tx"))?.state).toBe("CompleteCommit");
    // A file of another transaction in the same slot is damaged (a torn copy).
    const queue = new OffsetCompletionQueue(fs, DATA);
    const good = (await queue.list(SLOT))[0]!;
    const damaged = good.replace(/\/[^/]*$/, "/0-0-0-commit.json");
    const handle = await fs.open(damaged, "rw");
    await handle.write(new TextEncoder().encode('{"format":"txn-offset-completion","vers'), 0);
    await handle.fsync();
    await handle.close();

    const b = await groupSide(fs, clock, 1, { log });
    await take(b, SLOT, 2);
    await waitUntil(() => errors.length > 0, "the damaged file is reported");
    expect(errors[0]).toContain(damaged);
    expect(b.groups.completionsDrained(SLOT)).toBe(false);
    expect((await committed(b, GROUP)).errorCode).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    // Still queued, neither file taken for empty.
    expect((await queue.list(SLOT)).length).toBe(2);
    // Once the damaged file is dealt with (removed by an operator), the next wake-up serves the slot.
    await fs.unlink(damaged);
    b.groups.wakeSlot(SLOT);
    await waitUntil(() => b.groups.completionsDrained(SLOT), "B drained after the repair");
    expect(await committed(b, GROUP, true)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 4, partitionError: ErrorCode.NONE });
    expect(errors.length).toBe(1);
    await t.txn.close();
    await a.groups.close();
    await b.groups.close();
  });

  test("without a queue the completion is refused while the slot is elsewhere (the fallback)", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const ownership = clusterOwnership(0);
    const groups = await GroupCoordinator.open({ fs, clock, log: silentLogger, dataDir: DATA, ownership, options: { sweep: false, loadAllSlotsAtStart: false } });
    await expect(groups.completeTransactionalOffsets(GROUP, 1, true, { transactionalId: "tx", producerEpoch: 0, decidedMs: 1, groups: [GROUP] })).rejects.toThrow(/not served by this broker/);
    await groups.close();
  });

  test("load-all mode with a queue: what was queued is applied at open, before any group is served", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock();
    const open = () =>
      GroupCoordinator.open({ fs, clock, log: silentLogger, dataDir: DATA, ownership: new SingleBrokerOwnership(0, "127.0.0.1", 9092), options: { sweep: false, offsetQueuePoll: false }, offsetQueue: new OffsetCompletionQueue(fs, DATA) });
    const first = await open();
    expect(await first.stageTransactionalOffsets(GROUP, 9, [{ topic: "t", partition: 0, offset: 12, leaderEpoch: 0, metadata: null }])).toEqual([ErrorCode.NONE]);
    await first.close();
    await new OffsetCompletionQueue(fs, DATA).enqueue(SLOT, { transactionalId: "tx", producerId: 9, producerEpoch: 0, result: "commit", groups: [GROUP], decidedMs: 3 });
    const second = await open();
    expect(second.completionsDrained(SLOT)).toBe(true);
    const answer = await second.fetchOffsets(GROUP, [{ name: "t", partitions: [0] }], false);
    expect(answer.topics[0]!.partitions[0]).toMatchObject({ offset: 12, errorCode: ErrorCode.NONE });
    expect(await new OffsetCompletionQueue(fs, DATA).list(SLOT)).toEqual([]);
    await second.close();
  });
});
