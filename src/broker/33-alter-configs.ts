/**
 * AlterConfigs (key 33), versions 0-2: the configs of each resource replaced by the request's, as Apache
 * Kafka does (a config the request does not name goes back to its default or inherited value). kafkajs'
 * alterConfigs, librdkafka's AlterConfigs and Sarama use it; Apache's own tools use
 * IncrementalAlterConfigs. The checks, codes and messages are the ones Apache 4.1.1 gives, shared with
 * IncrementalAlterConfigs (config-changes.ts):
 * - Any resource: a config name twice -> INVALID_REQUEST "Error due to duplicate config keys"; a null
 *   value -> INVALID_REQUEST "Null value not supported for : X".
 * - TOPIC (2): "" -> INVALID_REQUEST; an illegal name -> INVALID_TOPIC_EXCEPTION; invalid configs ->
 *   INVALID_CONFIG (before the existence check, as Apache); unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
 * - BROKER (4): "" replaces the cluster-wide default layer, this broker's id its own layer; another id or
 *   a non-integer -> INVALID_REQUEST; a config that cannot change at runtime -> INVALID_REQUEST "Cannot
 *   update these configs dynamically: Set(...)"; invalid values and refused cleaner changes ->
 *   INVALID_REQUEST.
 * - BROKER_LOGGER (8) and any type Apache's AlterConfigs does not know -> INVALID_REQUEST "Unknown
 *   resource type N"; CLIENT_METRICS (16) and GROUP (32) -> INVALID_REQUEST (bunka has neither).
 * validateOnly runs every check and changes nothing. Changes run one at a time, with
 * IncrementalAlterConfigs'.
 *
 * By version: v1 is v0 (it only moved throttling), v2 is flexible.
 *
 * Where bunka differs: the same resource twice in one request is INVALID_REQUEST for every copy (as
 * IncrementalAlterConfigs answers it); Apache 4.1.1 sends no answer at all (its response builder fails
 * on the duplicate key).
 * Authorization (broker/authorizer.ts): ALTER_CONFIGS on the topic or the cluster (broker resources),
 * else that resource's TOPIC_ / CLUSTER_AUTHORIZATION_FAILED, before any other check of it.
 */
import { AclOperation } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { AlterConfigsRequest, AlterConfigsRequest_AlterConfigsResource } from "../protocol/generated/alter-configs-request.ts";
import type { AlterConfigsResponseInit } from "../protocol/generated/alter-configs-response.ts";
import { ConfigResourceType } from "./32-describe-configs.ts";
import {
  alterEachResource,
  answerFor,
  brokerLayerOf,
  ConfigChanges,
  isOutcome,
  type Outcome,
  refuse,
  requestedConfigsProblem,
  staticBrokerConfigsProblem,
} from "./config-changes.ts";
import { BrokerAuthorizer } from "./authorizer.ts";
import type { Handler, RequestContext } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

type Resource = AlterConfigsRequest_AlterConfigsResource;

/** The request's configs of one resource as a record, or the refusal of them. */
function requestedConfigs(resource: Resource): Record<string, string> | Outcome {
  const malformed = requestedConfigsProblem(resource.configs, () => true);
  if (malformed !== null) return malformed;
  // No prototype: a config named "__proto__" must be an ordinary (unknown, refused) key.
  const configs: Record<string, string> = Object.create(null);
  for (const config of resource.configs) configs[config.name] = config.value!;
  return configs;
}

export function alterConfigsHandler(
  services: BrokerServices,
  changes: ConfigChanges = new ConfigChanges(services),
): Handler<AlterConfigsRequest, AlterConfigsResponseInit> {
  const alterBroker = async (resource: Resource, validateOnly: boolean): Promise<Outcome> => {
    const layer = brokerLayerOf(resource.resourceName, services.ownership.selfId);
    if (isOutcome(layer)) return layer;
    const configs = requestedConfigs(resource);
    if (isOutcome(configs)) return configs;
    const fixed = staticBrokerConfigsProblem(Object.keys(configs));
    if (fixed !== null) return fixed;
    return changes.alterBroker(layer, () => ({ ...configs }), validateOnly);
  };

  const alter = async (resource: Resource, validateOnly: boolean): Promise<Outcome> => {
    switch (resource.resourceType) {
      case ConfigResourceType.TOPIC:
        return changes.alterTopic(resource.resourceName, () => requestedConfigs(resource), validateOnly);
      case ConfigResourceType.BROKER:
        return alterBroker(resource, validateOnly);
      case ConfigResourceType.CLIENT_METRICS:
        return refuse(ErrorCode.INVALID_REQUEST, "bunka does not support client metrics config resources");
      case ConfigResourceType.GROUP:
        return refuse(ErrorCode.INVALID_REQUEST, "bunka does not support group config resources");
      default:
        return refuse(ErrorCode.INVALID_REQUEST, `Unknown resource type ${resource.resourceType}`);
    }
  };

  const run = async (request: AlterConfigsRequest, ctx: RequestContext): Promise<AlterConfigsResponseInit> => ({
    throttleTimeMs: 0,
    // Authorization (broker/authorizer.ts): ALTER_CONFIGS on the topic, the group or the cluster (broker
    // resources), else that resource's *_AUTHORIZATION_FAILED, before anything else about it is checked.
    responses: await alterEachResource(request.resources, async (resource) => {
      const refused = services.authorizer.configResourceError(ctx, AclOperation.ALTER_CONFIGS, resource.resourceType, resource.resourceName);
      return refused !== ErrorCode.NONE ? { errorCode: refused, errorMessage: BrokerAuthorizer.configRefusalMessage(refused) } : alter(resource, request.validateOnly);
    }),
  });

  return {
    apiKey: 33,
    minVersion: 0,
    maxVersion: 2,
    handle(request, ctx) {
      // In turn with IncrementalAlterConfigs here, and under the metadata gate across the cluster.
      return changes.serialize(() =>
        underGate(services, "AlterConfigs", () => run(request, ctx), (reason) => ({
          throttleTimeMs: 0,
          responses: request.resources.map((r) => answerFor(r, { errorCode: ErrorCode.REQUEST_TIMED_OUT, errorMessage: reason })),
        })),
      );
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, responses: request.resources.map((r) => answerFor(r, { errorCode, errorMessage: null })) };
    },
  };
}
