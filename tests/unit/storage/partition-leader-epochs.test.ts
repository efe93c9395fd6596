/**
 * Leader epochs in a partition (storage/partition.ts with storage/log/leader-epoch-checkpoint.ts): a new
 * partition leads at epoch 0 from offset 0 without writing a file, every appended batch is stamped with the
 * current epoch, becomeLeader records a higher epoch at the log end durably, DeleteRecords and retention
 * truncate the history from the start, and an open re-derives the history from the recovered log.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochHistory } from "../../../src/storage/log/leader-epoch-checkpoint.ts";
import type { LogConfig } from "../../../src/storage/log/partition-log.ts";
import { Partition } from "../../../src/storage/partition.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { readAll, testConfig } from "./log/support.ts";

const DIR = "/data/epochs-0";
const CHECKPOINT = `${DIR}/${LEADER_EPOCH_CHECKPOINT_FILE}`;

function harness(config: LogConfig = testConfig({ segmentBytes: 100_000 })) {
  const fs = new MemoryFs();
  const clock = new ManualClock();
  const open = () =>
    Partition.open({ fs, clock, topic: "epochs", partition: 0, dir: DIR, logConfig: config, timestampType: "create-time", warn: () => {} });
  return { fs, clock, open };
}

/** Appends `records` records in one plain batch (produced with the client's -1 epoch) and waits until durable. */
async function appendRecords(p: Partition, records: number): Promise<void> {
  const bytes = buildBatch({ records: Array.from({ length: records }, (_, i) => ({ value: `v${i}` })) });
  const outcome = p.appendFromProducer(bytes, parseBatchHeader(bytes));
  if (outcome.kind !== "appended") throw new Error(`expected an append, got ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
}

/** Every stored batch's (base offset, partitionLeaderEpoch). */
async function stamps(p: Partition): Promise<[number, number][]> {
  return (await readAll(p.log)).map((b) => [b.baseOffset, parseBatchHeader(b.bytes).partitionLeaderEpoch]);
}

describe("partition leader epochs", () => {
  test("a new partition leads at epoch 0 from offset 0, stamps its batches 0 and writes no file", async () => {
    const h = harness();
    const p = await h.open();
    expect(p.leaderEpoch).toBe(0);
    expect(p.leaderEpochHistory.all).toEqual([{ epoch: 0, startOffset: 0 }]);
    await appendRecords(p, 3);
    await appendRecords(p, 2);
    expect(await stamps(p)).toEqual([
      [0, 0],
      [3, 0],
    ]);
    expect(p.endOffsetForEpoch(0)).toEqual({ epoch: 0, endOffset: 5 });
    await p.close();
    expect(await h.fs.stat(CHECKPOINT)).toBeUndefined();
  });

  test("becomeLeader records a higher epoch at the log end durably; appends and markers carry it", async () => {
    const h = harness();
    const p = await h.open();
    await appendRecords(p, 5);
    await p.becomeLeader(3);
    expect(p.leaderEpoch).toBe(3);
    await appendRecords(p, 2);
    const marker = await p.appendMarker({ producerId: 7, producerEpoch: 0, commit: false, coordinatorEpoch: 0 });
    expect(marker).toEqual({ ok: true, offset: 7 });
    expect(await stamps(p)).toEqual([
      [0, 0],
      [5, 3],
      [7, 3],
    ]);
    // Apache's answers: an older epoch ends where the next starts, the latest at the log end, one in
    // between at the next recorded start, one above the latest is undefined.
    expect(p.endOffsetForEpoch(0)).toEqual({ epoch: 0, endOffset: 5 });
    expect(p.endOffsetForEpoch(2)).toEqual({ epoch: 0, endOffset: 5 });
    expect(p.endOffsetForEpoch(3)).toEqual({ epoch: 3, endOffset: 8 });
    expect(p.endOffsetForEpoch(4)).toEqual({ epoch: -1, endOffset: -1 });

    // A crash (no close) keeps the epoch: it was durable before becomeLeader resolved.
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.leaderEpoch).toBe(3);
    expect(reopened.leaderEpochHistory.all).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 3, startOffset: 5 },
    ]);
    await reopened.close();
  });

  test("an epoch assigned at the log end survives a restart before anything is appended at it", async () => {
    const h = harness();
    const p = await h.open();
    await appendRecords(p, 4);
    await p.becomeLeader(2);
    await p.close();
    const reopened = await h.open();
    expect(reopened.leaderEpoch).toBe(2);
    expect(reopened.endOffsetForEpoch(0)).toEqual({ epoch: 0, endOffset: 4 });
    await reopened.close();
  });

  test("the same epoch again changes nothing; a lower one is refused and changes nothing", async () => {
    const h = harness();
    const p = await h.open();
    await p.becomeLeader(0);
    expect(await h.fs.stat(CHECKPOINT)).toBeUndefined();
    await p.becomeLeader(4);
    await expect(p.becomeLeader(2)).rejects.toBeInstanceOf(CorruptStateError);
    expect(p.leaderEpoch).toBe(4);
    await appendRecords(p, 1);
    expect(await stamps(p)).toEqual([[0, 4]]);
    await p.close();
  });

  test("DeleteRecords truncates the history from the start, durably", async () => {
    const h = harness();
    const p = await h.open();
    await appendRecords(p, 5);
    await p.becomeLeader(3);
    await appendRecords(p, 5);
    expect(await p.deleteRecordsBefore(7)).toEqual({ kind: "ok", logStartOffset: 7 });
    expect(p.leaderEpochHistory.all).toEqual([{ epoch: 3, startOffset: 7 }]);
    expect((await LeaderEpochHistory.load(h.fs, CHECKPOINT)).all).toEqual([{ epoch: 3, startOffset: 7 }]);
    // Below every recorded epoch: the requested epoch ends at the log start (Apache's answer).
    expect(p.endOffsetForEpoch(0)).toEqual({ epoch: 0, endOffset: 7 });
    await p.close();
  });

  test("retention moving the log start truncates the history", async () => {
    const h = harness(testConfig({ segmentBytes: 200, retentionBytes: 0 }));
    const p = await h.open();
    for (let i = 0; i < 4; i++) await appendRecords(p, 2);
    await p.becomeLeader(1);
    for (let i = 0; i < 4; i++) await appendRecords(p, 2);
    expect(p.log.segmentCount).toBeGreaterThan(2);
    let retention;
    do retention = await p.enforceRetention(h.clock.nowMs());
    while (retention.more);
    expect(p.log.logStartOffset).toBeGreaterThan(8);
    expect(p.leaderEpochHistory.all).toEqual([{ epoch: 1, startOffset: p.log.logStartOffset }]);
    expect((await LeaderEpochHistory.load(h.fs, CHECKPOINT)).all).toEqual(p.leaderEpochHistory.all);
    await p.close();
  });

  test("a data directory without the file (written before leader epochs) opens at the implied (0, 0), writing nothing", async () => {
    const h = harness();
    const p = await h.open();
    await appendRecords(p, 3);
    await p.log.deleteRecordsBefore(2); // the log start moves as an older broker moved it, history untouched
    await p.close();
    expect(await h.fs.stat(CHECKPOINT)).toBeUndefined();
    const reopened = await h.open();
    expect(reopened.leaderEpoch).toBe(0);
    expect(reopened.leaderEpochHistory.all).toEqual([{ epoch: 0, startOffset: 2 }]);
    expect(reopened.endOffsetForEpoch(0)).toEqual({ epoch: 0, endOffset: 3 });
    expect(await h.fs.stat(CHECKPOINT)).toBeUndefined();
    await reopened.close();
  });

  test("at open, an epoch starting past the recovered log end is dropped (its data was lost)", async () => {
    const h = harness();
    const p = await h.open();
    await appendRecords(p, 3);
    await p.becomeLeader(2);
    await p.close();
    // A history that names an epoch past the log's end, as if the data it appended was lost.
    const history = await LeaderEpochHistory.load(h.fs, CHECKPOINT);
    await history.assign(5, 9);
    const reopened = await h.open();
    expect(reopened.leaderEpoch).toBe(2);
    expect(reopened.leaderEpochHistory.all).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 3 },
    ]);
    await reopened.close();
  });
});
