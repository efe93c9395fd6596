/**
 * EndTxn (key 26), versions 0-4.
 *
 * Commits or aborts the producer's transaction (docs/architecture.md, "Transactions and idempotence"): Ongoing
 * -> PrepareCommit / PrepareAbort is made durable with the transaction's partitions and groups before any
 * marker exists; then the staged offsets of its groups are committed or discarded, the markers are appended to
 * the partitions this broker leads (durably) and queued for the leaders of the others, Complete* is made
 * durable, and only then is the producer answered. If a marker cannot be written yet (a retriable partition
 * error), the decision is already durable: the answer is NONE, as Apache answers once its PrepareCommit is
 * written, and the coordinator completes the transaction in the background (requests meanwhile get
 * CONCURRENT_TRANSACTIONS).
 *
 * Errors (TransactionCoordinator.endTransaction for transaction version 1): INVALID_REQUEST for an empty
 * transactional id; NOT_COORDINATOR; COORDINATOR_LOAD_IN_PROGRESS; INVALID_PRODUCER_ID_MAPPING for an unknown
 * id or another producer id; PRODUCER_FENCED for any other epoch (INVALID_PRODUCER_EPOCH before v2). A retry
 * finds the matching Complete* (NONE), the matching Prepare* (CONCURRENT_TRANSACTIONS, retriable), or the
 * opposite direction or Empty (INVALID_TXN_STATE).
 *
 * By version: v1 is v0 (throttling), v2 answers PRODUCER_FENCED, v3 is flexible, v4 may answer
 * TRANSACTION_ABORTABLE (never produced here).
 *
 * Deliberately not done: v5 (transaction version 2, KIP-890 part 2: an epoch bump per transaction; the
 * broker does not advertise the transaction.version feature).
 * Authorization (broker/authorizer.ts): WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { API_KEY, rewriteForVersion } from "../domain/txn/coordinator.ts";
import type { EndTxnRequest } from "../protocol/generated/end-txn-request.ts";
import type { EndTxnResponseInit } from "../protocol/generated/end-txn-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function endTxnHandler(services: BrokerServices): Handler<EndTxnRequest, EndTxnResponseInit> {
  const { txn } = services;
  return {
    apiKey: 26,
    minVersion: 0,
    maxVersion: 4,
    async handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producerId: -1, producerEpoch: -1 };
      }
      const answer = await txn.endTxn({
        transactionalId: request.transactionalId,
        producerId: request.producerId,
        producerEpoch: request.producerEpoch,
        commit: request.committed,
      });
      return {
        throttleTimeMs: 0,
        errorCode: rewriteForVersion(API_KEY.END_TXN, ctx.apiVersion, answer.errorCode),
        producerId: answer.producerId,
        producerEpoch: answer.producerEpoch,
      };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, producerId: -1, producerEpoch: -1 };
    },
  };
}
