/**
 * Zombie fencing with kafkajs, for tests/interop/transactions-clients.test.ts, and one transaction decided
 * across a broker crash, for tests/fault/endtxn-answered-crash.test.ts (decide).
 *
 *   bun tests/interop/node/txn-zombie.ts zombie BOOTSTRAP TOPIC TXN_ID PREFIX N LATE_PARTITION
 *   bun tests/interop/node/txn-zombie.ts batches BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS TXNS PER_TXN
 *   bun tests/interop/node/txn-zombie.ts decide BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS N commit|abort [GROUP OFFSET]
 *
 * Every record has key "<prefix>-<txn>-<i>" and the same value.
 *
 * zombie: connect (InitProducerId), producer.transaction(), N records to partition 0 (acknowledged), prints
 * OPEN and waits for a line on stdin (EOF: exits 3, the test is gone). Then, as the zombie it has become
 * meanwhile, sends "<prefix>-0-late" to LATE_PARTITION, commits, and aborts if anything failed. Each step's
 * outcome is one line: SENT <partition> <offset> | COMMITTED 0 | ABORTED 0 | EXCEPTION <step> <error>, where
 * <error> is "<class> name=<name> type=<type> code=<code> retriable=<bool> <message>" (what kafkajs raised),
 * followed by CAUSE <step> <error> for each error it wraps.
 *
 * batches: connect, then TXNS transactions of PER_TXN records (record i to partition i % PARTITIONS), each
 * committed: COMMITTED <t>.
 *
 * decide: connect, one transaction of N records (record i to partition i % PARTITIONS), with GROUP's offsets
 * OFFSET + p of every partition p when a group is given (transaction.sendOffsets), then commits or aborts at
 * once: COMMITTED 0 / ABORTED 0 as soon as the call returned.
 *
 * All print READY after connect and DONE at the end; an unexpected error prints FAILED <error>, exits 1.
 */
import { Kafka, logLevel, type Producer, type Transaction } from "kafkajs";

const [mode, bootstrap, topic, transactionalId, prefix, ...rest] = process.argv.slice(2);

const say = (line: string) => process.stdout.write(`${line}\n`);

/** A kafkajs error as kafkajs classifies it: what the test asserts on. */
function describe(e: unknown): string {
  const error = e as Error & { type?: string; code?: number; retriable?: boolean };
  return `${error.constructor?.name} name=${error.name} type=${error.type} code=${error.code} retriable=${error.retriable} ${error.message}`.replace(/\n/g, " ");
}

/** The error and what it wraps (KafkaJSNumberOfRetriesExceeded keeps the last attempt's error as `cause`). */
function report(step: string, e: unknown): void {
  say(`EXCEPTION ${step} ${describe(e)}`);
  const seen = new Set<unknown>([e]);
  for (let c = (e as { cause?: unknown }).cause; c !== undefined && !seen.has(c); c = (c as { cause?: unknown }).cause) {
    seen.add(c);
    say(`CAUSE ${step} ${describe(c)}`);
  }
}

async function readLine(): Promise<string | null> {
  for await (const line of console) return line;
  return null;
}

const key = (txn: number | string, i: number | string) => `${prefix}-${txn}-${i}`;

async function zombie(producer: Producer, n: number, latePartition: number): Promise<void> {
  const txn: Transaction = await producer.transaction();
  const messages = Array.from({ length: n }, (_, i) => ({ key: key(0, i), value: key(0, i), partition: 0 }));
  await txn.send({ topic: topic!, acks: -1, messages });
  say("OPEN");
  if ((await readLine()) === null) process.exit(3);

  let failed = false;
  try {
    const [meta] = await txn.send({ topic: topic!, acks: -1, messages: [{ key: key(0, "late"), value: key(0, "late"), partition: latePartition }] });
    say(`SENT ${meta?.partition} ${meta?.baseOffset}`);
  } catch (e) {
    failed = true;
    report("send", e);
  }
  try {
    await txn.commit();
    say("COMMITTED 0");
  } catch (e) {
    failed = true;
    report("commit", e);
  }
  if (!failed) return;
  try {
    await txn.abort();
    say("ABORTED 0");
  } catch (e) {
    report("abort", e);
  }
}

async function batches(producer: Producer, partitions: number, txns: number, perTxn: number): Promise<void> {
  for (let t = 0; t < txns; t++) {
    const txn = await producer.transaction();
    const messages = Array.from({ length: perTxn }, (_, i) => ({ key: key(t, i), value: key(t, i), partition: i % partitions }));
    await txn.send({ topic: topic!, acks: -1, messages });
    await txn.commit();
    say(`COMMITTED ${t}`);
  }
}

async function decide(producer: Producer, partitions: number, n: number, end: string, group?: string, offset = 0): Promise<void> {
  const txn = await producer.transaction();
  const messages = Array.from({ length: n }, (_, i) => ({ key: key(0, i), value: key(0, i), partition: i % partitions }));
  await txn.send({ topic: topic!, acks: -1, messages });
  if (group !== undefined) {
    const offsets = Array.from({ length: partitions }, (_, p) => ({ partition: p, offset: String(offset + p) }));
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: topic!, partitions: offsets }] });
  }
  await (end === "commit" ? txn.commit() : txn.abort());
  say(end === "commit" ? "COMMITTED 0" : "ABORTED 0");
}

async function main(): Promise<void> {
  const kafka = new Kafka({
    clientId: transactionalId,
    brokers: [bootstrap!],
    logLevel: process.env.TXN_ZOMBIE_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  // Transactions need the idempotent producer with one request in flight.
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  try {
    // connect() is InitProducerId for a transactional producer: for B, this is what fences A.
    await producer.connect();
    say("READY");
    if (mode === "zombie") await zombie(producer, Number(rest[0]), Number(rest[1]));
    else if (mode === "batches") await batches(producer, Number(rest[0]), Number(rest[1]), Number(rest[2]));
    else if (mode === "decide") await decide(producer, Number(rest[0]), Number(rest[1]), rest[2]!, rest[3], Number(rest[4] ?? 0));
    else throw new Error(`unknown mode ${mode}`);
    say("DONE");
  } catch (e) {
    say(`FAILED ${describe(e)}`);
    process.exit(1);
  }
  // A fenced producer has nothing left to send; bounded anyway.
  await Promise.race([producer.disconnect(), Bun.sleep(5000)]);
  process.exit(0);
}

void main();
