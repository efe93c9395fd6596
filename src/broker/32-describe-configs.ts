/**
 * DescribeConfigs (key 32), versions 0-4.
 *
 * Per resource, as Apache Kafka's ConfigHelper answers:
 * - TOPIC (2): every one of Apache 4.1's topic configs (domain/topic-config.ts: the ones bunka honours
 *   and the ones it accepts without effect), with its effective value as Apache prints it after parsing
 *   ("1" for a DOUBLE shows "1.0"). The source is the first of its synonyms: the topic's own value
 *   (DYNAMIC_TOPIC_CONFIG), else the broker-level default set dynamically for this broker
 *   (DYNAMIC_BROKER_CONFIG) or the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG), else the static configuration
 *   (STATIC_BROKER_CONFIG), else the built-in default (DEFAULT_CONFIG); a config without a broker-level
 *   synonym (remote.*, the replication throttles) has no synonym but its own value, as in Apache, and
 *   neither has a default whose Apache broker config has none of its own (log.retention.ms, log.roll.ms,
 *   log.roll.jitter.ms, log.flush.interval.ms derive theirs from settings bunka does not have, such as
 *   log.retention.hours): no DEFAULT_CONFIG synonym, and a broker shows them null until they are set.
 *   An illegal name -> INVALID_TOPIC_EXCEPTION; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION with an
 *   empty message, Apache 4.1.1's answer in every version.
 * - BROKER (4): resource name = this broker's id -> the broker configs bunka honours or accepts, with the
 *   values in effect; "" -> only the cluster-wide dynamic defaults currently set (Apache lists nothing
 *   else there); another id or a non-integer -> INVALID_REQUEST with Apache's messages. Writable
 *   (readOnly false) are the ones IncrementalAlterConfigs and AlterConfigs may change: the broker-level
 *   topic defaults and the log.cleaner.* settings but log.cleaner.enable.
 * - BROKER_LOGGER (8): the same id checks as Apache; for this broker an empty list, because bunka has
 *   no named loggers whose level can be read or changed at runtime.
 * - CLIENT_METRICS (16) and GROUP (32): INVALID_REQUEST for that resource (Apache has them; bunka not).
 * - Any other type makes Apache reject the whole request: every resource gets INVALID_REQUEST.
 * configurationKeys null or empty lists everything; otherwise only the named configs, and unknown names
 * are simply absent (as in Apache). Values are never sensitive. Configs are listed in name order.
 *
 * By version: v0 has isDefault (true when the source is DEFAULT_CONFIG) and no source or synonyms; v1
 * adds configSource and, with includeSynonyms, the synonyms (empty otherwise); v2 is v1; v3 adds
 * configType (Apache's ConfigType ids) and, with includeDocumentation, a short description (null
 * otherwise); v4 is flexible.
 *
 * Authorization (broker/authorizer.ts): DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the
 * group (GROUP_AUTHORIZATION_FAILED) or the cluster for broker resources (CLUSTER_AUTHORIZATION_FAILED).
 *
 * Deliberately not done: the broker configs of Apache that
 * bunka has no counterpart for (they are not listed, rather than listed with values that mean nothing
 * here), and Apache's derived synonyms such as log.retention.hours / log.roll.hours (bunka has no such
 * settings).
 * The STATIC_BROKER_CONFIG / DEFAULT_CONFIG split of broker settings other than the topic defaults is
 * inferred by comparing with bunka's defaults, so a value set explicitly to its default reads as default.
 */
import {
  CLEANER_SETTING_NAMES,
  type CleanerSettingName,
  cleanerSettingDefault,
  cleanerSettingType,
  cleanerSettingValue,
  isCleanerSetting,
  isDynamicCleanerSetting,
} from "../domain/cleaner-config.ts";
import { canonicalValue, type ConfigType as ValueType } from "../domain/config-values.ts";
import {
  BROKER_CONFIG_FOR_TOPIC_CONFIG,
  BROKER_TOPIC_DEFAULT_NAMES,
  brokerSynonymHasDefault,
  canonicalTopicConfigValue,
  TOPIC_CONFIG_DEFAULTS,
  TOPIC_CONFIG_NAMES,
  type TopicConfigName,
  topicConfigForBrokerConfig,
  topicConfigType,
} from "../domain/topic-config.ts";
import { TOPIC_NAME_LENGTH_MAX } from "../domain/topic-name.ts";
import { AclOperation } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { CreateTopicsResponse_CreatableTopicConfigsInit } from "../protocol/generated/create-topics-response.ts";
import type {
  DescribeConfigsRequest,
  DescribeConfigsRequest_DescribeConfigsResource,
} from "../protocol/generated/describe-configs-request.ts";
import type {
  DescribeConfigsResponseInit,
  DescribeConfigsResponse_DescribeConfigsResourceResultInit,
  DescribeConfigsResponse_DescribeConfigsResultInit,
  DescribeConfigsResponse_DescribeConfigsSynonymInit,
} from "../protocol/generated/describe-configs-response.ts";
import { type BrokerConfig, defaultBrokerConfig } from "./config.ts";
import { BrokerAuthorizer } from "./authorizer.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

/** Apache's ConfigResource.Type ids. */
export const ConfigResourceType = { TOPIC: 2, BROKER: 4, BROKER_LOGGER: 8, CLIENT_METRICS: 16, GROUP: 32 } as const;

/** Apache's DescribeConfigsResponse.ConfigSource ids. */
export const ConfigSource = {
  DYNAMIC_TOPIC_CONFIG: 1,
  DYNAMIC_BROKER_CONFIG: 2,
  DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
  STATIC_BROKER_CONFIG: 4,
  DEFAULT_CONFIG: 5,
  DYNAMIC_BROKER_LOGGER_CONFIG: 6,
} as const;

/** Apache's DescribeConfigsResponse.ConfigType ids (v3+). */
export const ConfigType = { BOOLEAN: 1, STRING: 2, INT: 3, SHORT: 4, LONG: 5, DOUBLE: 6, LIST: 7, CLASS: 8, PASSWORD: 9 } as const;

const TYPE_IDS: Record<ValueType, number> = {
  BOOLEAN: ConfigType.BOOLEAN,
  DOUBLE: ConfigType.DOUBLE,
  INT: ConfigType.INT,
  LIST: ConfigType.LIST,
  LONG: ConfigType.LONG,
  STRING: ConfigType.STRING,
};

/** Errors.INVALID_REQUEST's default message: what Apache sends when it rejects the whole request. */
const INVALID_REQUEST_DEFAULT_MESSAGE =
  "This most likely occurs because of a request being malformed by the client library or the message was sent " +
  "to an incompatible broker. See the broker logs for more details.";

/** Why a config is accepted although bunka gives it no effect, appended to its description. */
const NO_EFFECT = "Accepted for compatibility; no effect in bunka:";

/** Short descriptions of what each topic config does in bunka (the README lists the same). */
const TOPIC_CONFIG_DOCS: Record<TopicConfigName, string> = {
  "cleanup.policy":
    "The retention policy of old log segments: \"delete\" deletes segments beyond the retention time or " +
    "size, \"compact\" keeps the latest record of every key (log compaction); both may be given, and an " +
    "empty list removes nothing.",
  "compression.gzip.level": "The gzip level used when bunka compresses a batch in gzip (compression.type=gzip).",
  "compression.lz4.level": "The lz4 level used when bunka compresses a batch in lz4 (compression.type=lz4).",
  "compression.type":
    "The codec batches are stored in: \"producer\" keeps the producer's, \"uncompressed\", gzip, snappy, " +
    "lz4 or zstd recompresses every batch sent in another codec.",
  "compression.zstd.level": "The zstd level used when bunka compresses a batch in zstd (compression.type=zstd).",
  "delete.retention.ms":
    "How long tombstones and the markers of emptied transactions stay in a compacted log after the cleaner first keeps them.",
  "file.delete.delay.ms": `${NO_EFFECT} deleted segment files are removed at once, not renamed and removed later.`,
  "flush.messages": `${NO_EFFECT} an acks=-1 write is answered only once it is fsynced, whatever the count of unflushed messages.`,
  "flush.ms": `${NO_EFFECT} an acks=-1 write is answered only once it is fsynced, whatever the time since the last flush.`,
  "follower.replication.throttled.replicas": `${NO_EFFECT} there is one copy of each partition, so no replication to throttle.`,
  "index.interval.bytes": `${NO_EFFECT} bunka adds an offset index entry every 4096 bytes.`,
  "leader.replication.throttled.replicas": `${NO_EFFECT} there is one copy of each partition, so no replication to throttle.`,
  "local.retention.bytes": `${NO_EFFECT} it applies to tiered storage, which bunka does not have.`,
  "local.retention.ms": `${NO_EFFECT} it applies to tiered storage, which bunka does not have.`,
  "max.compaction.lag.ms": "The longest time a record stays ineligible for compaction once written.",
  "max.message.bytes": "The largest record batch size, in bytes, that the topic accepts.",
  "message.timestamp.after.max.ms":
    "How far in the future a CreateTime record's timestamp may be. bunka does not check it yet and accepts only the default.",
  "message.timestamp.before.max.ms":
    "How far in the past a CreateTime record's timestamp may be. bunka does not check it yet and accepts only the default (no bound).",
  "message.timestamp.type":
    "Whether record timestamps are the producer's (CreateTime) or set by the broker when appended (LogAppendTime).",
  "min.cleanable.dirty.ratio": "The ratio of uncleaned bytes to all cleanable bytes at which the log cleaner cleans a compacted log.",
  "min.compaction.lag.ms": "The shortest time a record stays uncompacted once written.",
  "min.insync.replicas":
    `${NO_EFFECT} there is one copy of each partition, made durable by fsync before an acks=-1 write is answered; ` +
    "no write is refused with NOT_ENOUGH_REPLICAS.",
  preallocate: `${NO_EFFECT} segment files grow as they are written.`,
  "remote.log.copy.disable": `${NO_EFFECT} it applies to tiered storage, which bunka does not have.`,
  "remote.log.delete.on.disable": `${NO_EFFECT} it applies to tiered storage, which bunka does not have.`,
  "remote.storage.enable": "Tiered storage. bunka does not have it: only false is accepted.",
  "retention.bytes": "The maximum size of a partition's log before old segments are deleted; a negative value means no size limit.",
  "retention.ms": "How long a log segment is kept before it is deleted, in milliseconds; -1 means no time limit.",
  "segment.bytes": "The size of a single log segment file; retention and compaction work on whole segments.",
  "segment.index.bytes": `${NO_EFFECT} bunka's indexes grow with their segment; a segment never rolls because its index is full.`,
  "segment.jitter.ms": `${NO_EFFECT} segments roll exactly at segment.ms.`,
  "segment.ms": "The time after which the active segment is rolled even if it is not full, in milliseconds.",
  "unclean.leader.election.enable": `${NO_EFFECT} there is one copy of each partition, so no other replica to elect.`,
};

/** Descriptions of the log cleaner's settings. */
const CLEANER_SETTING_DOCS: Record<CleanerSettingName, string> = {
  "log.cleaner.backoff.ms": "How long the log cleaner waits when no log needs cleaning.",
  "log.cleaner.dedupe.buffer.size": "The memory for the log cleaner's offset maps, shared by its threads (more than 1 MiB each).",
  "log.cleaner.enable": "Whether the log cleaner runs; without it compacted topics grow without bound. Changed by a restart only.",
  "log.cleaner.io.buffer.load.factor": "How full an offset map of the log cleaner may get before a pass stops taking more of the log.",
  "log.cleaner.io.buffer.size": "The memory for the log cleaner's read and write buffers, shared by its threads.",
  "log.cleaner.io.max.bytes.per.second": "The rate of reads and writes all log cleaner threads together stay under.",
  "log.cleaner.threads": "How many partitions the log cleaner cleans at once.",
};

/** The broker settings bunka honours other than the topic defaults: read-only at runtime. */
interface StaticBrokerSetting {
  name: string;
  type: number;
  value: (config: BrokerConfig) => string;
  doc: string;
}

const STATIC_BROKER_SETTINGS: readonly StaticBrokerSetting[] = [
  {
    name: "auto.create.topics.enable",
    type: ConfigType.BOOLEAN,
    value: (c) => String(c.autoCreateTopicsEnable),
    doc: "Whether Metadata requests create unknown topics.",
  },
  {
    name: "broker.id",
    type: ConfigType.INT,
    value: (c) => String(c.brokerId),
    doc: "The id of this broker.",
  },
  {
    name: "connections.max.idle.ms",
    type: ConfigType.LONG,
    value: (c) => String(c.connectionsMaxIdleMs),
    doc: "Idle connections are closed after this many milliseconds; 0 or less never closes them.",
  },
  {
    name: "group.initial.rebalance.delay.ms",
    type: ConfigType.INT,
    value: (c) => String(c.groupInitialRebalanceDelayMs),
    doc: "How long the group coordinator waits for more members before the first rebalance of a new group.",
  },
  {
    name: "max.connections",
    type: ConfigType.INT,
    value: (c) => String(c.maxConnections),
    doc: "Connections beyond this number are closed when accepted.",
  },
  {
    name: "num.partitions",
    type: ConfigType.INT,
    value: (c) => String(c.numPartitions),
    doc: "The partition count of auto-created topics and of CreateTopics requests that ask for the default.",
  },
  {
    name: "offsets.retention.minutes",
    type: ConfigType.INT,
    value: (c) => String(Math.round(c.offsetsRetentionMs / 60_000)),
    doc: "How long committed offsets of an empty group are kept, in minutes.",
  },
  {
    name: "producer.id.expiration.ms",
    type: ConfigType.INT,
    value: (c) => String(c.producerIdExpirationMs),
    doc: "How long the state of a producer id without an open transaction is kept after its last write.",
  },
  {
    name: "socket.request.max.bytes",
    type: ConfigType.INT,
    value: (c) => String(c.socketRequestMaxBytes),
    doc: "The largest request frame accepted; a bigger one closes the connection.",
  },
  {
    name: "transaction.max.timeout.ms",
    type: ConfigType.INT,
    value: (c) => String(c.transactionMaxTimeoutMs),
    doc: "The largest transaction timeout a transactional producer may ask for.",
  },
];

/**
 * Why `name` cannot be a topic in a config request, in the wording Apache 4.1.1 uses for these APIs
 * (which differs from CreateTopics'), or null. The empty name is each API's own case.
 */
export function configTopicNameProblem(name: string): string | null {
  if (name === "." || name === "..") return `Topic name is invalid: '${name}' is not allowed`;
  if (name.length > TOPIC_NAME_LENGTH_MAX) {
    return `Topic name is invalid: the length of '${name}' is longer than the max allowed length ${TOPIC_NAME_LENGTH_MAX}`;
  }
  if (!/^[a-zA-Z0-9._-]*$/.test(name)) {
    return `Topic name is invalid: '${name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'`;
  }
  return null;
}

/** One topic config as DescribeConfigs and CreateTopics report it. */
export interface TopicConfigEntry {
  name: TopicConfigName;
  value: string;
  source: number;
  synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[];
  type: number;
  doc: string;
}

/**
 * Every topic config of a topic whose own configs are `own`, with where its value comes from, in name
 * order. `printed` shows values as Apache prints them after parsing (DescribeConfigs); otherwise the
 * topic's own values are shown as they were given (CreateTopics answers them so).
 */
export function topicConfigEntries(services: BrokerServices, own: Readonly<Record<string, string>>, printed: boolean): TopicConfigEntry[] {
  const { brokerConfigs, ownership } = services;
  const show = (name: TopicConfigName, value: string) => (printed ? canonicalTopicConfigValue(name, value) : value);
  return TOPIC_CONFIG_NAMES.map((name) => {
    const synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[] = [];
    const ownValue = own[name];
    if (ownValue !== undefined) synonyms.push({ name, value: show(name, ownValue), source: ConfigSource.DYNAMIC_TOPIC_CONFIG });
    const brokerName = BROKER_CONFIG_FOR_TOPIC_CONFIG[name];
    if (brokerName !== undefined) {
      const add = (value: string | undefined, source: number) => {
        if (value !== undefined) synonyms.push({ name: brokerName, value: canonicalTopicConfigValue(name, value), source });
      };
      add(brokerConfigs.get({ kind: "broker", brokerId: ownership.selfId })[brokerName], ConfigSource.DYNAMIC_BROKER_CONFIG);
      add(brokerConfigs.get({ kind: "cluster" })[brokerName], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG);
      add(brokerConfigs.staticTopicDefaults[name], ConfigSource.STATIC_BROKER_CONFIG);
      if (brokerSynonymHasDefault(name)) add(TOPIC_CONFIG_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG);
    }
    const first = synonyms[0];
    return {
      name,
      value: first?.value ?? TOPIC_CONFIG_DEFAULTS[name],
      source: first?.source ?? ConfigSource.DEFAULT_CONFIG,
      synonyms,
      type: TYPE_IDS[topicConfigType(name)],
      doc: TOPIC_CONFIG_DOCS[name],
    };
  });
}

/** CreateTopics' answer of a topic's configs (v5+): the same entries, own values as given. */
export function createdTopicConfigs(services: BrokerServices, own: Readonly<Record<string, string>>): CreateTopicsResponse_CreatableTopicConfigsInit[] {
  return topicConfigEntries(services, own, false).map((entry) => ({
    name: entry.name,
    value: entry.value,
    readOnly: false,
    configSource: entry.source,
    isSensitive: false,
  }));
}

/**
 * Java's Integer.parseInt, which Apache uses on broker resource names: an optional sign and decimal
 * digits, within 32 bits. Undefined for anything else.
 */
export function parseBrokerId(name: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(name)) return undefined;
  const id = Number(name);
  return id >= -2147483648 && id <= 2147483647 ? id : undefined;
}

interface Described {
  name: string;
  value: string | null;
  readOnly: boolean;
  synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[];
  type: number;
  doc: string;
}

export function describeConfigsHandler(services: BrokerServices): Handler<DescribeConfigsRequest, DescribeConfigsResponseInit> {
  const { topics, brokerConfigs, ownership } = services;
  const defaults = defaultBrokerConfig();

  const topicConfigs = (own: Readonly<Record<string, string>>): Described[] =>
    topicConfigEntries(services, own, true).map((entry) => ({
      name: entry.name,
      value: entry.value,
      readOnly: false,
      synonyms: entry.synonyms,
      type: entry.type,
      doc: entry.doc,
    }));

  /** A broker-level topic default as this broker's resource lists it. */
  const topicDefault = (brokerName: string): Described => {
    const topicName = topicConfigForBrokerConfig(brokerName)!;
    const synonyms = topicConfigEntries(services, {}, true).find((entry) => entry.name === topicName)!.synonyms;
    return {
      // Null when nothing sets it and Apache's broker config has no default (log.retention.ms, ...).
      name: brokerName,
      value: synonyms[0]?.value ?? null,
      readOnly: false,
      synonyms,
      type: TYPE_IDS[topicConfigType(topicName)],
      doc: `The default ${topicName} of topics that do not set their own. ${TOPIC_CONFIG_DOCS[topicName]}`,
    };
  };

  /** A cleaner setting with where its value in effect comes from. */
  const cleanerSetting = (name: CleanerSettingName): Described => {
    const type = cleanerSettingType(name);
    const synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[] = [];
    const add = (value: string | undefined, source: number) => {
      if (value !== undefined) synonyms.push({ name, value: canonicalValue(type, value), source });
    };
    add(brokerConfigs.get({ kind: "broker", brokerId: ownership.selfId })[name], ConfigSource.DYNAMIC_BROKER_CONFIG);
    add(brokerConfigs.get({ kind: "cluster" })[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG);
    const staticValue = cleanerSettingValue(brokerConfigs.staticCleaner, name);
    const builtIn = canonicalValue(type, cleanerSettingDefault(name));
    if (staticValue !== builtIn) add(staticValue, ConfigSource.STATIC_BROKER_CONFIG);
    add(builtIn, ConfigSource.DEFAULT_CONFIG);
    return {
      name,
      value: cleanerSettingValue(services.runtimeConfig.cleaner(), name),
      readOnly: !isDynamicCleanerSetting(name),
      synonyms,
      type: TYPE_IDS[type],
      doc: CLEANER_SETTING_DOCS[name],
    };
  };

  const brokerSettings = (): Described[] => {
    const described: Described[] = [...BROKER_TOPIC_DEFAULT_NAMES.map(topicDefault), ...CLEANER_SETTING_NAMES.map(cleanerSetting)];
    for (const setting of STATIC_BROKER_SETTINGS) {
      const value = setting.value(services.config);
      const builtIn = setting.value(defaults);
      const synonyms = [
        ...(value !== builtIn ? [{ name: setting.name, value, source: ConfigSource.STATIC_BROKER_CONFIG }] : []),
        { name: setting.name, value: builtIn, source: ConfigSource.DEFAULT_CONFIG },
      ];
      described.push({ name: setting.name, value, readOnly: true, synonyms, type: setting.type, doc: setting.doc });
    }
    return described.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  };

  /** Apache lists only the cluster-wide dynamic defaults that are set, each with just that synonym. */
  const clusterDefaultSettings = (): Described[] =>
    Object.entries(brokerConfigs.get({ kind: "cluster" }))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => {
        const described = isCleanerSetting(name) ? cleanerSetting(name) : topicDefault(name);
        const type = isCleanerSetting(name) ? cleanerSettingType(name) : topicConfigType(topicConfigForBrokerConfig(name)!);
        const shown = canonicalValue(type, value);
        return { ...described, value: shown, synonyms: [{ name, value: shown, source: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG }] };
      });

  const failure = (
    resource: DescribeConfigsRequest_DescribeConfigsResource,
    errorCode: number,
    errorMessage: string | null,
  ): DescribeConfigsResponse_DescribeConfigsResultInit => ({
    errorCode,
    errorMessage,
    resourceType: resource.resourceType,
    resourceName: resource.resourceName,
    configs: [],
  });

  /** The configs of one resource, or its failure. */
  const describe = (
    resource: DescribeConfigsRequest_DescribeConfigsResource,
  ): Described[] | DescribeConfigsResponse_DescribeConfigsResultInit => {
    const name = resource.resourceName;
    const selfId = ownership.selfId;
    switch (resource.resourceType) {
      case ConfigResourceType.TOPIC: {
        if (name === "") return failure(resource, ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed");
        const reason = configTopicNameProblem(name);
        if (reason !== null) return failure(resource, ErrorCode.INVALID_TOPIC_EXCEPTION, reason);
        const topic = topics.get(name);
        // Apache 4.1.1 answers an unknown topic with an empty message, whatever the version.
        if (topic === undefined) return failure(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "");
        return topicConfigs(topic.configs);
      }
      case ConfigResourceType.BROKER: {
        if (name === "") return clusterDefaultSettings();
        const id = parseBrokerId(name);
        if (id === undefined) return failure(resource, ErrorCode.INVALID_REQUEST, `Broker id must be an integer, but it is: ${name}`);
        if (id !== selfId) {
          const message = `Unexpected broker id, expected ${selfId} or empty string, but received ${name}`;
          return failure(resource, ErrorCode.INVALID_REQUEST, message);
        }
        return brokerSettings();
      }
      case ConfigResourceType.BROKER_LOGGER: {
        if (name === "") return failure(resource, ErrorCode.INVALID_REQUEST, "Broker id must not be empty");
        const id = parseBrokerId(name);
        if (id === undefined) return failure(resource, ErrorCode.INVALID_REQUEST, `Broker id must be an integer, but it is: ${name}`);
        if (id !== selfId) {
          return failure(resource, ErrorCode.INVALID_REQUEST, `Unexpected broker id, expected ${selfId} but received ${name}`);
        }
        return [];
      }
      case ConfigResourceType.CLIENT_METRICS:
        return failure(resource, ErrorCode.INVALID_REQUEST, "bunka does not support client metrics config resources");
      case ConfigResourceType.GROUP:
        return failure(resource, ErrorCode.INVALID_REQUEST, "bunka does not support group config resources");
      default:
        // Unreachable: handle() refuses the whole request for a type not in ConfigResourceType.
        return failure(resource, ErrorCode.INVALID_REQUEST, INVALID_REQUEST_DEFAULT_MESSAGE);
    }
  };

  return {
    apiKey: 32,
    minVersion: 0,
    maxVersion: 4,
    handle(request, ctx) {
      const known: readonly number[] = Object.values(ConfigResourceType);
      if (request.resources.some((r) => !known.includes(r.resourceType))) {
        // Apache's KafkaApis throws on an unknown resource type before looking at any resource, which
        // fails the whole request.
        const results = request.resources.map((r) => failure(r, ErrorCode.INVALID_REQUEST, INVALID_REQUEST_DEFAULT_MESSAGE));
        return { throttleTimeMs: 0, results };
      }
      const results = request.resources.map((resource): DescribeConfigsResponse_DescribeConfigsResultInit => {
        // Authorization (broker/authorizer.ts): DESCRIBE_CONFIGS on the topic, the group or the cluster.
        const refused = services.authorizer.configResourceError(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resourceType, resource.resourceName);
        if (refused !== ErrorCode.NONE) return failure(resource, refused, BrokerAuthorizer.configRefusalMessage(refused));
        const described = describe(resource);
        if (!Array.isArray(described)) return described;
        const keys = resource.configurationKeys;
        const wanted = keys === null || keys.length === 0 ? undefined : new Set(keys);
        const configs = described
          .filter((c) => wanted === undefined || wanted.has(c.name))
          .map((c): DescribeConfigsResponse_DescribeConfigsResourceResultInit => {
            const source = c.synonyms[0]?.source ?? ConfigSource.DEFAULT_CONFIG;
            return {
              name: c.name,
              value: c.value,
              readOnly: c.readOnly,
              isDefault: source === ConfigSource.DEFAULT_CONFIG,
              configSource: source,
              isSensitive: false,
              synonyms: request.includeSynonyms ? c.synonyms : [],
              configType: c.type,
              documentation: request.includeDocumentation ? c.doc : null,
            };
          });
        return {
          errorCode: ErrorCode.NONE,
          errorMessage: null,
          resourceType: resource.resourceType,
          resourceName: resource.resourceName,
          configs,
        };
      });
      return { throttleTimeMs: 0, results };
    },
    errorResponse(request, errorCode) {
      return { throttleTimeMs: 0, results: request.resources.map((r) => failure(r, errorCode, null)) };
    },
  };
}
