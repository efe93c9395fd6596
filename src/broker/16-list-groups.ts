/**
 * ListGroups (key 16), versions 0-5.
 *
 * Every group this broker coordinates, with its protocol type ("" for a simple group that only commits
 * offsets). v4 adds the state of each group and a states filter (matched case-insensitively, as Apache);
 * v5 adds the group type ("classic": every group here uses the classic protocol) and a types filter
 * (case-insensitive; a filter without "classic" lists nothing). v3 is flexible.
 *
 * Authorization (broker/authorizer.ts), as Apache: every group with DESCRIBE on the cluster, else only the
 * groups the principal may DESCRIBE.
 * Deliberately not done: KIP-848 consumer groups and share groups.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ListGroupsRequest } from "../protocol/generated/list-groups-request.ts";
import type { ListGroupsResponseInit } from "../protocol/generated/list-groups-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function listGroupsHandler(services: BrokerServices): Handler<ListGroupsRequest, ListGroupsResponseInit> {
  return {
    apiKey: 16,
    minVersion: 0,
    maxVersion: 5,
    handle(request, ctx) {
      const version = ctx.apiVersion;
      const { authorizer } = services;
      const everyGroup = authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, { quiet: true });
      const groups = services.groups
        .listGroups(version >= 4 ? request.statesFilter : [], version >= 5 ? request.typesFilter : [])
        .filter((g) => everyGroup || authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.groupId, { quiet: true }));
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.NONE,
        groups: groups.map((g) => ({ groupId: g.groupId, protocolType: g.protocolType, groupState: g.groupState, groupType: g.groupType })),
      };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, groups: [] };
    },
  };
}
