/**
 * Real clients for the cluster tests (tests/cluster/): Apache's Java programs of tests/interop/java (compiled
 * here into .cache/java-classes/cluster/), librdkafka's idempotent producer (tests/fault/python), and the check
 * that a numbered sequence was written exactly once in order.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { LOG4J_CONFIG, REPO_ROOT, type ToolResult, ensureKafkaLibs, javaBin } from "./apache-kafka.ts";
import { VENV_PYTHON } from "./interop-clients.ts";
import { LineChild } from "./line-child.ts";

const CLASSES = join(REPO_ROOT, ".cache", "java-classes", "cluster");
const JAVA_SOURCES = join(REPO_ROOT, "tests", "interop", "java");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];
export const PY_IDEMPOTENT_PRODUCER = join(REPO_ROOT, "tests", "fault", "python", "idempotent_producer.py");
export const PY_CONSUMER_GROUP = join(REPO_ROOT, "tests", "interop", "python", "consumer_group.py");

let libs = "";

/** javac of the named programs of tests/interop/java, unless every class is newer than its source; the libs dir. */
export async function compileJavaPrograms(programs: string[]): Promise<string> {
  libs = await ensureKafkaLibs();
  const fresh = programs.every((p) => {
    const cls = join(CLASSES, `${p}.class`);
    return existsSync(cls) && statSync(cls).mtimeMs >= statSync(join(JAVA_SOURCES, `${p}.java`)).mtimeMs;
  });
  if (fresh) return libs;
  mkdirSync(CLASSES, { recursive: true });
  const javac = process.env.JAVA_HOME && existsSync(join(process.env.JAVA_HOME, "bin/javac")) ? join(process.env.JAVA_HOME, "bin/javac") : "javac";
  const proc = Bun.spawn([javac, "-nowarn", "-d", CLASSES, "-cp", `${libs}/*`, ...programs.map((p) => join(JAVA_SOURCES, `${p}.java`))], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`javac failed (${code}):\n${out}${err}`);
  return libs;
}

/** A Java program (compiled by compileJavaPrograms) as a child process. */
export class JavaChild extends LineChild {
  constructor(main: string, args: string[]) {
    super(`java ${main}`, [javaBin(), ...JVM_FLAGS, "-cp", `${CLASSES}:${libs}/*`, main, ...args]);
  }
}

/** Runs a Java program to its end (SIGKILLed after `timeoutMs`, then code 124). */
export async function runJava(main: string, args: string[], timeoutMs = 90_000): Promise<ToolResult> {
  const child = new JavaChild(main, args);
  const code = await child.exitCodeWithin(timeoutMs);
  return { code: code ?? 124, stdout: child.stdout, stderr: child.stderr };
}

/** `r`, or a failure with its output when it did not exit 0. */
export function ok(r: ToolResult, what = "process"): ToolResult {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n--- stdout ---\n${r.stdout.slice(-4000)}--- stderr ---\n${r.stderr.slice(-4000)}`);
  return r;
}

export interface IdempotentReport {
  count: number;
  delivered: number;
  failed: { index: number; error: string }[];
  fatal: string | null;
  errors: string[];
  undelivered_after_flush: number;
  /** [index, partition, offset] per acknowledged record. */
  reports: [number, number, number][];
  elapsed_s: number;
}

/** librdkafka's idempotent producer (acks=all) of `count` records "py-<i>" to `topic`, as a child process. */
export function startIdempotentProducer(bootstrap: string, topic: string, count: number, ratePerS: number, out: string): LineChild {
  return new LineChild("idempotent_producer.py", [VENV_PYTHON, PY_IDEMPOTENT_PRODUCER, "--bootstrap", bootstrap, "--topic", topic, "--count", String(count), "--rate", String(ratePerS), "--out", out]);
}

export function readIdempotentReport(out: string): IdempotentReport {
  return JSON.parse(readFileSync(out, "utf8")) as IdempotentReport;
}

/**
 * What is wrong with a partition's contents given the values a producer numbered 0, 1, 2, ... (`numberOf` reads
 * a record's number, or undefined for a record of someone else): every acknowledged number present exactly
 * once, the numbers increasing per partition, acknowledged offsets holding their number. Empty when all holds.
 */
export function sequenceProblems(
  partitions: Map<number, { offset: number; value: string | null }[]>,
  numberOf: (value: string | null) => number | undefined,
  acknowledged: Map<number, { partition: number; offset?: number }>,
): string[] {
  const problems: string[] = [];
  const seen = new Map<number, { partition: number; offset: number }>();
  for (const [partition, records] of partitions) {
    let last = -1;
    for (const r of records) {
      const n = numberOf(r.value);
      if (n === undefined) continue;
      const before = seen.get(n);
      if (before !== undefined) problems.push(`record ${n} twice: ${before.partition}@${before.offset} and ${partition}@${r.offset}`);
      seen.set(n, { partition, offset: r.offset });
      if (n <= last) problems.push(`partition ${partition}: record ${n} at offset ${r.offset} after record ${last}`);
      last = Math.max(last, n);
    }
  }
  for (const [n, ack] of acknowledged) {
    const at = seen.get(n);
    if (at === undefined) problems.push(`acknowledged record ${n} (partition ${ack.partition}${ack.offset === undefined ? "" : ` offset ${ack.offset}`}) is missing`);
    else if (at.partition !== ack.partition || (ack.offset !== undefined && at.offset !== ack.offset))
      problems.push(`acknowledged record ${n} at ${ack.partition}@${ack.offset} is at ${at.partition}@${at.offset}`);
  }
  return problems;
}
