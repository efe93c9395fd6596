/**
 * DescribeTopicPartitions (key 75), version 0.
 *
 * What the Java admin client (3.8+) asks instead of Metadata to describe topics (`kafka-topics
 * --describe`): each topic's id and partitions, each partition's leader, leader epoch, replicas and ISR as
 * Metadata answers them (broker/partition-metadata.ts, so the leaders are the same in cluster mode),
 * eligible leader replicas and last known ELR as empty lists (one replica per partition: there is no
 * other replica to be eligible; Apache's answer without ELR) and no offline replicas. A partition without
 * a leader has leader -1 and no error, as Apache answers.
 * Topic selection and paging as Apache 4.1's DescribeTopicPartitionsRequestHandler and its metadata cache:
 * an empty list means every topic (those the principal may not describe left out silently), a list names
 * topics; either way sorted by name, from the cursor's topic on (a name below it is skipped), the cursor's
 * topic from its partition. At most ResponsePartitionLimit partitions are answered (bounded to
 * 1..2000, Apache's max.request.partition.size.limit default); where the limit cuts, NextCursor names the
 * topic and partition to go on from. A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION
 * (INVALID_TOPIC_EXCEPTION for an illegal name), answered only while the limit is not reached. A cursor
 * whose topic is not in a given list, or whose partition is negative, fails the request: every named topic
 * INVALID_REQUEST.
 * Authorization (broker/authorizer.ts), as Metadata: a named topic the principal may not DESCRIBE is
 * TOPIC_AUTHORIZATION_FAILED without its id, after the others, before anything says whether it exists;
 * every other topic carries the principal's authorized operations on it.
 * Not done: internal topics (bunka has none: README, "Internal topics").
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { ZERO_UUID } from "../protocol/codec-support.ts";
import type { DescribeTopicPartitionsRequest } from "../protocol/generated/describe-topic-partitions-request.ts";
import type {
  DescribeTopicPartitionsResponse_CursorInit,
  DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponsePartitionInit,
  DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponseTopicInit,
  DescribeTopicPartitionsResponseInit,
} from "../protocol/generated/describe-topic-partitions-response.ts";
import type { Handler } from "./handler.ts";
import { partitionMetadata } from "./partition-metadata.ts";
import { AUTHORIZED_OPERATIONS_OMITTED, type BrokerServices } from "./services.ts";

/** Apache's max.request.partition.size.limit default: the most partitions one answer carries. */
export const MAX_RESPONSE_PARTITIONS = 2000;

type TopicAnswer = DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponseTopicInit;
type PartitionAnswer = DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponsePartitionInit;

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function describeTopicPartitionsHandler(
  services: BrokerServices,
): Handler<DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponseInit> {
  const { ownership, topics, authorizer } = services;

  const failed = (errorCode: number, name: string): TopicAnswer => ({
    errorCode,
    name,
    topicId: ZERO_UUID,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  });

  const describePartition = (topic: string, partitionIndex: number): PartitionAnswer => ({
    errorCode: ErrorCode.NONE,
    partitionIndex,
    ...partitionMetadata(ownership, topic, partitionIndex),
    eligibleLeaderReplicas: [],
    lastKnownElr: [],
    offlineReplicas: [],
  });

  return {
    apiKey: 75,
    minVersion: 0,
    maxVersion: 0,
    handle(request, ctx) {
      const allTopics = request.topics.length === 0;
      const cursor = request.cursor;
      const cursorTopic = cursor?.topicName ?? "";
      const names = new Set<string>();
      if (allTopics) {
        for (const topic of topics.list()) if (topic.name >= cursorTopic) names.add(topic.name);
      } else {
        for (const t of request.topics) if (t.name >= cursorTopic) names.add(t.name);
        if (cursor !== null && !names.has(cursor.topicName)) return this.errorResponse(request, ErrorCode.INVALID_REQUEST, ctx.apiVersion);
      }
      if (cursor !== null && cursor.partitionIndex < 0) return this.errorResponse(request, ErrorCode.INVALID_REQUEST, ctx.apiVersion);

      const refused: TopicAnswer[] = [];
      const authorized = [...names].sort(byName).filter((name) => {
        // Refusals are logged for topics the request names, not for the all-topics answer's filter.
        const allowed = authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, { quiet: allTopics });
        if (!allowed && !allTopics) refused.push(failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name));
        return allowed;
      });

      const answered: TopicAnswer[] = [];
      let nextCursor: DescribeTopicPartitionsResponse_CursorInit | null = null;
      let remaining = Math.max(Math.min(MAX_RESPONSE_PARTITIONS, request.responsePartitionLimit), 1);
      for (const name of authorized) {
        if (remaining === 0) {
          // Every partition of the topics before fitted: go on from this topic's start.
          nextCursor = { topicName: name, partitionIndex: 0 };
          break;
        }
        const topic = topics.get(name);
        const operations = authorizer.authorizedOperations(ctx, ResourceType.TOPIC, name);
        if (topic === undefined) {
          if (!allTopics) {
            const errorCode = topicNameInvalidReason(name) === null ? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION : ErrorCode.INVALID_TOPIC_EXCEPTION;
            answered.push({ ...failed(errorCode, name), topicAuthorizedOperations: operations });
          }
          continue;
        }
        const start = name === cursorTopic && cursor !== null ? cursor.partitionIndex : 0;
        const end = Math.min(topic.partitions, start + remaining);
        const partitions: PartitionAnswer[] = [];
        for (let index = start; index < end; index++) partitions.push(describePartition(name, index));
        answered.push({
          errorCode: ErrorCode.NONE,
          name,
          topicId: topic.topicId,
          isInternal: false,
          partitions,
          topicAuthorizedOperations: operations,
        });
        if (end < topic.partitions) {
          nextCursor = { topicName: name, partitionIndex: end };
          break;
        }
        remaining -= partitions.length;
      }
      return { throttleTimeMs: 0, topics: [...answered, ...refused.sort((a, b) => byName(a.name!, b.name!))], nextCursor };
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, topics: request.topics.map((t) => failed(errorCode, t.name)), nextCursor: null };
    },
  };
}
