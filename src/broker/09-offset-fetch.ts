/**
 * OffsetFetch (key 9), versions 0-9.
 *
 * A group's committed offsets, as durable: for each requested partition the offset, leader epoch and
 * metadata, or offset -1 and metadata "" without a commit (also for a group this coordinator does not
 * know, as Apache). A null topic list (v2+) means every partition the group has an offset for. With
 * require_stable (v7+), a partition for which an open transaction staged an offset is answered
 * UNSTABLE_OFFSET_COMMIT (the consumer retries until the transaction ends). NOT_COORDINATOR for a group
 * another broker coordinates.
 *
 * By version: v0 and v1 have no top-level error (a group error goes to every partition, as Apache's
 * OffsetFetchResponse does); v2 adds the top-level error and null topics; v3 the throttle time; v5 the
 * leader epoch; v6 is flexible; v7 adds require_stable; v8 batches groups (one result per group, each
 * with its own error); v9 adds the KIP-848 member id and epoch, which classic groups ignore.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: DESCRIBE on the group (else the group's
 * error GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic named (else TOPIC_AUTHORIZATION_FAILED for its
 * partitions, offset -1); for every partition (null topics) the topics not describable are left out.
 *
 * Deliberately not done: v0's ZooKeeper storage (v0 reads the coordinator too).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { OffsetFetchRequest } from "../protocol/generated/offset-fetch-request.ts";
import type {
  OffsetFetchResponseInit,
  OffsetFetchResponse_OffsetFetchResponseGroupInit,
} from "../protocol/generated/offset-fetch-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

interface GroupQuery {
  groupId: string;
  topics: { name: string; partitions: number[] }[] | null;
}

export function offsetFetchHandler(services: BrokerServices): Handler<OffsetFetchRequest, OffsetFetchResponseInit> {
  const queries = (request: OffsetFetchRequest, version: number): GroupQuery[] =>
    version >= 8
      ? request.groups.map((g) => ({ groupId: g.groupId, topics: g.topics === null ? null : g.topics.map((t) => ({ name: t.name, partitions: t.partitionIndexes })) }))
      : [{ groupId: request.groupId, topics: request.topics === null ? null : request.topics.map((t) => ({ name: t.name, partitions: t.partitionIndexes })) }];

  /** The single-group shape of v0-v7 from one group's result. */
  const single = (group: OffsetFetchResponse_OffsetFetchResponseGroupInit, version: number): OffsetFetchResponseInit => {
    const groupError = group.errorCode ?? ErrorCode.NONE;
    return {
      throttleTimeMs: 0,
      errorCode: groupError,
      topics: (group.topics ?? []).map((t) => ({
        name: t.name,
        partitions: (t.partitions ?? []).map((p) =>
          version < 2 && groupError !== ErrorCode.NONE
            ? { partitionIndex: p.partitionIndex, committedOffset: -1, committedLeaderEpoch: -1, metadata: "", errorCode: groupError }
            : { ...p },
        ),
      })),
    };
  };

  const failedGroup = (q: GroupQuery, errorCode: number): OffsetFetchResponse_OffsetFetchResponseGroupInit => ({
    groupId: q.groupId,
    errorCode,
    topics: (q.topics ?? []).map((t) => ({
      name: t.name,
      partitions: t.partitions.map((partitionIndex) => ({ partitionIndex, committedOffset: -1, committedLeaderEpoch: -1, metadata: "", errorCode })),
    })),
  });

  return {
    apiKey: 9,
    minVersion: 0,
    maxVersion: 9,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      const requireStable = version >= 7 && request.requireStable;
      const groups = await Promise.all(
        queries(request, version).map(async (q): Promise<OffsetFetchResponse_OffsetFetchResponseGroupInit> => {
          const { authorizer } = services;
          if (!authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, q.groupId)) {
            return { groupId: q.groupId, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, topics: [] };
          }
          const describable = authorizer.allowedNames(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, q.topics?.map((t) => t.name) ?? []);
          const asked = q.topics === null ? null : q.topics.filter((t) => describable.has(t.name));
          const outcome = await services.groups.fetchOffsets(q.groupId, asked, requireStable);
          if (outcome.errorCode !== ErrorCode.NONE) return { groupId: q.groupId, errorCode: outcome.errorCode, topics: [] };
          const shown = q.topics === null ? outcome.topics.filter((t) => authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, { quiet: true })) : outcome.topics;
          const denied = (q.topics ?? []).filter((t) => !describable.has(t.name));
          return {
            groupId: q.groupId,
            errorCode: ErrorCode.NONE,
            topics: [
              ...shown.map((t) => ({
              name: t.name,
              partitions: t.partitions.map((p) => ({
                partitionIndex: p.partition,
                committedOffset: p.offset,
                committedLeaderEpoch: p.leaderEpoch,
                metadata: p.metadata,
                errorCode: p.errorCode,
              })),
            })),
              ...denied.map((t) => ({
                name: t.name,
                partitions: t.partitions.map((partitionIndex) => ({
                  partitionIndex,
                  committedOffset: -1,
                  committedLeaderEpoch: -1,
                  metadata: "",
                  errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                })),
              })),
            ],
          };
        }),
      );
      if (version >= 8) return { throttleTimeMs: 0, groups };
      const group = groups[0]!;
      // v0/v1 put a group error on the partitions asked for; the coordinator returned none for them.
      if (version < 2 && group.errorCode !== ErrorCode.NONE) return single(failedGroup(queries(request, version)[0]!, group.errorCode!), version);
      return single(group, version);
    },
    errorResponse(request, errorCode, version) {
      const failed = queries(request, version).map((q) => failedGroup(q, errorCode));
      if (version >= 8) return { throttleTimeMs: 0, groups: failed };
      return single(failed[0]!, version);
    },
  };
}
