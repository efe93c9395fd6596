#!/usr/bin/env bun
/**
 * What the read path's batch checks cost (docs/architecture.md, "Damaged data"): one partition log on the
 * real file system, filled with `--mb` MiB of 16-record batches, read whole in 1 MiB reads as a consumer
 * does, and the broker's CPU-s per GiB read printed for
 * - reads of what this process appended (their CRCs were checked at produce: no CRC pass);
 * - the first read after a clean reopen (segments trusted at start: every CRC computed once);
 * - the reads after it (checked already: no CRC pass).
 * Each row is the median of `--rounds` reads, with the range. The page cache holds the data throughout:
 * these are CPU costs, not the disk's.
 *
 *   bun scripts/bench-read-path.ts [--mb 256] [--rounds 5] [--dir /path/on/the/disk/to/test]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { systemClock } from "../src/platform/clock.ts";
import { nodeFs } from "../src/platform/node-fs.ts";
import { PartitionLog, type LogConfig } from "../src/storage/log/partition-log.ts";
import { simpleBatch } from "../tests/support/batch-builder.ts";

const { values } = parseArgs({
  options: { mb: { type: "string", default: "256" }, rounds: { type: "string", default: "5" }, dir: { type: "string" } },
});
const totalBytes = Number(values.mb) * 1024 * 1024;
const rounds = Number(values.rounds);
const root = mkdtempSync(join(values.dir ?? tmpdir(), "bunka-bench-read-"));
const dir = join(root, "bench-0");
await nodeFs.mkdirp(dir);
const config: LogConfig = { segmentBytes: 64 * 1024 * 1024, segmentMs: 7 * 24 * 3600 * 1000, retentionMs: -1, retentionBytes: -1, indexIntervalBytes: 4096 };
// A fresh batch per append: the log writes the base offset into the bytes it is given.
const batch = () => simpleBatch(16, { valueBytes: 1000 });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function readAll(log: PartitionLog): Promise<number> {
  const before = process.cpuUsage();
  let offset = 0;
  let bytes = 0;
  for (;;) {
    const read = await log.read(offset, 1024 * 1024, { minOneBatch: true });
    if (read.kind !== "records" || read.bytes.length === 0) break;
    bytes += read.bytes.length;
    offset = read.nextOffset;
  }
  const cpu = process.cpuUsage(before);
  if (bytes < totalBytes) throw new Error(`read ${bytes} bytes of ${totalBytes}`);
  return (cpu.user + cpu.system) / 1e6 / (bytes / 2 ** 30);
}

function row(name: string, samples: number[]): void {
  console.log(`| ${name} | ${median(samples).toFixed(2)} (${Math.min(...samples).toFixed(2)}–${Math.max(...samples).toFixed(2)}) |`);
}

try {
  let log = await PartitionLog.open(nodeFs, dir, config, systemClock);
  for (let written = 0; written < totalBytes; ) {
    const b = batch();
    log.append(b);
    written += b.length;
    if (written % (8 * 1024 * 1024) < b.length) await log.flush();
  }
  await log.flush();
  const appended: number[] = [];
  for (let i = 0; i < rounds; i++) appended.push(await readAll(log));
  await log.close();
  const firstAfterReopen: number[] = [];
  const later: number[] = [];
  for (let i = 0; i < rounds; i++) {
    log = await PartitionLog.open(nodeFs, dir, config, systemClock);
    firstAfterReopen.push(await readAll(log));
    later.push(await readAll(log));
    await log.close();
  }
  console.log(`${values.mb} MiB in one partition, 1 MiB reads, ${rounds} rounds; broker CPU-s per GiB read, median (range)\n`);
  console.log("| read | CPU-s/GiB |\n| --- | ---: |");
  row("what this process appended (no CRC pass)", appended);
  row("first read after a clean reopen (every CRC computed)", firstAfterReopen);
  row("second read after a reopen (checked already)", later);
} finally {
  rmSync(root, { recursive: true, force: true });
}
