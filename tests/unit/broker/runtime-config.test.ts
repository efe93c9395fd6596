import { describe, expect, test } from "bun:test";
import { RuntimeConfig } from "../../../src/broker/runtime-config.ts";
import { DEFAULT_CLEANER_CONFIG } from "../../../src/domain/cleaner-config.ts";
import { BrokerConfigStore } from "../../../src/storage/broker-config-store.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const STATIC = { staticTopicDefaults: { "segment.ms": "3600000" }, staticCleaner: { ...DEFAULT_CLEANER_CONFIG, backoffMs: 1000 } };

async function open(fs: MemoryFs, brokerId = 1): Promise<{ store: BrokerConfigStore; runtime: RuntimeConfig; changes: () => number }> {
  const store = await BrokerConfigStore.open(fs, DATA, { brokerId, ...STATIC });
  const runtime = new RuntimeConfig(store);
  let changes = 0;
  runtime.onChange(() => changes++);
  return { store, runtime, changes: () => changes };
}

describe("RuntimeConfig", () => {
  test("without dynamic configs the values in effect are the static ones, frozen", async () => {
    const { runtime } = await open(new MemoryFs());
    expect(runtime.topicDefaults()).toEqual({ "segment.ms": "3600000" });
    expect(runtime.cleaner()).toEqual({ ...DEFAULT_CLEANER_CONFIG, backoffMs: 1000 });
    expect(Object.isFrozen(runtime.topicDefaults())).toBe(true);
    expect(Object.isFrozen(runtime.cleaner())).toBe(true);
    // The same objects until something changes: a reader on the Produce path allocates nothing.
    expect(runtime.topicDefaults()).toBe(runtime.topicDefaults());
  });

  test("set: durable in the store, in effect at once (own layer over the cluster default over static), listeners told once per change", async () => {
    const fs = new MemoryFs();
    const { store, runtime, changes } = await open(fs);
    await runtime.set({ kind: "cluster" }, { "log.retention.ms": "5000", "log.roll.ms": "7200000", "log.cleaner.backoff.ms": "250" });
    await runtime.set({ kind: "broker", brokerId: 1 }, { "log.roll.ms": "1800000" });
    expect(runtime.topicDefaults()).toEqual({ "segment.ms": "1800000", "retention.ms": "5000" });
    expect(runtime.cleaner().backoffMs).toBe(250);
    expect(changes()).toBe(2);
    expect(store.get({ kind: "cluster" })).toEqual({ "log.retention.ms": "5000", "log.roll.ms": "7200000", "log.cleaner.backoff.ms": "250" });
    // Setting what is already in effect changes nothing and tells nobody.
    await runtime.set({ kind: "broker", brokerId: 1 }, { "log.roll.ms": "1800000" });
    expect(changes()).toBe(2);
    // Another process reading the same file sees the same values (the durable format is the store's).
    expect((await open(fs)).runtime.topicDefaults()).toEqual(runtime.topicDefaults());
  });

  test("refresh takes up another broker's change, and says whether there was one", async () => {
    const fs = new MemoryFs();
    const a = await open(fs, 1);
    const b = await open(fs, 2);
    expect(await b.runtime.refresh()).toBe(false);
    await a.runtime.set({ kind: "cluster" }, { "log.retention.ms": "7000" });
    expect(b.runtime.topicDefaults()["retention.ms"]).toBeUndefined();
    expect(await b.runtime.refresh()).toBe(true);
    expect(b.runtime.topicDefaults()["retention.ms"]).toBe("7000");
    expect(b.changes()).toBe(1);
  });

  test("a stopped listener hears nothing", async () => {
    const { runtime, changes } = await open(new MemoryFs());
    let heard = 0;
    const stop = runtime.onChange(() => heard++);
    await runtime.set({ kind: "cluster" }, { "log.retention.ms": "5000" });
    stop();
    await runtime.set({ kind: "cluster" }, {});
    expect([heard, changes()]).toEqual([1, 2]);
  });
});
