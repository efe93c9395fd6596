import { describe, expect, test } from "bun:test";
import { crc32c } from "../../../src/protocol/records/crc32c.ts";

/** Bit-at-a-time reference, independent of the table-driven implementation. */
function crc32cReference(data: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

describe("crc32c", () => {
  test("check value of the Castagnoli polynomial", () => {
    expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
  });

  test("RFC 3720 (iSCSI) appendix B.4 vectors", () => {
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c);
  });

  test("empty input is 0", () => {
    expect(crc32c(new Uint8Array(0))).toBe(0);
  });

  test("matches the bitwise reference for every length 0..100 and odd alignments", () => {
    const data = Uint8Array.from({ length: 200 }, (_, i) => (i * 151 + 7) & 0xff);
    for (let start = 0; start < 9; start++) {
      for (let length = 0; length <= 100; length++) {
        expect(crc32c(data, start, start + length)).toBe(crc32cReference(data.subarray(start, start + length)));
      }
    }
  });

  test("a range equals the checksum of the subarray, and chunks can be continued", () => {
    const data = Uint8Array.from({ length: 1000 }, (_, i) => (i * 31) & 0xff);
    const whole = crc32c(data, 21, 1000);
    expect(whole).toBe(crc32c(data.subarray(21)));
    expect(crc32c(data, 500, 1000, crc32c(data, 21, 500))).toBe(whole);
  });

  test("rejects a range outside the buffer", () => {
    expect(() => crc32c(new Uint8Array(4), 0, 5)).toThrow(RangeError);
  });
});
