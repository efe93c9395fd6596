/**
 * Swapping cleaned segments in, crash-safely (docs/architecture.md, "Compaction").
 *
 * The cleaner rewrites a group of adjacent segments [b1, b2, ..., bk] into one new segment based at b1
 * (the first one's base offset, so offsets never move). Its four files are written beside the old ones
 * with a `.cleaned` suffix and fsynced; then:
 *
 *   1. `cleaner-swap.json` (tmp + fsync + rename + fsync dir) names b1 and the replaced bases: from here
 *      on the new segment is the truth. This is the commit point.
 *   2. each `<b1>.<ext>.cleaned` is renamed over `<b1>.<ext>`, the files of b2..bk are unlinked, and the
 *      directory is fsynced;
 *   3. `cleaner-swap.json` is unlinked and the directory fsynced.
 *
 * A crash before 1 leaves `.cleaned` files that recovery deletes: the old segments are intact. A crash
 * after 1 leaves the manifest, and recovery redoes 2 and 3 (each step is idempotent: a `.cleaned` file
 * already renamed is simply absent, an already unlinked file is absent too). So a restart sees either
 * the old segments or the new one, never a mix.
 *
 * Leader epochs (docs/architecture.md, "Files of a leader epoch"): the new segment is named with the
 * highest epoch of the segments it replaces (so that the segments' epochs still rise with their offsets,
 * which is what recovery's fencing rule relies on), the manifest names the epoch of every file, and a
 * leader at epoch E >= 1 writes its manifest as `cleaner-swap.e<E>.json`. Recovery completes only the
 * manifests of an epoch at least as new as the partition's latest leader epoch: an older one is a fenced
 * former leader's late write. Every rename and unlink asks `mayWrite` first (the ownership still held),
 * since deletions cannot be fenced by naming.
 */
import { join } from "node:path";
import { CorruptStateError } from "../../errors/errors.ts";
import type { Fs } from "../../platform/fs.ts";
import { fsyncDirOrDie } from "../atomic-file.ts";
import { loadState, saveState } from "../state-file.ts";
import { epochFileName, epochsOf } from "./epoch-files.ts";
import { segmentFileName } from "./segment.ts";

export const SWAP_MANIFEST_FILE = "cleaner-swap.json";
export const CLEANED_SUFFIX = ".cleaned";
const FORMAT = "partition-cleaner-swap";
const VERSION = 1;
const EXTENSIONS = ["log", "index", "timeindex", "txnindex"] as const;

export interface SwapManifest {
  /** Base offset of the new segment (that of the first replaced one). */
  baseOffset: number;
  /** Base offsets of every replaced segment, ascending; the first is baseOffset. */
  replaced: number[];
  /** The new segment's file epoch; absent (and not written) for 0. */
  epoch?: number;
  /** The file epoch of each replaced segment, as `replaced`; absent (and not written) when all are 0. */
  replacedEpochs?: number[];
}

/** The manifest's body: the epoch fields only when one is not 0, so epoch-0 manifests stay as before. */
function bodyOf(manifest: SwapManifest): Record<string, unknown> {
  const body: Record<string, unknown> = { baseOffset: manifest.baseOffset, replaced: manifest.replaced };
  if ((manifest.epoch ?? 0) !== 0 || (manifest.replacedEpochs ?? []).some((e) => e !== 0)) {
    body.epoch = manifest.epoch ?? 0;
    body.replacedEpochs = manifest.replacedEpochs ?? manifest.replaced.map(() => 0);
  }
  return body;
}

function epochField(value: unknown, name: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0x7fffffff) throw new Error(`${name} is not an epoch`);
  return value;
}

function parse(body: unknown): SwapManifest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const fields = body as Record<string, unknown>;
  const baseOffset = fields.baseOffset;
  const replaced = fields.replaced;
  if (typeof baseOffset !== "number" || !Number.isSafeInteger(baseOffset) || baseOffset < 0) throw new Error("baseOffset is not an offset");
  if (!Array.isArray(replaced) || replaced.length === 0 || replaced[0] !== baseOffset) throw new Error("replaced does not start with baseOffset");
  for (let i = 0; i < replaced.length; i++) {
    const r = replaced[i];
    if (typeof r !== "number" || !Number.isSafeInteger(r) || (i > 0 && r <= replaced[i - 1])) throw new Error("replaced is not ascending offsets");
  }
  if (fields.epoch === undefined && fields.replacedEpochs === undefined) return { baseOffset, replaced: replaced as number[] };
  const epoch = epochField(fields.epoch, "epoch");
  const replacedEpochs = fields.replacedEpochs;
  if (!Array.isArray(replacedEpochs) || replacedEpochs.length !== replaced.length) throw new Error("replacedEpochs does not match replaced");
  return { baseOffset, replaced: replaced as number[], epoch, replacedEpochs: replacedEpochs.map((e, i) => epochField(e, `replacedEpochs[${i}]`)) };
}

/** The `.cleaned` path of the file with extension `ext` of the segment based at `baseOffset`. */
export function cleanedPath(dir: string, baseOffset: number, ext: (typeof EXTENSIONS)[number]): string {
  return join(dir, segmentFileName(baseOffset, ext) + CLEANED_SUFFIX);
}

/** Thrown (and failing the pass) when `mayWrite` says the ownership is gone before a rename or unlink. */
export class SwapFencedError extends Error {}

/** Options of a swap made by a leader: its epoch (the manifest's name) and the ownership check. */
export interface SwapWriter {
  /** The writing leader's epoch: the manifest is `cleaner-swap.e<epoch>.json` (plain for 0). */
  epoch?: number;
  /** Asked immediately before the manifest write and each rename and unlink; false stops the swap. */
  mayWrite?: () => boolean;
}

/** Steps 1-3 of the file comment. The `.cleaned` files must already be durable. */
export async function commitSwap(fs: Fs, dir: string, manifest: SwapManifest, afterCommit?: () => void, writer: SwapWriter = {}): Promise<void> {
  check(writer, dir);
  await saveState(fs, join(dir, epochFileName(SWAP_MANIFEST_FILE, writer.epoch ?? 0)), FORMAT, VERSION, bodyOf(manifest));
  afterCommit?.();
  await completeSwap(fs, dir, manifest, writer);
}

function check(writer: SwapWriter, dir: string): void {
  if (writer.mayWrite !== undefined && !writer.mayWrite()) throw new SwapFencedError(`${dir}: the partition's ownership is gone; the cleaner swap stops`);
}

/** Steps 2 and 3; safe to repeat after a crash at any point of them. */
export async function completeSwap(fs: Fs, dir: string, manifest: SwapManifest, writer: SwapWriter = {}): Promise<void> {
  const epoch = manifest.epoch ?? 0;
  for (const ext of EXTENSIONS) {
    const from = cleanedPath(dir, manifest.baseOffset, ext);
    if ((await fs.stat(from)) !== undefined) {
      check(writer, dir);
      await fs.rename(from, join(dir, segmentFileName(manifest.baseOffset, ext, epoch)));
    }
  }
  for (const [i, base] of manifest.replaced.entries()) {
    const replacedEpoch = manifest.replacedEpochs?.[i] ?? 0;
    // The first replaced segment's names are the new segment's when their epochs agree: renamed over.
    if (base === manifest.baseOffset && replacedEpoch === epoch) continue;
    for (const ext of EXTENSIONS) {
      check(writer, dir);
      await unlinkIfExists(fs, join(dir, segmentFileName(base, ext, replacedEpoch)));
    }
  }
  await fsyncDirOrDie(fs, dir, "after swapping cleaned segments in");
  check(writer, dir);
  await unlinkIfExists(fs, join(dir, epochFileName(SWAP_MANIFEST_FILE, writer.epoch ?? 0)));
  await fsyncDirOrDie(fs, dir, "after removing the cleaner swap manifest");
}

export interface SwapRecovery {
  /** The interrupted swap that was completed, if any. */
  completed: SwapManifest | undefined;
  /** `.cleaned` files of a pass that had not committed, removed. */
  removedCleanedFiles: string[];
}

/**
 * At open, before the segments are listed: completes a committed swap and removes the `.cleaned` files
 * of an uncommitted one. A manifest that fails its checks is refused (CorruptStateError): guessing which
 * files are the truth could lose data or resurrect removed records. Only manifests of an epoch at or
 * above `latestEpoch` (the partition's latest leader epoch) are completed; older ones are a fenced
 * former leader's, left alone and listed in `fencedManifests`.
 */
export async function recoverSwap(fs: Fs, dir: string, latestEpoch = 0): Promise<SwapRecovery & { fencedManifests: string[] }> {
  const fencedManifests: string[] = [];
  let completed: SwapManifest | undefined;
  for (const epoch of epochsOf(await fs.readdir(dir), SWAP_MANIFEST_FILE)) {
    const name = epochFileName(SWAP_MANIFEST_FILE, epoch);
    if (epoch < latestEpoch) {
      fencedManifests.push(name);
      continue;
    }
    const manifestPath = join(dir, name);
    const manifest = await loadState(fs, manifestPath, FORMAT, { current: VERSION, parse });
    if (manifest === undefined) continue;
    const newLog = join(dir, segmentFileName(manifest.baseOffset, "log", manifest.epoch ?? 0));
    const cleanedLog = cleanedPath(dir, manifest.baseOffset, "log");
    if ((await fs.stat(cleanedLog)) === undefined && (await fs.stat(newLog)) === undefined) {
      throw new CorruptStateError(manifestPath, `names segment ${manifest.baseOffset}, but neither its cleaned nor its swapped file exists`);
    }
    await completeSwap(fs, dir, manifest, { epoch });
    completed = manifest;
  }
  const manifest = completed;
  const removedCleanedFiles: string[] = [];
  for (const name of await fs.readdir(dir)) {
    if (!name.endsWith(CLEANED_SUFFIX)) continue;
    await fs.unlink(join(dir, name));
    removedCleanedFiles.push(name);
  }
  if (removedCleanedFiles.length > 0) await fsyncDirOrDie(fs, dir, "after removing leftover cleaned segment files");
  return { completed: manifest, removedCleanedFiles, fencedManifests };
}

async function unlinkIfExists(fs: Fs, path: string): Promise<void> {
  await fs.unlink(path).catch((error: unknown) => {
    if ((error as { code?: string }).code !== "ENOENT") throw error;
  });
}
