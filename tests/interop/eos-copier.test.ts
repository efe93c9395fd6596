/**
 * Exactly-once consume-transform-produce copiers across SIGKILLs, each a
 * separate OS process:
 *   - Apache's Java clients (tests/interop/java/EosCopier.java, compiled here with javac into
 *     .cache/java-classes/): read_committed KafkaConsumer in a group with static membership, transactional
 *     KafkaProducer with sendOffsetsToTransaction(offsets, consumer.groupMetadata()) (EOS v2, KIP-447);
 *   - librdkafka through confluent-kafka (tests/interop/python/eos_copier.py): the same with
 *     send_offsets_to_transaction(offsets, consumer.consumer_group_metadata()), as a dynamic member (each
 *     restart is a new member and a new generation, after the killed member's 6 s session expires);
 *   - kafkajs (tests/interop/node/eos-copier.ts, run with bun): transaction.sendOffsets({consumerGroupId,
 *     topics}), consumer with readUncommitted: false and autoCommit: false (kafkajs has no static membership);
 *   - @platformatic/kafka (tests/interop/node/eos-copier-platformatic.ts, run with bun): a Transaction with
 *     addConsumer(consumer) and addOffset(message), consumer with isolationLevel READ_COMMITTED, autocommit off
 *     and static membership;
 *   - franz-go (tests/interop/go/eoscopier, built by scripts/install-interop-clients.sh into .cache/go-bin/):
 *     a kgo.GroupTransactSession (read_committed, require_stable offsets, static membership) whose End
 *     commits the polled offsets in the transaction.
 * For each: an input topic of 3 partitions holding RECORDS records (unique keys, sequence values) from a
 * plain producer and an output topic of 3 partitions. The copier maps input partition p to output partition
 * p, keeps the key, upper-cases the value, and commits a transaction every 50 records (or fewer). It is
 * SIGKILLed KILLS times at seeded moments: half of the runs stop for good inside a seeded transaction (its
 * records flushed to the broker, with or without its offsets sent to the transaction) and are killed
 * there; the others are killed 0-25 ms (seeded) after the seeded k-th commit of their run, somewhere in
 * the next transaction. Every restart uses the same transactional.id and group, and fences the killed
 * instance (the zombie), whose open transaction must be aborted and never become visible. When the group's
 * committed offsets (OffsetFetch with require_stable) equal the input's end offsets, the last copier is
 * killed too and the output is read read_committed twice, with raw Fetch (isolation 1, aborted transactions
 * honoured by the decoder here) and with librdkafka (assign(), no group): every input record appears
 * exactly once, transformed, in input order per partition, and nothing else. Also: the output's last
 * stable offset reached its high watermark and the transactional id rests in CompleteCommit (nothing left
 * hanging), every output data batch is transactional, and the aborted transactions of the killed instances
 * are really in the log (ABORT markers of at least as many producer epochs as runs were killed inside a
 * transaction after flushing).
 *
 * One more Java run copies into a compacted output topic (cleanup.policy=compact, 2 KiB segments,
 * min.cleanable.dirty.ratio=0.01, the broker's log.cleaner.backoff.ms=100), so that the cleaner rewrites
 * the output's segments while the copiers write to them and are killed. The keys are unique, so a
 * correct cleaner removes only the zombies' aborted records: the same checks hold, read after a pass that
 * reached the output's active segment, and below that point no aborted record is left while the ABORT
 * markers stay (delete.retention.ms is a day).
 *
 *   EOS_COPIER_SEED=1234 bun test --timeout 600000 tests/interop/eos-copier.test.ts     (another seed; "random")
 *   EOS_COPIER_KILLS=6 EOS_COPIER_RECORDS=6000 ...                                      (more of both)
 *   EOS_COPIER_TARGET=apache ...     (the same copiers against Apache Kafka 4.1.1: when a client fails here,
 *                                     this tells whether the client or bunka is wrong)
 *   EOS_COPIER_VERBOSE=1 ...         (print every run's stdout/stderr tail)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { DEFAULT_CLEANER_CONFIG } from "../../src/domain/cleaner-config.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin, startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { ensureInteropClients, goHelper, VENV_PYTHON } from "../support/interop-clients.ts";
import { caseRandom, envSeed } from "../support/fuzz-support.ts";
import { decodeRecordSet, readPartitionFully, utf8 } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const SEED = envSeed("EOS_COPIER_SEED", 0xe05c_0008);
const RECORDS = Number(process.env.EOS_COPIER_RECORDS ?? 3000);
const KILLS = Number(process.env.EOS_COPIER_KILLS ?? 4);
const TARGET = process.env.EOS_COPIER_TARGET === "apache" ? "apache" : "bunka";
const PARTITIONS = 3;
const TXN_SIZE = 50;
/** A kill after the k-th commit of a run, or inside transaction k: k in this range. */
const KILL_AT = { min: 2, max: 8 };
/**
 * A kill "after commit k" lands 0..this many ms after the copier reported it: somewhere in the next
 * transaction (a transaction takes a few ms to tens of ms). This is the kill's random moment, not a wait.
 */
const AFTER_COMMIT_KILL_DELAY_MAX_MS = 25;
const TEST_TIMEOUT_MS = 150_000;
/** log.cleaner.backoff.ms on both targets: the cleaner of the compacted-output run looks again this often. */
const CLEANER_BACKOFF_MS = 100;
/** The compacted output's configs; Apache 4.1 refuses segment.bytes below 1 MiB and has internal.segment.bytes for tests. */
const COMPACTED_OUTPUT_CONFIGS = {
  "cleanup.policy": "compact",
  "min.cleanable.dirty.ratio": "0.01",
  ...(TARGET === "apache" ? { "internal.segment.bytes": "2048" } : { "segment.bytes": "2048" }),
};
/**
 * The Java, @platformatic/kafka and franz-go copiers are static members (group.instance.id): a restart
 * replaces the killed member at once. librdkafka and kafkajs (which has no static membership) join as new
 * members: the group rebalances once the killed member's session (6 s) expires, and the new generation is
 * what TxnOffsetCommit is checked against.
 */
const STATIC_MEMBER: Record<ClientName, boolean> = { java: true, librdkafka: false, kafkajs: false, platformatic: true, "franz-go": true };

const PY_COPIER = join(import.meta.dir, "python/eos_copier.py");
const NODE_COPIER = join(import.meta.dir, "node/eos-copier.ts");
const PLATFORMATIC_COPIER = join(import.meta.dir, "node/eos-copier-platformatic.ts");
const JAVA_SOURCE = join(import.meta.dir, "java/EosCopier.java");
const JAVA_CLASSES = join(REPO_ROOT, ".cache/java-classes");
const GO_COPIER = goHelper("eos-copier");

type ClientName = "java" | "librdkafka" | "kafkajs" | "platformatic" | "franz-go";

let bunka: TestBroker | undefined;
let apache: ApacheKafka | undefined;
let bootstrap: string;
let port: number;
let kafkaLibs: string;
const running = new Set<CopierProcess>();

// ---------------------------------------------------------------------------------------------
// Set-up

async function run(cmd: string[], what: string): Promise<void> {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${what} failed (exit ${code}):\n${out}${err}`);
}

/** javac EosCopier.java into .cache/java-classes/ unless the class file is newer than the source. */
async function compileJavaCopier(): Promise<void> {
  const classFile = join(JAVA_CLASSES, "EosCopier.class");
  if (existsSync(classFile) && statSync(classFile).mtimeMs >= statSync(JAVA_SOURCE).mtimeMs) return;
  mkdirSync(JAVA_CLASSES, { recursive: true });
  await run(["javac", "-nowarn", "-d", JAVA_CLASSES, "-cp", `${kafkaLibs}/*`, JAVA_SOURCE], "javac EosCopier.java");
}

beforeAll(async () => {
  kafkaLibs = await ensureKafkaLibs();
  await Promise.all([compileJavaCopier(), ensureInteropClients()]);
  if (TARGET === "apache") {
    apache = await startApacheKafka({
      serverProperties: { "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": false, "log.cleaner.backoff.ms": CLEANER_BACKOFF_MS },
    });
    bootstrap = apache.bootstrap;
    port = apache.port;
  } else {
    bunka = await startTestBroker({
      groupInitialRebalanceDelayMs: 0,
      autoCreateTopicsEnable: false,
      cleaner: { ...DEFAULT_CLEANER_CONFIG, backoffMs: CLEANER_BACKOFF_MS },
    });
    bootstrap = bunka.bootstrap;
    port = bunka.port;
  }
}, 120_000);

afterAll(async () => {
  for (const p of running) await p.kill();
  await bunka?.stop();
  await apache?.stop();
});

// ---------------------------------------------------------------------------------------------
// Copier processes

interface CopierArgs {
  input: string;
  output: string;
  group: string;
  transactionalId: string;
  instanceId: string;
  pauseAt: number;
  pauseStage: "sent" | "offsets" | "-";
}

function copierCommand(client: ClientName, a: CopierArgs): string[] {
  const args = [bootstrap, a.input, a.output, a.group, a.transactionalId, a.instanceId, String(TXN_SIZE), String(a.pauseAt), a.pauseStage];
  switch (client) {
    case "java":
      return [
        javaBin(),
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-XX:+UseSerialGC",
        "-Xmx256m",
        `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`,
        "-cp",
        `${kafkaLibs}/*:${JAVA_CLASSES}`,
        "EosCopier",
        ...args,
      ];
    case "librdkafka":
      return [VENV_PYTHON, PY_COPIER, "copy", ...args];
    case "kafkajs":
      return [process.execPath, NODE_COPIER, ...args];
    case "platformatic":
      return [process.execPath, PLATFORMATIC_COPIER, ...args];
    case "franz-go":
      return [GO_COPIER, ...args];
  }
}

/** One copier run: its stdout lines as they come, waits on them, SIGKILL. */
class CopierProcess {
  readonly lines: string[] = [];
  stderr = "";
  exitCode: number | null = null;
  private readonly proc: ReturnType<typeof Bun.spawn>;
  private readonly done: Promise<void>;
  private wake: () => void = () => undefined;
  private killed = false;

  constructor(
    readonly label: string,
    cmd: string[],
  ) {
    this.proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    running.add(this);
    const readLines = async () => {
      let partial = "";
      const decoder = new TextDecoder();
      for await (const chunk of this.proc.stdout as ReadableStream<Uint8Array>) {
        partial += decoder.decode(chunk, { stream: true });
        const parts = partial.split("\n");
        partial = parts.pop()!;
        this.lines.push(...parts);
        this.wake();
      }
    };
    const readStderr = async () => {
      for await (const chunk of this.proc.stderr as ReadableStream<Uint8Array>) this.stderr = (this.stderr + new TextDecoder().decode(chunk)).slice(-20_000);
    };
    this.done = Promise.all([readLines(), readStderr(), this.proc.exited]).then(([, , code]) => {
      this.exitCode = code;
      running.delete(this);
      this.wake();
    });
  }

  /** Resolves with the first line matching `match`; fails when the copier exits first or on timeout. */
  async waitForLine(what: string, match: (line: string) => boolean, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(match);
      if (hit !== undefined) return hit;
      if (this.exitCode !== null) throw new Error(`${this.label} exited (${this.exitCode}) before ${what}\n${this.diagnostics()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.label}: timed out waiting for ${what}\n${this.diagnostics()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Fails when the copier exited on its own. */
  assertAlive(): void {
    if (this.exitCode !== null && !this.killed) throw new Error(`${this.label} exited (${this.exitCode}) on its own\n${this.diagnostics()}`);
  }

  async kill(): Promise<void> {
    this.killed = true;
    if (this.exitCode === null) this.proc.kill("SIGKILL");
    await this.done;
  }

  diagnostics(): string {
    return `stdout tail:\n${this.lines.slice(-15).join("\n")}\nstderr tail:\n${this.stderr.slice(-4000)}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Wire helpers

async function withClient<T>(fn: (client: WireClient) => Promise<T>): Promise<T> {
  const client = await WireClient.connect(port);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

async function createTopics(names: string[], configs: Record<string, Record<string, string>> = {}): Promise<void> {
  await withClient(async (client) => {
    const res = await client.request(19, 7, {
      topics: names.map((name) => ({
        name,
        numPartitions: PARTITIONS,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries(configs[name] ?? {}).map(([config, value]) => ({ name: config, value })),
      })),
      timeoutMs: 10_000,
      validateOnly: false,
    });
    expect(res.topics.map((t: { errorCode: number }) => t.errorCode)).toEqual(names.map(() => ErrorCode.NONE));
  });
}

/** Until Metadata names a leader for every partition of `topics` (Apache Kafka answers CreateTopics before that). */
async function waitForLeaders(topics: string[]): Promise<void> {
  await sleepUntil(
    `leaders of ${topics.join(", ")}`,
    () =>
      withClient(async (client) => {
        const md = await client.request(3, 12, { topics: topics.map((name) => ({ name, topicId: ZERO_UUID })), allowAutoTopicCreation: false });
        return md.topics.every(
          (t: { errorCode: number; partitions: { errorCode: number; leaderId: number }[] }) =>
            t.errorCode === ErrorCode.NONE && t.partitions.length === PARTITIONS && t.partitions.every((p) => p.errorCode === ErrorCode.NONE && p.leaderId >= 0),
        );
      }),
    30_000,
  );
}

async function endOffsets(topic: string): Promise<number[]> {
  return await withClient(async (client) => {
    const res = await client.request(2, 7, {
      replicaId: -1,
      isolationLevel: 0,
      topics: [{ name: topic, partitions: Array.from({ length: PARTITIONS }, (_, p) => ({ partitionIndex: p, currentLeaderEpoch: -1, timestamp: -1 })) }],
    });
    const out: number[] = [];
    for (const p of res.topics[0].partitions) {
      if (p.errorCode !== ErrorCode.NONE) throw new Error(`ListOffsets ${topic}-${p.partitionIndex}: error ${p.errorCode}`);
      out[p.partitionIndex] = p.offset;
    }
    return out;
  });
}

/** The group's stable committed offsets per partition (OffsetFetch v8, require_stable), or null while unstable. */
async function committedOffsets(group: string, topic: string): Promise<number[] | null> {
  return await withClient(async (client) => {
    const res = await client.request(9, 8, {
      groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: Array.from({ length: PARTITIONS }, (_, p) => p) }] }],
      requireStable: true,
    });
    const g = res.groups[0];
    if (g.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT) return null;
    if (g.errorCode !== ErrorCode.NONE) throw new Error(`OffsetFetch ${group}: error ${g.errorCode}`);
    const out: number[] = [];
    for (const p of g.topics[0].partitions) {
      if (p.errorCode === ErrorCode.UNSTABLE_OFFSET_COMMIT) return null;
      if (p.errorCode !== ErrorCode.NONE) throw new Error(`OffsetFetch ${group} ${topic}-${p.partitionIndex}: error ${p.errorCode}`);
      out[p.partitionIndex] = p.committedOffset;
    }
    return out;
  });
}

interface CommittedRead {
  /** [key, value] of every committed data record, in offset order. */
  records: [string, string][];
  highWatermark: number;
  lastStableOffset: number;
  abortedRecords: number;
  /** Offsets of the aborted records still in the log. */
  abortedOffsets: number[];
  /** Producer epochs of the ABORT markers (one per aborted transaction of the copier's producer id). */
  abortEpochs: Set<number>;
  commitMarkers: number;
  /** Data batches that are not transactional (there must be none). */
  nonTransactionalBatches: number;
}

/**
 * Reads one partition read_committed with raw Fetch v12 (isolation 1) from 0 to its last stable offset,
 * dropping the records of the aborted transactions the answers list, as a Java consumer does: an aborted
 * transaction of producer P starting at offset F hides P's transactional batches from F up to P's next
 * ABORT marker.
 */
async function readCommitted(client: WireClient, topic: string, partition: number): Promise<CommittedRead> {
  const out: CommittedRead = {
    records: [],
    highWatermark: -1,
    lastStableOffset: -1,
    abortedRecords: 0,
    abortedOffsets: [],
    abortEpochs: new Set(),
    commitMarkers: 0,
    nonTransactionalBatches: 0,
  };
  let offset = 0;
  for (;;) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1024 * 1024,
      isolationLevel: 1,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic, partitions: [{ partition, fetchOffset: offset, partitionMaxBytes: 1024 * 1024, logStartOffset: -1 }] }],
    });
    if (res.errorCode !== ErrorCode.NONE) throw new Error(`fetch ${topic}-${partition}@${offset}: top-level error ${res.errorCode}`);
    const data = res.responses[0].partitions[0];
    if (data.errorCode !== ErrorCode.NONE) throw new Error(`fetch ${topic}-${partition}@${offset}: error ${data.errorCode}`);
    if (out.lastStableOffset < 0) {
      out.highWatermark = data.highWatermark;
      out.lastStableOffset = data.lastStableOffset;
    }
    if (offset >= out.lastStableOffset) break;
    const pending = [...((data.abortedTransactions ?? []) as { producerId: number; firstOffset: number }[])].sort((a, b) => a.firstOffset - b.firstOffset);
    const abortedProducers = new Set<number>();
    // A compacted output may hold batches the cleaner emptied or thinned out.
    const set = decodeRecordSet(data.records ?? new Uint8Array(0), { cleaned: true });
    let progressed = false;
    for (const batch of set.batches) {
      const h = batch.header;
      const lastOffset = h.baseOffset + h.lastOffsetDelta;
      if (lastOffset < offset) continue;
      if (h.baseOffset >= out.lastStableOffset) throw new Error(`fetch ${topic}-${partition}: read_committed answer has a batch at ${h.baseOffset}, at or past the LSO ${out.lastStableOffset}`);
      while (pending.length > 0 && pending[0]!.firstOffset <= lastOffset) abortedProducers.add(pending.shift()!.producerId);
      if (h.isControl && batch.records.length === 0) {
        // A marker the cleaner emptied: nothing to count.
      } else if (h.isControl) {
        const key = batch.records[0]!.key!;
        const type = new DataView(key.buffer, key.byteOffset, key.byteLength).getInt16(2);
        if (type === 0) {
          out.abortEpochs.add(h.producerEpoch);
          abortedProducers.delete(h.producerId);
        } else {
          out.commitMarkers++;
        }
      } else if (h.isTransactional && abortedProducers.has(h.producerId)) {
        const aborted = batch.records.filter((r) => r.offset >= offset);
        out.abortedRecords += aborted.length;
        out.abortedOffsets.push(...aborted.map((r) => r.offset));
      } else {
        if (!h.isTransactional) out.nonTransactionalBatches++;
        for (const r of batch.records) if (r.offset >= offset) out.records.push([utf8(r.key)!, utf8(r.value)!]);
      }
      offset = lastOffset + 1;
      progressed = true;
    }
    if (!progressed) throw new Error(`fetch ${topic}-${partition}@${offset}: no batch below the LSO ${out.lastStableOffset}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The scenario

const sleepUntil = async (what: string, condition: () => Promise<boolean>, timeoutMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

interface KillPlan {
  mode: "after-commit" | "pause";
  at: number;
  stage: "sent" | "offsets" | "-";
  /** after-commit: how long after the copier reported commit `at` the SIGKILL is sent (the kill's moment). */
  delayMs: number;
}

function planKills(index: number): KillPlan[] {
  const rng = caseRandom(SEED, index);
  // Half stop inside a transaction (alternating: records only, records and offsets), half die mid-flight.
  const modes: KillPlan[] = Array.from({ length: KILLS }, (_, i) =>
    i % 2 === 0 ? { mode: "pause", at: 0, stage: i % 4 === 0 ? "offsets" : "sent", delayMs: 0 } : { mode: "after-commit", at: 0, stage: "-", delayMs: 0 },
  );
  for (let i = modes.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [modes[i], modes[j]] = [modes[j]!, modes[i]!];
  }
  for (const m of modes) {
    m.at = rng.int(KILL_AT.min, KILL_AT.max);
    if (m.mode === "after-commit") m.delayMs = rng.int(0, AFTER_COMMIT_KILL_DELAY_MAX_MS);
  }
  return modes;
}

/** Per partition of a compacted topic: the offset below which a cleaning pass has been, and the active segment's base. */
async function cleanerProgress(topic: string): Promise<{ cleanedUpTo: number[]; activeBase: number[] }> {
  const cleanedUpTo: number[] = [];
  const activeBase: number[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    if (bunka) {
      const partition = await bunka.broker.services.partitions.get(topic, p);
      if (partition === undefined) throw new Error(`no partition ${topic}-${p}`);
      cleanedUpTo.push(partition.log.cleanerCheckpoint.firstDirtyOffset);
      activeBase.push(partition.log.activeSegmentBaseOffset);
    } else {
      // Apache's cleaner-offset-checkpoint ("0", a count, then "<topic> <partition> <offset>" lines), and its segment files.
      const logDir = join(apache!.dataDir, "kraft-logs");
      const checkpoint = join(logDir, "cleaner-offset-checkpoint");
      const line = existsSync(checkpoint) ? readFileSync(checkpoint, "utf8").split("\n").find((l) => l.startsWith(`${topic} ${p} `)) : undefined;
      cleanedUpTo.push(line === undefined ? -1 : Number(line.split(" ")[2]));
      const bases = readdirSync(join(logDir, `${topic}-${p}`)).filter((f) => f.endsWith(".log")).map((f) => Number(f.slice(0, -4)));
      activeBase.push(Math.max(...bases));
    }
  }
  return { cleanedUpTo, activeBase };
}

async function copierScenario(client: ClientName, index: number, compactedOutput = false): Promise<void> {
  const started = Date.now();
  const name = compactedOutput ? `${client}-compacted` : client;
  const input = `eos-${name}-in`;
  const output = `eos-${name}-out`;
  const group = `eos-${name}-group`;
  const transactionalId = `eos-${name}-txn`;
  await createTopics([input, output], compactedOutput ? { [output]: COMPACTED_OUTPUT_CONFIGS } : {});
  await waitForLeaders([input, output]);

  // The input: RECORDS records, record i in partition i % 3, key "key-<i>", value "value-<i>", from a plain
  // producer. One partition per send: kafkajs retries a whole send, which would duplicate the partitions a
  // partly failed request did write.
  const intended = Array.from({ length: PARTITIONS }, (_, p) =>
    Array.from({ length: RECORDS }, (_, i) => i)
      .filter((i) => i % PARTITIONS === p)
      .map((i) => [`key-${i}`, `value-${i}`] as [string, string]),
  );
  const kafka = new Kafka({ clientId: `eos-${client}-fill`, brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  for (let p = 0; p < PARTITIONS; p++) {
    for (let from = 0; from < intended[p]!.length; from += 500) {
      const messages = intended[p]!.slice(from, from + 500).map(([key, value]) => ({ key, value, partition: p }));
      await producer.send({ topic: input, acks: -1, messages });
    }
  }
  await producer.disconnect();
  const inputEnds = await endOffsets(input);
  expect(inputEnds).toEqual(intended.map((records) => records.length));

  const plan = planKills(index);
  const runs: CopierProcess[] = [];
  const start = (pauseAt: number, pauseStage: CopierArgs["pauseStage"]) => {
    const p = new CopierProcess(`${client} copier run ${runs.length + 1}`, copierCommand(client, { input, output, group, transactionalId, instanceId: STATIC_MEMBER[client] ? `${client}-copier` : "-", pauseAt, pauseStage }));
    runs.push(p);
    return p;
  };
  const commits = (p: CopierProcess) => p.lines.filter((l) => l.startsWith("COMMIT ")).length;
  const killLog: string[] = [];
  try {
    for (const kill of plan) {
      const p = start(kill.mode === "pause" ? kill.at : 0, kill.stage);
      if (kill.mode === "pause") {
        await p.waitForLine(`transaction ${kill.at} to pause (${kill.stage})`, (l) => l.startsWith("PAUSED "), 60_000);
      } else {
        await p.waitForLine(`commit ${kill.at}`, (l) => l.startsWith(`COMMIT ${kill.at} `), 60_000);
        if (kill.delayMs > 0) await Bun.sleep(kill.delayMs);
      }
      await p.kill();
      killLog.push(kill.mode === "pause" ? `inside txn ${kill.at} (${kill.stage})` : `${kill.delayMs} ms after commit ${kill.at}`);
    }
    const last = start(0, "-");
    await sleepUntil(
      "the group's committed offsets to reach the input's end offsets",
      async () => {
        last.assertAlive();
        const committed = await committedOffsets(group, input);
        return committed !== null && committed.every((o, p) => o === inputEnds[p]);
      },
      90_000,
    );
    await last.kill();
  } finally {
    for (const p of runs) await p.kill();
  }

  // A compacted output is read once a pass has reached its active segment: everything below it was
  // judged by the cleaner, with every transaction decided.
  let cleaned: { cleanedUpTo: number[]; activeBase: number[] } | undefined;
  if (compactedOutput) {
    await sleepUntil(
      "a cleaning pass up to the compacted output's active segments",
      async () => {
        cleaned = await cleanerProgress(output);
        return cleaned.cleanedUpTo.every((c, p) => c >= cleaned!.activeBase[p]!);
      },
      60_000,
    );
    // The output rolled segments (so there was something to clean) on every partition.
    for (const base of cleaned!.activeBase) expect(base).toBeGreaterThan(0);
  }

  const fatal = runs.flatMap((p) => p.lines.filter((l) => l.startsWith("FATAL") || l.startsWith("CRASH")).map((l) => `${p.label}: ${l}`));
  expect(fatal).toEqual([]);
  const aborts = runs.flatMap((p) => p.lines.filter((l) => l.startsWith("ABORT")).map((l) => `${p.label}: ${l}`));

  // The group's offsets are the input's ends, stable (nothing staged is left over).
  expect(await committedOffsets(group, input)).toEqual(inputEnds);

  // The transactional id rests in CompleteCommit with no partitions: no transaction of any run is left open.
  // The last run was killed right after an EndTxn was answered, at its durable decision: the broker
  // writes the markers and Complete* after the answer, so the check waits (bounded) for that to settle.
  const describe = () => withClient((wire) => wire.request(65, 0, { transactionalIds: [transactionalId] }));
  let described = await describe();
  for (let i = 0; i < 150 && described.transactionStates[0].transactionState.startsWith("Prepare"); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    described = await describe();
  }
  const state = described.transactionStates[0];
  expect({ errorCode: state.errorCode, state: state.transactionState, topics: state.topics }).toEqual({ errorCode: ErrorCode.NONE, state: "CompleteCommit", topics: [] });

  // The input as it was written, and the output read_committed: exactly the input, transformed, in order.
  const reads = await withClient(async (wire) => {
    const inputs: [string, string][][] = [];
    const outputs: CommittedRead[] = [];
    for (let p = 0; p < PARTITIONS; p++) {
      inputs.push((await readPartitionFully(wire, input, p)).records.map((r) => [utf8(r.key)!, utf8(r.value)!] as [string, string]));
      outputs.push(await readCommitted(wire, output, p));
    }
    return { inputs, outputs };
  });
  expect(reads.inputs).toEqual(intended);
  const expected = intended.map((records) => records.map(([k, v]) => [k, v.toUpperCase()] as [string, string]));
  for (let p = 0; p < PARTITIONS; p++) {
    const got = reads.outputs[p]!;
    const want = expected[p]!;
    if (JSON.stringify(got.records) !== JSON.stringify(want)) {
      const seen = new Map<string, number>();
      for (const [k] of got.records) seen.set(k, (seen.get(k) ?? 0) + 1);
      const duplicates = [...seen].filter(([, n]) => n > 1).map(([k]) => k);
      const missing = want.filter(([k]) => !seen.has(k)).map(([k]) => k);
      const firstDiff = want.findIndex((w, i) => JSON.stringify(w) !== JSON.stringify(got.records[i]));
      throw new Error(
        `${client}: output partition ${p} is not input partition ${p} exactly once, in order: ${got.records.length} records for ${want.length}; ` +
          `${duplicates.length} duplicated (${duplicates.slice(0, 5).join(",")}), ${missing.length} missing (${missing.slice(0, 5).join(",")}); ` +
          `first difference at ${firstDiff}: got ${JSON.stringify(got.records[firstDiff])}, want ${JSON.stringify(want[firstDiff])}`,
      );
    }
    expect(got.records).toEqual(want);
    // No transaction left hanging, only transactional data.
    expect(got.lastStableOffset).toBe(got.highWatermark);
    expect(got.nonTransactionalBatches).toBe(0);
  }

  // librdkafka's read_committed consumer sees the same.
  const reader = Bun.spawn([VENV_PYTHON, PY_COPIER, "read", bootstrap, output, String(PARTITIONS)], { stdout: "pipe", stderr: "pipe" });
  const [readOut, readErr, readCode] = await Promise.all([new Response(reader.stdout).text(), new Response(reader.stderr).text(), reader.exited]);
  if (readCode !== 0) throw new Error(`eos_copier.py read exited ${readCode}:\n${readErr}`);
  const librdkafkaView = JSON.parse(readOut) as Record<string, [string, string][]>;
  for (let p = 0; p < PARTITIONS; p++) expect(librdkafkaView[String(p)]).toEqual(expected[p]!);

  // The zombies' transactions were in the log, and aborted: every kill inside a transaction happened after
  // its records were flushed, so each left an ABORT marker (of its own producer epoch) on some partition.
  const abortEpochs = new Set(reads.outputs.flatMap((o) => [...o.abortEpochs]));
  const abortedRecords = reads.outputs.reduce((n, o) => n + o.abortedRecords, 0);
  const pauseKills = plan.filter((k) => k.mode === "pause").length;
  expect(abortEpochs.size).toBeGreaterThanOrEqual(pauseKills);
  if (cleaned) {
    // The cleaner removed those records (the markers, with a day of delete.retention.ms, stay): none is
    // left below the point its passes reached.
    expect(reads.outputs.map((o, p) => o.abortedOffsets.filter((offset) => offset < cleaned!.cleanedUpTo[p]!))).toEqual(reads.outputs.map(() => []));
  } else if (pauseKills > 0) {
    expect(abortedRecords).toBeGreaterThan(0);
  }

  if (process.env.EOS_COPIER_VERBOSE) for (const p of runs) console.log(`--- ${p.label}\n${p.diagnostics()}`);
  const totalCommits = runs.reduce((n, p) => n + commits(p), 0);
  console.log(
    `${client} on ${TARGET} (seed ${SEED}): ${RECORDS} records copied exactly once by ${runs.length} runs (${totalCommits} commits), ` +
      `killed ${killLog.join(", ")}; ${abortEpochs.size} aborted transactions (epochs ${[...abortEpochs].sort((a, b) => a - b).join(",")}) ` +
      `hid ${abortedRecords} records${cleaned ? ` left above the cleaned offsets ${cleaned.cleanedUpTo.join(",")} of a compacted output` : ""}; ` +
      `${aborts.length} client-side aborts${aborts.length > 0 ? `: ${aborts.slice(0, 3).join(" | ")}` : ""}; ` +
      `${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}

describe(`EOS consume-transform-produce copiers SIGKILLed ${KILLS} times (${TARGET})`, () => {
  test("Java clients (sendOffsetsToTransaction with the consumer's group metadata)", async () => {
    await copierScenario("java", 0);
  }, TEST_TIMEOUT_MS);

  test("librdkafka (send_offsets_to_transaction with consumer_group_metadata())", async () => {
    await copierScenario("librdkafka", 1);
  }, TEST_TIMEOUT_MS);

  test("kafkajs (transaction.sendOffsets with consumerGroupId)", async () => {
    await copierScenario("kafkajs", 2);
  }, TEST_TIMEOUT_MS);

  test("@platformatic/kafka (Transaction.addConsumer and addOffset)", async () => {
    await copierScenario("platformatic", 4);
  }, TEST_TIMEOUT_MS);

  test("franz-go (GroupTransactSession: End commits the polled offsets in the transaction)", async () => {
    await copierScenario("franz-go", 3);
  }, TEST_TIMEOUT_MS);

  test("Java clients into a compacted output topic, cleaned throughout: exactly once still, the zombies' records cleaned away", async () => {
    await copierScenario("java", 5, true);
  }, TEST_TIMEOUT_MS);
});

