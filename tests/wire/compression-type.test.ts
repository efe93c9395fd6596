/**
 * The topic config compression.type over the wire against an in-process broker: a batch whose codec
 * differs from the topic's is stored recompressed (src/protocol/records/produce-validation.ts, wired in
 * src/broker/00-produce.ts), keeping its header fields, as Apache Kafka does; "producer" keeps the
 * producer's codec.
 */
import { expect, describe, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { buildBatch, TEST_BASE_TIMESTAMP_MS, type TestRecord } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { compressBatch } from "../support/codec-inputs.ts";
import { readPartitionFully, utf8 } from "../support/record-decoder.ts";
import type { TestBroker } from "../support/test-broker.ts";
import type { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
const NOW = TEST_BASE_TIMESTAMP_MS;

let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (_b: TestBroker, c) => (client = c), TIMEOUT);

interface PartitionAnswer {
  errorCode: number;
  baseOffset: number;
  logAppendTimeMs: number;
}

async function createTopic(name: string, configs: Record<string, string> = {}): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: Object.entries(configs).map(([n, value]) => ({ name: n, value })) }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect([res.topics[0].errorCode, res.topics[0].errorMessage]).toEqual([ErrorCode.NONE, null]);
}

/** Produce v`version` of one batch; `transactionalId` for a transactional batch (Apache refuses one without it). */
async function produce(topic: string, records: Uint8Array, version = 11, transactionalId: string | null = null): Promise<PartitionAnswer> {
  const res = await client.request(0, version, {
    transactionalId,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: topic, partitionData: [{ index: 0, records }] }],
  });
  return res.responses[0].partitionResponses[0];
}

async function logEndOf(topic: string): Promise<number> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel: 0,
    topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }],
  });
  return res.topics[0].partitions[0].offset;
}

describe("compression.type recompresses a batch whose codec differs", () => {
  const fields = Array.from({ length: 40 }, (_, i) => ({ key: `key-${i}`, value: `value ${i} `.repeat(30), timestampMs: NOW + (i % 5) }));
  const records: TestRecord[] = fields.map((f, i) => ({ ...f, headers: [{ key: "h", value: String(i) }] }));
  const expectedRecords = fields.map((f, i) => [i, f.key, f.value, f.timestampMs, [["h", String(i)]]]);

  for (const type of ["uncompressed", "gzip", "snappy", "lz4", "zstd"] as const) {
    test(`compression.type=${type}: every producer codec is stored as ${type}, records and producer fields kept`, async () => {
      const topic = `v-ct-${type}`;
      await createTopic(topic, { "compression.type": type });
      const target = type === "uncompressed" ? CompressionCodec.none : CompressionCodec[type];
      const sources = [CompressionCodec.none, CompressionCodec.gzip, CompressionCodec.snappy, CompressionCodec.lz4, CompressionCodec.zstd];
      // An idempotent producer's batches: the sequence must survive the rebuild for dedupe to work.
      const init = await client.request(22, 4, { transactionalId: null, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
      expect(init.errorCode).toBe(ErrorCode.NONE);
      for (const [n, codec] of sources.entries()) {
        const plain = buildBatch({ records, producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: n * records.length, maxTimestampMs: NOW + 777 });
        const batch = codec === CompressionCodec.none ? plain : compressBatch(plain, codec);
        const answer = await produce(topic, batch);
        expect([answer.errorCode, answer.baseOffset]).toEqual([ErrorCode.NONE, n * records.length]);
        // The same batch again is a duplicate: answered with its offset, not stored twice.
        const again = await produce(topic, batch);
        expect([again.errorCode, again.baseOffset]).toEqual([ErrorCode.NONE, n * records.length]);
      }
      const contents = await readPartitionFully(client, topic, 0);
      expect(contents.batches.map((b) => b.header.compression)).toEqual(sources.map(() => target));
      for (const [n, b] of contents.batches.entries()) {
        expect([b.header.producerId, b.header.producerEpoch, b.header.baseSequence]).toEqual([init.producerId, init.producerEpoch, n * records.length]);
        expect([b.header.baseTimestampMs, b.header.maxTimestampMs, b.header.timestampType]).toEqual([NOW, NOW + 4, "create-time"]);
        const got = b.records.map((r) => [r.offset - n * records.length, utf8(r.key), utf8(r.value), r.timestampMs, r.headers.map((h) => [h.key, utf8(h.value)])]);
        expect(got).toEqual(
          expectedRecords,
        );
      }
    }, TIMEOUT);
  }

  test("compression.type=producer (the default) keeps the producer's codec", async () => {
    await createTopic("v-ct-producer", { "compression.type": "producer" });
    await createTopic("v-ct-default");
    for (const topic of ["v-ct-producer", "v-ct-default"]) {
      for (const codec of [CompressionCodec.none, CompressionCodec.snappy, CompressionCodec.zstd]) {
        const plain = buildBatch({ records });
        expect((await produce(topic, codec === CompressionCodec.none ? plain : compressBatch(plain, codec))).errorCode).toBe(ErrorCode.NONE);
      }
      const contents = await readPartitionFully(client, topic, 0);
      expect(contents.batches.map((b) => b.header.compression)).toEqual([CompressionCodec.none, CompressionCodec.snappy, CompressionCodec.zstd]);
    }
  }, TIMEOUT);

  test("a transactional batch is recompressed with its producer fields and transactional bit", async () => {
    await createTopic("v-ct-txn", { "compression.type": "gzip" });
    const init = await client.request(22, 4, { transactionalId: "v-ct-txn-producer", transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    expect(init.errorCode).toBe(ErrorCode.NONE);
    const added = await client.request(24, 3, {
      v3AndBelowTransactionalId: "v-ct-txn-producer",
      v3AndBelowProducerId: init.producerId,
      v3AndBelowProducerEpoch: init.producerEpoch,
      v3AndBelowTopics: [{ name: "v-ct-txn", partitions: [0] }],
    });
    expect(added.resultsByTopicV3AndBelow[0].resultsByPartition[0].partitionErrorCode).toBe(ErrorCode.NONE);
    const batch = compressBatch(
      buildBatch({ records, producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: 0, transactional: true }),
      CompressionCodec.lz4,
    );
    expect((await produce("v-ct-txn", batch, 11, "v-ct-txn-producer")).errorCode).toBe(ErrorCode.NONE);
    const committed = await client.request(26, 3, { transactionalId: "v-ct-txn-producer", producerId: init.producerId, producerEpoch: init.producerEpoch, committed: true });
    expect(committed.errorCode).toBe(ErrorCode.NONE);
    const contents = await readPartitionFully(client, "v-ct-txn", 0);
    const data = contents.batches.find((b) => !b.header.isControl)!;
    expect([data.header.compression, data.header.isTransactional, data.header.producerId, data.header.producerEpoch, data.header.baseSequence]).toEqual([
      CompressionCodec.gzip,
      true,
      init.producerId,
      init.producerEpoch,
      0,
    ]);
    expect(data.records.length).toBe(records.length);
  }, TIMEOUT);

  test("on a LogAppendTime topic the recompressed batch carries the append time as its max timestamp", async () => {
    await createTopic("v-ct-lat", { "compression.type": "zstd", "message.timestamp.type": "LogAppendTime" });
    const before = Date.now();
    const answer = await produce("v-ct-lat", compressBatch(buildBatch({ records }), CompressionCodec.snappy));
    expect(answer.errorCode).toBe(ErrorCode.NONE);
    const contents = await readPartitionFully(client, "v-ct-lat", 0);
    const header = contents.batches[0]!.header;
    expect([header.compression, header.timestampType]).toEqual([CompressionCodec.zstd, "log-append-time"]);
    expect(header.maxTimestampMs).toBeGreaterThanOrEqual(before);
    expect(header.maxTimestampMs).toBe(answer.logAppendTimeMs);
  }, TIMEOUT);

  test("a batch that recompression makes larger than max.message.bytes is MESSAGE_TOO_LARGE, nothing stored", async () => {
    await createTopic("v-ct-large", { "compression.type": "uncompressed", "max.message.bytes": "2000" });
    const big = compressBatch(buildBatch({ records }), CompressionCodec.zstd);
    expect(big.length).toBeLessThan(2000);
    const answer = await produce("v-ct-large", big);
    expect(answer.errorCode).toBe(ErrorCode.MESSAGE_TOO_LARGE);
    expect(await logEndOf("v-ct-large")).toBe(0);
  }, TIMEOUT);
});
