/**
 * SASL and the authorizer together, over a real SASL_PLAINTEXT listener: the principal SASL establishes
 * (User:<name>, PLAIN or SCRAM) is the one ACLs are checked against. A super user authenticated over SASL
 * grants alice READ on a topic; alice (SCRAM-SHA-512) sees and fetches it, bob (PLAIN) is refused with
 * TOPIC_AUTHORIZATION_FAILED, and the unauthenticated PLAINTEXT listener's User:ANONYMOUS is refused too.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { saltedPassword, scramMechanism } from "../../src/domain/security/scram.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { plainToken, ScramTestClient } from "../support/sasl-client.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const SHA512 = scramMechanism("SCRAM-SHA-512")!;
let dir: string;
let tb: TestBroker;
const clients: WireClient[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "bunka-sasl-acls-"));
  writeFileSync(join(dir, "users"), "admin=admin-pw\nbob=bob-pw\n");
  tb = await startTestBroker({
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL: "SASL_PLAINTEXT" },
    saslEnabledMechanisms: ["PLAIN", "SCRAM-SHA-512"],
    saslPlainUsersFile: join(dir, "users"),
    connectionFailedAuthenticationDelayMs: 0,
    authorizerClassName: STANDARD_AUTHORIZER_CLASS,
    superUsers: ["User:admin"],
    autoCreateTopicsEnable: false,
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await tb?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function plainClient(user: string, password: string): Promise<WireClient> {
  const c = await WireClient.connect(tb.ports.SASL!);
  clients.push(c);
  await c.request(17, 1, { mechanism: "PLAIN" });
  expect((await c.request(36, 2, { authBytes: plainToken(user, password) })).errorCode).toBe(0);
  return c;
}

const metadataOf = async (c: WireClient, topic: string) =>
  (await c.request(3, 12, { topics: [{ name: topic, topicId: "00000000-0000-0000-0000-000000000000" }], allowAutoTopicCreation: false })).topics[0].errorCode;

test("ACLs apply to the principal SASL authenticated", async () => {
  const admin = await plainClient("admin", "admin-pw");
  const created = await admin.request(19, 7, { topics: [{ name: "orders", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 10_000, validateOnly: false });
  expect(created.topics[0].errorCode).toBe(0);
  const salt = new TextEncoder().encode("alice-salt");
  const scram = await admin.request(51, 0, { deletions: [], upsertions: [{ name: "alice", mechanism: 2, iterations: 4096, salt, saltedPassword: saltedPassword(SHA512, "alice-pw", salt, 4096) }] });
  expect(scram.results[0].errorCode).toBe(0);
  const acl = { resourceType: Res.TOPIC, resourceName: "orders", resourcePatternType: Pat.LITERAL, principal: "User:alice", host: "*", operation: Op.READ, permissionType: Perm.ALLOW };
  expect((await admin.request(30, 3, { creations: [acl] })).results[0].errorCode).toBe(0);

  const alice = await WireClient.connect(tb.ports.SASL!);
  clients.push(alice);
  await alice.request(17, 1, { mechanism: "SCRAM-SHA-512" });
  const client = new ScramTestClient(SHA512, "alice", "alice-pw");
  const first = await alice.request(36, 2, { authBytes: client.clientFirst() });
  expect((await alice.request(36, 2, { authBytes: client.clientFinal(first.authBytes) })).errorCode).toBe(0);
  expect(await metadataOf(alice, "orders")).toBe(ErrorCode.NONE);

  const bob = await plainClient("bob", "bob-pw");
  expect(await metadataOf(bob, "orders")).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);

  const anonymous = await WireClient.connect(tb.ports.PLAINTEXT!);
  clients.push(anonymous);
  expect(await metadataOf(anonymous, "orders")).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);
});
