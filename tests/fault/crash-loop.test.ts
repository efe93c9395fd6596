/**
 * Crash loop: the compiled binary is SIGKILLed again and again under a continuous
 * acks=-1 load and restarted on the same data directory and port; at the end every partition is read back
 * completely and checked against what the load generator knows. Some restarts are themselves killed
 * 0-150 ms after the spawn (a crash during recovery), and a few stops are clean (SIGTERM), so that kills
 * also hit logs reopened from a clean-shutdown checkpoint.
 *
 * The load: raw WireClient producers (no idempotence: producer id -1), several connections, one request in
 * flight per partition (so the order of the log is the order of sending), records with unique sequential
 * keys "<topic>/<partition>/<seq>" and values derived from the key, two topics, one of them with
 * segment.bytes = 64 KiB so that segments roll all the time. A batch is ACKED when its acks=-1 answer
 * said NONE (the broker promises it is durable, at the offset it named); it is MAYBE when the connection
 * died with it in flight (the kill): the broker may or may not have it. MAYBE batches are never resent,
 * so nothing may appear twice.
 *
 * What must hold, per partition, after all the kills:
 * - every ACKED batch is present, exactly once, at exactly the offsets its acknowledgement named;
 * - no record appears twice, and nothing appears that was never sent (values checked byte for byte);
 * - records are in send order; a batch is all there or not at all (MAYBE batches included);
 * - offsets are contiguous from 0 to the high watermark (no holes, nothing lost below it);
 * - every restart succeeds (recovery never refuses the directory), and after each one the log end is at
 *   or beyond every offset acknowledged before the kill;
 * - a last kill with no load in flight changes nothing, and Apache's Java console consumer (partition
 *   mode, no group) reads the same count and keys as the raw read for the rolling partition.
 * Torn tails truncated by recovery are counted from the outside (a .log file smaller after the restart than
 * right after the kill) and logged; SIGKILL leaves the page cache intact, so they are rare.
 *
 * A compacted topic beside them (cleanup.policy=compact, 4 KiB segments, min.cleanable.dirty.ratio=0.01,
 * and log.cleaner.backoff.ms=100 in the broker's config file, so that kills land in the middle of cleaning
 * passes and of their segment swaps) takes two more writers over 12 keys per partition: a transactional
 * producer (raw InitProducerId, AddPartitionsToTxn, Produce, EndTxn) whose transactions write values and
 * tombstones and a receipt record of their own (a key no other record has) and commit or abort, and an
 * idempotent producer that resends an unanswered batch with the same sequence after the restart. A
 * transaction is COMMITTED or ABORTED when EndTxn answered; an unanswered commit is decided by the
 * transaction's state after the restart (CompleteCommit or not: the transaction in flight is always the
 * transactional id's latest); one that failed before its EndTxn is aborted by the next InitProducerId.
 * After every restart, read_committed up to the last stable offset:
 * - every record is one that a committed transaction or the idempotent producer wrote, at the offset its
 *   Produce answer named (the idempotent producer's unanswered batch: anywhere, whole or not at all);
 * - every committed transaction's receipt is there;
 * - the last value of every key is the one the latest of those writes gave it.
 * At the end, after a record that rolls each partition and a pass up to it, exactly the latest write of
 * every key is left below it, at its offset (tombstones kept: delete.retention.ms is a day), under
 * read_committed and read_uncommitted alike; the last kill with nothing in flight changes nothing there
 * either; and no cleaning pass failed.
 *
 *   CRASH_KILLS=100 bun test tests/fault/crash-loop.test.ts     # more kills (default 30)
 *   CRASH_SEED=1234 ...                                          # another seed ("random" picks one)
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaProcess, CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir, killDuringStartup, stopBroker } from "../support/fault-support.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { seededRandom } from "../support/random.ts";
import { decodeRecordSet, readPartitionFully, utf8, type DecodedRecord } from "../support/record-decoder.ts";
import { WireClient } from "../support/wire-client.ts";

const KILLS = Number(process.env.CRASH_KILLS ?? 30);
const SEED = envSeed("CRASH_SEED", 0xc4a5_1001);

const TOPICS = [
  { name: "crash-rolling", partitions: 3, configs: [{ name: "segment.bytes", value: String(64 * 1024) }] },
  { name: "crash-plain", partitions: 2, configs: [] },
] as const;
const CONNECTIONS = 3;
/** Load time between a restart and the next kill. */
const KILL_DELAY_MS = { min: 50, max: 400 };
const RECORDS_PER_BATCH = { min: 1, max: 20 };
/** Share of stops that are a clean SIGTERM (not counted as kills). */
const GRACEFUL_STOP_P = 0.1;
/** Share of restarts preceded by a start that is SIGKILLed 0-150 ms after the spawn (counted as a kill). */
const KILL_DURING_STARTUP_P = 0.2;
/** A request unanswered this long on a live broker is a failure (not a MAYBE). */
const REQUEST_TIMEOUT_MS = 30_000;

const clients: WireClient[] = [];
const fault = faultTestDir("bunka-crash-loop-", {
  cleanup: () => {
    for (const c of clients) c.close();
  },
});
const { dataDir, logFile } = fault;
/** The broker's config file: the compacted topic's cleaner looks for work every 100 ms. */
const CONFIG_FILE = join(fault.tmpRoot, "bunka.properties");
const brokerOptions = (port = 0) => ({ ...fault.startOptions(port), args: ["--config", CONFIG_FILE] });

// ---------------------------------------------------------------------------------------------
// What the generator sent

type BatchStatus = "inflight" | "acked" | "maybe";

interface SentBatch {
  firstSeq: number;
  count: number;
  status: BatchStatus;
  /** From the acknowledgement. */
  baseOffset?: number;
}

interface Lane {
  topic: string;
  partition: number;
  connection: number;
  nextSeq: number;
  batches: SentBatch[];
  /** One past the highest offset acknowledged so far. */
  ackedEnd: number;
  rng: ReturnType<typeof seededRandom>;
}

const keyOf = (topic: string, partition: number, seq: number) => `${topic}/${partition}/${seq}`;

/** The value is a function of the key, so that the read-back can check every byte. */
function valueOf(key: string): string {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619) >>> 0;
  const padding = 40 + (h % 400);
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let text = `${key}|`;
  for (let i = 0; i < padding; i++) text += alphabet[(h + i * 7) % alphabet.length];
  return text;
}

// ---------------------------------------------------------------------------------------------
// The broker and the connections to it, across restarts

let broker: BunkaProcess;
/** Resolves while the broker is up; replaced by a pending promise while it is down. */
let brokerUp: Promise<void> = Promise.resolve();
let markUp: () => void = () => {};
/** True from just before a stop until the restarted broker is checked: failures then are expected. */
let brokerDown = false;
let stopping = false;
const connections: (Promise<WireClient> | undefined)[] = [];

function markDown(): void {
  brokerDown = true;
  brokerUp = new Promise<void>((resolve) => (markUp = () => ((brokerDown = false), resolve())));
}

/** Connection i to the current broker, shared by the lanes that use it; reconnected after a restart. */
async function connection(i: number): Promise<WireClient> {
  const existing = connections[i];
  if (existing) {
    const client = await existing.catch(() => undefined);
    if (client && !client.isClosed) return client;
    if (connections[i] !== existing) return connection(i); // another lane is reconnecting already
  }
  const connecting = WireClient.connect(broker.port, "127.0.0.1", `crash-loop-${i}`);
  connections[i] = connecting;
  const client = await connecting;
  clients.push(client);
  return client;
}

async function startBroker(port = 0): Promise<BunkaProcess> {
  return await BunkaProcess.start(brokerOptions(port));
}

const problems: string[] = [];
const errorCodes = new Map<number, number>();

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms))),
  ]);
}

/** Sends batch after batch to one partition, one in flight, until told to stop. */
async function runLane(lane: Lane): Promise<void> {
  while (!stopping) {
    await brokerUp;
    if (stopping) break;
    let client: WireClient;
    try {
      client = await connection(lane.connection);
    } catch {
      // The broker died between "up" and the connect: the next turn waits for its restart.
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    const count = lane.rng.int(RECORDS_PER_BATCH.min, RECORDS_PER_BATCH.max);
    const batch: SentBatch = { firstSeq: lane.nextSeq, count, status: "inflight" };
    const records = [];
    for (let i = 0; i < count; i++) {
      const key = keyOf(lane.topic, lane.partition, lane.nextSeq + i);
      records.push({ key, value: valueOf(key), timestampMs: Date.now() });
    }
    lane.nextSeq += count;
    lane.batches.push(batch);
    const request = client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: REQUEST_TIMEOUT_MS,
      topicData: [{ name: lane.topic, partitionData: [{ index: lane.partition, records: buildBatch({ records }) }] }],
    });
    try {
      const res = await withTimeout(request, REQUEST_TIMEOUT_MS, `produce to ${lane.topic}-${lane.partition}`);
      const answer = res.responses[0].partitionResponses[0];
      if (answer.errorCode === 0) {
        batch.status = "acked";
        batch.baseOffset = Number(answer.baseOffset);
        lane.ackedEnd = Math.max(lane.ackedEnd, batch.baseOffset + count);
      } else {
        // No error is expected at all; keep the batch as MAYBE so the read-back still accounts for it.
        batch.status = "maybe";
        errorCodes.set(answer.errorCode, (errorCodes.get(answer.errorCode) ?? 0) + 1);
      }
    } catch (error) {
      batch.status = "maybe";
      const message = (error as Error).message;
      if (message.startsWith("timeout")) {
        problems.push(`${message} (broker pid ${broker.pid} still running: ${broker.exitCode === undefined})`);
      } else if (!brokerDown) {
        problems.push(`produce to ${lane.topic}-${lane.partition} failed with no stop under way: ${message}`);
      }
    }
  }
}

/** Sizes of every segment file, by path. */
function segmentSizes(): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const dir of readdirSync(dataDir)) {
    // The cleaner rewrites the compacted topic's segments smaller: that is not a torn tail.
    if (dir.startsWith("__") || dir.startsWith(`${COMPACTED.name}-`)) continue;
    const path = join(dataDir, dir);
    if (!statSync(path).isDirectory()) continue;
    for (const name of readdirSync(path)) if (name.endsWith(".log")) sizes.set(join(dir, name), statSync(join(path, name)).size);
  }
  return sizes;
}

async function latestOffsets(client: WireClient): Promise<Map<string, number>> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel: 0,
    topics: TOPICS.map((t) => ({
      name: t.name,
      partitions: Array.from({ length: t.partitions }, (_, p) => ({ partitionIndex: p, currentLeaderEpoch: -1, timestamp: -1 })),
    })),
  });
  const out = new Map<string, number>();
  for (const t of res.topics) {
    for (const p of t.partitions) {
      if (p.errorCode !== 0) throw new Error(`ListOffsets ${t.name}-${p.partitionIndex}: error ${p.errorCode}`);
      out.set(`${t.name}-${p.partitionIndex}`, Number(p.offset));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Checking what was read against what was sent

interface LaneVerdict {
  acked: number;
  maybePresent: number;
  maybeAbsent: number;
  records: number;
}

function verifyLane(lane: Lane, records: DecodedRecord[], highWatermark: number): LaneVerdict {
  const where = `${lane.topic}-${lane.partition}`;
  const fail = (message: string): never => {
    throw new Error(`${where}: ${message} (seed ${SEED})`);
  };
  const seen = new Map<number, number>(); // seq -> offset
  let previousSeq = -1;
  records.forEach((record, i) => {
    if (record.offset !== i) fail(`offset ${record.offset} where ${i} was expected: the log has a hole or an overlap`);
    const key = utf8(record.key);
    const match = key === null ? null : /^(.+)\/(\d+)\/(\d+)$/.exec(key);
    if (match === null || match[1] !== lane.topic || Number(match[2]) !== lane.partition) {
      fail(`unknown record at offset ${record.offset}: key ${key}`);
    }
    const seq = Number(match![3]);
    if (seq >= lane.nextSeq) fail(`record ${key} at offset ${record.offset} was never sent`);
    if (utf8(record.value) !== valueOf(key!)) fail(`record ${key} at offset ${record.offset} has a value that was never sent`);
    if (seen.has(seq)) fail(`record ${key} appears twice, at offsets ${seen.get(seq)} and ${record.offset}`);
    if (seq <= previousSeq) fail(`record ${key} at offset ${record.offset} comes after sequence ${previousSeq}: out of send order`);
    seen.set(seq, record.offset);
    previousSeq = seq;
  });
  if (records.length !== highWatermark) fail(`read ${records.length} records below the high watermark ${highWatermark}`);

  const verdict: LaneVerdict = { acked: 0, maybePresent: 0, maybeAbsent: 0, records: records.length };
  for (const batch of lane.batches) {
    const offsets = Array.from({ length: batch.count }, (_, i) => seen.get(batch.firstSeq + i));
    const present = offsets.filter((o) => o !== undefined).length;
    const name = `batch ${keyOf(lane.topic, lane.partition, batch.firstSeq)} x${batch.count} (${batch.status})`;
    if (present !== 0 && present !== batch.count) fail(`${name} is partly there: ${present} of ${batch.count} records`);
    if (batch.status === "inflight") fail(`${name} never finished`);
    if (batch.status === "acked") {
      verdict.acked++;
      if (present === 0) fail(`${name} was acknowledged at offset ${batch.baseOffset} but is missing`);
      if (offsets[0] !== batch.baseOffset) fail(`${name} was acknowledged at offset ${batch.baseOffset} but is at ${offsets[0]}`);
    } else if (present > 0) {
      verdict.maybePresent++;
    } else {
      verdict.maybeAbsent++;
    }
  }
  return verdict;
}


// ---------------------------------------------------------------------------------------------
// The compacted topic: transactions and an idempotent producer over a few keys, cleaned throughout

const COMPACTED = {
  name: "crash-compacted",
  partitions: 2,
  configs: [
    { name: "cleanup.policy", value: "compact" },
    { name: "segment.bytes", value: String(4 * 1024) },
    { name: "min.cleanable.dirty.ratio", value: "0.01" },
  ],
} as const;
const COMPACTED_KEYS = 12;
const TXN_ID = "crash-compacted-txn";
/** Connection indexes of the two writers (the plain lanes use 0..CONNECTIONS-1). */
const TXN_CONNECTION = CONNECTIONS;
const IDEMPOTENT_CONNECTION = CONNECTIONS + 1;
const TXN_RECORDS = { min: 1, max: 8 };
const TXN_COMMIT_P = 0.8;
const TOMBSTONE_P = 0.15;
/** A record of about 4 KiB: alone in a 4 KiB segment, so appending it rolls the active one. */
const ROLL_VALUE = "r".repeat(4000);
const RETRIABLE_INIT: number[] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS];

interface CompactedWrite {
  partition: number;
  /** From the Produce answer; -1 while unknown. */
  offset: number;
  key: string;
  value: string | null;
}

interface Txn {
  n: number;
  writes: CompactedWrite[];
  outcome: "open" | "committed" | "aborted" | "unknown";
}

const txns: Txn[] = [];
/** The idempotent producer's acknowledged records. */
const idempotentWrites: CompactedWrite[] = [];
/** Its batch sent and not yet answered (resent with the same sequence until it is). */
let idempotentPending: { partition: number; baseSequence: number; records: CompactedWrite[] } | undefined;

const compactedKey = (partition: number, k: number) => `c${partition}-${k}`;

/** One request on the writer's connection, bounded like the plain lanes' requests. */
async function compactedRequest(connectionIndex: number, apiKey: number, version: number, body: unknown, what: string): Promise<any> {
  const client = await connection(connectionIndex);
  return await withTimeout(client.request(apiKey, version, body), REQUEST_TIMEOUT_MS, what);
}

/** A failure with no stop under way is a problem; a timeout always is. */
function compactedFailure(what: string, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith("timeout")) problems.push(`${what}: ${message} (broker pid ${broker.pid} still running: ${broker.exitCode === undefined})`);
  else if (!brokerDown) problems.push(`${what} failed with no stop under way: ${message}`);
}

/**
 * Transactions one after the other; after any failure, InitProducerId again (which aborts what was open).
 * It stops only with a producer initialised after its last failure, so that no transaction is left open
 * to hold the last stable offset back.
 */
async function runTxnWriter(rng: ReturnType<typeof seededRandom>): Promise<void> {
  let producer: { id: number; epoch: number; sequences: number[] } | undefined;
  while (!stopping || producer === undefined) {
    await brokerUp;
    if (producer === undefined) {
      try {
        const res = await compactedRequest(TXN_CONNECTION, 22, 4, { transactionalId: TXN_ID, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 }, "InitProducerId");
        if (RETRIABLE_INIT.includes(res.errorCode)) {
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        if (res.errorCode !== ErrorCode.NONE) throw new Error(`InitProducerId answered ${res.errorCode}`);
        producer = { id: Number(res.producerId), epoch: res.producerEpoch, sequences: Array.from({ length: COMPACTED.partitions }, () => 0) };
      } catch (error) {
        compactedFailure("InitProducerId", error);
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
    }
    if (stopping) break;
    const txn: Txn = { n: txns.length, writes: [], outcome: "open" };
    txns.push(txn);
    for (let i = rng.int(TXN_RECORDS.min, TXN_RECORDS.max); i > 0; i--) {
      const partition = rng.int(0, COMPACTED.partitions - 1);
      const value = rng.next() < TOMBSTONE_P ? null : `t${txn.n}-${i}`;
      txn.writes.push({ partition, offset: -1, key: compactedKey(partition, rng.int(0, COMPACTED_KEYS - 1)), value });
    }
    txn.writes.push({ partition: txn.n % COMPACTED.partitions, offset: -1, key: `receipt-${txn.n}`, value: `t${txn.n}` });
    const commit = rng.next() < TXN_COMMIT_P;
    let endSent = false;
    try {
      const partitions = [...new Set(txn.writes.map((w) => w.partition))].sort();
      const added = await compactedRequest(
        TXN_CONNECTION,
        24,
        3,
        {
          v3AndBelowTransactionalId: TXN_ID,
          v3AndBelowProducerId: producer.id,
          v3AndBelowProducerEpoch: producer.epoch,
          v3AndBelowTopics: [{ name: COMPACTED.name, partitions }],
        },
        "AddPartitionsToTxn",
      );
      const addCodes = added.resultsByTopicV3AndBelow.flatMap((t: any) => t.resultsByPartition.map((r: any) => r.partitionErrorCode));
      if (addCodes.some((c: number) => c !== ErrorCode.NONE)) throw new Error(`AddPartitionsToTxn answered ${addCodes}`);
      const produced = await compactedRequest(
        TXN_CONNECTION,
        0,
        9,
        {
          transactionalId: TXN_ID,
          acks: -1,
          timeoutMs: REQUEST_TIMEOUT_MS,
          topicData: [
            {
              name: COMPACTED.name,
              partitionData: partitions.map((p) => ({
                index: p,
                records: buildBatch({
                  records: txn.writes.filter((w) => w.partition === p).map((w) => ({ key: w.key, value: w.value })),
                  producerId: producer!.id,
                  producerEpoch: producer!.epoch,
                  baseSequence: producer!.sequences[p]!,
                  transactional: true,
                }),
              })),
            },
          ],
        },
        "transactional Produce",
      );
      for (const answer of produced.responses[0].partitionResponses) {
        if (answer.errorCode !== ErrorCode.NONE) throw new Error(`transactional Produce to partition ${answer.index} answered ${answer.errorCode}`);
        const writes = txn.writes.filter((w) => w.partition === answer.index);
        writes.forEach((w, i) => (w.offset = Number(answer.baseOffset) + i));
        producer.sequences[answer.index] = producer.sequences[answer.index]! + writes.length;
      }
      endSent = true;
      const ended = await compactedRequest(TXN_CONNECTION, 26, 3, { transactionalId: TXN_ID, producerId: producer.id, producerEpoch: producer.epoch, committed: commit }, "EndTxn");
      if (ended.errorCode !== ErrorCode.NONE) throw new Error(`EndTxn answered ${ended.errorCode}`);
      txn.outcome = commit ? "committed" : "aborted";
    } catch (error) {
      // A commit that was sent may have become durable; anything else never commits.
      txn.outcome = endSent && commit ? "unknown" : "aborted";
      producer = undefined;
      compactedFailure(`transaction ${txn.n}`, error);
    }
  }
}

/** An idempotent producer: one batch in flight, resent with the same sequence until answered. */
async function runIdempotentWriter(rng: ReturnType<typeof seededRandom>): Promise<void> {
  let producer: { id: number; epoch: number; sequences: number[] } | undefined;
  let counter = 0;
  while (!stopping || idempotentPending !== undefined) {
    await brokerUp;
    try {
      if (producer === undefined) {
        const res = await compactedRequest(IDEMPOTENT_CONNECTION, 22, 4, { transactionalId: null, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 }, "InitProducerId (idempotent)");
        if (res.errorCode !== ErrorCode.NONE) throw new Error(`InitProducerId answered ${res.errorCode}`);
        producer = { id: Number(res.producerId), epoch: res.producerEpoch, sequences: Array.from({ length: COMPACTED.partitions }, () => 0) };
      }
      if (idempotentPending === undefined) {
        const partition = rng.int(0, COMPACTED.partitions - 1);
        const records = Array.from({ length: rng.int(1, 4) }, () => ({ partition, offset: -1, key: compactedKey(partition, rng.int(0, COMPACTED_KEYS - 1)), value: `i${counter++}` }));
        idempotentPending = { partition, baseSequence: producer.sequences[partition]!, records };
      }
      const pending = idempotentPending;
      const res = await compactedRequest(
        IDEMPOTENT_CONNECTION,
        0,
        9,
        {
          transactionalId: null,
          acks: -1,
          timeoutMs: REQUEST_TIMEOUT_MS,
          topicData: [
            {
              name: COMPACTED.name,
              partitionData: [
                {
                  index: pending.partition,
                  records: buildBatch({
                    records: pending.records.map((w) => ({ key: w.key, value: w.value })),
                    producerId: producer.id,
                    producerEpoch: producer.epoch,
                    baseSequence: pending.baseSequence,
                  }),
                },
              ],
            },
          ],
        },
        "idempotent Produce",
      );
      const answer = res.responses[0].partitionResponses[0];
      if (answer.errorCode !== ErrorCode.NONE) {
        // A retry of a batch the broker has is answered NONE with its offset; anything else means the
        // producer's state (its sequence) was lost, and no retry can mend that.
        problems.push(`idempotent Produce of sequence ${pending.baseSequence} to ${COMPACTED.name}-${pending.partition} answered ${answer.errorCode}`);
        idempotentPending = undefined;
        return;
      }
      pending.records.forEach((w, i) => (w.offset = Number(answer.baseOffset) + i));
      idempotentWrites.push(...pending.records);
      producer.sequences[pending.partition] = producer.sequences[pending.partition]! + pending.records.length;
      idempotentPending = undefined;
    } catch (error) {
      compactedFailure("idempotent Produce", error);
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

/** [offset, key, value] */
type CompactedRecord = [number, string, string | null];

/**
 * One partition of the compacted topic by raw Fetch v12 from 0: read_committed (up to the last stable
 * offset, the aborted transactions' records dropped as a Java consumer drops them) or read_uncommitted.
 */
async function readCompacted(client: WireClient, partition: number, readCommitted: boolean): Promise<{ records: CompactedRecord[]; end: number }> {
  const records: CompactedRecord[] = [];
  let end = -1;
  for (let offset = 0; ; ) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1 << 20,
      isolationLevel: readCommitted ? 1 : 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic: COMPACTED.name, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: 1 << 20, logStartOffset: -1 }] }],
    });
    const data = res.responses[0].partitions[0];
    if (res.errorCode !== ErrorCode.NONE || data.errorCode !== ErrorCode.NONE) throw new Error(`fetch ${COMPACTED.name}-${partition}@${offset}: error ${res.errorCode}/${data.errorCode}`);
    if (end < 0) end = Number(readCommitted ? data.lastStableOffset : data.highWatermark);
    if (offset >= end) break;
    const pending = [...((data.abortedTransactions ?? []) as { producerId: number; firstOffset: number }[])].sort((a, b) => Number(a.firstOffset) - Number(b.firstOffset));
    const abortedProducers = new Set<number>();
    let progressed = false;
    for (const batch of decodeRecordSet(data.records ?? new Uint8Array(0), { cleaned: true }).batches) {
      const h = batch.header;
      const lastOffset = h.baseOffset + h.lastOffsetDelta;
      if (lastOffset < offset || h.baseOffset >= end) continue;
      while (pending.length > 0 && Number(pending[0]!.firstOffset) <= lastOffset) abortedProducers.add(Number(pending.shift()!.producerId));
      if (h.isControl) {
        if (batch.records.length > 0 && batch.records[0]!.key![3] === 0) abortedProducers.delete(h.producerId);
      } else if (!(readCommitted && h.isTransactional && abortedProducers.has(h.producerId))) {
        for (const r of batch.records) if (r.offset >= offset && r.offset < end) records.push([r.offset, utf8(r.key)!, utf8(r.value)]);
      }
      offset = lastOffset + 1;
      progressed = true;
    }
    // Only a gap at the very end of the readable range leaves nothing more to read.
    if (!progressed) break;
  }
  return { records, end };
}

/** The transaction coordinator's state of TXN_ID, once it is not in the middle of a decision. */
async function settledTxnState(client: WireClient): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await client.request(65, 0, { transactionalIds: [TXN_ID] });
    const state = res.transactionStates[0];
    const name: string = state.errorCode === ErrorCode.TRANSACTIONAL_ID_NOT_FOUND ? "Empty" : state.transactionState;
    // While the coordinator completes the decisions found at start-up it answers COORDINATOR_LOAD_IN_PROGRESS.
    const loading = state.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS;
    if (!loading && state.errorCode !== ErrorCode.NONE && state.errorCode !== ErrorCode.TRANSACTIONAL_ID_NOT_FOUND) throw new Error(`DescribeTransactions answered ${state.errorCode}`);
    if (!loading && name !== "PrepareCommit" && name !== "PrepareAbort") return name;
    if (Date.now() > deadline) throw new Error(`${TXN_ID} stayed in ${loading ? "loading" : name} for 30 s after a restart`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** What the committed transactions and the idempotent producer wrote at known offsets, by partition and offset. */
function knownCommittedWrites(): Map<number, CompactedWrite>[] {
  const byOffset = Array.from({ length: COMPACTED.partitions }, () => new Map<number, CompactedWrite>());
  for (const txn of txns) if (txn.outcome === "committed") for (const w of txn.writes) byOffset[w.partition]!.set(w.offset, w);
  for (const w of idempotentWrites) byOffset[w.partition]!.set(w.offset, w);
  return byOffset;
}

/** The latest write of every key, by offset, of `writes` below `end`; as [offset, key, value] in offset order. */
function latestPerKey(writes: Iterable<CompactedWrite>, end: number): CompactedRecord[] {
  const latest = new Map<string, CompactedWrite>();
  for (const w of [...writes].filter((w) => w.offset < end).sort((a, b) => a.offset - b.offset)) latest.set(w.key, w);
  return [...latest.values()].sort((a, b) => a.offset - b.offset).map((w) => [w.offset, w.key, w.value]);
}

/** The check after a restart (see the file comment). */
async function checkCompacted(client: WireClient, http: string, where: string): Promise<void> {
  const state = await settledTxnState(client);
  for (const txn of txns) if (txn.outcome === "unknown") txn.outcome = state === "CompleteCommit" ? "committed" : "aborted";
  const known = knownCommittedWrites();
  for (let p = 0; p < COMPACTED.partitions; p++) {
    const { records, end } = await readCompacted(client, p, true);
    const fail = (message: string): never => {
      throw new Error(`${where}: ${COMPACTED.name}-${p}: ${message} (seed ${SEED})`);
    };
    const found: CompactedWrite[] = [];
    let pendingSeen = 0;
    for (const [offset, key, value] of records) {
      const w = known[p]!.get(offset);
      if (w !== undefined) {
        if (w.key !== key || w.value !== value) fail(`offset ${offset} holds ${key}=${value}, but ${w.key}=${w.value} was written there`);
        found.push(w);
        continue;
      }
      const pending = idempotentPending?.partition === p ? idempotentPending.records.find((r) => r.key === key && r.value === value && value !== null) : undefined;
      if (pending === undefined) fail(`offset ${offset} holds ${key}=${value}, which no committed transaction or acknowledged write put there`);
      found.push({ ...pending!, offset });
      pendingSeen++;
    }
    if (pendingSeen !== 0 && pendingSeen !== idempotentPending!.records.length) fail(`${pendingSeen} of the ${idempotentPending!.records.length} records of the unanswered idempotent batch are there`);
    const seenOffsets = new Set(records.map(([o]) => o));
    for (const txn of txns) {
      const receipt = txn.writes.at(-1)!;
      if (txn.outcome === "committed" && receipt.partition === p && receipt.offset < end && !seenOffsets.has(receipt.offset)) fail(`the receipt of committed transaction ${txn.n} (offset ${receipt.offset}) is missing`);
    }
    // The last value every key shows is its latest committed (or acknowledged) write below the LSO; the
    // pending batch, found in the log, counts at the offsets it was found at.
    const lastSeen = latestPerKey(records.map(([offset, key, value]) => ({ partition: p, offset, key, value })), end);
    const expected = latestPerKey([...known[p]!.values(), ...found.filter((w) => !known[p]!.has(w.offset))], end);
    expect({ where, partition: p, latest: lastSeen }).toEqual({ where, partition: p, latest: expected });
  }
  const view = (await (await fetch(`${http}/v1/topics/${COMPACTED.name}`)).json()) as { partitionDetails: { cleaner: { lastError: string | null } }[] };
  for (const d of view.partitionDetails) if (d.cleaner.lastError !== null) throw new Error(`${where}: a cleaning pass failed: ${d.cleaner.lastError}`);
}

/** Rolls every partition, waits for a pass up to the roll, and checks that exactly the latest write of each key is left. */
async function checkFullyCleaned(client: WireClient, http: string): Promise<CompactedRecord[][]> {
  // A ratio of 0 first: what is left dirty below the roll may be a marker of a few bytes, under the
  // topic's 0.01 of the log, and a pass would then rightly never come (seen: seed 3299151873).
  const altered = await client.request(44, 1, {
    resources: [{ resourceType: 2, resourceName: COMPACTED.name, configs: [{ name: "min.cleanable.dirty.ratio", configOperation: 0, value: "0" }] }],
    validateOnly: false,
  });
  expect(altered.responses[0].errorCode).toBe(ErrorCode.NONE);
  const rolls: number[] = [];
  for (let p = 0; p < COMPACTED.partitions; p++) {
    const res = await client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: REQUEST_TIMEOUT_MS,
      topicData: [{ name: COMPACTED.name, partitionData: [{ index: p, records: buildBatch({ records: [{ key: "~roll", value: ROLL_VALUE }] }) }] }],
    });
    expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    rolls.push(Number(res.responses[0].partitionResponses[0].baseOffset));
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    const view = (await (await fetch(`${http}/v1/topics/${COMPACTED.name}`)).json()) as { partitionDetails: { cleaner: { cleanedUpToOffset: number } }[] };
    if (view.partitionDetails.every((d, p) => d.cleaner.cleanedUpToOffset >= rolls[p]!)) break;
    if (Date.now() > deadline) throw new Error(`no cleaning pass reached the roll records at ${rolls} within 60 s: ${JSON.stringify(view.partitionDetails.map((d) => d.cleaner))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(txns.filter((t) => t.outcome === "open" || t.outcome === "unknown").map((t) => t.n)).toEqual([]);
  const known = knownCommittedWrites();
  const out: CompactedRecord[][] = [];
  for (let p = 0; p < COMPACTED.partitions; p++) {
    const expected = latestPerKey(known[p]!.values(), rolls[p]!);
    for (const readCommitted of [true, false]) {
      const { records } = await readCompacted(client, p, readCommitted);
      const what = `${COMPACTED.name}-${p} ${readCommitted ? "read_committed" : "read_uncommitted"} after a pass up to ${rolls[p]}`;
      expect({ what, records: records.filter(([o]) => o < rolls[p]!) }).toEqual({ what, records: expected });
    }
    out.push(expected);
  }
  return out;
}
// ---------------------------------------------------------------------------------------------

test.skipIf(!CAN_RUN_BINARY)(
  `acks=-1 records survive ${KILLS} SIGKILLs exactly once and in order (seed ${SEED})`,
  () => withBrokerLog(logFile, async () => {
    const startedMs = Date.now();
    console.log(`crash-loop: seed ${SEED} (CRASH_SEED), ${KILLS} kills (CRASH_KILLS)`);
    const rng = seededRandom(SEED);
    writeFileSync(CONFIG_FILE, "log.cleaner.backoff.ms=100\n");

    broker = await startBroker();
    const admin = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-admin");
    const created = await admin.request(19, 7, {
      topics: [...TOPICS, COMPACTED].map((t) => ({ name: t.name, numPartitions: t.partitions, replicationFactor: 1, assignments: [], configs: t.configs })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    for (const t of created.topics) expect({ topic: t.name, errorCode: t.errorCode }).toEqual({ topic: t.name, errorCode: 0 });
    admin.close();

    const lanes: Lane[] = [];
    for (const t of TOPICS) {
      for (let p = 0; p < t.partitions; p++) {
        lanes.push({
          topic: t.name,
          partition: p,
          connection: lanes.length % CONNECTIONS,
          nextSeq: 0,
          batches: [],
          ackedEnd: 0,
          rng: seededRandom((SEED ^ Math.imul(lanes.length + 1, 0x9e3779b1)) >>> 0),
        });
      }
    }
    const running = [
      ...lanes.map((lane) => runLane(lane)),
      runTxnWriter(seededRandom((SEED ^ 0x7a11_0001) >>> 0)),
      runIdempotentWriter(seededRandom((SEED ^ 0x7a11_0002) >>> 0)),
    ];
    let compactedCheckMs = 0;

    let tornTails = 0;
    let bindRetries = 0;
    let kills = 0;
    let gracefulStops = 0;
    let killsDuringStartup = 0;
    const startupMs: number[] = [];
    for (let round = 1; kills < KILLS; round++) {
      await new Promise((r) => setTimeout(r, rng.int(KILL_DELAY_MS.min, KILL_DELAY_MS.max)));
      // What was acknowledged before the stop must still be there after it.
      const ackedBefore = new Map(lanes.map((l) => [`${l.topic}-${l.partition}`, l.ackedEnd]));
      markDown();
      // Now and then a clean stop, so that kills also land on logs opened from a clean-shutdown checkpoint.
      const graceful = rng.next() < GRACEFUL_STOP_P || round === 2;
      await stopBroker(broker, graceful, logFile, `round ${round}: `);
      if (graceful) gracefulStops++;
      else kills++;
      const sizesAfterStop = segmentSizes();

      if (rng.next() < KILL_DURING_STARTUP_P) {
        // A crash in the middle of recovery must leave a directory the next start recovers.
        await killDuringStartup(brokerOptions(broker.port), rng.int(0, 150), `round ${round}: `);
        killsDuringStartup++;
        kills++;
      }

      // Throws, with the broker's stderr, if recovery refuses the directory.
      broker = await startBroker(broker.port);
      startupMs.push(broker.startupMs);
      bindRetries += broker.bindAttempts - 1;
      for (const [file, size] of segmentSizes()) {
        const before = sizesAfterStop.get(file);
        if (before !== undefined && size < before) {
          tornTails++;
          console.log(`crash-loop: round ${round}: recovery truncated ${file} from ${before} to ${size} bytes`);
        }
      }
      const check = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-check");
      clients.push(check);
      const ends = await latestOffsets(check);
      const checkStartMs = Date.now();
      await checkCompacted(check, broker.http, `after round ${round}`);
      compactedCheckMs += Date.now() - checkStartMs;
      check.close();
      for (const [partition, acked] of ackedBefore) {
        if ((ends.get(partition) ?? -1) < acked) {
          throw new Error(
            `after round ${round}: ${partition} ends at ${ends.get(partition)}, but offsets below ${acked} were acknowledged (seed ${SEED})`,
          );
        }
      }
      markUp();
    }

    // Stop the load; every request still in flight completes on the live broker.
    stopping = true;
    await Promise.all(running);
    expect(problems).toEqual([]);
    const compactedClient = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-compacted");
    clients.push(compactedClient);
    const cleanedLatest = await checkFullyCleaned(compactedClient, broker.http);
    compactedClient.close();

    const reader = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-reader");
    clients.push(reader);
    const readAll = async (client: WireClient) =>
      await Promise.all(lanes.map(async (lane) => ({ lane, contents: await readPartitionFully(client, lane.topic, lane.partition) })));
    const live = await readAll(reader);
    reader.close();

    const totals = { acked: 0, maybePresent: 0, maybeAbsent: 0, records: 0 };
    for (const { lane, contents } of live) {
      expect(contents.logStartOffset).toBe(0);
      const verdict = verifyLane(lane, contents.records, contents.highWatermark);
      for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += verdict[k];
    }

    // One more kill with nothing in flight: everything was acknowledged (durable), so nothing may change.
    await broker.kill("SIGKILL");
    broker = await startBroker(broker.port);
    const after = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-reader-2");
    clients.push(after);
    const again = await readAll(after);
    after.close();
    for (let i = 0; i < live.length; i++) {
      const a = live[i]!.contents;
      const b = again[i]!.contents;
      const where = `${live[i]!.lane.topic}-${live[i]!.lane.partition}`;
      expect({ where, highWatermark: b.highWatermark }).toEqual({ where, highWatermark: a.highWatermark });
      expect(b.records.map((r) => utf8(r.key))).toEqual(a.records.map((r) => utf8(r.key)));
    }
    const compactedAfter = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-compacted-2");
    clients.push(compactedAfter);
    for (let p = 0; p < COMPACTED.partitions; p++) {
      const { records } = await readCompacted(compactedAfter, p, true);
      expect({ partition: p, records: records.filter(([, key]) => key !== "~roll") }).toEqual({ partition: p, records: cleanedLatest[p]! });
    }
    compactedAfter.close();

    // Apache's console consumer (partition mode, no consumer group) reads the same records.
    const rolling = live.find((l) => l.lane.topic === "crash-rolling" && l.lane.partition === 0)!;
    const expectedCount = rolling.contents.records.length;
    const consumed = await runKafkaTool(
      "kafka-console-consumer",
      [
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "crash-rolling",
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        String(expectedCount),
        "--timeout-ms",
        "30000",
        "--property",
        "print.key=true",
      ],
      { timeoutMs: 90_000 },
    );
    const lines = consumed.stdout.split("\n").filter((l) => l.length > 0);
    if (lines.length !== expectedCount) {
      throw new Error(
        `console consumer read ${lines.length} of ${expectedCount} records (exit ${consumed.code}):\n${consumed.stderr.slice(-3000)}`,
      );
    }
    expect(lines.map((l) => l.split("\t")[0])).toEqual(rolling.contents.records.map((r) => utf8(r.key)!));
    expect(lines.map((l) => l.slice(l.indexOf("\t") + 1))).toEqual(rolling.contents.records.map((r) => utf8(r.value)!));

    const segments = segmentSizes();
    const rollingSegments = [...segments.keys()].filter((f) => f.startsWith("crash-rolling-")).length;
    const stderr = readFileSync(logFile, "utf8");
    const fatal = stderr.split("\n").filter((l) => /fatal|uncaught|corrupt|log cleaner (pass|round) failed/i.test(l));
    const outcomes = (o: Txn["outcome"]) => txns.filter((t) => t.outcome === o).length;
    // Every process logs each pass it finishes; a kill in the middle of one is recovered at the next start.
    const cleaningPasses = stderr.split("\n").filter((l) => l.includes(`log cleaner pass partition=${COMPACTED.name}-`)).length;
    const interruptedPasses = stderr.split("\n").filter((l) => l.includes("recovered an interrupted log cleaner pass")).length;
    console.log(
      `crash-loop: ${kills + 1} kills (${killsDuringStartup} during start-up), ${gracefulStops} clean stops, ` +
        `${totals.records} records read (${totals.acked} acked batches, ` +
        `${totals.maybePresent} unacknowledged batches kept, ${totals.maybeAbsent} lost with their connection), ` +
        `${rollingSegments} segments in crash-rolling, ${tornTails} torn tails truncated, ${bindRetries} bind retries, ` +
        `start-up ${Math.min(...startupMs)}-${Math.max(...startupMs)} ms, error answers ${JSON.stringify([...errorCodes])}, ` +
        `${COMPACTED.name}: ${outcomes("committed")} transactions committed and ${outcomes("aborted")} aborted, ${idempotentWrites.length} idempotent records, ` +
        `${cleaningPasses} cleaning passes finished and ${interruptedPasses} interrupted swaps recovered, ${cleanedLatest.flat().length} records left after the last pass, checks after restarts ${compactedCheckMs} ms, ` +
        `${((Date.now() - startedMs) / 1000).toFixed(1)} s`,
    );
    expect(fatal).toEqual([]);
    expect([...errorCodes]).toEqual([]);
    expect(totals.acked).toBeGreaterThan(KILLS);
    expect(rollingSegments).toBeGreaterThan(TOPICS[0].partitions);
    // The compacted topic was written and cleaned while the broker was being killed.
    expect(outcomes("committed")).toBeGreaterThan(KILLS);
    expect(outcomes("aborted")).toBeGreaterThan(0);
    expect(cleaningPasses).toBeGreaterThan(KILLS / 2);
  }),
  600_000,
);
