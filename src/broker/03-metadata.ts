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
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: topics the principal may not DESCRIBE are
 * left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (without their id;
 * by id, with it and no name), before anything says whether they exist; auto-creation needs CREATE on the
 * cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED). Authorized operations are the principal's;
 * the cluster's (v8-10) are 0 without DESCRIBE on the cluster.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { ZERO_UUID } from "../protocol/codec-support.ts";
import type { MetadataRequest } from "../protocol/generated/metadata-request.ts";
import type { MetadataResponseInit, MetadataResponse_MetadataResponseTopicInit } from "../protocol/generated/metadata-response.ts";
import type { TopicRecord } from "../storage/topic-store.ts";
import { underGate } from "./metadata-mutations.ts";
import { partitionMetadata } from "./partition-metadata.ts";
import type { Handler } from "./handler.ts";
import {
  AUTHORIZED_OPERATIONS_OMITTED,
  type BrokerServices,
} from "./services.ts";

export function metadataHandler(services: BrokerServices): Handler<MetadataRequest, MetadataResponseInit> {
  const { ownership, topics, config } = services;

  const describeTopic = (topic: TopicRecord, authorizedOperations: number): MetadataResponse_MetadataResponseTopicInit => ({
    errorCode: ErrorCode.NONE,
    name: topic.name,
    topicId: topic.topicId,
    isInternal: false,
    partitions: Array.from({ length: topic.partitions }, (_, partitionIndex) => {
      const described = partitionMetadata(ownership, topic.name, partitionIndex);
      return {
        errorCode: described.leaderId < 0 ? ErrorCode.LEADER_NOT_AVAILABLE : ErrorCode.NONE,
        partitionIndex,
        ...described,
        offlineReplicas: [],
      };
    }),
    topicAuthorizedOperations: authorizedOperations,
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
      const { authorizer } = services;
      // Refusals are logged for topics the request names, not for the all-topics answer's filter.
      const describable = (name: string) => authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, { quiet: allTopics });
      const describe = (topic: TopicRecord) =>
        describeTopic(topic, includeOps ? authorizer.authorizedOperations(ctx, ResourceType.TOPIC, topic.name) : AUTHORIZED_OPERATIONS_OMITTED);
      if (allTopics) {
        for (const topic of topics.list()) if (describable(topic.name)) answered.push(describe(topic));
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
            if (topic !== undefined && !describable(topic.name)) answered.push(missingTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, null, wanted.topicId));
            else answered.push(topic ? describe(topic) : missingTopic(ErrorCode.UNKNOWN_TOPIC_ID, null, wanted.topicId));
            continue;
          }
          const name = wanted.name;
          if (seen.has(name)) continue;
          seen.add(name);
          const existing = topics.get(name);
          if (!describable(name)) {
            // Not even whether it exists is said.
            answered.push(missingTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name));
          } else if (existing) {
            answered.push(describe(existing));
          } else if (topicNameInvalidReason(name) !== null) {
            answered.push(missingTopic(ErrorCode.INVALID_TOPIC_EXCEPTION, name));
          } else if (
            autoCreate &&
            !authorizer.allows(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, { quiet: true }) &&
            !authorizer.allows(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
          ) {
            answered.push(missingTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name));
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
              answered.push(describe(created.topic));
            } else {
              // A concurrent create of the same name won the race: answer with it.
              const raced = topics.get(name);
              answered.push(raced ? describe(raced) : missingTopic(ErrorCode[created.error], name));
            }
          } else {
            answered.push(missingTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name));
          }
        }
      }
      return {
        throttleTimeMs: 0,
        // At their addresses on the listener this request came in on (Apache's rule).
        brokers: ownership.brokers(ctx.connection.security?.listenerName).map((b) => ({ nodeId: b.brokerId, host: b.host, port: b.port, rack: b.rack })),
        clusterId: services.clusterId,
        controllerId: ownership.controllerId(),
        topics: answered,
        clusterAuthorizedOperations: request.includeClusterAuthorizedOperations
          ? authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
            ? authorizer.authorizedOperations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            : 0
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
