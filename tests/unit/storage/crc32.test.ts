import { describe, expect, test } from "bun:test";
import { crc32 } from "../../../src/storage/crc32.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("crc32 (IEEE)", () => {
  test("matches the standard check value", () => {
    expect(crc32(bytes("123456789"))).toBe(0xcbf43926);
  });

  test("matches known vectors", () => {
    expect(crc32(new Uint8Array(0))).toBe(0);
    expect(crc32(bytes("a"))).toBe(0xe8b7be43);
    expect(crc32(bytes("The quick brown fox jumps over the lazy dog"))).toBe(0x414fa339);
  });

  test("can be computed over pieces", () => {
    const whole = crc32(bytes("hello, world"));
    expect(crc32(bytes(", world"), crc32(bytes("hello")))).toBe(whole);
  });

  test("agrees with Bun's zlib crc32", () => {
    const data = new Uint8Array(1000).map((_, i) => (i * 31 + 7) & 0xff);
    expect(crc32(data)).toBe(Bun.hash.crc32(data));
  });
});
