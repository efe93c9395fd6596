/**
 * The key layout in etcd and the records stored under it: keys built and parsed back (topic names with
 * dashes included), foreign keys ignored, records versioned and refused with the key named when they are
 * not what this broker reads.
 */
import { describe, expect, test } from "bun:test";
import { brokerIdOfKey, brokerKey, brokersPrefix, checkClusterId, ownerKey, ownersPrefix, resourceOfKey, type OwnedResource } from "../../../src/cluster/cluster-keys.ts";
import { decodeBrokerRecord, decodeEpochRecord, decodeOwnerRecord, encodeEpochRecord, encodeBrokerRecord, encodeOwnerRecord } from "../../../src/cluster/cluster-records.ts";
import { ConfigError, CorruptStateError } from "../../../src/errors/errors.ts";

const CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk";

describe("etcd key layout", () => {
  test("brokers and owners live under /bunka/<clusterId>/", () => {
    expect(brokerKey(CLUSTER, 3)).toBe(`/bunka/${CLUSTER}/brokers/3`);
    expect(brokersPrefix(CLUSTER)).toBe(`/bunka/${CLUSTER}/brokers/`);
    expect(ownerKey(CLUSTER, { kind: "partition", topic: "orders", partition: 2 })).toBe(`/bunka/${CLUSTER}/owners/partition/orders-2`);
    expect(ownerKey(CLUSTER, { kind: "txn", slot: 0 })).toBe(`/bunka/${CLUSTER}/owners/txn/0`);
    expect(ownerKey(CLUSTER, { kind: "group", slot: 49 })).toBe(`/bunka/${CLUSTER}/owners/group/49`);
    expect(ownersPrefix(CLUSTER)).toBe(`/bunka/${CLUSTER}/owners/`);
    expect(ownersPrefix(CLUSTER, "txn")).toBe(`/bunka/${CLUSTER}/owners/txn/`);
  });

  test("owner keys parse back to their resource, topic names with dashes and dots included", () => {
    const resources: OwnedResource[] = [
      { kind: "partition", topic: "a-1", partition: 2 },
      { kind: "partition", topic: "__consumer.offsets_x-", partition: 0 },
      { kind: "partition", topic: "t", partition: 2147483647 },
      { kind: "txn", slot: 17 },
      { kind: "group", slot: 0 },
    ];
    for (const resource of resources) expect(resourceOfKey(CLUSTER, ownerKey(CLUSTER, resource))).toEqual(resource);
  });

  test("keys that are not bunka's, or of another cluster, parse to nothing", () => {
    for (const key of [
      `/bunka/other/owners/txn/1`,
      `/bunka/${CLUSTER}/owners/txn/50`,
      `/bunka/${CLUSTER}/owners/txn/01`,
      `/bunka/${CLUSTER}/owners/lock/1`,
      `/bunka/${CLUSTER}/owners/partition/nodash`,
      `/bunka/${CLUSTER}/owners/partition/-1`,
      `/bunka/${CLUSTER}/owners/partition/a/b-1`,
      `/bunka/${CLUSTER}/owners/partition/a-2147483648`,
      `/bunka/${CLUSTER}/owners/txn`,
    ]) {
      expect(resourceOfKey(CLUSTER, key)).toBeUndefined();
    }
    expect(brokerIdOfKey(CLUSTER, `/bunka/${CLUSTER}/brokers/12`)).toBe(12);
    expect(brokerIdOfKey(CLUSTER, `/bunka/${CLUSTER}/brokers/012`)).toBeUndefined();
    expect(brokerIdOfKey(CLUSTER, `/bunka/${CLUSTER}/brokers/1/x`)).toBeUndefined();
    expect(brokerIdOfKey(CLUSTER, `/bunka/other/brokers/1`)).toBeUndefined();
  });

  test("a cluster id or resource that cannot name a key is refused", () => {
    expect(() => checkClusterId("a/b")).toThrow(ConfigError);
    expect(() => checkClusterId("")).toThrow(ConfigError);
    expect(() => brokerKey(CLUSTER, -1)).toThrow(ConfigError);
    expect(() => ownerKey(CLUSTER, { kind: "txn", slot: 50 })).toThrow(RangeError);
    expect(() => ownerKey(CLUSTER, { kind: "partition", topic: "a/b", partition: 0 })).toThrow(RangeError);
  });
});

describe("records in etcd", () => {
  const registration = { brokerId: 2, kafka: { host: "b2.example", port: 9092 }, http: null, rack: "eu-1a" };

  test("a broker registration round-trips with its format and version", () => {
    const value = encodeBrokerRecord(registration);
    expect(JSON.parse(value)).toEqual({ format: "bunka-broker", version: 1, ...registration });
    expect(decodeBrokerRecord("/k", value)).toEqual(registration);
    expect(decodeOwnerRecord("/k", encodeOwnerRecord({ brokerId: 4, epoch: 7 }))).toEqual({ brokerId: 4, epoch: 7 });
    expect(decodeEpochRecord("/k", encodeEpochRecord(7))).toBe(7);
  });

  test("an owner or epoch record whose epoch is not a positive int32 is refused naming the key", () => {
    for (const epoch of [0, -1, 2 ** 31, 1.5, "3", null]) {
      const owner = JSON.stringify({ format: "bunka-owner", version: 1, brokerId: 1, epoch });
      expect(() => decodeOwnerRecord("/bunka/c/owners/txn/1", owner)).toThrow(`etcd key /bunka/c/owners/txn/1: epoch ${JSON.stringify(epoch)} is not a positive int32`);
      const last = JSON.stringify({ format: "bunka-epoch", version: 1, epoch });
      expect(() => decodeEpochRecord("/bunka/c/epochs/txn/1", last)).toThrow(CorruptStateError);
    }
  });

  test("another format, another version, or a broken field is refused naming the key", () => {
    const cases: [string, string][] = [
      ["not json", "the value is not JSON"],
      ["[]", "the value is not a JSON object"],
      [JSON.stringify({ format: "bunka-owner", version: 1, brokerId: 1 }), 'format is "bunka-owner", expected "bunka-broker"'],
      [JSON.stringify({ ...JSON.parse(encodeBrokerRecord(registration)), version: 2 }), "bunka-broker version 2 is not one this broker reads (1)"],
      [JSON.stringify({ ...JSON.parse(encodeBrokerRecord(registration)), brokerId: -1 }), "brokerId -1 is not a non-negative int32"],
      [JSON.stringify({ ...JSON.parse(encodeBrokerRecord(registration)), kafka: { host: "h", port: 0 } }), "kafka is not a host and port"],
      [JSON.stringify({ ...JSON.parse(encodeBrokerRecord(registration)), rack: 5 }), "rack is not a string or null"],
    ];
    for (const [value, reason] of cases) {
      let error: unknown;
      try {
        decodeBrokerRecord("/bunka/c/brokers/2", value);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(CorruptStateError);
      expect((error as Error).message).toBe(`etcd key /bunka/c/brokers/2: ${reason}`);
    }
  });
});
