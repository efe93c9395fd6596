/**
 * The transaction marker queue (docs/architecture.md, "Storage rules" and "Ownership and cluster mode"): a
 * transaction coordinator that decided a transaction whose partitions another broker leads leaves the markers
 * for that broker here, and the broker's watcher (cluster/marker-queue-watcher.ts) appends them and removes
 * the file.
 *
 *   <data>/__cluster/marker_queue/to-<broker>/<producerId>-<producerEpoch>-<decidedMs>-<commit|abort>.json
 *
 * Each file is a state file (state-file.ts: format "txn-markers", version, CRC-32, written atomically:
 * tmp + fsync + rename + fsync dir) holding one transaction's markers for the partitions of one broker.
 * The name is unique per transaction: with transaction version 1 a producer keeps its id and epoch from
 * one transaction to the next, so the name also carries the decision time, which the coordinator stamps
 * strictly later for each decision of an entry (domain/txn/txn-state.ts) and keeps in the Prepare* entry,
 * so a retry of the same decision overwrites its own file and nothing else. A watcher that hands markers
 * on to another leader uses the same name with a `-via-<broker>` suffix, so that it never overwrites the
 * coordinator's own file for that broker.
 *
 * `list` orders a producer's files by epoch, then decision time (numerically, not by name): its markers
 * must reach a partition in the order the transactions were decided, or a later transaction's marker
 * would end an earlier transaction's batches there.
 *
 * Version 1 files (before the decision time) are still read: their name has no decision time, and they
 * count as decided at time 0, before any version 2 file of the same producer epoch.
 */
import { basename, join } from "node:path";
import type { TopicPartitions } from "../domain/txn/txn-state.ts";
import type { Fs } from "../platform/fs.ts";
import { ensureDir, unlinkDurably } from "./atomic-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const MARKER_QUEUE_FORMAT = "txn-markers";
export const MARKER_QUEUE_VERSION = 2;
const MARKER_QUEUE_ACCEPTED_VERSIONS = [1] as const;

/** pid, epoch, decision time (absent in version 1 names), result, forwarding broker. */
const QUEUE_FILE = /^(\d+)-(\d+)-(?:(\d+)-)?(commit|abort)(?:-via-(\d+))?\.json$/;

export interface QueuedMarkers {
  readonly transactionalId: string;
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly coordinatorEpoch: number;
  readonly result: "commit" | "abort";
  /** The partitions of the destination broker, in the normalized TopicPartitions form. */
  readonly partitions: readonly TopicPartitions[];
  /** The coordinator's decision time (its Prepare* entry's update time); 0 for a version 1 file. */
  readonly decidedMs: number;
}

export function markerQueueDir(dataDir: string): string {
  return join(dataDir, "__cluster", "marker_queue");
}

export function markerQueueBrokerDir(dataDir: string, brokerId: number): string {
  return join(markerQueueDir(dataDir), `to-${brokerId}`);
}

/** The file name of a transaction's markers: `<pid>-<epoch>-<decidedMs>-<commit|abort>.json`, plus `-via-<b>` when forwarded. */
export function markerFileName(markers: Pick<QueuedMarkers, "producerId" | "producerEpoch" | "decidedMs" | "result">, viaBroker?: number): string {
  const via = viaBroker === undefined ? "" : `-via-${viaBroker}`;
  return `${markers.producerId}-${markers.producerEpoch}-${markers.decidedMs}-${markers.result}${via}.json`;
}

/** The order in which a queue's files are applied: by producer, epoch and decision time, numerically. */
function compareQueueFiles(a: RegExpExecArray, b: RegExpExecArray): number {
  const key = (m: RegExpExecArray) => [Number(m[1]), Number(m[2]), Number(m[3] ?? 0), Number(m[5] ?? -1)];
  const [ka, kb] = [key(a), key(b)];
  for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}

export class MarkerQueue {
  private readonly ensured = new Set<number>();

  constructor(
    private readonly fs: Fs,
    private readonly dataDir: string,
  ) {}

  /** Writes (or overwrites) the markers for `brokerId`, durably. Returns the file's path. */
  async enqueue(brokerId: number, markers: QueuedMarkers, viaBroker?: number): Promise<string> {
    const dir = await this.dirOf(brokerId);
    const path = join(dir, markerFileName(markers, viaBroker));
    await saveState(this.fs, path, MARKER_QUEUE_FORMAT, MARKER_QUEUE_VERSION, markers);
    return path;
  }

  /** The queued files for `brokerId` (paths), in the order they must be applied (see the file comment). */
  async list(brokerId: number): Promise<string[]> {
    const dir = markerQueueBrokerDir(this.dataDir, brokerId);
    if ((await this.fs.stat(dir)) === undefined) return [];
    return (await this.fs.readdir(dir))
      .map((name) => QUEUE_FILE.exec(name))
      .filter((match) => match !== null)
      .sort(compareQueueFiles)
      .map((match) => join(dir, match[0]));
  }

  /** One queued file (CorruptStateError when it fails its checks; undefined when it is gone). */
  read(path: string): Promise<QueuedMarkers | undefined> {
    return loadState(this.fs, path, MARKER_QUEUE_FORMAT, {
      current: MARKER_QUEUE_VERSION,
      accepted: MARKER_QUEUE_ACCEPTED_VERSIONS,
      migrate: (body, version) => (version === 1 && typeof body === "object" && body !== null ? { ...body, decidedMs: 0 } : body),
      parse: parseQueuedMarkers,
    });
  }

  /** Replaces a queued file with what is left of it (atomically). */
  async replace(path: string, markers: QueuedMarkers): Promise<void> {
    await saveState(this.fs, path, MARKER_QUEUE_FORMAT, MARKER_QUEUE_VERSION, markers);
  }

  /**
   * Removes a queued file once its markers are durable, durably (the directory fsynced): the coordinator
   * completes the transaction once no file of it is left (`filesOf`), and with transaction version 1 the
   * producer's next transaction keeps its id and epoch, so a file a crash brought back would end that next
   * transaction's batches on the partition.
   */
  async remove(path: string): Promise<void> {
    await unlinkDurably(this.fs, path);
  }

  /**
   * Every queued file of one decision, in any broker's queue (handed-on copies included), with the broker
   * it is queued for: the coordinator waits until there is none before it completes the transaction.
   */
  async filesOf(markers: Pick<QueuedMarkers, "producerId" | "producerEpoch" | "decidedMs" | "result">): Promise<{ brokerId: number; path: string }[]> {
    const root = markerQueueDir(this.dataDir);
    if ((await this.fs.stat(root)) === undefined) return [];
    const found: { brokerId: number; path: string }[] = [];
    for (const dirName of await this.fs.readdir(root)) {
      const broker = /^to-(\d+)$/.exec(dirName);
      if (broker === null) continue;
      const brokerId = Number(broker[1]);
      for (const path of await this.list(brokerId)) {
        const match = QUEUE_FILE.exec(basename(path));
        if (match === null) continue;
        if (Number(match[1]) === markers.producerId && Number(match[2]) === markers.producerEpoch && Number(match[3] ?? 0) === markers.decidedMs && match[4] === markers.result) {
          found.push({ brokerId, path });
        }
      }
    }
    return found;
  }

  private async dirOf(brokerId: number): Promise<string> {
    const dir = markerQueueBrokerDir(this.dataDir, brokerId);
    if (!this.ensured.has(brokerId)) {
      await ensureDir(this.fs, dir);
      // Tmp files are not cleaned: any broker writes into this queue, and one may be another's write in
      // flight (a leftover one only takes a directory entry).
      this.ensured.add(brokerId);
    }
    return dir;
  }
}

export function parseQueuedMarkers(body: unknown): QueuedMarkers {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("body is not an object");
  const b = body as Record<string, unknown>;
  const int = (key: string, min: number): number => {
    const value = b[key];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) throw new Error(`${key} is not a valid integer`);
    return value;
  };
  if (typeof b.transactionalId !== "string") throw new Error("transactionalId is not a string");
  if (b.result !== "commit" && b.result !== "abort") throw new Error(`result ${JSON.stringify(b.result)} is neither commit nor abort`);
  if (!Array.isArray(b.partitions)) throw new Error("partitions is not an array");
  const partitions = b.partitions.map((item: unknown): TopicPartitions => {
    if (typeof item !== "object" || item === null) throw new Error("a partitions item is not an object");
    const t = item as Record<string, unknown>;
    if (typeof t.topic !== "string" || t.topic.length === 0) throw new Error("a partitions item has no topic");
    if (!Array.isArray(t.partitions) || !t.partitions.every((p: unknown) => typeof p === "number" && Number.isSafeInteger(p) && p >= 0)) {
      throw new Error(`partitions of ${t.topic} are not partition numbers`);
    }
    return { topic: t.topic, partitions: t.partitions as number[] };
  });
  const producerEpoch = int("producerEpoch", 0);
  if (producerEpoch > 32_767) throw new Error("producerEpoch is not an int16");
  return {
    transactionalId: b.transactionalId,
    producerId: int("producerId", 0),
    producerEpoch,
    coordinatorEpoch: int("coordinatorEpoch", -1),
    result: b.result,
    partitions,
    decidedMs: int("decidedMs", 0),
  };
}
