/**
 * Inputs shared by the codec tests: deterministic random bytes, compressible text, a hex parser, and
 * compressed batches made with the broker's own codecs.
 */
import { compress } from "../../src/protocol/records/compression.ts";
import {
  ATTRIBUTES_AT,
  BATCH_HEADER_BYTES,
  BATCH_LENGTH_AT,
  COMPRESSION_CODEC_MASK,
  LOG_OVERHEAD_BYTES,
  readInt16,
  recomputeCrc,
  writeInt16,
  writeInt32,
} from "../../src/protocol/records/record-batch.ts";
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

/**
 * The uncompressed batch `batch` (one whole batch, as tests/support/batch-builder.ts builds it) with its
 * records section compressed by the broker's own `codec`: codec bits, batch length and CRC updated, every
 * other header field kept.
 */
export function compressBatch(batch: Uint8Array, codec: number): Uint8Array {
  const section = compress(codec, batch.subarray(BATCH_HEADER_BYTES));
  const out = new Uint8Array(BATCH_HEADER_BYTES + section.length);
  out.set(batch.subarray(0, BATCH_HEADER_BYTES));
  out.set(section, BATCH_HEADER_BYTES);
  writeInt32(out, BATCH_LENGTH_AT, out.length - LOG_OVERHEAD_BYTES);
  writeInt16(out, ATTRIBUTES_AT, (readInt16(out, ATTRIBUTES_AT) & ~COMPRESSION_CODEC_MASK) | codec);
  recomputeCrc(out, 0);
  return out;
}
