/**
 * Exactly-once copying over SASL_SSL with the least ACLs it needs, and kcat over SASL_SSL with SCRAM, against
 * an in-process bunka with StandardAuthorizer and `super.users=User:admin`:
 *
 * - listeners: PLAINTEXT (the test's own set-up and checks, as User:ANONYMOUS, granted ALL with ACLs as in
 *   acls-clients.test.ts: ACLs are per principal, so they give the copier nothing) and SASL_SSL (PLAIN for
 *   the super user admin, SCRAM-SHA-512 for User:copier, SCRAM-SHA-256 for User:kcat; certificates made by
 *   openssl for this run);
 * - admin (PLAIN over SASL_SSL) creates the SCRAM users with Apache Kafka 4.1.1's kafka-configs and the
 *   copier's ACLs with kafka-acls: READ on the input topic, WRITE on the output topic, READ on the group,
 *   WRITE on the transactional id. Nothing else: DESCRIBE comes with READ and WRITE, and IDEMPOTENT_WRITE on
 *   the cluster is not needed when WRITE on the transactional id is granted (Apache's rules);
 * - the Java copier (tests/interop/java/SecureEosCopier.java: read_committed consumer in a group,
 *   transactional producer with sendOffsetsToTransaction) runs as User:copier and copies RECORDS records of 3
 *   partitions exactly once: the output read read_committed holds every input record once, in order per
 *   partition, nothing aborted, the group's stable committed offsets equal the input's end offsets and the
 *   transactional id rests in CompleteCommit;
 * - the same set with one ACL left out, for each of the four: the copier fails with the matching
 *   authorization error (TransactionalIdAuthorizationException, GroupAuthorizationException,
 *   TopicAuthorizationException naming the output or the input topic) and commits nothing;
 * - kcat (librdkafka) produces and consumes over SASL_SSL with SCRAM-SHA-256; a wrong password fails with
 *   its authentication error and writes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { type AclBinding, AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ensureKafkaLibs, javaBin, LOG4J_CONFIG, REPO_ROOT, runKafkaTool, type ToolResult } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { killLiveChildren, LineChild } from "../support/line-child.ts";
import { readPartitionFully, utf8 } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { type CertificateSet, makeCertificates } from "../support/tls-certs.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 180_000;
const PARTITIONS = 3;
const RECORDS = 600;
const TXN_SIZE = 50;
const INPUT = "eos-input";
const JAVA_SOURCE = join(import.meta.dir, "java/SecureEosCopier.java");
const JAVA_CLASSES = join(REPO_ROOT, ".cache/java-classes/secure-eos");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
const ACL_COMMAND = "org.apache.kafka.tools.AclCommand";
const SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule";
const PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule";

let dir: string;
let certs: CertificateSet;
let broker: TestBroker;
let client: WireClient;
let libs: string;
let saslSsl: string;
let adminConfig: string;
let copierConfig: string;
/** The input as written: [key, value] per partition. */
let intended: [string, string][][];

function ok(result: ToolResult): ToolResult {
  if (result.code !== 0) throw new Error(`tool exited ${result.code}\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-4000)}`);
  return result;
}

function javaClientConfig(name: string, module: string, mechanism: string, user: string, password: string): string {
  const path = join(dir, `${name}.properties`);
  const lines = [
    "security.protocol=SASL_SSL",
    `sasl.mechanism=${mechanism}`,
    `sasl.jaas.config=${module} required username="${user}" password="${password}";`,
    "ssl.truststore.type=PEM",
    `ssl.truststore.location=${certs.caPath}`,
  ];
  writeFileSync(path, lines.join("\n") + "\n");
  return path;
}

async function compileCopier(): Promise<void> {
  const classFile = join(JAVA_CLASSES, "SecureEosCopier.class");
  if (existsSync(classFile) && statSync(classFile).mtimeMs >= statSync(JAVA_SOURCE).mtimeMs) return;
  mkdirSync(JAVA_CLASSES, { recursive: true });
  const proc = Bun.spawn(["javac", "-nowarn", "-d", JAVA_CLASSES, "-cp", `${libs}/*`, JAVA_SOURCE], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac SecureEosCopier.java failed (${code}):\n${out}${err}`);
}

/** kcat must be there: the interop clients' script installs the Debian package; nothing is skipped. */
function requireKcat(): void {
  if (Bun.which("kcat") === null) throw new Error("kcat is not installed: run scripts/install-interop-clients.sh as root, or `apt-get install kcat` (Debian package kcat)");
}

const everything = (resourceType: number, resourceName: string): AclBinding => ({
  resourceType,
  resourceName,
  patternType: Pat.LITERAL,
  principal: "User:ANONYMOUS",
  host: "*",
  operation: Op.ALL,
  permissionType: Perm.ALLOW,
});

beforeAll(async () => {
  libs = await ensureKafkaLibs();
  await Promise.all([compileCopier(), ensureInteropClients()]);
  requireKcat();
  dir = mkdtempSync(join(tmpdir(), "bunka-eos-sasl-ssl-"));
  const plainUsers = join(dir, "plain-users");
  writeFileSync(plainUsers, "admin=admin-secret\n");
  certs = makeCertificates();
  broker = await startTestBroker({
    autoCreateTopicsEnable: false,
    groupInitialRebalanceDelayMs: 0,
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL_SSL", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL_SSL: "SASL_SSL" },
    ssl: { keystoreLocation: certs.serverKeystorePath },
    saslEnabledMechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    saslPlainUsersFile: plainUsers,
    authorizerClassName: STANDARD_AUTHORIZER_CLASS,
    superUsers: ["User:admin"],
  });
  saslSsl = `127.0.0.1:${broker.ports.SASL_SSL}`;
  // The test's own connections (PLAINTEXT, User:ANONYMOUS): set-up and checks.
  await broker.broker.services.authorizer.create([everything(Res.CLUSTER, "kafka-cluster"), everything(Res.TOPIC, "*"), everything(Res.GROUP, "*"), everything(Res.TRANSACTIONAL_ID, "*")]);
  client = await WireClient.connect(broker.ports.PLAINTEXT!);
  adminConfig = javaClientConfig("admin", PLAIN_MODULE, "PLAIN", "admin", "admin-secret");
  copierConfig = javaClientConfig("copier", SCRAM_MODULE, "SCRAM-SHA-512", "copier", "copier-secret");
  await createTopic(INPUT, PARTITIONS);
  intended = await writeInput();
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await broker?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  certs?.remove();
});

async function createTopic(name: string, partitions: number): Promise<void> {
  const res = await client.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 10_000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

/** RECORDS plain records with unique keys, spread over the input's partitions in batches of 20. */
async function writeInput(): Promise<[string, string][][]> {
  const out: [string, string][][] = Array.from({ length: PARTITIONS }, () => []);
  for (let i = 0; i < RECORDS; i += 20) {
    const p = (i / 20) % PARTITIONS;
    const records = Array.from({ length: 20 }, (_, j) => ({ key: `key-${i + j}`, value: `value-${i + j}` }));
    const res = await client.request(0, 9, { transactionalId: null, acks: -1, timeoutMs: 5000, topicData: [{ name: INPUT, partitionData: [{ index: p, records: buildBatch({ records }) }] }] });
    expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    out[p]!.push(...records.map((r) => [r.key, r.value] as [string, string]));
  }
  return out;
}

async function endOffsets(topic: string): Promise<number[]> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel: 0,
    topics: [{ name: topic, partitions: Array.from({ length: PARTITIONS }, (_, p) => ({ partitionIndex: p, currentLeaderEpoch: -1, timestamp: -1 })) }],
  });
  return res.topics[0].partitions.map((p: { offset: number }) => p.offset);
}

/** The group's stable committed offsets of the input (OffsetFetch v8, require_stable); -1 where none. */
async function committedOffsets(group: string): Promise<{ errorCode: number; offsets: number[] }> {
  const res = await client.request(9, 8, { groups: [{ groupId: group, topics: [{ name: INPUT, partitionIndexes: Array.from({ length: PARTITIONS }, (_, p) => p) }] }], requireStable: true });
  const g = res.groups[0];
  return { errorCode: g.errorCode, offsets: g.topics[0].partitions.map((p: { committedOffset: number; errorCode: number }) => (p.errorCode === ErrorCode.NONE ? p.committedOffset : -p.errorCode)) };
}

/** One partition read_committed (Fetch isolation 1): no aborted transaction, LSO at the HW, then its data records. */
async function readCommitted(topic: string, partition: number): Promise<{ records: [string, string][]; aborted: number; lsoAtHw: boolean }> {
  const res = await client.request(1, 12, {
    replicaId: -1,
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes: 8 * 1024 * 1024,
    isolationLevel: 1,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [{ topic, partitions: [{ partition, fetchOffset: 0, partitionMaxBytes: 8 * 1024 * 1024, logStartOffset: -1 }] }],
  });
  const data = res.responses[0].partitions[0];
  expect(data.errorCode).toBe(ErrorCode.NONE);
  // With no aborted transaction every data batch below the LSO is committed: the whole log is the committed read.
  const contents = await readPartitionFully(client, topic, partition);
  const records = contents.batches.filter((b) => !b.header.isControl).flatMap((b) => b.records.map((r) => [utf8(r.key)!, utf8(r.value)!] as [string, string]));
  return { records, aborted: (data.abortedTransactions ?? []).length, lsoAtHw: data.lastStableOffset === data.highWatermark };
}

/** The copier's ACLs by name, so that a scenario can leave one out. */
function copierAcls(names: { output: string; group: string; transactionalId: string }): Record<"input" | "output" | "group" | "transactionalId", AclBinding> {
  const acl = (resourceType: number, resourceName: string, operation: number): AclBinding => ({ resourceType, resourceName, patternType: Pat.LITERAL, principal: "User:copier", host: "*", operation, permissionType: Perm.ALLOW });
  return {
    input: acl(Res.TOPIC, INPUT, Op.READ),
    output: acl(Res.TOPIC, names.output, Op.WRITE),
    group: acl(Res.GROUP, names.group, Op.READ),
    transactionalId: acl(Res.TRANSACTIONAL_ID, names.transactionalId, Op.WRITE),
  };
}

interface CopierRun {
  code: number | undefined;
  stdout: string;
  stderr: string;
}

async function runCopier(names: { output: string; group: string; transactionalId: string }, timeoutMs: number): Promise<CopierRun> {
  const child = new LineChild("SecureEosCopier", [
    javaBin(),
    ...JVM_FLAGS,
    "-cp",
    `${libs}/*:${JAVA_CLASSES}`,
    "SecureEosCopier",
    copierConfig,
    saslSsl,
    INPUT,
    names.output,
    names.group,
    names.transactionalId,
    String(TXN_SIZE),
    String(RECORDS),
  ]);
  const code = await child.exitCodeWithin(timeoutMs);
  return { code, stdout: child.stdout, stderr: child.stderr };
}

const scenario = (name: string) => ({ output: `${name}-output`, group: `${name}-group`, transactionalId: `${name}-txn` });

describe("set-up over SASL_SSL as the super user admin (PLAIN)", () => {
  test("kafka-configs creates the SCRAM users; kafka-acls grants the copier exactly its four ACLs", async () => {
    for (const [user, mechanism, password] of [
      ["copier", "SCRAM-SHA-512", "copier-secret"],
      ["kcat", "SCRAM-SHA-256", "kcat-secret"],
    ]) {
      const added = ok(
        await runKafkaTool(
          "kafka-configs",
          ["--bootstrap-server", saslSsl, "--command-config", adminConfig, "--alter", "--entity-type", "users", "--entity-name", user!, "--add-config", `${mechanism}=[iterations=4096,password=${password}]`],
          { timeoutMs: 90_000 },
        ),
      );
      expect(added.stdout).toContain(`Completed updating config for user ${user}.`);
    }
    const names = scenario("full");
    await createTopic(names.output, PARTITIONS);
    const kafkaAcls = async (args: string[]): Promise<ToolResult> => {
      const child = new LineChild("kafka-acls", [javaBin(), ...JVM_FLAGS, "-cp", `${libs}/*`, ACL_COMMAND, "--bootstrap-server", saslSsl, "--command-config", adminConfig, "--add", "--allow-principal", "User:copier", ...args]);
      const code = await child.exitCodeWithin(90_000);
      return { code: code ?? 124, stdout: child.stdout, stderr: child.stderr };
    };
    ok(await kafkaAcls(["--operation", "Read", "--topic", INPUT]));
    ok(await kafkaAcls(["--operation", "Write", "--topic", names.output]));
    ok(await kafkaAcls(["--operation", "Read", "--group", names.group]));
    ok(await kafkaAcls(["--operation", "Write", "--transactional-id", names.transactionalId]));
    const granted = broker.broker.services.authorizer.acls({ resourceType: Res.ANY, resourceName: null, patternType: Pat.ANY, principal: "User:copier", host: null, operation: Op.ANY, permissionType: Perm.ANY });
    expect(granted.sort((a, b) => a.resourceName.localeCompare(b.resourceName))).toEqual(Object.values(copierAcls(names)).sort((a, b) => a.resourceName.localeCompare(b.resourceName)));
  }, TIMEOUT);
});

describe("the Java EOS copier as User:copier over SASL_SSL (SCRAM-SHA-512)", () => {
  test(`with exactly its four ACLs: ${RECORDS} records copied exactly once, the group's offsets at the input's end`, async () => {
    const names = scenario("full");
    const run = await runCopier(names, TIMEOUT - 30_000);
    expect(run.code, `${run.stdout}\n${run.stderr.slice(-4000)}`).toBe(0);
    expect(run.stdout).toContain(`DONE ${RECORDS}`);
    expect(broker.broker.services.sasl.counts.authenticated.get("SCRAM-SHA-512")).toBeGreaterThan(0);

    const ends = await endOffsets(INPUT);
    expect(ends.reduce((a, b) => a + b, 0)).toBe(RECORDS);
    expect(await committedOffsets(names.group)).toEqual({ errorCode: ErrorCode.NONE, offsets: ends });
    // The transactional id rests in CompleteCommit with no partition: nothing left open. The markers are
    // written after EndTxn's answer, so the Prepare state may still show for a moment.
    const state = await until("the transaction to complete", 15_000, async () => {
      const described = (await client.request(65, 0, { transactionalIds: [names.transactionalId] })).transactionStates[0];
      return described.transactionState.startsWith("Prepare") ? undefined : described;
    });
    expect({ errorCode: state.errorCode, state: state.transactionState, topics: state.topics }).toEqual({ errorCode: ErrorCode.NONE, state: "CompleteCommit", topics: [] });
    for (let p = 0; p < PARTITIONS; p++) {
      const read = await readCommitted(names.output, p);
      expect(read.aborted).toBe(0);
      expect(read.lsoAtHw).toBe(true);
      expect(read.records).toEqual(intended[p]!.map(([k, v]) => [k, v.toUpperCase()] as [string, string]));
    }
  }, TIMEOUT);

  const refusals: { without: "transactionalId" | "group" | "output" | "input"; error: (names: ReturnType<typeof scenario>) => RegExp }[] = [
    { without: "transactionalId", error: () => /FATAL .*TransactionalIdAuthorizationException/ },
    { without: "group", error: (n) => new RegExp(`FATAL .*GroupAuthorizationException.*${n.group}`) },
    { without: "output", error: (n) => new RegExp(`FATAL .*TopicAuthorizationException.*${n.output}`) },
    { without: "input", error: () => new RegExp(`FATAL .*TopicAuthorizationException.*${INPUT}`) },
  ];
  for (const { without, error } of refusals) {
    test(`without its ${without} ACL: the matching authorization error, nothing committed`, async () => {
      const names = scenario(`no-${without}`);
      await createTopic(names.output, PARTITIONS);
      const acls = copierAcls(names);
      // The input's READ ACL is shared by every scenario: the one without it denies READ on it for this run.
      const granted = Object.entries(acls).filter(([name]) => name !== without && name !== "input").map(([, acl]) => acl);
      await broker.broker.services.authorizer.create(granted);
      if (without === "input") await broker.broker.services.authorizer.delete([acls.input]);
      try {
        const run = await runCopier(names, 90_000);
        expect(run.code, `${run.stdout}\n${run.stderr.slice(-4000)}`).toBe(2);
        if (process.env.EOS_SASL_VERBOSE) console.log(without, run.stdout, run.stderr.slice(-3000));
        expect(run.stdout).toMatch(error(names));
        expect(run.stdout).not.toContain("COMMIT");
        expect(await endOffsets(names.output)).toEqual([0, 0, 0]);
        expect((await committedOffsets(names.group)).offsets).toEqual([-1, -1, -1]);
      } finally {
        await broker.broker.services.authorizer.delete(granted);
        if (without === "input") await broker.broker.services.authorizer.create([acls.input]);
      }
    }, TIMEOUT);
  }
});

interface KcatRun {
  code: number | undefined;
  stdout: string;
  stderr: string;
}

/** kcat over SASL_SSL with SCRAM-SHA-256 as `user`, its extra arguments after the connection's. */
async function kcat(user: string, password: string, args: string[], stdin?: string): Promise<KcatRun> {
  const security = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", `sasl.username=${user}`, "-X", `sasl.password=${password}`, "-X", `ssl.ca.location=${certs.caPath}`];
  const child = new LineChild("kcat", ["kcat", "-b", saslSsl, ...security, ...args]);
  if (stdin !== undefined) child.proc.stdin.write(stdin);
  void child.proc.stdin.end();
  const code = await child.exitCodeWithin(60_000);
  return { code, stdout: child.stdout, stderr: child.stderr };
}

describe("kcat over SASL_SSL (SCRAM-SHA-256)", () => {
  const topic = "kcat-topic";
  const lines = Array.from({ length: 100 }, (_, i) => `k${i}:kcat value ${i}`);

  test("produces and consumes as User:kcat", async () => {
    await createTopic(topic, 1);
    const acl = (operation: number): AclBinding => ({ resourceType: Res.TOPIC, resourceName: topic, patternType: Pat.LITERAL, principal: "User:kcat", host: "*", operation, permissionType: Perm.ALLOW });
    await broker.broker.services.authorizer.create([acl(Op.READ), acl(Op.WRITE)]);
    const before = broker.broker.services.sasl.counts.authenticated.get("SCRAM-SHA-256") ?? 0;
    const produced = await kcat("kcat", "kcat-secret", ["-P", "-t", topic, "-p", "0", "-K", ":"], lines.join("\n") + "\n");
    expect(produced.code, produced.stderr).toBe(0);
    const consumed = await kcat("kcat", "kcat-secret", ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k:%s\\n"]);
    expect(consumed.code, consumed.stderr).toBe(0);
    expect(consumed.stdout.trimEnd().split("\n")).toEqual(lines);
    expect(broker.broker.services.sasl.counts.authenticated.get("SCRAM-SHA-256")).toBeGreaterThan(before);
  }, TIMEOUT);

  test("a wrong password: kcat's authentication error, nothing written", async () => {
    const endBefore = (await client.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }] })).topics[0].partitions[0].offset;
    const failedBefore = broker.broker.services.sasl.counts.failed.get("SCRAM-SHA-256") ?? 0;
    const refused = await kcat("kcat", "wrong", ["-P", "-t", topic, "-p", "0", "-X", "message.timeout.ms=10000"], "one\ntwo\n");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256");
    const endAfter = (await client.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }] })).topics[0].partitions[0].offset;
    expect(endAfter).toBe(endBefore);
    expect(broker.broker.services.sasl.counts.failed.get("SCRAM-SHA-256")).toBeGreaterThan(failedBefore);
  }, TIMEOUT);
});
