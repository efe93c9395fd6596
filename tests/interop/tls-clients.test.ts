/**
 * Real clients over TLS against an in-process bunka with three listeners: PLAINTEXT (the test's own
 * set-up), SSL (no client certificate) and MTLS (an SSL listener with ssl.client.auth=required).
 * Certificates are made by openssl for this run; clients check the broker's certificate and host name.
 *
 * - Apache Kafka 4.1.1's console producer and consumer (the Java client) with `security.protocol=SSL` and a
 *   PEM truststore, and on MTLS a PEM keystore of their own; the consumer is in a group, so FindCoordinator,
 *   JoinGroup and OffsetCommit all travel over TLS to the address the SSL listener advertises;
 * - librdkafka (confluent-kafka) producing idempotently and consuming in a group on MTLS;
 * - on MTLS the broker names the clients by their certificate: User:CN=client-1,OU=wire,O=bunka tests,C=NL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ensureKafkaLibs, REPO_ROOT, runKafkaTool } from "../support/apache-kafka.ts";
import { consoleRoundTrip } from "../support/console-round-trip.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { type CertificateSet, makeCertificates } from "../support/tls-certs.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const COUNT = 200;
const PYTHON_SCRIPT = join(REPO_ROOT, "tests/interop/python/secure_produce_consume.py");

let certs: CertificateSet;
let broker: TestBroker;
let client: WireClient;
/** The principals seen on MTLS connections while a client ran (sampled every few ms). */
const mtlsPrincipals = new Set<string>();
let sampler: ReturnType<typeof setInterval> | undefined;

beforeAll(async () => {
  await Promise.all([ensureKafkaLibs(), ensureInteropClients()]);
  certs = makeCertificates();
  broker = await startTestBroker({
    autoCreateTopicsEnable: false,
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SSL", host: "127.0.0.1", port: 0 },
      { name: "MTLS", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SSL: "SSL", MTLS: "SSL" },
    ssl: { keystoreLocation: certs.serverEncryptedKeystorePath, keyPassword: certs.keyPassword, truststoreLocation: certs.caPath },
    listenerSsl: { MTLS: { clientAuth: "required" } },
  });
  client = await WireClient.connect(broker.ports.PLAINTEXT!);
  sampler = setInterval(() => {
    for (const s of broker.listener.connectionStats()) if (s.listenerName === "MTLS" && !s.handshaking) mtlsPrincipals.add(s.principal);
  }, 5);
}, TIMEOUT);

afterAll(async () => {
  if (sampler !== undefined) clearInterval(sampler);
  await killLiveChildren();
  client?.close();
  await broker?.stop();
  certs?.remove();
});

async function createTopic(name: string): Promise<void> {
  const res = await client.request(19, 7, { topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 10_000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

/** A Java client properties file: SSL with the CA as a PEM truststore, and a PEM keystore when asked. */
function javaClientConfig(name: string, withKeystore: boolean): string {
  const path = join(certs.dir, `${name}.properties`);
  const lines = ["security.protocol=SSL", "ssl.truststore.type=PEM", `ssl.truststore.location=${certs.caPath}`];
  if (withKeystore) lines.push("ssl.keystore.type=PEM", `ssl.keystore.location=${certs.clientKeystorePath}`);
  writeFileSync(path, lines.join("\n") + "\n");
  return path;
}

async function javaRoundTrip(listener: "SSL" | "MTLS", topic: string): Promise<void> {
  await createTopic(topic);
  await consoleRoundTrip({ bootstrap: `127.0.0.1:${broker.ports[listener]}`, topic, clientConfig: javaClientConfig(topic, listener === "MTLS"), label: listener, count: COUNT, client });
}

describe("Apache Kafka's Java client (4.1.1) over TLS", () => {
  test(`SSL: ${COUNT} records produced and consumed in a group, with a PEM truststore`, async () => {
    await javaRoundTrip("SSL", "java-ssl");
  }, TIMEOUT);

  test(`MTLS (ssl.client.auth=required): the same with a PEM keystore; the broker names the client by its certificate`, async () => {
    mtlsPrincipals.clear();
    await javaRoundTrip("MTLS", "java-mtls");
    expect([...mtlsPrincipals]).toEqual([certs.clientPrincipal]);
  }, TIMEOUT);

  test("MTLS without a client certificate: the Java producer cannot connect", async () => {
    await createTopic("java-mtls-refused");
    const config = javaClientConfig("java-mtls-refused", false);
    const result = await runKafkaTool(
      "kafka-console-producer",
      ["--bootstrap-server", `127.0.0.1:${broker.ports.MTLS}`, "--topic", "java-mtls-refused", "--producer.config", config, "--producer-property", "max.block.ms=5000", "--producer-property", "delivery.timeout.ms=6000", "--producer-property", "request.timeout.ms=5000"],
      { stdin: "one\n", timeoutMs: 60_000 },
    );
    // The broker's alert, as Java reports it: the client's certificate was required.
    expect(result.stderr).toContain("SslAuthenticationException");
    expect(result.stderr).toContain("certificate_required");
    const md = await client.request(2, 8, { replicaId: -1, isolationLevel: 0, topics: [{ name: "java-mtls-refused", partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }] });
    expect(md.topics[0].partitions[0].offset).toBe(0);
  }, TIMEOUT);
});

describe("librdkafka (confluent-kafka) over TLS", () => {
  test(`MTLS: ${COUNT} idempotent records produced and consumed in a group with a client certificate`, async () => {
    await createTopic("rdk-mtls");
    mtlsPrincipals.clear();
    const child = new LineChild("secure_produce_consume.py", [
      VENV_PYTHON,
      PYTHON_SCRIPT,
      `127.0.0.1:${broker.ports.MTLS}`,
      "rdk-mtls",
      String(COUNT),
      "tls-value",
      "security.protocol=ssl",
      `ssl.ca.location=${certs.caPath}`,
      "ssl.endpoint.identification.algorithm=https",
      `ssl.certificate.location=${certs.clientCertPath}`,
      `ssl.key.location=${certs.clientKeyPath}`,
    ]);
    const code = await child.exitWithin(TIMEOUT - 60_000);
    if (code !== 0) throw new Error(`secure_produce_consume.py exited ${code}\n${child.output()}`);
    const output = JSON.parse(child.stdout.trim().split("\n").pop()!) as { librdkafka: string; delivered: number; errors: string[]; consumed: [string, string][] };
    const summary = JSON.stringify({ ...output, consumed: output.consumed.length });
    expect(output.librdkafka, summary).toMatch(/^2\./);
    expect(output.delivered, summary).toBe(COUNT);
    expect(output.consumed, summary).toEqual(Array.from({ length: COUNT }, (_, i) => [`key-${i}`, `tls-value-${i}`]));
    expect([...mtlsPrincipals]).toEqual([certs.clientPrincipal]);
  }, TIMEOUT);
});
