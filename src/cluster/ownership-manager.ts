/**
 * Who owns what, kept true in etcd by every broker for itself (docs/architecture.md, "Ownership and
 * cluster mode"). Each broker runs one manager; the managers never talk to each other, they only read the
 * same owner keys and live brokers and compute the same assignment (domain/cluster/assignment.ts):
 *
 * - a resource (partition, transaction slot, group slot) whose target is this broker and that has no
 *   owner key is claimed (ownership-records.ts: one owner at a time, an epoch above every earlier claim's),
 *   then opened by the host at that epoch (`acquire`: the take-over), and only then served;
 * - a resource this broker owns whose target is another live broker is handed over: it stops being served
 *   (standing `leaving`), the host closes it (`release`: in-flight work finished), and only then is the
 *   owner key deleted, which is what lets the target claim it;
 * - an owner that is not live any more keeps its keys until its lease expires; nobody claims before that,
 *   so a successor never takes over while the former owner may still act under its lease.
 *
 * Nothing is claimed or handed over while this broker's own lease is not valid or it is missing from the
 * live brokers: an assignment computed without itself would hand everything away. A fresh lease (etcd
 * dropped the old one, and every owner key under it) means every claim is gone: everything held is
 * closed, then claimed again. A resource whose take-over failed is given back and not claimed again for
 * `retryAfterFailureMs`, so that a damaged partition does not go round the cluster in a loop.
 */
import { assignOwners } from "../domain/cluster/assignment.ts";
import type { Clock } from "../platform/clock.ts";
import type { Logger } from "../platform/logger.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import { resourceId, type OwnedResource, type ResourceKind } from "./cluster-keys.ts";
import type { EtcdWatch } from "./etcd/etcd-watch.ts";
import type { Standing } from "./ownership.ts";
import type { OwnerRecord, OwnershipRecords } from "./ownership-records.ts";

/** What opens and closes the resources this broker owns: partitions, transaction slots, group slots. */
export interface OwnedResourceHost {
  /** Opens `resource` as its new owner at `epoch` (recovery, loading); resolves once it may be served. */
  acquire(resource: OwnedResource, epoch: number): Promise<void>;
  /** Closes `resource`: resolves once nothing of it is in flight here, so another broker may take it. */
  release(resource: OwnedResource): Promise<void>;
}

/** This broker's lease as the manager needs it (the lease keeper). */
export interface LeaseView {
  readonly leaseId: bigint | undefined;
  isValid(nowMs: number): boolean;
}

export interface OwnershipManagerOptions {
  records: OwnershipRecords;
  selfId: number;
  lease: LeaseView;
  host: OwnedResourceHost;
  /** Every resource of a kind that exists now, in a stable order (partitions by topic, then index). */
  resources(kind: ResourceKind): OwnedResource[];
  /** The live brokers' ids, as the directory has them. */
  liveBrokers(): readonly number[];
  clock: Clock;
  log: Logger;
  timers?: Timers;
  /** Claims and hand-overs in flight at once. */
  concurrency?: number;
  retryAfterFailureMs?: number;
  /** Told of every move this broker makes (metrics). */
  onMove?(move: OwnershipMove): void;
}

export interface OwnershipMove {
  resource: OwnedResource;
  direction: "acquired" | "released";
  epoch: number;
  /** From the claim (or the decision to hand over) to the resource being served (or given back). */
  durationMs: number;
}

interface LocalClaim {
  resource: OwnedResource;
  state: "loading" | "owned" | "leaving";
  epoch: number;
  revision: bigint;
  leaseId: bigint;
  /** Closed here, its owner key not deleted yet (the delete failed: etcd unreachable); the next round tries again. */
  closedAwaitingRelease?: boolean;
}

const KINDS: readonly ResourceKind[] = ["partition", "txn", "group"];
export const OWNERSHIP_CONCURRENCY_DEFAULT = 16;
export const RETRY_AFTER_FAILURE_MS_DEFAULT = 10_000;

/** The key of a resource in the manager's maps: `<kind>/<id>`. */
function keyOf(resource: OwnedResource): string {
  return `${resource.kind}/${resourceId(resource)}`;
}

export class OwnershipManager {
  /** Every owner key as the watch has it. */
  private readonly owners = new Map<string, OwnerRecord>();
  /** What this broker holds or is taking over or handing over. */
  private readonly local = new Map<string, LocalClaim>();
  /** Resources whose take-over failed, with when they may be claimed again. */
  private readonly failedUntilMs = new Map<string, number>();
  private watch: EtcdWatch | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly timers: Timers;

  constructor(private readonly options: OwnershipManagerOptions) {
    this.timers = options.timers ?? systemTimers;
  }

  /** Reads every owner key, watches them, and runs the first round. */
  async start(): Promise<void> {
    this.watch = await this.options.records.watch({
      onReset: (owners) => {
        this.owners.clear();
        for (const owner of owners) this.owners.set(keyOf(owner.resource), owner);
        this.changed();
      },
      onClaimed: (owner) => {
        this.owners.set(keyOf(owner.resource), owner);
        this.changed();
      },
      onReleased: (resource) => {
        this.owners.delete(keyOf(resource));
        this.changed();
      },
    });
    this.changed();
  }

  /** Something the assignment depends on changed (members, topics, owners): run a round soon. */
  changed(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.round().catch((error: unknown) => {
          // etcd unreachable, typically: the next change or the retry timer runs another round.
          this.options.log.warn("ownership: a round of claims and hand-overs failed; trying again", { error: String(error) });
          this.retrySoon();
        });
      } while (this.again && !this.stopped);
    })().finally(() => (this.running = undefined));
  }

  /**
   * The lease keeper has a valid lease again. `fresh`: etcd dropped the old one and every owner key with
   * it, so nothing held under it may be served: it is all closed, then claimed again.
   */
  async leaseRegained(fresh: boolean): Promise<void> {
    if (fresh) {
      const held = [...this.local.values()];
      for (const claim of held) claim.state = "leaving";
      await Promise.all(held.map((claim) => this.closeLocally(claim, "lease replaced")));
    }
    this.changed();
  }

  standing(resource: OwnedResource): Standing {
    const claim = this.local.get(keyOf(resource));
    if (claim !== undefined) {
      if (claim.state === "owned" && !this.leaseCovers(claim)) return { state: "leaving", epoch: claim.epoch };
      return { state: claim.state, epoch: claim.epoch };
    }
    const owner = this.owners.get(keyOf(resource));
    if (owner === undefined || owner.brokerId === this.options.selfId) return { state: "elsewhere", brokerId: -1 };
    return { state: "elsewhere", brokerId: owner.brokerId, epoch: owner.epoch };
  }

  /**
   * This broker's claim at `epoch` is still its own, under a lease valid now: nobody else can have claimed
   * the resource, so what it writes is what the next owner reads. That holds while the claim is taken over
   * (`loading`: the take-over's own writes, such as a partition's first segment of the epoch or a slot's
   * queued completions, are made then), `owned`, and `leaving` (the hand-over waits for the writes in flight
   * before the claim is released). Serving new requests is gated on `standing` being `owned`, not on this.
   */
  mayAct(resource: OwnedResource, epoch: number): boolean {
    const claim = this.local.get(keyOf(resource));
    return claim !== undefined && claim.closedAwaitingRelease !== true && claim.epoch === epoch && this.leaseCovers(claim);
  }

  /** The owner of a resource as far as this broker knows: itself while it holds it, -1 for none. */
  ownerOf(resource: OwnedResource): number {
    const claim = this.local.get(keyOf(resource));
    if (claim !== undefined) return claim.state === "leaving" ? -1 : this.options.selfId;
    const owner = this.owners.get(keyOf(resource));
    return owner === undefined || owner.brokerId === this.options.selfId ? -1 : owner.brokerId;
  }

  /** What this broker holds, for introspection. */
  held(): { resource: OwnedResource; state: LocalClaim["state"]; epoch: number }[] {
    return [...this.local.values()].map(({ resource, state, epoch }) => ({ resource, state, epoch }));
  }

  /** Every owner key as watched, for introspection. */
  allOwners(): OwnerRecord[] {
    return [...this.owners.values()];
  }

  /**
   * Stops claiming. `handOver`: closes everything held and deletes its owner keys, so that the other
   * brokers take over at once instead of after the lease's TTL (SIGTERM).
   */
  async stop(options: { handOver: boolean }): Promise<void> {
    this.stopped = true;
    await this.running;
    if (options.handOver) {
      const held = [...this.local.values()];
      for (const claim of held) claim.state = "leaving";
      await this.inTurns(held, (claim) => this.handOver(claim));
    }
    await this.watch?.close();
  }

  private leaseCovers(claim: LocalClaim): boolean {
    const { lease, clock } = this.options;
    return lease.leaseId === claim.leaseId && lease.isValid(clock.monotonicMs());
  }

  private retrySoon(): void {
    this.timers.after(1_000, () => this.changed());
  }

  /** One pass over every kind: what to claim, what to hand over. */
  private async round(): Promise<void> {
    const { selfId, lease, clock } = this.options;
    const leaseId = lease.leaseId;
    const live = this.options.liveBrokers();
    if (leaseId === undefined || !lease.isValid(clock.monotonicMs()) || !live.includes(selfId)) return;
    const nowMs = clock.monotonicMs();
    const claims: OwnedResource[] = [];
    const handOvers: LocalClaim[] = [];
    let waitingForFailed = false;
    for (const kind of KINDS) {
      const resources = this.options.resources(kind);
      const ids = resources.map(keyOf);
      const owners = new Map<string, number>();
      for (const id of ids) {
        const claim = this.local.get(id);
        const owner = claim !== undefined ? selfId : this.owners.get(id)?.brokerId;
        if (owner !== undefined) owners.set(id, owner);
      }
      const targets = assignOwners({ resources: ids, brokers: live, owners });
      const exists = new Set(ids);
      for (const [i, id] of ids.entries()) {
        const target = targets.get(id);
        const claim = this.local.get(id);
        if (claim !== undefined) {
          if ((claim.state === "owned" && target !== selfId) || claim.closedAwaitingRelease === true) handOvers.push(claim);
          continue;
        }
        if (target !== selfId || this.owners.has(id)) continue;
        const retryAtMs = this.failedUntilMs.get(id);
        if (retryAtMs !== undefined && nowMs < retryAtMs) {
          waitingForFailed = true;
          continue;
        }
        claims.push(resources[i]!);
      }
      // Resources that no longer exist (a deleted topic) are given back.
      for (const claim of this.local.values()) {
        if (claim.resource.kind === kind && claim.state === "owned" && !exists.has(keyOf(claim.resource))) handOvers.push(claim);
      }
    }
    for (const claim of handOvers) claim.state = "leaving";
    await this.inTurns(handOvers, (claim) => this.handOver(claim));
    await this.inTurns(claims, (resource) => this.claimAndOpen(resource, leaseId));
    if (waitingForFailed) this.timers.after(this.options.retryAfterFailureMs ?? RETRY_AFTER_FAILURE_MS_DEFAULT, () => this.changed());
  }

  private async claimAndOpen(resource: OwnedResource, leaseId: bigint): Promise<void> {
    const { records, selfId, host, clock, log } = this.options;
    const id = keyOf(resource);
    const startedMs = clock.monotonicMs();
    const outcome = await records.claim(resource, selfId, leaseId);
    // Held by someone else: the watch says so (or already did). The outcome is not written into `owners`:
    // its read may be older than a release the watch has delivered meanwhile, and would then stay stale.
    if (outcome.kind === "held") return;
    if (outcome.kind === "lease-gone") return; // the keeper replaces it, and says so (leaseRegained)
    const claim: LocalClaim = { resource, state: "loading", epoch: outcome.epoch, revision: outcome.revision, leaseId };
    this.local.set(id, claim);
    try {
      await host.acquire(resource, outcome.epoch);
    } catch (error) {
      log.error("ownership: taking over a resource failed; giving it back", { resource: id, epoch: outcome.epoch, error: String(error) });
      this.failedUntilMs.set(id, clock.monotonicMs() + (this.options.retryAfterFailureMs ?? RETRY_AFTER_FAILURE_MS_DEFAULT));
      claim.state = "leaving";
      await this.handOver(claim, { opened: false });
      return;
    }
    if (this.local.get(id) !== claim || claim.state !== "loading") return; // closed meanwhile (a fresh lease)
    claim.state = "owned";
    this.failedUntilMs.delete(id);
    this.options.onMove?.({ resource, direction: "acquired", epoch: claim.epoch, durationMs: clock.monotonicMs() - startedMs });
    log.info("ownership: took over", { resource: id, epoch: claim.epoch });
  }

  /** Closes a resource here, then deletes its owner key so that its target can claim it. */
  private async handOver(claim: LocalClaim, how: { opened: boolean } = { opened: true }): Promise<void> {
    const { records, clock, log } = this.options;
    const startedMs = clock.monotonicMs();
    if (how.opened && claim.closedAwaitingRelease !== true) await this.closeLocally(claim, "handed over");
    claim.closedAwaitingRelease = true;
    // A release that finds the key gone or someone else's is fine: the claim ended either way. One that
    // throws (etcd unreachable) leaves the claim closed here and its key in place: the next round retries,
    // and the key goes with the lease at the latest.
    await records.release(claim.resource, { leaseId: claim.leaseId, revision: claim.revision });
    this.local.delete(keyOf(claim.resource));
    if (how.opened) this.options.onMove?.({ resource: claim.resource, direction: "released", epoch: claim.epoch, durationMs: clock.monotonicMs() - startedMs });
    log.info("ownership: handed over", { resource: keyOf(claim.resource), epoch: claim.epoch });
  }

  /** Closes a resource held here; a failure to close is logged and the claim dropped all the same. */
  private async closeLocally(claim: LocalClaim, why: string): Promise<void> {
    try {
      await this.options.host.release(claim.resource);
    } catch (error) {
      this.options.log.error("ownership: closing a resource failed", { resource: keyOf(claim.resource), why, error: String(error) });
    }
    if (why === "lease replaced") this.local.delete(keyOf(claim.resource));
  }

  /** Runs `work` over `items`, `concurrency` at a time. */
  private async inTurns<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const lanes = Math.min(items.length, this.options.concurrency ?? OWNERSHIP_CONCURRENCY_DEFAULT);
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        while (next < items.length) await work(items[next++]!);
      }),
    );
  }
}
