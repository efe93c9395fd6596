import { describe, expect, test } from "bun:test";
import {
  NO_TXN_GROUPS,
  NO_TXN_PARTITIONS,
  PERSISTED_STATES,
  PRODUCER_EPOCH_MAX,
  TXN_STATES,
  VALID_PREVIOUS_STATES,
  blankTxnEntry,
  containsPartition,
  includesAllPartitions,
  isEpochExhausted,
  mergePartitions,
  parseTxnEntry,
  toTopicPartitions,
  transition,
  type TxnChanges,
  type TxnEntry,
  type TxnState,
} from "../../../../src/domain/txn/txn-state.ts";
import { txnEntryIn } from "../../../support/txn-entry.ts";

const T0 = 1_700_000_000_000;

function entryIn(state: TxnState, overrides: Partial<TxnEntry> = {}): TxnEntry {
  return txnEntryIn(state, { producerId: 1000, ongoingSinceMs: state === "Empty" ? -1 : T0, updatedMs: T0, ...overrides });
}

/** Changes that satisfy the invariants of each target state, from an entry built by entryIn. */
function validChangesFor(to: TxnState, from: TxnEntry): TxnChanges {
  switch (to) {
    case "Empty":
      return { epoch: from.epoch + 1, lastEpoch: -1, partitions: [], groups: [], ongoingSinceMs: -1 };
    case "Ongoing":
      return { ongoingSinceMs: from.ongoingSinceMs >= 0 ? from.ongoingSinceMs : T0 };
    case "PrepareEpochFence":
      return { epoch: from.epoch + 1, lastEpoch: -1 };
    case "CompleteCommit":
    case "CompleteAbort":
    case "Dead":
      return { partitions: [], groups: [] };
    default:
      return {};
  }
}

describe("the transition table", () => {
  test("is Apache's validPreviousStates for transaction version 1", () => {
    expect(VALID_PREVIOUS_STATES).toEqual({
      Empty: ["Empty", "CompleteCommit", "CompleteAbort"],
      Ongoing: ["Ongoing", "Empty", "CompleteCommit", "CompleteAbort"],
      PrepareCommit: ["Ongoing"],
      PrepareAbort: ["Ongoing", "PrepareEpochFence"],
      CompleteCommit: ["PrepareCommit"],
      CompleteAbort: ["PrepareAbort"],
      PrepareEpochFence: ["Ongoing"],
      Dead: ["Empty", "CompleteCommit", "CompleteAbort"],
    });
  });

  for (const from of TXN_STATES) {
    for (const to of TXN_STATES) {
      const allowed = VALID_PREVIOUS_STATES[to].includes(from);
      test(`${from} -> ${to} is ${allowed ? "applied" : "refused"}`, () => {
        const entry = entryIn(from);
        const result = transition(entry, to, validChangesFor(to, entry), T0 + 5);
        expect(result.ok).toBe(allowed);
        if (result.ok) {
          expect(result.entry.state).toBe(to);
          expect(result.entry.updatedMs).toBe(T0 + 5);
        } else {
          expect(result.from).toBe(from);
          expect(result.to).toBe(to);
          expect(result.reason).toContain("cannot follow");
        }
        // The input is never modified.
        expect(entry).toEqual(entryIn(from));
      });
    }
  }
});

describe("transition invariants", () => {
  test("the blank entry becomes Empty at epoch 0 (first allocation)", () => {
    const blank = blankTxnEntry("tx", 7, 30_000, T0);
    expect(blank.state).toBe("Empty");
    expect(blank.epoch).toBe(-1);
    const result = transition(blank, "Empty", { epoch: 0 }, T0);
    expect(result.ok).toBe(true);
  });

  test("Empty accepts a retry (same epoch), a bump by one, or epoch 0 with a new producer id; nothing else", () => {
    const entry = entryIn("Empty");
    expect(transition(entry, "Empty", {}, T0).ok).toBe(true);
    expect(transition(entry, "Empty", { epoch: 6 }, T0).ok).toBe(true);
    expect(transition(entry, "Empty", { producerId: 2000, epoch: 0 }, T0).ok).toBe(true);
    expect(transition(entry, "Empty", { epoch: 7 }, T0).ok).toBe(false);
    expect(transition(entry, "Empty", { epoch: 4 }, T0).ok).toBe(false);
    expect(transition(entry, "Empty", { producerId: 2000, epoch: 3 }, T0).ok).toBe(false);
  });

  test("Empty carries no partitions, groups or transaction start", () => {
    const entry = entryIn("CompleteCommit");
    expect(transition(entry, "Empty", { epoch: 6, ongoingSinceMs: -1, partitions: [{ topic: "t", partitions: [0] }] }, T0).ok).toBe(false);
    expect(transition(entry, "Empty", { epoch: 6, ongoingSinceMs: -1, groups: ["g"] }, T0).ok).toBe(false);
    expect(transition(entry, "Empty", { epoch: 6 }, T0).ok).toBe(false); // start kept from CompleteCommit
    expect(transition(entry, "Empty", { epoch: 6, ongoingSinceMs: -1 }, T0).ok).toBe(true);
  });

  test("PrepareEpochFence bumps the epoch by exactly one and changes nothing else", () => {
    const entry = entryIn("Ongoing");
    expect(transition(entry, "PrepareEpochFence", { epoch: 6 }, T0).ok).toBe(true);
    expect(transition(entry, "PrepareEpochFence", { epoch: 5 }, T0).ok).toBe(false);
    expect(transition(entry, "PrepareEpochFence", { epoch: 7 }, T0).ok).toBe(false);
    expect(transition(entry, "PrepareEpochFence", { epoch: 6, timeoutMs: 1 }, T0).ok).toBe(false);
    expect(transition(entry, "PrepareEpochFence", { epoch: 6, producerId: 1 }, T0).ok).toBe(false);
  });

  test("other states keep the producer id, epoch and timeout", () => {
    const entry = entryIn("Ongoing");
    expect(transition(entry, "PrepareCommit", { epoch: 6 }, T0).ok).toBe(false);
    expect(transition(entry, "PrepareCommit", { producerId: 1 }, T0).ok).toBe(false);
    expect(transition(entry, "PrepareCommit", { timeoutMs: 1 }, T0).ok).toBe(false);
    expect(transition(entry, "Ongoing", { epoch: 6 }, T0).ok).toBe(false);
  });

  test("Ongoing needs a start and only adds partitions and groups", () => {
    expect(transition(entryIn("Empty"), "Ongoing", {}, T0).ok).toBe(false);
    const ongoing = entryIn("Ongoing");
    expect(transition(ongoing, "Ongoing", { partitions: [{ topic: "t", partitions: [0] }] }, T0).ok).toBe(false);
    expect(transition(ongoing, "Ongoing", { groups: [] }, T0).ok).toBe(false);
    expect(transition(ongoing, "Ongoing", { ongoingSinceMs: T0 + 1 }, T0).ok).toBe(false);
    expect(transition(ongoing, "Ongoing", { partitions: [{ topic: "t", partitions: [0, 1, 2] }], groups: ["g", "h"] }, T0).ok).toBe(true);
  });

  test("Prepare* keeps the transaction's partitions, groups and start", () => {
    const ongoing = entryIn("Ongoing");
    expect(transition(ongoing, "PrepareAbort", { partitions: [] }, T0).ok).toBe(false);
    expect(transition(ongoing, "PrepareAbort", { groups: [] }, T0).ok).toBe(false);
    expect(transition(ongoing, "PrepareAbort", { ongoingSinceMs: T0 + 1 }, T0).ok).toBe(false);
    expect(transition(ongoing, "PrepareAbort", {}, T0).ok).toBe(true);
  });

  test("Complete* and Dead carry no partitions or groups", () => {
    expect(transition(entryIn("PrepareCommit"), "CompleteCommit", {}, T0).ok).toBe(false);
    expect(transition(entryIn("PrepareCommit"), "CompleteCommit", { partitions: [] }, T0).ok).toBe(false);
    expect(transition(entryIn("PrepareCommit"), "CompleteCommit", { partitions: [], groups: [] }, T0).ok).toBe(true);
  });

  test("field ranges are checked: epoch beyond int16, negative ids, unsorted sets", () => {
    const empty = entryIn("Empty", { epoch: PRODUCER_EPOCH_MAX });
    expect(transition(empty, "Empty", { epoch: PRODUCER_EPOCH_MAX + 1 }, T0).ok).toBe(false);
    expect(transition(entryIn("Ongoing"), "Ongoing", { partitions: [{ topic: "t", partitions: [1, 0] }] }, T0).ok).toBe(false);
    expect(
      transition(entryIn("Ongoing"), "Ongoing", { partitions: [{ topic: "u", partitions: [0] }, { topic: "t", partitions: [0, 1] }] }, T0).ok,
    ).toBe(false);
    expect(transition(entryIn("Ongoing"), "Ongoing", { groups: ["h", "g"] }, T0).ok).toBe(false);
    expect(transition(entryIn("Empty"), "Empty", { timeoutMs: 0 }, T0).ok).toBe(false);
  });
});

describe("epochs", () => {
  test("an epoch is exhausted from 32766 (Short.MaxValue - 1)", () => {
    expect(isEpochExhausted(32_765)).toBe(false);
    expect(isEpochExhausted(32_766)).toBe(true);
    expect(isEpochExhausted(32_767)).toBe(true);
  });
});

describe("partition sets", () => {
  test("are normalized: topics and partitions sorted, duplicates removed", () => {
    expect(
      toTopicPartitions([
        { topic: "b", partition: 2 },
        { topic: "a", partition: 1 },
        { topic: "b", partition: 0 },
        { topic: "b", partition: 2 },
      ]),
    ).toEqual([
      { topic: "a", partitions: [1] },
      { topic: "b", partitions: [0, 2] },
    ]);
  });

  test("a topic named __proto__ is an ordinary topic", () => {
    const set = toTopicPartitions([{ topic: "__proto__", partition: 0 }]);
    expect(set).toEqual([{ topic: "__proto__", partitions: [0] }]);
    expect(containsPartition(set, "__proto__", 0)).toBe(true);
    expect(JSON.parse(JSON.stringify(set))).toEqual(set);
  });

  test("merge, contains and includes", () => {
    const a = toTopicPartitions([{ topic: "t", partition: 0 }]);
    const b = toTopicPartitions([{ topic: "t", partition: 1 }, { topic: "u", partition: 0 }]);
    const merged = mergePartitions(a, b);
    expect(merged).toEqual([
      { topic: "t", partitions: [0, 1] },
      { topic: "u", partitions: [0] },
    ]);
    expect(includesAllPartitions(merged, a)).toBe(true);
    expect(includesAllPartitions(a, merged)).toBe(false);
    expect(containsPartition(merged, "u", 1)).toBe(false);
  });
});

describe("parseTxnEntry", () => {
  test("accepts every persisted state and round-trips through JSON", () => {
    for (const state of PERSISTED_STATES) {
      const entry = entryIn(state);
      expect(parseTxnEntry(JSON.parse(JSON.stringify(entry)))).toEqual(entry);
    }
  });

  test("refuses the states that are never persisted", () => {
    expect(() => parseTxnEntry(entryIn("PrepareEpochFence"))).toThrow(/never persisted|is not one/);
    expect(() => parseTxnEntry({ ...entryIn("Empty"), state: "Dead" })).toThrow(/is not one/);
    expect(() => parseTxnEntry({ ...entryIn("Empty"), state: "Bogus" })).toThrow(/is not one/);
  });

  test("refuses malformed entries with a reason", () => {
    expect(() => parseTxnEntry(null)).toThrow(/not an object/);
    expect(() => parseTxnEntry({ ...entryIn("Empty"), transactionalId: "" })).toThrow(/transactionalId/);
    expect(() => parseTxnEntry({ ...entryIn("Empty"), epoch: 1.5 })).toThrow(/epoch/);
    expect(() => parseTxnEntry({ ...entryIn("Empty"), epoch: 40_000 })).toThrow(/epoch/);
    expect(() => parseTxnEntry({ ...entryIn("Ongoing"), partitions: [{ topic: "t", partitions: ["0"] }] })).toThrow(/not numbers/);
    expect(() => parseTxnEntry({ ...entryIn("Ongoing"), groups: [1] })).toThrow(/groups/);
    expect(() => parseTxnEntry({ ...entryIn("CompleteAbort"), groups: ["g"] })).toThrow(/no partitions/);
    expect(() => parseTxnEntry({ ...entryIn("Ongoing"), ongoingSinceMs: -1 })).toThrow(/start/);
  });
});

describe("entries at rest share one frozen empty partition list and group list", () => {
  const shares = (entry: TxnEntry) => entry.partitions === NO_TXN_PARTITIONS && entry.groups === NO_TXN_GROUPS;

  test("a blank entry, a transition that empties the lists, and a parsed entry with empty lists", () => {
    expect(Object.isFrozen(NO_TXN_PARTITIONS) && Object.isFrozen(NO_TXN_GROUPS)).toBe(true);
    expect(shares(blankTxnEntry("tx", 7, 60_000, T0))).toBe(true);
    const ongoing = entryIn("Ongoing", { partitions: [{ topic: "t", partitions: [0, 1] }], groups: ["g"] });
    for (const to of ["CompleteCommit", "CompleteAbort", "Dead"] as const) {
      const prepared = transition(ongoing, to === "CompleteAbort" ? "PrepareAbort" : "PrepareCommit", {}, T0 + 1);
      if (!prepared.ok) throw new Error(prepared.reason);
      const from = to === "Dead" ? entryIn("CompleteCommit") : prepared.entry;
      const done = transition(from, to, { partitions: [], groups: [] }, T0 + 2);
      if (!done.ok) throw new Error(done.reason);
      expect(shares(done.entry)).toBe(true);
    }
    for (const state of ["Empty", "CompleteCommit", "CompleteAbort"] as const) {
      expect(shares(parseTxnEntry(JSON.parse(JSON.stringify(entryIn(state)))))).toBe(true);
    }
  });

  test("lists with content stay the entry's own, and a fence keeps the very lists it had", () => {
    const partitions = [{ topic: "t", partitions: [0] }];
    const ongoing = transition(entryIn("Empty"), "Ongoing", { partitions, groups: ["g"], ongoingSinceMs: T0 }, T0 + 1);
    if (!ongoing.ok) throw new Error(ongoing.reason);
    expect(ongoing.entry.partitions).toBe(partitions);
    const fenced = transition(ongoing.entry, "PrepareEpochFence", { epoch: ongoing.entry.epoch + 1, lastEpoch: -1 }, T0 + 2);
    if (!fenced.ok) throw new Error(fenced.reason);
    expect(fenced.entry.partitions).toBe(partitions);
    expect(shares(ongoing.entry)).toBe(false);
  });
});
