/**
 * The types of the partition log's API (partition-log.ts, the facade the rest of the code uses): its
 * config, what its appends, reads, retention and recovery answer, and what the log cleaner and the
 * scrubber see of it. The map of the log's modules is in docs/architecture.md, "The partition log".
 */
import { ConfigError } from "../../errors/errors.ts";
import type { TimestampType } from "../../protocol/records/record-batch.ts";
import type { OffsetIndex, TimeIndex } from "./indexes.ts";
import type { EpochEntry } from "./leader-epoch-checkpoint.ts";
import type { SwapManifest } from "./segment-swap.ts";

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

export const INT32_MAX = 0x7fffffff;

export function validateConfig(config: LogConfig): Required<LogConfig> {
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
