/**
 * The live dashboard at GET /: one server-rendered HTML page over the same query ports as the JSON API.
 * No build step, no script, no external asset (the app serves it with a CSP that forbids them): a meta
 * refresh reloads it every few seconds. Bounded: at most DASHBOARD_TOPICS topics and
 * DASHBOARD_PARTITIONS_PER_TOPIC partitions each are drawn, with a note and a link to the JSON for the rest.
 *
 * Cells carry `data-*` attributes and classes so that a browser test (tests/e2e/dashboard.test.ts) can find
 * a topic's offsets and a transaction's row without depending on the layout.
 *
 * Transactions: the count of transactional ids per state, the open ones (Ongoing, PrepareCommit,
 * PrepareAbort) with their age, and the hanging-transaction warnings (an Ongoing transaction past its
 * timeout, a partition whose LSO stays stuck with nothing accounting for it; broker-ports.ts decides).
 */
import { formatBytes, formatDuration, formatMs } from "./format.ts";
import type { ClusterView, HttpQueryPorts, PartitionView, Readiness, ScrubberView, TopicDetailView, TransactionView } from "./ports.ts";

export const DASHBOARD_TOPICS = 100;
export const DASHBOARD_PARTITIONS_PER_TOPIC = 50;
const DASHBOARD_TRANSACTIONS = 50;

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (ch) => escapes[ch]!);
}

const dash = (value: number | null) => (value === null ? "–" : escapeHtml(value));

/** The scrubber's line of the health area: off, or its passes and whether any data is damaged. */
function scrubberRow(scrubber: ScrubberView | undefined): string {
  if (scrubber === undefined) return "";
  let text: string;
  if (scrubber.bytesPerSecond <= 0) text = "off (log.scrubber.bytes.per.second = 0)";
  else if (scrubber.lastFullPassAgeMs === null) text = `first pass running at ${formatBytes(scrubber.bytesPerSecond)}/s`;
  else text = `${scrubber.passesCompleted} full pass(es), the last ended ${formatDuration(scrubber.lastFullPassAgeMs)} ago and took ${formatDuration(scrubber.lastFullPassDurationMs)}; ${scrubber.batchesVerified} batches verified`;
  const problems = [
    ...(scrubber.damagedPartitions === 0 ? [] : [`damaged data in ${scrubber.damagedPartitions} partition(s)`]),
    ...(scrubber.damagedStateFiles === 0 ? [] : [`${scrubber.damagedStateFiles} damaged state file(s)`]),
    ...(scrubber.repairedStateFiles === 0 ? [] : [`${scrubber.repairedStateFiles} damaged state file(s) rewritten from memory`]),
  ];
  const damaged = problems.length === 0 ? "no damaged data" : `<span class="lagging">${escapeHtml(problems.join(", "))}</span>`;
  return `<tr><th>Scrubber</th><td data-field="scrubber">${escapeHtml(text)}; ${damaged}</td></tr>\n`;
}

/** Cluster mode: each broker's share of partitions and slots, what nobody owns, the moves in progress here. */
function ownershipRow(cluster: ClusterView): string {
  const o = cluster.ownership;
  if (o === null) return "";
  const shares = o.shares.map((s) => `broker ${escapeHtml(s.brokerId)}: ${escapeHtml(s.partitions)} partition(s), ${escapeHtml(s.txnSlots)} txn + ${escapeHtml(s.groupSlots)} group slot(s)`).join("; ");
  const unowned = o.unowned.partitions + o.unowned.txnSlots + o.unowned.groupSlots;
  const moving = o.held.filter((h) => h.state !== "owned");
  const movingText = moving.length === 0 ? "" : `; moving here: ${moving.slice(0, 10).map((h) => `${escapeHtml(h.resource)} (${escapeHtml(h.state)}, epoch ${escapeHtml(h.epoch)})`).join(", ")}${moving.length > 10 ? ` and ${moving.length - 10} more` : ""}`;
  const unownedText = unowned === 0 ? "" : `; <span class="lagging">${escapeHtml(unowned)} without an owner</span>`;
  return `<tr><th>Owners</th><td data-field="owners">${shares || "none yet"}${unownedText}${movingText}</td></tr>\n`;
}

function clusterSection(cluster: ClusterView, readiness: Readiness, scrubber?: ScrubberView): string {
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
${cluster.lease === null ? "" : `<tr><th>etcd lease</th><td data-field="lease">${escapeHtml(cluster.lease.state)}, ${cluster.lease.lapses} lapse(s)</td></tr>\n`}${ownershipRow(cluster)}<tr><th>Ready</th><td data-field="ready">${readiness.ready ? (readiness.degraded === undefined ? "yes" : `<span class="lagging">degraded: ${escapeHtml(readiness.degraded)}</span>`) : `no: ${escapeHtml(readiness.reason)}`}</td></tr>
${scrubberRow(scrubber)}<tr><th>Uptime</th><td>${escapeHtml(formatDuration(cluster.uptimeMs))}</td></tr>
<tr><th>Connections</th><td data-field="connections">${escapeHtml(cluster.connections)}</td></tr>
<tr><th>Topics / partitions</th><td data-field="counts">${escapeHtml(cluster.topicCount)} / ${escapeHtml(cluster.partitionCount)}</td></tr>
<tr><th>Features</th><td>${features}</td></tr>
</table>
</section>`;
}

/** The log cleaner's progress on a compacted partition: dirty ratio, clean prefix, what it reclaimed. */
function compactionCell(p: PartitionView): string {
  const c = p.cleaner;
  if (c === null) return "–";
  const clean = c.cleanedUpToOffset < 0 ? "not cleaned yet" : `clean below ${escapeHtml(c.cleanedUpToOffset)}`;
  const dirty = `${escapeHtml(Math.round(c.dirtyRatio * 100))}% dirty`;
  const reclaimed = c.passes > 0 ? `, ${escapeHtml(c.passes)} passes reclaimed ${escapeHtml(formatBytes(c.bytesReclaimed))}` : "";
  const failed = c.lastError !== null ? `, <span class="lagging">last pass failed: ${escapeHtml(c.lastError)}</span>` : "";
  return `${dirty}, ${clean}${reclaimed}${failed}`;
}

function partitionRow(topic: string, p: PartitionView): string {
  const attrs = `data-topic="${escapeHtml(topic)}" data-partition="${escapeHtml(p.partition)}"`;
  const state = p.failure !== null ? `failed: ${escapeHtml(p.failure)}` : p.open ? "open" : "not opened yet";
  return `<tr class="partition" ${attrs}>
<td>${escapeHtml(topic)}</td><td class="partition-index">${escapeHtml(p.partition)}</td><td>${escapeHtml(p.leader)}</td>
<td class="log-start-offset">${dash(p.logStartOffset)}</td><td class="log-end-offset">${dash(p.logEndOffset)}</td>
<td class="high-watermark">${dash(p.highWatermark)}</td><td class="last-stable-offset">${dash(p.lastStableOffset)}</td>
<td class="lso-lag${p.lsoLag !== null && p.lsoLag > 0 ? " lagging" : ""}">${dash(p.lsoLag)}</td><td class="open-transactions">${dash(p.openTransactionCount)}</td>
<td class="segments">${dash(p.segmentCount)}</td><td class="size">${p.sizeBytes === null ? "–" : escapeHtml(formatBytes(p.sizeBytes))}</td>
<td class="producers">${p.producerCount === null ? "–" : `<a href="/v1/producers/${encodeURIComponent(topic)}/${p.partition}">${escapeHtml(p.producerCount)}</a>`}</td>
<td class="compaction">${compactionCell(p)}</td>
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
        `<tr class="more"><td colspan="14">${escapeHtml(more)} more partitions of ${escapeHtml(topic.name)}: see <a href="/v1/topics/${encodeURIComponent(topic.name)}">/v1/topics/${escapeHtml(topic.name)}</a></td></tr>`,
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
<thead><tr><th>Topic</th><th>Partition</th><th>Leader</th><th>Log start</th><th>Log end</th><th>High watermark</th><th>Last stable</th><th>LSO lag</th><th>Open txns</th><th>Segments</th><th>Size</th><th>Producers</th><th>Compaction</th><th>State</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
</section>`;
}

function transactionRow(t: TransactionView): string {
  const partitions = t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ");
  const href = `/v1/transactions/${encodeURIComponent(t.transactionalId)}`;
  return `<tr class="transaction${t.timedOut ? " timed-out" : ""}" data-transactional-id="${escapeHtml(t.transactionalId)}">
<td class="transactional-id"><a href="${escapeHtml(href)}">${escapeHtml(t.transactionalId)}</a></td><td class="producer-id">${escapeHtml(t.producerId)}</td><td class="epoch">${escapeHtml(t.epoch)}</td>
<td class="txn-state">${escapeHtml(t.state)}${t.timedOut ? " (timed out)" : ""}</td><td class="age">${t.ageMs === null ? "–" : escapeHtml(formatDuration(t.ageMs))}</td>
<td class="timeout">${escapeHtml(formatMs(t.timeoutMs))}</td><td class="txn-partitions">${escapeHtml(partitions || "–")}</td><td class="groups">${escapeHtml(t.groups.join(", ") || "–")}</td>
</tr>`;
}

async function transactionsSection(ports: HttpQueryPorts): Promise<string> {
  if (!ports.transactions) {
    return `<section id="transactions"><h2>Transactions</h2>
<p class="not-implemented">Not in this build: there is no transaction coordinator, so there are no transactions to show (GET /v1/transactions answers 501). Idempotent producers are served; their dedupe windows are linked from the Producers column.</p>
</section>`;
  }
  const overview = await ports.transactions.overview();
  // minAgeMs 0 selects the open transactions (Ongoing, PrepareCommit, PrepareAbort) only.
  const { total, transactions } = await ports.transactions.list({ minAgeMs: 0, limit: DASHBOARD_TRANSACTIONS });
  const states = Object.entries(overview.byState)
    .map(([state, count]) => `<span class="txn-count${count > 0 ? " some" : ""}" data-state="${escapeHtml(state)}">${escapeHtml(state)}: <b>${escapeHtml(count)}</b></span>`)
    .join(" ");
  const oldest = overview.oldestOngoingAgeMs === null ? "none Ongoing" : `oldest Ongoing: ${escapeHtml(formatDuration(overview.oldestOngoingAgeMs))}`;
  const warnings =
    overview.warnings.length === 0
      ? `<p class="ok" id="hanging-none">No hanging transactions.</p>`
      : `<div class="warning" id="hanging"><b>Possibly hanging transactions (${escapeHtml(overview.warnings.length)})</b><ul>
${overview.warnings.map((w) => `<li class="hanging-warning" data-kind="${escapeHtml(w.kind)}"${w.transactionalId === null ? "" : ` data-transactional-id="${escapeHtml(w.transactionalId)}"`}>${escapeHtml(w.message)}</li>`).join("\n")}
</ul><p class="muted">An Ongoing transaction past its timeout should have been aborted by the reaper (every 10 s). A stuck LSO with no transaction of this coordinator behind it is an orphaned transaction on the partition. See docs/operations.md, "Hanging transactions".</p></div>`;
  const table =
    total === 0
      ? `<p class="empty">No open transactions.</p>`
      : `${total > transactions.length ? `<p class="note">Showing ${escapeHtml(transactions.length)} of ${escapeHtml(total)} open transactions; all are at <a href="/v1/transactions?minAgeMs=0">/v1/transactions?minAgeMs=0</a>.</p>` : ""}
<table class="grid" id="open-transactions"><thead><tr><th>Transactional id</th><th>Producer id</th><th>Epoch</th><th>State</th><th>Age</th><th>Timeout</th><th>Partitions</th><th>Groups</th></tr></thead>
<tbody>
${transactions.map(transactionRow).join("\n")}
</tbody></table>`;
  return `<section id="transactions"><h2>Transactions</h2>
<p class="txn-states">${states} <span class="muted">(${oldest})</span></p>
${warnings}
<h3>Open transactions (${escapeHtml(total)})</h3>
${table}
</section>`;
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
h3{font-size:1rem;margin:1rem 0 .4rem}
.txn-count{display:inline-block;padding:0 .4rem;margin-right:.3rem;border-radius:.3rem;background:#eef1f5}
.txn-count.some{background:#dfe9f5}
.warning{background:#fbe3e1;border:1px solid #e3a29b;padding:.5rem .75rem;border-radius:.3rem;max-width:70rem}
.warning ul{margin:.3rem 0}.ok{color:#2f6b3a}
tr.timed-out td{background:#fbe3e1}td.lso-lag.lagging{background:#fff4d6}
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
<p class="muted">Broker ${escapeHtml(cluster.brokerId)} of cluster ${escapeHtml(cluster.clusterId)}. This page reloads every ${escapeHtml(opts.refreshSeconds)} s. JSON: <a href="/v1/cluster">/v1/cluster</a>, <a href="/v1/topics">/v1/topics</a>, <a href="/v1/transactions">/v1/transactions</a>, <a href="/v1/markers">/v1/markers</a>, <a href="/metrics">/metrics</a>, <a href="/ready">/ready</a>.</p>
${clusterSection(cluster, readiness, ports.scrubber?.())}
${topicsSection(details, topics.length)}
${await transactionsSection(ports)}
</body>
</html>
`;
}
