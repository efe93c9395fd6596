/**
 * Keyed one-shot timers on an injected monotonic clock, for the group coordinator's session, join and
 * sync timeouts: scheduling a key again replaces its timer, cancelling removes it. One real setTimeout is
 * armed for the earliest deadline; when it fires, every timer whose deadline the clock has reached runs, in
 * deadline order. With a manual clock in tests nothing fires on its own schedule: the test moves the clock
 * and calls `runDue()`.
 *
 * Deadlines live in a binary heap with lazy deletion (a replaced or cancelled timer stays in the heap until
 * it surfaces, and is skipped), so a heartbeat, which reschedules its member's timer, costs O(log n).
 * Stale heap entries are bounded: the heap is rebuilt when it holds more than twice the live timers.
 */
interface Entry {
  key: string;
  deadlineMs: number;
  seq: number;
  fire: () => void;
}

const TIMEOUT_MS_MAX = 2_147_483_647;

export class KeyedTimers {
  private readonly live = new Map<string, Entry>();
  private heap: Entry[] = [];
  private nextSeq = 0;
  private handle: ReturnType<typeof setTimeout> | undefined;
  private armedForMs = Infinity;
  private closed = false;

  /** `nowMs` is a monotonic clock; `onError` hears about a timer callback that threw. */
  constructor(
    private readonly nowMs: () => number,
    private readonly onError: (key: string, error: unknown) => void = () => undefined,
  ) {}

  get size(): number {
    return this.live.size;
  }

  has(key: string): boolean {
    return this.live.has(key);
  }

  schedule(key: string, delayMs: number, fire: () => void): void {
    if (this.closed) return;
    const entry: Entry = { key, deadlineMs: this.nowMs() + Math.max(0, delayMs), seq: this.nextSeq++, fire };
    this.live.set(key, entry);
    this.push(entry);
    if (this.heap.length > 64 && this.heap.length > 2 * this.live.size) this.rebuild();
    this.arm();
  }

  cancel(key: string): void {
    this.live.delete(key);
  }

  /**
   * Runs every timer that is due now; returns how many ran. Timers scheduled by the callbacks run at the
   * next turn at the earliest, so a timer that keeps rescheduling itself with no delay cannot spin here.
   */
  runDue(): number {
    let ran = 0;
    const now = this.nowMs();
    const seqLimit = this.nextSeq;
    for (;;) {
      const top = this.peekLive();
      if (top === undefined || top.deadlineMs > now || top.seq >= seqLimit) break;
      this.pop();
      this.live.delete(top.key);
      ran++;
      try {
        top.fire();
      } catch (error) {
        this.onError(top.key, error);
      }
    }
    this.arm();
    return ran;
  }

  /** Drops every timer; nothing fires afterwards. */
  close(): void {
    this.closed = true;
    this.live.clear();
    this.heap = [];
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = undefined;
  }

  private arm(): void {
    if (this.closed) return;
    const top = this.peekLive();
    if (top === undefined) {
      if (this.handle !== undefined) clearTimeout(this.handle);
      this.handle = undefined;
      this.armedForMs = Infinity;
      return;
    }
    if (this.handle !== undefined && this.armedForMs <= top.deadlineMs) return;
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.armedForMs = top.deadlineMs;
    const delay = Math.min(TIMEOUT_MS_MAX, Math.max(0, top.deadlineMs - this.nowMs()));
    this.handle = setTimeout(() => {
      this.handle = undefined;
      this.armedForMs = Infinity;
      this.runDue();
    }, delay);
    // Timers never keep the process alive on their own: the listener does that.
    (this.handle as { unref?: () => void }).unref?.();
  }

  /** The earliest live entry, discarding stale ones on the way. */
  private peekLive(): Entry | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      if (this.live.get(top.key) === top) return top;
      this.pop();
    }
    return undefined;
  }

  private rebuild(): void {
    this.heap = [];
    for (const entry of this.live.values()) this.push(entry);
  }

  private less(a: Entry, b: Entry): boolean {
    return a.deadlineMs < b.deadlineMs || (a.deadlineMs === b.deadlineMs && a.seq < b.seq);
  }

  private push(entry: Entry): void {
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < h.length && this.less(h[l]!, h[smallest]!)) smallest = l;
      if (r < h.length && this.less(h[r]!, h[smallest]!)) smallest = r;
      if (smallest === i) break;
      [h[i], h[smallest]] = [h[smallest]!, h[i]!];
      i = smallest;
    }
  }
}
