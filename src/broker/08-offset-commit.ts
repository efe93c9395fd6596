/**
 * OffsetCommit (key 8), versions 0-9.
 *
 * Commits a group's consumed offsets, answered once they are durable (__cluster/offsets/slot-N.journal,
 * group commit with other commits of the slot; storage/offset-store.ts). Checks, in Apache's order:
 * - per topic and partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (KafkaApis);
 * - the group (ClassicGroup.validateOffsetCommit): a commit with generation -1 and no member id is a
 *   "simple" commit, accepted only while the group is Empty (it creates an unknown group) and
 *   UNKNOWN_MEMBER_ID otherwise; a member commit needs the right member (UNKNOWN_MEMBER_ID,
 *   FENCED_INSTANCE_ID) and generation (ILLEGAL_GENERATION), and gets REBALANCE_IN_PROGRESS while its group
 *   completes a rebalance; a generation for an unknown group is ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from
 *   v9. A member commit also keeps the member's session alive;
 * - per partition: metadata longer than offset.metadata.max.bytes (4096) is OFFSET_METADATA_TOO_LARGE.
 * A write that fails is NOT_COORDINATOR (Apache's answer to a storage error of its coordinator log); a slot
 * that would outgrow its bound answers INVALID_COMMIT_OFFSET_SIZE.
 *
 * By version: v1 adds generation, member id and a per-partition commit timestamp; v2-v4 replace the
 * timestamp with a retention time (an explicit expiry for these offsets); v5 drops it; v6 adds the leader
 * epoch; v7 adds group.instance.id; v8 is flexible; v9 answers GROUP_ID_NOT_FOUND for an unknown group.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: READ on the group (else every partition
 * GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions,
 * before the topic is looked up).
 *
 * Deliberately not done: v0's ZooKeeper storage (v0 commits go to the coordinator too).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { OffsetCommitRequest } from "../protocol/generated/offset-commit-request.ts";
import type { OffsetCommitResponseInit } from "../protocol/generated/offset-commit-response.ts";
import type { OffsetCommitPartitionInput } from "./group-coordinator.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function offsetCommitHandler(services: BrokerServices): Handler<OffsetCommitRequest, OffsetCommitResponseInit> {
  const { topics, groups } = services;
  return {
    apiKey: 8,
    minVersion: 0,
    maxVersion: 9,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      const { authorizer } = services;
      if (!authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return this.errorResponse(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, version);
      const readable = authorizer.allowedNames(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics.map((t) => t.name));
      // One error code per requested partition, in request order; the valid ones go to the coordinator.
      const answer = request.topics.map((t) => ({ name: t.name, codes: t.partitions.map((): number => ErrorCode.NONE) }));
      const valid: OffsetCommitPartitionInput[] = [];
      const positions: [number, number][] = [];
      request.topics.forEach((t, ti) => {
        const topic = topics.get(t.name);
        t.partitions.forEach((p, pi) => {
          if (!readable.has(t.name)) {
            answer[ti]!.codes[pi] = ErrorCode.TOPIC_AUTHORIZATION_FAILED;
            return;
          }
          if (topic === undefined || p.partitionIndex < 0 || p.partitionIndex >= topic.partitions) {
            answer[ti]!.codes[pi] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
            return;
          }
          valid.push({
            topic: t.name,
            partition: p.partitionIndex,
            offset: p.committedOffset,
            leaderEpoch: version >= 6 ? p.committedLeaderEpoch : -1,
            metadata: p.committedMetadata,
            commitTimestampMs: version === 1 ? p.commitTimestamp : -1,
          });
          positions.push([ti, pi]);
        });
      });
      if (valid.length > 0) {
        const codes = await groups.commitOffsets({
          groupId: request.groupId,
          memberId: version >= 1 ? request.memberId : "",
          groupInstanceId: version >= 7 ? request.groupInstanceId : null,
          generationId: version >= 1 ? request.generationIdOrMemberEpoch : -1,
          retentionTimeMs: version >= 2 && version <= 4 ? request.retentionTimeMs : -1,
          apiVersion: version,
          partitions: valid,
        });
        codes.forEach((code, i) => {
          const [ti, pi] = positions[i]!;
          answer[ti]!.codes[pi] = code;
        });
      }
      return {
        throttleTimeMs: 0,
        topics: answer.map((t, ti) => ({
          name: t.name,
          partitions: t.codes.map((errorCode, pi) => ({ partitionIndex: request.topics[ti]!.partitions[pi]!.partitionIndex, errorCode })),
        })),
      };
    },
    errorResponse(request, errorCode) {
      return {
        throttleTimeMs: 0,
        topics: request.topics.map((t) => ({ name: t.name, partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode })) })),
      };
    },
  };
}
