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

  test("agrees with a bit-at-a-time reference over every byte value and odd lengths", () => {
    const reference = (data: Uint8Array) => {
      let crc = 0xffffffff;
      for (const byte of data) {
        crc ^= byte;
        for (let k = 0; k < 8; k++) crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1;
      }
      return ~crc >>> 0;
    };
    const data = new Uint8Array(1021).map((_, i) => (i * 31 + 7) & 0xff);
    for (const length of [1, 7, 8, 255, 256, 1021]) expect(crc32(data.subarray(0, length))).toBe(reference(data.subarray(0, length)));
  });
});
