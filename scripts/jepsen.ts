#!/usr/bin/env bun
/**
 * A longer Jepsen-style run (docs/checker.md) than the one in the test suite, printing its figures.
 *
 *   bun scripts/jepsen.ts [--duration-s 300] [--clients 3] [--topics 2] [--partitions 3] [--keys 3]
 *                         [--faults broker-kill,broker-pause,client-crash] [--fault-interval-s 5-12]
 *                         [--pause-s 2-8] [--seed N] [--keep] [--shared-writes]
 *                         [--brokers 3] [--session-timeout-ms 3000]
 *
 * --brokers N (N > 1): against a cluster of N brokers on one data directory with an etcd (broker-kill and
 * broker-pause then hit a random broker; make --pause-s longer than the lease to have a survivor take over).
 *
 * --shared-writes: every client writes every partition (see docs/checker.md: G0/G1c cycles are then expected
 * from Kafka's design, the other anomaly kinds are not).
 *
 * The history is written to <work dir>/history.jsonl; the work dir (data directory, broker log, history) is
 * removed at the end unless --keep is given or an anomaly was found. Exits 1 when the checker found one.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { privateBinaryCopy } from "../tests/support/binary.ts";
import { ANOMALY_KINDS, formatAnomalies } from "../tests/support/jepsen/checker.ts";
import { type FaultKind, runJepsen } from "../tests/support/jepsen/harness.ts";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
function range(name: string, fallback: string): { min: number; max: number } {
  const [min, max] = flag(name, fallback).split("-").map((s) => Number(s) * 1000);
  return { min: min!, max: max ?? min! };
}

const durationS = Number(flag("duration-s", "300"));
const clients = Number(flag("clients", "3"));
const topicCount = Number(flag("topics", "2"));
const partitions = Number(flag("partitions", "3"));
const keysPerPartition = Number(flag("keys", "3"));
const faults = flag("faults", "broker-kill,broker-pause,client-crash")
  .split(",")
  .filter((f) => f !== "" && f !== "none") as FaultKind[];
const faultIntervalMs = range("fault-interval-s", "5-12");
const pauseMs = range("pause-s", "2-8");
const seed = Number(flag("seed", String((Math.random() * 2 ** 31) >>> 0)));
const keep = process.argv.includes("--keep");
const sharedWrites = process.argv.includes("--shared-writes");
const brokers = Number(flag("brokers", "1"));
const sessionTimeoutMs = Number(flag("session-timeout-ms", "3000"));

const workDir = mkdtempSync(join(tmpdir(), "bunka-jepsen-"));
const binary = await privateBinaryCopy(workDir);
const topics = Array.from({ length: topicCount }, (_, i) => `jepsen-${i}`);
const started = new Date();
console.log(
  `jepsen: ${durationS} s, ${clients} clients, ${topicCount} topics x ${partitions} partitions, ${keysPerPartition} keys per partition, faults ${faults.join(",") || "none"} every ${faultIntervalMs.min / 1000}-${faultIntervalMs.max / 1000} s (pauses ${pauseMs.min / 1000}-${pauseMs.max / 1000} s), seed ${seed}${sharedWrites ? ", shared writes" : ""}${brokers > 1 ? `, ${brokers} brokers (lease ${sessionTimeoutMs} ms)` : ""}`,
);
const run = await runJepsen({
  binary,
  workDir,
  durationMs: durationS * 1000,
  clients,
  topics,
  partitions,
  keysPerPartition,
  seed,
  faults,
  faultIntervalMs,
  pauseMs,
  sharedWrites,
  brokers,
  sessionTimeoutMs,
  log: (line) => console.log(`  ${line}`),
});
const s = run.result.stats;
const figures = [
  `date: ${started.toISOString()}`,
  `wall time: ${(run.wallMs / 1000).toFixed(1)} s`,
  `transactions: ${s.txns} (ok ${s.ok}, fail ${s.fail}, info ${s.info}, of which ${s.infoCommitted} committed)`,
  `records: ${s.sendsAcked} sends acknowledged (${s.sendsAborted} of them in aborted transactions), ${s.recordsPolled} polled, ${s.finalRecords} in the final read`,
  `committed offsets compared: ${s.offsetChecks} (process starts and read-backs after planned aborts)`,
  `dependencies: ${s.wwEdges} ww edges, ${s.wrEdges} wr edges`,
  `faults: ${Object.entries(run.faults)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ")} (client crashes inside a transaction: ${run.clientCrashesMidTxn}; broker restarts took ${run.brokerRestartMs.map((ms) => `${ms} ms`).join(", ") || "-"}${brokers > 1 ? `; brokers hit: ${run.brokerVictims.join(",") || "-"}` : ""})`,
  `final read: waited ${run.finalSettled?.waitedMs ?? "-"} ms for markers on their way (open at first: ${run.finalSettled?.openAtFirst.map((o) => `${o.topic}/${o.partition} ${o.stable}<${o.high}`).join(", ") || "none"})`,
  `anomalies: ${ANOMALY_KINDS.map((k) => `${k} ${run.result.counts[k]}`).join(", ")}`,
];
console.log(figures.join("\n"));
if (!run.result.valid) {
  console.log(formatAnomalies(run.result));
  console.log(`history kept: ${run.historyFile}`);
  process.exit(1);
}
if (keep) console.log(`kept: ${workDir}`);
else rmSync(workDir, { recursive: true, force: true });
