/**
 * The transaction coordinator's record of one transactional id (TxnEntry), its states, and the one
 * transition table that says which state may follow which (docs/architecture.md, "Transactions and
 * idempotence").
 *
 * States carry Apache Kafka's names, because DescribeTransactions and ListTransactions expose them on the
 * wire and operators know them. The table is Apache's TransactionState.validPreviousStates for
 * transaction version 1 (the only one bunka serves): for each target state, the states it may be entered
 * from. `transition` is the only place an entry changes state; it checks the table and the invariants each
 * target state must satisfy (Apache's TransactionMetadata.completeTransitionTo), and answers an error value
 * for anything else, never an exception, so that the coordinator can turn it into a protocol answer.
 *
 * Two states are never persisted: PrepareEpochFence is a step inside one decision (the fence of an old
 * session's open transaction, immediately followed by PrepareAbort, as in Apache where it only ever is a
 * pending state), and Dead is the step before an expired id is removed. `parseTxnEntry` refuses both.
 *
 * Pure: no I/O, no clock reads (`nowMs` is an argument), no awaits. Entries are immutable plain objects
 * (JSON-serializable as they are), so a store can hand them out and share them without copying.
 */

/**
 * Every state, in the order of Apache's TransactionState (the one list of them: the side-port, its
 * metrics and the CLI name them from here, in this order).
 */
export const TXN_STATES = [
  "Empty",
  "Ongoing",
  "PrepareCommit",
  "PrepareAbort",
  "CompleteCommit",
  "CompleteAbort",
  "Dead",
  "PrepareEpochFence",
] as const;

export type TxnState = (typeof TXN_STATES)[number];

/**
 * The transition table: target state -> the states it may be entered from. Apache's validPreviousStates
 * for transaction version 1 (version 2 also lets PrepareAbort follow Empty and Complete*, for its
 * epoch-bump-per-transaction protocol, which bunka does not serve).
 *
 * - Empty: InitProducerId (first allocation from the blank entry, epoch bump, producer id rotation).
 * - Ongoing: AddPartitionsToTxn / AddOffsetsToTxn, starting a transaction or adding to the open one.
 * - PrepareCommit / PrepareAbort: EndTxn (the decision, persisted before any marker exists).
 *   PrepareAbort also follows PrepareEpochFence: the abort of a fenced session's open transaction.
 * - CompleteCommit / CompleteAbort: after the markers and the offset hook are done.
 * - PrepareEpochFence: InitProducerId or the timeout reaper finding an open transaction.
 * - Dead: an idle id expired (transactional.id.expiration.ms), just before it is removed.
 */
export const VALID_PREVIOUS_STATES: { readonly [Target in TxnState]: readonly TxnState[] } = {
  Empty: ["Empty", "CompleteCommit", "CompleteAbort"],
  Ongoing: ["Ongoing", "Empty", "CompleteCommit", "CompleteAbort"],
  PrepareCommit: ["Ongoing"],
  PrepareAbort: ["Ongoing", "PrepareEpochFence"],
  CompleteCommit: ["PrepareCommit"],
  CompleteAbort: ["PrepareAbort"],
  PrepareEpochFence: ["Ongoing"],
  Dead: ["Empty", "CompleteCommit", "CompleteAbort"],
};

/** States an entry may have on disk, in TXN_STATES order (see the header for why the other two never are). */
export const PERSISTED_TXN_STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"] as const satisfies readonly TxnState[];
export const PERSISTED_STATES: ReadonlySet<TxnState> = new Set<TxnState>(PERSISTED_TXN_STATES);

/** States in which a transaction is open: begun and not yet completed, so it holds partitions' last stable offset. */
export const OPEN_TXN_STATES: readonly TxnState[] = ["Ongoing", "PrepareCommit", "PrepareAbort"];

/** States from which an idle transactional id may expire (Apache's isExpirationAllowed). */
export const EXPIRABLE_STATES: ReadonlySet<TxnState> = new Set<TxnState>(["Empty", "CompleteCommit", "CompleteAbort"]);

/** States in which a decision is made but its markers may not all exist yet (start-up recovery drives them on). */
export const PREPARE_STATES: ReadonlySet<TxnState> = new Set<TxnState>(["PrepareCommit", "PrepareAbort"]);

export const NO_PRODUCER_ID = -1;
export const NO_PRODUCER_EPOCH = -1;
/** `ongoingSinceMs` of an entry that has not started a transaction since its last InitProducerId. */
export const NO_TXN_START_MS = -1;
/** The largest producer epoch (int16). Only the coordinator's fence may reach it; clients never get it. */
export const PRODUCER_EPOCH_MAX = 32_767;

/**
 * Apache's isEpochExhausted: a producer id whose epoch reached 32766 gets no further bump through
 * InitProducerId (the next one rotates to a new producer id), so that the coordinator can always fence
 * the current session by one more bump, to 32767.
 */
export function isEpochExhausted(epoch: number): boolean {
  return epoch >= PRODUCER_EPOCH_MAX - 1;
}

/** The partitions of one topic in a transaction: ascending, no duplicates. */
export interface TopicPartitions {
  readonly topic: string;
  readonly partitions: readonly number[];
}

export interface TxnEntry {
  readonly transactionalId: string;
  readonly producerId: number;
  /**
   * Apache's previousProducerId: the producer id before the last InitProducerId transition (equal to
   * `producerId` unless that transition rotated to a new id), or -1 before the first one. A retry of an
   * InitProducerId that rotated the id is recognised by it.
   */
  readonly lastProducerId: number;
  readonly epoch: number;
  /**
   * Apache's lastProducerEpoch: the epoch a producer that asked for a bump with its current (id, epoch)
   * had before it (so its retry gets the current epoch back), -1 when the last bump fenced its holder.
   */
  readonly lastEpoch: number;
  readonly timeoutMs: number;
  readonly state: TxnState;
  /** The transaction's partitions, by topic name ascending. Kept through Prepare*, cleared by Complete*. */
  readonly partitions: readonly TopicPartitions[];
  /** Consumer groups whose staged offsets belong to the transaction (AddOffsetsToTxn), ascending. */
  readonly groups: readonly string[];
  /** Apache's txnStartTimestamp: when the open (or last) transaction began, or NO_TXN_START_MS. */
  readonly ongoingSinceMs: number;
  /** Apache's txnLastUpdateTimestamp: the time of the last transition; expiry measures idleness from it. */
  readonly updatedMs: number;
}

/** The fields a transition may change; state and updatedMs are set by `transition` itself. */
export interface TxnChanges {
  readonly producerId?: number;
  readonly lastProducerId?: number;
  readonly epoch?: number;
  readonly lastEpoch?: number;
  readonly timeoutMs?: number;
  readonly partitions?: readonly TopicPartitions[];
  readonly groups?: readonly string[];
  readonly ongoingSinceMs?: number;
}

export type TransitionResult =
  | { readonly ok: true; readonly entry: TxnEntry }
  | { readonly ok: false; readonly from: TxnState; readonly to: TxnState; readonly reason: string };

/**
 * The empty partition and group lists every entry at rest shares (Empty, Complete*, Dead), frozen so that
 * nobody can add to all of them at once. An entry is never modified in place, and at 100k transactional
 * ids two fresh empty arrays per entry were a third of the coordinator's heap objects.
 */
export const NO_TXN_PARTITIONS: readonly TopicPartitions[] = Object.freeze([]);
export const NO_TXN_GROUPS: readonly string[] = Object.freeze([]);

const sharedIfEmpty = <T>(list: readonly T[], empty: readonly T[]): readonly T[] => (list.length === 0 ? empty : list);

/**
 * The entry a transactional id has before its first InitProducerId completes, as Apache creates it: the
 * new producer id, no epoch yet, state Empty. It is never persisted; the first InitProducerId moves it to
 * Empty at epoch 0 through `transition`, like every other change.
 */
export function blankTxnEntry(transactionalId: string, producerId: number, timeoutMs: number, nowMs: number): TxnEntry {
  return {
    transactionalId,
    producerId,
    lastProducerId: NO_PRODUCER_ID,
    epoch: NO_PRODUCER_EPOCH,
    lastEpoch: NO_PRODUCER_EPOCH,
    timeoutMs,
    state: "Empty",
    partitions: NO_TXN_PARTITIONS,
    groups: NO_TXN_GROUPS,
    ongoingSinceMs: NO_TXN_START_MS,
    updatedMs: nowMs,
  };
}

/**
 * Applies one transition: `entry` moves to state `to` with `changes` applied and updatedMs = nowMs, if the
 * table allows `entry.state -> to` and the result satisfies the invariants of `to`. Anything else is an
 * error value naming the transition and the broken rule; `entry` is never modified.
 *
 * updatedMs never goes backwards, and a decision (Prepare*) is stamped strictly after the entry's previous
 * transition, even when the clock stands still or steps back: so every decision of an entry has its own
 * time. With transaction version 1 a producer keeps its id and epoch across transactions, and (producer
 * id, epoch, decision time) is what names one transaction's queued markers (storage/marker-queue.ts). The
 * stamp runs ahead of the clock by at most a millisecond per decision made within one.
 *
 * The invariants (Apache's completeTransitionTo, plus the ones that make an entry well-formed):
 * - producer id >= 0; epoch in [0, 32767]; lastEpoch in [-1, 32767]; timeout > 0;
 * - Empty: epoch unchanged (a retry), bumped by one, or 0 with a new producer id; no partitions, no
 *   groups, no transaction start;
 * - PrepareEpochFence: same producer id, epoch bumped by exactly one, nothing else changed;
 * - every other state: same producer id and epoch and timeout;
 * - Ongoing: a start time (an open transaction keeps its own), and the old partitions and groups are
 *   kept (only added to);
 * - Prepare*: the same partitions, groups and start time as before (the decision is about exactly them);
 * - Complete* and Dead: no partitions, no groups.
 */
export function transition(entry: TxnEntry, to: TxnState, changes: TxnChanges, nowMs: number): TransitionResult {
  const from = entry.state;
  const fail = (reason: string): TransitionResult => ({ ok: false, from, to, reason });
  if (!VALID_PREVIOUS_STATES[to].includes(from)) return fail(`${to} cannot follow ${from}`);
  const next: TxnEntry = {
    transactionalId: entry.transactionalId,
    producerId: changes.producerId ?? entry.producerId,
    lastProducerId: changes.lastProducerId ?? entry.lastProducerId,
    epoch: changes.epoch ?? entry.epoch,
    lastEpoch: changes.lastEpoch ?? entry.lastEpoch,
    timeoutMs: changes.timeoutMs ?? entry.timeoutMs,
    state: to,
    partitions: changes.partitions === undefined ? entry.partitions : sharedIfEmpty(changes.partitions, NO_TXN_PARTITIONS),
    groups: changes.groups === undefined ? entry.groups : sharedIfEmpty(changes.groups, NO_TXN_GROUPS),
    ongoingSinceMs: changes.ongoingSinceMs ?? entry.ongoingSinceMs,
    updatedMs: to === "PrepareCommit" || to === "PrepareAbort" ? Math.max(nowMs, entry.updatedMs + 1) : Math.max(nowMs, entry.updatedMs),
  };
  const shape = entryShapeProblem(next);
  if (shape !== undefined) return fail(shape);

  const sameProducer = next.producerId === entry.producerId && next.epoch === entry.epoch;
  switch (to) {
    case "Empty": {
      const retry = sameProducer;
      const bump = next.producerId === entry.producerId && next.epoch === entry.epoch + 1;
      const rotation = next.producerId !== entry.producerId && next.epoch === 0;
      if (!retry && !bump && !rotation) {
        return fail(`epoch ${entry.producerId}/${entry.epoch} -> ${next.producerId}/${next.epoch} is neither a retry, a bump nor a rotation`);
      }
      if (next.partitions.length > 0 || next.groups.length > 0) return fail("Empty must have no partitions and no groups");
      if (next.ongoingSinceMs !== NO_TXN_START_MS) return fail("Empty must have no transaction start");
      return { ok: true, entry: next };
    }
    case "PrepareEpochFence":
      if (next.producerId !== entry.producerId || next.epoch !== entry.epoch + 1) {
        return fail(`a fence bumps the epoch by one: ${entry.producerId}/${entry.epoch} -> ${next.producerId}/${next.epoch}`);
      }
      if (next.timeoutMs !== entry.timeoutMs || next.partitions !== entry.partitions || next.groups !== entry.groups) {
        return fail("a fence changes nothing but the epoch");
      }
      return { ok: true, entry: next };
    default:
      break;
  }
  if (!sameProducer) return fail(`${to} keeps the producer id and epoch (${entry.producerId}/${entry.epoch} -> ${next.producerId}/${next.epoch})`);
  if (next.timeoutMs !== entry.timeoutMs) return fail(`${to} keeps the transaction timeout`);
  switch (to) {
    case "Ongoing":
      if (next.ongoingSinceMs < 0) return fail("Ongoing needs a transaction start");
      if (from === "Ongoing" && next.ongoingSinceMs !== entry.ongoingSinceMs) return fail("an open transaction keeps its start");
      if (!includesAllPartitions(next.partitions, entry.partitions)) return fail("Ongoing may only add partitions");
      if (!entry.groups.every((group) => next.groups.includes(group))) return fail("Ongoing may only add groups");
      return { ok: true, entry: next };
    case "PrepareCommit":
    case "PrepareAbort":
      if (!samePartitions(next.partitions, entry.partitions) || !sameStrings(next.groups, entry.groups)) {
        return fail(`${to} must keep the transaction's partitions and groups`);
      }
      if (next.ongoingSinceMs !== entry.ongoingSinceMs) return fail(`${to} must keep the transaction start`);
      return { ok: true, entry: next };
    case "CompleteCommit":
    case "CompleteAbort":
    case "Dead":
      if (next.partitions.length > 0 || next.groups.length > 0) return fail(`${to} must have no partitions and no groups`);
      return { ok: true, entry: next };
    default:
      return fail(`unhandled target state ${to}`);
  }
}

/** Why `entry` is not well-formed, or undefined when it is (field ranges, sorted sets). */
function entryShapeProblem(entry: TxnEntry): string | undefined {
  if (!isInt(entry.producerId) || entry.producerId < 0) return `invalid producer id ${entry.producerId}`;
  if (!isInt(entry.lastProducerId) || entry.lastProducerId < NO_PRODUCER_ID) return `invalid last producer id ${entry.lastProducerId}`;
  if (!isInt(entry.epoch) || entry.epoch < 0 || entry.epoch > PRODUCER_EPOCH_MAX) return `invalid epoch ${entry.epoch}`;
  if (!isInt(entry.lastEpoch) || entry.lastEpoch < NO_PRODUCER_EPOCH || entry.lastEpoch > PRODUCER_EPOCH_MAX) {
    return `invalid last epoch ${entry.lastEpoch}`;
  }
  if (!isInt(entry.timeoutMs) || entry.timeoutMs <= 0) return `invalid transaction timeout ${entry.timeoutMs}`;
  if (!isInt(entry.ongoingSinceMs) || entry.ongoingSinceMs < NO_TXN_START_MS) return `invalid transaction start ${entry.ongoingSinceMs}`;
  if (!isInt(entry.updatedMs)) return `invalid update time ${entry.updatedMs}`;
  let previousTopic: string | undefined;
  for (const topic of entry.partitions) {
    if (previousTopic !== undefined && !(topic.topic > previousTopic)) return "partitions are not sorted by topic";
    previousTopic = topic.topic;
    if (topic.partitions.length === 0) return `topic ${topic.topic} lists no partitions`;
    for (let i = 0; i < topic.partitions.length; i++) {
      const partition = topic.partitions[i]!;
      if (!isInt(partition) || partition < 0) return `invalid partition ${topic.topic}-${partition}`;
      if (i > 0 && !(partition > topic.partitions[i - 1]!)) return `partitions of ${topic.topic} are not ascending`;
    }
  }
  for (let i = 1; i < entry.groups.length; i++) {
    if (!(entry.groups[i]! > entry.groups[i - 1]!)) return "groups are not ascending";
  }
  return undefined;
}

function isInt(value: number): boolean {
  return Number.isSafeInteger(value);
}

// ---- partition and group sets ------------------------------------------------------------------

/** Normalizes any list of (topic, partition) pairs into the sorted, deduplicated TopicPartitions form. */
export function toTopicPartitions(pairs: Iterable<{ readonly topic: string; readonly partition: number }>): TopicPartitions[] {
  const byTopic = new Map<string, Set<number>>();
  for (const { topic, partition } of pairs) {
    let set = byTopic.get(topic);
    if (set === undefined) byTopic.set(topic, (set = new Set()));
    set.add(partition);
  }
  return [...byTopic.keys()]
    .sort(compareStrings)
    .map((topic) => ({ topic, partitions: [...byTopic.get(topic)!].sort((a, b) => a - b) }));
}

/** Every (topic, partition) pair of a set, topic by topic. */
export function* eachPartition(set: readonly TopicPartitions[]): Generator<{ topic: string; partition: number }> {
  for (const { topic, partitions } of set) for (const partition of partitions) yield { topic, partition };
}

export function partitionCount(set: readonly TopicPartitions[]): number {
  let count = 0;
  for (const topic of set) count += topic.partitions.length;
  return count;
}

export function containsPartition(set: readonly TopicPartitions[], topic: string, partition: number): boolean {
  const found = set.find((t) => t.topic === topic);
  return found !== undefined && found.partitions.includes(partition);
}

/** True when every partition of `subset` is in `set`. */
export function includesAllPartitions(set: readonly TopicPartitions[], subset: readonly TopicPartitions[]): boolean {
  for (const { topic, partition } of eachPartition(subset)) if (!containsPartition(set, topic, partition)) return false;
  return true;
}

/** The union of two sets, in the normalized form. */
export function mergePartitions(a: readonly TopicPartitions[], b: readonly TopicPartitions[]): TopicPartitions[] {
  return toTopicPartitions([...eachPartition(a), ...eachPartition(b)]);
}

function samePartitions(a: readonly TopicPartitions[], b: readonly TopicPartitions[]): boolean {
  return a.length === b.length && includesAllPartitions(a, b) && includesAllPartitions(b, a);
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}

/** Code-unit order, the same on every platform and locale (unlike localeCompare). */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---- loading -----------------------------------------------------------------------------------

/**
 * Checks a value read from disk and returns it as a TxnEntry. Throws an Error naming the problem for
 * anything that is not a well-formed entry in a persisted state; loaders turn that into
 * CorruptStateError. (A throw is right here: a malformed file is not a protocol outcome.)
 */
export function parseTxnEntry(value: unknown): TxnEntry {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("a transaction entry is not an object");
  const v = value as Record<string, unknown>;
  const transactionalId = v.transactionalId;
  if (typeof transactionalId !== "string" || transactionalId.length === 0) throw new Error("missing transactionalId");
  const where = `transaction entry ${JSON.stringify(transactionalId)}`;
  const num = (field: string): number => {
    const n = v[field];
    if (typeof n !== "number" || !Number.isSafeInteger(n)) throw new Error(`${where}: ${field} is not an integer`);
    return n;
  };
  const state = v.state;
  if (typeof state !== "string" || !PERSISTED_STATES.has(state as TxnState)) {
    throw new Error(`${where}: state ${JSON.stringify(state)} is not one that is ever persisted`);
  }
  if (!Array.isArray(v.partitions)) throw new Error(`${where}: partitions is not an array`);
  const partitions: TopicPartitions[] = v.partitions.map((item: unknown) => {
    if (typeof item !== "object" || item === null) throw new Error(`${where}: a partitions item is not an object`);
    const t = item as Record<string, unknown>;
    if (typeof t.topic !== "string" || t.topic.length === 0) throw new Error(`${where}: a partitions item has no topic`);
    if (!Array.isArray(t.partitions) || !t.partitions.every((p: unknown) => typeof p === "number")) {
      throw new Error(`${where}: partitions of ${t.topic} are not numbers`);
    }
    return { topic: t.topic, partitions: t.partitions as number[] };
  });
  if (!Array.isArray(v.groups) || !v.groups.every((g: unknown) => typeof g === "string")) throw new Error(`${where}: groups are not strings`);
  const entry: TxnEntry = {
    transactionalId,
    producerId: num("producerId"),
    lastProducerId: num("lastProducerId"),
    epoch: num("epoch"),
    lastEpoch: num("lastEpoch"),
    timeoutMs: num("timeoutMs"),
    state: state as TxnState,
    partitions: sharedIfEmpty(partitions, NO_TXN_PARTITIONS),
    groups: sharedIfEmpty(v.groups as string[], NO_TXN_GROUPS),
    ongoingSinceMs: num("ongoingSinceMs"),
    updatedMs: num("updatedMs"),
  };
  const problem = entryShapeProblem(entry);
  if (problem !== undefined) throw new Error(`${where}: ${problem}`);
  if ((entry.state === "Empty" || entry.state === "CompleteCommit" || entry.state === "CompleteAbort") && (partitions.length > 0 || entry.groups.length > 0)) {
    throw new Error(`${where}: ${entry.state} must have no partitions and no groups`);
  }
  if (entry.state !== "Empty" && entry.ongoingSinceMs < 0) throw new Error(`${where}: ${entry.state} needs a transaction start`);
  return entry;
}
