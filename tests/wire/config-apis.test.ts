/**
 * Wire tests of CreatePartitions (37), DescribeConfigs (32) and IncrementalAlterConfigs (44) with raw
 * frames. Error codes and messages are the ones Apache Kafka 4.1 gives for the same requests (checked
 * against a real broker); where bunka deliberately differs, the test says so.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveTopicConfigWithDefaults, TOPIC_CONFIG_NAMES } from "../../src/domain/topic-config.ts";
import { DEFAULT_CLEANER_CONFIG } from "../../src/domain/cleaner-config.ts";
import { CorruptStateError } from "../../src/errors/errors.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { simpleBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const BROKER_ID = 3;
const TOPIC = 2;
const BROKER = 4;
const BROKER_LOGGER = 8;
const SET = 0;
const DELETE = 1;
const APPEND = 2;
const SUBTRACT = 3;
const SOURCE = { TOPIC: 1, BROKER: 2, CLUSTER_DEFAULT: 3, STATIC: 4, DEFAULT: 5 };
const INVALID_REQUEST_DEFAULT =
  "This most likely occurs because of a request being malformed by the client library or the message was sent " +
  "to an incompatible broker. See the broker logs for more details.";

let broker: TestBroker;
let client: WireClient;

beforeAll(async () => {
  broker = await startTestBroker({
    autoCreateTopicsEnable: false,
    brokerId: BROKER_ID,
    numPartitions: 2,
    // A static broker-level topic default, as `log.roll.ms` in the config file would set it.
    topicConfigDefaults: { "segment.ms": "3600000" },
    // A static cleaner setting, as `log.cleaner.io.buffer.size` in the config file would set it.
    cleaner: { ...DEFAULT_CLEANER_CONFIG, ioBufferSizeBytes: 65536 },
  });
  client = await WireClient.connect(broker.port);
});
afterAll(async () => {
  client.close();
  await broker.stop();
});

async function reconnect(): Promise<void> {
  client.close();
  await broker.restart();
  client = await WireClient.connect(broker.listener.port);
}

async function createTopic(name: string, partitions: number, configs: Record<string, string> = {}): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: Object.entries(configs).map(([n, value]) => ({ name: n, value })) }],
    timeoutMs: 1000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

async function partitionCount(name: string): Promise<number> {
  const res = await client.request(3, 12, { topics: [{ name, topicId: "00000000-0000-0000-0000-000000000000" }], allowAutoTopicCreation: false });
  return res.topics[0].partitions.length;
}

interface CreatePartitionsTopic {
  name: string;
  count: number;
  assignments: { brokerIds: number[] }[] | null;
}

function createPartitions(version: number, topics: CreatePartitionsTopic[], validateOnly = false) {
  return client.request(37, version, { topics, timeoutMs: 1000, validateOnly });
}

interface Resource {
  resourceType: number;
  resourceName: string;
  configurationKeys: string[] | null;
}

function describeConfigs(version: number, resources: Resource[], opts: { includeSynonyms?: boolean; includeDocumentation?: boolean } = {}) {
  return client.request(32, version, { resources, includeSynonyms: false, includeDocumentation: false, ...opts });
}

/** The configs of one resource, by name, from a successful DescribeConfigs. */
async function configsOf(resourceType: number, resourceName: string, version = 4, includeSynonyms = true) {
  const res = await describeConfigs(version, [{ resourceType, resourceName, configurationKeys: null }], { includeSynonyms });
  expect(res.results[0].errorCode).toBe(ErrorCode.NONE);
  return new Map<string, any>(res.results[0].configs.map((c: { name: string }) => [c.name, c]));
}

const op = (name: string, configOperation: number, value: string | null = null) => ({ name, configOperation, value });

/** AlterConfigs (33): [errorCode, errorMessage, resourceName, resourceType] per resource. */
async function alterFull(version: number, resources: { resourceType: number; resourceName: string; configs: { name: string; value: string | null }[] }[], validateOnly = false) {
  const res = await client.request(33, version, { resources, validateOnly });
  return res.responses.map((r: { errorCode: number; errorMessage: string | null; resourceName: string; resourceType: number }) => [r.errorCode, r.errorMessage, r.resourceName, r.resourceType]);
}

async function alter(version: number, resources: { resourceType: number; resourceName: string; configs: ReturnType<typeof op>[] }[], validateOnly = false) {
  const res = await client.request(44, version, { resources, validateOnly });
  return res.responses.map((r: { errorCode: number; errorMessage: string | null; resourceName: string }) => [r.errorCode, r.errorMessage, r.resourceName]);
}

describe("CreatePartitions", () => {
  test("every version raises the partition count, and the new partitions survive a restart", async () => {
    await createTopic("grow", 1);
    for (let v = 0; v <= 3; v++) {
      const res = await createPartitions(v, [{ name: "grow", count: v + 2, assignments: null }]);
      expect(res.results.map((r: any) => [r.name, r.errorCode, r.errorMessage])).toEqual([["grow", ErrorCode.NONE, null]]);
      expect(await partitionCount("grow")).toBe(v + 2);
    }
    await reconnect();
    expect(await partitionCount("grow")).toBe(5);
  });

  test("unknown topics, equal or lower counts, and a repeated topic get Apache's errors", async () => {
    await createTopic("cp-errors", 3);
    const res = await createPartitions(3, [
      { name: "cp-errors", count: 3, assignments: null },
      { name: "no-such-topic", count: 4, assignments: null },
      { name: "bad/name", count: 4, assignments: null },
      { name: "twice", count: 4, assignments: null },
      { name: "twice", count: 5, assignments: null },
    ]);
    const results = res.results.map((r: { name: string; errorCode: number; errorMessage: string | null }) => [r.name, r.errorCode, r.errorMessage]);
    // Apache answers a repeated topic once, before the others.
    expect(results).toEqual([
      ["twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."],
      ["cp-errors", ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."],
      ["no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, null],
      ["bad/name", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, null],
    ]);
    for (const count of [2, -5]) {
      const lower = await createPartitions(0, [{ name: "cp-errors", count, assignments: null }]);
      expect(lower.results[0].errorCode).toBe(ErrorCode.INVALID_PARTITIONS);
      expect(lower.results[0].errorMessage).toBe(`The topic cp-errors currently has 3 partition(s); ${count} would not be an increase.`);
    }
    const tooMany = await createPartitions(1, [{ name: "cp-errors", count: 20_000, assignments: null }]);
    expect(tooMany.results[0].errorCode).toBe(ErrorCode.INVALID_PARTITIONS);
    expect(await partitionCount("cp-errors")).toBe(3);
  });

  test("manual assignments must give each new partition exactly one registered broker", async () => {
    await createTopic("assigned", 1);
    const cases: [{ brokerIds: number[] }[], number, string | null][] = [
      [[{ brokerIds: [BROKER_ID] }], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."],
      [[], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 0 assignment(s) were specified."],
      [[{ brokerIds: [BROKER_ID] }, { brokerIds: [7] }], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 7, but no such broker is registered."],
      [[{ brokerIds: [BROKER_ID] }, { brokerIds: [BROKER_ID, BROKER_ID] }], ErrorCode.INVALID_REPLICA_ASSIGNMENT, `The manual partition assignment includes the broker ${BROKER_ID} more than once.`],
      [[{ brokerIds: [BROKER_ID] }, { brokerIds: [] }], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."],
    ];
    for (const [assignments, errorCode, errorMessage] of cases) {
      const res = await createPartitions(2, [{ name: "assigned", count: 3, assignments }]);
      expect([res.results[0].errorCode, res.results[0].errorMessage]).toEqual([errorCode, errorMessage]);
    }
    expect(await partitionCount("assigned")).toBe(1);
    const ok = await createPartitions(2, [{ name: "assigned", count: 3, assignments: [{ brokerIds: [BROKER_ID] }, { brokerIds: [BROKER_ID] }] }]);
    expect(ok.results[0].errorCode).toBe(ErrorCode.NONE);
    expect(await partitionCount("assigned")).toBe(3);
  });

  test("validateOnly checks without adding partitions", async () => {
    await createTopic("validate-grow", 1);
    const ok = await createPartitions(3, [{ name: "validate-grow", count: 4, assignments: null }], true);
    expect(ok.results[0].errorCode).toBe(ErrorCode.NONE);
    const bad = await createPartitions(3, [{ name: "validate-grow", count: 1, assignments: null }], true);
    expect(bad.results[0].errorCode).toBe(ErrorCode.INVALID_PARTITIONS);
    expect(await partitionCount("validate-grow")).toBe(1);
  });
});

describe("DescribeConfigs", () => {
  test("a topic's configs in every version, with the fields each version has", async () => {
    await createTopic("described", 1, { "retention.ms": "1000" });
    // Apache Kafka 4.1's 33 topic configs, in name order.
    const names = [...TOPIC_CONFIG_NAMES];
    expect(names.length).toBe(33);
    for (let v = 0; v <= 4; v++) {
      const res = await describeConfigs(v, [{ resourceType: TOPIC, resourceName: "described", configurationKeys: null }], {
        includeSynonyms: v >= 1,
        includeDocumentation: v >= 3,
      });
      const result = res.results[0];
      expect([result.errorCode, result.errorMessage, result.resourceType, result.resourceName]).toEqual([ErrorCode.NONE, null, TOPIC, "described"]);
      expect(result.configs.map((c: { name: string }) => c.name)).toEqual(names);
      const byName = new Map<string, any>(result.configs.map((c: { name: string }) => [c.name, c]));
      const retention = byName.get("retention.ms");
      const segmentMs = byName.get("segment.ms");
      const cleanup = byName.get("cleanup.policy");
      expect([retention.value, retention.readOnly, retention.isSensitive]).toEqual(["1000", false, false]);
      expect(segmentMs.value).toBe("3600000");
      if (v === 0) {
        expect([retention.isDefault, segmentMs.isDefault, cleanup.isDefault]).toEqual([false, false, true]);
      } else {
        expect([retention.configSource, segmentMs.configSource, cleanup.configSource]).toEqual([SOURCE.TOPIC, SOURCE.STATIC, SOURCE.DEFAULT]);
        // As Apache lists them: log.retention.ms and log.roll.ms have no default of their own there (the
        // value comes from log.retention.hours / log.roll.hours), so no DEFAULT_CONFIG synonym.
        expect(retention.synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([["retention.ms", "1000", SOURCE.TOPIC]]);
        expect(segmentMs.synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([["log.roll.ms", "3600000", SOURCE.STATIC]]);
        expect(cleanup.synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([["log.cleanup.policy", "delete", SOURCE.DEFAULT]]);
      }
      if (v >= 3) {
        expect([retention.configType, cleanup.configType, byName.get("segment.bytes").configType, byName.get("message.timestamp.type").configType]).toEqual([5, 7, 3, 2]);
        expect(typeof retention.documentation).toBe("string");
        expect(retention.documentation.length).toBeGreaterThan(10);
      }
    }
  });

  test("synonyms and documentation only when asked for", async () => {
    await createTopic("described-plain", 1);
    const res = await describeConfigs(4, [{ resourceType: TOPIC, resourceName: "described-plain", configurationKeys: ["retention.ms"] }]);
    expect(res.results[0].configs[0].synonyms).toEqual([]);
    expect(res.results[0].configs[0].documentation).toBeNull();
  });

  test("configurationKeys selects configs; unknown keys are absent; empty means all", async () => {
    await createTopic("selected", 1);
    const res = await describeConfigs(4, [
      { resourceType: TOPIC, resourceName: "selected", configurationKeys: ["segment.bytes", "no.such.config", "retention.ms", "compression.type"] },
      { resourceType: TOPIC, resourceName: "selected", configurationKeys: [] },
    ]);
    expect(res.results[0].configs.map((c: { name: string }) => c.name)).toEqual(["compression.type", "retention.ms", "segment.bytes"]);
    expect(res.results[1].configs.length).toBe(33);
  });

  test("unknown and illegal topics", async () => {
    const res = await describeConfigs(1, [
      { resourceType: TOPIC, resourceName: "no-such-topic", configurationKeys: null },
      { resourceType: TOPIC, resourceName: "bad/name", configurationKeys: null },
      { resourceType: TOPIC, resourceName: "", configurationKeys: null },
    ]);
    // Apache Kafka 4.1.1's answers, messages included (an unknown topic's is empty).
    expect(res.results.map((r: any) => [r.errorCode, r.errorMessage, r.configs.length])).toEqual([
      [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "", 0],
      [ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'", 0],
      [ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed", 0],
    ]);
  });

  test("this broker's configs: values in effect, sources, and which are writable", async () => {
    const configs = await configsOf(BROKER, String(BROKER_ID));
    for (const name of [
      "broker.id",
      "log.retention.ms",
      "log.retention.bytes",
      "log.segment.bytes",
      "log.roll.ms",
      "message.max.bytes",
      "log.message.timestamp.type",
      "log.cleanup.policy",
      "num.partitions",
      "auto.create.topics.enable",
      "socket.request.max.bytes",
      "connections.max.idle.ms",
      "transaction.max.timeout.ms",
      "producer.id.expiration.ms",
      "group.initial.rebalance.delay.ms",
      "offsets.retention.minutes",
    ]) {
      expect(configs.has(name)).toBe(true);
    }
    const pick = (name: string) => {
      const c = configs.get(name);
      return [c.value, c.configSource, c.readOnly];
    };
    expect(pick("broker.id")).toEqual([String(BROKER_ID), SOURCE.STATIC, true]);
    expect(pick("num.partitions")).toEqual(["2", SOURCE.STATIC, true]);
    expect(pick("auto.create.topics.enable")).toEqual(["false", SOURCE.STATIC, true]);
    expect(pick("transaction.max.timeout.ms")).toEqual(["900000", SOURCE.DEFAULT, true]);
    expect(pick("offsets.retention.minutes")).toEqual(["10080", SOURCE.DEFAULT, true]);
    expect(pick("log.roll.ms")).toEqual(["3600000", SOURCE.STATIC, false]);
    // Null, as Apache shows a broker config without a default of its own that nothing sets.
    expect(pick("log.retention.ms")).toEqual([null, SOURCE.DEFAULT, false]);
    expect(pick("message.max.bytes")).toEqual(["1048588", SOURCE.DEFAULT, false]);
    expect(configs.get("broker.id").synonyms.map((s: any) => [s.value, s.source])).toEqual([
      [String(BROKER_ID), SOURCE.STATIC],
      ["0", SOURCE.DEFAULT],
    ]);
    expect(configs.get("log.cleanup.policy").configType).toBe(7);
    expect(configs.get("auto.create.topics.enable").configType).toBe(1);
  });

  test("broker and broker-logger resource names are checked as Apache does", async () => {
    const res = await describeConfigs(4, [
      { resourceType: BROKER, resourceName: "7", configurationKeys: null },
      { resourceType: BROKER, resourceName: "abc", configurationKeys: null },
      { resourceType: BROKER_LOGGER, resourceName: String(BROKER_ID), configurationKeys: null },
      { resourceType: BROKER_LOGGER, resourceName: "7", configurationKeys: null },
      { resourceType: BROKER_LOGGER, resourceName: "", configurationKeys: null },
      { resourceType: BROKER_LOGGER, resourceName: "x", configurationKeys: null },
      { resourceType: 32, resourceName: "some-group", configurationKeys: null },
    ]);
    expect(res.results.map((r: any) => [r.resourceType, r.resourceName, r.errorCode, r.errorMessage, r.configs.length])).toEqual([
      [BROKER, "7", ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${BROKER_ID} or empty string, but received 7`, 0],
      [BROKER, "abc", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: abc", 0],
      // bunka has no named loggers whose level can be read or changed at runtime.
      [BROKER_LOGGER, String(BROKER_ID), ErrorCode.NONE, null, 0],
      [BROKER_LOGGER, "7", ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${BROKER_ID} but received 7`, 0],
      [BROKER_LOGGER, "", ErrorCode.INVALID_REQUEST, "Broker id must not be empty", 0],
      [BROKER_LOGGER, "x", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x", 0],
      [32, "some-group", ErrorCode.INVALID_REQUEST, "bunka does not support group config resources", 0],
    ]);
  });

  test("an unknown resource type fails the whole request, as in Apache", async () => {
    await createTopic("innocent", 1);
    const res = await describeConfigs(2, [
      { resourceType: TOPIC, resourceName: "innocent", configurationKeys: null },
      { resourceType: 99, resourceName: "x", configurationKeys: null },
    ]);
    expect(res.results.map((r: any) => [r.resourceType, r.errorCode, r.errorMessage])).toEqual([
      [TOPIC, ErrorCode.INVALID_REQUEST, INVALID_REQUEST_DEFAULT],
      [99, ErrorCode.INVALID_REQUEST, INVALID_REQUEST_DEFAULT],
    ]);
  });
});

describe("IncrementalAlterConfigs on topics", () => {
  test("SET, DELETE, APPEND and SUBTRACT round-trip through DescribeConfigs in both versions", async () => {
    await createTopic("altered", 1);
    for (const v of [0, 1]) {
      expect(await alter(v, [{ resourceType: TOPIC, resourceName: "altered", configs: [op("retention.ms", SET, "2000"), op("retention.bytes", SET, "4096")] }])).toEqual([
        [ErrorCode.NONE, null, "altered"],
      ]);
      let configs = await configsOf(TOPIC, "altered");
      expect([configs.get("retention.ms").value, configs.get("retention.ms").configSource]).toEqual(["2000", SOURCE.TOPIC]);
      expect(configs.get("retention.bytes").value).toBe("4096");

      // APPEND of a value already in the (default) list, then SUBTRACT of one that is not, change nothing.
      expect(await alter(v, [{ resourceType: TOPIC, resourceName: "altered", configs: [op("cleanup.policy", APPEND, "delete")] }])).toEqual([
        [ErrorCode.NONE, null, "altered"],
      ]);
      expect(await alter(v, [{ resourceType: TOPIC, resourceName: "altered", configs: [op("cleanup.policy", SUBTRACT, "compact")] }])).toEqual([
        [ErrorCode.NONE, null, "altered"],
      ]);
      configs = await configsOf(TOPIC, "altered");
      expect([configs.get("cleanup.policy").value, configs.get("cleanup.policy").configSource]).toEqual(["delete", SOURCE.TOPIC]);

      expect(
        await alter(v, [{ resourceType: TOPIC, resourceName: "altered", configs: [op("retention.ms", DELETE), op("retention.bytes", DELETE), op("cleanup.policy", DELETE)] }]),
      ).toEqual([[ErrorCode.NONE, null, "altered"]]);
      configs = await configsOf(TOPIC, "altered");
      expect([configs.get("retention.ms").value, configs.get("retention.ms").configSource]).toEqual(["604800000", SOURCE.DEFAULT]);
      expect(configs.get("cleanup.policy").configSource).toBe(SOURCE.DEFAULT);
    }
    expect(broker.broker.services.topics.get("altered")!.configs).toEqual({});
  });

  test("topic configs survive a restart", async () => {
    await createTopic("kept", 1);
    expect(await alter(1, [{ resourceType: TOPIC, resourceName: "kept", configs: [op("message.timestamp.type", SET, "LogAppendTime")] }])).toEqual([
      [ErrorCode.NONE, null, "kept"],
    ]);
    await reconnect();
    const configs = await configsOf(TOPIC, "kept");
    expect([configs.get("message.timestamp.type").value, configs.get("message.timestamp.type").configSource]).toEqual(["LogAppendTime", SOURCE.TOPIC]);
  });

  test("validateOnly checks without changing", async () => {
    await createTopic("validated", 1);
    expect(await alter(1, [{ resourceType: TOPIC, resourceName: "validated", configs: [op("retention.ms", SET, "5")] }], true)).toEqual([
      [ErrorCode.NONE, null, "validated"],
    ]);
    expect(await alter(1, [{ resourceType: TOPIC, resourceName: "validated", configs: [op("retention.ms", SET, "x")] }], true)).toEqual([
      [ErrorCode.INVALID_CONFIG, "Invalid value x for configuration retention.ms: Not a number of type LONG", "validated"],
    ]);
    expect((await configsOf(TOPIC, "validated")).get("retention.ms").configSource).toBe(SOURCE.DEFAULT);
  });

  test("each mistake gets Apache's error", async () => {
    await createTopic("mistakes", 1);
    const on = (configs: ReturnType<typeof op>[], name = "mistakes") => [{ resourceType: TOPIC, resourceName: name, configs }];
    const cases: [ReturnType<typeof on>, number, string][] = [
      [on([op("retention.ms", APPEND, "1")]), ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."],
      [on([op("retention.ms", SUBTRACT, "1")]), ErrorCode.INVALID_CONFIG, "Can't SUBTRACT to key retention.ms because its type is not LIST."],
      [on([op("retention.ms", SET, "abc")]), ErrorCode.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG"],
      [on([op("retention.ms", SET, "-5")]), ErrorCode.INVALID_CONFIG, "Invalid value -5 for configuration retention.ms: Value must be at least -1"],
      [on([op("max.message.bytes", SET, "99999999999")]), ErrorCode.INVALID_CONFIG, "Invalid value 99999999999 for configuration max.message.bytes: Not a number of type INT"],
      [on([op("message.timestamp.type", SET, "Foo")]), ErrorCode.INVALID_CONFIG, "Invalid value Foo for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"],
      [on([op("nonsense.config", SET, "1")]), ErrorCode.INVALID_CONFIG, "Unknown topic config name: nonsense.config"],
      [on([op("__proto__", SET, "1")]), ErrorCode.INVALID_CONFIG, "Unknown topic config name: __proto__"],
      // Apache's answer with tiered storage disabled, which it always is in bunka.
      [on([op("remote.storage.enable", SET, "true")]), ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."],
      [on([op("cleanup.policy", APPEND, "shred")]), ErrorCode.INVALID_CONFIG, "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"],
      [on([op("retention.ms", SET, null)]), ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"],
      [on([op("retention.ms", SET, "1"), op("retention.ms", DELETE)]), ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"],
      // Apache answers UNKNOWN_SERVER_ERROR here (and INVALID_REQUEST for the same mistake on a broker).
      [on([op("retention.ms", 9, "1")]), ErrorCode.INVALID_REQUEST, "Unknown operations type 9"],
      [on([op("retention.ms", SET, "1")], "no-such-topic"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'no-such-topic' does not exist."],
      // Validation comes before the existence check, as in Apache.
      [on([op("retention.ms", SET, "abc")], "no-such-topic"), ErrorCode.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG"],
      [on([op("retention.ms", SET, "1")], ""), ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."],
      [on([op("retention.ms", SET, "1")], "bad/name"), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"],
    ];
    for (const [resources, errorCode, errorMessage] of cases) {
      const [[code, message]] = await alter(0, resources);
      expect([code, message]).toEqual([errorCode, errorMessage]);
    }
    // DELETE of a config that is not set (even an unknown one) succeeds, as in Apache.
    expect(await alter(1, on([op("nonsense.config", DELETE), op("retention.bytes", DELETE)]))).toEqual([[ErrorCode.NONE, null, "mistakes"]]);
    expect(broker.broker.services.topics.get("mistakes")!.configs).toEqual({});
  });

  test("a resource named twice fails every copy; the others are applied", async () => {
    await createTopic("twice-a", 1);
    await createTopic("twice-b", 1);
    const res = await alter(1, [
      { resourceType: TOPIC, resourceName: "twice-a", configs: [op("retention.ms", SET, "1")] },
      { resourceType: TOPIC, resourceName: "twice-b", configs: [op("retention.ms", SET, "2")] },
      { resourceType: TOPIC, resourceName: "twice-a", configs: [op("retention.ms", SET, "3")] },
    ]);
    expect(res).toEqual([
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", "twice-a"],
      [ErrorCode.NONE, null, "twice-b"],
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", "twice-a"],
    ]);
    expect(broker.broker.services.topics.get("twice-a")!.configs).toEqual({});
    expect(broker.broker.services.topics.get("twice-b")!.configs).toEqual({ "retention.ms": "2" });
  });

  test("concurrent changes to one topic on two connections both land", async () => {
    await createTopic("concurrent", 1);
    const other = await WireClient.connect(broker.listener.port);
    try {
      const [a, b] = await Promise.all([
        client.request(44, 1, { resources: [{ resourceType: TOPIC, resourceName: "concurrent", configs: [op("retention.ms", SET, "111")] }], validateOnly: false }),
        other.request(44, 1, { resources: [{ resourceType: TOPIC, resourceName: "concurrent", configs: [op("retention.bytes", SET, "222")] }], validateOnly: false }),
      ]);
      expect([a.responses[0].errorCode, b.responses[0].errorCode]).toEqual([ErrorCode.NONE, ErrorCode.NONE]);
    } finally {
      other.close();
    }
    expect(broker.broker.services.topics.get("concurrent")!.configs).toEqual({ "retention.ms": "111", "retention.bytes": "222" });
  });

  test("unknown and unsupported resource types", async () => {
    const res = await alter(1, [
      { resourceType: 99, resourceName: "x", configs: [] },
      { resourceType: 16, resourceName: "x", configs: [] },
    ]);
    expect(res).toEqual([
      [ErrorCode.INVALID_REQUEST, "Unknown resource type 99", "x"],
      [ErrorCode.INVALID_REQUEST, "bunka does not support client metrics config resources", "x"],
    ]);
  });
});

describe("IncrementalAlterConfigs on brokers", () => {
  test("a cluster-wide default becomes the default of topics, durably", async () => {
    await createTopic("inherits", 1);
    await createTopic("overrides", 1, { "retention.ms": "1000" });
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.retention.ms", SET, "86400000")] }])).toEqual([
      [ErrorCode.NONE, null, ""],
    ]);
    const check = async () => {
      const inherits = (await configsOf(TOPIC, "inherits")).get("retention.ms");
      expect([inherits.value, inherits.configSource]).toEqual(["86400000", SOURCE.CLUSTER_DEFAULT]);
      expect(inherits.synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([["log.retention.ms", "86400000", SOURCE.CLUSTER_DEFAULT]]);
      const overrides = (await configsOf(TOPIC, "overrides")).get("retention.ms");
      expect([overrides.value, overrides.configSource]).toEqual(["1000", SOURCE.TOPIC]);

      // Resource "" lists only the cluster-wide dynamic defaults that are set.
      const cluster = await configsOf(BROKER, "");
      expect([...cluster.keys()]).toEqual(["log.retention.ms"]);
      expect([cluster.get("log.retention.ms").value, cluster.get("log.retention.ms").configSource]).toEqual(["86400000", SOURCE.CLUSTER_DEFAULT]);
      const self = (await configsOf(BROKER, String(BROKER_ID))).get("log.retention.ms");
      expect([self.value, self.configSource]).toEqual(["86400000", SOURCE.CLUSTER_DEFAULT]);

      // What the log layer uses for a topic without its own value.
      const services = broker.broker.services;
      expect(services.runtimeConfig.topicDefaults()).toEqual({ "segment.ms": "3600000", "retention.ms": "86400000" });
      expect(resolveTopicConfigWithDefaults(services.topics.get("inherits")!.configs, services.runtimeConfig.topicDefaults()).retentionMs).toBe(86400000);
      expect(resolveTopicConfigWithDefaults(services.topics.get("overrides")!.configs, services.runtimeConfig.topicDefaults()).retentionMs).toBe(1000);
      expect(resolveTopicConfigWithDefaults({}, services.runtimeConfig.topicDefaults()).segmentMs).toBe(3600000);
    };
    await check();
    expect(existsSync(join(broker.dataDir, "__cluster", "broker-configs.json"))).toBe(true);
    await reconnect();
    await check();

    expect(await alter(0, [{ resourceType: BROKER, resourceName: "", configs: [op("log.retention.ms", DELETE)] }])).toEqual([[ErrorCode.NONE, null, ""]]);
    expect((await configsOf(TOPIC, "inherits")).get("retention.ms").configSource).toBe(SOURCE.DEFAULT);
    expect((await configsOf(BROKER, "")).size).toBe(0);
    expect(broker.broker.services.runtimeConfig.topicDefaults()).toEqual({ "segment.ms": "3600000" });
  });

  test("an open partition follows a change of a broker-level default at once; the static configuration stays as it was", async () => {
    await createTopic("follows-default", 1);
    const services = broker.broker.services;
    const produceOne = async () => {
      const res = await client.request(0, 11, {
        transactionalId: null,
        acks: -1,
        timeoutMs: 30_000,
        topicData: [{ name: "follows-default", partitionData: [{ index: 0, records: simpleBatch(1) }] }],
      });
      expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    };
    await produceOne();
    await produceOne();
    const partition = (await services.partitions.get("follows-default", 0))!;
    expect(partition.log.segmentCount).toBe(1);
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.segment.bytes", SET, "14")] }])).toEqual([[ErrorCode.NONE, null, ""]]);
    // Every append rolls now, in the partition that was open before the change: no reopen needed.
    await produceOne();
    await produceOne();
    expect(partition.log.segmentCount).toBe(3);
    expect(services.runtimeConfig.topicDefaults()["segment.bytes"]).toBe("14");
    expect(services.config.topicConfigDefaults).toEqual({ "segment.ms": "3600000" });
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.segment.bytes", DELETE)] }])).toEqual([[ErrorCode.NONE, null, ""]]);
    expect(services.runtimeConfig.topicDefaults()).toEqual({ "segment.ms": "3600000" });
  });

  test("this broker's own layer wins over the cluster default and the static config", async () => {
    await createTopic("layered", 1);
    expect(
      await alter(1, [
        { resourceType: BROKER, resourceName: "", configs: [op("log.roll.ms", SET, "7200000"), op("log.segment.bytes", SET, "2097152")] },
        { resourceType: BROKER, resourceName: String(BROKER_ID), configs: [op("log.roll.ms", SET, "1800000")] },
      ]),
    ).toEqual([
      [ErrorCode.NONE, null, ""],
      [ErrorCode.NONE, null, String(BROKER_ID)],
    ]);
    const topic = await configsOf(TOPIC, "layered");
    expect(topic.get("segment.ms").synonyms.map((s: any) => [s.value, s.source])).toEqual([
      ["1800000", SOURCE.BROKER],
      ["7200000", SOURCE.CLUSTER_DEFAULT],
      ["3600000", SOURCE.STATIC],
    ]);
    expect([topic.get("segment.ms").value, topic.get("segment.ms").configSource]).toEqual(["1800000", SOURCE.BROKER]);
    expect([topic.get("segment.bytes").value, topic.get("segment.bytes").configSource]).toEqual(["2097152", SOURCE.CLUSTER_DEFAULT]);
    const self = (await configsOf(BROKER, String(BROKER_ID))).get("log.roll.ms");
    expect([self.value, self.configSource]).toEqual(["1800000", SOURCE.BROKER]);

    await reconnect();
    expect((await configsOf(TOPIC, "layered")).get("segment.ms").value).toBe("1800000");
    expect(
      await alter(1, [
        { resourceType: BROKER, resourceName: "", configs: [op("log.roll.ms", DELETE), op("log.segment.bytes", DELETE)] },
        { resourceType: BROKER, resourceName: String(BROKER_ID), configs: [op("log.roll.ms", DELETE)] },
      ]),
    ).toEqual([
      [ErrorCode.NONE, null, ""],
      [ErrorCode.NONE, null, String(BROKER_ID)],
    ]);
    const back = (await configsOf(TOPIC, "layered")).get("segment.ms");
    expect([back.value, back.configSource]).toEqual(["3600000", SOURCE.STATIC]);
  });

  test("validateOnly checks without changing", async () => {
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.retention.bytes", SET, "1000")] }], true)).toEqual([
      [ErrorCode.NONE, null, ""],
    ]);
    expect((await configsOf(BROKER, "")).size).toBe(0);
    expect(broker.broker.services.brokerConfigs.get({ kind: "cluster" })).toEqual({});
  });

  test("each mistake gets Apache's error", async () => {
    const on = (configs: ReturnType<typeof op>[], name = "") => [{ resourceType: BROKER, resourceName: name, configs }];
    const cases: [ReturnType<typeof on>, number, string][] = [
      [on([op("log.retention.ms", SET, "1")], "7"), ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${BROKER_ID}, but received 7`],
      [on([op("log.retention.ms", SET, "1")], "abc"), ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: abc"],
      [on([op("num.partitions", SET, "5")]), ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)"],
      [on([op("num.partitions", SET, "5")], String(BROKER_ID)), ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)"],
      [on([op("broker.id", SET, "5"), op("no.such.config", SET, "1")]), ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(broker.id, no.such.config)"],
      [on([op("log.retention.ms", SET, "abc")]), ErrorCode.INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"],
      [on([op("log.message.timestamp.type", SET, "Foo")]), ErrorCode.INVALID_REQUEST, "Invalid value Foo for configuration log.message.timestamp.type: String must be one of: CreateTime, LogAppendTime"],
      [on([op("message.max.bytes", SET, "x")]), ErrorCode.INVALID_REQUEST, "Invalid value x for configuration message.max.bytes: Not a number of type INT"],
      [on([op("log.retention.ms", APPEND, "1")]), ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms"],
      [on([op("log.retention.ms", SUBTRACT, "1")]), ErrorCode.INVALID_CONFIG, "Config value subtract is not allowed for config key: log.retention.ms"],
      [on([op("log.retention.ms", SET, null)]), ErrorCode.INVALID_REQUEST, "Null value not supported for : log.retention.ms"],
      [on([op("log.retention.ms", 7, "1")]), ErrorCode.INVALID_REQUEST, "Unknown operations type 7"],
      [on([op("log.retention.ms", SET, "1"), op("log.retention.ms", SET, "2")]), ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"],
    ];
    for (const [resources, errorCode, errorMessage] of cases) {
      const [[code, message]] = await alter(1, resources);
      expect([code, message]).toEqual([errorCode, errorMessage]);
    }
    // Deleting a config that cannot be set changes nothing and succeeds, as in Apache.
    expect(await alter(1, on([op("num.partitions", DELETE), op("no.such.config", DELETE)]))).toEqual([[ErrorCode.NONE, null, ""]]);
    expect(
      await alter(1, [
        { resourceType: BROKER, resourceName: "", configs: [op("log.retention.ms", SET, "1")] },
        { resourceType: BROKER, resourceName: "", configs: [op("log.retention.ms", SET, "1")] },
      ]),
    ).toEqual([
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", ""],
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", ""],
    ]);
    expect(broker.broker.services.brokerConfigs.get({ kind: "cluster" })).toEqual({});
  });

  test("broker loggers: Apache's id checks, and no logger to change", async () => {
    const res = await alter(0, [
      { resourceType: BROKER_LOGGER, resourceName: String(BROKER_ID), configs: [op("root", SET, "DEBUG")] },
      { resourceType: BROKER_LOGGER, resourceName: String(BROKER_ID), configs: [] },
    ]);
    // Both name the same resource.
    expect(res.map((r: unknown[]) => r[0])).toEqual([ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]);
    const each = async (name: string, configs: ReturnType<typeof op>[]) => (await alter(1, [{ resourceType: BROKER_LOGGER, resourceName: name, configs }]))[0];
    expect(await each(String(BROKER_ID), [op("root", SET, "DEBUG")])).toEqual([ErrorCode.INVALID_CONFIG, "Logger root does not exist!", String(BROKER_ID)]);
    expect(await each(String(BROKER_ID), [op("root", APPEND, "DEBUG")])).toEqual([
      ErrorCode.INVALID_REQUEST,
      "APPEND operation is not allowed for the BROKER_LOGGER resource",
      String(BROKER_ID),
    ]);
    expect(await each("", [op("root", SET, "DEBUG")])).toEqual([ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: ", ""]);
    expect(await each("7", [op("root", SET, "DEBUG")])).toEqual([ErrorCode.INVALID_REQUEST, `Unexpected node id. Expected ${BROKER_ID}, but received 7`, "7"]);
  });
});

describe("topic configs over the wire", () => {
  test("CreateTopics answers every config with its source; the topic's own values as given", async () => {
    const res = await client.request(19, 7, {
      topics: [{ name: "created-configs", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [{ name: "cleanup.policy", value: "compact, delete" }] }],
      timeoutMs: 1000,
      validateOnly: false,
    });
    const configs = new Map<string, any>(res.topics[0].configs.map((c: { name: string }) => [c.name, c]));
    expect(configs.size).toBe(33);
    const pick = (name: string) => [configs.get(name).value, configs.get(name).configSource];
    expect(pick("cleanup.policy")).toEqual(["compact, delete", SOURCE.TOPIC]);
    expect(pick("segment.ms")).toEqual(["3600000", SOURCE.STATIC]);
    expect(pick("min.cleanable.dirty.ratio")).toEqual(["0.5", SOURCE.DEFAULT]);
    expect(pick("remote.storage.enable")).toEqual(["false", SOURCE.DEFAULT]);
  });

  test("CreateTopics refuses what the topic rules refuse, broker defaults taking part", async () => {
    const create = async (configs: Record<string, string>, validateOnly = false) => {
      const res = await client.request(19, 7, {
        topics: [{ name: "refused-configs", numPartitions: 1, replicationFactor: 1, assignments: [], configs: Object.entries(configs).map(([name, value]) => ({ name, value })) }],
        timeoutMs: 1000,
        validateOnly,
      });
      return [res.topics[0].errorCode, res.topics[0].errorMessage];
    };
    expect(await create({ "remote.storage.enable": "true" })).toEqual([
      ErrorCode.INVALID_CONFIG,
      "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
    ]);
    expect(await create({ "min.cleanable.dirty.ratio": "2" }, true)).toEqual([
      ErrorCode.INVALID_CONFIG,
      "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
    ]);
    expect(await create({ "message.downconversion.enable": "true" })).toEqual([ErrorCode.INVALID_CONFIG, "Unknown topic config name: message.downconversion.enable"]);
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.cleaner.max.compaction.lag.ms", SET, "5")] }])).toEqual([[ErrorCode.NONE, null, ""]]);
    try {
      expect(await create({ "min.compaction.lag.ms": "10" })).toEqual([
        ErrorCode.INVALID_CONFIG,
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
      ]);
    } finally {
      await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.cleaner.max.compaction.lag.ms", DELETE)] }]);
    }
    expect(broker.broker.services.topics.get("refused-configs")).toBeUndefined();
  });

  test("compaction and accepted-only configs: set, described as Apache prints them, resolved", async () => {
    await createTopic("compacted-configs", 1, {
      "cleanup.policy": " compact , delete ",
      "min.cleanable.dirty.ratio": "1",
      "min.compaction.lag.ms": "+1000",
      "max.compaction.lag.ms": "60000",
      "delete.retention.ms": "0",
      "compression.type": "zstd",
      "min.insync.replicas": "2",
      preallocate: "TRUE",
      "leader.replication.throttled.replicas": " 0:1 , 1:1 ",
    });
    const configs = await configsOf(TOPIC, "compacted-configs");
    const shown = (name: string) => [configs.get(name).value, configs.get(name).configSource, configs.get(name).configType];
    expect(shown("cleanup.policy")).toEqual(["compact,delete", SOURCE.TOPIC, 7]);
    expect(shown("min.cleanable.dirty.ratio")).toEqual(["1.0", SOURCE.TOPIC, 6]);
    expect(shown("min.compaction.lag.ms")).toEqual(["1000", SOURCE.TOPIC, 5]);
    expect(shown("preallocate")).toEqual(["true", SOURCE.TOPIC, 1]);
    expect(shown("leader.replication.throttled.replicas")).toEqual(["0:1,1:1", SOURCE.TOPIC, 7]);
    expect(shown("remote.storage.enable")).toEqual(["false", SOURCE.DEFAULT, 1]);
    expect(configs.get("min.cleanable.dirty.ratio").synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([
      ["min.cleanable.dirty.ratio", "1.0", SOURCE.TOPIC],
      ["log.cleaner.min.cleanable.ratio", "0.5", SOURCE.DEFAULT],
    ]);
    // Configs without a broker-level synonym in Apache list no synonym for their default.
    expect(configs.get("remote.storage.enable").synonyms).toEqual([]);

    const services = broker.broker.services;
    const resolved = resolveTopicConfigWithDefaults(services.topics.get("compacted-configs")!.configs, services.runtimeConfig.topicDefaults());
    expect(resolved).toMatchObject({
      cleanupPolicy: { compact: true, delete: true },
      minCleanableDirtyRatio: 1,
      minCompactionLagMs: 1000,
      maxCompactionLagMs: 60000,
      deleteRetentionMs: 0,
      compressionType: "zstd",
    });
  });

  test("a missing topic: UNKNOWN_TOPIC_OR_PARTITION in every version of the three APIs, but invalid configs first", async () => {
    for (let v = 0; v <= 4; v++) {
      const res = await describeConfigs(v, [{ resourceType: TOPIC, resourceName: "missing-topic", configurationKeys: null }]);
      expect([res.results[0].errorCode, res.results[0].errorMessage]).toEqual([ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ""]);
    }
    const missing = [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing-topic' does not exist."];
    for (const validateOnly of [false, true]) {
      for (const v of [0, 1]) {
        const ok = await alter(v, [{ resourceType: TOPIC, resourceName: "missing-topic", configs: [op("cleanup.policy", SET, "compact")] }], validateOnly);
        expect(ok[0].slice(0, 2)).toEqual(missing);
        const bad = await alter(v, [{ resourceType: TOPIC, resourceName: "missing-topic", configs: [op("retention.ms", SET, "abc")] }], validateOnly);
        expect(bad[0].slice(0, 2)).toEqual([ErrorCode.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG"]);
      }
      for (const v of [0, 1, 2]) {
        const ok = await alterFull(v, [{ resourceType: TOPIC, resourceName: "missing-topic", configs: [{ name: "cleanup.policy", value: "compact" }] }], validateOnly);
        expect(ok[0].slice(0, 2)).toEqual(missing);
        const bad = await alterFull(v, [{ resourceType: TOPIC, resourceName: "missing-topic", configs: [{ name: "no.such", value: "1" }] }], validateOnly);
        expect(bad[0].slice(0, 2)).toEqual([ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such"]);
      }
    }
  });
});

describe("AlterConfigs", () => {
  test("every version replaces a topic's configs: those not named go back to their defaults, durably", async () => {
    await createTopic("replaced", 1, { "retention.ms": "1000", "cleanup.policy": "compact" });
    for (const v of [0, 1, 2]) {
      const segmentMs = String(5000 + v);
      expect(await alterFull(v, [{ resourceType: TOPIC, resourceName: "replaced", configs: [{ name: "segment.ms", value: segmentMs }] }])).toEqual([
        [ErrorCode.NONE, null, "replaced", TOPIC],
      ]);
      expect(broker.broker.services.topics.get("replaced")!.configs).toEqual({ "segment.ms": segmentMs });
      const configs = await configsOf(TOPIC, "replaced");
      expect([configs.get("retention.ms").value, configs.get("retention.ms").configSource]).toEqual(["604800000", SOURCE.DEFAULT]);
      expect([configs.get("cleanup.policy").value, configs.get("cleanup.policy").configSource]).toEqual(["delete", SOURCE.DEFAULT]);
    }
    expect(await alterFull(2, [{ resourceType: TOPIC, resourceName: "replaced", configs: [{ name: "cleanup.policy", value: "compact,delete" }] }])).toEqual([
      [ErrorCode.NONE, null, "replaced", TOPIC],
    ]);
    await reconnect();
    expect(broker.broker.services.topics.get("replaced")!.configs).toEqual({ "cleanup.policy": "compact,delete" });
    // An empty list of configs clears them all.
    expect(await alterFull(1, [{ resourceType: TOPIC, resourceName: "replaced", configs: [] }])).toEqual([[ErrorCode.NONE, null, "replaced", TOPIC]]);
    expect(broker.broker.services.topics.get("replaced")!.configs).toEqual({});
  });

  test("validateOnly checks without changing", async () => {
    await createTopic("replaced-validate", 1, { "retention.ms": "1000" });
    expect(await alterFull(2, [{ resourceType: TOPIC, resourceName: "replaced-validate", configs: [{ name: "segment.ms", value: "7" }] }], true)).toEqual([
      [ErrorCode.NONE, null, "replaced-validate", TOPIC],
    ]);
    expect(await alterFull(2, [{ resourceType: TOPIC, resourceName: "replaced-validate", configs: [{ name: "segment.ms", value: "0" }] }], true)).toEqual([
      [ErrorCode.INVALID_CONFIG, "Invalid value 0 for configuration segment.ms: Value must be at least 1", "replaced-validate", TOPIC],
    ]);
    expect(broker.broker.services.topics.get("replaced-validate")!.configs).toEqual({ "retention.ms": "1000" });
  });

  test("each mistake gets Apache's error", async () => {
    await createTopic("replaced-mistakes", 1, { "retention.ms": "1000" });
    const on = (configs: { name: string; value: string | null }[], name = "replaced-mistakes", resourceType = TOPIC) => [{ resourceType, resourceName: name, configs }];
    const cases: [ReturnType<typeof on>, number, string][] = [
      [on([{ name: "retention.ms", value: null }]), ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"],
      [on([{ name: "retention.ms", value: "1" }, { name: "retention.ms", value: "2" }]), ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"],
      [on([{ name: "retention.ms", value: "1" }], ""), ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."],
      [on([], "bad/name"), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"],
      [on([], ".."), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"],
      [on([{ name: "no.such", value: "1" }]), ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such"],
      [on([{ name: "min.cleanable.dirty.ratio", value: "2" }]), ErrorCode.INVALID_CONFIG, "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"],
      [
        on([{ name: "min.compaction.lag.ms", value: "10" }, { name: "max.compaction.lag.ms", value: "5" }]),
        ErrorCode.INVALID_CONFIG,
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
      ],
      [
        on([{ name: "remote.storage.enable", value: "true" }]),
        ErrorCode.INVALID_CONFIG,
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
      ],
      [on([{ name: "root", value: "DEBUG" }], String(BROKER_ID), BROKER_LOGGER), ErrorCode.INVALID_REQUEST, "Unknown resource type 8"],
      [on([], "x", 99), ErrorCode.INVALID_REQUEST, "Unknown resource type 99"],
    ];
    for (const [resources, errorCode, errorMessage] of cases) {
      const [[code, message]] = await alterFull(0, resources);
      expect([code, message]).toEqual([errorCode, errorMessage]);
    }
    expect(broker.broker.services.topics.get("replaced-mistakes")!.configs).toEqual({ "retention.ms": "1000" });
    // Apache 4.1.1 sends no answer to a resource named twice; bunka refuses every copy.
    expect(
      await alterFull(2, [
        { resourceType: TOPIC, resourceName: "replaced-mistakes", configs: [] },
        { resourceType: TOPIC, resourceName: "replaced-mistakes", configs: [] },
      ]),
    ).toEqual([
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", "replaced-mistakes", TOPIC],
      [ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.", "replaced-mistakes", TOPIC],
    ]);
  });

  test("a broker layer is replaced as a whole, cleaner settings and topic defaults alike", async () => {
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.retention.bytes", SET, "1048576")] }])).toEqual([[ErrorCode.NONE, null, ""]]);
    expect(await alterFull(1, [{ resourceType: BROKER, resourceName: "", configs: [{ name: "log.cleaner.backoff.ms", value: "250" }] }])).toEqual([
      [ErrorCode.NONE, null, "", BROKER],
    ]);
    const services = broker.broker.services;
    expect(services.brokerConfigs.get({ kind: "cluster" })).toEqual({ "log.cleaner.backoff.ms": "250" });
    expect(services.runtimeConfig.cleaner().backoffMs).toBe(250);
    expect(services.runtimeConfig.topicDefaults()["retention.bytes"]).toBeUndefined();

    expect(await alterFull(2, [{ resourceType: BROKER, resourceName: String(BROKER_ID), configs: [{ name: "log.cleaner.threads", value: "2" }] }])).toEqual([
      [ErrorCode.NONE, null, String(BROKER_ID), BROKER],
    ]);
    expect(services.runtimeConfig.cleaner()).toMatchObject({ threads: 2, backoffMs: 250, ioBufferSizeBytes: 65536 });
    for (const [name, value, source] of [
      ["log.cleaner.threads", "2", SOURCE.BROKER],
      ["log.cleaner.backoff.ms", "250", SOURCE.CLUSTER_DEFAULT],
      ["log.cleaner.io.buffer.size", "65536", SOURCE.STATIC],
    ] as const) {
      const described = (await configsOf(BROKER, String(BROKER_ID))).get(name);
      expect([name, described.value, described.configSource]).toEqual([name, value, source]);
    }

    expect(await alterFull(0, [{ resourceType: BROKER, resourceName: "", configs: [] }])).toEqual([[ErrorCode.NONE, null, "", BROKER]]);
    expect(await alterFull(0, [{ resourceType: BROKER, resourceName: String(BROKER_ID), configs: [] }])).toEqual([[ErrorCode.NONE, null, String(BROKER_ID), BROKER]]);
    expect(services.runtimeConfig.cleaner()).toEqual({ ...DEFAULT_CLEANER_CONFIG, ioBufferSizeBytes: 65536 });
  });

  test("broker mistakes get Apache's errors", async () => {
    const on = (configs: { name: string; value: string | null }[], name = "") => [{ resourceType: BROKER, resourceName: name, configs }];
    const cases: [ReturnType<typeof on>, number, string][] = [
      [on([], "7"), ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${BROKER_ID}, but received 7`],
      [on([], "abc"), ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: abc"],
      [on([{ name: "log.cleaner.enable", value: "false" }]), ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.cleaner.enable)"],
      [on([{ name: "num.partitions", value: "3" }]), ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)"],
      [on([{ name: "log.retention.ms", value: "abc" }]), ErrorCode.INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"],
      [on([{ name: "log.retention.ms", value: null }]), ErrorCode.INVALID_REQUEST, "Null value not supported for : log.retention.ms"],
      [
        on([{ name: "log.retention.ms", value: "1" }, { name: "log.retention.ms", value: "2" }]),
        ErrorCode.INVALID_REQUEST,
        "Error due to duplicate config keys",
      ],
      [
        on([{ name: "log.cleaner.threads", value: "3" }], String(BROKER_ID)),
        ErrorCode.INVALID_REQUEST,
        "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot be increased to more than double the current value 1 for configuration Invalid dynamic configuration",
      ],
    ];
    for (const [resources, errorCode, errorMessage] of cases) {
      const [[code, message]] = await alterFull(1, resources, true);
      expect([code, message]).toEqual([errorCode, errorMessage]);
    }
    expect(broker.broker.services.brokerConfigs.get({ kind: "cluster" })).toEqual({});
  });
});

describe("the log cleaner's settings at runtime", () => {
  test("IncrementalAlterConfigs changes the dynamic ones; the cleaner settings in effect follow at once and after a restart", async () => {
    const services = () => broker.broker.services;
    expect(
      await alter(1, [
        {
          resourceType: BROKER,
          resourceName: "",
          configs: [
            op("log.cleaner.threads", SET, "2"),
            op("log.cleaner.io.max.bytes.per.second", SET, "1048576"),
            op("log.cleaner.dedupe.buffer.size", SET, "67108864"),
            op("log.cleaner.io.buffer.load.factor", SET, "0.75"),
            op("log.cleaner.backoff.ms", SET, "500"),
          ],
        },
      ]),
    ).toEqual([[ErrorCode.NONE, null, ""]]);
    const expected = {
      ...DEFAULT_CLEANER_CONFIG,
      threads: 2,
      ioMaxBytesPerSecond: 1048576,
      dedupeBufferSizeBytes: 67108864,
      ioBufferLoadFactor: 0.75,
      backoffMs: 500,
      ioBufferSizeBytes: 65536,
    };
    expect(services().runtimeConfig.cleaner()).toEqual(expected);
    const described = await configsOf(BROKER, String(BROKER_ID));
    expect([described.get("log.cleaner.io.max.bytes.per.second").value, described.get("log.cleaner.io.max.bytes.per.second").configType]).toEqual(["1048576.0", 6]);
    expect([described.get("log.cleaner.enable").value, described.get("log.cleaner.enable").readOnly]).toEqual(["true", true]);
    expect([described.get("log.cleaner.threads").readOnly, described.get("log.cleaner.threads").configSource]).toEqual([false, SOURCE.CLUSTER_DEFAULT]);
    const cluster = await configsOf(BROKER, "");
    expect([...cluster.keys()]).toEqual([
      "log.cleaner.backoff.ms",
      "log.cleaner.dedupe.buffer.size",
      "log.cleaner.io.buffer.load.factor",
      "log.cleaner.io.max.bytes.per.second",
      "log.cleaner.threads",
    ]);
    await reconnect();
    expect(services().runtimeConfig.cleaner()).toEqual(expected);

    const refusals: [ReturnType<typeof op>, string][] = [
      [op("log.cleaner.enable", SET, "false"), "Cannot update these configs dynamically: Set(log.cleaner.enable)"],
      [op("log.cleaner.threads", SET, "-1"), "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"],
      [op("log.cleaner.threads", SET, "5"), "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot be increased to more than double the current value 2 for configuration Invalid dynamic configuration"],
      [op("log.cleaner.threads", SET, "0"), "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads should be at least 1 for configuration Invalid dynamic configuration"],
      [op("log.cleaner.dedupe.buffer.size", SET, "1000"), "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."],
      [op("log.cleaner.io.buffer.load.factor", SET, "abc"), "Invalid value abc for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE"],
      [op("log.cleaner.backoff.ms", APPEND, "1"), "Config value append is not allowed for config key: log.cleaner.backoff.ms"],
    ];
    for (const [change, message] of refusals) {
      const [[code, got]] = await alter(1, [{ resourceType: BROKER, resourceName: String(BROKER_ID), configs: [change] }]);
      expect([change.name, got]).toEqual([change.name, message]);
      expect(code).toBe(change.configOperation === APPEND ? ErrorCode.INVALID_CONFIG : ErrorCode.INVALID_REQUEST);
    }
    expect(services().runtimeConfig.cleaner()).toEqual(expected);

    expect(
      await alter(1, [
        {
          resourceType: BROKER,
          resourceName: "",
          configs: ["log.cleaner.threads", "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms"].map((name) => op(name, DELETE)),
        },
      ]),
    ).toEqual([[ErrorCode.NONE, null, ""]]);
    expect(services().runtimeConfig.cleaner()).toEqual({ ...DEFAULT_CLEANER_CONFIG, ioBufferSizeBytes: 65536 });
  });

  test("the compaction topic defaults change at runtime and apply to topics without their own value", async () => {
    await createTopic("inherits-compaction", 1);
    expect(
      await alter(1, [
        {
          resourceType: BROKER,
          resourceName: "",
          configs: [op("log.cleanup.policy", APPEND, "compact"), op("log.cleaner.min.cleanable.ratio", SET, "0.1"), op("compression.type", SET, "lz4")],
        },
      ]),
    ).toEqual([[ErrorCode.NONE, null, ""]]);
    const services = broker.broker.services;
    const resolved = resolveTopicConfigWithDefaults(services.topics.get("inherits-compaction")!.configs, services.runtimeConfig.topicDefaults());
    expect([resolved.cleanupPolicy, resolved.minCleanableDirtyRatio, resolved.compressionType]).toEqual([{ compact: true, delete: true }, 0.1, "lz4"]);
    const topic = await configsOf(TOPIC, "inherits-compaction");
    expect([topic.get("cleanup.policy").value, topic.get("cleanup.policy").configSource]).toEqual(["delete,compact", SOURCE.CLUSTER_DEFAULT]);
    expect(topic.get("min.cleanable.dirty.ratio").synonyms.map((s: any) => [s.name, s.value, s.source])).toEqual([
      ["log.cleaner.min.cleanable.ratio", "0.1", SOURCE.CLUSTER_DEFAULT],
      ["log.cleaner.min.cleanable.ratio", "0.5", SOURCE.DEFAULT],
    ]);
    expect(
      await alter(1, [{ resourceType: BROKER, resourceName: "", configs: [op("log.cleaner.min.compaction.lag.ms", SET, "10"), op("log.cleaner.max.compaction.lag.ms", SET, "5")] }]),
    ).toEqual([[ErrorCode.NONE, null, ""]]);
    // Apache 4.1.1 accepts contradicting defaults too; a topic is refused only for the lag it sets.
    const created = await client.request(19, 7, {
      topics: [{ name: "lags-inherited", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 1000,
      validateOnly: true,
    });
    expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
    expect(
      await alter(1, [{ resourceType: TOPIC, resourceName: "inherits-compaction", configs: [op("min.compaction.lag.ms", SET, "7")] }], true),
    ).toEqual([[ErrorCode.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (7) > max.compaction.lag.ms (5)", "inherits-compaction"]]);
    const reset = ["log.cleanup.policy", "log.cleaner.min.cleanable.ratio", "compression.type", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"];
    expect(await alter(1, [{ resourceType: BROKER, resourceName: "", configs: reset.map((name) => op(name, DELETE)) }])).toEqual([
      [ErrorCode.NONE, null, ""],
    ]);
  });
});

describe("ApiVersions", () => {
  test("advertises the config APIs with the versions they answer", async () => {
    const res = await client.request(18, 3, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
    const range = (key: number) => {
      const k = res.apiKeys.find((a: { apiKey: number }) => a.apiKey === key);
      return [k.minVersion, k.maxVersion];
    };
    expect([range(32), range(33), range(37), range(44)]).toEqual([
      [0, 4],
      [0, 2],
      [0, 3],
      [0, 1],
    ]);
  });
});

describe("broker-configs.json", () => {
  test("a corrupt file stops the broker instead of starting without the dynamic configs", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "bunka-config-apis-"));
    try {
      const first = await startTestBroker({ dataDir });
      const c = await WireClient.connect(first.port);
      try {
        const res = await c.request(44, 1, {
          resources: [{ resourceType: BROKER, resourceName: "", configs: [op("log.retention.bytes", SET, "1048576")] }],
          validateOnly: false,
        });
        expect(res.responses[0].errorCode).toBe(ErrorCode.NONE);
      } finally {
        c.close();
        await first.stop();
      }
      const path = join(dataDir, "__cluster", "broker-configs.json");
      writeFileSync(path, '{"format":"broker-configs","version":1,"crc32":1,"body":{"clusterDefault":{},"brokers":{}}}\n');
      await expect(startTestBroker({ dataDir })).rejects.toBeInstanceOf(CorruptStateError);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
