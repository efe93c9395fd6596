/**
 * DescribeTransactions (key 65), version 0.
 *
 * Describes transactional ids this broker coordinates, each on its own (Apache's
 * TransactionCoordinator.handleDescribeTransactions): the state by Apache's name (Empty, Ongoing,
 * PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), the transaction timeout, the start time of the
 * open or last transaction (-1 before the first), the producer id and epoch, and the partitions of the open
 * (or decided, not yet completed) transaction by topic. Per id: INVALID_REQUEST for an empty one,
 * NOT_COORDINATOR for an id of a slot this broker does not own, COORDINATOR_LOAD_IN_PROGRESS while loading,
 * TRANSACTIONAL_ID_NOT_FOUND for an unknown (or expired) one; COORDINATOR_NOT_AVAILABLE while shutting down.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: DESCRIBE on the transactional id, else
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the topics the principal may not DESCRIBE are left out.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeTransactionsRequest } from "../protocol/generated/describe-transactions-request.ts";
import type { DescribeTransactionsResponseInit } from "../protocol/generated/describe-transactions-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function describeTransactionsHandler(services: BrokerServices): Handler<DescribeTransactionsRequest, DescribeTransactionsResponseInit> {
  const { txn } = services;
  return {
    apiKey: 65,
    minVersion: 0,
    maxVersion: 0,
    async handle(request, ctx) {
      const { authorizer } = services;
      const describeOne = async (id: string) => {
        if (!authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, id)) return this.errorResponse({ transactionalIds: [id] }, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ctx.apiVersion).transactionStates![0]!;
        const described = await txn.describe(id);
        return { ...described, topics: described.topics.filter((t) => authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic, { quiet: true })) };
      };
      return { throttleTimeMs: 0, transactionStates: await Promise.all(request.transactionalIds.map(describeOne)) };
    },
    errorResponse(request, errorCode) {
      return {
        throttleTimeMs: 0,
        transactionStates: request.transactionalIds.map((transactionalId) => ({
          errorCode,
          transactionalId,
          transactionState: "",
          transactionTimeoutMs: 0,
          transactionStartTimeMs: -1,
          producerId: -1,
          producerEpoch: -1,
          topics: [],
        })),
      };
    },
  };
}
