/**
 * The Node clients, kafkajs 2.2 and @platformatic/kafka 2.12, against a real three-broker bunka cluster
 * (tests/support/bunka-cluster.ts: one etcd, three compiled brokers on one data directory):
 * - kafkajs: an idempotent producer (acks -1) bootstrapped from one broker writes a numbered sequence to a
 *   6-partition topic whose partitions are led by all three brokers; a kafkajs consumer group bootstrapped
 *   from another broker reads everything exactly once and commits; the group's committed offsets (OffsetFetch
 *   require_stable from its coordinator) are the partitions' ends;
 * - @platformatic/kafka: the same with its Producer and Consumer (a MessagesStream, message.commit());
 * - transactions across brokers: the EOS copiers of tests/interop/node (kafkajs: transaction.sendOffsets;
 *   @platformatic/kafka: Transaction.addConsumer and addOffset) copy a 3-partition input to a 3-partition
 *   output with a transactional id whose coordinator is another broker than at least one partition leader.
 *   The input is written meanwhile (librdkafka's idempotent producer); the transactional id's coordinator,
 *   the group's coordinator and the copier's bootstrap broker are three different brokers. When the group's
 *   committed offsets reach the input's ends, the output read read_committed (Apache's Java consumer) holds
 *   every input record exactly once, upper-cased, in input order per partition, and nothing else.
 *
 * The copiers run without broker kills by default: neither Node client survives a SIGKILLed broker
 * reliably, for reasons in the clients (Java, librdkafka and franz-go copiers do, in broker-kills.test.ts):
 * - kafkajs 2.2.4: a coordinator that moved answers TxnOffsetCommit NOT_COORDINATOR (16), which kafkajs
 *   names NOT_COORDINATOR_FOR_GROUP while its sendOffsets retries only the names NOT_COORDINATOR and
 *   COORDINATOR_NOT_AVAILABLE (producer/eosManager), so it gives up; its commit() and abort() send EndTxn once
 *   with no retry (COORDINATOR_LOAD_IN_PROGRESS from a coordinator still loading fails them) and leave the
 *   producer in COMMITTING/ABORTING, where the next beginTransaction is a non-retriable state error;
 * - @platformatic/kafka 2.12.1: a fetch from a killed leader is tried 1 + `retries` (3) times, 1 s apart,
 *   which ends before the killed broker's lease (3 s) expires and its partitions move; the consumer's
 *   MessagesStream then fails for good and the copier with it.
 * The kill variant stays available, a seeded random broker SIGKILLed and restarted N times during the copy:
 *
 *   bun test --timeout 600000 tests/cluster/node-clients.test.ts
 *   NODE_EOS_KILLS_KAFKAJS=3 NODE_EOS_KILLS_PLATFORMATIC=3 bun test --timeout 600000 tests/cluster/node-clients.test.ts
 *   CLUSTER_SEED=1234 ...                                                             (another seed; "random")
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Consumer as PlatformaticConsumer, MessagesStreamFallbackModes, MessagesStreamModes, ProduceAcks, Producer as PlatformaticProducer, stringDeserializers, stringSerializers, type Message } from "@platformatic/kafka";
import { Kafka, logLevel } from "kafkajs";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { compileJavaPrograms, ok, readIdempotentReport, runJava, startIdempotentProducer } from "../support/cluster-clients.ts";
import { envSeed } from "../support/fuzz-support.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { killLiveChildren, LineChild } from "../support/line-child.ts";
import { seededRandom } from "../support/random.ts";
import { utf8 } from "../support/record-decoder.ts";

const TIMEOUT_MS = 180_000;
const SEED = envSeed("CLUSTER_SEED", 0x0de_c11e);
/** Broker SIGKILLs during each copier's run (0 by default: see above). */
const EOS_KILLS = { kafkajs: Number(process.env.NODE_EOS_KILLS_KAFKAJS ?? 0), platformatic: Number(process.env.NODE_EOS_KILLS_PLATFORMATIC ?? 0) };
/** Between a restarted broker's return to a balanced cluster and the next kill. */
const KILL_GAP_MS = { min: 500, max: 2500 };
const TOPIC_PARTITIONS = 6;
const RECORDS = 3000;
const EOS_PARTITIONS = 3;
const EOS_RATE_PER_S = 200;
/** Input written while the copier copies (and brokers die): long enough to outlast the kills. */
const eosRecords = (kills: number) => Math.max(2000, kills * 5 * EOS_RATE_PER_S);
const NODE_COPIERS = { kafkajs: join(import.meta.dir, "..", "interop", "node", "eos-copier.ts"), platformatic: join(import.meta.dir, "..", "interop", "node", "eos-copier-platformatic.ts") };

let cluster: BunkaCluster;

beforeAll(async () => {
  await Promise.all([compileJavaPrograms(["ReadCommittedCheck"]), ensureInteropClients()]);
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
}, TIMEOUT_MS);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

/** Polls `condition` until it gives a value (not undefined) or fails after `timeoutMs` with `what` and the last state. */
async function until<T>(what: string, condition: () => Promise<T | undefined>, timeoutMs: number, state: () => string = () => ""): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out (${timeoutMs} ms) waiting for ${what} ${state()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A seeded permutation of `items`. */
function shuffled<T>(rng: ReturnType<typeof seededRandom>, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A fresh topic of `partitions`, balanced: its leaders, checked to be every broker (an even share). */
async function balancedTopic(name: string, partitions: number): Promise<Map<string, number>> {
  await cluster.createTopic(name, partitions);
  const { leaders, shares } = await cluster.waitForBalanced([name]);
  expect([...shares.values()]).toEqual(cluster.ids.map(() => partitions / cluster.ids.length));
  return leaders;
}

/**
 * What a numbered sequence "<prefix><i>", i in 0..count-1, written by one producer, looks like in `topic`:
 * per partition the numbers in log order, and every problem (a foreign value, a number twice or missing,
 * numbers out of order within a partition).
 */
async function sequenceInTopic(topic: string, partitions: number, prefix: string, count: number): Promise<{ ends: number[]; problems: string[] }> {
  const seen = new Map<number, number>();
  const problems: string[] = [];
  const ends: number[] = [];
  for (let p = 0; p < partitions; p++) {
    const contents = await cluster.readPartition(topic, p);
    ends.push(contents.highWatermark);
    let previous = -1;
    for (const r of contents.records) {
      const value = utf8(r.value) ?? "";
      const n = value.startsWith(prefix) ? Number(value.slice(prefix.length)) : NaN;
      if (!Number.isInteger(n) || n < 0 || n >= count) problems.push(`${topic}-${p}@${r.offset}: foreign value ${value}`);
      else {
        if (seen.has(n)) problems.push(`${topic}-${p}@${r.offset}: ${value} again (first in partition ${seen.get(n)})`);
        if (n <= previous) problems.push(`${topic}-${p}@${r.offset}: ${value} after ${prefix}${previous}`);
        seen.set(n, p);
        previous = n;
      }
    }
    if (contents.records.length === 0) problems.push(`${topic}-${p}: empty`);
  }
  for (let i = 0; i < count; i++) if (!seen.has(i)) problems.push(`${prefix}${i} missing`);
  return { ends, problems: problems.slice(0, 20) };
}

/** The group's stable committed offsets once they are answered. */
const committed = (group: string, topic: string, partitions: number) =>
  until(`the committed offsets of ${group}`, async () => (await cluster.committedOffsets(group, topic, partitions)) ?? undefined, 60_000);

describe("three brokers, Node clients", () => {
  test("kafkajs: an idempotent producer from one broker's bootstrap, a consumer group from another's, everything exactly once; committed offsets are the ends", async () => {
    await cluster.withLogs(async () => {
      const topic = "n-kafkajs";
      await balancedTopic(topic, TOPIC_PARTITIONS);

      const producerKafka = new Kafka({ clientId: "n-kafkajs-producer", brokers: [cluster.bootstrapOf(1)], logLevel: logLevel.NOTHING });
      const producer = producerKafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      // Keyed (the default murmur2 partitioner spreads them over every partition, so every broker), 100 per send.
      for (let from = 0; from < RECORDS; from += 100) {
        const messages = Array.from({ length: Math.min(100, RECORDS - from) }, (_, j) => ({ key: `k-${from + j}`, value: `kjs-${from + j}` }));
        await producer.send({ topic, acks: -1, messages });
      }
      await producer.disconnect();
      const written = await sequenceInTopic(topic, TOPIC_PARTITIONS, "kjs-", RECORDS);
      expect(written.problems).toEqual([]);

      const group = "n-kafkajs-group";
      const consumerKafka = new Kafka({ clientId: "n-kafkajs-consumer", brokers: [cluster.bootstrapOf(3)], logLevel: logLevel.NOTHING });
      const consumer = consumerKafka.consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 1000, maxWaitTimeInMs: 200 });
      const received: { partition: number; offset: number; value: string }[] = [];
      let crash: string | undefined;
      consumer.on(consumer.events.CRASH, (e) => (crash = `${e.payload.error.name}: ${e.payload.error.message}`));
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          received.push({ partition, offset: Number(message.offset), value: message.value!.toString() });
        },
      });
      try {
        await until(
          `the kafkajs consumer to receive ${RECORDS} records`,
          async () => {
            if (crash !== undefined) throw new Error(`the kafkajs consumer crashed: ${crash}`);
            return received.length >= RECORDS ? true : undefined;
          },
          90_000,
          () => `(received ${received.length})`,
        );
        // Each partition's next offset after its last record, committed by the member (OffsetCommit through the group's coordinator).
        const next = new Map<number, number>();
        for (const r of received) next.set(r.partition, Math.max(next.get(r.partition) ?? 0, r.offset + 1));
        await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset: String(offset) })));
      } finally {
        await consumer.disconnect();
      }
      const values = received.map((r) => r.value);
      expect({ count: values.length, distinct: new Set(values).size }).toEqual({ count: RECORDS, distinct: RECORDS });
      for (let p = 0; p < TOPIC_PARTITIONS; p++) {
        const offsets = received.filter((r) => r.partition === p).map((r) => r.offset);
        expect(offsets, `${topic}-${p}`).toEqual(Array.from({ length: written.ends[p]! }, (_, i) => i));
      }
      expect(await committed(group, topic, TOPIC_PARTITIONS)).toEqual(written.ends);
    });
  }, TIMEOUT_MS);

  test("@platformatic/kafka: an idempotent producer from one broker's bootstrap, a consumer group from another's, everything exactly once; committed offsets are the ends", async () => {
    await cluster.withLogs(async () => {
      const topic = "n-platformatic";
      await balancedTopic(topic, TOPIC_PARTITIONS);

      const producer = new PlatformaticProducer({ clientId: "n-platformatic-producer", bootstrapBrokers: [cluster.bootstrapOf(2)], serializers: stringSerializers, idempotent: true, acks: ProduceAcks.ALL });
      try {
        for (let from = 0; from < RECORDS; from += 100) {
          const messages = Array.from({ length: Math.min(100, RECORDS - from) }, (_, j) => ({ topic, key: `k-${from + j}`, value: `plt-${from + j}` }));
          await producer.send({ messages, acks: ProduceAcks.ALL });
        }
      } finally {
        await producer.close();
      }
      const written = await sequenceInTopic(topic, TOPIC_PARTITIONS, "plt-", RECORDS);
      expect(written.problems).toEqual([]);

      const group = "n-platformatic-group";
      const consumer = new PlatformaticConsumer({
        clientId: "n-platformatic-consumer",
        bootstrapBrokers: [cluster.bootstrapOf(1)],
        groupId: group,
        deserializers: stringDeserializers,
        autocommit: false,
        sessionTimeout: 10_000,
        heartbeatInterval: 1000,
        maxWaitTime: 200,
      });
      const received: Message<string, string, string, string>[] = [];
      try {
        const stream = await consumer.consume({ topics: [topic], mode: MessagesStreamModes.COMMITTED, fallbackMode: MessagesStreamFallbackModes.EARLIEST, autocommit: false });
        const iterator = stream[Symbol.asyncIterator]();
        const deadline = Date.now() + 90_000;
        while (received.length < RECORDS) {
          const left = deadline - Date.now();
          const timedOut = new Promise<null>((resolve) => setTimeout(() => resolve(null), Math.max(left, 0)));
          const next = await Promise.race([iterator.next(), timedOut]);
          if (next === null) throw new Error(`the @platformatic/kafka consumer received ${received.length} of ${RECORDS} records within 90 s`);
          if (next.done) throw new Error(`the @platformatic/kafka stream ended after ${received.length} records`);
          received.push(next.value);
        }
        // Each partition's last message commits its offset + 1 (OffsetCommit with the member's generation).
        const lastOfPartition = new Map<number, Message<string, string, string, string>>();
        for (const m of received) lastOfPartition.set(m.partition, m);
        for (const m of lastOfPartition.values()) await m.commit();
        await stream.close();
      } finally {
        await consumer.close(true);
      }
      const values = received.map((m) => m.value);
      expect({ count: values.length, distinct: new Set(values).size }).toEqual({ count: RECORDS, distinct: RECORDS });
      for (let p = 0; p < TOPIC_PARTITIONS; p++) {
        const offsets = received.filter((m) => m.partition === p).map((m) => Number(m.offset));
        expect(offsets, `${topic}-${p}`).toEqual(Array.from({ length: written.ends[p]! }, (_, i) => i));
      }
      expect(await committed(group, topic, TOPIC_PARTITIONS)).toEqual(written.ends);
    });
  }, TIMEOUT_MS);

  test.each(["kafkajs", "platformatic"] as const)(
    `EOS copier (%s), its transaction coordinator not a partition's leader, broker SIGKILLs meanwhile (kafkajs ${EOS_KILLS.kafkajs}, @platformatic/kafka ${EOS_KILLS.platformatic}): the output read_committed holds every input record once, in order; the group committed the input's end (seed ${SEED})`,
    async (client) => {
      await cluster.withLogs(async () => {
        const KILLS = EOS_KILLS[client];
        const EOS_RECORDS = eosRecords(KILLS);
        const rng = seededRandom(SEED ^ client.length);
        const input = `n-eos-in-${client}`;
        const output = `n-eos-out-${client}`;
        const group = `n-eos-group-${client}`;
        for (const t of [input, output]) await cluster.createTopic(t, EOS_PARTITIONS);
        const { leaders } = await cluster.waitForBalanced([input, output]);
        // The transactional id's coordinator, the group's coordinator and the copier's bootstrap broker: each
        // another broker, and the coordinator leads not every partition the transactions write.
        const [txnCoordinator, groupCoordinator, bootstrapBroker] = shuffled(rng, cluster.ids) as [number, number, number];
        const transactionalId = await cluster.keyCoordinatedBy(txnCoordinator, 1, `n-eos-txn-${client}`);
        const groupId = await cluster.keyCoordinatedBy(groupCoordinator, 0, group);
        const outputLeaders = Array.from({ length: EOS_PARTITIONS }, (_, p) => leaders.get(`${output}-${p}`)!);
        expect(outputLeaders.some((l) => l !== txnCoordinator)).toBe(true);

        const copier = new LineChild(`eos-copier (${client})`, [
          process.execPath,
          NODE_COPIERS[client],
          cluster.bootstrapOf(bootstrapBroker),
          input,
          output,
          groupId,
          transactionalId,
          client === "platformatic" ? `n-eos-instance-${client}` : "-",
          "50",
          "0",
          "-",
        ]);
        const alive = () => {
          if (copier.done) throw new Error(`the copier exited on its own\n${copier.output()}`);
        };
        const feederOut = join(cluster.dir, `n-eos-input-${client}.json`);
        const feeder = startIdempotentProducer(cluster.bootstrap, input, EOS_RECORDS, EOS_RATE_PER_S, feederOut);
        await copier.waitFor(/^COMMIT /m, 120_000);
        let kills = 0;
        const victims: number[] = [];
        while (kills < KILLS) {
          alive();
          await new Promise((resolve) => setTimeout(resolve, rng.int(KILL_GAP_MS.min, KILL_GAP_MS.max)));
          const victim = rng.pick(cluster.liveIds());
          await cluster.kill(victim, "SIGKILL");
          kills++;
          victims.push(victim);
          await cluster.restart(victim);
          await cluster.waitForBalanced([input, output], { timeoutMs: 45_000 });
        }
        expect(await feeder.exitWithin(120_000), feeder.output()).toBe(0);
        expect(readIdempotentReport(feederOut).delivered).toBe(EOS_RECORDS);
        const inputRecords: { key: string; value: string }[][] = [];
        for (let p = 0; p < EOS_PARTITIONS; p++) inputRecords.push((await cluster.readPartition(input, p)).records.map((r) => ({ key: utf8(r.key)!, value: utf8(r.value)! })));
        const inputEnds = inputRecords.map((r) => r.length);
        expect(inputEnds.reduce((a, b) => a + b, 0)).toBe(EOS_RECORDS);
        let last: number[] | null = null;
        await until(
          "the group's committed offsets to reach the input's ends",
          async () => {
            alive();
            last = await cluster.committedOffsets(groupId, input, EOS_PARTITIONS);
            return last !== null && last.join() === inputEnds.join() ? true : undefined;
          },
          120_000,
          () => `(committed ${last}, input ends ${inputEnds}, kills of ${victims.join(",") || "none"})\n${copier.output()}`,
        );
        await copier.kill();
        // A fatal error ends the copier (FATAL, or a kafkajs consumer crash it does not restart from). A crash
        // kafkajs restarts the consumer from (restart=true: a retriable error such as a refused connection to
        // the killed broker, after its retries) is the client's own recovery, counted below.
        const fatal = copier.stdout.split("\n").filter((l) => /^(FATAL|CRASH restart=false)/.test(l));
        expect(fatal).toEqual([]);
        const restarts = copier.stdout.split("\n").filter((l) => l.startsWith("CRASH restart=true"));

        const read = ok(await runJava("ReadCommittedCheck", [cluster.bootstrap, output, "read_committed", "60000", String(EOS_RECORDS)]), "ReadCommittedCheck");
        const got: { key: string; value: string }[][] = Array.from({ length: EOS_PARTITIONS }, () => []);
        for (const line of read.stdout.split("\n")) {
          const f = line.split(" ");
          if (f[0] === "R") got[Number(f[1])]!.push({ key: f[3]!, value: f[4]! });
        }
        for (let p = 0; p < EOS_PARTITIONS; p++) {
          const expected = inputRecords[p]!.map((r) => ({ key: r.key, value: r.value.toUpperCase() }));
          const actual = got[p]!;
          const firstDifference = expected.findIndex((e, i) => actual[i]?.key !== e.key || actual[i]?.value !== e.value);
          expect({ partition: p, records: actual.length, firstDifference, at: firstDifference >= 0 ? actual[firstDifference] : null }).toEqual({
            partition: p,
            records: expected.length,
            firstDifference: -1,
            at: null,
          });
        }
        const commits = copier.stdout.split("\n").filter((l) => l.startsWith("COMMIT ")).length;
        const aborts = copier.stdout.split("\n").filter((l) => l.startsWith("ABORT "));
        console.log(
          `node-clients EOS copier (${client}): txn coordinator ${txnCoordinator}, group coordinator ${groupCoordinator}, bootstrap ${bootstrapBroker}, ` +
            `output leaders ${outputLeaders.join(",")}; ${kills} kills (${victims.join(",") || "none"}); ${EOS_RECORDS} records copied exactly once in ${commits} commits, ` +
            `${aborts.length} client-side aborts${aborts.length > 0 ? `: ${aborts.slice(0, 3).join(" | ")}` : ""}, ` +
            `${restarts.length} consumer restarts${restarts.length > 0 ? `: ${restarts.slice(0, 3).join(" | ")}` : ""}`,
        );
      });
    },
    TIMEOUT_MS,
  );
});
