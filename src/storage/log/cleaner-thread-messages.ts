/**
 * The messages between the broker's thread and a cleaner thread (cleaner-threads.ts, cleaner-worker.ts;
 * docs/architecture.md, "Compaction"), and errors carried across: a structured clone keeps neither an
 * error's class nor its cause, and the service tells a damaged partition from a failed fsync by class.
 */
import type { ActiveProducer, CleanableRange } from "../../domain/compaction/cleaning-rules.ts";
import type { AbortedTxnRange } from "../../domain/compaction/txn-cleaning.ts";
import { ConfigError, CorruptStateError, DecodeError, FatalError } from "../../errors/errors.ts";
import type { CleanerCheckpoint } from "./cleaner-checkpoint.ts";
import type { CleanPassStats } from "./log-cleaner.ts";
import type { CleanableSegment } from "./partition-log.ts";

/** Once, right after the thread starts: the memory it shares with the broker's thread. */
export interface InitMessage {
  kind: "init";
  /** Int32Array of one slot: 1 while the running pass must stop between batches. */
  stop: SharedArrayBuffer;
  /** The I/O budget all threads share (cleaner-io-throttle.ts). */
  throttle: SharedArrayBuffer;
}

/** One pass: what cleanLog needs, with the log as it stood when the pass began. */
export interface PassMessage {
  kind: "pass";
  passId: number;
  dir: string;
  /** The inactive segments, oldest first, with their sizes then (their files do not change during the pass). */
  segments: CleanableSegment[];
  sizeBytes: number;
  cleanerCheckpoint: CleanerCheckpoint;
  range: CleanableRange;
  nowMs: number;
  deleteRetentionMs: number;
  maxGroupBytes: number;
  indexIntervalBytes: number;
  producers: [number, ActiveProducer][];
  aborted: AbortedTxnRange[];
  /** The offset map's bound (the thread's share of log.cleaner.dedupe.buffer.size) and load factor. */
  mapBytes: number;
  loadFactor: number;
}

/** The answer to a request of the thread's. */
export interface ReplyMessage {
  kind: "reply";
  requestId: number;
  /** The log's size after the request (a swap changes it). */
  sizeBytes: number;
  /** Set when the broker's thread failed the request; the pass fails with the original error. */
  error?: SerializedError;
}

export type ToThreadMessage = InitMessage | PassMessage | ReplyMessage;

export interface SaveCheckpointRequest {
  kind: "save-checkpoint";
  requestId: number;
  checkpoint: CleanerCheckpoint;
}

/** A group's cleaned segment, its `.cleaned` files durable: swap it in (CleanableLog.replaceSegments). */
export interface ReplaceSegmentsRequest {
  kind: "replace-segments";
  requestId: number;
  replaced: number[];
  endOffset: number;
  sizeBytes: number;
  /** The indexes as their files hold them (OffsetIndex / TimeIndex encode). */
  offsetIndex: Uint8Array;
  timeIndex: Uint8Array;
  maxTimestampMs: number;
  offsetOfMaxTimestamp: number;
  txnIndexBytes: number;
  keptAborted: AbortedTxnRange[];
}

export interface PassDoneMessage {
  kind: "done";
  passId: number;
  stats: CleanPassStats;
}

export interface PassFailedMessage {
  kind: "failed";
  passId: number;
  error: SerializedError;
}

export type FromThreadMessage = SaveCheckpointRequest | ReplaceSegmentsRequest | PassDoneMessage | PassFailedMessage;

export interface SerializedError {
  name: string;
  message: string;
  /** CorruptStateError's file. */
  path?: string;
  cause?: string;
  stack?: string;
}

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const out: SerializedError = { name: error.name, message: error.message };
  if (error instanceof CorruptStateError) out.path = error.path;
  if (error.cause !== undefined) out.cause = error.cause instanceof Error ? error.cause.message : String(error.cause);
  if (error.stack !== undefined) out.stack = error.stack;
  return out;
}

/** The error again, of the same class for the project's own errors (and the same message for any). */
export function deserializeError(serialized: SerializedError): Error {
  const options = serialized.cause === undefined ? undefined : { cause: new Error(serialized.cause) };
  let error: Error;
  switch (serialized.name) {
    case "CorruptStateError": {
      const path = serialized.path ?? "";
      const prefix = `${path}: `;
      error = new CorruptStateError(path, serialized.message.startsWith(prefix) ? serialized.message.slice(prefix.length) : serialized.message);
      break;
    }
    case "FatalError":
      error = new FatalError(serialized.message, options);
      break;
    case "DecodeError":
      error = new DecodeError(serialized.message, options);
      break;
    case "ConfigError":
      error = new ConfigError(serialized.message, options);
      break;
    default:
      error = new Error(serialized.message, options);
      if (serialized.name !== "Error") error.name = serialized.name;
  }
  if (serialized.stack !== undefined) error.stack = serialized.stack;
  return error;
}
