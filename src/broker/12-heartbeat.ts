/**
 * Heartbeat (key 12), versions 0-4.
 *
 * Keeps a classic group member's session alive (session timeouts expire members that stop). Answers as
 * Apache: NONE in CompletingRebalance and Stable, REBALANCE_IN_PROGRESS while the group rebalances (the
 * member must rejoin), UNKNOWN_MEMBER_ID for an unknown group or member or an Empty group,
 * ILLEGAL_GENERATION, FENCED_INSTANCE_ID, INVALID_GROUP_ID (empty id), NOT_COORDINATOR.
 *
 * By version: v1 adds the throttle time; v3 adds group.instance.id; v4 is flexible.
 *
 * Authorization (broker/authorizer.ts): READ on the group, else GROUP_AUTHORIZATION_FAILED.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { HeartbeatRequest } from "../protocol/generated/heartbeat-request.ts";
import type { HeartbeatResponseInit } from "../protocol/generated/heartbeat-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function heartbeatHandler(services: BrokerServices): Handler<HeartbeatRequest, HeartbeatResponseInit> {
  return {
    apiKey: 12,
    minVersion: 0,
    maxVersion: 4,
    handle(request, ctx) {
      // Authorization (broker/authorizer.ts): READ on the group, as Apache's KafkaApis.
      if (!services.authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return this.errorResponse(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, ctx.apiVersion);
      const errorCode = services.groups.heartbeat({
        groupId: request.groupId,
        memberId: request.memberId,
        groupInstanceId: ctx.apiVersion >= 3 ? request.groupInstanceId : null,
        generationId: request.generationId,
      });
      return { throttleTimeMs: 0, errorCode };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode };
    },
  };
}
