/**
 * The partitions this broker leads: opened (and recovered) at start-up, opened on first use after a topic
 * is created or grows, closed before a topic is deleted, reconfigured when its configs change, and kept in
 * shape by a background loop (retention, producer-state snapshots, producer expiry) that does bounded work.
 *
 * The partition side of transactions for the transaction coordinator: `writeMarker` (an end-transaction
 * marker on a partition led here, resolved once durable), `fenceProducer` (an epoch bump on every local
 * partition), and the TransactionVerifier every partition asks before a transactional append (looked
 * up at each ask through the function given at construction; without one, no partition is in any
 * transaction).
 *
 * A partition whose open finds its data damaged (a CorruptStateError: docs/operations.md, "Damaged data")
 * is refused, not retried: the refusal goes into the damage registry, `refusal` tells handlers to answer
 * KAFKA_STORAGE_ERROR, `get` rejects without reading the files again, and the broker starts and serves
 * the other partitions. Nothing of the damaged files is changed, so that the operator can copy them away.
 *
 * Cluster mode (`clusterMode: true`; docs/architecture.md, "Files of a leader epoch"): nothing is opened
 * on demand. `openAll` opens nothing, `get` answers undefined for a partition not acquired here (the
 * handlers answer NOT_LEADER_OR_FOLLOWER around it), and `acquire(topic, partition, epoch)` is the only
 * way in: a take-over that recovers the partition from the shared files afresh and leads it at `epoch`,
 * writing only that epoch's files. `release` is the hand-over.
 */
import { join } from "node:path";
import { resolveTopicConfigWithDefaults } from "../domain/topic-config.ts";
import { noTransactions, type TransactionVerifier } from "../domain/txn/verifier.ts";
import { CorruptStateError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import type { TimestampType } from "../protocol/records/record-batch.ts";
import { DEFAULT_LOG_CONFIG, type LogConfig } from "../storage/log/partition-log.ts";
import { type SegmentDamage, SegmentDamageRegistry } from "../storage/log/segment-damage.ts";
import { Partition, type MarkerOutcome, type TxnMarker } from "../storage/partition.ts";
import type { TopicRecord, TopicStore } from "../storage/topic-store.ts";
import type { BrokerConfig } from "./config.ts";
import type { RuntimeConfig } from "./runtime-config.ts";

interface OpenPartition {
  /** The topic's incarnation whose configs are applied; a newer one means reconfigure. */
  incarnation: number;
  topicId: string;
  partition: Promise<Partition>;
}

export interface PartitionManagerOptions {
  /** How often the background loop runs (log.retention.check.interval.ms is 5 min in Apache). */
  maintenanceIntervalMs?: number;
}

/** How the manager hosts partitions: single-broker mode (the default) or cluster mode. */
export interface PartitionHosting {
  /** Partitions are opened only by `acquire`, at a leader epoch (see the file comment). */
  clusterMode?: boolean;
  /**
   * Whether this broker may still write a partition it acquired at `epoch` (the ownership's mayAct):
   * asked right before each unlink and rename of retention and cleaner swaps, which file names cannot
   * fence. Default: always.
   */
  mayWrite?: (topic: string, partition: number, epoch: number) => boolean;
}

export class PartitionManager {
  private readonly open = new Map<string, OpenPartition>();
  /**
   * Partitions taken out of `open` whose close has not finished, by key. Their files are still open: a
   * delete of the topic must wait for them before its directories go away, and so must `close`.
   */
  private readonly closing = new Map<string, Set<Promise<void>>>();
  /**
   * Topics being deleted, with how many deletes are in progress: their partitions must not be opened
   * again until the last one says the delete is over (concurrent DeleteTopics of one topic overlap).
   */
  private readonly deleting = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private maintenance: Promise<void> | undefined;
  private closed = false;
  /** What every partition asks; it looks the verifier up at each ask (see the constructor). */
  private readonly partitionVerifier: TransactionVerifier = {
    verifyBatch: (producerId, producerEpoch, topic, partition) => this.transactionVerifier().verifyBatch(producerId, producerEpoch, topic, partition),
  };

  /** What is known of damaged data in the partitions (refusals at open, damage reads and the scrubber found). */
  readonly damage: SegmentDamageRegistry;

  constructor(
    private readonly fs: Fs,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly config: BrokerConfig,
    private readonly topics: TopicStore,
    damage?: SegmentDamageRegistry,
    private readonly hosting: PartitionHosting = {},
    /**
     * The transaction coordinator's verifier, which every partition asks before a transactional append.
     * A lookup, asked at each append, because the coordinator is built after the partitions (it writes
     * its markers and fences through them): until it exists the lookup answers `noTransactions`, and no
     * partition is in any transaction. Default: never any transaction.
     */
    private readonly transactionVerifier: () => TransactionVerifier = () => noTransactions,
    /**
     * The broker-level topic defaults in effect (RuntimeConfig), read whenever a topic's configs are
     * resolved. Default: the static ones of `config`.
     */
    private readonly runtimeConfig: Pick<RuntimeConfig, "topicDefaults"> = { topicDefaults: () => config.topicConfigDefaults },
  ) {
    this.damage = damage ?? new SegmentDamageRegistry(clock, log);
  }

  /** Cluster mode: partitions are opened only by `acquire`. */
  get clusterMode(): boolean {
    return this.hosting.clusterMode === true;
  }

  /**
   * Cluster mode's take-over: recovers the partition from the shared files as at start-up (whatever this
   * process had open of it before is closed first, and what it knew of its damage forgotten: the files
   * are read afresh) and makes it leader at `epoch`, which resolves once the epoch is recorded and its
   * first segment durable (Partition.open with `leaderEpoch`). After it, `get` returns the partition.
   * Rejects (and `get` keeps answering undefined) when the topic or partition does not exist, it is
   * being deleted, its data is damaged (CorruptStateError, recorded as a refusal), or `epoch` is below
   * the one its files record (CorruptStateError: a newer leader exists).
   */
  async acquire(topicName: string, partition: number, epoch: number): Promise<void> {
    if (!this.clusterMode) throw new Error("acquire is cluster mode's: this partition manager opens partitions on demand");
    const topic = this.topics.get(topicName);
    if (!topic || !Number.isInteger(partition) || partition < 0 || partition >= topic.partitions) {
      throw new Error(`partition ${topicName}-${partition} does not exist`);
    }
    if (this.deleting.has(topicName)) throw new Error(`topic ${topicName} is being deleted`);
    if (this.closed) throw new Error("the partition manager is closed");
    const key = `${topicName}-${partition}`;
    await this.release(topicName, partition);
    this.damage.forget(key);
    await this.openEntry(topic, partition, epoch);
  }

  /** Why the partition was refused at open (its data is damaged), if it was: handlers answer KAFKA_STORAGE_ERROR. */
  refusal(topicName: string, partition: number): SegmentDamage | undefined {
    return this.damage.refusal(`${topicName}-${partition}`);
  }

  /**
   * Appends an end-transaction marker to a partition led here and resolves once it is durable (see
   * Partition.appendMarker). UNKNOWN_TOPIC_OR_PARTITION when the partition does not exist or is being
   * deleted.
   */
  async writeMarker(topic: string, partition: number, marker: TxnMarker): Promise<MarkerOutcome> {
    const target = await this.get(topic, partition);
    if (target === undefined || target.closing) {
      // Cluster mode: a partition that exists but is not (or not yet, or no longer) led here is retried,
      // never dropped as gone: a lost marker would pin its last stable offset for good.
      const record = this.topics.get(topic);
      if (this.clusterMode && record !== undefined && partition >= 0 && partition < record.partitions) {
        return { ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, message: `${topic}-${partition} is not led here` };
      }
      return { ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message: `${topic}-${partition} is not hosted here` };
    }
    const epoch = target.leaderEpoch;
    const mayWrite = this.hosting.mayWrite;
    if (mayWrite !== undefined && !mayWrite(topic, partition, epoch)) {
      return { ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, message: `${topic}-${partition} is being handed over` };
    }
    const outcome = await target.appendMarker(marker);
    // Durable, but perhaps in files a successor has fenced off (the lease lapsed meanwhile): retried at
    // the partition's current leader, where a repeat of the same decision's marker is harmless.
    if (outcome.ok && mayWrite !== undefined && !mayWrite(topic, partition, epoch)) {
      return { ok: false, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, message: `${topic}-${partition} was handed over while its marker was written` };
    }
    return outcome;
  }

  /**
   * Raises a producer's epoch on every partition open here (InitProducerId fenced its previous session,
   * or a peer's fence log says so). Partitions without state for the producer are left alone.
   */
  async fenceProducer(producerId: number, newEpoch: number): Promise<void> {
    for (const entry of [...this.open.values()]) {
      const partition = await entry.partition.catch(() => undefined);
      if (partition === undefined || partition.closing) continue;
      partition.fenceProducer(producerId, newEpoch);
    }
  }

  /** Opens every partition of every topic, so that crash recovery happens now and problems surface now. */
  async openAll(onProgress?: (done: number, total: number) => void): Promise<void> {
    // Cluster mode opens a partition only when it is acquired.
    if (this.clusterMode) return;
    const all = this.topics.list().flatMap((t) => Array.from({ length: t.partitions }, (_, p) => [t, p] as const));
    let done = 0;
    for (const [topic, partition] of all) {
      // A damaged partition is refused (recorded by `get`); the broker starts and serves the others.
      await this.get(topic.name, partition).catch((error: unknown) => {
        if (!(error instanceof CorruptStateError)) throw error;
      });
      onProgress?.(++done, all.length);
    }
  }

  startMaintenance(options: PartitionManagerOptions = {}): void {
    const intervalMs = options.maintenanceIntervalMs ?? 30_000;
    this.timer = setInterval(() => {
      if (this.maintenance) return; // the previous pass is still running: skip, do not pile up
      this.maintenance = this.runMaintenance().finally(() => (this.maintenance = undefined));
    }, intervalMs);
    this.timer.unref?.();
  }

  /** Says what crash recovery did to a partition's log, when it did anything beyond a clean open. */
  private reportRecovery(partition: Partition): void {
    const report = partition.log.recoveryReport;
    if (report.completedSwap !== undefined || report.removedCleanedFiles.length > 0) {
      // A kill during a cleaning pass: either its swap had committed (and is now complete) or it had not
      // (and its half-written files are gone); either way the log holds one whole version of its segments.
      this.log.warn("recovered an interrupted log cleaner pass", {
        partition: `${partition.topic}-${partition.partition}`,
        ...(report.completedSwap === undefined
          ? {}
          : { completedSwapOfSegment: report.completedSwap.baseOffset, replacedSegments: report.completedSwap.replaced.length }),
        ...(report.removedCleanedFiles.length === 0 ? {} : { removedUncommittedFiles: report.removedCleanedFiles.length }),
      });
    }
    // A partition opened for the first time (a topic just created or grown) had no shutdown to recover from.
    if ((report.cleanShutdown || report.created) && !report.truncated && report.rebuiltIndexes.length === 0) return;
    const fields: Record<string, unknown> = {
      partition: `${partition.topic}-${partition.partition}`,
      cleanShutdown: report.cleanShutdown,
      scannedSegments: report.scannedSegments.length,
      rebuiltIndexes: report.rebuiltIndexes.length,
      logEndOffset: partition.log.logEndOffset,
    };
    if (report.truncated) {
      fields.truncatedFile = report.truncated.file;
      fields.truncatedAtPosition = report.truncated.position;
      fields.truncatedBytes = report.truncated.bytes;
      fields.truncatedReason = report.truncated.reason;
      this.log.warn("recovered a partition after an unclean shutdown: torn tail truncated", fields);
    } else {
      this.log.info("recovered a partition after an unclean shutdown", fields);
    }
  }

  /**
   * The partition, opened if needed; undefined when the topic or partition does not exist. In cluster mode
   * nothing is opened here: undefined unless the partition was acquired (and not released) here.
   */
  async get(topicName: string, partition: number): Promise<Partition | undefined> {
    const topic = this.topics.get(topicName);
    if (!topic || !Number.isInteger(partition) || partition < 0 || partition >= topic.partitions) return undefined;
    if (this.deleting.has(topicName)) return undefined;
    const key = `${topicName}-${partition}`;
    const refused = this.damage.refusal(key);
    if (refused !== undefined) throw new CorruptStateError(join(this.config.dataDir, key, refused.file), refused.reason);
    const existing = this.open.get(key);
    if (existing && existing.topicId !== topic.topicId) {
      // A partition of an earlier incarnation of the topic: it must not keep its files open.
      this.open.delete(key);
      await this.closeEntry(key, existing).catch(() => {});
      if (this.clusterMode) return undefined;
      return this.get(topicName, partition);
    }
    if (existing) {
      if (existing.incarnation !== topic.incarnation) {
        existing.incarnation = topic.incarnation;
        const { logConfig, timestampType } = this.logConfigOf(topic);
        (await existing.partition).setConfig(logConfig, timestampType);
      }
      return existing.partition;
    }
    if (this.clusterMode) return undefined;
    return this.openEntry(topic, partition, undefined);
  }

  /** Opens the partition into `open` (at `leaderEpoch` in cluster mode), recording a refusal for damage. */
  private openEntry(topic: TopicRecord, partition: number, leaderEpoch: number | undefined): Promise<Partition> {
    if (this.closed) throw new Error("the partition manager is closed");
    const topicName = topic.name;
    const key = `${topicName}-${partition}`;
    const { logConfig, timestampType } = this.logConfigOf(topic);
    const mayWrite = this.hosting.mayWrite;
    const opening = Partition.open({
      fs: this.fs,
      clock: this.clock,
      topic: topicName,
      partition,
      dir: join(this.config.dataDir, key),
      logConfig,
      timestampType,
      warn: (message, fields) => this.log.warn(message, fields),
      verifier: this.partitionVerifier,
      ...(leaderEpoch === undefined ? {} : { leaderEpoch }),
      ...(mayWrite === undefined || leaderEpoch === undefined ? {} : { mayWrite: () => mayWrite(topicName, partition, leaderEpoch) }),
    });
    void opening.then((p) => this.reportRecovery(p), () => {});
    const entry: OpenPartition = { incarnation: topic.incarnation, topicId: topic.topicId, partition: opening };
    this.open.set(key, entry);
    opening.catch((error: unknown) => {
      // Only this entry: the key may already name a newer opening of the partition.
      if (this.open.get(key) === entry) this.open.delete(key);
      if (error instanceof CorruptStateError) {
        const dir = join(this.config.dataDir, key);
        const file = error.path.startsWith(dir + "/") ? error.path.slice(dir.length + 1) : error.path;
        const reason = error.reason;
        this.damage.record({ partition: key, file, position: positionIn(reason), offset: -1, reason, foundBy: "open", refused: true });
      }
    });
    return opening;
  }

  /** Partitions currently open (for metrics and introspection). */
  /**
   * The broker-level topic defaults changed (RuntimeConfig.onChange): every open partition, and every
   * one still opening once it is open, takes up its topic's configs resolved with the new defaults, as
   * `get` does after a change of the topic's own configs. Nothing already written is rewritten.
   */
  async applyTopicDefaults(): Promise<void> {
    await Promise.all(
      [...this.open.entries()].map(async ([key, entry]) => {
        const partition = await entry.partition.catch(() => undefined);
        const topic = this.topics.get(topicOfKey(key));
        if (partition === undefined || partition.closing || topic === undefined || topic.topicId !== entry.topicId) return;
        const { logConfig, timestampType } = this.logConfigOf(topic);
        partition.setConfig(logConfig, timestampType);
      }),
    );
  }

  async openPartitions(): Promise<Partition[]> {
    return Promise.all([...this.open.values()].map((o) => o.partition));
  }

  /**
   * Closes the partitions of a topic before its directories are removed (DeleteTopics), and keeps them
   * closed until `topicDeleted` says the delete is over.
   */
  async closeTopic(topicName: string): Promise<void> {
    this.deleting.set(topicName, (this.deleting.get(topicName) ?? 0) + 1);
    // The topic's files go: so does what was known of their damage (a re-created topic starts clean).
    for (const key of this.damage.damagedPartitions()) if (topicOfKey(key) === topicName) this.damage.forget(key);
    for (const [key, entry] of this.open) {
      if (topicOfKey(key) !== topicName) continue;
      this.open.delete(key);
      void this.closeEntry(key, entry).catch(() => {});
    }
    // Also the closes that another caller (a concurrent delete of the same topic) started: the directories
    // must not be renamed away while any partition of the topic still has files open in them.
    const closes = [...this.closing].filter(([key]) => topicOfKey(key) === topicName).flatMap(([, set]) => [...set]);
    const failures = (await Promise.allSettled(closes)).filter((r): r is PromiseRejectedResult => r.status === "rejected");
    for (const failure of failures) {
      // The files are closed whatever failed (the final snapshot, typically), and the data is being deleted.
      this.log.warn("closing a partition of a topic being deleted failed", { topic: topicName, error: String(failure.reason) });
    }
  }

  /**
   * Closes one partition because its ownership moves to another broker (cluster mode's hand-over):
   * resolves once its files are closed, after the appends in flight and its final producer-state
   * snapshot, so that the next owner's recovery reads everything this broker wrote. In single-broker mode
   * the next `get` opens it again, with recovery; in cluster mode only the next `acquire` does.
   */
  async release(topicName: string, partition: number): Promise<void> {
    const key = `${topicName}-${partition}`;
    const entry = this.open.get(key);
    if (entry !== undefined) {
      this.open.delete(key);
      void this.closeEntry(key, entry).catch(() => {});
    }
    await Promise.all([...(this.closing.get(key) ?? [])]);
  }

  /** Ends what `closeTopic` started; call it exactly once per `closeTopic` call, whatever happened. */
  topicDeleted(topicName: string): void {
    const count = (this.deleting.get(topicName) ?? 0) - 1;
    if (count > 0) this.deleting.set(topicName, count);
    else this.deleting.delete(topicName);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.maintenance;
    const entries = [...this.open];
    this.open.clear();
    for (const [key, entry] of entries) void this.closeEntry(key, entry).catch(() => {});
    const closes = [...this.closing.values()].flatMap((set) => [...set]);
    const results = await Promise.allSettled(closes);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  /** Closes a partition taken out of `open` (once it has opened), tracked in `closing` until done. */
  private closeEntry(key: string, entry: OpenPartition): Promise<void> {
    const done = entry.partition.then(
      (p) => p.close(),
      () => {}, // it never opened: nothing to close
    );
    let set = this.closing.get(key);
    if (set === undefined) this.closing.set(key, (set = new Set()));
    set.add(done);
    const untrack = () => {
      set.delete(done);
      if (set.size === 0 && this.closing.get(key) === set) this.closing.delete(key);
    };
    done.then(untrack, untrack);
    return done;
  }

  /**
   * Retention, producer expiry and snapshots for every open partition, one partition at a time. A partition
   * closed meanwhile (its topic deleted, released to another broker, the broker stopping) is passed over,
   * also when it closes half-way through its own steps: what is left of it is nobody's to maintain.
   */
  async runMaintenance(): Promise<void> {
    const nowMs = this.clock.nowMs();
    for (const entry of [...this.open.values()]) {
      const partition = await entry.partition;
      if (partition.log.failed || partition.log.closed) continue;
      try {
        await this.maintain(partition, nowMs);
      } catch (error) {
        if (partition.log.closed && partition.log.failed === undefined) continue;
        throw error;
      }
    }
  }

  private async maintain(partition: Partition, nowMs: number): Promise<void> {
    const retention = await partition.enforceRetention(nowMs);
    if (retention.deletedSegments > 0) {
      this.log.info("retention deleted segments", {
        partition: `${partition.topic}-${partition.partition}`,
        segments: retention.deletedSegments,
        logStartOffset: retention.logStartOffset,
      });
    }
    if (partition.log.closed) return;
    partition.pruneAbortedTransactions();
    partition.expireProducers(nowMs, this.config.producerIdExpirationMs);
    await partition.snapshotIfDirty();
  }

  private logConfigOf(topic: TopicRecord): { logConfig: LogConfig; timestampType: TimestampType } {
    const resolved = resolveTopicConfigWithDefaults(topic.configs, this.runtimeConfig.topicDefaults());
    // Without `delete` in cleanup.policy nothing is deleted by age or size (Apache's LogConfig.delete):
    // a compacted topic keeps the latest record of every key for as long as it exists.
    const deletes = resolved.cleanupPolicy.delete;
    // LONG configs may be Long.MAX_VALUE ("forever"), beyond what the log layer takes as an exact
    // integer: 2^53 ms is 285,000 years, which means the same.
    const exact = (value: number) => Math.min(value, Number.MAX_SAFE_INTEGER);
    return {
      logConfig: {
        segmentBytes: resolved.segmentBytes,
        // A compacted topic rolls by max.compaction.lag.ms too (Apache's LogConfig.maxSegmentMs): the cleaner
        // never touches the active segment, so a record could otherwise wait past its lag in it.
        segmentMs: exact(resolved.cleanupPolicy.compact ? Math.min(resolved.segmentMs, resolved.maxCompactionLagMs) : resolved.segmentMs),
        retentionMs: deletes ? exact(resolved.retentionMs) : -1,
        retentionBytes: deletes ? exact(resolved.retentionBytes) : -1,
        indexIntervalBytes: DEFAULT_LOG_CONFIG.indexIntervalBytes,
      },
      timestampType: resolved.messageTimestampType === "LogAppendTime" ? "log-append-time" : "create-time",
    };
  }

  /** The topic's cleanup.policy: `compact`, `delete`, or both. */
  cleanupPolicyOf(topic: TopicRecord): { compact: boolean; delete: boolean } {
    return resolveTopicConfigWithDefaults(topic.configs, this.runtimeConfig.topicDefaults()).cleanupPolicy;
  }
}

/** The byte position a recovery error names ("... at position N ..."), -1 when it names none. */
function positionIn(reason: string): number {
  const match = /at position (\d+)/.exec(reason);
  return match === null ? -1 : Number(match[1]);
}

/** The topic of a partition key (`<topic>-<partition>`; topic names may contain dashes). */
function topicOfKey(key: string): string {
  return key.slice(0, key.lastIndexOf("-"));
}
