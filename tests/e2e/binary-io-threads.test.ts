/**
 * `bunka serve` re-executes itself once with UV_THREADPOOL_SIZE=16 when the variable is unset (main.ts:
 * Bun's file-work pool is one thread per core otherwise, which caps concurrent fsyncs at the core count).
 * The re-execution keeps the pid, the arguments and the rest of the environment, and an operator's own
 * value is left alone. Linux only: the checks read /proc.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BunkaProcess, ensureBunkaBinary, killAllBunkaProcesses, removeTempDir } from "../support/binary.ts";
import { produceToEveryPartitionAtOnce } from "../support/wide-load.ts";

const TIMEOUT = 120_000;
const onLinux = process.platform === "linux" && existsSync("/proc/self/environ");
let binary: string;
let dir: string;

beforeAll(async () => {
  binary = await ensureBunkaBinary();
  dir = mkdtempSync(join(tmpdir(), "bunka-io-threads-"));
}, TIMEOUT);
afterAll(async () => {
  await killAllBunkaProcesses();
  removeTempDir(dir);
});

function environOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readFileSync(`/proc/${pid}/environ`, "latin1").split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) out.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return out;
}

/** Bun names its file-work pool threads "Bun Pool <n>". */
function poolThreads(pid: number): number {
  let n = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${task}/comm`, "utf8").startsWith("Bun Pool")) n += 1;
    } catch {
      // the thread ended meanwhile
    }
  }
  return n;
}

describe.skipIf(!onLinux)("I/O threads", () => {
  test(
    "without UV_THREADPOOL_SIZE the broker runs with 16, keeps its pid and environment, and fsyncs in parallel",
    async () => {
      const broker = await BunkaProcess.start({
        binary,
        dataDir: join(dir, "default"),
        logFile: join(dir, "default.log"),
        env: { UV_THREADPOOL_SIZE: undefined, BUNKA_IO_TEST_MARKER: "kept" },
        // One fsync per file on the pool: batched mode would make the 16 partitions' fsyncs one syncfs.
        args: ["--fsync-mode", "per-file"],
      });
      try {
        // The process that printed the start-up line is the one we spawned: execve kept the pid.
        const env = environOf(broker.pid);
        expect(env.get("UV_THREADPOOL_SIZE")).toBe("16");
        expect(env.get("BUNKA_IO_TEST_MARKER")).toBe("kept");

        // 16 partitions written with acks=-1 by 16 connections at once: more fsyncs wait than there are
        // cores, so the pool grows past the default (one thread per core).
        await produceToEveryPartitionAtOnce(broker.port, "wide", 16, 20);
        expect(poolThreads(broker.pid)).toBeGreaterThan(2);
      } finally {
        broker.proc.kill("SIGTERM");
        expect(await broker.exited).toBe(0);
      }
    },
    TIMEOUT,
  );

  test(
    "an operator's UV_THREADPOOL_SIZE is kept",
    async () => {
      const broker = await BunkaProcess.start({
        binary,
        dataDir: join(dir, "own"),
        logFile: join(dir, "own.log"),
        env: { UV_THREADPOOL_SIZE: "3" },
      });
      try {
        expect(environOf(broker.pid).get("UV_THREADPOOL_SIZE")).toBe("3");
      } finally {
        broker.proc.kill("SIGTERM");
        expect(await broker.exited).toBe(0);
      }
    },
    TIMEOUT,
  );
});
