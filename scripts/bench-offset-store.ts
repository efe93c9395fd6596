#!/usr/bin/env bun
/**
 * What does the exactly-once path cost the offset store when a slot holds many groups and partitions?
 * Fills one slot with --groups x --partitions committed offsets, reopens the store (the load time is
 * printed), then runs a stream of transactions as a transactional producer's group offsets see them: a
 * TxnOffsetCommit (draft.stage of --txn-partitions partitions of one group) followed by EndTxn's offset hook
 * (draft.completeTransaction, commit), each one durable store write. It prints, per transaction, the bytes
 * appended to the slot's journal and the bytes written to its checkpoint (compactions, amortized), and the
 * p50/p99/max of one write and of a whole transaction (both writes), first one transaction at a time, then
 * with --clients transactions of different groups in flight together (group commit).
 *
 * Bytes are counted under the store, at the Fs port (every write to slot-N.journal and to the checkpoint's
 * tmp file), so the script measures any version of the store with the same API: to compare before and
 * after a change, run it in a worktree of the older commit.
 *
 *   bun scripts/bench-offset-store.ts [--dir /path/on/the/disk/to/test] [--groups 100] [--partitions 100]
 *                                     [--txn-partitions 1,10,100] [--txns 200] [--clients 16]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { OffsetCommitEntry } from "../src/domain/groups/offsets.ts";
import type { FileHandle, Fs } from "../src/platform/fs.ts";
import { nodeFs } from "../src/platform/node-fs.ts";
import { OffsetStore } from "../src/storage/offset-store.ts";

const { values } = parseArgs({
  options: {
    dir: { type: "string" },
    groups: { type: "string", default: "100" },
    partitions: { type: "string", default: "100" },
    "txn-partitions": { type: "string", default: "1,10,100" },
    txns: { type: "string", default: "200" },
    clients: { type: "string", default: "16" },
  },
});
const groups = Number(values.groups);
const partitions = Number(values.partitions);
const txnPartitionCounts = values["txn-partitions"]!.split(",").map(Number);
const txns = Number(values.txns);
const clients = Math.min(Number(values.clients), groups);
const SLOT = 0;
const TOPIC = "bench-input-topic";
const T0 = 1_700_000_000_000;

/** The real file system, counting the bytes written to journals and to everything else (checkpoints). */
class CountingFs implements Fs {
  journalBytes = 0;
  checkpointBytes = 0;
  constructor(private readonly inner: Fs) {}
  async open(path: string, mode: "r" | "rw" | "w"): Promise<FileHandle> {
    const handle = await this.inner.open(path, mode);
    const journal = path.endsWith(".journal");
    return {
      write: (data, position) => {
        if (journal) this.journalBytes += data.length;
        else this.checkpointBytes += data.length;
        return handle.write(data, position);
      },
      read: (length, position) => handle.read(length, position),
      truncate: (length) => handle.truncate(length),
      fsync: () => handle.fsync(),
      size: () => handle.size(),
      close: () => handle.close(),
    };
  }
  readFile = (path: string) => this.inner.readFile(path);
  rename = (from: string, to: string) => this.inner.rename(from, to);
  fsyncDir = (path: string) => this.inner.fsyncDir(path);
  mkdirp = (path: string) => this.inner.mkdirp(path);
  readdir = (path: string) => this.inner.readdir(path);
  unlink = (path: string) => this.inner.unlink(path);
  rmrf = (path: string) => this.inner.rmrf(path);
  stat = (path: string) => this.inner.stat(path);
}

const groupId = (g: number) => `bench-consumer-group-${g}`;

function entries(count: number, offset: number, nowMs: number, first = 0): OffsetCommitEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    topic: TOPIC,
    partition: (first + i) % partitions,
    offset,
    leaderEpoch: 0,
    metadata: "",
    commitTimestampMs: nowMs,
    expireTimestampMs: null,
  }));
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(latenciesMs: number[]): string {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(2)}  p99 ${percentile(sorted, 99).toFixed(2)}  max ${sorted.at(-1)!.toFixed(2)} ms`;
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** One transaction of `producerId` on group `g`: TxnOffsetCommit, then EndTxn's commit; both timed. */
async function transaction(store: OffsetStore, g: number, k: number, txnPartitions: number, writes: number[], txnMs: number[]): Promise<void> {
  const producerId = 1_000_000 + g;
  const start = performance.now();
  const codes = await store.mutate(SLOT, (d) => d.stage(groupId(g), producerId, entries(txnPartitions, 1000 + k, T0 + k, k)));
  if (codes.some((c) => c !== 0)) throw new Error(`TxnOffsetCommit refused: ${codes.join(",")}`);
  const staged = performance.now();
  const committed = await store.mutate(SLOT, (d) => d.completeTransaction(groupId(g), producerId, true));
  if (committed !== txnPartitions) throw new Error(`EndTxn committed ${committed} staged offsets, expected ${txnPartitions}`);
  const done = performance.now();
  writes.push(staged - start, done - staged);
  txnMs.push(done - start);
}

async function bench(dataDir: string, txnPartitions: number): Promise<void> {
  const fs = new CountingFs(nodeFs);
  let store = await OffsetStore.open(fs, dataDir);
  for (let g = 0; g < groups; g++) await store.mutate(SLOT, (d) => d.commit(groupId(g), entries(partitions, 0, T0)));
  await store.close();
  const loadStart = performance.now();
  store = await OffsetStore.open(fs, dataDir);
  const loadMs = performance.now() - loadStart;
  for (let k = 0; k < 10; k++) await transaction(store, k % groups, k, txnPartitions, [], []); // warm-up
  await store.idle();

  const journal0 = fs.journalBytes;
  const checkpoint0 = fs.checkpointBytes;
  const writes: number[] = [];
  const txnMs: number[] = [];
  const started = performance.now();
  for (let k = 0; k < txns; k++) await transaction(store, (k * 7) % groups, k, txnPartitions, writes, txnMs);
  await store.idle();
  const elapsedS = (performance.now() - started) / 1000;
  const journalPerTxn = (fs.journalBytes - journal0) / txns;
  const checkpointPerTxn = (fs.checkpointBytes - checkpoint0) / txns;

  const concurrentWrites: number[] = [];
  const concurrentTxnMs: number[] = [];
  const rounds = Math.max(1, Math.ceil(txns / clients));
  const journal1 = fs.journalBytes;
  const checkpoint1 = fs.checkpointBytes;
  const concurrentStarted = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let r = 0; r < rounds; r++) await transaction(store, c, txns + r, txnPartitions, concurrentWrites, concurrentTxnMs);
    }),
  );
  await store.idle();
  const concurrentS = (performance.now() - concurrentStarted) / 1000;
  const concurrentTxns = clients * rounds;
  await store.close();

  console.log(`${groups} groups x ${partitions} partitions in one slot, ${txnPartitions} partition(s) per transaction, load ${loadMs.toFixed(0)} ms`);
  console.log(
    `  sequential   ${txns} txns, ${(txns / elapsedS).toFixed(0)} txn/s; per txn: journal ${kib(journalPerTxn)}, checkpoint ${kib(checkpointPerTxn)}; write ${summary(writes)}; txn ${summary(txnMs)}`,
  );
  console.log(
    `  ${`${clients} clients`.padEnd(12)} ${concurrentTxns} txns, ${(concurrentTxns / concurrentS).toFixed(0)} txn/s; per txn: journal ${kib((fs.journalBytes - journal1) / concurrentTxns)}, checkpoint ${kib((fs.checkpointBytes - checkpoint1) / concurrentTxns)}; write ${summary(concurrentWrites)}; txn ${summary(concurrentTxnMs)}`,
  );
}

const root = values.dir ?? tmpdir();
for (const txnPartitions of txnPartitionCounts) {
  const dataDir = mkdtempSync(join(root, "bunka-bench-offsets-"));
  try {
    await bench(dataDir, txnPartitions);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
