/**
 * The log cleaner's threads, as the broker's thread sees them (docs/architecture.md, "Compaction"): one
 * Bun Worker per log.cleaner.threads slot (cleaner-worker.ts), started at its first pass and terminated
 * at shutdown, each running one pass at a time through cleanLog.
 *
 * A pass is handed over with everything it needs that only the broker's thread knows (the range, the
 * producers, the aborted transactions, the segments and their sizes); the thread asks back for the two
 * things that change the broker's state, each done here exactly as an in-process pass does them: saving
 * the cleaner checkpoint, and swapping a group's cleaned segment in together with its aborted-transaction
 * index entries (CleanableLog.replaceSegments, synchronously in one turn, so no read sees one without
 * the other). The partition's exclusive lock is held here for the whole pass, as for an in-process one.
 *
 * Stopping (shutdown, the partition closing) sets the thread's stop flag in shared memory, which the pass
 * reads between batches: no message is needed, and a pass waiting on the I/O throttle wakes at once.
 *
 * Errors keep their class across the boundary (cleaner-thread-messages.ts): a CorruptStateError or a
 * FatalError raised in the thread is one here. When the thread itself dies (an uncaught error, a crash),
 * the pass fails with an error that says so, once any request of it being served here has finished (a
 * swap is never cut short), its leftover `.cleaned` files are removed, and the next pass starts a new
 * thread.
 */
import { join } from "node:path";
import type { Fs } from "../../platform/fs.ts";
import type { Logger } from "../../platform/logger.ts";
import { FatalError } from "../../errors/errors.ts";
import { SharedIoThrottle } from "./cleaner-io-throttle.ts";
import {
  deserializeError,
  serializeError,
  type FromThreadMessage,
  type PassMessage,
  type ReplaceSegmentsRequest,
  type ToThreadMessage,
} from "./cleaner-thread-messages.ts";
import { OffsetIndex, TimeIndex } from "./indexes.ts";
import type { CleanPassInput, CleanPassStats } from "./log-cleaner.ts";
import { CLEANED_SUFFIX } from "./segment-swap.ts";

/** What a pass run elsewhere needs from the partition: cleanLog's input but what the runner has itself. */
export type CleanPassRequest = Omit<CleanPassInput, "fs" | "map" | "throttle" | "shouldStop">;

/** Runs one pass somewhere else; `stop` aborted stops it between two batches. */
export type CleanPassRunner = (request: CleanPassRequest, stop: AbortSignal) => Promise<CleanPassStats>;

/** The offset map a thread's passes use: its bound and log.cleaner.io.buffer.load.factor. */
export interface OffsetMapBounds {
  memoryBytes: number;
  loadFactor: number;
}

/**
 * Where the thread's code is. From source it is the module beside this one. A compiled executable bundles
 * this module into its main one, and carries cleaner-worker.ts as an entry point of its own
 * (scripts/build.ts) at its path under src/, beside the executable's own name (Bun.main).
 */
function defaultWorkerUrl(): string {
  const fromSource = import.meta.url.endsWith("/cleaner-threads.ts");
  return fromSource ? new URL("./cleaner-worker.ts", import.meta.url).href : join(Bun.main, "..", "storage", "log", "cleaner-worker.ts");
}

export interface CleanerThreadPoolOptions {
  /** The broker's file system: leftover `.cleaned` files of a thread that died are removed through it. */
  fs: Fs;
  log: Logger;
  /** log.cleaner.io.max.bytes.per.second now (the settings change at runtime). */
  ioMaxBytesPerSecond: () => number;
  /** The thread's code (tests give another). */
  workerUrl?: string;
}

/** How often the I/O limit is read again while passes run on threads. */
const LIMIT_REFRESH_MS = 1000;

export class CleanerThreadPool {
  private readonly threads: CleanerThread[] = [];
  private readonly throttle = new SharedIoThrottle();
  private readonly workerUrl: string;
  private running = 0;
  private limitTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly options: CleanerThreadPoolOptions) {
    this.workerUrl = options.workerUrl ?? defaultWorkerUrl();
  }

  /** The runner of slot `index` (0 .. log.cleaner.threads - 1), whose passes use `map`. */
  runner(index: number, map: OffsetMapBounds): CleanPassRunner {
    return (request, stop) => this.run(index, map, request, stop);
  }

  /** Terminates the threads of slots at or past `count` (log.cleaner.threads went down); only idle ones. */
  retain(count: number): void {
    for (let i = count; i < this.threads.length; i++) this.threads[i]?.terminateIfIdle();
  }

  /** Threads started so far (each slot counts once, a replaced one again). */
  get threadsStarted(): number {
    return this.threads.reduce((n, t) => n + (t?.started ?? 0), 0);
  }

  /** Stops the passes still running (between two batches), waits for them, then terminates every thread. */
  async close(): Promise<void> {
    if (this.limitTimer !== undefined) clearInterval(this.limitTimer);
    this.limitTimer = undefined;
    await Promise.all(this.threads.map((t) => t?.terminate()));
  }

  /** For tests: terminates slot `index`'s thread as a crash would, mid-pass or not. */
  killThread(index: number): void {
    this.threads[index]?.kill();
  }

  private async run(index: number, map: OffsetMapBounds, request: CleanPassRequest, stop: AbortSignal): Promise<CleanPassStats> {
    this.threads[index] ??= new CleanerThread(this.workerUrl, this.throttle, this.options.fs, this.options.log, index);
    this.throttle.setLimit(this.options.ioMaxBytesPerSecond());
    if (this.running++ === 0) {
      this.limitTimer = setInterval(() => this.throttle.setLimit(this.options.ioMaxBytesPerSecond()), LIMIT_REFRESH_MS);
      this.limitTimer.unref?.();
    }
    try {
      return await this.threads[index]!.run(map, request, stop);
    } finally {
      if (--this.running === 0 && this.limitTimer !== undefined) {
        clearInterval(this.limitTimer);
        this.limitTimer = undefined;
      }
    }
  }
}

interface RunningPass {
  passId: number;
  request: CleanPassRequest;
  resolve: (stats: CleanPassStats) => void;
  reject: (error: unknown) => void;
  /** The request of the thread's being served here, if any: a dying thread's pass waits for it. */
  serving: Promise<void> | undefined;
  /** The error a request failed with here (a failed swap's FatalError): the pass fails with it, not a copy. */
  failure: unknown;
}

class CleanerThread {
  private worker: Worker | undefined;
  private readonly stopFlag = new Int32Array(new SharedArrayBuffer(4));
  private pass: RunningPass | undefined;
  /** Settles when the running pass has ended, whichever way. */
  private passEnded: Promise<void> = Promise.resolve();
  private nextPassId = 1;
  /** Workers started by this slot (a dead one is replaced at the next pass). */
  started = 0;
  /** How the previous worker died, until its replacement says so. */
  private death: string | undefined;

  constructor(
    private readonly workerUrl: string,
    private readonly throttle: SharedIoThrottle,
    private readonly fs: Fs,
    private readonly log: Logger,
    private readonly index: number,
  ) {}

  run(map: OffsetMapBounds, request: CleanPassRequest, stop: AbortSignal): Promise<CleanPassStats> {
    if (this.pass !== undefined) throw new FatalError(`log cleaner thread ${this.index} was given a pass while it runs one`);
    const worker = this.workerOrStart();
    const { log } = request;
    const message: PassMessage = {
      kind: "pass",
      passId: this.nextPassId++,
      dir: log.dir,
      segments: log.cleanableSegments(),
      sizeBytes: log.sizeBytes,
      cleanerCheckpoint: { ...log.cleanerCheckpoint },
      range: request.range,
      nowMs: request.nowMs,
      deleteRetentionMs: request.deleteRetentionMs,
      maxGroupBytes: request.maxGroupBytes,
      indexIntervalBytes: request.indexIntervalBytes,
      producers: [...request.producers],
      aborted: [...request.aborted],
      mapBytes: map.memoryBytes,
      loadFactor: map.loadFactor,
    };
    Atomics.store(this.stopFlag, 0, 0);
    const onStop = () => this.raiseStop();
    if (stop.aborted) onStop();
    else stop.addEventListener("abort", onStop, { once: true });
    // While a pass runs the thread keeps the process alive; idle, it does not.
    worker.ref();
    const done = new Promise<CleanPassStats>((resolve, reject) => {
      this.pass = { passId: message.passId, request, resolve, reject, serving: undefined, failure: undefined };
    });
    this.post(message);
    const ended = done.finally(() => {
      stop.removeEventListener("abort", onStop);
      this.pass = undefined;
      this.worker?.unref();
    });
    this.passEnded = ended.then(
      () => undefined,
      () => undefined,
    );
    return ended;
  }

  terminateIfIdle(): void {
    if (this.pass === undefined) void this.terminate();
  }

  /** Stops the running pass, if any, and waits for it to end (it ends between two batches); then ends the thread. */
  async terminate(): Promise<void> {
    if (this.worker === undefined) return;
    this.raiseStop();
    await this.passEnded;
    const worker = this.worker;
    this.worker = undefined;
    if (worker === undefined) return;
    const closed = new Promise<void>((resolve) => worker.addEventListener("close", () => resolve(), { once: true }));
    worker.terminate();
    await closed;
  }

  kill(): void {
    this.worker?.terminate();
  }

  private raiseStop(): void {
    Atomics.store(this.stopFlag, 0, 1);
    Atomics.notify(this.stopFlag, 0);
  }

  private workerOrStart(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(this.workerUrl);
    this.worker = worker;
    this.started++;
    worker.addEventListener("message", (event: MessageEvent<FromThreadMessage>) => this.onMessage(worker, event.data));
    worker.addEventListener("error", (event: ErrorEvent) => {
      // An uncaught error ends the thread (its close follows); its message is the useful part.
      this.died(worker, `an uncaught error: ${errorMessageOf(event)}`);
      worker.terminate();
    });
    worker.addEventListener("close", (event: Event) => {
      const code = (event as Event & { code?: number }).code;
      this.died(worker, `it exited${code === undefined ? "" : ` with code ${code}`}`);
    });
    worker.unref();
    const init: ToThreadMessage = { kind: "init", stop: this.stopFlag.buffer as SharedArrayBuffer, throttle: this.throttle.buffer };
    worker.postMessage(init);
    this.log.info("log cleaner thread started", { thread: this.index, ...(this.death === undefined ? {} : { replacing: `a thread that died (${this.death})` }) });
    this.death = undefined;
    return worker;
  }

  private post(message: ToThreadMessage): void {
    this.worker?.postMessage(message);
  }

  private onMessage(worker: Worker, message: FromThreadMessage): void {
    const pass = this.pass;
    if (worker !== this.worker || pass === undefined) return;
    switch (message.kind) {
      case "save-checkpoint":
        this.serve(pass, message.requestId, () => pass.request.log.saveCleanerCheckpoint(message.checkpoint));
        return;
      case "replace-segments":
        this.serve(pass, message.requestId, () => this.replaceSegments(pass, message));
        return;
      case "done":
        if (message.passId === pass.passId) pass.resolve(message.stats);
        return;
      case "failed":
        if (message.passId === pass.passId) pass.reject(pass.failure ?? deserializeError(message.error));
        return;
    }
  }

  /** Does what the thread asked and answers it; a failure goes back to the thread and is kept for the pass. */
  private serve(pass: RunningPass, requestId: number, work: () => Promise<void>): void {
    const serving = (async () => {
      try {
        await work();
        this.post({ kind: "reply", requestId, sizeBytes: pass.request.log.sizeBytes });
      } catch (error) {
        pass.failure ??= error;
        this.post({ kind: "reply", requestId, sizeBytes: pass.request.log.sizeBytes, error: serializeError(error) });
      }
    })();
    pass.serving = serving;
  }

  private async replaceSegments(pass: RunningPass, message: ReplaceSegmentsRequest): Promise<void> {
    const baseOffset = message.replaced[0]!;
    const span = message.endOffset - baseOffset;
    const offsetIndex = OffsetIndex.decode(message.offsetIndex, message.sizeBytes, span);
    const timeIndex = TimeIndex.decode(message.timeIndex, span);
    // The thread built these indexes itself: one that does not decode is a bug on one side or the other.
    if (typeof offsetIndex === "string") throw new FatalError(`the cleaned segment ${baseOffset} of ${pass.request.log.dir} came with an unsound offset index: ${offsetIndex}`);
    if (typeof timeIndex === "string") throw new FatalError(`the cleaned segment ${baseOffset} of ${pass.request.log.dir} came with an unsound time index: ${timeIndex}`);
    await pass.request.log.replaceSegments(
      {
        replaced: message.replaced,
        sizeBytes: message.sizeBytes,
        offsetIndex,
        timeIndex,
        maxTimestampMs: message.maxTimestampMs,
        offsetOfMaxTimestamp: message.offsetOfMaxTimestamp,
        txnIndexBytes: message.txnIndexBytes,
      },
      message.endOffset,
      message.keptAborted,
    );
  }

  /** The thread `worker` is gone: its pass (if any) fails once whatever it asked of this thread is done. */
  private died(worker: Worker, how: string): void {
    if (worker !== this.worker) return;
    this.worker = undefined;
    this.death = how;
    const pass = this.pass;
    if (pass === undefined) return;
    const dir = pass.request.log.dir;
    this.log.warn("log cleaner thread died during a pass", { thread: this.index, dir, reason: how });
    void (async () => {
      await pass.serving?.catch(() => undefined);
      await removeCleanedFiles(this.fs, dir).catch(() => undefined);
      pass.reject(pass.failure ?? new Error(`the log cleaner thread died during the pass over ${dir} (${how}); the partition is cleaned again next round`));
    })();
  }
}

/**
 * The `.cleaned` files a dead thread left: no swap of theirs is in progress (the swaps run here and have
 * finished), so they are the unfinished files of an uncommitted group, which recovery would remove too.
 */
async function removeCleanedFiles(fs: Fs, dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (name.endsWith(CLEANED_SUFFIX)) await fs.unlink(join(dir, name)).catch(() => undefined);
  }
}

/**
 * What an uncaught error in the thread said. Bun's ErrorEvent message is the error as printed (source
 * lines, then `error: <message>`, then the stack): the message line alone is what a log line needs.
 */
function errorMessageOf(event: ErrorEvent): string {
  if (event.error instanceof Error) return event.error.message;
  const text = String(event.message);
  const printed = /(?:^|\n)(?:[\w.]*error|Error): ([^\n]*)/i.exec(text);
  return printed?.[1] ?? text.split("\n")[0] ?? text;
}
