/**
 * Idempotent producers across broker crashes: the compiled binary is SIGKILLed several
 * times (seeded delays) and restarted on the same data directory and port while two real idempotent
 * producers write to it at the same time:
 *   (a) Apache's Java producer, through kafka-producer-perf-test (enable.idempotence=true, acks=all,
 *       retries=MAX, delivery.timeout.ms=120000), 20,000 records whose values are 0, 1, 2, ...
 *       (--payload-monotonic: a --payload-file payload is picked at random per record, so its content
 *       could not be checked for exactly-once);
 *   (b) librdkafka through confluent-kafka (tests/fault/python/idempotent_producer.py), 20,000 records
 *       "py-000000", "py-000001", ... with a delivery report (offset) for each.
 * Each retry of a batch whose acknowledgement died with the broker must be answered from the rebuilt
 * producer state (snapshot + log) as a duplicate, never written twice and never refused as out of order.
 * A quarter of the stops are clean (SIGTERM), which writes producer-state snapshots, so that later kills
 * rebuild from a snapshot plus the log after it; some restarts are killed during start-up.
 *
 * Then, with raw Fetch: every acknowledged record is present exactly once, in send order per partition,
 * at the offset its delivery report named (librdkafka), written by an idempotent producer (producer id
 * set, contiguous sequences per producer id and epoch). Neither client may fail: both exit 0, every
 * record is acknowledged, and neither reports a fatal or sequence error (OutOfOrderSequence,
 * UNKNOWN_PRODUCER_ID, a fatal librdkafka error).
 *
 *   IDEMPOTENT_KILLS=30 IDEMPOTENT_RECORDS=60000 bun test tests/fault/idempotent-crash.test.ts
 *                                       # more kills (default 8; kills stop when both clients are done)
 *   CRASH_SEED=1234 ...                                                  # another seed ("random" picks one)
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runKafkaTool, type ToolResult } from "../support/apache-kafka.ts";
import { BunkaProcess, CAN_RUN_BINARY, withBrokerLog } from "../support/binary.ts";
import { faultTestDir, killDuringStartup, stopBroker } from "../support/fault-support.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { seededRandom } from "../support/random.ts";
import { readPartitionFully, utf8, type PartitionContents } from "../support/record-decoder.ts";
import { WireClient } from "../support/wire-client.ts";

const KILLS = Number(process.env.IDEMPOTENT_KILLS ?? 8);
const SEED = envSeed("CRASH_SEED", 0x1de4_0005);
const RECORDS = Number(process.env.IDEMPOTENT_RECORDS ?? 20_000);
const RATE_PER_S = 2_000;
/** Time between a restart and the next kill. */
const KILL_DELAY_MS = { min: 300, max: 1_500 };
/** Share of stops that are a clean SIGTERM (not counted as kills): they write producer-state snapshots. */
const GRACEFUL_STOP_P = 0.25;
/** Share of restarts preceded by a start that is SIGKILLed 0-150 ms after the spawn (counted as a kill). */
const KILL_DURING_STARTUP_P = 0.2;
const JAVA_TOPIC = { name: "idem-java", partitions: 2 };
const PY_TOPIC = { name: "idem-librdkafka", partitions: 3 };
const PY_DRIVER = join(import.meta.dir, "python/idempotent_producer.py");
/** Messages that mean a client met a sequence or producer-id error it should never meet here. */
const SEQUENCE_TROUBLE = new RegExp(
  [
    "OutOfOrderSequence",
    "OUT_OF_ORDER_SEQUENCE",
    "UnknownProducerId",
    "UNKNOWN_PRODUCER_ID",
    "InvalidProducerEpoch",
    "INVALID_PRODUCER_EPOCH",
    "DuplicateSequence",
    "DUPLICATE_SEQUENCE",
    "fatal",
  ].join("|"),
  "i",
);

const children = new Set<Bun.Subprocess>();
const fault = faultTestDir("bunka-idempotent-crash-", {
  setup: async () => {
    if (!existsSync(VENV_PYTHON)) await ensureInteropClients();
  },
  cleanup: async () => {
    for (const child of children) child.kill("SIGKILL");
    await Promise.all([...children].map((c) => c.exited));
  },
});
const { tmpRoot, logFile } = fault;

async function runPythonProducer(bootstrap: string, out: string): Promise<ToolResult> {
  const proc = Bun.spawn(
    [
      VENV_PYTHON,
      PY_DRIVER,
      ...["--bootstrap", bootstrap, "--topic", PY_TOPIC.name, "--count", String(RECORDS), "--rate", String(RATE_PER_S), "--out", out],
    ],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  children.add(proc);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 200_000);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
    children.delete(proc);
  }
}

async function createTopics(port: number): Promise<void> {
  const admin = await WireClient.connect(port, "127.0.0.1", "idempotent-crash-admin");
  try {
    const created = await admin.request(19, 7, {
      topics: [JAVA_TOPIC, PY_TOPIC].map((t) => ({
        name: t.name,
        numPartitions: t.partitions,
        replicationFactor: 1,
        assignments: [],
        configs: [],
      })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    for (const t of created.topics) expect({ topic: t.name, errorCode: t.errorCode }).toEqual({ topic: t.name, errorCode: 0 });
  } finally {
    admin.close();
  }
}

async function readTopic(port: number, topic: { name: string; partitions: number }): Promise<PartitionContents[]> {
  const client = await WireClient.connect(port, "127.0.0.1", "idempotent-crash-reader");
  try {
    const out: PartitionContents[] = [];
    for (let p = 0; p < topic.partitions; p++) out.push(await readPartitionFully(client, topic.name, p));
    return out;
  } finally {
    client.close();
  }
}

interface TopicCheck {
  /** value index -> [partition, offset] */
  where: Map<number, [number, number]>;
  producerIds: Set<string>;
}

/**
 * Checks a topic written by one idempotent producer whose record i has a value that `indexOf` maps back
 * to i: each index at most once, increasing within each partition, contiguous offsets, idempotent
 * batches with contiguous sequences per (producer id, epoch).
 */
function checkTopic(name: string, partitions: PartitionContents[], indexOf: (value: string) => number | undefined): TopicCheck {
  const where = new Map<number, [number, number]>();
  const producerIds = new Set<string>();
  partitions.forEach((contents, partition) => {
    const at = `${name}-${partition}`;
    expect({ at, logStartOffset: contents.logStartOffset }).toEqual({ at, logStartOffset: 0 });
    expect({ at, records: contents.records.length }).toEqual({ at, records: contents.highWatermark });
    let previous = -1;
    contents.records.forEach((record, i) => {
      if (record.offset !== i) throw new Error(`${at}: offset ${record.offset} where ${i} was expected`);
      const value = utf8(record.value) ?? "";
      const index = indexOf(value);
      if (index === undefined) throw new Error(`${at}: unknown value ${JSON.stringify(value)} at offset ${record.offset}`);
      const seen = where.get(index);
      if (seen) throw new Error(`${at}: record ${index} appears twice: ${name}-${seen[0]}@${seen[1]} and offset ${record.offset}`);
      if (index <= previous) throw new Error(`${at}: record ${index} at offset ${record.offset} comes after record ${previous}: out of order`);
      where.set(index, [partition, record.offset]);
      previous = index;
    });
    const nextSequence = new Map<string, number>();
    for (const { header } of contents.batches) {
      if (header.producerId < 0) throw new Error(`${at}: batch at offset ${header.baseOffset} was not written by an idempotent producer`);
      producerIds.add(`${header.producerId}`);
      const session = `${header.producerId}/${header.producerEpoch}`;
      const expected = nextSequence.get(session);
      // A new session (producer id or epoch) may start anywhere; within one, sequences are contiguous.
      if (expected !== undefined && header.baseSequence !== expected) {
        throw new Error(`${at}: batch at offset ${header.baseOffset} of ${session} has sequence ${header.baseSequence}, expected ${expected}`);
      }
      nextSequence.set(session, header.baseSequence + header.lastOffsetDelta + 1);
    }
  });
  return { where, producerIds };
}

function stderrTrouble(text: string): string[] {
  return text.split("\n").filter((line) => SEQUENCE_TROUBLE.test(line));
}

test.skipIf(!CAN_RUN_BINARY)(
  `Java and librdkafka idempotent producers survive ${KILLS} SIGKILLs with every record exactly once (seed ${SEED})`,
  () => withBrokerLog(logFile, async () => {
    const startedMs = Date.now();
    console.log(`idempotent-crash: seed ${SEED} (CRASH_SEED), ${KILLS} kills (IDEMPOTENT_KILLS)`);
    const rng = seededRandom(SEED);
    let broker = await BunkaProcess.start(fault.startOptions());
    const port = broker.port;
    const bootstrap = `127.0.0.1:${port}`;
    await createTopics(port);

    const pyReport = join(tmpRoot, "librdkafka-report.json");
    let javaDone = false;
    let pyDone = false;
    const java = runKafkaTool(
      "kafka-producer-perf-test",
      [
        "--topic",
        JAVA_TOPIC.name,
        "--num-records",
        String(RECORDS),
        "--throughput",
        String(RATE_PER_S),
        "--payload-monotonic",
        "--producer-props",
        `bootstrap.servers=${bootstrap}`,
        "enable.idempotence=true",
        "acks=all",
        "retries=2147483647",
        "delivery.timeout.ms=120000",
        "max.in.flight.requests.per.connection=5",
        // The broker is back within a second; do not wait longer than that between connection attempts.
        "reconnect.backoff.max.ms=1000",
        "client.id=bunka-fault-java",
      ],
      { timeoutMs: 200_000 },
    ).finally(() => (javaDone = true));
    const python = runPythonProducer(bootstrap, pyReport).finally(() => (pyDone = true));
    const bothDone = Promise.all([java, python]);

    // Kill while either client is still producing; never leave the broker down at the end.
    let kills = 0;
    let gracefulStops = 0;
    let killsDuringStartup = 0;
    let stops = 0;
    const startupMs: number[] = [];
    while (kills < KILLS && !(javaDone && pyDone)) {
      const delay = rng.int(KILL_DELAY_MS.min, KILL_DELAY_MS.max);
      await Promise.race([new Promise((r) => setTimeout(r, delay)), bothDone]);
      if (javaDone && pyDone) break;
      // The second stop is always clean, whatever the seed: CI must cover a rebuild from snapshot + log.
      stops++;
      // A clean stop writes the producer-state snapshot: the kills after it rebuild from snapshot + log.
      const graceful = rng.next() < GRACEFUL_STOP_P || stops === 2;
      await stopBroker(broker, graceful, logFile);
      if (graceful) gracefulStops++;
      else kills++;
      if (rng.next() < KILL_DURING_STARTUP_P) {
        await killDuringStartup(fault.startOptions(port), rng.int(0, 150));
        killsDuringStartup++;
        kills++;
      }
      // Throws, with the broker's stderr, if recovery refuses the directory.
      broker = await BunkaProcess.start(fault.startOptions(port));
      startupMs.push(broker.startupMs);
    }
    const [javaResult, pyResult] = await bothDone;
    const clientsMs = Date.now() - startedMs;

    // (a) Java: exit 0, every record acknowledged, no sequence trouble.
    // The last "records sent" line is the summary (the earlier ones are per-window progress).
    const javaSummary = [...javaResult.stdout.matchAll(/^(\d+) records sent, [^\n]*$/gm)].at(-1) ?? null;
    // printStackTrace() output: an exception's class name at the start of a line, then "\tat ..." frames.
    const stackTraces = javaResult.stderr.split("\n").filter((l) => /^\S+(Exception|Error)\b|^\tat /.test(l));
    const javaTrouble = stderrTrouble(javaResult.stderr).concat(stackTraces);
    if (javaResult.code !== 0 || javaSummary === null || Number(javaSummary[1]) !== RECORDS || javaTrouble.length > 0) {
      throw new Error(
        `Java producer: exit ${javaResult.code}, summary ${javaSummary?.[0]}, trouble:\n${javaTrouble.slice(0, 20).join("\n")}\n` +
          `stderr tail:\n${javaResult.stderr.slice(-3000)}`,
      );
    }

    // (b) librdkafka: exit 0, every record delivered, no fatal error, no sequence trouble.
    const report = JSON.parse(readFileSync(pyReport, "utf8")) as {
      delivered: number;
      failed: { index: number; error: string }[];
      fatal: string | null;
      errors: string[];
      undelivered_after_flush: number;
      reports: [number, number, number][];
    };
    const pyTrouble = stderrTrouble(pyResult.stderr).concat(report.errors.filter((e) => SEQUENCE_TROUBLE.test(e)));
    if (pyResult.code !== 0 || report.fatal !== null || report.failed.length > 0 || report.delivered !== RECORDS || pyTrouble.length > 0) {
      throw new Error(
        `librdkafka producer: exit ${pyResult.code}, ${report.delivered} delivered, fatal ${report.fatal}, ` +
          `failed ${JSON.stringify(report.failed.slice(0, 5))}, trouble:\n${pyTrouble.slice(0, 20).join("\n")}\n` +
          `stdout: ${pyResult.stdout}\nstderr tail:\n${pyResult.stderr.slice(-3000)}`,
      );
    }

    // Read everything back from the broker as it is now (restarted after the last kill).
    const javaCheck = checkTopic(JAVA_TOPIC.name, await readTopic(port, JAVA_TOPIC), (value) =>
      /^\d+$/.test(value) ? Number(value) : undefined,
    );
    expect(javaCheck.where.size).toBe(RECORDS);
    for (let i = 0; i < RECORDS; i++) if (!javaCheck.where.has(i)) throw new Error(`Java record ${i} was acknowledged but is missing`);

    const pyCheck = checkTopic(PY_TOPIC.name, await readTopic(port, PY_TOPIC), (value) => {
      const m = /^py-(\d{6})$/.exec(value);
      return m ? Number(m[1]) : undefined;
    });
    expect(pyCheck.where.size).toBe(RECORDS);
    for (const [index, partition, offset] of report.reports) {
      const at = pyCheck.where.get(index);
      if (at === undefined) {
        throw new Error(`librdkafka record ${index} was acknowledged at ${PY_TOPIC.name}-${partition}@${offset} but is missing`);
      }
      if (at[0] !== partition || at[1] !== offset) {
        throw new Error(`librdkafka record ${index} was acknowledged at ${PY_TOPIC.name}-${partition}@${offset} but is at ${at[0]}@${at[1]}`);
      }
    }

    const brokerLog = readFileSync(logFile, "utf8");
    expect(brokerLog.split("\n").filter((l) => /fatal|uncaught|corrupt/i.test(l))).toEqual([]);
    console.log(
      `idempotent-crash: ${kills} kills (${killsDuringStartup} during start-up), ${gracefulStops} clean stops, ` +
        `start-up ${Math.min(...startupMs)}-${Math.max(...startupMs)} ms; ` +
        `Java ${javaSummary[0].split(",")[0]} with producer ids ${[...javaCheck.producerIds].join(",")}; ` +
        `librdkafka ${report.delivered} delivered with producer ids ${[...pyCheck.producerIds].join(",")}, ` +
        `${report.errors.length} non-fatal client errors; clients done after ${(clientsMs / 1000).toFixed(1)} s, ` +
        `total ${((Date.now() - startedMs) / 1000).toFixed(1)} s`,
    );
    expect(kills).toBeGreaterThanOrEqual(Math.min(KILLS, 3));
  }),
  600_000,
);
