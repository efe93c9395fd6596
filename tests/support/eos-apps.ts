/**
 * What the exactly-once application tests (tests/interop/kafka-streams-eos.test.ts and
 * kafka-connect-eos.test.ts) share: the broker under test (bunka in process, or Apache Kafka 4.1.1 with
 * EOS_APPS_TARGET=apache), their Java programs (tests/interop/java/eos-apps/, compiled with javac against the
 * jars scripts/apache-kafka/fetch.sh resolves), those programs as child processes followed line by line, a
 * few raw requests, and a read_committed reader built on raw Fetch.
 *
 *   const target = await startTarget();
 *   const app = new JvmApp("word count run 1", "WordCountEos", [target.bootstrap, ...]);
 *   await app.waitForLine("RUNNING", (l) => l === "STATE RUNNING", 60_000);
 *   await app.kill();                                  // SIGKILL, waits for the exit
 *   await killJvmApps(); await target.stop();          // afterAll
 */
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { DEFAULT_CLEANER_CONFIG } from "../../src/domain/cleaner-config.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin, startApacheKafka, type ApacheKafka } from "./apache-kafka.ts";
import { decodeRecordSet } from "./record-decoder.ts";
import { startTestBroker, type TestBroker } from "./test-broker.ts";
import { WireClient } from "./wire-client.ts";

export const EOS_APPS_TARGET: "apache" | "bunka" = process.env.EOS_APPS_TARGET === "apache" ? "apache" : "bunka";
const JAVA_SOURCES = join(REPO_ROOT, "tests/interop/java/eos-apps");
const CLASSES = join(REPO_ROOT, ".cache/java-classes/eos-apps");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx384m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];

// ---------------------------------------------------------------------------------------------
// The broker under test

export interface Target {
  name: "apache" | "bunka";
  bootstrap: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * bunka in this process, or Apache Kafka 4.1.1 (EOS_APPS_TARGET=apache): a failure against bunka that also
 * happens against Apache is the application's or the test's, not bunka's. Both start groups without the
 * initial rebalance delay and create no topic automatically (every topic is created by the test or by the
 * application's own admin client). `cleanerBackoffMs` sets log.cleaner.backoff.ms (default 15 s in both), how
 * long the log cleaner waits when nothing was dirty enough to clean.
 */
export async function startTarget(opts: { cleanerBackoffMs?: number } = {}): Promise<Target> {
  if (EOS_APPS_TARGET === "apache") {
    const apache: ApacheKafka = await startApacheKafka({
      serverProperties: {
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": false,
        ...(opts.cleanerBackoffMs === undefined ? {} : { "log.cleaner.backoff.ms": opts.cleanerBackoffMs }),
      },
    });
    return { name: "apache", bootstrap: apache.bootstrap, port: apache.port, stop: () => apache.stop() };
  }
  const bunka: TestBroker = await startTestBroker({
    groupInitialRebalanceDelayMs: 0,
    autoCreateTopicsEnable: false,
    ...(opts.cleanerBackoffMs === undefined ? {} : { cleaner: { ...DEFAULT_CLEANER_CONFIG, backoffMs: opts.cleanerBackoffMs } }),
  });
  return { name: "bunka", bootstrap: bunka.bootstrap, port: bunka.port, stop: () => bunka.stop() };
}

// ---------------------------------------------------------------------------------------------
// Java programs

let compiled: Promise<string> | undefined;

/**
 * javac of every program in tests/interop/java/eos-apps/ into .cache/java-classes/eos-apps/, unless every
 * class file is newer than every source; resolves with the classpath to run them (classes and Kafka's jars).
 */
export function compileEosApps(): Promise<string> {
  compiled ??= (async () => {
    const libs = await ensureKafkaLibs();
    const sources = readdirSync(JAVA_SOURCES).filter((f) => f.endsWith(".java"));
    const newestSource = Math.max(...sources.map((f) => statSync(join(JAVA_SOURCES, f)).mtimeMs));
    const fresh = sources.every((f) => {
      const cls = join(CLASSES, f.replace(/\.java$/, ".class"));
      return existsSync(cls) && statSync(cls).mtimeMs >= newestSource;
    });
    if (!fresh) {
      mkdirSync(CLASSES, { recursive: true });
      const javac = process.env.JAVA_HOME && existsSync(join(process.env.JAVA_HOME, "bin/javac")) ? join(process.env.JAVA_HOME, "bin/javac") : "javac";
      const proc = Bun.spawn([javac, "-nowarn", "-d", CLASSES, "-cp", `${libs}/*`, ...sources.map((f) => join(JAVA_SOURCES, f))], { stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      if (code !== 0) throw new Error(`javac of tests/interop/java/eos-apps failed (exit ${code}):\n${out}${err}`);
    }
    return `${CLASSES}:${libs}/*`;
  })();
  compiled.catch(() => (compiled = undefined));
  return compiled;
}

const liveApps = new Set<JvmApp>();
let exitHookInstalled = false;

/**
 * One run of a Java program (the classpath from compileEosApps): its stdout as lines as they come, with
 * listeners and bounded waits on them; its stderr's tail for diagnostics. Every run still alive is SIGKILLed
 * by killJvmApps() and when the test process exits.
 */
export class JvmApp {
  readonly lines: string[] = [];
  stderr = "";
  exitCode: number | null = null;
  readonly exited: Promise<number>;
  private readonly proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  private readonly listeners: ((line: string) => void)[] = [];
  private wake: () => void = () => undefined;

  constructor(
    readonly label: string,
    classpath: string,
    main: string,
    args: string[],
  ) {
    this.proc = Bun.spawn([javaBin(), ...JVM_FLAGS, "-cp", classpath, main, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    liveApps.add(this);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on("exit", () => {
        for (const app of liveApps) app.proc.kill("SIGKILL");
      });
    }
    const readLines = async () => {
      let partial = "";
      const decoder = new TextDecoder();
      for await (const chunk of this.proc.stdout) {
        partial += decoder.decode(chunk, { stream: true });
        const parts = partial.split("\n");
        partial = parts.pop()!;
        for (const line of parts) {
          this.lines.push(line);
          for (const listener of this.listeners) listener(line);
        }
        this.wake();
      }
    };
    const readStderr = async () => {
      const decoder = new TextDecoder();
      for await (const chunk of this.proc.stderr) this.stderr = (this.stderr + decoder.decode(chunk, { stream: true })).slice(-40_000);
    };
    this.exited = Promise.all([readLines(), readStderr(), this.proc.exited]).then(([, , code]) => {
      this.exitCode = code;
      liveApps.delete(this);
      this.wake();
      return code;
    });
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** Calls `listener` with every stdout line from now on. */
  onLine(listener: (line: string) => void): void {
    this.listeners.push(listener);
  }

  /** Resolves with the first line matching `match`; fails when the program exits first, or on timeout. */
  async waitForLine(what: string, match: (line: string) => boolean, timeoutMs: number): Promise<string> {
    await this.waitFor(what, () => this.lines.some(match), timeoutMs);
    return this.lines.find(match)!;
  }

  /** Until `condition` holds, checked on every stdout line; fails when the program exits first, or on timeout. */
  async waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (condition()) return;
      if (this.exitCode !== null) throw new Error(`${this.label} exited (${this.exitCode}) before ${what}\n${this.diagnostics()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.label}: timed out after ${timeoutMs} ms waiting for ${what}\n${this.diagnostics()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Sends `signal` unless the program has exited, and waits for the exit. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<number> {
    if (this.exitCode === null) this.proc.kill(signal);
    return await this.exited;
  }

  /**
   * The exit code after `signal`; SIGKILLed (and then undefined) when it takes longer than `timeoutMs`,
   * after its threads' stacks were taken (`threadDump`, for the failure's message).
   */
  async stop(signal: NodeJS.Signals, timeoutMs: number): Promise<number | undefined> {
    if (this.exitCode === null) this.proc.kill(signal);
    const timer = setTimeout(() => {
      void this.dumpThreads().finally(() => this.proc.kill("SIGKILL"));
    }, timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return this.proc.signalCode === "SIGKILL" ? undefined : code;
  }

  /** The JVM's thread stacks (jcmd Thread.print) when `stop` had to SIGKILL it, else empty. */
  threadDump = "";

  private async dumpThreads(): Promise<void> {
    const jcmd = join(dirname(javaBin()), "jcmd");
    try {
      const proc = Bun.spawn([existsSync(jcmd) ? jcmd : "jcmd", String(this.proc.pid), "Thread.print"], { stdout: "pipe", stderr: "pipe" });
      const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      clearTimeout(killer);
      this.threadDump = `--- ${this.label} threads (jcmd Thread.print) ---\n${out}${err}`;
    } catch (error) {
      this.threadDump = `--- ${this.label}: jcmd failed: ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  diagnostics(lines = 20): string {
    return `--- ${this.label} stdout tail ---\n${this.lines.slice(-lines).join("\n")}\n--- stderr tail ---\n${this.stderr.slice(-6000)}`;
  }
}

/** SIGKILLs every program run still alive and waits for them (afterAll: a failed test leaves none behind). */
export async function killJvmApps(): Promise<void> {
  await Promise.all([...liveApps].map((app) => app.kill("SIGKILL")));
}

// ---------------------------------------------------------------------------------------------
// Waiting

/**
 * Polls `condition` every `everyMs` until it holds; fails naming `what` after the deadline, with what `state`
 * says about where things stood then.
 */
export async function waitForCondition(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 50,
  state?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${state ? ` (${state()})` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

// ---------------------------------------------------------------------------------------------
// Raw requests

export async function withWire<T>(port: number, fn: (client: WireClient) => Promise<T>): Promise<T> {
  const client = await WireClient.connect(port);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

export interface TopicSpec {
  name: string;
  partitions: number;
  configs?: Record<string, string>;
}

/** CreateTopics v7, every topic answered NONE; then until Metadata names a leader for every partition. */
export async function createTopics(port: number, topics: TopicSpec[]): Promise<void> {
  await withWire(port, async (client) => {
    const res = await client.request(19, 7, {
      topics: topics.map((t) => ({
        name: t.name,
        numPartitions: t.partitions,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
      })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    const answers = res.topics.map((t: { name: string; errorCode: number; errorMessage: string | null }) => `${t.name}: ${t.errorCode}${t.errorMessage ? ` (${t.errorMessage})` : ""}`);
    if (res.topics.some((t: { errorCode: number }) => t.errorCode !== ErrorCode.NONE)) throw new Error(`CreateTopics refused: ${answers.join(", ")}`);
  });
  // Apache Kafka answers CreateTopics before its metadata names the leaders.
  await waitForCondition(
    `leaders of ${topics.map((t) => t.name).join(", ")}`,
    () =>
      withWire(port, async (client) => {
        const md = await client.request(3, 12, { topics: topics.map((t) => ({ name: t.name, topicId: ZERO_UUID })), allowAutoTopicCreation: false });
        return md.topics.every(
          (t: { name: string; errorCode: number; partitions: { errorCode: number; leaderId: number }[] }) =>
            t.errorCode === ErrorCode.NONE &&
            t.partitions.length === topics.find((s) => s.name === t.name)!.partitions &&
            t.partitions.every((p) => p.errorCode === ErrorCode.NONE && p.leaderId >= 0),
        );
      }),
    30_000,
  );
}

/** Partition counts of the topics Metadata v12 knows, by name (an unknown topic is left out). */
export async function partitionCounts(port: number, topics: string[]): Promise<Map<string, number>> {
  return await withWire(port, async (client) => {
    const md = await client.request(3, 12, { topics: topics.map((name) => ({ name, topicId: ZERO_UUID })), allowAutoTopicCreation: false });
    const out = new Map<string, number>();
    for (const t of md.topics as { name: string; errorCode: number; partitions: unknown[] }[]) if (t.errorCode === ErrorCode.NONE) out.set(t.name, t.partitions.length);
    return out;
  });
}

/** A topic's configs as DescribeConfigs v4 answers them (name -> value). */
export async function topicConfigs(port: number, topic: string): Promise<Record<string, string | null>> {
  return await withWire(port, async (client) => {
    const res = await client.request(32, 4, { resources: [{ resourceType: 2, resourceName: topic, configurationKeys: null }], includeSynonyms: false, includeDocumentation: false });
    const r = res.results[0];
    if (r.errorCode !== ErrorCode.NONE) throw new Error(`DescribeConfigs ${topic}: error ${r.errorCode} (${r.errorMessage})`);
    return Object.fromEntries(r.configs.map((c: { name: string; value: string | null }) => [c.name, c.value]));
  });
}

/** Per partition: the high watermark (isolation 0) or the last stable offset (1), by ListOffsets v7. */
export async function endOffsets(port: number, topic: string, partitions: number, isolationLevel: 0 | 1 = 0): Promise<number[]> {
  return await withWire(port, (client) => endOffsetsOn(client, topic, partitions, isolationLevel));
}

/** endOffsets on a connection the caller keeps (for polling). */
export async function endOffsetsOn(client: WireClient, topic: string, partitions: number, isolationLevel: 0 | 1 = 0): Promise<number[]> {
  return await listOffsetsOn(client, topic, partitions, -1, isolationLevel);
}

/** Per partition: the log start offset, by ListOffsets v7 (the earliest timestamp, -2). */
export async function startOffsets(port: number, topic: string, partitions: number): Promise<number[]> {
  return await withWire(port, (client) => listOffsetsOn(client, topic, partitions, -2, 0));
}

async function listOffsetsOn(client: WireClient, topic: string, partitions: number, timestamp: -1 | -2, isolationLevel: 0 | 1): Promise<number[]> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel,
    topics: [{ name: topic, partitions: Array.from({ length: partitions }, (_, p) => ({ partitionIndex: p, currentLeaderEpoch: -1, timestamp })) }],
  });
  const out: number[] = [];
  for (const p of res.topics[0].partitions) {
    if (p.errorCode !== ErrorCode.NONE) throw new Error(`ListOffsets ${topic}-${p.partitionIndex}: error ${p.errorCode}`);
    out[p.partitionIndex] = p.offset;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// read_committed

export interface CommittedRecord {
  offset: number;
  key: Uint8Array | null;
  value: Uint8Array | null;
}

/**
 * One partition read read_committed with raw Fetch v12 (isolation 1), as a Java consumer reads it: up to the
 * last stable offset, an aborted transaction of producer P starting at offset F hiding P's transactional
 * batches from F up to P's next ABORT marker, control batches skipped. `poll()` returns what became
 * readable since the last call, so a test can follow a topic while it is written.
 */
export class CommittedReader {
  /** The next offset to fetch. */
  position = 0;
  /** The partition's last stable offset and high watermark as the latest answer gave them. */
  lastStableOffset = -1;
  highWatermark = -1;
  /** Records hidden because their transaction was aborted, and the markers seen. */
  abortedRecords = 0;
  abortMarkers = 0;
  commitMarkers = 0;
  /** Data batches that are not transactional. */
  nonTransactionalBatches = 0;

  constructor(
    readonly client: WireClient,
    readonly topic: string,
    readonly partition: number,
    /** The topic is compacted: its batches may hold fewer records than their offset span. */
    readonly cleaned = false,
  ) {}

  async poll(): Promise<CommittedRecord[]> {
    const out: CommittedRecord[] = [];
    for (;;) {
      const res = await this.client.request(1, 12, {
        replicaId: -1,
        maxWaitMs: 0,
        minBytes: 0,
        maxBytes: 1024 * 1024,
        isolationLevel: 1,
        sessionId: 0,
        sessionEpoch: -1,
        topics: [{ topic: this.topic, partitions: [{ partition: this.partition, fetchOffset: this.position, partitionMaxBytes: 1024 * 1024, logStartOffset: -1 }] }],
      });
      const where = `fetch ${this.topic}-${this.partition}@${this.position}`;
      if (res.errorCode !== ErrorCode.NONE) throw new Error(`${where}: top-level error ${res.errorCode}`);
      const data = res.responses[0].partitions[0];
      if (data.errorCode !== ErrorCode.NONE) throw new Error(`${where}: error ${data.errorCode}`);
      this.lastStableOffset = data.lastStableOffset;
      this.highWatermark = data.highWatermark;
      if (this.position >= data.lastStableOffset) return out;
      const pending = [...((data.abortedTransactions ?? []) as { producerId: number; firstOffset: number }[])].sort((a, b) => a.firstOffset - b.firstOffset);
      const abortedProducers = new Set<number>();
      let progressed = false;
      for (const batch of decodeRecordSet(data.records ?? new Uint8Array(0), { cleaned: this.cleaned }).batches) {
        const h = batch.header;
        const lastOffset = h.baseOffset + h.lastOffsetDelta;
        if (lastOffset < this.position) continue;
        if (h.baseOffset >= data.lastStableOffset) throw new Error(`${where}: a read_committed answer holds a batch at ${h.baseOffset}, at or past the LSO ${data.lastStableOffset}`);
        while (pending.length > 0 && pending[0]!.firstOffset <= lastOffset) abortedProducers.add(pending.shift()!.producerId);
        const fresh = batch.records.filter((r) => r.offset >= this.position);
        if (h.isControl) {
          const key = batch.records[0]!.key!;
          const abort = new DataView(key.buffer, key.byteOffset, key.byteLength).getInt16(2) === 0;
          if (abort) {
            this.abortMarkers++;
            abortedProducers.delete(h.producerId);
          } else {
            this.commitMarkers++;
          }
        } else if (h.isTransactional && abortedProducers.has(h.producerId)) {
          this.abortedRecords += fresh.length;
        } else {
          if (!h.isTransactional) this.nonTransactionalBatches++;
          for (const r of fresh) out.push({ offset: r.offset, key: r.key, value: r.value });
        }
        this.position = lastOffset + 1;
        progressed = true;
      }
      if (!progressed) throw new Error(`${where}: no batch below the LSO ${data.lastStableOffset}`);
    }
  }
}

/**
 * How many records the log cleaner removed from a partition: the offsets from its log start to its high
 * watermark that no batch holds any more (read with raw Fetch v12, read_uncommitted, control records counted
 * as held).
 */
export async function removedByCleaner(client: WireClient, topic: string, partition: number): Promise<number> {
  let offset = 0;
  let held = 0;
  let highWatermark = -1;
  let logStartOffset = -1;
  for (;;) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1024 * 1024,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: 1024 * 1024, logStartOffset: -1 }] }],
    });
    const where = `fetch ${topic}-${partition}@${offset}`;
    if (res.errorCode !== ErrorCode.NONE) throw new Error(`${where}: top-level error ${res.errorCode}`);
    const data = res.responses[0].partitions[0];
    if (data.errorCode !== ErrorCode.NONE) throw new Error(`${where}: error ${data.errorCode}`);
    if (highWatermark < 0) {
      highWatermark = data.highWatermark;
      logStartOffset = data.logStartOffset;
      offset = Math.max(offset, logStartOffset);
    }
    if (offset >= highWatermark) return highWatermark - logStartOffset - held;
    let progressed = false;
    for (const batch of decodeRecordSet(data.records ?? new Uint8Array(0), { cleaned: true }).batches) {
      const lastOffset = batch.header.baseOffset + batch.header.lastOffsetDelta;
      if (lastOffset < offset) continue;
      held += batch.records.filter((r) => r.offset >= offset && r.offset < highWatermark).length;
      offset = lastOffset + 1;
      progressed = true;
    }
    if (!progressed) throw new Error(`${where}: no batch below the high watermark ${highWatermark}`);
  }
}
