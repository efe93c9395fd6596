#!/usr/bin/env bun
/**
 * Produce/consume throughput, latency and memory: Apache Kafka against bunka, on the same machine, one
 * after the other, with the same load tool (Apache's Java kafka-producer-perf-test and
 * kafka-consumer-perf-test, configured identically for both). Not a test; see docs/benchmarks.md.
 *
 *   bun scripts/bench-produce-consume.ts [--records N] [--only kafka|bunka] [--idempotence auto|on|off]
 *                                        [--timeout SECONDS] [--data-root DIR]
 *
 * Scenarios, each broker with a fresh data directory per scenario group:
 *   (a) produce, acks=all, 1 KiB records, 1 partition             (broker #1)
 *   (b) produce, acks=all, 1 KiB records, 16 partitions           (broker #2)
 *   (c) consume everything (b) produced, one consumer in a group  (broker #2, after (b))
 *   (d), (e) when the producer is idempotent: (a) and (b) again with enable.idempotence=false, each on a
 *       fresh broker right after its idempotent row, for the cost of idempotence in the same run (issue
 *       5's <= 5% target). Run on both brokers:
 *       the Java producer's own idempotence bookkeeping costs client CPU whichever broker it talks to.
 *
 * The producer runs with the Java producer's defaults (4.1: acks=all, enable.idempotence=true,
 * linger.ms=5, batch.size=16384, max.in.flight=5, no compression) and --throughput -1. Idempotence needs
 * InitProducerId: with --idempotence auto (the default) bunka's ApiVersions is probed first, and when it
 * lacks InitProducerId the run switches to enable.idempotence=false for BOTH brokers and says so.
 *
 * Measured per row: records/s and MB/s as the tools print them (MB = MiB), the producer's p50/p99
 * latency (send() to acknowledgement, which at --throughput -1 includes time queued in the producer's
 * buffer), and the broker's peak RSS during the scenario (VmHWM reset through /proc/<pid>/clear_refs at
 * the start, read at the end, plus VmRSS polled every 200 ms; for Apache Kafka this is the JVM's pid).
 * The consume row uses the consumer tool's fetch.* columns, which exclude the group join (both brokers
 * wait group.initial.rebalance.delay.ms = 3 s before the first rebalance).
 *
 * Progress goes to stderr; the results (a text table, then the same in markdown for docs/benchmarks.md)
 * go to stdout. Everything started here (brokers, tools, temp dirs) is removed at the end, on an error,
 * and on Ctrl-C; every tool run is bounded by --timeout.
 */
import { tmpdir } from "node:os";
import { ensureKafkaLibs, KAFKA_VERSION, TOOL_MAIN_CLASSES } from "../tests/support/apache-kafka.ts";
import {
  type Broker,
  type BrokerKind,
  BUSY_PCT,
  type CpuReport,
  createTopicWithTool,
  ensureBunkaBinary,
  environment,
  fmtNum,
  fmtRss,
  installSignalHandlers,
  isInterrupted,
  type JavaToolRun,
  label,
  log,
  missingApis,
  ratio,
  renderReport,
  runCleanups,
  runJavaTool,
  startBrokerForRows,
  startBunkaBroker,
  startKafkaBroker,
  watchCpu,
  watchPeakRss,
} from "./bench-support.ts";

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  records: number;
  only?: BrokerKind;
  idempotence: "auto" | "on" | "off";
  timeoutMs: number;
  dataRoot: string;
}

const RECORD_SIZE = 1024;
const PARTITIONS_B = 16;
/** The JVM flags tests/support/apache-kafka.ts gives the perf tools (full JIT, 1 GiB heap). */
const PERF_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];

const USAGE = `usage: bun scripts/bench-produce-consume.ts [--records N] [--only kafka|bunka]
       [--idempotence auto|on|off] [--timeout SECONDS] [--data-root DIR]

  --records N        records per produce scenario, consumed again in (c) (default 500000)
  --only B           run one broker only (kafka or bunka)
  --idempotence M    auto (default): the Java default (on) unless bunka lacks InitProducerId, then off
                     for both; on / off: force enable.idempotence for both
  --timeout S        per-tool-run timeout in seconds (default max(120, records/2500))
  --data-root DIR    where the brokers' temporary data dirs go (default ${tmpdir()})
`;

function parseArgs(argv: string[]): Options {
  let records = 500_000;
  let only: BrokerKind | undefined;
  let idempotence: Options["idempotence"] = "auto";
  let timeoutS: number | undefined;
  let dataRoot = tmpdir();
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
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
      default:
        die(`unknown argument ${argv[i]}`);
    }
  }
  const timeoutMs = (timeoutS ?? Math.max(120, Math.ceil(records / 2500))) * 1000;
  return { records, only, idempotence, timeoutMs, dataRoot };
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

// ---------------------------------------------------------------------------------------------
// Scenarios

type ScenarioId = "a" | "b" | "c" | "d" | "e";
interface Scenario {
  id: ScenarioId;
  title: string;
  kind: "produce" | "consume";
  topic: string;
  partitions: number;
  /** A rerun of this idempotent scenario with enable.idempotence=false. */
  withoutIdempotenceOf?: ScenarioId;
}
const SCENARIOS: Record<ScenarioId, Scenario> = {
  a: { id: "a", title: "(a) produce acks=all 1 KiB, 1 partition", kind: "produce", topic: "bench-p1", partitions: 1 },
  b: { id: "b", title: `(b) produce acks=all 1 KiB, ${PARTITIONS_B} partitions`, kind: "produce", topic: "bench-p16", partitions: PARTITIONS_B },
  c: { id: "c", title: `(c) consume (b), ${PARTITIONS_B} partitions`, kind: "consume", topic: "bench-p16", partitions: PARTITIONS_B },
  d: { id: "d", title: "(d) = (a), enable.idempotence=false", kind: "produce", topic: "bench-p1", partitions: 1, withoutIdempotenceOf: "a" },
  e: { id: "e", title: "(e) = (b), enable.idempotence=false", kind: "produce", topic: "bench-p16", partitions: PARTITIONS_B, withoutIdempotenceOf: "b" },
};
/** Each group runs on a freshly started broker with an empty data dir. */
const GROUPS: ScenarioId[][] = [["a"], ["b", "c"]];
/**
 * The order when the producer is idempotent: each produce row is followed at once by its rerun without
 * idempotence, so that the two run as close together as possible (on a shared machine, the conditions
 * drift over minutes).
 */
const GROUPS_WITH_OVERHEAD: ScenarioId[][] = [["a"], ["d"], ["b", "c"], ["e"]];

interface Ok {
  ok: true;
  recPerSec: number;
  mbPerSec: number;
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

const PRODUCER_SUMMARY =
  /(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th/;

function producerProps(broker: Broker, idempotent: boolean): string[] {
  // Java producer defaults otherwise; acks=all is the 4.1 default too, spelled out for the reader.
  return [`bootstrap.servers=${broker.bootstrap}`, "acks=all", ...(idempotent ? [] : ["enable.idempotence=false"]), "client.id=bench-producer"];
}

async function runScenario(broker: Broker, s: Scenario, opts: Options, idempotentDefault: boolean, produced: Map<ScenarioId, number>): Promise<Outcome> {
  const label = `${broker.kind} ${s.id}`;
  const idempotent = s.withoutIdempotenceOf === undefined && idempotentDefault;
  const needed = s.kind === "produce" ? [3, 19, 0, ...(idempotent ? [22] : [])] : CONSUME_APIS;
  const missing = missingApis(broker.apis, needed);
  if (missing.length > 0) return { ok: false, error: `not supported (ApiVersions lacks ${missing.join(", ")})` };

  if (s.kind === "produce") {
    try {
      await createTopicWithTool(broker, s.topic, s.partitions);
    } catch (e) {
      return { ok: false, error: (e as Error).message };
    }
    const watch = watchPeakRss(broker.pid);
    const cpu = watchCpu(broker.pid);
    const run = await runPerfTool(
      "kafka-producer-perf-test",
      [
        "--topic", s.topic,
        "--num-records", String(opts.records),
        "--record-size", String(RECORD_SIZE),
        "--throughput", "-1",
        "--producer-props", ...producerProps(broker, idempotent),
      ],
      label,
      opts.timeoutMs,
    );
    const peakRssKb = watch.stop();
    const cpuReport = cpu.stop(run.cpuMicros);
    const m = run.stdout.match(PRODUCER_SUMMARY);
    if (run.timedOut) return { ok: false, error: `timed out after ${opts.timeoutMs / 1000} s; ${lastProgress(run)}${errorSuffix(run)}`, peakRssKb };
    if (!m) return { ok: false, error: `no summary line (exit ${run.code}): ${firstError(run)}`, peakRssKb };
    const sent = Number(m[1]);
    if (sent !== opts.records) return { ok: false, error: `only ${sent} of ${opts.records} records acknowledged${errorSuffix(run)}`, peakRssKb };
    // The broker must hold what it acknowledged: the end offsets of the topic's partitions add up to it.
    const stored = await endOffsetSum(broker, s);
    if (typeof stored === "string") return { ok: false, error: `records acknowledged, but ${stored}`, peakRssKb };
    if (stored < sent) return { ok: false, error: `${sent} records acknowledged, but the end offsets add up to ${stored}`, peakRssKb };
    produced.set(s.id, stored);
    return {
      ok: true,
      recPerSec: Number(m[2]),
      mbPerSec: Number(m[3]),
      p50Ms: Number(m[6]),
      p99Ms: Number(m[8]),
      peakRssKb,
      cpu: cpuReport,
      detail: `${stored === sent ? "end offsets add up to the records sent" : `end offsets add up to ${stored} (duplicates)`}; latency avg ${m[4]} ms, p95 ${m[7]} ms, p99.9 ${m[9]} ms, max ${Number(m[5]).toFixed(0)} ms`,
    };
  }

  const source: ScenarioId = "b";
  const expected = produced.get(source);
  if (expected === undefined) return { ok: false, error: `nothing to consume: (${source}) did not complete` };
  const watch = watchPeakRss(broker.pid);
  const cpu = watchCpu(broker.pid);
  const run = await runPerfTool(
    "kafka-consumer-perf-test",
    ["--bootstrap-server", broker.bootstrap, "--topic", s.topic, "--messages", String(expected), "--group", `bench-consumer-${s.id}`],
    label,
    opts.timeoutMs,
  );
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
    peakRssKb,
    cpu: cpuReport,
    detail:
      `fetch ${row["fetch.time.ms"]} ms after a ${row["rebalance.time.ms"]} ms group join; ` +
      `including the join: ${fmtNum(row["nMsg.sec"]!)} rec/s, ${row["MB.sec"]!.toFixed(2)} MB/s`,
  };
}

/** Sum of the topic's latest offsets (GetOffsetShell, i.e. ListOffsets), or why it could not be read. */
async function endOffsetSum(broker: Broker, s: Scenario): Promise<number | string> {
  const run = await runJava(
    "org.apache.kafka.tools.GetOffsetShell",
    ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx512m"],
    ["--bootstrap-server", broker.bootstrap, "--topic", s.topic, "--time", "-1"],
    "",
    60_000,
  );
  const lines = run.stdout.split("\n").map((l) => l.trim().match(/^(.+):(\d+):(\d+)$/)).filter((m) => m !== null);
  if (run.code !== 0 || lines.length !== s.partitions) {
    return `the end offsets could not be read (GetOffsetShell exit ${run.code}, ${lines.length} of ${s.partitions} partitions)${errorSuffix(run)}`;
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
  for (const k of ["data.consumed.in.nMsg", "fetch.nMsg.sec", "fetch.MB.sec", "nMsg.sec", "MB.sec"]) if (!Number.isFinite(out[k])) return undefined;
  return out;
}

/** Runs every scenario group on fresh brokers of one kind. A broker that fails fails its rows, not the run. */
async function runBroker(
  kind: BrokerKind,
  opts: Options,
  idempotent: boolean,
  bunkaBinary: string | Error | undefined,
): Promise<Map<ScenarioId, Outcome>> {
  const results = new Map<ScenarioId, Outcome>();
  const produced = new Map<ScenarioId, number>();
  const groups = idempotent ? GROUPS_WITH_OVERHEAD : GROUPS;
  for (const group of groups) {
    if (isInterrupted()) break;
    log(`\n== ${kind}: starting a fresh broker for ${group.map((id) => `(${id})`).join(" ")}`);
    const broker = await startBrokerForRows(kind, bunkaBinary, (binary) => (kind === "kafka" ? startKafkaBroker(opts.dataRoot) : startBunkaBroker(binary, opts.dataRoot)));
    if ("error" in broker) {
      for (const id of group) results.set(id, { ok: false, error: broker.error });
      continue;
    }
    try {
      for (const id of group) {
        if (isInterrupted()) break;
        const s = SCENARIOS[id];
        log(`-- ${kind} ${s.title}`);
        const started = Date.now();
        let outcome: Outcome;
        try {
          outcome = await runScenario(broker, s, opts, idempotent, produced);
        } catch (e) {
          outcome = { ok: false, error: (e as Error).message };
        }
        if (isInterrupted()) break;
        if (!outcome.ok && !broker.alive()) outcome.error += ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`;
        results.set(id, outcome);
        log(
          outcome.ok
            ? `${kind} ${s.id}: ${fmtNum(outcome.recPerSec)} rec/s, ${outcome.mbPerSec.toFixed(2)} MB/s, peak RSS ${fmtRss(outcome.peakRssKb)} (${((Date.now() - started) / 1000).toFixed(1)} s)`
            : `${kind} ${s.id}: ${kind}: ${outcome.error}`,
        );
      }
    } finally {
      log(`${kind}: stopping the broker`);
      await broker.stop();
    }
  }
  return results;
}


function cells(o: Outcome | undefined) {
  if (!o) return { rec: "—", mb: "—", lat: "—", rss: "—" };
  if (!o.ok) return { rec: "error", mb: "—", lat: "—", rss: o.peakRssKb === undefined ? "—" : fmtRss(o.peakRssKb) };
  return {
    rec: fmtNum(o.recPerSec) + (o.cpu.otherPct >= BUSY_PCT ? " *" : ""),
    mb: o.mbPerSec.toFixed(1),
    lat: o.p50Ms === undefined ? "n/a" : `${o.p50Ms} / ${o.p99Ms} ms`,
    rss: fmtRss(o.peakRssKb),
  };
}

function buildRows(kinds: BrokerKind[], results: Record<BrokerKind, Map<ScenarioId, Outcome>>): { header: string[]; rows: string[][] } {
  const both = kinds.length === 2;
  const header = both
    ? ["scenario", "Kafka rec/s", "bunka rec/s", "ratio bunka/Kafka", "Kafka MB/s", "bunka MB/s", "Kafka p50/p99", "bunka p50/p99", "Kafka peak RSS", "bunka peak RSS", "RSS ratio"]
    : ["scenario", `${label(kinds[0]!)} rec/s`, `${label(kinds[0]!)} MB/s`, `${label(kinds[0]!)} p50/p99`, `${label(kinds[0]!)} peak RSS`];
  const rows: string[][] = [];
  for (const s of Object.values(SCENARIOS)) {
    const k = results.kafka.get(s.id);
    const b = results.bunka.get(s.id);
    if (k === undefined && b === undefined) continue; // (d), (e) when they did not run
    if (both) {
      const kc = cells(k);
      const bc = cells(b);
      rows.push([
        s.title,
        kc.rec,
        bc.rec,
        ratio(b?.ok ? b.recPerSec : undefined, k?.ok ? k.recPerSec : undefined),
        kc.mb,
        bc.mb,
        kc.lat,
        bc.lat,
        kc.rss,
        bc.rss,
        ratio(b?.peakRssKb, k?.peakRssKb),
      ]);
    } else {
      const c = cells(results[kinds[0]!].get(s.id));
      rows.push([s.title, c.rec, c.mb, c.lat, c.rss]);
    }
  }
  return { header, rows };
}


// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const kinds: BrokerKind[] = opts.only ? [opts.only] : ["kafka", "bunka"];
  await ensureKafkaLibs();
  const env = await environment(opts.dataRoot);

  // bunka's binary, and whether it serves InitProducerId (decides enable.idempotence for both brokers).
  let bunkaBinary: string | Error | undefined;
  let idempotent = opts.idempotence !== "off";
  let idempotenceNote: string;
  const needBunka = kinds.includes("bunka") || opts.idempotence === "auto";
  if (needBunka) {
    try {
      bunkaBinary = await ensureBunkaBinary();
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
        "enable.idempotence=false for BOTH brokers: bunka does not serve InitProducerId yet, " +
        "so the Java default (idempotence on, since 3.0) would fail against it";
    }
  } else {
    idempotenceNote = `enable.idempotence=${idempotent} for both brokers (--idempotence ${opts.idempotence})`;
  }
  log(`producer: ${idempotenceNote}`);

  const results: Record<BrokerKind, Map<ScenarioId, Outcome>> = { kafka: new Map(), bunka: new Map() };
  for (const kind of kinds) {
    if (isInterrupted()) break;
    results[kind] = await runBroker(kind, opts, idempotent, bunkaBinary);
  }
  if (isInterrupted()) return 130;
  const elapsedS = Math.round((Date.now() - t0) / 1000);

  const { header, rows } = buildRows(kinds, results);
  // The cost of idempotence per broker: each idempotent produce row against its rerun without it.
  const overhead: string[] = [];
  for (const kind of kinds) for (const s of Object.values(SCENARIOS)) {
    if (s.withoutIdempotenceOf === undefined) continue;
    const on = results[kind].get(s.withoutIdempotenceOf);
    const off = results[kind].get(s.id);
    if (!on?.ok || !off?.ok) continue;
    const cost = (1 - on.recPerSec / off.recPerSec) * 100;
    overhead.push(
      `idempotence on ${label(kind)}, (${s.withoutIdempotenceOf}) vs (${s.id}): ${fmtNum(on.recPerSec)} rec/s idempotent, ` +
        `${fmtNum(off.recPerSec)} without, ratio ${(on.recPerSec / off.recPerSec).toFixed(2)} ` +
        `(${cost >= 0 ? `${cost.toFixed(1)}% slower` : `${(-cost).toFixed(1)}% faster`} with idempotence)`,
    );
  }
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s)`,
    `machine: ${env.machine}`,
    `brokers: ${env.kafka}; ${env.bunka}; ${env.runtime}`,
    `load: Apache kafka-producer-perf-test / kafka-consumer-perf-test ${KAFKA_VERSION} (Java, -Xmx1g, on the same machine), ` +
      `${fmtNum(opts.records)} records of ${RECORD_SIZE} B per produce scenario, --throughput -1`,
    `producer: Java producer defaults (acks=all, linger.ms=5, batch.size=16384, max.in.flight=5, no compression); ${idempotenceNote}`,
    "consumer: one consumer in a fresh group; rec/s and MB/s are the tool's fetch.* columns (the ~3 s group join excluded)",
    "durability: bunka fsyncs acks=-1 (all) writes before answering them; Apache Kafka with its default flush " +
      "settings does not fsync (it relies on replication, and here there is one replica)",
    "MB = MiB as the tools print it; p50/p99 = the producer tool's send-to-ack latency; peak RSS = the broker " +
      "process's VmHWM / max VmRSS during the scenario (the JVM for Apache Kafka)",
  ];
  const errors: string[] = [];
  const details: string[] = [];
  for (const s of Object.values(SCENARIOS)) {
    for (const kind of kinds) {
      const o = results[kind].get(s.id);
      if (!o) continue;
      if (!o.ok) errors.push(`${s.title.slice(0, 3)} ${kind}: ${o.error}`);
      else {
        const busy = o.cpu.otherPct >= BUSY_PCT ? ` — WARNING: other processes used ${o.cpu.otherPct.toFixed(0)}% of the machine, numbers are skewed` : "";
        details.push(
          `${s.title.slice(0, 3)} ${kind}: ${o.detail}; CPU: broker ${o.cpu.brokerS.toFixed(1)} s, tool ${o.cpu.toolS.toFixed(1)} s, ` +
            `other processes ${o.cpu.otherPct.toFixed(0)}% of the machine${busy}`,
        );
      }
    }
  }

  const skewed = [...results.kafka.values(), ...results.bunka.values()].some((o) => o.ok && o.cpu.otherPct >= BUSY_PCT);
  if (skewed) meta.push(`* = other processes used ${BUSY_PCT}% or more of the machine during that scenario: the number is skewed, run again on a quiet machine`);
  process.stdout.write(
    renderReport({
      title: "Produce/consume benchmark: Apache Kafka vs bunka",
      date: env.date,
      headingLevel: 3,
      kinds,
      meta,
      header,
      rows,
      notes: overhead,
      errors,
      details,
    }),
  );
  return 0;
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
