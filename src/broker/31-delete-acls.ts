/**
 * DeleteAcls (key 31), versions 0-3: removes every ACL each filter matches, durably, and answers per
 * filter the ACLs it removed, as Apache Kafka's AclApis and AclControlManager answer.
 *
 * Needs ALTER on the cluster (every filter CLUSTER_AUTHORIZATION_FAILED). Without an authorizer: every
 * filter SECURITY_DISABLED "No Authorizer is configured.". A filter with an UNKNOWN element is
 * INVALID_REQUEST for every filter (Apache's request refuses the whole request). An ACL two filters
 * match is reported under both.
 *
 * Runs under the metadata gate as CreateAcls (30-create-acls.ts); a gate that cannot be taken answers
 * REQUEST_TIMED_OUT for every filter, nothing removed.
 *
 * By version: v0 has no pattern type (LITERAL; a filter of ANY reads as LITERAL, Apache's rule for v0);
 * v1 adds it; v2 is flexible; v3 is v2.
 */
import { type AclBindingFilter, AclOperation, PatternType, ResourceType, unknownElements } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DeleteAclsRequest, DeleteAclsRequest_DeleteAclsFilter } from "../protocol/generated/delete-acls-request.ts";
import type { DeleteAclsResponseInit } from "../protocol/generated/delete-acls-response.ts";
import type { Handler } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

export function deleteAclsHandler(services: Pick<BrokerServices, "authorizer" | "mutations" | "log">): Handler<DeleteAclsRequest, DeleteAclsResponseInit> {
  const { authorizer } = services;
  const every = (request: DeleteAclsRequest, errorCode: number, errorMessage: string | null): DeleteAclsResponseInit => ({
    throttleTimeMs: 0,
    filterResults: request.filters.map(() => ({ errorCode, errorMessage, matchingAcls: [] })),
  });
  return {
    apiKey: 31,
    minVersion: 0,
    maxVersion: 3,
    async handle(request, ctx) {
      if (!authorizer.allows(ctx, AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")) return every(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, null);
      if (!authorizer.enabled) return every(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.");
      const filters = request.filters.map((f) => filterOf(f, ctx.apiVersion));
      if (filters.some(unknownElements)) return every(request, ErrorCode.INVALID_REQUEST, "Filters contain UNKNOWN elements");
      return underGate(
        services,
        "DeleteAcls",
        async (): Promise<DeleteAclsResponseInit> => {
          const removed = await authorizer.delete(filters);
          return {
            throttleTimeMs: 0,
            filterResults: removed.map((acls) => ({
              errorCode: ErrorCode.NONE,
              errorMessage: null,
              matchingAcls: acls.map((acl) => ({ errorCode: ErrorCode.NONE, errorMessage: null, ...acl })),
            })),
          };
        },
        (reason) => every(request, ErrorCode.REQUEST_TIMED_OUT, reason),
      );
    },
    errorResponse(request, errorCode) {
      return every(request, errorCode, null);
    },
  };
}

function filterOf(filter: DeleteAclsRequest_DeleteAclsFilter, version: number): AclBindingFilter {
  const patternType = version === 0 && filter.patternTypeFilter === PatternType.ANY ? PatternType.LITERAL : filter.patternTypeFilter;
  return {
    resourceType: filter.resourceTypeFilter,
    resourceName: filter.resourceNameFilter,
    patternType,
    principal: filter.principalFilter,
    host: filter.hostFilter,
    operation: filter.operation,
    permissionType: filter.permissionType,
  };
}
