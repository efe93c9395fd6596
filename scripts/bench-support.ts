/**
 * What the broker benchmarks share (scripts/bench-produce-consume.ts, scripts/bench-groups.ts,
 * scripts/bench-transactions.ts, scripts/bench-cleaner.ts): starting Apache Kafka and the compiled bunka
 * binary with fresh data dirs, the cleanup registry (undone at the end, on an error and on Ctrl-C),
 * ApiVersions, a broker's peak RSS and CPU, the CPU everything else on the machine used (rows measured on a
 * busy machine are flagged), compiling the Java load tools of scripts/bench-java/, medians, the environment
 * line and tables, and the broker variants with what each one's acknowledgement is worth (durability); with
 * --tls, the certificates and the SSL listeners of both brokers (BenchTls).
 */
import { createHash } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, release } from "node:os";
import { join } from "node:path";
import {
  type ApacheKafka,
  ensureKafkaLibs,
  javaBin,
  KAFKA_VERSION,
  LOG4J_CONFIG,
  freePort,
  probeBrokerCount,
  rawRequest,
  REPO_ROOT,
  runKafkaTool,
  startApacheKafka,
} from "../tests/support/apache-kafka.ts";
import { makeCertificates } from "../tests/support/tls-certs.ts";
import { WireClient } from "../tests/support/wire-client.ts";
import { ErrorCode, errorInfoByCode } from "../src/errors/generated/error-codes.ts";
import { buildTarget, outfileFor } from "./build.ts";

export type BrokerKind = "kafka" | "bunka";

/**
 * What a benchmark row runs against: bunka, Apache Kafka with its default settings, or Apache Kafka told to
 * fsync every append before it answers (`kafka-flush`, KAFKA_FLUSH_PROPERTIES), the like-for-like
 * durability reference for bunka. A `kafka-flush` broker is a Broker of kind "kafka".
 */
export type BrokerVariant = BrokerKind | "kafka-flush";

/**
 * server.properties of the `kafka-flush` variant. What Apache Kafka (4.1) does with it, read in its source:
 * UnifiedLog.append ends, still under the partition log's lock, with
 * `if (localLog.unflushedMessages() >= config().flushInterval) flush(false)`; flush forces the segment's file
 * (FileChannel.force(true)) and its offset, time and transaction indexes, and the directory when a segment is
 * new. ReplicaManager.appendRecords runs that append on the request handler thread before it builds the answer,
 * and with acks=all and a single in-sync replica the answer is not delayed further. So with
 * log.flush.interval.messages=1 (the broker default of the topic config flush.messages, which no topic here
 * overrides) every append is fsynced synchronously before the Produce answer: one fsync per partition batch of
 * the request, partition after partition (not shared between requests, unlike a group commit). The broker's
 * own appends go the same way: the transaction coordinator's __transaction_state records (so EndTxn is
 * answered after PrepareCommit is fsynced), the transaction markers and __consumer_offsets.
 * log.flush.interval.ms stays at its default: the time-based flusher adds nothing when every append flushes.
 */
export const KAFKA_FLUSH_PROPERTIES: Record<string, number> = { "log.flush.interval.messages": 1 };

/** KAFKA_FLUSH_PROPERTIES' finding in one sentence, for the reports. */
export const KAFKA_FLUSH_FINDING =
  "log.flush.interval.messages=1 makes Apache Kafka fsync synchronously in the produce path: UnifiedLog.append " +
  "ends, under the partition's lock on the request handler thread, with flush() (FileChannel.force of the segment " +
  "and its indexes) once unflushedMessages >= flush.messages, before the Produce answer is built; so every batch " +
  "of a request is fsynced, partition after partition, before the answer (no sharing between requests), and the " +
  "same holds for the broker's own appends (__transaction_state, transaction markers, __consumer_offsets)";

/** How a variant is named in tables and logs. */
export const variantLabel = (v: BrokerVariant): string => (v === "kafka" ? "Kafka" : v === "kafka-flush" ? "Kafka (fsync per batch)" : "bunka");

/** The process behind a variant. */
export const kindOf = (v: BrokerVariant): BrokerKind => (v === "bunka" ? "bunka" : "kafka");

/**
 * The variants of a run: `only` (one of kafka, bunka) or both, plus `kafka-flush` (after Apache Kafka) when
 * asked for.
 */
export function variantsOf(only: BrokerKind | undefined, kafkaFlush: boolean): BrokerVariant[] {
  const base: BrokerVariant[] = only ? [only] : ["kafka", "bunka"];
  if (!kafkaFlush) return base;
  const at = base[0] === "kafka" ? 1 : 0;
  return [...base.slice(0, at), "kafka-flush", ...base.slice(at)];
}

/**
 * The order of round `round` (1-based): the variants as given in odd rounds, reversed in even ones, so that
 * over two rounds each outer variant runs once first and once last (with three, the middle one stays).
 */
export function roundOrder<T>(variants: readonly T[], round: number): T[] {
  return round % 2 === 1 ? [...variants] : [...variants].reverse();
}

export const log = (line: string) => process.stderr.write(`${line}\n`);
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Cleanup: everything started registers how to undo it; undone in reverse order at the end, on an
// error, or on SIGINT/SIGTERM.

const cleanups = new Map<number, { what: string; fn: (fast: boolean) => Promise<void> | void }>();
let nextCleanupId = 1;
let interrupted = false;

/** True once SIGINT/SIGTERM arrived: stop starting new work (the cleanups are already running). */
export function isInterrupted(): boolean {
  return interrupted;
}

export function onCleanup(what: string, fn: (fast: boolean) => Promise<void> | void): () => void {
  const id = nextCleanupId++;
  cleanups.set(id, { what, fn });
  return () => cleanups.delete(id);
}

export async function runCleanups(fast: boolean): Promise<void> {
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

export function installSignalHandlers(): void {
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

export function tempDir(root: string, prefix: string): string {
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, prefix));
  onCleanup(dir, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Raw ApiVersions v0 (works on every broker, whatever else it supports)

/** api key -> max version, from an ApiVersions v0 exchange. */
export async function apiVersions(host: string, port: number): Promise<Map<number, number>> {
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

export const API_NAMES: Record<number, string> = {
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
export function missingApis(have: Map<number, number>, need: number[]): string[] {
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
export function watchPeakRss(pid: number): { stop(): number | undefined } {
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

function machineStat(): number[] {
  // user nice system idle iowait irq softirq steal
  return readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
}

function machineBusyTicks(): number {
  const f = machineStat();
  return f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!;
}

/**
 * CPU the kernel used outside any process: interrupt and softirq time (loopback TCP, block I/O completion)
 * plus kernel threads (children of kthreadd: kworkers, the journal), which do the fsync and network work
 * of the broker under test, and of anything else running.
 */
function kernelTicks(): number {
  const f = machineStat();
  let ticks = f[5]! + f[6]!;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (entry === "2" || fields[1] === "2") ticks += Number(fields[11]) + Number(fields[12]); // ppid (field 4) = kthreadd
    } catch {
      /* gone meanwhile */
    }
  }
  return ticks;
}

export function processTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15)
  } catch {
    return 0;
  }
}

export interface CpuReport {
  brokerS: number;
  toolS: number;
  /** CPU seconds this script's own process used (for scripts/bench-groups.ts, the load tool itself). */
  selfS: number;
  /** Share of the whole machine's capacity used by processes other than the broker, the tool and us. */
  otherPct: number;
  /** With `kernelApart`: the kernel's share (interrupts, softirq, kernel threads), not counted in otherPct. */
  kernelPct?: number;
  /** With `idlePids`: CPU seconds those processes (the brokers waiting for their turn) used, not counted in otherPct. */
  idleS?: number;
}

/**
 * CPU of the broker, the tool and this process during a scenario, and the share of the machine everything
 * else used. `kernelApart` reports the kernel's own work (interrupts, softirq, kernel threads such as the
 * kworkers that complete the broker's fsyncs) separately instead of as other load; `idlePids` (the other
 * brokers of an interleaved run, idle meanwhile) are reported apart too, so that "other" is load from outside.
 */
export function watchCpu(brokerPid: number, opts: { kernelApart?: boolean; idlePids?: readonly number[] } = {}): { stop(toolCpuMicros: number): CpuReport } {
  const t0 = performance.now();
  const kernel0 = opts.kernelApart ? kernelTicks() : 0;
  const busy0 = machineBusyTicks();
  const broker0 = processTicks(brokerPid);
  const idlePids = opts.idlePids ?? [];
  const idle0 = idlePids.map(processTicks);
  const self0 = process.cpuUsage();
  return {
    stop(toolCpuMicros) {
      const elapsedS = (performance.now() - t0) / 1000;
      const brokerTicks = processTicks(brokerPid) - broker0;
      const idleTicks = idlePids.reduce((sum, pid, i) => sum + Math.max(0, processTicks(pid) - idle0[i]!), 0);
      const self = process.cpuUsage(self0);
      const selfTicks = ((self.user + self.system) / 1e6) * CLK_TCK;
      const toolTicks = (toolCpuMicros / 1e6) * CLK_TCK;
      const busy = machineBusyTicks() - busy0;
      const kernel = opts.kernelApart ? Math.max(0, kernelTicks() - kernel0) : 0;
      const other = busy - brokerTicks - idleTicks - toolTicks - selfTicks - kernel;
      const capacity = elapsedS * availableParallelism() * CLK_TCK;
      const pct = (ticks: number) => (capacity > 0 ? Math.max(0, (100 * ticks) / capacity) : 0);
      return {
        brokerS: brokerTicks / CLK_TCK,
        toolS: toolCpuMicros / 1e6,
        selfS: (self.user + self.system) / 1e6,
        otherPct: pct(other),
        ...(opts.kernelApart ? { kernelPct: pct(kernel) } : {}),
        ...(opts.idlePids ? { idleS: idleTicks / CLK_TCK } : {}),
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Brokers

/** A finished Java tool run. */
export interface JavaToolRun {
  code: number;
  /** CPU time the tool's JVM used, in microseconds. */
  cpuMicros: number;
  timedOut: boolean;
  /** Up to the first MiB of stdout. */
  stdout: string;
  /** Up to the first `stderrLimitBytes` of stderr (a failing producer prints one stack trace per record). */
  stderr: string;
}

export interface JavaToolOptions {
  mainClass: string;
  jvm: string[];
  args: string[];
  /** Prepended to the Apache Kafka jars on the class path. */
  extraClasspath?: string;
  /** stdout lines are echoed to our stderr as `  [label] ...` (unless `echo` says no); "" echoes nothing. */
  label: string;
  echo?: (line: string) => boolean;
  timeoutMs: number;
  stderrLimitBytes?: number;
}

/**
 * Compiles scripts/bench-java/<className>.java with javac against the Apache Kafka jars into
 * .cache/bench-java/<classname>-<hash>/ (once per version of the source); returns that directory, for
 * runJavaTool's extraClasspath.
 */
export async function compileJavaTool(className: string): Promise<string> {
  const libs = await ensureKafkaLibs();
  const sourcePath = join(REPO_ROOT, "scripts", "bench-java", `${className}.java`);
  const source = readFileSync(sourcePath);
  const hash = createHash("sha256").update(source).update(KAFKA_VERSION).digest("hex").slice(0, 12);
  const dir = join(REPO_ROOT, ".cache", "bench-java", `${className.toLowerCase()}-${hash}`);
  if (existsSync(join(dir, `${className}.class`))) return dir;
  const javac = javaBin().replace(/java$/, "javac");
  const tmp = `${dir}.tmp-${process.pid}`;
  mkdirSync(tmp, { recursive: true });
  log(`compiling ${sourcePath} ...`);
  const p = Bun.spawn([javac, "-nowarn", "-cp", `${libs}/*`, "-d", tmp, sourcePath], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`javac failed (exit ${code}): ${(out + err).trim().slice(0, 2000)}`);
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

/**
 * CPU pinning, for "what if the load tool had its own cores": with BENCH_BROKER_CPUS and BENCH_TOOL_CPUS set
 * (taskset CPU lists, e.g. 0 and 1), every broker (all its threads) runs on the first, the Java load tools on
 * the second. Undefined when they are not both set.
 */
export const PINNED: { broker: string; tool: string } | undefined =
  process.env.BENCH_BROKER_CPUS && process.env.BENCH_TOOL_CPUS ? { broker: process.env.BENCH_BROKER_CPUS, tool: process.env.BENCH_TOOL_CPUS } : undefined;

/** Pins every thread of `pid` to the brokers' CPUs (when PINNED); threads made later inherit it. */
function pinBroker(pid: number): void {
  if (PINNED === undefined) return;
  const done = Bun.spawnSync(["taskset", "-a", "-p", "-c", PINNED.broker, String(pid)], { stdout: "ignore", stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`taskset of broker pid ${pid} failed: ${done.stderr.toString().trim()}`);
}

/** Runs a Java main class on the Apache Kafka jars with a hard timeout (SIGKILL), cleaned up on Ctrl-C. */
export async function runJavaTool(o: JavaToolOptions): Promise<JavaToolRun> {
  const libs = await ensureKafkaLibs();
  const classpath = `${o.extraClasspath ? `${o.extraClasspath}:` : ""}${libs}/*`;
  const pin = PINNED === undefined ? [] : ["taskset", "-c", PINNED.tool];
  const proc = Bun.spawn([...pin, javaBin(), ...o.jvm, `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`, "-cp", classpath, o.mainClass, ...o.args], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const undo = onCleanup(o.mainClass, () => {
    proc.kill("SIGKILL");
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, o.timeoutMs);
  const stderrLimit = o.stderrLimitBytes ?? 32 * 1024;
  const readStdout = (async () => {
    let text = "";
    let pending = "";
    const decoder = new TextDecoder();
    for await (const chunk of proc.stdout) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        if (o.label && (o.echo === undefined || o.echo(line))) log(`  [${o.label}] ${line}`);
        if (text.length < 1 << 20) text += `${line}\n`;
      }
    }
    return text + pending;
  })();
  const readStderr = (async () => {
    let text = "";
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) if (text.length < stderrLimit) text += decoder.decode(chunk, { stream: true });
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

export interface Broker {
  kind: BrokerKind;
  /** The PLAINTEXT listener: this script's own raw requests (ApiVersions, DeleteTopics, ...) go there. */
  host: string;
  port: number;
  /** host:port of the Java tools: the PLAINTEXT listener, or with --tls the SSL one (then with `toolConfig`). */
  bootstrap: string;
  /** With --tls: the client properties file the Java tools need to reach `bootstrap` (BenchTls.clientConfigFile). */
  toolConfig?: string;
  pid: number;
  apis: Map<number, number>;
  /** bunka's /metrics on its HTTP side-port (Apache Kafka: none). */
  metricsUrl?: string;
  /** The broker's log file (Apache Kafka: the JVM's stdout and stderr; bunka: its stderr). */
  logFile: string;
  /** The directory holding the partition directories (`<topic>-<partition>/<base offset>.log`, ...). */
  logDir: string;
  /** Last lines of the broker's log, for error messages. */
  logTail(): string;
  alive(): boolean;
  stop(): Promise<void>;
}

/**
 * Starts a broker for a group of rows with `start`, and logs where it listens: the broker, or why there is
 * none (the bunka binary that could not be built, or the first line of the start's error, also logged).
 */
export async function startBrokerForRows(
  kind: BrokerVariant,
  bunkaBinary: string | Error | undefined,
  start: (bunkaBinary: string) => Promise<Broker>,
): Promise<Broker | { error: string }> {
  if (bunkaBinary instanceof Error && kind === "bunka") return { error: bunkaBinary.message };
  try {
    const broker = await start(bunkaBinary as string);
    pinBroker(broker.pid);
    log(`${kind}: listening on ${broker.bootstrap}, pid ${broker.pid}${PINNED === undefined ? "" : ` (pinned to CPU ${PINNED.broker})`}`);
    return broker;
  } catch (e) {
    const error = `broker did not start: ${(e as Error).message.split("\n")[0]}`;
    log(`${kind}: ${error}`);
    return { error };
  }
}

/**
 * Runs one benchmark row: a thrown error becomes a failed outcome, and a failure says whether the broker
 * died (with the tail of its log).
 */
export async function runGuardedRow<T extends { ok: true } | { ok: false; error: string }>(
  broker: Broker,
  run: () => Promise<T>,
): Promise<T | { ok: false; error: string }> {
  let outcome: T | { ok: false; error: string };
  try {
    outcome = await run();
  } catch (e) {
    outcome = { ok: false, error: (e as Error).message };
  }
  if (!outcome.ok && !broker.alive()) outcome.error += ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`;
  return outcome;
}

/** A raw-protocol connection to `broker`, closed by the cleanups if it is still open then. */
export async function connect(broker: Broker, clientId: string): Promise<WireClient> {
  const c = await WireClient.connect(broker.port, broker.host, clientId);
  const undo = onCleanup(`connection ${clientId}`, () => c.close());
  void c.closed.then(undo);
  return c;
}

/** An error code's Apache name, for messages. */
export const errName = (code: number): string => errorInfoByCode.get(code)?.name ?? `error ${code}`;

/** Creates `topic` with kafka-topics.sh (Apache's own tool, against either broker). */
export async function createTopicWithTool(broker: Broker, topic: string, partitions: number): Promise<void> {
  const r = await runKafkaTool(
    "kafka-topics",
    ["--bootstrap-server", broker.bootstrap, ...toolConfigArgs(broker, "--command-config"), "--create", "--topic", topic, "--partitions", String(partitions), "--replication-factor", "1"],
    { timeoutMs: 60_000 },
  );
  if (r.code !== 0) throw new Error(`kafka-topics --create failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split("\n").slice(-3).join(" | ")}`);
}

/**
 * A fresh single-node Apache Kafka; `serverProperties` override server.properties entries (default: none).
 * With `tls`, an SSL listener beside the PLAINTEXT one (KAFKA_TLS_PROPERTIES), which the tools are given.
 */
export async function startKafkaBroker(root: string, serverProperties: Record<string, string | number> = {}, tls?: BenchTls): Promise<Broker> {
  const dataDir = tempDir(root, "bench-kafka-");
  let kafka: ApacheKafka | undefined;
  const undo = onCleanup("Apache Kafka", async () => kafka?.stop());
  const sslPort = tls === undefined ? undefined : freePort();
  kafka = await startApacheKafka({
    dataDir,
    serverProperties: tls === undefined ? serverProperties : { ...serverProperties, ...kafkaTlsProperties(tls) },
    ...(sslPort === undefined ? {} : { extraListeners: [{ name: "SSL", port: sslPort, protocol: "SSL" }] }),
  });
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
    bootstrap: sslPort === undefined ? kafka.bootstrap : `127.0.0.1:${sslPort}`,
    ...(tls === undefined ? {} : { toolConfig: tls.clientConfigFile }),
    pid: kafka.pid,
    apis,
    logFile: kafka.logFile,
    logDir: join(dataDir, "kraft-logs"),
    logTail: () => tailOfFile(kafka!.logFile),
    alive: () => existsSync(`/proc/${kafka!.pid}`),
    async stop() {
      await kafka!.stop();
      undo();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function tailOfFile(path: string, lines = 15): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/**
 * A fresh `bunka serve` of the compiled binary; `config` entries, if any, go into a config file passed with
 * --config (Apache property names, e.g. group.initial.rebalance.delay.ms). With `tls`, an SSL listener beside
 * the PLAINTEXT one (BUNKA's `listeners`, `ssl.keystore.location`), which the tools are given.
 */
export async function startBunkaBroker(binary: string, root: string, configIn: Record<string, string | number> = {}, tls?: BenchTls): Promise<Broker> {
  const config = tls === undefined ? configIn : { ...configIn, ...bunkaTlsConfig(tls) };
  const dataDir = tempDir(root, "bench-bunka-");
  const logFile = `${dataDir}.log`;
  onCleanup(logFile, () => rmSync(logFile, { force: true }));
  const configArgs: string[] = [];
  if (Object.keys(config).length > 0) {
    const configFile = join(dataDir, "bunka.properties");
    writeFileSync(configFile, Object.entries(config).map(([k, v]) => `${k}=${v}\n`).join(""));
    configArgs.push("--config", configFile);
  }
  const logFd = openSync(logFile, "a");
  const proc = Bun.spawn(
    [binary, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", join(dataDir, "data"), "--log-level", "warn", ...configArgs],
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
  const http = out.match(/ http=(\S+)/)?.[1];
  // With listeners set the line ends with every listener: " listeners=PLAINTEXT://H:P,SSL://H:P".
  const sslAddress = tls === undefined ? undefined : out.match(/ listeners=\S*?SSL:\/\/([^\s,]+)/)?.[1];
  if (tls !== undefined && sslAddress === undefined) {
    await stop(1000);
    undo();
    throw new Error(`bunka's start-up line names no SSL listener: ${out.trim().slice(-400)}`);
  }
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
    bootstrap: sslAddress ?? `${host}:${port}`,
    ...(tls === undefined ? {} : { toolConfig: tls.clientConfigFile }),
    pid: proc.pid,
    apis,
    ...(http === undefined ? {} : { metricsUrl: `http://${http}/metrics` }),
    logFile,
    logDir: join(dataDir, "data"),
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

/**
 * Starts a broker of `variant` for a group of rows (through startBrokerForRows): Apache Kafka with
 * `kafkaProperties` (and, for kafka-flush, KAFKA_FLUSH_PROPERTIES over them), or bunka with `bunkaConfig`.
 */
export function startVariant(
  variant: BrokerVariant,
  bunkaBinary: string | Error | undefined,
  root: string,
  o: { kafkaProperties?: Record<string, string | number>; bunkaConfig?: Record<string, string | number>; tls?: BenchTls } = {},
): Promise<Broker | { error: string }> {
  return startBrokerForRows(variant, bunkaBinary, (binary) =>
    variant === "bunka"
      ? startBunkaBroker(binary, root, o.bunkaConfig ?? {}, o.tls)
      : startKafkaBroker(root, variant === "kafka-flush" ? { ...o.kafkaProperties, ...KAFKA_FLUSH_PROPERTIES } : (o.kafkaProperties ?? {}), o.tls),
  );
}

// ---------------------------------------------------------------------------------------------
// TLS (--tls): both brokers get an SSL listener with the same PEM certificate, the Java tools connect to it.
// Server-side TLS only (no client certificates), what most deployments run. The PLAINTEXT listener stays for
// this script's own raw requests (ApiVersions, DeleteTopics, the readiness probe), which speak no TLS and are
// on no measured path.

export interface BenchTls {
  /** The server's key and certificate chain in one PEM file (for 127.0.0.1), for both brokers. */
  keystorePath: string;
  /** The CA that signed it (PEM): the tools' truststore. */
  caPath: string;
  /** Client properties for every Java tool: security.protocol=SSL and the PEM truststore. */
  clientConfigFile: string;
}

/** The client properties of --tls (written to BenchTls.clientConfigFile). */
export const tlsClientProperties = (caPath: string): Record<string, string> => ({
  "security.protocol": "SSL",
  "ssl.truststore.type": "PEM",
  "ssl.truststore.location": caPath,
});

/** Makes the certificates (openssl, in a temp dir removed by the cleanups) and the tools' client config. */
export function setUpBenchTls(): BenchTls {
  const certs = makeCertificates();
  onCleanup("TLS certificates", () => certs.remove());
  const clientConfigFile = join(certs.dir, "client-ssl.properties");
  writeFileSync(clientConfigFile, Object.entries(tlsClientProperties(certs.caPath)).map(([k, v]) => `${k}=${v}\n`).join(""));
  return { keystorePath: certs.serverKeystorePath, caPath: certs.caPath, clientConfigFile };
}

/**
 * Apache Kafka's side of --tls, beside the SSL listener itself (startApacheKafka's extraListeners): the PEM
 * keystore, and the SSL listener as the inter-broker one, so that what the broker sends itself (transaction
 * markers) goes over TLS as in a TLS deployment; its client side of that trusts the same CA.
 */
export const kafkaTlsProperties = (tls: BenchTls): Record<string, string> => ({
  "ssl.keystore.type": "PEM",
  "ssl.keystore.location": tls.keystorePath,
  "ssl.truststore.type": "PEM",
  "ssl.truststore.location": tls.caPath,
  "inter.broker.listener.name": "SSL",
});

/** bunka's side of --tls: the PLAINTEXT listener (first, the start-up line's kafka=) and an SSL one. */
export const bunkaTlsConfig = (tls: BenchTls): Record<string, string> => ({
  listeners: "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
  "ssl.keystore.location": tls.keystorePath,
});

/** `flag file` for a Java tool when the broker needs a client config (--tls), else nothing. */
export const toolConfigArgs = (broker: Broker, flag: string): string[] => (broker.toolConfig === undefined ? [] : [flag, broker.toolConfig]);

/** The report's line about the listeners the tools used. */
export const tlsLine = (tls: BenchTls | undefined): string =>
  tls === undefined
    ? "listeners: PLAINTEXT"
    : "listeners: the Java tools connect over TLS (SSL listener, server-side TLS only: no client certificates) with " +
      `${Object.entries(tlsClientProperties("<ca.pem>")).map(([k, v]) => `${k}=${v}`).join(" ")}; both brokers serve the same PEM certificate ` +
      "(RSA 2048, made by openssl for this run), Apache Kafka with ssl.keystore.type=PEM and its SSL listener as inter.broker.listener.name, bunka with " +
      "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0 and ssl.keystore.location; the PLAINTEXT listeners carry only the script's own raw requests (topic deletion, ApiVersions)";

/** A partition directory of `topic`, live (`<topic>-<p>`) or being deleted (`<topic>-<p>.<id>-delete`). */
export function isPartitionDirOf(name: string, topic: string): boolean {
  return name.startsWith(`${topic}-`) && /^\d+(\..+-delete)?$/.test(name.slice(topic.length + 1));
}

/**
 * Deletes `topic` (DeleteTopics in a raw frame) and waits until none of its partition directories is left
 * in the broker's log dir, so that removing its files does not overlap the next measurement. Apache Kafka
 * removes them log.segment.delete.delay.ms (default 60 s) after the deletion: give it a short one.
 */
export async function deleteTopicAndWait(broker: Broker, topic: string, timeoutMs = 120_000): Promise<void> {
  const c = await connect(broker, "bench-delete-topic");
  try {
    const version = Math.min(5, broker.apis.get(20) ?? 0);
    const res = await c.request(20, version, { topicNames: [topic], timeoutMs: 30_000 });
    const code = (res.responses as { errorCode: number }[])[0]?.errorCode ?? -1;
    if (code !== 0 && code !== ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) throw new Error(`DeleteTopics ${topic}: ${errName(code)}`);
  } finally {
    c.close();
  }
  const deadline = Date.now() + timeoutMs;
  const left = () => {
    try {
      return readdirSync(broker.logDir).filter((name) => isPartitionDirOf(name, topic));
    } catch {
      return [];
    }
  };
  for (let dirs = left(); dirs.length > 0; dirs = left()) {
    if (Date.now() > deadline) throw new Error(`${topic}: ${dirs.length} partition directories still there ${timeoutMs / 1000} s after DeleteTopics (${dirs.slice(0, 3).join(", ")})`);
    await sleep(100);
  }
}

/** The sum (seconds) and count of every series of a Prometheus histogram family, by its label set. */
export async function scrapeHistogramTotals(metricsUrl: string, family: string): Promise<Map<string, { sumS: number; count: number }>> {
  const text = await (await fetch(metricsUrl)).text();
  const totals = new Map<string, { sumS: number; count: number }>();
  for (const m of text.matchAll(new RegExp(`^${family}_(sum|count)(\\{[^}]*\\})? (\\S+)$`, "gm"))) {
    const labels = m[2] ?? "";
    const entry = totals.get(labels) ?? { sumS: 0, count: 0 };
    if (m[1] === "sum") entry.sumS = Number(m[3]);
    else entry.count = Number(m[3]);
    totals.set(labels, entry);
  }
  return totals;
}

/** dist/bunka-linux-x64, rebuilt when missing or older than anything under src/ (or package.json). */
export async function ensureBunkaBinary(): Promise<string> {
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
// Environment and report

export async function capture(cmd: string[]): Promise<string> {
  try {
    const p = Bun.spawn(cmd, { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
    const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return (o + e).trim();
  } catch {
    return "";
  }
}

export interface Env {
  date: string;
  machine: string;
  /** The CPUs the run has (nproc). */
  cpus: number;
  /** Who shares those CPUs, and the load average when the run started. */
  sharing: string;
  kafka: string;
  bunka: string;
  runtime: string;
}

export async function environment(dataRoot: string): Promise<Env> {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = cpuinfo.match(/^model name\s*:\s*(.+)$/m)?.[1]?.trim() ?? "unknown CPU";
  const memKb = Number(readFileSync("/proc/meminfo", "utf8").match(/^MemTotal:\s+(\d+)/m)?.[1] ?? 0);
  const nproc = (await capture(["nproc"])) || String(availableParallelism());
  // findmnt names ext4 as such; stat -f says "ext2/ext3" for every ext file system.
  const fsType = (await capture(["findmnt", "-n", "-o", "FSTYPE", "--target", dataRoot])) || (await capture(["stat", "-f", "-c", "%T", dataRoot]));
  const commit = await capture(["git", "rev-parse", "--short=12", "HEAD"]);
  const dirty = (await capture(["git", "status", "--porcelain", "--", "src", "package.json"])) !== "";
  const java = (await capture([javaBin(), "-version"])).split("\n")[0]?.replace(/^openjdk version /, "OpenJDK ") ?? "java";
  const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version as string;
  const load = loadavg().map((l) => l.toFixed(2)).join(" ");
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    cpus: Number(nproc) || availableParallelism(),
    sharing:
      (PINNED === undefined
        ? `the brokers, the Java load tool and this script all run on these ${nproc} CPUs (nothing pinned, nothing isolated); `
        : `pinned (BENCH_BROKER_CPUS / BENCH_TOOL_CPUS): every broker on CPU ${PINNED.broker}, the Java load tools on CPU ${PINNED.tool} (taskset), this script unpinned; `) +
      `the load average was ${load} at the start; what other processes used during each row is measured (rows where it reached ${BUSY_PCT}% of the machine are marked *)`,
    machine: `${nproc} CPUs (nproc), ${model}, ${(memKb / 1024 / 1024).toFixed(1)} GiB RAM, Linux ${release()}, data dirs in ${dataRoot} (${fsType || "?"})`,
    kafka: `Apache Kafka ${KAFKA_VERSION} (single-node KRaft, default settings; JVM ${java.replace(/"/g, "")}, -Xmx1g -Xms1g G1)`,
    bunka: `bunka ${version} (dist/bunka-linux-x64), commit ${commit || "?"}${dirty ? " + uncommitted changes in src/" : ""}`,
    runtime: `Bun ${Bun.version}`,
  };
}

/** The median of `values` (undefined for none). */
export function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** "median (min–max)" of `values` (just the value when there is one, "—" for none). */
export function medianSpread(values: number[], fmt: (n: number) => string): string {
  const m = median(values);
  if (m === undefined) return "—";
  if (values.length === 1) return fmt(m);
  return `${fmt(m)} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

/** The 1-minute, 5-minute and 15-minute load averages, for a report line. */
export const loadAverages = (): string => loadavg().map((l) => l.toFixed(2)).join(" ");

/** Other processes' share of the machine from which a row is flagged as skewed. */
export const BUSY_PCT = 10;
export const fmtNum = (n: number) => Math.round(n).toLocaleString("en-US");
export const fmtRss = (kb: number | undefined) => (kb === undefined ? "?" : `${(kb / 1024).toFixed(0)} MiB`);
export const ratio = (num: number | undefined, den: number | undefined) => (num === undefined || den === undefined || den === 0 ? "—" : `${(num / den).toFixed(2)}`);

export const label = (k: BrokerVariant) => variantLabel(k);

export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("-+-"), ...rows.map(line)].join("\n");
}

export function markdownTable(header: string[], rows: string[][]): string {
  const line = (r: string[]) => `| ${r.join(" | ")} |`;
  return [line(header), `| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`, ...rows.map(line)].join("\n");
}

export interface Report {
  title: string;
  /** The run's date (ISO), for the markdown heading. */
  date: string;
  /** `#` characters of that heading. */
  headingLevel: number;
  kinds: readonly BrokerVariant[];
  meta: string[];
  header: string[];
  rows: string[][];
  /** More tables after the first (e.g. every round behind a table of medians), each under its caption. */
  tables?: { caption: string; header: string[]; rows: string[][] }[];
  /** Extra lines after the table (e.g. derived ratios), in both forms. */
  notes?: string[];
  errors: string[];
  details: string[];
}

/** The results for stdout: a text table, then the same as markdown for docs/benchmarks.md. */
export function renderReport(r: Report): string {
  const notes = r.notes ?? [];
  const tables = r.tables ?? [];
  const out: string[] = ["", r.title, "", ...r.meta, "", textTable(r.header, r.rows)];
  for (const t of tables) out.push("", t.caption, "", textTable(t.header, t.rows));
  if (notes.length) out.push("", ...notes);
  if (r.errors.length) out.push("", ...r.errors);
  out.push("", ...r.details);
  out.push(
    "",
    "---- markdown (for docs/benchmarks.md) ----",
    "",
    `${"#".repeat(r.headingLevel)} ${r.date.slice(0, 10)}${r.kinds.length === 1 ? ` (${label(r.kinds[0]!)} only)` : ""}`,
    "",
    ...r.meta.map((m) => `- ${m}`),
    "",
    markdownTable(r.header, r.rows),
  );
  for (const t of tables) out.push("", t.caption, "", markdownTable(t.header, t.rows));
  if (notes.length) out.push("", ...notes.map((n) => `- ${n}`));
  if (r.errors.length || r.details.length) out.push("", ...r.errors.map((e) => `- ${e}`), ...r.details.map((d) => `- ${d}`));
  return `${out.join("\n")}\n`;
}
