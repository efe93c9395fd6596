/**
 * The rules three small state files of `__cluster/` share (the ACLs, the SCRAM credentials, the dynamic
 * broker configs): one value in memory, every change made durable before it is served, changes and
 * re-reads one at a time in order, and a failed write poisoning the store.
 *
 * - `change` computes the next value from the current one, in turn with the other changes and re-reads,
 *   saves it (the store's `save`: tmp, fsync, rename, fsync dir) and only then serves it and tells the
 *   listeners. A next value the same as the current one saves nothing.
 * - A failed save poisons the store: memory may disagree with the disk, so every later change fails with a
 *   FatalError until a restart reloads the file.
 * - `refresh` reads the file again (another broker sharing the data directory changed it) and serves what
 *   it holds; a damaged file is the store's `load` error and the value held is kept.
 */
import { FatalError } from "../errors/errors.ts";

export interface SharedStateFileOptions<T> {
  /** What the store is, for the poisoned store's error ("the ACL store"). */
  what: string;
  /** Writes `next` durably. */
  save(next: T): Promise<void>;
  /** Reads the file again; `held` is what the store holds now (for a file that vanished). */
  load(held: T): Promise<T>;
  same(a: T, b: T): boolean;
}

export class SharedStateFile<T> {
  private current: T;
  private tail: Promise<unknown> = Promise.resolve();
  private poisoned: unknown = undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(
    initial: T,
    private readonly options: SharedStateFileOptions<T>,
  ) {
    this.current = initial;
  }

  /** The value served: the last one made durable here or read by `refresh`. */
  get value(): T {
    return this.current;
  }

  /** Makes `compute(current)` durable, then serves it and tells the listeners. */
  change(compute: (current: T) => T): Promise<void> {
    return this.inTurn(async () => {
      if (this.poisoned !== undefined) throw new FatalError(`${this.options.what} failed earlier; restart to recover`, { cause: this.poisoned });
      const next = compute(this.current);
      if (this.options.same(this.current, next)) return;
      try {
        await this.options.save(next);
      } catch (error) {
        this.poisoned = error;
        throw error;
      }
      this.current = next;
      for (const listener of [...this.listeners]) listener();
    });
  }

  /** Reads the file again, in turn with the changes. Resolves whether the value differs from what was held. */
  refresh(): Promise<boolean> {
    return this.inTurn(async () => {
      const loaded = await this.options.load(this.current);
      if (this.options.same(this.current, loaded)) return false;
      this.current = loaded;
      return true;
    });
  }

  /** Calls `listener` after each change this store makes is durable. Returns the function that stops it. */
  onChange(listener: () => void): () => void {
    this.listeners.push(listener);
    return () => {
      const at = this.listeners.indexOf(listener);
      if (at >= 0) this.listeners.splice(at, 1);
    };
  }

  private inTurn<R>(work: () => Promise<R>): Promise<R> {
    const run = this.tail.then(work);
    this.tail = run.catch(() => undefined);
    return run;
  }
}
