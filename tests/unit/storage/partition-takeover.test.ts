/**
 * Take-overs on a shared directory (docs/architecture.md, "Files of a leader epoch"): broker A leads the
 * partition at epoch 1, broker B takes it over at epoch 2 while A is frozen, A wakes up and completes a
 * late write of some kind, and then B's reads and a third owner's open (epoch 3) see exactly A's log as B
 * found it plus B's appends: offsets continuous, the last stable offset and producer state right.
 */
import { describe, expect, test } from "bun:test";
import { OffsetMap } from "../../../src/domain/compaction/offset-map.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochHistory } from "../../../src/storage/log/leader-epoch-checkpoint.ts";
import type { LogConfig } from "../../../src/storage/log/partition-log.ts";
import { Partition } from "../../../src/storage/partition.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { readAll, testConfig } from "./log/support.ts";

const DIR = "/data/takeover-0";
const PID = 1000;
const TXN_PID = 2000;

type Warning = { message: string; fields?: Record<string, unknown> };

function harness() {
  const fs = new MemoryFs();
  const clock = new ManualClock();
  const warnings: Warning[] = [];
  const open = (epoch: number | undefined, config: LogConfig = testConfig({ segmentBytes: 100_000 })) =>
    Partition.open({
      fs,
      clock,
      topic: "takeover",
      partition: 0,
      dir: DIR,
      logConfig: config,
      timestampType: "create-time",
      warn: (message, fields) => warnings.push({ message, ...(fields === undefined ? {} : { fields }) }),
      // Every transactional batch is vouched for: a late one must be kept out by the files, not by this.
      verifier: { verifyBatch: () => "in-transaction" },
      ...(epoch === undefined ? {} : { leaderEpoch: epoch }),
    });
  return { fs, clock, warnings, open };
}

function idempotent(baseSequence: number, records: number, value = "v"): Uint8Array {
  return buildBatch({ producerId: PID, producerEpoch: 0, baseSequence, records: Array.from({ length: records }, (_, i) => ({ value: `${value}${i}` })) });
}

function transactional(baseSequence: number, records: number): Uint8Array {
  return buildBatch({ producerId: TXN_PID, producerEpoch: 0, baseSequence, transactional: true, records: Array.from({ length: records }, (_, i) => ({ value: `t${i}` })) });
}

/** Appends and waits until durable; returns the base offset. */
async function produce(p: Partition, bytes: Uint8Array): Promise<number> {
  const outcome = p.appendFromProducer(bytes, parseBatchHeader(bytes));
  if (outcome.kind !== "appended") throw new Error(`expected an append, got ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return outcome.baseOffset;
}

/** The log as (base offset, last offset, producer id, base sequence, leader epoch) of every batch. */
async function logOf(p: Partition): Promise<[number, number, number, number, number][]> {
  return (await readAll(p.log)).map((b) => {
    const h = parseBatchHeader(b.bytes);
    return [b.baseOffset, b.lastOffset, h.producerId, h.baseSequence, h.partitionLeaderEpoch];
  });
}

function continuous(log: [number, number, number, number, number][]): boolean {
  return log.every((b, i) => i === 0 || b[0] === log[i - 1]![1] + 1);
}

/** A late write of a frozen former leader, made after B took over. */
interface LateWrite {
  name: string;
  /** A's log config (a tiny segment.bytes makes its appends roll). */
  config?: LogConfig;
  write: (a: Partition, h: ReturnType<typeof harness>) => Promise<void>;
}

/** A's late appends: an idempotent batch continuing its sequence, and a transactional one opening a transaction. */
async function lateAppends(a: Partition, sequence = 5): Promise<void> {
  await produce(a, idempotent(sequence, 4, "late"));
  await produce(a, transactional(0, 2));
}

const LATE_WRITES: LateWrite[] = [
  { name: "appends to the old active segment", write: (a) => lateAppends(a) },
  {
    name: "rolls a new segment at the same base as the new leader's",
    config: testConfig({ segmentBytes: 1 }),
    write: async (a) => {
      await produce(a, idempotent(5, 4, "late"));
      expect(a.log.segmentBaseOffsets.at(-1)).toBe(5);
    },
  },
  {
    name: "rolls new segments at later bases",
    config: testConfig({ segmentBytes: 1 }),
    write: async (a) => {
      await lateAppends(a);
      expect(a.log.segmentBaseOffsets.slice(-2)).toEqual([5, 9]);
    },
  },
  {
    name: "rewrites the index files and a clean-shutdown checkpoint at its close",
    write: async (a) => {
      await lateAppends(a);
      await a.close();
    },
  },
  {
    name: "rewrites the recovery-point checkpoint",
    config: testConfig({ segmentBytes: 100_000, recoveryPointCheckpointIntervalMs: 1 }),
    write: async (a, h) => {
      h.clock.advance(10);
      await lateAppends(a);
      await a.log.settled();
    },
  },
  {
    name: "aborts a transaction: a marker and an aborted-transaction index entry",
    write: async (a) => {
      await lateAppends(a);
      expect(await a.appendMarker({ producerId: TXN_PID, producerEpoch: 0, commit: false, coordinatorEpoch: 0 })).toMatchObject({ ok: true });
      expect(a.abortedTransactionIndex()).toHaveLength(1);
    },
  },
  {
    name: "rewrites the producer-state snapshot",
    write: async (a) => {
      await lateAppends(a);
      expect(await a.snapshotIfDirty()).toBe(true);
    },
  },
  {
    name: "rewrites the leader-epoch history",
    write: async (a) => {
      await lateAppends(a);
      // As its retention or a DeleteRecords would: the history of its own epoch's file moves.
      await a.leaderEpochHistory.truncateFromStart(3);
      await a.leaderEpochHistory.assign(1, 3, { rewrite: true });
    },
  },
];

describe("a take-over at a newer epoch", () => {
  for (const late of LATE_WRITES) {
    test(`a former leader that ${late.name} after the take-over is never read`, async () => {
      const h = harness();
      const a = await h.open(1, late.config);
      expect(a.leaderEpoch).toBe(1);
      await produce(a, idempotent(0, 3));
      await produce(a, idempotent(3, 2));
      const aLog = await logOf(a);
      expect(aLog).toEqual([
        [0, 2, PID, 0, 1],
        [3, 4, PID, 3, 1],
      ]);

      // B takes over while A is frozen (A's files stay open).
      const b = await h.open(2);
      expect(b.leaderEpoch).toBe(2);
      expect(b.log.logEndOffset).toBe(5);
      expect(await h.fs.stat(`${DIR}/${"5".padStart(20, "0")}.e2.log`)).toBeDefined();
      expect(b.leaderEpochHistory.all).toEqual([
        { epoch: 1, startOffset: 0 },
        { epoch: 2, startOffset: 5 },
      ]);
      // The dedupe window followed the partition: a retry of A's last batch is a duplicate at its offset.
      const retry = idempotent(3, 2);
      expect(b.appendFromProducer(retry, parseBatchHeader(retry))).toMatchObject({ kind: "duplicate", baseOffset: 3 });
      expect(await produce(b, idempotent(5, 2, "b"))).toBe(5);

      // A wakes up and writes.
      await late.write(a, h);

      const expected: [number, number, number, number, number][] = [...aLog, [5, 6, PID, 5, 2]];
      // (a) B's reads.
      expect(await logOf(b)).toEqual(expected);
      expect(b.highWatermark).toBe(7);
      expect(b.lastStableOffset).toBe(7);
      expect(b.openTransactionCount).toBe(0);

      // (b) A third owner's open, with B still holding its files (frozen in turn).
      const c = await h.open(3);
      const cLog = await logOf(c);
      expect(cLog).toEqual(expected);
      expect(continuous(cLog)).toBe(true);
      expect(c.log.logEndOffset).toBe(7);
      expect(c.highWatermark).toBe(7);
      expect(c.lastStableOffset).toBe(7);
      expect(c.openTransactionCount).toBe(0);
      expect(c.abortedTransactionIndex()).toEqual([]);
      expect(c.leaderEpochHistory.all).toEqual([
        { epoch: 1, startOffset: 0 },
        { epoch: 2, startOffset: 5 },
        { epoch: 3, startOffset: 7 },
      ]);
      // Producer state is B's: its last batch is a duplicate, and the sequence goes on from it.
      const bRetry = idempotent(5, 2, "b");
      expect(c.appendFromProducer(bRetry, parseBatchHeader(bRetry))).toMatchObject({ kind: "duplicate", baseOffset: 5 });
      expect(await produce(c, idempotent(7, 1, "c"))).toBe(7);
      // Nothing of A's late write was reported as damage; the open said what it left out, once.
      expect(c.log.recoveryReport.truncated).toBeUndefined();
      expect(h.warnings.filter((w) => /damaged|corrupt/.test(w.message))).toEqual([]);
      await c.close();

      // And a fourth open after C's clean close (with every late file still there) agrees.
      const d = await h.open(4);
      expect((await logOf(d)).slice(0, 3)).toEqual(expected);
      expect(d.log.logEndOffset).toBe(8);
      await d.close();
      await b.close();
      if (!a.closing) await a.close();
    });
  }

  test("a late append is left out and counted: the old segment is bounded where the new epoch starts", async () => {
    const h = harness();
    const a = await h.open(1);
    await produce(a, idempotent(0, 3));
    const b = await h.open(2);
    await produce(b, idempotent(3, 1, "b"));
    await lateAppends(a, 3);
    const c = await h.open(3);
    expect(c.log.recoveryReport.fenced.boundedSegments).toEqual([
      { file: `${"0".padStart(20, "0")}.e1.log`, position: expect.any(Number), offset: 3, bytes: expect.any(Number) },
    ]);
    expect(c.log.recoveryReport.fenced.boundedSegments[0]!.bytes).toBeGreaterThan(0);
    const fencedWarnings = h.warnings.filter((w) => w.message.includes("fenced former leader"));
    expect(fencedWarnings).toHaveLength(1);
    expect(fencedWarnings[0]!.fields).toMatchObject({ boundedSegments: 1 });
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  test("a late segment of the old epoch at or past the new epoch's start is ignored whole, and kept on disk", async () => {
    const h = harness();
    const a = await h.open(1, testConfig({ segmentBytes: 1 }));
    await produce(a, idempotent(0, 3));
    const b = await h.open(2);
    await lateAppends(a, 3); // rolls to 3.e1 and 7.e1
    const c = await h.open(3);
    expect(c.log.recoveryReport.fenced.ignoredFiles.sort()).toEqual([`${"3".padStart(20, "0")}.e1.log`, `${"7".padStart(20, "0")}.e1.log`]);
    expect(await h.fs.stat(`${DIR}/${"7".padStart(20, "0")}.e1.log`)).toBeDefined();
    expect(c.log.logEndOffset).toBe(3);
    expect(c.log.segmentBaseOffsets).toEqual([0, 3]);
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  test("a batch stamped with a fenced epoch ends the log where it starts, even in a file of a later epoch's name", async () => {
    const h = harness();
    const a = await h.open(1);
    await produce(a, idempotent(0, 3));
    await a.close();
    const b = await h.open(2);
    await produce(b, idempotent(3, 2, "b"));
    await b.close();
    // A writer that stamped epoch 1 into epoch 2's active segment (no leader does; the stamp still says it).
    const late = buildBatch({ baseOffset: 5, partitionLeaderEpoch: 1, records: [{ value: "x" }] });
    const path = `${DIR}/${"3".padStart(20, "0")}.e2.log`;
    const handle = await h.fs.open(path, "rw");
    await handle.write(late, await handle.size());
    await handle.close();
    const c = await h.open(3);
    expect(c.log.logEndOffset).toBe(5);
    expect(c.log.recoveryReport.fenced.boundedSegments.map((s) => s.file)).toEqual([`${"3".padStart(20, "0")}.e2.log`]);
    await c.close();
  });

  test("the new leader's files carry its epoch; epoch 0's are never written in cluster mode", async () => {
    const h = harness();
    const a = await h.open(1);
    await produce(a, idempotent(0, 3));
    await a.close();
    const names = await h.fs.readdir(DIR);
    expect(names.filter((n) => !/\.e1(\.|$)/.test(n) && n !== "cleaner-checkpoint.json").sort()).toEqual([]);
    expect(names).toContain(`${LEADER_EPOCH_CHECKPOINT_FILE}.e1`);
    expect(names).toContain("log-checkpoint.e1.json");
    expect(names).toContain("producer-state.e1.snapshot");
    expect(names).toContain(`${"0".padStart(20, "0")}.e1.log`);
  });

  test("a take-over below the recorded epoch is refused and writes nothing", async () => {
    const h = harness();
    const b = await h.open(2);
    await produce(b, idempotent(0, 1));
    await b.close();
    const before = (await h.fs.readdir(DIR)).sort();
    await expect(h.open(1)).rejects.toBeInstanceOf(CorruptStateError);
    expect((await h.fs.readdir(DIR)).sort()).toEqual(before);
    await expect(h.open(0)).rejects.toBeInstanceOf(RangeError);
  });

  test("an empty active segment of the old epoch is replaced by the new epoch's at the same base", async () => {
    const h = harness();
    const a = await h.open(1);
    await a.close();
    const b = await h.open(2);
    expect(b.log.segmentBaseOffsets).toEqual([0]);
    await produce(b, idempotent(0, 2));
    expect(await h.fs.stat(`${DIR}/${"0".padStart(20, "0")}.e2.log`)).toMatchObject({ size: expect.any(Number) });
    await b.close();
    const c = await h.open(3);
    expect(await logOf(c)).toEqual([[0, 1, PID, 0, 2]]);
    expect(c.log.recoveryReport.fenced.ignoredFiles).toEqual([`${"0".padStart(20, "0")}.e1.log`]);
    await c.close();
  });

  test("a single-broker directory taken over in cluster mode: epoch 0's files are bounded at the first epoch's start", async () => {
    const h = harness();
    const single = await h.open(undefined);
    await produce(single, idempotent(0, 3));
    await single.close();
    expect(await h.fs.stat(`${DIR}/${"0".padStart(20, "0")}.log`)).toBeDefined();
    const b = await h.open(1);
    await produce(b, idempotent(3, 1, "b"));
    // The single broker, still running somewhere, appends late to its plain-named file.
    const late = buildBatch({ baseOffset: 3, partitionLeaderEpoch: 0, records: [{ value: "x" }] });
    const handle = await h.fs.open(`${DIR}/${"0".padStart(20, "0")}.log`, "rw");
    await handle.write(late, await handle.size());
    await handle.close();
    const c = await h.open(2);
    expect(await logOf(c)).toEqual([
      [0, 2, PID, 0, 0],
      [3, 3, PID, 3, 1],
    ]);
    await Promise.all([b.close(), c.close()]);
  });

  test("single-broker mode keeps the plain names and reads the plain history", async () => {
    const h = harness();
    const p = await h.open(undefined);
    await produce(p, idempotent(0, 1));
    await p.becomeLeader(3);
    await produce(p, idempotent(1, 1));
    await p.close();
    const names = await h.fs.readdir(DIR);
    expect(names.filter((n) => /\.e\d/.test(n))).toEqual([]);
    expect((await LeaderEpochHistory.load(h.fs, `${DIR}/${LEADER_EPOCH_CHECKPOINT_FILE}`)).all).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 3, startOffset: 1 },
    ]);
  });

  test("a cleaning pass over segments of two epochs names the cleaned segment with the newer one; the next owner reads it whole", async () => {
    const h = harness();
    const keyed = (key: string, value: string) => buildBatch({ records: [{ key, value }] });
    const small = testConfig({ segmentBytes: 1 });
    const a = await h.open(1, small);
    await produce(a, keyed("k", "a0"));
    await produce(a, keyed("j", "a1"));
    await a.close();
    const b = await h.open(2, small);
    await produce(b, keyed("k", "b2"));
    await produce(b, keyed("i", "b3"));
    await produce(b, keyed("j", "b4"));
    expect(b.log.segmentBaseOffsets).toEqual([0, 1, 2, 3, 4]);
    const outcome = await b.clean({
      nowMs: h.clock.nowMs(),
      config: { minCleanableDirtyRatio: 0.5, minCompactionLagMs: 0, maxCompactionLagMs: Number.MAX_SAFE_INTEGER, deleteRetentionMs: 1000, segmentBytes: 100_000, indexIntervalBytes: 128 },
      map: new OffsetMap(1 << 16, 0.9),
      throttle: async () => {},
      shouldStop: () => false,
      force: true,
    });
    expect(outcome.kind).toBe("cleaned");
    const cleaned = `${"0".padStart(20, "0")}.e2.log`;
    const names = await h.fs.readdir(DIR);
    expect(names).toContain(cleaned);
    expect(names.filter((n) => n.endsWith(".e1.log"))).toEqual([]);
    const values = async (p: Partition) => (await readAll(p.log)).map((x) => [x.baseOffset, parseBatchHeader(x.bytes).recordsCount]);
    const seen = await values(b);
    await b.close();
    const c = await h.open(3);
    expect(await values(c)).toEqual(seen);
    expect(c.log.recoveryReport.fenced.ignoredFiles).toEqual([]);
    expect(c.log.logEndOffset).toBe(5);
    await c.close();
  });

  test("a take-over cut short after its history was written: the former leader's later checkpoint counts only up to the new epoch's start", async () => {
    const h = harness();
    const a = await h.open(1, testConfig({ segmentBytes: 100_000, recoveryPointCheckpointIntervalMs: 1 }));
    await produce(a, idempotent(0, 3));
    // B recorded epoch 2 at offset 3 and crashed before anything else of its take-over.
    const history = await LeaderEpochHistory.loadNewest(h.fs, DIR);
    history.writeFileOf(DIR, 2);
    await history.assign(2, 3);
    // A goes on: appends, and its checkpoint now says offsets below 7 are durable.
    h.clock.advance(10);
    await lateAppends(a, 3);
    await a.log.settled();
    const c = await h.open(3);
    expect(await logOf(c)).toEqual([[0, 2, PID, 0, 1]]);
    expect(c.log.logEndOffset).toBe(3);
    expect(c.openTransactionCount).toBe(0);
    expect(c.leaderEpochHistory.all).toEqual([
      // Epoch 2 appended nothing: its successor at the same offset replaces it.
      { epoch: 1, startOffset: 0 },
      { epoch: 3, startOffset: 3 },
    ]);
    expect(c.log.recoveryReport.fenced.boundedSegments.map((b) => b.offset)).toEqual([3]);
    // A's dedupe window past offset 3 is not C's: the batch A appended late is new here.
    expect(await produce(c, idempotent(3, 4, "late"))).toBe(3);
    await Promise.all([a.close(), c.close()]);
  });

  test("a cleaning pass of a leader whose ownership is gone swaps nothing in, and the log goes on", async () => {
    const h = harness();
    let mayWrite = true;
    const keyed = (key: string, value: string) => buildBatch({ records: [{ key, value }] });
    const p = await Partition.open({
      fs: h.fs,
      clock: h.clock,
      topic: "takeover",
      partition: 0,
      dir: DIR,
      logConfig: testConfig({ segmentBytes: 1 }),
      timestampType: "create-time",
      warn: () => {},
      leaderEpoch: 1,
      mayWrite: () => mayWrite,
    });
    for (const [k, v] of [["k", "0"], ["k", "1"], ["k", "2"]] as const) await produce(p, keyed(k, v));
    const before = (await h.fs.readdir(DIR)).sort();
    mayWrite = false;
    const pass = p.clean({
      nowMs: h.clock.nowMs(),
      config: { minCleanableDirtyRatio: 0.5, minCompactionLagMs: 0, maxCompactionLagMs: Number.MAX_SAFE_INTEGER, deleteRetentionMs: 1000, segmentBytes: 100_000, indexIntervalBytes: 128 },
      map: new OffsetMap(1 << 16, 0.9),
      throttle: async () => {},
      shouldStop: () => false,
      force: true,
    });
    await expect(pass).rejects.toThrow("ownership is gone");
    expect(p.log.failed).toBeUndefined();
    // Nothing renamed or unlinked (the pass's own `.cleaned` files stay for the next owner's open to remove).
    const unchanged = (names: string[]) => names.filter((n) => !n.includes("cleaner-checkpoint") && !n.endsWith(".cleaned")).sort();
    expect(unchanged(await h.fs.readdir(DIR))).toEqual(unchanged(before));
    expect((await readAll(p.log)).map((b) => b.baseOffset)).toEqual([0, 1, 2]);
    await produce(p, keyed("k", "3"));
    await p.close();
    const next = await h.open(2);
    expect((await h.fs.readdir(DIR)).filter((n) => n.endsWith(".cleaned"))).toEqual([]);
    expect((await readAll(next.log)).map((b) => b.baseOffset)).toEqual([0, 1, 2, 3]);
    await next.close();
  });
});

describe("tmp files at a take-over", () => {
  test("a take-over removes only its own epoch's tmp files: a former leader's write in flight is left alone", async () => {
    const h = harness();
    const a = await h.open(1);
    await produce(a, idempotent(0, 2));
    await a.close();
    // A former leader (epoch 1) writing a snapshot, a crashed earlier attempt at epoch 2, a single-broker name.
    const former = `${DIR}/producer-state.e1.snapshot.0123456789abcdef.tmp`;
    const own = `${DIR}/producer-state.e2.snapshot.fedcba9876543210.tmp`;
    const plain = `${DIR}/log-checkpoint.json.00112233445566aa.tmp`;
    for (const path of [former, own, plain]) {
      const handle = await h.fs.open(path, "w");
      await handle.write(new Uint8Array([1, 2, 3]));
      await handle.close();
    }
    const b = await h.open(2);
    expect(await h.fs.stat(own)).toBeUndefined();
    expect(await h.fs.stat(former)).toBeDefined();
    expect(await h.fs.stat(plain)).toBeDefined();
    await b.close();
  });
});
