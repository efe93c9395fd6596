/**
 * OffsetForLeaderEpoch (key 23), versions 2-4 (KIP-101 for followers, KIP-320 for consumers validating
 * their position after a leader change; v4 flexible), the versions Apache Kafka 4 serves (v0-1 removed).
 *
 * Per partition, as Apache's ReplicaManager.lastOffsetForLeaderEpoch answers (docs/architecture.md,
 * "Leader epochs"): a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, one refused at
 * open for damaged data KAFKA_STORAGE_ERROR; then the current-leader-epoch check (-1 asks for none:
 * FENCED_LEADER_EPOCH when the asker's epoch is older than the partition's, UNKNOWN_LEADER_EPOCH when
 * newer) and NOT_LEADER_OR_FOLLOWER when this broker does not lead it (partition-leadership.ts). Otherwise
 * the largest epoch <= the one asked and where it ends (LeaderEpochHistory.endOffsetFor against the log
 * end offset): the latest epoch ends at the log end, an epoch above every recorded one has no answer
 * (-1, -1), one below them ends at the first recorded start offset. Apache answers from the leader only
 * and bounds nothing by the high watermark, for consumers (replica id -1) and followers alike; so does
 * this handler, and the replica id (v3+) changes nothing.
 * Authorization (broker/authorizer.ts): CLUSTER_ACTION on the cluster, or else DESCRIBE on each topic
 * (TOPIC_AUTHORIZATION_FAILED for its partitions), as Apache's KafkaApis.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { OffsetForLeaderEpochRequest } from "../protocol/generated/offset-for-leader-epoch-request.ts";
import type {
  OffsetForLeaderEpochResponseInit,
  OffsetForLeaderEpochResponse_EpochEndOffsetInit,
} from "../protocol/generated/offset-for-leader-epoch-response.ts";
import type { Handler } from "./handler.ts";
import { partitionLeadership } from "./partition-leadership.ts";
import type { BrokerServices } from "./services.ts";

export function offsetForLeaderEpochHandler(services: BrokerServices): Handler<OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponseInit> {
  const { topics, partitions, ownership } = services;

  const answer = async (
    topic: string,
    partition: number,
    currentLeaderEpoch: number,
    leaderEpoch: number,
  ): Promise<OffsetForLeaderEpochResponse_EpochEndOffsetInit> => {
    const error = (errorCode: number) => ({ partition, errorCode, leaderEpoch: -1, endOffset: -1 });
    const record = topics.get(topic);
    if (record === undefined || partition < 0 || partition >= record.partitions) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    // Refused at open for damaged data (partitions.ts): its log is not open.
    if (partitions.refusal(topic, partition) !== undefined) return error(ErrorCode.KAFKA_STORAGE_ERROR);
    const leadership = partitionLeadership(ownership, topic, partition, currentLeaderEpoch);
    if (leadership.kind === "refused") return error(leadership.errorCode);
    const opened = await partitions.get(topic, partition);
    // Closing: its topic is being deleted.
    if (opened === undefined || opened.closing) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    const found = opened.endOffsetForEpoch(leaderEpoch);
    return { partition, errorCode: ErrorCode.NONE, leaderEpoch: found.epoch, endOffset: found.endOffset };
  };

  return {
    apiKey: 23,
    minVersion: 2,
    maxVersion: 4,
    async handle(request, ctx) {
      const { authorizer } = services;
      const allowed = authorizer.allows(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        ? undefined
        : authorizer.allowedNames(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics.map((t) => t.topic));
      return {
        throttleTimeMs: 0,
        topics: await Promise.all(
          request.topics.map(async (t) => ({
            topic: t.topic,
            partitions: await Promise.all(
              t.partitions.map((p) => allowed !== undefined && !allowed.has(t.topic)
                ? { partition: p.partition, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, leaderEpoch: -1, endOffset: -1 }
                : answer(t.topic, p.partition, p.currentLeaderEpoch, p.leaderEpoch)),
            ),
          })),
        ),
      };
    },
    errorResponse(request, errorCode) {
      return {
        topics: request.topics.map((t) => ({
          topic: t.topic,
          partitions: t.partitions.map((p) => ({ partition: p.partition, errorCode, leaderEpoch: -1, endOffset: -1 })),
        })),
      };
    },
  };
}
