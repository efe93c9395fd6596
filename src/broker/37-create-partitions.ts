/**
 * CreatePartitions (key 37), versions 0-3.
 *
 * Raises the partition count of existing topics, with the checks and messages of Apache Kafka's KRaft
 * controller (ReplicationControlManager.createPartitions), in its order: a topic named more than once in
 * the request -> INVALID_REQUEST "Duplicate topic name." (one result per name, listed first, as Apache
 * does); unknown topic (or an illegal name, which cannot exist) -> UNKNOWN_TOPIC_OR_PARTITION with no
 * message; a count equal to the current one -> INVALID_PARTITIONS "Topic already has N partition(s).";
 * a lower one -> INVALID_PARTITIONS "The topic T currently has N partition(s); C would not be an
 * increase."; manual assignments (when not null) must number exactly the new partitions, and each must
 * name exactly one registered broker (bunka keeps one copy of each partition, so the existing replication
 * factor is 1) -> INVALID_REPLICA_ASSIGNMENT with Apache's messages. validateOnly runs every check and
 * changes nothing. New partition directories are durable before the answer (TopicStore.addPartitions).
 *
 * By version: v0 and v1 are the same; v2 is flexible; v3 may answer THROTTLING_QUOTA_EXCEEDED in Apache.
 *
 * The whole request runs under the metadata gate (metadata-mutations.ts), reading the topics as they are
 * in the shared files first in cluster mode; a gate that cannot be taken answers REQUEST_TIMED_OUT
 * (retriable) for every topic, and nothing is changed.
 *
 * Authorization (broker/authorizer.ts): ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED with no
 * message (Apache 4.1's ControllerApis), before the topic is looked up.
 * Deliberately not done: controller mutation quotas (never THROTTLING_QUOTA_EXCEEDED); timeoutMs is
 * ignored because the change is complete when answered; a manual assignment is validated but not stored,
 * because partition leadership comes from the ownership port (docs/architecture.md, "Ownership and cluster
 * mode"), not from replica lists.
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type {
  CreatePartitionsRequest,
  CreatePartitionsRequest_CreatePartitionsAssignment,
} from "../protocol/generated/create-partitions-request.ts";
import type {
  CreatePartitionsResponseInit,
  CreatePartitionsResponse_CreatePartitionsTopicResultInit,
} from "../protocol/generated/create-partitions-response.ts";
import { PARTITIONS_PER_TOPIC_MAX, type TopicRecord } from "../storage/topic-store.ts";
import type { Handler, RequestContext } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

/** Every partition bunka creates has one replica (the data lives once, on the shared volume). */
const REPLICATION_FACTOR = 1;

type Result = CreatePartitionsResponse_CreatePartitionsTopicResultInit;

export function createPartitionsHandler(services: BrokerServices): Handler<CreatePartitionsRequest, CreatePartitionsResponseInit> {
  const { topics, ownership } = services;

  const result = (name: string, errorCode: number, errorMessage: string | null): Result => ({ name, errorCode, errorMessage });

  /** Apache's validateManualPartitionAssignment for one new partition, or null when acceptable. */
  const assignmentProblem = (assignment: CreatePartitionsRequest_CreatePartitionsAssignment): string | null => {
    const replicas = assignment.brokerIds;
    if (replicas.length === 0) return "The manual partition assignment includes an empty replica list.";
    const registered = new Set(ownership.brokers().map((b) => b.brokerId));
    const sorted = [...replicas].sort((a, b) => a - b);
    for (let i = 0; i < sorted.length; i++) {
      const replica = sorted[i]!;
      if (!registered.has(replica)) {
        return `The manual partition assignment includes broker ${replica}, but no such broker is registered.`;
      }
      if (i > 0 && sorted[i - 1] === replica) {
        return `The manual partition assignment includes the broker ${replica} more than once.`;
      }
    }
    if (replicas.length !== REPLICATION_FACTOR) {
      return (
        `The manual partition assignment includes a partition with ${replicas.length} replica(s), but this is not ` +
        `consistent with previous partitions, which have ${REPLICATION_FACTOR} replica(s).`
      );
    }
    return null;
  };

  /** The checks that need only the current topic record; null when the request may proceed. */
  const check = (
    topic: TopicRecord | undefined,
    name: string,
    count: number,
    assignments: CreatePartitionsRequest_CreatePartitionsAssignment[] | null,
  ): Result | null => {
    // Apache answers the bare exception here, so the message is null (clients show the code's default).
    if (topic === undefined) return result(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, null);
    const current = topic.partitions;
    if (count === current) return result(name, ErrorCode.INVALID_PARTITIONS, `Topic already has ${current} partition(s).`);
    if (count < current) {
      return result(
        name,
        ErrorCode.INVALID_PARTITIONS,
        `The topic ${name} currently has ${current} partition(s); ${count} would not be an increase.`,
      );
    }
    if (count > PARTITIONS_PER_TOPIC_MAX) {
      // bunka's own bound (each partition is a directory made durable before the answer).
      return result(
        name,
        ErrorCode.INVALID_PARTITIONS,
        `Number of partitions ${count} is above the maximum of ${PARTITIONS_PER_TOPIC_MAX} per topic.`,
      );
    }
    if (assignments !== null) {
      const additional = count - current;
      if (assignments.length !== additional) {
        return result(
          name,
          ErrorCode.INVALID_REPLICA_ASSIGNMENT,
          `Attempted to add ${additional} additional partition(s), but only ${assignments.length} assignment(s) were specified.`,
        );
      }
      for (const assignment of assignments) {
        const problem = assignmentProblem(assignment);
        if (problem !== null) return result(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem);
      }
    }
    return null;
  };

  return {
    apiKey: 37,
    minVersion: 0,
    maxVersion: 3,
    handle(request, ctx) {
      return underGate(services, "CreatePartitions", () => grow(request, ctx), (reason) => ({
        throttleTimeMs: 0,
        results: [...new Set(request.topics.map((t) => t.name))].map((name) => result(name, ErrorCode.REQUEST_TIMED_OUT, reason)),
      }));
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, results: request.topics.map((t) => result(t.name, errorCode, null)) };
    },
  };

  async function grow(request: CreatePartitionsRequest, ctx: RequestContext): Promise<CreatePartitionsResponseInit> {
    const alterable = services.authorizer.allowedNames(ctx, AclOperation.ALTER, ResourceType.TOPIC, request.topics.map((t) => t.name));
    const counts = new Map<string, number>();
    for (const t of request.topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1);
    const results: Result[] = [];
    for (const [name, n] of counts) if (n > 1) results.push(result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."));

    for (const t of request.topics) {
      if (counts.get(t.name)! > 1) continue;
      if (!alterable.has(t.name)) {
        results.push(result(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, null));
        continue;
      }
      const refused = check(topics.get(t.name), t.name, t.count, t.assignments);
      if (refused !== null) {
        results.push(refused);
        continue;
      }
      if (request.validateOnly) {
        results.push(result(t.name, ErrorCode.NONE, null));
        continue;
      }
      // The store repeats the count checks under its serial queue, so a concurrent change between the
      // check above and this call is still answered correctly (with the store's wording).
      const changed = await topics.addPartitions(t.name, t.count);
      if (!changed.ok) {
        results.push(result(t.name, ErrorCode[changed.error], changed.message));
        continue;
      }
      services.log.info("added partitions", { topic: t.name, partitions: t.count });
      results.push(result(t.name, ErrorCode.NONE, null));
    }
    return { throttleTimeMs: 0, results };
  }
}
