#!/usr/bin/env bun
/**
 * Compression and decompression speed of each record-batch codec (src/protocol/records/compression.ts)
 * on 1 MiB of records as a producer would batch them: v2 records with a short key and a JSON order event
 * as the value, the kind of payload Kafka carries most. Not a test.
 *
 *   bun scripts/bench-codecs.ts [--rounds N] [--bytes N]
 *
 * Prints, per codec, the compressed size and the median MB/s (of uncompressed bytes) over the rounds; lz4
 * and snappy twice, on their WebAssembly kernels (`lz4`, `snappy`: what the broker runs) and on their
 * TypeScript twins (`lz4-ts`, `snappy-ts`).
 */
import { compress, decompress } from "../src/protocol/records/compression.ts";
import { CompressionCodec } from "../src/protocol/records/record-batch.ts";
import { useLz4Kernels } from "../src/protocol/records/lz4.ts";
import { useSnappyKernels } from "../src/protocol/records/snappy.ts";

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const rounds = Number(option("rounds", "20"));
const totalBytes = Number(option("bytes", String(1024 * 1024)));

/** A small deterministic PRNG, so every run measures the same bytes. */
let state = 42;
const random = (): number => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state / 4294967296;
};

function zigzagVarint(out: number[], value: number): void {
  let v = value >= 0 ? value * 2 : -value * 2 - 1;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

/** The records section of a batch: length-prefixed v2 records until `bytes` are reached. */
function realisticRecords(bytes: number): Uint8Array {
  const encoder = new TextEncoder();
  const out: number[] = [];
  const products = ["keyboard", "monitor", "mouse", "laptop", "headset", "webcam", "dock", "cable"];
  const currencies = ["EUR", "USD", "GBP", "JPY"];
  for (let i = 0; out.length < bytes; i++) {
    const customer = `customer-${String(Math.floor(random() * 5000)).padStart(5, "0")}`;
    const value = JSON.stringify({
      orderId: 1_000_000 + i,
      customer,
      createdAt: new Date(1_735_000_000_000 + i * 137).toISOString(),
      currency: currencies[Math.floor(random() * currencies.length)],
      items: Array.from({ length: 1 + Math.floor(random() * 3) }, () => ({
        sku: `${products[Math.floor(random() * products.length)]}-${Math.floor(random() * 100)}`,
        quantity: 1 + Math.floor(random() * 4),
        price: Math.round(random() * 50_000) / 100,
      })),
      status: random() < 0.9 ? "PLACED" : "CANCELLED",
    });
    const key = encoder.encode(customer);
    const val = encoder.encode(value);
    const body: number[] = [0];
    zigzagVarint(body, i * 3); // timestamp delta
    zigzagVarint(body, i); // offset delta
    zigzagVarint(body, key.length);
    body.push(...key);
    zigzagVarint(body, val.length);
    body.push(...val);
    zigzagVarint(body, 0); // headers
    zigzagVarint(out, body.length);
    out.push(...body);
  }
  return Uint8Array.from(out.slice(0, bytes));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const data = realisticRecords(totalBytes);
const mb = data.length / 1e6;
console.log(`${data.length} bytes of records, ${rounds} rounds, median MB/s of uncompressed bytes`);
// lz4 and snappy twice: their WebAssembly kernels (what the broker runs), then their TypeScript twins (the fallback).
const runs = [
  { name: "gzip", label: "gzip" },
  { name: "snappy", label: "snappy" },
  { name: "snappy", label: "snappy-ts", portable: true },
  { name: "lz4", label: "lz4" },
  { name: "lz4", label: "lz4-ts", portable: true },
  { name: "zstd", label: "zstd" },
] as const;
for (const run of runs) {
  const { name } = run;
  useLz4Kernels(!("portable" in run));
  useSnappyKernels(!("portable" in run));
  const codec = CompressionCodec[name];
  let compressed = compress(codec, data);
  // Warm-up, so the JIT has compiled the codecs written in TypeScript before they are timed.
  for (let i = 0; i < 5; i++) decompress(codec, compress(codec, data), data.length);
  const compressRates: number[] = [];
  const decompressRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    let t = performance.now();
    compressed = compress(codec, data);
    compressRates.push(mb / ((performance.now() - t) / 1000));
    t = performance.now();
    const back = decompress(codec, compressed, data.length);
    decompressRates.push(mb / ((performance.now() - t) / 1000));
    if (back.length !== data.length) throw new Error(`${name} round trip lost bytes`);
  }
  console.log(
    `${run.label.padEnd(9)} ${String(compressed.length).padStart(8)} bytes (${((compressed.length / data.length) * 100).toFixed(1)}%)` +
      `  compress ${median(compressRates).toFixed(0).padStart(5)} MB/s  decompress ${median(decompressRates).toFixed(0).padStart(5)} MB/s`,
  );
}
