/**
 * DescribeAcls (key 29), versions 0-3: the ACLs a filter matches, grouped by resource pattern, as Apache
 * Kafka's AclApis answers.
 *
 * Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED). Without an authorizer: SECURITY_DISABLED
 * "No Authorizer is configured on the broker". A filter with an UNKNOWN element (a code Apache does not
 * know, or 0) is INVALID_REQUEST: Apache's request refuses it before its handler runs.
 *
 * By version: v0 has no pattern type (LITERAL; a filter of ANY reads as LITERAL, Apache's rule for v0);
 * v1 adds pattern types; v2 is flexible; v3 is v2.
 */
import { type AclBinding, type AclBindingFilter, AclOperation, PatternType, ResourceType, unknownElements } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeAclsRequest } from "../protocol/generated/describe-acls-request.ts";
import type { DescribeAclsResponse_DescribeAclsResourceInit, DescribeAclsResponseInit } from "../protocol/generated/describe-acls-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function describeAclsHandler(services: Pick<BrokerServices, "authorizer">): Handler<DescribeAclsRequest, DescribeAclsResponseInit> {
  const { authorizer } = services;
  return {
    apiKey: 29,
    minVersion: 0,
    maxVersion: 3,
    handle(request, ctx) {
      if (!authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, errorMessage: null, resources: [] };
      }
      if (!authorizer.enabled) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.SECURITY_DISABLED, errorMessage: "No Authorizer is configured on the broker", resources: [] };
      }
      const filter = describeFilterOf(request, ctx.apiVersion);
      if (unknownElements(filter)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_REQUEST, errorMessage: "DescribeAclsRequest contains UNKNOWN elements", resources: [] };
      }
      // A success carries "" as its message (Apache's generated default), not null.
      return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: "", resources: groupByResource(authorizer.acls(filter)) };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, errorMessage: null, resources: [] };
    },
  };
}

function describeFilterOf(request: DescribeAclsRequest, version: number): AclBindingFilter {
  const patternType = version === 0 && request.patternTypeFilter === PatternType.ANY ? PatternType.LITERAL : request.patternTypeFilter;
  return {
    resourceType: request.resourceTypeFilter,
    resourceName: request.resourceNameFilter,
    patternType,
    principal: request.principalFilter,
    host: request.hostFilter,
    operation: request.operation,
    permissionType: request.permissionType,
  };
}

/** One entry per resource pattern, in the order the ACLs were created (DescribeAclsResponse.aclsResources). */
function groupByResource(acls: readonly AclBinding[]): DescribeAclsResponse_DescribeAclsResourceInit[] {
  const byPattern = new Map<string, DescribeAclsResponse_DescribeAclsResourceInit & { acls: object[] }>();
  for (const acl of acls) {
    const key = JSON.stringify([acl.resourceType, acl.resourceName, acl.patternType]);
    let resource = byPattern.get(key);
    if (resource === undefined) {
      resource = { resourceType: acl.resourceType, resourceName: acl.resourceName, patternType: acl.patternType, acls: [] };
      byPattern.set(key, resource);
    }
    resource.acls.push({ principal: acl.principal, host: acl.host, operation: acl.operation, permissionType: acl.permissionType });
  }
  return [...byPattern.values()];
}
