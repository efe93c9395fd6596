/**
 * Wire tests of the partition side of transactions: transactional Produce
 * gated by the coordinator's verifier (Apache's answers by Produce version), read_committed Fetch stopping
 * at the last stable offset with the aborted transactions that overlap the fetched data, ListOffsets
 * latest by isolation level, and DescribeProducers. The transaction coordinator is stood in for by a fake
 * verifier installed on the broker's partitions and by PartitionManager.writeMarker called directly, so
 * the partition side is tested on its own.
 */
import { describe, expect, test } from "bun:test";
import type { TransactionVerifier, TxnBatchVerdict } from "../../src/domain/txn/verifier.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BATCH_HEADER_BYTES, checkBatch, parseBatchHeader, parseControlRecord } from "../../src/protocol/records/record-batch.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { SwappableVerifier } from "../support/swappable-verifier.ts";
import type { TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
const LATEST = -1;
const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;

let broker: TestBroker;
let client: WireClient;
const verifiers = new SwappableVerifier();
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT, { transactionVerifier: verifiers.wrap });

/** Vouches for (topic, partition, producer, epoch) tuples it was told about. */
class FakeVerifier implements TransactionVerifier {
  private readonly allowed = new Set<string>();
  allow(topic: string, producerId: number, epoch = 0, partition = 0): void {
    this.allowed.add(`${topic}/${partition}/${producerId}/${epoch}`);
  }
  verifyBatch(producerId: number, producerEpoch: number, topic: string, partition: number): TxnBatchVerdict {
    return this.allowed.has(`${topic}/${partition}/${producerId}/${producerEpoch}`) ? "in-transaction" : "not-in-transaction";
  }
}

function installVerifier(): FakeVerifier {
  const verifier = new FakeVerifier();
  verifiers.use(verifier);
  return verifier;
}

// ---- helpers ------------------------------------------------------------------------------------

const decoder = new TextDecoder();

interface FetchedBatch {
  baseOffset: number;
  producerId: number;
  isControl: boolean;
  isTransactional: boolean;
  control?: "commit" | "abort" | "other";
  values: string[];
}

function batchesOf(bytes: Uint8Array | null): FetchedBatch[] {
  const out: FetchedBatch[] = [];
  if (bytes === null) return out;
  for (let position = 0; position + BATCH_HEADER_BYTES <= bytes.length; ) {
    const size = checkBatch(bytes, position);
    if (typeof size !== "number") throw new Error(`unsound batch at ${position}: ${JSON.stringify(size)}`);
    const header = parseBatchHeader(bytes, position);
    const batch: FetchedBatch = {
      baseOffset: header.baseOffset,
      producerId: header.producerId,
      isControl: header.isControl,
      isTransactional: header.isTransactional,
      values: [],
    };
    if (header.isControl) {
      batch.control = parseControlRecord(bytes, position).type;
    } else {
      // Test batches have one record with a short value; good enough to name it.
      const text = decoder.decode(bytes.subarray(position + BATCH_HEADER_BYTES, position + size));
      batch.values = [...text.matchAll(/v:[a-z0-9-]+/g)].map((m) => m[0]);
    }
    out.push(batch);
    position += size;
  }
  return out;
}

async function createTopic(name: string, partitions = 1): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

const sequences = new Map<number, number>();

function batch(producerId: number, value: string, transactional = true): Uint8Array {
  const sequence = sequences.get(producerId) ?? 0;
  sequences.set(producerId, sequence + 1);
  return buildBatch({ records: [{ value: `v:${value}` }], producerId, producerEpoch: 0, baseSequence: sequence, transactional });
}

async function produce(
  topic: string,
  records: Uint8Array,
  version = 11,
  on: WireClient = client,
): Promise<{ errorCode: number; baseOffset: number; errorMessage: string | null }> {
  const res = await on.request(0, version, {
    transactionalId: "txn-app",
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: 0, records }] }],
  });
  return res.responses[0].partitionResponses[0];
}

async function produceOk(topic: string, records: Uint8Array, on: WireClient = client): Promise<number> {
  const answer = await produce(topic, records, 11, on);
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return answer.baseOffset;
}

async function fetch(
  topic: string,
  offset: number,
  isolationLevel: number,
  opts: { version?: number; partitionMaxBytes?: number; minBytes?: number; maxWaitMs?: number } = {},
): Promise<any> {
  const res = await client.request(1, opts.version ?? 12, {
    replicaId: -1,
    maxWaitMs: opts.maxWaitMs ?? 0,
    minBytes: opts.minBytes ?? 0,
    maxBytes: 50 * 1024 * 1024,
    isolationLevel,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [
      {
        topic,
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: -1,
            fetchOffset: offset,
            lastFetchedEpoch: -1,
            logStartOffset: -1,
            partitionMaxBytes: opts.partitionMaxBytes ?? 1024 * 1024,
          },
        ],
      },
    ],
    forgottenTopicsData: [],
    rackId: "",
  });
  expect(res.errorCode).toBe(ErrorCode.NONE);
  return res.responses[0].partitions[0];
}

async function latest(topic: string, isolationLevel: number): Promise<number> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel,
    topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: LATEST }] }],
  });
  expect(res.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
  return Number(res.topics[0].partitions[0].offset);
}

async function writeMarker(topic: string, producerId: number, commit: boolean, coordinatorEpoch = 0, partition = 0) {
  return broker.broker.services.partitions.writeMarker(topic, partition, { producerId, producerEpoch: 0, commit, coordinatorEpoch });
}

/** A new topic whose partition 0 holds one open transaction's first record ("t-0", offset 0) by `producerId`. */
async function topicWithOpenTransaction(topic: string, producerId: number, partitions = 1) {
  await createTopic(topic, partitions);
  installVerifier().allow(topic, producerId);
  expect(await produceOk(topic, batch(producerId, "t-0"))).toBe(0);
  return (await broker.broker.services.partitions.get(topic, 0))!;
}

async function describeProducers(topics: { name: string; partitionIndexes: number[] }[]): Promise<any[]> {
  const res = await client.request(61, 0, { topics });
  return res.topics;
}

const aborted = (list: { producerId: number | bigint; firstOffset: number | bigint }[] | null) =>
  list === null ? null : list.map((t) => ({ producerId: Number(t.producerId), firstOffset: Number(t.firstOffset) }));

// ---- tests --------------------------------------------------------------------------------------

describe("transactional Produce", () => {
  test("a partition not in the producer's transaction: INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE from v11; nothing written", async () => {
    await createTopic("rc-unverified");
    installVerifier();
    // Produce carries an error message from v8 on.
    expect(await produce("rc-unverified", batch(13, "x"), 3)).toMatchObject({ errorCode: ErrorCode.INVALID_TXN_STATE, errorMessage: null });
    for (const version of [8, 10]) {
      expect(await produce("rc-unverified", batch(10 + version, "x"), version)).toMatchObject({
        errorCode: ErrorCode.INVALID_TXN_STATE,
        errorMessage: "Partition was not added to the transaction",
      });
    }
    expect(await produce("rc-unverified", batch(20, "x"), 11)).toMatchObject({ errorCode: ErrorCode.TRANSACTION_ABORTABLE, errorMessage: null });
    expect(await latest("rc-unverified", READ_UNCOMMITTED)).toBe(0);
  });
});

describe("read_committed", () => {
  test("stops at the LSO of an open transaction; a commit marker releases it; read_uncommitted sees everything", async () => {
    const topic = "rc-commit";
    await createTopic(topic);
    const verifier = installVerifier();
    verifier.allow(topic, 100);
    expect(await produceOk(topic, batch(900, "plain-0", false))).toBe(0);
    expect(await produceOk(topic, batch(100, "t-1"))).toBe(1);
    expect(await produceOk(topic, batch(100, "t-2"))).toBe(2);

    const committed = await fetch(topic, 0, READ_COMMITTED);
    expect(committed).toMatchObject({ errorCode: 0, highWatermark: 3, lastStableOffset: 1, abortedTransactions: [] });
    expect(batchesOf(committed.records).map((b) => b.values)).toEqual([["v:plain-0"]]);
    expect(await fetch(topic, 1, READ_COMMITTED)).toMatchObject({ lastStableOffset: 1, abortedTransactions: [], records: expect.anything() });
    expect(batchesOf((await fetch(topic, 1, READ_COMMITTED)).records)).toEqual([]);

    const uncommitted = await fetch(topic, 0, READ_UNCOMMITTED);
    expect(uncommitted).toMatchObject({ highWatermark: 3, lastStableOffset: 1, abortedTransactions: null });
    expect(batchesOf(uncommitted.records).map((b) => b.values[0])).toEqual(["v:plain-0", "v:t-1", "v:t-2"]);

    expect(await latest(topic, READ_COMMITTED)).toBe(1);
    expect(await latest(topic, READ_UNCOMMITTED)).toBe(3);

    expect(await writeMarker(topic, 100, true, 5)).toEqual({ ok: true, offset: 3 });
    const after = await fetch(topic, 0, READ_COMMITTED);
    expect(after).toMatchObject({ highWatermark: 4, lastStableOffset: 4, abortedTransactions: [] });
    const fetched = batchesOf(after.records);
    expect(fetched.map((b) => [b.baseOffset, b.isTransactional, b.control ?? b.values[0]])).toEqual([
      [0, false, "v:plain-0"],
      [1, true, "v:t-1"],
      [2, true, "v:t-2"],
      [3, true, "commit"],
    ]);
    expect(await latest(topic, READ_COMMITTED)).toBe(4);
  });

  test("aborted transactions overlapping the fetched data are listed, sorted by first offset; read_uncommitted gets null", async () => {
    const topic = "rc-abort";
    await createTopic(topic);
    const verifier = installVerifier();
    verifier.allow(topic, 201);
    verifier.allow(topic, 202);
    expect(await produceOk(topic, batch(201, "a-0"))).toBe(0);
    expect(await produceOk(topic, batch(202, "b-1"))).toBe(1);
    expect(await produceOk(topic, batch(201, "a-2"))).toBe(2);
    // 202 aborts first, then 201: the index is in marker order, the answer in first-offset order.
    expect(await writeMarker(topic, 202, false)).toEqual({ ok: true, offset: 3 });
    expect((await fetch(topic, 0, READ_COMMITTED)).lastStableOffset).toBe(0);
    expect(await writeMarker(topic, 201, false)).toEqual({ ok: true, offset: 4 });
    expect(await produceOk(topic, batch(900, "plain-5", false))).toBe(5);

    const all = await fetch(topic, 0, READ_COMMITTED);
    expect(all).toMatchObject({ highWatermark: 6, lastStableOffset: 6 });
    expect(aborted(all.abortedTransactions)).toEqual([
      { producerId: 201, firstOffset: 0 },
      { producerId: 202, firstOffset: 1 },
    ]);
    expect(batchesOf(all.records)).toHaveLength(6);
    // From offset 4 only 201's marker (4) is at or after the fetch offset; 202's (3) is before it.
    expect(aborted((await fetch(topic, 4, READ_COMMITTED)).abortedTransactions)).toEqual([{ producerId: 201, firstOffset: 0 }]);
    expect(aborted((await fetch(topic, 5, READ_COMMITTED)).abortedTransactions)).toEqual([]);
    expect((await fetch(topic, 0, READ_UNCOMMITTED)).abortedTransactions).toBeNull();
    // Fetch v4 (the oldest served) carries the same list.
    expect(aborted((await fetch(topic, 0, READ_COMMITTED, { version: 4 })).abortedTransactions)).toEqual([
      { producerId: 201, firstOffset: 0 },
      { producerId: 202, firstOffset: 1 },
    ]);
  });

  test("only transactions that start before the end of the fetched data are listed", async () => {
    const topic = "rc-range";
    await createTopic(topic);
    const verifier = installVerifier();
    verifier.allow(topic, 301);
    verifier.allow(topic, 302);
    expect(await produceOk(topic, batch(301, "a-0"))).toBe(0);
    expect(await writeMarker(topic, 301, false)).toEqual({ ok: true, offset: 1 });
    expect(await produceOk(topic, batch(900, "plain-2", false))).toBe(2);
    expect(await produceOk(topic, batch(302, "b-3"))).toBe(3);
    expect(await writeMarker(topic, 302, false)).toEqual({ ok: true, offset: 4 });
    // One batch per fetch (the first batch is returned whatever the limit).
    const first = await fetch(topic, 0, READ_COMMITTED, { partitionMaxBytes: 1 });
    expect(batchesOf(first.records).map((b) => b.baseOffset)).toEqual([0]);
    expect(aborted(first.abortedTransactions)).toEqual([{ producerId: 301, firstOffset: 0 }]);
    const third = await fetch(topic, 2, READ_COMMITTED, { partitionMaxBytes: 1 });
    expect(batchesOf(third.records).map((b) => b.baseOffset)).toEqual([2]);
    expect(aborted(third.abortedTransactions)).toEqual([]);
    const rest = await fetch(topic, 2, READ_COMMITTED);
    expect(aborted(rest.abortedTransactions)).toEqual([{ producerId: 302, firstOffset: 3 }]);
  });

  test("a read_committed fetch parked at the LSO is answered when the commit marker is durable", async () => {
    const topic = "rc-parked";
    const partition = await topicWithOpenTransaction(topic, 401);
    const parkedFetches = () => (partition as unknown as { closeListeners: Set<unknown> }).closeListeners.size;
    expect(parkedFetches()).toBe(0);
    const parked = fetch(topic, 0, READ_COMMITTED, { minBytes: 1, maxWaitMs: 20_000 });
    // Wait (yielding, no fixed sleep) until the fetch is parked on the partition: nothing is stable yet.
    while (parkedFetches() === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(await writeMarker(topic, 401, true)).toEqual({ ok: true, offset: 1 });
    const result = await parked;
    expect(result.lastStableOffset).toBe(2);
    expect(batchesOf(result.records).map((b) => b.control ?? b.values[0])).toEqual(["v:t-0", "commit"]);
  });

  test("a read_committed fetch parked at the LSO is not woken by appends it cannot see", async () => {
    const topic = "rc-parked-quiet";
    const partition = await topicWithOpenTransaction(topic, 402);
    // Every time the parked fetch reads its partitions again, it subscribes to the log anew: count those.
    let subscriptions = 0;
    const log = partition.log;
    const subscribe = log.onAppend.bind(log);
    log.onAppend = (listener) => {
      subscriptions++;
      return subscribe(listener);
    };
    const parked = fetch(topic, 0, READ_COMMITTED, { minBytes: 1, maxWaitMs: 20_000 });
    while (subscriptions === 0) await new Promise((resolve) => setImmediate(resolve));
    // More records of the open transaction, durable (acks=-1), from another connection: the LSO stays at 0.
    const producer = await WireClient.connect(broker.port);
    try {
      for (const value of ["t-1", "t-2", "t-3"]) expect(await produceOk(topic, batch(402, value), producer)).toBeGreaterThan(0);
    } finally {
      producer.close();
    }
    const stableBeforeMarker = partition.lastStableOffset;
    const subscriptionsBeforeMarker = subscriptions;
    // The marker first, so that a failed check below leaves no fetch parked on the shared connection.
    expect(await writeMarker(topic, 402, true)).toEqual({ ok: true, offset: 4 });
    const result = await parked;
    expect(stableBeforeMarker).toBe(0);
    expect(subscriptionsBeforeMarker).toBe(1);
    expect(result.lastStableOffset).toBe(5);
    expect(batchesOf(result.records).map((b) => b.control ?? b.values[0])).toEqual(["v:t-0", "v:t-1", "v:t-2", "v:t-3", "commit"]);
  });

  test("a commit that lands while a fetch reads its other partitions is not missed by the wait after", async () => {
    const topic = "rc-moved-meanwhile";
    // Partition 0: an open transaction, nothing stable. Partition 1: one stable (non-transactional) batch.
    await topicWithOpenTransaction(topic, 403, 2);
    const plain = batch(404, "plain", false);
    const produced = await client.request(0, 11, {
      transactionalId: null,
      acks: -1,
      timeoutMs: 30_000,
      topicData: [{ name: topic, partitionData: [{ index: 1, records: plain }] }],
    });
    expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    // While the fetch reads partition 1 (after it has found nothing stable on partition 0), the
    // transaction on partition 0 commits.
    const second = (await broker.broker.services.partitions.get(topic, 1))!;
    const read = second.log.read.bind(second.log);
    let committed = false;
    second.log.read = async (...args) => {
      if (!committed) {
        committed = true;
        expect(await writeMarker(topic, 403, true)).toEqual({ ok: true, offset: 1 });
      }
      return read(...args);
    };
    // min_bytes above partition 1's batch alone: the fetch waits after its first pass, and must not wait
    // for a change that already happened (it would sit out max_wait_ms and answer without partition 0).
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 10_000,
      minBytes: plain.length + 1,
      maxBytes: 50 * 1024 * 1024,
      isolationLevel: READ_COMMITTED,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [
        {
          topic,
          partitions: [0, 1].map((partition) => ({
            partition,
            currentLeaderEpoch: -1,
            fetchOffset: 0,
            lastFetchedEpoch: -1,
            logStartOffset: -1,
            partitionMaxBytes: 1024 * 1024,
          })),
        },
      ],
      forgottenTopicsData: [],
      rackId: "",
    });
    expect(committed).toBe(true);
    const [first, other] = res.responses[0].partitions;
    expect(first.lastStableOffset).toBe(2);
    expect(batchesOf(first.records).map((b) => b.control ?? b.values[0])).toEqual(["v:t-0", "commit"]);
    expect(batchesOf(other.records).map((b) => b.values[0])).toEqual(["v:plain"]);
  }, TIMEOUT);

  test("an open transaction keeps the LSO pinned across a broker restart; its marker releases it afterwards", async () => {
    const topic = "rc-restart";
    await createTopic(topic);
    let verifier = installVerifier();
    verifier.allow(topic, 501);
    verifier.allow(topic, 502);
    expect(await produceOk(topic, batch(502, "a-0"))).toBe(0);
    expect(await writeMarker(topic, 502, false)).toEqual({ ok: true, offset: 1 });
    expect(await produceOk(topic, batch(501, "t-2"))).toBe(2);
    client.close();
    await broker.restart();
    client = await WireClient.connect(broker.port);
    verifier = installVerifier();
    verifier.allow(topic, 501);
    const pinned = await fetch(topic, 0, READ_COMMITTED);
    expect(pinned).toMatchObject({ highWatermark: 3, lastStableOffset: 2 });
    expect(aborted(pinned.abortedTransactions)).toEqual([{ producerId: 502, firstOffset: 0 }]);
    expect(await latest(topic, READ_COMMITTED)).toBe(2);
    expect(await writeMarker(topic, 501, true)).toEqual({ ok: true, offset: 3 });
    expect(await latest(topic, READ_COMMITTED)).toBe(4);
  });

  test("writeMarker on a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION", async () => {
    expect(await writeMarker("rc-no-such-topic", 1, true)).toMatchObject({ ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION });
    await createTopic("rc-one-partition");
    expect(await writeMarker("rc-one-partition", 1, true, 0, 3)).toMatchObject({ ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION });
  });
});

describe("DescribeProducers", () => {
  test("per partition: epoch, last sequence, timestamp, coordinator epoch and the open transaction's first offset", async () => {
    const topic = "rc-describe";
    await createTopic(topic, 2);
    const verifier = installVerifier();
    verifier.allow(topic, 601);
    expect(await produceOk(topic, batch(900, "plain-0", false))).toBe(0);
    expect(await produceOk(topic, batch(601, "t-1"))).toBe(1);
    expect(await produceOk(topic, batch(601, "t-2"))).toBe(2);
    const [during] = await describeProducers([{ name: topic, partitionIndexes: [0, 1] }]);
    expect(during.name).toBe(topic);
    expect(during.partitions).toHaveLength(2);
    expect(during.partitions[0]).toMatchObject({ partitionIndex: 0, errorCode: 0, errorMessage: null });
    const byId = (list: any[]) => Object.fromEntries(list.map((p) => [Number(p.producerId), p]));
    const producers = byId(during.partitions[0].activeProducers);
    expect(producers[601]).toMatchObject({ producerEpoch: 0, lastSequence: sequences.get(601)! - 1, coordinatorEpoch: -1 });
    expect(Number(producers[601].currentTxnStartOffset)).toBe(1);
    expect(Number(producers[601].lastTimestamp)).toBeGreaterThan(0);
    expect(Number(producers[900].currentTxnStartOffset)).toBe(-1);
    expect(during.partitions[1]).toMatchObject({ partitionIndex: 1, errorCode: 0, activeProducers: [] });

    expect(await writeMarker(topic, 601, false, 9)).toEqual({ ok: true, offset: 3 });
    const [after] = await describeProducers([{ name: topic, partitionIndexes: [0] }]);
    const ended = byId(after.partitions[0].activeProducers)[601];
    expect(Number(ended.currentTxnStartOffset)).toBe(-1);
    expect(ended.coordinatorEpoch).toBe(9);
  });

  test("errors as Apache answers them", async () => {
    await createTopic("rc-describe-errors");
    const answers = await describeProducers([
      { name: "rc-describe-unknown", partitionIndexes: [0, 1] },
      { name: "bad/name", partitionIndexes: [0] },
      { name: "rc-describe-errors", partitionIndexes: [5, 0] },
    ]);
    expect(answers[0].partitions).toEqual([
      expect.objectContaining({ partitionIndex: 0, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, errorMessage: "This server does not host this topic-partition." }),
      expect.objectContaining({ partitionIndex: 1, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION }),
    ]);
    expect(answers[1].partitions[0]).toMatchObject({ errorCode: ErrorCode.INVALID_TOPIC_EXCEPTION, errorMessage: expect.stringMatching(/illegal/) });
    expect(answers[2].partitions).toEqual([
      expect.objectContaining({ partitionIndex: 5, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, errorMessage: null, activeProducers: [] }),
      expect.objectContaining({ partitionIndex: 0, errorCode: ErrorCode.NONE, activeProducers: [] }),
    ]);
  });
});
