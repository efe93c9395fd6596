/**
 * The query ports answered from a real broker (in-memory Fs, manual clock, no socket): topics, partition
 * offsets, producer windows, readiness, and the metrics text with the broker's own numbers in it. Then the
 * app over those ports, to check that the two fit (what the fakes of app.test.ts stand in for).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { decode as decodeMsgpack } from "@msgpack/msgpack";
import { createBroker, type Broker } from "../../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { createHttpApp } from "../../../src/http/app.ts";
import { BrokerQueryPorts } from "../../../src/http/broker-ports.ts";
import { timedFs } from "../../../src/http/fs-timing.ts";
import { BrokerMetrics } from "../../../src/http/metrics.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { parseBatchHeader } from "../../../src/protocol/records/record-batch.ts";
import { simpleBatch } from "../../support/batch-builder.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const brokers: Broker[] = [];
afterEach(async () => {
  for (const b of brokers.splice(0)) await b.close();
});

async function setup() {
  const clock = new ManualClock();
  const metrics = new BrokerMetrics();
  const fs = timedFs(new MemoryFs(), () => clock.monotonicMs(), (kind, ms) => metrics.onFsync(kind, ms));
  const config = { ...defaultBrokerConfig(), dataDir: "/data", listenPort: 0, httpPort: 0 };
  const broker = await createBroker({ config, fs, clock, log: silentLogger, observer: metrics, maintenance: false });
  brokers.push(broker);
  const startedAtMs = clock.nowMs();
  const ports = new BrokerQueryPorts({ broker, metrics, version: "0.0.0-test", nowMs: () => clock.nowMs(), startedAtMs });
  return { clock, metrics, broker, ports };
}

async function createTopic(broker: Broker, name: string, partitions: number) {
  const result = await broker.services.topics.create({ name, partitions, configs: { "retention.ms": "3600000" } });
  expect(result.ok).toBe(true);
}

/** Appends `count` records as producer `producerId` from `baseSequence`, and waits until they are durable. */
async function produce(broker: Broker, topic: string, partition: number, count: number, producer?: { producerId: number; baseSequence: number }) {
  const p = (await broker.services.partitions.get(topic, partition))!;
  const batch = simpleBatch(count, producer ? { producerId: producer.producerId, producerEpoch: 0, baseSequence: producer.baseSequence } : {});
  const outcome = p.appendFromProducer(batch, parseBatchHeader(batch));
  if (outcome.kind !== "appended") throw new Error(`append failed: ${JSON.stringify(outcome)}`);
  await outcome.written;
  await p.log.flush();
  return outcome.baseOffset;
}

/** ApiVersions v0, correlation id 7: request header v1 with client id "t", empty body. */
function apiVersionsFrame(): Uint8Array {
  const frame = new Uint8Array(2 + 2 + 4 + 2 + 1);
  const view = new DataView(frame.buffer);
  view.setInt16(0, 18);
  view.setInt16(2, 0);
  view.setInt32(4, 7);
  view.setInt16(8, 1);
  frame[10] = 0x74;
  return frame;
}

describe("BrokerQueryPorts", () => {
  test("readiness: not before the listener is bound, ready after, not ready once stopping", async () => {
    const { ports } = await setup();
    expect(await ports.readiness()).toEqual({ ready: false, reason: "the Kafka listener is not bound yet" });
    ports.setListener({ connectionCount: () => 2 });
    expect(await ports.readiness()).toEqual({ ready: true });
    ports.markStopping();
    expect(await ports.readiness()).toEqual({ ready: false, reason: "the broker is shutting down" });
  });

  test("cluster: id, this broker, uptime from the injected clock, counts and features", async () => {
    const { clock, broker, ports } = await setup();
    ports.setListener({ connectionCount: () => 2 });
    await createTopic(broker, "orders", 3);
    clock.advance(90_000);
    const cluster = ports.cluster();
    expect(cluster).toMatchObject({
      clusterId: broker.services.clusterId,
      brokerId: 0,
      controllerId: 0,
      mode: "single",
      version: "0.0.0-test",
      uptimeMs: 90_000,
      connections: 2,
      topicCount: 1,
      partitionCount: 3,
    });
    // Features follow the registered handlers, so they turn on as the subsystems land.
    expect(cluster.features).toEqual({
      idempotentProducer: broker.registry.get(22) !== undefined,
      transactions: broker.registry.get(26) !== undefined,
      consumerGroups: broker.registry.get(11) !== undefined,
    });
    expect(cluster.features.idempotentProducer).toBe(true);
    expect(cluster.brokers).toHaveLength(1);
  });

  test("topics and a topic's partitions: offsets, segments, size; an unopened partition is reported, not opened", async () => {
    const { broker, ports } = await setup();
    await createTopic(broker, "orders", 2);
    await createTopic(broker, "audit", 1);
    await produce(broker, "orders", 0, 3);
    await produce(broker, "orders", 0, 2);

    const topics = await ports.topics();
    expect(topics.map((t) => t.name)).toEqual(["audit", "orders"]);
    const orders = topics.find((t) => t.name === "orders")!;
    expect(orders.partitions).toBe(2);
    expect(orders.configs).toEqual({ "retention.ms": "3600000" });
    expect(orders.sizeBytes).toBeGreaterThan(0);

    const detail = (await ports.topic("orders"))!;
    const [p0, p1] = detail.partitionDetails;
    expect(p0).toMatchObject({
      partition: 0,
      leader: 0,
      open: true,
      logStartOffset: 0,
      logEndOffset: 5,
      highWatermark: 5,
      lastStableOffset: 5,
      segmentCount: 1,
      segmentBaseOffsets: [0],
      producerCount: 0,
      failure: null,
    });
    expect(p0!.sizeBytes).toBe(orders.sizeBytes);
    expect(p1).toMatchObject({ partition: 1, open: false, logEndOffset: null, highWatermark: null });
    // Looking did not open it.
    expect((await broker.services.partitions.openPartitions()).map((p) => `${p.topic}-${p.partition}`).sort()).toEqual(["orders-0"]);
    expect(await ports.topic("nope")).toBeUndefined();
  });

  test("producers: the dedupe window of each producer id, lowest id first, with limit and a single-id filter", async () => {
    const { broker, ports } = await setup();
    await createTopic(broker, "orders", 2);
    await produce(broker, "orders", 0, 2, { producerId: 2000, baseSequence: 0 });
    await produce(broker, "orders", 0, 3, { producerId: 1000, baseSequence: 0 });
    await produce(broker, "orders", 0, 1, { producerId: 2000, baseSequence: 2 });

    const all = await ports.producers("orders", 0, { limit: 10 });
    expect(all.kind).toBe("ok");
    if (all.kind !== "ok") return;
    expect(all.view).toMatchObject({ topic: "orders", partition: 0, open: true, total: 2, truncated: false });
    expect(all.view.producers.map((p) => p.producerId)).toEqual([1000, 2000]);
    expect(all.view.producers[1]).toEqual({
      producerId: 2000,
      epoch: 0,
      batches: [
        { firstSeq: 0, lastSeq: 1, firstOffset: 0, lastOffset: 1, timestampMs: expect.any(Number) },
        { firstSeq: 2, lastSeq: 2, firstOffset: 5, lastOffset: 5, timestampMs: expect.any(Number) },
      ],
      lastTimestampMs: expect.any(Number),
      currentTxnFirstOffset: null,
      coordinatorEpoch: null,
    });

    const first = await ports.producers("orders", 0, { limit: 1 });
    expect(first.kind === "ok" && first.view).toMatchObject({ total: 2, truncated: true, producers: [{ producerId: 1000 }] });
    const one = await ports.producers("orders", 0, { limit: 10, producerId: 2000 });
    expect(one.kind === "ok" && one.view.producers.map((p) => p.producerId)).toEqual([2000]);
    const none = await ports.producers("orders", 0, { limit: 10, producerId: 3 });
    expect(none.kind === "ok" && none.view.producers).toEqual([]);

    expect(await ports.producers("orders", 1, { limit: 10 })).toEqual({
      kind: "ok",
      view: { topic: "orders", partition: 1, open: false, total: 0, truncated: false, producers: [] },
    });
    expect(await ports.producers("orders", 2, { limit: 10 })).toEqual({ kind: "unknown-partition", partitions: 2 });
    expect(await ports.producers("nope", 0, { limit: 10 })).toEqual({ kind: "unknown-topic" });
  });

  test("metrics: requests through the dispatcher, fsyncs through the Fs, and per-partition gauges", async () => {
    const { broker, ports } = await setup();
    ports.setListener({ connectionCount: () => 4 });
    await createTopic(broker, "orders", 2);
    await produce(broker, "orders", 1, 4, { producerId: 1000, baseSequence: 0 });
    await broker.dispatch(apiVersionsFrame(), { id: 1, remoteAddress: "test", close() {} });

    const text = await ports.metrics();
    expect(text.endsWith("\n")).toBe(true);
    for (const line of [
      'bunka_build_info{version="0.0.0-test",lz4_kernel="wasm",snappy_kernel="wasm"} 1',
      "bunka_ready 1",
      "bunka_connections 4",
      'bunka_requests_total{api_key="18",api="ApiVersions",api_version="0"} 1',
      "bunka_topics 1",
      "bunka_partitions 2",
      "bunka_partitions_open 1",
      'bunka_partition_log_start_offset{topic="orders",partition="1"} 0',
      'bunka_partition_log_end_offset{topic="orders",partition="1"} 4',
      'bunka_partition_high_watermark{topic="orders",partition="1"} 4',
      'bunka_partition_last_stable_offset{topic="orders",partition="1"} 4',
      'bunka_partition_segments{topic="orders",partition="1"} 1',
      'bunka_partition_producers{topic="orders",partition="1"} 1',
    ]) {
      expect(text.split("\n")).toContain(line);
    }
    // The topic store and the log fsync files and directories; every one of them was timed.
    const fileFsyncs = Number(text.match(/^bunka_fsync_duration_seconds_count\{kind="file"\} (\d+)$/m)![1]);
    const dirFsyncs = Number(text.match(/^bunka_fsync_duration_seconds_count\{kind="dir"\} (\d+)$/m)![1]);
    expect(fileFsyncs).toBeGreaterThan(0);
    expect(dirFsyncs).toBeGreaterThan(0);
    // Every sample line belongs to a family declared before it.
    const declared = new Set<string>();
    for (const line of text.trimEnd().split("\n")) {
      const type = line.match(/^# TYPE (\S+) /);
      if (type) declared.add(type[1]!);
      if (line.startsWith("#")) continue;
      const name = line.match(/^([a-z_]+)/)![1]!;
      expect(declared.has(name) || declared.has(name.replace(/_(bucket|sum|count)$/, ""))).toBe(true);
    }
  });

  test("metrics: the listener's response bytes held and its paused connections by reason", async () => {
    const { ports } = await setup();
    ports.setListener({
      connectionCount: () => 5,
      heldResponseBytes: () => 123_456,
      pausedConnections: () => ({ output: 1, "in-flight": 0, "connection-bytes": 2, "broker-bytes": 3 }),
    });
    const lines = (await ports.metrics()).split("\n");
    for (const line of [
      "bunka_response_bytes_held 123456",
      'bunka_connections_paused{reason="output"} 1',
      'bunka_connections_paused{reason="in_flight"} 0',
      'bunka_connections_paused{reason="connection_bytes"} 2',
      'bunka_connections_paused{reason="broker_bytes"} 3',
    ]) {
      expect(lines).toContain(line);
    }
    // A listener that does not report them (an older embedding) still gets every series, at 0.
    ports.setListener({ connectionCount: () => 0 });
    const bare = (await ports.metrics()).split("\n");
    expect(bare).toContain("bunka_response_bytes_held 0");
    expect(bare).toContain('bunka_connections_paused{reason="broker_bytes"} 0');
  });

  test("the app over the real ports: JSON and MessagePack agree", async () => {
    const { broker, ports } = await setup();
    ports.setListener({ connectionCount: () => 0 });
    await createTopic(broker, "orders", 1);
    await produce(broker, "orders", 0, 2);
    const app = createHttpApp(ports);
    const asJson = (await (await app.request("/v1/topics/orders")).json()) as { partitionDetails: Array<{ logEndOffset: number }> };
    const packed = await app.request("/v1/topics/orders", { headers: { Accept: "application/msgpack" } });
    expect(decodeMsgpack(new Uint8Array(await packed.arrayBuffer()))).toEqual(asJson);
    expect(asJson.partitionDetails[0]?.logEndOffset).toBe(2);
    expect((await app.request("/ready")).status).toBe(200);
  });
});
