/**
 * The lease validity rule: valid until the confirmed request's send time + TTL - margin, never from the
 * answer's arrival; validity only moves forward; a lease etcd says is gone stays invalid.
 */
import { describe, expect, test } from "bun:test";
import { ConfigError } from "../../../../src/errors/errors.ts";
import { LeaseValidity, leaseTiming, validUntilMs } from "../../../../src/domain/cluster/lease-validity.ts";

describe("lease validity", () => {
  test("nothing held: never valid", () => {
    const validity = new LeaseValidity(1_000);
    expect(validity.isValid(0)).toBe(false);
    expect(validity.remainingMs(0)).toBe(0);
    expect(validity.leaseId).toBeUndefined();
  });

  test("a grant sent at t is valid until t + TTL - margin, and not one millisecond more", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 10_000, 9);
    expect(validity.isValid(10_000)).toBe(true);
    expect(validity.isValid(17_999)).toBe(true);
    expect(validity.isValid(18_000)).toBe(false);
    expect(validity.remainingMs(12_000)).toBe(6_000);
    expect(validUntilMs(10_000, 9, 1_000)).toBe(18_000);
  });

  test("a keep-alive counts from when it was sent, however late its answer arrives", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 0, 9); // valid until 8000
    // Sent at 3000, answered at 7500 (a slow network, a paused process): valid until 3000 + 9000 - 1000.
    validity.confirmed(7n, 3_000, 9);
    expect(validity.isValid(10_999)).toBe(true);
    expect(validity.isValid(11_000)).toBe(false);
  });

  test("an answer to an older keep-alive arriving after a newer one does not shorten validity", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 0, 9);
    validity.confirmed(7n, 6_000, 9); // until 14000
    validity.confirmed(7n, 3_000, 9); // would be 11000: ignored
    expect(validity.remainingMs(0)).toBe(14_000);
  });

  test("etcd refreshing the lease to another TTL than asked: the answer's TTL counts", () => {
    const validity = new LeaseValidity(500);
    validity.granted(7n, 0, 2);
    validity.confirmed(7n, 1_000, 3);
    expect(validity.remainingMs(1_000)).toBe(2_500);
  });

  test("a lease etcd says is gone is invalid at once and for good, whatever answer comes later", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 0, 9);
    validity.gone(7n);
    expect(validity.isValid(1)).toBe(false);
    expect(validity.state).toEqual({ kind: "gone", leaseId: 7n });
    validity.confirmed(7n, 2, 9);
    expect(validity.isValid(3)).toBe(false);
  });

  test("answers about another lease than the one held change nothing", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 0, 9);
    validity.gone(8n);
    validity.confirmed(8n, 5_000, 9);
    expect(validity.state).toEqual({ kind: "held", leaseId: 7n, validUntilMs: 8_000 });
  });

  test("a fresh lease after a gone one starts a new validity", () => {
    const validity = new LeaseValidity(1_000);
    validity.granted(7n, 0, 9);
    validity.gone(7n);
    validity.granted(9n, 20_000, 9);
    expect(validity.leaseId).toBe(9n);
    expect(validity.isValid(27_999)).toBe(true);
  });

  test("with no margin the deadline is exactly send time + TTL", () => {
    const validity = new LeaseValidity(0);
    validity.granted(1n, 100, 2);
    expect(validity.isValid(2_099)).toBe(true);
    expect(validity.isValid(2_100)).toBe(false);
  });
});

describe("lease timing", () => {
  test("defaults: 9 s TTL as Apache's broker.session.timeout.ms, a keep-alive every third, a 1 s margin", () => {
    expect(leaseTiming({})).toEqual({ ttlSeconds: 9, safetyMarginMs: 1_000, keepAliveIntervalMs: 3_000 });
  });

  test("a short TTL gets a proportionate default margin", () => {
    expect(leaseTiming({ ttlSeconds: 2 })).toEqual({ ttlSeconds: 2, safetyMarginMs: 222, keepAliveIntervalMs: 666 });
  });

  test("timings that would lose the lease to one late keep-alive are refused", () => {
    expect(() => leaseTiming({ ttlSeconds: 2, safetyMarginMs: 1_500, keepAliveIntervalMs: 600 })).toThrow(ConfigError);
    expect(() => leaseTiming({ ttlSeconds: 0 })).toThrow(ConfigError);
    expect(() => leaseTiming({ ttlSeconds: 1.5 })).toThrow(ConfigError);
    expect(() => leaseTiming({ safetyMarginMs: -1 })).toThrow(ConfigError);
    expect(() => leaseTiming({ keepAliveIntervalMs: 0 })).toThrow(ConfigError);
  });
});
