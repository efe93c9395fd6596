/**
 * Cluster mode's partition hosting (broker/partitions.ts): nothing is opened on demand, `acquire` takes a
 * partition over at a leader epoch from the shared files (dropping whatever this process had of it), and
 * `release` hands it over. Two managers on one directory play two brokers.
 */
import { describe, expect, test } from "bun:test";
import { PartitionManager, type PartitionHosting } from "../../../src/broker/partitions.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { TopicStore } from "../../../src/storage/topic-store.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

async function managerOn(fs: MemoryFs, clock: ManualClock, hosting: PartitionHosting = { clusterMode: true }) {
  const topics = await TopicStore.open(fs, DATA, clock);
  const config = { ...defaultBrokerConfig(), dataDir: DATA };
  return { topics, partitions: new PartitionManager(fs, clock, silentLogger, config, topics, undefined, hosting) };
}

function batch(baseSequence: number, records: number): Uint8Array {
  return buildBatch({ producerId: 7, producerEpoch: 0, baseSequence, records: Array.from({ length: records }, (_, i) => ({ value: `v${i}` })) });
}

describe("PartitionManager in cluster mode", () => {
  test("a marker for a partition not led here (not acquired, or its lease lapsed before or after the write) is retried, never dropped", async () => {
    const fs = new MemoryFs();
    let mayWrite = true;
    let checks = 0;
    /** When set, the lease lapses right after this many checks said yes. */
    let lapseAfter: number | undefined;
    const a = await managerOn(fs, new ManualClock(1_700_000_000_000), {
      clusterMode: true,
      mayWrite: () => {
        checks++;
        if (lapseAfter !== undefined && checks > lapseAfter) return false;
        return mayWrite;
      },
    });
    await a.topics.create({ name: "orders", partitions: 1 });
    const marker = { producerId: 7, producerEpoch: 0, commit: true, coordinatorEpoch: 1 };
    // Not acquired: NOT_LEADER_OR_FOLLOWER (the watcher and the coordinator retry it), not "gone".
    expect(await a.partitions.writeMarker("orders", 0, marker)).toMatchObject({ ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER });
    // A partition that does not exist is gone.
    expect(await a.partitions.writeMarker("orders", 5, marker)).toMatchObject({ ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION });
    await a.partitions.acquire("orders", 0, 1);
    mayWrite = false;
    expect(await a.partitions.writeMarker("orders", 0, marker)).toMatchObject({ ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER });
    // Lapsed while the marker was being made durable: written, but answered as not led, so it is retried.
    mayWrite = true;
    checks = 0;
    lapseAfter = 1;
    expect(await a.partitions.writeMarker("orders", 0, marker)).toMatchObject({ ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER });
    expect(checks).toBe(2);
    lapseAfter = undefined;
    expect(await a.partitions.writeMarker("orders", 0, marker)).toMatchObject({ ok: true });
    await a.partitions.close();
  });

  test("openAll opens nothing and get answers undefined until the partition is acquired", async () => {
    const fs = new MemoryFs();
    const a = await managerOn(fs, new ManualClock(1_700_000_000_000));
    await a.topics.create({ name: "orders", partitions: 2 });
    await a.partitions.openAll();
    expect(await a.partitions.openPartitions()).toEqual([]);
    expect(await a.partitions.get("orders", 0)).toBeUndefined();
    const files = (await fs.stat(`${DATA}/orders-0`)) === undefined ? [] : await fs.readdir(`${DATA}/orders-0`);
    expect(files.filter((n) => n.endsWith(".log"))).toEqual([]);
    await a.partitions.acquire("orders", 0, 1);
    const p = (await a.partitions.get("orders", 0))!;
    expect(p.leaderEpoch).toBe(1);
    expect(await a.partitions.get("orders", 1)).toBeUndefined();
    await a.partitions.release("orders", 0);
    expect(await a.partitions.get("orders", 0)).toBeUndefined();
    await a.partitions.close();
  });

  test("a take-over by another broker reads what the first wrote; a re-acquire here drops what this process had", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    const a = await managerOn(fs, clock);
    await a.topics.create({ name: "orders", partitions: 1 });
    await a.partitions.acquire("orders", 0, 1);
    const first = (await a.partitions.get("orders", 0))!;
    const one = batch(0, 2);
    const outcome = first.appendFromProducer(one, parseBatchHeader(one));
    if (outcome.kind !== "appended") throw new Error(outcome.kind);
    await outcome.written;
    await first.log.flush();

    // B takes over without A releasing (A is frozen): it reads A's records and producer window.
    const b = await managerOn(fs, clock);
    await b.partitions.acquire("orders", 0, 2);
    const taken = (await b.partitions.get("orders", 0))!;
    expect(taken.log.logEndOffset).toBe(2);
    expect(taken.leaderEpoch).toBe(2);
    expect(taken.appendFromProducer(one, parseBatchHeader(one)).kind).toBe("duplicate");
    const two = batch(2, 1);
    const appended = taken.appendFromProducer(two, parseBatchHeader(two));
    if (appended.kind !== "appended") throw new Error(appended.kind);
    await appended.written;
    await taken.log.flush();
    await b.partitions.release("orders", 0);

    // A acquires again at epoch 3: its old partition is closed, the new one has B's append.
    await a.partitions.acquire("orders", 0, 3);
    const again = (await a.partitions.get("orders", 0))!;
    expect(again).not.toBe(first);
    expect(first.closing).toBe(true);
    expect(again.log.logEndOffset).toBe(3);
    expect(again.leaderEpoch).toBe(3);
    // A stale epoch is refused: a newer leader wrote the files.
    await a.partitions.release("orders", 0);
    await expect(a.partitions.acquire("orders", 0, 2)).rejects.toBeInstanceOf(CorruptStateError);
    expect(await a.partitions.openPartitions()).toEqual([]);
    await a.partitions.close();
    await b.partitions.close();
  });

  test("acquire refuses a partition that does not exist, and single-broker mode has no acquire", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(0);
    const a = await managerOn(fs, clock);
    await a.topics.create({ name: "orders", partitions: 1 });
    await expect(a.partitions.acquire("orders", 1, 1)).rejects.toThrow("does not exist");
    await expect(a.partitions.acquire("nothing", 0, 1)).rejects.toThrow("does not exist");
    const single = await managerOn(fs, clock, {});
    await expect(single.partitions.acquire("orders", 0, 1)).rejects.toThrow("cluster mode");
    expect(await single.partitions.get("orders", 0)).toBeDefined();
    await single.partitions.close();
    await a.partitions.close();
  });

  test("retention of a partition whose ownership is gone deletes no file; the next owner's does", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    let current = 1;
    const a = await managerOn(fs, clock, { clusterMode: true, mayWrite: (_t, _p, epoch) => epoch >= current });
    await a.topics.create({ name: "logs", partitions: 1, configs: { "retention.bytes": "0", "segment.bytes": "100" } });
    await a.partitions.acquire("logs", 0, 1);
    const p = (await a.partitions.get("logs", 0))!;
    for (let i = 0; i < 3; i++) {
      const bytes = batch(i, 1);
      const outcome = p.appendFromProducer(bytes, parseBatchHeader(bytes));
      if (outcome.kind !== "appended") throw new Error(outcome.kind);
      await outcome.written;
      await p.log.flush();
    }
    const logs = async () => (await fs.readdir(`${DATA}/logs-0`)).filter((n) => n.endsWith(".log")).sort();
    const before = await logs();
    expect(before.length).toBeGreaterThan(1);
    // Epoch 1 is fenced: its retention changes memory only, every file stays for the next owner.
    current = 2;
    await a.partitions.runMaintenance();
    expect(await logs()).toEqual(expect.arrayContaining(before));

    const b = await managerOn(fs, clock, { clusterMode: true, mayWrite: (_t, _p, epoch) => epoch >= current });
    await b.partitions.acquire("logs", 0, 2);
    await b.partitions.runMaintenance();
    const after = await logs();
    expect(after.filter((n) => before.includes(n))).toEqual([]);
    await a.partitions.close();
    await b.partitions.close();
  });
});
