/**
 * The lease keeper on a manual clock and manual timers, against a fake lease API whose answers the test
 * releases one by one: keep-alives on schedule, validity from the send time, lost when it runs out (even
 * while a keep-alive hangs), regained with the same lease, a fresh lease registered after etcd said the
 * old one is gone, a duplicate registration failing for good.
 */
import { describe, expect, test } from "bun:test";
import { FatalError } from "../../../src/errors/errors.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { LeaseKeeper, type LeaseApi } from "../../../src/cluster/lease-keeper.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers, settle } from "../../support/manual-timers.ts";

type Call =
  | { kind: "grant"; ttlSeconds: number; resolve: (answer: { id: bigint; ttlSeconds: number }) => void; reject: (error: Error) => void }
  | { kind: "keepAlive"; id: bigint; resolve: (answer: { alive: boolean; ttlSeconds: number }) => void; reject: (error: Error) => void }
  | { kind: "revoke"; id: bigint; resolve: (revoked: boolean) => void; reject: (error: Error) => void }
  | { kind: "timeToLive"; id: bigint; resolve: (answer: { ttlSeconds: number }) => void; reject: (error: Error) => void };

/** A lease API whose every call waits until the test answers it. */
class FakeLeases implements LeaseApi {
  readonly calls: Call[] = [];

  leaseGrant(ttlSeconds: number) {
    return new Promise<{ id: bigint; ttlSeconds: number }>((resolve, reject) => this.calls.push({ kind: "grant", ttlSeconds, resolve, reject }));
  }
  leaseKeepAlive(id: bigint) {
    return new Promise<{ alive: boolean; ttlSeconds: number }>((resolve, reject) => this.calls.push({ kind: "keepAlive", id, resolve, reject }));
  }
  leaseRevoke(id: bigint) {
    return new Promise<boolean>((resolve, reject) => this.calls.push({ kind: "revoke", id, resolve, reject }));
  }
  leaseTimeToLive(id: bigint) {
    return new Promise<{ ttlSeconds: number }>((resolve, reject) => this.calls.push({ kind: "timeToLive", id, resolve, reject }));
  }

  /** The oldest unanswered call, which must be of `kind`. */
  take<K extends Call["kind"]>(kind: K): Extract<Call, { kind: K }> {
    const call = this.calls.shift();
    if (call === undefined) throw new Error(`expected a ${kind} call, there is none`);
    if (call.kind !== kind) throw new Error(`expected a ${kind} call, got ${call.kind}`);
    return call as Extract<Call, { kind: K }>;
  }
}

function setUp(options: { ttlSeconds?: number; safetyMarginMs?: number; onNewLease?: (id: bigint) => Promise<void> } = {}) {
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const leases = new FakeLeases();
  const registered: bigint[] = [];
  const events: string[] = [];
  const keeper = new LeaseKeeper({
    leases,
    clock,
    timers,
    log: silentLogger,
    ttlSeconds: options.ttlSeconds ?? 9,
    safetyMarginMs: options.safetyMarginMs ?? 1_000,
    onNewLease:
      options.onNewLease ??
      (async (id) => {
        registered.push(id);
      }),
  });
  keeper.on("lost", (id, reason) => events.push(`lost ${id} ${reason}`));
  keeper.on("regained", (id, fresh) => events.push(`regained ${id}${fresh ? " fresh" : ""}`));
  keeper.on("failed", (error) => events.push(`failed ${error.message}`));
  return { clock, timers, leases, keeper, registered, events };
}

/** Starts the keeper with lease 7 granted at t = 0. */
async function started(options: Parameters<typeof setUp>[0] = {}) {
  const setup = setUp(options);
  const starting = setup.keeper.start();
  await settle();
  setup.leases.take("grant").resolve({ id: 7n, ttlSeconds: options.ttlSeconds ?? 9 });
  await starting;
  return setup;
}

describe("lease keeper", () => {
  test("start grants a lease, registers under it, and is valid from the grant's send time", async () => {
    const { keeper, registered, clock } = await started();
    expect(registered).toEqual([7n]);
    expect(keeper.leaseId).toBe(7n);
    expect(keeper.isValid(clock.monotonicMs())).toBe(true);
    expect(keeper.remainingMs(0)).toBe(8_000);
    expect(keeper.timing.keepAliveIntervalMs).toBe(3_000);
  });

  test("keep-alives every third of the TTL keep it valid; each counts from when it was sent", async () => {
    const { keeper, leases, timers, clock, events } = await started();
    await timers.advance(3_000);
    const first = leases.take("keepAlive");
    expect(first.id).toBe(7n);
    // The answer takes 2 s: validity runs from the send time (3000), not the answer (5000).
    await timers.advance(2_000);
    first.resolve({ alive: true, ttlSeconds: 9 });
    await settle();
    expect(keeper.remainingMs(clock.monotonicMs())).toBe(3_000 + 9_000 - 1_000 - 5_000);
    await timers.advance(1_000);
    leases.take("keepAlive").resolve({ alive: true, ttlSeconds: 9 });
    await settle();
    expect(keeper.remainingMs(clock.monotonicMs())).toBe(8_000);
    expect(events).toEqual([]);
  });

  test("keep-alives that go unanswered: lost at the deadline by the keeper's own clock, while one still hangs", async () => {
    const { keeper, leases, timers, events } = await started();
    await timers.advance(3_000);
    leases.take("keepAlive").reject(new Error("etcd unreachable"));
    await timers.advance(3_000);
    const hanging = leases.take("keepAlive"); // never answered in time
    await timers.advance(1_999);
    expect(events).toEqual([]);
    expect(keeper.isValid(7_999)).toBe(true);
    await timers.advance(1);
    expect(events).toEqual(["lost 7 expired-locally"]);
    expect(keeper.isValid(8_000)).toBe(false);
    // etcd still had the lease (only the network was slow): the late answer for a keep-alive sent at
    // 6000 makes it valid again until 14000, with the same lease.
    hanging.resolve({ alive: true, ttlSeconds: 9 });
    await settle();
    expect(events).toEqual(["lost 7 expired-locally", "regained 7"]);
    expect(keeper.remainingMs(8_000)).toBe(6_000);
  });

  /** Every request goes unanswered (etcd may apply it, the answers are lost) until `untilMs`; what was asked when. */
  async function unanswered(h: Awaited<ReturnType<typeof started>>, untilMs: number): Promise<{ atMs: number; kind: string }[]> {
    const asked: { atMs: number; kind: string }[] = [];
    while (h.clock.monotonicMs() < untilMs) {
      await h.timers.advance(500);
      for (const call of h.leases.calls.splice(0)) {
        asked.push({ atMs: h.clock.monotonicMs(), kind: call.kind });
        call.reject(new Error("no answer"));
      }
      await settle();
    }
    return asked;
  }

  test("answers lost while etcd may apply the requests: keep-alives stop one TTL after the lapse, so that etcd can expire the lease; once etcd answers and the lease lives, it is resumed", async () => {
    const h = await started();
    const asked = await unanswered(h, 20_000);
    expect(h.events).toEqual(["lost 7 expired-locally"]);
    // Lost at 8000; keep-alives until 8000 + the TTL (9 s), then only the non-renewing question.
    const keepAlives = asked.filter((a) => a.kind === "keepAlive").map((a) => a.atMs);
    expect(Math.max(...keepAlives)).toBeLessThan(17_000);
    expect(keepAlives.filter((at) => at > 8_000).length).toBeGreaterThan(5);
    expect(asked.filter((a) => a.atMs >= 17_000).map((a) => a.kind)).toEqual(asked.filter((a) => a.atMs >= 17_000).map(() => "timeToLive"));
    expect(asked.at(-1)?.kind).toBe("timeToLive");
    await h.timers.advance(500);
    h.leases.take("timeToLive").resolve({ ttlSeconds: 4 });
    await settle();
    h.leases.take("keepAlive").resolve({ alive: true, ttlSeconds: 9 });
    await settle();
    expect(h.events).toEqual(["lost 7 expired-locally", "regained 7"]);
    expect(h.keeper.leaseId).toBe(7n);
  });

  test("lapsed for a TTL and etcd then says the lease is gone: a fresh lease is granted and registered", async () => {
    const h = await started();
    await unanswered(h, 18_000);
    await h.timers.advance(500);
    h.leases.take("timeToLive").resolve({ ttlSeconds: -1 });
    await settle();
    await h.timers.advance(500);
    h.leases.take("grant").resolve({ id: 8n, ttlSeconds: 9 });
    await settle();
    expect(h.registered).toEqual([7n, 8n]);
    expect(h.events).toEqual(["lost 7 expired-locally", "regained 8 fresh"]);
  });

  test("a lost lease is retried sooner than the keep-alive interval", async () => {
    const { leases, timers, events } = await started();
    await timers.advance(3_000);
    leases.take("keepAlive").reject(new Error("down"));
    await timers.advance(3_000);
    leases.take("keepAlive").reject(new Error("down"));
    await timers.advance(2_000); // lost at 8000
    expect(events).toEqual(["lost 7 expired-locally"]);
    await timers.advance(1_000); // the round at 9000
    leases.take("keepAlive").reject(new Error("down"));
    await timers.advance(500); // retried after 500 ms, not 3 s
    expect(leases.calls.map((c) => c.kind)).toEqual(["keepAlive"]);
  });

  test("etcd says the lease is gone: lost at once, then a fresh lease is granted and registered", async () => {
    const { keeper, leases, timers, registered, events } = await started();
    await timers.advance(3_000);
    leases.take("keepAlive").resolve({ alive: false, ttlSeconds: 0 });
    await settle();
    expect(events).toEqual(["lost 7 gone"]);
    expect(keeper.isValid(3_000)).toBe(false);
    const grant = leases.take("grant");
    await timers.advance(100);
    grant.resolve({ id: 8n, ttlSeconds: 9 });
    await settle();
    expect(registered).toEqual([7n, 8n]);
    expect(events).toEqual(["lost 7 gone", "regained 8 fresh"]);
    expect(keeper.leaseId).toBe(8n);
    // Valid from when the grant was sent (3000).
    expect(keeper.remainingMs(3_100)).toBe(3_000 + 8_000 - 3_100);
  });

  test("a fresh lease whose registration fails is revoked and tried again", async () => {
    let fail = false;
    const { leases, timers, events } = await started({
      onNewLease: async () => {
        if (fail) throw new Error("etcd unreachable");
      },
    });
    fail = true;
    await timers.advance(3_000);
    leases.take("keepAlive").resolve({ alive: false, ttlSeconds: 0 });
    await settle();
    leases.take("grant").resolve({ id: 8n, ttlSeconds: 9 });
    await settle();
    leases.take("revoke").resolve(true);
    await settle();
    fail = false;
    await timers.advance(500);
    leases.take("grant").resolve({ id: 9n, ttlSeconds: 9 });
    await settle();
    expect(events).toEqual(["lost 7 gone", "regained 9 fresh"]);
  });

  test("another process holding the broker id: the keeper fails for good and stops renewing", async () => {
    let holder = false;
    const { leases, timers, events, keeper } = await started({
      onNewLease: async () => {
        if (holder) throw new FatalError("broker id 1 is already registered");
      },
    });
    holder = true;
    await timers.advance(3_000);
    leases.take("keepAlive").resolve({ alive: false, ttlSeconds: 0 });
    await settle();
    leases.take("grant").resolve({ id: 8n, ttlSeconds: 9 });
    await settle();
    leases.take("revoke").resolve(true);
    await settle();
    expect(events).toEqual(["lost 7 gone", "failed broker id 1 is already registered"]);
    expect(keeper.status).toBe("failed");
    await timers.advance(30_000);
    expect(leases.calls).toEqual([]);
  });

  test("start rejects when the first registration fails, leaving no lease behind", async () => {
    const { keeper, leases } = setUp({
      onNewLease: async () => {
        throw new FatalError("broker id 1 is already registered");
      },
    });
    const starting = keeper.start();
    await settle();
    leases.take("grant").resolve({ id: 7n, ttlSeconds: 9 });
    await settle();
    leases.take("revoke").resolve(true);
    await expect(starting).rejects.toThrow("already registered");
    expect(keeper.status).toBe("failed");
  });

  test("stop revokes the lease and nothing runs after it", async () => {
    const { keeper, leases, timers } = await started();
    const stopping = keeper.stop();
    await settle();
    const revoke = leases.take("revoke");
    expect(revoke.id).toBe(7n);
    revoke.resolve(true);
    await stopping;
    expect(keeper.isValid(0)).toBe(false);
    await timers.advance(30_000);
    expect(leases.calls).toEqual([]);
    expect(timers.pending).toBe(0);
  });
});
