/**
 * The write side of one partition log (partition-log.ts is the facade, whose file comment has the rules;
 * docs/architecture.md, "The partition log"): `append` assigns offsets, stamps and indexes the batches in
 * place and queues their bytes; one pump writes the queue out in order, coalescing queued writes to one
 * segment into one write call, and performs rolls in queue order (the old segment made durable before
 * the next one's file exists); `flush` is the group commit that advances the durable end offset (pipelined:
 * see `flush`); the log checkpoint is rewritten after rolls and now and then after flushes. Any failed
 * write, fsync or checkpoint fails the log (`fail`).
 */
import { FatalError } from "../../errors/errors.ts";
import {
  BATCH_HEADER_BYTES,
  batchSizeAt,
  lastOffsetDeltaAt,
  maxTimestampAt,
  setBaseOffset,
  setMaxTimestamp,
  setPartitionLeaderEpoch,
} from "../../protocol/records/record-batch.ts";
import { fsyncDirOrDie, writeFileAtomic } from "../atomic-file.ts";
import { GroupCommit } from "./group-commit.ts";
import type { OffsetIndex, TimeIndex } from "./indexes.ts";
import { saveLogCheckpoint } from "./log-checkpoint.ts";
import { INT32_MAX, type AppendOptions, type AppendResult } from "./partition-log-types.ts";
import type { PartitionLogState } from "./partition-state.ts";
import { Segment } from "./segment.ts";
import type { SegmentHandleCache } from "./segment-handle-cache.ts";
import type { SegmentIndexCache } from "./segment-index-cache.ts";

interface WriteOp {
  kind: "write";
  segment: Segment;
  position: number;
  bytes: Uint8Array;
  endOffset: number;
  done: Deferred;
}

interface RollOp {
  kind: "roll";
  old: Segment;
  next: Segment;
  /** `old` is an empty segment of an older epoch at the same base: `next` takes its place (startEpoch). */
  replacesEmpty: boolean;
  oldIndex: OffsetIndex;
  oldTimeIndex: TimeIndex;
  done: Deferred;
}

type IoOp = WriteOp | RollOp;

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A caller may never await `written`; its failure is reported through the log's failed state.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** Queued writes are merged into one write call up to this size. */
const COALESCE_BYTES_MAX = 4 * 1024 * 1024;

export class PartitionAppender {
  private ioQueue: (IoOp | undefined)[] = [];
  private ioHead = 0;
  private pumping = false;
  /** The running pump (writes and rolls), if any: close waits for it, failed log or not. */
  pumpRun: Promise<void> = Promise.resolve();
  /** Settles when every operation queued so far has completed. */
  tail: Promise<void> = Promise.resolve();
  /** Segments with writes that no fsync has covered yet. */
  private readonly unsynced = new Set<Segment>();
  /** The flush that callers join: requested, its writes not yet all performed, so nothing captured yet. */
  private gathering: Promise<void> | undefined;
  /** Every flush not yet settled (close waits for them: they use the handles). */
  private readonly flushes = new Set<Promise<void>>();
  /** Settles once the last flush captured so far and every one before it have settled. */
  private lastCaptured: Promise<void> = Promise.resolve();
  readonly checkpointer: GroupCommit;

  constructor(
    private readonly state: PartitionLogState,
    private readonly handles: SegmentHandleCache,
    private readonly indexes: SegmentIndexCache,
  ) {
    // A failed fsync or checkpoint write leaves what is on disk unknown: the log fails as a whole.
    this.checkpointer = new GroupCommit(() => this.failOnError(this.runCheckpoint()));
  }

  /**
   * Appends a record set that was validated (validateProduceRecordSet, or built by the broker such as a
   * control batch). Assigns offsets from logEndOffset on, rewriting the batches in place.
   */
  append(recordSet: Uint8Array, options: AppendOptions = {}): AppendResult {
    const state = this.state;
    state.assertWritable();
    const setBytes = recordSet.length;
    if (setBytes === 0) throw new RangeError("cannot append an empty record set");
    // First pass: whole batches only, and how many offsets they take. Nothing is modified yet.
    let offsets = 0;
    for (let position = 0; position < setBytes; ) {
      if (setBytes - position < BATCH_HEADER_BYTES) throw new RangeError(`record set has a partial batch at ${position}`);
      const size = batchSizeAt(recordSet, position);
      if (size < BATCH_HEADER_BYTES || position + size > setBytes) throw new RangeError(`record set has a bad batch length at ${position}`);
      offsets += lastOffsetDeltaAt(recordSet, position) + 1;
      position += size;
    }
    const nowMs = state.clock.nowMs();
    const baseOffset = state.logEnd;
    const lastOffset = baseOffset + offsets - 1;
    let segment = state.active;
    if (this.shouldRoll(segment, setBytes, lastOffset, nowMs)) segment = this.roll(nowMs);

    // Second pass: assign offsets, stamp, index.
    const segmentPosition = segment.sizeBytes;
    const logAppendTime = options.timestampType === "log-append-time";
    let offset = baseOffset;
    for (let position = 0; position < setBytes; ) {
      const size = batchSizeAt(recordSet, position);
      setBaseOffset(recordSet, position, offset);
      if (options.partitionLeaderEpoch !== undefined) setPartitionLeaderEpoch(recordSet, position, options.partitionLeaderEpoch);
      if (logAppendTime) setMaxTimestamp(recordSet, position, "log-append-time", nowMs);
      segment.indexBatch(offset, segmentPosition + position, size, maxTimestampAt(recordSet, position), state.config.indexIntervalBytes);
      offset += lastOffsetDeltaAt(recordSet, position) + 1;
      position += size;
    }
    segment.sizeBytes += setBytes;
    segment.endOffset = offset;
    state.logEnd = offset;
    state.totalBytes += setBytes;
    this.unsynced.add(segment);
    const done = deferred();
    this.enqueue({ kind: "write", segment, position: segmentPosition, bytes: recordSet, endOffset: offset, done });
    return { baseOffset, lastOffset, logAppendTimeMs: logAppendTime ? nowMs : -1, written: done.promise };
  }

  /**
   * Resolves when every queued write and roll is done and no checkpoint write is in flight (background
   * checkpoints follow rolls and periodic flushes). For tests and orderly shutdown.
   */
  async settled(): Promise<void> {
    await this.tail.catch(() => undefined);
    await this.checkpointer.idle();
  }

  /**
   * Group commit, pipelined: resolves once every append made before the call is durable. Callers join the
   * flush that is still gathering (waiting for queued writes to be performed); once those are performed it
   * captures what it covers (the log end, the segments written) and fsyncs, and the next caller starts
   * the next flush at once, without waiting for this fsync to end. The file system's batched sync below
   * (platform/batched-sync.ts) makes the fsyncs of one event-loop turn share a syncfs and lets one wait for
   * the one in flight, so a caller waits for at most the sync in flight and the next, where waiting for
   * this partition's previous flush to end first could cost a third: a transaction's markers, ten
   * partitions each busy with other producers' flushes, took the longest of ten such waits.
   */
  flush(): Promise<void> {
    if (this.state.failure !== undefined) return Promise.reject(this.state.failure);
    if (this.state.durableEnd >= this.state.logEnd) return Promise.resolve();
    return this.requestFlush();
  }

  /** A flush even when nothing is known to be undurable (close: the final one). */
  requestFlush(): Promise<void> {
    if (this.gathering !== undefined) return this.gathering;
    const flush = this.failOnError(this.runFlush());
    // runFlush awaits before it captures anything, so `gathering` is set before it can be cleared.
    this.gathering = flush;
    this.flushes.add(flush);
    const forget = () => {
      this.flushes.delete(flush);
      if (this.gathering === flush) this.gathering = undefined;
    };
    flush.then(forget, forget);
    return flush;
  }

  /** Resolves when no flush is in flight (failures are the requesters' to see). */
  async flushesIdle(): Promise<void> {
    while (this.flushes.size > 0) await Promise.all([...this.flushes].map((f) => f.catch(() => undefined)));
  }

  private shouldRoll(segment: Segment, setBytes: number, lastOffset: number, nowMs: number): boolean {
    if (segment.sizeBytes === 0) return false;
    return (
      segment.sizeBytes + setBytes > this.state.config.segmentBytes ||
      nowMs - segment.createdMs >= this.state.config.segmentMs ||
      // Relative offsets in the index are int32.
      lastOffset - segment.baseOffset > INT32_MAX
    );
  }

  /**
   * Starts a new active segment at logEndOffset, named with the writer epoch; the files change in
   * `completeRoll`, in queue order. An empty active segment of an older epoch is replaced rather than
   * left before a segment of the same base (startEpoch).
   */
  roll(nowMs: number): Segment {
    const old = this.state.active;
    const next = new Segment(this.state.dir, this.state.logEnd, nowMs, this.state.writerEpoch);
    next.resetIndexes();
    next.pinned = true;
    const replacesEmpty = old.epoch < this.state.writerEpoch && old.sizeBytes === 0 && old.baseOffset === this.state.logEnd;
    const oldIndex = old.offsetIndex!;
    const oldTimeIndex = old.timeIndex!;
    if (replacesEmpty) {
      this.state.segments[this.state.segments.length - 1] = next;
    } else {
      this.state.segments.push(next);
      // The old segment keeps its in-memory offset index as a cache entry (not evictable while pinned,
      // since its file is written only by completeRoll).
      this.indexes.cacheIndex(old);
    }
    this.enqueue({ kind: "roll", old, next, replacesEmpty, oldIndex, oldTimeIndex, done: deferred() });
    return next;
  }

  /**
   * The old segment's data and index files are made durable *before* the next segment's file exists.
   * Recovery relies on this order: a segment followed by another one can never have a torn tail.
   */
  private async completeRoll(op: RollOp): Promise<void> {
    const { old, next } = op;
    if (!op.replacesEmpty) {
      old.finalizeTimeIndex(op.oldTimeIndex);
      await Promise.all([
        this.fsyncHandle(old),
        writeFileAtomic(this.state.fs, old.indexPath, op.oldIndex.encode()),
        writeFileAtomic(this.state.fs, old.timeIndexPath, op.oldTimeIndex.encode()),
      ]);
    }
    const handle = await this.state.fs.open(next.logPath, "rw");
    if (this.state.closed) {
      await handle.close().catch(() => undefined);
      throw new Error(`partition log ${this.state.dir} is closed`);
    }
    next.handle = handle;
    // The segment's (empty) aborted-transaction index exists from the start, durable with the segment's
    // name: a missing one is then a lost one. No entry can be appended to it before this: entries are
    // written after the marker's own write, which is queued after this roll.
    await (await this.state.fs.open(next.txnIndexPath, "w")).close();
    await fsyncDirOrDie(this.state.fs, this.state.dir, `after creating ${next.logPath}`);
    old.durableBytes = old.sizeBytes;
    // Inactive segments read their time index from the file on demand.
    old.timeIndex = undefined;
    old.pinned = false;
    this.unsynced.delete(old);
    if (op.replacesEmpty) {
      // Not in the log any more; its files stay (a former leader may hold them), only its handle closes.
      old.retired = true;
      old.filesReplaced = true;
      if (old.refs === 0) this.handles.trackDeletion(this.handles.destroy(old));
    } else {
      this.handles.keepOpen(old);
    }
    if (next.baseOffset > this.state.durableEnd) {
      this.state.durableEnd = next.baseOffset;
      this.state.notify();
    }
    this.requestCheckpoint();
  }

  private async fsyncHandle(segment: Segment): Promise<void> {
    const handle = await this.handles.acquire(segment);
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${segment.logPath} failed`, { cause: error });
    } finally {
      this.handles.release(segment);
    }
  }

  private enqueue(op: IoOp): void {
    this.ioQueue.push(op);
    this.tail = op.done.promise;
    if (!this.pumping) this.pumpRun = this.pump();
  }

  /** Performs queued writes and rolls in order, merging consecutive writes to one segment. */
  private async pump(): Promise<void> {
    const state = this.state;
    this.pumping = true;
    try {
      while (this.ioHead < this.ioQueue.length && state.failure === undefined) {
        const op = this.ioQueue[this.ioHead]!;
        if (op.kind === "roll") {
          await this.completeRoll(op);
          this.ioQueue[this.ioHead++] = undefined;
          op.done.resolve();
          continue;
        }
        let last = this.ioHead;
        let total = op.bytes.length;
        while (last + 1 < this.ioQueue.length) {
          const next = this.ioQueue[last + 1]!;
          if (next.kind !== "write" || next.segment !== op.segment || total + next.bytes.length > COALESCE_BYTES_MAX) break;
          last++;
          total += next.bytes.length;
        }
        let data = op.bytes;
        if (last > this.ioHead) {
          data = new Uint8Array(total);
          for (let i = this.ioHead, at = 0; i <= last; i++) {
            const w = this.ioQueue[i] as WriteOp;
            data.set(w.bytes, at);
            at += w.bytes.length;
          }
        }
        await op.segment.handle!.write(data, op.position);
        const lastOp = this.ioQueue[last] as WriteOp;
        op.segment.writtenBytes = lastOp.position + lastOp.bytes.length;
        // Every batch appended was checked before (a produced one's CRC by produce validation) or built here.
        op.segment.verified.add(op.position, op.segment.writtenBytes);
        state.writtenEnd = lastOp.endOffset;
        for (let i = this.ioHead; i <= last; i++) {
          (this.ioQueue[i] as WriteOp).done.resolve();
          this.ioQueue[i] = undefined;
        }
        this.ioHead = last + 1;
        // Under sustained load the queue may never drain: drop the finished prefix now and then.
        if (this.ioHead >= 1024 && this.ioHead * 2 >= this.ioQueue.length) {
          this.ioQueue = this.ioQueue.slice(this.ioHead);
          this.ioHead = 0;
        }
        state.notify();
      }
      this.ioQueue = this.ioQueue.slice(this.ioHead);
      this.ioHead = 0;
    } catch (error) {
      this.fail(error);
    } finally {
      this.pumping = false;
    }
  }

  private async runFlush(): Promise<void> {
    // Until every queued write is performed: what is captured below must be on its way to the page cache.
    // Callers keep joining meanwhile; their appends are queued before the tail settles, so they are covered.
    // The loop ends: the pump performs a queue's writes without giving way to new requests (its writes
    // return at once), so only a roll's file work lets new appends in between two looks.
    for (;;) {
      const tail = this.tail;
      await tail;
      if (this.tail === tail) break;
    }
    // The capture, in one synchronous step: from here a caller starts the next flush.
    this.gathering = undefined;
    const target = this.state.logEnd;
    const segments = [...this.unsynced];
    const sizes = segments.map((s) => s.sizeBytes);
    this.unsynced.clear();
    // The flushes captured before this one cover writes below `target` that this one does not fsync again
    // (their segments left `unsynced` with them): the durable end moves only once they are done too.
    const earlier = this.lastCaptured;
    let captured!: () => void;
    this.lastCaptured = new Promise<void>((resolve) => (captured = resolve));
    try {
      // A segment whose roll completed was fsynced by the roll.
      await Promise.all(segments.filter((s) => s.pinned).map((s) => this.fsyncHandle(s)));
    } catch (error) {
      // Failed before the flushes after this one go on: they look at the failure below.
      this.fail(error);
      captured();
      throw error;
    }
    await earlier;
    captured();
    // An earlier flush that failed failed the log: nothing of this one may count as durable either.
    if (this.state.failure !== undefined) throw this.state.failure;
    segments.forEach((s, i) => (s.durableBytes = Math.max(s.durableBytes, sizes[i]!)));
    if (target > this.state.durableEnd) {
      this.state.durableEnd = target;
      this.state.notify();
    }
    if (this.state.clock.monotonicMs() - this.state.lastCheckpointMonotonicMs >= this.state.config.recoveryPointCheckpointIntervalMs) {
      this.requestCheckpoint();
    }
  }

  async failOnError(operation: Promise<void>): Promise<void> {
    try {
      await operation;
    } catch (error) {
      this.fail(error);
      throw this.state.failure;
    }
  }

  fail(error: unknown): void {
    if (this.state.failure !== undefined) return;
    this.state.failure =
      error instanceof FatalError ? error : new FatalError(`partition log ${this.state.dir} failed: ${messageOf(error)}`, { cause: error });
    for (let i = this.ioHead; i < this.ioQueue.length; i++) this.ioQueue[i]?.done.reject(this.state.failure);
    this.ioQueue = [];
    this.ioHead = 0;
    this.state.notify();
  }

  /** A checkpoint write in the background; its failure fails the log (see the constructor). */
  requestCheckpoint(): void {
    this.checkpointer.request().catch(() => undefined);
  }

  private async runCheckpoint(): Promise<void> {
    this.state.lastCheckpointMonotonicMs = this.state.clock.monotonicMs();
    await saveLogCheckpoint(this.state.fs, this.state.checkpointPath, {
      logStartOffset: this.state.logStart,
      recoveryPoint: this.state.durableEnd,
      cleanShutdown: null,
    });
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
