/**
 * What every part of one partition log shares (partition-log.ts is the facade; docs/architecture.md,
 * "The partition log", has the map): the segments, the end offsets, the config, the leader epoch it
 * writes, the cleaner's checkpoint, the reads in flight, and whether the log failed or closes. The
 * parts (appends, reads, indexes, handles, retention, recovery) each change their own share of it; this
 * object holds it in one place so that no part keeps a copy that could fall behind.
 */
import type { FatalError } from "../../errors/errors.ts";
import type { Clock } from "../../platform/clock.ts";
import type { Fs } from "../../platform/fs.ts";
import { join } from "node:path";
import type { CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import { epochFileName, fencedFrom } from "./epoch-files.ts";
import type { EpochEntry } from "./leader-epoch-checkpoint.ts";
import { LOG_CHECKPOINT_FILE } from "./log-checkpoint.ts";
import { INT32_MAX, validateConfig, type LogConfig, type LogOpenOptions, type RecoveryReport } from "./partition-log-types.ts";
import type { Segment } from "./segment.ts";

export class PartitionLogState {
  config: Required<LogConfig>;
  get checkpointPath(): string {
    return join(this.dir, epochFileName(LOG_CHECKPOINT_FILE, this.writerEpoch));
  }
  /** Ordered by base offset; the last one is the active segment. Never empty. */
  segments: Segment[] = [];

  logStart = 0;
  logEnd = 0;
  writtenEnd = 0;
  durableEnd = 0;
  totalBytes = 0;
  /** When the log checkpoint was last written (by a flush's request, a roll, or recovery). */
  lastCheckpointMonotonicMs: number;

  inflightReads = 0;
  /** Waiting for the reads in flight to finish (a swap, close): called when the count drops to zero. */
  readsDrained: (() => void)[] = [];
  /** Set while cleaned segments are swapped in: reads wait for it (see PartitionLog.replaceSegments). */
  swapping: Promise<void> | undefined;
  /** What the log cleaner last recorded (cleaner-checkpoint.json). */
  cleanerState: CleanerCheckpoint = { firstDirtyOffset: -1, gapsBelowOffset: 0, pendingDeleteHorizonMs: -1 };

  failure: FatalError | undefined;
  closing = false;
  closed = false;
  /** The epoch whose files this log writes (see partition-log.ts's file comment). */
  writerEpoch: number;
  readonly epochHistory: readonly EpochEntry[];
  readonly mayWrite: () => boolean;
  /** fencedFrom of the history and the segment files open found. */
  fenceOf: (epoch: number) => number = (epoch) => fencedFrom(epoch, this.epochHistory);
  /** The epoch of the file the cleaner checkpoint was read from (-1: none): startEpoch copies an older one. */
  cleanerCheckpointEpoch = -1;

  /** What `open` found and did; for logs and tests. */
  readonly recoveryReport: RecoveryReport = {
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

  constructor(
    readonly fs: Fs,
    readonly dir: string,
    config: LogConfig,
    readonly clock: Clock,
    options: LogOpenOptions,
    /** Called by `notify`: the facade owns the set (PartitionLog.onAppend). */
    private readonly listeners: ReadonlySet<() => void>,
  ) {
    this.config = validateConfig(config);
    this.writerEpoch = options.writerEpoch ?? 0;
    if (!Number.isInteger(this.writerEpoch) || this.writerEpoch < 0 || this.writerEpoch > INT32_MAX) throw new RangeError(`writer epoch ${this.writerEpoch} is not an int32 >= 0`);
    this.epochHistory = options.epochHistory ?? [{ epoch: 0, startOffset: 0 }];
    this.mayWrite = options.mayWrite ?? (() => true);
    this.lastCheckpointMonotonicMs = clock.monotonicMs();
  }

  get active(): Segment {
    return this.segments[this.segments.length - 1]!;
  }

  /** The segment may have been rewritten by the cleaner (its offsets may have gaps). */
  mayBeCleaned(segment: Segment): boolean {
    return segment.baseOffset < this.cleanerState.gapsBelowOffset;
  }

  notify(): void {
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

  assertWritable(): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing || this.closed) throw new Error(`partition log ${this.dir} is closed`);
  }

  assertReadable(): void {
    if (this.closed || this.closing) throw new Error(`partition log ${this.dir} is closed`);
  }

  endRead(): void {
    this.inflightReads--;
    if (this.inflightReads === 0 && this.readsDrained.length > 0) {
      const waiting = this.readsDrained;
      this.readsDrained = [];
      for (const resolve of waiting) resolve();
    }
  }
}
