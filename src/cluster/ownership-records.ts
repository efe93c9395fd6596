/**
 * Ownership records in etcd (docs/architecture.md, "Ownership and cluster mode"): each partition,
 * transaction slot and group slot has at most one owner, the key `/bunka/<clusterId>/owners/<kind>/<id>`
 * attached to the owner's lease.
 *
 * - A claim creates the key only if it does not exist (txn on create_revision == 0), under the claimer's
 *   lease, and in the same txn raises the resource's epoch key (`/bunka/<clusterId>/epochs/<kind>/<id>`,
 *   no lease) by one, guarded by that key's mod_revision. The owner record carries that number: the
 *   owner's **fencing epoch**, Kafka's int32 leader epoch of a partition or coordinator epoch of a slot.
 *   Each claim of a resource gets an epoch above every earlier claim's, whoever made it, and epochs stay
 *   small and dense (etcd's revision, which grows with every write of the whole cluster, would not fit
 *   an int32 for long). A claim that lost the race for the epoch key only (someone claimed and released
 *   in between, or the claim was the first try, made as if the resource had never been claimed) is made
 *   again with the epoch key the failed txn read.
 * - The key goes when its owner releases it (a delete guarded by the owner's lease and the key's
 *   create_revision, so that a former owner cannot delete its successor's key) or when the owner's lease
 *   ends, which is what makes a crashed owner's resources free again.
 * - A watch on the prefix tells every broker when an owner key goes away (and who held it).
 *
 * What a claim or a release found is data; only an etcd that gave no answer is an error.
 */
import { FatalError } from "../errors/errors.ts";
import type { Logger } from "../platform/logger.ts";
import { epochKey, ownerKey, ownersPrefix, resourceOfKey, type OwnedResource, type ResourceKind } from "./cluster-keys.ts";
import { decodeEpochRecord, decodeOwnerRecord, encodeEpochRecord, encodeOwnerRecord } from "./cluster-records.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdServerError, EtcdUnavailableError } from "./etcd/etcd-errors.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";
import type { KeyValue } from "./etcd/gateway-codec.ts";

/** Who owns a resource, under which lease, at which epoch. */
export interface OwnerRecord {
  resource: OwnedResource;
  brokerId: number;
  leaseId: bigint;
  /** The claim's fencing epoch (1 and up). */
  epoch: number;
  /** The owner key's create_revision: what a release compares, so that it deletes this claim only. */
  revision: bigint;
}

/** What a release needs to know about the claim it ends. */
export interface ClaimHandle {
  leaseId: bigint;
  revision: bigint;
}

export type ClaimOutcome =
  /** This lease owns the resource at `epoch` (just claimed, or claimed before under the same lease). */
  | { kind: "claimed"; epoch: number; revision: bigint }
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

/** Claims that lose only the race for the epoch key are made again; this many tries is a storm, not bad luck. */
const EPOCH_RACE_TRIES_MAX = 32;

function ownerOf(clusterId: string, kv: KeyValue): OwnerRecord | null {
  const resource = resourceOfKey(clusterId, kv.key);
  if (resource === undefined) return null;
  const value = decodeOwnerRecord(kv.key, kv.value);
  return { resource, brokerId: value.brokerId, leaseId: kv.lease, epoch: value.epoch, revision: kv.createRevision };
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
    const epochsKey = epochKey(this.clusterId, resource);
    // The first try assumes a resource never claimed (one round trip for those); a failed compare reads
    // the epoch key back, and the next try uses it.
    let epochKv: KeyValue | undefined;
    for (let tries = 0; tries < EPOCH_RACE_TRIES_MAX; tries++) {
      const last = epochKv === undefined ? 0 : decodeEpochRecord(epochsKey, epochKv.value);
      if (last >= 0x7fffffff) throw new FatalError(`etcd key ${epochsKey}: epoch ${last} cannot grow within an int32`);
      const epoch = last + 1;
      let existing: KeyValue | undefined;
      try {
        const answer = await this.client.txn({
          compare: [
            { key, target: "create", createRevision: 0n },
            { key: epochsKey, target: "mod", modRevision: epochKv?.modRevision ?? 0n },
          ],
          success: [
            { op: "put", key, value: encodeOwnerRecord({ brokerId, epoch }), lease: leaseId },
            { op: "put", key: epochsKey, value: encodeEpochRecord(epoch) },
          ],
          failure: [
            { op: "range", key },
            { op: "range", key: epochsKey },
          ],
        });
        // The txn's writes all happen at its one revision, so that is the owner key's create_revision.
        if (answer.succeeded) return { kind: "claimed", epoch, revision: answer.header.revision };
        const ranges = answer.responses.map((r) => (r.op === "range" ? r.kvs[0] : undefined));
        existing = ranges[0];
        if (existing === undefined) {
          // No owner, but the epoch key moved since it was read: someone claimed and released. Again.
          epochKv = ranges[1];
          continue;
        }
      } catch (error) {
        if (error instanceof EtcdServerError && error.leaseNotFound) return { kind: "lease-gone" };
        if (!(error instanceof EtcdUnavailableError && error.outcomeUnknown)) throw error;
        existing = (await this.client.range(key)).kvs[0];
        if (existing === undefined) throw error;
      }
      const owner = ownerOf(this.clusterId, existing)!;
      if (existing.lease === leaseId) return { kind: "claimed", epoch: owner.epoch, revision: owner.revision };
      return { kind: "held", owner };
    }
    throw new FatalError(`etcd: claiming ${key} lost the race for its epoch key ${EPOCH_RACE_TRIES_MAX} times in a row`);
  }

  /**
   * Releases a claim: deletes the key only while it is still this claim (same lease, same create_revision).
   * Resolves false when it was not (already released, expired, or claimed again by someone else).
   */
  async release(resource: OwnedResource, claim: ClaimHandle): Promise<boolean> {
    const key = ownerKey(this.clusterId, resource);
    try {
      const answer = await this.client.txn({
        compare: [
          { key, target: "create", createRevision: claim.revision },
          { key, target: "lease", lease: claim.leaseId },
        ],
        success: [{ op: "delete", key }],
      });
      return answer.succeeded;
    } catch (error) {
      if (!(error instanceof EtcdUnavailableError && error.outcomeUnknown)) throw error;
      const current = (await this.client.range(key)).kvs[0];
      if (current !== undefined && current.createRevision === claim.revision && current.lease === claim.leaseId) throw error;
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
