/**
 * The transactional offset completion queue (docs/architecture.md, "Slot take-over (group coordinator)"):
 * a transaction coordinator that decided a transaction one of whose groups lives in a group slot this
 * broker does not serve leaves the completion (commit or discard the producer's staged offsets) here, and
 * whoever owns that slot, now or after a move, applies it and removes the file
 * (GroupCoordinator.drainCompletions).
 *
 *   <data>/__cluster/offset_queue/slot-<N>/<producerId>-<producerEpoch>-<decidedMs>-<commit|abort>.json
 *
 * Keyed by the group slot, not by a broker: the staged offsets are in the slot's files, and the slot may
 * move between the decision and its completion; the broker that loads the slot finds the queue with it.
 * Each file is a state file (state-file.ts: format "txn-offset-completion", version, CRC-32, written
 * atomically: tmp + fsync + rename + fsync dir) naming the groups of that slot. The name is unique per
 * decision, as the marker queue's: a retried decision overwrites its own file and nothing else.
 *
 * `remove` is durable (the directory is fsynced after the unlink), unlike the marker queue's: a completion
 * is keyed by producer id in the slot (the staged offsets carry no transaction identity), so a completion
 * that came back after a crash, once the same producer had staged offsets of its next transaction, would
 * complete those. The group coordinator therefore stages nothing in a slot while a completion of it is
 * being applied and removed, and a removal is on disk before the next staging starts.
 */
import { join } from "node:path";
import type { Fs } from "../platform/fs.ts";
import { ensureDir, unlinkDurably } from "./atomic-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const OFFSET_QUEUE_FORMAT = "txn-offset-completion";
export const OFFSET_QUEUE_VERSION = 1;

/** pid, epoch, decision time, result. */
const QUEUE_FILE = /^(\d+)-(\d+)-(\d+)-(commit|abort)\.json$/;

export interface QueuedCompletion {
  readonly transactionalId: string;
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly result: "commit" | "abort";
  /** The transaction's groups that live in this slot, sorted. */
  readonly groups: readonly string[];
  /** The coordinator's decision time (its Prepare* entry's update time). */
  readonly decidedMs: number;
}

export function offsetQueueDir(dataDir: string): string {
  return join(dataDir, "__cluster", "offset_queue");
}

export function offsetQueueSlotDir(dataDir: string, slot: number): string {
  return join(offsetQueueDir(dataDir), `slot-${slot}`);
}

/** `<pid>-<epoch>-<decidedMs>-<commit|abort>.json` */
export function completionFileName(completion: Pick<QueuedCompletion, "producerId" | "producerEpoch" | "decidedMs" | "result">): string {
  return `${completion.producerId}-${completion.producerEpoch}-${completion.decidedMs}-${completion.result}.json`;
}

/** Applied in decision order: a producer's later transaction must not be completed before its earlier one. */
function compareQueueFiles(a: RegExpExecArray, b: RegExpExecArray): number {
  const key = (m: RegExpExecArray) => [Number(m[1]), Number(m[2]), Number(m[3])];
  const [ka, kb] = [key(a), key(b)];
  for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

export class OffsetCompletionQueue {
  private readonly ensured = new Set<number>();

  constructor(
    private readonly fs: Fs,
    private readonly dataDir: string,
  ) {}

  /** Writes (or overwrites) a completion for group slot `slot`, durably. Returns the file's path. */
  async enqueue(slot: number, completion: QueuedCompletion): Promise<string> {
    const dir = await this.dirOf(slot);
    const path = join(dir, completionFileName(completion));
    await saveState(this.fs, path, OFFSET_QUEUE_FORMAT, OFFSET_QUEUE_VERSION, { ...completion, groups: [...completion.groups].sort() });
    return path;
  }

  /** The queued files of `slot` (paths), in the order they must be applied. */
  async list(slot: number): Promise<string[]> {
    const dir = offsetQueueSlotDir(this.dataDir, slot);
    if ((await this.fs.stat(dir)) === undefined) return [];
    return (await this.fs.readdir(dir))
      .map((name) => QUEUE_FILE.exec(name))
      .filter((match) => match !== null)
      .sort(compareQueueFiles)
      .map((match) => join(dir, match[0]));
  }

  /** One queued file: CorruptStateError (naming the file) when it fails its checks, undefined when it is gone. */
  read(path: string): Promise<QueuedCompletion | undefined> {
    return loadState(this.fs, path, OFFSET_QUEUE_FORMAT, { current: OFFSET_QUEUE_VERSION, parse: parseQueuedCompletion });
  }

  /** Removes a queued file once its effect is durable, and makes the removal durable (see the file comment). */
  async remove(path: string): Promise<void> {
    await unlinkDurably(this.fs, path);
  }

  private async dirOf(slot: number): Promise<string> {
    if (!Number.isInteger(slot) || slot < 0) throw new RangeError(`invalid group slot ${slot}`);
    const dir = offsetQueueSlotDir(this.dataDir, slot);
    if (!this.ensured.has(slot)) {
      await ensureDir(this.fs, dir);
      // Tmp files are not cleaned: any broker writes into this queue, and one may be another's write in
      // flight (a leftover one only takes a directory entry).
      this.ensured.add(slot);
    }
    return dir;
  }
}

export function parseQueuedCompletion(body: unknown): QueuedCompletion {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string, unknown>;
  const int = (key: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const value = b[key];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) throw new Error(`${key} is not a valid integer`);
    return value;
  };
  if (typeof b.transactionalId !== "string" || b.transactionalId.length === 0) throw new Error("transactionalId is not a non-empty string");
  if (b.result !== "commit" && b.result !== "abort") throw new Error(`result ${JSON.stringify(b.result)} is neither commit nor abort`);
  if (!Array.isArray(b.groups) || b.groups.length === 0 || !b.groups.every((g: unknown) => typeof g === "string" && g.length > 0)) {
    throw new Error("groups is not a non-empty list of group ids");
  }
  return {
    transactionalId: b.transactionalId,
    producerId: int("producerId", 0),
    producerEpoch: int("producerEpoch", 0, 32_767),
    result: b.result,
    groups: b.groups as string[],
    decidedMs: int("decidedMs", 0),
  };
}
