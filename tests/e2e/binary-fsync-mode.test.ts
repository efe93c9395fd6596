/**
 * fsync.mode (main.ts, platform/batched-sync.ts): by default the fsyncs requested together are made
 * durable with one syncfs of the data directory's file system when they name 3 files or more; with
 * `--fsync-mode per-file` every file gets its own fsync. Checked through /metrics under a load that asks
 * for many fsyncs at once: 16 partitions written with acks=-1 by 16 connections together. Linux only
 * (syncfs is).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BunkaProcess, ensureBunkaBinary, killAllBunkaProcesses, removeTempDir } from "../support/binary.ts";
import { produceToEveryPartitionAtOnce } from "../support/wide-load.ts";

const TIMEOUT = 120_000;
let binary: string;
let dir: string;

beforeAll(async () => {
  binary = await ensureBunkaBinary();
  dir = mkdtempSync(join(tmpdir(), "bunka-fsync-mode-"));
}, TIMEOUT);
afterAll(async () => {
  await killAllBunkaProcesses();
  removeTempDir(dir);
});

/** The value of one series of /metrics, e.g. `bunka_fsync_batches_total{method="syncfs"}`. */
async function metric(broker: BunkaProcess, series: string): Promise<number> {
  const text = await (await fetch(`${broker.http}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`${series} is not in /metrics`);
  return Number(line.slice(series.length + 1));
}

describe.skipIf(process.platform !== "linux")("fsync.mode", () => {
  test(
    "batched (the default): fsyncs of many partitions at once share syncfs calls",
    async () => {
      const broker = await BunkaProcess.start({ binary, dataDir: join(dir, "batched"), logFile: join(dir, "batched.log") });
      try {
        await produceToEveryPartitionAtOnce(broker.port, "wide", 16, 20);
        const batches = await metric(broker, 'bunka_fsync_batches_total{method="syncfs"}');
        const files = await metric(broker, 'bunka_fsync_batch_files_total{method="syncfs"}');
        expect(batches).toBeGreaterThan(0);
        // Each syncfs covered at least 3 files; the 320 partition appends took far fewer syncfs calls.
        expect(files).toBeGreaterThanOrEqual(3 * batches);
        expect(batches).toBeLessThan(320);
      } finally {
        broker.proc.kill("SIGTERM");
        expect(await broker.exited).toBe(0);
      }
    },
    TIMEOUT,
  );

  test(
    "per-file: every fsync is its file's own, and no batch is made",
    async () => {
      const broker = await BunkaProcess.start({
        binary,
        dataDir: join(dir, "per-file"),
        logFile: join(dir, "per-file.log"),
        args: ["--fsync-mode", "per-file"],
      });
      try {
        await produceToEveryPartitionAtOnce(broker.port, "wide", 16, 20);
        expect(await metric(broker, 'bunka_fsync_batches_total{method="syncfs"}')).toBe(0);
        expect(await metric(broker, 'bunka_fsync_batches_total{method="fsync"}')).toBe(0);
        expect(await metric(broker, 'bunka_fsync_duration_seconds_count{kind="file"}')).toBeGreaterThanOrEqual(320);
      } finally {
        broker.proc.kill("SIGTERM");
        expect(await broker.exited).toBe(0);
      }
    },
    TIMEOUT,
  );
});
