/**
 * IncrementalAlterConfigs (key 44), versions 0-1.
 *
 * Applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) operations to configs, per resource, with the
 * checks, codes and messages of Apache Kafka (KafkaApis / ConfigAdminManager on the broker,
 * ConfigurationControlManager and ControllerConfigurationValidator on the KRaft controller):
 * - Any resource: the same (type, name) twice in one request -> INVALID_REQUEST for every copy; a config
 *   name twice in one resource -> INVALID_REQUEST; a null value for anything but DELETE -> INVALID_REQUEST;
 *   an unknown operation -> INVALID_REQUEST.
 * - TOPIC (2): "" -> INVALID_REQUEST; an illegal name -> INVALID_TOPIC_EXCEPTION; APPEND / SUBTRACT on a
 *   config that is not a LIST -> INVALID_CONFIG; the merged configs are validated with the topic config
 *   rules -> INVALID_CONFIG (before the existence check, as Apache); unknown topic ->
 *   UNKNOWN_TOPIC_OR_PARTITION. The new configs are durable (TopicStore.setConfigs) before the answer.
 * - BROKER (4): "" is the cluster-wide default, this broker's id its own layer (see
 *   storage/broker-config-store.ts); another id or a non-integer -> INVALID_REQUEST. Only the
 *   broker-level topic defaults (log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms,
 *   message.max.bytes, log.message.timestamp.type, log.cleanup.policy) can change; any other name ->
 *   INVALID_REQUEST "Cannot update these configs dynamically: Set(...)", Apache's answer for a
 *   non-dynamic config (deleting such a name succeeds and changes nothing, as in Apache). Invalid
 *   values -> INVALID_REQUEST (Apache's code for broker configs). The change is durable before the
 *   answer, then applied to services.config.topicConfigDefaults, so topics without their own value
 *   follow it at once.
 * - BROKER_LOGGER (8): Apache's id checks; bunka has no named loggers, so every logger is unknown
 *   (INVALID_CONFIG "Logger X does not exist!").
 * - CLIENT_METRICS (16), GROUP (32): INVALID_REQUEST (bunka has neither); other types: INVALID_REQUEST
 *   "Unknown resource type N".
 * validateOnly runs every check and changes nothing. Requests are applied one at a time, so two
 * concurrent changes to one resource cannot lose either's update.
 *
 * By version: v1 is v0 made flexible.
 *
 * Deliberately not done: authorization, alter-config policies, per-listener broker configs, and pushing
 * a cluster-wide default to other brokers sharing the data directory while they run (they read it when
 * they start). Apache answers UNKNOWN_SERVER_ERROR for an unknown operation on a topic; bunka answers
 * INVALID_REQUEST, as Apache does for the same mistake on a broker resource.
 */
import {
  BROKER_CONFIG_FOR_TOPIC_CONFIG,
  TOPIC_CONFIG_DEFAULTS,
  brokerTopicDefaultProblem,
  isTopicConfigName,
  topicConfigForBrokerConfig,
  topicConfigProblems,
  topicConfigType,
} from "../domain/topic-config.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type {
  IncrementalAlterConfigsRequest,
  IncrementalAlterConfigsRequest_AlterConfigsResource,
  IncrementalAlterConfigsRequest_AlterableConfig,
} from "../protocol/generated/incremental-alter-configs-request.ts";
import type {
  IncrementalAlterConfigsResponseInit,
  IncrementalAlterConfigsResponse_AlterConfigsResourceResponseInit,
} from "../protocol/generated/incremental-alter-configs-response.ts";
import type { BrokerConfigLayer } from "../storage/broker-config-store.ts";
import { ConfigResourceType, parseBrokerId } from "./32-describe-configs.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

/** Apache's AlterConfigOp.OpType ids. */
export const ConfigOperation = { SET: 0, DELETE: 1, APPEND: 2, SUBTRACT: 3 } as const;
const OPERATION_NAMES = ["SET", "DELETE", "APPEND", "SUBTRACT"] as const;

type Resource = IncrementalAlterConfigsRequest_AlterConfigsResource;
type Op = IncrementalAlterConfigsRequest_AlterableConfig;
type Response = IncrementalAlterConfigsResponse_AlterConfigsResourceResponseInit;
type Outcome = { errorCode: number; errorMessage: string | null };

const OK: Outcome = { errorCode: ErrorCode.NONE, errorMessage: null };
const refuse = (errorCode: number, errorMessage: string): Outcome => ({ errorCode, errorMessage });

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
  const names = new Set<string>();
  for (const op of ops) {
    if (names.has(op.name)) return refuse(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys");
    names.add(op.name);
  }
  for (const op of ops) {
    if (op.configOperation < 0 || op.configOperation > 3) {
      return refuse(ErrorCode.INVALID_REQUEST, `Unknown operations type ${op.configOperation}`);
    }
    if (op.configOperation !== ConfigOperation.DELETE && op.value === null) {
      return refuse(ErrorCode.INVALID_REQUEST, `Null value not supported for : ${op.name}`);
    }
  }
  return null;
}

export function incrementalAlterConfigsHandler(
  services: BrokerServices,
): Handler<IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponseInit> {
  const { topics, brokerConfigs, ownership } = services;
  let tail: Promise<unknown> = Promise.resolve();

  const alterTopic = async (resource: Resource, validateOnly: boolean): Promise<Outcome> => {
    const name = resource.resourceName;
    if (name === "") return refuse(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.");
    const nameReason = topicNameInvalidReason(name);
    if (nameReason !== null) return refuse(ErrorCode.INVALID_TOPIC_EXCEPTION, nameReason);
    const malformed = operationsProblem(resource.configs);
    if (malformed !== null) return malformed;

    const topic = topics.get(name);
    const current = topic?.configs ?? {};
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
          const base = merged[op.name] ?? services.config.topicConfigDefaults[op.name] ?? TOPIC_CONFIG_DEFAULTS[op.name];
          merged[op.name] = applyListOperation(op.configOperation, base, op.value!);
        }
      }
    }
    const problem = topicConfigProblems(merged)[0];
    if (problem !== undefined) return refuse(ErrorCode.INVALID_CONFIG, problem.reason);
    if (topic === undefined) return refuse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `The topic '${name}' does not exist.`);
    if (validateOnly || sameConfigs(current, merged)) return OK;

    const changed = await topics.setConfigs(name, merged);
    if (!changed.ok) {
      const message = changed.error === "UNKNOWN_TOPIC_OR_PARTITION" ? `The topic '${name}' does not exist.` : changed.message;
      return refuse(ErrorCode[changed.error], message);
    }
    services.log.info("altered topic configs", { topic: name, configs: merged });
    return OK;
  };

  const alterBroker = async (resource: Resource, validateOnly: boolean): Promise<Outcome> => {
    const name = resource.resourceName;
    const selfId = ownership.selfId;
    let layer: BrokerConfigLayer;
    if (name === "") {
      layer = { kind: "cluster" };
    } else {
      const id = parseBrokerId(name);
      if (id === undefined) return refuse(ErrorCode.INVALID_REQUEST, `Node id must be an integer, but it is: ${name}`);
      if (id !== selfId) return refuse(ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${selfId}, but received ${name}`);
      layer = { kind: "broker", brokerId: id };
    }
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
    const fixed = resource.configs
      .filter((op) => op.configOperation !== ConfigOperation.DELETE && topicConfigForBrokerConfig(op.name) === undefined)
      .map((op) => op.name);
    if (fixed.length > 0) {
      return refuse(ErrorCode.INVALID_REQUEST, `Cannot update these configs dynamically: Set(${fixed.join(", ")})`);
    }

    const current = brokerConfigs.get(layer);
    const merged: Record<string, string> = { ...current };
    for (const op of resource.configs) {
      const topicName = topicConfigForBrokerConfig(op.name);
      if (topicName === undefined) continue; // a DELETE of a config that is never stored
      switch (op.configOperation) {
        case ConfigOperation.SET:
          merged[op.name] = op.value!;
          break;
        case ConfigOperation.DELETE:
          delete merged[op.name];
          break;
        default: {
          const base = merged[op.name] ?? inheritedBrokerDefault(layer, topicName);
          merged[op.name] = applyListOperation(op.configOperation, base, op.value!);
        }
      }
    }
    for (const brokerName of Object.keys(merged).sort()) {
      const problem = brokerTopicDefaultProblem(brokerName, merged[brokerName]!);
      // Apache validates broker configs in DynamicBrokerConfig, which answers INVALID_REQUEST.
      if (problem !== null) return refuse(ErrorCode.INVALID_REQUEST, problem.reason);
    }
    if (validateOnly || sameConfigs(current, merged)) return OK;

    await brokerConfigs.set(layer, merged);
    services.config.topicConfigDefaults = brokerConfigs.topicDefaults();
    services.log.info("altered broker configs", { resource: name === "" ? "cluster default" : `broker ${name}`, configs: merged });
    return OK;
  };

  /** What a broker layer's value replaces: the layers below it, then the built-in default. */
  const inheritedBrokerDefault = (layer: BrokerConfigLayer, topicName: keyof typeof TOPIC_CONFIG_DEFAULTS): string => {
    const brokerName = BROKER_CONFIG_FOR_TOPIC_CONFIG[topicName];
    const fromCluster = layer.kind === "broker" ? brokerConfigs.get({ kind: "cluster" })[brokerName] : undefined;
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

  const respond = (resource: Resource, outcome: Outcome): Response => ({
    errorCode: outcome.errorCode,
    errorMessage: outcome.errorMessage,
    resourceType: resource.resourceType,
    resourceName: resource.resourceName,
  });

  const run = async (request: IncrementalAlterConfigsRequest): Promise<IncrementalAlterConfigsResponseInit> => {
    const key = (r: Resource) => `${r.resourceType}:${r.resourceName}`;
    const counts = new Map<string, number>();
    for (const r of request.resources) counts.set(key(r), (counts.get(key(r)) ?? 0) + 1);
    const responses: Response[] = [];
    for (const resource of request.resources) {
      if (counts.get(key(resource))! > 1) {
        responses.push(respond(resource, refuse(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")));
        continue;
      }
      responses.push(respond(resource, await alter(resource, request.validateOnly)));
    }
    return { throttleTimeMs: 0, responses };
  };

  return {
    apiKey: 44,
    minVersion: 0,
    maxVersion: 1,
    handle(request) {
      // One request at a time: each merges with the configs it read, so an overlap could lose an update.
      const result = tail.then(() => run(request));
      tail = result.catch(() => undefined);
      return result;
    },
    errorResponse(request, errorCode) {
      return {
        throttleTimeMs: 0,
        responses: request.resources.map((r) => respond(r, { errorCode, errorMessage: null })),
      };
    },
  };
}

function sameConfigs(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
