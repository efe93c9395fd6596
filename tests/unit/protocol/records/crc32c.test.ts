/**
 * CRC-32C (protocol/records/crc32c.ts): the TypeScript loop against the standard's check value, and the
 * hardware kernel (platform/crc32c-hardware.ts) against the loop on every length class, start and
 * continuation; where the machine can run the kernel, the kernel must be the one in use.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { loadHardwareCrc32c } from "../../../../src/platform/crc32c-hardware.ts";
import { crc32c, crc32cImplementation, crc32cSoftware, HARDWARE_MIN_BYTES } from "../../../../src/protocol/records/crc32c.ts";

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
  test("the check value of CRC-32C, and the empty input", () => {
    const check = new TextEncoder().encode("123456789");
    expect(crc32cSoftware(check)).toBe(0xe3069283);
    expect(crc32c(check)).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
  });

  test("a range and a continued checksum give the checksum of the whole", () => {
    const data = randomBytes(70_000, 3);
    expect(crc32c(data, 100, 60_000)).toBe(crc32cSoftware(data.slice(100, 60_000)));
    expect(crc32c(data, 30_000, data.length, crc32c(data, 0, 30_000))).toBe(crc32cSoftware(data));
    expect(crc32c(data, 5, 5 + 100, crc32c(data, 0, 5))).toBe(crc32cSoftware(data, 0, 105));
    expect(() => crc32c(data, 10, 5)).toThrow(RangeError);
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
    const script = `import { crc32cImplementation } from ${JSON.stringify(new URL("../../../../src/protocol/records/crc32c.ts", import.meta.url).pathname)};
console.log(JSON.stringify(crc32cImplementation()));`;
    const proc = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, BUNKA_CRC32C: "software" }, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual({ name: "software", reason: "BUNKA_CRC32C=software" });
  });
});
