/**
 * One partition as the broker leads it: its durable log, its producer state (the idempotence windows and
 * open transactions) and its transaction bookkeeping (the last stable offset and the aborted-transaction
 * index), kept consistent by doing classification, append and the state updates in one synchronous step.
 *
 * Producer state survives crashes: it is rebuilt at open from `producer-state.snapshot` (written at clean
 * close and periodically) plus a replay of the log after the snapshot's offset. A snapshot that fails its
 * check is reported and ignored, and the whole log is replayed: never trusted, never silently empty.
 *
 * The high watermark is the durable end offset: a fetch never exposes bytes that an acks=-1 writer has not
 * made durable. Every append asks for a flush (group commit), so acks=0/1 data becomes visible one fsync
 * later without waiting for anything else.
 *
 * Transactions (docs/architecture.md, "Transactions and idempotence"; Apache's UnifiedLog,
 * ProducerStateManager and TransactionIndex are the reference):
 * - A transactional batch is appended only when the transaction coordinator (the TransactionVerifier)
 *   says this partition is in the producer's ongoing transaction at that epoch; the producer's first
 *   transactional batch here opens the transaction at its offset.
 * - `appendMarker` writes a COMMIT or ABORT control batch, ends the producer's open transaction here (if
 *   any), records an abort in the aborted-transaction index, and resolves once the marker (and its index
 *   entry) are durable. A marker for a producer without an open transaction here is written all the same,
 *   as Apache does (it only moves the producer's epoch and coordinator epoch); so is a retried one.
 * - The last stable offset is min(high watermark, first offset of every open transaction, first offset of
 *   every transaction whose marker is not durable yet). The last clause is Apache's "unreplicated
 *   transactions": until its marker is durable, a crash would reopen the transaction, so its data must
 *   stay invisible to read_committed. The LSO never goes backwards; a violation is a fatal bug.
 * - At open, open transactions come from the snapshot and the replay, so the LSO stays pinned across a
 *   crash; the aborted index comes from the `.txnindex` files below the snapshot offset and from the replay
 *   above it, and a missing or damaged file is rebuilt from the log.
 *
 * Cluster mode (`leaderEpoch` given to open: a take-over; docs/architecture.md, "Files of a leader
 * epoch"): the partition writes only the files of its leader epoch (segments, log and cleaner checkpoints,
 * producer-state snapshot, leader-epoch history), reads the newest epoch's history, and leaves a former
 * leader's late writes out (the log's recovery bounds its segments; a snapshot of an older epoch past
 * that epoch's end is not used). Single-broker mode (no `leaderEpoch`) keeps the plain file names.
 */
import { join } from "node:path";
import {
  applyAppend,
  applyMarker,
  checkMarker,
  classifyBatch,
  createProducerState,
  expire,
  fenceEpoch,
  NO_TXN_OFFSET,
  type BatchClassification,
  type FenceResult,
  type ProducerStateTable,
} from "../domain/producer-state.ts";
import { noTransactions, type TransactionVerifier, type TxnBatchVerdict } from "../domain/txn/verifier.ts";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import {
  BATCH_HEADER_BYTES,
  buildControlBatch,
  lastOffsetOf,
  lastSequenceOf,
  parseBatchHeader,
  parseControlRecord,
  type BatchHeader,
  type TimestampType,
} from "../protocol/records/record-batch.ts";
import { writeFileAtomic } from "./atomic-file.ts";
import { LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochHistory } from "./log/leader-epoch-checkpoint.ts";
import { PartitionLog, type AppendResult, type DeleteRecordsResult, type LogConfig, type RetentionResult } from "./log/partition-log.ts";
import {
  AbortedTxnIndex,
  decodeTxnIndex,
  encodeTxnIndexEntries,
  OngoingTxns,
  type AbortedTxn,
} from "./log/txn-index.ts";
import {
  encodeSnapshot,
  readSnapshot,
  readSnapshotFile,
  snapshotEpochs,
  snapshotFileName,
  type ReadSnapshotResult,
} from "./producer-state-snapshot.ts";
import { cleanableRange, cleaningReason, type ActiveProducer, type CleanableRange, type CleaningReason } from "../domain/compaction/cleaning-rules.ts";
import type { OffsetMap } from "../domain/compaction/offset-map.ts";
import { cleanLog, type CleanableLog, type CleanPassStats } from "./log/log-cleaner.ts";
import type { CleanPassRequest, CleanPassRunner } from "./log/cleaner-threads.ts";
import { baseTimestampAt } from "../protocol/records/record-batch.ts";

export type ProduceOutcome =
  | { kind: "appended"; baseOffset: number; logAppendTimeMs: number; written: Promise<void> }
  /** A retry of a batch already in the log: the original offsets, nothing written. */
  | { kind: "duplicate"; baseOffset: number; logAppendTimeMs: number }
  /**
   * `notInTransaction`: a transactional batch for a partition the coordinator has not put in the
   * producer's transaction. Apache answers INVALID_TXN_STATE up to Produce v10 and TRANSACTION_ABORTABLE
   * from v11 (the Produce handler picks by version).
   */
  | { kind: "error"; errorCode: number; message: string; notInTransaction?: boolean };

/** An end-transaction marker, as the transaction coordinator asks for it. */
export interface TxnMarker {
  producerId: number;
  producerEpoch: number;
  /** true: COMMIT, false: ABORT. */
  commit: boolean;
  coordinatorEpoch: number;
}

export type MarkerOutcome =
  /** The marker's offset; resolved only once the marker (and its index entry) are durable. */
  | { ok: true; offset: number }
  | { ok: false; errorCode: number; message: string };

/** Apache's message for a transactional batch that failed verification (Produce v3-v10). */
export const NOT_IN_TRANSACTION_MESSAGE = "Partition was not added to the transaction";

/** The Produce answer to a transactional batch the coordinator does not vouch for (Apache's, by verdict). */
function refusedTransactionalBatch(verdict: Exclude<TxnBatchVerdict, "in-transaction">): ProduceOutcome {
  switch (verdict) {
    case "unknown-producer":
      return { kind: "error", errorCode: ErrorCode.INVALID_PRODUCER_ID_MAPPING, message: "The producer id is not the current producer of a transactional id" };
    case "fenced":
      return { kind: "error", errorCode: ErrorCode.INVALID_PRODUCER_EPOCH, message: "The producer epoch is not the transactional id's current epoch (fenced)" };
    case "deciding":
      // Apache answers a retriable error that older clients retry without a metadata refresh.
      return {
        kind: "error",
        errorCode: ErrorCode.NOT_ENOUGH_REPLICAS,
        message: "Unable to verify the partition has been added to the transaction. Underlying error: CONCURRENT_TRANSACTIONS",
      };
    case "not-in-transaction":
      return { kind: "error", errorCode: ErrorCode.INVALID_TXN_STATE, message: NOT_IN_TRANSACTION_MESSAGE, notInTransaction: true };
  }
}

/** The topic configs that steer cleaning (cleanup.policy=compact), in the log's units. */
export interface CompactionConfig {
  minCleanableDirtyRatio: number;
  minCompactionLagMs: number;
  maxCompactionLagMs: number;
  deleteRetentionMs: number;
  segmentBytes: number;
  indexIntervalBytes: number;
}

/** A pass on this thread (cleanLog with this map and throttle). */
export interface InProcessClean {
  map: OffsetMap;
  /** Called with the bytes of each batch read; resolves when reading may go on (log.cleaner.io.max.bytes.per.second). */
  throttle: (bytes: number) => Promise<void>;
  /** Stops the pass between batches (shutdown). */
  shouldStop: () => boolean;
  runner?: undefined;
}

/** A pass on a cleaner thread (storage/log/cleaner-threads.ts), which has its own map and throttle. */
export interface ThreadClean {
  runner: CleanPassRunner;
  /** Aborted at shutdown: the pass stops between batches. */
  stopped: AbortSignal;
}

export type CleanOptions = {
  nowMs: number;
  config: CompactionConfig;
  /** Clean even when no rule asks for it (tests, an operator's request). */
  force?: boolean;
} & (InProcessClean | ThreadClean);

export type CleanOutcome =
  | { kind: "not-needed"; range: CleanableRange }
  | { kind: "cleaned"; reason: CleaningReason | "forced"; range: CleanableRange; stats: CleanPassStats };

/** How much log one replay read takes at a time while rebuilding producer state. */
const REPLAY_READ_BYTES = 1024 * 1024;

/** One segment's aborted-transaction index while the partition opens. */
interface SegmentTxnIndex {
  baseOffset: number;
  endOffset: number;
  path: string;
  /** What the file held (undefined: missing). */
  stored: Uint8Array | undefined;
  /** What it must hold, oldest marker first. */
  entries: AbortedTxn[];
}

/** A transaction whose marker is written but not durable yet: it still pins the LSO at its first offset. */
interface CompletingTxn {
  firstOffset: number;
  markerOffset: number;
}

export class Partition {
  /** Producer state changed since the last snapshot. */
  private dirty = false;
  /** Set when close() starts (the topic is being deleted, or the broker stops). */
  private closeStarted = false;
  private readonly closeListeners = new Set<() => void>();
  /** Open transactions here (mirrors the producers' currentTxnFirstOffset), earliest first. */
  private readonly ongoing = new OngoingTxns();
  /** Completed transactions whose marker is not durable yet, in marker order. */
  private completing: CompletingTxn[] = [];
  private readonly aborted = new AbortedTxnIndex();
  /** The last LSO handed out: it must never go backwards. */
  private lastStable = 0;
  /** The epoch appends are stamped with: the history's latest, switched by becomeLeader. */
  private appendEpoch: number;

  /** The leader epoch whose files this partition writes: 0 in single-broker mode, the led epoch in cluster mode. */
  private fileEpoch: number;

  /** Serializes snapshot writes (see snapshotIfDirty). */
  private snapshotChain: Promise<unknown> = Promise.resolve();
  /** Segment count when the last roll-triggered snapshot was taken. */
  private segmentsAtLastRollSnapshot: number;

  private constructor(
    private readonly fs: Fs,
    private readonly clock: Clock,
    readonly topic: string,
    readonly partition: number,
    readonly dir: string,
    readonly log: PartitionLog,
    readonly producers: ProducerStateTable,
    private timestampType: TimestampType,
    private readonly verifier: TransactionVerifier,
    private readonly epochs: LeaderEpochHistory,
    /** Cluster mode: the files of each leader epoch carry it (see the file comment). */
    private readonly epochFiles: boolean,
  ) {
    this.segmentsAtLastRollSnapshot = log.segmentCount;
    this.appendEpoch = epochs.latestEpoch;
    this.fileEpoch = log.fileEpoch;
  }

  static async open(opts: {
    fs: Fs;
    clock: Clock;
    topic: string;
    partition: number;
    dir: string;
    logConfig: LogConfig;
    timestampType: TimestampType;
    warn: (message: string, fields?: Record<string, unknown>) => void;
    /** Asked before every transactional append; by default no partition is in any transaction. */
    verifier?: TransactionVerifier;
    /**
     * Cluster mode's take-over: open the partition as a leader at this epoch (>= 1), writing only the
     * files of this epoch; it resolves once the epoch is recorded and its first segment is durable.
     * Absent: single-broker mode, today's file names.
     */
    leaderEpoch?: number;
    /**
     * Asked right before each unlink and rename of retention and cleaner swaps (deletions cannot be fenced
     * by file names): false, the ownership being gone, leaves the files alone. Default: always true.
     */
    mayWrite?: () => boolean;
  }): Promise<Partition> {
    const cluster = opts.leaderEpoch !== undefined;
    if (cluster && (!Number.isInteger(opts.leaderEpoch) || opts.leaderEpoch! < 1 || opts.leaderEpoch! > 0x7fffffff)) {
      throw new RangeError(`a take-over's leader epoch must be an int32 >= 1, got ${opts.leaderEpoch}`);
    }
    const epochs = cluster
      ? await LeaderEpochHistory.loadNewest(opts.fs, opts.dir)
      : await LeaderEpochHistory.load(opts.fs, join(opts.dir, LEADER_EPOCH_CHECKPOINT_FILE));
    if (cluster && opts.leaderEpoch! < epochs.latestEpoch) {
      throw new CorruptStateError(epochs.filePath, `asked to lead at epoch ${opts.leaderEpoch}, below the recorded epoch ${epochs.latestEpoch}: a newer leader exists`);
    }
    const log = await PartitionLog.open(opts.fs, opts.dir, opts.logConfig, opts.clock, {
      writerEpoch: cluster ? opts.leaderEpoch : 0,
      epochHistory: epochs.all,
      ...(opts.mayWrite === undefined ? {} : { mayWrite: opts.mayWrite }),
    });
    try {
      const partition = await Partition.restore(log, epochs, opts);
      if (cluster) await partition.lead(opts.leaderEpoch!);
      return partition;
    } catch (error) {
      await log.close().catch(() => {});
      throw error;
    }
  }

  private static async restore(log: PartitionLog, epochs: LeaderEpochHistory, opts: Parameters<typeof Partition.open>[0]): Promise<Partition> {
    const cluster = opts.leaderEpoch !== undefined;
    // The history follows the log as recovery left it, in memory only (nothing to fsync at start): an
    // epoch starting past the recovered end lost its data (a torn tail), and entries below the log start
    // may lag a DeleteRecords or retention that moved it just before a crash. An epoch starting exactly
    // at the end is kept: it was assigned (becomeLeader) and has appended nothing yet.
    await epochs.truncateFromEnd(log.logEndOffset + 1, { durable: false });
    await epochs.truncateFromStart(log.logStartOffset, { durable: false });
    let producers = createProducerState();
    let replayFrom = log.logStartOffset;
    // Cluster mode: the newest epoch's snapshot, unless it claims offsets past its epoch's end (a fenced
    // former leader's late write), then the next older one.
    const fencedSnapshots: string[] = [];
    let snapshot: ReadSnapshotResult;
    if (cluster) {
      for (const epoch of await snapshotEpochs(opts.fs, opts.dir)) {
        const candidate = await readSnapshotFile(opts.fs, join(opts.dir, snapshotFileName(epoch)));
        if (candidate?.kind === "loaded" && candidate.offset > log.fencedFromEpoch(epoch)) {
          fencedSnapshots.push(snapshotFileName(epoch));
          continue;
        }
        snapshot = candidate;
        break;
      }
    } else {
      snapshot = await readSnapshot(opts.fs, opts.dir);
    }
    const fenced = log.recoveryReport.fenced;
    if (fenced.ignoredFiles.length > 0 || fenced.boundedSegments.length > 0 || fencedSnapshots.length > 0) {
      // Expected after a take-over from a leader that was frozen past its lease: not damage.
      opts.warn("left a fenced former leader's late writes out of the partition", {
        dir: opts.dir,
        ignoredFiles: fenced.ignoredFiles.length + fencedSnapshots.length,
        boundedSegments: fenced.boundedSegments.length,
        ignoredBytes: fenced.boundedSegments.reduce((sum, b) => sum + b.bytes, 0),
        first: fenced.ignoredFiles[0] ?? fencedSnapshots[0] ?? fenced.boundedSegments[0]?.file,
      });
    }
    if (snapshot?.kind === "corrupt") {
      opts.warn("producer state snapshot is corrupt; rebuilding it from the log", { dir: opts.dir, reason: snapshot.reason });
    } else if (snapshot?.kind === "loaded") {
      const misplacedTxn = snapshot.state.producerIdsWhere((_, txnFirstOffset) => txnFirstOffset >= snapshot.offset)[0];
      if (snapshot.offset < log.logStartOffset || snapshot.offset > log.logEndOffset) {
        opts.warn("producer state snapshot does not fit the log; rebuilding it from the log", {
          dir: opts.dir,
          snapshotOffset: snapshot.offset,
          logStartOffset: log.logStartOffset,
          logEndOffset: log.logEndOffset,
        });
      } else if (misplacedTxn !== undefined) {
        opts.warn("producer state snapshot has a transaction opening at or after its own offset; rebuilding it from the log", {
          dir: opts.dir,
          snapshotOffset: snapshot.offset,
          producerId: misplacedTxn,
          transactionFirstOffset: snapshot.state.get(misplacedTxn)?.currentTxnFirstOffset,
        });
      } else {
        producers = snapshot.state;
        replayFrom = snapshot.offset;
      }
    }
    const partition = new Partition(
      opts.fs,
      opts.clock,
      opts.topic,
      opts.partition,
      opts.dir,
      log,
      producers,
      opts.timestampType,
      opts.verifier ?? noTransactions,
      epochs,
      cluster,
    );
    // Open transactions of the snapshot, in offset order (the replay opens later ones after them).
    const open = producers
      .producerIdsWhere((_, txnFirstOffset) => txnFirstOffset !== NO_TXN_OFFSET)
      .map((producerId) => [producerId, producers.get(producerId)!.currentTxnFirstOffset] as const)
      .sort((a, b) => a[1] - b[1]);
    for (const [producerId, firstOffset] of open) partition.ongoing.open(producerId, firstOffset);

    const segments = await partition.loadTxnIndexes(replayFrom, opts.warn);
    const reached = await partition.replayLog(replayFrom, log.logEndOffset, partition.producers, partition.ongoing, (txn) => {
      segmentOf(segments, txn.lastOffset).entries.push(txn);
    });
    partition.dirty = reached > replayFrom;
    await partition.storeTxnIndexes(segments);
    return partition;
  }

  get highWatermark(): number {
    return this.log.durableEndOffset;
  }

  /**
   * The leader epoch this partition appends at (every batch's partitionLeaderEpoch): the latest of its
   * history, 0 for a partition that never changed leader (single-broker mode).
   */
  get leaderEpoch(): number {
    return this.appendEpoch;
  }

  /** The history (epoch, start offset) of the leader epochs this log holds (docs/architecture.md, "Leader epochs"). */
  get leaderEpochHistory(): LeaderEpochHistory {
    return this.epochs;
  }

  /**
   * Apache's lastOffsetForLeaderEpoch for this log: where `requestedEpoch` ends (LeaderEpochHistory.endOffsetFor
   * against the log end offset, as Apache answers leader and consumer alike).
   */
  endOffsetForEpoch(requestedEpoch: number): { epoch: number; endOffset: number } {
    return this.epochs.endOffsetFor(requestedEpoch, this.log.logEndOffset);
  }

  /**
   * Makes this broker the partition's leader at `epoch` (the ownership's fencing epoch, cluster mode's
   * take-over): the epoch starts at the log end, recorded durably before this resolves, and every append
   * from then on carries it. Call it before the partition is served at `epoch`. The log is flushed first,
   * so that the start offset recorded is durable data's end and a crash cannot leave it past the log.
   * The same epoch again changes nothing; a lower one is refused (CorruptStateError: a newer leader wrote
   * this log). One call at a time.
   */
  async becomeLeader(epoch: number): Promise<void> {
    if (epoch === this.appendEpoch) return;
    return this.lead(epoch);
  }

  /** becomeLeader's work, also for a take-over at the epoch the history already ends with. */
  private async lead(epoch: number): Promise<void> {
    if (epoch < this.appendEpoch) {
      throw new CorruptStateError(this.epochs.filePath, `asked to lead at epoch ${epoch}, below the current epoch ${this.appendEpoch}: a newer leader exists`);
    }
    await this.log.flush();
    // Fixed in the same synchronous step as the switch, so that no append lands at or past the start
    // offset stamped with the old epoch while the history is written.
    const startOffset = this.log.logEndOffset;
    this.appendEpoch = epoch;
    if (!this.epochFiles) {
      await this.epochs.assign(epoch, startOffset);
      return;
    }
    // Cluster mode: the epoch's own files from now on. The roll happens in this synchronous step too (no
    // append goes into an older epoch's segment); the history, the new segment and the log checkpoint
    // of the epoch are durable before this resolves, and a producer-state snapshot of the epoch is
    // written, so that no later recovery needs a file a former leader may still rewrite.
    const started = this.log.startEpoch(epoch);
    this.fileEpoch = epoch;
    this.epochs.writeFileOf(this.dir, epoch);
    await Promise.all([this.epochs.assign(epoch, startOffset, { rewrite: true }), started]);
    this.dirty = true;
    await this.snapshotIfDirty();
  }

  /**
   * Moves the log start offset (DeleteRecords; see PartitionLog.deleteRecordsBefore), then drops the
   * leader-epoch history below it durably, as Apache's truncateFromStart.
   */
  async deleteRecordsBefore(offset: number): Promise<DeleteRecordsResult> {
    const result = await this.log.deleteRecordsBefore(offset);
    if (result.kind === "ok") await this.epochs.truncateFromStart(result.logStartOffset);
    return result;
  }

  /** Retention (PartitionLog.enforceRetention); a moved log start truncates the leader-epoch history too. */
  async enforceRetention(nowMs: number): Promise<RetentionResult> {
    const result = await this.log.enforceRetention(nowMs);
    await this.epochs.truncateFromStart(result.logStartOffset);
    return result;
  }

  /**
   * min(high watermark, first offset of every open transaction and of every transaction whose marker is
   * not durable yet). Never goes backwards.
   */
  get lastStableOffset(): number {
    const highWatermark = this.log.durableEndOffset;
    let stable = highWatermark;
    if (this.completing.length > 0) {
      let durable = 0;
      while (durable < this.completing.length && this.completing[durable]!.markerOffset < highWatermark) durable++;
      if (durable > 0) this.completing = this.completing.slice(durable);
      for (const txn of this.completing) stable = Math.min(stable, txn.firstOffset);
    }
    const earliest = this.ongoing.earliestFirstOffset();
    if (earliest !== undefined && earliest < stable) stable = earliest;
    if (stable < this.lastStable) {
      throw new FatalError(`${this.topic}-${this.partition}: the last stable offset would go back from ${this.lastStable} to ${stable}`);
    }
    this.lastStable = stable;
    return stable;
  }

  /** Offset of the first batch of the producer's open transaction here, or undefined. */
  openTransactionOf(producerId: number): number | undefined {
    return this.ongoing.firstOffsetOf(producerId);
  }

  /** How many transactions are open here. */
  get openTransactionCount(): number {
    return this.ongoing.size;
  }

  /**
   * The aborted transactions overlapping [fetchOffset, upperBoundOffset) (the end of the fetched data),
   * sorted by first offset: what a read_committed Fetch returns with the records.
   */
  abortedTransactions(fetchOffset: number, upperBoundOffset: number): AbortedTxn[] {
    return this.aborted.collect(fetchOffset, upperBoundOffset);
  }

  /** Every aborted transaction still indexed, oldest marker first (tests, introspection). */
  abortedTransactionIndex(): AbortedTxn[] {
    return this.aborted.entries();
  }

  setConfig(logConfig: LogConfig, timestampType: TimestampType): void {
    this.log.updateConfig(logConfig);
    this.timestampType = timestampType;
  }

  /**
   * Appends one validated producer batch (Produce v3+ carries exactly one per partition), deduplicating
   * idempotent retries. Synchronous up to the returned `written` promise, so classification, offset
   * assignment and the producer-state update cannot interleave with another append.
   */
  appendFromProducer(recordSet: Uint8Array, batch: BatchHeader): ProduceOutcome {
    const idempotent = batch.producerId >= 0;
    const info = idempotent
      ? {
          producerId: batch.producerId,
          producerEpoch: batch.producerEpoch,
          baseSequence: batch.baseSequence,
          lastSequence: lastSequenceOf(batch),
          isTransactional: batch.isTransactional,
        }
      : undefined;
    const classification: BatchClassification | undefined = info ? classifyBatch(this.producers, info) : undefined;
    if (batch.isTransactional) {
      // A zombie's batch is fenced by the epoch first, as Apache's coordinator answers PRODUCER_FENCED
      // (rewritten to INVALID_PRODUCER_EPOCH for Produce) before it looks at the partitions.
      const fenced = classification?.kind === "error" && classification.errorCode === ErrorCode.INVALID_PRODUCER_EPOCH;
      if (!fenced) {
        // Refusing here is what prevents hanging transactions: a batch the coordinator does not vouch for
        // would open a transaction here that no marker ever ends.
        const verdict = idempotent ? this.verifier.verifyBatch(batch.producerId, batch.producerEpoch, this.topic, this.partition) : "not-in-transaction";
        if (verdict !== "in-transaction") return refusedTransactionalBatch(verdict);
      }
    }
    if (classification?.kind === "duplicate") {
      return {
        kind: "duplicate",
        baseOffset: classification.firstOffset,
        logAppendTimeMs: this.timestampType === "log-append-time" ? classification.timestampMs : -1,
      };
    }
    if (classification?.kind === "error") return classification;
    const appended: AppendResult = this.log.append(recordSet, { timestampType: this.timestampType, partitionLeaderEpoch: this.appendEpoch });
    if (info) {
      const opensTxn = batch.isTransactional && !this.ongoing.has(batch.producerId);
      // The append is assigned and queued; a failed write fails the log and the process (recovery then
      // rebuilds producer state from what really reached the disk).
      applyAppend(this.producers, info, {
        firstOffset: appended.baseOffset,
        lastOffset: appended.lastOffset,
        timestampMs: appended.logAppendTimeMs >= 0 ? appended.logAppendTimeMs : batch.maxTimestampMs,
      });
      if (opensTxn) this.ongoing.open(batch.producerId, appended.baseOffset);
      this.dirty = true;
    }
    this.snapshotAfterRoll();
    // Group commit: the high watermark advances with the next fsync whatever the acks.
    void this.log.flush().catch(() => {
      // The log is failed; every waiter sees the FatalError, and the broker exits.
    });
    return { kind: "appended", baseOffset: appended.baseOffset, logAppendTimeMs: appended.logAppendTimeMs, written: appended.written };
  }

  /**
   * Writes an end-transaction marker (a control batch exactly as Apache writes one) for the producer and
   * resolves once it is durable, with its offset. Refused, with nothing written, for an epoch older than
   * the producer's (INVALID_PRODUCER_EPOCH) or a coordinator epoch older than the last marker's
   * (TRANSACTION_COORDINATOR_FENCED). A closing partition (its topic is being deleted) answers
   * UNKNOWN_TOPIC_OR_PARTITION. Safe to retry: a second marker for a transaction already ended here is
   * written again and changes nothing but the producer's timestamp.
   */
  async appendMarker(marker: TxnMarker): Promise<MarkerOutcome> {
    if (this.closeStarted) {
      return { ok: false, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message: `${this.topic}-${this.partition} is closing` };
    }
    const { producerId, producerEpoch, commit, coordinatorEpoch } = marker;
    // Validated before anything is written: producer state cannot hold such ids, and a marker in the log
    // that producer state refuses afterwards would leave the two disagreeing.
    if (!Number.isSafeInteger(producerId) || producerId < 0 || !Number.isInteger(producerEpoch) || producerEpoch < 0 || producerEpoch > 32767) {
      return { ok: false, errorCode: ErrorCode.INVALID_REQUEST, message: `invalid producer id ${producerId} or epoch ${producerEpoch} for a marker` };
    }
    const nowMs = this.clock.nowMs();
    const check = checkMarker(this.producers, producerId, producerEpoch, {
      coordinatorEpoch,
      offset: this.log.logEndOffset,
      timestampMs: nowMs,
      isCommit: commit,
    });
    if (check.kind === "error") return { ok: false, errorCode: check.errorCode, message: check.message };

    const bytes = buildControlBatch({ producerId, producerEpoch, commit, coordinatorEpoch, timestampMs: nowMs });
    const appended = this.log.append(bytes, { timestampType: this.timestampType, partitionLeaderEpoch: this.appendEpoch });
    const markerOffset = appended.baseOffset;
    const applied = applyMarker(this.producers, producerId, producerEpoch, {
      coordinatorEpoch,
      offset: markerOffset,
      timestampMs: appended.logAppendTimeMs >= 0 ? appended.logAppendTimeMs : nowMs,
      isCommit: commit,
    });
    // checkMarker passed in this same synchronous step.
    if (applied.kind !== "applied") throw new FatalError(`marker for producer ${producerId} refused after its check passed`);
    this.dirty = true;
    let indexed: Promise<void> | undefined;
    const completed = applied.completedTxn;
    if (completed !== undefined) {
      if (!this.ongoing.close(producerId)) {
        throw new FatalError(`${this.topic}-${this.partition}: producer ${producerId} ended a transaction that was not tracked as open`);
      }
      this.completing.push({ firstOffset: completed.firstOffset, markerOffset });
      if (completed.isAborted) {
        const entry: AbortedTxn = {
          producerId,
          firstOffset: completed.firstOffset,
          lastOffset: markerOffset,
          lastStableOffset: this.ongoing.earliestFirstOffset() ?? markerOffset + 1,
        };
        this.aborted.append(entry);
        indexed = this.log.appendTxnIndexEntry(markerOffset, encodeTxnIndexEntries([entry]), appended.written);
      }
    }
    await Promise.all([appended.written, this.log.flush(), indexed]);
    return { ok: true, offset: markerOffset };
  }

  /**
   * Raises the producer's epoch here and clears its window (InitProducerId fencing a previous session).
   * An open transaction stays open: only its marker ends it.
   */
  fenceProducer(producerId: number, newEpoch: number): FenceResult {
    const result = fenceEpoch(this.producers, producerId, newEpoch);
    if (result === "fenced") this.dirty = true;
    return result;
  }

  /** Drops producers idle for longer than producer.id.expiration.ms (never one with an open transaction). */
  expireProducers(nowMs: number, producerIdExpirationMs: number): number {
    const removed = expire(this.producers, nowMs, producerIdExpirationMs);
    if (removed > 0) this.dirty = true;
    return removed;
  }

  /** Forgets aborted transactions wholly below the log start offset (retention or DeleteRecords moved it). */
  pruneAbortedTransactions(): number {
    return this.aborted.dropBefore(this.log.logStartOffset);
  }

  /**
   * The dirty section of the log as the cleaner sees it now (docs/architecture.md, "Compaction"):
   * bounded by the last stable offset, so no undecided transaction is ever judged.
   */
  async cleanableRange(nowMs: number, config: CompactionConfig): Promise<CleanableRange> {
    const segments = [];
    for (const segment of this.log.cleanableSegments()) {
      const maxTimestampMs = config.minCompactionLagMs > 0 ? await this.log.segmentMaxTimestamp(segment.baseOffset) : -1;
      segments.push({ baseOffset: segment.baseOffset, sizeBytes: segment.sizeBytes, maxTimestampMs });
    }
    return cleanableRange({
      segments,
      activeBaseOffset: this.log.activeSegmentBaseOffset,
      logStartOffset: this.log.logStartOffset,
      lastStableOffset: this.lastStableOffset,
      checkpointOffset: this.log.cleanerCheckpoint.firstDirtyOffset,
      minCompactionLagMs: config.minCompactionLagMs,
      nowMs,
    });
  }

  /**
   * One cleaning pass when the log needs one (or `force`): see storage/log/log-cleaner.ts. Runs with
   * retention kept out; appends and reads go on meanwhile (the active segment is never touched, and
   * readers wait only for the moment a cleaned segment is swapped in).
   */
  clean(options: CleanOptions): Promise<CleanOutcome> {
    return this.log.exclusive(async () => {
      const { nowMs, config } = options;
      const range = await this.cleanableRange(nowMs, config);
      let reason: CleaningReason | "forced" | null = await this.cleaningReasonFor(nowMs, config, range);
      if (reason === null && options.force) reason = "forced";
      if (reason === null || this.closeStarted) return { kind: "not-needed", range };
      const producers = new Map<number, ActiveProducer>();
      for (const producerId of this.producers.producerIdsWhere(() => true)) {
        const entry = this.producers.get(producerId)!;
        producers.set(producerId, { lastDataOffset: entry.batches.at(-1)?.lastOffset ?? -1, epoch: entry.epoch });
      }
      const request: CleanPassRequest = {
        log: this.cleanableLog(),
        range,
        nowMs,
        deleteRetentionMs: config.deleteRetentionMs,
        maxGroupBytes: config.segmentBytes,
        indexIntervalBytes: config.indexIntervalBytes,
        producers,
        aborted: this.aborted.entries().filter((e) => e.lastOffset >= this.log.logStartOffset),
      };
      if (options.runner === undefined) {
        const { map, throttle, shouldStop } = options;
        const stats = await cleanLog({ ...request, fs: this.fs, map, throttle, shouldStop: () => this.closeStarted || shouldStop() });
        return { kind: "cleaned", reason, range, stats };
      }
      // A pass elsewhere cannot ask whether the partition is closing: closing tells it, as shutdown does.
      const closed = new AbortController();
      const unsubscribe = this.onClose(() => closed.abort());
      try {
        const stats = await options.runner(request, AbortSignal.any([options.stopped, closed.signal]));
        return { kind: "cleaned", reason, range, stats };
      } finally {
        unsubscribe();
      }
    });
  }

  /** The log as a cleaning pass sees it: its swaps also replace the aborted transactions of their range. */
  private cleanableLog(): CleanableLog {
    const log = this.log;
    return {
      dir: log.dir,
      get sizeBytes() {
        return log.sizeBytes;
      },
      get cleanerCheckpoint() {
        return log.cleanerCheckpoint;
      },
      cleanableSegments: () => log.cleanableSegments(),
      readSegmentBytes: (baseOffset, position, length, into) => log.readSegmentBytes(baseOffset, position, length, into),
      saveCleanerCheckpoint: (checkpoint) => log.saveCleanerCheckpoint(checkpoint),
      replaceSegments: async (cleaned, endOffset, keptAborted) => {
        await log.replaceSegments(cleaned);
        this.aborted.replaceRange(cleaned.replaced[0]!, endOffset, keptAborted);
      },
    };
  }

  /** Whether a pass is due for `range` (see cleaningReason), without running one. */
  async needsCleaning(nowMs: number, config: CompactionConfig, range: CleanableRange): Promise<boolean> {
    return (await this.cleaningReasonFor(nowMs, config, range)) !== null;
  }

  private async cleaningReasonFor(nowMs: number, config: CompactionConfig, range: CleanableRange): Promise<CleaningReason | null> {
    return cleaningReason({
      range,
      minCleanableDirtyRatio: config.minCleanableDirtyRatio,
      maxCompactionLagMs: config.maxCompactionLagMs,
      firstDirtyTimestampMs: await this.firstDirtyTimestamp(range),
      pendingDeleteHorizonMs: this.log.cleanerCheckpoint.pendingDeleteHorizonMs,
      nowMs,
    });
  }

  /** The timestamp of the first batch of the dirty section (max.compaction.lag.ms counts from it). */
  private async firstDirtyTimestamp(range: CleanableRange): Promise<number> {
    const first = this.log.cleanableSegments().find((s) => s.endOffset > range.firstDirtyOffset && s.baseOffset < range.firstUncleanableOffset);
    if (first === undefined || first.sizeBytes < BATCH_HEADER_BYTES) return -1;
    const header = await this.log.readSegmentBytes(first.baseOffset, 0, BATCH_HEADER_BYTES, new Uint8Array(BATCH_HEADER_BYTES));
    return header.length < BATCH_HEADER_BYTES ? -1 : baseTimestampAt(header, 0);
  }

  /**
   * Writes the producer-state snapshot if anything changed since the last one. Snapshots are written one
   * at a time, so an older one can never be renamed over a newer one.
   */
  snapshotIfDirty(): Promise<boolean> {
    const run = this.snapshotChain.then(() => this.writeSnapshotIfDirty());
    this.snapshotChain = run.catch(() => undefined);
    return run;
  }

  /**
   * After an append that rolled the log to a new segment, snapshot producer state (docs/architecture.md,
   * "Storage rules" and the spec: a snapshot at every roll keeps the replay after a crash to about one
   * segment). In the background: the append is not held up, and a failure is reported and retried by the next
   * roll or the maintenance pass.
   */
  private snapshotAfterRoll(): void {
    const segments = this.log.segmentCount;
    if (segments === this.segmentsAtLastRollSnapshot) return;
    this.segmentsAtLastRollSnapshot = segments;
    this.snapshotIfDirty().catch((error: unknown) => {
      if (error instanceof FatalError) throw error;
    });
  }

  private async writeSnapshotIfDirty(): Promise<boolean> {
    if (!this.dirty) return false;
    this.dirty = false;
    // The state is encoded now, exactly as of `offset`: appends and markers that land while the log
    // flushes must not be in a snapshot that claims to stop before them (the replay would apply them a
    // second time, and a marker applied twice loses its aborted transaction).
    const offset = this.log.logEndOffset;
    const bytes = encodeSnapshot(offset, this.producers);
    // Data below the offset must be durable before the snapshot claims so, and so must the
    // aborted-transaction index entries below it: the replay after the snapshot will not rebuild them.
    await this.log.flush();
    await this.log.txnIndexSettled();
    await writeFileAtomic(this.fs, join(this.dir, snapshotFileName(this.fileEpoch)), bytes);
    return true;
  }

  /**
   * True once close() has started: the partition is no longer served, and handlers answer as for a
   * partition that does not exist instead of reading or appending (the log refuses both while it closes).
   * Checked right before a synchronous call into the log, nothing can start on it after close began.
   */
  get closing(): boolean {
    return this.closeStarted;
  }

  /**
   * Calls `listener` (synchronously, once) when close() starts, so that a Fetch parked on this partition
   * answers at once rather than at its max wait. Returns the unsubscribe function.
   */
  onClose(listener: () => void): () => void {
    this.closeListeners.add(listener);
    return () => this.closeListeners.delete(listener);
  }

  /**
   * Writes a last producer-state snapshot and closes the log. The log (and with it every segment file)
   * is closed even when the snapshot fails; the snapshot's error is then rethrown.
   */
  async close(): Promise<void> {
    if (!this.closeStarted) {
      this.closeStarted = true;
      const listeners = [...this.closeListeners];
      this.closeListeners.clear();
      for (const listener of listeners) listener();
    }
    try {
      if (!this.log.failed) {
        this.dirty = true;
        await this.snapshotIfDirty();
      }
    } finally {
      await this.log.close();
    }
  }

  // ---- recovery -------------------------------------------------------------------------------------

  /**
   * Reads every segment's `.txnindex` and keeps the entries below `replayFrom` (the replay re-derives
   * the rest). A file with a torn last entry in a segment that reaches `replayFrom` keeps its sound prefix
   * (only an entry appended after the snapshot can be torn). A missing or damaged file of a segment that
   * starts below `replayFrom` is rebuilt by replaying the log from its start with a scratch producer
   * state, up to `replayFrom`.
   */
  private async loadTxnIndexes(
    replayFrom: number,
    warn: (message: string, fields?: Record<string, unknown>) => void,
  ): Promise<SegmentTxnIndex[]> {
    const files = await this.log.readTxnIndexes();
    const segments: SegmentTxnIndex[] = [];
    const rebuild: SegmentTxnIndex[] = [];
    const problems: string[] = [];
    for (const file of files) {
      const path = file.path;
      const segment: SegmentTxnIndex = { baseOffset: file.baseOffset, endOffset: file.endOffset, path, stored: file.bytes, entries: [] };
      segments.push(segment);
      let entries: AbortedTxn[] | undefined;
      if (file.bytes === undefined) {
        problems.push(`${path}: missing`);
      } else if (file.mayHoldLateEntries) {
        // A later epoch follows this segment: entries past its end are a former leader's late markers,
        // left out (the file is rewritten without them below), not damage.
        const decoded = decodeTxnIndex(file.bytes, file.baseOffset, Number.MAX_SAFE_INTEGER);
        if (decoded.kind === "corrupt") problems.push(`${path}: ${decoded.reason}`);
        else entries = decoded.entries.filter((e) => e.lastOffset < file.endOffset);
      } else {
        const decoded = decodeTxnIndex(file.bytes, file.baseOffset, file.endOffset);
        if (decoded.kind === "ok" || (decoded.kind === "torn" && file.endOffset > replayFrom)) {
          entries = decoded.entries;
        } else {
          problems.push(`${path}: ${decoded.reason}`);
        }
      }
      if (entries === undefined) {
        this.log.recoveryReport.rebuiltIndexes.push(path);
        if (file.baseOffset < replayFrom) rebuild.push(segment);
        continue;
      }
      segment.entries = entries.filter((e) => e.lastOffset < replayFrom);
    }
    if (problems.length > 0) {
      warn("aborted-transaction index files missing or damaged; rebuilding them from the log", {
        dir: this.dir,
        files: problems.length,
        first: problems[0],
      });
    }
    if (rebuild.length > 0) {
      const until = Math.min(replayFrom, rebuild[rebuild.length - 1]!.endOffset);
      const wanted = new Set(rebuild);
      await this.replayLog(this.log.logStartOffset, until, createProducerState(), new OngoingTxns(), (txn) => {
        const segment = segmentOf(segments, txn.lastOffset);
        if (wanted.has(segment)) segment.entries.push(txn);
      });
    }
    return segments;
  }

  /** Loads the entries into memory and rewrites every file that does not hold exactly them. */
  private async storeTxnIndexes(segments: SegmentTxnIndex[]): Promise<void> {
    for (const segment of segments) {
      for (const entry of segment.entries) this.aborted.append(entry);
      const bytes = encodeTxnIndexEntries(segment.entries);
      if (segment.stored === undefined || !equalBytes(segment.stored, bytes)) await this.log.rewriteTxnIndex(segment.baseOffset, bytes);
    }
  }

  /**
   * Replays the log in [from, to) into `state`, batch header by batch header: data batches through
   * applyAppend, markers through applyMarker. Tracks open transactions in `ongoing` and reports every
   * aborted one to `onAborted`. Returns the offset it reached.
   */
  private async replayLog(
    from: number,
    to: number,
    state: ProducerStateTable,
    ongoing: OngoingTxns,
    onAborted: (txn: AbortedTxn) => void,
  ): Promise<number> {
    let offset = from;
    while (offset < to) {
      const read = await this.log.read(offset, REPLAY_READ_BYTES, { minOneBatch: true, upToOffset: to });
      // Producer state rebuilt from a log it cannot read would be wrong: the partition is refused.
      if (read.kind === "damaged") throw new CorruptStateError(join(this.log.dir, read.damage.file), `${read.damage.reason} at position ${read.damage.position} (offset ${read.damage.offset}), replaying producer state`);
      if (read.kind !== "records" || read.bytes.length === 0) break;
      const bytes = read.bytes;
      for (let position = 0; position + BATCH_HEADER_BYTES <= bytes.length; ) {
        const header = parseBatchHeader(bytes, position);
        position += header.sizeBytes;
        if (lastOffsetOf(header) < offset || header.producerId < 0) continue;
        const producerId = header.producerId;
        if (header.isControl) {
          const control = parseControlRecord(bytes, header.position);
          // Other control records (leader changes, ...) are not transaction markers; bunka writes none.
          if (control.type === "other") continue;
          const result = applyMarker(state, producerId, header.producerEpoch, {
            coordinatorEpoch: control.coordinatorEpoch,
            offset: header.baseOffset,
            timestampMs: header.maxTimestampMs,
            isCommit: control.type === "commit",
          });
          if (result.kind === "applied" && result.completedTxn !== undefined) {
            ongoing.close(producerId);
            if (result.completedTxn.isAborted) {
              onAborted({
                producerId,
                firstOffset: result.completedTxn.firstOffset,
                lastOffset: header.baseOffset,
                lastStableOffset: ongoing.earliestFirstOffset() ?? header.baseOffset + 1,
              });
            }
          }
          continue;
        }
        const opensTxn = header.isTransactional && !ongoing.has(producerId);
        applyAppend(
          state,
          {
            producerId,
            producerEpoch: header.producerEpoch,
            baseSequence: header.baseSequence,
            lastSequence: lastSequenceOf(header),
            isTransactional: header.isTransactional,
          },
          { firstOffset: header.baseOffset, lastOffset: lastOffsetOf(header), timestampMs: header.maxTimestampMs },
        );
        if (opensTxn) ongoing.open(producerId, header.baseOffset);
      }
      if (read.nextOffset <= offset) break;
      offset = read.nextOffset;
    }
    return offset;
  }
}

/** The segment whose offsets hold `offset` (segments are sorted and contiguous). */
function segmentOf(segments: SegmentTxnIndex[], offset: number): SegmentTxnIndex {
  let lo = 0;
  let hi = segments.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (segments[mid]!.baseOffset <= offset) lo = mid;
    else hi = mid - 1;
  }
  return segments[lo]!;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
