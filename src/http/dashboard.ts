/**
 * The live dashboard: GET / (the broker) and GET /dashboard/transactions/:id (one transactional id), server-
 * rendered HTML over the same query ports as the JSON API. Each page is a list of sections with ids; its
 * script (dashboard-assets.ts, served as /dashboard.js) subscribes to the page's event stream
 * (GET /dashboard/events, app.ts), which sends the sections again as they change, once a second, and
 * replaces them in place. The charts (dashboard-charts.ts) are drawn here from the broker's history of
 * samples (live-samples.ts), so a page opened late shows the minutes before it. Without the script the
 * page reloads itself every few seconds. Bounded: at most DASHBOARD_TOPICS topics and
 * DASHBOARD_PARTITIONS_PER_TOPIC partitions each, DASHBOARD_GROUPS groups, with a note and a link to the
 * JSON for the rest.
 *
 * Everything from the broker is escaped (html-escape.ts); the pages load nothing but themselves, their
 * script and their stylesheet (app.ts serves them with a CSP that allows nothing else).
 *
 * Cells carry `data-*` attributes and classes so that a browser test (tests/e2e/dashboard.test.ts) can find
 * a topic's offsets and a transaction's row without depending on the layout.
 *
 * Transactions: the count of transactional ids per state, the open ones (Ongoing, PrepareCommit,
 * PrepareAbort) with their age, and the hanging-transaction warnings (an Ongoing transaction past its
 * timeout, a partition whose LSO stays stuck with nothing accounting for it; the broker's detector,
 * broker/hanging-transactions.ts, decides). Consumer groups: members, state, and each committed offset's lag
 * against the high watermark and against the last stable offset (the dashboard cannot know a consumer's
 * isolation level, so it shows both).
 */
import { dashboardCharts, renderLineChart } from "./dashboard-charts.ts";
import { formatBytes, formatDuration, formatMs } from "./format.ts";
import { escapeHtml } from "./html-escape.ts";
import type {
  ClusterView,
  GroupView,
  HttpQueryPorts,
  PartitionView,
  Readiness,
  ScrubberView,
  TimelineEventView,
  TopicDetailView,
  TransactionDetailView,
  TransactionView,
} from "./ports.ts";

export { escapeHtml };

export const DASHBOARD_TOPICS = 100;
export const DASHBOARD_PARTITIONS_PER_TOPIC = 50;
const DASHBOARD_TRANSACTIONS = 50;
export const DASHBOARD_GROUPS = 50;
/** Committed offsets drawn per group. */
const DASHBOARD_GROUP_OFFSETS = 100;
/** The live-partitions table under the charts: rows drawn. */
const DASHBOARD_LIVE_PARTITIONS = 20;

/** A part of a page with its element id: what the event stream sends again when it changes. */
export interface DashboardSection {
  id: string;
  html: string;
}

export interface DashboardOptions {
  /** Seconds between reloads when the script cannot run (no JavaScript). */
  refreshSeconds: number;
}

/** The event stream of the main page, and of one transactional id's page. */
export const DASHBOARD_EVENTS_PATH = "/dashboard/events";

export function transactionPagePath(transactionalId: string): string {
  return `/dashboard/transactions/${encodeURIComponent(transactionalId)}`;
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
<td class="transactional-id"><a href="${escapeHtml(transactionPagePath(t.transactionalId))}">${escapeHtml(t.transactionalId)}</a> <a class="muted" href="${escapeHtml(href)}">JSON</a></td><td class="producer-id">${escapeHtml(t.producerId)}</td><td class="epoch">${escapeHtml(t.epoch)}</td>
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

/** The charts of the last minutes and the partitions behind them (the broker's samples, live-samples.ts). */
function liveSection(ports: HttpQueryPorts): string {
  const live = ports.live;
  if (live === undefined) {
    return `<section id="live"><h2>Last minutes</h2><p class="not-implemented">No live feed here: the charts need the broker's sampler.</p></section>`;
  }
  const samples = live.samples();
  const endMs = samples[samples.length - 1]?.atMs ?? 0;
  const charts = dashboardCharts(samples).map((chart) => renderLineChart(chart, endMs, live.windowMs)).join("\n");
  const latest = samples[samples.length - 1];
  const rows = (latest?.partitions ?? []).slice(0, DASHBOARD_LIVE_PARTITIONS).map(
    (p) => `<tr class="live-partition" data-topic="${escapeHtml(p.topic)}" data-partition="${escapeHtml(p.partition)}"><td>${escapeHtml(p.topic)}-${escapeHtml(p.partition)}</td><td class="lso-lag${p.lsoLag > 0 ? " lagging" : ""}">${escapeHtml(p.lsoLag)}</td><td>${escapeHtml(p.openTransactions)}</td><td>${p.oldestOpenTxnAgeMs === null ? "–" : escapeHtml(formatDuration(p.oldestOpenTxnAgeMs))}</td></tr>`,
  );
  const table =
    rows.length === 0
      ? `<p class="ok">No partition has its last stable offset behind or an open transaction.</p>`
      : `<table class="grid" id="live-partitions"><thead><tr><th>Partition</th><th>LSO lag</th><th>Open txns</th><th>Oldest open txn (this coordinator)</th></tr></thead><tbody>
${rows.join("\n")}
</tbody></table>`;
  return `<section id="live"><h2>Last minutes</h2>
<p class="muted">${escapeHtml(samples.length)} sample(s), one every ${escapeHtml(formatMs(live.intervalMs))}, kept for ${escapeHtml(formatDuration(live.windowMs))} by the broker.</p>
<div class="charts">
${charts}
</div>
<h3>Partitions behind now</h3>
${table}
</section>`;
}

function groupOffsetRow(g: GroupView, o: GroupView["offsets"][number]): string {
  const lag = (value: number | null) => (value === null ? "–" : escapeHtml(value));
  return `<tr class="group-offset" data-group-id="${escapeHtml(g.groupId)}" data-topic="${escapeHtml(o.topic)}" data-partition="${escapeHtml(o.partition)}"><td>${escapeHtml(o.topic)}</td><td>${escapeHtml(o.partition)}</td><td class="committed">${escapeHtml(o.committedOffset)}</td><td class="high-watermark">${lag(o.highWatermark)}</td><td class="last-stable-offset">${lag(o.lastStableOffset)}</td><td class="hw-lag${o.hwLag !== null && o.hwLag > 0 ? " lagging" : ""}">${lag(o.hwLag)}</td><td class="lso-lag${o.lsoLag !== null && o.lsoLag > 0 ? " lagging" : ""}">${lag(o.lsoLag)}</td></tr>`;
}

function groupBlock(g: GroupView): string {
  const members =
    g.members.length === 0
      ? `<p class="muted">No members.</p>`
      : `<ul class="members">${g.members
          .map((m) => `<li class="member" data-member-id="${escapeHtml(m.memberId)}">${escapeHtml(m.memberId)}${m.groupInstanceId === null ? "" : ` (static: ${escapeHtml(m.groupInstanceId)})`}, client ${escapeHtml(m.clientId)} at ${escapeHtml(m.clientHost)}</li>`)
          .join("")}</ul>`;
  const shown = g.offsets.slice(0, DASHBOARD_GROUP_OFFSETS);
  const more = g.offsetCount - shown.length;
  const offsets =
    shown.length === 0
      ? `<p class="muted">No committed offsets.</p>`
      : `<table class="grid group-offsets"><thead><tr><th>Topic</th><th>Partition</th><th>Committed</th><th>High watermark</th><th>Last stable</th><th>Lag (read_uncommitted, to HW)</th><th>Lag (read_committed, to LSO)</th></tr></thead><tbody>
${shown.map((o) => groupOffsetRow(g, o)).join("\n")}
</tbody></table>${more > 0 ? `<p class="note">${escapeHtml(more)} more committed offsets: see <a href="/v1/groups">/v1/groups</a>.</p>` : ""}`;
  return `<div class="group" data-group-id="${escapeHtml(g.groupId)}">
<h3>${escapeHtml(g.groupId)} <span class="muted group-state">${escapeHtml(g.state)}${g.protocol === "" ? "" : `, ${escapeHtml(g.protocolType)}/${escapeHtml(g.protocol)}`}, ${escapeHtml(g.members.length)} member(s)</span></h3>
${members}
${offsets}
</div>`;
}

async function groupsSection(ports: HttpQueryPorts): Promise<string> {
  if (!ports.groups) return `<section id="groups"><h2>Consumer groups</h2><p class="not-implemented">No group coordinator here: there are no consumer groups to show.</p></section>`;
  const { total, groups } = await ports.groups(DASHBOARD_GROUPS);
  if (total === 0) return `<section id="groups"><h2>Consumer groups</h2><p class="empty">No consumer groups on this coordinator.</p></section>`;
  const note = total > groups.length ? `<p class="note">Showing ${escapeHtml(groups.length)} of ${escapeHtml(total)} groups; all are at <a href="/v1/groups">/v1/groups</a>.</p>` : "";
  return `<section id="groups"><h2>Consumer groups (${escapeHtml(total)})</h2>
<p class="muted">Lag is committed offset to high watermark (what a read_uncommitted consumer has left) and to the last stable offset (read_committed); this page cannot know which a consumer uses.</p>
${note}
${groups.map(groupBlock).join("\n")}
</section>`;
}

/** The main page's sections, in page order; the event stream sends the ones that changed. */
export async function dashboardSections(ports: HttpQueryPorts): Promise<DashboardSection[]> {
  const cluster = ports.cluster();
  const readiness = await ports.readiness();
  const topics = await ports.topics();
  const details: TopicDetailView[] = [];
  for (const t of topics.slice(0, DASHBOARD_TOPICS)) {
    const detail = await ports.topic(t.name);
    if (detail) details.push(detail); // deleted between the two reads: just not drawn
  }
  return [
    { id: "cluster", html: clusterSection(cluster, readiness, ports.scrubber?.()) },
    { id: "live", html: liveSection(ports) },
    { id: "topics", html: topicsSection(details, topics.length) },
    { id: "transactions", html: await transactionsSection(ports) },
    { id: "groups", html: await groupsSection(ports) },
  ];
}

function page(opts: DashboardOptions & { title: string; eventsPath: string; intro: string; sections: DashboardSection[] }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(opts.title)}</title>
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
<noscript><meta http-equiv="refresh" content="${escapeHtml(opts.refreshSeconds)}"></noscript>
</head>
<body data-events="${escapeHtml(opts.eventsPath)}" data-updates="0">
${opts.intro}
<p class="muted" id="live-status" data-state="static">Live updates need JavaScript; without it this page reloads every ${escapeHtml(opts.refreshSeconds)} s.</p>
${opts.sections.map((section) => section.html).join("\n")}
</body>
</html>
`;
}

export async function renderDashboard(ports: HttpQueryPorts, opts: DashboardOptions): Promise<string> {
  const cluster = ports.cluster();
  return page({
    ...opts,
    title: `bunka ${cluster.version} — broker ${cluster.brokerId}`,
    eventsPath: DASHBOARD_EVENTS_PATH,
    intro: `<h1>bunka ${escapeHtml(cluster.version)}</h1>
<p class="muted">Broker ${escapeHtml(cluster.brokerId)} of cluster ${escapeHtml(cluster.clusterId)}. JSON: <a href="/v1/cluster">/v1/cluster</a>, <a href="/v1/topics">/v1/topics</a>, <a href="/v1/transactions">/v1/transactions</a>, <a href="/v1/groups">/v1/groups</a>, <a href="/v1/markers">/v1/markers</a>, <a href="/v1/samples">/v1/samples</a>, <a href="/metrics">/metrics</a>, <a href="/ready">/ready</a>.</p>`,
    sections: await dashboardSections(ports),
  });
}

// ---- one transactional id ----------------------------------------------------------------------

function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** One timeline step in words (every value escaped). */
function timelineText(e: TimelineEventView): string {
  const parts = (names: string[]) => (names.length === 0 ? "" : names.map(escapeHtml).join(", "));
  switch (e.kind) {
    case "loaded":
      return `found ${escapeHtml(e.state)} (producer ${escapeHtml(e.producerId)}, epoch ${escapeHtml(e.epoch)}) when its slot was loaded`;
    case "initialized":
      return `InitProducerId: producer ${escapeHtml(e.producerId)}, epoch ${escapeHtml(e.epoch)}`;
    case "began": {
      const what = [e.partitions.length > 0 ? `partitions ${parts(e.partitions)}` : "", e.groups.length > 0 ? `groups ${parts(e.groups)}` : ""].filter((x) => x !== "").join("; ");
      return `began (producer ${escapeHtml(e.producerId)}, epoch ${escapeHtml(e.epoch)})${what === "" ? "" : `: ${what}`}`;
    }
    case "added":
      return [e.partitions.length > 0 ? `partitions added: ${parts(e.partitions)}` : "", e.groups.length > 0 ? `groups added: ${parts(e.groups)}` : ""].filter((x) => x !== "").join("; ");
    case "decided":
      return `decided: ${e.result === "commit" ? "commit" : "abort"}${e.fenced ? " (fenced: the epoch was bumped, by the timeout reaper, an operator or a new producer session)" : ""}; durable before any marker`;
    case "marker":
      return `${escapeHtml(e.result)} marker on ${escapeHtml(e.topic)}-${escapeHtml(e.partition)}: ${escapeHtml(e.outcome)}`;
    case "completed":
      return `completed: ${e.result === "commit" ? "CompleteCommit" : "CompleteAbort"}`;
    case "restored":
      return `a state write failed; back to ${escapeHtml(e.state)} (retried)`;
    case "forgotten":
      return "forgotten here (expired, or its slot went to another broker)";
  }
}

function timelineList(events: readonly TimelineEventView[]): string {
  if (events.length === 0) return `<p class="muted">No steps recorded since this broker started (the timeline is kept in memory).</p>`;
  const firstMs = events[0]!.atMs;
  return `<ol class="timeline">
${events
  .map((e) => `<li class="step" data-kind="${escapeHtml(e.kind)}"><time datetime="${escapeHtml(isoTime(e.atMs))}">${escapeHtml(isoTime(e.atMs))}</time><span class="muted">+${escapeHtml(e.atMs - firstMs)} ms</span> <span class="kind">${escapeHtml(e.kind)}</span>${timelineText(e)}</li>`)
  .join("\n")}
</ol>`;
}

function transactionSection(t: TransactionDetailView): string {
  const partitions = t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ");
  const staged =
    t.stagedOffsets.length === 0
      ? ""
      : `<h3>Staged offsets</h3><table class="grid"><thead><tr><th>Group</th><th>Topic</th><th>Partition</th><th>Offset</th></tr></thead><tbody>${t.stagedOffsets
          .map((o) => `<tr><td>${escapeHtml(o.groupId)}</td><td>${escapeHtml(o.topic)}</td><td>${escapeHtml(o.partition)}</td><td>${escapeHtml(o.offset)}</td></tr>`)
          .join("")}</tbody></table>`;
  const pending =
    t.pendingMarkers.length === 0
      ? ""
      : `<h3>Markers not durable yet</h3><ul>${t.pendingMarkers
          .map((m) => `<li>${escapeHtml(m.result)} on ${escapeHtml(m.topic)}-${escapeHtml(m.partition)} for broker ${escapeHtml(m.targetBrokerId)} (${escapeHtml(m.source)}${m.file === null ? "" : `, ${escapeHtml(m.file)}`})</li>`)
          .join("")}</ul>`;
  return `<section id="transaction" data-transactional-id="${escapeHtml(t.transactionalId)}">
<table class="facts">
<tr><th>State</th><td data-field="state">${escapeHtml(t.state)}${t.timedOut ? ' <span class="lagging">(timed out)</span>' : ""}</td></tr>
<tr><th>Producer id / epoch</th><td>${escapeHtml(t.producerId)} / ${escapeHtml(t.epoch)}</td></tr>
<tr><th>Timeout</th><td>${escapeHtml(formatMs(t.timeoutMs))}</td></tr>
<tr><th>Age</th><td>${t.ageMs === null ? "–" : escapeHtml(formatDuration(t.ageMs))}</td></tr>
<tr><th>Partitions</th><td>${escapeHtml(partitions || "–")}</td></tr>
<tr><th>Groups</th><td>${escapeHtml(t.groups.join(", ") || "–")}</td></tr>
<tr><th>Coordinator</th><td>slot ${escapeHtml(t.slot)}, broker ${escapeHtml(t.coordinatorBrokerId)}</td></tr>
</table>
<h3>Timeline</h3>
${timelineList(t.timeline)}
${staged}
${pending}
</section>`;
}

/** One transactional id's sections (a single one), or undefined when the coordinator has no entry for it. */
export async function transactionSections(ports: HttpQueryPorts, transactionalId: string): Promise<DashboardSection[] | undefined> {
  const t = await ports.transactions?.get(transactionalId);
  if (t === undefined) return undefined;
  return [{ id: "transaction", html: transactionSection(t) }];
}

export async function renderTransactionPage(ports: HttpQueryPorts, transactionalId: string, opts: DashboardOptions): Promise<string | undefined> {
  const sections = await transactionSections(ports, transactionalId);
  if (sections === undefined) return undefined;
  const cluster = ports.cluster();
  return page({
    ...opts,
    title: `transaction ${transactionalId} — bunka broker ${cluster.brokerId}`,
    eventsPath: `${DASHBOARD_EVENTS_PATH}?transaction=${encodeURIComponent(transactionalId)}`,
    intro: `<h1>Transaction <span data-field="transactionalId">${escapeHtml(transactionalId)}</span></h1>
<p class="muted"><a href="/">Back to the dashboard</a>. JSON: <a href="${escapeHtml(`/v1/transactions/${encodeURIComponent(transactionalId)}`)}">${escapeHtml(`/v1/transactions/${encodeURIComponent(transactionalId)}`)}</a>.</p>`,
    sections,
  });
}
