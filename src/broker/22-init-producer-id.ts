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
 * Not yet: a transactional id (the transaction coordinator), answered COORDINATOR_NOT_AVAILABLE until it
 * exists; clients cannot reach it anyway, since FindCoordinator for transactions is not served yet.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { InitProducerIdRequest } from "../protocol/generated/init-producer-id-request.ts";
import type { InitProducerIdResponseInit } from "../protocol/generated/init-producer-id-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function initProducerIdHandler(services: BrokerServices): Handler<InitProducerIdRequest, InitProducerIdResponseInit> {
  const { producerIds, log } = services;
  return {
    apiKey: 22,
    minVersion: 0,
    maxVersion: 5,
    async handle(request, ctx) {
      if (ctx.apiVersion >= 3 && (request.producerId === -1) !== (request.producerEpoch === -1)) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.INVALID_REQUEST, producerId: -1, producerEpoch: -1 };
      }
      if (request.transactionalId !== null) {
        return { throttleTimeMs: 0, errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, producerId: -1, producerEpoch: -1 };
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
