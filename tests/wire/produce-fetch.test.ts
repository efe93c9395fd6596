/**
 * Wire tests of the data path with raw frames: Produce v3-11, Fetch v4-17, ListOffsets v1-8,
 * DeleteRecords v0-2 and the idempotent producer (InitProducerId + the five-batch dedupe window).
 * Every answer is checked for its exact error code and offsets, as Apache
 * Kafka gives them; "nothing written" is checked on the log itself, not only on the answer.
 */
import { describe, expect, test } from "bun:test";
import { rmSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import {
  BATCH_HEADER_BYTES,
  checkBatch,
  parseBatchHeader,
  TIMESTAMP_TYPE_BIT,
  type BatchHeader,
} from "../../src/protocol/records/record-batch.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { buildBatch, concatBytes, simpleBatch, TEST_BASE_TIMESTAMP_MS, type TestBatchSpec } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 90_000;
const EARLIEST = -2;
const LATEST = -1;
const MAX_TIMESTAMP = -3;
const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;

let broker: TestBroker;
let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT);

// ---- helpers ------------------------------------------------------------------------------------

const decoder = new TextDecoder();

interface DecodedRecord {
  offset: number;
  timestampMs: number;
  key: string | null;
  value: string | null;
}

interface DecodedBatch {
  header: BatchHeader;
  records: DecodedRecord[];
}

/** Decodes uncompressed batches as a consumer would, checking each one's CRC on the way. */
function decodeBatches(bytes: Uint8Array | null): DecodedBatch[] {
  const out: DecodedBatch[] = [];
  if (bytes === null) return out;
  for (let position = 0; position + BATCH_HEADER_BYTES <= bytes.length; ) {
    const checked = checkBatch(bytes, position);
    if (typeof checked !== "number") throw new Error(`fetched batch at ${position} is unsound: ${JSON.stringify(checked)}`);
    const header = parseBatchHeader(bytes, position);
    expect(header.compression).toBe(0);
    const reader = new Reader(bytes, position + BATCH_HEADER_BYTES, position + header.sizeBytes);
    const records: DecodedRecord[] = [];
    for (let i = 0; i < header.recordsCount; i++) {
      const length = reader.varint();
      const next = reader.offset + length;
      reader.int8(); // attributes
      const timestampDelta = reader.varlong();
      const offsetDelta = reader.varint();
      const keyLength = reader.varint();
      const key = keyLength < 0 ? null : decoder.decode(reader.raw(keyLength));
      const valueLength = reader.varint();
      const value = valueLength < 0 ? null : decoder.decode(reader.raw(valueLength));
      reader.offset = next; // headers are not looked at
      records.push({ offset: header.baseOffset + offsetDelta, timestampMs: header.baseTimestampMs + timestampDelta, key, value });
    }
    out.push({ header, records });
    position += checked;
  }
  return out;
}

const recordsOf = (bytes: Uint8Array | null) => decodeBatches(bytes).flatMap((b) => b.records);
const valuesOf = (bytes: Uint8Array | null) => recordsOf(bytes).map((r) => r.value);

async function createTopic(name: string, partitions = 1, configs: Record<string, string> = {}): Promise<string> {
  const res = await client.request(19, 7, {
    topics: [
      {
        name,
        numPartitions: partitions,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries(configs).map(([n, value]) => ({ name: n, value })),
      },
    ],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  return res.topics[0].topicId as string;
}

async function deleteTopic(name: string): Promise<void> {
  const res = await client.request(20, 6, { topics: [{ name, topicId: ZERO_UUID }], timeoutMs: 10_000 });
  expect(res.responses[0].errorCode).toBe(ErrorCode.NONE);
}

interface ProduceAnswer {
  index: number;
  errorCode: number;
  baseOffset: number;
  logAppendTimeMs: number;
  logStartOffset: number;
  errorMessage: string | null;
}

/** One batch (or any bytes) to one partition; the partition's answer. */
async function produce(
  topic: string,
  partition: number,
  records: Uint8Array | null,
  opts: { version?: number; acks?: number; via?: WireClient } = {},
): Promise<ProduceAnswer> {
  const res = await (opts.via ?? client).request(0, opts.version ?? 11, {
    transactionalId: null,
    acks: opts.acks ?? -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
  });
  expect(res.responses).toHaveLength(1);
  expect(res.responses[0].name).toBe(topic);
  expect(res.responses[0].partitionResponses).toHaveLength(1);
  return res.responses[0].partitionResponses[0];
}

async function produceOk(topic: string, partition: number, records: Uint8Array, version = 11): Promise<number> {
  const answer = await produce(topic, partition, records, { version });
  expect(answer.errorMessage).toBeNull();
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return answer.baseOffset;
}

interface FetchArgs {
  topic: string;
  topicId?: string;
  partition?: number;
  /** Several partitions of the topic, each fetched from `offset` (instead of `partition`). */
  partitions?: number[];
  offset: number;
  version?: number;
  maxWaitMs?: number;
  minBytes?: number;
  maxBytes?: number;
  partitionMaxBytes?: number;
  isolationLevel?: number;
  sessionId?: number;
  sessionEpoch?: number;
  via?: WireClient;
}

/** A fetch of one partition (or of `partitions`); v13+ names the topic by id (looked up by name when not given). */
async function fetchRaw(args: FetchArgs): Promise<any> {
  const version = args.version ?? 17;
  const topicId = version >= 13 ? (args.topicId ?? (await topicIdOf(args.topic))) : ZERO_UUID;
  return (args.via ?? client).request(1, version, {
    replicaId: -1,
    maxWaitMs: args.maxWaitMs ?? 0,
    minBytes: args.minBytes ?? 0,
    maxBytes: args.maxBytes ?? 50 * 1024 * 1024,
    isolationLevel: args.isolationLevel ?? READ_UNCOMMITTED,
    sessionId: args.sessionId ?? 0,
    sessionEpoch: args.sessionEpoch ?? -1,
    topics: [
      {
        topic: version >= 13 ? "" : args.topic,
        topicId,
        partitions: (args.partitions ?? [args.partition ?? 0]).map((partition) => ({
          partition,
          currentLeaderEpoch: -1,
          fetchOffset: args.offset,
          lastFetchedEpoch: -1,
          logStartOffset: -1,
          partitionMaxBytes: args.partitionMaxBytes ?? 1024 * 1024,
        })),
      },
    ],
    forgottenTopicsData: [],
    rackId: "",
  });
}

/** The single partition's answer of a one-partition fetch. */
async function fetchOne(args: FetchArgs): Promise<any> {
  const res = await fetchRaw(args);
  expect(res.errorCode).toBe(ErrorCode.NONE);
  expect(res.responses).toHaveLength(1);
  expect(res.responses[0].partitions).toHaveLength(1);
  return res.responses[0].partitions[0];
}

async function listOffset(
  topic: string,
  partition: number,
  timestamp: number,
  version = 8,
  isolationLevel = READ_UNCOMMITTED,
): Promise<{ errorCode: number; offset: number; timestamp: number }> {
  const res = await client.request(2, version, {
    replicaId: -1,
    isolationLevel,
    topics: [{ name: topic, partitions: [{ partitionIndex: partition, currentLeaderEpoch: -1, timestamp }] }],
    timeoutMs: 10_000,
  });
  return res.topics[0].partitions[0];
}

async function latestOffset(topic: string, partition = 0): Promise<number> {
  const answer = await listOffset(topic, partition, LATEST);
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return answer.offset;
}

async function logEndOf(topic: string, partition = 0): Promise<number> {
  const p = await broker.broker.services.partitions.get(topic, partition);
  if (!p) throw new Error(`no partition ${topic}-${partition}`);
  return p.log.logEndOffset;
}

/** Polls `probe` until it returns true; fails after `timeoutMs`. No fixed sleeps: a short yield per try. */
async function waitFor(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(5);
  }
}

/** The topic's id from Metadata v12; the zero uuid for a topic that does not exist. */
async function topicIdOf(name: string): Promise<string> {
  const md = await client.request(3, 12, { topics: [{ name, topicId: ZERO_UUID }], allowAutoTopicCreation: false });
  return md.topics[0].errorCode === ErrorCode.NONE ? md.topics[0].topicId : ZERO_UUID;
}

async function initProducerId(version = 5): Promise<{ producerId: number; producerEpoch: number }> {
  const res = await client.request(22, version, {
    transactionalId: null,
    transactionTimeoutMs: 2147483647,
    producerId: -1,
    producerEpoch: -1,
  });
  expect(res.errorCode).toBe(ErrorCode.NONE);
  return { producerId: Number(res.producerId), producerEpoch: res.producerEpoch };
}

/** An idempotent batch of `count` records whose values name the sequence numbers they carry. */
function idempotentBatch(producerId: number, producerEpoch: number, baseSequence: number, count: number, extra: Partial<TestBatchSpec> = {}) {
  const records = Array.from({ length: count }, (_, i) => ({ key: `p${producerId}`, value: `e${producerEpoch}-s${baseSequence + i}` }));
  return buildBatch({ records, producerId, producerEpoch, baseSequence, ...extra });
}

// ---- Produce ------------------------------------------------------------------------------------

describe("Produce", () => {
  test("acks=-1, acks=1 and acks=0 in every version 3..11, offsets in order", async () => {
    await createTopic("p-acks");
    let expectedOffset = 0;
    for (let version = 3; version <= 11; version++) {
      const all = await produce("p-acks", 0, simpleBatch(2), { version, acks: -1 });
      expect(all).toMatchObject({ index: 0, errorCode: ErrorCode.NONE, baseOffset: expectedOffset, logAppendTimeMs: -1 });
      if (version >= 5) expect(all.logStartOffset).toBe(0);
      if (version >= 8) expect(all.errorMessage).toBeNull();
      expectedOffset += 2;
      // acks=-1 is answered once durable: the high watermark already includes it.
      expect(await latestOffset("p-acks")).toBe(expectedOffset);

      const one = await produce("p-acks", 0, simpleBatch(3), { version, acks: 1 });
      expect(one).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: expectedOffset, logAppendTimeMs: -1 });
      expectedOffset += 3;
      await waitFor("acks=1 data to reach the high watermark", async () => (await latestOffset("p-acks")) === expectedOffset);

      // acks=0: no response at all. The next request on the same connection must get its own answer.
      client.send(
        client.encodeRequest(0, version, {
          transactionalId: null,
          acks: 0,
          timeoutMs: 30_000,
          topicData: [{ name: "p-acks", partitionData: [{ index: 0, records: simpleBatch(4) }] }],
        }),
      );
      expectedOffset += 4;
      await waitFor("acks=0 data to reach the high watermark", async () => (await latestOffset("p-acks")) === expectedOffset);
    }
    const fetched = await fetchOne({ topic: "p-acks", offset: 0 });
    const records = recordsOf(fetched.records);
    expect(records.map((r) => r.offset)).toEqual(Array.from({ length: expectedOffset }, (_, i) => i));
    expect(records.slice(0, 9).map((r) => r.value)).toEqual(["v0", "v1", "v0", "v1", "v2", "v0", "v1", "v2", "v3"]);
  }, TIMEOUT);

  // Regression: bunka used to stay silent, so an acks=0 producer never learnt of any error.
  test("acks=0 with an error closes the connection, as Apache does; without one it stays open", async () => {
    await createTopic("p-acks0");
    const producer = await WireClient.connect(broker.port, "127.0.0.1", "acks0");
    try {
      const send = (topic: string, partition: number, records: Uint8Array) =>
        producer.send(
          producer.encodeRequest(0, 9, {
            transactionalId: null,
            acks: 0,
            timeoutMs: 1000,
            topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
          }),
        );
      send("p-acks0", 0, simpleBatch(2));
      // Still open: the next request is answered.
      const md = await producer.request(3, 12, { topics: [{ name: "p-acks0", topicId: ZERO_UUID }] });
      expect(md.topics[0].errorCode).toBe(ErrorCode.NONE);
      expect(producer.isClosed).toBe(false);
      await waitFor("the acks=0 batch", async () => (await latestOffset("p-acks0")) === 2);

      send("p-acks0", 3, simpleBatch(1)); // no such partition
      await waitFor("the connection to close", () => producer.isClosed);
      expect(await logEndOf("p-acks0")).toBe(2);
    } finally {
      producer.close();
    }
  }, TIMEOUT);

  test("acks=2 is INVALID_REQUIRED_ACKS for every partition, nothing written", async () => {
    await createTopic("p-badacks", 2);
    for (const version of [3, 8, 11]) {
      const res = await client.request(0, version, {
        transactionalId: null,
        acks: 2,
        timeoutMs: 1000,
        topicData: [{ name: "p-badacks", partitionData: [{ index: 0, records: simpleBatch(1) }, { index: 1, records: simpleBatch(1) }] }],
      });
      expect(res.responses[0].partitionResponses.map((p: ProduceAnswer) => [p.index, p.errorCode, p.baseOffset])).toEqual([
        [0, ErrorCode.INVALID_REQUIRED_ACKS, -1],
        [1, ErrorCode.INVALID_REQUIRED_ACKS, -1],
      ]);
    }
    expect(await logEndOf("p-badacks", 0)).toBe(0);
    expect(await logEndOf("p-badacks", 1)).toBe(0);
  }, TIMEOUT);

  test("UNKNOWN_TOPIC_OR_PARTITION for a missing topic and for partitions out of range", async () => {
    await createTopic("p-known", 2);
    expect((await produce("p-missing", 0, simpleBatch(1))).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    expect((await produce("p-known", 2, simpleBatch(1))).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    expect((await produce("p-known", -1, simpleBatch(1))).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    // One bad partition does not spoil the others of the same request.
    const mixed = await client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 1000,
      topicData: [
        { name: "p-known", partitionData: [{ index: 1, records: simpleBatch(2) }, { index: 7, records: simpleBatch(1) }] },
        { name: "p-missing", partitionData: [{ index: 0, records: simpleBatch(1) }] },
      ],
    });
    expect(mixed.responses.map((t: any) => [t.name, t.partitionResponses.map((p: ProduceAnswer) => [p.index, p.errorCode, p.baseOffset])])).toEqual([
      ["p-known", [[1, ErrorCode.NONE, 0], [7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1]]],
      ["p-missing", [[0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1]]],
    ]);
    // The metadata check that a wrong-partition fetch gets too.
    const fetched = await fetchOne({ topic: "p-known", partition: 9, offset: 0, version: 12 });
    expect(fetched.errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  }, TIMEOUT);

  test("CORRUPT_MESSAGE for a bad CRC and for a truncated batch; nothing written", async () => {
    await createTopic("p-corrupt");
    expect((await produce("p-corrupt", 0, simpleBatch(3, { corruptCrc: true }))).errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    const whole = simpleBatch(3);
    expect((await produce("p-corrupt", 0, whole.slice(0, whole.length - 5))).errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    // Shorter than a batch header and shorter than the length field.
    expect((await produce("p-corrupt", 0, whole.slice(0, 40))).errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    expect((await produce("p-corrupt", 0, whole.slice(0, 8))).errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    // A whole batch followed by a partial one is refused whole.
    expect((await produce("p-corrupt", 0, concatBytes(simpleBatch(1), whole.slice(0, 30)))).errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    expect(await logEndOf("p-corrupt")).toBe(0);
    expect(await produceOk("p-corrupt", 0, simpleBatch(1))).toBe(0);
  }, TIMEOUT);

  test("INVALID_RECORD for two batches, a control batch from a client and a nonzero base offset", async () => {
    await createTopic("p-invalid");
    expect((await produce("p-invalid", 0, concatBytes(simpleBatch(2), simpleBatch(2)))).errorCode).toBe(ErrorCode.INVALID_RECORD);
    const control = buildBatch({ records: [{ key: "\u0000\u0000\u0000\u0001", value: "\u0000\u0000\u0000\u0000\u0000\u0000" }], control: true, producerId: 9, producerEpoch: 0, baseSequence: -1 });
    expect((await produce("p-invalid", 0, control)).errorCode).toBe(ErrorCode.INVALID_RECORD);
    expect((await produce("p-invalid", 0, simpleBatch(2, { baseOffset: 7 }))).errorCode).toBe(ErrorCode.INVALID_RECORD);
    // The declared count must match lastOffsetDelta (Apache's LogValidator).
    expect((await produce("p-invalid", 0, simpleBatch(2, { recordsCount: 3 }))).errorCode).toBe(ErrorCode.INVALID_RECORD);
    // An empty record set.
    expect((await produce("p-invalid", 0, new Uint8Array(0))).errorCode).toBe(ErrorCode.INVALID_RECORD);
    expect(await logEndOf("p-invalid")).toBe(0);
    expect(await latestOffset("p-invalid")).toBe(0);
  }, TIMEOUT);

  test("MESSAGE_TOO_LARGE above the topic's max.message.bytes", async () => {
    await createTopic("p-large", 1, { "max.message.bytes": "300" });
    const big = simpleBatch(1, { valueBytes: 400 });
    expect(big.length).toBeGreaterThan(300);
    const answer = await produce("p-large", 0, big);
    expect(answer.errorCode).toBe(ErrorCode.MESSAGE_TOO_LARGE);
    expect(answer.baseOffset).toBe(-1);
    const small = simpleBatch(1, { valueBytes: 100 });
    expect(small.length).toBeLessThanOrEqual(300);
    expect(await produceOk("p-large", 0, small)).toBe(0);
    expect(await logEndOf("p-large")).toBe(1);
  }, TIMEOUT);

  test("UNSUPPORTED_COMPRESSION_TYPE for zstd on Produce v6", async () => {
    await createTopic("p-zstd");
    for (const version of [3, 4, 5, 6]) {
      const answer = await produce("p-zstd", 0, simpleBatch(1, { compressionCodec: 4 }), { version });
      expect(answer.errorCode).toBe(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE);
    }
    // A codec id no format has.
    expect((await produce("p-zstd", 0, simpleBatch(1, { compressionCodec: 6 }))).errorCode).toBe(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE);
    expect(await logEndOf("p-zstd")).toBe(0);
  }, TIMEOUT);

  test("a LogAppendTime topic answers the append time and rewrites the stored max timestamp", async () => {
    await createTopic("p-lat", 1, { "message.timestamp.type": "LogAppendTime" });
    const before = Date.now();
    const answer = await produce("p-lat", 0, simpleBatch(3, { timestampMs: TEST_BASE_TIMESTAMP_MS }));
    const after = Date.now();
    expect(answer.errorCode).toBe(ErrorCode.NONE);
    expect(answer.baseOffset).toBe(0);
    expect(answer.logAppendTimeMs).toBeGreaterThanOrEqual(before);
    expect(answer.logAppendTimeMs).toBeLessThanOrEqual(after);

    const fetched = await fetchOne({ topic: "p-lat", offset: 0 });
    const [batch] = decodeBatches(fetched.records); // decodeBatches checks the rewritten CRC
    expect(batch!.header.attributes & TIMESTAMP_TYPE_BIT).toBe(TIMESTAMP_TYPE_BIT);
    expect(batch!.header.timestampType).toBe("log-append-time");
    expect(batch!.header.maxTimestampMs).toBe(answer.logAppendTimeMs);
    // The base timestamp and the records stay as the producer sent them.
    expect(batch!.header.baseTimestampMs).toBe(TEST_BASE_TIMESTAMP_MS);
    expect(batch!.records.map((r) => r.value)).toEqual(["v0", "v1", "v2"]);

    // ListOffsets by timestamp goes by the append time on such a topic.
    const byTime = await listOffset("p-lat", 0, answer.logAppendTimeMs);
    expect(byTime).toMatchObject({ errorCode: ErrorCode.NONE, offset: 0, timestamp: answer.logAppendTimeMs });

    // An idempotent retry on such a topic answers the original append time.
    const { producerId } = await initProducerId();
    const first = await produce("p-lat", 0, idempotentBatch(producerId, 0, 0, 2));
    expect(first.errorCode).toBe(ErrorCode.NONE);
    const retry = await produce("p-lat", 0, idempotentBatch(producerId, 0, 0, 2));
    expect(retry).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: first.baseOffset, logAppendTimeMs: first.logAppendTimeMs });
  }, TIMEOUT);

  test("a CreateTime topic stores the producer's timestamps and answers logAppendTimeMs -1", async () => {
    await createTopic("p-ct");
    const answer = await produce("p-ct", 0, simpleBatch(2, { timestampMs: TEST_BASE_TIMESTAMP_MS + 5 }));
    expect(answer.logAppendTimeMs).toBe(-1);
    const [batch] = decodeBatches((await fetchOne({ topic: "p-ct", offset: 0 })).records);
    expect(batch!.header.timestampType).toBe("create-time");
    expect(batch!.header.maxTimestampMs).toBe(TEST_BASE_TIMESTAMP_MS + 5);
  }, TIMEOUT);
});

// ---- Fetch --------------------------------------------------------------------------------------

describe("Fetch", () => {
  test("reads what was produced in every version 4..17 (v13+ by topic id)", async () => {
    const topicId = await createTopic("f-versions");
    const expected: string[] = [];
    for (let version = 3; version <= 11; version++) {
      const values = [`a${version}`, `b${version}`];
      await produceOk("f-versions", 0, buildBatch({ records: values.map((value, i) => ({ key: `k${i}`, value })) }), version);
      expected.push(...values);
    }
    for (let version = 4; version <= 17; version++) {
      for (const from of [0, 5]) {
        const res = await fetchRaw({ topic: "f-versions", topicId, offset: from, version });
        expect(res.errorCode).toBe(ErrorCode.NONE);
        if (version >= 7) expect(res.sessionId).toBe(0);
        const topic = res.responses[0];
        if (version >= 13) expect(topic.topicId).toBe(topicId);
        else expect(topic.topic).toBe("f-versions");
        const p = topic.partitions[0];
        expect(p).toMatchObject({ partitionIndex: 0, errorCode: ErrorCode.NONE, highWatermark: 18, lastStableOffset: 18 });
        if (version >= 5) expect(p.logStartOffset).toBe(0);
        const records = recordsOf(p.records);
        // The batch holding `from` is returned whole; the consumer skips what is below its position.
        const firstBatchStart = from - (from % 2);
        expect(records.map((r) => r.offset)).toEqual(Array.from({ length: 18 - firstBatchStart }, (_, i) => firstBatchStart + i));
        expect(records.map((r) => r.value)).toEqual(expected.slice(firstBatchStart));
        expect(records.map((r) => r.key)).toEqual(expected.slice(firstBatchStart).map((_, i) => `k${(firstBatchStart + i) % 2}`));
      }
    }
    // An unknown topic id (v13+) is UNKNOWN_TOPIC_ID; an unknown name (v12-) UNKNOWN_TOPIC_OR_PARTITION.
    for (const version of [13, 15, 17]) {
      const res = await fetchRaw({ topic: "", topicId: "11111111-2222-3333-4444-555555555555", offset: 0, version });
      expect(res.errorCode).toBe(ErrorCode.NONE);
      expect(res.responses[0].topicId).toBe("11111111-2222-3333-4444-555555555555");
      expect(res.responses[0].partitions[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_ID);
    }
    for (const version of [4, 12]) {
      const p = await fetchOne({ topic: "f-nope", offset: 0, version });
      expect(p.errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    }
  }, TIMEOUT);

  test("OFFSET_OUT_OF_RANGE below the log start and beyond the log end; the log end itself is empty", async () => {
    await createTopic("f-range");
    for (let i = 0; i < 5; i++) await produceOk("f-range", 0, simpleBatch(2));
    const beyond = await fetchOne({ topic: "f-range", offset: 11 });
    expect(beyond).toMatchObject({ errorCode: ErrorCode.OFFSET_OUT_OF_RANGE, highWatermark: 10, logStartOffset: 0 });
    expect(beyond.records === null || beyond.records.length === 0).toBe(true);
    const atEnd = await fetchOne({ topic: "f-range", offset: 10 });
    expect(atEnd).toMatchObject({ errorCode: ErrorCode.NONE, highWatermark: 10 });
    expect(atEnd.records.length).toBe(0);

    const deleted = await client.request(21, 2, { topics: [{ name: "f-range", partitions: [{ partitionIndex: 0, offset: 4 }] }], timeoutMs: 5000 });
    expect(deleted.topics[0].partitions[0]).toMatchObject({ errorCode: ErrorCode.NONE, lowWatermark: 4 });
    for (const version of [4, 11, 17]) {
      const below = await fetchOne({ topic: "f-range", topicId: (await topicIdOf("f-range")), offset: 3, version });
      expect(below.errorCode).toBe(ErrorCode.OFFSET_OUT_OF_RANGE);
      if (version >= 5) expect(below.logStartOffset).toBe(4);
    }
    expect(recordsOf((await fetchOne({ topic: "f-range", offset: 4 })).records)[0]!.offset).toBe(4);
  }, TIMEOUT);

  test("partition_max_bytes and max_bytes, the first batch allowed to exceed them", async () => {
    await createTopic("f-bytes", 2);
    const batchBytes: number[] = [];
    for (let i = 0; i < 5; i++) {
      const batch = simpleBatch(2, { valueBytes: 500 });
      batchBytes.push(batch.length);
      await produceOk("f-bytes", 0, batch);
      await produceOk("f-bytes", 1, simpleBatch(2, { valueBytes: 500 }));
    }
    const size = batchBytes[0]!;
    // partition_max_bytes of 1: the first batch anyway (a consumer must be able to make progress).
    let p = await fetchOne({ topic: "f-bytes", offset: 0, partitionMaxBytes: 1 });
    expect(p.records.length).toBe(size);
    expect(recordsOf(p.records).map((r) => r.offset)).toEqual([0, 1]);
    // Two and a half batches' worth: two whole batches, never a partial one.
    p = await fetchOne({ topic: "f-bytes", offset: 2, partitionMaxBytes: Math.floor(size * 2.5) });
    expect(p.records.length).toBe(2 * size);
    expect(recordsOf(p.records).map((r) => r.offset)).toEqual([2, 3, 4, 5]);
    // max_bytes of 1 over the whole response: still the first batch.
    p = await fetchOne({ topic: "f-bytes", offset: 4, maxBytes: 1 });
    expect(p.records.length).toBe(size);

    // Two partitions, max_bytes of 1.5 batches: partition 0 gets one batch, partition 1 nothing (no error).
    const both = await fetchRaw({ topic: "f-bytes", partitions: [0, 1], offset: 0, maxBytes: Math.floor(size * 1.5) });
    const [p0, p1] = both.responses[0].partitions;
    expect(p0.errorCode).toBe(ErrorCode.NONE);
    expect(p0.records.length).toBe(size);
    expect(p1.errorCode).toBe(ErrorCode.NONE);
    expect(p1.highWatermark).toBe(10);
    expect(p1.records.length).toBe(0);
    // Enough for everything: all five batches of both partitions.
    const all = await fetchRaw({ topic: "f-bytes", partitions: [0, 1], offset: 0, maxBytes: 10 * 1024 * 1024 });
    expect(all.responses[0].partitions.map((x: any) => recordsOf(x.records).length)).toEqual([10, 10]);
  }, TIMEOUT);

  test("partition_max_bytes below one batch on every partition: only the first partition with data gets one", async () => {
    await createTopic("f-small-caps", 3);
    for (const partition of [1, 2]) for (let i = 0; i < 2; i++) await produceOk("f-small-caps", partition, simpleBatch(2, { valueBytes: 300 }));
    // Partition 0 is empty, so partition 1 is the first with data: its first batch is over the limit and
    // still answered (KIP-74); partition 2's is not, the allowance being used.
    const answer = await fetchRaw({ topic: "f-small-caps", partitions: [0, 1, 2], offset: 0, partitionMaxBytes: 1, maxBytes: 10 * 1024 * 1024 });
    const partitions = answer.responses[0].partitions;
    expect(partitions.map((x: any) => x.errorCode)).toEqual([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE]);
    expect(partitions.map((x: any) => recordsOf(x.records).map((r) => r.offset))).toEqual([[], [0, 1], []]);
    expect(partitions.map((x: any) => x.highWatermark)).toEqual([0, 4, 4]);
  }, TIMEOUT);

  test("a long poll at the end is woken by a produce well before max_wait_ms", async () => {
    await createTopic("f-wake");
    await produceOk("f-wake", 0, simpleBatch(1));
    const partition = (await broker.broker.services.partitions.get("f-wake", 0))!;
    // How many are waiting for this log's appends (a private field: read here only to know that the
    // fetch is parked, so that the produce below really is what wakes it).
    const listeners = () => {
      const set = (partition.log as unknown as { listeners?: Set<unknown> }).listeners;
      if (!(set instanceof Set)) throw new Error("PartitionLog.listeners is gone: update this test's parked-fetch probe");
      return set.size;
    };
    const idle = listeners();
    const consumer = await WireClient.connect(broker.port, "127.0.0.1", "long-poll");
    try {
      const started = performance.now();
      const polled = fetchOne({ topic: "f-wake", offset: 1, minBytes: 1, maxWaitMs: 10_000, via: consumer });
      // The fetch is parked once it listens for appends: a condition, not a sleep.
      await waitFor("the fetch to park", () => listeners() > idle);
      expect(await produceOk("f-wake", 0, buildBatch({ records: [{ key: "k", value: "wake up" }] }))).toBe(1);
      const answer = await polled;
      const elapsed = performance.now() - started;
      expect(answer.errorCode).toBe(ErrorCode.NONE);
      expect(recordsOf(answer.records).map((r) => [r.offset, r.value])).toEqual([[1, "wake up"]]);
      expect(elapsed).toBeLessThan(5_000);
      // The parked fetch let go of the partition.
      expect(listeners()).toBe(idle);
    } finally {
      consumer.close();
    }
  }, TIMEOUT);

  // Regression: the parked fetch used to sleep through the delete and answer NONE (empty) at its max wait,
  // or UNKNOWN_SERVER_ERROR when an append woke it while the log was closing.
  test("a long poll on a topic that is deleted meanwhile answers UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID at once", async () => {
    for (const version of [12, 17]) {
      const topicId = await createTopic("f-vanish");
      await produceOk("f-vanish", 0, simpleBatch(1));
      const partition = (await broker.broker.services.partitions.get("f-vanish", 0))!;
      const listeners = () => (partition.log as unknown as { listeners: Set<unknown> }).listeners.size;
      const idle = listeners();
      const consumer = await WireClient.connect(broker.port, "127.0.0.1", "vanish");
      try {
        const started = performance.now();
        const polled = fetchOne({ topic: "f-vanish", topicId, offset: 1, minBytes: 1, maxWaitMs: 10_000, version, via: consumer });
        await waitFor("the fetch to park", () => listeners() > idle);
        await deleteTopic("f-vanish");
        const answer = await polled;
        expect(answer.errorCode).toBe(version >= 13 ? ErrorCode.UNKNOWN_TOPIC_ID : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
        expect(performance.now() - started).toBeLessThan(5_000);
      } finally {
        consumer.close();
      }
    }
  }, TIMEOUT);

  test("a fetch with nothing to return answers after max_wait_ms, empty", async () => {
    await createTopic("f-wait");
    for (const [version, maxWaitMs] of [[4, 300], [17, 600]] as const) {
      const started = performance.now();
      const answer = await fetchOne({ topic: "f-wait", topicId: await topicIdOf("f-wait"), offset: 0, minBytes: 1, maxWaitMs, version });
      const elapsed = performance.now() - started;
      expect(answer.errorCode).toBe(ErrorCode.NONE);
      expect(answer.records.length).toBe(0);
      expect(elapsed).toBeGreaterThanOrEqual(maxWaitMs - 1); // timers are ms-granular
      expect(elapsed).toBeLessThan(maxWaitMs + 2_000);
    }
    // min_bytes 0 never waits.
    const started = performance.now();
    await fetchOne({ topic: "f-wait", offset: 0, minBytes: 0, maxWaitMs: 5_000 });
    expect(performance.now() - started).toBeLessThan(2_000);
    // An error answers at once too.
    const errStarted = performance.now();
    expect((await fetchOne({ topic: "f-wait", offset: 99, minBytes: 1, maxWaitMs: 5_000 })).errorCode).toBe(ErrorCode.OFFSET_OUT_OF_RANGE);
    expect(performance.now() - errStarted).toBeLessThan(2_000);
  }, TIMEOUT);

  test("fetch sessions: an unknown id is FETCH_SESSION_ID_NOT_FOUND, id 0 epoch 0 a full answer opening a session", async () => {
    // tests/wire/fetch-sessions.test.ts has the session rules one by one.
    await createTopic("f-session");
    await produceOk("f-session", 0, simpleBatch(3));
    const topicId = await topicIdOf("f-session");
    for (const version of [7, 12, 17]) {
      const unknown = await fetchRaw({ topic: "f-session", topicId, offset: 0, version, sessionId: 1234, sessionEpoch: 1 });
      expect(unknown).toMatchObject({ errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND, sessionId: 0 });
      expect(unknown.responses).toEqual([]);

      const full = await fetchRaw({ topic: "f-session", topicId, offset: 0, version, sessionId: 0, sessionEpoch: 0 });
      expect(full.errorCode).toBe(ErrorCode.NONE);
      expect(full.sessionId).toBeGreaterThan(0);
      expect(valuesOf(full.responses[0].partitions[0].records)).toEqual(["v0", "v1", "v2"]);

      const sessionless = await fetchRaw({ topic: "f-session", topicId, offset: 0, version, sessionId: 0, sessionEpoch: -1 });
      expect(sessionless.errorCode).toBe(ErrorCode.NONE);
      expect(sessionless.sessionId).toBe(0);

      // Session id 0 with a positive epoch names no session, as in Apache Kafka.
      const badEpoch = await fetchRaw({ topic: "f-session", topicId, offset: 0, version, sessionId: 0, sessionEpoch: 3 });
      expect(badEpoch.errorCode).toBe(ErrorCode.FETCH_SESSION_ID_NOT_FOUND);
    }
  }, TIMEOUT);

  test("read_committed answers an empty aborted list, read_uncommitted a null one", async () => {
    await createTopic("f-isolation");
    await produceOk("f-isolation", 0, simpleBatch(2));
    for (const version of [4, 11, 17]) {
      const topicId = await topicIdOf("f-isolation");
      const committed = await fetchOne({ topic: "f-isolation", topicId, offset: 0, version, isolationLevel: READ_COMMITTED });
      expect(committed.abortedTransactions).toEqual([]);
      expect(committed.lastStableOffset).toBe(2);
      expect(valuesOf(committed.records)).toEqual(["v0", "v1"]);
      const uncommitted = await fetchOne({ topic: "f-isolation", topicId, offset: 0, version, isolationLevel: READ_UNCOMMITTED });
      expect(uncommitted.abortedTransactions).toBeNull();
      expect(valuesOf(uncommitted.records)).toEqual(["v0", "v1"]);
    }
  }, TIMEOUT);
});


// ---- ListOffsets --------------------------------------------------------------------------------

describe("ListOffsets", () => {
  test("earliest, latest, max timestamp (v7+) and by timestamp, in every version 1..8", async () => {
    await createTopic("l-offsets");
    const t = TEST_BASE_TIMESTAMP_MS;
    // offsets 0..2 at t+10..t+12, 3..4 at t+50 and t+40 (out of order), 5 at t+20.
    await produceOk("l-offsets", 0, buildBatch({ records: [10, 11, 12].map((d) => ({ value: `x${d}`, timestampMs: t + d })) }));
    await produceOk("l-offsets", 0, buildBatch({ records: [50, 40].map((d) => ({ value: `x${d}`, timestampMs: t + d })) }));
    await produceOk("l-offsets", 0, buildBatch({ records: [{ value: "x20", timestampMs: t + 20 }] }));

    for (let version = 1; version <= 8; version++) {
      expect(await listOffset("l-offsets", 0, EARLIEST, version)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 0, timestamp: -1 });
      expect(await listOffset("l-offsets", 0, LATEST, version)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 6, timestamp: -1 });
      if (version >= 7) {
        expect(await listOffset("l-offsets", 0, MAX_TIMESTAMP, version)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 3, timestamp: t + 50 });
      }
      // The first record at or after the time asked for.
      expect(await listOffset("l-offsets", 0, t, version)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 0, timestamp: t + 10 });
      expect(await listOffset("l-offsets", 0, t + 11, version)).toMatchObject({ offset: 1, timestamp: t + 11 });
      expect(await listOffset("l-offsets", 0, t + 13, version)).toMatchObject({ offset: 3, timestamp: t + 50 });
      expect(await listOffset("l-offsets", 0, t + 45, version)).toMatchObject({ offset: 3, timestamp: t + 50 });
      // Nothing that late: offset -1 and timestamp -1, as Apache answers.
      expect(await listOffset("l-offsets", 0, t + 51, version)).toMatchObject({ errorCode: ErrorCode.NONE, offset: -1, timestamp: -1 });
      if (version >= 2) {
        expect(await listOffset("l-offsets", 0, LATEST, version, READ_COMMITTED)).toMatchObject({ offset: 6 });
      }
    }
    expect((await listOffset("l-missing", 0, LATEST)).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    expect((await listOffset("l-offsets", 3, LATEST)).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    // An empty partition: earliest = latest = 0, max timestamp none.
    await createTopic("l-empty");
    expect(await listOffset("l-empty", 0, EARLIEST)).toMatchObject({ offset: 0 });
    expect(await listOffset("l-empty", 0, LATEST)).toMatchObject({ offset: 0 });
    expect(await listOffset("l-empty", 0, MAX_TIMESTAMP)).toMatchObject({ errorCode: ErrorCode.NONE, offset: -1, timestamp: -1 });
  }, TIMEOUT);
});

// ---- DeleteRecords ------------------------------------------------------------------------------

describe("DeleteRecords", () => {
  const deleteRecords = async (topic: string, partitionIndex: number, offset: number, version = 2) => {
    const res = await client.request(21, version, { topics: [{ name: topic, partitions: [{ partitionIndex, offset }] }], timeoutMs: 5000 });
    return res.topics[0].partitions[0] as { partitionIndex: number; lowWatermark: number; errorCode: number };
  };

  test("moves the log start; -1 means the high watermark; beyond it is OFFSET_OUT_OF_RANGE", async () => {
    await createTopic("d-records");
    for (let i = 0; i < 5; i++) await produceOk("d-records", 0, simpleBatch(2)); // offsets 0..9 in batches of 2

    expect(await deleteRecords("d-records", 0, 5, 0)).toMatchObject({ errorCode: ErrorCode.NONE, lowWatermark: 5 });
    expect(await listOffset("d-records", 0, EARLIEST)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 5 });
    const below = await fetchOne({ topic: "d-records", offset: 4 });
    expect(below).toMatchObject({ errorCode: ErrorCode.OFFSET_OUT_OF_RANGE, logStartOffset: 5 });
    const at = await fetchOne({ topic: "d-records", offset: 5 });
    expect(at.errorCode).toBe(ErrorCode.NONE);
    expect(at.logStartOffset).toBe(5);
    // The batch 4..5 holds the new start: it is returned whole, the consumer skips offset 4.
    expect(recordsOf(at.records).map((r) => r.offset)).toEqual([4, 5, 6, 7, 8, 9]);
    // Timestamp lookups never answer below the log start.
    expect(await listOffset("d-records", 0, 0)).toMatchObject({ offset: 5 });

    // Lower than the current start: nothing changes, the answer is the current start.
    expect(await deleteRecords("d-records", 0, 2, 1)).toMatchObject({ errorCode: ErrorCode.NONE, lowWatermark: 5 });
    expect(await deleteRecords("d-records", 0, 11)).toMatchObject({ errorCode: ErrorCode.OFFSET_OUT_OF_RANGE, lowWatermark: -1 });
    expect(await deleteRecords("d-records", 0, -1)).toMatchObject({ errorCode: ErrorCode.NONE, lowWatermark: 10 });
    expect(await listOffset("d-records", 0, EARLIEST)).toMatchObject({ offset: 10 });
    expect(await listOffset("d-records", 0, LATEST)).toMatchObject({ offset: 10 });
    expect((await fetchOne({ topic: "d-records", offset: 9 })).errorCode).toBe(ErrorCode.OFFSET_OUT_OF_RANGE);
    expect((await fetchOne({ topic: "d-records", offset: 10 })).errorCode).toBe(ErrorCode.NONE);
    // Producing goes on from the end; the start stays.
    const answer = await produce("d-records", 0, simpleBatch(1));
    expect(answer).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 10, logStartOffset: 10 });

    expect((await deleteRecords("d-missing", 0, 1)).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    expect((await deleteRecords("d-records", 1, 1)).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  }, TIMEOUT);
});

// ---- restarts and topic re-creation -------------------------------------------------------------

describe("durability", () => {
  test("produced data, the log start and offsets survive broker.restart()", async () => {
    await createTopic("r-survive", 2);
    for (let i = 0; i < 4; i++) {
      await produceOk("r-survive", 0, buildBatch({ records: [{ key: `k${i}`, value: `before-${i}` }] }));
      await produceOk("r-survive", 1, buildBatch({ records: [{ key: `k${i}`, value: `p1-${i}` }] }));
    }
    expect((await client.request(21, 2, { topics: [{ name: "r-survive", partitions: [{ partitionIndex: 1, offset: 2 }] }], timeoutMs: 5000 })).topics[0].partitions[0].lowWatermark).toBe(2);
    const topicId = await topicIdOf("r-survive");

    client.close();
    await broker.restart();
    client = await WireClient.connect(broker.port);

    expect(await topicIdOf("r-survive")).toBe(topicId);
    expect(valuesOf((await fetchOne({ topic: "r-survive", offset: 0 })).records)).toEqual(["before-0", "before-1", "before-2", "before-3"]);
    expect(await listOffset("r-survive", 0, LATEST)).toMatchObject({ offset: 4 });
    expect(await listOffset("r-survive", 1, EARLIEST)).toMatchObject({ offset: 2 });
    expect((await fetchOne({ topic: "r-survive", partition: 1, offset: 1 })).errorCode).toBe(ErrorCode.OFFSET_OUT_OF_RANGE);
    expect(valuesOf((await fetchOne({ topic: "r-survive", partition: 1, offset: 2 })).records)).toEqual(["p1-2", "p1-3"]);
    expect(await produceOk("r-survive", 0, simpleBatch(1))).toBe(4);
  }, TIMEOUT);

  test("a deleted then recreated topic has empty partitions and a new id", async () => {
    const oldId = await createTopic("r-recreate", 2);
    await produceOk("r-recreate", 0, simpleBatch(3));
    await produceOk("r-recreate", 1, simpleBatch(2));
    await deleteTopic("r-recreate");
    expect((await produce("r-recreate", 0, simpleBatch(1))).errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    const newId = await createTopic("r-recreate", 2);
    expect(newId).not.toBe(oldId);
    for (const partition of [0, 1]) {
      expect(await listOffset("r-recreate", partition, EARLIEST)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 0 });
      expect(await listOffset("r-recreate", partition, LATEST)).toMatchObject({ errorCode: ErrorCode.NONE, offset: 0 });
      const p = await fetchOne({ topic: "r-recreate", topicId: newId, partition, offset: 0 });
      expect(p).toMatchObject({ errorCode: ErrorCode.NONE, highWatermark: 0 });
      expect(p.records.length).toBe(0);
    }
    const stale = await fetchRaw({ topic: "", topicId: oldId, offset: 0 });
    expect(stale.responses[0].partitions[0].errorCode).toBe(ErrorCode.UNKNOWN_TOPIC_ID);
    expect(await produceOk("r-recreate", 0, simpleBatch(1))).toBe(0);
    expect(valuesOf((await fetchOne({ topic: "r-recreate", topicId: newId, offset: 0 })).records)).toEqual(["v0"]);
  }, TIMEOUT);
});

// ---- idempotence --------------------------------------------------------------------------------

describe("idempotent producer", () => {
  test("InitProducerId hands out distinct ids at epoch 0 in every version 0..5", async () => {
    const seen = new Set<number>();
    for (let version = 0; version <= 5; version++) {
      for (let i = 0; i < 3; i++) {
        const { producerId, producerEpoch } = await initProducerId(version);
        expect(producerEpoch).toBe(0);
        expect(producerId).toBeGreaterThanOrEqual(0);
        expect(seen.has(producerId)).toBe(false);
        seen.add(producerId);
      }
    }
    expect(seen.size).toBe(18);
  }, TIMEOUT);

  test("retries of the last five batches answer their original offsets; the sixth-oldest and gaps are 45", async () => {
    await createTopic("i-window");
    const { producerId } = await initProducerId();
    // A non-idempotent batch first, so that the producer's offsets do not start at 0.
    await produceOk("i-window", 0, simpleBatch(1));
    const baseOffsets: number[] = [];
    for (let b = 0; b < 6; b++) {
      const answer = await produce("i-window", 0, idempotentBatch(producerId, 0, b * 2, 2));
      expect(answer.errorCode).toBe(ErrorCode.NONE);
      baseOffsets.push(answer.baseOffset);
    }
    expect(baseOffsets).toEqual([1, 3, 5, 7, 9, 11]);
    const end = await logEndOf("i-window");
    expect(end).toBe(13);

    // Each of the last five, newest first and oldest first, in several Produce versions.
    for (const version of [3, 7, 11]) {
      for (const b of [5, 1, 3, 2, 4]) {
        const retry = await produce("i-window", 0, idempotentBatch(producerId, 0, b * 2, 2), { version });
        expect(retry.errorMessage ?? null).toBeNull();
        expect(retry.errorCode).toBe(ErrorCode.NONE);
        expect(retry.baseOffset).toBe(baseOffsets[b]!);
      }
    }
    expect(await logEndOf("i-window")).toBe(end);
    expect(await latestOffset("i-window")).toBe(end);

    // The sixth-oldest batch has left the window.
    expect((await produce("i-window", 0, idempotentBatch(producerId, 0, 0, 2))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    // A retry with the same first sequence but another length is no duplicate.
    expect((await produce("i-window", 0, idempotentBatch(producerId, 0, 10, 1))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    // A gap: 12 comes next, 14 does not.
    expect((await produce("i-window", 0, idempotentBatch(producerId, 0, 14, 2))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    expect(await logEndOf("i-window")).toBe(end);
    expect(await produce("i-window", 0, idempotentBatch(producerId, 0, 12, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 13 });

    // The log holds each batch exactly once, in order.
    const fetched = recordsOf((await fetchOne({ topic: "i-window", offset: 1 })).records).map((r) => r.value);
    expect(fetched).toEqual(Array.from({ length: 14 }, (_, s) => `e0-s${s}`));
  }, TIMEOUT);

  test("epoch bump at sequence 0 is accepted, elsewhere 45; a stale epoch is INVALID_PRODUCER_EPOCH", async () => {
    await createTopic("i-epoch");
    const { producerId } = await initProducerId();
    expect(await produce("i-epoch", 0, idempotentBatch(producerId, 0, 0, 3))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
    expect(await produce("i-epoch", 0, idempotentBatch(producerId, 0, 3, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 3 });
    // A new epoch must start at sequence 0.
    expect((await produce("i-epoch", 0, idempotentBatch(producerId, 1, 4, 1))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    expect((await produce("i-epoch", 0, idempotentBatch(producerId, 1, 5, 1))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    expect(await produce("i-epoch", 0, idempotentBatch(producerId, 1, 0, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 4 });
    // The old epoch is fenced, whatever the sequence, retries included.
    expect((await produce("i-epoch", 0, idempotentBatch(producerId, 0, 4, 1))).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    expect((await produce("i-epoch", 0, idempotentBatch(producerId, 0, 3, 1))).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    expect((await produce("i-epoch", 0, idempotentBatch(producerId, 0, 0, 1), { version: 3 })).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    // The new epoch's window works as usual.
    expect(await produce("i-epoch", 0, idempotentBatch(producerId, 1, 0, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 4 });
    expect(await produce("i-epoch", 0, idempotentBatch(producerId, 1, 2, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 6 });
    expect(await logEndOf("i-epoch")).toBe(7);
    // Producer ids are per producer: another one is unaffected.
    const other = await initProducerId();
    expect(await produce("i-epoch", 0, idempotentBatch(other.producerId, 0, 0, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 7 });
  }, TIMEOUT);

  test("sequences wrap from 2147483647 to 0", async () => {
    await createTopic("i-wrap");
    const { producerId } = await initProducerId();
    // No state yet: any first sequence is accepted.
    expect(await produce("i-wrap", 0, idempotentBatch(producerId, 0, 2147483646, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
    expect(await produce("i-wrap", 0, idempotentBatch(producerId, 0, 0, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 2 });
    // Retries on both sides of the wrap.
    expect(await produce("i-wrap", 0, idempotentBatch(producerId, 0, 2147483646, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
    expect(await produce("i-wrap", 0, idempotentBatch(producerId, 0, 0, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 2 });
    expect(await logEndOf("i-wrap")).toBe(4);

    // A batch that itself spans the wrap: 2147483647, 0, 1; then 2 follows.
    const second = await initProducerId();
    expect(await produce("i-wrap", 0, idempotentBatch(second.producerId, 0, 2147483647, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 4 });
    expect(await produce("i-wrap", 0, idempotentBatch(second.producerId, 0, 0, 3))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 5 });
    expect((await produce("i-wrap", 0, idempotentBatch(second.producerId, 0, 4, 1))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    expect(await produce("i-wrap", 0, idempotentBatch(second.producerId, 0, 3, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 8 });
  }, TIMEOUT);

  test("an idempotent batch without a sequence is INVALID_RECORD", async () => {
    await createTopic("i-noseq");
    const { producerId } = await initProducerId();
    expect((await produce("i-noseq", 0, idempotentBatch(producerId, 0, -1, 1))).errorCode).toBe(ErrorCode.INVALID_RECORD);
    expect(await logEndOf("i-noseq")).toBe(0);
  }, TIMEOUT);

  test("dedupe survives broker.restart(): a retry of the last batch still answers its original offset", async () => {
    await createTopic("i-restart", 2);
    const { producerId } = await initProducerId();
    for (let b = 0; b < 3; b++) {
      expect(await produce("i-restart", 0, idempotentBatch(producerId, 0, b * 2, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: b * 2 });
    }
    expect(await produce("i-restart", 1, idempotentBatch(producerId, 0, 0, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });

    client.close();
    await broker.restart();
    client = await WireClient.connect(broker.port);

    expect(await produce("i-restart", 0, idempotentBatch(producerId, 0, 4, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 4 });
    expect(await produce("i-restart", 0, idempotentBatch(producerId, 0, 0, 2))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
    expect(await produce("i-restart", 1, idempotentBatch(producerId, 0, 0, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
    expect(await logEndOf("i-restart", 0)).toBe(6);
    expect(await logEndOf("i-restart", 1)).toBe(1);
    expect((await produce("i-restart", 0, idempotentBatch(producerId, 0, 8, 1))).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
    expect(await produce("i-restart", 0, idempotentBatch(producerId, 0, 6, 1))).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 6 });
    // A new producer id after the restart is still distinct.
    expect((await initProducerId()).producerId).not.toBe(producerId);
  }, TIMEOUT);

  test("dedupe is rebuilt from the log when the producer-state snapshot is gone", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "bunka-wire-dedupe-"));
    try {
      const first = await startTestBroker({ autoCreateTopicsEnable: false, dataDir });
      let producerId: number;
      const c1 = await WireClient.connect(first.port);
      try {
        const created = await c1.request(19, 7, { topics: [{ name: "i-replay", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000 });
        expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
        producerId = Number((await c1.request(22, 4, { transactionalId: null, transactionTimeoutMs: 2147483647, producerId: -1, producerEpoch: -1 })).producerId);
        for (let b = 0; b < 3; b++) {
          const res = await produce("i-replay", 0, idempotentBatch(producerId, 0, b, 1), { via: c1 });
          expect(res).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: b });
        }
      } finally {
        c1.close();
        await first.stop();
      }
      const snapshot = join(dataDir, "i-replay-0", "producer-state.snapshot");
      expect(existsSync(snapshot)).toBe(true);
      rmSync(snapshot);

      const second = await startTestBroker({ autoCreateTopicsEnable: false, dataDir });
      const c2 = await WireClient.connect(second.port);
      try {
        expect(await produce("i-replay", 0, idempotentBatch(producerId, 0, 2, 1), { via: c2 })).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 2 });
        expect(await produce("i-replay", 0, idempotentBatch(producerId, 0, 0, 1), { via: c2 })).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 0 });
        expect((await produce("i-replay", 0, idempotentBatch(producerId, 0, 5, 1), { via: c2 })).errorCode).toBe(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER);
        expect(await produce("i-replay", 0, idempotentBatch(producerId, 0, 3, 1), { via: c2 })).toMatchObject({ errorCode: ErrorCode.NONE, baseOffset: 3 });
      } finally {
        c2.close();
        await second.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, TIMEOUT);
});
