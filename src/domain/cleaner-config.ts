/**
 * The log cleaner's broker settings (Apache's CleanerConfig: log.cleaner.enable, .threads, ...), their
 * defaults, types and validation, and which of them IncrementalAlterConfigs / AlterConfigs may change at
 * runtime: the ones in Apache's LogCleaner.ReconfigurableConfigs, every one but log.cleaner.enable. Pure.
 *
 * The broker-level defaults of the compaction topic configs (log.cleaner.min.cleanable.ratio,
 * log.cleaner.delete.retention.ms, log.cleaner.min/max.compaction.lag.ms) are topic defaults, not
 * cleaner settings: they live with the topic configs (topic-config.ts, BROKER_CONFIG_FOR_TOPIC_CONFIG).
 */
import {
  booleanValue,
  type ConfigType,
  canonicalValue,
  doubleIn,
  integerIn,
  numericValue,
  parseJavaBoolean,
  type ValueCheck,
} from "./config-values.ts";

/** The log cleaner's settings in effect (BrokerConfig.cleaner). */
export interface CleanerConfig {
  /** log.cleaner.enable: whether the cleaner runs at all. Static: a restart changes it, as in Apache. */
  enabled: boolean;
  /** log.cleaner.threads: how many partitions are cleaned at once; at least 1. */
  threads: number;
  /**
   * log.cleaner.io.max.bytes.per.second: the read and write rate all cleaner threads together keep under.
   * Double.MAX_VALUE (the default) is unthrottled; Apache accepts any double, and a value of 0 or less,
   * or NaN, never makes its throttler wait either.
   */
  ioMaxBytesPerSecond: number;
  /** log.cleaner.dedupe.buffer.size: the memory for the offset maps of all threads; more than 1 MiB per thread. */
  dedupeBufferSizeBytes: number;
  /** log.cleaner.io.buffer.size: the memory for the read and write buffers of all threads. */
  ioBufferSizeBytes: number;
  /** log.cleaner.io.buffer.load.factor: how full an offset map may get (Apache's dedupe buffer load factor). */
  ioBufferLoadFactor: number;
  /** log.cleaner.backoff.ms: how long the cleaner waits when no log needs cleaning. */
  backoffMs: number;
}

export type CleanerSettingName =
  | "log.cleaner.enable"
  | "log.cleaner.threads"
  | "log.cleaner.io.max.bytes.per.second"
  | "log.cleaner.dedupe.buffer.size"
  | "log.cleaner.io.buffer.size"
  | "log.cleaner.io.buffer.load.factor"
  | "log.cleaner.backoff.ms";

interface SettingSpec {
  field: keyof CleanerConfig;
  type: ConfigType;
  defaultValue: string;
  check: ValueCheck;
  /** Whether IncrementalAlterConfigs / AlterConfigs may change it at runtime. */
  dynamic: boolean;
}

const SETTINGS: Readonly<Record<CleanerSettingName, SettingSpec>> = {
  "log.cleaner.enable": { field: "enabled", type: "BOOLEAN", defaultValue: "true", check: booleanValue, dynamic: false },
  "log.cleaner.threads": { field: "threads", type: "INT", defaultValue: "1", check: integerIn("INT", 0n), dynamic: true },
  "log.cleaner.io.max.bytes.per.second": {
    field: "ioMaxBytesPerSecond",
    type: "DOUBLE",
    defaultValue: "1.7976931348623157E308",
    check: doubleIn(),
    dynamic: true,
  },
  "log.cleaner.dedupe.buffer.size": { field: "dedupeBufferSizeBytes", type: "LONG", defaultValue: "134217728", check: integerIn("LONG"), dynamic: true },
  "log.cleaner.io.buffer.size": { field: "ioBufferSizeBytes", type: "INT", defaultValue: "524288", check: integerIn("INT", 0n), dynamic: true },
  "log.cleaner.io.buffer.load.factor": { field: "ioBufferLoadFactor", type: "DOUBLE", defaultValue: "0.9", check: doubleIn(), dynamic: true },
  "log.cleaner.backoff.ms": { field: "backoffMs", type: "LONG", defaultValue: "15000", check: integerIn("LONG", 0n), dynamic: true },
};

/** Every cleaner setting, sorted. */
export const CLEANER_SETTING_NAMES: readonly CleanerSettingName[] = (Object.keys(SETTINGS) as CleanerSettingName[]).sort();

export function isCleanerSetting(name: string): name is CleanerSettingName {
  return Object.hasOwn(SETTINGS, name);
}

/** Whether a cleaner setting may change at runtime (all but log.cleaner.enable). */
export function isDynamicCleanerSetting(name: string): name is CleanerSettingName {
  return isCleanerSetting(name) && SETTINGS[name].dynamic;
}

export function cleanerSettingType(name: CleanerSettingName): ConfigType {
  return SETTINGS[name].type;
}

export function cleanerSettingDefault(name: CleanerSettingName): string {
  return SETTINGS[name].defaultValue;
}

/** Apache's defaults (CleanerConfig's constants). */
export const DEFAULT_CLEANER_CONFIG: Readonly<CleanerConfig> = Object.freeze(
  applyCleanerSettings(
    { enabled: true, threads: 0, ioMaxBytesPerSecond: 0, dedupeBufferSizeBytes: 0, ioBufferSizeBytes: 0, ioBufferLoadFactor: 0, backoffMs: 0 },
    Object.fromEntries(CLEANER_SETTING_NAMES.map((name) => [name, SETTINGS[name].defaultValue])),
  ),
);

/** Why `value` is not acceptable for the cleaner setting `name` on its own (Apache's wording), or null. */
export function cleanerSettingProblem(name: CleanerSettingName, value: string): string | null {
  return SETTINGS[name].check(value, name);
}

/** The value a setting has in `config`, printed as Apache's DescribeConfigs prints it. */
export function cleanerSettingValue(config: CleanerConfig, name: CleanerSettingName): string {
  const { field, type } = SETTINGS[name];
  return canonicalValue(type, String(config[field]));
}

/**
 * `base` with the given settings (broker config name -> valid value) applied; names that are not cleaner
 * settings are ignored, so a layer of dynamic broker configs can be passed as it is.
 */
export function applyCleanerSettings(base: Readonly<CleanerConfig>, settings: Readonly<Record<string, string>>): CleanerConfig {
  const next: CleanerConfig = { ...base };
  for (const [name, value] of Object.entries(settings)) {
    if (!isCleanerSetting(name)) continue;
    const { field, type } = SETTINGS[name];
    if (field === "enabled") next.enabled = parseJavaBoolean(value) ?? base.enabled;
    else next[field] = numericValue(type as "LONG" | "INT" | "DOUBLE", value);
  }
  return next;
}

/**
 * Why the cleaner cannot go from `current` to `next`, as Apache's broker answers a dynamic change
 * (KafkaConfig's requirement on the dedupe buffer, then LogCleaner.validateReconfiguration), or null.
 * Apache's own answer to 0 threads is "/ by zero", from dividing by the thread count in its dedupe
 * buffer check; bunka gives the message that check was meant to reach.
 */
export function cleanerReconfigurationProblem(current: Readonly<CleanerConfig>, next: Readonly<CleanerConfig>): string | null {
  const wrapped = (why: string) =>
    `Invalid value org.apache.kafka.common.config.ConfigException: ${why} for configuration Invalid dynamic configuration`;
  if (next.threads < 1) return wrapped("Log cleaner threads should be at least 1");
  const dedupe = dedupeBufferProblem(next);
  if (dedupe !== null) return dedupe;
  if (next.threads < Math.trunc(current.threads / 2)) {
    return wrapped(`Log cleaner threads cannot be reduced to less than half the current value ${current.threads}`);
  }
  if (next.threads > current.threads * 2) {
    return wrapped(`Log cleaner threads cannot be increased to more than double the current value ${current.threads}`);
  }
  return null;
}

/**
 * Apache's start-up requirement (KafkaConfig): every cleaner thread gets more than 1 MiB of the dedupe
 * buffer. Integer division, as in Scala: 2 MiB for 2 threads is refused.
 */
export function dedupeBufferProblem(config: Readonly<CleanerConfig>): string | null {
  if (config.threads >= 1 && Math.trunc(config.dedupeBufferSizeBytes / config.threads) > 1024 * 1024) return null;
  return "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.";
}
