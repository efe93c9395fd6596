/**
 * Wire tests of the transaction APIs with raw frames: FindCoordinator (transaction key), InitProducerId with
 * a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit,
 * DescribeTransactions, ListTransactions, together with transactional Produce, read_committed Fetch and
 * OffsetFetch. Full commit and abort flows, retries, zombie fencing, and every error code by version as
 * Apache Kafka answers it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { decodeRecordSet, utf8 } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 30_000;
const K = {
  Produce: 0,
  Fetch: 1,
  OffsetFetch: 9,
  FindCoordinator: 10,
  InitProducerId: 22,
  AddPartitionsToTxn: 24,
  AddOffsetsToTxn: 25,
  EndTxn: 26,
  WriteTxnMarkers: 27,
  TxnOffsetCommit: 28,
  DescribeTransactions: 65,
  ListTransactions: 66,
  ApiVersions: 18,
};
const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;

let broker: TestBroker;
let client: WireClient;

async function createTopic(name: string, partitions: number): Promise<void> {
  const res = await client.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

interface Producer {
  transactionalId: string;
  producerId: number;
  producerEpoch: number;
  /** Next sequence per partition key. */
  sequences: Map<string, number>;
}

async function initProducerId(transactionalId: string, opts: { version?: number; timeoutMs?: number; producerId?: number; producerEpoch?: number } = {}) {
  return client.request(K.InitProducerId, opts.version ?? 4, {
    transactionalId,
    transactionTimeoutMs: opts.timeoutMs ?? 60_000,
    producerId: opts.producerId ?? -1,
    producerEpoch: opts.producerEpoch ?? -1,
  });
}

async function newProducer(transactionalId: string): Promise<Producer> {
  const res = await initProducerId(transactionalId);
  expect(res.errorCode).toBe(ErrorCode.NONE);
  return { transactionalId, producerId: res.producerId, producerEpoch: res.producerEpoch, sequences: new Map() };
}

/** AddPartitionsToTxn v0-3; the per-partition codes as [topic, partition, code]. */
async function addPartitions(p: Pick<Producer, "transactionalId" | "producerId" | "producerEpoch">, topics: Record<string, number[]>, version = 3): Promise<[string, number, number][]> {
  const res = await client.request(K.AddPartitionsToTxn, version, {
    v3AndBelowTransactionalId: p.transactionalId,
    v3AndBelowProducerId: p.producerId,
    v3AndBelowProducerEpoch: p.producerEpoch,
    v3AndBelowTopics: Object.entries(topics).map(([name, partitions]) => ({ name, partitions })),
  });
  return res.resultsByTopicV3AndBelow.flatMap((t: any) => t.resultsByPartition.map((r: any) => [t.name, r.partitionIndex, r.partitionErrorCode]));
}

async function addOffsets(p: Pick<Producer, "transactionalId" | "producerId" | "producerEpoch">, groupId: string, version = 3): Promise<number> {
  const res = await client.request(K.AddOffsetsToTxn, version, { transactionalId: p.transactionalId, producerId: p.producerId, producerEpoch: p.producerEpoch, groupId });
  return res.errorCode;
}

/**
 * EndTxn; on NONE, also waits until the transaction is complete: the broker answers once the decision is
 * durable and writes the markers after (as Apache does), and these tests look at the markers next.
 */
async function endTxn(p: Pick<Producer, "transactionalId" | "producerId" | "producerEpoch">, committed: boolean, version = 3): Promise<number> {
  const res = await client.request(K.EndTxn, version, { transactionalId: p.transactionalId, producerId: p.producerId, producerEpoch: p.producerEpoch, committed });
  if (res.errorCode === ErrorCode.NONE) await untilComplete(p.transactionalId);
  return res.errorCode;
}

/** Waits until the id's decided transaction (Prepare*) is complete. */
async function untilComplete(transactionalId: string, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const state = (await describe1(transactionalId)).transactionState;
    if (state !== "PrepareCommit" && state !== "PrepareAbort") return;
    if (performance.now() > deadline) throw new Error(`${transactionalId} still ${state} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** A transactional batch of `values` from `p` to topic-partition; the partition's answer. */
async function produceTxn(p: Producer, topic: string, partition: number, values: string[], opts: { version?: number; epoch?: number } = {}) {
  const key = `${topic}-${partition}`;
  const baseSequence = p.sequences.get(key) ?? 0;
  const records = buildBatch({
    records: values.map((value) => ({ value })),
    producerId: p.producerId,
    producerEpoch: opts.epoch ?? p.producerEpoch,
    baseSequence,
    transactional: true,
  });
  const res = await client.request(K.Produce, opts.version ?? 9, {
    transactionalId: p.transactionalId,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
  });
  const answer = res.responses[0].partitionResponses[0];
  if (answer.errorCode === ErrorCode.NONE) p.sequences.set(key, baseSequence + values.length);
  return answer;
}

async function fetchPartition(topic: string, partition: number, isolationLevel: number, fetchOffset = 0) {
  const res = await client.request(K.Fetch, 12, {
    replicaId: -1,
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes: 1024 * 1024,
    isolationLevel,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [{ topic, partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: 1024 * 1024 }] }],
    forgottenTopicsData: [],
    rackId: "",
  });
  expect(res.errorCode).toBe(ErrorCode.NONE);
  const data = res.responses[0].partitions[0];
  expect(data.errorCode).toBe(ErrorCode.NONE);
  const batches = decodeRecordSet(data.records ?? new Uint8Array(0)).batches;
  const abortedTransactions = data.abortedTransactions as { producerId: number; firstOffset: number }[] | null;
  // What a read_committed consumer keeps: a batch of an aborted transaction (from its first offset up to
  // the producer's ABORT marker) is skipped, as the Java consumer does with the aborted list.
  const abortMarkers = batches.filter((b) => b.header.isControl && b.records[0]!.key![3] === 0);
  const isAborted = (producerId: number, offset: number) =>
    (abortedTransactions ?? []).some(
      (a) => a.producerId === producerId && offset >= a.firstOffset && abortMarkers.some((m) => m.header.producerId === producerId && m.header.baseOffset > offset),
    );
  return {
    highWatermark: data.highWatermark as number,
    lastStableOffset: data.lastStableOffset as number,
    abortedTransactions,
    /** Every data record returned (aborted ones included: the broker leaves their filtering to the consumer). */
    values: batches.filter((b) => !b.header.isControl).flatMap((b) => b.records.map((r) => utf8(r.value))),
    /** The data records a read_committed consumer keeps. */
    visible: batches.filter((b) => !b.header.isControl && !isAborted(b.header.producerId, b.header.baseOffset)).flatMap((b) => b.records.map((r) => utf8(r.value))),
    controls: batches.filter((b) => b.header.isControl).map((b) => ({ producerId: b.header.producerId, epoch: b.header.producerEpoch, key: [...b.records[0]!.key!] })),
  };
}

async function txnOffsetCommit(
  p: Pick<Producer, "transactionalId" | "producerId" | "producerEpoch">,
  groupId: string,
  offsets: Record<string, [number, number][]>,
  opts: { version?: number; generationId?: number; memberId?: string } = {},
): Promise<[string, number, number][]> {
  const res = await client.request(K.TxnOffsetCommit, opts.version ?? 3, {
    transactionalId: p.transactionalId,
    groupId,
    producerId: p.producerId,
    producerEpoch: p.producerEpoch,
    generationId: opts.generationId ?? -1,
    memberId: opts.memberId ?? "",
    groupInstanceId: null,
    topics: Object.entries(offsets).map(([name, partitions]) => ({
      name,
      partitions: partitions.map(([partitionIndex, committedOffset]) => ({ partitionIndex, committedOffset, committedLeaderEpoch: -1, committedMetadata: "" })),
    })),
  });
  return res.topics.flatMap((t: any) => t.partitions.map((r: any) => [t.name, r.partitionIndex, r.errorCode]));
}

async function offsetFetch(groupId: string, topic: string, partitions: number[], requireStable: boolean): Promise<[number, number, number][]> {
  const res = await client.request(K.OffsetFetch, 7, { groupId, topics: [{ name: topic, partitionIndexes: partitions }], requireStable });
  return res.topics[0].partitions.map((p: any) => [p.partitionIndex, p.committedOffset, p.errorCode]);
}

async function describe1(transactionalId: string): Promise<any> {
  const res = await client.request(K.DescribeTransactions, 0, { transactionalIds: [transactionalId] });
  return res.transactionStates[0];
}

const COMMIT_KEY = [0, 0, 0, 1];
const ABORT_KEY = [0, 0, 0, 0];

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false, groupInitialRebalanceDelayMs: 0 });
  client = await WireClient.connect(broker.port);
  await createTopic("orders", 3);
  await createTopic("payments", 2);
});

afterAll(async () => {
  client?.close();
  await broker?.stop();
});

describe("FindCoordinator for transactions", () => {
  test("names this broker for a transactional id, in every version", async () => {
    for (const version of [1, 3]) {
      const res = await client.request(K.FindCoordinator, version, { key: "tx-find", keyType: 1 });
      expect(res).toMatchObject({ errorCode: ErrorCode.NONE, nodeId: 0, port: broker.port });
    }
    const batched = await client.request(K.FindCoordinator, 4, { keyType: 1, coordinatorKeys: ["tx-a", "tx-b"] });
    expect(batched.coordinators.map((c: any) => [c.key, c.errorCode, c.nodeId, c.port])).toEqual([
      ["tx-a", ErrorCode.NONE, 0, broker.port],
      ["tx-b", ErrorCode.NONE, 0, broker.port],
    ]);
  });
});

describe("InitProducerId with a transactional id", () => {
  test("a new id gets a producer id at epoch 0; a rejoin the same id at epoch + 1", async () => {
    const first = await initProducerId("tx-init");
    expect(first).toMatchObject({ errorCode: ErrorCode.NONE, producerEpoch: 0 });
    expect(first.producerId).toBeGreaterThanOrEqual(0);
    const again = await initProducerId("tx-init", { version: 2 });
    expect(again).toMatchObject({ errorCode: ErrorCode.NONE, producerId: first.producerId, producerEpoch: 1 });
    // v3+: a bump asked with the current (id, epoch); its retry with the previous epoch gets the same answer.
    const bumped = await initProducerId("tx-init", { version: 4, producerId: first.producerId, producerEpoch: 1 });
    expect(bumped).toMatchObject({ errorCode: ErrorCode.NONE, producerId: first.producerId, producerEpoch: 2 });
    const retried = await initProducerId("tx-init", { version: 4, producerId: first.producerId, producerEpoch: 1 });
    expect(retried).toMatchObject({ errorCode: ErrorCode.NONE, producerId: first.producerId, producerEpoch: 2 });
  });

  test("error codes: INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED by version", async () => {
    expect((await initProducerId("")).errorCode).toBe(ErrorCode.INVALID_REQUEST);
    expect((await initProducerId("tx-bad", { timeoutMs: 0 })).errorCode).toBe(ErrorCode.INVALID_TRANSACTION_TIMEOUT);
    expect((await initProducerId("tx-bad", { timeoutMs: 900_001 })).errorCode).toBe(ErrorCode.INVALID_TRANSACTION_TIMEOUT);
    expect((await initProducerId("tx-bad", { version: 3, producerId: 5, producerEpoch: -1 })).errorCode).toBe(ErrorCode.INVALID_REQUEST);
    const p = await newProducer("tx-fence-init");
    for (const [version, code] of [
      [3, ErrorCode.INVALID_PRODUCER_EPOCH],
      [4, ErrorCode.PRODUCER_FENCED],
      [5, ErrorCode.PRODUCER_FENCED],
    ] as const) {
      // Another producer id than the id's: fenced.
      const res = await initProducerId("tx-fence-init", { version, producerId: p.producerId + 100_000, producerEpoch: 0 });
      expect(res).toMatchObject({ errorCode: code, producerId: -1, producerEpoch: -1 });
    }
    // An old epoch that is neither current nor the previous one: fenced too.
    await initProducerId("tx-fence-init");
    await initProducerId("tx-fence-init");
    expect((await initProducerId("tx-fence-init", { producerId: p.producerId, producerEpoch: 0 })).errorCode).toBe(ErrorCode.PRODUCER_FENCED);
  });
});

describe("commit and abort", () => {
  test("a committed transaction: records hidden from read_committed until EndTxn, offsets invisible until then too", async () => {
    const p = await newProducer("tx-commit");
    expect(await addPartitions(p, { orders: [0], payments: [1] })).toEqual([
      ["orders", 0, ErrorCode.NONE],
      ["payments", 1, ErrorCode.NONE],
    ]);
    const before = await fetchPartition("orders", 0, READ_COMMITTED);
    expect((await produceTxn(p, "orders", 0, ["o1", "o2"])).errorCode).toBe(ErrorCode.NONE);
    expect((await produceTxn(p, "payments", 1, ["p1"])).errorCode).toBe(ErrorCode.NONE);
    const open = await fetchPartition("orders", 0, READ_COMMITTED);
    expect(open.lastStableOffset).toBe(before.highWatermark);
    expect(open.values).toEqual([]);
    expect((await fetchPartition("orders", 0, READ_UNCOMMITTED)).values.slice(-2)).toEqual(["o1", "o2"]);

    expect(await addOffsets(p, "g-commit")).toBe(ErrorCode.NONE);
    expect(await txnOffsetCommit(p, "g-commit", { orders: [[0, 42]] })).toEqual([["orders", 0, ErrorCode.NONE]]);
    expect(await offsetFetch("g-commit", "orders", [0], true)).toEqual([[0, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT]]);
    expect(await offsetFetch("g-commit", "orders", [0], false)).toEqual([[0, -1, ErrorCode.NONE]]);
    expect((await describe1("tx-commit")).topics).toEqual([
      { topic: "orders", partitions: [0] },
      { topic: "payments", partitions: [1] },
    ]);

    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    const committed = await fetchPartition("orders", 0, READ_COMMITTED, before.highWatermark);
    expect(committed.values).toEqual(["o1", "o2"]);
    expect(committed.controls).toEqual([{ producerId: p.producerId, epoch: p.producerEpoch, key: COMMIT_KEY }]);
    expect(committed.lastStableOffset).toBe(committed.highWatermark);
    expect((await fetchPartition("payments", 1, READ_COMMITTED)).values).toEqual(["p1"]);
    expect(await offsetFetch("g-commit", "orders", [0], true)).toEqual([[0, 42, ErrorCode.NONE]]);
    expect(await describe1("tx-commit")).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "CompleteCommit", topics: [] });

    // Retries: the same direction is answered NONE, the other one INVALID_TXN_STATE.
    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    expect(await endTxn(p, false)).toBe(ErrorCode.INVALID_TXN_STATE);
    // Nothing more was written by the retries.
    expect((await fetchPartition("orders", 0, READ_UNCOMMITTED, before.highWatermark)).controls).toHaveLength(1);

    // The next transaction of the same producer starts from CompleteCommit.
    expect(await addPartitions(p, { orders: [0] })).toEqual([["orders", 0, ErrorCode.NONE]]);
    expect((await produceTxn(p, "orders", 0, ["o3"])).errorCode).toBe(ErrorCode.NONE);
    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    expect((await fetchPartition("orders", 0, READ_COMMITTED, before.highWatermark)).values).toEqual(["o1", "o2", "o3"]);
  }, TIMEOUT);

  test("an aborted transaction: read_committed gets the aborted list, staged offsets are dropped", async () => {
    const p = await newProducer("tx-abort");
    const start = (await fetchPartition("orders", 1, READ_UNCOMMITTED)).highWatermark;
    expect(await addPartitions(p, { orders: [1] })).toEqual([["orders", 1, ErrorCode.NONE]]);
    expect((await produceTxn(p, "orders", 1, ["a1", "a2"])).errorCode).toBe(ErrorCode.NONE);
    expect(await addOffsets(p, "g-abort")).toBe(ErrorCode.NONE);
    expect(await txnOffsetCommit(p, "g-abort", { orders: [[1, 7]] })).toEqual([["orders", 1, ErrorCode.NONE]]);
    expect(await endTxn(p, false)).toBe(ErrorCode.NONE);
    const read = await fetchPartition("orders", 1, READ_COMMITTED, start);
    expect(read.abortedTransactions).toEqual([{ producerId: p.producerId, firstOffset: start }]);
    expect(read.values).toEqual(["a1", "a2"]);
    expect(read.visible).toEqual([]);
    expect(read.controls).toEqual([{ producerId: p.producerId, epoch: p.producerEpoch, key: ABORT_KEY }]);
    expect(read.lastStableOffset).toBe(read.highWatermark);
    expect(await offsetFetch("g-abort", "orders", [1], true)).toEqual([[1, -1, ErrorCode.NONE]]);
    expect(await describe1("tx-abort")).toMatchObject({ transactionState: "CompleteAbort" });
    expect(await endTxn(p, false)).toBe(ErrorCode.NONE);
    expect(await endTxn(p, true)).toBe(ErrorCode.INVALID_TXN_STATE);
  }, TIMEOUT);

  test("a transactional batch for a partition outside the transaction is refused (no hanging transaction)", async () => {
    const p = await newProducer("tx-outside");
    expect(await addPartitions(p, { orders: [2] })).toEqual([["orders", 2, ErrorCode.NONE]]);
    expect((await produceTxn(p, "payments", 0, ["x"], { version: 9 })).errorCode).toBe(ErrorCode.INVALID_TXN_STATE);
    expect((await produceTxn(p, "payments", 0, ["x"], { version: 11 })).errorCode).toBe(ErrorCode.TRANSACTION_ABORTABLE);
    expect(await endTxn(p, false)).toBe(ErrorCode.NONE);
    // After EndTxn even the partition that was in the transaction refuses more of it.
    expect((await produceTxn(p, "orders", 2, ["late"])).errorCode).toBe(ErrorCode.INVALID_TXN_STATE);
    expect((await fetchPartition("payments", 0, READ_COMMITTED)).lastStableOffset).toBe((await fetchPartition("payments", 0, READ_UNCOMMITTED)).highWatermark);
  }, TIMEOUT);
});

describe("error codes by version", () => {
  test("AddPartitionsToTxn", async () => {
    const p = await newProducer("tx-err-apt");
    const wrongEpoch = { ...p, producerEpoch: p.producerEpoch + 5 };
    for (const [version, code] of [
      [0, ErrorCode.INVALID_PRODUCER_EPOCH],
      [1, ErrorCode.INVALID_PRODUCER_EPOCH],
      [2, ErrorCode.PRODUCER_FENCED],
      [3, ErrorCode.PRODUCER_FENCED],
    ] as const) {
      expect(await addPartitions(wrongEpoch, { orders: [0] }, version)).toEqual([["orders", 0, code]]);
    }
    expect(await addPartitions({ ...p, producerId: p.producerId + 100_000 }, { orders: [0] })).toEqual([["orders", 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING]]);
    expect(await addPartitions({ ...p, transactionalId: "tx-never-seen" }, { orders: [0] })).toEqual([["orders", 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING]]);
    expect(await addPartitions({ ...p, transactionalId: "" }, { orders: [0] })).toEqual([["orders", 0, ErrorCode.INVALID_REQUEST]]);
    // An unknown partition fails the whole request: the others were not attempted, nothing was added.
    expect(await addPartitions(p, { orders: [0, 9], nope: [0] })).toEqual([
      ["nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
      ["orders", 0, ErrorCode.OPERATION_NOT_ATTEMPTED],
      ["orders", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]);
    expect(await describe1("tx-err-apt")).toMatchObject({ transactionState: "Empty", topics: [] });
  });

  test("AddPartitionsToTxn v4+: batched transactions, verifyOnly checks without adding", async () => {
    const p = await newProducer("tx-v4");
    expect(await addPartitions(p, { orders: [1] })).toEqual([["orders", 1, ErrorCode.NONE]]);
    const res = await client.request(K.AddPartitionsToTxn, 5, {
      transactions: [
        { transactionalId: "tx-v4", producerId: p.producerId, producerEpoch: p.producerEpoch, verifyOnly: true, topics: [{ name: "orders", partitions: [1, 2] }] },
        { transactionalId: "tx-v4-unknown", producerId: 1, producerEpoch: 0, verifyOnly: true, topics: [{ name: "orders", partitions: [0] }] },
      ],
    });
    expect(res.errorCode).toBe(ErrorCode.NONE);
    expect(res.resultsByTransaction.map((r: any) => [r.transactionalId, r.topicResults.flatMap((t: any) => t.resultsByPartition.map((x: any) => [t.name, x.partitionIndex, x.partitionErrorCode]))])).toEqual([
      ["tx-v4", [["orders", 1, ErrorCode.NONE], ["orders", 2, ErrorCode.TRANSACTION_ABORTABLE]]],
      ["tx-v4-unknown", [["orders", 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING]]],
    ]);
    expect((await describe1("tx-v4")).topics).toEqual([{ topic: "orders", partitions: [1] }]);
    await endTxn(p, false);
  });

  test("AddOffsetsToTxn and EndTxn", async () => {
    const p = await newProducer("tx-err-end");
    const wrongEpoch = { ...p, producerEpoch: p.producerEpoch + 5 };
    for (const [version, code] of [
      [0, ErrorCode.INVALID_PRODUCER_EPOCH],
      [1, ErrorCode.INVALID_PRODUCER_EPOCH],
      [2, ErrorCode.PRODUCER_FENCED],
      [3, ErrorCode.PRODUCER_FENCED],
      [4, ErrorCode.PRODUCER_FENCED],
    ] as const) {
      expect(await addOffsets(wrongEpoch, "g", version)).toBe(code);
      expect(await endTxn(wrongEpoch, true, version)).toBe(code);
    }
    expect(await addOffsets({ ...p, producerId: p.producerId + 100_000 }, "g")).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    expect(await endTxn({ ...p, transactionalId: "tx-never-seen" }, true)).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    expect(await endTxn({ ...p, transactionalId: "" }, true)).toBe(ErrorCode.INVALID_REQUEST);
    // EndTxn with no transaction open (Empty): INVALID_TXN_STATE in both directions.
    expect(await endTxn(p, true)).toBe(ErrorCode.INVALID_TXN_STATE);
    expect(await endTxn(p, false)).toBe(ErrorCode.INVALID_TXN_STATE);
    // EndTxn v5 is not served (transaction version 2).
    const v5 = await client.request(K.ApiVersions, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" });
    expect(v5.apiKeys.find((k: any) => k.apiKey === K.EndTxn).maxVersion).toBe(4);
  });

  test("TxnOffsetCommit: transaction checks by version, then the group's", async () => {
    const p = await newProducer("tx-err-toc");
    expect(await addPartitions(p, { orders: [0] })).toEqual([["orders", 0, ErrorCode.NONE]]);
    // The group was not added to the transaction.
    for (const [version, code] of [
      [0, ErrorCode.INVALID_TXN_STATE],
      [3, ErrorCode.INVALID_TXN_STATE],
      [4, ErrorCode.TRANSACTION_ABORTABLE],
    ] as const) {
      expect(await txnOffsetCommit(p, "g-toc", { orders: [[0, 1]] }, { version })).toEqual([["orders", 0, code]]);
    }
    expect(await addOffsets(p, "g-toc")).toBe(ErrorCode.NONE);
    // A fenced epoch is INVALID_PRODUCER_EPOCH in every version (never PRODUCER_FENCED); another id is 49.
    for (const version of [0, 2, 3, 4]) {
      expect(await txnOffsetCommit({ ...p, producerEpoch: p.producerEpoch + 1 }, "g-toc", { orders: [[0, 1]] }, { version })).toEqual([
        ["orders", 0, ErrorCode.INVALID_PRODUCER_EPOCH],
      ]);
    }
    expect(await txnOffsetCommit({ ...p, producerId: p.producerId + 100_000 }, "g-toc", { orders: [[0, 1]] })).toEqual([["orders", 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING]]);
    // Unknown topics and partitions answer on their own; an empty group id is INVALID_GROUP_ID.
    expect(await txnOffsetCommit(p, "g-toc", { orders: [[0, 5], [7, 1]], nope: [[0, 1]] })).toEqual([
      ["orders", 0, ErrorCode.NONE],
      ["orders", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
      ["nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]);
    expect(await txnOffsetCommit(p, "", { orders: [[0, 1]] })).toEqual([["orders", 0, ErrorCode.INVALID_GROUP_ID]]);
    // KIP-447 checks (v3+): a generation for a group nobody joined is ILLEGAL_GENERATION; a member id of a
    // group without members UNKNOWN_MEMBER_ID.
    expect(await txnOffsetCommit(p, "g-toc", { orders: [[0, 1]] }, { generationId: 3, memberId: "m-1" })).toEqual([["orders", 0, ErrorCode.UNKNOWN_MEMBER_ID]]);
    expect(await txnOffsetCommit(p, "g-toc-unknown-group", { orders: [[0, 1]] }, { generationId: 3 })).toEqual([
      ["orders", 0, ErrorCode.INVALID_TXN_STATE], // checked against the transaction first: this group was not added
    ]);
    expect(await addOffsets(p, "g-toc-unknown-group")).toBe(ErrorCode.NONE);
    expect(await txnOffsetCommit(p, "g-toc-unknown-group", { orders: [[0, 1]] }, { generationId: 3 })).toEqual([["orders", 0, ErrorCode.ILLEGAL_GENERATION]]);
    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    expect(await offsetFetch("g-toc", "orders", [0], true)).toEqual([[0, 5, ErrorCode.NONE]]);
    // After the transaction ended, the group is no longer in a transaction.
    expect(await txnOffsetCommit(p, "g-toc", { orders: [[0, 9]] })).toEqual([["orders", 0, ErrorCode.INVALID_TXN_STATE]]);
  });

  test("DescribeTransactions and ListTransactions", async () => {
    const unknown = await describe1("tx-nobody");
    expect(unknown).toMatchObject({ errorCode: ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactionalId: "tx-nobody" });
    expect((await describe1("")).errorCode).toBe(ErrorCode.INVALID_REQUEST);
    const p = await newProducer("tx-listed");
    expect(await addPartitions(p, { payments: [0, 1] })).toHaveLength(2);
    const described = await describe1("tx-listed");
    expect(described).toMatchObject({
      errorCode: ErrorCode.NONE,
      transactionalId: "tx-listed",
      transactionState: "Ongoing",
      transactionTimeoutMs: 60_000,
      producerId: p.producerId,
      producerEpoch: p.producerEpoch,
      topics: [{ topic: "payments", partitions: [0, 1] }],
    });
    expect(described.transactionStartTimeMs).toBeGreaterThan(0);

    const all = await client.request(K.ListTransactions, 0, { stateFilters: [], producerIdFilters: [] });
    expect(all.errorCode).toBe(ErrorCode.NONE);
    expect(all.transactionStates.map((s: any) => s.transactionalId)).toContain("tx-listed");
    const ongoing = await client.request(K.ListTransactions, 1, { stateFilters: ["Ongoing", "Nonsense"], producerIdFilters: [p.producerId], durationFilter: -1 });
    expect(ongoing).toMatchObject({
      errorCode: ErrorCode.NONE,
      unknownStateFilters: ["Nonsense"],
      transactionStates: [{ transactionalId: "tx-listed", producerId: p.producerId, transactionState: "Ongoing" }],
    });
    const longRunning = await client.request(K.ListTransactions, 1, { stateFilters: ["Ongoing"], producerIdFilters: [p.producerId], durationFilter: 3_600_000 });
    expect(longRunning.transactionStates).toEqual([]);
    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    const done = await client.request(K.ListTransactions, 0, { stateFilters: ["Ongoing"], producerIdFilters: [p.producerId] });
    expect(done.transactionStates).toEqual([]);
  });
});

describe("zombie fencing", () => {
  test("InitProducerId on an open transaction: CONCURRENT_TRANSACTIONS, the old one aborted, then the bumped epoch", async () => {
    const zombie = await newProducer("tx-zombie");
    const start = (await fetchPartition("orders", 2, READ_UNCOMMITTED)).highWatermark;
    expect(await addPartitions(zombie, { orders: [2] })).toEqual([["orders", 2, ErrorCode.NONE]]);
    expect((await produceTxn(zombie, "orders", 2, ["z1"])).errorCode).toBe(ErrorCode.NONE);

    const rejoin = await initProducerId("tx-zombie");
    expect(rejoin).toMatchObject({ errorCode: ErrorCode.CONCURRENT_TRANSACTIONS, producerId: -1, producerEpoch: -1 });
    // The old session's transaction is aborted at the fencing epoch (never handed to a client).
    const aborted = await fetchPartition("orders", 2, READ_COMMITTED, start);
    expect(aborted.values).toEqual(["z1"]);
    expect(aborted.visible).toEqual([]);
    expect(aborted.controls).toEqual([{ producerId: zombie.producerId, epoch: zombie.producerEpoch + 1, key: ABORT_KEY }]);
    expect(aborted.abortedTransactions).toEqual([{ producerId: zombie.producerId, firstOffset: start }]);
    const retry = await initProducerId("tx-zombie");
    expect(retry).toMatchObject({ errorCode: ErrorCode.NONE, producerId: zombie.producerId, producerEpoch: zombie.producerEpoch + 2 });

    // The zombie, still at its old epoch, is fenced everywhere: coordinator APIs by version, Produce with 47.
    expect(await addPartitions(zombie, { orders: [2] }, 1)).toEqual([["orders", 2, ErrorCode.INVALID_PRODUCER_EPOCH]]);
    expect(await addPartitions(zombie, { orders: [2] }, 3)).toEqual([["orders", 2, ErrorCode.PRODUCER_FENCED]]);
    expect(await endTxn(zombie, true, 1)).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    expect(await endTxn(zombie, true, 3)).toBe(ErrorCode.PRODUCER_FENCED);
    expect(await addOffsets(zombie, "g", 3)).toBe(ErrorCode.PRODUCER_FENCED);
    expect((await produceTxn(zombie, "orders", 2, ["z2"])).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);

    // The new session works.
    const fresh: Producer = { transactionalId: "tx-zombie", producerId: retry.producerId, producerEpoch: retry.producerEpoch, sequences: new Map() };
    expect(await addPartitions(fresh, { orders: [2] })).toEqual([["orders", 2, ErrorCode.NONE]]);
    expect((await produceTxn(fresh, "orders", 2, ["n1"])).errorCode).toBe(ErrorCode.NONE);
    expect(await endTxn(fresh, true)).toBe(ErrorCode.NONE);
    expect((await fetchPartition("orders", 2, READ_COMMITTED, start)).visible).toEqual(["n1"]);
  }, TIMEOUT);

  test("a zombie is fenced with 47 on any partition, even one without its producer state; an unknown producer id gets 49", async () => {
    const zombie = await newProducer("tx-zombie-unwritten");
    expect(await addPartitions(zombie, { payments: [1] })).toEqual([["payments", 1, ErrorCode.NONE]]);
    expect((await initProducerId("tx-zombie-unwritten")).errorCode).toBe(ErrorCode.CONCURRENT_TRANSACTIONS);
    const before = await Promise.all([0, 1].map(async (i) => (await fetchPartition("payments", i, READ_UNCOMMITTED)).highWatermark));
    for (const version of [9, 11]) {
      // payments-1 was in the aborted transaction: its abort marker carries the bumped epoch.
      expect((await produceTxn(zombie, "payments", 1, ["z"], { version })).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
      // payments-0 never saw this producer: only the coordinator knows it is fenced (Apache's verification
      // answers PRODUCER_FENCED, which Produce answers as 47).
      expect((await produceTxn(zombie, "payments", 0, ["z"], { version })).errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    }
    // A producer id no transactional id has (Apache's coordinator: INVALID_PRODUCER_ID_MAPPING).
    const stranger: Producer = { transactionalId: "tx-zombie-unwritten", producerId: zombie.producerId + 1_000_000, producerEpoch: 0, sequences: new Map() };
    expect((await produceTxn(stranger, "payments", 0, ["s"])).errorCode).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    expect(await Promise.all([0, 1].map(async (i) => (await fetchPartition("payments", i, READ_UNCOMMITTED)).highWatermark))).toEqual(before);
  }, TIMEOUT);
});

describe("WriteTxnMarkers", () => {
  test("ends a transaction on the named partitions (what kafka-transactions.sh abort does)", async () => {
    await newProducer("tx-hanging");
    const p = await newProducer("tx-hanging"); // epoch 1, so that an older epoch exists
    const start = (await fetchPartition("payments", 0, READ_UNCOMMITTED)).highWatermark;
    expect(await addPartitions(p, { payments: [0] })).toEqual([["payments", 0, ErrorCode.NONE]]);
    expect((await produceTxn(p, "payments", 0, ["h1"])).errorCode).toBe(ErrorCode.NONE);
    expect((await fetchPartition("payments", 0, READ_COMMITTED)).lastStableOffset).toBe(start);
    const res = await client.request(K.WriteTxnMarkers, 1, {
      markers: [
        {
          producerId: p.producerId,
          producerEpoch: p.producerEpoch,
          transactionResult: false,
          coordinatorEpoch: 0,
          topics: [
            { name: "payments", partitionIndexes: [0] },
            { name: "nope", partitionIndexes: [3] },
          ],
        },
      ],
    });
    expect(res.markers).toEqual([
      {
        producerId: p.producerId,
        topics: [
          { name: "payments", partitions: [{ partitionIndex: 0, errorCode: ErrorCode.NONE }] },
          { name: "nope", partitions: [{ partitionIndex: 3, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION }] },
        ],
      },
    ]);
    const after = await fetchPartition("payments", 0, READ_COMMITTED, start);
    expect(after.lastStableOffset).toBe(after.highWatermark);
    expect(after.abortedTransactions).toEqual([{ producerId: p.producerId, firstOffset: start }]);
    // An older producer epoch is refused by the partition.
    const stale = await client.request(K.WriteTxnMarkers, 0, {
      markers: [{ producerId: p.producerId, producerEpoch: p.producerEpoch - 1, transactionResult: true, coordinatorEpoch: 0, topics: [{ name: "payments", partitionIndexes: [0] }] }],
    });
    expect(stale.markers[0].topics[0].partitions[0].errorCode).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
    // The coordinator still has its own view; the producer aborts as usual.
    expect(await endTxn(p, false)).toBe(ErrorCode.NONE);
  }, TIMEOUT);
});

describe("WriteTxnMarkers regressions", () => {
  // Found by the wire fuzz: a marker for a negative or unrepresentable producer id, or a negative epoch,
  // reached the partition's producer state and failed the request with UNKNOWN_SERVER_ERROR.
  test("a marker with an impossible producer id or epoch is INVALID_REQUEST, nothing written", async () => {
    const before = (await fetchPartition("orders", 0, READ_UNCOMMITTED)).highWatermark;
    for (const [producerId, producerEpoch] of [
      [-1, -1],
      [-5, 0],
      [2 ** 60, 0],
      [1, -7],
    ]) {
      const res = await client.request(K.WriteTxnMarkers, 1, {
        markers: [{ producerId, producerEpoch, transactionResult: true, coordinatorEpoch: 0, topics: [{ name: "orders", partitionIndexes: [0] }] }],
      });
      expect(res.markers[0].topics[0].partitions).toEqual([{ partitionIndex: 0, errorCode: ErrorCode.INVALID_REQUEST }]);
    }
    expect((await fetchPartition("orders", 0, READ_UNCOMMITTED)).highWatermark).toBe(before);
  });
});

describe("restart", () => {
  test("transaction state survives a restart: the open transaction is still open, then commits", async () => {
    const p = await newProducer("tx-restart");
    const start = (await fetchPartition("payments", 1, READ_UNCOMMITTED)).highWatermark;
    expect(await addPartitions(p, { payments: [1] })).toEqual([["payments", 1, ErrorCode.NONE]]);
    expect((await produceTxn(p, "payments", 1, ["r1"])).errorCode).toBe(ErrorCode.NONE);
    client.close();
    await broker.restart();
    client = await WireClient.connect(broker.port);
    expect(await describe1("tx-restart")).toMatchObject({ transactionState: "Ongoing", topics: [{ topic: "payments", partitions: [1] }] });
    expect(await endTxn(p, true)).toBe(ErrorCode.NONE);
    expect((await fetchPartition("payments", 1, READ_COMMITTED, start)).values).toEqual(["r1"]);
  }, TIMEOUT);
});
