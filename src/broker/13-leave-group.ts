/**
 * LeaveGroup (key 13), versions 0-5.
 *
 * Removes members from a classic group, which then rebalances (or completes its join phase without them).
 * A member named only by group.instance.id (member id "") is removed administratively; a pending member
 * (between MEMBER_ID_REQUIRED and its second join) simply goes. Per member as Apache: UNKNOWN_MEMBER_ID
 * (unknown member, or every member of an unknown group), FENCED_INSTANCE_ID (instance id held by another
 * member id); top level: INVALID_GROUP_ID (empty id), NOT_COORDINATOR.
 *
 * By version: v0-v2 carry one member id and answer one error code (Apache's LeaveGroupResponse puts the
 * top-level error there, else the member's); v3 leaves a batch of members with group.instance.id and
 * answers per member; v4 is flexible; v5 adds a reason per member (logged by Apache, ignored here).
 *
 * Authorization (broker/authorizer.ts): READ on the group, else GROUP_AUTHORIZATION_FAILED.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { LeaveGroupRequest } from "../protocol/generated/leave-group-request.ts";
import type { LeaveGroupResponseInit } from "../protocol/generated/leave-group-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function leaveGroupHandler(services: BrokerServices): Handler<LeaveGroupRequest, LeaveGroupResponseInit> {
  return {
    apiKey: 13,
    minVersion: 0,
    maxVersion: 5,
    handle(request, ctx) {
      const version = ctx.apiVersion;
      // Authorization (broker/authorizer.ts): READ on the group, as Apache's KafkaApis.
      if (!services.authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return this.errorResponse(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, ctx.apiVersion);
      const members =
        version >= 3
          ? request.members.map((m) => ({ memberId: m.memberId, groupInstanceId: m.groupInstanceId }))
          : [{ memberId: request.memberId, groupInstanceId: null }];
      const outcome = services.groups.leaveGroup(request.groupId, members);
      if (version <= 2) {
        const memberError = outcome.members.find((m) => m.errorCode !== ErrorCode.NONE)?.errorCode ?? ErrorCode.NONE;
        return { throttleTimeMs: 0, errorCode: outcome.errorCode !== ErrorCode.NONE ? outcome.errorCode : memberError };
      }
      return { throttleTimeMs: 0, errorCode: outcome.errorCode, members: outcome.members };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, members: [] };
    },
  };
}
