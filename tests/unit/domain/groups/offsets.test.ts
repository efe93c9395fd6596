/**
 * Committed and staged offsets of a slot: copy-on-write drafts, the transactional ordering rule, deletion,
 * the size bound, and Apache's expiry conditions.
 */
import { describe, expect, test } from "bun:test";
import type { OffsetExpiryView } from "../../../../src/domain/groups/group-coordinator-state.ts";
import { OffsetSlot, expiryBase, type OffsetCommitEntry } from "../../../../src/domain/groups/offsets.ts";
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";

const entry = (topic: string, partition: number, offset: number, extra: Partial<OffsetCommitEntry> = {}): OffsetCommitEntry => ({
  topic,
  partition,
  offset,
  leaderEpoch: -1,
  metadata: "",
  commitTimestampMs: 1000,
  expireTimestampMs: null,
  ...extra,
});

const DAY = 24 * 60 * 60 * 1000;

function view(partial: Partial<OffsetExpiryView>): OffsetExpiryView {
  return {
    state: "Empty",
    protocolType: "consumer",
    currentStateTimestampMs: null,
    usesConsumerGroupProtocol: true,
    knowsSubscriptions: true,
    isSubscribedToTopic: () => false,
    ...partial,
  };
}

describe("drafts", () => {
  test("a draft never changes the slot it came from", () => {
    const base = OffsetSlot.empty();
    const d1 = base.draft();
    d1.commit("g", [entry("t", 0, 5)]);
    const s1 = d1.finish();
    const d2 = s1.draft();
    d2.commit("g", [entry("t", 0, 9), entry("t", 1, 1)]);
    d2.deleteOffsets("g", [{ topic: "t", partition: 0 }]);
    const s2 = d2.finish();
    expect(base.committed("g", "t", 0)).toBeUndefined();
    expect(s1.committed("g", "t", 0)!.offset).toBe(5);
    expect(s1.committed("g", "t", 1)).toBeUndefined();
    expect(s2.committed("g", "t", 0)).toBeUndefined();
    expect(s2.committed("g", "t", 1)!.offset).toBe(1);
  });

  test("changed: a draft that touched nothing need not be written", () => {
    const d = OffsetSlot.empty().draft();
    expect(d.changed).toBe(false);
    d.completeTransaction("g", 1, true);
    d.deleteOffsets("g", [{ topic: "t", partition: 0 }]);
    d.setRecord("g", null);
    expect(d.changed).toBe(false);
    d.commit("g", [entry("t", 0, 1)]);
    expect(d.changed).toBe(true);
  });

  test("a group with nothing left disappears from the slot", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("t", 0, 1)]);
    d.deleteOffsets("g", [{ topic: "t", partition: 0 }]);
    expect(d.finish().groups.has("g")).toBe(false);
  });
});

describe("transactional offsets", () => {
  test("staged offsets are invisible until commit; require_stable sees them as pending", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("t", 0, 10)]);
    d.stage("g", 7, [entry("t", 0, 20), entry("t", 1, 5)]);
    const s = d.finish();
    expect(s.committed("g", "t", 0)!.offset).toBe(10);
    expect(s.committed("g", "t", 1)).toBeUndefined();
    expect(s.hasPendingTransactionalOffset("g", "t", 0)).toBe(true);
    expect(s.hasPendingTransactionalOffset("g", "t", 2)).toBe(false);
    expect(s.hasOpenTransactions("g")).toBe(true);
    const d2 = s.draft();
    expect(d2.completeTransaction("g", 7, true)).toBe(2);
    const s2 = d2.finish();
    expect(s2.committed("g", "t", 0)!.offset).toBe(20);
    expect(s2.committed("g", "t", 1)!.offset).toBe(5);
    expect(s2.hasOpenTransactions("g")).toBe(false);
    // Idempotent: a second completion finds nothing.
    expect(s2.draft().completeTransaction("g", 7, true)).toBe(0);
  });

  test("abort discards what the producer staged, and only that", () => {
    const d = OffsetSlot.empty().draft();
    d.stage("g", 1, [entry("t", 0, 20)]);
    d.stage("g", 2, [entry("t", 1, 30)]);
    expect(d.completeTransaction("g", 1, false)).toBe(1);
    const s = d.finish();
    expect(s.committed("g", "t", 0)).toBeUndefined();
    expect(s.hasPendingTransactionalOffset("g", "t", 0)).toBe(false);
    expect(s.hasPendingTransactionalOffset("g", "t", 1)).toBe(true);
  });

  test("the most recent of a plain and a transactional commit wins (Apache compares record offsets)", () => {
    const d = OffsetSlot.empty().draft();
    d.stage("g", 1, [entry("t", 0, 20)]);
    d.commit("g", [entry("t", 0, 50)]); // committed after the stage
    d.completeTransaction("g", 1, true);
    expect(d.finish().committed("g", "t", 0)!.offset).toBe(50);

    const d2 = OffsetSlot.empty().draft();
    d2.commit("g", [entry("t", 0, 50)]);
    d2.stage("g", 1, [entry("t", 0, 20)]); // staged after the commit
    d2.completeTransaction("g", 1, true);
    expect(d2.finish().committed("g", "t", 0)!.offset).toBe(20);
  });

  test("deleting offsets or the group also drops what open transactions staged for them", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("t", 0, 1)]);
    d.stage("g", 1, [entry("t", 0, 2), entry("t", 1, 3)]);
    expect(d.deleteOffsets("g", [{ topic: "t", partition: 0 }])).toBe(1);
    let s = d.finish();
    expect(s.hasPendingTransactionalOffset("g", "t", 0)).toBe(false);
    expect(s.hasPendingTransactionalOffset("g", "t", 1)).toBe(true);
    const d2 = s.draft();
    d2.deleteGroup("g");
    s = d2.finish();
    expect(s.groups.has("g")).toBe(false);
    expect(s.approxBytes).toBe(0);
  });
});

describe("size bound", () => {
  test("commits beyond the slot bound are INVALID_COMMIT_OFFSET_SIZE; replacing an entry is not growth", () => {
    const d = OffsetSlot.empty().draft(2000);
    const codes = d.commit("g", [entry("t", 0, 1, { metadata: "x".repeat(200) }), entry("t", 1, 1, { metadata: "x".repeat(200) }), entry("t", 2, 1, { metadata: "x".repeat(200) })]);
    expect(codes).toEqual([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE]);
    expect(d.commit("g", [entry("t", 0, 2, { metadata: "x".repeat(200) })])).toEqual([ErrorCode.NONE]);
    const s = d.finish();
    expect(s.committed("g", "t", 0)!.offset).toBe(2);
    expect(s.committed("g", "t", 2)).toBeUndefined();
    // The estimate is consistent with a recount from scratch.
    expect(OffsetSlot.fromGroups(new Map(s.groups), s.nextSeq).approxBytes).toBe(s.approxBytes);
  });
});

describe("expiry (Apache's OffsetExpirationCondition)", () => {
  test("which base each kind of group uses", () => {
    const o = { offset: 1, leaderEpoch: -1, metadata: "", commitTimestampMs: 100, expireTimestampMs: null, seq: 0 };
    expect(expiryBase(undefined)!(o)).toBe(100);
    expect(expiryBase(view({ protocolType: null }))!(o)).toBe(100);
    expect(expiryBase(view({ state: "Empty", currentStateTimestampMs: 555 }))!(o)).toBe(555);
    expect(expiryBase(view({ state: "Empty", currentStateTimestampMs: null }))!(o)).toBe(100);
    expect(expiryBase(view({ state: "Stable" }))!(o)).toBe(100);
    expect(expiryBase(view({ state: "Stable", knowsSubscriptions: false }))).toBeNull();
    expect(expiryBase(view({ state: "PreparingRebalance" }))).toBeNull();
    expect(expiryBase(view({ state: "Stable", protocolType: "connect", usesConsumerGroupProtocol: false }))).toBeNull();
  });

  test("an Empty group's offsets expire retention after it became Empty; then the group has nothing left", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("t", 0, 1, { commitTimestampMs: 0 }), entry("u", 0, 1, { commitTimestampMs: 0 })]);
    const emptySince = 10 * DAY;
    const v = view({ state: "Empty", currentStateTimestampMs: emptySince });
    expect(d.expireGroupOffsets("g", v, emptySince + 7 * DAY - 1, 7 * DAY, 100)).toEqual({ expired: 0, allExpired: false });
    expect(d.expireGroupOffsets("g", v, emptySince + 7 * DAY, 7 * DAY, 100)).toEqual({ expired: 2, allExpired: true });
    expect(d.finish().groups.has("g")).toBe(false);
  });

  test("subscribed topics, pending transactional offsets and open transactions keep offsets and the group", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("subscribed", 0, 1, { commitTimestampMs: 0 }), entry("other", 0, 1, { commitTimestampMs: 0 }), entry("staged", 0, 1, { commitTimestampMs: 0 })]);
    d.stage("g", 9, [entry("staged", 0, 2)]);
    const v = view({ state: "Stable", isSubscribedToTopic: (t) => t === "subscribed" });
    expect(d.expireGroupOffsets("g", v, 30 * DAY, 7 * DAY, 100)).toEqual({ expired: 1, allExpired: false });
    const s = d.finish();
    expect(s.committed("g", "other", 0)).toBeUndefined();
    expect(s.committed("g", "subscribed", 0)).toBeDefined();
    expect(s.committed("g", "staged", 0)).toBeDefined();
  });

  test("an explicit expiry (v2-v4 retention time) wins over the retention", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", [entry("t", 0, 1, { commitTimestampMs: 0, expireTimestampMs: 500 })]);
    expect(d.expireGroupOffsets("g", view({ protocolType: null }), 499, 7 * DAY, 100).expired).toBe(0);
    expect(d.expireGroupOffsets("g", view({ protocolType: null }), 500, 7 * DAY, 100).expired).toBe(1);
  });

  test("bounded work: at most `limit` offsets per call", () => {
    const d = OffsetSlot.empty().draft();
    d.commit("g", Array.from({ length: 10 }, (_, i) => entry("t", i, 1, { commitTimestampMs: 0 })));
    const v = view({ protocolType: null });
    expect(d.expireGroupOffsets("g", v, 8 * DAY, 7 * DAY, 4)).toEqual({ expired: 4, allExpired: false });
    expect(d.expireGroupOffsets("g", v, 8 * DAY, 7 * DAY, 4)).toEqual({ expired: 4, allExpired: false });
    expect(d.expireGroupOffsets("g", v, 8 * DAY, 7 * DAY, 4)).toEqual({ expired: 2, allExpired: true });
  });

  test("a group without offsets has nothing left, unless a transaction is open", () => {
    const d = OffsetSlot.empty().draft();
    expect(d.expireGroupOffsets("none", view({}), 0, 1, 10)).toEqual({ expired: 0, allExpired: true });
    d.stage("g", 1, [entry("t", 0, 1)]);
    expect(d.expireGroupOffsets("g", view({}), 0, 1, 10)).toEqual({ expired: 0, allExpired: false });
  });
});
