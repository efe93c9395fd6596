import { describe, expect, test } from "bun:test";
import {
  describeTopicConfigs,
  isTopicConfigName,
  resolveTopicConfig,
  TOPIC_CONFIG_DEFAULTS,
  TOPIC_CONFIG_NAMES,
  topicConfigProblem,
  topicConfigProblems,
  topicConfigType,
} from "../../../src/domain/topic-config.ts";

describe("topic config defaults", () => {
  test("are Apache Kafka's", () => {
    expect(TOPIC_CONFIG_DEFAULTS).toEqual({
      "cleanup.policy": "delete",
      "delete.retention.ms": "86400000",
      "max.compaction.lag.ms": "9223372036854775807",
      "max.message.bytes": "1048588",
      "message.timestamp.type": "CreateTime",
      "min.cleanable.dirty.ratio": "0.5",
      "min.compaction.lag.ms": "0",
      "retention.bytes": "-1",
      "retention.ms": "604800000",
      "segment.bytes": "1073741824",
      "segment.ms": "604800000",
    });
    expect(TOPIC_CONFIG_NAMES).toEqual(Object.keys(TOPIC_CONFIG_DEFAULTS).sort() as typeof TOPIC_CONFIG_NAMES);
  });

  test("are all valid", () => {
    expect(topicConfigProblems(TOPIC_CONFIG_DEFAULTS)).toEqual([]);
  });
});

describe("topicConfigProblem", () => {
  const reason = (name: string, value: string) => topicConfigProblem(name, value)?.reason ?? null;

  test("accepts values in range, with Apache's trimming and sign rules", () => {
    for (const [name, value] of [
      ["retention.ms", "-1"],
      ["retention.ms", "9223372036854775807"],
      ["retention.ms", " 1000 "],
      ["retention.ms", "+5"],
      ["retention.bytes", "-1"],
      ["retention.bytes", "0"],
      ["segment.bytes", "14"],
      ["segment.bytes", "2147483647"],
      ["segment.ms", "1"],
      ["max.message.bytes", "0"],
      ["cleanup.policy", "delete"],
      ["message.timestamp.type", "CreateTime"],
      ["message.timestamp.type", "LogAppendTime"],
    ] as const) {
      expect(topicConfigProblem(name, value)).toBeNull();
    }
  });

  test("refuses values below the minimum with Apache's wording", () => {
    expect(reason("retention.ms", "-2")).toBe("Invalid value -2 for configuration retention.ms: Value must be at least -1");
    expect(reason("retention.bytes", "-2")).toBe("Invalid value -2 for configuration retention.bytes: Value must be at least -1");
    expect(reason("segment.bytes", "13")).toBe("Invalid value 13 for configuration segment.bytes: Value must be at least 14");
    expect(reason("segment.ms", "0")).toBe("Invalid value 0 for configuration segment.ms: Value must be at least 1");
    expect(reason("max.message.bytes", "-1")).toBe("Invalid value -1 for configuration max.message.bytes: Value must be at least 0");
  });

  test("refuses values that are not numbers of the config's type", () => {
    expect(reason("retention.ms", "abc")).toBe("Invalid value abc for configuration retention.ms: Not a number of type LONG");
    expect(reason("retention.ms", "1.5")).toContain("Not a number of type LONG");
    expect(reason("retention.ms", "9223372036854775808")).toContain("Not a number of type LONG");
    expect(reason("retention.ms", "")).toContain("Not a number of type LONG");
    expect(reason("segment.bytes", "2147483648")).toContain("Not a number of type INT");
    expect(reason("max.message.bytes", "1e6")).toContain("Not a number of type INT");
  });

  test("accepts compact, delete and both, and refuses any other cleanup policy", () => {
    for (const value of ["compact", "delete", "compact,delete", "delete, compact"]) expect(reason("cleanup.policy", value)).toBeNull();
    expect(reason("cleanup.policy", "shred")).toBe("Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete");
  });

  test("checks the compaction configs with Apache's bounds", () => {
    expect(reason("min.cleanable.dirty.ratio", "0.01")).toBeNull();
    expect(reason("min.cleanable.dirty.ratio", "1.5")).toContain("Value must be no more than 1");
    expect(reason("min.cleanable.dirty.ratio", "half")).toContain("Not a number of type DOUBLE");
    expect(reason("max.compaction.lag.ms", "0")).toContain("Value must be at least 1");
    expect(reason("delete.retention.ms", "-1")).toContain("Value must be at least 0");
  });

  test("refuses unknown timestamp types (case-sensitive, as Apache)", () => {
    expect(reason("message.timestamp.type", "createtime")).toBe(
      "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
    );
  });

  test("tells unknown names from Apache configs bunka does not implement", () => {
    expect(topicConfigProblem("no.such.config", "1")).toEqual({
      kind: "unknown",
      name: "no.such.config",
      reason: "Unknown topic config name: no.such.config",
    });
    expect(topicConfigProblem("compression.type", "lz4")?.kind).toBe("unsupported");
    expect(topicConfigProblem("min.insync.replicas", "2")?.kind).toBe("unsupported");
    expect(topicConfigProblem("toString", "x")?.kind).toBe("unknown");
  });

  test("topicConfigProblems lists every problem in name order", () => {
    const problems = topicConfigProblems({ "segment.ms": "0", bogus: "1", "retention.ms": "100" });
    expect(problems.map((p) => [p.kind, p.name])).toEqual([
      ["unknown", "bogus"],
      ["invalid", "segment.ms"],
    ]);
  });
});

describe("resolveTopicConfig", () => {
  test("overlays the topic's configs on the defaults", () => {
    expect(resolveTopicConfig({ "retention.ms": "1000", "message.timestamp.type": "LogAppendTime" })).toEqual({
      retentionMs: 1000,
      retentionBytes: -1,
      segmentBytes: 1073741824,
      segmentMs: 604800000,
      cleanupPolicy: { compact: false, delete: true },
      minCleanableDirtyRatio: 0.5,
      minCompactionLagMs: 0,
      maxCompactionLagMs: 9223372036854775807,
      deleteRetentionMs: 86400000,
      maxMessageBytes: 1048588,
      messageTimestampType: "LogAppendTime",
    });
  });

  test("keeps Long.MAX_VALUE retention comparable", () => {
    const { retentionMs } = resolveTopicConfig({ "retention.ms": "9223372036854775807" });
    expect(retentionMs).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
  });

  test("throws on stored configs that are invalid (a broken invariant)", () => {
    expect(() => resolveTopicConfig({ "segment.ms": "0" })).toThrow("stored topic configs are invalid");
  });
});

describe("describeTopicConfigs", () => {
  test("lists every honoured config with its effective value and whether it is a default", () => {
    const described = describeTopicConfigs({ "retention.ms": "5" });
    expect(described.map((c) => c.name)).toEqual([...TOPIC_CONFIG_NAMES]);
    expect(described.find((c) => c.name === "retention.ms")).toEqual({ name: "retention.ms", value: "5", type: "LONG", isDefault: false });
    expect(described.find((c) => c.name === "segment.bytes")).toEqual({
      name: "segment.bytes",
      value: "1073741824",
      type: "INT",
      isDefault: true,
    });
  });

  test("exposes types and names", () => {
    expect(isTopicConfigName("cleanup.policy")).toBe(true);
    expect(isTopicConfigName("constructor")).toBe(false);
    expect(topicConfigType("cleanup.policy")).toBe("LIST");
    expect(topicConfigType("message.timestamp.type")).toBe("STRING");
  });
});
