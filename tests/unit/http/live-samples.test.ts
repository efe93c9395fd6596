/**
 * The live dashboard's history on a manual clock and manual timers: the ring keeps the newest samples
 * only, rates are deltas over the monotonic time between reads, percentiles come from histogram deltas
 * (null in a second without any observation), partitions are bounded, and subscribers are told of each
 * sample and of the end.
 */
import { describe, expect, test } from "bun:test";
import { LIVE_PARTITIONS_MAX, LiveSampler, quantileBetween, type LiveCounters } from "../../../src/http/live-samples.ts";
import { SampleRing } from "../../../src/http/sample-ring.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { ManualTimers } from "../../support/manual-timers.ts";

describe("SampleRing", () => {
  test("keeps the newest `capacity` samples, oldest first", () => {
    const ring = new SampleRing<number>(3);
    expect(ring.toArray()).toEqual([]);
    expect(ring.latest()).toBeUndefined();
    for (let i = 1; i <= 2; i++) ring.push(i);
    expect(ring.toArray()).toEqual([1, 2]);
    for (let i = 3; i <= 7; i++) ring.push(i);
    expect(ring.toArray()).toEqual([5, 6, 7]);
    expect(ring.size).toBe(3);
    expect(ring.latest()).toBe(7);
    expect(() => new SampleRing(0)).toThrow(RangeError);
  });
});

describe("quantileBetween", () => {
  const bounds = [1, 2, 4];
  test("interpolates within the bucket of the rank, over the observations between two snapshots", () => {
    // 10 observations before; then 4 more: two in (0,1], two in (2,4].
    const before = [5, 10, 10, 10];
    const after = [7, 12, 14, 14];
    expect(quantileBetween(bounds, before, after, 0.5)).toBe(1);
    expect(quantileBetween(bounds, before, after, 0.99)).toBeCloseTo(2 + 2 * ((3.96 - 2) / 2), 6);
  });
  test("null with no observation between the two, or none at all; +Inf is the largest finite bound", () => {
    expect(quantileBetween(bounds, [1, 1, 1, 1], [1, 1, 1, 1], 0.5)).toBeNull();
    expect(quantileBetween(bounds, undefined, undefined, 0.5)).toBeNull();
    expect(quantileBetween(bounds, undefined, [0, 0, 0, 3], 0.99)).toBe(4);
  });
});

describe("LiveSampler", () => {
  function setup(capacity = 300) {
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const counters: LiveCounters = {
      produceBytes: 0,
      fetchBytes: 0,
      txnCommitted: 0,
      txnAborted: 0,
      endTxnBuckets: undefined,
      fsyncBuckets: [0, 0, 0],
      partitions: [],
    };
    const sampler = new LiveSampler({
      read: async () => ({ ...counters, partitions: [...counters.partitions] }),
      endTxnBoundsSeconds: [0.001, 0.01],
      fsyncBoundsSeconds: [0.001, 0.01],
      clock,
      timers,
      intervalMs: 1_000,
      capacity,
    });
    return { clock, timers, counters, sampler };
  }

  test("rates per second between reads; the first read is only the base", async () => {
    const { timers, counters, sampler } = setup();
    sampler.start();
    await timers.advance(0);
    expect(sampler.samples()).toEqual([]);
    counters.produceBytes = 2_000;
    counters.fetchBytes = 500;
    counters.txnCommitted = 3;
    counters.endTxnBuckets = [0, 2, 2];
    await timers.advance(1_000);
    const [first] = sampler.samples();
    expect(first).toMatchObject({ produceBytesPerSecond: 2_000, fetchBytesPerSecond: 500, txnCommittedPerSecond: 3, txnAbortedPerSecond: 0, fsyncP50Ms: null });
    expect(first!.endTxnP50Ms).toBeCloseTo(5.5, 6); // both in (1 ms, 10 ms]: the median halfway through
    counters.produceBytes = 3_000;
    await timers.advance(1_000);
    expect(sampler.samples().map((s) => s.produceBytesPerSecond)).toEqual([2_000, 1_000]);
    // No EndTxn in that second: no latency, a gap in the chart.
    expect(sampler.samples()[1]!.endTxnP50Ms).toBeNull();
    await sampler.stop();
  });

  test("holds `capacity` samples; keeps the most lagging partitions only", async () => {
    const { timers, counters, sampler } = setup(5);
    counters.partitions = Array.from({ length: LIVE_PARTITIONS_MAX + 5 }, (_, i) => ({ topic: "t", partition: i, lsoLag: i, openTransactions: 0, oldestOpenTxnAgeMs: null }));
    sampler.start();
    await timers.advance(20_000);
    const samples = sampler.samples();
    expect(samples).toHaveLength(5);
    expect(samples[0]!.partitions).toHaveLength(LIVE_PARTITIONS_MAX);
    expect(samples[0]!.partitions[0]!.lsoLag).toBe(LIVE_PARTITIONS_MAX + 4);
    expect(sampler.windowMs).toBe(5_000);
    await sampler.stop();
  });

  test("subscribers hear of every sample and of the end; none after the stop", async () => {
    const { timers, sampler } = setup();
    const heard: string[] = [];
    const unsubscribe = sampler.subscribe(
      () => heard.push("sample"),
      () => heard.push("end"),
    );
    expect(unsubscribe).toBeDefined();
    sampler.start();
    await timers.advance(2_000);
    expect(heard).toEqual(["sample", "sample"]);
    await sampler.stop();
    expect(heard).toEqual(["sample", "sample", "end"]);
    expect(sampler.subscribe(() => {}, () => {})).toBeUndefined();
    expect(timers.pending).toBe(0);
  });
});
