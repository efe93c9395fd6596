/**
 * Warm memory for large response frames (Fetch answers), reused from one answer to the next.
 *
 * Why: a Fetch answer of a megabyte or more was encoded into fresh memory, and copying the records into it
 * took most of the broker's CPU while a consumer read (docs/architecture.md, "The Fetch read path"): a
 * fresh buffer's every page is faulted in and zeroed on its first write. A pooled buffer's pages stay
 * mapped once touched. The listener hands a frame's buffer back (`releaseFrameAfterWrite`) once the
 * kernel has taken every byte of it; a frame whose connection closes first is simply left to the garbage
 * collector, so a buffer is never reused while any of it may still be sent.
 */

/** Frames smaller than this are not worth a pooled buffer. */
export const POOLED_FRAME_BYTES_MIN = 256 * 1024;
/**
 * Frames larger than this get fresh memory, as every frame did before: a pooled buffer is rounded up and
 * kept while idle, which the response-bytes bounds (net/kafka-listener.ts) do not count, so the pool is
 * kept to what a consumer's ordinary Fetch answers need (16 partitions of 1 MiB each, the Java defaults,
 * come to a little over 16 MiB; a 50 MiB answer would have kept 64 MiB).
 */
export const POOLED_FRAME_BYTES_MAX = 32 * 1024 * 1024;
/** Idle buffers kept (at most 64 MiB); more answers in flight at once than this allocate and drop theirs. */
const IDLE_FRAMES_MAX = 2;
const MiB = 1024 * 1024;

/**
 * A registered symbol, so that the listener (net/, which must not import protocol's pool) finds the
 * release function on the frame it writes: `Symbol.for("bunka.releaseFrameAfterWrite")`.
 */
export const releaseFrameAfterWrite = Symbol.for("bunka.releaseFrameAfterWrite");
export type ReleasableFrame = Uint8Array & { [releaseFrameAfterWrite]?: () => void };

export class FrameBufferPool {
  private readonly idle: Uint8Array[] = [];

  /**
   * A buffer of at least `bytes` (at most POOLED_FRAME_BYTES_MAX), warm when one is idle: up to 1 MiB a
   * power of two from POOLED_FRAME_BYTES_MIN, above it whole MiB, so that rounding wastes at most 1 MiB.
   */
  acquire(bytes: number): Uint8Array {
    if (bytes > POOLED_FRAME_BYTES_MAX) throw new RangeError(`a pooled frame holds at most ${POOLED_FRAME_BYTES_MAX} bytes, not ${bytes}`);
    let best = -1;
    for (let i = 0; i < this.idle.length; i++) {
      const length = this.idle[i]!.length;
      if (length >= bytes && (best < 0 || length < this.idle[best]!.length)) best = i;
    }
    if (best >= 0) return this.idle.splice(best, 1)[0]!;
    let size = POOLED_FRAME_BYTES_MIN;
    while (size < bytes && size < MiB) size *= 2;
    if (size < bytes) size = Math.ceil(bytes / MiB) * MiB;
    return new Uint8Array(size);
  }

  /** Takes `buffer` back; nothing may read or write it afterwards. */
  release(buffer: Uint8Array): void {
    if (buffer.length > POOLED_FRAME_BYTES_MAX) return;
    if (this.idle.length >= IDLE_FRAMES_MAX) {
      // Keep the largest ones: the next large answer then finds a warm buffer.
      let smallest = 0;
      for (let i = 1; i < this.idle.length; i++) if (this.idle[i]!.length < this.idle[smallest]!.length) smallest = i;
      if (this.idle[smallest]!.length >= buffer.length) return;
      this.idle.splice(smallest, 1);
    }
    this.idle.push(buffer);
  }

  get idleCount(): number {
    return this.idle.length;
  }
}
