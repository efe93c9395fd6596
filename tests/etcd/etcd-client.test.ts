/**
 * The etcd client against a real etcd (tests/support/etcd.ts starts one; without etcd installed these tests
 * fail saying so): keys, txns with every compare target, leases with exact 63-bit ids, endpoints tried in
 * turn, a write never repeated after an unanswered attempt, and the watch: events in order, resumed after
 * its connection broke and after etcd restarted without losing or repeating an event, compaction reported.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TCPSocketListener } from "bun";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { EtcdServerError, EtcdUnavailableError } from "../../src/cluster/etcd/etcd-errors.ts";
import { EtcdWatch } from "../../src/cluster/etcd/etcd-watch.ts";
import type { WatchEvent } from "../../src/cluster/etcd/gateway-codec.ts";
import { EtcdServer, findEtcd, freePort } from "../support/etcd.ts";
import { TcpProxy } from "../support/tcp-proxy.ts";
import { until, waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;
const opened: { close(): unknown }[] = [];

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  for (const thing of opened.reverse()) await thing.close();
  client?.close();
  await etcd?.close();
});

let prefixCounter = 0;
/** A key prefix of the test's own, so tests sharing the etcd never see each other's keys. */
function prefix(): string {
  return `/test/${++prefixCounter}/`;
}

/** Collects what a watch delivers. */
function recorder() {
  const events: WatchEvent[] = [];
  const compactions: bigint[] = [];
  return { events, compactions, seen: () => events.map((e) => `${e.type} ${e.kv.key} ${e.type === "put" ? e.kv.value : ""}`.trim()) };
}

/** A TCP server that accepts connections and never answers: a hung etcd. */
function blackHole(): { endpoint: string; close(): void } {
  const listener: TCPSocketListener<undefined> = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  return { endpoint: `http://127.0.0.1:${listener.port}`, close: () => listener.stop(true) };
}

describe("etcd client against a real etcd", () => {
  test("findEtcd names what is missing and how to install it", () => {
    expect(() => findEtcd(() => null, ["/nonexistent/etcd"])).toThrow(/etcd is not installed.*apt-get install -y etcd-server/);
    expect(findEtcd()).toMatch(/etcd$/);
  });

  test("put, range (one key and a prefix), delete", async () => {
    const p = prefix();
    const first = await client.put(`${p}a`, "1");
    await client.put(`${p}b`, "2");
    await client.put(`${p}c/d`, "é");
    const one = await client.range(`${p}a`);
    expect(one.kvs).toEqual([{ key: `${p}a`, value: "1", createRevision: first.header.revision, modRevision: first.header.revision, version: 1n, lease: 0n }]);
    const all = await client.range(p, { prefix: true });
    expect(all.kvs.map((kv) => [kv.key, kv.value])).toEqual([
      [`${p}a`, "1"],
      [`${p}b`, "2"],
      [`${p}c/d`, "é"],
    ]);
    expect(all.count).toBe(3n);
    const limited = await client.range(p, { prefix: true, limit: 1 });
    expect(limited.kvs.length).toBe(1);
    expect(limited.more).toBe(true);
    const old = await client.range(`${p}a`, { revision: first.header.revision - 1n });
    expect(old.kvs).toEqual([]);
    const deleted = await client.deleteRange(p, { prefix: true, prevKv: true });
    expect(deleted.deleted).toBe(3n);
    expect(deleted.prevKvs.map((kv) => kv.value).sort()).toEqual(["1", "2", "é"]);
    expect((await client.range(p, { prefix: true })).kvs).toEqual([]);
  });

  test("txn: a compare that fails is an answer, and runs the failure branch", async () => {
    const key = `${prefix()}k`;
    const created = await client.txn({
      compare: [{ key, target: "create", createRevision: 0n }],
      success: [{ op: "put", key, value: "first" }],
      failure: [{ op: "range", key }],
    });
    expect(created.succeeded).toBe(true);
    const again = await client.txn({
      compare: [{ key, target: "create", createRevision: 0n }],
      success: [{ op: "put", key, value: "second" }],
      failure: [{ op: "range", key }],
    });
    expect(again.succeeded).toBe(false);
    expect(again.responses).toEqual([
      { op: "range", kvs: [{ key, value: "first", createRevision: created.header.revision, modRevision: created.header.revision, version: 1n, lease: 0n }], more: false, count: 1n },
    ]);
    // Every compare target, holding and not.
    const compares = [
      { key, target: "mod" as const, modRevision: created.header.revision },
      { key, target: "version" as const, version: 1n },
      { key, target: "value" as const, value: "first" },
      { key, target: "lease" as const, lease: 0n },
      { key, target: "create" as const, createRevision: created.header.revision, result: "greater" as const },
    ];
    const outcomes = [];
    for (const compare of compares) outcomes.push((await client.txn({ compare: [compare], success: [] })).succeeded);
    expect(outcomes).toEqual([true, true, true, true, false]);
  });

  test("leases: ids past 2^53 stay exact; keep-alive, time-to-live, revoke; a gone lease is an answer", async () => {
    const key = `${prefix()}leased`;
    const lease = await client.leaseGrant(30);
    expect(lease.ttlSeconds).toBe(30);
    await client.put(key, "v", { lease: lease.id });
    expect((await client.range(key)).kvs[0]!.lease).toBe(lease.id);
    expect(await client.leaseKeepAlive(lease.id)).toEqual({ id: lease.id, alive: true, ttlSeconds: 30 });
    const ttl = await client.leaseTimeToLive(lease.id, { keys: true });
    expect(ttl.grantedTtlSeconds).toBe(30);
    expect(ttl.keys).toEqual([key]);
    expect(await client.leaseRevoke(lease.id)).toBe(true);
    expect((await client.range(key)).kvs).toEqual([]);
    expect(await client.leaseRevoke(lease.id)).toBe(false);
    expect(await client.leaseKeepAlive(lease.id)).toEqual({ id: lease.id, alive: false, ttlSeconds: 0 });
    expect((await client.leaseTimeToLive(lease.id)).ttlSeconds).toBe(-1);
    // A put under a gone lease is a server error that says so.
    const error = await client.put(key, "v", { lease: lease.id }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EtcdServerError);
    expect((error as EtcdServerError).leaseNotFound).toBe(true);
  });

  test("a dead first endpoint: the next one answers, and is tried first from then on", async () => {
    const dead = `http://127.0.0.1:${freePort()}`;
    const withDead = new EtcdClient({ endpoints: `${dead},${etcd.endpoint}` });
    try {
      const key = `${prefix()}k`;
      expect(withDead.activeEndpoint).toBe(dead);
      await withDead.put(key, "v");
      expect(withDead.activeEndpoint).toBe(etcd.endpoint);
      expect((await withDead.range(key)).kvs[0]!.value).toBe("v");
      const lease = await withDead.leaseGrant(10);
      expect((await withDead.leaseKeepAlive(lease.id)).alive).toBe(true);
    } finally {
      withDead.close();
    }
  });

  test("no endpoint reachable: a clear error naming each endpoint", async () => {
    const a = `http://127.0.0.1:${freePort()}`;
    const b = `http://127.0.0.1:${freePort()}`;
    const unreachable = new EtcdClient({ endpoints: [a, b] });
    const error = await unreachable.range("/k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EtcdUnavailableError);
    expect((error as EtcdUnavailableError).outcomeUnknown).toBe(false);
    expect((error as Error).message).toContain(`${a}: ECONNREFUSED`);
    expect((error as Error).message).toContain(`${b}: ECONNREFUSED`);
    unreachable.close();
  });

  test("an endpoint that takes a request and never answers: reads move on, writes are not repeated", async () => {
    const hung = blackHole();
    const withHung = new EtcdClient({ endpoints: [hung.endpoint, etcd.endpoint], requestTimeoutMs: 300 });
    try {
      const key = `${prefix()}k`;
      const error = await withHung.put(key, "v").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EtcdUnavailableError);
      expect((error as EtcdUnavailableError).outcomeUnknown).toBe(true);
      expect((error as Error).message).toContain("timed out");
      // Not sent to the second endpoint: the key is not there.
      expect((await client.range(key)).kvs).toEqual([]);
      // A read goes on to the next endpoint.
      await client.put(key, "v");
      expect((await withHung.range(key)).kvs[0]!.value).toBe("v");
    } finally {
      withHung.close();
      hung.close();
    }
  });

  test("endpoint lists are checked", () => {
    expect(() => new EtcdClient({ endpoints: "" })).toThrow("none given");
    expect(() => new EtcdClient({ endpoints: "localhost:2379" })).toThrow("only http and https");
    expect(() => new EtcdClient({ endpoints: "http://a:2379/v3" })).toThrow("scheme, host and port only");
    expect(new EtcdClient({ endpoints: " http://a:2379 , https://b:2379 " }).endpoints).toEqual(["http://a:2379", "https://b:2379"]);
  });

  test("a watch delivers puts and deletes in order, from the revision asked", async () => {
    const p = prefix();
    const before = await client.put(`${p}x`, "0");
    const seen = recorder();
    const watch = new EtcdWatch(
      client,
      { key: p, prefix: true, startRevision: before.header.revision },
      { onEvents: (events) => void seen.events.push(...events), onCompacted: async () => 0n },
    );
    opened.push(watch);
    await client.put(`${p}y`, "1");
    await client.deleteRange(`${p}x`);
    await client.put(`${p}y`, "2");
    await waitUntil(() => seen.events.length === 4, "four events");
    expect(seen.seen()).toEqual([`put ${p}x 0`, `put ${p}y 1`, `delete ${p}x`, `put ${p}y 2`]);
    await watch.close();
  });

  test("a watch from now", async () => {
    const p = prefix();
    await client.put(`${p}old`, "0");
    const seen = recorder();
    const watch = new EtcdWatch(client, { key: p, prefix: true }, { onEvents: (events) => void seen.events.push(...events), onCompacted: async () => 0n });
    opened.push(watch);
    await waitUntil(() => watch.connected, "the watch connected");
    await client.put(`${p}new`, "1");
    await waitUntil(() => seen.events.length === 1, "one event");
    expect(seen.seen()).toEqual([`put ${p}new 1`]);
    await watch.close();
  });

  test("a watch whose connection breaks resumes from its next revision: nothing lost, nothing twice", async () => {
    const p = prefix();
    const proxy = TcpProxy.start(etcd.clientPort);
    opened.push(proxy);
    const viaProxy = new EtcdClient({ endpoints: proxy.endpoint });
    opened.push(viaProxy);
    const seen = recorder();
    const states: string[] = [];
    const watch = new EtcdWatch(viaProxy, { key: p, prefix: true }, { onEvents: (events) => void seen.events.push(...events), onCompacted: async () => 0n, onState: (state) => states.push(state) });
    opened.push(watch);
    await waitUntil(() => watch.connected, "the watch connected");
    await client.put(`${p}a`, "1");
    await waitUntil(() => seen.events.length === 1, "the first event");
    proxy.cut();
    await waitUntil(() => !watch.connected, "the watch noticed");
    // Written while the watch cannot see anything.
    await client.put(`${p}b`, "2");
    await client.put(`${p}a`, "3");
    proxy.resume();
    await waitUntil(() => seen.events.length === 3, "the events written while cut off", 10_000);
    await client.put(`${p}c`, "4");
    await waitUntil(() => seen.events.length === 4, "a later event");
    expect(seen.seen()).toEqual([`put ${p}a 1`, `put ${p}b 2`, `put ${p}a 3`, `put ${p}c 4`]);
    expect(watch.streams).toBe(2);
    expect(states).toEqual(["connected", "disconnected", "connected"]);
    await watch.close();
  });

  test("a watch that hears nothing for its idle time replaces its stream, losing nothing", async () => {
    const p = prefix();
    const seen = recorder();
    const watch = new EtcdWatch(client, { key: p, prefix: true }, { onEvents: (events) => void seen.events.push(...events), onCompacted: async () => 0n }, { idleReconnectMs: 150 });
    opened.push(watch);
    await waitUntil(() => watch.streams >= 3, "two idle reconnects");
    await client.put(`${p}a`, "1");
    await waitUntil(() => seen.events.length === 1, "the event after them");
    expect(seen.seen()).toEqual([`put ${p}a 1`]);
    await watch.close();
  });

  test("a watch from a compacted revision reports the compaction and goes on from what the caller re-read", async () => {
    const p = prefix();
    const first = await client.put(`${p}a`, "1");
    await client.put(`${p}a`, "2");
    const last = await client.put(`${p}a`, "3");
    await client.compact(last.header.revision);
    const seen = recorder();
    const rereads: string[][] = [];
    const watch = new EtcdWatch(
      client,
      { key: p, prefix: true, startRevision: first.header.revision },
      {
        onEvents: (events) => void seen.events.push(...events),
        onCompacted: async (compactRevision) => {
          const reread = await client.range(p, { prefix: true });
          rereads.push(reread.kvs.map((kv) => kv.value));
          seen.compactions.push(compactRevision);
          return reread.header.revision + 1n;
        },
      },
    );
    opened.push(watch);
    await waitUntil(() => seen.compactions.length === 1, "the compaction reported");
    expect(seen.compactions).toEqual([last.header.revision]);
    expect(rereads).toEqual([["3"]]);
    await client.put(`${p}a`, "4");
    await waitUntil(() => seen.events.length === 1, "the event after the re-read");
    expect(seen.seen()).toEqual([`put ${p}a 4`]);
    await watch.close();
  });

  test("a watch cut off while its revisions are compacted away reports the compaction when it reconnects", async () => {
    const p = prefix();
    const proxy = TcpProxy.start(etcd.clientPort);
    opened.push(proxy);
    const viaProxy = new EtcdClient({ endpoints: proxy.endpoint });
    opened.push(viaProxy);
    const seen = recorder();
    const watch = new EtcdWatch(
      viaProxy,
      { key: p, prefix: true },
      {
        onEvents: (events) => void seen.events.push(...events),
        onCompacted: async (compactRevision) => {
          const reread = await viaProxy.range(p, { prefix: true });
          // Counted once the re-read is done, so that the test's next write comes after it.
          seen.compactions.push(compactRevision);
          return reread.header.revision + 1n;
        },
      },
    );
    opened.push(watch);
    await waitUntil(() => watch.connected, "the watch connected");
    proxy.cut();
    await waitUntil(() => !watch.connected, "the watch noticed");
    await client.put(`${p}a`, "1");
    const last = await client.put(`${p}a`, "2");
    await client.compact(last.header.revision);
    proxy.resume();
    await waitUntil(() => seen.compactions.length === 1, "the compaction reported", 10_000);
    expect(seen.compactions).toEqual([last.header.revision]);
    expect(seen.events).toEqual([]);
    await client.put(`${p}a`, "3");
    await waitUntil(() => seen.events.length === 1, "the event after the re-read");
    expect(seen.seen()).toEqual([`put ${p}a 3`]);
    await watch.close();
  });

  test(
    "etcd restarted: the client answers again and the watch resumes without losing or repeating an event",
    async () => {
      const p = prefix();
      const seen = recorder();
      const watch = new EtcdWatch(client, { key: p, prefix: true }, { onEvents: (events) => void seen.events.push(...events), onCompacted: async () => 0n });
      opened.push(watch);
      await waitUntil(() => watch.connected, "the watch connected");
      await client.put(`${p}a`, "before");
      await waitUntil(() => seen.events.length === 1, "the event before the restart");
      const lease = await client.leaseGrant(60);
      await etcd.stop();
      const down = await client.range(p).catch((e: unknown) => e);
      expect(down).toBeInstanceOf(EtcdUnavailableError);
      await etcd.launch();
      // The client reconnects by itself; the lease survived the restart.
      await until("etcd answering again", 10_000, async () => (await client.range(p, { prefix: true }).catch(() => undefined)) ?? undefined);
      expect((await client.leaseKeepAlive(lease.id)).alive).toBe(true);
      await client.put(`${p}b`, "after");
      await waitUntil(() => seen.events.length === 2, "the event after the restart", 10_000);
      expect(seen.seen()).toEqual([`put ${p}a before`, `put ${p}b after`]);
      expect(watch.streams).toBeGreaterThanOrEqual(2);
      await watch.close();
    },
    30_000,
  );
});
