/**
 * Inputs shared by the codec tests: deterministic random bytes, compressible text, and a hex parser.
 */
import { seededRandom } from "./random.ts";

export function fromHex(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
}

export function randomBytes(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = random.int(0, 255);
  return out;
}

const WORDS = "exactly once producer consumer offset partition broker record batch commit abort the of and".split(" ");

/** Text of random words from a small vocabulary: compresses well, with matches at every distance. */
export function compressibleText(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  let text = "";
  while (text.length < length) text += `${random.pick(WORDS)}${random.next() < 0.1 ? "\n" : " "}`;
  return new TextEncoder().encode(text.slice(0, length));
}

/** Random bytes with repeated runs and back-references mixed in (every copy length and offset class). */
export function mixedBytes(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const out = new Uint8Array(length);
  let at = 0;
  while (at < length) {
    const choice = random.next();
    const n = Math.min(length - at, random.int(1, choice < 0.5 ? 20 : 300));
    if (choice < 0.4 || at === 0) {
      for (let i = 0; i < n; i++) out[at + i] = random.int(0, 255);
    } else {
      const distance = random.int(1, Math.min(at, random.next() < 0.5 ? 100 : 70_000));
      for (let i = 0; i < n; i++) out[at + i] = out[at + i - distance]!;
    }
    at += n;
  }
  return out;
}

/** Every length that sits on or next to a boundary of the formats, plus a few bulk sizes. */
export const EDGE_LENGTHS = [0, 1, 2, 3, 4, 5, 11, 12, 13, 14, 15, 16, 17, 59, 60, 61, 255, 256, 257, 1000, 65_535, 65_536, 65_537, 131_073, 300_000];
