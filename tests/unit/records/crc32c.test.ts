/**
 * CRC-32C (protocol/records/crc32c.ts): the loop against the standard's vectors and a bitwise reference, and
 * the hardware kernel (platform/crc32c-hardware.ts) against the loop on every length class, start and
 * continuation; where the machine can run the kernel, the kernel must be the one in use.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { loadHardwareCrc32c } from "../../../src/platform/crc32c-hardware.ts";
import { crc32c, crc32cImplementation, crc32cSoftware, HARDWARE_MIN_BYTES } from "../../../src/protocol/records/crc32c.ts";

/** Bit-at-a-time reference, independent of the table-driven implementation. */
function crc32cReference(data: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const canRunHardware =
  process.platform === "linux" &&
  process.arch === "x64" &&
  process.env.BUNKA_CRC32C !== "software" &&
  /^flags\s*:.*\bsse4_2\b/m.test(readFileSync("/proc/cpuinfo", "utf8"));

function randomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
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
    // Long ranges (the hardware kernel's), continued from a short one (the loop's) and the other way.
    const long = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 7 + 3) & 0xff);
    expect(crc32c(long, 100, 60_000)).toBe(crc32cSoftware(long.slice(100, 60_000)));
    expect(crc32c(long, 30_000, long.length, crc32c(long, 0, 30_000))).toBe(crc32cSoftware(long));
    expect(crc32c(long, 5, 5 + 100, crc32c(long, 0, 5))).toBe(crc32cSoftware(long, 0, 105));
    expect(() => crc32c(long, 10, 5)).toThrow(RangeError);
  });

  test("rejects a range outside the buffer", () => {
    expect(() => crc32c(new Uint8Array(4), 0, 5)).toThrow(RangeError);
  });

  test("lengths around the hardware threshold match the bitwise reference", () => {
    const data = Uint8Array.from({ length: 700 }, (_, i) => (i * 151 + 7) & 0xff);
    for (let length = HARDWARE_MIN_BYTES - 40; length <= HARDWARE_MIN_BYTES + 300; length++) {
      expect(crc32c(data, 3, 3 + length)).toBe(crc32cReference(data.subarray(3, 3 + length)));
    }
  });

  test.skipIf(!canRunHardware)("on linux-x64 with SSE 4.2 the hardware kernel is in use", () => {
    expect(crc32cImplementation()).toEqual({ name: "sse4.2" });
  });

  test.skipIf(!canRunHardware)("the hardware kernel gives the loop's answer for every length to 600 and long inputs", () => {
    const loaded = loadHardwareCrc32c();
    if (!("kernel" in loaded)) throw new Error(`no kernel: ${loaded.reason}`);
    const data = randomBytes(1 << 20, 11);
    for (let length = 0; length <= 600; length++) {
      for (const start of [0, 1, 7]) {
        expect(loaded.kernel(data.subarray(start, start + length), 0)).toBe(crc32cSoftware(data, start, start + length));
      }
    }
    for (const length of [4095, 16_384, 65_537, 1 << 20]) expect(loaded.kernel(data.subarray(0, length), 0)).toBe(crc32cSoftware(data, 0, length));
    // Continued from an arbitrary earlier value.
    expect(loaded.kernel(data.subarray(500, 9000), 0x12345678)).toBe(crc32cSoftware(data, 500, 9000, 0x12345678));
    // ... and from one of 2^31 or more (bun:ffi once mangled such u32 arguments).
    expect(loaded.kernel(data.subarray(500, 9000), 0xfedcba98)).toBe(crc32cSoftware(data, 500, 9000, 0xfedcba98));
    // Through crc32c: long inputs take the kernel, short ones the loop, both the same answers.
    expect(crc32c(data, 3, 3 + HARDWARE_MIN_BYTES)).toBe(crc32cSoftware(data, 3, 3 + HARDWARE_MIN_BYTES));
    expect(crc32c(data, 3, 3 + HARDWARE_MIN_BYTES - 1)).toBe(crc32cSoftware(data, 3, 3 + HARDWARE_MIN_BYTES - 1));
  });

  test("BUNKA_CRC32C=software keeps the TypeScript loop, and says so", async () => {
    const script = `import { crc32cImplementation } from ${JSON.stringify(new URL("../../../src/protocol/records/crc32c.ts", import.meta.url).pathname)};
console.log(JSON.stringify(crc32cImplementation()));`;
    const proc = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, BUNKA_CRC32C: "software" }, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual({ name: "software", reason: "BUNKA_CRC32C=software" });
  });
});
