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
export const EPOCH_RECORD_FORMAT = "bunka-epoch";
export const RECORD_VERSION = 1;
/** Versions a reader accepts: the current one (and the previous one, once a version 2 exists). */
const READABLE_VERSIONS = new Set([RECORD_VERSION]);

export interface HostPort {
  host: string;
  port: number;
}

export interface NamedHostPort extends HostPort {
  name: string;
}

/** What a broker advertises about itself while it is live. */
export interface BrokerRegistration {
  brokerId: number;
  /** The inter-broker listener as peers reach it (the one Kafka listener of older records). */
  kafka: HostPort;
  /**
   * Every advertised listener, by name, for Metadata per listener; absent in records of brokers that
   * predate listeners (readers then use `kafka` for every listener). An optional field, so that such
   * brokers read the new records too.
   */
  listeners?: NamedHostPort[];
  /** The HTTP side-port, null when it is off. */
  http: HostPort | null;
  rack: string | null;
}

/** The value of an owner key: who holds it, at which epoch; under which lease comes from the key's metadata. */
export interface OwnerRecordValue {
  brokerId: number;
  /** The fencing epoch of this claim (a partition's leader epoch, a slot's coordinator epoch): 1 and up. */
  epoch: number;
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

function listenersField(key: string, value: unknown): NamedHostPort[] {
  if (!Array.isArray(value)) throw new CorruptStateError(`etcd key ${key}`, "listeners is not a list");
  return value.map((entry: unknown, i) => {
    const name = (entry as { name?: unknown } | null)?.name;
    if (typeof name !== "string" || name === "") throw new CorruptStateError(`etcd key ${key}`, `listeners[${i}] has no name`);
    return { name, ...hostPortField(key, `listeners[${i}]`, entry) };
  });
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
    ...(record.listeners === undefined ? {} : { listeners: listenersField(key, record.listeners) }),
  };
}

/** Epochs are Kafka's int32 leader and coordinator epochs; 0 is single-broker mode's, so claims start at 1. */
function epochField(key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 0x7fffffff) throw new CorruptStateError(`etcd key ${key}`, `epoch ${JSON.stringify(value)} is not a positive int32`);
  return value;
}

export function encodeOwnerRecord(value: OwnerRecordValue): string {
  return JSON.stringify({ format: OWNER_RECORD_FORMAT, version: RECORD_VERSION, brokerId: value.brokerId, epoch: value.epoch });
}

export function decodeOwnerRecord(key: string, value: string): OwnerRecordValue {
  const record = parseRecord(key, value, OWNER_RECORD_FORMAT);
  return { brokerId: brokerIdField(key, record.brokerId), epoch: epochField(key, record.epoch) };
}

/** The value of a resource's epoch key: the last epoch any claim of it was given. */
export function encodeEpochRecord(epoch: number): string {
  return JSON.stringify({ format: EPOCH_RECORD_FORMAT, version: RECORD_VERSION, epoch });
}

export function decodeEpochRecord(key: string, value: string): number {
  return epochField(key, parseRecord(key, value, EPOCH_RECORD_FORMAT).epoch);
}
