import { describe, expect, test } from "bun:test";
import { createLogger } from "../../../src/platform/logger.ts";

function capture(format: "text" | "json") {
  const lines: string[] = [];
  const log = createLogger({ format, level: "debug", write: (line) => lines.push(line), nowMs: () => Date.UTC(2026, 0, 1) });
  return { log, lines };
}

/** A transactional id that tries to forge a line of its own and a field of its own. */
const FORGED = "app-1\n2026-01-01T00:00:00.000Z ERROR disk failed\r\u001b[31m\u2028 level=ERROR";

describe("text lines", () => {
  test("plain values are written bare", () => {
    const { log, lines } = capture("text");
    log.info("started", { kafka: "127.0.0.1:9092", brokerId: 1, ok: true });
    expect(lines).toEqual(["2026-01-01T00:00:00.000Z INFO  started kafka=127.0.0.1:9092 brokerId=1 ok=true"]);
  });

  test("a client string with a newline, escape sequences or ' key=' stays in one line and one field", () => {
    const { log, lines } = capture("text");
    log.warn(`fenced ${FORGED}`, { transactionalId: FORGED });
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
    expect(line).toContain("fenced app-1\\n2026-01-01T00:00:00.000Z ERROR disk failed\\r\\u001b[31m\\u2028 level=ERROR");
    // The field is a JSON string: reading it back gives exactly what the client sent.
    const field = line.slice(line.indexOf(" transactionalId=") + " transactionalId=".length);
    expect(JSON.parse(field)).toBe(FORGED);
  });

  test("values with spaces, quotes, backslashes or '=' are quoted; the empty string shows", () => {
    const { log, lines } = capture("text");
    log.info("m", { a: "two words", b: 'say "hi"', c: "C:\\dir", d: "x=y", e: "" });
    expect(lines[0]).toBe('2026-01-01T00:00:00.000Z INFO  m a="two words" b="say \\"hi\\"" c="C:\\\\dir" d="x=y" e=""');
  });

  test("objects, bigints and undefined", () => {
    const { log, lines } = capture("text");
    log.info("m", { o: { id: "a\nb" }, n: 12n, u: undefined });
    expect(lines[0]).toBe('2026-01-01T00:00:00.000Z INFO  m o={"id":"a\\nb"} n=12 u=undefined');
  });
});

describe("json lines", () => {
  test("control characters and line separators are escaped; the value reads back unchanged", () => {
    const { log, lines } = capture("json");
    log.error(FORGED, { transactionalId: FORGED, revision: 7n });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
    const parsed = JSON.parse(lines[0]!);
    expect(parsed).toEqual({ time: "2026-01-01T00:00:00.000Z", level: "error", msg: FORGED, transactionalId: FORGED, revision: "7" });
  });

  test("a field cannot overwrite time, level or msg", () => {
    const { log, lines } = capture("json");
    log.info("real", { level: "error", msg: "forged", time: "never", other: 1 });
    const parsed = JSON.parse(lines[0]!);
    expect(parsed.level).toBe("info");
    expect(parsed.msg).toBe("real");
    expect(parsed.time).toBe("2026-01-01T00:00:00.000Z");
    expect(parsed.other).toBe(1);
  });
});

test("levels below the minimum are not written", () => {
  const lines: string[] = [];
  const log = createLogger({ format: "text", level: "warn", write: (line) => lines.push(line) });
  log.info("no");
  log.debug("no");
  log.warn("yes");
  expect(lines).toHaveLength(1);
});
