/**
 * The layout of bunka's keys in etcd (docs/architecture.md, "Ownership and cluster mode"). Everything of a
 * cluster lives under `/bunka/<clusterId>/`, so that several clusters can share one etcd and a cluster's
 * keys can be listed or removed as a prefix.
 *
 *   /bunka/<clusterId>/brokers/<brokerId>            a live broker, under its lease
 *   /bunka/<clusterId>/owners/partition/<topic>-<n>  the owner of a partition, under the owner's lease
 *   /bunka/<clusterId>/owners/txn/<slot>             the owner of a transaction coordinator slot
 *   /bunka/<clusterId>/owners/group/<slot>           the owner of a group coordinator slot
 *   /bunka/<clusterId>/epochs/<kind>/<id>            the last epoch a claim of the resource was given
 *                                                    (no lease: it outlives every owner)
 *   /bunka/<clusterId>/topics/<topic>                put by a broker after it changed the topic, so that
 *                                                    every broker reads the topic's file again
 */
import { ConfigError } from "../errors/errors.ts";
import { SLOT_COUNT } from "./ownership.ts";

export const KEY_ROOT = "/bunka";

/** Kafka's cluster ids are 22 characters of URL-safe base64; anything of these characters is accepted. */
const CLUSTER_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Kafka's legal topic names; none contains "/", so a partition's key has one segment after its kind. */
const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/;

export type ResourceKind = "partition" | "txn" | "group";

/** A resource that has one owner at a time. */
export type OwnedResource = { kind: "partition"; topic: string; partition: number } | { kind: "txn"; slot: number } | { kind: "group"; slot: number };

export function checkClusterId(clusterId: string): string {
  if (!CLUSTER_ID.test(clusterId)) throw new ConfigError(`cluster id ${JSON.stringify(clusterId)} cannot name etcd keys (expected letters, digits, "-" and "_")`);
  return clusterId;
}

export function clusterPrefix(clusterId: string): string {
  return `${KEY_ROOT}/${checkClusterId(clusterId)}/`;
}

export function brokersPrefix(clusterId: string): string {
  return `${clusterPrefix(clusterId)}brokers/`;
}

export function brokerKey(clusterId: string, brokerId: number): string {
  if (!Number.isInteger(brokerId) || brokerId < 0 || brokerId > 0x7fffffff) throw new ConfigError(`broker id ${brokerId} is not a non-negative int32`);
  return `${brokersPrefix(clusterId)}${brokerId}`;
}

/** The broker id at the end of a broker key, or undefined for a key that is not one. */
export function brokerIdOfKey(clusterId: string, key: string): number | undefined {
  const prefix = brokersPrefix(clusterId);
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  if (!/^(0|[1-9][0-9]{0,9})$/.test(rest)) return undefined;
  const id = Number(rest);
  return id <= 0x7fffffff ? id : undefined;
}

/** All owner keys, or those of one kind. */
export function ownersPrefix(clusterId: string, kind?: ResourceKind): string {
  return `${clusterPrefix(clusterId)}owners/${kind === undefined ? "" : `${kind}/`}`;
}

/** The id of a resource within its kind: `<topic>-<partition>` or the slot number. */
export function resourceId(resource: OwnedResource): string {
  if (resource.kind === "partition") {
    if (!TOPIC_NAME.test(resource.topic)) throw new RangeError(`topic name ${JSON.stringify(resource.topic)} is not a legal Kafka topic name`);
    if (!Number.isInteger(resource.partition) || resource.partition < 0 || resource.partition > 0x7fffffff) throw new RangeError(`partition ${resource.partition} is not a non-negative int32`);
    return `${resource.topic}-${resource.partition}`;
  }
  if (!Number.isInteger(resource.slot) || resource.slot < 0 || resource.slot >= SLOT_COUNT) throw new RangeError(`${resource.kind} slot ${resource.slot} is not in 0..${SLOT_COUNT - 1}`);
  return String(resource.slot);
}

export function topicsPrefix(clusterId: string): string {
  return `${clusterPrefix(clusterId)}topics/`;
}

export function topicChangeKey(clusterId: string, topic: string): string {
  if (!TOPIC_NAME.test(topic)) throw new RangeError(`topic name ${JSON.stringify(topic)} is not a legal Kafka topic name`);
  return `${topicsPrefix(clusterId)}${topic}`;
}

/** The topic a topic-change key names, or undefined for a key that is not one. */
export function topicOfChangeKey(clusterId: string, key: string): string | undefined {
  const prefix = topicsPrefix(clusterId);
  if (!key.startsWith(prefix)) return undefined;
  const topic = key.slice(prefix.length);
  return TOPIC_NAME.test(topic) ? topic : undefined;
}

/** The key holding a resource's last epoch; it has no lease, so epochs keep growing across owners. */
export function epochKey(clusterId: string, resource: OwnedResource): string {
  return `${clusterPrefix(clusterId)}epochs/${resource.kind}/${resourceId(resource)}`;
}

export function ownerKey(clusterId: string, resource: OwnedResource): string {
  return `${ownersPrefix(clusterId, resource.kind)}${resourceId(resource)}`;
}

/** The resource an owner key names, or undefined for a key that is not one. */
export function resourceOfKey(clusterId: string, key: string): OwnedResource | undefined {
  const prefix = ownersPrefix(clusterId);
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  const slash = rest.indexOf("/");
  if (slash < 0) return undefined;
  const kind = rest.slice(0, slash);
  const id = rest.slice(slash + 1);
  if (kind === "partition") {
    const dash = id.lastIndexOf("-");
    const topic = id.slice(0, dash);
    const partitionText = id.slice(dash + 1);
    if (dash <= 0 || !TOPIC_NAME.test(topic) || !/^(0|[1-9][0-9]{0,9})$/.test(partitionText)) return undefined;
    const partition = Number(partitionText);
    return partition <= 0x7fffffff ? { kind, topic, partition } : undefined;
  }
  if (kind === "txn" || kind === "group") {
    if (!/^(0|[1-9][0-9]?)$/.test(id)) return undefined;
    const slot = Number(id);
    return slot < SLOT_COUNT ? { kind, slot } : undefined;
  }
  return undefined;
}
