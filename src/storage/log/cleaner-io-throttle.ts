/**
 * log.cleaner.io.max.bytes.per.second for passes on cleaner threads (docs/architecture.md, "Compaction"):
 * one budget in shared memory that every thread's pass draws from, as Apache's cleaner threads share one
 * Throttler, so that the bound holds for the bytes all threads read together whatever number of them is
 * cleaning, with no message per batch. The broker's thread sets the limit; the threads only add bytes.
 *
 * The budget is a window: bytes read since its start, against the time since its start. A thread that is
 * ahead of the rate waits until it no longer is. The window restarts after WINDOW_US so that an idle spell
 * does not bank a burst (the same rule as the in-process throttle of broker/log-cleaner-service.ts).
 * Two threads that find the window expired at once may both count from slightly different starts, a
 * difference of microseconds against a window of seconds.
 */

/** How long a window lasts before it restarts. */
const WINDOW_US = 5_000_000n;
/** The wait below which a thread goes on at once (the in-process throttle's rule). */
const MIN_WAIT_MS = 1;

const START_US = 0;
const BYTES = 1;
const LIMIT = 2;
const SLOTS = 3;

/** Microseconds on a clock every thread of the process reads alike (performance.now() starts per thread). */
export function sharedClockUs(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000));
}

export class SharedIoThrottle {
  private readonly slots: BigInt64Array;

  /** A new budget, or (in a cleaner thread) the one whose memory the broker's thread handed over. */
  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(SLOTS * 8)) {
    this.slots = new BigInt64Array(buffer);
  }

  /**
   * The bound in bytes per second. Below 1, not a number, or past 2^53 (Apache's default is 1.8e308, which
   * would not even fit the slot) is none.
   */
  setLimit(bytesPerSecond: number): void {
    const limit = bytesPerSecond >= 1 && bytesPerSecond <= Number.MAX_SAFE_INTEGER ? BigInt(Math.floor(bytesPerSecond)) : 0n;
    Atomics.store(this.slots, LIMIT, limit);
  }

  get limitBytesPerSecond(): number {
    return Number(Atomics.load(this.slots, LIMIT));
  }

  /** Counts `bytes` read at `nowUs`; returns how long the reader should wait (ms, 0 for not at all). */
  delayAfter(bytes: number, nowUs: bigint = sharedClockUs()): number {
    const limit = Atomics.load(this.slots, LIMIT);
    if (limit <= 0n) return 0;
    let startUs = Atomics.load(this.slots, START_US);
    // A clock that went back (a wall-clock step) restarts the window too.
    if (nowUs - startUs > WINDOW_US || nowUs < startUs) {
      if (Atomics.compareExchange(this.slots, START_US, startUs, nowUs) === startUs) Atomics.store(this.slots, BYTES, 0n);
      startUs = Atomics.load(this.slots, START_US);
    }
    const total = Atomics.add(this.slots, BYTES, BigInt(bytes)) + BigInt(bytes);
    const dueMs = (Number(total) / Number(limit)) * 1000;
    const aheadMs = dueMs - Number(nowUs - startUs) / 1000;
    return aheadMs > MIN_WAIT_MS ? aheadMs : 0;
  }
}
