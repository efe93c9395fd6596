/**
 * Cluster mode in the compiled binary against a real etcd (tests/support/etcd.ts): `bunka serve --etcd`
 * registers and shows in /v1/cluster, Metadata and DescribeCluster (raw frames and Apache's
 * kafka-broker-api-versions); a second broker on the same data directory joins and takes its share of the
 * partitions; an unreachable etcd and a duplicate broker id are one line and exit 2; SIGTERM hands over and
 * revokes the lease, so the other broker leads at once rather than after the TTL; etcd stopped under a
 * running broker makes /ready fail and counts a lapse, etcd back makes it ready again.
 *
 * Lease TTLs are short (broker.session.timeout.ms=2000) except where a test must tell a prompt drop from
 * an expiry (30 s).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listBrokers } from "../../src/cluster/broker-registry.ts";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import type { ClusterView } from "../../src/http/ports.ts";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { BunkaProcess, cleanEnv, ensureBunkaBinary, killAllBunkaProcesses, removeTempDir, withBrokerLog } from "../support/binary.ts";
import { EtcdServer, freePort } from "../support/etcd.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
let binary: string;
let dir: string;
let dataDir: string;
let etcd: EtcdServer;
let etcdClient: EtcdClient;
let one: BunkaProcess;
let two: BunkaProcess | undefined;

/** A config file with the lease TTL, since broker.session.timeout.ms is a config-file key. */
function configFile(name: string, sessionTimeoutMs: number): string {
  const path = join(dir, `${name}.properties`);
  writeFileSync(path, `broker.session.timeout.ms=${sessionTimeoutMs}\n`);
  return path;
}

function startBroker(brokerId: number, sessionTimeoutMs: number): Promise<BunkaProcess> {
  return BunkaProcess.start({
    binary,
    dataDir,
    logFile: join(dir, `broker-${brokerId}.log`),
    args: ["--broker-id", String(brokerId), "--etcd", etcd.endpoint, "--config", configFile(`broker-${brokerId}`, sessionTimeoutMs)],
  });
}

/** Runs `bunka serve ARGS` to its exit (it is expected to refuse to start); stdout, stderr and the code. */
async function serveUntilExit(args: string[], timeoutMs = 30_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([binary, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: cleanEnv() });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

async function clusterView(broker: BunkaProcess): Promise<ClusterView> {
  const response = await fetch(`${broker.http}/v1/cluster`);
  expect(response.status).toBe(200);
  return (await response.json()) as ClusterView;
}

async function metric(broker: BunkaProcess, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${broker.http}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

const memberIds = (view: ClusterView) => view.members.map((m) => m.brokerId);

beforeAll(async () => {
  binary = await ensureBunkaBinary();
  dir = mkdtempSync(join(tmpdir(), "bunka-cluster-e2e-"));
  dataDir = join(dir, "shared-data");
  etcd = await EtcdServer.start();
  etcdClient = new EtcdClient({ endpoints: etcd.endpoint });
}, TIMEOUT);

afterAll(async () => {
  await killAllBunkaProcesses();
  etcdClient?.close();
  await etcd?.close();
  removeTempDir(dir);
});

describe("cluster mode, compiled binary", () => {
  test("an unreachable etcd at start: one line naming the endpoint and why, exit 2, before the broker opens anything", async () => {
    const port = freePort();
    const own = join(dir, "unreachable-data");
    const result = await serveUntilExit(["--data-dir", own, "--etcd", `http://127.0.0.1:${port}`]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(
      `bunka: cannot reach etcd at http://127.0.0.1:${port} (connection refused): cluster mode needs etcd to start; is it running, and are these its client URLs? (--etcd, BUNKA_ETCD or etcd.endpoints)\n`,
    );
  }, TIMEOUT);

  test("a broker started with --etcd registers, and /v1/cluster, /ready and /metrics show it", async () => {
    one = await startBroker(1, 2000);
    await withBrokerLog(join(dir, "broker-1.log"), async () => {
      const view = await clusterView(one);
      const clusterId = (JSON.parse(readFileSync(join(dataDir, "__cluster", "cluster.json"), "utf8")) as { body: { clusterId: string } }).body.clusterId;
      expect(view).toMatchObject({ clusterId, brokerId: 1, controllerId: 1, mode: "cluster", etcd: { endpoints: [etcd.endpoint] } });
      expect(view.lease).toMatchObject({ ttlMs: 2000, state: "valid", lapses: 0, lastError: null });
      expect(view.lease!.id).toMatch(/^\d+$/);
      expect(view.lease!.validForMs).toBeGreaterThan(0);
      const httpPort = Number(new URL(one.http).port);
      expect(view.members).toEqual([{ brokerId: 1, kafka: { host: "127.0.0.1", port: one.port }, http: { host: "127.0.0.1", port: httpPort }, rack: null, self: true }]);
      // The registration in etcd, under the cluster id of the data directory and the broker's lease.
      const { brokers } = await listBrokers(etcdClient, clusterId);
      expect(brokers.map((b) => [b.brokerId, b.kafka.port, b.http?.port, String(b.leaseId)])).toEqual([[1, one.port, httpPort, view.lease!.id!]]);
      expect((await fetch(`${one.http}/ready`)).status).toBe(200);
      expect(await metric(one, "bunka_cluster_members")).toBe(1);
      expect(await metric(one, "bunka_cluster_lease_valid")).toBe(1);
      expect(await metric(one, "bunka_cluster_lease_lapses_total")).toBe(0);
    });
  }, TIMEOUT);

  test("a second broker on the same data directory joins and takes its share: both list both and name the same leaders", async () => {
    const client = await WireClient.connect(one.port);
    try {
      const created = await client.request(19, 7, { topics: [{ name: "solo", numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000 });
      expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
    } finally {
      client.close();
    }
    two = await startBroker(2, 30_000);
    const leadersFrom = async (broker: BunkaProcess): Promise<number[]> => {
      const c = await WireClient.connect(broker.port);
      try {
        const md = await c.request(3, 12, { topics: [{ name: "solo", topicId: "AAAAAAAAAAAAAAAAAAAAAA" }], allowAutoTopicCreation: false });
        expect(md.brokers.map((b: { nodeId: number }) => b.nodeId)).toEqual([1, 2]);
        expect(md.controllerId).toBe(1);
        return md.topics[0].partitions.map((p: { leaderId: number }) => p.leaderId);
      } finally {
        c.close();
      }
    };
    // One partition each once the assignment settled, and both brokers say the same.
    await until("the partitions split between the brokers", 20_000, async () => {
      const [a, b] = [await leadersFrom(one), await leadersFrom(two!)];
      return [...a].sort().join() === "1,2" && a.join() === b.join() ? true : undefined;
    });
    expect(memberIds(await clusterView(one))).toEqual([1, 2]);
    // Apache's own tool finds both brokers from Metadata and asks each for its API versions.
    const tool = await runKafkaTool("kafka-broker-api-versions", ["--bootstrap-server", one.bootstrap]);
    expect(tool.code).toBe(0);
    expect(tool.stdout).toContain(`127.0.0.1:${one.port} (id: 1 rack: null`);
    expect(tool.stdout).toContain(`127.0.0.1:${two.port} (id: 2 rack: null`);
  }, TIMEOUT);

  test("a third process with a broker id that is live: one line naming the holder, exit 2", async () => {
    const startedMs = Date.now();
    const result = await serveUntilExit(["--data-dir", dataDir, "--broker-id", "1", "--etcd", etcd.endpoint]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    const lease = (await clusterView(one)).lease!.id;
    expect(result.stderr).toMatch(
      new RegExp(`^bunka: broker id 1 is already registered in cluster \\S+ by another live process \\(lease ${lease}, Kafka listener 127\\.0\\.0\\.1:${one.port}\\); two brokers cannot share an id\\n$`),
    );
    // Within the holder's 2 s TTL and etcd's expiry slack.
    expect(Date.now() - startedMs).toBeLessThan(10_000);
    expect(memberIds(await clusterView(one))).toEqual([1, 2]);
  }, TIMEOUT);

  test("SIGTERM hands over and revokes the lease: the other broker leads everything at once, not after the 30 s TTL", async () => {
    const signalledMs = Date.now();
    two!.proc.kill("SIGTERM");
    expect(await two!.exited).toBe(0);
    two = undefined;
    const clusterId = (JSON.parse(readFileSync(join(dataDir, "__cluster", "cluster.json"), "utf8")) as { body: { clusterId: string } }).body.clusterId;
    expect((await listBrokers(etcdClient, clusterId)).brokers.map((b) => b.brokerId)).toEqual([1]);
    const client = await WireClient.connect(one.port);
    try {
      await until("broker 1 leads both partitions", 20_000, async () => {
        const md = await client.request(3, 12, { topics: [{ name: "solo", topicId: "AAAAAAAAAAAAAAAAAAAAAA" }], allowAutoTopicCreation: false });
        return md.topics[0].partitions.every((p: { leaderId: number }) => p.leaderId === 1) ? true : undefined;
      });
    } finally {
      client.close();
    }
    expect(Date.now() - signalledMs).toBeLessThan(10_000);
    expect(memberIds(await clusterView(one))).toEqual([1]);
    expect(await metric(one, "bunka_cluster_members")).toBe(1);
  }, TIMEOUT);

  test("etcd stopped under a running broker: /ready 503 with the reason and a lapse counted; etcd back: ready again", async () => {
    await withBrokerLog(join(dir, "broker-1.log"), async () => {
      const logBefore = readFileSync(join(dir, "broker-1.log"), "utf8").length;
      await etcd.stop();
      try {
        const reason = await until("/ready to fail", 10_000, async () => {
          const response = await fetch(`${one.http}/ready`);
          return response.status === 503 ? ((await response.json()) as { message: string }).message : undefined;
        });
        expect(reason).toMatch(/^this broker's etcd lease lapsed/);
        expect(reason).toContain(etcd.endpoint);
        expect(await metric(one, "bunka_cluster_lease_valid")).toBe(0);
        expect(await metric(one, "bunka_cluster_lease_lapses_total")).toBe(1);
        expect(await metric(one, "bunka_ready")).toBe(0);
        expect((await clusterView(one)).lease).toMatchObject({ state: "lapsed", validForMs: 0, lapses: 1 });
      } finally {
        await etcd.launch();
      }
      await until("/ready to pass again", 15_000, async () => ((await fetch(`${one.http}/ready`)).status === 200 ? true : undefined));
      expect(await metric(one, "bunka_cluster_lease_valid")).toBe(1);
      expect(await metric(one, "bunka_cluster_lease_lapses_total")).toBe(1);
      // Said once: the lapse and the recovery, not a line per failed keep-alive.
      const log = readFileSync(join(dir, "broker-1.log"), "utf8").slice(logBefore);
      expect(log.match(/etcd lease: no longer valid/g)).toHaveLength(1);
      expect(log.match(/etcd lease: keep-alive failed/g)).toHaveLength(1);
      expect(log.match(/etcd lease: valid again/g)).toHaveLength(1);
    });
  }, TIMEOUT);

  test("its lease dropped while another process took its broker id: the broker says so and stops with exit 2", async () => {
    const view = await clusterView(one);
    const key = `/bunka/${view.clusterId}/brokers/1`;
    // The other process's registration replaces this one's key first, so that revoking this broker's lease
    // leaves it in place: the broker's next keep-alive finds its lease gone and the id taken.
    const intruder = await etcdClient.leaseGrant(30);
    const value = JSON.stringify({ format: "bunka-broker", version: 1, brokerId: 1, kafka: { host: "127.0.0.1", port: 1 }, http: null, rack: null });
    await etcdClient.put(key, value, { lease: intruder.id });
    await etcdClient.leaseRevoke(BigInt(view.lease!.id!));
    expect(await one.exited).toBe(2);
    const log = readFileSync(join(dir, "broker-1.log"), "utf8");
    expect(log).toContain("leaving the cluster: this broker id is taken");
    expect(log).toMatch(/INFO {2}stopped\n$/);
    // Its shutdown did not remove the other process's registration.
    expect((await etcdClient.range(key)).kvs[0]?.lease).toBe(intruder.id);
    await etcdClient.leaseRevoke(intruder.id);
  }, TIMEOUT);
});
