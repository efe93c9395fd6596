/**
 * How the lease keeper reports a streak of failures (etcd down): the first failed keep-alive at warn,
 * the rest at debug, the lapse once at warn with the last error in it, `lastFailure` holding the reason
 * until a round succeeds; and the same for fresh-lease attempts after etcd dropped the lease.
 */
import { describe, expect, test } from "bun:test";
import { LeaseKeeper, type LeaseApi } from "../../../src/cluster/lease-keeper.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";

/** A lease API whose behaviour the test switches: up, down (every call fails), or the lease gone with grants refused. */
class SwitchedLeases implements LeaseApi {
  mode: "up" | "down" | "gone" = "up";
  private nextId = 7n;
  async leaseGrant(ttlSeconds: number) {
    if (this.mode !== "up") throw new Error("etcd lease grant: no endpoint answered");
    return { id: this.nextId++, ttlSeconds };
  }
  async leaseKeepAlive() {
    if (this.mode === "down") throw new Error("etcd lease keep-alive: no endpoint answered");
    if (this.mode === "gone") return { alive: false, ttlSeconds: 0 };
    return { alive: true, ttlSeconds: 9 };
  }
  async leaseRevoke() {
    return true;
  }
  async leaseTimeToLive() {
    if (this.mode === "down") throw new Error("etcd lease time-to-live: no endpoint answered");
    return { ttlSeconds: this.mode === "gone" ? -1 : 5 };
  }
}

function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const entry = (level: string) => (message: string, fields?: Record<string, unknown>) =>
    void lines.push(`${level} ${message}${fields?.lastError === undefined ? "" : ` [lastError: ${String(fields.lastError)}]`}`);
  return { log: { debug: entry("debug"), info: entry("info"), warn: entry("warn"), error: entry("error") }, lines };
}

async function started() {
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const leases = new SwitchedLeases();
  const { log, lines } = recordingLogger();
  const keeper = new LeaseKeeper({ leases, clock, timers, log, ttlSeconds: 9, safetyMarginMs: 1_000, onNewLease: async () => {} });
  await keeper.start();
  return { clock, timers, leases, keeper, lines };
}

const atLevel = (lines: string[], level: string) => lines.filter((l) => l.startsWith(`${level} `));

describe("lease keeper failures", () => {
  test("etcd down: one warning when keep-alives start failing, one when the lease lapses, debug in between", async () => {
    const { timers, leases, keeper, lines } = await started();
    leases.mode = "down";
    await timers.advance(3_000); // the first keep-alive fails
    expect(keeper.lastFailure).toBe("etcd lease keep-alive: no endpoint answered");
    await timers.advance(20_000); // lapses at 8 s, then a try every 500 ms
    const warnings = atLevel(lines, "warn");
    expect(warnings).toEqual([
      "warn etcd lease: keep-alive failed (further failures are logged at debug level until a round succeeds)",
      "warn etcd lease: no longer valid; this broker must not act on what it owns [lastError: etcd lease keep-alive: no endpoint answered]",
      // At 17 s, a TTL after the lapse: keep-alives give way to a non-renewing question.
      "warn etcd lease: lapsed for a whole TTL; no keep-alive until etcd answers, so that the lease can expire there and the survivors take this broker's share over",
    ]);
    expect(atLevel(lines, "debug").length).toBeGreaterThan(20);

    leases.mode = "up";
    await timers.advance(500);
    expect(keeper.lastFailure).toBeUndefined();
    expect(lines.at(-1)).toBe("info etcd lease: valid again");
    // A new streak warns again.
    leases.mode = "down";
    await timers.advance(3_000);
    expect(atLevel(lines, "warn")).toHaveLength(4);
  });

  test("a lease etcd dropped while grants fail: the drop and the lapse at warn, the failed attempts at debug, then a fresh lease", async () => {
    const { timers, leases, keeper, lines } = await started();
    leases.mode = "gone";
    await timers.advance(10_000);
    expect(atLevel(lines, "warn")).toEqual([
      "warn etcd lease: no longer valid; this broker must not act on what it owns [lastError: etcd says the lease is gone (expired or revoked)]",
      "warn etcd lease: the lease is gone (expired or revoked); registering under a fresh one",
    ]);
    expect(atLevel(lines, "debug").filter((l) => l.includes("could not get and register a fresh lease")).length).toBeGreaterThan(5);
    expect(keeper.lastFailure).toBe("etcd lease grant: no endpoint answered");
    leases.mode = "up";
    await timers.advance(500);
    expect(keeper.leaseId).toBe(8n);
    expect(keeper.lastFailure).toBeUndefined();
    expect(lines.at(-1)).toBe("info etcd lease: valid again");
  });
});
