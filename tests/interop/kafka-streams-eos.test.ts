/**
 * A Kafka Streams 4.1.1 application under processing.guarantee=exactly_once_v2, SIGKILLed while its input
 * flows (tests/interop/java/eos-apps/WordCountEos.java, compiled with javac into .cache/java-classes/eos-apps/):
 * a word count that splits lines into words, re-keys them by word (the repartition topic
 * wordcount-eos-words-repartition), counts them in a persistent RocksDB store (its changelog
 * wordcount-eos-counts-changelog, which Streams creates with cleanup.policy=compact, here with 1 s segments so
 * that the broker's log cleaner compacts it while the test runs) and writes every new count to the output
 * topic, with the record cache off: each input word yields one output record.
 *
 * The input: seeded lines of 1-6 words from a small vocabulary, in 2 partitions, written by an idempotent
 * producer (kafkajs) while the application runs. The producer stays at most AHEAD lines in front of what the
 * application reported processing (its AT lines), so the input keeps flowing across every run, also while the
 * application is down. The application is SIGKILLed KILLS times, each after the seeded k-th (3-6) advance of
 * the output's last stable offset during its run (its commits, and the abort of its predecessor's transaction
 * when the restart fences it), at the first moment after that when the output's high watermark is past its
 * LSO (records of an open transaction are in the log), and a seeded 0-20 ms later; its commit interval is
 * 100 ms. It is restarted on the same state directory: the restart fences the killed instance's producer (the
 * transactional id comes from the process id Streams keeps in that directory), its open transaction is
 * aborted, and it resumes from the committed offsets with its store restored from the changelog.
 *
 * Before the last run the test waits until the log cleaner has compacted every changelog partition, and wipes
 * the state directory: that run is a new process id with a new transactional id, waits for the broker to abort
 * the killed instance's transaction (transaction.timeout.ms) before its offsets are stable, restores the whole
 * store from the compacted changelog (from offset 0) and must still count exactly. The input ends FINAL_LINES
 * lines after the last kill; the last run processes them and is stopped with SIGTERM (an orderly close).
 *
 * Then the output is read read_committed (raw Fetch, aborted transactions honoured): for every word the counts
 * are exactly 1, 2, ..., N in offset order, N being the word's number of occurrences in the input, which is
 * what one clean run gives. A duplicated processing would repeat a count, a lost one would skip one or leave
 * the final count short, and a count going backwards would break the sequence. Also: every output batch is
 * transactional and nothing is left hanging (LSO = high watermark), the input holds exactly what was produced,
 * and the internal topics exist, the changelog with cleanup.policy=compact and the configs it was given, the
 * repartition topic purged by Streams (DeleteRecords of what it consumed, every second here).
 *
 *   bun test --timeout 300000 tests/interop/kafka-streams-eos.test.ts
 *   EOS_APPS_TARGET=apache ...             (the same against Apache Kafka 4.1.1: is it the application or bunka?)
 *   EOS_STREAMS_SEED=1234 ...              (another seed; "random" picks one, printed at the end)
 *   EOS_STREAMS_KILLS=5 EOS_STREAMS_FINAL_LINES=2000 ...
 *   EOS_APPS_VERBOSE=1 ...                 (every run's stdout/stderr tail)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import {
  CommittedReader,
  EOS_APPS_TARGET,
  JvmApp,
  compileEosApps,
  createTopics,
  endOffsetsOn,
  killJvmApps,
  partitionCounts,
  removedByCleaner,
  startOffsets,
  startTarget,
  topicConfigs,
  waitForCondition,
  withWire,
  type Target,
} from "../support/eos-apps.ts";
import { caseRandom, envSeed } from "../support/fuzz-support.ts";
import { readPartitionFully, utf8 } from "../support/record-decoder.ts";
import { WireClient } from "../support/wire-client.ts";

const SEED = envSeed("EOS_STREAMS_SEED", 0x5731_ea05);
const KILLS = Number(process.env.EOS_STREAMS_KILLS ?? 4);
/** Lines produced after the last kill, for the wiped-state run; and a bound on the whole input. */
const FINAL_LINES = Number(process.env.EOS_STREAMS_FINAL_LINES ?? 800);
const MAX_LINES = 60_000;
const PARTITIONS = 2;
/** Lines per send, and how far (in lines) the producer may run ahead of the application's progress. */
const CHUNK = 20;
const AHEAD = 200;
/**
 * After the last kill the lines go out one chunk per this many ms (40 chunks: 4 s), so that the last run
 * commits through several of Streams' 1 s repartition purge intervals (it purges at a commit once the
 * interval has passed) on every partition; the test also waits for those purges before it stops the run.
 */
const FINAL_CHUNK_PACE_MS = 100;
/**
 * A run is killed after the k-th advance of the output's LSO it caused, k in this range, once an open
 * transaction's records are in the log, and 0-20 ms later.
 */
const KILL_AFTER_COMMITS = { min: 3, max: 6 };
const KILL_DELAY_MAX_MS = 20;
/**
 * The application's producer transaction timeout: after the kill before the wiped-state run, the broker aborts
 * the killed instance's transaction this long after it began (plus its reaper's sweep interval, 10 s by default
 * in both brokers), and only then are the committed offsets stable for the new instance.
 */
const TRANSACTION_TIMEOUT_MS = 5000;
/**
 * The changelog's own topic configs (on top of Streams' cleanup.policy=compact): segments rolled every second and
 * cleanable as soon as anything is dirty, with the brokers' cleaner looking every CLEANER_BACKOFF_MS, so that
 * the log cleaner compacts the changelog while the application runs and the wiped-state run restores from a
 * compacted log (aborted transactions' records removed, keys overwritten).
 */
const CHANGELOG_CONFIGS = { "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01" };
const CLEANER_BACKOFF_MS = 1000;
const TEST_TIMEOUT_MS = 240_000;

const APP_ID = "wordcount-eos";
const INPUT = "wordcount-eos-input";
const OUTPUT = "wordcount-eos-output";
const REPARTITION = `${APP_ID}-words-repartition`;
const CHANGELOG = `${APP_ID}-counts-changelog`;
const VOCABULARY = [
  "amber", "birch", "cobalt", "dune", "ember", "fjord", "granite", "heron", "iris", "juniper", "kelp", "lichen",
  "marble", "nectar", "opal", "pine", "quartz", "reed", "sable", "tundra", "umber", "violet", "willow", "yarrow",
];

let target: Target | undefined;
let classpath: string;

beforeAll(async () => {
  classpath = await compileEosApps();
  target = await startTarget({ cleanerBackoffMs: CLEANER_BACKOFF_MS });
}, 120_000);

afterAll(async () => {
  await killJvmApps();
  await target?.stop();
});

/** The input, seeded: frequent and rare words (a skewed pick), 1-6 a line, as many lines as asked for. */
function lineGenerator(): () => string {
  const rng = caseRandom(SEED, 0);
  return () => Array.from({ length: rng.int(1, 6) }, () => VOCABULARY[Math.floor(rng.next() ** 2 * VOCABULARY.length)]!).join(" ");
}

interface KillPlan {
  /** Killed once the output's last stable offset advanced this many times during its run... */
  commits: number;
  /** ...and this many ms more (the kill's random moment, not a wait for anything). */
  delayMs: number;
}

function planKills(): KillPlan[] {
  const rng = caseRandom(SEED, 1);
  return Array.from({ length: KILLS }, () => ({ commits: rng.int(KILL_AFTER_COMMITS.min, KILL_AFTER_COMMITS.max), delayMs: rng.int(0, KILL_DELAY_MAX_MS) }));
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

const countOf = (value: Uint8Array | null) => {
  if (value === null || value.length !== 8) throw new Error(`an output value is not a long: ${value === null ? "null" : `${value.length} bytes`}`);
  return Number(new DataView(value.buffer, value.byteOffset, 8).getBigInt64(0));
};

/** Where a word's committed counts first differ from 1..expected, described; null when they are exactly that. */
function sequenceProblem(counts: number[], expected: number): string | null {
  for (let i = 0; i < Math.max(counts.length, expected); i++) {
    if (counts[i] !== i + 1) {
      const around = counts.slice(Math.max(0, i - 3), i + 4).join(",");
      if (i >= counts.length) return `ends at ${counts.length} of ${expected} (lost processing)`;
      if (i >= expected) return `goes on past ${expected} with ${counts.slice(expected, expected + 5).join(",")} (duplicated processing)`;
      return `update ${i + 1} is ${counts[i]} (${counts[i]! <= i ? "repeated or backwards: duplicated processing" : "skipped: lost processing"}), around it ${around}`;
    }
  }
  return null;
}

describe(`Kafka Streams word count, exactly_once_v2, SIGKILLed ${KILLS} times (${EOS_APPS_TARGET})`, () => {
  test("every word's committed counts are exactly 1..N, N its occurrences, also after a restart on a wiped state directory", async () => {
    const started = Date.now();
    const t = target!;
    await createTopics(t.port, [
      { name: INPUT, partitions: PARTITIONS },
      { name: OUTPUT, partitions: PARTITIONS },
    ]);
    const plan = planKills();
    const stateDir = mkdtempSync(join(tmpdir(), "wordcount-eos-state-"));
    const wire = await WireClient.connect(t.port);

    // The application's progress: per input partition, one past the offset it last reported processing.
    const position = Array.from({ length: PARTITIONS }, () => 0);
    const runs: JvmApp[] = [];
    const startRun = () => {
      const app = new JvmApp(`word count run ${runs.length + 1}`, classpath, "WordCountEos", [
        t.bootstrap,
        APP_ID,
        INPUT,
        OUTPUT,
        stateDir,
        "wordcount-eos-instance",
        String(TRANSACTION_TIMEOUT_MS),
        Object.entries(CHANGELOG_CONFIGS)
          .map(([name, value]) => `${name}=${value}`)
          .join(","),
      ]);
      app.onLine((line) => {
        if (!line.startsWith("AT ")) return;
        const [, partition, offset] = line.split(" ");
        position[Number(partition)] = Number(offset) + 1;
      });
      runs.push(app);
      return app;
    };

    // The producer: idempotent, one chunk at a time, never more than AHEAD lines past the application, until
    // `inputEnd` is set. `expected` counts every word sent (before the send: the application may count a line
    // before its send is acknowledged).
    const nextLine = lineGenerator();
    const lines: string[] = [];
    const expected = new Map<string, number>();
    const kafka = new Kafka({ clientId: "wordcount-eos-input", brokers: [t.bootstrap], logLevel: logLevel.NOTHING });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    await producer.connect();
    let inputEnd = MAX_LINES;
    let stopFeeding = false;
    let fed = false;
    const feeding = (async () => {
      while (lines.length < inputEnd && !stopFeeding) {
        await waitForCondition("the application to catch up with the input", () => stopFeeding || lines.length - sum(position) < AHEAD, 180_000, 20);
        if (stopFeeding) return;
        const from = lines.length;
        const chunk = Array.from({ length: Math.min(CHUNK, inputEnd - from) }, nextLine);
        lines.push(...chunk);
        for (const line of chunk) for (const word of line.split(" ")) expected.set(word, (expected.get(word) ?? 0) + 1);
        await producer.send({ topic: INPUT, acks: -1, messages: chunk.map((value, j) => ({ key: `line-${from + j}`, value, partition: (from + j) % PARTITIONS })) });
        if (inputEnd !== MAX_LINES) await Bun.sleep(FINAL_CHUNK_PACE_MS);
      }
      fed = true;
    })();
    let feedError: unknown;
    feeding.catch((e) => (feedError = e));
    const assertFeeding = () => {
      if (feedError !== undefined) throw new Error(`producing the input failed: ${feedError}`);
      if (lines.length >= MAX_LINES && inputEnd === MAX_LINES) throw new Error(`${MAX_LINES} lines produced and the kills are not done`);
    };
    const outputLso = async () => sum(await endOffsetsOn(wire, OUTPUT, PARTITIONS, 1));

    const killLog: string[] = [];
    let restoredByWipedRun: string[] = [];
    let compactedBeforeRestore: number[] = [];
    try {
      for (const kill of plan) {
        const app = startRun();
        let lso = await outputLso();
        let advances = 0;
        await waitForCondition(
          `${app.label} to commit ${kill.commits} times`,
          async () => {
            assertFeeding();
            if (app.exitCode !== null) throw new Error(`${app.label} exited (${app.exitCode})\n${app.diagnostics()}`);
            const now = await outputLso();
            if (now > lso) advances++;
            lso = now;
            return advances >= kill.commits;
          },
          90_000,
          20,
        );
        // Streams' producer lingers up to 100 ms before it sends: a kill right after a commit would mostly find
        // the next transaction's records still in the client, leaving nothing in the log to abort.
        await waitForCondition(
          `${app.label}'s open transaction to reach the log`,
          async () => {
            if (app.exitCode !== null) throw new Error(`${app.label} exited (${app.exitCode})\n${app.diagnostics()}`);
            const [hwm, lso] = await Promise.all([endOffsetsOn(wire, OUTPUT, PARTITIONS, 0), endOffsetsOn(wire, OUTPUT, PARTITIONS, 1)]);
            return sum(hwm) > sum(lso);
          },
          30_000,
          5,
        );
        if (kill.delayMs > 0) await Bun.sleep(kill.delayMs);
        await app.kill();
        killLog.push(`${kill.delayMs} ms after commit ${kill.commits} and an open transaction in the log (input position ${sum(position)}, ${lines.length} produced)`);
      }
      inputEnd = lines.length + FINAL_LINES;

      // The changelog as the wiped-state run will find it: compacted by the broker's log cleaner.
      const removedBeforeRestore: number[] = [];
      await waitForCondition(
        "the log cleaner to compact every changelog partition",
        async () => {
          for (let p = 0; p < PARTITIONS; p++) removedBeforeRestore[p] = await removedByCleaner(wire, CHANGELOG, p);
          return removedBeforeRestore.every((n) => n > 0);
        },
        60_000,
        500,
        () => `records removed per partition: ${removedBeforeRestore.join(",")}`,
      );
      compactedBeforeRestore = removedBeforeRestore;

      // The last run starts without any local state.
      rmSync(stateDir, { recursive: true, force: true });
      const last = startRun();

      // Until the committed output holds every word's final count; a count past what was sent fails at once.
      const readers = Array.from({ length: PARTITIONS }, (_, p) => new CommittedReader(wire, OUTPUT, p));
      const latest = new Map<string, number>();
      await waitForCondition(
        "the committed output to hold every word's final count",
        async () => {
          assertFeeding();
          if (last.exitCode !== null) throw new Error(`${last.label} exited (${last.exitCode})\n${last.diagnostics()}`);
          for (const reader of readers) {
            for (const r of await reader.poll()) {
              const word = utf8(r.key)!;
              const count = countOf(r.value);
              if (count > (expected.get(word) ?? 0)) throw new Error(`output ${OUTPUT}-${reader.partition}@${r.offset}: ${word} counted ${count}, more than its ${expected.get(word) ?? 0} occurrences`);
              latest.set(word, count);
            }
          }
          return fed && [...expected].every(([word, n]) => latest.get(word) === n);
        },
        120_000,
        200,
      );
      // Streams deletes the repartition records it has consumed at its commits (every second here): wait,
      // while the last run still runs, until it has done so on every partition (checked again below).
      await waitForCondition(
        "Streams to purge every repartition partition",
        async () => {
          if (last.exitCode !== null) throw new Error(`${last.label} exited (${last.exitCode})\n${last.diagnostics()}`);
          return (await startOffsets(t.port, REPARTITION, PARTITIONS)).every((offset) => offset > 0);
        },
        30_000,
        200,
      );
      // A JVM ended by SIGTERM exits 143 after its shutdown hooks ran; CLOSED says Streams' close returned.
      const code = await last.stop("SIGTERM", 45_000);
      expect({ code, closed: last.lines.includes("CLOSED") }).toEqual({ code: 143, closed: true });
      restoredByWipedRun = last.lines.filter((l) => l.startsWith("RESTORE"));
      await feeding;
    } finally {
      stopFeeding = true;
      await feeding.catch(() => undefined);
      await producer.disconnect();
      for (const app of runs) await app.kill();
      if (process.env.EOS_APPS_VERBOSE) for (const app of runs) console.log(app.diagnostics(40));
      rmSync(stateDir, { recursive: true, force: true });
      wire.close();
    }

    const fatal = runs.flatMap((app) => app.lines.filter((l) => l.startsWith("FATAL")).map((l) => `${app.label}: ${l}`));
    expect(fatal).toEqual([]);

    // The input is exactly what was produced, once, in order.
    const reading = await WireClient.connect(t.port);
    try {
      for (let p = 0; p < PARTITIONS; p++) {
        const stored = (await readPartitionFully(reading, INPUT, p)).records.map((r) => utf8(r.value));
        expect(stored).toEqual(lines.filter((_, i) => i % PARTITIONS === p));
      }

      // The committed output, from the beginning: each word's counts are 1..N in offset order.
      const countsByWord = new Map<string, number[]>();
      for (let p = 0; p < PARTITIONS; p++) {
        const reader = new CommittedReader(reading, OUTPUT, p);
        for (const r of await reader.poll()) {
          const word = utf8(r.key)!;
          if (!countsByWord.has(word)) countsByWord.set(word, []);
          countsByWord.get(word)!.push(countOf(r.value));
        }
        expect({ lastStableOffset: reader.lastStableOffset, nonTransactionalBatches: reader.nonTransactionalBatches }).toEqual({ lastStableOffset: reader.highWatermark, nonTransactionalBatches: 0 });
      }
      const problems = [...new Set([...expected.keys(), ...countsByWord.keys()])]
        .sort()
        .map((word) => [word, sequenceProblem(countsByWord.get(word) ?? [], expected.get(word) ?? 0)] as const)
        .filter(([, problem]) => problem !== null)
        .map(([word, problem]) => `${word}: ${problem}`);
      expect(problems).toEqual([]);
      expect(sum([...countsByWord.values()].map((c) => c.length))).toBe(sum([...expected.values()]));
    } finally {
      reading.close();
    }

    // The internal topics Streams created: the repartition topic and the compacted changelog.
    expect(Object.fromEntries(await partitionCounts(t.port, [REPARTITION, CHANGELOG]))).toEqual({ [REPARTITION]: PARTITIONS, [CHANGELOG]: PARTITIONS });
    // Streams deleted the repartition records it had consumed (DeleteRecords, every second here).
    const repartitionStarts = await startOffsets(t.port, REPARTITION, PARTITIONS);
    expect(repartitionStarts.map((offset) => offset > 0)).toEqual(Array.from({ length: PARTITIONS }, () => true));
    const changelogConfigs = await topicConfigs(t.port, CHANGELOG);
    expect(Object.fromEntries(["cleanup.policy", ...Object.keys(CHANGELOG_CONFIGS)].map((name) => [name, changelogConfigs[name]]))).toEqual({
      "cleanup.policy": "compact",
      ...CHANGELOG_CONFIGS,
    });

    // The wiped-state run restored every changelog partition from its beginning, to the changelog's end then.
    const restoreStarts = restoredByWipedRun.filter((l) => l.startsWith("RESTORE ")).map((l) => l.split(" "));
    const restoreEnds = restoredByWipedRun.filter((l) => l.startsWith("RESTORED ")).map((l) => l.split(" "));
    expect(restoreStarts.map(([, topic, partition, start]) => `${topic}-${partition} from ${start}`).sort()).toEqual(
      Array.from({ length: PARTITIONS }, (_, p) => `${CHANGELOG}-${p} from 0`),
    );
    expect(restoreEnds.map(([, topic, partition]) => `${topic}-${partition}`).sort()).toEqual(Array.from({ length: PARTITIONS }, (_, p) => `${CHANGELOG}-${p}`));
    for (const [, , , restored] of restoreEnds) expect(Number(restored)).toBeGreaterThan(0);

    // What the kills left in the log: the transactions aborted in each topic Streams writes, and their records
    // (in the repartition topic, those above its purged start).
    const aborted: string[] = [];
    await withWire(t.port, async (client) => {
      for (const topic of [OUTPUT, REPARTITION, CHANGELOG]) {
        let transactions = 0;
        let records = 0;
        for (let p = 0; p < PARTITIONS; p++) {
          const reader = new CommittedReader(client, topic, p, topic === CHANGELOG);
          // The purged repartition records are gone, with whatever aborted transactions they held.
          if (topic === REPARTITION) reader.position = repartitionStarts[p]!;
          await reader.poll();
          transactions += reader.abortMarkers;
          records += reader.abortedRecords;
        }
        aborted.push(`${topic} ${transactions} (${records} records)`);
      }
    });
    console.log(
      `Kafka Streams word count on ${EOS_APPS_TARGET} (seed ${SEED}): ${lines.length} lines, ${sum([...expected.values()])} words counted exactly once by ${runs.length} runs, ` +
        `killed ${killLog.join(", ")}; the wiped-state run restored ${restoreEnds.map(([, , p, n]) => `${n} records of partition ${p}`).join(" and ")} ` +
        `from a changelog the cleaner had removed ${compactedBeforeRestore.join(" and ")} records from; repartition topic purged up to ${repartitionStarts.join(",")}; ` +
        `aborted transactions (markers over the partitions): ${aborted.join(", ")}; ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  }, TEST_TIMEOUT_MS);
});
