/**
 * `leader-epoch-checkpoint` in a partition directory: the partition's leader-epoch history, the
 * (epoch, startOffset) of every leader epoch that appended from that offset on, epochs and start offsets
 * strictly increasing (Apache's LeaderEpochFileCache). A versioned, checksummed state file (state-file.ts),
 * replaced atomically. A partition without the file has the implied history [(0, 0)]: single-broker mode
 * writes it only when the log start moves (DeleteRecords, retention), so opening a partition costs no fsync.
 *
 * In cluster mode a leader at epoch E >= 1 writes `leader-epoch-checkpoint.e<E>` (epoch-files.ts), and
 * the newest epoch's file is the history (`loadNewest`): a former leader rewriting its own file late
 * changes nothing a later recovery reads.
 */
import { CorruptStateError } from "../../errors/errors.ts";
import type { Fs } from "../../platform/fs.ts";
import { join } from "node:path";
import { loadState, saveState } from "../state-file.ts";
import { epochFileName, newestEpochFile } from "./epoch-files.ts";

export const LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint";
const FORMAT = "partition-leader-epoch-checkpoint";
const VERSION = 1;
const INT32_MAX = 2147483647;

/** Apache's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET. */
export const UNDEFINED_EPOCH = -1;
export const UNDEFINED_EPOCH_OFFSET = -1;

export interface EpochEntry {
  epoch: number;
  startOffset: number;
}

/** The history a partition has when its directory holds no file. */
export const IMPLIED_HISTORY: readonly EpochEntry[] = Object.freeze([Object.freeze({ epoch: 0, startOffset: 0 })]);

function parse(body: unknown): EpochEntry[] {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const entries = (body as Record<string, unknown>).entries;
  if (!Array.isArray(entries)) throw new Error("entries is not an array");
  const out: EpochEntry[] = [];
  for (const [i, entry] of entries.entries()) {
    if (typeof entry !== "object" || entry === null) throw new Error(`entries[${i}] is not an object`);
    const { epoch, startOffset } = entry as Record<string, unknown>;
    if (typeof epoch !== "number" || !Number.isInteger(epoch) || epoch < 0 || epoch > INT32_MAX) {
      throw new Error(`entries[${i}].epoch is ${JSON.stringify(epoch)}, expected an int32 >= 0`);
    }
    if (typeof startOffset !== "number" || !Number.isSafeInteger(startOffset) || startOffset < 0) {
      throw new Error(`entries[${i}].startOffset is ${JSON.stringify(startOffset)}, expected a non-negative integer`);
    }
    const previous = out.at(-1);
    if (previous !== undefined && (epoch <= previous.epoch || startOffset < previous.startOffset)) {
      throw new Error(`entries[${i}] (${epoch}, ${startOffset}) does not follow (${previous.epoch}, ${previous.startOffset})`);
    }
    out.push({ epoch, startOffset });
  }
  return out;
}

/**
 * The history of one partition, in memory and on disk. Every change is durable before it returns.
 */
export class LeaderEpochHistory {
  private constructor(
    private readonly fs: Fs,
    private path: string,
    private entries: EpochEntry[],
  ) {}

  private writes: Promise<void> = Promise.resolve();

  /** Loads the history: the implied one when the file is absent, CorruptStateError when it is damaged. */
  static async load(fs: Fs, path: string): Promise<LeaderEpochHistory> {
    const entries = await loadState(fs, path, FORMAT, { current: VERSION, parse });
    return new LeaderEpochHistory(fs, path, entries ?? IMPLIED_HISTORY.map((e) => ({ ...e })));
  }

  /**
   * The history in `dir` as the newest epoch's file holds it (see the file comment); the implied one
   * when there is none. Writes go to that file until `writeFileOf` moves them.
   */
  static async loadNewest(fs: Fs, dir: string): Promise<LeaderEpochHistory> {
    const epoch = (await newestEpochFile(fs, dir, LEADER_EPOCH_CHECKPOINT_FILE)) ?? 0;
    return LeaderEpochHistory.load(fs, join(dir, epochFileName(LEADER_EPOCH_CHECKPOINT_FILE, epoch)));
  }

  /** Every later write goes to epoch `epoch`'s file in `dir` (a leader at that epoch writes only its own). */
  writeFileOf(dir: string, epoch: number): void {
    this.path = join(dir, epochFileName(LEADER_EPOCH_CHECKPOINT_FILE, epoch));
  }

  /** The file the history is written to. */
  get filePath(): string {
    return this.path;
  }

  get all(): readonly EpochEntry[] {
    return this.entries;
  }

  /** The latest epoch, or UNDEFINED_EPOCH when the history is empty (every entry truncated away). */
  get latestEpoch(): number {
    return this.entries.at(-1)?.epoch ?? UNDEFINED_EPOCH;
  }

  /**
   * Makes `epoch` the partition's current leader epoch, starting at `logEndOffset`: appended durably when
   * it is above the latest one, nothing when it equals it, refused when below (a newer leader exists).
   * `rewrite`: write the file even when nothing changes (a take-over at the epoch already recorded must
   * still have the history in its own epoch's file).
   */
  async assign(epoch: number, logEndOffset: number, options: { rewrite?: boolean } = {}): Promise<void> {
    if (!Number.isInteger(epoch) || epoch < 0 || epoch > INT32_MAX) throw new RangeError(`leader epoch ${epoch} is not an int32 >= 0`);
    const latest = this.entries.at(-1);
    if (latest !== undefined && epoch < latest.epoch) {
      throw new CorruptStateError(this.path, `asked to lead at epoch ${epoch}, below the recorded epoch ${latest.epoch}: a newer leader exists`);
    }
    if (latest !== undefined && epoch === latest.epoch) {
      if (options.rewrite) await this.replace(this.entries);
      return;
    }
    if (latest !== undefined && logEndOffset < latest.startOffset) {
      throw new RangeError(`log end offset ${logEndOffset} is below epoch ${latest.epoch}'s start offset ${latest.startOffset}`);
    }
    // An epoch that never appended anything is replaced by its successor at the same offset.
    const kept = latest !== undefined && latest.startOffset === logEndOffset ? this.entries.slice(0, -1) : this.entries;
    await this.replace([...kept, { epoch, startOffset: logEndOffset }]);
  }

  /**
   * Apache's endOffsetFor, as a consumer validating its position (KIP-320) or a follower truncating
   * (KIP-101) reads it: for the latest epoch, the log end; for an older one, the largest recorded epoch
   * <= `requested` and the start of the next one; for one below every recorded epoch (retention removed
   * the history), `requested` itself and the first recorded start offset, so that the asker truncates to
   * the log start; UNDEFINED for UNDEFINED_EPOCH and for an epoch above the latest (a leader never has
   * such an epoch: the asker's view is newer than this history).
   */
  endOffsetFor(requested: number, logEndOffset: number): { epoch: number; endOffset: number } {
    const undefinedAnswer = { epoch: UNDEFINED_EPOCH, endOffset: UNDEFINED_EPOCH_OFFSET };
    if (requested === UNDEFINED_EPOCH) return undefinedAnswer;
    const latest = this.entries.at(-1);
    if (latest !== undefined && requested === latest.epoch) return { epoch: requested, endOffset: logEndOffset };
    const higher = this.entries.findIndex((e) => e.epoch > requested);
    if (higher < 0) return undefinedAnswer;
    const next = this.entries[higher]!;
    if (higher === 0) return { epoch: requested, endOffset: next.startOffset };
    return { epoch: this.entries[higher - 1]!.epoch, endOffset: next.startOffset };
  }

  /** The epoch that wrote `offset` (ListOffsets' leaderEpoch), UNDEFINED_EPOCH below the first entry. */
  epochOfOffset(offset: number): number {
    let epoch = UNDEFINED_EPOCH;
    for (const entry of this.entries) {
      if (entry.startOffset > offset) break;
      epoch = entry.epoch;
    }
    return epoch;
  }

  /**
   * The log was truncated to end at `endOffset` (a torn tail): entries starting at or past it go (Apache's
   * truncateFromEnd). `durable: false` changes the history in memory only (the partition re-derives it
   * from the log at every open); the file catches up with the next durable change.
   */
  async truncateFromEnd(endOffset: number, options: { durable: boolean } = { durable: true }): Promise<void> {
    const kept = this.entries.filter((e) => e.startOffset < endOffset);
    if (kept.length !== this.entries.length) await this.replace(kept, options.durable);
  }

  /**
   * The log start moved to `startOffset` (DeleteRecords, retention): entries wholly below it go and the
   * one covering it starts there (Apache's truncateFromStart). `durable` as for truncateFromEnd.
   */
  async truncateFromStart(startOffset: number, options: { durable: boolean } = { durable: true }): Promise<void> {
    let covering = -1;
    for (let i = 0; i < this.entries.length && this.entries[i]!.startOffset <= startOffset; i++) covering = i;
    if (covering < 0 || (covering === 0 && this.entries[0]!.startOffset === startOffset)) return;
    const kept = this.entries.slice(covering);
    kept[0] = { epoch: kept[0]!.epoch, startOffset };
    await this.replace(kept, options.durable);
  }

  /**
   * Writes are chained: a retention pass and a take-over may change the history at the same moment, and
   * each file written must hold every change made before it. Memory changes at once; the call resolves
   * once the file holding the change is durable.
   */
  private replace(entries: EpochEntry[], durable = true): Promise<void> {
    this.entries = entries;
    if (!durable) return this.writes;
    const write = this.writes.then(() => saveState(this.fs, this.path, FORMAT, VERSION, { entries: this.entries }));
    this.writes = write.catch(() => undefined);
    return write;
  }
}
