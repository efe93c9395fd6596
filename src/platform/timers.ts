/**
 * Timers as a port, for code whose timing is under test: a test drives a manual twin
 * (tests/support/manual-timers.ts) together with its manual clock, so that a lease running out or a
 * keep-alive falling due is a step of the test, not a wait. main.ts and the real services use systemTimers.
 */
export interface Timers {
  /** Runs `task` once after `delayMs`; the returned function cancels it (harmless once it ran). */
  after(delayMs: number, task: () => void): () => void;
}

export const systemTimers: Timers = {
  after(delayMs, task) {
    const timer = setTimeout(task, Math.max(0, delayMs));
    return () => clearTimeout(timer);
  },
};
