/**
 * The record-batch compression codecs (attributes bits 0-2): none, gzip, snappy, lz4, zstd.
 *
 * `decompress` and `compress` work on the records section of a batch (the bytes after the 61-byte
 * header). Corrupt input is a DecodeError; a result above `maxBytes` is refused rather than allocated,
 * so that a small hostile batch cannot inflate into gigabytes.
 */
import { gunzipSync, gzipSync, zstdCompressSync, zstdDecompressSync } from "node:zlib";
import { DecodeError } from "../../errors/errors.ts";
import { CompressionCodec } from "./record-batch.ts";

/** Inflates the records section of a batch compressed with `codec`. */
export function decompress(codec: number, data: Uint8Array, maxBytes: number): Uint8Array {
  let out: Uint8Array;
  try {
    switch (codec) {
      case CompressionCodec.none:
        return data;
      case CompressionCodec.gzip:
        out = gunzipSync(data, { maxOutputLength: maxBytes });
        break;
      case CompressionCodec.zstd:
        out = zstdDecompressSync(data, { maxOutputLength: maxBytes });
        break;
      default:
        throw new DecodeError(`compression codec ${codec} is not supported yet`);
    }
  } catch (error) {
    if (error instanceof DecodeError) throw error;
    throw new DecodeError(`records do not decompress with codec ${codec}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (out.length > maxBytes) throw new DecodeError(`records decompress to more than ${maxBytes} bytes`);
  return out;
}

/** Compresses a records section with `codec`, in the framing Apache Kafka's clients read. */
export function compress(codec: number, data: Uint8Array): Uint8Array {
  switch (codec) {
    case CompressionCodec.none:
      return data;
    case CompressionCodec.gzip:
      return gzipSync(data);
    case CompressionCodec.zstd:
      return zstdCompressSync(data);
    default:
      throw new Error(`compression codec ${codec} is not supported yet`);
  }
}
