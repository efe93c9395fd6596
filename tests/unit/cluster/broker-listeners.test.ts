/**
 * Brokers' listeners in etcd and in Metadata: a registration carries every advertised listener by name
 * beside the inter-broker `kafka` address, records without listeners (older brokers) still read, and
 * `endpointsFor` gives each broker's address on one listener (Apache's rule), leaving out a broker that
 * has no such listener.
 */
import { describe, expect, test } from "bun:test";
import { decodeBrokerRecord, encodeBrokerRecord } from "../../../src/cluster/cluster-records.ts";
import { ClusterOwnership } from "../../../src/cluster/cluster-ownership.ts";
import { type BrokerEndpoint, endpointsFor, SingleBrokerOwnership } from "../../../src/cluster/ownership.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";

describe("broker records", () => {
  test("listeners round-trip; a record without them reads as before", () => {
    const registration = {
      brokerId: 3,
      kafka: { host: "b3.internal", port: 9092 },
      listeners: [
        { name: "PLAINTEXT", host: "b3.internal", port: 9092 },
        { name: "SSL", host: "b3.example", port: 9093 },
      ],
      http: null,
      rack: null,
    };
    expect(decodeBrokerRecord("/k", encodeBrokerRecord(registration))).toEqual(registration);
    const old = JSON.stringify({ format: "bunka-broker", version: 1, brokerId: 3, kafka: { host: "b3", port: 9092 }, http: null, rack: null });
    expect(decodeBrokerRecord("/k", old)).toEqual({ brokerId: 3, kafka: { host: "b3", port: 9092 }, http: null, rack: null });
  });

  test("broken listeners are a CorruptStateError naming the key", () => {
    const base = { format: "bunka-broker", version: 1, brokerId: 3, kafka: { host: "b3", port: 9092 }, http: null, rack: null };
    for (const listeners of ["SSL", [{ host: "b3", port: 9093 }], [{ name: "SSL", host: "b3", port: 0 }]]) {
      expect(() => decodeBrokerRecord("/bunka/c/brokers/3", JSON.stringify({ ...base, listeners }))).toThrow(CorruptStateError);
    }
  });
});

describe("endpoints per listener", () => {
  const brokers: BrokerEndpoint[] = [
    { brokerId: 1, host: "b1", port: 9092, rack: null, listeners: [{ name: "PLAINTEXT", host: "b1", port: 9092 }, { name: "SSL", host: "b1.example", port: 9093 }] },
    { brokerId: 2, host: "b2", port: 9092, rack: "r2", listeners: [{ name: "PLAINTEXT", host: "b2", port: 9092 }] },
    { brokerId: 3, host: "b3", port: 9092, rack: null },
  ];
  const view = (list: BrokerEndpoint[]) => list.map((b) => [b.brokerId, b.host, b.port, b.rack]);

  test("a listener's addresses; brokers without it left out; brokers without listeners keep their one address", () => {
    expect(view(endpointsFor(brokers, "SSL"))).toEqual([
      [1, "b1.example", 9093, null],
      [3, "b3", 9092, null],
    ]);
    expect(view(endpointsFor(brokers, "PLAINTEXT"))).toEqual([
      [1, "b1", 9092, null],
      [2, "b2", 9092, "r2"],
      [3, "b3", 9092, null],
    ]);
    expect(view(endpointsFor(brokers, undefined))).toEqual(view(brokers));
  });

  test("both ownerships answer per listener once the listeners are advertised", () => {
    const single = new SingleBrokerOwnership(0, "127.0.0.1", 9092);
    expect(view(single.brokers("SSL"))).toEqual([[0, "127.0.0.1", 9092, null]]);
    single.setAdvertised("127.0.0.1", 9092, [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 9092 },
      { name: "SSL", host: "kafka.example", port: 9093 },
    ]);
    expect(view(single.brokers("SSL"))).toEqual([[0, "kafka.example", 9093, null]]);
    expect(view(single.brokers())).toEqual([[0, "127.0.0.1", 9092, null]]);
    expect(single.brokers("OTHER")).toEqual([]);

    const cluster = new ClusterOwnership(2, "b2", 9092, () => brokers);
    cluster.setAdvertised("b2", 9092, [{ name: "PLAINTEXT", host: "b2", port: 9092 }, { name: "SSL", host: "b2.example", port: 9093 }]);
    expect(view(cluster.brokers("SSL"))).toEqual([
      [1, "b1.example", 9093, null],
      [2, "b2.example", 9093, null],
      [3, "b3", 9092, null],
    ]);
  });
});
