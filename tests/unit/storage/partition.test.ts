/**
 * The partition side of transactions (storage/partition.ts): transactional appends gated by the
 * coordinator's verifier, end-transaction markers (checks, byte-exact control batches, durability,
 * retries), the last stable offset (pinned by open transactions and by markers not durable yet, never
 * backwards), the aborted-transaction index and its `.txnindex` files, and all of it across a clean
 * restart and a crash (reopen without close), including missing, damaged and torn index files.
 */
import { describe, expect, test } from "bun:test";
import type { TransactionVerifier, TxnBatchVerdict } from "../../../src/domain/txn/verifier.ts";
import { FatalError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { buildControlBatch, parseBatchHeader, parseControlRecord } from "../../../src/protocol/records/record-batch.ts";
import type { LogConfig } from "../../../src/storage/log/partition-log.ts";
import { encodeTxnIndexEntries, TXN_INDEX_ENTRY_BYTES, type AbortedTxn } from "../../../src/storage/log/txn-index.ts";
import { NOT_IN_TRANSACTION_MESSAGE, Partition, type ProduceOutcome, type TxnMarker } from "../../../src/storage/partition.ts";
import { PRODUCER_STATE_SNAPSHOT_FILE } from "../../../src/storage/producer-state-snapshot.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { appendToFile, patchFile, splitBatches, testConfig } from "./log/support.ts";

const DIR = "/data/txn-0";
const TOPIC = "txn";

/** Says yes for (producerId, epoch) pairs it was told about, on any partition of TOPIC; records every question. */
class FakeVerifier implements TransactionVerifier {
  private readonly allowed = new Set<string>();
  readonly asked: [number, number, string, number][] = [];
  allow(producerId: number, epoch: number): this {
    this.allowed.add(`${producerId}/${epoch}`);
    return this;
  }
  deny(producerId: number, epoch: number): this {
    this.allowed.delete(`${producerId}/${epoch}`);
    return this;
  }
  /** What it answers for pairs it was not told about. */
  otherwise: Exclude<TxnBatchVerdict, "in-transaction"> = "not-in-transaction";
  verifyBatch(producerId: number, producerEpoch: number, topic: string, partition: number): TxnBatchVerdict {
    this.asked.push([producerId, producerEpoch, topic, partition]);
    return topic === TOPIC && this.allowed.has(`${producerId}/${producerEpoch}`) ? "in-transaction" : this.otherwise;
  }
}

interface Harness {
  fs: MemoryFs;
  clock: ManualClock;
  verifier: FakeVerifier;
  warnings: string[];
  config: LogConfig;
  open(): Promise<Partition>;
}

function harness(config: LogConfig = testConfig({ segmentBytes: 100_000 })): Harness {
  const h: Harness = {
    fs: new MemoryFs(),
    clock: new ManualClock(),
    verifier: new FakeVerifier(),
    warnings: [],
    config,
    open: () =>
      Partition.open({
        fs: h.fs,
        clock: h.clock,
        topic: TOPIC,
        partition: 0,
        dir: DIR,
        logConfig: h.config,
        timestampType: "create-time",
        warn: (message) => h.warnings.push(message),
        verifier: h.verifier,
      }),
  };
  return h;
}

/** Per producer, the next sequence to send. */
const sequences = new Map<number, number>();

function batchOf(producerId: number, epoch: number, opts: { transactional?: boolean; records?: number; sequence?: number } = {}): Uint8Array {
  const records = opts.records ?? 1;
  const key = producerId * 100_000 + epoch;
  const sequence = opts.sequence ?? sequences.get(key) ?? 0;
  if (opts.sequence === undefined) sequences.set(key, sequence + records);
  return buildBatch({
    records: Array.from({ length: records }, (_, i) => ({ value: `p${producerId}-s${sequence + i}` })),
    producerId,
    producerEpoch: epoch,
    baseSequence: sequence,
    transactional: opts.transactional ?? true,
  });
}

function append(p: Partition, bytes: Uint8Array): ProduceOutcome {
  return p.appendFromProducer(bytes, parseBatchHeader(bytes));
}

async function appendOk(p: Partition, bytes: Uint8Array): Promise<number> {
  const outcome = append(p, bytes);
  if (outcome.kind !== "appended") throw new Error(`expected an append, got ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return outcome.baseOffset;
}

const marker = (producerId: number, producerEpoch: number, commit: boolean, coordinatorEpoch = 0): TxnMarker => ({
  producerId,
  producerEpoch,
  commit,
  coordinatorEpoch,
});

async function markerOk(p: Partition, m: TxnMarker): Promise<number> {
  const outcome = await p.appendMarker(m);
  if (!outcome.ok) throw new Error(`marker refused: ${JSON.stringify(outcome)}`);
  return outcome.offset;
}

function txnIndexPath(baseOffset: number): string {
  return `${DIR}/${String(baseOffset).padStart(20, "0")}.txnindex`;
}

async function txnIndexFile(fs: MemoryFs, baseOffset = 0): Promise<Uint8Array> {
  return fs.readFile(txnIndexPath(baseOffset));
}

describe("transactional appends", () => {
  test("refused with INVALID_TXN_STATE (notInTransaction) unless the verifier vouches for partition, producer and epoch", async () => {
    sequences.clear();
    const h = harness();
    const p = await h.open();
    const refused = append(p, batchOf(1, 0));
    expect(refused).toEqual({ kind: "error", errorCode: ErrorCode.INVALID_TXN_STATE, message: NOT_IN_TRANSACTION_MESSAGE, notInTransaction: true });
    expect(h.verifier.asked).toEqual([[1, 0, TOPIC, 0]]);
    expect(p.log.logEndOffset).toBe(0);
    expect(p.producers.get(1)).toBeUndefined();

    h.verifier.allow(1, 0);
    const offset = await appendOk(p, batchOf(1, 0, { sequence: 0, records: 2 }));
    expect(offset).toBe(0);
    expect(p.producers.get(1)?.currentTxnFirstOffset).toBe(0);
    expect(p.openTransactionOf(1)).toBe(0);
    // The second batch keeps the transaction's first offset.
    await appendOk(p, batchOf(1, 0, { sequence: 2 }));
    expect(p.producers.get(1)?.currentTxnFirstOffset).toBe(0);
    // Another epoch of the same producer is not vouched for.
    expect(append(p, batchOf(1, 1, { sequence: 0 }))).toMatchObject({ errorCode: ErrorCode.INVALID_TXN_STATE, notInTransaction: true });
    await p.close();
  });

  test("the coordinator's other verdicts: Apache's Produce answers, nothing written", async () => {
    const h = harness();
    const p = await h.open();
    const cases: [Exclude<TxnBatchVerdict, "in-transaction" | "not-in-transaction">, number][] = [
      ["unknown-producer", ErrorCode.INVALID_PRODUCER_ID_MAPPING],
      ["fenced", ErrorCode.INVALID_PRODUCER_EPOCH],
      ["deciding", ErrorCode.NOT_ENOUGH_REPLICAS],
    ];
    for (const [verdict, errorCode] of cases) {
      h.verifier.otherwise = verdict;
      const outcome = append(p, batchOf(1, 0));
      expect([verdict, outcome]).toMatchObject([verdict, { kind: "error", errorCode }]);
      // Only a partition outside the transaction is answered TRANSACTION_ABORTABLE from Produce v11 on.
      expect((outcome as { notInTransaction?: boolean }).notInTransaction).toBeUndefined();
    }
    expect(p.log.logEndOffset).toBe(0);
    expect(p.producers.get(1)).toBeUndefined();
    await p.close();
  });

  test("a transactional batch without a producer id is refused without asking", async () => {
    const h = harness();
    const p = await h.open();
    const bytes = buildBatch({ records: [{ value: "x" }], transactional: true });
    expect(append(p, bytes)).toMatchObject({ errorCode: ErrorCode.INVALID_TXN_STATE, notInTransaction: true });
    expect(h.verifier.asked).toEqual([]);
    await p.close();
  });

  test("idempotence still applies: duplicates answered with the original offset, gaps and old epochs refused", async () => {
    const h = harness();
    h.verifier.allow(1, 3).allow(1, 2);
    const p = await h.open();
    await appendOk(p, batchOf(1, 3, { sequence: 0, records: 2 }));
    await appendOk(p, batchOf(1, 3, { sequence: 2 }));
    expect(append(p, batchOf(1, 3, { sequence: 0, records: 2 }))).toMatchObject({ kind: "duplicate", baseOffset: 0 });
    expect(append(p, batchOf(1, 3, { sequence: 9 }))).toMatchObject({ kind: "error", errorCode: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER });
    // A zombie of an older epoch: fenced by the epoch before the verifier is asked (as Apache's coordinator
    // answers PRODUCER_FENCED, i.e. INVALID_PRODUCER_EPOCH for Produce), even when the verifier would say no.
    h.verifier.deny(1, 2);
    expect(append(p, batchOf(1, 2, { sequence: 0 }))).toMatchObject({ kind: "error", errorCode: ErrorCode.INVALID_PRODUCER_EPOCH });
    expect(p.log.logEndOffset).toBe(3);
    await p.close();
  });

  test("a non-transactional batch while the producer's transaction is open here: INVALID_TXN_STATE (Apache's ProducerAppendInfo)", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    await appendOk(p, batchOf(1, 0, { sequence: 0 }));
    const outcome = append(p, batchOf(1, 0, { sequence: 1, transactional: false }));
    expect(outcome).toMatchObject({ kind: "error", errorCode: ErrorCode.INVALID_TXN_STATE });
    expect((outcome as { notInTransaction?: boolean }).notInTransaction).toBeUndefined();
    await p.close();
  });
});

describe("markers", () => {
  test("the control batch is byte-exact (attributes 0x30, base sequence -1, one record: key v0 + type, value v0 + coordinator epoch)", async () => {
    const h = harness();
    h.verifier.allow(4, 1);
    const p = await h.open();
    await appendOk(p, batchOf(4, 1, { sequence: 0 }));
    const nowMs = h.clock.nowMs();
    const offset = await markerOk(p, marker(4, 1, true, 7));
    expect(offset).toBe(1);
    const read = await p.log.read(offset, 1 << 20);
    if (read.kind !== "records") throw new Error(read.kind);
    const [stored] = splitBatches(read.bytes);
    const expected = buildControlBatch({ producerId: 4, producerEpoch: 1, commit: true, coordinatorEpoch: 7, timestampMs: nowMs, baseOffset: 1 });
    // The log writes the partition leader epoch (0), which the CRC does not cover.
    expected.set([0, 0, 0, 0], 12);
    expect(stored!.bytes).toEqual(expected);
    const header = parseBatchHeader(stored!.bytes);
    expect(header.attributes).toBe(0x30);
    expect(header.baseSequence).toBe(-1);
    expect(parseControlRecord(stored!.bytes)).toEqual({ version: 0, typeCode: 1, type: "commit", coordinatorEpoch: 7 });
    // Markers never consume a sequence slot; the producer's coordinator epoch is recorded.
    expect(p.producers.get(4)).toMatchObject({ epoch: 1, coordinatorEpoch: 7, currentTxnFirstOffset: -1 });
    expect(p.producers.get(4)!.batches.map((b) => b.lastSeq)).toEqual([0]);
    await p.close();
  });

  test("resolves only once durable; until then the LSO stays pinned at the transaction's first offset", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    await appendOk(p, batchOf(9, 0, { transactional: false, sequence: 0 }));
    const first = await appendOk(p, batchOf(1, 0, { sequence: 0 }));
    expect(first).toBe(1);
    expect(p.highWatermark).toBe(2);
    expect(p.lastStableOffset).toBe(1);
    const pending = p.appendMarker(marker(1, 0, true));
    // Applied (the transaction is no longer open) but not durable: still pinned.
    expect(p.openTransactionOf(1)).toBeUndefined();
    expect(p.highWatermark).toBe(2);
    expect(p.lastStableOffset).toBe(1);
    expect(await pending).toEqual({ ok: true, offset: 2 });
    expect(p.highWatermark).toBe(3);
    expect(p.lastStableOffset).toBe(3);
    await p.close();
  });

  test("LSO = min(HW, earliest open transaction); it never goes backwards; abort entries record the LSO at completion", async () => {
    const h = harness();
    h.verifier.allow(1, 0).allow(2, 0).allow(3, 0);
    const p = await h.open();
    const seen: number[] = [];
    const look = () => seen.push(p.lastStableOffset);
    look();
    await appendOk(p, batchOf(1, 0)); // 0: producer 1 opens
    look();
    await appendOk(p, batchOf(2, 0)); // 1: producer 2 opens
    await appendOk(p, batchOf(1, 0)); // 2
    look();
    expect(p.lastStableOffset).toBe(0);
    expect(await markerOk(p, marker(1, 0, false))).toBe(3); // producer 1 aborts; 2 is still open
    look();
    expect(p.lastStableOffset).toBe(1);
    await appendOk(p, batchOf(3, 0)); // 4: producer 3 opens
    expect(await markerOk(p, marker(2, 0, true))).toBe(5); // producer 2 commits
    look();
    expect(p.lastStableOffset).toBe(4);
    expect(await markerOk(p, marker(3, 0, false))).toBe(6); // producer 3 aborts, nothing else open
    look();
    expect(p.lastStableOffset).toBe(7);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(p.abortedTransactionIndex()).toEqual([
      { producerId: 1, firstOffset: 0, lastOffset: 3, lastStableOffset: 1 },
      { producerId: 3, firstOffset: 4, lastOffset: 6, lastStableOffset: 7 },
    ]);
    // Persisted as the markers were written.
    expect(await txnIndexFile(h.fs)).toEqual(encodeTxnIndexEntries(p.abortedTransactionIndex()));
    // Overlap with the fetched range, sorted by first offset.
    expect(p.abortedTransactions(0, 7).map((t) => t.producerId)).toEqual([1, 3]);
    expect(p.abortedTransactions(4, 7).map((t) => t.producerId)).toEqual([3]);
    expect(p.abortedTransactions(0, 3).map((t) => t.producerId)).toEqual([1]);
    expect(p.abortedTransactions(7, 8)).toEqual([]);
    await p.close();
  });

  test("going backwards is a broken invariant: FatalError", async () => {
    const h = harness();
    const p = await h.open();
    await appendOk(p, batchOf(9, 0, { transactional: false, sequence: 0 }));
    (p as unknown as { lastStable: number }).lastStable = 5;
    expect(() => p.lastStableOffset).toThrow(FatalError);
    await p.close();
  });

  test("older producer epoch: INVALID_PRODUCER_EPOCH; older coordinator epoch: TRANSACTION_COORDINATOR_FENCED; nothing written", async () => {
    const h = harness();
    h.verifier.allow(1, 5);
    const p = await h.open();
    await appendOk(p, batchOf(1, 5, { sequence: 0 }));
    await markerOk(p, marker(1, 5, false, 3));
    const end = p.log.logEndOffset;
    expect(await p.appendMarker(marker(1, 4, true, 3))).toMatchObject({ ok: false, errorCode: ErrorCode.INVALID_PRODUCER_EPOCH });
    expect(await p.appendMarker(marker(1, 5, true, 2))).toMatchObject({ ok: false, errorCode: ErrorCode.TRANSACTION_COORDINATOR_FENCED });
    expect(p.log.logEndOffset).toBe(end);
    // A newer epoch (the coordinator aborting a fenced session) is accepted.
    expect(await p.appendMarker(marker(1, 6, false, 3))).toEqual({ ok: true, offset: end });
    expect(p.producers.get(1)).toMatchObject({ epoch: 6, coordinatorEpoch: 3, batches: [] });
    await p.close();
  });

  test("a marker without an open transaction here is written (as Apache does); a retried marker changes nothing else", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    expect(await markerOk(p, marker(42, 0, true))).toBe(0);
    expect(p.producers.get(42)).toMatchObject({ epoch: 0, currentTxnFirstOffset: -1, batches: [] });
    await appendOk(p, batchOf(1, 0, { sequence: 0 }));
    expect(await markerOk(p, marker(1, 0, false))).toBe(2);
    // The coordinator retries after a crash: written again, no second aborted entry, LSO unaffected.
    expect(await markerOk(p, marker(1, 0, false))).toBe(3);
    expect(p.abortedTransactionIndex()).toEqual([{ producerId: 1, firstOffset: 1, lastOffset: 2, lastStableOffset: 3 }]);
    expect(p.lastStableOffset).toBe(4);
    expect((await txnIndexFile(h.fs)).length).toBe(TXN_INDEX_ENTRY_BYTES);
    // The producer's next transaction opens normally.
    await appendOk(p, batchOf(1, 0, { sequence: 1 }));
    expect(p.openTransactionOf(1)).toBe(4);
    expect(p.lastStableOffset).toBe(4);
    await p.close();
  });

  test("a closing partition answers UNKNOWN_TOPIC_OR_PARTITION", async () => {
    const h = harness();
    const p = await h.open();
    const closing = p.close();
    expect(await p.appendMarker(marker(1, 0, true))).toMatchObject({ ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION });
    await closing;
  });

  test("fenceProducer raises the epoch and keeps the open transaction (only its marker ends it)", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    await appendOk(p, batchOf(1, 0, { sequence: 0 }));
    expect(p.fenceProducer(1, 1)).toBe("fenced");
    expect(p.fenceProducer(77, 1)).toBe("absent");
    expect(p.openTransactionOf(1)).toBe(0);
    expect(append(p, batchOf(1, 0, { sequence: 1 }))).toMatchObject({ errorCode: ErrorCode.INVALID_PRODUCER_EPOCH });
    await markerOk(p, marker(1, 1, false));
    expect(p.abortedTransactionIndex()).toEqual([{ producerId: 1, firstOffset: 0, lastOffset: 1, lastStableOffset: 2 }]);
    expect(p.lastStableOffset).toBe(2);
    await p.close();
  });
});

/** Two open transactions and two aborted ones, with some non-transactional data; returns the expectations. */
async function scenario(p: Partition, h: Harness): Promise<{ aborted: AbortedTxn[]; lso: number }> {
  sequences.clear();
  h.verifier.allow(1, 0).allow(2, 0).allow(3, 0).allow(4, 0);
  await appendOk(p, batchOf(1, 0)); // 0
  await appendOk(p, batchOf(2, 0)); // 1
  await appendOk(p, batchOf(9, 0, { transactional: false })); // 2
  await markerOk(p, marker(1, 0, false)); // 3: abort 1 (2 open)
  await appendOk(p, batchOf(3, 0, { records: 3 })); // 4..6
  await markerOk(p, marker(2, 0, false)); // 7: abort 2 (3 open)
  await appendOk(p, batchOf(4, 0)); // 8: 4 opens, stays open
  await appendOk(p, batchOf(3, 0)); // 9: 3 stays open
  return {
    aborted: [
      { producerId: 1, firstOffset: 0, lastOffset: 3, lastStableOffset: 1 },
      { producerId: 2, firstOffset: 1, lastOffset: 7, lastStableOffset: 4 },
    ],
    lso: 4,
  };
}

async function expectRecovered(p: Partition, expected: { aborted: AbortedTxn[]; lso: number }): Promise<void> {
  expect(p.abortedTransactionIndex()).toEqual(expected.aborted);
  expect(p.lastStableOffset).toBe(expected.lso);
  expect(p.openTransactionOf(3)).toBe(4);
  expect(p.openTransactionOf(4)).toBe(8);
  expect(p.producers.get(3)?.currentTxnFirstOffset).toBe(4);
  // The transactions go on after the restart: producer 3 commits, producer 4 aborts.
  expect(await markerOk(p, marker(3, 0, true))).toBe(10);
  expect(p.lastStableOffset).toBe(8);
  expect(await markerOk(p, marker(4, 0, false))).toBe(11);
  expect(p.lastStableOffset).toBe(12);
  expect(p.abortedTransactionIndex()).toEqual([...expected.aborted, { producerId: 4, firstOffset: 8, lastOffset: 11, lastStableOffset: 12 }]);
}

describe("restart", () => {
  test("after a clean close: open transactions pin the LSO again and the aborted index is back", async () => {
    const h = harness();
    const p = await h.open();
    const expected = await scenario(p, h);
    expect(p.lastStableOffset).toBe(expected.lso);
    await p.close();
    const reopened = await h.open();
    expect(h.warnings).toEqual([]);
    await expectRecovered(reopened, expected);
    await reopened.close();
  });

  test("after a crash without a snapshot (everything replayed from the log)", async () => {
    const h = harness();
    const p = await h.open();
    const expected = await scenario(p, h);
    h.fs.crash();
    const reopened = await h.open();
    await expectRecovered(reopened, expected);
    await reopened.close();
  });

  test("after a crash with a snapshot in the middle (index files below it, replay above it)", async () => {
    const h = harness();
    const p = await h.open();
    sequences.clear();
    h.verifier.allow(1, 0).allow(2, 0).allow(3, 0).allow(4, 0);
    await appendOk(p, batchOf(1, 0)); // 0
    await appendOk(p, batchOf(2, 0)); // 1
    await appendOk(p, batchOf(9, 0, { transactional: false })); // 2
    await markerOk(p, marker(1, 0, false)); // 3
    await appendOk(p, batchOf(3, 0, { records: 3 })); // 4..6
    expect(await p.snapshotIfDirty()).toBe(true); // at offset 7: 2 and 3 open, 1 aborted
    await markerOk(p, marker(2, 0, false)); // 7
    await appendOk(p, batchOf(4, 0)); // 8
    await appendOk(p, batchOf(3, 0)); // 9
    h.fs.crash();
    const reopened = await h.open();
    await expectRecovered(reopened, {
      aborted: [
        { producerId: 1, firstOffset: 0, lastOffset: 3, lastStableOffset: 1 },
        { producerId: 2, firstOffset: 1, lastOffset: 7, lastStableOffset: 4 },
      ],
      lso: 4,
    });
    await reopened.close();
  });

  test("regression: a snapshot taken while a marker is being written holds the state of its own offset", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    await appendOk(p, batchOf(1, 0, { sequence: 0 })); // 0: open
    // The snapshot reads its offset (1) now; the abort marker (offset 1) lands while the log flushes. Were
    // the state encoded after the flush, it would say "no open transaction" as of offset 1, the replay
    // would apply the marker again to a closed transaction, and the aborted transaction would be lost.
    const snapshot = p.snapshotIfDirty();
    const abort = p.appendMarker(marker(1, 0, false));
    await Promise.all([snapshot, abort]);
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.abortedTransactionIndex()).toEqual([{ producerId: 1, firstOffset: 0, lastOffset: 1, lastStableOffset: 2 }]);
    expect(reopened.lastStableOffset).toBe(2);
    await reopened.close();
  });

  test("a crash before an abort marker is durable: the transaction is open again and keeps the LSO pinned", async () => {
    const h = harness();
    h.verifier.allow(1, 0);
    const p = await h.open();
    await appendOk(p, batchOf(1, 0, { sequence: 0 }));
    await p.snapshotIfDirty();
    h.fs.haltAfterOps(1); // the marker's write gets through the queue, nothing is fsynced
    await p.appendMarker(marker(1, 0, false)).catch(() => undefined);
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.log.logEndOffset).toBe(1);
    expect(reopened.openTransactionOf(1)).toBe(0);
    expect(reopened.lastStableOffset).toBe(0);
    expect(reopened.abortedTransactionIndex()).toEqual([]);
    expect(await txnIndexFile(h.fs)).toEqual(new Uint8Array(0));
    await reopened.close();
  });
});

describe(".txnindex files", () => {
  test("one per segment, created with it; entries go to the segment of their marker; retention prunes memory", async () => {
    const h = harness(testConfig({ segmentBytes: 300 }));
    h.verifier.allow(1, 0);
    const p = await h.open();
    sequences.clear();
    const aborted: AbortedTxn[] = [];
    for (let i = 0; i < 6; i++) {
      const first = await appendOk(p, batchOf(1, 0, { records: 2 }));
      const last = await markerOk(p, marker(1, 0, false));
      aborted.push({ producerId: 1, firstOffset: first, lastOffset: last, lastStableOffset: last + 1 });
    }
    const bases = p.log.segmentBaseOffsets;
    expect(bases.length).toBeGreaterThan(2);
    for (const [i, base] of bases.entries()) {
      const end = bases[i + 1] ?? p.log.logEndOffset;
      const inSegment = aborted.filter((t) => t.lastOffset >= base && t.lastOffset < end);
      expect({ base, bytes: await txnIndexFile(h.fs, base) }).toEqual({ base, bytes: encodeTxnIndexEntries(inSegment) });
    }
    expect(p.abortedTransactionIndex()).toEqual(aborted);
    await p.log.deleteRecordsBefore(aborted[2]!.lastOffset + 1);
    expect(p.pruneAbortedTransactions()).toBe(3);
    expect(p.abortedTransactionIndex()).toEqual(aborted.slice(3));
    await p.log.enforceRetention(h.clock.nowMs());
    expect(await h.fs.stat(txnIndexPath(0))).toBeUndefined();
    await p.close();
    const reopened = await h.open();
    expect(reopened.abortedTransactionIndex().filter((t) => t.lastOffset >= reopened.log.logStartOffset)).toEqual(aborted.slice(3));
    await reopened.close();
  });

  test("missing files (a log written before txnindex existed) are rebuilt from the log, with the snapshot's replay point", async () => {
    const h = harness(testConfig({ segmentBytes: 300 }));
    const p = await h.open();
    const expected = await scenario(p, h);
    const bases = p.log.segmentBaseOffsets;
    await p.close();
    const stored = await Promise.all(bases.map((b) => txnIndexFile(h.fs, b)));
    for (const base of bases) await h.fs.unlink(txnIndexPath(base));
    const reopened = await h.open();
    expect(h.warnings).toEqual(["aborted-transaction index files missing or damaged; rebuilding them from the log"]);
    expect(reopened.log.recoveryReport.rebuiltIndexes).toEqual(bases.map(txnIndexPath));
    expect(await Promise.all(bases.map((b) => txnIndexFile(h.fs, b)))).toEqual(stored);
    await expectRecovered(reopened, expected);
    await reopened.close();
  });

  test("a damaged entry below the snapshot is corruption: the file is rebuilt from the log", async () => {
    const h = harness();
    const p = await h.open();
    const expected = await scenario(p, h);
    await p.close();
    const original = await txnIndexFile(h.fs);
    expect(original.length).toBe(2 * TXN_INDEX_ENTRY_BYTES);
    await patchFile(h.fs, txnIndexPath(0), 20, new Uint8Array([0xde, 0xad]));
    const reopened = await h.open();
    expect(h.warnings).toHaveLength(1);
    expect(await txnIndexFile(h.fs)).toEqual(original);
    await expectRecovered(reopened, expected);
    await reopened.close();
  });

  test("a torn last entry after a crash is cut and re-derived by the replay", async () => {
    const h = harness();
    const p = await h.open();
    const expected = await scenario(p, h);
    h.fs.crash();
    await appendToFile(h.fs, txnIndexPath(0), new Uint8Array(17).fill(0xab));
    const reopened = await h.open();
    expect(await txnIndexFile(h.fs)).toEqual(encodeTxnIndexEntries(expected.aborted));
    await expectRecovered(reopened, expected);
    await reopened.close();
  });

  test("a snapshot that is gone or corrupt: everything comes from the log", async () => {
    const h = harness();
    const p = await h.open();
    const expected = await scenario(p, h);
    await p.close();
    await patchFile(h.fs, `${DIR}/${PRODUCER_STATE_SNAPSHOT_FILE}`, 3, new Uint8Array([1, 2, 3, 4]));
    const reopened = await h.open();
    await expectRecovered(reopened, expected);
    await reopened.close();
  });
});

describe("producer-state snapshot at segment roll", () => {
  test("a roll writes the snapshot, so a crash afterwards replays only the log after it", async () => {
    const h = harness(testConfig({ segmentBytes: 400 }));
    const p = await h.open();
    const snapshotPath = `${DIR}/${PRODUCER_STATE_SNAPSHOT_FILE}`;
    expect(await h.fs.stat(snapshotPath)).toBeUndefined();
    const before = p.log.segmentCount;
    let offset = 0;
    while (p.log.segmentCount === before) offset = await appendOk(p, batchOf(7, 0, { records: 3, transactional: false }));
    // The roll-triggered snapshot runs in the background: wait for it to appear (nothing else writes one
    // here: no maintenance loop, no close).
    const deadlineMs = Date.now() + 5_000;
    while ((await h.fs.stat(snapshotPath)) === undefined && Date.now() < deadlineMs) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await h.fs.stat(snapshotPath)).toBeDefined();
    // After a crash the snapshot (taken at the roll) is what producer state starts from.
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.producers.get(7)?.batches.at(-1)?.firstOffset).toBe(offset);
    await reopened.close();
  });
});
