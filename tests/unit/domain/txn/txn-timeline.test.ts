/**
 * The coordinator's in-memory timeline of each transactional id, from the entry changes it is told of:
 * which changes are steps, the "loaded" step of open transactions only, the completion counts, and the
 * bounds on ids and steps.
 */
import { describe, expect, test } from "bun:test";
import { TxnTimeline } from "../../../../src/domain/txn/txn-timeline.ts";
import { txnEntryIn } from "../../../support/txn-entry.ts";

describe("TxnTimeline", () => {
  test("a transaction's life: initialized, began, added, decided, markers, completed", () => {
    const timeline = new TxnTimeline();
    const empty = txnEntryIn("Empty", { updatedMs: 10 });
    timeline.onEntry("tx", undefined, empty, 10);
    const ongoing = txnEntryIn("Ongoing", { partitions: [{ topic: "t", partitions: [0] }], groups: [], ongoingSinceMs: 20, updatedMs: 20 });
    timeline.onEntry("tx", empty, ongoing, 20);
    const more = { ...ongoing, partitions: [{ topic: "t", partitions: [0, 1] }], groups: ["g"], updatedMs: 25 };
    timeline.onEntry("tx", ongoing, more, 25);
    timeline.onEntry("tx", more, more, 26); // the same entry again (tracked twice): no step
    const prepared = { ...more, state: "PrepareCommit" as const, updatedMs: 30 };
    timeline.onEntry("tx", more, prepared, 30);
    timeline.onMarker("tx", "t", 0, "commit", "written", 31);
    timeline.onMarker("tx", "t", 1, "commit", "queued for broker 2", 32);
    const complete = { ...prepared, state: "CompleteCommit" as const, partitions: [], groups: [], updatedMs: 33 };
    timeline.onEntry("tx", prepared, complete, 33);
    expect(timeline.eventsOf("tx")).toEqual([
      { kind: "initialized", atMs: 10, producerId: 4000, epoch: 5 },
      { kind: "began", atMs: 20, producerId: 4000, epoch: 5, partitions: ["t-0"], groups: [] },
      { kind: "added", atMs: 25, partitions: ["t-1"], groups: ["g"] },
      { kind: "decided", atMs: 30, result: "commit", fenced: false, partitions: 2 },
      { kind: "marker", atMs: 31, topic: "t", partition: 0, result: "commit", outcome: "written" },
      { kind: "marker", atMs: 32, topic: "t", partition: 1, result: "commit", outcome: "queued for broker 2" },
      { kind: "completed", atMs: 33, result: "commit" },
    ]);
    expect(timeline.completed).toEqual({ commit: 1, abort: 0 });
  });

  test("a fenced abort says so; a rolled-back write is a restored step; loading records open transactions only", () => {
    const timeline = new TxnTimeline();
    const ongoing = txnEntryIn("Ongoing", { updatedMs: 5 });
    timeline.onEntry("open", undefined, ongoing, 7, true);
    timeline.onEntry("idle", undefined, txnEntryIn("CompleteCommit"), 7, true);
    expect(timeline.size).toBe(1);
    const aborting = { ...ongoing, state: "PrepareAbort" as const, epoch: ongoing.epoch + 1, updatedMs: 9 };
    timeline.onEntry("open", ongoing, aborting, 9);
    const completed = { ...aborting, state: "CompleteAbort" as const, partitions: [], groups: [], updatedMs: 10 };
    timeline.onEntry("open", aborting, completed, 10);
    timeline.onEntry("open", completed, aborting, 11); // the Complete* write failed
    expect(timeline.eventsOf("open").map((e) => e.kind)).toEqual(["loaded", "decided", "completed", "restored"]);
    expect(timeline.eventsOf("open")[1]).toMatchObject({ result: "abort", fenced: true });
    expect(timeline.completed.abort).toBe(1);
  });

  test("bounded: the least recently changed id is forgotten first, and the oldest steps of an id", () => {
    const timeline = new TxnTimeline({ idsMax: 2, eventsMax: 3 });
    for (const id of ["a", "b", "a", "c"]) timeline.onMarker(id, "t", 0, "commit", "written", 1);
    expect(timeline.size).toBe(2);
    expect(timeline.eventsOf("b")).toEqual([]);
    expect(timeline.eventsOf("a")).toHaveLength(2);
    for (let i = 0; i < 5; i++) timeline.onMarker("c", "t", i, "commit", "written", i);
    expect(timeline.eventsOf("c").map((e) => (e.kind === "marker" ? e.partition : -1))).toEqual([2, 3, 4]);
    // An id forgotten (expired, handed over) gets a step only when it has a timeline.
    timeline.onEntry("zzz", txnEntryIn("Empty"), undefined, 1);
    expect(timeline.eventsOf("zzz")).toEqual([]);
  });
});
