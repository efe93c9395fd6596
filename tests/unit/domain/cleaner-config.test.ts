/**
 * The log cleaner's broker settings: Apache's defaults and bounds, which may change at runtime, and the
 * refusals Apache 4.1.1 gives to dynamic changes (each message below is what it answered).
 */
import { describe, expect, test } from "bun:test";
import {
  applyCleanerSettings,
  CLEANER_SETTING_NAMES,
  cleanerReconfigurationProblem,
  cleanerSettingProblem,
  cleanerSettingValue,
  DEFAULT_CLEANER_CONFIG,
  dedupeBufferProblem,
  isDynamicCleanerSetting,
} from "../../../src/domain/cleaner-config.ts";

describe("cleaner settings", () => {
  test("Apache's defaults, printed as its DescribeConfigs prints them", () => {
    expect(Object.fromEntries(CLEANER_SETTING_NAMES.map((name) => [name, cleanerSettingValue(DEFAULT_CLEANER_CONFIG, name)]))).toEqual({
      "log.cleaner.backoff.ms": "15000",
      "log.cleaner.dedupe.buffer.size": "134217728",
      "log.cleaner.enable": "true",
      "log.cleaner.io.buffer.load.factor": "0.9",
      "log.cleaner.io.buffer.size": "524288",
      "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
      "log.cleaner.threads": "1",
    });
  });

  test("all but log.cleaner.enable change at runtime (Apache's LogCleaner.ReconfigurableConfigs)", () => {
    const fixed: string[] = CLEANER_SETTING_NAMES.filter((name: string) => {
      const dynamic: boolean = isDynamicCleanerSetting(name);
      return !dynamic;
    });
    expect(fixed).toEqual(["log.cleaner.enable"]);
    expect(isDynamicCleanerSetting("log.cleaner.min.cleanable.ratio")).toBe(false);
  });

  test("values are checked with Apache's types and bounds", () => {
    expect(cleanerSettingProblem("log.cleaner.threads", "-1")).toBe("Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0");
    expect(cleanerSettingProblem("log.cleaner.io.buffer.load.factor", "abc")).toBe(
      "Invalid value abc for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE",
    );
    expect(cleanerSettingProblem("log.cleaner.io.buffer.size", "-1")).toBe("Invalid value -1 for configuration log.cleaner.io.buffer.size: Value must be at least 0");
    expect(cleanerSettingProblem("log.cleaner.backoff.ms", "-1")).toBe("Invalid value -1 for configuration log.cleaner.backoff.ms: Value must be at least 0");
    // Apache has no bound on these.
    expect(cleanerSettingProblem("log.cleaner.io.buffer.load.factor", "5")).toBeNull();
    expect(cleanerSettingProblem("log.cleaner.io.max.bytes.per.second", "-5")).toBeNull();
    expect(cleanerSettingProblem("log.cleaner.dedupe.buffer.size", "-5")).toBeNull();
  });

  test("applying a layer of settings ignores other names", () => {
    const next = applyCleanerSettings(DEFAULT_CLEANER_CONFIG, { "log.cleaner.threads": "3", "log.cleaner.enable": "FALSE", "log.retention.ms": "5" });
    expect(next).toEqual({ ...DEFAULT_CLEANER_CONFIG, threads: 3, enabled: false });
  });
});

describe("dynamic changes Apache refuses", () => {
  const current = { ...DEFAULT_CLEANER_CONFIG, threads: 2 };
  const wrapped = (why: string) => `Invalid value org.apache.kafka.common.config.ConfigException: ${why} for configuration Invalid dynamic configuration`;

  test("threads: at least 1, at most double and at least half the current count", () => {
    expect(cleanerReconfigurationProblem(current, { ...current, threads: 4 })).toBeNull();
    expect(cleanerReconfigurationProblem(current, { ...current, threads: 1 })).toBeNull();
    expect(cleanerReconfigurationProblem(current, { ...current, threads: 5 })).toBe(wrapped("Log cleaner threads cannot be increased to more than double the current value 2"));
    expect(cleanerReconfigurationProblem({ ...current, threads: 6 }, { ...current, threads: 2 })).toBe(
      wrapped("Log cleaner threads cannot be reduced to less than half the current value 6"),
    );
    expect(cleanerReconfigurationProblem(current, { ...current, threads: 0 })).toBe(wrapped("Log cleaner threads should be at least 1"));
  });

  test("more than 1 MiB of dedupe buffer per thread", () => {
    const message = "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.";
    expect(cleanerReconfigurationProblem(current, { ...current, dedupeBufferSizeBytes: 1000 })).toBe(message);
    expect(dedupeBufferProblem({ ...current, dedupeBufferSizeBytes: 2 * 1024 * 1024 })).toBe(message);
    expect(dedupeBufferProblem({ ...current, dedupeBufferSizeBytes: 2 * 1024 * 1024 + 2 })).toBeNull();
  });
});
