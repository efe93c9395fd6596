/**
 * The marker queue: one state file per transaction and destination broker, named so that a retry
 * overwrites itself, durable when enqueue resolves, refused when damaged.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { MarkerQueue, markerFileName, markerQueueBrokerDir, type QueuedMarkers } from "../../../src/storage/marker-queue.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

const markers = (overrides: Partial<QueuedMarkers> = {}): QueuedMarkers => ({
  transactionalId: "tx",
  producerId: 4000,
  producerEpoch: 3,
  coordinatorEpoch: 0,
  result: "commit",
  partitions: [{ topic: "orders", partitions: [1, 2] }],
  ...overrides,
});

describe("marker queue", () => {
  test("enqueue is durable under to-<broker>/<pid>-<epoch>-<result>.json; a retry overwrites the same file", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    const path = await queue.enqueue(2, markers());
    expect(path).toBe(`${markerQueueBrokerDir(DATA, 2)}/4000-3-commit.json`);
    await queue.enqueue(2, markers());
    await queue.enqueue(2, markers({ result: "abort", producerEpoch: 4 }));
    fs.crash();
    const after = new MarkerQueue(fs, DATA);
    expect((await after.list(2)).map((p) => p.split("/").pop())).toEqual(["4000-3-commit.json", "4000-4-abort.json"]);
    expect(await after.read(path)).toEqual(markers());
    expect(await after.list(5)).toEqual([]);
  });

  test("forwarded files carry a -via- suffix; replace and remove", async () => {
    const fs = new MemoryFs();
    const queue = new MarkerQueue(fs, DATA);
    expect(markerFileName(markers(), 7)).toBe("4000-3-commit-via-7.json");
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
