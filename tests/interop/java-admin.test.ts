/**
 * Apache Kafka's own Java tools (4.1.1, from Maven Central) against an in-process bunka: kafka-topics
 * create / describe / list / alter / delete, kafka-configs, and kafka-broker-api-versions. The expected
 * output is what the same tools print against Apache Kafka (tests/interop/apache-kafka-reference.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runKafkaTool, type ToolResult } from "../support/apache-kafka.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";

const TIMEOUT = 90_000;
let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
}, TIMEOUT);
afterAll(async () => {
  await broker?.stop();
});

function ok(r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`tool exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}
const topics = (args: string[]) => runKafkaTool("kafka-topics", ["--bootstrap-server", broker.bootstrap, ...args]);

describe("kafka-topics against bunka", () => {
  test("create, describe, list, add partitions, delete", async () => {
    const created = ok(await topics(["--create", "--topic", "java-orders", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000"]));
    expect(created.stdout.trim()).toBe("Created topic java-orders.");

    const described = ok(await topics(["--describe", "--topic", "java-orders"]));
    const lines = described.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^Topic: java-orders\tTopicId: \S{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000$/);
    const partitions = lines.slice(1).map((l) => l.trim());
    expect(partitions).toHaveLength(3);
    for (const [i, p] of partitions.entries()) {
      expect(p).toMatch(new RegExp(`^Topic: java-orders\\tPartition: ${i}\\tLeader: 0\\tReplicas: 0\\tIsr: 0\\b`));
    }

    expect(ok(await topics(["--list"])).stdout.trim().split("\n")).toContain("java-orders");

    ok(await topics(["--alter", "--topic", "java-orders", "--partitions", "5"]));
    const after = ok(await topics(["--describe", "--topic", "java-orders"]));
    expect(after.stdout).toContain("PartitionCount: 5");

    const duplicate = await topics(["--create", "--topic", "java-orders", "--partitions", "1"]);
    expect(duplicate.code).not.toBe(0);
    expect(duplicate.stdout + duplicate.stderr).toContain("Topic 'java-orders' already exists.");

    const badRf = await topics(["--create", "--topic", "java-rf", "--partitions", "1", "--replication-factor", "3"]);
    expect(badRf.code).not.toBe(0);
    expect(badRf.stdout + badRf.stderr).toContain("InvalidReplicationFactorException");

    ok(await topics(["--delete", "--topic", "java-orders"]));
    expect(ok(await topics(["--list"])).stdout.split("\n")).not.toContain("java-orders");
  }, TIMEOUT);

  test("kafka-configs describes and alters topic configs", async () => {
    ok(await topics(["--create", "--topic", "java-configs", "--partitions", "1"]));
    const base = ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "java-configs"];
    ok(await runKafkaTool("kafka-configs", [...base, "--alter", "--add-config", "retention.ms=1000,max.message.bytes=2048"]));
    const described = ok(await runKafkaTool("kafka-configs", [...base, "--describe"]));
    expect(described.stdout).toContain("retention.ms=1000");
    expect(described.stdout).toContain("max.message.bytes=2048");
    ok(await runKafkaTool("kafka-configs", [...base, "--alter", "--delete-config", "retention.ms"]));
    const after = ok(await runKafkaTool("kafka-configs", [...base, "--describe"]));
    expect(after.stdout).not.toContain("retention.ms=1000");
  }, TIMEOUT);

  test("kafka-broker-api-versions lists what bunka serves", async () => {
    const res = ok(await runKafkaTool("kafka-broker-api-versions", ["--bootstrap-server", broker.bootstrap]));
    expect(res.stdout).toContain(`127.0.0.1:${broker.port} (id: 0 rack: null`);
    expect(res.stdout).toMatch(/Metadata\(3\): 0 to 12 \[usable: 1[23]\]/);
    expect(res.stdout).toMatch(/ApiVersions\(18\): 0 to 4 \[usable: 4\]/);
  }, TIMEOUT);
});
