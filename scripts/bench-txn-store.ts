#!/usr/bin/env bun
/**
 * Is EndTxn latency flat in the number of transactional ids? Measures the transaction state store on the
 * real file system with 1, 10k and 100k ids (100k ids over 50 slots is 2000 entries per slot file) and
 * prints p50/p99 of one durable transition (one store update: append + fsync) and of a whole EndTxn
 * (Ongoing -> PrepareCommit -> CompleteCommit: two durable updates), one client at a time, then the same
 * with 64 concurrent clients (group commit).
 *
 * For comparison it also measures the design without a journal: rewriting the whole slot file atomically
 * (state-file saveState: tmp + fsync + rename + fsync dir) for every transition. That one grows with the
 * ids per slot, which is why the store journals (see src/storage/txn-state-store.ts).
 *
 *   bun scripts/bench-txn-store.ts [--dir /path/on/the/disk/to/test] [--sizes 1,10000,100000] [--samples 300]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { slotOf } from "../src/cluster/ownership.ts";
import { addPartitions, completeTxn, endTxn } from "../src/domain/txn/coordinator.ts";
import type { TxnEntry } from "../src/domain/txn/txn-state.ts";
import { nodeFs } from "../src/platform/node-fs.ts";
import { txnStateDir, TxnStateStore } from "../src/storage/txn-state-store.ts";
import { saveState } from "../src/storage/state-file.ts";
import { ensureDir } from "../src/storage/atomic-file.ts";

const { values } = parseArgs({
  options: {
    dir: { type: "string" },
    sizes: { type: "string", default: "1,10000,100000" },
    samples: { type: "string", default: "300" },
  },
});
const sizes = values.sizes!.split(",").map(Number);
const samples = Number(values.samples);
const T0 = 1_700_000_000_000;

function idOf(i: number): string {
  return `bench-transactional-id-${i}`;
}

function emptyEntry(transactionalId: string, producerId: number): TxnEntry {
  return {
    transactionalId,
    producerId,
    lastProducerId: producerId,
    epoch: 0,
    lastEpoch: -1,
    timeoutMs: 60_000,
    state: "Empty",
    partitions: [],
    groups: [],
    ongoingSinceMs: -1,
    updatedMs: T0,
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(latenciesMs: number[]): string {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(2)} ms  p99 ${percentile(sorted, 99).toFixed(2)} ms`;
}

/** One transaction on `id`: AddPartitions (not timed), then EndTxn's two durable transitions, timed. */
async function transaction(store: TxnStateStore, id: string, nowMs: number, transitions: number[], endTxns: number[]): Promise<void> {
  const current = (await store.get(id))!;
  const ref = { transactionalId: id, producerId: current.producerId, producerEpoch: current.epoch };
  await store.update(id, (entry) => addPartitions(entry, { ...ref, partitions: [{ topic: "orders", partitions: [0, 1, 2] }] }, nowMs).entry);
  const start = performance.now();
  await store.update(id, (entry) => endTxn(entry, { ...ref, commit: true }, nowMs).entry);
  const prepared = performance.now();
  await store.update(id, (entry) => completeTxn(entry, nowMs).entry);
  const done = performance.now();
  transitions.push(prepared - start, done - prepared);
  endTxns.push(done - start);
}

async function benchStore(dataDir: string, size: number): Promise<void> {
  let store = await TxnStateStore.open(nodeFs, dataDir, { slotOf });
  const chunk = 10_000;
  for (let from = 0; from < size; from += chunk) {
    const ids = Array.from({ length: Math.min(chunk, size - from) }, (_, i) => from + i);
    await Promise.all(ids.map((i) => store.update(idOf(i), () => emptyEntry(idOf(i), 1_000_000 + i))));
  }
  await store.close();
  // Reopen, so the measurement runs against what a restarted broker loads.
  const loadStart = performance.now();
  store = await TxnStateStore.open(nodeFs, dataDir, { slotOf });
  await store.loadAll();
  const loadMs = performance.now() - loadStart;

  const pick = (k: number) => idOf((k * 7919) % size);
  for (let k = 0; k < 20; k++) await transaction(store, pick(k), T0 + k, [], []); // warm-up
  const transitions: number[] = [];
  const endTxns: number[] = [];
  for (let k = 0; k < samples; k++) await transaction(store, pick(k + 20), T0 + k, transitions, endTxns);

  const concurrentTransitions: number[] = [];
  const concurrentEndTxns: number[] = [];
  const clients = Math.min(64, size);
  const rounds = Math.max(1, Math.ceil(samples / clients));
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let r = 0; r < rounds; r++) await transaction(store, idOf(c), T0 + r, concurrentTransitions, concurrentEndTxns);
    }),
  );
  await store.close();

  console.log(`journal store, ${size} ids (${Math.ceil(size / 50)} per slot), load ${loadMs.toFixed(0)} ms`);
  console.log(`  ${"sequential".padEnd(10)}  transition ${summary(transitions)}   EndTxn ${summary(endTxns)}`);
  console.log(`  ${`${clients} client${clients === 1 ? "" : "s"}`.padEnd(10)}  transition ${summary(concurrentTransitions)}   EndTxn ${summary(concurrentEndTxns)}`);
}

/** The design without a journal: every transition rewrites the whole slot file. */
async function benchFullRewrite(dataDir: string, size: number): Promise<void> {
  const dir = txnStateDir(dataDir);
  await ensureDir(nodeFs, dir);
  const slot = slotOf(idOf(0));
  const entries: TxnEntry[] = [];
  for (let i = 0; i < size; i++) if (slotOf(idOf(i)) === slot) entries.push(emptyEntry(idOf(i), 1_000_000 + i));
  const path = join(dir, `slot-${slot}.json`);
  const latencies: number[] = [];
  for (let k = 0; k < Math.min(samples, 200); k++) {
    entries[0] = { ...entries[0]!, updatedMs: T0 + k };
    const start = performance.now();
    await saveState(nodeFs, path, "txn-state-slot", 1, { lastSeq: k, entries });
    latencies.push(performance.now() - start);
  }
  console.log(`full slot rewrite, ${size} ids (${entries.length} in the slot)   transition ${summary(latencies)}`);
}

const root = values.dir ?? tmpdir();
for (const size of sizes) {
  const dataDir = mkdtempSync(join(root, "bunka-bench-txn-"));
  try {
    await benchStore(dataDir, size);
    await benchFullRewrite(dataDir, size);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
