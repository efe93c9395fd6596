/**
 * The broker's log cleaner service (broker/log-cleaner-service.ts) over an in-process broker: which
 * partitions it cleans and in what order, its settings (enable, threads, the I/O throttle), and what it
 * does with a partition whose pass fails.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openSync, writeSync, closeSync, readdirSync } from "node:fs";
import { DEFAULT_CLEANER_CONFIG } from "../../../src/domain/cleaner-config.ts";
import { LogCleanerService, type CleanerSettings } from "../../../src/broker/log-cleaner-service.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import type { Clock } from "../../../src/platform/clock.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../../support/test-broker.ts";

let broker: TestBroker | undefined;
afterEach(async () => {
  await broker?.stop();
  broker = undefined;
});

const passes: string[] = [];
const errors: string[] = [];
const log: Logger = {
  debug() {},
  info(message, fields) {
    if (message === "log cleaner pass") passes.push(String(fields?.partition));
  },
  warn() {},
  error(message, fields) {
    errors.push(`${message} ${JSON.stringify(fields)}`);
  },
};

/** A compacted topic whose inactive segments hold `rounds` values of each of `keys` keys. */
async function compactedTopic(b: TestBroker, name: string, keys: number, rounds: number): Promise<void> {
  const created = await b.broker.services.topics.create({
    name,
    partitions: 1,
    configs: { "cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01" },
  });
  expect(created.ok).toBe(true);
  await appendRounds(b, name, keys, rounds);
}

/** Appends `rounds` values of each key, then a record that rolls the segment. */
async function appendRounds(b: TestBroker, name: string, keys: number, rounds: number): Promise<void> {
  const partition = (await b.broker.services.partitions.get(name, 0))!;
  const append = async (bytes: Uint8Array) => {
    const outcome = partition.appendFromProducer(bytes, parseBatchHeader(bytes));
    if (outcome.kind !== "appended") throw new Error(JSON.stringify(outcome));
    await outcome.written;
  };
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < keys; k++) await append(buildBatch({ records: [{ key: `k${k}`, value: `value-${r}-${"x".repeat(40)}` }] }));
  }
  // One record too big for the segment: everything before it is in inactive segments.
  await append(buildBatch({ records: [{ key: "roll", value: "y".repeat(2100) }] }));
  await partition.log.flush();
}

function service(
  b: TestBroker,
  settings: Partial<CleanerSettings>,
  sleep?: (ms: number) => Promise<void>,
  yieldToLoop?: () => Promise<void>,
  clock: Clock = b.broker.services.clock,
): LogCleanerService {
  const s = b.broker.services;
  return new LogCleanerService(clock, log, s.runtimeConfig, s.topics, s.partitions, () => ({ ...DEFAULT_CLEANER_CONFIG, ...settings }), sleep, yieldToLoop);
}

describe("LogCleanerService", () => {
  test("cleans every compacted partition that needs it, the dirtiest first, and leaves delete-policy topics alone", async () => {
    passes.length = 0;
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "barely-dirty", 20, 2);
    await compactedTopic(broker, "mostly-dirty", 5, 2);
    expect((await broker.broker.services.topics.create({ name: "plain", partitions: 1 })).ok).toBe(true);
    const cleaner = service(broker, {});
    // Never cleaned, both are wholly dirty: both are cleaned.
    expect(await cleaner.runRound()).toBe(2);
    expect(passes.sort()).toEqual(["barely-dirty-0", "mostly-dirty-0"]);
    // Then "mostly-dirty" gets many new versions and "barely-dirty" few: its ratio is higher, it goes first.
    await appendRounds(broker, "barely-dirty", 1, 1);
    await appendRounds(broker, "mostly-dirty", 5, 10);
    const ratio = async (topic: string) =>
      (await (await broker!.broker.services.partitions.get(topic, 0))!.cleanableRange(Date.now(), cleaner.compactionConfigOf(topic)!)).dirtyRatio;
    expect(await ratio("mostly-dirty")).toBeGreaterThan(await ratio("barely-dirty"));
    passes.length = 0;
    expect(await cleaner.runRound()).toBe(2);
    expect(passes).toEqual(["mostly-dirty-0", "barely-dirty-0"]);
    expect(cleaner.statsOf("plain", 0)).toBeUndefined();
    // Nothing is dirty any more: the next round runs no pass.
    expect(await cleaner.runRound()).toBe(0);
  });

  test("a deleted topic's partitions leave the cleaner's stats at the next round", async () => {
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "doomed", 5, 4);
    const cleaner = service(broker, {});
    expect(await cleaner.runRound()).toBe(1);
    expect(cleaner.statsOf("doomed", 0)?.passes).toBe(1);
    const { WireClient } = await import("../../support/wire-client.ts");
    const client = await WireClient.connect(broker.port);
    const deleted = await client.request(20, 6, { topics: [{ name: "doomed", topicId: "00000000-0000-0000-0000-000000000000" }], timeoutMs: 10_000 });
    client.close();
    expect(deleted.responses[0].errorCode).toBe(0);
    await cleaner.runRound();
    expect(cleaner.statsOf("doomed", 0)).toBeUndefined();
    expect(cleaner.partitionStats()).toEqual([]);
  });

  test("log.cleaner.enable=false and log.cleaner.threads=0 clean nothing", async () => {
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "idle", 5, 4);
    expect(await service(broker, { enabled: false }).runRound()).toBe(0);
    expect(await service(broker, { threads: 0 }).runRound()).toBe(0);
    expect(await service(broker, { threads: 2 }).runRound()).toBe(1);
  });

  test("log.cleaner.io.max.bytes.per.second holds the pass back by the time its reads should take", async () => {
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "throttled", 5, 10);
    const waits: number[] = [];
    const cleaner = service(broker, { ioMaxBytesPerSecond: 1000 }, async (ms) => {
      waits.push(ms);
    });
    expect(await cleaner.runRound()).toBe(1);
    const read = cleaner.statsOf("throttled", 0)!.bytesRead;
    expect(read).toBeGreaterThan(2000);
    // The waits asked for add up to about read / rate seconds (less what the pass itself took).
    const waitedMs = waits.reduce((a, b) => a + b, 0);
    expect(waitedMs).toBeGreaterThan(((read - 1000) / 1000) * 1000 * 0.5);
    expect(waits.length).toBeGreaterThan(1);
  });

  test("a pass gives the event loop back once it has held it for a slice of work", async () => {
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "sliced", 5, 10);
    // A clock on which every reading is 0.1 ms after the previous one: the pass holds the loop for two
    // readings' worth between yields.
    let monotonic = 0;
    const clock: Clock = { nowMs: () => Date.now(), monotonicMs: () => (monotonic += 0.1) };
    let yields = 0;
    const cleaner = service(broker, {}, undefined, async () => {
      yields++;
    }, clock);
    expect(await cleaner.runRound()).toBe(1);
    const batches = 5 * 10 + 1;
    // Mapping and cleaning read every batch once each, each reading the clock once per batch.
    expect(yields).toBeGreaterThan(batches / 2);
  });

  test("a partition whose pass finds damage is reported once and not cleaned again; the others are still cleaned", async () => {
    passes.length = 0;
    errors.length = 0;
    broker = await startTestBroker({ autoCreateTopicsEnable: false }, { log, cleaner: false });
    await compactedTopic(broker, "damaged", 5, 10);
    await compactedTopic(broker, "healthy", 5, 4);
    // Flip a byte inside the first batch of damaged-0 (its CRC no longer matches).
    const dir = join(broker.dataDir, "damaged-0");
    const first = readdirSync(dir).filter((n) => n.endsWith(".log")).sort()[0]!;
    const fd = openSync(join(dir, first), "r+");
    writeSync(fd, new Uint8Array([0xee]), 0, 1, 70);
    closeSync(fd);
    const cleaner = service(broker, {});
    expect(await cleaner.runRound()).toBe(1);
    expect(passes).toEqual(["healthy-0"]);
    expect(cleaner.statsOf("damaged", 0)!.lastError).toContain("fails its check (crc-mismatch)");
    expect(errors).toEqual([
      expect.stringContaining('log cleaner pass failed on damaged data; the partition is not cleaned again until the broker restarts {"partition":"damaged-0"'),
    ]);
    // Later rounds leave it alone instead of failing (and logging) again.
    await appendRounds(broker, "damaged", 5, 2);
    expect(await cleaner.runRound()).toBe(0);
    expect(errors.length).toBe(1);
  });
});
