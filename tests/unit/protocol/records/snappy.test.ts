import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import {
  snappyCompress,
  snappyCompressBlock,
  snappyDecompress,
  snappyDecompressBlock,
  snappyMaxCompressedLength,
} from "../../../../src/protocol/records/snappy.ts";
import { compressibleText, EDGE_LENGTHS, fromHex, mixedBytes, randomBytes } from "../../../support/codec-inputs.ts";
import { seededRandom } from "../../../support/random.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const LIMIT = 16 * 1024 * 1024;
const REPEATED_TEXT = "exactly once, ".repeat(20) + "the end";
/** snappy-java 1.1.10's SnappyOutputStream (what Apache Kafka's Java client writes) of REPEATED_TEXT. */
const SNAPPY_JAVA_REPEATED = fromHex(
  "82534e41505059000000000100000001000000279f023465786163746c79206f6e63652c20fe0e00fe0e00fe0e00fe0e00190e1874686520656e64",
);
/** The same text as one raw block from github.com/klauspost/compress/snappy (what franz-go writes). */
const RAW_REPEATED = fromHex("9f023465786163746c79206f6e63652c20ee0e00ee0e00ee0e00ee0e00660e001874686520656e64");

/** Splits a xerial stream into its chunks' raw blocks. */
function xerialChunks(framed: Uint8Array): Uint8Array[] {
  const view = new DataView(framed.buffer, framed.byteOffset, framed.byteLength);
  const chunks: Uint8Array[] = [];
  for (let at = 16; at < framed.length; ) {
    const size = view.getInt32(at);
    chunks.push(framed.subarray(at + 4, at + 4 + size));
    at += 4 + size;
  }
  return chunks;
}

function expectDecodeErrorOrPrefix(decode: () => Uint8Array, original: Uint8Array): void {
  let out: Uint8Array;
  try {
    out = decode();
  } catch (error) {
    expect(error).toBeInstanceOf(DecodeError);
    return;
  }
  expect(original.subarray(0, out.length)).toEqual(out);
}

describe("snappy decoding", () => {
  test("the xerial framing snappy-java writes (the Java client), and a raw block (franz-go, librdkafka)", () => {
    expect(text(snappyDecompress(SNAPPY_JAVA_REPEATED, LIMIT))).toBe(REPEATED_TEXT);
    expect(text(snappyDecompress(RAW_REPEATED, LIMIT))).toBe(REPEATED_TEXT);
    expect(text(snappyDecompress(fromHex("0308616263"), LIMIT))).toBe("abc");
  });

  test("several xerial chunks are concatenated, each decoding on its own", () => {
    const header = fromHex("82534e41505059000000000100000001");
    const chunk = (b: Uint8Array) => [...fromHex(b.length.toString(16).padStart(8, "0")), ...b];
    const framed = Uint8Array.from([...header, ...chunk(RAW_REPEATED), ...chunk(fromHex("0308616263"))]);
    expect(text(snappyDecompress(framed, LIMIT))).toBe(`${REPEATED_TEXT}abc`);
    // A header without chunks is the empty stream.
    expect(snappyDecompress(header, LIMIT)).toEqual(new Uint8Array(0));
  });

  test("every copy form: 1-byte offset overlapping a run, 2-byte and 4-byte offsets, long literal lengths", () => {
    // Length 8; literal "a"; copy with 1-byte offset 1, length 7: a run.
    expect(text(snappyDecompress(fromHex("0800610d01"), LIMIT))).toBe("aaaaaaaa");
    // Length 6; literal "abc"; copy with 4-byte offset 3, length 3.
    expect(text(snappyDecompress(fromHex("0608616263" + "0b03000000"), LIMIT))).toBe("abcabc");
    // Length 6; literal "abc"; copy with 2-byte offset 3, length 3.
    expect(text(snappyDecompress(fromHex("0608616263" + "0a0300"), LIMIT))).toBe("abcabc");
    // A 100-byte literal with its length in one extra byte (tag 60 << 2, then 99).
    const literal = randomBytes(100, 1);
    expect(snappyDecompress(Uint8Array.from([100, 0xf0, 99, ...literal]), LIMIT)).toEqual(literal);
  });

  test("a copy reaching before the block, a short block, bytes past the declared length are refused", () => {
    expect(() => snappyDecompress(fromHex("080d02"), LIMIT)).toThrow("bad snappy back-reference");
    expect(() => snappyDecompress(fromHex("0508616263"), LIMIT)).toThrow("decoded to 3 bytes, its header says 5");
    expect(() => snappyDecompress(fromHex("0208616263"), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(fromHex("0400610d01"), LIMIT)).toThrow(DecodeError);
    // A copy with offset 0 is never valid.
    expect(() => snappyDecompress(fromHex("0808616263" + "0a0000"), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(new Uint8Array(0), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(fromHex("ffffffffff7f"), LIMIT)).toThrow(DecodeError);
  });

  test("a xerial chunk with a length beyond the data or not positive is refused", () => {
    const header = fromHex("82534e41505059000000000100000001");
    expect(() => snappyDecompress(Uint8Array.from([...header, 0, 0, 0, 9, 3, 8, 0x61]), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(Uint8Array.from([...header, 0, 0, 0, 0]), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(Uint8Array.from([...header, 0xff, 0xff, 0xff, 0xff, 3, 8]), LIMIT)).toThrow(DecodeError);
    expect(() => snappyDecompress(Uint8Array.from([...header, 0, 0]), LIMIT)).toThrow(DecodeError);
  });

  test("the output bound: a block or stream above maxBytes, or a length the input cannot produce, is refused before allocating", () => {
    const data = compressibleText(10_000, 2);
    const framed = snappyCompress(data);
    expect(snappyDecompress(framed, data.length)).toEqual(data);
    expect(() => snappyDecompress(framed, data.length - 1)).toThrow("more than the 9999 allowed");
    expect(() => snappyDecompressBlock(snappyCompressBlock(data), data.length - 1)).toThrow(DecodeError);
    // Five bytes that declare 4 GiB - 1: refused by the expansion bound whatever maxBytes says.
    expect(() => snappyDecompress(fromHex("ffffffff0f00"), Number.MAX_SAFE_INTEGER)).toThrow("more than it can hold");
    // Two chunks that each fit maxBytes but not together.
    const twoChunks = snappyCompress(compressibleText(100_000, 3));
    expect(() => snappyDecompress(twoChunks, 70_000)).toThrow(DecodeError);
  });

  test("every prefix of a stream fails with DecodeError or decodes to a prefix of the data (chunk boundaries)", () => {
    const data = mixedBytes(150_000, 4);
    const framed = snappyCompress(data);
    for (let cut = 0; cut < framed.length; cut += cut < 200 ? 1 : 997) {
      expectDecodeErrorOrPrefix(() => snappyDecompress(framed.subarray(0, cut), LIMIT), data);
    }
    const raw = snappyCompressBlock(data.subarray(0, 5_000));
    for (let cut = 0; cut < raw.length; cut++) {
      expect(() => snappyDecompressBlock(raw.subarray(0, cut), LIMIT)).toThrow(DecodeError);
    }
  });

  test("corrupted bytes give DecodeError or some bounded output, never another exception", () => {
    const random = seededRandom(5);
    const data = mixedBytes(20_000, 6);
    const framed = snappyCompress(data);
    for (let round = 0; round < 2_000; round++) {
      const corrupt = framed.slice();
      for (let flips = random.int(1, 4); flips > 0; flips--) corrupt[random.int(0, corrupt.length - 1)] = random.int(0, 255);
      try {
        expect(snappyDecompress(corrupt, 40_000).length).toBeLessThanOrEqual(40_000);
      } catch (error) {
        expect(error).toBeInstanceOf(DecodeError);
      }
    }
  });
});

describe("snappy encoding", () => {
  test("round trips over random, compressible, mixed and constant data of every boundary length", () => {
    for (const length of EDGE_LENGTHS) {
      for (const data of [randomBytes(length, length), compressibleText(length, length), mixedBytes(length, length), new Uint8Array(length).fill(7)]) {
        expect(snappyDecompress(snappyCompress(data), LIMIT)).toEqual(data);
        expect(snappyDecompress(snappyCompressBlock(data), LIMIT)).toEqual(data);
      }
    }
  });

  test("it writes the xerial header snappy-java writes, then chunks of at most 64 KiB each", () => {
    const data = compressibleText(200_000, 7);
    const framed = snappyCompress(data);
    expect([...framed.subarray(0, 16)]).toEqual([...fromHex("82534e41505059000000000100000001")]);
    const chunks = xerialChunks(framed);
    expect(chunks.length).toBe(4);
    expect(chunks.map((c) => snappyDecompressBlock(c, LIMIT).length)).toEqual([65_536, 65_536, 65_536, 200_000 - 3 * 65_536]);
  });

  test("it really compresses: text to under half, a constant run to about 3 bytes per 64, random data grows by little", () => {
    const textual = compressibleText(1 << 20, 8);
    expect(snappyCompress(textual).length).toBeLessThan(textual.length / 2);
    const zeros = new Uint8Array(1 << 20);
    expect(snappyCompress(zeros).length).toBeLessThan(zeros.length / 20);
    const noise = randomBytes(1 << 20, 9);
    const compressed = snappyCompressBlock(noise);
    expect(compressed.length).toBeLessThanOrEqual(snappyMaxCompressedLength(noise.length));
    expect(compressed.length).toBeLessThan(noise.length * 1.01);
  });

  test("the example from the snappy-java vector compresses into literals and copies (an element per repeat, not a literal)", () => {
    const data = new TextEncoder().encode(REPEATED_TEXT);
    const block = snappyCompressBlock(data);
    expect(block.length).toBeLessThan(40);
    expect(text(snappyDecompressBlock(block, LIMIT))).toBe(REPEATED_TEXT);
  });
});
