/**
 * The open file handles of one partition log's segments (partition-log.ts is the facade;
 * docs/architecture.md, "The partition log"): the active segment's handle stays open, inactive segments'
 * handles are opened on demand and the least recently used idle ones beyond a small limit are closed.
 * A segment is referenced while a read, scan or fsync uses its handle; a retired segment (deleted by
 * retention, replaced by a swap) has its handle closed and its files unlinked once nothing references it.
 */
import type { FileHandle } from "../../platform/fs.ts";
import type { PartitionLogState } from "./partition-state.ts";
import type { Segment } from "./segment.ts";

/** Inactive segments whose file handle stays open after a read (the active one is always open). */
const OPEN_INACTIVE_HANDLES_MAX = 2;

export class SegmentHandleCache {
  /** Inactive segments with an open handle, least recently used first. */
  private readonly openInactive: Segment[] = [];
  /** Deletions of retired segments in progress: close waits for them. */
  readonly deletions = new Set<Promise<void>>();
  /** The first deletion that failed: the next retention pass throws it. */
  deletionError: unknown;

  constructor(private readonly state: PartitionLogState) {}

  async acquire(segment: Segment): Promise<FileHandle> {
    if (this.state.closed) throw new Error(`partition log ${this.state.dir} is closed`);
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
      segment.opening ??= this.state.fs.open(segment.logPath, "r").then(
        async (handle) => {
          if (this.state.closed) {
            // The log closed its files while this one was opening: nothing may keep it open.
            segment.opening = undefined;
            await handle.close().catch(() => undefined);
            throw new Error(`partition log ${this.state.dir} is closed`);
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

  release(segment: Segment): void {
    segment.refs--;
    if (segment.refs > 0) return;
    if (segment.retired) this.trackDeletion(this.destroy(segment));
    else this.evictHandles();
  }

  /** A segment that just became inactive (a roll) keeps its open handle, as the most recently used. */
  keepOpen(segment: Segment): void {
    this.openInactive.push(segment);
    this.evictHandles();
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

  trackDeletion(deletion: Promise<void>): Promise<void> {
    const tracked = deletion.catch((error: unknown) => {
      this.deletionError ??= error;
    });
    this.deletions.add(tracked);
    void tracked.finally(() => this.deletions.delete(tracked));
    return deletion;
  }

  /** Closes and unlinks a retired segment's files (log first, so a crash leaves orphans, not gaps). */
  async destroy(segment: Segment): Promise<void> {
    const handle = segment.handle;
    segment.handle = undefined;
    const open = this.openInactive.indexOf(segment);
    if (open >= 0) this.openInactive.splice(open, 1);
    if (handle !== undefined) await handle.close().catch(() => undefined);
    if (segment.filesReplaced) return;
    for (const path of [segment.logPath, segment.indexPath, segment.timeIndexPath, segment.txnIndexPath]) {
      // A former leader (its ownership gone) must not delete what its successor serves: the files stay,
      // and the next owner's retention deletes them.
      if (!this.state.mayWrite()) return;
      await this.state.fs.unlink(path).catch((error: unknown) => {
        if ((error as { code?: string }).code !== "ENOENT") throw error;
      });
    }
  }

  async closeHandles(): Promise<void> {
    const handles = this.state.segments.map((s) => s.handle).filter((h): h is FileHandle => h !== undefined);
    for (const segment of this.state.segments) segment.handle = undefined;
    this.openInactive.length = 0;
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
  }
}
