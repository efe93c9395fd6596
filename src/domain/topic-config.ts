/**
 * Apache Kafka 4.1's topic configs as bunka treats them: their defaults, types, broker-level synonyms and
 * validation, and the effective TopicConfig the log layer, the cleaner and Produce read. Pure: the
 * CreateTopics / AlterConfigs / IncrementalAlterConfigs handlers call `topicConfigProblems` and answer
 * INVALID_CONFIG with the first reason, as Apache does; DescribeConfigs lists every config here.
 *
 * Every one of Apache 4.1's 33 topic configs is accepted with Apache's validation and error wording
 * (config-values.ts), and DescribeConfigs shows each. Each is one of:
 * - honoured: bunka does what Apache does (retention, segments, cleanup.policy and compaction, the
 *   compression codec, max.message.bytes, message.timestamp.type);
 * - accepted without effect, because it has no meaning with one copy of the data or with how bunka
 *   writes (min.insync.replicas, replication throttles, preallocate, flush.*, ...), listed as such in the
 *   README with the reason;
 * - refused for the values that would silently change semantics: remote.storage.enable=true (bunka has
 *   no tiered storage; Apache gives the same answer when tiered storage is off).
 * Names Apache 4.1 does not know, message.format.version, message.downconversion.enable and
 * message.timestamp.difference.max.ms among them (removed in Apache 4.0), are "Unknown topic config name".
 */
import {
  booleanValue,
  type ConfigType,
  canonicalValue,
  doubleIn,
  INT64_MAX,
  integerIn,
  invalidValue,
  javaListToString,
  LONG_MAX_TEXT,
  listOf,
  numericValue,
  parseJavaBoolean,
  parseJavaInteger,
  parseJavaList,
  stringIn,
  type ValueCheck,
} from "./config-values.ts";

export type TopicConfigType = ConfigType;

interface ConfigSpec {
  type: TopicConfigType;
  defaultValue: string;
  /** Apache's broker-level synonym, which supplies the default; null for configs that have none. */
  brokerName: string | null;
  check: ValueCheck;
  /** A refusal of a value Apache would accept but bunka cannot honour; null when honoured or harmless. */
  refuse?: (value: string) => string | null;
  /**
   * True when Apache's broker synonym has no default of its own (log.retention.ms, log.roll.ms, ...: the
   * value comes from log.retention.hours and the like, which bunka does not have), so DescribeConfigs
   * lists no DEFAULT_CONFIG synonym for it and a broker shows it as null until it is set.
   */
  brokerDefaultUnset?: true;
}

export const CLEANUP_POLICIES = ["compact", "delete"] as const;
export const TIMESTAMP_TYPES = ["CreateTime", "LogAppendTime"] as const;
/** compression.type values, in the order Apache's refusal lists them. */
export const COMPRESSION_TYPES = ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"] as const;
export type CompressionTypeName = (typeof COMPRESSION_TYPES)[number];

/** GZIP's levels: 1..9, or -1 for zlib's default (Apache's CompressionType.GZIP.levelValidator). */
const gzipLevel: ValueCheck = (value, name) => {
  const parsed = parseJavaInteger(value, "INT");
  if (parsed === undefined) return invalidValue(name, value, "Not a number of type INT");
  if (parsed > 9n || (parsed < 1n && parsed !== -1n)) {
    return invalidValue(name, parsed.toString(), "Value must be between 1 and 9 or equal to -1");
  }
  return null;
};

/** Apache's ThrottledReplicaListValidator: "*" alone, or partition:broker pairs. */
const throttledReplicas: ValueCheck = (value, name) => {
  const items = parseJavaList(value);
  if (items.every((item) => /^([0-9]+:[0-9]+)?$/.test(item)) || items.join("") === "*") return null;
  return invalidValue(
    name,
    javaListToString(items),
    `${name} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...`,
  );
};

/** Apache's answer when tiered storage is disabled in the broker, which it always is in bunka. */
const TIERED_STORAGE_DISABLED =
  "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.";

/** The refusal of a timestamp bound other than its default, while Produce does not check them. */
const SPECS = {
  "cleanup.policy": { type: "LIST", defaultValue: "delete", brokerName: "log.cleanup.policy", check: listOf(CLEANUP_POLICIES) },
  "compression.gzip.level": { type: "INT", defaultValue: "-1", brokerName: "compression.gzip.level", check: gzipLevel },
  "compression.lz4.level": { type: "INT", defaultValue: "9", brokerName: "compression.lz4.level", check: integerIn("INT", 1n, 17n) },
  "compression.type": { type: "STRING", defaultValue: "producer", brokerName: "compression.type", check: stringIn(COMPRESSION_TYPES) },
  "compression.zstd.level": { type: "INT", defaultValue: "3", brokerName: "compression.zstd.level", check: integerIn("INT", -131072n, 22n) },
  "delete.retention.ms": { type: "LONG", defaultValue: "86400000", brokerName: "log.cleaner.delete.retention.ms", check: integerIn("LONG", 0n) },
  "file.delete.delay.ms": { type: "LONG", defaultValue: "60000", brokerName: "log.segment.delete.delay.ms", check: integerIn("LONG", 0n) },
  "flush.messages": { type: "LONG", defaultValue: LONG_MAX_TEXT, brokerName: "log.flush.interval.messages", check: integerIn("LONG", 1n) },
  "flush.ms": { type: "LONG", defaultValue: LONG_MAX_TEXT, brokerName: "log.flush.interval.ms", check: integerIn("LONG", 0n), brokerDefaultUnset: true },
  "follower.replication.throttled.replicas": { type: "LIST", defaultValue: "", brokerName: null, check: throttledReplicas },
  "index.interval.bytes": { type: "INT", defaultValue: "4096", brokerName: "log.index.interval.bytes", check: integerIn("INT", 0n) },
  "leader.replication.throttled.replicas": { type: "LIST", defaultValue: "", brokerName: null, check: throttledReplicas },
  "local.retention.bytes": { type: "LONG", defaultValue: "-2", brokerName: "log.local.retention.bytes", check: integerIn("LONG", -2n) },
  "local.retention.ms": { type: "LONG", defaultValue: "-2", brokerName: "log.local.retention.ms", check: integerIn("LONG", -2n) },
  "max.compaction.lag.ms": { type: "LONG", defaultValue: LONG_MAX_TEXT, brokerName: "log.cleaner.max.compaction.lag.ms", check: integerIn("LONG", 1n) },
  "max.message.bytes": { type: "INT", defaultValue: "1048588", brokerName: "message.max.bytes", check: integerIn("INT", 0n) },
  "message.timestamp.after.max.ms": {
    type: "LONG",
    defaultValue: "3600000",
    brokerName: "log.message.timestamp.after.max.ms",
    check: integerIn("LONG", 0n),
  },
  "message.timestamp.before.max.ms": {
    type: "LONG",
    defaultValue: LONG_MAX_TEXT,
    brokerName: "log.message.timestamp.before.max.ms",
    check: integerIn("LONG", 0n),
  },
  "message.timestamp.type": { type: "STRING", defaultValue: "CreateTime", brokerName: "log.message.timestamp.type", check: stringIn(TIMESTAMP_TYPES) },
  "min.cleanable.dirty.ratio": { type: "DOUBLE", defaultValue: "0.5", brokerName: "log.cleaner.min.cleanable.ratio", check: doubleIn(0, 1) },
  "min.compaction.lag.ms": { type: "LONG", defaultValue: "0", brokerName: "log.cleaner.min.compaction.lag.ms", check: integerIn("LONG", 0n) },
  "min.insync.replicas": { type: "INT", defaultValue: "1", brokerName: "min.insync.replicas", check: integerIn("INT", 1n) },
  preallocate: { type: "BOOLEAN", defaultValue: "false", brokerName: "log.preallocate", check: booleanValue },
  "remote.log.copy.disable": { type: "BOOLEAN", defaultValue: "false", brokerName: null, check: booleanValue },
  "remote.log.delete.on.disable": { type: "BOOLEAN", defaultValue: "false", brokerName: null, check: booleanValue },
  "remote.storage.enable": {
    type: "BOOLEAN",
    defaultValue: "false",
    brokerName: null,
    check: booleanValue,
    refuse: (value: string) => (parseJavaBoolean(value) ? TIERED_STORAGE_DISABLED : null),
  },
  // Apache defines retention.bytes without a lower bound: any negative value means no size limit.
  "retention.bytes": { type: "LONG", defaultValue: "-1", brokerName: "log.retention.bytes", check: integerIn("LONG") },
  "retention.ms": { type: "LONG", defaultValue: "604800000", brokerName: "log.retention.ms", check: integerIn("LONG", -1n), brokerDefaultUnset: true },
  // Apache 4.1 asks for at least 1 MiB; bunka keeps the older minimum of 14 bytes (one record's
  // overhead), which its tests and small deployments rely on to roll segments often.
  "segment.bytes": { type: "INT", defaultValue: "1073741824", brokerName: "log.segment.bytes", check: integerIn("INT", 14n) },
  "segment.index.bytes": { type: "INT", defaultValue: "10485760", brokerName: "log.index.size.max.bytes", check: integerIn("INT", 4n) },
  "segment.jitter.ms": { type: "LONG", defaultValue: "0", brokerName: "log.roll.jitter.ms", check: integerIn("LONG", 0n), brokerDefaultUnset: true },
  "segment.ms": { type: "LONG", defaultValue: "604800000", brokerName: "log.roll.ms", check: integerIn("LONG", 1n), brokerDefaultUnset: true },
  "unclean.leader.election.enable": { type: "BOOLEAN", defaultValue: "false", brokerName: "unclean.leader.election.enable", check: booleanValue },
} satisfies Record<string, ConfigSpec>;

export type TopicConfigName = keyof typeof SPECS;

const spec = (name: TopicConfigName): ConfigSpec => SPECS[name];

/** Every topic config, sorted (DescribeConfigs lists them in this order). */
export const TOPIC_CONFIG_NAMES: readonly TopicConfigName[] = (Object.keys(SPECS) as TopicConfigName[]).sort();

/** Apache Kafka's built-in defaults of every topic config, as DescribeConfigs reports them. */
export const TOPIC_CONFIG_DEFAULTS: Readonly<Record<TopicConfigName, string>> = Object.freeze(
  Object.fromEntries(TOPIC_CONFIG_NAMES.map((name) => [name, spec(name).defaultValue])) as Record<TopicConfigName, string>,
);

export function isTopicConfigName(name: string): name is TopicConfigName {
  return Object.hasOwn(SPECS, name);
}

export function topicConfigType(name: TopicConfigName): TopicConfigType {
  return spec(name).type;
}

/** A valid value as DescribeConfigs shows it: parsed, then printed as Apache prints it. */
export function canonicalTopicConfigValue(name: TopicConfigName, value: string): string {
  return canonicalValue(spec(name).type, value);
}

export type TopicConfigProblem =
  /** A name Apache Kafka 4.1 does not know. */
  | { kind: "unknown"; name: string; reason: string }
  /** A value Apache accepts but bunka refuses because it cannot honour it. */
  | { kind: "unsupported"; name: string; reason: string }
  /** A value that does not parse or is out of range, or configs that contradict each other. */
  | { kind: "invalid"; name: string; reason: string };

/** Why `value` is not acceptable for `name` on its own, or null. Every problem maps to INVALID_CONFIG. */
export function topicConfigProblem(name: string, value: string): TopicConfigProblem | null {
  if (!isTopicConfigName(name)) return { kind: "unknown", name, reason: `Unknown topic config name: ${name}` };
  return valueProblem(spec(name), name, value);
}

function valueProblem(configSpec: ConfigSpec, name: string, value: string): TopicConfigProblem | null {
  const invalid = configSpec.check(value, name);
  if (invalid !== null) return { kind: "invalid", name, reason: invalid };
  const refused = configSpec.refuse?.(value) ?? null;
  return refused === null ? null : { kind: "unsupported", name, reason: refused };
}

/**
 * Every problem with a set of topic configs, as Apache orders its checks: unknown names first, then each
 * value (in name order), then the rules between values: min.compaction.lag.ms may not exceed the
 * max.compaction.lag.ms in effect, `brokerDefaults` (keyed by topic config name, as
 * BrokerConfig.topicConfigDefaults is) supplying the one the topic does not set. A topic that sets
 * neither is not refused for broker defaults that contradict each other: Apache 4.1.1 accepts such
 * defaults (IncrementalAlterConfigs does not check them), and they are no fault of the topic's.
 */
export function topicConfigProblems(
  configs: Readonly<Record<string, string>>,
  brokerDefaults: Readonly<Record<string, string>> = {},
): TopicConfigProblem[] {
  const names = Object.keys(configs).sort();
  const problems: TopicConfigProblem[] = [];
  for (const name of names) if (!isTopicConfigName(name)) problems.push(topicConfigProblem(name, configs[name]!)!);
  for (const name of names) {
    if (!isTopicConfigName(name)) continue;
    const problem = topicConfigProblem(name, configs[name]!);
    if (problem !== null) problems.push(problem);
  }
  if (problems.length > 0) return problems;
  if (configs["min.compaction.lag.ms"] === undefined && configs["max.compaction.lag.ms"] === undefined) return problems;
  const effective = (name: TopicConfigName): string => configs[name] ?? brokerDefaults[name] ?? spec(name).defaultValue;
  const minLag = parseJavaInteger(effective("min.compaction.lag.ms"), "LONG");
  const maxLag = parseJavaInteger(effective("max.compaction.lag.ms"), "LONG");
  if (minLag !== undefined && maxLag !== undefined && minLag > maxLag) {
    problems.push({
      kind: "invalid",
      name: "min.compaction.lag.ms",
      reason: `conflict topic config setting min.compaction.lag.ms (${minLag}) > max.compaction.lag.ms (${maxLag})`,
    });
  }
  return problems;
}

/**
 * The effective configs of a topic, in the units bunka uses. Only the configs bunka honours are here;
 * the ones accepted without effect are validated and described, never read.
 */
export interface TopicConfig {
  /** retention.ms; -1 keeps segments forever. Only applies when cleanupPolicy.delete. */
  retentionMs: number;
  /** retention.bytes; any negative value (normalized to -1) means no size limit. Only with cleanupPolicy.delete. */
  retentionBytes: number;
  segmentBytes: number;
  segmentMs: number;
  /** cleanup.policy: each true when named; both false for the empty list (nothing is ever removed). */
  cleanupPolicy: { compact: boolean; delete: boolean };
  /** min.cleanable.dirty.ratio, 0..1 (NaN if a client set "NaN", which Apache accepts too). */
  minCleanableDirtyRatio: number;
  minCompactionLagMs: number;
  /** max.compaction.lag.ms; Long.MAX_VALUE (about 9.22e18 here) means no bound. */
  maxCompactionLagMs: number;
  deleteRetentionMs: number;
  /** compression.type: "producer" keeps the producer's codec, any other names the codec to store in. */
  compressionType: CompressionTypeName;
  /** compression.gzip.level (-1 = zlib's default), .lz4.level, .zstd.level: used when bunka compresses. */
  compressionGzipLevel: number;
  compressionLz4Level: number;
  compressionZstdLevel: number;
  maxMessageBytes: number;
  messageTimestampType: "CreateTime" | "LogAppendTime";
  /**
   * message.timestamp.before.max.ms / after.max.ms: a CreateTime record older than now - before or newer
   * than now + after is refused (Apache's LogValidator); Produce checks with recordTimestampProblem.
   */
  messageTimestampBeforeMaxMs: number;
  messageTimestampAfterMaxMs: number;
}

/**
 * Overlays a topic's own configs on the built-in defaults. The configs must already be valid (they were
 * checked before they were stored); an invalid one is a broken invariant and throws.
 */
export function resolveTopicConfig(configs: Readonly<Record<string, string>>): TopicConfig {
  for (const name of Object.keys(configs)) {
    const problem = topicConfigProblem(name, configs[name]!);
    if (problem !== null) throw new Error(`stored topic configs are invalid: ${problem.reason}`);
  }
  const value = (name: TopicConfigName): string => configs[name] ?? spec(name).defaultValue;
  const number = (name: TopicConfigName): number => numericValue(spec(name).type as "LONG" | "INT" | "DOUBLE", value(name));
  const policies = parseJavaList(value("cleanup.policy"));
  return {
    retentionMs: number("retention.ms"),
    retentionBytes: Math.max(-1, number("retention.bytes")),
    segmentBytes: number("segment.bytes"),
    segmentMs: number("segment.ms"),
    cleanupPolicy: { compact: policies.includes("compact"), delete: policies.includes("delete") },
    minCleanableDirtyRatio: number("min.cleanable.dirty.ratio"),
    minCompactionLagMs: number("min.compaction.lag.ms"),
    maxCompactionLagMs: number("max.compaction.lag.ms"),
    deleteRetentionMs: number("delete.retention.ms"),
    compressionType: value("compression.type").trim() as CompressionTypeName,
    compressionGzipLevel: number("compression.gzip.level"),
    compressionLz4Level: number("compression.lz4.level"),
    compressionZstdLevel: number("compression.zstd.level"),
    maxMessageBytes: number("max.message.bytes"),
    messageTimestampType: value("message.timestamp.type").trim() === "LogAppendTime" ? "LogAppendTime" : "CreateTime",
    messageTimestampBeforeMaxMs: number("message.timestamp.before.max.ms"),
    messageTimestampAfterMaxMs: number("message.timestamp.after.max.ms"),
  };
}

/**
 * Apache's refusal of one CreateTime record's timestamp (LogValidator.validateTimestamp), or null: the
 * record error message of a Produce answered INVALID_TIMESTAMP ("One or more records have been rejected
 * due to invalid timestamp"). Records without a timestamp (-1) and LogAppendTime topics are never refused.
 */
export function recordTimestampProblem(config: TopicConfig, timestampMs: number, offset: number, nowMs: number): string | null {
  if (config.messageTimestampType !== "CreateTime" || timestampMs === -1) return null;
  const difference = nowMs - timestampMs;
  if (difference <= config.messageTimestampBeforeMaxMs && -difference <= config.messageTimestampAfterMaxMs) return null;
  // Printed as Java computes them, in 64-bit arithmetic that wraps (now + Long.MAX_VALUE is negative).
  const low = BigInt.asIntN(64, BigInt(nowMs) - longOf(config.messageTimestampBeforeMaxMs));
  const high = BigInt.asIntN(64, BigInt(nowMs) + longOf(config.messageTimestampAfterMaxMs));
  return `Timestamp ${timestampMs} of message with offset ${offset} is out of range. The timestamp should be within [${low}, ${high}]`;
}

/** A LONG config's number back as the Java long it came from (Long.MAX_VALUE is 2^63 as a double). */
function longOf(value: number): bigint {
  return value >= 2 ** 63 ? INT64_MAX : BigInt(value);
}

export interface DescribedTopicConfig {
  name: TopicConfigName;
  value: string;
  type: TopicConfigType;
  /** True when the topic does not set it (DescribeConfigs source DEFAULT_CONFIG, else TOPIC_CONFIG). */
  isDefault: boolean;
}

/** Every config with the topic's own value as given, else the built-in default, in name order. */
export function describeTopicConfigs(configs: Readonly<Record<string, string>>): DescribedTopicConfig[] {
  return TOPIC_CONFIG_NAMES.map((name) => {
    const own = configs[name];
    return { name, value: own ?? spec(name).defaultValue, type: spec(name).type, isDefault: own === undefined };
  });
}

/**
 * The broker-level config that supplies each topic config's default, by topic config name (Apache's
 * ServerTopicConfigSynonyms: `log.retention.ms` is the broker-wide default of `retention.ms`, and so on).
 * Configs without one (remote.*, the replication throttles) are absent. These broker configs may be set
 * in the config file and changed at runtime, for the cluster default or one broker, as in Apache.
 */
export const BROKER_CONFIG_FOR_TOPIC_CONFIG: Readonly<Partial<Record<TopicConfigName, string>>> = Object.freeze(
  Object.fromEntries(TOPIC_CONFIG_NAMES.flatMap((name) => (spec(name).brokerName === null ? [] : [[name, spec(name).brokerName]]))),
);

const TOPIC_CONFIG_FOR_BROKER_CONFIG: ReadonlyMap<string, TopicConfigName> = new Map(
  Object.entries(BROKER_CONFIG_FOR_TOPIC_CONFIG).map(([topicName, brokerName]) => [brokerName!, topicName as TopicConfigName]),
);

/** Whether DescribeConfigs lists a DEFAULT_CONFIG synonym for the topic config's broker-level default. */
export function brokerSynonymHasDefault(name: TopicConfigName): boolean {
  const configSpec = spec(name);
  return configSpec.brokerName !== null && configSpec.brokerDefaultUnset !== true;
}

/** The broker configs that set topic defaults, sorted. */
export const BROKER_TOPIC_DEFAULT_NAMES: readonly string[] = [...TOPIC_CONFIG_FOR_BROKER_CONFIG.keys()].sort();

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
  return valueProblem(spec(topicName), brokerName, value);
}

/**
 * The effective configs of a topic when broker-level defaults apply: the topic's own value, else the
 * broker's default (keyed by topic config name, as BrokerConfig.topicConfigDefaults is), else Apache's
 * built-in default. Both inputs must already be valid (each was checked before it was stored); an
 * invalid one is a broken invariant and throws. Names in `brokerDefaults` that are not topic configs are
 * ignored.
 */
export function resolveTopicConfigWithDefaults(
  topicConfigs: Readonly<Record<string, string>>,
  brokerDefaults: Readonly<Record<string, string>>,
): Readonly<TopicConfig> {
  // Produce resolves a topic's configs for every batch; parsing 33 values each time costs about 20 µs.
  // Stored topic configs are frozen objects replaced on every change, so the result is kept per
  // object, and reused while the broker defaults are the same object with the same values.
  const cacheable = Object.isFrozen(topicConfigs);
  if (cacheable) {
    const cached = resolvedCache.get(topicConfigs);
    if (cached !== undefined && cached.defaults === brokerDefaults && sameEntries(brokerDefaults, cached.defaultsCopy)) return cached.resolved;
  }
  const merged: Record<string, string> = {};
  for (const name of TOPIC_CONFIG_NAMES) {
    const value = brokerDefaults[name];
    if (value === undefined) continue;
    const problem = topicConfigProblem(name, value);
    if (problem !== null) throw new Error(`broker-level topic config defaults are invalid: ${problem.reason}`);
    merged[name] = value;
  }
  const resolved = resolveTopicConfig({ ...merged, ...topicConfigs });
  Object.freeze(resolved.cleanupPolicy);
  Object.freeze(resolved);
  if (cacheable) resolvedCache.set(topicConfigs, { defaults: brokerDefaults, defaultsCopy: { ...brokerDefaults }, resolved });
  return resolved;
}

/** resolveTopicConfigWithDefaults' results, by the frozen topic configs they were made from. */
const resolvedCache = new WeakMap<object, { defaults: object; defaultsCopy: Record<string, string>; resolved: Readonly<TopicConfig> }>();

function sameEntries(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}
