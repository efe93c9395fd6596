/**
 * A transaction spread over three brokers, its coordinator SIGKILLed at each step of EndTxn in turn.
 *
 * Three compiled brokers on one data directory and one etcd (tests/support/bunka-cluster.ts). For each step
 * of EndTxn (`prepare`: the decision durable, before the answer; `offsets`: the staged offsets handed to the
 * group's coordinator; `markers`: every marker applied by its leader; `complete`: Complete* durable):
 *
 *   1. the broker that will coordinate the transaction is restarted with BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=<step>
 *      (src/main.ts: it SIGKILLs itself once its first EndTxn is past that step);
 *   2. a transactional id whose coordinator is that broker, a group whose coordinator is a second broker,
 *      and a topic's partitions led by the third are picked, so that the transaction's coordinator, partition
 *      leaders and group coordinator are three different brokers;
 *   3. Apache's Java producer (tests/interop/java/TxnProducer.java, mode decide) writes 6 records over those
 *      partitions, sends the group's offsets 100 + p for each partition p (sendOffsetsToTransaction), and
 *      commits (or aborts); the coordinator dies at the step; the client retries through the broker that
 *      takes its slot over, and commitTransaction (abortTransaction) returns;
 *   4. with the killed broker back: DescribeTransactions says CompleteCommit (CompleteAbort) at the
 *      producer's id and epoch; each partition holds its records exactly once and only markers of the
 *      decision (a marker written again by the successor is harmless, as in Apache Kafka: the second one
 *      ends no transaction); the Java read_committed consumer sees the records once after a commit and none
 *      after an abort; the group's offsets are 100 + p (stable) after a commit and absent after an abort.
 *
 *   bun test --timeout 600000 tests/cluster/endtxn-step-kills.test.ts
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ENDTXN_PHASES, type EndTxnPhase } from "../../src/broker/txn-coordinator.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { compileJavaPrograms, ok, runJava } from "../support/cluster-clients.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { utf8 } from "../support/record-decoder.ts";
import { isAbortMarker, isCommitMarker } from "../support/txn-requests.ts";
import { until } from "../support/wait.ts";

const PARTITIONS = 6;
const RECORDS = 6;
const OFFSET_BASE = 100;
const TIMEOUT = 240_000;
let cluster: BunkaCluster;

beforeAll(async () => {
  await compileJavaPrograms(["TxnProducer", "ReadCommittedCheck"]);
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
}, 180_000);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

const RUNS: { step: EndTxnPhase; end: "commit" | "abort" }[] = [
  ...ENDTXN_PHASES.map((step) => ({ step, end: "commit" as const })),
  { step: "prepare", end: "abort" },
  { step: "markers", end: "abort" },
];

test.each(RUNS.map((r, i) => [r.step, r.end, i] as const))(
  "the coordinator SIGKILLed after the %s step of an EndTxn(%s) whose partition leaders and group coordinator are two other brokers: the decision holds, exactly once",
  async (step, end, index) => {
    await cluster.withLogs(async () => {
      const ids = cluster.ids;
      const coordinator = ids[index % ids.length]!;
      const topic = `steps-${step}-${end}`;

      await cluster.kill(coordinator, "SIGTERM");
      await cluster.restart(coordinator, { env: { BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP: step } });
      await cluster.createTopic(topic, PARTITIONS);
      const { leaders } = await cluster.waitForBalanced([topic]);
      // Ownership is balanced over every partition of the cluster, not topic by topic: the partitions'
      // leader is a broker other than the coordinator that leads some of this topic, the group's
      // coordinator the third broker.
      const leader = ids.find((id) => id !== coordinator && [...leaders.values()].includes(id));
      expect(leader, `a broker other than the coordinator ${coordinator} leading a partition of ${topic}`).toBeDefined();
      const groupCoordinator = ids.find((id) => id !== coordinator && id !== leader)!;
      const partitions = [...leaders].filter(([, l]) => l === leader).map(([tp]) => Number(tp.slice(topic.length + 1)));
      const transactionalId = await cluster.keyCoordinatedBy(coordinator, 1, `${topic}-txn`);
      const group = await cluster.keyCoordinatedBy(groupCoordinator!, 0, `${topic}-group`);

      const died = cluster.process(coordinator)!.exited;
      const producer = runJava(
        "TxnProducer",
        ["decide", cluster.bootstrap, topic, transactionalId, step, `${partitions.join(",")},`, String(RECORDS), end, group, String(OFFSET_BASE), "reconnect.backoff.max.ms=500"],
        TIMEOUT,
      );
      // 128 + 9: the hook's SIGKILL, at the step.
      expect(await died).toBe(137);
      const run = ok(await producer, "TxnProducer");
      expect(run.stdout).toMatch(end === "commit" ? /^COMMITTED 0 \d+$/m : /^ABORTED 0 \d+$/m);
      expect(cluster.logTails(200)).toContain(`BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=${step}`);

      await cluster.restart(coordinator);
      await cluster.waitForBalanced([topic]);

      const described = await until(`${transactionalId} complete`, 30_000, async () => {
        const owner = await cluster.withClient(cluster.liveIds()[0]!, (c) => c.request(10, 4, { keyType: 1, coordinatorKeys: [transactionalId] }));
        // No coordinator yet (the slot is being taken over): ask again.
        if (owner.coordinators[0].errorCode !== ErrorCode.NONE || !cluster.liveIds().includes(owner.coordinators[0].nodeId)) return undefined;
        const res = await cluster.withClient(owner.coordinators[0].nodeId, (c) => c.request(65, 0, { transactionalIds: [transactionalId] }));
        const state = res.transactionStates[0];
        return state.errorCode === ErrorCode.NONE && state.transactionState.startsWith("Complete") ? state : undefined;
      });
      expect(described.transactionState).toBe(end === "commit" ? "CompleteCommit" : "CompleteAbort");

      const expectedKeys = (p: number) =>
        Array.from({ length: RECORDS }, (_, i) => i)
          .filter((i) => partitions[i % partitions.length] === p)
          .map((i) => `${step}-0-${i}`);
      for (let p = 0; p < PARTITIONS; p++) {
        const { batches } = await cluster.readPartition(topic, p);
        const data = batches.filter((b) => !b.header.isControl).flatMap((b) => b.records.map((r) => utf8(r.key)));
        const markers = batches.filter((b) => b.header.isControl);
        expect(data, `${topic}-${p} records`).toEqual(partitions.includes(p) ? expectedKeys(p) : []);
        if (!partitions.includes(p)) {
          expect(markers, `${topic}-${p} markers`).toEqual([]);
          continue;
        }
        expect(markers.length, `${topic}-${p} markers`).toBeGreaterThanOrEqual(1);
        for (const m of markers) {
          expect(end === "commit" ? isCommitMarker(m) : isAbortMarker(m), `${topic}-${p} marker kind`).toBe(true);
          expect(BigInt(m.header.producerId)).toBe(BigInt(described.producerId));
        }
      }

      const read = ok(await runJava("ReadCommittedCheck", [cluster.bootstrap, topic, "read_committed", "60000", String(end === "commit" ? RECORDS : 0)]), "ReadCommittedCheck");
      const seen = read.stdout.split("\n").filter((l) => l.startsWith("R ")).map((l) => l.split(" ")[3]);
      expect(seen.sort()).toEqual(end === "commit" ? partitions.flatMap(expectedKeys).sort() : []);

      const offsets = await until(`${group}'s stable offsets`, 30_000, () => cluster.committedOffsets(group, topic, PARTITIONS).then((o) => o ?? undefined));
      expect(offsets).toEqual(Array.from({ length: PARTITIONS }, (_, p) => (end === "commit" && partitions.includes(p) ? OFFSET_BASE + p : -1)));
    });
  },
  TIMEOUT,
);
