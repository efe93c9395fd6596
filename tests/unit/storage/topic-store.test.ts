import { describe, expect, test } from "bun:test";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeFs } from "../../../src/platform/node-fs.ts";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import { ensureDir, writeFileAtomic } from "../../../src/storage/atomic-file.ts";
import { loadState, saveState } from "../../../src/storage/state-file.ts";
import {
  PARTITION_METADATA_FILE,
  PARTITION_METADATA_FORMAT,
  parsePartitionMetadata,
  randomTopicId,
  TopicStore,
  type TopicChange,
  type TopicRecord,
} from "../../../src/storage/topic-store.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

interface Harness {
  fs: MemoryFs;
  clock: ManualClock;
  logs: string[];
  open(): Promise<TopicStore>;
}

function harness(fs = new MemoryFs()): Harness {
  const clock = new ManualClock(1_700_000_000_000);
  const logs: string[] = [];
  let next = 1;
  const newTopicId = () => `00000000-0000-4000-8000-${String(next++).padStart(12, "0")}`;
  return {
    fs,
    clock,
    logs,
    open: () => TopicStore.open(fs, DATA, clock, { newTopicId, log: (line) => logs.push(line) }),
  };
}

function ok(change: TopicChange): TopicRecord {
  if (!change.ok) throw new Error(`expected success, got ${change.error}: ${change.message}`);
  return change.topic;
}

async function stampOf(fs: MemoryFs, topic: string, partition: number) {
  return loadState(fs, `${DATA}/${topic}-${partition}/${PARTITION_METADATA_FILE}`, PARTITION_METADATA_FORMAT, {
    current: 1,
    parse: parsePartitionMetadata,
  });
}

/** What a log segment write would leave: a durable file in the partition directory. */
async function writeSegment(fs: MemoryFs, topic: string, partition: number, content: string): Promise<void> {
  await writeFileAtomic(fs, `${DATA}/${topic}-${partition}/00000000000000000000.log`, bytes(content));
}

async function dirsOf(fs: MemoryFs, topic: string): Promise<string[]> {
  return (await fs.readdir(DATA)).filter((entry) => entry.startsWith(`${topic}-`));
}

describe("TopicStore basics", () => {
  test("creates a topic with stamped partition directories, and finds it by name and id", async () => {
    const h = harness();
    const store = await h.open();
    const topic = ok(await store.create({ name: "orders", partitions: 3, configs: { "retention.ms": "1000" } }));
    expect(topic).toEqual({
      name: "orders",
      topicId: "00000000-0000-4000-8000-000000000001",
      partitions: 3,
      configs: { "retention.ms": "1000" },
      incarnation: 1,
      createdMs: 1_700_000_000_000,
    });
    expect(store.get("orders")).toBe(topic);
    expect(store.getById(topic.topicId)).toBe(topic);
    expect(await dirsOf(h.fs, "orders")).toEqual(["orders-0", "orders-1", "orders-2"]);
    for (const p of [0, 1, 2]) {
      expect(await stampOf(h.fs, "orders", p)).toEqual({ topic: "orders", partition: p, topicId: topic.topicId });
    }
    expect(Object.isFrozen(topic)).toBe(true);
  });

  test("lists topics in name order", async () => {
    const store = await harness().open();
    for (const name of ["b", "c", "a"]) ok(await store.create({ name, partitions: 1 }));
    expect(store.list().map((t) => t.name)).toEqual(["a", "b", "c"]);
  });

  test("re-opening (a restart) preserves topics, even after a crash", async () => {
    const h = harness();
    const store = await h.open();
    const orders = ok(await store.create({ name: "orders", partitions: 2, configs: { "segment.ms": "60000" } }));
    const more = ok(await store.addPartitions("orders", 4));
    const configured = ok(await store.setConfigs("orders", { "retention.bytes": "100" }));
    ok(await store.create({ name: "audit.log", partitions: 1 }));
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.list().map((t) => t.name)).toEqual(["audit.log", "orders"]);
    expect(reopened.get("orders")).toEqual(configured);
    expect(reopened.getById(orders.topicId)?.partitions).toBe(4);
    expect(more.incarnation).toBe(2);
    expect(configured.incarnation).toBe(3);
    expect(h.logs).toEqual([]);
  });

  test("stores the topic file at __cluster/topics/<topic>.json", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    expect(await h.fs.readdir(`${DATA}/__cluster/topics`)).toEqual(["t.json"]);
    expect(text(await h.fs.readFile(`${DATA}/__cluster/topics/t.json`))).toStartWith('{"format":"topic","version":1,');
  });

  test("every create makes its files durable with fsync", async () => {
    const h = harness();
    const store = await h.open();
    h.fs.log.length = 0;
    ok(await store.create({ name: "t", partitions: 2 }));
    // One fsync per stamp and one for the topic file; the directories holding them are fsynced too.
    expect(h.fs.count("fsync")).toBe(3);
    expect(h.fs.log).toContain(`fsyncDir ${DATA}`);
    expect(h.fs.log).toContain(`fsyncDir ${DATA}/__cluster/topics`);
  });

  test("randomTopicId gives v4 UUIDs that Apache would hand out", () => {
    for (let i = 0; i < 200; i++) {
      const id = randomTopicId();
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(Number.parseInt(id.slice(0, 2), 16) >> 2).not.toBe(62);
    }
  });
});

describe("TopicStore refusals are data, not exceptions", () => {
  test("invalid names", async () => {
    const store = await harness().open();
    for (const name of ["", ".", "..", "a/b", "x".repeat(250)]) {
      const change = await store.create({ name, partitions: 1 });
      expect(change.ok ? undefined : change.error).toBe("INVALID_TOPIC_EXCEPTION");
    }
  });

  test("an existing topic, and a '.'/'_' collision", async () => {
    const store = await harness().open();
    ok(await store.create({ name: "a.b", partitions: 1 }));
    expect(await store.create({ name: "a.b", partitions: 1 })).toEqual({
      ok: false,
      error: "TOPIC_ALREADY_EXISTS",
      message: "Topic 'a.b' already exists.",
    });
    const collision = await store.create({ name: "a_b", partitions: 1 });
    expect(collision.ok ? undefined : collision.error).toBe("INVALID_TOPIC_EXCEPTION");
  });

  test("bad partition counts", async () => {
    const store = await harness().open();
    for (const partitions of [0, -1, 1.5, Number.NaN, 10_001]) {
      const change = await store.create({ name: "t", partitions });
      expect(change.ok ? undefined : change.error).toBe("INVALID_PARTITIONS");
    }
    ok(await store.create({ name: "t", partitions: 3 }));
    expect(await store.addPartitions("t", 3)).toEqual({ ok: false, error: "INVALID_PARTITIONS", message: "Topic already has 3 partitions." });
    expect(await store.addPartitions("t", 2)).toEqual({
      ok: false,
      error: "INVALID_PARTITIONS",
      message: "Topic currently has 3 partitions, which is higher than the requested 2.",
    });
  });

  test("invalid configs, on create and on setConfigs", async () => {
    const store = await harness().open();
    const change = await store.create({ name: "t", partitions: 1, configs: { "cleanup.policy": "shred" } });
    expect(change.ok ? undefined : change.error).toBe("INVALID_CONFIG");
    expect(store.get("t")).toBeUndefined();
    ok(await store.create({ name: "t", partitions: 1 }));
    const unknown = await store.setConfigs("t", { "no.such": "1" });
    expect(unknown).toEqual({ ok: false, error: "INVALID_CONFIG", message: "Unknown topic config name: no.such" });
  });

  test("unknown topics", async () => {
    const store = await harness().open();
    for (const change of [await store.delete("x"), await store.addPartitions("x", 2), await store.setConfigs("x", {})]) {
      expect(change.ok ? undefined : change.error).toBe("UNKNOWN_TOPIC_OR_PARTITION");
    }
  });

  test("concurrent creates of one name: exactly one wins", async () => {
    const store = await harness().open();
    const results = await Promise.all([1, 2, 3].map(() => store.create({ name: "t", partitions: 2 })));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => !r.ok && r.error === "TOPIC_ALREADY_EXISTS")).toHaveLength(2);
  });
});

describe("TopicStore delete and re-create", () => {
  test("regression: a re-created topic never adopts the deleted topic's data", async () => {
    const h = harness();
    const store = await h.open();
    const old = ok(await store.create({ name: "orders", partitions: 2 }));
    await writeSegment(h.fs, "orders", 0, "old data");
    ok(await store.delete("orders"));
    expect(store.get("orders")).toBeUndefined();
    expect(store.getById(old.topicId)).toBeUndefined();
    expect(await dirsOf(h.fs, "orders")).toEqual([]);

    const fresh = ok(await store.create({ name: "orders", partitions: 2 }));
    expect(fresh.topicId).not.toBe(old.topicId);
    expect(await h.fs.readdir(`${DATA}/orders-0`)).toEqual([PARTITION_METADATA_FILE]);
    expect((await stampOf(h.fs, "orders", 0))?.topicId).toBe(fresh.topicId);
  });

  test("deleting survives a restart: the topic does not come back", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    ok(await store.delete("t"));
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.get("t")).toBeUndefined();
    expect(await dirsOf(h.fs, "t")).toEqual([]);
  });

  test("a crash at any step of delete leaves the topic whole or gone, never half", async () => {
    for (let k = 0; ; k++) {
      const h = harness();
      const store = await h.open();
      const topic = ok(await store.create({ name: "orders", partitions: 2 }));
      await writeSegment(h.fs, "orders", 1, "precious");
      h.fs.haltAfterOps(k);
      const completed = await store.delete("orders").then(
        () => true,
        () => false,
      );
      h.fs.crash();
      const reopened = await h.open();
      const survivor = reopened.get("orders");
      if (survivor === undefined) {
        expect(await dirsOf(h.fs, "orders")).toEqual([]);
        expect(await h.fs.readdir(`${DATA}/__cluster/topics`)).toEqual([]);
      } else {
        expect(completed).toBe(false);
        expect(survivor).toEqual(topic);
        expect(text(await h.fs.readFile(`${DATA}/orders-1/00000000000000000000.log`))).toBe("precious");
        expect(await dirsOf(h.fs, "orders")).toEqual(["orders-0", "orders-1"]);
      }
      // Whatever survived, re-creating the name starts from empty partitions.
      if (survivor !== undefined) ok(await reopened.delete("orders"));
      const fresh = ok(await reopened.create({ name: "orders", partitions: 2 }));
      expect(await h.fs.readdir(`${DATA}/orders-1`)).toEqual([PARTITION_METADATA_FILE]);
      expect((await stampOf(h.fs, "orders", 1))?.topicId).toBe(fresh.topicId);
      if (completed) break;
      if (k > 100) throw new Error("delete never completed");
    }
  });

  test("a delete interrupted after its commit point is finished at open, with a log line", async () => {
    const h = harness();
    const store = await h.open();
    const topic = ok(await store.create({ name: "t", partitions: 2 }));
    // The first step of delete, done by hand: rename one partition directory and make it durable.
    await h.fs.rename(`${DATA}/t-0`, `${DATA}/t-0.${topic.topicId}-delete`);
    await h.fs.fsyncDir(DATA);
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.get("t")).toBeUndefined();
    expect(await dirsOf(h.fs, "t")).toEqual([]);
    expect(h.logs.some((line) => line.includes("finishing the deletion of topic t"))).toBe(true);
  });

  test("a crash at any step of create leaves the topic whole or absent, with no stray directories", async () => {
    for (let k = 0; ; k++) {
      const h = harness();
      const store = await h.open();
      h.fs.haltAfterOps(k);
      const completed = await store.create({ name: "orders", partitions: 3 }).then(
        () => true,
        () => false,
      );
      h.fs.crash();
      const reopened = await h.open();
      const topic = reopened.get("orders");
      if (topic === undefined) {
        expect(await dirsOf(h.fs, "orders")).toEqual([]);
      } else {
        expect(await dirsOf(h.fs, "orders")).toEqual(["orders-0", "orders-1", "orders-2"]);
        for (const p of [0, 1, 2]) expect((await stampOf(h.fs, "orders", p))?.topicId).toBe(topic.topicId);
      }
      if (completed) {
        expect(topic).toBeDefined();
        break;
      }
      if (k > 100) throw new Error("create never completed");
    }
  });

  test("a crash at any step of addPartitions leaves the old or the new count, never stray directories", async () => {
    for (let k = 0; ; k++) {
      const h = harness();
      const store = await h.open();
      ok(await store.create({ name: "t", partitions: 1 }));
      h.fs.haltAfterOps(k);
      const completed = await store.addPartitions("t", 3).then(
        () => true,
        () => false,
      );
      h.fs.crash();
      const reopened = await h.open();
      const partitions = reopened.get("t")!.partitions;
      expect([1, 3]).toContain(partitions);
      expect(await dirsOf(h.fs, "t")).toEqual(Array.from({ length: partitions }, (_, p) => `t-${p}`));
      if (completed) break;
      if (k > 100) throw new Error("addPartitions never completed");
    }
  });
});

describe("TopicStore open-time recovery", () => {
  test("removes a partition directory stamped with another topic id, with a log line", async () => {
    const h = harness();
    const store = await h.open();
    const topic = ok(await store.create({ name: "t", partitions: 1 }));
    await saveState(h.fs, `${DATA}/t-0/${PARTITION_METADATA_FILE}`, PARTITION_METADATA_FORMAT, 1, {
      topic: "t",
      partition: 0,
      topicId: "11111111-1111-4111-8111-111111111111",
    });
    await writeSegment(h.fs, "t", 0, "someone else's");
    const reopened = await h.open();
    expect(h.logs.some((line) => line.includes(`${DATA}/t-0`) && line.includes("is not the live topic's"))).toBe(true);
    // Removed, then recreated empty for the live topic.
    expect(await h.fs.readdir(`${DATA}/t-0`)).toEqual([PARTITION_METADATA_FILE]);
    expect((await stampOf(h.fs, "t", 0))?.topicId).toBe(topic.topicId);
    expect(reopened.get("t")).toEqual(topic);
  });

  test("removes stamped directories of topics that do not exist, and empty unstamped ones", async () => {
    const h = harness();
    await ensureDir(h.fs, `${DATA}/ghost-0`);
    await saveState(h.fs, `${DATA}/ghost-0/${PARTITION_METADATA_FILE}`, PARTITION_METADATA_FORMAT, 1, {
      topic: "ghost",
      partition: 0,
      topicId: "22222222-2222-4222-8222-222222222222",
    });
    await ensureDir(h.fs, `${DATA}/empty-3`);
    await ensureDir(h.fs, `${DATA}/x-7.22222222-2222-4222-8222-222222222222-delete`);
    await h.open();
    expect(await h.fs.readdir(DATA)).toEqual(["__cluster"]);
    expect(h.logs).toHaveLength(3);
  });

  test("leaves alone directories that are not recognisably bunka's", async () => {
    const h = harness();
    await ensureDir(h.fs, `${DATA}/backup-2024`);
    await writeFileAtomic(h.fs, `${DATA}/backup-2024/notes.txt`, bytes("mine"));
    await ensureDir(h.fs, `${DATA}/lost+found`);
    await h.open();
    expect(await h.fs.readdir(DATA)).toEqual(["__cluster", "backup-2024", "lost+found"]);
  });

  test("recreates a missing partition directory of a live topic, loudly", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 2 }));
    await h.fs.rmrf(`${DATA}/t-1`);
    await h.fs.fsyncDir(DATA);
    await h.open();
    expect(await dirsOf(h.fs, "t")).toEqual(["t-0", "t-1"]);
    expect(h.logs.some((line) => line.includes("missing"))).toBe(true);
  });

  test("removes leftover tmp files", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    await (await h.fs.open(`${DATA}/__cluster/topics/t.json.0123456789abcdef.tmp`, "w")).close();
    await (await h.fs.open(`${DATA}/t-0/partition.metadata.0123456789abcdef.tmp`, "w")).close();
    await h.open();
    expect(await h.fs.readdir(`${DATA}/__cluster/topics`)).toEqual(["t.json"]);
    expect(await h.fs.readdir(`${DATA}/t-0`)).toEqual([PARTITION_METADATA_FILE]);
  });

  test("cluster mode: the clean-up leaves a live partition's tmp files to its leader (another broker's write in flight), and removes the topics' own", async () => {
    const h = harness();
    ok(await (await h.open()).create({ name: "t", partitions: 1 }));
    await (await h.fs.open(`${DATA}/__cluster/topics/t.json.0123456789abcdef.tmp`, "w")).close();
    const inFlight = `${DATA}/t-0/producer-state.e3.snapshot.0123456789abcdef.tmp`;
    await (await h.fs.open(inFlight, "w")).close();
    const shared = await TopicStore.open(h.fs, DATA, h.clock, { cleanUpOrphans: false, log: (line) => h.logs.push(line) });
    await shared.cleanUpOrphans();
    expect(await h.fs.readdir(`${DATA}/__cluster/topics`)).toEqual(["t.json"]);
    expect(await h.fs.stat(inFlight)).toBeDefined();
  });

  test("regression: a corrupt topic file stops open with an error naming the file", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "orders", partitions: 1 }));
    const path = `${DATA}/__cluster/topics/orders.json`;
    const damaged = text(await h.fs.readFile(path)).replace('"partitions":1', '"partitions":2');
    const handle = await h.fs.open(path, "w");
    await handle.write(bytes(damaged));
    await handle.fsync();
    const error = await h.open().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as CorruptStateError).path).toBe(path);
    expect((error as CorruptStateError).message).toContain("checksum mismatch");
    // Nothing was dropped or repaired: the partition directory is still there.
    expect(await dirsOf(h.fs, "orders")).toEqual(["orders-0"]);
  });

  test("a topic file holding another topic's record is corrupt", async () => {
    const h = harness();
    const store = await h.open();
    const topic = ok(await store.create({ name: "a", partitions: 1 }));
    await saveState(h.fs, `${DATA}/__cluster/topics/b.json`, "topic", 1, { ...topic, topicId: "33333333-3333-4333-8333-333333333333" });
    const error = await h.open().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as CorruptStateError).path).toBe(`${DATA}/__cluster/topics/b.json`);
  });

  test("two topic files with one topic id are corrupt", async () => {
    const h = harness();
    const store = await h.open();
    const topic = ok(await store.create({ name: "a", partitions: 1 }));
    await saveState(h.fs, `${DATA}/__cluster/topics/b.json`, "topic", 1, { ...topic, name: "b" });
    await expect(h.open()).rejects.toThrow("is also used by topic");
  });

  test("a topic file with a body of the wrong shape is corrupt", async () => {
    const h = harness();
    await ensureDir(h.fs, `${DATA}/__cluster/topics`);
    await saveState(h.fs, `${DATA}/__cluster/topics/t.json`, "topic", 1, { name: "t", partitions: "many" });
    await expect(h.open()).rejects.toBeInstanceOf(CorruptStateError);
  });

  test("a corrupt stamp on a live partition stops open", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    const path = `${DATA}/t-0/${PARTITION_METADATA_FILE}`;
    const handle = await h.fs.open(path, "w");
    await handle.write(bytes("garbage"));
    await handle.fsync();
    const error = await h.open().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as CorruptStateError).path).toBe(path);
  });

  test("a live partition without a stamp but with data stops open", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    await writeSegment(h.fs, "t", 0, "data");
    await h.fs.unlink(`${DATA}/t-0/${PARTITION_METADATA_FILE}`);
    await expect(h.open()).rejects.toThrow("missing in a partition directory of a live topic");
  });
});

describe("TopicStore I/O failures", () => {
  test("an injected fsync failure propagates as FatalError and poisons the store", async () => {
    const h = harness();
    const store = await h.open();
    h.fs.failNextFsync(`${DATA}/__cluster/topics/`);
    await expect(store.create({ name: "t", partitions: 1 })).rejects.toBeInstanceOf(FatalError);
    expect(store.get("t")).toBeUndefined();
    await expect(store.create({ name: "u", partitions: 1 })).rejects.toThrow("failed earlier");
    h.fs.crash();
    const reopened = await h.open();
    expect(reopened.get("t")).toBeUndefined();
    expect(await dirsOf(h.fs, "t")).toEqual([]);
  });

  test("an fsync failure of a partition stamp propagates too", async () => {
    const h = harness();
    const store = await h.open();
    h.fs.failNextFsync(`${DATA}/t-1/`);
    await expect(store.create({ name: "t", partitions: 2 })).rejects.toBeInstanceOf(FatalError);
  });

  test("a failed fsync during delete propagates", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "t", partitions: 1 }));
    h.fs.failNextFsync(DATA, { target: "dir" });
    await expect(store.delete("t")).rejects.toBeInstanceOf(FatalError);
  });

  test("a failed write (full disk) propagates and open recovers afterwards", async () => {
    const h = harness();
    const store = await h.open();
    ok(await store.create({ name: "a", partitions: 1 }));
    h.fs.enospcAfterBytes(0);
    const error = await store.create({ name: "b", partitions: 1 }).catch((e: unknown) => e);
    expect((error as { code: string }).code).toBe("ENOSPC");
    h.fs.clearFaults();
    const reopened = await h.open();
    expect(reopened.list().map((t) => t.name)).toEqual(["a"]);
    expect(await dirsOf(h.fs, "b")).toEqual([]);
  });
});

describe("TopicStore on the real file system", () => {
  test("create, write, delete, re-create and re-open", async () => {
    const data = await mkdtemp(join(tmpdir(), "bunka-topics-"));
    try {
      const clock = new ManualClock();
      const logs: string[] = [];
      const store = await TopicStore.open(nodeFs, data, clock, { log: (line) => logs.push(line) });
      const old = ok(await store.create({ name: "orders", partitions: 2 }));
      await writeFileAtomic(nodeFs, join(data, "orders-0", "00000000000000000000.log"), bytes("old"));
      ok(await store.delete("orders"));
      const fresh = ok(await store.create({ name: "orders", partitions: 2 }));
      expect(fresh.topicId).not.toBe(old.topicId);
      expect(await readdir(join(data, "orders-0"))).toEqual([PARTITION_METADATA_FILE]);
      const reopened = await TopicStore.open(nodeFs, data, clock, { log: (line) => logs.push(line) });
      expect(reopened.get("orders")).toEqual(fresh);
      expect((await readdir(data)).sort()).toEqual(["__cluster", "orders-0", "orders-1"]);
      expect(logs).toEqual([]);
    } finally {
      await rm(data, { recursive: true, force: true });
    }
  });
});

describe("TopicStore.refresh: another broker sharing the data directory changed a topic", () => {
  test("a topic created, grown, reconfigured, deleted and re-created by one store is seen by the other", async () => {
    const fs = new MemoryFs();
    const writer = await harness(fs).open();
    const reader = await harness(fs).open();
    expect(await reader.refresh("orders")).toBe("unchanged");
    const created = await writer.create({ name: "orders", partitions: 2 });
    expect(created.ok).toBe(true);
    expect(reader.get("orders")).toBeUndefined();
    expect(await reader.refresh("orders")).toBe("created");
    expect(reader.get("orders")).toEqual(writer.get("orders")!);
    expect(reader.getById(writer.get("orders")!.topicId)?.name).toBe("orders");
    expect(await reader.refresh("orders")).toBe("unchanged");

    await writer.addPartitions("orders", 5);
    await writer.setConfigs("orders", { "cleanup.policy": "compact" });
    expect(await reader.refresh("orders")).toBe("changed");
    expect(reader.get("orders")).toEqual(writer.get("orders")!);
    expect(reader.get("orders")!.partitions).toBe(5);

    const firstId = writer.get("orders")!.topicId;
    await writer.delete("orders");
    expect(await reader.refresh("orders")).toBe("deleted");
    expect(reader.get("orders")).toBeUndefined();
    expect(reader.getById(firstId)).toBeUndefined();

    // Deleted and re-created between two refreshes: a new topic id, seen as a creation.
    await writer.create({ name: "orders", partitions: 1 });
    await writer.delete("orders");
    await writer.create({ name: "orders", partitions: 3 });
    await reader.refresh("orders");
    expect(await reader.refresh("orders")).toBe("unchanged");
    await writer.delete("orders");
    await writer.create({ name: "orders", partitions: 4 });
    expect(await reader.refresh("orders")).toBe("created");
    expect(reader.get("orders")).toEqual(writer.get("orders")!);
    expect(reader.list().map((t) => t.name)).toEqual(["orders"]);
  });

  test("a damaged topic file is a CorruptStateError naming it; the topic is kept and the store still works", async () => {
    const fs = new MemoryFs();
    const writer = await harness(fs).open();
    await writer.create({ name: "orders", partitions: 2 });
    const reader = await harness(fs).open();
    const before = reader.get("orders");
    await writeFileAtomic(fs, writer.topicFile("orders"), bytes("{ not a state file"));
    const error = await reader.refresh("orders").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toContain(writer.topicFile("orders"));
    expect(reader.get("orders")).toEqual(before!);
    // Not poisoned: its own changes still work.
    expect((await reader.create({ name: "payments", partitions: 1 })).ok).toBe(true);
  });

  test("a name that is not a legal topic name reads nothing", async () => {
    const store = await harness().open();
    expect(await store.refresh("../cluster")).toBe("unchanged");
  });
});
