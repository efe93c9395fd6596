/**
 * Apache Kafka's own Java tools (4.1.1, from Maven Central) against an in-process bunka: kafka-topics
 * create / describe / list / alter / delete, kafka-configs (topic configs, compaction, --describe --all,
 * the cleaner's broker settings), and kafka-broker-api-versions. The expected
 * output is what the same tools print against Apache Kafka (tests/interop/apache-kafka-reference.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { TOPIC_CONFIG_NAMES } from "../../src/domain/topic-config.ts";
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

  test("kafka-topics --create --config cleanup.policy=compact,delete, then kafka-configs --alter --add-config cleanup.policy=compact", async () => {
    const created = ok(await topics(["--create", "--topic", "java-compacted", "--partitions", "1", "--config", "cleanup.policy=compact,delete"]));
    expect(created.stdout.trim()).toBe("Created topic java-compacted.");
    // Apache lists min.insync.replicas=1 here too, which its storage format sets cluster-wide.
    expect(ok(await topics(["--describe", "--topic", "java-compacted"])).stdout).toContain("Configs: cleanup.policy=compact,delete\n");
    expect(broker.broker.services.topics.get("java-compacted")!.configs).toEqual({ "cleanup.policy": "compact,delete" });

    const base = ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "java-compacted"];
    const altered = ok(await runKafkaTool("kafka-configs", [...base, "--alter", "--add-config", "cleanup.policy=compact,min.cleanable.dirty.ratio=0.1"]));
    expect(altered.stdout.trim()).toBe("Completed updating config for topic java-compacted.");
    // The same lines as against Apache Kafka 4.1.1.
    expect(ok(await runKafkaTool("kafka-configs", [...base, "--describe"])).stdout).toBe(
      "Dynamic configs for topic java-compacted are:\n" +
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n" +
        "  min.cleanable.dirty.ratio=0.1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.cleanable.dirty.ratio=0.1, DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}\n",
    );
    const list = ok(await runKafkaTool("kafka-configs", [...base, "--alter", "--add-config", "cleanup.policy=[delete,compact]"]));
    expect(list.code).toBe(0);
    expect(broker.broker.services.topics.get("java-compacted")!.configs["cleanup.policy"]).toBe("delete,compact");

    const refused = await runKafkaTool("kafka-configs", [...base, "--alter", "--add-config", "remote.storage.enable=true"]);
    expect(refused.code).toBe(1);
    expect(refused.stdout + refused.stderr).toContain(
      "InvalidConfigurationException: Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
    );
  }, TIMEOUT);

  test("kafka-configs --describe --all prints every topic config in Apache's format", async () => {
    ok(await topics(["--create", "--topic", "java-all-configs", "--partitions", "1", "--config", "min.cleanable.dirty.ratio=1", "--config", "preallocate=TRUE"]));
    const described = ok(await runKafkaTool("kafka-configs", ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "java-all-configs", "--describe", "--all"]));
    const lines = described.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("All configs for topic java-all-configs are:");
    const configs = lines.slice(1);
    expect(configs.map((line) => line.trim().split("=")[0])).toEqual([...TOPIC_CONFIG_NAMES]);
    for (const line of configs) expect(line).toMatch(/^ {2}[a-z0-9.]+=\S* sensitive=false synonyms=\{.*\}$/);
    // Lines Apache Kafka 4.1.1 prints the same for the same topic.
    expect(configs).toContain(
      "  min.cleanable.dirty.ratio=1.0 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.cleanable.dirty.ratio=1.0, DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}",
    );
    expect(configs).toContain("  preallocate=true sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:preallocate=true, DEFAULT_CONFIG:log.preallocate=false}");
    expect(configs).toContain("  remote.storage.enable=false sensitive=false synonyms={}");
    expect(configs).toContain("  segment.ms=604800000 sensitive=false synonyms={}");
    expect(configs).toContain(
      "  max.compaction.lag.ms=9223372036854775807 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.max.compaction.lag.ms=9223372036854775807}",
    );
  }, TIMEOUT);

  test("kafka-configs changes the log cleaner's settings for the cluster, and refuses log.cleaner.enable", async () => {
    const brokers = ["--bootstrap-server", broker.bootstrap, "--entity-type", "brokers"];
    const set = ok(await runKafkaTool("kafka-configs", [...brokers, "--entity-default", "--alter", "--add-config", "log.cleaner.backoff.ms=2000,log.cleaner.threads=2"]));
    expect(set.stdout.trim()).toBe("Completed updating default config for brokers in the cluster.");
    expect(broker.broker.services.runtimeConfig.cleaner()).toMatchObject({ backoffMs: 2000, threads: 2 });
    expect(ok(await runKafkaTool("kafka-configs", [...brokers, "--entity-default", "--describe"])).stdout).toBe(
      "Default configs for brokers in the cluster are:\n" +
        "  log.cleaner.backoff.ms=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=2000}\n" +
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}\n",
    );
    const all = ok(await runKafkaTool("kafka-configs", [...brokers, "--entity-name", "0", "--describe", "--all"])).stdout;
    expect(all).toContain(
      "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}\n",
    );
    expect(all).toContain("  log.cleaner.enable=true sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.enable=true}\n");

    const refused = await runKafkaTool("kafka-configs", [...brokers, "--entity-name", "0", "--alter", "--add-config", "log.cleaner.enable=false"]);
    expect(refused.code).toBe(1);
    expect(refused.stdout + refused.stderr).toContain("InvalidRequestException: Cannot update these configs dynamically: Set(log.cleaner.enable)");

    ok(await runKafkaTool("kafka-configs", [...brokers, "--entity-default", "--alter", "--delete-config", "log.cleaner.backoff.ms,log.cleaner.threads"]));
    expect(broker.broker.services.runtimeConfig.cleaner()).toMatchObject({ backoffMs: 15000, threads: 1 });
  }, TIMEOUT);

  test("kafka-broker-api-versions lists what bunka serves", async () => {
    const res = ok(await runKafkaTool("kafka-broker-api-versions", ["--bootstrap-server", broker.bootstrap]));
    expect(res.stdout).toContain(`127.0.0.1:${broker.port} (id: 0 rack: null`);
    expect(res.stdout).toMatch(/Metadata\(3\): 0 to 12 \[usable: 1[23]\]/);
    expect(res.stdout).toMatch(/ApiVersions\(18\): 0 to 4 \[usable: 4\]/);
  }, TIMEOUT);
});
