/**
 * Batched fsyncs: the fsyncs requested during one event-loop turn are made durable together, with one
 * syncfs(2) of the data directory's file system when they name enough distinct files.
 *
 * Why: every fsync ends in a flush of the device's write cache, and on a virtual disk each flush is an
 * exit to the hypervisor. A transaction touches about ten partitions twice (its records, then its
 * markers). On this project's 2-core test machine (scripts/bench-fsync.ts, docs/benchmarks.md), ten files
 * fsynced in parallel took 0.91 ms and 1.04 ms of the machine's CPU per round; one syncfs covering the
 * same ten files, then one flush, took 0.61 ms and 0.43 ms.
 *
 * The guarantee is the fsync's: a request settles only after a sync that started after the request was
 * made has completed, and a failed sync rejects every request it covered (the caller treats that as
 * fatal, as it does a failed fsync). Requests made while a syncfs is running wait for the next one; the
 * ones made in the same turn start together at the end of it.
 */

/**
 * The smallest batch worth a syncfs. On this project's test machine (virtio disk, ext4 without a journal)
 * one file is faster with its own fsync (0.40 against 0.45 ms); at three files one syncfs already takes
 * less time and less CPU (0.51 against 0.57 ms, 0.33 against 0.47 ms of CPU).
 */
export const SYNCFS_MIN_FILES = 3;

/**
 * One open file to make durable: its device (st_dev) and how to fsync it alone. One object per open file:
 * requests with the same object count as one file in a batch.
 */
export interface SyncTarget {
  readonly dev: number;
  fsync(): Promise<void>;
}

/** The file-system-wide sync: syncfs(2) of the anchor's file system, then a flush of the device. */
export interface FilesystemSyncer {
  /** The device (st_dev) it makes durable; targets on other devices are fsynced alone. */
  readonly dev: number;
  /** Resolves once everything written to the file system before the call is durable. */
  syncAll(): Promise<void>;
}

export interface BatchedSyncOptions {
  syncer: FilesystemSyncer | undefined;
  /** Batches with at least this many distinct files of the syncer's device use one syncfs. */
  minFilesForSyncfs: number;
  /** Runs `fn` after the current event-loop turn (setImmediate), so that a turn's requests batch. */
  defer?: (fn: () => void) => void;
  /** Told about every batch, for metrics: how it was made durable and how many distinct files it held. */
  onBatch?: (method: "syncfs" | "fsync", files: number) => void;
}

interface Waiter {
  target: SyncTarget;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class BatchedSync {
  private readonly syncer: FilesystemSyncer | undefined;
  private readonly minFiles: number;
  private readonly defer: (fn: () => void) => void;
  private readonly onBatch: (method: "syncfs" | "fsync", files: number) => void;
  private pending: Waiter[] = [];
  private scheduled = false;
  private syncfsRunning = false;

  constructor(options: BatchedSyncOptions) {
    this.syncer = options.syncer;
    this.minFiles = Math.max(1, options.minFilesForSyncfs);
    this.defer = options.defer ?? ((fn) => setImmediate(fn));
    this.onBatch = options.onBatch ?? (() => undefined);
  }

  /** Resolves once every write to `target` made before the call is durable. */
  sync(target: SyncTarget): Promise<void> {
    if (this.syncer === undefined || target.dev !== this.syncer.dev) return target.fsync();
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ target, resolve, reject });
      if (!this.scheduled && !this.syncfsRunning) {
        this.scheduled = true;
        this.defer(() => {
          this.scheduled = false;
          this.dispatch();
        });
      }
    });
  }

  /** Starts the pending requests: one syncfs for a large enough batch, else an fsync per file. */
  private dispatch(): void {
    if (this.syncfsRunning || this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    const files = new Map<SyncTarget, Waiter[]>();
    for (const waiter of batch) {
      const waiters = files.get(waiter.target);
      if (waiters === undefined) files.set(waiter.target, [waiter]);
      else waiters.push(waiter);
    }
    if (files.size < this.minFiles) {
      this.onBatch("fsync", files.size);
      for (const [target, waiters] of files) {
        target.fsync().then(
          () => waiters.forEach((w) => w.resolve()),
          (error) => waiters.forEach((w) => w.reject(error)),
        );
      }
      return;
    }
    this.onBatch("syncfs", files.size);
    this.syncfsRunning = true;
    this.syncer!.syncAll().then(
      () => this.finishSyncfs(batch, undefined, true),
      (error) => this.finishSyncfs(batch, error, false),
    );
  }

  private finishSyncfs(batch: Waiter[], error: unknown, ok: boolean): void {
    this.syncfsRunning = false;
    for (const waiter of batch) ok ? waiter.resolve() : waiter.reject(error);
    // Whatever arrived while it ran has waited a whole syncfs already: start it now.
    this.dispatch();
  }
}
