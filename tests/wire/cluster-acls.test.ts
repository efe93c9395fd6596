/**
 * Two in-process brokers on one data directory sharing a real etcd's metadata gate and feeds, with
 * StandardAuthorizer on: an ACL created with CreateAcls on one broker decides on the other at once, a
 * deletion on the other reaches the first, and two creates racing on the two brokers both survive (each
 * reads the file again under the gate before it writes).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startClusterMetadata, type ClusterMetadata } from "../../src/broker/metadata-mutations.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { EtcdServer } from "../support/etcd.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { waitUntil } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

let etcd: EtcdServer;
let etcdClient: EtcdClient;
let dataDir: string;
const brokers: TestBroker[] = [];
const clients: WireClient[] = [];
const gates: ClusterMetadata[] = [];

const anyFilter = { resourceTypeFilter: Res.ANY, resourceNameFilter: null, patternTypeFilter: Pat.ANY, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY };
const creation = (resourceName: string, operation: number, permissionType: number = Perm.ALLOW) => ({
  resourceType: Res.TOPIC,
  resourceName,
  resourcePatternType: Pat.LITERAL,
  principal: "User:alice",
  host: "*",
  operation,
  permissionType,
});

beforeAll(async () => {
  etcd = await EtcdServer.start();
  etcdClient = new EtcdClient({ endpoints: etcd.endpoint });
  dataDir = mkdtempSync(join(tmpdir(), "bunka-cluster-acls-"));
  for (const brokerId of [1, 2]) {
    const broker = await startTestBroker({ dataDir, brokerId, authorizerClassName: STANDARD_AUTHORIZER_CLASS, superUsers: ["User:ANONYMOUS"] }, { cleaner: false, keepDataDir: true });
    brokers.push(broker);
    const lease = await etcdClient.leaseGrant(30);
    gates.push(await startClusterMetadata({ client: etcdClient, clusterId: "cluster-acls", lease: () => ({ id: lease.id, valid: true }), services: broker.broker.services }));
    clients.push(await WireClient.connect(broker.port));
  }
});

afterAll(async () => {
  for (const client of clients) client.close();
  for (const gate of gates) await gate.close();
  for (const broker of brokers) await broker.stop();
  await etcd?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const alice = { connection: { id: 0, remoteAddress: "10.0.0.1", close() {}, security: { listenerName: "PLAINTEXT", securityProtocol: "PLAINTEXT" as const, principal: "User:alice", authenticated: true } } };
const aliceMay = (broker: TestBroker, operation: number, topic: string) =>
  broker.broker.services.authorizer.allows({ ...alice, header: undefined as never, apiVersion: 0 }, operation, Res.TOPIC, topic);

test("an ACL created on broker 1 decides on broker 2 at once; a deletion on broker 2 reaches broker 1", async () => {
  const created = await clients[0]!.request(30, 3, { creations: [creation("t", Op.READ)] });
  expect(created.results[0].errorCode).toBe(ErrorCode.NONE);
  await waitUntil(() => aliceMay(brokers[1]!, Op.READ, "t"), "the ACL on the other broker", 10_000);
  const described = await clients[1]!.request(29, 3, anyFilter);
  expect(described.resources).toMatchObject([{ resourceName: "t", acls: [{ principal: "User:alice", operation: Op.READ }] }]);

  const deleted = await clients[1]!.request(31, 3, { filters: [{ ...anyFilter, resourceNameFilter: "t" }] });
  expect(deleted.filterResults[0].matchingAcls.length).toBe(1);
  await waitUntil(() => !aliceMay(brokers[0]!, Op.READ, "t"), "the deletion on the other broker", 10_000);
  expect((await clients[0]!.request(29, 3, anyFilter)).resources).toEqual([]);
});

test("creates racing on both brokers are serialized by the gate: both survive", async () => {
  const [a, b] = await Promise.all([
    clients[0]!.request(30, 3, { creations: [creation("x", Op.WRITE)] }),
    clients[1]!.request(30, 3, { creations: [creation("y", Op.WRITE)] }),
  ]);
  expect([a.results[0].errorCode, b.results[0].errorCode]).toEqual([ErrorCode.NONE, ErrorCode.NONE]);
  for (const broker of brokers) {
    await waitUntil(() => aliceMay(broker, Op.WRITE, "x") && aliceMay(broker, Op.WRITE, "y"), `both ACLs on broker ${broker.broker.services.config.brokerId}`, 10_000);
  }
  expect(((await clients[0]!.request(29, 3, anyFilter)).resources as { resourceName: string }[]).map((r) => r.resourceName).sort()).toEqual(["x", "y"]);
});

test("a change whose announcement was lost is kept: the next change reads the file again under the gate", async () => {
  // Broker 1 stops announcing (an etcd outage for its puts, say); its change is durable all the same.
  brokers[0]!.broker.services.authorizer.useAnnouncer(undefined);
  expect((await clients[0]!.request(30, 3, { creations: [creation("silent", Op.READ)] })).results[0].errorCode).toBe(ErrorCode.NONE);
  expect(aliceMay(brokers[1]!, Op.READ, "silent")).toBe(false);
  expect((await clients[1]!.request(30, 3, { creations: [creation("z", Op.READ)] })).results[0].errorCode).toBe(ErrorCode.NONE);
  expect(aliceMay(brokers[1]!, Op.READ, "silent")).toBe(true);
  const names = ((await clients[1]!.request(29, 3, anyFilter)).resources as { resourceName: string }[]).map((r) => r.resourceName).sort();
  expect(names).toEqual(["silent", "x", "y", "z"]);
});
