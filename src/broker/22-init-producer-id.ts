/**
 * InitProducerId (key 22), versions 0-5 — the idempotent producer's form (no transactional id).
 *
 * Hands out a fresh producer id at epoch 0 from a block reserved durably on the data directory before any
 * id in it is used, so ids are unique across brokers and restarts. If the reservation cannot be made
 * durable the answer is COORDINATOR_LOAD_IN_PROGRESS (retriable, as Apache's ProducerIdManager answers
 * when no block is ready) — never an id from an unreserved block. No timeout validation: the idempotent
 * producer sends Integer.MAX_VALUE. v3+ may carry the caller's producer id and epoch; for an idempotent
 * producer Apache ignores them and hands out a new id (epoch bump after sequence trouble, KIP-360), and
 * only refuses a half-set pair (one -1, the other not) with INVALID_REQUEST. kafkajs sends this to the
 * broker named as controller in Metadata; every broker answers it.
 *
 * With a transactional id, the transaction coordinator answers (txn-coordinator.ts, the decision in
 * domain/txn/coordinator.ts initProducerId): INVALID_REQUEST for an empty id, INVALID_TRANSACTION_TIMEOUT
 * for a timeout <= 0 or above transaction.max.timeout.ms, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS;
 * a new id gets a new producer id at epoch 0; a known one the same producer id at epoch + 1 (every older
 * session is fenced, on every local partition and through the fence log), or a new producer id once the
 * epoch is exhausted; an open transaction of the old session is fenced and aborted and the answer is
 * CONCURRENT_TRANSACTIONS (the client retries and gets the bumped epoch), as during a decision (Prepare*).
 * v3+ with the caller's producer id and epoch follows Apache's rules (a retry of a bump gets the current
 * epoch back; anything else that does not match is PRODUCER_FENCED). PRODUCER_FENCED is answered as
 * INVALID_PRODUCER_EPOCH before v4. The answer comes once the new state is durable.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { API_KEY, rewriteForVersion } from "../domain/txn/coordinator.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { InitProducerIdRequest } from "../protocol/generated/init-producer-id-request.ts";
import type { InitProducerIdResponseInit } from "../protocol/generated/init-producer-id-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function initProducerIdHandler(services: BrokerServices): Handler<InitProducerIdRequest, InitProducerIdResponseInit> {
  const { producerIds, log, txn } = services;
  return {
    apiKey: 22,
    minVersion: 0,
    maxVersion: 5,
    async handle(request, ctx) {
      // Authorization (broker/authorizer.ts), as Apache 4.1's KafkaApis, before anything else: WRITE on the
      // transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
      const { authorizer } = services;
      if (request.transactionalId !== null) {
        if (!authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId)) return this.errorResponse(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ctx.apiVersion);
      } else if (!authorizer.allows(ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) && !authorizer.allowsSomeResource(ctx, AclOperation.WRITE, ResourceType.TOPIC)) {
        return this.errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.apiVersion);
      }
      if (ctx.apiVersion >= 3 && (request.producerId === -1) !== (request.producerEpoch === -1)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_REQUEST, producerId: -1, producerEpoch: -1 };
      }
      if (request.transactionalId !== null) {
        const answer = await txn.initProducerId({
          transactionalId: request.transactionalId,
          timeoutMs: request.transactionTimeoutMs,
          producerId: ctx.apiVersion >= 3 ? request.producerId : -1,
          producerEpoch: ctx.apiVersion >= 3 ? request.producerEpoch : -1,
        });
        return { throttleTimeMs: 0, ...answer, errorCode: rewriteForVersion(API_KEY.INIT_PRODUCER_ID, ctx.apiVersion, answer.errorCode) };
      }
      const allocated = await producerIds.allocate();
      if (!allocated.ok) {
        log.warn("could not reserve a producer id block", { reason: allocated.reason });
        return { throttleTimeMs: 0, errorCode: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, producerId: -1, producerEpoch: -1 };
      }
      return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, producerId: allocated.producerId, producerEpoch: 0 };
    },
    errorResponse(_request, errorCode) {
      return { errorCode, producerId: -1, producerEpoch: -1 };
    },
  };
}
