/**
 * The background scrubber (docs/operations.md, "Damaged data"): walks every open partition's segments and
 * verifies every batch (framing, CRC-32C, codec and count, offsets contiguous and inside the segment),
 * one full pass after another with a pause between, at a bounded read rate (log.scrubber.bytes.per.second;
 * 0 turns it off). Segments trusted at start-up without a scan, and batches no consumer reads, are thus
 * still looked at within one pass.
 *
 * What it finds goes into the damage registry (segment-damage.ts), which logs each damage once and which
 * Fetch, /ready and /metrics read. Segments it only reads: damaged ones are left exactly as they are.
 * After each pass it has the slot stores check their files against memory (`VerifiedStore.verify`) and
 * rewrite a damaged slot from memory (`repair`), which still holds every acknowledged write.
 *
 * It stays out of the way of the broker's own work: reads of at most `chunkBytes`, each an await (other
 * requests run between them), paced to the rate; only what is fsynced of the active segment; and a
 * segment that retention deleted or the cleaner replaced while it was being read is skipped, never
 * reported (PartitionLog.readForScrub checks the segment's identity around every read). Pure logic over
 * the log's interface, the clock and the timers, so that tests drive it on a MemoryFs and a manual clock.
 */
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Timers } from "../../platform/timers.ts";
import { BATCH_HEADER_BYTES, baseOffsetAt, batchSizeAt, checkBatch, lastOffsetDeltaAt } from "../../protocol/records/record-batch.ts";
import type { ScrubSegment } from "./partition-log.ts";
import { FatalError } from "../../errors/errors.ts";
import type { StateVerifyReport } from "../journal-file.ts";
import type { SegmentDamageRegistry } from "./segment-damage.ts";
import { describeBatchProblem } from "./segment.ts";

/** What the scrubber needs of a partition log (PartitionLog has it). */
export interface ScrubbedLog {
  scrubSegments(): ScrubSegment[];
  readForScrub(segment: ScrubSegment, position: number, length: number): Promise<Uint8Array | undefined>;
  /** The scrubber found damage in the segment: reads must check its CRCs again (verified-ranges.ts). */
  forgetChecked(segment: ScrubSegment): void;
}

export interface ScrubbedPartition {
  /** `<topic>-<partition>`. */
  partition: string;
  log: ScrubbedLog;
}

/** A store of state files the scrubber checks after each pass (TxnStateStore, OffsetStore). */
export interface VerifiedStore {
  /** `txn_state` or `offsets`, for reports. */
  readonly name: string;
  verify(): Promise<StateVerifyReport>;
  /** Rewrites the slot of a damaged file from memory; false when the file is not the store's. */
  repair(path: string): Promise<boolean>;
}

export interface ScrubberStats {
  /** Bytes of the batches verified. */
  bytesScrubbed: number;
  /** Bytes read (what the rate bounds): a little more than scrubbed, since a batch cut by a read is read again whole. */
  bytesRead: number;
  batchesVerified: number;
  /** Damaged batches found that were not known before (the same damage found again is not counted). */
  damagedBatchesFound: number;
  passesCompleted: number;
  /** State-file slots checked against memory (one per loaded slot per pass). */
  stateSlotsChecked: number;
  /** Damaged state files found that were not known before. */
  stateFileDamageFound: number;
  /** Damaged state files the stores rewrote from memory. */
  stateFilesRepaired: number;
  /** Wall-clock time the last full pass ended; -1 before the first. */
  lastFullPassEndMs: number;
  lastFullPassDurationMs: number;
}

export interface SegmentScrubberOptions {
  /** The partitions to scrub, asked at the start of every pass. */
  partitions: () => Promise<ScrubbedPartition[]>;
  damage: SegmentDamageRegistry;
  /** The state-file stores to check after each pass of the segments, asked each time. */
  stateStores?: () => readonly VerifiedStore[];
  clock: Clock;
  timers: Timers;
  log: Logger;
  /** The read rate bound, asked before every read; 0 (or less) stops the scrubber until it is raised. */
  bytesPerSecond: () => number;
  /** The pause after a full pass, and between looks at a rate of 0. */
  pauseBetweenPassesMs?: number;
  /** The most one read brings in (a larger batch is read whole). */
  chunkBytes?: number;
}

export const SCRUBBER_PAUSE_BETWEEN_PASSES_MS_DEFAULT = 60_000;
const CHUNK_BYTES_DEFAULT = 256 * 1024;
/** A wait below this is not worth a timer: the read goes on at once. */
const MIN_WAIT_MS = 1;
const EMPTY = new Uint8Array(0);

export class SegmentScrubber {
  private readonly stats: ScrubberStats = {
    bytesScrubbed: 0,
    bytesRead: 0,
    batchesVerified: 0,
    damagedBatchesFound: 0,
    passesCompleted: 0,
    stateSlotsChecked: 0,
    stateFileDamageFound: 0,
    stateFilesRepaired: 0,
    lastFullPassEndMs: -1,
    lastFullPassDurationMs: 0,
  };
  private readonly pauseMs: number;
  private readonly chunkBytes: number;
  /** Monotonic time before which the next read may not start (the rate's pacing). */
  private nextReadAtMs = 0;
  private stopped = false;
  private running: Promise<void> | undefined;
  /**
   * Every wait in progress (the loop's pause, a pace between reads; a pass a caller runs beside the loop
   * has its own), each ended at once by `stop`.
   */
  private readonly waits = new Set<() => void>();

  constructor(private readonly opts: SegmentScrubberOptions) {
    this.pauseMs = opts.pauseBetweenPassesMs ?? SCRUBBER_PAUSE_BETWEEN_PASSES_MS_DEFAULT;
    this.chunkBytes = opts.chunkBytes ?? CHUNK_BYTES_DEFAULT;
  }

  get statistics(): Readonly<ScrubberStats> {
    return this.stats;
  }

  /** Starts passes in the background until `stop`. */
  start(): void {
    if (this.running !== undefined || this.stopped) return;
    this.running = this.loop();
  }

  /** Ends the pass in progress at its next read and waits for it. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const endWait of [...this.waits]) endWait();
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      if (this.opts.bytesPerSecond() > 0) {
        try {
          await this.runPass();
        } catch (error) {
          // A failed fsync (a repair's) is the process's end, as everywhere.
          if (error instanceof FatalError) throw error;
          // A bug or an unreadable directory must not end scrubbing for good: the next pass tries again.
          this.opts.log.warn("segment scrubber pass failed", { error: error instanceof Error ? error.message : String(error) });
        }
      }
      await this.sleep(this.pauseMs);
    }
  }

  /**
   * One full pass over every partition and segment. Resolves true when it completed, false when it was
   * stopped or the rate set to 0 on the way.
   */
  async runPass(): Promise<boolean> {
    const startedMs = this.opts.clock.monotonicMs();
    for (const target of await this.opts.partitions()) {
      if (!this.mayGoOn()) return false;
      const segments = target.log.scrubSegments();
      // Findings in files that are gone (retention, a cleaner swap) describe data that no longer exists.
      const files = new Set(segments.map((s) => s.file));
      this.opts.damage.retain(target.partition, (d) => files.has(d.file));
      for (const segment of segments) {
        if (!this.mayGoOn()) return false;
        await this.scrubSegment(target, segment);
      }
    }
    if (!this.mayGoOn()) return false;
    await this.checkStateFiles();
    if (!this.mayGoOn()) return false;
    this.stats.passesCompleted++;
    this.stats.lastFullPassEndMs = this.opts.clock.nowMs();
    this.stats.lastFullPassDurationMs = this.opts.clock.monotonicMs() - startedMs;
    return true;
  }

  /**
   * Each store re-reads its loaded slots' files and compares them with memory; a damaged slot is
   * rewritten from memory at once, which holds every acknowledged write (the next start would otherwise
   * refuse the file). These files are small beside the segments and read once per pass, so they are not
   * paced by the rate.
   */
  private async checkStateFiles(): Promise<void> {
    for (const store of this.opts.stateStores?.() ?? []) {
      const report = await store.verify();
      this.stats.stateSlotsChecked += report.checked;
      for (const problem of report.problems) {
        const finding = this.opts.damage.recordStateFile({ store: store.name, file: problem.path, reason: problem.reason });
        if (finding === undefined) continue;
        this.stats.stateFileDamageFound++;
        if (await store.repair(problem.path)) {
          this.opts.damage.stateFileRepaired(finding);
          this.stats.stateFilesRepaired++;
        }
      }
    }
  }

  private mayGoOn(): boolean {
    return !this.stopped && this.opts.bytesPerSecond() > 0;
  }

  /** Verifies one segment from its start to its verifiable end; stops at the first damage or when it is gone. */
  private async scrubSegment(target: ScrubbedPartition, segment: ScrubSegment): Promise<void> {
    const limit = segment.verifiableBytes;
    let buffer: Uint8Array = EMPTY;
    let bufferStart = 0;
    let position = 0;
    let expected = segment.cleaned ? -1 : segment.baseOffset;
    const damaged = (reason: string, offset: number) => {
      // Reads may have checked these bytes before they changed: from now on they check them again.
      target.log.forgetChecked(segment);
      const fresh = this.opts.damage.record({ partition: target.partition, file: segment.file, position, offset, reason, foundBy: "scrubber" });
      if (fresh) this.stats.damagedBatchesFound++;
    };
    const read = async (length: number): Promise<boolean> => {
      if (!this.mayGoOn()) return false;
      await this.pace();
      let bytes: Uint8Array | undefined;
      try {
        bytes = await target.log.readForScrub(segment, position, Math.max(length, this.chunkBytes));
      } catch (error) {
        // The segment's file vanished under a close or a delete in progress: nothing to say about it.
        this.opts.log.debug("segment scrubber skipped a segment it could not read", {
          partition: target.partition,
          file: segment.file,
          error: error instanceof Error ? error.message : String(error),
        });
        return false;
      }
      if (bytes === undefined) return false;
      this.stats.bytesRead += bytes.length;
      this.nextReadAtMs = Math.max(this.nextReadAtMs, this.opts.clock.monotonicMs()) + (bytes.length * 1000) / this.opts.bytesPerSecond();
      buffer = bytes;
      bufferStart = position;
      return true;
    };

    while (position < limit) {
      let at = position - bufferStart;
      if (at + BATCH_HEADER_BYTES > buffer.length) {
        if (limit - position < BATCH_HEADER_BYTES) {
          if (!segment.active) damaged(`${limit - position} bytes at the end of the segment hold no batch`, expected);
          return;
        }
        if (!(await read(BATCH_HEADER_BYTES))) return;
        at = 0;
        if (buffer.length < BATCH_HEADER_BYTES) return damaged(`the file ends before its size (${limit} bytes)`, expected);
      }
      const size = batchSizeAt(buffer, at);
      if (size >= BATCH_HEADER_BYTES && size <= limit - position && at + size > buffer.length) {
        if (!(await read(size))) return;
        at = 0;
      }
      const checked = checkBatch(buffer, at, at + Math.min(buffer.length - at, limit - position), segment.cleaned);
      const base = baseOffsetAt(buffer, at);
      if (typeof checked !== "number") return damaged(describeBatchProblem(checked), expected >= 0 ? expected : base);
      const last = base + lastOffsetDeltaAt(buffer, at);
      if (expected >= 0 && (segment.cleaned ? base < expected : base !== expected)) {
        return damaged(`base offset ${base} where ${segment.cleaned ? "at least " : ""}${expected} was expected`, expected);
      }
      if (last >= segment.endOffset) return damaged(`offsets up to ${last}, beyond the segment's end offset ${segment.endOffset}`, base);
      this.stats.batchesVerified++;
      this.stats.bytesScrubbed += checked;
      expected = last + 1;
      position += checked;
    }
    if (!segment.active && !segment.cleaned && expected !== segment.endOffset) {
      damaged(`the batches end at offset ${expected - 1}, the next segment starts at ${segment.endOffset}`, expected);
    }
  }

  /** Waits until the rate allows the next read. */
  private async pace(): Promise<void> {
    const waitMs = this.nextReadAtMs - this.opts.clock.monotonicMs();
    if (waitMs >= MIN_WAIT_MS) await this.sleep(waitMs);
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const endWait = () => {
        this.waits.delete(endWait);
        cancel();
        resolve();
      };
      const cancel = this.opts.timers.after(ms, endWait);
      this.waits.add(endWait);
    });
  }
}
