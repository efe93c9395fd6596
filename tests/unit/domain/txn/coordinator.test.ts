import { describe, expect, test } from "bun:test";
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";
import {
  TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
  TRANSACTION_MAX_TIMEOUT_MS_DEFAULT,
  abortTimedOut,
  addOffsets,
  addPartitions,
  completeTxn,
  endTxn,
  expire,
  initProducerId,
  initProducerIdAnswer,
  isTimedOut,
  needsNewProducerId,
  recoveryEffects,
  rewriteForVersion,
  verifyPartitions,
  type InitProducerIdInput,
  type TxnDecision,
} from "../../../../src/domain/txn/coordinator.ts";
import type { TxnEntry, TxnState } from "../../../../src/domain/txn/txn-state.ts";
import { txnEntryIn } from "../../../support/txn-entry.ts";

const T0 = 1_700_000_000_000;
const NOW = T0 + 1_000;
const PID = 1000;
const NEW_PID = 2000;
const limits = { transactionMaxTimeoutMs: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT };
const {
  NONE,
  INVALID_REQUEST,
  PRODUCER_FENCED,
  INVALID_TXN_STATE,
  INVALID_PRODUCER_ID_MAPPING,
  INVALID_TRANSACTION_TIMEOUT,
  CONCURRENT_TRANSACTIONS,
  COORDINATOR_LOAD_IN_PROGRESS,
  TRANSACTION_ABORTABLE,
  INVALID_PRODUCER_EPOCH,
  COORDINATOR_NOT_AVAILABLE,
} = ErrorCode;

type Where = "absent" | TxnState;
const ALL: Where[] = ["absent", "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"];

/** An entry in `state` at PID/epoch 5 (last epoch 4); in a transaction over t-0, t-1 and group g when one is open. */
function entryIn(state: Where, overrides: Partial<TxnEntry> = {}): TxnEntry | undefined {
  if (state === "absent") return undefined;
  return txnEntryIn(state, { producerId: PID, ongoingSinceMs: state === "Empty" ? -1 : T0, updatedMs: T0, ...overrides });
}

function allocator(pid = NEW_PID) {
  const calls = { count: 0 };
  const allocate = () => {
    calls.count += 1;
    return pid;
  };
  return { calls, allocate };
}

function init(entry: TxnEntry | undefined, request: Partial<InitProducerIdInput> = {}, pid = NEW_PID) {
  const { calls, allocate } = allocator(pid);
  const decision = initProducerId(entry, { transactionalId: "tx", timeoutMs: 30_000, producerId: -1, producerEpoch: -1, ...request }, allocate, limits, NOW);
  return { decision, allocations: calls.count };
}

/** A decision with nothing to do: the answer only, with the input entry untouched. */
function expectNoWrite(decision: TxnDecision, input: TxnEntry | undefined, errorCode: number): void {
  expect(decision.errorCode).toBe(errorCode);
  expect(decision.write).toBe(false);
  expect(decision.entry).toBe(input);
  expect(decision.effects).toEqual({ fence: undefined, offsets: undefined, markers: undefined, completeAfterMarkers: false });
}

/** The fence-and-abort of an open transaction at epoch 5: PrepareAbort at 6, abort markers, offsets discarded. */
function expectFencedAbort(decision: TxnDecision, errorCode: number, nowMs = NOW): void {
  expect(decision.errorCode).toBe(errorCode);
  expect(decision.write).toBe(true);
  expect(decision.entry).toMatchObject({ state: "PrepareAbort", producerId: PID, epoch: 6, lastEpoch: -1, partitions: [{ topic: "t", partitions: [0, 1] }], groups: ["g"] });
  expect(decision.effects).toEqual({
    fence: { producerId: PID, epoch: 6 },
    offsets: { action: "discard", producerId: PID, groups: ["g"] },
    // The fence (at nowMs) and the decision are two transitions: the decision is stamped a millisecond later.
    markers: { result: "abort", producerId: PID, producerEpoch: 6, coordinatorEpoch: 0, partitions: [{ topic: "t", partitions: [0, 1] }], decidedMs: nowMs + 1 },
    completeAfterMarkers: true,
  });
  expect(decision.entry?.updatedMs).toBe(nowMs + 1);
}

// ---- InitProducerId ----------------------------------------------------------------------------

describe("InitProducerId without a caller producer id (v0-v2, or a new producer)", () => {
  const expectations: Record<Where, (d: TxnDecision, input: TxnEntry | undefined, allocations: number) => void> = {
    absent: (d, _i, allocations) => {
      expect(d.errorCode).toBe(NONE);
      expect(d.write).toBe(true);
      expect(d.entry).toMatchObject({ state: "Empty", producerId: NEW_PID, epoch: 0, lastEpoch: -1, timeoutMs: 30_000, ongoingSinceMs: -1, updatedMs: NOW });
      expect(d.effects.fence).toBeUndefined();
      expect(allocations).toBe(1);
    },
    Empty: (d, _i, allocations) => {
      expect(d.errorCode).toBe(NONE);
      expect(d.entry).toMatchObject({ state: "Empty", producerId: PID, epoch: 6, lastEpoch: -1, timeoutMs: 30_000 });
      expect(d.effects.fence).toEqual({ producerId: PID, epoch: 6 });
      expect(allocations).toBe(0);
    },
    Ongoing: (d) => expectFencedAbort(d, CONCURRENT_TRANSACTIONS),
    PrepareCommit: (d, i) => expectNoWrite(d, i, CONCURRENT_TRANSACTIONS),
    PrepareAbort: (d, i) => expectNoWrite(d, i, CONCURRENT_TRANSACTIONS),
    CompleteCommit: (d) => {
      expect(d.errorCode).toBe(NONE);
      expect(d.entry).toMatchObject({ state: "Empty", epoch: 6, lastEpoch: -1, partitions: [], groups: [], ongoingSinceMs: -1 });
      expect(d.effects.fence).toEqual({ producerId: PID, epoch: 6 });
    },
    CompleteAbort: (d) => {
      expect(d.errorCode).toBe(NONE);
      expect(d.entry).toMatchObject({ state: "Empty", epoch: 6, lastEpoch: -1 });
    },
    PrepareEpochFence: (d, i) => expectNoWrite(d, i, INVALID_TXN_STATE),
    Dead: (d, i) => expectNoWrite(d, i, INVALID_TXN_STATE),
  };
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const { decision, allocations } = init(input);
      expectations[where](decision, input, allocations);
    });
  }
});

describe("InitProducerId v3+ with the caller's current (producerId, epoch)", () => {
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const { decision } = init(input, { producerId: PID, producerEpoch: 5 });
      switch (where) {
        case "absent":
          // Apache: a new entry has no epoch yet, so any caller id is accepted and a new id handed out.
          expect(decision.errorCode).toBe(NONE);
          expect(decision.entry).toMatchObject({ producerId: NEW_PID, epoch: 0, lastEpoch: -1 });
          break;
        case "Empty":
        case "CompleteCommit":
        case "CompleteAbort":
          // A producer recovering (KIP-360): bumped, and its epoch remembered so its retry gets the bump.
          expect(decision.errorCode).toBe(NONE);
          expect(decision.entry).toMatchObject({ state: "Empty", producerId: PID, epoch: 6, lastEpoch: 5 });
          expect(decision.effects.fence).toEqual({ producerId: PID, epoch: 6 });
          break;
        case "Ongoing":
          expectFencedAbort(decision, CONCURRENT_TRANSACTIONS);
          break;
        case "PrepareCommit":
        case "PrepareAbort":
          expectNoWrite(decision, input, CONCURRENT_TRANSACTIONS);
          break;
        default:
          expectNoWrite(decision, input, INVALID_TXN_STATE);
      }
    });
  }
});

describe("InitProducerId v3+ retrying with the previous epoch (its answer was lost)", () => {
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const { decision } = init(input, { producerId: PID, producerEpoch: 4 });
      switch (where) {
        case "absent":
          expect(decision.entry).toMatchObject({ producerId: NEW_PID, epoch: 0 });
          break;
        case "Empty":
        case "CompleteCommit":
        case "CompleteAbort":
          // The current epoch again, without a bump and without fencing anything.
          expect(decision.errorCode).toBe(NONE);
          expect(decision.entry).toMatchObject({ state: "Empty", producerId: PID, epoch: 5, lastEpoch: 4 });
          expect(decision.effects.fence).toBeUndefined();
          expect(initProducerIdAnswer(decision)).toEqual({ errorCode: NONE, producerId: PID, producerEpoch: 5 });
          break;
        case "Ongoing":
          expectFencedAbort(decision, CONCURRENT_TRANSACTIONS);
          break;
        case "PrepareCommit":
        case "PrepareAbort":
          expectNoWrite(decision, input, CONCURRENT_TRANSACTIONS);
          break;
        default:
          expectNoWrite(decision, input, INVALID_TXN_STATE);
      }
    });
  }
});

describe("InitProducerId v3+ with a stale epoch or another producer id", () => {
  for (const where of ALL) {
    test(`stale epoch in ${where}`, () => {
      const input = entryIn(where);
      const { decision } = init(input, { producerId: PID, producerEpoch: 3 });
      if (where === "absent") expect(decision.errorCode).toBe(NONE);
      else if (where === "Ongoing") expectFencedAbort(decision, CONCURRENT_TRANSACTIONS); // Apache checks no epoch here
      else if (where === "PrepareCommit" || where === "PrepareAbort") expectNoWrite(decision, input, CONCURRENT_TRANSACTIONS);
      else if (where === "PrepareEpochFence" || where === "Dead") expectNoWrite(decision, input, INVALID_TXN_STATE);
      else expectNoWrite(decision, input, PRODUCER_FENCED);
    });
    test(`another producer id in ${where}`, () => {
      const input = entryIn(where);
      const { decision } = init(input, { producerId: 999, producerEpoch: 5 });
      if (where === "absent") expect(decision.errorCode).toBe(NONE);
      else expectNoWrite(decision, input, PRODUCER_FENCED);
    });
  }
});

describe("InitProducerId request checks", () => {
  test("a timeout above transaction.max.timeout.ms, zero or negative is INVALID_TRANSACTION_TIMEOUT, before any allocation", () => {
    for (const timeoutMs of [TRANSACTION_MAX_TIMEOUT_MS_DEFAULT + 1, 0, -1, 2_147_483_647]) {
      for (const where of ALL) {
        const input = entryIn(where);
        const { decision, allocations } = init(input, { timeoutMs });
        expectNoWrite(decision, input, INVALID_TRANSACTION_TIMEOUT);
        expect(allocations).toBe(0);
      }
    }
    expect(init(undefined, { timeoutMs: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT }).decision.errorCode).toBe(NONE);
    expect(init(undefined, { timeoutMs: 1 }).decision.errorCode).toBe(NONE);
  });

  test("the timeout limit is the configured one", () => {
    const decision = initProducerId(undefined, { transactionalId: "tx", timeoutMs: 5_000, producerId: -1, producerEpoch: -1 }, () => 1, { transactionMaxTimeoutMs: 4_000 }, NOW);
    expect(decision.errorCode).toBe(INVALID_TRANSACTION_TIMEOUT);
  });

  test("an empty transactional id, or only one of producer id and epoch, is INVALID_REQUEST", () => {
    expect(init(undefined, { transactionalId: "" }).decision.errorCode).toBe(INVALID_REQUEST);
    expect(init(entryIn("Empty"), { producerId: PID, producerEpoch: -1 }).decision.errorCode).toBe(INVALID_REQUEST);
    expect(init(entryIn("Empty"), { producerId: -1, producerEpoch: 5 }).decision.errorCode).toBe(INVALID_REQUEST);
  });

  test("no producer id available right now is COORDINATOR_LOAD_IN_PROGRESS (retriable), nothing written", () => {
    const request = { transactionalId: "tx", timeoutMs: 30_000, producerId: -1, producerEpoch: -1 };
    expectNoWrite(initProducerId(undefined, request, () => undefined, limits, NOW), undefined, COORDINATOR_LOAD_IN_PROGRESS);
    const exhausted = entryIn("Empty", { epoch: 32_766 });
    expectNoWrite(initProducerId(exhausted, request, () => undefined, limits, NOW), exhausted, COORDINATOR_LOAD_IN_PROGRESS);
  });

  test("the timeout of a rejoin replaces the old one; an open transaction keeps its timeout while it is aborted", () => {
    expect(init(entryIn("Empty"), { timeoutMs: 123_000 }).decision.entry?.timeoutMs).toBe(123_000);
    expect(init(entryIn("Ongoing"), { timeoutMs: 123_000 }).decision.entry?.timeoutMs).toBe(60_000);
  });
});

describe("epoch exhaustion", () => {
  test("a bump may reach 32766; the next InitProducerId rotates to a new producer id at epoch 0", () => {
    const atLimit = init(entryIn("Empty", { epoch: 32_765, lastEpoch: -1 })).decision;
    expect(atLimit.entry).toMatchObject({ producerId: PID, epoch: 32_766 });

    const { decision, allocations } = init(atLimit.entry);
    expect(allocations).toBe(1);
    expect(decision.errorCode).toBe(NONE);
    expect(decision.entry).toMatchObject({ state: "Empty", producerId: NEW_PID, epoch: 0, lastProducerId: PID, lastEpoch: -1 });
    // The old id is never used again; its zombies are fenced one epoch up.
    expect(decision.effects.fence).toEqual({ producerId: PID, epoch: 32_767 });
  });

  test("a v3+ caller at the exhausted epoch rotates, and its retry with the old id gets the new id back", () => {
    const exhausted = entryIn("CompleteCommit", { epoch: 32_766, lastEpoch: 32_765 });
    const rotated = init(exhausted, { producerId: PID, producerEpoch: 32_766 }).decision;
    expect(rotated.entry).toMatchObject({ producerId: NEW_PID, epoch: 0, lastProducerId: PID, lastEpoch: 32_766 });

    const { decision, allocations } = init(rotated.entry, { producerId: PID, producerEpoch: 32_766 }, 3000);
    expect(allocations).toBe(0);
    expect(initProducerIdAnswer(decision)).toEqual({ errorCode: NONE, producerId: NEW_PID, producerEpoch: 0 });
    expect(decision.effects.fence).toBeUndefined();
  });

  test("the old id at a non-exhausted epoch is fenced after a rotation", () => {
    const rotated = entryIn("Empty", { producerId: NEW_PID, epoch: 0, lastProducerId: PID, lastEpoch: 32_766 });
    expectNoWrite(init(rotated, { producerId: PID, producerEpoch: 32_765 }).decision, rotated, PRODUCER_FENCED);
  });

  test("a retry with the previous epoch at an exhausted epoch is answered, not a crash (Apache throws here)", () => {
    const exhausted = entryIn("Empty", { epoch: 32_766, lastEpoch: 32_765 });
    const { decision, allocations } = init(exhausted, { producerId: PID, producerEpoch: 32_765 });
    expect(allocations).toBe(0);
    expect(initProducerIdAnswer(decision)).toEqual({ errorCode: NONE, producerId: PID, producerEpoch: 32_766 });
    expectNoWrite(init(exhausted, { producerId: PID, producerEpoch: 100 }).decision, exhausted, PRODUCER_FENCED);
  });

  test("fencing an open transaction at 32766 uses 32767; the next InitProducerId rotates", () => {
    const fenced = init(entryIn("Ongoing", { epoch: 32_766 })).decision;
    expect(fenced.entry).toMatchObject({ state: "PrepareAbort", epoch: 32_767 });
    const completed = completeTxn(fenced.entry, NOW).entry;
    expect(completed).toMatchObject({ state: "CompleteAbort", epoch: 32_767 });
    const { decision } = init(completed);
    expect(decision.entry).toMatchObject({ producerId: NEW_PID, epoch: 0 });
    expect(decision.effects.fence).toEqual({ producerId: PID, epoch: 32_767 });
  });
});

describe("needsNewProducerId", () => {
  const request = { transactionalId: "tx", timeoutMs: 30_000, producerId: -1, producerEpoch: -1 };
  test("is true exactly when initProducerId would allocate", () => {
    expect(needsNewProducerId(undefined, request, limits, NOW)).toBe(true);
    expect(needsNewProducerId(entryIn("Empty"), request, limits, NOW)).toBe(false);
    expect(needsNewProducerId(entryIn("Ongoing"), request, limits, NOW)).toBe(false);
    expect(needsNewProducerId(entryIn("Empty", { epoch: 32_766 }), request, limits, NOW)).toBe(true);
    expect(needsNewProducerId(undefined, { ...request, timeoutMs: 0 }, limits, NOW)).toBe(false);
  });
});

describe("a new session fences and aborts the old session's open transaction", () => {
  test("CONCURRENT_TRANSACTIONS while the abort completes, then the retry gets a second bump", () => {
    const ongoing = entryIn("Ongoing")!;
    const first = init(ongoing).decision;
    expectFencedAbort(first, CONCURRENT_TRANSACTIONS);
    expect(initProducerIdAnswer(first)).toEqual({ errorCode: CONCURRENT_TRANSACTIONS, producerId: -1, producerEpoch: -1 });

    // The old session is fenced at once, whatever it sends.
    expectNoWrite(addPartitions(first.entry, { transactionalId: "tx", producerId: PID, producerEpoch: 5, partitions: [{ topic: "t", partitions: [2] }] }, NOW), first.entry, PRODUCER_FENCED);
    expectNoWrite(endTxn(first.entry, { transactionalId: "tx", producerId: PID, producerEpoch: 5, commit: true }, NOW), first.entry, PRODUCER_FENCED);

    // The client retries while the markers are being written.
    expectNoWrite(init(first.entry).decision, first.entry, CONCURRENT_TRANSACTIONS);

    const done = completeTxn(first.entry, NOW, { producerId: PID, producerEpoch: 6, result: "abort" });
    expect(done.entry).toMatchObject({ state: "CompleteAbort", epoch: 6, partitions: [], groups: [] });

    const retry = init(done.entry).decision;
    expect(initProducerIdAnswer(retry)).toEqual({ errorCode: NONE, producerId: PID, producerEpoch: 7 });
    expect(retry.effects.fence).toEqual({ producerId: PID, epoch: 7 });
  });
});

// ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

describe("AddPartitionsToTxn", () => {
  const request = { transactionalId: "tx", producerId: PID, producerEpoch: 5, partitions: [{ topic: "t", partitions: [2] }] };
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const d = addPartitions(input, request, NOW);
      switch (where) {
        case "absent":
          expectNoWrite(d, input, INVALID_PRODUCER_ID_MAPPING);
          break;
        case "Empty":
        case "CompleteCommit":
        case "CompleteAbort":
          expect(d.errorCode).toBe(NONE);
          expect(d.write).toBe(true);
          expect(d.entry).toMatchObject({ state: "Ongoing", partitions: [{ topic: "t", partitions: [2] }], ongoingSinceMs: NOW, updatedMs: NOW });
          expect(d.effects.completeAfterMarkers).toBe(false);
          break;
        case "Ongoing":
          expect(d.errorCode).toBe(NONE);
          expect(d.write).toBe(true);
          // Added to the open transaction, which keeps its start (the timeout counts from it).
          expect(d.entry).toMatchObject({ state: "Ongoing", partitions: [{ topic: "t", partitions: [0, 1, 2] }], groups: ["g"], ongoingSinceMs: T0 });
          break;
        case "PrepareCommit":
        case "PrepareAbort":
          expectNoWrite(d, input, CONCURRENT_TRANSACTIONS);
          break;
        default:
          expectNoWrite(d, input, INVALID_TXN_STATE);
      }
    });
    test(`with another producer id or epoch in ${where}`, () => {
      const input = entryIn(where);
      if (input === undefined) return;
      expectNoWrite(addPartitions(input, { ...request, producerId: 999 }, NOW), input, INVALID_PRODUCER_ID_MAPPING);
      expectNoWrite(addPartitions(input, { ...request, producerEpoch: 4 }, NOW), input, PRODUCER_FENCED);
      expectNoWrite(addPartitions(input, { ...request, producerEpoch: 6 }, NOW), input, PRODUCER_FENCED);
    });
  }

  test("partitions already in the open transaction: NONE without a write", () => {
    const input = entryIn("Ongoing");
    expectNoWrite(addPartitions(input, { ...request, partitions: [{ topic: "t", partitions: [1, 0] }] }, NOW), input, NONE);
  });

  test("partitions are stored normalized, whatever order and duplicates the request has", () => {
    const d = addPartitions(entryIn("Empty"), { ...request, partitions: [{ topic: "u", partitions: [3, 1, 3] }, { topic: "a", partitions: [0] }] }, NOW);
    expect(d.entry?.partitions).toEqual([
      { topic: "a", partitions: [0] },
      { topic: "u", partitions: [1, 3] },
    ]);
  });

  test("an empty transactional id is INVALID_REQUEST", () => {
    expect(addPartitions(entryIn("Empty"), { ...request, transactionalId: "" }, NOW).errorCode).toBe(INVALID_REQUEST);
  });
});

describe("AddOffsetsToTxn", () => {
  const request = { transactionalId: "tx", producerId: PID, producerEpoch: 5, groupId: "h" };
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const d = addOffsets(input, request, NOW);
      switch (where) {
        case "absent":
          expectNoWrite(d, input, INVALID_PRODUCER_ID_MAPPING);
          break;
        case "Empty":
        case "CompleteCommit":
        case "CompleteAbort":
          expect(d.errorCode).toBe(NONE);
          expect(d.entry).toMatchObject({ state: "Ongoing", groups: ["h"], partitions: [], ongoingSinceMs: NOW });
          break;
        case "Ongoing":
          expect(d.entry).toMatchObject({ state: "Ongoing", groups: ["g", "h"], ongoingSinceMs: T0 });
          break;
        case "PrepareCommit":
        case "PrepareAbort":
          expectNoWrite(d, input, CONCURRENT_TRANSACTIONS);
          break;
        default:
          expectNoWrite(d, input, INVALID_TXN_STATE);
      }
    });
    test(`with another producer id or epoch in ${where}`, () => {
      const input = entryIn(where);
      if (input === undefined) return;
      expectNoWrite(addOffsets(input, { ...request, producerId: 999 }, NOW), input, INVALID_PRODUCER_ID_MAPPING);
      expectNoWrite(addOffsets(input, { ...request, producerEpoch: 4 }, NOW), input, PRODUCER_FENCED);
    });
  }

  test("a group already in the open transaction: NONE without a write", () => {
    const input = entryIn("Ongoing");
    expectNoWrite(addOffsets(input, { ...request, groupId: "g" }, NOW), input, NONE);
  });
});

describe("verifyPartitions (AddPartitionsToTxn v4+ verifyOnly)", () => {
  const request = { transactionalId: "tx", producerId: PID, producerEpoch: 5, partitions: [{ topic: "t", partitions: [0, 2] }] };
  const codes = (where: Where, overrides: Partial<typeof request> = {}) =>
    verifyPartitions(entryIn(where), { ...request, ...overrides }).map((p) => `${p.topic}-${p.partition}:${p.errorCode}`);
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const expected: Record<Where, string[]> = {
        absent: [`t-0:${INVALID_PRODUCER_ID_MAPPING}`, `t-2:${INVALID_PRODUCER_ID_MAPPING}`],
        Empty: [`t-0:${TRANSACTION_ABORTABLE}`, `t-2:${TRANSACTION_ABORTABLE}`],
        Ongoing: [`t-0:${NONE}`, `t-2:${TRANSACTION_ABORTABLE}`],
        PrepareCommit: [`t-0:${CONCURRENT_TRANSACTIONS}`, `t-2:${CONCURRENT_TRANSACTIONS}`],
        PrepareAbort: [`t-0:${CONCURRENT_TRANSACTIONS}`, `t-2:${CONCURRENT_TRANSACTIONS}`],
        CompleteCommit: [`t-0:${TRANSACTION_ABORTABLE}`, `t-2:${TRANSACTION_ABORTABLE}`],
        CompleteAbort: [`t-0:${TRANSACTION_ABORTABLE}`, `t-2:${TRANSACTION_ABORTABLE}`],
        PrepareEpochFence: [`t-0:${NONE}`, `t-2:${TRANSACTION_ABORTABLE}`],
        Dead: [`t-0:${TRANSACTION_ABORTABLE}`, `t-2:${TRANSACTION_ABORTABLE}`],
      };
      expect(codes(where)).toEqual(expected[where]);
      if (where !== "absent") {
        expect(codes(where, { producerEpoch: 4 })).toEqual([`t-0:${PRODUCER_FENCED}`, `t-2:${PRODUCER_FENCED}`]);
        expect(codes(where, { producerId: 1 })).toEqual([`t-0:${INVALID_PRODUCER_ID_MAPPING}`, `t-2:${INVALID_PRODUCER_ID_MAPPING}`]);
      }
    });
  }
});

// ---- EndTxn ------------------------------------------------------------------------------------

for (const commit of [true, false]) {
  const direction = commit ? "commit" : "abort";
  const prepared: TxnState = commit ? "PrepareCommit" : "PrepareAbort";
  const oppositePrepared: TxnState = commit ? "PrepareAbort" : "PrepareCommit";
  const completed: TxnState = commit ? "CompleteCommit" : "CompleteAbort";
  const oppositeCompleted: TxnState = commit ? "CompleteAbort" : "CompleteCommit";
  const request = { transactionalId: "tx", producerId: PID, producerEpoch: 5, commit };

  describe(`EndTxn(${direction})`, () => {
    for (const where of ALL) {
      test(`in ${where}`, () => {
        const input = entryIn(where);
        const d = endTxn(input, request, NOW);
        if (where === "absent") return expectNoWrite(d, input, INVALID_PRODUCER_ID_MAPPING);
        if (where === "Ongoing") {
          // The decision, persisted with the partitions and groups it is about.
          expect(d.errorCode).toBe(NONE);
          expect(d.write).toBe(true);
          expect(d.entry).toMatchObject({ state: prepared, epoch: 5, partitions: [{ topic: "t", partitions: [0, 1] }], groups: ["g"], ongoingSinceMs: T0 });
          expect(d.effects).toEqual({
            fence: undefined,
            offsets: { action: commit ? "commit" : "discard", producerId: PID, groups: ["g"] },
            markers: { result: direction, producerId: PID, producerEpoch: 5, coordinatorEpoch: 0, partitions: [{ topic: "t", partitions: [0, 1] }], decidedMs: NOW },
            completeAfterMarkers: true,
          });
          return;
        }
        if (where === prepared) return expectNoWrite(d, input, CONCURRENT_TRANSACTIONS);
        if (where === completed) return expectNoWrite(d, input, NONE);
        // Empty, the opposite direction, and the never-persisted states.
        expect([oppositePrepared, oppositeCompleted, "Empty", "PrepareEpochFence", "Dead"]).toContain(where);
        expectNoWrite(d, input, INVALID_TXN_STATE);
      });
      test(`with another producer id or epoch in ${where}`, () => {
        const input = entryIn(where);
        if (input === undefined) return;
        expectNoWrite(endTxn(input, { ...request, producerId: 999 }, NOW), input, INVALID_PRODUCER_ID_MAPPING);
        expectNoWrite(endTxn(input, { ...request, producerEpoch: 4 }, NOW), input, PRODUCER_FENCED);
        expectNoWrite(endTxn(input, { ...request, producerEpoch: 6 }, NOW), input, PRODUCER_FENCED);
      });
    }

    test("the coordinator epoch goes into the markers", () => {
      expect(endTxn(entryIn("Ongoing"), request, NOW, 17).effects.markers?.coordinatorEpoch).toBe(17);
    });

    test("a transaction with only offsets has no markers; one with only partitions has no offset hook", () => {
      const offsetsOnly = endTxn(entryIn("Ongoing", { partitions: [] }), request, NOW);
      expect(offsetsOnly.effects.markers).toBeUndefined();
      expect(offsetsOnly.effects.offsets?.groups).toEqual(["g"]);
      expect(offsetsOnly.effects.completeAfterMarkers).toBe(true);
      const partitionsOnly = endTxn(entryIn("Ongoing", { groups: [] }), request, NOW);
      expect(partitionsOnly.effects.offsets).toBeUndefined();
      expect(partitionsOnly.effects.markers?.partitions).toEqual([{ topic: "t", partitions: [0, 1] }]);
    });
  });
}

describe("completeTxn (EndTxn phase two)", () => {
  for (const where of ALL) {
    test(`in ${where}`, () => {
      const input = entryIn(where);
      const d = completeTxn(input, NOW);
      if (where === "absent") return expectNoWrite(d, input, INVALID_PRODUCER_ID_MAPPING);
      if (where === "PrepareCommit" || where === "PrepareAbort") {
        expect(d.errorCode).toBe(NONE);
        expect(d.write).toBe(true);
        expect(d.entry).toMatchObject({
          state: where === "PrepareCommit" ? "CompleteCommit" : "CompleteAbort",
          partitions: [],
          groups: [],
          epoch: 5,
          ongoingSinceMs: T0,
          updatedMs: NOW,
        });
        return;
      }
      if (where === "CompleteCommit" || where === "CompleteAbort") return expectNoWrite(d, input, NONE);
      expectNoWrite(d, input, INVALID_TXN_STATE);
    });
  }

  test("completes only the expected transaction", () => {
    const prepared = entryIn("PrepareCommit");
    expect(completeTxn(prepared, NOW, { producerId: PID, producerEpoch: 5, result: "commit" }).write).toBe(true);
    expectNoWrite(completeTxn(prepared, NOW, { producerId: PID, producerEpoch: 5, result: "abort" }), prepared, INVALID_TXN_STATE);
    expectNoWrite(completeTxn(prepared, NOW, { producerId: PID, producerEpoch: 4, result: "commit" }), prepared, PRODUCER_FENCED);
    expectNoWrite(completeTxn(prepared, NOW, { producerId: 1, producerEpoch: 5, result: "commit" }), prepared, INVALID_PRODUCER_ID_MAPPING);
    const done = entryIn("CompleteCommit");
    expectNoWrite(completeTxn(done, NOW, { producerId: PID, producerEpoch: 5, result: "commit" }), done, NONE);
  });

  test("recoveryEffects re-derives the finishing effects of an entry found in Prepare*", () => {
    const decided = endTxn(entryIn("Ongoing"), { transactionalId: "tx", producerId: PID, producerEpoch: 5, commit: true }, NOW, 3);
    expect(recoveryEffects(decided.entry!, 3)).toEqual(decided.effects);
    expect(recoveryEffects(entryIn("PrepareAbort")!)?.markers?.result).toBe("abort");
    expect(recoveryEffects(entryIn("Ongoing")!)).toBeUndefined();
    expect(recoveryEffects(entryIn("CompleteCommit")!)).toBeUndefined();
  });
});

describe("a whole transaction, twice", () => {
  test("add partitions, add offsets, commit, complete; the next transaction starts afresh", () => {
    let entry = init(undefined).decision.entry;
    const ref = { transactionalId: "tx", producerId: NEW_PID, producerEpoch: 0 };
    entry = addPartitions(entry, { ...ref, partitions: [{ topic: "t", partitions: [0] }] }, T0 + 10).entry;
    entry = addOffsets(entry, { ...ref, groupId: "g" }, T0 + 20).entry;
    expect(entry).toMatchObject({ state: "Ongoing", ongoingSinceMs: T0 + 10 });
    const decided = endTxn(entry, { ...ref, commit: true }, T0 + 30);
    expect(decided.effects.offsets?.action).toBe("commit");
    entry = completeTxn(decided.entry, T0 + 40).entry;
    expect(entry).toMatchObject({ state: "CompleteCommit", partitions: [], groups: [], ongoingSinceMs: T0 + 10 });
    // A retried EndTxn after completion succeeds without doing anything.
    expectNoWrite(endTxn(entry, { ...ref, commit: true }, T0 + 50), entry, NONE);
    entry = addPartitions(entry, { ...ref, partitions: [{ topic: "u", partitions: [1] }] }, T0 + 60).entry;
    expect(entry).toMatchObject({ state: "Ongoing", partitions: [{ topic: "u", partitions: [1] }], ongoingSinceMs: T0 + 60 });
  });

  test("each decision of one producer id and epoch is stamped later than the one before, whatever the clock says", () => {
    // Transaction version 1 keeps the id and epoch across transactions; the decision time tells them apart
    // (it names the queued markers of each one), so it must differ even when the clock stands still or
    // steps back.
    let entry = init(undefined).decision.entry;
    const ref = { transactionalId: "tx", producerId: NEW_PID, producerEpoch: 0 };
    const decidedAt: number[] = [];
    for (const [i, clockMs] of [NOW, NOW, NOW, NOW - 500].entries()) {
      entry = addPartitions(entry, { ...ref, partitions: [{ topic: "t", partitions: [0] }] }, clockMs).entry;
      const decided = endTxn(entry, { ...ref, commit: i % 2 === 0 }, clockMs);
      expect(decided.effects.markers?.decidedMs).toBe(decided.entry!.updatedMs);
      decidedAt.push(decided.entry!.updatedMs);
      entry = completeTxn(decided.entry, clockMs).entry;
    }
    expect(decidedAt).toEqual([NOW + 1, NOW + 2, NOW + 3, NOW + 4]);
    // With the clock ahead of the last transition, the decision takes the clock's time.
    entry = addPartitions(entry, { ...ref, partitions: [{ topic: "t", partitions: [0] }] }, NOW + 50).entry;
    expect(endTxn(entry, { ...ref, commit: true }, NOW + 100).entry?.updatedMs).toBe(NOW + 100);
  });
});

// ---- timeouts and expiry -----------------------------------------------------------------------

describe("abortTimedOut", () => {
  const late = T0 + 60_001;
  for (const where of ALL) {
    test(`in ${where}, past the timeout`, () => {
      const input = entryIn(where);
      const d = abortTimedOut(input, late);
      if (where === "Ongoing") expectFencedAbort(d, NONE, late);
      else expectNoWrite(d, input, NONE);
    });
  }

  test("not before start + timeout is strictly passed (Apache's rule)", () => {
    const input = entryIn("Ongoing")!;
    expect(isTimedOut(input, T0 + 60_000)).toBe(false);
    expectNoWrite(abortTimedOut(input, T0 + 60_000), input, NONE);
    expect(isTimedOut(input, T0 + 60_001)).toBe(true);
  });

  test("the timed-out producer is fenced: its EndTxn answers PRODUCER_FENCED", () => {
    const aborted = abortTimedOut(entryIn("Ongoing"), late).entry;
    expectNoWrite(endTxn(aborted, { transactionalId: "tx", producerId: PID, producerEpoch: 5, commit: true }, late), aborted, PRODUCER_FENCED);
    expect(completeTxn(aborted, late).entry).toMatchObject({ state: "CompleteAbort", epoch: 6 });
  });
});

describe("expire", () => {
  const at = T0 + TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT;
  for (const where of ALL) {
    test(`in ${where}, idle for transactional.id.expiration.ms`, () => {
      const input = entryIn(where);
      const d = expire(input, at);
      if (where === "Empty" || where === "CompleteCommit" || where === "CompleteAbort") {
        expect(d).toMatchObject({ errorCode: NONE, write: true, entry: undefined });
      } else {
        expectNoWrite(d, input, NONE);
      }
    });
  }

  test("not a millisecond earlier, and with a configured expiration", () => {
    const input = entryIn("Empty");
    expectNoWrite(expire(input, at - 1), input, NONE);
    expect(expire(input, T0 + 10, 10).write).toBe(true);
  });
});

// ---- error codes by version --------------------------------------------------------------------

describe("rewriteForVersion", () => {
  test("PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for clients that predate it", () => {
    for (let v = 0; v <= 5; v++) expect(rewriteForVersion(22, v, PRODUCER_FENCED)).toBe(v < 4 ? INVALID_PRODUCER_EPOCH : PRODUCER_FENCED);
    for (const key of [24, 25, 26]) {
      for (let v = 0; v <= 5; v++) expect(rewriteForVersion(key, v, PRODUCER_FENCED)).toBe(v < 2 ? INVALID_PRODUCER_EPOCH : PRODUCER_FENCED);
    }
  });

  test("Produce and TxnOffsetCommit never answer PRODUCER_FENCED", () => {
    for (let v = 0; v <= 11; v++) expect(rewriteForVersion(0, v, PRODUCER_FENCED)).toBe(INVALID_PRODUCER_EPOCH);
    for (let v = 0; v <= 4; v++) expect(rewriteForVersion(28, v, PRODUCER_FENCED)).toBe(INVALID_PRODUCER_EPOCH);
  });

  test("TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for Produce < v11 and TxnOffsetCommit < v4", () => {
    for (let v = 0; v <= 11; v++) expect(rewriteForVersion(0, v, TRANSACTION_ABORTABLE)).toBe(v < 11 ? INVALID_TXN_STATE : TRANSACTION_ABORTABLE);
    for (let v = 0; v <= 4; v++) expect(rewriteForVersion(28, v, TRANSACTION_ABORTABLE)).toBe(v < 4 ? INVALID_TXN_STATE : TRANSACTION_ABORTABLE);
  });

  test("COORDINATOR_LOAD_IN_PROGRESS becomes COORDINATOR_NOT_AVAILABLE for TxnOffsetCommit < v2", () => {
    for (let v = 0; v <= 4; v++) {
      expect(rewriteForVersion(28, v, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)).toBe(v < 2 ? COORDINATOR_NOT_AVAILABLE : ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    }
  });

  test("everything else is unchanged", () => {
    for (const key of [0, 22, 24, 25, 26, 28, 1, 3]) {
      for (const code of [NONE, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH]) {
        expect(rewriteForVersion(key, 0, code)).toBe(code);
      }
    }
    expect(rewriteForVersion(3, 0, PRODUCER_FENCED)).toBe(PRODUCER_FENCED);
  });
});
