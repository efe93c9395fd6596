/**
 * DescribeConfigs (key 32), versions 0-4.
 *
 * Per resource, as Apache Kafka's ConfigHelper answers:
 * - TOPIC (2): every topic config bunka honours, with its effective value. The source is the first of
 *   its synonyms: the topic's own value (DYNAMIC_TOPIC_CONFIG), else the broker-level default set
 *   dynamically for this broker (DYNAMIC_BROKER_CONFIG) or the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG),
 *   else the static configuration (STATIC_BROKER_CONFIG), else the built-in default (DEFAULT_CONFIG).
 *   An illegal name -> INVALID_TOPIC_EXCEPTION; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
 * - BROKER (4): resource name = this broker's id -> the broker configs bunka honours with the values in
 *   effect; "" -> only the cluster-wide dynamic defaults currently set (Apache lists nothing else there);
 *   another id or a non-integer -> INVALID_REQUEST with Apache's messages. Only the broker-level topic
 *   defaults (log.retention.ms, ...) are writable (readOnly false), as only they can be changed by
 *   IncrementalAlterConfigs.
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
 * Deliberately not done: authorization (no *_AUTHORIZATION_FAILED), the dozens of Apache configs bunka
 * does not implement (they are not listed, rather than listed with values that mean nothing here), and
 * Apache's derived synonyms such as log.retention.hours / log.roll.hours (bunka has no such settings).
 * The STATIC_BROKER_CONFIG / DEFAULT_CONFIG split of broker settings other than the topic defaults is
 * inferred by comparing with bunka's defaults, so a value set explicitly to its default reads as default.
 */
import {
  BROKER_CONFIG_FOR_TOPIC_CONFIG,
  TOPIC_CONFIG_DEFAULTS,
  TOPIC_CONFIG_NAMES,
  type TopicConfigName,
  type TopicConfigType,
  topicConfigType,
} from "../domain/topic-config.ts";
import { topicNameInvalidReason } from "../domain/topic-name.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
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

const TOPIC_CONFIG_TYPE_IDS: Record<TopicConfigType, number> = {
  LONG: ConfigType.LONG,
  INT: ConfigType.INT,
  STRING: ConfigType.STRING,
  LIST: ConfigType.LIST,
  DOUBLE: ConfigType.DOUBLE,
};

/** Errors.INVALID_REQUEST's default message: what Apache sends when it rejects the whole request. */
const INVALID_REQUEST_DEFAULT_MESSAGE =
  "This most likely occurs because of a request being malformed by the client library or the message was sent " +
  "to an incompatible broker. See the broker logs for more details.";

/** Short descriptions of what each honoured topic config does in bunka. */
const TOPIC_CONFIG_DOCS: Record<TopicConfigName, string> = {
  "cleanup.policy":
    "The retention policy of old log segments: \"delete\" deletes segments beyond the retention time or " +
    "size, \"compact\" keeps the latest record of every key (log compaction); both may be given.",
  "delete.retention.ms":
    "How long tombstones and the markers of emptied transactions stay in a compacted log after the cleaner first keeps them.",
  "max.compaction.lag.ms": "The longest time a record stays ineligible for compaction once written.",
  "min.cleanable.dirty.ratio": "The ratio of uncleaned bytes to all cleanable bytes at which the log cleaner cleans a compacted log.",
  "min.compaction.lag.ms": "The shortest time a record stays uncompacted once written.",
  "max.message.bytes": "The largest record batch size, in bytes, that the topic accepts.",
  "message.timestamp.type":
    "Whether record timestamps are the producer's (CreateTime) or set by the broker when appended " +
    "(LogAppendTime).",
  "retention.bytes": "The maximum size of a partition's log before old segments are deleted; -1 means no size limit.",
  "retention.ms": "How long a log segment is kept before it is deleted, in milliseconds; -1 means no time limit.",
  "segment.bytes": "The size of a single log segment file; retention deletes whole segments.",
  "segment.ms": "The time after which the active segment is rolled even if it is not full, in milliseconds.",
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

/** Broker-level topic defaults, by broker config name, with their topic config. */
const DYNAMIC_BROKER_SETTINGS: ReadonlyMap<string, TopicConfigName> = new Map(
  TOPIC_CONFIG_NAMES.map((name) => [BROKER_CONFIG_FOR_TOPIC_CONFIG[name], name]),
);

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
  value: string;
  readOnly: boolean;
  synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[];
  type: number;
  doc: string;
}

export function describeConfigsHandler(services: BrokerServices): Handler<DescribeConfigsRequest, DescribeConfigsResponseInit> {
  const { topics, brokerConfigs, ownership } = services;
  const defaults = defaultBrokerConfig();

  /**
   * Where a broker-level topic default comes from, highest precedence first (Apache's synonym order),
   * named by its broker config name.
   */
  const brokerDefaultSynonyms = (topicName: TopicConfigName): DescribeConfigsResponse_DescribeConfigsSynonymInit[] => {
    const brokerName = BROKER_CONFIG_FOR_TOPIC_CONFIG[topicName];
    const synonyms: DescribeConfigsResponse_DescribeConfigsSynonymInit[] = [];
    const add = (value: string | undefined, source: number) => {
      if (value !== undefined) synonyms.push({ name: brokerName, value, source });
    };
    add(brokerConfigs.get({ kind: "broker", brokerId: ownership.selfId })[brokerName], ConfigSource.DYNAMIC_BROKER_CONFIG);
    add(brokerConfigs.get({ kind: "cluster" })[brokerName], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG);
    add(brokerConfigs.staticTopicDefaults[topicName], ConfigSource.STATIC_BROKER_CONFIG);
    add(TOPIC_CONFIG_DEFAULTS[topicName], ConfigSource.DEFAULT_CONFIG);
    return synonyms;
  };

  const topicConfigs = (own: Readonly<Record<string, string>>): Described[] =>
    TOPIC_CONFIG_NAMES.map((name) => {
      const ownValue = own[name];
      const synonyms = [
        ...(ownValue !== undefined ? [{ name, value: ownValue, source: ConfigSource.DYNAMIC_TOPIC_CONFIG }] : []),
        ...brokerDefaultSynonyms(name),
      ];
      return {
        name,
        value: synonyms[0]!.value!,
        readOnly: false,
        synonyms,
        type: TOPIC_CONFIG_TYPE_IDS[topicConfigType(name)],
        doc: TOPIC_CONFIG_DOCS[name],
      };
    });

  const brokerSettings = (): Described[] => {
    const described: Described[] = [];
    for (const [brokerName, topicName] of DYNAMIC_BROKER_SETTINGS) {
      const synonyms = brokerDefaultSynonyms(topicName);
      described.push({
        name: brokerName,
        value: synonyms[0]!.value!,
        readOnly: false,
        synonyms,
        type: TOPIC_CONFIG_TYPE_IDS[topicConfigType(topicName)],
        doc: `The default ${topicName} of topics that do not set their own. ${TOPIC_CONFIG_DOCS[topicName]}`,
      });
    }
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
        const topicName = DYNAMIC_BROKER_SETTINGS.get(name)!;
        return {
          name,
          value,
          readOnly: false,
          synonyms: [{ name, value, source: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG }],
          type: TOPIC_CONFIG_TYPE_IDS[topicConfigType(topicName)],
          doc: `The default ${topicName} of topics that do not set their own. ${TOPIC_CONFIG_DOCS[topicName]}`,
        };
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
        const reason = topicNameInvalidReason(name);
        if (reason !== null) return failure(resource, ErrorCode.INVALID_TOPIC_EXCEPTION, reason);
        const topic = topics.get(name);
        if (topic === undefined) return failure(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, `The topic '${name}' does not exist.`);
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
    handle(request) {
      const known: readonly number[] = Object.values(ConfigResourceType);
      if (request.resources.some((r) => !known.includes(r.resourceType))) {
        // Apache's KafkaApis throws on an unknown resource type before looking at any resource, which
        // fails the whole request.
        const results = request.resources.map((r) => failure(r, ErrorCode.INVALID_REQUEST, INVALID_REQUEST_DEFAULT_MESSAGE));
        return { throttleTimeMs: 0, results };
      }
      const results = request.resources.map((resource): DescribeConfigsResponse_DescribeConfigsResultInit => {
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
