/**
 * Zombie fencing with librdkafka (confluent-kafka for Python, tests/interop/python/txn_zombie.py, from the
 * venv scripts/install-interop-clients.sh installs in .cache/venv), kafkajs (tests/interop/node/txn-zombie.ts,
 * run with bun), @platformatic/kafka (tests/interop/node/txn-zombie-platformatic.ts) and franz-go
 * (tests/interop/go/txnzombie, built by the same script): the scenario of the Java test's "zombie fencing"
 * (tests/interop/transactions-java.test.ts), on a topic of 2 partitions, each helper a separate OS process:
 *
 *   1. producer A (transactional.id X) begins a transaction, writes 3 records to partition 0 and waits
 *      (its transaction pins the LSO at 0);
 *   2. producer B with the same X initialises, which fences A (the broker aborts A's transaction with an
 *      epoch bump), commits two transactions of its own over both partitions and exits;
 *   3. A carries on with one more record, in one test to partition 0 (already in its transaction: the
 *      broker refuses the Produce) and in another to partition 1 (not yet in it: the broker refuses the
 *      AddPartitionsToTxn), then commits, then aborts. What each client reports is asserted as observed
 *      (the same against Apache Kafka 4.1.1, see below):
 *        - librdkafka: the fence is a fatal error, KafkaError _FENCED (-144) with fatal()=True, raised by
 *          flush() and then again by commit_transaction() and abort_transaction(). The late record's own
 *          delivery report is the broker's INVALID_PRODUCER_EPOCH (47) for partition 0, and _PURGE_QUEUE
 *          for partition 1 (never sent: AddPartitionsToTxn v<2 answered INVALID_PRODUCER_EPOCH, which
 *          librdkafka logs as ADDPARTS and turns into the fatal _FENCED);
 *        - franz-go 1.22.3 (tests/interop/go/txnzombie, built into .cache/go-bin/): INVALID_PRODUCER_EPOCH (47)
 *          for the late Produce to partition 0, PRODUCER_FENCED (90) for AddPartitionsToTxn v3 (partition
 *          1); franz-go refuses the commit itself (OPERATION_NOT_ATTEMPTED) and ends the transaction locally
 *          after the Produce error, or with EndTxn v4 answered PRODUCER_FENCED after the AddPartitionsToTxn one;
 *        - @platformatic/kafka 2.12.1 (tests/interop/node/txn-zombie-platformatic.ts, run with bun): the broker's
 *          INVALID_PRODUCER_EPOCH (47) to the late Produce v11 (partition 0) or PRODUCER_FENCED (90) to
 *          AddPartitionsToTxn v5 (partition 1), then PRODUCER_FENCED to EndTxn v4 for the commit and the abort;
 *        - kafkajs 2.2.4 (no ProducerFenced error class, and it does not know PRODUCER_FENCED (90)): the
 *          send and the commit fail with KafkaJSProtocolError type INVALID_PRODUCER_EPOCH (47),
 *          retriable=false, answered to its Produce v7 (partition 0) or AddPartitionsToTxn v1 (partition 1)
 *          and EndTxn v1; the abort is then refused by kafkajs itself (KafkaJSNonRetriableError "Cannot
 *          continue to use transaction once ended");
 *   4. nothing of A's reaches read_committed (librdkafka's consumer, assign(), no group): exactly B's
 *      records; read_uncommitted shows A's 3 records before B's; on the log, partition 0 has A's ABORT
 *      marker (the fencing epoch) then B's two COMMITs, and partition 1 only B's two COMMITs (A never got
 *      it into its transaction); DescribeTransactions ends in CompleteCommit at a higher epoch, and the
 *      LSO is the high watermark.
 *
 *   bun test --timeout 300000 tests/interop/transactions-clients.test.ts
 *   TXN_ZOMBIE_TARGET=apache bun test --timeout 300000 tests/interop/transactions-clients.test.ts
 *                                      (the same against Apache Kafka 4.1.1 formatted at transaction version
 *                                      1, bunka's: the clients report the same)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ZERO_UUID } from "../../src/protocol/codec-support.ts";
import { startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { readPartitionFully } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { describeSettledTxn, describeTxn, latestOffset } from "../support/txn-requests.ts";
import { WireClient } from "../support/wire-client.ts";
import { ZOMBIE_CLIENTS, zombieScenario, type ZombieTarget } from "../support/zombie-fencing.ts";

const TIMEOUT = 120_000;
const TARGET = process.env.TXN_ZOMBIE_TARGET === "apache" ? "apache" : "bunka";

let bunka: TestBroker | undefined;
let apache: ApacheKafka | undefined;
let client: WireClient;
let target: ZombieTarget;

// ---------------------------------------------------------------------------------------------
// Raw requests

async function createTopic(name: string, partitions: number): Promise<void> {
  const res = await client.request(19, 7, {
    topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 5000,
    validateOnly: false,
  });
  expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  // Apache Kafka answers CreateTopics before the partitions have a leader; clients would retry, but the
  // helpers' first produce is part of what the test times.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const md = await client.request(3, 12, { topics: [{ name, topicId: ZERO_UUID }], allowAutoTopicCreation: false });
    const t = md.topics[0];
    if (t.errorCode === ErrorCode.NONE && t.partitions.length === partitions && t.partitions.every((p: { leaderId: number }) => p.leaderId >= 0)) return;
    if (Date.now() > deadline) throw new Error(`no leaders for ${name} within 30 s`);
    await Bun.sleep(50);
  }
}

beforeAll(async () => {
  await ensureInteropClients();
  if (TARGET === "apache") {
    // Transaction version 1, bunka's: at 2 (Apache's default) franz-go switches to KIP-890's protocol (no
    // AddPartitionsToTxn, EndTxn v5), and the comparison would no longer be like for like.
    apache = await startApacheKafka({ serverProperties: { "auto.create.topics.enable": false }, features: { "transaction.version": 1 } });
    client = await WireClient.connect(apache.port);
  } else {
    bunka = await startTestBroker({ autoCreateTopicsEnable: false });
    client = await WireClient.connect(bunka.port);
  }
  // One broker: every check goes to it.
  target = {
    bootstrap: (apache ?? bunka)!.bootstrap,
    createTopic,
    describeTxn: (id) => describeTxn(client, id),
    describeSettledTxn: (id) => describeSettledTxn(client, id),
    latestOffset: (topic, readCommitted, partition) => latestOffset(client, topic, readCommitted, partition),
    readPartitionFully: (topic, partition) => readPartitionFully(client, topic, partition),
  };
}, 300_000);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await bunka?.stop();
  await apache?.stop();
});

describe(`zombie fencing: a second producer with the same transactional.id fences the first mid-transaction (${TARGET})`, () => {
  for (const name of ZOMBIE_CLIENTS) {
    test(`${name}: the zombie's late record to partition 0, already in its transaction`, async () => {
      await zombieScenario(target, name, 0);
    }, TIMEOUT);

    test(`${name}: the zombie's late record to partition 1, not yet in its transaction`, async () => {
      await zombieScenario(target, name, 1);
    }, TIMEOUT);
  }
});
