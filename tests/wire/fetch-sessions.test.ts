/**
 * Fetch sessions (KIP-227) on the wire, with raw frames: a full request creates a session, incremental
 * requests add, update and forget partitions, unlisted partitions keep their fetch offset, the
 * incremental answer carries only partitions with news, FINAL closes, and every session error code.
 *
 * FETCH_SESSIONS_APACHE=1 runs the same file against Apache Kafka 4.1.1 (the reference: every answer
 * checked here is Apache's too); the tests that look at bunka's own configuration or metrics are skipped
 * there.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 90_000;
const onApache = process.env.FETCH_SESSIONS_APACHE === "1";
const bunkaOnly = onApache ? test.skip : test;

let bunka: TestBroker | undefined;
let apache: ApacheKafka | undefined;
let port = 0;
let client: WireClient;
const topicIds = new Map<string, string>();

beforeAll(async () => {
  if (onApache) {
    apache = await startApacheKafka();
    port = apache.port;
  } else {
    bunka = await startTestBroker({ autoCreateTopicsEnable: false });
    port = bunka.port;
  }
  client = await WireClient.connect(port);
}, TIMEOUT);

afterAll(async () => {
  client?.close();
  await bunka?.stop();
  await apache?.stop();
});

async function createTopic(name: string, partitions: number): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 30_000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  topicIds.set(name, res.topics[0].topicId);
  // Apache creates the partitions asynchronously: wait until a fetch of each is served.
  for (let p = 0; p < partitions; p++) {
    for (let attempt = 0; ; attempt++) {
      const res = await fetch({ version: 12, epoch: -1, partitions: [{ topic: name, partition: p, offset: 0 }] });
      if (res.responses[0]?.partitions[0]?.errorCode === ErrorCode.NONE) break;
      if (attempt > 200) throw new Error(`${name}-${p} never became fetchable`);
      await Bun.sleep(50);
    }
  }
}

async function produce(topic: string, partition: number, count: number): Promise<void> {
  const res = await client.request(0, 9, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records: simpleBatch(count) }] }],
  });
  expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
}

interface Wanted {
  topic: string;
  partition: number;
  offset: number;
}

interface FetchArgs {
  version?: number;
  sessionId?: number;
  epoch: number;
  partitions?: Wanted[];
  forgotten?: { topic: string; partitions: number[] }[];
  maxWaitMs?: number;
  minBytes?: number;
  via?: WireClient;
}

/** A Fetch; the topics are named by id from v13, by name before. */
async function fetch(args: FetchArgs): Promise<any> {
  const version = args.version ?? 17;
  const byId = version >= 13;
  const topics = new Map<string, Wanted[]>();
  for (const w of args.partitions ?? []) topics.set(w.topic, [...(topics.get(w.topic) ?? []), w]);
  return (args.via ?? client).request(1, version, {
    replicaId: -1,
    maxWaitMs: args.maxWaitMs ?? 0,
    minBytes: args.minBytes ?? 0,
    maxBytes: 50 * 1024 * 1024,
    isolationLevel: 0,
    sessionId: args.sessionId ?? 0,
    sessionEpoch: args.epoch,
    topics: [...topics].map(([topic, ws]) => ({
      topic: byId ? "" : topic,
      topicId: byId ? topicIds.get(topic)! : ZERO_UUID,
      partitions: ws.map((w) => ({
        partition: w.partition,
        currentLeaderEpoch: -1,
        fetchOffset: w.offset,
        lastFetchedEpoch: -1,
        logStartOffset: -1,
        partitionMaxBytes: 1024 * 1024,
      })),
    })),
    forgottenTopicsData: (args.forgotten ?? []).map((f) => ({
      topic: byId ? "" : f.topic,
      topicId: byId ? topicIds.get(f.topic)! : ZERO_UUID,
      partitions: f.partitions,
    })),
    rackId: "",
  });
}

/** "topic-partition" of every partition in an answer, with its record count and high watermark. */
function summary(res: any): string[] {
  const nameOf = (t: any) => (t.topic !== "" ? t.topic : [...topicIds].find(([, id]) => id === t.topicId)?.[0]);
  return res.responses.flatMap((t: any) =>
    t.partitions.map((p: any) => `${nameOf(t)}-${p.partitionIndex} e${p.errorCode} hw${p.highWatermark} n${recordCount(p.records)}`),
  );
}

/** Records in fetched bytes (the batches' record counts). */
function recordCount(bytes: Uint8Array | null): number {
  if (bytes === null) return 0;
  let n = 0;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + 61 <= bytes.length; at += 12 + view.getInt32(at + 8)) n += view.getInt32(at + 57);
  return n;
}

describe.each([7, 12, 17])("Fetch v%i", (version) => {
  const t = `fs-v${version}`;

  test("a full request creates a session; incremental answers carry only what changed", async () => {
    await createTopic(t, 3);
    await produce(t, 0, 2);
    const all = [0, 1, 2].map((partition) => ({ topic: t, partition, offset: 0 }));
    const full = await fetch({ version, epoch: 0, partitions: all });
    expect(full.errorCode).toBe(ErrorCode.NONE);
    expect(full.sessionId).toBeGreaterThan(0);
    // A full answer carries every partition asked for.
    expect(summary(full)).toEqual([`${t}-0 e0 hw2 n2`, `${t}-1 e0 hw0 n0`, `${t}-2 e0 hw0 n0`]);
    const id = full.sessionId;

    // The fetcher moved on in partition 0 and says so; nothing is new anywhere: an empty answer.
    const quiet = await fetch({ version, sessionId: id, epoch: 1, partitions: [{ topic: t, partition: 0, offset: 2 }] });
    expect(quiet).toMatchObject({ errorCode: ErrorCode.NONE, sessionId: id });
    expect(summary(quiet)).toEqual([]);

    // Records in partition 1, which the request does not list: its offset (0) comes from the session.
    await produce(t, 1, 3);
    const news = await fetch({ version, sessionId: id, epoch: 2 });
    expect(summary(news)).toEqual([`${t}-1 e0 hw3 n3`]);
    // The fetcher did not say it moved in partition 1, so it is read from 0 again; partition 0 (at 2) is not.
    const again = await fetch({ version, sessionId: id, epoch: 3 });
    expect(summary(again)).toEqual([`${t}-1 e0 hw3 n3`]);
    // Partition 0 at an offset it has data for is sent again (the whole batch holding offset 1).
    const back = await fetch({ version, sessionId: id, epoch: 4, partitions: [{ topic: t, partition: 0, offset: 1 }, { topic: t, partition: 1, offset: 3 }] });
    expect(summary(back)).toEqual([`${t}-0 e0 hw2 n2`]);

    // A forgotten partition is no longer read, however much it changes.
    const forget = await fetch({ version, sessionId: id, epoch: 5, forgotten: [{ topic: t, partitions: [1] }], partitions: [{ topic: t, partition: 0, offset: 2 }] });
    expect(summary(forget)).toEqual([]);
    await produce(t, 1, 1);
    await produce(t, 2, 1);
    const afterForget = await fetch({ version, sessionId: id, epoch: 6 });
    expect(summary(afterForget)).toEqual([`${t}-2 e0 hw1 n1`]);

    // FINAL closes the session and is answered in full over what it lists, without a session.
    const final = await fetch({ version, sessionId: id, epoch: -1, partitions: [{ topic: t, partition: 2, offset: 0 }] });
    expect(final.sessionId).toBe(0);
    expect(summary(final)).toEqual([`${t}-2 e0 hw1 n1`]);
    const gone = await fetch({ version, sessionId: id, epoch: 7 });
    expect(gone).toMatchObject({ errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND, sessionId: 0, responses: [] });
  }, TIMEOUT);

  test("session errors: unknown id, wrong epoch, id 0 with a positive epoch", async () => {
    const topic = `${t}-errors`;
    await createTopic(topic, 1);
    const full = await fetch({ version, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    const id = full.sessionId;
    expect(id).toBeGreaterThan(0);
    const unknown = await fetch({ version, sessionId: id === 1 ? 2 : id - 1, epoch: 1 });
    expect(unknown).toMatchObject({ errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND, sessionId: 0, responses: [] });
    const badEpoch = await fetch({ version, sessionId: id, epoch: 5 });
    expect(badEpoch).toMatchObject({ errorCode: ErrorCode.INVALID_FETCH_SESSION_EPOCH, sessionId: 0, responses: [] });
    const zero = await fetch({ version, sessionId: 0, epoch: 3 });
    expect(zero).toMatchObject({ errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND, sessionId: 0, responses: [] });
    // The session survived the errors: its expected epoch is still 1.
    expect((await fetch({ version, sessionId: id, epoch: 1 })).errorCode).toBe(ErrorCode.NONE);
    // A full request naming the session replaces it with a new one.
    const replaced = await fetch({ version, sessionId: id, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    expect(replaced.sessionId).toBeGreaterThan(0);
    expect(replaced.sessionId).not.toBe(id);
    expect((await fetch({ version, sessionId: id, epoch: 2 })).errorCode).toBe(ErrorCode.FETCH_SESSION_ID_NOT_FOUND);
  }, TIMEOUT);

  test("an incremental request long-polls on the session's partitions, listed or not", async () => {
    const topic = `${t}-wait`;
    await createTopic(topic, 2);
    const full = await fetch({ version, epoch: 0, partitions: [0, 1].map((partition) => ({ topic, partition, offset: 0 })) });
    const waiting = fetch({ version, sessionId: full.sessionId, epoch: 1, minBytes: 1, maxWaitMs: 20_000 });
    const producer = await WireClient.connect(port);
    try {
      const res = await producer.request(0, 9, {
        transactionalId: null,
        acks: -1,
        timeoutMs: 30_000,
        topicData: [{ name: topic, partitionData: [{ index: 1, records: simpleBatch(1) }] }],
      });
      expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    } finally {
      producer.close();
    }
    expect(summary(await waiting)).toEqual([`${topic}-1 e0 hw1 n1`]);
  }, TIMEOUT);
});

describe("topic ids and names", () => {
  test("a session made by name refuses a request by id, and one made by id a request by name", async () => {
    const topic = "fs-ids";
    await createTopic(topic, 1);
    const byName = await fetch({ version: 12, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    const byId = await fetch({ version: 13, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    expect(byName.sessionId).toBeGreaterThan(0);
    expect(byId.sessionId).toBeGreaterThan(0);
    expect(await fetch({ version: 13, sessionId: byName.sessionId, epoch: 1 })).toMatchObject({
      errorCode: ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
      sessionId: 0,
      responses: [],
    });
    expect((await fetch({ version: 12, sessionId: byId.sessionId, epoch: 1 })).errorCode).toBe(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR);
    // The refused request did not advance either session.
    expect((await fetch({ version: 12, sessionId: byName.sessionId, epoch: 1 })).errorCode).toBe(ErrorCode.NONE);
    expect((await fetch({ version: 13, sessionId: byId.sessionId, epoch: 1 })).errorCode).toBe(ErrorCode.NONE);
  }, TIMEOUT);

  test("a session may be used from another connection", async () => {
    const topic = "fs-other-connection";
    await createTopic(topic, 1);
    const full = await fetch({ version: 17, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    const other = await WireClient.connect(port);
    try {
      await produce(topic, 0, 2);
      expect(summary(await fetch({ version: 17, sessionId: full.sessionId, epoch: 1, via: other }))).toEqual([`${topic}-0 e0 hw2 n2`]);
    } finally {
      other.close();
    }
  }, TIMEOUT);

  bunkaOnly("a deleted topic's partitions answer UNKNOWN_TOPIC_ID in the session that names them by id", async () => {
    const topic = "fs-deleted";
    await createTopic(topic, 1);
    const full = await fetch({ version: 17, epoch: 0, partitions: [{ topic, partition: 0, offset: 0 }] });
    const res = await client.request(20, 6, { topics: [{ name: topic, topicId: ZERO_UUID }], timeoutMs: 10_000 });
    expect(res.responses[0].errorCode).toBe(ErrorCode.NONE);
    const after = await fetch({ version: 17, sessionId: full.sessionId, epoch: 1 });
    expect(summary(after)).toEqual([`${topic}-0 e${ErrorCode.UNKNOWN_TOPIC_ID} hw-1 n0`]);
    // Re-created under the same name, it has a new id: the session's old id still finds nothing.
    const oldId = topicIds.get(topic)!;
    await createTopic(topic, 1);
    const again = await fetch({ version: 17, sessionId: full.sessionId, epoch: 2 });
    expect(again.responses).toHaveLength(1);
    expect(again.responses[0].topicId).toBe(oldId);
    expect(again.responses[0].partitions.map((p: any) => p.errorCode)).toEqual([ErrorCode.UNKNOWN_TOPIC_ID]);
  }, TIMEOUT);
});

describe("bunka's cache", () => {
  bunkaOnly("max.incremental.fetch.session.cache.slots=0 creates no session; full requests are answered with id 0", async () => {
    const none = await startTestBroker({ autoCreateTopicsEnable: true, maxIncrementalFetchSessionCacheSlots: 0 });
    const c = await WireClient.connect(none.port);
    try {
      const res = await c.request(1, 12, {
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 0,
        maxBytes: 1024,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: 0,
        topics: [],
        forgottenTopicsData: [],
        rackId: "",
      });
      expect(res).toMatchObject({ errorCode: ErrorCode.NONE, sessionId: 0 });
      expect(none.broker.services.fetchSessions.stats()).toMatchObject({ sessions: 0, sessionlessRequests: 1 });
    } finally {
      c.close();
      await none.stop();
    }
  }, TIMEOUT);

  bunkaOnly("the session cache counts what it serves", async () => {
    const stats = bunka!.broker.services.fetchSessions.stats();
    expect(stats.sessions).toBeGreaterThan(0);
    expect(stats.partitions).toBeGreaterThan(0);
    expect(stats.incrementalRequests).toBeGreaterThan(0);
    expect(stats.sessionErrors).toBeGreaterThan(0);
  });
});
