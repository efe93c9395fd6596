#!/usr/bin/env bun
/**
 * Log cleaner benchmark: Apache Kafka's cleaner beside bunka's, both brokers up at once on this machine,
 * warmed up, then interleaved rounds (Apache Kafka first in odd rounds, bunka first in even ones). The load
 * tool is scripts/bench-java/CleanerLoad.java (Apache Kafka's own Java producer, 4.1.1), compiled here with
 * javac into .cache/bench-java/. Not a test; see docs/benchmarks.md ("Log compaction").
 *
 *   bun scripts/bench-cleaner.ts [--rounds N] [--mb N] [--keys N] [--value-min B] [--value-max B]
 *                                [--tombstone-pct P] [--segment-mb N] [--codec lz4|zstd|gzip|snappy]
 *                                [--rate N] [--record-size B] [--baseline S] [--latency-mb N] [--warmup-mb N]
 *                                [--backoff-ms N] [--scenarios a,b,c] [--only kafka|bunka]
 *                                [--data-root DIR] [--bunka-binary PATH]
 *
 * Every scenario fills a fresh single-partition topic with cleanup.policy=compact, min.cleanable.dirty.ratio
 * 0.01 and a small segment.bytes (so nearly all of it is in inactive segments) with --mb MiB of keyed
 * records (--latency-mb for (c)), held back from the cleaner by min.compaction.lag.ms = 1 day. Releasing it (IncrementalAlterConfigs
 * min.compaction.lag.ms=0) is the trigger: both cleaners look again every log.cleaner.backoff.ms (--backoff-ms
 * on both brokers), so they start within that of the trigger.
 *   (a) cleaning throughput, uncompressed data: the time the cleaner worked on the partition (from the start
 *       of its first pass to the end of the last) and the broker's CPU from the trigger until the cleaner
 *       reached the active segment, less what the broker uses when idle (measured just before)
 *   (b) the same with the data compressed by the producer (--codec): the cleaner decompresses and recompresses
 *   (c) produce latency: a steady acks=all load of --rate records/s on another topic, --baseline s without
 *       cleaning, then the trigger of an uncompressed data set of --latency-mb MiB (larger than (a)'s, so
 *       that the cleaning lasts long enough for a p99); p50/p99 of the records sent before the trigger
 *       against those sent while the cleaner ran
 *
 * The cleaner's passes come from bunka's /v1/topics/<topic> (its last pass's end and duration) and /metrics
 * counters, and from Apache Kafka's own log lines ("Beginning cleaning of log ..." and the cleaner thread's
 * "Log cleaner thread 0 cleaned log ... (dirty section = [a, b])" statistics), which the script switches on
 * with a BROKER_LOGGER IncrementalAlterConfigs. Done means a pass reached the active segment's base offset,
 * read from the partition directory on disk.
 *
 * Progress goes to stderr; the results (text tables, then the same in markdown for docs/benchmarks.md) go
 * to stdout. Brokers, tools and temp dirs are removed at the end, on an error and on Ctrl-C.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { javaBin, KAFKA_VERSION } from "../tests/support/apache-kafka.ts";
import {
  type Broker,
  type BrokerKind,
  BUSY_PCT,
  capture,
  compileJavaTool,
  connect,
  ensureBunkaBinary,
  environment,
  errName,
  fmtNum,
  installSignalHandlers,
  isInterrupted,
  label,
  log,
  median,
  processTicks,
  renderReport,
  runCleanups,
  runJavaTool,
  sleep,
  startBrokerForRows,
  startBunkaBroker,
  startKafkaBroker,
  tempDir,
  watchCpu,
} from "./bench-support.ts";

// ---------------------------------------------------------------------------------------------
// Options

type ScenarioId = "a" | "b" | "c";

interface Options {
  only?: BrokerKind;
  rounds: number;
  mb: number;
  keys: number;
  valueMin: number;
  valueMax: number;
  tombstonePct: number;
  segmentMb: number;
  codec: string;
  rate: number;
  recordSize: number;
  baselineS: number;
  latencyMb: number;
  warmupMb: number;
  backoffMs: number;
  scenarios: Set<ScenarioId>;
  dataRoot: string;
  bunkaBinary?: string;
}

const CLK_TCK = 100;
/** The topic is held back from the cleaner this long until the trigger. */
const HOLD_LAG_MS = 86_400_000;
const MIN_DIRTY_RATIO = "0.01";
/** Seconds after a fill before the idle CPU is measured: the broker finishes what the produce left behind. */
const SETTLE_S = 2;
const IDLE_S = 3;
/** (c): seconds of steady load before the baseline window (the tool's JIT and connections warm up). */
const STEADY_WARMUP_S = 5;
/** (c): seconds of steady load after the cleaner finished. */
const STEADY_TAIL_S = 2;
const POLL_MS = 50;
const LOAD_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];
/** The fill's producer: bigger batches than the Java default, as a bulk loader would use. */
const FILL_BATCH_SIZE = 65536;
const FILL_LINGER_MS = 10;
/** (c): no linger, so that the latency is the broker's rather than the client's batching delay. */
const STEADY_LINGER_MS = 0;
/** Apache Kafka's node.id in tests/support/apache-kafka.ts: the BROKER_LOGGER resource name. */
const KAFKA_NODE_ID = "1";
const KAFKA_CLEANER_LOGGERS = ["org.apache.kafka.storage.internals.log.Cleaner", "org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread"];

const USAGE = `usage: bun scripts/bench-cleaner.ts [options]

  --rounds N           interleaved rounds after the warm-up (default 3)
  --mb N               MiB of keys and values per data set (default 256)
  --keys N             distinct keys, each record's drawn uniformly (default 100000)
  --value-min B        smallest value, bytes (default 200)
  --value-max B        largest value, bytes (default 1800); sizes are uniform in between
  --tombstone-pct P    share of records that are tombstones (default 1)
  --segment-mb N       segment.bytes of the compacted topics, MiB (default 16)
  --codec C            (b): the producer's compression.type: lz4, zstd, gzip or snappy (default lz4)
  --rate N             (c): records/s of the steady acks=all load (default 2000)
  --record-size B      (c): bytes per steady record (default 1024)
  --baseline S         (c): seconds of steady load measured without cleaning (default 10)
  --latency-mb N       (c): MiB of keys and values cleaned under the steady load (default 512)
  --warmup-mb N        MiB of the untimed warm-up data sets on each broker (default 128)
  --backoff-ms N       log.cleaner.backoff.ms of both brokers (default 500)
  --scenarios LIST     run only some of a,b,c (default a,b,c)
  --only B             one broker only (kafka or bunka)
  --data-root DIR      where the temporary data dirs go (default ${tmpdir()})
  --bunka-binary PATH  run this bunka executable (default: dist/bunka-linux-x64, rebuilt when older than src/)
`;

function die(message: string): never {
  process.stderr.write(`bench-cleaner: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    rounds: 3,
    mb: 256,
    keys: 100_000,
    valueMin: 200,
    valueMax: 1800,
    tombstonePct: 1,
    segmentMb: 16,
    codec: "lz4",
    rate: 2000,
    recordSize: 1024,
    baselineS: 10,
    latencyMb: 512,
    warmupMb: 128,
    backoffMs: 500,
    scenarios: new Set(["a", "b", "c"]),
    dataRoot: tmpdir(),
  };
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
      case "--rounds":
        o.rounds = Math.round(num(1));
        break;
      case "--mb":
        o.mb = num(1);
        break;
      case "--keys":
        o.keys = Math.round(num(1));
        break;
      case "--value-min":
        o.valueMin = Math.round(num(64));
        break;
      case "--value-max":
        o.valueMax = Math.round(num(64));
        break;
      case "--tombstone-pct":
        o.tombstonePct = num(0);
        break;
      case "--segment-mb":
        o.segmentMb = num(1);
        break;
      case "--codec": {
        const v = value();
        if (!["lz4", "zstd", "gzip", "snappy"].includes(v)) die("--codec takes lz4, zstd, gzip or snappy");
        o.codec = v;
        break;
      }
      case "--rate":
        o.rate = num(1);
        break;
      case "--record-size":
        o.recordSize = Math.round(num(1));
        break;
      case "--baseline":
        o.baselineS = num(1);
        break;
      case "--latency-mb":
        o.latencyMb = num(1);
        break;
      case "--warmup-mb":
        o.warmupMb = num(0);
        break;
      case "--backoff-ms":
        o.backoffMs = Math.round(num(1));
        break;
      case "--scenarios": {
        const l = value().split(",").filter(Boolean);
        if (l.length === 0 || l.some((x) => x !== "a" && x !== "b" && x !== "c")) die("--scenarios takes a comma-separated subset of a,b,c");
        o.scenarios = new Set(l as ScenarioId[]);
        break;
      }
      case "--only": {
        const v = value();
        if (v !== "kafka" && v !== "bunka") die("--only takes kafka or bunka");
        o.only = v;
        break;
      }
      case "--data-root":
        o.dataRoot = value();
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
  if (o.valueMax < o.valueMin) die("--value-max must be >= --value-min");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Admin requests in raw frames (the same for both brokers)

const API = { CreateTopics: 19, DeleteTopics: 20, IncrementalAlterConfigs: 44 } as const;
const RESOURCE_TOPIC = 2;
const RESOURCE_BROKER_LOGGER = 8;

async function withConnection<T>(broker: Broker, what: string, fn: (c: Awaited<ReturnType<typeof connect>>) => Promise<T>): Promise<T> {
  const c = await connect(broker, `bench-cleaner-${what}`);
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}

async function createTopic(broker: Broker, topic: string, configs: Record<string, string>): Promise<void> {
  const version = Math.min(5, broker.apis.get(API.CreateTopics) ?? 0);
  const res = await withConnection(broker, "create", (c) =>
    c.request(API.CreateTopics, version, {
      topics: [{ name: topic, numPartitions: 1, replicationFactor: 1, assignments: [], configs: Object.entries(configs).map(([name, value]) => ({ name, value })) }],
      timeoutMs: 30_000,
      validateOnly: false,
    }),
  );
  const t = res.topics[0];
  if (t.errorCode !== 0) throw new Error(`CreateTopics ${topic}: ${errName(t.errorCode)}${t.errorMessage ? ` (${t.errorMessage})` : ""}`);
  // Wait until the partition exists on disk: the fill's first Produce should not race its creation.
  const deadline = Date.now() + 30_000;
  while (!existsSync(join(broker.logDir, `${topic}-0`))) {
    if (Date.now() > deadline) throw new Error(`${topic}-0 did not appear in ${broker.logDir}`);
    await sleep(50);
  }
}

async function alterConfigs(broker: Broker, resourceType: number, resourceName: string, configs: Record<string, string>): Promise<void> {
  const version = Math.min(1, broker.apis.get(API.IncrementalAlterConfigs) ?? 0);
  const res = await withConnection(broker, "alter", (c) =>
    c.request(API.IncrementalAlterConfigs, version, {
      resources: [{ resourceType, resourceName, configs: Object.entries(configs).map(([name, value]) => ({ name, configOperation: 0, value })) }],
      validateOnly: false,
    }),
  );
  const r = res.responses[0];
  if (r.errorCode !== 0) throw new Error(`IncrementalAlterConfigs ${resourceName}: ${errName(r.errorCode)}${r.errorMessage ? ` (${r.errorMessage})` : ""}`);
}

async function deleteTopic(broker: Broker, topic: string): Promise<void> {
  const version = Math.min(5, broker.apis.get(API.DeleteTopics) ?? 0);
  const res = await withConnection(broker, "delete", (c) => c.request(API.DeleteTopics, version, { topicNames: [topic], timeoutMs: 30_000 }));
  const r = res.responses[0];
  if (r.errorCode !== 0) throw new Error(`DeleteTopics ${topic}: ${errName(r.errorCode)}`);
}

// ---------------------------------------------------------------------------------------------
// The partition on disk

interface OnDisk {
  /** Bytes of every segment's .log file. */
  logBytes: number;
  /** Bytes of every segment's .log file but the active (last) one's. */
  inactiveBytes: number;
  segments: number;
  activeBaseOffset: number;
}

function onDisk(broker: Broker, topic: string): OnDisk {
  const dir = join(broker.logDir, `${topic}-0`);
  const segments: { base: number; bytes: number }[] = [];
  for (const name of readdirSync(dir)) {
    const m = name.match(/^(\d{20})\.log$/);
    if (m) segments.push({ base: Number(m[1]), bytes: statSync(join(dir, name)).size });
  }
  segments.sort((x, y) => x.base - y.base);
  const logBytes = segments.reduce((sum, s) => sum + s.bytes, 0);
  const active = segments.at(-1);
  return { logBytes, inactiveBytes: logBytes - (active?.bytes ?? 0), segments: segments.length, activeBaseOffset: active?.base ?? 0 };
}

// ---------------------------------------------------------------------------------------------
// Watching the cleaner

interface Pass {
  startMs: number;
  endMs: number;
  /** The end of the cleaned range: offsets below it are clean. */
  endOffset: number;
  /** Apache Kafka: the cleaner's own statistics lines. */
  stats?: string;
}

interface CleanerWatch {
  /** Every pass over the topic's partition that ended since the watch started. */
  passes(): Promise<Pass[]>;
  /** bunka: passes that ended between two polls and whose times were therefore not seen. */
  missed: number;
}

/** bunka: the partition's cleaner view in /v1/topics/<topic> (its last pass's end and duration). */
async function watchBunkaCleaner(broker: Broker, topic: string): Promise<CleanerWatch> {
  const url = `${broker.metricsUrl!.replace(/\/metrics$/, "")}/v1/topics/${encodeURIComponent(topic)}`;
  const view = async () => {
    const body = (await (await fetch(url)).json()) as { partitionDetails: { partition: number; cleaner: { passes: number; lastPassMs: number | null; lastPassDurationMs: number | null; cleanedUpToOffset: number } | null }[] };
    const p = body.partitionDetails.find((x) => x.partition === 0);
    if (!p?.cleaner) throw new Error(`${url}: no cleaner view for partition 0`);
    return p.cleaner;
  };
  let seen = (await view()).passes;
  const passes: Pass[] = [];
  const watch: CleanerWatch = {
    missed: 0,
    async passes() {
      const v = await view();
      if (v.passes > seen && v.lastPassMs !== null && v.lastPassDurationMs !== null) {
        watch.missed += v.passes - seen - 1;
        seen = v.passes;
        passes.push({ startMs: v.lastPassMs - v.lastPassDurationMs, endMs: v.lastPassMs, endOffset: v.cleanedUpToOffset });
      }
      return passes;
    },
  };
  return watch;
}

/** A log4j time of day (HH:mm:ss.SSS, the JVM's local time) as epoch ms, taking the day nearest `nearMs`. */
function logClockToEpoch(hms: string, nearMs: number): number {
  const [h, m, rest] = hms.split(":");
  const d = new Date(nearMs);
  d.setHours(Number(h), Number(m), Math.floor(Number(rest)), Math.round((Number(rest) % 1) * 1000));
  let t = d.getTime();
  if (t - nearMs > 43_200_000) t -= 86_400_000;
  if (nearMs - t > 43_200_000) t += 86_400_000;
  return t;
}

/** Apache Kafka: its cleaner's INFO lines in the server log, from the log's current end on. */
function watchKafkaCleaner(broker: Broker, topic: string): CleanerWatch {
  const from = statSync(broker.logFile).size;
  const log = `${topic}-0`;
  const begin = /^\[(\d\d:\d\d:\d\d\.\d{3})\] INFO Cleaner \d+: Beginning cleaning of log (\S+) \(Cleaner\)$/gm;
  const done = /^\[(\d\d:\d\d:\d\d\.\d{3})\] INFO \[kafka-log-cleaner-thread-\d+\]: *\n\s*Log cleaner thread \d+ cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)\n([\s\S]*?)\n \(LogCleaner\$CleanerThread\)$/gm;
  return {
    missed: 0,
    async passes() {
      const text = await Bun.file(broker.logFile).slice(from).text();
      const now = Date.now();
      const events: { at: number; kind: "begin" | "done"; time: string; endOffset?: number; stats?: string }[] = [];
      for (const m of text.matchAll(begin)) if (m[2] === log) events.push({ at: m.index!, kind: "begin", time: m[1]! });
      for (const m of text.matchAll(done)) {
        if (m[2] === log) events.push({ at: m.index!, kind: "done", time: m[1]!, endOffset: Number(m[4]), stats: m[5]!.split("\n").map((l) => l.trim()).filter(Boolean).join("; ") });
      }
      events.sort((x, y) => x.at - y.at);
      const passes: Pass[] = [];
      let startMs: number | undefined;
      for (const e of events) {
        if (e.kind === "begin") startMs = logClockToEpoch(e.time, now);
        else {
          const endMs = logClockToEpoch(e.time, now);
          passes.push({ startMs: startMs ?? endMs, endMs, endOffset: e.endOffset!, stats: e.stats });
          startMs = undefined;
        }
      }
      return passes;
    },
  };
}

/** Lets Apache Kafka's cleaner log each pass at INFO (its default is WARN, as in scripts/apache-kafka/log4j2.xml). */
async function enableKafkaCleanerLog(broker: Broker): Promise<void> {
  // A raw request, because kafka-configs refuses the `$` in the cleaner thread's logger name.
  await alterConfigs(broker, RESOURCE_BROKER_LOGGER, KAFKA_NODE_ID, Object.fromEntries(KAFKA_CLEANER_LOGGERS.map((l) => [l, "INFO"])));
}

// ---------------------------------------------------------------------------------------------
// The load tool

let toolClasses = "";

interface FillResult {
  records: number;
  tombstones: number;
  bytes: number;
  seconds: number;
  errors: number;
  firstError: string | null;
  toolCpuS: number;
}

async function fill(broker: Broker, topic: string, mb: number, codec: string, opts: Options, tag: string): Promise<FillResult> {
  const bytes = Math.round(mb * 1024 * 1024);
  const run = await runJavaTool({
    mainClass: "CleanerLoad",
    jvm: LOAD_TOOL_JVM,
    args: [
      "fill",
      "--bootstrap", broker.bootstrap,
      "--topic", topic,
      "--bytes", String(bytes),
      "--keys", String(opts.keys),
      "--value-min", String(opts.valueMin),
      "--value-max", String(opts.valueMax),
      "--tombstone-pct", String(opts.tombstonePct),
      "--compression", codec,
      "--batch-size", String(FILL_BATCH_SIZE),
      "--linger-ms", String(FILL_LINGER_MS),
    ],
    extraClasspath: toolClasses,
    label: tag,
    echo: (line) => !line.startsWith("RESULT ") && !line.startsWith("fill: "),
    timeoutMs: Math.max(120_000, mb * 2000),
  });
  const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  if (!line) throw new Error(`the fill printed no result (exit ${run.code}${run.timedOut ? ", timed out" : ""}): ${run.stderr.trim().split("\n").slice(-3).join(" | ")}`);
  const r = JSON.parse(line.slice(7)) as Omit<FillResult, "toolCpuS">;
  if (r.errors > 0) throw new Error(`the fill failed: ${r.firstError}`);
  return { ...r, toolCpuS: run.cpuMicros / 1e6 };
}

// ---------------------------------------------------------------------------------------------
// One cleaning: fill, measure idle, trigger, wait

interface Cleaning {
  fill: FillResult;
  before: OnDisk;
  after: OnDisk;
  passes: Pass[];
  missedPasses: number;
  /** Sum of the passes' durations. */
  cleanS: number;
  /** From the trigger until the watch saw the last pass. */
  wallS: number;
  /** From the trigger until the first pass started (the cleaner's backoff). */
  waitS: number;
  brokerCpuS: number;
  idleCpuPerS: number;
  netCpuS: number;
  mbPerS: number;
  cpuPerGb: number;
  otherPct: number;
  kernelPct: number;
  /** bunka: its /metrics counters for the topic, after the cleaning. */
  counters?: Record<string, number>;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function compactConfigs(segmentMb: number): Record<string, string> {
  return {
    "cleanup.policy": "compact",
    "segment.bytes": String(Math.round(segmentMb * MiB)),
    "min.cleanable.dirty.ratio": MIN_DIRTY_RATIO,
    "min.compaction.lag.ms": String(HOLD_LAG_MS),
  };
}

async function bunkaCounters(broker: Broker, topic: string): Promise<Record<string, number>> {
  const text = await (await fetch(broker.metricsUrl!)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^bunka_log_cleaner_(\w+)\{topic="([^"]+)",partition="0"\} (\S+)$/gm)) if (m[2] === topic) out[m[1]!] = Number(m[3]);
  return out;
}

/** Waits until a pass of `watch` reached `endOffset` (the active segment's base offset), or `timeoutMs`. */
async function waitForCleaner(watch: CleanerWatch, endOffset: number, timeoutMs: number): Promise<Pass[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const passes = await watch.passes();
    if (passes.length > 0 && passes.at(-1)!.endOffset >= endOffset) return passes;
    if (Date.now() > deadline) throw new Error(`the cleaner did not reach offset ${endOffset} within ${timeoutMs / 1000} s (${passes.length} passes seen)`);
    if (isInterrupted()) throw new Error("interrupted");
    await sleep(POLL_MS);
  }
}

/** The broker's CPU seconds per second over `seconds` of nothing happening. */
async function idleCpuRate(pid: number, seconds: number): Promise<number> {
  const t0 = performance.now();
  const ticks0 = processTicks(pid);
  await sleep(seconds * 1000);
  return (processTicks(pid) - ticks0) / CLK_TCK / ((performance.now() - t0) / 1000);
}

/**
 * Fills `topic` (created here, held back from the cleaner) and has the cleaner clean it, measuring the
 * cleaning. `around.beforeTrigger` (the latency scenario's steady load) runs after the idle CPU is measured
 * and before the trigger; `around.toolTicks` is that load's CPU so far, which is not "other processes".
 */
async function fillAndClean(
  broker: Broker,
  topic: string,
  mb: number,
  codec: string,
  opts: Options,
  tag: string,
  segmentMb: number,
  around?: { beforeTrigger(): Promise<void>; toolTicks(): number },
): Promise<Cleaning> {
  await createTopic(broker, topic, compactConfigs(segmentMb));
  const filled = await fill(broker, topic, mb, codec, opts, tag);
  await sleep(SETTLE_S * 1000);
  const idleCpuPerS = await idleCpuRate(broker.pid, IDLE_S);
  if (around) await around.beforeTrigger();
  const before = onDisk(broker, topic);
  if (before.segments < 2) throw new Error(`the ${fmtNum(mb)} MiB fit in the active segment (${f1(before.logBytes / MiB)} MiB on disk): raise --mb or lower --segment-mb`);
  const watch = broker.kind === "kafka" ? watchKafkaCleaner(broker, topic) : await watchBunkaCleaner(broker, topic);
  const cpu = watchCpu(broker.pid, { kernelApart: true });
  const tool0 = around?.toolTicks() ?? 0;
  const triggerMs = Date.now();
  const t0 = performance.now();
  await alterConfigs(broker, RESOURCE_TOPIC, topic, { "min.compaction.lag.ms": "0" });
  const passes = await waitForCleaner(watch, before.activeBaseOffset, Math.max(120_000, mb * 2000));
  const wallS = (performance.now() - t0) / 1000;
  const report = cpu.stop((((around?.toolTicks() ?? 0) - tool0) / CLK_TCK) * 1e6);
  const after = onDisk(broker, topic);
  const cleanS = passes.reduce((sum, p) => sum + (p.endMs - p.startMs), 0) / 1000;
  const netCpuS = Math.max(0, report.brokerS - idleCpuPerS * wallS);
  return {
    fill: filled,
    before,
    after,
    passes,
    missedPasses: watch.missed,
    cleanS,
    wallS,
    waitS: Math.max(0, (passes[0]!.startMs - triggerMs) / 1000),
    brokerCpuS: report.brokerS,
    idleCpuPerS,
    netCpuS,
    mbPerS: before.inactiveBytes / MiB / cleanS,
    cpuPerGb: netCpuS / (before.inactiveBytes / GiB),
    otherPct: report.otherPct,
    kernelPct: report.kernelPct ?? 0,
    ...(broker.kind === "bunka" ? { counters: await bunkaCounters(broker, topic) } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// (c): the steady load

interface Dist {
  n: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

function dist(latenciesUs: number[]): Dist {
  const s = [...latenciesUs].sort((x, y) => x - y);
  const at = (p: number) => (s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]! / 1000);
  return { n: s.length, p50: at(50), p99: at(99), p999: at(99.9), max: at(100) };
}

/** The pid of this process's child JVM whose command line names `mainClass` (the running load tool). */
function childJavaPid(mainClass: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(mainClass)) return Number(entry);
    } catch {
      /* gone meanwhile */
    }
  }
  return undefined;
}

interface Latency {
  cleaning: Cleaning;
  /** Other processes' share of the machine during the window without cleaning. */
  baselineOtherPct: number;
  baseline: Dist;
  during: Dist;
  /** The latencies (µs) behind `baseline` and `during`, for percentiles over every round together. */
  baselineUs: number[];
  duringUs: number[];
  windowS: number;
  sent: number;
  acked: number;
  behindMaxMs: number;
  toolCpuS: number;
}

async function latencyUnderCleaning(broker: Broker, round: string, opts: Options, mb: number, segmentMb: number, baselineS: number, tag: string): Promise<Latency> {
  const steadyTopic = `steady-${round}`;
  const cleanTopic = `clean-c-${round}`;
  await createTopic(broker, steadyTopic, {});
  const dir = tempDir(opts.dataRoot, "bench-cleaner-steady-");
  const samplesFile = join(dir, "samples.bin");
  const stopFile = join(dir, "stop");
  let tool: ReturnType<typeof runJavaTool> | undefined;
  let toolPid: number | undefined;
  const toolTicks = () => (toolPid === undefined ? 0 : processTicks(toolPid));
  let triggerMs = 0;
  let baselineOtherPct = 0;
  try {
    const cleaning = await fillAndClean(broker, cleanTopic, mb, "none", opts, `${tag} fill`, segmentMb, {
      async beforeTrigger() {
        tool = runJavaTool({
          mainClass: "CleanerLoad",
          jvm: LOAD_TOOL_JVM,
          args: [
            "steady",
            "--bootstrap", broker.bootstrap,
            "--topic", steadyTopic,
            "--rate", String(opts.rate),
            "--record-size", String(opts.recordSize),
            "--linger-ms", String(STEADY_LINGER_MS),
            "--max-duration", String(STEADY_WARMUP_S + baselineS + Math.max(120, mb * 2) + 30),
            "--out", samplesFile,
            "--stop-file", stopFile,
          ],
          extraClasspath: toolClasses,
          label: `${tag} steady`,
          echo: (line) => !line.startsWith("RESULT "),
          timeoutMs: (STEADY_WARMUP_S + baselineS + Math.max(120, mb * 2) + 90) * 1000,
        });
        await sleep(STEADY_WARMUP_S * 1000);
        toolPid = childJavaPid("CleanerLoad");
        const window = watchCpu(broker.pid);
        const tool0 = toolTicks();
        await sleep(baselineS * 1000);
        baselineOtherPct = window.stop(((toolTicks() - tool0) / CLK_TCK) * 1e6).otherPct;
        triggerMs = Date.now();
      },
      toolTicks,
    });
    await sleep(STEADY_TAIL_S * 1000);
    writeFileSync(stopFile, "");
    const run = await tool!;
    const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "));
    if (!line) throw new Error(`the steady load printed no result (exit ${run.code}${run.timedOut ? ", timed out" : ""}): ${run.stderr.trim().split("\n").slice(-3).join(" | ")}`);
    const r = JSON.parse(line.slice(7)) as { sent: number; acked: number; behindMaxMs: number; errors: number; firstError: string | null };
    if (r.errors > 0) throw new Error(`the steady load failed: ${r.firstError}`);
    const bytes = readFileSync(samplesFile);
    const baseline: number[] = [];
    const during: number[] = [];
    const first = cleaning.passes[0]!.startMs * 1000;
    const last = cleaning.passes.at(-1)!.endMs * 1000;
    const baselineFrom = (triggerMs - baselineS * 1000) * 1000;
    for (let at = 0; at + 12 <= bytes.length; at += 12) {
      const sendUs = Number(bytes.readBigInt64BE(at));
      const latencyUs = bytes.readInt32BE(at + 8);
      if (sendUs >= baselineFrom && sendUs < triggerMs * 1000) baseline.push(latencyUs);
      else if (sendUs >= first && sendUs <= last) during.push(latencyUs);
    }
    return {
      cleaning,
      baselineOtherPct,
      baseline: dist(baseline),
      during: dist(during),
      baselineUs: baseline,
      duringUs: during,
      windowS: (last - first) / 1e6,
      sent: r.sent,
      acked: r.acked,
      behindMaxMs: r.behindMaxMs,
      toolCpuS: run.cpuMicros / 1e6,
    };
  } finally {
    if (!existsSync(stopFile)) writeFileSync(stopFile, "");
    await tool?.catch(() => undefined);
    await deleteTopic(broker, steadyTopic).catch((e: Error) => log(`  ${tag}: ${e.message}`));
    await deleteTopic(broker, cleanTopic).catch((e: Error) => log(`  ${tag}: ${e.message}`));
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios and rounds

interface Scenario {
  id: ScenarioId;
  title: string;
}

function scenarios(opts: Options): Scenario[] {
  const all: Scenario[] = [
    { id: "a", title: `(a) clean ${fmtNum(opts.mb)} MiB, uncompressed` },
    { id: "b", title: `(b) clean ${fmtNum(opts.mb)} MiB of values, ${opts.codec}` },
    { id: "c", title: `(c) produce ${fmtNum(opts.rate)}/s acks=all while cleaning ${fmtNum(opts.latencyMb)} MiB` },
  ];
  return all.filter((s) => opts.scenarios.has(s.id));
}

type Outcome = { ok: true; cleaning: Cleaning; latency?: Latency } | { ok: false; error: string };

async function runScenario(broker: Broker, s: Scenario, round: string, opts: Options, mb: number, tag: string): Promise<Outcome> {
  // The warm-up's smaller data sets get smaller segments, so that they too are mostly in inactive ones.
  const warm = round === "warm";
  const segmentMb = warm ? Math.max(1, Math.min(opts.segmentMb, Math.floor(mb / 8))) : opts.segmentMb;
  try {
    if (s.id === "c") {
      const latency = await latencyUnderCleaning(broker, round, opts, mb, segmentMb, warm ? 3 : opts.baselineS, tag);
      return { ok: true, cleaning: latency.cleaning, latency };
    }
    const topic = `clean-${s.id}-${round}`;
    try {
      const cleaning = await fillAndClean(broker, topic, mb, s.id === "b" ? opts.codec : "none", opts, tag, segmentMb);
      return { ok: true, cleaning };
    } finally {
      await deleteTopic(broker, topic).catch((e: Error) => log(`  ${tag}: ${e.message}`));
    }
  } catch (e) {
    let error = (e as Error).message;
    if (!broker.alive()) error += ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`;
    return { ok: false, error };
  }
}

const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "?");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "?");
const fmtMs = (ms: number) => (!Number.isFinite(ms) ? "?" : ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0));
const pct = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(0)}%`;

function outcomeLog(kind: BrokerKind, s: Scenario, o: Outcome, startedMs: number): string {
  const took = `(${((Date.now() - startedMs) / 1000).toFixed(0)} s)`;
  if (!o.ok) return `${kind} ${s.id}: ${o.error} ${took}`;
  const c = o.cleaning;
  const clean = `${f1(c.mbPerS)} MB/s cleaned (${f1(c.before.inactiveBytes / MiB)} MiB in ${f2(c.cleanS)} s), ${f1(c.cpuPerGb)} CPU-s/GiB, log ${f1(c.before.logBytes / MiB)} -> ${f1(c.after.logBytes / MiB)} MiB`;
  if (!o.latency) return `${kind} ${s.id}: ${clean} ${took}`;
  const l = o.latency;
  return `${kind} ${s.id}: produce p50/p99 ${fmtMs(l.baseline.p50)} / ${fmtMs(l.baseline.p99)} ms without cleaning, ${fmtMs(l.during.p50)} / ${fmtMs(l.during.p99)} ms while cleaning (${fmtNum(l.during.n)} records in ${f1(l.windowS)} s); ${clean} ${took}`;
}

/** Starts a broker with the cleaner settings; bunka without them when its config file does not know them yet. */
async function startBroker(kind: BrokerKind, opts: Options, bunkaBinary: string | Error | undefined, notes: string[]): Promise<Broker | { error: string }> {
  // Both brokers' defaults already agree on the rest; they are written out so that the comparison says so.
  const cleanerConfig = { "log.cleaner.backoff.ms": opts.backoffMs, "log.cleaner.threads": 1, "log.cleaner.dedupe.buffer.size": 128 * MiB };
  if (kind === "kafka") {
    const started = await startBrokerForRows(kind, bunkaBinary, () => startKafkaBroker(opts.dataRoot, cleanerConfig));
    if ("error" in started) return started;
    await enableKafkaCleanerLog(started);
    return started;
  }
  const started = await startBrokerForRows(kind, bunkaBinary, (binary) => startBunkaBroker(binary, opts.dataRoot, cleanerConfig));
  if (!("error" in started) || !/log\.cleaner\./.test(started.error)) return started;
  notes.push(`bunka: this build's config file does not accept the log.cleaner.* settings, so its cleaner ran with its defaults (backoff 15 s): its passes start up to 15 s after the trigger; the times and CPU above count from the pass start or subtract the idle rate, so only "trigger to done" in the details shows the wait`);
  return startBrokerForRows(kind, bunkaBinary, (binary) => startBunkaBroker(binary, opts.dataRoot));
}

interface RoundResult {
  round: number;
  outcomes: Partial<Record<BrokerKind, Outcome>>;
}

async function runAll(opts: Options, kinds: BrokerKind[], bunkaBinary: string | Error | undefined, notes: string[]): Promise<{ results: Map<ScenarioId, RoundResult[]>; error?: string }> {
  const list = scenarios(opts);
  const results = new Map<ScenarioId, RoundResult[]>(list.map((s) => [s.id, []]));
  const brokers: Partial<Record<BrokerKind, Broker>> = {};
  try {
    for (const kind of kinds) {
      log(`\n== ${kind}: starting a broker for the warm-up and ${opts.rounds} interleaved rounds`);
      const started = await startBroker(kind, opts, bunkaBinary, notes);
      if ("error" in started) return { results, error: `${kind}: ${started.error}` };
      brokers[kind] = started;
    }
    if (opts.warmupMb > 0) {
      for (const kind of kinds) {
        for (const s of list) {
          if (isInterrupted()) return { results };
          const mb = opts.warmupMb;
          log(`-- ${kind} warm-up ${s.title.slice(0, 3)} with ${fmtNum(mb)} MiB (not measured)`);
          const started = Date.now();
          const o = await runScenario(brokers[kind]!, s, "warm", opts, mb, `${kind} warm-up ${s.id}`);
          log(outcomeLog(kind, s, o, started));
          if (!o.ok) return { results, error: `${kind} warm-up ${s.id}: ${o.error}` };
        }
      }
    }
    for (let round = 1; round <= opts.rounds; round++) {
      const order = round % 2 === 1 ? kinds : [...kinds].reverse();
      for (const s of list) {
        const outcomes: Partial<Record<BrokerKind, Outcome>> = {};
        for (const kind of order) {
          if (isInterrupted()) return { results };
          log(`-- round ${round}/${opts.rounds}: ${kind} ${s.title}`);
          const started = Date.now();
          outcomes[kind] = await runScenario(brokers[kind]!, s, `r${round}`, opts, s.id === "c" ? opts.latencyMb : opts.mb, `${kind} ${s.id}`);
          log(outcomeLog(kind, s, outcomes[kind]!, started));
        }
        results.get(s.id)!.push({ round, outcomes });
      }
    }
    return { results };
  } finally {
    for (const kind of kinds) {
      if (brokers[kind] === undefined) continue;
      log(`${kind}: stopping the broker`);
      await brokers[kind]!.stop();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Report

type Ok = Extract<Outcome, { ok: true }>;

/** The most of the machine other processes used in any window an outcome measured. */
const busiest = (o: Ok) => Math.max(o.cleaning.otherPct, o.latency?.baselineOtherPct ?? 0);

/** "median (min–max)" of the rounds' values. */
function spread(values: number[], fmt: (n: number) => string): string {
  const m = median(values);
  if (m === undefined) return "—";
  if (values.length === 1) return fmt(m);
  return `${fmt(m)} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

function buildTables(opts: Options, kinds: BrokerKind[], results: Map<ScenarioId, RoundResult[]>) {
  const both = kinds.length === 2;
  const summaryHeader = ["scenario", "measure", ...kinds.map((k) => `${label(k)} median (range)`), ...(both ? ["bunka/Kafka"] : [])];
  const summary: string[][] = [];
  const roundsHeader = ["scenario", "round", ...kinds.map(label)];
  const rounds: string[][] = [];
  const targets: string[] = [];
  for (const s of scenarios(opts)) {
    const rs = results.get(s.id) ?? [];
    const oks = (k: BrokerKind) => rs.map((r) => r.outcomes[k]).filter((o): o is Ok => o?.ok === true);
    const paired = rs.filter((r) => r.outcomes.kafka?.ok && r.outcomes.bunka?.ok).map((r) => ({ kafka: r.outcomes.kafka as Ok, bunka: r.outcomes.bunka as Ok }));
    const ratioOf = (f: (o: Ok) => number) => {
      const m = median(paired.map((p) => f(p.bunka) / f(p.kafka)).filter(Number.isFinite));
      return m === undefined ? "—" : m.toFixed(2);
    };
    const row = (measure: string, f: (o: Ok) => number, fmt: (n: number) => string) =>
      summary.push([s.title, measure, ...kinds.map((k) => spread(oks(k).map(f), fmt)), ...(both ? [ratioOf(f)] : [])]);
    if (s.id !== "c") {
      row("cleaned MB/s", (o) => o.cleaning.mbPerS, f1);
      row("broker CPU-s per GiB cleaned", (o) => o.cleaning.cpuPerGb, f1);
    } else {
      const l = (o: Ok) => o.latency!;
      row("produce p50 ms, no cleaning", (o) => l(o).baseline.p50, fmtMs);
      row("produce p50 ms, while cleaning", (o) => l(o).during.p50, fmtMs);
      row("produce p99 ms, no cleaning", (o) => l(o).baseline.p99, fmtMs);
      row("produce p99 ms, while cleaning", (o) => l(o).during.p99, fmtMs);
      summary.push([s.title, "p99 change while cleaning", ...kinds.map((k) => spread(oks(k).map((o) => l(o).during.p99 / l(o).baseline.p99 - 1), pct)), ...(both ? [""] : [])]);
      // A cleaning lasts one to three seconds, so one round's p99 rests on a few dozen records: the
      // percentiles of every round's records together are the steadier figure.
      const pooled = (k: BrokerKind) => ({ baseline: dist(oks(k).flatMap((o) => l(o).baselineUs)), during: dist(oks(k).flatMap((o) => l(o).duringUs)) });
      const pools = Object.fromEntries(kinds.map((k) => [k, pooled(k)])) as Record<BrokerKind, { baseline: Dist; during: Dist }>;
      const pooledRow = (measure: string, f: (p: { baseline: Dist; during: Dist }) => string, r?: (p: { baseline: Dist; during: Dist }) => number) =>
        summary.push([s.title, measure, ...kinds.map((k) => (pools[k].during.n === 0 ? "—" : f(pools[k]))), ...(both ? [r && pools.kafka.during.n > 0 && pools.bunka.during.n > 0 ? (r(pools.bunka) / r(pools.kafka)).toFixed(2) : ""] : [])]);
      pooledRow("every round's records: p50 ms, no cleaning → while cleaning", (p) => `${fmtMs(p.baseline.p50)} → ${fmtMs(p.during.p50)} (${pct(p.during.p50 / p.baseline.p50 - 1)})`, (p) => p.during.p50);
      pooledRow("every round's records: p99 ms, no cleaning → while cleaning", (p) => `${fmtMs(p.baseline.p99)} → ${fmtMs(p.during.p99)} (${pct(p.during.p99 / p.baseline.p99 - 1)})`, (p) => p.during.p99);
      pooledRow("records measured, no cleaning / while cleaning", (p) => `${fmtNum(p.baseline.n)} / ${fmtNum(p.during.n)}`);
      row("cleaned MB/s (under the load)", (o) => o.cleaning.mbPerS, f1);
      if (kinds.includes("bunka") && pools.bunka.during.n > 0) {
        const change = median(oks("bunka").map((o) => l(o).during.p99 / l(o).baseline.p99 - 1))!;
        const all = pools.bunka.during.p99 / pools.bunka.baseline.p99 - 1;
        const met = (x: number) => (x <= 0.1 ? "met" : "NOT met");
        targets.push(
          `(c) bunka's produce p99 while cleaning against the same load without cleaning (goal: within 10%): every round's records together ${pct(all)} (${met(all)}); ` +
            `median of the rounds ${pct(change)} (${met(change)})`,
        );
      }
    }
    for (const r of rs) {
      rounds.push([
        s.title,
        String(r.round),
        ...kinds.map((k) => {
          const o = r.outcomes[k];
          if (!o) return "—";
          if (!o.ok) return "error";
          const busy = busiest(o) >= BUSY_PCT ? " *" : "";
          if (!o.latency) return `${f1(o.cleaning.mbPerS)} MB/s, ${f1(o.cleaning.cpuPerGb)} CPU-s/GiB${busy}`;
          const l = o.latency;
          return `p50 ${fmtMs(l.baseline.p50)} → ${fmtMs(l.during.p50)}, p99 ${fmtMs(l.baseline.p99)} → ${fmtMs(l.during.p99)} ms (${pct(l.during.p99 / l.baseline.p99 - 1)}); ${f1(o.cleaning.mbPerS)} MB/s${busy}`;
        }),
      ]);
    }
  }
  return { summaryHeader, summary, roundsHeader, rounds, targets };
}

function detailOf(kind: BrokerKind, s: Scenario, round: number, o: Ok): string {
  const c = o.cleaning;
  const parts: string[] = [];
  parts.push(
    `fill ${fmtNum(c.fill.records)} records (${fmtNum(c.fill.tombstones)} tombstones), ${f1(c.fill.bytes / MiB)} MiB of keys and values in ${f1(c.fill.seconds)} s ` +
      `(${f1(c.fill.bytes / MiB / c.fill.seconds)} MiB/s, tool ${f1(c.fill.toolCpuS)} CPU-s)`,
  );
  parts.push(`log ${f1(c.before.logBytes / MiB)} MiB in ${c.before.segments} segments (${f1(c.before.inactiveBytes / MiB)} MiB inactive) -> ${f1(c.after.logBytes / MiB)} MiB in ${c.after.segments}`);
  parts.push(
    `${c.passes.length} pass${c.passes.length === 1 ? "" : "es"}${c.missedPasses ? ` (+${c.missedPasses} unseen)` : ""} of ${c.passes.map((p) => f2((p.endMs - p.startMs) / 1000)).join(" + ")} s, ` +
      `first ${f2(c.waitS)} s after the trigger, done ${f2(c.wallS)} s after it`,
  );
  parts.push(
    `broker CPU ${f2(c.brokerCpuS)} s over those ${f2(c.wallS)} s${o.latency ? " (the steady load's included)" : ""}, idle rate ${f2(c.idleCpuPerS)} CPU-s/s, net ${f2(c.netCpuS)} s`,
  );
  if (c.counters) {
    const k = c.counters;
    parts.push(`/metrics: read ${f1((k.read_bytes_total ?? 0) / MiB)} MiB, written ${f1((k.written_bytes_total ?? 0) / MiB)} MiB, reclaimed ${f1((k.reclaimed_bytes_total ?? 0) / MiB)} MiB, ${fmtNum(k.removed_records_total ?? 0)} records removed`);
  }
  const stats = c.passes.at(-1)?.stats;
  if (stats) parts.push(`the cleaner's statistics: ${stats}`);
  if (o.latency) {
    const l = o.latency;
    parts.push(
      `steady load: ${fmtNum(l.sent)} sent, ${fmtNum(l.acked)} acknowledged, sender at most ${fmtMs(l.behindMaxMs)} ms behind schedule, tool ${f1(l.toolCpuS)} CPU-s; ` +
        `no cleaning ${fmtNum(l.baseline.n)} records p99.9 ${fmtMs(l.baseline.p999)} max ${fmtMs(l.baseline.max)} ms (other processes ${l.baselineOtherPct.toFixed(0)}% of the machine); ` +
        `while cleaning ${fmtNum(l.during.n)} records in ${f2(l.windowS)} s, p99.9 ${fmtMs(l.during.p999)} max ${fmtMs(l.during.max)} ms`,
    );
  }
  const warn = busiest(o) >= BUSY_PCT ? ` — WARNING: other processes used ${busiest(o).toFixed(0)}% of the machine, numbers are skewed` : "";
  parts.push(`other processes ${c.otherPct.toFixed(0)}%, kernel threads and interrupts ${c.kernelPct.toFixed(0)}% of the machine while cleaning${warn}`);
  return `round ${round} ${s.title.slice(0, 3)} ${kind}: ${parts.join("; ")}`;
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const load0 = loadavg();
  const kinds: BrokerKind[] = opts.only ? [opts.only] : ["kafka", "bunka"];
  toolClasses = await compileJavaTool("CleanerLoad");
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
  const notes: string[] = [];
  const { results, error } = await runAll(opts, kinds, bunkaBinary, notes);
  if (isInterrupted()) return 130;
  const errors: string[] = error ? [error] : [];
  const details: string[] = [];
  let busyRows = false;
  for (const s of scenarios(opts)) {
    for (const r of results.get(s.id) ?? []) {
      for (const kind of kinds) {
        const o = r.outcomes[kind];
        if (!o) continue;
        if (!o.ok) errors.push(`round ${r.round} ${s.title.slice(0, 3)} ${kind}: ${o.error}`);
        else {
          details.push(detailOf(kind, s, r.round, o));
          if (busiest(o) >= BUSY_PCT) busyRows = true;
        }
      }
    }
  }
  const tables = buildTables(opts, kinds, results);
  const elapsedS = Math.round((Date.now() - t0) / 1000);
  const load1 = loadavg();
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s; load average ${load0.map((l) => l.toFixed(2)).join(" ")} at the start, ${load1.map((l) => l.toFixed(2)).join(" ")} at the end)`,
    `machine: ${env.machine}`,
    `brokers: ${env.kafka}; ${opts.bunkaBinary ? `bunka --bunka-binary ${opts.bunkaBinary} (the work tree: ${env.bunka})` : env.bunka}; ${env.runtime}; both up for the whole run, ` +
      `log.cleaner.backoff.ms=${opts.backoffMs}, log.cleaner.threads=1, log.cleaner.dedupe.buffer.size=128 MiB on both, the other log.cleaner.* settings at their defaults (no I/O throttle)`,
    `load: scripts/bench-java/CleanerLoad.java on the Apache Kafka ${KAFKA_VERSION} Java client (${javacVersion}, ${LOAD_TOOL_JVM.join(" ")}, on the same machine); ` +
      `flags: --rounds ${opts.rounds} --mb ${opts.mb} --keys ${opts.keys} --value-min ${opts.valueMin} --value-max ${opts.valueMax} --tombstone-pct ${opts.tombstonePct} ` +
      `--segment-mb ${opts.segmentMb} --codec ${opts.codec} --rate ${opts.rate} --record-size ${opts.recordSize} --baseline ${opts.baselineS} --latency-mb ${opts.latencyMb} --warmup-mb ${opts.warmupMb} ` +
      `--backoff-ms ${opts.backoffMs}${opts.scenarios.size < 3 ? ` --scenarios ${[...opts.scenarios].sort().join(",")}` : ""}`,
    `data set: one partition, cleanup.policy=compact, segment.bytes=${opts.segmentMb} MiB, min.cleanable.dirty.ratio=${MIN_DIRTY_RATIO}; ${fmtNum(opts.mb)} MiB of keys and values ((c): ${fmtNum(opts.latencyMb)} MiB), ` +
      `each key drawn uniformly from ${fmtNum(opts.keys)}, JSON-like text values of ${opts.valueMin}–${opts.valueMax} B (uniform), ${opts.tombstonePct}% tombstones; ` +
      `produced with acks=all, batch.size=${FILL_BATCH_SIZE}, linger.ms=${FILL_LINGER_MS}, held back by min.compaction.lag.ms until the trigger (IncrementalAlterConfigs min.compaction.lag.ms=0)`,
    "cleaned MB/s = the inactive segments' bytes on disk before cleaning (for (b) compressed bytes) / the time the cleaner worked on the partition (its first pass's start to its last pass's end: " +
      "bunka's /v1/topics view, Apache's log lines); CPU-s per GiB = the broker's CPU (utime+stime) from the trigger until the last pass, less its idle rate measured just before, per GiB of those bytes",
    `(c): ${fmtNum(opts.rate)} records/s of ${fmtNum(opts.recordSize)} B, keyless, acks=all, linger.ms=${STEADY_LINGER_MS}, idempotent (the Java default), from one thread on a fixed schedule, to a second topic; ` +
      `latency from the scheduled send to the acknowledgement; "no cleaning" = records sent in the ${opts.baselineS} s before the trigger (after ${STEADY_WARMUP_S} s of warm-up), ` +
      `"while cleaning" = records sent between the first pass's start and the last pass's end`,
    "durability: bunka fsyncs acks=all produce before answering and fsyncs each cleaned segment and its manifest before swapping it in; " +
      "Apache Kafka with its default flush settings does not fsync on the produce path (it relies on replication, here one replica), and its cleaner flushes each cleaned segment before swapping it in",
    "2 cores for everything: the load tool runs on the same machine. In (a) and (b) nothing else of the benchmark runs while the cleaner works (the other broker idles); " +
      "in (c) the broker's request handling, its cleaner and the Java producer share the two cores: Apache's cleaner is a thread of its own, and so is bunka's (nice 10 on Linux; its segment swaps run on the event loop)",
    `warm-up: before the rounds each broker ran (a), (b) and (c) once, untimed, with ${fmtNum(opts.warmupMb)} MiB data sets ` +
      `(segment.bytes ${fmtNum(Math.max(1, Math.min(opts.segmentMb, Math.floor(opts.warmupMb / 8))))} MiB), so that both JITs are warm; ` +
      "rounds alternate which broker goes first; a median row's ratio is the median of the rounds' ratios",
  ];
  if (busyRows) meta.push(`* = other processes used ${BUSY_PCT}% or more of the machine while that broker cleaned: the number is skewed, run again on a quiet machine`);
  process.stdout.write(
    renderReport({
      title: "Log cleaner benchmark: Apache Kafka vs bunka",
      date: env.date,
      headingLevel: 3,
      kinds,
      meta,
      header: tables.summaryHeader,
      rows: tables.summary,
      tables: [{ caption: "Every round:", header: tables.roundsHeader, rows: tables.rounds }],
      notes: [...tables.targets, ...notes],
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
  log(`bench-cleaner: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  if (!isInterrupted()) await runCleanups(false);
}
if (!isInterrupted()) process.exit(code);
