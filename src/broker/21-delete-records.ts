/**
 * DeleteRecords (key 21), versions 0-2.
 *
 * Moves each partition's log start offset to the offset given (-1 means the high watermark), durably
 * before answering; whole segments below it are deleted by retention later. An offset beyond the high
 * watermark is OFFSET_OUT_OF_RANGE; a lower one than the current start changes nothing and answers the
 * current start (the low watermark). Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION. A topic whose
 * cleanup.policy lacks `delete` (compact only) answers POLICY_VIOLATION, as Apache does: its records go
 * only by compaction. A partition this broker does not lead (cluster mode) is NOT_LEADER_OR_FOLLOWER, as is
 * one whose leadership ended (the lease lapsed) before the change was durable: the change is a write, checked
 * against the leader epoch before it and again before the answer, as Produce is.
 * Authorization (broker/authorizer.ts): DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DeleteRecordsRequest } from "../protocol/generated/delete-records-request.ts";
import type { DeleteRecordsResponseInit } from "../protocol/generated/delete-records-response.ts";
import type { Handler } from "./handler.ts";
import { NO_LEADER_EPOCH, partitionLeadership } from "./partition-leadership.ts";
import type { BrokerServices } from "./services.ts";

const HIGH_WATERMARK = -1;

export function deleteRecordsHandler(services: BrokerServices): Handler<DeleteRecordsRequest, DeleteRecordsResponseInit> {
  const { partitions, topics, ownership } = services;
  const answer = async (topic: string, partitionIndex: number, offset: number) => {
    const known = topics.get(topic);
    if (known === undefined || !Number.isInteger(partitionIndex) || partitionIndex < 0 || partitionIndex >= known.partitions) {
      return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION };
    }
    const resource = { kind: "partition" as const, topic, partition: partitionIndex };
    const leadership = partitionLeadership(ownership, topic, partitionIndex, NO_LEADER_EPOCH);
    if (leadership.kind !== "leader" || !ownership.mayAct(resource, leadership.epoch)) {
      return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER };
    }
    // Refused at open for damaged data (partitions.ts): its log is not open to change.
    if (partitions.refusal(topic, partitionIndex) !== undefined) return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.KAFKA_STORAGE_ERROR };
    const partition = await partitions.get(topic, partitionIndex);
    // Closing: its topic is being deleted; the log would refuse the change.
    if (!partition || partition.closing) return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION };
    const record = topics.get(topic);
    if (record !== undefined && !partitions.cleanupPolicyOf(record).delete) {
      return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.POLICY_VIOLATION };
    }
    const target = offset === HIGH_WATERMARK ? partition.highWatermark : offset;
    if (target < 0 || target > partition.highWatermark) {
      return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.OFFSET_OUT_OF_RANGE };
    }
    const result = await partition.deleteRecordsBefore(Math.max(target, partition.log.logStartOffset));
    if (!ownership.mayAct(resource, leadership.epoch)) return { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER };
    return result.kind === "ok"
      ? { partitionIndex, lowWatermark: result.logStartOffset, errorCode: ErrorCode.NONE }
      : { partitionIndex, lowWatermark: -1, errorCode: ErrorCode.OFFSET_OUT_OF_RANGE };
  };
  return {
    apiKey: 21,
    minVersion: 0,
    maxVersion: 2,
    async handle(request, ctx) {
      // Authorization (broker/authorizer.ts): DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED.
      const deletable = services.authorizer.allowedNames(ctx, AclOperation.DELETE, ResourceType.TOPIC, request.topics.map((t) => t.name));
      return {
        throttleTimeMs: 0,
        topics: await Promise.all(
          request.topics.map(async (t) => ({
            name: t.name,
            partitions: await Promise.all(
              t.partitions.map((p) =>
                deletable.has(t.name)
                  ? answer(t.name, p.partitionIndex, p.offset)
                  : { partitionIndex: p.partitionIndex, lowWatermark: -1, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED },
              ),
            ),
          })),
        ),
      };
    },
    errorResponse(request, errorCode) {
      return {
        topics: request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, lowWatermark: -1, errorCode })),
        })),
      };
    },
  };
}
