/**
 * What the partition manager logs about crash recovery: nothing for a partition opened for the first time
 * (a topic just created) or after a clean close, a line after an unclean shutdown of an existing partition.
 */
import { describe, expect, test } from "bun:test";
import { PartitionManager } from "../../../src/broker/partitions.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { TopicStore } from "../../../src/storage/topic-store.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { waitUntil } from "../../support/wait.ts";

const DATA = "/data";

function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const record = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
  };
  return { log: { debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error") }, lines };
}

async function managerOn(fs: MemoryFs, clock: ManualClock, log: Logger): Promise<{ topics: TopicStore; partitions: PartitionManager }> {
  const topics = await TopicStore.open(fs, DATA, clock);
  const config = { ...defaultBrokerConfig(), dataDir: DATA };
  return { topics, partitions: new PartitionManager(fs, clock, log, config, topics) };
}

const recoveryLines = (lines: string[]) => lines.filter((l) => l.includes("recovered"));

describe("PartitionManager recovery logging", () => {
  test("a new partition's first open logs no recovery; a crash of an existing one does", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(1_700_000_000_000);
    const first = recordingLogger();
    const a = await managerOn(fs, clock, first.log);
    await a.topics.create({ name: "orders", partitions: 2 });
    const partition = (await a.partitions.get("orders", 0))!;
    await a.partitions.get("orders", 1);
    const bytes = buildBatch({ producerId: 7, producerEpoch: 0, baseSequence: 0, records: [{ value: "one" }] });
    const outcome = partition.appendFromProducer(bytes, parseBatchHeader(bytes));
    if (outcome.kind !== "appended") throw new Error(outcome.kind);
    await outcome.written;
    expect(recoveryLines(first.lines)).toEqual([]);

    // No clean close: the next open finds the partitions as a kill left them.
    fs.crash();
    const second = recordingLogger();
    const b = await managerOn(fs, clock, second.log);
    await b.partitions.openAll();
    await waitUntil(() => recoveryLines(second.lines).length === 2, "two recovery lines");
    expect(recoveryLines(second.lines).every((l) => l.includes("after an unclean shutdown") && l.includes('"cleanShutdown":false'))).toBe(true);

    // After a clean close, nothing again.
    await b.partitions.close();
    const third = recordingLogger();
    const c = await managerOn(fs, clock, third.log);
    await c.partitions.openAll();
    expect(recoveryLines(third.lines)).toEqual([]);
    await c.partitions.close();
    await a.partitions.close().catch(() => {});
  });
});
