/**
 * State files damaged while the broker runs (docs/operations.md, "Damaged data"): a transaction slot's
 * journal and a group slot's journal cut short behind the broker's back. The broker goes on from memory;
 * one scrubber pass compares the files with what the broker wrote, finds both, logs each once, and
 * rewrites each slot from memory, so that /metrics and the dashboard count it and the next start starts
 * with everything. Before, nothing noticed until the next start, which then refused the files.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { createHttpApp } from "../../src/http/app.ts";
import { BrokerQueryPorts } from "../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../src/http/metrics.ts";
import { silentLogger, type Logger } from "../../src/platform/logger.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 60_000;
let dataDir: string;
let broker: TestBroker;
let client: WireClient;
const errors: string[] = [];
const capturing: Logger = { ...silentLogger, error: (message, fields) => errors.push(`${message} ${JSON.stringify(fields)}`) };

/** The journals of `dir` that hold more than a header, i.e. that this broker wrote records into. */
function writtenJournals(dir: string): string[] {
  return readdirSync(join(dataDir, "__cluster", dir))
    .filter((name) => name.endsWith(".journal"))
    .map((name) => join(dataDir, "__cluster", dir, name))
    .filter((path) => statSync(path).size > 0);
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "bunka-damaged-state-"));
  // The scrubber is off until the test runs a pass itself.
  broker = await startTestBroker({ dataDir, logScrubberBytesPerSecond: 0 }, { log: capturing });
  client = await WireClient.connect(broker.port);
}, TIMEOUT);

afterAll(async () => {
  client?.close();
  await broker?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test("journals cut short while the broker runs: one scrubber pass finds both, once, and rewrites them from memory; a restart has everything", async () => {
  const created = await client.request(19, 7, {
    topics: [{ name: "damaged-state-topic", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  // A transactional id (a txn_state slot record) and a simple group's offset (an offsets slot record), twice
  // each so that every journal holds more than its first record.
  for (let i = 0; i < 2; i++) {
    const init = await client.request(22, 4, { transactionalId: "damaged-state-txn", transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
    expect(init.errorCode).toBe(ErrorCode.NONE);
    const commit = await client.request(8, 8, {
      groupId: "damaged-state-group",
      generationIdOrMemberEpoch: -1,
      memberId: "",
      groupInstanceId: null,
      retentionTimeMs: -1,
      topics: [{ name: "damaged-state-topic", partitions: [{ partitionIndex: 0, committedOffset: 10 + i, committedLeaderEpoch: -1, committedMetadata: "" }] }],
    });
    expect(commit.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
  }
  const services = broker.broker.services;
  services.config.logScrubberBytesPerSecond = 64 * 1024 * 1024;
  // Intact files: a pass finds nothing, and checked some slots.
  expect(await services.scrubber.runPass()).toBe(true);
  expect(services.partitions.damage.stateFileFindings()).toEqual([]);
  expect(services.scrubber.statistics.stateSlotsChecked).toBeGreaterThan(0);

  const txnJournals = writtenJournals("txn_state");
  const offsetJournals = writtenJournals("offsets");
  expect(txnJournals).toHaveLength(1);
  expect(offsetJournals).toHaveLength(1);
  for (const path of [...txnJournals, ...offsetJournals]) truncateSync(path, statSync(path).size - 5);

  expect(await services.scrubber.runPass()).toBe(true);
  const findings = services.partitions.damage.stateFileFindings();
  expect(findings.map((f) => [f.store, f.file] as [string, string]).sort()).toEqual([
    ["offsets", offsetJournals[0]!],
    ["txn_state", txnJournals[0]!],
  ]);
  expect(errors.filter((e) => e.startsWith("corrupt state file"))).toHaveLength(2);
  // Each slot was rewritten from memory at once: the next pass finds the files sound.
  expect(findings.every((f) => f.repairedAtMs >= 0)).toBe(true);
  expect(services.scrubber.statistics.stateFilesRepaired).toBe(2);
  expect(await services.scrubber.runPass()).toBe(true);
  expect(services.partitions.damage.stateFileFindings()).toHaveLength(2);
  expect(services.scrubber.statistics.stateFileDamageFound).toBe(2);
  expect(errors.filter((e) => e.startsWith("corrupt state file"))).toHaveLength(2);

  const ports = new BrokerQueryPorts({ broker: broker.broker, metrics: new BrokerMetrics(), version: "0.0.0-test", nowMs: () => Date.now(), startedAtMs: Date.now() });
  ports.setListener({ connectionCount: () => 1 });
  const app = createHttpApp(ports);
  const ready = await app.request("/ready");
  expect(ready.status).toBe(200);
  expect(((await ready.json()) as { status: string }).status).toBe("ready");
  const metrics = await (await app.request("/metrics")).text();
  expect(metrics).toContain("bunka_state_files_damaged 0\n");
  expect(metrics).toContain("bunka_state_files_damage_found_total 2\n");
  expect(metrics).toContain("bunka_state_files_repaired_total 2\n");
  const dashboard = await (await app.request("/")).text();
  expect(dashboard).toContain("2 damaged state file(s) rewritten from memory");

  // What the rewrite is for: a restart starts (the cut journals would have been refused) with the
  // transactional id under its producer id and the group's last commit.
  const before = await client.request(22, 4, { transactionalId: "damaged-state-txn", transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
  expect(before.errorCode).toBe(ErrorCode.NONE);
  client.close();
  await broker.stop();
  broker = await startTestBroker({ dataDir, logScrubberBytesPerSecond: 0 }, { log: capturing });
  client = await WireClient.connect(broker.port);
  const after = await client.request(22, 4, { transactionalId: "damaged-state-txn", transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 });
  expect(after.errorCode).toBe(ErrorCode.NONE);
  expect(after.producerId).toBe(before.producerId);
  expect(after.producerEpoch).toBe(before.producerEpoch + 1);
  const fetched = await client.request(9, 7, { groupId: "damaged-state-group", topics: [{ name: "damaged-state-topic", partitionIndexes: [0] }], requireStable: false });
  expect(fetched.topics[0].partitions[0].committedOffset).toBe(11);
}, TIMEOUT);
