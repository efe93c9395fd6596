/**
 * Real clients produce to and read from an in-process bunka: kafkajs 2.2.4 (idempotent producer, gzip),
 * @platformatic/kafka (idempotent producer, every codec it has), Apache Kafka 4.1.1's console producer
 * (gzip, snappy, lz4, zstd; acks=all) read back by its console consumer, and kafka-producer-perf-test.
 *
 * Consumer groups (FindCoordinator) are not served yet, so nothing here may join a group: the Node
 * clients' data is read back with raw Fetch requests and decoded by @platformatic/kafka's record-batch
 * reader (an independent decoder that decompresses every codec); the Java console consumer runs in
 * partition mode (`--partition N --offset earliest`), which assigns without a group.
 * kafka-consumer-perf-test subscribes with a group: it runs only when the broker serves FindCoordinator
 * and JoinGroup (without them it stops at once with "The node does not support FIND_COORDINATOR").
 */
import { describe, expect, test } from "bun:test";
import { Producer, Reader, readRecordsBatches, stringSerializers } from "@platformatic/kafka";
import { CompressionTypes, Kafka, logLevel } from "kafkajs";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { runKafkaTool, type ToolResult } from "../support/apache-kafka.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import type { TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
let broker: TestBroker;
let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT);

// ---- helpers ------------------------------------------------------------------------------------

async function createTopic(name: string, partitions = 1): Promise<string> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  return res.topics[0].topicId;
}

interface StoredRecord {
  offset: number;
  key: string | null;
  value: string | null;
  headers: [string, string][];
}

interface StoredBatch {
  baseOffset: number;
  codec: number;
  producerId: number;
  producerEpoch: number;
  baseSequence: number;
  count: number;
}

const text = (b: Buffer | null | undefined) => (b === null || b === undefined ? null : b.toString("utf8"));

/**
 * Everything in one partition from offset 0 to the high watermark, by raw Fetch v17, decoded by
 * @platformatic/kafka's reader (which checks nothing bunka computed: it decompresses and parses the
 * bytes as any consumer would).
 */
async function readPartition(topic: string, partition: number): Promise<{ records: StoredRecord[]; batches: StoredBatch[]; highWatermark: number }> {
  const md = await client.request(3, 12, { topics: [{ name: topic, topicId: ZERO_UUID }] });
  const topicId = md.topics[0].topicId as string;
  const records: StoredRecord[] = [];
  const batches: StoredBatch[] = [];
  let offset = 0;
  for (;;) {
    const res = await client.request(1, 17, {
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 16 * 1024 * 1024,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topicId, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: 8 * 1024 * 1024 }] }],
    });
    const p = res.responses[0].partitions[0];
    expect(p.errorCode).toBe(ErrorCode.NONE);
    const bytes: Uint8Array = p.records ?? new Uint8Array(0);
    if (bytes.length === 0) return { records, batches, highWatermark: p.highWatermark };
    for (const batch of readRecordsBatches(Reader.from(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)))) {
      const base = Number(batch.firstOffset);
      batches.push({
        baseOffset: base,
        codec: batch.attributes & 0x07,
        producerId: Number(batch.producerId),
        producerEpoch: batch.producerEpoch,
        baseSequence: batch.firstSequence,
        count: batch.records.length,
      });
      for (const r of batch.records) {
        records.push({
          offset: base + r.offsetDelta,
          key: text(r.key),
          value: text(r.value),
          headers: r.headers.map(([k, v]) => [text(k) ?? "", text(v) ?? ""]),
        });
      }
      offset = base + batch.lastOffsetDelta + 1;
    }
    if (offset >= p.highWatermark) return { records, batches, highWatermark: p.highWatermark };
  }
}

async function latestOffset(topic: string, partition = 0): Promise<number> {
  const res = await client.request(2, 8, {
    replicaId: -1,
    isolationLevel: 0,
    topics: [{ name: topic, partitions: [{ partitionIndex: partition, timestamp: -1 }] }],
  });
  expect(res.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
  return res.topics[0].partitions[0].offset;
}

/** The batches of an idempotent producer: one producer id, and sequences that follow on without gaps. */
function expectIdempotentBatches(batches: StoredBatch[], totalRecords: number): void {
  expect(batches.reduce((n, b) => n + b.count, 0)).toBe(totalRecords);
  const ids = new Set(batches.map((b) => `${b.producerId}/${b.producerEpoch}`));
  expect(ids.size).toBe(1);
  expect(batches[0]!.producerId).toBeGreaterThanOrEqual(0);
  let sequence = batches[0]!.baseSequence;
  expect(sequence).toBe(0);
  for (const b of batches) {
    expect(b.baseSequence).toBe(sequence);
    sequence += b.count;
  }
}

function ok(r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`tool exited ${r.code}\nstdout:\n${r.stdout.slice(-4000)}\nstderr:\n${r.stderr.slice(-4000)}`);
  return r;
}

// ---- kafkajs ------------------------------------------------------------------------------------

describe("kafkajs producer", () => {
  test("idempotent, gzip and uncompressed, two partitions: exact content and order", async () => {
    await createTopic("kjs-produce", 2);
    const kafka = new Kafka({ clientId: "interop-kafkajs", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    await producer.connect();
    const expected: Record<number, { key: string; value: string }[]> = { 0: [], 1: [] };
    try {
      for (let round = 0; round < 6; round++) {
        const compression = round % 3 === 2 ? CompressionTypes.None : CompressionTypes.GZIP;
        const messages = Array.from({ length: 25 }, (_, i) => ({
          key: `k-${round}-${i}`,
          value: `kafkajs round ${round} message ${i} ${"x".repeat(i)}`,
          partition: i % 2,
          headers: { round: String(round) },
        }));
        const answers = await producer.send({ topic: "kjs-produce", acks: -1, compression, messages });
        for (const a of answers) expect(a.errorCode).toBe(ErrorCode.NONE);
        for (const m of messages) expected[m.partition]!.push({ key: m.key, value: m.value });
      }
    } finally {
      await producer.disconnect();
    }

    for (const partition of [0, 1]) {
      const { records, batches, highWatermark } = await readPartition("kjs-produce", partition);
      const want = expected[partition]!;
      expect(highWatermark).toBe(want.length);
      expect(records.map((r) => r.offset)).toEqual(want.map((_, i) => i));
      expect(records.map((r) => ({ key: r.key, value: r.value }))).toEqual(want);
      expect(records.every((r) => r.headers.length === 1 && r.headers[0]![0] === "round")).toBe(true);
      expectIdempotentBatches(batches, want.length);
      // Rounds 0, 1, 3, 4 gzip, rounds 2 and 5 uncompressed: six batches per partition.
      expect(batches.map((b) => b.codec)).toEqual([1, 1, 0, 1, 1, 0]);
    }
  }, TIMEOUT);
});

// ---- @platformatic/kafka ------------------------------------------------------------------------

describe("@platformatic/kafka producer", () => {
  // Every codec @platformatic/kafka 2.12 implements (protocol/compression.js): zstd through node:zlib,
  // snappy and lz4 through @platformatic/wasm-utils.
  const CODECS = ["none", "gzip", "snappy", "lz4", "zstd"] as const;

  test(`idempotent, ${CODECS.join(", ")}: exact content and order`, async () => {
    await createTopic("pk-produce");
    const producer = new Producer({
      clientId: "interop-platformatic",
      bootstrapBrokers: [broker.bootstrap],
      serializers: stringSerializers,
      idempotent: true,
      retries: 3,
    });
    const expected: { key: string; value: string; codec: string }[] = [];
    try {
      for (const codec of CODECS) {
        for (let round = 0; round < 2; round++) {
          const messages = Array.from({ length: 40 }, (_, i) => ({
            topic: "pk-produce",
            partition: 0,
            key: `${codec}-${round}-${i}`,
            value: `platformatic ${codec} round ${round} message ${i} ${"y".repeat(i * 3)}`,
            headers: new Map([["codec", codec]]),
          }));
          const result = await producer.send({ messages, compression: codec });
          expect(result.offsets?.[0]?.offset).toBe(BigInt(expected.length));
          for (const m of messages) expected.push({ key: m.key, value: m.value, codec });
        }
      }
    } finally {
      await producer.close();
    }

    const { records, batches, highWatermark } = await readPartition("pk-produce", 0);
    expect(highWatermark).toBe(expected.length);
    expect(records.map((r) => r.offset)).toEqual(expected.map((_, i) => i));
    expect(records.map((r) => ({ key: r.key, value: r.value }))).toEqual(expected.map(({ key, value }) => ({ key, value })));
    expect(records.map((r) => r.headers)).toEqual(expected.map((e) => [["codec", e.codec]]));
    expectIdempotentBatches(batches, expected.length);
    expect(batches.map((b) => b.codec)).toEqual(CODECS.flatMap((c) => [CompressionCodec[c], CompressionCodec[c]]));
  }, TIMEOUT);
});

// ---- Apache Kafka's console producer and consumer -------------------------------------------------

describe("Java console producer / consumer", () => {
  const LINES = 300;
  for (const codec of ["gzip", "snappy", "lz4", "zstd"] as const) {
    test(`--compression-codec ${codec}, acks=all, read back in partition mode with keys`, async () => {
      const topic = `java-${codec}`;
      await createTopic(topic);
      const lines = Array.from({ length: LINES }, (_, i) => `key-${i}:${codec} value ${i} ${"z".repeat(i % 50)}`);
      ok(
        await runKafkaTool(
          "kafka-console-producer",
          [
            "--bootstrap-server", broker.bootstrap,
            "--topic", topic,
            "--compression-codec", codec,
            "--producer-property", "acks=all",
            "--property", "parse.key=true",
            "--property", "key.separator=:",
          ],
          { stdin: lines.join("\n") + "\n", timeoutMs: 60_000 },
        ),
      );
      expect(await latestOffset(topic)).toBe(LINES);

      const consumed = ok(
        await runKafkaTool(
          "kafka-console-consumer",
          [
            "--bootstrap-server", broker.bootstrap,
            "--topic", topic,
            "--partition", "0",
            "--offset", "earliest",
            "--max-messages", String(LINES),
            "--timeout-ms", "30000",
            "--property", "print.key=true",
            "--property", "key.separator=:",
          ],
          { timeoutMs: 60_000 },
        ),
      );
      expect(consumed.stdout.trimEnd().split("\n")).toEqual(lines);
      expect(consumed.stderr).toContain(`Processed a total of ${LINES} messages`);

      // The producer really compressed, and (idempotence is on by default in the Java producer) as one
      // producer with gapless sequences.
      const { batches } = await readPartition(topic, 0);
      expect(batches.every((b) => b.codec === CompressionCodec[codec])).toBe(true);
      expectIdempotentBatches(batches, LINES);
    }, TIMEOUT);
  }
});

describe("kafka-producer-perf-test", () => {
  test("20000 records of 100 bytes with acks=all, all of them stored", async () => {
    const RECORDS = 20_000;
    await createTopic("java-perf");
    const result = ok(
      await runKafkaTool(
        "kafka-producer-perf-test",
        [
          "--topic", "java-perf",
          "--num-records", String(RECORDS),
          "--record-size", "100",
          "--throughput", "-1",
          "--producer-props", `bootstrap.servers=${broker.bootstrap}`, "acks=all",
        ],
        { timeoutMs: 90_000 },
      ),
    );
    expect(result.stdout).toMatch(new RegExp(`^${RECORDS} records sent, `, "m"));
    expect(await latestOffset("java-perf")).toBe(RECORDS);
    const { records, batches } = await readPartition("java-perf", 0);
    expect(records).toHaveLength(RECORDS);
    expect(records.every((r, i) => r.offset === i && r.key === null && r.value!.length === 100)).toBe(true);
    expectIdempotentBatches(batches, RECORDS);
  }, TIMEOUT);

  // kafka-consumer-perf-test subscribes with a consumer group: against a broker without FindCoordinator it
  // stops at once with "The node does not support FIND_COORDINATOR".
  test("kafka-consumer-perf-test reads those 20000 records back", async () => {
    const apiVersions = await client.request(18, 3, { clientSoftwareName: "interop-test", clientSoftwareVersion: "1" });
    const served = new Set(apiVersions.apiKeys.map((k: { apiKey: number }) => k.apiKey));
    expect(served.has(10) && served.has(11)).toBe(true);
    expect(await latestOffset("java-perf")).toBe(20_000);
    const sessionsBefore = broker.broker.services.fetchSessions.stats();
    const result = ok(
      await runKafkaTool(
        "kafka-consumer-perf-test",
        ["--bootstrap-server", broker.bootstrap, "--topic", "java-perf", "--messages", "20000", "--timeout", "30000"],
        { timeoutMs: 90_000 },
      ),
    );
    // start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
    const lines = result.stdout.trim().split("\n");
    const header = lines.findIndex((l) => l.startsWith("start.time"));
    expect(header).toBeGreaterThanOrEqual(0);
    const columns = lines[header]!.split(",").map((c) => c.trim());
    const values = lines[header + 1]!.split(",").map((c) => c.trim());
    expect(Number(values[columns.indexOf("data.consumed.in.nMsg")])).toBe(20_000);
    // The Java consumer uses fetch sessions (KIP-227): it opened one and fetched incrementally.
    const sessionsAfter = broker.broker.services.fetchSessions.stats();
    expect(sessionsAfter.sessionsCreated).toBeGreaterThan(sessionsBefore.sessionsCreated);
    expect(sessionsAfter.incrementalRequests).toBeGreaterThan(sessionsBefore.incrementalRequests);
    expect(sessionsAfter.sessionErrors).toBe(sessionsBefore.sessionErrors);
  }, TIMEOUT);
});
