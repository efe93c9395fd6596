/**
 * The zombie-fencing scenario with librdkafka, kafkajs, franz-go and @platformatic/kafka, shared by the
 * single-broker interop test (tests/interop/transactions-clients.test.ts, which describes the scenario and
 * what each client reports) and the cluster test (tests/cluster/zombie-fencing.test.ts). A `ZombieTarget`
 * says where to send the raw requests the checks make: one broker, or the partition's leader and the
 * transactional id's coordinator of a cluster.
 */
import { expect } from "bun:test";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { goHelper, VENV_PYTHON } from "./interop-clients.ts";
import { LineChild } from "./line-child.ts";
import type { PartitionContents } from "./record-decoder.ts";
import { markerKinds } from "./txn-requests.ts";

const INTEROP_DIR = join(import.meta.dir, "..", "interop");
const PY_SCRIPT = join(INTEROP_DIR, "python/txn_zombie.py");
const NODE_SCRIPT = join(INTEROP_DIR, "node/txn-zombie.ts");
const GO_HELPER = goHelper("txn-zombie");
const PLATFORMATIC_SCRIPT = join(INTEROP_DIR, "node/txn-zombie-platformatic.ts");
/** Records A writes before it is fenced; B's transactions and their size. */
const A_RECORDS = 3;
const B_TXNS = 2;
const B_PER_TXN = 2;

export type ClientName = "librdkafka" | "kafkajs" | "franz-go" | "platformatic";

export const ZOMBIE_CLIENTS: readonly ClientName[] = ["librdkafka", "kafkajs", "franz-go", "platformatic"];

/** Where the scenario's own checks go. */
export interface ZombieTarget {
  bootstrap: string;
  createTopic(name: string, partitions: number): Promise<void>;
  /** DescribeTransactions of the id (from its coordinator). */
  describeTxn(transactionalId: string): Promise<any>;
  /** The same once the transaction is past Prepare*. */
  describeSettledTxn(transactionalId: string): Promise<any>;
  /** ListOffsets LATEST (from the partition's leader): the LSO (read_committed) or the high watermark. */
  latestOffset(topic: string, readCommitted: boolean, partition: number): Promise<number>;
  /** Every batch of the partition (from its leader). */
  readPartitionFully(topic: string, partition: number): Promise<PartitionContents>;
  /** The transactional id to use once `topic` exists; absent: `<topic>-id`. */
  transactionalIdFor?(topic: string): Promise<string>;
}

// ---------------------------------------------------------------------------------------------
// Client processes

function helperCommand(name: ClientName, args: string[]): string[] {
  switch (name) {
    case "librdkafka":
      return [VENV_PYTHON, PY_SCRIPT, ...args];
    case "kafkajs":
      return [process.execPath, NODE_SCRIPT, ...args];
    case "franz-go":
      return [GO_HELPER, ...args];
    case "platformatic":
      return [process.execPath, PLATFORMATIC_SCRIPT, ...args];
  }
}

type PartitionKeys = Record<string, [number, string][]>;

/** The topic through librdkafka's consumer (assign(), no group) in `isolation`: [offset, key] per partition. */
async function readWithLibrdkafka(bootstrap: string, topic: string, partitions: number, isolation: "read_committed" | "read_uncommitted"): Promise<PartitionKeys> {
  const reader = new LineChild(`librdkafka ${isolation} reader`, [VENV_PYTHON, PY_SCRIPT, "read", bootstrap, topic, String(partitions), isolation]);
  const code = await reader.exitWithin(60_000);
  if (code !== 0) throw new Error(`reader exited ${code}\n${reader.output()}`);
  return JSON.parse(reader.stdout.trim().split("\n").at(-1)!) as PartitionKeys;
}

const keysOf = (read: PartitionKeys, partition: number) => read[String(partition)]!.map(([, key]) => key);

// ---------------------------------------------------------------------------------------------
// What each client reports when fenced

/** Fails with A's whole output unless its stdout has a line matching `re`. */
function expectPrinted(a: LineChild, re: RegExp): void {
  if (!re.test(a.stdout)) throw new Error(`producer A did not print ${re}\n${a.output()}`);
}

/**
 * librdkafka: the fence is fatal (_FENCED, fatal()=True) from the late flush on, for commit and abort too.
 * Against Apache Kafka 4.1.1 it prints the same lines, word for word but the broker id.
 */
function expectLibrdkafkaFenced(a: LineChild, latePartition: number): void {
  const fenced = "_FENCED code=-144 fatal=True retriable=False abortable=False";
  if (latePartition === 0) {
    // The late record's Produce reached the broker, which refused A's old epoch: the record's own report is
    // the broker's error, not fatal by itself; librdkafka raises the fatal _FENCED for it.
    expectPrinted(a, /^DELIVERY 0 INVALID_PRODUCER_EPOCH code=47 fatal=False .*old epoch$/m);
    const produceRefused = String.raw`ProduceRequest for \S+ \[0\] with 1 message\(s\) failed: Broker: Producer attempted an operation with an old epoch`;
    expectPrinted(a, new RegExp(`^EXCEPTION send ${fenced} ${produceRefused} .*fenced by newer producer instance$`, "m"));
  } else {
    // Partition 1 is not in A's transaction: AddPartitionsToTxn (v<2) is refused with INVALID_PRODUCER_EPOCH
    // (librdkafka's ADDPARTS log line says so), the fatal _FENCED follows, and the record is purged unsent.
    expect(a.stderr).toMatch(/ADDPARTS.*Failed to add partition "\S+" \[1\] to transaction: Broker: Producer attempted an operation with an old epoch/);
    expectPrinted(a, /^DELIVERY 1 _PURGE_QUEUE code=-152 /m);
    expectPrinted(a, new RegExp(`^EXCEPTION send ${fenced} Failed to add partitions to transaction: Local: This instance has been fenced by a newer instance$`, "m"));
  }
  expectPrinted(a, new RegExp(`^EXCEPTION commit ${fenced} `, "m"));
  expectPrinted(a, new RegExp(`^EXCEPTION abort ${fenced} `, "m"));
  expect(a.stdout).not.toMatch(/^(DELIVERED|UNDELIVERED|COMMITTED|ABORTED) /m);
}

/**
 * kafkajs: INVALID_PRODUCER_EPOCH, non-retriable, for the send and the commit; the abort is refused by
 * kafkajs itself once the commit has been tried. Against Apache Kafka 4.1.1 it prints the same lines.
 */
function expectKafkajsFenced(a: LineChild, latePartition: number): void {
  const epoch = "KafkaJSProtocolError name=KafkaJSProtocolError type=INVALID_PRODUCER_EPOCH code=47 retriable=false Producer attempted an operation with an old epoch";
  expectPrinted(a, new RegExp(`^EXCEPTION send ${epoch}`, "m"));
  expectPrinted(a, new RegExp(`^EXCEPTION commit ${epoch}`, "m"));
  const ended = "KafkaJSNonRetriableError name=KafkaJSNonRetriableError type=undefined code=undefined retriable=false Cannot continue to use transaction once ended";
  expectPrinted(a, new RegExp(`^EXCEPTION abort ${ended}$`, "m"));
  expect(a.stdout).not.toMatch(/^(SENT|COMMITTED|ABORTED) /m);
  // Which request the broker refused, from kafkajs's own error log: the Produce for partition 0 (in the
  // transaction already), AddPartitionsToTxn for partition 1; then the commit's EndTxn.
  const refused = a.stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { message: string; error?: string })
    .filter((l) => /^\[Connection\] Response /.test(l.message) && /old epoch/.test(l.error ?? ""))
    .map((l) => l.message.replace("[Connection] Response ", ""));
  expect(refused).toEqual([latePartition === 0 ? "Produce(key: 0, version: 7)" : "AddPartitionsToTxn(key: 24, version: 1)", "EndTxn(key: 26, version: 1)"]);
}

/**
 * franz-go 1.22.3 (kerr errors, on transaction version 1 as bunka speaks it): the broker's answer for the late
 * record, INVALID_PRODUCER_EPOCH (47) from the Produce for partition 0, PRODUCER_FENCED (90) from
 * AddPartitionsToTxn v3 for partition 1; the commit is then refused by franz-go itself (OPERATION_NOT_ATTEMPTED,
 * nothing sent). The abort differs: after the Produce error franz-go has failed its producer id and ends the
 * transaction locally (no EndTxn; the broker aborted A's transaction when B fenced it), after the
 * AddPartitionsToTxn error it sends EndTxn v4, answered PRODUCER_FENCED. Against Apache Kafka 4.1.1 at
 * transaction version 1 it prints the same lines.
 */
function expectFranzGoFenced(a: LineChild, latePartition: number): void {
  const fenced = "kerr=PRODUCER_FENCED code=90 retriable=false PRODUCER_FENCED: There is a newer producer with the same transactionalId which fences the current one.";
  const notAttempted = "EXCEPTION commit kerr=OPERATION_NOT_ATTEMPTED code=55 retriable=false OPERATION_NOT_ATTEMPTED: ";
  const lines = a.stdout.trimEnd().split("\n");
  expect(lines.slice(0, 2)).toEqual(["READY", "OPEN"]);
  expect(lines.at(-1)).toBe("DONE");
  const steps = lines.slice(2, -1);
  expect(steps).toHaveLength(3);
  if (latePartition === 0) {
    expect(steps[0]).toBe("EXCEPTION send kerr=INVALID_PRODUCER_EPOCH code=47 retriable=false INVALID_PRODUCER_EPOCH: Producer attempted an operation with an old epoch.");
    expect(steps[1]).toStartWith(notAttempted);
    expect(steps[2]).toBe("ABORTED 0");
  } else {
    expect(steps[0]).toBe(`EXCEPTION send ${fenced}`);
    expect(steps[1]).toStartWith(notAttempted);
    expect(steps[2]).toBe(`EXCEPTION abort ${fenced}`);
  }
}

/**
 * @platformatic/kafka 2.12.1: every refusal is the broker's, wrapped in the client's AggregateErrors: the late
 * Produce v11 to partition 0 answered INVALID_PRODUCER_EPOCH (47), or AddPartitionsToTxn v5 for partition 1
 * answered PRODUCER_FENCED (90); then EndTxn v4 answered PRODUCER_FENCED for the commit and again for the
 * abort. Against Apache Kafka 4.1.1 at transaction version 1 it prints the same lines.
 */
function expectPlatformaticFenced(a: LineChild, latePartition: number): void {
  const refused = (api: string, code: number, message: string) =>
    `AggregateError code=PLT_KFK_RESPONSE Received response with error while executing API ${api} [Error code=PLT_KFK_PROTOCOL apiCode=${code} ${message}]`;
  const fenced = "There is a newer producer with the same transactionalId which fences the current one.";
  const send =
    latePartition === 0
      ? `AggregateError code=PLT_KFK_MULTIPLE Producing messages failed. [${refused("Produce(v11)", 47, "Producer attempted to produce with an old epoch.")}]`
      : refused("AddPartitionsToTxn(v5)", 90, fenced);
  expect(a.stdout).toBe(
    [
      "READY",
      "OPEN",
      `EXCEPTION send ${send}`,
      `EXCEPTION commit ${refused("EndTxn(v4)", 90, fenced)}`,
      `EXCEPTION abort ${refused("EndTxn(v4)", 90, fenced)}`,
      "DONE",
      "",
    ].join("\n"),
  );
}

// ---------------------------------------------------------------------------------------------
// The scenario

/** One run of the scenario on `topic` (created here, 2 partitions). */
export async function zombieScenario(target: ZombieTarget, name: ClientName, latePartition: number, topic = `zombie-${name}-p${latePartition}`): Promise<void> {
  const { bootstrap } = target;
  await target.createTopic(topic, 2);
  const id = (await target.transactionalIdFor?.(topic)) ?? `${topic}-id`;

  const a = new LineChild(`${name} producer A`, helperCommand(name, ["zombie", bootstrap, topic, id, "zA", String(A_RECORDS), String(latePartition)]));
  await a.waitFor(/^OPEN$/m, 30_000);
  const before = await target.describeTxn(id);
  expect(before).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "Ongoing", producerEpoch: 0, topics: [{ topic, partitions: [0] }] });
  expect(await target.latestOffset(topic, true, 0)).toBe(0); // A's open transaction pins the LSO
  expect(await target.latestOffset(topic, false, 0)).toBe(A_RECORDS);

  // B: its init fences A (A's transaction is aborted), then its transactions commit normally.
  const b = new LineChild(`${name} producer B`, helperCommand(name, ["batches", bootstrap, topic, id, "zB", "2", String(B_TXNS), String(B_PER_TXN)]));
  expect(await b.exitWithin(60_000)).toBe(0);
  expect(b.stdout).toBe("READY\nCOMMITTED 0\nCOMMITTED 1\nDONE\n");

  a.line("go");
  const aCode = await a.exitWithin(60_000);
  if (aCode !== 0) throw new Error(`producer A exited ${aCode}\n${a.output()}`);
  expect(a.stdout).toEndWith("DONE\n");
  if (name === "librdkafka") expectLibrdkafkaFenced(a, latePartition);
  else if (name === "kafkajs") expectKafkajsFenced(a, latePartition);
  else if (name === "franz-go") expectFranzGoFenced(a, latePartition);
  else expectPlatformaticFenced(a, latePartition);

  const after = await target.describeSettledTxn(id);
  expect(after).toMatchObject({ errorCode: ErrorCode.NONE, transactionState: "CompleteCommit", producerId: before.producerId, topics: [] });
  expect(after.producerEpoch).toBeGreaterThan(before.producerEpoch);

  // read_committed: exactly B's records (record i of transaction t went to partition i % 2).
  const [committed, uncommitted] = await Promise.all([readWithLibrdkafka(bootstrap, topic, 2, "read_committed"), readWithLibrdkafka(bootstrap, topic, 2, "read_uncommitted")]);
  expect(keysOf(committed, 0)).toEqual(["zB-0-0", "zB-1-0"]);
  expect(keysOf(committed, 1)).toEqual(["zB-0-1", "zB-1-1"]);
  // read_uncommitted: A's first records, then B's; the late record is nowhere.
  expect(keysOf(uncommitted, 0)).toEqual(["zA-0-0", "zA-0-1", "zA-0-2", "zB-0-0", "zB-1-0"]);
  expect(keysOf(uncommitted, 1)).toEqual(["zB-0-1", "zB-1-1"]);

  for (const p of [0, 1]) {
    const { batches, highWatermark } = await target.readPartitionFully(topic, p);
    // A's transaction ended with one ABORT marker on partition 0 only (partition 1 was never added to it),
    // B's with one COMMIT each per partition.
    expect(markerKinds(batches)).toEqual(p === 0 ? ["A", "C", "C"] : ["C", "C"]);
    for (const marker of batches.filter((b) => b.header.isControl)) {
      expect(marker.header.producerId).toBe(before.producerId);
      expect(marker.header.producerEpoch).toBeGreaterThan(before.producerEpoch);
    }
    // A's data (its epoch) is the 3 records of partition 0; every data batch is transactional.
    const data = batches.filter((b) => !b.header.isControl);
    expect(data.every((b) => b.header.isTransactional)).toBe(true);
    const aRecords = data.filter((b) => b.header.producerEpoch === before.producerEpoch).reduce((n, b) => n + b.records.length, 0);
    expect(aRecords).toBe(p === 0 ? A_RECORDS : 0);
    // Nothing left open.
    expect(await target.latestOffset(topic, true, p)).toBe(highWatermark);
  }
}
