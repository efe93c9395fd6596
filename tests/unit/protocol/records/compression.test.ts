import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import { compress, decompress } from "../../../../src/protocol/records/compression.ts";
import { CompressionCodec } from "../../../../src/protocol/records/record-batch.ts";
import { compressibleText, mixedBytes, randomBytes } from "../../../support/codec-inputs.ts";

const CODECS = ["gzip", "snappy", "lz4", "zstd"] as const;
const LIMIT = 8 * 1024 * 1024;

describe("compress / decompress", () => {
  test("every codec round-trips random, compressible and mixed data, and compresses what is compressible", () => {
    for (const name of CODECS) {
      const codec = CompressionCodec[name];
      for (const data of [randomBytes(100_000, 1), compressibleText(300_000, 2), mixedBytes(200_000, 3), new Uint8Array(0)]) {
        expect(decompress(codec, compress(codec, data), LIMIT)).toEqual(data);
      }
      const textual = compressibleText(1 << 20, 4);
      expect([name, compress(codec, textual).length < textual.length / 2]).toEqual([name, true]);
    }
  });

  test("none is the identity", () => {
    const data = randomBytes(100, 5);
    expect(compress(CompressionCodec.none, data)).toBe(data);
    expect(decompress(CompressionCodec.none, data, LIMIT)).toBe(data);
  });

  test("every codec refuses output above maxBytes with a DecodeError, and accepts exactly maxBytes", () => {
    const data = compressibleText(200_000, 6);
    for (const name of CODECS) {
      const codec = CompressionCodec[name];
      const compressed = compress(codec, data);
      expect(decompress(codec, compressed, data.length)).toEqual(data);
      expect(() => decompress(codec, compressed, data.length - 1)).toThrow(DecodeError);
    }
  });

  test("every codec refuses garbage and truncated input with a DecodeError", () => {
    const data = compressibleText(50_000, 7);
    for (const name of CODECS) {
      const codec = CompressionCodec[name];
      const compressed = compress(codec, data);
      expect(() => decompress(codec, compressed.subarray(0, compressed.length - 3), LIMIT)).toThrow(DecodeError);
      expect(() => decompress(codec, randomBytes(1000, 8), LIMIT)).toThrow(DecodeError);
      expect(() => decompress(codec, new Uint8Array(0), LIMIT)).toThrow(DecodeError);
    }
  });

  test("gzip or zstd data cut anywhere is refused (node:zlib's zstd alone returns what it decoded so far)", () => {
    const data = mixedBytes(300_000, 9);
    for (const name of ["gzip", "zstd"] as const) {
      const codec = CompressionCodec[name];
      const compressed = compress(codec, data);
      for (let cut = 0; cut < compressed.length; cut += cut < 100 || compressed.length - cut < 100 ? 1 : 211) {
        expect(() => decompress(codec, compressed.subarray(0, cut), LIMIT)).toThrow(DecodeError);
      }
      // Two whole zstd (or gzip) frames in a row are one stream of both contents.
      const twice = new Uint8Array(compressed.length * 2);
      twice.set(compressed, 0);
      twice.set(compressed, compressed.length);
      expect(decompress(codec, twice, LIMIT).length).toBe(data.length * 2);
    }
  });

  test("gzip and zstd take a level: a faster one compresses less, every level round-trips", () => {
    const data = compressibleText(500_000, 10);
    const gzip = [1, 9, -1].map((level) => compress(CompressionCodec.gzip, data, level));
    expect(gzip[0]!.length).toBeGreaterThan(gzip[1]!.length);
    const zstd = [-5, 1, 3, 10].map((level) => compress(CompressionCodec.zstd, data, level));
    expect(zstd[0]!.length).toBeGreaterThan(zstd[2]!.length);
    for (const compressed of gzip) expect(decompress(CompressionCodec.gzip, compressed, LIMIT)).toEqual(data);
    for (const compressed of zstd) expect(decompress(CompressionCodec.zstd, compressed, LIMIT)).toEqual(data);
    // lz4 and snappy have one compressor each: the level changes nothing.
    expect(compress(CompressionCodec.lz4, data, 17)).toEqual(compress(CompressionCodec.lz4, data));
    expect(compress(CompressionCodec.snappy, data, 3)).toEqual(compress(CompressionCodec.snappy, data));
  });

  test("codec ids 5-7 do not exist", () => {
    for (const codec of [5, 6, 7]) {
      expect(() => decompress(codec, new Uint8Array(10), LIMIT)).toThrow(DecodeError);
      expect(() => compress(codec, new Uint8Array(10))).toThrow("does not exist");
    }
  });
});
