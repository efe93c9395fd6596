/**
 * The record-batch compression codecs (attributes bits 0-2): none, gzip, snappy, lz4, zstd.
 *
 * `decompress` and `compress` work on the records section of a batch (the bytes after the 61-byte
 * header). Corrupt input is a DecodeError; a result above `maxBytes` is refused rather than allocated,
 * so that a small hostile batch cannot inflate into gigabytes.
 *
 * gzip and zstd are Bun's native zlib and zstd. snappy and lz4 are our own (snappy.ts, lz4.ts), in the
 * framings Kafka clients use: xerial-framed snappy (raw snappy blocks are read too) and the LZ4 frame
 * format with independent 64 KiB blocks.
 *
 * zstd input is walked frame by frame (headers and block sizes only) before it is decompressed: Bun's
 * node:zlib zstdDecompressSync returns whatever it decoded so far, without an error, when the input
 * stops in the middle of a frame, and a cut-off batch must not pass for a shorter one.
 */
import { constants, gunzipSync, gzipSync, zstdCompressSync, zstdDecompressSync } from "node:zlib";
import { DecodeError } from "../../errors/errors.ts";
import { lz4Compress, lz4Decompress, type DecompressScratch } from "./lz4.ts";
import { CompressionCodec } from "./record-batch.ts";
import { snappyCompress, snappyDecompress } from "./snappy.ts";

/**
 * Inflates the records section of a batch compressed with `codec`. With a scratch, the result may be a
 * view of its buffer, valid until the next call given it (lz4.ts, DecompressScratch); gzip's and zstd's
 * decoders allocate their own.
 */
export function decompress(codec: number, data: Uint8Array, maxBytes: number, scratch?: DecompressScratch): Uint8Array {
  let out: Uint8Array;
  try {
    switch (codec) {
      case CompressionCodec.none:
        return data;
      case CompressionCodec.gzip:
        out = gunzipSync(data, { maxOutputLength: maxBytes });
        break;
      case CompressionCodec.zstd:
        checkZstdFrames(data);
        out = zstdDecompressSync(data, { maxOutputLength: maxBytes });
        break;
      case CompressionCodec.snappy:
        out = snappyDecompress(data, maxBytes, scratch);
        break;
      case CompressionCodec.lz4:
        out = lz4Decompress(data, maxBytes, scratch);
        break;
      default:
        throw new DecodeError(`compression codec ${codec} does not exist`);
    }
  } catch (error) {
    if (error instanceof DecodeError) throw error;
    throw new DecodeError(`records do not decompress with codec ${codec}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (out.length > maxBytes) throw new DecodeError(`records decompress to more than ${maxBytes} bytes`);
  return out;
}

/**
 * Compresses a records section with `codec`, in the framing Apache Kafka's clients read. `level` is the
 * codec's level as the compression.<codec>.level configs give it (gzip 1-9 or -1 for zlib's default,
 * zstd's levels); omitted, each codec's default. lz4 has one compressor, the fast one that Apache uses
 * at its default level, and ignores the level; snappy has no levels.
 */
export function compress(codec: number, data: Uint8Array, level?: number): Uint8Array {
  switch (codec) {
    case CompressionCodec.none:
      return data;
    case CompressionCodec.gzip:
      return level === undefined ? gzipSync(data) : gzipSync(data, { level });
    case CompressionCodec.zstd:
      return level === undefined ? zstdCompressSync(data) : zstdCompressSync(data, { params: { [constants.ZSTD_c_compressionLevel]: level } });
    case CompressionCodec.snappy:
      return snappyCompress(data);
    case CompressionCodec.lz4:
      return lz4Compress(data);
    default:
      throw new Error(`compression codec ${codec} does not exist`);
  }
}

const ZSTD_MAGIC = 0xfd2fb528;
/** Skippable frames have magics 0x184D2A50..0x184D2A5F. */
const ZSTD_SKIPPABLE_BASE = 0x184d2a50;
const ZSTD_BLOCK_RLE = 1;
const ZSTD_BLOCK_RESERVED = 3;
const ZSTD_DICTIONARY_ID_BYTES = [0, 1, 2, 4] as const;
const ZSTD_CONTENT_SIZE_BYTES = [0, 2, 4, 8] as const;

function readUint32LE(data: Uint8Array, at: number): number {
  return (data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24)) >>> 0;
}

/**
 * Checks that `data` is whole zstd frames (or skippable frames) and nothing else: each frame header is
 * complete, every block's header and bytes are present, the last block is marked as such and followed
 * by the content checksum when the header announces one. Throws DecodeError otherwise. The blocks'
 * contents are left to the decompressor.
 */
function checkZstdFrames(data: Uint8Array): void {
  let at = 0;
  do {
    if (data.length - at < 4) throw new DecodeError("zstd frame magic truncated");
    const magic = readUint32LE(data, at);
    if (((magic & 0xfffffff0) >>> 0) === ZSTD_SKIPPABLE_BASE) {
      if (data.length - at < 8) throw new DecodeError("zstd skippable frame truncated");
      const size = readUint32LE(data, at + 4);
      if (size > data.length - at - 8) throw new DecodeError("zstd skippable frame runs past the input");
      at += 8 + size;
      continue;
    }
    if (magic !== ZSTD_MAGIC) throw new DecodeError(`zstd frame magic 0x${magic.toString(16)} at ${at} is not 0xfd2fb528`);
    if (data.length - at < 5) throw new DecodeError("zstd frame header truncated");
    const descriptor = data[at + 4]!;
    const singleSegment = (descriptor & 0x20) !== 0;
    const contentSizeFlag = descriptor >>> 6;
    const headerBytes =
      1 +
      (singleSegment ? 0 : 1) +
      ZSTD_DICTIONARY_ID_BYTES[descriptor & 3]! +
      (contentSizeFlag === 0 && singleSegment ? 1 : ZSTD_CONTENT_SIZE_BYTES[contentSizeFlag]!);
    at += 4 + headerBytes;
    for (;;) {
      if (data.length - at < 3) throw new DecodeError("zstd block header truncated");
      const header = data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16);
      at += 3;
      const type = (header >>> 1) & 3;
      if (type === ZSTD_BLOCK_RESERVED) throw new DecodeError("zstd block of the reserved type");
      // An RLE block's size is what it regenerates; its content is one byte.
      const contentBytes = type === ZSTD_BLOCK_RLE ? 1 : header >>> 3;
      if (contentBytes > data.length - at) throw new DecodeError("zstd block runs past the input");
      at += contentBytes;
      if ((header & 1) !== 0) break;
    }
    if ((descriptor & 0x04) !== 0) {
      if (data.length - at < 4) throw new DecodeError("zstd content checksum truncated");
      at += 4;
    }
  } while (at < data.length);
}
