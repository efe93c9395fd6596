/**
 * IncrementalAlterConfigs (key 44), versions 0-1.
 *
 * Applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) operations to configs, per resource, with the
 * checks, codes and messages of Apache Kafka (KafkaApis / ConfigAdminManager on the broker,
 * ConfigurationControlManager and ControllerConfigurationValidator on the KRaft controller):
 * - Any resource: the same (type, name) twice in one request -> INVALID_REQUEST for every copy; a config
 *   name twice in one resource -> INVALID_REQUEST; a null value for anything but DELETE -> INVALID_REQUEST;
 *   an unknown operation -> INVALID_REQUEST.
 * - TOPIC (2) and BROKER (4): as config-changes.ts describes, shared with AlterConfigs. APPEND or
 *   SUBTRACT on a topic config that is not a LIST -> INVALID_CONFIG "Can't APPEND to key X because its
 *   type is not LIST."; on a broker config -> INVALID_CONFIG "Config value append is not allowed for
 *   config key: X". A topic or broker layer without its own value appends to the default it inherits.
 *   Deleting a broker config that cannot be set at runtime (or does not exist) changes nothing and
 *   succeeds, as in Apache.
 * - BROKER_LOGGER (8): Apache's id checks; bunka has no named loggers, so every logger is unknown
 *   (INVALID_CONFIG "Logger X does not exist!").
 * - CLIENT_METRICS (16), GROUP (32): INVALID_REQUEST (bunka has neither); other types: INVALID_REQUEST
 *   "Unknown resource type N".
 * validateOnly runs every check and changes nothing.
 *
 * By version: v1 is v0 made flexible.
 *
 * A change to broker configs is announced to the other brokers sharing the data directory in cluster
 * mode (metadata-mutations.ts), which read the file again, so a cluster-wide default reaches them at once.
 *
 * Authorization (broker/authorizer.ts): ALTER_CONFIGS on the topic, the group or the cluster (broker and
 * broker-logger resources), else that resource's *_AUTHORIZATION_FAILED, before any other check of it.
 *
 * Deliberately not done: alter-config policies, per-listener broker configs. Apache answers UNKNOWN_SERVER_ERROR for an unknown operation on a topic; bunka answers
 * INVALID_REQUEST, as Apache does for the same mistake on a broker resource.
 */
import {
  isTopicConfigName,
  TOPIC_CONFIG_DEFAULTS,
  type TopicConfigName,
  topicConfigForBrokerConfig,
  topicConfigType,
} from "../domain/topic-config.ts";
import { AclOperation } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type {
  IncrementalAlterConfigsRequest,
  IncrementalAlterConfigsRequest_AlterConfigsResource,
  IncrementalAlterConfigsRequest_AlterableConfig,
} from "../protocol/generated/incremental-alter-configs-request.ts";
import type { IncrementalAlterConfigsResponseInit } from "../protocol/generated/incremental-alter-configs-response.ts";
import type { BrokerConfigLayer } from "../storage/broker-config-store.ts";
import { ConfigResourceType, parseBrokerId } from "./32-describe-configs.ts";
import {
  alterEachResource,
  answerFor,
  brokerLayerOf,
  ConfigChanges,
  isOutcome,
  OK,
  type Outcome,
  refuse,
  requestedConfigsProblem,
  staticBrokerConfigsProblem,
} from "./config-changes.ts";
import { BrokerAuthorizer } from "./authorizer.ts";
import type { Handler, RequestContext } from "./handler.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

/** Apache's AlterConfigOp.OpType ids. */
export const ConfigOperation = { SET: 0, DELETE: 1, APPEND: 2, SUBTRACT: 3 } as const;
const OPERATION_NAMES = ["SET", "DELETE", "APPEND", "SUBTRACT"] as const;

type Resource = IncrementalAlterConfigsRequest_AlterConfigsResource;
type Op = IncrementalAlterConfigsRequest_AlterableConfig;

/**
 * Java's String.split(","), which Apache uses on list values: trailing empty strings are dropped, but an
 * empty string splits into one empty string.
 */
function javaSplit(value: string): string[] {
  const parts = value.split(",");
  while (parts.length > 1 && parts[parts.length - 1] === "") parts.pop();
  if (parts.length === 1 && parts[0] === "" && value !== "") return [];
  return parts;
}

/** APPEND or SUBTRACT of `opValue` to the list `current` (Apache's ConfigurationControlManager rules). */
function applyListOperation(operation: number, current: string, opValue: string): string {
  const list = javaSplit(current);
  for (const item of javaSplit(opValue)) {
    if (operation === ConfigOperation.APPEND) {
      if (!list.includes(item)) list.push(item);
    } else {
      const at = list.indexOf(item);
      if (at >= 0) list.splice(at, 1);
    }
  }
  return list.join(",");
}

/** The checks every resource type shares; null when the operations are well-formed. */
function operationsProblem(ops: readonly Op[]): Outcome | null {
  const malformed = requestedConfigsProblem(ops, (op) => op.configOperation !== ConfigOperation.DELETE);
  if (malformed !== null) return malformed;
  const unknown = ops.find((op) => op.configOperation < 0 || op.configOperation > 3);
  return unknown === undefined ? null : refuse(ErrorCode.INVALID_REQUEST, `Unknown operations type ${unknown.configOperation}`);
}

export function incrementalAlterConfigsHandler(
  services: BrokerServices,
  changes: ConfigChanges = new ConfigChanges(services),
): Handler<IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponseInit> {
  const { brokerConfigs, ownership } = services;

  const alterTopic = (resource: Resource, validateOnly: boolean): Promise<Outcome> =>
    changes.alterTopic(
      resource.resourceName,
      (current) => {
        const malformed = operationsProblem(resource.configs);
        if (malformed !== null) return malformed;
        // No prototype: a config named "__proto__" must be an ordinary (unknown, refused) key.
        const merged: Record<string, string> = Object.assign(Object.create(null), current);
        for (const op of resource.configs) {
          switch (op.configOperation) {
            case ConfigOperation.SET:
              merged[op.name] = op.value!;
              break;
            case ConfigOperation.DELETE:
              delete merged[op.name];
              break;
            default: {
              if (!isTopicConfigName(op.name) || topicConfigType(op.name) !== "LIST") {
                const verb = OPERATION_NAMES[op.configOperation];
                return refuse(ErrorCode.INVALID_CONFIG, `Can't ${verb} to key ${op.name} because its type is not LIST.`);
              }
              // A topic without its own value starts from the default it inherits.
              const base = merged[op.name] ?? services.runtimeConfig.topicDefaults()[op.name] ?? TOPIC_CONFIG_DEFAULTS[op.name];
              merged[op.name] = applyListOperation(op.configOperation, base, op.value!);
            }
          }
        }
        return merged;
      },
      validateOnly,
    );

  const alterBroker = (resource: Resource, validateOnly: boolean): Promise<Outcome> | Outcome => {
    const layer = brokerLayerOf(resource.resourceName, ownership.selfId);
    if (isOutcome(layer)) return layer;
    const malformed = operationsProblem(resource.configs);
    if (malformed !== null) return malformed;
    for (const op of resource.configs) {
      if (op.configOperation !== ConfigOperation.APPEND && op.configOperation !== ConfigOperation.SUBTRACT) continue;
      const topicName = topicConfigForBrokerConfig(op.name);
      if (topicName === undefined || topicConfigType(topicName) !== "LIST") {
        const verb = op.configOperation === ConfigOperation.APPEND ? "append" : "subtract";
        return refuse(ErrorCode.INVALID_CONFIG, `Config value ${verb} is not allowed for config key: ${op.name}`);
      }
    }
    // Apache checks only the configs a request sets: deleting one that cannot be set dynamically (or
    // that does not exist) changes nothing and succeeds.
    const fixed = staticBrokerConfigsProblem(resource.configs.filter((op) => op.configOperation !== ConfigOperation.DELETE).map((op) => op.name));
    if (fixed !== null) return fixed;
    return changes.alterBroker(
      layer,
      (current) => {
        const merged: Record<string, string> = { ...current };
        for (const op of resource.configs) {
          switch (op.configOperation) {
            case ConfigOperation.SET:
              merged[op.name] = op.value!;
              break;
            case ConfigOperation.DELETE:
              delete merged[op.name];
              break;
            default:
              merged[op.name] = applyListOperation(op.configOperation, merged[op.name] ?? inheritedBrokerDefault(layer, op.name), op.value!);
          }
        }
        return merged;
      },
      validateOnly,
    );
  };

  /**
   * What a broker layer's value of a LIST topic default replaces: the layers below it, then the static
   * value, then the built-in default. (APPEND and SUBTRACT reach no other broker config.)
   */
  const inheritedBrokerDefault = (layer: BrokerConfigLayer, brokerName: string): string => {
    const fromCluster = layer.kind === "broker" ? brokerConfigs.get({ kind: "cluster" })[brokerName] : undefined;
    const topicName = topicConfigForBrokerConfig(brokerName) as TopicConfigName;
    return fromCluster ?? brokerConfigs.staticTopicDefaults[topicName] ?? TOPIC_CONFIG_DEFAULTS[topicName];
  };

  const alterBrokerLogger = (resource: Resource): Outcome => {
    const name = resource.resourceName;
    const selfId = ownership.selfId;
    const id = parseBrokerId(name);
    if (id === undefined) return refuse(ErrorCode.INVALID_REQUEST, `Node id must be an integer, but it is: ${name}`);
    if (id !== selfId) return refuse(ErrorCode.INVALID_REQUEST, `Unexpected node id. Expected ${selfId}, but received ${name}`);
    const malformed = operationsProblem(resource.configs);
    if (malformed !== null) return malformed;
    for (const op of resource.configs) {
      if (op.configOperation === ConfigOperation.APPEND || op.configOperation === ConfigOperation.SUBTRACT) {
        const verb = OPERATION_NAMES[op.configOperation];
        return refuse(ErrorCode.INVALID_REQUEST, `${verb} operation is not allowed for the BROKER_LOGGER resource`);
      }
    }
    const first = resource.configs[0];
    if (first !== undefined) return refuse(ErrorCode.INVALID_CONFIG, `Logger ${first.name} does not exist!`);
    return OK;
  };

  const alter = async (resource: Resource, validateOnly: boolean): Promise<Outcome> => {
    switch (resource.resourceType) {
      case ConfigResourceType.TOPIC:
        return alterTopic(resource, validateOnly);
      case ConfigResourceType.BROKER:
        return alterBroker(resource, validateOnly);
      case ConfigResourceType.BROKER_LOGGER:
        return alterBrokerLogger(resource);
      case ConfigResourceType.CLIENT_METRICS:
        return refuse(ErrorCode.INVALID_REQUEST, "bunka does not support client metrics config resources");
      case ConfigResourceType.GROUP:
        return refuse(ErrorCode.INVALID_REQUEST, "bunka does not support group config resources");
      default:
        return refuse(ErrorCode.INVALID_REQUEST, `Unknown resource type ${resource.resourceType}`);
    }
  };

  const run = async (request: IncrementalAlterConfigsRequest, ctx: RequestContext): Promise<IncrementalAlterConfigsResponseInit> => ({
    throttleTimeMs: 0,
    // Authorization (broker/authorizer.ts): ALTER_CONFIGS on the topic, the group or the cluster (broker
    // resources), else that resource's *_AUTHORIZATION_FAILED, before anything else about it is checked.
    responses: await alterEachResource(request.resources, async (resource) => {
      const refused = services.authorizer.configResourceError(ctx, AclOperation.ALTER_CONFIGS, resource.resourceType, resource.resourceName);
      return refused !== ErrorCode.NONE ? { errorCode: refused, errorMessage: BrokerAuthorizer.configRefusalMessage(refused) } : alter(resource, request.validateOnly);
    }),
  });

  return {
    apiKey: 44,
    minVersion: 0,
    maxVersion: 1,
    handle(request, ctx) {
      // One request at a time (shared with AlterConfigs): each merges with the configs it read. Across
      // the cluster, under the metadata gate, which reads the files again first.
      return changes.serialize(() =>
        underGate(services, "IncrementalAlterConfigs", () => run(request, ctx), (reason) => ({
          throttleTimeMs: 0,
          responses: request.resources.map((r) => answerFor(r, { errorCode: ErrorCode.REQUEST_TIMED_OUT, errorMessage: reason })),
        })),
      );
    },
    errorResponse(request, errorCode) {
      return {
        throttleTimeMs: 0,
        responses: request.resources.map((r) => answerFor(r, { errorCode, errorMessage: null })),
      };
    },
  };
}
