/**
 * The fetch-session rules (domain/fetch-session.ts), one transition at a time, on a manual clock: full,
 * sessionless and incremental requests, the session errors, the incremental response rule, the order
 * partitions are read in, eviction and its preferences, the per-connection bound, the counters.
 */
import { describe, expect, test } from "bun:test";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import {
  FINAL_EPOCH,
  FetchSessionCache,
  INITIAL_EPOCH,
  nextEpoch,
  type FetchContext,
  type FetchPartitionOutcome,
  type FetchPartitionRequest,
  type FetchSessionOptions,
  type FetchSessionRequest,
} from "../../../src/domain/fetch-session.ts";

const ZERO = "00000000-0000-0000-0000-000000000000";
const ID_A = "0b7f0a8e-0000-4000-8000-00000000000a";

function part(topic: string, partition: number, fetchOffset = 0, topicId = ZERO): FetchPartitionRequest {
  return { topic, topicId, partition, fetchOffset, partitionMaxBytes: 1024, logStartOffset: -1, currentLeaderEpoch: -1, lastFetchedEpoch: -1 };
}

function req(over: Partial<FetchSessionRequest>): FetchSessionRequest {
  return { sessionId: 0, epoch: INITIAL_EPOCH, usesTopicIds: false, privileged: false, connectionId: 1, partitions: [], forgotten: [], ...over };
}

function outcome(over: Partial<FetchPartitionOutcome> = {}): FetchPartitionOutcome {
  return { errorCode: ErrorCode.NONE, highWatermark: 10, lastStableOffset: 10, logStartOffset: 0, recordsBytes: 0, ...over };
}

/** A cache whose session ids count up from 1 (the random source walks a sequence). */
function cache(over: Partial<FetchSessionOptions> = {}): FetchSessionCache {
  let n = 0;
  const limit = over.sessionIdLimit ?? 1 << 20;
  return new FetchSessionCache({
    slots: 10,
    evictionMs: 1000,
    sessionsPerConnectionMax: 8,
    sessionIdLimit: limit,
    random: () => (n++ % (limit - 1)) / (limit - 1),
    ...over,
  });
}

/** Opens a session over `partitions` with a full request; returns its id. */
function open(c: FetchSessionCache, partitions: FetchPartitionRequest[], nowMs: number, over: Partial<FetchSessionRequest> = {}): number {
  const ctx = c.newContext(req({ partitions, ...over }), nowMs);
  if (ctx.kind !== "full") throw new Error(`expected a full context, got ${ctx.kind}`);
  return c.completeFull(ctx, partitions.map(() => outcome()), nowMs);
}

function incremental(ctx: FetchContext): Extract<FetchContext, { kind: "incremental" }> {
  if (ctx.kind !== "incremental") throw new Error(`expected an incremental context, got ${JSON.stringify(ctx)}`);
  return ctx;
}

const names = (ps: FetchPartitionRequest[]) => ps.map((p) => `${p.topic || p.topicId}-${p.partition}@${p.fetchOffset}`);

describe("epochs", () => {
  test("nextEpoch counts up, wraps to 1 after the largest int32 and keeps FINAL", () => {
    expect(nextEpoch(0)).toBe(1);
    expect(nextEpoch(41)).toBe(42);
    expect(nextEpoch(0x7fffffff)).toBe(1);
    expect(nextEpoch(FINAL_EPOCH)).toBe(FINAL_EPOCH);
  });
});

describe("full requests", () => {
  test("INITIAL creates a session remembering every partition; its first incremental epoch is 1", () => {
    const c = cache();
    const id = open(c, [part("a", 0), part("a", 1)], 0);
    expect(id).toBeGreaterThan(0);
    const session = c.get(id)!;
    expect(session.epoch).toBe(1);
    expect([...session.partitions.keys()]).toHaveLength(2);
    expect(c.stats()).toMatchObject({ sessions: 1, partitions: 2, sessionsCreated: 1, fullRequests: 1 });
  });

  test("FINAL is sessionless and creates nothing", () => {
    const c = cache();
    const ctx = c.newContext(req({ epoch: FINAL_EPOCH, partitions: [part("a", 0)] }), 0);
    expect(ctx.kind).toBe("sessionless");
    expect(c.stats()).toMatchObject({ sessions: 0, sessionlessRequests: 1 });
  });

  test("a full request naming a session closes it, FINAL and INITIAL alike", () => {
    const c = cache();
    const first = open(c, [part("a", 0)], 0);
    const ctx = c.newContext(req({ sessionId: first, epoch: FINAL_EPOCH, partitions: [part("a", 0)] }), 1);
    expect(ctx.kind).toBe("sessionless");
    expect(c.get(first)).toBeUndefined();

    const second = open(c, [part("a", 0)], 2);
    const third = open(c, [part("a", 0)], 3, { sessionId: second });
    expect(third).not.toBe(second);
    expect(c.get(second)).toBeUndefined();
    expect(c.stats().sessions).toBe(1);
  });

  test("a full request naming an unknown session is still served in full", () => {
    const c = cache();
    expect(c.newContext(req({ sessionId: 999, partitions: [part("a", 0)] }), 0).kind).toBe("full");
  });

  test("no slots: every full request is sessionless", () => {
    const c = cache({ slots: 0 });
    expect(c.newContext(req({ partitions: [part("a", 0)] }), 0).kind).toBe("sessionless");
  });
});

describe("incremental requests", () => {
  test("an unknown session is FETCH_SESSION_ID_NOT_FOUND, also for id 0 with a positive epoch", () => {
    const c = cache();
    expect(c.newContext(req({ sessionId: 77, epoch: 1 }), 0)).toEqual({ kind: "error", errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND });
    expect(c.newContext(req({ sessionId: 0, epoch: 3 }), 0)).toEqual({ kind: "error", errorCode: ErrorCode.FETCH_SESSION_ID_NOT_FOUND });
    expect(c.stats().sessionErrors).toBe(2);
  });

  test("a wrong epoch is INVALID_FETCH_SESSION_EPOCH and leaves the session as it was", () => {
    const c = cache();
    const id = open(c, [part("a", 0)], 0);
    expect(c.newContext(req({ sessionId: id, epoch: 2 }), 1)).toEqual({ kind: "error", errorCode: ErrorCode.INVALID_FETCH_SESSION_EPOCH });
    expect(c.get(id)!.epoch).toBe(1);
    expect(c.newContext(req({ sessionId: id, epoch: 1 }), 1).kind).toBe("incremental");
    expect(c.get(id)!.epoch).toBe(2);
    // The same epoch twice (a duplicate request) is refused the second time.
    expect(c.newContext(req({ sessionId: id, epoch: 1 }), 1)).toEqual({ kind: "error", errorCode: ErrorCode.INVALID_FETCH_SESSION_EPOCH });
  });

  test("topic ids against names is FETCH_SESSION_TOPIC_ID_ERROR, both ways", () => {
    const c = cache();
    const byName = open(c, [part("a", 0)], 0);
    const byId = open(c, [part("", 0, 0, ID_A)], 0, { usesTopicIds: true, connectionId: 2 });
    expect(c.newContext(req({ sessionId: byName, epoch: 1, usesTopicIds: true }), 1)).toEqual({ kind: "error", errorCode: ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR });
    expect(c.newContext(req({ sessionId: byId, epoch: 1, usesTopicIds: false }), 1)).toEqual({ kind: "error", errorCode: ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR });
  });

  test("listed partitions are added or updated, forgotten ones removed, the rest keep their fetch offsets", () => {
    const c = cache();
    const id = open(c, [part("a", 0, 5), part("a", 1, 7), part("b", 0, 9)], 0);
    const ctx = incremental(
      c.newContext(req({ sessionId: id, epoch: 1, partitions: [part("a", 1, 8), part("c", 0, 1)], forgotten: [{ topic: "b", topicId: ZERO, partition: 0 }] }), 1),
    );
    expect(names(ctx.partitions)).toEqual(["a-0@5", "a-1@8", "c-0@1"]);
    expect(c.stats().partitions).toBe(3);
    expect(c.stats().incrementalRequests).toBe(1);
  });

  test("sessions by topic id key their partitions by id", () => {
    const c = cache();
    const id = open(c, [part("", 0, 3, ID_A)], 0, { usesTopicIds: true });
    const ctx = incremental(c.newContext(req({ sessionId: id, epoch: 1, usesTopicIds: true, partitions: [part("", 0, 4, ID_A)] }), 1));
    expect(names(ctx.partitions)).toEqual([`${ID_A}-0@4`]);
    const forgot = c.newContext(
      req({ sessionId: id, epoch: 2, usesTopicIds: true, forgotten: [{ topic: "", topicId: ID_A, partition: 0 }], partitions: [] }),
      2,
    );
    // Nothing left: the session is closed and the request answered without one.
    expect(forgot).toEqual({ kind: "sessionless", partitions: [] });
    expect(c.get(id)).toBeUndefined();
  });

  test("a session left empty is closed and its request answered sessionless over what it listed", () => {
    const c = cache();
    const id = open(c, [part("a", 0)], 0);
    const ctx = c.newContext(req({ sessionId: id, epoch: 1, forgotten: [{ topic: "a", topicId: ZERO, partition: 0 }] }), 1);
    expect(ctx.kind).toBe("sessionless");
    expect(c.stats()).toMatchObject({ sessions: 0, partitions: 0 });
  });
});

describe("the incremental response rule", () => {
  function setUp() {
    const c = cache();
    const partitions = [part("a", 0), part("a", 1), part("a", 2), part("a", 3), part("a", 4)];
    const ctx = c.newContext(req({ partitions }), 0);
    if (ctx.kind !== "full") throw new Error("full expected");
    const id = c.completeFull(ctx, partitions.map(() => outcome()), 0);
    return { c, id };
  }

  test("only partitions with records, an error, or a changed high watermark, LSO or log start are sent", () => {
    const { c, id } = setUp();
    const ctx = incremental(c.newContext(req({ sessionId: id, epoch: 1 }), 1));
    const answer = c.completeIncremental(ctx, [
      outcome(),
      outcome({ recordsBytes: 100 }),
      outcome({ highWatermark: 11, lastStableOffset: 11 }),
      outcome({ lastStableOffset: 9 }),
      outcome({ logStartOffset: 3 }),
    ]);
    expect(answer).toEqual({ kind: "ok", sessionId: id, include: [false, true, true, true, true] });

    // What was sent is remembered: the same answers again carry only the records.
    const next = incremental(c.newContext(req({ sessionId: id, epoch: 2 }), 2));
    const byIndex = new Map(next.partitions.map((p, i) => [p.partition, i]));
    const outcomes = next.partitions.map((p) =>
      [outcome(), outcome({ recordsBytes: 100 }), outcome({ highWatermark: 11, lastStableOffset: 11 }), outcome({ lastStableOffset: 9 }), outcome({ logStartOffset: 3 })][p.partition]!,
    );
    const again = c.completeIncremental(next, outcomes);
    if (again.kind !== "ok") throw new Error("ok expected");
    expect(again.include[byIndex.get(1)!]).toBe(true);
    expect([0, 2, 3, 4].map((p) => again.include[byIndex.get(p)!])).toEqual([false, false, false, false]);
  });

  test("an error is always sent, and the partition is sent again once the error is gone", () => {
    const { c, id } = setUp();
    const first = incremental(c.newContext(req({ sessionId: id, epoch: 1 }), 1));
    const failed = c.completeIncremental(first, [outcome({ errorCode: ErrorCode.OFFSET_OUT_OF_RANGE }), outcome(), outcome(), outcome(), outcome()]);
    expect(failed.kind === "ok" && failed.include).toEqual([true, false, false, false, false]);
    const second = incremental(c.newContext(req({ sessionId: id, epoch: 2 }), 2));
    const healed = c.completeIncremental(second, second.partitions.map(() => outcome()));
    expect(healed.kind === "ok" && healed.include[0]).toBe(true);
    expect(healed.kind === "ok" && healed.include.slice(1)).toEqual([false, false, false, false]);
  });

  test("a partition added by an incremental request is sent once even without news", () => {
    const { c, id } = setUp();
    const ctx = incremental(c.newContext(req({ sessionId: id, epoch: 1, partitions: [part("z", 0)] }), 1));
    expect(names(ctx.partitions).at(-1)).toBe("z-0@0");
    const answer = c.completeIncremental(ctx, ctx.partitions.map(() => outcome()));
    expect(answer.kind === "ok" && answer.include).toEqual([false, false, false, false, false, true]);
  });

  test("partitions that returned records move to the end of the reading order", () => {
    const { c, id } = setUp();
    const ctx = incremental(c.newContext(req({ sessionId: id, epoch: 1 }), 1));
    c.completeIncremental(ctx, [outcome({ recordsBytes: 1 }), outcome(), outcome({ recordsBytes: 1 }), outcome(), outcome()]);
    const next = incremental(c.newContext(req({ sessionId: id, epoch: 2 }), 2));
    expect(next.partitions.map((p) => p.partition)).toEqual([1, 3, 4, 0, 2]);
  });

  test("an answer whose session moved on meanwhile is INVALID_FETCH_SESSION_EPOCH with the session id", () => {
    const { c, id } = setUp();
    const slow = incremental(c.newContext(req({ sessionId: id, epoch: 1 }), 1));
    const fast = incremental(c.newContext(req({ sessionId: id, epoch: 2 }), 2));
    expect(c.completeIncremental(fast, fast.partitions.map(() => outcome())).kind).toBe("ok");
    expect(c.completeIncremental(slow, slow.partitions.map(() => outcome()))).toEqual({
      kind: "error",
      errorCode: ErrorCode.INVALID_FETCH_SESSION_EPOCH,
      sessionId: id,
    });
  });

  test("a full request remembers an errored partition without its offsets, so its next answer is sent", () => {
    const c = cache();
    const partitions = [part("a", 0)];
    const ctx = c.newContext(req({ partitions }), 0);
    if (ctx.kind !== "full") throw new Error("full expected");
    const id = c.completeFull(ctx, [outcome({ errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER })], 0);
    const next = incremental(c.newContext(req({ sessionId: id, epoch: 1 }), 1));
    expect(c.completeIncremental(next, [outcome()])).toEqual({ kind: "ok", sessionId: id, include: [true] });
  });
});

describe("eviction", () => {
  test("a full cache replaces a session unused for longer than evictionMs, the stalest first", () => {
    const c = cache({ slots: 2, evictionMs: 1000 });
    const a = open(c, [part("a", 0)], 0, { connectionId: 1 });
    const b = open(c, [part("a", 0)], 10, { connectionId: 2 });
    // Within evictionMs of both, a new session of the same size finds no room.
    expect(open(c, [part("a", 0)], 500, { connectionId: 3 })).toBe(0);
    const d = open(c, [part("a", 0)], 1001, { connectionId: 3 });
    expect(d).toBeGreaterThan(0);
    expect(c.get(a)).toBeUndefined();
    expect(c.get(b)).toBeDefined();
    expect(c.stats().evictions).toBe(1);
  });

  test("a larger session replaces the smallest of those created more than evictionMs ago", () => {
    const c = cache({ slots: 2, evictionMs: 1000 });
    const small = open(c, [part("a", 0)], 0, { connectionId: 1 });
    const big = open(c, [part("a", 0), part("a", 1), part("a", 2)], 0, { connectionId: 2 });
    // Used recently (not stale), but now older than evictionMs when used.
    incremental(c.newContext(req({ sessionId: small, epoch: 1 }), 1500));
    incremental(c.newContext(req({ sessionId: big, epoch: 1 }), 1500));
    // A session of the same size as the smallest is not worth more: no room.
    expect(open(c, [part("b", 0)], 1600, { connectionId: 3 })).toBe(0);
    const two = open(c, [part("b", 0), part("b", 1)], 1600, { connectionId: 3 });
    expect(two).toBeGreaterThan(0);
    expect(c.get(small)).toBeUndefined();
    expect(c.get(big)).toBeDefined();
  });

  test("a young session is safe from a larger consumer session", () => {
    const c = cache({ slots: 1, evictionMs: 1000 });
    const young = open(c, [part("a", 0)], 0, { connectionId: 1 });
    incremental(c.newContext(req({ sessionId: young, epoch: 1 }), 900));
    expect(open(c, [part("b", 0), part("b", 1), part("b", 2)], 950, { connectionId: 2 })).toBe(0);
    expect(c.get(young)).toBeDefined();
  });

  test("a follower's session replaces a young consumer session; a consumer's never replaces a young follower's", () => {
    const c = cache({ slots: 1, evictionMs: 1000 });
    const consumer = open(c, [part("a", 0), part("a", 1)], 0, { connectionId: 1 });
    const follower = open(c, [part("a", 0)], 10, { connectionId: 2, privileged: true });
    expect(follower).toBeGreaterThan(0);
    expect(c.get(consumer)).toBeUndefined();
    expect(open(c, [part("a", 0), part("a", 1), part("a", 2)], 20, { connectionId: 3 })).toBe(0);
    expect(c.get(follower)).toBeDefined();
  });

  test("whether a session may be replaced is decided when it is used, as Apache does", () => {
    const c = cache({ slots: 1, evictionMs: 1000 });
    const s = open(c, [part("a", 0)], 0, { connectionId: 1 });
    incremental(c.newContext(req({ sessionId: s, epoch: 1 }), 900));
    // Created 1100 ms ago now, but it was young when last used (at 900): not replaceable by size.
    expect(open(c, [part("b", 0), part("b", 1)], 1100, { connectionId: 2 })).toBe(0);
    incremental(c.newContext(req({ sessionId: s, epoch: 2 }), 1200));
    expect(open(c, [part("b", 0), part("b", 1)], 1300, { connectionId: 2 })).toBeGreaterThan(0);
  });

  test("one connection holds at most sessionsPerConnectionMax sessions: its oldest goes first", () => {
    const c = cache({ slots: 10, sessionsPerConnectionMax: 2 });
    const first = open(c, [part("a", 0)], 0, { connectionId: 7 });
    const second = open(c, [part("a", 0)], 1, { connectionId: 7 });
    const other = open(c, [part("a", 0)], 1, { connectionId: 8 });
    const third = open(c, [part("a", 0)], 2, { connectionId: 7 });
    expect(c.get(first)).toBeUndefined();
    expect([second, third, other].every((id) => c.get(id) !== undefined)).toBe(true);
    expect(c.stats()).toMatchObject({ sessions: 3, evictions: 1 });
  });

  test("session ids are unique and never 0, even when the random source repeats itself", () => {
    let calls = 0;
    const values = [0, 0, 0, 0.5, 0.5, 0.99];
    const c = new FetchSessionCache({ slots: 3, evictionMs: 1000, sessionsPerConnectionMax: 8, sessionIdLimit: 8, random: () => values[calls++ % values.length]! });
    const ids = [open(c, [part("a", 0)], 0, { connectionId: 1 }), open(c, [part("a", 0)], 0, { connectionId: 2 }), open(c, [part("a", 0)], 0, { connectionId: 3 })];
    expect(new Set(ids).size).toBe(3);
    expect(ids.every((id) => id >= 1 && id < 8)).toBe(true);
  });

  test("bad options are refused", () => {
    expect(() => cache({ slots: -1 })).toThrow(RangeError);
    expect(() => cache({ slots: 10, sessionIdLimit: 10 })).toThrow(RangeError);
    expect(() => cache({ sessionsPerConnectionMax: 0 })).toThrow(RangeError);
  });
});
