/**
 * The durable log of one partition: a directory of segments holding RecordBatch v2 bytes exactly as
 * produced (offsets assigned), sparse offset and time indexes, and a small checkpoint file.
 *
 * Writing. `append` is synchronous: it assigns offsets, rewrites the batch headers in place, updates the
 * in-memory indexes and queues the bytes for writing, then returns the offsets at once with a `written`
 * promise. The Produce handler can therefore classify a batch against producer state, append it and
 * record its offsets in one synchronous step, with no lock. Writes go out in order through one queue;
 * writes queued while another is in flight are coalesced into one write call (one copy at most; a lone
 * write is not copied at all). The caller's buffer is written as is, so it must not be reused before
 * `written` settles.
 *
 * Durability. `flush` is a group commit: one fsync covers every append made before it started, and the
 * callers that arrive while it runs share the next one. Three end offsets are exposed:
 * `logEndOffset` (assigned), `writtenEndOffset` (readable), `durableEndOffset` (fsynced). The caller
 * decides what the high watermark is (docs/architecture.md, "Storage rules": never beyond durableEndOffset).
 * Nothing advances durableEndOffset but `flush` (and a roll), so the Produce handler should request a flush
 * after every append, awaiting it only for acks=-1; group commit keeps that at about one fsync per fsync
 * latency.
 *
 * Any failed write, fsync or rename makes the log failed: every pending and later operation rejects with
 * a FatalError, and the process is expected to exit and recover at the next start (docs/architecture.md,
 * "Conventions").
 *
 * Recovery at open (see `recover`):
 * - A segment with a later segment after it was fsynced, with its index files, before that later segment
 *   was created (`completeRoll`). So only the last segment can have a torn tail; any bad batch anywhere
 *   else is corruption, and open fails with a CorruptStateError naming the file and position.
 * - Segments wholly below the checkpointed recovery point are trusted without a scan (their index files
 *   are checked when first used and rebuilt if missing or unsound), after a cheap look
 *   (`trustedSegmentProblem`: not empty while offsets belong to it, not shorter than its offset index
 *   says, sound batches from its last index entry to exactly its end and its successor's base offset);
 *   a segment that fails the look is scanned. Any other segment is scanned batch by batch (CRC-32C,
 *   framing, contiguous offsets) and its indexes rebuilt. The last segment is also trusted after a clean
 *   shutdown when its size is exactly what the clean close recorded.
 * - In the last segment, the first bad batch is a torn tail, and the file is truncated there, unless
 *   (a) it starts below the recovery point, i.e. in data that was known durable, or (b) its own length
 *   leads to a sound batch that continues its offsets. Both mean damage inside the log, and open fails.
 * - The log must reach the recovery point and the log start offset: durable data never goes missing
 *   silently.
 * - Nothing below the recovery point is ever cut or deleted by recovery: a damaged segment fails the
 *   open with a CorruptStateError naming it, and its files stay for the operator (the broker refuses
 *   the partition and serves the others, broker/partitions.ts).
 *
 * Reading checks what it returns: every batch's header as the window is walked (length within the
 * written data, magic, offsets contiguous and inside the segment) and its CRC-32C once the range is in
 * memory, so that damage that recovery trusted past is never served. A read stops before a damaged batch
 * (`damage` on the result) and a read that starts at one answers "damaged" (docs/operations.md, "Damaged
 * data"). `scrubSegments` and `readForScrub` let the background scrubber (segment-scrubber.ts) read the
 * segments without mistaking a segment deleted or swapped meanwhile for the one it listed.
 *
 * Leader epochs (docs/architecture.md, "Files of a leader epoch"). The log writes the files of one epoch,
 * `writerEpoch`: new segments and its checkpoints carry it in their names (epoch-files.ts; epoch 0 keeps
 * the plain names). `startEpoch` moves a log to a newer epoch: the active segment is rolled (an empty one
 * of an older epoch is replaced) so that nothing the new epoch appends goes into an older epoch's file.
 * At open, a segment file of epoch f based at or past `fencedFrom(f)` (the first later epoch's start, by
 * the history and by the later epochs' segment files) is ignored, and the last kept segment of f is read
 * only up to that offset (or to the first batch stamped with an epoch fenced there): a former leader's
 * late writes are not part of the log and not damage. Reads never pass a segment's recorded end, whatever
 * the file grew to. Retention and cleaner swaps ask `mayWrite` right before each unlink and rename.
 *
 * Aborted-transaction index (`.txnindex`, txn-index.ts). Every segment gets an empty one when it is created
 * (in the same directory fsync as its `.log`), so a missing file means a lost one. The log only stores the
 * bytes: `appendTxnIndexEntry` appends one entry to the file of the segment holding the marker, after the
 * marker's own write and before a roll could create a later file of the same name, and fsyncs it; entries
 * go out one at a time in call order. The Partition decides what the entries are and, at open, reads the
 * files (`readTxnIndexes`), rebuilds the ones that are missing or damaged from the log and replaces them
 * (`rewriteTxnIndex`). Retention deletes a segment's `.txnindex` with it.
 *
 * Where the code lives (docs/architecture.md, "The partition log"): this class is the facade the rest of
 * the code uses, and keeps what touches several parts at once (leader epochs, the aborted-transaction
 * index files, the scrubber's and the cleaner's views, the swap of cleaned segments, close). The parts
 * share one PartitionLogState (partition-state.ts): appends, the write queue, flushes and checkpoints
 * (partition-append.ts), reads and timestamp lookups (partition-read.ts), retention and DeleteRecords
 * (partition-retention.ts), recovery at open (partition-recovery.ts), segment file handles
 * (segment-handle-cache.ts) and indexes (segment-index-cache.ts). The types are in partition-log-types.ts.
 */
import { FatalError } from "../../errors/errors.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Fs } from "../../platform/fs.ts";
import { writeFileAtomic } from "../atomic-file.ts";
import { join } from "node:path";
import { CLEANER_CHECKPOINT_FILE, saveCleanerCheckpoint, type CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import { epochFileName } from "./epoch-files.ts";
import { saveLogCheckpoint } from "./log-checkpoint.ts";
import { PartitionAppender } from "./partition-append.ts";
import {
  INT32_MAX,
  validateConfig,
  type AppendOptions,
  type AppendResult,
  type CleanableSegment,
  type CleanedSegment,
  type DeleteRecordsResult,
  type LogConfig,
  type LogOpenOptions,
  type ReadOptions,
  type ReadResult,
  type RecoveryReport,
  type RetentionResult,
  type ScrubSegment,
  type TimestampAndOffset,
} from "./partition-log-types.ts";
import { PartitionReader } from "./partition-read.ts";
import { PartitionRecovery } from "./partition-recovery.ts";
import { PartitionRetention } from "./partition-retention.ts";
import { PartitionLogState } from "./partition-state.ts";
import { Segment } from "./segment.ts";
import { SegmentHandleCache } from "./segment-handle-cache.ts";
import { readIfExists, SegmentIndexCache } from "./segment-index-cache.ts";
import { commitSwap, SwapFencedError, type SwapManifest } from "./segment-swap.ts";

export {
  DEFAULT_LOG_CONFIG,
  type AppendOptions,
  type AppendResult,
  type BatchDamage,
  type CleanableSegment,
  type CleanedSegment,
  type DeleteRecordsResult,
  type LogConfig,
  type LogOpenOptions,
  type ReadBuffers,
  type ReadOptions,
  type ReadResult,
  type RecoveryReport,
  type RetentionResult,
  type ScrubSegment,
  type TimestampAndOffset,
} from "./partition-log-types.ts";

export class PartitionLog {
  private readonly state: PartitionLogState;
  private readonly handles: SegmentHandleCache;
  private readonly indexes: SegmentIndexCache;
  private readonly appender: PartitionAppender;
  private readonly reader: PartitionReader;
  private readonly retention: PartitionRetention;
  private readonly listeners = new Set<() => void>();
  /** The aborted-transaction index writes, one after the other (see appendTxnIndexEntry). */
  private txnIndexWrites: Promise<void> = Promise.resolve();
  /** readTxnIndexes has run: every segment knows the size of its `.txnindex`. */
  private txnIndexesLoaded = false;

  private constructor(
    fs: Fs,
    readonly dir: string,
    config: LogConfig,
    clock: Clock,
    options: LogOpenOptions,
  ) {
    this.state = new PartitionLogState(fs, dir, config, clock, options, this.listeners);
    this.handles = new SegmentHandleCache(this.state);
    this.indexes = new SegmentIndexCache(this.state, this.handles);
    this.appender = new PartitionAppender(this.state, this.handles, this.indexes);
    this.reader = new PartitionReader(this.state, this.handles, this.indexes);
    this.retention = new PartitionRetention(this.state, this.handles, this.indexes, this.appender);
  }

  /** What `open` found and did; for logs and tests. */
  get recoveryReport(): RecoveryReport {
    return this.state.recoveryReport;
  }

  /**
   * Applies changed topic configs (retention, segment size and age). Takes effect at the next append,
   * roll or retention pass; nothing already written is rewritten.
   */
  updateConfig(config: LogConfig): void {
    this.state.config = validateConfig(config);
  }

  /** Opens (creating if needed) the log in `dir` and recovers it; see the file comment. */
  static async open(fs: Fs, dir: string, config: LogConfig, clock: Clock, options: LogOpenOptions = {}): Promise<PartitionLog> {
    const log = new PartitionLog(fs, dir, config, clock, options);
    try {
      await new PartitionRecovery(log.state, log.handles, log.indexes).recover();
    } catch (error) {
      await log.handles.closeHandles();
      throw error;
    }
    return log;
  }

  // ---- state ------------------------------------------------------------------------------------

  get logStartOffset(): number {
    return this.state.logStart;
  }

  /** Next offset to assign: includes appends whose write is still in flight. */
  get logEndOffset(): number {
    return this.state.logEnd;
  }

  /** Offsets below this are written and readable. */
  get writtenEndOffset(): number {
    return this.state.writtenEnd;
  }

  /** Offsets below this are fsynced: the most the high watermark may expose. */
  get durableEndOffset(): number {
    return this.state.durableEnd;
  }

  get sizeBytes(): number {
    return this.state.totalBytes;
  }

  get segmentCount(): number {
    return this.state.segments.length;
  }

  get segmentBaseOffsets(): number[] {
    return this.state.segments.map((s) => s.baseOffset);
  }

  /** The FatalError that stopped the log, if one did. */
  get failed(): FatalError | undefined {
    return this.state.failure;
  }

  /** Closing or closed (its topic deleted, its partition released, the broker stopping): nothing more is written. */
  get closed(): boolean {
    return this.state.closing || this.state.closed;
  }

  /**
   * Calls `listener` (synchronously, with no arguments) whenever writtenEndOffset or durableEndOffset
   * advances, the log start moves, or the log fails: the Fetch long-poll re-checks its condition then.
   * Returns the unsubscribe function.
   */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // ---- append (partition-append.ts) -------------------------------------------------------------

  /**
   * Appends a record set that was validated (validateProduceRecordSet, or built by the broker such as a
   * control batch). Assigns offsets from logEndOffset on, rewriting the batches in place.
   */
  append(recordSet: Uint8Array, options: AppendOptions = {}): AppendResult {
    return this.appender.append(recordSet, options);
  }

  /**
   * Resolves when every queued write and roll is done and no checkpoint write is in flight (background
   * checkpoints follow rolls and periodic flushes). For tests and orderly shutdown.
   */
  settled(): Promise<void> {
    return this.appender.settled();
  }

  /** Group commit: resolves once every append made before the call is durable. */
  flush(): Promise<void> {
    return this.appender.flush();
  }

  // ---- aborted-transaction index files ------------------------------------------------------------

  /**
   * The `.txnindex` bytes of every segment, oldest first, with the segment's offset range [baseOffset,
   * endOffset); `bytes` is undefined when the file is missing. Called once at open, before any append.
   */
  async readTxnIndexes(): Promise<{ baseOffset: number; endOffset: number; bytes: Uint8Array | undefined; path: string; mayHoldLateEntries: boolean }[]> {
    this.state.assertWritable();
    const out: { baseOffset: number; endOffset: number; bytes: Uint8Array | undefined; path: string; mayHoldLateEntries: boolean }[] = [];
    for (const segment of this.state.segments) {
      const bytes = await readIfExists(this.state.fs, segment.txnIndexPath);
      segment.txnIndexBytes = bytes?.length ?? 0;
      out.push({
        baseOffset: segment.baseOffset,
        endOffset: segment === this.state.active ? this.state.logEnd : segment.endOffset,
        bytes,
        path: segment.txnIndexPath,
        mayHoldLateEntries: segment.followedByLaterEpoch,
      });
    }
    this.txnIndexesLoaded = true;
    return out;
  }

  /** Replaces the `.txnindex` of the segment based at `baseOffset` (a rebuild or repair at open). */
  async rewriteTxnIndex(baseOffset: number, bytes: Uint8Array): Promise<void> {
    this.state.assertWritable();
    const segment = this.state.segments.find((s) => s.baseOffset === baseOffset);
    if (segment === undefined) throw new RangeError(`no segment based at ${baseOffset} in ${this.state.dir}`);
    await this.txnIndexWrites;
    await writeFileAtomic(this.state.fs, segment.txnIndexPath, bytes);
    segment.txnIndexBytes = bytes.length;
  }

  /**
   * Appends `entry` (encoded entries) to the `.txnindex` of the segment holding offset `markerOffset`,
   * once `after` (the marker's own `written`) settles, and fsyncs it. Entries are written one after the
   * other in call order. Resolves when the entry is durable; a failure fails the log.
   */
  appendTxnIndexEntry(markerOffset: number, entry: Uint8Array, after: Promise<void>): Promise<void> {
    this.state.assertWritable();
    if (!this.txnIndexesLoaded) throw new Error(`the aborted-transaction indexes of ${this.state.dir} were not read`);
    if (markerOffset < this.state.active.baseOffset || markerOffset >= this.state.logEnd) {
      throw new RangeError(`marker offset ${markerOffset} is not in the active segment of ${this.state.dir}`);
    }
    const segment = this.state.active;
    const position = segment.txnIndexBytes;
    segment.txnIndexBytes += entry.length;
    const write = this.txnIndexWrites.then(async () => {
      await after;
      if (this.state.failure !== undefined) throw this.state.failure;
      const handle = await this.state.fs.open(segment.txnIndexPath, "rw");
      try {
        await handle.write(entry, position);
        try {
          await handle.fsync();
        } catch (error) {
          throw new FatalError(`fsync of ${segment.txnIndexPath} failed`, { cause: error });
        }
      } finally {
        await handle.close().catch(() => undefined);
      }
    });
    const tracked = this.appender.failOnError(write);
    this.txnIndexWrites = tracked.catch(() => undefined);
    return tracked;
  }

  /** Resolves when every aborted-transaction index entry appended so far is durable; rejects on failure. */
  async txnIndexSettled(): Promise<void> {
    await this.txnIndexWrites;
    if (this.state.failure !== undefined) throw this.state.failure;
  }

  // ---- leader epochs ------------------------------------------------------------------------------

  /**
   * Makes the log write the files of leader epoch `epoch` from now on (a take-over, or becomeLeader on an
   * open partition): the active segment, when it is an older epoch's, is rolled at once (synchronously,
   * so no append after this call goes into it), and the call resolves once the new segment and the
   * log checkpoint of the new epoch are durable (and a cleaner checkpoint of an older epoch is written
   * again as this epoch's). A lower epoch than the writer's is refused; the same one changes nothing.
   */
  async startEpoch(epoch: number): Promise<void> {
    this.state.assertWritable();
    if (!Number.isInteger(epoch) || epoch < this.state.writerEpoch || epoch > INT32_MAX) {
      throw new RangeError(`cannot write the files of epoch ${epoch} in ${this.state.dir}: the log writes epoch ${this.state.writerEpoch}`);
    }
    const moved = epoch > this.state.writerEpoch;
    this.state.writerEpoch = epoch;
    const rolls = this.state.active.epoch < epoch;
    if (rolls) this.appender.roll(this.state.clock.nowMs());
    else if (!moved) return;
    await this.appender.tail;
    if (this.state.failure !== undefined) throw this.state.failure;
    await this.appender.checkpointer.request();
    if (this.state.cleanerCheckpointEpoch >= 0 && this.state.cleanerCheckpointEpoch < epoch) await this.saveCleanerCheckpoint(this.state.cleanerState);
  }

  /** The leader epoch whose files this log writes. */
  get fileEpoch(): number {
    return this.state.writerEpoch;
  }

  /**
   * Where what leader epoch `epoch` wrote stops being part of this log, as open found it (the history it
   * was given and the segment files' epochs; see epoch-files.ts fencedFrom): Infinity when no later
   * epoch followed. The Partition judges its producer-state snapshots of older epochs by it.
   */
  fencedFromEpoch(epoch: number): number {
    return this.state.fenceOf(epoch);
  }

  // ---- scrubbing ----------------------------------------------------------------------------------

  /** The segments for the scrubber, oldest first (see ScrubSegment); none once the log failed or closes. */
  scrubSegments(): ScrubSegment[] {
    if (this.state.failure !== undefined || this.state.closing || this.state.closed) return [];
    return this.state.segments.map((segment) => {
      const active = segment === this.state.active;
      return {
        token: segment,
        baseOffset: segment.baseOffset,
        file: segment.logName,
        verifiableBytes: active ? Math.min(segment.durableBytes, segment.writtenBytes) : segment.sizeBytes,
        endOffset: active ? this.state.logEnd : segment.endOffset,
        cleaned: this.state.mayBeCleaned(segment),
        active,
      };
    });
  }

  /** The scrubber found damage in `target`: reads check its CRCs again instead of trusting earlier checks. */
  forgetChecked(target: ScrubSegment): void {
    (target.token as Segment).verified.clear();
  }

  /**
   * Up to `length` bytes at `position` of a segment `scrubSegments` listed, within its verifiable bytes;
   * undefined when the segment is not the one listed any more (retention deleted it, the cleaner swapped
   * in another under its name, the log failed or closes), before or during the read.
   */
  async readForScrub(target: ScrubSegment, position: number, length: number): Promise<Uint8Array | undefined> {
    if (this.state.swapping !== undefined) await this.state.swapping;
    const segment = target.token as Segment;
    const current = () => this.state.failure === undefined && !this.state.closing && !this.state.closed && !segment.retired && this.state.segments.includes(segment);
    if (!current()) return undefined;
    // Counted as a read: a swap and close wait for it, so the file under the name stays the listed one.
    this.state.inflightReads++;
    try {
      const handle = await this.handles.acquire(segment);
      try {
        const bytes = await handle.read(Math.max(0, Math.min(length, target.verifiableBytes - position)), position);
        return current() ? bytes : undefined;
      } finally {
        this.handles.release(segment);
      }
    } finally {
      this.state.endRead();
    }
  }

  // ---- read (partition-read.ts) -------------------------------------------------------------------

  /**
   * Reads whole batches starting with the one that contains `fetchOffset`, up to `maxBytes` (the first
   * batch is returned even when larger if `minOneBatch`), from one segment, never past writtenEndOffset
   * or `upToOffset`. The bytes are returned exactly as stored.
   */
  read(fetchOffset: number, maxBytes: number, options: ReadOptions = {}): Promise<ReadResult> {
    return this.reader.read(fetchOffset, maxBytes, options);
  }

  /** ListOffsets by timestamp (see PartitionReader.offsetForTimestamp). */
  offsetForTimestamp(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    return this.reader.offsetForTimestamp(timestampMs);
  }

  /** ListOffsets MAX_TIMESTAMP: the first record with the largest timestamp in the log. */
  maxTimestampOffset(): Promise<TimestampAndOffset | undefined> {
    return this.reader.maxTimestampOffset();
  }

  // ---- the log cleaner's view ----------------------------------------------------------------------

  /** What the log cleaner last recorded (see cleaner-checkpoint.ts). */
  get cleanerCheckpoint(): CleanerCheckpoint {
    return this.state.cleanerState;
  }

  /** Records where the cleaner stands, durably, before anything that relies on it happens. */
  async saveCleanerCheckpoint(checkpoint: CleanerCheckpoint): Promise<void> {
    this.state.assertWritable();
    await saveCleanerCheckpoint(this.state.fs, join(this.state.dir, epochFileName(CLEANER_CHECKPOINT_FILE, this.state.writerEpoch)), checkpoint);
    this.state.cleanerState = { ...checkpoint };
    this.state.cleanerCheckpointEpoch = this.state.writerEpoch;
  }

  /** The inactive segments, oldest first: the active segment is never cleaned. */
  cleanableSegments(): CleanableSegment[] {
    const out: CleanableSegment[] = [];
    for (let i = 0; i + 1 < this.state.segments.length; i++) {
      const segment = this.state.segments[i]!;
      out.push({ baseOffset: segment.baseOffset, endOffset: this.state.segments[i + 1]!.baseOffset, sizeBytes: segment.sizeBytes, ...(segment.epoch === 0 ? {} : { epoch: segment.epoch }) });
    }
    return out;
  }

  get activeSegmentBaseOffset(): number {
    return this.state.active.baseOffset;
  }

  /** The largest batch timestamp of the inactive segment based at `baseOffset` (-1 when none). */
  async segmentMaxTimestamp(baseOffset: number): Promise<number> {
    return this.indexes.maxTimestampOf(this.inactiveSegment(baseOffset));
  }

  /** Up to `length` bytes at `position` of the inactive segment based at `baseOffset`. */
  /** Up to `length` bytes at `position` of an inactive segment, read into `into` (CleanableLog). */
  async readSegmentBytes(baseOffset: number, position: number, length: number, into: Uint8Array): Promise<Uint8Array> {
    const segment = this.inactiveSegment(baseOffset);
    const handle = await this.handles.acquire(segment);
    try {
      const want = Math.max(0, Math.min(length, segment.sizeBytes - position));
      if (handle.readInto === undefined) {
        const bytes = await handle.read(want, position);
        into.set(bytes);
        return into.subarray(0, bytes.length);
      }
      let total = 0;
      while (total < want) {
        const read = await handle.readInto(into.subarray(total, want), position + total);
        if (read === 0) break;
        total += read;
      }
      return into.subarray(0, total);
    } finally {
      this.handles.release(segment);
    }
  }

  private inactiveSegment(baseOffset: number): Segment {
    const segment = this.state.segments.find((s) => s.baseOffset === baseOffset);
    if (segment === undefined || segment === this.state.active) throw new RangeError(`no inactive segment based at ${baseOffset} in ${this.state.dir}`);
    return segment;
  }

  /**
   * Runs `work` with retention and other cleaning passes kept out: each of them decides from the segment
   * list the previous one left.
   */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.retention.exclusive(work);
  }

  /**
   * Swaps a cleaned segment in for the adjacent segments it replaces (segment-swap.ts has the file
   * protocol). Reads are held off while the files change (a reader must never open a replaced segment's
   * file name and find the new segment's bytes there), which takes a few renames and two directory
   * fsyncs. Call it inside `exclusive`.
   */
  async replaceSegments(cleaned: CleanedSegment): Promise<void> {
    this.state.assertWritable();
    const first = this.state.segments.findIndex((s) => s.baseOffset === cleaned.replaced[0]);
    const old = this.state.segments.slice(first, first + cleaned.replaced.length);
    if (
      first < 0 ||
      old.length !== cleaned.replaced.length ||
      old.some((s, i) => s.baseOffset !== cleaned.replaced[i] || s === this.state.active)
    ) {
      throw new RangeError(`segments ${cleaned.replaced.join(",")} are not adjacent inactive segments of ${this.state.dir}`);
    }
    const endOffset = this.state.segments[first + old.length]!.baseOffset;
    // Named with the group's newest epoch, so that segment epochs keep rising with offsets (the fencing
    // rule at open relies on it).
    const epoch = Math.max(...old.map((s) => s.epoch));
    let release!: () => void;
    this.state.swapping = new Promise<void>((resolve) => (release = resolve));
    try {
      if (this.state.inflightReads > 0) await new Promise<void>((resolve) => this.state.readsDrained.push(resolve));
      // Fenced before the commit point: nothing changed, the pass fails and the log goes on. (A fence
      // found between the renames fails the log: its files are then half swapped.)
      if (!this.state.mayWrite()) throw new SwapFencedError(`${this.state.dir}: the partition's ownership is gone; the cleaned segment is not swapped in`);
      const manifest: SwapManifest = { baseOffset: cleaned.replaced[0]!, replaced: cleaned.replaced };
      if (old.some((s) => s.epoch !== 0)) {
        manifest.epoch = epoch;
        manifest.replacedEpochs = old.map((s) => s.epoch);
      }
      await this.appender.failOnError(commitSwap(this.state.fs, this.state.dir, manifest, undefined, { epoch: this.state.writerEpoch, mayWrite: this.state.mayWrite }));
      const next = new Segment(this.state.dir, cleaned.replaced[0]!, this.state.clock.nowMs(), epoch);
      next.endOffset = endOffset;
      next.sizeBytes = next.writtenBytes = next.durableBytes = cleaned.sizeBytes;
      next.offsetIndex = cleaned.offsetIndex;
      next.maxTimestampMs = cleaned.maxTimestampMs;
      next.offsetOfMaxTimestamp = cleaned.offsetOfMaxTimestamp;
      next.txnIndexBytes = cleaned.txnIndexBytes;
      this.state.segments.splice(first, old.length, next);
      this.indexes.cacheIndex(next);
      for (const segment of old) {
        // Their files are gone or the new segment's now: only their handles are closed.
        segment.retired = true;
        segment.filesReplaced = true;
        this.indexes.forget(segment);
        this.state.totalBytes -= segment.sizeBytes;
        if (segment.refs === 0) this.handles.trackDeletion(this.handles.destroy(segment));
      }
      this.state.totalBytes += cleaned.sizeBytes;
      this.reader.forgetPositionsIn(old);
    } finally {
      this.state.swapping = undefined;
      release();
    }
  }

  // ---- retention and DeleteRecords (partition-retention.ts) ----------------------------------------

  /**
   * Moves the log start offset to `offset` (DeleteRecords) and makes it durable before answering. The
   * offset may not pass durableEndOffset. Whole segments below the new start go at the next retention.
   */
  deleteRecordsBefore(offset: number): Promise<DeleteRecordsResult> {
    return this.retention.deleteRecordsBefore(offset);
  }

  /**
   * Deletes whole segments from the front of the log that are below the log start offset, older than
   * retention.ms (by their newest timestamp, or file mtime when they carry none) or beyond
   * retention.bytes; never data that is not durable yet. Deletes at most a few segments per call
   * (`more` says whether to call again). When every segment qualifies, the active one is rolled first
   * so that the log keeps a segment at its end offset.
   */
  enforceRetention(nowMs: number): Promise<RetentionResult> {
    return this.retention.enforceRetention(nowMs);
  }

  // ---- close ----------------------------------------------------------------------------------------

  /**
   * Writes everything out, makes it durable, writes the active segment's index files and a clean
   * shutdown checkpoint, and closes every file. A failed log only closes its files.
   */
  async close(): Promise<void> {
    if (this.state.closing || this.state.closed) return;
    this.state.closing = true;
    try {
      if (this.state.inflightReads > 0) await new Promise<void>((resolve) => this.state.readsDrained.push(resolve));
      await this.retention.idle();
      await Promise.all([...this.handles.deletions]);
      // A failure rejects the queued operations at once, while the one in progress (a roll opening the
      // next segment's file) may still be running: wait for the pump itself, failed or not.
      await this.appender.pumpRun;
      await this.txnIndexWrites.catch(() => undefined);
      if (this.state.failure === undefined) {
        await this.appender.tail.catch(() => undefined);
        if (this.state.durableEnd < this.state.logEnd) await this.appender.requestFlush();
        await this.appender.checkpointer.idle();
        if (this.state.failure !== undefined) throw this.state.failure;
        const active = this.state.active;
        const timeIndex = active.timeIndex!;
        active.finalizeTimeIndex(timeIndex);
        await Promise.all([
          writeFileAtomic(this.state.fs, active.indexPath, active.offsetIndex!.encode()),
          writeFileAtomic(this.state.fs, active.timeIndexPath, timeIndex.encode()),
        ]);
        await saveLogCheckpoint(this.state.fs, this.state.checkpointPath, {
          logStartOffset: this.state.logStart,
          recoveryPoint: this.state.logEnd,
          cleanShutdown: { lastSegmentBaseOffset: active.baseOffset, lastSegmentBytes: active.sizeBytes },
        });
      }
    } finally {
      // An fsync or checkpoint run still in flight (a failed log skips the waits above) uses the handles.
      await this.appender.flushesIdle();
      await this.appender.checkpointer.idle();
      this.state.closed = true;
      await this.handles.closeHandles();
    }
  }
}
