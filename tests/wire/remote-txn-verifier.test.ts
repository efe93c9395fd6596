/**
 * A transactional batch verified with a remote coordinator: two in-process brokers, A the transaction
 * coordinator of the id's slot, B the leader of the partitions (each one's Ownership faked to say so).
 * B asks A over the Kafka protocol (AddPartitionsToTxn v4 verifyOnly, cluster/peer-client.ts) before it
 * appends, caches positive answers until the producer's marker or fence arrives, and refuses with Apache's
 * errors: in the transaction (appended), not added (INVALID_TXN_STATE), a fenced epoch
 * (INVALID_PRODUCER_EPOCH), an unknown producer (INVALID_PRODUCER_ID_MAPPING), the coordinator
 * unreachable (NOT_ENOUGH_REPLICAS, retriable, nothing appended).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RemoteTxnVerifier, type PeerRequester } from "../../src/broker/remote-txn-verifier.ts";
import { slotOf, type Ownership } from "../../src/cluster/ownership.ts";
import { PeerClients, PeerRequestError } from "../../src/cluster/peer-client.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import type { ProduceRequest } from "../../src/protocol/generated/produce-request.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { SwappableVerifier } from "../support/swappable-verifier.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TXN_ID = "remote-tx";
let a: TestBroker;
let b: TestBroker;
let toA: WireClient;
let toB: WireClient;
let peers: PeerClients;
let asked: number;
let verifier: RemoteTxnVerifier;
let coordinatorPort: () => number;
/** B's partitions ask the RemoteTxnVerifier built below, once it is. */
const verifiers = new SwappableVerifier();

/** Makes `broker`'s ownership say that transaction slots are owned by `owner` (and the rest by itself). */
function fakeTxnOwner(broker: TestBroker, owner: number): void {
  const ownership = broker.broker.services.ownership as Ownership;
  const self = ownership.selfId;
  const standing = ownership.standing.bind(ownership);
  Object.assign(ownership, {
    slotOwner: (kind: "txn" | "group") => (kind === "txn" ? owner : self),
    standing: (resource: Parameters<Ownership["standing"]>[0]) => (resource.kind === "txn" && owner !== self ? { state: "elsewhere", brokerId: owner } : standing(resource)),
  });
}

async function createTopic(c: WireClient, name: string, partitions: number): Promise<void> {
  const res = await c.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

beforeAll(async () => {
  a = await startTestBroker({ brokerId: 0 }, { groups: { sweep: false } });
  b = await startTestBroker({ brokerId: 1 }, { groups: { sweep: false }, transactionVerifier: verifiers.wrap });
  fakeTxnOwner(a, 0);
  fakeTxnOwner(b, 0);
  toA = await WireClient.connect(a.port);
  toB = await WireClient.connect(b.port);
  await createTopic(toA, "orders", 3);
  await createTopic(toB, "orders", 3);
  coordinatorPort = () => a.port;
  peers = new PeerClients({ resolve: (id) => (id === 0 ? { host: "127.0.0.1", port: coordinatorPort() } : undefined), clientId: "bunka-broker-1", log: silentLogger, requestTimeoutMs: 2_000 });
  const counting: PeerRequester = {
    request: (brokerId, apiKey, version, body) => {
      asked += 1;
      return peers.request(brokerId, apiKey, version, body);
    },
  };
  verifier = new RemoteTxnVerifier({ ownership: b.broker.services.ownership, peers: counting, local: b.broker.services.txn.verifier, log: silentLogger });
  verifiers.use(verifier.verifier);
});

afterAll(async () => {
  peers?.close();
  toA?.close();
  toB?.close();
  await a?.stop();
  await b?.stop();
});

/** InitProducerId on A; retried on CONCURRENT_TRANSACTIONS while the previous session's transaction is aborted, as clients do. */
async function initProducer(): Promise<{ producerId: number; producerEpoch: number }> {
  for (let attempt = 0; ; attempt++) {
    const res = await toA.request(22, 4, { transactionalId: TXN_ID, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    if (res.errorCode === ErrorCode.CONCURRENT_TRANSACTIONS && attempt < 50) {
      await a.broker.services.txn.settled(TXN_ID);
      continue;
    }
    expect(res.errorCode).toBe(ErrorCode.NONE);
    return { producerId: res.producerId, producerEpoch: res.producerEpoch };
  }
}

async function addPartitions(p: { producerId: number; producerEpoch: number }, partitions: number[]): Promise<void> {
  const res = await toA.request(24, 3, { v3AndBelowTransactionalId: TXN_ID, v3AndBelowProducerId: p.producerId, v3AndBelowProducerEpoch: p.producerEpoch, v3AndBelowTopics: [{ name: "orders", partitions }] });
  for (const t of res.resultsByTopicV3AndBelow) for (const r of t.resultsByPartition) expect(r.partitionErrorCode).toBe(ErrorCode.NONE);
}

const sequences = new Map<string, number>();

function produceRequest(p: { producerId: number; producerEpoch: number }, partition: number, value: string): ProduceRequest {
  const key = `${p.producerId}-${p.producerEpoch}-${partition}`;
  const baseSequence = sequences.get(key) ?? 0;
  const records = buildBatch({ records: [{ value }], producerId: p.producerId, producerEpoch: p.producerEpoch, baseSequence, transactional: true });
  return { transactionalId: TXN_ID, acks: -1, timeoutMs: 5_000, topicData: [{ name: "orders", partitionData: [{ index: partition, records }] }] };
}

/** What the integrated Produce handler does: `prepare`, then append what it did not refuse. */
async function produceOnB(request: ProduceRequest): Promise<{ errorCode: number; baseOffset?: number; refusedBeforeAppend: boolean }> {
  const refused = await verifier.prepare(request);
  const data = request.topicData[0]!.partitionData[0]!;
  const own = refused.get(`orders-${data.index}`);
  if (own !== undefined) return { errorCode: own.errorCode, refusedBeforeAppend: true };
  const res = await toB.request(0, 9, request);
  const answer = res.responses[0].partitionResponses[0];
  if (answer.errorCode === ErrorCode.NONE) {
    const view = new DataView(data.records!.buffer, data.records!.byteOffset);
    const key = `${view.getBigInt64(43)}-${view.getInt16(51)}-${data.index}`;
    sequences.set(key, (sequences.get(key) ?? 0) + 1);
  }
  return { errorCode: answer.errorCode, baseOffset: Number(answer.baseOffset), refusedBeforeAppend: false };
}

describe("transactional batches verified with a remote coordinator", () => {
  test("the id's slot is A's on both brokers; B coordinates nothing of it", () => {
    expect(b.broker.services.ownership.slotOwner("txn", slotOf(TXN_ID))).toBe(0);
    expect(b.broker.services.ownership.standing({ kind: "txn", slot: slotOf(TXN_ID) }).state).toBe("elsewhere");
  });

  test("in the transaction: verified once with A, appended on B, the answer cached until the producer's marker", async () => {
    const p = await initProducer();
    await addPartitions(p, [0]);
    asked = 0;
    expect(await produceOnB(produceRequest(p, 0, "one"))).toMatchObject({ errorCode: ErrorCode.NONE, refusedBeforeAppend: false });
    expect(asked).toBe(1);
    // Cached: the next batch of the transaction is not asked again.
    expect(await produceOnB(produceRequest(p, 0, "two"))).toMatchObject({ errorCode: ErrorCode.NONE });
    expect(asked).toBe(1);
    expect(verifier.cachedProducers).toBe(1);
    // Without `prepare` the local coordinator's view answers: B does not know the producer.
    const without = await toB.request(0, 9, produceRequest({ producerId: p.producerId + 1_000, producerEpoch: 0 }, 0, "stray"));
    expect(without.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.INVALID_PRODUCER_ID_MAPPING);
    // The producer's marker arrives at B: the transaction ended here, the next batch is asked again.
    verifier.onMarker(p.producerId, p.producerEpoch);
    expect(verifier.cachedProducers).toBe(0);
    const res = await toA.request(26, 3, { transactionalId: TXN_ID, producerId: p.producerId, producerEpoch: p.producerEpoch, committed: true });
    expect(res.errorCode).toBe(ErrorCode.NONE);
    await a.broker.services.txn.settled(TXN_ID);
    // Complete on A: a batch after it is not in any transaction.
    expect(await produceOnB(produceRequest(p, 0, "late"))).toMatchObject({ errorCode: ErrorCode.INVALID_TXN_STATE });
    expect(asked).toBe(2);
  });

  test("a partition not added: INVALID_TXN_STATE from B, nothing appended", async () => {
    const p = await initProducer();
    await addPartitions(p, [0]);
    expect(await produceOnB(produceRequest(p, 1, "not added"))).toMatchObject({ errorCode: ErrorCode.INVALID_TXN_STATE, refusedBeforeAppend: false });
    expect(verifier.verifier.verifyBatch(p.producerId, p.producerEpoch, "orders", 1)).toBe("not-in-transaction");
  });

  test("an epoch fenced by a newer session: INVALID_PRODUCER_EPOCH; a cached answer of the old epoch goes with the fence", async () => {
    const old = await initProducer();
    await addPartitions(old, [2]);
    expect(await produceOnB(produceRequest(old, 2, "before the bump"))).toMatchObject({ errorCode: ErrorCode.NONE });
    const fresh = await initProducer();
    expect(fresh.producerId).toBe(old.producerId);
    expect(fresh.producerEpoch).toBeGreaterThan(old.producerEpoch);
    // Until the fence reaches B, B trusts what A said for the old epoch (as Apache's verification guard does
    // until the partition learns of the bump); the fence clears it and A is asked again.
    verifier.onFence(old.producerId, fresh.producerEpoch);
    expect(await produceOnB(produceRequest(old, 2, "zombie"))).toMatchObject({ errorCode: ErrorCode.INVALID_PRODUCER_EPOCH });
    expect(verifier.verifier.verifyBatch(old.producerId, old.producerEpoch, "orders", 2)).toBe("fenced");
    // An unknown producer id.
    expect(await produceOnB(produceRequest({ producerId: old.producerId + 77_777, producerEpoch: 0 }, 2, "nobody"))).toMatchObject({ errorCode: ErrorCode.INVALID_PRODUCER_ID_MAPPING });
  });

  test("the coordinator unreachable: NOT_ENOUGH_REPLICAS before the append, retriable; verified again once it answers", async () => {
    const p = await initProducer();
    await addPartitions(p, [1]);
    const closedPort = (() => {
      const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const port = s.port;
      s.stop(true);
      return port;
    })();
    peers.close();
    peers = new PeerClients({ resolve: (id) => (id === 0 ? { host: "127.0.0.1", port: coordinatorPort() } : undefined), clientId: "bunka-broker-1", log: silentLogger, requestTimeoutMs: 2_000 });
    coordinatorPort = () => closedPort;
    const before = await toB.request(2, 1, { replicaId: -1, topics: [{ name: "orders", partitions: [{ partitionIndex: 1, timestamp: -1 }] }] });
    expect(await produceOnB(produceRequest(p, 1, "unverifiable"))).toMatchObject({ errorCode: ErrorCode.NOT_ENOUGH_REPLICAS, refusedBeforeAppend: true });
    const after = await toB.request(2, 1, { replicaId: -1, topics: [{ name: "orders", partitions: [{ partitionIndex: 1, timestamp: -1 }] }] });
    expect(after.topics[0].partitions[0].offset).toBe(before.topics[0].partitions[0].offset);
    coordinatorPort = () => a.port;
    expect(await produceOnB(produceRequest(p, 1, "verified"))).toMatchObject({ errorCode: ErrorCode.NONE });
  });

  test("TxnOffsetCommit on B, the group's coordinator, verified with A: not added, added, fenced, unreachable", async () => {
    const group = "remote-group";
    b.broker.services.remoteTxnVerifier = verifier;
    try {
      const p = await initProducer();
      await addPartitions(p, [0]);
      const commitOnB = async (ref: { producerId: number; producerEpoch: number }) => {
        const res = await toB.request(28, 3, {
          transactionalId: TXN_ID,
          groupId: group,
          producerId: ref.producerId,
          producerEpoch: ref.producerEpoch,
          generationId: -1,
          memberId: "",
          groupInstanceId: null,
          topics: [{ name: "orders", partitions: [{ partitionIndex: 0, committedOffset: 5, committedLeaderEpoch: -1, committedMetadata: null }] }],
        });
        return res.topics[0].partitions[0].errorCode as number;
      };
      // Not added with AddOffsetsToTxn yet: A says so (INVALID_TXN_STATE before v4), nothing staged on B.
      expect(await commitOnB(p)).toBe(ErrorCode.INVALID_TXN_STATE);
      const added = await toA.request(25, 3, { transactionalId: TXN_ID, producerId: p.producerId, producerEpoch: p.producerEpoch, groupId: group });
      expect(added.errorCode).toBe(ErrorCode.NONE);
      expect(await commitOnB(p)).toBe(ErrorCode.NONE);
      // Staged on B, unstable until the transaction ends.
      const fetched = await toB.request(9, 8, { groups: [{ groupId: group, memberId: null, memberEpoch: -1, topics: [{ name: "orders", partitionIndexes: [0] }] }], requireStable: true });
      expect(fetched.groups[0].topics[0].partitions[0].errorCode).toBe(ErrorCode.UNSTABLE_OFFSET_COMMIT);
      // Another epoch of the producer id: INVALID_PRODUCER_EPOCH (TxnOffsetCommit never answers PRODUCER_FENCED).
      expect(await commitOnB({ producerId: p.producerId, producerEpoch: p.producerEpoch - 1 })).toBe(ErrorCode.INVALID_PRODUCER_EPOCH);
      // A unreachable: retriable, the client finds the coordinator again.
      const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const closedPort = closed.port;
      closed.stop(true);
      peers.close();
      peers = new PeerClients({ resolve: (id) => (id === 0 ? { host: "127.0.0.1", port: coordinatorPort() } : undefined), clientId: "bunka-broker-1", log: silentLogger, requestTimeoutMs: 2_000 });
      coordinatorPort = () => closedPort;
      expect(await commitOnB(p)).toBe(ErrorCode.COORDINATOR_NOT_AVAILABLE);
      coordinatorPort = () => a.port;
      // The verification answered for the group's slot on A itself as well (the form B sends).
      const direct = await toA.request(24, 4, {
        transactions: [{ transactionalId: TXN_ID, producerId: p.producerId, producerEpoch: p.producerEpoch, verifyOnly: true, topics: [{ name: "__consumer_offsets", partitions: [slotOf(group), (slotOf(group) + 1) % 50] }] }],
      });
      const codes = direct.resultsByTransaction[0].topicResults[0].resultsByPartition.map((r: { partitionErrorCode: number }) => r.partitionErrorCode);
      expect(codes).toEqual([ErrorCode.NONE, ErrorCode.TRANSACTION_ABORTABLE]);
    } finally {
      delete b.broker.services.remoteTxnVerifier;
    }
  });

  test("the peer client: a request times out and closes the connection, the next one reconnects", async () => {
    // A listener that accepts and never answers.
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const client = new PeerClients({ resolve: () => ({ host: "127.0.0.1", port: silent.port }), clientId: "t", log: silentLogger, requestTimeoutMs: 100 });
    const error = await client.request(5, 18, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PeerRequestError);
    expect((error as PeerRequestError).reason).toBe("timeout");
    expect(client.connectionCount).toBe(0);
    silent.stop(true);
    const unknown = await new PeerClients({ resolve: () => undefined, clientId: "t", log: silentLogger }).request(9, 18, 3, {}).catch((e: unknown) => e);
    expect((unknown as PeerRequestError).reason).toBe("unknown-broker");
    // Pipelined: many requests in flight on one connection, answered in order.
    const answers = await Promise.all(Array.from({ length: 20 }, () => peers.request<{ errorCode: number }>(0, 18, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" })));
    expect(answers.every((x) => x.errorCode === ErrorCode.NONE)).toBe(true);
    expect(peers.connectionCount).toBe(1);
    client.close();
  });
});
