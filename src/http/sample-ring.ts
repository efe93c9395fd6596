/**
 * A fixed-capacity ring of the latest samples: pushing onto a full ring drops the oldest. The live
 * dashboard's history (live-samples.ts) is one, so its memory is bounded by its capacity whatever the
 * uptime.
 */
export class SampleRing<T> {
  private readonly slots: (T | undefined)[];
  /** Index the next push writes. */
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`a ring needs a capacity of at least 1, got ${capacity}`);
    this.slots = new Array<T | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  push(sample: T): void {
    this.slots[this.next] = sample;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count += 1;
  }

  /** The newest sample, undefined when empty. */
  latest(): T | undefined {
    return this.count === 0 ? undefined : this.slots[(this.next - 1 + this.capacity) % this.capacity];
  }

  /** Every sample held, oldest first (a copy). */
  toArray(): T[] {
    const out: T[] = [];
    const first = (this.next - this.count + this.capacity) % this.capacity;
    for (let i = 0; i < this.count; i++) out.push(this.slots[(first + i) % this.capacity] as T);
    return out;
  }
}
