/**
 * ACLs with Apache Kafka 4.1.1's own tools and clients against bunka with StandardAuthorizer on:
 * `kafka-acls` adds, lists and removes (--force) ACLs; a Java transactional producer denied WRITE on its
 * transactional id fails with TransactionalIdAuthorizationException, and a Java consumer denied READ on
 * its group with GroupAuthorizationException, as against Apache Kafka.
 *
 * Every connection is User:ANONYMOUS here (no SASL): it is granted ALL on the cluster and on every topic,
 * group and transactional id, and the denials are DENY ACLs added with kafka-acls, which win.
 *
 * ACLS_REFERENCE=1 also runs the same kafka-acls commands against an Apache Kafka 4.1.1 broker with
 * StandardAuthorizer and compares their output with bunka's (one more JVM; off by default).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { type AclBinding, AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { type ApacheKafka, ensureKafkaLibs, javaBin, LOG4J_CONFIG, REPO_ROOT, startApacheKafka } from "../support/apache-kafka.ts";
import { killLiveChildren, LineChild } from "../support/line-child.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
const JAVA_SOURCES = join(import.meta.dir, "java");
const CLASSES = join(REPO_ROOT, ".cache", "java-classes", "acls");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
const ACL_COMMAND = "org.apache.kafka.tools.AclCommand";

let libs = "";
let broker: TestBroker;

async function run(main: string, args: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new LineChild(`java ${main}`, [javaBin(), ...JVM_FLAGS, "-cp", `${CLASSES}:${libs}/*`, main, ...args]);
  const code = await child.exitCodeWithin(timeoutMs);
  return { code: code ?? 124, stdout: child.stdout, stderr: child.stderr };
}

const kafkaAcls = (bootstrap: string, args: string[]) => run(ACL_COMMAND, ["--bootstrap-server", bootstrap, ...args]);

async function compileJava(): Promise<void> {
  const source = join(JAVA_SOURCES, "AclClient.java");
  const cls = join(CLASSES, "AclClient.class");
  if (existsSync(cls) && statSync(cls).mtimeMs >= statSync(source).mtimeMs) return;
  mkdirSync(CLASSES, { recursive: true });
  const javac = process.env.JAVA_HOME && existsSync(join(process.env.JAVA_HOME, "bin/javac")) ? join(process.env.JAVA_HOME, "bin/javac") : "javac";
  const proc = Bun.spawn([javac, "-d", CLASSES, "-cp", `${libs}/*`, source], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac failed (${code}):\n${out}${err}`);
}

const allow = (resourceType: number, resourceName: string): AclBinding => ({
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
  await compileJava();
  broker = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, autoCreateTopicsEnable: true });
  await broker.broker.services.authorizer.create([
    allow(Res.CLUSTER, "kafka-cluster"),
    allow(Res.TOPIC, "*"),
    allow(Res.GROUP, "*"),
    allow(Res.TRANSACTIONAL_ID, "*"),
  ]);
}, TIMEOUT);

afterAll(async () => {
  killLiveChildren();
  await broker?.stop();
});

/** The ACL lines kafka-acls --list prints, without the resource headers' order mattering. */
const aclLines = (stdout: string) =>
  stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("(principal="))
    .sort();

describe("kafka-acls", () => {
  test(
    "--add, --list and --remove --force",
    async () => {
      const added = await kafkaAcls(broker.bootstrap, ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]);
      expect(added.code).toBe(0);
      expect(added.stdout).toContain("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`");
      const prefixed = await kafkaAcls(broker.bootstrap, ["--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed"]);
      expect(prefixed.code).toBe(0);

      const listed = await kafkaAcls(broker.bootstrap, ["--list", "--topic", "t"]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`");
      expect(aclLines(listed.stdout)).toContain("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)");
      const all = await kafkaAcls(broker.bootstrap, ["--list"]);
      expect(aclLines(all.stdout)).toContain("(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)");

      const removed = await kafkaAcls(broker.bootstrap, ["--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]);
      expect(removed.code).toBe(0);
      const after = await kafkaAcls(broker.bootstrap, ["--list", "--topic", "t"]);
      expect(aclLines(after.stdout)).not.toContain("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)");
      expect(broker.broker.services.authorizer.acls({ resourceType: Res.TOPIC, resourceName: "t", patternType: Pat.LITERAL, principal: "User:alice", host: null, operation: Op.ANY, permissionType: Perm.ANY })).toEqual([]);
      await kafkaAcls(broker.bootstrap, ["--remove", "--force", "--topic", "logs-", "--resource-pattern-type", "prefixed"]);
    },
    TIMEOUT,
  );
});

describe("Java clients refused", () => {
  test(
    "a transactional producer denied WRITE on its transactional id: TransactionalIdAuthorizationException",
    async () => {
      const denied = await kafkaAcls(broker.bootstrap, ["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--transactional-id", "denied-tx"]);
      expect(denied.code).toBe(0);
      const refused = await run("AclClient", ["producer", broker.bootstrap, "acl-topic", "denied-tx"]);
      expect(refused.stdout).toContain("EXCEPTION org.apache.kafka.common.errors.TransactionalIdAuthorizationException");
      // Another transactional id is allowed: the producer commits.
      const allowed = await run("AclClient", ["producer", broker.bootstrap, "acl-topic", "allowed-tx"]);
      expect(allowed.stdout).toContain("OK");
    },
    TIMEOUT,
  );

  test(
    "a consumer denied READ on its group: GroupAuthorizationException",
    async () => {
      const denied = await kafkaAcls(broker.bootstrap, ["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--group", "denied-group"]);
      expect(denied.code).toBe(0);
      const refused = await run("AclClient", ["consumer", broker.bootstrap, "acl-topic", "denied-group"]);
      expect(refused.stdout).toContain("EXCEPTION org.apache.kafka.common.errors.GroupAuthorizationException");
      const allowed = await run("AclClient", ["consumer", broker.bootstrap, "acl-topic", "allowed-group"]);
      expect(allowed.stdout).toContain("OK");
    },
    TIMEOUT,
  );
});

/**
 * The codes and messages a principal refused by DENY ACLs gets, request by request, with raw frames. The
 * broker starts with no ACL and allow.everyone.if.no.acl.found, so User:ANONYMOUS may add its own.
 */
async function refusals(bootstrap: string): Promise<unknown[]> {
  const acls = (args: string[]) => kafkaAcls(bootstrap, args).then((r) => expect(r.code).toBe(0));
  await acls(["--add", "--allow-principal", "User:ANONYMOUS", "--operation", "All", "--cluster", "--topic", "*", "--group", "*", "--transactional-id", "*"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--operation", "Delete", "--topic", "t"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe", "--topic", "u"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--group", "g"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe", "--group", "gd"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--transactional-id", "tx"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read", "--operation", "DescribeConfigs", "--operation", "AlterConfigs", "--operation", "Alter", "--topic", "r"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Delete", "--group", "gdel"]);
  await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe", "--transactional-id", "txd"]);
  const [host, port] = bootstrap.split(":");
  const c = await WireClient.connect(Number(port), host);
  try {
    const created = await c.request(19, 7, { topics: ["t", "u", "v", "r"].map((name) => ({ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] })), timeoutMs: 10000, validateOnly: false });
    const out: unknown[] = [["create topics", created.topics.map((t: { name: string; errorCode: number }) => [t.name, t.errorCode])]];
    const produce = await c.request(0, 9, { transactionalId: null, acks: -1, timeoutMs: 5000, topicData: ["t", "v"].map((name) => ({ name, partitionData: [{ index: 0, records: buildBatch({ records: [{ value: "x" }] }) }] })) });
    // Only the refused topic: Apache's new topic may not have its leader yet.
    out.push(["produce", produce.responses.filter((r: { name: string }) => r.name === "t").map((r: { partitionResponses: { errorCode: number }[] }) => r.partitionResponses[0]!.errorCode)]);
    const named = await c.request(3, 12, { topics: ["u", "v"].map((name) => ({ name, topicId: "00000000-0000-0000-0000-000000000000" })), allowAutoTopicCreation: false, includeTopicAuthorizedOperations: true });
    out.push(["metadata named", named.topics.map((t: { name: string; errorCode: number; topicAuthorizedOperations: number }) => [t.name, t.errorCode, t.topicAuthorizedOperations]).sort()]);
    const all = await c.request(3, 12, { topics: null, allowAutoTopicCreation: false });
    out.push(["metadata all", (all.topics as { name: string }[]).map((t) => t.name).filter((n) => ["t", "u", "v"].includes(n)).sort()]);
    const offsets = await c.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: ["u", "v"].map((name) => ({ name, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] })) });
    out.push(["list offsets", offsets.topics.filter((t: { name: string }) => t.name === "u").map((t: { partitions: { errorCode: number }[] }) => t.partitions[0]!.errorCode)]);
    const commit = await c.request(8, 8, { groupId: "g", generationIdOrMemberEpoch: -1, memberId: "", groupInstanceId: null, topics: [{ name: "v", partitions: [{ partitionIndex: 0, committedOffset: 0, committedLeaderEpoch: -1, committedMetadata: "" }] }] });
    out.push(["offset commit", commit.topics[0].partitions[0].errorCode]);
    const coordinator = await c.request(10, 4, { keyType: 0, coordinatorKeys: ["gd"] });
    out.push(["find coordinator", coordinator.coordinators[0].errorCode]);
    const join = await c.request(11, 5, { groupId: "g", sessionTimeoutMs: 10000, rebalanceTimeoutMs: 10000, memberId: "", groupInstanceId: null, protocolType: "consumer", protocols: [{ name: "range", metadata: new Uint8Array(0) }] });
    out.push(["join group", join.errorCode]);
    const init = await c.request(22, 4, { transactionalId: "tx", transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 });
    out.push(["init producer id", init.errorCode]);
    const records = await c.request(21, 2, { topics: [{ name: "t", partitions: [{ partitionIndex: 0, offset: 0 }] }], timeoutMs: 5000 });
    out.push(["delete records", records.topics[0].partitions[0].errorCode]);
    const deleted = await c.request(20, 5, { topicNames: ["t"], timeoutMs: 5000 });
    out.push(["delete topics", deleted.responses[0].errorCode]);
    // Creations refused one by one (patterns of MATCH or ANY and ANY operations are not compared: Apache's
    // request fails as a whole with UNKNOWN_SERVER_ERROR, README "Authorization").
    const creations = await c.request(30, 3, {
      creations: [
        { resourceType: Res.TOPIC, resourceName: "x", resourcePatternType: Pat.LITERAL, principal: "alice", host: "*", operation: Op.READ, permissionType: Perm.ALLOW },
        { resourceType: Res.CLUSTER, resourceName: "c", resourcePatternType: Pat.LITERAL, principal: "User:a", host: "*", operation: Op.ALTER, permissionType: Perm.ALLOW },
        { resourceType: Res.TOPIC, resourceName: "", resourcePatternType: Pat.LITERAL, principal: "User:a", host: "*", operation: Op.READ, permissionType: Perm.ALLOW },
        { resourceType: Res.TOPIC, resourceName: "ok", resourcePatternType: Pat.PREFIXED, principal: "User:a", host: "*", operation: Op.READ, permissionType: Perm.ALLOW },
      ],
    });
    out.push(["create acls", creations.results.map((r: { errorCode: number; errorMessage: string | null }) => [r.errorCode, r.errorMessage])]);
    const matching = await c.request(29, 3, { resourceTypeFilter: Res.TOPIC, resourceNameFilter: "t", patternTypeFilter: Pat.MATCH, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY });
    out.push(["describe acls match", matching.errorCode, matching.errorMessage, (matching.resources as { resourceName: string; acls: unknown[] }[]).map((r) => [r.resourceName, r.acls.length]).sort()]);
    const deletedAcls = await c.request(31, 3, { filters: [{ resourceTypeFilter: Res.TOPIC, resourceNameFilter: "ok", patternTypeFilter: Pat.PREFIXED, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY }] });
    out.push(["delete acls", deletedAcls.filterResults.map((r: { errorCode: number; errorMessage: string | null; matchingAcls: { errorCode: number; errorMessage: string | null; resourceName: string }[] }) => [r.errorCode, r.errorMessage, r.matchingAcls.map((m) => [m.errorCode, m.errorMessage, m.resourceName])])]);
    out.push(...(await moreRefusals(c)));
    // Last, the cluster's own operations denied (after these no ACL can be added: ALTER is denied too).
    await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Create", "--topic", "auto-", "--resource-pattern-type", "prefixed"]);
    await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "*"]);
    await acls(["--add", "--deny-principal", "User:ANONYMOUS", "--cluster", ...["Alter", "Create", "Describe", "IdempotentWrite", "DescribeConfigs", "AlterConfigs"].flatMap((op) => ["--operation", op])]);
    out.push(...(await clusterRefusals(c)));
    return out;
  } finally {
    c.close();
  }
}

/** What needs the cluster's operations, once they are denied. */
async function clusterRefusals(c: WireClient): Promise<unknown[]> {
  const out: unknown[] = [];
  const anyFilter = { resourceTypeFilter: Res.ANY, resourceNameFilter: null, patternTypeFilter: Pat.ANY, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY };
  out.push(["idempotent init producer id", (await c.request(22, 4, { transactionalId: null, transactionTimeoutMs: 60000, producerId: -1, producerEpoch: -1 })).errorCode]);
  const auto = await c.request(3, 12, { topics: [{ name: "auto-x", topicId: "00000000-0000-0000-0000-000000000000" }], allowAutoTopicCreation: true });
  out.push(["metadata auto-create", auto.topics[0].errorCode]);
  out.push(["metadata cluster operations", (await c.request(3, 10, { topics: [], allowAutoTopicCreation: false, includeClusterAuthorizedOperations: true })).clusterAuthorizedOperations]);
  const create = (name: string) => c.request(19, 7, { topics: [{ name, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: true });
  out.push(["create topics by topic", (await create("new-x")).topics[0].errorCode]);
  const refused = (await create("auto-y")).topics[0];
  out.push(["create topics refused", refused.errorCode, refused.errorMessage]);
  out.push(["describe cluster operations", (await c.request(60, 1, { includeClusterAuthorizedOperations: true, endpointType: 1 })).clusterAuthorizedOperations]);
  const brokerConfigs = await c.request(32, 4, { resources: [{ resourceType: 4, resourceName: "1", configurationKeys: null }], includeSynonyms: false, includeDocumentation: false });
  out.push(["describe broker configs", brokerConfigs.results[0].errorCode, brokerConfigs.results[0].errorMessage]);
  const alterBroker = await c.request(44, 1, { resources: [{ resourceType: 4, resourceName: "1", configs: [{ name: "log.retention.ms", configOperation: 0, value: "1000" }] }], validateOnly: true });
  out.push(["alter broker configs", alterBroker.responses[0].errorCode, alterBroker.responses[0].errorMessage]);
  out.push(["create acls", (await c.request(30, 3, { creations: [{ resourceType: Res.TOPIC, resourceName: "x", resourcePatternType: Pat.LITERAL, principal: "User:a", host: "*", operation: Op.READ, permissionType: Perm.ALLOW }] })).results[0].errorCode]);
  out.push(["describe acls", (await c.request(29, 3, anyFilter)).errorCode]);
  out.push(["delete acls", (await c.request(31, 3, { filters: [anyFilter] })).filterResults[0].errorCode]);
  return out;
}

/** Group, transaction, config and log APIs refused (only refusals are compared: the rest depends on timing). */
async function moreRefusals(c: WireClient): Promise<unknown[]> {
  const out: unknown[] = [];
  const fetched = await c.request(1, 12, {
    replicaId: -1, maxWaitMs: 0, minBytes: 0, maxBytes: 1 << 20, isolationLevel: 0, sessionId: 0, sessionEpoch: -1,
    topics: [{ topic: "r", partitions: [{ partition: 0, currentLeaderEpoch: -1, fetchOffset: 0, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: 1 << 20 }] }],
    forgottenTopicsData: [], rackId: "",
  });
  out.push(["fetch", fetched.responses[0].partitions[0].errorCode]);
  out.push(["describe producers", (await c.request(61, 0, { topics: [{ name: "r", partitionIndexes: [0] }] })).topics[0].partitions[0].errorCode]);
  const commit = await c.request(8, 8, { groupId: "ok", generationIdOrMemberEpoch: -1, memberId: "", groupInstanceId: null, topics: [{ name: "r", partitions: [{ partitionIndex: 0, committedOffset: 0, committedLeaderEpoch: -1, committedMetadata: "" }] }] });
  out.push(["offset commit topic", commit.topics[0].partitions[0].errorCode]);
  const fetchedOffsets = await c.request(9, 8, { groups: [{ groupId: "gd", topics: null }, { groupId: "ok", topics: [{ name: "u", partitionIndexes: [0] }] }], requireStable: false });
  // The second group's topic refusal is compared only once Apache's group coordinator has loaded.
  const second = fetchedOffsets.groups[1];
  out.push(["offset fetch", fetchedOffsets.groups[0].errorCode, second.errorCode === 0 ? second.topics.map((t: { name: string; partitions: { errorCode: number }[] }) => [t.name, t.partitions[0]!.errorCode]) : "not loaded"]);
  out.push(["describe groups", (await c.request(15, 5, { groups: ["gd"], includeAuthorizedOperations: false })).groups[0].errorCode]);
  out.push(["delete groups", (await c.request(42, 2, { groupsNames: ["gdel"] })).results[0].errorCode]);
  out.push(["offset delete", (await c.request(47, 0, { groupId: "gdel", topics: [{ name: "v", partitions: [{ partitionIndex: 0 }] }] })).errorCode]);
  const ref = { producerId: 1, producerEpoch: 0 };
  out.push(["add offsets (id)", (await c.request(25, 3, { transactionalId: "tx", ...ref, groupId: "ok" })).errorCode]);
  out.push(["add offsets (group)", (await c.request(25, 3, { transactionalId: "tx2", ...ref, groupId: "g" })).errorCode]);
  const txnCommit = await c.request(28, 3, { transactionalId: "tx", groupId: "ok", ...ref, generationId: -1, memberId: "", groupInstanceId: null, topics: [{ name: "v", partitions: [{ partitionIndex: 0, committedOffset: 0, committedLeaderEpoch: -1, committedMetadata: "" }] }] });
  out.push(["txn offset commit", txnCommit.topics[0].partitions[0].errorCode]);
  out.push(["end txn", (await c.request(26, 3, { transactionalId: "tx", ...ref, committed: true })).errorCode]);
  const addId = await c.request(24, 3, { v3AndBelowTransactionalId: "tx", v3AndBelowProducerId: 1, v3AndBelowProducerEpoch: 0, v3AndBelowTopics: [{ name: "v", partitions: [0] }] });
  out.push(["add partitions (id)", addId.resultsByTopicV3AndBelow.map((t: { name: string; resultsByPartition: { partitionErrorCode: number }[] }) => [t.name, t.resultsByPartition[0]!.partitionErrorCode])]);
  const addTopic = await c.request(24, 3, { v3AndBelowTransactionalId: "tx2", v3AndBelowProducerId: 1, v3AndBelowProducerEpoch: 0, v3AndBelowTopics: [{ name: "t", partitions: [0] }, { name: "v", partitions: [0] }] });
  out.push(["add partitions (topic)", addTopic.resultsByTopicV3AndBelow.map((t: { name: string; resultsByPartition: { partitionErrorCode: number }[] }) => [t.name, t.resultsByPartition[0]!.partitionErrorCode]).sort()]);
  out.push(["describe transactions", (await c.request(65, 0, { transactionalIds: ["txd"] })).transactionStates[0].errorCode]);
  const configs = await c.request(32, 4, { resources: [{ resourceType: 2, resourceName: "r", configurationKeys: null }], includeSynonyms: false, includeDocumentation: false });
  out.push(["describe configs", configs.results[0].errorCode, configs.results[0].errorMessage]);
  const incremental = await c.request(44, 1, { resources: [{ resourceType: 2, resourceName: "r", configs: [{ name: "retention.ms", configOperation: 0, value: "1000" }] }], validateOnly: true });
  out.push(["incremental alter configs", incremental.responses[0].errorCode, incremental.responses[0].errorMessage]);
  const legacy = await c.request(33, 2, { resources: [{ resourceType: 2, resourceName: "r", configs: [] }], validateOnly: true });
  out.push(["alter configs", legacy.responses[0].errorCode, legacy.responses[0].errorMessage]);
  const grown = await c.request(37, 3, { topics: [{ name: "r", count: 2, assignments: null }], timeoutMs: 5000, validateOnly: true });
  out.push(["create partitions", grown.results[0].errorCode, grown.results[0].errorMessage]);
  return out;
}

describe.if(process.env.ACLS_REFERENCE === "1")("the same against Apache Kafka 4.1.1", () => {
  let apache: ApacheKafka;
  beforeAll(async () => {
    apache = await startApacheKafka({ serverProperties: { "authorizer.class.name": STANDARD_AUTHORIZER_CLASS, "super.users": "User:ANONYMOUS" } });
  }, TIMEOUT);
  afterAll(async () => {
    await apache?.stop();
  });

  test(
    "a principal refused by DENY ACLs gets Apache's codes and messages, request by request",
    async () => {
      const reference = await startApacheKafka({ serverProperties: { "authorizer.class.name": STANDARD_AUTHORIZER_CLASS, "allow.everyone.if.no.acl.found": true } });
      const ours = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, allowEveryoneIfNoAclFound: true });
      try {
        const theirs = await refusals(reference.bootstrap);
        const mine = await refusals(ours.bootstrap);
        // Apache's group coordinator may not have loaded yet (NOT_COORDINATOR): then that part is not compared.
        const offsetFetch = (out: unknown[]) => out.findIndex((x) => Array.isArray(x) && x[0] === "offset fetch");
        const theirOffsetFetch = theirs[offsetFetch(theirs)] as unknown[];
        if (theirOffsetFetch[2] === "not loaded") (mine[offsetFetch(mine)] as unknown[])[2] = "not loaded";
        expect(mine).toEqual(theirs);
        // The Java clients refused the same way by both (the DENY ACLs refusals() added).
        const clients = async (bootstrap: string) => [
          (await run("AclClient", ["producer", bootstrap, "v", "tx"])).stdout.split("\n").filter((l) => l.startsWith("EXCEPTION")),
          (await run("AclClient", ["consumer", bootstrap, "v", "g"])).stdout.split("\n").filter((l) => l.startsWith("EXCEPTION")),
        ];
        const theirClients = await clients(reference.bootstrap);
        expect(theirClients).toEqual([["EXCEPTION org.apache.kafka.common.errors.TransactionalIdAuthorizationException"], ["EXCEPTION org.apache.kafka.common.errors.GroupAuthorizationException"]]);
        expect(await clients(ours.bootstrap)).toEqual(theirClients);
      } finally {
        await ours.stop();
        await reference.stop();
      }
    },
    TIMEOUT * 2,
  );

  test(
    "kafka-acls prints the same for the same commands, refusals included",
    async () => {
      const steps: string[][] = [
        ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "ref"],
        ["--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "*", "--resource-pattern-type", "prefixed"],
        ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "ref", "--allow-host", "10.0.0.1"],
        ["--list", "--topic", "ref"],
        ["--list", "--topic", "ref", "--resource-pattern-type", "match"],
        ["--remove", "--force", "--topic", "ref"],
        ["--list", "--topic", "ref"],
      ];
      const fresh = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, superUsers: ["User:ANONYMOUS"] });
      try {
        for (const step of steps) {
          const [ours, theirs] = [await kafkaAcls(fresh.bootstrap, step), await kafkaAcls(apache.bootstrap, step)];
          expect([step.join(" "), ours.code, aclLines(ours.stdout)]).toEqual([step.join(" "), theirs.code, aclLines(theirs.stdout)]);
        }
      } finally {
        await fresh.stop();
      }
    },
    TIMEOUT,
  );
});
