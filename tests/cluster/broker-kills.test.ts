/**
 * Broker kills in a three-broker cluster (tests/support/bunka-cluster.ts). Two idempotent producers (acks=all)
 * write numbered sequences, bootstrapped from every broker: Apache's Java producer (kafka-producer-perf-test
 * --payload-monotonic, values 0, 1, 2, ...) and librdkafka (tests/fault/python/idempotent_producer.py, values
 * py-000000, ... with a delivery report per record). Meanwhile a seeded random broker is SIGKILLed and started
 * again every few seconds: its partitions wait for its lease to expire, move to the survivors (recovered at
 * a new leader epoch), and part of them move back once it is registered again. Afterwards every acknowledged
 * record is present exactly once, in send order per partition, at the offset its report named (librdkafka),
 * and neither client met a sequence or producer-id error.
 *
 *   CLUSTER_KILLS=20 bun test --timeout 900000 tests/cluster/broker-kills.test.ts      (more kills; default 6)
 *   CLUSTER_SEED=1234 ...                                                                (another seed; "random")
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { readIdempotentReport, sequenceProblems, startIdempotentProducer } from "../support/cluster-clients.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { seededRandom } from "../support/random.ts";
import { utf8 } from "../support/record-decoder.ts";

const KILLS = Number(process.env.CLUSTER_KILLS ?? 6);
const SEED = envSeed("CLUSTER_SEED", 0xc1a5_7e01);
const RATE_PER_S = 1000;
/** Enough records for the kills: each kill takes about the lease TTL plus a restart. */
const RECORDS = Number(process.env.CLUSTER_RECORDS ?? Math.max(20_000, KILLS * 5 * RATE_PER_S));
/** Between a restarted broker's return to a balanced cluster and the next kill. */
const KILL_GAP_MS = { min: 500, max: 2500 };
const JAVA_TOPIC = { name: "kill-java", partitions: 3 };
const PY_TOPIC = { name: "kill-rdk", partitions: 6 };
const SEQUENCE_TROUBLE = /OutOfOrderSequence|OUT_OF_ORDER_SEQUENCE|UnknownProducerId|UNKNOWN_PRODUCER_ID|InvalidProducerEpoch|INVALID_PRODUCER_EPOCH|DuplicateSequence|DUPLICATE_SEQUENCE|fatal/i;

let cluster: BunkaCluster;

beforeAll(async () => {
  await ensureInteropClients();
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
}, 180_000);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

test(`Java and librdkafka idempotent producers while a random broker is SIGKILLed ${KILLS} times: every acknowledged record once, in order (seed ${SEED})`, async () => {
  await cluster.withLogs(async () => {
    const rng = seededRandom(SEED);
    for (const t of [JAVA_TOPIC, PY_TOPIC]) await cluster.createTopic(t.name, t.partitions);
    await cluster.waitForBalanced([JAVA_TOPIC.name, PY_TOPIC.name]);
    const startedMs = Date.now();

    const pyOut = join(cluster.dir, "librdkafka-report.json");
    const py = startIdempotentProducer(cluster.bootstrap, PY_TOPIC.name, RECORDS, RATE_PER_S, pyOut);
    let javaDone = false;
    const java = runKafkaTool(
      "kafka-producer-perf-test",
      [
        "--topic", JAVA_TOPIC.name,
        "--num-records", String(RECORDS),
        "--throughput", String(RATE_PER_S),
        "--payload-monotonic",
        "--producer-props",
        `bootstrap.servers=${cluster.bootstrap}`,
        "enable.idempotence=true",
        "acks=all",
        "retries=2147483647",
        "delivery.timeout.ms=120000",
        "max.in.flight.requests.per.connection=5",
        "reconnect.backoff.max.ms=1000",
      ],
      { timeoutMs: 400_000 },
    ).finally(() => (javaDone = true));

    let kills = 0;
    const restartMs: number[] = [];
    while (kills < KILLS || (!javaDone && !py.done)) {
      if (javaDone && py.done) break;
      await new Promise((resolve) => setTimeout(resolve, rng.int(KILL_GAP_MS.min, KILL_GAP_MS.max)));
      const victim = rng.pick(cluster.liveIds());
      await cluster.kill(victim, "SIGKILL");
      kills++;
      const t0 = Date.now();
      await cluster.restart(victim);
      await cluster.waitForBalanced([JAVA_TOPIC.name, PY_TOPIC.name], { timeoutMs: 45_000 });
      restartMs.push(Date.now() - t0);
    }
    expect(kills).toBeGreaterThanOrEqual(KILLS);

    const javaResult = await java;
    expect(await py.exitWithin(300_000), py.output()).toBe(0);
    const javaSummary = [...javaResult.stdout.matchAll(/^(\d+) records sent, [^\n]*$/gm)].at(-1);
    const javaTrouble = javaResult.stderr.split("\n").filter((l) => SEQUENCE_TROUBLE.test(l) || /^\S+(Exception|Error)\b/.test(l));
    expect({ code: javaResult.code, sent: javaSummary?.[1], trouble: javaTrouble.slice(0, 10) }).toEqual({ code: 0, sent: String(RECORDS), trouble: [] });
    const report = readIdempotentReport(pyOut);
    expect({ delivered: report.delivered, failed: report.failed.slice(0, 5), fatal: report.fatal, trouble: report.errors.filter((e) => SEQUENCE_TROUBLE.test(e)) }).toEqual({
      delivered: RECORDS,
      failed: [],
      fatal: null,
      trouble: [],
    });

    const read = async (topic: { name: string; partitions: number }) => {
      const out = new Map<number, { offset: number; value: string | null }[]>();
      for (let p = 0; p < topic.partitions; p++) {
        const contents = await cluster.readPartition(topic.name, p);
        expect(contents.records.map((r) => r.offset)).toEqual(Array.from({ length: contents.highWatermark - contents.logStartOffset }, (_, i) => contents.logStartOffset + i));
        out.set(p, contents.records.map((r) => ({ offset: r.offset, value: utf8(r.value) })));
      }
      return out;
    };
    // Java: every record 0..RECORDS-1 was acknowledged (the summary counts acknowledgements); its partition is not reported.
    const javaRecords = await read(JAVA_TOPIC);
    const javaPartitionOf = new Map<number, number>();
    for (const [p, records] of javaRecords) for (const r of records) if (/^\d+$/.test(r.value ?? "")) javaPartitionOf.set(Number(r.value), p);
    const javaAcked = new Map(Array.from({ length: RECORDS }, (_, i) => [i, { partition: javaPartitionOf.get(i) ?? -1 }] as const));
    expect(sequenceProblems(javaRecords, (v) => (/^\d+$/.test(v ?? "") ? Number(v) : undefined), javaAcked).slice(0, 20)).toEqual([]);
    const pyAcked = new Map(report.reports.map(([i, partition, offset]) => [i, { partition, offset }] as const));
    expect(sequenceProblems(await read(PY_TOPIC), (v) => (/^py-\d{6}$/.test(v ?? "") ? Number(v!.slice(3)) : undefined), pyAcked).slice(0, 20)).toEqual([]);
    for (const [p, records] of javaRecords) expect(records.length, `${JAVA_TOPIC.name}-${p}`).toBeGreaterThan(0);

    console.log(
      `broker-kills: seed ${SEED}, ${kills} kills, restart to balanced ${Math.min(...restartMs)}-${Math.max(...restartMs)} ms, ` +
        `${RECORDS} records each, ${(Date.now() - startedMs) / 1000} s`,
    );
  });
}, 600_000);
