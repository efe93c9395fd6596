/**
 * The one escaping function of the dashboard's markup (dashboard.ts, dashboard-charts.ts): every text and
 * attribute value that comes from the broker (topic names, transactional ids, group ids, client ids,
 * reasons) goes through it, so a hostile name is shown as text and never runs.
 */
const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (ch) => escapes[ch]!);
}
