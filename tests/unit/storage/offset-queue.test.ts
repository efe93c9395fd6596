/**
 * The offset completion queue: one state file per decided transaction and group slot, named so that a
 * retry of the decision overwrites itself and the producer's next transaction does not, listed in decision
 * order, durable when enqueue resolves, durably gone when remove resolves, refused (naming the file) when
 * torn or damaged, never read as empty.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { OFFSET_QUEUE_FORMAT, OffsetCompletionQueue, offsetQueueSlotDir, type QueuedCompletion } from "../../../src/storage/offset-queue.ts";
import { encodeState, saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

const completion = (overrides: Partial<QueuedCompletion> = {}): QueuedCompletion => ({
  transactionalId: "tx",
  producerId: 4000,
  producerEpoch: 3,
  result: "commit",
  groups: ["g"],
  decidedMs: 1_700_000_000_000,
  ...overrides,
});

const names = (paths: string[]) => paths.map((p) => p.split("/").pop());

describe("offset completion queue", () => {
  test("enqueue is durable under slot-<N>/<pid>-<epoch>-<decidedMs>-<result>.json; a retry overwrites its own file", async () => {
    const fs = new MemoryFs();
    const queue = new OffsetCompletionQueue(fs, DATA);
    const path = await queue.enqueue(7, completion({ groups: ["h", "g"] }));
    expect(path).toBe(`${offsetQueueSlotDir(DATA, 7)}/4000-3-1700000000000-commit.json`);
    await queue.enqueue(7, completion({ groups: ["h", "g"] }));
    // The producer's next transaction, same epoch (transaction version 1): a file of its own.
    await queue.enqueue(7, completion({ result: "abort", decidedMs: 1_700_000_000_500 }));
    fs.crash();
    const after = new OffsetCompletionQueue(fs, DATA);
    expect(names(await after.list(7))).toEqual(["4000-3-1700000000000-commit.json", "4000-3-1700000000500-abort.json"]);
    expect(await after.read(path)).toEqual(completion({ groups: ["g", "h"] }));
    expect(await after.list(8)).toEqual([]);
  });

  test("list orders by producer, epoch and decision time numerically, and skips other names", async () => {
    const fs = new MemoryFs();
    const queue = new OffsetCompletionQueue(fs, DATA);
    await queue.enqueue(1, completion({ producerId: 10, producerEpoch: 2, decidedMs: 900 }));
    await queue.enqueue(1, completion({ producerId: 10, producerEpoch: 2, decidedMs: 1000 }));
    await queue.enqueue(1, completion({ producerId: 10, producerEpoch: 10, decidedMs: 5 }));
    await queue.enqueue(1, completion({ producerId: 9, producerEpoch: 30, decidedMs: 7 }));
    const stray = await fs.open(`${offsetQueueSlotDir(DATA, 1)}/notes.txt`, "rw");
    await stray.write(new Uint8Array([1]), 0);
    await stray.close();
    expect(names(await queue.list(1))).toEqual(["9-30-7-commit.json", "10-2-900-commit.json", "10-2-1000-commit.json", "10-10-5-commit.json"]);
  });

  test("remove is durable: after a crash the file stays gone; removing a missing file is fine", async () => {
    const fs = new MemoryFs();
    const queue = new OffsetCompletionQueue(fs, DATA);
    const path = await queue.enqueue(3, completion());
    await queue.remove(path);
    fs.crash();
    expect(await new OffsetCompletionQueue(fs, DATA).list(3)).toEqual([]);
    await queue.remove(path);
  });

  test("a torn or damaged file is refused with its path named; a missing one reads as undefined", async () => {
    const fs = new MemoryFs();
    const queue = new OffsetCompletionQueue(fs, DATA);
    const path = await queue.enqueue(4, completion());
    const bytes = await fs.readFile(path);
    // Torn: a prefix of the file.
    const torn = await fs.open(path, "rw");
    await torn.truncate(Math.floor(bytes.length / 2));
    await torn.fsync();
    await torn.close();
    const tornError = await queue.read(path).catch((error: unknown) => error);
    expect(tornError).toBeInstanceOf(CorruptStateError);
    expect(String(tornError)).toContain(path);
    // A valid envelope whose body is not a completion.
    await saveState(fs, path, OFFSET_QUEUE_FORMAT, 1, { ...completion(), groups: [] });
    await expect(queue.read(path)).rejects.toThrow(CorruptStateError);
    await saveState(fs, path, OFFSET_QUEUE_FORMAT, 1, { ...completion(), result: "maybe" });
    await expect(queue.read(path)).rejects.toThrow(/neither commit nor abort/);
    // Another format's file under the queue's name.
    const other = encodeState("txn-markers", 2, completion());
    const handle = await fs.open(path, "rw");
    await handle.truncate(0);
    await handle.write(other, 0);
    await handle.fsync();
    await handle.close();
    await expect(queue.read(path)).rejects.toThrow(/wrong format/);
    // Still listed: a damaged file is never taken for an empty queue.
    expect(await queue.list(4)).toEqual([path]);
    await queue.remove(path);
    expect(await queue.read(path)).toBeUndefined();
  });
});
