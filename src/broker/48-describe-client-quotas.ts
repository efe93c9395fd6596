/**
 * DescribeClientQuotas (key 48), versions 0-1.
 *
 * bunka has no client quotas, so every valid filter matches nothing: the answer is an empty list. It is
 * served because `kafka-configs --describe --entity-type users` asks for a user's quotas before its SCRAM
 * credentials and fails when the broker does not know the API. The filter is validated as Apache Kafka
 * 4.1's ClientQuotasImage does, with its codes and messages (INVALID_REQUEST; UNSUPPORTED_VERSION for an
 * entity type other than user, client-id and ip). Altering quotas (AlterClientQuotas) is not served.
 * Authorization (broker/authorizer.ts): DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeClientQuotasRequest } from "../protocol/generated/describe-client-quotas-request.ts";
import type { DescribeClientQuotasResponseInit } from "../protocol/generated/describe-client-quotas-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

const ENTITY_TYPES = ["user", "client-id", "ip"];
const MATCH_EXACT = 0;
const MATCH_DEFAULT = 1;
const MATCH_SPECIFIED = 2;

/** Apache's refusal of a filter, or undefined when it is valid. */
export function quotaFilterProblem(request: DescribeClientQuotasRequest): { errorCode: number; errorMessage: string } | undefined {
  const invalid = (errorMessage: string) => ({ errorCode: ErrorCode.INVALID_REQUEST, errorMessage });
  const seen = new Set<string>();
  for (const c of request.components) {
    if (c.entityType === "") return invalid("Invalid empty entity type.");
    if (seen.has(c.entityType)) return invalid(`Entity type ${c.entityType} cannot appear more than once in the filter.`);
    if (!ENTITY_TYPES.includes(c.entityType)) return { errorCode: ErrorCode.UNSUPPORTED_VERSION, errorMessage: `Unsupported entity type ${c.entityType}` };
    if (c.matchType === MATCH_EXACT) {
      if (c.match === null) return invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.");
    } else if (c.matchType === MATCH_DEFAULT) {
      if (c.match !== null) return invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.");
    } else if (c.matchType === MATCH_SPECIFIED) {
      if (c.match !== null) return invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.");
    } else {
      return invalid(`Unknown match type ${c.matchType}`);
    }
    seen.add(c.entityType);
  }
  if (seen.has("ip") && (seen.has("user") || seen.has("client-id"))) {
    return invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.");
  }
  return undefined;
}

export function describeClientQuotasHandler(services: Pick<BrokerServices, "authorizer">): Handler<DescribeClientQuotasRequest, DescribeClientQuotasResponseInit> {
  return {
    apiKey: 48,
    minVersion: 0,
    maxVersion: 1,
    handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, errorMessage: null, entries: null };
      }
      const problem = quotaFilterProblem(request);
      if (problem !== undefined) return { throttleTimeMs: 0, ...problem, entries: null };
      // "" rather than null, as Apache's response data default sends it.
      return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, errorMessage: "", entries: [] };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, errorMessage: null, entries: null };
    },
  };
}
