/**
 * ListTransactions (key 66), versions 0-1.
 *
 * Lists the transactional ids of the slots this broker coordinates (Apache's
 * TransactionStateManager.listTransactionStates): transactional id, producer id and state name. Filters
 * combine: states (empty: all; a name Apache does not know is returned in unknownStateFilters and matches
 * nothing), producer ids (empty: all), and from v1 a duration: only transactions whose start lies more than
 * that many milliseconds back (negative: no filter; an id that never started a transaction has start -1,
 * so it passes, as in Apache). COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads,
 * COORDINATOR_NOT_AVAILABLE while it shuts down.
 *
 * By version: v1 adds the duration filter.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: only the transactional ids the principal
 * may DESCRIBE are listed.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import type { ListTransactionsRequest } from "../protocol/generated/list-transactions-request.ts";
import type { ListTransactionsResponseInit } from "../protocol/generated/list-transactions-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function listTransactionsHandler(services: BrokerServices): Handler<ListTransactionsRequest, ListTransactionsResponseInit> {
  const { txn } = services;
  return {
    apiKey: 66,
    minVersion: 0,
    maxVersion: 1,
    async handle(request, ctx) {
      const listed = await txn.list(request.stateFilters, request.producerIdFilters, ctx.apiVersion >= 1 ? request.durationFilter : -1);
      const { authorizer } = services;
      const transactionStates = listed.transactionStates.filter((t) => authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactionalId, { quiet: true }));
      return { throttleTimeMs: 0, ...listed, transactionStates };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, unknownStateFilters: [], transactionStates: [] };
    },
  };
}
