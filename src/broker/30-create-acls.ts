/**
 * CreateAcls (key 30), versions 0-3: adds ACLs durably, one result per creation in request order, as
 * Apache Kafka's AclApis and AclControlManager answer.
 *
 * Needs ALTER on the cluster (every result CLUSTER_AUTHORIZATION_FAILED). Without an authorizer: every
 * result SECURITY_DISABLED "No Authorizer is configured.". Per creation, INVALID_REQUEST with Apache's
 * message for: a CLUSTER resource not named kafka-cluster, an empty name, a resource type, pattern type
 * (MATCH, ANY), operation (ANY) or permission (ANY) an ACL cannot have, an unknown code (Apache's request
 * refuses those as a whole; bunka answers each such creation), a principal that is not "Type:name".
 * Creating an ACL that exists succeeds and adds nothing.
 *
 * The valid creations are stored together under the metadata gate (metadata-mutations.ts): in cluster
 * mode one ACL change at a time across the brokers, announced to all before the gate is let go. A gate
 * that cannot be taken answers REQUEST_TIMED_OUT (retriable) for those creations, nothing stored.
 *
 * By version: v0 has no pattern type (LITERAL); v1 adds it; v2 is flexible; v3 is v2.
 */
import { type AclBinding, AclOperation, newBindingProblem, ResourceType, unknownElements } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { CreateAclsRequest, CreateAclsRequest_AclCreation } from "../protocol/generated/create-acls-request.ts";
import type { CreateAclsResponse_AclCreationResultInit, CreateAclsResponseInit } from "../protocol/generated/create-acls-response.ts";
import type { Handler } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

export function createAclsHandler(services: Pick<BrokerServices, "authorizer" | "mutations" | "log">): Handler<CreateAclsRequest, CreateAclsResponseInit> {
  const { authorizer } = services;
  const every = (request: CreateAclsRequest, errorCode: number, errorMessage: string | null): CreateAclsResponseInit => ({
    throttleTimeMs: 0,
    results: request.creations.map(() => ({ errorCode, errorMessage })),
  });
  return {
    apiKey: 30,
    minVersion: 0,
    maxVersion: 3,
    async handle(request, ctx) {
      if (!authorizer.allows(ctx, AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")) return every(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, null);
      if (!authorizer.enabled) return every(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.");
      const results: CreateAclsResponse_AclCreationResultInit[] = [];
      const valid: { at: number; binding: AclBinding }[] = [];
      for (const [at, creation] of request.creations.entries()) {
        const binding = bindingOf(creation);
        const problem = unknownElements(binding) ? `CreatableAcls contain unknown elements` : newBindingProblem(binding);
        // A success carries "" (Apache's generated default), not null.
        results.push(problem === null ? { errorCode: ErrorCode.NONE, errorMessage: "" } : { errorCode: ErrorCode.INVALID_REQUEST, errorMessage: problem });
        if (problem === null) valid.push({ at, binding });
      }
      if (valid.length === 0) return { throttleTimeMs: 0, results };
      const stored = await underGate(
        services,
        "CreateAcls",
        async () => {
          await authorizer.create(valid.map((v) => v.binding));
          return null;
        },
        (reason) => reason,
      );
      if (stored !== null) for (const { at } of valid) results[at] = { errorCode: ErrorCode.REQUEST_TIMED_OUT, errorMessage: stored };
      return { throttleTimeMs: 0, results };
    },
    errorResponse(request, errorCode) {
      return every(request, errorCode, null);
    },
  };
}

function bindingOf(creation: CreateAclsRequest_AclCreation): AclBinding {
  return {
    resourceType: creation.resourceType,
    resourceName: creation.resourceName,
    patternType: creation.resourcePatternType,
    principal: creation.principal,
    host: creation.host,
    operation: creation.operation,
    permissionType: creation.permissionType,
  };
}
