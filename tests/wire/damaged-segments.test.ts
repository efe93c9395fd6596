/**
 * Damaged segments over the wire, against an in-process broker restarted on a data directory whose files
 * were changed while it was down (docs/operations.md, "Damaged data"):
 * (a) 0xFF over the middle of a segment below the recovery point: Fetch serves every record before the
 *     damaged batch, then answers KAFKA_STORAGE_ERROR there, logged once however often it is asked; the
 *     same damage in a partition nobody reads is found by one scrubber pass, and both are in /metrics and
 *     /ready (the broker runs with the scrubber's rate at 0 until the test runs a pass itself);
 * (b) the first segment of a partition of several segments emptied: the partition is refused (every
 *     request on it answers KAFKA_STORAGE_ERROR, never an empty partition), the broker starts and serves
 *     the other partitions, /ready says degraded, and the empty file is still there.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, openSync, readdirSync, rmSync, statSync, truncateSync, writeSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { createHttpApp } from "../../src/http/app.ts";
import { BrokerQueryPorts } from "../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../src/http/metrics.ts";
import { BATCH_HEADER_BYTES, batchSizeAt, baseOffsetAt, lastOffsetDeltaAt } from "../../src/protocol/records/record-batch.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { singlePartitionFetch } from "../support/fetch-request.ts";
import { silentLogger, type Logger } from "../../src/platform/logger.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
const RECORDS = 3000;
const PER_BATCH = 100;
const DAMAGED = "damaged-crc";
const UNREAD = "damaged-unread";
const EMPTIED = "emptied-first";
const HEALTHY = "healthy";

let dataDir: string;
let broker: TestBroker;
let client: WireClient;

function segmentFiles(topic: string): string[] {
  const dir = join(dataDir, `${topic}-0`);
  return readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort()
    .map((name) => join(dir, name));
}

async function createTopic(name: string): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [{ name: "segment.bytes", value: "16384" }] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

async function produce(topic: string, records: Uint8Array) {
  const res = await client.request(0, 9, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: 0, records }] }],
  });
  return res.responses[0].partitionResponses[0];
}

async function fetchAt(topic: string, offset: number, maxBytes = 64 * 1024): Promise<{ errorCode: number; highWatermark: number; records: Uint8Array }> {
  const res = await client.request(1, 12, singlePartitionFetch(topic, 0, offset, maxBytes));
  const p = res.responses[0].partitions[0];
  return { errorCode: p.errorCode, highWatermark: p.highWatermark, records: p.records ?? new Uint8Array(0) };
}

/** The offsets of the records of whole batches in `bytes`, checked contiguous from `from`. */
function offsetsIn(bytes: Uint8Array, from: number): number {
  let next = from;
  for (let at = 0; at + BATCH_HEADER_BYTES <= bytes.length; at += batchSizeAt(bytes, at)) {
    const base = baseOffsetAt(bytes, at);
    // The first batch may start before the fetch offset; after it, offsets follow on.
    if (base > next) throw new Error(`gap: batch at ${base}, expected ${next}`);
    next = base + lastOffsetDeltaAt(bytes, at) + 1;
  }
  return next;
}

/** Fetches from 0 on as a consumer does, until an answer with an error or without records. */
async function consumeFromStart(topic: string): Promise<{ nextOffset: number; stoppedWith: number }> {
  let offset = 0;
  for (;;) {
    const answer = await fetchAt(topic, offset);
    if (answer.errorCode !== ErrorCode.NONE || answer.records.length === 0) return { nextOffset: offset, stoppedWith: answer.errorCode };
    offset = offsetsIn(answer.records, offset);
  }
}

function httpApp() {
  const ports = new BrokerQueryPorts({ broker: broker.broker, metrics: new BrokerMetrics(), version: "0.0.0-test", nowMs: () => Date.now(), startedAtMs: Date.now() });
  ports.setListener({ connectionCount: () => 1 });
  return createHttpApp(ports);
}

/** Writes `bytes` at `position` of a file, as a disk gone bad would hold them. */
function overwrite(path: string, position: number, bytes: Uint8Array): void {
  const fd = openSync(path, "r+");
  try {
    writeSync(fd, bytes, 0, bytes.length, position);
  } finally {
    closeSync(fd);
  }
}

let damagedFile: string;
let damagedSegmentBase: number;
let unreadFile: string;
let emptiedFile: string;
/** What the restarted broker logged at warn and error. */
const logged: string[] = [];
const capturing: Logger = {
  ...silentLogger,
  warn: (message, fields) => logged.push(`${message} ${JSON.stringify(fields)}`),
  error: (message, fields) => logged.push(`${message} ${JSON.stringify(fields)}`),
};

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "bunka-damaged-"));
  broker = await startTestBroker({ dataDir, autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  for (const topic of [DAMAGED, UNREAD, EMPTIED, HEALTHY]) {
    await createTopic(topic);
    for (let i = 0; i < RECORDS / PER_BATCH; i++) {
      const answer = await produce(topic, simpleBatch(PER_BATCH, { valueBytes: 40 }));
      expect(answer.errorCode).toBe(ErrorCode.NONE);
    }
  }
  client.close();
  // A clean stop: the recovery point is the log end, so every segment is trusted without a scan at start.
  await broker.stop();

  const damaged = segmentFiles(DAMAGED);
  expect(damaged.length).toBeGreaterThan(3);
  damagedFile = damaged[1]!;
  damagedSegmentBase = Number(damagedFile.slice(-24, -4));
  const size = statSync(damagedFile).size;
  overwrite(damagedFile, Math.floor(size / 2), new Uint8Array(512).fill(0xff));
  unreadFile = segmentFiles(UNREAD)[1]!;
  overwrite(unreadFile, Math.floor(statSync(unreadFile).size / 2), new Uint8Array(512).fill(0xff));

  const emptied = segmentFiles(EMPTIED);
  expect(emptied.length).toBeGreaterThan(3);
  emptiedFile = emptied[0]!;
  truncateSync(emptiedFile, 0);

  // The scrubber stays off until a test runs its pass, so that what Fetch finds is Fetch's own.
  broker = await startTestBroker({ dataDir, autoCreateTopicsEnable: false, logScrubberBytesPerSecond: 0 }, { log: capturing });
  client = await WireClient.connect(broker.port);
}, TIMEOUT);

afterAll(async () => {
  client?.close();
  await broker?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("(a) 0xFF over the middle of a segment below the recovery point", () => {
  test("Fetch serves every record before the damaged batch, then KAFKA_STORAGE_ERROR with no records, logged once", async () => {
    const { nextOffset, stoppedWith } = await consumeFromStart(DAMAGED);
    expect(stoppedWith).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    // Stopped inside the damaged segment, at the batch the finding names, which is in the registry.
    const findings = broker.broker.services.partitions.damage.findings(`${DAMAGED}-0`);
    expect(findings).toMatchObject([{ file: damagedFile.slice(-24), foundBy: "read", refused: false }]);
    expect(findings[0]!.position).toBeGreaterThan(0);
    expect(nextOffset).toBe(findings[0]!.offset);
    expect(nextOffset).toBeGreaterThan(damagedSegmentBase);
    expect(nextOffset).toBeLessThan(RECORDS);
    for (let i = 0; i < 3; i++) {
      const atDamage = await fetchAt(DAMAGED, nextOffset);
      expect(atDamage.errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
      expect(atDamage.records.length).toBe(0);
    }
    const lines = logged.filter((l) => l.includes(`"partition":"${DAMAGED}-0"`));
    expect(lines.length).toBe(1);
    expect(lines[0]).toMatch(new RegExp(`^corrupt partition data: .*"file":"${damagedFile.slice(-24)}","position":${findings[0]!.position},"offset":${nextOffset}`));
    // Records past the damaged segment are still there for a consumer that seeks past it.
    const later = segmentFiles(DAMAGED)[2]!;
    const past = await fetchAt(DAMAGED, Number(later.slice(-24, -4)));
    expect(past.errorCode).toBe(ErrorCode.NONE);
    expect(past.records.length).toBeGreaterThan(0);
    // The damage stays on disk for the operator to copy away.
    expect(statSync(damagedFile).size).toBeGreaterThan(0);
  }, TIMEOUT);

  test("one scrubber pass finds the same damage where nobody reads: /metrics counts it, /ready says degraded naming both", async () => {
    const scrubber = broker.broker.services.scrubber;
    broker.broker.services.config.logScrubberBytesPerSecond = 64 * 1024 * 1024;
    expect(await scrubber.runPass()).toBe(true);
    const findings = broker.broker.services.partitions.damage.findings(`${UNREAD}-0`);
    expect(findings).toMatchObject([{ file: unreadFile.slice(-24), foundBy: "scrubber", refused: false }]);
    // The damage Fetch found is the same finding, not a second one.
    expect(broker.broker.services.partitions.damage.findings(`${DAMAGED}-0`).length).toBe(1);
    const app = httpApp();
    const metrics = await (await app.request("/metrics")).text();
    expect(metrics).toContain("bunka_log_scrubber_damaged_batches_total 1\n");
    expect(metrics).toContain("bunka_log_scrubber_passes_total 1\n");
    expect(metrics).toMatch(/bunka_log_scrubber_batches_verified_total [1-9]/);
    expect(metrics).toContain(`bunka_partition_damaged_batches{topic="${UNREAD}",partition="0"} 1\n`);
    expect(metrics).toContain(`bunka_partition_damaged_batches{topic="${DAMAGED}",partition="0"} 1\n`);
    const ready = await app.request("/ready");
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; message: string };
    expect(body.status).toBe("degraded");
    expect(body.message).toContain(`${DAMAGED}-0`);
    expect(body.message).toContain(`${UNREAD}-0`);
    // A second pass says nothing new.
    const before = logged.length;
    expect(await scrubber.runPass()).toBe(true);
    expect(logged.length).toBe(before);
    expect(scrubber.statistics.damagedBatchesFound).toBe(1);
  }, TIMEOUT);
});

describe("(b) an empty first segment of a partition with records in several segments", () => {
  test("the partition is refused, never served as empty: Fetch, Produce, ListOffsets, DeleteRecords and DescribeProducers answer KAFKA_STORAGE_ERROR", async () => {
    const atStart = await fetchAt(EMPTIED, 0);
    expect(atStart.errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    expect(atStart.records.length).toBe(0);
    const later = await fetchAt(EMPTIED, RECORDS - 1);
    expect(later.errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    const produced = await produce(EMPTIED, simpleBatch(1));
    expect(produced.errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    const listed = await client.request(2, 7, {
      replicaId: -1,
      isolationLevel: 0,
      topics: [{ name: EMPTIED, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }],
    });
    expect(listed.topics[0].partitions[0].errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    const deleted = await client.request(21, 2, { topics: [{ name: EMPTIED, partitions: [{ partitionIndex: 0, offset: 10 }] }], timeoutMs: 10_000 });
    expect(deleted.topics[0].partitions[0].errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    const producers = await client.request(61, 0, { topics: [{ name: EMPTIED, partitionIndexes: [0] }] });
    expect(producers.topics[0].partitions[0].errorCode).toBe(ErrorCode.KAFKA_STORAGE_ERROR);
    const refusal = broker.broker.services.partitions.refusal(EMPTIED, 0);
    expect(refusal).toMatchObject({ file: emptiedFile.slice(-24), foundBy: "open", refused: true });
    // Nothing was deleted or cut: the operator can copy the partition away as it is.
    expect(statSync(emptiedFile).size).toBe(0);
    expect(segmentFiles(EMPTIED).length).toBeGreaterThan(3);
  }, TIMEOUT);

  test("the rest of the broker works: another partition is served whole, and /ready names the refused one", async () => {
    const { nextOffset, stoppedWith } = await consumeFromStart(HEALTHY);
    expect(stoppedWith).toBe(ErrorCode.NONE);
    expect(nextOffset).toBe(RECORDS);
    const produced = await produce(HEALTHY, simpleBatch(1));
    expect(produced.errorCode).toBe(ErrorCode.NONE);
    const ready = await httpApp().request("/ready");
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; message: string };
    expect(body.status).toBe("degraded");
    expect(body.message).toContain(`${EMPTIED}-0`);
    const metrics = await (await httpApp().request("/metrics")).text();
    expect(metrics).toContain("bunka_partitions_refused 1\n");
    // The dashboard's health area says so too.
    const dashboard = await (await httpApp().request("/")).text();
    expect(dashboard).toMatch(/data-field="ready"><span class="lagging">degraded: damaged data in \d partition\(s\)/);
    expect(dashboard).toMatch(/data-field="scrubber">[^<]*<span class="lagging">damaged data in \d partition\(s\)/);
  }, TIMEOUT);
});
