/**
 * The compiled binary cleans compacted topics on its cleaner thread: the thread's code is an entry point
 * of the executable (scripts/build.ts), found at run time by storage/log/cleaner-threads.ts. A binary
 * without it would fail every pass ("log cleaner pass failed", the thread never starting); here the pass
 * runs, the log holds the latest value of every key at its offset afterwards, across a restart, and
 * SIGTERM stops the broker with its thread cleanly.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BATCH_HEADER_BYTES, checkBatch, parseBatchHeader } from "../../src/protocol/records/record-batch.ts";
import { decodeRecords } from "../../src/protocol/records/records.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaProcess, CAN_RUN_BINARY, HOST_TARGET, killAllBunkaProcesses, privateBinaryCopy, removeTempDir } from "../support/binary.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
const TOPIC = "cleaned-by-thread";
const KEYS = 40;
const ROUNDS = 25;
let binary: string;
let dir: string;

beforeAll(async () => {
  if (!CAN_RUN_BINARY) return;
  dir = mkdtempSync(join(tmpdir(), "bunka-binary-cleaner-"));
  // BUNKA_TEST_BINARY=<a build without the thread's entry point> makes this test fail, as it should.
  binary = await privateBinaryCopy(dir);
}, TIMEOUT);
afterAll(async () => {
  await killAllBunkaProcesses();
  if (dir !== undefined) removeTempDir(dir);
});

async function produce(client: WireClient, key: string, value: string): Promise<number> {
  const res = await client.request(0, 11, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: buildBatch({ records: [{ key, value }] }) }] }],
  });
  const answer = res.responses[0].partitionResponses[0];
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return Number(answer.baseOffset);
}

/** Every (offset, key, value) from offset 0 to the high watermark. */
async function readAll(client: WireClient): Promise<[number, string, string][]> {
  const out: [number, string, string][] = [];
  const text = (b: Uint8Array | null) => (b === null ? "" : new TextDecoder().decode(b));
  for (let next = 0, rounds = 0; rounds < 200; rounds++) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1 << 20,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic: TOPIC, partitions: [{ partition: 0, currentLeaderEpoch: -1, fetchOffset: next, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: 1 << 20 }] }],
      forgottenTopicsData: [],
      rackId: "",
    });
    const p = res.responses[0].partitions[0];
    expect(p.errorCode).toBe(ErrorCode.NONE);
    const bytes: Uint8Array | null = p.records;
    if (bytes === null || bytes.length === 0) break;
    for (let at = 0; at + BATCH_HEADER_BYTES <= bytes.length; ) {
      const size = checkBatch(bytes, at, bytes.length, true);
      if (typeof size !== "number") throw new Error(`unsound batch at ${at}`);
      const header = parseBatchHeader(bytes, at);
      for (const r of decodeRecords(bytes.subarray(at, at + size))) if (r.offset >= next) out.push([r.offset, text(r.key), text(r.value)]);
      next = header.baseOffset + header.lastOffsetDelta + 1;
      at += size;
    }
    if (next >= Number(p.highWatermark)) break;
  }
  return out;
}

describe.skipIf(!CAN_RUN_BINARY)(`binary (${HOST_TARGET}) log cleaner`, () => {
  test(
    "cleans a compacted topic on its cleaner thread; the cleaned log reads the same after a restart",
    async () => {
      const config = join(dir, "bunka.properties");
      writeFileSync(config, "log.cleaner.backoff.ms=100\n");
      const dataDir = join(dir, "data");
      const logFile = join(dir, "broker.log");
      let broker = await BunkaProcess.start({ binary, dataDir, logFile, args: ["--config", config] });
      let client = await WireClient.connect(broker.port);
      const created = await client.request(19, 7, {
        topics: [
          {
            name: TOPIC,
            numPartitions: 1,
            replicationFactor: 1,
            assignments: [],
            configs: [
              { name: "cleanup.policy", value: "compact" },
              { name: "segment.bytes", value: "4096" },
              { name: "min.cleanable.dirty.ratio", value: "0.01" },
            ],
          },
        ],
        timeoutMs: 10_000,
        validateOnly: false,
      });
      expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
      const latest = new Map<string, [number, string]>();
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < KEYS; k++) {
          const key = `key-${k}`;
          const value = `value-${round}-${k}-${"x".repeat(60)}`;
          latest.set(key, [await produce(client, key, value), value]);
        }
      }
      // One record larger than a segment: everything before it is in inactive segments.
      const rollAt = await produce(client, "roll", "r".repeat(5000));
      latest.set("roll", [rollAt, "r".repeat(5000)]);

      // The cleaner's thread reached the record that rolled the log.
      const metric = (text: string, name: string) => Number(text.match(new RegExp(`^${name}\\{topic="${TOPIC}",partition="0"\\} (\\S+)$`, "m"))?.[1]);
      await until("a pass up to the roll", 60_000, async () => {
        const failed = readFileSync(logFile, "utf8").split("\n").find((line) => line.includes("log cleaner pass failed"));
        if (failed !== undefined) throw new Error(`the cleaner failed: ${failed}`);
        const text = await (await fetch(`${broker.http}/metrics`)).text();
        return metric(text, "bunka_log_cleaner_cleaned_up_to_offset") >= rollAt ? text : undefined;
      });
      const brokerLog = readFileSync(logFile, "utf8");
      expect(brokerLog).toContain("log cleaner thread started");
      expect(brokerLog).not.toContain("log cleaner pass failed");
      expect(brokerLog).not.toContain("log cleaner thread died");

      const expected = [...latest.entries()].map(([key, [offset, value]]) => [offset, key, value] as [number, string, string]).sort((a, b) => a[0] - b[0]);
      expect(await readAll(client)).toEqual(expected);

      client.close();
      expect(await broker.kill("SIGTERM")).toBe(0);
      broker = await BunkaProcess.start({ binary, dataDir, logFile, args: ["--config", config] });
      client = await WireClient.connect(broker.port);
      expect(await readAll(client)).toEqual(expected);
      client.close();
      expect(await broker.kill("SIGTERM")).toBe(0);
    },
    TIMEOUT,
  );
});
