/**
 * The metrics recorded as things happen (metrics.ts), their Prometheus text, and the two decorators that
 * feed them: the byte-counting dispatch wrapper and the fsync-timing Fs (fs-timing.ts).
 */
import { describe, expect, test } from "bun:test";
import { timedFs } from "../../../src/http/fs-timing.ts";
import { BrokerMetrics, Histogram, meteredDispatch, PrometheusWriter } from "../../../src/http/metrics.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

describe("Histogram", () => {
  test("buckets are cumulative, +Inf is the count, and a value on a bound falls in that bucket", () => {
    const h = new Histogram([1, 2, 5]);
    for (const v of [0.5, 1, 1.5, 4, 100]) h.observe(v);
    expect(h.cumulative()).toEqual([2, 3, 4, 5]);
    expect(h.count).toBe(5);
    expect(h.sum).toBe(107);
  });

  test("bounds must increase", () => {
    expect(() => new Histogram([1, 1])).toThrow(RangeError);
  });
});

describe("PrometheusWriter", () => {
  test("writes HELP/TYPE once per family, escapes label values, renders histograms", () => {
    const out = new PrometheusWriter();
    out.family("x_total", "counter", "Things.\nCounted.");
    out.sample("x_total", { topic: 'a"b\\c\nd', partition: 3 }, 7);
    const h = new Histogram([0.1]);
    h.observe(0.05);
    h.observe(3);
    out.family("lat_seconds", "histogram", "Latency.");
    out.histogram("lat_seconds", { kind: "file" }, h);
    expect(out.text()).toBe(
      [
        "# HELP x_total Things.\\nCounted.",
        "# TYPE x_total counter",
        'x_total{topic="a\\"b\\\\c\\nd",partition="3"} 7',
        "# HELP lat_seconds Latency.",
        "# TYPE lat_seconds histogram",
        'lat_seconds_bucket{kind="file",le="0.1"} 1',
        'lat_seconds_bucket{kind="file",le="+Inf"} 2',
        'lat_seconds_sum{kind="file"} 3.05',
        'lat_seconds_count{kind="file"} 2',
        "",
      ].join("\n"),
    );
  });

  test("a family written twice is a bug, caught before Prometheus rejects the scrape", () => {
    const out = new PrometheusWriter();
    out.family("a", "gauge", "A.");
    expect(() => out.family("a", "gauge", "A.")).toThrow("written twice");
  });
});

describe("BrokerMetrics", () => {
  test("requests are counted per API key and version with latency and errors", () => {
    const m = new BrokerMetrics();
    m.onRequest(0, 9, 2, false); // Produce v9, 2 ms
    m.onRequest(0, 9, 30, true);
    m.onRequest(18, 3, 0.1, false); // ApiVersions v3
    const out = new PrometheusWriter();
    m.writeTo(out);
    const text = out.text();
    expect(text).toContain('bunka_requests_total{api_key="0",api="Produce",api_version="9"} 2');
    expect(text).toContain('bunka_requests_total{api_key="18",api="ApiVersions",api_version="3"} 1');
    expect(text).toContain('bunka_request_errors_total{api_key="0",api="Produce",api_version="9"} 1');
    expect(text).toContain('bunka_request_errors_total{api_key="18",api="ApiVersions",api_version="3"} 0');
    expect(text).toContain('bunka_request_duration_seconds_bucket{api_key="0",api="Produce",api_version="9",le="0.0025"} 1');
    expect(text).toContain('bunka_request_duration_seconds_bucket{api_key="0",api="Produce",api_version="9",le="0.05"} 2');
    expect(text).toContain('bunka_request_duration_seconds_count{api_key="0",api="Produce",api_version="9"} 2');
    expect(text).toContain('bunka_request_duration_seconds_sum{api_key="0",api="Produce",api_version="9"} 0.032');
    // Produce (key 0) is written before ApiVersions (key 18), whatever the arrival order.
    expect(text.indexOf('api="Produce"')).toBeLessThan(text.indexOf('api="ApiVersions"'));
  });

  test("EndTxn steps get one histogram each, every step listed (zero counts included) in the order they run", () => {
    const m = new BrokerMetrics();
    m.onEndTxnPhase("prepare", 0.4);
    m.onEndTxnPhase("markers", 0.7);
    m.onEndTxnPhase("markers", 3);
    m.onEndTxnPhase("complete", 0.3);
    const out = new PrometheusWriter();
    m.writeTo(out);
    const text = out.text();
    expect(text).toContain("# TYPE bunka_txn_end_phase_duration_seconds histogram");
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_bucket{phase="prepare",le="0.0005"} 1');
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_count{phase="offsets"} 0');
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_bucket{phase="markers",le="0.001"} 1');
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_bucket{phase="markers",le="0.005"} 2');
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_sum{phase="markers"} 0.0037');
    expect(text).toContain('bunka_txn_end_phase_duration_seconds_count{phase="complete"} 1');
    const order = ["prepare", "offsets", "markers", "complete"].map((phase) => text.indexOf(`_count{phase="${phase}"}`));
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  test("meteredDispatch counts request and response frames with their size prefix, sync or async", async () => {
    const m = new BrokerMetrics();
    const asyncDispatch = meteredDispatch(async (frame: Uint8Array) => new Uint8Array(frame.length * 2), m);
    expect(await asyncDispatch(new Uint8Array(10), undefined)).toHaveLength(20);
    const syncDispatch = meteredDispatch((_frame: Uint8Array) => null, m);
    expect(syncDispatch(new Uint8Array(6), undefined)).toBeNull(); // acks=0: nothing sent back
    expect(m.requestBytes).toBe(14 + 10);
    expect(m.responseBytes).toBe(24);
  });
});

describe("timedFs", () => {
  test("times file and directory fsyncs with the injected monotonic clock and passes everything else through", async () => {
    const memory = new MemoryFs();
    let nowMs = 0;
    const observed: Array<[string, number]> = [];
    const fs = timedFs(memory, () => (nowMs += 3), (kind, ms) => observed.push([kind, ms]));
    await fs.mkdirp("/d");
    const handle = await fs.open("/d/f", "w");
    await handle.write(new TextEncoder().encode("hello"));
    await handle.fsync();
    await fs.fsyncDir("/d");
    expect(await handle.size()).toBe(5);
    await handle.close();
    expect(new TextDecoder().decode(await fs.readFile("/d/f"))).toBe("hello");
    expect(observed).toEqual([
      ["file", 3],
      ["dir", 3],
    ]);
    expect(memory.log.filter((op) => op.startsWith("fsync"))).toHaveLength(2);
  });

  test("a failed fsync is observed and rethrown unchanged", async () => {
    const memory = new MemoryFs();
    const observed: string[] = [];
    const fs = timedFs(memory, () => 0, (kind) => observed.push(kind));
    const handle = await fs.open("/f", "w");
    memory.failNextFsync();
    await expect(handle.fsync()).rejects.toThrow();
    expect(observed).toEqual(["file"]);
  });
});
