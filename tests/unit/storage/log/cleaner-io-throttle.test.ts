/**
 * The I/O budget cleaner threads share (storage/log/cleaner-io-throttle.ts): a reader ahead of the rate
 * waits until it no longer is, the bound holds for all readers together, a window restarts after 5 s (or
 * when the clock goes back), and no limit means no wait.
 */
import { describe, expect, test } from "bun:test";
import { SharedIoThrottle } from "../../../../src/storage/log/cleaner-io-throttle.ts";

const S = 1_000_000n;

describe("SharedIoThrottle", () => {
  test("no limit (Apache's default 1.8e308, 0, NaN) never holds a reader back", () => {
    const throttle = new SharedIoThrottle();
    for (const limit of [Number.MAX_VALUE, 0, Number.NaN, Infinity]) {
      throttle.setLimit(limit);
      expect(throttle.limitBytesPerSecond).toBe(0);
      expect(throttle.delayAfter(1e9, 10n * S)).toBe(0);
    }
  });

  test("a reader ahead of the rate waits for the time its bytes should have taken", () => {
    const throttle = new SharedIoThrottle();
    throttle.setLimit(1000);
    // The first read opens the window at 100 s: 500 bytes at 1000 B/s are due 500 ms later.
    expect(throttle.delayAfter(500, 100n * S)).toBeCloseTo(500, 6);
    // 200 ms on, 1000 bytes in all are due at 1 s: 800 ms to wait.
    expect(throttle.delayAfter(500, 100n * S + 200_000n)).toBeCloseTo(800, 6);
    // 2 s on, 1500 bytes were due at 1.5 s: behind the rate, no wait.
    expect(throttle.delayAfter(500, 102n * S)).toBe(0);
    // Less than a millisecond ahead is not worth a wait.
    expect(throttle.delayAfter(500, 102n * S)).toBeCloseTo(0, 6);
  });

  test("the bound holds for every reader together: two threads' views of one budget", () => {
    const one = new SharedIoThrottle();
    const other = new SharedIoThrottle(one.buffer);
    one.setLimit(1_000_000);
    expect(other.limitBytesPerSecond).toBe(1_000_000);
    expect(one.delayAfter(250_000, 10n * S)).toBeCloseTo(250, 6);
    // The other reader's bytes add to the same window: together 500 KB, due at 500 ms.
    expect(other.delayAfter(250_000, 10n * S)).toBeCloseTo(500, 6);
  });

  test("the window restarts after 5 s, so an idle spell banks no burst, and when the clock goes back", () => {
    const throttle = new SharedIoThrottle();
    throttle.setLimit(1000);
    expect(throttle.delayAfter(1000, 100n * S)).toBeCloseTo(1000, 6);
    // 60 s idle: a new window from now, the old bytes forgotten; and no credit for the idle time.
    expect(throttle.delayAfter(3000, 160n * S)).toBeCloseTo(3000, 6);
    // The clock stepped back: a new window again.
    expect(throttle.delayAfter(1000, 50n * S)).toBeCloseTo(1000, 6);
  });
});
