/**
 * ListOffsets (key 2), versions 1-8.
 *
 * Per partition, by timestamp: -2 earliest (the log start offset), -1 latest (the high watermark, or the
 * last stable offset for read_committed, v2+), -3 the offset of the largest timestamp (v7+), -4 the
 * earliest local offset (v8+; everything is local, so the log start offset), otherwise the first offset
 * whose timestamp is at or after the one asked for, through the time index; none gives offset -1 and
 * timestamp -1, as Apache does. Offsets beyond the readable end are never answered. The leader epoch is
 * always 0. Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
 * Difference from Apache, on purpose: for a compressed batch a timestamp lookup answers the batch's base
 * offset (the records are not decompressed), which can be a few records before Apache's answer; a
 * consumer seeking there reads from at most one batch earlier.
 * Deliberately not done: v0 (old-style offsets), tiered storage timestamps (-5).
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ListOffsetsRequest } from "../protocol/generated/list-offsets-request.ts";
import type {
  ListOffsetsResponseInit,
  ListOffsetsResponse_ListOffsetsPartitionResponseInit,
} from "../protocol/generated/list-offsets-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

const LATEST = -1;
const EARLIEST = -2;
const MAX_TIMESTAMP = -3;
const EARLIEST_LOCAL = -4;
const READ_COMMITTED = 1;

export function listOffsetsHandler(services: BrokerServices): Handler<ListOffsetsRequest, ListOffsetsResponseInit> {
  const { partitions } = services;

  const answer = async (
    topic: string,
    partitionIndex: number,
    timestamp: number,
    readCommitted: boolean,
  ): Promise<ListOffsetsResponse_ListOffsetsPartitionResponseInit> => {
    // Refused at open for damaged data (partitions.ts): its offsets are not known.
    if (partitions.refusal(topic, partitionIndex) !== undefined) {
      return { partitionIndex, errorCode: ErrorCode.KAFKA_STORAGE_ERROR, timestamp: -1, offset: -1, leaderEpoch: -1 };
    }
    const partition = await partitions.get(topic, partitionIndex);
    const found = (offset: number, ts: number) => ({ partitionIndex, errorCode: ErrorCode.NONE, timestamp: ts, offset, leaderEpoch: 0 });
    // Closing: its topic is being deleted; the log would refuse the read.
    if (!partition || partition.closing) {
      return { partitionIndex, errorCode: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, timestamp: -1, offset: -1, leaderEpoch: -1 };
    }
    const readableEnd = readCommitted ? partition.lastStableOffset : partition.highWatermark;
    switch (timestamp) {
      case LATEST:
        return found(readableEnd, -1);
      case EARLIEST:
      case EARLIEST_LOCAL:
        return found(partition.log.logStartOffset, -1);
      case MAX_TIMESTAMP: {
        const max = await partition.log.maxTimestampOffset();
        return max && max.offset < readableEnd ? found(max.offset, max.timestampMs) : found(-1, -1);
      }
      default: {
        if (timestamp < 0) {
          return { partitionIndex, errorCode: ErrorCode.INVALID_REQUEST, timestamp: -1, offset: -1, leaderEpoch: -1 };
        }
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
      return {
        throttleTimeMs: 0,
        topics: await Promise.all(
          request.topics.map(async (t) => ({
            name: t.name,
            partitions: await Promise.all(t.partitions.map((p) => answer(t.name, p.partitionIndex, p.timestamp, readCommitted))),
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
