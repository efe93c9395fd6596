/**
 * Time as a port. Domain code never reads the clock: it is handed `nowMs`. Only main.ts constructs
 * the real clock; tests use a manual one (tests/support/manual-clock.ts).
 */
export interface Clock {
  /** Wall-clock milliseconds since the epoch (record timestamps, expiry). */
  nowMs(): number;
  /** Monotonic milliseconds for measuring durations; never goes backwards. */
  monotonicMs(): number;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
};
