import { describe, expect, test } from "bun:test";
import { silentLogger } from "../../../src/platform/logger.ts";
import { type StopSignal, StopSignals } from "../../../src/platform/stop-signals.ts";

function harness() {
  const handlers = new Map<StopSignal, () => void>();
  const exits: number[] = [];
  const shutdowns: Record<string, unknown>[] = [];
  const signals = new StopSignals({ log: silentLogger, on: (signal, handler) => handlers.set(signal, handler), exit: (code) => exits.push(code) });
  signals.install();
  const send = (signal: StopSignal) => handlers.get(signal)!();
  return { signals, send, exits, shutdowns, shutdown: (why: Record<string, unknown>) => shutdowns.push(why) };
}

describe("stop signals", () => {
  test("both signals are handled from install on", () => {
    const { send, exits } = harness();
    send("SIGTERM");
    expect(exits).toEqual([0]);
    const other = harness();
    other.send("SIGINT");
    expect(other.exits).toEqual([0]);
  });

  test("starting: a signal exits 0 at once; a second exits 130", () => {
    const { send, exits } = harness();
    send("SIGINT");
    send("SIGINT");
    expect(exits).toEqual([0, 130]);
  });

  test("opening: a signal is remembered, does not exit, and serve() runs the shutdown at once", () => {
    const { signals, send, exits, shutdowns, shutdown } = harness();
    signals.opening();
    send("SIGTERM");
    expect(exits).toEqual([]);
    expect(signals.requested).toBe("SIGTERM");
    expect(signals.isStopping).toBe(true);
    signals.serve(shutdown);
    expect(shutdowns).toEqual([{ signal: "SIGTERM" }]);
    send("SIGINT");
    expect(exits).toEqual([130]);
    expect(shutdowns).toHaveLength(1);
  });

  test("serving: the first signal shuts down, the second exits 130", () => {
    const { signals, send, exits, shutdowns, shutdown } = harness();
    signals.opening();
    signals.serve(shutdown);
    expect(shutdowns).toEqual([]);
    send("SIGINT");
    expect(shutdowns).toEqual([{ signal: "SIGINT" }]);
    expect(exits).toEqual([]);
    send("SIGTERM");
    expect(exits).toEqual([130]);
  });

  test("a shutdown for another reason makes the first signal a second one", () => {
    const { signals, send, exits, shutdowns, shutdown } = harness();
    signals.opening();
    signals.serve(shutdown);
    signals.markStopping();
    send("SIGTERM");
    expect(exits).toEqual([130]);
    expect(shutdowns).toEqual([]);
  });
});
