/**
 * Atomic replacement of small files: after a crash at any point, the target holds either its old
 * content or the new content, never a mix and never nothing (when it had content before).
 *
 * The sequence is the classic one: write a uniquely named tmp file in the same directory (rename is
 * atomic only within one file system), fsync it (so the new name can never point at unwritten blocks),
 * rename it over the target, and fsync the directory (so the rename itself survives a crash).
 *
 * Failure contract, which callers rely on:
 * - a failed fsync (of the tmp file or of the directory) throws FatalError: after it, the kernel may
 *   have dropped dirty pages and we cannot know what is on disk, so the process must exit and let
 *   recovery run at the next start;
 * - any other failure (open, write, ENOSPC, rename) throws the original error after removing the tmp
 *   file as best it can; the target still holds its old content.
 * Tmp files left by a crash are never read back (loaders ignore them) and `cleanTmpFiles` removes them.
 */
import { basename, dirname, join } from "node:path";
import { FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";

/** `<name>.<16 hex digits>.tmp`: unique per write, and recognisable by `cleanTmpFiles`. */
const TMP_NAME = /\.[0-9a-f]{16}\.tmp$/;

export function isTmpFileName(name: string): boolean {
  return TMP_NAME.test(name);
}

function tmpPathFor(path: string): string {
  const random = new Uint8Array(8);
  crypto.getRandomValues(random);
  const hex = Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
  return join(dirname(path), `${basename(path)}.${hex}.tmp`);
}

export async function writeFileAtomic(fs: Fs, path: string, bytes: Uint8Array): Promise<void> {
  const dir = dirname(path);
  const tmpPath = tmpPathFor(path);
  const handle = await fs.open(tmpPath, "w");
  try {
    await handle.write(bytes, 0);
    try {
      await handle.fsync();
    } catch (error) {
      throw new FatalError(`fsync of ${tmpPath} failed while writing ${path}`, { cause: error });
    }
  } catch (error) {
    await handle.close().catch(() => undefined);
    await fs.unlink(tmpPath).catch(() => undefined);
    throw error;
  }
  try {
    await handle.close();
    await fs.rename(tmpPath, path);
  } catch (error) {
    await fs.unlink(tmpPath).catch(() => undefined);
    throw error;
  }
  await fsyncDirOrDie(fs, dir, `after renaming ${tmpPath} to ${path}`);
}

/**
 * Removes `path` and makes the removal durable (its directory fsynced), so that a crash cannot bring it
 * back; a file already gone is fine. Resolves whether this call removed it.
 */
export async function unlinkDurably(fs: Fs, path: string): Promise<boolean> {
  const removed = await fs.unlink(path).then(
    () => true,
    (error: unknown) => {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
      return false;
    },
  );
  if (removed) await fsyncDirOrDie(fs, dirname(path), `after removing ${path}`);
  return removed;
}

/**
 * Removes tmp files that a crash left in `dir` (those `mayRemove` allows) and returns their names.
 * Harmless to skip (nothing reads tmp files); it only keeps the directory from filling up over many
 * crashes. A file that vanishes before it is removed is skipped.
 */
export async function cleanTmpFiles(fs: Fs, dir: string, mayRemove: (name: string) => boolean = () => true): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await fs.readdir(dir)) {
    if (!isTmpFileName(name) || !mayRemove(name)) continue;
    const stat = await fs.stat(join(dir, name));
    if (stat === undefined || stat.isDirectory) continue;
    // Gone meanwhile (renamed into place or removed by its writer, on a directory several brokers share):
    // nothing left to clean.
    const unlinked = await fs.unlink(join(dir, name)).then(
      () => true,
      (error: unknown) => {
        if ((error as { code?: string }).code === "ENOENT") return false;
        throw error;
      },
    );
    if (unlinked) removed.push(name);
  }
  if (removed.length > 0) await fsyncDirOrDie(fs, dir, "after removing leftover tmp files");
  return removed;
}

/**
 * Creates `dir` and any missing ancestors durably: each directory that did not exist is made durable by
 * an fsync of its parent, so that files later made durable inside it cannot vanish with it in a crash.
 */
export async function ensureDir(fs: Fs, dir: string): Promise<void> {
  const missing: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    const stat = await fs.stat(at);
    if (stat !== undefined) {
      if (!stat.isDirectory) throw new Error(`${at} exists and is not a directory`);
      break;
    }
    missing.push(at);
    if (dirname(at) === at) break;
  }
  if (missing.length === 0) return;
  await fs.mkdirp(dir);
  // Parents first, so that each fsync records an entry whose own parent is already durable.
  for (const created of missing.reverse()) {
    await fsyncDirOrDie(fs, dirname(created), `after creating ${created}`);
  }
}

/** fsync of a directory; its failure leaves the durability of recent renames unknown, hence fatal. */
export async function fsyncDirOrDie(fs: Fs, dir: string, context: string): Promise<void> {
  try {
    await fs.fsyncDir(dir);
  } catch (error) {
    throw new FatalError(`fsync of directory ${dir} failed ${context}`, { cause: error });
  }
}
