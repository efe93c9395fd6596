/**
 * The marker queue: one state file per transaction and destination broker, named so that a retry
 * overwrites itself and the next transaction of the same producer epoch does not, listed in the order the
 * transactions were decided, durable when enqueue resolves, refused when damaged; version 1 files still read.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { MARKER_QUEUE_FORMAT, MarkerQueue, markerFileName, markerQueueBrokerDir, type QueuedMarkers } from "../../../src/storage/marker-queue.ts";
import { saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

const markers = (overrides: Partial<QueuedMarkers> = {}): QueuedMarkers => ({
  transactionalId: "tx",
  producerId: 4000,
  producerEpoch: 3,
  coordinatorEpoch: 0,
  result: "commit",
  partitions: [{ topic: "orders", partitions: [1, 2] }],
  decidedMs: 1_700_000_000_000,
  ...overrides,
});

const names = (paths: string[]) => paths.map((p) => p.split("/").pop());

describe("marker queue", () => {
  test("enqueue is durable under to-<broker>/<pid>-<epoch>-<decidedMs>-<result>.json; a retry overwrites the same file", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    const path = await queue.enqueue(2, markers());
    expect(path).toBe(`${markerQueueBrokerDir(DATA, 2)}/4000-3-1700000000000-commit.json`);
    await queue.enqueue(2, markers());
    await queue.enqueue(2, markers({ result: "abort", producerEpoch: 4, decidedMs: 1_700_000_000_001 }));
    fs.crash();
    const after = new MarkerQueue(fs, DATA);
    expect(names(await after.list(2))).toEqual(["4000-3-1700000000000-commit.json", "4000-4-1700000000001-abort.json"]);
    expect(await after.read(path)).toEqual(markers());
    expect(await after.list(5)).toEqual([]);
  });

  test("the transactions of one producer epoch each keep their file, listed in the order they were decided", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    // Transaction version 1: same id and epoch for every transaction of the session. Names sort wrongly as
    // text (9 before 10, 999 before 1000, abort before commit); the list is numeric.
    await queue.enqueue(1, markers({ producerEpoch: 10, decidedMs: 5, result: "abort" }));
    await queue.enqueue(1, markers({ producerEpoch: 9, decidedMs: 1000, result: "commit" }));
    await queue.enqueue(1, markers({ producerEpoch: 9, decidedMs: 999, result: "abort", partitions: [{ topic: "orders", partitions: [7] }] }));
    await queue.enqueue(1, markers({ producerEpoch: 9, decidedMs: 1000, result: "commit" }), 3); // forwarded by broker 3
    await queue.enqueue(1, markers({ producerId: 12, producerEpoch: 0, decidedMs: 1 }));
    const listed = names(await queue.list(1));
    expect(listed).toEqual([
      "12-0-1-commit.json",
      "4000-9-999-abort.json",
      "4000-9-1000-commit.json",
      "4000-9-1000-commit-via-3.json",
      "4000-10-5-abort.json",
    ]);
    expect((await queue.read(`${markerQueueBrokerDir(DATA, 1)}/4000-9-999-abort.json`))?.partitions).toEqual([{ topic: "orders", partitions: [7] }]);
  });

  test("a version 1 file (no decision time in its name or body) is still read, and listed before version 2 files of its epoch", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    await queue.enqueue(1, markers({ decidedMs: 2 }));
    const { decidedMs: _, ...v1Body } = markers();
    const v1Path = `${markerQueueBrokerDir(DATA, 1)}/4000-3-abort.json`;
    await saveState(fs, v1Path, MARKER_QUEUE_FORMAT, 1, { ...v1Body, result: "abort" });
    expect(names(await queue.list(1))).toEqual(["4000-3-abort.json", "4000-3-2-commit.json"]);
    expect(await queue.read(v1Path)).toEqual(markers({ result: "abort", decidedMs: 0 }));
    // A version 1 body where version 2 is expected lacks the decision time: refused, not guessed.
    await saveState(fs, v1Path, MARKER_QUEUE_FORMAT, 2, v1Body);
    await expect(queue.read(v1Path)).rejects.toThrow("decidedMs");
    await saveState(fs, v1Path, MARKER_QUEUE_FORMAT, 3, markers());
    await expect(queue.read(v1Path)).rejects.toBeInstanceOf(CorruptStateError);
  });

  test("forwarded files carry a -via- suffix; replace and remove", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    expect(markerFileName(markers(), 7)).toBe("4000-3-1700000000000-commit-via-7.json");
    const path = await queue.enqueue(1, markers(), 7);
    await queue.replace(path, markers({ partitions: [{ topic: "orders", partitions: [2] }] }));
    expect((await queue.read(path))?.partitions).toEqual([{ topic: "orders", partitions: [2] }]);
    await queue.remove(path);
    await queue.remove(path); // already gone: fine
    expect(await queue.list(1)).toEqual([]);
    expect(await queue.read(path)).toBeUndefined();
  });

  test("a damaged file is refused, never read as empty", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    const path = await queue.enqueue(1, markers());
    const handle = await fs.open(path, "rw");
    await handle.write(new TextEncoder().encode("X"), 40);
    await handle.close();
    await expect(queue.read(path)).rejects.toBeInstanceOf(CorruptStateError);
  });
});
