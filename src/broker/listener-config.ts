/**
 * The Kafka listeners as Apache configures them: `listeners`, `advertised.listeners`,
 * `listener.security.protocol.map`, `inter.broker.listener.name`, and the TLS settings (`ssl.*`, with
 * `listener.name.<name>.ssl.*` overriding them per listener; KIP-651's PEM keystore and truststore).
 *
 * cli/config.ts parses each key into BrokerConfig; `resolveListeners` checks them together, as Apache does
 * when it starts, and gives the listeners to bind, each with its security protocol, advertised address and
 * TLS files. Without any of these keys there is one PLAINTEXT listener named PLAINTEXT at `listen`
 * (bunka's own key and flag), advertised as `advertised.listener`: exactly what bunka did before.
 *
 * Every problem is a one-line ConfigError naming the key.
 */
import { SECURITY_PROTOCOLS, type SecurityProtocol, usesTls } from "../domain/security/connection-security.ts";
import { ConfigError } from "../errors/errors.ts";

/** One `NAME://host:port` entry of listeners or advertised.listeners; the name upper-cased, as Apache does. */
export interface ListenerAddress {
  name: string;
  /** Empty in `listeners`: every interface (bound as 0.0.0.0, advertised as the machine's name). */
  host: string;
  port: number;
}

export const CLIENT_AUTH_MODES = ["none", "requested", "required"] as const;
export type ClientAuth = (typeof CLIENT_AUTH_MODES)[number];

/** The ssl.* settings one listener (or the side-port) is given; absent keys fall back to the broker-wide ones. */
export interface SslSettings {
  /** ssl.keystore.location: a PEM file with the private key and the certificate chain. */
  keystoreLocation?: string;
  /** ssl.key.password: the password of an encrypted PKCS#8 key in the keystore. */
  keyPassword?: string;
  /** ssl.truststore.location: PEM CA certificates that client certificates are checked against. */
  truststoreLocation?: string;
  /** ssl.client.auth (default none). */
  clientAuth?: ClientAuth;
}

/** What the listeners are given once every setting is checked. */
export interface TlsSettings {
  keystoreLocation: string;
  keyPassword: string | undefined;
  truststoreLocation: string | undefined;
  clientAuth: ClientAuth;
  /** Where the keystore setting came from, for messages: "ssl.keystore.location" or its listener.name form. */
  keystoreKey: string;
  truststoreKey: string;
}

export interface ResolvedListener {
  name: string;
  securityProtocol: SecurityProtocol;
  /** What to bind: 0.0.0.0 for an empty host. Port 0 picks a free port. */
  host: string;
  port: number;
  /** What Metadata names for it; undefined: the bound address (the machine's name for a wildcard bind). */
  advertisedHost: string | undefined;
  advertisedPort: number | undefined;
  /** SSL and SASL_SSL listeners. */
  tls: TlsSettings | undefined;
}

/** Apache's default listener.security.protocol.map: each protocol's name maps to itself. */
export const DEFAULT_SECURITY_PROTOCOL_MAP: Readonly<Record<string, SecurityProtocol>> = Object.freeze(
  Object.fromEntries(SECURITY_PROTOCOLS.map((p) => [p, p])),
);

/** The settings of BrokerConfig that resolveListeners reads. */
export interface ListenerSettings {
  listenHost: string;
  listenPort: number;
  advertisedHost: string | undefined;
  advertisedPort: number | undefined;
  listeners: ListenerAddress[] | undefined;
  advertisedListeners: ListenerAddress[] | undefined;
  listenerSecurityProtocolMap: Record<string, SecurityProtocol> | undefined;
  interBrokerListenerName: string | undefined;
  ssl: SslSettings;
  /** listener.name.<name>.ssl.*, by upper-cased listener name. */
  listenerSsl: Record<string, SslSettings>;
}

const quote = (value: string) => JSON.stringify(value);

/** Apache's ListenerName.normalised: names are compared upper-cased. */
export const normaliseListenerName = (name: string): string => name.trim().toUpperCase();

const LISTENER_NAME = /^[A-Za-z0-9_-]+$/;
const HOST = /^[A-Za-z0-9_.-]*$/;
const IPV6 = /^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$/;

/** `NAME://host:port,...` (listeners or advertised.listeners); `minPort` 0 for binds, 1 for advertised. */
export function parseListenerList(value: string, key: string, minPort: number): ListenerAddress[] {
  const entries = value.split(",").map((entry) => entry.trim());
  if (entries.length === 1 && entries[0] === "") throw new ConfigError(`${key}: expected NAME://HOST:PORT entries separated by commas, got an empty value`);
  return entries.map((entry) => {
    const match = /^([^:/]*):\/\/(\[[^\]]*\]|[^:]*):(\d+)$/.exec(entry);
    if (match === null) throw new ConfigError(`${key}: expected NAME://HOST:PORT entries separated by commas, got ${quote(entry)}`);
    const [, name, rawHost, portText] = match as unknown as [string, string, string, string];
    if (!LISTENER_NAME.test(name)) throw new ConfigError(`${key}: bad listener name ${quote(name)} in ${quote(entry)} (letters, digits, _ and - only)`);
    let host = rawHost;
    if (host.startsWith("[")) {
      host = host.slice(1, -1);
      if (!IPV6.test(host)) throw new ConfigError(`${key}: bad IPv6 address in ${quote(entry)}`);
    } else if (!HOST.test(host)) {
      throw new ConfigError(`${key}: bad host in ${quote(entry)}`);
    }
    const port = Number(portText);
    if (port < minPort || port > 65535) throw new ConfigError(`${key}: port ${portText} is out of range (${minPort}..65535) in ${quote(entry)}`);
    return { name: normaliseListenerName(name), host, port };
  });
}

/** `NAME:PROTOCOL,...` (listener.security.protocol.map). */
export function parseSecurityProtocolMap(value: string, key: string): Record<string, SecurityProtocol> {
  const map: Record<string, SecurityProtocol> = {};
  for (const entry of value.split(",").map((e) => e.trim())) {
    const colon = entry.indexOf(":");
    if (colon < 0) throw new ConfigError(`${key}: expected NAME:PROTOCOL entries separated by commas, got ${quote(entry)}`);
    const name = normaliseListenerName(entry.slice(0, colon));
    const protocol = entry.slice(colon + 1).trim().toUpperCase();
    if (!LISTENER_NAME.test(name)) throw new ConfigError(`${key}: bad listener name ${quote(entry.slice(0, colon))}`);
    if (!(SECURITY_PROTOCOLS as readonly string[]).includes(protocol)) {
      throw new ConfigError(`${key}: unknown security protocol ${quote(entry.slice(colon + 1).trim())} for listener ${name} (expected ${SECURITY_PROTOCOLS.join("|")})`);
    }
    if (name in map) throw new ConfigError(`${key}: listener ${name} is mapped twice`);
    map[name] = protocol as SecurityProtocol;
  }
  return map;
}

function duplicateOf<T>(items: readonly T[]): T | undefined {
  const seen = new Set<T>();
  for (const item of items) {
    if (seen.has(item)) return item;
    seen.add(item);
  }
  return undefined;
}

const isWildcard = (host: string) => host === "" || host === "0.0.0.0" || host === "::";

function tlsSettingsOf(settings: ListenerSettings, name: string, protocol: SecurityProtocol): TlsSettings {
  const own = settings.listenerSsl[name] ?? {};
  const prefix = `listener.name.${name.toLowerCase()}.`;
  const pick = <K extends keyof SslSettings>(field: K, key: string): { value: SslSettings[K]; key: string } =>
    own[field] !== undefined ? { value: own[field], key: prefix + key } : { value: settings.ssl[field], key };
  const keystore = pick("keystoreLocation", "ssl.keystore.location");
  const truststore = pick("truststoreLocation", "ssl.truststore.location");
  const clientAuth = pick("clientAuth", "ssl.client.auth");
  if (keystore.value === undefined) {
    throw new ConfigError(`ssl.keystore.location: listener ${name} is ${protocol} and needs a PEM keystore (ssl.keystore.location or ${prefix}ssl.keystore.location)`);
  }
  const mode = clientAuth.value ?? "none";
  if (mode !== "none" && truststore.value === undefined) {
    throw new ConfigError(`${clientAuth.key}: ${mode} on listener ${name} needs the CA certificates to check clients against (ssl.truststore.location or ${prefix}ssl.truststore.location)`);
  }
  return {
    keystoreLocation: keystore.value,
    keyPassword: pick("keyPassword", "ssl.key.password").value,
    truststoreLocation: truststore.value,
    clientAuth: mode,
    keystoreKey: keystore.key,
    truststoreKey: truststore.key,
  };
}

/**
 * The listeners to bind, checked together: unique names, one port each (port 0 excepted), every name in
 * the protocol map, advertised listeners a subset of the listeners and dialable, the inter-broker
 * listener one of them, TLS listeners with a keystore. With `listeners`, `listen` (when given) is the
 * address of the listener named PLAINTEXT and `advertised.listener` its advertised address, so that
 * `--listen` keeps working as the PLAINTEXT listener; without such a listener they are refused, so that no
 * address is silently ignored.
 */
export function resolveListeners(settings: ListenerSettings, explicit: { listen: boolean } = { listen: false }): ResolvedListener[] {
  const map = settings.listenerSecurityProtocolMap ?? DEFAULT_SECURITY_PROTOCOL_MAP;
  const mapKey = settings.listenerSecurityProtocolMap === undefined ? "listener.security.protocol.map (Apache's default)" : "listener.security.protocol.map";
  const plaintextNamed = settings.listeners?.some((l) => l.name === "PLAINTEXT") ?? true;
  const names = (settings.listeners ?? []).map((l) => l.name).join(", ");
  if (explicit.listen && !plaintextNamed) {
    throw new ConfigError(`listen: it sets the listener named PLAINTEXT, and listeners has none (${names}); name every address in listeners instead`);
  }
  if (settings.advertisedHost !== undefined && !plaintextNamed) {
    throw new ConfigError(`advertised.listener: it advertises the listener named PLAINTEXT, and listeners has none (${names}); use advertised.listeners`);
  }
  if (settings.advertisedListeners !== undefined && settings.listeners === undefined) {
    throw new ConfigError("advertised.listeners: needs listeners (the listener names it advertises come from there)");
  }
  const listenAddress = { name: "PLAINTEXT", host: settings.listenHost, port: settings.listenPort };
  const binds: ListenerAddress[] =
    settings.listeners?.map((l) => (explicit.listen && l.name === "PLAINTEXT" ? listenAddress : l)) ?? [listenAddress];
  const key = settings.listeners === undefined ? "listen" : "listeners";

  const twiceNamed = duplicateOf(binds.map((l) => l.name));
  if (twiceNamed !== undefined) throw new ConfigError(`${key}: each listener must have a different name, ${twiceNamed} appears twice`);
  const twicePorted = duplicateOf(binds.filter((l) => l.port !== 0).map((l) => l.port));
  if (twicePorted !== undefined) {
    const names = binds.filter((l) => l.port === twicePorted).map((l) => l.name);
    throw new ConfigError(`${key}: each listener must have a different port, ${twicePorted} is used by ${names.join(" and ")}`);
  }
  for (const l of binds) {
    if (map[l.name] === undefined) throw new ConfigError(`${mapKey}: no security protocol for listener ${l.name} (named in ${key})`);
  }

  const advertised = new Map<string, ListenerAddress>();
  // advertised.listener, with listeners: the PLAINTEXT listener's (it wins over advertised.listeners' entry).
  const legacyAdvertised =
    settings.listeners !== undefined && settings.advertisedHost !== undefined && settings.advertisedPort !== undefined
      ? [{ name: "PLAINTEXT", host: settings.advertisedHost, port: settings.advertisedPort }]
      : [];
  for (const a of [...(settings.advertisedListeners ?? []).filter((x) => legacyAdvertised.length === 0 || x.name !== "PLAINTEXT"), ...legacyAdvertised]) {
    if (advertised.has(a.name)) throw new ConfigError(`advertised.listeners: each listener must have a different name, ${a.name} appears twice`);
    if (!binds.some((l) => l.name === a.name)) {
      throw new ConfigError(`advertised.listeners: ${a.name} is not a listener (listeners has ${binds.map((l) => l.name).join(", ")})`);
    }
    if (isWildcard(a.host)) throw new ConfigError(`advertised.listeners: ${a.name} must name a host clients can connect to, not ${quote(a.host)}`);
    advertised.set(a.name, a);
  }

  const inter = settings.interBrokerListenerName;
  if (inter !== undefined && !binds.some((l) => l.name === inter)) {
    throw new ConfigError(`inter.broker.listener.name: ${inter} is not a listener (listeners has ${binds.map((l) => l.name).join(", ")})`);
  }
  for (const name of Object.keys(settings.listenerSsl)) {
    if (!binds.some((l) => l.name === name)) throw new ConfigError(`listener.name.${name.toLowerCase()}.ssl.*: ${name} is not a listener`);
  }

  return binds.map((l) => {
    const securityProtocol = map[l.name]!;
    const legacy = settings.listeners === undefined;
    const ad = advertised.get(l.name);
    return {
      name: l.name,
      securityProtocol,
      host: l.host === "" ? "0.0.0.0" : l.host,
      port: l.port,
      advertisedHost: legacy ? settings.advertisedHost : ad?.host,
      advertisedPort: legacy ? settings.advertisedPort : ad?.port,
      tls: usesTls(securityProtocol) ? tlsSettingsOf(settings, l.name, securityProtocol) : undefined,
    };
  });
}

/**
 * The listener peers reach this broker on: inter.broker.listener.name, else the one named PLAINTEXT, else
 * the first. Its address is the registration's `kafka` (what brokers without listeners read) and the one
 * a broker's own Kafka client (transaction checks with a peer) dials, and that client speaks PLAINTEXT
 * only: in cluster mode the inter-broker listener must be a PLAINTEXT one.
 */
export function interBrokerListener(listeners: readonly ResolvedListener[], settings: Pick<ListenerSettings, "interBrokerListenerName">, clusterMode: boolean): ResolvedListener {
  const named = settings.interBrokerListenerName;
  const chosen = listeners.find((l) => l.name === named) ?? listeners.find((l) => l.name === "PLAINTEXT") ?? listeners[0]!;
  if (clusterMode && chosen.securityProtocol !== "PLAINTEXT") {
    const key = named === undefined ? "listeners" : "inter.broker.listener.name";
    throw new ConfigError(
      `${key}: in cluster mode the inter-broker listener (${chosen.name}) must be PLAINTEXT, it is ${chosen.securityProtocol}: brokers check transactions with each other over PLAINTEXT only (add a PLAINTEXT listener and name it in inter.broker.listener.name)`,
    );
  }
  return chosen;
}

/** http.ssl.*: TLS on the side-port when http.ssl.keystore.location is set (bunka's own keys, same meaning). */
export function httpTlsSettings(ssl: SslSettings): TlsSettings | undefined {
  if (ssl.keystoreLocation === undefined) {
    const stray = (["truststoreLocation", "keyPassword", "clientAuth"] as const).find((field) => ssl[field] !== undefined);
    if (stray !== undefined) throw new ConfigError("http.ssl.keystore.location: the other http.ssl.* settings need it (TLS on the side-port is on only with a keystore)");
    return undefined;
  }
  const clientAuth = ssl.clientAuth ?? "none";
  if (clientAuth !== "none" && ssl.truststoreLocation === undefined) {
    throw new ConfigError(`http.ssl.client.auth: ${clientAuth} needs http.ssl.truststore.location (the CA certificates to check clients against)`);
  }
  return {
    keystoreLocation: ssl.keystoreLocation,
    keyPassword: ssl.keyPassword,
    truststoreLocation: ssl.truststoreLocation,
    clientAuth,
    keystoreKey: "http.ssl.keystore.location",
    truststoreKey: "http.ssl.truststore.location",
  };
}
