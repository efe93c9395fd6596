/**
 * The offset map's 128-bit key hash: MurmurHash3's x86_128 variant (Austin Appleby's public-domain
 * design), written for 32-bit integer arithmetic, on a range of a byte array so that the cleaner hashes
 * keys where they lie without making a view of each.
 *
 * Why not MD5, as Apache Kafka's cleaner: the map hashes every key twice per pass, and a call into
 * Bun's native MD5 per key cost about a fifth of an uncompressed pass (docs/benchmarks.md, "Where bunka's
 * cleaner spends its time"); this runs inline. What the choice changes: two different keys whose 128-bit
 * hashes agree would let the older one's latest record go, which for keys that are not made to collide is
 * as unlikely as with MD5 (about n^2 / 2^129 for n keys). Keys made to collide are possible with either
 * (MD5's collisions are cheap to make too), and buy a producer nothing it could not do with a tombstone:
 * any producer allowed to write a topic may delete any key of it. The seed is drawn per map, so that
 * collisions are not the same from one broker to the next.
 */

const C1 = 0x239b961b;
const C2 = 0xab0e9789;
const C3 = 0x38b34ae5;
const C4 = 0xa1e38b93;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

function word(bytes: Uint8Array, at: number): number {
  return bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24);
}

/** Writes the hash of bytes[start, start + length) into out[0..3] (h1..h4, each an unsigned 32-bit value). */
export function murmur3x86_128(bytes: Uint8Array, start: number, length: number, seed: number, out: Uint32Array): void {
  let h1 = seed | 0;
  let h2 = h1;
  let h3 = h1;
  let h4 = h1;
  const blocksEnd = start + (length & ~15);
  let at = start;
  for (; at < blocksEnd; at += 16) {
    let k1 = word(bytes, at);
    let k2 = word(bytes, at + 4);
    let k3 = word(bytes, at + 8);
    let k4 = word(bytes, at + 12);
    k1 = Math.imul(rotl(Math.imul(k1, C1), 15), C2);
    h1 ^= k1;
    h1 = (Math.imul(rotl(h1, 19) + h2, 5) + 0x561ccd1b) | 0;
    k2 = Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h2 ^= k2;
    h2 = (Math.imul(rotl(h2, 17) + h3, 5) + 0x0bcaa747) | 0;
    k3 = Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    h3 ^= k3;
    h3 = (Math.imul(rotl(h3, 15) + h4, 5) + 0x96cd1c35) | 0;
    k4 = Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    h4 ^= k4;
    h4 = (Math.imul(rotl(h4, 13) + h1, 5) + 0x32ac3b17) | 0;
  }
  const tail = length & 15;
  if (tail > 0) {
    let k1 = 0;
    let k2 = 0;
    let k3 = 0;
    let k4 = 0;
    // The tail's bytes, little-endian into k1..k4 (the reference's fall-through switch).
    for (let i = tail - 1; i >= 0; i--) {
      const b = bytes[at + i]!;
      const shift = (i & 3) * 8;
      if (i >= 12) k4 ^= b << shift;
      else if (i >= 8) k3 ^= b << shift;
      else if (i >= 4) k2 ^= b << shift;
      else k1 ^= b << shift;
    }
    if (tail > 12) h4 ^= Math.imul(rotl(Math.imul(k4, C4), 18), C1);
    if (tail > 8) h3 ^= Math.imul(rotl(Math.imul(k3, C3), 17), C4);
    if (tail > 4) h2 ^= Math.imul(rotl(Math.imul(k2, C2), 16), C3);
    h1 ^= Math.imul(rotl(Math.imul(k1, C1), 15), C2);
  }
  h1 ^= length;
  h2 ^= length;
  h3 ^= length;
  h4 ^= length;
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h3 = fmix(h3);
  h4 = fmix(h4);
  h1 = (h1 + h2 + h3 + h4) | 0;
  h2 = (h2 + h1) | 0;
  h3 = (h3 + h1) | 0;
  h4 = (h4 + h1) | 0;
  out[0] = h1;
  out[1] = h2;
  out[2] = h3;
  out[3] = h4;
}
