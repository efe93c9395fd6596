#!/usr/bin/env bun
/**
 * Consumer-group benchmark: Apache Kafka against bunka, on the same machine, one after the other, with the
 * same load tool for both (this script, speaking raw Kafka frames through tests/support/wire-client.ts with
 * the generated codecs). Not a test; see docs/benchmarks.md ("Consumer groups").
 *
 *   bun scripts/bench-groups.ts [--only kafka|bunka] [--duration S] [--warmup S] [--groups N]
 *                               [--connections N] [--commit-version V] [--members N] [--runs N]
 *                               [--heartbeat-ms MS] [--data-root DIR]
 *
 * Scenarios, each group of them on a freshly started broker with an empty data dir:
 *   (a) commit throughput: 50 groups with one member each (FindCoordinator, JoinGroup, SyncGroup first, so
 *       commits carry a real generation), every member committing offsets of 4 partitions in a closed loop
 *       (one OffsetCommit in flight per group), over several connections, for --duration seconds after a
 *       --warmup; commits/s and p50/p99 commit latency. The committed offsets are read back (OffsetFetch)
 *       and must be the last ones acknowledged.                                            (broker #1)
 *   (b) rebalance, 10 members join a new group subscribed to a 10-partition topic: from the first JoinGroup
 *       sent until all 10 hold their SyncGroup assignment of one generation with all 10 members, with
 *       group.initial.rebalance.delay.ms at its default (3000 ms)                          (broker #2)
 *   (d) then an 11th member joins that stable group: from its first JoinGroup until all 11 hold their
 *       assignment of the new generation                                                   (broker #2)
 *   (c) as (b), with group.initial.rebalance.delay.ms=0 on both brokers                     (broker #3)
 * (b)-(d) are repeated --runs times on fresh groups; the table shows the median.
 *
 * Members behave like the Java consumer's classic protocol: JoinGroup (MEMBER_ID_REQUIRED, then again with
 * the id), the leader assigns with the range strategy, SyncGroup, then Heartbeat every --heartbeat-ms;
 * REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION on SyncGroup or Heartbeat makes a member rejoin. Session
 * timeout 45 s, rebalance timeout 300 s (the Java defaults).
 *
 * Progress goes to stderr; the results (a text table, then the same in markdown for docs/benchmarks.md) go
 * to stdout. Brokers and temp dirs are removed at the end, on an error and on Ctrl-C.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { resolve } from "node:path";
import { KAFKA_VERSION } from "../tests/support/apache-kafka.ts";
import { assignment as encodeAssignment, subscription } from "../tests/support/consumer-protocol.ts";
import { WireClient } from "../tests/support/wire-client.ts";
import { ErrorCode } from "../src/errors/generated/error-codes.ts";
import {
  type Broker,
  type BrokerKind,
  BUSY_PCT,
  capture,
  connect,
  type CpuReport,
  ensureBunkaBinary,
  environment,
  errName,
  fmtNum,
  fmtRss,
  installSignalHandlers,
  isInterrupted,
  label,
  log,
  missingApis,
  renderReport,
  runCleanups,
  sleep,
  startBrokerForRows,
  startBunkaBroker,
  startKafkaBroker,
  watchCpu,
  watchPeakRss,
} from "./bench-support.ts";

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  only?: BrokerKind;
  durationS: number;
  warmupS: number;
  groups: number;
  connections: number;
  commitVersion: number;
  members: number;
  runs: number;
  heartbeatMs: number;
  dataRoot: string;
  /** A bunka executable to run instead of dist/bunka-linux-x64 (e.g. one built from a clean checkout). */
  bunkaBinary?: string;
}

const COMMIT_PARTITIONS = 4;
const SESSION_TIMEOUT_MS = 45_000; // Java consumer default (session.timeout.ms)
const REBALANCE_TIMEOUT_MS = 300_000; // Java consumer default (max.poll.interval.ms)
const COMMIT_HEARTBEAT_MS = 3000; // Java consumer default (heartbeat.interval.ms), for the (a) members
const DEFAULT_DELAY_MS = 3000; // group.initial.rebalance.delay.ms default, both brokers

const USAGE = `usage: bun scripts/bench-groups.ts [--only kafka|bunka] [--duration S] [--warmup S] [--groups N]
       [--connections N] [--commit-version V] [--members N] [--runs N] [--heartbeat-ms MS] [--data-root DIR]
       [--bunka-binary PATH]

  --only B            run one broker only (kafka or bunka)
  --duration S        (a): seconds of measured committing (default 15)
  --warmup S          (a): seconds of committing before the measurement starts (default 2)
  --groups N          (a): groups, one member each, committing concurrently (default 50)
  --connections N     (a): connections the commits are spread over (default 10)
  --commit-version V  (a): OffsetCommit version, capped at what the broker serves (default 8)
  --members N         (b)-(d): members of the rebalancing group; the topic has N partitions (default 10)
  --runs N            (b)-(d): repetitions on fresh groups; the table shows the median (default 3)
  --heartbeat-ms MS   (b)-(d): the members' heartbeat interval (default 100)
  --data-root DIR     where the brokers' temporary data dirs go (default ${tmpdir()})
  --bunka-binary PATH run this bunka executable (default: dist/bunka-linux-x64, rebuilt when older than src/)
`;

function parseArgs(argv: string[]): Options {
  const o: Options = {
    durationS: 15,
    warmupS: 2,
    groups: 50,
    connections: 10,
    commitVersion: 8,
    members: 10,
    runs: 3,
    heartbeatMs: 100,
    dataRoot: tmpdir(),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined) die(`${flag} needs a value`);
      return v;
    };
    const int = (min: number): number => {
      const n = Number(value());
      if (!Number.isInteger(n) || n < min) die(`${flag} must be an integer >= ${min}`);
      return n;
    };
    switch (flag) {
      case "--only": {
        const v = value();
        if (v !== "kafka" && v !== "bunka") die("--only takes kafka or bunka");
        o.only = v;
        break;
      }
      case "--duration":
        o.durationS = int(1);
        break;
      case "--warmup":
        o.warmupS = int(0);
        break;
      case "--groups":
        o.groups = int(1);
        break;
      case "--connections":
        o.connections = int(1);
        break;
      case "--commit-version":
        o.commitVersion = int(2);
        if (o.commitVersion > 9) die("--commit-version: the codecs go up to 9");
        break;
      case "--members":
        o.members = int(2);
        break;
      case "--runs":
        o.runs = int(1);
        break;
      case "--heartbeat-ms":
        o.heartbeatMs = int(10);
        break;
      case "--data-root":
        o.dataRoot = value();
        break;
      case "--bunka-binary":
        o.bunkaBinary = resolve(value());
        if (!existsSync(o.bunkaBinary)) die(`--bunka-binary: ${o.bunkaBinary} does not exist`);
        break;
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
      default:
        die(`unknown argument ${argv[i]}`);
    }
  }
  return o;
}

function die(message: string): never {
  process.stderr.write(`bench-groups: ${message}\n\n${USAGE}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Protocol helpers

const API = { OffsetCommit: 8, OffsetFetch: 9, FindCoordinator: 10, JoinGroup: 11, Heartbeat: 12, LeaveGroup: 13, SyncGroup: 14, CreateTopics: 19 } as const;
/** The versions the load uses (the classic protocol's latest, FindCoordinator's first batched one), capped at what the broker serves. */
const WANTED: Record<number, number> = { [API.FindCoordinator]: 4, [API.JoinGroup]: 9, [API.SyncGroup]: 5, [API.Heartbeat]: 4, [API.LeaveGroup]: 5, [API.OffsetFetch]: 8, [API.CreateTopics]: 7 };
const GROUP_APIS = [API.CreateTopics, API.FindCoordinator, API.JoinGroup, API.SyncGroup, API.Heartbeat, API.LeaveGroup, API.OffsetCommit, API.OffsetFetch];

type Versions = Record<number, number>;

function versionsFor(broker: Broker, commitVersion: number): Versions {
  const v: Versions = {};
  for (const [key, want] of Object.entries({ ...WANTED, [API.OffsetCommit]: commitVersion })) v[Number(key)] = Math.min(want, broker.apis.get(Number(key)) ?? want);
  return v;
}


class ProtocolError extends Error {}

/** The coordinator is not there yet (Apache creates __consumer_offsets on the first FindCoordinator, then loads it). */
const COORDINATOR_NOT_READY = new Set<number>([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR]);
/** The Java client's retry.backoff.ms. */
const RETRY_BACKOFF_MS = 100;
/** Answers that were retried because the coordinator was not ready, per scenario (reported in the details). */
let coordinatorRetries = 0;

function expectNone(what: string, code: number): void {
  if (code !== ErrorCode.NONE) throw new ProtocolError(`${what}: ${errName(code)}`);
}

/** Fails with `what` when the promise does not settle within ms. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function createTopic(c: WireClient, v: Versions, name: string, partitions: number): Promise<void> {
  const res = await c.request(API.CreateTopics, v[API.CreateTopics]!, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 30_000,
    validateOnly: false,
  });
  expectNone(`CreateTopics ${name}`, res.topics[0].errorCode);
}

/** FindCoordinator, retried (every 100 ms, up to 60 s) while the coordinator is not available yet. */
async function findCoordinator(c: WireClient, v: Versions, broker: Broker, groupId: string): Promise<void> {
  const version = v[API.FindCoordinator]!;
  const deadline = Date.now() + 60_000;
  let answer;
  for (;;) {
    const res = await c.request(API.FindCoordinator, version, version >= 4 ? { keyType: 0, coordinatorKeys: [groupId] } : { key: groupId, keyType: 0 });
    answer = version >= 4 ? res.coordinators[0] : res;
    if (!COORDINATOR_NOT_READY.has(answer.errorCode) || Date.now() > deadline) break;
    await sleep(RETRY_BACKOFF_MS);
  }
  expectNone(`FindCoordinator ${groupId}`, answer.errorCode);
  if (answer.port !== broker.port) throw new ProtocolError(`FindCoordinator ${groupId}: coordinator ${answer.host}:${answer.port}, not the broker itself`);
}

/**
 * Before a scenario: FindCoordinator for every group it will use (Apache creates __consumer_offsets on the
 * first one), then OffsetFetch of them all until none answers that its coordinator is still loading, so
 * that the coordinator's start-up is not measured.
 */
async function warmUpCoordinator(c: WireClient, v: Versions, broker: Broker, groupIds: string[]): Promise<void> {
  for (const g of groupIds) await within(70_000, "FindCoordinator", findCoordinator(c, v, broker, g));
  const version = v[API.OffsetFetch]!;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const codes: number[] = [];
    if (version >= 8) {
      const res = await within(10_000, "OffsetFetch", c.request(API.OffsetFetch, version, { groups: groupIds.map((groupId) => ({ groupId, memberId: null, memberEpoch: -1, topics: null })), requireStable: false }));
      for (const g of res.groups) codes.push(g.errorCode);
    } else {
      for (const groupId of groupIds) codes.push((await within(10_000, "OffsetFetch", c.request(API.OffsetFetch, version, { groupId, topics: null, requireStable: false }))).errorCode);
    }
    const waiting = codes.filter((code) => COORDINATOR_NOT_READY.has(code)).length;
    if (waiting === 0) return;
    if (Date.now() > deadline) throw new Error(`the group coordinator was still not ready after 60 s (${waiting} of ${groupIds.length} groups)`);
    await sleep(RETRY_BACKOFF_MS);
  }
}

function joinBody(groupId: string, memberId: string, topic: string) {
  return {
    groupId,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    rebalanceTimeoutMs: REBALANCE_TIMEOUT_MS,
    memberId,
    groupInstanceId: null,
    protocolType: "consumer",
    protocols: [{ name: "range", metadata: subscription([topic]) }],
    reason: null,
  };
}

/** The range assignor over one topic: members sorted by id, the first (partitions % members) get one more. */
function rangeAssign(memberIds: string[], topic: string, partitions: number): { memberId: string; assignment: Uint8Array }[] {
  const sorted = [...memberIds].sort();
  const per = Math.floor(partitions / sorted.length);
  const extra = partitions % sorted.length;
  let next = 0;
  return sorted.map((memberId, i) => {
    const n = per + (i < extra ? 1 : 0);
    const mine = Array.from({ length: n }, (_, k) => next + k);
    next += n;
    return { memberId, assignment: encodeAssignment({ [topic]: mine }) };
  });
}

/** Partitions in a ConsumerProtocolAssignment (any version: the topic list comes first). */
function assignedPartitions(bytes: Uint8Array): number {
  if (bytes.length < 6) return 0;
  const d = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let o = 2;
  const topics = d.getInt32(o);
  o += 4;
  let n = 0;
  for (let t = 0; t < topics; t++) {
    o += 2 + d.getInt16(o);
    const count = d.getInt32(o);
    o += 4 + 4 * count;
    n += count;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// A group member (classic protocol), as the Java consumer does it

interface MemberEvents {
  onLeaderJoined(generation: number, memberCount: number): void;
  onSynced(member: Member): void;
  onError(member: Member, error: Error): void;
}

/**
 * The members' heartbeat clock: one timer for all of them, so that they heartbeat together and (d) can start
 * its extra member right after a round of heartbeats (the others then notice the rebalance one interval
 * later, every run alike, instead of at a random phase).
 */
class Ticker {
  lastTickMs = 0;
  private waiters: (() => void)[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(readonly intervalMs: number) {
    this.timer = setInterval(() => {
      this.lastTickMs = performance.now();
      for (const w of this.waiters.splice(0)) w();
    }, intervalMs);
  }

  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  stop(): void {
    clearInterval(this.timer);
    for (const w of this.waiters.splice(0)) w();
  }
}

class Member {
  memberId = "";
  generation = -1;
  synced: { generation: number; partitions: number; atMs: number } | undefined;
  joins = 0;
  /** When the last Heartbeat answer arrived. */
  lastHeartbeatMs = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    readonly client: WireClient,
    private readonly v: Versions,
    private readonly groupId: string,
    private readonly topic: string,
    private readonly partitions: number,
    private readonly ticker: Ticker,
    private readonly events: MemberEvents,
  ) {}

  /** Sends the first JoinGroup synchronously (before returning), then runs on its own. */
  start(): void {
    this.loop = this.run().catch((e: Error) => {
      if (!this.stopped) this.events.onError(this, e);
    });
  }

  private async run(): Promise<void> {
    const { client, v, groupId } = this;
    for (;;) {
      if (this.stopped) return;
      this.joins++;
      const join = await client.request(API.JoinGroup, v[API.JoinGroup]!, joinBody(groupId, this.memberId, this.topic));
      if (join.errorCode === ErrorCode.MEMBER_ID_REQUIRED) {
        this.memberId = join.memberId;
        continue;
      }
      if (join.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) {
        this.memberId = "";
        continue;
      }
      if (COORDINATOR_NOT_READY.has(join.errorCode)) {
        coordinatorRetries++;
        await sleep(RETRY_BACKOFF_MS);
        continue;
      }
      expectNone(`JoinGroup ${groupId}`, join.errorCode);
      this.memberId = join.memberId;
      this.generation = join.generationId;
      const isLeader = join.leader === this.memberId;
      if (isLeader) this.events.onLeaderJoined(join.generationId, join.members.length);
      const sync = await client.request(API.SyncGroup, v[API.SyncGroup]!, {
        groupId,
        generationId: this.generation,
        memberId: this.memberId,
        groupInstanceId: null,
        protocolType: "consumer",
        protocolName: "range",
        assignments: isLeader ? rangeAssign(join.members.map((m: { memberId: string }) => m.memberId), this.topic, this.partitions) : [],
      });
      const atMs = performance.now();
      if (sync.errorCode === ErrorCode.REBALANCE_IN_PROGRESS || sync.errorCode === ErrorCode.ILLEGAL_GENERATION) continue;
      if (sync.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) {
        this.memberId = "";
        continue;
      }
      if (COORDINATOR_NOT_READY.has(sync.errorCode)) {
        coordinatorRetries++;
        await sleep(RETRY_BACKOFF_MS);
        continue;
      }
      expectNone(`SyncGroup ${groupId}`, sync.errorCode);
      this.synced = { generation: this.generation, partitions: assignedPartitions(sync.assignment), atMs };
      this.events.onSynced(this);
      // Heartbeat until the coordinator asks for a rejoin.
      for (;;) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          void this.ticker.next().then(resolve);
        });
        if (this.stopped) return;
        const hb = await client.request(API.Heartbeat, v[API.Heartbeat]!, { groupId, generationId: this.generation, memberId: this.memberId, groupInstanceId: null });
        this.lastHeartbeatMs = performance.now();
        if (hb.errorCode === ErrorCode.NONE) continue;
        if (hb.errorCode === ErrorCode.REBALANCE_IN_PROGRESS || hb.errorCode === ErrorCode.ILLEGAL_GENERATION) break;
        if (hb.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) {
          this.memberId = "";
          break;
        }
        expectNone(`Heartbeat ${groupId}`, hb.errorCode);
      }
    }
  }

  /** Stops heartbeating and rejoining; the request in flight, if any, is answered first. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await within(10_000, "member stop", this.loop ?? Promise.resolve()).catch(() => this.client.close());
  }
}

/** Sends LeaveGroup for every member (one request, v3+ batches), then closes their connections. */
async function leaveAll(c: WireClient, v: Versions, groupId: string, members: Member[]): Promise<void> {
  const ids = members.filter((m) => m.memberId !== "").map((m) => m.memberId);
  try {
    if (ids.length > 0 && !c.isClosed) {
      const version = v[API.LeaveGroup]!;
      if (version >= 3) {
        await within(10_000, "LeaveGroup", c.request(API.LeaveGroup, version, { groupId, memberId: "", members: ids.map((memberId) => ({ memberId, groupInstanceId: null, reason: null })) }));
      } else {
        for (const memberId of ids) await within(10_000, "LeaveGroup", c.request(API.LeaveGroup, version, { groupId, memberId, members: [] }));
      }
    }
  } catch (e) {
    log(`  LeaveGroup ${groupId}: ${(e as Error).message} (ignored)`);
  }
  for (const m of members) if (!m.client.isClosed) m.client.close();
}

// ---------------------------------------------------------------------------------------------
// Outcomes

interface Measured {
  ok: true;
  /** One value per table row of the scenario (by row key). */
  values: Record<string, number>;
  peakRssKb?: number;
  cpu: CpuReport;
  detail: string;
}
interface Failed {
  ok: false;
  error: string;
  peakRssKb?: number;
}
type Outcome = Measured | Failed;

type ScenarioId = "a" | "b" | "c" | "d";

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!);
const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 0.5);
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

// ---------------------------------------------------------------------------------------------
// (a) commit throughput

async function commitThroughput(broker: Broker, opts: Options): Promise<Outcome> {
  const v = versionsFor(broker, opts.commitVersion);
  const commitVersion = v[API.OffsetCommit]!;
  const topic = "bench-commits";
  const admin = await connect(broker, "bench-admin");
  const members: { groupId: string; conn: WireClient; memberId: string; generation: number; lastAcked: number; hb?: ReturnType<typeof setInterval> }[] = [];
  const commitConns: WireClient[] = [];
  const rss = watchPeakRss(broker.pid);
  coordinatorRetries = 0;
  try {
    await within(60_000, "CreateTopics", createTopic(admin, v, topic, COMMIT_PARTITIONS));
    await warmUpCoordinator(admin, v, broker, Array.from({ length: opts.groups }, (_, i) => `bench-commit-${i}`));

    // Every group gets one member, on its own connection (its JoinGroup may be parked for the initial delay).
    const joinStart = performance.now();
    await within(
      120_000,
      `joining ${opts.groups} groups`,
      Promise.all(
        Array.from({ length: opts.groups }, async (_, i) => {
          const groupId = `bench-commit-${i}`;
          const conn = await connect(broker, `bench-member-${i}`);
          await findCoordinator(conn, v, broker, groupId);
          let memberId = "";
          let join;
          let sync;
          for (;;) {
            join = await conn.request(API.JoinGroup, v[API.JoinGroup]!, joinBody(groupId, memberId, topic));
            if (join.errorCode === ErrorCode.MEMBER_ID_REQUIRED) {
              memberId = join.memberId;
              continue;
            }
            if (COORDINATOR_NOT_READY.has(join.errorCode)) {
              coordinatorRetries++;
              await sleep(RETRY_BACKOFF_MS);
              continue;
            }
            expectNone(`JoinGroup ${groupId}`, join.errorCode);
            memberId = join.memberId;
            sync = await conn.request(API.SyncGroup, v[API.SyncGroup]!, {
              groupId, generationId: join.generationId, memberId, groupInstanceId: null, protocolType: "consumer", protocolName: "range",
              assignments: rangeAssign([memberId], topic, COMMIT_PARTITIONS),
            });
            if (!COORDINATOR_NOT_READY.has(sync.errorCode)) break;
            coordinatorRetries++;
            await sleep(RETRY_BACKOFF_MS);
          }
          expectNone(`SyncGroup ${groupId}`, sync.errorCode);
          if (assignedPartitions(sync.assignment) !== COMMIT_PARTITIONS) throw new ProtocolError(`SyncGroup ${groupId}: assignment of ${assignedPartitions(sync.assignment)} partitions`);
          members[i] = { groupId, conn, memberId, generation: join.generationId, lastAcked: -1 };
        }),
      ),
    );
    const joinMs = performance.now() - joinStart;
    log(`  ${opts.groups} groups joined and synced in ${ms(joinMs)} ms; committing for ${opts.warmupS} + ${opts.durationS} s over ${opts.connections} connections (OffsetCommit v${commitVersion})`);
    // The members stay alive as the Java consumer's heartbeat thread keeps them.
    let hbFailure: string | undefined;
    for (const m of members) {
      m.hb = setInterval(() => {
        void m.conn
          .request(API.Heartbeat, v[API.Heartbeat]!, { groupId: m.groupId, generationId: m.generation, memberId: m.memberId, groupInstanceId: null })
          .then((r) => {
            if (r.errorCode !== ErrorCode.NONE) hbFailure ??= `Heartbeat ${m.groupId}: ${errName(r.errorCode)}`;
          })
          .catch(() => {});
      }, COMMIT_HEARTBEAT_MS);
    }
    for (let i = 0; i < opts.connections; i++) commitConns.push(await connect(broker, `bench-committer-${i}`));

    // Closed loop: each group has exactly one OffsetCommit in flight.
    let stop = false;
    let windowStart = Infinity;
    let windowEnd = Infinity;
    const latencies: number[] = [];
    let errors = 0;
    let firstError: string | undefined;
    const worker = async (g: number) => {
      const m = members[g]!;
      const conn = commitConns[g % commitConns.length]!;
      let offset = 0;
      while (!stop) {
        offset++;
        const body = {
          groupId: m.groupId,
          generationIdOrMemberEpoch: m.generation,
          memberId: m.memberId,
          groupInstanceId: null,
          retentionTimeMs: -1,
          topics: [
            {
              name: topic,
              partitions: Array.from({ length: COMMIT_PARTITIONS }, (_, p) => ({ partitionIndex: p, committedOffset: offset, committedLeaderEpoch: -1, commitTimestamp: -1, committedMetadata: "" })),
            },
          ],
        };
        const t = performance.now();
        const res = await conn.request(API.OffsetCommit, commitVersion, body);
        const done = performance.now();
        const bad = res.topics.flatMap((tp: { partitions: { errorCode: number }[] }) => tp.partitions).find((p: { errorCode: number }) => p.errorCode !== ErrorCode.NONE);
        if (bad) {
          errors++;
          firstError ??= `OffsetCommit ${m.groupId}: ${errName(bad.errorCode)}`;
          if (errors > 100) stop = true;
          continue;
        }
        m.lastAcked = offset;
        if (done >= windowStart && done <= windowEnd) latencies.push(done - t);
      }
    };
    const workers = Promise.all(members.map((_, g) => worker(g)));
    workers.catch(() => {}); // awaited below; a lost connection must not count as unhandled in the meantime
    await sleep(opts.warmupS * 1000);
    const cpu = watchCpu(broker.pid, { kernelApart: true });
    windowStart = performance.now();
    windowEnd = windowStart + opts.durationS * 1000;
    await sleep(opts.durationS * 1000);
    const windowMs = performance.now() - windowStart;
    const cpuReport = cpu.stop(0);
    stop = true;
    await within(30_000, "the last commits", workers);
    for (const m of members) clearInterval(m.hb);
    if (errors > 0) return { ok: false, error: `${errors} commits failed, first: ${firstError}`, peakRssKb: rss.stop() };
    if (hbFailure) return { ok: false, error: hbFailure, peakRssKb: rss.stop() };

    // The broker must hold what it acknowledged: read every group's offsets back.
    let mismatches = 0;
    let mismatch = "";
    for (const m of members) {
      const version = v[API.OffsetFetch]!;
      const res = await within(
        10_000,
        "OffsetFetch",
        admin.request(
          API.OffsetFetch,
          version,
          version >= 8
            ? { groups: [{ groupId: m.groupId, memberId: null, memberEpoch: -1, topics: [{ name: topic, partitionIndexes: [0, 1, 2, 3] }] }], requireStable: false }
            : { groupId: m.groupId, topics: [{ name: topic, partitionIndexes: [0, 1, 2, 3] }], requireStable: false },
        ),
      );
      const group = version >= 8 ? res.groups[0] : res;
      const offsets: number[] = group.topics.flatMap((t: { partitions: { committedOffset: bigint | number }[] }) => t.partitions.map((p) => Number(p.committedOffset)));
      if (group.errorCode !== ErrorCode.NONE || offsets.length !== COMMIT_PARTITIONS || offsets.some((o) => o !== m.lastAcked)) {
        mismatches++;
        mismatch ||= `${m.groupId}: read back ${JSON.stringify(offsets)} (${errName(group.errorCode)}), last acknowledged ${m.lastAcked}`;
      }
    }
    const peakRssKb = rss.stop();
    if (mismatches > 0) return { ok: false, error: `committed offsets differ from the last acknowledged in ${mismatches} groups, e.g. ${mismatch}`, peakRssKb };

    latencies.sort((a, b) => a - b);
    const commitsPerS = latencies.length / (windowMs / 1000);
    const avg = latencies.reduce((s, x) => s + x, 0) / Math.max(1, latencies.length);
    return {
      ok: true,
      values: { commits: commitsPerS, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) },
      peakRssKb,
      cpu: cpuReport,
      detail:
        `OffsetCommit v${commitVersion}: ${fmtNum(latencies.length)} commits in ${(windowMs / 1000).toFixed(1)} s after ${opts.warmupS} s of warm-up ` +
        `(${fmtNum(commitsPerS * COMMIT_PARTITIONS)} partition offsets/s), ${opts.groups} groups over ${opts.connections} connections; ` +
        `latency avg ${ms(avg)} ms, p99.9 ${ms(percentile(latencies, 0.999))} ms, max ${ms(latencies.at(-1) ?? NaN)} ms; ` +
        `every group's offsets read back (OffsetFetch v${v[API.OffsetFetch]}) equal the last acknowledged; the ${opts.groups} groups joined in ${ms(joinMs)} ms` +
        (coordinatorRetries > 0 ? ` (${coordinatorRetries} answers of coordinator not ready, retried)` : ""),
    };
  } finally {
    for (const m of members) if (m) clearInterval(m.hb);
    await Promise.all(
      members.filter(Boolean).map(async (m) => {
        try {
          if (!m.conn.isClosed)
            await within(5000, "LeaveGroup", m.conn.request(API.LeaveGroup, v[API.LeaveGroup]!, { groupId: m.groupId, memberId: m.memberId, members: [{ memberId: m.memberId, groupInstanceId: null, reason: null }] }));
        } catch {
          /* the broker is stopped next anyway */
        }
        m.conn.close();
      }),
    );
    for (const c of commitConns) c.close();
    admin.close();
    rss.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// (b), (c), (d): rebalances

interface RebalanceRun {
  /** First JoinGroup sent -> every member holds its assignment of one generation with all members. */
  joinMs: number;
  generation: number;
  joins: number;
  /** (d): the same for an extra member joining the stable group. */
  extraMs?: number;
  extraGeneration?: number;
  extraJoins?: number;
  /** (d): from the extra member's first JoinGroup to the next heartbeat tick of the others. */
  extraTickWaitMs?: number;
}

/** Waits until `members` all hold an assignment of one generation that the leader saw with exactly that many members. */
class Completion {
  constructor(private readonly partitions: number) {}

  private readonly sizeByGeneration = new Map<number, number>();
  private target: Member[] = [];
  private resolve: ((r: { atMs: number; generation: number }) => void) | undefined;
  private reject: ((e: Error) => void) | undefined;

  readonly events: MemberEvents = {
    onLeaderJoined: (generation, memberCount) => this.sizeByGeneration.set(generation, memberCount),
    onSynced: () => this.check(),
    onError: (_m, e) => this.reject?.(e),
  };

  expect(target: Member[]): Promise<{ atMs: number; generation: number }> {
    this.target = target;
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  private check(): void {
    if (!this.resolve) return;
    const first = this.target[0]?.synced;
    if (!first) return;
    const g = first.generation;
    if (this.sizeByGeneration.get(g) !== this.target.length) return;
    let atMs = 0;
    let partitions = 0;
    for (const m of this.target) {
      if (m.synced?.generation !== g) return;
      atMs = Math.max(atMs, m.synced.atMs);
      partitions += m.synced.partitions;
    }
    const [resolve, reject] = [this.resolve, this.reject!];
    this.resolve = undefined;
    if (partitions !== this.partitions) reject(new ProtocolError(`generation ${g}: the assignments hold ${partitions} of ${this.partitions} partitions`));
    else resolve({ atMs, generation: g });
  }
}

async function rebalances(broker: Broker, opts: Options, withExtraMember: boolean, tag: string): Promise<Outcome> {
  const v = versionsFor(broker, opts.commitVersion);
  const topic = "bench-rebalance";
  const partitions = opts.members;
  const admin = await connect(broker, "bench-admin");
  const rss = watchPeakRss(broker.pid);
  const cpu = watchCpu(broker.pid, { kernelApart: true });
  const runs: RebalanceRun[] = [];
  try {
    await within(60_000, "CreateTopics", createTopic(admin, v, topic, partitions));
    await warmUpCoordinator(admin, v, broker, Array.from({ length: opts.runs }, (_, r) => `bench-rebalance-${tag}-${r + 1}`));
    coordinatorRetries = 0;
    for (let r = 1; r <= opts.runs && !isInterrupted(); r++) {
      const groupId = `bench-rebalance-${tag}-${r}`;
      const completion = new Completion(partitions);
      const ticker = new Ticker(opts.heartbeatMs);
      const newMember = async (i: number) => {
        const c = await connect(broker, `bench-${tag}-${r}-m${i}`);
        await findCoordinator(c, v, broker, groupId);
        return new Member(c, v, groupId, topic, partitions, ticker, completion.events);
      };
      const members = await within(30_000, "connecting the members", Promise.all(Array.from({ length: opts.members }, (_, i) => newMember(i))));
      const all = [...members];
      try {
        const done = completion.expect(members);
        const t0 = performance.now();
        for (const m of members) m.start();
        const joined = await within(120_000, `${opts.members} members joining`, done);
        const run: RebalanceRun = { joinMs: joined.atMs - t0, generation: joined.generation, joins: members.reduce((s, m) => s + m.joins, 0) };
        log(`  run ${r}: ${opts.members} members hold generation ${joined.generation} after ${ms(run.joinMs)} ms (${run.joins} JoinGroups)`);
        if (withExtraMember) {
          const extra = await newMember(opts.members);
          all.push(extra);
          await sleep(500); // the group is Stable, members heartbeating
          // Right after a round of heartbeats has been answered: the others notice at the next tick.
          await ticker.next();
          const tick = ticker.lastTickMs;
          const deadline = performance.now() + opts.heartbeatMs;
          while (members.some((m) => m.lastHeartbeatMs < tick) && performance.now() < deadline) await sleep(1);
          const joinsBefore = members.reduce((s, m) => s + m.joins, 0);
          const done2 = completion.expect(all);
          const t1 = performance.now();
          extra.start();
          run.extraTickWaitMs = tick + opts.heartbeatMs - t1;
          const rejoined = await within(120_000, `member ${opts.members + 1} joining`, done2);
          run.extraMs = rejoined.atMs - t1;
          run.extraGeneration = rejoined.generation;
          run.extraJoins = all.reduce((s, m) => s + m.joins, 0) - joinsBefore;
          log(`  run ${r}: member ${opts.members + 1} joined; all ${all.length} hold generation ${rejoined.generation} after ${ms(run.extraMs)} ms (${run.extraJoins} JoinGroups)`);
        }
        runs.push(run);
      } finally {
        ticker.stop();
        await Promise.all(all.map((m) => m.stop()));
        await leaveAll(admin, v, groupId, all);
      }
    }
    if (isInterrupted()) return { ok: false, error: "interrupted" };
    const peakRssKb = rss.stop();
    const cpuReport = cpu.stop(0);
    const joinMs = runs.map((r) => r.joinMs);
    const values: Record<string, number> = { join: median(joinMs) };
    let detail = `${opts.members} members, ${partitions} partitions, heartbeat every ${opts.heartbeatMs} ms; runs: ${joinMs.map(ms).join(", ")} ms (generations ${runs.map((r) => r.generation).join(", ")}; JoinGroups ${runs.map((r) => r.joins).join(", ")})`;
    if (coordinatorRetries > 0) detail += ` (${coordinatorRetries} answers of coordinator not ready during the runs, retried)`;
    if (withExtraMember) {
      const extraMs = runs.map((r) => r.extraMs!);
      values.extra = median(extraMs);
      values.extraAfterTick = median(runs.map((r) => r.extraMs! - r.extraTickWaitMs!));
      detail +=
        `; member ${opts.members + 1} joining: ${extraMs.map(ms).join(", ")} ms, of which ${runs.map((r) => ms(r.extraTickWaitMs!)).join(", ")} ms ` +
        `until the others' next heartbeat (JoinGroups ${runs.map((r) => r.extraJoins).join(", ")})`;
    }
    return { ok: true, values, peakRssKb, cpu: cpuReport, detail };
  } finally {
    admin.close();
    rss.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Brokers and scenario groups

interface BrokerRun {
  title: string;
  delayMs: number;
  scenarios: ScenarioId[];
  run(broker: Broker, opts: Options): Promise<Partial<Record<ScenarioId, Outcome>>>;
}

const BROKER_RUNS: BrokerRun[] = [
  { title: "(a)", delayMs: DEFAULT_DELAY_MS, scenarios: ["a"], run: async (b, o) => ({ a: await commitThroughput(b, o) }) },
  {
    title: "(b) (d)",
    delayMs: DEFAULT_DELAY_MS,
    scenarios: ["b", "d"],
    run: async (b, o) => {
      const r = await rebalances(b, o, true, "default");
      if (!r.ok) return { b: r, d: r };
      return { b: { ...r, values: { v: r.values.join! } }, d: { ...r, values: { v: r.values.extra!, afterTick: r.values.extraAfterTick! } } };
    },
  },
  {
    title: "(c)",
    delayMs: 0,
    scenarios: ["c"],
    run: async (b, o) => {
      const r = await rebalances(b, o, false, "nodelay");
      return { c: r.ok ? { ...r, values: { v: r.values.join! } } : r };
    },
  },
];

async function startBroker(kind: BrokerKind, delayMs: number, opts: Options, bunkaBinary: string): Promise<Broker> {
  // The default is left unset (both brokers default to 3000 ms); otherwise the same property on both.
  const props: Record<string, number> = delayMs === DEFAULT_DELAY_MS ? {} : { "group.initial.rebalance.delay.ms": delayMs };
  return kind === "kafka" ? await startKafkaBroker(opts.dataRoot, props) : await startBunkaBroker(bunkaBinary, opts.dataRoot, props);
}

async function runBroker(kind: BrokerKind, opts: Options, bunkaBinary: string | Error | undefined): Promise<Map<ScenarioId, Outcome>> {
  const results = new Map<ScenarioId, Outcome>();
  for (const group of BROKER_RUNS) {
    if (isInterrupted()) break;
    log(`\n== ${kind}: a fresh broker for ${group.title}, group.initial.rebalance.delay.ms=${group.delayMs}${group.delayMs === DEFAULT_DELAY_MS ? " (default, not set)" : ""}`);
    const broker = await startBrokerForRows(kind, bunkaBinary, (binary) => startBroker(kind, group.delayMs, opts, binary));
    if ("error" in broker) {
      for (const id of group.scenarios) results.set(id, { ok: false, error: broker.error });
      continue;
    }
    try {
      const missing = missingApis(broker.apis, GROUP_APIS);
      let out: Partial<Record<ScenarioId, Outcome>>;
      if (missing.length > 0) {
        const error = `not supported (ApiVersions lacks ${missing.join(", ")})`;
        out = Object.fromEntries(group.scenarios.map((id) => [id, { ok: false, error }]));
      } else {
        const started = Date.now();
        try {
          out = await group.run(broker, opts);
        } catch (e) {
          const error = (e as Error).message;
          out = Object.fromEntries(group.scenarios.map((id) => [id, { ok: false, error }]));
        }
        log(`${kind} ${group.title}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      }
      for (const id of group.scenarios) {
        const o = out[id]!;
        if (!o.ok && !broker.alive()) o.error += ` (the broker died; log tail: ${broker.logTail().split("\n").slice(-3).join(" | ")})`;
        results.set(id, o);
        if (!o.ok) log(`${kind} (${id}): ${o.error}`);
      }
    } finally {
      log(`${kind}: stopping the broker`);
      await broker.stop();
    }
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Report

interface Row {
  scenario: ScenarioId;
  key: string;
  title: string;
  format(x: number): string;
}

function rowsFor(opts: Options, commitVersionNote: string): Row[] {
  const n = opts.members;
  return [
    { scenario: "a", key: "commits", title: `(a) OffsetCommit ${commitVersionNote}, ${opts.groups} groups × ${COMMIT_PARTITIONS} partitions, commits/s`, format: fmtNum },
    { scenario: "a", key: "p50", title: "(a) commit latency p50", format: (x) => `${ms(x)} ms` },
    { scenario: "a", key: "p99", title: "(a) commit latency p99", format: (x) => `${ms(x)} ms` },
    { scenario: "b", key: "v", title: `(b) rebalance: ${n} members join a new group, initial delay ${DEFAULT_DELAY_MS} ms (default)`, format: (x) => `${fmtNum(x)} ms` },
    { scenario: "c", key: "v", title: `(c) rebalance: ${n} members join a new group, initial delay 0`, format: (x) => `${fmtNum(x)} ms` },
    { scenario: "d", key: "v", title: `(d) rebalance: member ${n + 1} joins a stable group of ${n}`, format: (x) => `${fmtNum(x)} ms` },
    { scenario: "d", key: "afterTick", title: `(d) the same, less the wait for the others' next heartbeat`, format: (x) => `${ms(x)} ms` },
  ];
}

const skewed = (o: Outcome | undefined) => o?.ok === true && o.cpu.otherPct >= BUSY_PCT;

function cell(o: Outcome | undefined, row: Row): string {
  if (!o) return "—";
  if (!o.ok) return "error";
  return row.format(o.values[row.key]!) + (skewed(o) ? " *" : "");
}

function buildTable(kinds: BrokerKind[], results: Record<BrokerKind, Map<ScenarioId, Outcome>>, rows: Row[]): { header: string[]; rows: string[][] } {
  const both = kinds.length === 2;
  const header = both ? ["scenario", "Kafka", "bunka", "ratio bunka/Kafka"] : ["scenario", label(kinds[0]!)];
  const out: string[][] = [];
  for (const row of rows) {
    const cells = kinds.map((k) => cell(results[k].get(row.scenario), row));
    if (both) {
      const k = results.kafka.get(row.scenario);
      const b = results.bunka.get(row.scenario);
      const r = k?.ok && b?.ok && k.values[row.key]! > 0 ? (b.values[row.key]! / k.values[row.key]!).toFixed(2) : "—";
      out.push([row.title, ...cells, r]);
    } else out.push([row.title, ...cells]);
  }
  // Peak RSS of each broker: the largest over its scenarios.
  const peak = kinds.map((k) => {
    const all = [...results[k].values()].map((o) => o.peakRssKb).filter((x): x is number => x !== undefined);
    return all.length ? Math.max(...all) : undefined;
  });
  const rssRow = ["broker peak RSS (largest over the scenarios)", ...peak.map(fmtRss)];
  if (both) rssRow.push(peak[0] && peak[1] ? (peak[1] / peak[0]).toFixed(2) : "—");
  out.push(rssRow);
  return { header, rows: out };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  installSignalHandlers();
  const t0 = Date.now();
  const kinds: BrokerKind[] = opts.only ? [opts.only] : ["kafka", "bunka"];
  const env = await environment(opts.dataRoot);
  let bunkaBinary: string | Error | undefined = opts.bunkaBinary;
  if (kinds.includes("bunka") && !bunkaBinary) {
    try {
      bunkaBinary = await ensureBunkaBinary();
    } catch (e) {
      bunkaBinary = e as Error;
    }
  }
  if (opts.bunkaBinary) {
    const version = (await capture([opts.bunkaBinary, "version"])).replace(/^bunka /, "") || "?";
    env.bunka = `bunka ${version} (${opts.bunkaBinary}, given with --bunka-binary)`;
  }

  const results: Record<BrokerKind, Map<ScenarioId, Outcome>> = { kafka: new Map(), bunka: new Map() };
  for (const kind of kinds) {
    if (isInterrupted()) break;
    results[kind] = await runBroker(kind, opts, bunkaBinary);
  }
  if (isInterrupted()) return 130;
  const elapsedS = Math.round((Date.now() - t0) / 1000);

  const rows = rowsFor(opts, `v${opts.commitVersion}`);
  const { header, rows: table } = buildTable(kinds, results, rows);
  const meta = [
    `date: ${env.date} (whole run ${elapsedS} s)`,
    `machine: ${env.machine}`,
    `brokers: ${env.kafka}; ${env.bunka}; ${env.runtime}; (c) ran on both with group.initial.rebalance.delay.ms=0 (Apache: server.properties, bunka: --config file)`,
    `load: this script (Bun, raw Kafka frames, on the same machine); classic protocol as the Java consumer sends it: FindCoordinator v4, JoinGroup v9, SyncGroup v5, Heartbeat v4, ` +
      `OffsetCommit v${opts.commitVersion} (each capped at what the broker serves), session timeout ${SESSION_TIMEOUT_MS / 1000} s, rebalance timeout ${REBALANCE_TIMEOUT_MS / 1000} s, range assignor`,
    `(a): ${opts.groups} groups with one joined member each (heartbeat every ${COMMIT_HEARTBEAT_MS} ms), one OffsetCommit of ${COMMIT_PARTITIONS} partitions in flight per group (closed loop), ` +
      `spread over ${opts.connections} connections, ${opts.durationS} s measured after ${opts.warmupS} s of warm-up; latency = request sent to response read, in this process`,
    `(b)-(d): from the first JoinGroup sent until every member holds its SyncGroup assignment of one generation containing all members; members heartbeat together every ${opts.heartbeatMs} ms ` +
      `and rejoin on REBALANCE_IN_PROGRESS; median of ${opts.runs} runs on fresh groups; (d) on the group (b) left stable, the extra member's JoinGroup sent right after a round of heartbeats, ` +
      `so (d) includes almost one heartbeat interval before the others learn of the rebalance`,
    "durability: bunka fsyncs committed offsets before answering (group commit); Apache Kafka appends them to __consumer_offsets and, with its default flush settings, does not fsync",
    "peak RSS = the broker process's VmHWM / max VmRSS during a scenario (the JVM for Apache Kafka), the largest over the scenarios",
  ];
  const errors: string[] = [];
  const details: string[] = [];
  const ids: ScenarioId[] = ["a", "b", "d", "c"];
  for (const id of ids) {
    for (const kind of kinds) {
      const o = results[kind].get(id);
      if (!o) continue;
      if (!o.ok) {
        errors.push(`(${id}) ${kind}: ${o.error}`);
        continue;
      }
      if (id === "d") continue; // measured with (b): its detail line covers both
      const busy = skewed(o) ? ` — WARNING: other processes used ${o.cpu.otherPct.toFixed(0)}% of the machine, numbers are skewed` : "";
      details.push(
        `(${id === "b" ? "b)+(d" : id}) ${kind}: ${o.detail}; CPU: broker ${o.cpu.brokerS.toFixed(1)} s, load tool ${o.cpu.selfS.toFixed(1)} s, ` +
          `kernel ${o.cpu.kernelPct?.toFixed(0)}%, other processes ${o.cpu.otherPct.toFixed(0)}% of the machine; peak RSS ${fmtRss(o.peakRssKb)}${busy}`,
      );
    }
  }
  if ([...results.kafka.values(), ...results.bunka.values()].some(skewed)) {
    meta.push(
      `* = other processes (not the broker, this script or the kernel's interrupt, softirq and kernel-thread work) used ${BUSY_PCT}% or more of the machine ` +
        "during that scenario: the number is skewed, run again on a quiet machine",
    );
  }
  meta.push("ratio = bunka / Kafka: above 1 is better for commits/s, below 1 is better for latencies, rebalance times and RSS");

  process.stdout.write(
    renderReport({
      title: `Consumer-group benchmark: Apache Kafka ${KAFKA_VERSION} vs bunka`,
      date: env.date,
      headingLevel: 4,
      kinds,
      meta,
      header,
      rows: table,
      errors,
      details,
    }),
  );
  return 0;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  log(`bench-groups: ${(e as Error).stack ?? e}`);
  code = 1;
} finally {
  if (!isInterrupted()) await runCleanups(false);
}
if (!isInterrupted()) process.exit(code);
