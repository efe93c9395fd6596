/**
 * The harness of the Jepsen-style run (docs/checker.md): starts the compiled broker, creates the topics, runs
 * the workload clients (tests/interop/java/JepsenWorkload.java, one process per transactional id at a time),
 * injects faults on a schedule, stops the clients, reads every partition to its end, merges the history and
 * runs the checker.
 *
 *   const run = await runJepsen({ binary, workDir, durationMs: 60_000, clients: 3, ... });
 *   run.result.valid, run.result.stats, run.historyFile
 *
 * Faults, one at a time, at random intervals (kinds in turns, so that each enabled kind comes up):
 * - broker-kill: SIGKILL of the broker, restarted at once on the same data directory and port;
 * - broker-pause: SIGSTOP, then SIGCONT after a few seconds (sometimes longer than the clients' timeouts);
 * - client-crash: SIGKILL of a client process while it is inside a transaction (its last line is an invoke),
 *   then a new process on the same transactional id, whose initTransactions fences the old one. The killed
 *   process's unfinished transaction is written to the history as "info".
 * With `brokers: N` (N > 1) the run is against a cluster (tests/support/bunka-cluster.ts: one etcd, N brokers on
 * one shared data directory, fixed ports per broker id, the clients bootstrapped from all of them): broker-kill
 * SIGKILLs a random live broker and starts it again (it waits for its former lease to expire, then takes its
 * share back), broker-pause freezes a random broker (pauses longer than the lease, `sessionTimeoutMs`, let a
 * survivor take its partitions and slots over while it is stopped). The run waits for the cluster to be
 * balanced before the clients start; a failure adds every broker's log tail to the error.
 * The schedule is time-based on purpose (faults land wherever the workload is); waits for a state are
 * conditions (a client's last line, a process's exit).
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin } from "../apache-kafka.ts";
import { BunkaProcess } from "../binary.ts";
import { BunkaCluster } from "../bunka-cluster.ts";
import { LineChild } from "../line-child.ts";
import { seededRandom } from "../random.ts";
import { type CheckResult, checkHistory } from "./checker.ts";
import { type FinalSettled, type HistoryEvent, type NemesisEvent, type TxnEvent, formatHistory } from "./history.ts";

export type FaultKind = "broker-kill" | "broker-pause" | "client-crash";

export interface JepsenOptions {
  /** The bunka binary (a private copy: it is restarted many times). */
  binary: string;
  /** Where the data directory, the broker's log and history.jsonl go. */
  workDir: string;
  durationMs: number;
  /** Client processes running at once (one per transactional id); at most `partitions` unless sharedWrites. */
  clients: number;
  /**
   * Every client writes every partition. Kafka's log then interleaves concurrent transactions, and the
   * offset order makes G0/G1c cycles that Kafka allows (docs/checker.md): for looking at them, not for a
   * run that must be clean.
   */
  sharedWrites?: boolean;
  topics: string[];
  partitions: number;
  keysPerPartition: number;
  seed: number;
  faults: FaultKind[];
  /** Time between two faults (the first one too), drawn uniformly. */
  faultIntervalMs: { min: number; max: number };
  /** How long a broker-pause lasts, drawn uniformly. */
  pauseMs: { min: number; max: number };
  /** Extra `serve` flags for the broker. */
  brokerArgs?: string[];
  /** Brokers: 1 (default) runs one broker without etcd; more run a cluster (see above). */
  brokers?: number;
  /** broker.session.timeout.ms of a cluster's brokers (whole seconds). Default 3000. */
  sessionTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface JepsenRun {
  history: HistoryEvent[];
  historyFile: string;
  result: CheckResult;
  wallMs: number;
  /** Faults injected, by kind. */
  faults: Record<FaultKind, number>;
  /** Client crashes that hit a client inside a transaction (its last line an invoke). */
  clientCrashesMidTxn: number;
  /** Broker restarts that took longer than a few seconds (recovery), for the figures. */
  brokerRestartMs: number[];
  /** Which broker each broker fault hit (always 1 with a single broker), in order. */
  brokerVictims: number[];
  /** How long the final read waited for the last transactions' markers, and which partitions they held open. */
  finalSettled: FinalSettled | undefined;
}

/**
 * The brokers of a run behind one interface: one process (single-broker mode, no etcd) or a cluster. Broker ids
 * are 1 for the single broker.
 */
interface Brokers {
  bootstrap: string;
  pick(rng: ReturnType<typeof seededRandom>): number;
  /** SIGKILL, then start again; the milliseconds the start took. */
  killAndRestart(id: number): Promise<number>;
  pause(id: number): void;
  resume(id: number): void;
  /** Once the clients may start (a cluster: every partition of the topics led by a live broker). */
  ready(topics: string[]): Promise<void>;
  /** For a failure's message. */
  logTails(): string;
  close(): Promise<void>;
}

async function singleBroker(opts: JepsenOptions): Promise<Brokers> {
  const brokerOptions = (port = 0) => ({
    binary: opts.binary,
    dataDir: join(opts.workDir, "data"),
    logFile: join(opts.workDir, "bunka.stderr.log"),
    port,
    args: opts.brokerArgs ?? [],
  });
  let broker = await BunkaProcess.start(brokerOptions());
  return {
    bootstrap: broker.bootstrap,
    pick: () => 1,
    async killAndRestart() {
      await broker.kill("SIGKILL");
      const t0 = Date.now();
      broker = await BunkaProcess.start(brokerOptions(broker.port));
      return Date.now() - t0;
    },
    pause: () => process.kill(broker.pid, "SIGSTOP"),
    resume: () => process.kill(broker.pid, "SIGCONT"),
    ready: async () => {},
    // The single-broker test adds the log itself (withBrokerLog).
    logTails: () => "",
    async close() {
      try {
        process.kill(broker.pid, "SIGCONT");
      } catch {
        /* gone */
      }
      await broker.kill("SIGKILL");
    },
  };
}

async function clusterBrokers(opts: JepsenOptions): Promise<Brokers> {
  const cluster = await BunkaCluster.start({
    brokers: opts.brokers!,
    sessionTimeoutMs: opts.sessionTimeoutMs ?? 3000,
    extraArgs: opts.brokerArgs ?? [],
    dir: opts.workDir,
    binary: opts.binary,
  });
  return {
    bootstrap: cluster.bootstrap,
    pick: (rng) => rng.pick(cluster.liveIds()),
    async killAndRestart(id) {
      await cluster.kill(id, "SIGKILL");
      const t0 = Date.now();
      await cluster.restart(id);
      return Date.now() - t0;
    },
    pause: (id) => cluster.pause(id),
    resume: (id) => cluster.resume(id),
    ready: async (topics) => void (await cluster.waitForBalanced(topics)),
    logTails: () => cluster.logTails(),
    close: () => cluster.close(),
  };
}

const CLASSES = join(REPO_ROOT, ".cache", "java-classes", "jepsen");
const SOURCE = join(REPO_ROOT, "tests", "interop", "java", "JepsenWorkload.java");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];

/** javac of JepsenWorkload.java into .cache/java-classes/jepsen/, unless the class is newer than the source. */
export async function compileJepsenWorkload(): Promise<string> {
  const libs = await ensureKafkaLibs();
  const cls = join(CLASSES, "JepsenWorkload.class");
  if (existsSync(cls) && statSync(cls).mtimeMs >= statSync(SOURCE).mtimeMs) return libs;
  mkdirSync(CLASSES, { recursive: true });
  const javac = process.env.JAVA_HOME && existsSync(join(process.env.JAVA_HOME, "bin/javac")) ? join(process.env.JAVA_HOME, "bin/javac") : "javac";
  const proc = Bun.spawn([javac, "-nowarn", "-d", CLASSES, "-cp", `${libs}/*`, SOURCE], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac failed (${code}):\n${out}${err}`);
  return libs;
}

/** A JepsenWorkload process. */
class WorkloadChild extends LineChild {
  constructor(libs: string, args: string[]) {
    super(`JepsenWorkload ${args.slice(0, 4).join(" ")}`, [javaBin(), ...JVM_FLAGS, "-cp", `${CLASSES}:${libs}/*`, "JepsenWorkload", ...args]);
  }

  /** The complete lines printed so far (a line cut by a kill is left out). */
  lines(): string[] {
    const all = this.stdout.split("\n");
    all.pop();
    return all;
  }

  events(): HistoryEvent[] {
    return this.lines()
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as HistoryEvent);
  }
}

interface Client {
  process: number;
  lineage: number;
  child: WorkloadChild;
  /** Set when the harness killed it: its events are final. */
  killedAtMs?: number;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Merges per-process sequences by time while keeping each sequence's own order (a process's clock may step
 * back; its order is what the checker needs).
 */
export function mergeByTime(sequences: HistoryEvent[][]): HistoryEvent[] {
  const heads = sequences.map(() => 0);
  const out: HistoryEvent[] = [];
  const timeOf = (e: HistoryEvent) => ("time" in e ? e.time : Number.POSITIVE_INFINITY);
  for (;;) {
    let best = -1;
    for (let i = 0; i < sequences.length; i++) {
      if (heads[i]! >= sequences[i]!.length) continue;
      if (best < 0 || timeOf(sequences[i]![heads[i]!]!) < timeOf(sequences[best]![heads[best]!]!)) best = i;
    }
    if (best < 0) return out;
    out.push(sequences[best]![heads[best]!++]!);
  }
}

export async function runJepsen(opts: JepsenOptions): Promise<JepsenRun> {
  if (opts.clients > opts.partitions && !opts.sharedWrites) throw new Error("clients must be at most partitions (one writer per partition)");
  const log = opts.log ?? (() => {});
  const startedMs = Date.now();
  const libs = await compileJepsenWorkload();
  const rng = seededRandom(opts.seed);
  mkdirSync(opts.workDir, { recursive: true });
  const brokers = (opts.brokers ?? 1) > 1 ? await clusterBrokers(opts) : await singleBroker(opts);
  const bootstrap = brokers.bootstrap;
  log(`${(opts.brokers ?? 1) > 1 ? `${opts.brokers} brokers` : "broker"} on ${bootstrap}`);
  const harnessEvents: HistoryEvent[] = [];
  const nemesis = (f: NemesisEvent["f"], processId?: number) => {
    const e: NemesisEvent = processId === undefined ? { type: "nemesis", f, time: Date.now() } : { type: "nemesis", f, time: Date.now(), process: processId };
    harnessEvents.push(e);
    log(`${f}${processId === undefined ? "" : ` process ${processId}`} at +${((e.time - startedMs) / 1000).toFixed(1)} s`);
  };

  const clients: Client[] = [];
  try {
    const create = new WorkloadChild(libs, ["create", bootstrap, ...opts.topics.map((t) => `${t}:${opts.partitions}`)]);
    if ((await create.exitWithin(60_000)) !== 0) throw new Error(`creating the topics failed\n${create.output()}`);
    await brokers.ready(opts.topics);

    let nextProcess = 1;
    const spawn = (lineage: number): Client => {
      const processId = nextProcess++;
      const args = ["run", bootstrap, String(processId), String(lineage), String(opts.clients), String(opts.seed), opts.topics.join(","), String(opts.partitions), String(opts.keysPerPartition), ...(opts.sharedWrites ? ["shared"] : [])];
      const client: Client = { process: processId, lineage, child: new WorkloadChild(libs, args) };
      clients.push(client);
      return client;
    };
    const running = new Map<number, Client>(); // lineage -> its live process
    for (let lineage = 0; lineage < opts.clients; lineage++) running.set(lineage, spawn(lineage));

    // ---------------------------------------------------------------------------------------------
    // Faults until the end of the run

    const faults: Record<FaultKind, number> = { "broker-kill": 0, "broker-pause": 0, "client-crash": 0 };
    let clientCrashesMidTxn = 0;
    const brokerRestartMs: number[] = [];
    const brokerVictims: number[] = [];
    const endAtMs = startedMs + opts.durationMs;
    let turn = rng.int(0, Math.max(0, opts.faults.length - 1));
    while (opts.faults.length > 0) {
      const waitMs = rng.int(opts.faultIntervalMs.min, opts.faultIntervalMs.max);
      if (Date.now() + waitMs >= endAtMs) break;
      await delay(waitMs);
      const kind = opts.faults[turn++ % opts.faults.length]!;
      for (const c of running.values()) if (c.child.done) throw new Error(`client process ${c.process} exited on its own\n${c.child.output()}`);
      if (kind === "broker-kill") {
        const victim = brokers.pick(rng);
        brokerVictims.push(victim);
        nemesis("broker-kill");
        brokerRestartMs.push(await brokers.killAndRestart(victim));
        nemesis("broker-restart");
      } else if (kind === "broker-pause") {
        const victim = brokers.pick(rng);
        brokerVictims.push(victim);
        nemesis("broker-pause");
        brokers.pause(victim);
        try {
          await delay(rng.int(opts.pauseMs.min, opts.pauseMs.max));
        } finally {
          brokers.resume(victim);
        }
        nemesis("broker-resume");
      } else {
        const victim = running.get(rng.int(0, opts.clients - 1))!;
        // Inside a transaction: its last line is an invoke (it always is but for a moment between two).
        const deadline = Date.now() + 10_000;
        const lastIsInvoke = () => victim.child.lines().at(-1)?.includes('"type":"invoke"') ?? false;
        while (!lastIsInvoke() && Date.now() < deadline) await delay(1);
        if (lastIsInvoke()) clientCrashesMidTxn++;
        nemesis("client-crash", victim.process);
        victim.killedAtMs = Date.now();
        await victim.child.kill();
        running.set(victim.lineage, spawn(victim.lineage));
      }
      faults[kind]++;
    }
    await delay(Math.max(0, endAtMs - Date.now()));

    // ---------------------------------------------------------------------------------------------
    // Stop the clients, settle what a client left open, read everything back

    log("stopping the clients");
    for (const c of running.values()) c.child.line("STOP");
    for (const c of running.values()) {
      const code = await c.child.exitCodeWithin(60_000);
      if (code === undefined) {
        c.killedAtMs = Date.now();
        log(`process ${c.process} did not stop within 60 s: killed, its transactional id fenced`);
        const fence = new WorkloadChild(libs, ["fence", bootstrap, String(c.lineage)]);
        if ((await fence.exitWithin(120_000)) !== 0) throw new Error(`fencing lineage ${c.lineage} failed\n${fence.output()}`);
      } else if (code !== 0) throw new Error(`client process ${c.process} exited ${code}\n${c.child.output()}`);
    }
    log("final read");
    const final = new WorkloadChild(libs, ["final", bootstrap, opts.topics.join(","), String(opts.partitions), "60000"]);
    const finalCode = await final.exitWithin(120_000);
    if (finalCode !== 0) throw new Error(`the final read failed (${finalCode})\n${final.output()}`);

    // ---------------------------------------------------------------------------------------------
    // The history

    const sequences: HistoryEvent[][] = [harnessEvents];
    for (const c of clients) {
      const events = c.child.events();
      if (c.killedAtMs !== undefined) {
        // The unfinished transaction of a killed process: unknown outcome.
        const ended = new Set(events.filter((e) => e.type === "ok" || e.type === "fail" || e.type === "info").map((e) => (e as TxnEvent).txn));
        for (const e of events) {
          if (e.type === "invoke" && !ended.has(e.txn)) {
            events.push({ type: "info", process: e.process, txn: e.txn, time: c.killedAtMs, ops: [], error: "client killed" });
            break;
          }
        }
      }
      sequences.push(events);
    }
    const history = [...mergeByTime(sequences), ...final.events()];
    const historyFile = join(opts.workDir, "history.jsonl");
    writeFileSync(historyFile, formatHistory(history));
    const result = checkHistory(history);
    const finalSettled = final.events().find((e): e is FinalSettled => e.type === "final-settled");
    return { history, historyFile, result, wallMs: Date.now() - startedMs, faults, clientCrashesMidTxn, brokerRestartMs, brokerVictims, finalSettled };
  } catch (error) {
    const tails = brokers.logTails();
    if (tails !== "" && error instanceof Error) error.message += `\n${tails}`;
    throw error;
  } finally {
    for (const c of clients) if (!c.child.done) c.child.proc.kill("SIGKILL");
    await brokers.close();
  }
}
