/**
 * A transactional batch verified with a remote coordinator (broker/remote-txn-verifier.ts) when the
 * coordinator has StandardAuthorizer on: the peer's AddPartitionsToTxn v4 verifyOnly arrives as
 * User:ANONYMOUS from 127.0.0.1 and needs CLUSTER_ACTION. Without it the leader refuses the batch
 * retriably (NOT_ENOUGH_REPLICAS, nothing appended); with the host-filtered grant the README describes,
 * the batch is verified. Two in-process brokers, the coordinator A's ownership faked as the id's owner.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { RemoteTxnVerifier } from "../../src/broker/remote-txn-verifier.ts";
import type { Ownership } from "../../src/cluster/ownership.ts";
import { PeerClients } from "../../src/cluster/peer-client.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { type AclBinding, AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import type { ProduceRequest } from "../../src/protocol/generated/produce-request.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TXN_ID = "peer-tx";
let a: TestBroker;
let b: TestBroker;
let toA: WireClient;
let peers: PeerClients;
let verifier: RemoteTxnVerifier;

const grant = (resourceType: number, resourceName: string, operation: number, host = "*"): AclBinding => ({
  resourceType,
  resourceName,
  patternType: Pat.LITERAL,
  principal: "User:ANONYMOUS",
  host,
  operation,
  permissionType: Perm.ALLOW,
});

function fakeTxnOwner(broker: TestBroker, owner: number): void {
  const ownership = broker.broker.services.ownership as Ownership;
  const self = ownership.selfId;
  const standing = ownership.standing.bind(ownership);
  Object.assign(ownership, {
    slotOwner: (kind: "txn" | "group") => (kind === "txn" ? owner : self),
    standing: (resource: Parameters<Ownership["standing"]>[0]) => (resource.kind === "txn" && owner !== self ? { state: "elsewhere", brokerId: owner } : standing(resource)),
  });
}

beforeAll(async () => {
  a = await startTestBroker({ brokerId: 0, authorizerClassName: STANDARD_AUTHORIZER_CLASS }, { groups: { sweep: false } });
  b = await startTestBroker({ brokerId: 1 }, { groups: { sweep: false } });
  fakeTxnOwner(a, 0);
  fakeTxnOwner(b, 0);
  // Clients may do everything on topics and transactional ids, but nothing on the cluster.
  await a.broker.services.authorizer.create([grant(Res.TOPIC, "*", Op.ALL), grant(Res.TRANSACTIONAL_ID, "*", Op.ALL), grant(Res.CLUSTER, "kafka-cluster", Op.CREATE)]);
  toA = await WireClient.connect(a.port);
  const created = await toA.request(19, 7, { topics: [{ name: "orders", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1000, validateOnly: false });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  peers = new PeerClients({ resolve: (id) => (id === 0 ? { host: "127.0.0.1", port: a.port } : undefined), clientId: "bunka-broker-1", log: silentLogger, requestTimeoutMs: 2_000 });
  verifier = new RemoteTxnVerifier({ ownership: b.broker.services.ownership, peers, local: b.broker.services.txn.verifier, log: silentLogger });
});

afterAll(async () => {
  peers?.close();
  toA?.close();
  await a?.stop();
  await b?.stop();
});

test("the peer's verification needs CLUSTER_ACTION on the coordinator; granted from the brokers' host, it is verified", async () => {
  const init = await toA.request(22, 4, { transactionalId: TXN_ID, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
  expect(init.errorCode).toBe(ErrorCode.NONE);
  const added = await toA.request(24, 3, { v3AndBelowTransactionalId: TXN_ID, v3AndBelowProducerId: init.producerId, v3AndBelowProducerEpoch: init.producerEpoch, v3AndBelowTopics: [{ name: "orders", partitions: [0] }] });
  expect(added.resultsByTopicV3AndBelow[0].resultsByPartition[0].partitionErrorCode).toBe(ErrorCode.NONE);
  const request: ProduceRequest = {
    transactionalId: TXN_ID,
    acks: -1,
    timeoutMs: 5_000,
    topicData: [{ name: "orders", partitionData: [{ index: 0, records: buildBatch({ records: [{ value: "v" }], producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: 0, transactional: true }) }] }],
  };
  const refused = await verifier.prepare(request);
  expect(refused.get("orders-0")?.errorCode).toBe(ErrorCode.NOT_ENOUGH_REPLICAS);

  // Another host's grant does not count; the brokers' own does.
  await a.broker.services.authorizer.create([grant(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, "10.9.9.9")]);
  expect((await verifier.prepare(request)).get("orders-0")?.errorCode).toBe(ErrorCode.NOT_ENOUGH_REPLICAS);
  await a.broker.services.authorizer.create([grant(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, "127.0.0.1")]);
  expect((await verifier.prepare(request)).size).toBe(0);
});
