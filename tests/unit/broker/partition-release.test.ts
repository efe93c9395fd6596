/**
 * Handing a partition over: `release` closes it once its appends are written, so that another broker's
 * manager, on the same data directory, opens it with everything (records and producer windows), and the
 * releasing manager opens it again from disk on its next `get`.
 */
import { describe, expect, test } from "bun:test";
import { PartitionManager } from "../../../src/broker/partitions.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { TopicStore } from "../../../src/storage/topic-store.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

async function managerOn(fs: MemoryFs, clock: ManualClock): Promise<{ topics: TopicStore; partitions: PartitionManager }> {
  const topics = await TopicStore.open(fs, DATA, clock);
  const config = { ...defaultBrokerConfig(), dataDir: DATA };
  return { topics, partitions: new PartitionManager(fs, clock, silentLogger, config, topics) };
}

describe("PartitionManager.release", () => {
  test("another manager on the same directory opens the partition with everything the first one wrote", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    const a = await managerOn(fs, clock);
    await a.topics.create({ name: "orders", partitions: 2 });
    const partition = (await a.partitions.get("orders", 1))!;
    const bytes = buildBatch({ producerId: 7, producerEpoch: 0, baseSequence: 0, records: [{ value: "one" }, { value: "two" }] });
    const outcome = partition.appendFromProducer(bytes, parseBatchHeader(bytes));
    if (outcome.kind !== "appended") throw new Error(outcome.kind);
    // Released while the append may still be in flight: release waits for it.
    await a.partitions.release("orders", 1);
    expect(partition.closing).toBe(true);

    const b = await managerOn(fs, clock);
    const taken = (await b.partitions.get("orders", 1))!;
    expect(taken.log.logEndOffset).toBe(2);
    // The producer's window came along: the same batch again is a duplicate, not a new append.
    const again = taken.appendFromProducer(bytes, parseBatchHeader(bytes));
    expect(again.kind).toBe("duplicate");
    await b.partitions.release("orders", 1);

    // The first manager opens it again from disk, not from what it had in memory.
    const reopened = (await a.partitions.get("orders", 1))!;
    expect(reopened).not.toBe(partition);
    expect(reopened.log.logEndOffset).toBe(2);
    await a.partitions.close();
    await b.partitions.close();
  });

  test("releasing a partition that is not open resolves at once", async () => {
    const fs = new MemoryFs();
    const a = await managerOn(fs, new ManualClock(0));
    await a.partitions.release("nothing", 0);
  });
});
