/**
 * The fetch-session numbers in /metrics (BrokerQueryPorts over a real broker, in-memory Fs, manual clock):
 * sessions open, partitions remembered, sessions created and evicted, Fetch v7+ requests by kind.
 */
import { afterEach, expect, test } from "bun:test";
import { createBroker, type Broker } from "../../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { BrokerQueryPorts } from "../../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../../src/http/metrics.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import type { FetchPartitionRequest } from "../../../src/domain/fetch-session.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const brokers: Broker[] = [];
afterEach(async () => {
  for (const b of brokers.splice(0)) await b.close();
});

const part = (partition: number): FetchPartitionRequest => ({
  topic: "t",
  topicId: "00000000-0000-0000-0000-000000000000",
  partition,
  fetchOffset: 0,
  partitionMaxBytes: 1024,
  logStartOffset: -1,
  currentLeaderEpoch: -1,
  lastFetchedEpoch: -1,
});
const outcome = { errorCode: 0, highWatermark: 0, lastStableOffset: 0, logStartOffset: 0, recordsBytes: 0 };

test("metrics: fetch sessions open, partitions cached, created, evicted, and requests by kind", async () => {
  const clock = new ManualClock();
  const config = { ...defaultBrokerConfig(), dataDir: "/data", listenPort: 0, httpPort: 0, maxIncrementalFetchSessionCacheSlots: 1 };
  const broker = await createBroker({ config, fs: new MemoryFs(), clock, log: silentLogger, maintenance: false });
  brokers.push(broker);
  const ports = new BrokerQueryPorts({ broker, metrics: new BrokerMetrics(), version: "0.0.0-test", nowMs: () => clock.nowMs(), startedAtMs: 0 });
  const sessions = broker.services.fetchSessions;
  const request = { sessionId: 0, epoch: 0, usesTopicIds: false, privileged: false, forgotten: [] };

  const full = sessions.newContext({ ...request, connectionId: 1, partitions: [part(0), part(1)] }, 0);
  if (full.kind !== "full") throw new Error("full expected");
  const id = sessions.completeFull(full, [outcome, outcome], 0);
  const inc = sessions.newContext({ ...request, sessionId: id, epoch: 1, connectionId: 1, partitions: [] }, 10);
  if (inc.kind !== "incremental") throw new Error("incremental expected");
  sessions.completeIncremental(inc, [outcome, outcome]);
  sessions.newContext({ ...request, sessionId: id, epoch: 9, connectionId: 1, partitions: [] }, 20);
  sessions.newContext({ ...request, epoch: -1, connectionId: 1, partitions: [part(0)] }, 30);
  // A second connection's session takes the only slot once the first was unused for the eviction time.
  const other = sessions.newContext({ ...request, connectionId: 2, partitions: [part(0)] }, 10 + config.minIncrementalFetchSessionEvictionMs + 1);
  if (other.kind !== "full") throw new Error("full expected");
  expect(sessions.completeFull(other, [outcome], 10 + config.minIncrementalFetchSessionEvictionMs + 1)).toBeGreaterThan(0);

  const text = await ports.metrics();
  for (const line of [
    "bunka_fetch_sessions 1",
    "bunka_fetch_session_partitions 1",
    "bunka_fetch_sessions_created_total 2",
    "bunka_fetch_session_evictions_total 1",
    'bunka_fetch_requests_total{session="full"} 2',
    'bunka_fetch_requests_total{session="incremental"} 1',
    'bunka_fetch_requests_total{session="sessionless"} 1',
    'bunka_fetch_requests_total{session="error"} 1',
  ]) {
    expect(text.split("\n")).toContain(line);
  }
});
