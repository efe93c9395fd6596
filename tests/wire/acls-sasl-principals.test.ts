/**
 * ACLs decide by the principal SASL authenticated: over a real SASL_PLAINTEXT listener, alice (PLAIN) may
 * read the topic she is granted and bob may not; the same connection unauthenticated never gets that far;
 * the PLAINTEXT listener's User:ANONYMOUS is granted nothing. A super user named by SASL is allowed
 * everything.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { plainToken } from "../support/sasl-client.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let dir: string;
let broker: TestBroker;
const clients: WireClient[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "bunka-acl-sasl-"));
  const users = join(dir, "plain-users.properties");
  writeFileSync(users, "alice=alice-secret\nbob=bob-secret\nadmin=admin-secret\n");
  broker = await startTestBroker({
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL: "SASL_PLAINTEXT" },
    saslEnabledMechanisms: ["PLAIN"],
    saslPlainUsersFile: users,
    connectionFailedAuthenticationDelayMs: 0,
    authorizerClassName: STANDARD_AUTHORIZER_CLASS,
    superUsers: ["User:admin"],
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await broker?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function login(user: string, password: string): Promise<WireClient> {
  const c = await WireClient.connect(broker.ports.SASL!);
  clients.push(c);
  expect((await c.request(17, 1, { mechanism: "PLAIN" })).errorCode).toBe(ErrorCode.NONE);
  expect((await c.request(36, 2, { authBytes: plainToken(user, password) })).errorCode).toBe(ErrorCode.NONE);
  return c;
}

const metadataOf = async (c: WireClient, topic: string) =>
  (await c.request(3, 12, { topics: [{ name: topic, topicId: "00000000-0000-0000-0000-000000000000" }], allowAutoTopicCreation: false })).topics[0].errorCode;

test("alice's grant is hers: bob and ANONYMOUS are refused, the super user is not", async () => {
  const admin = await login("admin", "admin-secret");
  const created = await admin.request(19, 7, { topics: [{ name: "orders", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: false });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  const granted = await admin.request(30, 3, {
    creations: [{ resourceType: Res.TOPIC, resourceName: "orders", resourcePatternType: Pat.LITERAL, principal: "User:alice", host: "*", operation: Op.READ, permissionType: Perm.ALLOW }],
  });
  expect(granted.results[0].errorCode).toBe(ErrorCode.NONE);

  const alice = await login("alice", "alice-secret");
  const bob = await login("bob", "bob-secret");
  const anonymous = await WireClient.connect(broker.ports.PLAINTEXT!);
  clients.push(anonymous);
  expect(await metadataOf(alice, "orders")).toBe(ErrorCode.NONE);
  expect(await metadataOf(bob, "orders")).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);
  expect(await metadataOf(anonymous, "orders")).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);
  expect(await metadataOf(admin, "orders")).toBe(ErrorCode.NONE);
  // READ does not allow WRITE.
  const produced = await alice.request(0, 9, { transactionalId: null, acks: 1, timeoutMs: 5000, topicData: [{ name: "orders", partitionData: [{ index: 0, records: null }] }] });
  expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);
  // Only the super user may manage ACLs.
  expect((await alice.request(29, 3, { resourceTypeFilter: Res.ANY, resourceNameFilter: null, patternTypeFilter: Pat.ANY, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY })).errorCode).toBe(ErrorCode.CLUSTER_AUTHORIZATION_FAILED);
});
