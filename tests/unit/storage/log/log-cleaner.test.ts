/**
 * The log cleaner over a real Partition on the in-memory file system: the latest record of every key
 * survives with its offset, tombstones go after delete.retention.ms, aborted transactions' records go
 * and their markers only once nothing of them is left, the last stable offset bounds every pass, each
 * producer's last batch survives (so deduplication survives cleaning and a restart), and a kill at any
 * step of a pass leaves either the old segments or the new ones.
 */
import { describe, expect, test } from "bun:test";
import { OffsetMap } from "../../../../src/domain/compaction/offset-map.ts";
import type { TransactionVerifier } from "../../../../src/domain/txn/verifier.ts";
import { parseBatchHeader, parseControlRecord } from "../../../../src/protocol/records/record-batch.ts";
import { decodeRecords } from "../../../../src/protocol/records/records.ts";
import type { LogConfig } from "../../../../src/storage/log/partition-log.ts";
import { Partition, type CompactionConfig, type CleanOutcome } from "../../../../src/storage/partition.ts";
import { buildBatch, type TestRecord } from "../../../support/batch-builder.ts";
import { ManualClock } from "../../../support/manual-clock.ts";
import { MemoryFs, SimulatedHaltError } from "../../../support/memory-fs.ts";
import { CorruptStateError } from "../../../../src/errors/errors.ts";
import { patchFile, readAll, testConfig } from "./support.ts";

const DIR = "/data/compacted-0";
const DAY_MS = 24 * 3600 * 1000;

const allowAll: TransactionVerifier = { verifyBatch: () => "in-transaction" };

interface Harness {
  fs: MemoryFs;
  clock: ManualClock;
  config: LogConfig;
  open(): Promise<Partition>;
}

function harness(config: LogConfig = testConfig({ segmentBytes: 400 })): Harness {
  const h: Harness = {
    fs: new MemoryFs(),
    clock: new ManualClock(1_700_000_000_000),
    config,
    open: () =>
      Partition.open({
        fs: h.fs,
        clock: h.clock,
        topic: "compacted",
        partition: 0,
        dir: DIR,
        logConfig: h.config,
        timestampType: "create-time",
        warn: () => {},
        verifier: allowAll,
      }),
  };
  return h;
}

function compaction(overrides: Partial<CompactionConfig> = {}): CompactionConfig {
  return {
    minCleanableDirtyRatio: 0.5,
    minCompactionLagMs: 0,
    maxCompactionLagMs: Number.MAX_SAFE_INTEGER,
    deleteRetentionMs: DAY_MS,
    segmentBytes: 400,
    indexIntervalBytes: 128,
    ...overrides,
  };
}

async function clean(h: Harness, p: Partition, overrides: Partial<CompactionConfig> = {}, force = true): Promise<CleanOutcome> {
  return p.clean({
    nowMs: h.clock.nowMs(),
    config: compaction(overrides),
    map: new OffsetMap(1 << 20, 0.9),
    throttle: async () => {},
    shouldStop: () => false,
    force,
  });
}

interface Producer {
  producerId: number;
  epoch: number;
  sequence: number;
}

async function append(p: Partition, records: TestRecord[], producer?: Producer, transactional = false): Promise<number> {
  const bytes = buildBatch({
    records,
    ...(producer === undefined
      ? {}
      : { producerId: producer.producerId, producerEpoch: producer.epoch, baseSequence: producer.sequence, transactional }),
  });
  if (producer !== undefined) producer.sequence += records.length;
  const outcome = p.appendFromProducer(bytes, parseBatchHeader(bytes));
  if (outcome.kind !== "appended") throw new Error(`append refused: ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return outcome.baseOffset;
}

async function marker(p: Partition, producer: Producer, commit: boolean): Promise<number> {
  const outcome = await p.appendMarker({ producerId: producer.producerId, producerEpoch: producer.epoch, commit, coordinatorEpoch: 0 });
  if (!outcome.ok) throw new Error(`marker refused: ${JSON.stringify(outcome)}`);
  return outcome.offset;
}

/** Rolls the active segment so that everything written so far may be cleaned. */
async function roll(p: Partition): Promise<void> {
  // A record big enough to overflow the 400-byte segment starts a new one at the next append.
  await append(p, [{ key: "roll", value: "x".repeat(420) }]);
}

interface Seen {
  offset: number;
  key: string | null;
  value: string | null;
  control?: string;
  batchRecords: number;
}

const text = (b: Uint8Array | null): string | null => (b === null ? null : new TextDecoder().decode(b));

/** Every record (and marker) readable from the log start, in offset order. */
async function contents(p: Partition): Promise<Seen[]> {
  const out: Seen[] = [];
  for (const batch of await readAll(p.log)) {
    const header = parseBatchHeader(batch.bytes);
    if (header.isControl) {
      out.push({ offset: header.baseOffset, key: null, value: null, control: header.recordsCount > 0 ? parseControlRecord(batch.bytes).type : "empty", batchRecords: header.recordsCount });
      continue;
    }
    if (header.recordsCount === 0) out.push({ offset: header.baseOffset, key: null, value: null, control: "empty-data", batchRecords: 0 });
    for (const r of decodeRecords(batch.bytes)) out.push({ offset: r.offset, key: text(r.key), value: text(r.value), batchRecords: header.recordsCount });
  }
  return out;
}

const kv = (seen: Seen[]) => seen.filter((s) => s.control === undefined && s.key !== "roll").map((s) => [s.offset, s.key, s.value]);

describe("compaction", () => {
  test("keeps the latest record of every key at its original offset and never touches the active segment", async () => {
    const h = harness();
    const p = await h.open();
    for (let round = 0; round < 4; round++) {
      for (let k = 0; k < 3; k++) await append(p, [{ key: `k${k}`, value: `r${round}` }]);
    }
    await roll(p);
    await append(p, [{ key: "k0", value: "active" }]);
    const activeBase = p.log.activeSegmentBaseOffset;
    const before = await contents(p);
    const outcome = await clean(h, p);
    expect(outcome.kind).toBe("cleaned");
    const after = await contents(p);
    expect(kv(after)).toEqual([
      [9, "k0", "r3"],
      [10, "k1", "r3"],
      [11, "k2", "r3"],
      [13, "k0", "active"],
    ]);
    // The roll record is the latest of its key; the active segment is unchanged.
    expect(after.filter((s) => s.offset >= activeBase)).toEqual(before.filter((s) => s.offset >= activeBase));
    expect(p.log.logEndOffset).toBe(14);
    expect(p.log.cleanerCheckpoint.firstDirtyOffset).toBe(activeBase);
    if (outcome.kind === "cleaned") {
      expect(outcome.stats.recordsRemoved).toBe(9);
      expect(outcome.stats.sizeAfterBytes).toBeLessThan(outcome.stats.sizeBeforeBytes);
    }
    await p.close();

    // After a restart the cleaned log reads the same, its gaps are not taken for damage, and a fetch
    // in a gap starts at the next record.
    const reopened = await h.open();
    expect(await contents(reopened)).toEqual(after);
    const fromGap = await reopened.log.read(2, 1 << 20, { minOneBatch: true });
    expect(fromGap.kind === "records" && parseBatchHeader(fromGap.bytes).baseOffset).toBe(9);
    await reopened.close();
  });

  test("the dirty ratio decides when a pass runs, and a second pass finds nothing to do", async () => {
    const h = harness();
    const p = await h.open();
    for (let round = 0; round < 3; round++) for (let k = 0; k < 3; k++) await append(p, [{ key: `k${k}`, value: `r${round}` }]);
    await roll(p);
    const first = await clean(h, p, {}, false);
    expect(first.kind).toBe("cleaned");
    const second = await clean(h, p, {}, false);
    expect(second.kind).toBe("not-needed");
    expect(second.range.dirtyBytes).toBe(0);
    await p.close();
  });

  test("tombstones stay until delete.retention.ms after the pass that first kept them, then go", async () => {
    const h = harness();
    const p = await h.open();
    await append(p, [{ key: "a", value: "1" }]);
    await append(p, [{ key: "b", value: "1" }]);
    await append(p, [{ key: "a", value: null }]);
    await roll(p);
    await clean(h, p);
    expect(kv(await contents(p))).toEqual([
      [1, "b", "1"],
      [2, "a", null],
    ]);
    expect(p.log.cleanerCheckpoint.pendingDeleteHorizonMs).toBe(h.clock.nowMs() + DAY_MS);

    h.clock.advance(DAY_MS - 1);
    await clean(h, p);
    expect(kv(await contents(p))).toEqual([
      [1, "b", "1"],
      [2, "a", null],
    ]);
    h.clock.advance(1);
    // No new dirty data: the pass is due because of the pending delete horizon alone.
    const due = await clean(h, p, {}, false);
    expect(due.kind === "cleaned" && due.reason).toBe("delete-horizon");
    expect(kv(await contents(p))).toEqual([[1, "b", "1"]]);
    await p.close();
  });

  test("aborted transactions' records go; the abort marker stays while its data is being removed, then goes after its horizon", async () => {
    const h = harness();
    const p = await h.open();
    const aborter: Producer = { producerId: 7, epoch: 0, sequence: 0 };
    const committer: Producer = { producerId: 8, epoch: 0, sequence: 0 };
    await append(p, [{ key: "x", value: "plain" }]);
    await append(p, [{ key: "x", value: "aborted" }, { key: "y", value: "aborted" }], aborter, true);
    await append(p, [{ key: "y", value: "committed" }], committer, true);
    const abortAt = await marker(p, aborter, false);
    const commitAt = await marker(p, committer, true);
    expect(p.abortedTransactionIndex().map((t) => t.lastOffset)).toEqual([abortAt]);
    await roll(p);

    await clean(h, p);
    const first = await contents(p);
    expect(kv(first)).toEqual([
      [0, "x", "plain"],
      [3, "y", "committed"],
    ]);
    // The aborted batch was the aborter's last data batch: it stays, emptied, so its sequence survives;
    // that keeps the abort marker (and its index entry) too.
    expect(first.filter((s) => s.control !== undefined).map((s) => [s.offset, s.control])).toEqual([
      [1, "empty-data"],
      [abortAt, "abort"],
      [commitAt, "commit"],
    ]);
    expect(p.abortedTransactionIndex().map((t) => [t.producerId, t.firstOffset, t.lastOffset])).toEqual([[7, 1, abortAt]]);

    // A read_committed fetch of the cleaned range still learns of the aborted transaction.
    expect(p.abortedTransactions(0, commitAt + 1).map((t) => t.producerId)).toEqual([7]);
    await p.close();
  });

  test("an aborted transaction that ended before the dirty section does not hide its producer's later committed records from the map", async () => {
    const h = harness();
    const p = await h.open();
    const producer: Producer = { producerId: 9, epoch: 0, sequence: 0 };
    await append(p, [{ key: "a", value: "aborted" }], producer, true);
    const abortAt = await marker(p, producer, false);
    await roll(p);
    await clean(h, p);
    // The aborted transaction (still in the index: its emptied batch stays) lies wholly below the next pass's dirty section.
    expect(p.abortedTransactionIndex().map((t) => t.lastOffset)).toEqual([abortAt]);
    const dirtyFrom = p.log.cleanerCheckpoint.firstDirtyOffset;
    const oldAt = await append(p, [{ key: "a", value: "old" }]);
    const newAt = await append(p, [{ key: "a", value: "new" }], producer, true);
    await marker(p, producer, true);
    await roll(p);
    expect(oldAt).toBeGreaterThan(abortAt);
    expect(oldAt).toBeGreaterThanOrEqual(dirtyFrom);
    await clean(h, p);
    // The committed record is mapped, so the plain one it supersedes goes.
    expect(kv(await contents(p)).filter(([, key]) => key === "a")).toEqual([[newAt, "a", "new"]]);
    await p.close();
  });

  test("markers of transactions with nothing left go after delete.retention.ms", async () => {
    const h = harness();
    const p = await h.open();
    const txn: Producer = { producerId: 9, epoch: 0, sequence: 0 };
    const other: Producer = { producerId: 10, epoch: 0, sequence: 0 };
    await append(p, [{ key: "k", value: "in-txn" }], txn, true);
    const commitAt = await marker(p, txn, true);
    // The same producer writes again later, so the transactional batch is no longer its last one; and
    // another key overwrite makes the transactional record obsolete.
    await append(p, [{ key: "k", value: "later" }], other);
    await append(p, [{ key: "z", value: "1" }], txn);
    await roll(p);

    await clean(h, p);
    // The committed record is obsolete and goes; this pass still met it, so its marker stays as it is.
    const markers = async () => (await contents(p)).filter((s) => s.control === "commit").map((s) => s.offset);
    expect(await markers()).toEqual([commitAt]);
    expect(p.log.cleanerCheckpoint.pendingDeleteHorizonMs).toBe(-1);
    // The next pass finds no data of the transaction: the marker starts its delete.retention.ms.
    await clean(h, p);
    expect(await markers()).toEqual([commitAt]);
    expect(p.log.cleanerCheckpoint.pendingDeleteHorizonMs).toBe(h.clock.nowMs() + DAY_MS);
    h.clock.advance(DAY_MS - 1);
    await clean(h, p);
    expect(await markers()).toEqual([commitAt]);
    h.clock.advance(1);
    await clean(h, p);
    expect(await markers()).toEqual([]);
    expect(kv(await contents(p))).toEqual([
      [2, "k", "later"],
      [3, "z", "1"],
    ]);
    await p.close();
  });

  test("nothing at or past the first offset of an open transaction is cleaned", async () => {
    const h = harness();
    const p = await h.open();
    const open: Producer = { producerId: 11, epoch: 0, sequence: 0 };
    await append(p, [{ key: "a", value: "1" }]);
    await append(p, [{ key: "a", value: "2" }]);
    await roll(p);
    const openAt = await append(p, [{ key: "b", value: "undecided" }], open, true);
    await roll(p);
    await append(p, [{ key: "a", value: "3" }]);
    await roll(p);
    expect(p.lastStableOffset).toBe(openAt);
    const outcome = await clean(h, p);
    expect(outcome.range.firstUncleanableOffset).toBeLessThanOrEqual(openAt);
    // "a"=1 went (a later "a" is below the LSO); the records at and after the open transaction stay.
    const seen = kv(await contents(p));
    expect(seen).toEqual([
      [1, "a", "2"],
      [openAt, "b", "undecided"],
      [openAt + 2, "a", "3"],
    ]);
    await p.close();
  });

  test("a producer's last batch survives cleaning emptied, so a retry after a restart is still a duplicate", async () => {
    const h = harness();
    const p = await h.open();
    const producer: Producer = { producerId: 12, epoch: 0, sequence: 0 };
    await append(p, [{ key: "a", value: "1" }], producer);
    await append(p, [{ key: "a", value: "2" }], producer);
    const retry = buildBatch({ records: [{ key: "a", value: "2" }], producerId: 12, producerEpoch: 0, baseSequence: 1 });
    await append(p, [{ key: "a", value: "3" }]);
    await roll(p);
    await clean(h, p);
    const seen = await contents(p);
    expect(seen.filter((s) => s.offset === 1)).toEqual([{ offset: 1, key: null, value: null, control: "empty-data", batchRecords: 0 }]);
    expect(kv(seen)).toEqual([[2, "a", "3"]]);
    // Crash (no clean close, no final snapshot): producer state is rebuilt by replaying the cleaned log.
    h.fs.crash();
    const reopened = await h.open();
    const outcome = reopened.appendFromProducer(retry, parseBatchHeader(retry));
    expect(outcome).toEqual({ kind: "duplicate", baseOffset: 1, logAppendTimeMs: -1 });
    await reopened.close();
  });
});

describe("reads during a pass", () => {
  test("readers see the old records or the cleaned ones, never bytes of one segment read under another's name", async () => {
    const h = harness();
    const p = await h.open();
    for (let round = 0; round < 6; round++) {
      for (let k = 0; k < 4; k++) await append(p, [{ key: `k${k}`, value: `r${round}` }]);
      await roll(p);
    }
    const before = new Set(kv(await contents(p)).map((r) => JSON.stringify(r)));
    let finished = false;
    const cleaning = clean(h, p).finally(() => (finished = true));
    let reads = 0;
    while (!finished) {
      // Each read goes on while the pass maps, writes and swaps; a close racing a swap must not hang either.
      const seen = kv(await contents(p));
      for (const record of seen) expect(before.has(JSON.stringify(record))).toBe(true);
      // The latest value of every key is always there.
      for (let k = 0; k < 4; k++) expect(seen.some(([, key, value]) => key === `k${k}` && value === "r5")).toBe(true);
      reads++;
    }
    await cleaning;
    expect(reads).toBeGreaterThan(1);
    await p.close();
  });
});

describe("a damaged batch stops the pass", () => {
  test("a batch whose CRC does not match is never rewritten with a fresh CRC: the pass fails and the log is unchanged", async () => {
    const h = harness();
    const p = await h.open();
    for (let round = 0; round < 3; round++) await append(p, [{ key: "a", value: `value-${round}` }]);
    await roll(p);
    const before = (await readAll(p.log)).map((b) => b.bytes);
    // Flip a byte inside the second batch's value (batches here are 70-odd bytes).
    const second = (await readAll(p.log))[1]!;
    const position = before[0]!.length + second.bytes.length - 3;
    await patchFile(h.fs, `${DIR}/${"0".padStart(20, "0")}.log`, position, new Uint8Array([0xff]));
    await expect(clean(h, p)).rejects.toThrow(CorruptStateError);
    expect(p.log.cleanerCheckpoint.firstDirtyOffset).toBe(-1);
    expect(p.log.segmentBaseOffsets).toEqual([0, 3]);
    expect(h.fs.log.some((entry) => entry.includes(".cleaned") && entry.startsWith("rename"))).toBe(false);
    expect((await h.fs.readdir(DIR)).filter((name) => name.endsWith(".cleaned"))).toEqual([]);
    await p.close();
  });
});

describe("a damaged batch in a later group", () => {
  test("is found while mapping, before any group is swapped in: no segment is replaced by a pass whose map read it", async () => {
    const h = harness();
    const p = await h.open();
    // Several segments, each its own group (segment.bytes 400): the damaged batch is in the last one.
    for (let round = 0; round < 4; round++) {
      for (let k = 0; k < 3; k++) await append(p, [{ key: `k${k}`, value: `value-${round}` }]);
      await roll(p);
    }
    const segments = p.log.segmentBaseOffsets;
    expect(segments.length).toBeGreaterThan(3);
    const lastInactive = segments[segments.length - 2]!;
    const file = `${DIR}/${String(lastInactive).padStart(20, "0")}.log`;
    // The last byte of the segment's first batch (its first record's value).
    const first = (await readAll(p.log)).find((b) => b.baseOffset === lastInactive)!;
    await patchFile(h.fs, file, first.bytes.length - 2, new Uint8Array([0xff]));
    await expect(clean(h, p)).rejects.toThrow(CorruptStateError);
    expect(p.log.segmentBaseOffsets).toEqual(segments);
    expect(h.fs.log.some((entry) => entry.includes(".cleaned") && entry.startsWith("rename"))).toBe(false);
    await p.close();
  });
});

describe("compaction survives a kill at every step", () => {
  test("a restart after a crash at any operation of a pass sees the old segments or the new ones, never a mix", async () => {
    /** Builds the same log each time; returns the partition and its contents before cleaning. */
    async function setup(): Promise<{ h: Harness; p: Partition; before: Seen[] }> {
      const h = harness();
      const p = await h.open();
      const txn: Producer = { producerId: 20, epoch: 0, sequence: 0 };
      for (let round = 0; round < 3; round++) {
        for (let k = 0; k < 4; k++) await append(p, [{ key: `k${k}`, value: `r${round}` }]);
        await roll(p);
      }
      await append(p, [{ key: "k1", value: "aborted" }], txn, true);
      await marker(p, txn, false);
      await append(p, [{ key: "k3", value: null }]);
      await roll(p);
      return { h, p, before: await contents(p) };
    }
    const reference = await setup();
    await clean(reference.h, reference.p);
    const cleaned = await contents(reference.p);
    // Each segment of the cleaned log is one group of the pass, swapped in as a whole.
    const groups = [...reference.p.log.segmentBaseOffsets, Number.MAX_SAFE_INTEGER];
    const opsUsed = reference.h.fs.log.length;
    await reference.p.close();
    expect(kv(cleaned)).not.toEqual(kv(reference.before));

    const inRange = (seen: Seen[], from: number, to: number) => JSON.stringify(kv(seen.filter((s) => s.offset >= from && s.offset < to)));
    let sawOld = 0;
    let sawNew = 0;
    for (let n = 0; ; n++) {
      const { h, p, before } = await setup();
      const start = h.fs.log.length;
      h.fs.haltAfterOps(n);
      let halted = false;
      try {
        await clean(h, p);
      } catch (error) {
        if (!(error instanceof SimulatedHaltError) && !(error instanceof Error && error.cause instanceof SimulatedHaltError)) throw error;
        halted = true;
      }
      h.fs.crash();
      h.fs.clearFaults();
      const reopened = await h.open();
      const seen = await contents(reopened);
      for (let g = 0; g + 1 < groups.length; g++) {
        const [from, to] = [groups[g]!, groups[g + 1]!];
        const now = inRange(seen, from, to);
        if (now !== inRange(before, from, to) && now !== inRange(cleaned, from, to)) {
          throw new Error(`after a crash at operation ${n} of the pass, offsets [${from}, ${to}) hold ${now}`);
        }
      }
      if (JSON.stringify(kv(seen)) === JSON.stringify(kv(before))) sawOld++;
      if (JSON.stringify(kv(seen)) === JSON.stringify(kv(cleaned))) sawNew++;
      // The aborted record is never shown to read_committed as committed, whichever state survived.
      const abortedRecord = seen.find((s) => s.value === "aborted");
      if (abortedRecord !== undefined) {
        const covering = reopened.abortedTransactions(abortedRecord.offset, abortedRecord.offset + 1);
        expect(covering.map((t) => t.producerId)).toEqual([20]);
      }
      await reopened.close();
      if (!halted) {
        expect(h.fs.log.length - start).toBeLessThanOrEqual(opsUsed);
        break;
      }
    }
    expect(sawOld).toBeGreaterThan(0);
    expect(sawNew).toBeGreaterThan(0);
  });
});
