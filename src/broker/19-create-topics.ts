/**
 * CreateTopics (key 19), versions 0-7.
 *
 * Per topic, in Apache's order of checks: a name repeated in the request -> INVALID_REQUEST for every copy;
 * an illegal name -> INVALID_TOPIC_EXCEPTION; an existing one -> TOPIC_ALREADY_EXISTS; partitions 0 or below
 * -1 -> INVALID_PARTITIONS; a replication factor other than 1 or -1 (one copy of the data lives on the
 * shared volume) -> INVALID_REPLICATION_FACTOR; a manual assignment must give every partition 0..n-1
 * exactly this broker -> INVALID_REPLICA_ASSIGNMENT; unknown configs, invalid values (the broker-level
 * defaults taking part in the rules between values) and the values bunka refuses (domain/topic-config.ts)
 * -> INVALID_CONFIG. validateOnly checks without creating. v5+ answers the partition count, replication
 * factor and every topic config with its source, the topic's own values as given (as Apache does);
 * v7+ the topic id.
 * The whole request runs under the metadata gate (metadata-mutations.ts): in cluster mode, the checks
 * read the topics as they are in the shared files, so two brokers creating the same name at once answer
 * one success and one TOPIC_ALREADY_EXISTS. A gate that cannot be taken answers REQUEST_TIMED_OUT
 * (retriable) for every topic, and nothing is created.
 * Authorization (broker/authorizer.ts): CREATE on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED
 * "Authorization failed."; without DESCRIBE_CONFIGS on the topic its configs are left out
 * (topicConfigErrorCode TOPIC_AUTHORIZATION_FAILED), as Apache's KafkaApis.
 * Deliberately not done: create-topic policies and controller mutation quotas (no THROTTLING_QUOTA_EXCEEDED).
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { topicConfigProblems } from "../domain/topic-config.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { CreateTopicsRequest, CreateTopicsRequest_CreatableTopic } from "../protocol/generated/create-topics-request.ts";
import type {
  CreateTopicsResponseInit,
  CreateTopicsResponse_CreatableTopicResultInit,
} from "../protocol/generated/create-topics-response.ts";
import { createdTopicConfigs } from "./32-describe-configs.ts";
import type { Handler, RequestContext } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

export function createTopicsHandler(services: BrokerServices): Handler<CreateTopicsRequest, CreateTopicsResponseInit> {
  const { topics, config, ownership } = services;

  const failure = (name: string, errorCode: number, errorMessage: string | null): CreateTopicsResponse_CreatableTopicResultInit => ({
    name,
    errorCode,
    errorMessage,
    numPartitions: -1,
    replicationFactor: -1,
    configs: null,
  });

  /** Validation that does not need the store; returns the failure or the partition count to create. */
  const check = (topic: CreateTopicsRequest_CreatableTopic): CreateTopicsResponse_CreatableTopicResultInit | number => {
    const nameReason = topicNameInvalidReason(topic.name);
    if (nameReason !== null) return failure(topic.name, ErrorCode.INVALID_TOPIC_EXCEPTION, nameReason);
    if (topics.get(topic.name)) {
      return failure(topic.name, ErrorCode.TOPIC_ALREADY_EXISTS, `Topic '${topic.name}' already exists.`);
    }
    const brokers = ownership.brokers().length;
    let partitions = topic.numPartitions;
    if (topic.assignments.length > 0) {
      if (topic.numPartitions !== -1 || topic.replicationFactor !== -1) {
        return failure(
          topic.name,
          ErrorCode.INVALID_REQUEST,
          "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        );
      }
      const indexes = topic.assignments.map((a) => a.partitionIndex).sort((a, b) => a - b);
      const contiguous = indexes.every((p, i) => p === i);
      if (!contiguous) {
        return failure(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0 to n-1, each once.");
      }
      const foreign = topic.assignments.find(
        (a) => a.brokerIds.length !== 1 || !ownership.brokers().some((b) => b.brokerId === a.brokerIds[0]),
      );
      if (foreign) {
        return failure(
          topic.name,
          ErrorCode.INVALID_REPLICA_ASSIGNMENT,
          `Partition ${foreign.partitionIndex} must be assigned to exactly one registered broker: bunka keeps one copy of each partition.`,
        );
      }
      partitions = indexes.length;
    } else {
      if (partitions === -1) partitions = config.numPartitions;
      if (partitions <= 0) {
        return failure(topic.name, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.");
      }
      if (topic.replicationFactor !== -1 && topic.replicationFactor !== 1) {
        const message =
          topic.replicationFactor <= 0
            ? "Replication factor must be larger than 0, or -1 to use the default value."
            : `Unable to replicate the partition ${topic.replicationFactor} time(s): The target replication factor of ${topic.replicationFactor} cannot be reached because only ${brokers} broker(s) are registered.`;
        return failure(topic.name, ErrorCode.INVALID_REPLICATION_FACTOR, message);
      }
    }
    const configs = ownConfigs(topic);
    const problem = topicConfigProblems(configs, services.runtimeConfig.topicDefaults())[0];
    if (problem !== undefined) return failure(topic.name, ErrorCode.INVALID_CONFIG, problem.reason);
    return partitions;
  };

  const ownConfigs = (topic: CreateTopicsRequest_CreatableTopic): Record<string, string> => {
    const configs: Record<string, string> = {};
    for (const c of topic.configs) if (c.value !== null) configs[c.name] = c.value;
    return configs;
  };

  const success = (
    name: string,
    topicId: string,
    partitions: number,
    configs: Record<string, string>,
  ): CreateTopicsResponse_CreatableTopicResultInit => ({
    name,
    topicId,
    errorCode: ErrorCode.NONE,
    errorMessage: null,
    numPartitions: partitions,
    replicationFactor: 1,
    configs: createdTopicConfigs(services, configs),
  });

  return {
    apiKey: 19,
    minVersion: 0,
    maxVersion: 7,
    handle(request, ctx) {
      return underGate(services, "CreateTopics", () => create(request, ctx), (reason) => ({
        throttleTimeMs: 0,
        topics: request.topics.map((t) => failure(t.name, ErrorCode.REQUEST_TIMED_OUT, reason)),
      }));
    },
    errorResponse(request, errorCode) {
      return { topics: request.topics.map((t) => failure(t.name, errorCode, null)) };
    },
  };

  async function create(request: CreateTopicsRequest, ctx: RequestContext): Promise<CreateTopicsResponseInit> {
    const counts = new Map<string, number>();
    for (const t of request.topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1);
    const results: CreateTopicsResponse_CreatableTopicResultInit[] = [];
    // Authorization, as Apache 4.1's ControllerApis: CREATE on the cluster or on each topic; a topic created
    // whose configs the principal may not DESCRIBE_CONFIGS is answered without them (topic config error).
    const { authorizer } = services;
    const names = request.topics.map((t) => t.name);
    const creatable = authorizer.allows(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, { quiet: true })
      ? new Set(names)
      : authorizer.allowedNames(ctx, AclOperation.CREATE, ResourceType.TOPIC, names);
    const configsVisible = authorizer.allowedNames(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, { quiet: true });
    const push = (result: CreateTopicsResponse_CreatableTopicResultInit) =>
      results.push(configsVisible.has(result.name!) || result.errorCode !== ErrorCode.NONE ? result : { ...result, topicConfigErrorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, configs: null });
    for (const topic of request.topics) {
      if (counts.get(topic.name)! > 1) {
        push(
          failure(topic.name, ErrorCode.INVALID_REQUEST, "Create topics request from client contains multiple entries for the topic."),
        );
        continue;
      }
      if (!creatable.has(topic.name)) {
        push(failure(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."));
        continue;
      }
      const checked = check(topic);
      if (typeof checked !== "number") {
        push(checked);
        continue;
      }
      const configs = ownConfigs(topic);
      if (request.validateOnly) {
        push(success(topic.name, "00000000-0000-0000-0000-000000000000", checked, configs));
        continue;
      }
      const created = await topics.create({ name: topic.name, partitions: checked, configs });
      if (!created.ok) {
        push(failure(topic.name, ErrorCode[created.error], created.message));
        continue;
      }
      services.log.info("created topic", { topic: topic.name, partitions: checked, topicId: created.topic.topicId });
      push(success(topic.name, created.topic.topicId, checked, configs));
    }
    return { throttleTimeMs: 0, topics: results };
  }
}
