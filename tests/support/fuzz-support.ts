/**
 * What the fuzzers (tests/fuzz) share: their seed and per-case generators, byte-level helpers for mutating
 * frames, and the real client frames in tests/fixtures/golden.
 *
 *   const SEED = envSeed("FUZZ_SEED", 0x5eed_f022);   // FUZZ_SEED=1234 or FUZZ_SEED=random to change it
 *   for (let index = 0; index < cases; index++) {
 *     if (ONLY_CASE !== undefined && index !== ONLY_CASE) continue;   // FUZZ_CASE=4711 replays one case
 *     const rnd = caseRandom(SEED, index);
 *   }
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { seededRandom } from "./random.ts";

/** A seed from the environment variable `name` (a number, or "random" to pick one), else `fallback`. */
export function envSeed(name: string, fallback: number): number {
  const value = process.env[name];
  return value === "random" ? (Math.random() * 2 ** 32) >>> 0 : value !== undefined ? Number(value) >>> 0 : fallback;
}

/** FUZZ_CASE: the index of the one case to run (a replay), or undefined to run them all. */
export const ONLY_CASE = process.env.FUZZ_CASE === undefined ? undefined : Number(process.env.FUZZ_CASE);

/** A fresh generator per case, so that a case replays alone from (seed, index). */
export function caseRandom(seed: number, index: number): ReturnType<typeof seededRandom> {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35);
  h ^= h >>> 16;
  return seededRandom(h >>> 0);
}

/** A copy of `bytes` with `remove` bytes at `at` replaced by `insert` (positions past the end are clamped). */
export function splice(bytes: Uint8Array, at: number, remove: number, insert: ArrayLike<number>): Uint8Array {
  const start = Math.min(at, bytes.length);
  const end = Math.min(start + remove, bytes.length);
  const out = new Uint8Array(bytes.length - (end - start) + insert.length);
  out.set(bytes.subarray(0, start));
  out.set(insert, start);
  out.set(bytes.subarray(end), start + insert.length);
  return out;
}

export const fromHex = (hex: string) => new Uint8Array(Buffer.from(hex, "hex"));
export const toHex = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/** One captured exchange (scripts/capture-golden.ts): the frames as hex, without the size prefix. */
export interface GoldenEntry {
  apiKey: number;
  apiVersion: number;
  client: string;
  request: string;
  response: string | null;
}

const goldenDir = join(import.meta.dir, "../fixtures/golden");

/** Every captured exchange in tests/fixtures/golden, file by file in name order; none when it is absent. */
export function goldenEntries(): { file: string; entry: GoldenEntry }[] {
  if (!existsSync(goldenDir)) return [];
  return readdirSync(goldenDir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .flatMap((file) => (JSON.parse(readFileSync(join(goldenDir, file), "utf8")) as GoldenEntry[]).map((entry) => ({ file, entry })));
}
