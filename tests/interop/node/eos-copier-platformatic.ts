/**
 * A consume-transform-produce copier with @platformatic/kafka, exactly once: a Consumer in GROUP with
 * isolationLevel READ_COMMITTED and autocommit off, and a transactional Producer (idempotent, transactionalId)
 * whose Transaction commits the consumed offsets with addConsumer(consumer) (AddOffsetsToTxn) and
 * addOffset(message) (TxnOffsetCommit with the message's group generation and member). Up to TXN_SIZE
 * messages become one transaction (fewer when the stream pauses for 100 ms): every message of input partition
 * p goes to output partition p with the same key and the value upper-cased.
 *
 *   bun tests/interop/node/eos-copier-platformatic.ts BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE
 *
 * INSTANCE_ID is groupInstanceId (static membership), "-" for none. PAUSE_AT > 0 stops transaction number
 * PAUSE_AT of this run for good in the middle (PAUSE_STAGE "sent": its messages are acknowledged by the
 * broker; "offsets": its offsets are added to the transaction too), after printing PAUSED, so that the test
 * can SIGKILL it with a transaction open. It never exits by itself. stdout, one line per event: READY, COMMIT
 * <n> <messages in this run>, PAUSED <n>, ABORT <n> <error>; a fatal error prints FATAL and exits 2.
 */
import {
  Consumer,
  FetchIsolationLevels,
  MessagesStreamFallbackModes,
  MessagesStreamModes,
  Producer,
  stringDeserializers,
  stringSerializers,
  type Message,
  type MessagesStream,
} from "@platformatic/kafka";
import { NEW_SESSION, describeError } from "./platformatic-support.ts";

const args = process.argv.slice(2);
if (args.length !== 9) {
  process.stderr.write("usage: eos-copier-platformatic.ts BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE\n");
  process.exit(64);
}
const [bootstrap, input, output, groupId, transactionalId, instanceId, txnSizeArg, pauseAtArg, pauseStage] = args as [string, string, string, string, string, string, string, string, string];
const txnSize = Number(txnSizeArg);
const pauseAt = Number(pauseAtArg);
/** A partly filled transaction is committed once no message came for this long. */
const CHUNK_IDLE_MS = 100;

const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise<null>((resolve) => setTimeout(() => resolve(null), ms));

const consumer = new Consumer({
  clientId: `${transactionalId}-consumer`,
  bootstrapBrokers: [bootstrap],
  groupId,
  deserializers: stringDeserializers,
  autocommit: false,
  isolationLevel: FetchIsolationLevels.READ_COMMITTED,
  sessionTimeout: 6000,
  heartbeatInterval: 500,
  maxWaitTime: 200,
  ...(instanceId === "-" ? {} : { groupInstanceId: instanceId }),
});
const producer = new Producer({
  clientId: `${transactionalId}-producer`,
  bootstrapBrokers: [bootstrap],
  idempotent: true,
  transactionalId,
  serializers: stringSerializers,
  ...NEW_SESSION,
});

type In = Message<string, string, string, string>;

/** A fence: this instance can never commit again (a newer one with the same transactional id took over). */
const fenced = (e: unknown) => /PRODUCER_FENCED|INVALID_PRODUCER_EPOCH|fenced|old epoch/i.test(describeError(e));

async function pause(n: number): Promise<never> {
  say(`PAUSED ${n}`);
  return await new Promise<never>(() => undefined);
}

async function openStream(): Promise<{ stream: MessagesStream<string, string, string, string>; next: (waitMs: number) => Promise<In | null> }> {
  const stream: MessagesStream<string, string, string, string> = await consumer.consume({
    topics: [input],
    mode: MessagesStreamModes.COMMITTED,
    fallbackMode: MessagesStreamFallbackModes.EARLIEST,
    autocommit: false,
  });
  const iterator = stream[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<In>> | undefined;
  return {
    stream,
    async next(waitMs) {
      pending ??= iterator.next();
      const result = await Promise.race([pending, sleep(waitMs)]);
      if (result === null) return null;
      pending = undefined;
      if (result.done) throw new Error("the consumer's stream ended");
      return result.value;
    },
  };
}

async function main(): Promise<void> {
  // InitProducerId now (beginTransaction does it; cancel sends nothing): it fences the previous run (same
  // transactional id) and aborts its open transaction before anything is read.
  await (await producer.beginTransaction()).cancel();
  let current = await openStream();
  say("READY");
  let txns = 0;
  let copied = 0;
  for (;;) {
    const chunk: In[] = [];
    while (chunk.length < txnSize) {
      const message = await current.next(chunk.length === 0 ? 1000 : CHUNK_IDLE_MS);
      if (message === null) {
        if (chunk.length > 0) break;
        continue;
      }
      chunk.push(message);
    }
    const n = txns + 1;
    const transaction = await producer.beginTransaction();
    try {
      await transaction.send({ messages: chunk.map((m) => ({ topic: output, key: m.key, value: m.value.toUpperCase(), partition: m.partition })) });
      if (n === pauseAt && pauseStage === "sent") await pause(n);
      await transaction.addConsumer(consumer);
      const lastOfPartition = new Map<number, In>();
      for (const m of chunk) lastOfPartition.set(m.partition, m);
      for (const m of lastOfPartition.values()) await transaction.addOffset(m);
      if (n === pauseAt && pauseStage === "offsets") await pause(n);
      await transaction.commit();
    } catch (e) {
      if (fenced(e)) {
        say(`FATAL ${describeError(e)}`);
        process.exit(2);
      }
      say(`ABORT ${n} ${describeError(e)}`);
      await transaction.abort().catch(() => transaction.cancel().catch(() => undefined));
      // Back to the group's committed offsets: the chunk is read again.
      await current.stream.close().catch(() => undefined);
      current = await openStream();
      continue;
    }
    txns = n;
    copied += chunk.length;
    say(`COMMIT ${txns} ${copied}`);
  }
}

main().catch((e) => {
  say(`FATAL ${describeError(e)}`);
  process.exit(2);
});
