/**
 * DescribeGroups (key 15), versions 0-5.
 *
 * Per group, as Apache's GroupMetadataManager.describeGroups: state, protocol type, and members (member
 * id, group.instance.id, client id, client host as "/address", assignment). The selected protocol and the
 * members' metadata are shown only for a Stable group. A group this coordinator does not know is described
 * as Dead with no error (Apache does the same; clients read it as "no such group"); a group another broker
 * coordinates is NOT_COORDINATOR.
 *
 * By version: v1 adds the throttle time; v3 adds authorized operations (with no authorizer, every
 * operation a group supports: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, as Apache reports
 * without an authorizer); v4 adds group.instance.id; v5 is flexible.
 *
 * Authorization (broker/authorizer.ts): DESCRIBE on each group, else that group GROUP_AUTHORIZATION_FAILED;
 * authorized operations (v3+) are the principal's.
 * Deliberately not done: KIP-848 consumer groups (ConsumerGroupDescribe).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeGroupsRequest } from "../protocol/generated/describe-groups-request.ts";
import type {
  DescribeGroupsResponseInit,
  DescribeGroupsResponse_DescribedGroupInit,
} from "../protocol/generated/describe-groups-response.ts";
import type { Handler } from "./handler.ts";
import { AUTHORIZED_OPERATIONS_OMITTED, type BrokerServices } from "./services.ts";

/** Apache's AclOperation codes a GROUP resource supports: READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11. */
export const GROUP_AUTHORIZED_OPERATIONS = [3, 6, 8, 10, 11].reduce((acc, op) => acc | (1 << op), 0);

export function describeGroupsHandler(services: BrokerServices): Handler<DescribeGroupsRequest, DescribeGroupsResponseInit> {
  const failed = (groupId: string, errorCode: number): DescribeGroupsResponse_DescribedGroupInit => ({
    errorCode,
    groupId,
    groupState: "",
    protocolType: "",
    protocolData: "",
    members: [],
    authorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  });
  return {
    apiKey: 15,
    minVersion: 0,
    maxVersion: 5,
    handle(request, ctx) {
      const includeOps = ctx.apiVersion >= 3 && request.includeAuthorizedOperations;
      return {
        throttleTimeMs: 0,
        groups: request.groups.map((groupId) => {
          if (!services.authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, groupId)) return failed(groupId, ErrorCode.GROUP_AUTHORIZATION_FAILED);
          const described = services.groups.describeGroup(groupId);
          if (described.group === null) return failed(groupId, described.errorCode);
          const g = described.group;
          return {
            errorCode: ErrorCode.NONE,
            groupId,
            groupState: g.groupState,
            protocolType: g.protocolType,
            protocolData: g.protocolData,
            members: g.members.map((m) => ({
              memberId: m.memberId,
              groupInstanceId: m.groupInstanceId,
              clientId: m.clientId,
              clientHost: m.clientHost,
              memberMetadata: m.memberMetadata,
              memberAssignment: m.memberAssignment,
            })),
            authorizedOperations: includeOps ? services.authorizer.authorizedOperations(ctx, ResourceType.GROUP, groupId) : AUTHORIZED_OPERATIONS_OMITTED,
          };
        }),
      };
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, groups: request.groups.map((groupId) => failed(groupId, errorCode)) };
    },
  };
}
