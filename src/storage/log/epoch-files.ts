/**
 * Files of a leader epoch (docs/architecture.md, "Files of a leader epoch"). In cluster mode several
 * brokers share one data directory, and a former leader that was frozen past its lease may still write
 * when it wakes up. Every file a leader at epoch E >= 1 writes carries E in its name, so that the former
 * leader (epoch < E) never writes into a file its successor writes or trusts:
 *
 *   segment files     `<base 20 digits>.e<E>.log` (and `.index`, `.timeindex`, `.txnindex`): segment.ts
 *   metadata files    `.e<E>` before the name's last extension: `log-checkpoint.e<E>.json`,
 *                     `cleaner-checkpoint.e<E>.json`, `producer-state.e<E>.snapshot`, and
 *                     `leader-epoch-checkpoint.e<E>` (no extension: appended)
 *
 * Epoch 0 (single-broker mode) keeps the plain names, so a directory written before this scheme opens
 * unchanged. Which file of a kind is trusted, and which bytes of the segments are the log, is decided
 * from the epochs alone; see `fencedFrom`.
 */
import type { Fs } from "../../platform/fs.ts";
import type { EpochEntry } from "./leader-epoch-checkpoint.ts";

/** The name of `name`'s file for `epoch`: `name` itself for epoch 0. */
export function epochFileName(name: string, epoch: number): string {
  if (!Number.isInteger(epoch) || epoch < 0) throw new RangeError(`leader epoch ${epoch} is not an integer >= 0`);
  if (epoch === 0) return name;
  const dot = name.lastIndexOf(".");
  return dot > 0 ? `${name.slice(0, dot)}.e${epoch}${name.slice(dot)}` : `${name}.e${epoch}`;
}

/** The epoch whose file of `name` `fileName` is, undefined when it is none of them. */
export function epochOfFileName(fileName: string, name: string): number | undefined {
  if (fileName === name) return 0;
  const dot = name.lastIndexOf(".");
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const extension = dot > 0 ? name.slice(dot) : "";
  if (!fileName.startsWith(`${stem}.e`) || !fileName.endsWith(extension)) return undefined;
  const digits = fileName.slice(stem.length + 2, fileName.length - extension.length);
  if (!/^[1-9]\d{0,9}$/.test(digits)) return undefined;
  return Number(digits);
}

/** The epochs (ascending) for which `names` (a directory listing) holds a file of `name`. */
export function epochsOf(names: readonly string[], name: string): number[] {
  const epochs: number[] = [];
  for (const fileName of names) {
    const epoch = epochOfFileName(fileName, name);
    if (epoch !== undefined) epochs.push(epoch);
  }
  return epochs.sort((a, b) => a - b);
}

/** The newest epoch with a file of `name` in `dir`, undefined when there is none. */
export async function newestEpochFile(fs: Fs, dir: string, name: string): Promise<number | undefined> {
  const names = (await fs.stat(dir)) === undefined ? [] : await fs.readdir(dir);
  return epochsOf(names, name).at(-1);
}

/**
 * Where the part of the log that leader epoch `epoch` may have written ends: the start offset of the
 * first later epoch, by the history, and by the segment files of later epochs (`laterSegmentBases`: the
 * base offset of every segment file with its epoch), whichever is lower. Infinity when no later epoch
 * exists. A batch of `epoch` at or past it, or a segment file of `epoch` based at or past it, is a fenced
 * former leader's late write. -1 (a batch whose producer left the field unset and that was appended
 * without a stamp) is never fenced.
 */
export function fencedFrom(
  epoch: number,
  history: readonly EpochEntry[],
  segmentFiles: readonly { baseOffset: number; epoch: number }[] = [],
): number {
  if (epoch < 0) return Number.POSITIVE_INFINITY;
  let limit = Number.POSITIVE_INFINITY;
  for (const entry of history) {
    if (entry.epoch > epoch) {
      limit = Math.min(limit, entry.startOffset);
      break;
    }
  }
  for (const file of segmentFiles) if (file.epoch > epoch && file.baseOffset < limit) limit = file.baseOffset;
  return limit;
}
