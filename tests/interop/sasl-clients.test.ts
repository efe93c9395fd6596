/**
 * Real clients over SASL against an in-process bunka with a PLAINTEXT listener (the administration side),
 * a SASL_PLAINTEXT one and a SASL_SSL one (certificates made by openssl for this run), PLAIN and SCRAM enabled, sessions of 2 s (connections.max.reauth.ms) so that
 * the longer-running clients re-authenticate on their connections (KIP-368):
 *
 * - Apache Kafka 4.1.1's `kafka-configs` creates SCRAM users (AlterUserScramCredentials: the tool salts
 *   the password) and describes them (DescribeClientQuotas, then DescribeUserScramCredentials);
 * - the Java console producer and consumer (a group: FindCoordinator, JoinGroup, OffsetCommit) with
 *   `security.protocol=SASL_PLAINTEXT` and SCRAM-SHA-512, then PLAIN; a wrong password gives the client's
 *   SaslAuthenticationException with Apache's message and writes nothing; SCRAM-SHA-512 over SASL_SSL;
 * - librdkafka (confluent-kafka) with SCRAM-SHA-256, and SCRAM-SHA-512 over SASL_SSL, idempotent producer and a group consumer; a wrong
 *   password: its authentication error, nothing delivered;
 * - franz-go 1.22 with SCRAM-SHA-512 and PLAIN (idempotent producer, group consumer); a wrong password:
 *   its SASL_AUTHENTICATION_FAILED error, nothing produced;
 * - kafkajs 2.2.4 with SCRAM-SHA-512 and PLAIN; a wrong password: KafkaJSSASLAuthenticationError.
 * A failed client leaves the other connections alone: each test's records are all there afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ensureKafkaLibs, REPO_ROOT, runKafkaTool, type ToolResult } from "../support/apache-kafka.ts";
import { consoleRoundTrip } from "../support/console-round-trip.ts";
import { ensureInteropClients, goHelper, VENV_PYTHON } from "../support/interop-clients.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { type CertificateSet, makeCertificates } from "../support/tls-certs.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const COUNT = 200;
const PYTHON_SCRIPT = join(REPO_ROOT, "tests/interop/python/secure_produce_consume.py");

let dir: string;
let broker: TestBroker;
let client: WireClient;
let plaintext: string;
let sasl: string;
let saslSsl: string;
let certs: CertificateSet;

beforeAll(async () => {
  await Promise.all([ensureKafkaLibs(), ensureInteropClients()]);
  dir = mkdtempSync(join(tmpdir(), "bunka-sasl-interop-"));
  const users = join(dir, "plain-users");
  writeFileSync(users, "pat=pat-secret\n");
  certs = makeCertificates();
  broker = await startTestBroker({
    autoCreateTopicsEnable: false,
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL_PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL_SSL", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL_PLAINTEXT: "SASL_PLAINTEXT", SASL_SSL: "SASL_SSL" },
    ssl: { keystoreLocation: certs.serverKeystorePath },
    saslEnabledMechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    saslPlainUsersFile: users,
    connectionsMaxReauthMs: 2000,
  });
  plaintext = `127.0.0.1:${broker.ports.PLAINTEXT}`;
  sasl = `127.0.0.1:${broker.ports.SASL_PLAINTEXT}`;
  saslSsl = `127.0.0.1:${broker.ports.SASL_SSL}`;
  client = await WireClient.connect(broker.ports.PLAINTEXT!);
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await broker?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  certs?.remove();
});

async function createTopic(name: string): Promise<void> {
  const res = await client.request(19, 7, { topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 10_000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

async function endOffset(topic: string): Promise<number> {
  const res = await client.request(2, 8, { replicaId: -1, isolationLevel: 0, topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }] });
  return res.topics[0].partitions[0].offset;
}

function ok(result: ToolResult): ToolResult {
  if (result.code !== 0) throw new Error(`tool exited ${result.code}\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-4000)}`);
  return result;
}

function javaClientConfig(name: string, mechanism: string, user: string, password: string, tls = false): string {
  const path = join(dir, `${name}.properties`);
  const module = mechanism === "PLAIN" ? "org.apache.kafka.common.security.plain.PlainLoginModule" : "org.apache.kafka.common.security.scram.ScramLoginModule";
  const lines = [`security.protocol=${tls ? "SASL_SSL" : "SASL_PLAINTEXT"}`, `sasl.mechanism=${mechanism}`, `sasl.jaas.config=${module} required username="${user}" password="${password}";`];
  if (tls) lines.push("ssl.truststore.type=PEM", `ssl.truststore.location=${certs.caPath}`);
  writeFileSync(path, lines.join("\n") + "\n");
  return path;
}

async function addScramUser(user: string, mechanism: string, password: string, iterations: number): Promise<ToolResult> {
  return runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config", `${mechanism}=[iterations=${iterations},password=${password}]`], { timeoutMs: 90_000 });
}

describe("kafka-configs manages SCRAM users", () => {
  test("--alter --add-config SCRAM-SHA-512 and SCRAM-SHA-256, then --describe", async () => {
    expect(ok(await addScramUser("alice", "SCRAM-SHA-512", "alice-secret", 8192)).stdout).toContain("Completed updating config for user alice.");
    expect(ok(await addScramUser("alice", "SCRAM-SHA-256", "alice-secret", 4096)).stdout).toContain("Completed updating config for user alice.");
    ok(await addScramUser("rdk", "SCRAM-SHA-256", "rdk-secret", 4096));
    const described = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--describe", "--entity-type", "users", "--entity-name", "alice"], { timeoutMs: 90_000 }));
    expect(described.stdout).toContain("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192");
    const everyone = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--describe", "--entity-type", "users"], { timeoutMs: 90_000 }));
    expect(everyone.stdout).toContain("SCRAM credential configs for user-principal 'alice' are");
    expect(everyone.stdout).toContain("SCRAM credential configs for user-principal 'rdk' are SCRAM-SHA-256=iterations=4096");
  }, TIMEOUT);

  test("--delete-config removes one mechanism's credential", async () => {
    ok(await addScramUser("temp", "SCRAM-SHA-512", "t", 4096));
    ok(await addScramUser("temp", "SCRAM-SHA-256", "t", 4096));
    const deleted = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--alter", "--entity-type", "users", "--entity-name", "temp", "--delete-config", "SCRAM-SHA-512"], { timeoutMs: 90_000 }));
    expect(deleted.stdout).toContain("Completed updating config for user temp.");
    const described = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--describe", "--entity-type", "users", "--entity-name", "temp"], { timeoutMs: 90_000 }));
    expect(described.stdout).toContain("SCRAM credential configs for user-principal 'temp' are SCRAM-SHA-256=iterations=4096\n");
  }, TIMEOUT);

  test("iterations above 16384 are refused by the broker with Apache's error (the tool itself checks the minimum)", async () => {
    const refused = await addScramUser("strong", "SCRAM-SHA-512", "x", 16385);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}\n${refused.stderr}`).toContain("Too many iterations");
  }, TIMEOUT);

  test("--describe of an unknown user prints no credentials and succeeds, as against Apache", async () => {
    // The admin client leaves users the broker answers RESOURCE_NOT_FOUND for out of its list.
    const described = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", plaintext, "--describe", "--entity-type", "users", "--entity-name", "nobody"], { timeoutMs: 90_000 }));
    expect(described.stdout).not.toContain("SCRAM credential configs");
  }, TIMEOUT);
});

async function javaRoundTrip(topic: string, mechanism: string, user: string, password: string, tls = false): Promise<void> {
  await createTopic(topic);
  await consoleRoundTrip({ bootstrap: tls ? saslSsl : sasl, topic, clientConfig: javaClientConfig(topic, mechanism, user, password, tls), label: mechanism, count: COUNT, client });
}

describe("Apache Kafka's Java client (4.1.1) over SASL_PLAINTEXT", () => {
  test(`SCRAM-SHA-512: ${COUNT} records produced and consumed in a group`, async () => {
    await javaRoundTrip("java-scram", "SCRAM-SHA-512", "alice", "alice-secret");
    expect(broker.broker.services.sasl.counts.authenticated.get("SCRAM-SHA-512")).toBeGreaterThan(0);
  }, TIMEOUT);

  test(`PLAIN: ${COUNT} records produced and consumed in a group`, async () => {
    await javaRoundTrip("java-plain", "PLAIN", "pat", "pat-secret");
  }, TIMEOUT);

  test(`SASL_SSL with SCRAM-SHA-512 (a PEM truststore): ${COUNT} records produced and consumed in a group`, async () => {
    await javaRoundTrip("java-sasl-ssl", "SCRAM-SHA-512", "alice", "alice-secret", true);
  }, TIMEOUT);

  test("a wrong password: the client's authentication error, nothing written", async () => {
    await createTopic("java-bad-password");
    const config = javaClientConfig("java-bad-password", "SCRAM-SHA-512", "alice", "wrong");
    const result = await runKafkaTool(
      "kafka-console-producer",
      ["--bootstrap-server", sasl, "--topic", "java-bad-password", "--producer.config", config, "--producer-property", "max.block.ms=10000"],
      { stdin: "one\n", timeoutMs: 60_000 },
    );
    expect(`${result.stdout}\n${result.stderr}`).toContain("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512");
    expect(await endOffset("java-bad-password")).toBe(0);
    expect(broker.broker.services.sasl.counts.failed.get("SCRAM-SHA-512")).toBeGreaterThan(0);
  }, TIMEOUT);

  test("the sessions ended every 2 s and the Java clients re-authenticated on their connections", () => {
    const counts = broker.broker.services.sasl.counts;
    expect([...counts.reauthenticated.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  });
});

async function librdkafka(topic: string, mechanism: string, user: string, password: string, tls = false) {
  const child = new LineChild("secure_produce_consume.py", [
    VENV_PYTHON,
    PYTHON_SCRIPT,
    tls ? saslSsl : sasl,
    topic,
    String(COUNT),
    "sasl-value",
    ...(tls ? ["security.protocol=sasl_ssl", `ssl.ca.location=${certs.caPath}`] : ["security.protocol=sasl_plaintext"]),
    `sasl.mechanisms=${mechanism}`,
    `sasl.username=${user}`,
    `sasl.password=${password}`,
    // A wrong password never delivers: give up after 15 s rather than the script's 30.
    "message.timeout.ms=15000",
  ]);
  const code = await child.exitWithin(TIMEOUT - 60_000);
  if (code !== 0) throw new Error(`secure_produce_consume.py exited ${code}\n${child.output()}`);
  return JSON.parse(child.stdout.trim().split("\n").pop()!) as { librdkafka: string; delivered: number; errors: string[]; consumed: [string, string][] };
}

describe("librdkafka (confluent-kafka) over SASL_PLAINTEXT and SASL_SSL", () => {
  async function roundTrip(topic: string, mechanism: string, user: string, password: string, tls: boolean): Promise<void> {
    await createTopic(topic);
    const output = await librdkafka(topic, mechanism, user, password, tls);
    const summary = JSON.stringify({ ...output, consumed: output.consumed.length });
    expect(output.librdkafka, summary).toMatch(/^2\./);
    expect(output.errors, summary).toEqual([]);
    expect(output.delivered, summary).toBe(COUNT);
    expect(output.consumed, summary).toEqual(Array.from({ length: COUNT }, (_, i) => [`key-${i}`, `sasl-value-${i}`]));
  }

  test(`SCRAM-SHA-256: ${COUNT} idempotent records produced and consumed in a group`, async () => {
    await roundTrip("rdk-scram", "SCRAM-SHA-256", "rdk", "rdk-secret", false);
  }, TIMEOUT);

  test(`SASL_SSL with SCRAM-SHA-512 (the CA as ssl.ca.location): ${COUNT} idempotent records produced and consumed in a group`, async () => {
    await roundTrip("rdk-scram-ssl", "SCRAM-SHA-512", "alice", "alice-secret", true);
  }, TIMEOUT);

  test("a wrong password: librdkafka's authentication error, nothing delivered", async () => {
    await createTopic("rdk-bad-password");
    const output = await librdkafka("rdk-bad-password", "SCRAM-SHA-256", "rdk", "wrong");
    expect(output.delivered).toBe(0);
    expect(output.errors.join("\n")).toMatch(/Authentication failed|SASL authentication error/);
    expect(await endOffset("rdk-bad-password")).toBe(0);
    expect(await endOffset("rdk-scram")).toBe(COUNT);
  }, TIMEOUT);
});

async function franzGo(topic: string, mechanism: string, user: string, password: string) {
  const child = new LineChild("sasl-check", [goHelper("sasl-check"), sasl, topic, String(COUNT), mechanism, user, password]);
  const code = await child.exitWithin(TIMEOUT - 60_000);
  if (code !== 0) throw new Error(`sasl-check exited ${code}\n${child.output()}`);
  return JSON.parse(child.stdout.trim().split("\n").pop()!) as { produced: number; consumed: number; error: string };
}

describe("franz-go over SASL_PLAINTEXT", () => {
  test(`SCRAM-SHA-512: ${COUNT} records produced and consumed in a group`, async () => {
    await createTopic("franz-scram");
    expect(await franzGo("franz-scram", "SCRAM-SHA-512", "alice", "alice-secret")).toEqual({ produced: COUNT, consumed: COUNT, error: "" });
  }, TIMEOUT);

  test(`PLAIN: ${COUNT} records produced and consumed in a group`, async () => {
    await createTopic("franz-plain");
    expect(await franzGo("franz-plain", "PLAIN", "pat", "pat-secret")).toEqual({ produced: COUNT, consumed: COUNT, error: "" });
  }, TIMEOUT);

  test("a wrong password: franz-go's authentication error, nothing produced", async () => {
    await createTopic("franz-bad-password");
    const out = await franzGo("franz-bad-password", "SCRAM-SHA-256", "rdk", "wrong");
    expect(out.produced).toBe(0);
    expect(out.error).toContain("SASL_AUTHENTICATION_FAILED");
    expect(await endOffset("franz-bad-password")).toBe(0);
  }, TIMEOUT);
});

describe("kafkajs over SASL_PLAINTEXT", () => {
  const kafka = (sasl_: { mechanism: "plain" | "scram-sha-256" | "scram-sha-512"; username: string; password: string }) =>
    // kafkajs re-authenticates once less than reauthenticationThreshold (default 10 s) is left of the
    // session; with this broker's 2 s sessions that default would start one before every request.
    new Kafka({ clientId: "sasl-kafkajs", brokers: [sasl], sasl: sasl_ as never, reauthenticationThreshold: 1000, logLevel: logLevel.NOTHING, retry: { retries: 1 } });

  for (const [mechanism, username, password] of [["scram-sha-512", "alice", "alice-secret"], ["plain", "pat", "pat-secret"]] as const) {
    test(`${mechanism}: records produced and consumed in a group`, async () => {
      const topic = `kafkajs-${mechanism}`;
      await createTopic(topic);
      const k = kafka({ mechanism, username, password });
      const producer = k.producer();
      await producer.connect();
      await producer.send({ topic, messages: Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })) });
      await producer.disconnect();
      const consumer = k.consumer({ groupId: `${topic}-group` });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const seen: string[] = [];
      await new Promise<void>((resolve, reject) => {
        consumer.run({ eachMessage: async ({ message }) => {
          seen.push(message.value!.toString());
          if (seen.length === 50) resolve();
        } }).catch(reject);
      });
      await consumer.disconnect();
      expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => `v${i}`));
    }, TIMEOUT);
  }

  test("a wrong password: KafkaJSSASLAuthenticationError", async () => {
    const producer = kafka({ mechanism: "scram-sha-512", username: "alice", password: "wrong" }).producer();
    const error = await producer.connect().then(() => undefined, (e: Error) => e);
    expect(error?.name).toBe("KafkaJSSASLAuthenticationError");
    expect(error?.message).toContain("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512");
  }, TIMEOUT);
});
