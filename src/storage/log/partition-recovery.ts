/**
 * Recovery of one partition log at open (partition-log.ts is the facade; its file comment has the rules
 * under "Recovery at open", docs/architecture.md "Recovery" and "Files of a leader epoch" the why): an
 * interrupted cleaner swap completed or undone, which segment files are the log, trusted segments given
 * a cheap look and the others scanned, a torn tail of the last segment truncated, and the log checkpoint
 * rewritten when anything changed. Damage anywhere else fails the open with a CorruptStateError.
 */
import { CorruptStateError, FatalError } from "../../errors/errors.ts";
import { BATCH_HEADER_BYTES, baseOffsetAt, batchSizeAt, checkBatch, lastOffsetDeltaAt } from "../../protocol/records/record-batch.ts";
import { cleanTmpFiles, ensureDir, fsyncDirOrDie } from "../atomic-file.ts";
import { join } from "node:path";
import { CLEANER_CHECKPOINT_FILE, loadCleanerCheckpoint } from "./cleaner-checkpoint.ts";
import { epochFileName, epochsOf, fencedFrom } from "./epoch-files.ts";
import { OFFSET_INDEX_ENTRY_BYTES, OffsetIndex, TimeIndex } from "./indexes.ts";
import { LOG_CHECKPOINT_FILE, loadLogCheckpoint, saveLogCheckpoint, type LogCheckpoint } from "./log-checkpoint.ts";
import { EMPTY, headerProblem } from "./partition-read.ts";
import type { PartitionLogState } from "./partition-state.ts";
import { describeBatchProblem, indexingVisitor, partitionLeaderEpochAt, scanSegment, Segment, SEGMENT_FILE_NAME, segmentFileName, type ScanFence } from "./segment.ts";
import type { SegmentHandleCache } from "./segment-handle-cache.ts";
import { readIfExists, type SegmentIndexCache } from "./segment-index-cache.ts";
import { recoverSwap } from "./segment-swap.ts";

/** What the start-up look at a trusted segment's end reads at a time. */
const TAIL_CHECK_WINDOW_BYTES = 64 * 1024;

export class PartitionRecovery {
  constructor(
    private readonly state: PartitionLogState,
    private readonly handles: SegmentHandleCache,
    private readonly indexes: SegmentIndexCache,
  ) {}

  async recover(): Promise<void> {
    const fs = this.state.fs;
    const report = this.state.recoveryReport;
    const history = this.state.epochHistory;
    const latestEpoch = history.at(-1)?.epoch ?? 0;
    await ensureDir(fs, this.state.dir);
    // In cluster mode only this epoch's own tmp files: one of an older epoch's name may be a former
    // leader's write still in flight (a frozen broker resumed), which a successor must leave alone.
    const ownTmp = (name: string) => this.state.writerEpoch === 0 || tmpFileEpoch(name) === this.state.writerEpoch;
    report.removedFiles.push(...(await cleanTmpFiles(fs, this.state.dir, ownTmp)));
    // Before the segments are listed: an interrupted cleaner swap decides which segment files exist.
    const swap = await recoverSwap(fs, this.state.dir, latestEpoch);
    report.completedSwap = swap.completed;
    report.removedCleanedFiles = swap.removedCleanedFiles;
    report.fenced.ignoredFiles.push(...swap.fencedManifests);
    const names = await fs.readdir(this.state.dir);
    // The newest epoch's checkpoints are the ones trusted: an older epoch's may be a former leader's late write.
    const cleanerEpoch = epochsOf(names, CLEANER_CHECKPOINT_FILE).at(-1);
    if (cleanerEpoch !== undefined) {
      this.state.cleanerState = await loadCleanerCheckpoint(fs, join(this.state.dir, epochFileName(CLEANER_CHECKPOINT_FILE, cleanerEpoch)));
      this.state.cleanerCheckpointEpoch = cleanerEpoch;
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
        await fs.unlink(join(this.state.dir, name));
        report.removedFiles.push(name);
      }
    }
    // Which segment files are the log (docs/architecture.md, "Files of a leader epoch"): a file of epoch f
    // based at or past the first later epoch's start is a fenced former leader's, ignored whole (and not
    // deleted: that leader may still hold it open).
    const limitOf = (epoch: number) => fencedFrom(epoch, history, files);
    this.state.fenceOf = limitOf;
    const kept = files.filter((f) => {
      if (f.baseOffset < limitOf(f.epoch)) return true;
      report.fenced.ignoredFiles.push(segmentFileNameOf(f.baseOffset, "log", f.epoch));
      return false;
    });
    kept.sort((a, b) => a.baseOffset - b.baseOffset);

    const checkpointEpoch = epochsOf(names, LOG_CHECKPOINT_FILE).at(-1);
    let checkpoint = checkpointEpoch === undefined ? undefined : await loadLogCheckpoint(fs, join(this.state.dir, epochFileName(LOG_CHECKPOINT_FILE, checkpointEpoch)));
    if (checkpoint !== undefined && checkpointEpoch !== undefined && limitOf(checkpointEpoch) !== Number.POSITIVE_INFINITY) {
      // Written by an epoch that a later one followed before writing its own (a take-over cut short):
      // nothing it says past the later epoch's start can be the log's.
      const limit = limitOf(checkpointEpoch);
      checkpoint = { logStartOffset: Math.min(checkpoint.logStartOffset, limit), recoveryPoint: Math.min(checkpoint.recoveryPoint, limit), cleanShutdown: null };
    }
    const nowMs = this.state.clock.nowMs();
    if (kept.length === 0) {
      if (checkpoint !== undefined) {
        throw new CorruptStateError(this.state.dir, `no segment files, but ${LOG_CHECKPOINT_FILE} says offsets below ${checkpoint.recoveryPoint} were durable`);
      }
      report.created = files.length === 0;
      const segment = new Segment(this.state.dir, 0, nowMs, this.state.writerEpoch);
      segment.resetIndexes();
      segment.pinned = true;
      segment.handle = await fs.open(segment.logPath, "rw");
      await (await fs.open(segment.txnIndexPath, "w")).close();
      await fsyncDirOrDie(fs, this.state.dir, `after creating ${segment.logPath}`);
      this.state.segments = [segment];
      return;
    }

    const recoveryPoint = checkpoint?.recoveryPoint ?? 0;
    let changed = checkpoint === undefined || checkpointEpoch !== this.state.writerEpoch;
    for (let i = 0; i < kept.length; i++) {
      const { baseOffset: base, epoch } = kept[i]!;
      const segment = new Segment(this.state.dir, base, nowMs, epoch);
      this.state.segments.push(segment);
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
          await this.indexes.rebuildIndexes(segment, false, scanFence);
          report.scannedSegments.push(segment.logName);
          changed = true;
        }
        this.state.totalBytes += segment.sizeBytes;
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
      this.state.totalBytes += segment.sizeBytes;
    }
    const bounded = report.fenced.boundedSegments;
    if (bounded.length > 0 || report.fenced.ignoredFiles.length > 0) changed = true;

    // Everything that recovery kept was durable or has just been fsynced.
    for (const segment of this.state.segments) segment.durableBytes = segment.sizeBytes;
    const active = this.state.active;
    this.state.logEnd = this.state.writtenEnd = this.state.durableEnd = active.endOffset;
    this.state.logStart = Math.max(checkpoint?.logStartOffset ?? 0, this.state.segments[0]!.baseOffset);
    if (this.state.logEnd < recoveryPoint) {
      throw new CorruptStateError(
        active.logPath,
        `the log ends at offset ${this.state.logEnd}, but offsets below ${recoveryPoint} were durable (${LOG_CHECKPOINT_FILE})`,
      );
    }
    if (this.state.logStart > this.state.logEnd) {
      throw new CorruptStateError(active.logPath, `the log ends at offset ${this.state.logEnd}, below its log start offset ${this.state.logStart}`);
    }
    if (changed) {
      const next: LogCheckpoint = { logStartOffset: this.state.logStart, recoveryPoint: this.state.logEnd, cleanShutdown: null };
      await saveLogCheckpoint(fs, this.state.checkpointPath, next);
      this.state.lastCheckpointMonotonicMs = this.state.clock.monotonicMs();
    }
  }

  /**
   * Loads the index files of the last segment after a clean shutdown. False (scan instead) when either
   * is missing or unsound.
   */
  private async loadActiveIndexes(segment: Segment, fileBytes: number, endOffset: number): Promise<boolean> {
    const span = endOffset - segment.baseOffset;
    const indexBytes = await readIfExists(this.state.fs, segment.indexPath);
    const timeBytes = await readIfExists(this.state.fs, segment.timeIndexPath);
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
    const result = await scanSegment(handle, fileBytes, segment.baseOffset, indexingVisitor(segment, this.state.config.indexIntervalBytes), false, fence);
    this.state.recoveryReport.scannedSegments.push(segment.logName);
    // A later epoch's start ends this segment: what follows is a former leader's, never truncated here
    // (it may still hold the file) and never read.
    if (result.fenced !== undefined) this.state.recoveryReport.fenced.boundedSegments.push({ file: segment.logName, ...result.fenced });
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
      this.state.recoveryReport.truncated = { file: segment.logName, position: bad.position, bytes: fileBytes - result.validBytes, reason: bad.reason };
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

  /**
   * A cheap look at a segment that recovery trusts without a scan (wholly below the recovery point, with
   * its index files): it must not be empty when offsets belong to it, its offset index must fit its size,
   * and the batches from the last index entry on must be sound and end exactly at the end of the file, at
   * the next segment's base offset. Why something is off, or undefined. It reads the offset index and
   * about one index interval of the segment, so start-up stays fast; what it misses in the middle of a
   * segment the read path and the scrubber find (docs/operations.md, "Damaged data").
   */
  private async trustedSegmentProblem(segment: Segment, fence?: ScanFence): Promise<string | undefined> {
    const cleaned = this.state.mayBeCleaned(segment);
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
    const handle = await this.handles.acquire(segment);
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
      this.handles.release(segment);
    }
  }

  /**
   * The last entry of an offset index file, read alone: "empty" for an index without entries,
   * "unusable" when the file is missing, not a whole number of entries, or its last entry is out of the
   * segment's offset span (the full decode at first use judges such an index).
   */
  private async lastIndexEntry(path: string, offsetSpan: number): Promise<{ relOffset: number; position: number } | "empty" | "unusable"> {
    const stat = await this.state.fs.stat(path);
    if (stat === undefined || stat.isDirectory || stat.size % OFFSET_INDEX_ENTRY_BYTES !== 0) return "unusable";
    if (stat.size === 0) return "empty";
    const handle = await this.state.fs.open(path, "r");
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
}

function segmentFileNameOf(baseOffset: number, extension: "log" | "index" | "timeindex", epoch: number): string {
  return segmentFileName(baseOffset, extension, epoch);
}

/** The leader epoch in a tmp file's name (`<base>.e<E>.<ext>.<hex>.tmp`), 0 for a name without one. */
function tmpFileEpoch(name: string): number {
  const match = /\.e([1-9]\d{0,9})(?:\.|$)/.exec(name.replace(/\.[0-9a-f]{16}\.tmp$/, ""));
  return match === null ? 0 : Number(match[1]);
}
