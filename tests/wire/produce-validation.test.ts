/**
 * Produce-time validation of the records inside a batch, over the wire against an in-process broker
 * (src/protocol/records/produce-validation.ts, wired in src/broker/00-produce.ts). The malformed batches and their expected answers are shared with the
 * unit test and with the reference run against Apache Kafka (tests/support/produce-cases.ts).
 */
import { describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { buildBatch, simpleBatch, TEST_BASE_TIMESTAMP_MS } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { compressBatch } from "../support/codec-inputs.ts";
import { PRODUCE_CASES, type CaseTopic } from "../support/produce-cases.ts";
import { readPartitionFully } from "../support/record-decoder.ts";
import type { TestBroker } from "../support/test-broker.ts";
import type { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
const NOW = TEST_BASE_TIMESTAMP_MS;

let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (_b: TestBroker, c) => (client = c), TIMEOUT);

interface PartitionAnswer {
  errorCode: number;
  baseOffset: number;
  errorMessage: string | null;
  recordErrors: { batchIndex: number; batchIndexErrorMessage: string | null }[];
}

async function createTopic(name: string, configs: Record<string, string> = {}): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: Object.entries(configs).map(([n, value]) => ({ name: n, value })) }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect([res.topics[0].errorCode, res.topics[0].errorMessage]).toEqual([ErrorCode.NONE, null]);
}

async function produce(topic: string, records: Uint8Array, version = 11): Promise<PartitionAnswer> {
  const res = await client.request(0, version, {
    transactionalId: null,
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

const TOPICS: Record<CaseTopic, string> = { plain: "v-plain", compacted: "v-compacted" };

describe("Produce validates the records inside a batch", () => {
  test("every malformed batch is refused with Apache's code (or bunka's documented one) and nothing is stored", async () => {
    await createTopic(TOPICS.plain);
    await createTopic(TOPICS.compacted, { "cleanup.policy": "compact" });
    for (const c of PRODUCE_CASES) {
      for (const version of [7, 11]) {
        const topic = TOPICS[c.topic];
        const before = await logEndOf(topic);
        const answer = await produce(topic, c.build(Date.now()), version);
        const what = `${c.name} (v${version}): ${JSON.stringify(answer)}`;
        expect(answer.errorCode, what).toBe(c.bunka);
        if (c.bunka === ErrorCode.NONE) {
          expect(await logEndOf(topic), what).toBeGreaterThan(before);
          continue;
        }
        expect(answer.baseOffset, what).toBe(-1);
        expect(await logEndOf(topic), what).toBe(before);
        // Record errors and the message exist from Produce v8 on.
        expect(answer.recordErrors.map((e) => e.batchIndex), what).toEqual(version >= 8 ? (c.recordErrors ?? []) : []);
        if (version >= 8) expect(answer.errorMessage, what).not.toBeNull();
      }
    }
  }, TIMEOUT);

  test("keyless records on a compacted topic (cleanup.policy=compact,delete too): Apache's record errors and message", async () => {
    await createTopic("v-compact-delete", { "cleanup.policy": "compact,delete" });
    const answer = await produce("v-compact-delete", buildBatch({ records: [{ key: "k", value: "1" }, { key: null, value: "2" }] }));
    const message = "Compacted topic cannot accept message without key in topic partition v-compact-delete-0";
    expect(answer.errorCode).toBe(ErrorCode.INVALID_RECORD);
    expect(answer.recordErrors).toEqual([{ batchIndex: 1, batchIndexErrorMessage: message }]);
    expect(answer.errorMessage).toBe(
      `One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='${message}')]`,
    );
    // Keyed records are accepted.
    expect((await produce("v-compact-delete", buildBatch({ records: [{ key: "k", value: "1" }] }))).errorCode).toBe(ErrorCode.NONE);
  }, TIMEOUT);

  test("a topic's message.timestamp.after/before.max.ms bound the CreateTime timestamps it accepts", async () => {
    await createTopic("v-bounded", { "message.timestamp.after.max.ms": "1000", "message.timestamp.before.max.ms": "60000" });
    const now = Date.now();
    const future = await produce("v-bounded", buildBatch({ records: [{ key: "k", value: "1", timestampMs: now + 30_000 }] }));
    expect(future.errorCode).toBe(ErrorCode.INVALID_TIMESTAMP);
    expect(future.recordErrors.map((e) => e.batchIndex)).toEqual([0]);
    const past = await produce("v-bounded", buildBatch({ records: [{ key: "k", value: "1", timestampMs: now - 600_000 }] }));
    expect(past.errorCode).toBe(ErrorCode.INVALID_TIMESTAMP);
    expect(await logEndOf("v-bounded")).toBe(0);
    expect((await produce("v-bounded", buildBatch({ records: [{ key: "k", value: "1", timestampMs: now }] }))).errorCode).toBe(ErrorCode.NONE);
  }, TIMEOUT);

  test("one bad partition does not fail the others of the request", async () => {
    await createTopic("v-mixed");
    const res = await client.request(0, 11, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 10_000,
      topicData: [
        { name: "v-mixed", partitionData: [{ index: 0, records: PRODUCE_CASES.find((c) => c.name === "bytes after the last record")!.build(NOW) }] },
        { name: TOPICS.plain, partitionData: [{ index: 0, records: simpleBatch(2) }] },
      ],
    });
    expect(res.responses.map((t: { partitionResponses: PartitionAnswer[] }) => t.partitionResponses[0]!.errorCode)).toEqual([ErrorCode.INVALID_RECORD, ErrorCode.NONE]);
  }, TIMEOUT);

  test("the stored max timestamp is the records' largest, whatever the producer claimed (as Apache stores it)", async () => {
    await createTopic("v-maxts");
    const claimed = buildBatch({ records: [{ key: "a", timestampMs: NOW + 5 }, { key: "b", timestampMs: NOW + 9 }, { key: "c", timestampMs: NOW }], maxTimestampMs: NOW + 1000 });
    expect((await produce("v-maxts", claimed)).errorCode).toBe(ErrorCode.NONE);
    const compressed = compressBatch(buildBatch({ records: [{ key: "d", timestampMs: NOW + 3 }], maxTimestampMs: NOW - 50 }), CompressionCodec.lz4);
    expect((await produce("v-maxts", compressed)).errorCode).toBe(ErrorCode.NONE);
    const contents = await readPartitionFully(client, "v-maxts", 0);
    expect(contents.batches.map((b) => b.header.maxTimestampMs - NOW)).toEqual([9, 3]);
    expect(contents.batches.map((b) => b.header.compression)).toEqual([CompressionCodec.none, CompressionCodec.lz4]);
  }, TIMEOUT);
});
