/**
 * A consume-transform-produce copier with kafkajs, exactly once: a consumer in a group with
 * readUncommitted: false and autoCommit: false, and a transactional producer that commits the consumed
 * offsets in the transaction with transaction.sendOffsets({consumerGroupId, topics}). Every TXN_SIZE messages
 * of a fetched batch become one transaction: every message of input partition p goes to output partition p
 * with the same key and the value upper-cased.
 *
 *   bun tests/interop/node/eos-copier.ts BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE
 *
 * INSTANCE_ID is ignored (kafkajs has no static membership). PAUSE_AT > 0 stops transaction number PAUSE_AT
 * of this run for good in the middle (PAUSE_STAGE "sent": its messages are acknowledged by the broker;
 * "offsets": its offsets are sent to the transaction too), after printing PAUSED, so that the test can
 * SIGKILL it with a transaction open. It never exits by itself. stdout, one line per event: READY, COMMIT <n>
 * <messages in this run>, PAUSED <n>, ABORT <n> <error>; a fatal error prints FATAL and exits 2.
 */
import { Kafka, logLevel } from "kafkajs";

const [bootstrap, input, output, groupId, transactionalId, , txnSizeArg, pauseAtArg, pauseStage] = process.argv.slice(2);
const txnSize = Number(txnSizeArg);
const pauseAt = Number(pauseAtArg);

const say = (line: string) => process.stdout.write(`${line}\n`);

const kafka = new Kafka({
  clientId: transactionalId,
  brokers: [bootstrap!],
  logLevel: process.env.EOS_COPIER_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
  retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 2000 },
});
const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 60_000 });
const consumer = kafka.consumer({ groupId: groupId!, readUncommitted: false, sessionTimeout: 6000, heartbeatInterval: 500, maxWaitTimeInMs: 200 });

async function pause(n: number): Promise<never> {
  say(`PAUSED ${n}`);
  return await new Promise<never>(() => undefined);
}

let txns = 0;
let copied = 0;

async function main(): Promise<void> {
  // Fences the previous run (same transactional.id) and aborts its open transaction before anything is read.
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topic: input!, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      for (let i = 0; i < batch.messages.length; i += txnSize) {
        if (!isRunning() || isStale()) return;
        const chunk = batch.messages.slice(i, i + txnSize);
        const n = txns + 1;
        const transaction = await producer.transaction();
        try {
          await transaction.send({
            topic: output!,
            acks: -1,
            messages: chunk.map((m) => ({ key: m.key, value: m.value!.toString().toUpperCase(), partition: batch.partition })),
          });
          if (n === pauseAt && pauseStage === "sent") await pause(n);
          const next = String(Number(chunk.at(-1)!.offset) + 1);
          await transaction.sendOffsets({ consumerGroupId: groupId!, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] });
          if (n === pauseAt && pauseStage === "offsets") await pause(n);
          await transaction.commit();
        } catch (e) {
          const error = e as Error & { type?: string };
          if (/fenced|PRODUCER_FENCED|INVALID_PRODUCER_EPOCH/i.test(`${error.type} ${error.message}`)) {
            say(`FATAL ${error.type} ${error.message}`);
            process.exit(2);
          }
          say(`ABORT ${n} ${error.type ?? ""} ${error.message}`.replace(/\n/g, " "));
          await transaction.abort().catch(() => undefined);
          // Back to the committed offset (the first message of this chunk): it is read again.
          consumer.seek({ topic: batch.topic, partition: batch.partition, offset: chunk[0]!.offset });
          return;
        }
        resolveOffset(chunk.at(-1)!.offset);
        txns = n;
        copied += chunk.length;
        say(`COMMIT ${txns} ${copied}`);
        await heartbeat();
      }
    },
  });
  say("READY");
}

consumer.on(consumer.events.CRASH, (event) => {
  say(`CRASH restart=${event.payload.restart} ${event.payload.error.message}`.replace(/\n/g, " "));
  if (!event.payload.restart) process.exit(2);
});

main().catch((e: Error) => {
  say(`FATAL ${e.message}`.replace(/\n/g, " "));
  process.exit(2);
});
