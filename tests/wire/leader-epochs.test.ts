/**
 * Wire tests of leader epochs with raw frames: OffsetForLeaderEpoch v2-4 (every error, the answers for the
 * current, an older, a lower and a higher epoch), the current-leader-epoch checks of Fetch and ListOffsets,
 * and the epochs Metadata, ListOffsets and the stored batches report. Cluster-mode standings (an epoch
 * above 0, a partition being handed over or led elsewhere) are set on the broker's ownership object, the
 * port every handler asks.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Standing } from "../../src/cluster/ownership.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { parseBatchHeader } from "../../src/protocol/records/record-batch.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { singlePartitionFetch } from "../support/fetch-request.ts";
import type { TestBroker } from "../support/test-broker.ts";
import type { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 90_000;
const TOPIC = "epochs";
const OTHER_BROKER = 7;

let broker: TestBroker;
let client: WireClient;
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT);

// ---- cluster-mode standings, set on the ownership port --------------------------------------------

type Ownership = TestBroker["broker"]["services"]["ownership"];
let restore: (() => void) | undefined;

/** Partition 1 of TOPIC gets `standing` (led by `leader`); every other resource keeps its own. */
function standPartition1(standing: Standing, leader: number): void {
  const ownership: Ownership = broker.broker.services.ownership;
  const { standing: originalStanding, partitionLeader: originalLeader, mayAct: originalMayAct } = ownership;
  const isP1 = (topic: string, partition: number) => topic === TOPIC && partition === 1;
  ownership.standing = (resource) =>
    resource.kind === "partition" && isP1(resource.topic, resource.partition) ? standing : originalStanding.call(ownership, resource);
  ownership.partitionLeader = (topic, partition) => (isP1(topic, partition) ? leader : originalLeader.call(ownership, topic, partition));
  // Writes (Produce) may act only while owned, at the standing's epoch.
  ownership.mayAct = (resource, epoch) =>
    resource.kind === "partition" && isP1(resource.topic, resource.partition)
      ? standing.state === "owned" && standing.epoch === epoch
      : originalMayAct.call(ownership, resource, epoch);
  restore = () => {
    ownership.standing = originalStanding;
    ownership.partitionLeader = originalLeader;
    ownership.mayAct = originalMayAct;
  };
}

afterEach(() => {
  restore?.();
  restore = undefined;
});

// ---- helpers -----------------------------------------------------------------------------------

let created = false;
/** TOPIC with 2 partitions; partition 0 holds 5 records, partition 1 holds 3. Created once. */
async function ensureTopic(): Promise<void> {
  if (created) return;
  const res = await client.request(19, 7, {
    topics: [{ name: TOPIC, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  await produceOk(0, 5);
  await produceOk(1, 3);
  created = true;
}

async function produceOk(partition: number, records: number): Promise<number> {
  const res = await client.request(0, 11, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: TOPIC, partitionData: [{ index: partition, records: simpleBatch(records) }] }],
  });
  const answer = res.responses[0].partitionResponses[0];
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return answer.baseOffset;
}

interface EpochEndOffset {
  partition: number;
  errorCode: number;
  leaderEpoch: number;
  endOffset: number;
}

/** One OffsetForLeaderEpoch request; the answers of TOPIC's partitions (or of `topic`'s). */
async function offsetForLeaderEpoch(
  version: number,
  partitions: { partition: number; currentLeaderEpoch?: number; leaderEpoch: number }[],
  topic = TOPIC,
): Promise<EpochEndOffset[]> {
  const res = await client.request(23, version, {
    replicaId: -1,
    topics: [{ topic, partitions: partitions.map((p) => ({ currentLeaderEpoch: -1, ...p })) }],
  });
  expect(res.topics).toHaveLength(1);
  expect(res.topics[0].topic).toBe(topic);
  return res.topics[0].partitions.map((p: EpochEndOffset) => ({
    partition: p.partition,
    errorCode: p.errorCode,
    leaderEpoch: p.leaderEpoch,
    endOffset: p.endOffset,
  }));
}

async function listOffset(partition: number, timestamp: number, currentLeaderEpoch: number, version = 8) {
  const res = await client.request(2, version, {
    replicaId: -1,
    isolationLevel: 0,
    topics: [{ name: TOPIC, partitions: [{ partitionIndex: partition, currentLeaderEpoch, timestamp, maxNumOffsets: 1 }] }],
  });
  const p = res.topics[0].partitions[0];
  return { errorCode: p.errorCode, offset: p.offset, leaderEpoch: p.leaderEpoch };
}

async function fetchPartition(partition: number, currentLeaderEpoch: number, version = 17) {
  const body = singlePartitionFetch(TOPIC, partition, 0, 1 << 20);
  body.topics[0]!.partitions[0]!.currentLeaderEpoch = currentLeaderEpoch;
  const topicId = broker.broker.services.topics.get(TOPIC)!.topicId;
  const request = version >= 13 ? { ...body, topics: body.topics.map((t) => ({ ...t, topic: "", topicId })) } : body;
  const res = await client.request(1, version, request);
  expect(res.errorCode).toBe(ErrorCode.NONE);
  return { response: res, partition: res.responses[0].partitions[0] };
}

async function partition1() {
  return (await broker.broker.services.partitions.get(TOPIC, 1))!;
}

// ---- OffsetForLeaderEpoch ---------------------------------------------------------------------

describe("OffsetForLeaderEpoch", () => {
  test("is advertised, versions 2-4 (Apache Kafka 4's); v1 is UNSUPPORTED_VERSION", async () => {
    const res = await client.request(18, 3, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
    expect(res.apiKeys.find((k: { apiKey: number }) => k.apiKey === 23)).toMatchObject({ apiKey: 23, minVersion: 2, maxVersion: 4 });
    await ensureTopic();
    expect(await offsetForLeaderEpoch(1, [{ partition: 0, leaderEpoch: 0 }])).toEqual([
      { partition: 0, errorCode: ErrorCode.UNSUPPORTED_VERSION, leaderEpoch: -1, endOffset: -1 },
    ]);
  });

  test("single-broker mode: epoch 0 ends at the log end, at every version", async () => {
    await ensureTopic();
    for (let version = 2; version <= 4; version++) {
      expect(await offsetForLeaderEpoch(version, [{ partition: 0, leaderEpoch: 0 }, { partition: 1, leaderEpoch: 0 }])).toEqual([
        { partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 5 },
        { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 3 },
      ]);
    }
    // current leader epoch 0 matches: answered.
    expect(await offsetForLeaderEpoch(4, [{ partition: 0, currentLeaderEpoch: 0, leaderEpoch: 0 }])).toEqual([
      { partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 5 },
    ]);
  });

  test("an epoch above every recorded one has no answer (-1, -1), as Apache's", async () => {
    await ensureTopic();
    expect(await offsetForLeaderEpoch(4, [{ partition: 0, leaderEpoch: 3 }])).toEqual([
      { partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: -1, endOffset: -1 },
    ]);
    expect(await offsetForLeaderEpoch(3, [{ partition: 0, leaderEpoch: -1 }])).toEqual([
      { partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: -1, endOffset: -1 },
    ]);
  });

  test("unknown topic and partition: UNKNOWN_TOPIC_OR_PARTITION", async () => {
    await ensureTopic();
    expect(await offsetForLeaderEpoch(4, [{ partition: 0, leaderEpoch: 0 }], "no-such-topic")).toEqual([
      { partition: 0, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, leaderEpoch: -1, endOffset: -1 },
    ]);
    expect(await offsetForLeaderEpoch(4, [{ partition: 2, currentLeaderEpoch: 5, leaderEpoch: 0 }])).toEqual([
      { partition: 2, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, leaderEpoch: -1, endOffset: -1 },
    ]);
  });

  test("a partition refused at open for damaged data: KAFKA_STORAGE_ERROR", async () => {
    await ensureTopic();
    const partitions = broker.broker.services.partitions;
    const original = partitions.refusal;
    // As partitions.ts records a refusal: the answer must not read the partition.
    partitions.refusal = (topic, partition) =>
      topic === TOPIC && partition === 1
        ? { partition: `${TOPIC}-1`, file: "00000000000000000000.log", position: 0, offset: 0, reason: "test", foundBy: "open", foundAtMs: 0, refused: true }
        : original.call(partitions, topic, partition);
    try {
      expect(await offsetForLeaderEpoch(4, [{ partition: 1, leaderEpoch: 0 }, { partition: 0, leaderEpoch: 0 }])).toEqual([
        { partition: 1, errorCode: ErrorCode.KAFKA_STORAGE_ERROR, leaderEpoch: -1, endOffset: -1 },
        { partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 5 },
      ]);
    } finally {
      partitions.refusal = original;
    }
  });

  test("current leader epoch older: FENCED_LEADER_EPOCH; newer: UNKNOWN_LEADER_EPOCH; -1: no check", async () => {
    await ensureTopic();
    expect(await offsetForLeaderEpoch(4, [{ partition: 0, currentLeaderEpoch: 1, leaderEpoch: 0 }])).toEqual([
      { partition: 0, errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, leaderEpoch: -1, endOffset: -1 },
    ]);
    const p1 = await partition1();
    await p1.becomeLeader(4);
    standPartition1({ state: "owned", epoch: 4 }, broker.broker.services.ownership.selfId);
    for (const version of [2, 3, 4]) {
      expect(await offsetForLeaderEpoch(version, [{ partition: 1, currentLeaderEpoch: 3, leaderEpoch: 0 }])).toEqual([
        { partition: 1, errorCode: ErrorCode.FENCED_LEADER_EPOCH, leaderEpoch: -1, endOffset: -1 },
      ]);
      expect(await offsetForLeaderEpoch(version, [{ partition: 1, currentLeaderEpoch: 5, leaderEpoch: 0 }])).toEqual([
        { partition: 1, errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, leaderEpoch: -1, endOffset: -1 },
      ]);
    }
    expect(await offsetForLeaderEpoch(2, [{ partition: 1, currentLeaderEpoch: -1, leaderEpoch: 0 }])).toEqual([
      { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 3 },
    ]);
  });

  test("after a leadership change: older epochs end where the next starts, the current at the log end", async () => {
    await ensureTopic();
    const p1 = await partition1();
    await p1.becomeLeader(4); // a no-op when the previous test did it
    standPartition1({ state: "owned", epoch: 4 }, broker.broker.services.ownership.selfId);
    const start = p1.log.logEndOffset;
    await produceOk(1, 2);
    const end = start + 2;
    expect(await offsetForLeaderEpoch(4, [
      { partition: 1, currentLeaderEpoch: 4, leaderEpoch: 0 },
      { partition: 1, currentLeaderEpoch: 4, leaderEpoch: 2 },
      { partition: 1, currentLeaderEpoch: 4, leaderEpoch: 4 },
      { partition: 1, currentLeaderEpoch: 4, leaderEpoch: 9 },
    ])).toEqual([
      { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: start },
      { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: start },
      { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: 4, endOffset: end },
      { partition: 1, errorCode: ErrorCode.NONE, leaderEpoch: -1, endOffset: -1 },
    ]);
    // The batch produced at epoch 4 carries it.
    const fetched = await fetchPartition(1, 4);
    expect(fetched.partition.errorCode).toBe(ErrorCode.NONE);
    const records: Uint8Array = fetched.partition.records;
    const epochs: number[] = [];
    for (let at = 0; at < records.length; ) {
      const header = parseBatchHeader(records, at);
      epochs.push(header.partitionLeaderEpoch);
      at += header.sizeBytes;
    }
    expect(epochs.at(0)).toBe(0);
    expect(epochs.at(-1)).toBe(4);
  });

  test("not led here: NOT_LEADER_OR_FOLLOWER, after the epoch check while this broker still has an epoch", async () => {
    await ensureTopic();
    standPartition1({ state: "elsewhere", brokerId: OTHER_BROKER }, OTHER_BROKER);
    expect(await offsetForLeaderEpoch(4, [{ partition: 1, currentLeaderEpoch: 9, leaderEpoch: 0 }])).toEqual([
      { partition: 1, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, leaderEpoch: -1, endOffset: -1 },
    ]);
    restore!();
    for (const state of ["loading", "leaving"] as const) {
      standPartition1({ state, epoch: 4 }, broker.broker.services.ownership.selfId);
      expect(await offsetForLeaderEpoch(4, [{ partition: 1, currentLeaderEpoch: 4, leaderEpoch: 0 }])).toEqual([
        { partition: 1, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, leaderEpoch: -1, endOffset: -1 },
      ]);
      expect(await offsetForLeaderEpoch(4, [{ partition: 1, currentLeaderEpoch: 2, leaderEpoch: 0 }])).toEqual([
        { partition: 1, errorCode: ErrorCode.FENCED_LEADER_EPOCH, leaderEpoch: -1, endOffset: -1 },
      ]);
      restore!();
    }
  });
});

// ---- Fetch and ListOffsets ------------------------------------------------------------------------

describe("current leader epoch checks of Fetch and ListOffsets", () => {
  test("ListOffsets v4+: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, the epoch answered; v1-3 carry none", async () => {
    await ensureTopic();
    expect(await listOffset(0, -1, 0)).toEqual({ errorCode: ErrorCode.NONE, offset: 5, leaderEpoch: 0 });
    expect(await listOffset(0, -2, -1)).toEqual({ errorCode: ErrorCode.NONE, offset: 0, leaderEpoch: 0 });
    expect(await listOffset(0, -1, 1)).toEqual({ errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, offset: -1, leaderEpoch: -1 });
    const p1 = await partition1();
    await p1.becomeLeader(4);
    standPartition1({ state: "owned", epoch: 4 }, broker.broker.services.ownership.selfId);
    expect(await listOffset(1, -1, 3)).toEqual({ errorCode: ErrorCode.FENCED_LEADER_EPOCH, offset: -1, leaderEpoch: -1 });
    expect(await listOffset(1, -1, 5, 4)).toEqual({ errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, offset: -1, leaderEpoch: -1 });
    // Latest: the current epoch; earliest: the epoch that wrote the log start offset.
    expect(await listOffset(1, -1, 4)).toEqual({ errorCode: ErrorCode.NONE, offset: p1.highWatermark, leaderEpoch: 4 });
    expect(await listOffset(1, -2, 4)).toEqual({ errorCode: ErrorCode.NONE, offset: 0, leaderEpoch: 0 });
    // v3 has no current leader epoch: answered.
    expect((await listOffset(1, -1, -1, 3)).errorCode).toBe(ErrorCode.NONE);
    restore!();
    standPartition1({ state: "elsewhere", brokerId: OTHER_BROKER }, OTHER_BROKER);
    expect(await listOffset(1, -1, -1)).toEqual({ errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, offset: -1, leaderEpoch: -1 });
  });

  test("Fetch v9+: FENCED_LEADER_EPOCH names the current leader and epoch (v12+) and its endpoint (v16+)", async () => {
    await ensureTopic();
    expect((await fetchPartition(0, 0)).partition.errorCode).toBe(ErrorCode.NONE);
    expect((await fetchPartition(0, -1)).partition.errorCode).toBe(ErrorCode.NONE);
    const newer = await fetchPartition(0, 1);
    expect(newer.partition).toMatchObject({ errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, highWatermark: -1 });
    expect(newer.partition.records?.length ?? 0).toBe(0);

    const p1 = await partition1();
    await p1.becomeLeader(4);
    const selfId = broker.broker.services.ownership.selfId;
    standPartition1({ state: "owned", epoch: 4 }, selfId);
    const fenced = await fetchPartition(1, 3);
    expect(fenced.partition).toMatchObject({ errorCode: ErrorCode.FENCED_LEADER_EPOCH, highWatermark: -1, currentLeader: { leaderId: selfId, leaderEpoch: 4 } });
    expect(fenced.response.nodeEndpoints).toEqual([expect.objectContaining({ nodeId: selfId, port: broker.port })]);
    const v12 = await fetchPartition(1, 3, 12);
    expect(v12.partition).toMatchObject({ errorCode: ErrorCode.FENCED_LEADER_EPOCH, currentLeader: { leaderId: selfId, leaderEpoch: 4 } });
    expect((await fetchPartition(1, 5, 9)).partition.errorCode).toBe(ErrorCode.UNKNOWN_LEADER_EPOCH);
    expect((await fetchPartition(1, 4)).partition.errorCode).toBe(ErrorCode.NONE);
    restore!();
    standPartition1({ state: "elsewhere", brokerId: OTHER_BROKER }, OTHER_BROKER);
    const elsewhere = await fetchPartition(1, -1);
    expect(elsewhere.partition).toMatchObject({ errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, currentLeader: { leaderId: OTHER_BROKER, leaderEpoch: -1 } });
  });

  test("Metadata v7+ reports the partition's epoch: 0 in single-broker mode, the standing's otherwise", async () => {
    await ensureTopic();
    const selfId = broker.broker.services.ownership.selfId;
    standPartition1({ state: "owned", epoch: 4 }, selfId);
    const res = await client.request(3, 12, { topics: [{ name: TOPIC, topicId: ZERO_UUID }], allowAutoTopicCreation: false, includeTopicAuthorizedOperations: false });
    const epochs = res.topics[0].partitions.map((p: { partitionIndex: number; leaderEpoch: number }) => [p.partitionIndex, p.leaderEpoch]);
    expect(epochs).toEqual([
      [0, 0],
      [1, 4],
    ]);
  });
});
