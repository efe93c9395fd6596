/**
 * The HTTP side-port of the shipped artefact: the compiled binary for this machine (built when older than
 * the sources), started with `--http 127.0.0.1:0`. The start-up line names the HTTP address; /health,
 * /ready, /metrics and /v1/topics answer on it like curl would see them; BUNKA_ADMIN_TOKEN turns on the
 * write route; SIGTERM still exits 0.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json";
import { CAN_RUN_BINARY, cleanEnv, ensureBunkaBinary, HOST_TARGET } from "../support/binary.ts";
import { StreamWaiter } from "./support.ts";

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
      expect(text).toContain(`bunka_build_info{version="${pkg.version}"} 1`);
      expect(text).toContain("bunka_ready 1");
      // Creating the cluster metadata at start-up fsynced files and directories through the timed Fs.
      expect(Number(text.match(/^bunka_fsync_duration_seconds_count\{kind="dir"\} (\d+)$/m)?.[1])).toBeGreaterThan(0);

      const cluster = await (await fetch(`${running.http}/v1/cluster`)).json();
      expect(cluster).toMatchObject({ brokerId: 0, version: pkg.version, brokers: [{ brokerId: 0, port: running.kafkaPort }] });

      const topics = await fetch(`${running.http}/v1/topics`);
      expect(topics.status).toBe(200);
      expect(await topics.json()).toEqual({ topics: [] });

      const transactions = await fetch(`${running.http}/v1/transactions`);
      expect(transactions.status).toBe(501);

      // Without BUNKA_ADMIN_TOKEN the write route does not exist.
      expect((await fetch(`${running.http}/v1/transactions/x/abort`, { method: "POST" })).status).toBe(404);
    } finally {
      expect(await running.stop()).toBe(0);
    }
  }, 60_000);

  test("BUNKA_ADMIN_TOKEN enables the write route: 401 without the token, 501 with it", async () => {
    const running = await startBinary({ BUNKA_ADMIN_TOKEN: "e2e-token" });
    try {
      const url = `${running.http}/v1/transactions/my-app/abort`;
      expect((await fetch(url, { method: "POST" })).status).toBe(401);
      expect((await fetch(url, { method: "POST", headers: { Authorization: "Bearer nope" } })).status).toBe(401);
      const ok = await fetch(url, { method: "POST", headers: { Authorization: "Bearer e2e-token" } });
      expect(ok.status).toBe(501);
      expect(((await ok.json()) as { error: string }).error).toBe("not_implemented");
    } finally {
      expect(await running.stop()).toBe(0);
    }
  }, 60_000);
});
