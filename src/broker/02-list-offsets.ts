/**
 * ListOffsets (key 2), versions 1-8.
 *
 * Per partition, by timestamp: -2 earliest (the log start offset), -1 latest (the high watermark, or the
 * last stable offset for read_committed, v2+), -3 the offset of the largest timestamp (v7+), -4 the
 * earliest local offset (v8+; everything is local, so the log start offset), otherwise the first offset
 * whose timestamp is at or after the one asked for, through the time index; none gives offset -1 and
 * timestamp -1 (and leader epoch -1), as Apache does. Offsets beyond the readable end are never answered.
 * The leader epoch (v4+, docs/architecture.md, "Leader epochs"): for latest the partition's current epoch,
 * otherwise the epoch that wrote the offset answered (the leader-epoch history's, Apache's epochForOffset).
 * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION. Then, as Apache's fetchOffsetForTimestamp: the
 * current-leader-epoch check (v4+, -1 asks for none: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and
 * NOT_LEADER_OR_FOLLOWER when this broker does not lead the partition (partition-leadership.ts).
 * Difference from Apache, on purpose: for a compressed batch a timestamp lookup answers the batch's base
 * offset (the records are not decompressed), which can be a few records before Apache's answer; a
 * consumer seeking there reads from at most one batch earlier.
 * Deliberately not done: v0 (old-style offsets), tiered storage timestamps (-5).
 * Authorization (broker/authorizer.ts): DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its
 * partitions (offset and timestamp -1).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ListOffsetsRequest } from "../protocol/generated/list-offsets-request.ts";
import type {
  ListOffsetsResponseInit,
  ListOffsetsResponse_ListOffsetsPartitionResponseInit,
} from "../protocol/generated/list-offsets-response.ts";
import type { Handler } from "./handler.ts";
import { partitionLeadership } from "./partition-leadership.ts";
import type { BrokerServices } from "./services.ts";

const LATEST = -1;
const EARLIEST = -2;
const MAX_TIMESTAMP = -3;
const EARLIEST_LOCAL = -4;
const READ_COMMITTED = 1;

export function listOffsetsHandler(services: BrokerServices): Handler<ListOffsetsRequest, ListOffsetsResponseInit> {
  const { partitions, topics, ownership } = services;

  const answer = async (
    topic: string,
    partitionIndex: number,
    timestamp: number,
    readCommitted: boolean,
    currentLeaderEpoch: number,
  ): Promise<ListOffsetsResponse_ListOffsetsPartitionResponseInit> => {
    const error = (errorCode: number) => ({ partitionIndex, errorCode, timestamp: -1, offset: -1, leaderEpoch: -1 });
    const record = topics.get(topic);
    if (record === undefined || partitionIndex < 0 || partitionIndex >= record.partitions) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    // Refused at open for damaged data (partitions.ts): its offsets are not known.
    if (partitions.refusal(topic, partitionIndex) !== undefined) return error(ErrorCode.KAFKA_STORAGE_ERROR);
    const leadership = partitionLeadership(ownership, topic, partitionIndex, currentLeaderEpoch);
    if (leadership.kind === "refused") return error(leadership.errorCode);
    const partition = await partitions.get(topic, partitionIndex);
    // Closing: its topic is being deleted; the log would refuse the read.
    if (!partition || partition.closing) return error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
    const history = partition.leaderEpochHistory;
    const found = (offset: number, ts: number) =>
      offset < 0
        ? { partitionIndex, errorCode: ErrorCode.NONE, timestamp: -1, offset: -1, leaderEpoch: -1 }
        : { partitionIndex, errorCode: ErrorCode.NONE, timestamp: ts, offset, leaderEpoch: history.epochOfOffset(offset) };
    const readableEnd = readCommitted ? partition.lastStableOffset : partition.highWatermark;
    switch (timestamp) {
      case LATEST:
        return { partitionIndex, errorCode: ErrorCode.NONE, timestamp: -1, offset: readableEnd, leaderEpoch: leadership.epoch };
      case EARLIEST:
      case EARLIEST_LOCAL:
        return found(partition.log.logStartOffset, -1);
      case MAX_TIMESTAMP: {
        const max = await partition.log.maxTimestampOffset();
        return max && max.offset < readableEnd ? found(max.offset, max.timestampMs) : found(-1, -1);
      }
      default: {
        if (timestamp < 0) return error(ErrorCode.INVALID_REQUEST);
        const hit = await partition.log.offsetForTimestamp(timestamp);
        return hit && hit.offset < readableEnd ? found(Math.max(hit.offset, partition.log.logStartOffset), hit.timestampMs) : found(-1, -1);
      }
    }
  };

  return {
    apiKey: 2,
    minVersion: 1,
    maxVersion: 8,
    async handle(request, ctx) {
      const readCommitted = ctx.apiVersion >= 2 && request.isolationLevel === READ_COMMITTED;
      // Before v4 the request carries no current epoch: it decodes as -1, no check.
      const describable = services.authorizer.allowedNames(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, request.topics.map((t) => t.name));
      return {
        throttleTimeMs: 0,
        topics: await Promise.all(
          request.topics.map(async (t) => ({
            name: t.name,
            partitions: await Promise.all(t.partitions.map((p) => !describable.has(t.name)
              ? { partitionIndex: p.partitionIndex, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp: -1, offset: -1, leaderEpoch: -1 }
              : answer(t.name, p.partitionIndex, p.timestamp, readCommitted, p.currentLeaderEpoch))),
          })),
        ),
      };
    },
    errorResponse(request, errorCode) {
      return {
        topics: request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode, timestamp: -1, offset: -1 })),
        })),
      };
    },
  };
}
