/**
 * The HTTP side-port of the shipped artefact: the compiled binary for this machine (built when older than
 * the sources), started with `--http 127.0.0.1:0`. The start-up line names the HTTP address; /health,
 * /ready, /metrics, /v1/topics, /v1/transactions and /v1/markers answer on it like curl would see them;
 * BUNKA_ADMIN_TOKEN turns on the write route; SIGTERM still exits 0. Then the same binary as a CLI
 * (`bunka txn list --http ...`, `bunka topics`, `bunka txn describe`, `bunka txn abort`) against a broker
 * holding a transaction left open over raw Kafka frames, with its exit codes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json";
import { CAN_RUN_BINARY, cleanEnv, ensureBunkaBinary, HOST_TARGET } from "../support/binary.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";
import { createTopicOverWire, openTransactionOverWire, StreamWaiter } from "./support.ts";

const tmpRoot = mkdtempSync(join(tmpdir(), "bunka-binary-http-"));
const children = new Set<Bun.Subprocess>();
let binary = "";

beforeAll(async () => {
  if (CAN_RUN_BINARY) binary = await ensureBunkaBinary();
}, 300_000);

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(tmpRoot, { recursive: true, force: true });
});

interface Running {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  kafkaPort: number;
  http: string;
  line: string;
  stop(): Promise<number>;
}

async function startBinary(env: Record<string, string> = {}): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpRoot, "data-"));
  const proc = Bun.spawn([binary, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dataDir], {
    cwd: tmpRoot,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: cleanEnv(env),
  });
  children.add(proc);
  const stderr = new Response(proc.stderr).text();
  const stdout = new StreamWaiter(proc.stdout);
  try {
    const match = await stdout.until(/^bunka (\S+) listening kafka=127\.0\.0\.1:(\d+) http=127\.0\.0\.1:(\d+) data=(\S+) broker=(\d+)\n/m, 30_000);
    expect(match[1]).toBe(pkg.version);
    expect(match[4]).toBe(dataDir);
    expect(match[5]).toBe("0");
    return {
      proc,
      kafkaPort: Number(match[2]),
      http: `http://127.0.0.1:${match[3]}`,
      line: match[0],
      async stop() {
        proc.kill("SIGTERM");
        const code = await proc.exited;
        children.delete(proc);
        return code;
      },
    };
  } catch (error) {
    proc.kill("SIGKILL");
    await proc.exited;
    children.delete(proc);
    throw new Error(`${(error as Error).message}\nstderr: ${await stderr}`);
  }
}

describe.skipIf(!CAN_RUN_BINARY)(`binary (${HOST_TARGET}) HTTP side-port`, () => {
  test("prints the HTTP address and answers /health, /ready, /metrics, /v1/cluster and /v1/topics on it", async () => {
    const running = await startBinary();
    try {
      const health = await fetch(`${running.http}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: "ok" });

      const ready = await fetch(`${running.http}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: "ready" });

      const metrics = await fetch(`${running.http}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
      const text = await metrics.text();
      expect(text).toContain(`bunka_build_info{version="${pkg.version}",lz4_kernel="wasm",snappy_kernel="wasm"} 1`);
      expect(text).toContain("bunka_ready 1");
      // Creating the cluster metadata at start-up fsynced files and directories through the timed Fs.
      expect(Number(text.match(/^bunka_fsync_duration_seconds_count\{kind="dir"\} (\d+)$/m)?.[1])).toBeGreaterThan(0);
      // ... and through the batches of fsync.mode=batched, the default (one fsync per file for start-up's
      // one-at-a-time writes).
      expect(Number(text.match(/^bunka_fsync_batches_total\{method="fsync"\} (\d+)$/m)?.[1])).toBeGreaterThan(0);
      expect(text).toMatch(/^bunka_fsync_batches_total\{method="syncfs"\} \d+$/m);

      const cluster = (await (await fetch(`${running.http}/v1/cluster`)).json()) as { features: unknown };
      expect(cluster).toMatchObject({ brokerId: 0, version: pkg.version, brokers: [{ brokerId: 0, port: running.kafkaPort }] });

      const topics = await fetch(`${running.http}/v1/topics`);
      expect(topics.status).toBe(200);
      expect(await topics.json()).toEqual({ topics: [] });

      expect(cluster.features).toEqual({ idempotentProducer: true, transactions: true, consumerGroups: true });

      const transactions = await fetch(`${running.http}/v1/transactions`);
      expect(transactions.status).toBe(200);
      expect(await transactions.json()).toEqual({ total: 0, truncated: false, transactions: [] });
      const markers = await fetch(`${running.http}/v1/markers`);
      expect(await markers.json()).toEqual({ total: 0, truncated: false, markers: [], queues: [{ targetBrokerId: 0, files: 0 }] });
      expect(text).toContain('bunka_transactions{state="Ongoing"} 0');

      // Without BUNKA_ADMIN_TOKEN the write route does not exist.
      expect((await fetch(`${running.http}/v1/transactions/x/abort`, { method: "POST" })).status).toBe(404);
    } finally {
      expect(await running.stop()).toBe(0);
    }
  }, 60_000);

  test("BUNKA_ADMIN_TOKEN enables the write route: 401 without the token or with a wrong one, 404 for an unknown id", async () => {
    const running = await startBinary({ BUNKA_ADMIN_TOKEN: "e2e-token" });
    try {
      const url = `${running.http}/v1/transactions/my-app/abort`;
      expect((await fetch(url, { method: "POST" })).status).toBe(401);
      expect((await fetch(url, { method: "POST", headers: { Authorization: "Bearer nope" } })).status).toBe(401);
      const unknown = await fetch(url, { method: "POST", headers: { Authorization: "Bearer e2e-token" } });
      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toEqual({ error: "unknown_transactional_id", message: 'no transaction state for "my-app"' });
    } finally {
      expect(await running.stop()).toBe(0);
    }
  }, 60_000);

  test("the CLI over the side-port: txn list, topics, txn describe and txn abort against an open transaction", async () => {
    const running = await startBinary({ BUNKA_ADMIN_TOKEN: "e2e-token" });
    const client = await WireClient.connect(running.kafkaPort);
    try {
      await createTopicOverWire(client, "payments", 2);
      const txn = await openTransactionOverWire(client, { transactionalId: "checkout-1", topic: "payments", partition: 0, values: ["a", "b", "c"] });
      const address = running.http.replace("http://", "");

      const list = await cli(["txn", "list", "--http", address]);
      expect(list).toMatchObject({ code: 0, stderr: "" });
      const [header, row, ...rest] = list.stdout.trimEnd().split("\n");
      expect(header).toMatch(/^TRANSACTIONAL ID +PRODUCER ID +EPOCH +STATE +AGE +TIMEOUT +PARTITIONS +GROUPS$/);
      expect(row).toMatch(new RegExp(`^checkout-1 +${txn.producerId} +${txn.producerEpoch} +Ongoing +\\d+s +1m +payments-0 +-$`));
      expect(rest).toEqual([]);

      const json = await cli(["txn", "list", "--json", `--http=${address}`, "--state", "ongoing"]);
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({ total: 1, truncated: false, transactions: [{ transactionalId: "checkout-1", state: "Ongoing", timedOut: false }] });

      // `bunka topics` with no flag: the address comes from BUNKA_HTTP, as it would on the broker's host.
      const topics = await cli(["topics"], { BUNKA_HTTP: address });
      expect(topics).toMatchObject({ code: 0, stderr: "" });
      expect(topics.stdout).toMatch(/^TOPIC +PARTITIONS +SIZE +CONFIGS +TOPIC ID\npayments +2 +\d+ B +- +[0-9a-f-]{36}\n$/);
      const partitions = await cli(["topics", "payments", "--http", address]);
      expect(partitions.code).toBe(0);
      // Partition 0: log 0..3, HW 3, LSO 0 (the open transaction), LSO lag 3, one open transaction.
      expect(partitions.stdout).toMatch(/\n +0 +0 +0 +3 +3 +0 +3 +1 +1 /);

      const described = await cli(["txn", "describe", "checkout-1", "--http", address]);
      expect(described.code).toBe(0);
      expect(described.stdout).toContain("State             Ongoing\n");
      expect(described.stdout).toContain("Partitions        payments-0\n");
      expect(described.stdout).toContain("Pending markers: none\n");

      const aborted = await cli(["txn", "abort", "checkout-1", "--http", address], { BUNKA_ADMIN_TOKEN: "e2e-token" });
      expect(aborted).toMatchObject({ code: 0, stderr: "" });
      expect(aborted.stdout).toBe(`aborted "checkout-1": producer ${txn.producerId} fenced at epoch ${txn.producerEpoch + 1}, state CompleteAbort\n`);
      const after = await cli(["topics", "payments", "--http", address, "--json"]);
      // The abort marker is offset 3; nothing holds the LSO any more.
      expect(JSON.parse(after.stdout).partitionDetails[0]).toMatchObject({ highWatermark: 4, lastStableOffset: 4, lsoLag: 0, openTransactionCount: 0 });

      // An EndTxn over the wire: each of its steps is timed in /metrics (the operator's abort above is not
      // an EndTxn and counted nothing). The answer comes once the decision is durable, so `prepare` is
      // counted by then; the markers and Complete* follow it.
      const committed = await openTransactionOverWire(client, { transactionalId: "checkout-2", topic: "payments", partition: 1, values: ["d"] });
      const endTxn = await client.request(26, 3, { transactionalId: "checkout-2", producerId: committed.producerId, producerEpoch: committed.producerEpoch, committed: true });
      expect(endTxn.errorCode).toBe(0);
      const phaseCounts = async () => {
        const phases = await (await fetch(`${running.http}/metrics`)).text();
        const count = (phase: string) => Number(phases.match(new RegExp(`^bunka_txn_end_phase_duration_seconds_count\\{phase="${phase}"\\} (\\d+)$`, "m"))?.[1]);
        return ["prepare", "offsets", "markers", "complete"].map(count);
      };
      expect((await phaseCounts())[0]).toBe(1);
      const counted = await until("the EndTxn's markers and Complete* in /metrics", 10_000, async () => {
        const counts = await phaseCounts();
        return counts[3] === 1 ? counts : undefined;
      });
      expect(counted).toEqual([1, 0, 1, 1]);

      // Exit codes: 1 for an unknown id or an unreachable broker, 2 for bad usage.
      expect(await cli(["txn", "describe", "nope", "--http", address])).toMatchObject({
        code: 1,
        stdout: "",
        stderr: 'bunka: no transaction state for "nope" (HTTP 404 unknown_transactional_id)\n',
      });
      const closedPort = await freePort();
      const unreachable = await cli(["txn", "list", "--http", `127.0.0.1:${closedPort}`]);
      expect(unreachable).toMatchObject({ code: 1, stdout: "" });
      expect(unreachable.stderr).toBe(
        `bunka: cannot reach the broker's HTTP side-port at http://127.0.0.1:${closedPort} (connection refused); is it running? (--http HOST:PORT or BUNKA_HTTP)\n`,
      );
      expect(await cli(["txn", "list", "--state", "nope", "--http", address])).toMatchObject({ code: 2, stdout: "" });
      expect(await cli(["txn"])).toMatchObject({ code: 2, stderr: "bunka: txn: which subcommand? list, describe or abort (try bunka txn --help)\n" });
      const help = await cli(["--help"]);
      expect(help.stdout).toContain("bunka txn list [filters]");
    } finally {
      client.close();
      expect(await running.stop()).toBe(0);
    }
  }, 120_000);
});

/** Runs the binary as a CLI (no BUNKA_* from the developer's shell) and collects what it printed. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([binary, ...args], { cwd: tmpRoot, stdin: "ignore", stdout: "pipe", stderr: "pipe", env: cleanEnv(env) });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** A port nothing listens on: bound, then released. */
async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}
