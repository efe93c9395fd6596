/**
 * `log-checkpoint.json` in a partition directory: the few facts about a partition log that the segment
 * files cannot tell by themselves. A versioned, checksummed state file (state-file.ts), replaced
 * atomically (tmp + fsync + rename + fsync dir).
 *
 * - logStartOffset: moved forward by DeleteRecords; the first segment's base offset says the rest.
 * - recoveryPoint: every offset below it was durable (fsynced) when the file was written. Segments wholly
 *   below it are trusted at open without a scan; a bad batch below it is corruption, never a torn tail.
 * - cleanShutdown: written only by a clean close, naming the last segment and its exact size. At open,
 *   a last segment of that name and size has not been written since (appends only grow a segment, and
 *   only recovery shrinks one), so it needs no scan either.
 */
import type { Fs } from "../../platform/fs.ts";
import { loadState, saveState } from "../state-file.ts";

export const LOG_CHECKPOINT_FILE = "log-checkpoint.json";
const FORMAT = "partition-log-checkpoint";
const VERSION = 1;

export interface CleanShutdown {
  lastSegmentBaseOffset: number;
  lastSegmentBytes: number;
}

export interface LogCheckpoint {
  logStartOffset: number;
  recoveryPoint: number;
  cleanShutdown: CleanShutdown | null;
}

function offsetField(body: Record<string, unknown>, name: string): number {
  const value = body[name];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name} is ${JSON.stringify(value)}, expected a non-negative integer`);
  }
  return value;
}

function parse(body: unknown): LogCheckpoint {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const fields = body as Record<string, unknown>;
  const clean = fields.cleanShutdown;
  let cleanShutdown: CleanShutdown | null = null;
  if (clean !== null) {
    if (typeof clean !== "object" || clean === undefined || Array.isArray(clean)) throw new Error("cleanShutdown is not an object or null");
    const c = clean as Record<string, unknown>;
    cleanShutdown = {
      lastSegmentBaseOffset: offsetField(c, "lastSegmentBaseOffset"),
      lastSegmentBytes: offsetField(c, "lastSegmentBytes"),
    };
  }
  return {
    logStartOffset: offsetField(fields, "logStartOffset"),
    recoveryPoint: offsetField(fields, "recoveryPoint"),
    cleanShutdown,
  };
}

/** undefined when the file does not exist; CorruptStateError when it exists but is not sound. */
export async function loadLogCheckpoint(fs: Fs, path: string): Promise<LogCheckpoint | undefined> {
  return loadState(fs, path, FORMAT, { current: VERSION, parse });
}

export async function saveLogCheckpoint(fs: Fs, path: string, checkpoint: LogCheckpoint): Promise<void> {
  await saveState(fs, path, FORMAT, VERSION, { ...checkpoint });
}
