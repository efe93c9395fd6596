import { describe, expect, test } from "bun:test";
import { OffsetIndex, TimeIndex } from "../../../../src/storage/log/indexes.ts";

describe("offset index", () => {
  test("floor finds the last entry at or below the target", () => {
    const index = new OffsetIndex(1);
    for (let i = 0; i < 100; i++) index.append(10 + i * 5, 1000 + i * 300);
    expect(index.floor(9)).toBe(-1);
    expect(index.floor(10)).toBe(0);
    expect(index.floor(14)).toBe(0);
    expect(index.floor(15)).toBe(1);
    expect(index.floor(1_000_000)).toBe(99);
    expect(index.positionAt(index.floor(262))).toBe(1000 + 50 * 300);
  });

  test("round-trips through its file bytes and refuses unsound files", () => {
    const index = new OffsetIndex();
    index.append(3, 100);
    index.append(9, 900);
    const bytes = index.encode();
    expect(bytes.length).toBe(16);
    const decoded = OffsetIndex.decode(bytes, 1000, 10);
    expect(decoded).toBeInstanceOf(OffsetIndex);
    expect((decoded as OffsetIndex).positionAt(1)).toBe(900);
    expect(OffsetIndex.decode(bytes.subarray(0, 12), 1000, 10)).toContain("multiple of 8");
    expect(OffsetIndex.decode(bytes, 900, 10)).toContain("position");
    expect(OffsetIndex.decode(bytes, 1000, 9)).toContain("relative offset");
    const swapped = new Uint8Array(16);
    swapped.set(bytes.subarray(8), 0);
    swapped.set(bytes.subarray(0, 8), 8);
    expect(typeof OffsetIndex.decode(swapped, 1000, 10)).toBe("string");
  });

  test("entries must increase", () => {
    const index = new OffsetIndex();
    index.append(3, 100);
    expect(() => index.append(3, 200)).toThrow(RangeError);
    expect(() => index.append(4, 100)).toThrow(RangeError);
  });
});

describe("time index", () => {
  test("keeps only increasing timestamps and finds the floor", () => {
    const index = new TimeIndex(1);
    index.maybeAppend(1_700_000_000_000, 0);
    index.maybeAppend(1_700_000_000_000, 5); // not above the last: ignored
    index.maybeAppend(1_700_000_000_500, 7);
    expect(index.entries).toBe(2);
    expect(index.floor(1_699_999_999_999)).toBe(-1);
    expect(index.floor(1_700_000_000_499)).toBe(0);
    expect(index.relOffsetAt(index.floor(1_800_000_000_000))).toBe(7);
    expect(index.lastTimestamp).toBe(1_700_000_000_500);
  });

  test("round-trips int64 timestamps and refuses unsound files", () => {
    const index = new TimeIndex();
    index.maybeAppend(1_700_000_000_000, 0);
    index.maybeAppend(8_000_000_000_000, 4);
    const decoded = TimeIndex.decode(index.encode(), 5) as TimeIndex;
    expect(decoded.timestampAt(1)).toBe(8_000_000_000_000);
    expect(decoded.relOffsetAt(1)).toBe(4);
    expect(TimeIndex.decode(index.encode(), 4)).toContain("relative offset");
    expect(TimeIndex.decode(new Uint8Array(13), 5)).toContain("multiple of 12");
  });
});
