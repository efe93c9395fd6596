/**
 * The live dashboard's charts, drawn here as SVG on the server: each is a line chart of the last minutes of
 * samples (live-samples.ts), one polyline per series, with its scale and the latest values as text.
 *
 * Hand-drawn rather than a chart library: bunka's dependencies are Bun, hono and @msgpack/msgpack (README,
 * "Dependencies"), a library would be code shipped to every browser and served under the page's strict
 * CSP, and a line chart is a few dozen lines. Drawn on the server, the same markup serves the first load
 * and every live update (the page's script only swaps sections), every text in it goes through one
 * escaping function, and the page needs no script to show the history.
 *
 * Elements carry `data-chart` and `data-series` attributes so that a browser test can find a chart's
 * lines; colours come from the stylesheet by class (s0, s1, ...), never from inline styles.
 */
import { formatBytes, formatDuration } from "./format.ts";
import { escapeHtml } from "./html-escape.ts";
import type { LiveSample } from "./live-samples.ts";

const WIDTH = 560;
const HEIGHT = 150;
const MARGIN = { left: 64, right: 10, top: 10, bottom: 20 } as const;
/** Partitions drawn per per-partition chart (the most lagging, or with the oldest transactions). */
export const CHART_PARTITIONS_MAX = 5;

export interface ChartSeries {
  /** Stable name for tests and the legend (data-series). */
  name: string;
  label: string;
  /** One value per sample time; null: nothing to draw (a gap). */
  values: (number | null)[];
}

export interface LineChart {
  id: string;
  title: string;
  /** Formats a value of the y axis and the legend. */
  format: (value: number) => string;
  times: number[];
  series: ChartSeries[];
}

/** 1, 2 or 5 times a power of ten, at least `value` (1 for nothing). */
export function niceCeiling(value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function round(value: number): string {
  return (Math.round(value * 10) / 10).toString();
}

/**
 * The SVG of one chart over `[endMs - windowMs, endMs]`: a frame, three grid lines with their values, the
 * window's ends as x labels, and each series as polylines (split where it has gaps).
 */
export function renderLineChart(chart: LineChart, endMs: number, windowMs: number): string {
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  let max = 0;
  for (const s of chart.series) for (const v of s.values) if (v !== null && v > max) max = v;
  const top = niceCeiling(max);
  const x = (atMs: number) => MARGIN.left + plotWidth * Math.min(1, Math.max(0, 1 - (endMs - atMs) / windowMs));
  const y = (value: number) => MARGIN.top + plotHeight * (1 - Math.min(1, Math.max(0, value / top)));
  const grid = [0, 0.5, 1]
    .map((f) => {
      const gy = round(y(top * f));
      return `<line class="grid" x1="${MARGIN.left}" y1="${gy}" x2="${WIDTH - MARGIN.right}" y2="${gy}"/><text class="axis" x="${MARGIN.left - 4}" y="${gy}" text-anchor="end" dominant-baseline="middle">${escapeHtml(chart.format(top * f))}</text>`;
    })
    .join("");
  const lines = chart.series
    .map((s, i) => {
      const segments: string[][] = [];
      let current: string[] | undefined;
      s.values.forEach((v, k) => {
        const atMs = chart.times[k];
        if (v === null || atMs === undefined || endMs - atMs > windowMs) {
          current = undefined;
          return;
        }
        if (current === undefined) segments.push((current = []));
        current.push(`${round(x(atMs))},${round(y(v))}`);
      });
      return segments
        .map((points) => `<polyline class="line s${i % 6}" data-series="${escapeHtml(s.name)}" points="${points.length === 1 ? `${points[0]} ${points[0]}` : points.join(" ")}"/>`)
        .join("");
    })
    .join("");
  const bottom = HEIGHT - MARGIN.bottom + 14;
  const legend = chart.series
    .map((s, i) => {
      const latest = [...s.values].reverse().find((v) => v !== null);
      return `<span class="key s${i % 6}" data-series="${escapeHtml(s.name)}">${escapeHtml(s.label)}: ${latest === undefined || latest === null ? "–" : escapeHtml(chart.format(latest))}</span>`;
    })
    .join(" ");
  return `<figure class="chart" id="chart-${escapeHtml(chart.id)}" data-chart="${escapeHtml(chart.id)}">
<figcaption>${escapeHtml(chart.title)}</figcaption>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${escapeHtml(chart.title)}">
<rect class="plot" x="${MARGIN.left}" y="${MARGIN.top}" width="${plotWidth}" height="${plotHeight}"/>${grid}
<text class="axis" x="${MARGIN.left}" y="${bottom}">${escapeHtml(formatDuration(windowMs))} ago</text><text class="axis" x="${WIDTH - MARGIN.right}" y="${bottom}" text-anchor="end">now</text>
${lines}
</svg>
<p class="legend">${legend || '<span class="muted">nothing to draw yet</span>'}</p>
</figure>`;
}

const perSecond = (v: number) => `${round(v)}/s`;
const milliseconds = (v: number) => `${v < 10 ? (Math.round(v * 100) / 100).toString() : Math.round(v).toString()} ms`;
const records = (v: number) => round(v);
/** An age: below a second in milliseconds, so that a chart of short transactions does not read 0s, 0s, 0s. */
const age = (v: number) => (v < 1000 ? milliseconds(v) : formatDuration(v));

/** The partitions (topic-partition) with the largest values of `read` over the samples, at most `max`. */
function topPartitions(samples: readonly LiveSample[], read: (p: LiveSample["partitions"][number]) => number | null, max: number): string[] {
  const best = new Map<string, number>();
  for (const s of samples) {
    for (const p of s.partitions) {
      const v = read(p);
      if (v === null) continue;
      const name = `${p.topic}-${p.partition}`;
      best.set(name, Math.max(best.get(name) ?? 0, v));
    }
  }
  return [...best.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, max).map(([name]) => name);
}

function perPartitionSeries(samples: readonly LiveSample[], read: (p: LiveSample["partitions"][number]) => number | null, absent: number | null): ChartSeries[] {
  return topPartitions(samples, read, CHART_PARTITIONS_MAX).map((name) => ({
    name,
    label: name,
    values: samples.map((s) => {
      const p = s.partitions.find((q) => `${q.topic}-${q.partition}` === name);
      return p === undefined ? absent : read(p);
    }),
  }));
}

/** The charts of the live dashboard, over the samples held. */
export function dashboardCharts(samples: readonly LiveSample[]): LineChart[] {
  const times = samples.map((s) => s.atMs);
  return [
    {
      id: "bytes",
      title: "Produce and fetch bytes per second",
      format: (v) => `${formatBytes(Math.round(v))}/s`,
      times,
      series: [
        { name: "produce", label: "produce", values: samples.map((s) => s.produceBytesPerSecond) },
        { name: "fetch", label: "fetch", values: samples.map((s) => s.fetchBytesPerSecond) },
      ],
    },
    {
      id: "transactions",
      title: "Transactions completed per second",
      format: perSecond,
      times,
      series: [
        { name: "committed", label: "committed", values: samples.map((s) => s.txnCommittedPerSecond) },
        { name: "aborted", label: "aborted", values: samples.map((s) => s.txnAbortedPerSecond) },
      ],
    },
    {
      id: "end-txn-latency",
      title: "EndTxn latency (answered), p50 and p99",
      format: milliseconds,
      times,
      series: [
        { name: "p50", label: "p50", values: samples.map((s) => s.endTxnP50Ms) },
        { name: "p99", label: "p99", values: samples.map((s) => s.endTxnP99Ms) },
      ],
    },
    {
      id: "fsync-latency",
      title: "fsync latency (data files), p50 and p99",
      format: milliseconds,
      times,
      series: [
        { name: "p50", label: "p50", values: samples.map((s) => s.fsyncP50Ms) },
        { name: "p99", label: "p99", values: samples.map((s) => s.fsyncP99Ms) },
      ],
    },
    {
      id: "lso-lag",
      title: `LSO lag (records read_committed consumers cannot read yet), the ${CHART_PARTITIONS_MAX} most lagging partitions`,
      format: records,
      times,
      series: perPartitionSeries(samples, (p) => p.lsoLag, 0),
    },
    {
      id: "oldest-open-transaction",
      title: `Oldest open transaction per partition, the ${CHART_PARTITIONS_MAX} oldest`,
      format: age,
      times,
      series: perPartitionSeries(samples, (p) => p.oldestOpenTxnAgeMs, null),
    },
  ];
}
