/**
 * The offset map's key hash against MurmurHash3 x86_128's published behaviour: the values are those of
 * the reference implementation (as PyPI's mmh3 computes them, `mmh3.hash128(data, seed, x64arch=False)`
 * split into its four 32-bit words h1..h4), for every tail length class and more than one block.
 */
import { describe, expect, test } from "bun:test";
import { murmur3x86_128 } from "../../../../src/domain/compaction/key-hash.ts";

const text = (s: string): Uint8Array => new TextEncoder().encode(s);
const counting = (n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => i);

const VECTORS: [string, Uint8Array, number, number[]][] = [
  ["empty, seed 0", new Uint8Array(0), 0, [0, 0, 0, 0]],
  ["empty, seed 1", new Uint8Array(0), 1, [0x88c4adec, 0x54d201b9, 0x54d201b9, 0x54d201b9]],
  ["one byte", text("a"), 0, [0xa794933c, 0x5556b01b, 0x5556b01b, 0x5556b01b]],
  ["a 13-byte key", text("key-000000042"), 0, [0x3297c9aa, 0xccecaeaf, 0x0b3dfe44, 0x50b0c02b]],
  ["a 13-byte key, another seed", text("key-000000042"), 0x9747b28c, [0x8035cdc1, 0x288d9306, 0x2c7b3573, 0x2d62cd0c]],
  ["43 bytes", text("The quick brown fox jumps over the lazy dog"), 0, [0x2f1583c3, 0xecee2c67, 0x5d7bf66c, 0xe5e91d2c]],
  ["one block exactly", counting(16), 7, [0x52f05a95, 0x524f53e7, 0xa72c7f19, 0x0605924f]],
  ["31 bytes", counting(31), 123, [0x2b5ff035, 0xd3b4b778, 0x416c8b2c, 0x9b4be7d5]],
  ["200 bytes, a seed above 2^31", counting(200), 0xdeadbeef, [0x63034ff2, 0xd4061b7c, 0x516f8e06, 0x1c6c3666]],
];

describe("murmur3x86_128", () => {
  for (const [name, data, seed, expected] of VECTORS) {
    test(name, () => {
      const out = new Uint32Array(4);
      murmur3x86_128(data, 0, data.length, seed, out);
      expect([...out]).toEqual(expected);
    });
  }

  test("a range inside a larger array hashes as the range alone", () => {
    const key = text("key-000000042");
    const around = new Uint8Array(key.length + 10).fill(0xaa);
    around.set(key, 7);
    const alone = new Uint32Array(4);
    const inside = new Uint32Array(4);
    murmur3x86_128(key, 0, key.length, 5, alone);
    murmur3x86_128(around, 7, key.length, 5, inside);
    expect([...inside]).toEqual([...alone]);
  });
});
