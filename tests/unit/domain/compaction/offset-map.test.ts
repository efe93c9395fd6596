/** The cleaner's bounded key -> offset map (domain/compaction/offset-map.ts). */
import { describe, expect, test } from "bun:test";
import { OFFSET_MAP_BYTES_PER_SLOT, OffsetMap } from "../../../../src/domain/compaction/offset-map.ts";

const key = (i: number) => new TextEncoder().encode(`key-${i}`);

describe("OffsetMap", () => {
  test("later puts of a key win, unknown keys answer -1, and latestOffset follows the puts", () => {
    const map = new OffsetMap(1 << 20, 0.9);
    map.put(key(1), 3);
    map.put(key(2), 4);
    map.put(key(1), 9);
    expect(map.get(key(1))).toBe(9);
    expect(map.get(key(2))).toBe(4);
    expect(map.get(key(3))).toBe(-1);
    expect([map.size, map.latestOffset]).toEqual([2, 9]);
    map.updateLatestOffset(20);
    expect(map.latestOffset).toBe(20);
  });

  test("grows past its first table without losing entries, and clear forgets everything", () => {
    const map = new OffsetMap(64 << 20, 0.9);
    for (let i = 0; i < 50_000; i++) map.put(key(i), i * 2);
    for (let i = 0; i < 50_000; i += 997) expect(map.get(key(i))).toBe(i * 2);
    expect(map.size).toBe(50_000);
    map.clear();
    expect([map.size, map.latestOffset, map.get(key(5))]).toEqual([0, -1, -1]);
  });

  test("is full at the load factor of the slots its memory allows, and refuses a new key then", () => {
    const map = new OffsetMap(2048 * OFFSET_MAP_BYTES_PER_SLOT, 0.5);
    expect(map.capacity).toBe(1024);
    for (let i = 0; i < 1024; i++) map.put(key(i), i);
    expect(map.isFull).toBe(true);
    expect(map.memoryBytes).toBe(2048 * OFFSET_MAP_BYTES_PER_SLOT);
    // A key already present may still be updated.
    map.put(key(5), 5000);
    expect(map.get(key(5))).toBe(5000);
    expect(() => map.put(key(99_999), 1)).toThrow(RangeError);
  });
});
