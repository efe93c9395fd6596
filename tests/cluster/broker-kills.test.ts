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
 * Then EOS copiers, one client at a time: Apache's Java clients (tests/interop/java/EosCopier.java: a
 * read_committed consumer in a group with static membership and a transactional producer committing the
 * consumed offsets, 50 records per transaction), librdkafka (tests/interop/python/eos_copier.py) and franz-go
 * (tests/interop/go/eoscopier, a GroupTransactSession), each copies a numbered input topic to an output topic while brokers are SIGKILLed the same way: coordinators of
 * its group and transactional id move with their slots, partitions with their leaders. When the group's
 * committed offsets (OffsetFetch require_stable, from the group's coordinator) reach the input's end, the
 * output read read_committed (the Java consumer) holds every input record exactly once, transformed, in
 * input order per partition, and nothing else. A copier that exits on its own (fatal error) is a failure; a librdkafka copier that hangs is restarted
 * (LIBRDKAFKA_STALL_MS).
 *
 *   CLUSTER_KILLS=20 CLUSTER_EOS_KILLS=20 bun test --timeout 1800000 tests/cluster/broker-kills.test.ts
 *                                                (the long version: 20 kills per run; default 6 and 3)
 *   CLUSTER_SEED=1234 ...                                                                (another seed; "random")
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { runKafkaTool } from "../support/apache-kafka.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { compileJavaPrograms, JavaChild, ok, readIdempotentReport, runJava, sequenceProblems, startIdempotentProducer } from "../support/cluster-clients.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { ensureInteropClients, goHelper, VENV_PYTHON } from "../support/interop-clients.ts";
import { killLiveChildren, LineChild } from "../support/line-child.ts";
import { seededRandom } from "../support/random.ts";
import { utf8 } from "../support/record-decoder.ts";

const KILLS = Number(process.env.CLUSTER_KILLS ?? 6);
const SEED = envSeed("CLUSTER_SEED", 0xc1a5_7e01);
const RATE_PER_S = 1000;
/** Enough records for the kills: each takes a gap, the lease TTL and a restart (3.5-6 s seen on a busy machine). */
const RECORDS = Number(process.env.CLUSTER_RECORDS ?? Math.max(20_000, KILLS * 7 * RATE_PER_S));
/** Between a restarted broker's return to a balanced cluster and the next kill. */
const KILL_GAP_MS = { min: 500, max: 2500 };
const JAVA_TOPIC = { name: "kill-java", partitions: 3 };
const PY_TOPIC = { name: "kill-rdk", partitions: 6 };
const SEQUENCE_TROUBLE = /OutOfOrderSequence|OUT_OF_ORDER_SEQUENCE|UnknownProducerId|UNKNOWN_PRODUCER_ID|InvalidProducerEpoch|INVALID_PRODUCER_EPOCH|DuplicateSequence|DUPLICATE_SEQUENCE|fatal/i;

/** The Java producer's line for a sequence error it resends: "..., retrying (N attempts left). Error: OUT_OF_ORDER_SEQUENCE_NUMBER". */
const RETRIED_OUT_OF_ORDER = /retrying \(\d+ attempts left\)\. Error: OUT_OF_ORDER_SEQUENCE_NUMBER/;

let cluster: BunkaCluster;

beforeAll(async () => {
  await Promise.all([ensureInteropClients(), compileJavaPrograms(["EosCopier", "ReadCommittedCheck"])]);
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
    expect({ code: javaResult.code, sent: javaSummary?.[1] }).toEqual({ code: 0, sent: String(RECORDS) });
    const report = readIdempotentReport(pyOut);
    expect({ delivered: report.delivered, failed: report.failed.slice(0, 5), fatal: report.fatal }).toEqual({ delivered: RECORDS, failed: [], fatal: null });

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

    // The records decide first; then what the clients said on the way. A sequence error the client retried is
    // the protocol at work, not trouble: a batch sent to the new leader while earlier ones were still in
    // flight to the killed one is answered OUT_OF_ORDER_SEQUENCE_NUMBER (as Apache Kafka answers it), and the
    // client resends it after them. Any other sequence or producer error, or one not retried, is trouble.
    const javaTrouble = javaResult.stderr
      .split("\n")
      .filter((l) => (SEQUENCE_TROUBLE.test(l) && !RETRIED_OUT_OF_ORDER.test(l)) || /^\S+(Exception|Error)\b/.test(l));
    const retried = javaResult.stderr.split("\n").filter((l) => RETRIED_OUT_OF_ORDER.test(l));
    if (retried.length > 0) console.log(`broker-kills: the Java producer resent ${retried.length} batches answered OUT_OF_ORDER_SEQUENCE_NUMBER, e.g. ${retried[0]}`);
    expect(javaTrouble.slice(0, 10)).toEqual([]);
    expect(report.errors.filter((e) => SEQUENCE_TROUBLE.test(e))).toEqual([]);

    console.log(
      `broker-kills: seed ${SEED}, ${kills} kills, restart to balanced ${Math.min(...restartMs)}-${Math.max(...restartMs)} ms, ` +
        `${RECORDS} records each, ${(Date.now() - startedMs) / 1000} s`,
    );
  });
}, 600_000);

const EOS_KILLS = Number(process.env.CLUSTER_EOS_KILLS ?? 3);
const EOS_RATE_PER_S = 200;
/** Enough input to outlast the kills (each takes a gap, the lease TTL and a restart). */
const EOS_RECORDS = Math.max(3000, EOS_KILLS * 7 * EOS_RATE_PER_S);

type CopierClient = "java" | "librdkafka" | "franz-go";

/**
 * librdkafka's send_offsets_to_transaction can block past its timeout, and for good, while the group
 * coordinator it has cached is gone (a known librdkafka bug, open upstream, reproduced there on its mock
 * cluster; seen here once in CI after a kill, the copier silent for two minutes in one transaction). A
 * librdkafka copier that has printed nothing for this long while input is left is SIGKILLed and started again
 * with the same transactional.id, as a supervisor would restart a hung process: the new one fences the old,
 * and the checks below still require every input record exactly once. The other clients get no such help.
 * CLUSTER_COPIER_STALL_MS=6000 makes restarts happen on ordinary pauses, to exercise them (2 restarts in a
 * run, every record once); below that a restarted copier is restarted again before it rejoins the group,
 * which takes its predecessor's session timeout (6 s).
 */
const LIBRDKAFKA_STALL_MS = Number(process.env.CLUSTER_COPIER_STALL_MS ?? 45_000);

/** A copier process, restarted when it is a librdkafka copier that stalled (see LIBRDKAFKA_STALL_MS). */
class SupervisedCopier {
  child: LineChild;
  restarts = 0;
  private seenBytes = 0;
  private seenAtMs = Date.now();

  constructor(
    private readonly client: CopierClient,
    private readonly args: string[],
  ) {
    this.child = startCopier(client, args);
  }

  /** Restarts a stalled librdkafka copier; called while input remains to be copied. */
  async restartIfStalled(): Promise<void> {
    if (this.client !== "librdkafka") return;
    if (this.child.stdout.length !== this.seenBytes) {
      this.seenBytes = this.child.stdout.length;
      this.seenAtMs = Date.now();
      return;
    }
    if (Date.now() - this.seenAtMs < LIBRDKAFKA_STALL_MS) return;
    console.log(`broker-kills: the librdkafka copier printed nothing for ${LIBRDKAFKA_STALL_MS} ms; restarting it\n${this.child.output()}`);
    await this.child.kill();
    this.restarts++;
    this.child = startCopier(this.client, this.args);
    await this.child.waitFor(/^READY/m, 120_000);
    this.seenBytes = this.child.stdout.length;
    this.seenAtMs = Date.now();
  }
}

function startCopier(client: CopierClient, args: string[]): LineChild {
  switch (client) {
    case "java":
      return new JavaChild("EosCopier", args);
    case "librdkafka":
      return new LineChild("eos_copier.py", [VENV_PYTHON, join(import.meta.dir, "..", "interop", "python", "eos_copier.py"), "copy", ...args]);
    case "franz-go":
      return new LineChild("eoscopier (franz-go)", [goHelper("eos-copier"), ...args]);
  }
}

test.each(["java", "librdkafka", "franz-go"] as const)(`EOS copier (%s) while a random broker is SIGKILLed (${EOS_KILLS} kills at least): the output read_committed holds every input record once, in order; the group committed the input's end (seed ${SEED})`, async (client) => {
  await cluster.withLogs(async () => {
    const rng = seededRandom(SEED ^ 0xe05 ^ client.length);
    const input = `eos-in-${client}`;
    const output = `eos-out-${client}`;
    const group = `eos-group-${client}`;
    const partitions = 3;
    for (const t of [input, output]) await cluster.createTopic(t, partitions);
    await cluster.waitForBalanced([input, output]);
    // librdkafka joins as a dynamic member (as in tests/interop/eos-copier.test.ts); the others are static members.
    // The franz-go helper takes one seed broker (it does not split a list); it learns the others from Metadata.
    const bootstrap = client === "franz-go" ? cluster.bootstrapOf(1) : cluster.bootstrap;
    const supervised = new SupervisedCopier(client, [bootstrap, input, output, group, `eos-txn-${client}`, client === "librdkafka" ? "-" : `eos-instance-${client}`, "50", "0", "-"]);
    // The input is written while the copier copies and brokers die, so that every kill lands in the copy.
    const pyOut = join(cluster.dir, `eos-input-${client}.json`);
    const feeder = startIdempotentProducer(cluster.bootstrap, input, EOS_RECORDS, EOS_RATE_PER_S, pyOut);
    await supervised.child.waitFor(/^COMMIT /m, 120_000);
    let kills = 0;
    while (kills < EOS_KILLS || !feeder.done) {
      if (supervised.child.done) throw new Error(`the copier exited on its own\n${supervised.child.output()}`);
      if (!feeder.done) await supervised.restartIfStalled();
      await new Promise((resolve) => setTimeout(resolve, rng.int(KILL_GAP_MS.min, KILL_GAP_MS.max)));
      const victim = rng.pick(cluster.liveIds());
      await cluster.kill(victim, "SIGKILL");
      kills++;
      await cluster.restart(victim);
      await cluster.waitForBalanced([input, output], { timeoutMs: 45_000 });
    }
    expect(await feeder.exitWithin(120_000), feeder.output()).toBe(0);
    expect(readIdempotentReport(pyOut).delivered).toBe(EOS_RECORDS);
    const inputRecords = new Map<number, { key: string; value: string }[]>();
    for (let p = 0; p < partitions; p++) {
      const contents = await cluster.readPartition(input, p);
      inputRecords.set(p, contents.records.map((r) => ({ key: utf8(r.key)!, value: utf8(r.value)! })));
    }
    const inputEnds = [...inputRecords.values()].map((r) => r.length);
    expect(inputEnds.reduce((a, b) => a + b, 0)).toBe(EOS_RECORDS);
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (supervised.child.done) throw new Error(`the copier exited on its own\n${supervised.child.output()}`);
      const committed = await cluster.committedOffsets(group, input, partitions);
      if (committed !== null && committed.join() === inputEnds.join()) break;
      if (Date.now() > deadline) throw new Error(`the copier did not finish: committed ${committed}, input ends ${inputEnds}, ${kills} kills\n${supervised.child.output()}`);
      await supervised.restartIfStalled();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await supervised.child.kill();

    const read = ok(await runJava("ReadCommittedCheck", [cluster.bootstrap, output, "read_committed", "60000", String(EOS_RECORDS)]), "ReadCommittedCheck");
    const got = new Map<number, { key: string; value: string }[]>(Array.from({ length: partitions }, (_, p) => [p, []]));
    for (const line of read.stdout.split("\n")) {
      const f = line.split(" ");
      if (f[0] === "R") got.get(Number(f[1]))!.push({ key: f[3]!, value: f[4]! });
    }
    for (let p = 0; p < partitions; p++) {
      const expected = inputRecords.get(p)!.map((r) => ({ key: r.key, value: r.value.toUpperCase() }));
      const actual = got.get(p)!;
      const firstDifference = expected.findIndex((e, i) => actual[i]?.key !== e.key || actual[i]?.value !== e.value);
      expect({ partition: p, records: actual.length, firstDifference, at: firstDifference >= 0 ? actual[firstDifference] : null }).toEqual({
        partition: p,
        records: expected.length,
        firstDifference: -1,
        at: null,
      });
    }
    console.log(`broker-kills EOS copier (${client}): ${kills} kills, ${supervised.restarts} copier restarts, ${EOS_RECORDS} records copied exactly once`);
  });
}, 400_000);
