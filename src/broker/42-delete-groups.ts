/**
 * DeleteGroups (key 42), versions 0-2.
 *
 * Deletes Empty groups with their committed offsets (and any offsets staged by open transactions), durably
 * before answering. Per group as Apache: GROUP_ID_NOT_FOUND for a group this coordinator does not know
 * (including ""), NON_EMPTY_GROUP while it has members, NOT_COORDINATOR for a group another broker
 * coordinates. Duplicate names are answered once (Apache de-duplicates them too).
 *
 * By version: v1 is v0 (throttling behaviour only); v2 is flexible.
 *
 * Authorization (broker/authorizer.ts): DELETE on each group, else that group GROUP_AUTHORIZATION_FAILED.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import type { DeleteGroupsRequest } from "../protocol/generated/delete-groups-request.ts";
import type { DeleteGroupsResponseInit } from "../protocol/generated/delete-groups-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function deleteGroupsHandler(services: BrokerServices): Handler<DeleteGroupsRequest, DeleteGroupsResponseInit> {
  return {
    apiKey: 42,
    minVersion: 0,
    maxVersion: 2,
    async handle(request, ctx) {
      const names = [...new Set(request.groupsNames)];
      const deletable = services.authorizer.allowedNames(ctx, AclOperation.DELETE, ResourceType.GROUP, names);
      const deleted = await services.groups.deleteGroups(names.filter((name) => deletable.has(name)));
      const denied = names.filter((name) => !deletable.has(name)).map((groupId) => ({ groupId, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED }));
      return { throttleTimeMs: 0, results: [...deleted, ...denied] };
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, results: [...new Set(request.groupsNames)].map((groupId) => ({ groupId, errorCode })) };
    },
  };
}
