/**
 * Two in-process brokers on one data directory sharing a real etcd's metadata gate and feed: SCRAM
 * credentials created with AlterUserScramCredentials on one broker authenticate on the other at once,
 * and a deletion on the other is what the first describes and refuses.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startClusterMetadata, type ClusterMetadata } from "../../src/broker/metadata-mutations.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { saltedPassword, scramMechanism } from "../../src/domain/security/scram.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { EtcdServer } from "../support/etcd.ts";
import { ScramTestClient } from "../support/sasl-client.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { waitUntil } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const SHA512 = scramMechanism("SCRAM-SHA-512")!;
let etcd: EtcdServer;
let etcdClient: EtcdClient;
let dataDir: string;
const brokers: TestBroker[] = [];
const clients: WireClient[] = [];
const gates: ClusterMetadata[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  etcdClient = new EtcdClient({ endpoints: etcd.endpoint });
  dataDir = mkdtempSync(join(tmpdir(), "bunka-cluster-scram-"));
  for (const brokerId of [1, 2]) {
    const broker = await startTestBroker(
      {
        dataDir,
        brokerId,
        listeners: [
          { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
          { name: "SASL", host: "127.0.0.1", port: 0 },
        ],
        listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL: "SASL_PLAINTEXT" },
        connectionFailedAuthenticationDelayMs: 0,
      },
      { cleaner: false, keepDataDir: true },
    );
    brokers.push(broker);
    const lease = await etcdClient.leaseGrant(30);
    gates.push(await startClusterMetadata({ client: etcdClient, clusterId: "cluster-scram", lease: () => ({ id: lease.id, valid: true }), services: broker.broker.services }));
  }
});

afterAll(async () => {
  for (const client of clients) client.close();
  for (const gate of gates) await gate.close();
  for (const broker of brokers) await broker.stop();
  await etcd?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function connect(broker: TestBroker, listener: string): Promise<WireClient> {
  const client = await WireClient.connect(broker.ports[listener]!);
  clients.push(client);
  return client;
}

async function login(broker: TestBroker, password: string): Promise<number> {
  const client = await connect(broker, "SASL");
  await client.request(17, 1, { mechanism: "SCRAM-SHA-512" });
  const scram = new ScramTestClient(SHA512, "alice", password);
  const first = await client.request(36, 2, { authBytes: scram.clientFirst() });
  if (first.errorCode !== 0) return first.errorCode;
  return (await client.request(36, 2, { authBytes: scram.clientFinal(first.authBytes) })).errorCode;
}

test("a credential created on broker 1 authenticates on broker 2; a deletion on broker 2 reaches broker 1", async () => {
  const admin1 = await connect(brokers[0]!, "PLAINTEXT");
  const salt = crypto.getRandomValues(new Uint8Array(16));
  const created = await admin1.request(51, 0, { deletions: [], upsertions: [{ name: "alice", mechanism: 2, iterations: 4096, salt, saltedPassword: saltedPassword(SHA512, "alice-secret", salt, 4096) }] });
  expect(created.results).toEqual([{ user: "alice", errorCode: 0, errorMessage: null }]);
  await waitUntil(() => brokers[1]!.broker.services.scramCredentials.store.get("alice", "SCRAM-SHA-512") !== undefined, "the credential change on the other broker", 10_000);
  expect(await login(brokers[1]!, "alice-secret")).toBe(0);
  expect(await login(brokers[1]!, "wrong")).toBe(ErrorCode.SASL_AUTHENTICATION_FAILED);

  const admin2 = await connect(brokers[1]!, "PLAINTEXT");
  expect((await admin2.request(51, 0, { deletions: [{ name: "alice", mechanism: 2 }], upsertions: [] })).results[0].errorCode).toBe(0);
  await waitUntil(() => brokers[0]!.broker.services.scramCredentials.store.get("alice", "SCRAM-SHA-512") === undefined, "the credential change on the other broker", 10_000);
  expect((await admin1.request(50, 0, { users: [{ name: "alice" }] })).results[0].errorCode).toBe(ErrorCode.RESOURCE_NOT_FOUND);
  expect(await login(brokers[0]!, "alice-secret")).toBe(ErrorCode.SASL_AUTHENTICATION_FAILED);
});
