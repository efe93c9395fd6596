/** The human formats of the dashboard, the warnings and the CLI tables. */
import { expect, test } from "bun:test";
import { formatBytes, formatDuration, formatMs } from "../../../src/http/format.ts";

test.each([
  [0, "0s"],
  [999, "0s"],
  [45_000, "45s"],
  [185_000, "3m 5s"],
  [7_800_000, "2h 10m"],
  [100_800_000, "1d 4h 0m"],
  [-5, "0s"],
])("formatDuration(%p) = %p", (ms, text) => {
  expect(formatDuration(ms)).toBe(text);
});

test.each([
  [900, "900ms"],
  [1_500, "1500ms"],
  [10_000, "10s"],
  [60_000, "1m"],
  [90_000, "1m 30s"],
  [900_000, "15m"],
  [3_600_000, "1h"],
  [5_400_000, "1h 30m"],
])("formatMs(%p) = %p", (ms, text) => {
  expect(formatMs(ms)).toBe(text);
});

test.each([
  [0, "0 B"],
  [1023, "1023 B"],
  [2048, "2.0 KiB"],
  [5 * 1024 * 1024, "5.0 MiB"],
])("formatBytes(%p) = %p", (bytes, text) => {
  expect(formatBytes(bytes)).toBe(text);
});
