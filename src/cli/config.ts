/**
 * `bunka serve` configuration: flags, environment variables and an optional config file, turned into a
 * BrokerConfig. Pure functions (the file is read through a callback) so that every rule is unit-testable.
 *
 * Precedence, highest first: flags > environment > config file > defaults. The config file is named by
 * `--config` or, failing that, `BUNKA_CONFIG`.
 *
 * Every mistake raises a ConfigError whose message is one line and names where the bad value came from
 * (the flag, the variable, or the file and line), because the CLI prints it as `bunka: <message>`.
 */
import { type BrokerConfig, defaultBrokerConfig, FSYNC_MODES } from "../broker/config.ts";
import {
  applyCleanerSettings,
  CLEANER_SETTING_NAMES,
  cleanerSettingProblem,
  type CleanerSettingName,
  dedupeBufferProblem,
} from "../domain/cleaner-config.ts";
import { BROKER_CONFIG_FOR_TOPIC_CONFIG, brokerTopicDefaultProblem, topicConfigProblems, type TopicConfigName } from "../domain/topic-config.ts";
import { parseEndpoints } from "../cluster/etcd/etcd-client.ts";
import { ConfigError } from "../errors/errors.ts";
import {
  CLIENT_AUTH_MODES,
  httpTlsSettings,
  interBrokerListener,
  normaliseListenerName,
  parseListenerList,
  parseSecurityProtocolMap,
  resolveListeners,
  type SslSettings,
} from "../broker/listener-config.ts";
import { parseSuperUsers } from "../domain/security/acl.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../domain/security/acl-authorizer.ts";
import { SASL_MECHANISMS } from "../domain/security/sasl-mechanisms.ts";

const INT32_MAX = 2147483647;

/** Where a value came from, as the error messages name it. */
type Origin = string;

interface Setting {
  /** Key in the config file. */
  fileKey: string;
  /** Long flag, without the leading dashes; absent for file-only (Apache) keys. */
  flag?: string;
  env?: string;
  apply(config: BrokerConfig, value: string, origin: Origin): void;
}

// ---- value parsers (each throws a one-line ConfigError naming the origin) ---------------------------------

/** authorizer.class.name: empty is none (Apache's default); any class but StandardAuthorizer is refused. */
function parseAuthorizerClassName(value: string, origin: Origin): string | undefined {
  const name = value.trim();
  if (name === "") return undefined;
  if (name !== STANDARD_AUTHORIZER_CLASS) throw new ConfigError(`${origin}: unknown authorizer class ${quote(name)} (bunka has ${STANDARD_AUTHORIZER_CLASS} only)`);
  return name;
}

/** sasl.enabled.mechanisms: a comma-separated subset of what bunka serves (GSSAPI and OAUTHBEARER are not). */
function parseSaslMechanisms(value: string, origin: Origin): string[] {
  const names = [...new Set(value.split(",").map((name) => name.trim()).filter((name) => name !== ""))];
  if (names.length === 0) throw new ConfigError(`${origin}: no SASL mechanism given (bunka serves ${SASL_MECHANISMS.join(", ")})`);
  const unknown = names.filter((name) => !SASL_MECHANISMS.includes(name));
  if (unknown.length > 0) throw new ConfigError(`${origin}: SASL mechanism ${unknown.map(quote).join(", ")} is not served (bunka serves ${SASL_MECHANISMS.join(", ")})`);
  return names;
}

/** Keeps error messages on one line whatever the input holds. */
function quote(value: string): string {
  return JSON.stringify(value);
}

export function parseInteger(value: string, origin: Origin, min: number, max: number): number {
  if (!/^-?\d+$/.test(value.trim())) throw new ConfigError(`${origin}: expected an integer, got ${quote(value)}`);
  const n = Number(value.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${origin}: ${quote(value)} is out of range (${min}..${max})`);
  }
  return n;
}

function parseBoolean(value: string, origin: Origin): boolean {
  // Apache's ConfigDef accepts true/false in any case.
  const v = value.trim().toLowerCase();
  if (v === "true") return true;
  if (v === "false") return false;
  throw new ConfigError(`${origin}: expected true or false, got ${quote(value)}`);
}

/** A byte bound: a positive integer, or -1 for none (Infinity). */
function parseByteBound(value: string, origin: Origin): number {
  const n = parseInteger(value, origin, -1, Number.MAX_SAFE_INTEGER);
  if (n === 0) throw new ConfigError(`${origin}: expected a positive number of bytes or -1 (no bound), got ${quote(value)}`);
  return n < 0 ? Number.POSITIVE_INFINITY : n;
}

function parseChoice<T extends string>(value: string, origin: Origin, choices: readonly T[]): T {
  const v = value.trim() as T;
  if (choices.includes(v)) return v;
  throw new ConfigError(`${origin}: expected one of ${choices.join("|")}, got ${quote(value)}`);
}

function parseNonEmpty(value: string, origin: Origin): string {
  if (value.trim() === "") throw new ConfigError(`${origin}: expected a value, got an empty string`);
  return value.trim();
}

/** A comma-separated list of etcd client URLs, checked as the etcd client checks them. */
function parseEtcdEndpoints(value: string, origin: Origin): string[] {
  try {
    return parseEndpoints(value);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${origin}: ${error.message}`);
    throw error;
  }
}

/** Milliseconds that are a whole number of seconds, at least one: etcd grants leases in seconds. */
function parseWholeSecondsMs(value: string, origin: Origin): number {
  const ms = parseInteger(value, origin, 1000, INT32_MAX);
  if (ms % 1000 !== 0) {
    const below = Math.floor(ms / 1000) * 1000;
    throw new ConfigError(`${origin}: etcd leases last whole seconds, so ${ms} ms cannot be one (use ${below < 1000 ? 1000 : below} or ${below + 1000})`);
  }
  return ms;
}

const HOSTNAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;
const IPV6 = /^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$/;

/**
 * HOST:PORT, with an IPv6 host in brackets (`[::1]:9092`, returned without the brackets). `minPort` is 0
 * for listeners (0 = pick a free port) and 1 for addresses that clients are told to connect to.
 */
export function parseHostPort(value: string, origin: Origin, minPort: number): { host: string; port: number } {
  const v = value.trim();
  let host: string;
  let portText: string;
  if (v.startsWith("[")) {
    const close = v.indexOf("]");
    if (close < 0 || v[close + 1] !== ":") throw new ConfigError(`${origin}: expected HOST:PORT, got ${quote(value)}`);
    host = v.slice(1, close);
    portText = v.slice(close + 2);
    if (!IPV6.test(host)) throw new ConfigError(`${origin}: bad IPv6 address in ${quote(value)}`);
  } else {
    const colon = v.lastIndexOf(":");
    if (colon < 0) throw new ConfigError(`${origin}: expected HOST:PORT, got ${quote(value)}`);
    host = v.slice(0, colon);
    portText = v.slice(colon + 1);
    if (host.includes(":")) {
      throw new ConfigError(`${origin}: an IPv6 host needs brackets ([::1]:9092), got ${quote(value)}`);
    }
    if (!HOSTNAME.test(host)) throw new ConfigError(`${origin}: bad host in ${quote(value)}`);
  }
  if (!/^\d+$/.test(portText)) throw new ConfigError(`${origin}: bad port in ${quote(value)}`);
  const port = Number(portText);
  if (port < minPort || port > 65535) {
    throw new ConfigError(`${origin}: port ${portText} is out of range (${minPort}..65535)`);
  }
  return { host, port };
}

// ---- the settings --------------------------------------------------------------------------------------

const logLevels = ["debug", "info", "warn", "error"] as const;
const logFormats = ["text", "json"] as const;

/**
 * A broker-level default of a topic config, under Apache's broker property name (log.retention.ms for
 * retention.ms, log.cleanup.policy, compression.type, min.insync.replicas, ...), checked with the topic
 * config's rules and Apache's wording.
 */
function topicDefault(topicName: TopicConfigName, fileKey: string): Setting {
  return {
    fileKey,
    apply: (c, v, o) => {
      const problem = brokerTopicDefaultProblem(fileKey, v);
      if (problem !== null) throw new ConfigError(`${o}: ${problem.reason}`);
      c.topicConfigDefaults = { ...c.topicConfigDefaults, [topicName]: v.trim() };
    },
  };
}

/** A log cleaner setting (log.cleaner.threads, ...), with Apache's type and bounds. */
function cleanerSetting(fileKey: CleanerSettingName): Setting {
  return {
    fileKey,
    apply: (c, v, o) => {
      const problem = cleanerSettingProblem(fileKey, v);
      if (problem !== null) throw new ConfigError(`${o}: ${problem}`);
      c.cleaner = applyCleanerSettings(c.cleaner, { [fileKey]: v });
    },
  };
}

/** A comma-separated list of host names (no ports, no schemes); empty entries are refused. */
function parseHostNames(value: string, origin: string): string[] {
  const names = value.split(",").map((name) => name.trim());
  for (const name of names) {
    if (!/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\.?$/.test(name)) throw new ConfigError(`${origin}: ${JSON.stringify(name)} is not a host name (expected names separated by commas, e.g. bunka-1.example,bunka.internal)`);
  }
  return names;
}

const TOPIC_DEFAULT_SETTINGS: readonly Setting[] = Object.entries(BROKER_CONFIG_FOR_TOPIC_CONFIG).map(([topicName, fileKey]) =>
  topicDefault(topicName as TopicConfigName, fileKey!),
);

// ---- listeners and TLS (broker/listener-config.ts): Apache's keys, config file only ----------------------

/** ssl.keystore.type and ssl.truststore.type: PEM files are what bunka reads (KIP-651). */
function requirePem(value: string, origin: Origin): void {
  if (value.trim().toUpperCase() !== "PEM") throw new ConfigError(`${origin}: only PEM files are supported (KIP-651), got ${quote(value)}`);
}

/** The ssl.* keys under `prefix` ("", "http.", "listener.name.<name>."), each writing into `target(config)`. */
function sslSettings(prefix: string, target: (c: BrokerConfig) => SslSettings): Setting[] {
  const set = (c: BrokerConfig, field: keyof SslSettings, value: SslSettings[keyof SslSettings]) => void Object.assign(target(c), { [field]: value });
  return [
    { fileKey: `${prefix}ssl.keystore.type`, apply: (_c, v, o) => requirePem(v, o) },
    { fileKey: `${prefix}ssl.truststore.type`, apply: (_c, v, o) => requirePem(v, o) },
    { fileKey: `${prefix}ssl.keystore.location`, apply: (c, v, o) => set(c, "keystoreLocation", parseNonEmpty(v, o)) },
    { fileKey: `${prefix}ssl.truststore.location`, apply: (c, v, o) => set(c, "truststoreLocation", parseNonEmpty(v, o)) },
    { fileKey: `${prefix}ssl.key.password`, apply: (c, v) => set(c, "keyPassword", v) },
    { fileKey: `${prefix}ssl.client.auth`, apply: (c, v, o) => set(c, "clientAuth", parseChoice(v.trim().toLowerCase(), o, CLIENT_AUTH_MODES)) },
    {
      fileKey: `${prefix}ssl.keystore.password`,
      // Apache's words: a PEM keystore file has no store password, only the key's.
      apply: (_c, _v, o) => {
        throw new ConfigError(`${o}: SSL key store password cannot be specified with PEM format, only key password may be specified (ssl.key.password)`);
      },
    },
  ];
}

const LISTENER_SETTINGS: readonly Setting[] = [
  { fileKey: "listeners", apply: (c, v, o) => void (c.listeners = parseListenerList(v, o, 0)) },
  { fileKey: "advertised.listeners", apply: (c, v, o) => void (c.advertisedListeners = parseListenerList(v, o, 1)) },
  { fileKey: "listener.security.protocol.map", apply: (c, v, o) => void (c.listenerSecurityProtocolMap = parseSecurityProtocolMap(v, o)) },
  { fileKey: "inter.broker.listener.name", apply: (c, v, o) => void (c.interBrokerListenerName = normaliseListenerName(parseNonEmpty(v, o))) },
  ...sslSettings("", (c) => (c.ssl = { ...c.ssl })),
  ...sslSettings("http.", (c) => (c.httpSsl = { ...c.httpSsl })),
  { fileKey: "ssl.handshake.timeout.ms", apply: (c, v, o) => void (c.sslHandshakeTimeoutMs = parseInteger(v, o, 1, INT32_MAX)) },
  { fileKey: "ssl.reload.check.interval.ms", apply: (c, v, o) => void (c.sslReloadCheckIntervalMs = parseInteger(v, o, 0, INT32_MAX)) },
];

const LISTENER_SSL_KEY = /^listener\.name\.([A-Za-z0-9_-]+)\.(ssl\..+)$/;

const LISTENER_SASL_KEY = /^listener\.name\.([A-Za-z0-9_-]+)\.sasl\.enabled\.mechanisms$/;

/** listener.name.<name>.sasl.enabled.mechanisms: that listener's SASL mechanisms, instead of sasl.enabled.mechanisms. */
function listenerSaslSetting(key: string): Setting | undefined {
  const match = LISTENER_SASL_KEY.exec(key);
  if (match === null) return undefined;
  const name = normaliseListenerName(match[1]!);
  return { fileKey: key, apply: (c, v, o) => void (c.listenerSaslEnabledMechanisms = { ...c.listenerSaslEnabledMechanisms, [name]: parseSaslMechanisms(v, o) }) };
}

/** listener.name.<name>.ssl.*: the ssl.* setting of that name, for that listener only. */
function listenerSslSetting(key: string): Setting | undefined {
  const match = LISTENER_SSL_KEY.exec(key);
  if (match === null) return undefined;
  const name = normaliseListenerName(match[1]!);
  const prefix = `listener.name.${match[1]}.`;
  return sslSettings(prefix, (c) => (c.listenerSsl = { ...c.listenerSsl, [name]: { ...c.listenerSsl[name] } })[name]!).find((s) => s.fileKey === key);
}

export const SETTINGS: readonly Setting[] = [
  { fileKey: "data.dir", flag: "data-dir", env: "BUNKA_DATA_DIR", apply: (c, v, o) => void (c.dataDir = parseNonEmpty(v, o)) },
  {
    fileKey: "listen",
    flag: "listen",
    env: "BUNKA_LISTEN",
    apply: (c, v, o) => {
      const { host, port } = parseHostPort(v, o, 0);
      c.listenHost = host;
      c.listenPort = port;
    },
  },
  {
    fileKey: "advertised.listener",
    flag: "advertised-listener",
    env: "BUNKA_ADVERTISED_LISTENER",
    apply: (c, v, o) => {
      const { host, port } = parseHostPort(v, o, 1);
      c.advertisedHost = host;
      c.advertisedPort = port;
    },
  },
  ...LISTENER_SETTINGS,
  {
    fileKey: "http",
    flag: "http",
    env: "BUNKA_HTTP",
    apply: (c, v, o) => {
      const { host, port } = parseHostPort(v, o, 0);
      c.httpHost = host;
      c.httpPort = port;
    },
  },
  {
    fileKey: "http.allowed.hosts",
    flag: "http-allowed-hosts",
    env: "BUNKA_HTTP_ALLOWED_HOSTS",
    apply: (c, v, o) => void (c.httpAllowedHosts = parseHostNames(v, o)),
  },
  { fileKey: "http.reads.need.token", apply: (c, v, o) => void (c.httpReadsNeedToken = parseBoolean(v, o)) },
  { fileKey: "broker.id", flag: "broker-id", env: "BUNKA_BROKER_ID", apply: (c, v, o) => void (c.brokerId = parseInteger(v, o, 0, INT32_MAX)) },
  { fileKey: "log.format", flag: "log-format", env: "BUNKA_LOG_FORMAT", apply: (c, v, o) => void (c.logFormat = parseChoice(v, o, logFormats)) },
  { fileKey: "log.level", flag: "log-level", env: "BUNKA_LOG_LEVEL", apply: (c, v, o) => void (c.logLevel = parseChoice(v, o, logLevels)) },
  { fileKey: "fsync.mode", flag: "fsync-mode", env: "BUNKA_FSYNC_MODE", apply: (c, v, o) => void (c.fsyncMode = parseChoice(v, o, FSYNC_MODES)) },
  // Cluster mode: given, the broker joins the cluster of its data directory through this etcd.
  { fileKey: "etcd.endpoints", flag: "etcd", env: "BUNKA_ETCD", apply: (c, v, o) => void (c.etcdEndpoints = parseEtcdEndpoints(v, o)) },
  // Apache's name; the TTL of the broker's etcd lease.
  { fileKey: "broker.session.timeout.ms", apply: (c, v, o) => void (c.brokerSessionTimeoutMs = parseWholeSecondsMs(v, o)) },
  // bunka's own: how fast the background scrubber reads the segments to verify them; 0 turns it off.
  {
    fileKey: "log.scrubber.bytes.per.second",
    flag: "log-scrubber-bytes-per-second",
    env: "BUNKA_LOG_SCRUBBER_BYTES_PER_SECOND",
    apply: (c, v, o) => void (c.logScrubberBytesPerSecond = parseInteger(v, o, 0, Number.MAX_SAFE_INTEGER)),
  },
  // Apache Kafka property names, config file only.
  { fileKey: "socket.request.max.bytes", apply: (c, v, o) => void (c.socketRequestMaxBytes = parseInteger(v, o, 1, INT32_MAX)) },
  // -1 (any value <= 0) disables the idle check, as in Apache.
  { fileKey: "connections.max.idle.ms", apply: (c, v, o) => void (c.connectionsMaxIdleMs = parseInteger(v, o, -1, INT32_MAX)) },
  { fileKey: "max.connections", apply: (c, v, o) => void (c.maxConnections = parseInteger(v, o, 1, INT32_MAX)) },
  // bunka's own, in Apache's style: response bytes held in memory per connection and for all of them.
  {
    fileKey: "max.held.response.bytes.per.connection",
    apply: (c, v, o) => void (c.maxHeldResponseBytesPerConnection = parseByteBound(v, o)),
  },
  { fileKey: "max.held.response.bytes", apply: (c, v, o) => void (c.maxHeldResponseBytes = parseByteBound(v, o)) },
  { fileKey: "auto.create.topics.enable", apply: (c, v, o) => void (c.autoCreateTopicsEnable = parseBoolean(v, o)) },
  // Authorization (broker/authorizer.ts), Apache's keys: only its StandardAuthorizer is accepted.
  { fileKey: "authorizer.class.name", apply: (c, v, o) => void (c.authorizerClassName = parseAuthorizerClassName(v, o)) },
  { fileKey: "super.users", apply: (c, v) => void (c.superUsers = parseSuperUsers(v)) },
  { fileKey: "allow.everyone.if.no.acl.found", apply: (c, v, o) => void (c.allowEveryoneIfNoAclFound = parseBoolean(v, o)) },
  // SASL on SASL_* listeners (broker/sasl-authenticator.ts): Apache's keys, plus bunka's PLAIN users file.
  { fileKey: "sasl.enabled.mechanisms", apply: (c, v, o) => void (c.saslEnabledMechanisms = parseSaslMechanisms(v, o)) },
  { fileKey: "sasl.plain.users.file", apply: (c, v, o) => void (c.saslPlainUsersFile = parseNonEmpty(v, o)) },
  { fileKey: "connections.max.reauth.ms", apply: (c, v, o) => void (c.connectionsMaxReauthMs = parseInteger(v, o, 0, Number.MAX_SAFE_INTEGER)) },
  { fileKey: "connection.failed.authentication.delay.ms", apply: (c, v, o) => void (c.connectionFailedAuthenticationDelayMs = parseInteger(v, o, 0, INT32_MAX)) },
  { fileKey: "sasl.server.max.receive.size", apply: (c, v, o) => void (c.saslServerMaxReceiveSize = parseInteger(v, o, 1, INT32_MAX)) },
  { fileKey: "num.partitions", apply: (c, v, o) => void (c.numPartitions = parseInteger(v, o, 1, INT32_MAX)) },
  ...TOPIC_DEFAULT_SETTINGS,
  ...CLEANER_SETTING_NAMES.map(cleanerSetting),
  { fileKey: "transaction.max.timeout.ms", apply: (c, v, o) => void (c.transactionMaxTimeoutMs = parseInteger(v, o, 1, INT32_MAX)) },
  { fileKey: "producer.id.expiration.ms", apply: (c, v, o) => void (c.producerIdExpirationMs = parseInteger(v, o, 1, INT32_MAX)) },
  {
    fileKey: "group.initial.rebalance.delay.ms",
    apply: (c, v, o) => void (c.groupInitialRebalanceDelayMs = parseInteger(v, o, 0, INT32_MAX)),
  },
  {
    fileKey: "offsets.retention.minutes",
    apply: (c, v, o) => void (c.offsetsRetentionMs = parseInteger(v, o, 1, INT32_MAX) * 60_000),
  },
  {
    fileKey: "max.incremental.fetch.session.cache.slots",
    apply: (c, v, o) => void (c.maxIncrementalFetchSessionCacheSlots = parseInteger(v, o, 0, 1_000_000)),
  },
  {
    fileKey: "min.incremental.fetch.session.eviction.ms",
    apply: (c, v, o) => void (c.minIncrementalFetchSessionEvictionMs = parseInteger(v, o, 0, INT32_MAX)),
  },
];

const settingsByFlag = new Map(SETTINGS.filter((s) => s.flag).map((s) => [s.flag!, s]));
const settingsByFileKey = new Map(SETTINGS.map((s) => [s.fileKey, s]));

export const CONFIG_FLAG = "config";
export const CONFIG_ENV = "BUNKA_CONFIG";

// ---- sources -------------------------------------------------------------------------------------------

interface Assignment {
  setting: Setting;
  value: string;
  origin: Origin;
}

/**
 * Flags: `--name value` or `--name=value`; a repeated flag's last value wins. A value that is missing, or
 * that looks like another flag (`--data-dir --listen ...`), is an error rather than a silent swallow.
 */
function parseFlags(argv: readonly string[]): { assignments: Assignment[]; configPath: string | undefined } {
  const assignments: Assignment[] = [];
  let configPath: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) {
      throw new ConfigError(arg.startsWith("-") ? `unknown flag ${quote(arg)}` : `unexpected argument ${quote(arg)}`);
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const setting = settingsByFlag.get(name);
    if (!setting && name !== CONFIG_FLAG) throw new ConfigError(`unknown flag ${quote(`--${name}`)}`);
    let value: string;
    if (eq >= 0) {
      value = arg.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith("--")) throw new ConfigError(`missing value for --${name}`);
      value = next;
      i++;
    }
    if (setting) assignments.push({ setting, value, origin: `--${name}` });
    else configPath = parseNonEmpty(value, `--${CONFIG_FLAG}`);
  }
  return { assignments, configPath };
}

/** Environment variables; an empty variable counts as unset, as shells make that easy to produce. */
function parseEnv(env: Record<string, string | undefined>): Assignment[] {
  const out: Assignment[] = [];
  for (const setting of SETTINGS) {
    if (!setting.env) continue;
    const value = env[setting.env];
    if (value !== undefined && value !== "") out.push({ setting, value, origin: setting.env });
  }
  return out;
}

/**
 * Java-properties syntax, the subset that config files use: `key=value` or `key: value` per line, blank
 * lines and lines starting with `#` or `!` ignored, whitespace around keys and values trimmed. No escapes
 * and no line continuations. A repeated key's last value wins, as in java.util.Properties.
 */
export function parseConfigFile(text: string, path: string): Assignment[] {
  const out: Assignment[] = [];
  const lines = text.split(/\r\n|\r|\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "" || line.startsWith("#") || line.startsWith("!")) continue;
    const where = `${path} line ${i + 1}`;
    const sep = line.search(/[=:]/);
    if (sep < 0) throw new ConfigError(`${where}: expected key=value, got ${quote(line)}`);
    const key = line.slice(0, sep).trim();
    const value = line.slice(sep + 1).trim();
    if (key === "" || /\s/.test(key)) throw new ConfigError(`${where}: expected key=value, got ${quote(line)}`);
    const setting = settingsByFileKey.get(key) ?? listenerSslSetting(key) ?? listenerSaslSetting(key);
    if (!setting) throw new ConfigError(`${where}: unknown key ${quote(key)}`);
    out.push({ setting, value, origin: `${where} (${key})` });
  }
  return out;
}

function firstLine(message: string): string {
  return message.split(/\r?\n/, 1)[0] ?? "";
}

/**
 * Builds the configuration of `bunka serve` from its arguments (after `serve`), the environment and the
 * config file (read through `readFile`, which throws when it cannot read).
 */
export function parseServeArgs(
  argv: string[],
  env: Record<string, string | undefined>,
  readFile: (path: string) => string,
): BrokerConfig {
  const flags = parseFlags(argv);
  const envAssignments = parseEnv(env);
  const envConfig = env[CONFIG_ENV];
  const configPath = flags.configPath ?? (envConfig !== undefined && envConfig !== "" ? envConfig : undefined);

  let fileAssignments: Assignment[] = [];
  if (configPath !== undefined) {
    let text: string;
    try {
      text = readFile(configPath);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ConfigError(`cannot read config file ${quote(configPath)}: ${firstLine(reason)}`);
    }
    fileAssignments = parseConfigFile(text, configPath);
  }

  const config = defaultBrokerConfig();
  // Lowest precedence first, so that each later source overrides the earlier ones.
  for (const { setting, value, origin } of [...fileAssignments, ...envAssignments, ...flags.assignments]) {
    setting.apply(config, value, origin);
  }
  // The checks that involve two settings, which Apache makes when it starts.
  const where = configPath === undefined ? "config" : `config file ${quote(configPath)}`;
  const listenSet = [...fileAssignments, ...envAssignments, ...flags.assignments].some((a) => a.setting.fileKey === "listen");
  interBrokerListener(resolveListeners(config, { listen: listenSet }), config, config.etcdEndpoints !== undefined);
  // With listeners, an explicit listen is the PLAINTEXT listener's address: kept there, for serve to bind.
  if (listenSet && config.listeners !== undefined) {
    config.listeners = config.listeners.map((l) => (l.name === "PLAINTEXT" ? { name: l.name, host: config.listenHost, port: config.listenPort } : l));
  }
  httpTlsSettings(config.httpSsl);
  if (config.httpReadsNeedToken && !env.BUNKA_ADMIN_TOKEN) {
    throw new ConfigError(`${where}: http.reads.need.token needs BUNKA_ADMIN_TOKEN, the token the side-port's reads must carry (it comes from the environment only)`);
  }
  if (config.cleaner.threads < 1) throw new ConfigError(`${where}: log.cleaner.threads must be at least 1, got ${config.cleaner.threads}`);
  const dedupe = dedupeBufferProblem(config.cleaner);
  if (dedupe !== null) {
    throw new ConfigError(
      `${where}: ${dedupe} (log.cleaner.dedupe.buffer.size=${config.cleaner.dedupeBufferSizeBytes}, log.cleaner.threads=${config.cleaner.threads})`,
    );
  }
  // Apache's LogManager refuses to start with contradicting defaults (a dynamic change is not checked).
  const lags = { "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "9223372036854775807" };
  const conflict = topicConfigProblems({ ...lags, ...config.topicConfigDefaults }, {})[0];
  if (conflict !== undefined) throw new ConfigError(`${where}: ${conflict.reason}`);
  return config;
}
