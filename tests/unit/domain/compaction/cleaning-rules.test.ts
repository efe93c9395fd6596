/** The cleaner's decisions (domain/compaction/cleaning-rules.ts), one rule at a time. */
import { describe, expect, test } from "bun:test";
import {
  cleanableRange,
  cleaningReason,
  decideBatch,
  deleteHorizonFor,
  isLastBatchOfProducer,
  retainRecord,
  type CleanableRangeInput,
} from "../../../../src/domain/compaction/cleaning-rules.ts";
import { OffsetMap } from "../../../../src/domain/compaction/offset-map.ts";

const NOW = 1_700_000_000_000;
const bytes = (s: string) => new TextEncoder().encode(s);

function rangeInput(overrides: Partial<CleanableRangeInput> = {}): CleanableRangeInput {
  return {
    segments: [
      { baseOffset: 0, sizeBytes: 100, maxTimestampMs: NOW - 10_000 },
      { baseOffset: 10, sizeBytes: 100, maxTimestampMs: NOW - 5_000 },
      { baseOffset: 20, sizeBytes: 100, maxTimestampMs: NOW - 1_000 },
    ],
    activeBaseOffset: 30,
    logStartOffset: 0,
    lastStableOffset: 35,
    checkpointOffset: -1,
    minCompactionLagMs: 0,
    nowMs: NOW,
    ...overrides,
  };
}

describe("cleanableRange", () => {
  test("everything below the active segment is dirty before the first pass", () => {
    expect(cleanableRange(rangeInput())).toEqual({
      firstDirtyOffset: 0,
      firstUncleanableOffset: 30,
      cleanBytes: 0,
      dirtyBytes: 300,
      dirtyRatio: 1,
      checkpointReset: false,
    });
  });

  test("the checkpoint splits clean from dirty", () => {
    const range = cleanableRange(rangeInput({ checkpointOffset: 20 }));
    expect([range.firstDirtyOffset, range.cleanBytes, range.dirtyBytes]).toEqual([20, 200, 100]);
    expect(range.dirtyRatio).toBeCloseTo(1 / 3);
  });

  test("the last stable offset bounds the range, rounded down to its segment's start", () => {
    expect(cleanableRange(rangeInput({ lastStableOffset: 15 })).firstUncleanableOffset).toBe(10);
    expect(cleanableRange(rangeInput({ lastStableOffset: 10 })).firstUncleanableOffset).toBe(10);
    expect(cleanableRange(rangeInput({ lastStableOffset: 3 })).dirtyBytes).toBe(0);
  });

  test("min.compaction.lag.ms keeps segments holding younger records out", () => {
    expect(cleanableRange(rangeInput({ minCompactionLagMs: 2_000 })).firstUncleanableOffset).toBe(20);
    expect(cleanableRange(rangeInput({ minCompactionLagMs: 60_000 })).firstUncleanableOffset).toBe(0);
  });

  test("a checkpoint outside the log is reset to its start", () => {
    const below = cleanableRange(rangeInput({ logStartOffset: 10, checkpointOffset: 5 }));
    expect([below.firstDirtyOffset, below.checkpointReset]).toEqual([10, true]);
    const beyond = cleanableRange(rangeInput({ checkpointOffset: 31 }));
    expect([beyond.firstDirtyOffset, beyond.checkpointReset]).toEqual([0, true]);
  });

  test("an empty log has nothing to clean and a ratio of 0", () => {
    const range = cleanableRange(rangeInput({ segments: [], activeBaseOffset: 0, lastStableOffset: 0 }));
    expect([range.dirtyBytes, range.dirtyRatio]).toEqual([0, 0]);
  });
});

describe("cleaningReason", () => {
  const base = cleanableRange(rangeInput({ checkpointOffset: 20 }));
  const need = (overrides: Partial<Parameters<typeof cleaningReason>[0]> = {}) =>
    cleaningReason({ range: base, minCleanableDirtyRatio: 0.5, maxCompactionLagMs: Number.MAX_SAFE_INTEGER, firstDirtyTimestampMs: NOW - 1000, pendingDeleteHorizonMs: -1, nowMs: NOW, ...overrides });

  test("the dirty ratio must be above min.cleanable.dirty.ratio (strictly, as in Apache)", () => {
    expect(need()).toBeNull();
    expect(need({ minCleanableDirtyRatio: 0.3 })).toBe("dirty-ratio");
    const whole = cleanableRange(rangeInput());
    expect(need({ range: whole, minCleanableDirtyRatio: 1 })).toBeNull();
    expect(need({ range: whole, minCleanableDirtyRatio: 0.99 })).toBe("dirty-ratio");
  });

  test("max.compaction.lag.ms forces a pass over a dirty log below the ratio", () => {
    expect(need({ maxCompactionLagMs: 999 })).toBe("max-compaction-lag");
    expect(need({ maxCompactionLagMs: 1000 })).toBeNull();
  });

  test("a pending delete horizon that has passed asks for a pass even with nothing dirty", () => {
    const clean = cleanableRange(rangeInput({ checkpointOffset: 30 }));
    expect(need({ range: clean, pendingDeleteHorizonMs: NOW })).toBe("delete-horizon");
    expect(need({ range: clean, pendingDeleteHorizonMs: NOW + 1 })).toBeNull();
  });
});

describe("batches", () => {
  const producers = new Map([
    [1, { lastDataOffset: 41, epoch: 2 }],
    [2, { lastDataOffset: -1, epoch: 5 }],
  ]);
  const facts = { producerId: 1, producerEpoch: 2, lastOffset: 41, isControl: false, deleteHorizonMs: -1 };

  test("a producer's newest data batch is its last batch; for a producer with only markers, a marker of its epoch", () => {
    expect(isLastBatchOfProducer(facts, producers)).toBe(true);
    expect(isLastBatchOfProducer({ ...facts, lastOffset: 40 }, producers)).toBe(false);
    expect(isLastBatchOfProducer({ ...facts, producerId: 2, isControl: true, producerEpoch: 5 }, producers)).toBe(true);
    expect(isLastBatchOfProducer({ ...facts, producerId: 2, isControl: true, producerEpoch: 4 }, producers)).toBe(false);
    expect(isLastBatchOfProducer({ ...facts, producerId: 3 }, producers)).toBe(false);
    expect(isLastBatchOfProducer({ ...facts, producerId: -1 }, producers)).toBe(false);
  });

  test("data: discarded when aborted, kept empty when it is the producer's last, else record by record", () => {
    expect(decideBatch(facts, true, false, NOW)).toEqual({ retention: "delete", discardRecords: true, markerForEmptyTxn: false });
    expect(decideBatch(facts, true, true, NOW)).toEqual({ retention: "retain-empty", discardRecords: true, markerForEmptyTxn: false });
    expect(decideBatch(facts, false, false, NOW)).toEqual({ retention: "delete-empty", discardRecords: false, markerForEmptyTxn: false });
  });

  test("markers: kept until discardable and past their delete horizon", () => {
    const marker = { ...facts, isControl: true };
    expect(decideBatch(marker, false, false, NOW).retention).toBe("delete-empty");
    expect(decideBatch(marker, true, false, NOW)).toEqual({ retention: "delete-empty", discardRecords: false, markerForEmptyTxn: true });
    expect(decideBatch({ ...marker, deleteHorizonMs: NOW + 1 }, true, false, NOW).discardRecords).toBe(false);
    expect(decideBatch({ ...marker, deleteHorizonMs: NOW }, true, false, NOW)).toEqual({ retention: "delete", discardRecords: true, markerForEmptyTxn: true });
    expect(decideBatch({ ...marker, deleteHorizonMs: NOW }, true, true, NOW).retention).toBe("retain-empty");
  });

  test("a delete horizon is set once, when a tombstone or an empty transaction's marker is kept", () => {
    expect(deleteHorizonFor(-1, true, NOW, 1000)).toBe(NOW + 1000);
    expect(deleteHorizonFor(-1, false, NOW, 1000)).toBe(-1);
    expect(deleteHorizonFor(NOW - 5, true, NOW, 1000)).toBe(NOW - 5);
  });
});

describe("retainRecord", () => {
  /** A record's facts with its key given as a string, inside a larger array as the cleaner sees it. */
  const fact = (offset: number, key: string | null, hasValue = true) => {
    const keyBytes = bytes(`..${key ?? ""}..`);
    return { offset, keyBytes, keyStart: 2, keyLength: key === null ? -1 : keyBytes.length - 4, hasValue };
  };
  const map = new OffsetMap(1 << 20, 0.9);
  map.put(bytes("a"), 5);
  map.put(bytes("b"), 7);
  map.updateLatestOffset(9);

  test("the latest record of a key stays, older ones go", () => {
    expect(retainRecord(map, fact(5, "a"), -1, NOW)).toBe(true);
    expect(retainRecord(map, fact(3, "a"), -1, NOW)).toBe(false);
  });

  test("a key the map does not hold (already clean) stays", () => {
    expect(retainRecord(map, fact(2, "c"), -1, NOW)).toBe(true);
  });

  test("records past the end of the map stay whatever their key", () => {
    expect(retainRecord(map, fact(10, "a"), -1, NOW)).toBe(true);
    expect(retainRecord(map, fact(10, null), -1, NOW)).toBe(true);
  });

  test("a record without a key goes", () => {
    expect(retainRecord(map, fact(6, null), -1, NOW)).toBe(false);
  });

  test("a tombstone stays until its batch's delete horizon", () => {
    const tombstone = fact(7, "b", false);
    expect(retainRecord(map, tombstone, -1, NOW)).toBe(true);
    expect(retainRecord(map, tombstone, NOW + 1, NOW)).toBe(true);
    expect(retainRecord(map, tombstone, NOW, NOW)).toBe(false);
  });
});
