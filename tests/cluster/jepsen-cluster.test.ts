/**
 * The Jepsen-style run (docs/checker.md, tests/support/jepsen/harness.ts) against a three-broker cluster:
 * three workload clients (Apache's Java client, tests/interop/java/JepsenWorkload.java: transactions of
 * sends and polls that carry the consumer's offsets) bootstrapped from all three brokers, on 2 topics x 3
 * partitions for about a minute, while the harness SIGKILLs a random broker and starts it again, freezes a
 * random broker for longer than its lease (3 s) so that a survivor takes its partitions and coordinator slots
 * over while it is stopped, and SIGKILLs a client inside a transaction. Then every partition is read to its
 * end under read_committed and the checker runs over the history: no anomaly of any kind. The run must have
 * done work, so that it cannot pass vacuously (as tests/fault/jepsen.test.ts).
 *
 *   bun test --timeout 400000 tests/cluster/jepsen-cluster.test.ts
 *   JEPSEN_SEED=1234 ... (default a fixed seed; "random" picks one)
 *   bun scripts/jepsen.ts --brokers 3 --duration-s 300 --pause-s 4-8     (the long run)
 *
 * An anomaly keeps the history file (its path is in the failure message).
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../support/apache-kafka.ts";
import { CAN_RUN_BINARY } from "../support/binary.ts";
import { faultTestDir } from "../support/fault-support.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { formatAnomalies } from "../support/jepsen/checker.ts";
import { runJepsen } from "../support/jepsen/harness.ts";
import { killLiveChildren } from "../support/line-child.ts";

const SEED = envSeed("JEPSEN_SEED", 0x7e95_c103);
const DURATION_MS = 60_000;
const SESSION_TIMEOUT_MS = 3000;

const fault = faultTestDir("bunka-jepsen-cluster-", { cleanup: killLiveChildren });

test.skipIf(!CAN_RUN_BINARY)(
  "three brokers: transactions of sends and polls under broker kills, pauses past the lease and client crashes: no anomaly",
  async () => {
    const run = await runJepsen({
      binary: fault.binary,
      workDir: join(fault.tmpRoot, "run"),
      durationMs: DURATION_MS,
      clients: 3,
      topics: ["jepsen-a", "jepsen-b"],
      partitions: 3,
      keysPerPartition: 3,
      seed: SEED,
      faults: ["broker-kill", "broker-pause", "client-crash"],
      faultIntervalMs: { min: 6_000, max: 10_000 },
      // Past the 3 s lease (and its 1 s safety margin), so that a survivor takes over during the pause.
      pauseMs: { min: 4_500, max: 8_000 },
      brokers: 3,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
    });
    const s = run.result.stats;
    const summary = `seed ${SEED}: ${JSON.stringify(s)}; faults ${JSON.stringify(run.faults)}; brokers hit ${run.brokerVictims.join(",")}; restarts ${run.brokerRestartMs.join(",")} ms; final read settled ${JSON.stringify(run.finalSettled)}`;
    if (!run.result.valid) {
      const kept = join(REPO_ROOT, ".cache", "jepsen", `history-cluster-${SEED}-${Date.now()}.jsonl`);
      mkdirSync(join(REPO_ROOT, ".cache", "jepsen"), { recursive: true });
      copyFileSync(run.historyFile, kept);
      throw new Error(`anomalies (${summary}), history kept at ${kept}:\n${formatAnomalies(run.result)}`);
    }
    expect(run.result.anomalies).toEqual([]);

    // It did work (lower bars than the single broker's: each kill stops a partition for a lease's time).
    expect(s.ok, summary).toBeGreaterThanOrEqual(100);
    expect(s.sendsAcked, summary).toBeGreaterThanOrEqual(100);
    expect(s.recordsPolled, summary).toBeGreaterThanOrEqual(100);
    expect(s.finalRecords, summary).toBeGreaterThanOrEqual(100);
    expect(s.wrEdges, summary).toBeGreaterThan(0);
    expect(s.wwEdges, summary).toBeGreaterThan(0);
    expect(s.fail, summary).toBeGreaterThanOrEqual(5);
    expect(s.sendsAborted, summary).toBeGreaterThanOrEqual(5);
    expect(s.offsetChecks, summary).toBeGreaterThanOrEqual(5);
    expect(run.faults["broker-kill"], summary).toBeGreaterThanOrEqual(1);
    expect(run.faults["broker-pause"], summary).toBeGreaterThanOrEqual(1);
    expect(run.faults["client-crash"], summary).toBeGreaterThanOrEqual(1);
    expect(run.clientCrashesMidTxn, summary).toBeGreaterThanOrEqual(1);
    expect(s.faults["broker-restart"], summary).toBe(run.faults["broker-kill"]);
    expect(s.faults["broker-resume"], summary).toBe(run.faults["broker-pause"]);
    console.log(`jepsen (3 brokers): ${summary}, ${(run.wallMs / 1000).toFixed(1)} s`);
  },
  400_000,
);
