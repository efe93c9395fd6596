/**
 * Metadata (key 3), versions 0-12.
 *
 * Answers brokers, cluster id, controller and topics. Topic selection: v0 an empty list means every topic;
 * v1+ a null list means every topic and an empty one none; v10+ topics may be named by id (unknown id ->
 * UNKNOWN_TOPIC_ID). A missing topic is created when auto.create.topics.enable is on and the request allows
 * it (always before v4, AllowAutoTopicCreation from v4); an illegal name answers INVALID_TOPIC_EXCEPTION, a
 * missing topic otherwise UNKNOWN_TOPIC_OR_PARTITION, as Apache's KafkaApis does.
 * Difference from Apache, on purpose: an auto-created topic is answered at once with its partitions (our
 * creation is synchronous and durable) instead of LEADER_NOT_AVAILABLE and a client retry.
 * Deliberately not done: internal topics (bunka keeps group and transaction state in files, not topics).
 */
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { ZERO_UUID } from "../protocol/codec-support.ts";
import type { MetadataRequest } from "../protocol/generated/metadata-request.ts";
import type { MetadataResponseInit, MetadataResponse_MetadataResponseTopicInit } from "../protocol/generated/metadata-response.ts";
import type { TopicRecord } from "../storage/topic-store.ts";
import { underGate } from "./metadata-mutations.ts";
import type { Handler } from "./handler.ts";
import {
  AUTHORIZED_OPERATIONS_OMITTED,
  CLUSTER_AUTHORIZED_OPERATIONS,
  TOPIC_AUTHORIZED_OPERATIONS,
  type BrokerServices,
} from "./services.ts";

export function metadataHandler(services: BrokerServices): Handler<MetadataRequest, MetadataResponseInit> {
  const { ownership, topics, config } = services;

  const describeTopic = (topic: TopicRecord, includeOps: boolean): MetadataResponse_MetadataResponseTopicInit => ({
    errorCode: ErrorCode.NONE,
    name: topic.name,
    topicId: topic.topicId,
    isInternal: false,
    partitions: Array.from({ length: topic.partitions }, (_, partitionIndex) => {
      const leaderId = ownership.partitionLeader(topic.name, partitionIndex);
      // The leader epoch: this broker's for a partition it leads (0 in single-broker mode), the owner
      // key's for one another broker leads (what that broker leads it at), -1 when not known: a client
      // then asks the leader with no epoch check.
      const standing = ownership.standing({ kind: "partition", topic: topic.name, partition: partitionIndex });
      return {
        errorCode: leaderId < 0 ? ErrorCode.LEADER_NOT_AVAILABLE : ErrorCode.NONE,
        partitionIndex,
        leaderId,
        leaderEpoch: standing.state === "elsewhere" ? (leaderId < 0 ? -1 : (standing.epoch ?? -1)) : standing.epoch,
        replicaNodes: leaderId < 0 ? [] : [leaderId],
        isrNodes: leaderId < 0 ? [] : [leaderId],
        offlineReplicas: [],
      };
    }),
    topicAuthorizedOperations: includeOps ? TOPIC_AUTHORIZED_OPERATIONS : AUTHORIZED_OPERATIONS_OMITTED,
  });

  const missingTopic = (errorCode: number, name: string | null, topicId = ZERO_UUID): MetadataResponse_MetadataResponseTopicInit => ({
    errorCode,
    name,
    topicId,
    isInternal: false,
    partitions: [],
    topicAuthorizedOperations: AUTHORIZED_OPERATIONS_OMITTED,
  });

  return {
    apiKey: 3,
    minVersion: 0,
    maxVersion: 12,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      const includeOps = request.includeTopicAuthorizedOperations;
      const allTopics = request.topics === null || (version === 0 && request.topics.length === 0);
      const autoCreate = config.autoCreateTopicsEnable && (version < 4 || request.allowAutoTopicCreation);
      const answered: MetadataResponse_MetadataResponseTopicInit[] = [];
      if (allTopics) {
        for (const topic of topics.list()) answered.push(describeTopic(topic, includeOps));
      } else {
        const seen = new Set<string>();
        for (const wanted of request.topics ?? []) {
          if (wanted.name === null && version < 12) {
            // Names are not nullable before v12, so the answer cannot echo a null one (Apache refuses the
            // request as INVALID_REQUEST: "Topic name can not be null for version N").
            answered.push(missingTopic(ErrorCode.INVALID_REQUEST, ""));
            continue;
          }
          if (wanted.name === null) {
            const topic = topics.getById(wanted.topicId);
            answered.push(topic ? describeTopic(topic, includeOps) : missingTopic(ErrorCode.UNKNOWN_TOPIC_ID, null, wanted.topicId));
            continue;
          }
          const name = wanted.name;
          if (seen.has(name)) continue;
          seen.add(name);
          const existing = topics.get(name);
          if (existing) {
            answered.push(describeTopic(existing, includeOps));
          } else if (topicNameInvalidReason(name) !== null) {
            answered.push(missingTopic(ErrorCode.INVALID_TOPIC_EXCEPTION, name));
          } else if (autoCreate) {
            // Under the cluster's metadata gate, as every topic change (single-broker mode: at once).
            const created = await underGate(
              services,
              "auto-create topic",
              () => topics.create({ name, partitions: config.numPartitions }),
              () => undefined,
            );
            if (created === undefined) {
              // The gate could not be taken: nothing was created, and the client asks again, as Apache
              // answers while an auto-created topic is not ready.
              answered.push(missingTopic(ErrorCode.LEADER_NOT_AVAILABLE, name));
            } else if (created.ok) {
              services.log.info("auto-created topic", { topic: name, partitions: created.topic.partitions });
              answered.push(describeTopic(created.topic, includeOps));
            } else {
              // A concurrent create of the same name won the race: answer with it.
              const raced = topics.get(name);
              answered.push(raced ? describeTopic(raced, includeOps) : missingTopic(ErrorCode[created.error], name));
            }
          } else {
            answered.push(missingTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name));
          }
        }
      }
      return {
        throttleTimeMs: 0,
        brokers: ownership.brokers().map((b) => ({ nodeId: b.brokerId, host: b.host, port: b.port, rack: b.rack })),
        clusterId: services.clusterId,
        controllerId: ownership.controllerId(),
        topics: answered,
        clusterAuthorizedOperations: request.includeClusterAuthorizedOperations
          ? CLUSTER_AUTHORIZED_OPERATIONS
          : AUTHORIZED_OPERATIONS_OMITTED,
      };
    },
    errorResponse(request, errorCode) {
      return {
        brokers: [],
        topics: (request.topics ?? []).map((t) => missingTopic(errorCode, t.name ?? "", t.topicId)),
      };
    },
  };
}
