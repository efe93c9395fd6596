/**
 * `producer-state.snapshot`: a partition's producer state (every producer's epoch and dedupe window) as
 * of a log offset, so that recovery and take-over replay only the log after that offset instead of the
 * whole partition. Written on segment roll and on relinquish; read at start-up and on take-over.
 *
 * On disk, one MessagePack map:
 *
 *   { format: "producer-state", version: <N>, crc32: <uint32>, body: <bin> }
 *
 * `body` is itself MessagePack, and `crc32` (IEEE, storage/crc32.ts) covers exactly its bytes, so the
 * check does not depend on how the envelope was encoded. MessagePack rather than the JSON of the other
 * state files because a busy partition holds ~100k producers and the file is rewritten on every roll.
 *
 * Body, version 2 (current): { offset, producers: [[producerId, epoch, lastTimestampMs,
 * currentTxnFirstOffset, coordinatorEpoch, [firstSeq, lastSeq, firstOffset, lastOffset, timestampMs,
 * ... one group of five per batch, oldest first]], ...] }. Positional tuples, because field names
 * repeated 100k times would be most of the file.
 * Body, version 1 (previous, still read): the same without the transaction fields: [producerId, epoch,
 * lastTimestampMs, batches]. It is the idempotent-only layout; a version 1 producer has no open
 * transaction and no coordinator epoch.
 *
 * `offset` is the next offset to replay: the state reflects every batch and marker below it.
 *
 * A snapshot that fails any check (unreadable MessagePack, wrong format, unknown version, checksum
 * mismatch, a body that breaks an invariant) is reported as `{ kind: "corrupt", reason }`, distinct from
 * "no snapshot": the caller warns and rebuilds from the log, and never takes it for empty state, which
 * would silently forget dedupe windows and open transactions. I/O errors are thrown, not reported as
 * corruption: an unreadable disk is not a reason to rebuild.
 *
 * In cluster mode a leader at epoch E >= 1 writes `producer-state.e<E>.snapshot` (storage/log/epoch-files.ts),
 * and a snapshot of an older epoch whose offset is past that epoch's end is a fenced former leader's late
 * write, never used (storage/partition.ts).
 */
import { decode, encode } from "@msgpack/msgpack";
import { join } from "node:path";
import {
  createProducerState,
  NO_COORDINATOR_EPOCH,
  NO_TXN_OFFSET,
  PRODUCER_BATCHES_RETAINED,
  type BatchMetadata,
  type ProducerStateTable,
} from "../domain/producer-state.ts";
import type { Fs } from "../platform/fs.ts";
import { writeFileAtomic } from "./atomic-file.ts";
import { epochFileName, epochsOf } from "./log/epoch-files.ts";
import { crc32 } from "./crc32.ts";

export const PRODUCER_STATE_SNAPSHOT_FILE = "producer-state.snapshot";
export const PRODUCER_STATE_SNAPSHOT_FORMAT = "producer-state";
export const PRODUCER_STATE_SNAPSHOT_VERSION = 2;
/** Versions this build reads: the current one and the previous one. */
export const PRODUCER_STATE_SNAPSHOT_VERSIONS_READ: readonly number[] = [PRODUCER_STATE_SNAPSHOT_VERSION, 1];

/** ~100 bytes per producer at most; anything far bigger than a million producers is not ours. */
export const PRODUCER_STATE_SNAPSHOT_BYTES_MAX = 256 * 1024 * 1024;

const BATCH_FIELDS = 5;

export interface ProducerStateSnapshot {
  /** The next offset to replay from the log. */
  readonly offset: number;
  readonly state: ProducerStateTable;
}

export type DecodedSnapshot =
  | ({ readonly kind: "loaded"; readonly version: number } & ProducerStateSnapshot)
  | { readonly kind: "corrupt"; readonly reason: string };

/** `undefined` when the partition has no snapshot. */
export type ReadSnapshotResult = DecodedSnapshot | undefined;

/** The bytes of a snapshot of `state` at `offset`, in the current version. */
export function encodeSnapshot(offset: number, state: ProducerStateTable): Uint8Array {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`invalid snapshot offset ${offset}`);
  const producers: unknown[] = [];
  for (const [producerId, entry] of state.entries()) {
    const batches: number[] = [];
    for (const batch of entry.batches) {
      batches.push(batch.firstSeq, batch.lastSeq, batch.firstOffset, batch.lastOffset, batch.timestampMs);
    }
    producers.push([producerId, entry.epoch, entry.lastTimestampMs, entry.currentTxnFirstOffset, entry.coordinatorEpoch, batches]);
  }
  return encodeEnvelope(PRODUCER_STATE_SNAPSHOT_VERSION, encode({ offset, producers }));
}

/** Wraps a body in the envelope. Exported for tests that build files of other versions. */
export function encodeEnvelope(version: number, body: Uint8Array): Uint8Array {
  return encode({ format: PRODUCER_STATE_SNAPSHOT_FORMAT, version, crc32: crc32(body), body });
}

/** Checks and decodes snapshot bytes; never throws. */
export function decodeSnapshot(bytes: Uint8Array): DecodedSnapshot {
  try {
    return decodeOrThrow(bytes);
  } catch (error) {
    return { kind: "corrupt", reason: error instanceof Error ? error.message : String(error) };
  }
}

/** Writes the snapshot atomically (tmp, fsync, rename, fsync dir; see atomic-file.ts for failures). */
export async function writeSnapshot(fs: Fs, dir: string, offset: number, state: ProducerStateTable): Promise<void> {
  await writeFileAtomic(fs, join(dir, PRODUCER_STATE_SNAPSHOT_FILE), encodeSnapshot(offset, state));
}

/** Reads the partition's snapshot: undefined when there is none, corrupt when it fails a check. */
export async function readSnapshot(fs: Fs, dir: string): Promise<ReadSnapshotResult> {
  return readSnapshotFile(fs, join(dir, PRODUCER_STATE_SNAPSHOT_FILE));
}

/** The snapshot file a leader at `epoch` writes (the plain name for 0). */
export function snapshotFileName(epoch: number): string {
  return epochFileName(PRODUCER_STATE_SNAPSHOT_FILE, epoch);
}

/** The epochs whose snapshot files `dir` holds, newest first. */
export async function snapshotEpochs(fs: Fs, dir: string): Promise<number[]> {
  return epochsOf(await fs.readdir(dir), PRODUCER_STATE_SNAPSHOT_FILE).reverse();
}

/** Reads one snapshot file: undefined when it does not exist, corrupt when it fails a check. */
export async function readSnapshotFile(fs: Fs, path: string): Promise<ReadSnapshotResult> {
  const stat = await fs.stat(path);
  if (stat === undefined) return undefined;
  if (stat.isDirectory) return { kind: "corrupt", reason: `${path} is a directory` };
  if (stat.size > PRODUCER_STATE_SNAPSHOT_BYTES_MAX) {
    return { kind: "corrupt", reason: `${path} is ${stat.size} bytes, more than the ${PRODUCER_STATE_SNAPSHOT_BYTES_MAX} a snapshot may have` };
  }
  const decoded = decodeSnapshot(await fs.readFile(path));
  return decoded.kind === "corrupt" ? { kind: "corrupt", reason: `${path}: ${decoded.reason}` } : decoded;
}

// ---- decoding ----------------------------------------------------------------------------------

class SnapshotFormatError extends Error {}

function decodeOrThrow(bytes: Uint8Array): DecodedSnapshot {
  if (bytes.length === 0) throw new SnapshotFormatError("file is empty");
  const envelope = decodeMsgpack(bytes, "file");
  if (!isRecord(envelope)) throw new SnapshotFormatError("file is not a MessagePack map");
  if (envelope.format !== PRODUCER_STATE_SNAPSHOT_FORMAT) {
    throw new SnapshotFormatError(`wrong format ${JSON.stringify(envelope.format)}, expected ${JSON.stringify(PRODUCER_STATE_SNAPSHOT_FORMAT)}`);
  }
  const version = envelope.version;
  if (typeof version !== "number" || !PRODUCER_STATE_SNAPSHOT_VERSIONS_READ.includes(version)) {
    throw new SnapshotFormatError(
      `unknown version ${JSON.stringify(version)} (this build reads versions ${PRODUCER_STATE_SNAPSHOT_VERSIONS_READ.join(", ")})`,
    );
  }
  const body = envelope.body;
  if (!(body instanceof Uint8Array)) throw new SnapshotFormatError("missing body");
  const stored = envelope.crc32;
  const computed = crc32(body);
  if (stored !== computed) throw new SnapshotFormatError(`checksum mismatch: stored crc32 ${String(stored)}, computed ${computed}`);

  const fields = decodeMsgpack(body, "body");
  if (!isRecord(fields)) throw new SnapshotFormatError("body is not a map");
  const offset = fields.offset;
  if (typeof offset !== "number" || !Number.isSafeInteger(offset) || offset < 0) {
    throw new SnapshotFormatError(`invalid offset ${String(offset)}`);
  }
  if (!Array.isArray(fields.producers)) throw new SnapshotFormatError("producers is not an array");
  const state = createProducerState();
  fields.producers.forEach((tuple: unknown, index) => {
    const where = `producers[${index}]`;
    const fieldCount = version === 1 ? 4 : 6;
    if (!Array.isArray(tuple) || tuple.length !== fieldCount) throw new SnapshotFormatError(`${where} is not a tuple of ${fieldCount}`);
    const producerId = integer(tuple[0], `${where}.producerId`);
    const epoch = integer(tuple[1], `${where}.epoch`);
    const lastTimestampMs = integer(tuple[2], `${where}.lastTimestampMs`);
    const currentTxnFirstOffset = version === 1 ? NO_TXN_OFFSET : integer(tuple[3], `${where}.currentTxnFirstOffset`);
    const coordinatorEpoch = version === 1 ? NO_COORDINATOR_EPOCH : integer(tuple[4], `${where}.coordinatorEpoch`);
    const batches = decodeBatches(tuple[fieldCount - 1], `${where}.batches`);
    if (state.has(producerId)) throw new SnapshotFormatError(`${where}: producer ${producerId} appears twice`);
    try {
      state.set(producerId, { epoch, batches, lastTimestampMs, currentTxnFirstOffset, coordinatorEpoch });
    } catch (error) {
      // The table's own invariant checks (ranges, window size) reject what no writer could have made.
      throw new SnapshotFormatError(`${where}: ${error instanceof Error ? error.message : String(error)}`);
    }
  });
  return { kind: "loaded", version, offset, state };
}

function decodeBatches(value: unknown, where: string): BatchMetadata[] {
  if (!Array.isArray(value) || value.length % BATCH_FIELDS !== 0 || value.length > BATCH_FIELDS * PRODUCER_BATCHES_RETAINED) {
    throw new SnapshotFormatError(`${where} is not a list of at most ${PRODUCER_BATCHES_RETAINED} batches`);
  }
  const batches: BatchMetadata[] = [];
  for (let at = 0; at < value.length; at += BATCH_FIELDS) {
    batches.push({
      firstSeq: integer(value[at], `${where}[${at}]`),
      lastSeq: integer(value[at + 1], `${where}[${at + 1}]`),
      firstOffset: integer(value[at + 2], `${where}[${at + 2}]`),
      lastOffset: integer(value[at + 3], `${where}[${at + 3}]`),
      timestampMs: integer(value[at + 4], `${where}[${at + 4}]`),
    });
  }
  return batches;
}

function decodeMsgpack(bytes: Uint8Array, what: string): unknown {
  try {
    return decode(bytes);
  } catch (error) {
    throw new SnapshotFormatError(`${what} is not valid MessagePack (${error instanceof Error ? error.message : String(error)})`);
  }
}

function integer(value: unknown, where: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new SnapshotFormatError(`${where} is not an integer`);
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}
