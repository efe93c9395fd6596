/**
 * DescribeUserScramCredentials (key 50), version 0.
 *
 * The mechanisms and iterations of each user's SCRAM credentials (never the salt or keys), as Apache
 * Kafka 4.1's metadata image answers: null or no users lists every user with a credential; a user named
 * twice is DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND, each with Apache's message
 * (domain/security/scram-credentials.ts). `kafka-configs --describe --entity-type users` reads it.
 * Authorization (broker/authorizer.ts): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeUserScramCredentialsRequest } from "../protocol/generated/describe-user-scram-credentials-request.ts";
import type { DescribeUserScramCredentialsResponseInit } from "../protocol/generated/describe-user-scram-credentials-response.ts";
import type { Handler } from "./handler.ts";
import type { ScramCredentialService } from "./scram-credentials.ts";
import type { BrokerServices } from "./services.ts";

export function describeUserScramCredentialsHandler(services: BrokerServices, scram: ScramCredentialService): Handler<DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponseInit> {
  return {
    apiKey: 50,
    minVersion: 0,
    maxVersion: 0,
    handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, errorMessage: null, results: [] };
      }
      const users = request.users === null ? null : request.users.map((u) => u.name);
      return { throttleTimeMs: 0, errorCode: 0, errorMessage: "", results: scram.describe(users) };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, errorMessage: null, results: [] };
    },
  };
}
