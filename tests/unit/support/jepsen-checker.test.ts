/**
 * The Jepsen-style checker (tests/support/jepsen/checker.ts) over hand-written histories: a clean one (with an
 * aborted transaction, an info one that committed, an info one that did not, a seek back after a failure)
 * where it finds nothing, and one history per anomaly kind, each a small change of the clean one, where it
 * finds that kind.
 */
import { describe, expect, test } from "bun:test";
import { type AnomalyKind, checkHistory, stronglyConnected } from "../../support/jepsen/checker.ts";
import type { HistoryEvent, MicroOp, PollOp, SendOp } from "../../support/jepsen/history.ts";

const send = (topic: string, partition: number, value: string, offset?: number): SendOp =>
  offset === undefined ? { f: "send", topic, partition, key: `k-${topic}-${partition}`, value } : { f: "send", topic, partition, key: `k-${topic}-${partition}`, value, offset };
const poll = (...records: [string, number, number, string][]): PollOp => ({
  f: "poll",
  records: records.map(([topic, partition, offset, value]) => ({ topic, partition, offset, key: `k-${topic}-${partition}`, value })),
});
/** What the invoke line lists: the planned sends without offsets, polls without records. */
const planned = (ops: MicroOp[]): MicroOp[] => ops.map((op) => (op.f === "send" ? send(op.topic, op.partition, op.value) : { f: "poll" }));

class History {
  events: HistoryEvent[] = [];
  private time = 0;

  start(process: number, lineage: number): this {
    this.events.push({ type: "start", process, lineage, time: this.time++ });
    return this;
  }

  /** The last transaction's completion carried these consumer offsets. */
  carried(...offsets: [string, number, number][]): this {
    const last = this.events[this.events.length - 1]!;
    if (last.type !== "ok" && last.type !== "fail" && last.type !== "info") throw new Error("carried() follows a completion");
    last.offsets = offsets.map(([topic, partition, offset]) => ({ topic, partition, offset }));
    return this;
  }

  seek(process: number, ...positions: [string, number, number][]): this {
    this.events.push({ type: "seek", process, time: this.time++, positions: positions.map(([topic, partition, offset]) => ({ topic, partition, offset })) });
    return this;
  }

  /** An invoke and its completion; `plan` (default: the ops) is what the invoke listed. */
  txn(process: number, txn: number, type: "ok" | "fail" | "info" | "none", ops: MicroOp[], plan: MicroOp[] = ops): this {
    this.events.push({ type: "invoke", process, txn, time: this.time++, ops: planned(plan) });
    if (type !== "none") this.events.push({ type, process, txn, time: this.time++, ops });
    return this;
  }

  final(topic: string, partition: number, ...records: [number, string][]): this {
    for (const [offset, value] of records) this.events.push({ type: "final", topic, partition, offset, key: `k-${topic}-${partition}`, value });
    const end = records.length === 0 ? 0 : records[records.length - 1]![0] + 2;
    this.events.push({ type: "final-end", topic, partition, end });
    return this;
  }
}

interface CleanParts {
  /** Replaces process 2's txn 1 (a poll of a/0 at offset 3 by default). */
  p2t1?: MicroOp[];
  /** Replaces the final read of a/0. */
  finalA0?: [number, string][];
  /** Process 1's aborted transaction (a poll of a/0@0, a send of 1-2 acknowledged at a/0@1). */
  p1t1?: MicroOp[];
  /** Appended before the final read. */
  extra?: (h: History) => void;
  extraFinal?: (h: History) => void;
}

/**
 * Process 1 writes a/0 and a/1, process 2 writes b/0; both read. Offsets 2 and 4 of a/0 are transaction markers
 * (commit of 1:0... and the abort of 1:1), as a broker lays them out.
 */
function clean(parts: CleanParts = {}): HistoryEvent[] {
  const h = new History()
    .seek(1, ["a", 0, 0], ["a", 1, 0], ["b", 0, 0])
    .seek(2, ["a", 0, 0], ["a", 1, 0], ["b", 0, 0])
    .txn(1, 0, "ok", [send("a", 0, "1-0", 0), send("a", 1, "1-1", 0)])
    .txn(2, 0, "ok", [poll(["a", 0, 0, "1-0"], ["a", 1, 0, "1-1"]), send("b", 0, "2-0", 0)])
    .txn(1, 1, "fail", parts.p1t1 ?? [poll(["a", 0, 0, "1-0"]), send("a", 0, "1-2", 1)])
    .seek(1, ["a", 0, 0], ["a", 1, 0], ["b", 0, 0])
    .txn(1, 2, "ok", [poll(["a", 0, 0, "1-0"], ["b", 0, 0, "2-0"]), send("a", 0, "1-3", 3)])
    .txn(2, 1, "ok", parts.p2t1 ?? [poll(["a", 0, 3, "1-3"])])
    // Unknown outcome (commit timed out), but its write is in the final read: committed.
    .txn(1, 3, "info", [send("a", 0, "1-4", 5)])
    .seek(1, ["a", 0, 4], ["a", 1, 1], ["b", 0, 1])
    // A client killed inside it: never completed, its write never seen: aborted.
    .txn(1, 4, "none", [], [send("a", 1, "1-5")]);
  parts.extra?.(h);
  h.final("a", 0, ...(parts.finalA0 ?? [[0, "1-0"], [3, "1-3"], [5, "1-4"]]))
    .final("a", 1, [0, "1-1"])
    .final("b", 0, [0, "2-0"]);
  parts.extraFinal?.(h);
  return h.events;
}

const kinds = (events: HistoryEvent[]): AnomalyKind[] => [...new Set(checkHistory(events).anomalies.map((a) => a.kind))].sort();

describe("jepsen checker", () => {
  test("a clean history has no anomaly, and its figures count what happened", () => {
    const result = checkHistory(clean());
    expect(result.anomalies).toEqual([]);
    expect(result.valid).toBe(true);
    expect(result.stats).toMatchObject({ txns: 7, ok: 4, fail: 1, info: 2, infoCommitted: 1, sendsAcked: 6, sendsAborted: 1, recordsPolled: 6, finalRecords: 5 });
    // ww: 1:0 -> 1:2 -> 1:3 on a/0; wr: 1:0 -> 2:0, 1:0 -> 1:2, 2:0 -> 1:2, 1:2 -> 2:1 (who read whose value).
    expect(result.stats.wwEdges).toBe(2);
    expect(result.stats.wrEdges).toBe(4);
  });

  test("aborted read: a poll returns a value of a failed transaction", () => {
    const events = clean({ p2t1: [poll(["a", 0, 1, "1-2"], ["a", 0, 3, "1-3"])] });
    expect(kinds(events)).toEqual(["aborted-read"]);
    expect(checkHistory(events).anomalies[0]!.txns).toEqual(["1:1", "2:1"]);
  });

  test("aborted read: a value of an unfinished transaction that the final read does not have", () => {
    const events = clean({ extra: (h) => h.txn(2, 2, "ok", [poll(["a", 1, 1, "1-5"])]) });
    expect(kinds(events)).toEqual(["aborted-read"]);
  });

  test("aborted read: the final read holds a failed transaction's value", () => {
    const events = clean({ finalA0: [[0, "1-0"], [1, "1-2"], [3, "1-3"], [5, "1-4"]] });
    // Process 2 went from a/0@0 to a/0@3 past it, which is now a skip as well.
    expect(kinds(events)).toEqual(["aborted-read", "poll-skip"]);
  });

  test("lost write: an acknowledged write of a committed transaction is missing at the end", () => {
    const events = clean({ finalA0: [[0, "1-0"], [5, "1-4"]] });
    expect(kinds(events)).toEqual(["lost-write"]);
    expect(checkHistory(events).anomalies[0]!.message).toContain('"1-3" of 1:2 (committed) (acknowledged at a/0@3)');
  });

  test("lost write: an info transaction is in the final read with only part of its writes", () => {
    const events = clean({
      extra: (h) => h.txn(2, 2, "info", [send("b", 0, "2-1", 1), send("b", 0, "2-2", 2)]),
      extraFinal: (h) => h.final("b", 0, [1, "2-1"]),
    });
    expect(kinds(events)).toEqual(["lost-write"]);
    expect(checkHistory(events).anomalies[0]!.message).toContain('"2-2" of 2:2 (proven committed');
  });

  test("duplicate: one value at two offsets", () => {
    // 1-1 written once, at a/1@0, read back at 0 and again at 1. (A copy after a later transaction's records
    // would make write cycles as well: the ww order says 1:0 came after them.)
    const events = clean({ extraFinal: (h) => h.final("a", 1, [1, "1-1"]) });
    expect(kinds(events)).toEqual(["duplicate"]);
    expect(kinds(clean({ finalA0: [[0, "1-0"], [3, "1-3"], [5, "1-4"], [7, "1-0"]] }))).toEqual(["G0", "G1c", "duplicate"]);
  });

  test("inconsistent offsets: one offset read with two values", () => {
    // Process 2 reads a/0@3 as 1-4, which the final read has at offset 5 (so it is a duplicate as well).
    const events = clean({ p2t1: [poll(["a", 0, 3, "1-4"])] });
    expect(kinds(events)).toEqual(["duplicate", "inconsistent-offset"]);
    expect(checkHistory(events).anomalies.find((a) => a.kind === "inconsistent-offset")!.message).toContain("a/0@3");
  });

  test("phantom: a value nobody wrote", () => {
    expect(kinds(clean({ p2t1: [poll(["a", 0, 3, "1-3"], ["c", 0, 0, "9-9"])] }))).toEqual(["phantom"]);
  });

  test("poll skip: successive polls pass over a committed record", () => {
    // Process 2 consumed a/0@0, then polls a/0@5: offset 3 (committed) was skipped; 1, 2 and 4 were not records.
    const events = clean({ p2t1: [poll(["a", 0, 5, "1-4"])] });
    expect(kinds(events)).toEqual(["poll-skip"]);
    expect(checkHistory(events).anomalies[0]!.message).toContain("skipping 1 committed record(s) at 3");
  });

  test("poll skip: the first poll after a seek does not start at the position", () => {
    const events = clean({ extra: (h) => h.seek(3, ["a", 0, 0]).txn(3, 0, "ok", [poll(["a", 0, 3, "1-3"])]) });
    expect(kinds(events)).toEqual(["poll-skip"]);
  });

  test("nonmonotonic poll: a poll returns an offset already consumed, without a seek in between", () => {
    const events = clean({ p2t1: [poll(["a", 0, 3, "1-3"]), poll(["a", 0, 0, "1-0"])] });
    expect(kinds(events)).toEqual(["nonmonotonic-poll"]);
    // After a seek back the same read is fine: process 1 read a/0@0 in its failed transaction and again after.
    expect(kinds(clean())).toEqual([]);
  });

  test("nonmonotonic poll: below the position sought to", () => {
    const events = clean({ extra: (h) => h.seek(3, ["a", 0, 3]).txn(3, 0, "ok", [poll(["a", 0, 0, "1-0"])]) });
    expect(kinds(events)).toEqual(["nonmonotonic-poll"]);
  });

  test("nonmonotonic send: a process's acknowledged sends to a partition go backwards", () => {
    // The aborted send acknowledged at 4, the next one at 3.
    const events = clean({ p1t1: [send("a", 0, "1-2", 4)] });
    expect(kinds(events)).toEqual(["nonmonotonic-send"]);
    expect(checkHistory(events).anomalies[0]!.txns).toEqual(["1:1", "1:2"]);
  });

  describe("committed offsets: a new process of a lineage starts where its last committed transaction left the group", () => {
    /** Lineage 0: process 1 commits offsets a/0@1, fails with a/0@3, then maybe commits a/0@2; process 3 takes over. */
    const lineage = (startAt: number, unknownLast = true, committedAfter = false) => {
      const h = new History()
        .start(1, 0)
        .seek(1, ["a", 0, 0])
        .txn(1, 0, "ok", [send("a", 0, "1-0", 0)])
        .txn(1, 1, "ok", [poll(["a", 0, 0, "1-0"])])
        .carried(["a", 0, 1])
        .txn(1, 2, "fail", [poll()])
        .carried(["a", 0, 3])
        .seek(1, ["a", 0, 1]);
      if (unknownLast) h.txn(1, 3, "info", [poll()]).carried(["a", 0, 2]);
      if (committedAfter) h.txn(1, 4, "ok", [poll()]).carried(["a", 0, 5]);
      h.start(3, 0).seek(3, ["a", 0, startAt]);
      h.final("a", 0, [0, "1-0"]);
      return h.events;
    };

    test("at the last committed offsets, or at those of a later transaction of unknown outcome", () => {
      expect(kinds(lineage(1))).toEqual([]);
      expect(kinds(lineage(2))).toEqual([]);
      expect(kinds(lineage(1, false))).toEqual([]);
    });

    test("at the offsets of an aborted transaction, or back at the beginning", () => {
      expect(kinds(lineage(3))).toEqual(["committed-offsets"]);
      expect(kinds(lineage(0))).toEqual(["committed-offsets"]);
      expect(kinds(lineage(2, false))).toEqual(["committed-offsets"]);
      // A transaction of unknown outcome is no candidate once a later one committed.
      expect(kinds(lineage(5, true, true))).toEqual([]);
      expect(kinds(lineage(2, true, true))).toEqual(["committed-offsets"]);
    });

    test("the group's offsets read back after an abort are the last committed transaction's", () => {
      const readBack = (offset: number) => {
        const h = new History().start(1, 0).seek(1, ["a", 0, 0]).txn(1, 0, "ok", [send("a", 0, "1-0", 0)]);
        h.txn(1, 1, "ok", [poll(["a", 0, 0, "1-0"])]).carried(["a", 0, 1]);
        h.txn(1, 2, "fail", [poll()]).carried(["a", 0, 3]);
        h.events.push({ type: "committed", process: 1, time: 100, positions: [{ topic: "a", partition: 0, offset }] });
        return h.final("a", 0, [0, "1-0"]).events;
      };
      expect(kinds(readBack(1))).toEqual([]);
      expect(checkHistory(readBack(1)).stats.offsetChecks).toBe(2);
      expect(kinds(readBack(3))).toEqual(["committed-offsets"]);
    });

    test("the first process of a lineage starts at 0", () => {
      const events = new History().start(1, 0).seek(1, ["a", 0, 1]).final("a", 0).events;
      expect(kinds(events)).toEqual(["committed-offsets"]);
    });
  });

  test("G0: two committed transactions whose writes interleave in opposite orders on two partitions", () => {
    const events = clean({
      extra: (h) => h.txn(1, 5, "ok", [send("a", 0, "1-10", 10), send("a", 1, "1-11", 21)]).txn(2, 2, "ok", [send("a", 0, "2-10", 11), send("a", 1, "2-11", 20)]),
      finalA0: [[0, "1-0"], [3, "1-3"], [5, "1-4"], [10, "1-10"], [11, "2-10"]],
      extraFinal: (h) => h.final("a", 1, [20, "2-11"], [21, "1-11"]),
    });
    const result = checkHistory(events);
    expect(kinds(events)).toEqual(["G0"]);
    expect(new Set(result.anomalies[0]!.txns)).toEqual(new Set(["1:5", "2:2"]));
  });

  test("G1c: a write-write edge one way and a write-read edge back", () => {
    // 1:5 wrote a/0@10 before 2:2's a/0@11 (ww 1:5 -> 2:2), and 1:5 read 2:2's b/0 value (wr 2:2 -> 1:5).
    const events = clean({
      extra: (h) => h.txn(2, 2, "ok", [send("b", 0, "2-11", 5), send("a", 0, "2-10", 11)]).txn(1, 5, "ok", [poll(["b", 0, 5, "2-11"]), send("a", 0, "1-10", 10)]),
      finalA0: [[0, "1-0"], [3, "1-3"], [5, "1-4"], [10, "1-10"], [11, "2-10"]],
      extraFinal: (h) => h.final("b", 0, [5, "2-11"]),
    });
    const result = checkHistory(events);
    expect(kinds(events)).toEqual(["G1c"]);
    expect(result.anomalies[0]!.message).toMatch(/2:2 -wr-> 1:5 -ww-> 2:2/);
  });

  test("Tarjan: strongly connected components with more than one node", () => {
    const edges: Record<string, string[]> = { a: ["b"], b: ["c"], c: ["a", "d"], d: ["e"], e: ["d"], f: ["f"], g: ["a"] };
    const sccs = stronglyConnected(Object.keys(edges), (n) => edges[n] ?? []).map((c) => [...c].sort().join(""));
    expect(sccs.sort()).toEqual(["abc", "de"]);
  });
});
