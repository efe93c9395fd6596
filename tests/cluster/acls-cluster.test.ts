/**
 * A two-broker bunka cluster (compiled brokers, one etcd, one data directory) with StandardAuthorizer on:
 * - ACLs created through one broker decide on the other;
 * - the brokers' own requests to each other need CLUSTER_ACTION (README, "Authorization"): without it, a
 *   transactional batch whose coordinator is the other broker is refused retriably (NOT_ENOUGH_REPLICAS,
 *   nothing appended); once User:ANONYMOUS is granted CLUSTER_ACTION from the brokers' host, it is appended,
 *   and Apache's transactional Java producer commits and aborts across the two brokers.
 *
 * The brokers start with allow.everyone.if.no.acl.found=true so that User:ANONYMOUS may add the first ACLs.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { BunkaCluster } from "../support/bunka-cluster.ts";
import { compileJavaPrograms, ok, runJava } from "../support/cluster-clients.ts";
import { killLiveChildren } from "../support/line-child.ts";
import { until } from "../support/wait.ts";

const TIMEOUT = 180_000;
let cluster: BunkaCluster;

const creation = (resourceType: number, resourceName: string, operation: number, host = "*") => ({
  resourceType,
  resourceName,
  resourcePatternType: Pat.LITERAL,
  principal: "User:ANONYMOUS",
  host,
  operation,
  permissionType: Perm.ALLOW,
});
const anyFilter = { resourceTypeFilter: Res.ANY, resourceNameFilter: null, patternTypeFilter: Pat.ANY, principalFilter: null, hostFilter: null, operation: Op.ANY, permissionType: Perm.ANY };

beforeAll(async () => {
  await compileJavaPrograms(["TxnProducer"]);
  cluster = await BunkaCluster.start({
    brokers: 2,
    sessionTimeoutMs: 3000,
    configLines: [`authorizer.class.name=${STANDARD_AUTHORIZER_CLASS}`, "allow.everyone.if.no.acl.found=true"],
  });
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  await cluster?.close();
});

test(
  "ACLs shared by both brokers; the brokers' CLUSTER_ACTION decides whether a batch verified with the other broker is appended",
  async () => {
    await cluster.withLogs(async () => {
      // Clients may do everything but CLUSTER_ACTION; the cluster now has ACLs, so nothing else is open.
      const created = await cluster.withClient(1, (c) =>
        c.request(30, 3, {
          creations: [
            creation(Res.TOPIC, "*", Op.ALL),
            creation(Res.GROUP, "*", Op.ALL),
            creation(Res.TRANSACTIONAL_ID, "*", Op.ALL),
            ...[Op.CREATE, Op.DESCRIBE, Op.ALTER, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS].map((op) => creation(Res.CLUSTER, "kafka-cluster", op)),
          ],
        }),
      );
      expect(created.results.every((r: { errorCode: number }) => r.errorCode === ErrorCode.NONE)).toBe(true);
      // The other broker reads the shared ACL file when the etcd watch tells it of the change: soon, not at
      // once (as Apache's brokers see ACLs once their metadata log has the record).
      const onOther = await until("broker 2 to see the 4 ACL resources", 10_000, async () => {
        const res = await cluster.withClient(2, (c) => c.request(29, 3, anyFilter));
        return res.resources.length === 4 ? res : undefined;
      });
      expect(onOther.resources.length).toBe(4);

      await cluster.createTopic("c-acl", 2, { through: 2 });
      const { leaders } = await cluster.waitForBalanced(["c-acl"]);
      // A transactional id whose coordinator is not the leader of partition `partition`.
      let transactionalId = "";
      let coordinator = -1;
      let partition = -1;
      for (let i = 0; i < 50 && transactionalId === ""; i++) {
        const res = await cluster.withClient(1, (c) => c.request(10, 4, { keyType: 1, coordinatorKeys: [`c-acl-id-${i}`] }));
        const node = res.coordinators[0].nodeId as number;
        const p = [0, 1].find((q) => leaders.get(`c-acl-${q}`) !== node);
        if (res.coordinators[0].errorCode === 0 && p !== undefined) [transactionalId, coordinator, partition] = [`c-acl-id-${i}`, node, p];
      }
      expect(transactionalId).not.toBe("");
      const leader = leaders.get(`c-acl-${partition}`)!;

      const init = await cluster.withClient(coordinator, (c) => c.request(22, 4, { transactionalId, transactionTimeoutMs: 60_000, producerId: -1, producerEpoch: -1 }));
      expect(init.errorCode).toBe(ErrorCode.NONE);
      const added = await cluster.withClient(coordinator, (c) =>
        c.request(24, 3, { v3AndBelowTransactionalId: transactionalId, v3AndBelowProducerId: init.producerId, v3AndBelowProducerEpoch: init.producerEpoch, v3AndBelowTopics: [{ name: "c-acl", partitions: [partition] }] }),
      );
      expect(added.resultsByTopicV3AndBelow[0].resultsByPartition[0].partitionErrorCode).toBe(ErrorCode.NONE);
      const produce = () =>
        cluster.withClient(leader, (c) =>
          c.request(0, 9, {
            transactionalId,
            acks: -1,
            timeoutMs: 5000,
            topicData: [{ name: "c-acl", partitionData: [{ index: partition, records: buildBatch({ records: [{ value: "v" }], producerId: init.producerId, producerEpoch: init.producerEpoch, baseSequence: 0, transactional: true }) }] }],
          }),
        );
      expect((await produce()).responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NOT_ENOUGH_REPLICAS);

      // The brokers' grant, made through the other broker.
      const granted = await cluster.withClient(2, (c) => c.request(30, 3, { creations: [creation(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, "127.0.0.1")] }));
      expect(granted.results[0].errorCode).toBe(ErrorCode.NONE);
      await until("the batch verified with the coordinator", 10_000, async () => ((await produce()).responses[0].partitionResponses[0].errorCode === ErrorCode.NONE ? true : undefined));
      const ended = await cluster.withClient(coordinator, (c) => c.request(26, 3, { transactionalId, producerId: init.producerId, producerEpoch: init.producerEpoch, committed: false }));
      expect(ended.errorCode).toBe(ErrorCode.NONE);

      // Apache's transactional producer, 4 transactions over both partitions, transaction 1 and 3 aborted.
      const run = ok(await runJava("TxnProducer", ["batches", cluster.bootstrapOf(1), "c-acl", transactionalId, "t", "2", "4", "4", "2"]), "TxnProducer");
      expect(run.stdout.match(/^COMMITTED \d+$/gm)).toEqual(["COMMITTED 0", "COMMITTED 2"]);
      expect(run.stdout.match(/^ABORTED \d+$/gm)).toEqual(["ABORTED 1", "ABORTED 3"]);
    });
  },
  TIMEOUT,
);
