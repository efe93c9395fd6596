import { describe, expect, test } from "bun:test";
import { KeyedTimers } from "../../../src/broker/group-timers.ts";

function harness() {
  let now = 0;
  const fired: string[] = [];
  const timers = new KeyedTimers(() => now);
  return {
    timers,
    fired,
    advance(ms: number) {
      now += ms;
      return timers.runDue();
    },
    schedule(key: string, delayMs: number, then?: () => void) {
      timers.schedule(key, delayMs, () => {
        fired.push(key);
        then?.();
      });
    },
  };
}

describe("KeyedTimers", () => {
  test("fires due timers in deadline order, and only due ones", () => {
    const h = harness();
    h.schedule("c", 300);
    h.schedule("a", 100);
    h.schedule("b", 200);
    expect(h.advance(150)).toBe(1);
    expect(h.fired).toEqual(["a"]);
    expect(h.advance(1000)).toBe(2);
    expect(h.fired).toEqual(["a", "b", "c"]);
    expect(h.timers.size).toBe(0);
    h.timers.close();
  });

  test("scheduling a key again replaces its timer; cancel removes it", () => {
    const h = harness();
    h.schedule("hb", 100);
    h.schedule("hb", 500);
    h.schedule("gone", 50);
    h.timers.cancel("gone");
    expect(h.advance(200)).toBe(0);
    expect(h.advance(300)).toBe(1);
    expect(h.fired).toEqual(["hb"]);
    h.timers.close();
  });

  test("a callback that reschedules itself without delay does not spin inside one runDue", () => {
    const h = harness();
    const again = () => h.schedule("loop", 0, again);
    h.schedule("loop", 0, again);
    expect(h.advance(0)).toBe(1);
    expect(h.advance(0)).toBe(1);
    h.timers.close();
  });

  test("stale heap entries are bounded under many reschedules (a heartbeat per member)", () => {
    const h = harness();
    for (let i = 0; i < 10_000; i++) h.schedule(`member-${i % 10}`, 1000 + i);
    expect(h.timers.size).toBe(10);
    expect((h.timers as unknown as { heap: unknown[] }).heap.length).toBeLessThanOrEqual(128);
    expect(h.advance(20_000)).toBe(10);
    h.timers.close();
  });

  test("a throwing callback is reported and the others still run", () => {
    let now = 0;
    const errors: string[] = [];
    const timers = new KeyedTimers(() => now, (key) => errors.push(key));
    const ran: string[] = [];
    timers.schedule("bad", 10, () => {
      throw new Error("boom");
    });
    timers.schedule("good", 10, () => ran.push("good"));
    now = 10;
    expect(timers.runDue()).toBe(2);
    expect(errors).toEqual(["bad"]);
    expect(ran).toEqual(["good"]);
    timers.close();
  });

  test("the real timer fires on its own with the system clock", async () => {
    const timers = new KeyedTimers(() => performance.now());
    const fired = new Promise<string>((resolve) => timers.schedule("x", 5, () => resolve("x")));
    expect(await fired).toBe("x");
    timers.close();
  });
});
