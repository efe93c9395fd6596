/**
 * Transactions with Apache Kafka's Java client (4.1.1) against bunka. Small Java
 * programs (tests/interop/java/TxnProducer.java, ReadCommittedCheck.java, CreateTopic.java; compiled here with
 * javac against the Kafka jars into .cache/java-classes/transactions/) drive a KafkaProducer with a
 * transactional.id and a KafkaConsumer in read_committed / read_uncommitted:
 *
 *   1. commits, and a run aborting every other transaction: read_committed sees exactly the committed records,
 *      in order, none of the aborted ones; read_uncommitted sees both; one marker per transaction and partition;
 *   2. zombie fencing: B's initTransactions on A's transactional.id fences A while A's transaction is open; A's
 *      next send fails (InvalidProducerEpochException, as against Apache) and its abort is fatal
 *      (ProducerFencedException); A's records never reach read_committed, B's transactions commit;
 *   3. the timeout reaper: a producer with transaction.timeout.ms=2000 is SIGKILLed mid-transaction; within the
 *      timeout plus one 10 s sweep it is aborted (DescribeTransactions CompleteAbort, epoch bumped) and the LSO
 *      moves past it, so read_committed sees what was committed after it;
 *   4. kafka-transactions.sh list / describe / describe-producers / find-hanging / abort --start-offset (the
 *      admin client's WriteTxnMarkers) on a producer killed mid-transaction, run against bunka and against
 *      Apache Kafka on the same scenario: same tables (headers, states, offsets, partitions) and the same
 *      effect (the LSO advances); also transaction.timeout.ms bounds (1 ms accepted, 0 refused) as Apache;
 *   5. the compiled binary SIGKILLed between Prepare* and Complete* (BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=prepare makes it
 *      kill itself right after the EndTxn decision is durable, before any marker): on disk the decision is
 *      PrepareCommit / PrepareAbort and no marker exists; the restart completes it, the Java producer's
 *      commitTransaction / abortTransaction returns normally across the crash, the records are visible to
 *      read_committed exactly once (one marker each), and nothing was visible before; the group offsets
 *      each transaction carried (sendOffsetsToTransaction) are committed with the commit and discarded with
 *      the abort, and are unstable (require_stable) until then.
 *
 *   bun test --timeout 600000 tests/interop/transactions-java.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import {
  type ApacheKafka,
  LOG4J_CONFIG,
  REPO_ROOT,
  ensureKafkaLibs,
  javaBin,
  runKafkaTool,
  startApacheKafka,
  type ToolResult,
} from "../support/apache-kafka.ts";
import { BunkaProcess, CAN_RUN_BINARY, cleanEnv, withBrokerLog } from "../support/binary.ts";
import { faultTestDir } from "../support/fault-support.ts";
import { decodeRecordSet, readPartitionFully, utf8, type DecodedBatch } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { describeSettledTxn, describeTxn, isAbortMarker, isCommitMarker, latestOffset, markerKinds } from "../support/txn-requests.ts";
import { WireClient } from "../support/wire-client.ts";
import { until } from "../support/wait.ts";

const TIMEOUT = 120_000;
const JAVA_SOURCES = join(import.meta.dir, "java");
const CLASSES = join(REPO_ROOT, ".cache", "java-classes", "transactions");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
/** transaction.abort.timed.out.transaction.cleanup.interval.ms: the reaper's sweep interval. */
const REAPER_INTERVAL_MS = 10_000;

let libs = "";
let broker: TestBroker;
let client: WireClient;
/** Started in beforeAll without waiting (it takes ~10 s); the tests comparing with it await it. */
let apache: Promise<ApacheKafka> | undefined;

// ---------------------------------------------------------------------------------------------
// Java processes

/** A Java main of this file's programs, as a child process. */
class JavaChild extends LineChild {
  constructor(main: string, args: string[]) {
    super(`java ${main}`, [javaBin(), ...JVM_FLAGS, "-cp", `${CLASSES}:${libs}/*`, main, ...args]);
  }
}

/** Runs a Java main to its end (SIGKILLed after `timeoutMs`, then code 124). */
async function runJava(main: string, args: string[], timeoutMs = 60_000): Promise<ToolResult> {
  const child = new JavaChild(main, args);
  const code = await child.exitCodeWithin(timeoutMs);
  return { code: code ?? 124, stdout: child.stdout, stderr: child.stderr };
}

function ok(r: ToolResult, what = "process"): ToolResult {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n--- stdout ---\n${r.stdout}--- stderr ---\n${r.stderr.slice(-4000)}`);
  return r;
}

/** This file's programs (other tests keep their own Java programs in the same directory). */
const JAVA_PROGRAMS = ["TxnProducer", "ReadCommittedCheck", "CreateTopic"];

/** javac of JAVA_PROGRAMS into CLASSES, unless every class is newer than its source. */
async function compileJava(): Promise<void> {
  const sources = JAVA_PROGRAMS.map((main) => `${main}.java`);
  const fresh = sources.every((f) => {
    const cls = join(CLASSES, f.replace(/\.java$/, ".class"));
    return existsSync(cls) && statSync(cls).mtimeMs >= statSync(join(JAVA_SOURCES, f)).mtimeMs;
  });
  if (fresh) return;
  mkdirSync(CLASSES, { recursive: true });
  const javac = process.env.JAVA_HOME && existsSync(join(process.env.JAVA_HOME, "bin/javac")) ? join(process.env.JAVA_HOME, "bin/javac") : "javac";
  const proc = Bun.spawn([javac, "-d", CLASSES, "-cp", `${libs}/*`, ...sources.map((f) => join(JAVA_SOURCES, f))], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac failed (${code}):\n${out}${err}`);
}

interface ConsumedRecord {
  partition: number;
  offset: number;
  key: string;
}
interface Consumed {
  /** endOffsets per partition: the LSO under read_committed, the high watermark under read_uncommitted. */
  ends: number[];
  records: ConsumedRecord[];
}

/** The whole topic through the Java consumer (tests/interop/java/ReadCommittedCheck.java). */
async function consume(bootstrap: string, topic: string, isolation: "read_committed" | "read_uncommitted", minRecords = 0): Promise<Consumed> {
  const r = ok(await runJava("ReadCommittedCheck", [bootstrap, topic, isolation, "30000", String(minRecords)]), `ReadCommittedCheck ${isolation}`);
  const ends: number[] = [];
  const records: ConsumedRecord[] = [];
  for (const line of r.stdout.split("\n")) {
    const f = line.split(" ");
    if (f[0] === "END") ends[Number(f[1])] = Number(f[2]);
    if (f[0] === "R") {
      expect(f[4]).toBe(f[3]!); // value = key
      records.push({ partition: Number(f[1]), offset: Number(f[2]), key: f[3]! });
    }
  }
  expect(r.stdout).toContain(`DONE ${records.length}`);
  return { ends, records };
}

const keysOf = (c: Consumed, partition: number) => c.records.filter((r) => r.partition === partition).map((r) => r.key);

/** Records of one partition arrive in strictly increasing offsets (the consumer's order is the log's). */
function expectOrdered(c: Consumed): void {
  for (const p of new Set(c.records.map((r) => r.partition))) {
    const offsets = c.records.filter((r) => r.partition === p).map((r) => r.offset);
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    expect(new Set(offsets).size).toBe(offsets.length);
  }
}

/** Keys TxnProducer writes: "<prefix>-<txn>-<i>", record i to partition i % partitions. */
function keys(prefix: string, txns: number[], perTxn: number, partitions: number, partition: number): string[] {
  return txns.flatMap((t) => Array.from({ length: perTxn }, (_, i) => i).filter((i) => i % partitions === partition).map((i) => `${prefix}-${t}-${i}`));
}

// ---------------------------------------------------------------------------------------------
// Raw requests

async function createTopic(c: WireClient, name: string, partitions: number): Promise<void> {
  const res = await c.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: false });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
}

/** The group's committed offset of topic-partition 0 asked with require_stable (OffsetFetch v8): a number, or "unstable". */
async function stableOffset(c: WireClient, group: string, topic: string): Promise<number | "unstable"> {
  const res = await c.request(9, 8, { groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: [0] }] }], requireStable: true });
  const g = res.groups[0];
  const p = g.topics[0].partitions[0];
  if (g.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT || p.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT) return "unstable";
  expect([g.errorCode, p.errorCode]).toEqual([ErrorCode.NONE, ErrorCode.NONE]);
  return Number(p.committedOffset);
}



// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  libs = await ensureKafkaLibs();
  apache = startApacheKafka();
  apache.catch(() => undefined); // awaited (and its error reported) by the tests that use it
  await compileJava();
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
}, 300_000);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await broker?.stop();
  await (await apache?.catch(() => undefined))?.stop();
});

describe("the Java transactional producer and consumer against bunka", () => {
  test("commits and aborts: read_committed sees exactly the committed records in order, read_uncommitted the aborted too", async () => {
    const topic = "jtx-mixed";
    await createTopic(client, topic, 2);
    // Run 1 commits 3 transactions of 4 records over 2 partitions; run 2 (same transactional.id, so a
    // rejoin at epoch + 1) aborts every other one of 4.
    const run1 = ok(await runJava("TxnProducer", ["batches", broker.bootstrap, topic, "jtx-mixed-id", "c", "2", "3", "4", "0"]), "TxnProducer run 1");
    expect(run1.stdout).toBe("READY\nCOMMITTED 0\nCOMMITTED 1\nCOMMITTED 2\nDONE\n");
    const run2 = ok(await runJava("TxnProducer", ["batches", broker.bootstrap, topic, "jtx-mixed-id", "m", "2", "4", "4", "2"]), "TxnProducer run 2");
    expect(run2.stdout).toBe("READY\nCOMMITTED 0\nABORTED 1\nCOMMITTED 2\nABORTED 3\nDONE\n");

    const [committed, uncommitted] = await Promise.all([consume(broker.bootstrap, topic, "read_committed"), consume(broker.bootstrap, topic, "read_uncommitted")]);
    for (const p of [0, 1]) {
      expect(keysOf(committed, p)).toEqual([...keys("c", [0, 1, 2], 4, 2, p), ...keys("m", [0, 2], 4, 2, p)]);
      expect(keysOf(uncommitted, p)).toEqual([...keys("c", [0, 1, 2], 4, 2, p), ...keys("m", [0, 1, 2, 3], 4, 2, p)]);
    }
    expectOrdered(committed);
    expectOrdered(uncommitted);
    // Nothing open: the LSO is the high watermark (2 data records + 1 marker per transaction and partition).
    expect(committed.ends).toEqual([21, 21]);
    expect(uncommitted.ends).toEqual([21, 21]);

    // One marker per transaction and partition, in the producer's order, from the producer's id and epoch.
    for (const p of [0, 1]) {
      const { batches } = await readPartitionFully(client, topic, p);
      expect(markerKinds(batches)).toEqual(["C", "C", "C", "C", "A", "C", "A"]);
      const data = batches.filter((b) => !b.header.isControl);
      expect(data.every((b) => b.header.isTransactional)).toBe(true);
      expect(new Set(data.map((b) => `${b.header.producerId}/${b.header.producerEpoch}`))).toEqual(
        new Set(batches.filter((b) => b.header.isControl).map((b) => `${b.header.producerId}/${b.header.producerEpoch}`)),
      );
    }
  }, TIMEOUT);

  test("zombie fencing: a second producer with the same transactional.id fences the first mid-transaction", async () => {
    const topic = "jtx-zombie";
    const id = "jtx-zombie-id";
    await createTopic(client, topic, 1);
    const a = new JavaChild("TxnProducer", ["zombie", broker.bootstrap, topic, id, "zA", "3"]);
    await a.waitFor(/^OPEN$/m, 30_000);
    const before = await describeTxn(client, id);
    expect(before).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "Ongoing", producerEpoch: 0, topics: [{ topic, partitions: [0] }] });
    expect(await latestOffset(client, topic, true)).toBe(0); // A's open transaction pins the LSO
    expect(await latestOffset(client, topic, false)).toBe(3);

    // B: initTransactions fences A (A's transaction is aborted), then two transactions commit normally.
    const b = ok(await runJava("TxnProducer", ["batches", broker.bootstrap, topic, id, "zB", "1", "2", "2", "0"]), "producer B");
    expect(b.stdout).toBe("READY\nCOMMITTED 0\nCOMMITTED 1\nDONE\n");

    a.line("go");
    expect(await a.exited).toBe(0);
    // Against Apache Kafka 4.1.1 the same program prints the same classes: the send is refused with the
    // abortable InvalidProducerEpochException (Produce answers INVALID_PRODUCER_EPOCH), then the abort's
    // EndTxn gets PRODUCER_FENCED, which the client raises as the fatal ProducerFencedException.
    const out = a.stdout;
    const printed = (re: RegExp) => {
      if (!re.test(out)) throw new Error(`producer A did not print ${re}\n${a.output()}`);
    };
    printed(/^EXCEPTION send \S+ org\.apache\.kafka\.common\.errors\.(InvalidProducerEpochException|ProducerFencedException)\b/m);
    printed(/^EXCEPTION (commit|abort) org\.apache\.kafka\.common\.errors\.ProducerFencedException\b/m);
    expect(out).not.toMatch(/^(SENT|COMMITTED|ABORTED) /m);

    const after = await describeSettledTxn(client, id);
    expect(after).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "CompleteCommit", producerId: before.producerId });
    expect(after.producerEpoch).toBeGreaterThan(before.producerEpoch);

    const [committed, uncommitted] = await Promise.all([consume(broker.bootstrap, topic, "read_committed"), consume(broker.bootstrap, topic, "read_uncommitted")]);
    expect(keysOf(committed, 0)).toEqual(["zB-0-0", "zB-0-1", "zB-1-0", "zB-1-1"]);
    expect(keysOf(uncommitted, 0)).toEqual(["zA-0-0", "zA-0-1", "zA-0-2", "zB-0-0", "zB-0-1", "zB-1-0", "zB-1-1"]);
    expect(committed.ends).toEqual(uncommitted.ends);
    // A's transaction ended with one ABORT marker (at the fencing epoch), B's with one COMMIT each.
    const { batches } = await readPartitionFully(client, topic, 0);
    expect(markerKinds(batches)).toEqual(["A", "C", "C"]);
    expect(batches.find(isAbortMarker)!.header.producerEpoch).toBeGreaterThan(before.producerEpoch);
  }, TIMEOUT);

  test("the reaper aborts a transaction whose producer died (transaction.timeout.ms=2000); the LSO moves past it", async () => {
    const topic = "jtx-reaper";
    const id = "jtx-reaper-id";
    const timeoutMs = 2000;
    await createTopic(client, topic, 1);
    const hung = new JavaChild("TxnProducer", ["hang", broker.bootstrap, topic, id, "hA", "3", `transaction.timeout.ms=${timeoutMs}`]);
    await hung.waitFor(/^OPEN$/m, 30_000);
    const openedAt = Date.now();
    const lsoWhileOpen = await latestOffset(client, topic, true);
    const open = await describeTxn(client, id);
    expect(open).toMatchObject({ errorCode: ErrorCode.NONE, transactionTimeoutMs: timeoutMs, producerEpoch: 0 });
    // Read after the LSO: if still Ongoing now, it was then, and then the LSO was pinned at its first offset.
    if (open.transactionState === "Ongoing") expect(lsoWhileOpen).toBe(0);
    await hung.kill();

    // Committed after the dead transaction: hidden from read_committed until the reaper aborts it.
    const later = ok(await runJava("TxnProducer", ["batches", broker.bootstrap, topic, "jtx-reaper-later", "after", "1", "1", "2", "0"]), "later producer");
    expect(later.stdout).toContain("COMMITTED 0");

    const aborted = await until("the reaper's CompleteAbort", timeoutMs + REAPER_INTERVAL_MS + 8_000, async () => {
      const d = await describeTxn(client, id);
      return d.transactionState === "CompleteAbort" ? d : undefined;
    });
    const tookMs = Date.now() - openedAt;
    expect(tookMs).toBeLessThan(timeoutMs + REAPER_INTERVAL_MS + 8_000);
    expect(aborted.producerEpoch).toBe(1); // fenced: the reaper bumps the epoch
    const ongoing = await client.request(66, 0, { stateFilters: ["Ongoing"], producerIdFilters: [] });
    expect(ongoing.transactionStates.map((s: any) => s.transactionalId)).not.toContain(id);

    expect(await latestOffset(client, topic, true)).toBe(await latestOffset(client, topic, false));
    const committed = await consume(broker.bootstrap, topic, "read_committed", 2);
    expect(keysOf(committed, 0)).toEqual(["after-0-0", "after-0-1"]);
    const { batches } = await readPartitionFully(client, topic, 0);
    // hA (3 records), after (2), the later COMMIT and the reaper's ABORT (in either order).
    expect(markerKinds(batches).sort()).toEqual(["A", "C"]);
    const abortMarker = batches.find(isAbortMarker)!;
    expect(abortMarker.header.producerId).toBe(open.producerId);
    expect(abortMarker.header.producerEpoch).toBe(1);
  }, TIMEOUT);
});

// ---------------------------------------------------------------------------------------------
// kafka-transactions.sh, against bunka and against Apache Kafka

interface Table {
  header: string[];
  rows: string[][];
}

/** A kafka-transactions table: tab-separated, padded cells, a trailing tab on every line. */
function table(r: ToolResult): Table {
  const lines = r.stdout.split("\n").filter((l) => l.trim() !== "");
  const [header, ...rows] = lines.map((l) => l.replace(/\t$/, "").split("\t").map((c) => c.trim()));
  if (header === undefined) throw new Error(`no table in\n${r.stdout}\n${r.stderr}`);
  for (const row of rows) expect(row).toHaveLength(header.length);
  return { header, rows };
}

/** The table with the cells that differ between brokers by nature (ids, epochs, times) replaced by <n>. */
function shape(t: Table, volatile: string[]): Table {
  const idx = volatile.map((c) => t.header.indexOf(c));
  for (const i of idx) expect(i).toBeGreaterThanOrEqual(0);
  return {
    header: t.header,
    rows: t.rows
      .map((row) =>
        row.map((cell, i) => {
          if (!idx.includes(i)) return cell;
          expect(cell).toMatch(/^-?\d+$/);
          return "<n>";
        }),
      )
      .sort((a, b) => (a.join("\t") < b.join("\t") ? -1 : a.join("\t") > b.join("\t") ? 1 : 0)),
  };
}

interface ToolScenario {
  list: Table;
  describeOpen: Table;
  describeDone: Table;
  producersBefore: Table;
  findHanging: Table;
  abort: ToolResult;
  producersAfter: Table;
  lsoBefore: number;
  lsoAfter: number;
  highWatermark: number;
  committedKeys: string[];
  timeoutAnswers: number[];
}

/**
 * The same steps on either broker: a committed transaction (jtx-tool-done, 2 records + marker, offsets 0-2),
 * then a producer (jtx-tool-open) that begins one (offsets 3-4) and is SIGKILLed; the tool lists and
 * describes them, then aborts the dead one by its start offset.
 */
async function toolScenario(bootstrap: string): Promise<ToolScenario> {
  const [host, port] = [bootstrap.split(":")[0]!, Number(bootstrap.split(":")[1])];
  const raw = await WireClient.connect(port, host);
  try {
    const topic = "jtx-tool";
    ok(await runJava("CreateTopic", [bootstrap, `${topic}:1`]), "CreateTopic");
    ok(await runJava("TxnProducer", ["batches", bootstrap, topic, "jtx-tool-done", "d", "1", "1", "2", "0"]), "committing producer");
    const open = new JavaChild("TxnProducer", ["hang", bootstrap, topic, "jtx-tool-open", "o", "2", "transaction.timeout.ms=900000"]);
    await open.waitFor(/^OPEN$/m, 30_000);
    await open.kill();
    const tx = (...args: string[]) => runKafkaTool("kafka-transactions", ["--bootstrap-server", bootstrap, ...args]).then((r) => ok(r, `kafka-transactions ${args[0]}`));
    const [list, describeOpen, describeDone, producersBefore, findHanging] = await Promise.all([
      tx("list"),
      tx("describe", "--transactional-id", "jtx-tool-open"),
      tx("describe", "--transactional-id", "jtx-tool-done"),
      tx("describe-producers", "--topic", topic, "--partition", "0"),
      tx("find-hanging", "--broker-id", bootstrap === broker.bootstrap ? "0" : "1", "--max-transaction-timeout", "0"),
    ]);
    const lsoBefore = await latestOffset(raw, topic, true);
    const abort = await tx("abort", "--topic", topic, "--partition", "0", "--start-offset", "3");
    const producersAfter = await tx("describe-producers", "--topic", topic, "--partition", "0");
    const lsoAfter = await latestOffset(raw, topic, true);
    const highWatermark = await latestOffset(raw, topic, false);
    const committedKeys = keysOf(await consume(bootstrap, topic, "read_committed"), 0);

    // transaction.timeout.ms bounds: InitProducerId accepts 1 ms up to transaction.max.timeout.ms (15 min).
    const timeoutAnswers: number[] = [];
    for (const [i, timeoutMs] of [0, 1, 900_000, 900_001, -1].entries()) {
      const answer = await until("an InitProducerId answer that is not a coordinator error", 30_000, async () => {
        const res = await raw.request(22, 4, { transactionalId: `jtx-timeout-${i}`, transactionTimeoutMs: timeoutMs, producerId: -1, producerEpoch: -1 });
        const retriable: number[] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS];
        return retriable.includes(res.errorCode) ? undefined : (res.errorCode as number);
      });
      timeoutAnswers.push(answer);
    }
    return {
      list: table(list),
      describeOpen: table(describeOpen),
      describeDone: table(describeDone),
      producersBefore: table(producersBefore),
      findHanging: table(findHanging),
      abort,
      producersAfter: table(producersAfter),
      lsoBefore,
      lsoAfter,
      highWatermark,
      committedKeys,
      timeoutAnswers,
    };
  } finally {
    raw.close();
  }
}

describe("kafka-transactions.sh against bunka, compared with Apache Kafka", () => {
  test("list, describe, describe-producers, find-hanging and abort --start-offset: same tables and effect as Apache", async () => {
    const reference = await apache!;
    const [ours, theirs] = await Promise.all([toolScenario(broker.bootstrap), toolScenario(reference.bootstrap)]);

    for (const s of [ours, theirs]) {
      // Before the abort the dead transaction pins the LSO at its first offset; after, the LSO is the end.
      expect(s.lsoBefore).toBe(3);
      expect(s.highWatermark).toBe(6);
      expect(s.lsoAfter).toBe(6);
      expect(s.committedKeys).toEqual(["d-0-0", "d-0-1"]);
      expect(s.timeoutAnswers).toEqual([ErrorCode.INVALID_TRANSACTION_TIMEOUT, ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_TRANSACTION_TIMEOUT, ErrorCode.INVALID_TRANSACTION_TIMEOUT]);
    }

    // list: the same header; our two ids with the same states.
    const listShape = (s: ToolScenario) => {
      const t = shape(s.list, ["Coordinator", "ProducerId"]);
      return { header: t.header, rows: t.rows.filter((r) => r[0]!.startsWith("jtx-tool-")) };
    };
    expect(listShape(ours)).toEqual(listShape(theirs));
    expect(listShape(ours)).toEqual({
      header: ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
      rows: [
        ["jtx-tool-done", "<n>", "<n>", "CompleteCommit"],
        ["jtx-tool-open", "<n>", "<n>", "Ongoing"],
      ],
    });
    expect(ours.list.rows.filter((r) => r[0]!.startsWith("jtx-tool-")).map((r) => r[1])).toEqual(["0", "0"]); // our broker id

    // describe: every column the same except ids, epochs and times.
    const describeVolatile = ["CoordinatorId", "ProducerId", "ProducerEpoch", "CurrentTransactionStartTimeMs", "TransactionDurationMs"];
    expect(shape(ours.describeOpen, describeVolatile)).toEqual(shape(theirs.describeOpen, describeVolatile));
    expect(shape(ours.describeDone, describeVolatile)).toEqual(shape(theirs.describeDone, describeVolatile));
    expect(shape(ours.describeOpen, describeVolatile)).toEqual({
      header: [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
      ],
      rows: [["<n>", "jtx-tool-open", "<n>", "<n>", "Ongoing", "900000", "<n>", "<n>", "jtx-tool-0"]],
    });
    expect(shape(ours.describeDone, describeVolatile).rows).toEqual([["<n>", "jtx-tool-done", "<n>", "<n>", "CompleteCommit", "60000", "<n>", "<n>", ""]]);

    // describe-producers: the open transaction's start offset (and coordinator epoch -1: no marker yet),
    // then None once aborted. (The committed producer's epoch and last sequence differ: Apache 4.1 runs
    // transaction version 2, which bumps the epoch at every EndTxn.)
    const producersVolatile = ["ProducerId", "ProducerEpoch", "LastSequence", "LastTimestamp"];
    expect(shape(ours.producersBefore, producersVolatile)).toEqual(shape(theirs.producersBefore, producersVolatile));
    expect(shape(ours.producersAfter, producersVolatile)).toEqual(shape(theirs.producersAfter, producersVolatile));
    expect(shape(ours.producersBefore, producersVolatile).rows).toEqual([
      ["<n>", "<n>", "-1", "<n>", "<n>", "3"],
      ["<n>", "<n>", "0", "<n>", "<n>", "None"],
    ]);
    expect(shape(ours.producersAfter, producersVolatile).rows.map((r) => r.at(-1))).toEqual(["None", "None"]);

    // find-hanging: nothing hangs (the coordinator knows the open transaction), same header.
    expect(ours.findHanging).toEqual(theirs.findHanging);
    expect(ours.findHanging.rows).toEqual([]);

    expect(ours.abort.stdout).toBe(theirs.abort.stdout);
  }, 240_000);
});

// ---------------------------------------------------------------------------------------------
// The compiled broker SIGKILLed between Prepare* and Complete*

const fault = faultTestDir("bunka-txn-crash-");
const hooked = new Set<Bun.Subprocess>();
const LISTENING_LINE = /^bunka \S+ listening kafka=(\S+):(\d+) /m;

afterAll(async () => {
  for (const p of hooked) p.kill("SIGKILL");
  await Promise.all([...hooked].map((p) => p.exited));
});

/** The binary with BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=prepare (binary.ts clears BUNKA_* variables, hence this spawn). */
async function startWithCrashHook(port: number): Promise<{ proc: Bun.Subprocess<"ignore", "pipe", number>; port: number }> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const logFd = openSync(fault.logFile, "a");
    const proc = Bun.spawn([fault.binary, "serve", "--listen", `127.0.0.1:${port}`, "--http", "127.0.0.1:0", "--data-dir", fault.dataDir], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: logFd,
      env: cleanEnv({ BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP: "prepare" }),
    });
    closeSync(logFd);
    hooked.add(proc);
    void proc.exited.then(() => hooked.delete(proc));
    let text = "";
    const decoder = new TextDecoder();
    const reader = proc.stdout.getReader();
    let match: RegExpMatchArray | null = null;
    while (!match) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      match = text.match(LISTENING_LINE);
    }
    reader.releaseLock();
    if (match) {
      void proc.stdout.pipeTo(new WritableStream()).catch(() => undefined); // keep draining
      return { proc, port: Number(match[2]) };
    }
    await proc.exited;
    // A port of a just-killed process may be unavailable for a moment: retry until the deadline.
    if (port === 0 || Date.now() > deadline) throw new Error(`bunka (crash hook) did not start:\n${readFileSync(fault.logFile, "utf8").slice(-3000)}`);
    await Bun.sleep(50);
  }
}

/** Every batch in the partition's segment files (read after the broker died). */
function batchesOnDisk(topic: string, partition: number): DecodedBatch[] {
  const dir = join(fault.dataDir, `${topic}-${partition}`);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".log"))
    .sort()
    .flatMap((f) => decodeRecordSet(new Uint8Array(readFileSync(join(dir, f)))).batches);
}

/** The last state the coordinator's slot journals hold for a transactional id (read after the broker died). */
function durableTxnState(transactionalId: string): string | undefined {
  const dir = join(fault.dataDir, "__cluster", "txn_state");
  let state: string | undefined;
  for (const file of readdirSync(dir).sort()) {
    for (const line of readFileSync(join(dir, file), "utf8").split("\n")) {
      if (!line.includes(JSON.stringify(transactionalId))) continue;
      const put = (JSON.parse(line).body?.put ?? []) as { transactionalId: string; state: string }[];
      for (const entry of put) if (entry.transactionalId === transactionalId) state = entry.state;
    }
  }
  return state;
}

describe.skipIf(!CAN_RUN_BINARY)("the broker SIGKILLed between Prepare* and Complete* (compiled binary)", () => {
  test("the restart completes the decision: visible exactly once after it, never before; the client's EndTxn succeeds", async () => {
    await withBrokerLog(fault.logFile, async () => {
      const topic = "jtx-crash";
      const first = await startWithCrashHook(0);
      const port = first.port;
      const bootstrap = `127.0.0.1:${port}`;
      let raw = await WireClient.connect(port);
      await createTopic(raw, topic, 1);

      // --- commit: the broker dies once PrepareCommit is durable, before the marker. The transaction also
      // carries the offset 40 of a consumer group (sendOffsetsToTransaction), staged until the decision.
      const group = "jtx-crash-group";
      const committer = new JavaChild("TxnProducer", ["once", bootstrap, topic, "jtx-crash-commit", "c", "4", "commit", group, "40"]);
      await committer.waitFor(/^OPEN$/m, 30_000);
      expect(await latestOffset(raw, topic, false)).toBe(4);
      expect(await latestOffset(raw, topic, true)).toBe(0);
      expect(await stableOffset(raw, group, topic)).toBe("unstable");
      expect(keysOf(await consume(bootstrap, topic, "read_committed"), 0)).toEqual([]);
      raw.close();
      committer.line("go");
      expect(await first.proc.exited).toBe(137); // SIGKILL, by the hook
      expect(first.proc.signalCode).toBe("SIGKILL");
      expect(durableTxnState("jtx-crash-commit")).toBe("PrepareCommit");
      let onDisk = batchesOnDisk(topic, 0);
      expect(onDisk.filter((b) => b.header.isControl)).toEqual([]); // no marker: nothing exposed
      expect(onDisk.flatMap((b) => b.records.map((r) => utf8(r.key)))).toEqual(["c-0-0", "c-0-1", "c-0-2", "c-0-3"]);

      // Restart (the hook still armed for the next EndTxn): start-up recovery writes the marker and
      // CompleteCommit; the producer's retried EndTxn is answered NONE.
      const second = await startWithCrashHook(port);
      await committer.waitFor(/^COMMITTED 0 /m, 60_000);
      expect(await committer.exited).toBe(0);
      raw = await WireClient.connect(port);
      expect(await describeTxn(raw, "jtx-crash-commit")).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "CompleteCommit" });
      expect(await latestOffset(raw, topic, true)).toBe(5);
      // The recovered commit committed the group's offset with the data.
      expect(await stableOffset(raw, group, topic)).toBe(40);

      // --- abort: the broker dies once PrepareAbort is durable; the group's offset 80 goes with it.
      const aborter = new JavaChild("TxnProducer", ["once", bootstrap, topic, "jtx-crash-abort", "a", "3", "abort", group, "80"]);
      await aborter.waitFor(/^OPEN$/m, 30_000);
      expect(await latestOffset(raw, topic, false)).toBe(8);
      expect(await latestOffset(raw, topic, true)).toBe(5);
      expect(await stableOffset(raw, group, topic)).toBe("unstable");
      raw.close();
      aborter.line("go");
      expect(await second.proc.exited).toBe(137);
      expect(durableTxnState("jtx-crash-abort")).toBe("PrepareAbort");
      onDisk = batchesOnDisk(topic, 0);
      expect(markerKinds(onDisk)).toEqual(["C"]);

      // Restart without the hook.
      const third = await BunkaProcess.start(fault.startOptions(port));
      await aborter.waitFor(/^ABORTED 0 /m, 60_000);
      expect(await aborter.exited).toBe(0);
      raw = await WireClient.connect(third.port);
      try {
        expect(await describeTxn(raw, "jtx-crash-commit")).toMatchObject({ transactionState: "CompleteCommit" });
        expect(await describeTxn(raw, "jtx-crash-abort")).toMatchObject({ transactionState: "CompleteAbort" });
        expect(await latestOffset(raw, topic, true)).toBe(9);
        expect(await latestOffset(raw, topic, false)).toBe(9);
        // The recovered abort discarded the staged 80: the committed offset is still the first transaction's.
        expect(await stableOffset(raw, group, topic)).toBe(40);
        // Exactly one marker per transaction: recovery and the client's retry did not write two.
        const { batches } = await readPartitionFully(raw, topic, 0);
        expect(batches.flatMap((b) => (b.header.isControl ? [isCommitMarker(b) ? "COMMIT" : "ABORT"] : b.records.map((r) => utf8(r.key))))).toEqual([
          ...["c-0-0", "c-0-1", "c-0-2", "c-0-3", "COMMIT"],
          ...["a-0-0", "a-0-1", "a-0-2", "ABORT"],
        ]);
      } finally {
        raw.close();
      }
      const [committed, uncommitted] = await Promise.all([consume(bootstrap, topic, "read_committed"), consume(bootstrap, topic, "read_uncommitted")]);
      expect(keysOf(committed, 0)).toEqual(["c-0-0", "c-0-1", "c-0-2", "c-0-3"]);
      expect(keysOf(uncommitted, 0)).toEqual(["c-0-0", "c-0-1", "c-0-2", "c-0-3", "a-0-0", "a-0-1", "a-0-2"]);
      await third.kill("SIGTERM");
    });
  }, 240_000);
});
