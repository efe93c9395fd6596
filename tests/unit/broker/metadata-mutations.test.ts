/**
 * The metadata gate with two brokers' stores on one data directory and an in-memory lock standing in for
 * etcd's: a change decides on the files as they are (refresh, then act), what it changed is announced
 * before the gate is let go, a gate that cannot be taken changes nothing. Also the stores' parts of it:
 * change reports, refreshAll, orphan clean-up deferred in cluster mode, broker configs read again.
 */
import { describe, expect, test } from "bun:test";
import { LockUnavailableError, type LockHold } from "../../../src/cluster/etcd-lock.ts";
import { reloadBrokerConfigs } from "../../../src/broker/config-changes.ts";
import { RuntimeConfig } from "../../../src/broker/runtime-config.ts";
import {
  GatedMutations,
  immediateMutations,
  MetadataGateUnavailableError,
  mutationsOf,
  underGate,
  type GateLock,
} from "../../../src/broker/metadata-mutations.ts";
import { DEFAULT_CLEANER_CONFIG } from "../../../src/domain/cleaner-config.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { writeFileAtomic } from "../../../src/storage/atomic-file.ts";
import { BrokerConfigStore } from "../../../src/storage/broker-config-store.ts";
import { saveState } from "../../../src/storage/state-file.ts";
import { PARTITION_METADATA_FILE, PARTITION_METADATA_FORMAT, PARTITION_METADATA_VERSION, TopicStore, type TopicStoreChange } from "../../../src/storage/topic-store.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const configOptions = (brokerId: number) => ({ brokerId, staticTopicDefaults: {}, staticCleaner: DEFAULT_CLEANER_CONFIG });

/** One lock for the whole "cluster": holds are granted one at a time, in order, with growing tokens. */
class MemoryLock {
  readonly events: string[] = [];
  private tail: Promise<unknown> = Promise.resolve();
  private token = 100n;
  holder: string | undefined;
  /** Set to make the next take fail as etcd's would when the lease is not valid. */
  unavailable = false;

  for(name: string, valid: () => boolean = () => true): GateLock {
    return {
      acquire: async (what) => {
        if (this.unavailable) throw new LockUnavailableError(`${name}: the lease is not valid`);
        let release!: () => void;
        const freed = new Promise<void>((resolve) => (release = resolve));
        const turn = this.tail;
        this.tail = turn.then(() => freed);
        await turn;
        if (this.holder !== undefined) throw new Error(`${name} got the lock while ${this.holder} held it`);
        this.holder = name;
        const token = ++this.token;
        this.events.push(`${name} acquired ${what}`);
        const hold: LockHold = {
          token,
          leaseId: 1n,
          valid,
          release: async () => {
            this.events.push(`${name} released`);
            this.holder = undefined;
            release();
          },
        };
        return hold;
      },
    };
  }
}

interface Member {
  topics: TopicStore;
  brokerConfigs: BrokerConfigStore;
  gate: GatedMutations;
  announced: string[];
}

async function member(fs: MemoryFs, lock: MemoryLock, name: string, brokerId: number, options: { valid?: () => boolean; failAnnounce?: boolean } = {}): Promise<Member> {
  const clock = new ManualClock(1_700_000_000_000);
  let next = 1;
  const topics = await TopicStore.open(fs, DATA, clock, {
    log: () => {},
    cleanUpOrphans: false,
    newTopicId: () => `00000000-0000-4000-8${brokerId}00-${String(next++).padStart(12, "0")}`,
  });
  const brokerConfigs = await BrokerConfigStore.open(fs, DATA, configOptions(brokerId));
  const announced: string[] = [];
  const announce = async (what: string) => {
    if (options.failAnnounce) throw new Error("etcd is unreachable");
    announced.push(what);
    lock.events.push(`${name} announced ${what}`);
  };
  const gate = new GatedMutations({
    lock: lock.for(name, options.valid),
    topics,
    brokerConfigs,
    reloadBrokerConfigs: () => brokerConfigs.refresh(),
    announcer: { announce: (topic) => announce(topic), announceBrokerConfigs: () => announce("broker-configs") },
    log: silentLogger,
  });
  return { topics, brokerConfigs, gate, announced };
}

/** CreateTopics' decision: refuse a name this broker knows, else create. */
const createIfAbsent = (m: Member, name: string, partitions: number) => async () => {
  if (m.topics.get(name) !== undefined) return "TOPIC_ALREADY_EXISTS";
  const created = await m.topics.create({ name, partitions });
  return created.ok ? `created ${created.topic.topicId}` : created.error;
};

describe("the metadata gate", () => {
  test("two brokers creating the same topic at once: one creates it, the other is told it exists", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const b = await member(fs, lock, "b", 2);
    const [ra, rb] = await Promise.all([a.gate.run("create", createIfAbsent(a, "orders", 3)), b.gate.run("create", createIfAbsent(b, "orders", 5))]);
    expect([ra, rb].filter((r) => r.startsWith("created"))).toHaveLength(1);
    expect([ra, rb]).toContain("TOPIC_ALREADY_EXISTS");
    // Both see the one topic, with the winner's id and count, and its file is the winner's.
    expect(b.topics.get("orders")).toEqual(a.topics.get("orders")!);
    const reread = await TopicStore.open(fs, DATA, new ManualClock(0), { cleanUpOrphans: false });
    expect(reread.get("orders")).toEqual(a.topics.get("orders")!);
  });

  test("without the gate the second broker decides on a stale view and overwrites the first one's topic (the race the gate closes)", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const b = await member(fs, lock, "b", 2);
    expect(await immediateMutations.run("create", createIfAbsent(a, "orders", 3))).toStartWith("created");
    expect(await immediateMutations.run("create", createIfAbsent(b, "orders", 5))).toStartWith("created");
    expect(a.topics.get("orders")!.topicId).not.toBe(b.topics.get("orders")!.topicId);
  });

  test("a change is announced before the gate is let go, and the next holder reads it before acting", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const b = await member(fs, lock, "b", 2);
    await a.gate.run("create", createIfAbsent(a, "orders", 3));
    // b was told nothing (no feed here): only its refresh under the gate can let it see the topic.
    expect(b.topics.get("orders")).toBeUndefined();
    const seen = await b.gate.run("grow", async () => {
      const topic = b.topics.get("orders");
      if (topic === undefined) return "unknown";
      const grown = await b.topics.addPartitions("orders", topic.partitions + 1);
      return grown.ok ? grown.topic.partitions : grown.error;
    });
    expect(seen).toBe(4);
    expect(lock.events).toEqual(["a acquired create", "a announced orders", "a released", "b acquired grow", "b announced orders", "b released"]);
  });

  test("every kind of change made under the gate is announced once per topic, broker configs too", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    await a.gate.run("several", async () => {
      await a.topics.create({ name: "t1", partitions: 1 });
      await a.topics.addPartitions("t1", 2);
      await a.topics.setConfigs("t1", { "retention.ms": "1000" });
      await a.topics.create({ name: "t2", partitions: 1 });
      await a.topics.delete("t2");
      await a.brokerConfigs.set({ kind: "cluster" }, { "log.retention.ms": "5000" });
    });
    expect(a.announced).toEqual(["t1", "t2", "broker-configs"]);
    // A refused change changes nothing and announces nothing.
    await a.gate.run("refused", async () => void (await a.topics.create({ name: "t1", partitions: 1 })));
    expect(a.announced).toEqual(["t1", "t2", "broker-configs"]);
  });

  test("a change that fails half-way still announces what it changed and lets the gate go", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const failed = a.gate.run("create then fail", async () => {
      await a.topics.create({ name: "orders", partitions: 1 });
      throw new Error("boom");
    });
    await expect(failed).rejects.toThrow("boom");
    expect(a.announced).toEqual(["orders"]);
    expect(lock.holder).toBeUndefined();
    expect(await a.gate.run("next", async () => "ran")).toBe("ran");
  });

  test("a change made outside the gate is still announced, at once", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    await a.topics.create({ name: "stray", partitions: 1 });
    await a.brokerConfigs.set({ kind: "cluster" }, { "log.retention.ms": "5000" });
    expect(a.announced).toEqual(["stray", "broker-configs"]);
    expect(lock.events).toEqual(["a announced stray", "a announced broker-configs"]);
    a.gate.close();
    await a.topics.create({ name: "after-close", partitions: 1 });
    expect(a.announced).toEqual(["stray", "broker-configs"]);
  });

  test("an announcement that fails does not fail the change: the next holder's refresh reads the files", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1, { failAnnounce: true });
    const b = await member(fs, lock, "b", 2);
    expect(await a.gate.run("create", createIfAbsent(a, "orders", 2))).toStartWith("created");
    expect(lock.holder).toBeUndefined();
    expect(await b.gate.run("create", createIfAbsent(b, "orders", 2))).toBe("TOPIC_ALREADY_EXISTS");
  });

  test("a gate that cannot be taken runs nothing and says so as MetadataGateUnavailableError", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    lock.unavailable = true;
    let ran = false;
    await expect(a.gate.run("create", async () => void (ran = true))).rejects.toBeInstanceOf(MetadataGateUnavailableError);
    expect(ran).toBe(false);
    // The handlers' wrapper turns it into the request's retriable answer.
    const services = { mutations: a.gate, log: silentLogger };
    expect(await underGate(services, "create", async () => "done", (reason) => `unavailable: ${reason}`)).toBe("unavailable: a: the lease is not valid");
    lock.unavailable = false;
    expect(await underGate(services, "create", async () => "done", () => "unavailable")).toBe("done");
    // Other errors are not swallowed.
    await expect(underGate(services, "create", async () => Promise.reject(new Error("disk")), () => "unavailable")).rejects.toThrow("disk");
  });

  test("a lease that lapsed while the gate was being taken: nothing runs, the gate is let go", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    let valid = false;
    const a = await member(fs, lock, "a", 1, { valid: () => valid });
    let ran = false;
    await expect(a.gate.run("create", async () => void (ran = true))).rejects.toThrow("lapsed before the change began");
    expect(ran).toBe(false);
    expect(lock.events).toEqual(["a acquired create", "a released"]);
    valid = true;
    expect(await a.gate.run("again", async () => "ran")).toBe("ran");
  });

  test("runs of one broker take turns, and the token of the running hold is known only during it", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const order: string[] = [];
    let release!: () => void;
    const blocker = new Promise<void>((resolve) => (release = resolve));
    const first = a.gate.run("first", async () => {
      order.push(`first ${a.gate.currentToken}`);
      await blocker;
      order.push("first done");
    });
    const second = a.gate.run("second", async () => void order.push(`second ${a.gate.currentToken}`));
    await Promise.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(["first 101"]);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(["first 101", "first done", "second 102"]);
    expect(a.gate.currentToken).toBeUndefined();
  });

  test("broker configs changed by another broker are read before a change, so it merges with them", async () => {
    const fs = new MemoryFs();
    const lock = new MemoryLock();
    const a = await member(fs, lock, "a", 1);
    const b = await member(fs, lock, "b", 2);
    await a.gate.run("alter", () => a.brokerConfigs.set({ kind: "cluster" }, { "log.retention.ms": "5000" }));
    expect(b.brokerConfigs.get({ kind: "cluster" })).toEqual({});
    await b.gate.run("alter", async () => {
      const merged = { ...b.brokerConfigs.get({ kind: "cluster" }), "log.segment.bytes": "1048576" };
      await b.brokerConfigs.set({ kind: "cluster" }, merged);
    });
    expect((await BrokerConfigStore.open(fs, DATA, configOptions(3))).get({ kind: "cluster" })).toEqual({ "log.retention.ms": "5000", "log.segment.bytes": "1048576" });
  });

  test("mutationsOf: single-broker mode without a gate installed runs at once", async () => {
    expect(mutationsOf({})).toBe(immediateMutations);
    const fs = new MemoryFs();
    const a = await member(fs, new MemoryLock(), "a", 1);
    expect(mutationsOf({ mutations: a.gate })).toBe(a.gate);
  });
});

describe("TopicStore in cluster mode", () => {
  test("onChange and onTopicsChanged report this store's changes and those read from the files", async () => {
    const fs = new MemoryFs();
    const clock = new ManualClock(0);
    let next = 1;
    const newTopicId = () => `00000000-0000-4000-8000-${String(next++).padStart(12, "0")}`;
    const a = await TopicStore.open(fs, DATA, clock, { newTopicId, cleanUpOrphans: false });
    const b = await TopicStore.open(fs, DATA, clock, { newTopicId, cleanUpOrphans: false });
    const brief = (c: TopicStoreChange) => `${c.by} ${c.kind} ${c.topic} ${c.record.partitions}`;
    const seenA: string[] = [];
    const seenB: string[] = [];
    const movesB: string[] = [];
    a.onChange((c) => seenA.push(brief(c)));
    b.onChange((c) => seenB.push(brief(c)));
    const stop = b.onTopicsChanged((c) => movesB.push(brief(c)));

    await a.create({ name: "t", partitions: 1 });
    await b.refreshAll();
    await a.addPartitions("t", 3);
    await a.setConfigs("t", { "retention.ms": "1000" });
    await b.refreshAll();
    await b.refreshAll(); // nothing new: nothing reported
    // Deleted and created again between two reads: both reported, in that order.
    await a.delete("t");
    await a.create({ name: "t", partitions: 2 });
    await b.refresh("t");
    await a.delete("t");
    await b.refreshAll();
    expect(seenA).toEqual([
      "this-broker created t 1",
      "this-broker grown t 3",
      "this-broker reconfigured t 3",
      "this-broker deleted t 3",
      "this-broker created t 2",
      "this-broker deleted t 2",
    ]);
    // Two changes read at once (grown, then reconfigured) are one change of the record: its partitions grew.
    expect(seenB).toEqual(["refresh created t 1", "refresh grown t 3", "refresh deleted t 3", "refresh created t 2", "refresh deleted t 2"]);
    expect(movesB).toEqual(seenB);
    await a.create({ name: "u", partitions: 1 });
    await a.setConfigs("u", { "retention.ms": "1" });
    await b.refresh("u");
    await a.setConfigs("u", { "retention.ms": "2" });
    await b.refresh("u");
    expect(seenB.slice(-2)).toEqual(["refresh created u 1", "refresh reconfigured u 1"]);
    expect(movesB.at(-1)).toBe("refresh created u 1");
    stop();
    await a.delete("u");
    await b.refresh("u");
    expect(movesB.at(-1)).toBe("refresh created u 1");
  });

  test("a listener that throws is logged and does not stop the change or the other listeners", async () => {
    const logs: string[] = [];
    const store = await TopicStore.open(new MemoryFs(), DATA, new ManualClock(0), { log: (line) => logs.push(line) });
    const heard: string[] = [];
    store.onChange(() => {
      throw new Error("listener bug");
    });
    store.onChange((c) => heard.push(c.topic));
    expect((await store.create({ name: "t", partitions: 1 })).ok).toBe(true);
    expect(heard).toEqual(["t"]);
    expect(logs.some((line) => line.includes("listener bug"))).toBe(true);
  });

  test("refreshAll finds topics it never heard of and forgets deleted ones; a damaged file names itself", async () => {
    const fs = new MemoryFs();
    const a = await TopicStore.open(fs, DATA, new ManualClock(0));
    const b = await TopicStore.open(fs, DATA, new ManualClock(0), { cleanUpOrphans: false });
    await a.create({ name: "x", partitions: 1 });
    await a.create({ name: "y", partitions: 2 });
    await b.refreshAll();
    expect(b.list().map((t) => t.name)).toEqual(["x", "y"]);
    await a.delete("x");
    await b.refreshAll();
    expect(b.list().map((t) => t.name)).toEqual(["y"]);
    await writeFileAtomic(fs, a.topicFile("y"), new TextEncoder().encode("garbage"));
    const damaged = await b.refreshAll().then(() => undefined, (error: unknown) => error);
    expect(damaged).toBeInstanceOf(CorruptStateError);
    expect((damaged as CorruptStateError).message).toContain(a.topicFile("y"));
    expect(b.get("y")?.partitions).toBe(2);
  });

  test("open with cleanUpOrphans: false leaves another broker's half-done create alone; cleanUpOrphans() repairs later", async () => {
    const fs = new MemoryFs();
    const first = await TopicStore.open(fs, DATA, new ManualClock(0));
    await first.create({ name: "live", partitions: 1 });
    // Another broker is half-way through creating "fresh": its directory is stamped, its topic file is
    // being written (a tmp file), and the topic file is not there yet.
    const stamp = { topic: "fresh", partition: 0, topicId: "00000000-0000-4000-8000-00000000abcd" };
    await fs.mkdirp(`${DATA}/fresh-0`);
    await saveState(fs, `${DATA}/fresh-0/${PARTITION_METADATA_FILE}`, PARTITION_METADATA_FORMAT, PARTITION_METADATA_VERSION, stamp);
    const tmp = `${DATA}/__cluster/topics/fresh.json.0123456789abcdef.tmp`;
    await (await fs.open(tmp, "w")).close();

    const logs: string[] = [];
    const second = await TopicStore.open(fs, DATA, new ManualClock(0), { cleanUpOrphans: false, log: (line) => logs.push(line) });
    expect(second.orphansCleanedUp).toBe(false);
    expect(await fs.stat(`${DATA}/fresh-0`)).toBeDefined();
    expect(await fs.stat(tmp)).toBeDefined();
    expect(logs).toEqual([]);
    expect(second.get("live")).toEqual(first.get("live")!);

    // Once no one is half-way (the gate is held), the repairs of a single broker's open run.
    await second.cleanUpOrphans();
    expect(second.orphansCleanedUp).toBe(true);
    expect(await fs.stat(`${DATA}/fresh-0`)).toBeUndefined();
    expect(await fs.stat(tmp)).toBeUndefined();
    expect(await fs.stat(`${DATA}/live-0`)).toBeDefined();
    expect(logs.length).toBe(2);
    // Again: nothing left to do.
    await second.cleanUpOrphans();
    expect(logs.length).toBe(2);
  });

  test("open as before (single-broker mode) repairs at once", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/fresh-0`);
    const store = await TopicStore.open(fs, DATA, new ManualClock(0), { log: () => {} });
    expect(store.orphansCleanedUp).toBe(true);
    expect(await fs.stat(`${DATA}/fresh-0`)).toBeUndefined();
  });

  test("a failed step of cleanUpOrphans poisons the store as a failed change does", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/fresh-0`);
    const store = await TopicStore.open(fs, DATA, new ManualClock(0), { log: () => {}, cleanUpOrphans: false });
    fs.failNextFsync(DATA, { target: "dir" });
    await expect(store.cleanUpOrphans()).rejects.toThrow();
    await expect(store.create({ name: "t", partitions: 1 })).rejects.toThrow("the topic store failed earlier");
    await expect(store.cleanUpOrphans()).rejects.toThrow("the topic store failed earlier");
  });
});

describe("BrokerConfigStore shared by brokers", () => {
  test("refresh reads another broker's change, says whether anything changed, and keeps the configs when the file is damaged", async () => {
    const fs = new MemoryFs();
    const a = await BrokerConfigStore.open(fs, DATA, configOptions(1));
    const b = await BrokerConfigStore.open(fs, DATA, configOptions(2));
    expect(await b.refresh()).toBe(false);
    await a.set({ kind: "cluster" }, { "log.retention.ms": "5000" });
    await a.set({ kind: "broker", brokerId: 2 }, { "log.cleaner.threads": "2" });
    expect(await b.refresh()).toBe(true);
    expect(b.get({ kind: "cluster" })).toEqual({ "log.retention.ms": "5000" });
    expect(b.topicDefaults()["retention.ms"]).toBe("5000");
    expect(b.cleaner().threads).toBe(2);
    expect(await b.refresh()).toBe(false);
    await writeFileAtomic(fs, a.path, new TextEncoder().encode("garbage"));
    await expect(b.refresh()).rejects.toBeInstanceOf(CorruptStateError);
    expect(b.get({ kind: "cluster" })).toEqual({ "log.retention.ms": "5000" });
    // A file removed by hand reads as no dynamic configs, as at open.
    await fs.unlink(a.path);
    expect(await b.refresh()).toBe(true);
    expect(b.get({ kind: "cluster" })).toEqual({});
  });

  test("onChange hears each durable change, not a refused one; reloadBrokerConfigs puts a change in effect on the running broker", async () => {
    const fs = new MemoryFs();
    const a = await BrokerConfigStore.open(fs, DATA, configOptions(1));
    let heard = 0;
    const stop = a.onChange(() => heard++);
    await a.set({ kind: "cluster" }, { "log.retention.ms": "5000" });
    await expect(a.set({ kind: "cluster" }, { "no.such.config": "1" })).rejects.toThrow();
    expect(heard).toBe(1);
    stop();
    await a.set({ kind: "cluster" }, {});
    expect(heard).toBe(1);

    const b = await BrokerConfigStore.open(fs, DATA, configOptions(2));
    const runtimeConfig = new RuntimeConfig(b);
    const services = { brokerConfigs: b, runtimeConfig, log: silentLogger };
    let changes = 0;
    runtimeConfig.onChange(() => changes++);
    expect(await reloadBrokerConfigs(services)).toBe(false);
    await a.set({ kind: "cluster" }, { "log.retention.ms": "7000", "log.cleaner.backoff.ms": "123" });
    expect(await reloadBrokerConfigs(services)).toBe(true);
    expect(runtimeConfig.topicDefaults()["retention.ms"]).toBe("7000");
    expect(runtimeConfig.cleaner().backoffMs).toBe(123);
    expect(changes).toBe(1);
  });
});
