/**
 * The three-node reference cluster works (startApacheKafkaCluster, used by scripts/bench-cluster.ts): every
 * node serves Metadata listing all three brokers, a topic's partitions are led by all three, a record
 * produced through one node is read back through another, and stop() ends every JVM and removes the data.
 * Nothing here runs against bunka ("[reference]", counted apart by scripts/test). Opt-in, since three JVMs
 * cost the suite more than they check of bunka: `BENCH_CLUSTER_REFERENCE=1 bun test <this file>` before
 * trusting a change to startApacheKafkaCluster.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { type ApacheKafkaCluster, probeBrokerCount, runKafkaTool, type ToolResult, startApacheKafkaCluster } from "../support/apache-kafka.ts";

const TIMEOUT = 180_000;

const WANTED = process.env.BENCH_CLUSTER_REFERENCE === "1";
let cluster: ApacheKafkaCluster;

beforeAll(async () => {
  if (WANTED) cluster = await startApacheKafkaCluster({ nodes: 3 });
}, TIMEOUT);

afterAll(async () => {
  await cluster?.stop();
});

function ok(r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`tool exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}

describe.skipIf(!WANTED)("[reference] Apache Kafka, three nodes", () => {
  const topic = "cluster-reference";

  test("every node lists the three brokers", async () => {
    expect(cluster.nodes.map((n) => n.nodeId)).toEqual([1, 2, 3]);
    expect(new Set(cluster.nodes.map((n) => n.port)).size).toBe(3);
    for (const node of cluster.nodes) expect(await probeBrokerCount("127.0.0.1", node.port)).toBe(3);
    expect(cluster.bootstrap.split(",")).toEqual(cluster.nodes.map((n) => `127.0.0.1:${n.port}`));
  }, TIMEOUT);

  test("a topic's partitions are spread over the three nodes, and a record crosses nodes", async () => {
    const [first, second] = cluster.nodes.map((n) => `127.0.0.1:${n.port}`);
    ok(await runKafkaTool("kafka-topics", ["--bootstrap-server", first!, "--create", "--topic", topic, "--partitions", "6", "--replication-factor", "1"]));
    const described = ok(await runKafkaTool("kafka-topics", ["--bootstrap-server", second!, "--describe", "--topic", topic]));
    const leaders = [...described.stdout.matchAll(/Partition: \d+\tLeader: (\d+)\tReplicas: (\d+)\t/g)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(leaders).toHaveLength(6);
    for (const [leader, replica] of leaders) expect(leader).toBe(replica!);
    expect(new Set(leaders.map(([l]) => l))).toEqual(new Set([1, 2, 3]));

    ok(await runKafkaTool("kafka-console-producer", ["--bootstrap-server", first!, "--topic", topic], { stdin: "across-nodes\n" }));
    const consumed = ok(
      await runKafkaTool("kafka-console-consumer", ["--bootstrap-server", second!, "--topic", topic, "--from-beginning", "--max-messages", "1", "--timeout-ms", "60000"]),
    );
    expect(consumed.stdout.trim()).toBe("across-nodes");
  }, TIMEOUT);

  test("stop() ends every node and removes the data dir", async () => {
    const pids = cluster.nodes.map((n) => n.pid);
    await cluster.stop();
    for (const pid of pids) expect(existsSync(`/proc/${pid}`)).toBe(false);
    expect(existsSync(cluster.dataDir)).toBe(false);
  }, TIMEOUT);
});
