/**
 * `cleaner-checkpoint.json` in a partition directory: where the log cleaner stopped (Apache keeps the same
 * fact in its cleaner-offset-checkpoint file). A versioned, checksummed state file (state-file.ts).
 *
 * - firstDirtyOffset: offsets below it were cleaned by the last completed pass; the next pass maps keys
 *   from here.
 * - gapsBelowOffset: segments based below it may have been rewritten by the cleaner, so their offsets
 *   may have gaps and their batches fewer records than their offset span. Written before a pass swaps
 *   its first segment in, so that recovery never takes a cleaned segment's gaps for damage.
 * - pendingDeleteHorizonMs: the earliest delete horizon the last pass gave a kept tombstone or marker
 *   (-1: none), so that a pass runs to remove them once delete.retention.ms has passed, even when no
 *   new data arrives.
 */
import type { Fs } from "../../platform/fs.ts";
import { loadState, saveState } from "../state-file.ts";

export const CLEANER_CHECKPOINT_FILE = "cleaner-checkpoint.json";
const FORMAT = "partition-cleaner-checkpoint";
const VERSION = 1;

export interface CleanerCheckpoint {
  firstDirtyOffset: number;
  gapsBelowOffset: number;
  pendingDeleteHorizonMs: number;
}

export const NO_CLEANER_CHECKPOINT: CleanerCheckpoint = Object.freeze({ firstDirtyOffset: -1, gapsBelowOffset: 0, pendingDeleteHorizonMs: -1 });

function integerField(body: Record<string, unknown>, name: string, min: number): number {
  const value = body[name];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new Error(`${name} is ${JSON.stringify(value)}, expected an integer >= ${min}`);
  }
  return value;
}

function parse(body: unknown): CleanerCheckpoint {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const fields = body as Record<string, unknown>;
  return {
    firstDirtyOffset: integerField(fields, "firstDirtyOffset", -1),
    gapsBelowOffset: integerField(fields, "gapsBelowOffset", 0),
    pendingDeleteHorizonMs: integerField(fields, "pendingDeleteHorizonMs", -1),
  };
}

/** NO_CLEANER_CHECKPOINT when the file does not exist; CorruptStateError when it exists but is not sound. */
export async function loadCleanerCheckpoint(fs: Fs, path: string): Promise<CleanerCheckpoint> {
  return (await loadState(fs, path, FORMAT, { current: VERSION, parse })) ?? NO_CLEANER_CHECKPOINT;
}

export async function saveCleanerCheckpoint(fs: Fs, path: string, checkpoint: CleanerCheckpoint): Promise<void> {
  await saveState(fs, path, FORMAT, VERSION, { ...checkpoint });
}
