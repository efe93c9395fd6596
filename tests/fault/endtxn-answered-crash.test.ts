/**
 * The broker SIGKILLed after it answered EndTxn and before it wrote the transaction's markers, with each of
 * five real clients: Apache Kafka's Java client (tests/interop/java/TxnProducer.java, mode decide, compiled
 * here with javac against the Kafka jars), librdkafka (confluent-kafka in the venv,
 * tests/interop/python/txn_zombie.py), kafkajs (tests/interop/node/txn-zombie.ts, run with bun), franz-go
 * (tests/interop/go/txnzombie, built by scripts/install-interop-clients.sh into .cache/go-bin/) and
 * @platformatic/kafka (tests/interop/node/txn-zombie-platformatic.ts), each in a commit and an abort run.
 *
 * EndTxn is answered once the decision (PrepareCommit / PrepareAbort) is durable; the staged offsets, the
 * markers and Complete* follow (docs/architecture.md, "Transactions and idempotence"). A client whose
 * commitTransaction returned has been told that its records are committed, so a crash in that window must
 * not lose the decision, and the restart must not write the markers twice. Each run:
 *
 *   1. starts the compiled binary with BUNKA_TEST_HOLD_AFTER_ENDTXN_ANSWER=1 (the first EndTxn decision is
 *      answered and its markers are never written by that process) on a fresh data directory, with a topic
 *      of 3 partitions;
 *   2. runs the client helper: initTransactions, one transaction of 9 records "<prefix>-0-<i>" (record i to
 *      partition i % 3), with a consumer group's offsets 40 + p for every partition p (Java
 *      sendOffsetsToTransaction, librdkafka send_offsets_to_transaction, kafkajs sendOffsets,
 *      @platformatic/kafka addConsumer + addOffset; franz-go only commits offsets from a
 *      GroupTransactSession, so its run has none), then commit (or abort), printing COMMITTED 0 (ABORTED 0)
 *      once the call returned; the helper exits 0;
 *   3. while the broker still runs: nothing is visible to read_committed (LSO 0 on every partition) and the
 *      group's offsets are unstable (require_stable); then SIGKILL; on disk (read after the kill, with the
 *      broker's own slot-store loader): the id is PrepareCommit (PrepareAbort) with the 3 partitions and the
 *      group, and the segment files hold the 9 records and no control batch;
 *   4. restarts the binary without the hook on the same data directory; the first answer of the coordinator
 *      that is not COORDINATOR_LOAD_IN_PROGRESS is CompleteCommit (CompleteAbort) for the same producer id
 *      (start-up recovery finishes decided transactions before the coordinator answers, so a decision the
 *      restart lost would still show Prepare* here, before the 10 s reconcile pass could hide it); each
 *      partition holds its 3 records and exactly one marker of the decision, from the transaction's producer
 *      id and epoch; the LSO is the high watermark; librdkafka's read_committed consumer sees every record
 *      exactly once after a commit and none after an abort; the group's offsets are 40 + p after a commit
 *      and absent after an abort (stable either way); SIGTERM exits 0.
 *
 * ENDTXN_CRASH_APACHE=1 adds the reference run: the same helpers against Apache Kafka 4.1.1 (formatted at
 * transaction version 1, as bunka serves) without a kill, with the same end state asserted (so the helpers'
 * offsets, generation -1 and no member id, are what Apache accepts too).
 *
 *   bun test --timeout 300000 tests/fault/endtxn-answered-crash.test.ts
 *   ENDTXN_CRASH_APACHE=1 bun test --timeout 300000 tests/fault/endtxn-answered-crash.test.ts
 *   BUNKA_TEST_BINARY=/path/to/bunka bun test ...     (against another build, e.g. a deliberately broken one)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { slotOf } from "../../src/cluster/ownership.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { TxnStateStore } from "../../src/storage/txn-state-store.ts";
import { ensureKafkaLibs, javaBin, LOG4J_CONFIG, REPO_ROOT, startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { BunkaProcess, CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir } from "../support/fault-support.ts";
import { ensureInteropClients, goHelper, VENV_PYTHON } from "../support/interop-clients.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { decodeRecordSet, readPartitionFully, utf8, type DecodedBatch } from "../support/record-decoder.ts";
import { describeTxn, isAbortMarker, isCommitMarker, latestOffset } from "../support/txn-requests.ts";
import { WireClient } from "../support/wire-client.ts";
import { until } from "../support/wait.ts";

const PARTITIONS = 3;
const RECORDS = 9;
/** The group's offset of partition p in a transaction is OFFSET_BASE + p. */
const OFFSET_BASE = 40;
const HOLD_HOOK = { BUNKA_TEST_HOLD_AFTER_ENDTXN_ANSWER: "1" };
const WITH_APACHE = process.env.ENDTXN_CRASH_APACHE === "1";
const CLIENT_EXIT_MS = 60_000;

const INTEROP = join(REPO_ROOT, "tests", "interop");
const JAVA_SOURCE = join(INTEROP, "java", "TxnProducer.java");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
const PY_SCRIPT = join(INTEROP, "python", "txn_zombie.py");

type End = "commit" | "abort";

interface ClientCase {
  name: string;
  /** Whether its helper can put a group's offsets into the transaction. */
  offsets: boolean;
  command(args: string[]): string[];
}

let kafkaLibs = "";
let javaClasses = "";

const CLIENTS: ClientCase[] = [
  { name: "java", offsets: true, command: (args) => [javaBin(), ...JVM_FLAGS, "-cp", `${javaClasses}:${kafkaLibs}/*`, "TxnProducer", ...args] },
  { name: "librdkafka", offsets: true, command: (args) => [VENV_PYTHON, PY_SCRIPT, ...args] },
  { name: "kafkajs", offsets: true, command: (args) => [process.execPath, join(INTEROP, "node", "txn-zombie.ts"), ...args] },
  { name: "franz-go", offsets: false, command: (args) => [goHelper("txn-zombie"), ...args] },
  { name: "platformatic", offsets: true, command: (args) => [process.execPath, join(INTEROP, "node", "txn-zombie-platformatic.ts"), ...args] },
];

/** javac of TxnProducer.java into .cache/java-classes/endtxn-crash-<hash of the source>/, once per version. */
async function compileTxnProducer(): Promise<string> {
  const hash = createHash("sha256").update(readFileSync(JAVA_SOURCE)).digest("hex").slice(0, 12);
  const dir = join(REPO_ROOT, ".cache", "java-classes", `endtxn-crash-${hash}`);
  if (existsSync(join(dir, "TxnProducer.class"))) return dir;
  // Compiled beside and renamed into place, so that a concurrent run never sees half a directory.
  const tmp = `${dir}.tmp-${process.pid}`;
  mkdirSync(tmp, { recursive: true });
  const proc = Bun.spawn([javaBin().replace(/java$/, "javac"), "-nowarn", "-d", tmp, "-cp", `${kafkaLibs}/*`, JAVA_SOURCE], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`javac TxnProducer.java failed (exit ${code}):\n${out}${err}`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

// ---------------------------------------------------------------------------------------------
// One transaction of one client

interface Scenario {
  client: ClientCase;
  end: End;
  topic: string;
  transactionalId: string;
  prefix: string;
  group: string | undefined;
}

function scenario(client: ClientCase, end: End, target: string): Scenario {
  const name = `${target}-${client.name}-${end}`;
  return { client, end, topic: `endtxn-${name}`, transactionalId: `endtxn-${name}-id`, prefix: `${client.name}-${end}`, group: client.offsets ? `endtxn-${name}-group` : undefined };
}

/** The keys the helper writes to partition p: "<prefix>-0-<i>" for every i with i % PARTITIONS == p. */
function keysOf(s: Scenario, partition: number): string[] {
  return Array.from({ length: RECORDS }, (_, i) => i)
    .filter((i) => i % PARTITIONS === partition)
    .map((i) => `${s.prefix}-0-${i}`);
}

const partitionIndexes = Array.from({ length: PARTITIONS }, (_, p) => p);

/**
 * Runs the client's helper (mode decide) to its end: it must print COMMITTED 0 / ABORTED 0, the sign that
 * its commitTransaction / abortTransaction returned, and exit 0.
 */
async function runDecide(s: Scenario, bootstrap: string): Promise<void> {
  const groupArgs = s.group === undefined ? [] : [s.group, String(OFFSET_BASE)];
  const args = ["decide", bootstrap, s.topic, s.transactionalId, s.prefix, String(PARTITIONS), String(RECORDS), s.end, ...groupArgs];
  const child = new LineChild(`${s.client.name} ${s.end}`, s.client.command(args));
  await child.waitFor(s.end === "commit" ? /^COMMITTED 0\b/m : /^ABORTED 0\b/m, CLIENT_EXIT_MS);
  const code = await child.exitWithin(CLIENT_EXIT_MS);
  if (code !== 0) throw new Error(`${child.label} exited ${code}\n${child.output()}`);
}

// ---------------------------------------------------------------------------------------------
// Raw requests

async function createTopic(c: WireClient, name: string): Promise<void> {
  const res = await c.request(19, 7, { topics: [{ name, numPartitions: PARTITIONS, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  // Apache Kafka answers CreateTopics before its partitions have a leader: wait for them (bunka has them at once).
  await until(`leaders for ${name}`, 30_000, async () => {
    const md = await c.request(3, 12, { topics: [{ name, topicId: ZERO_UUID }], allowAutoTopicCreation: false });
    const t = md.topics[0];
    const led = t.errorCode === ErrorCode.NONE && t.partitions.length === PARTITIONS && t.partitions.every((p: { leaderId: number }) => p.leaderId >= 0);
    return led ? true : undefined;
  });
}

/** The group's committed offsets of the topic's partitions (OffsetFetch v8, require_stable), -1 for none, or "unstable". */
async function groupOffsets(c: WireClient, group: string, topic: string): Promise<number[] | "unstable"> {
  const res = await c.request(9, 8, { groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes }] }], requireStable: true });
  const g = res.groups[0];
  if (g.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT) return "unstable";
  expect(g.errorCode).toBe(ErrorCode.NONE);
  const offsets: number[] = [];
  for (const p of g.topics[0].partitions) {
    if (p.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT) return "unstable";
    expect(p.errorCode).toBe(ErrorCode.NONE);
    offsets[p.partitionIndex] = Number(p.committedOffset);
  }
  return offsets;
}

/** DescribeTransactions once the coordinator answers (not COORDINATOR_LOAD_IN_PROGRESS): the first real answer. */
async function describeOnceLoaded(c: WireClient, transactionalId: string): Promise<any> {
  return await until(`the coordinator to answer about ${transactionalId}`, 30_000, async () => {
    const described = await describeTxn(c, transactionalId);
    return described.errorCode === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS ? undefined : described;
  });
}


type PartitionKeys = Record<string, [number, string][]>;

/** The topic through librdkafka's consumer (assign(), no group) with isolation.level=read_committed. */
async function readCommitted(bootstrap: string, topic: string): Promise<PartitionKeys> {
  const reader = new LineChild("librdkafka read_committed reader", [VENV_PYTHON, PY_SCRIPT, "read", bootstrap, topic, String(PARTITIONS), "read_committed"]);
  const code = await reader.exitWithin(CLIENT_EXIT_MS);
  if (code !== 0) throw new Error(`reader exited ${code}\n${reader.output()}`);
  return JSON.parse(reader.stdout.trim().split("\n").at(-1)!) as PartitionKeys;
}

// ---------------------------------------------------------------------------------------------
// What a decided transaction leaves

interface Decided {
  producerId: number;
  /** The epoch its markers carry (bunka's transaction version 1: the transaction's own epoch). */
  markerEpoch: number | undefined;
}

/**
 * The end state of a decided transaction, on a broker that has completed it: the decision's markers, one per
 * partition, after the partition's records; the LSO at the high watermark; read_committed sees every record
 * once (commit) or none (abort); the group's offsets committed (commit) or discarded (abort).
 */
async function expectCompleted(c: WireClient, bootstrap: string, s: Scenario, decided: Decided): Promise<void> {
  const marker = s.end === "commit" ? "COMMIT" : "ABORT";
  for (const p of partitionIndexes) {
    const { batches, highWatermark } = await readPartitionFully(c, s.topic, p);
    const log = batches.flatMap((b) => (b.header.isControl ? [isCommitMarker(b) ? "COMMIT" : isAbortMarker(b) ? "ABORT" : "CONTROL?"] : b.records.map((r) => utf8(r.key))));
    expect({ partition: p, log }).toEqual({ partition: p, log: [...keysOf(s, p), marker] });
    for (const b of batches) {
      expect(b.header.producerId).toBe(decided.producerId);
      if (b.header.isControl && decided.markerEpoch !== undefined) expect(b.header.producerEpoch).toBe(decided.markerEpoch);
    }
    expect(highWatermark).toBe(keysOf(s, p).length + 1);
    expect(await latestOffset(c, s.topic, true, p)).toBe(highWatermark);
  }
  const committed = await readCommitted(bootstrap, s.topic);
  for (const p of partitionIndexes) {
    const keys = committed[String(p)]!.map(([, key]) => key);
    expect({ partition: p, keys }).toEqual({ partition: p, keys: s.end === "commit" ? keysOf(s, p) : [] });
  }
  if (s.group !== undefined) {
    const expected = s.end === "commit" ? partitionIndexes.map((p) => OFFSET_BASE + p) : partitionIndexes.map(() => -1);
    expect(await groupOffsets(c, s.group, s.topic)).toEqual(expected);
  }
}

// ---------------------------------------------------------------------------------------------
// Against bunka: killed in the window, restarted

const fault = faultTestDir("bunka-endtxn-crash-", {
  setup: async () => {
    kafkaLibs = await ensureKafkaLibs();
    [javaClasses] = await Promise.all([compileTxnProducer(), ensureInteropClients()]);
  },
});

afterAll(async () => {
  await killLiveChildren();
});

/** Every batch in a partition's segment files (read after the broker died). */
function batchesOnDisk(dataDir: string, topic: string, partition: number): DecodedBatch[] {
  const dir = join(dataDir, `${topic}-${partition}`);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".log"))
    .sort()
    .flatMap((f) => decodeRecordSet(new Uint8Array(readFileSync(join(dir, f)))).batches);
}

/**
 * The id's durable coordinator entry, loaded from the slot files by the broker's own store (after the
 * kill: the store removes leftover temporary files as it opens, which must not race a running broker).
 */
async function durableEntry(dataDir: string, transactionalId: string) {
  const store = await TxnStateStore.open(nodeFs, dataDir, { slotOf });
  try {
    return await store.get(transactionalId);
  } finally {
    await store.close();
  }
}

async function crashAfterAnswer(s: Scenario): Promise<void> {
  const dataDir = join(fault.tmpRoot, `${s.client.name}-${s.end}`, "data");
  const options = { ...fault.startOptions(), dataDir };
  const held = await BunkaProcess.start({ ...options, env: HOLD_HOOK });
  const raw = await WireClient.connect(held.port);
  try {
    await createTopic(raw, s.topic);
    await runDecide(s, held.bootstrap);
    // Answered, and no marker yet: nothing visible, the offsets pending.
    for (const p of partitionIndexes) {
      expect(await latestOffset(raw, s.topic, false, p)).toBe(keysOf(s, p).length);
      expect(await latestOffset(raw, s.topic, true, p)).toBe(0);
    }
    if (s.group !== undefined) expect(await groupOffsets(raw, s.group, s.topic)).toBe("unstable");
  } finally {
    raw.close();
  }
  expect(await held.kill("SIGKILL")).toBe(137);

  // What the kill left: the decision, and no marker.
  const decided = await durableEntry(dataDir, s.transactionalId);
  expect(decided).toMatchObject({
    state: s.end === "commit" ? "PrepareCommit" : "PrepareAbort",
    partitions: [{ topic: s.topic, partitions: partitionIndexes }],
    groups: s.group === undefined ? [] : [s.group],
  });
  for (const p of partitionIndexes) {
    const onDisk = batchesOnDisk(dataDir, s.topic, p);
    expect(onDisk.filter((b) => b.header.isControl)).toEqual([]);
    expect(onDisk.flatMap((b) => b.records.map((r) => utf8(r.key)))).toEqual(keysOf(s, p));
  }

  const restarted = await BunkaProcess.start(options);
  const after = await WireClient.connect(restarted.port);
  try {
    // The first answer after the load: recovery has completed the decision before it.
    expect(await describeOnceLoaded(after, s.transactionalId)).toMatchObject({
      errorCode: ErrorCode.NONE,
      transactionState: s.end === "commit" ? "CompleteCommit" : "CompleteAbort",
      producerId: decided!.producerId,
      producerEpoch: decided!.epoch,
    });
    await expectCompleted(after, restarted.bootstrap, s, { producerId: decided!.producerId, markerEpoch: decided!.epoch });
  } finally {
    after.close();
  }
  expect(await restarted.kill("SIGTERM")).toBe(0);
}

describe.skipIf(!CAN_RUN_BINARY)("EndTxn answered, the broker SIGKILLed before the markers, restarted (compiled binary)", () => {
  for (const client of CLIENTS) {
    for (const end of ["commit", "abort"] as const) {
      test(`${client.name}: ${end}Transaction returned, then the kill: the restart completes the ${end} exactly once`, async () => {
        await withBrokerLog(fault.logFile, () => crashAfterAnswer(scenario(client, end, "bunka")));
      }, 120_000);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// The reference: the same helpers against Apache Kafka 4.1.1, without a kill

describe.skipIf(!WITH_APACHE)("the same transactions against Apache Kafka 4.1.1 (reference, no kill)", () => {
  let apache: ApacheKafka | undefined;
  let raw: WireClient;

  beforeAll(async () => {
    if (kafkaLibs === "") kafkaLibs = await ensureKafkaLibs();
    if (javaClasses === "") [javaClasses] = await Promise.all([compileTxnProducer(), ensureInteropClients()]);
    apache = await startApacheKafka({ features: { "transaction.version": 1 }, serverProperties: { "auto.create.topics.enable": false } });
    raw = await WireClient.connect(apache.port);
  }, 300_000);

  afterAll(async () => {
    raw?.close();
    await apache?.stop();
  });

  for (const client of CLIENTS) {
    for (const end of ["commit", "abort"] as const) {
      test(`${client.name}: ${end}Transaction, the same end state`, async () => {
        const s = scenario(client, end, "apache");
        await createTopic(raw, s.topic);
        await runDecide(s, apache!.bootstrap);
        // Apache completes after its answer too: wait for Complete*.
        const described = await until(`Complete* for ${s.transactionalId}`, 30_000, async () => {
          const d = await describeTxn(raw, s.transactionalId);
          return d.errorCode === ErrorCode.NONE && String(d.transactionState).startsWith("Complete") ? d : undefined;
        });
        expect(described.transactionState).toBe(end === "commit" ? "CompleteCommit" : "CompleteAbort");
        await expectCompleted(raw, apache!.bootstrap, s, { producerId: Number(described.producerId), markerEpoch: undefined });
      }, 120_000);
    }
  }
});
