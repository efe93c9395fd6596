/**
 * Durations for people, short and stable (no locale): the hanging-transaction warnings (broker/), the
 * dashboard and the CLI's tables (through http/format.ts) all say them the same way. Pure.
 */

/** `45s`, `3m 5s`, `2h 10m`, `1d 4h 0m`; sub-second durations are `0s` (`formatMs` keeps milliseconds). */
export function formatDuration(ms: number): string {
  const s = Math.floor(Math.max(0, ms) / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h ${m}m`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

/** A configured duration such as a transaction timeout: `900ms`, `60s`, `15m`, `1h 30m`, exact when it can be. */
export function formatMs(ms: number): string {
  if (ms < 1000 || ms % 1000 !== 0) return `${ms}ms`;
  const s = ms / 1000;
  if (s < 60 || s % 60 !== 0) return s < 60 ? `${s}s` : formatDuration(ms);
  const m = s / 60;
  if (m < 60 || m % 60 !== 0) return m < 60 ? `${m}m` : formatDuration(ms);
  return `${m / 60}h`;
}
