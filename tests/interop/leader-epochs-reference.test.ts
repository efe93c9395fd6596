/**
 * Leader epochs on a single broker, side by side with Apache Kafka 4.1.1 (single-node KRaft): the same
 * requests to both, the same answers. A new topic's partitions lead at epoch 0 (Metadata), produced
 * batches are stored with partitionLeaderEpoch 0, ListOffsets answers epoch 0, OffsetForLeaderEpoch
 * answers the current, a higher and the undefined epoch and its errors as Apache, and the
 * current-leader-epoch checks of Fetch, ListOffsets and OffsetForLeaderEpoch give Apache's codes.
 *
 *   bun test --timeout 300000 tests/interop/leader-epochs-reference.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { parseBatchHeader } from "../../src/protocol/records/record-batch.ts";
import { startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { singlePartitionFetch } from "../support/fetch-request.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 180_000;
const TOPIC = "ref-epochs";

let apache: ApacheKafka;
let bunka: TestBroker;
const clients: Record<"apache" | "bunka", WireClient> = {} as Record<"apache" | "bunka", WireClient>;

async function produce(client: WireClient, records: Uint8Array) {
  const res = await client.request(0, 11, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: TOPIC, partitionData: [{ index: 0, records }] }],
  });
  return res.responses[0].partitionResponses[0] as { errorCode: number; baseOffset: number };
}

/** Produces until the partition has a leader that takes it (Apache's right after CreateTopics may not yet). */
async function produceWhenLed(client: WireClient, records: () => Uint8Array): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await produce(client, records());
    if (answer.errorCode === ErrorCode.NONE) return;
    if (answer.errorCode !== ErrorCode.NOT_LEADER_OR_FOLLOWER || Date.now() > deadline) throw new Error(JSON.stringify(answer));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Sends the same request to both brokers; their answers, Apache's first. */
async function both<T>(ask: (client: WireClient) => Promise<T>): Promise<[apache: T, bunka: T]> {
  return Promise.all([ask(clients.apache), ask(clients.bunka)]);
}

const offsetForLeaderEpoch = (version: number, partitions: { partition: number; currentLeaderEpoch: number; leaderEpoch: number }[], topic = TOPIC) =>
  async (client: WireClient) => {
    const res = await client.request(23, version, { replicaId: -1, topics: [{ topic, partitions }] });
    return res.topics.map((t: { topic: string; partitions: object[] }) => ({
      topic: t.topic,
      partitions: t.partitions.map((p) => {
        const { partition, errorCode, leaderEpoch, endOffset } = p as Record<string, number>;
        return { partition, errorCode, leaderEpoch, endOffset };
      }),
    }));
  };

beforeAll(async () => {
  [apache, bunka] = await Promise.all([startApacheKafka(), startTestBroker({ autoCreateTopicsEnable: false })]);
  clients.apache = await WireClient.connect(apache.port);
  clients.bunka = await WireClient.connect(bunka.port);
  for (const client of Object.values(clients)) {
    const res = await client.request(19, 7, {
      topics: [{ name: TOPIC, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 10_000,
      validateOnly: false,
    });
    expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
    await produceWhenLed(client, () => simpleBatch(3));
    expect((await produce(client, simpleBatch(2))).errorCode).toBe(ErrorCode.NONE);
  }
}, TIMEOUT);

afterAll(async () => {
  for (const client of Object.values(clients)) client?.close();
  await Promise.all([apache?.stop(), bunka?.stop()]);
});

describe("leader epochs: bunka answers as Apache Kafka 4.1.1", () => {
  test("ApiVersions: OffsetForLeaderEpoch's version range", async () => {
    const [a, b] = await both(async (client) => {
      const res = await client.request(18, 3, { clientSoftwareName: "ref", clientSoftwareVersion: "1" });
      const key = res.apiKeys.find((k: { apiKey: number }) => k.apiKey === 23);
      return { minVersion: key.minVersion, maxVersion: key.maxVersion };
    });
    expect(b).toEqual(a);
  });

  test("Metadata: the new topic's partition leads at epoch 0", async () => {
    const [a, b] = await both(async (client) => {
      const res = await client.request(3, 12, { topics: [{ name: TOPIC, topicId: ZERO_UUID }], allowAutoTopicCreation: false, includeTopicAuthorizedOperations: false });
      return res.topics[0].partitions.map((p: { leaderEpoch: number }) => p.leaderEpoch);
    });
    expect(a).toEqual([0]);
    expect(b).toEqual(a);
  });

  test("stored batches carry partitionLeaderEpoch 0 (produced with -1)", async () => {
    const [a, b] = await both(async (client) => {
      const res = await client.request(1, 12, singlePartitionFetch(TOPIC, 0, 0, 1 << 20));
      const records: Uint8Array = res.responses[0].partitions[0].records;
      const epochs: [number, number][] = [];
      for (let at = 0; at < records.length; ) {
        const header = parseBatchHeader(records, at);
        epochs.push([header.baseOffset, header.partitionLeaderEpoch]);
        at += header.sizeBytes;
      }
      return epochs;
    });
    expect(a).toEqual([
      [0, 0],
      [3, 0],
    ]);
    expect(b).toEqual(a);
  });

  test("OffsetForLeaderEpoch: the current, a higher and the undefined epoch; unknown topic and partition", async () => {
    for (const version of [2, 3, 4]) {
      const asked = offsetForLeaderEpoch(version, [
        { partition: 0, currentLeaderEpoch: -1, leaderEpoch: 0 },
        { partition: 0, currentLeaderEpoch: 0, leaderEpoch: 0 },
        { partition: 0, currentLeaderEpoch: -1, leaderEpoch: 5 },
        { partition: 0, currentLeaderEpoch: -1, leaderEpoch: -1 },
        { partition: 1, currentLeaderEpoch: -1, leaderEpoch: 0 },
      ]);
      const [a, b] = await both(asked);
      expect(a[0].partitions[0]).toEqual({ partition: 0, errorCode: ErrorCode.NONE, leaderEpoch: 0, endOffset: 5 });
      expect(b).toEqual(a);
      const [ua, ub] = await both(offsetForLeaderEpoch(version, [{ partition: 0, currentLeaderEpoch: -1, leaderEpoch: 0 }], "no-such-topic"));
      expect(ub).toEqual(ua);
    }
  });

  test("current leader epoch newer than the broker's: UNKNOWN_LEADER_EPOCH from OffsetForLeaderEpoch, ListOffsets and Fetch", async () => {
    const [a, b] = await both(offsetForLeaderEpoch(4, [{ partition: 0, currentLeaderEpoch: 1, leaderEpoch: 0 }]));
    expect(a[0].partitions[0].errorCode).toBe(ErrorCode.UNKNOWN_LEADER_EPOCH);
    expect(b).toEqual(a);

    const listOffsets = (timestamp: number, currentLeaderEpoch: number) => async (client: WireClient) => {
      const res = await client.request(2, 8, {
        replicaId: -1,
        isolationLevel: 0,
        topics: [{ name: TOPIC, partitions: [{ partitionIndex: 0, currentLeaderEpoch, timestamp, maxNumOffsets: 1 }] }],
      });
      const { errorCode, offset, timestamp: ts, leaderEpoch } = res.topics[0].partitions[0];
      return { errorCode, offset, timestamp: ts, leaderEpoch };
    };
    for (const [timestamp, epoch] of [[-1, 0], [-2, 0], [-1, 1], [-2, -1], [-3, -1]] as const) {
      const [la, lb] = await both(listOffsets(timestamp, epoch));
      expect(lb, `timestamp ${timestamp} epoch ${epoch}`).toEqual(la);
    }

    const fetch = (currentLeaderEpoch: number) => async (client: WireClient) => {
      const body = singlePartitionFetch(TOPIC, 0, 0, 1 << 20);
      body.topics[0]!.partitions[0]!.currentLeaderEpoch = currentLeaderEpoch;
      const res = await client.request(1, 12, body);
      const p = res.responses[0].partitions[0];
      return { errorCode: p.errorCode, highWatermark: p.highWatermark, records: p.records?.length ?? 0, currentLeader: p.currentLeader };
    };
    const [fa, fb] = await both(fetch(1));
    expect(fa.errorCode).toBe(ErrorCode.UNKNOWN_LEADER_EPOCH);
    expect(fb).toEqual(fa);
    const [oka, okb] = await both(fetch(0));
    expect(oka.errorCode).toBe(ErrorCode.NONE);
    expect(okb.errorCode).toBe(ErrorCode.NONE);
  });
});
