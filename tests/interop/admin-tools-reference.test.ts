/**
 * Apache Kafka 4.1.1's admin tools and Java admin client against bunka and against a real Apache Kafka
 * broker started here, with the same topics and the same produced batches on both:
 *
 * - `kafka-log-dirs --describe` (DescribeLogDirs): the same partitions with the same sizes (the bytes of
 *   their .log files, which on bunka are read back from the disk), offset lag and isFuture;
 * - `kafka-features describe` (ApiVersions' features): bunka prints the features Apache lists, but for
 *   the KRaft ones, each at level 0; `upgrade` to a level bunka does not serve fails with the error
 *   Apache prints for a level it does not serve, a no-op `disable` succeeds on both (UpdateFeatures);
 * - `kafka-topics --describe` (DescribeTopicPartitions): the same lines, ids aside;
 * - the Java admin client's describeFeatures, describeLogDirs, describeReplicaLogDirs and describeTopics
 *   (tests/interop/java/AdminDescribe.java, compiled here).
 *
 *   bun test --timeout 600000 tests/interop/admin-tools-reference.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { type ApacheKafka, runKafkaTool, startApacheKafka, type ToolResult } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { compileJavaPrograms, ok, runJava } from "../support/cluster-clients.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
const TOPICS: [string, number][] = [
  ["tools-a", 3],
  ["tools-b", 1],
];

let bunka: TestBroker;
let apache: ApacheKafka;

interface Target {
  label: string;
  bootstrap: string;
  nodeId: number;
}
let targets: Target[] = [];

async function runAdminDescribe(bootstrap: string): Promise<string[]> {
  const run = ok(await runJava("AdminDescribe", [bootstrap, TOPICS.map(([t]) => t).join(","), "tools-missing"], 60_000), "AdminDescribe");
  return run.stdout.trim().split("\n");
}

/** The same topics and the same batches on a broker (through its wire protocol, no JVM). */
async function prepare(port: number): Promise<void> {
  const client = await WireClient.connect(port);
  try {
    const created = await client.request(19, 7, {
      topics: TOPICS.map(([name, numPartitions]) => ({ name, numPartitions, replicationFactor: 1, assignments: [], configs: [] })),
      timeoutMs: 30_000,
      validateOnly: false,
    });
    expect(created.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(TOPICS.map(() => ErrorCode.NONE));
    const batches: [string, number, string[]][] = [
      ["tools-a", 0, ["one"]],
      ["tools-a", 2, ["two", "three", "four"]],
      ["tools-a", 2, ["five"]],
      ["tools-b", 0, ["x".repeat(500)]],
    ];
    for (const [topic, partition, values] of batches) {
      // A new leader may answer NOT_LEADER until it has caught up with the topic's creation: ask again.
      for (let attempt = 0; ; attempt++) {
        const res = await client.request(0, 9, {
          transactionalId: null,
          acks: -1,
          timeoutMs: 10_000,
          topicData: [{ name: topic, partitionData: [{ index: partition, records: buildBatch({ records: values.map((value) => ({ value })) }) }] }],
        });
        const errorCode = res.responses[0].partitionResponses[0].errorCode;
        if (errorCode === ErrorCode.NONE) break;
        if (attempt > 50) throw new Error(`produce to ${topic}-${partition}: error ${errorCode}`);
        await new Promise((r) => setImmediate(r));
      }
    }
  } finally {
    client.close();
  }
}

/** The bytes of a bunka partition's .log files on disk. */
function logFileBytes(topic: string, partition: number): number {
  const dir = join(bunka.dataDir, `${topic}-${partition}`);
  return readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
}

beforeAll(async () => {
  const [, started, kafka] = await Promise.all([compileJavaPrograms(["AdminDescribe"]), startTestBroker({ autoCreateTopicsEnable: false }), startApacheKafka()]);
  bunka = started;
  apache = kafka;
  targets = [
    { label: "bunka", bootstrap: bunka.bootstrap, nodeId: 0 },
    { label: "apache", bootstrap: apache.bootstrap, nodeId: 1 },
  ];
  await Promise.all([prepare(bunka.port), prepare(apache.port)]);
}, TIMEOUT);
afterAll(async () => {
  await bunka?.stop();
  await apache?.stop();
});

describe("kafka-log-dirs --describe", () => {
  interface LogDirsJson {
    version: number;
    brokers: { broker: number; logDirs: { logDir: string; error: string | null; partitions: { partition: string; size: number; offsetLag: number; isFuture: boolean }[] }[] }[];
  }
  const logDirs = async (target: Target, extra: string[] = []) => {
    const r = ok(await runKafkaTool("kafka-log-dirs", ["--bootstrap-server", target.bootstrap, "--describe", ...extra]), `kafka-log-dirs on ${target.label}`);
    const lines = r.stdout.trim().split("\n");
    expect(lines.slice(0, 2)).toEqual(["Querying brokers for log directories information", `Received log directory information from brokers ${target.nodeId}`]);
    const parsed = JSON.parse(lines[2]!) as LogDirsJson;
    expect(parsed.version).toBe(1);
    expect(parsed.brokers.map((b) => b.broker)).toEqual([target.nodeId]);
    expect(parsed.brokers[0]!.logDirs.length).toBe(1);
    const dir = parsed.brokers[0]!.logDirs[0]!;
    expect(dir.error).toBeNull();
    const ours = dir.partitions.filter((p) => p.partition.startsWith("tools-")).sort((a, b) => (a.partition < b.partition ? -1 : 1));
    return { logDir: dir.logDir, partitions: ours };
  };

  test("the same partitions, sizes, offset lags and isFuture as Apache Kafka; bunka's sizes are its .log files", async () => {
    const [ours, theirs] = [await logDirs(targets[0]!), await logDirs(targets[1]!)];
    expect(ours.logDir).toBe(resolve(bunka.dataDir));
    expect(ours.partitions).toEqual(theirs.partitions);
    expect(ours.partitions.map((p) => p.partition)).toEqual(["tools-a-0", "tools-a-1", "tools-a-2", "tools-b-0"]);
    for (const p of ours.partitions) {
      const at = p.partition.lastIndexOf("-");
      expect(p.size).toBe(logFileBytes(p.partition.slice(0, at), Number(p.partition.slice(at + 1))));
    }
    expect(ours.partitions.find((p) => p.partition === "tools-b-0")!.size).toBeGreaterThan(500);
  }, TIMEOUT);

  test("--topic-list keeps the named topics only, on both", async () => {
    const [ours, theirs] = [await logDirs(targets[0]!, ["--topic-list", "tools-b"]), await logDirs(targets[1]!, ["--topic-list", "tools-b"])];
    expect(ours.partitions.map((p) => p.partition)).toEqual(["tools-b-0"]);
    expect(ours.partitions).toEqual(theirs.partitions);
  }, TIMEOUT);
});

describe("kafka-features", () => {
  const features = (target: Target, args: string[]) => runKafkaTool("kafka-features", ["--bootstrap-server", target.bootstrap, ...args]);
  const LINE = /^Feature: (\S+)\tSupportedMinVersion: (\S+)\tSupportedMaxVersion: (\S+)\tFinalizedVersionLevel: (\S+)\tEpoch: (\S+)$/;

  test("describe: the features Apache Kafka lists but its KRaft ones, each at level 0, in Apache's format", async () => {
    const ours = ok(await features(targets[0]!, ["describe"]), "kafka-features on bunka").stdout.trim().split("\n");
    const theirs = ok(await features(targets[1]!, ["describe"]), "kafka-features on apache").stdout.trim().split("\n");
    expect(ours).toEqual([
      "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: 0",
      "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: 0",
      "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: 0",
      "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: 0",
    ]);
    for (const line of theirs) expect(line).toMatch(LINE);
    const names = (lines: string[]) => lines.map((l) => LINE.exec(l)![1]);
    expect(names(theirs).filter((n) => n !== "metadata.version" && n !== "kraft.version")).toEqual(names(ours));
    // Apache 4.1.1 finalizes transaction.version 2: its Java producer then uses EndTxn v5, which bunka does not serve.
    expect(theirs.find((l) => l.startsWith("Feature: transaction.version"))).toMatch(/SupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t/);
  }, TIMEOUT);

  test("upgrade to a level the broker does not serve: the same error from both", async () => {
    const ours = await features(targets[0]!, ["upgrade", "--feature", "transaction.version=3"]);
    const theirs = await features(targets[1]!, ["upgrade", "--feature", "transaction.version=3"]);
    expect([ours.code, theirs.code]).toEqual([1, 1]);
    const prefix =
      "Could not upgrade transaction.version to 3. The update failed for all features since the following feature had an error: " +
      "Invalid update version 3 for feature transaction.version. Local controller ";
    expect(ours.stdout.trim()).toBe(`${prefix}0 does not support this feature.`);
    expect(theirs.stdout.trim()).toBe(`${prefix}1 only supports versions 0-2`);
    for (const r of [ours, theirs]) expect(r.stderr).toContain("1 out of 1 operation(s) failed.");
    const metadata = await features(targets[0]!, ["upgrade", "--metadata", "4.1"]);
    expect(metadata.code).toBe(1);
    expect(metadata.stdout).toContain("Invalid update version 27 for feature metadata.version. Local controller 0 does not support this feature.");
  }, TIMEOUT);

  test("disabling a feature at level 0 succeeds and changes nothing, on both", async () => {
    for (const target of targets) {
      const r = ok(await features(target, ["disable", "--feature", "share.version"]), `kafka-features disable on ${target.label}`);
      expect(r.stdout.trim()).toBe("share.version was disabled.");
    }
    const after = ok(await features(targets[0]!, ["describe"]), "kafka-features on bunka").stdout;
    expect(after).toContain("Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: 0");
  }, TIMEOUT);
});

describe("kafka-topics --describe", () => {
  test("prints the same lines as against Apache Kafka, ids and broker configs aside", async () => {
    const normalize = (r: ToolResult, nodeId: number) =>
      r.stdout
        .trim()
        .split("\n")
        .map((l) =>
          l
            .replace(/TopicId: \S+/, "TopicId: <id>")
            .replace(/\tConfigs: .*$/, "\tConfigs: <configs>")
            .replace(new RegExp(`(Leader|Replicas|Isr): ${nodeId}\\b`, "g"), "$1: <node>"),
        );
    const [ours, theirs] = await Promise.all(
      targets.map(async (t) => normalize(ok(await runKafkaTool("kafka-topics", ["--bootstrap-server", t.bootstrap, "--describe", "--topic", "tools-a"]), `kafka-topics on ${t.label}`), t.nodeId)),
    );
    expect(ours).toEqual(theirs!);
    expect(ours![1]).toBe("\tTopic: tools-a\tPartition: 0\tLeader: <node>\tReplicas: <node>\tIsr: <node>\tElr: \tLastKnownElr: ");
    const missing = await runKafkaTool("kafka-topics", ["--bootstrap-server", bunka.bootstrap, "--describe", "--topic", "tools-missing"]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain("Topic 'tools-missing' does not exist as expected");
  }, TIMEOUT);
});

describe("the Java admin client", () => {
  test("describeFeatures, describeLogDirs, describeReplicaLogDirs and describeTopics answer as from Apache Kafka", async () => {
    const [ours, theirs] = await Promise.all(targets.map((t) => runAdminDescribe(t.bootstrap)));
    const facts = (lines: string[], target: Target, dataDir: string) =>
      lines
        .filter((l) => !/^(FEATURE|FINALIZED|EPOCH) /.test(l))
        .map((l) =>
          l
            .replace(`LOGDIR ${target.nodeId} ${dataDir} `, "LOGDIR <node> <dir> ")
            .replace(new RegExp(`(leader=|replicas=\\[|isr=\\[)${target.nodeId}\\b`, "g"), "$1<node>"),
        );
    const apacheDir = theirs!.find((l) => l.startsWith("LOGDIR "))!.split(" ")[2]!;
    expect(facts(ours!, targets[0]!, resolve(bunka.dataDir))).toEqual(facts(theirs!, targets[1]!, apacheDir));
    expect(ours!.filter((l) => /^(FEATURE|FINALIZED|EPOCH) /.test(l))).toEqual([
      "FEATURE eligible.leader.replicas.version 0 0",
      "FEATURE group.version 0 0",
      "FEATURE share.version 0 0",
      "FEATURE transaction.version 0 0",
      "EPOCH 0",
    ]);
    expect(ours).toContain(`LOGDIR 0 ${resolve(bunka.dataDir)} error=none total=yes usable=yes`);
    expect(ours).toContain("PARTITION tools-a 0 leader=0 replicas=[0] isr=[0] elr=[] lastKnownElr=[]");
    expect(ours).toContain("REPLICADIR tools-missing-0 dir=none lag=-1 future=none");
    expect(ours).toContain("MISSING tools-missing UnknownTopicOrPartitionException");
  }, TIMEOUT);
});
