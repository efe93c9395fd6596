/**
 * Fetch within the listener's bounds on response bytes held (docs/architecture.md, "Request path"), on an
 * in-process broker with small bounds: a socket that pipelines large Fetches and never reads holds about
 * its bound, not max_bytes per request; a client on another connection produces and fetches meanwhile,
 * a single Fetch is cut to the connection's room but still returns at least one batch, the broker-wide
 * bound leaves a reading client an equal share, and closing the socket gives everything back.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { waitUntil } from "../support/wait.ts";
import { singlePartitionFetch } from "../support/fetch-request.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
const MiB = 1024 * 1024;
/**
 * Larger than what the loopback socket buffers of both ends absorb (a few MiB), so that most of a hog's
 * answers stay in the broker, where they are counted.
 */
const PER_CONNECTION_BYTES = 24 * MiB;
const BROKER_BYTES = 32 * MiB;
/** The kernel's share of a non-reading connection's answers, at most (loopback buffers of both ends). */
const KERNEL_BUFFERS_BYTES_MAX = 12 * MiB;
const TOPIC = "held-bytes";
/** About 1 MiB per batch, 16 records of 60 KiB: more than any bound here. */
const BATCHES = 40;
const FETCH_VERSION = 12;

let broker: TestBroker;
let client: WireClient;
let batchBytes = 0;
const hogs = new Set<Bun.Socket<undefined>>();

beforeAll(async () => {
  broker = await startTestBroker({
    autoCreateTopicsEnable: false,
    maxHeldResponseBytesPerConnection: PER_CONNECTION_BYTES,
    maxHeldResponseBytes: BROKER_BYTES,
  });
  client = await WireClient.connect(broker.port);
  await createTopic(client, TOPIC, 1);
  for (let i = 0; i < BATCHES; i++) await produceBatch(client);
}, TIMEOUT);

afterAll(async () => {
  // A failed test leaves its non-reading sockets open: the listener's close would wait for them.
  for (const socket of hogs) socket.end();
  client?.close();
  await broker?.stop();
});

async function createTopic(via: WireClient, name: string, partitions: number): Promise<void> {
  const created = await via.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
}

async function produceBatch(via: WireClient, topic = TOPIC, partition = 0): Promise<number> {
  const value = new Uint8Array(60 * 1024).fill(0x61);
  const records = buildBatch({ records: Array.from({ length: 16 }, () => ({ value, timestampMs: Date.now() })) });
  batchBytes = records.byteLength;
  const res = await via.request(0, 9, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records }] }],
  });
  const answer = res.responses[0].partitionResponses[0];
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return answer.baseOffset;
}

function fetchBody(maxBytes: number, fetchOffset = 0) {
  return singlePartitionFetch(TOPIC, 0, fetchOffset, maxBytes);
}

async function fetchRecordsBytes(via: WireClient, maxBytes: number, fetchOffset = 0): Promise<number> {
  const res = await via.request(1, FETCH_VERSION, fetchBody(maxBytes, fetchOffset));
  const partition = res.responses[0].partitions[0];
  expect(partition.errorCode).toBe(ErrorCode.NONE);
  return partition.records?.length ?? 0;
}

/** A raw socket that sends `count` pipelined 50 MiB Fetches and never reads an answer. */
async function nonReadingFetcher(count: number): Promise<Bun.Socket<undefined>> {
  const socket = await Bun.connect({ hostname: "127.0.0.1", port: broker.port, socket: { data() {}, close() {}, error() {} } });
  socket.pause();
  hogs.add(socket);
  const frames = Array.from({ length: count }, (_, i) => client.encodeRequest(1, FETCH_VERSION, fetchBody(50 * MiB), 10_000 + i));
  const all = new Uint8Array(frames.reduce((n, f) => n + f.byteLength, 0));
  let at = 0;
  for (const f of frames) {
    all.set(f, at);
    at += f.byteLength;
  }
  expect(socket.write(all)).toBe(all.byteLength);
  return socket;
}

/** Stats of the listener's connections other than the test's own client, newest last. */
const othersStats = () => broker.listener.connectionStats().filter((s) => s.id !== 1);

/**
 * Whether the `index`th other connection answered all its fetches: nothing in flight, and output the
 * kernel did not take (before its frames are read, nothing is in flight either).
 */
const answeredAndStuck = (index: number) => {
  const stats = othersStats()[index];
  return stats !== undefined && stats.inFlight === 0 && stats.queuedOutputBytes > 0;
};

describe("response bytes held by Fetch", () => {
  test("a single Fetch is cut to the connection's room; a partition max below one batch still returns that batch", async () => {
    const bytes = await fetchRecordsBytes(client, 50 * MiB);
    expect(bytes).toBeGreaterThan(PER_CONNECTION_BYTES - batchBytes);
    expect(bytes).toBeLessThanOrEqual(PER_CONNECTION_BYTES);
    // A partition max below one batch: Kafka's rule, the first batch anyway.
    expect(await fetchRecordsBytes(client, 1024)).toBe(batchBytes);
    expect(broker.listener.heldResponseBytes()).toBe(0);
  });

  test(
    "what a partition's read did not use is given back, so the next partition of the same Fetch gets it",
    async () => {
      await createTopic(client, "held-bytes-two", 2);
      await produceBatch(client, "held-bytes-two", 0);
      for (let i = 0; i < 30; i++) await produceBatch(client, "held-bytes-two", 1);
      const partition = (index: number) => ({
        partition: index,
        currentLeaderEpoch: -1,
        fetchOffset: 0,
        lastFetchedEpoch: -1,
        logStartOffset: -1,
        partitionMaxBytes: 50 * MiB,
      });
      const res = await client.request(1, FETCH_VERSION, {
        ...fetchBody(50 * MiB),
        topics: [{ topic: "held-bytes-two", partitions: [partition(0), partition(1)] }],
      });
      const [p0, p1] = res.responses[0].partitions;
      // Partition 0 reserved the whole room and read one batch; partition 1 gets the rest of it.
      expect(p0.records.length).toBe(batchBytes);
      expect(p1.records.length).toBeGreaterThan(PER_CONNECTION_BYTES - 2 * batchBytes);
      expect(p0.records.length + p1.records.length).toBeLessThanOrEqual(PER_CONNECTION_BYTES);
    },
    TIMEOUT,
  );

  test(
    "a bound below one batch: a connection holding nothing else still gets a batch per Fetch, so a consumer progresses",
    async () => {
      const tiny = await startTestBroker({ autoCreateTopicsEnable: false, maxHeldResponseBytesPerConnection: 64 * 1024 });
      try {
        const tinyClient = await WireClient.connect(tiny.port);
        await createTopic(tinyClient, TOPIC, 1);
        for (let i = 0; i < 3; i++) await produceBatch(tinyClient);
        // A consumer's loop: every Fetch returns the next batch although none fits the bound.
        for (let offset = 0; offset < 3 * 16; offset += 16) {
          expect(await fetchRecordsBytes(tinyClient, 50 * MiB, offset)).toBe(batchBytes);
        }
        expect(tiny.listener.heldResponseBytes()).toBe(0);
        tinyClient.close();
      } finally {
        await tiny.stop();
      }
    },
    TIMEOUT,
  );

  test(
    "pipelined 50 MiB Fetches on a socket that never reads hold about the bound; another client is served; the close releases all",
    async () => {
      const hog = await nonReadingFetcher(50);
      // Every Fetch is answered (most without records, as there was no room), and the answers wait in
      // the output queue of a connection that reads nothing more.
      await waitUntil(() => answeredAndStuck(0), "the hog's fetches answered");
      const held = broker.listener.heldResponseBytes();
      // What the kernel did not take of one bound's worth, plus the small answers of the fetches that
      // found no room (50 x a few dozen bytes); without the bound, 50 x 40 MiB.
      expect(held).toBeGreaterThan(PER_CONNECTION_BYTES - KERNEL_BUFFERS_BYTES_MAX);
      expect(held).toBeLessThanOrEqual(PER_CONNECTION_BYTES + 64 * 1024);
      expect(othersStats()[0]!.pauseReason).toBe("output");

      // Another connection produces and fetches as usual, with its own room.
      const offset = await produceBatch(client);
      expect(await fetchRecordsBytes(client, 2 * MiB, offset)).toBe(batchBytes);
      expect(await fetchRecordsBytes(client, 2 * MiB)).toBeGreaterThan(MiB);
      expect(broker.listener.heldResponseBytes()).toBe(held);

      hog.end();
      await waitUntil(() => broker.listener.heldResponseBytes() === 0, "the hog's bytes released");
      expect(broker.listener.pausedConnections()).toEqual({ output: 0, "in-flight": 0, "connection-bytes": 0, "broker-bytes": 0 });
    },
    TIMEOUT,
  );

  test(
    "past the broker-wide bound, a connection holding nothing still gets an equal share of it",
    async () => {
      const first = await nonReadingFetcher(10);
      await waitUntil(() => answeredAndStuck(0), "the first hog answered");
      const second = await nonReadingFetcher(10);
      await waitUntil(() => answeredAndStuck(1), "the second hog answered");
      // The first got its bound (24 MiB of the 32); the second the larger of what was left and an equal
      // share (32 / 2 = 16 MiB), so the total may pass the bound. Each holds what the kernel did not take.
      const [a, b] = othersStats();
      expect(a!.heldResponseBytes).toBeGreaterThan(PER_CONNECTION_BYTES - KERNEL_BUFFERS_BYTES_MAX);
      expect(a!.heldResponseBytes).toBeLessThanOrEqual(PER_CONNECTION_BYTES + 64 * 1024);
      expect(b!.heldResponseBytes).toBeGreaterThan(BROKER_BYTES / 2 - KERNEL_BUFFERS_BYTES_MAX);
      expect(b!.heldResponseBytes).toBeLessThanOrEqual(BROKER_BYTES / 2 + 64 * 1024);

      // A reading client holding nothing gets the larger of what is left of the bound and an equal share
      // (three connections hold bytes while it reads): megabytes, not a single batch.
      const total = broker.listener.heldResponseBytes();
      const room = Math.max(BROKER_BYTES - total, BROKER_BYTES / 3);
      const bytes = await fetchRecordsBytes(client, 50 * MiB);
      expect(bytes).toBeGreaterThan(room - batchBytes);
      expect(bytes).toBeLessThanOrEqual(room);
      expect(broker.listener.heldResponseBytes()).toBe(total);

      first.end();
      second.end();
      await waitUntil(() => broker.listener.heldResponseBytes() === 0, "both hogs' bytes released");
    },
    TIMEOUT,
  );
});
