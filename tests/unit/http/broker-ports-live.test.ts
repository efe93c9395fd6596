/**
 * The live dashboard's ports against a real broker (in-memory Fs, manual clock and timers, coordinator
 * timers off): a committed transaction's timeline as the coordinator recorded it, the completion counter
 * in /metrics, the sampler's rates and partitions from the live broker, and a consumer group's committed
 * offsets with both lags.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createBroker, type Broker } from "../../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { createHttpApp } from "../../../src/http/app.ts";
import { BrokerQueryPorts } from "../../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../../src/http/metrics.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const brokers: Broker[] = [];
const portsToStop: BrokerQueryPorts[] = [];
afterEach(async () => {
  for (const p of portsToStop.splice(0)) p.markStopping();
  for (const b of brokers.splice(0)) await b.close();
});

async function setup() {
  const clock = new ManualClock();
  const timers = new ManualTimers(clock);
  const config = { ...defaultBrokerConfig(), dataDir: "/data", listenPort: 0, httpPort: 0 };
  const broker = await createBroker({ config, fs: new MemoryFs(), clock, log: silentLogger, maintenance: false, txn: { timers: false }, hangingTransactions: { timers } });
  brokers.push(broker);
  await broker.services.txn.whenReady();
  const metrics = new BrokerMetrics();
  const ports = new BrokerQueryPorts({ broker, metrics, version: "0.0.0-test", nowMs: () => clock.nowMs(), startedAtMs: clock.nowMs() });
  portsToStop.push(ports);
  ports.setListener({ connectionCount: () => 0 });
  expect((await broker.services.topics.create({ name: "orders", partitions: 1 })).ok).toBe(true);
  return { clock, timers, broker, metrics, ports, app: createHttpApp(ports) };
}

/** InitProducerId, AddPartitions, AddOffsets with a staged offset, three transactional records. */
async function openTransaction(broker: Broker, clock: ManualClock, transactionalId: string) {
  const { txn, groups, partitions } = broker.services;
  const init = await txn.initProducerId({ transactionalId, timeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
  expect(init.errorCode).toBe(ErrorCode.NONE);
  const ref = { transactionalId, producerId: init.producerId, producerEpoch: init.producerEpoch };
  clock.advance(10);
  expect(await txn.addPartitions({ ...ref, partitions: [{ topic: "orders", partitions: [0] }] })).toBe(ErrorCode.NONE);
  expect(await txn.addOffsets({ ...ref, groupId: "readers" })).toBe(ErrorCode.NONE);
  await groups.stageTransactionalOffsets("readers", init.producerId, [{ topic: "orders", partition: 0, offset: 1, leaderEpoch: -1, metadata: null }]);
  const p = (await partitions.get("orders", 0))!;
  const batch = buildBatch({ records: [{ value: "a" }, { value: "b" }, { value: "c" }], producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: 0, transactional: true });
  const outcome = p.appendFromProducer(batch, parseBatchHeader(batch));
  if (outcome.kind !== "appended") throw new Error(`append failed: ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return ref;
}

describe("the live dashboard over the real broker", () => {
  test("a committed transaction's timeline: initialized, began, added, decided, its marker, completed; counted in /metrics", async () => {
    const { clock, broker, ports, app } = await setup();
    const ref = await openTransaction(broker, clock, "app-1");
    clock.advance(5);
    expect((await broker.services.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await broker.services.txn.settled("app-1");
    const detail: any = await (await app.request("/v1/transactions/app-1")).json();
    expect(detail.timeline.map((e: { kind: string }) => e.kind)).toEqual(["initialized", "began", "added", "decided", "marker", "completed"]);
    const [initialized, began, added, decided, marker, completed] = detail.timeline;
    expect(initialized).toMatchObject({ producerId: ref.producerId, epoch: ref.producerEpoch });
    expect(began).toMatchObject({ partitions: ["orders-0"], groups: [] });
    expect(added).toMatchObject({ partitions: [], groups: ["readers"] });
    expect(decided).toMatchObject({ result: "commit", fenced: false });
    expect(marker).toMatchObject({ topic: "orders", partition: 0, result: "commit", outcome: "written" });
    expect(completed).toMatchObject({ result: "commit" });
    expect(began.atMs - initialized.atMs).toBe(10);
    expect(decided.atMs).toBeGreaterThanOrEqual(began.atMs + 5);
    const html = await (await app.request("/dashboard/transactions/app-1")).text();
    expect([...html.matchAll(/data-kind="([a-z]+)"/g)].map((m) => m[1])).toEqual(["initialized", "began", "added", "decided", "marker", "completed"]);
    const metrics = (await ports.metrics()).split("\n");
    expect(metrics).toContain('bunka_transactions_completed_total{result="commit"} 1');
    expect(metrics).toContain('bunka_transactions_completed_total{result="abort"} 0');
  });

  test("samples: produce bytes per second, the transactions committed, the partition an open transaction holds", async () => {
    const { clock, timers, broker, metrics, ports, app } = await setup();
    ports.startLive(timers);
    await timers.advance(0);
    const ref = await openTransaction(broker, clock, "app-2");
    metrics.onRequestBytes(3_000, 0);
    metrics.onResponseBytes(1_000, 1);
    metrics.onRequestBytes(99, 3); // Metadata: neither
    await timers.advance(1_000);
    let samples = ports.live!.samples();
    expect(samples).toHaveLength(1);
    expect(samples[0]).toMatchObject({ produceBytesPerSecond: 3_000, fetchBytesPerSecond: 1_000, txnCommittedPerSecond: 0 });
    expect(samples[0]!.partitions).toEqual([{ topic: "orders", partition: 0, lsoLag: 3, openTransactions: 1, oldestOpenTxnAgeMs: expect.any(Number) }]);
    expect((await broker.services.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await broker.services.txn.settled("app-2");
    await timers.advance(1_000);
    samples = ports.live!.samples();
    expect(samples[1]).toMatchObject({ produceBytesPerSecond: 0, txnCommittedPerSecond: 1, partitions: [] });
    const page = await (await app.request("/")).text();
    expect(page).toContain("2 sample(s), one every 1s");
    const committed = /data-series="committed" points="([^"]+)"/.exec(page)![1]!.split(" ").map((p) => Number(p.split(",")[1]));
    expect(committed[1]!).toBeLessThan(committed[0]!); // one a second, drawn above zero
  });

  test("a consumer group's committed offset with its lag to the high watermark and to the last stable offset", async () => {
    const { clock, broker, ports } = await setup();
    const ref = await openTransaction(broker, clock, "app-3");
    expect((await broker.services.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    await broker.services.txn.settled("app-3");
    // A consumer's commit (the classic protocol's simple form: no generation).
    const committed = await broker.services.groups.commitOffsets({
      groupId: "readers",
      memberId: "",
      groupInstanceId: null,
      generationId: -1,
      retentionTimeMs: -1,
      apiVersion: 8,
      partitions: [{ topic: "orders", partition: 0, offset: 1, leaderEpoch: -1, metadata: null, commitTimestampMs: -1 }],
    });
    expect(committed).toEqual([ErrorCode.NONE]);
    // A second transaction left open holds the LSO at 4 (three records and the first one's marker).
    await openTransaction(broker, clock, "app-4");
    const { total, groups } = await ports.groups(10);
    expect(total).toBe(1);
    expect(groups[0]).toMatchObject({ groupId: "readers", state: "Empty", members: [], offsetCount: 1 });
    expect(groups[0]!.offsets).toEqual([{ topic: "orders", partition: 0, committedOffset: 1, highWatermark: 7, lastStableOffset: 4, hwLag: 6, lsoLag: 3 }]);
  });
});
