/**
 * Crash loop (issue 3, point 5): the compiled binary is SIGKILLed again and again under a continuous
 * acks=-1 load and restarted on the same data directory and port; at the end every partition is read back
 * completely and checked against what the load generator knows. Some restarts are themselves killed
 * 0-150 ms after the spawn (a crash during recovery), and a few stops are clean (SIGTERM), so that kills
 * also hit logs reopened from a clean-shutdown checkpoint.
 *
 * The load: raw WireClient producers (no idempotence: producer id -1), several connections, one request in
 * flight per partition (so the order of the log is the order of sending), records with unique sequential
 * keys "<topic>/<partition>/<seq>" and values derived from the key, two topics, one of them with
 * segment.bytes = 64 KiB so that segments roll all the time. A batch is ACKED when its acks=-1 answer
 * said NONE (the broker promises it is durable, at the offset it named); it is MAYBE when the connection
 * died with it in flight (the kill): the broker may or may not have it. MAYBE batches are never resent,
 * so nothing may appear twice.
 *
 * What must hold, per partition, after all the kills:
 * - every ACKED batch is present, exactly once, at exactly the offsets its acknowledgement named;
 * - no record appears twice, and nothing appears that was never sent (values checked byte for byte);
 * - records are in send order; a batch is all there or not at all (MAYBE batches included);
 * - offsets are contiguous from 0 to the high watermark (no holes, nothing lost below it);
 * - every restart succeeds (recovery never refuses the directory), and after each one the log end is at
 *   or beyond every offset acknowledged before the kill;
 * - a last kill with no load in flight changes nothing, and Apache's Java console consumer (partition
 *   mode, no group) reads the same count and keys as the raw read for the rolling partition.
 * Torn tails truncated by recovery are counted from the outside (a .log file smaller after the restart than
 * right after the kill) and logged; SIGKILL leaves the page cache intact, so they are rare.
 *
 *   CRASH_KILLS=100 bun test tests/fault/crash-loop.test.ts     # more kills (default 30)
 *   CRASH_SEED=1234 ...                                          # another seed ("random" picks one)
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaProcess, CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir, killDuringStartup, stopBroker } from "../support/fault-support.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { seededRandom } from "../support/random.ts";
import { readPartitionFully, utf8, type DecodedRecord } from "../support/record-decoder.ts";
import { WireClient } from "../support/wire-client.ts";

const KILLS = Number(process.env.CRASH_KILLS ?? 30);
const SEED = envSeed("CRASH_SEED", 0xc4a5_1001);

const TOPICS = [
  { name: "crash-rolling", partitions: 3, configs: [{ name: "segment.bytes", value: String(64 * 1024) }] },
  { name: "crash-plain", partitions: 2, configs: [] },
] as const;
const CONNECTIONS = 3;
/** Load time between a restart and the next kill. */
const KILL_DELAY_MS = { min: 50, max: 400 };
const RECORDS_PER_BATCH = { min: 1, max: 20 };
/** Share of stops that are a clean SIGTERM (not counted as kills). */
const GRACEFUL_STOP_P = 0.1;
/** Share of restarts preceded by a start that is SIGKILLed 0-150 ms after the spawn (counted as a kill). */
const KILL_DURING_STARTUP_P = 0.2;
/** A request unanswered this long on a live broker is a failure (not a MAYBE). */
const REQUEST_TIMEOUT_MS = 30_000;

const clients: WireClient[] = [];
const fault = faultTestDir("bunka-crash-loop-", {
  cleanup: () => {
    for (const c of clients) c.close();
  },
});
const { dataDir, logFile } = fault;

// ---------------------------------------------------------------------------------------------
// What the generator sent

type BatchStatus = "inflight" | "acked" | "maybe";

interface SentBatch {
  firstSeq: number;
  count: number;
  status: BatchStatus;
  /** From the acknowledgement. */
  baseOffset?: number;
}

interface Lane {
  topic: string;
  partition: number;
  connection: number;
  nextSeq: number;
  batches: SentBatch[];
  /** One past the highest offset acknowledged so far. */
  ackedEnd: number;
  rng: ReturnType<typeof seededRandom>;
}

const keyOf = (topic: string, partition: number, seq: number) => `${topic}/${partition}/${seq}`;

/** The value is a function of the key, so that the read-back can check every byte. */
function valueOf(key: string): string {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619) >>> 0;
  const padding = 40 + (h % 400);
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let text = `${key}|`;
  for (let i = 0; i < padding; i++) text += alphabet[(h + i * 7) % alphabet.length];
  return text;
}

// ---------------------------------------------------------------------------------------------
// The broker and the connections to it, across restarts

let broker: BunkaProcess;
/** Resolves while the broker is up; replaced by a pending promise while it is down. */
let brokerUp: Promise<void> = Promise.resolve();
let markUp: () => void = () => {};
/** True from just before a stop until the restarted broker is checked: failures then are expected. */
let brokerDown = false;
let stopping = false;
const connections: (Promise<WireClient> | undefined)[] = [];

function markDown(): void {
  brokerDown = true;
  brokerUp = new Promise<void>((resolve) => (markUp = () => ((brokerDown = false), resolve())));
}

/** Connection i to the current broker, shared by the lanes that use it; reconnected after a restart. */
async function connection(i: number): Promise<WireClient> {
  const existing = connections[i];
  if (existing) {
    const client = await existing.catch(() => undefined);
    if (client && !client.isClosed) return client;
    if (connections[i] !== existing) return connection(i); // another lane is reconnecting already
  }
  const connecting = WireClient.connect(broker.port, "127.0.0.1", `crash-loop-${i}`);
  connections[i] = connecting;
  const client = await connecting;
  clients.push(client);
  return client;
}

async function startBroker(port = 0): Promise<BunkaProcess> {
  return await BunkaProcess.start(fault.startOptions(port));
}

const problems: string[] = [];
const errorCodes = new Map<number, number>();

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms))),
  ]);
}

/** Sends batch after batch to one partition, one in flight, until told to stop. */
async function runLane(lane: Lane): Promise<void> {
  while (!stopping) {
    await brokerUp;
    if (stopping) break;
    let client: WireClient;
    try {
      client = await connection(lane.connection);
    } catch {
      // The broker died between "up" and the connect: the next turn waits for its restart.
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    const count = lane.rng.int(RECORDS_PER_BATCH.min, RECORDS_PER_BATCH.max);
    const batch: SentBatch = { firstSeq: lane.nextSeq, count, status: "inflight" };
    const records = [];
    for (let i = 0; i < count; i++) {
      const key = keyOf(lane.topic, lane.partition, lane.nextSeq + i);
      records.push({ key, value: valueOf(key), timestampMs: Date.now() });
    }
    lane.nextSeq += count;
    lane.batches.push(batch);
    const request = client.request(0, 9, {
      transactionalId: null,
      acks: -1,
      timeoutMs: REQUEST_TIMEOUT_MS,
      topicData: [{ name: lane.topic, partitionData: [{ index: lane.partition, records: buildBatch({ records }) }] }],
    });
    try {
      const res = await withTimeout(request, REQUEST_TIMEOUT_MS, `produce to ${lane.topic}-${lane.partition}`);
      const answer = res.responses[0].partitionResponses[0];
      if (answer.errorCode === 0) {
        batch.status = "acked";
        batch.baseOffset = Number(answer.baseOffset);
        lane.ackedEnd = Math.max(lane.ackedEnd, batch.baseOffset + count);
      } else {
        // No error is expected at all; keep the batch as MAYBE so the read-back still accounts for it.
        batch.status = "maybe";
        errorCodes.set(answer.errorCode, (errorCodes.get(answer.errorCode) ?? 0) + 1);
      }
    } catch (error) {
      batch.status = "maybe";
      const message = (error as Error).message;
      if (message.startsWith("timeout")) {
        problems.push(`${message} (broker pid ${broker.pid} still running: ${broker.exitCode === undefined})`);
      } else if (!brokerDown) {
        problems.push(`produce to ${lane.topic}-${lane.partition} failed with no stop under way: ${message}`);
      }
    }
  }
}

/** Sizes of every segment file, by path. */
function segmentSizes(): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const dir of readdirSync(dataDir)) {
    if (dir.startsWith("__")) continue;
    const path = join(dataDir, dir);
    if (!statSync(path).isDirectory()) continue;
    for (const name of readdirSync(path)) if (name.endsWith(".log")) sizes.set(join(dir, name), statSync(join(path, name)).size);
  }
  return sizes;
}

async function latestOffsets(client: WireClient): Promise<Map<string, number>> {
  const res = await client.request(2, 7, {
    replicaId: -1,
    isolationLevel: 0,
    topics: TOPICS.map((t) => ({
      name: t.name,
      partitions: Array.from({ length: t.partitions }, (_, p) => ({ partitionIndex: p, currentLeaderEpoch: -1, timestamp: -1 })),
    })),
  });
  const out = new Map<string, number>();
  for (const t of res.topics) {
    for (const p of t.partitions) {
      if (p.errorCode !== 0) throw new Error(`ListOffsets ${t.name}-${p.partitionIndex}: error ${p.errorCode}`);
      out.set(`${t.name}-${p.partitionIndex}`, Number(p.offset));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Checking what was read against what was sent

interface LaneVerdict {
  acked: number;
  maybePresent: number;
  maybeAbsent: number;
  records: number;
}

function verifyLane(lane: Lane, records: DecodedRecord[], highWatermark: number): LaneVerdict {
  const where = `${lane.topic}-${lane.partition}`;
  const fail = (message: string): never => {
    throw new Error(`${where}: ${message} (seed ${SEED})`);
  };
  const seen = new Map<number, number>(); // seq -> offset
  let previousSeq = -1;
  records.forEach((record, i) => {
    if (record.offset !== i) fail(`offset ${record.offset} where ${i} was expected: the log has a hole or an overlap`);
    const key = utf8(record.key);
    const match = key === null ? null : /^(.+)\/(\d+)\/(\d+)$/.exec(key);
    if (match === null || match[1] !== lane.topic || Number(match[2]) !== lane.partition) {
      fail(`unknown record at offset ${record.offset}: key ${key}`);
    }
    const seq = Number(match![3]);
    if (seq >= lane.nextSeq) fail(`record ${key} at offset ${record.offset} was never sent`);
    if (utf8(record.value) !== valueOf(key!)) fail(`record ${key} at offset ${record.offset} has a value that was never sent`);
    if (seen.has(seq)) fail(`record ${key} appears twice, at offsets ${seen.get(seq)} and ${record.offset}`);
    if (seq <= previousSeq) fail(`record ${key} at offset ${record.offset} comes after sequence ${previousSeq}: out of send order`);
    seen.set(seq, record.offset);
    previousSeq = seq;
  });
  if (records.length !== highWatermark) fail(`read ${records.length} records below the high watermark ${highWatermark}`);

  const verdict: LaneVerdict = { acked: 0, maybePresent: 0, maybeAbsent: 0, records: records.length };
  for (const batch of lane.batches) {
    const offsets = Array.from({ length: batch.count }, (_, i) => seen.get(batch.firstSeq + i));
    const present = offsets.filter((o) => o !== undefined).length;
    const name = `batch ${keyOf(lane.topic, lane.partition, batch.firstSeq)} x${batch.count} (${batch.status})`;
    if (present !== 0 && present !== batch.count) fail(`${name} is partly there: ${present} of ${batch.count} records`);
    if (batch.status === "inflight") fail(`${name} never finished`);
    if (batch.status === "acked") {
      verdict.acked++;
      if (present === 0) fail(`${name} was acknowledged at offset ${batch.baseOffset} but is missing`);
      if (offsets[0] !== batch.baseOffset) fail(`${name} was acknowledged at offset ${batch.baseOffset} but is at ${offsets[0]}`);
    } else if (present > 0) {
      verdict.maybePresent++;
    } else {
      verdict.maybeAbsent++;
    }
  }
  return verdict;
}

// ---------------------------------------------------------------------------------------------

test.skipIf(!CAN_RUN_BINARY)(
  `acks=-1 records survive ${KILLS} SIGKILLs exactly once and in order (seed ${SEED})`,
  () => withBrokerLog(logFile, async () => {
    const startedMs = Date.now();
    console.log(`crash-loop: seed ${SEED} (CRASH_SEED), ${KILLS} kills (CRASH_KILLS)`);
    const rng = seededRandom(SEED);

    broker = await startBroker();
    const admin = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-admin");
    const created = await admin.request(19, 7, {
      topics: TOPICS.map((t) => ({ name: t.name, numPartitions: t.partitions, replicationFactor: 1, assignments: [], configs: t.configs })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    for (const t of created.topics) expect({ topic: t.name, errorCode: t.errorCode }).toEqual({ topic: t.name, errorCode: 0 });
    admin.close();

    const lanes: Lane[] = [];
    for (const t of TOPICS) {
      for (let p = 0; p < t.partitions; p++) {
        lanes.push({
          topic: t.name,
          partition: p,
          connection: lanes.length % CONNECTIONS,
          nextSeq: 0,
          batches: [],
          ackedEnd: 0,
          rng: seededRandom((SEED ^ Math.imul(lanes.length + 1, 0x9e3779b1)) >>> 0),
        });
      }
    }
    const running = lanes.map((lane) => runLane(lane));

    let tornTails = 0;
    let bindRetries = 0;
    let kills = 0;
    let gracefulStops = 0;
    let killsDuringStartup = 0;
    const startupMs: number[] = [];
    for (let round = 1; kills < KILLS; round++) {
      await new Promise((r) => setTimeout(r, rng.int(KILL_DELAY_MS.min, KILL_DELAY_MS.max)));
      // What was acknowledged before the stop must still be there after it.
      const ackedBefore = new Map(lanes.map((l) => [`${l.topic}-${l.partition}`, l.ackedEnd]));
      markDown();
      // Now and then a clean stop, so that kills also land on logs opened from a clean-shutdown checkpoint.
      const graceful = rng.next() < GRACEFUL_STOP_P || round === 2;
      await stopBroker(broker, graceful, logFile, `round ${round}: `);
      if (graceful) gracefulStops++;
      else kills++;
      const sizesAfterStop = segmentSizes();

      if (rng.next() < KILL_DURING_STARTUP_P) {
        // A crash in the middle of recovery must leave a directory the next start recovers.
        await killDuringStartup(fault.startOptions(broker.port), rng.int(0, 150), `round ${round}: `);
        killsDuringStartup++;
        kills++;
      }

      // Throws, with the broker's stderr, if recovery refuses the directory.
      broker = await startBroker(broker.port);
      startupMs.push(broker.startupMs);
      bindRetries += broker.bindAttempts - 1;
      for (const [file, size] of segmentSizes()) {
        const before = sizesAfterStop.get(file);
        if (before !== undefined && size < before) {
          tornTails++;
          console.log(`crash-loop: round ${round}: recovery truncated ${file} from ${before} to ${size} bytes`);
        }
      }
      const check = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-check");
      clients.push(check);
      const ends = await latestOffsets(check);
      check.close();
      for (const [partition, acked] of ackedBefore) {
        if ((ends.get(partition) ?? -1) < acked) {
          throw new Error(
            `after round ${round}: ${partition} ends at ${ends.get(partition)}, but offsets below ${acked} were acknowledged (seed ${SEED})`,
          );
        }
      }
      markUp();
    }

    // Stop the load; every request still in flight completes on the live broker.
    stopping = true;
    await Promise.all(running);
    expect(problems).toEqual([]);

    const reader = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-reader");
    clients.push(reader);
    const readAll = async (client: WireClient) =>
      await Promise.all(lanes.map(async (lane) => ({ lane, contents: await readPartitionFully(client, lane.topic, lane.partition) })));
    const live = await readAll(reader);
    reader.close();

    const totals = { acked: 0, maybePresent: 0, maybeAbsent: 0, records: 0 };
    for (const { lane, contents } of live) {
      expect(contents.logStartOffset).toBe(0);
      const verdict = verifyLane(lane, contents.records, contents.highWatermark);
      for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += verdict[k];
    }

    // One more kill with nothing in flight: everything was acknowledged (durable), so nothing may change.
    await broker.kill("SIGKILL");
    broker = await startBroker(broker.port);
    const after = await WireClient.connect(broker.port, "127.0.0.1", "crash-loop-reader-2");
    clients.push(after);
    const again = await readAll(after);
    after.close();
    for (let i = 0; i < live.length; i++) {
      const a = live[i]!.contents;
      const b = again[i]!.contents;
      const where = `${live[i]!.lane.topic}-${live[i]!.lane.partition}`;
      expect({ where, highWatermark: b.highWatermark }).toEqual({ where, highWatermark: a.highWatermark });
      expect(b.records.map((r) => utf8(r.key))).toEqual(a.records.map((r) => utf8(r.key)));
    }

    // Apache's console consumer (partition mode, no consumer group) reads the same records.
    const rolling = live.find((l) => l.lane.topic === "crash-rolling" && l.lane.partition === 0)!;
    const expectedCount = rolling.contents.records.length;
    const consumed = await runKafkaTool(
      "kafka-console-consumer",
      [
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "crash-rolling",
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        String(expectedCount),
        "--timeout-ms",
        "30000",
        "--property",
        "print.key=true",
      ],
      { timeoutMs: 90_000 },
    );
    const lines = consumed.stdout.split("\n").filter((l) => l.length > 0);
    if (lines.length !== expectedCount) {
      throw new Error(
        `console consumer read ${lines.length} of ${expectedCount} records (exit ${consumed.code}):\n${consumed.stderr.slice(-3000)}`,
      );
    }
    expect(lines.map((l) => l.split("\t")[0])).toEqual(rolling.contents.records.map((r) => utf8(r.key)!));
    expect(lines.map((l) => l.slice(l.indexOf("\t") + 1))).toEqual(rolling.contents.records.map((r) => utf8(r.value)!));

    const segments = segmentSizes();
    const rollingSegments = [...segments.keys()].filter((f) => f.startsWith("crash-rolling-")).length;
    const stderr = readFileSync(logFile, "utf8");
    const fatal = stderr.split("\n").filter((l) => /fatal|uncaught|corrupt/i.test(l));
    console.log(
      `crash-loop: ${kills + 1} kills (${killsDuringStartup} during start-up), ${gracefulStops} clean stops, ` +
        `${totals.records} records read (${totals.acked} acked batches, ` +
        `${totals.maybePresent} unacknowledged batches kept, ${totals.maybeAbsent} lost with their connection), ` +
        `${rollingSegments} segments in crash-rolling, ${tornTails} torn tails truncated, ${bindRetries} bind retries, ` +
        `start-up ${Math.min(...startupMs)}-${Math.max(...startupMs)} ms, error answers ${JSON.stringify([...errorCodes])}, ` +
        `${((Date.now() - startedMs) / 1000).toFixed(1)} s`,
    );
    expect(fatal).toEqual([]);
    expect([...errorCodes]).toEqual([]);
    expect(totals.acked).toBeGreaterThan(KILLS);
    expect(rollingSegments).toBeGreaterThan(TOPICS[0].partitions);
  }),
  600_000,
);
