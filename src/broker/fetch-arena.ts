/**
 * Memory that Fetch reads stored batches into, reused from one answer to the next.
 *
 * Why: reading an answer's megabytes into fresh memory costs a page fault and a zero-filled page per
 * 4 KiB before the copy out of the page cache even starts, and the profile of a 16-partition consumer
 * showed that fault-driven copying above everything else. An arena's pages stay mapped once touched, so
 * the next answer reads into warm memory. The encoded answer itself still gets memory of its own (the
 * listener owns it until the socket took it).
 *
 * An arena hands out consecutive pieces (`take`); the last piece may be shortened (`giveBack`) when the
 * read needed less. What does not fit gets fresh memory, so an arena never limits what a read returns.
 * The views handed out stay valid until `reset`: the handler resets an arena only when it reads an
 * answer again, and gives it back to the pool once the answer is encoded (Handler.responseEncoded).
 */
import type { ReadBuffers } from "../storage/log/partition-log.ts";

/** The largest arena kept; a larger answer reads what does not fit into fresh memory. */
export const FETCH_ARENA_BYTES_MAX = 32 * 1024 * 1024;
/** The smallest arena made: small answers share one. */
const FETCH_ARENA_BYTES_MIN = 1024 * 1024;
/** Idle arenas kept for the next answers; more fetches at once than this allocate and drop theirs. */
const IDLE_ARENAS_MAX = 2;

export class FetchArena implements ReadBuffers {
  private readonly memory: Uint8Array;
  private used = 0;
  /** Where the last piece handed out starts, -1 when it was fresh memory (or already shortened). */
  private lastTakeAt = -1;

  constructor(readonly capacityBytes: number) {
    this.memory = new Uint8Array(capacityBytes);
  }

  take(length: number): Uint8Array {
    if (this.used + length > this.memory.length) {
      this.lastTakeAt = -1;
      return new Uint8Array(length);
    }
    const at = this.used;
    this.lastTakeAt = at;
    this.used += length;
    return this.memory.subarray(at, at + length);
  }

  giveBack(used: number): void {
    if (this.lastTakeAt < 0) return;
    this.used = Math.min(this.used, this.lastTakeAt + Math.max(0, used));
    this.lastTakeAt = -1;
  }

  /** Everything handed out before is free again: views of it must not be used any more. */
  reset(): void {
    this.used = 0;
    this.lastTakeAt = -1;
  }

  /** Bytes handed out and kept since the last reset. */
  get usedBytes(): number {
    return this.used;
  }
}

/** A few idle arenas, so that consecutive answers read into the same memory. */
export class FetchArenaPool {
  private readonly idle: FetchArena[] = [];

  /** An arena for an answer of up to `wantedBytes` (rounded into FETCH_ARENA_BYTES_MIN..MAX). */
  acquire(wantedBytes: number): FetchArena {
    const want = Math.min(FETCH_ARENA_BYTES_MAX, Math.max(FETCH_ARENA_BYTES_MIN, Math.ceil(wantedBytes)));
    let best = -1;
    for (let i = 0; i < this.idle.length; i++) {
      const capacity = this.idle[i]!.capacityBytes;
      if (capacity >= want && (best < 0 || capacity < this.idle[best]!.capacityBytes)) best = i;
    }
    if (best >= 0) {
      const [arena] = this.idle.splice(best, 1);
      arena!.reset();
      return arena!;
    }
    // None is large enough: a new one replaces the smallest idle one, so what is kept grows with the load.
    if (this.idle.length >= IDLE_ARENAS_MAX) {
      let smallest = 0;
      for (let i = 1; i < this.idle.length; i++) if (this.idle[i]!.capacityBytes < this.idle[smallest]!.capacityBytes) smallest = i;
      this.idle.splice(smallest, 1);
    }
    return new FetchArena(want);
  }

  release(arena: FetchArena): void {
    arena.reset();
    if (this.idle.includes(arena)) return;
    if (this.idle.length < IDLE_ARENAS_MAX) this.idle.push(arena);
  }

  get idleCount(): number {
    return this.idle.length;
  }
}
