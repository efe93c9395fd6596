/**
 * The clients that change configs with AlterConfigs (key 33) rather than IncrementalAlterConfigs, against an
 * in-process bunka: kafkajs 2.2.4 (admin.alterConfigs, AlterConfigs v0-1, with describeConfigs) and
 * librdkafka through confluent-kafka (AdminClient.alter_configs, tests/interop/python/alter_configs.py).
 * Both replace a topic's configs (what is not named goes back to its default), see a refusal with
 * Apache's code and message, and replace the broker's own dynamic layer. The script's output against
 * Apache Kafka 4.1.1 was the same, except that Apache applies broker changes a moment later (its
 * DescribeConfigs right after the change still shows the old values) and bunka at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigResourceTypes, Kafka, logLevel } from "kafkajs";
import { REPO_ROOT } from "../support/apache-kafka.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";

const TIMEOUT = 120_000;
const SOURCE = { TOPIC: 1, BROKER: 2, DEFAULT: 5 };
let broker: TestBroker;

beforeAll(async () => {
  await ensureInteropClients();
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
}, TIMEOUT);
afterAll(async () => {
  await broker?.stop();
});

describe("kafkajs alterConfigs", () => {
  test("replaces a topic's configs, is refused with Apache's error, and replaces the broker's layer", async () => {
    const kafka = new Kafka({ clientId: "interop-alter-configs", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic: "kjs-compacted", configEntries: [{ name: "retention.ms", value: "60000" }] }] });
      const topic = (configEntries: { name: string; value: string }[]) => ({ type: ConfigResourceTypes.TOPIC, name: "kjs-compacted", configEntries });
      const described = async () => {
        const res = await admin.describeConfigs({
          resources: [{ type: ConfigResourceTypes.TOPIC, name: "kjs-compacted", configNames: ["cleanup.policy", "min.cleanable.dirty.ratio", "retention.ms"] }],
          includeSynonyms: false,
        });
        return Object.fromEntries(res.resources[0]!.configEntries.map((c) => [c.configName, c.configValue]));
      };

      const set = await admin.alterConfigs({ validateOnly: false, resources: [topic([{ name: "cleanup.policy", value: "compact" }, { name: "min.cleanable.dirty.ratio", value: "0.2" }])] });
      expect(set.resources).toEqual([{ errorCode: 0, errorMessage: null, resourceType: ConfigResourceTypes.TOPIC, resourceName: "kjs-compacted" }]);
      // retention.ms was not named, so it is back to its default.
      expect(await described()).toEqual({ "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2", "retention.ms": "604800000" });
      expect(broker.broker.services.topics.get("kjs-compacted")!.configs).toEqual({ "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2" });

      await admin.alterConfigs({ validateOnly: true, resources: [topic([{ name: "cleanup.policy", value: "delete" }])] });
      const refused = await admin
        .alterConfigs({ validateOnly: false, resources: [topic([{ name: "min.cleanable.dirty.ratio", value: "2" }])] })
        .then(() => undefined, (error: { type?: string; message?: string }) => error);
      expect(refused?.type).toBe("INVALID_CONFIG");
      expect(await described()).toEqual({ "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2", "retention.ms": "604800000" });

      const brokerSet = await admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.BROKER, name: "0", configEntries: [{ name: "log.cleaner.backoff.ms", value: "2500" }] }],
      });
      expect(brokerSet.resources[0].errorCode).toBe(0);
      expect(broker.broker.services.runtimeConfig.cleaner().backoffMs).toBe(2500);
      const cleared = await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.BROKER, name: "0", configEntries: [] }] });
      expect(cleared.resources[0].errorCode).toBe(0);
      expect(broker.broker.services.runtimeConfig.cleaner().backoffMs).toBe(15000);
    } finally {
      await admin.disconnect();
    }
  });
});

describe("librdkafka AlterConfigs (confluent-kafka)", () => {
  test("the same through AdminClient.alter_configs and describe_configs", async () => {
    const topic = "rdk-alter-configs";
    const kafka = new Kafka({ clientId: "interop-alter-configs-setup", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic }] });
    } finally {
      await admin.disconnect();
    }
    const proc = Bun.spawn([VENV_PYTHON, join(REPO_ROOT, "tests/interop/python/alter_configs.py"), broker.bootstrap, topic, "0"], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`alter_configs.py exited ${code}:\n${err}`);
    expect(JSON.parse(out)).toEqual({
      set: null,
      after_set: {
        "cleanup.policy": ["compact,delete", SOURCE.TOPIC],
        "min.cleanable.dirty.ratio": ["0.1", SOURCE.TOPIC],
        "retention.ms": ["60000", SOURCE.TOPIC],
        "segment.ms": ["604800000", SOURCE.DEFAULT],
      },
      replace: null,
      after_replace: {
        "cleanup.policy": ["delete", SOURCE.DEFAULT],
        "min.cleanable.dirty.ratio": ["0.5", SOURCE.DEFAULT],
        "retention.ms": ["604800000", SOURCE.DEFAULT],
        "segment.ms": ["120000", SOURCE.TOPIC],
      },
      validate_only: null,
      invalid: ["INVALID_CONFIG", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"],
      after_refusals: {
        "cleanup.policy": ["delete", SOURCE.DEFAULT],
        "min.cleanable.dirty.ratio": ["0.5", SOURCE.DEFAULT],
        "retention.ms": ["604800000", SOURCE.DEFAULT],
        "segment.ms": ["120000", SOURCE.TOPIC],
      },
      broker_set: null,
      broker_after_set: { "log.cleaner.backoff.ms": ["1000", SOURCE.BROKER], "log.cleaner.threads": ["2", SOURCE.BROKER] },
      broker_static: ["INVALID_REQUEST", "Cannot update these configs dynamically: Set(log.cleaner.enable)"],
      broker_clear: null,
      broker_after_clear: { "log.cleaner.backoff.ms": ["15000", SOURCE.DEFAULT], "log.cleaner.threads": ["1", SOURCE.DEFAULT] },
    });
    expect(broker.broker.services.runtimeConfig.cleaner().threads).toBe(1);
  }, TIMEOUT);
});
