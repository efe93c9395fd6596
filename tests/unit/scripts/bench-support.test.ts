import { describe, expect, test } from "bun:test";
import { isPartitionDirOf, KAFKA_FLUSH_PROPERTIES, medianSpread, roundOrder, variantsOf } from "../../../scripts/bench-support.ts";

describe("bench-support: which brokers run, and in which order", () => {
  test("both brokers by default; --kafka-flush puts its variant right after Apache Kafka", () => {
    expect(variantsOf(undefined, false)).toEqual(["kafka", "bunka"]);
    expect(variantsOf(undefined, true)).toEqual(["kafka", "kafka-flush", "bunka"]);
    expect(variantsOf("bunka", false)).toEqual(["bunka"]);
    expect(variantsOf("bunka", true)).toEqual(["kafka-flush", "bunka"]);
    expect(variantsOf("kafka", true)).toEqual(["kafka", "kafka-flush"]);
  });

  test("rounds alternate: as given in odd rounds, reversed in even ones, so each end goes first half the time", () => {
    const variants = ["kafka", "kafka-flush", "bunka"] as const;
    expect(roundOrder(variants, 1)).toEqual(["kafka", "kafka-flush", "bunka"]);
    expect(roundOrder(variants, 2)).toEqual(["bunka", "kafka-flush", "kafka"]);
    expect(roundOrder(variants, 3)).toEqual(["kafka", "kafka-flush", "bunka"]);
    const firsts = [1, 2, 3, 4].map((r) => roundOrder(["kafka", "bunka"], r)[0]);
    expect(firsts).toEqual(["kafka", "bunka", "kafka", "bunka"]);
    // The caller's list is not reordered in place.
    const list = ["kafka", "bunka"];
    roundOrder(list, 2);
    expect(list).toEqual(["kafka", "bunka"]);
  });

  test("the fsync-per-batch variant sets the broker default of flush.messages to 1", () => {
    expect(KAFKA_FLUSH_PROPERTIES).toEqual({ "log.flush.interval.messages": 1 });
  });
});

describe("bench-support: a cell of rounds", () => {
  const fmt = (n: number) => n.toFixed(1);
  test("the median with the range; one value alone; none as a dash", () => {
    expect(medianSpread([3, 1, 2], fmt)).toBe("2.0 (1.0–3.0)");
    expect(medianSpread([4, 1, 2, 3], fmt)).toBe("2.5 (1.0–4.0)");
    expect(medianSpread([7], fmt)).toBe("7.0");
    expect(medianSpread([], fmt)).toBe("—");
  });
});

describe("bench-support: a deleted topic's directories", () => {
  test("live and being-deleted partition directories of the topic, and nothing of other topics", () => {
    expect(isPartitionDirOf("bench-b-r1-0", "bench-b-r1")).toBe(true);
    expect(isPartitionDirOf("bench-b-r1-15", "bench-b-r1")).toBe(true);
    expect(isPartitionDirOf("bench-b-r1-3.Zm9vYmFyYmF6cXV4cXV1eA-delete", "bench-b-r1")).toBe(true);
    expect(isPartitionDirOf("bench-b-r10-0", "bench-b-r1")).toBe(false);
    expect(isPartitionDirOf("bench-b-r1-x-0", "bench-b-r1")).toBe(false);
    expect(isPartitionDirOf("bench-b-r1-0", "bench-b")).toBe(false);
    // partition 3 of a topic named "bench-b-r1-0"
    expect(isPartitionDirOf("bench-b-r1-0-3", "bench-b-r1")).toBe(false);
    expect(isPartitionDirOf("__consumer_offsets-0", "bench-b-r1")).toBe(false);
  });
});
