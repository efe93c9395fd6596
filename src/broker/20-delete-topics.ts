/**
 * DeleteTopics (key 20), versions 0-6.
 *
 * Topics by name (v0-5 TopicNames, v6 Topics with a name) or by id (v6). Unknown name ->
 * UNKNOWN_TOPIC_OR_PARTITION, unknown id -> UNKNOWN_TOPIC_ID; a topic named by both must match, else
 * INVALID_REQUEST. The topic store renames the partition directories before forgetting the topic, so a
 * topic re-created with the same name never sees the old data.
 * The whole request runs under the metadata gate (metadata-mutations.ts), reading the topics as they are
 * in the shared files first in cluster mode; a gate that cannot be taken answers REQUEST_TIMED_OUT
 * (retriable) for every topic, and nothing is deleted.
 * Authorization (broker/authorizer.ts), as Apache 4.1's ControllerApis: DELETE on the cluster allows every
 * topic; else a name the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED before whether it exists
 * is said, one it may not DELETE TOPIC_AUTHORIZATION_FAILED (no topic id in either); a topic named by id
 * and not deletable is TOPIC_AUTHORIZATION_FAILED with its name only when describable.
 * Deliberately not done: delete.topic.enable=false (deletion is always allowed), mutation quotas.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { ZERO_UUID } from "../protocol/codec-support.ts";
import type { DeleteTopicsRequest } from "../protocol/generated/delete-topics-request.ts";
import type {
  DeleteTopicsResponseInit,
  DeleteTopicsResponse_DeletableTopicResultInit,
} from "../protocol/generated/delete-topics-response.ts";
import type { Handler, RequestContext } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

interface Target {
  name: string | null;
  topicId: string;
}

function targets(request: DeleteTopicsRequest, version: number): Target[] {
  return version >= 6
    ? request.topics.map((t) => ({ name: t.name, topicId: t.topicId }))
    : request.topicNames.map((name) => ({ name, topicId: ZERO_UUID }));
}

export function deleteTopicsHandler(services: BrokerServices): Handler<DeleteTopicsRequest, DeleteTopicsResponseInit> {
  const { topics } = services;
  return {
    apiKey: 20,
    minVersion: 0,
    maxVersion: 6,
    handle(request, ctx) {
      return underGate(services, "DeleteTopics", () => remove(request, ctx), (reason) => ({
        throttleTimeMs: 0,
        responses: targets(request, ctx.apiVersion).map((t) => ({ name: t.name, topicId: t.topicId, errorCode: ErrorCode.REQUEST_TIMED_OUT, errorMessage: reason })),
      }));
    },
    errorResponse(request, errorCode, version) {
      return {
        responses: targets(request, version).map((t) => ({ name: t.name, topicId: t.topicId, errorCode, errorMessage: null })),
      };
    },
  };

  async function remove(request: DeleteTopicsRequest, ctx: RequestContext): Promise<DeleteTopicsResponseInit> {
    const responses: DeleteTopicsResponse_DeletableTopicResultInit[] = [];
    const { authorizer } = services;
    // DELETE on the cluster allows deleting (and so describing) every topic, as Apache's ControllerApis.
    const onCluster = authorizer.allows(ctx, AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME);
    const may = (operation: number, name: string) => onCluster || authorizer.allows(ctx, operation, ResourceType.TOPIC, name);
    const refused = (name: string | null, topicId: string) => responses.push({ name, topicId, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, errorMessage: null });
    for (const target of targets(request, ctx.apiVersion)) {
      const byId = target.topicId !== ZERO_UUID ? topics.getById(target.topicId) : undefined;
      const topic = target.name !== null ? topics.get(target.name) : byId;
      const answer = (errorCode: number, errorMessage: string | null) =>
        responses.push({ name: target.name ?? topic?.name ?? null, topicId: topic?.topicId ?? target.topicId, errorCode, errorMessage });
      if (target.name === null && target.topicId === ZERO_UUID) {
        answer(ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.");
      } else if (target.name !== null && target.topicId !== ZERO_UUID) {
        answer(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.");
      } else if (target.name !== null && !may(AclOperation.DESCRIBE, target.name)) {
        // Before whether it exists is said.
        refused(target.name, ZERO_UUID);
      } else if (target.name !== null && topic && !may(AclOperation.DELETE, target.name)) {
        refused(target.name, ZERO_UUID);
      } else if (target.name === null && topic && !may(AclOperation.DELETE, topic.name)) {
        // Its name only to who may describe it (the id is not secret).
        refused(may(AclOperation.DESCRIBE, topic.name) ? topic.name : null, target.topicId);
      } else if (!topic) {
        answer(
          target.name === null ? ErrorCode.UNKNOWN_TOPIC_ID : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
          target.name === null ? "This server does not host this topic ID." : "This server does not host this topic-partition.",
        );
      } else {
        // Close the partitions first, and keep them closed: their directories are renamed away by the delete.
        // closeTopic waits for every close of the topic's partitions, including those a concurrent delete
        // of the same topic started; topicDeleted ends it whatever happens.
        const deleted = await services.partitions
          .closeTopic(topic.name)
          .then(() => topics.delete(topic.name))
          .finally(() => services.partitions.topicDeleted(topic.name));
        if (deleted.ok) {
          services.log.info("deleted topic", { topic: topic.name, topicId: topic.topicId });
          answer(ErrorCode.NONE, null);
        } else {
          answer(ErrorCode[deleted.error], deleted.message);
        }
      }
    }
    return { throttleTimeMs: 0, responses };
  }
}
