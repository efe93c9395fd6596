/**
 * Produce-time validation of the records inside a batch, and recompression by compression.type, run
 * against Apache Kafka 4.1.1 and bunka with the same bytes (tests/support/produce-cases.ts): every case's
 * error code is Apache's (or the documented bunka deviation), record errors and messages are Apache's
 * word for word, and a recompressed batch is stored with the header fields Apache gives it.
 *
 *   bun test --timeout 300000 tests/interop/produce-validation-reference.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { compressBatch } from "../support/codec-inputs.ts";
import { PRODUCE_CASES } from "../support/produce-cases.ts";
import { readPartitionFully, utf8 } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 180_000;
const TOPICS = [
  { name: "ref-plain", configs: {} },
  { name: "ref-compacted", configs: { "cleanup.policy": "compact" } },
  { name: "ref-gzip", configs: { "compression.type": "gzip" } },
  { name: "ref-uncompressed", configs: { "compression.type": "uncompressed" } },
];

interface PartitionAnswer {
  errorCode: number;
  baseOffset: number;
  errorMessage: string | null;
  recordErrors: { batchIndex: number; batchIndexErrorMessage: string | null }[];
}

let apache: ApacheKafka;
let bunka: TestBroker;
const clients: Record<"apache" | "bunka", WireClient> = {} as Record<"apache" | "bunka", WireClient>;

async function produce(client: WireClient, topic: string, records: Uint8Array, version: number): Promise<PartitionAnswer> {
  const res = await client.request(0, version, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: topic, partitionData: [{ index: 0, records }] }],
  });
  return res.responses[0].partitionResponses[0];
}

/** Produces until the partition has a leader that takes it (Apache's right after CreateTopics may not yet). */
async function produceWhenLed(client: WireClient, topic: string, records: () => Uint8Array): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await produce(client, topic, records(), 11);
    if (answer.errorCode === ErrorCode.NONE) return;
    if (answer.errorCode !== ErrorCode.NOT_LEADER_OR_FOLLOWER || Date.now() > deadline) throw new Error(`${topic}: ${JSON.stringify(answer)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

beforeAll(async () => {
  [apache, bunka] = await Promise.all([startApacheKafka(), startTestBroker({ autoCreateTopicsEnable: false })]);
  clients.apache = await WireClient.connect(apache.port);
  clients.bunka = await WireClient.connect(bunka.port);
  for (const client of Object.values(clients)) {
    const res = await client.request(19, 7, {
      topics: TOPICS.map((t) => ({
        name: t.name,
        numPartitions: 1,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries(t.configs).map(([name, value]) => ({ name, value })),
      })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    expect(res.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(TOPICS.map(() => ErrorCode.NONE));
    // One keyed record first in each topic: it waits for leadership and gives every case the same base.
    for (const t of TOPICS) await produceWhenLed(client, t.name, () => buildBatch({ records: [{ key: "first", value: "x" }] }));
  }
}, TIMEOUT);

afterAll(async () => {
  for (const client of Object.values(clients)) client?.close();
  await Promise.all([apache?.stop(), bunka?.stop()]);
});

describe("record validation: bunka answers as Apache Kafka 4.1.1", () => {
  test("every case, Produce v7 and v11: Apache's code, bunka's code, and the same record errors and messages", async () => {
    for (const c of PRODUCE_CASES) {
      const topic = c.topic === "compacted" ? "ref-compacted" : "ref-plain";
      for (const version of [7, 11]) {
        const nowMs = Date.now();
        const [fromApache, fromBunka] = await Promise.all([
          produce(clients.apache, topic, c.build(nowMs), version),
          produce(clients.bunka, topic, c.build(nowMs), version),
        ]);
        const what = `${c.name} v${version}: apache ${JSON.stringify(fromApache)} bunka ${JSON.stringify(fromBunka)}`;
        expect(fromApache.errorCode, what).toBe(c.apache);
        expect(fromBunka.errorCode, what).toBe(c.bunka);
        // A timestamp's record error names the bounds from each broker's own clock: compared without them.
        const withoutBounds = (errors: PartitionAnswer["recordErrors"]) =>
          errors.map((e) => ({ ...e, batchIndexErrorMessage: e.batchIndexErrorMessage?.replace(/within \[-?\d+, -?\d+\]$/, "within [...]") }));
        expect(withoutBounds(fromBunka.recordErrors), what).toEqual(withoutBounds(fromApache.recordErrors));
        expect(fromApache.recordErrors.map((e) => e.batchIndex), what).toEqual(version >= 8 ? (c.recordErrors ?? []) : []);
        // Where Apache explains itself (record errors), bunka says the same words.
        if (fromApache.recordErrors.length > 0) expect(fromBunka.errorMessage, what).toBe(fromApache.errorMessage);
      }
    }
  }, TIMEOUT);
});

describe("compression.type: a recompressed batch is stored as Apache stores it", () => {
  test("lz4 and uncompressed batches on a gzip topic, a gzip batch on an uncompressed topic: same headers and records", async () => {
    const nowMs = Date.now();
    const records = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `value ${i} `.repeat(10), timestampMs: nowMs + (i % 4) }));
    const idempotent = { producerId: 7, producerEpoch: 0 };
    const batches: [topic: string, build: () => Uint8Array][] = [
      ["ref-gzip", () => compressBatch(buildBatch({ records, maxTimestampMs: nowMs + 100 }), CompressionCodec.lz4)],
      ["ref-gzip", () => buildBatch({ records, ...idempotent, baseSequence: 0 })],
      ["ref-uncompressed", () => compressBatch(buildBatch({ records, ...idempotent, baseSequence: 30 }), CompressionCodec.gzip)],
    ];
    for (const [topic, build] of batches) {
      for (const client of Object.values(clients)) expect((await produce(client, topic, build(), 11)).errorCode).toBe(ErrorCode.NONE);
    }
    for (const topic of ["ref-gzip", "ref-uncompressed"]) {
      const [a, b] = await Promise.all([readPartitionFully(clients.apache, topic, 0), readPartitionFully(clients.bunka, topic, 0)]);
      const shape = (contents: typeof a) =>
        contents.batches.map((batch) => ({
          baseOffset: batch.header.baseOffset,
          compression: batch.header.compression,
          timestampType: batch.header.timestampType,
          baseTimestampMs: batch.header.baseTimestampMs,
          maxTimestampMs: batch.header.maxTimestampMs,
          producer: [batch.header.producerId, batch.header.producerEpoch, batch.header.baseSequence],
          lastOffsetDelta: batch.header.lastOffsetDelta,
          records: batch.records.map((r) => [r.offset, utf8(r.key), utf8(r.value), r.timestampMs]),
        }));
      // The first batch of each topic is the one produced at set-up, at another time on each broker.
      expect(shape(b).slice(1)).toEqual(shape(a).slice(1));
    }
  }, TIMEOUT);
});
