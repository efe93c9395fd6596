/**
 * Helpers for the end-to-end tests: reading a child's stdout until a line appears, an in-process broker
 * with the Kafka listener and the HTTP side-port wired exactly as main.ts wires them, and an open
 * transaction made with raw Kafka frames. The compiled binary comes from tests/support/binary.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker } from "../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../src/broker/config.ts";
import { createHttpApp, type HttpAppOptions } from "../../src/http/app.ts";
import { BrokerQueryPorts } from "../../src/http/broker-ports.ts";
import { timedFs } from "../../src/http/fs-timing.ts";
import { BrokerMetrics, meteredDispatch } from "../../src/http/metrics.ts";
import { startHttpServer, type HttpServer } from "../../src/http/server.ts";
import { startKafkaListener, type KafkaListener } from "../../src/net/kafka-listener.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { systemTimers } from "../../src/platform/timers.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";
import { buildBatch } from "../support/batch-builder.ts";
import type { WireClient } from "../support/wire-client.ts";

/**
 * Reads `stream` until `pattern` matches the text so far, or fails after `timeoutMs`. The reader is kept:
 * call `until` again to wait for something later.
 */
export class StreamWaiter {
  private readonly reader: { read(): Promise<{ done: boolean; value?: Uint8Array | undefined }> };
  private readonly decoder = new TextDecoder();
  text = "";

  constructor(stream: ReadableStream<Uint8Array>) {
    this.reader = stream.getReader();
  }

  async until(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} in ${JSON.stringify(this.text)}`)), timeoutMs);
    });
    try {
      for (;;) {
        const match = this.text.match(pattern);
        if (match) return match;
        const { value, done } = await Promise.race([this.reader.read(), deadline]);
        if (done) throw new Error(`stream ended before ${pattern}: ${JSON.stringify(this.text)}`);
        this.text += this.decoder.decode(value, { stream: true });
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Reads the rest of the stream, so the child never blocks on a full pipe. */
  async drain(): Promise<string> {
    for (;;) {
      const { value, done } = await this.reader.read();
      if (done) return this.text;
      this.text += this.decoder.decode(value, { stream: true });
    }
  }
}

export interface InProcessStack {
  broker: Broker;
  kafka: KafkaListener;
  http: HttpServer;
  ports: BrokerQueryPorts;
  metrics: BrokerMetrics;
  httpUrl: string;
  dataDir: string;
  close(): Promise<void>;
}

/** A broker, its Kafka listener and its HTTP side-port on port 0 over a fresh temporary data directory. */
export async function startInProcessStack(appOptions: HttpAppOptions = {}): Promise<InProcessStack> {
  const dataDir = mkdtempSync(join(tmpdir(), "bunka-e2e-"));
  const config = { ...defaultBrokerConfig(), dataDir, listenPort: 0, httpPort: 0 };
  const metrics = new BrokerMetrics();
  const fs = timedFs(nodeFs, systemClock.monotonicMs, (kind, ms) => metrics.onFsync(kind, ms));
  const broker = await createBroker({ config, fs, clock: systemClock, log: silentLogger, observer: metrics, maintenance: false });
  const kafka = await startKafkaListener({
    host: "127.0.0.1",
    port: 0,
    maxRequestBytes: config.socketRequestMaxBytes,
    idleTimeoutMs: config.connectionsMaxIdleMs,
    maxHeldResponseBytesPerConnection: config.maxHeldResponseBytesPerConnection,
    maxHeldResponseBytes: config.maxHeldResponseBytes,
    dispatch: meteredDispatch((frame, conn) => broker.dispatch(frame, conn), metrics),
    log: silentLogger,
  });
  broker.setAdvertisedListener(kafka.host, kafka.port);
  const ports = new BrokerQueryPorts({ broker, metrics, version: "e2e", nowMs: systemClock.nowMs, startedAtMs: systemClock.nowMs() });
  ports.setListener(kafka);
  ports.startLive(systemTimers);
  const http = startHttpServer({ host: "127.0.0.1", port: 0, fetch: createHttpApp(ports, appOptions).fetch, log: silentLogger });
  return {
    broker,
    kafka,
    http,
    ports,
    metrics,
    httpUrl: `http://127.0.0.1:${http.port}`,
    dataDir,
    async close() {
      ports.markStopping();
      await kafka.close();
      await http.close();
      await broker.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

// ---- a transaction over raw Kafka frames -------------------------------------------------------

const API = { Produce: 0, CreateTopics: 19, InitProducerId: 22, AddPartitionsToTxn: 24 } as const;
/** Codes a fresh broker may answer while its coordinator finishes loading. */
const RETRIABLE = new Set([14 /* COORDINATOR_LOAD_IN_PROGRESS */, 51 /* CONCURRENT_TRANSACTIONS */]);

/** CreateTopics v7 over the wire; fails the test on any error code. */
export async function createTopicOverWire(client: WireClient, name: string, partitions: number): Promise<void> {
  const res = await client.request(API.CreateTopics, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  if (res.topics[0].errorCode !== 0) throw new Error(`CreateTopics ${name}: error ${res.topics[0].errorCode}`);
}

/**
 * What a transactional producer does up to its first batch, and no further: InitProducerId with a
 * transactional id (v4), AddPartitionsToTxn (v3), one transactional batch of `values` (Produce v9, acks=-1).
 * No EndTxn: the transaction stays Ongoing and holds the partition's last stable offset.
 */
export async function openTransactionOverWire(
  client: WireClient,
  opts: { transactionalId: string; topic: string; partition: number; values: string[]; timeoutMs?: number },
): Promise<{ producerId: number; producerEpoch: number; baseOffset: number }> {
  let init: { errorCode: number; producerId: number; producerEpoch: number } | undefined;
  for (let attempt = 0; attempt < 200; attempt++) {
    init = await client.request(API.InitProducerId, 4, {
      transactionalId: opts.transactionalId,
      transactionTimeoutMs: opts.timeoutMs ?? 60_000,
      producerId: -1,
      producerEpoch: -1,
    });
    if (!RETRIABLE.has(init!.errorCode)) break;
    await Bun.sleep(25); // the coordinator is still loading: poll until it answers
  }
  if (init?.errorCode !== 0) throw new Error(`InitProducerId: error ${init?.errorCode}`);
  const { producerId, producerEpoch } = init;
  const added = await client.request(API.AddPartitionsToTxn, 3, {
    v3AndBelowTransactionalId: opts.transactionalId,
    v3AndBelowProducerId: producerId,
    v3AndBelowProducerEpoch: producerEpoch,
    v3AndBelowTopics: [{ name: opts.topic, partitions: [opts.partition] }],
  });
  const addCode = added.resultsByTopicV3AndBelow[0].resultsByPartition[0].partitionErrorCode;
  if (addCode !== 0) throw new Error(`AddPartitionsToTxn: error ${addCode}`);
  const produced = await client.request(API.Produce, 9, {
    transactionalId: opts.transactionalId,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [
      {
        name: opts.topic,
        partitionData: [
          {
            index: opts.partition,
            records: buildBatch({ records: opts.values.map((value) => ({ value })), producerId, producerEpoch, baseSequence: 0, transactional: true }),
          },
        ],
      },
    ],
  });
  const answer = produced.responses[0].partitionResponses[0];
  if (answer.errorCode !== 0) throw new Error(`transactional Produce: error ${answer.errorCode}`);
  return { producerId, producerEpoch, baseOffset: answer.baseOffset };
}
