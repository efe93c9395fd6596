/**
 * SyncGroup (key 14), versions 0-5.
 *
 * The second phase of a classic rebalance: the leader sends every member's assignment; each member's
 * SyncGroup is parked until then and answered with its own assignment (an empty one when the leader gave it
 * none). In a Stable group a SyncGroup is answered at once with the current assignment; during a new join
 * phase it is REBALANCE_IN_PROGRESS. Other errors as Apache: UNKNOWN_MEMBER_ID (unknown group or member, or
 * an Empty group), ILLEGAL_GENERATION, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (v5 type or name
 * differs from the group's), INVALID_GROUP_ID (empty id), NOT_COORDINATOR. Members that got their
 * JoinGroup answer but do not sync within the rebalance timeout are removed and the group rebalances.
 *
 * By version: v3 adds group.instance.id; v4 is flexible; v5 requires the protocol type and name (Apache
 * refuses a v5 request without them with INCONSISTENT_GROUP_PROTOCOL) and returns them.
 *
 * Authorization (broker/authorizer.ts): READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Deliberately not done: the durable write of the assignment that Apache makes before
 * answering (members are not persisted in bunka: after a restart they rejoin).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import type { SyncGroupRequest } from "../protocol/generated/sync-group-request.ts";
import type { SyncGroupResponseInit } from "../protocol/generated/sync-group-response.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function syncGroupHandler(services: BrokerServices): Handler<SyncGroupRequest, SyncGroupResponseInit> {
  const errorResponse = (errorCode: number): SyncGroupResponseInit => ({
    throttleTimeMs: 0,
    errorCode,
    protocolType: null,
    protocolName: null,
    assignment: new Uint8Array(0),
  });
  return {
    apiKey: 14,
    minVersion: 0,
    maxVersion: 5,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      if (version >= 5 && (request.protocolType === null || request.protocolName === null)) {
        return errorResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL);
      }
      // Authorization (broker/authorizer.ts): READ on the group, as Apache's KafkaApis.
      if (!services.authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return errorResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED);
      const outcome = await services.groups.syncGroup({
        groupId: request.groupId,
        memberId: request.memberId,
        generationId: request.generationId,
        groupInstanceId: version >= 3 ? request.groupInstanceId : null,
        protocolType: version >= 5 ? request.protocolType : null,
        protocolName: version >= 5 ? request.protocolName : null,
        assignments: request.assignments.map((a) => ({ memberId: a.memberId, assignment: a.assignment.slice() })),
      });
      return { throttleTimeMs: 0, ...outcome };
    },
    errorResponse(_request, errorCode) {
      return errorResponse(errorCode);
    },
  };
}
