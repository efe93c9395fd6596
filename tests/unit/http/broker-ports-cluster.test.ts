/**
 * The side-port's cluster view, readiness and cluster metrics, from a real broker (in-memory Fs, manual
 * clock) with a fake cluster-mode status standing in for the etcd membership: single mode (one member,
 * no etcd, no lease) and cluster mode (members from the directory, the lease rendered as data, a lapsed
 * lease making /ready fail with the reason). Then through the app, as JSON.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createBroker, type Broker } from "../../../src/broker/broker.ts";
import { type BrokerConfig, defaultBrokerConfig } from "../../../src/broker/config.ts";
import { AclOperation, AclPermissionType, PatternType, ResourceType } from "../../../src/domain/security/acl.ts";
import type { RegisteredBroker } from "../../../src/cluster/broker-registry.ts";
import type { ClusterStatus, ClusterStatusSource } from "../../../src/cluster/cluster-member.ts";
import { createHttpApp } from "../../../src/http/app.ts";
import { BrokerQueryPorts } from "../../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../../src/http/metrics.ts";
import type { ClusterView } from "../../../src/http/ports.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const brokers: Broker[] = [];
afterEach(async () => {
  for (const b of brokers.splice(0)) await b.close();
});

function registered(brokerId: number, kafkaPort: number, httpPort: number | null): RegisteredBroker {
  return {
    brokerId,
    kafka: { host: "127.0.0.1", port: kafkaPort },
    http: httpPort === null ? null : { host: "127.0.0.1", port: httpPort },
    rack: null,
    leaseId: 7587880000000000000n + BigInt(brokerId),
    registeredRevision: 10n + BigInt(brokerId),
  };
}

class FakeCluster implements ClusterStatusSource {
  current: ClusterStatus = {
    endpoints: ["http://10.0.0.5:2379", "http://10.0.0.6:2379"],
    lease: { id: 7587880000000000001n, ttlSeconds: 9, validForMs: 6_500, valid: true, lapses: 0, lastError: undefined },
    members: [registered(1, 9092, 9644), registered(3, 9094, null)],
    problem: undefined,
    ownership: undefined,
  };
  status(): ClusterStatus {
    return this.current;
  }
}

async function setup(cluster?: FakeCluster, overrides: Partial<BrokerConfig> = {}) {
  const clock = new ManualClock();
  const config = { ...defaultBrokerConfig(), dataDir: "/data", brokerId: 1, listenPort: 0, httpPort: 0, ...overrides };
  const broker = await createBroker({
    config,
    fs: new MemoryFs(),
    clock,
    log: silentLogger,
    maintenance: false,
    ...(cluster === undefined ? {} : { liveBrokers: () => cluster.status().members.map((m) => ({ brokerId: m.brokerId, host: m.kafka.host, port: m.kafka.port, rack: m.rack })) }),
  });
  brokers.push(broker);
  broker.setAdvertisedListener("127.0.0.1", 9092);
  const ports = new BrokerQueryPorts({
    broker,
    metrics: new BrokerMetrics(),
    version: "0.0.0-test",
    nowMs: () => clock.nowMs(),
    startedAtMs: clock.nowMs(),
    ...(cluster === undefined ? {} : { cluster }),
  });
  ports.setListener({ connectionCount: () => 0 });
  return { broker, ports };
}

const metricLines = async (ports: BrokerQueryPorts) => (await ports.metrics()).split("\n").filter((l) => l.startsWith("bunka_cluster"));

describe("single mode", () => {
  test("mode single, no etcd, no lease, this broker as the one member with its side-port", async () => {
    const { ports } = await setup();
    ports.setHttpAddress("broker-1.example", 9644);
    const view = ports.cluster();
    expect(view).toMatchObject({ mode: "single", brokerId: 1, controllerId: 1, etcd: null, lease: null });
    expect(view.members).toEqual([{ brokerId: 1, kafka: { host: "127.0.0.1", port: 9092 }, http: { host: "broker-1.example", port: 9644 }, rack: null, self: true }]);
    expect(await ports.readiness()).toEqual({ ready: true });
    // One member, and no lease metrics: a lease that does not exist is neither valid nor lapsed.
    expect(await metricLines(ports)).toEqual(["bunka_cluster_members 1"]);
  });
});

describe("security", () => {
  test("by default: one PLAINTEXT listener, no authorizer, no SCRAM user, open reads", async () => {
    const { ports } = await setup();
    expect(ports.cluster().security).toEqual({
      listeners: [{ name: "PLAINTEXT", securityProtocol: "PLAINTEXT", saslMechanisms: null }],
      authorizer: { enabled: false, acls: 0, superUsers: [], allowEveryoneIfNoAclFound: false },
      scramUsers: [],
      sidePortReadsNeedToken: false,
    });
  });

  test("listeners with their protocols and SASL mechanisms, the authorizer's ACL count and super users, SCRAM user names and nothing secret", async () => {
    const { broker, ports } = await setup(undefined, {
      listeners: [
        { name: "CLIENT", host: "127.0.0.1", port: 0 },
        { name: "INTERNAL", host: "127.0.0.1", port: 0 },
      ],
      listenerSecurityProtocolMap: { CLIENT: "SASL_PLAINTEXT", INTERNAL: "PLAINTEXT" },
      interBrokerListenerName: "INTERNAL",
      saslEnabledMechanisms: ["SCRAM-SHA-512"],
      authorizerClassName: "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
      superUsers: ["User:admin"],
      httpReadsNeedToken: true,
    });
    const credential = { salt: new Uint8Array(16).fill(7), storedKey: new Uint8Array(64).fill(1), serverKey: new Uint8Array(64).fill(2), iterations: 4096 };
    await broker.services.scramCredentials.store.apply({ deletions: [], upsertions: [{ user: "bob", mechanism: "SCRAM-SHA-512", credential }, { user: "alice", mechanism: "SCRAM-SHA-512", credential }] });
    await broker.services.authorizer.create([
      { resourceType: ResourceType.TOPIC, resourceName: "orders", patternType: PatternType.LITERAL, principal: "User:alice", host: "*", operation: AclOperation.READ, permissionType: AclPermissionType.ALLOW },
    ]);
    const view = ports.cluster();
    expect(view.security).toEqual({
      listeners: [
        { name: "CLIENT", securityProtocol: "SASL_PLAINTEXT", saslMechanisms: ["SCRAM-SHA-512"] },
        { name: "INTERNAL", securityProtocol: "PLAINTEXT", saslMechanisms: null },
      ],
      authorizer: { enabled: true, acls: 1, superUsers: ["User:admin"], allowEveryoneIfNoAclFound: false },
      scramUsers: ["alice", "bob"],
      sidePortReadsNeedToken: true,
    });
    // No credential material anywhere in the view.
    expect(JSON.stringify(view)).not.toMatch(/salt|storedKey|serverKey|iterations/);
  });
});

describe("cluster mode", () => {
  test("the etcd endpoints, the lease as data (id in decimal, TTL and validity in ms), the members from the directory", async () => {
    const cluster = new FakeCluster();
    const { ports } = await setup(cluster);
    const view = ports.cluster();
    expect(view.mode).toBe("cluster");
    expect(view.etcd).toEqual({ endpoints: ["http://10.0.0.5:2379", "http://10.0.0.6:2379"] });
    expect(view.lease).toEqual({ id: "7587880000000000001", ttlMs: 9000, validForMs: 6_500, state: "valid", lapses: 0, lastError: null });
    expect(view.members).toEqual([
      { brokerId: 1, kafka: { host: "127.0.0.1", port: 9092 }, http: { host: "127.0.0.1", port: 9644 }, rack: null, self: true },
      { brokerId: 3, kafka: { host: "127.0.0.1", port: 9094 }, http: null, rack: null, self: false },
    ]);
    expect(view.brokers.map((b) => b.brokerId)).toEqual([1, 3]);
    expect(view.controllerId).toBe(1);
    expect(await ports.readiness()).toEqual({ ready: true });
    expect(await metricLines(ports)).toEqual(["bunka_cluster_members 2", "bunka_cluster_lease_valid 1", "bunka_cluster_lease_lapses_total 0"]);
  });

  test("ownership: null before the manager runs; then each broker's share, what nobody owns, and what this broker holds", async () => {
    const cluster = new FakeCluster();
    const { broker, ports } = await setup(cluster);
    expect(ports.cluster().ownership).toBeNull();
    await broker.services.topics.create({ name: "orders", partitions: 3 });
    cluster.current = {
      ...cluster.current,
      ownership: {
        held: [
          { resource: { kind: "partition", topic: "orders", partition: 0 }, state: "owned", epoch: 4 },
          { resource: { kind: "txn", slot: 7 }, state: "loading", epoch: 2 },
        ],
        owners: [
          { resource: { kind: "partition", topic: "orders", partition: 0 }, brokerId: 1, epoch: 4 },
          { resource: { kind: "partition", topic: "orders", partition: 2 }, brokerId: 3, epoch: 1 },
          { resource: { kind: "txn", slot: 7 }, brokerId: 1, epoch: 2 },
          { resource: { kind: "group", slot: 9 }, brokerId: 3, epoch: 5 },
        ],
      },
    };
    expect(ports.cluster().ownership).toEqual({
      shares: [
        { brokerId: 1, partitions: 1, txnSlots: 1, groupSlots: 0 },
        { brokerId: 3, partitions: 1, txnSlots: 0, groupSlots: 1 },
      ],
      unowned: { partitions: 1, txnSlots: 49, groupSlots: 49 },
      held: [
        { resource: "partition/orders-0", state: "owned", epoch: 4 },
        { resource: "txn/7", state: "loading", epoch: 2 },
      ],
      owners: [
        { resource: "group/9", brokerId: 3, epoch: 5 },
        { resource: "partition/orders-0", brokerId: 1, epoch: 4 },
        { resource: "partition/orders-2", brokerId: 3, epoch: 1 },
        { resource: "txn/7", brokerId: 1, epoch: 2 },
      ],
    });
  });

  test("a lapsed lease: /ready is 503 with the reason, the view and the metrics say lapsed, and all recover with it", async () => {
    const cluster = new FakeCluster();
    const { ports } = await setup(cluster);
    const app = createHttpApp(ports);
    const healthy = cluster.current;
    cluster.current = {
      ...healthy,
      lease: { ...healthy.lease, validForMs: 0, valid: false, lapses: 1, lastError: "etcd lease keep-alive: no endpoint answered" },
      problem: "this broker's etcd lease lapsed 3 s ago (etcd lease keep-alive: no endpoint answered)",
    };
    const ready = await app.request("/ready");
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ error: "not_ready", message: "this broker's etcd lease lapsed 3 s ago (etcd lease keep-alive: no endpoint answered)" });
    const view = (await (await app.request("/v1/cluster")).json()) as ClusterView;
    expect(view.lease).toMatchObject({ state: "lapsed", validForMs: 0, lapses: 1, lastError: "etcd lease keep-alive: no endpoint answered" });
    expect(await metricLines(ports)).toEqual(["bunka_cluster_members 2", "bunka_cluster_lease_valid 0", "bunka_cluster_lease_lapses_total 1"]);
    expect((await ports.metrics()).split("\n")).toContain("bunka_ready 0");

    cluster.current = { ...healthy, lease: { ...healthy.lease, lapses: 1 } };
    expect((await app.request("/ready")).status).toBe(200);
    expect(await metricLines(ports)).toEqual(["bunka_cluster_members 2", "bunka_cluster_lease_valid 1", "bunka_cluster_lease_lapses_total 1"]);
  });

  test("shutting down still wins over the cluster's state in /ready", async () => {
    const cluster = new FakeCluster();
    const { ports } = await setup(cluster);
    cluster.current = { ...cluster.current, problem: "lapsed" };
    ports.markStopping();
    expect(await ports.readiness()).toEqual({ ready: false, reason: "the broker is shutting down" });
  });
});
