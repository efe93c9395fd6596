/**
 * Holds this broker's etcd lease (docs/architecture.md, "Ownership and cluster mode"): grants it, keeps it
 * alive, and says whether the broker may act under it, by its own monotonic clock (domain/cluster/
 * lease-validity.ts has the rule: valid until the last confirmed keep-alive's *send* time + TTL - margin).
 *
 * - Every `keepAliveIntervalMs` (a third of the TTL by default) one keep-alive is sent; one is in flight at
 *   a time, each bounded by the interval, so a hung request cannot hold the next back.
 * - `lost` is emitted when validity runs out (a timer at the deadline, so it fires even while a keep-alive
 *   hangs) or etcd says the lease is gone. `regained` is emitted when the broker may act again: the same
 *   lease confirmed again (etcd kept it: it was only unreachable for a while), or a fresh one.
 * - Keep-alives go on after a lapse, so that a short etcd outage ends with the same lease and no moves;
 *   but only for one TTL. Past that, a keep-alive is sent only once a non-renewing question
 *   (LeaseTimeToLive) is answered: when etcd receives this broker's requests but its answers are lost,
 *   keep-alives would hold the lease in etcd for ever while the broker, unconfirmed, may not act, and no
 *   successor could take its share over. Without keep-alives the lease expires in etcd and the survivors
 *   take over; once etcd answers again, the lease is resumed if it still lives, or replaced if it is gone.
 * - A lease etcd says is gone is replaced at once by a fresh one, registered again through `onNewLease`
 *   before it counts. Everything that hung off the old lease (its registration, its owner keys) is gone
 *   with it; `regained` says `fresh: true` so that the owner claims are made again.
 * - `onNewLease` failing with a FatalError (another live process registered this broker id) is not
 *   retried: the keeper fails (`failed`) and the broker must stop. Other failures are tried again.
 * - Failures are logged once per streak (the first at warn, the rest at debug): while etcd is down a
 *   round fails every 500 ms, and the lapse itself is the line that matters. `lastFailure` keeps the
 *   latest reason for whoever reports the state (readiness, the side-port).
 */
import { FatalError } from "../errors/errors.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import { LeaseValidity, leaseTiming, type LeaseTiming } from "../domain/cluster/lease-validity.ts";
import type { CallOptions } from "./etcd/etcd-client.ts";

/** How often a lost lease is tried again: soon, since nothing may be written meanwhile. */
export const LEASE_RETRY_INTERVAL_MS_MAX = 500;

/** The part of the etcd client the keeper uses (a fake in unit tests). */
export interface LeaseApi {
  leaseGrant(ttlSeconds: number, call?: CallOptions): Promise<{ id: bigint; ttlSeconds: number }>;
  leaseKeepAlive(id: bigint, call?: CallOptions): Promise<{ alive: boolean; ttlSeconds: number }>;
  leaseRevoke(id: bigint, call?: CallOptions): Promise<boolean>;
  /** Asks how long the lease has left (-1: gone) without renewing it. */
  leaseTimeToLive(id: bigint, options?: { keys?: boolean }, call?: CallOptions): Promise<{ ttlSeconds: number }>;
}

export type LeaseLostReason = "expired-locally" | "gone";

export interface LeaseKeeperEvents {
  lost: (leaseId: bigint, reason: LeaseLostReason) => void;
  regained: (leaseId: bigint, fresh: boolean) => void;
  failed: (error: Error) => void;
}

export interface LeaseKeeperOptions {
  leases: LeaseApi;
  clock: Clock;
  log: Logger;
  timers?: Timers;
  ttlSeconds?: number;
  safetyMarginMs?: number;
  keepAliveIntervalMs?: number;
  /** Registers the broker under a new lease; the lease counts as held once this resolves. */
  onNewLease: (leaseId: bigint) => Promise<void>;
}

type KeeperState = "idle" | "running" | "stopped" | "failed";

export class LeaseKeeper {
  readonly timing: LeaseTiming;
  private readonly validity: LeaseValidity;
  private readonly timers: Timers;
  private state: KeeperState = "idle";
  private validNow = false;
  /** The lease that was held when validity was lost, to tell a regained lease from a fresh one. */
  private lostLeaseId: bigint | undefined;
  /** When validity was lost (monotonic ms), while it stays lost. */
  private lapsedAtMs: number | undefined;
  /** Whether the "no more keep-alives" line was logged for the current lapse. */
  private saidProbing = false;
  private cancelRound: (() => void) | undefined;
  private cancelDeadline: (() => void) | undefined;
  private round: Promise<void> | undefined;
  /** Why the last keep-alive or grant failed, while they keep failing. */
  private failure: string | undefined;
  private readonly listeners: { [E in keyof LeaseKeeperEvents]: LeaseKeeperEvents[E][] } = { lost: [], regained: [], failed: [] };

  constructor(private readonly options: LeaseKeeperOptions) {
    this.timing = leaseTiming(options);
    this.validity = new LeaseValidity(this.timing.safetyMarginMs);
    this.timers = options.timers ?? systemTimers;
  }

  on<E extends keyof LeaseKeeperEvents>(event: E, listener: LeaseKeeperEvents[E]): () => void {
    const list = this.listeners[event] as LeaseKeeperEvents[E][];
    list.push(listener);
    return () => {
      const at = list.indexOf(listener);
      if (at >= 0) list.splice(at, 1);
    };
  }

  /** Whether the broker may act under its lease at `nowMs` (monotonic). */
  isValid(nowMs: number): boolean {
    return this.validity.isValid(nowMs);
  }

  remainingMs(nowMs: number): number {
    return this.validity.remainingMs(nowMs);
  }

  /** The lease held (valid or not), undefined before the first grant. */
  get leaseId(): bigint | undefined {
    return this.validity.state.kind === "held" ? this.validity.state.leaseId : undefined;
  }

  get status(): KeeperState {
    return this.state;
  }

  /** Why the last keep-alive or grant failed, while rounds keep failing; undefined once one succeeds. */
  get lastFailure(): string | undefined {
    return this.failure;
  }

  /**
   * Grants the first lease and registers under it. Rejects (and leaves nothing behind) when etcd is
   * unreachable or the broker id is taken, so that a broker that cannot join says so at start-up.
   */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new FatalError(`lease keeper started twice (it is ${this.state})`);
    this.state = "running";
    try {
      await this.acquire();
    } catch (error) {
      this.state = "failed";
      throw error;
    }
    this.evaluate();
    this.schedule(this.timing.keepAliveIntervalMs);
  }

  /** Stops keeping the lease alive and, with `revoke`, revokes it: its registration and owner keys go at once. */
  async stop(options: { revoke: boolean } = { revoke: true }): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    this.cancelRound?.();
    this.cancelDeadline?.();
    await this.round;
    const state = this.validity.state;
    if (options.revoke && state.kind === "held") {
      this.validity.gone(state.leaseId);
      try {
        await this.options.leases.leaseRevoke(state.leaseId);
      } catch (error) {
        // The lease then expires by itself within its TTL.
        this.options.log.warn("etcd lease: revoking at shutdown failed; it expires by itself", { leaseId: String(state.leaseId), error: String(error) });
      }
    }
  }

  /** One round: a keep-alive, or a fresh lease when the last one is gone. */
  private async renew(): Promise<void> {
    const state = this.validity.state;
    if (state.kind !== "held") {
      await this.acquire().catch((error: unknown) => this.acquireFailed(error));
      this.evaluate();
      return;
    }
    if (this.lapsedAtMs !== undefined && this.options.clock.monotonicMs() - this.lapsedAtMs >= this.timing.ttlSeconds * 1000) {
      if (!(await this.leaseStillAnswered(state.leaseId))) {
        this.evaluate();
        return;
      }
    }
    const sentAtMs = this.options.clock.monotonicMs();
    try {
      const answer = await this.options.leases.leaseKeepAlive(state.leaseId, { timeoutMs: this.timing.keepAliveIntervalMs });
      if (answer.alive) {
        this.validity.confirmed(state.leaseId, sentAtMs, answer.ttlSeconds);
        this.failure = undefined;
      } else {
        this.validity.gone(state.leaseId);
        this.failure = "etcd says the lease is gone (expired or revoked)";
      }
    } catch (error) {
      this.failed("etcd lease: keep-alive failed", error, { leaseId: String(state.leaseId) });
    }
    this.evaluate();
    if (this.validity.state.kind === "gone" && this.state === "running") {
      this.options.log.warn("etcd lease: the lease is gone (expired or revoked); registering under a fresh one", { leaseId: String(state.leaseId) });
      await this.acquire().catch((error: unknown) => this.acquireFailed(error));
      this.evaluate();
    }
  }

  /**
   * Lapsed for a whole TTL: whether a keep-alive may be sent, which is once etcd answers a non-renewing
   * question about the lease. Gone: the lease is marked so (the caller's next round takes a fresh one).
   */
  private async leaseStillAnswered(leaseId: bigint): Promise<boolean> {
    if (!this.saidProbing) {
      this.saidProbing = true;
      this.options.log.warn("etcd lease: lapsed for a whole TTL; no keep-alive until etcd answers, so that the lease can expire there and the survivors take this broker's share over", {
        leaseId: String(leaseId),
      });
    }
    try {
      const answer = await this.options.leases.leaseTimeToLive(leaseId, {}, { timeoutMs: this.timing.keepAliveIntervalMs });
      if (answer.ttlSeconds > 0) return true;
      this.validity.gone(leaseId);
      this.failure = "etcd says the lease is gone (expired or revoked)";
      return false;
    } catch (error) {
      this.failed("etcd lease: no answer about the lapsed lease", error, { leaseId: String(leaseId) });
      return false;
    }
  }

  private async acquire(): Promise<void> {
    const sentAtMs = this.options.clock.monotonicMs();
    const grant = await this.options.leases.leaseGrant(this.timing.ttlSeconds);
    try {
      await this.options.onNewLease(grant.id);
    } catch (error) {
      // Nothing may hang off a lease that was not registered; it would expire anyway.
      await this.options.leases.leaseRevoke(grant.id).catch(() => false);
      throw error;
    }
    if (this.state !== "running") {
      await this.options.leases.leaseRevoke(grant.id).catch(() => false);
      return;
    }
    this.validity.granted(grant.id, sentAtMs, grant.ttlSeconds);
    this.failure = undefined;
  }

  private acquireFailed(error: unknown): void {
    if (error instanceof FatalError) {
      this.fail(error);
      return;
    }
    this.failed("etcd lease: could not get and register a fresh lease; trying again", error, {});
  }

  /** A failed round: logged at warn when it starts a streak of failures, at debug while the streak goes on. */
  private failed(message: string, error: unknown, fields: Record<string, unknown>): void {
    const first = this.failure === undefined;
    this.failure = error instanceof Error ? error.message : String(error);
    const line = { ...fields, error: this.failure };
    if (first) this.options.log.warn(`${message} (further failures are logged at debug level until a round succeeds)`, line);
    else this.options.log.debug(message, line);
  }

  private fail(error: Error): void {
    if (this.state !== "running") return;
    this.state = "failed";
    this.cancelRound?.();
    this.cancelDeadline?.();
    this.options.log.error("etcd lease: giving up", { error: error.message });
    for (const listener of [...this.listeners.failed]) listener(error);
  }

  /** Emits lost or regained when validity changed, and arms the timer for the moment it runs out. */
  private evaluate(): void {
    if (this.state !== "running") return;
    const nowMs = this.options.clock.monotonicMs();
    const valid = this.validity.isValid(nowMs);
    const state = this.validity.state;
    if (this.validNow && !valid) {
      this.validNow = false;
      this.lapsedAtMs = nowMs;
      this.saidProbing = false;
      this.lostLeaseId = this.validity.leaseId;
      const reason: LeaseLostReason = state.kind === "gone" ? "gone" : "expired-locally";
      this.options.log.warn("etcd lease: no longer valid; this broker must not act on what it owns", {
        leaseId: String(this.lostLeaseId),
        reason,
        ...(this.failure === undefined ? {} : { lastError: this.failure }),
      });
      for (const listener of [...this.listeners.lost]) listener(this.lostLeaseId!, reason);
    } else if (!this.validNow && valid && state.kind === "held") {
      this.validNow = true;
      this.lapsedAtMs = undefined;
      const fresh = this.lostLeaseId !== undefined && this.lostLeaseId !== state.leaseId;
      if (this.lostLeaseId !== undefined) {
        this.options.log.info("etcd lease: valid again", { leaseId: String(state.leaseId), fresh });
        for (const listener of [...this.listeners.regained]) listener(state.leaseId, fresh);
      }
    }
    this.cancelDeadline?.();
    this.cancelDeadline = undefined;
    if (valid) this.cancelDeadline = this.timers.after(this.validity.remainingMs(nowMs), () => this.evaluate());
  }

  private schedule(delayMs: number): void {
    if (this.state !== "running") return;
    this.cancelRound = this.timers.after(delayMs, () => {
      const startedMs = this.options.clock.monotonicMs();
      this.round = this.renew().finally(() => {
        this.round = undefined;
        const intervalMs = this.validNow ? this.timing.keepAliveIntervalMs : Math.min(this.timing.keepAliveIntervalMs, LEASE_RETRY_INTERVAL_MS_MAX);
        this.schedule(Math.max(0, startedMs + intervalMs - this.options.clock.monotonicMs()));
      });
    });
  }
}
