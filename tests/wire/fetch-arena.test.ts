/**
 * Fetch reads stored batches into reused memory (broker/fetch-arena.ts): answers built at the same time,
 * on one connection (pipelined) and on several, and answers read again after a long-poll wake-up, must
 * each carry exactly their own batches. Every batch is checked (CRC and offsets) against what was
 * produced.
 */
import { expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { checkBatch, parseBatchHeader } from "../../src/protocol/records/record-batch.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import type { TestBroker } from "../support/test-broker.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 90_000;
const PARTITIONS = 4;
const BATCHES = 40;

let broker: TestBroker;
let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT);

function fetchBody(topic: string, offsets: number[], maxBytes = 8 * 1024, maxWaitMs = 0, minBytes = 0) {
  return {
    replicaId: -1,
    maxWaitMs,
    minBytes,
    maxBytes: 50 * 1024 * 1024,
    isolationLevel: 0,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [
      {
        topic,
        topicId: ZERO_UUID,
        partitions: offsets.map((fetchOffset, partition) => ({
          partition,
          currentLeaderEpoch: -1,
          fetchOffset,
          lastFetchedEpoch: -1,
          logStartOffset: -1,
          partitionMaxBytes: maxBytes,
        })),
      },
    ],
    forgottenTopicsData: [],
    rackId: "",
  };
}

/** Checks every batch of a partition's answer: sound, contiguous from `from`, of that partition's size. */
function checkAnswer(partition: number, from: number, records: Uint8Array, recordsPerBatch: (p: number) => number): number {
  let offset = -1;
  let batches = 0;
  for (let at = 0; at < records.length; ) {
    const size = checkBatch(records, at);
    if (typeof size !== "number") throw new Error(`partition ${partition}: unsound batch at ${at}: ${JSON.stringify(size)}`);
    const header = parseBatchHeader(records, at);
    if (offset < 0) expect(header.baseOffset).toBeLessThanOrEqual(from);
    else expect(header.baseOffset).toBe(offset);
    expect(header.recordsCount).toBe(recordsPerBatch(partition));
    offset = header.baseOffset + header.recordsCount;
    at += size;
    batches++;
  }
  return batches;
}

test("answers read into reused memory at the same time each carry their own batches", async () => {
  const topic = "arena";
  const created = await client.request(19, 7, {
    topics: [{ name: topic, numPartitions: PARTITIONS, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  // Partition p's batches hold p + 1 records each, so that a batch of another partition would show.
  const recordsPerBatch = (p: number) => p + 1;
  for (let i = 0; i < BATCHES; i++) {
    const res = await client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [{ name: topic, partitionData: [...Array(PARTITIONS).keys()].map((p) => ({ index: p, records: simpleBatch(recordsPerBatch(p), { valueBytes: 300 }) })) }],
    });
    for (const r of res.responses[0].partitionResponses) expect(r.errorCode).toBe(ErrorCode.NONE);
  }

  const other = await WireClient.connect(broker.port);
  try {
    const requests: Promise<void>[] = [];
    for (let i = 0; i < 30; i++) {
      const via = i % 2 === 0 ? client : other;
      const offsets = [...Array(PARTITIONS).keys()].map((p) => ((i * 7 + p * 3) % BATCHES) * recordsPerBatch(p));
      requests.push(
        via.request(1, 12, fetchBody(topic, offsets)).then((res) => {
          expect(res.errorCode).toBe(ErrorCode.NONE);
          for (const p of res.responses[0].partitions) {
            expect(p.errorCode).toBe(ErrorCode.NONE);
            expect(checkAnswer(p.partitionIndex, offsets[p.partitionIndex]!, p.records, recordsPerBatch)).toBeGreaterThan(0);
          }
        }),
      );
    }
    await Promise.all(requests);

    // A long poll that wakes up reads again into the same memory; the answer still holds the new batch only.
    const end = [...Array(PARTITIONS).keys()].map((p) => BATCHES * recordsPerBatch(p));
    const waiting = other.request(1, 12, fetchBody(topic, end, 8 * 1024, 20_000, 1));
    const res = await client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [{ name: topic, partitionData: [{ index: 2, records: simpleBatch(recordsPerBatch(2), { valueBytes: 300 }) }] }],
    });
    expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    const woke = await waiting;
    const answers = woke.responses[0].partitions;
    expect(answers.map((p: any) => p.records.length > 0)).toEqual([false, false, true, false]);
    expect(checkAnswer(2, end[2]!, answers[2].records, recordsPerBatch)).toBe(1);
  } finally {
    other.close();
  }
}, TIMEOUT);

test("a large answer held behind a client that does not read keeps its batches while other answers reuse memory", async () => {
  // Answers of 16 MiB: their batches go from the arena to the socket without a copy (a gathered frame),
  // so the arena must stay out of the pool until the last byte is written, here long after other
  // connections' answers were read into reused memory.
  const topic = "arena-gathered";
  const created = await client.request(19, 7, {
    topics: [{ name: topic, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  const recordsPerBatch = (p: number) => 8 + p;
  for (let i = 0; i < 16; i++) {
    const res = await client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [{ name: topic, partitionData: [0, 1].map((p) => ({ index: p, records: simpleBatch(recordsPerBatch(p), { valueBytes: 100 * 1024 }) })) }],
    });
    for (const r of res.responses[0].partitionResponses) expect(r.errorCode).toBe(ErrorCode.NONE);
  }
  const bigFetch = (partition: number) => {
    const body = fetchBody(topic, [0], 16 * 1024 * 1024);
    body.topics[0]!.partitions[0]!.partition = partition;
    return body;
  };

  const received: Uint8Array[] = [];
  const raw = await Bun.connect({
    hostname: "127.0.0.1",
    port: broker.port,
    socket: { binaryType: "uint8array", data: (_s, chunk) => void received.push(chunk), close() {}, error() {} },
  });
  try {
    raw.pause();
    expect(raw.write(client.encodeRequest(1, 12, bigFetch(0), 77))).toBeGreaterThan(0);
    await until("the answer queued behind the paused socket", 30_000, async () => (broker.listener.heldResponseBytes() > 4 * 1024 * 1024 ? true : undefined), 5);

    // Meanwhile other answers of partition 1 are read (into the pool's memory) and checked.
    for (let i = 0; i < 4; i++) {
      const res = await client.request(1, 12, bigFetch(1));
      const p = res.responses[0].partitions[0];
      expect(p.errorCode).toBe(ErrorCode.NONE);
      expect(checkAnswer(1, 0, p.records, recordsPerBatch)).toBe(16);
    }

    raw.resume();
    const all = await until("the held answer", 30_000, async () => {
      const bytes = Buffer.concat(received);
      return bytes.length >= 4 && bytes.length >= 4 + bytes.readInt32BE(0) ? bytes : undefined;
    }, 5);
    const res = client.decodeResponse(1, 12, all.subarray(4, 4 + all.readInt32BE(0))) as any;
    const p = res.responses[0].partitions[0];
    expect(p.errorCode).toBe(ErrorCode.NONE);
    expect(checkAnswer(0, 0, p.records, recordsPerBatch)).toBe(16);
  } finally {
    raw.end();
  }
}, TIMEOUT);

