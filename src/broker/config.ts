import { type CleanerConfig, DEFAULT_CLEANER_CONFIG } from "../domain/cleaner-config.ts";
import type { SecurityProtocol } from "../domain/security/connection-security.ts";
import type { ListenerAddress, SslSettings } from "./listener-config.ts";

/**
 * The broker's configuration after parsing (cli/ turns flags, environment and the config file into this).
 * Names follow Apache Kafka's property names in camelCase, units last.
 */
export interface BrokerConfig {
  dataDir: string;
  /** Kafka listener; port 0 picks a free port. */
  listenHost: string;
  listenPort: number;
  /** What Metadata tells clients to connect to; defaults to the bound listener. */
  advertisedHost: string | undefined;
  advertisedPort: number | undefined;
  /**
   * listeners, advertised.listeners, listener.security.protocol.map, inter.broker.listener.name (Apache's
   * keys, broker/listener-config.ts): undefined when not set. Without listeners, `listen` is the one
   * PLAINTEXT listener.
   */
  listeners: ListenerAddress[] | undefined;
  advertisedListeners: ListenerAddress[] | undefined;
  listenerSecurityProtocolMap: Record<string, SecurityProtocol> | undefined;
  interBrokerListenerName: string | undefined;
  /** ssl.keystore.location, ssl.key.password, ssl.truststore.location, ssl.client.auth (PEM files only). */
  ssl: SslSettings;
  /** listener.name.<name>.ssl.*, by upper-cased listener name: override `ssl` for that listener. */
  listenerSsl: Record<string, SslSettings>;
  /** ssl.handshake.timeout.ms (bunka's own): a TLS connection that has not finished its handshake by then is closed. */
  sslHandshakeTimeoutMs: number;
  /** ssl.reload.check.interval.ms (bunka's own): how often keystore and truststore files are checked for changes; 0: never. */
  sslReloadCheckIntervalMs: number;
  /** http.ssl.* (bunka's own): TLS on the HTTP side-port when http.ssl.keystore.location is set. */
  httpSsl: SslSettings;
  httpHost: string;
  httpPort: number;
  /**
   * http.allowed.hosts: further names clients reach the side-port by, beyond its own host, the advertised
   * host and the machine's name (a Host header naming anything else is refused: DNS rebinding).
   */
  httpAllowedHosts: string[];
  /** http.reads.need.token (bunka's own): every side-port route but /health and /ready needs the admin token. */
  httpReadsNeedToken: boolean;
  brokerId: number;
  /** socket.request.max.bytes */
  socketRequestMaxBytes: number;
  /** connections.max.idle.ms; 0 or less never closes an idle connection. */
  connectionsMaxIdleMs: number;
  /** max.connections: connections beyond this are closed on accept (Apache's default is unbounded). */
  maxConnections: number;
  /**
   * max.held.response.bytes.per.connection (bunka's own): response bytes one connection may hold (output
   * its client has not read, responses waiting for an earlier one, fetches' reservations) before it stops
   * being read; also the most one Fetch answers with. Infinity: no bound.
   */
  maxHeldResponseBytesPerConnection: number;
  /** max.held.response.bytes (bunka's own): the same across all connections, by equal shares. Infinity: no bound. */
  maxHeldResponseBytes: number;
  /** auto.create.topics.enable */
  autoCreateTopicsEnable: boolean;
  /** num.partitions: partitions of an auto-created topic, or CreateTopics with -1 */
  numPartitions: number;
  /**
   * Broker-level defaults of topic configs (log.retention.ms, log.cleanup.policy, compression.type, ...),
   * by topic config name, as the static configuration sets them. Dynamic broker configs override them
   * at runtime without changing this object: the values in effect are RuntimeConfig.topicDefaults()
   * (services.runtimeConfig, runtime-config.ts).
   */
  topicConfigDefaults: Record<string, string>;
  /**
   * The log cleaner's settings (log.cleaner.*) as the static configuration sets them; the settings in
   * effect, which IncrementalAlterConfigs and AlterConfigs change, are RuntimeConfig.cleaner().
   */
  cleaner: CleanerConfig;
  /** transaction.max.timeout.ms */
  transactionMaxTimeoutMs: number;
  /** producer.id.expiration.ms */
  producerIdExpirationMs: number;
  /** group.initial.rebalance.delay.ms */
  groupInitialRebalanceDelayMs: number;
  /** offsets.retention.minutes, in ms */
  offsetsRetentionMs: number;
  /** max.incremental.fetch.session.cache.slots: fetch sessions kept (0: none is ever created). */
  maxIncrementalFetchSessionCacheSlots: number;
  /** min.incremental.fetch.session.eviction.ms: how long a fetch session is safe from being replaced. */
  minIncrementalFetchSessionEvictionMs: number;
  logFormat: "text" | "json";
  logLevel: "debug" | "info" | "warn" | "error";
  /**
   * fsync.mode: "batched" makes the fsyncs requested together durable with one syncfs of the data
   * directory's file system when they name 3 or more files (platform/batched-sync.ts); "per-file" fsyncs
   * every file on its own.
   */
  fsyncMode: FsyncMode;
  /**
   * etcd.endpoints: the etcd cluster that cluster mode keeps its membership in (docs/architecture.md,
   * "Ownership and cluster mode"), checked URLs without credentials. Undefined: single-broker mode, no etcd.
   */
  etcdEndpoints: readonly string[] | undefined;
  /**
   * broker.session.timeout.ms: the TTL of this broker's etcd lease, as Apache's setting of the same name
   * bounds a broker's session with its controller. A whole number of seconds, since etcd's leases are.
   */
  brokerSessionTimeoutMs: number;
  /**
   * log.scrubber.bytes.per.second (bunka's own): the read rate of the background scrubber that verifies
   * every stored batch (storage/log/segment-scrubber.ts); 0 turns it off.
   */
  logScrubberBytesPerSecond: number;
  /**
   * authorizer.class.name: undefined (Apache's empty default) checks nothing and answers the ACL APIs
   * SECURITY_DISABLED; Apache's StandardAuthorizer (the one class accepted) turns ACLs on
   * (broker/authorizer.ts).
   */
  authorizerClassName: string | undefined;
  /** super.users: principals ("User:admin") allowed everything when the authorizer is on. */
  superUsers: string[];
  /** allow.everyone.if.no.acl.found: whether a resource no ACL applies to is open to everyone (default false). */
  allowEveryoneIfNoAclFound: boolean;
  /**
   * sasl.enabled.mechanisms on SASL_* listeners (broker/sasl-authenticator.ts): a subset of PLAIN,
   * SCRAM-SHA-256, SCRAM-SHA-512; default the two SCRAM ones (Apache's default, GSSAPI, is not served).
   */
  saslEnabledMechanisms: string[];
  /** listener.name.<name>.sasl.enabled.mechanisms, by upper-cased listener name: that listener's mechanisms instead. */
  listenerSaslEnabledMechanisms: Record<string, string[]>;
  /** sasl.plain.users.file (bunka's own): the PLAIN users, one `name=password` a line; needed when PLAIN is enabled. */
  saslPlainUsersFile: string | undefined;
  /** connections.max.reauth.ms: a SASL session's lifetime (KIP-368); 0, the default, never ends one. */
  connectionsMaxReauthMs: number;
  /** connection.failed.authentication.delay.ms: how long a failed authentication waits before its answer (default 100). */
  connectionFailedAuthenticationDelayMs: number;
  /** sasl.server.max.receive.size: the largest frame a SASL_* connection may send before it is authenticated (default 524288). */
  saslServerMaxReceiveSize: number;
}

export const FSYNC_MODES = ["batched", "per-file"] as const;
export type FsyncMode = (typeof FSYNC_MODES)[number];

export function defaultBrokerConfig(): BrokerConfig {
  return {
    dataDir: "./data",
    listenHost: "127.0.0.1",
    listenPort: 9092,
    advertisedHost: undefined,
    advertisedPort: undefined,
    listeners: undefined,
    advertisedListeners: undefined,
    listenerSecurityProtocolMap: undefined,
    interBrokerListenerName: undefined,
    ssl: {},
    listenerSsl: {},
    sslHandshakeTimeoutMs: 10_000,
    sslReloadCheckIntervalMs: 10_000,
    httpSsl: {},
    httpHost: "127.0.0.1",
    httpPort: 9644,
    httpAllowedHosts: [],
    httpReadsNeedToken: false,
    brokerId: 0,
    socketRequestMaxBytes: 104857600,
    connectionsMaxIdleMs: 600000,
    maxConnections: 10000,
    maxHeldResponseBytesPerConnection: 100 * 1024 * 1024,
    maxHeldResponseBytes: 512 * 1024 * 1024,
    autoCreateTopicsEnable: true,
    numPartitions: 1,
    topicConfigDefaults: {},
    cleaner: { ...DEFAULT_CLEANER_CONFIG },
    transactionMaxTimeoutMs: 900000,
    producerIdExpirationMs: 86400000,
    groupInitialRebalanceDelayMs: 3000,
    offsetsRetentionMs: 7 * 24 * 60 * 60 * 1000,
    maxIncrementalFetchSessionCacheSlots: 1000,
    minIncrementalFetchSessionEvictionMs: 120_000,
    logFormat: "text",
    logLevel: "info",
    fsyncMode: "batched",
    etcdEndpoints: undefined,
    brokerSessionTimeoutMs: 9000,
    logScrubberBytesPerSecond: 8 * 1024 * 1024,
    authorizerClassName: undefined,
    superUsers: [],
    allowEveryoneIfNoAclFound: false,
    saslEnabledMechanisms: ["SCRAM-SHA-256", "SCRAM-SHA-512"],
    listenerSaslEnabledMechanisms: {},
    saslPlainUsersFile: undefined,
    connectionsMaxReauthMs: 0,
    connectionFailedAuthenticationDelayMs: 100,
    saslServerMaxReceiveSize: 524288,
  };
}
