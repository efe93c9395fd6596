/**
 * A bound on how many lines one kind of log event may write: at most `maxLines` per `intervalMs` (a fixed
 * window), the rest dropped and counted. The next line written after a drop carries the count, so an
 * operator learns how much was left out without the log growing with the flood (a client reconnecting in
 * a loop with malformed frames once wrote megabytes a second).
 */
export class LogRateLimit {
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private linesInWindow = 0;
  private droppedSinceLastLine = 0;

  constructor(
    private readonly maxLines: number,
    private readonly intervalMs: number,
    private readonly nowMs: () => number,
  ) {
    if (!(maxLines >= 1) || !(intervalMs > 0)) throw new RangeError("LogRateLimit needs maxLines >= 1 and intervalMs > 0");
  }

  /**
   * Whether a line may be written now: `undefined` when it is to be dropped, otherwise the number of
   * lines dropped since the last one written (0 most of the time).
   */
  admit(): number | undefined {
    const now = this.nowMs();
    if (now - this.windowStartMs >= this.intervalMs) {
      this.windowStartMs = now;
      this.linesInWindow = 0;
    }
    if (this.linesInWindow >= this.maxLines) {
      this.droppedSinceLastLine++;
      return undefined;
    }
    this.linesInWindow++;
    const dropped = this.droppedSinceLastLine;
    this.droppedSinceLastLine = 0;
    return dropped;
  }

  /** Lines dropped since the last one written. */
  get dropped(): number {
    return this.droppedSinceLastLine;
  }
}
