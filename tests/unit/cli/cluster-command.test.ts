/**
 * `bunka cluster` against a fake side-port: the request it makes (GET /v1/cluster at --http, BUNKA_HTTP
 * or the default), the facts and members it prints for single and cluster mode (a lapsed lease, the note
 * when more than one broker is live), --json, help, and the exit codes.
 */
import { describe, expect, test } from "bun:test";
import { type CliDeps, runCli } from "../../../src/cli/run.ts";
import type { ClusterView } from "../../../src/http/ports.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

function cli(answer: (url: string) => Response, env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const urls: string[] = [];
  const deps: CliDeps = {
    env,
    readFile: () => {
      throw new Error("no files");
    },
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    fs: new MemoryFs(),
    serve: async () => {
      throw new Error("not serving in these tests");
    },
    fetch: async (url) => {
      urls.push(url);
      return answer(url);
    },
  };
  const run = async (...argv: string[]) => {
    out.length = 0;
    err.length = 0;
    urls.length = 0;
    const code = await runCli(argv, deps);
    return { code, stdout: out.join(""), stderr: err.join(""), urls: [...urls] };
  };
  return { run };
}

const json = (value: unknown, status = 200) => new Response(JSON.stringify(value), { status, headers: { "Content-Type": "application/json" } });

const base = {
  clusterId: "QvYZCphW1geRkx3onjbpUw",
  version: "9.9.9",
  startedAtMs: 0,
  uptimeMs: 1000,
  connections: 0,
  topicCount: 0,
  partitionCount: 0,
  features: { idempotentProducer: true, transactions: true, consumerGroups: true },
  ownership: null,
  security: { listeners: [{ name: "PLAINTEXT", securityProtocol: "PLAINTEXT", saslMechanisms: null }], authorizer: { enabled: false, acls: 0, superUsers: [], allowEveryoneIfNoAclFound: false }, scramUsers: [], sidePortReadsNeedToken: false },
};

const single: ClusterView = {
  ...base,
  brokerId: 0,
  controllerId: 0,
  mode: "single",
  brokers: [{ brokerId: 0, host: "127.0.0.1", port: 9092, rack: null }],
  etcd: null,
  lease: null,
  members: [{ brokerId: 0, kafka: { host: "127.0.0.1", port: 9092 }, http: { host: "127.0.0.1", port: 9644 }, rack: null, self: true }],
};

const clustered: ClusterView = {
  ...base,
  brokerId: 2,
  controllerId: 1,
  mode: "cluster",
  brokers: [
    { brokerId: 1, host: "10.0.0.1", port: 9092, rack: null },
    { brokerId: 2, host: "10.0.0.2", port: 9092, rack: null },
  ],
  etcd: { endpoints: ["http://10.0.0.5:2379", "http://10.0.0.6:2379"] },
  lease: { id: "7587880000000000001", ttlMs: 9000, validForMs: 6_543, state: "valid", lapses: 1, lastError: null },
  members: [
    { brokerId: 1, kafka: { host: "10.0.0.1", port: 9092 }, http: { host: "10.0.0.1", port: 9644 }, rack: "r1", self: false },
    { brokerId: 2, kafka: { host: "::1", port: 9092 }, http: null, rack: null, self: true },
  ],
  ownership: {
    shares: [
      { brokerId: 1, partitions: 3, txnSlots: 25, groupSlots: 25 },
      { brokerId: 2, partitions: 2, txnSlots: 24, groupSlots: 25 },
    ],
    unowned: { partitions: 1, txnSlots: 1, groupSlots: 0 },
    held: [
      { resource: "partition/orders-1", state: "owned", epoch: 4 },
      { resource: "partition/orders-4", state: "loading", epoch: 7 },
      { resource: "txn/3", state: "leaving", epoch: 2 },
    ],
    owners: [],
  },
};

describe("bunka cluster", () => {
  test("single mode: the facts and the one member", async () => {
    const { run } = cli(() => json(single));
    const result = await run("cluster");
    expect(result.code).toBe(0);
    expect(result.urls).toEqual(["http://127.0.0.1:9644/v1/cluster"]);
    expect(result.stdout).toBe(
      [
        "Cluster id  QvYZCphW1geRkx3onjbpUw",
        "Broker      0",
        "Mode        single",
        "Controller  0 (the lowest live broker id)",
        "etcd        - (single mode)",
        "Lease       -",
        "",
        "Members:",
        "BROKER  KAFKA           HTTP            RACK",
        "     0  127.0.0.1:9092  127.0.0.1:9644  -     (this broker)",
        "",
      ].join("\n"),
    );
  });

  test("cluster mode: endpoints, the lease, every member, each broker's share, what nobody owns, the moves in progress", async () => {
    const { run } = cli(() => json(clustered), { BUNKA_HTTP: "10.0.0.2:9644" });
    const result = await run("cluster");
    expect(result.urls).toEqual(["http://10.0.0.2:9644/v1/cluster"]);
    expect(result.stdout).toBe(
      [
        "Cluster id  QvYZCphW1geRkx3onjbpUw",
        "Broker      2",
        "Mode        cluster",
        "Controller  1 (the lowest live broker id)",
        "etcd        http://10.0.0.5:2379, http://10.0.0.6:2379",
        "Lease       7587880000000000001, TTL 9s, valid for 6.5s, 1 lapse(s) since start",
        "",
        "Members:",
        "BROKER  KAFKA          HTTP           RACK",
        "     1  10.0.0.1:9092  10.0.0.1:9644  r1",
        "     2  [::1]:9092     -              -     (this broker)",
        "",
        "Owners:",
        "BROKER  PARTITIONS  TXN SLOTS  GROUP SLOTS",
        "     1           3         25           25",
        "     2           2         24           25",
        "  none           1          1            0",
        "",
        "In progress on this broker:",
        "RESOURCE            STATE    EPOCH",
        "partition/orders-4  loading      7",
        "txn/3               leaving      2",
        "",
      ].join("\n"),
    );
  });

  test("a lapsed lease says so, with the last error", async () => {
    const lapsed = { ...clustered, lease: { ...clustered.lease!, state: "lapsed", validForMs: 0, lastError: "etcd lease keep-alive: no endpoint answered" } };
    const { run } = cli(() => json(lapsed));
    expect((await run("cluster", "--http", "10.0.0.2:9644")).stdout).toContain(
      "Lease       7587880000000000001, TTL 9s, LAPSED, 1 lapse(s) since start; last error: etcd lease keep-alive: no endpoint answered\n",
    );
  });

  test("--json prints the side-port's JSON unchanged", async () => {
    const { run } = cli(() => json(clustered));
    const result = await run("cluster", "--json");
    expect(JSON.parse(result.stdout)).toEqual(clustered);
  });

  test("help, usage errors (exit 2) and an unreachable broker (exit 1)", async () => {
    const { run } = cli(() => {
      throw Object.assign(new TypeError("Unable to connect"), { code: "ECONNREFUSED" });
    });
    const help = await run("cluster", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toStartWith("Usage: bunka cluster");
    expect(help.urls).toEqual([]);
    expect((await run("help", "cluster")).stdout).toBe(help.stdout);
    expect((await run("--help")).stdout).toContain("bunka cluster ");
    expect(await run("cluster", "extra")).toMatchObject({ code: 2, stderr: 'bunka: cluster: unexpected argument "extra" (try bunka cluster --help)\n' });
    expect(await run("cluster", "--bogus")).toMatchObject({ code: 2, stderr: 'bunka: cluster: unknown flag "--bogus" (try bunka cluster --help)\n' });
    expect(await run("cluster", "--http", "127.0.0.1:1")).toMatchObject({
      code: 1,
      stderr: "bunka: cannot reach the broker's HTTP side-port at http://127.0.0.1:1 (connection refused); is it running? (--http HOST:PORT or BUNKA_HTTP)\n",
    });
  });
});
