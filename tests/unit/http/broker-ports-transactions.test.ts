/**
 * The transaction side of the query ports against a real broker (in-memory Fs, manual clock, coordinator
 * timers off so that nothing runs behind the test's back): the list and its filters, one transaction with
 * its staged offsets and pending markers, the marker queue files, the hanging-transaction warnings, the
 * transaction, LSO and group metrics, and the admin abort through the coordinator.
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
import { MarkerQueue } from "../../../src/storage/marker-queue.ts";
import type { Partition } from "../../../src/storage/partition.ts";
import { buildBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { SwappableVerifier } from "../../support/swappable-verifier.ts";

const brokers: Broker[] = [];
afterEach(async () => {
  for (const b of brokers.splice(0)) await b.close();
});

const TOKEN = "s3cret";

async function setup() {
  const clock = new ManualClock();
  const fs = new MemoryFs();
  const config = { ...defaultBrokerConfig(), dataDir: "/data", listenPort: 0, httpPort: 0 };
  const verifiers = new SwappableVerifier();
  const broker = await createBroker({ config, fs, clock, log: silentLogger, maintenance: false, txn: { timers: false }, transactionVerifier: verifiers.wrap });
  brokers.push(broker);
  await broker.services.txn.whenReady();
  const ports = new BrokerQueryPorts({ broker, metrics: new BrokerMetrics(), version: "0.0.0-test", nowMs: () => clock.nowMs(), startedAtMs: clock.nowMs() });
  ports.setListener({ connectionCount: () => 0 });
  const app = createHttpApp(ports, { adminToken: TOKEN });
  expect((await broker.services.topics.create({ name: "orders", partitions: 2 })).ok).toBe(true);
  return { clock, fs, broker, ports, app, verifiers };
}

/** A transaction as a client makes one: InitProducerId, AddPartitions, AddOffsets, staged offsets, a batch. */
async function openTransaction(broker: Broker, transactionalId: string, opts: { timeoutMs?: number; groupId?: string } = {}) {
  const { txn, groups } = broker.services;
  const init = await txn.initProducerId({ transactionalId, timeoutMs: opts.timeoutMs ?? 60_000, producerId: -1, producerEpoch: -1 });
  expect(init.errorCode).toBe(ErrorCode.NONE);
  const ref = { transactionalId, producerId: init.producerId, producerEpoch: init.producerEpoch };
  expect(await txn.addPartitions({ ...ref, partitions: [{ topic: "orders", partitions: [0] }] })).toBe(ErrorCode.NONE);
  if (opts.groupId !== undefined) {
    expect(await txn.addOffsets({ ...ref, groupId: opts.groupId })).toBe(ErrorCode.NONE);
    await groups.stageTransactionalOffsets(opts.groupId, init.producerId, [{ topic: "orders", partition: 0, offset: 3, leaderEpoch: -1, metadata: null }]);
  }
  await appendTransactional(broker, 0, init.producerId, init.producerEpoch, 3);
  return ref;
}

async function appendTransactional(broker: Broker, partition: number, producerId: number, producerEpoch: number, count: number): Promise<Partition> {
  const p = (await broker.services.partitions.get("orders", partition))!;
  const batch = buildBatch({
    records: Array.from({ length: count }, (_, i) => ({ value: `v${i}` })),
    producerId,
    producerEpoch,
    baseSequence: 0,
    transactional: true,
  });
  const outcome = p.appendFromProducer(batch, parseBatchHeader(batch));
  if (outcome.kind !== "appended") throw new Error(`append failed: ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return p;
}

/** The JSON body of a side-port answer (untyped: the tests check its shape). */
async function body(response: Response | Promise<Response>): Promise<any> {
  return (await response).json();
}

function lines(text: string): string[] {
  return text.split("\n");
}

describe("transactions over the real coordinator", () => {
  test("an ongoing transaction: list with filters, describe with staged offsets, overview, metrics, dashboard", async () => {
    const { clock, broker, ports, app } = await setup();
    const ref = await openTransaction(broker, "app-1", { groupId: "g1" });
    const startedMs = clock.nowMs();
    clock.advance(5_000);

    const all = await ports.transactions.list({ limit: 100 });
    expect(all.total).toBe(1);
    expect(all.transactions[0]).toEqual({
      transactionalId: "app-1",
      producerId: ref.producerId,
      lastProducerId: ref.producerId,
      epoch: ref.producerEpoch,
      lastEpoch: expect.any(Number),
      timeoutMs: 60_000,
      state: "Ongoing",
      partitions: [{ topic: "orders", partition: 0 }],
      groups: ["g1"],
      ongoingSinceMs: startedMs,
      ageMs: 5_000,
      timedOut: false,
      updatedMs: startedMs,
      slot: expect.any(Number),
      coordinatorBrokerId: 0,
    });
    for (const [filter, expected] of [
      [{ state: "Ongoing" as const }, 1],
      [{ state: "Empty" as const }, 0],
      [{ minAgeMs: 5_000 }, 1],
      [{ minAgeMs: 5_001 }, 0],
      [{ producerId: ref.producerId }, 1],
      [{ producerId: ref.producerId + 1 }, 0],
    ] as const) {
      expect((await ports.transactions.list({ limit: 100, ...filter })).total).toBe(expected);
    }

    const detail = await body(app.request("/v1/transactions/app-1"));
    expect(detail).toMatchObject({ transactionalId: "app-1", state: "Ongoing", ageMs: 5_000, pendingMarkers: [] });
    expect(detail.stagedOffsets).toEqual([{ groupId: "g1", topic: "orders", partition: 0, offset: 3, leaderEpoch: -1, metadata: "", commitTimestampMs: startedMs }]);
    const missing = await app.request("/v1/transactions/nope");
    expect(missing.status).toBe(404);
    expect((await body(missing)).error).toBe("unknown_transactional_id");

    expect(await ports.transactions.overview()).toEqual({
      byState: { Empty: 0, Ongoing: 1, PrepareCommit: 0, PrepareAbort: 0, CompleteCommit: 0, CompleteAbort: 0 },
      oldestOngoingAgeMs: 5_000,
      warnings: [],
    });

    // The open transaction holds the partition's LSO: three records read_committed consumers cannot read.
    const topic = await ports.topic("orders");
    expect(topic?.partitionDetails[0]).toMatchObject({ highWatermark: 3, lastStableOffset: 0, lsoLag: 3, openTransactionCount: 1 });
    expect(topic?.partitionDetails[1]).toMatchObject({ open: false, lsoLag: null, openTransactionCount: null });

    const metrics = lines(await ports.metrics());
    for (const line of [
      'bunka_transactions{state="Ongoing"} 1',
      'bunka_transactions{state="CompleteCommit"} 0',
      "bunka_transaction_oldest_ongoing_age_seconds 5",
      "bunka_transactions_timed_out 0",
      "bunka_transaction_hanging_warnings 0",
      "bunka_transaction_markers_pending 0",
      'bunka_marker_queue_depth{target_broker="0"} 0',
      'bunka_partition_lso_lag{topic="orders",partition="0"} 3',
      'bunka_partition_open_transactions{topic="orders",partition="0"} 1',
      'bunka_consumer_groups{state="Empty"} 0',
      'bunka_consumer_groups{state="Stable"} 0',
    ]) {
      expect(metrics).toContain(line);
    }

    const html = await (await app.request("/")).text();
    expect(html).toContain('data-transactional-id="app-1"');
    expect(html).toContain('<td class="age">5s</td>');
    expect(html).toContain("No hanging transactions.");
  });

  test("past its timeout (the reaper has not run): flagged in the list, the overview, the metrics and the dashboard", async () => {
    const { clock, broker, ports, app } = await setup();
    await openTransaction(broker, "slow", { timeoutMs: 10_000 });
    clock.advance(70_000);
    expect((await ports.transactions.list({ limit: 10 })).transactions[0]).toMatchObject({ timedOut: true, ageMs: 70_000 });
    const overview = await ports.transactions.overview();
    expect(overview.warnings).toEqual([
      {
        kind: "timed-out-transaction",
        message: 'transaction "slow" (producer 0, epoch 0) has been Ongoing for 1m 10s, past its timeout of 10s',
        transactionalId: "slow",
        topic: null,
        partition: null,
        sinceMs: clock.nowMs() - 70_000,
      },
    ]);
    const metrics = lines(await ports.metrics());
    expect(metrics).toContain("bunka_transactions_timed_out 1");
    expect(metrics).toContain("bunka_transaction_oldest_ongoing_age_seconds 70");
    const html = await (await app.request("/")).text();
    expect(html).toContain('<li class="hanging-warning" data-kind="timed-out-transaction" data-transactional-id="slow">');
    expect(html).toContain('<td class="txn-state">Ongoing (timed out)</td>');
  });

  test("admin abort: 401 without the token, fenced and aborted through the coordinator, then 409, and 404 for an unknown id", async () => {
    const { broker, ports, app } = await setup();
    const ref = await openTransaction(broker, "hanging", { groupId: "g1" });
    const url = "/v1/transactions/hanging/abort";
    expect((await app.request(url, { method: "POST" })).status).toBe(401);
    expect((await app.request(url, { method: "POST", headers: { Authorization: "Bearer wrong" } })).status).toBe(401);

    const headers = { Authorization: `Bearer ${TOKEN}` };
    const res = await app.request(url, { method: "POST", headers });
    expect(res.status).toBe(200);
    expect(await body(res)).toMatchObject({
      aborted: true,
      completed: true,
      transaction: { transactionalId: "hanging", producerId: ref.producerId, epoch: ref.producerEpoch + 1, state: "CompleteAbort", partitions: [], groups: [] },
    });

    // The marker is on the partition (the LSO moved past it), the producer is fenced, the staged offsets are gone.
    const p0 = (await ports.topic("orders"))!.partitionDetails[0]!;
    expect(p0).toMatchObject({ logEndOffset: 4, highWatermark: 4, lastStableOffset: 4, lsoLag: 0, openTransactionCount: 0 });
    expect(broker.services.groups.offsetsSlot("g1").stagedOf("g1", ref.producerId).size).toBe(0);
    expect(await broker.services.txn.addPartitions({ ...ref, partitions: [{ topic: "orders", partitions: [1] }] })).toBe(ErrorCode.PRODUCER_FENCED);

    const again = await app.request(url, { method: "POST", headers });
    expect(again.status).toBe(409);
    expect(await body(again)).toEqual({ error: "not_ongoing", message: 'transaction "hanging" is CompleteAbort: only an Ongoing transaction can be aborted' });
    const unknown = await app.request("/v1/transactions/nope/abort", { method: "POST", headers });
    expect(unknown.status).toBe(404);
    expect((await body(unknown)).error).toBe("unknown_transactional_id");
  });

  test("a decision whose marker cannot be written: pending in /v1/markers and describe, a stuck-LSO warning after the grace, then completed", async () => {
    const { clock, broker, ports, app } = await setup();
    const ref = await openTransaction(broker, "stuck");
    const p0 = (await broker.services.partitions.get("orders", 0))!;
    // The partition refuses markers for a while (as a partition that is not led here would).
    const refuse = async () => ({ ok: false as const, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, message: "not now" });
    (p0 as unknown as { appendMarker: unknown }).appendMarker = refuse;
    expect((await broker.services.txn.endTxn({ ...ref, commit: true })).errorCode).toBe(ErrorCode.NONE);
    // The clock stood still since the transaction opened: the decision is stamped a millisecond after it.
    const decidedMs = clock.nowMs() + 1;

    const markers = await body(app.request("/v1/markers"));
    expect(markers).toEqual({
      total: 1,
      truncated: false,
      markers: [
        {
          transactionalId: "stuck",
          producerId: ref.producerId,
          producerEpoch: ref.producerEpoch,
          coordinatorEpoch: 0,
          result: "COMMIT",
          topic: "orders",
          partition: 0,
          targetBrokerId: 0,
          source: "coordinator",
          sinceMs: decidedMs,
          file: null,
        },
      ],
      queues: [{ targetBrokerId: 0, files: 0 }],
    });
    expect((await body(app.request("/v1/transactions/stuck"))).pendingMarkers).toEqual(markers.markers);
    expect(lines(await ports.metrics())).toContain("bunka_transaction_markers_pending 1");

    // Within the grace the decision accounts for the LSO; after it, the stuck LSO is reported.
    expect((await ports.transactions.overview()).warnings).toEqual([]);
    clock.advance(31_000);
    const { warnings } = await ports.transactions.overview();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ kind: "stuck-lso", topic: "orders", partition: 0, transactionalId: null });
    expect(warnings[0]!.message).toBe(
      `orders-0: the last stable offset has stayed at 0, 3 behind the high watermark, for 31s; producer ${ref.producerId}'s transaction from offset 0 is open here and no open transaction of this coordinator accounts for it`,
    );

    delete (p0 as unknown as { appendMarker?: unknown }).appendMarker;
    expect(await broker.services.txn.completeUnfinished()).toBe(1);
    expect((await body(app.request("/v1/markers"))).total).toBe(0);
    expect((await ports.transactions.get("stuck"))?.state).toBe("CompleteCommit");
    expect((await ports.transactions.overview()).warnings).toEqual([]);
  });

  test("an orphaned transaction on a partition (no coordinator entry) is a stuck-LSO warning once the grace has passed", async () => {
    const { clock, broker, ports, verifiers } = await setup();
    // A batch the verifier would refuse today (what an older broker or a bug may have left in a log).
    verifiers.use({ verifyBatch: () => "in-transaction" });
    await appendTransactional(broker, 1, 999, 0, 2);
    expect((await ports.transactions.overview()).warnings).toEqual([]);
    clock.advance(29_000);
    expect((await ports.transactions.overview()).warnings).toEqual([]);
    clock.advance(2_000);
    const { warnings } = await ports.transactions.overview();
    expect(warnings.map((w) => [w.kind, w.topic, w.partition])).toEqual([["stuck-lso", "orders", 1]]);
    expect(warnings[0]!.message).toContain("producer 999's transaction from offset 0 is open here");
    expect(lines(await ports.metrics())).toContain("bunka_transaction_hanging_warnings 1");
  });

  test("marker queue files for another broker: listed per partition with their file, counted per queue, shown with their transaction", async () => {
    const { fs, broker, app, ports } = await setup();
    await openTransaction(broker, "peer-txn");
    await new MarkerQueue(fs, "/data").enqueue(3, {
      transactionalId: "peer-txn",
      producerId: 0,
      producerEpoch: 0,
      coordinatorEpoch: 0,
      result: "abort",
      partitions: [{ topic: "orders", partitions: [0, 1] }],
      decidedMs: 1_700_000_000_000,
    });
    const listed = await body(app.request("/v1/markers?limit=1"));
    expect(listed.total).toBe(2);
    expect(listed.truncated).toBe(true);
    expect(listed.queues).toEqual([
      { targetBrokerId: 0, files: 0 },
      { targetBrokerId: 3, files: 1 },
    ]);
    expect(listed.markers[0]).toMatchObject({
      transactionalId: "peer-txn",
      result: "ABORT",
      topic: "orders",
      partition: 0,
      targetBrokerId: 3,
      source: "queue",
      file: "__cluster/marker_queue/to-3/0-0-1700000000000-abort.json",
    });
    expect(typeof listed.markers[0].sinceMs).toBe("number");
    expect((await ports.transactions.get("peer-txn"))?.pendingMarkers.map((m) => m.partition)).toEqual([0, 1]);
    expect(lines(await ports.metrics())).toContain('bunka_marker_queue_depth{target_broker="3"} 1');
  });

  test("consumer groups by state, every state listed", async () => {
    const { broker, ports } = await setup();
    // JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED, and the group exists, Empty.
    const joined = broker.services.groups.joinGroup({
      groupId: "readers",
      memberId: "",
      groupInstanceId: null,
      clientId: "c",
      clientHost: "h",
      rebalanceTimeoutMs: 1000,
      sessionTimeoutMs: 10_000,
      protocolType: "consumer",
      protocols: [{ name: "range", metadata: new Uint8Array(0) }],
      apiVersion: 9,
    });
    void joined.catch(() => undefined);
    const metrics = lines(await ports.metrics());
    expect(metrics).toContain('bunka_consumer_groups{state="Empty"} 1');
    const total = metrics.filter((l) => l.startsWith("bunka_consumer_groups{")).reduce((n, l) => n + Number(l.split(" ")[1]), 0);
    expect(total).toBe(1);
  });
});
