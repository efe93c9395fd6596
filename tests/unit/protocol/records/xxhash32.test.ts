import { describe, expect, test } from "bun:test";
import { xxhash32 } from "../../../../src/protocol/records/xxhash32.ts";

/** data[i] = (i * 151 + 7) & 0xff; the expected values are lz4-java's XXHash32 (the JNI-free instance). */
const DATA = Uint8Array.from({ length: 100 }, (_, i) => (i * 151 + 7) & 0xff);
const REFERENCE: [length: number, seed0: number, seed12345678: number][] = [
  [0, 46947589, 3173027952],
  [1, 3018034, 3304798973],
  [3, 2975733797, 3930586508],
  [4, 3993822752, 2041179069],
  [15, 2514114080, 3623894577],
  [16, 2738196976, 1494310564],
  [17, 2113938871, 1684996067],
  [31, 2748390315, 3728038783],
  [32, 1366576224, 3718631994],
  [33, 1116242620, 4120188981],
  [100, 918131365, 1879452976],
];

describe("xxhash32", () => {
  test("matches lz4-java on every tail shape (no stripe, stripes, 4-byte and 1-byte tails), with and without a seed", () => {
    for (const [length, seed0, seeded] of REFERENCE) {
      expect([length, xxhash32(DATA, 0, length)]).toEqual([length, seed0]);
      expect([length, xxhash32(DATA, 0, length, 0x12345678)]).toEqual([length, seeded]);
    }
  });

  test("a range hashes like the subarray it names, at any alignment", () => {
    for (let start = 0; start < 8; start++) {
      expect(xxhash32(DATA, start, start + 40)).toBe(xxhash32(DATA.slice(start, start + 40)));
    }
  });

  test("a range outside the data is refused", () => {
    expect(() => xxhash32(DATA, 0, 101)).toThrow(RangeError);
    expect(() => xxhash32(DATA, 5, 4)).toThrow(RangeError);
  });
});
