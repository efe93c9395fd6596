/**
 * The values bunka keeps in etcd (docs/architecture.md, "Ownership and cluster mode"): JSON with a format
 * name and a version, read back strictly. Loading accepts the current version (and, once there is one, the
 * previous) and refuses anything else with a CorruptStateError naming the key, never treating an
 * unreadable record as absent. They carry no checksum of their own: etcd applies a value whole through its
 * raft log, whose records are checksummed, so a value is never torn the way a file can be.
 */
import { CorruptStateError } from "../errors/errors.ts";

export const BROKER_RECORD_FORMAT = "bunka-broker";
export const OWNER_RECORD_FORMAT = "bunka-owner";
export const RECORD_VERSION = 1;
/** Versions a reader accepts: the current one (and the previous one, once a version 2 exists). */
const READABLE_VERSIONS = new Set([RECORD_VERSION]);

export interface HostPort {
  host: string;
  port: number;
}

/** What a broker advertises about itself while it is live. */
export interface BrokerRegistration {
  brokerId: number;
  /** The Kafka listener as clients reach it. */
  kafka: HostPort;
  /** The HTTP side-port, null when it is off. */
  http: HostPort | null;
  rack: string | null;
}

/** The value of an owner key; who holds it under which lease and epoch comes from the key's metadata. */
export interface OwnerRecordValue {
  brokerId: number;
}

type Json = Record<string, unknown>;

function parseRecord(key: string, value: string, format: string): Json {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new CorruptStateError(`etcd key ${key}`, "the value is not JSON");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new CorruptStateError(`etcd key ${key}`, "the value is not a JSON object");
  const record = parsed as Json;
  if (record.format !== format) throw new CorruptStateError(`etcd key ${key}`, `format is ${JSON.stringify(record.format)}, expected ${JSON.stringify(format)}`);
  if (typeof record.version !== "number" || !READABLE_VERSIONS.has(record.version)) {
    throw new CorruptStateError(`etcd key ${key}`, `${format} version ${JSON.stringify(record.version)} is not one this broker reads (${[...READABLE_VERSIONS].join(", ")})`);
  }
  return record;
}

function brokerIdField(key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0x7fffffff) throw new CorruptStateError(`etcd key ${key}`, `brokerId ${JSON.stringify(value)} is not a non-negative int32`);
  return value;
}

function hostPortField(key: string, field: string, value: unknown): HostPort {
  const hp = value as { host?: unknown; port?: unknown } | null;
  if (hp === null || typeof hp !== "object" || typeof hp.host !== "string" || hp.host === "" || typeof hp.port !== "number" || !Number.isInteger(hp.port) || hp.port < 1 || hp.port > 65535) {
    throw new CorruptStateError(`etcd key ${key}`, `${field} is not a host and port`);
  }
  return { host: hp.host, port: hp.port };
}

export function encodeBrokerRecord(registration: BrokerRegistration): string {
  return JSON.stringify({ format: BROKER_RECORD_FORMAT, version: RECORD_VERSION, ...registration });
}

export function decodeBrokerRecord(key: string, value: string): BrokerRegistration {
  const record = parseRecord(key, value, BROKER_RECORD_FORMAT);
  if (record.rack !== null && typeof record.rack !== "string") throw new CorruptStateError(`etcd key ${key}`, "rack is not a string or null");
  return {
    brokerId: brokerIdField(key, record.brokerId),
    kafka: hostPortField(key, "kafka", record.kafka),
    http: record.http === null ? null : hostPortField(key, "http", record.http),
    rack: record.rack,
  };
}

export function encodeOwnerRecord(value: OwnerRecordValue): string {
  return JSON.stringify({ format: OWNER_RECORD_FORMAT, version: RECORD_VERSION, brokerId: value.brokerId });
}

export function decodeOwnerRecord(key: string, value: string): OwnerRecordValue {
  const record = parseRecord(key, value, OWNER_RECORD_FORMAT);
  return { brokerId: brokerIdField(key, record.brokerId) };
}
