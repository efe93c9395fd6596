/**
 * XXH32, the checksum of the LZ4 frame format: its header checksum (second byte of the hash of the frame
 * descriptor), the optional per-block checksums and the optional content checksum all use it with seed 0.
 *
 * Written from the published algorithm description (four 32-bit lanes over 16-byte stripes, then the
 * tail, then the avalanche). Lanes are read little-endian byte by byte, so the input may start at any
 * alignment; Math.imul keeps every multiplication in 32 bits.
 */

const PRIME1 = 0x9e3779b1 | 0;
const PRIME2 = 0x85ebca77 | 0;
const PRIME3 = 0xc2b2ae3d | 0;
const PRIME4 = 0x27d4eb2f | 0;
const PRIME5 = 0x165667b1 | 0;

function rotl(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}

function lane(data: Uint8Array, at: number): number {
  return data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24);
}

function round(acc: number, input: number): number {
  return Math.imul(rotl((acc + Math.imul(input, PRIME2)) | 0, 13), PRIME1);
}

/** XXH32 of `data[start, end)` with `seed`, as an unsigned 32-bit number. */
export function xxhash32(data: Uint8Array, start = 0, end = data.length, seed = 0): number {
  if (start < 0 || end > data.length || start > end) {
    throw new RangeError(`xxhash32 range [${start}, ${end}) outside 0..${data.length}`);
  }
  let at = start;
  let acc: number;
  if (end - start >= 16) {
    let v1 = (seed + PRIME1 + PRIME2) | 0;
    let v2 = (seed + PRIME2) | 0;
    let v3 = seed | 0;
    let v4 = (seed - PRIME1) | 0;
    const stripesEnd = end - 16;
    while (at <= stripesEnd) {
      v1 = round(v1, lane(data, at));
      v2 = round(v2, lane(data, at + 4));
      v3 = round(v3, lane(data, at + 8));
      v4 = round(v4, lane(data, at + 12));
      at += 16;
    }
    acc = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    acc = (seed + PRIME5) | 0;
  }
  // The length is added modulo 2^32, as the reference does with its 32-bit length.
  acc = (acc + (end - start)) | 0;
  while (at + 4 <= end) {
    acc = Math.imul(rotl((acc + Math.imul(lane(data, at), PRIME3)) | 0, 17), PRIME4);
    at += 4;
  }
  while (at < end) {
    acc = Math.imul(rotl((acc + Math.imul(data[at]!, PRIME5)) | 0, 11), PRIME1);
    at++;
  }
  acc ^= acc >>> 15;
  acc = Math.imul(acc, PRIME2);
  acc ^= acc >>> 13;
  acc = Math.imul(acc, PRIME3);
  acc ^= acc >>> 16;
  return acc >>> 0;
}
