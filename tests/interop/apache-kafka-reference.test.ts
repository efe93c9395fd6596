/**
 * The reference broker and its tools work: Apache Kafka (KRaft, single node) started by the helper,
 * driven by its own CLI tools. The bunka interop tests follow this pattern with bunka in place of
 * startApacheKafka(). Nothing here runs against bunka: scripts/test reports these passes on a line of their
 * own, not among bunka's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runKafkaTool, startApacheKafka, type ApacheKafka, type ToolResult } from "../support/apache-kafka.ts";

// Explicit per-test timeouts: JVM tools take ~1 s to start, and a consumer group's first join waits
// group.initial.rebalance.delay.ms (3 s, Kafka's default). Every wait inside is for a condition.
const TIMEOUT = 90_000;

let kafka: ApacheKafka;

beforeAll(async () => {
  kafka = await startApacheKafka();
}, TIMEOUT);

afterAll(async () => {
  await kafka?.stop();
});

function ok(r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`tool exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}

// "[reference]" opens the name of every test here: scripts/test counts them apart from bunka's passes,
// since they check the harness and Apache Kafka, not bunka.
describe("[reference] Apache Kafka alone", () => {
  const topic = "reference-topic";

  test("kafka-topics creates, describes and lists a topic", async () => {
    const created = ok(
      await runKafkaTool("kafka-topics", [
        "--bootstrap-server",
        kafka.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
      ]),
    );
    expect(created.stdout.trim()).toBe(`Created topic ${topic}.`);

    const described = ok(await runKafkaTool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--describe", "--topic", topic]));
    const lines = described.stdout.trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^Topic: ${topic}\\tTopicId: \\S{22}\\tPartitionCount: 3\\tReplicationFactor: 1\\t`));
    const partitions = lines.slice(1).map((l) => l.trim());
    expect(partitions).toHaveLength(3);
    for (const [i, p] of partitions.entries()) {
      expect(p).toMatch(new RegExp(`^Topic: ${topic}\\tPartition: ${i}\\tLeader: 1\\tReplicas: 1\\tIsr: 1\\b`));
    }

    const listed = ok(await runKafkaTool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--list"]));
    expect(listed.stdout.trim().split("\n")).toContain(topic);
  }, TIMEOUT);

  test("console producer and consumer round-trip 10 records", async () => {
    const values = Array.from({ length: 10 }, (_, i) => `value-${i}`);
    ok(
      await runKafkaTool(
        "kafka-console-producer",
        [
          "--bootstrap-server",
          kafka.bootstrap,
          "--topic",
          topic,
          "--property",
          "parse.key=true",
          "--property",
          "key.separator=:",
        ],
        { stdin: values.map((v, i) => `key-${i}:${v}`).join("\n") + "\n" },
      ),
    );

    const consumed = ok(
      await runKafkaTool("kafka-console-consumer", [
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "10",
        "--timeout-ms",
        "30000",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
      ]),
    );
    const records = consumed.stdout.trim().split("\n");
    // Three partitions: order holds within a partition only, so compare as sets.
    expect(records.toSorted()).toEqual(values.map((v, i) => `key-${i}:${v}`).toSorted());
    expect(consumed.stderr).toContain("Processed a total of 10 messages");
  }, TIMEOUT);
});
