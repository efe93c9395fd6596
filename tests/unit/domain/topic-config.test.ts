/**
 * The topic configs: Apache Kafka 4.1's list, defaults, validation and wording (each refusal below is
 * what Apache 4.1.1 answered to the same value in IncrementalAlterConfigs), and the TopicConfig bunka
 * resolves from them.
 */
import { describe, expect, test } from "bun:test";
import {
  BROKER_CONFIG_FOR_TOPIC_CONFIG,
  brokerTopicDefaultProblem,
  canonicalTopicConfigValue,
  describeTopicConfigs,
  isTopicConfigName,
  recordTimestampProblem,
  resolveTopicConfig,
  resolveTopicConfigWithDefaults,
  TOPIC_CONFIG_DEFAULTS,
  TOPIC_CONFIG_NAMES,
  topicConfigForBrokerConfig,
  topicConfigProblem,
  topicConfigProblems,
  topicConfigType,
} from "../../../src/domain/topic-config.ts";

const LONG_MAX = "9223372036854775807";

describe("the topic config list", () => {
  test("is Apache Kafka 4.1's, with its defaults", () => {
    // DescribeConfigs of a new topic on Apache Kafka 4.1.1 (min.insync.replicas aside, which KRaft's
    // format step sets cluster-wide to the same 1).
    expect(TOPIC_CONFIG_DEFAULTS).toEqual({
      "cleanup.policy": "delete",
      "compression.gzip.level": "-1",
      "compression.lz4.level": "9",
      "compression.type": "producer",
      "compression.zstd.level": "3",
      "delete.retention.ms": "86400000",
      "file.delete.delay.ms": "60000",
      "flush.messages": LONG_MAX,
      "flush.ms": LONG_MAX,
      "follower.replication.throttled.replicas": "",
      "index.interval.bytes": "4096",
      "leader.replication.throttled.replicas": "",
      "local.retention.bytes": "-2",
      "local.retention.ms": "-2",
      "max.compaction.lag.ms": LONG_MAX,
      "max.message.bytes": "1048588",
      "message.timestamp.after.max.ms": "3600000",
      "message.timestamp.before.max.ms": LONG_MAX,
      "message.timestamp.type": "CreateTime",
      "min.cleanable.dirty.ratio": "0.5",
      "min.compaction.lag.ms": "0",
      "min.insync.replicas": "1",
      preallocate: "false",
      "remote.log.copy.disable": "false",
      "remote.log.delete.on.disable": "false",
      "remote.storage.enable": "false",
      "retention.bytes": "-1",
      "retention.ms": "604800000",
      "segment.bytes": "1073741824",
      "segment.index.bytes": "10485760",
      "segment.jitter.ms": "0",
      "segment.ms": "604800000",
      "unclean.leader.election.enable": "false",
    });
    expect(TOPIC_CONFIG_NAMES).toEqual(Object.keys(TOPIC_CONFIG_DEFAULTS).sort() as typeof TOPIC_CONFIG_NAMES);
    expect(topicConfigProblems(TOPIC_CONFIG_DEFAULTS)).toEqual([]);
  });

  test("types are Apache's (DescribeConfigs v3+ configType)", () => {
    const types = Object.fromEntries(TOPIC_CONFIG_NAMES.map((name) => [name, topicConfigType(name)]));
    expect(types).toMatchObject({
      "cleanup.policy": "LIST",
      "compression.type": "STRING",
      "compression.gzip.level": "INT",
      "min.cleanable.dirty.ratio": "DOUBLE",
      "max.compaction.lag.ms": "LONG",
      "unclean.leader.election.enable": "BOOLEAN",
      preallocate: "BOOLEAN",
      "remote.storage.enable": "BOOLEAN",
      "leader.replication.throttled.replicas": "LIST",
      "segment.index.bytes": "INT",
      "message.timestamp.type": "STRING",
    });
  });

  test("names Apache 4.1 removed or never had are unknown", () => {
    for (const name of ["message.timestamp.difference.max.ms", "message.downconversion.enable", "message.format.version", "no.such", "toString", "__proto__"]) {
      expect(topicConfigProblem(name, "1")).toEqual({ kind: "unknown", name, reason: `Unknown topic config name: ${name}` });
      expect(isTopicConfigName(name)).toBe(false);
    }
  });
});

describe("topicConfigProblem", () => {
  const reason = (name: string, value: string) => topicConfigProblem(name, value)?.reason ?? null;

  test("accepts what Apache accepts", () => {
    for (const [name, value] of [
      ["cleanup.policy", "compact"],
      ["cleanup.policy", "delete"],
      ["cleanup.policy", "compact,delete"],
      ["cleanup.policy", "delete,compact"],
      ["cleanup.policy", " compact , delete "],
      ["cleanup.policy", "compact,compact"],
      ["cleanup.policy", ""],
      ["min.cleanable.dirty.ratio", "0"],
      ["min.cleanable.dirty.ratio", "1"],
      ["min.cleanable.dirty.ratio", "NaN"],
      ["min.cleanable.dirty.ratio", "0.5f"],
      ["min.cleanable.dirty.ratio", "5e-1"],
      ["min.cleanable.dirty.ratio", ".5"],
      ["min.cleanable.dirty.ratio", "1."],
      ["min.cleanable.dirty.ratio", "-0"],
      ["min.cleanable.dirty.ratio", "0x1p-1"],
      ["min.compaction.lag.ms", "0"],
      ["min.compaction.lag.ms", LONG_MAX],
      ["max.compaction.lag.ms", "1"],
      ["delete.retention.ms", "0"],
      ["compression.type", "producer"],
      ["compression.type", "uncompressed"],
      ["compression.type", "gzip"],
      ["compression.type", "snappy"],
      ["compression.type", "lz4"],
      ["compression.type", " zstd "],
      ["compression.gzip.level", "-1"],
      ["compression.gzip.level", "1"],
      ["compression.gzip.level", "9"],
      ["compression.lz4.level", "1"],
      ["compression.lz4.level", "17"],
      ["compression.zstd.level", "-131072"],
      ["compression.zstd.level", "22"],
      ["min.insync.replicas", "2"],
      ["unclean.leader.election.enable", "true"],
      ["unclean.leader.election.enable", "TRUE"],
      ["preallocate", "False"],
      ["index.interval.bytes", "0"],
      ["segment.index.bytes", "4"],
      ["segment.jitter.ms", "0"],
      ["file.delete.delay.ms", "0"],
      ["flush.messages", "1"],
      ["flush.ms", "0"],
      ["leader.replication.throttled.replicas", "*"],
      ["leader.replication.throttled.replicas", "0:1,1:1"],
      ["leader.replication.throttled.replicas", ""],
      ["follower.replication.throttled.replicas", " 0:1 , 1:2 "],
      ["local.retention.ms", "-2"],
      ["local.retention.ms", "1000"],
      ["local.retention.bytes", "100"],
      ["remote.storage.enable", "false"],
      ["remote.log.copy.disable", "true"],
      ["remote.log.delete.on.disable", "true"],
      ["retention.ms", "-1"],
      ["retention.ms", LONG_MAX],
      ["retention.ms", " 1000 "],
      ["retention.ms", "+5"],
      ["retention.bytes", "-2"],
      ["segment.bytes", "14"],
      ["segment.bytes", "2147483647"],
      ["segment.ms", "1"],
      ["max.message.bytes", "0"],
      ["message.timestamp.type", "LogAppendTime"],
      ["message.timestamp.after.max.ms", "3600000"],
      ["message.timestamp.before.max.ms", LONG_MAX],
    ] as const) {
      expect([name, value, reason(name, value)]).toEqual([name, value, null]);
    }
  });

  test("refuses what Apache refuses, in Apache's words", () => {
    const cases: [string, string, string][] = [
      ["cleanup.policy", "Compact", "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"],
      ["cleanup.policy", "compact,shred", "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"],
      ["cleanup.policy", " compact , x ", "Invalid value x for configuration cleanup.policy: String must be one of: compact, delete"],
      ["cleanup.policy", "compact,", "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete"],
      ["cleanup.policy", ",", "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete"],
      ["min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"],
      ["min.cleanable.dirty.ratio", " 2 ", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"],
      ["min.cleanable.dirty.ratio", "-0.1", "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0"],
      ["min.cleanable.dirty.ratio", "Infinity", "Invalid value Infinity for configuration min.cleanable.dirty.ratio: Value must be no more than 1"],
      ["min.cleanable.dirty.ratio", "abc", "Invalid value abc for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"],
      ["min.cleanable.dirty.ratio", "", "Invalid value  for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"],
      ["min.compaction.lag.ms", "-1", "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0"],
      ["max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"],
      ["delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"],
      ["compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"],
      ["compression.type", " none ", "Invalid value none for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"],
      ["compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"],
      ["compression.gzip.level", " 10", "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"],
      ["compression.gzip.level", "x", "Invalid value x for configuration compression.gzip.level: Not a number of type INT"],
      ["compression.lz4.level", "0", "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1"],
      ["compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"],
      ["compression.zstd.level", "-131073", "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072"],
      ["compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"],
      ["min.insync.replicas", " 0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"],
      ["unclean.leader.election.enable", "yes", "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false"],
      ["preallocate", " yes ", "Invalid value  yes  for configuration preallocate: Expected value to be either true or false"],
      ["remote.storage.enable", "maybe", "Invalid value maybe for configuration remote.storage.enable: Expected value to be either true or false"],
      ["index.interval.bytes", "-1", "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0"],
      ["segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"],
      ["segment.jitter.ms", "-1", "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"],
      ["file.delete.delay.ms", "-1", "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0"],
      ["flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"],
      ["flush.ms", "-1", "Invalid value -1 for configuration flush.ms: Value must be at least 0"],
      ["message.timestamp.before.max.ms", "-1", "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"],
      ["message.timestamp.after.max.ms", "-1", "Invalid value -1 for configuration message.timestamp.after.max.ms: Value must be at least 0"],
      [
        "leader.replication.throttled.replicas",
        " abc , 1:2 ",
        "Invalid value [abc, 1:2] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
      ],
      [
        "follower.replication.throttled.replicas",
        "*,0:1",
        "Invalid value [*, 0:1] for configuration follower.replication.throttled.replicas: follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
      ],
      ["local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"],
      ["local.retention.bytes", "-3", "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2"],
      ["retention.ms", " -5 ", "Invalid value -5 for configuration retention.ms: Value must be at least -1"],
      ["retention.ms", "+-5", "Invalid value +-5 for configuration retention.ms: Not a number of type LONG"],
      ["retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"],
      ["retention.ms", "9223372036854775808", "Invalid value 9223372036854775808 for configuration retention.ms: Not a number of type LONG"],
      ["segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"],
      ["segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"],
      ["segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"],
      ["max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"],
      ["message.timestamp.type", "createtime", "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"],
    ];
    for (const [name, value, expected] of cases) {
      expect([name, value, topicConfigProblem(name, value)]).toEqual([name, value, { kind: "invalid", name, reason: expected }]);
    }
  });

  test("refuses what bunka cannot honour, remote storage with Apache's own answer", () => {
    expect(topicConfigProblem("remote.storage.enable", "true")).toEqual({
      kind: "unsupported",
      name: "remote.storage.enable",
      reason: "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
    });
    expect(topicConfigProblem("remote.storage.enable", " TRUE ")?.kind).toBe("unsupported");
    // Produce checks record timestamps against these bounds, so any value Apache accepts is accepted.
    for (const [name, value] of [
      ["message.timestamp.after.max.ms", "1000"],
      ["message.timestamp.after.max.ms", LONG_MAX],
      ["message.timestamp.before.max.ms", "86400000"],
      ["message.timestamp.after.max.ms", "+3600000"],
    ] as const) {
      expect(topicConfigProblem(name, value)).toBeNull();
    }
  });
});

describe("topicConfigProblems", () => {
  test("unknown names first, then values in name order", () => {
    const problems = topicConfigProblems({ "segment.ms": "0", zzz: "1", "retention.ms": "100", "cleanup.policy": "x" });
    expect(problems.map((p) => [p.kind, p.name])).toEqual([
      ["unknown", "zzz"],
      ["invalid", "cleanup.policy"],
      ["invalid", "segment.ms"],
    ]);
  });

  test("min.compaction.lag.ms may not exceed max.compaction.lag.ms, the broker's default taking part", () => {
    const conflict = "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)";
    expect(topicConfigProblems({ "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5" })).toEqual([
      { kind: "invalid", name: "min.compaction.lag.ms", reason: conflict },
    ]);
    expect(topicConfigProblems({ "min.compaction.lag.ms": "10" }, { "max.compaction.lag.ms": "5" })[0]?.reason).toBe(conflict);
    expect(topicConfigProblems({ "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5" })).toEqual([]);
    expect(topicConfigProblems({ "min.compaction.lag.ms": "10" }, { "max.compaction.lag.ms": "5", "min.compaction.lag.ms": "1" })[0]?.reason).toBe(conflict);
    // Contradicting broker defaults are no fault of a topic that sets neither (Apache accepts it too).
    expect(topicConfigProblems({ "retention.ms": "1" }, { "max.compaction.lag.ms": "5", "min.compaction.lag.ms": "10" })).toEqual([]);
  });
});

describe("resolveTopicConfig", () => {
  test("the defaults", () => {
    expect(resolveTopicConfig({})).toEqual({
      retentionMs: 604800000,
      retentionBytes: -1,
      segmentBytes: 1073741824,
      segmentMs: 604800000,
      cleanupPolicy: { compact: false, delete: true },
      minCleanableDirtyRatio: 0.5,
      minCompactionLagMs: 0,
      maxCompactionLagMs: 9223372036854775807,
      deleteRetentionMs: 86400000,
      compressionType: "producer",
      compressionGzipLevel: -1,
      compressionLz4Level: 9,
      compressionZstdLevel: 3,
      maxMessageBytes: 1048588,
      messageTimestampType: "CreateTime",
      messageTimestampBeforeMaxMs: 9223372036854775807,
      messageTimestampAfterMaxMs: 3600000,
    });
  });

  test("overlays the topic's configs, parsed as Apache parses them", () => {
    const resolved = resolveTopicConfig({
      "retention.ms": " +1000 ",
      "retention.bytes": "-7",
      "cleanup.policy": " compact , delete ",
      "min.cleanable.dirty.ratio": "0x1p-2",
      "min.compaction.lag.ms": "60000",
      "max.compaction.lag.ms": "120000",
      "delete.retention.ms": "0",
      "compression.type": " zstd ",
      "compression.zstd.level": "-5",
      "message.timestamp.type": "LogAppendTime",
    });
    expect(resolved).toMatchObject({
      retentionMs: 1000,
      retentionBytes: -1,
      cleanupPolicy: { compact: true, delete: true },
      minCleanableDirtyRatio: 0.25,
      minCompactionLagMs: 60000,
      maxCompactionLagMs: 120000,
      deleteRetentionMs: 0,
      compressionType: "zstd",
      compressionZstdLevel: -5,
      messageTimestampType: "LogAppendTime",
    });
  });

  test("cleanup.policy: each policy alone, both in any order, and the empty list", () => {
    const policy = (value: string) => resolveTopicConfig({ "cleanup.policy": value }).cleanupPolicy;
    expect(policy("compact")).toEqual({ compact: true, delete: false });
    expect(policy("delete")).toEqual({ compact: false, delete: true });
    expect(policy("delete,compact")).toEqual({ compact: true, delete: true });
    expect(policy("")).toEqual({ compact: false, delete: false });
  });

  test("broker-level defaults apply under the topic's own values", () => {
    const resolved = resolveTopicConfigWithDefaults(
      { "min.cleanable.dirty.ratio": "0.9" },
      { "min.cleanable.dirty.ratio": "0.1", "cleanup.policy": "compact", "compression.type": "lz4", "not.a.topic.config": "x" },
    );
    expect([resolved.minCleanableDirtyRatio, resolved.cleanupPolicy, resolved.compressionType]).toEqual([0.9, { compact: true, delete: false }, "lz4"]);
  });

  test("throws on stored configs that are invalid (a broken invariant)", () => {
    expect(() => resolveTopicConfig({ "segment.ms": "0" })).toThrow("stored topic configs are invalid");
    expect(() => resolveTopicConfigWithDefaults({}, { "segment.ms": "0" })).toThrow("broker-level topic config defaults are invalid");
  });
});

describe("recordTimestampProblem", () => {
  const bounded = { ...resolveTopicConfig({}), messageTimestampBeforeMaxMs: 1000, messageTimestampAfterMaxMs: 500 };
  const now = 1_700_000_000_000;

  test("accepts timestamps within the bounds, records without one, and LogAppendTime topics", () => {
    for (const ts of [now, now - 1000, now + 500, -1]) expect(recordTimestampProblem(bounded, ts, 0, now)).toBeNull();
    expect(recordTimestampProblem({ ...bounded, messageTimestampType: "LogAppendTime" }, 0, 0, now)).toBeNull();
    expect(recordTimestampProblem(resolveTopicConfig({}), 0, 0, now)).toBeNull();
  });

  test("refuses the others with Apache's record error", () => {
    expect(recordTimestampProblem(bounded, now - 1001, 7, now)).toBe(
      `Timestamp ${now - 1001} of message with offset 7 is out of range. The timestamp should be within [${now - 1000}, ${now + 500}]`,
    );
    expect(recordTimestampProblem(bounded, now + 501, 0, now)).toContain("is out of range");
    // The default after-bound (1 hour) with no before-bound: Java's arithmetic wraps the low end.
    const message = recordTimestampProblem(resolveTopicConfig({}), now + 3_600_001, 0, now)!;
    expect(message).toBe(
      `Timestamp ${now + 3_600_001} of message with offset 0 is out of range. The timestamp should be within [${BigInt(now) - 9223372036854775807n}, ${now + 3_600_000}]`,
    );
  });
});

describe("display and broker synonyms", () => {
  test("values print as Apache prints them after parsing", () => {
    expect(canonicalTopicConfigValue("min.cleanable.dirty.ratio", "1")).toBe("1.0");
    expect(canonicalTopicConfigValue("min.cleanable.dirty.ratio", "5e-1")).toBe("0.5");
    expect(canonicalTopicConfigValue("min.cleanable.dirty.ratio", "0.0001")).toBe("1.0E-4");
    expect(canonicalTopicConfigValue("min.cleanable.dirty.ratio", "NaN")).toBe("NaN");
    expect(canonicalTopicConfigValue("cleanup.policy", " compact , delete ")).toBe("compact,delete");
    expect(canonicalTopicConfigValue("retention.ms", "+5")).toBe("5");
    expect(canonicalTopicConfigValue("preallocate", "TRUE")).toBe("true");
    expect(canonicalTopicConfigValue("compression.type", " gzip ")).toBe("gzip");
    expect(canonicalTopicConfigValue("leader.replication.throttled.replicas", " 0:1 , 1:1 ")).toBe("0:1,1:1");
  });

  test("every config with a server default has Apache's broker-level synonym", () => {
    expect(BROKER_CONFIG_FOR_TOPIC_CONFIG).toEqual({
      "cleanup.policy": "log.cleanup.policy",
      "compression.gzip.level": "compression.gzip.level",
      "compression.lz4.level": "compression.lz4.level",
      "compression.type": "compression.type",
      "compression.zstd.level": "compression.zstd.level",
      "delete.retention.ms": "log.cleaner.delete.retention.ms",
      "file.delete.delay.ms": "log.segment.delete.delay.ms",
      "flush.messages": "log.flush.interval.messages",
      "flush.ms": "log.flush.interval.ms",
      "index.interval.bytes": "log.index.interval.bytes",
      "local.retention.bytes": "log.local.retention.bytes",
      "local.retention.ms": "log.local.retention.ms",
      "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
      "max.message.bytes": "message.max.bytes",
      "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
      "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
      "message.timestamp.type": "log.message.timestamp.type",
      "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
      "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
      "min.insync.replicas": "min.insync.replicas",
      preallocate: "log.preallocate",
      "retention.bytes": "log.retention.bytes",
      "retention.ms": "log.retention.ms",
      "segment.bytes": "log.segment.bytes",
      "segment.index.bytes": "log.index.size.max.bytes",
      "segment.jitter.ms": "log.roll.jitter.ms",
      "segment.ms": "log.roll.ms",
      "unclean.leader.election.enable": "unclean.leader.election.enable",
    });
    expect(topicConfigForBrokerConfig("log.cleaner.min.cleanable.ratio")).toBe("min.cleanable.dirty.ratio");
    expect(topicConfigForBrokerConfig("log.cleaner.threads")).toBeUndefined();
  });

  test("broker-level defaults are checked with the topic rules, named as the broker config", () => {
    expect(brokerTopicDefaultProblem("log.cleaner.min.cleanable.ratio", "2")?.reason).toBe(
      "Invalid value 2.0 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1",
    );
    expect(brokerTopicDefaultProblem("log.cleanup.policy", "x")?.reason).toBe(
      "Invalid value x for configuration log.cleanup.policy: String must be one of: compact, delete",
    );
    expect(brokerTopicDefaultProblem("compression.type", "gzip")).toBeNull();
    expect(brokerTopicDefaultProblem("log.message.timestamp.after.max.ms", "5")).toBeNull();
    expect(brokerTopicDefaultProblem("log.cleaner.threads", "1")?.kind).toBe("unknown");
  });

  test("describeTopicConfigs lists every config with the topic's value or the default", () => {
    const described = describeTopicConfigs({ "cleanup.policy": "compact, delete" });
    expect(described.map((c) => c.name)).toEqual([...TOPIC_CONFIG_NAMES]);
    expect(described.find((c) => c.name === "cleanup.policy")).toEqual({ name: "cleanup.policy", value: "compact, delete", type: "LIST", isDefault: false });
    expect(described.find((c) => c.name === "preallocate")).toEqual({ name: "preallocate", value: "false", type: "BOOLEAN", isDefault: true });
  });
});
