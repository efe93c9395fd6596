/**
 * The dynamic broker configs' store: both kinds of settable config (topic defaults and the cleaner's
 * dynamic settings), the layering static < cluster default < this broker, and what a change would
 * make effective before it is stored.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_CLEANER_CONFIG } from "../../../src/domain/cleaner-config.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { BrokerConfigStore, parseBrokerConfigsBody } from "../../../src/storage/broker-config-store.ts";
import { saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const options = {
  brokerId: 1,
  staticTopicDefaults: { "segment.ms": "3600000" },
  staticCleaner: { ...DEFAULT_CLEANER_CONFIG, threads: 2 },
};

describe("BrokerConfigStore", () => {
  test("topic defaults and cleaner settings, layered, durable across a reopen", async () => {
    const fs = new MemoryFs();
    const store = await BrokerConfigStore.open(fs, DATA, options);
    expect(store.topicDefaults()).toEqual({ "segment.ms": "3600000" });
    expect(store.cleaner()).toEqual({ ...DEFAULT_CLEANER_CONFIG, threads: 2 });

    await store.set({ kind: "cluster" }, { "log.cleanup.policy": "compact", "log.cleaner.threads": "3", "log.cleaner.backoff.ms": "100" });
    await store.set({ kind: "broker", brokerId: 1 }, { "log.cleaner.threads": "4", "log.roll.ms": "60000" });
    // Another broker's layer does not apply here.
    await store.set({ kind: "broker", brokerId: 2 }, { "log.cleaner.threads": "1" });

    const check = (s: BrokerConfigStore) => {
      expect(s.topicDefaults()).toEqual({ "segment.ms": "60000", "cleanup.policy": "compact" });
      expect(s.cleaner()).toEqual({ ...DEFAULT_CLEANER_CONFIG, threads: 4, backoffMs: 100 });
    };
    check(store);
    check(await BrokerConfigStore.open(fs, DATA, options));
  });

  test("effectiveWith shows what a change would make effective, without storing it", async () => {
    const store = await BrokerConfigStore.open(new MemoryFs(), DATA, options);
    await store.set({ kind: "broker", brokerId: 1 }, { "log.cleaner.threads": "4" });
    const cluster = store.effectiveWith({ kind: "cluster" }, { "log.cleaner.threads": "3", "log.cleaner.min.cleanable.ratio": "0.1" });
    // This broker's own layer still wins over the cluster default.
    expect(cluster.cleaner.threads).toBe(4);
    expect(cluster.topicDefaults["min.cleanable.dirty.ratio"]).toBe("0.1");
    const own = store.effectiveWith({ kind: "broker", brokerId: 1 }, {});
    expect(own.cleaner.threads).toBe(2);
    expect(store.cleaner().threads).toBe(4);
  });

  test("refuses to store what is not a settable config or not a valid value", async () => {
    const store = await BrokerConfigStore.open(new MemoryFs(), DATA, options);
    await expect(store.set({ kind: "cluster" }, { "log.cleaner.enable": "false" })).rejects.toThrow("Unknown broker-level topic default: log.cleaner.enable");
    await expect(store.set({ kind: "cluster" }, { "log.cleaner.threads": "-1" })).rejects.toThrow("Value must be at least 0");
    expect(() => parseBrokerConfigsBody({ clusterDefault: { "log.cleaner.backoff.ms": "x" }, brokers: {} })).toThrow("Not a number of type LONG");
  });

  test("a stored file with a setting that is not settable is corrupt, not ignored", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/__cluster`);
    await saveState(fs, `${DATA}/__cluster/broker-configs.json`, "broker-configs", 1, { clusterDefault: { "num.partitions": "3" }, brokers: {} });
    await expect(BrokerConfigStore.open(fs, DATA, options)).rejects.toBeInstanceOf(CorruptStateError);
  });
});
