/**
 * The entry point of a log cleaner thread (a Bun Worker started by cleaner-threads.ts; docs/architecture.md,
 * "Compaction"): it runs cleanLog, the same pass the broker's thread would run, so that mapping the keys,
 * decoding, rebuilding and compressing batches and their CRCs take none of the broker's event loop.
 *
 * The log the pass sees (SegmentFilesLog) reads the segment files itself, by their names in the partition
 * directory and within the sizes the broker's thread reported when the pass began: the pass holds the
 * log's exclusive lock there, so no retention or other pass changes those segments meanwhile, and they
 * are inactive, so no append does. What only the broker's thread may change (its segment list, the
 * aborted-transaction index, the cleaner checkpoint) is asked of it with a message, and the pass waits for
 * the answer. The `.cleaned` files are written and fsynced here, through this thread's own real file
 * system: this file is the thread's `main`, and the only place in it that constructs one.
 *
 * Between batches the pass reads a flag in shared memory (1: stop) and counts its reads against the I/O
 * budget all threads share; while it is ahead of the rate it blocks in Atomics.wait on the stop flag, so a
 * stop wakes it at once. Nothing else is waiting for this thread's event loop.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { setPriority } from "node:os";
import { join } from "node:path";
import { OffsetMap } from "../../domain/compaction/offset-map.ts";
import type { AbortedTxnRange } from "../../domain/compaction/txn-cleaning.ts";
import { createNodeFs } from "../../platform/node-fs.ts";
import type { CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import { SharedIoThrottle } from "./cleaner-io-throttle.ts";
import {
  deserializeError,
  serializeError,
  type FromThreadMessage,
  type PassMessage,
  type ReplaceSegmentsRequest,
  type ReplyMessage,
  type SaveCheckpointRequest,
  type ToThreadMessage,
} from "./cleaner-thread-messages.ts";
import { cleanLog, type CleanableLog } from "./log-cleaner.ts";
import type { CleanableSegment, CleanedSegment } from "./partition-log.ts";
import { segmentFileName } from "./segment.ts";

/**
 * The thread's nice value on Linux, where it is the thread's own (setpriority of thread 0 is the calling
 * thread; elsewhere it would be the whole process's, the broker's thread with it). Cleaning is background
 * work: on a busy machine a request waking the broker's thread should get a core before the cleaner's
 * next batch does, rather than wait out the cleaner's time slice. The cleaner still gets its share of the
 * CPU under load, and all of what is idle.
 */
const CLEANER_THREAD_NICE = 10;

type RequestBody = Omit<SaveCheckpointRequest, "requestId"> | Omit<ReplaceSegmentsRequest, "requestId">;

const fs = createNodeFs();
const RESOLVED = Promise.resolve();
let stopFlag: Int32Array | undefined;
let throttle: SharedIoThrottle | undefined;
/** The offset map, kept for the next pass while its bounds stay the same (its memory is freed between passes). */
let map: { bytes: number; loadFactor: number; map: OffsetMap } | undefined;
const waiting = new Map<number, (reply: ReplyMessage) => void>();
let nextRequestId = 1;

function post(message: FromThreadMessage, transfer: Bun.Transferable[] = []): void {
  postMessage(message, transfer);
}

/** Asks the broker's thread to do something only it may, and waits for its answer. */
function request(body: RequestBody, transfer: Bun.Transferable[] = []): Promise<ReplyMessage> {
  const requestId = nextRequestId++;
  return new Promise<ReplyMessage>((resolve, reject) => {
    waiting.set(requestId, (reply) => (reply.error === undefined ? resolve(reply) : reject(deserializeError(reply.error))));
    post({ ...body, requestId } as FromThreadMessage, transfer);
  });
}

/** The partition log as seen from this thread (see the file comment). */
class SegmentFilesLog implements CleanableLog {
  readonly dir: string;
  sizeBytes: number;
  cleanerCheckpoint: CleanerCheckpoint;
  private segments: CleanableSegment[];
  /** The segment file being read, kept open between the reads of one segment. */
  private open: { baseOffset: number; fd: number } | undefined;

  constructor(pass: PassMessage) {
    this.dir = pass.dir;
    this.sizeBytes = pass.sizeBytes;
    this.cleanerCheckpoint = pass.cleanerCheckpoint;
    this.segments = pass.segments;
  }

  cleanableSegments(): CleanableSegment[] {
    return this.segments.map((s) => ({ ...s }));
  }

  async readSegmentBytes(baseOffset: number, position: number, length: number, into: Uint8Array): Promise<Uint8Array> {
    const segment = this.segments.find((s) => s.baseOffset === baseOffset);
    if (segment === undefined) throw new RangeError(`no inactive segment based at ${baseOffset} in ${this.dir}`);
    const want = Math.max(0, Math.min(length, segment.sizeBytes - position));
    const bytes = into.subarray(0, want);
    const fd = this.fileOf(baseOffset);
    let total = 0;
    // A blocking read: this thread has nothing else to do while it waits for the page cache or the disk.
    while (total < want) {
      const read = readSync(fd, bytes, total, want - total, position + total);
      if (read === 0) break;
      total += read;
    }
    return total === want ? bytes : bytes.subarray(0, total);
  }

  async saveCleanerCheckpoint(checkpoint: CleanerCheckpoint): Promise<void> {
    await request({ kind: "save-checkpoint", checkpoint });
    this.cleanerCheckpoint = { ...checkpoint };
  }

  async replaceSegments(cleaned: CleanedSegment, endOffset: number, keptAborted: AbortedTxnRange[]): Promise<void> {
    // The swap renames over the first replaced file and unlinks the others: nothing here may hold them.
    this.closeFile();
    const offsetIndex = cleaned.offsetIndex.encode();
    const timeIndex = cleaned.timeIndex.encode();
    const reply = await request(
      {
        kind: "replace-segments",
        replaced: cleaned.replaced,
        endOffset,
        sizeBytes: cleaned.sizeBytes,
        offsetIndex,
        timeIndex,
        maxTimestampMs: cleaned.maxTimestampMs,
        offsetOfMaxTimestamp: cleaned.offsetOfMaxTimestamp,
        txnIndexBytes: cleaned.txnIndexBytes,
        keptAborted,
      },
      [offsetIndex.buffer as ArrayBuffer, timeIndex.buffer as ArrayBuffer],
    );
    this.sizeBytes = reply.sizeBytes;
    const first = this.segments.findIndex((s) => s.baseOffset === cleaned.replaced[0]);
    // Named as PartitionLog.replaceSegments names it: the newest epoch of the segments it replaces.
    const epoch = Math.max(...this.segments.slice(first, first + cleaned.replaced.length).map((s) => s.epoch ?? 0));
    this.segments.splice(first, cleaned.replaced.length, { baseOffset: cleaned.replaced[0]!, endOffset, sizeBytes: cleaned.sizeBytes, ...(epoch === 0 ? {} : { epoch }) });
  }

  closeFile(): void {
    if (this.open === undefined) return;
    const { fd } = this.open;
    this.open = undefined;
    closeSync(fd);
  }

  private fileOf(baseOffset: number): number {
    if (this.open?.baseOffset === baseOffset) return this.open.fd;
    this.closeFile();
    const epoch = this.segments.find((s) => s.baseOffset === baseOffset)?.epoch ?? 0;
    const fd = openSync(join(this.dir, segmentFileName(baseOffset, "log", epoch)), "r");
    this.open = { baseOffset, fd };
    return fd;
  }
}

function offsetMapFor(bytes: number, loadFactor: number): OffsetMap {
  if (map === undefined || map.bytes !== bytes || map.loadFactor !== loadFactor) map = { bytes, loadFactor, map: new OffsetMap(bytes, loadFactor) };
  return map.map;
}

async function runPass(pass: PassMessage): Promise<void> {
  const stop = stopFlag!;
  const budget = throttle!;
  const log = new SegmentFilesLog(pass);
  const offsetMap = offsetMapFor(pass.mapBytes, pass.loadFactor);
  let outcome: FromThreadMessage;
  try {
    const stats = await cleanLog({
      fs,
      log,
      range: pass.range,
      nowMs: pass.nowMs,
      deleteRetentionMs: pass.deleteRetentionMs,
      maxGroupBytes: pass.maxGroupBytes,
      indexIntervalBytes: pass.indexIntervalBytes,
      map: offsetMap,
      producers: new Map(pass.producers),
      aborted: pass.aborted,
      throttle: (bytes) => {
        const waitMs = budget.delayAfter(bytes);
        // Wakes early when the broker's thread raises the stop flag (and notifies).
        if (waitMs > 0) Atomics.wait(stop, 0, 0, waitMs);
        return RESOLVED;
      },
      shouldStop: () => Atomics.load(stop, 0) !== 0,
    });
    outcome = { kind: "done", passId: pass.passId, stats };
  } catch (error) {
    outcome = { kind: "failed", passId: pass.passId, error: serializeError(error) };
  }
  // Before the answer: once the pass is answered the partition may be closed and its directory removed.
  try {
    log.closeFile();
  } catch (error) {
    if (outcome.kind === "done") outcome = { kind: "failed", passId: pass.passId, error: serializeError(error) };
  }
  offsetMap.clear();
  post(outcome);
}

addEventListener("message", (event: MessageEvent<ToThreadMessage>) => {
  const message = event.data;
  switch (message.kind) {
    case "init":
      stopFlag = new Int32Array(message.stop);
      throttle = new SharedIoThrottle(message.throttle);
      if (process.platform === "linux") {
        try {
          setPriority(CLEANER_THREAD_NICE);
        } catch {
          // Not allowed here (a sandbox): the thread runs at the broker's priority, as Apache's cleaner does.
        }
      }
      return;
    case "pass":
      void runPass(message);
      return;
    case "reply": {
      const settle = waiting.get(message.requestId);
      waiting.delete(message.requestId);
      settle?.(message);
      return;
    }
  }
});
