/**
 * Zombie fencing against a real three-broker cluster (tests/support/bunka-cluster.ts), with librdkafka,
 * kafkajs, franz-go and @platformatic/kafka: the scenario of tests/interop/transactions-clients.test.ts
 * (tests/support/zombie-fencing.ts), each client's refusals asserted as on one broker, on a topic whose two
 * partitions are led by two brokers and a transactional id coordinated by the third. So producer B's
 * InitProducerId fences A on the coordinator, A's open transaction is aborted there at the bumped epoch
 * with its marker queued for partition 0's leader, and A's late record is refused by a leader that is not
 * the coordinator (partition 0: its Produce at the old epoch) or by the coordinator (partition 1:
 * AddPartitionsToTxn). Then read_committed holds exactly B's records and the markers are where they belong.
 *
 *   bun test --timeout 600000 tests/cluster/zombie-fencing.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { describeSettledTxn, describeTxn, latestOffset } from "../support/txn-requests.ts";
import { until } from "../support/wait.ts";
import { ZOMBIE_CLIENTS, zombieScenario, type ZombieTarget } from "../support/zombie-fencing.ts";

const TIMEOUT_MS = 180_000;

let cluster: BunkaCluster;
let target: ZombieTarget;
/** Each topic's partition leaders, as waitForBalanced found them. */
const leadersOf = new Map<string, number[]>();

/** The broker FindCoordinator names for a transactional id. */
async function coordinatorOf(transactionalId: string): Promise<number> {
  return until(`the coordinator of ${transactionalId}`, 30_000, async () => {
    const res = await cluster.withClient(cluster.liveIds()[0]!, (c) => c.request(10, 4, { keyType: 1, coordinatorKeys: [transactionalId] }));
    const found = res.coordinators[0];
    return found.errorCode === ErrorCode.NONE ? (found.nodeId as number) : undefined;
  });
}

beforeAll(async () => {
  await ensureInteropClients();
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
  target = {
    // One broker's address: the kafkajs and franz-go helpers take a single host:port; the clients find
    // the others through Metadata.
    bootstrap: cluster.bootstrapOf(cluster.ids[0]!),
    async createTopic(name, partitions) {
      await cluster.createTopic(name, partitions);
      const { leaders } = await cluster.waitForBalanced([name]);
      leadersOf.set(name, Array.from({ length: partitions }, (_, p) => leaders.get(`${name}-${p}`)!));
    },
    async transactionalIdFor(topic) {
      // The coordinator leads neither partition: every marker and every epoch it hands out reaches the
      // partitions through another broker.
      const leaders = leadersOf.get(topic)!;
      const coordinator = cluster.ids.find((id) => !leaders.includes(id));
      expect(coordinator, `a broker leading neither partition of ${topic} (leaders ${leaders})`).toBeDefined();
      return cluster.keyCoordinatedBy(coordinator!, 1, `${topic}-id`);
    },
    describeTxn: async (id) => cluster.withClient(await coordinatorOf(id), (c) => describeTxn(c, id)),
    describeSettledTxn: async (id) => cluster.withClient(await coordinatorOf(id), (c) => describeSettledTxn(c, id), 20_000),
    latestOffset: async (topic, readCommitted, partition) => cluster.withClient(await cluster.leaderOf(topic, partition), (c) => latestOffset(c, topic, readCommitted, partition)),
    readPartitionFully: (topic, partition) => cluster.readPartition(topic, partition),
  };
}, TIMEOUT_MS);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

describe("three brokers: a second producer with the same transactional.id fences the first mid-transaction; coordinator and both partition leaders on three brokers", () => {
  for (const name of ZOMBIE_CLIENTS) {
    test(`${name}: the zombie's late record to partition 0 (led by another broker), already in its transaction`, async () => {
      await cluster.withLogs(() => zombieScenario(target, name, 0, `cz-${name}-p0`));
    }, TIMEOUT_MS);

    test(`${name}: the zombie's late record to partition 1 (led by another broker), not yet in its transaction`, async () => {
      await cluster.withLogs(() => zombieScenario(target, name, 1, `cz-${name}-p1`));
    }, TIMEOUT_MS);
  }
});
