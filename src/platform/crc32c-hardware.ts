/**
 * CRC-32C with the CPU's own instruction (SSE 4.2 `crc32`), compiled at start by the C compiler built into
 * Bun (bun:ffi `cc`, TinyCC) and called through bun:ffi.
 *
 * Why: the checksum runs on every produced batch, on every batch recovery scans or the cleaner reads, and
 * on every batch the cleaner rebuilds; on a 16 KiB batch the instruction, even from TinyCC's plain code,
 * is about 7 times as fast as the TypeScript loop (slicing-by-16, protocol/records/crc32c.ts;
 * scripts/bench-crc32c.ts, docs/architecture.md "Codecs and kernels"). Neither JavaScript nor WebAssembly can reach the instruction.
 * A call costs about 0.1 µs, so short inputs stay in TypeScript (protocol/records/crc32c.ts decides).
 *
 * Only where it is known to be safe: Linux on x86-64 whose /proc/cpuinfo lists `sse4_2` (an illegal
 * instruction would kill the process, so nothing is guessed). Anything else, a failure to compile (no
 * writable temporary directory, a Bun without `cc`), or `BUNKA_CRC32C=software` leaves the TypeScript
 * code in use. The caller checks the result against its own on known inputs before trusting it.
 * TinyCC's assembler does not know the `crc32` mnemonic, so the instructions are spelled as bytes.
 */
import { cc } from "bun:ffi";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** CRC-32C of `data` continued from `previous` (0 to start), unsigned. */
export type Crc32cKernel = (data: Uint8Array, previous: number) => number;

/** No headers: a machine without C headers can still compile it. */
const SOURCE = `
unsigned int crc32c_sse42(const unsigned char *p, unsigned long long n, int previous) {
  unsigned long long c = (unsigned int)~(unsigned int)previous;
  while (n >= 32) {
    /* crc32q (%rsi),%rax; crc32q 8(%rsi),%rax; crc32q 16(%rsi),%rax; crc32q 24(%rsi),%rax */
    __asm__(".byte 0xf2,0x48,0x0f,0x38,0xf1,0x06\\n"
            ".byte 0xf2,0x48,0x0f,0x38,0xf1,0x46,0x08\\n"
            ".byte 0xf2,0x48,0x0f,0x38,0xf1,0x46,0x10\\n"
            ".byte 0xf2,0x48,0x0f,0x38,0xf1,0x46,0x18\\n" : "+a"(c) : "S"(p) : "memory");
    p += 32;
    n -= 32;
  }
  while (n >= 8) {
    /* crc32q (%rsi),%rax */
    __asm__(".byte 0xf2,0x48,0x0f,0x38,0xf1,0x06" : "+a"(c) : "S"(p) : "memory");
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    /* crc32b (%rsi),%eax */
    __asm__(".byte 0xf2,0x0f,0x38,0xf0,0x06" : "+a"(c) : "S"(p) : "memory");
    p += 1;
    n -= 1;
  }
  return ~(unsigned int)c;
}
`;

function cpuHasSse42(): boolean {
  try {
    const flags = readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m)?.[1] ?? "";
    return flags.split(/\s+/).includes("sse4_2");
  } catch {
    return false;
  }
}

/** The hardware kernel, or why there is none. */
export function loadHardwareCrc32c(): { kernel: Crc32cKernel } | { reason: string } {
  if (process.env.BUNKA_CRC32C === "software") return { reason: "BUNKA_CRC32C=software" };
  if (process.platform !== "linux" || process.arch !== "x64") return { reason: `not on linux-x64 (${process.platform}-${process.arch})` };
  if (!cpuHasSse42()) return { reason: "the CPU does not list sse4_2" };
  let dir: string | undefined;
  try {
    // TinyCC reads its source from a file, and a compiled binary's embedded files are not files it can open.
    dir = mkdtempSync(join(tmpdir(), "bunka-crc32c-"));
    const path = join(dir, "crc32c.c");
    writeFileSync(path, SOURCE);
    // The checksum goes in as an int32: bun:ffi mangled u32 arguments of 2^31 and above.
    const lib = cc({ source: path, symbols: { crc32c_sse42: { args: ["ptr", "u64", "i32"], returns: "u32" } } });
    const native = lib.symbols.crc32c_sse42;
    return { kernel: (data, previous) => native(data, data.byteLength, previous | 0) >>> 0 };
  } catch (error) {
    return { reason: `could not compile it: ${String((error as Error)?.message ?? error).split("\n")[0]}` };
  } finally {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}
