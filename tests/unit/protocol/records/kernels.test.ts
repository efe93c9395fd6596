/**
 * The WebAssembly kernels (LZ4 and snappy) against their TypeScript twins (src/protocol/records/kernels.ts,
 * lz4.ts, snappy.ts): the same compressed bytes, the same decoded bytes, the same verdict on hostile
 * input, and the committed module built from the kernel sources as they are.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DecodeError } from "../../../../src/errors/errors.ts";
import { KERNELS_SOURCE_SHA256 } from "../../../../src/protocol/records/generated/kernels-wasm.ts";
import { KERNEL_MALFORMED, lz4Kernels, snappyKernels } from "../../../../src/protocol/records/kernels.ts";
import {
  compressFragmentPortable,
  decodeElementsPortable,
  KERNEL_MAX_OUTPUT_BYTES,
  snappyCompress,
  snappyCompressBlock,
  snappyDecompress,
  snappyMaxCompressedLength,
  useSnappyKernels,
} from "../../../../src/protocol/records/snappy.ts";
import {
  LZ4_OUTPUT_LIMIT,
  lz4Compress,
  lz4CompressBlockPortable,
  lz4DecodeBlockPortable,
  lz4Decompress,
  lz4MaxCompressedLength,
  useLz4Kernels,
} from "../../../../src/protocol/records/lz4.ts";
import { kernelSourcesSha256 } from "../../../../scripts/kernel-sources.ts";

const kernels = lz4Kernels!;

/** A small deterministic PRNG, so that a failure can be replayed. */
function prng(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return Math.floor((state / 4294967296) * n);
  };
}

const WORDS = "alpha bravo charlie delta echo order customer invoice payment shipped pending region item".split(" ");

/** Inputs of the kinds a batch holds, and the edges of the block format. */
function inputs(): Uint8Array[] {
  const random = prng(7);
  const out: Uint8Array[] = [];
  for (const length of [0, 1, 4, 5, 11, 12, 13, 16, 17, 31, 64, 255, 1000, 65535, 65536]) {
    out.push(Uint8Array.from({ length }, () => random(256)));
    out.push(new Uint8Array(length).fill(97));
    out.push(Uint8Array.from({ length }, (_, i) => (i % 7) + 48));
  }
  for (let k = 0; k < 40; k++) {
    let text = "";
    const length = 1 + random(65536);
    while (text.length < length) text += WORDS[random(WORDS.length)] + (random(8) === 0 ? "," : " ");
    out.push(new TextEncoder().encode(text).subarray(0, length));
  }
  // Runs of a short pattern (overlapping matches at offsets 1..15) between random bytes.
  for (let period = 1; period <= 16; period++) {
    const bytes = Uint8Array.from({ length: 5000 }, (_, i) => (i % 1000 < 600 ? i % period : random(256)));
    out.push(bytes);
  }
  return out;
}

function compressPortable(src: Uint8Array): Uint8Array {
  const out = new Uint8Array(lz4MaxCompressedLength(src.length));
  const end = lz4CompressBlockPortable(src, 0, src.length, out, 0, new Uint16Array(1 << 14));
  return out.subarray(0, end);
}

function compressKernel(src: Uint8Array): Uint8Array {
  const out = new Uint8Array(lz4MaxCompressedLength(src.length) + 10).fill(0xee);
  const end = kernels.compressBlock(src, 0, src.length, out, 5);
  // Nothing outside [5, end) is touched.
  expect(out.subarray(0, 5).every((b) => b === 0xee)).toBe(true);
  expect(out.subarray(end).every((b) => b === 0xee)).toBe(true);
  return out.subarray(5, end);
}

type Verdict = { kind: "ok"; bytes: Uint8Array } | { kind: "limit" } | { kind: "malformed" };

function decodePortable(block: Uint8Array, out: Uint8Array, o: number, outLimit: number, windowStart: number): Verdict {
  try {
    const end = lz4DecodeBlockPortable(block, 0, block.length, out, o, outLimit, windowStart);
    return end === LZ4_OUTPUT_LIMIT ? { kind: "limit" } : { kind: "ok", bytes: out.slice(o, end) };
  } catch (error) {
    expect(error).toBeInstanceOf(DecodeError);
    return { kind: "malformed" };
  }
}

function decodeKernel(block: Uint8Array, out: Uint8Array, o: number, outLimit: number, windowStart: number): Verdict {
  const before = out.slice();
  const end = kernels.decodeBlock(block, 0, block.length, out, o, outLimit, windowStart);
  if (end === LZ4_OUTPUT_LIMIT || end === KERNEL_MALFORMED) {
    // A failed block leaves the caller's output as it was.
    expect(Buffer.compare(out, before)).toBe(0);
    return end === LZ4_OUTPUT_LIMIT ? { kind: "limit" } : { kind: "malformed" };
  }
  // Nothing before o or after the decoded end is touched.
  expect(Buffer.compare(out.subarray(0, o), before.subarray(0, o))).toBe(0);
  expect(Buffer.compare(out.subarray(end), before.subarray(end))).toBe(0);
  return { kind: "ok", bytes: out.slice(o, end) };
}

describe("lz4 kernels", () => {
  test("the kernels instantiate under Bun (the twins are the fallback, not the rule)", () => {
    expect(lz4Kernels).not.toBeNull();
  });

  test("the committed module was built from kernels/ as it is (else: bun scripts/build-kernels.ts)", () => {
    expect(KERNELS_SOURCE_SHA256).toBe(kernelSourcesSha256(join(import.meta.dir, "../../../../kernels")));
  });

  test("the compressor writes exactly the bytes of its twin", () => {
    for (const input of inputs()) {
      expect(Buffer.compare(compressKernel(input), compressPortable(input))).toBe(0);
    }
  });

  test("the decoder gives back every input, as its twin does", () => {
    for (const input of inputs()) {
      const block = compressPortable(input);
      const a = new Uint8Array(input.length + 64);
      const b = new Uint8Array(input.length + 64);
      const portable = decodePortable(block, a, 3, 3 + input.length, 3);
      const kernel = decodeKernel(block, b, 3, 3 + input.length, 3);
      expect(portable).toEqual({ kind: "ok", bytes: input });
      expect(kernel).toEqual(portable);
    }
  });

  test("matches reaching into a window of earlier output (linked blocks), and no further", () => {
    const random = prng(11);
    for (let k = 0; k < 300; k++) {
      const windowBytes = random(3) === 0 ? 70_000 : random(200);
      const history = Uint8Array.from({ length: windowBytes }, () => random(256));
      // A block of random sequences whose offsets reach up to (and sometimes past) the window.
      const block: number[] = [];
      let produced = 0;
      const sequences = 1 + random(20);
      for (let s = 0; s < sequences; s++) {
        const literals = random(20);
        const match = 4 + random(40);
        block.push(((Math.min(literals, 15) << 4) | Math.min(match - 4, 15)) & 0xff);
        if (literals >= 15) block.push(literals - 15);
        for (let i = 0; i < literals; i++) block.push(random(256));
        produced += literals;
        const reach = Math.min(windowBytes + produced, 65535);
        const offset = random(10) === 0 ? reach + 1 : 1 + random(Math.max(1, reach));
        block.push(offset & 0xff, (offset >>> 8) & 0xff);
        if (match - 4 >= 15) block.push(match - 4 - 15);
        produced += match;
      }
      block.push(0x10, random(256)); // last sequence: one literal
      const bytes = Uint8Array.from(block);
      const size = windowBytes + produced + 1 + 64;
      const a = new Uint8Array(size);
      a.set(history, 0);
      const b = a.slice();
      const limit = windowBytes + produced + 1;
      const windowStart = random(4) === 0 ? windowBytes : 0;
      expect(decodeKernel(bytes, b, windowBytes, limit, windowStart)).toEqual(decodePortable(bytes, a, windowBytes, limit, windowStart));
    }
  });

  test("hostile blocks: flipped bytes, cut blocks and tight limits get the twin's verdict", () => {
    const random = prng(13);
    const sources = inputs().filter((i) => i.length > 0);
    let malformed = 0;
    let limited = 0;
    for (let k = 0; k < 2000; k++) {
      const input = sources[random(sources.length)]!;
      const block = compressPortable(input).slice();
      const mutation = random(3);
      let damaged: Uint8Array = block;
      if (mutation === 0) {
        for (let f = 0; f < 1 + random(4); f++) damaged[random(damaged.length)] = random(256);
      } else if (mutation === 1) {
        damaged = block.subarray(0, random(block.length));
      }
      const room = mutation === 2 ? Math.max(0, input.length - 1 - random(8)) : input.length + random(300);
      const a = new Uint8Array(room + 64);
      const b = new Uint8Array(room + 64);
      const portable = decodePortable(damaged, a, 0, room, 0);
      const kernel = decodeKernel(damaged, b, 0, room, 0);
      expect(kernel).toEqual(portable);
      if (portable.kind === "malformed") malformed++;
      if (portable.kind === "limit") limited++;
    }
    // The mutations really produced both kinds of failure.
    expect(malformed).toBeGreaterThan(100);
    expect(limited).toBeGreaterThan(100);
  });

  test("frames decode and encode the same with the kernels and with the twins", () => {
    for (const input of inputs()) {
      useLz4Kernels(false);
      const portableFrame = lz4Compress(input);
      useLz4Kernels(true);
      const kernelFrame = lz4Compress(input);
      expect(Buffer.compare(kernelFrame, portableFrame)).toBe(0);
      expect(Buffer.compare(lz4Decompress(kernelFrame, 1 << 20), input)).toBe(0);
    }
  });
});

describe("snappy kernels", () => {
  const snappy = snappyKernels!;
  /** Fragments as the compressor cuts them: at most 64 KiB. */
  const fragments = (): Uint8Array[] => inputs().filter((i) => i.length <= 65536);

  function compressFragmentKernel(src: Uint8Array): Uint8Array {
    const out = new Uint8Array(snappyMaxCompressedLength(src.length) + 10).fill(0xee);
    const end = snappy.compressFragment(src, 0, src.length, out, 5);
    expect(out.subarray(0, 5).every((b) => b === 0xee)).toBe(true);
    expect(out.subarray(end).every((b) => b === 0xee)).toBe(true);
    return out.subarray(5, end);
  }

  function compressFragmentTwin(src: Uint8Array): Uint8Array {
    const out = new Uint8Array(snappyMaxCompressedLength(src.length));
    return out.subarray(0, compressFragmentPortable(src, 0, src.length, out, 0, new Uint16Array(1 << 14)));
  }

  type SnappyVerdict = { kind: "ok"; bytes: Uint8Array } | { kind: "malformed" };

  function decodeTwin(elements: Uint8Array, length: number): SnappyVerdict {
    const out = new Uint8Array(length + 3);
    try {
      decodeElementsPortable(elements, 0, elements.length, out, 3, length);
      return { kind: "ok", bytes: out.slice(3, 3 + length) };
    } catch (error) {
      expect(error).toBeInstanceOf(DecodeError);
      return { kind: "malformed" };
    }
  }

  function decodeKernel(elements: Uint8Array, length: number): SnappyVerdict {
    const out = new Uint8Array(length + 3 + 20).fill(0xee);
    if (!snappy.decodeElements(elements, 0, elements.length, out, 3, length)) return { kind: "malformed" };
    // Nothing outside [3, 3 + length) is touched.
    expect(out.subarray(0, 3).every((b) => b === 0xee)).toBe(true);
    expect(out.subarray(3 + length).every((b) => b === 0xee)).toBe(true);
    return { kind: "ok", bytes: out.slice(3, 3 + length) };
  }

  test("the kernels instantiate under Bun", () => {
    expect(snappyKernels).not.toBeNull();
  });

  test("the fragment compressor writes exactly the bytes of its twin", () => {
    for (const input of fragments()) {
      expect(Buffer.compare(compressFragmentKernel(input), compressFragmentTwin(input))).toBe(0);
    }
  });

  test("the element decoder gives back every input, as its twin does", () => {
    for (const input of fragments()) {
      const elements = compressFragmentTwin(input);
      const twin = decodeTwin(elements, input.length);
      expect(twin).toEqual({ kind: "ok", bytes: input });
      expect(decodeKernel(elements, input.length)).toEqual(twin);
    }
  });

  test("hostile elements: flipped bytes, cut input, wrong lengths and long literals get the twin's verdict", () => {
    const random = prng(17);
    const sources = fragments().filter((i) => i.length > 0);
    let malformed = 0;
    for (let k = 0; k < 3000; k++) {
      const input = sources[random(sources.length)]!;
      let elements = compressFragmentTwin(input).slice();
      let length = input.length;
      const mutation = random(4);
      if (mutation === 0) {
        for (let f = 0; f < 1 + random(4); f++) elements[random(elements.length)] = random(256);
      } else if (mutation === 1) {
        elements = elements.subarray(0, random(elements.length));
      } else if (mutation === 2) {
        length = Math.max(0, length + random(9) - 4);
      } else {
        // A literal whose length takes 1-4 extra bytes, up to 2^32 - 1, before the elements.
        const extra = 1 + random(4);
        const literal = [(59 + extra) << 2];
        for (let i = 0; i < extra; i++) literal.push(random(4) === 0 ? 0xff : random(256));
        const joined = new Uint8Array(literal.length + elements.length);
        joined.set(literal, 0);
        joined.set(elements, literal.length);
        elements = joined;
      }
      const twin = decodeTwin(elements, length);
      expect(decodeKernel(elements, length)).toEqual(twin);
      if (twin.kind === "malformed") malformed++;
    }
    expect(malformed).toBeGreaterThan(1000);
  });

  test("copies closer than 8 bytes and copies reaching before the block", () => {
    // A literal "ab", then copies at offsets 1..9 of 4..64 bytes, some reaching too far back.
    const random = prng(19);
    for (let k = 0; k < 500; k++) {
      const elements: number[] = [1 << 2, 97, 98];
      let produced = 2;
      for (let c = 0; c < 1 + random(6); c++) {
        const length = 4 + random(61);
        const offset = 1 + random(random(8) === 0 ? produced + 2 : Math.min(produced, 9));
        elements.push(((length - 1) << 2) | 2, offset & 0xff, offset >>> 8);
        produced += length;
      }
      const bytes = Uint8Array.from(elements);
      expect(decodeKernel(bytes, produced)).toEqual(decodeTwin(bytes, produced));
    }
  });

  test("a raw block above the kernel's limit (KERNEL_MAX_OUTPUT_BYTES) decodes to the same bytes", () => {
    const random = prng(23);
    let text = "";
    while (text.length < KERNEL_MAX_OUTPUT_BYTES + 1000) text += WORDS[random(WORDS.length)] + " ";
    const input = new TextEncoder().encode(text);
    const block = snappyCompressBlock(input);
    expect(Buffer.compare(snappyDecompress(block, 64 << 20), input)).toBe(0);
  });

  test("xerial streams and raw blocks decode and encode the same with the kernels and with the twins", () => {
    for (const input of inputs()) {
      useSnappyKernels(false);
      const portableStream = snappyCompress(input);
      const portableBlock = snappyCompressBlock(input);
      useSnappyKernels(true);
      const kernelStream = snappyCompress(input);
      expect(Buffer.compare(kernelStream, portableStream)).toBe(0);
      expect(Buffer.compare(snappyCompressBlock(input), portableBlock)).toBe(0);
      expect(Buffer.compare(snappyDecompress(kernelStream, 1 << 20), input)).toBe(0);
      expect(Buffer.compare(snappyDecompress(portableBlock, 1 << 20), input)).toBe(0);
    }
  });
});
