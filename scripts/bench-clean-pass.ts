/**
 * One partition's cleaning pass in this process, repeated: a data set like the cleaner benchmark's
 * (scripts/bench-cleaner.ts: keys drawn uniformly from --keys, JSON-like text values of 200-1800 bytes,
 * 1% tombstones, batches of about 64 KiB from an idempotent producer) is written once through the
 * partition's own append path, then each round copies it and cleans the copy on the event loop, and prints
 * the pass's CPU-seconds per GiB of inactive bytes read. Made for profiling the pass (`bun --cpu-prof
 * scripts/bench-clean-pass.ts`), where the broker runs it on a cleaner thread; the figures to quote beside
 * Apache Kafka's come from bench-cleaner.ts.
 *
 *   bun scripts/bench-clean-pass.ts [--codec none|gzip|snappy|lz4|zstd] [--mb 256] [--keys 100000] [--rounds 5] [--segment-mb 16]
 */
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OffsetMap } from "../src/domain/compaction/offset-map.ts";
import { systemClock } from "../src/platform/clock.ts";
import { nodeFs } from "../src/platform/node-fs.ts";
import { CompressionCodec, parseBatchHeader } from "../src/protocol/records/record-batch.ts";
import { buildBatch, type KafkaRecord } from "../src/protocol/records/records.ts";
import { Partition } from "../src/storage/partition.ts";

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1]! : fallback;
}

const codecName = option("codec", "lz4") as keyof typeof CompressionCodec;
const codec = CompressionCodec[codecName];
if (codec === undefined) throw new Error(`unknown codec ${codecName}`);
const totalBytes = Number(option("mb", "256")) * 1024 * 1024;
const keyCount = Number(option("keys", "100000"));
const rounds = Number(option("rounds", "5"));
const SEGMENT_BYTES = Number(option("segment-mb", "16")) * 1024 * 1024;
const BATCH_BYTES = 64 * 1024;
const PRODUCER_ID = 1000;

/** A small deterministic generator (xorshift32), so that every run writes the same data. */
let seed = 42;
function random(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
}

const WORDS = (
  "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec " +
  "romeo sierra tango uniform victor whiskey xray yankee zulu order customer invoice payment shipped pending " +
  "active closed region north south east west warehouse item quantity price discount total currency euro " +
  "dollar account balance updated created status priority normal high low note comment review approved"
).split(" ");
const corpusParts: string[] = [];
for (let length = 0; length < 1 << 20; ) {
  const word = WORDS[Math.floor(random() * WORDS.length)]!;
  const separator = random() < 0.125 ? "," : " ";
  corpusParts.push(word, separator);
  length += word.length + 1;
}
const corpus = corpusParts.join("");
const encoder = new TextEncoder();

function valueOf(key: string, version: number, size: number): Uint8Array {
  const head = `{"id":"${key}","version":${String(version).padStart(12, "0")},"status":"active","text":"`;
  const textBytes = Math.max(0, size - head.length - 2);
  const from = Math.floor(random() * (corpus.length - textBytes));
  return encoder.encode(`${head}${corpus.slice(from, from + textBytes)}"}`);
}

async function fill(dir: string): Promise<{ records: number; batches: number }> {
  const partition = await Partition.open({
    fs: nodeFs,
    clock: systemClock,
    topic: "clean-pass",
    partition: 0,
    dir,
    logConfig: { segmentBytes: SEGMENT_BYTES, segmentMs: 7 * 24 * 3600 * 1000, retentionMs: -1, retentionBytes: -1, indexIntervalBytes: 4096 },
    timestampType: "create-time",
    warn: () => {},
  });
  let written = 0;
  let records = 0;
  let batches = 0;
  let sequence = 0;
  while (written < totalBytes) {
    const batch: KafkaRecord[] = [];
    let batchBytes = 0;
    const nowMs = Date.now();
    while (batchBytes < BATCH_BYTES && written < totalBytes) {
      const keyNumber = Math.floor(random() * keyCount);
      const key = encoder.encode(`key-${String(keyNumber).padStart(9, "0")}`);
      const value = random() < 0.01 ? null : valueOf(`key-${keyNumber}`, records, 200 + Math.floor(random() * 1601));
      batch.push({ attributes: 0, offset: batch.length, timestampMs: nowMs, key, value, headers: new Uint8Array([0]) });
      const bytes = key.length + (value?.length ?? 0);
      batchBytes += bytes;
      written += bytes;
      records++;
    }
    const bytes = buildBatch(
      {
        baseOffset: 0,
        lastOffsetDelta: batch.length - 1,
        partitionLeaderEpoch: 0,
        attributes: codec,
        producerId: PRODUCER_ID,
        producerEpoch: 0,
        baseSequence: sequence,
        maxTimestampMs: nowMs,
        deleteHorizonMs: -1,
      },
      batch,
    );
    sequence += batch.length;
    const outcome = partition.appendFromProducer(bytes, parseBatchHeader(bytes));
    if (outcome.kind !== "appended") throw new Error(`append refused: ${JSON.stringify(outcome)}`);
    await outcome.written;
    batches++;
  }
  await partition.log.flush();
  await partition.close();
  return { records, batches };
}

async function cleanOnce(source: string, work: string): Promise<{ cpuSeconds: number; wallSeconds: number; bytesRead: number; sizeAfter: number }> {
  await rm(work, { recursive: true, force: true });
  await cp(source, work, { recursive: true });
  const partition = await Partition.open({
    fs: nodeFs,
    clock: systemClock,
    topic: "clean-pass",
    partition: 0,
    dir: work,
    logConfig: { segmentBytes: SEGMENT_BYTES, segmentMs: 7 * 24 * 3600 * 1000, retentionMs: -1, retentionBytes: -1, indexIntervalBytes: 4096 },
    timestampType: "create-time",
    warn: () => {},
  });
  const cpuBefore = process.cpuUsage();
  const wallBefore = performance.now();
  const outcome = await partition.clean({
    nowMs: Date.now(),
    config: {
      minCleanableDirtyRatio: 0.01,
      minCompactionLagMs: 0,
      maxCompactionLagMs: Number.MAX_SAFE_INTEGER,
      deleteRetentionMs: 24 * 3600 * 1000,
      segmentBytes: SEGMENT_BYTES,
      indexIntervalBytes: 4096,
    },
    map: new OffsetMap(128 * 1024 * 1024, 0.9),
    throttle: async () => {},
    shouldStop: () => false,
    force: true,
  });
  const cpu = process.cpuUsage(cpuBefore);
  const wallSeconds = (performance.now() - wallBefore) / 1000;
  await partition.close();
  if (outcome.kind !== "cleaned") throw new Error(`nothing cleaned: ${JSON.stringify(outcome)}`);
  return { cpuSeconds: (cpu.user + cpu.system) / 1e6, wallSeconds, bytesRead: outcome.stats.bytesRead, sizeAfter: outcome.stats.sizeAfterBytes };
}

const root = await mkdtemp(join(tmpdir(), "bunka-clean-pass-"));
try {
  const source = join(root, "source");
  const filled = await fill(source);
  console.error(`filled ${filled.records} records in ${filled.batches} ${codecName} batches`);
  const perGiB: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const result = await cleanOnce(source, join(root, "work"));
    // The mapping step and the cleaning step each read the inactive segments once.
    const inactiveGiB = result.bytesRead / 2 / 2 ** 30;
    perGiB.push(result.cpuSeconds / inactiveGiB);
    console.log(
      `round ${round}: ${(result.cpuSeconds / inactiveGiB).toFixed(2)} CPU-s/GiB, ${(inactiveGiB * 1024 / result.wallSeconds).toFixed(1)} MiB/s, ` +
        `${(result.sizeAfter / 2 ** 20).toFixed(1)} MiB after`,
    );
  }
  const sorted = [...perGiB].sort((a, b) => a - b);
  console.log(`median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} CPU-s/GiB (${sorted[0]!.toFixed(2)}-${sorted[sorted.length - 1]!.toFixed(2)})`);
} finally {
  await rm(root, { recursive: true, force: true });
}
