/**
 * AddOffsetsToTxn (key 25), versions 0-4.
 *
 * Records that the producer's transaction will commit offsets for a consumer group (the producer's
 * sendOffsetsToTransaction), answered once the change is durable. EndTxn's offset hook then commits or
 * discards exactly the offsets staged (TxnOffsetCommit) by this producer for the groups recorded here, and
 * TxnOffsetCommit refuses a group that was not added (TRANSACTION_ABORTABLE / INVALID_TXN_STATE).
 *
 * Answers as AddPartitionsToTxn's producer form (Apache runs the same coordinator path with the group's
 * __consumer_offsets partition): INVALID_REQUEST for an empty transactional id, NOT_COORDINATOR,
 * COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before
 * v2), CONCURRENT_TRANSACTIONS during a decision; otherwise NONE and the transaction is Ongoing.
 *
 * By version: v1 is v0 (throttling), v2 answers PRODUCER_FENCED, v3 is flexible, v4 may answer
 * TRANSACTION_ABORTABLE (never produced here).
 *
 * Authorization (broker/authorizer.ts): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
 * then READ on the group (GROUP_AUTHORIZATION_FAILED), as Apache's KafkaApis.
 *
 * Bunka records the group itself, not Apache's offsets partition of
 * the group, so two groups that would share an offsets partition in Apache are told apart here.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { API_KEY, rewriteForVersion } from "../domain/txn/coordinator.ts";
import type { AddOffsetsToTxnRequest } from "../protocol/generated/add-offsets-to-txn-request.ts";
import type { AddOffsetsToTxnResponseInit } from "../protocol/generated/add-offsets-to-txn-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function addOffsetsToTxnHandler(services: BrokerServices): Handler<AddOffsetsToTxnRequest, AddOffsetsToTxnResponseInit> {
  const { txn } = services;
  return {
    apiKey: 25,
    minVersion: 0,
    maxVersion: 4,
    async handle(request, ctx) {
      const { authorizer } = services;
      if (!authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId)) return { throttleTimeMs: 0, errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED };
      if (!authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return { throttleTimeMs: 0, errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED };
      const errorCode = await txn.addOffsets({
        transactionalId: request.transactionalId,
        producerId: request.producerId,
        producerEpoch: request.producerEpoch,
        groupId: request.groupId,
      });
      return { throttleTimeMs: 0, errorCode: rewriteForVersion(API_KEY.ADD_OFFSETS_TO_TXN, ctx.apiVersion, errorCode) };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode };
    },
  };
}
