/**
 * A short Jepsen-style run (docs/checker.md): three workload clients (Apache Kafka's Java client,
 * tests/interop/java/JepsenWorkload.java: a transactional producer and a read_committed consumer each, issuing
 * transactions of sends and polls that carry the consumer's offsets) on 2 topics x 3 partitions for about a
 * minute, while the harness (tests/support/jepsen/harness.ts) SIGKILLs and restarts the compiled broker on the
 * same data directory and port, SIGSTOPs and SIGCONTs it, and SIGKILLs a client inside a transaction (a new
 * process on the same transactional id takes over). Then every partition is read to its end under
 * read_committed and the checker (tests/support/jepsen/checker.ts) runs over the history: no anomaly of any
 * kind. The run must also have done work, so that it cannot pass vacuously: hundreds of committed
 * transactions, records read by polls and at the end, write-read dependencies between clients, aborted
 * transactions with records, every fault kind injected, a client killed inside a transaction.
 *
 *   bun test --timeout 300000 tests/fault/jepsen.test.ts
 *   JEPSEN_SEED=1234 ... (default a fixed seed; "random" picks one), FAULT_KEEP_DATA=1 keeps the history
 *
 * An anomaly keeps the history file (its path is in the failure message).
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../support/apache-kafka.ts";
import { CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir } from "../support/fault-support.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { formatAnomalies } from "../support/jepsen/checker.ts";
import { runJepsen } from "../support/jepsen/harness.ts";
import { killLiveChildren } from "../support/line-child.ts";

const SEED = envSeed("JEPSEN_SEED", 0x7e95_e001);
const DURATION_MS = 60_000;

const fault = faultTestDir("bunka-jepsen-", { cleanup: killLiveChildren });

test.skipIf(!CAN_RUN_BINARY)(
  "transactions of sends and polls under broker kills, pauses and client crashes: no anomaly",
  async () => {
    const workDir = join(fault.tmpRoot, "run");
    const logFile = join(workDir, "bunka.stderr.log");
    const run = await withBrokerLog(logFile, () =>
      runJepsen({
        binary: fault.binary,
        workDir,
        durationMs: DURATION_MS,
        clients: 3,
        topics: ["jepsen-a", "jepsen-b"],
        partitions: 3,
        keysPerPartition: 3,
        seed: SEED,
        faults: ["broker-kill", "broker-pause", "client-crash"],
        faultIntervalMs: { min: 6_000, max: 10_000 },
        // Up to longer than the clients' timeouts (3 s per request, 5 s blocking), so that some transactions fail.
        pauseMs: { min: 5_000, max: 9_000 },
      }),
    );
    const s = run.result.stats;
    const summary = `seed ${SEED}: ${JSON.stringify(s)}; faults ${JSON.stringify(run.faults)}; final read settled ${JSON.stringify(run.finalSettled)}`;
    if (!run.result.valid) {
      // Kept in the repository's cache directory (ignored by git), since the temp dir goes.
      const kept = join(REPO_ROOT, ".cache", "jepsen", `history-${SEED}-${Date.now()}.jsonl`);
      mkdirSync(join(REPO_ROOT, ".cache", "jepsen"), { recursive: true });
      copyFileSync(run.historyFile, kept);
      throw new Error(`anomalies (${summary}), history kept at ${kept}:\n${formatAnomalies(run.result)}`);
    }
    expect(run.result.anomalies).toEqual([]);

    // It did work.
    expect(s.ok, summary).toBeGreaterThanOrEqual(200);
    expect(s.sendsAcked, summary).toBeGreaterThanOrEqual(200);
    expect(s.recordsPolled, summary).toBeGreaterThanOrEqual(200);
    expect(s.finalRecords, summary).toBeGreaterThanOrEqual(200);
    expect(s.wrEdges, summary).toBeGreaterThan(0);
    // Aborted records to not read (the clients abort one transaction in ten on purpose).
    expect(s.fail, summary).toBeGreaterThanOrEqual(20);
    expect(s.sendsAborted, summary).toBeGreaterThanOrEqual(20);
    // The group's committed offsets compared with the transactions' (read back after planned aborts).
    expect(s.offsetChecks, summary).toBeGreaterThanOrEqual(20);
    expect(s.wwEdges, summary).toBeGreaterThan(0);
    // Every fault kind happened, the client crash inside a transaction (its unfinished transaction is info).
    expect(run.faults["broker-kill"], summary).toBeGreaterThanOrEqual(1);
    expect(run.faults["broker-pause"], summary).toBeGreaterThanOrEqual(1);
    expect(run.faults["client-crash"], summary).toBeGreaterThanOrEqual(1);
    expect(run.clientCrashesMidTxn, summary).toBeGreaterThanOrEqual(1);
    expect(s.info, summary).toBeGreaterThanOrEqual(1);
    expect(s.faults["broker-restart"], summary).toBe(run.faults["broker-kill"]);
    expect(s.faults["broker-resume"], summary).toBe(run.faults["broker-pause"]);
    console.log(`jepsen: ${summary}, ${(run.wallMs / 1000).toFixed(1)} s`);
  },
  300_000,
);
