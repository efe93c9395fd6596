/**
 * Apache Kafka as a reference for bunka's tests and scripts: the real broker (single-node KRaft,
 * combined broker+controller) and its CLI tools, run from jars that scripts/apache-kafka/fetch.sh
 * resolves from Maven Central into .cache/apache-kafka-<version>/libs/.
 *
 *   const libs = await ensureKafkaLibs();
 *   const kafka = await startApacheKafka();            // free loopback ports, temp data dir
 *   await runKafkaTool("kafka-topics", ["--bootstrap-server", kafka.bootstrap, "--list"]);
 *   await kafka.stop();                                // kills the JVM, removes the data dir
 *   const cluster = await startApacheKafkaCluster({ nodes: 3 });   // 3 combined nodes, 3-voter quorum
 *
 * Readiness is a condition, never a sleep: the broker is ready when a Metadata request on its listener
 * lists at least one (unfenced) broker, which is what CreateTopics needs. Every JVM started here is
 * killed on stop(), and also when this process exits.
 */
import { mkdtempSync, mkdirSync, openSync, closeSync, rmSync, writeFileSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";

export const KAFKA_VERSION = process.env.KAFKA_VERSION ?? "4.1.1";
export const REPO_ROOT = resolve(import.meta.dir, "../..");
export const KAFKA_SCRIPTS_DIR = join(REPO_ROOT, "scripts/apache-kafka");
export const LOG4J_CONFIG = join(KAFKA_SCRIPTS_DIR, "log4j2.xml");

export type KafkaTool =
  | "kafka-topics"
  | "kafka-console-producer"
  | "kafka-console-consumer"
  | "kafka-producer-perf-test"
  | "kafka-consumer-perf-test"
  | "kafka-transactions"
  | "kafka-consumer-groups"
  | "kafka-configs"
  | "kafka-broker-api-versions"
  | "kafka-features"
  | "kafka-log-dirs"
  | "kafka-storage";

/** Main class of each tool in Kafka 4.1 (what bin/<tool>.sh runs). */
export const TOOL_MAIN_CLASSES: Record<KafkaTool, string> = {
  "kafka-topics": "org.apache.kafka.tools.TopicCommand",
  "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
  "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
  "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
  "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
  "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
  "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
  "kafka-configs": "kafka.admin.ConfigCommand",
  "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
  "kafka-features": "org.apache.kafka.tools.FeatureCommand",
  "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
  "kafka-storage": "kafka.tools.StorageTool",
};
export const KAFKA_SERVER_MAIN = "kafka.Kafka";

/** Perf tools measure throughput, so they keep the full JIT; the rest start fast (C1 only, CDS). */
const FAST_START_JVM = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx512m"];
const PERF_TOOL_JVM = ["-Xshare:auto", "-Xmx1g"];
/** What bin/kafka-server-start.sh uses (KAFKA_HEAP_OPTS + KAFKA_JVM_PERFORMANCE_OPTS). */
const SERVER_JVM = [
  "-Xmx1g",
  "-Xms1g",
  "-server",
  "-XX:+UseG1GC",
  "-XX:MaxGCPauseMillis=20",
  "-XX:InitiatingHeapOccupancyPercent=35",
  "-XX:+ExplicitGCInvokesConcurrent",
  "-Djava.awt.headless=true",
];

export function javaBin(): string {
  const home = process.env.JAVA_HOME;
  if (home && existsSync(join(home, "bin/java"))) return join(home, "bin/java");
  return "java";
}

// ---------------------------------------------------------------------------------------------
// Libraries

let libsPromise: Promise<string> | undefined;

/**
 * Runs scripts/apache-kafka/fetch.sh (once per process); returns the libs directory. The script, not this
 * function, decides whether the cache is current: its marker names the pom it was made from, so a cache that
 * predates a new dependency is resolved again instead of being taken as complete.
 */
export function ensureKafkaLibs(): Promise<string> {
  libsPromise ??= (async () => {
    const proc = Bun.spawn(["bash", join(KAFKA_SCRIPTS_DIR, "fetch.sh")], {
      env: { ...process.env, KAFKA_VERSION },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    if (code !== 0) throw new Error(`fetch.sh failed (exit ${code}):\n${err}`);
    const dir = out.trim().split("\n").pop() ?? "";
    if (!existsSync(join(dir, ".complete"))) throw new Error(`fetch.sh printed ${JSON.stringify(dir)}, no libs there`);
    return dir;
  })();
  libsPromise.catch(() => (libsPromise = undefined));
  return libsPromise;
}

// ---------------------------------------------------------------------------------------------
// Child-process bookkeeping: nothing outlives the test process.

const live = new Set<number>();
let exitHookInstalled = false;
function track(pid: number): void {
  live.add(pid);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const p of live) {
      try {
        process.kill(p, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Tools

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ToolOptions {
  stdin?: string;
  /** Kill the tool after this long (default 60 s); the result then has code 124 (like timeout(1)). */
  timeoutMs?: number;
  /** Extra JVM flags (e.g. -D system properties). */
  jvmArgs?: string[];
  env?: Record<string, string>;
}

/** Runs one Kafka CLI tool's main class on the fetched classpath and collects its output. */
export async function runKafkaTool(tool: KafkaTool, args: string[], opts: ToolOptions = {}): Promise<ToolResult> {
  const libs = await ensureKafkaLibs();
  const main = TOOL_MAIN_CLASSES[tool];
  const jvm = tool.endsWith("-perf-test") ? PERF_TOOL_JVM : FAST_START_JVM;
  const cmd = [
    javaBin(),
    ...jvm,
    `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`,
    ...(opts.jvmArgs ?? []),
    "-cp",
    `${libs}/*`,
    main,
    ...args,
  ];
  const proc = Bun.spawn(cmd, {
    stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...opts.env },
  });
  track(proc.pid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, opts.timeoutMs ?? 60_000);
  try {
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    return { code: timedOut ? 124 : code, stdout, stderr };
  } finally {
    clearTimeout(timer);
    live.delete(proc.pid);
  }
}

// ---------------------------------------------------------------------------------------------
// Broker

export interface StartOptions {
  /** Port written into advertised.listeners (e.g. a recording proxy in front); default: the real port. */
  advertisedPort?: number;
  advertisedHost?: string;
  /** Extra or overriding server.properties entries. */
  serverProperties?: Record<string, string | number | boolean>;
  /** More listeners beside PLAINTEXT on 127.0.0.1 (a SASL_PLAINTEXT one, say), added to listeners, advertised.listeners and the protocol map. */
  extraListeners?: { name: string; port: number; protocol: string }[];
  /** Feature levels set when the storage is formatted (kafka-storage format --feature), e.g. transaction.version: 1. */
  features?: Record<string, number>;
  /** Data dir (created if missing); default: a fresh temp dir, removed on stop(). */
  dataDir?: string;
  readyTimeoutMs?: number;
  /** Grace period after SIGTERM before SIGKILL on stop(); 0 kills at once. Default 5000. */
  stopGraceMs?: number;
  /** Start the JVM in its own process group, not killed when this process exits (scripts/apache-kafka/start.ts). */
  detached?: boolean;
}

export interface ApacheKafka {
  /** host:port clients should use (the advertised listener). */
  bootstrap: string;
  /** The broker's real listener port (differs from the bootstrap port when advertisedPort is set). */
  port: number;
  controllerPort: number;
  pid: number;
  dataDir: string;
  /** The JVM's stdout+stderr (WARN and above, plus one "Kafka Server started" line). */
  logFile: string;
  stop(): Promise<void>;
}

/** A free loopback TCP port (bound then released; the broker start is retried if it was taken). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Kafka's Uuid string form: 16 random bytes, URL-safe base64 without padding, not starting with '-'. */
export function randomClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Sends Metadata v1 (no topics) to host:port and returns how many brokers the answer lists,
 * or -1 when there is no answer (not listening yet, or requests not yet processed).
 */
export async function probeBrokerCount(host: string, port: number, timeoutMs = 1000): Promise<number> {
  const clientId = Buffer.from("bunka-probe");
  const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length + 4);
  let o = 0;
  o = body.writeInt16BE(3, o); // Metadata
  o = body.writeInt16BE(1, o); // v1
  o = body.writeInt32BE(1, o); // correlation id
  o = body.writeInt16BE(clientId.length, o);
  o += clientId.copy(body, o);
  body.writeInt32BE(0, o); // topics: empty array = none
  try {
    const response = await rawRequest(host, port, body, timeoutMs);
    // response header v0: correlation id; body v1: brokers array first
    return response.length >= 8 ? response.readInt32BE(4) : -1;
  } catch {
    return -1;
  }
}

/**
 * One request frame (`payload`: header and body, without the size prefix) to host:port on a fresh
 * connection; resolves with the response without its size prefix. Works before any version is known.
 */
export async function rawRequest(host: string, port: number, payload: Buffer, timeoutMs = 3000): Promise<Buffer> {
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

function serverProperties(o: {
  port: number;
  controllerPort: number;
  advertisedHost: string;
  advertisedPort: number;
  logDir: string;
  extra: Record<string, string | number | boolean>;
  extraListeners?: { name: string; port: number; protocol: string }[];
}): string {
  const more = o.extraListeners ?? [];
  const extraAddresses = more.map((l) => `,${l.name}://127.0.0.1:${l.port}`).join("");
  const props: Record<string, string | number | boolean> = {
    "process.roles": "broker,controller",
    "node.id": 1,
    "controller.quorum.bootstrap.servers": `127.0.0.1:${o.controllerPort}`,
    listeners: `PLAINTEXT://127.0.0.1:${o.port},CONTROLLER://127.0.0.1:${o.controllerPort}${extraAddresses}`,
    "advertised.listeners": `PLAINTEXT://${o.advertisedHost}:${o.advertisedPort},CONTROLLER://127.0.0.1:${o.controllerPort}${extraAddresses}`,
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": `CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT${more.map((l) => `,${l.name}:${l.protocol}`).join("")}`,
    "log.dirs": o.logDir,
    // A single node: internal topics cannot have 3 replicas. Everything else stays at Kafka's defaults.
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    ...o.extra,
  };
  return Object.entries(props)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")
    .concat("\n");
}

/** Starts a single-node KRaft Apache Kafka (combined broker+controller) and waits until it serves. */
export async function startApacheKafka(opts: StartOptions = {}): Promise<ApacheKafka> {
  const libs = await ensureKafkaLibs();
  const ownsDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "apache-kafka-"));
  mkdirSync(dataDir, { recursive: true });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
  let lastError: Error | undefined;
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        return await startOnce(libs, dataDir, ownsDataDir, opts, readyTimeoutMs);
      } catch (e) {
        lastError = e as Error;
        // Only a lost port race is worth another try.
        if (!/Address already in use|BindException/.test(lastError.message)) break;
        rmSync(join(dataDir, "kraft-logs"), { recursive: true, force: true });
      }
    }
  } catch (e) {
    lastError = e as Error;
  }
  if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
  throw lastError ?? new Error("startApacheKafka failed");
}

async function startOnce(
  libs: string,
  dataDir: string,
  ownsDataDir: boolean,
  opts: StartOptions,
  readyTimeoutMs: number,
): Promise<ApacheKafka> {
  const port = freePort();
  let controllerPort = freePort();
  while (controllerPort === port) controllerPort = freePort();
  const advertisedHost = opts.advertisedHost ?? "127.0.0.1";
  const advertisedPort = opts.advertisedPort ?? port;
  const logDir = join(dataDir, "kraft-logs");
  const propsFile = join(dataDir, "server.properties");
  const logFile = join(dataDir, "server.log");
  writeFileSync(
    propsFile,
    serverProperties({ port, controllerPort, advertisedHost, advertisedPort, logDir, extra: opts.serverProperties ?? {}, extraListeners: opts.extraListeners ?? [] }),
  );

  const format = await runKafkaTool("kafka-storage", [
    "format",
    "--cluster-id",
    randomClusterId(),
    "--config",
    propsFile,
    "--standalone",
    ...Object.entries(opts.features ?? {}).flatMap(([name, level]) => ["--feature", `${name}=${level}`]),
  ]);
  if (format.code !== 0) throw new Error(`kafka-storage format failed (${format.code}):\n${format.stdout}${format.stderr}`);

  const logFd = openSync(logFile, "a");
  const proc = Bun.spawn(
    [
      javaBin(),
      ...SERVER_JVM,
      `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`,
      `-Dkafka.logs.dir=${dataDir}`,
      "-cp",
      `${libs}/*`,
      KAFKA_SERVER_MAIN,
      propsFile,
    ],
    { stdin: "ignore", stdout: logFd, stderr: logFd, detached: opts.detached ?? false },
  );
  closeSync(logFd);
  if (opts.detached) proc.unref();
  else track(proc.pid);

  let exited = false;
  void proc.exited.then(() => (exited = true));

  const stopGraceMs = opts.stopGraceMs ?? 5000;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      if (!exited) {
        proc.kill(stopGraceMs > 0 ? "SIGTERM" : "SIGKILL");
        const killer = setTimeout(() => proc.kill("SIGKILL"), stopGraceMs);
        await proc.exited;
        clearTimeout(killer);
      }
      live.delete(proc.pid);
      if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) {
      const log = readFileSync(logFile, "utf8");
      throw new Error(`Apache Kafka exited before it was ready (exit ${proc.exitCode}); log:\n${log.slice(-4000)}`);
    }
    if ((await probeBrokerCount("127.0.0.1", port)) > 0) break;
    if (Date.now() > deadline) {
      const log = readFileSync(logFile, "utf8");
      await stop();
      throw new Error(`Apache Kafka not ready after ${readyTimeoutMs} ms; log:\n${log.slice(-4000)}`);
    }
    await sleep(100);
  }

  return {
    bootstrap: `${advertisedHost}:${advertisedPort}`,
    port,
    controllerPort,
    pid: proc.pid,
    dataDir,
    logFile,
    stop,
  };
}

// ---------------------------------------------------------------------------------------------
// A multi-node cluster

export interface KafkaClusterOptions {
  /** How many combined broker+controller nodes (all of them voters of the controller quorum). Default 3. */
  nodes?: number;
  /** Extra or overriding server.properties entries of every node. */
  serverProperties?: Record<string, string | number | boolean>;
  /** Parent of the nodes' data dirs (node-<id>/); default: a fresh temp dir, removed on stop(). */
  dataDir?: string;
  readyTimeoutMs?: number;
  /** Grace period after SIGTERM before SIGKILL on stop(); 0 kills at once. Default 5000. */
  stopGraceMs?: number;
}

export interface KafkaClusterNode {
  nodeId: number;
  port: number;
  controllerPort: number;
  pid: number;
  dataDir: string;
  logFile: string;
}

export interface ApacheKafkaCluster {
  /** Every node's host:port, comma-separated. */
  bootstrap: string;
  nodes: KafkaClusterNode[];
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * Starts an N-node KRaft Apache Kafka on loopback: every node is a combined broker+controller, and the
 * controller quorum is static (controller.quorum.voters names all N), formatted with one cluster id. Ready
 * when every node's Metadata lists all N brokers. The internal topics get replication factor 1 (like the
 * single node's), so that what a test or benchmark compares is one copy of every byte, as on a shared volume.
 */
export async function startApacheKafkaCluster(opts: KafkaClusterOptions = {}): Promise<ApacheKafkaCluster> {
  const libs = await ensureKafkaLibs();
  const n = opts.nodes ?? 3;
  const ownsDataDir = opts.dataDir === undefined;
  const root = opts.dataDir ?? mkdtempSync(join(tmpdir(), "apache-kafka-cluster-"));
  mkdirSync(root, { recursive: true });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const stopGraceMs = opts.stopGraceMs ?? 5000;
  const used = new Set<number>();
  const port = (): number => {
    for (;;) {
      const p = freePort();
      if (!used.has(p)) {
        used.add(p);
        return p;
      }
    }
  };
  const nodes: KafkaClusterNode[] = [];
  for (let id = 1; id <= n; id++) {
    const dataDir = join(root, `node-${id}`);
    mkdirSync(dataDir, { recursive: true });
    nodes.push({ nodeId: id, port: port(), controllerPort: port(), pid: 0, dataDir, logFile: join(dataDir, "server.log") });
  }
  const voters = nodes.map((x) => `${x.nodeId}@127.0.0.1:${x.controllerPort}`).join(",");
  const clusterId = randomClusterId();
  const procs: Bun.Subprocess[] = [];
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await Promise.all(
        procs.map(async (proc) => {
          if (proc.exitCode === null && proc.signalCode === null) {
            proc.kill(stopGraceMs > 0 ? "SIGTERM" : "SIGKILL");
            const killer = setTimeout(() => proc.kill("SIGKILL"), stopGraceMs);
            await proc.exited;
            clearTimeout(killer);
          }
          live.delete(proc.pid);
        }),
      );
      if (ownsDataDir) rmSync(root, { recursive: true, force: true });
    })());
  try {
    await Promise.all(
      nodes.map(async (node) => {
        const propsFile = join(node.dataDir, "server.properties");
        const base = serverProperties({
          port: node.port,
          controllerPort: node.controllerPort,
          advertisedHost: "127.0.0.1",
          advertisedPort: node.port,
          logDir: join(node.dataDir, "kraft-logs"),
          extra: { "node.id": node.nodeId, "controller.quorum.voters": voters, ...(opts.serverProperties ?? {}) },
        });
        // A static quorum: the single node's bootstrap-servers line would make it a dynamic one.
        const text = base
          .split("\n")
          .filter((l) => !l.startsWith("controller.quorum.bootstrap.servers="))
          .join("\n");
        writeFileSync(propsFile, text);
        const format = await runKafkaTool("kafka-storage", ["format", "--cluster-id", clusterId, "--config", propsFile]);
        if (format.code !== 0) throw new Error(`kafka-storage format of node ${node.nodeId} failed (${format.code}):\n${format.stdout}${format.stderr}`);
      }),
    );
    for (const node of nodes) {
      const logFd = openSync(node.logFile, "a");
      const proc = Bun.spawn(
        [
          javaBin(),
          ...SERVER_JVM,
          `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`,
          `-Dkafka.logs.dir=${node.dataDir}`,
          "-cp",
          `${libs}/*`,
          KAFKA_SERVER_MAIN,
          join(node.dataDir, "server.properties"),
        ],
        { stdin: "ignore", stdout: logFd, stderr: logFd },
      );
      closeSync(logFd);
      track(proc.pid);
      procs.push(proc);
      node.pid = proc.pid;
    }
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      const dead = nodes.findIndex((_, i) => procs[i]!.exitCode !== null || procs[i]!.signalCode !== null);
      if (dead >= 0) {
        const node = nodes[dead]!;
        throw new Error(`Apache Kafka node ${node.nodeId} exited before the cluster was ready; log:\n${readFileSync(node.logFile, "utf8").slice(-4000)}`);
      }
      const counts = await Promise.all(nodes.map((x) => probeBrokerCount("127.0.0.1", x.port)));
      if (counts.every((c) => c >= n)) break;
      if (Date.now() > deadline) {
        throw new Error(`Apache Kafka cluster not ready after ${readyTimeoutMs} ms (brokers seen per node: ${counts.join(", ")}); log of node 1:\n${readFileSync(nodes[0]!.logFile, "utf8").slice(-4000)}`);
      }
      await sleep(200);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { bootstrap: nodes.map((x) => `127.0.0.1:${x.port}`).join(","), nodes, dataDir: root, stop };
}
