/**
 * A three-broker cluster (tests/support/bunka-cluster.ts, lease 3 s) when the network between a broker and
 * etcd fails, and when etcd is a cluster of three members that lose one, under librdkafka's idempotent
 * producer writing to every broker (bootstrapped from all of them).
 *
 * 1. Cut: one partition leader reaches etcd only through a TcpProxy, which drops every connection and
 *    refuses new ones, while the broker keeps its Kafka clients. Within about the TTL it must stop
 *    acknowledging (a probe writes to one of its partitions through it every 100 ms) and /ready answers
 *    503; once its lease expired in etcd the survivors take its partitions over and writes go on through
 *    them (a follower writes through whichever survivor Metadata names). Then the proxy listens again: the
 *    broker registers under a fresh lease, /ready answers 200, and it leads a fair share again.
 * 2. Lost answers: the proxy forwards the broker's requests to etcd and drops the answers. etcd applies
 *    the keep-alives, the broker hears none of them: by its own clock its lease lapses and it must stop
 *    acknowledging, as in 1. A TTL after the lapse it stops sending keep-alives (it asks, without
 *    renewing, whether the lease lives), so the lease expires in etcd and the survivors take its
 *    partitions over as in 1; once the answers arrive again it finds the lease gone and registers under a
 *    fresh one.
 * 3. etcd of three members, every broker given all three client URLs: each member SIGKILLed in turn (the
 *    first listed first, the one every broker starts with) and started again, then the raft leader killed
 *    for good (a quorum of two remains). Every broker keeps or regains its lease, confirmed through the
 *    members left, and all three lead.
 *
 * Afterwards every record librdkafka had acknowledged is in the log exactly once, in order, at its offset
 * (sequenceProblems), none lost, and so is every record the probe and the follower had acknowledged.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { leaseTiming } from "../../src/domain/cluster/lease-validity.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { readIdempotentReport, sequenceProblems, startIdempotentProducer } from "../support/cluster-clients.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { utf8 } from "../support/record-decoder.ts";
import { until } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

const SESSION_TIMEOUT_MS = 3000;
const PARTITIONS = 6;
const RATE_PER_S = 1000;
/** The brokers' lease safety margin for this TTL (the default: a ninth of the TTL, at most 1 s). */
const SAFETY_MARGIN_MS = leaseTiming({ ttlSeconds: SESSION_TIMEOUT_MS / 1000 }).safetyMarginMs;

interface LeaseView {
  id: string | null;
  state: "valid" | "lapsed";
  validForMs: number;
  lapses: number;
  lastError: string | null;
}

async function leaseOf(cluster: BunkaCluster, id: number): Promise<LeaseView> {
  const view = (await (await fetch(`${cluster.process(id)!.http}/v1/cluster`, { signal: AbortSignal.timeout(5_000) })).json()) as { lease: LeaseView };
  return view.lease;
}

/** The seconds etcd itself gives lease `id` (decimal) still, -1 once it expired there. */
async function ttlInEtcd(endpoint: string, id: string): Promise<number> {
  const response = await fetch(`${endpoint}/v3/lease/timetolive`, { method: "POST", body: JSON.stringify({ ID: id }), signal: AbortSignal.timeout(5_000) });
  return Number(((await response.json()) as { TTL?: string }).TTL ?? -1);
}

async function readyStatus(cluster: BunkaCluster, id: number): Promise<number> {
  return (await fetch(`${cluster.process(id)!.http}/ready`, { signal: AbortSignal.timeout(5_000) })).status;
}

/** The high watermark of `topic`-`partition` as broker `id` answers it, or undefined on an error. */
async function highWatermark(cluster: BunkaCluster, id: number, topic: string, partition: number): Promise<number | undefined> {
  const res = await cluster.withClient(
    id,
    (c) => c.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: [{ name: topic, partitions: [{ partitionIndex: partition, currentLeaderEpoch: -1, timestamp: -1 }] }] }),
    3000,
  );
  const p = res.topics[0].partitions[0];
  return p.errorCode === ErrorCode.NONE ? Number(p.offset) : undefined;
}

async function waitForRecords(cluster: BunkaCluster, topic: string, partition: number, above: number): Promise<void> {
  await until(`more than ${above} records in ${topic}-${partition}`, 60_000, async () => {
    const leader = await cluster.leaderOf(topic, partition);
    if (leader < 0) return undefined;
    const hw = await highWatermark(cluster, leader, topic, partition).catch(() => undefined);
    return hw !== undefined && hw > above ? true : undefined;
  });
}

async function readAll(cluster: BunkaCluster, topic: string): Promise<Map<number, { offset: number; value: string | null }[]>> {
  const values = new Map<number, { offset: number; value: string | null }[]>();
  for (let p = 0; p < PARTITIONS; p++) values.set(p, (await cluster.readPartition(topic, p)).records.map((r) => ({ offset: r.offset, value: utf8(r.value) })));
  return values;
}

const pyNumber = (v: string | null) => (/^py-\d{6}$/.test(v ?? "") ? Number(v!.slice(3)) : undefined);

interface Ack {
  broker: number;
  partition: number;
  offset: number;
  sentMs: number;
  answeredMs: number;
}

/**
 * Writes one plain record `<label>-<n>` every `intervalMs` to `partition` through the broker `target()`
 * names (or none: -1), one request at a time, each bounded; keeps every answer.
 */
class RecordWriter {
  readonly acks = new Map<number, Ack>();
  readonly errors: { broker: number; errorCode: number | string; answeredMs: number }[] = [];
  private next = 0;
  private stopped = false;
  private readonly clients = new Map<number, WireClient>();
  private readonly done: Promise<void>;

  constructor(
    private readonly cluster: BunkaCluster,
    private readonly topic: string,
    private readonly partition: number,
    readonly label: string,
    private readonly target: () => Promise<number>,
    intervalMs = 100,
  ) {
    this.done = this.run(intervalMs);
  }

  private async connection(id: number): Promise<WireClient> {
    let c = this.clients.get(id);
    if (c === undefined || c.isClosed) this.clients.set(id, (c = await WireClient.connect(this.cluster.port(id))));
    return c;
  }

  private async run(intervalMs: number): Promise<void> {
    // Bounded, so that a failed wait of a test does not leave it writing during the next one.
    const deadline = Date.now() + 150_000;
    while (!this.stopped && Date.now() < deadline) {
      const broker = await this.target().catch(() => -1);
      if (broker >= 0) {
        const n = this.next;
        const sentMs = performance.now();
        try {
          const client = await this.connection(broker);
          const records = buildBatch({ records: [{ key: this.label, value: `${this.label}-${n}`, timestampMs: Date.now() }] });
          const pending = client.request(0, 11, {
            transactionalId: null,
            acks: -1,
            timeoutMs: 5_000,
            topicData: [{ name: this.topic, partitionData: [{ index: this.partition, records }] }],
          });
          pending.catch(() => undefined);
          const res = await Promise.race([pending, new Promise<undefined>((r) => setTimeout(() => r(undefined), 3_000))]);
          if (res === undefined) {
            // No answer in time: this connection may still deliver one, but the number moves on anyway (an
            // unanswered write is not acknowledged; a late one is not counted).
            client.close();
            this.errors.push({ broker, errorCode: "no answer", answeredMs: performance.now() });
            this.next++;
          } else {
            const p = res.responses[0].partitionResponses[0];
            if (p.errorCode === ErrorCode.NONE) {
              this.acks.set(n, { broker, partition: this.partition, offset: Number(p.baseOffset), sentMs, answeredMs: performance.now() });
            } else this.errors.push({ broker, errorCode: p.errorCode, answeredMs: performance.now() });
            this.next++;
          }
        } catch (error) {
          this.clients.delete(broker);
          this.errors.push({ broker, errorCode: (error as Error).message, answeredMs: performance.now() });
          this.next++;
        }
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
    for (const c of this.clients.values()) c.close();
  }

  numberOf = (v: string | null): number | undefined => (v?.startsWith(`${this.label}-`) ? Number(v.slice(this.label.length + 1)) : undefined);
}

describe("a broker cut off from etcd", () => {
  let cluster: BunkaCluster;
  /** The topics made so far: ownership spreads the partitions of all of them evenly, not each topic's. */
  const topics: string[] = [];

  beforeAll(async () => {
    await ensureInteropClients();
    cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: SESSION_TIMEOUT_MS, etcdProxies: true });
  }, 180_000);

  afterAll(async () => {
    await killLiveChildren();
    await cluster?.close();
  });

  /**
   * One partition: the broker leading `topic`-0 loses etcd (`mode`), the survivors take over (when
   * `expectTakeOver`; else the partition waits for the broker), etcd comes back for it. Figures in the log line.
   */
  async function isolate(mode: "cut" | "drop-responses", expectTakeOver: boolean): Promise<void> {
    const topic = `etcd-${mode}${expectTakeOver ? "" : "-kept"}`;
    await cluster.createTopic(topic, PARTITIONS);
    topics.push(topic);
    const before = await cluster.waitForBalanced([topic]);
    const victim = before.leaders.get(`${topic}-0`)!;
    const victimPartitions = [...before.leaders].filter(([, leader]) => leader === victim).map(([key]) => Number(key.slice(topic.length + 1)));
    const survivors = cluster.ids.filter((id) => id !== victim);
    const leaseBefore = await leaseOf(cluster, victim);
    expect(leaseBefore.state).toBe("valid");

    const out = join(cluster.dir, `${topic}-report.json`);
    const records = 25 * RATE_PER_S;
    const producer = startIdempotentProducer(cluster.bootstrap, topic, records, RATE_PER_S, out);
    await waitForRecords(cluster, topic, 0, 100);

    // The probe writes through the isolated broker only; the follower through the survivor Metadata names.
    const probe = new RecordWriter(cluster, topic, 0, "probe", async () => victim);
    await until("the probe acknowledged by the broker to be isolated", 30_000, async () => (probe.acks.size >= 3 ? true : undefined));
    const proxy = cluster.etcdProxy(victim);
    const isolatedMs = performance.now();
    if (mode === "cut") proxy.cut();
    else proxy.dropResponses = true;
    const follower = new RecordWriter(cluster, topic, 0, "follow", async () => {
      const leader = await cluster.leaderOf(topic, 0, survivors);
      return survivors.includes(leader) ? leader : -1;
    });

    // It stops acknowledging: /ready 503, its lease lapsed by its own clock.
    const notReadyMs = await until("the isolated broker's /ready answering 503", 30_000, async () => ((await readyStatus(cluster, victim)) === 503 ? performance.now() - isolatedMs : undefined), 25);
    const lapsed = await leaseOf(cluster, victim);
    expect(lapsed.state).toBe("lapsed");
    // Nothing it answers from now on is an acknowledgement (the probe keeps asking).
    const probeAcksAtLapse = probe.acks.size;
    const lastVictimAck = [...probe.acks.values()].at(-1)!;
    const stoppedAckingMs = Math.max(0, lastVictimAck.answeredMs - isolatedMs);
    // Its last confirmed keep-alive was sent before the isolation, so its lease is valid by its own clock until
    // before isolation + TTL (less the margin): a write it acknowledged was asked for before that.
    expect(lastVictimAck.sentMs - isolatedMs).toBeLessThan(SESSION_TIMEOUT_MS);

    let takeOverFigure: string;
    if (expectTakeOver) {
      // The survivors take its partitions over, and writes go on through them.
      const takenOver = await until(`a survivor writing ${topic}-0`, 60_000, async () => {
        const first = [...follower.acks.values()].find((a) => survivors.includes(a.broker));
        return first;
      }).catch((error: Error) => {
        throw new Error(`${error.message}; follower's last errors ${JSON.stringify(follower.errors.slice(-5))}, probe's ${JSON.stringify(probe.errors.slice(-3))}`);
      });
      const unavailableMs = Math.round(takenOver.answeredMs - Math.max(lastVictimAck.answeredMs, isolatedMs));
      for (const p of victimPartitions) {
        await until(`${topic}-${p} led by a survivor`, 30_000, async () => (survivors.includes(await cluster.leaderOf(topic, p, survivors)) ? true : undefined));
      }
      // librdkafka's load goes on through them: a survivor's high watermark of the partition moves.
      const newLeader = takenOver.broker;
      const hwAtTakeOver = (await until("the new leader's high watermark", 30_000, () => highWatermark(cluster, newLeader, topic, 0).catch(() => undefined)))!;
      await until(`${topic}-0 growing on broker ${newLeader}`, 30_000, async () => {
        const hw = await highWatermark(cluster, newLeader, topic, 0).catch(() => undefined);
        return hw !== undefined && hw > hwAtTakeOver + 50 ? true : undefined;
      });
      takeOverFigure = `broker ${newLeader} acknowledged ${topic}-0 ${Math.round(takenOver.answeredMs - isolatedMs)} ms after (unavailable ${unavailableMs} ms)`;
    } else {
      // etcd applies the keep-alives it cannot answer, so the lease lives on there and nobody may take the
      // partitions over: they wait for the broker. Three TTLs past its lapse, it still acknowledges nothing.
      await until("three lease TTLs past the lapse", 60_000, async () => (performance.now() - isolatedMs > notReadyMs + 3 * SESSION_TIMEOUT_MS ? true : undefined), 100);
      const ttl = await ttlInEtcd(cluster.etcd.endpoint, leaseBefore.id!);
      const byOthers = [...follower.acks.values()].filter((a) => survivors.includes(a.broker)).length;
      takeOverFigure = `${Math.round(performance.now() - isolatedMs)} ms later etcd still gave its lease ${ttl} s, ${byOthers} writes acknowledged by a survivor`;
    }
    expect(probe.acks.size).toBe(probeAcksAtLapse);

    // etcd reachable again: a lease valid again (a fresh one after the cut: the old one expired in etcd).
    if (mode === "cut") proxy.resume();
    else {
      // The connections whose answers were thrown away carry broken streams: drop them, as a real network
      // that lost bytes would end the connection, and listen again.
      proxy.cut();
      proxy.dropResponses = false;
      proxy.resume();
    }
    const restoredMs = performance.now();
    const leaseAfter = await until("the isolated broker's lease valid again", 30_000, async () => {
      const lease = await leaseOf(cluster, victim);
      return lease.state === "valid" ? lease : undefined;
    });
    const regainedMs = Math.round(performance.now() - restoredMs);
    // After the cut the old lease expired in etcd; with answers lost only, etcd may have kept it.
    if (mode === "cut" || expectTakeOver) expect(leaseAfter.id).not.toBe(leaseBefore.id);
    expect(leaseAfter.lapses).toBe(leaseBefore.lapses + 1);
    await until("the isolated broker's /ready answering 200", 30_000, async () => ((await readyStatus(cluster, victim)) === 200 ? true : undefined));
    // A fair share of every topic's partitions again (the moves back may take a few ownership rounds).
    const fairShare = (topics.length * PARTITIONS) / 3;
    await until(`broker ${victim} leading ${fairShare} partitions again`, 30_000, async () => {
      const { shares } = await cluster.waitForBalanced(topics);
      return shares.get(victim) === fairShare ? true : undefined;
    });
    if (!expectTakeOver) {
      // It kept its partitions: writable again through it.
      const back = await until("the probe acknowledged again", 30_000, async () => [...probe.acks.values()].find((a) => a.answeredMs > restoredMs));
      takeOverFigure += `; ${topic}-0 unwritable ${Math.round(back.answeredMs - Math.max(lastVictimAck.answeredMs, isolatedMs))} ms in all`;
    }
    await probe.stop();
    await follower.stop();

    expect(await producer.exitWithin(150_000), producer.output()).toBe(0);
    const report = readIdempotentReport(out);
    expect({ delivered: report.delivered, fatal: report.fatal, failed: report.failed.length }).toEqual({ delivered: records, fatal: null, failed: 0 });
    const values = await readAll(cluster, topic);
    const acked = new Map(report.reports.map(([i, partition, offset]) => [i, { partition, offset }] as const));
    expect(sequenceProblems(values, pyNumber, acked).slice(0, 20)).toEqual([]);
    expect(sequenceProblems(values, probe.numberOf, probe.acks).slice(0, 20)).toEqual([]);
    expect(sequenceProblems(values, follower.numberOf, follower.acks).slice(0, 20)).toEqual([]);
    console.log(
      `${mode}: broker ${victim} (leading ${victimPartitions.join(",")}) isolated; its last acknowledgement answered ${Math.round(stoppedAckingMs)} ms after (sent ${Math.round(lastVictimAck.sentMs - isolatedMs)} ms after), /ready 503 after ${Math.round(notReadyMs)} ms; ` +
        `${takeOverFigure}; ` +
        `lease valid again ${regainedMs} ms after etcd came back (${leaseAfter.id === leaseBefore.id ? "the same lease" : "a fresh lease"}); ` +
        `${records} records delivered, probe: ${probe.acks.size} acknowledged, ${probe.errors.length} refused (${[...new Set(probe.errors.map((e) => e.errorCode))].join(",")})`,
    );
  }

  test("etcd connections cut under load: the cut-off leader stops acknowledging within the TTL, the survivors take over, it comes back under a fresh lease; every record once", async () => {
    await cluster.withLogs(() => isolate("cut", true));
  }, 150_000);

  test("etcd's answers lost under load (its requests applied): the broker's lease lapses by its own clock and it acknowledges nothing; it stops renewing a TTL later, the survivors take over, it comes back under a fresh lease; every record once", async () => {
    await cluster.withLogs(() => isolate("drop-responses", true));
  }, 150_000);
});

describe("an etcd of three members", () => {
  let cluster: BunkaCluster;

  beforeAll(async () => {
    await ensureInteropClients();
    cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: SESSION_TIMEOUT_MS, etcdMembers: 3 });
  }, 180_000);

  afterAll(async () => {
    await killLiveChildren();
    await cluster?.close();
  });

  /** Until every broker has a keep-alive confirmed that it sent after `sinceMs` (Date.now()): its lease valid through the members left. */
  async function leasesRenewedSince(sinceMs: number, what: string): Promise<void> {
    for (const id of cluster.ids) {
      await until(`broker ${id}'s lease renewed ${what}`, 30_000, async () => {
        const askedMs = Date.now();
        const lease = await leaseOf(cluster, id);
        // Valid until the last confirmed keep-alive's send time + TTL - margin: past sinceMs + TTL - margin, that
        // keep-alive was sent after sinceMs (askedMs is before the broker's answer, so this errs on the safe side).
        return lease.state === "valid" && askedMs + lease.validForMs > sinceMs + SESSION_TIMEOUT_MS - SAFETY_MARGIN_MS ? true : undefined;
      });
    }
  }

  test("each member SIGKILLed in turn and restarted, then the raft leader down for good: the brokers keep or regain their leases, all three lead, every record once", async () => {
    await cluster.withLogs(async () => {
      const etcd = cluster.etcdCluster!;
      const topic = "etcd-members";
      await cluster.createTopic(topic, PARTITIONS);
      await cluster.waitForBalanced([topic]);
      const raftLeaderAtStart = await etcd.leaderIndex();
      const leasesBefore = new Map<number, LeaseView>();
      for (const id of cluster.ids) leasesBefore.set(id, await leaseOf(cluster, id));
      const out = join(cluster.dir, `${topic}-report.json`);
      const records = 25 * RATE_PER_S;
      const producer = startIdempotentProducer(cluster.bootstrap, topic, records, RATE_PER_S, out);
      await waitForRecords(cluster, topic, 0, 100);

      const figures: string[] = [];
      const lapses = async () => (await Promise.all(cluster.ids.map(async (id) => (await leaseOf(cluster, id)).lapses))).join("/");
      for (let member = 0; member < etcd.members.length; member++) {
        const wasLeader = (await etcd.leaderIndex()) === member;
        const killedMs = Date.now();
        await etcd.member(member).kill();
        await leasesRenewedSince(killedMs, `after ${etcd.member(member).name} was killed`);
        figures.push(`${etcd.member(member).name}${wasLeader ? " (raft leader)" : ""} killed: leases renewed within ${Date.now() - killedMs} ms, lapses ${await lapses()}`);
        await etcd.member(member).launch();
        await etcd.waitHealthy();
      }
      const leader = await etcd.leaderIndex();
      expect(leader).toBeGreaterThanOrEqual(0);
      const downMs = Date.now();
      await etcd.member(leader).kill();
      await leasesRenewedSince(downMs, `with ${etcd.member(leader).name}, the raft leader, down`);
      figures.push(`${etcd.member(leader).name} (raft leader) down for good: leases renewed within ${Date.now() - downMs} ms, lapses ${await lapses()}`);

      expect(await producer.exitWithin(150_000), producer.output()).toBe(0);
      const report = readIdempotentReport(out);
      expect({ delivered: report.delivered, fatal: report.fatal, failed: report.failed.length }).toEqual({ delivered: records, fatal: null, failed: 0 });
      const { shares } = await cluster.waitForBalanced([topic]);
      expect([...shares.keys()].sort()).toEqual([1, 2, 3]);
      const values = await readAll(cluster, topic);
      const acked = new Map(report.reports.map(([i, partition, offset]) => [i, { partition, offset }] as const));
      expect(sequenceProblems(values, pyNumber, acked).slice(0, 20)).toEqual([]);
      const leasesAfter = new Map<number, LeaseView>();
      for (const id of cluster.ids) leasesAfter.set(id, await leaseOf(cluster, id));
      const kept = cluster.ids.map((id) => `${id}: ${leasesAfter.get(id)!.id === leasesBefore.get(id)!.id ? "same lease" : "fresh lease"}, ${leasesAfter.get(id)!.lapses - leasesBefore.get(id)!.lapses} lapse(s)`);
      console.log(`etcd members (raft leader at start m${raftLeaderAtStart + 1}): ${figures.join("; ")}; ${records} records delivered; brokers ${kept.join(", ")}`);
    });
  }, 180_000);
});
