/**
 * Snappy, as Kafka clients put it in a record batch (codec 2).
 *
 * Two framings reach a broker. Apache Kafka's Java client writes snappy-java's "xerial" stream: a 16-byte
 * header (the magic 0x82 "SNAPPY" 0, then big-endian int32 version and compatible version), then chunks,
 * each a big-endian int32 length followed by one raw snappy block that decodes on its own. librdkafka and
 * franz-go may write one raw snappy block instead. `snappyDecompress` reads both; `snappyCompress` writes
 * the xerial framing, which every Kafka client reads.
 *
 * A raw block is a little-endian base-128 varint of the uncompressed length, then elements whose tag
 * byte's low two bits say what follows: 00 a literal (length - 1 in the upper six bits, or in the next
 * 1-4 bytes when those say 60-63), 01 a copy of 4-11 bytes with an 11-bit offset, 10 a copy of 1-64 bytes
 * with a 16-bit offset, 11 the same with a 32-bit offset. Copies may overlap what they produce.
 *
 * The compressor is the classic snappy design: the input is cut into 64 KiB fragments, each fragment is
 * scanned with a hash table of the 4-byte sequences seen so far, and the scan skips ahead faster the
 * longer it goes without a match, so that incompressible data costs little.
 *
 * The element decoder and the fragment compressor run as WebAssembly kernels where they can (kernels.ts);
 * the functions here named Portable are their TypeScript twins, the reference they are tested against.
 *
 * Every length is checked before it is used. A block is refused before anything is allocated when its
 * declared length is above the caller's limit, or more than a snappy block could expand to at all (a
 * 3-byte element produces at most 64 bytes), so a few hostile bytes cannot claim gigabytes.
 */
import { DecodeError } from "../../errors/errors.ts";
import { snappyKernels, type SnappyKernels } from "./kernels.ts";
import type { DecompressScratch } from "./lz4.ts";

const XERIAL_MAGIC = [0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00] as const;
const XERIAL_HEADER_BYTES = 16;
/** snappy-java's version and minimum compatible version fields, as it writes them. */
const XERIAL_VERSION = 1;
const XERIAL_COMPATIBLE_VERSION = 1;
/** Chunk size of the xerial framing we write: one compressor fragment per chunk. */
const XERIAL_CHUNK_BYTES = 64 * 1024;

/** The compressor's fragment: offsets inside one always fit 16 bits. */
const FRAGMENT_BYTES = 64 * 1024;
/** Below this a fragment is one literal: the scan reads up to 15 bytes past a candidate. */
const INPUT_MARGIN_BYTES = 15;
const MAX_HASH_BITS = 14;
const MIN_HASH_BITS = 8;
const HASH_MULTIPLIER = 0x1e35a7bd;
/** A copy element produces at most 64 bytes from 3 bytes (copy with 16-bit offset): 64 / 3 < 22. */
const MAX_EXPANSION = 22;
/** Copies and literals shorter than this are moved byte by byte; longer ones with copyWithin / set. */
const BULK_COPY_BYTES = 16;
const NO_TABLE = new Uint16Array(0);
/** The largest block the kernel decodes (xerial chunks are 64 KiB; librdkafka's raw blocks are its batches). */
export const KERNEL_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

// ---- decoding -------------------------------------------------------------------------------------

function hasXerialHeader(data: Uint8Array): boolean {
  if (data.length < XERIAL_HEADER_BYTES) return false;
  for (let i = 0; i < XERIAL_MAGIC.length; i++) if (data[i] !== XERIAL_MAGIC[i]) return false;
  return true;
}

function readInt32BE(data: Uint8Array, at: number): number {
  return (data[at]! << 24) | (data[at + 1]! << 16) | (data[at + 2]! << 8) | data[at + 3]!;
}

/**
 * The uncompressed length a raw block declares, and where its elements start. The varint is at most five
 * bytes and below 2^32, as the format defines it.
 */
function blockHeader(src: Uint8Array, start: number, end: number): { length: number; at: number } {
  let length = 0;
  let at = start;
  for (let shift = 0; shift < 35; shift += 7) {
    if (at >= end) throw new DecodeError("snappy block ends inside its length");
    const b = src[at++]!;
    length += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) {
      if (length > 0xffffffff) throw new DecodeError("snappy block length above 2^32");
      return { length, at };
    }
  }
  throw new DecodeError("snappy block length varint longer than 5 bytes");
}

/** Refuses a declared length the caller does not allow or the block cannot produce. */
function checkDeclaredLength(length: number, compressedBytes: number, maxBytes: number): void {
  if (length > maxBytes) throw new DecodeError(`snappy data decompresses to ${length} bytes, more than the ${maxBytes} allowed`);
  if (length > compressedBytes * MAX_EXPANSION) {
    throw new DecodeError(`snappy block of ${compressedBytes} bytes declares ${length} bytes, more than it can hold`);
  }
}

function readLittleEndian(src: Uint8Array, at: number, bytes: number): number {
  let value = 0;
  for (let i = 0; i < bytes; i++) value += src[at + i]! * 2 ** (8 * i);
  return value;
}

/** The kernels in use; tests swap in null to run the portable twins through the framing code. */
let kernels: SnappyKernels | null = snappyKernels;

/** Runs the framing code on the kernels (the default) or on the TypeScript twins; for tests and benchmarks. */
export function useSnappyKernels(enabled: boolean): void {
  kernels = enabled ? snappyKernels : null;
}

/**
 * Decodes the elements of a raw block in `src[at, end)` into `out[o, o + length)`. Copies may reach back
 * to `o` (the block's own start) and no further. Throws DecodeError unless the elements produce exactly
 * `length` bytes and use up the input.
 */
function decodeElements(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, length: number): void {
  // The kernel says only that the elements are malformed; the twin says why (and throws). A block larger
  // than KERNEL_MAX_OUTPUT_BYTES goes to the twin: the kernel's memory never shrinks, and a raw block may
  // declare up to the caller's limit.
  if (kernels !== null && length <= KERNEL_MAX_OUTPUT_BYTES && kernels.decodeElements(src, at, end, out, o, length)) return;
  decodeElementsPortable(src, at, end, out, o, length);
}

/** decodeElements in TypeScript: the kernel's reference twin. */
export function decodeElementsPortable(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, length: number): void {
  const blockStart = o;
  const outEnd = o + length;
  while (at < end) {
    const tag = src[at++]!;
    const kind = tag & 3;
    if (kind === 0) {
      let n = tag >>> 2;
      if (n >= 60) {
        const extra = n - 59;
        if (at + extra > end) throw new DecodeError("snappy literal length truncated");
        n = readLittleEndian(src, at, extra);
        at += extra;
      }
      n += 1;
      if (n > end - at) throw new DecodeError(`snappy literal of ${n} bytes runs past the input`);
      if (n > outEnd - o) throw new DecodeError("snappy literal runs past the declared length");
      if (n < BULK_COPY_BYTES) {
        for (let i = 0; i < n; i++) out[o + i] = src[at + i]!;
      } else {
        out.set(src.subarray(at, at + n), o);
      }
      at += n;
      o += n;
      continue;
    }
    let n: number;
    let offset: number;
    if (kind === 1) {
      if (at >= end) throw new DecodeError("snappy copy truncated");
      n = ((tag >>> 2) & 7) + 4;
      offset = ((tag >>> 5) << 8) | src[at++]!;
    } else if (kind === 2) {
      if (at + 2 > end) throw new DecodeError("snappy copy truncated");
      n = (tag >>> 2) + 1;
      offset = src[at]! | (src[at + 1]! << 8);
      at += 2;
    } else {
      if (at + 4 > end) throw new DecodeError("snappy copy truncated");
      n = (tag >>> 2) + 1;
      offset = readLittleEndian(src, at, 4);
      at += 4;
    }
    if (offset === 0 || offset > o - blockStart) {
      throw new DecodeError(`bad snappy back-reference: offset ${offset} at ${o - blockStart} reaches before the block`);
    }
    if (n > outEnd - o) throw new DecodeError("snappy copy runs past the declared length");
    if (offset >= n && n >= BULK_COPY_BYTES) {
      out.copyWithin(o, o - offset, o - offset + n);
    } else {
      // Overlapping copies repeat the bytes they are producing, so they must go forwards byte by byte.
      for (let i = 0; i < n; i++) out[o + i] = out[o + i - offset]!;
    }
    o += n;
  }
  if (o !== outEnd) throw new DecodeError(`snappy block decoded to ${o - blockStart} bytes, its header says ${length}`);
}

/** Decodes one raw snappy block (no framing). */
export function snappyDecompressBlock(src: Uint8Array, maxBytes: number): Uint8Array {
  const { length, at } = blockHeader(src, 0, src.length);
  checkDeclaredLength(length, src.length, maxBytes);
  const out = new Uint8Array(length);
  decodeElements(src, at, src.length, out, 0, length);
  return out;
}

/**
 * Decodes snappy data as Kafka clients write it: xerial-framed when it starts with the xerial magic,
 * else one raw block. Throws DecodeError on corrupt input or when the result would exceed `maxBytes`.
 * With a scratch, xerial data is decoded into its buffer (lz4.ts, DecompressScratch).
 */
export function snappyDecompress(data: Uint8Array, maxBytes: number, scratch?: DecompressScratch): Uint8Array {
  if (!hasXerialHeader(data)) return snappyDecompressBlock(data, maxBytes);
  // First pass: every chunk's bounds and declared length, so the output is allocated once, at its size.
  const chunks: { start: number; end: number; at: number; length: number }[] = [];
  let total = 0;
  for (let at = XERIAL_HEADER_BYTES; at < data.length; ) {
    if (data.length - at < 4) throw new DecodeError("xerial snappy chunk length truncated");
    const size = readInt32BE(data, at);
    at += 4;
    if (size <= 0 || size > data.length - at) {
      throw new DecodeError(`xerial snappy chunk of ${size} bytes at ${at - 4}, ${data.length - at} bytes left`);
    }
    const header = blockHeader(data, at, at + size);
    checkDeclaredLength(header.length, size, maxBytes - total);
    chunks.push({ start: at, end: at + size, at: header.at, length: header.length });
    total += header.length;
    at += size;
  }
  let out: Uint8Array;
  if (scratch === undefined) out = new Uint8Array(total);
  else {
    // Every byte of [0, total) is written by the chunks' elements, or the data is refused.
    if (scratch.bytes.length < total) scratch.bytes = new Uint8Array(total);
    out = scratch.bytes.subarray(0, total);
  }
  let o = 0;
  for (const chunk of chunks) {
    decodeElements(data, chunk.at, chunk.end, out, o, chunk.length);
    o += chunk.length;
  }
  return out;
}

// ---- encoding -------------------------------------------------------------------------------------

/** Worst-case size of a raw block for `length` input bytes (the bound snappy's format guarantees). */
export function snappyMaxCompressedLength(length: number): number {
  return 32 + length + Math.floor(length / 6);
}

function load32(data: Uint8Array, at: number): number {
  return data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24);
}

function writeVarint(out: Uint8Array, o: number, value: number): number {
  while (value >= 0x80) {
    out[o++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  out[o++] = value;
  return o;
}

function emitLiteral(out: Uint8Array, o: number, src: Uint8Array, from: number, to: number): number {
  const n = to - from - 1;
  if (n < 60) {
    out[o++] = n << 2;
  } else if (n < 0x100) {
    out[o++] = 60 << 2;
    out[o++] = n;
  } else if (n < 0x10000) {
    out[o++] = 61 << 2;
    out[o++] = n & 0xff;
    out[o++] = n >>> 8;
  } else if (n < 0x1000000) {
    out[o++] = 62 << 2;
    out[o++] = n & 0xff;
    out[o++] = (n >>> 8) & 0xff;
    out[o++] = n >>> 16;
  } else {
    out[o++] = 63 << 2;
    out[o++] = n & 0xff;
    out[o++] = (n >>> 8) & 0xff;
    out[o++] = (n >>> 16) & 0xff;
    out[o++] = n >>> 24;
  }
  if (to - from < BULK_COPY_BYTES) {
    for (let i = from; i < to; i++) out[o++] = src[i]!;
    return o;
  }
  out.set(src.subarray(from, to), o);
  return o + (to - from);
}

function emitCopy2(out: Uint8Array, o: number, offset: number, length: number): number {
  out[o++] = ((length - 1) << 2) | 2;
  out[o++] = offset & 0xff;
  out[o++] = offset >>> 8;
  return o;
}

/** Emits a copy of `length` (>= 4) bytes from `offset` (< 65536) back, in as few elements as it takes. */
function emitCopy(out: Uint8Array, o: number, offset: number, length: number): number {
  // Whole 64-byte copies while more than 67 remain, so that what is left is never below 4.
  while (length >= 68) {
    o = emitCopy2(out, o, offset, 64);
    length -= 64;
  }
  if (length > 64) {
    o = emitCopy2(out, o, offset, 60);
    length -= 60;
  }
  if (length < 12 && offset < 2048) {
    out[o++] = ((offset >>> 8) << 5) | ((length - 4) << 2) | 1;
    out[o++] = offset & 0xff;
    return o;
  }
  return emitCopy2(out, o, offset, length);
}

/**
 * Compresses `src[start, end)` (at most one fragment) into `out` from `o`; returns the new end. `table`
 * (for the twin only; the kernel has its own) holds fragment-relative positions of 4-byte sequences by
 * hash and is cleared here for `bits` bits.
 */
function compressFragment(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number, table: Uint16Array): number {
  if (kernels !== null) return kernels.compressFragment(src, start, end, out, o);
  return compressFragmentPortable(src, start, end, out, o, table);
}

/** compressFragment in TypeScript: the kernel's reference twin. */
export function compressFragmentPortable(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number, table: Uint16Array): number {
  const length = end - start;
  let bits = MIN_HASH_BITS;
  while (bits < MAX_HASH_BITS && 1 << bits < length) bits++;
  const shift = 32 - bits;
  table.fill(0, 0, 1 << bits);
  let nextEmit = start;
  if (length >= INPUT_MARGIN_BYTES) {
    const ipLimit = end - INPUT_MARGIN_BYTES;
    let ip = start + 1;
    let nextHash = Math.imul(load32(src, ip), HASH_MULTIPLIER) >>> shift;
    scan: for (;;) {
      // Look for a 4-byte match, stepping further the longer none turns up (1 byte per probe for the
      // first 32 probes, then 2, ...), so that incompressible input is crossed quickly.
      let skip = 32;
      let nextIp = ip;
      let candidate: number;
      do {
        ip = nextIp;
        const hash = nextHash;
        nextIp = ip + (skip++ >>> 5);
        if (nextIp > ipLimit) break scan;
        nextHash = Math.imul(load32(src, nextIp), HASH_MULTIPLIER) >>> shift;
        candidate = start + table[hash]!;
        table[hash] = ip - start;
      } while (load32(src, ip) !== load32(src, candidate));

      o = emitLiteral(out, o, src, nextEmit, ip);
      // Emit copies for as long as the position right after one copy starts another match.
      let current: number;
      do {
        const base = ip;
        let matched = 4;
        while (ip + matched < end && src[candidate + matched] === src[ip + matched]) matched++;
        ip += matched;
        o = emitCopy(out, o, base - candidate, matched);
        nextEmit = ip;
        if (ip >= ipLimit) break scan;
        table[Math.imul(load32(src, ip - 1), HASH_MULTIPLIER) >>> shift] = ip - 1 - start;
        current = load32(src, ip);
        const hash = Math.imul(current, HASH_MULTIPLIER) >>> shift;
        candidate = start + table[hash]!;
        table[hash] = ip - start;
      } while (current === load32(src, candidate));
      ip++;
      nextHash = Math.imul(load32(src, ip), HASH_MULTIPLIER) >>> shift;
    }
  }
  if (nextEmit < end) o = emitLiteral(out, o, src, nextEmit, end);
  return o;
}

/** Compresses `src[start, end)` into one raw block written to `out` from `o`; returns the new end. */
function compressBlockInto(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number, table: Uint16Array): number {
  o = writeVarint(out, o, end - start);
  for (let at = start; at < end; at += FRAGMENT_BYTES) {
    o = compressFragment(src, at, Math.min(at + FRAGMENT_BYTES, end), out, o, table);
  }
  return o;
}

/** One raw snappy block (no framing), as librdkafka and franz-go write it. */
export function snappyCompressBlock(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(snappyMaxCompressedLength(data.length));
  // Only the portable twin uses a table; the kernel has its own.
  const table = kernels === null ? new Uint16Array(1 << MAX_HASH_BITS) : NO_TABLE;
  return out.subarray(0, compressBlockInto(data, 0, data.length, out, 0, table));
}

/** Snappy in the xerial framing of snappy-java, as Apache Kafka's Java client writes it. */
export function snappyCompress(data: Uint8Array): Uint8Array {
  const chunks = Math.ceil(data.length / XERIAL_CHUNK_BYTES);
  const out = new Uint8Array(
    XERIAL_HEADER_BYTES + chunks * (4 + snappyMaxCompressedLength(Math.min(XERIAL_CHUNK_BYTES, data.length))),
  );
  out.set(XERIAL_MAGIC, 0);
  writeInt32BE(out, 8, XERIAL_VERSION);
  writeInt32BE(out, 12, XERIAL_COMPATIBLE_VERSION);
  // Only the portable twin uses a table; the kernel has its own.
  const table = kernels === null ? new Uint16Array(1 << MAX_HASH_BITS) : NO_TABLE;
  let o = XERIAL_HEADER_BYTES;
  for (let at = 0; at < data.length; at += XERIAL_CHUNK_BYTES) {
    const blockStart = o + 4;
    const blockEnd = compressBlockInto(data, at, Math.min(at + XERIAL_CHUNK_BYTES, data.length), out, blockStart, table);
    writeInt32BE(out, o, blockEnd - blockStart);
    o = blockEnd;
  }
  return out.subarray(0, o);
}

function writeInt32BE(out: Uint8Array, at: number, value: number): void {
  out[at] = value >>> 24;
  out[at + 1] = (value >>> 16) & 0xff;
  out[at + 2] = (value >>> 8) & 0xff;
  out[at + 3] = value & 0xff;
}
