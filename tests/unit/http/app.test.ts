/**
 * The HTTP side-port's routes, statuses and encodings, with `app.request()` against fake query ports: no
 * socket, no broker. broker-ports.test.ts covers the ports against a real broker.
 */
import { describe, expect, test } from "bun:test";
import { decode as decodeMsgpack } from "@msgpack/msgpack";
import { createHttpApp, MAX_LIST_LIMIT, wantsMsgpack } from "../../../src/http/app.ts";
import type {
  ClusterView,
  HttpQueryPorts,
  MarkerView,
  ProducersQuery,
  Readiness,
  TopicDetailView,
  TransactionDetailView,
  TransactionFilter,
  TransactionOverview,
  TransactionQueryPort,
  TransactionView,
} from "../../../src/http/ports.ts";

const cluster: ClusterView = {
  clusterId: "AAAAAAAAAAAAAAAAAAAAAA",
  brokerId: 0,
  controllerId: 0,
  mode: "single",
  version: "9.9.9",
  brokers: [{ brokerId: 0, host: "127.0.0.1", port: 9092, rack: null }],
  etcd: null,
  lease: null,
  ownership: null,
  members: [{ brokerId: 0, kafka: { host: "127.0.0.1", port: 9092 }, http: { host: "127.0.0.1", port: 9644 }, rack: null, self: true }],
  startedAtMs: 1_700_000_000_000,
  uptimeMs: 65_000,
  connections: 3,
  topicCount: 1,
  partitionCount: 2,
  features: { idempotentProducer: true, transactions: false, consumerGroups: false },
  security: { listeners: [{ name: "PLAINTEXT", securityProtocol: "PLAINTEXT", saslMechanisms: null }], authorizer: { enabled: false, acls: 0, superUsers: [], allowEveryoneIfNoAclFound: false }, scramUsers: [], sidePortReadsNeedToken: false },
};

const orders: TopicDetailView = {
  name: "orders",
  topicId: "6b0b7f3e-4d4f-4b8a-9d2c-0e1f2a3b4c5d",
  partitions: 2,
  createdMs: 1_700_000_000_000,
  configs: { "retention.ms": "60000" },
  sizeBytes: 420,
  partitionDetails: [
    {
      partition: 0,
      leader: 0,
      open: true,
      logStartOffset: 0,
      logEndOffset: 7,
      highWatermark: 7,
      lastStableOffset: 7,
      segmentCount: 1,
      segmentBaseOffsets: [0],
      sizeBytes: 420,
      producerCount: 1,
      openTransactionCount: 0,
      lsoLag: 0,
      failure: null,
      cleaner: null,
    },
    {
      partition: 1,
      leader: 0,
      open: false,
      logStartOffset: null,
      logEndOffset: null,
      highWatermark: null,
      lastStableOffset: null,
      segmentCount: null,
      segmentBaseOffsets: null,
      sizeBytes: null,
      producerCount: null,
      openTransactionCount: null,
      lsoLag: null,
      failure: null,
      cleaner: null,
    },
  ],
};

/** The ports with every call recorded, so tests can check what the app asked. */
function fakePorts(overrides: Partial<HttpQueryPorts> & { ready?: Readiness } = {}) {
  const calls: { producers: Array<[string, number, ProducersQuery]>; transactions: TransactionFilter[] } = { producers: [], transactions: [] };
  const { ready, ...rest } = overrides;
  const ports: HttpQueryPorts = {
    readiness: async () => ready ?? { ready: true },
    cluster: () => cluster,
    topics: async () => [
      { name: orders.name, topicId: orders.topicId, partitions: orders.partitions, createdMs: orders.createdMs, configs: orders.configs, sizeBytes: orders.sizeBytes },
    ],
    topic: async (name) => (name === "orders" ? orders : undefined),
    producers: async (topic, partition, query) => {
      calls.producers.push([topic, partition, query]);
      if (topic !== "orders") return { kind: "unknown-topic" };
      if (partition >= 2) return { kind: "unknown-partition", partitions: 2 };
      return {
        kind: "ok",
        view: {
          topic,
          partition,
          open: true,
          total: 1,
          truncated: false,
          producers: [
            {
              producerId: 4_294_967_296, // above 32 bits: must survive JSON and MessagePack as a number
              epoch: 2,
              batches: [{ firstSeq: 0, lastSeq: 4, firstOffset: 0, lastOffset: 4, timestampMs: 1_700_000_000_123 }],
              lastTimestampMs: 1_700_000_000_123,
              currentTxnFirstOffset: null,
              coordinatorEpoch: null,
            },
          ],
        },
      };
    },
    metrics: async () => "# HELP bunka_up test\n# TYPE bunka_up gauge\nbunka_up 1\n",
    ...rest,
  };
  return { ports, calls };
}

async function json(response: Response): Promise<any> {
  expect(response.headers.get("content-type")).toStartWith("application/json");
  return response.json();
}

const msgpack = { headers: { Accept: "application/msgpack" } };

async function unpack(response: Response): Promise<any> {
  expect(response.headers.get("content-type")).toBe("application/msgpack");
  return decodeMsgpack(new Uint8Array(await response.arrayBuffer()));
}

describe("health and readiness", () => {
  test("GET /health answers 200 {status: ok}", async () => {
    const app = createHttpApp(fakePorts().ports);
    const res = await app.request("/health");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ status: "ok" });
  });

  test("GET /ready answers 200 when the ports say ready", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/ready");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ status: "ready" });
  });

  test("GET /ready answers 200 degraded with the message when partitions with damaged data are not served", async () => {
    const app = createHttpApp(fakePorts({ ready: { ready: true, degraded: "damaged data in 1 partition(s): t-0" } }).ports);
    const res = await app.request("/ready");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ status: "degraded", message: "damaged data in 1 partition(s): t-0" });
  });

  test("GET /ready answers 503 with the reason when not ready", async () => {
    const app = createHttpApp(fakePorts({ ready: { ready: false, reason: "the broker is shutting down" } }).ports);
    const res = await app.request("/ready");
    expect(res.status).toBe(503);
    expect(await json(res)).toEqual({ error: "not_ready", message: "the broker is shutting down" });
  });

  test("HEAD /health answers 200 without a body", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/health", { method: "HEAD" });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
  });
});

describe("metrics", () => {
  test("GET /metrics is the Prometheus text format from the ports", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(await res.text()).toBe("# HELP bunka_up test\n# TYPE bunka_up gauge\nbunka_up 1\n");
  });

  test("/metrics stays text even when MessagePack is asked for", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/metrics", msgpack);
    expect(res.headers.get("content-type")).toStartWith("text/plain");
  });
});

describe("cluster and topics", () => {
  test("GET /v1/cluster as JSON and as MessagePack", async () => {
    const app = createHttpApp(fakePorts().ports);
    const res = await app.request("/v1/cluster");
    expect(res.status).toBe(200);
    expect(res.headers.get("vary")).toBe("Accept");
    expect(await json(res)).toEqual(cluster);
    const packed = await app.request("/v1/cluster", msgpack);
    expect(packed.status).toBe(200);
    expect(await unpack(packed)).toEqual(cluster);
  });

  test("GET /v1/topics lists the topics", async () => {
    const app = createHttpApp(fakePorts().ports);
    const body = await json(await app.request("/v1/topics"));
    expect(body.topics).toHaveLength(1);
    expect(body.topics[0]).toMatchObject({ name: "orders", partitions: 2, sizeBytes: 420, configs: { "retention.ms": "60000" } });
    expect((await unpack(await app.request("/v1/topics", msgpack))).topics[0].name).toBe("orders");
  });

  test("GET /v1/topics/:topic shows every partition's offsets, segments and size", async () => {
    const app = createHttpApp(fakePorts().ports);
    const res = await app.request("/v1/topics/orders");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual(orders);
    expect(await unpack(await app.request("/v1/topics/orders", msgpack))).toEqual(orders);
  });

  test("an unknown topic is 404 unknown_topic", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/topics/nope");
    expect(res.status).toBe(404);
    expect(await json(res)).toEqual({ error: "unknown_topic", message: 'topic "nope" does not exist' });
  });

  test("errors stay JSON when MessagePack is asked for", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/topics/nope", msgpack);
    expect(res.status).toBe(404);
    expect((await json(res)).error).toBe("unknown_topic");
  });
});

describe("producers", () => {
  test("GET /v1/producers/:topic/:partition shows the dedupe windows", async () => {
    const { ports, calls } = fakePorts();
    const app = createHttpApp(ports);
    const res = await app.request("/v1/producers/orders/0");
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({ topic: "orders", partition: 0, open: true, total: 1, truncated: false });
    expect(body.producers[0]).toEqual({
      producerId: 4_294_967_296,
      epoch: 2,
      batches: [{ firstSeq: 0, lastSeq: 4, firstOffset: 0, lastOffset: 4, timestampMs: 1_700_000_000_123 }],
      lastTimestampMs: 1_700_000_000_123,
      currentTxnFirstOffset: null,
      coordinatorEpoch: null,
    });
    expect(calls.producers).toEqual([["orders", 0, { limit: 1000 }]]);
    const packed = await unpack(await app.request("/v1/producers/orders/0", msgpack));
    expect(packed.producers[0].producerId).toBe(4_294_967_296);
  });

  test("limit and producerId are passed to the port", async () => {
    const { ports, calls } = fakePorts();
    const res = await createHttpApp(ports).request("/v1/producers/orders/1?limit=5&producerId=42");
    expect(res.status).toBe(200);
    expect(calls.producers).toEqual([["orders", 1, { limit: 5, producerId: 42 }]]);
  });

  test.each(["-1", "x", "1.5", "2147483648", "01x"])("partition %p is 400 invalid_partition", async (partition) => {
    const { ports, calls } = fakePorts();
    const res = await createHttpApp(ports).request(`/v1/producers/orders/${partition}`);
    expect(res.status).toBe(400);
    expect((await json(res)).error).toBe("invalid_partition");
    expect(calls.producers).toEqual([]);
  });

  test.each(["0", String(MAX_LIST_LIMIT + 1), "ten", "-3"])("limit=%p is 400 bad_request", async (limit) => {
    const res = await createHttpApp(fakePorts().ports).request(`/v1/producers/orders/0?limit=${limit}`);
    expect(res.status).toBe(400);
    const body = await json(res);
    expect(body.error).toBe("bad_request");
    expect(body.message).toContain("limit");
  });

  test("producerId=abc is 400", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/producers/orders/0?producerId=abc");
    expect(res.status).toBe(400);
  });

  test("an unknown topic is 404 unknown_topic, a partition past the end 404 unknown_partition", async () => {
    const app = createHttpApp(fakePorts().ports);
    const topic = await app.request("/v1/producers/nope/0");
    expect(topic.status).toBe(404);
    expect((await json(topic)).error).toBe("unknown_topic");
    const partition = await app.request("/v1/producers/orders/2");
    expect(partition.status).toBe(404);
    expect(await json(partition)).toEqual({
      error: "unknown_partition",
      message: 'topic "orders" has 2 partition(s), so partition 2 does not exist',
    });
  });
});

const txn: TransactionView = {
  transactionalId: "tx/1",
  producerId: 7,
  lastProducerId: -1,
  epoch: 3,
  lastEpoch: -1,
  timeoutMs: 60_000,
  state: "Ongoing",
  partitions: [{ topic: "orders", partition: 0 }],
  groups: [],
  ongoingSinceMs: 1_700_000_000_000,
  ageMs: 65_000,
  timedOut: true,
  updatedMs: 1_700_000_000_500,
  slot: 12,
  coordinatorBrokerId: 0,
};

const marker: MarkerView = {
  transactionalId: "tx/1",
  producerId: 7,
  producerEpoch: 3,
  coordinatorEpoch: 0,
  result: "COMMIT",
  topic: "orders",
  partition: 0,
  targetBrokerId: 1,
  source: "queue",
  sinceMs: 1_700_000_000_000,
  file: "__cluster/marker_queue/to-1/7-3-1700000000000-commit.json",
};

const txnDetail: TransactionDetailView = {
  ...txn,
  stagedOffsets: [{ groupId: "g", topic: "orders", partition: 0, offset: 42, leaderEpoch: -1, metadata: "", commitTimestampMs: 1_700_000_000_400 }],
  pendingMarkers: [marker],
  timeline: [],
};

const overview: TransactionOverview = {
  byState: { Empty: 2, Ongoing: 1, PrepareCommit: 0, PrepareAbort: 0, CompleteCommit: 5, CompleteAbort: 1 },
  oldestOngoingAgeMs: 65_000,
  warnings: [
    {
      kind: "timed-out-transaction",
      message: 'transaction "tx/1" (producer 7, epoch 3) has been Ongoing for 1m 5s, past its timeout of 60s',
      transactionalId: "tx/1",
      topic: null,
      partition: null,
      sinceMs: 1_700_000_000_000,
    },
  ],
};

function fakeTransactions(filters: TransactionFilter[] = []): TransactionQueryPort {
  return {
    list: async (filter) => {
      filters.push(filter);
      return { total: 2, transactions: [txn] };
    },
    get: async (id) => (id === "tx/1" ? txnDetail : undefined),
    overview: async () => overview,
  };
}

describe("transactions and markers in a build without a coordinator (no ports)", () => {
  test("GET /v1/transactions is 501 not_implemented, saying the coordinator is missing", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/transactions");
    expect(res.status).toBe(501);
    const body = await json(res);
    expect(body.error).toBe("not_implemented");
    expect(body.message).toContain("no transaction coordinator");
  });

  test("GET /v1/transactions/:id is 501", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/transactions/my-app");
    expect(res.status).toBe(501);
    expect((await json(res)).error).toBe("not_implemented");
  });

  test("GET /v1/markers is 501", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v1/markers");
    expect(res.status).toBe(501);
    expect((await json(res)).error).toBe("not_implemented");
  });

  test("filters are validated before the 501, so a bad query fails the same before and after", async () => {
    const app = createHttpApp(fakePorts().ports);
    for (const query of ["state=Bogus", "minAgeMs=-1", "minAgeMs=soon", "limit=0", "producerId=x", "producerId=-2"]) {
      const res = await app.request(`/v1/transactions?${query}`);
      expect(res.status).toBe(400);
      expect((await json(res)).error).toBe("bad_request");
    }
    expect((await app.request("/v1/transactions?state=Ongoing&minAgeMs=60000")).status).toBe(501);
  });
});

describe("transactions and markers once their ports exist", () => {
  test("list passes the filter and reports truncation; get finds or 404s; ids may contain a slash", async () => {
    const filters: TransactionFilter[] = [];
    const { ports } = fakePorts({ transactions: fakeTransactions(filters) });
    const app = createHttpApp(ports);
    const list = await json(await app.request("/v1/transactions?state=Ongoing&minAgeMs=1000&producerId=7&limit=1"));
    expect(list).toEqual({ total: 2, truncated: true, transactions: [txn] });
    expect(filters).toEqual([{ state: "Ongoing", minAgeMs: 1000, producerId: 7, limit: 1 }]);
    await app.request("/v1/transactions");
    expect(filters[1]).toEqual({ limit: 1000 });
    const one = await app.request(`/v1/transactions/${encodeURIComponent("tx/1")}`);
    expect(one.status).toBe(200);
    expect(await json(one)).toEqual(txnDetail);
    expect(await unpack(await app.request(`/v1/transactions/${encodeURIComponent("tx/1")}`, msgpack))).toEqual(txnDetail);
    const missing = await app.request("/v1/transactions/other");
    expect(missing.status).toBe(404);
    expect(await json(missing)).toEqual({ error: "unknown_transactional_id", message: 'no transaction state for "other"' });
  });

  test("markers list with the queue depths, as JSON and MessagePack, and the limit", async () => {
    const limits: number[] = [];
    const { ports } = fakePorts({
      markers: {
        pending: async (limit) => {
          limits.push(limit);
          return { total: 1, markers: [marker].slice(0, limit), queues: [{ targetBrokerId: 1, files: 1 }] };
        },
      },
    });
    const app = createHttpApp(ports);
    const res = await app.request("/v1/markers");
    expect(res.status).toBe(200);
    const expected = { total: 1, truncated: false, markers: [marker], queues: [{ targetBrokerId: 1, files: 1 }] };
    expect(await json(res)).toEqual(expected);
    expect(await unpack(await app.request("/v1/markers", msgpack))).toEqual(expected);
    expect((await app.request("/v1/markers?limit=0")).status).toBe(400);
    expect(limits).toEqual([1000, 1000]);
  });
});

describe("routes and methods", () => {
  test("an unknown route is 404 not_found", async () => {
    const res = await createHttpApp(fakePorts().ports).request("/v2/whatever");
    expect(res.status).toBe(404);
    expect(await json(res)).toEqual({ error: "not_found", message: "no such endpoint: GET /v2/whatever" });
  });

  test("a known route with another method is 405 with Allow", async () => {
    const app = createHttpApp(fakePorts().ports);
    for (const [method, path] of [
      ["POST", "/v1/topics"],
      ["DELETE", "/v1/topics/orders"],
      ["PUT", "/health"],
      ["POST", "/v1/producers/orders/0"],
    ] as const) {
      const res = await app.request(path, { method });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD");
      expect((await json(res)).error).toBe("method_not_allowed");
    }
  });

  test("an unexpected error is 500 internal_error and is reported", async () => {
    const reported: unknown[] = [];
    const { ports } = fakePorts({
      topics: async () => {
        throw new Error("boom");
      },
    });
    const app = createHttpApp(ports, { onError: (error) => reported.push(error) });
    const res = await app.request("/v1/topics");
    expect(res.status).toBe(500);
    expect(await json(res)).toEqual({ error: "internal_error", message: "boom" });
    expect(reported).toHaveLength(1);
  });
});

describe("admin token", () => {
  const abortPath = "/v1/transactions/my-app/abort";

  test("without a configured token the write route does not exist (404)", async () => {
    const app = createHttpApp(fakePorts().ports);
    const res = await app.request(abortPath, { method: "POST", headers: { Authorization: "Bearer anything" } });
    expect(res.status).toBe(404);
    expect((await json(res)).error).toBe("not_found");
  });

  test("an empty configured token counts as none", async () => {
    const res = await createHttpApp(fakePorts().ports, { adminToken: "" }).request(abortPath, { method: "POST" });
    expect(res.status).toBe(404);
  });

  test("with a token: 401 without or with a wrong token, 501 with the right one", async () => {
    const app = createHttpApp(fakePorts().ports, { adminToken: "s3cret" });
    const none = await app.request(abortPath, { method: "POST" });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="bunka"');
    expect((await json(none)).error).toBe("unauthorized");
    for (const authorization of ["Bearer wrong", "Bearer s3cret2", "Basic czNjcmV0", "s3cret", "Bearer "]) {
      const res = await app.request(abortPath, { method: "POST", headers: { Authorization: authorization } });
      expect(res.status).toBe(401);
    }
    const ok = await app.request(abortPath, { method: "POST", headers: { Authorization: "Bearer s3cret" } });
    expect(ok.status).toBe(501);
    const body = await json(ok);
    expect(body.error).toBe("not_implemented");
    expect(body.message).toContain("no transaction coordinator");
  });

  test("with a token the write route answers 405 to GET, and reads stay open without a token", async () => {
    const app = createHttpApp(fakePorts().ports, { adminToken: "s3cret" });
    const get = await app.request(abortPath);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect((await app.request("/v1/topics")).status).toBe(200);
  });

  test("http.reads.need.token: every route but /health and /ready needs the token, as Bearer or as Basic auth's password", async () => {
    const app = createHttpApp(fakePorts().ports, { adminToken: "s3cret", readsNeedToken: true });
    for (const path of ["/", "/metrics", "/v1/cluster", "/v1/topics", "/v1/transactions", "/no-such-route"]) {
      const refused = await app.request(path);
      expect({ path, status: refused.status }).toEqual({ path, status: 401 });
      expect(refused.headers.get("www-authenticate")).toBe('Basic realm="bunka", Bearer realm="bunka"');
      expect((await json(refused)).error).toBe("unauthorized");
      expect((await app.request(path, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
    }
    expect((await app.request("/v1/topics", { headers: { Authorization: "Bearer s3cret" } })).status).toBe(200);
    const basic = (user: string, password: string) => ({ Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` });
    expect((await app.request("/", { headers: basic("anyone", "s3cret") })).status).toBe(200);
    expect((await app.request("/", { headers: basic("s3cret", "wrong") })).status).toBe(401);
    expect((await app.request("/", { headers: { Authorization: "Basic !!!" } })).status).toBe(401);
    expect((await app.request("/health")).status).toBe(200);
    expect((await app.request("/ready")).status).toBe(200);
    // The write route still needs the bearer token itself.
    expect((await app.request(abortPath, { method: "POST", headers: basic("x", "wrong") })).status).toBe(401);
    expect(() => createHttpApp(fakePorts().ports, { readsNeedToken: true })).toThrow("readsNeedToken needs an admin token");
  });

  test("with a token and an admin port, the abort is delegated", async () => {
    const aborted: string[] = [];
    const { ports } = fakePorts({
      transactionAdmin: {
        abort: async (id) => {
          aborted.push(id);
          return id === "my-app" ? { ok: true, body: { transactionalId: id, state: "PrepareAbort" } } : { ok: false, status: 404, error: "unknown_transactional_id", message: "no" };
        },
      },
    });
    const app = createHttpApp(ports, { adminToken: "s3cret" });
    const headers = { Authorization: "Bearer s3cret" };
    const ok = await app.request(abortPath, { method: "POST", headers });
    expect(ok.status).toBe(200);
    expect(await json(ok)).toEqual({ transactionalId: "my-app", state: "PrepareAbort" });
    const missing = await app.request("/v1/transactions/other/abort", { method: "POST", headers });
    expect(missing.status).toBe(404);
    expect(aborted).toEqual(["my-app", "other"]);
  });

  test("the admin port's refusals keep their status and code: 409 not Ongoing, 503 coordinator unavailable", async () => {
    const { ports } = fakePorts({
      transactionAdmin: {
        abort: async (id) =>
          id === "done"
            ? { ok: false, status: 409, error: "not_ongoing", message: 'transaction "done" is CompleteCommit: only an Ongoing transaction can be aborted' }
            : { ok: false, status: 503, error: "coordinator_unavailable", message: "loading" },
      },
    });
    const app = createHttpApp(ports, { adminToken: "s3cret" });
    const headers = { Authorization: "Bearer s3cret" };
    const done = await app.request("/v1/transactions/done/abort", { method: "POST", headers });
    expect(done.status).toBe(409);
    expect((await json(done)).error).toBe("not_ongoing");
    const loading = await app.request("/v1/transactions/x/abort", { method: "POST", headers });
    expect(loading.status).toBe(503);
    expect((await json(loading)).error).toBe("coordinator_unavailable");
  });
});

describe("dashboard", () => {
  test("GET / renders cluster, topics with offsets and the transactions placeholder, with no inline script or style", async () => {
    const res = await createHttpApp(fakePorts().ports, { dashboardRefreshSeconds: 7 }).request("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    expect(res.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const html = await res.text();
    // The reload is the fallback without JavaScript only; with it, the script keeps the page current.
    expect(html).toContain('<noscript><meta http-equiv="refresh" content="7"></noscript>');
    expect(html).toContain('<script src="/dashboard.js" defer></script>');
    expect(html).toContain('<link rel="stylesheet" href="/dashboard.css">');
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).not.toContain("<style");
    expect(html).not.toContain(" style=");
    expect(html).toContain("AAAAAAAAAAAAAAAAAAAAAA");
    expect(html).toContain('data-topic="orders" data-partition="0"');
    expect(html).toContain('<td class="log-end-offset">7</td>');
    expect(html).toContain("not opened yet");
    expect(html).toContain("Not in this build: there is no transaction coordinator");
  });

  test("GET / with a coordinator: counts by state, open transactions with their age, hanging warnings", async () => {
    const filters: TransactionFilter[] = [];
    const html = await (await createHttpApp(fakePorts({ transactions: fakeTransactions(filters) }).ports).request("/")).text();
    // Only open transactions are listed (minAgeMs 0), at most 50.
    expect(filters).toEqual([{ minAgeMs: 0, limit: 50 }]);
    expect(html).toContain('data-state="Ongoing">Ongoing: <b>1</b>');
    expect(html).toContain('data-state="CompleteCommit">CompleteCommit: <b>5</b>');
    expect(html).toContain("oldest Ongoing: 1m 5s");
    expect(html).toContain('<tr class="transaction timed-out" data-transactional-id="tx/1">');
    expect(html).toContain('<td class="age">1m 5s</td>');
    expect(html).toContain('<td class="txn-state">Ongoing (timed out)</td>');
    expect(html).toContain('<td class="txn-partitions">orders-0</td>');
    expect(html).toContain('href="/v1/transactions/tx%2F1"');
    expect(html).toContain('<li class="hanging-warning" data-kind="timed-out-transaction" data-transactional-id="tx/1">');
    expect(html).toContain("has been Ongoing for 1m 5s, past its timeout of 60s");
    expect(html).toContain("Open transactions (2)");
    expect(html).toContain("Showing 1 of 2 open transactions");
    expect(html).not.toContain("Not in this build");
  });

  test("GET / with a coordinator and nothing open says so, without warnings", async () => {
    const quiet: TransactionQueryPort = {
      list: async () => ({ total: 0, transactions: [] }),
      get: async () => undefined,
      overview: async () => ({ ...overview, oldestOngoingAgeMs: null, warnings: [] }),
    };
    const html = await (await createHttpApp(fakePorts({ transactions: quiet }).ports).request("/")).text();
    expect(html).toContain("No open transactions.");
    expect(html).toContain("No hanging transactions.");
    expect(html).toContain("none Ongoing");
    expect(html).not.toContain('class="warning"');
  });

  test("topic names and reasons are escaped", async () => {
    const evil = { ...orders, name: '<img src=x onerror="alert(1)">' };
    const { ports } = fakePorts({
      ready: { ready: false, reason: "<b>down</b>" },
      topics: async () => [{ ...evil, partitionDetails: undefined } as any],
      topic: async () => evil,
    });
    const html = await (await createHttpApp(ports).request("/")).text();
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
    expect(html).toContain("no: &lt;b&gt;down&lt;/b&gt;");
  });

  test("cluster mode: an Owners row with each broker's share, what nobody owns and the moves in progress, escaped", async () => {
    const { ports } = fakePorts({
      cluster: () => ({
        ...cluster,
        mode: "cluster",
        ownership: {
          shares: [
            { brokerId: 1, partitions: 2, txnSlots: 25, groupSlots: 24 },
            { brokerId: 2, partitions: 1, txnSlots: 25, groupSlots: 25 },
          ],
          unowned: { partitions: 0, txnSlots: 0, groupSlots: 1 },
          held: [{ resource: "partition/<b>x</b>-0", state: "loading", epoch: 3 }],
          owners: [],
        },
      }),
    });
    const html = await (await createHttpApp(ports).request("/")).text();
    const row = html.match(/<td data-field="owners">(.*?)<\/td>/)?.[1];
    expect(row).toBe(
      'broker 1: 2 partition(s), 25 txn + 24 group slot(s); broker 2: 1 partition(s), 25 txn + 25 group slot(s); <span class="lagging">1 without an owner</span>; moving here: partition/&lt;b&gt;x&lt;/b&gt;-0 (loading, epoch 3)',
    );
    // Single mode has no such row.
    expect(await (await createHttpApp(fakePorts().ports).request("/")).text()).not.toContain('data-field="owners"');
  });
});

describe("content negotiation", () => {
  test.each([
    ["application/msgpack", true],
    ["application/x-msgpack", true],
    ["application/json;q=0.5, application/msgpack", true],
    ["application/json, application/msgpack;q=0.5", false],
    ["application/msgpack, application/json", true],
    ["Application/MsgPack", true],
    ["application/msgpack;q=0", false],
    ["application/json", false],
    ["*/*", false],
    [undefined, false],
  ] as const)("Accept %p -> msgpack %p", (accept, expected) => {
    expect(wantsMsgpack(accept)).toBe(expected);
  });
});
