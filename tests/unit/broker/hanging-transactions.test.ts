/**
 * The hanging-transaction detector on a manual clock and manual timers, over fake entries and partitions:
 * its timer runs passes with nobody asking, each hanging transaction is logged once (and once more when it
 * is gone), the stuck-LSO grace, what accounts for a lagging LSO, and `check()` as the readers' fresh pass.
 */
import { describe, expect, test } from "bun:test";
import { HangingTransactionDetector, LSO_STUCK_GRACE_MS_DEFAULT, type WatchedPartition } from "../../../src/broker/hanging-transactions.ts";
import { isTimedOut } from "../../../src/domain/txn/coordinator.ts";
import type { TxnEntry } from "../../../src/domain/txn/txn-state.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";
import { txnEntryIn } from "../../support/txn-entry.ts";

function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const log: Logger = {
    debug() {},
    info: (message) => void lines.push(`info ${message}`),
    warn: (message) => void lines.push(`warn ${message}`),
    error: (message) => void lines.push(`error ${message}`),
  };
  return { log, lines };
}

/** A partition whose LSO is held by `holder`'s open transaction from `firstOffset` (none: not held). */
function partition(topic: string, index: number, hw: number, lso: number, holder?: { producerId: number; firstOffset: number }): WatchedPartition {
  return {
    topic,
    partition: index,
    highWatermark: hw,
    lastStableOffset: lso,
    producers: { producerIdsWhere: (keep) => (holder !== undefined && keep(holder.producerId, holder.firstOffset) ? [holder.producerId] : []) },
    openTransactionOf: (producerId) => (holder !== undefined && producerId === holder.producerId ? holder.firstOffset : undefined),
  };
}

function setup(entries: TxnEntry[], partitions: WatchedPartition[]) {
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const { log, lines } = recordingLogger();
  const state = { entries, partitions };
  const detector = new HangingTransactionDetector({
    entries: async () => state.entries,
    openPartitions: async () => state.partitions,
    clock,
    timers,
    log,
    intervalMs: 1_000,
  });
  return { clock, timers, lines, state, detector };
}

describe("HangingTransactionDetector", () => {
  test("its timer finds a timed-out transaction with nobody asking, logs it once, and once more when it is gone", async () => {
    const { clock, timers, lines, state, detector } = setup([], []);
    const startMs = clock.nowMs();
    state.entries = [txnEntryIn("Ongoing", { transactionalId: "slow", ongoingSinceMs: startMs, updatedMs: startMs, timeoutMs: 5_000 })];
    detector.start();
    await timers.advance(5_000);
    expect(lines).toEqual([]); // start + timeout == now is not past it (Apache's strict rule)
    await timers.advance(1_000);
    expect(detector.latest?.warnings.map((w) => [w.kind, w.transactionalId])).toEqual([["timed-out-transaction", "slow"]]);
    expect(lines).toEqual(['warn possibly hanging transaction: transaction "slow" (producer 4000, epoch 5) has been Ongoing for 6s, past its timeout of 5s']);
    // Still there on the next passes: not logged again.
    await timers.advance(3_000);
    expect(lines).toHaveLength(1);
    // Aborted (the reaper): gone, said once.
    state.entries = [txnEntryIn("CompleteAbort", { transactionalId: "slow" })];
    await timers.advance(1_000);
    expect(lines).toEqual([expect.stringContaining("warn possibly hanging"), "info a possibly hanging transaction is no longer seen"]);
    expect(detector.latest?.warnings).toEqual([]);
    await detector.stop();
    expect(timers.pending).toBe(0);
  });

  test("the one definition of timed out is the domain's, the reaper's", async () => {
    const nowMs = 1_700_000_010_000;
    const entry = txnEntryIn("Ongoing", { ongoingSinceMs: nowMs - 10_001, timeoutMs: 10_000 });
    const { detector, state, clock } = setup([entry], []);
    clock.setNowMs(nowMs);
    expect(isTimedOut(entry, nowMs)).toBe(true);
    expect((await detector.check()).warnings).toHaveLength(1);
    state.entries = [{ ...entry, ongoingSinceMs: nowMs - 10_000 }];
    expect(isTimedOut(state.entries[0]!, nowMs)).toBe(false);
    expect((await detector.check()).warnings).toEqual([]);
  });

  test("a lagging LSO held by a producer nothing accounts for is a warning after the grace, measured from the first pass that saw it", async () => {
    const { clock, lines, state, detector } = setup([], [partition("orders", 1, 5, 2, { producerId: 999, firstOffset: 2 })]);
    expect((await detector.check()).warnings).toEqual([]);
    clock.advance(LSO_STUCK_GRACE_MS_DEFAULT - 1);
    expect((await detector.check()).warnings).toEqual([]);
    clock.advance(1);
    const [warning] = (await detector.check()).warnings;
    expect(warning).toMatchObject({ kind: "stuck-lso", topic: "orders", partition: 1, transactionalId: null });
    expect(warning!.message).toBe(
      "orders-1: the last stable offset has stayed at 2, 3 behind the high watermark, for 30s; producer 999's transaction from offset 2 is open here and no open transaction of this coordinator accounts for it",
    );
    expect(lines).toHaveLength(1);
    // The LSO moves: the clock starts again.
    state.partitions = [partition("orders", 1, 6, 3, { producerId: 999, firstOffset: 3 })];
    expect((await detector.check()).warnings).toEqual([]);
    expect(lines.at(-1)).toBe("info a possibly hanging transaction is no longer seen");
  });

  test("an Ongoing transaction of this coordinator accounts for the LSO it holds; a decision only within the grace", async () => {
    const { clock, state, detector } = setup([], [partition("t", 0, 5, 2, { producerId: 4000, firstOffset: 2 })]);
    const nowMs = clock.nowMs();
    state.entries = [txnEntryIn("Ongoing", { ongoingSinceMs: nowMs, updatedMs: nowMs, timeoutMs: 3_600_000 })];
    await detector.check();
    clock.advance(60_000);
    expect((await detector.check()).warnings).toEqual([]);
    state.entries = [txnEntryIn("PrepareCommit", { ongoingSinceMs: nowMs, updatedMs: clock.nowMs(), timeoutMs: 3_600_000 })];
    expect((await detector.check()).warnings).toEqual([]);
    clock.advance(LSO_STUCK_GRACE_MS_DEFAULT);
    expect((await detector.check()).warnings.map((w) => w.kind)).toEqual(["stuck-lso"]);
  });

  test("counts by state (every stored state listed) and the oldest Ongoing age", async () => {
    const { clock, state, detector } = setup([], []);
    const nowMs = clock.nowMs();
    state.entries = [
      txnEntryIn("Ongoing", { transactionalId: "a", ongoingSinceMs: nowMs - 4_000, timeoutMs: 60_000 }),
      txnEntryIn("Ongoing", { transactionalId: "b", ongoingSinceMs: nowMs - 9_000, timeoutMs: 60_000 }),
      txnEntryIn("Empty", { transactionalId: "c" }),
    ];
    const result = await detector.check();
    expect(result.byState).toEqual({ Empty: 1, Ongoing: 2, PrepareCommit: 0, PrepareAbort: 0, CompleteCommit: 0, CompleteAbort: 0 });
    expect(result.oldestOngoingAgeMs).toBe(9_000);
  });
});
