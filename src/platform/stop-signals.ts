/**
 * SIGTERM and SIGINT over the whole life of `bunka serve`, start-up included: one signal always stops the
 * broker, a second one exits at once. The handlers are installed first thing, so that no moment of
 * start-up is left where a signal has the default action in one part and is ignored in another.
 *
 * Three phases:
 * - `starting`: nothing has been opened that a clean stop would close (recovery may be running). A
 *   signal exits at once with 0: everything the broker writes at start is crash-safe (tmp + fsync +
 *   rename, recovery), so stopping here is a crash that the next start recovers from, and waiting for a
 *   long recovery to finish first would make the signal look ignored.
 * - `opening`: the broker exists and the listeners are being bound. A signal is remembered (`requested`);
 *   the start-up checks it after each step and stops what it has opened.
 * - `serving`: a signal calls the shutdown given to `serve`.
 */
import type { Logger } from "./logger.ts";

export type StopSignal = "SIGTERM" | "SIGINT";

export interface StopSignalsOptions {
  log: Logger;
  /** Registers a handler (process.on). */
  on: (signal: StopSignal, handler: () => void) => void;
  exit: (code: number) => void;
}

export class StopSignals {
  private phase: "starting" | "opening" | "serving" = "starting";
  private stopping = false;
  private shutdown: ((why: Record<string, unknown>) => void) | undefined;
  /** The signal that arrived while opening, for the start-up to act on. */
  requested: StopSignal | undefined;

  constructor(private readonly opts: StopSignalsOptions) {}

  install(): void {
    for (const signal of ["SIGTERM", "SIGINT"] as const) this.opts.on(signal, () => this.onSignal(signal));
  }

  /** The broker exists: from now on a signal is remembered for the start-up to stop what it opened. */
  opening(): void {
    this.phase = "opening";
  }

  /**
   * Start-up is over: `shutdown` runs on the next signal, or now if one came while opening (the start-up
   * must then not go on).
   */
  serve(shutdown: (why: Record<string, unknown>) => void): void {
    this.phase = "serving";
    this.shutdown = shutdown;
    if (this.requested !== undefined) shutdown({ signal: this.requested });
  }

  /** A shutdown began for another reason (the broker id taken): a signal now is a second one. */
  markStopping(): void {
    this.stopping = true;
  }

  /** A signal came, or a shutdown began. */
  get isStopping(): boolean {
    return this.stopping;
  }

  private onSignal(signal: StopSignal): void {
    if (this.stopping) {
      this.opts.log.warn("second signal, exiting now", { signal });
      this.opts.exit(130);
      return;
    }
    this.stopping = true;
    switch (this.phase) {
      case "starting":
        this.opts.log.info("signal during start-up, exiting now; the next start recovers from where this one stopped", { signal });
        this.opts.exit(0);
        return;
      case "opening":
        this.opts.log.info("signal during start-up, stopping what has started", { signal });
        this.requested = signal;
        return;
      case "serving":
        this.shutdown?.({ signal });
    }
  }
}
