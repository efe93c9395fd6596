import { describe, expect, test } from "bun:test";
import {
  applyAppend,
  applyMarker,
  checkMarker,
  classifyBatch,
  createProducerState,
  expire,
  fenceEpoch,
  inSequence,
  INT32_MAX,
  NO_COORDINATOR_EPOCH,
  NO_TXN_OFFSET,
  ProducerStateScratch,
  type BatchInfo,
  type ProducerStateTable,
  type ProducerStateView,
} from "../../../src/domain/producer-state.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";

const PID = 4000;
const T0 = 1_700_000_000_000;

/** A batch of `count` records starting at `baseSequence`, with the Int32 wrap of lastSequence. */
function batch(baseSequence: number, count = 10, options: Partial<BatchInfo> = {}): BatchInfo {
  const last = baseSequence + count - 1;
  return {
    producerId: PID,
    producerEpoch: 0,
    baseSequence,
    lastSequence: last > INT32_MAX ? last - INT32_MAX - 1 : last,
    isTransactional: false,
    ...options,
  };
}

/**
 * Classifies and, when accepted, applies the batch at the next offset, as the Produce path does; returns
 * the classification. Offsets and timestamps are derived from a counter so that each batch is unique.
 */
class Partition {
  readonly state: ProducerStateTable = createProducerState();
  nextOffset = 100;
  nowMs = T0;

  produce(info: BatchInfo, view: ProducerStateView = this.state) {
    const result = classifyBatch(view, info);
    if (result.kind === "append") {
      const count = info.lastSequence >= info.baseSequence ? info.lastSequence - info.baseSequence + 1 : INT32_MAX - info.baseSequence + info.lastSequence + 2;
      applyAppend(view, info, { firstOffset: this.nextOffset, lastOffset: this.nextOffset + count - 1, timestampMs: this.nowMs });
      this.nextOffset += count;
      this.nowMs += 1000;
    }
    return result;
  }
}

describe("classifyBatch", () => {
  test("a non-idempotent batch (producerId -1) is always appended and leaves no state", () => {
    const p = new Partition();
    const info = batch(-1, 1, { producerId: -1, producerEpoch: -1, lastSequence: -1 });
    expect(p.produce(info)).toEqual({ kind: "append" });
    expect(p.produce(info)).toEqual({ kind: "append" });
    expect(p.state.size).toBe(0);
  });

  test("an unknown producer is accepted at any sequence", () => {
    for (const seq of [0, 1, 57, INT32_MAX]) {
      const p = new Partition();
      expect(p.produce(batch(seq, 1, { producerEpoch: 3 }))).toEqual({ kind: "append" });
      expect(p.state.get(PID)?.epoch).toBe(3);
    }
  });

  test("the next batch in sequence is appended; the window advances", () => {
    const p = new Partition();
    expect(p.produce(batch(0))).toEqual({ kind: "append" });
    expect(p.produce(batch(10))).toEqual({ kind: "append" });
    expect(p.produce(batch(20, 5))).toEqual({ kind: "append" });
    expect(p.state.get(PID)!.batches.map((b) => [b.firstSeq, b.lastSeq])).toEqual([
      [0, 9],
      [10, 19],
      [20, 24],
    ]);
  });

  test("a duplicate of each of the last 5 batches answers its original offsets and timestamp", () => {
    const p = new Partition();
    const originals = [];
    for (let i = 0; i < 7; i++) {
      const offset = p.nextOffset;
      const timestampMs = p.nowMs;
      expect(p.produce(batch(i * 10))).toEqual({ kind: "append" });
      originals.push({ seq: i * 10, firstOffset: offset, lastOffset: offset + 9, timestampMs });
    }
    const endOffset = p.nextOffset;
    for (const original of originals.slice(2)) {
      expect(classifyBatch(p.state, batch(original.seq))).toEqual({
        kind: "duplicate",
        firstOffset: original.firstOffset,
        lastOffset: original.lastOffset,
        timestampMs: original.timestampMs,
      });
    }
    // Nothing was written or remembered for the duplicates.
    expect(p.produce(batch(30))).toMatchObject({ kind: "duplicate" });
    expect(p.nextOffset).toBe(endOffset);
    expect(p.state.get(PID)!.batches).toHaveLength(5);
  });

  test("a retry of the 6th-oldest batch (fallen out of the window) is OUT_OF_ORDER_SEQUENCE_NUMBER", () => {
    const p = new Partition();
    for (let i = 0; i < 6; i++) p.produce(batch(i * 10));
    const result = classifyBatch(p.state, batch(0));
    expect(result).toMatchObject({ kind: "error", errorCode: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER });
    expect(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER).toBe(45);
  });

  test("a duplicate must match the whole sequence range, not just the first sequence", () => {
    const p = new Partition();
    p.produce(batch(0, 10));
    expect(classifyBatch(p.state, batch(0, 5))).toMatchObject({ kind: "error", errorCode: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER });
  });

  test("a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, and so is a batch behind the window's end", () => {
    const p = new Partition();
    p.produce(batch(0));
    expect(classifyBatch(p.state, batch(11))).toMatchObject({ kind: "error", errorCode: 45 });
    expect(classifyBatch(p.state, batch(5))).toMatchObject({ kind: "error", errorCode: 45 });
    expect(classifyBatch(p.state, batch(10))).toEqual({ kind: "append" });
  });

  test("an epoch bump is accepted at sequence 0 and clears the window", () => {
    const p = new Partition();
    p.produce(batch(0));
    p.produce(batch(10));
    expect(p.produce(batch(0, 3, { producerEpoch: 1 }))).toEqual({ kind: "append" });
    const entry = p.state.get(PID)!;
    expect(entry.epoch).toBe(1);
    expect(entry.batches.map((b) => [b.firstSeq, b.lastSeq])).toEqual([[0, 2]]);
    // The old epoch's batches are no longer duplicates: a retry at the old epoch is stale.
    expect(classifyBatch(p.state, batch(10))).toMatchObject({ kind: "error", errorCode: ErrorCode.INVALID_PRODUCER_EPOCH });
  });

  test("an epoch bump at a sequence other than 0 is OUT_OF_ORDER_SEQUENCE_NUMBER", () => {
    const p = new Partition();
    p.produce(batch(0));
    expect(classifyBatch(p.state, batch(10, 10, { producerEpoch: 1 }))).toMatchObject({ kind: "error", errorCode: 45 });
    expect(classifyBatch(p.state, batch(1, 10, { producerEpoch: 5 }))).toMatchObject({ kind: "error", errorCode: 45 });
  });

  test("a stale epoch is INVALID_PRODUCER_EPOCH (47), even when its sequence would fit", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { producerEpoch: 2 }));
    expect(ErrorCode.INVALID_PRODUCER_EPOCH).toBe(47);
    expect(classifyBatch(p.state, batch(10, 10, { producerEpoch: 1 }))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(classifyBatch(p.state, batch(0, 10, { producerEpoch: 1 }))).toMatchObject({ kind: "error", errorCode: 47 });
  });

  test("after sequence 2147483647 comes 0", () => {
    const p = new Partition();
    expect(p.produce(batch(INT32_MAX - 4, 5))).toEqual({ kind: "append" });
    expect(p.state.get(PID)!.batches[0]!.lastSeq).toBe(INT32_MAX);
    expect(classifyBatch(p.state, batch(1))).toMatchObject({ kind: "error", errorCode: 45 });
    expect(p.produce(batch(0, 3))).toEqual({ kind: "append" });
    expect(p.produce(batch(3, 1))).toEqual({ kind: "append" });
  });

  test("a batch that wraps inside itself is remembered with its wrapped last sequence and deduplicated", () => {
    const p = new Partition();
    p.produce(batch(INT32_MAX - 9, 1));
    const wrapping = batch(INT32_MAX - 8, 20); // INT32_MAX-8 .. 10
    expect(wrapping.lastSequence).toBe(10);
    expect(p.produce(wrapping)).toEqual({ kind: "append" });
    expect(classifyBatch(p.state, wrapping)).toMatchObject({ kind: "duplicate" });
    expect(p.produce(batch(11))).toEqual({ kind: "append" });
  });

  test("inSequence", () => {
    expect(inSequence(-1, 0)).toBe(true);
    expect(inSequence(4, 5)).toBe(true);
    expect(inSequence(INT32_MAX, 0)).toBe(true);
    expect(inSequence(4, 6)).toBe(false);
  });

  test("producers are independent", () => {
    const p = new Partition();
    p.produce(batch(0));
    expect(p.produce(batch(500, 1, { producerId: PID + 1 }))).toEqual({ kind: "append" });
    expect(p.produce(batch(10))).toEqual({ kind: "append" });
    expect(classifyBatch(p.state, batch(501, 1, { producerId: PID + 1 }))).toEqual({ kind: "append" });
  });

  test("a non-transactional batch while a transaction is open is INVALID_TXN_STATE, as Apache answers", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    expect(classifyBatch(p.state, batch(10))).toMatchObject({ kind: "error", errorCode: ErrorCode.INVALID_TXN_STATE });
    expect(classifyBatch(p.state, batch(10, 10, { isTransactional: true }))).toEqual({ kind: "append" });
  });

  test("classification changes nothing", () => {
    const p = new Partition();
    p.produce(batch(0));
    const before = p.state.get(PID);
    classifyBatch(p.state, batch(10));
    classifyBatch(p.state, batch(0, 1, { producerEpoch: 9 }));
    expect(p.state.get(PID)).toEqual(before);
  });
});

describe("applyAppend", () => {
  test("keeps at most 5 batches, dropping the oldest, and tracks the last timestamp", () => {
    const p = new Partition();
    for (let i = 0; i < 8; i++) p.produce(batch(i * 10));
    const entry = p.state.get(PID)!;
    expect(entry.batches.map((b) => b.firstSeq)).toEqual([30, 40, 50, 60, 70]);
    expect(entry.lastTimestampMs).toBe(T0 + 7000);
    expect(entry.batches.at(-1)).toEqual({ firstSeq: 70, lastSeq: 79, firstOffset: 170, lastOffset: 179, timestampMs: T0 + 7000 });
  });

  test("the first transactional batch opens the transaction at its offset; later ones keep it", () => {
    const p = new Partition();
    p.produce(batch(0));
    expect(p.state.get(PID)!.currentTxnFirstOffset).toBe(NO_TXN_OFFSET);
    p.produce(batch(10, 10, { isTransactional: true }));
    p.produce(batch(20, 10, { isTransactional: true }));
    expect(p.state.get(PID)!.currentTxnFirstOffset).toBe(110);
  });
});

describe("several batches in one request (scratch)", () => {
  test("later batches are classified against the earlier ones; nothing reaches the table before commit", () => {
    const p = new Partition();
    p.produce(batch(0));
    const scratch = new ProducerStateScratch(p.state);
    expect(p.produce(batch(10), scratch)).toEqual({ kind: "append" });
    expect(p.produce(batch(20), scratch)).toEqual({ kind: "append" });
    expect(p.produce(batch(20), scratch)).toMatchObject({ kind: "duplicate", firstOffset: 120 });
    expect(p.produce(batch(40), scratch)).toMatchObject({ kind: "error", errorCode: 45 });
    expect(p.state.get(PID)!.batches).toHaveLength(1);
    scratch.commit();
    expect(p.state.get(PID)!.batches.map((b) => b.firstSeq)).toEqual([0, 10, 20]);
  });

  test("a dropped scratch (the write failed) leaves the table as it was, so the retry is not a duplicate", () => {
    const p = new Partition();
    p.produce(batch(0));
    const scratch = new ProducerStateScratch(p.state);
    p.produce(batch(10), scratch);
    expect(classifyBatch(p.state, batch(10))).toEqual({ kind: "append" });
  });
});

describe("markers", () => {
  const marker = (offset: number, isCommit: boolean, coordinatorEpoch = 0) => ({ coordinatorEpoch, offset, timestampMs: T0 + 50_000, isCommit });

  test("markers never consume a sequence slot", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    p.produce(batch(10, 10, { isTransactional: true }));
    const result = applyMarker(p.state, PID, 0, marker(120, true));
    expect(result).toEqual({ kind: "applied", completedTxn: { producerId: PID, firstOffset: 100, lastOffset: 120, isAborted: false } });
    const entry = p.state.get(PID)!;
    expect(entry.batches.map((b) => b.firstSeq)).toEqual([0, 10]);
    expect(entry.currentTxnFirstOffset).toBe(NO_TXN_OFFSET);
    expect(entry.coordinatorEpoch).toBe(0);
    expect(entry.lastTimestampMs).toBe(T0 + 50_000);
    // The next sequence still follows the last data batch, and the old batches are still duplicates.
    expect(classifyBatch(p.state, batch(20, 10, { isTransactional: true }))).toEqual({ kind: "append" });
    expect(classifyBatch(p.state, batch(0, 10, { isTransactional: true }))).toMatchObject({ kind: "duplicate" });
  });

  test("an abort reports an aborted transaction; a marker without an open transaction completes none", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    expect(applyMarker(p.state, PID, 0, marker(110, false))).toMatchObject({ completedTxn: { isAborted: true, firstOffset: 100, lastOffset: 110 } });
    expect(applyMarker(p.state, PID, 0, marker(111, false))).toEqual({ kind: "applied", completedTxn: undefined });
  });

  test("a marker with an older producer epoch is refused with INVALID_PRODUCER_EPOCH and changes nothing", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true, producerEpoch: 3 }));
    const before = p.state.get(PID);
    expect(checkMarker(p.state, PID, 2, marker(110, true))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(applyMarker(p.state, PID, 2, marker(110, true))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(p.state.get(PID)).toEqual(before);
  });

  test("a marker with an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    applyMarker(p.state, PID, 0, marker(110, true, 5));
    expect(applyMarker(p.state, PID, 0, marker(111, true, 4))).toMatchObject({
      kind: "error",
      errorCode: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    });
  });

  test("a marker with a newer epoch raises the epoch and clears the window (epoch bookkeeping)", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    applyMarker(p.state, PID, 1, marker(110, false));
    const entry = p.state.get(PID)!;
    expect(entry.epoch).toBe(1);
    expect(entry.batches).toEqual([]);
    expect(classifyBatch(p.state, batch(10))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(classifyBatch(p.state, batch(5, 1, { producerEpoch: 1 }))).toMatchObject({ kind: "error", errorCode: 45 });
    expect(classifyBatch(p.state, batch(0, 1, { producerEpoch: 1 }))).toEqual({ kind: "append" });
  });

  test("a marker for a producer without state creates its entry, with no window", () => {
    const p = new Partition();
    expect(applyMarker(p.state, PID, 2, marker(7, false, 1))).toEqual({ kind: "applied", completedTxn: undefined });
    expect(p.state.get(PID)).toEqual({
      epoch: 2,
      batches: [],
      lastTimestampMs: T0 + 50_000,
      currentTxnFirstOffset: NO_TXN_OFFSET,
      coordinatorEpoch: 1,
    });
  });
});

describe("fenceEpoch", () => {
  test("raises the epoch and clears the window; the zombie's batches are stale", () => {
    const p = new Partition();
    p.produce(batch(0));
    p.produce(batch(10));
    expect(fenceEpoch(p.state, PID, 1)).toBe("fenced");
    expect(p.state.get(PID)).toMatchObject({ epoch: 1, batches: [] });
    expect(classifyBatch(p.state, batch(20))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(classifyBatch(p.state, batch(10))).toMatchObject({ kind: "error", errorCode: 47 });
    expect(classifyBatch(p.state, batch(0, 10, { producerEpoch: 1 }))).toEqual({ kind: "append" });
    expect(classifyBatch(p.state, batch(3, 10, { producerEpoch: 1 }))).toMatchObject({ kind: "error", errorCode: 45 });
  });

  test("never lowers an epoch, and leaves absent producers absent", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { producerEpoch: 4 }));
    expect(fenceEpoch(p.state, PID, 4)).toBe("not-newer");
    expect(fenceEpoch(p.state, PID, 2)).toBe("not-newer");
    expect(p.state.get(PID)!.batches).toHaveLength(1);
    expect(fenceEpoch(p.state, PID + 1, 9)).toBe("absent");
    expect(p.state.has(PID + 1)).toBe(false);
  });

  test("keeps an open transaction open for its marker", () => {
    const p = new Partition();
    p.produce(batch(0, 10, { isTransactional: true }));
    fenceEpoch(p.state, PID, 1);
    expect(p.state.get(PID)!.currentTxnFirstOffset).toBe(100);
    expect(applyMarker(p.state, PID, 1, { coordinatorEpoch: 0, offset: 110, timestampMs: T0, isCommit: false })).toMatchObject({
      completedTxn: { firstOffset: 100, isAborted: true },
    });
  });
});

describe("expire", () => {
  const DAY_MS = 86_400_000;

  test("removes producers idle for the expiration, keeps recent ones and ones with an open transaction", () => {
    const p = new Partition();
    p.produce(batch(0, 1, { producerId: 1 })); // T0
    p.produce(batch(0, 1, { producerId: 2, isTransactional: true })); // T0 + 1 s, open transaction
    p.nowMs = T0 + DAY_MS;
    p.produce(batch(0, 1, { producerId: 3 })); // recent
    expect(expire(p.state, T0 + DAY_MS + 5000, DAY_MS)).toBe(1);
    expect([...p.state.entries()].map(([id]) => id).sort()).toEqual([2, 3]);
    // Once the transaction ends, the producer expires like any other.
    applyMarker(p.state, 2, 0, { coordinatorEpoch: 0, offset: 500, timestampMs: T0 + 2000, isCommit: true });
    expect(expire(p.state, T0 + DAY_MS + 5000, DAY_MS)).toBe(1);
    expect(p.state.has(2)).toBe(false);
    expect(p.state.has(3)).toBe(true);
  });

  test("an expired producer is unknown again: any sequence is accepted", () => {
    const p = new Partition();
    p.produce(batch(0));
    expire(p.state, T0 + DAY_MS, DAY_MS);
    expect(classifyBatch(p.state, batch(777))).toEqual({ kind: "append" });
  });

  test("expiring many producers keeps every survivor intact (slots are moved on delete)", () => {
    const state = createProducerState();
    const count = 3000;
    for (let id = 0; id < count; id++) {
      applyAppend(
        state,
        { producerId: id, producerEpoch: id % 7, baseSequence: id, lastSequence: id + 1, isTransactional: false },
        { firstOffset: id * 2, lastOffset: id * 2 + 1, timestampMs: id % 2 === 0 ? T0 : T0 + DAY_MS },
      );
    }
    expect(expire(state, T0 + DAY_MS, DAY_MS)).toBe(count / 2);
    expect(state.size).toBe(count / 2);
    for (let id = 0; id < count; id++) {
      const entry = state.get(id);
      if (id % 2 === 0) {
        expect(entry).toBeUndefined();
      } else {
        expect(entry).toEqual({
          epoch: id % 7,
          batches: [{ firstSeq: id, lastSeq: id + 1, firstOffset: id * 2, lastOffset: id * 2 + 1, timestampMs: T0 + DAY_MS }],
          lastTimestampMs: T0 + DAY_MS,
          currentTxnFirstOffset: NO_TXN_OFFSET,
          coordinatorEpoch: NO_COORDINATOR_EPOCH,
        });
      }
    }
    // The table still works after the moves: new producers land in the freed slots.
    applyAppend(state, { producerId: 1_000_000, producerEpoch: 0, baseSequence: 0, lastSequence: 0, isTransactional: false }, { firstOffset: 1, lastOffset: 1, timestampMs: T0 });
    expect(state.get(1_000_000)?.batches).toHaveLength(1);
    expect(state.get(count - 1)?.epoch).toBe((count - 1) % 7);
  });
});

describe("table invariants", () => {
  test("refuses entries the columns cannot hold", () => {
    const state = createProducerState();
    const good = { epoch: 0, batches: [], lastTimestampMs: T0, currentTxnFirstOffset: NO_TXN_OFFSET, coordinatorEpoch: NO_COORDINATOR_EPOCH };
    expect(() => state.set(-1, good)).toThrow(RangeError);
    expect(() => state.set(1, { ...good, epoch: 40_000 })).toThrow(RangeError);
    const b = { firstSeq: 0, lastSeq: 0, firstOffset: 0, lastOffset: 0, timestampMs: T0 };
    expect(() => state.set(1, { ...good, batches: [b, b, b, b, b, b] })).toThrow(RangeError);
    expect(() => state.set(1, { ...good, batches: [{ ...b, lastOffset: 2 ** 31 }] })).toThrow(RangeError);
    expect(state.size).toBe(0);
  });
});
