/**
 * DescribeProducers (key 61), version 0 (KIP-664; what `kafka-transactions.sh describe-producers` and the
 * Admin client's describeProducers send).
 *
 * Per partition, the producer state the leader holds: for every producer id with state here its epoch, the
 * last sequence it wrote (-1 when its window is empty, after a marker or a fence), the timestamp of its last
 * batch or marker, the coordinator epoch of its last marker (-1 before any), and the first offset of its
 * open transaction here (-1 when none), sorted by producer id. As Apache answers: an illegal topic name is
 * INVALID_TOPIC_EXCEPTION and an unknown topic UNKNOWN_TOPIC_OR_PARTITION, both with the error's message,
 * for every partition asked; a partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION and one led
 * by another broker NOT_LEADER_OR_FOLLOWER, without a message.
 * Authorization (broker/authorizer.ts): READ on the topic, else TOPIC_AUTHORIZATION_FAILED for its
 * partitions (after the name's validity, before whether it exists), as Apache's KafkaApis.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeProducersRequest } from "../protocol/generated/describe-producers-request.ts";
import type {
  DescribeProducersResponseInit,
  DescribeProducersResponse_PartitionResponseInit,
  DescribeProducersResponse_ProducerStateInit,
} from "../protocol/generated/describe-producers-response.ts";
import type { Partition } from "../storage/partition.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

/** Apache's message of UNKNOWN_TOPIC_OR_PARTITION (Errors.UNKNOWN_TOPIC_OR_PARTITION.message()). */
const UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition.";

/** The producer state of a partition, as DescribeProducers reports it. */
export function activeProducersOf(partition: Partition): DescribeProducersResponse_ProducerStateInit[] {
  const out: DescribeProducersResponse_ProducerStateInit[] = [];
  for (const [producerId, entry] of partition.producers.entries()) {
    out.push({
      producerId,
      producerEpoch: entry.epoch,
      lastSequence: entry.batches.length === 0 ? -1 : entry.batches[entry.batches.length - 1]!.lastSeq,
      lastTimestamp: entry.lastTimestampMs,
      coordinatorEpoch: entry.coordinatorEpoch,
      currentTxnStartOffset: entry.currentTxnFirstOffset,
    });
  }
  return out.sort((a, b) => a.producerId! - b.producerId!);
}

export function describeProducersHandler(services: BrokerServices): Handler<DescribeProducersRequest, DescribeProducersResponseInit> {
  const { topics, partitions, ownership } = services;

  const describe = async (topic: string, partitionIndex: number): Promise<DescribeProducersResponse_PartitionResponseInit> => {
    const error = (errorCode: number): DescribeProducersResponse_PartitionResponseInit => ({
      partitionIndex,
      errorCode,
      errorMessage: null,
      activeProducers: [],
    });
    const record = topics.get(topic);
    if (record === undefined || partitionIndex < 0 || partitionIndex >= record.partitions) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    if (ownership.partitionLeader(topic, partitionIndex) !== ownership.selfId) return error(ErrorCode.NOT_LEADER_OR_FOLLOWER);
    // Refused at open for damaged data (partitions.ts): its producer state was never rebuilt.
    if (partitions.refusal(topic, partitionIndex) !== undefined) return error(ErrorCode.KAFKA_STORAGE_ERROR);
    const partition = await partitions.get(topic, partitionIndex);
    // Closing: its topic is being deleted.
    if (partition === undefined || partition.closing) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    return { partitionIndex, errorCode: ErrorCode.NONE, errorMessage: null, activeProducers: activeProducersOf(partition) };
  };

  return {
    apiKey: 61,
    minVersion: 0,
    maxVersion: 0,
    async handle(request, ctx) {
      return {
        throttleTimeMs: 0,
        topics: await Promise.all(
          request.topics.map(async (t) => {
            const invalid = topicNameInvalidReason(t.name);
            const topicError =
              invalid !== null
                ? { errorCode: ErrorCode.INVALID_TOPIC_EXCEPTION, errorMessage: invalid }
                : !services.authorizer.allows(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
                  ? { errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, errorMessage: null }
                  : topics.get(t.name) === undefined
                  ? { errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, errorMessage: UNKNOWN_TOPIC_MESSAGE }
                  : undefined;
            const answers =
              topicError !== undefined
                ? t.partitionIndexes.map((partitionIndex) => ({ partitionIndex, ...topicError, activeProducers: [] }))
                : await Promise.all(t.partitionIndexes.map((partitionIndex) => describe(t.name, partitionIndex)));
            return { name: t.name, partitions: answers };
          }),
        ),
      };
    },
    errorResponse(request, errorCode) {
      return {
        topics: request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitionIndexes.map((partitionIndex) => ({ partitionIndex, errorCode, errorMessage: null, activeProducers: [] })),
        })),
      };
    },
  };
}
