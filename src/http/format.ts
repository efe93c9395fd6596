/**
 * Human formats shared by the dashboard and the CLI's tables: durations (domain/human-durations.ts, which the
 * broker's hanging-transaction warnings use too) and byte sizes, short and stable (no locale).
 */

export { formatDuration, formatMs } from "../domain/human-durations.ts";

export function formatBytes(bytes: number): string {
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
