/**
 * OffsetDelete (key 47), version 0.
 *
 * Deletes a group's committed offsets for some partitions (and any offset an open transaction staged for
 * them), durably before answering. As Apache: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION;
 * a topic one of the group's members subscribes to (read from the consumer protocol metadata of its
 * JoinGroup) is GROUP_SUBSCRIBED_TO_TOPIC for all its partitions; at the top level GROUP_ID_NOT_FOUND for
 * an unknown group, NON_EMPTY_GROUP for an active group of another protocol type than "consumer" (its
 * subscriptions cannot be known), INVALID_GROUP_ID for "", NOT_COORDINATOR. With a top-level error the
 * answer has no topics (Apache's OffsetDeleteResponse.Builder.merge keeps only the coordinator's answer).
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: DELETE on the group (else the top-level
 * GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { OffsetDeleteRequest } from "../protocol/generated/offset-delete-request.ts";
import type { OffsetDeleteResponseInit } from "../protocol/generated/offset-delete-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function offsetDeleteHandler(services: BrokerServices): Handler<OffsetDeleteRequest, OffsetDeleteResponseInit> {
  const { topics, groups } = services;
  return {
    apiKey: 47,
    minVersion: 0,
    maxVersion: 0,
    async handle(request, ctx) {
      const { authorizer } = services;
      if (!authorizer.allows(ctx, AclOperation.DELETE, ResourceType.GROUP, request.groupId)) return { errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, throttleTimeMs: 0, topics: [] };
      const readable = authorizer.allowedNames(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics.map((t) => t.name));
      if (request.groupId === "") return { errorCode: ErrorCode.INVALID_GROUP_ID, throttleTimeMs: 0, topics: [] };
      const unknown = new Map<string, Set<number>>();
      const valid: { name: string; partitions: number[] }[] = [];
      for (const t of request.topics) {
        const topic = topics.get(t.name);
        const ok: number[] = [];
        for (const p of t.partitions) {
          if (!readable.has(t.name)) continue;
          if (topic === undefined || p.partitionIndex < 0 || p.partitionIndex >= topic.partitions) {
            if (!unknown.has(t.name)) unknown.set(t.name, new Set());
            unknown.get(t.name)!.add(p.partitionIndex);
          } else {
            ok.push(p.partitionIndex);
          }
        }
        if (ok.length > 0) valid.push({ name: t.name, partitions: ok });
      }
      const outcome = await groups.deleteOffsets(request.groupId, valid);
      if (outcome.errorCode !== ErrorCode.NONE) return { errorCode: outcome.errorCode, throttleTimeMs: 0, topics: [] };
      const byTopic = new Map(outcome.topics.map((t) => [t.name, new Map(t.partitions.map((p) => [p.partition, p.errorCode]))]));
      return {
        errorCode: ErrorCode.NONE,
        throttleTimeMs: 0,
        topics: request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => ({
            partitionIndex: p.partitionIndex,
            errorCode: !readable.has(t.name)
              ? ErrorCode.TOPIC_AUTHORIZATION_FAILED
              : unknown.get(t.name)?.has(p.partitionIndex) ? ErrorCode.UNKNOWN_TOPIC_OR_PARTITION : (byTopic.get(t.name)?.get(p.partitionIndex) ?? ErrorCode.NONE),
          })),
        })),
      };
    },
    errorResponse(_request, errorCode) {
      return { errorCode, throttleTimeMs: 0, topics: [] };
    },
  };
}
