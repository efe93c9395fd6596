/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of RecordBatch v2.
 *
 * It runs on every produced batch, on every batch that recovery scans and twice per batch the log cleaner
 * rebuilds, so it uses slicing-by-16: sixteen 256-entry tables let one loop iteration fold sixteen input
 * bytes with sixteen independent table lookups instead of sixteen dependent ones (a third faster than
 * slicing-by-8 here; the tables take 16 KiB). Bun has no native CRC-32C (Bun.hash.crc32 and zlib's crc32
 * are the IEEE polynomial), and the same loop in WebAssembly, which has no CRC instruction, ran no faster.
 *
 * Where the CPU has a CRC-32C instruction that bunka can reach (platform/crc32c-hardware.ts), inputs of
 * HARDWARE_MIN_BYTES or more go to it, about 7 times as fast on a batch of 16 KiB (scripts/bench-crc32c.ts);
 * shorter ones stay here, since below that the call itself costs about as much as the loop. The kernel is used only if it gives
 * this loop's answers on known inputs at load; `crc32cImplementation` says which one runs.
 */
import { loadHardwareCrc32c, type Crc32cKernel } from "../../platform/crc32c-hardware.ts";

const POLYNOMIAL_REFLECTED = 0x82f63b78;
const SLICES = 16;

/** TABLES[k * 256 + b] is the CRC contribution of byte b followed by k zero bytes. */
const TABLES: Int32Array = (() => {
  const tables = new Int32Array(SLICES * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? POLYNOMIAL_REFLECTED ^ (c >>> 1) : c >>> 1;
    tables[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = tables[n]!;
    for (let k = 1; k < SLICES; k++) {
      c = tables[c & 0xff]! ^ (c >>> 8);
      tables[k * 256 + n] = c;
    }
  }
  return tables;
})();

/**
 * CRC-32C of `data[start, end)` as an unsigned 32-bit number. Pass an earlier result as `previous` to
 * continue a checksum over data that arrives in pieces. Taking a range instead of a subarray avoids an
 * allocation per batch on the hot path.
 */
export function crc32c(data: Uint8Array, start = 0, end = data.length, previous = 0): number {
  if (start < 0 || end > data.length || start > end) {
    throw new RangeError(`crc32c range [${start}, ${end}) outside 0..${data.length}`);
  }
  if (hardware !== undefined && end - start >= HARDWARE_MIN_BYTES) {
    return hardware(start === 0 && end === data.length ? data : data.subarray(start, end), previous);
  }
  return crc32cSoftware(data, start, end, previous);
}

/** The TypeScript loop alone (the reference the hardware kernel is checked against). */
export function crc32cSoftware(data: Uint8Array, start = 0, end = data.length, previous = 0): number {
  const t = TABLES;
  let crc = ~previous | 0;
  let i = start;
  const end16 = start + ((end - start) & ~15);
  while (i < end16) {
    const a = crc ^ (data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24));
    const b = data[i + 4]! | (data[i + 5]! << 8) | (data[i + 6]! << 16) | (data[i + 7]! << 24);
    const c = data[i + 8]! | (data[i + 9]! << 8) | (data[i + 10]! << 16) | (data[i + 11]! << 24);
    crc =
      t[3840 + (a & 0xff)]! ^
      t[3584 + ((a >>> 8) & 0xff)]! ^
      t[3328 + ((a >>> 16) & 0xff)]! ^
      t[3072 + (a >>> 24)]! ^
      t[2816 + (b & 0xff)]! ^
      t[2560 + ((b >>> 8) & 0xff)]! ^
      t[2304 + ((b >>> 16) & 0xff)]! ^
      t[2048 + (b >>> 24)]! ^
      t[1792 + (c & 0xff)]! ^
      t[1536 + ((c >>> 8) & 0xff)]! ^
      t[1280 + ((c >>> 16) & 0xff)]! ^
      t[1024 + (c >>> 24)]! ^
      t[768 + data[i + 12]!]! ^
      t[512 + data[i + 13]!]! ^
      t[256 + data[i + 14]!]! ^
      t[data[i + 15]!]!;
    i += 16;
  }
  while (i < end) {
    crc = t[(crc ^ data[i]!) & 0xff]! ^ (crc >>> 8);
    i++;
  }
  return ~crc >>> 0;
}

/** Inputs at least this long go to the hardware kernel when there is one. */
export const HARDWARE_MIN_BYTES = 256;

/** The kernel if it agrees with the loop on inputs of every length class and continuation; else why not. */
function checkedHardware(): { kernel: Crc32cKernel } | { reason: string } {
  const loaded = loadHardwareCrc32c();
  if (!("kernel" in loaded)) return loaded;
  // The check value of CRC-32C ("123456789" -> 0xE3069283), then lengths around the kernel's 32- and 8-byte
  // steps, unaligned starts and a continued checksum.
  const check = new TextEncoder().encode("123456789");
  if (loaded.kernel(check, 0) !== 0xe3069283) return { reason: "it gave a wrong check value" };
  const data = new Uint8Array(4099);
  for (let i = 0; i < data.length; i++) data[i] = (i * 131 + 7) & 0xff;
  for (const [start, end] of [[0, 4099], [1, 4098], [3, 3 + 31], [5, 5 + 33], [0, 7], [0, 0], [17, 17 + 256]] as const) {
    const part = data.subarray(start, end);
    if (loaded.kernel(part, 0) !== crc32cSoftware(data, start, end)) return { reason: `it disagreed on bytes [${start}, ${end})` };
  }
  if (loaded.kernel(data.subarray(1000), loaded.kernel(data.subarray(0, 1000), 0)) !== crc32cSoftware(data)) {
    return { reason: "it disagreed on a continued checksum" };
  }
  return loaded;
}

const chosen = checkedHardware();
const hardware: Crc32cKernel | undefined = "kernel" in chosen ? chosen.kernel : undefined;

/** Which CRC-32C runs for long inputs, and why not the hardware one (for the start-up log line). */
export function crc32cImplementation(): { name: "sse4.2" | "software"; reason?: string } {
  return "kernel" in chosen ? { name: "sse4.2" } : { name: "software", reason: chosen.reason };
}
