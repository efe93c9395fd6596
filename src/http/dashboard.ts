/**
 * The live dashboard at GET /: one server-rendered HTML page over the same query ports as the JSON API.
 * No build step, no script, no external asset (the app serves it with a CSP that forbids them): a meta
 * refresh reloads it every few seconds. Bounded: at most DASHBOARD_TOPICS topics and
 * DASHBOARD_PARTITIONS_PER_TOPIC partitions each are drawn, with a note and a link to the JSON for the rest.
 *
 * Cells carry `data-*` attributes and classes so that a browser test (tests/e2e/dashboard.test.ts) can find
 * a topic's offsets without depending on the layout.
 */
import type { ClusterView, HttpQueryPorts, PartitionView, Readiness, TopicDetailView } from "./ports.ts";

export const DASHBOARD_TOPICS = 100;
export const DASHBOARD_PARTITIONS_PER_TOPIC = 50;
const DASHBOARD_TRANSACTIONS = 50;

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (ch) => escapes[ch]!);
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

function formatDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h ${m}m`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

const dash = (value: number | null) => (value === null ? "–" : escapeHtml(value));

function clusterSection(cluster: ClusterView, readiness: Readiness): string {
  const features = Object.entries(cluster.features)
    .map(([name, on]) => `<span class="feature ${on ? "on" : "off"}">${escapeHtml(name)}: ${on ? "yes" : "not yet"}</span>`)
    .join(" ");
  const brokers = cluster.brokers.map((b) => `${escapeHtml(b.brokerId)} @ ${escapeHtml(b.host)}:${escapeHtml(b.port)}`).join(", ");
  return `<section id="cluster">
<h2>Cluster</h2>
<table class="facts">
<tr><th>Cluster id</th><td data-field="clusterId">${escapeHtml(cluster.clusterId)}</td></tr>
<tr><th>Broker</th><td data-field="brokerId">${escapeHtml(cluster.brokerId)}</td></tr>
<tr><th>Controller</th><td>${escapeHtml(cluster.controllerId)}</td></tr>
<tr><th>Mode</th><td>${escapeHtml(cluster.mode)}</td></tr>
<tr><th>Brokers</th><td>${brokers}</td></tr>
<tr><th>Ready</th><td data-field="ready">${readiness.ready ? "yes" : `no: ${escapeHtml(readiness.reason)}`}</td></tr>
<tr><th>Uptime</th><td>${escapeHtml(formatDuration(cluster.uptimeMs))}</td></tr>
<tr><th>Connections</th><td data-field="connections">${escapeHtml(cluster.connections)}</td></tr>
<tr><th>Topics / partitions</th><td data-field="counts">${escapeHtml(cluster.topicCount)} / ${escapeHtml(cluster.partitionCount)}</td></tr>
<tr><th>Features</th><td>${features}</td></tr>
</table>
</section>`;
}

function partitionRow(topic: string, p: PartitionView): string {
  const attrs = `data-topic="${escapeHtml(topic)}" data-partition="${escapeHtml(p.partition)}"`;
  const state = p.failure !== null ? `failed: ${escapeHtml(p.failure)}` : p.open ? "open" : "not opened yet";
  return `<tr class="partition" ${attrs}>
<td>${escapeHtml(topic)}</td><td class="partition-index">${escapeHtml(p.partition)}</td><td>${escapeHtml(p.leader)}</td>
<td class="log-start-offset">${dash(p.logStartOffset)}</td><td class="log-end-offset">${dash(p.logEndOffset)}</td>
<td class="high-watermark">${dash(p.highWatermark)}</td><td class="last-stable-offset">${dash(p.lastStableOffset)}</td>
<td class="segments">${dash(p.segmentCount)}</td><td class="size">${p.sizeBytes === null ? "–" : escapeHtml(formatBytes(p.sizeBytes))}</td>
<td class="producers">${p.producerCount === null ? "–" : `<a href="/v1/producers/${encodeURIComponent(topic)}/${p.partition}">${escapeHtml(p.producerCount)}</a>`}</td>
<td class="state">${state}</td>
</tr>`;
}

function topicsSection(details: TopicDetailView[], totalTopics: number): string {
  if (totalTopics === 0) return `<section id="topics"><h2>Topics</h2><p class="empty">No topics yet.</p></section>`;
  const rows: string[] = [];
  for (const topic of details) {
    for (const p of topic.partitionDetails.slice(0, DASHBOARD_PARTITIONS_PER_TOPIC)) rows.push(partitionRow(topic.name, p));
    if (topic.partitionDetails.length > DASHBOARD_PARTITIONS_PER_TOPIC) {
      const more = topic.partitionDetails.length - DASHBOARD_PARTITIONS_PER_TOPIC;
      rows.push(
        `<tr class="more"><td colspan="11">${escapeHtml(more)} more partitions of ${escapeHtml(topic.name)}: see <a href="/v1/topics/${encodeURIComponent(topic.name)}">/v1/topics/${escapeHtml(topic.name)}</a></td></tr>`,
      );
    }
  }
  const note =
    totalTopics > details.length
      ? `<p class="note">Showing ${details.length} of ${totalTopics} topics; all are listed at <a href="/v1/topics">/v1/topics</a>.</p>`
      : "";
  return `<section id="topics">
<h2>Topics</h2>
${note}
<table class="grid">
<thead><tr><th>Topic</th><th>Partition</th><th>Leader</th><th>Log start</th><th>Log end</th><th>High watermark</th><th>Last stable</th><th>Segments</th><th>Size</th><th>Producers</th><th>State</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
</section>`;
}

async function transactionsSection(ports: HttpQueryPorts, nowMs: number): Promise<string> {
  if (!ports.transactions) {
    return `<section id="transactions"><h2>Transactions</h2>
<p class="not-implemented">Not implemented yet: the transaction coordinator does not exist in this build, so there are no transactions to show (GET /v1/transactions answers 501). Idempotent producers are served; their dedupe windows are linked from the Producers column.</p>
</section>`;
  }
  const { total, transactions } = await ports.transactions.list({ state: "Ongoing", limit: DASHBOARD_TRANSACTIONS });
  if (total === 0) return `<section id="transactions"><h2>Transactions</h2><p class="empty">No ongoing transactions.</p></section>`;
  const rows = transactions
    .map(
      (t) =>
        `<tr data-transactional-id="${escapeHtml(t.transactionalId)}"><td>${escapeHtml(t.transactionalId)}</td><td>${escapeHtml(t.producerId)}</td><td>${escapeHtml(t.epoch)}</td><td>${escapeHtml(t.state)}</td><td>${t.ongoingSinceMs === null ? "–" : escapeHtml(formatDuration(nowMs - t.ongoingSinceMs))}</td><td>${escapeHtml(t.partitions.length)}</td></tr>`,
    )
    .join("\n");
  return `<section id="transactions"><h2>Ongoing transactions (${escapeHtml(total)})</h2>
<table class="grid"><thead><tr><th>Transactional id</th><th>Producer id</th><th>Epoch</th><th>State</th><th>Age</th><th>Partitions</th></tr></thead>
<tbody>
${rows}
</tbody></table></section>`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1d2430;background:#fafbfc}
h1{font-size:1.4rem;margin:0 0 .25rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;background:#fff}th,td{padding:.25rem .6rem;border:1px solid #dde2e8;text-align:left}
table.grid td{font-variant-numeric:tabular-nums}thead th{background:#eef1f5}
.facts th{background:#f4f6f8;font-weight:600}
.feature{display:inline-block;padding:0 .4rem;border-radius:.3rem;margin-right:.3rem}
.feature.on{background:#dff5e3}.feature.off{background:#f5e9d8}
.not-implemented{background:#f5e9d8;padding:.5rem .75rem;border-radius:.3rem;max-width:60rem}
.muted,.note{color:#5c6773}
`;

export async function renderDashboard(ports: HttpQueryPorts, opts: { refreshSeconds: number }): Promise<string> {
  const cluster = ports.cluster();
  const readiness = await ports.readiness();
  const topics = await ports.topics();
  const details: TopicDetailView[] = [];
  for (const t of topics.slice(0, DASHBOARD_TOPICS)) {
    const detail = await ports.topic(t.name);
    if (detail) details.push(detail); // deleted between the two reads: just not drawn
  }
  const nowMs = cluster.startedAtMs + cluster.uptimeMs;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="${escapeHtml(opts.refreshSeconds)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bunka ${escapeHtml(cluster.version)} — broker ${escapeHtml(cluster.brokerId)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>bunka ${escapeHtml(cluster.version)}</h1>
<p class="muted">Broker ${escapeHtml(cluster.brokerId)} of cluster ${escapeHtml(cluster.clusterId)}. This page reloads every ${escapeHtml(opts.refreshSeconds)} s. JSON: <a href="/v1/cluster">/v1/cluster</a>, <a href="/v1/topics">/v1/topics</a>, <a href="/metrics">/metrics</a>, <a href="/ready">/ready</a>.</p>
${clusterSection(cluster, readiness)}
${topicsSection(details, topics.length)}
${await transactionsSection(ports, nowMs)}
</body>
</html>
`;
}
