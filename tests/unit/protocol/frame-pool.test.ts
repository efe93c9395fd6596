/** protocol/frame-pool.ts and the pooled frames of encodeResponseFrame. */
import { describe, expect, test } from "bun:test";
import { FrameBufferPool, POOLED_FRAME_BYTES_MAX, POOLED_FRAME_BYTES_MIN, releaseFrameAfterWrite, type ReleasableFrame } from "../../../src/protocol/frame-pool.ts";
import { encodeResponseFrame } from "../../../src/protocol/header.ts";

describe("FrameBufferPool", () => {
  test("hands out powers of two from the minimum, and the same memory again once it is back", () => {
    const pool = new FrameBufferPool();
    const a = pool.acquire(300 * 1024);
    expect(a.length).toBe(512 * 1024);
    expect(pool.acquire(10).length).toBe(POOLED_FRAME_BYTES_MIN);
    pool.release(a);
    expect(pool.acquire(400 * 1024)).toBe(a);
    // Taken again: not handed out twice.
    expect(pool.acquire(400 * 1024)).not.toBe(a);
    // Above 1 MiB, whole MiB; above the maximum, no pooled buffer at all.
    expect(pool.acquire(3.5 * 1024 * 1024).length).toBe(4 * 1024 * 1024);
    expect(pool.acquire(POOLED_FRAME_BYTES_MAX).length).toBe(POOLED_FRAME_BYTES_MAX);
    expect(() => pool.acquire(POOLED_FRAME_BYTES_MAX + 1)).toThrow(RangeError);
  });

  test("keeps at most two idle buffers, the largest ones", () => {
    const pool = new FrameBufferPool();
    const buffers = [1, 2, 4].map((mib) => pool.acquire(mib * 1024 * 1024));
    for (const buffer of buffers) pool.release(buffer);
    expect(pool.idleCount).toBe(2);
    expect(pool.acquire(900 * 1024)).toBe(buffers[1]!);
  });
});

describe("encodeResponseFrame with a pool", () => {
  const encode = (pool: FrameBufferPool, bodyBytes: number, sizeHint: number) =>
    encodeResponseFrame(1, 12, 7, (w) => w.raw(new Uint8Array(bodyBytes).fill(5)), sizeHint, pool) as ReleasableFrame;

  test("a large answer goes into pooled memory and says how to give it back", () => {
    const pool = new FrameBufferPool();
    const frame = encode(pool, 1000, POOLED_FRAME_BYTES_MIN);
    const release = frame[releaseFrameAfterWrite];
    expect(release).toBeFunction();
    expect(pool.idleCount).toBe(0);
    release!();
    expect(pool.idleCount).toBe(1);
    // The next one is encoded into the same memory.
    const next = encode(pool, 1000, POOLED_FRAME_BYTES_MIN);
    expect(next.buffer).toBe(frame.buffer);
  });

  test("a small hint and one above the maximum use fresh memory, and a hint too short gives the pooled buffer back at once", () => {
    const pool = new FrameBufferPool();
    expect(encode(pool, 10, 1000)[releaseFrameAfterWrite]).toBeUndefined();
    expect(encode(pool, 10, POOLED_FRAME_BYTES_MAX + 1)[releaseFrameAfterWrite]).toBeUndefined();
    expect(pool.idleCount).toBe(0);
    const grown = encode(pool, POOLED_FRAME_BYTES_MIN * 2, POOLED_FRAME_BYTES_MIN);
    expect(grown[releaseFrameAfterWrite]).toBeUndefined();
    expect(grown.length).toBeGreaterThan(POOLED_FRAME_BYTES_MIN * 2);
    expect(pool.idleCount).toBe(1);
  });

  test("an encoder that throws gives the pooled buffer back", () => {
    const pool = new FrameBufferPool();
    expect(() =>
      encodeResponseFrame(1, 12, 7, () => {
        throw new Error("cannot encode");
      }, POOLED_FRAME_BYTES_MIN, pool),
    ).toThrow("cannot encode");
    expect(pool.idleCount).toBe(1);
  });
});
