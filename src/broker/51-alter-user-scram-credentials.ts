/**
 * AlterUserScramCredentials (key 51), version 0.
 *
 * Upserts and deletes users' SCRAM credentials. The client sends the salt and the salted password (the
 * password never leaves it); the broker keeps the stored key and server key derived from them, durably
 * and shared by every broker of the cluster (broker/scram-credentials.ts), before it answers. Apache
 * Kafka 4.1's validation and codes per user (domain/security/scram-credentials.ts): DUPLICATE_RESOURCE
 * for a user altered twice in one request, UNACCEPTABLE_CREDENTIAL for an empty name or iterations
 * outside 4096..16384, UNSUPPORTED_SASL_MECHANISM for a mechanism type other than 1 and 2,
 * RESOURCE_NOT_FOUND for deleting a credential that does not exist. `kafka-configs --alter --entity-type
 * users --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'` sends it.
 * Authorization (broker/authorizer.ts): ALTER on the cluster, else every user CLUSTER_AUTHORIZATION_FAILED.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { AlterUserScramCredentialsRequest } from "../protocol/generated/alter-user-scram-credentials-request.ts";
import type { AlterUserScramCredentialsResponseInit } from "../protocol/generated/alter-user-scram-credentials-response.ts";
import type { Handler } from "./handler.ts";
import type { ScramCredentialService } from "./scram-credentials.ts";
import type { BrokerServices } from "./services.ts";

export function alterUserScramCredentialsHandler(services: BrokerServices, scram: ScramCredentialService): Handler<AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponseInit> {
  return {
    apiKey: 51,
    minVersion: 0,
    maxVersion: 0,
    async handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)) return this.errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.apiVersion);
      // The request's bytes may share the frame's buffer: the credential keeps copies.
      const upsertions = request.upsertions.map((u) => ({ ...u, salt: u.salt.slice(), saltedPassword: u.saltedPassword.slice() }));
      const results = await scram.alter(services, request.deletions, upsertions);
      return { throttleTimeMs: 0, results };
    },
    errorResponse(request, errorCode) {
      const users = [...new Set([...request.deletions.map((d) => d.name), ...request.upsertions.map((u) => u.name)])];
      return { throttleTimeMs: 0, results: users.map((user) => ({ user, errorCode, errorMessage: null })) };
    },
  };
}
