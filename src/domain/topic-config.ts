/**
 * The topic-level configs bunka honours, their Apache Kafka defaults, and their validation. Pure: the
 * CreateTopics / AlterConfigs / IncrementalAlterConfigs handlers call `topicConfigProblems` and answer
 * INVALID_CONFIG with the first reason, as Apache does; DescribeConfigs uses `describeTopicConfigs`.
 *
 * Parsing follows Apache's ConfigDef: the value is trimmed, LONG and INT are base-10 with an optional
 * sign and must fit 64 / 32 bits, and the error wording is Apache's ("Invalid value X for configuration
 * Y: ..."), because client tooling shows these messages to people who know Kafka's.
 *
 * Configs Apache knows but bunka does not implement (compression.type, min.insync.replicas, ...) are
 * refused with their own reason instead of being accepted and ignored: a setting that silently does
 * nothing is worse than an error, especially for durability-related ones.
 */

export type TopicConfigType = "LONG" | "INT" | "STRING" | "LIST" | "DOUBLE";

interface ConfigSpec {
  type: TopicConfigType;
  defaultValue: string;
  /** Returns Apache's message suffix for an invalid value, or null. `value` is already trimmed. */
  check: (value: string) => string | null;
}

const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function integer(type: "LONG" | "INT", min: bigint): (value: string) => string | null {
  const [low, high] = type === "LONG" ? [INT64_MIN, INT64_MAX] : [INT32_MIN, INT32_MAX];
  return (value) => {
    const parsed = parseInteger(value);
    if (parsed === undefined || parsed < low || parsed > high) return `Not a number of type ${type}`;
    if (parsed < min) return `Value must be at least ${min}`;
    return null;
  };
}

/** Java's Long.parseLong grammar: optional sign, then decimal digits only. */
function parseInteger(value: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(value)) return undefined;
  return BigInt(value);
}

const TIMESTAMP_TYPES = ["CreateTime", "LogAppendTime"] as const;
const CLEANUP_POLICIES = ["compact", "delete"] as const;

/** Java's Double.parseDouble for the plain decimal forms a config value takes. */
function doubleBetween(min: number, max: number): (value: string) => string | null {
  return (value) => {
    if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) return "Not a number of type DOUBLE";
    const parsed = Number(value);
    if (parsed < min) return `Value must be at least ${min}`;
    if (parsed > max) return `Value must be no more than ${max}`;
    return null;
  };
}

const SPECS = {
  "cleanup.policy": {
    type: "LIST",
    defaultValue: "delete",
    check: (value: string) => {
      const items = value.split(",").map((item) => item.trim());
      const bad = items.find((item) => !(CLEANUP_POLICIES as readonly string[]).includes(item));
      if (bad !== undefined) return `String must be one of: ${CLEANUP_POLICIES.join(", ")}`;
      return null;
    },
  },
  "delete.retention.ms": { type: "LONG", defaultValue: "86400000", check: integer("LONG", 0n) },
  "max.compaction.lag.ms": { type: "LONG", defaultValue: "9223372036854775807", check: integer("LONG", 1n) },
  "min.cleanable.dirty.ratio": { type: "DOUBLE", defaultValue: "0.5", check: doubleBetween(0, 1) },
  "min.compaction.lag.ms": { type: "LONG", defaultValue: "0", check: integer("LONG", 0n) },
  "max.message.bytes": { type: "INT", defaultValue: "1048588", check: integer("INT", 0n) },
  "message.timestamp.type": {
    type: "STRING",
    defaultValue: "CreateTime",
    check: (value: string) =>
      (TIMESTAMP_TYPES as readonly string[]).includes(value) ? null : `String must be one of: ${TIMESTAMP_TYPES.join(", ")}`,
  },
  "retention.bytes": { type: "LONG", defaultValue: "-1", check: integer("LONG", -1n) },
  "retention.ms": { type: "LONG", defaultValue: "604800000", check: integer("LONG", -1n) },
  "segment.bytes": { type: "INT", defaultValue: "1073741824", check: integer("INT", 14n) },
  "segment.ms": { type: "LONG", defaultValue: "604800000", check: integer("LONG", 1n) },
} satisfies Record<string, ConfigSpec>;

export type TopicConfigName = keyof typeof SPECS;

/** The honoured config names, sorted (DescribeConfigs lists them in this order). */
export const TOPIC_CONFIG_NAMES: readonly TopicConfigName[] = (Object.keys(SPECS) as TopicConfigName[]).sort();

/** Apache Kafka's defaults for the honoured configs, as DescribeConfigs reports them. */
export const TOPIC_CONFIG_DEFAULTS: Readonly<Record<TopicConfigName, string>> = Object.freeze(
  Object.fromEntries(TOPIC_CONFIG_NAMES.map((name) => [name, SPECS[name].defaultValue])) as Record<TopicConfigName, string>,
);

/**
 * Topic configs that Apache Kafka accepts but bunka does not implement. Listed so that the error says
 * "not supported" rather than "unknown" for a name a Kafka user will rightly consider valid.
 */
const APACHE_ONLY_CONFIGS: ReadonlySet<string> = new Set([
  "compression.gzip.level",
  "compression.lz4.level",
  "compression.type",
  "compression.zstd.level",
  "file.delete.delay.ms",
  "flush.messages",
  "flush.ms",
  "follower.replication.throttled.replicas",
  "index.interval.bytes",
  "leader.replication.throttled.replicas",
  "local.retention.bytes",
  "local.retention.ms",
  "message.downconversion.enable",
  "message.format.version",
  "message.timestamp.after.max.ms",
  "message.timestamp.before.max.ms",
  "message.timestamp.difference.max.ms",
  "min.insync.replicas",
  "preallocate",
  "remote.log.copy.disable",
  "remote.log.delete.on.disable",
  "remote.storage.enable",
  "segment.index.bytes",
  "segment.jitter.ms",
  "unclean.leader.election.enable",
]);

export function isTopicConfigName(name: string): name is TopicConfigName {
  return Object.hasOwn(SPECS, name);
}

export function topicConfigType(name: TopicConfigName): TopicConfigType {
  return SPECS[name].type;
}

export type TopicConfigProblem =
  /** A name neither bunka nor Apache Kafka knows. */
  | { kind: "unknown"; name: string; reason: string }
  /** A name Apache Kafka knows but bunka does not implement. */
  | { kind: "unsupported"; name: string; reason: string }
  /** A known name with a value that does not parse or is out of range. */
  | { kind: "invalid"; name: string; reason: string };

/** Why `value` is not acceptable for `name`, or null. Every problem maps to INVALID_CONFIG. */
export function topicConfigProblem(name: string, value: string): TopicConfigProblem | null {
  if (!isTopicConfigName(name)) {
    if (APACHE_ONLY_CONFIGS.has(name)) {
      return { kind: "unsupported", name, reason: `Topic config ${name} is not supported by bunka` };
    }
    return { kind: "unknown", name, reason: `Unknown topic config name: ${name}` };
  }
  const message = SPECS[name].check(value.trim());
  if (message === null) return null;
  return { kind: "invalid", name, reason: `Invalid value ${value} for configuration ${name}: ${message}` };
}

/** Every problem with a set of topic configs, in name order; empty when all are acceptable. */
export function topicConfigProblems(configs: Readonly<Record<string, string>>): TopicConfigProblem[] {
  const problems: TopicConfigProblem[] = [];
  for (const name of Object.keys(configs).sort()) {
    const problem = topicConfigProblem(name, configs[name]!);
    if (problem !== null) problems.push(problem);
  }
  return problems;
}

/** The effective configs of a topic, in the units the log layer uses. */
export interface TopicConfig {
  retentionMs: number;
  retentionBytes: number;
  segmentBytes: number;
  segmentMs: number;
  cleanupPolicy: { compact: boolean; delete: boolean };
  minCleanableDirtyRatio: number;
  minCompactionLagMs: number;
  maxCompactionLagMs: number;
  deleteRetentionMs: number;
  maxMessageBytes: number;
  messageTimestampType: "CreateTime" | "LogAppendTime";
}

/**
 * Overlays a topic's own configs on the defaults. The configs must already be valid (they were checked
 * before they were stored); an invalid one is a broken invariant and throws. Values beyond 2^53
 * (retention.ms = Long.MAX_VALUE means "forever") become the nearest double, which compares correctly.
 */
export function resolveTopicConfig(configs: Readonly<Record<string, string>>): TopicConfig {
  const problems = topicConfigProblems(configs);
  if (problems.length > 0) throw new Error(`stored topic configs are invalid: ${problems[0]!.reason}`);
  const value = (name: TopicConfigName): string => (configs[name] ?? SPECS[name].defaultValue).trim();
  return {
    retentionMs: Number(value("retention.ms")),
    retentionBytes: Number(value("retention.bytes")),
    segmentBytes: Number(value("segment.bytes")),
    segmentMs: Number(value("segment.ms")),
    cleanupPolicy: {
      compact: value("cleanup.policy").split(",").some((item) => item.trim() === "compact"),
      delete: value("cleanup.policy").split(",").some((item) => item.trim() === "delete"),
    },
    minCleanableDirtyRatio: Number(value("min.cleanable.dirty.ratio")),
    minCompactionLagMs: Number(value("min.compaction.lag.ms")),
    maxCompactionLagMs: Number(value("max.compaction.lag.ms")),
    deleteRetentionMs: Number(value("delete.retention.ms")),
    maxMessageBytes: Number(value("max.message.bytes")),
    messageTimestampType: value("message.timestamp.type") === "LogAppendTime" ? "LogAppendTime" : "CreateTime",
  };
}

export interface DescribedTopicConfig {
  name: TopicConfigName;
  value: string;
  type: TopicConfigType;
  /** True when the topic does not set it (DescribeConfigs source DEFAULT_CONFIG, else TOPIC_CONFIG). */
  isDefault: boolean;
}

/** Every honoured config with its effective value, in name order, for DescribeConfigs. */
export function describeTopicConfigs(configs: Readonly<Record<string, string>>): DescribedTopicConfig[] {
  return TOPIC_CONFIG_NAMES.map((name) => {
    const own = configs[name];
    return {
      name,
      value: own ?? SPECS[name].defaultValue,
      type: SPECS[name].type,
      isDefault: own === undefined,
    };
  });
}

/**
 * The broker-level config that supplies each honoured topic config's default, by topic config name
 * (Apache's synonyms: `log.retention.ms` is the broker-wide default of `retention.ms`, and so on).
 * These are the broker configs that IncrementalAlterConfigs may change at runtime, for the cluster
 * default or one broker, because they only change what a topic without its own value gets.
 */
export const BROKER_CONFIG_FOR_TOPIC_CONFIG: Readonly<Record<TopicConfigName, string>> = Object.freeze({
  "cleanup.policy": "log.cleanup.policy",
  "delete.retention.ms": "log.cleaner.delete.retention.ms",
  "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
  "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
  "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
  "max.message.bytes": "message.max.bytes",
  "message.timestamp.type": "log.message.timestamp.type",
  "retention.bytes": "log.retention.bytes",
  "retention.ms": "log.retention.ms",
  "segment.bytes": "log.segment.bytes",
  "segment.ms": "log.roll.ms",
});

const TOPIC_CONFIG_FOR_BROKER_CONFIG: ReadonlyMap<string, TopicConfigName> = new Map(
  TOPIC_CONFIG_NAMES.map((name) => [BROKER_CONFIG_FOR_TOPIC_CONFIG[name], name]),
);

/** The topic config whose default the broker config `brokerName` sets, or undefined for any other name. */
export function topicConfigForBrokerConfig(brokerName: string): TopicConfigName | undefined {
  return TOPIC_CONFIG_FOR_BROKER_CONFIG.get(brokerName);
}

/**
 * Why `value` is not acceptable for the broker-level default `brokerName` (log.retention.ms, ...), or
 * null. The rules are the topic config's; the message names the broker config, as Apache's does.
 */
export function brokerTopicDefaultProblem(brokerName: string, value: string): TopicConfigProblem | null {
  const topicName = topicConfigForBrokerConfig(brokerName);
  if (topicName === undefined) {
    return { kind: "unknown", name: brokerName, reason: `Unknown broker-level topic default: ${brokerName}` };
  }
  const message = SPECS[topicName].check(value.trim());
  if (message === null) return null;
  return { kind: "invalid", name: brokerName, reason: `Invalid value ${value} for configuration ${brokerName}: ${message}` };
}

/**
 * The effective configs of a topic when broker-level defaults apply: the topic's own value, else the
 * broker's default (keyed by topic config name, as BrokerConfig.topicConfigDefaults is), else Apache's
 * built-in default. Both inputs must already be valid (each was checked before it was stored); an
 * invalid one is a broken invariant and throws. Names in `brokerDefaults` that are not honoured topic
 * configs are ignored: they cannot change anything the log layer does.
 */
export function resolveTopicConfigWithDefaults(
  topicConfigs: Readonly<Record<string, string>>,
  brokerDefaults: Readonly<Record<string, string>>,
): TopicConfig {
  const merged: Record<string, string> = {};
  for (const name of TOPIC_CONFIG_NAMES) {
    const value = brokerDefaults[name];
    if (value === undefined) continue;
    const problem = topicConfigProblem(name, value);
    if (problem !== null) throw new Error(`broker-level topic config defaults are invalid: ${problem.reason}`);
    merged[name] = value;
  }
  return resolveTopicConfig({ ...merged, ...topicConfigs });
}
