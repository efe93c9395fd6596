/**
 * Ownership records in etcd (docs/architecture.md, "Ownership and cluster mode"): each partition,
 * transaction slot and group slot has at most one owner, the key `/bunka/<clusterId>/owners/<kind>/<id>`
 * attached to the owner's lease.
 *
 * - A claim creates the key only if it does not exist (txn on create_revision == 0), under the claimer's
 *   lease. The key's create_revision is the owner's **fencing epoch**: etcd's revision grows with every
 *   write, so each new claim of a resource has a larger epoch than every claim before it, whoever made it.
 * - The key goes when its owner releases it (a delete guarded by the owner's lease and epoch, so that a
 *   former owner cannot delete its successor's key) or when the owner's lease ends, which is what makes a
 *   crashed owner's resources free again.
 * - A watch on the prefix tells every broker when an owner key goes away (and who held it).
 *
 * What a claim or a release found is data; only an etcd that gave no answer is an error.
 */
import { FatalError } from "../errors/errors.ts";
import type { Logger } from "../platform/logger.ts";
import { ownerKey, ownersPrefix, resourceOfKey, type OwnedResource, type ResourceKind } from "./cluster-keys.ts";
import { decodeOwnerRecord, encodeOwnerRecord } from "./cluster-records.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdServerError, EtcdUnavailableError } from "./etcd/etcd-errors.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";
import type { KeyValue } from "./etcd/gateway-codec.ts";

/** Who owns a resource, under which lease, at which epoch. */
export interface OwnerRecord {
  resource: OwnedResource;
  brokerId: number;
  leaseId: bigint;
  /** The owner key's create_revision. */
  epoch: bigint;
}

export type ClaimOutcome =
  /** This lease owns the resource at `epoch` (just claimed, or claimed before under the same lease). */
  | { kind: "claimed"; epoch: bigint }
  /** Someone else owns it. */
  | { kind: "held"; owner: OwnerRecord }
  /** The claimer's lease no longer exists: nothing can be claimed under it. */
  | { kind: "lease-gone" };

export interface OwnerWatchHandlers {
  /** A resource got an owner. */
  onClaimed?(owner: OwnerRecord): void;
  /** An owner key went away (released, or its lease ended); `previous` is who held it. */
  onReleased(resource: OwnedResource, previous: OwnerRecord | null): void;
  /** Everything was read again (at the start, and after a compaction made the watch miss events). */
  onReset?(owners: OwnerRecord[]): void;
}

function ownerOf(clusterId: string, kv: KeyValue): OwnerRecord | null {
  const resource = resourceOfKey(clusterId, kv.key);
  if (resource === undefined) return null;
  return { resource, brokerId: decodeOwnerRecord(kv.key, kv.value).brokerId, leaseId: kv.lease, epoch: kv.createRevision };
}

export class OwnershipRecords {
  constructor(
    private readonly client: EtcdClient,
    private readonly clusterId: string,
    private readonly log: Logger,
  ) {}

  /**
   * Claims `resource` for `brokerId` under `leaseId`. Repeating a claim that succeeded (a retry after an
   * unanswered request) answers `claimed` with the same epoch.
   */
  async claim(resource: OwnedResource, brokerId: number, leaseId: bigint): Promise<ClaimOutcome> {
    const key = ownerKey(this.clusterId, resource);
    let existing: KeyValue | undefined;
    try {
      const answer = await this.client.txn({
        compare: [{ key, target: "create", createRevision: 0n }],
        success: [{ op: "put", key, value: encodeOwnerRecord({ brokerId }), lease: leaseId }],
        failure: [{ op: "range", key }],
      });
      // The put is the txn's only write, so the revision it created is the key's create_revision.
      if (answer.succeeded) return { kind: "claimed", epoch: answer.header.revision };
      const range = answer.responses[0];
      existing = range?.op === "range" ? range.kvs[0] : undefined;
    } catch (error) {
      if (error instanceof EtcdServerError && error.leaseNotFound) return { kind: "lease-gone" };
      if (!(error instanceof EtcdUnavailableError && error.outcomeUnknown)) throw error;
      existing = (await this.client.range(key)).kvs[0];
      if (existing === undefined) throw error;
    }
    // The failure branch read the key in the same revision the compare failed at, so it exists.
    if (existing === undefined) throw new FatalError(`etcd txn on ${key} failed its compare but the key is not there`);
    if (existing.lease === leaseId) return { kind: "claimed", epoch: existing.createRevision };
    return { kind: "held", owner: ownerOf(this.clusterId, existing)! };
  }

  /**
   * Releases a claim: deletes the key only while it is still this claim (same lease, same epoch). Resolves
   * false when it was not (already released, expired, or claimed again by someone else).
   */
  async release(resource: OwnedResource, claim: { leaseId: bigint; epoch: bigint }): Promise<boolean> {
    const key = ownerKey(this.clusterId, resource);
    try {
      const answer = await this.client.txn({
        compare: [
          { key, target: "create", createRevision: claim.epoch },
          { key, target: "lease", lease: claim.leaseId },
        ],
        success: [{ op: "delete", key }],
      });
      return answer.succeeded;
    } catch (error) {
      if (!(error instanceof EtcdUnavailableError && error.outcomeUnknown)) throw error;
      const current = (await this.client.range(key)).kvs[0];
      if (current !== undefined && current.createRevision === claim.epoch && current.lease === claim.leaseId) throw error;
      return true;
    }
  }

  /** The current owner of a resource, or null. */
  async owner(resource: OwnedResource): Promise<OwnerRecord | null> {
    const kv = (await this.client.range(ownerKey(this.clusterId, resource))).kvs[0];
    return kv === undefined ? null : ownerOf(this.clusterId, kv);
  }

  /** Every owner (of one kind, or all), and the revision they were read at. */
  async list(kind?: ResourceKind): Promise<{ owners: OwnerRecord[]; revision: bigint }> {
    const answer = await this.client.range(ownersPrefix(this.clusterId, kind), { prefix: true });
    const owners: OwnerRecord[] = [];
    for (const kv of answer.kvs) {
      const owner = ownerOf(this.clusterId, kv);
      if (owner !== null) owners.push(owner);
    }
    return { owners, revision: answer.header.revision };
  }

  /** An owner record, or null (logged) when the value cannot be read: a release must still be reported. */
  private readable(kv: KeyValue | null): OwnerRecord | null {
    if (kv === null) return null;
    try {
      return ownerOf(this.clusterId, kv);
    } catch (error) {
      this.log.error("etcd: an owner record cannot be read", { key: kv.key, error: String(error) });
      return null;
    }
  }

  /**
   * Watches the owner keys (of one kind, or all): reads them (`onReset`), then reports every claim and
   * release from the revision after that read. Resolves once the read is done and the watch started.
   */
  async watch(handlers: OwnerWatchHandlers, kind?: ResourceKind): Promise<EtcdWatch> {
    const reload = async (): Promise<bigint> => {
      const { owners, revision } = await this.list(kind);
      handlers.onReset?.(owners);
      return revision + 1n;
    };
    const startRevision = await reload();
    return new EtcdWatch(
      this.client,
      { key: ownersPrefix(this.clusterId, kind), prefix: true, prevKv: true, startRevision },
      {
        onEvents: (events) => {
          for (const event of events) {
            const resource = resourceOfKey(this.clusterId, event.kv.key);
            if (resource === undefined) continue;
            if (event.type === "delete") handlers.onReleased(resource, this.readable(event.prevKv));
            else if (event.kv.version === 1n) {
              // Version 1 is the put that created the key: a claim (a later put would be a rewrite).
              const owner = this.readable(event.kv);
              if (owner !== null) handlers.onClaimed?.(owner);
            }
          }
        },
        onCompacted: reload,
      },
      { log: this.log },
    );
  }
}
