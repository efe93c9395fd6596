/**
 * A clock that moves only when a test moves it, so time-dependent behaviour (expiry, timeouts,
 * createdMs) is deterministic and tests never sleep.
 */
import type { Clock } from "../../src/platform/clock.ts";

export class ManualClock implements Clock {
  private wallMs: number;
  private monoMs: number;

  /** Starts at a fixed, realistic wall time (2023-11-14) so timestamps look like real ones. */
  constructor(nowMs = 1_700_000_000_000, monotonicMs = 0) {
    this.wallMs = nowMs;
    this.monoMs = monotonicMs;
  }

  nowMs(): number {
    return this.wallMs;
  }

  monotonicMs(): number {
    return this.monoMs;
  }

  /** Sets the wall clock; it may go backwards, as a real wall clock can (NTP steps). */
  setNowMs(ms: number): void {
    this.wallMs = ms;
  }

  /** Sets the monotonic clock; refuses to go backwards, because no real monotonic clock does. */
  setMonotonicMs(ms: number): void {
    if (ms < this.monoMs) throw new RangeError(`monotonic clock cannot go back from ${this.monoMs} to ${ms}`);
    this.monoMs = ms;
  }

  /** Moves both clocks forward by `ms`. */
  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`cannot advance by a negative duration (${ms} ms)`);
    this.wallMs += ms;
    this.monoMs += ms;
  }
}
