/**
 * The compiled binary's start-up contract for an operator:
 * - one signal (SIGINT or SIGTERM) stops it wherever in start-up it lands (before the handlers exist, in
 *   recovery, while the listeners are bound, right after the start-up line), never a second one needed,
 *   and the data directory starts again afterwards with its data;
 * - a listen address that is taken: one line naming the listener, the address and the port, exit 2,
 *   before recovery (no "broker ready").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BunkaProcess, cleanEnv, killAllBunkaProcesses, privateBinaryCopy, removeTempDir } from "../support/binary.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const PARTITIONS = 40;
let binary: string;
let dir: string;
let dataDir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "bunka-startup-"));
  binary = await privateBinaryCopy(dir);
  dataDir = join(dir, "data");
  // A directory with something to recover, so that start-up has a recovery phase to land in.
  const broker = await BunkaProcess.start({ binary, dataDir, logFile: join(dir, "setup.log") });
  const client = await WireClient.connect(broker.port);
  const created = await client.request(19, 7, {
    topics: [{ name: "kept", numPartitions: PARTITIONS, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 5000,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  client.close();
  // SIGKILL: every later start recovers every partition (no clean-shutdown checkpoint).
  await broker.kill("SIGKILL");
}, TIMEOUT);

afterAll(async () => {
  await killAllBunkaProcesses();
  removeTempDir(dir);
});

interface Spawned {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  stdout: () => string;
  stderr: Promise<string>;
}

function spawn(args: string[]): Spawned {
  const proc = Bun.spawn([binary, "serve", "--data-dir", dataDir, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: cleanEnv() });
  let stdout = "";
  void (async () => {
    for await (const chunk of proc.stdout) stdout += new TextDecoder().decode(chunk);
  })();
  return { proc, stdout: () => stdout, stderr: new Response(proc.stderr).text() };
}

/** Exit code, or 128 + the signal number (SIGINT: 130, SIGTERM: 143) for death by signal; "running" after the deadline. */
async function exitWithin(proc: Bun.Subprocess, deadlineMs: number): Promise<number | "running"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const result = await Promise.race([proc.exited, new Promise<"running">((resolve) => (timer = setTimeout(() => resolve("running"), deadlineMs)))]);
  clearTimeout(timer);
  return result;
}

describe("one signal stops the broker at any point of start-up", () => {
  test("SIGINT or SIGTERM at 24 points from the spawn to after the start-up line: every one exits, and the data is still there", async () => {
    // How long a start takes here, to spread the signals over it.
    const probe = spawn(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    const spawnedMs = Date.now();
    const startupDeadlineMs = spawnedMs + 60_000;
    while (!probe.stdout().includes(" listening ") && Date.now() < startupDeadlineMs && probe.proc.exitCode === null) await Bun.sleep(5);
    expect(probe.stdout()).toContain(" listening ");
    const startupMs = Date.now() - spawnedMs;
    probe.proc.kill("SIGKILL");
    await probe.proc.exited;

    const outcomes: string[] = [];
    const points = 24;
    for (let i = 0; i < points; i++) {
      const signal = i % 2 === 0 ? "SIGINT" : "SIGTERM";
      // From 0 to 1.3 × the start-up time: early (before main runs), recovery, binding, after the line.
      const atMs = Math.round((i / (points - 1)) * startupMs * 1.3);
      const started = spawn(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
      // The fault's timing, not a wait for a condition: the point of start-up the signal lands in.
      await Bun.sleep(atMs);
      started.proc.kill(signal);
      const code = await exitWithin(started.proc, 30_000);
      const stderr = code === "running" ? "" : await started.stderr;
      outcomes.push(`${signal} at ${atMs} ms: ${code}${started.stdout().includes(" listening ") ? " (after the start-up line)" : ""}`);
      if (code === "running") {
        started.proc.kill("SIGKILL");
        await started.proc.exited;
        throw new Error(`one ${signal} at ${atMs} ms did not stop the broker within 30 s:\n${outcomes.join("\n")}`);
      }
      // 0: a clean stop, or a stop during recovery; death by the signal itself only before the handlers
      // exist, when the broker has not logged anything yet. 130 (a second signal) is never right here.
      const byTheSignal = code === (signal === "SIGINT" ? 130 : 143);
      if (code !== 0 && !(byTheSignal && stderr.trim() === "")) {
        throw new Error(`${signal} at ${atMs} ms: exit ${code}, stderr:\n${stderr}\n${outcomes.join("\n")}`);
      }
      // An exit 0 is the broker's own doing, and it says which path it took.
      if (code === 0 && !/signal during start-up|shutting down/.test(stderr)) {
        throw new Error(`${signal} at ${atMs} ms: exit 0 without saying why, stderr:\n${stderr}`);
      }
    }
    // Starts vary in length on a shared machine, so the timed points may all land before the line: one
    // more signal goes once the line is read, the moment a script that waits for it would signal.
    const announced = spawn(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    const lineDeadlineMs = Date.now() + 60_000;
    while (!announced.stdout().includes(" listening ") && Date.now() < lineDeadlineMs && announced.proc.exitCode === null) await Bun.sleep(5);
    expect(announced.stdout()).toContain(" listening ");
    announced.proc.kill("SIGINT");
    expect(await exitWithin(announced.proc, 30_000)).toBe(0);
    outcomes.push("SIGINT once the line was read: 0 (after the start-up line)");
    if (process.env.BUNKA_TEST_VERBOSE) console.log(outcomes.join("\n"));
    // The timed signals landed during start-up (before the line) at least once.
    expect(outcomes.some((o) => !o.includes("after the start-up line"))).toBe(true);

    // And the directory is whole: a last start serves the topic with all its partitions.
    const broker = await BunkaProcess.start({ binary, dataDir, logFile: join(dir, "after.log") });
    const client = await WireClient.connect(broker.port);
    const metadata = await client.request(3, 12, { topics: [{ topicId: "00000000-0000-0000-0000-000000000000", name: "kept" }], allowAutoTopicCreation: false, includeTopicAuthorizedOperations: false });
    expect(metadata.topics[0].errorCode).toBe(ErrorCode.NONE);
    expect(metadata.topics[0].partitions).toHaveLength(PARTITIONS);
    client.close();
    expect(await broker.kill("SIGTERM")).toBe(0);
  }, TIMEOUT);
});

describe("a listen address that is taken", () => {
  for (const which of ["kafka", "http"] as const) {
    test(`${which}: one line naming the listener and the address, exit 2, before recovery`, async () => {
      const holder = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      try {
        const taken = `127.0.0.1:${holder.port}`;
        const started = spawn(which === "kafka" ? ["--listen", taken, "--http", "127.0.0.1:0"] : ["--listen", "127.0.0.1:0", "--http", taken]);
        const code = await exitWithin(started.proc, 60_000);
        const stderr = await started.stderr;
        expect(code).toBe(2);
        const listener = which === "kafka" ? "the Kafka listener" : "the HTTP side-port";
        expect(stderr).toContain(`bunka: ${listener} cannot listen on ${taken}: the address is already in use`);
        expect(stderr).not.toContain("broker ready");
        expect(stderr).not.toContain("recovering");
        expect(started.stdout()).toBe("");
      } finally {
        holder.stop(true);
      }
    }, TIMEOUT);
  }
});

test("the log of the setup start is there (the test wrote where it thinks)", () => {
  expect(readFileSync(join(dir, "setup.log"), "utf8")).toContain("broker ready");
});
