/** Every transition of the cleaner's transaction tracker (domain/compaction/txn-cleaning.ts). */
import { describe, expect, test } from "bun:test";
import { CleaningTxnTracker, type AbortedTxnRange } from "../../../../src/domain/compaction/txn-cleaning.ts";

const aborted = (producerId: number, firstOffset: number, lastOffset: number): AbortedTxnRange => ({
  producerId,
  firstOffset,
  lastOffset,
  lastStableOffset: lastOffset + 1,
});

describe("CleaningTxnTracker", () => {
  test("data of an aborted transaction is discarded from its first offset on, not before", () => {
    const t = new CleaningTxnTracker([aborted(1, 10, 20)]);
    expect(t.onDataBatch(1, true, 5)).toBe(false); // an earlier, committed transaction of the same producer
    expect(t.onDataBatch(1, true, 10)).toBe(true);
    expect(t.onDataBatch(1, true, 15)).toBe(true);
  });

  test("non-transactional data is never discarded, even from a producer with an aborted transaction", () => {
    const t = new CleaningTxnTracker([aborted(1, 10, 20)]);
    expect(t.onDataBatch(1, false, 12)).toBe(false);
  });

  test("other producers' data inside an aborted range is kept", () => {
    const t = new CleaningTxnTracker([aborted(1, 10, 20)]);
    expect(t.onDataBatch(2, true, 12)).toBe(false);
  });

  test("an abort marker stays, with its index entry, when data of its transaction was met in this pass", () => {
    const txn = aborted(1, 10, 20);
    const t = new CleaningTxnTracker([txn]);
    t.onDataBatch(1, true, 10);
    expect(t.onControlBatch(1, "abort", 20)).toEqual({ discardable: false, keepInIndex: txn });
  });

  test("an abort marker whose data is all gone may go, and drops out of the index", () => {
    const t = new CleaningTxnTracker([aborted(1, 10, 20)]);
    expect(t.onControlBatch(1, "abort", 20)).toEqual({ discardable: true, keepInIndex: undefined });
  });

  test("an abort marker the index does not know (a retried marker) may go", () => {
    const t = new CleaningTxnTracker([]);
    expect(t.onControlBatch(3, "abort", 7)).toEqual({ discardable: true, keepInIndex: undefined });
  });

  test("after its abort marker, the producer's next transaction is not taken for aborted", () => {
    const t = new CleaningTxnTracker([aborted(1, 10, 20)]);
    t.onDataBatch(1, true, 10);
    t.onControlBatch(1, "abort", 20);
    expect(t.onDataBatch(1, true, 25)).toBe(false);
  });

  test("a commit marker stays while data of its transaction was met, and may go when none was", () => {
    const t = new CleaningTxnTracker([]);
    t.onDataBatch(4, true, 3);
    expect(t.onControlBatch(4, "commit", 5).discardable).toBe(false);
    // The next transaction of the same producer left no data in the log: its marker may go.
    expect(t.onControlBatch(4, "commit", 9).discardable).toBe(true);
  });

  test("an emptied control batch may go; control records of other kinds stay", () => {
    const t = new CleaningTxnTracker([]);
    expect(t.onControlBatch(5, "empty", 3)).toEqual({ discardable: true, keepInIndex: undefined });
    expect(t.onControlBatch(5, "other", 4)).toEqual({ discardable: false, keepInIndex: undefined });
  });

  test("aborted transactions are taken in first-offset order whatever order they are given in", () => {
    const t = new CleaningTxnTracker([aborted(2, 30, 40), aborted(1, 10, 20)]);
    expect(t.onDataBatch(1, true, 11)).toBe(true);
    expect(t.onDataBatch(2, true, 29)).toBe(false);
    expect(t.onDataBatch(2, true, 31)).toBe(true);
  });
});
