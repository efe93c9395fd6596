/**
 * A lock in etcd, held under the holder's lease (docs/architecture.md, "Topic changes across brokers"):
 * taking it creates the key only if it is absent (one txn: create_revision == 0, then put under the
 * lease; else read the holder), so that exactly one broker holds it; the holder's lease ending (revoked,
 * or expired because the holder stopped or was cut off) deletes the key and frees the lock with no help
 * from the holder. Nothing is locked on the file system.
 *
 * A contender that finds the key held does not poll: it watches the key from the revision after the one
 * it read and tries again when the key is deleted (released, or gone with its lease).
 *
 * The key's create revision is the hold's **token**: each hold gets a higher one than every hold before
 * it, whoever made it. Release deletes the key only while its create revision is still the token, so a
 * holder whose lease ended can never delete its successor's key.
 *
 * One hold at a time per EtcdLock object (the caller queues its own users). A key found under this
 * broker's own lease is this lock object's earlier hold whose release failed, or a take whose answer was
 * lost (the write may have been applied): it is adopted with its create revision as the token.
 */
import { FatalError } from "../errors/errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdServerError, EtcdUnavailableError } from "./etcd/etcd-errors.ts";
import { EtcdWatch, type WatchOptions } from "./etcd/etcd-watch.ts";
import { clusterPrefix } from "./cluster-keys.ts";

export const ETCD_LOCK_FORMAT = "bunka-lock";
const ETCD_LOCK_VERSION = 1;
/** How long a take waits for the holder before it gives up (the request is answered with a retriable error). */
export const ETCD_LOCK_WAIT_MS_DEFAULT = 30_000;

/** The lock that serializes topic and broker-config changes across the brokers of a cluster. */
export function metadataLockKey(clusterId: string): string {
  return `${clusterPrefix(clusterId)}locks/metadata`;
}

/** The lock could not be taken: this broker's lease is not valid, etcd did not answer, or the wait timed out. */
export class LockUnavailableError extends Error {
  override readonly name = "LockUnavailableError";
}

export interface EtcdLockOptions {
  client: EtcdClient;
  key: string;
  selfId: number;
  /** This broker's lease as of now: its id (undefined before the first grant) and whether it may act under it. */
  lease(): { id: bigint | undefined; valid: boolean };
  log: Logger;
  nowMs(): number;
  waitMs?: number;
  watch?: WatchOptions;
}

export interface LockHold {
  /** The key's create revision: higher for every later hold, whoever makes it. */
  readonly token: bigint;
  readonly leaseId: bigint;
  /** Whether the lease the lock is held under is still valid by this broker's clock (and so the key still there). */
  valid(): boolean;
  /** Deletes the key if it is still this hold's; never throws (a key left behind goes with the lease). */
  release(): Promise<void>;
}

export class EtcdLock {
  private holding = false;
  /** How many times a take found the lock held and waited on a watch (for tests and metrics). */
  waits = 0;

  constructor(private readonly options: EtcdLockOptions) {}

  get key(): string {
    return this.options.key;
  }

  async acquire(what: string): Promise<LockHold> {
    if (this.holding) throw new FatalError(`the etcd lock ${this.options.key} was taken again while held (callers must queue)`);
    const { client, key, log } = this.options;
    const waitMs = this.options.waitMs ?? ETCD_LOCK_WAIT_MS_DEFAULT;
    const deadline = AbortSignal.timeout(waitMs);
    for (;;) {
      const lease = this.options.lease();
      if (lease.id === undefined || !lease.valid) throw new LockUnavailableError(`cannot take ${key} for ${what}: this broker's lease is not valid`);
      const value = JSON.stringify({ format: ETCD_LOCK_FORMAT, version: ETCD_LOCK_VERSION, brokerId: this.options.selfId, what, sinceMs: this.options.nowMs() });
      let outcome;
      try {
        outcome = await client.txn({
          compare: [{ key, target: "create", createRevision: 0n }],
          success: [{ op: "put", key, value, lease: lease.id }],
          failure: [{ op: "range", key }],
        });
      } catch (error) {
        // etcd refusing the put (the lease it names is gone) is not a bug here: the lease keeper replaces it.
        if (error instanceof EtcdServerError) throw new LockUnavailableError(`cannot take ${key} for ${what}: ${error.message}`, { cause: error });
        if (!(error instanceof EtcdUnavailableError)) throw error;
        if (!error.outcomeUnknown) throw new LockUnavailableError(`cannot take ${key} for ${what}: ${error.message}`, { cause: error });
        // The put may have been applied: read back, and adopt the key if it is under this lease.
        const read = await client.range(key).catch((readError: unknown) => {
          throw new LockUnavailableError(`cannot take ${key} for ${what}: ${String(readError)}`, { cause: readError });
        });
        const kv = read.kvs[0];
        if (kv !== undefined && kv.lease === lease.id) return this.hold(kv.createRevision, lease.id);
        continue;
      }
      if (outcome.succeeded) return this.hold(outcome.header.revision, lease.id);
      const read = outcome.responses[0];
      const holder = read?.op === "range" ? read.kvs[0] : undefined;
      if (holder === undefined) continue; // released between the compare and the read: try again
      if (holder.lease === lease.id) {
        log.warn("adopting the metadata lock left under this broker's lease by an earlier hold", { key, token: String(holder.createRevision) });
        return this.hold(holder.createRevision, lease.id);
      }
      this.waits++;
      log.debug("waiting for the metadata lock", { key, what, holder: holder.value });
      await this.waitForDelete(outcome.header.revision + 1n, deadline, what);
    }
  }

  private hold(token: bigint, leaseId: bigint): LockHold {
    this.holding = true;
    const { client, key, log } = this.options;
    let released = false;
    return {
      token,
      leaseId,
      valid: () => {
        const lease = this.options.lease();
        return !released && lease.valid && lease.id === leaseId;
      },
      release: async () => {
        if (released) return;
        released = true;
        this.holding = false;
        try {
          await client.txn({ compare: [{ key, target: "create", createRevision: token }], success: [{ op: "delete", key }], failure: [] });
        } catch (error) {
          // The next take adopts it (same lease), or it goes with the lease.
          log.warn("the metadata lock could not be released; it is freed when this broker's lease ends or taken again by it", { key, error: String(error) });
        }
      },
    };
  }

  /** Resolves once the key is deleted at or after `fromRevision`; rejects with LockUnavailableError at the deadline. */
  private async waitForDelete(fromRevision: bigint, deadline: AbortSignal, what: string): Promise<void> {
    const { client, key, log } = this.options;
    let done!: () => void;
    const deleted = new Promise<void>((resolve) => (done = resolve));
    const watch = new EtcdWatch(
      client,
      { key, startRevision: fromRevision },
      {
        onEvents: (events) => {
          if (events.some((event) => event.type === "delete")) done();
        },
        onCompacted: async () => {
          const read = await client.range(key);
          if (read.kvs.length === 0) done();
          return read.header.revision + 1n;
        },
      },
      { log, ...this.options.watch },
    );
    try {
      if (deadline.aborted) throw new LockUnavailableError(`gave up waiting for ${key} for ${what}`);
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(new LockUnavailableError(`gave up waiting for ${key} for ${what} after ${this.options.waitMs ?? ETCD_LOCK_WAIT_MS_DEFAULT} ms: another broker holds it`));
        deadline.addEventListener("abort", onAbort, { once: true });
        deleted.then(() => {
          deadline.removeEventListener("abort", onAbort);
          resolve();
        });
      });
    } finally {
      await watch.close();
    }
  }
}
