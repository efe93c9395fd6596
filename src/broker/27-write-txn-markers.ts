/**
 * WriteTxnMarkers (key 27), versions 0-1.
 *
 * Writes COMMIT or ABORT control batches for the named producers to the named partitions, each durable
 * before the answer (acks=-1, as Apache appends markers). In Apache this is the coordinator-to-leader RPC;
 * bunka's coordinators never send it to each other (they write their own partitions' markers and queue the
 * others' on the shared volume), but operators' tools do: `kafka-transactions.sh abort` ends a hanging
 * transaction with it, using the producer id, epoch and coordinator epoch that DescribeProducers shows.
 *
 * Per partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; one another broker leads is
 * NOT_LEADER_OR_FOLLOWER; otherwise the partition's answer: NONE, INVALID_PRODUCER_EPOCH for an epoch older
 * than the producer's there, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch. As in Apache, the
 * answer has one entry per producer id (markers of the same producer are merged) and the transaction
 * coordinator's own state is not touched (a hanging transaction is one the coordinator does not know).
 * A marker whose producer id is negative (or beyond 2^53, which bunka cannot represent) or whose epoch is
 * not an int16 >= 0 is INVALID_REQUEST for all its partitions: Apache would append a marker that belongs to
 * no producer.
 *
 * By version: v1 is flexible.
 *
 * From another bunka broker (cluster mode, the inter-broker client's id `bunka-broker-<id>`) the request is
 * a wake-up, not markers to write (cluster/peer-marker-wake.ts): the coordinator queued the markers on the
 * shared volume first, and this broker applies that producer's queued files now, under the producer's lock,
 * then answers NONE for every partition named. It writes nothing from the request itself, so a late or
 * repeated one cannot end a later transaction; the coordinator looks at the files again either way.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: ALTER or CLUSTER_ACTION on the cluster,
 * else every partition CLUSTER_AUTHORIZATION_FAILED; the wake-up from another bunka broker too (its
 * principal needs CLUSTER_ACTION, README "Authorization").
 *
 * Deliberately not done: the __consumer_offsets special case (bunka keeps
 * offsets outside the log).
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { WriteTxnMarkersRequest } from "../protocol/generated/write-txn-markers-request.ts";
import type { WriteTxnMarkersResponseInit } from "../protocol/generated/write-txn-markers-response.ts";
import { PEER_CLIENT_ID_PREFIX } from "../cluster/peer-marker-wake.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

type Results = Map<number, Map<string, Map<number, number>>>;

function record(results: Results, producerId: number, topic: string, partition: number, errorCode: number): void {
  let topics = results.get(producerId);
  if (topics === undefined) results.set(producerId, (topics = new Map()));
  let partitions = topics.get(topic);
  if (partitions === undefined) topics.set(topic, (partitions = new Map()));
  partitions.set(partition, errorCode);
}

function toResponse(results: Results): WriteTxnMarkersResponseInit {
  return {
    markers: [...results].map(([producerId, topics]) => ({
      producerId,
      topics: [...topics].map(([name, partitions]) => ({
        name,
        partitions: [...partitions].map(([partitionIndex, errorCode]) => ({ partitionIndex, errorCode })),
      })),
    })),
  };
}

export function writeTxnMarkersHandler(services: BrokerServices): Handler<WriteTxnMarkersRequest, WriteTxnMarkersResponseInit> {
  const { topics, ownership, txn, log, queuedMarkers } = services;
  return {
    apiKey: 27,
    minVersion: 0,
    maxVersion: 1,
    async handle(request, ctx) {
      const { authorizer } = services;
      if (!authorizer.allows(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, { quiet: true }) && !authorizer.allows(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return this.errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.apiVersion);
      }
      const results: Results = new Map();
      if (queuedMarkers !== undefined && (ctx.header.clientId ?? "").startsWith(PEER_CLIENT_ID_PREFIX)) {
        const producers = new Set(request.markers.map((m) => m.producerId).filter((id) => Number.isSafeInteger(id) && id >= 0));
        await Promise.all([...producers].map((producerId) => queuedMarkers.applyProducer(producerId)));
        for (const marker of request.markers) {
          for (const t of marker.topics) for (const partition of t.partitionIndexes) record(results, marker.producerId, t.name, partition, ErrorCode.NONE);
        }
        return toResponse(results);
      }
      const writes: Promise<void>[] = [];
      for (const marker of request.markers) {
        const valid =
          Number.isSafeInteger(marker.producerId) && marker.producerId >= 0 && marker.producerEpoch >= 0 && marker.producerEpoch <= 32_767;
        for (const t of marker.topics) {
          const topic = topics.get(t.name);
          for (const partition of t.partitionIndexes) {
            if (!valid) {
              record(results, marker.producerId, t.name, partition, ErrorCode.INVALID_REQUEST);
              continue;
            }
            if (topic === undefined || partition < 0 || partition >= topic.partitions) {
              record(results, marker.producerId, t.name, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
              continue;
            }
            if (ownership.partitionLeader(t.name, partition) !== ownership.selfId) {
              record(results, marker.producerId, t.name, partition, ErrorCode.NOT_LEADER_OR_FOLLOWER);
              continue;
            }
            // Placeholder until the write answers, so that the answer keeps the request's order.
            record(results, marker.producerId, t.name, partition, ErrorCode.NONE);
            writes.push(
              txn
                .writeLocalMarker(t.name, partition, {
                  producerId: marker.producerId,
                  producerEpoch: marker.producerEpoch,
                  commit: marker.transactionResult,
                  coordinatorEpoch: marker.coordinatorEpoch,
                })
                .then((result) => {
                  record(results, marker.producerId, t.name, partition, result.ok ? ErrorCode.NONE : result.errorCode);
                  if (result.ok) log.info("wrote a transaction marker on request", { topic: t.name, partition, producerId: marker.producerId, commit: marker.transactionResult });
                }),
            );
          }
        }
      }
      await Promise.all(writes);
      return toResponse(results);
    },
    errorResponse(request, errorCode) {
      const results: Results = new Map();
      for (const marker of request.markers) {
        for (const t of marker.topics) for (const partition of t.partitionIndexes) record(results, marker.producerId, t.name, partition, errorCode);
      }
      return toResponse(results);
    },
  };
}
