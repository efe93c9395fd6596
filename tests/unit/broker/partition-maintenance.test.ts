/**
 * The maintenance pass (broker/partitions.ts, runMaintenance: retention, producer expiry, snapshots) over
 * partitions that close while it runs: a topic deleted in the middle of a pass is passed over, and the
 * pass itself never fails for it. Such a failure was an unhandled rejection of the maintenance timer,
 * which ends the process.
 */
import { expect, test } from "bun:test";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { PartitionManager } from "../../../src/broker/partitions.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { TopicStore } from "../../../src/storage/topic-store.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

async function broker() {
  const fs = new MemoryFs();
  const clock = new ManualClock(1_700_000_000_000);
  const topics = await TopicStore.open(fs, DATA, clock);
  const partitions = new PartitionManager(fs, clock, silentLogger, { ...defaultBrokerConfig(), dataDir: DATA }, topics);
  return { fs, topics, partitions };
}

async function produce(partitions: PartitionManager, topic: string, partition: number): Promise<void> {
  const p = (await partitions.get(topic, partition))!;
  const bytes = buildBatch({ producerId: 7, producerEpoch: 0, baseSequence: 0, records: [{ value: "v" }] });
  const outcome = p.appendFromProducer(bytes, parseBatchHeader(bytes));
  if (outcome.kind !== "appended") throw new Error(outcome.kind);
  await outcome.written;
}

test("a topic deleted as the pass starts: its partitions are passed over, the others maintained", async () => {
  const { topics, partitions } = await broker();
  await topics.create({ name: "doomed", partitions: 3 });
  await topics.create({ name: "kept", partitions: 1 });
  for (let i = 0; i < 3; i++) await produce(partitions, "doomed", i);
  await produce(partitions, "kept", 0);
  const pass = partitions.runMaintenance();
  const closing = partitions.closeTopic("doomed");
  await expect(pass).resolves.toBeUndefined();
  await closing;
  partitions.topicDeleted("doomed");
  await partitions.close();
});

test("a partition closed half-way through its own steps: the pass goes on and resolves", async () => {
  const { topics, partitions } = await broker();
  await topics.create({ name: "doomed", partitions: 1 });
  await topics.create({ name: "kept", partitions: 1 });
  await produce(partitions, "doomed", 0);
  await produce(partitions, "kept", 0);
  const doomed = (await partitions.get("doomed", 0))!;
  // The topic is deleted once the pass has begun this partition's steps: the retention step finds its log
  // closing (and says so by throwing), which the pass must take as "passed over", not as its own failure.
  const retention = doomed.enforceRetention.bind(doomed);
  let closing: Promise<void> | undefined;
  doomed.enforceRetention = async (nowMs: number) => {
    closing = partitions.closeTopic("doomed");
    await closing;
    return retention(nowMs);
  };
  await expect(partitions.runMaintenance()).resolves.toBeUndefined();
  expect(closing).toBeDefined();
  await closing;
  expect(doomed.log.closed).toBe(true);
  partitions.topicDeleted("doomed");
  await partitions.close();
});
