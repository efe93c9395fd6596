#!/usr/bin/env bun
/**
 * CRC-32C speed (docs/architecture.md, "Codecs and kernels"): the CPU's crc32 instruction through bun:ffi
 * (platform/crc32c-hardware.ts) against the TypeScript loop, per input size, median of `--rounds` timings.
 *
 *   bun scripts/bench-crc32c.ts [--rounds 5]
 */
import { parseArgs } from "node:util";
import { loadHardwareCrc32c } from "../src/platform/crc32c-hardware.ts";
import { crc32cSoftware } from "../src/protocol/records/crc32c.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const rounds = Number(values.rounds);
const loaded = loadHardwareCrc32c();
if (!("kernel" in loaded)) throw new Error(`no hardware kernel here: ${loaded.reason}`);
const kernel = loaded.kernel;
const data = new Uint8Array(1 << 20).map((_, i) => (i * 131 + 7) & 0xff);

function nsPerCall(fn: () => number, calls: number): number {
  const samples: number[] = [];
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    for (let i = 0; i < calls; i++) sink ^= fn();
    samples.push(((performance.now() - started) * 1e6) / calls);
  }
  if (sink === 0.5) console.log(sink); // keeps the calls from being optimised away
  return samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)]!;
}

console.log("| bytes | instruction ns | TypeScript ns | instruction GB/s | TypeScript GB/s |");
console.log("| ---: | ---: | ---: | ---: | ---: |");
for (const size of [64, 256, 1024, 16 * 1024, 1 << 20]) {
  const part = data.subarray(0, size);
  const calls = Math.max(20, Math.floor(2e8 / Math.max(size, 256) / 10));
  nsPerCall(() => kernel(part, 0), calls); // warm-up
  nsPerCall(() => crc32cSoftware(data, 0, size), calls);
  const hw = nsPerCall(() => kernel(part, 0), calls);
  const sw = nsPerCall(() => crc32cSoftware(data, 0, size), calls);
  console.log(`| ${size} | ${hw.toFixed(0)} | ${sw.toFixed(0)} | ${(size / hw).toFixed(2)} | ${(size / sw).toFixed(2)} |`);
}
