/**
 * AddPartitionsToTxn (key 24), versions 0-5.
 *
 * v0-3 (the producer's form): adds partitions to the producer's transaction, answered once the change is
 * durable (txn_state slot). Checks, in Apache's order (KafkaApis, TransactionCoordinator):
 * - a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for every
 *   other partition of the request, nothing added;
 * - empty transactional id: INVALID_REQUEST; a slot this broker does not own: NOT_COORDINATOR; still
 *   loading: COORDINATOR_LOAD_IN_PROGRESS;
 * - unknown id or another producer id: INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED (90),
 *   INVALID_PRODUCER_EPOCH (47) before v2; a decision in progress (Prepare*): CONCURRENT_TRANSACTIONS;
 * - otherwise the partitions join the transaction (Empty / Complete* -> Ongoing starts it) and every
 *   partition answers NONE. The coordinator's answer is the same code for every partition.
 * v4+ (the broker-to-broker batched form, KIP-890): several transactions per request, each answered on its
 * own; with verifyOnly a transaction's partitions are only checked (NONE when in the transaction,
 * TRANSACTION_ABORTABLE when not, or the producer checks' error), nothing changes. The top-level error is
 * NONE.
 *
 * By version: v1 is v0 (Apache bumped it for throttling), v2 answers PRODUCER_FENCED, v3 is flexible, v4
 * batches and adds verifyOnly, v5 lets clients see TRANSACTION_ABORTABLE.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: v4+ (from brokers) needs CLUSTER_ACTION
 * (CLUSTER_AUTHORIZATION_FAILED); v0-3 (from producers) WRITE on the transactional id (every partition
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, the others
 * OPERATION_NOT_ATTEMPTED).
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { API_KEY, rewriteForVersion } from "../domain/txn/coordinator.ts";
import { toTopicPartitions, type TopicPartitions } from "../domain/txn/txn-state.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { AddPartitionsToTxnRequest, AddPartitionsToTxnRequest_AddPartitionsToTxnTopic } from "../protocol/generated/add-partitions-to-txn-request.ts";
import type {
  AddPartitionsToTxnResponseInit,
  AddPartitionsToTxnResponse_AddPartitionsToTxnResultInit,
  AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResultInit,
} from "../protocol/generated/add-partitions-to-txn-response.ts";
import type { Handler, RequestContext } from "./handler.ts";
import type { BrokerServices } from "./services.ts";
import { GROUP_OFFSETS_TOPIC } from "./remote-txn-verifier.ts";
import { SLOT_COUNT } from "../cluster/ownership.ts";

interface TxnInput {
  transactionalId: string;
  producerId: number;
  producerEpoch: number;
  verifyOnly: boolean;
  topics: AddPartitionsToTxnRequest_AddPartitionsToTxnTopic[];
}

/** The request's partitions, normalized (sorted, without duplicates, as Apache's keyed collections). */
function partitionsOf(topics: readonly AddPartitionsToTxnRequest_AddPartitionsToTxnTopic[]): TopicPartitions[] {
  return toTopicPartitions(topics.flatMap((t) => t.partitions.map((partition) => ({ topic: t.name, partition }))));
}

function topicResults(partitions: readonly TopicPartitions[], codeOf: (topic: string, partition: number) => number): AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResultInit[] {
  return partitions.map((t) => ({
    name: t.topic,
    resultsByPartition: t.partitions.map((partitionIndex) => ({ partitionIndex, partitionErrorCode: codeOf(t.topic, partitionIndex) })),
  }));
}

export function addPartitionsToTxnHandler(services: BrokerServices): Handler<AddPartitionsToTxnRequest, AddPartitionsToTxnResponseInit> {
  const { topics, txn } = services;

  const exists = (topic: string, partition: number): boolean => {
    const record = topics.get(topic);
    return record !== undefined && Number.isInteger(partition) && partition >= 0 && partition < record.partitions;
  };

  const handleTransaction = async (input: TxnInput, version: number, ctx: RequestContext): Promise<AddPartitionsToTxnResponse_AddPartitionsToTxnResultInit> => {
    const partitions = partitionsOf(input.topics);
    const { authorizer } = services;
    if (version < 4 && !authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, input.transactionalId)) {
      return { transactionalId: input.transactionalId, topicResults: topicResults(partitions, () => ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) };
    }
    // Producers (v0-3) need WRITE on each topic; brokers (v4+) were checked for CLUSTER_ACTION.
    const writable = version < 4 ? authorizer.allowedNames(ctx, AclOperation.WRITE, ResourceType.TOPIC, partitions.map((t) => t.topic)) : undefined;
    const missing = new Map<string, number>();
    // A verifyOnly request may name a group's offsets partition (another broker's group coordinator
    // verifying a TxnOffsetCommit: `__consumer_offsets`, partition = the group's slot).
    const groupSlot = (topic: string, p: number) => input.verifyOnly && topic === GROUP_OFFSETS_TOPIC && Number.isInteger(p) && p >= 0 && p < SLOT_COUNT;
    for (const t of partitions) {
      for (const p of t.partitions) {
        if (writable !== undefined && !writable.has(t.topic)) missing.set(`${t.topic}\u0000${p}`, ErrorCode.TOPIC_AUTHORIZATION_FAILED);
        else if (!exists(t.topic, p) && !groupSlot(t.topic, p)) missing.set(`${t.topic}\u0000${p}`, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
      }
    }
    if (missing.size > 0) {
      // Any partition that does not exist fails the whole transaction's request; the others were not tried.
      return {
        transactionalId: input.transactionalId,
        topicResults: topicResults(partitions, (topic, partition) =>
          missing.get(`${topic}\u0000${partition}`) ?? ErrorCode.OPERATION_NOT_ATTEMPTED,
        ),
      };
    }
    const ref = { transactionalId: input.transactionalId, producerId: input.producerId, producerEpoch: input.producerEpoch, partitions };
    if (input.verifyOnly) {
      const verified = await txn.verifyPartitions(ref);
      const codes = new Map(verified.map((v) => [`${v.topic}\u0000${v.partition}`, v.errorCode]));
      return {
        transactionalId: input.transactionalId,
        topicResults: topicResults(partitions, (topic, partition) => codes.get(`${topic}\u0000${partition}`) ?? ErrorCode.NONE),
      };
    }
    const errorCode = rewriteForVersion(API_KEY.ADD_PARTITIONS_TO_TXN, version, await txn.addPartitions(ref));
    return { transactionalId: input.transactionalId, topicResults: topicResults(partitions, () => errorCode) };
  };

  const errorResponse = (request: AddPartitionsToTxnRequest, errorCode: number, version: number): AddPartitionsToTxnResponseInit => {
    if (version < 4) {
      return { throttleTimeMs: 0, resultsByTopicV3AndBelow: topicResults(partitionsOf(request.v3AndBelowTopics), () => errorCode) };
    }
    return {
      throttleTimeMs: 0,
      errorCode,
      resultsByTransaction: request.transactions.map((t) => ({ transactionalId: t.transactionalId, topicResults: topicResults(partitionsOf(t.topics), () => errorCode) })),
    };
  };

  return {
    apiKey: 24,
    minVersion: 0,
    maxVersion: 5,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      if (version >= 4 && !services.authorizer.allows(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, version);
      }
      if (version < 4) {
        const result = await handleTransaction(
          {
            transactionalId: request.v3AndBelowTransactionalId,
            producerId: request.v3AndBelowProducerId,
            producerEpoch: request.v3AndBelowProducerEpoch,
            verifyOnly: false,
            topics: request.v3AndBelowTopics,
          },
          version,
          ctx,
        );
        return { throttleTimeMs: 0, resultsByTopicV3AndBelow: result.topicResults };
      }
      const results = await Promise.all(request.transactions.map((t) => handleTransaction(t, version, ctx)));
      return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, resultsByTransaction: results };
    },
    errorResponse,
  };
}
