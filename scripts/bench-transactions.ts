#!/usr/bin/env bun
/**
 * Transactions benchmark: Apache Kafka against bunka, on the same machine, one after the other (or with
 * --rounds both at once, in alternating rounds), with the same load tool for both:
 * scripts/bench-java/TxnBench.java (Apache Kafka's own Java producer and consumer, 4.1.1), compiled here with
 * javac into .cache/bench-java/ against the jars of tests/support/apache-kafka.ts. Not a test; see
 * docs/benchmarks.md ("Transactions").
 *
 *   bun scripts/bench-transactions.ts [--only kafka|bunka] [--duration S] [--warmup S] [--producers N]
 *                                     [--endtxn-duration S] [--ids 10000,100000] [--kafka-ids LIST]
 *                                     [--precreate-timeout S] [--broker-warmup S] [--scenarios a,b,c]
 *                                     [--kafka-txn-version 1|2] [--data-root DIR] [--bunka-binary PATH]
 *                                     [--rounds N]
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
 * Checks: the consumer must read exactly 10 records per committed transaction and the last record of every
 * committed transaction (after the producers stop it drains for up to 15 s); any client error fails the row
 * with the client's first error.
 *
 * Progress goes to stderr; the results (a text table, then the same in markdown for docs/benchmarks.md) go to
 * stdout. Brokers, tools and temp dirs are removed at the end, on an error and on Ctrl-C.
 */
import { existsSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { resolve } from "node:path";
import { javaBin, KAFKA_VERSION } from "../tests/support/apache-kafka.ts";
import { WireClient } from "../tests/support/wire-client.ts";
import { ErrorCode } from "../src/errors/generated/error-codes.ts";
import {
  type Broker,
  type BrokerKind,
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
  label,
  log,
  median,
  ratio,
  renderReport,
  runCleanups,
  runJavaTool,
  scrapeHistogramTotals,
  sleep,
  startBrokerForRows,
  startBunkaBroker,
  startKafkaBroker,
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
  /** Interleaved mode: both brokers up at once, every scenario run this many times on each, alternating. */
  rounds?: number;
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
       [--bunka-binary PATH] [--rounds N]

  --only B               run one broker only (kafka or bunka)
  --duration S           (a), (b): seconds measured (default 20)
  --warmup S             (a), (b): seconds of transactions before the measurement (default 10; the load tool's
                         own JVM is new for every row and needs them)
  --producers N          (b): concurrent transactional producers (default 16)
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
  --rounds N             interleaved: start both brokers once (each warmed up), then N rounds, each running
                         every scenario on both, the order alternating from round to round; reports every
                         round and the medians (with --scenarios a, b or a,b). This machine's speed drifts
                         by ±20% within minutes: a ratio of two rows run side by side is steadier than one of
                         two runs minutes apart
`;

function parseArgs(argv: string[]): Options {
  const o: Options = { durationS: 20, warmupS: 10, producers: 16, endTxnDurationS: 10, ids: [10_000, 100_000], precreateTimeoutS: 300, scenarios: new Set(["a", "b", "c"]), brokerWarmupS: 30, dataRoot: tmpdir() };
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
  if (o.rounds !== undefined && (o.only !== undefined || o.scenarios.has("c"))) {
    die("--rounds needs both brokers and runs only (a) and (b): add --scenarios a,b (or one of them)");
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
    args: ["--bootstrap-server", broker.bootstrap, verb, "--feature", `transaction.version=${version}`],
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

async function runScenario(broker: Broker, s: Scenario, opts: Options, idsInStore: { n: number }): Promise<Outcome> {
  const watch = watchPeakRss(broker.pid);
  const cpu = watchCpu(broker.pid);
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
  ];
  const timeoutMs = (warmupS + durationS + DRAIN_TIMEOUT_S + 90) * 1000;
  const stepsBefore = broker.metricsUrl === undefined ? undefined : await scrapeHistogramTotals(broker.metricsUrl, END_TXN_PHASES_FAMILY);
  const run = await runLoadTool(args, `${broker.kind} ${s.id}`, timeoutMs);
  const peakRssKb = watch.stop();
  const cpuReport = cpu.stop(run.cpuMicros);
  const endTxnStepsMs =
    stepsBefore === undefined || broker.metricsUrl === undefined
      ? undefined
      : endTxnStepMeans(stepsBefore, await scrapeHistogramTotals(broker.metricsUrl, END_TXN_PHASES_FAMILY));
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
  return { ok: true, r, peakRssKb, cpu: cpuReport, precreate, ...(endTxnStepsMs === undefined ? {} : { endTxnStepsMs }) };
}

/**
 * Starts a broker and makes it ready for rows: the APIs the load needs, the transaction version (set with
 * --kafka-txn-version), the topic, and --broker-warmup s of untimed load (Apache Kafka's JVM takes a minute
 * to reach full speed; bunka's JavaScriptCore a few seconds). `isC`: the (c) group, whose warm-up ids
 * (bench-store-0 ..) stay in its store as the first of its ids. On failure the broker is stopped again.
 */
async function prepareBroker(
  kind: BrokerKind,
  opts: Options,
  bunkaBinary: string | Error | undefined,
  isC: boolean,
): Promise<{ broker: Broker; txnVersion: string } | { error: string }> {
  const started = await startBrokerForRows(kind, bunkaBinary, (binary) => (kind === "kafka" ? startKafkaBroker(opts.dataRoot) : startBunkaBroker(binary, opts.dataRoot)));
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
  if (kind === "kafka" && opts.kafkaTxnVersion !== undefined) {
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
async function runRow(broker: Broker, s: Scenario, opts: Options, idsInStore: { n: number }): Promise<Outcome> {
  let outcome: Outcome;
  try {
    outcome = await runScenario(broker, s, opts, idsInStore);
  } catch (e) {
    outcome = { ok: false, error: (e as Error).message };
  }
  if (!outcome.ok && !broker.alive()) outcome.error += ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`;
  return outcome;
}

function rowLog(kind: BrokerKind, s: Scenario, outcome: Outcome, startedMs: number): string {
  return outcome.ok
    ? `${kind} ${s.id}: ${fmtNum(outcome.r.txnPerSec)} txn/s, EndTxn p50/p99 ${fmtMs(outcome.r.commitMs.p50)} / ${fmtMs(outcome.r.commitMs.p99)} ms` +
        (outcome.r.visibleMs ? `, visible p50/p99 ${fmtMs(outcome.r.visibleMs.p50)} / ${fmtMs(outcome.r.visibleMs.p99)} ms` : "") +
        `, peak RSS ${fmtRss(outcome.peakRssKb)} (${((Date.now() - startedMs) / 1000).toFixed(1)} s)`
    : `${kind} ${s.id}: ${outcome.error}`;
}

async function runBroker(kind: BrokerKind, opts: Options, bunkaBinary: string | Error | undefined): Promise<{ results: Map<ScenarioId, Outcome>; scenarios: Scenario[]; txnVersion?: string }> {
  const ids = kind === "kafka" ? (opts.kafkaIds ?? opts.ids) : opts.ids;
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

/** One round of one scenario in interleaved mode: both brokers' outcomes. */
interface RoundPair {
  round: number;
  kafka: Outcome;
  bunka: Outcome;
}

/**
 * Interleaved mode (--rounds): both brokers started once and warmed up, then every round runs each scenario
 * on both, Apache Kafka first in odd rounds and bunka first in even ones, so that a drift of the machine's
 * speed hits both sides of each ratio alike. The idle broker stays up meanwhile (its CPU counts as "other").
 */
async function runInterleaved(
  opts: Options,
  bunkaBinary: string | Error | undefined,
): Promise<{ pairs: Map<ScenarioId, RoundPair[]>; scenarios: Scenario[]; txnVersions: Record<BrokerKind, string>; error?: string }> {
  const scenarios = scenariosFor(opts, opts.ids).groups.flat();
  const pairs = new Map<ScenarioId, RoundPair[]>(scenarios.map((s) => [s.id, []]));
  const txnVersions: Record<BrokerKind, string> = { kafka: "?", bunka: "?" };
  const brokers: Partial<Record<BrokerKind, Broker>> = {};
  try {
    for (const kind of ["kafka", "bunka"] as const) {
      log(`\n== ${kind}: starting a broker for ${opts.rounds} interleaved rounds of ${scenarios.map((s) => `(${s.id})`).join(" ")}`);
      const prepared = await prepareBroker(kind, opts, bunkaBinary, false);
      if ("error" in prepared) return { pairs, scenarios, txnVersions, error: `${kind}: ${prepared.error}` };
      brokers[kind] = prepared.broker;
      txnVersions[kind] = prepared.txnVersion;
    }
    for (let round = 1; round <= opts.rounds!; round++) {
      const order: BrokerKind[] = round % 2 === 1 ? ["kafka", "bunka"] : ["bunka", "kafka"];
      for (const s of scenarios) {
        const outcomes: Partial<Record<BrokerKind, Outcome>> = {};
        for (const kind of order) {
          if (isInterrupted()) return { pairs, scenarios, txnVersions };
          log(`-- round ${round}/${opts.rounds}: ${kind} ${s.title}`);
          const started = Date.now();
          outcomes[kind] = await runRow(brokers[kind]!, s, opts, { n: 1 });
          log(rowLog(kind, s, outcomes[kind]!, started));
        }
        pairs.get(s.id)!.push({ round, kafka: outcomes.kafka!, bunka: outcomes.bunka! });
      }
    }
    return { pairs, scenarios, txnVersions };
  } finally {
    for (const kind of ["kafka", "bunka"] as const) {
      if (brokers[kind] === undefined) continue;
      log(`${kind}: stopping the broker`);
      await brokers[kind]!.stop();
    }
  }
}

/**
 * The interleaved report's rows: one per round and scenario, then per scenario the medians of each column
 * (the ratio column: the median of the rounds' ratios, not the ratio of the medians).
 */
function buildInterleavedRows(scenarios: Scenario[], pairs: Map<ScenarioId, RoundPair[]>): { header: string[]; rows: string[][]; medians: Map<ScenarioId, { ratio?: number; kafkaP99?: number; bunkaP99?: number }> } {
  const header = ["scenario", "round", "Kafka txn/s", "bunka txn/s", "ratio", "Kafka EndTxn p50/p99 ms", "bunka EndTxn p50/p99 ms", "p99 ratio", "Kafka peak RSS", "bunka peak RSS"];
  const rows: string[][] = [];
  const medians = new Map<ScenarioId, { ratio?: number; kafkaP99?: number; bunkaP99?: number }>();
  for (const s of scenarios) {
    const done = pairs.get(s.id)!.filter((p): p is RoundPair & { kafka: Ok; bunka: Ok } => p.kafka.ok && p.bunka.ok);
    for (const p of pairs.get(s.id)!) {
      const kc = cells(p.kafka);
      const bc = cells(p.bunka);
      const k = p.kafka.ok ? p.kafka.r : undefined;
      const b = p.bunka.ok ? p.bunka.r : undefined;
      rows.push([s.title, String(p.round), kc.tps, bc.tps, ratio(b?.txnPerSec, k?.txnPerSec), kc.commit, bc.commit, ratio(b?.commitMs.p99, k?.commitMs.p99), kc.rss, bc.rss]);
    }
    const m = (f: (p: RoundPair & { kafka: Ok; bunka: Ok }) => number | undefined) => median(done.map(f).filter((v): v is number => v !== undefined));
    const kafkaTps = m((p) => p.kafka.r.txnPerSec);
    const bunkaTps = m((p) => p.bunka.r.txnPerSec);
    const tpsRatio = m((p) => p.bunka.r.txnPerSec / p.kafka.r.txnPerSec);
    const kafkaP99 = m((p) => p.kafka.r.commitMs.p99);
    const bunkaP99 = m((p) => p.bunka.r.commitMs.p99);
    const p99Ratio = m((p) => (p.bunka.r.commitMs.p99 !== undefined && p.kafka.r.commitMs.p99 !== undefined ? p.bunka.r.commitMs.p99 / p.kafka.r.commitMs.p99 : undefined));
    const p50 = (kind: BrokerKind) => fmtMs(m((p) => p[kind].r.commitMs.p50));
    rows.push([
      s.title,
      `median of ${done.length}`,
      kafkaTps === undefined ? "—" : fmtNum(kafkaTps),
      bunkaTps === undefined ? "—" : fmtNum(bunkaTps),
      tpsRatio === undefined ? "—" : tpsRatio.toFixed(2),
      `${p50("kafka")} / ${fmtMs(kafkaP99)}`,
      `${p50("bunka")} / ${fmtMs(bunkaP99)}`,
      p99Ratio === undefined ? "—" : p99Ratio.toFixed(2),
      "",
      "",
    ]);
    medians.set(s.id, { ratio: tpsRatio, kafkaP99, bunkaP99 });
  }
  return { header, rows, medians };
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

function cells(o: Outcome | undefined) {
  if (!o) return { tps: "—", commit: "—", visible: "—", rss: "—" };
  if (!o.ok) return { tps: "error", commit: "—", visible: "—", rss: o.peakRssKb === undefined ? "—" : fmtRss(o.peakRssKb) };
  const v = o.r.visibleMs;
  return {
    tps: fmtNum(o.r.txnPerSec) + busy(o),
    commit: `${fmtMs(o.r.commitMs.p50)} / ${fmtMs(o.r.commitMs.p99)}`,
    visible: v ? `${fmtMs(v.p50)} / ${fmtMs(v.p99)}` : "n/a",
    rss: fmtRss(o.peakRssKb),
  };
}

/** (c) rows are matched by position: the first is 1 id, then the --ids / --kafka-ids lists. */
function rowTitle(sk: Scenario | undefined, sb: Scenario | undefined): string {
  if (sk && sb && sk.ids !== undefined && sb.ids !== undefined && sk.ids !== sb.ids) {
    return `(c) 1 producer, ${kIds(sb.ids)} ids in the store (Kafka: ${kIds(sk.ids)})`;
  }
  return (sb ?? sk)!.title;
}

function buildRows(
  kinds: BrokerKind[],
  runs: Record<BrokerKind, { results: Map<ScenarioId, Outcome>; scenarios: Scenario[] }>,
): { header: string[]; rows: string[][] } {
  const both = kinds.length === 2;
  const header = both
    ? ["scenario", "Kafka txn/s", "bunka txn/s", "ratio", "Kafka EndTxn p50/p99 ms", "bunka EndTxn p50/p99 ms", "p99 ratio", "Kafka visible p50/p99 ms", "bunka visible p50/p99 ms", "Kafka peak RSS", "bunka peak RSS"]
    : ["scenario", `${label(kinds[0]!)} txn/s`, `${label(kinds[0]!)} EndTxn p50/p99 ms`, `${label(kinds[0]!)} visible p50/p99 ms`, `${label(kinds[0]!)} peak RSS`];
  const rows: string[][] = [];
  const ids = new Set<ScenarioId>();
  for (const k of kinds) for (const s of runs[k].scenarios) ids.add(s.id);
  for (const id of ids) {
    const sk = runs.kafka.scenarios.find((s) => s.id === id);
    const sb = runs.bunka.scenarios.find((s) => s.id === id);
    if (both) {
      const k = runs.kafka.results.get(id);
      const b = runs.bunka.results.get(id);
      const kc = cells(k);
      const bc = cells(b);
      rows.push([
        rowTitle(sk, sb),
        kc.tps,
        bc.tps,
        ratio(b?.ok ? b.r.txnPerSec : undefined, k?.ok ? k.r.txnPerSec : undefined),
        kc.commit,
        bc.commit,
        ratio(b?.ok ? b.r.commitMs.p99 : undefined, k?.ok ? k.r.commitMs.p99 : undefined),
        kc.visible,
        bc.visible,
        kc.rss,
        bc.rss,
      ]);
    } else {
      const c = cells(runs[kinds[0]!].results.get(id));
      rows.push([(sb ?? sk)!.title, c.tps, c.commit, c.visible, c.rss]);
    }
  }
  return { header, rows };
}

function detailOf(kind: BrokerKind, s: Scenario, o: Ok): string {
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
  if (o.precreate) {
    const retried = [...o.precreate.retried].map(([name, n]) => `${fmtNum(n)} ${name}`).join(", ");
    parts.push(
      `${fmtNum(o.precreate.created)} ids created first in ${(o.precreate.ms / 1000).toFixed(1)} s ` +
        `(${fmtNum(o.precreate.created / (o.precreate.ms / 1000))} InitProducerId/s${retried ? `; retried: ${retried}` : ""})`,
    );
  }
  const warn = o.cpu.otherPct >= BUSY_PCT ? ` — WARNING: other processes used ${o.cpu.otherPct.toFixed(0)}% of the machine, numbers are skewed` : "";
  parts.push(`CPU: broker ${o.cpu.brokerS.toFixed(1)} s, tool ${o.cpu.toolS.toFixed(1)} s${o.precreate ? `, id creation (this script) ${o.cpu.selfS.toFixed(1)} s` : ""}, other processes ${o.cpu.otherPct.toFixed(0)}% of the machine${warn}`);
  return `${s.title.slice(0, 3)}${s.ids !== undefined ? ` ${kIds(s.ids)} ids` : ""} ${kind}: ${parts.join("; ")}`;
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const load0 = loadavg();
  const kinds: BrokerKind[] = opts.only ? [opts.only] : ["kafka", "bunka"];
  toolClasses = await compileJavaTool("TxnBench");
  const javacVersion = (await capture([javaBin().replace(/java$/, "javac"), "-version"])).trim();
  const env = await environment(opts.dataRoot);

  let bunkaBinary: string | Error | undefined;
  if (kinds.includes("bunka")) {
    try {
      bunkaBinary = opts.bunkaBinary ?? (await ensureBunkaBinary());
    } catch (e) {
      bunkaBinary = e as Error;
    }
  }

  type Run = Awaited<ReturnType<typeof runBroker>>;
  const none = (): Run => ({ results: new Map(), scenarios: [], txnVersion: undefined });
  const errors: string[] = [];
  const details: string[] = [];
  /** What issue 6 asks, per scenario, as measured. */
  const targets: string[] = [];
  const target = (id: string, tpsRatio: number, bunkaP99: number, kafkaP99: number, what: string) =>
    `(${id}) ${what}txn/s ${tpsRatio.toFixed(2)}x ${tpsRatio >= 2 ? "≥" : "<"} 2x; ${what}EndTxn p99 ${fmtMs(bunkaP99)} vs ${fmtMs(kafkaP99)} ms ${bunkaP99 < kafkaP99 ? "below" : "NOT below"}`;
  let table: { header: string[]; rows: string[][] };
  let versions: string;
  let outcomes: Outcome[];
  if (opts.rounds !== undefined) {
    const inter = await runInterleaved(opts, bunkaBinary);
    if (isInterrupted()) return 130;
    if (inter.error !== undefined) errors.push(inter.error);
    const built = buildInterleavedRows(inter.scenarios, inter.pairs);
    table = built;
    versions = kinds.map((k) => `${label(k)}: ${inter.txnVersions[k]}`).join(", ");
    for (const s of inter.scenarios) {
      for (const p of inter.pairs.get(s.id)!) {
        for (const kind of kinds) {
          const o = p[kind];
          if (!o.ok) errors.push(`round ${p.round} ${s.title.slice(0, 3)} ${kind}: ${o.error}`);
          else details.push(`round ${p.round} ${detailOf(kind, s, o)}`);
        }
      }
    }
    outcomes = [...inter.pairs.values()].flat().flatMap((p) => [p.kafka, p.bunka]);
    for (const [id, m] of built.medians) {
      if (m.ratio !== undefined && m.bunkaP99 !== undefined && m.kafkaP99 !== undefined) targets.push(target(id, m.ratio, m.bunkaP99, m.kafkaP99, "median "));
    }
  } else {
    const runs: Record<BrokerKind, Run> = { kafka: none(), bunka: none() };
    for (const kind of kinds) {
      if (isInterrupted()) break;
      runs[kind] = await runBroker(kind, opts, bunkaBinary);
    }
    if (isInterrupted()) return 130;
    table = buildRows(kinds, runs);
    versions = kinds.map((k) => `${label(k)}: ${runs[k].txnVersion ?? "?"}`).join(", ");
    for (const kind of kinds) {
      for (const s of runs[kind].scenarios) {
        const o = runs[kind].results.get(s.id);
        if (!o) continue;
        if (!o.ok) errors.push(`${s.title.slice(0, 3)}${s.ids !== undefined ? ` ${kIds(s.ids)} ids` : ""} ${kind}: ${o.error}`);
        else details.push(detailOf(kind, s, o));
      }
    }
    outcomes = [...runs.kafka.results.values(), ...runs.bunka.results.values()];
    if (kinds.length === 2) {
      for (const id of ["a", "b"] as ScenarioId[]) {
        const k = runs.kafka.results.get(id);
        const b = runs.bunka.results.get(id);
        if (k?.ok && b?.ok) targets.push(target(id, b.r.txnPerSec / k.r.txnPerSec, b.r.commitMs.p99!, k.r.commitMs.p99!, ""));
      }
    }
  }
  const elapsedS = Math.round((Date.now() - t0) / 1000);
  const load1 = loadavg();

  const firstIds = 1 + (opts.brokerWarmupS > 0 ? opts.producers : 0);
  const kafkaIds = opts.kafkaIds && kinds.includes("kafka") ? ` (Apache Kafka: ${opts.kafkaIds.map(kIds).join(", ")})` : "";
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s; load average ${load0.map((l) => l.toFixed(2)).join(" ")} at the start, ${load1.map((l) => l.toFixed(2)).join(" ")} at the end)`,
    `machine: ${env.machine}`,
    `brokers: ${env.kafka}; ${opts.bunkaBinary ? env.bunka.replace(/\(dist\/bunka-linux-x64\), commit/, `(--bunka-binary ${opts.bunkaBinary}; the work tree is at commit`).replace(/$/, ")") : env.bunka}; ${env.runtime}`,
    `load: scripts/bench-java/TxnBench.java on the Apache Kafka ${KAFKA_VERSION} Java client (${javacVersion}, ${LOAD_TOOL_JVM.join(" ")}, on the same machine); ` +
      `flags: --broker-warmup ${opts.brokerWarmupS} --duration ${opts.durationS} --warmup ${opts.warmupS} --producers ${opts.producers} --endtxn-duration ${opts.endTxnDurationS} ` +
      `--ids ${opts.ids.join(",")}${opts.kafkaIds ? ` --kafka-ids ${opts.kafkaIds.join(",")}` : ""}` +
      `${opts.kafkaTxnVersion ? ` --kafka-txn-version ${opts.kafkaTxnVersion}` : ""}` +
      `${opts.scenarios.size < 3 ? ` --scenarios ${[...opts.scenarios].sort().join(",")}` : ""}` +
      `${opts.rounds !== undefined ? ` --rounds ${opts.rounds}` : ""}`,
    `transaction: beginTransaction, ${RECORDS_PER_TXN} x send(${RECORD_SIZE} B) each to another of ${PARTITIONS} partitions, flush, commitTransaction; ` +
      "one transactional.id per producer thread; Java producer defaults otherwise (acks=all, idempotence, linger.ms=5, max.in.flight=5)",
    `transaction protocol: ${versions} (at 2 the Java client sends no AddPartitionsToTxn, the broker adds partitions on Produce, EndTxn v5 bumps the epoch)`,
    "EndTxn = the commitTransaction() call (after flush(), so it is the EndTxn round trip); visible = from that call until a " +
      "read_committed consumer (same JVM, all partitions assigned) polls the transaction's last record; txn/s counts commits inside the measured window",
    `(c): ${ENDTXN_WARMUP_S} s warm-up + ${opts.endTxnDurationS} s per row, no consumer; the ids are created between rows with raw InitProducerId ` +
      `frames (${PRECREATE_CONNECTIONS} connections x ${PRECREATE_IN_FLIGHT} in flight), ${[firstIds, ...opts.ids].map(kIds).join(" / ")} ids in the store` +
      `${kafkaIds}${opts.brokerWarmupS > 0 ? ` (the first: the measuring producer's id and the ${opts.producers} of the warm-up)` : ""}`,
    opts.brokerWarmupS > 0
      ? `warm-up: each freshly started broker first gets ${opts.brokerWarmupS} s of untimed load (${opts.producers} producers + the consumer), ` +
        "so that the brokers' JIT is warm (Apache Kafka's JVM needs about a minute to reach full speed)"
      : "no broker warm-up (--broker-warmup 0): Apache Kafka's first rows run on a cold JVM",
    "durability: bunka answers EndTxn after the decision, the markers and the completion are fsynced; Apache Kafka answers once PrepareCommit " +
      "is appended to __transaction_state (no fsync with its default flush settings; markers are written after the answer)",
    "peak RSS = the broker process's VmHWM / max VmRSS during the row (the JVM for Apache Kafka; for (c), id creation included)",
  ];
  if (opts.rounds !== undefined) {
    meta.push(
      `interleaved (--rounds ${opts.rounds}): both brokers started once, warmed up, and kept running; each round runs every scenario on both, ` +
        "Apache Kafka first in odd rounds and bunka first in even ones; a median row's ratio is the median of the rounds' ratios; " +
        "the idle broker's CPU counts as \"other processes\"",
    );
  }
  if (outcomes.some((o) => o.ok && o.cpu.otherPct >= BUSY_PCT)) {
    meta.push(`* = other processes used ${BUSY_PCT}% or more of the machine during that row: the number is skewed, run again on a quiet machine`);
  }
  if (targets.length) meta.push(`target (issue 6): bunka ≥ 2x Apache Kafka's txn/s and EndTxn p99 below Kafka's — ${targets.join("; ")}`);
  process.stdout.write(
    renderReport({ title: "Transactions benchmark: Apache Kafka vs bunka", date: env.date, headingLevel: 3, kinds, meta, header: table.header, rows: table.rows, errors, details }),
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
