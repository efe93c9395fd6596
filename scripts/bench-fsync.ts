#!/usr/bin/env bun
/**
 * fsync against syncfs on this machine's disk: the measurement behind fsync.mode=batched
 * (src/platform/batched-sync.ts). Not a test; see docs/benchmarks.md ("Batched fsyncs").
 *
 *   bun scripts/bench-fsync.ts [--dir DIR] [--rounds N] [--files 1,2,3,5,10,20]
 *
 * For each file count F, each round appends 1 KiB to each of F files (a synchronous write, as the broker makes them) and then makes them durable, either
 * (fsync) with F fsyncs in parallel on Bun's file-work pool, as fsync.mode=per-file does, or (syncfs) with
 * the broker's own syncfs worker: one syncfs of the file system plus one fdatasync. Prints per round the
 * wall time, this process's CPU time (all its threads) and the whole machine's busy CPU time (/proc/stat,
 * which also counts the kernel's block-layer work done outside the process). Run it with
 * UV_THREADPOOL_SIZE=16, as `bunka serve` runs.
 */
import { mkdtempSync, readFileSync, rmSync, writeSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSyncfsSyncer } from "../src/platform/syncfs-worker.ts";

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const root = mkdtempSync(join(option("dir", tmpdir()), "bunka-bench-fsync-"));
const rounds = Number(option("rounds", "2000"));
const fileCounts = option("files", "1,2,3,5,10,20").split(",").map(Number);

/** Busy jiffies of the whole machine (user, nice, system, irq, softirq), in ms. */
function machineBusyMs(): number {
  const [, user, nice, system, , , irq, softirq] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).map(Number);
  return (user! + nice! + system! + irq! + softirq!) * 10;
}

function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

const start = await startSyncfsSyncer(root);
if (start.syncer === undefined) throw new Error(`syncfs is not available here: ${start.reason}`);
const syncer = start.syncer;
const record = new Uint8Array(1024).fill(120);
console.log(`dir ${root}, ${rounds} rounds, UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? "(unset)"}`);
console.log("files  method  wall ms/round  process CPU ms/round  machine CPU ms/round");
try {
  for (const files of fileCounts) {
    for (const method of ["fsync", "syncfs"] as const) {
      const handles = await Promise.all(Array.from({ length: files }, (_, i) => fsp.open(join(root, `${method}-${files}-${i}`), "w")));
      const round = async () => {
        for (const h of handles) writeSync(h.fd, record);
        if (method === "fsync") await Promise.all(handles.map((h) => h.sync()));
        else await syncer.syncAll();
      };
      for (let i = 0; i < 50; i++) await round();
      const wall0 = performance.now();
      const cpu0 = processCpuMs();
      const busy0 = machineBusyMs();
      for (let i = 0; i < rounds; i++) await round();
      const wall = (performance.now() - wall0) / rounds;
      const cpu = (processCpuMs() - cpu0) / rounds;
      const busy = (machineBusyMs() - busy0) / rounds;
      console.log(`${String(files).padStart(5)}  ${method.padEnd(6)}  ${wall.toFixed(3).padStart(13)}  ${cpu.toFixed(3).padStart(20)}  ${busy.toFixed(3).padStart(20)}`);
      for (const h of handles) await h.close();
    }
  }
} finally {
  syncer.close();
  rmSync(root, { recursive: true, force: true });
}
