/**
 * Real clients against a real three-broker bunka cluster (tests/support/bunka-cluster.ts: one etcd, three
 * compiled brokers on one data directory):
 * - Apache's kafka-topics creates a topic through a broker that is not the controller; every broker lists
 *   it and describes it with six partitions, each led by a live broker, and all three name the same leaders;
 * - librdkafka's idempotent producer (acks=all) bootstrapped from one broker writes a numbered sequence, and
 *   a librdkafka consumer group bootstrapped from another reads everything back exactly once; the group's
 *   committed offsets are the partitions' ends, which kafka-consumer-groups --describe shows too (lag 0);
 * - Apache's transactional producer (tests/interop/java/TxnProducer.java) whose transaction coordinator is
 *   on another broker than a partition leader it writes commits and aborts transactions; read_committed (the
 *   Java consumer) sees exactly the committed ones, in order; kafka-transactions list and describe show the
 *   transactional id on its coordinator.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { PY_CONSUMER_GROUP, compileJavaPrograms, ok, readIdempotentReport, runJava, startIdempotentProducer } from "../support/cluster-clients.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { killLiveChildren, LineChild } from "../support/line-child.ts";

const TIMEOUT = 180_000;
let cluster: BunkaCluster;

beforeAll(async () => {
  await Promise.all([compileJavaPrograms(["TxnProducer", "ReadCommittedCheck"]), ensureInteropClients()]);
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

/** A tool's tab-separated table. */
function table(stdout: string): { header: string[]; rows: string[][] } {
  const [header, ...rows] = stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => l.replace(/\t$/, "").split("\t").map((c) => c.trim()));
  return { header: header ?? [], rows };
}

const tool = (name: Parameters<typeof runKafkaTool>[0], args: string[]) => runKafkaTool(name, args).then((r) => ok(r, `${name} ${args.join(" ")}`));

describe("three brokers, real clients", () => {
  test("kafka-topics: created through a broker that is not the controller, listed and described alike by every broker", async () => {
    await cluster.withLogs(async () => {
      await tool("kafka-topics", ["--bootstrap-server", cluster.bootstrapOf(2), "--create", "--topic", "c-orders", "--partitions", "6", "--replication-factor", "1"]);
      const { leaders, shares } = await cluster.waitForBalanced(["c-orders"]);
      expect(leaders.size).toBe(6);
      // An even share: two partitions each.
      expect([...shares.values()]).toEqual([2, 2, 2]);
      for (const id of cluster.ids) {
        const listed = await tool("kafka-topics", ["--bootstrap-server", cluster.bootstrapOf(id), "--list"]);
        expect(listed.stdout.split("\n")).toContain("c-orders");
        const described = await tool("kafka-topics", ["--bootstrap-server", cluster.bootstrapOf(id), "--describe", "--topic", "c-orders"]);
        expect(described.stdout).toContain("PartitionCount: 6");
        for (let p = 0; p < 6; p++) {
          const leader = leaders.get(`c-orders-${p}`)!;
          expect(described.stdout).toMatch(new RegExp(`Partition: ${p}\\s+Leader: ${leader}\\s`));
        }
      }
    });
  }, TIMEOUT);

  test("librdkafka: an idempotent producer from one broker's bootstrap, a consumer group from another's, everything exactly once; kafka-consumer-groups shows lag 0", async () => {
    await cluster.withLogs(async () => {
      const count = 3000;
      const out = join(cluster.dir, "rdk-producer.json");
      const producer = startIdempotentProducer(cluster.bootstrapOf(1), "c-orders", count, 3000, out);
      expect(await producer.exitWithin(120_000), producer.output()).toBe(0);
      const report = readIdempotentReport(out);
      expect(report.delivered).toBe(count);
      expect(report.fatal).toBeNull();
      const perPartition = new Map<number, number>();
      for (const [, partition] of report.reports) perPartition.set(partition, (perPartition.get(partition) ?? 0) + 1);
      // Written to every partition, so to every broker.
      expect(perPartition.size).toBe(6);

      const group = new LineChild("consumer_group.py", [VENV_PYTHON, PY_CONSUMER_GROUP, cluster.bootstrapOf(3), "c-orders", "c-group", String(count)]);
      expect(await group.exitWithin(150_000), group.output()).toBe(0);
      const result = JSON.parse(group.stdout.trim().split("\n").at(-1)!) as { keys_committed: number; duplicates: string[]; committed_offsets: Record<string, number>; listed: string[] };
      expect(result.keys_committed).toBe(count);
      expect(result.duplicates).toEqual([]);
      expect(result.listed).toContain("c-group");
      // Each partition's end: the producer's records are the only ones there.
      const ends = Object.fromEntries([...perPartition].map(([p, n]) => [String(p), n]));
      expect(result.committed_offsets).toEqual(ends);

      const described = await tool("kafka-consumer-groups", ["--bootstrap-server", cluster.bootstrapOf(2), "--describe", "--group", "c-group"]);
      const rows = described.stdout.split("\n").filter((l) => /^c-group\s+c-orders\s/.test(l));
      expect(rows).toHaveLength(6);
      for (const row of rows) {
        const [, , partition, current, end, lag] = row.trim().split(/\s+/);
        expect(Number(current)).toBe(perPartition.get(Number(partition))!);
        expect(Number(end)).toBe(perPartition.get(Number(partition))!);
        expect(lag).toBe("0");
      }
    });
  }, TIMEOUT);

  test("a Java transactional producer whose coordinator is not a partition's leader: read_committed sees exactly the committed transactions; kafka-transactions lists and describes it", async () => {
    await cluster.withLogs(async () => {
      await cluster.createTopic("c-txn", 2, { through: 3 });
      const { leaders } = await cluster.waitForBalanced(["c-txn"]);
      const partitionLeaders = [leaders.get("c-txn-0")!, leaders.get("c-txn-1")!];
      // A transactional id whose coordinator is elsewhere than at least one of the two leaders.
      let transactionalId = "";
      let coordinator = -1;
      for (let i = 0; i < 50 && transactionalId === ""; i++) {
        const res = await cluster.withClient(1, (c) => c.request(10, 4, { keyType: 1, coordinatorKeys: [`c-txn-id-${i}`] }));
        const node = res.coordinators[0].nodeId as number;
        if (res.coordinators[0].errorCode === 0 && partitionLeaders.some((l) => l !== node)) [transactionalId, coordinator] = [`c-txn-id-${i}`, node];
      }
      expect(transactionalId).not.toBe("");

      // 6 transactions of 4 records over the 2 partitions; transactions 2 and 5 abort.
      const run = ok(await runJava("TxnProducer", ["batches", cluster.bootstrapOf(1), "c-txn", transactionalId, "t", "2", "6", "4", "3"]), "TxnProducer");
      expect(run.stdout.match(/^COMMITTED \d+$/gm)).toEqual(["COMMITTED 0", "COMMITTED 1", "COMMITTED 3", "COMMITTED 4"]);
      expect(run.stdout.match(/^ABORTED \d+$/gm)).toEqual(["ABORTED 2", "ABORTED 5"]);

      // In the raw log each transaction's records are followed by its marker before the next transaction's
      // records: a marker written late would end the next transaction too (Kafka's coordinator refuses the next
      // transaction's AddPartitionsToTxn with CONCURRENT_TRANSACTIONS until the markers are written).
      for (const p of [0, 1]) {
        const batches = (await cluster.readPartition("c-txn", p)).batches;
        const layout = batches.map((b) => (b.header.isControl ? "marker" : `t${new TextDecoder().decode(b.records[0]!.key!).split("-")[1]}`));
        expect(layout, `c-txn-${p}`).toEqual([0, 1, 2, 3, 4, 5].flatMap((t) => [`t${t}`, "marker"]));
      }

      const read = ok(await runJava("ReadCommittedCheck", [cluster.bootstrapOf(2), "c-txn", "read_committed", "60000", "16"]), "ReadCommittedCheck");
      const got = new Map<number, string[]>([[0, []], [1, []]]);
      for (const line of read.stdout.split("\n")) {
        const f = line.split(" ");
        if (f[0] === "R") got.get(Number(f[1]))!.push(f[3]!);
      }
      const expected = (partition: number) => [0, 1, 3, 4].flatMap((t) => [0, 1, 2, 3].filter((i) => i % 2 === partition).map((i) => `t-${t}-${i}`));
      expect(got.get(0)).toEqual(expected(0));
      expect(got.get(1)).toEqual(expected(1));

      // The coordinator's view, asked through another broker's bootstrap.
      const other = cluster.ids.find((id) => id !== coordinator)!;
      const list = await tool("kafka-transactions", ["--bootstrap-server", cluster.bootstrapOf(other), "list"]);
      const listed = table(list.stdout);
      const row = listed.rows.find((r) => r[listed.header.indexOf("TransactionalId")] === transactionalId);
      expect(row, list.stdout).toBeDefined();
      expect(row![listed.header.indexOf("Coordinator")]).toBe(String(coordinator));
      const describeOut = await tool("kafka-transactions", ["--bootstrap-server", cluster.bootstrapOf(other), "describe", "--transactional-id", transactionalId]);
      const described = table(describeOut.stdout);
      expect(described.rows).toHaveLength(1);
      const field = (name: string) => described.rows[0]![described.header.indexOf(name)];
      expect(field("CoordinatorId")).toBe(String(coordinator));
      expect(field("TransactionalId")).toBe(transactionalId);
      expect(field("TransactionState")).toBe("CompleteAbort");
    });
  }, TIMEOUT);
});
