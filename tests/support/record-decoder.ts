/**
 * Decodes RecordBatch v2 bytes (what Fetch returns, or a segment file) into records, for tests that read
 * back what clients wrote: offsets, keys, values, headers. Every batch's CRC-32C is checked. Batches of
 * every codec are decompressed with the broker's own codecs (src/protocol/records/compression.ts).
 *
 * A Fetch response may end with a partial batch (the broker cuts at max bytes); `decodeRecordSet` stops
 * there and reports how many bytes it left, so a reader can fetch again from the next offset.
 */
import {
  BATCH_HEADER_BYTES,
  checkBatch,
  CompressionCodec,
  LOG_OVERHEAD_BYTES,
  parseBatchHeader,
  type BatchHeader,
} from "../../src/protocol/records/record-batch.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { decompress } from "../../src/protocol/records/compression.ts";

export interface DecodedHeader {
  key: string;
  value: Uint8Array | null;
}

export interface DecodedRecord {
  offset: number;
  timestampMs: number;
  key: Uint8Array | null;
  value: Uint8Array | null;
  headers: DecodedHeader[];
}

export interface DecodedBatch {
  header: BatchHeader;
  records: DecodedRecord[];
}

export interface DecodedRecordSet {
  batches: DecodedBatch[];
  /** Bytes at the end that do not hold a whole batch (a cut-off batch in a Fetch answer). */
  trailingBytes: number;
}

const decoder = new TextDecoder();

export function utf8(bytes: Uint8Array | null): string | null {
  return bytes === null ? null : decoder.decode(bytes);
}

function readVarBytes(r: Reader): Uint8Array | null {
  const length = r.varint();
  if (length < 0) return null;
  return r.raw(length);
}

/** Large enough for any batch a test produces; a batch that inflates beyond it is a bug worth failing on. */
const MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024;

/**
 * Snappy as Kafka clients write it (xerial-framed or one raw block), with the broker's own codec; kept
 * as a named export for the tests that read snappy batches directly.
 */
export function snappyDecompress(bytes: Uint8Array): Uint8Array {
  return decompress(CompressionCodec.snappy, bytes, MAX_DECOMPRESSED_BYTES);
}

/**
 * Decodes the records of one whole, CRC-checked batch at `position`. `cleaned`: the batch may come from a
 * compacted log, where the cleaner leaves batches with fewer records than their offset span (none at all,
 * for a producer's emptied last batch).
 */
export function decodeBatch(bytes: Uint8Array, position = 0, cleaned = false): DecodedBatch {
  const problem = checkBatch(bytes, position, bytes.length, cleaned);
  if (typeof problem !== "number") throw new Error(`record-decoder: bad batch: ${JSON.stringify(problem)}`);
  const header = parseBatchHeader(bytes, position);
  const body = decompress(header.compression, bytes.subarray(position + BATCH_HEADER_BYTES, position + header.sizeBytes), MAX_DECOMPRESSED_BYTES);
  const r = new Reader(body);
  const records: DecodedRecord[] = [];
  for (let i = 0; i < header.recordsCount; i++) {
    const length = r.varint();
    if (length < 0 || length > r.remaining) throw new Error(`record-decoder: record ${i} length ${length} out of bounds`);
    const end = r.offset + length;
    const rec = new Reader(body, r.offset, end);
    rec.int8(); // attributes (unused in v2)
    const timestampDelta = rec.varlong();
    const offsetDelta = rec.varint();
    const key = readVarBytes(rec);
    const value = readVarBytes(rec);
    const headerCount = rec.varint();
    const headers: DecodedHeader[] = [];
    for (let h = 0; h < headerCount; h++) {
      const hk = readVarBytes(rec);
      headers.push({ key: hk === null ? "" : decoder.decode(hk), value: readVarBytes(rec) });
    }
    if (rec.remaining !== 0) throw new Error(`record-decoder: record ${i} has ${rec.remaining} trailing bytes`);
    records.push({
      offset: header.baseOffset + offsetDelta,
      timestampMs: header.baseTimestampMs + timestampDelta,
      key,
      value,
      headers,
    });
    r.offset = end;
  }
  if (r.remaining !== 0) throw new Error(`record-decoder: batch at ${position} has ${r.remaining} bytes after its records`);
  return { header, records };
}

/**
 * Decodes a record set of concatenated batches; a partial batch at the end is left, not an error.
 * `cleaned`: see decodeBatch.
 */
export function decodeRecordSet(bytes: Uint8Array, opts: { cleaned?: boolean } = {}): DecodedRecordSet {
  const batches: DecodedBatch[] = [];
  let position = 0;
  while (bytes.length - position >= LOG_OVERHEAD_BYTES) {
    const size = LOG_OVERHEAD_BYTES + new DataView(bytes.buffer, bytes.byteOffset + position + 8, 4).getInt32(0);
    if (size < BATCH_HEADER_BYTES) throw new Error(`record-decoder: batch at ${position} has an impossible length ${size}`);
    if (position + size > bytes.length) break;
    batches.push(decodeBatch(bytes, position, opts.cleaned ?? false));
    position += size;
  }
  return { batches, trailingBytes: bytes.length - position };
}

// ---------------------------------------------------------------------------------------------
// Reading a whole partition back over the wire

/** The subset of WireClient this needs (so that this file does not import the client). */
interface RequestClient {
  request<T = any>(apiKey: number, apiVersion: number, body: unknown): Promise<T>;
}

export interface PartitionContents {
  /** Every record from `fromOffset` up to the high watermark, in offset order. */
  records: DecodedRecord[];
  /** The batches they came in (a batch starting before `fromOffset` is included whole). */
  batches: DecodedBatch[];
  highWatermark: number;
  logStartOffset: number;
}

/**
 * Reads one partition with raw Fetch v12 (read_uncommitted) from `fromOffset` to the high watermark seen
 * by the first answer, decoding every batch. Fails on any partition error or when a fetch makes no
 * progress (which would otherwise loop forever).
 */
export async function readPartitionFully(
  client: RequestClient,
  topic: string,
  partition: number,
  opts: { fromOffset?: number; maxBytes?: number } = {},
): Promise<PartitionContents> {
  const maxBytes = opts.maxBytes ?? 1024 * 1024;
  const records: DecodedRecord[] = [];
  const batches: DecodedBatch[] = [];
  let offset = opts.fromOffset ?? 0;
  let highWatermark = -1;
  let logStartOffset = -1;
  for (;;) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: maxBytes, logStartOffset: -1 }] }],
    });
    if (res.errorCode !== 0) throw new Error(`fetch ${topic}-${partition}@${offset}: top-level error ${res.errorCode}`);
    const data = res.responses[0].partitions[0];
    if (data.errorCode !== 0) throw new Error(`fetch ${topic}-${partition}@${offset}: error ${data.errorCode}`);
    if (highWatermark < 0) {
      highWatermark = data.highWatermark;
      logStartOffset = data.logStartOffset;
    }
    if (offset >= highWatermark) break;
    const set = decodeRecordSet(data.records ?? new Uint8Array(0));
    let progressed = false;
    for (const batch of set.batches) {
      if (batch.header.baseOffset + batch.header.lastOffsetDelta < offset) continue;
      batches.push(batch);
      for (const record of batch.records) {
        if (record.offset < offset || record.offset >= highWatermark) continue;
        records.push(record);
      }
      const next = batch.header.baseOffset + batch.header.lastOffsetDelta + 1;
      if (next > offset) {
        offset = next;
        progressed = true;
      }
    }
    if (!progressed) throw new Error(`fetch ${topic}-${partition}@${offset} returned nothing below the high watermark ${highWatermark}`);
  }
  return { records, batches, highWatermark, logStartOffset };
}
