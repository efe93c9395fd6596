/**
 * The offset and time indexes of one partition log's segments (partition-log.ts is the facade;
 * docs/architecture.md, "The partition log"): the active segment's are in memory, an inactive segment's
 * offset index is loaded on first use (and checked, or rebuilt from the segment by a full scan) and the
 * last few used stay cached; time indexes of inactive segments are read from their files when needed.
 */
import { CorruptStateError } from "../../errors/errors.ts";
import type { Fs } from "../../platform/fs.ts";
import { writeFileAtomic } from "../atomic-file.ts";
import { OffsetIndex, TimeIndex } from "./indexes.ts";
import type { PartitionLogState } from "./partition-state.ts";
import { indexingVisitor, scanSegment, Segment, type ScanFence } from "./segment.ts";
import type { SegmentHandleCache } from "./segment-handle-cache.ts";

/** Inactive segments whose offset index stays in memory after a read. */
const CACHED_INACTIVE_INDEXES_MAX = 2;

export class SegmentIndexCache {
  private readonly cachedIndexes: Segment[] = [];

  constructor(
    private readonly state: PartitionLogState,
    private readonly handles: SegmentHandleCache,
  ) {}

  cacheIndex(segment: Segment): void {
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

  /** A segment left the log (retention, a swap): its index is no longer cached. */
  forget(segment: Segment): void {
    const cached = this.cachedIndexes.indexOf(segment);
    if (cached >= 0) this.cachedIndexes.splice(cached, 1);
  }

  /** The offset index of `segment`, loaded (and checked, or rebuilt) for an inactive one. */
  async offsetIndexOf(segment: Segment): Promise<OffsetIndex> {
    while (segment.offsetIndex === undefined) {
      segment.indexLoading ??= this.loadIndexes(segment).finally(() => (segment.indexLoading = undefined));
      await segment.indexLoading;
    }
    if (segment !== this.state.active) this.cacheIndex(segment);
    return segment.offsetIndex;
  }

  private async loadIndexes(segment: Segment): Promise<void> {
    const span = segment.endOffset - segment.baseOffset;
    const bytes = await readIfExists(this.state.fs, segment.indexPath);
    const decoded = bytes === undefined ? "missing" : OffsetIndex.decode(bytes, segment.sizeBytes, span);
    if (typeof decoded === "string") {
      await this.rebuildIndexes(segment, true);
      return;
    }
    segment.offsetIndex = decoded;
  }

  /** The time index of an inactive segment (never cached), or the active one's. */
  async timeIndexOf(segment: Segment): Promise<TimeIndex> {
    if (segment.timeIndex !== undefined) return segment.timeIndex;
    const bytes = await readIfExists(this.state.fs, segment.timeIndexPath);
    const decoded = bytes === undefined ? "missing" : TimeIndex.decode(bytes, segment.endOffset - segment.baseOffset);
    if (typeof decoded !== "string") return decoded;
    const rebuilt = await this.rebuildIndexes(segment, false);
    return rebuilt.timeIndex;
  }

  /** Max timestamp of a segment: in memory for the active one, the last time index entry otherwise. */
  async maxTimestampOf(segment: Segment): Promise<number> {
    if (segment.maxTimestampMs === undefined) {
      const timeIndex = await this.timeIndexOf(segment);
      const last = timeIndex.entries - 1;
      segment.maxTimestampMs = last >= 0 ? timeIndex.timestampAt(last) : -1;
      segment.offsetOfMaxTimestamp = last >= 0 ? segment.baseOffset + timeIndex.relOffsetAt(last) : -1;
    }
    return segment.maxTimestampMs;
  }

  /**
   * Rebuilds both index files of an inactive segment from its log (every batch checked: it is not the
   * last segment, so any bad batch is corruption) and writes them atomically.
   */
  async rebuildIndexes(segment: Segment, keepOffsetIndex: boolean, fence?: ScanFence): Promise<{ timeIndex: TimeIndex }> {
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
    const scratch = new Segment(this.state.dir, segment.baseOffset, segment.createdMs, segment.epoch);
    const handle = await this.handles.acquire(segment);
    try {
      const cleaned = this.state.mayBeCleaned(segment);
      const result = await scanSegment(handle, segment.sizeBytes, segment.baseOffset, indexingVisitor(scratch, this.state.config.indexIntervalBytes), cleaned, fence);
      if (result.fenced !== undefined) {
        this.state.recoveryReport.fenced.boundedSegments.push({ file: segment.logName, ...result.fenced });
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
      this.handles.release(segment);
    }
    const timeIndex = scratch.timeIndex!;
    scratch.finalizeTimeIndex(timeIndex);
    await Promise.all([
      writeFileAtomic(this.state.fs, segment.indexPath, scratch.offsetIndex!.encode()),
      writeFileAtomic(this.state.fs, segment.timeIndexPath, timeIndex.encode()),
    ]);
    this.state.recoveryReport.rebuiltIndexes.push(segment.indexPath, segment.timeIndexPath);
    if (keepOffsetIndex) segment.offsetIndex = scratch.offsetIndex;
    segment.maxTimestampMs = scratch.maxTimestampMs;
    segment.offsetOfMaxTimestamp = scratch.offsetOfMaxTimestamp;
    return { timeIndex };
  }
}

/** The bytes of the file at `path`, or undefined when there is none. */
export async function readIfExists(fs: Fs, path: string): Promise<Uint8Array | undefined> {
  const stat = await fs.stat(path);
  if (stat === undefined || stat.isDirectory) return undefined;
  return fs.readFile(path);
}
