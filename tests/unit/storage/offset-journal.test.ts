/**
 * The offset journal's records: the delta between two slots for every kind of change a draft makes, its
 * encoding through the state-file envelope, and its replay, which must give back exactly the slot after
 * the change; replay refuses records that do not continue the state; the parser refuses malformed ones.
 */
import { describe, expect, test } from "bun:test";
import type { PersistedGroup } from "../../../src/domain/groups/group-coordinator-state.ts";
import { OffsetSlot, type OffsetCommitEntry, type OffsetSlotDraft } from "../../../src/domain/groups/offsets.ts";
import {
  applyGroupDelta,
  bodyFromSlot,
  groupsFromBody,
  markPreviousJournalVersion,
  parseDeltaRecord,
  parseJournalRecord,
  ReplayError,
  slotDelta,
  type GroupDelta,
  type JournalRecord,
} from "../../../src/storage/offset-journal.ts";
import { OFFSETS_JOURNAL_FORMAT, OFFSETS_JOURNAL_VERSION } from "../../../src/storage/offset-store.ts";
import { decodeState, encodeState } from "../../../src/storage/state-file.ts";

const T = 1_700_000_000_000;

const entry = (topic: string, partition: number, offset: number, metadata = ""): OffsetCommitEntry => ({
  topic,
  partition,
  offset,
  leaderEpoch: 1,
  metadata,
  commitTimestampMs: T + offset,
  expireTimestampMs: null,
});

const record = (groupId: string, generationId = 1, state: PersistedGroup["state"] = "Stable"): PersistedGroup => ({
  groupId,
  protocolType: "consumer",
  protocolName: "range",
  generationId,
  leaderId: "m-1",
  state,
  stateTimestampMs: T,
});

function change(slot: OffsetSlot, fn: (d: OffsetSlotDraft) => void): OffsetSlot {
  const draft = slot.draft();
  fn(draft);
  return draft.finish();
}

/** What the journal does with a write: delta, encode, decode, replay onto the slot before. */
function replayed(before: OffsetSlot, after: OffsetSlot): { slot: OffsetSlot; deltas: GroupDelta[]; bytes: number } {
  const deltas = slotDelta(before, after);
  const line = encodeState(OFFSETS_JOURNAL_FORMAT, OFFSETS_JOURNAL_VERSION, { seq: 1, slot: 0, nextSeq: after.nextSeq, groups: deltas });
  const decoded = decodeState("journal", line, OFFSETS_JOURNAL_FORMAT, {
    current: OFFSETS_JOURNAL_VERSION,
    accepted: [OFFSETS_JOURNAL_VERSION - 1],
    migrate: markPreviousJournalVersion,
    parse: parseJournalRecord,
  }) as JournalRecord;
  if (decoded.kind !== "delta") throw new Error("expected a delta record");
  const groups = groupsFromBody(bodyFromSlot(0, 0, before));
  for (const delta of decoded.groups) applyGroupDelta(groups, delta);
  return { slot: OffsetSlot.fromGroups(groups, decoded.nextSeq), deltas, bytes: line.length };
}

/** Applies `fn`, checks that the replayed slot equals the changed one, and returns the deltas. */
function deltasOf(before: OffsetSlot, fn: (d: OffsetSlotDraft) => void): { after: OffsetSlot; deltas: GroupDelta[] } {
  const after = change(before, fn);
  const { slot, deltas } = replayed(before, after);
  expect(bodyFromSlot(0, 0, slot)).toEqual(bodyFromSlot(0, 0, after));
  expect(slot.approxBytes).toBe(after.approxBytes);
  return { after, deltas };
}

/** A slot with groups a and b, each with a record and offsets of t-0..2, and producer 7 staging in a. */
function base(): OffsetSlot {
  return change(OffsetSlot.empty(), (d) => {
    for (const g of ["a", "b"]) {
      d.setRecord(g, record(g));
      d.commit(g, [entry("t", 0, 10), entry("t", 1, 11), entry("t", 2, 12)]);
    }
    d.stage("a", 7, [entry("t", 0, 20), entry("u", 0, 30)]);
  });
}

describe("offset journal deltas", () => {
  test("a new group: its record and committed offsets, nothing of the other groups", () => {
    const { deltas } = deltasOf(base(), (d) => {
      d.setRecord("c", record("c"));
      d.commit("c", [entry("t", 1, 5), entry("t", 0, 4)]);
    });
    expect(deltas).toEqual([
      {
        groupId: "c",
        record: record("c"),
        commit: [
          {
            topic: "t",
            partitions: [
              { partition: 0, offset: 4, leaderEpoch: 1, metadata: "", commitTimestampMs: T + 4, expireTimestampMs: null, seq: 9 },
              { partition: 1, offset: 5, leaderEpoch: 1, metadata: "", commitTimestampMs: T + 5, expireTimestampMs: null, seq: 8 },
            ],
          },
        ],
      },
    ]);
  });

  test("committing one partition of a group carries that partition only", () => {
    const { deltas } = deltasOf(base(), (d) => d.commit("b", [entry("t", 1, 99, "m")]));
    expect(deltas).toEqual([
      { groupId: "b", commit: [{ topic: "t", partitions: [{ partition: 1, offset: 99, leaderEpoch: 1, metadata: "m", commitTimestampMs: T + 99, expireTimestampMs: null, seq: 8 }] }] },
    ]);
  });

  test("staging (TxnOffsetCommit) carries the staged offsets, a restage only the partition restaged", () => {
    const { after, deltas } = deltasOf(base(), (d) => d.stage("b", 9, [entry("t", 0, 40)]));
    expect(deltas).toEqual([
      { groupId: "b", stage: [{ producerId: 9, topics: [{ topic: "t", partitions: [{ partition: 0, offset: 40, leaderEpoch: 1, metadata: "", commitTimestampMs: T + 40, seq: 8 }] }] }] },
    ]);
    const again = deltasOf(after, (d) => d.stage("a", 7, [entry("u", 0, 31)]));
    expect(again.deltas).toEqual([
      { groupId: "a", stage: [{ producerId: 7, topics: [{ topic: "u", partitions: [{ partition: 0, offset: 31, leaderEpoch: 1, metadata: "", commitTimestampMs: T + 31, seq: 9 }] }] }] },
    ]);
  });

  test("a transaction's commit names the producer and the partitions whose staged offsets became committed", () => {
    const { after, deltas } = deltasOf(base(), (d) => d.completeTransaction("a", 7, true));
    expect(deltas).toEqual([{ groupId: "a", endTxn: [{ producerId: 7, committed: [{ topic: "t", partitions: [0] }, { topic: "u", partitions: [0] }] }] }]);
    expect(after.committed("a", "t", 0)!.offset).toBe(20);
    expect(after.committed("a", "u", 0)!.offset).toBe(30);
  });

  test("a plain commit newer than the staged offset wins at the transaction's commit, and the delta says so", () => {
    const committedLater = change(base(), (d) => d.commit("a", [entry("t", 0, 50)]));
    const { after, deltas } = deltasOf(committedLater, (d) => d.completeTransaction("a", 7, true));
    expect(deltas).toEqual([{ groupId: "a", endTxn: [{ producerId: 7, committed: [{ topic: "u", partitions: [0] }] }] }]);
    expect(after.committed("a", "t", 0)!.offset).toBe(50);
  });

  test("a plain commit and the transaction's commit in one write: each partition ends as the draft has it", () => {
    const { after, deltas } = deltasOf(base(), (d) => {
      d.completeTransaction("a", 7, true);
      d.commit("a", [entry("t", 0, 60)]);
    });
    expect(after.committed("a", "t", 0)!.offset).toBe(60);
    expect(deltas[0]!.endTxn).toEqual([{ producerId: 7, committed: [{ topic: "u", partitions: [0] }] }]);
    expect(deltas[0]!.commit![0]!.partitions.map((p) => p.offset)).toEqual([60]);
  });

  test("an abort discards the staged offsets: the producer with nothing committed", () => {
    const { after, deltas } = deltasOf(base(), (d) => d.completeTransaction("a", 7, false));
    expect(deltas).toEqual([{ groupId: "a", endTxn: [{ producerId: 7, committed: [] }] }]);
    expect(after.hasOpenTransactions("a")).toBe(false);
    expect(after.committed("a", "t", 0)!.offset).toBe(10);
  });

  test("a transaction that ends and a new one of the same producer staged in the same write", () => {
    const { after } = deltasOf(base(), (d) => {
      d.completeTransaction("a", 7, true);
      d.stage("a", 7, [entry("t", 2, 70)]);
    });
    expect(after.committed("a", "t", 0)!.offset).toBe(20);
    expect(after.stagedOf("a", 7).get("t")!.get(2)!.offset).toBe(70);
  });

  test("deleting offsets removes committed and staged offsets of those partitions", () => {
    const staged = change(base(), (d) => d.stage("a", 8, [entry("t", 1, 80), entry("t", 2, 81)]));
    const { deltas } = deltasOf(staged, (d) => d.deleteOffsets("a", [{ topic: "t", partition: 1 }, { topic: "u", partition: 0 }]));
    expect(deltas).toEqual([
      {
        groupId: "a",
        uncommit: [{ topic: "t", partitions: [1] }],
        unstage: [
          { producerId: 7, topics: [{ topic: "u", partitions: [0] }] },
          { producerId: 8, topics: [{ topic: "t", partitions: [1] }] },
        ],
      },
    ]);
    // Removing a producer's last staged offset ends its staged set: a discard.
    const { deltas: last } = deltasOf(staged, (d) => d.deleteOffsets("a", [{ topic: "t", partition: 0 }, { topic: "u", partition: 0 }]));
    expect(last).toEqual([{ groupId: "a", uncommit: [{ topic: "t", partitions: [0] }], endTxn: [{ producerId: 7, committed: [] }] }]);
  });

  test("expiring offsets removes them", () => {
    const { deltas } = deltasOf(base(), (d) => d.expireGroupOffsets("b", undefined, T + 1_000_000, 1000, 2));
    expect(deltas).toEqual([{ groupId: "b", uncommit: [{ topic: "t", partitions: [0, 1] }] }]);
  });

  test("deleting a group is one small entry; deleting all its offsets and its record is the same", () => {
    expect(deltasOf(base(), (d) => d.deleteGroup("b")).deltas).toEqual([{ groupId: "b", deleted: true }]);
    const { deltas } = deltasOf(base(), (d) => {
      d.setRecord("b", null);
      d.deleteOffsets("b", [0, 1, 2].map((partition) => ({ topic: "t", partition })));
    });
    expect(deltas).toEqual([{ groupId: "b", deleted: true }]);
  });

  test("a group deleted and created again in one write ends as the draft has it", () => {
    const { after } = deltasOf(base(), (d) => {
      d.deleteGroup("a");
      d.commit("a", [entry("v", 3, 1)]);
    });
    expect([...after.committedOfGroup("a").keys()]).toEqual(["v"]);
    expect(after.hasOpenTransactions("a")).toBe(false);
  });

  test("group records: a change is written, the same record again is not, a removed record is null", () => {
    expect(deltasOf(base(), (d) => d.setRecord("a", record("a", 2, "PreparingRebalance"))).deltas).toEqual([
      { groupId: "a", record: record("a", 2, "PreparingRebalance") },
    ]);
    expect(deltasOf(base(), (d) => d.setRecord("a", { ...record("a") })).deltas).toEqual([]);
    expect(deltasOf(base(), (d) => d.setRecord("a", null)).deltas).toEqual([{ groupId: "a", record: null }]);
  });

  test("a group created and dropped again in one write, and an empty commit, change nothing", () => {
    expect(deltasOf(base(), (d) => d.commit("new", [])).deltas).toEqual([]);
    expect(deltasOf(base(), (d) => d.completeTransaction("b", 7, true)).deltas).toEqual([]);
  });

  test("a record's size follows what changed, not the slot: one staged offset in a slot of 100 x 100", () => {
    const big = change(OffsetSlot.empty(), (d) => {
      for (let g = 0; g < 100; g++) d.commit(`group-${g}`, Array.from({ length: 100 }, (_, p) => entry("input-topic", p, p)));
    });
    const staged = change(big, (d) => d.stage("group-42", 1234, [entry("input-topic", 7, 1000)]));
    expect(replayed(big, staged).bytes).toBeLessThan(400);
    const committed = change(staged, (d) => d.completeTransaction("group-42", 1234, true));
    expect(replayed(staged, committed).bytes).toBeLessThan(250);
    // And the replay of the big slot's own creation is the whole of it.
    expect(replayed(OffsetSlot.empty(), big).bytes).toBeGreaterThan(100 * 100 * 100);
  });

  test("random sequences of every kind of change replay to the same slot, write after write", () => {
    // xorshift32: a fixed, reproducible sequence.
    let seed = 0x2545f491;
    const random = (n: number) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const groupIds = ["g0", "g1", "g2", "g3"];
    let slot = OffsetSlot.empty();
    const kinds = new Set<string>();
    for (let write = 0; write < 400; write++) {
      const after = change(slot, (d) => {
        for (let op = 1 + random(4); op > 0; op--) {
          const g = groupIds[random(groupIds.length)]!;
          const tp = () => ({ topic: ["t", "u"][random(2)]!, partition: random(3) });
          const e = () => {
            const { topic, partition } = tp();
            return entry(topic, partition, random(1000), random(3) === 0 ? "meta" : "");
          };
          switch (random(9)) {
            case 0:
            case 1:
              d.commit(g, [e(), e()]);
              break;
            case 2:
            case 3:
              d.stage(g, 1 + random(3), [e()]);
              break;
            case 4:
              d.completeTransaction(g, 1 + random(3), random(2) === 0);
              break;
            case 5:
              d.deleteOffsets(g, [tp(), tp()]);
              break;
            case 6:
              d.setRecord(g, random(4) === 0 ? null : record(g, random(3)));
              break;
            case 7:
              if (random(4) === 0) d.deleteGroup(g);
              break;
            default:
              d.expireGroupOffsets(g, undefined, T + 600, 100, 1 + random(3));
          }
        }
      });
      const { slot: back, deltas } = replayed(slot, after);
      expect(bodyFromSlot(0, 0, back)).toEqual(bodyFromSlot(0, 0, after));
      for (const delta of deltas) {
        for (const key of Object.keys(delta)) kinds.add(key);
        if (delta.endTxn?.some((end) => end.committed.length > 0)) kinds.add("endTxn with commits");
      }
      slot = after;
    }
    // Every kind of change came up (the sequence is fixed by its seed).
    expect([...kinds].sort()).toEqual(["commit", "deleted", "endTxn", "endTxn with commits", "groupId", "record", "stage", "uncommit", "unstage"]);
  });
});

test("replay: removing every offset a producer staged leaves no open transaction", () => {
  const groups = groupsFromBody(bodyFromSlot(0, 0, base()));
  applyGroupDelta(groups, { groupId: "a", unstage: [{ producerId: 7, topics: [{ topic: "t", partitions: [0] }, { topic: "u", partitions: [0] }] }] });
  expect(OffsetSlot.fromGroups(groups, 8).hasOpenTransactions("a")).toBe(false);
});

describe("offset journal replay refuses records that do not continue the state", () => {
  const refusal = (delta: GroupDelta) => {
    const groups = groupsFromBody(bodyFromSlot(0, 0, base()));
    try {
      applyGroupDelta(groups, delta);
    } catch (error) {
      expect(error).toBeInstanceOf(ReplayError);
      return (error as Error).message;
    }
    throw new Error("the delta was applied");
  };

  test.each<[string, GroupDelta, RegExp]>([
    ["deleting a group that does not exist", { groupId: "x", deleted: true }, /deletes group "x", which does not exist/],
    ["ending a transaction that staged nothing", { groupId: "b", endTxn: [{ producerId: 7, committed: [] }] }, /producer 7 .* staged nothing/],
    ["committing an offset the producer did not stage", { groupId: "a", endTxn: [{ producerId: 7, committed: [{ topic: "t", partitions: [2] }] }] }, /did not stage/],
    ["removing a committed offset that does not exist", { groupId: "a", uncommit: [{ topic: "t", partitions: [5] }] }, /t-5, which does not exist/],
    ["removing a staged offset that does not exist", { groupId: "a", unstage: [{ producerId: 7, topics: [{ topic: "t", partitions: [1] }] }] }, /staged for .* t-1, which does not exist/],
  ])("%s", (_, delta, pattern) => {
    expect(refusal(delta)).toMatch(pattern);
  });
});

describe("offset journal record parsing", () => {
  const valid = { seq: 1, slot: 0, nextSeq: 10, groups: [{ groupId: "g", uncommit: [{ topic: "t", partitions: [0] }] }] };

  test("a valid record parses to itself", () => {
    expect(parseDeltaRecord(valid)).toEqual(valid);
  });

  test.each<[string, unknown, RegExp]>([
    ["an unknown field", { ...valid, groups: [{ groupId: "g", whatever: 1 }] }, /whatever is not a field/],
    ["a delta that changes nothing", { ...valid, groups: [{ groupId: "g" }] }, /changes nothing/],
    ["an empty list", { ...valid, groups: [{ groupId: "g", commit: [] }] }, /commit is empty/],
    ["a topic without partitions", { ...valid, groups: [{ groupId: "g", uncommit: [{ topic: "t", partitions: [] }] }] }, /partitions is empty/],
    ["a deletion with changes", { ...valid, groups: [{ groupId: "g", deleted: true, record: null }] }, /deletes the group and changes it too/],
    ["a group twice", { ...valid, groups: [valid.groups[0], valid.groups[0]] }, /appears twice/],
    ["an offset's seq at nextSeq", { ...valid, groups: [{ groupId: "g", commit: [{ topic: "t", partitions: [{ partition: 0, offset: 1, leaderEpoch: -1, metadata: "", commitTimestampMs: T, expireTimestampMs: null, seq: 10 }] }] }] }, /seq 10 is not below nextSeq 10/],
    ["another group's record", { ...valid, groups: [{ groupId: "g", record: record("h") }] }, /record of group "h"/],
    ["a negative partition", { ...valid, groups: [{ groupId: "g", uncommit: [{ topic: "t", partitions: [-1] }] }] }, /not a partition number/],
    ["seq 0", { ...valid, seq: 0 }, /seq is not an integer >= 1/],
  ])("refuses %s", (_, body, pattern) => {
    expect(() => parseDeltaRecord(body)).toThrow(pattern);
  });
});
