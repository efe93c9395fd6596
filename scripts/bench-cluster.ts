#!/usr/bin/env bun
/**
 * Three brokers: a three-broker bunka cluster (compiled binary, one shared data directory, one etcd) against
 * a three-node Apache Kafka KRaft cluster (3 combined broker+controller nodes, a 3-voter static controller
 * quorum), and beside them a single bunka broker (`bunka serve`, the embedded default: no etcd) and a
 * single-node Apache Kafka, all four on loopback on this machine, all up at once and warmed up, measured in
 * interleaved rounds (the order reversed from round to round) with the same Java load tools. Not a test; see
 * docs/benchmarks.md ("Three brokers").
 *
 *   bun scripts/bench-cluster.ts [--rounds N] [--quick] [--records N] [--txn-warmup S] [--txn-duration S]
 *                                [--broker-warmup S] [--data-root DIR] [--only kafka|bunka] [--no-single]
 *                                [--bunka-binary PATH]
 *
 * Rows, each with 16-partition topics whose partitions the systems spread over their three brokers
 * (replication factor 1: bunka's shared volume is its one copy of every byte, so Kafka keeps one too; its
 * internal topics as well):
 *   produce  kafka-producer-perf-test, acks=all, 1 KiB records, --records per row, a fresh topic per row
 *            and round, bootstrap = all three brokers: MB/s and latency p50/p99
 *   txn 1    scripts/bench-java/TxnBench.java: 1 transactional producer (10 x 1 KiB per transaction) and a
 *            read_committed consumer that checks it reads every committed record once: txn/s, EndTxn p50/p99
 *   txn 16   the same with 16 transactional producers
 * and, for every row, the sum over the broker processes of each one's peak RSS in the row (Apache Kafka's
 * nodes include their controllers; bunka's etcd is reported apart).
 *
 * Durability, stated in the report: bunka answers Produce acks=-1 (and every transaction step) after an
 * fsync; Apache Kafka at its default settings fsyncs nothing before an answer (log.flush.interval.messages
 * is unset: the page cache holds the acknowledged record).
 *
 * Progress goes to stderr; the table (text, then markdown) to stdout. Brokers, etcd, tools and temp dirs are
 * removed at the end, on an error and on Ctrl-C.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { type ApacheKafkaCluster, KAFKA_VERSION, runKafkaTool, startApacheKafkaCluster, TOOL_MAIN_CLASSES } from "../tests/support/apache-kafka.ts";
import { BunkaCluster } from "../tests/support/bunka-cluster.ts";
import {
  type Broker,
  BUSY_PCT,
  compileJavaTool,
  createTopicWithTool,
  ensureBunkaBinary,
  environment,
  fmtNum,
  installSignalHandlers,
  isInterrupted,
  loadAverages,
  log,
  markdownTable,
  median,
  medianSpread,
  onCleanup,
  processTicks,
  ratio,
  roundOrder,
  runCleanups,
  runJavaTool,
  startBunkaBroker,
  startKafkaBroker,
  tempDir,
  textTable,
  watchCpu,
  watchPeakRss,
} from "./bench-support.ts";

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  rounds: number;
  records: number;
  txnWarmupS: number;
  txnDurationS: number;
  brokerWarmupS: number;
  dataRoot: string;
  quick: boolean;
  /** Run one product only, cluster and single broker (a development aid: no ratios then). */
  only?: Product;
  /** Measure the three-broker clusters only, without the single brokers beside them. */
  noSingle: boolean;
  /** The bunka executable (default: a private copy of dist/'s, rebuilt when older than src/). */
  bunkaBinary?: string;
}

const BROKERS = 3;
const PARTITIONS = 16;
const RECORD_SIZE = 1024;
const RECORDS_PER_TXN = 10;
const TXN_TOPIC = "bench-cluster-txn";
const DRAIN_TIMEOUT_S = 15;
/** Kafka's own broker.session.timeout.ms default: bunka's lease TTL at the same value. */
const SESSION_TIMEOUT_MS = 9000;
/** The JVM flags tests/support/apache-kafka.ts gives Apache's perf tools (full JIT, 1 GiB heap). */
const LOAD_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];

const USAGE = `usage: bun scripts/bench-cluster.ts [--rounds N] [--quick] [--records N] [--txn-warmup S]
       [--txn-duration S] [--broker-warmup S] [--data-root DIR] [--only kafka|bunka] [--no-single]
       [--bunka-binary PATH]

  --rounds N          interleaved rounds, each running every row on both clusters, the order reversed from
                      round to round (default 3; --quick: 1)
  --quick             a development run: 1 round, 100,000 records, 3 + 5 s transaction rows, 10 s warm-up
  --records N         records per produce row (default 200000)
  --txn-warmup S      seconds of transactions before each transaction row's measurement (default 5)
  --txn-duration S    seconds measured per transaction row (default 10)
  --broker-warmup S   untimed load on each cluster before the first round: a produce row of half the
                      records and S seconds of 16 transactional producers (default 20)
  --data-root DIR     where the data dirs go (default ${tmpdir()})
  --only kafka|bunka  start and measure one product only, its cluster and its single broker (for
                      development; no ratios)
  --no-single         leave out the single-broker systems (one bunka broker, one Kafka node) that are
                      measured beside the clusters by default
  --bunka-binary PATH run this bunka executable (default: dist/'s, rebuilt when older than src/)
`;

function die(message: string): never {
  process.stderr.write(`bench-cluster: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function parseArgs(argv: string[]): Options {
  const quick = argv.includes("--quick");
  const o: Options = quick
    ? { rounds: 1, records: 100_000, txnWarmupS: 3, txnDurationS: 5, brokerWarmupS: 10, dataRoot: tmpdir(), quick, noSingle: false }
    : { rounds: 3, records: 200_000, txnWarmupS: 5, txnDurationS: 10, brokerWarmupS: 20, dataRoot: tmpdir(), quick, noSingle: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined) die(`${flag} needs a value`);
      return v;
    };
    const num = (min: number): number => {
      const n = Number(value());
      if (!Number.isFinite(n) || n < min) die(`${flag} must be a number >= ${min}`);
      return n;
    };
    switch (flag) {
      case "--quick":
        break;
      case "--no-single":
        o.noSingle = true;
        break;
      case "--only": {
        const v = value();
        if (v !== "kafka" && v !== "bunka") die("--only takes kafka or bunka");
        o.only = v;
        break;
      }
      case "--rounds":
        o.rounds = Math.round(num(1));
        break;
      case "--records":
        o.records = Math.round(num(1000));
        break;
      case "--txn-warmup":
        o.txnWarmupS = num(0);
        break;
      case "--txn-duration":
        o.txnDurationS = num(1);
        break;
      case "--broker-warmup":
        o.brokerWarmupS = num(0);
        break;
      case "--bunka-binary":
        o.bunkaBinary = value();
        if (!existsSync(o.bunkaBinary)) die(`--bunka-binary: ${o.bunkaBinary} does not exist`);
        break;
      case "--data-root":
        o.dataRoot = value();
        if (!existsSync(o.dataRoot)) die(`--data-root: ${o.dataRoot} does not exist`);
        break;
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
      default:
        die(`unknown argument ${argv[i]}`);
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// The four systems behind one shape: each product as a three-broker cluster and as a single broker

type Product = "kafka" | "bunka";
/** kafka / bunka: the three-broker clusters; kafka1 / bunka1: a single broker of each, beside them. */
type Kind = Product | "kafka1" | "bunka1";
const KINDS: readonly Kind[] = ["kafka", "bunka", "kafka1", "bunka1"];
const KIND_LABEL: Record<Kind, string> = { kafka: "Kafka ×3", bunka: "bunka ×3", kafka1: "Kafka ×1", bunka1: "bunka ×1" };
const productOf = (k: Kind): Product => (k === "kafka" || k === "kafka1" ? "kafka" : "bunka");

interface System {
  kind: Kind;
  bootstrap: string;
  /** The broker processes (three, or one for a single broker). */
  pids: number[];
  /** bunka's etcd (Apache Kafka's controllers run inside its brokers). */
  extraPid?: number;
  /** Creates a 16-partition topic (replication factor 1); returns how many partitions each broker leads. */
  createTopic(name: string): Promise<number[]>;
  alive(): boolean;
  logTail(): string;
  /** What the log holds of `topic` (data records per partition, read_uncommitted), to tell a lost record from a skipped one. */
  storedRecords?(topic: string): Promise<string>;
  stop(): Promise<void>;
}

const tail = (path: string, lines = 8) => {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
};
const running = (pid: number) => existsSync(`/proc/${pid}`);

/** Leaders per node id 1..3 from `kafka-topics --describe`. */
async function kafkaLeaderShares(bootstrap: string, topic: string): Promise<number[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await runKafkaTool("kafka-topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic], { timeoutMs: 30_000 });
    const leaders = [...r.stdout.matchAll(/Partition:\s*\d+\s+Leader:\s*(-?\d+)/g)].map((m) => Number(m[1]));
    if (r.code === 0 && leaders.length === PARTITIONS && leaders.every((l) => l > 0)) {
      return Array.from({ length: BROKERS }, (_, i) => leaders.filter((l) => l === i + 1).length);
    }
    if (Date.now() > deadline) throw new Error(`kafka-topics --describe ${topic}: ${leaders.length} partitions with leaders (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(-300)}`);
  }
}

async function startKafkaSystem(root: string): Promise<System> {
  let cluster: ApacheKafkaCluster | undefined;
  const undo = onCleanup("Apache Kafka cluster", async () => cluster?.stop());
  cluster = await startApacheKafkaCluster({ nodes: BROKERS, dataDir: tempDir(root, "bench-kafka-cluster-") });
  const c = cluster;
  return {
    kind: "kafka",
    bootstrap: c.bootstrap,
    pids: c.nodes.map((n) => n.pid),
    async createTopic(name) {
      const r = await runKafkaTool(
        "kafka-topics",
        ["--bootstrap-server", c.bootstrap, "--create", "--topic", name, "--partitions", String(PARTITIONS), "--replication-factor", "1"],
        { timeoutMs: 60_000 },
      );
      if (r.code !== 0) throw new Error(`kafka-topics --create ${name} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split("\n").slice(-3).join(" | ")}`);
      return kafkaLeaderShares(c.bootstrap, name);
    },
    alive: () => c.nodes.every((n) => running(n.pid)),
    logTail: () => c.nodes.map((n) => `node ${n.nodeId}: ${tail(n.logFile, 3)}`).join("\n"),
    async stop() {
      await c.stop();
      undo();
      rmSync(c.dataDir, { recursive: true, force: true });
    },
  };
}

/** The pid of the etcd whose data dir is `dataDir` (EtcdServer keeps its process to itself). */
function etcdPid(dataDir: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (cmd.includes("etcd") && cmd.includes(dataDir)) return Number(entry);
    } catch {
      /* gone meanwhile */
    }
  }
  return undefined;
}

async function startBunkaSystem(root: string, binary: string | undefined): Promise<System & { binary: string }> {
  let cluster: BunkaCluster | undefined;
  const undo = onCleanup("bunka cluster", async () => cluster?.close());
  cluster = await BunkaCluster.start({ brokers: BROKERS, sessionTimeoutMs: SESSION_TIMEOUT_MS, dir: tempDir(root, "bench-bunka-cluster-"), ...(binary === undefined ? {} : { binary }) });
  const c = cluster;
  const pids = c.ids.map((id) => c.process(id)!.pid);
  return {
    kind: "bunka",
    bootstrap: c.bootstrap,
    binary: c.binary,
    pids,
    extraPid: etcdPid(c.etcd.dataDir),
    async createTopic(name) {
      await c.createTopic(name, PARTITIONS);
      const { shares } = await c.waitForBalanced([name], { timeoutMs: 60_000 });
      return c.ids.map((id) => shares.get(id) ?? 0);
    },
    alive: () => pids.every(running),
    logTail: () => c.logTails(3),
    async storedRecords(topic) {
      const counts: number[] = [];
      for (let p = 0; p < PARTITIONS; p++) {
        const contents = await c.readPartition(topic, p);
        counts.push(contents.batches.filter((b) => !b.header.isControl).reduce((n, b) => n + b.records.length, 0));
      }
      return `the partitions hold ${counts.reduce((a, b) => a + b, 0)} data records in all (${counts.join(" ")})`;
    },
    async stop() {
      await c.close();
      undo();
      rmSync(c.dir, { recursive: true, force: true });
    },
  };
}

/** A single broker of either product (bench-support's, as the single-broker benchmarks start them). */
function singleSystem(kind: "kafka1" | "bunka1", broker: Broker): System {
  return {
    kind,
    bootstrap: broker.bootstrap,
    pids: [broker.pid],
    async createTopic(name) {
      await createTopicWithTool(broker, name, PARTITIONS);
      return [PARTITIONS];
    },
    alive: () => broker.alive(),
    logTail: () => broker.logTail(),
    stop: () => broker.stop(),
  };
}

// ---------------------------------------------------------------------------------------------
// Rows

type RowId = "produce" | "txn1" | "txn16";
const ROWS: { id: RowId; title: string }[] = [
  { id: "produce", title: `produce acks=all 1 KiB, ${PARTITIONS} partitions` },
  { id: "txn1", title: "transactions, 1 producer + read_committed consumer" },
  { id: "txn16", title: "transactions, 16 producers + read_committed consumer" },
];

interface Ok {
  ok: true;
  /** produce: MB/s, txn: txn/s. */
  rate: number;
  /** produce: record latency; txn: EndTxn (commitTransaction()) latency. */
  p50Ms: number;
  p99Ms: number;
  /** Sum over the brokers of each one's peak RSS in the row, KiB. */
  rssKb: number;
  /** CPU seconds of the brokers (and the cluster's etcd) in the row. */
  brokerCpuS: number;
  otherPct: number;
  shares?: number[];
  /** txn: how long the consumer took, after the producers stopped, to see every committed record. */
  drainMs?: number;
}
type Outcome = Ok | { ok: false; error: string };

const PRODUCER_SUMMARY =
  /(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th/;

/** The most telling line of a tool's stderr. */
function firstError(stderr: string, stdout: string): string {
  const lines = stderr.split("\n").map((l) => l.trim()).filter(Boolean);
  const line = lines.find((l) => /^(org\.apache|java\.|kafka\.)\S*(Exception|Error)/.test(l)) ?? lines.find((l) => /Exception|ERROR/.test(l)) ?? stdout.trim().split("\n").at(-1) ?? "";
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

let txnClasses = "";

/** The Java client's WARN lines about offsets (an out-of-range reset skips records), for a failed check. */
function consumerWarnings(stderr: string): string {
  const lines = stderr.split("\n").filter((l) => /out of range|[Rr]esetting|OFFSET_OUT_OF_RANGE|truncat/.test(l)).slice(0, 5);
  return lines.length > 0 ? `; client log: ${lines.join(" | ").slice(0, 1200)}` : "";
}

interface Watch {
  stop(toolCpuMicros: number): { rssKb: number; brokerCpuS: number; otherPct: number };
}

/** Peak RSS of every broker of `sys`, their CPU (and etcd's), and the share of the machine taken by anything else. */
function watchSystem(sys: System, others: System[]): Watch {
  const rss = sys.pids.map(watchPeakRss);
  const own = [...sys.pids, ...(sys.extraPid === undefined ? [] : [sys.extraPid])];
  const idle = others.flatMap((o) => [...o.pids, ...(o.extraPid === undefined ? [] : [o.extraPid])]);
  const ticks0 = own.map(processTicks);
  // watchCpu follows one pid as "the broker"; the rest of ours and the idle cluster's count apart from "other".
  const cpu = watchCpu(own[0]!, { kernelApart: true, idlePids: [...own.slice(1), ...idle] });
  return {
    stop(toolCpuMicros) {
      const peaks = rss.map((w) => w.stop() ?? 0);
      const report = cpu.stop(toolCpuMicros);
      const brokerCpuS = own.reduce((sum, pid, i) => sum + Math.max(0, processTicks(pid) - ticks0[i]!), 0) / 100;
      return { rssKb: peaks.reduce((a, b) => a + b, 0), brokerCpuS, otherPct: report.otherPct };
    },
  };
}

async function produceRow(sys: System, others: System[], topic: string, records: number, tag: string): Promise<Outcome> {
  let shares: number[];
  try {
    shares = await sys.createTopic(topic);
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
  const watch = watchSystem(sys, others);
  const run = await runJavaTool({
    mainClass: TOOL_MAIN_CLASSES["kafka-producer-perf-test"],
    jvm: LOAD_TOOL_JVM,
    args: [
      "--topic", topic,
      "--num-records", String(records),
      "--record-size", String(RECORD_SIZE),
      "--throughput", "-1",
      // Java producer defaults otherwise (idempotence on); acks=all is the 4.1 default, spelled out.
      "--producer-props", `bootstrap.servers=${sys.bootstrap}`, "acks=all", "client.id=bench-cluster-producer",
    ],
    label: tag,
    timeoutMs: 300_000,
  });
  const w = watch.stop(run.cpuMicros);
  const m = run.stdout.match(PRODUCER_SUMMARY);
  if (run.timedOut) return { ok: false, error: "kafka-producer-perf-test timed out after 300 s" };
  if (run.code !== 0 || !m) return { ok: false, error: `kafka-producer-perf-test exit ${run.code}: ${firstError(run.stderr, run.stdout)}` };
  if (Number(m[1]) !== records) return { ok: false, error: `kafka-producer-perf-test sent ${m[1]} of ${records} records` };
  return { ok: true, rate: Number(m[3]), p50Ms: Number(m[7]), p99Ms: Number(m[9]), ...w, shares };
}

interface TxnResult {
  producers: number;
  producersInitialized: number;
  committedMeasured: number;
  committedTotal: number;
  txnPerSec: number;
  commitMs: { p50?: number; p99?: number };
  consumedRecords?: number;
  consumedLastRecords?: number;
  drainMs?: number;
  aborted?: number;
  errors: number;
  firstError: string | null;
}

/** Per cluster: records its committed transactions wrote to TXN_TOPIC, and the transactions aborted. */
const committedRecords = new Map<Kind, { records: number; aborted: number }>();

async function txnRow(sys: System, others: System[], producers: number, idPrefix: string, warmupS: number, durationS: number, tag: string): Promise<Outcome> {
  const watch = watchSystem(sys, others);
  const timeoutMs = (warmupS + durationS + DRAIN_TIMEOUT_S + 90) * 1000;
  const run = await runJavaTool({
    mainClass: "TxnBench",
    jvm: LOAD_TOOL_JVM,
    args: [
      "--bootstrap", sys.bootstrap,
      "--topic", TXN_TOPIC,
      "--partitions", String(PARTITIONS),
      "--producers", String(producers),
      "--duration", String(durationS),
      "--warmup", String(warmupS),
      "--records-per-txn", String(RECORDS_PER_TXN),
      "--record-size", String(RECORD_SIZE),
      "--id-prefix", idPrefix,
      "--drain-timeout", String(DRAIN_TIMEOUT_S),
      "--consumer",
    ],
    extraClasspath: txnClasses,
    label: tag,
    echo: (line) => !line.startsWith("RESULT "),
    timeoutMs,
    stderrLimitBytes: 64 * 1024,
  });
  const w = watch.stop(run.cpuMicros);
  const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  let r: TxnResult | undefined;
  try {
    r = line ? (JSON.parse(line.slice(7)) as TxnResult) : undefined;
  } catch {
    r = undefined;
  }
  const hint = () => {
    const e = firstError(run.stderr, "");
    return e ? `; client log: ${e}` : "";
  };
  if (run.timedOut) return { ok: false, error: `TxnBench timed out after ${timeoutMs / 1000} s${hint()}` };
  if (!r) return { ok: false, error: `TxnBench printed no result (exit ${run.code})${hint()}` };
  if (r.errors > 0 || r.producersInitialized < r.producers) return { ok: false, error: `client error (${r.errors} thread(s) failed): ${r.firstError}${hint()}` };
  const before = committedRecords.get(sys.kind) ?? { records: 0, aborted: 0 };
  const so = { records: before.records + r.committedTotal * RECORDS_PER_TXN, aborted: before.aborted + (r.aborted ?? 0) };
  committedRecords.set(sys.kind, so);
  if (r.committedMeasured === 0) return { ok: false, error: `no transaction committed in the measured window${hint()}` };
  const expected = r.committedTotal * RECORDS_PER_TXN;
  if (r.consumedLastRecords !== r.committedTotal || r.consumedRecords !== expected) {
    const stored =
      sys.storedRecords === undefined
        ? ""
        : `; ${await sys.storedRecords(TXN_TOPIC).catch((e: Error) => `reading the partitions failed: ${e.message}`)}, committed transactions wrote ${so.records} of them so far (${so.aborted} transactions aborted)`;
    return {
      ok: false,
      error: `read_committed check failed: ${r.committedTotal} transactions committed (${expected} records), the consumer read ${r.consumedRecords} records and the last record of ${r.consumedLastRecords} transactions${stored}${consumerWarnings(run.stderr)}`,
    };
  }
  if (r.commitMs.p50 === undefined || r.commitMs.p99 === undefined) return { ok: false, error: "TxnBench reported no EndTxn latency" };
  return { ok: true, rate: r.txnPerSec, p50Ms: r.commitMs.p50, p99Ms: r.commitMs.p99, ...w, ...(r.drainMs === undefined ? {} : { drainMs: r.drainMs }) };
}

async function runRow(sys: System, others: System[], row: RowId, round: number, opts: Options, tag: string): Promise<Outcome> {
  try {
    const outcome =
      row === "produce"
        ? await produceRow(sys, others, `bench-cluster-p-r${round}`, opts.records, tag)
        : await txnRow(sys, others, row === "txn1" ? 1 : 16, `bench-cluster-${row}-r${round}`, opts.txnWarmupS, opts.txnDurationS, tag);
    if (!outcome.ok && !sys.alive()) return { ok: false, error: `${outcome.error} (a broker died; log tails:\n${sys.logTail()})` };
    return outcome;
  } catch (e) {
    return { ok: false, error: `${(e as Error).message}${sys.alive() ? "" : " (a broker died)"}` };
  }
}

/** The untimed warm-up: the transaction topic, half a produce row, --broker-warmup s of 16 transactional producers. */
async function warmUp(sys: System, others: System[], opts: Options): Promise<number[]> {
  const shares = await sys.createTopic(TXN_TOPIC);
  log(`${sys.kind}: ${TXN_TOPIC} leaders per broker: ${shares.join(" / ")}`);
  if (opts.brokerWarmupS <= 0) return shares;
  log(`-- ${sys.kind} warm-up (not measured)`);
  const p = await produceRow(sys, others, "bench-cluster-warmup", Math.max(1000, Math.round(opts.records / 2)), `${sys.kind} warm-up`);
  if (!p.ok) throw new Error(`${sys.kind} warm-up produce failed: ${p.error}`);
  const t = await txnRow(sys, others, 16, "bench-cluster-warmup", 0, opts.brokerWarmupS, `${sys.kind} warm-up`);
  if (!t.ok) throw new Error(`${sys.kind} warm-up transactions failed: ${t.error}`);
  log(`${sys.kind} warm-up: ${p.rate.toFixed(1)} MB/s, ${fmtNum(t.rate)} txn/s`);
  return shares;
}

// ---------------------------------------------------------------------------------------------
// Report

const fmtMs = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0));
const fmtRate = (row: RowId) => (n: number) => (row === "produce" ? n.toFixed(1) : fmtNum(n));
const fmtMiB = (kb: number) => (kb / 1024).toFixed(0);

type Results = Map<RowId, { round: number; order: Kind[]; outcomes: Partial<Record<Kind, Outcome>> }[]>;

function report(results: Results, opts: Options, kinds: readonly Kind[], meta: string[], startedMs: number): string {
  const has = (k: Kind) => kinds.includes(k);
  // Each product's cluster against the other's, the single brokers likewise, and what three brokers cost
  // bunka against one (the price of distribution on this machine).
  const ratios: [string, Kind, Kind][] = (
    [
      ["bunka/Kafka ×3", "bunka", "kafka"],
      ["bunka/Kafka ×1", "bunka1", "kafka1"],
      ["bunka ×3/×1", "bunka", "bunka1"],
    ] as [string, Kind, Kind][]
  ).filter(([, a, b]) => has(a) && has(b));
  const header = ["row", "measure", ...kinds.map((k) => `${KIND_LABEL[k]} median (range)`), ...ratios.map(([name]) => name)];
  const durability = (k: Kind) => (productOf(k) === "kafka" ? "in the page cache, not fsynced" : "fsynced (group commit)");
  const rows: string[][] = [["every row", "an acknowledged write is", ...kinds.map(durability), ...ratios.map(() => "")]];
  const busy: string[] = [];
  const errors: string[] = [];
  const pick = (row: RowId, kind: Kind): Ok[] =>
    (results.get(row) ?? []).map((r) => r.outcomes[kind]).filter((o): o is Ok => o !== undefined && o.ok);
  for (const { id, title } of ROWS) {
    const measures: [string, (o: Ok) => number, (n: number) => string][] = [
      [id === "produce" ? "MB/s" : "txn/s", (o) => o.rate, fmtRate(id)],
      [id === "produce" ? "latency p50 ms" : "EndTxn p50 ms", (o) => o.p50Ms, fmtMs],
      [id === "produce" ? "latency p99 ms" : "EndTxn p99 ms", (o) => o.p99Ms, fmtMs],
      ["RSS MiB, sum of the brokers' peaks", (o) => o.rssKb, fmtMiB],
      ["broker CPU-s in the row (bunka ×3: with etcd)", (o) => o.brokerCpuS, (n) => n.toFixed(1)],
    ];
    for (const [measure, get, fmt] of measures) {
      const values = new Map(kinds.map((k) => [k, pick(id, k).map(get)] as const));
      rows.push([
        title,
        measure,
        ...kinds.map((k) => medianSpread(values.get(k)!, fmt)),
        ...ratios.map(([, a, b]) => ratio(median(values.get(a)!), median(values.get(b)!))),
      ]);
    }
    for (const r of results.get(id) ?? []) {
      for (const kind of kinds) {
        const o = r.outcomes[kind];
        if (o === undefined) continue;
        if (!o.ok) errors.push(`round ${r.round} ${KIND_LABEL[kind]} ${id}: ${o.error}`);
        else if (o.otherPct >= BUSY_PCT) busy.push(`round ${r.round} ${KIND_LABEL[kind]} ${id}: other processes ${o.otherPct.toFixed(0)}%`);
      }
    }
  }
  const perRound: string[][] = [];
  for (const { id } of ROWS) {
    for (const r of results.get(id) ?? []) {
      const cell = (kind: Kind) => {
        const o = r.outcomes[kind];
        if (o === undefined) return "—";
        if (!o.ok) return "failed";
        return `${fmtRate(id)(o.rate)} ${id === "produce" ? "MB/s" : "txn/s"}, p99 ${fmtMs(o.p99Ms)} ms, ${fmtMiB(o.rssKb)} MiB, other ${o.otherPct.toFixed(0)}%${o.otherPct >= BUSY_PCT ? " *" : ""}`;
      };
      perRound.push([id, String(r.round), r.order.map((k) => KIND_LABEL[k]).join(", "), ...kinds.map(cell)]);
    }
  }
  const roundHeader = ["row", "round", "order", ...kinds.map((k) => KIND_LABEL[k])];
  const summary = [
    `${opts.rounds} round(s), ${((Date.now() - startedMs) / 1000).toFixed(0)} s in all; the load average was ${loadAverages()} at the end`,
    busy.length > 0 ? `rows where other processes used >= ${BUSY_PCT}% of the machine: ${busy.join("; ")}` : `other processes stayed under ${BUSY_PCT}% of the machine in every row`,
  ];
  const title = `Three brokers: bunka cluster vs Apache Kafka KRaft cluster${has("kafka1") || has("bunka1") ? ", single brokers beside them" : ""}`;
  const out = ["", title, "", ...meta, ...summary, "", textTable(header, rows), "", "Every round:", "", textTable(roundHeader, perRound)];
  if (errors.length) out.push("", ...errors);
  out.push("", "---- markdown (for docs/benchmarks.md) ----", "", ...[...meta, ...summary].map((m) => `- ${m}`), "", markdownTable(header, rows), "", "Every round:", "", markdownTable(roundHeader, perRound));
  if (errors.length) out.push("", ...errors.map((e) => `- ${e}`));
  return `${out.join("\n")}\n`;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const startedMs = Date.now();
  const env = await environment(opts.dataRoot);
  txnClasses = await compileJavaTool("TxnBench");
  const wanted = KINDS.filter((k) => (opts.only === undefined || productOf(k) === opts.only) && (!opts.noSingle || k === "kafka" || k === "bunka"));
  const systems: System[] = [];
  const shares: Partial<Record<Kind, number[]>> = {};
  const results: Results = new Map(ROWS.map((r) => [r.id, []]));
  let fatal: string | undefined;
  try {
    // One at a time, so that no start competes with another's JIT or recovery.
    let bunkaBinary = opts.bunkaBinary;
    for (const kind of wanted) {
      let sys: System;
      if (kind === "kafka") {
        log("== starting a three-node Apache Kafka KRaft cluster (3 combined broker+controller nodes, 3 voters)");
        sys = await startKafkaSystem(opts.dataRoot);
      } else if (kind === "bunka") {
        log("== starting a three-broker bunka cluster (compiled binary, one shared data dir, one etcd)");
        const bunka = await startBunkaSystem(opts.dataRoot, bunkaBinary);
        bunkaBinary ??= bunka.binary;
        sys = bunka;
      } else if (kind === "kafka1") {
        log("== starting a single-node Apache Kafka (KRaft, broker+controller)");
        sys = singleSystem(kind, await startKafkaBroker(opts.dataRoot));
      } else {
        log("== starting a single bunka broker (bunka serve, no etcd)");
        // The cluster's binary when there is one, so that both run the same build.
        bunkaBinary ??= await ensureBunkaBinary();
        sys = singleSystem(kind, await startBunkaBroker(bunkaBinary, opts.dataRoot));
      }
      systems.push(sys);
      log(`${KIND_LABEL[kind]}: ${sys.bootstrap} (pids ${sys.pids.join(", ")}${sys.extraPid === undefined ? "" : `, etcd ${sys.extraPid}`})`);
    }
    for (const sys of systems) shares[sys.kind] = await warmUp(sys, systems.filter((s) => s !== sys), opts);
    for (let round = 1; round <= opts.rounds && !isInterrupted(); round++) {
      const order = roundOrder(systems, round);
      for (const { id, title } of ROWS) {
        const outcomes: Partial<Record<Kind, Outcome>> = {};
        for (const sys of order) {
          if (isInterrupted()) break;
          const name = KIND_LABEL[sys.kind];
          log(`-- round ${round}/${opts.rounds}: ${name} ${title}`);
          const o = await runRow(sys, systems.filter((s) => s !== sys), id, round, opts, `${sys.kind} r${round} ${id}`);
          outcomes[sys.kind] = o;
          log(
            o.ok
              ? `${name} ${id}: ${fmtRate(id)(o.rate)} ${id === "produce" ? "MB/s" : "txn/s"}, p50/p99 ${fmtMs(o.p50Ms)} / ${fmtMs(o.p99Ms)} ms, RSS ${fmtMiB(o.rssKb)} MiB (${sys.pids.length} broker${sys.pids.length > 1 ? "s" : ""}), CPU ${o.brokerCpuS.toFixed(1)} s, other ${o.otherPct.toFixed(0)}%${o.shares ? `, leaders ${o.shares.join("/")}` : ""}${o.drainMs === undefined ? "" : `, drained in ${o.drainMs} ms`}`
              : `${name} ${id}: FAILED ${o.error}`,
          );
        }
        results.get(id)!.push({ round, order: order.map((s) => s.kind), outcomes });
      }
    }
  } catch (e) {
    fatal = (e as Error).message;
    log(`bench-cluster: ${fatal}`);
  } finally {
    for (const sys of [...systems].reverse()) {
      log(`${KIND_LABEL[sys.kind]}: stopping`);
      await sys.stop().catch((e: Error) => log(`${KIND_LABEL[sys.kind]}: stop failed: ${e.message}`));
    }
    await runCleanups(false);
  }
  const etcdNote = "bunka's etcd is not in the RSS sum (its CPU is in bunka ×3's CPU row); Apache Kafka's controllers run inside its nodes";
  const bunkaBuild = opts.bunkaBinary === undefined ? env.bunka : `bunka executable ${opts.bunkaBinary}`;
  const kafkaNodes = env.kafka.replace("single-node KRaft", "3 nodes, each broker+controller, static 3-voter quorum");
  const meta = [
    `${env.date}: ${env.machine}`,
    env.sharing,
    `Kafka ×3: ${kafkaNodes}; replication factor 1 for every topic (internal ones too); no fsync before an answer (log.flush.interval.messages unset)`,
    `bunka ×3: ${bunkaBuild}, ${BROKERS} brokers on one shared data dir, one etcd, broker.session.timeout.ms=${SESSION_TIMEOUT_MS}; Produce acks=-1 and every transaction step answered after fsync`,
    ...(wanted.includes("kafka1") ? [`Kafka ×1: ${env.kafka}; no fsync before an answer`] : []),
    ...(wanted.includes("bunka1") ? [`bunka ×1: the same build, \`bunka serve\` (single-broker mode, no etcd, default settings); Produce acks=-1 and every transaction step answered after fsync`] : []),
    `load: kafka-producer-perf-test and scripts/bench-java/TxnBench.java (Apache Kafka ${KAFKA_VERSION} Java clients, ${LOAD_TOOL_JVM.join(" ")}, a new JVM per row), bootstrap = all of a system's brokers; ${fmtNum(opts.records)} records per produce row; transaction rows ${opts.txnWarmupS} s warm-up + ${opts.txnDurationS} s measured, 10 x 1 KiB per transaction`,
    `leaders of the ${PARTITIONS} partitions per broker: Kafka ×3 ${shares.kafka?.join("/") ?? "?"}, bunka ×3 ${shares.bunka?.join("/") ?? "?"}; ${etcdNote}`,
    `${env.runtime}; each system warmed up first (${fmtNum(Math.round(opts.records / 2))} records, ${opts.brokerWarmupS} s of 16 transactional producers); the idle systems stay up during each one's rows`,
  ];
  process.stdout.write(report(results, opts, systems.map((s) => s.kind), meta, startedMs));
  if (fatal) {
    process.stdout.write(`\nstopped early: ${fatal}\n`);
    process.exit(1);
  }
  const failed = [...results.values()].some((rs) => rs.some((r) => Object.values(r.outcomes).some((o) => !o!.ok)));
  process.exit(failed ? 1 : 0);
}

await main();
