/**
 * The aborted-transaction index (storage/log/txn-index.ts): the `.txnindex` entry format (write, read,
 * torn tail, corruption, entries that cannot belong to the segment), the in-memory index's overlap lookup
 * (Apache's TransactionIndex.collectAbortedTxns rules, sorted by first offset, proportional to what
 * overlaps) and the ordered set of open transactions.
 */
import { describe, expect, test } from "bun:test";
import {
  AbortedTxnIndex,
  decodeTxnIndex,
  encodeTxnIndexEntries,
  OngoingTxns,
  TXN_INDEX_ENTRY_BYTES,
  type AbortedTxn,
} from "../../../../src/storage/log/txn-index.ts";

const txn = (producerId: number, firstOffset: number, lastOffset: number, lastStableOffset = lastOffset + 1): AbortedTxn => ({
  producerId,
  firstOffset,
  lastOffset,
  lastStableOffset,
});

describe(".txnindex entries", () => {
  const entries = [txn(7, 0, 4), txn(2 ** 40, 3, 9, 5), txn(1, 10, 2 ** 33, 2 ** 33 + 1)];

  test("round trip: 38 bytes an entry, version 1, big-endian, per-entry CRC-32C", () => {
    const bytes = encodeTxnIndexEntries(entries);
    expect(bytes.length).toBe(3 * TXN_INDEX_ENTRY_BYTES);
    const view = new DataView(bytes.buffer);
    expect(view.getInt16(0)).toBe(1);
    expect(view.getBigInt64(2)).toBe(7n);
    expect(view.getBigInt64(10)).toBe(0n);
    expect(view.getBigInt64(18)).toBe(4n);
    expect(view.getBigInt64(26)).toBe(5n);
    expect(decodeTxnIndex(bytes, 0, 2 ** 34)).toEqual({ kind: "ok", entries });
    expect(decodeTxnIndex(new Uint8Array(0), 0, 10)).toEqual({ kind: "ok", entries: [] });
  });

  test("a cut-short or damaged last entry is a torn tail; the sound prefix is kept", () => {
    const bytes = encodeTxnIndexEntries(entries);
    const cut = decodeTxnIndex(bytes.subarray(0, bytes.length - 5), 0, 2 ** 34);
    expect(cut).toMatchObject({ kind: "torn", entries: entries.slice(0, 2) });
    const flipped = bytes.slice();
    flipped[2 * TXN_INDEX_ENTRY_BYTES + 20]! ^= 0xff;
    expect(decodeTxnIndex(flipped, 0, 2 ** 34)).toMatchObject({ kind: "torn", entries: entries.slice(0, 2) });
    // Zeros where the last entry should be (a file extended but never written).
    const zeros = new Uint8Array(bytes.length);
    zeros.set(bytes.subarray(0, 2 * TXN_INDEX_ENTRY_BYTES));
    expect(decodeTxnIndex(zeros, 0, 2 ** 34)).toMatchObject({ kind: "torn", entries: entries.slice(0, 2) });
  });

  test("damage before the last entry is corruption", () => {
    const bytes = encodeTxnIndexEntries(entries);
    bytes[TXN_INDEX_ENTRY_BYTES + 3]! ^= 0x01;
    const decoded = decodeTxnIndex(bytes, 0, 2 ** 34);
    expect(decoded.kind).toBe("corrupt");
    expect((decoded as { reason: string }).reason).toMatch(/entry 1: checksum mismatch/);
  });

  test("entries that cannot belong to the segment are corruption (with a checksum that matches)", () => {
    const bad = (list: AbortedTxn[], base: number, end: number) => decodeTxnIndex(encodeTxnIndexEntries([...list, txn(1, 100, 101)]), base, end);
    expect(bad([txn(1, 0, 5)], 10, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/outside the segment/) });
    expect(bad([txn(1, 0, 300)], 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/outside the segment/) });
    expect(bad([txn(1, 0, 9), txn(2, 0, 9)], 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/does not follow/) });
    expect(bad([txn(1, 12, 9)], 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/after its marker/) });
    expect(bad([txn(1, 0, 9, 11)], 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/beyond its marker/) });
    expect(bad([txn(-1, 0, 9)], 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/producer id/) });
    const otherVersion = encodeTxnIndexEntries([txn(1, 0, 9), txn(1, 10, 11)]);
    new DataView(otherVersion.buffer).setInt16(0, 0);
    expect(decodeTxnIndex(otherVersion, 0, 200)).toMatchObject({ kind: "corrupt", reason: expect.stringMatching(/version 0/) });
  });
});

describe("AbortedTxnIndex", () => {
  test("collect: marker at or after the fetch offset and first offset before the upper bound, sorted by first offset", () => {
    const index = new AbortedTxnIndex();
    // Producer 1 aborts [0..10], producer 2 [5..12] (with 3 still open when 1 ended), producer 3 [3..20].
    index.append(txn(1, 0, 10, 3));
    index.append(txn(2, 5, 12, 3));
    index.append(txn(3, 3, 20, 21));
    expect(index.collect(0, 30).map((t) => t.producerId)).toEqual([1, 3, 2]);
    expect(index.collect(11, 30).map((t) => t.producerId)).toEqual([3, 2]);
    expect(index.collect(13, 30).map((t) => t.producerId)).toEqual([3]);
    expect(index.collect(21, 30)).toEqual([]);
    // Upper bound 4: producer 2 started at 5, after the fetched data.
    expect(index.collect(0, 4).map((t) => t.producerId)).toEqual([1, 3]);
    expect(index.collect(0, 1).map((t) => t.producerId)).toEqual([1]);
  });

  test("the walk stops at the first entry whose LSO reaches the upper bound (Apache's searchComplete)", () => {
    const index = new AbortedTxnIndex();
    index.append(txn(1, 0, 1, 2));
    // Recorded LSO 5 >= upper bound 5: nothing after it can start before 5.
    index.append(txn(2, 2, 3, 5));
    // A deliberately inconsistent entry after the stop: never looked at.
    index.append(txn(3, 0, 30, 31));
    expect(index.collect(0, 5).map((t) => t.producerId)).toEqual([1, 2]);
    expect(index.collect(0, 6).map((t) => t.producerId)).toEqual([1, 3, 2]);
  });

  test("dropBefore forgets entries below the log start; appends must follow the last marker; growth and compaction", () => {
    const index = new AbortedTxnIndex();
    for (let i = 0; i < 100; i++) index.append(txn(i, i * 10, i * 10 + 5));
    expect(index.size).toBe(100);
    expect(() => index.append(txn(1, 0, 995))).toThrow(RangeError);
    expect(index.dropBefore(500)).toBe(50);
    expect(index.size).toBe(50);
    expect(index.entries()[0]).toEqual(txn(50, 500, 505));
    for (let i = 100; i < 140; i++) index.append(txn(i, i * 10, i * 10 + 5));
    expect(index.size).toBe(90);
    expect(index.entries().map((t) => t.producerId)).toEqual(Array.from({ length: 90 }, (_, k) => k + 50));
    expect(index.collect(1000, 1012).map((t) => t.producerId)).toEqual([100, 101]);
    expect(index.dropBefore(1e9)).toBe(90);
    expect(index.size).toBe(0);
    index.append(txn(1, 0, 1));
    expect(index.entries()).toEqual([txn(1, 0, 1)]);
  });
});

describe("OngoingTxns", () => {
  test("the earliest open transaction is the first one opened that is still open", () => {
    const ongoing = new OngoingTxns();
    expect(ongoing.earliestFirstOffset()).toBeUndefined();
    ongoing.open(5, 10);
    ongoing.open(6, 12);
    ongoing.open(7, 15);
    expect(ongoing.earliestFirstOffset()).toBe(10);
    expect(ongoing.close(6)).toBe(true);
    expect(ongoing.earliestFirstOffset()).toBe(10);
    ongoing.close(5);
    expect(ongoing.earliestFirstOffset()).toBe(15);
    ongoing.open(5, 20);
    expect(ongoing.entries()).toEqual([
      [7, 15],
      [5, 20],
    ]);
    expect(ongoing.close(99)).toBe(false);
  });

  test("opening out of offset order or twice is a bug", () => {
    const ongoing = new OngoingTxns();
    ongoing.open(1, 10);
    expect(() => ongoing.open(2, 9)).toThrow(RangeError);
    expect(() => ongoing.open(1, 11)).toThrow(RangeError);
  });
});
