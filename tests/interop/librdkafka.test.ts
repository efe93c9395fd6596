/**
 * librdkafka (confluent-kafka for Python, installed by scripts/install-interop-clients.sh into
 * .cache/venv) against an in-process bunka: tests/interop/python/produce_consume.py produces 1000 keyed
 * messages with the idempotent producer for each compression codec, waits for every delivery report, and
 * reads them back with assign() (no group membership, no commits). This test judges the script's JSON and
 * checks on the wire that the stored batches really carry the codec and the producer id.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { BATCH_HEADER_BYTES, CompressionCodec, parseBatchHeader, type BatchHeader } from "../../src/protocol/records/record-batch.ts";
import { REPO_ROOT } from "../support/apache-kafka.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 180_000;
const COUNT = 1000;
const CODECS = ["none", "gzip", "snappy", "lz4", "zstd"] as const;
const PREFIX = "rdk-";
const SCRIPT = join(REPO_ROOT, "tests/interop/python/produce_consume.py");

let broker: TestBroker;
let client: WireClient;

beforeAll(async () => {
  await ensureInteropClients();
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  const created = await client.request(19, 7, {
    topics: CODECS.map((codec) => ({ name: `${PREFIX}${codec}`, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] })),
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(CODECS.map(() => ErrorCode.NONE));
}, TIMEOUT);
afterAll(async () => {
  client?.close();
  await broker?.stop();
});

interface CodecResult {
  delivered: number;
  delivery_errors: string[];
  fatal_errors: string[];
  undelivered: number;
  offsets_in_order: boolean;
  keys_in_order: boolean;
  first_offset: number | null;
  last_offset: number | null;
  consumed: number;
  content_matches: boolean;
  first_mismatch: unknown;
  consumed_offsets_contiguous: boolean;
  first_consumed_offset: number | null;
  consumer_errors: string[];
  seconds: number;
}

/** Every batch header of partition 0 of `topic`, by raw Fetch v17 from offset 0 to the high watermark. */
async function storedBatches(topic: string): Promise<BatchHeader[]> {
  const md = await client.request(3, 12, { topics: [{ name: topic, topicId: ZERO_UUID }] });
  const topicId = md.topics[0].topicId as string;
  const headers: BatchHeader[] = [];
  let offset = 0;
  for (;;) {
    const res = await client.request(1, 17, {
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 8 * 1024 * 1024,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topicId, partitions: [{ partition: 0, fetchOffset: offset, partitionMaxBytes: 4 * 1024 * 1024 }] }],
    });
    const p = res.responses[0].partitions[0];
    expect(p.errorCode).toBe(ErrorCode.NONE);
    const bytes: Uint8Array = p.records ?? new Uint8Array(0);
    if (bytes.length === 0) return headers;
    for (let at = 0; at + BATCH_HEADER_BYTES <= bytes.length; ) {
      const header = parseBatchHeader(bytes, at);
      if (at + header.sizeBytes > bytes.length) break;
      headers.push(header);
      offset = header.baseOffset + header.lastOffsetDelta + 1;
      at += header.sizeBytes;
    }
    if (offset >= p.highWatermark) return headers;
  }
}

describe("librdkafka (confluent-kafka)", () => {
  test(`idempotent producer, ${COUNT} messages per codec (${CODECS.join(", ")}), read back with assign()`, async () => {
    const proc = Bun.spawn([VENV_PYTHON, SCRIPT, broker.bootstrap, PREFIX, String(COUNT), ...CODECS], {
      stdout: "pipe",
      stderr: "pipe",
      stdin: "ignore",
    });
    const killer = setTimeout(() => proc.kill("SIGKILL"), TIMEOUT - 20_000);
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(killer);
    if (code !== 0) throw new Error(`produce_consume.py exited ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
    const apiVersions = await client.request(18, 3, { clientSoftwareName: "librdkafka-test", clientSoftwareVersion: "1" });
    // librdkafka's LZ4 feature flag depends on FindCoordinator v0 in ApiVersions (a stand-in for "broker >=
    // 0.8.2", rdkafka_feature.c): without it, librdkafka quietly sends lz4-configured batches uncompressed,
    // and the lz4 check below would check nothing.
    expect(apiVersions.apiKeys.some((k: { apiKey: number }) => k.apiKey === 10)).toBe(true);
    const output = JSON.parse(stdout.trim().split("\n").pop()!) as { librdkafka: string; results: Record<string, CodecResult> };
    // librdkafka 2.x fetches without sessions (epoch -1, answered in full); whatever it sends, no session error.
    expect(broker.broker.services.fetchSessions.stats().sessionErrors).toBe(0);
    expect(output.librdkafka).toMatch(/^2\./);

    for (const codec of CODECS) {
      const r = output.results[codec]!;
      const summary = `${codec}: ${JSON.stringify(r)}`;
      expect(r.fatal_errors, summary).toEqual([]);
      expect(r.delivery_errors, summary).toEqual([]);
      expect(r.undelivered, summary).toBe(0);
      expect(r.delivered, summary).toBe(COUNT);
      expect(r.offsets_in_order, summary).toBe(true);
      expect(r.keys_in_order, summary).toBe(true);
      expect(r.first_offset, summary).toBe(0);
      expect(r.last_offset, summary).toBe(COUNT - 1);
      expect(r.consumed, summary).toBe(COUNT);
      expect(r.content_matches, summary).toBe(true);
      expect(r.consumed_offsets_contiguous, summary).toBe(true);
      expect(r.first_consumed_offset, summary).toBe(0);
      expect(r.consumer_errors, summary).toEqual([]);

      // On the wire: exactly COUNT records, every batch idempotent (one producer id, sequences without
      // gaps from 0) and compressed with the codec asked for.
      const batches = await storedBatches(`${PREFIX}${codec}`);
      expect(batches.reduce((n, b) => n + b.recordsCount, 0)).toBe(COUNT);
      const producerIds = new Set(batches.map((b) => b.producerId));
      expect(producerIds.size).toBe(1);
      expect([...producerIds][0]!).toBeGreaterThanOrEqual(0);
      let nextSequence = 0;
      for (const b of batches) {
        expect(b.baseSequence).toBe(nextSequence);
        expect(b.baseOffset).toBe(nextSequence);
        nextSequence += b.recordsCount;
        expect(b.isTransactional).toBe(false);
      }
      // librdkafka sends a batch uncompressed when compressing would not make it smaller: every batch is
      // in the codec or none, and the bulk is in the codec.
      const codecs = batches.map((b) => b.compression);
      const layout = `${codec}: batches ${JSON.stringify(batches.map((b) => [b.recordsCount, b.compression]))}`;
      expect(codecs.filter((c) => c !== CompressionCodec[codec] && c !== CompressionCodec.none), layout).toEqual([]);
      const compressedRecords = batches.filter((b) => b.compression === CompressionCodec[codec]).reduce((n, b) => n + b.recordsCount, 0);
      if (codec === "none") continue;
      expect(compressedRecords, layout).toBeGreaterThan(COUNT / 2);
    }
  }, TIMEOUT);
});
