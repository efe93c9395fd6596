#!/usr/bin/env bun
/**
 * Transactions benchmark: Apache Kafka against bunka (and, with --kafka-flush, against Apache Kafka fsyncing
 * every append), on the same machine, one after the other (or with --rounds all at once, in alternating
 * rounds), with the same load tool for all:
 * scripts/bench-java/TxnBench.java (Apache Kafka's own Java producer and consumer, 4.1.1), compiled here with
 * javac into .cache/bench-java/ against the jars of tests/support/apache-kafka.ts. Not a test; see
 * docs/benchmarks.md ("Transactions").
 *
 *   bun scripts/bench-transactions.ts [--only kafka|bunka] [--duration S] [--warmup S] [--producers N]
 *                                     [--endtxn-duration S] [--ids 10000,100000] [--kafka-ids LIST]
 *                                     [--precreate-timeout S] [--broker-warmup S] [--scenarios a,b,c]
 *                                     [--kafka-txn-version 1|2] [--data-root DIR] [--bunka-binary PATH]
 *                                     [--rounds N] [--kafka-flush] [--tls] [--txn-rate R]
 *
 * Every transaction is: beginTransaction(); 10 x send() of a 1 KiB record (each to another of the topic's 16
 * partitions); flush(); commitTransaction(). Each producer thread has its own transactional.id. Scenarios,
 * each group on a freshly started broker with an empty data dir, warmed up first by --broker-warmup (30) s of
 * untimed load (--producers producers + the consumer; Apache Kafka's JIT needs about a minute to reach full
 * speed, and a cold JVM would halve its numbers):
 *   (a) 1 producer, and one read_committed consumer of all 16 partitions, for --duration s after --warmup s:
 *       transactions/s, EndTxn latency (the commitTransaction() call), commit-to-visible latency (from the
 *       commitTransaction() call until the consumer's poll() returns the transaction's last record)  (broker #1)
 *   (b) the same with --producers (16) concurrent producers                                          (broker #1)
 *   (c) EndTxn latency of one producer (no consumer) with 17 (its own and the 16 of the warm-up), 10k and
 *       100k transactional ids in the coordinator's store: the ids are created between the rows with
 *       InitProducerId requests in raw frames (tests/support/wire-client.ts; FindCoordinator first),
 *       16 connections x 16 in flight                                                                   (broker #2)
 *
 * --tls: both brokers get an SSL listener with the same PEM certificate (made by openssl for the run) and the
 * load tool (TxnBench --client-config), kafka-topics and kafka-features connect to it with security.protocol=SSL
 * and a PEM truststore (server-side TLS only, no client certificates); bench-support.ts's BenchTls says how
 * each broker is configured. The ids of (c) are still created over the PLAINTEXT listener (raw frames).
 *
 * Checks: the consumer must read exactly 10 records per committed transaction and the last record of every
 * committed transaction (after the producers stop it drains for up to 15 s); any client error fails the row
 * with the client's first error.
 *
 * The report gives, per scenario and measure, each broker's value (with --rounds: the median over the rounds
 * and the range, min–max) and bunka's median divided by each other broker's (the ratio of the medians).
 *
 * Durability, stated in the report next to the figures:
 *   - bunka fsyncs before it answers each step: the coordinator's journal for AddPartitionsToTxn and for
 *     EndTxn (answered once Prepare* is durable), the segment for Produce acks=all; the markers and Complete*
 *     are fsynced after the EndTxn answer, and the producer's next request about its id waits for them.
 *   - Apache Kafka with its default flush settings fsyncs nothing before an answer: EndTxn is answered once
 *     PrepareCommit is appended to __transaction_state (page cache), the markers and CompleteCommit follow.
 *   - --kafka-flush adds Apache Kafka with log.flush.interval.messages=1, which its source shows to be
 *     synchronous: UnifiedLog.append ends with flush() (FileChannel.force of the segment and its indexes)
 *     under the partition's lock on the request handler thread, before ReplicaManager answers. That holds for
 *     the broker's own appends too, so its Produce batches and the __transaction_state records (PrepareCommit
 *     before the EndTxn answer) are fsynced before their answers; the markers and CompleteCommit after it.
 *
 * Progress goes to stderr; the results (a text table, then the same in markdown for docs/benchmarks.md) go to
 * stdout. Brokers, tools and temp dirs are removed at the end, on an error and on Ctrl-C.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { resolve } from "node:path";
import { javaBin, KAFKA_VERSION } from "../tests/support/apache-kafka.ts";
import { WireClient } from "../tests/support/wire-client.ts";
import { ErrorCode } from "../src/errors/generated/error-codes.ts";
import {
  type Broker,
  type BrokerKind,
  type BrokerVariant,
  type BenchTls,
  BUSY_PCT,
  capture,
  compileJavaTool,
  connect,
  type CpuReport,
  createTopicWithTool,
  ensureBunkaBinary,
  environment,
  errName,
  fmtNum,
  fmtRss,
  installSignalHandlers,
  isInterrupted,
  type JavaToolRun,
  KAFKA_FLUSH_FINDING,
  KAFKA_FLUSH_PROPERTIES,
  kindOf,
  label,
  loadAverages,
  log,
  median,
  medianSpread,
  renderReport,
  roundOrder,
  runCleanups,
  runGuardedRow,
  runJavaTool,
  scrapeHistogramTotals,
  setUpBenchTls,
  sleep,
  startVariant,
  tlsLine,
  toolConfigArgs,
  variantsOf,
  watchCpu,
  watchPeakRss,
} from "./bench-support.ts";

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  only?: BrokerKind;
  durationS: number;
  warmupS: number;
  producers: number;
  endTxnDurationS: number;
  ids: number[];
  /** The id counts for Apache Kafka, when they differ (e.g. if 100k InitProducerIds take too long there). */
  kafkaIds?: number[];
  precreateTimeoutS: number;
  /** Set Apache Kafka's finalized transaction.version (kafka-features upgrade/downgrade) after it starts. */
  kafkaTxnVersion?: 1 | 2;
  scenarios: Set<"a" | "b" | "c">;
  /** Seconds of untimed load on each freshly started broker before its first row. */
  brokerWarmupS: number;
  dataRoot: string;
  bunkaBinary?: string;
  /** Interleaved mode: all brokers up at once, every scenario run this many times on each, alternating. */
  rounds?: number;
  /** Also run Apache Kafka with KAFKA_FLUSH_PROPERTIES (fsync per append). */
  kafkaFlush: boolean;
  /** --tls: the tools reach both brokers over an SSL listener. */
  tls: boolean;
  /** (b): transactions per second offered in all (an open loop), instead of each producer's next at once. */
  txnRate?: number;
}

const PARTITIONS = 16;
const RECORDS_PER_TXN = 10;
const RECORD_SIZE = 1024;
const TOPIC = "bench-txn";
const ENDTXN_WARMUP_S = 5;
const DRAIN_TIMEOUT_S = 15;
const PRECREATE_CONNECTIONS = 16;
const PRECREATE_IN_FLIGHT = 16;
/** The JVM flags tests/support/apache-kafka.ts gives Apache's perf tools (full JIT, 1 GiB heap). */
const LOAD_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];

const USAGE = `usage: bun scripts/bench-transactions.ts [--only kafka|bunka] [--duration S] [--warmup S]
       [--producers N] [--endtxn-duration S] [--ids LIST] [--kafka-ids LIST] [--precreate-timeout S]
       [--broker-warmup S] [--scenarios a,b,c] [--kafka-txn-version 1|2] [--data-root DIR]
       [--bunka-binary PATH] [--rounds N] [--kafka-flush] [--tls] [--txn-rate R]

  --only B               run one broker only (kafka or bunka; --kafka-flush still adds its variant)
  --duration S           (a), (b): seconds measured (default 20)
  --warmup S             (a), (b): seconds of transactions before the measurement (default 10; the load tool's
                         own JVM is new for every row and needs them)
  --producers N          (b): concurrent transactional producers (default 16)
  --txn-rate R           (b): offer R transactions per second in all, each producer on a fixed schedule (an
                         open loop), so that the brokers' latencies are compared at the same load; without it
                         each producer starts its next transaction once the last committed (a closed loop)
  --endtxn-duration S    (c): seconds measured per row, after ${ENDTXN_WARMUP_S} s of warm-up (default 10)
  --ids LIST             (c): transactional ids in the store for the rows after the first (default 10000,100000)
  --kafka-ids LIST       (c): the same for Apache Kafka only (default: --ids)
  --precreate-timeout S  (c): give up creating ids after this long, per row (default 300)
  --broker-warmup S      untimed load (--producers producers + consumer) on each freshly started broker
                         before its first row; the (c) group's warm-up ids stay in its store (default 30)
  --scenarios LIST       run only these of a,b,c (default a,b,c)
  --kafka-txn-version V  set Apache Kafka's transaction.version feature to 1 or 2 after it starts (default: its
                         own default, 2 in 4.1; bunka speaks version 1)
  --data-root DIR        where the brokers' temporary data dirs go (default ${tmpdir()})
  --bunka-binary PATH    run this bunka executable (default: dist/bunka-linux-x64, rebuilt when older than src/)
  --rounds N             interleaved: start every broker once (each warmed up), then N rounds, each running
                         every scenario on each broker, the order reversed from round to round; reports every
                         round and the medians (with --scenarios a, b or a,b). This machine's speed drifts
                         by ±20% within minutes: a ratio of two rows run side by side is steadier than one of
                         two runs minutes apart
  --kafka-flush          also run Apache Kafka with log.flush.interval.messages=1, which fsyncs every append
                         (the coordinator's too) before answering: the like-for-like durability reference
  --tls                  both brokers get an SSL listener (same PEM certificate) and the tools connect over TLS
                         (security.protocol=SSL, PEM truststore; no client certificates)
`;

function parseArgs(argv: string[]): Options {
  const o: Options = { durationS: 20, warmupS: 10, producers: 16, endTxnDurationS: 10, ids: [10_000, 100_000], precreateTimeoutS: 300, scenarios: new Set(["a", "b", "c"]), brokerWarmupS: 30, dataRoot: tmpdir(), kafkaFlush: false, tls: false };
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
    const list = (): number[] => {
      const l = value().split(",").filter(Boolean).map(Number);
      if (l.some((n) => !Number.isInteger(n) || n < 2)) die(`${flag} takes a comma-separated list of integers >= 2`);
      return [...l].sort((a, b) => a - b);
    };
    switch (flag) {
      case "--only": {
        const v = value();
        if (v !== "kafka" && v !== "bunka") die("--only takes kafka or bunka");
        o.only = v;
        break;
      }
      case "--duration":
        o.durationS = num(1);
        break;
      case "--warmup":
        o.warmupS = num(0);
        break;
      case "--producers":
        o.producers = Math.round(num(2));
        break;
      case "--txn-rate":
        o.txnRate = num(1);
        break;
      case "--endtxn-duration":
        o.endTxnDurationS = num(1);
        break;
      case "--ids":
        o.ids = list();
        break;
      case "--kafka-ids":
        o.kafkaIds = list();
        break;
      case "--precreate-timeout":
        o.precreateTimeoutS = num(1);
        break;
      case "--broker-warmup":
        o.brokerWarmupS = num(0);
        break;
      case "--scenarios": {
        const l = value().split(",").filter(Boolean);
        if (l.length === 0 || l.some((x) => x !== "a" && x !== "b" && x !== "c")) die("--scenarios takes a comma-separated subset of a,b,c");
        o.scenarios = new Set(l as ("a" | "b" | "c")[]);
        break;
      }
      case "--kafka-txn-version": {
        const v = value();
        if (v !== "1" && v !== "2") die("--kafka-txn-version takes 1 or 2");
        o.kafkaTxnVersion = Number(v) as 1 | 2;
        break;
      }
      case "--data-root":
        o.dataRoot = value();
        break;
      case "--rounds":
        o.rounds = Math.round(num(2));
        break;
      case "--kafka-flush":
        if (inline !== undefined) die("--kafka-flush takes no value");
        o.kafkaFlush = true;
        break;
      case "--tls":
        if (inline !== undefined) die("--tls takes no value");
        o.tls = true;
        break;
      case "--bunka-binary":
        o.bunkaBinary = resolve(value());
        if (!existsSync(o.bunkaBinary)) die(`--bunka-binary: ${o.bunkaBinary} does not exist`);
        break;
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
      default:
        die(`unknown argument ${argv[i]}`);
    }
  }
  if (o.rounds !== undefined && (variantsOf(o.only, o.kafkaFlush).length < 2 || o.scenarios.has("c"))) {
    die("--rounds needs two brokers or more and runs only (a) and (b): add --scenarios a,b (or one of them)");
  }
  return o;
}

function die(message: string): never {
  process.stderr.write(`bench-transactions: ${message}\n\n${USAGE}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// The load tool: scripts/bench-java/TxnBench.java, compiled on first use (and when the source changes)

interface Dist {
  n: number;
  p50?: number;
  p90?: number;
  p99?: number;
  p999?: number;
  max?: number;
  avg?: number;
}

interface ToolResult {
  producers: number;
  producersInitialized: number;
  initMs: number;
  windowS: number;
  committedMeasured: number;
  committedTotal: number;
  aborted: number;
  txnPerSec: number;
  commitMs: Dist;
  flushMs: Dist;
  visibleMs?: Dist;
  consumedRecords?: number;
  consumedLastRecords?: number;
  lateLookups?: number;
  drainMs?: number;
  errors: number;
  firstError: string | null;
}

interface ToolRun extends JavaToolRun {
  result?: ToolResult;
}

let toolClasses = "";
/** With --tls: the certificates and the tools' client config, made once in main(). */
let benchTls: BenchTls | undefined;

async function runLoadTool(args: string[], tag: string, timeoutMs: number): Promise<ToolRun> {
  const run = await runJavaTool({
    mainClass: "TxnBench",
    jvm: LOAD_TOOL_JVM,
    args,
    extraClasspath: toolClasses,
    label: tag,
    echo: (line) => !line.startsWith("RESULT "),
    timeoutMs,
    stderrLimitBytes: 64 * 1024,
  });
  const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  let result: ToolResult | undefined;
  if (line) {
    try {
      result = JSON.parse(line.slice(7)) as ToolResult;
    } catch {
      /* reported as no result */
    }
  }
  return { ...run, result };
}

/** The most telling line of the tool's stderr (the Java client logs WARN and above there). */
function firstStderrError(run: ToolRun): string {
  const lines = run.stderr.split("\n").map((l) => l.trim()).filter(Boolean);
  const line =
    lines.find((l) => /^(org\.apache|java\.|kafka\.)\S*(Exception|Error)/.test(l)) ?? lines.find((l) => /Exception|ERROR|Error/.test(l)) ?? lines.at(-1) ?? "";
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

// ---------------------------------------------------------------------------------------------
// Raw frames: creating transactional ids, the broker's transaction.version

const API = { FindCoordinator: 10, InitProducerId: 22, ApiVersions: 18, AddPartitionsToTxn: 24, EndTxn: 26, Produce: 0, Fetch: 1, ListOffsets: 2, Metadata: 3 } as const;
const NEEDED: [number, string][] = [
  [API.Metadata, "Metadata"],
  [API.Produce, "Produce"],
  [API.Fetch, "Fetch"],
  [API.ListOffsets, "ListOffsets"],
  [API.FindCoordinator, "FindCoordinator"],
  [API.InitProducerId, "InitProducerId"],
  [API.AddPartitionsToTxn, "AddPartitionsToTxn"],
  [API.EndTxn, "EndTxn"],
];
const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.CONCURRENT_TRANSACTIONS,
]);

/** What transaction.version the broker finalizes (ApiVersions v3): the Java client uses EndTxn v5 (KIP-890) at 2. */
async function transactionVersion(broker: Broker): Promise<string> {
  const c = await connect(broker, "bench-txn-features");
  try {
    const res = await c.request(API.ApiVersions, 3, { clientSoftwareName: "bunka-bench", clientSoftwareVersion: "1" });
    const f = (res.finalizedFeatures as { name: string; maxVersionLevel: number }[]).find((x) => x.name === "transaction.version");
    return f ? `transaction.version=${f.maxVersionLevel}` : "transaction.version not advertised (version 1)";
  } finally {
    c.close();
  }
}

/** kafka-features upgrade/downgrade --feature transaction.version=V, then waits until ApiVersions shows it. */
async function setKafkaTxnVersion(broker: Broker, version: 1 | 2): Promise<string> {
  const current = await transactionVersion(broker);
  if (current === `transaction.version=${version}`) return current;
  const verb = version === 1 ? "downgrade" : "upgrade";
  const run = await runJavaTool({
    mainClass: "org.apache.kafka.tools.FeatureCommand",
    jvm: ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xmx512m"],
    args: ["--bootstrap-server", broker.bootstrap, ...toolConfigArgs(broker, "--command-config"), verb, "--feature", `transaction.version=${version}`],
    label: "",
    timeoutMs: 60_000,
  });
  if (run.code !== 0) throw new Error(`kafka-features ${verb} failed (exit ${run.code}): ${(run.stdout + run.stderr).trim().slice(0, 400)}`);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const now = await transactionVersion(broker);
    if (now === `transaction.version=${version}`) return now;
    if (Date.now() > deadline) throw new Error(`kafka-features ${verb}: still ${now} after 15 s`);
    await sleep(200);
  }
}

interface Precreate {
  created: number;
  ms: number;
  retries: number;
  /** error name -> how often it was retried */
  retried: Map<string, number>;
  error?: string;
}

/**
 * InitProducerId for every id in [from, to) (ids "bench-store-<i>"), over PRECREATE_CONNECTIONS connections
 * with PRECREATE_IN_FLIGHT requests in flight each; retriable coordinator errors are retried after 20 ms.
 */
async function precreateIds(broker: Broker, from: number, to: number, timeoutMs: number): Promise<Precreate> {
  const t0 = performance.now();
  const deadline = Date.now() + timeoutMs;
  const initVersion = Math.min(4, broker.apis.get(API.InitProducerId) ?? 0);
  const fcVersion = Math.min(4, broker.apis.get(API.FindCoordinator) ?? 0);
  const clients = await Promise.all(Array.from({ length: PRECREATE_CONNECTIONS }, (_, i) => connect(broker, `bench-txn-ids-${i}`)));
  let next = from;
  let created = 0;
  let retries = 0;
  const retried = new Map<string, number>();
  let error: string | undefined;
  try {
    // The coordinator first (Apache creates and loads __transaction_state on the first FindCoordinator).
    for (;;) {
      const key = `bench-store-${from}`;
      const res = await clients[0]!.request(API.FindCoordinator, fcVersion, fcVersion >= 4 ? { keyType: 1, coordinatorKeys: [key] } : { key, keyType: 1 });
      const code = fcVersion >= 4 ? res.coordinators[0].errorCode : res.errorCode;
      if (code === ErrorCode.NONE) break;
      if (!RETRIABLE.has(code) || Date.now() > deadline) throw new Error(`FindCoordinator: ${errName(code)}`);
      await sleep(100);
    }
    const worker = async (c: WireClient) => {
      while (error === undefined && next < to) {
        const i = next++;
        for (;;) {
          if (Date.now() > deadline) {
            error ??= `stopped after ${(timeoutMs / 1000).toFixed(0)} s (--precreate-timeout)`;
            return;
          }
          const res = await c.request(API.InitProducerId, initVersion, {
            transactionalId: `bench-store-${i}`,
            transactionTimeoutMs: 60_000,
            producerId: -1,
            producerEpoch: -1,
          });
          if (res.errorCode === ErrorCode.NONE) break;
          if (!RETRIABLE.has(res.errorCode)) {
            error ??= `InitProducerId bench-store-${i}: ${errName(res.errorCode)}`;
            return;
          }
          retries++;
          retried.set(errName(res.errorCode), (retried.get(errName(res.errorCode)) ?? 0) + 1);
          await sleep(20);
        }
        created++;
      }
    };
    await Promise.all(clients.flatMap((c) => Array.from({ length: PRECREATE_IN_FLIGHT }, () => worker(c))));
  } catch (e) {
    error ??= (e as Error).message;
  } finally {
    for (const c of clients) c.close();
  }
  return { created, ms: performance.now() - t0, retries, retried, error };
}

// ---------------------------------------------------------------------------------------------
// Scenarios

type ScenarioId = "a" | "b" | `c${number}`;
interface Scenario {
  id: ScenarioId;
  title: string;
  producers: number;
  consumer: boolean;
  /** (c): transactional ids the store holds during the row, the measuring producer's own included. */
  ids?: number;
  /** Overrides for the broker warm-up pseudo-row. */
  warmupS?: number;
  durationS?: number;
  idPrefix?: string;
}

interface Ok {
  ok: true;
  r: ToolResult;
  peakRssKb?: number;
  cpu: CpuReport;
  precreate?: Precreate;
  /** bunka only: the mean of each EndTxn step over the row (its warm-up included), from /metrics. */
  endTxnStepsMs?: { phase: string; meanMs: number }[];
  /**
   * bunka only: a data file's fsync wait over the row (its warm-up included), from /metrics: the mean, how
   * many, and the share that took longer than 2.5 and 5 ms (the histogram's buckets).
   */
  fsyncWait?: FsyncWait;
}

interface FsyncWait {
  meanMs: number;
  count: number;
  over2500usPct: number;
  over5msPct: number;
}

/** The file fsyncs' totals and the cumulative counts of their 2.5 and 5 ms buckets, from one scrape. */
async function scrapeFileFsyncs(metricsUrl: string): Promise<{ sumS: number; count: number; le2500us: number; le5ms: number }> {
  const text = await (await fetch(metricsUrl)).text();
  const value = (pattern: RegExp) => Number(text.match(pattern)?.[1] ?? 0);
  return {
    sumS: value(/^bunka_fsync_duration_seconds_sum\{kind="file"\} (\S+)$/m),
    count: value(/^bunka_fsync_duration_seconds_count\{kind="file"\} (\S+)$/m),
    le2500us: value(/^bunka_fsync_duration_seconds_bucket\{kind="file",le="0.0025"\} (\S+)$/m),
    le5ms: value(/^bunka_fsync_duration_seconds_bucket\{kind="file",le="0.005"\} (\S+)$/m),
  };
}

function fsyncWaitBetween(before: Awaited<ReturnType<typeof scrapeFileFsyncs>>, after: Awaited<ReturnType<typeof scrapeFileFsyncs>>): FsyncWait | undefined {
  const count = after.count - before.count;
  if (count <= 0) return undefined;
  return {
    meanMs: ((after.sumS - before.sumS) * 1000) / count,
    count,
    over2500usPct: (100 * (count - (after.le2500us - before.le2500us))) / count,
    over5msPct: (100 * (count - (after.le5ms - before.le5ms))) / count,
  };
}

const END_TXN_PHASES_FAMILY = "bunka_txn_end_phase_duration_seconds";

/** The mean of each EndTxn step between two scrapes of bunka's /metrics (steps that did not run are left out). */
function endTxnStepMeans(
  before: Map<string, { sumS: number; count: number }>,
  after: Map<string, { sumS: number; count: number }>,
): { phase: string; meanMs: number }[] {
  const means: { phase: string; meanMs: number }[] = [];
  for (const [labels, total] of after) {
    const earlier = before.get(labels) ?? { sumS: 0, count: 0 };
    const count = total.count - earlier.count;
    const phase = labels.match(/phase="([^"]+)"/)?.[1];
    if (phase !== undefined && count > 0) means.push({ phase, meanMs: ((total.sumS - earlier.sumS) * 1000) / count });
  }
  return means;
}
interface Failed {
  ok: false;
  error: string;
  peakRssKb?: number;
}
type Outcome = Ok | Failed;

const kIds = (n: number) => (n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : fmtNum(n));

function scenariosFor(opts: Options, ids: number[]): { groups: Scenario[][] } {
  const a: Scenario = { id: "a", title: "(a) 1 producer + read_committed consumer", producers: 1, consumer: true };
  const b: Scenario = { id: "b", title: `(b) ${opts.producers} producers + read_committed consumer`, producers: opts.producers, consumer: true };
  // The broker warm-up of the (c) group leaves its producers' ids (bench-store-0 ..) in the store.
  const first = 1 + (opts.brokerWarmupS > 0 ? opts.producers : 0);
  const c: Scenario[] = [first, ...ids.filter((n) => n > first)].map((n, i) => ({
    id: `c${i}` as ScenarioId,
    title: `(c) 1 producer, ${kIds(n)} transactional id${n === 1 ? "" : "s"} in the store`,
    producers: 1,
    consumer: false,
    ids: n,
  }));
  const groups = [[a, b].filter((x) => opts.scenarios.has(x.id as "a" | "b")), opts.scenarios.has("c") ? c : []];
  return { groups: groups.filter((g) => g.length > 0) };
}

async function runScenario(broker: Broker, s: Scenario, opts: Options, idsInStore: { n: number }, idlePids: number[] = []): Promise<Outcome> {
  const watch = watchPeakRss(broker.pid);
  // The kernel's threads complete the brokers' fsyncs: measured apart, not taken for load from outside.
  const cpu = watchCpu(broker.pid, { kernelApart: true, ...(idlePids.length > 0 ? { idlePids } : {}) });
  let precreate: Precreate | undefined;
  if (s.ids !== undefined && s.ids > idsInStore.n) {
    // The measuring producer's id is one of the store's ids: create the others.
    log(`  creating transactional ids ${idsInStore.n} .. ${s.ids - 1} (InitProducerId, raw frames) ...`);
    precreate = await precreateIds(broker, idsInStore.n - 1, s.ids - 1, opts.precreateTimeoutS * 1000);
    idsInStore.n += precreate.created;
    const rate = precreate.created / (precreate.ms / 1000);
    const retried = [...precreate.retried].map(([name, n]) => `${n} ${name}`).join(", ");
    log(`  created ${fmtNum(precreate.created)} ids in ${(precreate.ms / 1000).toFixed(1)} s (${fmtNum(rate)}/s, ${precreate.retries} retries${retried ? `: ${retried}` : ""})`);
    if (precreate.error) return { ok: false, error: `creating ids: ${precreate.error} (${fmtNum(idsInStore.n)} of ${fmtNum(s.ids)} in the store)`, peakRssKb: watch.stop() };
  }
  const consumer = s.consumer;
  const warmupS = s.warmupS ?? (s.ids === undefined ? opts.warmupS : ENDTXN_WARMUP_S);
  const durationS = s.durationS ?? (s.ids === undefined ? opts.durationS : opts.endTxnDurationS);
  const args = [
    "--bootstrap", broker.bootstrap,
    "--topic", TOPIC,
    "--partitions", String(PARTITIONS),
    "--producers", String(s.producers),
    "--duration", String(durationS),
    "--warmup", String(warmupS),
    "--records-per-txn", String(RECORDS_PER_TXN),
    "--record-size", String(RECORD_SIZE),
    "--id-prefix", s.idPrefix ?? (s.ids === undefined ? `bench-txn-${s.id}` : "bench-endtxn"),
    "--drain-timeout", String(DRAIN_TIMEOUT_S),
    ...(consumer ? ["--consumer"] : []),
    ...(s.id === "b" && opts.txnRate !== undefined ? ["--txn-rate", String(opts.txnRate)] : []),
    ...toolConfigArgs(broker, "--client-config"),
  ];
  const timeoutMs = (warmupS + durationS + DRAIN_TIMEOUT_S + 90) * 1000;
  const stepsBefore = broker.metricsUrl === undefined ? undefined : await scrapeHistogramTotals(broker.metricsUrl, END_TXN_PHASES_FAMILY);
  const fsyncsBefore = broker.metricsUrl === undefined ? undefined : await scrapeFileFsyncs(broker.metricsUrl);
  const run = await runLoadTool(args, `${broker.kind} ${s.id}`, timeoutMs);
  const peakRssKb = watch.stop();
  const cpuReport = cpu.stop(run.cpuMicros);
  const endTxnStepsMs =
    stepsBefore === undefined || broker.metricsUrl === undefined
      ? undefined
      : endTxnStepMeans(stepsBefore, await scrapeHistogramTotals(broker.metricsUrl, END_TXN_PHASES_FAMILY));
  const fsyncWait =
    fsyncsBefore === undefined || broker.metricsUrl === undefined ? undefined : fsyncWaitBetween(fsyncsBefore, await scrapeFileFsyncs(broker.metricsUrl));
  const r = run.result;
  const stderrHint = () => {
    const e = firstStderrError(run);
    return e ? `; client log: ${e}` : "";
  };
  if (run.timedOut) return { ok: false, error: `the load tool timed out after ${timeoutMs / 1000} s${stderrHint()}`, peakRssKb };
  if (!r) return { ok: false, error: `the load tool printed no result (exit ${run.code})${stderrHint()}`, peakRssKb };
  if (r.errors > 0 || r.producersInitialized < r.producers) {
    return { ok: false, error: `client error (${r.errors} thread(s) failed, ${r.committedTotal} transactions committed before): ${r.firstError}${stderrHint()}`, peakRssKb };
  }
  if (r.committedMeasured === 0) return { ok: false, error: `no transaction committed in the measured window${stderrHint()}`, peakRssKb };
  if (consumer) {
    const expected = r.committedTotal * RECORDS_PER_TXN;
    if (r.consumedLastRecords !== r.committedTotal || r.consumedRecords !== expected) {
      return {
        ok: false,
        error:
          `read_committed check failed: ${r.committedTotal} transactions committed (${expected} records), the consumer read ` +
          `${r.consumedRecords} records and the last record of ${r.consumedLastRecords} transactions (drained ${r.drainMs} ms)`,
        peakRssKb,
      };
    }
  }
  return { ok: true, r, peakRssKb, cpu: cpuReport, precreate, ...(endTxnStepsMs === undefined ? {} : { endTxnStepsMs }), ...(fsyncWait === undefined ? {} : { fsyncWait }) };
}

/**
 * Starts a broker and makes it ready for rows: the APIs the load needs, the transaction version (set with
 * --kafka-txn-version), the topic, and --broker-warmup s of untimed load (Apache Kafka's JVM takes a minute
 * to reach full speed; bunka's JavaScriptCore a few seconds). `isC`: the (c) group, whose warm-up ids
 * (bench-store-0 ..) stay in its store as the first of its ids. On failure the broker is stopped again.
 */
async function prepareBroker(
  kind: BrokerVariant,
  opts: Options,
  bunkaBinary: string | Error | undefined,
  isC: boolean,
): Promise<{ broker: Broker; txnVersion: string } | { error: string }> {
  const started = await startVariant(kind, bunkaBinary, opts.dataRoot, benchTls === undefined ? {} : { tls: benchTls });
  if ("error" in started) return started;
  const broker = started;
  const fail = async (error: string) => {
    log(`${kind}: ${error}`);
    log(`${kind}: stopping the broker`);
    await broker.stop();
    return { error };
  };
  const missing = NEEDED.filter(([k]) => !broker.apis.has(k)).map(([k, n]) => `${n}(${k})`);
  if (missing.length > 0) return fail(`not supported (ApiVersions lacks ${missing.join(", ")})`);
  let txnVersion: string;
  if (kindOf(kind) === "kafka" && opts.kafkaTxnVersion !== undefined) {
    try {
      txnVersion = `${await setKafkaTxnVersion(broker, opts.kafkaTxnVersion)} (--kafka-txn-version)`;
    } catch (e) {
      return fail((e as Error).message);
    }
  } else {
    txnVersion = await transactionVersion(broker).catch((e: Error) => `transaction.version unknown (${e.message})`);
  }
  try {
    await createTopicWithTool(broker, TOPIC, PARTITIONS);
  } catch (e) {
    return fail((e as Error).message);
  }
  if (opts.brokerWarmupS > 0) {
    const w: Scenario = {
      id: "w" as ScenarioId,
      title: "broker warm-up",
      producers: opts.producers,
      consumer: true,
      warmupS: 0,
      durationS: opts.brokerWarmupS,
      idPrefix: isC ? "bench-store" : "bench-txn-b",
    };
    log(`-- ${kind} broker warm-up: ${opts.producers} producers + read_committed consumer for ${opts.brokerWarmupS} s (not measured)`);
    const warm = await runScenario(broker, w, opts, { n: 0 }).catch((e: Error) => ({ ok: false as const, error: e.message }));
    if (!warm.ok) {
      return fail(`broker warm-up failed: ${warm.error}${broker.alive() ? "" : ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`}`);
    }
    log(`${kind} warm-up: ${fmtNum(warm.r.txnPerSec)} txn/s; the consumer read all ${fmtNum(warm.r.consumedRecords ?? 0)} committed records`);
  }
  return { broker, txnVersion };
}

/** Runs one row, turning a thrown error into a failed outcome that says whether the broker died. */
async function runRow(broker: Broker, s: Scenario, opts: Options, idsInStore: { n: number }, idlePids: number[] = []): Promise<Outcome> {
  return runGuardedRow(broker, () => runScenario(broker, s, opts, idsInStore, idlePids));
}

function rowLog(kind: BrokerVariant, s: Scenario, outcome: Outcome, startedMs: number): string {
  return outcome.ok
    ? `${kind} ${s.id}: ${fmtNum(outcome.r.txnPerSec)} txn/s, EndTxn p50/p99 ${fmtMs(outcome.r.commitMs.p50)} / ${fmtMs(outcome.r.commitMs.p99)} ms` +
        (outcome.r.visibleMs ? `, visible p50/p99 ${fmtMs(outcome.r.visibleMs.p50)} / ${fmtMs(outcome.r.visibleMs.p99)} ms` : "") +
        `, peak RSS ${fmtRss(outcome.peakRssKb)} (${((Date.now() - startedMs) / 1000).toFixed(1)} s)`
    : `${kind} ${s.id}: ${outcome.error}`;
}

async function runBroker(kind: BrokerVariant, opts: Options, bunkaBinary: string | Error | undefined): Promise<{ results: Map<ScenarioId, Outcome>; scenarios: Scenario[]; txnVersion?: string }> {
  const ids = kindOf(kind) === "kafka" ? (opts.kafkaIds ?? opts.ids) : opts.ids;
  const { groups } = scenariosFor(opts, ids);
  const results = new Map<ScenarioId, Outcome>();
  let txnVersion: string | undefined;
  for (const group of groups) {
    if (isInterrupted()) break;
    const isC = group[0]!.ids !== undefined;
    log(`\n== ${kind}: starting a fresh broker for ${group.map((s) => `(${s.id})`).join(" ")}`);
    const prepared = await prepareBroker(kind, opts, bunkaBinary, isC);
    if ("error" in prepared) {
      for (const s of group) results.set(s.id, { ok: false, error: prepared.error });
      continue;
    }
    const { broker } = prepared;
    txnVersion ??= prepared.txnVersion;
    try {
      const idsInStore = { n: isC && opts.brokerWarmupS > 0 ? 1 + opts.producers : 1 };
      for (const s of group) {
        if (isInterrupted()) break;
        log(`-- ${kind} ${s.title}`);
        const started = Date.now();
        const outcome = await runRow(broker, s, opts, idsInStore);
        if (isInterrupted()) break;
        results.set(s.id, outcome);
        log(rowLog(kind, s, outcome, started));
        // (c) rows build on each other: stop at the first that could not create its ids.
        if (!outcome.ok && s.ids !== undefined && idsInStore.n < s.ids) {
          for (const rest of group.slice(group.indexOf(s) + 1)) results.set(rest.id, { ok: false, error: `not run: (${s.id}) could not create its ids` });
          break;
        }
      }
    } finally {
      log(`${kind}: stopping the broker`);
      await broker.stop();
    }
  }
  return { results, scenarios: groups.flat(), txnVersion };
}

/** One round of one scenario: every broker's outcome, and the order they ran in. */
interface RoundResult {
  round: number;
  order: BrokerVariant[];
  outcomes: Partial<Record<BrokerVariant, Outcome>>;
}

/**
 * Interleaved mode (--rounds): every broker started once and warmed up, then every round runs each scenario
 * on each broker, in the order given in odd rounds and reversed in even ones, so that a drift of the
 * machine's speed hits both ends of each ratio alike. The idle brokers stay up meanwhile (their CPU is
 * reported apart from other processes').
 */
async function runInterleaved(
  variants: BrokerVariant[],
  opts: Options,
  bunkaBinary: string | Error | undefined,
): Promise<{ results: Map<ScenarioId, RoundResult[]>; scenarios: Scenario[]; txnVersions: Partial<Record<BrokerVariant, string>>; error?: string }> {
  const scenarios = scenariosFor(opts, opts.ids).groups.flat();
  const results = new Map<ScenarioId, RoundResult[]>(scenarios.map((s) => [s.id, []]));
  const txnVersions: Partial<Record<BrokerVariant, string>> = {};
  const brokers = new Map<BrokerVariant, Broker>();
  try {
    for (const kind of variants) {
      log(`\n== ${kind}: starting a broker for ${opts.rounds} interleaved rounds of ${scenarios.map((s) => `(${s.id})`).join(" ")}`);
      const prepared = await prepareBroker(kind, opts, bunkaBinary, false);
      if ("error" in prepared) return { results, scenarios, txnVersions, error: `${kind}: ${prepared.error}` };
      brokers.set(kind, prepared.broker);
      txnVersions[kind] = prepared.txnVersion;
    }
    for (let round = 1; round <= opts.rounds!; round++) {
      const order = roundOrder(variants, round);
      for (const s of scenarios) {
        const outcomes: Partial<Record<BrokerVariant, Outcome>> = {};
        for (const kind of order) {
          if (isInterrupted()) return { results, scenarios, txnVersions };
          log(`-- round ${round}/${opts.rounds}: ${kind} ${s.title}`);
          const started = Date.now();
          const broker = brokers.get(kind)!;
          const idlePids = [...brokers.values()].filter((b) => b !== broker).map((b) => b.pid);
          outcomes[kind] = await runRow(broker, s, opts, { n: 1 }, idlePids);
          log(rowLog(kind, s, outcomes[kind]!, started));
        }
        results.get(s.id)!.push({ round, order, outcomes });
      }
    }
    return { results, scenarios, txnVersions };
  } finally {
    for (const [kind, broker] of brokers) {
      log(`${kind}: stopping the broker`);
      await broker.stop();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function fmtMs(ms: number | undefined): string {
  if (ms === undefined) return "?";
  if (ms < 10) return ms.toFixed(2);
  if (ms < 100) return ms.toFixed(1);
  return ms.toFixed(0);
}

const busy = (o: Outcome | undefined) => (o?.ok && o.cpu.otherPct >= BUSY_PCT ? " *" : "");

type Measure = { name: string; of: (o: Ok) => number | undefined; fmt: (n: number) => string; consumerOnly?: boolean };
const MEASURES: Measure[] = [
  { name: "txn/s", of: (o) => o.r.txnPerSec, fmt: fmtNum },
  { name: "EndTxn p50 ms", of: (o) => o.r.commitMs.p50, fmt: fmtMs },
  { name: "EndTxn p99 ms", of: (o) => o.r.commitMs.p99, fmt: fmtMs },
  { name: "visible p50 ms", of: (o) => o.r.visibleMs?.p50, fmt: fmtMs, consumerOnly: true },
  { name: "visible p99 ms", of: (o) => o.r.visibleMs?.p99, fmt: fmtMs, consumerOnly: true },
  { name: "broker peak RSS MiB", of: (o) => (o.peakRssKb === undefined ? undefined : o.peakRssKb / 1024), fmt: (n) => n.toFixed(0) },
];

/** What an acknowledgement of each variant is worth, in a table cell. */
const ACK_IS: Record<BrokerVariant, string> = {
  kafka: "in the page cache, not fsynced",
  "kafka-flush": "fsynced (every append)",
  bunka: "fsynced (group commit)",
};

/** The durability line of each variant, for the report's header lines. */
function durabilityLine(v: BrokerVariant): string {
  switch (v) {
    case "bunka":
      return (
        "durability, bunka: fsyncs before it answers each step: the coordinator's journal for AddPartitionsToTxn and for EndTxn (answered once " +
        "Prepare* is durable), the segment for Produce acks=all (group commit; with its default fsync.mode=batched fsyncs requested together " +
        "share one syncfs); the markers and Complete* are fsynced after the EndTxn answer, and the producer's next request about its id waits for them"
      );
    case "kafka":
      return (
        "durability, Kafka: default flush settings (log.flush.interval.messages, log.flush.interval.ms: never): nothing is fsynced before an answer; " +
        "EndTxn is answered once PrepareCommit is appended to __transaction_state (page cache), the markers and CompleteCommit are written after the answer " +
        "(Apache Kafka relies on replication; here there is one replica)"
      );
    case "kafka-flush":
      return (
        `durability, Kafka (fsync per batch): ${Object.entries(KAFKA_FLUSH_PROPERTIES).map(([k, val]) => `${k}=${val}`).join(", ")}, otherwise the same broker: ` +
        "the Produce batches and the __transaction_state records (PrepareCommit before EndTxn is answered) are fsynced before their answers, the markers " +
        `and CompleteCommit after the EndTxn answer, each fsynced; found in Apache Kafka's source: ${KAFKA_FLUSH_FINDING}`
      );
  }
}

/** The title of a scenario row: (c) rows are matched by position, and their id counts may differ per broker (--kafka-ids). */
function rowTitle(id: ScenarioId, scenariosOf: Partial<Record<BrokerVariant, Scenario[]>>): string {
  const of = (v: BrokerVariant) => scenariosOf[v]?.find((s) => s.id === id);
  const main = of("bunka") ?? of("kafka") ?? of("kafka-flush");
  const kafka = of("kafka") ?? of("kafka-flush");
  if (main?.ids !== undefined && kafka?.ids !== undefined && main !== kafka && main.ids !== kafka.ids) {
    return `(c) 1 producer, ${kIds(main.ids)} ids in the store (Kafka: ${kIds(kafka.ids)})`;
  }
  return main!.title;
}

/**
 * The report's tables: per scenario and measure each broker's median over the rounds (the value, with one)
 * and its range, and bunka's median over each other broker's; with more than one round, every round too.
 */
function buildTables(
  variants: BrokerVariant[],
  ids: ScenarioId[],
  scenariosOf: Partial<Record<BrokerVariant, Scenario[]>>,
  results: Map<ScenarioId, RoundResult[]>,
) {
  const others = variants.includes("bunka") ? variants.filter((v) => v !== "bunka") : [];
  const header = ["scenario", "measure", ...variants.map((v) => `${label(v)}${results.get(ids[0]!)!.length > 1 ? " median (range)" : ""}`), ...others.map((v) => `bunka/${label(v)}`)];
  const rows: string[][] = [["every row", "an acknowledged step is", ...variants.map((v) => ACK_IS[v]), ...others.map(() => "")]];
  const roundsHeader = ["scenario", "round", "order", ...variants.map((v) => `${label(v)} txn/s, EndTxn p50/p99 ms`)];
  const roundRows: string[][] = [];
  /** scenario -> variant -> median, for the targets. */
  const medians = new Map<ScenarioId, { txnPerSec: Partial<Record<BrokerVariant, number>>; p99: Partial<Record<BrokerVariant, number>> }>();
  for (const id of ids) {
    const rs = results.get(id) ?? [];
    const title = rowTitle(id, scenariosOf);
    const oks = (v: BrokerVariant) => rs.map((r) => r.outcomes[v]).filter((o): o is Ok => o?.ok === true);
    const values = (v: BrokerVariant, m: Measure) => oks(v).map(m.of).filter((x): x is number => x !== undefined && Number.isFinite(x));
    const consumer = variants.some((v) => oks(v).some((o) => o.r.visibleMs !== undefined));
    for (const m of MEASURES) {
      if (m.consumerOnly && !consumer) continue;
      const ratios = others.map((v) => {
        const b = median(values("bunka", m));
        const o = median(values(v, m));
        return b === undefined || o === undefined || o === 0 ? "—" : (b / o).toFixed(2);
      });
      rows.push([title, m.name, ...variants.map((v) => medianSpread(values(v, m), m.fmt) + (rs.length === 1 ? busy(rs[0]!.outcomes[v]) : "")), ...ratios]);
    }
    const byVariant = (m: Measure) => Object.fromEntries(variants.map((v) => [v, median(values(v, m))])) as Partial<Record<BrokerVariant, number>>;
    medians.set(id, { txnPerSec: byVariant(MEASURES[0]!), p99: byVariant(MEASURES[2]!) });
    if (rs.length > 1) {
      for (const r of rs) {
        roundRows.push([
          title,
          String(r.round),
          r.order.map(label).join(", "),
          ...variants.map((v) => {
            const o = r.outcomes[v];
            if (!o) return "not run";
            if (!o.ok) return "error";
            return `${fmtNum(o.r.txnPerSec)}, ${fmtMs(o.r.commitMs.p50)} / ${fmtMs(o.r.commitMs.p99)}${busy(o)}`;
          }),
        ]);
      }
    }
  }
  return { header, rows, roundsHeader, roundRows, medians };
}

function detailOf(kind: BrokerVariant, s: Scenario, o: Ok): string {
  const r = o.r;
  const parts: string[] = [];
  parts.push(`${fmtNum(r.committedMeasured)} transactions in ${r.windowS.toFixed(1)} s (${fmtNum(r.committedTotal)} with the warm-up)`);
  parts.push(`EndTxn p90 ${fmtMs(r.commitMs.p90)}, p99.9 ${fmtMs(r.commitMs.p999)}, max ${fmtMs(r.commitMs.max)} ms`);
  parts.push(`flush (the 10 records' Produce) p50/p99 ${fmtMs(r.flushMs.p50)} / ${fmtMs(r.flushMs.p99)} ms`);
  if (r.visibleMs) {
    parts.push(`visible p90 ${fmtMs(r.visibleMs.p90)}, max ${fmtMs(r.visibleMs.max)} ms; the consumer read all ${fmtNum(r.consumedRecords ?? 0)} committed records`);
  }
  parts.push(`initTransactions ${fmtMs(r.initMs)} ms`);
  if (o.endTxnStepsMs !== undefined && o.endTxnStepsMs.length > 0) {
    const steps = o.endTxnStepsMs.map((step) => `${step.phase} ${fmtMs(step.meanMs)}`).join(", ");
    parts.push(`EndTxn steps in the broker (mean over the row, warm-up included, /metrics): ${steps} ms`);
  }
  if (o.fsyncWait !== undefined) {
    const w = o.fsyncWait;
    parts.push(
      `a data file's fsync waited ${fmtMs(w.meanMs)} ms on average, ${w.over2500usPct.toFixed(1)}% of them over 2.5 ms and ${w.over5msPct.toFixed(1)}% over 5 ms (${fmtNum(w.count)} fsyncs, warm-up included, /metrics)`,
    );
  }
  if (o.precreate) {
    const retried = [...o.precreate.retried].map(([name, n]) => `${fmtNum(n)} ${name}`).join(", ");
    parts.push(
      `${fmtNum(o.precreate.created)} ids created first in ${(o.precreate.ms / 1000).toFixed(1)} s ` +
        `(${fmtNum(o.precreate.created / (o.precreate.ms / 1000))} InitProducerId/s${retried ? `; retried: ${retried}` : ""})`,
    );
  }
  const warn = o.cpu.otherPct >= BUSY_PCT ? ` — WARNING: other processes used ${o.cpu.otherPct.toFixed(0)}% of the machine, numbers are skewed` : "";
  const idle = o.cpu.idleS !== undefined ? `, the idle brokers ${o.cpu.idleS.toFixed(1)} s` : "";
  parts.push(
    `CPU: broker ${o.cpu.brokerS.toFixed(1)} s, tool ${o.cpu.toolS.toFixed(1)} s${o.precreate ? `, id creation (this script) ${o.cpu.selfS.toFixed(1)} s` : ""}${idle}, ` +
      `kernel threads and interrupts ${(o.cpu.kernelPct ?? 0).toFixed(0)}% and other processes ${o.cpu.otherPct.toFixed(0)}% of the machine${warn}`,
  );
  return `${s.title.slice(0, 3)}${s.ids !== undefined ? ` ${kIds(s.ids)} ids` : ""} ${label(kind)}: ${parts.join("; ")}`;
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const variants = variantsOf(opts.only, opts.kafkaFlush);
  toolClasses = await compileJavaTool("TxnBench");
  const javacVersion = (await capture([javaBin().replace(/java$/, "javac"), "-version"])).trim();
  const env = await environment(opts.dataRoot);
  if (opts.tls) benchTls = setUpBenchTls();

  let bunkaBinary: string | Error | undefined;
  if (variants.includes("bunka")) {
    try {
      bunkaBinary = opts.bunkaBinary ?? (await ensureBunkaBinary());
    } catch (e) {
      bunkaBinary = e as Error;
    }
  }

  const errors: string[] = [];
  const details: string[] = [];
  // Both modes end in the same shape: per scenario, the rounds (one without --rounds) of every broker.
  let results: Map<ScenarioId, RoundResult[]>;
  const scenariosOf: Partial<Record<BrokerVariant, Scenario[]>> = {};
  const txnVersions: Partial<Record<BrokerVariant, string>> = {};
  if (opts.rounds !== undefined) {
    const inter = await runInterleaved(variants, opts, bunkaBinary);
    if (isInterrupted()) return 130;
    if (inter.error !== undefined) errors.push(inter.error);
    results = inter.results;
    for (const v of variants) scenariosOf[v] = inter.scenarios;
    Object.assign(txnVersions, inter.txnVersions);
  } else {
    results = new Map();
    for (const kind of variants) {
      if (isInterrupted()) break;
      const run = await runBroker(kind, opts, bunkaBinary);
      scenariosOf[kind] = run.scenarios;
      if (run.txnVersion !== undefined) txnVersions[kind] = run.txnVersion;
      for (const s of run.scenarios) {
        if (!results.has(s.id)) results.set(s.id, [{ round: 1, order: variants, outcomes: {} }]);
        const o = run.results.get(s.id);
        if (o) results.get(s.id)![0]!.outcomes[kind] = o;
      }
    }
    if (isInterrupted()) return 130;
  }
  const ids = [...results.keys()];
  for (const id of ids) {
    for (const r of results.get(id)!) {
      for (const kind of variants) {
        const o = r.outcomes[kind];
        const s = scenariosOf[kind]?.find((x) => x.id === id);
        if (!o || !s) continue;
        const where = opts.rounds !== undefined ? `round ${r.round} ` : "";
        if (!o.ok) errors.push(`${where}${s.title.slice(0, 3)}${s.ids !== undefined ? ` ${kIds(s.ids)} ids` : ""} ${label(kind)}: ${o.error}`);
        else details.push(`${where}${detailOf(kind, s, o)}`);
      }
    }
  }
  const tables = ids.length > 0 ? buildTables(variants, ids, scenariosOf, results) : undefined;
  const outcomes = [...results.values()].flat().flatMap((r) => Object.values(r.outcomes));
  const versions = variants.map((k) => `${label(k)}: ${txnVersions[k] ?? "?"}`).join(", ");

  // The goal, per scenario, against each Apache Kafka broker: bunka at 2x its txn/s or more, and a lower EndTxn p99.
  const targets: string[] = [];
  for (const [id, m] of tables?.medians ?? []) {
    if (id !== "a" && id !== "b") continue;
    for (const v of variants.filter((x) => x !== "bunka")) {
      const [bt, kt, bp, kp] = [m.txnPerSec.bunka, m.txnPerSec[v], m.p99.bunka, m.p99[v]];
      if (bt === undefined || kt === undefined || bp === undefined || kp === undefined) continue;
      const r = bt / kt;
      targets.push(`(${id}) vs ${label(v)}: txn/s ${r.toFixed(2)}x ${r >= 2 ? "≥" : "<"} 2x; EndTxn p99 ${fmtMs(bp)} vs ${fmtMs(kp)} ms ${bp < kp ? "below" : "NOT below"}`);
    }
  }
  const elapsedS = Math.round((Date.now() - t0) / 1000);

  const firstIds = 1 + (opts.brokerWarmupS > 0 ? opts.producers : 0);
  const kafkaIds = opts.kafkaIds && variants.some((v) => kindOf(v) === "kafka") ? ` (Apache Kafka: ${opts.kafkaIds.map(kIds).join(", ")})` : "";
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s; load average ${loadAverages()} at the end)`,
    `machine: ${env.machine}`,
    `CPUs: ${env.sharing}`,
    `brokers: ${env.kafka}${variants.includes("kafka-flush") ? `, and the same with ${Object.entries(KAFKA_FLUSH_PROPERTIES).map(([k, v]) => `${k}=${v}`).join(" ")} for "Kafka (fsync per batch)"` : ""}; ` +
      `${opts.bunkaBinary ? env.bunka.replace(/\(dist\/bunka-linux-x64\), commit/, `(--bunka-binary ${opts.bunkaBinary}; the work tree is at commit`).replace(/$/, ")") : env.bunka}; ${env.runtime}`,
    ...variants.map(durabilityLine),
    ...(benchTls === undefined ? [] : [tlsLine(benchTls)]),
    `load: scripts/bench-java/TxnBench.java on the Apache Kafka ${KAFKA_VERSION} Java client (${javacVersion}, ${LOAD_TOOL_JVM.join(" ")}, on the same machine); ` +
      `flags: --broker-warmup ${opts.brokerWarmupS} --duration ${opts.durationS} --warmup ${opts.warmupS} --producers ${opts.producers} --endtxn-duration ${opts.endTxnDurationS} ` +
      `--ids ${opts.ids.join(",")}${opts.kafkaIds ? ` --kafka-ids ${opts.kafkaIds.join(",")}` : ""}` +
      `${opts.kafkaTxnVersion ? ` --kafka-txn-version ${opts.kafkaTxnVersion}` : ""}` +
      `${opts.scenarios.size < 3 ? ` --scenarios ${[...opts.scenarios].sort().join(",")}` : ""}` +
      `${opts.rounds !== undefined ? ` --rounds ${opts.rounds}` : ""}${opts.kafkaFlush ? " --kafka-flush" : ""}${opts.only ? ` --only ${opts.only}` : ""}${opts.tls ? " --tls" : ""}${opts.txnRate !== undefined ? ` --txn-rate ${opts.txnRate}` : ""}`,
    `transaction: beginTransaction, ${RECORDS_PER_TXN} x send(${RECORD_SIZE} B) each to another of ${PARTITIONS} partitions, flush, commitTransaction; ` +
      "one transactional.id per producer thread; Java producer defaults otherwise (acks=all, idempotence, linger.ms=5, max.in.flight=5)" +
      (opts.txnRate === undefined
        ? "; each producer starts its next transaction once the last committed (a closed loop)"
        : `; (b) offers ${opts.txnRate} transactions/s in all, each producer on a fixed schedule (an open loop: the brokers' latencies at the same load)`),
    `transaction protocol: ${versions} (at 2 the Java client sends no AddPartitionsToTxn, the broker adds partitions on Produce, EndTxn v5 bumps the epoch)`,
    "EndTxn = the commitTransaction() call (after flush(), so it is the EndTxn round trip); visible = from that call until a " +
      "read_committed consumer (same JVM, all partitions assigned) polls the transaction's last record; txn/s counts commits inside the measured window",
    ...(opts.scenarios.has("c")
      ? [
          `(c): ${ENDTXN_WARMUP_S} s warm-up + ${opts.endTxnDurationS} s per row, no consumer; the ids are created between rows with raw InitProducerId ` +
            `frames (${PRECREATE_CONNECTIONS} connections x ${PRECREATE_IN_FLIGHT} in flight), ${[firstIds, ...opts.ids].map(kIds).join(" / ")} ids in the store` +
            `${kafkaIds}${opts.brokerWarmupS > 0 ? ` (the first: the measuring producer's id and the ${opts.producers} of the warm-up)` : ""}`,
        ]
      : []),
    opts.brokerWarmupS > 0
      ? `warm-up: each freshly started broker first gets ${opts.brokerWarmupS} s of untimed load (${opts.producers} producers + the consumer), ` +
        "so that the brokers' JIT is warm (Apache Kafka's JVM needs about a minute to reach full speed)"
      : "no broker warm-up (--broker-warmup 0): Apache Kafka's first rows run on a cold JVM",
    "peak RSS = the broker process's VmHWM / max VmRSS during the row (the JVM for Apache Kafka; for (c), id creation included)",
    `bunka/X = bunka's value (median) / X's (above 1: more for bunka — better for txn/s, worse for latency and RSS)`,
  ];
  if (opts.rounds !== undefined) {
    meta.push(
      `interleaved (--rounds ${opts.rounds}): every broker started once, warmed up, and kept running; each round runs every scenario on each, ` +
        `in the order ${variants.map(label).join(", ")} in odd rounds and reversed in even ones; a cell is the median over the rounds with the range (min–max), ` +
        "a ratio the ratio of the medians; the idle brokers' CPU is measured apart from other processes'",
    );
  } else if (variants.length > 1) {
    meta.push(`one after the other: ${variants.map(label).join(", then ")}, each scenario group on a freshly started broker`);
  }
  if (outcomes.some((o) => o.ok && o.cpu.otherPct >= BUSY_PCT)) {
    meta.push(`* = other processes used ${BUSY_PCT}% or more of the machine during that row: the number is skewed, run again on a quiet machine`);
  }
  if (targets.length) meta.push(`target: bunka ≥ 2x Apache Kafka's txn/s and EndTxn p99 below Kafka's — ${targets.join("; ")}`);
  process.stdout.write(
    renderReport({
      title: `Transactions benchmark: ${variants.map(label).join(" vs ")}${benchTls === undefined ? "" : " (over TLS)"}`,
      date: env.date,
      headingLevel: 3,
      kinds: variants,
      meta,
      header: tables?.header ?? ["scenario"],
      rows: tables?.rows ?? [],
      ...(tables && tables.roundRows.length > 0 ? { tables: [{ caption: "Every round (order = which broker ran the row first):", header: tables.roundsHeader, rows: tables.roundRows }] } : {}),
      errors,
      details,
    }),
  );
  return errors.length > 0 ? 1 : 0;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  log(`bench-transactions: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  if (!isInterrupted()) await runCleanups(false);
}
if (!isInterrupted()) process.exit(code);
