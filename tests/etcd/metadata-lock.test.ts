/**
 * The metadata gate's lock in a real etcd: one holder at a time, a contender that waits on a watch (one
 * txn while it waits, not a poll), a holder whose lease is revoked frees it, a former holder cannot
 * delete its successor's key, tokens grow, and a broker without a valid lease cannot take it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EtcdLock, LockUnavailableError, metadataLockKey, type LockHold } from "../../src/cluster/etcd-lock.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import type { TxnRequest } from "../../src/cluster/etcd/gateway-codec.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { EtcdServer } from "../support/etcd.ts";
import { waitUntil } from "../support/wait.ts";

let etcd: EtcdServer;
let client: EtcdClient;

/** Counts the txns a lock sends: while it waits, there must be none. */
class CountingClient extends EtcdClient {
  txns = 0;
  override txn(txn: TxnRequest) {
    this.txns++;
    return super.txn(txn);
  }
}

beforeAll(async () => {
  etcd = await EtcdServer.start();
  client = new EtcdClient({ endpoints: etcd.endpoint });
});

afterAll(async () => {
  client?.close();
  await etcd?.close();
});

let cluster = 0;

async function contender(key: string, selfId: number, options: { waitMs?: number } = {}) {
  const counting = new CountingClient({ endpoints: etcd.endpoint });
  const lease = await client.leaseGrant(30);
  const state = { id: lease.id as bigint | undefined, valid: true };
  const lock = new EtcdLock({ client: counting, key, selfId, lease: () => state, log: silentLogger, nowMs: () => Date.now(), ...options });
  return { lock, client: counting, lease: state, close: () => counting.close() };
}

describe("the etcd metadata lock", () => {
  test("two contenders: the second waits on a watch until the first lets go, then holds it with a higher token", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    const b = await contender(key, 2);
    try {
      const holdA = await a.lock.acquire("create orders");
      const held = await client.range(key);
      expect(held.kvs[0]!.lease).toBe(a.lease.id!);
      expect(holdA.token).toBe(held.kvs[0]!.createRevision);
      expect(JSON.parse(held.kvs[0]!.value)).toMatchObject({ format: "bunka-lock", brokerId: 1, what: "create orders" });

      let holdB: LockHold | undefined;
      const taking = b.lock.acquire("create orders").then((hold) => (holdB = hold));
      await waitUntil(() => b.lock.waits === 1, "b waits");
      // Time passes while a holds it (other writes move the revision); b sends nothing more.
      for (let i = 0; i < 5; i++) await client.put(`/unrelated/${key}/${i}`, "x");
      expect(b.client.txns).toBe(1);
      expect(holdB).toBeUndefined();
      expect(holdA.valid()).toBe(true);

      await holdA.release();
      await taking;
      expect(holdB!.token).toBeGreaterThan(holdA.token);
      expect(b.client.txns).toBe(2);
      expect((await client.range(key)).kvs[0]!.lease).toBe(b.lease.id!);
      await holdB!.release();
      expect((await client.range(key)).kvs).toHaveLength(0);
    } finally {
      a.close();
      b.close();
    }
  });

  test("mutual exclusion: many takes on two brokers never overlap", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    const b = await contender(key, 2);
    let inside = 0;
    let overlaps = 0;
    const tokens: bigint[] = [];
    const work = async (c: typeof a) => {
      for (let i = 0; i < 5; i++) {
        const hold = await c.lock.acquire(`round ${i}`);
        inside++;
        if (inside > 1) overlaps++;
        tokens.push(hold.token);
        await client.put(`${key}-work`, String(i));
        inside--;
        await hold.release();
      }
    };
    try {
      await Promise.all([work(a), work(b)]);
      expect(overlaps).toBe(0);
      expect(tokens).toHaveLength(10);
      expect([...tokens].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual(tokens);
      expect(new Set(tokens).size).toBe(10);
    } finally {
      a.close();
      b.close();
    }
  });

  test("a holder whose lease is revoked frees the lock; its late release leaves the successor's key alone", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    const b = await contender(key, 2);
    try {
      const holdA = await a.lock.acquire("grow orders");
      const taking = b.lock.acquire("grow orders");
      await waitUntil(() => b.lock.waits === 1, "b waits");
      await client.leaseRevoke(a.lease.id!);
      a.lease.valid = false;
      expect(holdA.valid()).toBe(false);
      const holdB = await taking;
      expect((await client.range(key)).kvs[0]!.lease).toBe(b.lease.id!);
      // a comes back and lets go of what it believes it holds: b's key stays.
      await holdA.release();
      const after = await client.range(key);
      expect(after.kvs[0]!.createRevision).toBe(holdB.token);
      await holdB.release();
    } finally {
      a.close();
      b.close();
    }
  });

  test("without a valid lease the lock is not taken and etcd is not asked", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    try {
      a.lease.valid = false;
      await expect(a.lock.acquire("create")).rejects.toBeInstanceOf(LockUnavailableError);
      a.lease.id = undefined;
      a.lease.valid = true;
      await expect(a.lock.acquire("create")).rejects.toThrow("lease is not valid");
      expect(a.client.txns).toBe(0);
      expect((await client.range(key)).kvs).toHaveLength(0);
    } finally {
      a.close();
    }
  });

  test("a lease etcd no longer has is refused as LockUnavailableError, not taken", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    try {
      await client.leaseRevoke(a.lease.id!);
      await expect(a.lock.acquire("create")).rejects.toBeInstanceOf(LockUnavailableError);
      expect((await client.range(key)).kvs).toHaveLength(0);
    } finally {
      a.close();
    }
  });

  test("a wait longer than waitMs gives up with LockUnavailableError; the holder keeps the lock", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    const b = await contender(key, 2, { waitMs: 300 });
    try {
      const holdA = await a.lock.acquire("slow change");
      await expect(b.lock.acquire("create")).rejects.toThrow("gave up waiting");
      expect((await client.range(key)).kvs[0]!.createRevision).toBe(holdA.token);
      await holdA.release();
      const holdB = await b.lock.acquire("create");
      await holdB.release();
    } finally {
      a.close();
      b.close();
    }
  });

  test("a key left under this broker's own lease (a release that failed) is adopted, not waited for", async () => {
    const key = metadataLockKey(`lock-${++cluster}`);
    const a = await contender(key, 1);
    try {
      const first = await a.lock.acquire("first");
      // The release never reached etcd: put the key back as it was, then forget the hold.
      await first.release();
      await client.put(key, "{}", { lease: a.lease.id! });
      const again = await a.lock.acquire("second");
      expect(a.lock.waits).toBe(0);
      expect(again.token).toBe((await client.range(key)).kvs[0]!.createRevision);
      await again.release();
      expect((await client.range(key)).kvs).toHaveLength(0);
      // Taking it twice without letting go is a bug of the caller.
      const held = await a.lock.acquire("third");
      await expect(a.lock.acquire("fourth")).rejects.toThrow("taken again while held");
      await held.release();
    } finally {
      a.close();
    }
  });
});
