#!/usr/bin/env bun
/**
 * Measures what an idle producer costs in a partition's producer state (target: under 300 bytes):
 * creates 100k producer entries in one table and prints the heap growth per entry after a full GC,
 * once with a single remembered batch per producer and once with a full window of five.
 *
 *   bun scripts/bench-producer-state-memory.ts [producers]
 */
import { applyAppend, createProducerState, PRODUCER_BATCHES_RETAINED, type ProducerStateTable } from "../src/domain/producer-state.ts";

const producers = Number(process.argv[2] ?? 100_000);

function heapUsed(): number {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
}

/** Fills a fresh table with `producers` entries of `batches` batches each, at realistic magnitudes. */
function fill(batches: number): ProducerStateTable {
  const state = createProducerState();
  let offset = 9_000_000_000;
  const timestampMs = 1_700_000_000_000;
  for (let p = 0; p < producers; p++) {
    const producerId = 1_000_000 + p;
    for (let b = 0; b < batches; b++) {
      const baseSequence = b * 10;
      applyAppend(
        state,
        { producerId, producerEpoch: 3, baseSequence, lastSequence: baseSequence + 9, isTransactional: false },
        { firstOffset: offset, lastOffset: offset + 9, timestampMs: timestampMs + p + b },
      );
      offset += 10;
    }
  }
  return state;
}

function measure(batches: number): number {
  const before = heapUsed();
  const state = fill(batches);
  const after = heapUsed();
  if (state.size !== producers) throw new Error(`expected ${producers} producers, got ${state.size}`);
  return (after - before) / producers;
}

const results: Record<string, number> = {};
for (const batches of [1, PRODUCER_BATCHES_RETAINED]) {
  // Measure each shape twice and keep the second: the first run also pays for JIT code and warm-up.
  measure(batches);
  results[`${batches} batch${batches === 1 ? "" : "es"}`] = measure(batches);
}
for (const [shape, bytes] of Object.entries(results)) {
  console.log(`producer state, ${shape} per producer: ${bytes.toFixed(1)} bytes per entry (${producers} producers, heap delta after Bun.gc(true))`);
}
