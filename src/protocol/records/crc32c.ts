/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of RecordBatch v2.
 *
 * It runs on every produced batch and on every batch that recovery scans, so it uses slicing-by-8:
 * eight 256-entry tables let one loop iteration fold eight input bytes with eight independent table
 * lookups instead of eight dependent ones. Bun has no native CRC-32C (Bun.hash.crc32 and zlib's crc32
 * are the IEEE polynomial), so this is the fastest portable option.
 */

const POLYNOMIAL_REFLECTED = 0x82f63b78;

/** TABLES[k * 256 + b] is the CRC contribution of byte b followed by k zero bytes. */
const TABLES: Uint32Array = (() => {
  const tables = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? POLYNOMIAL_REFLECTED ^ (c >>> 1) : c >>> 1;
    tables[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = tables[n]!;
    for (let k = 1; k < 8; k++) {
      c = tables[c & 0xff]! ^ (c >>> 8);
      tables[k * 256 + n] = c >>> 0;
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
  const t = TABLES;
  let crc = ~previous | 0;
  let i = start;
  const end8 = start + ((end - start) & ~7);
  while (i < end8) {
    const lo = crc ^ (data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24));
    crc =
      t[1792 + (lo & 0xff)]! ^
      t[1536 + ((lo >>> 8) & 0xff)]! ^
      t[1280 + ((lo >>> 16) & 0xff)]! ^
      t[1024 + (lo >>> 24)]! ^
      t[768 + data[i + 4]!]! ^
      t[512 + data[i + 5]!]! ^
      t[256 + data[i + 6]!]! ^
      t[data[i + 7]!]!;
    i += 8;
  }
  while (i < end) {
    crc = t[(crc ^ data[i]!) & 0xff]! ^ (crc >>> 8);
    i++;
  }
  return ~crc >>> 0;
}
