/**
 * Compacted topics holding transactional data, read by Apache Kafka's Java consumer (kafka-clients 4.1.1)
 * and by librdkafka (confluent-kafka), on bunka and on Apache Kafka 4.1.1 side by side.
 *
 * One plan (`PLAN` below) is run on both brokers by tests/interop/java/CompactedTopicCheck.java: an
 * idempotent producer without a transactional id ("P") and two transactional producers ("T1", "T2")
 * write over the same 14 keys of a 2-partition topic: rounds of plain writes, committed and aborted
 * transactions, tombstones (plain, committed and aborted ones), two transactions open at once on the same
 * key (one commits, one aborts, in both orders), keys that only aborted transactions ever wrote, and a
 * key written again after its tombstone. Every send waits for its acknowledgement, so each record is a
 * batch of its own and the offsets are the same on both brokers (asserted: a record or a marker takes one
 * offset). Every record goes to two topics in the same transaction: `kept` (delete.retention.ms = 1 day,
 * so tombstones stay) and `expiring` (delete.retention.ms = 0, so a tombstone goes at the pass after the
 * one that first keeps it).
 *
 * The cleaners run on their own, on both brokers with log.cleaner.backoff.ms=100, while the plan is
 * written and after: Apache's with the topics' min.cleanable.dirty.ratio=0.01, segment.ms=100 and
 * internal.segment.bytes=1024 (Apache 4.1 refuses segment.bytes below 1 MiB; internal.segment.bytes is
 * its testing knob); bunka's (in-process) with segment.bytes=1024 and the same ratio and segment.ms, so
 * that its own rules decide when a pass is due, as Apache's do. Apache Kafka is formatted at
 * transaction.version=1, the transaction protocol bunka speaks (COMPACTED_APACHE_TV=2 formats it at
 * Apache 4.1's default, version 2; see the raw Fetch test for what changes then).
 *
 * After the plan, one record of about 1 KiB (a "sentinel", that fits a segment only alone) is appended to
 * every partition: it rolls the segment, so that every record of the plan is in an inactive segment; a
 * pass whose range reaches the sentinel is observable as Apache's cleaner-offset-checkpoint file (and
 * bunka's cleaner stats) naming the sentinel's offset. Then a second
 * sentinel and a second pass: the emptied batches, markers and aborted-transaction index entries left
 * depend on which passes ran while the plan was being written (segment boundaries and pass times differ
 * between the brokers), and a second pass over the whole log brings both to the state the rules make
 * deterministic; it is also the pass that removes the `expiring` topic's tombstones.
 *
 * Where Apache and bunka may legitimately differ, and what is therefore not compared:
 * - which segments were cleaned, and how often, at any moment before the final passes (segment
 *   boundaries differ: Apache rolls at 1024 bytes of its own batch sizes, bunka at 1024 of its own), so
 *   the reads made while the plan's data is still partly dirty are checked against the rules (every
 *   record one that was written, at its offset, nothing aborted under read_committed, the last value per
 *   key the latest committed one), not against each other;
 * - producer ids and epochs, the delete horizons written into rewritten batches (wall-clock times), and
 *   batch sizes;
 * - when Apache answers EndTxn: once its decision is logged, with the markers written after, where bunka
 *   answers once the markers are written (CompactedTopicCheck.java waits for the markers, so that the
 *   offsets are the same either way);
 * - in the `expiring` topic, whether a marker has gone yet: a marker gets its delete horizon in the pass
 *   after the one that removed its transaction's data, and bunka (not Apache) also starts a pass when a
 *   horizon has passed, so its timer may run a third pass there;
 * - the end offsets include the sentinels (the same count on both: one roll each time).
 * What is compared exactly, after both final passes: every (offset, key, value) under read_committed and
 * read_uncommitted, through both clients, below the first sentinel; the end offsets; and in the `kept`
 * topic the batches left (base offset, offset span, control or data, transactional, which producer,
 * record offsets) and the aborted transactions listed by a read_committed Fetch from offset 0.
 *
 *   bun test --timeout 600000 tests/interop/compacted-topics.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CLEANER_CONFIG } from "../../src/domain/cleaner-config.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { BATCH_HEADER_BYTES, checkBatch, parseBatchHeader, type BatchHeader } from "../../src/protocol/records/record-batch.ts";
import { decodeRecords, type KafkaRecord } from "../../src/protocol/records/records.ts";
import { type ApacheKafka, LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin, startApacheKafka } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";
import { until } from "../support/wait.ts";

const TIMEOUT = 180_000;
const CLEANER_BACKOFF_MS = 100;
const APACHE_TRANSACTION_VERSION = process.env.COMPACTED_APACHE_TV === "2" ? 2 : 1;
const PARTITIONS = 2;
const JAVA_SOURCE = join(import.meta.dir, "java/CompactedTopicCheck.java");
const CLASSES = join(REPO_ROOT, ".cache", "java-classes", "compacted");
const PY_READER = join(import.meta.dir, "python/compacted_read.py");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
/**
 * A sentinel's value: its batch (about 1020 bytes) fits a 1024-byte segment (both brokers refuse a
 * bigger one with RECORD_LIST_TOO_LARGE) but not beside anything else, so appending it rolls the active
 * segment on both brokers.
 */
const SENTINEL_BYTES = 940;
const SENTINEL_KEY = "~sentinel";

const TOPICS = { kept: "compacted-txn-kept", expiring: "compacted-txn-expiring" } as const;
type TopicRole = keyof typeof TOPICS;
const DELETE_RETENTION_MS: Record<TopicRole, string> = { kept: "86400000", expiring: "0" };
const COMMON_CONFIGS = { "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100" };
/** The size knob each broker takes for 1 KiB segments. */
const SEGMENT_SIZE_CONFIG = { apache: { "internal.segment.bytes": "1024" }, bunka: { "segment.bytes": "1024" } };

type BrokerName = "apache" | "bunka";
type Isolation = "read_committed" | "read_uncommitted";
/** [offset, key, value]; value null for a tombstone. */
type Seen = [number, string, string | null];

// ---------------------------------------------------------------------------------------------
// The plan

type Producer = "P" | "T1" | "T2";
type Step = { kind: "send"; producer: Producer; key: string; value: string | null } | { kind: "begin" | "commit" | "abort"; producer: Producer };

/** Key "kNN" lives in partition NN % 2. */
const partitionOf = (key: string) => Number(key.slice(1)) % PARTITIONS;
const KEYS = Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, "0")}`);

function buildPlan(): Step[] {
  const steps: Step[] = [];
  const send = (producer: Producer, key: string, value: string | null) => steps.push({ kind: "send", producer, key, value });
  const mark = (kind: "begin" | "commit" | "abort", producer: Producer) => steps.push({ kind, producer });
  // Rounds over every key: many superseded versions spread over many segments, and aborted
  // transactions over keys that also have committed values.
  for (let round = 0; round < 4; round++) {
    for (const k of KEYS) send("P", k, `p${round}-${k}`);
    mark("begin", "T1");
    for (const k of KEYS) send("T1", k, `t1c${round}-${k}`);
    mark("commit", "T1");
    mark("begin", "T2");
    for (const k of KEYS.slice(0, 6)) send("T2", k, `t2a${round}-${k}`);
    mark("abort", "T2");
  }
  // Plain tombstones and a plain value.
  send("P", "k06", null);
  send("P", "k07", null);
  send("P", "k08", "p-last-k08");
  // A committed tombstone.
  mark("begin", "T1");
  send("T1", "k01", null);
  send("T1", "k09", "t1-last-k09");
  send("T1", "k10", "t1-last-k10");
  mark("commit", "T1");
  // Two transactions open at once on k02: the earlier one (T1) commits, the later one (T2) aborts, and
  // T2 also writes k98, which no committed write ever has.
  mark("begin", "T1");
  send("T1", "k02", "t1-k02");
  mark("begin", "T2");
  send("T2", "k02", "t2-aborted-k02");
  send("T2", "k98", "t2-aborted-k98");
  mark("commit", "T1");
  mark("abort", "T2");
  // The other way round on k03: the later write (T1) aborts, the earlier (T2) commits after it, with a
  // record written after T1's abort marker.
  mark("begin", "T2");
  send("T2", "k03", "t2-k03");
  mark("begin", "T1");
  send("T1", "k03", "t1-aborted-k03");
  mark("abort", "T1");
  send("T2", "k05", "t2-k05");
  mark("commit", "T2");
  // A plain tombstone, then the key written again in a committed transaction.
  send("P", "k11", "p-last-k11");
  send("P", "k04", null);
  mark("begin", "T2");
  send("T2", "k04", "t2-k04-again");
  mark("commit", "T2");
  // An aborted transaction last: an aborted value, an aborted tombstone, an aborted-only key. It is
  // T1's last batch, which the cleaner keeps (emptied) for T1's sequence and epoch.
  mark("begin", "T1");
  send("T1", "k08", "t1-aborted-k08");
  send("T1", "k09", null);
  send("T1", "k99", "t1-aborted-k99");
  mark("abort", "T1");
  return steps;
}

const PLAN = buildPlan();

function planText(): string {
  return PLAN.map((s) => (s.kind === "send" ? `send ${s.producer} ${partitionOf(s.key)} ${s.key} ${s.value ?? "-"}` : `${s.kind} ${s.producer}`)).join("\n") + "\n";
}

interface Written {
  producer: Producer;
  partition: number;
  offset: number;
  key: string;
  value: string | null;
  outcome: "plain" | "commit" | "abort";
}

/**
 * The plan's records with the offsets the plan gives them, in order: a record takes one offset, and a
 * transaction's marker one offset in each partition the transaction wrote to.
 */
function plannedRecords(): { records: Written[]; ends: number[] } {
  const next = Array.from({ length: PARTITIONS }, () => 0);
  const records: Written[] = [];
  const open = new Map<Producer, { records: Written[]; partitions: Set<number> }>();
  for (const s of PLAN) {
    if (s.kind === "begin") open.set(s.producer, { records: [], partitions: new Set() });
    else if (s.kind === "send") {
      const partition = partitionOf(s.key);
      const txn = open.get(s.producer);
      const r: Written = { producer: s.producer, partition, offset: next[partition]!++, key: s.key, value: s.value, outcome: txn ? "abort" : "plain" };
      txn?.records.push(r);
      txn?.partitions.add(partition);
      records.push(r);
    } else {
      const txn = open.get(s.producer)!;
      for (const r of txn.records) r.outcome = s.kind;
      for (const p of [...txn.partitions].sort()) next[p]!++;
      open.delete(s.producer);
    }
  }
  return { records, ends: next };
}

/** What the cleaner rules promise below the first sentinel: the latest non-aborted record of each key, at its offset. */
function expectedView(records: Written[], keepTombstones: boolean): Seen[][] {
  return Array.from({ length: PARTITIONS }, (_, p) => {
    const latest = new Map<string, Written>();
    for (const r of records) if (r.partition === p && r.outcome !== "abort") latest.set(r.key, r);
    return [...latest.values()]
      .filter((r) => keepTombstones || r.value !== null)
      .sort((a, b) => a.offset - b.offset)
      .map((r) => [r.offset, r.key, r.value] as Seen);
  });
}

const PLANNED = plannedRecords();
/** Offset -> what the plan wrote there, per partition. */
const WRITTEN_AT = Array.from({ length: PARTITIONS }, (_, p) => new Map(PLANNED.records.filter((r) => r.partition === p).map((r) => [r.offset, r])));

// ---------------------------------------------------------------------------------------------
// Brokers

interface Side {
  name: BrokerName;
  bootstrap: string;
  port: number;
  /** Offsets below which each partition of `topic` has been through a cleaning pass (-1: none yet). */
  cleanedUpTo(topic: string): Promise<number[]>;
}

let libs = "";
let apache: ApacheKafka | undefined;
let bunka: TestBroker | undefined;
const sides = {} as Record<BrokerName, Side>;
let tmp = "";

/** Apache's cleaner-offset-checkpoint: "0", a count, then "<topic> <partition> <first dirty offset>" lines. */
function apacheCheckpoint(dataDir: string, topic: string): number[] {
  const file = join(dataDir, "kraft-logs", "cleaner-offset-checkpoint");
  const out = Array.from({ length: PARTITIONS }, () => -1);
  if (!existsSync(file)) return out;
  for (const line of readFileSync(file, "utf8").split("\n").slice(2)) {
    const [t, p, offset] = line.trim().split(" ");
    if (t === topic) out[Number(p)] = Number(offset);
  }
  return out;
}

async function withClient<T>(side: Side, fn: (client: WireClient) => Promise<T>): Promise<T> {
  const client = await WireClient.connect(side.port);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}


async function createTopics(side: Side): Promise<void> {
  await withClient(side, async (client) => {
    const res = await client.request(19, 7, {
      topics: (Object.keys(TOPICS) as TopicRole[]).map((role) => ({
        name: TOPICS[role],
        numPartitions: PARTITIONS,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries({ ...COMMON_CONFIGS, ...SEGMENT_SIZE_CONFIG[side.name], "delete.retention.ms": DELETE_RETENTION_MS[role] }).map(([name, value]) => ({ name, value })),
      })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    expect(res.topics.map((t: { name: string; errorCode: number }) => [t.name, t.errorCode])).toEqual(Object.values(TOPICS).map((t) => [t, ErrorCode.NONE]));
    // Apache answers CreateTopics before the partitions have a leader.
    await until(`leaders on ${side.name}`, 30_000, async () => {
      const md = await client.request(3, 12, { topics: Object.values(TOPICS).map((name) => ({ name, topicId: ZERO_UUID })), allowAutoTopicCreation: false });
      const led = md.topics.every(
        (t: { errorCode: number; partitions: { errorCode: number; leaderId: number }[] }) =>
          t.errorCode === ErrorCode.NONE && t.partitions.length === PARTITIONS && t.partitions.every((p) => p.errorCode === ErrorCode.NONE && p.leaderId >= 0),
      );
      return led ? true : undefined;
    });
  });
}

/** Appends one sentinel record to every partition of both topics; returns its offsets per topic. */
async function appendSentinels(side: Side, round: number): Promise<Record<TopicRole, number[]>> {
  return await withClient(side, async (client) => {
    const out = {} as Record<TopicRole, number[]>;
    for (const role of Object.keys(TOPICS) as TopicRole[]) {
      out[role] = [];
      for (let p = 0; p < PARTITIONS; p++) {
        const res = await client.request(0, 9, {
          transactionalId: null,
          acks: -1,
          timeoutMs: 10_000,
          topicData: [{ name: TOPICS[role], partitionData: [{ index: p, records: buildBatch({ records: [{ key: SENTINEL_KEY, value: `${round}`.padEnd(SENTINEL_BYTES, "s") }] }) }] }],
        });
        const answer = res.responses[0].partitionResponses[0];
        expect(answer.errorCode, `${side.name}: sentinel ${round} to ${TOPICS[role]}-${p}`).toBe(ErrorCode.NONE);
        out[role].push(Number(answer.baseOffset));
      }
    }
    return out;
  });
}

/** Until a cleaning pass of every partition of both topics reached `offsets` (the sentinels' offsets). */
async function waitForPass(side: Side, offsets: Record<TopicRole, number[]>): Promise<void> {
  await until(`a cleaning pass on ${side.name} up to ${JSON.stringify(offsets)}`, 60_000, async () => {
    for (const role of Object.keys(TOPICS) as TopicRole[]) {
      const cleaned = await side.cleanedUpTo(TOPICS[role]);
      if (cleaned.some((c, p) => c < offsets[role][p]!)) return undefined;
    }
    return true;
  });
}

// ---------------------------------------------------------------------------------------------
// Clients

class JavaChild extends LineChild {
  constructor(args: string[]) {
    super(`java CompactedTopicCheck ${args[0]}`, [javaBin(), ...JVM_FLAGS, "-cp", `${CLASSES}:${libs}/*`, "CompactedTopicCheck", ...args]);
  }
}

async function compileJava(): Promise<void> {
  const cls = join(CLASSES, "CompactedTopicCheck.class");
  if (existsSync(cls) && statSync(cls).mtimeMs >= statSync(JAVA_SOURCE).mtimeMs) return;
  mkdirSync(CLASSES, { recursive: true });
  const proc = Bun.spawn(["javac", "-nowarn", "-d", CLASSES, "-cp", `${libs}/*`, JAVA_SOURCE], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac CompactedTopicCheck.java failed (${code}):\n${out}${err}`);
}

async function runToEnd(child: LineChild, timeoutMs: number): Promise<string> {
  const code = await child.exitWithin(timeoutMs);
  if (code !== 0) throw new Error(`${child.label} exited ${code}\n${child.output()}`);
  return child.stdout;
}

/** Runs the plan on one broker; returns every acknowledgement as [topic, producer, partition, offset, key]. */
async function runPlan(side: Side): Promise<string[][]> {
  const planFile = join(tmp, `plan-${side.name}.txt`);
  writeFileSync(planFile, planText());
  const out = await runToEnd(new JavaChild(["write", side.bootstrap, Object.values(TOPICS).join(","), `compacted-${side.name}`, planFile]), 120_000);
  expect(out.trimEnd().split("\n").at(-1)).toBe("DONE");
  return out
    .split("\n")
    .filter((l) => l.startsWith("W "))
    .map((l) => l.split(" ").slice(1));
}

interface Read {
  ends: number[];
  records: Seen[][];
}

/** The whole topic through the Java consumer, once per isolation level. */
async function javaRead(side: Side, topic: string, isolations: Isolation[]): Promise<Record<string, Read>> {
  const out = await runToEnd(new JavaChild(["read", side.bootstrap, topic, isolations.join(","), "60000"]), 120_000);
  const reads: Record<string, Read> = {};
  let current: Read | undefined;
  for (const line of out.split("\n")) {
    const f = line.split(" ");
    if (f[0] === "ISOLATION") reads[f[1]!] = current = { ends: [], records: Array.from({ length: PARTITIONS }, () => []) };
    if (f[0] === "END") current!.ends[Number(f[1])] = Number(f[2]);
    if (f[0] === "R") current!.records[Number(f[1])]!.push([Number(f[2]), f[3]!, f[4] === "-" ? null : f[4]!.slice(1)]);
  }
  expect(Object.keys(reads)).toEqual(isolations);
  return reads;
}

/** The whole topic through librdkafka, once per isolation level. */
async function librdkafkaRead(side: Side, topic: string, isolations: Isolation[]): Promise<Record<string, Seen[][]>> {
  const out = await runToEnd(new LineChild("compacted_read.py", [VENV_PYTHON, PY_READER, side.bootstrap, topic, String(PARTITIONS), isolations.join(",")]), 120_000);
  const reads: Record<string, Seen[][]> = {};
  for (const line of out.trim().split("\n")) {
    const { isolation, records } = JSON.parse(line) as { isolation: string; records: Record<string, Seen[]> };
    reads[isolation] = Array.from({ length: PARTITIONS }, (_, p) => records[String(p)]!);
  }
  expect(Object.keys(reads)).toEqual(isolations);
  return reads;
}

/** Records of the plan only (below the first sentinel). */
const belowSentinel = (records: Seen[][]) => records.map((rs, p) => rs.filter(([offset]) => offset < PLANNED.ends[p]!));

/**
 * Checks a read made in whatever state the cleaner left the log: every record is one the plan wrote, at
 * its offset, with its value, in offset order; under read_committed none is aborted; and the last value
 * each key shows is the latest committed one (what a consumer rebuilding a table from the topic gets).
 */
function expectConsistentWithPlan(records: Seen[][], isolation: Isolation, what: string): void {
  const expected = expectedView(PLANNED.records, true);
  for (let p = 0; p < PARTITIONS; p++) {
    const seen = belowSentinel(records)[p]!;
    const offsets = seen.map(([o]) => o);
    expect(offsets, `${what} p${p}: offsets in order`).toEqual([...offsets].sort((a, b) => a - b));
    expect(new Set(offsets).size, `${what} p${p}: no offset twice`).toBe(offsets.length);
    for (const [offset, key, value] of seen) {
      const w = WRITTEN_AT[p]!.get(offset);
      expect({ offset, key, value }, `${what} p${p}: a record the plan wrote there`).toEqual({ offset, key: w?.key ?? "(none)", value: w?.value ?? null });
      if (isolation === "read_committed") expect(w!.outcome, `${what} p${p}@${offset}: read_committed shows an aborted record`).not.toBe("abort");
    }
    if (isolation === "read_committed") {
      const last = new Map<string, Seen>();
      for (const r of seen) last.set(r[1], r);
      expect([...last.values()].sort((a, b) => a[0] - b[0]), `${what} p${p}: the last value of every key`).toEqual(expected[p]!);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Raw Fetch: batches and aborted transactions

interface RawView {
  /** [baseOffset, lastOffset, kind, transactional, producer, record offsets]. */
  batches: [number, number, string, boolean, string, number[]][];
  /** [producer, firstOffset] of every aborted transaction a read_committed Fetch from 0 lists. */
  abortedTransactions: [string, number][];
}

interface CleanedBatch {
  header: BatchHeader;
  records: KafkaRecord[];
}

/**
 * The whole batches of a Fetch answer, cleaned ones included: a batch the cleaner emptied has no records
 * and keeps its offset span (tests/support/record-decoder.ts refuses those, rightly for uncleaned logs).
 */
function decodeCleaned(bytes: Uint8Array): CleanedBatch[] {
  const out: CleanedBatch[] = [];
  for (let at = 0; at + BATCH_HEADER_BYTES <= bytes.length; ) {
    const size = checkBatch(bytes, at, bytes.length, true);
    if (typeof size !== "number") {
      if (size.kind === "truncated") break; // the answer was cut at its size limit
      throw new Error(`unsound batch at ${at}: ${JSON.stringify(size)}`);
    }
    out.push({ header: parseBatchHeader(bytes, at), records: decodeRecords(bytes.subarray(at, at + size)) });
    at += size;
  }
  return out;
}

/** Every batch below the first sentinel and the aborted transactions, by read_committed Fetch v12 from 0. */
async function rawView(side: Side, topic: string, partition: number, producerNames: Map<number, string>): Promise<RawView> {
  return await withClient(side, async (client) => {
    const batches: CleanedBatch[] = [];
    const aborted: [number, number][] = [];
    const end = PLANNED.ends[partition]!;
    for (let offset = 0; offset < end; ) {
      const res = await client.request(1, 12, {
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 0,
        maxBytes: 1 << 20,
        isolationLevel: 1,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [{ topic, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: 1 << 20, logStartOffset: -1 }] }],
      });
      const data = res.responses[0].partitions[0];
      expect(data.errorCode).toBe(ErrorCode.NONE);
      for (const t of (data.abortedTransactions ?? []) as { producerId: number; firstOffset: number }[]) {
        if (!aborted.some(([pid, first]) => pid === Number(t.producerId) && first === Number(t.firstOffset))) aborted.push([Number(t.producerId), Number(t.firstOffset)]);
      }
      const before = offset;
      for (const b of decodeCleaned(data.records ?? new Uint8Array(0))) {
        const last = b.header.baseOffset + b.header.lastOffsetDelta;
        if (last < offset) continue;
        if (b.header.baseOffset < end) batches.push(b);
        offset = last + 1;
      }
      if (offset === before) throw new Error(`${side.name} ${topic}-${partition}@${offset}: no progress`);
    }
    for (const b of batches) {
      if (b.header.isControl || b.records.length === 0) continue;
      producerNames.set(b.header.producerId, WRITTEN_AT[partition]!.get(b.records[0]!.offset)?.producer ?? "?");
    }
    const name = (pid: number) => (pid < 0 ? "none" : (producerNames.get(pid) ?? `unknown`));
    const kind = (b: CleanedBatch) => (!b.header.isControl ? "data" : b.records.length === 0 ? "emptied control" : b.records[0]!.key![3] === 1 ? "COMMIT" : "ABORT");
    return {
      batches: batches.map((b) => [
        b.header.baseOffset,
        b.header.baseOffset + b.header.lastOffsetDelta,
        kind(b),
        b.header.isTransactional,
        name(b.header.producerId),
        b.records.map((r) => r.offset),
      ]),
      abortedTransactions: aborted.map(([pid, first]) => [name(pid), first] as [string, number]).sort((a, b) => a[1] - b[1]),
    };
  });
}

// ---------------------------------------------------------------------------------------------

const acknowledged = {} as Record<BrokerName, string[][]>;
const midCleaning = {} as Record<BrokerName, Record<string, Read>>;
const sentinels = {} as Record<BrokerName, Record<TopicRole, number[]>[]>;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), "bunka-compacted-"));
  libs = await ensureKafkaLibs();
  const apacheStarting = startApacheKafka({
    serverProperties: { "log.cleaner.backoff.ms": CLEANER_BACKOFF_MS, "auto.create.topics.enable": false },
    features: { "transaction.version": APACHE_TRANSACTION_VERSION },
  });
  apacheStarting.catch(() => undefined);
  await Promise.all([compileJava(), ensureInteropClients()]);
  bunka = await startTestBroker({ autoCreateTopicsEnable: false, cleaner: { ...DEFAULT_CLEANER_CONFIG, backoffMs: CLEANER_BACKOFF_MS } });
  apache = await apacheStarting;
  const apacheDir = apache.dataDir;
  const cleaner = () => bunka!.broker.services.cleaner;
  sides.apache = {
    name: "apache",
    bootstrap: apache.bootstrap,
    port: apache.port,
    cleanedUpTo: async (topic) => apacheCheckpoint(apacheDir, topic),
  };
  sides.bunka = {
    name: "bunka",
    bootstrap: bunka.bootstrap,
    port: bunka.port,
    cleanedUpTo: async (topic) => Array.from({ length: PARTITIONS }, (_, p) => cleaner().statsOf(topic, p)?.cleanedUpToOffset ?? -1),
  };
  await Promise.all(Object.values(sides).map(async (side) => {
    await createTopics(side);
    acknowledged[side.name] = await runPlan(side);
    // A read before the final passes, in whatever state each cleaner has reached meanwhile.
    midCleaning[side.name] = await javaRead(side, TOPICS.kept, ["read_committed", "read_uncommitted"]);
    sentinels[side.name] = [];
    for (let round = 0; round < 2; round++) {
      const offsets = await appendSentinels(side, round);
      sentinels[side.name].push(offsets);
      await waitForPass(side, offsets);
    }
  }));
}, 300_000);

afterAll(async () => {
  await killLiveChildren();
  await Promise.all([bunka?.stop(), apache?.stop()]);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe("compacted topics with transactional data: the Java consumer and librdkafka on bunka and Apache Kafka 4.1.1", () => {
  test("the plan's offsets: a record or a marker takes one offset, the same on both brokers", () => {
    // The Java program prints one line per record and topic, in the plan's order.
    const want = PLANNED.records.flatMap((r) => Object.values(TOPICS).map((topic) => [topic, r.producer, String(r.partition), String(r.offset), r.key]));
    expect(want.length).toBe(2 * PLAN.filter((s) => s.kind === "send").length);
    expect(acknowledged.bunka).toEqual(want);
    expect(acknowledged.apache).toEqual(want);
    // Each round's sentinel lands right after the plan (and the previous sentinel), on both brokers.
    for (const side of ["apache", "bunka"] as const) {
      for (const [round, offsets] of sentinels[side].entries()) {
        for (const role of Object.keys(TOPICS) as TopicRole[]) expect(offsets[role]).toEqual(PLANNED.ends.map((e) => e + round));
      }
    }
  });

  test("a read while the cleaner may be part-way: only written records at their offsets, read_committed none aborted and the latest committed value per key", () => {
    for (const side of ["apache", "bunka"] as const) {
      for (const isolation of ["read_committed", "read_uncommitted"] as const) {
        const read = midCleaning[side][isolation]!;
        expectConsistentWithPlan(read.records, isolation, `${side} Java ${isolation} mid-cleaning`);
      }
    }
  });

  test("after the final passes, the Java consumer: exactly the latest value of every key at its offset, tombstones kept, nothing aborted; bunka = Apache", async () => {
    const expected = expectedView(PLANNED.records, true);
    const reads = {} as Record<BrokerName, Record<string, Read>>;
    await Promise.all((["apache", "bunka"] as const).map(async (side) => (reads[side] = await javaRead(sides[side], TOPICS.kept, ["read_committed", "read_uncommitted"]))));
    for (const side of ["apache", "bunka"] as const) {
      for (const isolation of ["read_committed", "read_uncommitted"] as const) {
        const read = reads[side][isolation]!;
        // Every aborted record is gone from the cleaned log, so read_uncommitted sees the same.
        expect(belowSentinel(read.records), `${side} Java ${isolation}`).toEqual(expected);
        // The two sentinels follow; nothing is open, so the LSO is the high watermark.
        expect(read.ends, `${side} Java ${isolation} end offsets`).toEqual(PLANNED.ends.map((e) => e + 2));
      }
    }
    expect(reads.bunka).toEqual(reads.apache);
  }, TIMEOUT);

  test("after the final passes, librdkafka: the same records, on both brokers", async () => {
    const expected = expectedView(PLANNED.records, true);
    const reads = {} as Record<BrokerName, Record<string, Seen[][]>>;
    await Promise.all((["apache", "bunka"] as const).map(async (side) => (reads[side] = await librdkafkaRead(sides[side], TOPICS.kept, ["read_committed", "read_uncommitted"]))));
    for (const side of ["apache", "bunka"] as const) {
      for (const isolation of ["read_committed", "read_uncommitted"] as const) {
        expect(belowSentinel(reads[side][isolation]!), `${side} librdkafka ${isolation}`).toEqual(expected);
      }
    }
    expect(reads.bunka).toEqual(reads.apache);
  }, TIMEOUT);

  test("delete.retention.ms=0: the pass after the one that kept them removes the tombstones, on both brokers, through both clients", async () => {
    const expected = expectedView(PLANNED.records, false);
    const [javaApache, javaBunka, rdkApache, rdkBunka] = await Promise.all([
      javaRead(sides.apache, TOPICS.expiring, ["read_committed", "read_uncommitted"]),
      javaRead(sides.bunka, TOPICS.expiring, ["read_committed", "read_uncommitted"]),
      librdkafkaRead(sides.apache, TOPICS.expiring, ["read_committed", "read_uncommitted"]),
      librdkafkaRead(sides.bunka, TOPICS.expiring, ["read_committed", "read_uncommitted"]),
    ]);
    for (const isolation of ["read_committed", "read_uncommitted"] as const) {
      expect(belowSentinel(javaApache[isolation]!.records), `apache Java ${isolation}`).toEqual(expected);
      expect(belowSentinel(javaBunka[isolation]!.records), `bunka Java ${isolation}`).toEqual(expected);
      expect(belowSentinel(rdkApache[isolation]!), `apache librdkafka ${isolation}`).toEqual(expected);
      expect(belowSentinel(rdkBunka[isolation]!), `bunka librdkafka ${isolation}`).toEqual(expected);
    }
  }, TIMEOUT);

  test("raw Fetch of the kept topic: the same batches left (emptied ones and markers included) and the same aborted transactions", async () => {
    const views = {} as Record<BrokerName, RawView[]>;
    for (const side of ["apache", "bunka"] as const) {
      const names = new Map<number, string>();
      views[side] = [];
      for (let p = 0; p < PARTITIONS; p++) views[side].push(await rawView(sides[side], TOPICS.kept, p, names));
    }
    // At transaction version 2 Apache bumps the producer epoch at every EndTxn and writes the marker with the
    // new epoch; the marker, not the transaction's last data batch, then carries the producer's state, so no
    // transactional data batch is kept emptied, and an aborted transaction with no batch left is no longer
    // listed. bunka's view with those taken out is Apache's then.
    expect(APACHE_TRANSACTION_VERSION === 1 ? views.bunka : views.bunka.map(asAtTransactionVersion2)).toEqual(views.apache);
  }, TIMEOUT);
});

/** A raw view without emptied transactional data batches, and without the aborted transactions that leaves no data of. */
function asAtTransactionVersion2(view: RawView): RawView {
  const batches = view.batches.filter(([, , kind, transactional, , offsets]) => !(kind === "data" && transactional && offsets.length === 0));
  const abortedTransactions = view.abortedTransactions.filter(([producer, firstOffset]) => {
    const marker = batches.find(([base, , kind, , p]) => kind === "ABORT" && p === producer && base > firstOffset);
    return batches.some(([base, , kind, , p]) => kind === "data" && p === producer && base >= firstOffset && (marker === undefined || base < marker[0]));
  });
  return { batches, abortedTransactions };
}
