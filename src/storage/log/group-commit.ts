/**
 * Group commit: runs an expensive operation (an fsync, a checkpoint write) on behalf of many callers.
 * A caller is answered by the first run that *starts* after its request, so the run covers everything
 * the caller did before asking. Callers arriving while a run is in flight share the next run: however
 * many ask, at most one run is in flight and one is pending.
 */
export class GroupCommit {
  private running: Promise<void> | undefined;
  private pending: { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } | undefined;

  constructor(private readonly run: () => Promise<void>) {}

  request(): Promise<void> {
    if (this.running === undefined) return this.start();
    if (this.pending === undefined) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.pending = { promise, resolve, reject };
    }
    return this.pending.promise;
  }

  /** Resolves when no run is in flight or pending (failures are the requesters' to see). */
  async idle(): Promise<void> {
    while (this.running !== undefined) await this.running.catch(() => undefined);
  }

  private start(): Promise<void> {
    const run = (async () => this.run())();
    const tracked = run.finally(() => {
      this.running = undefined;
      const next = this.pending;
      if (next !== undefined) {
        this.pending = undefined;
        this.start().then(next.resolve, next.reject);
      }
    });
    // `tracked` carries the same outcome as `run`; only the callers' promise reports failures.
    tracked.catch(() => undefined);
    this.running = tracked;
    return run;
  }
}
