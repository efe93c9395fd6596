/**
 * A three-broker cluster (tests/support/bunka-cluster.ts) when a broker freezes and when etcd restarts.
 *
 * 1. SIGSTOP past the lease, under a produce load. An idempotent producer written here (raw Produce v11,
 *    acks=-1, one record per request, values numbered by sequence) writes one partition through whichever
 *    broker Metadata names its leader, moving on after 2 s without an answer and retrying the same sequence
 *    there (a duplicate is answered with the first write's offset). A second producer id fires five requests
 *    at the leader just before it is frozen. The frozen broker's lease lapses, a survivor takes the
 *    partition over, the writer carries on there; then the frozen broker is resumed. Every answer the resumed
 *    broker sends after SIGCONT must be an error (its lease lapsed while it was stopped: it may not
 *    acknowledge anything), every acknowledged record is in the log exactly once, in order, at its offset,
 *    and the resumed broker rejoins with a fresh lease.
 * 2. etcd stopped and started again while librdkafka's idempotent producer writes to every broker: the
 *    brokers keep or regain their leases (every broker valid again, all three listed and leading), the
 *    producer delivers every record, each once, in order.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
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
let cluster: BunkaCluster;

beforeAll(async () => {
  await ensureInteropClients();
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: SESSION_TIMEOUT_MS });
}, 180_000);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

interface Answer {
  broker: number;
  sequence: number;
  errorCode: number;
  offset: number;
  receivedMs: number;
}

async function initProducerId(client: WireClient): Promise<{ producerId: number; producerEpoch: number }> {
  const res = await client.request(22, 4, { transactionalId: null, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
  expect(res.errorCode).toBe(ErrorCode.NONE);
  return { producerId: Number(res.producerId), producerEpoch: res.producerEpoch };
}

function produceRequest(client: WireClient, topic: string, partition: number, producer: { producerId: number; producerEpoch: number }, sequence: number, label: string) {
  const records = buildBatch({ records: [{ key: label, value: `${label}-${sequence}`, timestampMs: Date.now() }], ...producer, baseSequence: sequence });
  return client.request(0, 11, { transactionalId: null, acks: -1, timeoutMs: 10_000, topicData: [{ name: topic, partitionData: [{ index: partition, records }] }] });
}

describe("a frozen broker and a restarted etcd", () => {
  test("SIGSTOP of a partition's leader past its lease, resumed after a survivor took over: it acknowledges nothing, every acknowledged record is there once", async () => {
    await cluster.withLogs(async () => {
      const topic = "pause-load";
      const partition = 0;
      await cluster.createTopic(topic, 3);
      await cluster.waitForBalanced([topic]);
      const victim = await cluster.leaderOf(topic, partition);
      const answers: Answer[] = [];
      const clients = new Map<number, WireClient>();
      const connection = async (id: number) => {
        let c = clients.get(id);
        if (c === undefined || c.isClosed) clients.set(id, (c = await WireClient.connect(cluster.port(id))));
        return c;
      };
      const writerProducer = await initProducerId(await connection(cluster.ids.find((id) => id !== victim)!));
      const proberProducer = await initProducerId(await connection(cluster.ids.find((id) => id !== victim)!));

      // The writer.
      let stop = false;
      let nextSequence = 0;
      const acked = new Map<number, { partition: number; offset: number; broker: number }>();
      const writerErrors: string[] = [];
      const writer = (async () => {
        // Bounded, so that a failed wait of this test does not leave it writing during the next one.
        const writerDeadline = Date.now() + 120_000;
        while (!stop && Date.now() < writerDeadline) {
          const leader = await cluster.leaderOf(topic, partition);
          if (leader < 0) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          const sequence = nextSequence;
          let answered: Answer | undefined;
          try {
            const pending = produceRequest(await connection(leader), topic, partition, writerProducer, sequence, "w").then((res) => {
              const p = res.responses[0].partitionResponses[0];
              const answer: Answer = { broker: leader, sequence, errorCode: p.errorCode, offset: Number(p.baseOffset), receivedMs: performance.now() };
              answers.push(answer);
              return answer;
            });
            pending.catch(() => undefined);
            answered = await Promise.race([pending, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000))]);
          } catch (error) {
            clients.delete(leader);
            writerErrors.push(`broker ${leader}: ${(error as Error).message}`);
          }
          if (answered?.errorCode === ErrorCode.NONE) {
            acked.set(sequence, { partition, offset: answered.offset, broker: leader });
            nextSequence++;
          } else await new Promise((r) => setTimeout(r, 20));
        }
      })();

      await until("200 records acknowledged", 30_000, async () => (acked.size >= 200 ? true : undefined));
      // Five requests in flight at the leader as it freezes.
      const prober = await WireClient.connect(cluster.port(victim));
      const proberList: Answer[] = [];
      const proberAnswers = [0, 1, 2, 3, 4].map((sequence) =>
        produceRequest(prober, topic, partition, proberProducer, sequence, "p").then((res) => {
          const p = res.responses[0].partitionResponses[0];
          const answer: Answer = { broker: victim, sequence, errorCode: p.errorCode, offset: Number(p.baseOffset), receivedMs: performance.now() };
          answers.push(answer);
          proberList.push(answer);
          return answer;
        }),
      );
      cluster.pause(victim);
      const ackedAtPause = acked.size;
      // A survivor took over (after the frozen broker's lease expired) and acknowledged 100 more.
      const recentAnswers = () => JSON.stringify(answers.slice(-8).map((a) => ({ broker: a.broker, sequence: a.sequence, errorCode: a.errorCode })));
      await until("100 records acknowledged by a survivor", 30_000, async () => (acked.size >= ackedAtPause + 100 && [...acked.values()].some((a) => a.broker !== victim) ? true : undefined)).catch(
        (error: Error) => {
          throw new Error(`${error.message}; ${acked.size - ackedAtPause} acknowledged since the pause, next sequence ${nextSequence}, last answers ${recentAnswers()}, last errors ${JSON.stringify(writerErrors.slice(-5))}`);
        },
      );
      const successor = [...acked.values()].at(-1)!.broker;
      expect(successor).not.toBe(victim);
      cluster.resume(victim);
      const resumedMs = performance.now();
      const ackedAtResume = acked.size;
      await until("100 records acknowledged after the resume", 30_000, async () => (acked.size >= ackedAtResume + 100 ? true : undefined));
      stop = true;
      await writer;
      const prober5 = await Promise.race([Promise.allSettled(proberAnswers), new Promise<"open">((r) => setTimeout(() => r("open"), 15_000))]);

      // Nothing acknowledged by the resumed broker: every answer of it received after SIGCONT is an error.
      const lateFromVictim = answers.filter((a) => a.broker === victim && a.receivedMs >= resumedMs);
      expect(lateFromVictim.filter((a) => a.errorCode === ErrorCode.NONE)).toEqual([]);
      // The five in flight were answered (the connection was not left hanging).
      expect(prober5).not.toBe("open");

      // The log: every acknowledged sequence of the writer once, in order, at its offset; the prober's too.
      const contents = await cluster.readPartition(topic, partition);
      const values = new Map([[partition, contents.records.map((r) => ({ offset: r.offset, value: utf8(r.value) }))]]);
      const writerOf = (v: string | null) => (v?.startsWith("w-") ? Number(v.slice(2)) : undefined);
      expect(sequenceProblems(values, writerOf, acked).slice(0, 20)).toEqual([]);
      const proberAcked = new Map(proberList.filter((a) => a.errorCode === ErrorCode.NONE).map((a) => [a.sequence, { partition, offset: a.offset }] as const));
      const proberOf = (v: string | null) => (v?.startsWith("p-") ? Number(v.slice(2)) : undefined);
      expect(sequenceProblems(values, proberOf, proberAcked).slice(0, 20)).toEqual([]);
      for (const c of clients.values()) c.close();
      prober.close();

      // The resumed broker is back with a fresh lease, and the cluster balances with it.
      await until("the resumed broker's lease valid again", 30_000, async () => {
        const view = (await (await fetch(`${cluster.process(victim)!.http}/v1/cluster`)).json()) as { lease: { state: string } };
        return view.lease.state === "valid" ? true : undefined;
      });
      await cluster.waitForBalanced([topic]);
      console.log(
        `pause: broker ${victim} frozen with ${ackedAtPause} acknowledged, ${successor} took over, ${acked.size} acknowledged in all; ` +
          `the resumed broker answered ${lateFromVictim.length} requests after SIGCONT, all errors (${[...new Set(lateFromVictim.map((a) => a.errorCode))].join(",")})`,
      );
    });
  }, 240_000);

  test("etcd restarted under librdkafka's idempotent load: every broker's lease valid again, all three lead, every record once, in order", async () => {
    await cluster.withLogs(async () => {
      const topic = "etcd-restart-load";
      await cluster.createTopic(topic, 6);
      await cluster.waitForBalanced([topic]);
      const out = join(cluster.dir, "etcd-restart-report.json");
      const records = 12_000;
      const producer = startIdempotentProducer(cluster.bootstrap, topic, records, 1500, out);
      // Once records flow (the producer reports only at its end): partition 0's high watermark past 100.
      await until("records in the topic", 30_000, async () => {
        const leader = await cluster.leaderOf(topic, 0);
        if (leader < 0) return undefined;
        const res = await cluster.withClient(leader, (c) => c.request(2, 7, { replicaId: -1, isolationLevel: 0, topics: [{ name: topic, partitions: [{ partitionIndex: 0, currentLeaderEpoch: -1, timestamp: -1 }] }] }));
        const p = res.topics[0].partitions[0];
        return p.errorCode === 0 && Number(p.offset) > 100 ? true : undefined;
      });
      await cluster.restartEtcd();
      const restartedMs = Date.now();
      expect(await producer.exitWithin(120_000), producer.output()).toBe(0);
      const report = readIdempotentReport(out);
      expect({ delivered: report.delivered, fatal: report.fatal, failed: report.failed.length }).toEqual({ delivered: records, fatal: null, failed: 0 });
      for (const id of cluster.ids) {
        await until(`broker ${id}'s lease valid`, 30_000, async () => {
          const view = (await (await fetch(`${cluster.process(id)!.http}/v1/cluster`)).json()) as { lease: { state: string } };
          return view.lease.state === "valid" ? true : undefined;
        });
      }
      const { shares } = await cluster.waitForBalanced([topic]);
      expect([...shares.keys()].sort()).toEqual([1, 2, 3]);
      const values = new Map<number, { offset: number; value: string | null }[]>();
      for (let p = 0; p < 6; p++) values.set(p, (await cluster.readPartition(topic, p)).records.map((r) => ({ offset: r.offset, value: utf8(r.value) })));
      const acked = new Map(report.reports.map(([i, partition, offset]) => [i, { partition, offset }] as const));
      expect(sequenceProblems(values, (v) => (/^py-\d{6}$/.test(v ?? "") ? Number(v!.slice(3)) : undefined), acked).slice(0, 20)).toEqual([]);
      console.log(`etcd restart: ${records} records delivered, settled ${Date.now() - restartedMs} ms after etcd came back`);
    });
  }, 240_000);
});
