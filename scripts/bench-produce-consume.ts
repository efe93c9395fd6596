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
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, release, tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ApacheKafka,
  ensureKafkaLibs,
  javaBin,
  KAFKA_VERSION,
  LOG4J_CONFIG,
  probeBrokerCount,
  REPO_ROOT,
  runKafkaTool,
  startApacheKafka,
  TOOL_MAIN_CLASSES,
} from "../tests/support/apache-kafka.ts";
import { buildTarget, outfileFor } from "./build.ts";

// ---------------------------------------------------------------------------------------------
// Options

type BrokerKind = "kafka" | "bunka";

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

const log = (line: string) => process.stderr.write(`${line}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Cleanup: everything started registers how to undo it; undone in reverse order at the end, on an
// error, or on SIGINT/SIGTERM.

const cleanups = new Map<number, { what: string; fn: (fast: boolean) => Promise<void> | void }>();
let nextCleanupId = 1;
let interrupted = false;

function onCleanup(what: string, fn: (fast: boolean) => Promise<void> | void): () => void {
  const id = nextCleanupId++;
  cleanups.set(id, { what, fn });
  return () => cleanups.delete(id);
}

async function runCleanups(fast: boolean): Promise<void> {
  const entries = [...cleanups.entries()].reverse();
  cleanups.clear();
  for (const [, { what, fn }] of entries) {
    try {
      await fn(fast);
    } catch (e) {
      log(`cleanup of ${what} failed: ${(e as Error).message}`);
    }
  }
}

function installSignalHandlers(): void {
  const handler = (signal: NodeJS.Signals) => {
    if (interrupted) {
      log(`${signal} again: exiting now`);
      process.exit(130); // apache-kafka.ts's exit hook still SIGKILLs the JVMs it started
    }
    interrupted = true;
    log(`${signal}: stopping brokers and tools, removing temp dirs ...`);
    void runCleanups(true).finally(() => process.exit(130));
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
}

function tempDir(root: string, prefix: string): string {
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, prefix));
  onCleanup(dir, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Raw ApiVersions v0 (works on every broker, whatever else it supports)

async function rawRequest(host: string, port: number, payload: Buffer, timeoutMs = 3000): Promise<Buffer> {
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  return await new Promise<Buffer>((resolve, reject) => {
    let buf = Buffer.alloc(0);
    let done = false;
    let sock: { end(): void } | undefined;
    const finish = (err: Error | null, out?: Buffer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        sock?.end();
      } catch {
        /* ignore */
      }
      if (err) reject(err);
      else resolve(out!);
    };
    const timer = setTimeout(() => finish(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
    Bun.connect({
      hostname: host,
      port,
      socket: {
        open(s) {
          sock = s;
          s.write(frame);
        },
        data(_s, chunk) {
          buf = Buffer.concat([buf, chunk]);
          if (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) finish(null, buf.subarray(4, 4 + buf.readInt32BE(0)));
        },
        close: () => finish(new Error(`connection to ${host}:${port} closed without an answer`)),
        error: (_s, e) => finish(e),
        connectError: (_s, e) => finish(e),
      },
    }).catch((e: Error) => finish(e));
  });
}

/** api key -> max version, from an ApiVersions v0 exchange. */
async function apiVersions(host: string, port: number): Promise<Map<number, number>> {
  const clientId = Buffer.from("bunka-bench");
  const req = Buffer.alloc(10 + clientId.length);
  req.writeInt16BE(18, 0); // ApiVersions
  req.writeInt16BE(0, 2);
  req.writeInt32BE(7, 4);
  req.writeInt16BE(clientId.length, 8);
  clientId.copy(req, 10);
  const res = await rawRequest(host, port, req);
  // response header v0: correlation id; body v0: error_code, [api_key, min, max]
  const error = res.readInt16BE(4);
  if (error !== 0) throw new Error(`ApiVersions v0 answered error ${error}`);
  const n = res.readInt32BE(6);
  const out = new Map<number, number>();
  for (let i = 0; i < n; i++) out.set(res.readInt16BE(10 + i * 6), res.readInt16BE(14 + i * 6));
  return out;
}

const API_NAMES: Record<number, string> = {
  0: "Produce",
  1: "Fetch",
  2: "ListOffsets",
  3: "Metadata",
  8: "OffsetCommit",
  9: "OffsetFetch",
  10: "FindCoordinator",
  11: "JoinGroup",
  12: "Heartbeat",
  13: "LeaveGroup",
  14: "SyncGroup",
  19: "CreateTopics",
  22: "InitProducerId",
};
const CONSUME_APIS = [3, 1, 2, 10, 11, 14, 12, 9, 8, 13];

function missingApis(have: Map<number, number>, need: number[]): string[] {
  return need.filter((k) => !have.has(k)).map((k) => `${API_NAMES[k] ?? "api"}(${k})`);
}

// ---------------------------------------------------------------------------------------------
// Memory of a process

function procStatusKb(pid: number, field: "VmRSS" | "VmHWM"): number | undefined {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Resets VmHWM, polls VmRSS every 200 ms; stop() returns the peak in KiB (max of HWM and polls). */
function watchPeakRss(pid: number): { stop(): number | undefined } {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5"); // 5: reset the peak RSS to the current RSS
  } catch {
    /* old kernel or not ours: the polled maximum still counts */
  }
  let max = procStatusKb(pid, "VmRSS") ?? 0;
  const timer = setInterval(() => {
    max = Math.max(max, procStatusKb(pid, "VmRSS") ?? 0);
  }, 200);
  return {
    stop() {
      clearInterval(timer);
      const peak = Math.max(max, procStatusKb(pid, "VmHWM") ?? 0, procStatusKb(pid, "VmRSS") ?? 0);
      return peak > 0 ? peak : undefined;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// CPU: what the broker and the tool used during a scenario, and what everything else on the machine
// used (other load skews the numbers, so it is reported).

const CLK_TCK = 100; // USER_HZ on every Linux we run on (getconf CLK_TCK)

function machineBusyTicks(): number {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  return f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!;
}

function processTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15)
  } catch {
    return 0;
  }
}

interface CpuReport {
  brokerS: number;
  toolS: number;
  /** Share of the whole machine's capacity used by processes other than the broker, the tool and us. */
  otherPct: number;
}

function watchCpu(brokerPid: number): { stop(toolCpuMicros: number): CpuReport } {
  const t0 = performance.now();
  const busy0 = machineBusyTicks();
  const broker0 = processTicks(brokerPid);
  const self0 = process.cpuUsage();
  return {
    stop(toolCpuMicros) {
      const elapsedS = (performance.now() - t0) / 1000;
      const brokerTicks = processTicks(brokerPid) - broker0;
      const self = process.cpuUsage(self0);
      const selfTicks = ((self.user + self.system) / 1e6) * CLK_TCK;
      const toolTicks = (toolCpuMicros / 1e6) * CLK_TCK;
      const other = machineBusyTicks() - busy0 - brokerTicks - toolTicks - selfTicks;
      const capacity = elapsedS * availableParallelism() * CLK_TCK;
      return {
        brokerS: brokerTicks / CLK_TCK,
        toolS: toolCpuMicros / 1e6,
        otherPct: capacity > 0 ? Math.max(0, (100 * other) / capacity) : 0,
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Brokers

interface Broker {
  kind: BrokerKind;
  host: string;
  port: number;
  bootstrap: string;
  pid: number;
  apis: Map<number, number>;
  /** Last lines of the broker's log, for error messages. */
  logTail(): string;
  alive(): boolean;
  stop(): Promise<void>;
}

async function startKafkaBroker(root: string): Promise<Broker> {
  const dataDir = tempDir(root, "bench-kafka-");
  let kafka: ApacheKafka | undefined;
  const undo = onCleanup("Apache Kafka", async () => kafka?.stop());
  kafka = await startApacheKafka({ dataDir });
  let apis: Map<number, number>;
  try {
    apis = await apiVersions("127.0.0.1", kafka.port);
  } catch (e) {
    await kafka.stop();
    undo();
    throw e;
  }
  return {
    kind: "kafka",
    host: "127.0.0.1",
    port: kafka.port,
    bootstrap: kafka.bootstrap,
    pid: kafka.pid,
    apis,
    logTail: () => tailOfFile(kafka!.logFile),
    alive: () => existsSync(`/proc/${kafka!.pid}`),
    async stop() {
      await kafka!.stop();
      undo();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function tailOfFile(path: string, lines = 15): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

async function startBunkaBroker(binary: string, root: string): Promise<Broker> {
  const dataDir = tempDir(root, "bench-bunka-");
  const logFile = `${dataDir}.log`;
  onCleanup(logFile, () => rmSync(logFile, { force: true }));
  const logFd = openSync(logFile, "a");
  const proc = Bun.spawn(
    [binary, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", join(dataDir, "data"), "--log-level", "warn"],
    { stdin: "ignore", stdout: "pipe", stderr: logFd },
  );
  closeSync(logFd);
  let exited = false;
  void proc.exited.then(() => (exited = true));
  let stopped: Promise<void> | undefined;
  const stop = (graceMs: number) =>
    (stopped ??= (async () => {
      if (!exited) {
        proc.kill("SIGTERM");
        const killer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
        await proc.exited;
        clearTimeout(killer);
      }
    })());
  const undo = onCleanup("bunka", (fast) => stop(fast ? 1000 : 5000));

  // The start-up line names the bound address: "bunka 0.1.0 listening kafka=H:P ...".
  const reader = proc.stdout.getReader();
  let out = "";
  const deadline = Date.now() + 20_000;
  let hostPort: RegExpMatchArray | null = null;
  while (!hostPort) {
    const left = deadline - Date.now();
    const chunk = await Promise.race([reader.read(), sleep(Math.max(0, left)).then(() => "timeout" as const)]);
    if (chunk === "timeout" || chunk.done) {
      await stop(1000);
      undo();
      const why = chunk === "timeout" ? "printed no listening line within 20 s" : `exited (code ${proc.exitCode})`;
      throw new Error(`bunka ${why}: ${(out + tailOfFile(logFile, 5)).trim().slice(-800)}`);
    }
    out += new TextDecoder().decode(chunk.value);
    hostPort = out.match(/listening kafka=\[?([^\s\]]+?)\]?:(\d+)/);
  }
  // Keep draining stdout so the broker never blocks on a full pipe.
  void (async () => {
    for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return;
  })();
  const host = hostPort[1]!;
  const port = Number(hostPort[2]);
  while ((await probeBrokerCount(host, port)) <= 0) {
    if (exited || Date.now() > deadline) {
      await stop(1000);
      undo();
      throw new Error(`bunka did not answer Metadata: ${tailOfFile(logFile, 5)}`);
    }
    await sleep(100);
  }
  let apis: Map<number, number>;
  try {
    apis = await apiVersions(host, port);
  } catch (e) {
    await stop(1000);
    undo();
    throw new Error(`bunka's ApiVersions: ${(e as Error).message}`);
  }
  return {
    kind: "bunka",
    host,
    port,
    bootstrap: `${host}:${port}`,
    pid: proc.pid,
    apis,
    logTail: () => tailOfFile(logFile),
    alive: () => !exited,
    async stop() {
      await stop(5000);
      undo();
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(logFile, { force: true });
    },
  };
}

/** dist/bunka-linux-x64, rebuilt when missing or older than anything under src/ (or package.json). */
async function ensureBunkaBinary(): Promise<string> {
  const binary = outfileFor("linux-x64");
  const newestSource = (dir: string): number => {
    let newest = 0;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
    }
    return newest;
  };
  const sourceMtime = Math.max(newestSource(join(REPO_ROOT, "src")), statSync(join(REPO_ROOT, "package.json")).mtimeMs);
  if (existsSync(binary) && statSync(binary).mtimeMs >= sourceMtime) return binary;
  log(`building ${binary} (${existsSync(binary) ? "older than src/" : "missing"}) ...`);
  const result = await buildTarget("linux-x64");
  if (!result.ok) throw new Error(`build failed: ${result.error}`);
  return binary;
}

// ---------------------------------------------------------------------------------------------
// Perf tools

interface ToolRun {
  code: number;
  /** CPU time the tool's JVM used, in microseconds. */
  cpuMicros: number;
  timedOut: boolean;
  stdout: string;
  /** The first 32 KiB of stderr (a failing producer prints one stack trace per record). */
  stderr: string;
}

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
async function runJava(mainClass: string, jvm: string[], args: string[], label: string, timeoutMs: number): Promise<ToolRun> {
  const libs = await ensureKafkaLibs();
  const proc = Bun.spawn(
    [javaBin(), ...jvm, `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`, "-cp", `${libs}/*`, mainClass, ...args],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const undo = onCleanup(mainClass, () => {
    proc.kill("SIGKILL");
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, timeoutMs);
  const readStdout = (async () => {
    let text = "";
    let pending = "";
    const decoder = new TextDecoder();
    for await (const chunk of proc.stdout) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        if (label) log(`  [${label}] ${line}`);
        if (text.length < 1 << 20) text += `${line}\n`;
      }
    }
    return text + pending;
  })();
  const readStderr = (async () => {
    let text = "";
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) if (text.length < 32 * 1024) text += decoder.decode(chunk, { stream: true });
    return text;
  })();
  try {
    const [stdout, stderr, code] = await Promise.all([readStdout, readStderr, proc.exited]);
    const cpuMicros = Number(proc.resourceUsage()?.cpuTime.total ?? 0);
    return { code: timedOut ? 124 : code, cpuMicros, timedOut, stdout, stderr };
  } finally {
    clearTimeout(timer);
    undo();
  }
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

type ScenarioId = "a" | "b" | "c";
interface Scenario {
  id: ScenarioId;
  title: string;
  kind: "produce" | "consume";
  topic: string;
  partitions: number;
}
const SCENARIOS: Record<ScenarioId, Scenario> = {
  a: { id: "a", title: "(a) produce acks=all 1 KiB, 1 partition", kind: "produce", topic: "bench-p1", partitions: 1 },
  b: { id: "b", title: `(b) produce acks=all 1 KiB, ${PARTITIONS_B} partitions`, kind: "produce", topic: "bench-p16", partitions: PARTITIONS_B },
  c: { id: "c", title: `(c) consume (b), ${PARTITIONS_B} partitions`, kind: "consume", topic: "bench-p16", partitions: PARTITIONS_B },
};
/** Each group runs on a freshly started broker with an empty data dir. */
const GROUPS: ScenarioId[][] = [["a"], ["b", "c"]];

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

async function createTopic(broker: Broker, s: Scenario): Promise<void> {
  const r = await runKafkaTool(
    "kafka-topics",
    ["--bootstrap-server", broker.bootstrap, "--create", "--topic", s.topic, "--partitions", String(s.partitions), "--replication-factor", "1"],
    { timeoutMs: 60_000 },
  );
  if (r.code !== 0) throw new Error(`kafka-topics --create failed (exit ${r.code}): ${firstError({ ...r, cpuMicros: 0, timedOut: r.code === 124 })}`);
}

async function runScenario(broker: Broker, s: Scenario, opts: Options, idempotent: boolean, produced: Map<ScenarioId, number>): Promise<Outcome> {
  const label = `${broker.kind} ${s.id}`;
  const needed = s.kind === "produce" ? [3, 19, 0, ...(idempotent ? [22] : [])] : CONSUME_APIS;
  const missing = missingApis(broker.apis, needed);
  if (missing.length > 0) return { ok: false, error: `not supported (ApiVersions lacks ${missing.join(", ")})` };

  if (s.kind === "produce") {
    try {
      await createTopic(broker, s);
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
  for (const group of GROUPS) {
    if (interrupted) break;
    if (bunkaBinary instanceof Error && kind === "bunka") {
      for (const id of group) results.set(id, { ok: false, error: bunkaBinary.message });
      continue;
    }
    log(`\n== ${kind}: starting a fresh broker for ${group.map((id) => `(${id})`).join(" ")}`);
    let broker: Broker;
    try {
      broker = kind === "kafka" ? await startKafkaBroker(opts.dataRoot) : await startBunkaBroker(bunkaBinary as string, opts.dataRoot);
    } catch (e) {
      const error = `broker did not start: ${(e as Error).message.split("\n")[0]}`;
      log(`${kind}: ${error}`);
      for (const id of group) results.set(id, { ok: false, error });
      continue;
    }
    log(`${kind}: listening on ${broker.bootstrap}, pid ${broker.pid}`);
    try {
      for (const id of group) {
        if (interrupted) break;
        const s = SCENARIOS[id];
        log(`-- ${kind} ${s.title}`);
        const started = Date.now();
        let outcome: Outcome;
        try {
          outcome = await runScenario(broker, s, opts, idempotent, produced);
        } catch (e) {
          outcome = { ok: false, error: (e as Error).message };
        }
        if (interrupted) break;
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

// ---------------------------------------------------------------------------------------------
// Environment and report

async function capture(cmd: string[]): Promise<string> {
  try {
    const p = Bun.spawn(cmd, { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
    const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return (o + e).trim();
  } catch {
    return "";
  }
}

interface Env {
  date: string;
  machine: string;
  kafka: string;
  bunka: string;
  runtime: string;
}

async function environment(dataRoot: string): Promise<Env> {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = cpuinfo.match(/^model name\s*:\s*(.+)$/m)?.[1]?.trim() ?? "unknown CPU";
  const memKb = Number(readFileSync("/proc/meminfo", "utf8").match(/^MemTotal:\s+(\d+)/m)?.[1] ?? 0);
  const nproc = (await capture(["nproc"])) || String(availableParallelism());
  const fsType = await capture(["stat", "-f", "-c", "%T", dataRoot]);
  const commit = await capture(["git", "rev-parse", "--short=12", "HEAD"]);
  const dirty = (await capture(["git", "status", "--porcelain", "--", "src", "package.json"])) !== "";
  const java = (await capture([javaBin(), "-version"])).split("\n")[0]?.replace(/^openjdk version /, "OpenJDK ") ?? "java";
  const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version as string;
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    machine: `${nproc} CPUs (nproc), ${model}, ${(memKb / 1024 / 1024).toFixed(1)} GiB RAM, Linux ${release()}, data dirs in ${dataRoot} (${fsType || "?"})`,
    kafka: `Apache Kafka ${KAFKA_VERSION} (single-node KRaft, default settings; JVM ${java.replace(/"/g, "")}, -Xmx1g -Xms1g G1)`,
    bunka: `bunka ${version} (dist/bunka-linux-x64), commit ${commit || "?"}${dirty ? " + uncommitted changes in src/" : ""}`,
    runtime: `Bun ${Bun.version}`,
  };
}

/** Other processes' share of the machine from which a row is flagged as skewed. */
const BUSY_PCT = 10;
const fmtNum = (n: number) => Math.round(n).toLocaleString("en-US");
const fmtRss = (kb: number | undefined) => (kb === undefined ? "?" : `${(kb / 1024).toFixed(0)} MiB`);
const ratio = (num: number | undefined, den: number | undefined) => (num === undefined || den === undefined || den === 0 ? "—" : `${(num / den).toFixed(2)}`);

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

const label = (k: BrokerKind) => (k === "kafka" ? "Kafka" : "bunka");

function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("-+-"), ...rows.map(line)].join("\n");
}

function markdownTable(header: string[], rows: string[][]): string {
  const line = (r: string[]) => `| ${r.join(" | ")} |`;
  return [line(header), `| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`, ...rows.map(line)].join("\n");
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
    if (interrupted) break;
    results[kind] = await runBroker(kind, opts, idempotent, bunkaBinary);
  }
  if (interrupted) return 130;
  const elapsedS = Math.round((Date.now() - t0) / 1000);

  const { header, rows } = buildRows(kinds, results);
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
  const text = textTable(header, rows);
  const out: string[] = ["", "Produce/consume benchmark: Apache Kafka vs bunka", "", ...meta, "", text];
  if (errors.length) out.push("", ...errors);
  out.push("", ...details);
  out.push(
    "",
    "---- markdown (for docs/benchmarks.md) ----",
    "",
    `### ${env.date.slice(0, 10)}${kinds.length === 1 ? ` (${label(kinds[0]!)} only)` : ""}`,
    "",
    ...meta.map((m) => `- ${m}`),
    "",
    markdownTable(header, rows),
  );
  if (errors.length || details.length) out.push("", ...errors.map((e) => `- ${e}`), ...details.map((d) => `- ${d}`));
  process.stdout.write(`${out.join("\n")}\n`);
  return 0;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  log(`bench-produce-consume: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  if (!interrupted) await runCleanups(false);
}
if (!interrupted) process.exit(code);
