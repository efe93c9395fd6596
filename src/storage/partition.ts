/**
 * One partition as the broker leads it: its durable log and its producer state (the idempotence windows),
 * kept consistent by doing classification, append and the producer-state update in one synchronous step.
 *
 * Producer state survives crashes: it is rebuilt at open from `producer-state.snapshot` (written at clean
 * close and periodically) plus a replay of the log after the snapshot's offset. A snapshot that fails its
 * check is reported and ignored, and the whole log is replayed: never trusted, never silently empty.
 *
 * The high watermark is the durable end offset: a fetch never exposes bytes that an acks=-1 writer has not
 * made durable. Every append asks for a flush (group commit), so acks=0/1 data becomes visible one fsync
 * later without waiting for anything else.
 */
import {
  applyAppend,
  applyMarker,
  classifyBatch,
  createProducerState,
  expire,
  type ProducerStateTable,
} from "../domain/producer-state.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import {
  BATCH_HEADER_BYTES,
  lastOffsetOf,
  lastSequenceOf,
  parseBatchHeader,
  parseControlRecord,
  type BatchHeader,
  type TimestampType,
} from "../protocol/records/record-batch.ts";
import { PartitionLog, type AppendResult, type LogConfig } from "./log/partition-log.ts";
import { readSnapshot, writeSnapshot } from "./producer-state-snapshot.ts";

export type ProduceOutcome =
  | { kind: "appended"; baseOffset: number; logAppendTimeMs: number; written: Promise<void> }
  /** A retry of a batch already in the log: the original offsets, nothing written. */
  | { kind: "duplicate"; baseOffset: number; logAppendTimeMs: number }
  | { kind: "error"; errorCode: number; message: string };

/** How much log one replay read takes at a time while rebuilding producer state. */
const REPLAY_READ_BYTES = 1024 * 1024;

export class Partition {
  /** Producer state changed since the last snapshot. */
  private dirty = false;
  /** Set when close() starts (the topic is being deleted, or the broker stops). */
  private closeStarted = false;
  private readonly closeListeners = new Set<() => void>();

  private constructor(
    private readonly fs: Fs,
    readonly topic: string,
    readonly partition: number,
    readonly dir: string,
    readonly log: PartitionLog,
    readonly producers: ProducerStateTable,
    private timestampType: TimestampType,
  ) {}

  static async open(opts: {
    fs: Fs;
    clock: Clock;
    topic: string;
    partition: number;
    dir: string;
    logConfig: LogConfig;
    timestampType: TimestampType;
    warn: (message: string, fields?: Record<string, unknown>) => void;
  }): Promise<Partition> {
    const log = await PartitionLog.open(opts.fs, opts.dir, opts.logConfig, opts.clock);
    try {
      return await Partition.restore(log, opts);
    } catch (error) {
      await log.close().catch(() => {});
      throw error;
    }
  }

  private static async restore(
    log: PartitionLog,
    opts: Parameters<typeof Partition.open>[0],
  ): Promise<Partition> {
    let producers = createProducerState();
    let replayFrom = log.logStartOffset;
    const snapshot = await readSnapshot(opts.fs, opts.dir);
    if (snapshot?.kind === "corrupt") {
      opts.warn("producer state snapshot is corrupt; rebuilding it from the log", { dir: opts.dir, reason: snapshot.reason });
    } else if (snapshot?.kind === "loaded") {
      if (snapshot.offset >= log.logStartOffset && snapshot.offset <= log.logEndOffset) {
        producers = snapshot.state;
        replayFrom = snapshot.offset;
      } else {
        opts.warn("producer state snapshot does not fit the log; rebuilding it from the log", {
          dir: opts.dir,
          snapshotOffset: snapshot.offset,
          logStartOffset: log.logStartOffset,
          logEndOffset: log.logEndOffset,
        });
      }
    }
    const partition = new Partition(opts.fs, opts.topic, opts.partition, opts.dir, log, producers, opts.timestampType);
    await partition.replay(replayFrom);
    return partition;
  }

  get highWatermark(): number {
    return this.log.durableEndOffset;
  }

  /** Without transactions every offset below the high watermark is stable. */
  get lastStableOffset(): number {
    return this.log.durableEndOffset;
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
    if (batch.isTransactional) {
      // No partition is ever part of an ongoing transaction until the transaction coordinator adds it
      // (AddPartitionsToTxn); refusing here is what prevents hanging transactions.
      return {
        kind: "error",
        errorCode: ErrorCode.INVALID_TXN_STATE,
        message: `The producer ${batch.producerId} attempted to produce to a partition that is not part of its ongoing transaction`,
      };
    }
    if (info) {
      const classification = classifyBatch(this.producers, info);
      if (classification.kind === "duplicate") {
        return {
          kind: "duplicate",
          baseOffset: classification.firstOffset,
          logAppendTimeMs: this.timestampType === "log-append-time" ? classification.timestampMs : -1,
        };
      }
      if (classification.kind === "error") return classification;
    }
    const appended: AppendResult = this.log.append(recordSet, { timestampType: this.timestampType, partitionLeaderEpoch: 0 });
    if (info) {
      // The append is assigned and queued; a failed write fails the log and the process (recovery then
      // rebuilds producer state from what really reached the disk).
      applyAppend(this.producers, info, {
        firstOffset: appended.baseOffset,
        lastOffset: appended.lastOffset,
        timestampMs: appended.logAppendTimeMs >= 0 ? appended.logAppendTimeMs : batch.maxTimestampMs,
      });
      this.dirty = true;
    }
    // Group commit: the high watermark advances with the next fsync whatever the acks.
    void this.log.flush().catch(() => {
      // The log is failed; every waiter sees the FatalError, and the broker exits.
    });
    return { kind: "appended", baseOffset: appended.baseOffset, logAppendTimeMs: appended.logAppendTimeMs, written: appended.written };
  }

  /** Drops producers idle for longer than producer.id.expiration.ms (never one with an open transaction). */
  expireProducers(nowMs: number, producerIdExpirationMs: number): number {
    const removed = expire(this.producers, nowMs, producerIdExpirationMs);
    if (removed > 0) this.dirty = true;
    return removed;
  }

  /** Writes the producer-state snapshot if anything changed since the last one. */
  async snapshotIfDirty(): Promise<boolean> {
    if (!this.dirty) return false;
    this.dirty = false;
    // The snapshot covers everything assigned so far; data below it must be durable before it claims so.
    const offset = this.log.logEndOffset;
    await this.log.flush();
    await writeSnapshot(this.fs, this.dir, offset, this.producers);
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

  /** Rebuilds producer state from the log after `from`, batch header by batch header. */
  private async replay(from: number): Promise<void> {
    let offset = from;
    const end = this.log.logEndOffset;
    while (offset < end) {
      const read = await this.log.read(offset, REPLAY_READ_BYTES, { minOneBatch: true, upToOffset: end });
      if (read.kind !== "records" || read.bytes.length === 0) break;
      const bytes = read.bytes;
      for (let position = 0; position + BATCH_HEADER_BYTES <= bytes.length; ) {
        const header = parseBatchHeader(bytes, position);
        position += header.sizeBytes;
        if (lastOffsetOf(header) < offset || header.producerId < 0) continue;
        if (header.isControl) {
          const control = parseControlRecord(bytes, header.position);
          applyMarker(this.producers, header.producerId, header.producerEpoch, {
            coordinatorEpoch: control.coordinatorEpoch,
            offset: header.baseOffset,
            timestampMs: header.maxTimestampMs,
            isCommit: control.type === "commit",
          });
          continue;
        }
        const info = {
          producerId: header.producerId,
          producerEpoch: header.producerEpoch,
          baseSequence: header.baseSequence,
          lastSequence: lastSequenceOf(header),
          isTransactional: header.isTransactional,
        };
        applyAppend(this.producers, info, {
          firstOffset: header.baseOffset,
          lastOffset: lastOffsetOf(header),
          timestampMs: header.maxTimestampMs,
        });
      }
      if (read.nextOffset <= offset) break;
      offset = read.nextOffset;
    }
    this.dirty = offset > from;
  }
}
