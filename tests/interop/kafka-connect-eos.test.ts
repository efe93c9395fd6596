/**
 * Kafka Connect 4.1.1 in distributed mode with exactly.once.source.support=enabled, SIGKILLed mid-stream: one
 * worker (Connect's own ConnectDistributed, launched by tests/interop/java/eos-apps/ConnectWorker.java, which
 * prints the REST URL of the free port it was given: listeners=http://127.0.0.1:0) keeps its connector
 * configs, source offsets and statuses in three topics it creates itself with cleanup.policy=compact. Its
 * one connector is Connect's FileStreamSource (connect-file) with exactly.once.support=required and
 * transaction.boundary=interval: every TXN_INTERVAL_MS the task's transactional producer commits one
 * transaction that carries both the lines read since the last one and the file position reached (the source
 * offset, in the offsets topic), so a restarted task resumes exactly where the last committed transaction
 * ended.
 *
 * The test appends numbered lines ("line-000001", ...) to the source file while the worker runs, at most AHEAD
 * lines past the target topic's high watermark, so lines keep arriving across every run and also while the
 * worker is down. The worker is SIGKILLed KILLS times, each after the seeded k-th (3-6) advance of the
 * target's last stable offset during its run (a commit of the task's transaction), at the first moment after
 * that when the target's high watermark is past its LSO (records of an open transaction are in the log), and a
 * seeded 0-100 ms later; each restart is a new member of the worker group, which takes the connector
 * and its task over once the killed member's session (6 s) expired, fences the killed task's producer (the
 * leader's zombie fencing, then the new task's InitProducerId) and reads the committed offset back. The input
 * ends FINAL_LINES lines after the last kill; the last run copies them and is stopped with SIGTERM.
 *
 * The offsets topic gets 1 s segments (offset.storage.segment.ms), and before the last worker starts the test
 * waits until the broker's log cleaner has compacted it: that worker reads the connector's offsets back from a
 * compacted topic.
 *
 * Then the target topic is read read_committed (raw Fetch, aborted transactions honoured): it holds every line
 * of the file exactly once, in file order, and nothing else; every data batch is transactional and nothing is
 * left hanging (LSO = high watermark). Also: Connect created its three topics compacted, and the connector and
 * its task ended RUNNING on the last worker.
 *
 *   bun test --timeout 300000 tests/interop/kafka-connect-eos.test.ts
 *   EOS_APPS_TARGET=apache ...             (the same against Apache Kafka 4.1.1: is it Connect or bunka?)
 *   EOS_CONNECT_SEED=1234 ...              (another seed; "random" picks one, printed at the end)
 *   EOS_CONNECT_KILLS=4 EOS_CONNECT_FINAL_LINES=3000 ...
 *   EOS_APPS_VERBOSE=1 ...                 (every run's stdout/stderr tail)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
  startTarget,
  topicConfigs,
  waitForCondition,
  type Target,
} from "../support/eos-apps.ts";
import { caseRandom, envSeed } from "../support/fuzz-support.ts";
import { utf8 } from "../support/record-decoder.ts";
import { WireClient } from "../support/wire-client.ts";

const SEED = envSeed("EOS_CONNECT_SEED", 0xc0ec_e05e);
const KILLS = Number(process.env.EOS_CONNECT_KILLS ?? 3);
/** Lines appended after the last kill, for the last run; and a bound on the whole file. */
const FINAL_LINES = Number(process.env.EOS_CONNECT_FINAL_LINES ?? 1000);
const MAX_LINES = 100_000;
/** Lines per append, and how far (in lines) the file may run ahead of the target topic. */
const CHUNK = 50;
const AHEAD = 600;
/**
 * The file source task's batch.size, the most lines one poll returns: more than the file ever holds. A poll that
 * stops at batch.size keeps the lines it has already read beyond it in its buffer, and the task only looks at
 * them again once the file grows, so the file's last lines would never arrive.
 */
const BATCH = 2 * MAX_LINES;
/**
 * A run is killed after the k-th advance of the target's LSO it caused, k in this range, once an open
 * transaction's records are in the log, and 0-100 ms later (its transactions are open for TXN_INTERVAL_MS).
 */
const KILL_AFTER_COMMITS = { min: 3, max: 6 };
const KILL_DELAY_MAX_MS = 100;
/**
 * transaction.boundary.interval.ms. With transaction.boundary=poll a transaction would hold one poll's lines and
 * be committed as soon as they are acknowledged, open for a few ms: a kill would hardly ever find one open.
 */
const TXN_INTERVAL_MS = 300;
/**
 * The offsets topic's own configs, passed by the worker when it creates the topic (offset.storage.<config>):
 * segments rolled every second and cleanable as soon as anything is dirty, with the brokers' cleaner looking
 * every CLEANER_BACKOFF_MS, so that the last worker reads the connector's offsets back from a compacted topic.
 */
const OFFSET_TOPIC_CONFIGS = { "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01" };
const CLEANER_BACKOFF_MS = 1000;
const TEST_TIMEOUT_MS = 240_000;

const GROUP = "connect-eos";
const CONFIG_TOPIC = "connect-eos-configs";
const OFFSET_TOPIC = "connect-eos-offsets";
const STATUS_TOPIC = "connect-eos-status";
const TARGET_TOPIC = "connect-eos-lines";
const CONNECTOR = "file-source";
const OFFSET_PARTITIONS = 3;

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

interface KillPlan {
  /** Killed once the target's last stable offset advanced this many times during its run... */
  commits: number;
  /** ...and this many ms more (the kill's random moment, not a wait for anything). */
  delayMs: number;
}

function planKills(): KillPlan[] {
  const rng = caseRandom(SEED, 1);
  return Array.from({ length: KILLS }, () => ({ commits: rng.int(KILL_AFTER_COMMITS.min, KILL_AFTER_COMMITS.max), delayMs: rng.int(0, KILL_DELAY_MAX_MS) }));
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const lineText = (n: number) => `line-${String(n).padStart(6, "0")}`;

function workerProperties(bootstrap: string): string {
  const props: Record<string, string | number> = {
    "bootstrap.servers": bootstrap,
    "group.id": GROUP,
    "config.storage.topic": CONFIG_TOPIC,
    "offset.storage.topic": OFFSET_TOPIC,
    "status.storage.topic": STATUS_TOPIC,
    "config.storage.replication.factor": 1,
    "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1,
    "offset.storage.partitions": OFFSET_PARTITIONS,
    "status.storage.partitions": 1,
    ...Object.fromEntries(Object.entries(OFFSET_TOPIC_CONFIGS).map(([name, value]) => [`offset.storage.${name}`, value])),
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    "exactly.once.source.support": "enabled",
    listeners: "http://127.0.0.1:0",
    // Connect's plugins (connect-file among them) are on the classpath with their service manifests: no scan.
    "plugin.discovery": "service_load",
    // A restarted worker is a new member: the killed one's tasks go to it once its session expired, not after
    // the default 5 minutes that allow a departed worker to come back.
    "scheduled.rebalance.max.delay.ms": 0,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
  };
  return Object.entries(props)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")
    .concat("\n");
}

function connectorConfig(file: string): Record<string, string> {
  return {
    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
    "tasks.max": "1",
    file,
    topic: TARGET_TOPIC,
    "batch.size": String(BATCH),
    "exactly.once.support": "required",
    "transaction.boundary": "interval",
    "transaction.boundary.interval.ms": String(TXN_INTERVAL_MS),
  };
}

async function rest(url: string, method: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text.length > 0 ? JSON.parse(text) : null };
}

describe(`Kafka Connect file source, exactly.once.source.support=enabled, worker SIGKILLed ${KILLS} times (${EOS_APPS_TARGET})`, () => {
  test("every line of the source file is in the target topic exactly once, in order, read_committed", async () => {
    const started = Date.now();
    const t = target!;
    await createTopics(t.port, [{ name: TARGET_TOPIC, partitions: 1 }]);
    const plan = planKills();
    const dir = mkdtempSync(join(tmpdir(), "connect-eos-"));
    const propsFile = join(dir, "worker.properties");
    const sourceFile = join(dir, "source.txt");
    writeFileSync(propsFile, workerProperties(t.bootstrap));
    writeFileSync(sourceFile, "");
    const wire = await WireClient.connect(t.port);
    const targetHwm = async () => (await endOffsetsOn(wire, TARGET_TOPIC, 1, 0))[0]!;
    const targetLso = async () => (await endOffsetsOn(wire, TARGET_TOPIC, 1, 1))[0]!;

    const runs: JvmApp[] = [];
    /** Per run, when (seconds after its start) it listened, first committed, and was killed or stopped. */
    const timeline: string[] = [];
    const since = (ms: number) => `${((Date.now() - ms) / 1000).toFixed(1)} s`;
    /** Starts a worker and resolves with its REST URL once the worker printed it. */
    const startWorker = async () => {
      const worker = new JvmApp(`connect worker run ${runs.length + 1}`, classpath, "ConnectWorker", [propsFile]);
      const startedMs = Date.now();
      runs.push(worker);
      const url = (await worker.waitForLine("its REST URL", (l) => l.startsWith("REST "), 90_000)).slice("REST ".length).replace(/\/$/, "");
      timeline.push(`run ${runs.length}: REST after ${since(startedMs)}`);
      return { worker, url, startedMs };
    };

    // The file grows by whole lines, at most AHEAD lines past the target's high watermark, until `inputEnd`.
    let written = 0;
    let inputEnd = MAX_LINES;
    let stopWriting = false;
    let wroteAll = false;
    const writing = (async () => {
      while (written < inputEnd && !stopWriting) {
        await waitForCondition("the connector to catch up with the file", async () => stopWriting || written - (await targetHwm()) < AHEAD, 180_000, 20);
        if (stopWriting) return;
        const n = Math.min(CHUNK, inputEnd - written);
        appendFileSync(sourceFile, Array.from({ length: n }, (_, i) => `${lineText(written + i + 1)}\n`).join(""));
        written += n;
      }
      wroteAll = true;
    })();
    let writeError: unknown;
    writing.catch((e) => (writeError = e));
    const assertWriting = () => {
      if (writeError !== undefined) throw new Error(`appending to the source file failed: ${writeError}`);
      if (written >= MAX_LINES && inputEnd === MAX_LINES) throw new Error(`${MAX_LINES} lines written and the kills are not done`);
    };

    const killLog: string[] = [];
    let finalStatus: any;
    let offsetsRemovedBeforeLastRun = 0;
    try {
      for (const [i, kill] of plan.entries()) {
        const { worker, url, startedMs } = await startWorker();
        if (i === 0) {
          // The REST server answers before the worker has joined its group; until then a write is refused with 409.
          let created = { status: 0, json: null as any };
          await waitForCondition(
            "the worker to accept the connector",
            async () => {
              created = await rest(`${url}/connectors`, "POST", { name: CONNECTOR, config: connectorConfig(sourceFile) });
              return created.status !== 409;
            },
            60_000,
            200,
          );
          expect({ status: created.status, name: created.json?.name }).toEqual({ status: 201, name: CONNECTOR });
        }
        let lso = await targetLso();
        let advances = 0;
        await waitForCondition(
          `${worker.label} to commit ${kill.commits} transactions`,
          async () => {
            assertWriting();
            if (worker.exitCode !== null) throw new Error(`${worker.label} exited (${worker.exitCode})\n${worker.diagnostics()}`);
            const now = await targetLso();
            if (now > lso && advances++ === 0) timeline.push(`first commit after ${since(startedMs)}`);
            lso = now;
            return advances >= kill.commits;
          },
          90_000,
          20,
        );
        await waitForCondition(
          `${worker.label}'s open transaction to reach the log`,
          async () => {
            if (worker.exitCode !== null) throw new Error(`${worker.label} exited (${worker.exitCode})\n${worker.diagnostics()}`);
            const [hwm, lsoNow] = await Promise.all([targetHwm(), targetLso()]);
            return hwm > lsoNow;
          },
          30_000,
          5,
        );
        if (kill.delayMs > 0) await Bun.sleep(kill.delayMs);
        await worker.kill();
        timeline.push(`killed after ${since(startedMs)}`);
        killLog.push(`${kill.delayMs} ms after commit ${kill.commits} and an open transaction in the log (LSO ${lso}, ${written} lines written)`);
      }
      inputEnd = written + FINAL_LINES;

      // The offsets the last worker reads back: compacted by the broker's log cleaner.
      const removed: number[] = [];
      await waitForCondition(
        "the log cleaner to compact the offsets topic",
        async () => {
          for (let p = 0; p < OFFSET_PARTITIONS; p++) removed[p] = await removedByCleaner(wire, OFFSET_TOPIC, p);
          return sum(removed) > 0;
        },
        60_000,
        500,
        () => `records removed per partition: ${removed.join(",")}`,
      );
      offsetsRemovedBeforeLastRun = sum(removed);

      const { worker: last, url, startedMs } = await startWorker();
      const reader = new CommittedReader(wire, TARGET_TOPIC, 0);
      let seen = 0;
      await waitForCondition(
        "every line of the file in the target topic, read_committed",
        async () => {
          assertWriting();
          if (last.exitCode !== null) throw new Error(`${last.label} exited (${last.exitCode})\n${last.diagnostics()}`);
          seen += (await reader.poll()).length;
          if (seen > inputEnd) throw new Error(`the target topic holds ${seen} committed records, more than the file's ${inputEnd} lines`);
          return wroteAll && seen === written;
        },
        120_000,
        200,
        () => `${seen} committed records read for ${written} lines written; LSO ${reader.lastStableOffset}, high watermark ${reader.highWatermark}\n${last.diagnostics()}`,
      );
      timeline.push(`every line after ${since(startedMs)}`);
      finalStatus = (await rest(`${url}/connectors/${CONNECTOR}/status`, "GET")).json;
      // A JVM ended by SIGTERM exits 143 once its shutdown hooks (Connect's orderly stop) ran.
      const stopMs = Date.now();
      const stopped = await last.stop("SIGTERM", 45_000);
      // The stacks say where an orderly stop hung (in the worker, or waiting for an answer from the broker).
      if (stopped !== 143) throw new Error(`${last.label} did not stop in order on SIGTERM (exit ${stopped})\n${last.threadDump}\n${last.diagnostics(60)}`);
      timeline.push(`stopped in ${since(stopMs)}`);
      await writing;
    } finally {
      stopWriting = true;
      await writing.catch(() => undefined);
      for (const worker of runs) await worker.kill();
      if (process.env.EOS_APPS_VERBOSE) for (const worker of runs) console.log(worker.diagnostics(40));
      wire.close();
      rmSync(dir, { recursive: true, force: true });
    }

    expect({ connector: finalStatus?.connector?.state, tasks: finalStatus?.tasks?.map((task: { id: number; state: string }) => `${task.id} ${task.state}`) }).toEqual({
      connector: "RUNNING",
      tasks: ["0 RUNNING"],
    });

    // The target topic, read_committed from the beginning: the file's lines, each once, in order.
    const reading = await WireClient.connect(t.port);
    let reader: CommittedReader;
    let values: (string | null)[];
    try {
      reader = new CommittedReader(reading, TARGET_TOPIC, 0);
      values = (await reader.poll()).map((r) => utf8(r.value));
    } finally {
      reading.close();
    }
    const want = Array.from({ length: written }, (_, i) => lineText(i + 1));
    if (JSON.stringify(values) !== JSON.stringify(want)) {
      const counts = new Map<string | null, number>();
      for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
      const duplicated = [...counts].filter(([, n]) => n > 1).map(([v]) => v);
      const missing = want.filter((v) => !counts.has(v));
      const firstDiff = want.findIndex((v, i) => values[i] !== v);
      throw new Error(
        `the target topic is not the file exactly once, in order: ${values.length} records for ${want.length} lines; ${duplicated.length} duplicated (${duplicated.slice(0, 5).join(",")}), ` +
          `${missing.length} missing (${missing.slice(0, 5).join(",")}); first difference at ${firstDiff}: got ${values[firstDiff]}, want ${want[firstDiff]}`,
      );
    }
    expect(values).toEqual(want);
    expect({ lastStableOffset: reader.lastStableOffset, nonTransactionalBatches: reader.nonTransactionalBatches }).toEqual({ lastStableOffset: reader.highWatermark, nonTransactionalBatches: 0 });

    // Connect's own topics, created by the worker, compacted.
    expect(Object.fromEntries(await partitionCounts(t.port, [CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC]))).toEqual({ [CONFIG_TOPIC]: 1, [OFFSET_TOPIC]: OFFSET_PARTITIONS, [STATUS_TOPIC]: 1 });
    for (const topic of [CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC]) expect({ topic, policy: (await topicConfigs(t.port, topic))["cleanup.policy"] }).toEqual({ topic, policy: "compact" });
    const offsetConfigs = await topicConfigs(t.port, OFFSET_TOPIC);
    expect(Object.fromEntries(Object.keys(OFFSET_TOPIC_CONFIGS).map((name) => [name, offsetConfigs[name]]))).toEqual(OFFSET_TOPIC_CONFIGS);

    console.log(
      `Kafka Connect file source on ${EOS_APPS_TARGET} (seed ${SEED}): ${written} lines copied exactly once by ${runs.length} worker runs, killed ${killLog.join(", ")}; ` +
        `${reader.commitMarkers} committed and ${reader.abortMarkers} aborted transactions (${reader.abortedRecords} records hidden); ` +
        `the last worker read the offsets back after the cleaner removed ${offsetsRemovedBeforeLastRun} records from them; ${since(started)} (${timeline.join(", ")})`,
    );
  }, TEST_TIMEOUT_MS);
});
