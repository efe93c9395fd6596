/**
 * Zombie fencing with @platformatic/kafka, for tests/interop/transactions-clients.test.ts, and one transaction
 * decided across a broker crash, for tests/fault/endtxn-answered-crash.test.ts (decide).
 *
 *   bun tests/interop/node/txn-zombie-platformatic.ts zombie BOOTSTRAP TOPIC TXN_ID PREFIX N LATE_PARTITION
 *   bun tests/interop/node/txn-zombie-platformatic.ts batches BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS TXNS PER_TXN
 *   bun tests/interop/node/txn-zombie-platformatic.ts decide BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS N commit|abort [GROUP OFFSET]
 *
 * Every record has key "<prefix>-<txn>-<i>" and the same value.
 *
 * zombie: beginTransaction (InitProducerId), N records to partition 0 (acknowledged), prints OPEN and waits for
 * a line on stdin (EOF: exits 3, the test is gone). Then, as the zombie it has become meanwhile, sends
 * "<prefix>-0-late" to LATE_PARTITION, commits, and aborts if anything failed. Each step's outcome is one line:
 * SENT <partition> <offset> | COMMITTED 0 | ABORTED 0 | EXCEPTION <step> <error>, where <error> is the error
 * and everything it wraps, each as "<name> code=<code> apiCode=<Kafka error code> <message>".
 *
 * batches: TXNS transactions of PER_TXN records (record i to partition i % PARTITIONS), each committed:
 * COMMITTED <t>.
 *
 * decide: one transaction of N records (record i to partition i % PARTITIONS), with GROUP's offsets OFFSET + p
 * of every partition p when a group is given (addConsumer, then addOffset of each partition's last consumed
 * message, as a copier outside the group would: generation -1, no member id), then commits or aborts at once:
 * COMMITTED 0 / ABORTED 0 as soon as the call returned.
 *
 * All print READY once the producer has its producer id and DONE at the end; an unexpected error prints
 * FAILED <error>, exits 1.
 */
import { Consumer, type Message, Producer, stringSerializers } from "@platformatic/kafka";
import { NEW_SESSION, describeError } from "./platformatic-support.ts";

const [mode, bootstrap, topic, transactionalId, prefix, ...rest] = process.argv.slice(2) as [string, string, string, string, string, ...string[]];

const say = (line: string) => process.stdout.write(`${line}\n`);


async function readLine(): Promise<string | null> {
  for await (const line of console) return line;
  return null;
}

const key = (txn: number | string, i: number | string) => `${prefix}-${txn}-${i}`;

const producer = new Producer({
  clientId: transactionalId,
  bootstrapBrokers: [bootstrap],
  idempotent: true,
  transactionalId,
  serializers: stringSerializers,
  ...NEW_SESSION,
});

async function zombie(n: number, latePartition: number): Promise<void> {
  const txn = await producer.beginTransaction();
  say("READY");
  await txn.send({ messages: Array.from({ length: n }, (_, i) => ({ topic, key: key(0, i), value: key(0, i), partition: 0 })) });
  say("OPEN");
  if ((await readLine()) === null) process.exit(3);

  let failed = false;
  try {
    const result = await txn.send({ messages: [{ topic, key: key(0, "late"), value: key(0, "late"), partition: latePartition }] });
    say(`SENT ${latePartition} ${JSON.stringify(result.offsets ?? result, (_, v) => (typeof v === "bigint" ? String(v) : v))}`);
  } catch (e) {
    failed = true;
    say(`EXCEPTION send ${describeError(e)}`);
  }
  try {
    await txn.commit();
    say("COMMITTED 0");
  } catch (e) {
    failed = true;
    say(`EXCEPTION commit ${describeError(e)}`);
  }
  if (!failed) return;
  try {
    await txn.abort();
    say("ABORTED 0");
  } catch (e) {
    say(`EXCEPTION abort ${describeError(e)}`);
  }
}

async function batches(partitions: number, txns: number, perTxn: number): Promise<void> {
  // InitProducerId: for B, this is what fences A (beginTransaction does it; cancel sends nothing).
  await (await producer.beginTransaction()).cancel();
  say("READY");
  for (let t = 0; t < txns; t++) {
    const txn = await producer.beginTransaction();
    await txn.send({ messages: Array.from({ length: perTxn }, (_, i) => ({ topic, key: key(t, i), value: key(t, i), partition: i % partitions })) });
    await txn.commit();
    say(`COMMITTED ${t}`);
  }
}

async function decide(partitions: number, n: number, end: string, group?: string, offset = 0): Promise<void> {
  const txn = await producer.beginTransaction();
  say("READY");
  await txn.send({ messages: Array.from({ length: n }, (_, i) => ({ topic, key: key(0, i), value: key(0, i), partition: i % partitions })) });
  if (group !== undefined) {
    // addOffset takes the message a consumer handed out and commits the offset after it; these messages
    // stand for records consumed outside the group (generation -1, no member id), as Java's
    // ConsumerGroupMetadata(group) does. The consumer only finds the group's coordinator, which addOffset
    // sends the TxnOffsetCommit to.
    const consumer = new Consumer({ clientId: `${transactionalId}-offsets`, bootstrapBrokers: [bootstrap], groupId: group });
    try {
      const coordinatorId = await consumer.findGroupCoordinator();
      await txn.addConsumer(consumer);
      for (let p = 0; p < partitions; p++) {
        const consumed = { topic, partition: p, offset: BigInt(offset + p - 1), metadata: { consumer: { groupId: group, generationId: -1, memberId: "", coordinatorId } } };
        await txn.addOffset(consumed as unknown as Message<string, string, string, string>);
      }
    } finally {
      await consumer.close();
    }
  }
  await (end === "commit" ? txn.commit() : txn.abort());
  say(end === "commit" ? "COMMITTED 0" : "ABORTED 0");
}

try {
  if (mode === "zombie") await zombie(Number(rest[0]), Number(rest[1]));
  else if (mode === "batches") await batches(Number(rest[0]), Number(rest[1]), Number(rest[2]));
  else if (mode === "decide") await decide(Number(rest[0]), Number(rest[1]), rest[2]!, rest[3], Number(rest[4] ?? 0));
  else throw new Error(`unknown mode ${mode}`);
  say("DONE");
} catch (e) {
  say(`FAILED ${describeError(e)}`);
  process.exit(1);
}
// A fenced producer has nothing left to send; bounded anyway.
await Promise.race([producer.close(), Bun.sleep(5000)]);
process.exit(0);
