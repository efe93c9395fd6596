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
 */
import { join } from "node:path";
import { CorruptStateError } from "../../errors/errors.ts";
import type { Fs } from "../../platform/fs.ts";
import { fsyncDirOrDie } from "../atomic-file.ts";
import { loadState, saveState } from "../state-file.ts";
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
  return { baseOffset, replaced: replaced as number[] };
}

/** The `.cleaned` path of the file with extension `ext` of the segment based at `baseOffset`. */
export function cleanedPath(dir: string, baseOffset: number, ext: (typeof EXTENSIONS)[number]): string {
  return join(dir, segmentFileName(baseOffset, ext) + CLEANED_SUFFIX);
}

/** Steps 1-3 of the file comment. The `.cleaned` files must already be durable. */
export async function commitSwap(fs: Fs, dir: string, manifest: SwapManifest, afterCommit?: () => void): Promise<void> {
  await saveState(fs, join(dir, SWAP_MANIFEST_FILE), FORMAT, VERSION, { ...manifest });
  afterCommit?.();
  await completeSwap(fs, dir, manifest);
}

/** Steps 2 and 3; safe to repeat after a crash at any point of them. */
export async function completeSwap(fs: Fs, dir: string, manifest: SwapManifest): Promise<void> {
  for (const ext of EXTENSIONS) {
    const from = cleanedPath(dir, manifest.baseOffset, ext);
    if ((await fs.stat(from)) !== undefined) await fs.rename(from, join(dir, segmentFileName(manifest.baseOffset, ext)));
  }
  for (const base of manifest.replaced.slice(1)) {
    for (const ext of EXTENSIONS) await unlinkIfExists(fs, join(dir, segmentFileName(base, ext)));
  }
  await fsyncDirOrDie(fs, dir, "after swapping cleaned segments in");
  await unlinkIfExists(fs, join(dir, SWAP_MANIFEST_FILE));
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
 * files are the truth could lose data or resurrect removed records.
 */
export async function recoverSwap(fs: Fs, dir: string): Promise<SwapRecovery> {
  const manifestPath = join(dir, SWAP_MANIFEST_FILE);
  const manifest = await loadState(fs, manifestPath, FORMAT, { current: VERSION, parse });
  if (manifest !== undefined) {
    const newLog = join(dir, segmentFileName(manifest.baseOffset, "log"));
    const cleanedLog = cleanedPath(dir, manifest.baseOffset, "log");
    if ((await fs.stat(cleanedLog)) === undefined && (await fs.stat(newLog)) === undefined) {
      throw new CorruptStateError(manifestPath, `names segment ${manifest.baseOffset}, but neither its cleaned nor its swapped file exists`);
    }
    await completeSwap(fs, dir, manifest);
  }
  const removedCleanedFiles: string[] = [];
  for (const name of await fs.readdir(dir)) {
    if (!name.endsWith(CLEANED_SUFFIX)) continue;
    await fs.unlink(join(dir, name));
    removedCleanedFiles.push(name);
  }
  if (removedCleanedFiles.length > 0) await fsyncDirOrDie(fs, dir, "after removing leftover cleaned segment files");
  return { completed: manifest, removedCleanedFiles };
}

async function unlinkIfExists(fs: Fs, path: string): Promise<void> {
  await fs.unlink(path).catch((error: unknown) => {
    if ((error as { code?: string }).code !== "ENOENT") throw error;
  });
}
