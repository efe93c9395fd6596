/**
 * Whether this broker may still act under its etcd lease, by its own monotonic clock (docs/architecture.md,
 * "Ownership and cluster mode"). Pure: every time is an argument.
 *
 * The rule: a lease confirmed by an answer to a request (the grant, or a keep-alive) that was *sent* at
 * `sentAtMs` with TTL `ttl` is valid until `sentAtMs + ttl - safetyMargin`. etcd starts the lease's TTL
 * again when it receives the keep-alive, which is after it was sent, so etcd's expiry is always later than
 * ours whatever the network and etcd took; timing from the answer instead would count the time the
 * answer spent travelling (or waiting behind a pause of this process) as lease time etcd never granted.
 * The margin covers the two clocks running at slightly different rates and the time between a check of
 * `isValid` and the write it allows taking effect.
 *
 * Answers may come back out of order (a slow keep-alive after a faster later one): validity only ever
 * moves forward while the lease lives. Once etcd says the lease is gone, it is invalid for good, whatever
 * arrives later; a new lease starts a new validity.
 */
import { ConfigError } from "../../errors/errors.ts";

export const LEASE_TTL_SECONDS_DEFAULT = 9; // Apache Kafka's broker.session.timeout.ms, 9000 ms
export const LEASE_SAFETY_MARGIN_MS_DEFAULT = 1_000;

export interface LeaseTiming {
  ttlSeconds: number;
  safetyMarginMs: number;
  /** How often a keep-alive is sent. */
  keepAliveIntervalMs: number;
}

/**
 * The timing a broker runs with, checked: the margin must leave room for at least one keep-alive interval,
 * or one late keep-alive would already cost the lease. Throws a ConfigError naming the problem.
 */
export function leaseTiming(options: { ttlSeconds?: number; safetyMarginMs?: number; keepAliveIntervalMs?: number }): LeaseTiming {
  const ttlSeconds = options.ttlSeconds ?? LEASE_TTL_SECONDS_DEFAULT;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) throw new ConfigError(`lease TTL must be a whole number of seconds, at least 1; got ${ttlSeconds}`);
  const ttlMs = ttlSeconds * 1000;
  const safetyMarginMs = options.safetyMarginMs ?? Math.min(LEASE_SAFETY_MARGIN_MS_DEFAULT, Math.floor(ttlMs / 9));
  // etcd's own client sends a keep-alive every third of the TTL: two may be lost before the lease is.
  const keepAliveIntervalMs = options.keepAliveIntervalMs ?? Math.floor(ttlMs / 3);
  if (!(safetyMarginMs >= 0)) throw new ConfigError(`lease safety margin must not be negative; got ${safetyMarginMs} ms`);
  if (!(keepAliveIntervalMs > 0)) throw new ConfigError(`keep-alive interval must be positive; got ${keepAliveIntervalMs} ms`);
  if (keepAliveIntervalMs >= ttlMs - safetyMarginMs) {
    throw new ConfigError(
      `keep-alive interval ${keepAliveIntervalMs} ms must be shorter than the lease TTL ${ttlMs} ms less the safety margin ${safetyMarginMs} ms`,
    );
  }
  return { ttlSeconds, safetyMarginMs, keepAliveIntervalMs };
}

/** The end of validity that one confirmed request gives. */
export function validUntilMs(sentAtMs: number, ttlSeconds: number, safetyMarginMs: number): number {
  return sentAtMs + ttlSeconds * 1000 - safetyMarginMs;
}

export type LeaseValidityState =
  | { kind: "none" }
  | { kind: "held"; leaseId: bigint; validUntilMs: number }
  | { kind: "gone"; leaseId: bigint };

export class LeaseValidity {
  private current: LeaseValidityState = { kind: "none" };

  constructor(private readonly safetyMarginMs: number) {}

  get state(): LeaseValidityState {
    return this.current;
  }

  get leaseId(): bigint | undefined {
    return this.current.kind === "none" ? undefined : this.current.leaseId;
  }

  /** A new lease, granted by a request sent at `sentAtMs`. Replaces whatever was held. */
  granted(leaseId: bigint, sentAtMs: number, ttlSeconds: number): void {
    this.current = { kind: "held", leaseId, validUntilMs: validUntilMs(sentAtMs, ttlSeconds, this.safetyMarginMs) };
  }

  /**
   * A keep-alive sent at `sentAtMs` was answered: the lease lives, refreshed to `ttlSeconds`. Ignored for
   * another lease than the one held (a late answer about a replaced lease) and once the lease is gone.
   */
  confirmed(leaseId: bigint, sentAtMs: number, ttlSeconds: number): void {
    if (this.current.kind !== "held" || this.current.leaseId !== leaseId) return;
    const until = validUntilMs(sentAtMs, ttlSeconds, this.safetyMarginMs);
    if (until > this.current.validUntilMs) this.current = { ...this.current, validUntilMs: until };
  }

  /** etcd says the lease no longer exists (expired or revoked). */
  gone(leaseId: bigint): void {
    if (this.current.kind === "held" && this.current.leaseId === leaseId) this.current = { kind: "gone", leaseId };
  }

  isValid(nowMs: number): boolean {
    return this.current.kind === "held" && nowMs < this.current.validUntilMs;
  }

  /** Milliseconds of validity left (0 when none). */
  remainingMs(nowMs: number): number {
    return this.current.kind === "held" ? Math.max(0, this.current.validUntilMs - nowMs) : 0;
  }
}
