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
 */
import { FatalError, ConfigError, CorruptStateError } from "../../errors/errors.ts";
import type { Clock } from "../../platform/clock.ts";
import type { FileHandle, Fs } from "../../platform/fs.ts";
import {
  attributesAt,
  BATCH_HEADER_BYTES,
  baseOffsetAt,
  batchSizeAt,
  checkBatch,
  COMPRESSION_CODEC_MASK,
  findRecordInUncompressedBatch,
  lastOffsetDeltaAt,
  MAGIC_AT,
  MAGIC_V2,
  maxTimestampAt,
  setBaseOffset,
  setMaxTimestamp,
  setPartitionLeaderEpoch,
  TIMESTAMP_TYPE_BIT,
  type TimestampType,
} from "../../protocol/records/record-batch.ts";
import { cleanTmpFiles, ensureDir, fsyncDirOrDie, writeFileAtomic } from "../atomic-file.ts";
import { basename, join } from "node:path";
import { GroupCommit } from "./group-commit.ts";
import { OFFSET_INDEX_ENTRY_BYTES, OffsetIndex, TimeIndex } from "./indexes.ts";
import { LOG_CHECKPOINT_FILE, loadLogCheckpoint, saveLogCheckpoint, type LogCheckpoint } from "./log-checkpoint.ts";
import { CLEANER_CHECKPOINT_FILE, loadCleanerCheckpoint, saveCleanerCheckpoint, type CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import { epochFileName, epochsOf, fencedFrom } from "./epoch-files.ts";
import type { EpochEntry } from "./leader-epoch-checkpoint.ts";
import { describeBatchProblem, indexingVisitor, partitionLeaderEpochAt, scanSegment, Segment, SEGMENT_FILE_NAME, segmentFileName, type ScanFence } from "./segment.ts";
import { commitSwap, recoverSwap, SwapFencedError, type SwapManifest } from "./segment-swap.ts";

export interface LogConfig {
  /** segment.bytes: roll before an append would make the active segment larger than this. */
  segmentBytes: number;
  /** segment.ms: roll at the first append once the active segment is this old. */
  segmentMs: number;
  /** retention.ms: delete segments whose newest timestamp is older than this; -1 keeps forever. */
  retentionMs: number;
  /** retention.bytes: delete the oldest segments while the log is larger than this; -1 = no limit. */
  retentionBytes: number;
  /** index.interval.bytes: bytes between offset index entries. */
  indexIntervalBytes: number;
  /** How often (at most) a flush also rewrites the recovery point checkpoint. */
  recoveryPointCheckpointIntervalMs?: number;
}

export const DEFAULT_LOG_CONFIG: Required<LogConfig> = {
  segmentBytes: 1024 * 1024 * 1024,
  segmentMs: 7 * 24 * 60 * 60 * 1000,
  retentionMs: 7 * 24 * 60 * 60 * 1000,
  retentionBytes: -1,
  indexIntervalBytes: 4096,
  recoveryPointCheckpointIntervalMs: 60_000,
};

/** How a log is opened (docs/architecture.md, "Files of a leader epoch"). */
export interface LogOpenOptions {
  /** The leader epoch whose files this log writes (new segments, its checkpoints); 0, the default, is single-broker mode. */
  writerEpoch?: number;
  /**
   * The leader-epoch history as the newest history file holds it: with the segment files' epochs it says
   * which bytes are the log. Absent: the implied [(0, 0)].
   */
  epochHistory?: readonly EpochEntry[];
  /**
   * Asked immediately before each unlink and rename retention and a cleaner swap make: false (the
   * ownership is gone) leaves the files as they are. Deletions cannot be fenced by file names. Default:
   * always true.
   */
  mayWrite?: () => boolean;
}

export interface AppendOptions {
  /** The topic's message.timestamp.type; "log-append-time" stamps every batch with the append time. */
  timestampType?: TimestampType;
  /** Written into every batch header (not covered by the CRC). Left as sent when undefined. */
  partitionLeaderEpoch?: number;
}

export interface AppendResult {
  baseOffset: number;
  lastOffset: number;
  /** The append time for LogAppendTime topics, -1 otherwise (as in ProduceResponse). */
  logAppendTimeMs: number;
  /** Settles when the bytes are written (not yet fsynced); rejects with FatalError if they cannot be. */
  written: Promise<void>;
}

export interface ReadOptions {
  /** Return the first batch even when it is larger than maxBytes (Fetch v3+ for the first partition). */
  minOneBatch?: boolean;
  /** Exclusive bound: only batches whose last offset is below it (high watermark, last stable offset). */
  upToOffset?: number;
  /**
   * Where the bytes are read to: the returned bytes are then a view of memory `buffers` handed out, valid
   * as long as the caller keeps that memory for them (Fetch reads a whole answer into one reused arena).
   * Absent: fresh memory per read.
   */
  buffers?: ReadBuffers;
}

/** Hands out memory for reads (see ReadOptions.buffers). */
export interface ReadBuffers {
  /** `length` bytes the read may fill; their content is unspecified. */
  take(length: number): Uint8Array;
  /** Gives back the end of the memory the last `take` handed out, from `used` bytes on: the read needed less. */
  giveBack(used: number): void;
}

export type ReadResult =
  | {
      kind: "records";
      /** Whole batches, concatenated as stored; the first may start before the fetch offset. */
      bytes: Uint8Array;
      /** Base offset of the first batch returned, -1 when none. */
      firstOffset: number;
      /** One past the last offset returned (the fetch offset when nothing was returned). */
      nextOffset: number;
      /** The read stopped before a damaged batch, at nextOffset: the next read there answers "damaged". */
      damage?: BatchDamage;
    }
  | { kind: "offset-out-of-range"; logStartOffset: number; logEndOffset: number }
  /** The first batch the read would return is damaged: nothing at the fetch offset can be served. */
  | { kind: "damaged"; damage: BatchDamage };

/** A stored batch whose bytes fail their checks (framing, offsets, CRC-32C), as a read or a scrub found it. */
export interface BatchDamage {
  /** The segment file's name (`<base offset, 20 digits>.log`). */
  file: string;
  /** Where the damaged batch starts in the file; -1 when the damage could not be placed on one batch. */
  position: number;
  /** The offset the batch there should start with. */
  offset: number;
  reason: string;
}

/**
 * A segment as the scrubber sees it (segment-scrubber.ts): what it may verify, and a token that
 * `readForScrub` checks so that a segment retention deleted or the cleaner replaced is never read as
 * if it were the one listed.
 */
export interface ScrubSegment {
  readonly token: object;
  readonly baseOffset: number;
  readonly file: string;
  /** Bytes to verify from position 0: the whole file of an inactive segment, the fsynced part of the active one. */
  readonly verifiableBytes: number;
  /** Batches must end below this: the next segment's base offset, or the log end offset for the active segment. */
  readonly endOffset: number;
  /** Offsets may have gaps and batches fewer records than their span (the log cleaner rewrote it). */
  readonly cleaned: boolean;
  readonly active: boolean;
}

export interface TimestampAndOffset {
  offset: number;
  timestampMs: number;
}

export interface RetentionResult {
  deletedSegments: number;
  logStartOffset: number;
  /** More segments qualify than this call was allowed to delete. */
  more: boolean;
}

export type DeleteRecordsResult =
  | { kind: "ok"; logStartOffset: number }
  | { kind: "offset-out-of-range"; logStartOffset: number; durableEndOffset: number };

export interface RecoveryReport {
  /**
   * The partition was new: its directory did not exist or held no segment and no checkpoint, so there
   * was nothing to recover (cleanShutdown is false then, but no shutdown happened).
   */
  created: boolean;
  /** The last segment was trusted from a clean shutdown. */
  cleanShutdown: boolean;
  /** Segment files read batch by batch. */
  scannedSegments: string[];
  /** Index files rebuilt from their segment (missing or unsound). */
  rebuiltIndexes: string[];
  /** Torn tail cut from the last segment. */
  truncated: { file: string; position: number; bytes: number; reason: string } | undefined;
  /** Index files without a segment, and tmp files, removed. */
  removedFiles: string[];
  /** A cleaner swap that a crash interrupted after its commit point, completed. */
  completedSwap: SwapManifest | undefined;
  /** `.cleaned` files of a cleaning pass that a crash interrupted before its commit point, removed. */
  removedCleanedFiles: string[];
  /**
   * A fenced former leader's late writes left out of the log (docs/architecture.md, "Files of a leader
   * epoch"): segment and manifest files ignored whole, and the segments read only up to a later epoch's
   * start, with the bytes after it. Never damage.
   */
  fenced: { ignoredFiles: string[]; boundedSegments: { file: string; position: number; offset: number; bytes: number }[] };
}

/** An inactive segment as the log cleaner sees it. */
export interface CleanableSegment {
  baseOffset: number;
  /** The next segment's base offset. */
  endOffset: number;
  sizeBytes: number;
  /** The segment's file epoch (its names); absent for 0. */
  epoch?: number;
}

/** A cleaned segment whose `.cleaned` files are written and durable, ready to replace `replaced`. */
export interface CleanedSegment {
  /** Base offsets of the adjacent segments it replaces, ascending; the first is its own base offset. */
  replaced: number[];
  sizeBytes: number;
  offsetIndex: OffsetIndex;
  timeIndex: TimeIndex;
  maxTimestampMs: number;
  offsetOfMaxTimestamp: number;
  txnIndexBytes: number;
}

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

const INT32_MAX = 0x7fffffff;
/** Queued writes are merged into one write call up to this size. */
const COALESCE_BYTES_MAX = 4 * 1024 * 1024;
/** Inactive segments whose file handle stays open after a read (the active one is always open). */
const OPEN_INACTIVE_HANDLES_MAX = 2;
/** Inactive segments whose offset index stays in memory after a read. */
const CACHED_INACTIVE_INDEXES_MAX = 2;
/** Positions remembered for the offset at which the previous reads ended (tailing consumers). */
const READ_POSITION_CACHE_MAX = 8;
const RETENTION_SEGMENTS_PER_CALL = 8;
/** What the start-up look at a trusted segment's end reads at a time. */
const TAIL_CHECK_WINDOW_BYTES = 64 * 1024;
const EMPTY = new Uint8Array(0);

function validateConfig(config: LogConfig): Required<LogConfig> {
  const full = { ...DEFAULT_LOG_CONFIG, ...config };
  const positiveInt = (name: keyof LogConfig, max = Number.MAX_SAFE_INTEGER) => {
    const v = full[name];
    if (!Number.isSafeInteger(v) || v <= 0 || v > max) throw new ConfigError(`log ${name} must be an integer in 1..${max}, got ${v}`);
  };
  positiveInt("segmentBytes", INT32_MAX);
  positiveInt("segmentMs");
  positiveInt("indexIntervalBytes", INT32_MAX);
  positiveInt("recoveryPointCheckpointIntervalMs");
  for (const name of ["retentionMs", "retentionBytes"] as const) {
    const v = full[name];
    if (!Number.isSafeInteger(v) || v < -1) throw new ConfigError(`log ${name} must be -1 or a non-negative integer, got ${v}`);
  }
  return full;
}

export class PartitionLog {
  private config: Required<LogConfig>;
  private get checkpointPath(): string {
    return join(this.dir, epochFileName(LOG_CHECKPOINT_FILE, this.writerEpoch));
  }
  /** Ordered by base offset; the last one is the active segment. Never empty. */
  private segments: Segment[] = [];

  private logStart = 0;
  private logEnd = 0;
  private writtenEnd = 0;
  private durableEnd = 0;
  private totalBytes = 0;

  private ioQueue: (IoOp | undefined)[] = [];
  private ioHead = 0;
  private pumping = false;
  /** The running pump (writes and rolls), if any: close waits for it, failed log or not. */
  private pumpRun: Promise<void> = Promise.resolve();
  /** Settles when every operation queued so far has completed. */
  private tail: Promise<void> = Promise.resolve();
  /** Segments with writes that no fsync has covered yet. */
  private readonly unsynced = new Set<Segment>();
  private readonly flusher: GroupCommit;
  private readonly checkpointer: GroupCommit;
  private lastCheckpointMonotonicMs: number;

  private readonly openInactive: Segment[] = [];
  private readonly cachedIndexes: Segment[] = [];
  private readonly readPositions = new Map<number, { segment: Segment; position: number }>();
  private readonly listeners = new Set<() => void>();
  private readonly deletions = new Set<Promise<void>>();
  private deletionError: unknown;
  private retention: Promise<unknown> = Promise.resolve();
  /** The aborted-transaction index writes, one after the other (see appendTxnIndexEntry). */
  private txnIndexWrites: Promise<void> = Promise.resolve();
  /** readTxnIndexes has run: every segment knows the size of its `.txnindex`. */
  private txnIndexesLoaded = false;
  private inflightReads = 0;
  /** Waiting for the reads in flight to finish (a swap, close): called when the count drops to zero. */
  private readsDrained: (() => void)[] = [];
  /** Set while cleaned segments are swapped in: reads wait for it (see replaceSegments). */
  private swapping: Promise<void> | undefined;
  /** What the log cleaner last recorded (cleaner-checkpoint.json). */
  private cleanerState: CleanerCheckpoint = { firstDirtyOffset: -1, gapsBelowOffset: 0, pendingDeleteHorizonMs: -1 };

  private failure: FatalError | undefined;
  private closing = false;
  private closed = false;
  /** The epoch whose files this log writes (see the file comment). */
  private writerEpoch: number;
  private readonly epochHistory: readonly EpochEntry[];
  private readonly mayWrite: () => boolean;
  /** fencedFrom of the history and the segment files open found. */
  private fenceOf: (epoch: number) => number = (epoch) => fencedFrom(epoch, this.epochHistory);
  /** The epoch of the file the cleaner checkpoint was read from (-1: none): startEpoch copies an older one. */
  private cleanerCheckpointEpoch = -1;

  /** What `open` found and did; for logs and tests. */
  recoveryReport: RecoveryReport = {
    created: false,
    cleanShutdown: false,
    scannedSegments: [],
    rebuiltIndexes: [],
    truncated: undefined,
    removedFiles: [],
    completedSwap: undefined,
    removedCleanedFiles: [],
    fenced: { ignoredFiles: [], boundedSegments: [] },
  };

  private constructor(
    private readonly fs: Fs,
    readonly dir: string,
    config: LogConfig,
    private readonly clock: Clock,
    options: LogOpenOptions,
  ) {
    this.config = validateConfig(config);
    this.writerEpoch = options.writerEpoch ?? 0;
    if (!Number.isInteger(this.writerEpoch) || this.writerEpoch < 0 || this.writerEpoch > INT32_MAX) throw new RangeError(`writer epoch ${this.writerEpoch} is not an int32 >= 0`);
    this.epochHistory = options.epochHistory ?? [{ epoch: 0, startOffset: 0 }];
    this.mayWrite = options.mayWrite ?? (() => true);
    // A failed fsync or checkpoint write leaves what is on disk unknown: the log fails as a whole.
    this.flusher = new GroupCommit(() => this.failOnError(this.runFlush()));
    this.checkpointer = new GroupCommit(() => this.failOnError(this.runCheckpoint()));
    this.lastCheckpointMonotonicMs = clock.monotonicMs();
  }

  /**
   * Applies changed topic configs (retention, segment size and age). Takes effect at the next append,
   * roll or retention pass; nothing already written is rewritten.
   */
  updateConfig(config: LogConfig): void {
    this.config = validateConfig(config);
  }

  /** Opens (creating if needed) the log in `dir` and recovers it; see the file comment. */
  static async open(fs: Fs, dir: string, config: LogConfig, clock: Clock, options: LogOpenOptions = {}): Promise<PartitionLog> {
    const log = new PartitionLog(fs, dir, config, clock, options);
    try {
      await log.recover();
    } catch (error) {
      await log.closeHandles();
      throw error;
    }
    return log;
  }

  // ---- state ------------------------------------------------------------------------------------

  get logStartOffset(): number {
    return this.logStart;
  }
  /** Next offset to assign: includes appends whose write is still in flight. */
  get logEndOffset(): number {
    return this.logEnd;
  }
  /** Offsets below this are written and readable. */
  get writtenEndOffset(): number {
    return this.writtenEnd;
  }
  /** Offsets below this are fsynced: the most the high watermark may expose. */
  get durableEndOffset(): number {
    return this.durableEnd;
  }
  get sizeBytes(): number {
    return this.totalBytes;
  }
  get segmentCount(): number {
    return this.segments.length;
  }
  get segmentBaseOffsets(): number[] {
    return this.segments.map((s) => s.baseOffset);
  }
  /** The FatalError that stopped the log, if one did. */
  get failed(): FatalError | undefined {
    return this.failure;
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

  // ---- append -----------------------------------------------------------------------------------

  /**
   * Appends a record set that was validated (validateProduceRecordSet, or built by the broker such as a
   * control batch). Assigns offsets from logEndOffset on, rewriting the batches in place.
   */
  append(recordSet: Uint8Array, options: AppendOptions = {}): AppendResult {
    this.assertWritable();
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
    const nowMs = this.clock.nowMs();
    const baseOffset = this.logEnd;
    const lastOffset = baseOffset + offsets - 1;
    let segment = this.active;
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
      segment.indexBatch(offset, segmentPosition + position, size, maxTimestampAt(recordSet, position), this.config.indexIntervalBytes);
      offset += lastOffsetDeltaAt(recordSet, position) + 1;
      position += size;
    }
    segment.sizeBytes += setBytes;
    segment.endOffset = offset;
    this.logEnd = offset;
    this.totalBytes += setBytes;
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

  /** Group commit: resolves once every append made before the call is durable. */
  flush(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.durableEnd >= this.logEnd) return Promise.resolve();
    return this.flusher.request();
  }

  private get active(): Segment {
    return this.segments[this.segments.length - 1]!;
  }

  // ---- aborted-transaction index files ------------------------------------------------------------

  /**
   * The `.txnindex` bytes of every segment, oldest first, with the segment's offset range [baseOffset,
   * endOffset); `bytes` is undefined when the file is missing. Called once at open, before any append.
   */
  async readTxnIndexes(): Promise<{ baseOffset: number; endOffset: number; bytes: Uint8Array | undefined; path: string; mayHoldLateEntries: boolean }[]> {
    this.assertWritable();
    const out: { baseOffset: number; endOffset: number; bytes: Uint8Array | undefined; path: string; mayHoldLateEntries: boolean }[] = [];
    for (const segment of this.segments) {
      const bytes = await this.readIfExists(segment.txnIndexPath);
      segment.txnIndexBytes = bytes?.length ?? 0;
      out.push({
        baseOffset: segment.baseOffset,
        endOffset: segment === this.active ? this.logEnd : segment.endOffset,
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
    this.assertWritable();
    const segment = this.segments.find((s) => s.baseOffset === baseOffset);
    if (segment === undefined) throw new RangeError(`no segment based at ${baseOffset} in ${this.dir}`);
    await this.txnIndexWrites;
    await writeFileAtomic(this.fs, segment.txnIndexPath, bytes);
    segment.txnIndexBytes = bytes.length;
  }

  /**
   * Appends `entry` (encoded entries) to the `.txnindex` of the segment holding offset `markerOffset`,
   * once `after` (the marker's own `written`) settles, and fsyncs it. Entries are written one after the
   * other in call order. Resolves when the entry is durable; a failure fails the log.
   */
  appendTxnIndexEntry(markerOffset: number, entry: Uint8Array, after: Promise<void>): Promise<void> {
    this.assertWritable();
    if (!this.txnIndexesLoaded) throw new Error(`the aborted-transaction indexes of ${this.dir} were not read`);
    if (markerOffset < this.active.baseOffset || markerOffset >= this.logEnd) {
      throw new RangeError(`marker offset ${markerOffset} is not in the active segment of ${this.dir}`);
    }
    const segment = this.active;
    const position = segment.txnIndexBytes;
    segment.txnIndexBytes += entry.length;
    const write = this.txnIndexWrites.then(async () => {
      await after;
      if (this.failure !== undefined) throw this.failure;
      const handle = await this.fs.open(segment.txnIndexPath, "rw");
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
    const tracked = this.failOnError(write);
    this.txnIndexWrites = tracked.catch(() => undefined);
    return tracked;
  }

  /** Resolves when every aborted-transaction index entry appended so far is durable; rejects on failure. */
  async txnIndexSettled(): Promise<void> {
    await this.txnIndexWrites;
    if (this.failure !== undefined) throw this.failure;
  }

  private shouldRoll(segment: Segment, setBytes: number, lastOffset: number, nowMs: number): boolean {
    if (segment.sizeBytes === 0) return false;
    return (
      segment.sizeBytes + setBytes > this.config.segmentBytes ||
      nowMs - segment.createdMs >= this.config.segmentMs ||
      // Relative offsets in the index are int32.
      lastOffset - segment.baseOffset > INT32_MAX
    );
  }

  /**
   * Starts a new active segment at logEndOffset, named with the writer epoch; the files change in
   * `completeRoll`, in queue order. An empty active segment of an older epoch is replaced rather than
   * left before a segment of the same base (startEpoch).
   */
  private roll(nowMs: number): Segment {
    const old = this.active;
    const next = new Segment(this.dir, this.logEnd, nowMs, this.writerEpoch);
    next.resetIndexes();
    next.pinned = true;
    const replacesEmpty = old.epoch < this.writerEpoch && old.sizeBytes === 0 && old.baseOffset === this.logEnd;
    const oldIndex = old.offsetIndex!;
    const oldTimeIndex = old.timeIndex!;
    if (replacesEmpty) {
      this.segments[this.segments.length - 1] = next;
    } else {
      this.segments.push(next);
      // The old segment keeps its in-memory offset index as a cache entry (not evictable while pinned,
      // since its file is written only by completeRoll).
      this.cacheIndex(old);
    }
    this.enqueue({ kind: "roll", old, next, replacesEmpty, oldIndex, oldTimeIndex, done: deferred() });
    return next;
  }

  /**
   * Makes the log write the files of leader epoch `epoch` from now on (a take-over, or becomeLeader on an
   * open partition): the active segment, when it is an older epoch's, is rolled at once (synchronously,
   * so no append after this call goes into it), and the call resolves once the new segment and the
   * log checkpoint of the new epoch are durable (and a cleaner checkpoint of an older epoch is written
   * again as this epoch's). A lower epoch than the writer's is refused; the same one changes nothing.
   */
  async startEpoch(epoch: number): Promise<void> {
    this.assertWritable();
    if (!Number.isInteger(epoch) || epoch < this.writerEpoch || epoch > INT32_MAX) {
      throw new RangeError(`cannot write the files of epoch ${epoch} in ${this.dir}: the log writes epoch ${this.writerEpoch}`);
    }
    const moved = epoch > this.writerEpoch;
    this.writerEpoch = epoch;
    const rolls = this.active.epoch < epoch;
    if (rolls) this.roll(this.clock.nowMs());
    else if (!moved) return;
    await this.tail;
    if (this.failure !== undefined) throw this.failure;
    await this.checkpointer.request();
    if (this.cleanerCheckpointEpoch >= 0 && this.cleanerCheckpointEpoch < epoch) await this.saveCleanerCheckpoint(this.cleanerState);
  }

  /** The leader epoch whose files this log writes. */
  get fileEpoch(): number {
    return this.writerEpoch;
  }

  /**
   * Where what leader epoch `epoch` wrote stops being part of this log, as open found it (the history it
   * was given and the segment files' epochs; see epoch-files.ts fencedFrom): Infinity when no later
   * epoch followed. The Partition judges its producer-state snapshots of older epochs by it.
   */
  fencedFromEpoch(epoch: number): number {
    return this.fenceOf(epoch);
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
        writeFileAtomic(this.fs, old.indexPath, op.oldIndex.encode()),
        writeFileAtomic(this.fs, old.timeIndexPath, op.oldTimeIndex.encode()),
      ]);
    }
    const handle = await this.fs.open(next.logPath, "rw");
    if (this.closed) {
      await handle.close().catch(() => undefined);
      throw new Error(`partition log ${this.dir} is closed`);
    }
    next.handle = handle;
    // The segment's (empty) aborted-transaction index exists from the start, durable with the segment's
    // name: a missing one is then a lost one. No entry can be appended to it before this: entries are
    // written after the marker's own write, which is queued after this roll.
    await (await this.fs.open(next.txnIndexPath, "w")).close();
    await fsyncDirOrDie(this.fs, this.dir, `after creating ${next.logPath}`);
    old.durableBytes = old.sizeBytes;
    // Inactive segments read their time index from the file on demand.
    old.timeIndex = undefined;
    old.pinned = false;
    this.unsynced.delete(old);
    if (op.replacesEmpty) {
      // Not in the log any more; its files stay (a former leader may hold them), only its handle closes.
      old.retired = true;
      old.filesReplaced = true;
      if (old.refs === 0) this.trackDeletion(this.destroy(old));
    } else {
      this.openInactive.push(old);
      this.evictHandles();
    }
    if (next.baseOffset > this.durableEnd) {
      this.durableEnd = next.baseOffset;
      this.notify();
    }
    this.requestCheckpoint();
  }

  private async fsyncHandle(segment: Segment): Promise<void> {
    const handle = await this.acquire(segment);
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${segment.logPath} failed`, { cause: error });
    } finally {
      this.release(segment);
    }
  }

  private enqueue(op: IoOp): void {
    this.ioQueue.push(op);
    this.tail = op.done.promise;
    if (!this.pumping) this.pumpRun = this.pump();
  }

  /** Performs queued writes and rolls in order, merging consecutive writes to one segment. */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.ioHead < this.ioQueue.length && this.failure === undefined) {
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
        this.writtenEnd = lastOp.endOffset;
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
        this.notify();
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
    const target = this.logEnd;
    const segments = [...this.unsynced];
    const sizes = segments.map((s) => s.sizeBytes);
    this.unsynced.clear();
    await this.tail;
    // A segment whose roll completed meanwhile was fsynced by the roll.
    await Promise.all(segments.filter((s) => s.pinned).map((s) => this.fsyncHandle(s)));
    segments.forEach((s, i) => (s.durableBytes = Math.max(s.durableBytes, sizes[i]!)));
    if (target > this.durableEnd) {
      this.durableEnd = target;
      this.notify();
    }
    if (this.clock.monotonicMs() - this.lastCheckpointMonotonicMs >= this.config.recoveryPointCheckpointIntervalMs) {
      this.requestCheckpoint();
    }
  }

  private async failOnError(operation: Promise<void>): Promise<void> {
    try {
      await operation;
    } catch (error) {
      this.fail(error);
      throw this.failure;
    }
  }

  private fail(error: unknown): void {
    if (this.failure !== undefined) return;
    this.failure =
      error instanceof FatalError ? error : new FatalError(`partition log ${this.dir} failed: ${messageOf(error)}`, { cause: error });
    for (let i = this.ioHead; i < this.ioQueue.length; i++) this.ioQueue[i]?.done.reject(this.failure);
    this.ioQueue = [];
    this.ioHead = 0;
    this.notify();
  }

  private notify(): void {
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        // A listener's bug must not break the writer; surface it as an uncaught error instead.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  private assertWritable(): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing || this.closed) throw new Error(`partition log ${this.dir} is closed`);
  }

  // ---- checkpoint ---------------------------------------------------------------------------------

  /** A checkpoint write in the background; its failure fails the log (see the constructor). */
  private requestCheckpoint(): void {
    this.checkpointer.request().catch(() => undefined);
  }

  private async runCheckpoint(): Promise<void> {
    this.lastCheckpointMonotonicMs = this.clock.monotonicMs();
    await saveLogCheckpoint(this.fs, this.checkpointPath, {
      logStartOffset: this.logStart,
      recoveryPoint: this.durableEnd,
      cleanShutdown: null,
    });
  }

  // ---- file handles and index caches ----------------------------------------------------------------

  private async acquire(segment: Segment): Promise<FileHandle> {
    if (this.closed) throw new Error(`partition log ${this.dir} is closed`);
    segment.refs++;
    try {
      if (segment.handle !== undefined) {
        // Least recently used first: move a reused inactive handle to the end.
        const at = this.openInactive.indexOf(segment);
        if (at >= 0 && at < this.openInactive.length - 1) {
          this.openInactive.splice(at, 1);
          this.openInactive.push(segment);
        }
        return segment.handle;
      }
      segment.opening ??= this.fs.open(segment.logPath, "r").then(
        async (handle) => {
          if (this.closed) {
            // The log closed its files while this one was opening: nothing may keep it open.
            segment.opening = undefined;
            await handle.close().catch(() => undefined);
            throw new Error(`partition log ${this.dir} is closed`);
          }
          segment.handle = handle;
          segment.opening = undefined;
          this.openInactive.push(segment);
          return handle;
        },
        (error: unknown) => {
          segment.opening = undefined;
          throw error;
        },
      );
      return await segment.opening;
    } catch (error) {
      segment.refs--;
      throw error;
    }
  }

  private release(segment: Segment): void {
    segment.refs--;
    if (segment.refs > 0) return;
    if (segment.retired) this.trackDeletion(this.destroy(segment));
    else this.evictHandles();
  }

  /** Closes the least recently used idle handles of inactive segments beyond the limit. */
  private evictHandles(): void {
    let excess = this.openInactive.length - OPEN_INACTIVE_HANDLES_MAX;
    for (let i = 0; i < this.openInactive.length && excess > 0; ) {
      const segment = this.openInactive[i]!;
      if (segment.refs === 0 && !segment.pinned && segment.handle !== undefined) {
        const handle = segment.handle;
        segment.handle = undefined;
        this.openInactive.splice(i, 1);
        excess--;
        handle.close().catch(() => undefined);
      } else {
        i++;
      }
    }
  }

  private cacheIndex(segment: Segment): void {
    const at = this.cachedIndexes.indexOf(segment);
    if (at >= 0) this.cachedIndexes.splice(at, 1);
    this.cachedIndexes.push(segment);
    for (let i = 0; i < this.cachedIndexes.length && this.cachedIndexes.length > CACHED_INACTIVE_INDEXES_MAX; ) {
      const cached = this.cachedIndexes[i]!;
      if (cached.pinned) {
        i++;
      } else {
        cached.offsetIndex = undefined;
        this.cachedIndexes.splice(i, 1);
      }
    }
  }

  /** The offset index of `segment`, loaded (and checked, or rebuilt) for an inactive one. */
  private async offsetIndexOf(segment: Segment): Promise<OffsetIndex> {
    while (segment.offsetIndex === undefined) {
      segment.indexLoading ??= this.loadIndexes(segment).finally(() => (segment.indexLoading = undefined));
      await segment.indexLoading;
    }
    if (segment !== this.active) this.cacheIndex(segment);
    return segment.offsetIndex;
  }

  private async loadIndexes(segment: Segment): Promise<void> {
    const span = segment.endOffset - segment.baseOffset;
    const bytes = await this.readIfExists(segment.indexPath);
    const decoded = bytes === undefined ? "missing" : OffsetIndex.decode(bytes, segment.sizeBytes, span);
    if (typeof decoded === "string") {
      await this.rebuildIndexes(segment, true);
      return;
    }
    segment.offsetIndex = decoded;
  }

  /** The time index of an inactive segment (never cached), or the active one's. */
  private async timeIndexOf(segment: Segment): Promise<TimeIndex> {
    if (segment.timeIndex !== undefined) return segment.timeIndex;
    const bytes = await this.readIfExists(segment.timeIndexPath);
    const decoded = bytes === undefined ? "missing" : TimeIndex.decode(bytes, segment.endOffset - segment.baseOffset);
    if (typeof decoded !== "string") return decoded;
    const rebuilt = await this.rebuildIndexes(segment, false);
    return rebuilt.timeIndex;
  }

  /** Max timestamp of a segment: in memory for the active one, the last time index entry otherwise. */
  private async maxTimestampOf(segment: Segment): Promise<number> {
    if (segment.maxTimestampMs === undefined) {
      const timeIndex = await this.timeIndexOf(segment);
      const last = timeIndex.entries - 1;
      segment.maxTimestampMs = last >= 0 ? timeIndex.timestampAt(last) : -1;
      segment.offsetOfMaxTimestamp = last >= 0 ? segment.baseOffset + timeIndex.relOffsetAt(last) : -1;
    }
    return segment.maxTimestampMs;
  }

  /**
   * The last entry of an offset index file, read alone: "empty" for an index without entries,
   * "unusable" when the file is missing, not a whole number of entries, or its last entry is out of the
   * segment's offset span (the full decode at first use judges such an index).
   */
  private async lastIndexEntry(path: string, offsetSpan: number): Promise<{ relOffset: number; position: number } | "empty" | "unusable"> {
    const stat = await this.fs.stat(path);
    if (stat === undefined || stat.isDirectory || stat.size % OFFSET_INDEX_ENTRY_BYTES !== 0) return "unusable";
    if (stat.size === 0) return "empty";
    const handle = await this.fs.open(path, "r");
    let bytes: Uint8Array;
    try {
      bytes = await handle.read(OFFSET_INDEX_ENTRY_BYTES, stat.size - OFFSET_INDEX_ENTRY_BYTES);
    } finally {
      await handle.close();
    }
    if (bytes.length < OFFSET_INDEX_ENTRY_BYTES) return "unusable";
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const relOffset = view.getInt32(0);
    const position = view.getInt32(4);
    if (relOffset < 0 || relOffset >= offsetSpan || position < 0) return "unusable";
    return { relOffset, position };
  }

  private async readIfExists(path: string): Promise<Uint8Array | undefined> {
    const stat = await this.fs.stat(path);
    if (stat === undefined || stat.isDirectory) return undefined;
    return this.fs.readFile(path);
  }

  /**
   * Rebuilds both index files of an inactive segment from its log (every batch checked: it is not the
   * last segment, so any bad batch is corruption) and writes them atomically.
   */
  private async rebuildIndexes(segment: Segment, keepOffsetIndex: boolean, fence?: ScanFence): Promise<{ timeIndex: TimeIndex }> {
    // A segment a scan found damaged is not scanned again by every read that reaches it.
    if (segment.scanFailure !== undefined) throw segment.scanFailure;
    try {
      return await this.rebuildIndexesByScan(segment, keepOffsetIndex, fence);
    } catch (error) {
      if (error instanceof CorruptStateError) segment.scanFailure = error;
      throw error;
    }
  }

  /**
   * With `fence` (at open, a segment a later epoch follows): the scan stops where that epoch starts, and
   * the segment's size becomes what precedes it; the rest of the file is a former leader's late write.
   */
  private async rebuildIndexesByScan(segment: Segment, keepOffsetIndex: boolean, fence?: ScanFence): Promise<{ timeIndex: TimeIndex }> {
    const scratch = new Segment(this.dir, segment.baseOffset, segment.createdMs, segment.epoch);
    const handle = await this.acquire(segment);
    try {
      const cleaned = this.mayBeCleaned(segment);
      const result = await scanSegment(handle, segment.sizeBytes, segment.baseOffset, indexingVisitor(scratch, this.config.indexIntervalBytes), cleaned, fence);
      if (result.fenced !== undefined) {
        this.recoveryReport.fenced.boundedSegments.push({ file: segment.logName, ...result.fenced });
        segment.sizeBytes = segment.writtenBytes = result.validBytes;
      }
      if (result.bad !== undefined) {
        throw new CorruptStateError(segment.logPath, `${result.bad.reason} at position ${result.bad.position} (offset ${result.bad.expectedOffset})`);
      }
      if (segment.sizeBytes === 0 && !cleaned && segment.endOffset > segment.baseOffset) {
        throw new CorruptStateError(segment.logPath, `is empty, but offsets ${segment.baseOffset}..${segment.endOffset - 1} belong to it (the next segment starts at ${segment.endOffset})`);
      }
      // A cleaned segment may have lost its last batches: it ends at or before the next segment's base.
      if (cleaned ? result.endOffset > segment.endOffset : result.endOffset !== segment.endOffset) {
        throw new CorruptStateError(segment.logPath, `holds offsets up to ${result.endOffset - 1} but the next segment starts at ${segment.endOffset}`);
      }
      segment.verified.add(0, segment.sizeBytes);
    } finally {
      this.release(segment);
    }
    const timeIndex = scratch.timeIndex!;
    scratch.finalizeTimeIndex(timeIndex);
    await Promise.all([
      writeFileAtomic(this.fs, segment.indexPath, scratch.offsetIndex!.encode()),
      writeFileAtomic(this.fs, segment.timeIndexPath, timeIndex.encode()),
    ]);
    this.recoveryReport.rebuiltIndexes.push(segment.indexPath, segment.timeIndexPath);
    if (keepOffsetIndex) segment.offsetIndex = scratch.offsetIndex;
    segment.maxTimestampMs = scratch.maxTimestampMs;
    segment.offsetOfMaxTimestamp = scratch.offsetOfMaxTimestamp;
    return { timeIndex };
  }

  /**
   * A cheap look at a segment that recovery trusts without a scan (wholly below the recovery point, with
   * its index files): it must not be empty when offsets belong to it, its offset index must fit its size,
   * and the batches from the last index entry on must be sound and end exactly at the end of the file, at
   * the next segment's base offset. Why something is off, or undefined. It reads the offset index and
   * about one index interval of the segment, so start-up stays fast; what it misses in the middle of a
   * segment the read path and the scrubber find (docs/operations.md, "Damaged data").
   */
  private async trustedSegmentProblem(segment: Segment, fence?: ScanFence): Promise<string | undefined> {
    const cleaned = this.mayBeCleaned(segment);
    const span = segment.endOffset - segment.baseOffset;
    // The log cleaner may leave a segment with no batch at all; any other segment holds its offsets.
    if (segment.sizeBytes === 0) return cleaned || span === 0 ? undefined : "empty";
    // Only the index's last entry is read (an index of a full segment is megabytes, and start-up does
    // this for every segment). An index that is unsound in itself is rebuilt when first used, as before
    // (that scan refuses a damaged segment too); one whose last entry points past the end says the
    // segment lost its end.
    const last = await this.lastIndexEntry(segment.indexPath, span);
    // A segment a later epoch follows may have grown past its end (a former leader's late write): only a
    // look that reaches its end from a sound index entry shows that it did not.
    if (last === "unusable") return fence !== undefined ? "its offset index is unusable" : undefined;
    if (last !== "empty" && last.position >= segment.sizeBytes) return `shorter (${segment.sizeBytes} bytes) than its offset index says`;
    let position = last === "empty" ? 0 : last.position;
    let expected = last !== "empty" ? segment.baseOffset + last.relOffset : cleaned ? -1 : segment.baseOffset;
    const handle = await this.acquire(segment);
    try {
      let window: Uint8Array = EMPTY;
      let windowStart = position;
      while (position < segment.sizeBytes) {
        if (position + BATCH_HEADER_BYTES > windowStart + window.length) {
          if (position + BATCH_HEADER_BYTES > segment.sizeBytes) return `${segment.sizeBytes - position} bytes at the end hold no batch`;
          window = await handle.read(Math.min(segment.sizeBytes - position, TAIL_CHECK_WINDOW_BYTES), position);
          windowStart = position;
          if (window.length < BATCH_HEADER_BYTES) return `the file is shorter than its size at position ${position}`;
        }
        const at = position - windowStart;
        const size = batchSizeAt(window, at);
        const base = baseOffsetAt(window, at);
        const last = base + lastOffsetDeltaAt(window, at);
        const problem = headerProblem(window, at, size, segment.sizeBytes - position, base, last, expected, cleaned, segment.endOffset);
        if (problem !== undefined) return `${problem} at position ${position}`;
        if (fence !== undefined && fence.fencedFrom(partitionLeaderEpochAt(window, at)) <= base) return `a fenced epoch's batch at position ${position}`;
        if (at + size <= window.length) {
          const checked = checkBatch(window, at, at + size, cleaned);
          if (typeof checked !== "number") return `${describeBatchProblem(checked)} at position ${position}`;
        }
        expected = last + 1;
        position += size;
      }
      if (!cleaned && expected !== segment.endOffset) return `its batches end at offset ${expected - 1}, the next segment starts at ${segment.endOffset}`;
      return undefined;
    } finally {
      this.release(segment);
    }
  }

  // ---- scrubbing ----------------------------------------------------------------------------------

  /** The segments for the scrubber, oldest first (see ScrubSegment); none once the log failed or closes. */
  scrubSegments(): ScrubSegment[] {
    if (this.failure !== undefined || this.closing || this.closed) return [];
    return this.segments.map((segment) => {
      const active = segment === this.active;
      return {
        token: segment,
        baseOffset: segment.baseOffset,
        file: segment.logName,
        verifiableBytes: active ? Math.min(segment.durableBytes, segment.writtenBytes) : segment.sizeBytes,
        endOffset: active ? this.logEnd : segment.endOffset,
        cleaned: this.mayBeCleaned(segment),
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
    if (this.swapping !== undefined) await this.swapping;
    const segment = target.token as Segment;
    const current = () => this.failure === undefined && !this.closing && !this.closed && !segment.retired && this.segments.includes(segment);
    if (!current()) return undefined;
    // Counted as a read: a swap and close wait for it, so the file under the name stays the listed one.
    this.inflightReads++;
    try {
      const handle = await this.acquire(segment);
      try {
        const bytes = await handle.read(Math.max(0, Math.min(length, target.verifiableBytes - position)), position);
        return current() ? bytes : undefined;
      } finally {
        this.release(segment);
      }
    } finally {
      this.endRead();
    }
  }

  // ---- read ---------------------------------------------------------------------------------------

  /**
   * Reads whole batches starting with the one that contains `fetchOffset`, up to `maxBytes` (the first
   * batch is returned even when larger if `minOneBatch`), from one segment, never past writtenEndOffset
   * or `upToOffset`. The bytes are returned exactly as stored.
   */
  async read(fetchOffset: number, maxBytes: number, options: ReadOptions = {}): Promise<ReadResult> {
    this.assertReadable();
    if (this.swapping !== undefined) await this.swapping;
    this.assertReadable();
    if (fetchOffset < this.logStart || fetchOffset > this.logEnd) {
      return { kind: "offset-out-of-range", logStartOffset: this.logStart, logEndOffset: this.logEnd };
    }
    const limitOffset = Math.min(options.upToOffset ?? Number.POSITIVE_INFINITY, this.writtenEnd);
    if (fetchOffset >= limitOffset) return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
    this.inflightReads++;
    let segment: Segment | undefined = this.segmentFor(fetchOffset);
    try {
      // A cleaned segment may hold nothing at or after the fetch offset (the cleaner removed its last
      // batches): the data then starts in a later segment, as in Apache's UnifiedLog.read.
      while (segment !== undefined) {
        const result = await this.readSegment(segment, fetchOffset, limitOffset, Math.max(0, maxBytes), options.minOneBatch ?? false, options.buffers);
        if (result.kind !== "records" || result.bytes.length > 0 || segment === this.active) return result;
        // Retention may have removed the segment meanwhile (the fetch offset is then below the log start,
        // which the next fetch learns): answer what was read rather than start over from the front.
        const at = this.segments.indexOf(segment);
        const next: Segment | undefined = at < 0 ? undefined : this.segments[at + 1];
        if (next === undefined || next.baseOffset >= limitOffset) return result;
        segment = next;
      }
      return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
    } catch (error) {
      // The walk to the fetch offset found bytes that are not batches (an index rebuild refused the
      // segment, a length ran past its end): damage that the read cannot place on one batch.
      if (!(error instanceof CorruptStateError)) throw error;
      const reason = error.reason;
      // The errors of the walk and of a scan name the position (and the offset) of the first bad batch.
      const position = /at position (\d+)/.exec(reason)?.[1];
      const offset = /\(offset (\d+)\)/.exec(reason)?.[1];
      const damage = { file: basename(error.path), position: position === undefined ? -1 : Number(position), offset: offset === undefined ? fetchOffset : Number(offset), reason };
      return { kind: "damaged", damage };
    } finally {
      this.endRead();
    }
  }

  private async readSegment(
    segment: Segment,
    fetchOffset: number,
    limitOffset: number,
    maxBytes: number,
    minOneBatch: boolean,
    buffers: ReadBuffers | undefined,
  ): Promise<ReadResult> {
    const handle = await this.acquire(segment);
    try {
      const limitBytes = segment.writtenBytes;
      // A remembered position (a consumer going on where its last read ended) is exact: the window then
      // starts with the fetched batch and reads no more than the answer may hold. From an index entry it
      // also covers the walk to the fetched batch (at most one index interval).
      const remembered = this.readPositions.get(fetchOffset);
      const exact = remembered !== undefined && remembered.segment === segment;
      const readAheadBytes = (exact ? 0 : this.config.indexIntervalBytes) + maxBytes + BATCH_HEADER_BYTES;
      const cursor = new ReadCursor(handle, limitBytes, readAheadBytes, buffers);
      const start = await this.locate(segment, cursor, fetchOffset, (base, last) => last >= fetchOffset && base >= 0);
      if (start === undefined) return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };

      // Every batch returned is checked (docs/operations.md, "Damaged data"): its header here, as the
      // window is walked, and its CRC-32C below, once the whole range is in memory. Written data ends at
      // a batch boundary and holds nothing but whole batches, so anything else is damage, never the end.
      const cleaned = this.mayBeCleaned(segment);
      const segmentEnd = segment === this.active ? this.logEnd : segment.endOffset;
      let end = start;
      let total = 0;
      let firstOffset = -1;
      let lastIncluded = -1;
      let expected = -1;
      let damage: BatchDamage | undefined;
      for (;;) {
        const at = await cursor.ensure(end, BATCH_HEADER_BYTES);
        if (at < 0) {
          if (end < limitBytes) damage = { file: segment.logName, position: end, offset: expected, reason: `${limitBytes - end} bytes at the end of the written data hold no batch` };
          break;
        }
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        const last = base + lastOffsetDeltaAt(buf, at);
        const problem = headerProblem(buf, at, size, limitBytes - end, base, last, expected, cleaned, segmentEnd);
        if (problem !== undefined) {
          // A damaged header's own base offset is not to be believed: the offset read up to is.
          damage = { file: segment.logName, position: end, offset: expected >= 0 ? expected : fetchOffset, reason: problem };
          break;
        }
        if (last >= limitOffset) break;
        if (total + size > maxBytes && !(total === 0 && minOneBatch)) break;
        if (firstOffset < 0) firstOffset = base;
        total += size;
        end += size;
        lastIncluded = last;
        expected = last + 1;
        if (total >= maxBytes) break;
      }
      let bytes = total === 0 ? EMPTY : await cursor.slice(start, end);
      // Bytes this process appended, scanned or read before have had their CRCs checked (verified-ranges.ts):
      // reading what was just produced costs no CRC pass.
      const crcChecked = segment.verified.covers(start, end);
      for (let p = 0, lastGood = -1; p < bytes.length; ) {
        const checked = checkBatch(bytes, p, bytes.length, cleaned, !crcChecked);
        if (typeof checked !== "number") {
          damage = { file: segment.logName, position: start + p, offset: p > 0 ? lastGood + 1 : fetchOffset, reason: describeBatchProblem(checked) };
          bytes = bytes.subarray(0, p);
          end = start + p;
          lastIncluded = lastGood;
          break;
        }
        lastGood = baseOffsetAt(bytes, p) + lastOffsetDeltaAt(bytes, p);
        p += checked;
      }
      if (bytes.length === 0) {
        cursor.release(0);
        if (damage !== undefined) {
          if (damage.offset < 0) damage.offset = fetchOffset;
          return { kind: "damaged", damage };
        }
        return { kind: "records", bytes: EMPTY, firstOffset: -1, nextOffset: fetchOffset };
      }
      cursor.release(end);
      if (!crcChecked) segment.verified.add(start, end);
      this.rememberPosition(lastIncluded + 1, segment, end);
      if (damage !== undefined && damage.offset < 0) damage.offset = lastIncluded + 1;
      return { kind: "records", bytes, firstOffset, nextOffset: lastIncluded + 1, ...(damage === undefined ? {} : { damage }) };
    } finally {
      this.release(segment);
    }
  }

  /**
   * Finds the position of the first batch of `segment` (from the best starting point the read-position
   * cache or the offset index gives for `targetOffset`) for which `wanted(baseOffset, lastOffset, at)`
   * holds; undefined when no written batch does. The starting point is checked against the batch header
   * found there, so an unsound index is detected (and rebuilt) rather than trusted.
   */
  private async locate(
    segment: Segment,
    cursor: ReadCursor,
    targetOffset: number,
    wanted: (baseOffset: number, lastOffset: number, at: number) => boolean,
  ): Promise<number | undefined> {
    for (let attempt = 0; ; attempt++) {
      let position = 0;
      let expectedBase = segment.baseOffset;
      const remembered = this.readPositions.get(targetOffset);
      if (remembered !== undefined && remembered.segment === segment && remembered.position <= cursor.limitBytes) {
        position = remembered.position;
        expectedBase = targetOffset;
      } else {
        const index = await this.offsetIndexOf(segment);
        const i = index.floor(targetOffset - segment.baseOffset);
        if (i >= 0) {
          position = index.positionAt(i);
          expectedBase = segment.baseOffset + index.relOffsetAt(i);
        }
      }
      // Position 0 is always a batch start, but in a cleaned segment the first batch may start after the
      // segment's base offset (the cleaner removed what was there): only a position from the index or
      // the position cache is checked against the offset it promises.
      let first = position > 0 || !this.mayBeCleaned(segment);
      for (let previous = -1; ; ) {
        const at = await cursor.ensure(position, BATCH_HEADER_BYTES);
        if (at < 0) {
          // Batch lengths walked from a batch start end exactly at the written end. (An index entry of the
          // active segment may point past it: appends index their batches before the write completes.)
          if (position < cursor.limitBytes || (position > cursor.limitBytes && segment !== this.active)) {
            const where = previous < 0 ? `position ${position}` : `the batch at position ${previous}, whose length leads to ${position}`;
            throw new CorruptStateError(segment.logPath, `${where}: not a batch start below the end of the written data (${cursor.limitBytes} bytes)`);
          }
          return undefined;
        }
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        if (first && base !== expectedBase) break;
        first = false;
        if (size < BATCH_HEADER_BYTES) {
          throw new CorruptStateError(segment.logPath, `batch at position ${position} has invalid length ${size}`);
        }
        if (wanted(base, base + lastOffsetDeltaAt(buf, at), at)) return position;
        previous = position;
        position += size;
      }
      // The starting point was wrong: forget it, rebuild the index if it came from there, and retry.
      this.readPositions.delete(targetOffset);
      if (attempt > 0 || segment === this.active) {
        throw new CorruptStateError(segment.logPath, `no batch starts with offset ${expectedBase} at position ${position}`);
      }
      if (remembered === undefined || remembered.segment !== segment) {
        segment.offsetIndex = undefined;
        await this.rebuildIndexes(segment, true);
      }
    }
  }

  private rememberPosition(offset: number, segment: Segment, position: number): void {
    this.readPositions.delete(offset);
    this.readPositions.set(offset, { segment, position });
    if (this.readPositions.size > READ_POSITION_CACHE_MAX) {
      this.readPositions.delete(this.readPositions.keys().next().value!);
    }
  }

  private segmentFor(offset: number): Segment {
    const segments = this.segments;
    let lo = 0;
    let hi = segments.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (segments[mid]!.baseOffset <= offset) lo = mid;
      else hi = mid - 1;
    }
    return segments[lo]!;
  }

  private assertReadable(): void {
    if (this.closed || this.closing) throw new Error(`partition log ${this.dir} is closed`);
  }

  private endRead(): void {
    this.inflightReads--;
    if (this.inflightReads === 0 && this.readsDrained.length > 0) {
      const waiting = this.readsDrained;
      this.readsDrained = [];
      for (const resolve of waiting) resolve();
    }
  }

  // ---- timestamps ---------------------------------------------------------------------------------

  /**
   * ListOffsets by timestamp: the first offset (at or after the log start) of a record whose timestamp
   * is >= `timestampMs`, with that record's timestamp. Batches are found through the time index; inside
   * an uncompressed CreateTime batch the records are walked for the exact record. For a compressed batch
   * the answer is the batch's base offset and max timestamp (records are never decompressed here), which
   * may be a few records early: a consumer seeking there still sees every matching record.
   */
  async offsetForTimestamp(timestampMs: number): Promise<TimestampAndOffset | undefined> {
    this.assertReadable();
    if (this.swapping !== undefined) await this.swapping;
    this.assertReadable();
    this.inflightReads++;
    try {
      for (const segment of [...this.segments]) {
        if (segment.endOffset <= this.logStart || segment.retired || segment.writtenBytes === 0) continue;
        if ((await this.maxTimestampOf(segment)) < timestampMs) continue;
        const found = await this.searchTimestamp(segment, timestampMs);
        if (found !== undefined) return found;
      }
      return undefined;
    } finally {
      this.endRead();
    }
  }

  /** ListOffsets MAX_TIMESTAMP: the first record with the largest timestamp in the log. */
  async maxTimestampOffset(): Promise<TimestampAndOffset | undefined> {
    this.assertReadable();
    if (this.swapping !== undefined) await this.swapping;
    this.assertReadable();
    this.inflightReads++;
    try {
      let best: Segment | undefined;
      let bestMs = -1;
      for (const segment of [...this.segments]) {
        if (segment.endOffset <= this.logStart || segment.retired || segment.writtenBytes === 0) continue;
        const ms = await this.maxTimestampOf(segment);
        if (ms > bestMs) {
          best = segment;
          bestMs = ms;
        }
      }
      if (best === undefined) return undefined;
      return await this.searchTimestamp(best, bestMs);
    } finally {
      this.endRead();
    }
  }

  private async searchTimestamp(segment: Segment, timestampMs: number): Promise<TimestampAndOffset | undefined> {
    const timeIndex = await this.timeIndexOf(segment);
    const entry = timeIndex.floor(timestampMs);
    const fromOffset = Math.max(entry >= 0 ? segment.baseOffset + timeIndex.relOffsetAt(entry) : segment.baseOffset, this.logStart);
    const logStart = this.logStart;
    const handle = await this.acquire(segment);
    try {
      const cursor = new ReadCursor(handle, segment.writtenBytes, 2 * this.config.indexIntervalBytes + BATCH_HEADER_BYTES);
      let position = await this.locate(segment, cursor, fromOffset, (_base, last, at) => last >= logStart && maxTimestampAt(cursor.buffer, at) >= timestampMs);
      while (position !== undefined) {
        const at = await cursor.ensure(position, BATCH_HEADER_BYTES);
        const buf = cursor.buffer;
        const base = baseOffsetAt(buf, at);
        const size = batchSizeAt(buf, at);
        const attributes = attributesAt(buf, at);
        const batchMaxMs = maxTimestampAt(buf, at);
        if (attributes & TIMESTAMP_TYPE_BIT || (attributes & COMPRESSION_CODEC_MASK) !== 0) {
          return { offset: Math.max(base, logStart), timestampMs: batchMaxMs };
        }
        const batch = await cursor.slice(position, position + size);
        let found: TimestampAndOffset | undefined;
        findRecordInUncompressedBatch(batch, 0, (offset, recordMs) => {
          if (offset >= logStart && recordMs >= timestampMs) found = { offset, timestampMs: recordMs };
          return found !== undefined;
        });
        if (found !== undefined) return found;
        // The max timestamp promised a match the records do not hold; keep looking in later batches.
        position += size;
        let next: number | undefined;
        for (;;) {
          const a = await cursor.ensure(position, BATCH_HEADER_BYTES);
          if (a < 0) break;
          if (maxTimestampAt(cursor.buffer, a) >= timestampMs) {
            next = position;
            break;
          }
          position += batchSizeAt(cursor.buffer, a);
        }
        position = next;
      }
      return undefined;
    } finally {
      this.release(segment);
    }
  }

  // ---- the log cleaner's view ----------------------------------------------------------------------

  /** What the log cleaner last recorded (see cleaner-checkpoint.ts). */
  get cleanerCheckpoint(): CleanerCheckpoint {
    return this.cleanerState;
  }

  /** Records where the cleaner stands, durably, before anything that relies on it happens. */
  async saveCleanerCheckpoint(checkpoint: CleanerCheckpoint): Promise<void> {
    this.assertWritable();
    await saveCleanerCheckpoint(this.fs, join(this.dir, epochFileName(CLEANER_CHECKPOINT_FILE, this.writerEpoch)), checkpoint);
    this.cleanerState = { ...checkpoint };
    this.cleanerCheckpointEpoch = this.writerEpoch;
  }

  /** The segment may have been rewritten by the cleaner (its offsets may have gaps). */
  private mayBeCleaned(segment: Segment): boolean {
    return segment.baseOffset < this.cleanerState.gapsBelowOffset;
  }

  /** The inactive segments, oldest first: the active segment is never cleaned. */
  cleanableSegments(): CleanableSegment[] {
    const out: CleanableSegment[] = [];
    for (let i = 0; i + 1 < this.segments.length; i++) {
      const segment = this.segments[i]!;
      out.push({ baseOffset: segment.baseOffset, endOffset: this.segments[i + 1]!.baseOffset, sizeBytes: segment.sizeBytes, ...(segment.epoch === 0 ? {} : { epoch: segment.epoch }) });
    }
    return out;
  }

  get activeSegmentBaseOffset(): number {
    return this.active.baseOffset;
  }

  /** The largest batch timestamp of the inactive segment based at `baseOffset` (-1 when none). */
  async segmentMaxTimestamp(baseOffset: number): Promise<number> {
    return this.maxTimestampOf(this.inactiveSegment(baseOffset));
  }

  /** Up to `length` bytes at `position` of the inactive segment based at `baseOffset`. */
  async readSegmentBytes(baseOffset: number, position: number, length: number): Promise<Uint8Array> {
    const segment = this.inactiveSegment(baseOffset);
    const handle = await this.acquire(segment);
    try {
      return await handle.read(Math.min(length, segment.sizeBytes - position), position);
    } finally {
      this.release(segment);
    }
  }

  private inactiveSegment(baseOffset: number): Segment {
    const segment = this.segments.find((s) => s.baseOffset === baseOffset);
    if (segment === undefined || segment === this.active) throw new RangeError(`no inactive segment based at ${baseOffset} in ${this.dir}`);
    return segment;
  }

  /**
   * Runs `work` with retention and other cleaning passes kept out: each of them decides from the segment
   * list the previous one left.
   */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.retention.catch(() => undefined).then(work);
    this.retention = run.catch(() => undefined);
    return run;
  }

  /**
   * Swaps a cleaned segment in for the adjacent segments it replaces (segment-swap.ts has the file
   * protocol). Reads are held off while the files change (a reader must never open a replaced segment's
   * file name and find the new segment's bytes there), which takes a few renames and two directory
   * fsyncs. Call it inside `exclusive`.
   */
  async replaceSegments(cleaned: CleanedSegment): Promise<void> {
    this.assertWritable();
    const first = this.segments.findIndex((s) => s.baseOffset === cleaned.replaced[0]);
    const old = this.segments.slice(first, first + cleaned.replaced.length);
    if (
      first < 0 ||
      old.length !== cleaned.replaced.length ||
      old.some((s, i) => s.baseOffset !== cleaned.replaced[i] || s === this.active)
    ) {
      throw new RangeError(`segments ${cleaned.replaced.join(",")} are not adjacent inactive segments of ${this.dir}`);
    }
    const endOffset = this.segments[first + old.length]!.baseOffset;
    // Named with the group's newest epoch, so that segment epochs keep rising with offsets (the fencing
    // rule at open relies on it).
    const epoch = Math.max(...old.map((s) => s.epoch));
    let release!: () => void;
    this.swapping = new Promise<void>((resolve) => (release = resolve));
    try {
      if (this.inflightReads > 0) await new Promise<void>((resolve) => this.readsDrained.push(resolve));
      // Fenced before the commit point: nothing changed, the pass fails and the log goes on. (A fence
      // found between the renames fails the log: its files are then half swapped.)
      if (!this.mayWrite()) throw new SwapFencedError(`${this.dir}: the partition's ownership is gone; the cleaned segment is not swapped in`);
      const manifest: SwapManifest = { baseOffset: cleaned.replaced[0]!, replaced: cleaned.replaced };
      if (old.some((s) => s.epoch !== 0)) {
        manifest.epoch = epoch;
        manifest.replacedEpochs = old.map((s) => s.epoch);
      }
      await this.failOnError(commitSwap(this.fs, this.dir, manifest, undefined, { epoch: this.writerEpoch, mayWrite: this.mayWrite }));
      const next = new Segment(this.dir, cleaned.replaced[0]!, this.clock.nowMs(), epoch);
      next.endOffset = endOffset;
      next.sizeBytes = next.writtenBytes = next.durableBytes = cleaned.sizeBytes;
      next.offsetIndex = cleaned.offsetIndex;
      next.maxTimestampMs = cleaned.maxTimestampMs;
      next.offsetOfMaxTimestamp = cleaned.offsetOfMaxTimestamp;
      next.txnIndexBytes = cleaned.txnIndexBytes;
      this.segments.splice(first, old.length, next);
      this.cacheIndex(next);
      for (const segment of old) {
        // Their files are gone or the new segment's now: only their handles are closed.
        segment.retired = true;
        segment.filesReplaced = true;
        const cached = this.cachedIndexes.indexOf(segment);
        if (cached >= 0) this.cachedIndexes.splice(cached, 1);
        this.totalBytes -= segment.sizeBytes;
        if (segment.refs === 0) this.trackDeletion(this.destroy(segment));
      }
      this.totalBytes += cleaned.sizeBytes;
      for (const [offset, remembered] of this.readPositions) {
        if (old.includes(remembered.segment)) this.readPositions.delete(offset);
      }
    } finally {
      this.swapping = undefined;
      release();
    }
  }

  // ---- retention and DeleteRecords ----------------------------------------------------------------

  /**
   * Moves the log start offset to `offset` (DeleteRecords) and makes it durable before answering. The
   * offset may not pass durableEndOffset. Whole segments below the new start go at the next retention.
   */
  async deleteRecordsBefore(offset: number): Promise<DeleteRecordsResult> {
    this.assertWritable();
    if (!Number.isSafeInteger(offset) || offset < 0 || offset > this.durableEnd) {
      return { kind: "offset-out-of-range", logStartOffset: this.logStart, durableEndOffset: this.durableEnd };
    }
    if (offset > this.logStart) {
      this.logStart = offset;
      this.notify();
      await this.checkpointer.request();
    }
    return { kind: "ok", logStartOffset: this.logStart };
  }

  /**
   * Deletes whole segments from the front of the log that are below the log start offset, older than
   * retention.ms (by their newest timestamp, or file mtime when they carry none) or beyond
   * retention.bytes; never data that is not durable yet. Deletes at most a few segments per call
   * (`more` says whether to call again). When every segment qualifies, the active one is rolled first
   * so that the log keeps a segment at its end offset.
   */
  async enforceRetention(nowMs: number): Promise<RetentionResult> {
    this.assertWritable();
    // One retention pass at a time: each decides from the segment list the previous one left.
    const previous = this.retention;
    const run = previous.catch(() => undefined).then(() => this.runRetention(nowMs));
    this.retention = run;
    return run;
  }

  private async runRetention(nowMs: number): Promise<RetentionResult> {
    this.assertWritable();
    if (this.deletionError !== undefined) {
      const error = this.deletionError;
      this.deletionError = undefined;
      throw error;
    }
    // Each doomed segment with the end offset it had when judged: appends made during the awaits below
    // must not be deleted with it.
    const doomed: { segment: Segment; endOffset: number }[] = [];
    let remainingBytes = this.totalBytes;
    let more = false;
    for (let i = 0; i < this.segments.length; i++) {
      const segment = this.segments[i]!;
      const isLast = i === this.segments.length - 1;
      const upperOffset = isLast ? this.logEnd : this.segments[i + 1]!.baseOffset;
      if (upperOffset > this.durableEnd || (isLast && segment.sizeBytes === 0)) break;
      let expired = upperOffset <= this.logStart;
      if (!expired && this.config.retentionBytes >= 0 && remainingBytes - segment.sizeBytes >= this.config.retentionBytes) expired = true;
      if (!expired && this.config.retentionMs >= 0) {
        let newestMs = await this.maxTimestampOf(segment);
        if (newestMs < 0) newestMs = (await this.fs.stat(segment.logPath))?.mtimeMs ?? nowMs;
        expired = nowMs - newestMs > this.config.retentionMs;
      }
      if (!expired) break;
      if (doomed.length === RETENTION_SEGMENTS_PER_CALL) {
        more = true;
        break;
      }
      doomed.push({ segment, endOffset: upperOffset });
      remainingBytes -= segment.sizeBytes;
    }
    this.assertWritable();
    const last = doomed.at(-1);
    if (last !== undefined && last.segment === this.active) {
      if (last.segment.endOffset === last.endOffset && this.durableEnd >= this.logEnd) {
        // The log always keeps a segment at its end. Awaiting the roll also makes the new segment's
        // file durable before the old ones go.
        this.roll(this.clock.nowMs());
        await this.tail;
      } else {
        doomed.pop();
      }
    }
    const started: Promise<void>[] = [];
    let deletedSegments = 0;
    for (const { segment, endOffset } of doomed) {
      if (this.segments[0] !== segment || segment === this.active || segment.endOffset !== endOffset) break;
      deletedSegments++;
      this.segments.shift();
      this.totalBytes -= segment.sizeBytes;
      this.logStart = Math.max(this.logStart, segment.endOffset);
      segment.retired = true;
      const cached = this.cachedIndexes.indexOf(segment);
      if (cached >= 0) this.cachedIndexes.splice(cached, 1);
      if (segment.refs === 0) started.push(this.trackDeletion(this.destroy(segment)));
    }
    this.notify();
    await Promise.all(started);
    await fsyncDirOrDie(this.fs, this.dir, "after deleting segments");
    return { deletedSegments, logStartOffset: this.logStart, more };
  }

  private trackDeletion(deletion: Promise<void>): Promise<void> {
    const tracked = deletion.catch((error: unknown) => {
      this.deletionError ??= error;
    });
    this.deletions.add(tracked);
    void tracked.finally(() => this.deletions.delete(tracked));
    return deletion;
  }

  /** Closes and unlinks a retired segment's files (log first, so a crash leaves orphans, not gaps). */
  private async destroy(segment: Segment): Promise<void> {
    const handle = segment.handle;
    segment.handle = undefined;
    const open = this.openInactive.indexOf(segment);
    if (open >= 0) this.openInactive.splice(open, 1);
    if (handle !== undefined) await handle.close().catch(() => undefined);
    if (segment.filesReplaced) return;
    for (const path of [segment.logPath, segment.indexPath, segment.timeIndexPath, segment.txnIndexPath]) {
      // A former leader (its ownership gone) must not delete what its successor serves: the files stay,
      // and the next owner's retention deletes them.
      if (!this.mayWrite()) return;
      await this.fs.unlink(path).catch((error: unknown) => {
        if ((error as { code?: string }).code !== "ENOENT") throw error;
      });
    }
  }

  // ---- close ----------------------------------------------------------------------------------------

  /**
   * Writes everything out, makes it durable, writes the active segment's index files and a clean
   * shutdown checkpoint, and closes every file. A failed log only closes its files.
   */
  async close(): Promise<void> {
    if (this.closing || this.closed) return;
    this.closing = true;
    try {
      if (this.inflightReads > 0) await new Promise<void>((resolve) => this.readsDrained.push(resolve));
      await this.retention.catch(() => undefined);
      await Promise.all([...this.deletions]);
      // A failure rejects the queued operations at once, while the one in progress (a roll opening the
      // next segment's file) may still be running: wait for the pump itself, failed or not.
      await this.pumpRun;
      await this.txnIndexWrites.catch(() => undefined);
      if (this.failure === undefined) {
        await this.tail.catch(() => undefined);
        if (this.durableEnd < this.logEnd) await this.flusher.request();
        await this.checkpointer.idle();
        if (this.failure !== undefined) throw this.failure;
        const active = this.active;
        const timeIndex = active.timeIndex!;
        active.finalizeTimeIndex(timeIndex);
        await Promise.all([
          writeFileAtomic(this.fs, active.indexPath, active.offsetIndex!.encode()),
          writeFileAtomic(this.fs, active.timeIndexPath, timeIndex.encode()),
        ]);
        await saveLogCheckpoint(this.fs, this.checkpointPath, {
          logStartOffset: this.logStart,
          recoveryPoint: this.logEnd,
          cleanShutdown: { lastSegmentBaseOffset: active.baseOffset, lastSegmentBytes: active.sizeBytes },
        });
      }
    } finally {
      // An fsync or checkpoint run still in flight (a failed log skips the waits above) uses the handles.
      await this.flusher.idle();
      await this.checkpointer.idle();
      this.closed = true;
      await this.closeHandles();
    }
  }

  private async closeHandles(): Promise<void> {
    const handles = this.segments.map((s) => s.handle).filter((h): h is FileHandle => h !== undefined);
    for (const segment of this.segments) segment.handle = undefined;
    this.openInactive.length = 0;
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
  }

  // ---- recovery -------------------------------------------------------------------------------------

  private async recover(): Promise<void> {
    const fs = this.fs;
    const report = this.recoveryReport;
    const history = this.epochHistory;
    const latestEpoch = history.at(-1)?.epoch ?? 0;
    await ensureDir(fs, this.dir);
    // In cluster mode only this epoch's own tmp files: one of an older epoch's name may be a former
    // leader's write still in flight (a frozen broker resumed), which a successor must leave alone.
    const ownTmp = (name: string) => this.writerEpoch === 0 || tmpFileEpoch(name) === this.writerEpoch;
    report.removedFiles.push(...(await cleanTmpFiles(fs, this.dir, ownTmp)));
    // Before the segments are listed: an interrupted cleaner swap decides which segment files exist.
    const swap = await recoverSwap(fs, this.dir, latestEpoch);
    report.completedSwap = swap.completed;
    report.removedCleanedFiles = swap.removedCleanedFiles;
    report.fenced.ignoredFiles.push(...swap.fencedManifests);
    const names = await fs.readdir(this.dir);
    // The newest epoch's checkpoints are the ones trusted: an older epoch's may be a former leader's late write.
    const cleanerEpoch = epochsOf(names, CLEANER_CHECKPOINT_FILE).at(-1);
    if (cleanerEpoch !== undefined) {
      this.cleanerState = await loadCleanerCheckpoint(fs, join(this.dir, epochFileName(CLEANER_CHECKPOINT_FILE, cleanerEpoch)));
      this.cleanerCheckpointEpoch = cleanerEpoch;
    }
    const files: { baseOffset: number; epoch: number }[] = [];
    const indexFiles = new Set<string>();
    const logNames = new Set<string>();
    for (const name of names) {
      const match = SEGMENT_FILE_NAME.exec(name);
      if (match === null) continue;
      if (match[3] === "log") {
        files.push({ baseOffset: Number(match[1]), epoch: match[2] === undefined ? 0 : Number(match[2]) });
        logNames.add(name);
      } else {
        indexFiles.add(name);
      }
    }
    for (const name of indexFiles) {
      if (!logNames.has(name.replace(/\.(index|timeindex|txnindex)$/, ".log"))) {
        await fs.unlink(join(this.dir, name));
        report.removedFiles.push(name);
      }
    }
    // Which segment files are the log (docs/architecture.md, "Files of a leader epoch"): a file of epoch f
    // based at or past the first later epoch's start is a fenced former leader's, ignored whole (and not
    // deleted: that leader may still hold it open).
    const limitOf = (epoch: number) => fencedFrom(epoch, history, files);
    this.fenceOf = limitOf;
    const kept = files.filter((f) => {
      if (f.baseOffset < limitOf(f.epoch)) return true;
      report.fenced.ignoredFiles.push(segmentFileNameOf(f.baseOffset, "log", f.epoch));
      return false;
    });
    kept.sort((a, b) => a.baseOffset - b.baseOffset);

    const checkpointEpoch = epochsOf(names, LOG_CHECKPOINT_FILE).at(-1);
    let checkpoint = checkpointEpoch === undefined ? undefined : await loadLogCheckpoint(fs, join(this.dir, epochFileName(LOG_CHECKPOINT_FILE, checkpointEpoch)));
    if (checkpoint !== undefined && checkpointEpoch !== undefined && limitOf(checkpointEpoch) !== Number.POSITIVE_INFINITY) {
      // Written by an epoch that a later one followed before writing its own (a take-over cut short):
      // nothing it says past the later epoch's start can be the log's.
      const limit = limitOf(checkpointEpoch);
      checkpoint = { logStartOffset: Math.min(checkpoint.logStartOffset, limit), recoveryPoint: Math.min(checkpoint.recoveryPoint, limit), cleanShutdown: null };
    }
    const nowMs = this.clock.nowMs();
    if (kept.length === 0) {
      if (checkpoint !== undefined) {
        throw new CorruptStateError(this.dir, `no segment files, but ${LOG_CHECKPOINT_FILE} says offsets below ${checkpoint.recoveryPoint} were durable`);
      }
      report.created = files.length === 0;
      const segment = new Segment(this.dir, 0, nowMs, this.writerEpoch);
      segment.resetIndexes();
      segment.pinned = true;
      segment.handle = await fs.open(segment.logPath, "rw");
      await (await fs.open(segment.txnIndexPath, "w")).close();
      await fsyncDirOrDie(fs, this.dir, `after creating ${segment.logPath}`);
      this.segments = [segment];
      return;
    }

    const recoveryPoint = checkpoint?.recoveryPoint ?? 0;
    let changed = checkpoint === undefined || checkpointEpoch !== this.writerEpoch;
    for (let i = 0; i < kept.length; i++) {
      const { baseOffset: base, epoch } = kept[i]!;
      const segment = new Segment(this.dir, base, nowMs, epoch);
      this.segments.push(segment);
      const isLast = i === kept.length - 1;
      const limit = limitOf(epoch);
      // A later epoch follows: bytes of this segment past its start may be a former leader's late write.
      const followed = limit !== Number.POSITIVE_INFINITY;
      segment.followedByLaterEpoch = followed;
      // Every scan also stops at a batch stamped with a fenced epoch (a no-op for a single epoch).
      const scanFence: ScanFence = { stopAtOffset: limit, fencedFrom: limitOf };
      const fence = followed ? scanFence : undefined;
      if (!isLast) {
        segment.endOffset = kept[i + 1]!.baseOffset;
        segment.sizeBytes = segment.writtenBytes = (await fs.stat(segment.logPath))?.size ?? 0;
        segment.maxTimestampMs = undefined;
        const hasIndexes = indexFiles.has(segmentFileNameOf(base, "index", epoch)) && indexFiles.has(segmentFileNameOf(base, "timeindex", epoch));
        // Rebuilding scans every batch and refuses any bad one: this segment is not the last. A trusted
        // segment gets a cheap look at its size and its end first, and the scan only when that fails.
        if (segment.endOffset > recoveryPoint || !hasIndexes || (await this.trustedSegmentProblem(segment, fence)) !== undefined) {
          await this.rebuildIndexes(segment, false, scanFence);
          report.scannedSegments.push(segment.logName);
          changed = true;
        }
        this.totalBytes += segment.sizeBytes;
        continue;
      }
      segment.pinned = true;
      segment.handle = await fs.open(segment.logPath, "rw");
      const fileBytes = await segment.handle.size();
      const clean = checkpoint?.cleanShutdown;
      const trusted =
        fence === undefined &&
        clean !== null &&
        clean !== undefined &&
        clean.lastSegmentBaseOffset === base &&
        clean.lastSegmentBytes === fileBytes &&
        recoveryPoint >= base &&
        (await this.loadActiveIndexes(segment, fileBytes, recoveryPoint));
      if (trusted) {
        report.cleanShutdown = true;
        segment.sizeBytes = segment.writtenBytes = fileBytes;
        segment.endOffset = recoveryPoint;
        segment.bytesSinceIndexEntry = fileBytes - segment.offsetIndex!.lastPosition;
      } else {
        await this.recoverLastSegment(segment, fileBytes, recoveryPoint, scanFence);
        changed = true;
      }
      this.totalBytes += segment.sizeBytes;
    }
    const bounded = report.fenced.boundedSegments;
    if (bounded.length > 0 || report.fenced.ignoredFiles.length > 0) changed = true;

    // Everything that recovery kept was durable or has just been fsynced.
    for (const segment of this.segments) segment.durableBytes = segment.sizeBytes;
    const active = this.active;
    this.logEnd = this.writtenEnd = this.durableEnd = active.endOffset;
    this.logStart = Math.max(checkpoint?.logStartOffset ?? 0, this.segments[0]!.baseOffset);
    if (this.logEnd < recoveryPoint) {
      throw new CorruptStateError(
        active.logPath,
        `the log ends at offset ${this.logEnd}, but offsets below ${recoveryPoint} were durable (${LOG_CHECKPOINT_FILE})`,
      );
    }
    if (this.logStart > this.logEnd) {
      throw new CorruptStateError(active.logPath, `the log ends at offset ${this.logEnd}, below its log start offset ${this.logStart}`);
    }
    if (changed) {
      const next: LogCheckpoint = { logStartOffset: this.logStart, recoveryPoint: this.logEnd, cleanShutdown: null };
      await saveLogCheckpoint(fs, this.checkpointPath, next);
      this.lastCheckpointMonotonicMs = this.clock.monotonicMs();
    }
  }

  /**
   * Loads the index files of the last segment after a clean shutdown. False (scan instead) when either
   * is missing or unsound.
   */
  private async loadActiveIndexes(segment: Segment, fileBytes: number, endOffset: number): Promise<boolean> {
    const span = endOffset - segment.baseOffset;
    const indexBytes = await this.readIfExists(segment.indexPath);
    const timeBytes = await this.readIfExists(segment.timeIndexPath);
    if (indexBytes === undefined || timeBytes === undefined) return false;
    const offsetIndex = OffsetIndex.decode(indexBytes, fileBytes, span);
    const timeIndex = TimeIndex.decode(timeBytes, span);
    if (typeof offsetIndex === "string" || typeof timeIndex === "string") return false;
    segment.offsetIndex = offsetIndex;
    segment.timeIndex = timeIndex;
    const last = timeIndex.entries - 1;
    segment.maxTimestampMs = last >= 0 ? timeIndex.timestampAt(last) : -1;
    segment.offsetOfMaxTimestamp = last >= 0 ? segment.baseOffset + timeIndex.relOffsetAt(last) : -1;
    return true;
  }

  /** Scans the last segment, truncates a torn tail, and makes what remains durable. */
  private async recoverLastSegment(segment: Segment, fileBytes: number, recoveryPoint: number, fence: ScanFence | undefined): Promise<void> {
    const handle = segment.handle!;
    const result = await scanSegment(handle, fileBytes, segment.baseOffset, indexingVisitor(segment, this.config.indexIntervalBytes), false, fence);
    this.recoveryReport.scannedSegments.push(segment.logName);
    // A later epoch's start ends this segment: what follows is a former leader's, never truncated here
    // (it may still hold the file) and never read.
    if (result.fenced !== undefined) this.recoveryReport.fenced.boundedSegments.push({ file: segment.logName, ...result.fenced });
    const bad = result.bad;
    if (bad !== undefined) {
      const where = `${bad.reason} at position ${bad.position} (offset ${bad.expectedOffset})`;
      if (bad.expectedOffset < recoveryPoint) {
        throw new CorruptStateError(segment.logPath, `${where}, below the recovery point ${recoveryPoint}: flushed data is damaged`);
      }
      if (bad.followedByValidBatch) {
        throw new CorruptStateError(segment.logPath, `${where} is followed by a valid batch: damage inside the log, not a torn tail`);
      }
      await handle.truncate(result.validBytes);
      this.recoveryReport.truncated = { file: segment.logName, position: bad.position, bytes: fileBytes - result.validBytes, reason: bad.reason };
    }
    // What the scan read may have been only in the page cache of the process that crashed; fsync so
    // that everything below the new end offset is durable from now on.
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${segment.logPath} failed during recovery`, { cause: error });
    }
    segment.sizeBytes = segment.writtenBytes = result.validBytes;
    segment.endOffset = result.endOffset;
    segment.verified.add(0, result.validBytes);
  }
}

function segmentFileNameOf(baseOffset: number, extension: "log" | "index" | "timeindex", epoch: number): string {
  return segmentFileName(baseOffset, extension, epoch);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A read-ahead window over one segment file, bounded by the bytes readers may see. With `buffers` the
 * window is read into memory they hand out (and what the caller keeps of it stays there); without,
 * every read gets fresh memory.
 */
class ReadCursor {
  buffer: Uint8Array = EMPTY;
  private bufferStart = 0;
  /** The window is memory taken from `buffers` (given back in part by `release`). */
  private fromBuffers = false;

  constructor(
    private readonly handle: FileHandle,
    readonly limitBytes: number,
    private readonly readAheadBytes: number,
    private readonly buffers?: ReadBuffers,
  ) {}

  /** Makes [position, position + length) available; returns its index in `buffer`, -1 past the limit. */
  async ensure(position: number, length: number): Promise<number> {
    if (position >= this.bufferStart && position + length <= this.bufferStart + this.buffer.length) return position - this.bufferStart;
    if (position + length > this.limitBytes) return -1;
    const want = Math.min(this.limitBytes - position, Math.max(length, this.readAheadBytes));
    // A window that is moved on from is not kept: its memory goes back before the next one is taken.
    this.release(0);
    const bytes = await this.readAt(want, position);
    if (bytes.length < length) throw new FatalError(`segment file shorter than its written size: read ${bytes.length} of ${want} bytes at ${position}`);
    this.buffer = bytes;
    this.bufferStart = position;
    return 0;
  }

  /** Bytes [from, to): a view of the window when it holds them, one read otherwise. */
  async slice(from: number, to: number): Promise<Uint8Array> {
    if (from >= this.bufferStart && to <= this.bufferStart + this.buffer.length) {
      return this.buffer.subarray(from - this.bufferStart, to - this.bufferStart);
    }
    this.release(0);
    const bytes = await this.readAt(to - from, from);
    if (bytes.length < to - from) throw new FatalError(`segment file shorter than its written size at ${from}`);
    this.buffer = bytes;
    this.bufferStart = from;
    return bytes;
  }

  /**
   * Keeps the window's memory up to file position `keepTo` (what the caller returns a view of) and gives
   * the rest back to `buffers`; 0 gives all of it back.
   */
  release(keepTo: number): void {
    if (!this.fromBuffers) return;
    this.fromBuffers = false;
    const used = Math.max(0, Math.min(this.buffer.length, keepTo - this.bufferStart));
    this.buffers!.giveBack(used);
  }

  private async readAt(length: number, position: number): Promise<Uint8Array> {
    if (this.buffers === undefined || this.handle.readInto === undefined) return this.handle.read(length, position);
    const target = this.buffers.take(length);
    this.fromBuffers = true;
    const read = await this.handle.readInto(target, position);
    return read === length ? target : target.subarray(0, read);
  }
}

/**
 * What is wrong with the batch header at `at` of `buf` (`availableBytes` of written data from there on),
 * as the read path sees it before the batch's CRC is checked; undefined when nothing is. `expected` is the
 * offset the batch must start with (-1 for the first batch of a read).
 */
function headerProblem(
  buf: Uint8Array,
  at: number,
  size: number,
  availableBytes: number,
  base: number,
  last: number,
  expected: number,
  cleaned: boolean,
  segmentEnd: number,
): string | undefined {
  if (size < BATCH_HEADER_BYTES) return `invalid batch length ${size}`;
  if (size > availableBytes) return `batch length ${size} runs past the written data (${availableBytes} bytes left)`;
  const magic = (buf[at + MAGIC_AT]! << 24) >> 24;
  if (magic !== MAGIC_V2) return `magic ${magic}`;
  if (last < base) return `last offset ${last} below base offset ${base}`;
  if (expected >= 0 && (cleaned ? base < expected : base !== expected)) {
    return `base offset ${base} where ${cleaned ? "at least " : ""}${expected} was expected`;
  }
  if (last >= segmentEnd) return `offsets up to ${last}, beyond the segment's end offset ${segmentEnd}`;
  return undefined;
}

/** The leader epoch in a tmp file's name (`<base>.e<E>.<ext>.<hex>.tmp`), 0 for a name without one. */
function tmpFileEpoch(name: string): number {
  const match = /\.e([1-9]\d{0,9})(?:\.|$)/.exec(name.replace(/\.[0-9a-f]{16}\.tmp$/, ""));
  return match === null ? 0 : Number(match[1]);
}
