/**
 * The live dashboard's routes with `app.request()` against fake ports: its script and stylesheet, the
 * charts drawn from the samples, the event stream (the sections at once, then only what changed, then the
 * end), the consumer-groups section, one transactional id's page with its timeline, and hostile names
 * escaped everywhere. The browser side is tests/e2e/dashboard.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { createHttpApp, DASHBOARD_CSP } from "../../../src/http/app.ts";
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE } from "../../../src/http/dashboard-assets.ts";
import { dashboardCharts, niceCeiling, renderLineChart } from "../../../src/http/dashboard-charts.ts";
import type { LiveSample } from "../../../src/http/live-samples.ts";
import type { ClusterView, GroupView, HttpQueryPorts, LiveFeedPort, TransactionDetailView } from "../../../src/http/ports.ts";
import { settle } from "../../support/manual-timers.ts";

const HOSTILE = `<script>alert("x")</script>&'`;
const ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;";

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
  members: [],
  startedAtMs: 1_700_000_000_000,
  uptimeMs: 1_000,
  connections: 0,
  topicCount: 0,
  partitionCount: 0,
  features: { idempotentProducer: true, transactions: true, consumerGroups: true },
  security: { listeners: [], authorizer: { enabled: false, acls: 0, superUsers: [], allowEveryoneIfNoAclFound: false }, scramUsers: [], sidePortReadsNeedToken: false },
};

function sample(atMs: number, produce: number, partitions: LiveSample["partitions"] = []): LiveSample {
  return {
    atMs,
    produceBytesPerSecond: produce,
    fetchBytesPerSecond: 0,
    txnCommittedPerSecond: 0,
    txnAbortedPerSecond: 0,
    endTxnP50Ms: null,
    endTxnP99Ms: null,
    fsyncP50Ms: 1,
    fsyncP99Ms: 2,
    partitions,
  };
}

/** A feed the test drives: `tick` adds a sample and tells the subscribers, `end` stops it. */
function fakeFeed(initial: LiveSample[]) {
  const samples = [...initial];
  const listeners = new Set<{ onSample: () => void; onEnd: () => void }>();
  const feed: LiveFeedPort = {
    intervalMs: 1_000,
    windowMs: 300_000,
    samples: () => [...samples],
    subscribe(onSample, onEnd) {
      const l = { onSample, onEnd };
      listeners.add(l);
      return () => void listeners.delete(l);
    },
  };
  return {
    feed,
    listeners,
    tick(next: LiveSample) {
      samples.push(next);
      for (const l of [...listeners]) l.onSample();
    },
    end() {
      for (const l of [...listeners]) l.onEnd();
      listeners.clear();
    },
  };
}

const hostileGroup: GroupView = {
  groupId: HOSTILE,
  state: "Stable",
  protocolType: "consumer",
  protocol: "range",
  members: [{ memberId: `m-${HOSTILE}`, groupInstanceId: null, clientId: `client-${HOSTILE}`, clientHost: "/127.0.0.1" }],
  offsets: [{ topic: "orders", partition: 0, committedOffset: 3, highWatermark: 10, lastStableOffset: 6, hwLag: 7, lsoLag: 3 }],
  offsetCount: 1,
};

const hostileTxn: TransactionDetailView = {
  transactionalId: HOSTILE,
  producerId: 7,
  lastProducerId: 7,
  epoch: 1,
  lastEpoch: -1,
  timeoutMs: 60_000,
  state: "CompleteCommit",
  partitions: [],
  groups: [],
  ongoingSinceMs: 1_700_000_000_000,
  ageMs: null,
  timedOut: false,
  updatedMs: 1_700_000_000_050,
  slot: 3,
  coordinatorBrokerId: 0,
  stagedOffsets: [],
  pendingMarkers: [],
  timeline: [
    { kind: "began", atMs: 1_700_000_000_000, producerId: 7, epoch: 1, state: null, result: null, fenced: null, partitions: [`${HOSTILE}-0`], groups: [HOSTILE], topic: null, partition: null, outcome: null },
    { kind: "decided", atMs: 1_700_000_000_020, producerId: null, epoch: null, state: null, result: "commit", fenced: false, partitions: [], groups: [], topic: null, partition: null, outcome: null },
    { kind: "marker", atMs: 1_700_000_000_030, producerId: null, epoch: null, state: null, result: "commit", fenced: null, partitions: [], groups: [], topic: HOSTILE, partition: 0, outcome: "written" },
    { kind: "completed", atMs: 1_700_000_000_050, producerId: null, epoch: null, state: null, result: "commit", fenced: null, partitions: [], groups: [], topic: null, partition: null, outcome: null },
  ],
};

function ports(overrides: Partial<HttpQueryPorts> = {}): HttpQueryPorts {
  return {
    readiness: async () => ({ ready: true }),
    cluster: () => cluster,
    topics: async () => [],
    topic: async () => undefined,
    producers: async () => ({ kind: "unknown-topic" }),
    metrics: async () => "",
    transactions: {
      list: async () => ({ total: 0, transactions: [] }),
      get: async (id) => (id === HOSTILE ? hostileTxn : undefined),
      overview: async () => ({ byState: {}, oldestOngoingAgeMs: null, warnings: [] }),
    },
    groups: async () => ({ total: 1, groups: [hostileGroup] }),
    ...overrides,
  };
}

/** Reads server-sent events from a response body until `count` have arrived. */
async function readEvents(reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> }, count: number): Promise<{ event: string; data: string }[]> {
  const decoder = new TextDecoder();
  const events: { event: string; data: string }[] = [];
  let text = "";
  while (events.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = text.indexOf("\n\n")) >= 0) {
      const block = text.slice(0, cut);
      text = text.slice(cut + 2);
      const event = block.startsWith(":") ? "comment" : (/^event: (.*)$/m.exec(block)?.[1] ?? "message");
      const data = block
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n");
      events.push({ event, data });
    }
  }
  return events;
}

describe("the dashboard's assets", () => {
  test("the script and the stylesheet are served with their content types, from the module (no file read)", async () => {
    const app = createHttpApp(ports());
    const js = await app.request("/dashboard.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await js.text()).toBe(DASHBOARD_SCRIPT);
    const css = await app.request("/dashboard.css");
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(await css.text()).toBe(DASHBOARD_STYLE);
    // The script evaluates nothing it receives and opens only the page's own stream.
    expect(DASHBOARD_SCRIPT).not.toMatch(/\beval\b|new Function|innerHTML|document\.write/);
    expect(DASHBOARD_SCRIPT).toContain('new EventSource(url)');
  });

  test("the pages' CSP allows this origin's script, stylesheet and stream only", () => {
    expect(DASHBOARD_CSP).toContain("default-src 'none'");
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).toContain("style-src 'self'");
    expect(DASHBOARD_CSP).toContain("connect-src 'self'");
    expect(DASHBOARD_CSP).not.toContain("unsafe");
  });
});

describe("charts", () => {
  test("a nice ceiling is 1, 2 or 5 times a power of ten", () => {
    expect([0, 0.3, 1, 1.5, 3, 7, 10, 11, 420].map(niceCeiling)).toEqual([1, 0.5, 1, 2, 5, 10, 10, 20, 500]);
  });

  test("the page draws the broker's history: a polyline per series, its points following the samples", async () => {
    const t0 = 1_700_000_000_000;
    const { feed } = fakeFeed([
      sample(t0, 0),
      sample(t0 + 1_000, 1_000, [{ topic: HOSTILE, partition: 0, lsoLag: 4, openTransactions: 1, oldestOpenTxnAgeMs: 2_000 }]),
      sample(t0 + 2_000, 4_000),
    ]);
    const html = await (await createHttpApp(ports({ live: feed })).request("/")).text();
    const produce = /<polyline class="line s0" data-series="produce" points="([^"]+)"/.exec(html)?.[1];
    expect(produce).toBeDefined();
    const ys = produce!.split(" ").map((p) => Number(p.split(",")[1]));
    expect(ys).toHaveLength(3);
    // Higher rates are drawn higher (smaller y), and the last is at the top of a 5 KiB/s scale... of 5000.
    expect(ys[0]!).toBeGreaterThan(ys[1]!);
    expect(ys[1]!).toBeGreaterThan(ys[2]!);
    expect(html).toContain('data-chart="bytes"');
    expect(html).toContain('data-chart="lso-lag"');
    expect(html).toContain('data-chart="fsync-latency"');
    // A latency that was never measured is a gap, not a line at zero.
    const endTxn = /<figure class="chart" id="chart-end-txn-latency"[\s\S]*?<\/figure>/.exec(html)![0];
    expect(endTxn).not.toContain("<polyline");
    expect(endTxn).toContain("p50: –");
    expect(html).toContain("3 sample(s), one every 1s, kept for 5m 0s by the broker.");
    // The partition's name, in the chart's legend and the table, is escaped.
    expect(html).not.toContain("<script>alert");
    expect(html).toContain(`${ESCAPED}-0`);
  });
});

test("the oldest open transaction's axis and legend say milliseconds below a second, seconds above", () => {
  const t0 = 1_700_000_000_000;
  const open = (ageMs: number) => [{ topic: "orders", partition: 0, lsoLag: 1, openTransactions: 1, oldestOpenTxnAgeMs: ageMs }];
  const chartOf = (ageMs: number) => {
    const chart = dashboardCharts([sample(t0, 0, open(ageMs))]).find((c) => c.id === "oldest-open-transaction")!;
    return renderLineChart(chart, t0, 300_000);
  };
  const short = chartOf(40);
  expect(short).toContain(">50 ms<");
  expect(short).toContain(">25 ms<");
  expect(short).toContain("orders-0: 40 ms");
  expect(short).not.toContain(">0s<");
  expect(chartOf(42_000)).toContain("orders-0: 42s");
});

describe("the event stream", () => {
  test("the sections at once, then only those that changed after each sample, then the end", async () => {
    const t0 = 1_700_000_000_000;
    const feed = fakeFeed([sample(t0, 0)]);
    const res = await createHttpApp(ports({ live: feed.feed })).request("/dashboard/events");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const reader = res.body!.getReader();
    const [first] = await readEvents(reader, 1);
    expect(first!.event).toBe("sections");
    const sections = JSON.parse(first!.data);
    expect(Object.keys(sections)).toEqual(["cluster", "live", "topics", "transactions", "groups"]);
    expect(sections.live).toStartWith('<section id="live">');
    expect(sections.groups).not.toContain("<script>alert");

    feed.tick(sample(t0 + 1_000, 2_000));
    const [second] = await readEvents(reader, 1);
    // Only the charts changed.
    expect(Object.keys(JSON.parse(second!.data))).toEqual(["live"]);

    feed.end();
    const [last] = await readEvents(reader, 1);
    expect(last!.event).toBe("end");
    expect((await reader.read()).done).toBe(true);
    expect(feed.listeners.size).toBe(0);
  });

  test("one transactional id's stream sends its section; an unknown id is 404", async () => {
    const feed = fakeFeed([]);
    const app = createHttpApp(ports({ live: feed.feed }));
    const missing = await app.request("/dashboard/events?transaction=nope");
    expect(missing.status).toBe(404);
    const res = await app.request(`/dashboard/events?transaction=${encodeURIComponent(HOSTILE)}`);
    const reader = res.body!.getReader();
    const [first] = await readEvents(reader, 1);
    const sections = JSON.parse(first!.data);
    expect(Object.keys(sections)).toEqual(["transaction"]);
    expect(sections.transaction).not.toContain("<script>alert");
    // A completed transaction's page does not change: after a few samples a comment keeps the
    // connection from Bun's idle timeout.
    // (Each sample's round is let through before the next: samples during a round share one more.)
    for (let i = 0; i < 4; i++) {
      feed.tick(sample(i, 0));
      await settle();
    }
    const [idle] = await readEvents(reader, 1);
    expect(idle).toEqual({ event: "comment", data: "" });
    feed.end();
    expect((await readEvents(reader, 1))[0]!.event).toBe("end");
  });

  test("without a live feed, one update and the stream ends", async () => {
    const res = await createHttpApp(ports()).request("/dashboard/events");
    const reader = res.body!.getReader();
    const events = await readEvents(reader, 2);
    expect(events.map((e) => e.event)).toEqual(["sections"]);
  });
});

describe("consumer groups", () => {
  test("members, state and both lags, every name escaped", async () => {
    const html = await (await createHttpApp(ports()).request("/")).text();
    expect(html).not.toContain("<script>alert");
    expect(html).toContain(`<div class="group" data-group-id="${ESCAPED}">`);
    expect(html).toContain(`client client-${ESCAPED} at /127.0.0.1`);
    const row = /<tr class="group-offset"[^>]*>(.*?)<\/tr>/.exec(html)?.[1];
    expect(row).toContain('<td class="committed">3</td>');
    expect(row).toContain('<td class="hw-lag lagging">7</td>');
    expect(row).toContain('<td class="lso-lag lagging">3</td>');
    expect(html).toContain("Lag (read_committed, to LSO)");
  });

  test("GET /v1/groups lists them; 501 without a group coordinator", async () => {
    const res = await createHttpApp(ports()).request("/v1/groups");
    expect(await res.json()).toEqual({ total: 1, truncated: false, groups: [hostileGroup] });
    expect((await createHttpApp(ports({ groups: undefined })).request("/v1/groups")).status).toBe(501);
  });

  test("GET /v1/samples is the history; 501 without the sampler", async () => {
    const feed = fakeFeed([sample(1, 2)]);
    expect(await (await createHttpApp(ports({ live: feed.feed })).request("/v1/samples")).json()).toEqual({ intervalMs: 1_000, windowMs: 300_000, samples: [sample(1, 2)] });
    expect((await createHttpApp(ports()).request("/v1/samples")).status).toBe(501);
  });
});

describe("a transaction's page", () => {
  test("its timeline in order, with a hostile transactional id escaped in the text, the links and the stream's path", async () => {
    const app = createHttpApp(ports());
    const res = await app.request(`/dashboard/transactions/${encodeURIComponent(HOSTILE)}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBe(DASHBOARD_CSP);
    const html = await res.text();
    expect(html).not.toContain("<script>alert");
    expect(html).toContain(`<span data-field="transactionalId">${ESCAPED}</span>`);
    expect(html).toContain(`data-events="/dashboard/events?transaction=${encodeURIComponent(HOSTILE).replace(/'/g, "&#39;")}"`);
    const kinds = [...html.matchAll(/<li class="step" data-kind="([a-z]+)">/g)].map((m) => m[1]);
    expect(kinds).toEqual(["began", "decided", "marker", "completed"]);
    expect(html).toContain(`partitions ${ESCAPED}-0; groups ${ESCAPED}`);
    expect(html).toContain(`commit marker on ${ESCAPED}-0: written`);
    expect(html).toContain("+50 ms");
    expect((await app.request("/dashboard/transactions/nope")).status).toBe(404);
  });
});
