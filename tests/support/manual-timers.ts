/**
 * Timers that fire only when a test moves its manual clock (src/platform/timers.ts): `advance` runs every
 * task that falls due, in time order, with the clock set to each task's time, and lets the promises they
 * started settle before the next one.
 */
import type { Timers } from "../../src/platform/timers.ts";
import type { ManualClock } from "./manual-clock.ts";

interface Task {
  atMs: number;
  order: number;
  run: () => void;
}

/** Lets every promise chain that can progress without I/O progress. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

export class ManualTimers implements Timers {
  private tasks: Task[] = [];
  private sequence = 0;

  constructor(private readonly clock: ManualClock) {}

  after(delayMs: number, task: () => void): () => void {
    const entry: Task = { atMs: this.clock.monotonicMs() + Math.max(0, delayMs), order: this.sequence++, run: task };
    this.tasks.push(entry);
    return () => {
      this.tasks = this.tasks.filter((t) => t !== entry);
    };
  }

  /** Tasks waiting to run. */
  get pending(): number {
    return this.tasks.length;
  }

  /** Moves the clock forward by `ms`, running what falls due on the way. */
  async advance(ms: number): Promise<void> {
    const endMs = this.clock.monotonicMs() + ms;
    await settle();
    for (;;) {
      this.tasks.sort((a, b) => a.atMs - b.atMs || a.order - b.order);
      const next = this.tasks[0];
      if (next === undefined || next.atMs > endMs) break;
      this.tasks.shift();
      if (next.atMs > this.clock.monotonicMs()) this.clock.advance(next.atMs - this.clock.monotonicMs());
      next.run();
      await settle();
    }
    if (endMs > this.clock.monotonicMs()) this.clock.advance(endMs - this.clock.monotonicMs());
    await settle();
  }
}
