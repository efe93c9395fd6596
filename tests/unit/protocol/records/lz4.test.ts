import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import { lz4Compress, lz4Decompress, lz4MaxCompressedLength } from "../../../../src/protocol/records/lz4.ts";
import { xxhash32 } from "../../../../src/protocol/records/xxhash32.ts";
import { compressibleText, EDGE_LENGTHS, fromHex, mixedBytes, randomBytes } from "../../../support/codec-inputs.ts";
import { seededRandom } from "../../../support/random.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const ascii = (s: string) => new TextEncoder().encode(s);
const LIMIT = 16 * 1024 * 1024;
const REPEATED_TEXT = "exactly once, ".repeat(20) + "the end";
/** Apache Kafka 4.1's Lz4BlockOutputStream (what the Java client writes) of REPEATED_TEXT. */
const KAFKA_JAVA_REPEATED = fromHex("04224d186040821a000000ef65786163746c79206f6e63652c200e00f77074686520656e6400000000");
/**
 * lz4-java 1.8's LZ4FrameOutputStream of REPEATED_TEXT with every optional field: block checksums,
 * content size (287) and content checksum.
 */
const ALL_FLAGS_REPEATED = fromHex(
  "04224d187c401f01000000000000c31a000000ef65786163746c79206f6e63652c200e00f77074686520656e64dfab9b8a0000000063478323",
);

const le32 = (value: number) => [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24];

/** A frame from its descriptor and raw block bytes (each block given with its size word), end mark added. */
function frame(flg: number, bd: number, blocks: number[][], extraDescriptor: number[] = [], trailer: number[] = []): Uint8Array {
  const descriptor = Uint8Array.from([flg, bd, ...extraDescriptor]);
  const checksum = (xxhash32(descriptor) >>> 8) & 0xff;
  return Uint8Array.from([...le32(0x184d2204), ...descriptor, checksum, ...blocks.flat(), 0, 0, 0, 0, ...trailer]);
}

/** Block 1 stored ("abcdefgh"); block 2 a match of 8 reaching back into block 1, then the literal "!". */
const LINKED_BLOCKS = [
  [...le32(0x80000008), ...ascii("abcdefgh")],
  [...le32(5), 0x04, 0x08, 0x00, 0x10, 0x21],
];

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

describe("lz4 frame decoding", () => {
  test("the frame Apache Kafka's Java client writes", () => {
    expect(text(lz4Decompress(KAFKA_JAVA_REPEATED, LIMIT))).toBe(REPEATED_TEXT);
  });

  test("a frame with block checksums, the content size and the content checksum", () => {
    expect(text(lz4Decompress(ALL_FLAGS_REPEATED, LIMIT))).toBe(REPEATED_TEXT);
  });

  test("linked blocks (block independence unset) may reach into earlier blocks; independent ones may not", () => {
    expect(text(lz4Decompress(frame(0x40, 0x40, LINKED_BLOCKS), LIMIT))).toBe("abcdefghabcdefgh!");
    expect(() => lz4Decompress(frame(0x60, 0x40, LINKED_BLOCKS), LIMIT)).toThrow("reaches before the window");
  });

  test("frames one after another, and skippable frames, are read; anything else after a frame is not", () => {
    const skippable = [...le32(0x184d2a53), ...le32(3), 1, 2, 3];
    const two = Uint8Array.from([...skippable, ...KAFKA_JAVA_REPEATED, ...ALL_FLAGS_REPEATED, ...skippable]);
    expect(text(lz4Decompress(two, LIMIT))).toBe(REPEATED_TEXT + REPEATED_TEXT);
    expect(() => lz4Decompress(Uint8Array.from([...KAFKA_JAVA_REPEATED, 0]), LIMIT)).toThrow(DecodeError);
    expect(() => lz4Decompress(Uint8Array.from([...KAFKA_JAVA_REPEATED, 1, 2, 3, 4]), LIMIT)).toThrow("is not 0x184d2204");
  });

  test("checksums are verified: the descriptor's, each block's, the content's", () => {
    const badHeader = KAFKA_JAVA_REPEATED.slice();
    badHeader[6] = badHeader[6]! ^ 1;
    expect(() => lz4Decompress(badHeader, LIMIT)).toThrow("descriptor checksum mismatch");
    const at = ALL_FLAGS_REPEATED.length;
    const badBlock = ALL_FLAGS_REPEATED.slice();
    badBlock[at - 12] = badBlock[at - 12]! ^ 1; // the block's checksum
    expect(() => lz4Decompress(badBlock, LIMIT)).toThrow("block checksum mismatch");
    const badBlockData = ALL_FLAGS_REPEATED.slice();
    badBlockData[20] = badBlockData[20]! ^ 1; // a literal byte: the block checksum catches it before decoding
    expect(() => lz4Decompress(badBlockData, LIMIT)).toThrow("block checksum mismatch");
    const badContent = ALL_FLAGS_REPEATED.slice();
    badContent[at - 1] = badContent[at - 1]! ^ 1;
    expect(() => lz4Decompress(badContent, LIMIT)).toThrow("content checksum mismatch");
  });

  test("a content size that disagrees with the blocks is refused", () => {
    const stored = [[...le32(0x80000003), ...ascii("abc")]];
    expect(text(lz4Decompress(frame(0x68, 0x40, stored, [3, 0, 0, 0, 0, 0, 0, 0]), LIMIT))).toBe("abc");
    expect(() => lz4Decompress(frame(0x68, 0x40, stored, [4, 0, 0, 0, 0, 0, 0, 0]), LIMIT)).toThrow("its header says 4");
    // A declared size above maxBytes is refused before anything is decoded.
    expect(() => lz4Decompress(frame(0x68, 0x40, stored, [0, 0, 0, 0, 1, 0, 0, 0]), LIMIT)).toThrow("more than the");
  });

  test("descriptors Kafka never writes or that are malformed are refused", () => {
    const stored = [[...le32(0x80000003), ...ascii("abc")]];
    expect(() => lz4Decompress(frame(0x61, 0x40, stored, [1, 2, 3, 4]), LIMIT)).toThrow("dictionary");
    expect(() => lz4Decompress(frame(0x80 | 0x20, 0x40, stored), LIMIT)).toThrow("version");
    expect(() => lz4Decompress(frame(0x62, 0x40, stored), LIMIT)).toThrow("reserved");
    expect(() => lz4Decompress(frame(0x60, 0x41, stored), LIMIT)).toThrow("reserved");
    expect(() => lz4Decompress(frame(0x60, 0x30, stored), LIMIT)).toThrow("block size id 3");
    expect(() => lz4Decompress(new Uint8Array(0), LIMIT)).toThrow(DecodeError);
    expect(() => lz4Decompress(fromHex("04224d18"), LIMIT)).toThrow(DecodeError);
  });

  test("a block larger than the frame's block size, or running past the data, is refused", () => {
    const big = 65_537;
    expect(() => lz4Decompress(frame(0x60, 0x40, [[...le32(0x80000000 | big), ...new Uint8Array(big)]]), LIMIT)).toThrow("the frame allows 65536");
    expect(lz4Decompress(frame(0x60, 0x50, [[...le32(0x80000000 | big), ...new Uint8Array(big)]]), LIMIT).length).toBe(big);
    expect(() => lz4Decompress(frame(0x60, 0x40, [[...le32(100), 0x10, 0x41]]), LIMIT)).toThrow("runs past the input");
  });

  test("malformed blocks: a match offset of 0, one before the output, a block ending inside a sequence", () => {
    const block = (...bytes: number[]) => [[...le32(bytes.length), ...bytes]];
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0x10, 0x41, 0x00, 0x00, 0x00)), LIMIT)).toThrow("offset 0");
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0x10, 0x41, 0x02, 0x00, 0x00)), LIMIT)).toThrow("reaches before");
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0x10, 0x41, 0x01)), LIMIT)).toThrow("offset truncated");
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0xf0, 0xff, 0xff)), LIMIT)).toThrow("literal length truncated");
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0x20, 0x41)), LIMIT)).toThrow("run past the block");
    // A literal, then a match of 4 from 1 back: the block must not end after a match.
    expect(() => lz4Decompress(frame(0x60, 0x40, block(0x10, 0x41, 0x01, 0x00)), LIMIT)).toThrow("ends inside a sequence");
  });

  test("the output bound: more than maxBytes is refused, in stored and compressed blocks alike", () => {
    const data = compressibleText(100_000, 1);
    const compressed = lz4Compress(data);
    expect(lz4Decompress(compressed, data.length)).toEqual(data);
    expect(() => lz4Decompress(compressed, data.length - 1)).toThrow("more than the 99999 bytes allowed");
    const noise = lz4Compress(randomBytes(1000, 2));
    expect(() => lz4Decompress(noise, 999)).toThrow("more than the 999 bytes allowed");
    // Length-extension bytes: a literal, then a match of 4 + 15 + 255 + 255 + 0 repeating it.
    const extended = [[...le32(8), 0x1f, 0x41, 0x01, 0x00, 0xff, 0xff, 0x00, 0x00]];
    expect(lz4Decompress(frame(0x60, 0x40, extended), LIMIT)).toEqual(new Uint8Array(1 + 4 + 15 + 255 + 255).fill(0x41));
    // A match that would take the block past the frame's 64 KiB block size is corrupt, not large.
    const runaway = [0x1f, 0x41, 0x01, 0x00, ...new Array(300).fill(0xff), 0x00, 0x00];
    expect(() => lz4Decompress(frame(0x60, 0x40, [[...le32(runaway.length), ...runaway]]), LIMIT)).toThrow(
      "block decodes to more than 65536 bytes",
    );
  });

  test("every prefix of a frame fails with DecodeError or, at a frame boundary, decodes to a prefix", () => {
    const data = mixedBytes(150_000, 3);
    const compressed = lz4Compress(data);
    for (let cut = 0; cut < compressed.length; cut += cut < 200 ? 1 : 997) {
      expectDecodeErrorOrPrefix(() => lz4Decompress(compressed.subarray(0, cut), LIMIT), data);
    }
    for (let cut = 0; cut < ALL_FLAGS_REPEATED.length; cut++) {
      expect(() => lz4Decompress(ALL_FLAGS_REPEATED.subarray(0, cut), LIMIT)).toThrow(DecodeError);
    }
  });

  test("corrupted bytes give DecodeError or some bounded output, never another exception", () => {
    const random = seededRandom(4);
    const compressed = lz4Compress(mixedBytes(20_000, 5));
    for (let round = 0; round < 2_000; round++) {
      const corrupt = compressed.slice();
      for (let flips = random.int(1, 4); flips > 0; flips--) corrupt[random.int(0, corrupt.length - 1)] = random.int(0, 255);
      try {
        expect(lz4Decompress(corrupt, 40_000).length).toBeLessThanOrEqual(40_000);
      } catch (error) {
        expect(error).toBeInstanceOf(DecodeError);
      }
    }
  });
});

describe("lz4 frame encoding", () => {
  test("round trips over random, compressible, mixed and constant data of every boundary length", () => {
    for (const length of EDGE_LENGTHS) {
      for (const data of [randomBytes(length, length), compressibleText(length, length), mixedBytes(length, length), new Uint8Array(length).fill(7)]) {
        expect(lz4Decompress(lz4Compress(data), LIMIT)).toEqual(data);
      }
    }
  });

  test("it writes the descriptor Kafka's Java client writes and 64 KiB blocks, stored when incompressible", () => {
    const data = Uint8Array.from([...compressibleText(65_536, 6), ...randomBytes(100_000, 7)]);
    const out = lz4Compress(data);
    expect([...out.subarray(0, 7)]).toEqual([...KAFKA_JAVA_REPEATED.subarray(0, 7)]);
    const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
    const blocks: { stored: boolean; size: number }[] = [];
    let at = 7;
    for (;;) {
      const word = view.getUint32(at, true);
      at += 4;
      if (word === 0) break;
      blocks.push({ stored: (word & 0x80000000) !== 0, size: word & 0x7fffffff });
      at += word & 0x7fffffff;
    }
    expect(at).toBe(out.length);
    expect(blocks.map((b) => b.stored)).toEqual([false, true, true]);
    expect(blocks[0]!.size).toBeLessThan(65_536 / 2);
    expect(blocks.slice(1).map((b) => b.size)).toEqual([65_536, 165_536 - 2 * 65_536]);
  });

  test("it really compresses: text to under 60%, a constant run to almost nothing", () => {
    const textual = compressibleText(1 << 20, 8);
    expect(lz4Compress(textual).length).toBeLessThan(textual.length * 0.6);
    expect(lz4Compress(new Uint8Array(1 << 20)).length).toBeLessThan(10_000);
    expect(lz4MaxCompressedLength(65_536)).toBeGreaterThan(65_536);
    // The example compresses to a literal and one long overlapping match, as lz4-java's does.
    expect(lz4Compress(ascii(REPEATED_TEXT))).toEqual(KAFKA_JAVA_REPEATED);
  });
});
