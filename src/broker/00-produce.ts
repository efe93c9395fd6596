/**
 * Produce (key 0), versions 3-11 (RecordBatch v2 only; Apache 4.x serves 3+ as well).
 *
 * Per partition: the topic and partition must exist (UNKNOWN_TOPIC_OR_PARTITION) and be led here
 * (NOT_LEADER_OR_FOLLOWER), with this broker allowed to act at its leader epoch both before the append and
 * again once it is written or durable, before it is acknowledged (cluster mode: the lease is still valid;
 * docs/architecture.md, "Ownership and cluster mode"); the record set must be exactly one sound v2 batch (CORRUPT_MESSAGE for framing
 * and CRC, MESSAGE_TOO_LARGE above max.message.bytes, INVALID_RECORD for control batches from clients and
 * count mismatches, UNSUPPORTED_COMPRESSION_TYPE for zstd before v7). Idempotent batches are classified
 * against the producer's window before append: a retry is answered with its original offset and nothing is
 * written, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH. A transactional batch
 * for a partition that is not in the producer's ongoing transaction (the coordinator's verifier says so) is
 * refused as Apache 3.8+ refuses it: INVALID_TXN_STATE "Partition was not added to the transaction" up to v10,
 * TRANSACTION_ABORTABLE (no message) from v11. In cluster mode, a transactional batch whose coordinator is
 * another broker is first verified with that broker (broker/remote-txn-verifier.ts); when it cannot
 * answer, the partition is NOT_ENOUGH_REPLICAS (retriable, as Apache's leaders answer then) and nothing is
 * appended.
 *
 * acks=0 sends no response, and closes the connection when any partition failed (as Apache does: the
 * producer learns of the error by the disconnect and refreshes its metadata; without it, an acks=0
 * producer would write into an unknown partition forever without noticing). acks=1 answers once the batch
 * is written; acks=-1 once it is durable (fsync,
 * shared by every append that arrived meanwhile). Any other acks is INVALID_REQUIRED_ACKS for every
 * partition. By version: v5+ carries the log start offset, v8+ per-batch record errors and an error
 * message, v10+ tagged leader hints (not sent: clients refresh their metadata on NOT_LEADER_OR_FOLLOWER).
 * The records inside the batch are checked as Apache's LogValidator checks them (INVALID_RECORD, with
 * record errors for keyless records on a compacted topic; INVALID_TIMESTAMP for CreateTime records outside
 * message.timestamp.before/after.max.ms of now), and a topic whose compression.type names a codec stores
 * the batch recompressed in it (protocol/records/produce-validation.ts). Deliberately not done: quotas.
 * Authorization (broker/authorizer.ts): transactional records need a transactional id, with or without
 * an authorizer, and WRITE on it (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic
 * WRITE (TOPIC_AUTHORIZATION_FAILED), as Apache's KafkaApis.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { recordTimestampProblem, resolveTopicConfigWithDefaults, type TopicConfig } from "../domain/topic-config.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ProduceRequest } from "../protocol/generated/produce-request.ts";
import type {
  ProduceResponseInit,
  ProduceResponse_PartitionProduceResponseInit,
} from "../protocol/generated/produce-response.ts";
import { prepareProducedBatch } from "../protocol/records/produce-validation.ts";
import { CompressionCodec, errorCodeOfProblem, TRANSACTIONAL_BIT, validateProduceRecordSet } from "../protocol/records/record-batch.ts";
import { CloseConnection, type Handler } from "./handler.ts";
import { NO_LEADER_EPOCH, partitionLeadership } from "./partition-leadership.ts";
import { partitionKey, type RefusedPartition } from "./remote-txn-verifier.ts";
import type { BrokerServices } from "./services.ts";

interface PartitionAnswer {
  response: ProduceResponse_PartitionProduceResponseInit;
  /** Settles when the append is written (acks=1) ... */
  written?: Promise<void>;
  /** ... and this partition's log, for the acks=-1 fsync. */
  flush?: () => Promise<void>;
  /**
   * The answer instead of the acknowledgement when this broker no longer leads the partition at the epoch
   * it appended under, asked once the append is written (acks=1) or durable (acks=-1): a lease that lapsed
   * meanwhile means a successor may have taken over, so the answer is a retriable error.
   */
  deposed?: () => ProduceResponse_PartitionProduceResponseInit | undefined;
}

const NOT_LEADER_MESSAGE = "This server is not the leader for that topic-partition.";
const NOTHING_REFUSED: ReadonlyMap<string, RefusedPartition> = new Map();

const failure = (index: number, errorCode: number, errorMessage: string | null): ProduceResponse_PartitionProduceResponseInit => ({
  index,
  errorCode,
  baseOffset: -1,
  logAppendTimeMs: -1,
  logStartOffset: -1,
  recordErrors: [],
  errorMessage,
});

/** The codec the topic's compression.type stores batches in, or "producer" to keep the producer's. */
function targetCodecOf(config: TopicConfig): number | "producer" {
  return config.compressionType === "producer"
    ? "producer"
    : config.compressionType === "uncompressed"
      ? CompressionCodec.none
      : CompressionCodec[config.compressionType];
}

/** compression.<codec>.level of the topic, for the codec that has levels. */
function targetLevelOf(config: TopicConfig): number | undefined {
  if (config.compressionType === "gzip") return config.compressionGzipLevel;
  if (config.compressionType === "zstd") return config.compressionZstdLevel;
  return undefined;
}

export function produceHandler(services: BrokerServices): Handler<ProduceRequest, ProduceResponseInit> {
  const { topics, partitions, ownership } = services;

  const producePartition = async (
    topicName: string,
    index: number,
    records: Uint8Array | null,
    apiVersion: number,
  ): Promise<PartitionAnswer> => {
    const topic = topics.get(topicName);
    if (!topic || index < 0 || index >= topic.partitions) {
      return { response: failure(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.") };
    }
    // Led here at an epoch, and this broker may still act at it (in cluster mode: its lease is valid by its
    // own clock). Checked again once the append is written or durable, before it is acknowledged.
    const leadership = partitionLeadership(ownership, topicName, index, NO_LEADER_EPOCH);
    if (leadership.kind !== "leader" || !ownership.mayAct({ kind: "partition", topic: topicName, partition: index }, leadership.epoch)) {
      return { response: failure(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, NOT_LEADER_MESSAGE) };
    }
    const leaderEpoch = leadership.epoch;
    const config = resolveTopicConfigWithDefaults(topic.configs, services.runtimeConfig.topicDefaults());
    const produced = records ?? new Uint8Array(0);
    const validation = validateProduceRecordSet(produced, { maxBatchBytes: config.maxMessageBytes });
    if (!validation.ok) {
      return { response: failure(index, errorCodeOfProblem(validation.problem), `${validation.problem.kind} in ${topicName}-${index}`) };
    }
    if (validation.batches[0]!.compression === CompressionCodec.zstd && apiVersion < 7) {
      return { response: failure(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later") };
    }
    // The records themselves (LogValidator's checks), then the batch as it will be stored.
    const nowMs = services.clock.nowMs();
    const prepared = prepareProducedBatch(produced, validation.batches[0]!, {
      topicPartition: `${topicName}-${index}`,
      compacted: config.cleanupPolicy.compact,
      logAppendTime: config.messageTimestampType === "LogAppendTime",
      targetCodec: targetCodecOf(config),
      targetLevel: targetLevelOf(config),
      maxBatchBytes: config.maxMessageBytes,
      recordTimestampProblem: (timestampMs, offset) => recordTimestampProblem(config, timestampMs, offset, nowMs),
    });
    if (!prepared.ok) {
      const recordErrors = prepared.recordErrors.map((e) => ({ batchIndex: e.batchIndex, batchIndexErrorMessage: e.message }));
      return { response: { ...failure(index, prepared.errorCode, prepared.message), recordErrors } };
    }
    const { recordSet, batch } = prepared;
    // Refused at open for damaged data (partitions.ts): no append until the operator dealt with it.
    if (partitions.refusal(topicName, index) !== undefined) {
      return { response: failure(index, ErrorCode.KAFKA_STORAGE_ERROR, "the partition's data on this broker is damaged") };
    }
    const partition = await partitions.get(topicName, index);
    // Closing: its topic is being deleted; the log would refuse the append.
    if (!partition || partition.closing) return { response: failure(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, null) };
    const outcome = partition.appendFromProducer(recordSet, batch);
    if (outcome.kind === "error") {
      if (outcome.notInTransaction === true && apiVersion >= 11) return { response: failure(index, ErrorCode.TRANSACTION_ABORTABLE, null) };
      return { response: failure(index, outcome.errorCode, outcome.message) };
    }
    const response: ProduceResponse_PartitionProduceResponseInit = {
      index,
      errorCode: ErrorCode.NONE,
      baseOffset: outcome.baseOffset,
      logAppendTimeMs: outcome.logAppendTimeMs,
      logStartOffset: partition.log.logStartOffset,
      recordErrors: [],
      errorMessage: null,
    };
    const deposed = () =>
      ownership.mayAct({ kind: "partition", topic: topicName, partition: index }, leaderEpoch)
        ? undefined
        : failure(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, NOT_LEADER_MESSAGE);
    if (outcome.kind === "duplicate") return { response, flush: () => partition.log.flush(), deposed };
    return { response, written: outcome.written, flush: () => partition.log.flush(), deposed };
  };

  return {
    apiKey: 0,
    minVersion: 3,
    maxVersion: 11,
    async handle(request, ctx) {
      const acks = request.acks;
      if (acks !== 0 && acks !== 1 && acks !== -1) {
        return this.errorResponse(request, ErrorCode.INVALID_REQUIRED_ACKS, ctx.apiVersion);
      }
      // Authorization as Apache's KafkaApis: transactional records need WRITE on the transactional id
      // (the whole request refused), each topic WRITE (TOPIC_AUTHORIZATION_FAILED per partition).
      const { authorizer } = services;
      // Without a transactional id they are refused even without an authorizer, as Apache's KafkaApis does.
      if (hasTransactionalRecords(request)) {
        const id = request.transactionalId;
        if (id === null || !authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, id)) {
          return this.errorResponse(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ctx.apiVersion);
        }
      }
      const writable = authorizer.enabled ? authorizer.allowedNames(ctx, AclOperation.WRITE, ResourceType.TOPIC, request.topicData.map((t) => t.name)) : undefined;
      // Cluster mode: transactional batches whose coordinator is another broker are verified with it
      // first; a partition it could not answer for is refused retriably without an append.
      const unverified = (await services.remoteTxnVerifier?.prepare(request)) ?? NOTHING_REFUSED;
      const answers = await Promise.all(
        request.topicData.map(async (topic) => ({
          name: topic.name,
          partitions: await Promise.all(
            topic.partitionData.map((p): PartitionAnswer | Promise<PartitionAnswer> => {
              if (writable !== undefined && !writable.has(topic.name)) return { response: failure(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, null) };
              const refused = unverified.get(partitionKey(topic.name, p.index));
              if (refused !== undefined) return { response: failure(p.index, refused.errorCode, refused.message) };
              return producePartition(topic.name, p.index, p.records, ctx.apiVersion);
            }),
          ),
        })),
      );
      const all = answers.flatMap((t) => t.partitions);
      // The request frame holds the batch bytes until they are written, whatever the acks.
      await Promise.all(all.map((a) => a.written));
      // A duplicate is acknowledged like the original would be: after the data it points at is durable.
      if (acks === -1) await Promise.all(all.map((a) => a.flush?.()));
      for (const answer of all) answer.response = answer.deposed?.() ?? answer.response;
      if (acks === 0) {
        if (all.some((a) => a.response.errorCode !== ErrorCode.NONE)) {
          throw new CloseConnection("acks=0 produce failed on some partition: closing the connection so the producer notices");
        }
        return null;
      }
      return {
        throttleTimeMs: 0,
        responses: answers.map((t) => ({ name: t.name, partitionResponses: t.partitions.map((p) => p.response) })),
      };
    },
    errorResponse(request, errorCode) {
      return {
        responses: request.topicData.map((t) => ({
          name: t.name,
          partitionResponses: t.partitionData.map((p) => failure(p.index, errorCode, null)),
        })),
      };
    },
  };
}

/** Whether any partition's records start with a transactional batch (Apache's hasTransactionalRecords). */
function hasTransactionalRecords(request: ProduceRequest): boolean {
  return request.topicData.some((topic) =>
    topic.partitionData.some((p) => p.records !== null && p.records.length >= BATCH_ATTRIBUTES_OFFSET + 2 && (p.records[BATCH_ATTRIBUTES_OFFSET + 1]! & TRANSACTIONAL_BIT) !== 0),
  );
}

/** Where a RecordBatch v2 header keeps its int16 attributes (big-endian: the flags are in the low byte). */
const BATCH_ATTRIBUTES_OFFSET = 21;
