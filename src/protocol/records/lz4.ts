/**
 * LZ4, as Kafka puts it in a record batch (codec 3): the LZ4 frame format, version 1.
 *
 * A frame is the magic 0x184D2204 (little-endian), a descriptor (FLG: version 01, block independence,
 * block checksum, content size, content checksum, dictionary id; BD: the maximum block size, 64 KiB to
 * 4 MiB), one header-checksum byte ((XXH32 of the descriptor >> 8) & 0xFF), then blocks, each a
 * little-endian uint32 size whose high bit means "stored uncompressed", the block, and its XXH32 when
 * FLG asks for block checksums; a zero size ends the frame, followed by the XXH32 of the whole content
 * when FLG asks for it. The decoder reads every combination of those flags, linked blocks included,
 * frames one after another and skippable frames; it refuses dictionary ids (no Kafka client sets one,
 * and no dictionary could be supplied). The encoder writes what Apache Kafka's Java client writes:
 * independent 64 KiB blocks, no checksums, no content size.
 *
 * A block is a sequence of sequences: a token (literal length in the high four bits, match length - 4
 * in the low four, 15 meaning "more bytes follow, each adding up to 255"), the literals, a little-endian
 * 16-bit offset back into the output, and the match, which may overlap what it produces. The last
 * sequence has literals only. The compressor looks 4-byte sequences up in a hash table, skips ahead
 * faster the longer it finds no match, and keeps the format's end rules (the last 5 bytes are literals,
 * no match starts in the last 12).
 *
 * Output is bounded before it is produced: by the caller's `maxBytes`, by the block size the frame
 * declares, and by what the input could expand to at all (one input byte adds at most 255 output
 * bytes), so a hostile frame cannot make us allocate more than its own size allows.
 *
 * The block decoder and compressor run as WebAssembly kernels where they can (kernels.ts); the
 * TypeScript functions here (`...Portable`) are their reference twins, with the same results for every
 * input, and run where the kernels cannot.
 */
import { DecodeError } from "../../errors/errors.ts";
import { KERNEL_MALFORMED, lz4Kernels, type Lz4Kernels } from "./kernels.ts";
import { xxhash32 } from "./xxhash32.ts";

const FRAME_MAGIC = 0x184d2204;
/** Skippable frames have magics 0x184D2A50..0x184D2A5F. */
const SKIPPABLE_MAGIC_BASE = 0x184d2a50;
const SKIPPABLE_MAGIC_MASK = 0xfffffff0;
const UNCOMPRESSED_BIT = 0x80000000;

const FLG_VERSION_MASK = 0xc0;
const FLG_VERSION_1 = 0x40;
const FLG_BLOCK_INDEPENDENCE = 0x20;
const FLG_BLOCK_CHECKSUM = 0x10;
const FLG_CONTENT_SIZE = 0x08;
const FLG_CONTENT_CHECKSUM = 0x04;
const FLG_RESERVED = 0x02;
const FLG_DICTIONARY_ID = 0x01;
const BD_BLOCK_SIZE_MASK = 0x70;
const BD_RESERVED = 0x8f;

/** The block size we write, as Kafka's Java client does (BD value 4). */
const BLOCK_BYTES = 64 * 1024;
const BD_64KB = 4 << 4;

/** The format's end rules: the last 5 bytes are literals, and a match starts at least 12 bytes before the end. */
const LAST_LITERALS = 5;
const MATCH_FIND_LIMIT = 12;
const MIN_MATCH = 4;
const MAX_OFFSET = 65535;
const HASH_BITS = 14;
const HASH_MULTIPLIER = 0x9e3779b1 | 0;
/** After 2^6 probes without a match the step grows by one byte. */
const SKIP_TRIGGER = 6;
/** Each input byte of a block can at most add 255 bytes of output (a length-extension byte). */
const MAX_EXPANSION = 255;
const BULK_COPY_BYTES = 16;
const NO_TABLE = new Uint16Array(0);

function readUint32LE(data: Uint8Array, at: number): number {
  return (data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24)) >>> 0;
}

function writeUint32LE(data: Uint8Array, at: number, value: number): void {
  data[at] = value & 0xff;
  data[at + 1] = (value >>> 8) & 0xff;
  data[at + 2] = (value >>> 16) & 0xff;
  data[at + 3] = value >>> 24;
}

// ---- block decoding -------------------------------------------------------------------------------

/** What lz4DecodeBlock returns when the block would produce more than `outLimit` allows. */
export const LZ4_OUTPUT_LIMIT = -1;

/** The kernels in use; tests swap in null to run the portable twins through the frame code. */
let kernels: Lz4Kernels | null = lz4Kernels;

/** Runs the frame code on the kernels (the default) or on the TypeScript twins; for tests and benchmarks. */
export function useLz4Kernels(enabled: boolean): void {
  kernels = enabled ? lz4Kernels : null;
}

/**
 * Decodes the LZ4 block `src[at, end)` into `out` from `o`, producing at most up to `outLimit`; matches
 * may reach back to `windowStart` and no further. Returns the new end of the output, or LZ4_OUTPUT_LIMIT
 * when the block needs more room (the caller knows whether that means corrupt or too large). Throws
 * DecodeError for a malformed block.
 */
export function lz4DecodeBlock(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, outLimit: number, windowStart: number): number {
  if (kernels === null) return lz4DecodeBlockPortable(src, at, end, out, o, outLimit, windowStart);
  const result = kernels.decodeBlock(src, at, end, out, o, outLimit, windowStart);
  // The kernel says only that the block is malformed; the twin says why (and throws).
  if (result === KERNEL_MALFORMED) return lz4DecodeBlockPortable(src, at, end, out, o, outLimit, windowStart);
  return result;
}

/** lz4DecodeBlock in TypeScript: the kernel's reference twin. */
export function lz4DecodeBlockPortable(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, outLimit: number, windowStart: number): number {
  for (;;) {
    if (at >= end) throw new DecodeError("lz4 block ends inside a sequence");
    const token = src[at++]!;
    let literals = token >>> 4;
    if (literals === 15) {
      for (;;) {
        if (at >= end) throw new DecodeError("lz4 literal length truncated");
        const b = src[at++]!;
        literals += b;
        if (b !== 255) break;
      }
    }
    if (literals > end - at) throw new DecodeError(`lz4 literals of ${literals} bytes run past the block`);
    if (literals > outLimit - o) return LZ4_OUTPUT_LIMIT;
    if (literals < BULK_COPY_BYTES) {
      for (let i = 0; i < literals; i++) out[o + i] = src[at + i]!;
    } else {
      out.set(src.subarray(at, at + literals), o);
    }
    at += literals;
    o += literals;
    // The last sequence of a block is literals only.
    if (at === end) return o;
    if (end - at < 2) throw new DecodeError("lz4 match offset truncated");
    const offset = src[at]! | (src[at + 1]! << 8);
    at += 2;
    if (offset === 0 || offset > o - windowStart) throw new DecodeError(`lz4 match offset ${offset} reaches before the window`);
    let length = token & 15;
    if (length === 15) {
      for (;;) {
        if (at >= end) throw new DecodeError("lz4 match length truncated");
        const b = src[at++]!;
        length += b;
        if (b !== 255) break;
      }
    }
    length += MIN_MATCH;
    if (length > outLimit - o) return LZ4_OUTPUT_LIMIT;
    if (offset >= length && length >= BULK_COPY_BYTES) {
      out.copyWithin(o, o - offset, o - offset + length);
    } else {
      // An overlapping match repeats the bytes it is producing, so it must go forwards byte by byte.
      for (let i = 0; i < length; i++) out[o + i] = out[o + i - offset]!;
    }
    o += length;
  }
}

// ---- frame decoding -------------------------------------------------------------------------------

/**
 * A Uint8Array of `length` bytes whose contents are not zeroed first: for outputs the codec writes in full
 * before anyone reads them (only `[0, length)` of an Output is ever handed out). Zeroing a fresh buffer
 * of four times the input took an eighth of the log cleaner's lz4 pass.
 */
function unzeroed(length: number): Uint8Array {
  const buffer = Buffer.allocUnsafeSlow(length);
  return new Uint8Array(buffer.buffer, buffer.byteOffset, length);
}

/**
 * A buffer that one caller decompresses into again and again (the log cleaner's record walk): a result
 * decoded into it is a view of `bytes`, valid until the next call given the same scratch. It keeps the
 * largest buffer a call needed, so that a pass allocates once instead of once per batch (allocating the
 * output of every batch took a tenth of an lz4 cleaning pass).
 */
export interface DecompressScratch {
  bytes: Uint8Array;
}

export function newDecompressScratch(): DecompressScratch {
  return { bytes: new Uint8Array(0) };
}

/** A growable output bounded by maxBytes, in the scratch's buffer when there is one. */
class Output {
  bytes: Uint8Array;
  length = 0;
  constructor(
    initial: number,
    readonly maxBytes: number,
    private readonly scratch?: DecompressScratch,
  ) {
    const size = Math.min(initial, maxBytes);
    if (scratch === undefined) this.bytes = unzeroed(size);
    else {
      if (scratch.bytes.length < size) scratch.bytes = unzeroed(size);
      this.bytes = scratch.bytes;
    }
  }
  /** Makes room for `extra` more bytes (the caller has bounded `extra` by maxBytes). */
  reserve(extra: number): void {
    const needed = this.length + extra;
    if (needed <= this.bytes.length) return;
    const grown = unzeroed(Math.min(this.maxBytes, Math.max(needed, this.bytes.length * 2)));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    if (this.scratch !== undefined) this.scratch.bytes = grown;
  }
}

/**
 * Decodes one frame starting at `at` (its magic already checked) into `output`; returns the position
 * after the frame.
 */
function decodeFrame(data: Uint8Array, at: number, output: Output): number {
  const descriptorStart = at + 4;
  if (data.length - descriptorStart < 3) throw new DecodeError("lz4 frame descriptor truncated");
  const flg = data[descriptorStart]!;
  const bd = data[descriptorStart + 1]!;
  if ((flg & FLG_VERSION_MASK) !== FLG_VERSION_1) throw new DecodeError(`lz4 frame version ${flg >>> 6} is not 1`);
  if ((flg & FLG_RESERVED) !== 0 || (bd & BD_RESERVED) !== 0) throw new DecodeError("lz4 frame descriptor has reserved bits set");
  if ((flg & FLG_DICTIONARY_ID) !== 0) throw new DecodeError("lz4 frame needs a dictionary, which Kafka never uses");
  const blockSizeId = (bd & BD_BLOCK_SIZE_MASK) >>> 4;
  if (blockSizeId < 4) throw new DecodeError(`lz4 frame block size id ${blockSizeId} is not 4-7`);
  const maxBlockBytes = 1 << (2 * blockSizeId + 8);
  let p = descriptorStart + 2;
  let contentSize = -1;
  if ((flg & FLG_CONTENT_SIZE) !== 0) {
    if (data.length - p < 9) throw new DecodeError("lz4 frame content size truncated");
    const high = readUint32LE(data, p + 4);
    contentSize = readUint32LE(data, p) + high * 4294967296;
    if (contentSize > output.maxBytes - output.length) {
      throw new DecodeError(`lz4 frame declares ${contentSize} bytes, more than the ${output.maxBytes} allowed`);
    }
    p += 8;
  }
  const headerChecksum = (xxhash32(data, descriptorStart, p) >>> 8) & 0xff;
  if (data[p] !== headerChecksum) throw new DecodeError("lz4 frame descriptor checksum mismatch");
  p++;

  const independent = (flg & FLG_BLOCK_INDEPENDENCE) !== 0;
  const blockChecksums = (flg & FLG_BLOCK_CHECKSUM) !== 0;
  const frameStart = output.length;
  if (contentSize >= 0) output.reserve(contentSize);
  for (;;) {
    if (data.length - p < 4) throw new DecodeError("lz4 block size truncated");
    const word = readUint32LE(data, p);
    p += 4;
    if (word === 0) break;
    const stored = (word & UNCOMPRESSED_BIT) !== 0;
    const size = word & ~UNCOMPRESSED_BIT;
    if (size > maxBlockBytes) throw new DecodeError(`lz4 block of ${size} bytes, the frame allows ${maxBlockBytes}`);
    if (size > data.length - p) throw new DecodeError(`lz4 block of ${size} bytes runs past the input`);
    if (blockChecksums) {
      if (data.length - p - size < 4) throw new DecodeError("lz4 block checksum truncated");
      if (xxhash32(data, p, p + size) !== readUint32LE(data, p + size)) throw new DecodeError("lz4 block checksum mismatch");
    }
    const room = output.maxBytes - output.length;
    if (stored) {
      if (size > room) throw new DecodeError(`lz4 data decompresses to more than the ${output.maxBytes} bytes allowed`);
      output.reserve(size);
      output.bytes.set(data.subarray(p, p + size), output.length);
      output.length += size;
    } else {
      const limit = Math.min(maxBlockBytes, room, size * MAX_EXPANSION);
      output.reserve(limit);
      const blockStart = output.length;
      const decodedEnd = lz4DecodeBlock(data, p, p + size, output.bytes, blockStart, blockStart + limit, independent ? blockStart : frameStart);
      if (decodedEnd === LZ4_OUTPUT_LIMIT) {
        // Past what maxBytes leaves, the data is too large; past the block size or what the block's
        // bytes could expand to, it is corrupt.
        if (limit === room) throw new DecodeError(`lz4 data decompresses to more than the ${output.maxBytes} bytes allowed`);
        throw new DecodeError(`lz4 block decodes to more than ${limit} bytes`);
      }
      output.length = decodedEnd;
    }
    p += size + (blockChecksums ? 4 : 0);
  }
  if (contentSize >= 0 && output.length - frameStart !== contentSize) {
    throw new DecodeError(`lz4 frame decoded to ${output.length - frameStart} bytes, its header says ${contentSize}`);
  }
  if ((flg & FLG_CONTENT_CHECKSUM) !== 0) {
    if (data.length - p < 4) throw new DecodeError("lz4 content checksum truncated");
    if (xxhash32(output.bytes, frameStart, output.length) !== readUint32LE(data, p)) {
      throw new DecodeError("lz4 content checksum mismatch");
    }
    p += 4;
  }
  return p;
}

/**
 * Decodes LZ4 frame data (one frame or several in a row, skippable frames skipped). Throws DecodeError
 * on corrupt input, bytes after the last frame, or a result above `maxBytes`. With a scratch, the result
 * is a view of the scratch's buffer (DecompressScratch).
 */
export function lz4Decompress(data: Uint8Array, maxBytes: number, scratch?: DecompressScratch): Uint8Array {
  // A guess that fits typical batches without regrowing; a frame that declares its size reserves exactly.
  const output = new Output(Math.max(BLOCK_BYTES, data.length * 4), maxBytes, scratch);
  let at = 0;
  do {
    if (data.length - at < 4) throw new DecodeError("lz4 frame magic truncated");
    const magic = readUint32LE(data, at);
    if (magic === FRAME_MAGIC) {
      at = decodeFrame(data, at, output);
    } else if (((magic & SKIPPABLE_MAGIC_MASK) >>> 0) === SKIPPABLE_MAGIC_BASE) {
      if (data.length - at < 8) throw new DecodeError("lz4 skippable frame truncated");
      const size = readUint32LE(data, at + 4);
      if (size > data.length - at - 8) throw new DecodeError("lz4 skippable frame runs past the input");
      at += 8 + size;
    } else {
      throw new DecodeError(`lz4 frame magic 0x${magic.toString(16)} at ${at} is not 0x184d2204`);
    }
  } while (at < data.length);
  return output.bytes.subarray(0, output.length);
}

// ---- block encoding -------------------------------------------------------------------------------

/** Worst-case size of one compressed block of `length` bytes (all literals plus their length bytes). */
export function lz4MaxCompressedLength(length: number): number {
  return length + Math.floor(length / 255) + 16;
}

function load32(data: Uint8Array, at: number): number {
  return data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24);
}

function hash(value: number): number {
  return Math.imul(value, HASH_MULTIPLIER) >>> (32 - HASH_BITS);
}

/** Writes a length's extension bytes (the part at or above 15). */
function writeLengthExtension(out: Uint8Array, o: number, rest: number): number {
  while (rest >= 255) {
    out[o++] = 255;
    rest -= 255;
  }
  out[o++] = rest;
  return o;
}

/** Writes one sequence: the literals `src[from, to)`, then (when matchLength > 0) the match. */
function writeSequence(out: Uint8Array, o: number, src: Uint8Array, from: number, to: number, offset: number, matchLength: number): number {
  const literals = to - from;
  const tokenAt = o++;
  let token = literals >= 15 ? 0xf0 : literals << 4;
  if (literals >= 15) o = writeLengthExtension(out, o, literals - 15);
  if (literals < BULK_COPY_BYTES) {
    for (let i = from; i < to; i++) out[o++] = src[i]!;
  } else {
    out.set(src.subarray(from, to), o);
    o += literals;
  }
  if (matchLength > 0) {
    out[o++] = offset & 0xff;
    out[o++] = offset >>> 8;
    const rest = matchLength - MIN_MATCH;
    if (rest >= 15) {
      token |= 15;
      o = writeLengthExtension(out, o, rest - 15);
    } else {
      token |= rest;
    }
  }
  out[tokenAt] = token;
  return o;
}

/**
 * Compresses `src[start, end)` (at most 64 KiB, which keeps every offset within the format's 16 bits) as
 * one independent block into `out` from `o`, which has room for lz4MaxCompressedLength(end - start);
 * returns the new end. `table` is the portable twin's hash table.
 */
export function lz4CompressBlock(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number, table: Uint16Array): number {
  if (kernels === null) return lz4CompressBlockPortable(src, start, end, out, o, table);
  return kernels.compressBlock(src, start, end, out, o);
}

/**
 * lz4CompressBlock in TypeScript: the kernel's reference twin. `table` maps hashes of 4-byte sequences
 * to block-relative positions; it is cleared here.
 */
export function lz4CompressBlockPortable(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number, table: Uint16Array): number {
  let anchor = start;
  if (end - start > MATCH_FIND_LIMIT) {
    table.fill(0);
    const matchFindLimit = end - MATCH_FIND_LIMIT;
    const matchLimit = end - LAST_LITERALS;
    let ip = start + 1;
    search: for (;;) {
      let probes = 1 << SKIP_TRIGGER;
      let candidate: number;
      let ipValue: number;
      for (;;) {
        if (ip > matchFindLimit) break search;
        ipValue = load32(src, ip);
        const h = hash(ipValue);
        candidate = start + table[h]!;
        table[h] = ip - start;
        if (ip - candidate <= MAX_OFFSET && load32(src, candidate) === ipValue && candidate < ip) break;
        ip += probes++ >>> SKIP_TRIGGER;
      }
      // Extend the match backwards over literals that also match.
      while (ip > anchor && candidate > start && src[ip - 1] === src[candidate - 1]) {
        ip--;
        candidate--;
      }
      let length = MIN_MATCH;
      while (ip + length < matchLimit && src[ip + length] === src[candidate + length]) length++;
      o = writeSequence(out, o, src, anchor, ip, ip - candidate, length);
      ip += length;
      anchor = ip;
      if (ip > matchFindLimit) break;
      // Positions inside the match are likely starts of later matches; remember one of them.
      table[hash(load32(src, ip - 2))] = ip - 2 - start;
    }
  }
  return writeSequence(out, o, src, anchor, end, 0, 0);
}

// ---- frame encoding -------------------------------------------------------------------------------

/** Compresses `data` into one LZ4 frame as Apache Kafka's Java client writes it. */
export function lz4Compress(data: Uint8Array): Uint8Array {
  const blocks = Math.ceil(data.length / BLOCK_BYTES);
  const out = unzeroed(7 + blocks * (4 + lz4MaxCompressedLength(BLOCK_BYTES)) + 4);
  writeUint32LE(out, 0, FRAME_MAGIC);
  out[4] = FLG_VERSION_1 | FLG_BLOCK_INDEPENDENCE;
  out[5] = BD_64KB;
  out[6] = (xxhash32(out, 4, 6) >>> 8) & 0xff;
  let o = 7;
  // Only the portable twin uses a table; the kernel has its own.
  const table = kernels === null ? new Uint16Array(1 << HASH_BITS) : NO_TABLE;
  for (let at = 0; at < data.length; at += BLOCK_BYTES) {
    const blockEnd = Math.min(at + BLOCK_BYTES, data.length);
    const size = lz4CompressBlock(data, at, blockEnd, out, o + 4, table) - (o + 4);
    if (size >= blockEnd - at) {
      // Incompressible: stored as is, flagged by the high bit of the size.
      out.set(data.subarray(at, blockEnd), o + 4);
      writeUint32LE(out, o, (blockEnd - at) | UNCOMPRESSED_BIT);
      o += 4 + (blockEnd - at);
    } else {
      writeUint32LE(out, o, size);
      o += 4 + size;
    }
  }
  writeUint32LE(out, o, 0);
  return out.subarray(0, o + 4);
}
