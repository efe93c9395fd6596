import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../../src/errors/errors.ts";
import { ensureDir } from "../../../../src/storage/atomic-file.ts";
import { LeaderEpochHistory } from "../../../../src/storage/log/leader-epoch-checkpoint.ts";
import { MemoryFs } from "../../../support/memory-fs.ts";

const PATH = "/p/leader-epoch-checkpoint";

async function setup(): Promise<MemoryFs> {
  const fs = new MemoryFs();
  await ensureDir(fs, "/p");
  return fs;
}

describe("LeaderEpochHistory", () => {
  test("no file: epoch 0 from offset 0 is implied, and assigning epoch 0 writes nothing", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    expect(history.all).toEqual([{ epoch: 0, startOffset: 0 }]);
    await history.assign(0, 42);
    expect(await fs.stat(PATH)).toBeUndefined();
    expect(history.endOffsetFor(0, 42)).toEqual({ epoch: 0, endOffset: 42 });
  });

  test("a higher epoch is appended durably at the log end and survives a crash", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(3, 10);
    await history.assign(5, 25);
    fs.crash();
    const reloaded = await LeaderEpochHistory.load(fs, PATH);
    expect(reloaded.all).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 3, startOffset: 10 },
      { epoch: 5, startOffset: 25 },
    ]);
    expect(reloaded.latestEpoch).toBe(5);
  });

  test("a lower epoch is refused", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(4, 7);
    await expect(history.assign(2, 9)).rejects.toBeInstanceOf(CorruptStateError);
  });

  test("an epoch that appended nothing is replaced by its successor at the same offset", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(1, 0);
    expect(history.all).toEqual([{ epoch: 1, startOffset: 0 }]);
  });

  test("endOffsetFor answers as Apache's LeaderEpochFileCache", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(2, 10);
    await history.assign(4, 20);
    await history.truncateFromStart(5); // (0,5) (2,10) (4,20)
    expect(history.endOffsetFor(0, 30)).toEqual({ epoch: 0, endOffset: 10 });
    expect(history.endOffsetFor(1, 30)).toEqual({ epoch: 0, endOffset: 10 });
    expect(history.endOffsetFor(3, 30)).toEqual({ epoch: 2, endOffset: 20 });
    expect(history.endOffsetFor(4, 30)).toEqual({ epoch: 4, endOffset: 30 });
    // Above the latest epoch and UNDEFINED_EPOCH: no answer (Apache's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
    expect(history.endOffsetFor(9, 30)).toEqual({ epoch: -1, endOffset: -1 });
    expect(history.endOffsetFor(-1, 30)).toEqual({ epoch: -1, endOffset: -1 });
    await history.truncateFromStart(12); // (2,12) (4,20)
    // Below every recorded epoch: the requested epoch ends where the history starts.
    expect(history.endOffsetFor(1, 30)).toEqual({ epoch: 1, endOffset: 12 });
    expect(history.endOffsetFor(3, 30)).toEqual({ epoch: 2, endOffset: 20 });
    expect(history.epochOfOffset(11)).toBe(-1);
    expect(history.epochOfOffset(12)).toBe(2);
    expect(history.epochOfOffset(25)).toBe(4);
  });

  test("truncation from the end removes epochs starting at or past the new end, durably", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(2, 10);
    await history.assign(4, 20);
    await history.truncateFromEnd(20);
    expect(history.all).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 10 },
    ]);
    fs.crash();
    expect((await LeaderEpochHistory.load(fs, PATH)).all).toEqual(history.all);
  });

  test("truncation from the start drops entries below it and moves the covering one", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(2, 10);
    await history.assign(4, 20);
    await history.truncateFromStart(20);
    expect(history.all).toEqual([{ epoch: 4, startOffset: 20 }]);
    expect((await LeaderEpochHistory.load(fs, PATH)).all).toEqual([{ epoch: 4, startOffset: 20 }]);
  });

  test("a torn or damaged file is refused with CorruptStateError naming it", async () => {
    const fs = await setup();
    const history = await LeaderEpochHistory.load(fs, PATH);
    await history.assign(2, 10);
    const good = new TextDecoder().decode(await fs.readFile(PATH));
    for (const bad of [good.slice(0, good.length - 10), good.replace('"startOffset":10', '"startOffset":11'), ""]) {
      const handle = await fs.open(PATH, "w");
      await handle.write(new TextEncoder().encode(bad), 0);
      await handle.close();
      const error = await LeaderEpochHistory.load(fs, PATH).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptStateError);
      expect((error as CorruptStateError).path).toBe(PATH);
    }
  });
});
