/**
 * What AlterConfigs (33) and IncrementalAlterConfigs (44) share: the checks, codes and messages of a
 * config change to a topic or a broker, as Apache Kafka 4.1.1 answers them (KafkaApis, ConfigAdminManager,
 * ControllerConfigurationValidator, DynamicBrokerConfig), and applying it durably. The two handlers
 * differ only in how they compute a resource's new configs: AlterConfigs replaces them (a config not
 * named goes back to its default), IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT.
 *
 * - TOPIC: "" -> INVALID_REQUEST; an illegal name -> INVALID_TOPIC_EXCEPTION; then the new configs are
 *   validated with the topic config rules (the broker-level defaults taking part, as in Apache) ->
 *   INVALID_CONFIG; only then an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION "The topic 't' does not
 *   exist." This order is Apache 4.1.1's for every version of both APIs, validateOnly or not: a bad value
 *   for a missing topic is INVALID_CONFIG. The new configs are durable (TopicStore.setConfigs) before
 *   the answer.
 * - BROKER: "" is the cluster-wide default, this broker's id its own layer (storage/broker-config-store.ts);
 *   a non-integer or another broker's id -> INVALID_REQUEST. Settable at runtime: the broker-level topic
 *   defaults (BROKER_CONFIG_FOR_TOPIC_CONFIG) and the cleaner settings Apache reconfigures at runtime
 *   (every log.cleaner.* setting but log.cleaner.enable). Setting any other name -> INVALID_REQUEST
 *   "Cannot update these configs dynamically: Set(...)", Apache's answer for a static config; bunka gives
 *   it for unknown names too, which Apache stores and ignores. Invalid values and cleaner changes Apache
 *   refuses (threads beyond double or below half the current count, under 1 MiB of dedupe buffer per
 *   thread) -> INVALID_REQUEST, Apache's code for broker configs. The change goes through
 *   services.runtimeConfig (runtime-config.ts): durable before the answer, and in effect then, so topics
 *   without their own value (open partitions included) and the cleaner follow it at once. The static
 *   configuration, services.config, never changes.
 * Changes run one at a time across both APIs: each merges with the configs it read, so two overlapping
 * changes to one resource could otherwise lose one. Across the brokers of a cluster they also run under
 * the metadata gate (metadata-mutations.ts), which reads the topic and broker config files again first;
 * `reloadBrokerConfigs` is how a broker takes up broker configs another broker changed.
 */
import {
  cleanerReconfigurationProblem,
  cleanerSettingProblem,
  isCleanerSetting,
  isDynamicCleanerSetting,
} from "../domain/cleaner-config.ts";
import { brokerTopicDefaultProblem, topicConfigForBrokerConfig, topicConfigProblems } from "../domain/topic-config.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { BrokerConfigLayer } from "../storage/broker-config-store.ts";
import { configTopicNameProblem, parseBrokerId } from "./32-describe-configs.ts";
import type { BrokerServices } from "./services.ts";

export type Outcome = { errorCode: number; errorMessage: string | null };

/**
 * Reads the dynamic broker configs again (another broker sharing the data directory may have changed
 * them) and, when they differ, makes the running broker follow them as a change made here would (the
 * runtime config's values in effect replaced, its listeners told). Resolves whether they changed.
 */
export async function reloadBrokerConfigs(services: Pick<BrokerServices, "brokerConfigs" | "runtimeConfig" | "log">): Promise<boolean> {
  const { brokerConfigs, runtimeConfig, log } = services;
  if (!(await runtimeConfig.refresh())) return false;
  log.info("read broker configs changed by another broker", { clusterDefault: brokerConfigs.get({ kind: "cluster" }), own: brokerConfigs.get({ kind: "broker", brokerId: brokerConfigs.brokerId }) });
  return true;
}

export const OK: Outcome = { errorCode: ErrorCode.NONE, errorMessage: null };
export const refuse = (errorCode: number, errorMessage: string): Outcome => ({ errorCode, errorMessage });

/** One config of a request: a name and its value (null for IncrementalAlterConfigs' DELETE). */
export interface RequestedConfig {
  name: string;
  value: string | null;
}

/** The new configs of a resource, computed from its current ones, or the refusal of the request. */
export type ComputeConfigs = (current: Readonly<Record<string, string>>) => Record<string, string> | Outcome;

/** The checks every resource type shares: the same name twice, a null value where one is needed. */
export function requestedConfigsProblem<C extends RequestedConfig>(configs: readonly C[], valueNeeded: (config: C) => boolean): Outcome | null {
  const names = new Set<string>();
  for (const config of configs) {
    if (names.has(config.name)) return refuse(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys");
    names.add(config.name);
  }
  for (const config of configs) {
    if (config.value === null && valueNeeded(config)) {
      return refuse(ErrorCode.INVALID_REQUEST, `Null value not supported for : ${config.name}`);
    }
  }
  return null;
}

/** Where a broker resource's changes go, or the refusal of its name. */
export function brokerLayerOf(name: string, selfId: number): BrokerConfigLayer | Outcome {
  if (name === "") return { kind: "cluster" };
  const id = parseBrokerId(name);
  if (id === undefined) return refuse(ErrorCode.INVALID_REQUEST, `Node id must be an integer, but it is: ${name}`);
  if (id !== selfId) return refuse(ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${selfId}, but received ${name}`);
  return { kind: "broker", brokerId: id };
}

/** Whether a broker config may be set at runtime: a broker-level topic default or a dynamic cleaner setting. */
export function isDynamicBrokerConfig(name: string): boolean {
  return topicConfigForBrokerConfig(name) !== undefined || isDynamicCleanerSetting(name);
}

/** The refusal of setting names that cannot change at runtime, in request order, or null. */
export function staticBrokerConfigsProblem(names: readonly string[]): Outcome | null {
  const fixed = names.filter((name) => !isDynamicBrokerConfig(name));
  if (fixed.length === 0) return null;
  return refuse(ErrorCode.INVALID_REQUEST, `Cannot update these configs dynamically: Set(${fixed.join(", ")})`);
}

/** A resource of AlterConfigs or IncrementalAlterConfigs, as both requests name it. */
export interface NamedConfigResource {
  resourceType: number;
  resourceName: string;
}

export interface ConfigResourceAnswer extends Outcome {
  resourceType: number;
  resourceName: string;
}

/** The answer to one resource: its outcome with the resource it is for. */
export function answerFor(resource: NamedConfigResource, outcome: Outcome): ConfigResourceAnswer {
  return { errorCode: outcome.errorCode, errorMessage: outcome.errorMessage, resourceType: resource.resourceType, resourceName: resource.resourceName };
}

/**
 * Alters the resources of one request in order, as both AlterConfigs and IncrementalAlterConfigs do:
 * a resource named twice is INVALID_REQUEST in every copy (Apache refuses the request's duplicates), the
 * others are applied one after the other.
 */
export async function alterEachResource<R extends NamedConfigResource>(
  resources: readonly R[],
  alter: (resource: R) => Promise<Outcome>,
): Promise<ConfigResourceAnswer[]> {
  const key = (r: R) => `${r.resourceType}:${r.resourceName}`;
  const counts = new Map<string, number>();
  for (const r of resources) counts.set(key(r), (counts.get(key(r)) ?? 0) + 1);
  const answers: ConfigResourceAnswer[] = [];
  for (const resource of resources) {
    if (counts.get(key(resource))! > 1) {
      answers.push(answerFor(resource, refuse(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")));
      continue;
    }
    answers.push(answerFor(resource, await alter(resource)));
  }
  return answers;
}

export function isOutcome(value: unknown): value is Outcome {
  return typeof value === "object" && value !== null && "errorCode" in value;
}

export class ConfigChanges {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly services: BrokerServices) {}

  /** Runs `change` after every change queued before it. */
  serialize<T>(change: () => Promise<T>): Promise<T> {
    const result = this.tail.then(change);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Changes a topic's configs to what `compute` makes of its current ones (see the file comment). */
  async alterTopic(name: string, compute: ComputeConfigs, validateOnly: boolean): Promise<Outcome> {
    const { topics, runtimeConfig, log } = this.services;
    if (name === "") return refuse(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.");
    const nameProblem = configTopicNameProblem(name);
    if (nameProblem !== null) return refuse(ErrorCode.INVALID_TOPIC_EXCEPTION, nameProblem);
    const topic = topics.get(name);
    const current = topic?.configs ?? {};
    const next = compute(current);
    if (isOutcome(next)) return next;
    const problem = topicConfigProblems(next, runtimeConfig.topicDefaults())[0];
    if (problem !== undefined) return refuse(ErrorCode.INVALID_CONFIG, problem.reason);
    if (topic === undefined) return refuse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `The topic '${name}' does not exist.`);
    if (validateOnly || sameConfigs(current, next)) return OK;

    const changed = await topics.setConfigs(name, next);
    if (!changed.ok) {
      const message = changed.error === "UNKNOWN_TOPIC_OR_PARTITION" ? `The topic '${name}' does not exist.` : changed.message;
      return refuse(ErrorCode[changed.error], message);
    }
    log.info("altered topic configs", { topic: name, configs: next });
    return OK;
  }

  /**
   * Changes one broker layer's dynamic configs to what `compute` makes of its current ones. The caller
   * has checked the resource name (brokerLayerOf) and refused names that cannot change at runtime.
   */
  async alterBroker(layer: BrokerConfigLayer, compute: ComputeConfigs, validateOnly: boolean): Promise<Outcome> {
    const { brokerConfigs, runtimeConfig, log } = this.services;
    const current = brokerConfigs.get(layer);
    const next = compute(current);
    if (isOutcome(next)) return next;
    for (const name of Object.keys(next).sort()) {
      const reason = brokerConfigProblem(name, next[name]!);
      // Apache validates broker configs in DynamicBrokerConfig, which answers INVALID_REQUEST.
      if (reason !== null) return refuse(ErrorCode.INVALID_REQUEST, reason);
    }
    const effective = brokerConfigs.effectiveWith(layer, next);
    if (!sameCleaner(runtimeConfig.cleaner(), effective.cleaner)) {
      const reason = cleanerReconfigurationProblem(runtimeConfig.cleaner(), effective.cleaner);
      if (reason !== null) return refuse(ErrorCode.INVALID_REQUEST, reason);
    }
    if (validateOnly || sameConfigs(current, next)) return OK;

    await runtimeConfig.set(layer, next);
    const resource = layer.kind === "cluster" ? "cluster default" : `broker ${layer.brokerId}`;
    log.info("altered broker configs", { resource, configs: next });
    return OK;
  }
}

/** Why a dynamic broker config's value is not acceptable (Apache's wording), or null. */
function brokerConfigProblem(name: string, value: string): string | null {
  if (isCleanerSetting(name)) return cleanerSettingProblem(name, value);
  return brokerTopicDefaultProblem(name, value)?.reason ?? null;
}

function sameCleaner(a: object, b: object): boolean {
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  return Object.keys(left).every((key) => Object.is(left[key], right[key]));
}

export function sameConfigs(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
