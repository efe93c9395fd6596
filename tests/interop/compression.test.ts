/**
 * The record-batch codecs (src/protocol/records/compression.ts) against real clients, both ways, on one
 * in-process bunka:
 *
 *   - Apache Kafka's Java client (tests/interop/java/CompressionCheck.java, compiled here with javac into
 *     .cache/java-classes/compression/) and librdkafka (tests/interop/python/compression_check.py in
 *     .cache/venv) produce with compression.type gzip, snappy, lz4 and zstd; the stored batches are read
 *     back with raw Fetch and decoded with our decompress: they must carry the codec and exactly the
 *     records the client sent.
 *   - batches bunka compresses with each codec (one spanning several lz4 blocks and snappy chunks) are
 *     produced raw, and both clients' consumers must read exactly those records back.
 *   - the topic config compression.type: librdkafka's idempotent producer sends lz4 and uncompressed
 *     batches (tests/interop/python/produce_consume.py) to topics that store zstd and gzip; every stored
 *     batch is in the topic's codec with the producer's sequences, and librdkafka's consumer reads it all.
 *
 *   bun test --timeout 300000 tests/interop/compression.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin } from "../support/apache-kafka.ts";
import { buildBatch, type TestRecord } from "../support/batch-builder.ts";
import { compressBatch } from "../support/codec-inputs.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { readPartitionFully, utf8, type PartitionContents } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const CODECS = ["gzip", "snappy", "lz4", "zstd"] as const;
type Codec = (typeof CODECS)[number];
const COUNT = 2000;
/** The batches bunka writes per codec: the first is over 100 KiB before compression. */
const BUNKA_BATCHES = [1500, 1, 499];
const JAVA_SOURCE = join(import.meta.dir, "java", "CompressionCheck.java");
const JAVA_CLASSES = join(REPO_ROOT, ".cache", "java-classes", "compression");
const PYTHON_SCRIPT = join(import.meta.dir, "python", "compression_check.py");
const PRODUCE_CONSUME_SCRIPT = join(import.meta.dir, "python", "produce_consume.py");
/** Producer codec -> the topic's compression.type, for the recompression test. */
const RECOMPRESSED = { lz4: "zstd", none: "gzip" } as const;
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];

/** Record i of a codec, the same in the Java program, the Python script and here. */
function expectedRecord(codec: Codec, i: number): { key: string; value: string; h: string } {
  return { key: `key-${i}`, value: `${codec}:${i}:${"exactly once ".repeat((i % 7) + 1)}`, h: String(i) };
}

let broker: TestBroker;
let client: WireClient;
let libs = "";

async function run(label: string, cmd: string[], timeoutMs: number): Promise<string> {
  const child = new LineChild(label, cmd);
  const code = await child.exitWithin(timeoutMs);
  if (code !== 0) throw new Error(`${label} exited ${code}\n${child.output()}`);
  return child.stdout;
}

async function compileJava(): Promise<void> {
  const cls = join(JAVA_CLASSES, "CompressionCheck.class");
  if (existsSync(cls) && statSync(cls).mtimeMs >= statSync(JAVA_SOURCE).mtimeMs) return;
  mkdirSync(JAVA_CLASSES, { recursive: true });
  await run("javac CompressionCheck.java", ["javac", "-nowarn", "-d", JAVA_CLASSES, "-cp", `${libs}/*`, JAVA_SOURCE], 120_000);
}

async function createTopics(names: string[], configs: Record<string, string> = {}): Promise<void> {
  const created = await client.request(19, 7, {
    topics: names.map((name) => ({
      name,
      numPartitions: 1,
      replicationFactor: 1,
      assignments: [],
      configs: Object.entries(configs).map(([n, value]) => ({ name: n, value })),
    })),
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(names.map(() => ErrorCode.NONE));
}

/** Produces the COUNT records of `codec` to bunka-<codec>, compressed by bunka's own codec. */
async function produceBunkaBatches(codec: Codec): Promise<void> {
  let next = 0;
  for (const size of BUNKA_BATCHES) {
    const records: TestRecord[] = [];
    for (let i = next; i < next + size; i++) {
      const r = expectedRecord(codec, i);
      records.push({ key: r.key, value: r.value, headers: [{ key: "h", value: r.h }] });
    }
    next += size;
    const batch = compressBatch(buildBatch({ records }), CompressionCodec[codec]);
    const res = await client.request(0, 11, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 10_000,
      topicData: [{ name: `bunka-${codec}`, partitionData: [{ index: 0, records: batch }] }],
    });
    expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
  }
}

/** What a stored partition holds, judged against what the client was asked to send. */
function expectClientRecords(contents: PartitionContents, codec: Codec, allowUncompressed: boolean): void {
  expect(contents.records.length).toBe(COUNT);
  contents.records.forEach((record, i) => {
    const want = expectedRecord(codec, i);
    expect(record.offset).toBe(i);
    expect(utf8(record.key)).toBe(want.key);
    expect(utf8(record.value)).toBe(want.value);
    expect(record.headers.map((h) => [h.key, utf8(h.value)])).toEqual([["h", want.h]]);
  });
  const codecs = contents.batches.map((b) => b.header.compression);
  const layout = `${codec}: ${JSON.stringify(contents.batches.map((b) => [b.header.recordsCount, b.header.compression, b.header.sizeBytes]))}`;
  if (allowUncompressed) {
    // librdkafka sends a batch uncompressed when compressing it would not make it smaller.
    expect(codecs.filter((c) => c !== CompressionCodec[codec] && c !== CompressionCodec.none), layout).toEqual([]);
  } else {
    expect(codecs.filter((c) => c !== CompressionCodec[codec]), layout).toEqual([]);
  }
  const compressedRecords = contents.batches.filter((b) => b.header.compression === CompressionCodec[codec]).reduce((n, b) => n + b.records.length, 0);
  expect(compressedRecords, layout).toBeGreaterThan(COUNT / 2);
  // At least one batch is big enough that its compressed form spans several blocks (lz4: 64 KiB,
  // snappy-java: 32 KiB chunks) before compression.
  expect(contents.batches.some((b) => b.records.reduce((n, r) => n + (r.value?.length ?? 0), 0) > 70_000), layout).toBe(true);
}

beforeAll(async () => {
  [libs] = await Promise.all([ensureKafkaLibs(), ensureInteropClients()]);
  await compileJava();
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  await createTopics(CODECS.flatMap((c) => [`java-${c}`, `rdk-${c}`, `bunka-${c}`]));
  for (const [source, target] of Object.entries(RECOMPRESSED)) await createTopics([`ct-${source}`], { "compression.type": target });
  for (const codec of CODECS) await produceBunkaBatches(codec);
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await broker?.stop();
});

describe("compression with Apache Kafka's Java client (4.1.1)", () => {
  test(`produces ${COUNT} records per codec that bunka stores and decodes; consumes bunka's own compressed batches`, async () => {
    const stdout = await run(
      "java CompressionCheck",
      [javaBin(), ...JVM_FLAGS, "-cp", `${JAVA_CLASSES}:${libs}/*`, "CompressionCheck", broker.bootstrap, String(COUNT), ...CODECS],
      TIMEOUT - 60_000,
    );
    for (const codec of CODECS) {
      expect(stdout).toContain(`PRODUCED ${codec} ${COUNT}`);
      expectClientRecords(await readPartitionFully(client, `java-${codec}`, 0), codec, false);

      expect(stdout).toContain(`CONSUMED ${codec} ${COUNT}`);
      const consumed = stdout
        .split("\n")
        .filter((line) => line.startsWith(`R ${codec} `))
        .map((line) => line.split(" ").slice(2));
      expect(consumed.length).toBe(COUNT);
      consumed.forEach(([offset, key, value, h], i) => {
        const want = expectedRecord(codec, i);
        expect([Number(offset), key, value, h]).toEqual([i, want.key, want.value.replaceAll(" ", "_"), want.h]);
      });
    }
  }, TIMEOUT);
});

describe("compression with librdkafka (confluent-kafka)", () => {
  test(`produces ${COUNT} records per codec that bunka stores and decodes; consumes bunka's own compressed batches`, async () => {
    const stdout = await run("compression_check.py", [VENV_PYTHON, PYTHON_SCRIPT, broker.bootstrap, String(COUNT), ...CODECS], TIMEOUT - 60_000);
    const output = JSON.parse(stdout.trim().split("\n").pop()!) as {
      librdkafka: string;
      results: Record<Codec, { delivered: number; delivery_errors: string[]; records: [number, string, string, string | null][]; consumer_errors: string[] }>;
    };
    expect(output.librdkafka).toMatch(/^2\./);
    for (const codec of CODECS) {
      const r = output.results[codec];
      expect(r.delivery_errors, codec).toEqual([]);
      expect(r.delivered, codec).toBe(COUNT);
      expectClientRecords(await readPartitionFully(client, `rdk-${codec}`, 0), codec, true);

      expect(r.consumer_errors, codec).toEqual([]);
      expect(r.records.length, codec).toBe(COUNT);
      r.records.forEach(([offset, key, value, h], i) => {
        const want = expectedRecord(codec, i);
        expect([offset, key, value, h]).toEqual([i, want.key, want.value, want.h]);
      });
    }
  }, TIMEOUT);
});

describe("compression.type with librdkafka (confluent-kafka)", () => {
  test("an idempotent producer's lz4 and uncompressed batches are stored in the topic's codec and read back", async () => {
    const stdout = await run(
      "produce_consume.py",
      [VENV_PYTHON, PRODUCE_CONSUME_SCRIPT, broker.bootstrap, "ct-", "500", ...Object.keys(RECOMPRESSED)],
      TIMEOUT - 60_000,
    );
    const output = JSON.parse(stdout.trim().split("\n").pop()!) as { results: Record<string, Record<string, unknown>> };
    for (const [source, target] of Object.entries(RECOMPRESSED)) {
      const r = output.results[source]!;
      const summary = `${source} -> ${target}: ${JSON.stringify(r)}`;
      expect([r.delivered, r.undelivered, r.delivery_errors, r.fatal_errors], summary).toEqual([500, 0, [], []]);
      expect([r.offsets_in_order, r.consumed, r.content_matches, r.consumer_errors], summary).toEqual([true, 500, true, []]);
      const contents = await readPartitionFully(client, `ct-${source}`, 0);
      expect(contents.records.length).toBe(500);
      expect(contents.batches.map((b) => b.header.compression), summary).toEqual(contents.batches.map(() => CompressionCodec[target]));
      // The rebuilt batches keep the idempotent producer's sequences: one producer id, no gaps.
      expect(new Set(contents.batches.map((b) => b.header.producerId)).size).toBe(1);
      let sequence = 0;
      for (const b of contents.batches) {
        expect([b.header.baseSequence, b.header.baseOffset]).toEqual([sequence, sequence]);
        sequence += b.header.recordsCount;
      }
    }
  }, TIMEOUT);
});
