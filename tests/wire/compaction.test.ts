/**
 * Compacted topics over the wire: cleanup.policy=compact at CreateTopics, the broker's cleaner round, and
 * what Fetch (read_uncommitted and read_committed), ListOffsets and DeleteRecords answer over a cleaned log,
 * including transactional data; then the same after a restart. Also `/v1/topics/:topic`'s cleaner view.
 */
import { describe, expect, test } from "bun:test";
import type { TransactionVerifier, TxnBatchVerdict } from "../../src/domain/txn/verifier.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BATCH_HEADER_BYTES, checkBatch, parseBatchHeader, parseControlRecord } from "../../src/protocol/records/record-batch.ts";
import { decodeRecords } from "../../src/protocol/records/records.ts";
import { buildBatch, type TestRecord } from "../support/batch-builder.ts";
import { startBrokerAndClient } from "../support/broker-fixture.ts";
import { SwappableVerifier } from "../support/swappable-verifier.ts";
import type { TestBroker } from "../support/test-broker.ts";
import type { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;
let client: WireClient;
const verifiers = new SwappableVerifier();
startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), undefined, { transactionVerifier: verifiers.wrap });

class AllowAll implements TransactionVerifier {
  verifyBatch(): TxnBatchVerdict {
    return "in-transaction";
  }
}

const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

async function createTopic(name: string, configs: Record<string, string>): Promise<number> {
  const res = await client.request(19, 7, {
    topics: [
      {
        name,
        numPartitions: 1,
        replicationFactor: 1,
        assignments: [],
        configs: Object.entries(configs).map(([name, value]) => ({ name, value })),
      },
    ],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  return res.topics[0].errorCode;
}

const sequences = new Map<number, number>();

async function produce(topic: string, records: TestRecord[], producerId = -1, transactional = false): Promise<number> {
  const sequence = sequences.get(producerId) ?? 0;
  if (producerId >= 0) sequences.set(producerId, sequence + records.length);
  const bytes = buildBatch({
    records,
    ...(producerId >= 0 ? { producerId, producerEpoch: 0, baseSequence: sequence, transactional } : {}),
  });
  const res = await client.request(0, 11, {
    transactionalId: transactional ? "txn-app" : null,
    acks: -1,
    timeoutMs: 30_000,
    topicData: [{ name: topic, partitionData: [{ index: 0, records: bytes }] }],
  });
  const answer = res.responses[0].partitionResponses[0];
  expect(answer.errorCode).toBe(ErrorCode.NONE);
  return Number(answer.baseOffset);
}

async function marker(topic: string, producerId: number, commit: boolean): Promise<number> {
  const outcome = await broker.broker.services.partitions.writeMarker(topic, 0, { producerId, producerEpoch: 0, commit, coordinatorEpoch: 0 });
  if (!outcome.ok) throw new Error(JSON.stringify(outcome));
  return outcome.offset;
}

interface Fetched {
  records: [number, string | null, string | null][];
  markers: [number, string][];
  abortedTransactions: { producerId: number; firstOffset: number }[] | null;
  highWatermark: number;
  lastStableOffset: number;
}

/** Fetches from `offset` to the end, concatenating what each Fetch returns. */
async function fetchAll(topic: string, offset: number, isolationLevel: number): Promise<Fetched> {
  const out: Fetched = { records: [], markers: [], abortedTransactions: null, highWatermark: -1, lastStableOffset: -1 };
  for (let next = offset, rounds = 0; rounds < 100; rounds++) {
    const res = await client.request(1, 12, {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1 << 20,
      isolationLevel,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [{ topic, partitions: [{ partition: 0, currentLeaderEpoch: -1, fetchOffset: next, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: 1 << 20 }] }],
      forgottenTopicsData: [],
      rackId: "",
    });
    const p = res.responses[0].partitions[0];
    expect(p.errorCode).toBe(ErrorCode.NONE);
    out.highWatermark = Number(p.highWatermark);
    out.lastStableOffset = Number(p.lastStableOffset);
    if (p.abortedTransactions !== null) {
      out.abortedTransactions ??= [];
      // Successive fetches may each list a transaction that overlaps both of their ranges.
      for (const t of p.abortedTransactions) {
        const entry = { producerId: Number(t.producerId), firstOffset: Number(t.firstOffset) };
        if (!out.abortedTransactions.some((e) => e.producerId === entry.producerId && e.firstOffset === entry.firstOffset)) out.abortedTransactions.push(entry);
      }
    }
    const bytes: Uint8Array | null = p.records;
    if (bytes === null || bytes.length === 0) break;
    for (let at = 0; at + BATCH_HEADER_BYTES <= bytes.length; ) {
      const size = checkBatch(bytes, at, bytes.length, true);
      if (typeof size !== "number") throw new Error(`unsound batch at ${at}: ${JSON.stringify(size)}`);
      const header = parseBatchHeader(bytes, at);
      if (header.isControl) {
        if (header.recordsCount > 0) out.markers.push([header.baseOffset, parseControlRecord(bytes, at).type]);
      } else {
        for (const r of decodeRecords(bytes.subarray(at, at + size))) {
          if (r.offset >= next) out.records.push([r.offset, text(r.key), text(r.value)]);
        }
      }
      next = header.baseOffset + header.lastOffsetDelta + 1;
      at += size;
    }
    const limit = isolationLevel === READ_COMMITTED ? out.lastStableOffset : out.highWatermark;
    if (next >= limit) break;
  }
  return out;
}

describe("compacted topics over the wire", () => {
  test("cleanup.policy=compact is accepted, and a cleaner round keeps the latest value of every key", async () => {
    expect(await createTopic("wire-compact", { "cleanup.policy": "compact", "segment.bytes": "300", "min.cleanable.dirty.ratio": "0.01" })).toBe(
      ErrorCode.NONE,
    );
    for (let round = 0; round < 4; round++) {
      for (const key of ["a", "b", "c"]) await produce("wire-compact", [{ key, value: `${key}${round}` }]);
    }
    await produce("wire-compact", [{ key: "b", value: null }]);
    // Two records more, so that everything above is in inactive segments.
    await produce("wire-compact", [{ key: "z", value: "x".repeat(300) }]);
    await produce("wire-compact", [{ key: "y", value: "tail" }]);
    const before = await fetchAll("wire-compact", 0, READ_UNCOMMITTED);
    expect(before.records.length).toBe(15);

    const passes = await broker.broker.services.cleaner.runRound();
    expect(passes).toBeGreaterThan(0);
    const after = await fetchAll("wire-compact", 0, READ_UNCOMMITTED);
    // Offsets are the original ones; the tombstone stays until delete.retention.ms; the active segment is untouched.
    expect(after.records).toEqual([
      [9, "a", "a3"],
      [11, "c", "c3"],
      [12, "b", null],
      [13, "z", "x".repeat(300)],
      [14, "y", "tail"],
    ]);
    expect(after.highWatermark).toBe(15);

    // A fetch from inside a removed range starts at the next record that remains.
    const fromGap = await fetchAll("wire-compact", 2, READ_UNCOMMITTED);
    expect(fromGap.records[0]).toEqual([9, "a", "a3"]);

    // The cleaner's view at the side-port's introspection port and its metrics.
    const view = await broker.broker.services.cleaner.statsOf("wire-compact", 0);
    expect(view?.passes).toBe(1);
    expect(view?.recordsRemoved).toBe(10);
    expect(view?.bytesReclaimed).toBeGreaterThan(0);

    // The same through the HTTP side-port: /v1/topics/:topic, /metrics and the dashboard.
    const { BrokerQueryPorts } = await import("../../src/http/broker-ports.ts");
    const { BrokerMetrics } = await import("../../src/http/metrics.ts");
    const { createHttpApp } = await import("../../src/http/app.ts");
    const app = createHttpApp(new BrokerQueryPorts({ broker: broker.broker, metrics: new BrokerMetrics(), version: "test", nowMs: Date.now, startedAtMs: Date.now() }));
    const topicView = (await (await app.request("/v1/topics/wire-compact")).json()) as { partitionDetails: { cleaner: unknown }[] };
    expect(topicView.partitionDetails[0]!.cleaner).toMatchObject({ cleanedUpToOffset: 14, passes: 1, recordsRemoved: 10, dirtyRatio: 0, lastError: null });
    const metricsText = await (await app.request("/metrics")).text();
    expect(metricsText).toContain('bunka_log_cleaner_passes_total{topic="wire-compact",partition="0"} 1');
    expect(metricsText).toContain('bunka_log_cleaner_removed_records_total{topic="wire-compact",partition="0"} 10');
    expect(metricsText).toMatch(/bunka_log_cleaner_reclaimed_bytes_total\{topic="wire-compact",partition="0"\} [1-9]/);
    const dashboard = await (await app.request("/")).text();
    expect(dashboard).toMatch(/<td class="compaction">0% dirty, clean below 14, 1 passes reclaimed [^<]+<\/td>/);

    // DeleteRecords is refused on a compact-only topic, as Apache refuses it.
    const deleted = await client.request(21, 2, { topics: [{ name: "wire-compact", partitions: [{ partitionIndex: 0, offset: 5 }] }], timeoutMs: 5000 });
    expect(deleted.topics[0].partitions[0].errorCode).toBe(ErrorCode.POLICY_VIOLATION);

    // After a restart the cleaned log reads the same.
    await broker.restart();
    client.close();
    client = await (await import("../support/wire-client.ts")).WireClient.connect(broker.port);
    expect(await fetchAll("wire-compact", 0, READ_UNCOMMITTED)).toEqual(after);
  });

  test("transactional data in a compacted topic: aborted records go, committed ones compact by key, read_committed stays exact", async () => {
    verifiers.use(new AllowAll());
    expect(await createTopic("wire-compact-txn", { "cleanup.policy": "compact", "segment.bytes": "300" })).toBe(ErrorCode.NONE);
    await produce("wire-compact-txn", [{ key: "k", value: "plain-1" }]);
    const abortedAt = await produce("wire-compact-txn", [{ key: "k", value: "aborted" }, { key: "m", value: "aborted" }], 501, true);
    await produce("wire-compact-txn", [{ key: "m", value: "committed" }], 502, true);
    const abortAt = await marker("wire-compact-txn", 501, false);
    const commitAt = await marker("wire-compact-txn", 502, true);
    await produce("wire-compact-txn", [{ key: "k", value: "plain-2" }]);
    await produce("wire-compact-txn", [{ key: "z", value: "x".repeat(300) }]);
    await produce("wire-compact-txn", [{ key: "tail", value: "t" }]);

    const committedBefore = await fetchAll("wire-compact-txn", 0, READ_COMMITTED);
    expect(committedBefore.abortedTransactions).toEqual([{ producerId: 501, firstOffset: abortedAt }]);

    await broker.broker.services.cleaner.runRound({ force: true });
    const uncommitted = await fetchAll("wire-compact-txn", 0, READ_UNCOMMITTED);
    expect(uncommitted.records).toEqual([
      [3, "m", "committed"],
      [6, "k", "plain-2"],
      [7, "z", "x".repeat(300)],
      [8, "tail", "t"],
    ]);
    // The abort marker stays while its transaction's (emptied) last batch is kept; the commit marker
    // stays while its record does.
    expect(uncommitted.markers).toEqual([
      [abortAt, "abort"],
      [commitAt, "commit"],
    ]);
    const committed = await fetchAll("wire-compact-txn", 0, READ_COMMITTED);
    expect(committed.records).toEqual(uncommitted.records);
    // The aborted transaction is still listed for the range: its emptied batch is still in the log.
    expect(committed.abortedTransactions).toEqual([{ producerId: 501, firstOffset: abortedAt }]);
    expect(committed.lastStableOffset).toBe(committed.highWatermark);
  });

  test("a topic with compact,delete keeps its retention; compact alone turns it off", async () => {
    expect(await createTopic("wire-both", { "cleanup.policy": "compact,delete", "retention.ms": "1000" })).toBe(ErrorCode.NONE);
    expect(await createTopic("wire-only", { "cleanup.policy": "compact", "retention.ms": "1000" })).toBe(ErrorCode.NONE);
    const manager = broker.broker.services.partitions;
    const both = manager.cleanupPolicyOf(broker.broker.services.topics.get("wire-both")!);
    const only = manager.cleanupPolicyOf(broker.broker.services.topics.get("wire-only")!);
    expect([both, only]).toEqual([
      { compact: true, delete: true },
      { compact: true, delete: false },
    ]);
    expect(await createTopic("wire-bad-policy", { "cleanup.policy": "shred" })).toBe(ErrorCode.INVALID_CONFIG);
  });

  test("Long.MAX_VALUE retention and segment times (\"forever\") are taken as such", async () => {
    const forever = "9223372036854775807";
    expect(
      await createTopic("wire-forever", { "cleanup.policy": "compact,delete", "retention.ms": forever, "retention.bytes": forever, "segment.ms": forever }),
    ).toBe(ErrorCode.NONE);
    expect(await produce("wire-forever", [{ key: "k", value: "v" }])).toBe(0);
    expect((await fetchAll("wire-forever", 0, READ_UNCOMMITTED)).records).toEqual([[0, "k", "v"]]);
  });
});

describe("max.compaction.lag.ms", () => {
  test("rolls the active segment of a compacted topic, so that no record waits in it past its lag", async () => {
    const { startTestBroker } = await import("../support/test-broker.ts");
    const { WireClient } = await import("../support/wire-client.ts");
    const { ManualClock } = await import("../support/manual-clock.ts");
    const clock = new ManualClock(Date.now());
    const own = await startTestBroker({ autoCreateTopicsEnable: false }, { clock });
    const c = await WireClient.connect(own.port);
    try {
      const created = await c.request(19, 7, {
        topics: [
          {
            name: "lag",
            numPartitions: 1,
            replicationFactor: 1,
            assignments: [],
            configs: [
              { name: "cleanup.policy", value: "compact" },
              { name: "max.compaction.lag.ms", value: "60000" },
            ],
          },
        ],
        timeoutMs: 10_000,
        validateOnly: false,
      });
      expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
      const append = async () => {
        const res = await c.request(0, 11, {
          transactionalId: null,
          acks: -1,
          timeoutMs: 30_000,
          topicData: [{ name: "lag", partitionData: [{ index: 0, records: buildBatch({ records: [{ key: "k", value: "v" }] }) }] }],
        });
        expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
      };
      const partition = (await own.broker.services.partitions.get("lag", 0))!;
      await append();
      clock.advance(59_999);
      await append();
      expect(partition.log.segmentCount).toBe(1);
      // segment.ms is a week: only the lag can roll the segment, at the first append past it.
      clock.advance(1);
      await append();
      expect(partition.log.segmentCount).toBe(2);
    } finally {
      c.close();
      await own.stop();
    }
  });
});

describe("recovery of an interrupted cleaner pass", () => {
  test("leftover cleaned files of an uncommitted pass are removed at start-up, with one warning line", async () => {
    const { startTestBroker } = await import("../support/test-broker.ts");
    const { WireClient } = await import("../support/wire-client.ts");
    const { writeFileSync, existsSync } = await import("node:fs");
    const { join } = await import("node:path");
    const warnings: string[] = [];
    const log = {
      debug() {},
      info() {},
      warn(message: string, fields?: Record<string, unknown>) {
        warnings.push(`${message} ${JSON.stringify(fields)}`);
      },
      error() {},
    };
    const own = await startTestBroker({ autoCreateTopicsEnable: false }, { log });
    try {
      const c = await WireClient.connect(own.port);
      const res = await c.request(19, 7, {
        topics: [{ name: "leftover", numPartitions: 1, replicationFactor: 1, assignments: [], configs: [{ name: "cleanup.policy", value: "compact" }] }],
        timeoutMs: 10_000,
        validateOnly: false,
      });
      expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
      c.close();
      // What a kill during a pass, before its swap committed, leaves beside the segments.
      const leftover = join(own.dataDir, "leftover-0", `${"0".padStart(20, "0")}.log.cleaned`);
      await own.restart();
      writeFileSync(leftover, new Uint8Array(100));
      await own.restart();
      expect(existsSync(leftover)).toBe(false);
      expect(warnings.filter((w) => w.startsWith("recovered an interrupted log cleaner pass"))).toEqual([
        'recovered an interrupted log cleaner pass {"partition":"leftover-0","removedUncommittedFiles":1}',
      ]);
    } finally {
      await own.stop();
    }
  });
});
