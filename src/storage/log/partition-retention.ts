/**
 * Retention and DeleteRecords for one partition log (partition-log.ts is the facade;
 * docs/architecture.md, "The partition log"): the log start offset moves forward durably, and whole
 * segments below it, older than retention.ms or beyond retention.bytes are deleted from the front, a
 * few per pass. One pass at a time, and the log cleaner's passes run in the same line (`exclusive`):
 * each decides from the segment list the previous one left.
 */
import { fsyncDirOrDie } from "../atomic-file.ts";
import type { PartitionAppender } from "./partition-append.ts";
import type { DeleteRecordsResult, RetentionResult } from "./partition-log-types.ts";
import type { PartitionLogState } from "./partition-state.ts";
import type { Segment } from "./segment.ts";
import type { SegmentHandleCache } from "./segment-handle-cache.ts";
import type { SegmentIndexCache } from "./segment-index-cache.ts";

const RETENTION_SEGMENTS_PER_CALL = 8;

export class PartitionRetention {
  /** The last retention pass or exclusive work started: the next one waits for it. */
  private lastPass: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly state: PartitionLogState,
    private readonly handles: SegmentHandleCache,
    private readonly indexes: SegmentIndexCache,
    private readonly appender: PartitionAppender,
  ) {}

  /** Settles when the last pass started has (close waits for it). */
  async idle(): Promise<void> {
    await this.lastPass.catch(() => undefined);
  }

  /**
   * Runs `work` with retention and other cleaning passes kept out: each of them decides from the segment
   * list the previous one left.
   */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.lastPass.catch(() => undefined).then(work);
    this.lastPass = run.catch(() => undefined);
    return run;
  }

  /**
   * Moves the log start offset to `offset` (DeleteRecords) and makes it durable before answering. The
   * offset may not pass durableEndOffset. Whole segments below the new start go at the next retention.
   */
  async deleteRecordsBefore(offset: number): Promise<DeleteRecordsResult> {
    this.state.assertWritable();
    if (!Number.isSafeInteger(offset) || offset < 0 || offset > this.state.durableEnd) {
      return { kind: "offset-out-of-range", logStartOffset: this.state.logStart, durableEndOffset: this.state.durableEnd };
    }
    if (offset > this.state.logStart) {
      this.state.logStart = offset;
      this.state.notify();
      await this.appender.checkpointer.request();
    }
    return { kind: "ok", logStartOffset: this.state.logStart };
  }

  /**
   * Deletes whole segments from the front of the log that are below the log start offset, older than
   * retention.ms (by their newest timestamp, or file mtime when they carry none) or beyond
   * retention.bytes; never data that is not durable yet. Deletes at most a few segments per call
   * (`more` says whether to call again). When every segment qualifies, the active one is rolled first
   * so that the log keeps a segment at its end offset.
   */
  async enforceRetention(nowMs: number): Promise<RetentionResult> {
    this.state.assertWritable();
    // One retention pass at a time: each decides from the segment list the previous one left.
    const previous = this.lastPass;
    const run = previous.catch(() => undefined).then(() => this.runRetention(nowMs));
    this.lastPass = run;
    return run;
  }

  private async runRetention(nowMs: number): Promise<RetentionResult> {
    this.state.assertWritable();
    if (this.handles.deletionError !== undefined) {
      const error = this.handles.deletionError;
      this.handles.deletionError = undefined;
      throw error;
    }
    // Each doomed segment with the end offset it had when judged: appends made during the awaits below
    // must not be deleted with it.
    const doomed: { segment: Segment; endOffset: number }[] = [];
    let remainingBytes = this.state.totalBytes;
    let more = false;
    for (let i = 0; i < this.state.segments.length; i++) {
      const segment = this.state.segments[i]!;
      const isLast = i === this.state.segments.length - 1;
      const upperOffset = isLast ? this.state.logEnd : this.state.segments[i + 1]!.baseOffset;
      if (upperOffset > this.state.durableEnd || (isLast && segment.sizeBytes === 0)) break;
      let expired = upperOffset <= this.state.logStart;
      if (!expired && this.state.config.retentionBytes >= 0 && remainingBytes - segment.sizeBytes >= this.state.config.retentionBytes) expired = true;
      if (!expired && this.state.config.retentionMs >= 0) {
        let newestMs = await this.indexes.maxTimestampOf(segment);
        if (newestMs < 0) newestMs = (await this.state.fs.stat(segment.logPath))?.mtimeMs ?? nowMs;
        expired = nowMs - newestMs > this.state.config.retentionMs;
      }
      if (!expired) break;
      if (doomed.length === RETENTION_SEGMENTS_PER_CALL) {
        more = true;
        break;
      }
      doomed.push({ segment, endOffset: upperOffset });
      remainingBytes -= segment.sizeBytes;
    }
    this.state.assertWritable();
    const last = doomed.at(-1);
    if (last !== undefined && last.segment === this.state.active) {
      if (last.segment.endOffset === last.endOffset && this.state.durableEnd >= this.state.logEnd) {
        // The log always keeps a segment at its end. Awaiting the roll also makes the new segment's
        // file durable before the old ones go.
        this.appender.roll(this.state.clock.nowMs());
        await this.appender.tail;
      } else {
        doomed.pop();
      }
    }
    const started: Promise<void>[] = [];
    let deletedSegments = 0;
    for (const { segment, endOffset } of doomed) {
      if (this.state.segments[0] !== segment || segment === this.state.active || segment.endOffset !== endOffset) break;
      deletedSegments++;
      this.state.segments.shift();
      this.state.totalBytes -= segment.sizeBytes;
      this.state.logStart = Math.max(this.state.logStart, segment.endOffset);
      segment.retired = true;
      this.indexes.forget(segment);
      if (segment.refs === 0) started.push(this.handles.trackDeletion(this.handles.destroy(segment)));
    }
    this.state.notify();
    await Promise.all(started);
    await fsyncDirOrDie(this.state.fs, this.state.dir, "after deleting segments");
    return { deletedSegments, logStartOffset: this.state.logStart, more };
  }
}
