/**
 * Durable topic metadata: one state file per topic in `<data>/__cluster/topics/<topic>.json`, and one
 * directory per partition, `<data>/<topic>-<partition>/`, stamped with the topic id in its
 * `partition.metadata` file.
 *
 * The topic id stamp is what keeps a re-created topic from adopting the data of a deleted one of the
 * same name (Apache's KIP-516 problem): a partition directory is used only if its stamp matches the live
 * topic's id. The orderings below make every crash point recoverable by `open`:
 *
 * - create / addPartitions: partition directories (with their stamp) are made durable first, then the
 *   topic file is written. The topic file is the commit point; a crash before it leaves directories
 *   that belong to no live topic (or to partitions beyond the live count), which `open` removes.
 * - delete: partition directories are renamed to `<topic>-<p>.<topicId>-delete` and the rename made
 *   durable (the commit point: a rename is never undone by a later step), then the topic file is
 *   removed, then the renamed directories. At `open`, a `-delete` directory whose id matches a live
 *   topic means a delete was interrupted after its commit point, so the delete is finished; every
 *   `-delete` directory is then removed.
 *
 * Mutations run one at a time (a serial queue), each answered only once durable. Requests that are
 * merely invalid are answered as data (a Kafka error name and message, mapped to a code by the
 * handler). A failed I/O step throws, and poisons the store: the in-memory view may then disagree with
 * the disk, and only the recovery in `open` knows how to reconcile them, so the caller must treat the
 * error as fatal and every later mutation fails too.
 *
 * `incarnation` starts at 1 and increases with every change to the record (partitions, configs), so
 * that brokers sharing the data directory can tell cheaply whether a cached copy is stale.
 *
 * Brokers sharing the data directory (cluster mode): the repairs of `open` (removing tmp files, stale
 * and `-delete` directories, finishing interrupted deletes) would destroy the half-done work of another
 * broker that is creating or deleting a topic at that moment. So in cluster mode `open` is told
 * `cleanUpOrphans: false`, and `cleanUpOrphans()` is called later while the broker holds the cluster's
 * metadata gate (broker/metadata-mutations.ts), under which no other broker changes topics.
 * `refresh`/`refreshAll` read what other brokers changed; `onChange` reports every change, made here
 * or read from the files.
 */
import { join } from "node:path";
import { topicConfigProblems } from "../domain/topic-config.ts";
import { topicCollisionReason, topicNameInvalidReason } from "../domain/topic-name.ts";
import { CorruptStateError, FatalError } from "../errors/errors.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import { cleanTmpFiles, ensureDir, fsyncDirOrDie, isTmpFileName } from "./atomic-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const TOPIC_FORMAT = "topic";
export const TOPIC_FORMAT_VERSION = 1;
export const PARTITION_METADATA_FORMAT = "partition-metadata";
export const PARTITION_METADATA_VERSION = 1;
export const PARTITION_METADATA_FILE = "partition.metadata";

/** Each partition costs a directory and several fsyncs to create; a bound keeps one request sane. */
export const PARTITIONS_PER_TOPIC_MAX = 10_000;

export interface TopicRecord {
  readonly name: string;
  /** A random (v4) UUID in its canonical lowercase text form. */
  readonly topicId: string;
  readonly partitions: number;
  /** Only the configs set on the topic; defaults are not stored (see domain/topic-config.ts). */
  readonly configs: Readonly<Record<string, string>>;
  readonly incarnation: number;
  readonly createdMs: number;
}

export interface PartitionMetadata {
  readonly topic: string;
  readonly partition: number;
  readonly topicId: string;
}

/** Error names are Kafka's, so the handler maps them with the error table. */
export type TopicStoreError =
  | "TOPIC_ALREADY_EXISTS"
  | "INVALID_TOPIC_EXCEPTION"
  | "INVALID_PARTITIONS"
  | "INVALID_CONFIG"
  | "UNKNOWN_TOPIC_OR_PARTITION";

export type TopicChange = { ok: true; topic: TopicRecord } | { ok: false; error: TopicStoreError; message: string };

export interface TopicStoreOptions {
  /** Source of new topic ids; a random v4 UUID by default. Tests inject deterministic ones. */
  newTopicId?: () => string;
  /** Where recovery actions are reported (one line each); console.warn by default. */
  log?: (line: string) => void;
  /**
   * true (the default, single-broker mode): `open` repairs what a crash left (see the header). false
   * (cluster mode): `open` only loads, and the caller runs `cleanUpOrphans()` under the metadata gate.
   */
  cleanUpOrphans?: boolean;
}

/**
 * A change to the topics as this store sees it. `by` says whether this store made it ("this-broker") or
 * read it from the files another broker wrote ("refresh"). A topic deleted and created again under the
 * same name between two reads is reported as "deleted" then "created".
 */
export interface TopicStoreChange {
  readonly topic: string;
  readonly kind: "created" | "deleted" | "grown" | "reconfigured";
  readonly by: "this-broker" | "refresh";
  /** The record after the change; for "deleted", the record that was deleted. */
  readonly record: TopicRecord;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PARTITION_DIR = /^(.+)-(0|[1-9][0-9]{0,8})$/;
const DELETE_DIR = /^(.+)-(0|[1-9][0-9]{0,8})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-delete$/;

export class TopicStore {
  private readonly byName = new Map<string, TopicRecord>();
  private readonly byId = new Map<string, TopicRecord>();
  private tail: Promise<unknown> = Promise.resolve();
  private poisoned: unknown = undefined;
  private readonly topicsDir: string;
  private readonly newTopicId: () => string;
  private readonly log: (line: string) => void;
  private readonly listeners: ((change: TopicStoreChange) => void)[] = [];
  private orphansCleaned = false;

  /** Opened for cluster mode (`cleanUpOrphans: false`): other brokers write the same partition directories. */
  private readonly shared: boolean;

  private constructor(
    private readonly fs: Fs,
    readonly dataDir: string,
    private readonly clock: Clock,
    options: TopicStoreOptions,
  ) {
    this.topicsDir = join(dataDir, "__cluster", "topics");
    this.shared = options.cleanUpOrphans === false;
    this.newTopicId = options.newTopicId ?? randomTopicId;
    this.log = options.log ?? ((line) => console.warn(line));
  }

  /**
   * Loads every topic and brings the partition directories in line with them (see the header).
   * Throws CorruptStateError, naming the file, for a topic file or a live partition's stamp that
   * cannot be read: a topic is never dropped because its file is damaged.
   */
  static async open(fs: Fs, dataDir: string, clock: Clock, options: TopicStoreOptions = {}): Promise<TopicStore> {
    const store = new TopicStore(fs, dataDir, clock, options);
    await store.load();
    if (options.cleanUpOrphans !== false) await store.cleanUpOrphansNow();
    return store;
  }

  /**
   * The repairs `open` does in single-broker mode (tmp files, stale and `-delete` directories, deletes
   * interrupted after their commit point, live partitions whose directory is missing), for cluster mode:
   * call it while holding the metadata gate, after reading the topics again, so that no other broker is
   * half-way through a change it would undo. Runs in turn with the store's changes; a failed step poisons
   * the store as a failed change does. Running it again is harmless (it finds nothing left).
   */
  cleanUpOrphans(): Promise<void> {
    const run = this.tail.then(async () => {
      if (this.poisoned !== undefined) throw new FatalError("the topic store failed earlier; restart to recover", { cause: this.poisoned });
      try {
        await this.cleanUpOrphansNow();
      } catch (error) {
        this.poisoned = error;
        throw error;
      }
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Whether the repairs of `cleanUpOrphans` have run (at open or since). */
  get orphansCleanedUp(): boolean {
    return this.orphansCleaned;
  }

  /**
   * Tells `listener` about every later change (see TopicStoreChange), synchronously, once the change is
   * durable (this broker's) or read (another's). Returns the function that stops it. A listener that
   * throws is a bug in the listener; it is reported to the log and the others still hear the change.
   */
  onChange(listener: (change: TopicStoreChange) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const at = this.listeners.indexOf(listener);
      if (at >= 0) this.listeners.splice(at, 1);
    };
  }

  /**
   * Topics created, deleted or grown (partitions added), by this broker or read from another's change:
   * what moves partitions between brokers, so the ownership manager runs a round on it. Config changes
   * are not reported here (onChange has them).
   */
  onTopicsChanged(callback: (change: TopicStoreChange) => void): () => void {
    return this.onChange((change) => {
      if (change.kind !== "reconfigured") callback(change);
    });
  }

  /** Every topic, in name order. */
  list(): TopicRecord[] {
    return [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): TopicRecord | undefined {
    return this.byName.get(name);
  }

  getById(topicId: string): TopicRecord | undefined {
    return this.byId.get(topicId);
  }

  topicFile(name: string): string {
    return join(this.topicsDir, `${name}.json`);
  }

  partitionDir(name: string, partition: number): string {
    return join(this.dataDir, `${name}-${partition}`);
  }

  create(request: { name: string; partitions: number; configs?: Readonly<Record<string, string>> }): Promise<TopicChange> {
    return this.mutate(async () => {
      const { name, partitions } = request;
      const configs = { ...(request.configs ?? {}) };
      const nameReason = topicNameInvalidReason(name);
      if (nameReason !== null) return refuse("INVALID_TOPIC_EXCEPTION", nameReason);
      if (this.byName.has(name)) return refuse("TOPIC_ALREADY_EXISTS", `Topic '${name}' already exists.`);
      const collision = topicCollisionReason(name, this.byName.keys());
      if (collision !== null) return refuse("INVALID_TOPIC_EXCEPTION", collision);
      const partitionsReason = partitionCountReason(partitions);
      if (partitionsReason !== null) return refuse("INVALID_PARTITIONS", partitionsReason);
      const problem = topicConfigProblems(configs)[0];
      if (problem !== undefined) return refuse("INVALID_CONFIG", problem.reason);

      const topic = freeze({
        name,
        topicId: this.uniqueTopicId(),
        partitions,
        configs,
        incarnation: 1,
        createdMs: this.clock.nowMs(),
      });
      for (let p = 0; p < partitions; p++) await this.createPartitionDir(topic, p);
      await fsyncDirOrDie(this.fs, this.dataDir, `after creating the partition directories of ${name}`);
      await this.saveTopic(topic);
      this.remember(topic);
      this.emit({ topic: name, kind: "created", by: "this-broker", record: topic });
      return { ok: true, topic };
    });
  }

  delete(name: string): Promise<TopicChange> {
    return this.mutate(async () => {
      const topic = this.byName.get(name);
      if (topic === undefined) return unknownTopic(name);
      const doomed: string[] = [];
      for (let p = 0; p < topic.partitions; p++) {
        const from = this.partitionDir(name, p);
        if ((await this.fs.stat(from)) === undefined) continue;
        const to = join(this.dataDir, deleteDirName(topic, p));
        await this.fs.rename(from, to);
        doomed.push(to);
      }
      await fsyncDirOrDie(this.fs, this.dataDir, `after marking the partitions of ${name} for deletion`);
      // The delete is committed: from here on, a crash is finished by `open`.
      this.forget(topic);
      await this.fs.unlink(this.topicFile(name));
      await fsyncDirOrDie(this.fs, this.topicsDir, `after removing ${this.topicFile(name)}`);
      for (const dir of doomed) await this.fs.rmrf(dir);
      if (doomed.length > 0) await fsyncDirOrDie(this.fs, this.dataDir, `after removing the partitions of ${name}`);
      this.emit({ topic: name, kind: "deleted", by: "this-broker", record: topic });
      return { ok: true, topic };
    });
  }

  /** Raises the partition count to `total` (CreatePartitions). The count never shrinks. */
  addPartitions(name: string, total: number): Promise<TopicChange> {
    return this.mutate(async () => {
      const topic = this.byName.get(name);
      if (topic === undefined) return unknownTopic(name);
      if (total === topic.partitions) return refuse("INVALID_PARTITIONS", `Topic already has ${total} partitions.`);
      if (Number.isInteger(total) && total < topic.partitions) {
        return refuse(
          "INVALID_PARTITIONS",
          `Topic currently has ${topic.partitions} partitions, which is higher than the requested ${total}.`,
        );
      }
      const reason = partitionCountReason(total);
      if (reason !== null) return refuse("INVALID_PARTITIONS", reason);
      const updated = freeze({ ...topic, partitions: total, incarnation: topic.incarnation + 1 });
      for (let p = topic.partitions; p < total; p++) await this.createPartitionDir(updated, p);
      await fsyncDirOrDie(this.fs, this.dataDir, `after creating new partition directories of ${name}`);
      await this.saveTopic(updated);
      this.remember(updated);
      this.emit({ topic: name, kind: "grown", by: "this-broker", record: updated });
      return { ok: true, topic: updated };
    });
  }

  /** Replaces the topic's own configs (AlterConfigs; the incremental variant merges before calling). */
  setConfigs(name: string, configs: Readonly<Record<string, string>>): Promise<TopicChange> {
    return this.mutate(async () => {
      const topic = this.byName.get(name);
      if (topic === undefined) return unknownTopic(name);
      const problem = topicConfigProblems(configs)[0];
      if (problem !== undefined) return refuse("INVALID_CONFIG", problem.reason);
      const updated = freeze({ ...topic, configs: { ...configs }, incarnation: topic.incarnation + 1 });
      await this.saveTopic(updated);
      this.remember(updated);
      this.emit({ topic: name, kind: "reconfigured", by: "this-broker", record: updated });
      return { ok: true, topic: updated };
    });
  }

  /**
   * Reads one topic's file again, because another broker sharing the data directory changed it: the
   * record on disk replaces the one in memory, or the topic is forgotten when its file is gone. Runs in
   * turn with this store's own changes. A damaged file is a CorruptStateError naming it, and the topic
   * as it was is kept (never dropped because its file cannot be read); unlike a failed change, a failed
   * read does not poison the store, since nothing was written.
   */
  refresh(name: string): Promise<"created" | "changed" | "deleted" | "unchanged"> {
    const run = this.tail.then(() => this.refreshOne(name));
    this.tail = run.catch(() => {});
    return run;
  }

  /**
   * Reads every topic file again (those in the directory and those this store knows), as one step in
   * turn with the store's changes: what a broker does before it changes topics in cluster mode, so that
   * it decides on the latest state even if an announcement has not reached it yet. Stops at the first
   * damaged file (CorruptStateError naming it); the topics read before it are current, the rest as they
   * were.
   */
  refreshAll(): Promise<void> {
    const run = this.tail.then(async () => {
      await ensureDir(this.fs, this.topicsDir);
      const names = new Set(this.byName.keys());
      for (const entry of await this.fs.readdir(this.topicsDir)) {
        if (entry.endsWith(".json")) names.add(entry.slice(0, -".json".length));
      }
      for (const name of [...names].sort()) await this.refreshOne(name);
    });
    this.tail = run.catch(() => {});
    return run;
  }

  // ---- internals -------------------------------------------------------------------------------

  private async refreshOne(name: string): Promise<"created" | "changed" | "deleted" | "unchanged"> {
    if (topicNameInvalidReason(name) !== null) return "unchanged";
    const path = this.topicFile(name);
    const onDisk = await loadState(this.fs, path, TOPIC_FORMAT, { current: TOPIC_FORMAT_VERSION, parse: parseTopicRecord });
    const known = this.byName.get(name);
    if (onDisk === undefined) {
      if (known === undefined) return "unchanged";
      this.forget(known);
      this.emit({ topic: name, kind: "deleted", by: "refresh", record: known });
      return "deleted";
    }
    if (onDisk.name !== name) throw new CorruptStateError(path, `holds topic ${JSON.stringify(onDisk.name)}, expected ${JSON.stringify(name)}`);
    if (known !== undefined && known.topicId === onDisk.topicId && known.incarnation === onDisk.incarnation) return "unchanged";
    const twin = this.byId.get(onDisk.topicId);
    if (twin !== undefined && twin.name !== name) throw new CorruptStateError(path, `topic id ${onDisk.topicId} is also used by topic ${JSON.stringify(twin.name)}`);
    const record = freeze(onDisk);
    if (known !== undefined && known.topicId !== record.topicId) {
      this.forget(known);
      this.emit({ topic: name, kind: "deleted", by: "refresh", record: known });
    }
    this.remember(record);
    if (known === undefined || known.topicId !== record.topicId) {
      this.emit({ topic: name, kind: "created", by: "refresh", record });
      return "created";
    }
    this.emit({ topic: name, kind: record.partitions !== known.partitions ? "grown" : "reconfigured", by: "refresh", record });
    return "changed";
  }

  private emit(change: TopicStoreChange): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch (error) {
        this.log(`topic-store: a change listener failed on ${change.kind} ${change.topic}: ${String(error)}`);
      }
    }
  }

  private async cleanUpOrphansNow(): Promise<void> {
    for (const name of await cleanTmpFiles(this.fs, this.topicsDir)) {
      this.log(`topic-store: removed leftover tmp file ${join(this.topicsDir, name)}`);
    }
    await this.reconcileDirectories();
    this.orphansCleaned = true;
  }

  private mutate(operation: () => Promise<TopicChange>): Promise<TopicChange> {
    const run = this.tail.then(async () => {
      if (this.poisoned !== undefined) {
        throw new FatalError("the topic store failed earlier; restart to recover", { cause: this.poisoned });
      }
      try {
        return await operation();
      } catch (error) {
        this.poisoned = error;
        throw error;
      }
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async load(): Promise<void> {
    await ensureDir(this.fs, this.topicsDir);
    // Leftover tmp files are removed by cleanUpOrphans: in cluster mode one may be another broker's write in flight.
    for (const entry of await this.fs.readdir(this.topicsDir)) {
      if (!entry.endsWith(".json")) continue;
      const path = join(this.topicsDir, entry);
      const topic = await loadState(this.fs, path, TOPIC_FORMAT, {
        current: TOPIC_FORMAT_VERSION,
        parse: parseTopicRecord,
      });
      if (topic === undefined) continue;
      const expectedName = entry.slice(0, -".json".length);
      if (topic.name !== expectedName) {
        throw new CorruptStateError(path, `holds topic ${JSON.stringify(topic.name)}, expected ${JSON.stringify(expectedName)}`);
      }
      const twin = this.byId.get(topic.topicId);
      if (twin !== undefined) {
        throw new CorruptStateError(path, `topic id ${topic.topicId} is also used by topic ${JSON.stringify(twin.name)}`);
      }
      this.remember(topic);
    }
  }

  private async reconcileDirectories(): Promise<void> {
    const entries = await this.fs.readdir(this.dataDir);

    // Deletes interrupted after their commit point are finished first, so that the partition
    // directories of those topics are judged as belonging to no live topic.
    for (const entry of entries) {
      const doomed = DELETE_DIR.exec(entry);
      if (doomed === null) continue;
      const topic = this.byName.get(doomed[1]!);
      if (topic === undefined || topic.topicId !== doomed[3]) continue;
      this.log(`topic-store: finishing the deletion of topic ${topic.name} (${topic.topicId}) interrupted by a crash`);
      this.forget(topic);
      await this.fs.unlink(this.topicFile(topic.name));
      await fsyncDirOrDie(this.fs, this.topicsDir, `after removing ${this.topicFile(topic.name)}`);
      this.emit({ topic: topic.name, kind: "deleted", by: "this-broker", record: topic });
    }

    let removedAny = false;
    for (const entry of entries) {
      const path = join(this.dataDir, entry);
      if (DELETE_DIR.test(entry)) {
        this.log(`topic-store: removing ${path}, left by a deleted topic`);
        await this.fs.rmrf(path);
        removedAny = true;
        continue;
      }
      const match = PARTITION_DIR.exec(entry);
      if (match === null || topicNameInvalidReason(match[1]!) !== null) continue;
      const stat = await this.fs.stat(path);
      if (stat === undefined || !stat.isDirectory) continue;
      const reason = await this.staleReason(path, match[1]!, Number(match[2]));
      if (reason === null) continue;
      this.log(`topic-store: removing stale partition directory ${path} (${reason})`);
      await this.fs.rmrf(path);
      removedAny = true;
    }

    // A live partition without a directory cannot be produced by a crash (directories are durable
    // before the topic file names them); it was removed by hand. Recreate it empty, loudly.
    let createdAny = false;
    for (const topic of this.byName.values()) {
      for (let p = 0; p < topic.partitions; p++) {
        if ((await this.fs.stat(this.partitionDir(topic.name, p))) !== undefined) continue;
        this.log(`topic-store: partition directory ${this.partitionDir(topic.name, p)} of live topic is missing; recreating it empty`);
        await this.createPartitionDir(topic, p);
        createdAny = true;
      }
    }
    if (removedAny || createdAny) await fsyncDirOrDie(this.fs, this.dataDir, "after reconciling partition directories");
  }

  /**
   * Why the partition directory `path` must be removed, or null when it belongs to a live partition
   * (or is not recognisably ours, in which case it is left alone).
   */
  private async staleReason(path: string, topicName: string, partition: number): Promise<string | null> {
    const live = this.byName.get(topicName);
    const isLivePartition = live !== undefined && partition < live.partitions;
    // In cluster mode a live partition's tmp files are its leader's business (cleaned by its own open):
    // one may be another broker's write in flight.
    if (!(isLivePartition && this.shared)) {
      for (const name of await cleanTmpFiles(this.fs, path)) {
        this.log(`topic-store: removed leftover tmp file ${join(path, name)}`);
      }
    }
    const metadataPath = join(path, PARTITION_METADATA_FILE);
    let stamp: PartitionMetadata | undefined;
    try {
      stamp = await loadState(this.fs, metadataPath, PARTITION_METADATA_FORMAT, {
        current: PARTITION_METADATA_VERSION,
        parse: parsePartitionMetadata,
      });
    } catch (error) {
      // A damaged stamp on a live partition must stop the broker; on a dead one it changes nothing.
      if (isLivePartition || !(error instanceof CorruptStateError)) throw error;
      return `no live topic, and its ${PARTITION_METADATA_FILE} is corrupt: ${error.message}`;
    }
    if (stamp === undefined) {
      // Created but not yet stamped when the process died: empty, and never part of a live topic.
      if ((await this.fs.readdir(path)).filter((name) => !isTmpFileName(name)).length === 0) return `empty, without ${PARTITION_METADATA_FILE}`;
      if (isLivePartition) throw new CorruptStateError(metadataPath, "missing in a partition directory of a live topic");
      this.log(`topic-store: leaving ${path} alone: not empty and without ${PARTITION_METADATA_FILE}, so not recognisably bunka's`);
      return null;
    }
    if (live === undefined) return `topic ${topicName} does not exist (the directory has topic id ${stamp.topicId})`;
    if (stamp.topicId !== live.topicId) {
      return `topic id ${stamp.topicId} is not the live topic's ${live.topicId}`;
    }
    if (partition >= live.partitions) return `topic ${topicName} has only ${live.partitions} partitions`;
    if (stamp.topic !== topicName || stamp.partition !== partition) {
      throw new CorruptStateError(metadataPath, `names ${stamp.topic}-${stamp.partition}, expected ${topicName}-${partition}`);
    }
    return null;
  }

  /** Creates a fresh, stamped partition directory; the caller fsyncs the data directory after. */
  private async createPartitionDir(topic: TopicRecord, partition: number): Promise<void> {
    const dir = this.partitionDir(topic.name, partition);
    // The topic (or this partition of it) is not live, so anything already here is stale.
    if ((await this.fs.stat(dir)) !== undefined) {
      this.log(`topic-store: removing stale ${dir} before creating partition ${partition} of ${topic.name}`);
      await this.fs.rmrf(dir);
    }
    await this.fs.mkdirp(dir);
    const stamp: PartitionMetadata = { topic: topic.name, partition, topicId: topic.topicId };
    await saveState(this.fs, join(dir, PARTITION_METADATA_FILE), PARTITION_METADATA_FORMAT, PARTITION_METADATA_VERSION, stamp);
  }

  private async saveTopic(topic: TopicRecord): Promise<void> {
    await saveState(this.fs, this.topicFile(topic.name), TOPIC_FORMAT, TOPIC_FORMAT_VERSION, topic);
  }

  private uniqueTopicId(): string {
    // Bounded, because an injected generator could keep returning the same id.
    for (let attempt = 0; attempt < 100; attempt++) {
      const id = this.newTopicId();
      if (!UUID.test(id)) throw new Error(`topic id generator returned ${JSON.stringify(id)}, not a lowercase UUID`);
      if (!this.byId.has(id)) return id;
    }
    throw new Error("topic id generator keeps returning ids already in use");
  }

  private remember(topic: TopicRecord): void {
    const previous = this.byName.get(topic.name);
    if (previous !== undefined) this.byId.delete(previous.topicId);
    this.byName.set(topic.name, topic);
    this.byId.set(topic.topicId, topic);
  }

  private forget(topic: TopicRecord): void {
    this.byName.delete(topic.name);
    this.byId.delete(topic.topicId);
  }
}

/**
 * A random v4 UUID, skipping the ones Apache Kafka never hands out: the all-zero id and the metadata
 * topic's id (0...1) are reserved, and ids whose base64 form starts with '-' confuse command lines.
 */
export function randomTopicId(): string {
  for (;;) {
    const id = crypto.randomUUID();
    const firstByte = Number.parseInt(id.slice(0, 2), 16);
    if (firstByte >> 2 === 62) continue;
    if (/^[0-]+1?$/.test(id)) continue;
    return id;
  }
}

function deleteDirName(topic: TopicRecord, partition: number): string {
  return `${topic.name}-${partition}.${topic.topicId}-delete`;
}

function partitionCountReason(partitions: number): string | null {
  if (!Number.isInteger(partitions) || partitions < 1) return "Number of partitions must be larger than 0.";
  if (partitions > PARTITIONS_PER_TOPIC_MAX) {
    return `Number of partitions ${partitions} is above the maximum of ${PARTITIONS_PER_TOPIC_MAX} per topic.`;
  }
  return null;
}

function refuse(error: TopicStoreError, message: string): TopicChange {
  return { ok: false, error, message };
}

function unknownTopic(name: string): TopicChange {
  return refuse("UNKNOWN_TOPIC_OR_PARTITION", `Topic '${name}' does not exist.`);
}

function freeze(topic: TopicRecord): TopicRecord {
  Object.freeze(topic.configs);
  return Object.freeze(topic);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Checks the shape of a stored topic record; throws with the reason (loadState names the file). */
export function parseTopicRecord(body: unknown): TopicRecord {
  if (!isRecord(body)) throw new Error("not an object");
  const { name, topicId, partitions, configs, incarnation, createdMs } = body;
  if (typeof name !== "string" || topicNameInvalidReason(name) !== null) throw new Error(`invalid name ${JSON.stringify(name)}`);
  if (typeof topicId !== "string" || !UUID.test(topicId)) throw new Error(`invalid topicId ${JSON.stringify(topicId)}`);
  if (typeof partitions !== "number" || !Number.isInteger(partitions) || partitions < 1) {
    throw new Error(`invalid partitions ${JSON.stringify(partitions)}`);
  }
  if (!isRecord(configs) || Object.values(configs).some((v) => typeof v !== "string")) {
    throw new Error("configs must map names to strings");
  }
  if (typeof incarnation !== "number" || !Number.isInteger(incarnation) || incarnation < 1) {
    throw new Error(`invalid incarnation ${JSON.stringify(incarnation)}`);
  }
  if (typeof createdMs !== "number" || !Number.isFinite(createdMs)) throw new Error(`invalid createdMs ${JSON.stringify(createdMs)}`);
  return freeze({ name, topicId, partitions, configs: { ...(configs as Record<string, string>) }, incarnation, createdMs });
}

export function parsePartitionMetadata(body: unknown): PartitionMetadata {
  if (!isRecord(body)) throw new Error("not an object");
  const { topic, partition, topicId } = body;
  if (typeof topic !== "string") throw new Error(`invalid topic ${JSON.stringify(topic)}`);
  if (typeof partition !== "number" || !Number.isInteger(partition) || partition < 0) {
    throw new Error(`invalid partition ${JSON.stringify(partition)}`);
  }
  if (typeof topicId !== "string" || !UUID.test(topicId)) throw new Error(`invalid topicId ${JSON.stringify(topicId)}`);
  return { topic, partition, topicId };
}
