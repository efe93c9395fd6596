#!/usr/bin/env bun
/**
 * Produce/consume throughput, latency, broker CPU and memory: Apache Kafka against bunka (and, with
 * --kafka-flush, against Apache Kafka fsyncing every batch), on the same machine, with the same load tool
 * (Apache's Java kafka-producer-perf-test and kafka-consumer-perf-test, configured identically for every
 * broker). Not a test; see docs/benchmarks.md.
 *
 *   bun scripts/bench-produce-consume.ts [--rounds N] [--broker-warmup S] [--records N] [--kafka-flush]
 *                                        [--only kafka|bunka] [--idempotence auto|on|off] [--timeout SECONDS]
 *                                        [--data-root DIR] [--bunka-binary PATH] [--tls]
 *
 * One mode, interleaved rounds; --rounds 1 (the default) is the single pass. For each group of scenarios every
 * broker is started once with an empty data dir and all of them stay up for the group; each is WARMED first
 * with --broker-warmup (30) s of untimed load (two thirds producing to a 16-partition topic, then that topic
 * consumed; Apache Kafka's JIT needs that long, and a cold JVM would halve its numbers), then the rounds run:
 * each round runs every scenario of the group on every broker, in the order given in odd rounds (Apache
 * Kafka, [Apache Kafka fsync per batch,] bunka) and reversed in even ones, so that a drift of the machine's
 * speed hits both ends of a ratio alike. Each row writes a topic of its own, deleted (and its files waited
 * for) once no later row needs it, so the disk holds one round's data at most.
 *   (a) produce, acks=all, 1 KiB records, 1 partition             (group 1)
 *   (b) produce, acks=all, 1 KiB records, 16 partitions           (group 2)
 *   (c) consume everything this round's (b) produced on that broker, one consumer in a fresh group (group 2)
 *   (d), (e) when the producer is idempotent: (a) and (b) again with enable.idempotence=false, each right
 *       after its idempotent row in the same round, for the cost of idempotence (the Java producer's own
 *       bookkeeping costs client CPU whichever broker it talks to, so both run it).
 *
 * The report gives, per scenario and measure, each broker's median over the rounds with the range (min–max),
 * and bunka's median divided by each other broker's median (the ratio of the medians); then every round.
 *
 * Durability, stated in the report next to the figures:
 *   - bunka answers acks=all once the batch is fsynced (group commit: one fsync, or with its default
 *     fsync.mode=batched one syncfs, shared by the appends that arrived meanwhile).
 *   - Apache Kafka with its defaults (log.flush.interval.messages and log.flush.interval.ms: never) answers once
 *     the batch is in the page cache: no fsync before the answer; it relies on replication, and here there is
 *     one replica.
 *   - --kafka-flush adds Apache Kafka with log.flush.interval.messages=1. Found in its source (UnifiedLog.append,
 *     LocalLog / LogSegment.flush, ReplicaManager.appendRecords): the flush is synchronous in the produce path.
 *     The append ends, under the partition's lock on the request handler thread, with flush() once
 *     unflushedMessages >= flush.messages, FileChannel.force(true) of the segment plus its indexes, before the
 *     Produce answer is built (with acks=all and one in-sync replica it is not delayed further). So every
 *     batch is fsynced before its answer, one fsync per partition batch of a request, not shared between
 *     requests.
 *
 * The producer runs with the Java producer's defaults (4.1: acks=all, enable.idempotence=true, linger.ms=5,
 * batch.size=16384, max.in.flight=5, no compression) and --throughput -1. Idempotence needs InitProducerId:
 * with --idempotence auto (the default) bunka's ApiVersions is probed first, and when it lacks InitProducerId
 * the run switches to enable.idempotence=false for every broker and says so.
 *
 * Measured per row: records/s and MB/s as the tools print them (MB = MiB), the producer's p50/p99 latency
 * (send() to acknowledgement, which at --throughput -1 includes time queued in the producer's buffer), the
 * broker process's CPU seconds (utime+stime) per GiB moved, and its peak RSS during the row (VmHWM reset
 * through /proc/<pid>/clear_refs at the start, read at the end, plus VmRSS polled every 200 ms; for Apache
 * Kafka this is the JVM's pid). The consume row uses the consumer tool's fetch.* columns, which exclude the
 * group join (both brokers wait group.initial.rebalance.delay.ms = 3 s before the first rebalance). The
 * brokers waiting for their turn, the kernel's threads (which complete fsyncs) and everything else on the
 * machine are measured apart; rows where other processes used 10% of the machine or more are marked.
 *
 * --tls: both brokers get an SSL listener with the same PEM certificate (made by openssl for the run) and every
 * Java tool connects to it with security.protocol=SSL and a PEM truststore (server-side TLS only, no client
 * certificates); bench-support.ts's BenchTls says how each broker is configured.
 *
 * Progress goes to stderr; the results (a text table, then the same in markdown for docs/benchmarks.md) go to
 * stdout. Everything started here (brokers, tools, temp dirs) is removed at the end, on an error, and on
 * Ctrl-C; every tool run is bounded by --timeout.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { resolve } from "node:path";
import { ensureKafkaLibs, KAFKA_VERSION, TOOL_MAIN_CLASSES } from "../tests/support/apache-kafka.ts";
import {
  type Broker,
  type BrokerKind,
  type BrokerVariant,
  type BenchTls,
  BUSY_PCT,
  type CpuReport,
  createTopicWithTool,
  deleteTopicAndWait,
  ensureBunkaBinary,
  environment,
  fmtNum,
  fmtRss,
  installSignalHandlers,
  isInterrupted,
  type JavaToolRun,
  KAFKA_FLUSH_FINDING,
  KAFKA_FLUSH_PROPERTIES,
  label,
  loadAverages,
  log,
  median,
  medianSpread,
  missingApis,
  renderReport,
  roundOrder,
  runCleanups,
  runGuardedRow,
  runJavaTool,
  setUpBenchTls,
  startBunkaBroker,
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
  records: number;
  only?: BrokerKind;
  kafkaFlush: boolean;
  idempotence: "auto" | "on" | "off";
  timeoutMs: number;
  dataRoot: string;
  rounds: number;
  /** Seconds of untimed load on each freshly started broker before its group's first round. */
  brokerWarmupS: number;
  bunkaBinary?: string;
  /** --tls: the tools reach both brokers over an SSL listener. */
  tls: boolean;
}

const RECORD_SIZE = 1024;
const PARTITIONS_B = 16;
const GIB = 1024 ** 3;
/** The JVM flags tests/support/apache-kafka.ts gives the perf tools (full JIT, 1 GiB heap). */
const PERF_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];
/**
 * Apache Kafka removes a deleted topic's files log.segment.delete.delay.ms (the broker default of the topic
 * config file.delete.delay.ms, 60 s) after the deletion; the rows' topics are deleted between rows and waited
 * for, so the Kafka brokers get a short delay. It is not on any measured path.
 */
const KAFKA_DELETE_DELAY_MS = 1000;
const WARMUP_TOPIC = "bench-warmup";
/** "As many as it sends in the time": the warm-up producer is stopped when its time is up. */
const WARMUP_RECORDS = 1_000_000_000;

const USAGE = `usage: bun scripts/bench-produce-consume.ts [--rounds N] [--broker-warmup S] [--records N]
       [--kafka-flush] [--only kafka|bunka] [--idempotence auto|on|off] [--timeout SECONDS]
       [--data-root DIR] [--bunka-binary PATH] [--tls]

  --rounds N         rounds per scenario group, each running every scenario on every broker, the order
                     reversed from one round to the next (default 1); the report gives medians and ranges
  --broker-warmup S  untimed load on each freshly started broker before its group's rounds: 2/3 of it
                     (at least 5 s) producing to a ${PARTITIONS_B}-partition topic, then that topic consumed
                     (default 30; 0: none, Apache Kafka then runs on a cold JVM)
  --records N        records per produce row, consumed again in (c) (default 500000)
  --kafka-flush      also run Apache Kafka with ${Object.entries(KAFKA_FLUSH_PROPERTIES).map(([k, v]) => `${k}=${v}`).join(" ")}, which fsyncs every
                     batch before answering: the like-for-like durability reference for bunka
  --only B           run one broker only (kafka or bunka; --kafka-flush still adds its variant)
  --idempotence M    auto (default): the Java default (on) unless bunka lacks InitProducerId, then off
                     for every broker; on / off: force enable.idempotence for all
  --timeout S        per-tool-run timeout in seconds (default max(120, records/500))
  --data-root DIR    where the brokers' temporary data dirs go (default ${tmpdir()})
  --bunka-binary P   run this bunka executable (default: dist/bunka-linux-x64, rebuilt when older than src/)
  --tls              both brokers get an SSL listener (same PEM certificate) and the tools connect over TLS
                     (security.protocol=SSL, PEM truststore; no client certificates)
`;

function parseArgs(argv: string[]): Options {
  let records = 500_000;
  let only: BrokerKind | undefined;
  let kafkaFlush = false;
  let idempotence: Options["idempotence"] = "auto";
  let timeoutS: number | undefined;
  let dataRoot = tmpdir();
  let rounds = 1;
  let brokerWarmupS = 30;
  let bunkaBinary: string | undefined;
  let tls = false;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined) die(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--records":
        records = Number(value());
        if (!Number.isInteger(records) || records < 1) die("--records must be a positive integer");
        break;
      case "--rounds":
        rounds = Number(value());
        if (!Number.isInteger(rounds) || rounds < 1) die("--rounds must be a positive integer");
        break;
      case "--broker-warmup":
        brokerWarmupS = Number(value());
        if (!Number.isFinite(brokerWarmupS) || brokerWarmupS < 0) die("--broker-warmup must be a number of seconds >= 0");
        break;
      case "--kafka-flush":
        if (inline !== undefined) die("--kafka-flush takes no value");
        kafkaFlush = true;
        break;
      case "--tls":
        if (inline !== undefined) die("--tls takes no value");
        tls = true;
        break;
      case "--only": {
        const v = value();
        if (v !== "kafka" && v !== "bunka") die("--only takes kafka or bunka");
        only = v;
        break;
      }
      case "--idempotence": {
        const v = value();
        if (v !== "auto" && v !== "on" && v !== "off") die("--idempotence takes auto, on or off");
        idempotence = v;
        break;
      }
      case "--timeout":
        timeoutS = Number(value());
        if (!(timeoutS > 0)) die("--timeout must be a positive number of seconds");
        break;
      case "--data-root":
        dataRoot = value();
        break;
      case "--bunka-binary":
        bunkaBinary = resolve(value());
        if (!existsSync(bunkaBinary)) die(`--bunka-binary: ${bunkaBinary} does not exist`);
        break;
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
      default:
        die(`unknown argument ${argv[i]}`);
    }
  }
  // A bound for a hung tool, not a measurement: Apache Kafka fsyncing every batch may run at 1,000 records/s on a busy disk.
  const timeoutMs = (timeoutS ?? Math.max(120, Math.ceil(records / 500))) * 1000;
  return { records, only, kafkaFlush, idempotence, timeoutMs, dataRoot, rounds, brokerWarmupS, bunkaBinary, tls };
}

function die(message: string): never {
  process.stderr.write(`bench-produce-consume: ${message}\n\n${USAGE}`);
  process.exit(2);
}

const CONSUME_APIS = [3, 1, 2, 10, 11, 14, 12, 9, 8, 13];

// ---------------------------------------------------------------------------------------------
// Perf tools

type ToolRun = JavaToolRun;

/** Runs a perf tool's main class with a hard timeout, echoing its progress lines to our stderr. */
function runPerfTool(
  tool: "kafka-producer-perf-test" | "kafka-consumer-perf-test",
  args: string[],
  label: string,
  timeoutMs: number,
): Promise<ToolRun> {
  return runJava(TOOL_MAIN_CLASSES[tool], PERF_TOOL_JVM, args, label, timeoutMs);
}

/** Runs a Kafka tool class on the fetched classpath; stdout lines are echoed to stderr as `  [label] ...` (label "": not echoed). */
function runJava(mainClass: string, jvm: string[], args: string[], label: string, timeoutMs: number): Promise<ToolRun> {
  return runJavaTool({ mainClass, jvm, args, label, timeoutMs });
}

/** The most telling line of a failed tool run. */
function firstError(run: ToolRun): string {
  const lines = run.stderr.split("\n").map((l) => l.trim()).filter(Boolean);
  const line =
    lines.find((l) => /^(org\.apache|java\.|kafka\.)\S*(Exception|Error)/.test(l)) ??
    lines.find((l) => /Exception|ERROR|Error/.test(l)) ??
    lines.at(-1) ??
    run.stdout.trim().split("\n").at(-1) ??
    "";
  return line.length > 240 ? `${line.slice(0, 240)}...` : line;
}

function producerArgs(broker: Broker, topic: string, records: number, idempotent: boolean): string[] {
  return [
    "--topic", topic,
    "--num-records", String(records),
    "--record-size", String(RECORD_SIZE),
    "--throughput", "-1",
    // Java producer defaults otherwise; acks=all is the 4.1 default too, spelled out for the reader.
    ...toolConfigArgs(broker, "--producer.config"),
    "--producer-props", `bootstrap.servers=${broker.bootstrap}`, "acks=all", ...(idempotent ? [] : ["enable.idempotence=false"]), "client.id=bench-producer",
  ];
}

const consumerArgs = (broker: Broker, topic: string, records: number, group: string): string[] => [
  "--bootstrap-server", broker.bootstrap, ...toolConfigArgs(broker, "--consumer.config"), "--topic", topic, "--messages", String(records), "--group", group,
];

// ---------------------------------------------------------------------------------------------
// Scenarios

type ScenarioId = "a" | "b" | "c" | "d" | "e";
interface Scenario {
  id: ScenarioId;
  title: string;
  kind: "produce" | "consume";
  partitions: number;
  /** A rerun of this idempotent scenario with enable.idempotence=false. */
  withoutIdempotenceOf?: ScenarioId;
  /** consume: the produce scenario whose topic (of the same round, on the same broker) is read. */
  source?: ScenarioId;
}
const SCENARIOS: Record<ScenarioId, Scenario> = {
  a: { id: "a", title: "(a) produce acks=all 1 KiB, 1 partition", kind: "produce", partitions: 1 },
  b: { id: "b", title: `(b) produce acks=all 1 KiB, ${PARTITIONS_B} partitions`, kind: "produce", partitions: PARTITIONS_B },
  c: { id: "c", title: `(c) consume (b), ${PARTITIONS_B} partitions`, kind: "consume", partitions: PARTITIONS_B, source: "b" },
  d: { id: "d", title: "(d) = (a), enable.idempotence=false", kind: "produce", partitions: 1, withoutIdempotenceOf: "a" },
  e: { id: "e", title: "(e) = (b), enable.idempotence=false", kind: "produce", partitions: PARTITIONS_B, withoutIdempotenceOf: "b" },
};
/** Each group runs on freshly started brokers with empty data dirs; a group's rows run in this order. */
const GROUPS: ScenarioId[][] = [["a"], ["b", "c"]];
/**
 * The order when the producer is idempotent: each produce row is followed at once by its rerun without
 * idempotence, so that the two run as close together as possible (on a shared machine, the conditions drift
 * over minutes).
 */
const GROUPS_WITH_OVERHEAD: ScenarioId[][] = [["a", "d"], ["b", "c", "e"]];

/** The topic scenario `s` writes (or, consuming, reads) in `round`. */
const topicOf = (s: Scenario, round: number) => `bench-${s.source ?? s.id}-r${round}`;

interface Ok {
  ok: true;
  recPerSec: number;
  mbPerSec: number;
  /** Bytes the row moved (records x record size; consumed: the tool's MB), for the CPU per GiB. */
  bytes: number;
  p50Ms?: number;
  p99Ms?: number;
  peakRssKb?: number;
  cpu: CpuReport;
  detail: string;
}
interface Failed {
  ok: false;
  error: string;
  peakRssKb?: number;
}
type Outcome = Ok | Failed;

const cpuPerGib = (o: Ok) => o.cpu.brokerS / (o.bytes / GIB);

const PRODUCER_SUMMARY =
  /(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th/;

/** What a row needs besides its broker: the other brokers (idle meanwhile) and what this broker's rows produced. */
interface RowContext {
  variant: BrokerVariant;
  round: number;
  idlePids: number[];
  /** topic -> records its broker holds, from the produce rows. */
  produced: Map<string, number>;
}

async function runScenario(broker: Broker, s: Scenario, opts: Options, idempotentDefault: boolean, ctx: RowContext): Promise<Outcome> {
  const tag = `${ctx.variant} r${ctx.round} ${s.id}`;
  const topic = topicOf(s, ctx.round);
  const idempotent = s.withoutIdempotenceOf === undefined && idempotentDefault;
  const needed = s.kind === "produce" ? [3, 19, 0, ...(idempotent ? [22] : [])] : CONSUME_APIS;
  const missing = missingApis(broker.apis, needed);
  if (missing.length > 0) return { ok: false, error: `not supported (ApiVersions lacks ${missing.join(", ")})` };

  if (s.kind === "produce") {
    try {
      await createTopicWithTool(broker, topic, s.partitions);
    } catch (e) {
      return { ok: false, error: (e as Error).message };
    }
    const watch = watchPeakRss(broker.pid);
    const cpu = watchCpu(broker.pid, { kernelApart: true, ...(ctx.idlePids.length > 0 ? { idlePids: ctx.idlePids } : {}) });
    const run = await runPerfTool("kafka-producer-perf-test", producerArgs(broker, topic, opts.records, idempotent), tag, opts.timeoutMs);
    const peakRssKb = watch.stop();
    const cpuReport = cpu.stop(run.cpuMicros);
    const m = run.stdout.match(PRODUCER_SUMMARY);
    if (run.timedOut) return { ok: false, error: `timed out after ${opts.timeoutMs / 1000} s; ${lastProgress(run)}${errorSuffix(run)}`, peakRssKb };
    if (!m) return { ok: false, error: `no summary line (exit ${run.code}): ${firstError(run)}`, peakRssKb };
    const sent = Number(m[1]);
    if (sent !== opts.records) return { ok: false, error: `only ${sent} of ${opts.records} records acknowledged${errorSuffix(run)}`, peakRssKb };
    // The broker must hold what it acknowledged: the end offsets of the topic's partitions add up to it.
    const stored = await endOffsetSum(broker, topic, s.partitions);
    if (typeof stored === "string") return { ok: false, error: `records acknowledged, but ${stored}`, peakRssKb };
    if (stored < sent) return { ok: false, error: `${sent} records acknowledged, but the end offsets add up to ${stored}`, peakRssKb };
    ctx.produced.set(topic, stored);
    return {
      ok: true,
      recPerSec: Number(m[2]),
      mbPerSec: Number(m[3]),
      bytes: sent * RECORD_SIZE,
      p50Ms: Number(m[6]),
      p99Ms: Number(m[8]),
      peakRssKb,
      cpu: cpuReport,
      detail: `${stored === sent ? "end offsets add up to the records sent" : `end offsets add up to ${stored} (duplicates)`}; latency avg ${m[4]} ms, p95 ${m[7]} ms, p99.9 ${m[9]} ms, max ${Number(m[5]).toFixed(0)} ms`,
    };
  }

  const expected = ctx.produced.get(topic);
  if (expected === undefined) return { ok: false, error: `nothing to consume: (${s.source}) did not complete` };
  const watch = watchPeakRss(broker.pid);
  const cpu = watchCpu(broker.pid, { kernelApart: true, ...(ctx.idlePids.length > 0 ? { idlePids: ctx.idlePids } : {}) });
  const run = await runPerfTool("kafka-consumer-perf-test", consumerArgs(broker, topic, expected, `bench-consumer-${s.id}-r${ctx.round}`), tag, opts.timeoutMs);
  const peakRssKb = watch.stop();
  const cpuReport = cpu.stop(run.cpuMicros);
  if (run.timedOut) return { ok: false, error: `timed out after ${opts.timeoutMs / 1000} s${errorSuffix(run)}`, peakRssKb };
  const row = parseConsumerCsv(run.stdout);
  if (!row) return { ok: false, error: `no result line (exit ${run.code}): ${firstError(run)}`, peakRssKb };
  const consumed = row["data.consumed.in.nMsg"] ?? 0;
  if (consumed < expected) return { ok: false, error: `consumed ${consumed} of ${expected} records${errorSuffix(run)}`, peakRssKb };
  return {
    ok: true,
    recPerSec: row["fetch.nMsg.sec"]!,
    mbPerSec: row["fetch.MB.sec"]!,
    bytes: row["data.consumed.in.MB"]! * 1024 * 1024,
    peakRssKb,
    cpu: cpuReport,
    detail:
      `fetch ${row["fetch.time.ms"]} ms after a ${row["rebalance.time.ms"]} ms group join; ` +
      `including the join: ${fmtNum(row["nMsg.sec"]!)} rec/s, ${row["MB.sec"]!.toFixed(2)} MB/s (the broker's CPU and RSS count the join too)`,
  };
}

/** Sum of the topic's latest offsets (GetOffsetShell, i.e. ListOffsets), or why it could not be read. */
async function endOffsetSum(broker: Broker, topic: string, partitions: number): Promise<number | string> {
  const run = await runJava(
    "org.apache.kafka.tools.GetOffsetShell",
    ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx512m"],
    ["--bootstrap-server", broker.bootstrap, ...toolConfigArgs(broker, "--command-config"), "--topic", topic, "--time", "-1"],
    "",
    60_000,
  );
  const lines = run.stdout.split("\n").map((l) => l.trim().match(/^(.+):(\d+):(\d+)$/)).filter((m) => m !== null);
  if (run.code !== 0 || lines.length !== partitions) {
    return `the end offsets could not be read (GetOffsetShell exit ${run.code}, ${lines.length} of ${partitions} partitions)${errorSuffix(run)}`;
  }
  return lines.reduce((sum, m) => sum + Number(m[3]), 0);
}

function lastProgress(run: ToolRun): string {
  const line = run.stdout.trim().split("\n").filter((l) => /records sent/.test(l)).at(-1);
  return line ? `last progress: ${line.trim()}` : "no progress line";
}

function errorSuffix(run: ToolRun): string {
  const e = firstError(run);
  return e ? `; ${e}` : "";
}

/**
 * kafka-consumer-perf-test 4.1 prints a header and one CSV line:
 *   start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
 *   rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
 */
function parseConsumerCsv(stdout: string): Record<string, number> | undefined {
  const lines = stdout.split("\n").map((l) => l.trim());
  const h = lines.findIndex((l) => l.startsWith("start.time,"));
  if (h < 0 || !lines[h + 1]) return undefined;
  const names = lines[h]!.split(",").map((x) => x.trim());
  const values = lines[h + 1]!.split(",").map((x) => x.trim());
  if (values.length !== names.length) return undefined;
  const out: Record<string, number> = {};
  names.forEach((n, i) => (out[n] = Number(values[i])));
  for (const k of ["data.consumed.in.nMsg", "data.consumed.in.MB", "fetch.nMsg.sec", "fetch.MB.sec", "nMsg.sec", "MB.sec"]) if (!Number.isFinite(out[k])) return undefined;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Brokers, warm-up, rounds

/**
 * The untimed warm-up of a freshly started broker: the producer tool at full speed into a 16-partition topic
 * for two thirds of --broker-warmup, at least 5 s (then stopped: it has no duration option), then the consumer tool reads
 * everything that was stored, then the topic is deleted. Returns why it failed, if it did.
 */
async function warmUp(broker: Broker, variant: BrokerVariant, opts: Options, idempotent: boolean): Promise<string | undefined> {
  // At least 5 s: the producer's JVM starts and fetches metadata before its first record.
  const produceMs = Math.max(5000, Math.round((opts.brokerWarmupS * 1000 * 2) / 3));
  log(`-- ${variant} broker warm-up: producing for ${(produceMs / 1000).toFixed(0)} s, then consuming it (not measured)`);
  try {
    await createTopicWithTool(broker, WARMUP_TOPIC, PARTITIONS_B);
    const produce = await runPerfTool("kafka-producer-perf-test", producerArgs(broker, WARMUP_TOPIC, WARMUP_RECORDS, idempotent), `${variant} warm-up`, produceMs);
    if (!produce.timedOut) return `the warm-up producer stopped by itself (exit ${produce.code})${errorSuffix(produce)}`;
    const stored = await endOffsetSum(broker, WARMUP_TOPIC, PARTITIONS_B);
    if (typeof stored === "string") return `warm-up: ${stored}`;
    if (stored === 0) return `the warm-up producer had nothing stored in ${(produceMs / 1000).toFixed(0)} s${errorSuffix(produce)}`;
    const consume = await runPerfTool("kafka-consumer-perf-test", consumerArgs(broker, WARMUP_TOPIC, stored, "bench-warmup"), `${variant} warm-up`, opts.timeoutMs);
    const row = parseConsumerCsv(consume.stdout);
    if (consume.timedOut || !row || (row["data.consumed.in.nMsg"] ?? 0) < stored) {
      return `the warm-up consumer did not read the ${stored} records (exit ${consume.code}${consume.timedOut ? ", timed out" : ""})${errorSuffix(consume)}`;
    }
    log(`${variant} warm-up: ${fmtNum(stored)} records produced and consumed`);
    await deleteTopicAndWait(broker, WARMUP_TOPIC);
    return undefined;
  } catch (e) {
    return `warm-up: ${(e as Error).message}`;
  }
}

/** One round of one scenario: every broker's outcome, and the order they ran in. */
interface RoundResult {
  round: number;
  order: BrokerVariant[];
  outcomes: Partial<Record<BrokerVariant, Outcome>>;
}

interface RunState {
  results: Map<ScenarioId, RoundResult[]>;
  /** Group-level failures (a broker that did not start or warm up) and cleanup trouble. */
  errors: string[];
}

/** Runs one row, turning a thrown error into a failed outcome that says whether the broker died. */
async function runRow(broker: Broker, s: Scenario, opts: Options, idempotent: boolean, ctx: RowContext): Promise<Outcome> {
  return runGuardedRow(broker, () => runScenario(broker, s, opts, idempotent, ctx));
}

function rowLog(variant: BrokerVariant, s: Scenario, o: Outcome, startedMs: number): string {
  const took = `(${((Date.now() - startedMs) / 1000).toFixed(1)} s)`;
  if (!o.ok) return `${variant} ${s.id}: ${o.error} ${took}`;
  const lat = o.p50Ms === undefined ? "" : `, p50/p99 ${o.p50Ms} / ${o.p99Ms} ms`;
  return `${variant} ${s.id}: ${fmtNum(o.recPerSec)} rec/s, ${o.mbPerSec.toFixed(2)} MB/s${lat}, broker ${cpuPerGib(o).toFixed(2)} CPU-s/GiB, peak RSS ${fmtRss(o.peakRssKb)} ${took}`;
}

/**
 * A group: every broker started (empty data dir) and warmed up, then --rounds rounds of the group's rows, the
 * brokers' order reversed every round; a row's topic is deleted once no later row of the round needs it.
 */
async function runGroup(
  group: ScenarioId[],
  variants: BrokerVariant[],
  opts: Options,
  idempotent: boolean,
  bunkaBinary: string | Error | undefined,
  state: RunState,
  tls: BenchTls | undefined,
): Promise<void> {
  const scenarios = group.map((id) => SCENARIOS[id]);
  for (const s of scenarios) state.results.set(s.id, []);
  const brokers = new Map<BrokerVariant, Broker>();
  const failed = new Map<BrokerVariant, string>();
  const produced = new Map<BrokerVariant, Map<string, number>>(variants.map((v) => [v, new Map()]));
  try {
    for (const v of variants) {
      if (isInterrupted()) return;
      log(`\n== ${v}: starting a broker for ${scenarios.map((s) => `(${s.id})`).join(" ")}, ${opts.rounds} round${opts.rounds === 1 ? "" : "s"}`);
      const started = await startVariant(v, bunkaBinary, opts.dataRoot, { kafkaProperties: { "log.segment.delete.delay.ms": KAFKA_DELETE_DELAY_MS }, tls });
      if ("error" in started) failed.set(v, started.error);
      else brokers.set(v, started);
    }
    if (opts.brokerWarmupS > 0) {
      for (const [v, broker] of brokers) {
        if (isInterrupted()) return;
        const error = await warmUp(broker, v, opts, idempotent);
        if (error === undefined) continue;
        log(`${v}: ${error}`);
        failed.set(v, `broker warm-up failed: ${error}${broker.alive() ? "" : ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`}`);
        brokers.delete(v);
        await broker.stop();
      }
    }
    for (const [v, error] of failed) state.errors.push(`${group.map((id) => `(${id})`).join(" ")} ${label(v)}: ${error}`);
    const running = variants.filter((v) => brokers.has(v));
    for (let round = 1; round <= opts.rounds; round++) {
      const order = roundOrder(running, round);
      for (const s of scenarios) {
        const outcomes: Partial<Record<BrokerVariant, Outcome>> = {};
        for (const v of order) {
          if (isInterrupted()) return;
          const broker = brokers.get(v)!;
          log(`-- round ${round}/${opts.rounds}: ${v} ${s.title}`);
          const startedMs = Date.now();
          const idlePids = [...brokers.values()].filter((b) => b !== broker).map((b) => b.pid);
          const outcome = broker.alive()
            ? await runRow(broker, s, opts, idempotent, { variant: v, round, idlePids, produced: produced.get(v)! })
            : { ok: false as const, error: `the broker died earlier (log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})` };
          outcomes[v] = outcome;
          log(rowLog(v, s, outcome, startedMs));
          await dropFinishedTopic(broker, v, s, round, scenarios, state);
        }
        state.results.get(s.id)!.push({ round, order, outcomes });
      }
    }
  } finally {
    for (const [v, broker] of brokers) {
      log(`${v}: stopping the broker`);
      await broker.stop();
    }
  }
}

/** Deletes the topic row `s` wrote or read when no later row of its group reads it (so a round's data at most is on disk). */
async function dropFinishedTopic(broker: Broker, v: BrokerVariant, s: Scenario, round: number, scenarios: Scenario[], state: RunState): Promise<void> {
  const readLater = s.kind === "produce" && scenarios.slice(scenarios.indexOf(s) + 1).some((later) => later.source === s.id);
  if (readLater || !broker.alive()) return;
  const topic = topicOf(s, round);
  try {
    const startedMs = Date.now();
    await deleteTopicAndWait(broker, topic);
    log(`${v}: ${topic} deleted, its files gone after ${((Date.now() - startedMs) / 1000).toFixed(1)} s`);
  } catch (e) {
    const error = `round ${round} ${label(v)}: deleting ${topic} after (${s.id}): ${(e as Error).message}`;
    log(error);
    state.errors.push(error);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

type Measure = { name: string; of: (o: Ok) => number | undefined; fmt: (n: number) => string };

const fmtMs = (ms: number) => (Number.isInteger(ms) ? String(ms) : ms.toFixed(1));
const PRODUCE_MEASURES: Measure[] = [
  { name: "records/s", of: (o) => o.recPerSec, fmt: fmtNum },
  { name: "MB/s", of: (o) => o.mbPerSec, fmt: (n) => n.toFixed(1) },
  { name: "latency p50 ms", of: (o) => o.p50Ms, fmt: fmtMs },
  { name: "latency p99 ms", of: (o) => o.p99Ms, fmt: fmtMs },
  { name: "broker CPU-s per GiB", of: cpuPerGib, fmt: (n) => n.toFixed(2) },
  { name: "broker peak RSS MiB", of: (o) => (o.peakRssKb === undefined ? undefined : o.peakRssKb / 1024), fmt: (n) => n.toFixed(0) },
];
const CONSUME_MEASURES = PRODUCE_MEASURES.filter((m) => !m.name.startsWith("latency"));

/** What an acknowledgement of each variant is worth, in a table cell. */
const ACK_IS: Record<BrokerVariant, string> = {
  kafka: "in the page cache, not fsynced",
  "kafka-flush": "fsynced (every batch)",
  bunka: "fsynced (group commit)",
};

/** The durability line of each variant, for the report's header lines. */
function durabilityLine(v: BrokerVariant): string {
  switch (v) {
    case "bunka":
      return "durability, bunka: acks=all is answered once the batch is fsynced (group commit: one fsync, with its default fsync.mode=batched one syncfs, shared by the appends that arrived meanwhile)";
    case "kafka":
      return "durability, Kafka: default flush settings (log.flush.interval.messages, log.flush.interval.ms: never): acks=all is answered once the batch is in the page cache, no fsync before the answer (Apache Kafka relies on replication; here there is one replica)";
    case "kafka-flush":
      return `durability, Kafka (fsync per batch): ${Object.entries(KAFKA_FLUSH_PROPERTIES).map(([k, val]) => `${k}=${val}`).join(", ")}, otherwise the same broker; found in Apache Kafka's source: ${KAFKA_FLUSH_FINDING}`;
  }
}

function buildTables(variants: BrokerVariant[], state: RunState, rounds: number) {
  const others = variants.includes("bunka") ? variants.filter((v) => v !== "bunka") : [];
  const header = ["scenario", "measure", ...variants.map((v) => `${label(v)}${rounds > 1 ? " median (range)" : ""}`), ...others.map((v) => `bunka/${label(v)}`)];
  const rows: string[][] = [["every row", "an acknowledged write is", ...variants.map((v) => ACK_IS[v]), ...others.map(() => "")]];
  const roundsHeader = ["scenario", "round", "order", ...variants.map(label)];
  const roundRows: string[][] = [];
  for (const s of Object.values(SCENARIOS)) {
    const rs = state.results.get(s.id);
    if (rs === undefined) continue; // (d), (e) when they did not run
    const oks = (v: BrokerVariant) => rs.map((r) => r.outcomes[v]).filter((o): o is Ok => o?.ok === true);
    const values = (v: BrokerVariant, m: Measure) => oks(v).map(m.of).filter((x): x is number => x !== undefined && Number.isFinite(x));
    for (const m of s.kind === "produce" ? PRODUCE_MEASURES : CONSUME_MEASURES) {
      const ratios = others.map((v) => {
        const b = median(values("bunka", m));
        const o = median(values(v, m));
        return b === undefined || o === undefined || o === 0 ? "—" : (b / o).toFixed(2);
      });
      rows.push([s.title, m.name, ...variants.map((v) => medianSpread(values(v, m), m.fmt)), ...ratios]);
    }
    for (const r of rs) {
      roundRows.push([
        s.title,
        String(r.round),
        r.order.map(label).join(", "),
        ...variants.map((v) => {
          const o = r.outcomes[v];
          if (!o) return "not run";
          if (!o.ok) return "error";
          const lat = o.p50Ms === undefined ? "" : `, p50/p99 ${o.p50Ms}/${o.p99Ms} ms`;
          return `${fmtNum(o.recPerSec)} rec/s, ${o.mbPerSec.toFixed(1)} MB/s${lat}, ${cpuPerGib(o).toFixed(2)} CPU-s/GiB, ${fmtRss(o.peakRssKb)}${o.cpu.otherPct >= BUSY_PCT ? " *" : ""}`;
        }),
      ]);
    }
  }
  return { header, rows, roundsHeader, roundRows };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const variants = variantsOf(opts.only, opts.kafkaFlush);
  await ensureKafkaLibs();
  const env = await environment(opts.dataRoot);
  const tls = opts.tls ? setUpBenchTls() : undefined;

  // bunka's binary, and whether it serves InitProducerId (decides enable.idempotence for every broker).
  let bunkaBinary: string | Error | undefined;
  let idempotent = opts.idempotence !== "off";
  let idempotenceNote: string;
  const needBunka = variants.includes("bunka") || opts.idempotence === "auto";
  if (needBunka) {
    try {
      bunkaBinary = opts.bunkaBinary ?? (await ensureBunkaBinary());
    } catch (e) {
      bunkaBinary = e as Error;
    }
  }
  if (opts.idempotence === "auto") {
    let probeError: string | undefined;
    let hasInitProducerId = false;
    if (bunkaBinary instanceof Error) probeError = bunkaBinary.message;
    else {
      log("probing bunka's ApiVersions ...");
      try {
        const probe = await startBunkaBroker(bunkaBinary!, opts.dataRoot);
        hasInitProducerId = probe.apis.has(22);
        await probe.stop();
      } catch (e) {
        probeError = (e as Error).message.split("\n")[0];
      }
    }
    if (probeError !== undefined) {
      idempotent = true;
      idempotenceNote = `enable.idempotence=true (the Java default; bunka could not be probed: ${probeError})`;
    } else if (hasInitProducerId) {
      idempotent = true;
      idempotenceNote = "enable.idempotence=true (the Java producer's default; bunka serves InitProducerId)";
    } else {
      idempotent = false;
      idempotenceNote =
        "enable.idempotence=false for EVERY broker: bunka does not serve InitProducerId yet, " +
        "so the Java default (idempotence on, since 3.0) would fail against it";
    }
  } else {
    idempotenceNote = `enable.idempotence=${idempotent} for every broker (--idempotence ${opts.idempotence})`;
  }
  log(`producer: ${idempotenceNote}`);

  const state: RunState = { results: new Map(), errors: [] };
  for (const group of idempotent ? GROUPS_WITH_OVERHEAD : GROUPS) {
    if (isInterrupted()) break;
    await runGroup(group, variants, opts, idempotent, bunkaBinary, state, tls);
  }
  if (isInterrupted()) return 130;
  const elapsedS = Math.round((Date.now() - t0) / 1000);

  const tables = buildTables(variants, state, opts.rounds);
  // The cost of idempotence per broker: each idempotent produce row against its rerun without it.
  const notes: string[] = [];
  for (const v of variants) for (const s of Object.values(SCENARIOS)) {
    if (s.withoutIdempotenceOf === undefined) continue;
    const recPerSec = (id: ScenarioId) => median((state.results.get(id) ?? []).map((r) => r.outcomes[v]).filter((o): o is Ok => o?.ok === true).map((o) => o.recPerSec));
    const on = recPerSec(s.withoutIdempotenceOf);
    const off = recPerSec(s.id);
    if (on === undefined || off === undefined) continue;
    const cost = (1 - on / off) * 100;
    notes.push(
      `idempotence on ${label(v)}, (${s.withoutIdempotenceOf}) vs (${s.id}), medians: ${fmtNum(on)} rec/s idempotent, ` +
        `${fmtNum(off)} without, ratio ${(on / off).toFixed(2)} ` +
        `(${cost >= 0 ? `${cost.toFixed(1)}% slower` : `${(-cost).toFixed(1)}% faster`} with idempotence)`,
    );
  }
  const flags =
    `--rounds ${opts.rounds} --broker-warmup ${opts.brokerWarmupS} --records ${opts.records}${opts.kafkaFlush ? " --kafka-flush" : ""}` +
    `${opts.only ? ` --only ${opts.only}` : ""} --idempotence ${opts.idempotence} --timeout ${opts.timeoutMs / 1000}${opts.tls ? " --tls" : ""}`;
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s; load average ${loadAverages()} at the end)`,
    `machine: ${env.machine}`,
    `CPUs: ${env.sharing}`,
    `brokers: ${env.kafka}${variants.includes("kafka-flush") ? `, and the same with ${Object.entries(KAFKA_FLUSH_PROPERTIES).map(([k, v]) => `${k}=${v}`).join(" ")} for "Kafka (fsync per batch)"` : ""}` +
      `${variants.some((v) => v !== "bunka") ? `, log.segment.delete.delay.ms=${KAFKA_DELETE_DELAY_MS} (the rows' topics are deleted between rows, and their files waited for)` : ""}; ` +
      `${opts.bunkaBinary ? `bunka --bunka-binary ${opts.bunkaBinary} (the work tree: ${env.bunka})` : env.bunka}, default settings; ${env.runtime}`,
    ...variants.map(durabilityLine),
    ...(tls === undefined ? [] : [tlsLine(tls)]),
    `load: Apache kafka-producer-perf-test / kafka-consumer-perf-test ${KAFKA_VERSION} (Java, ${PERF_TOOL_JVM.join(" ")}, a new JVM per row, on the same machine), ` +
      `${fmtNum(opts.records)} records of ${RECORD_SIZE} B per produce row, --throughput -1; flags: ${flags}`,
    `producer: Java producer defaults (acks=all, linger.ms=5, batch.size=16384, max.in.flight=5, no compression); ${idempotenceNote}`,
    "consumer: one consumer in a fresh group; rec/s and MB/s are the tool's fetch.* columns (the ~3 s group join excluded)",
    `method: per scenario group every broker is started once (empty data dir) and kept up for the group; ` +
      (opts.brokerWarmupS > 0
        ? `each first gets ${opts.brokerWarmupS} s of untimed load (2/3 producing to a ${PARTITIONS_B}-partition topic, then consuming it) so that the JITs are warm; `
        : "no broker warm-up (--broker-warmup 0): Apache Kafka's first rows run on a cold JVM; ") +
      (opts.rounds > 1
        ? `then ${opts.rounds} rounds, each running every row of the group on every broker, the order (see "order" below) reversed from one round to the next; `
        : `then one round (--rounds 1), every row of the group on every broker in the order ${variants.map(label).join(", ")}; `) +
      "each row writes its own topic, deleted once read",
    (opts.rounds > 1 ? "a cell is the median over the rounds with the range (min–max); bunka/X = bunka's median / X's median" : "bunka/X = bunka's value / X's") +
      " (above 1: more for bunka — better for records/s and MB/s, worse for latency, CPU and RSS)",
    "MB = MiB as the tools print it; p50/p99 = the producer tool's send-to-ack latency (whole ms); broker CPU-s per GiB = the broker process's " +
      "utime+stime during the row per GiB of record payload moved; peak RSS = the broker process's VmHWM / max VmRSS during the row (the JVM for Apache Kafka)",
  ];
  const details: string[] = [];
  const errors = [...state.errors];
  let skewed = false;
  for (const s of Object.values(SCENARIOS)) {
    for (const r of state.results.get(s.id) ?? []) {
      for (const v of variants) {
        const o = r.outcomes[v];
        if (!o) continue;
        const where = `round ${r.round} ${s.title.slice(0, 3)} ${label(v)}`;
        if (!o.ok) {
          errors.push(`${where}: ${o.error}`);
          continue;
        }
        const busy = o.cpu.otherPct >= BUSY_PCT;
        skewed ||= busy;
        details.push(
          `${where}: ${o.detail}; CPU: broker ${o.cpu.brokerS.toFixed(1)} s, tool ${o.cpu.toolS.toFixed(1)} s${o.cpu.idleS !== undefined ? `, the idle brokers ${o.cpu.idleS.toFixed(1)} s` : ""}, ` +
            `kernel threads and interrupts ${(o.cpu.kernelPct ?? 0).toFixed(0)}% and other processes ${o.cpu.otherPct.toFixed(0)}% of the machine` +
            (busy ? ` — WARNING: other processes used ${o.cpu.otherPct.toFixed(0)}% of the machine, numbers are skewed` : ""),
        );
      }
    }
  }
  if (skewed) meta.push(`* = other processes used ${BUSY_PCT}% or more of the machine during that row: the number is skewed, run again on a quiet machine`);
  process.stdout.write(
    renderReport({
      title: `Produce/consume benchmark: ${variants.map(label).join(" vs ")}${tls === undefined ? "" : " (over TLS)"}`,
      date: env.date,
      headingLevel: 3,
      kinds: variants,
      meta,
      header: tables.header,
      rows: tables.rows,
      tables: [{ caption: "Every round (order = which broker ran the row first):", header: tables.roundsHeader, rows: tables.roundRows }],
      notes,
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
  log(`bench-produce-consume: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  if (!isInterrupted()) await runCleanups(false);
}
if (!isInterrupted()) process.exit(code);
