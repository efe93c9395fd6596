import { describe, expect, test } from "bun:test";
import { BatchedSync, type FilesystemSyncer, type SyncTarget } from "../../../src/platform/batched-sync.ts";

const DEV = 7;
const OTHER_DEV = 8;

/** A call the test settles by hand. */
type Controlled = PromiseWithResolvers<void>;

/** A file whose fsyncs wait until the test settles them, one by one. */
class FakeFile implements SyncTarget {
  readonly fsyncs: Controlled[] = [];
  constructor(readonly dev = DEV) {}
  fsync(): Promise<void> {
    const call = Promise.withResolvers<void>();
    this.fsyncs.push(call);
    return call.promise;
  }
}

/** A syncfs whose calls wait until the test settles them. */
class FakeSyncer implements FilesystemSyncer {
  readonly dev = DEV;
  readonly calls: Controlled[] = [];
  syncAll(): Promise<void> {
    const call = Promise.withResolvers<void>();
    this.calls.push(call);
    return call.promise;
  }
}

/** The end of the event-loop turn, run by hand. */
class Turns {
  private queued: (() => void)[] = [];
  readonly defer = (fn: () => void) => void this.queued.push(fn);
  end(): void {
    const queued = this.queued;
    this.queued = [];
    for (const fn of queued) fn();
  }
  get waiting(): number {
    return this.queued.length;
  }
}

/** Settled state of a promise, after the microtasks queued so far have run. */
async function stateOf(promise: Promise<void>): Promise<"pending" | "resolved" | "rejected"> {
  let state: "pending" | "resolved" | "rejected" = "pending";
  promise.then(
    () => (state = "resolved"),
    () => (state = "rejected"),
  );
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return state;
}

function setup(minFiles = 3) {
  const turns = new Turns();
  const syncer = new FakeSyncer();
  const batches: [string, number][] = [];
  const sync = new BatchedSync({
    syncer,
    minFilesForSyncfs: minFiles,
    defer: turns.defer,
    onBatch: (method, files) => batches.push([method, files]),
  });
  return { turns, syncer, batches, sync };
}

describe("BatchedSync", () => {
  test("without a syncer every request is its file's own fsync, at once", async () => {
    const sync = new BatchedSync({ syncer: undefined, minFilesForSyncfs: 3, defer: () => expect.unreachable() });
    const file = new FakeFile();
    const done = sync.sync(file);
    expect(file.fsyncs).toHaveLength(1);
    expect(await stateOf(done)).toBe("pending");
    file.fsyncs[0]!.resolve();
    expect(await stateOf(done)).toBe("resolved");
  });

  test("a file on another device than the syncer's is fsynced on its own, at once", async () => {
    const { turns, syncer, sync } = setup();
    const other = new FakeFile(OTHER_DEV);
    const done = sync.sync(other);
    expect(other.fsyncs).toHaveLength(1);
    expect(turns.waiting).toBe(0);
    other.fsyncs[0]!.resolve();
    expect(await stateOf(done)).toBe("resolved");
    expect(syncer.calls).toHaveLength(0);
  });

  test("requests of one turn naming enough files share one syncfs, and settle only when it completes", async () => {
    const { turns, syncer, batches, sync } = setup(3);
    const files = [new FakeFile(), new FakeFile(), new FakeFile()];
    const done = [...files.map((f) => sync.sync(f)), sync.sync(files[0]!)];
    // Nothing starts before the end of the turn: later requests of the same turn must join.
    expect(syncer.calls).toHaveLength(0);
    turns.end();
    expect(syncer.calls).toHaveLength(1);
    expect(files.every((f) => f.fsyncs.length === 0)).toBe(true);
    expect(batches).toEqual([["syncfs", 3]]);
    expect(await stateOf(Promise.all(done).then(() => undefined))).toBe("pending");
    syncer.calls[0]!.resolve();
    for (const d of done) expect(await stateOf(d)).toBe("resolved");
  });

  test("a batch below the threshold fsyncs each distinct file once; each file's requests settle with its fsync", async () => {
    const { turns, syncer, batches, sync } = setup(3);
    const a = new FakeFile();
    const b = new FakeFile();
    const a1 = sync.sync(a);
    const a2 = sync.sync(a);
    const b1 = sync.sync(b);
    turns.end();
    expect(syncer.calls).toHaveLength(0);
    expect(a.fsyncs).toHaveLength(1);
    expect(b.fsyncs).toHaveLength(1);
    expect(batches).toEqual([["fsync", 2]]);
    a.fsyncs[0]!.resolve();
    expect(await stateOf(a1)).toBe("resolved");
    expect(await stateOf(a2)).toBe("resolved");
    expect(await stateOf(b1)).toBe("pending");
    b.fsyncs[0]!.reject(new Error("EIO"));
    expect(await stateOf(b1)).toBe("rejected");
  });

  test("a request made while a syncfs runs waits for the next one, which starts when the first ends", async () => {
    const { turns, syncer, sync } = setup(1);
    const first = sync.sync(new FakeFile());
    turns.end();
    expect(syncer.calls).toHaveLength(1);
    // The running syncfs may have started before this write: it must not settle this request.
    const second = sync.sync(new FakeFile());
    const third = sync.sync(new FakeFile());
    expect(turns.waiting).toBe(0);
    syncer.calls[0]!.resolve();
    expect(await stateOf(first)).toBe("resolved");
    expect(await stateOf(second)).toBe("pending");
    expect(syncer.calls).toHaveLength(2);
    syncer.calls[1]!.resolve();
    expect(await stateOf(second)).toBe("resolved");
    expect(await stateOf(third)).toBe("resolved");
  });

  test("requests made while a syncfs runs that are too few for another are fsynced file by file after it", async () => {
    const { turns, syncer, sync } = setup(3);
    const files = [new FakeFile(), new FakeFile(), new FakeFile()];
    for (const f of files) void sync.sync(f);
    turns.end();
    const late = new FakeFile();
    const lateDone = sync.sync(late);
    expect(late.fsyncs).toHaveLength(0);
    syncer.calls[0]!.resolve();
    await stateOf(lateDone);
    expect(syncer.calls).toHaveLength(1);
    expect(late.fsyncs).toHaveLength(1);
    late.fsyncs[0]!.resolve();
    expect(await stateOf(lateDone)).toBe("resolved");
  });

  test("a failed syncfs rejects every request it covered, and the next batch is tried again", async () => {
    const { turns, syncer, sync } = setup(1);
    const covered = [sync.sync(new FakeFile()), sync.sync(new FakeFile())];
    const outcomes = Promise.all(covered.map((d) => d.then(() => "resolved", (error: unknown) => error)));
    turns.end();
    const waiting = sync.sync(new FakeFile());
    const failure = new Error("syncfs: EIO");
    syncer.calls[0]!.reject(failure);
    expect(await outcomes).toEqual([failure, failure]);
    // The request that arrived during the failed call was not covered by it: it gets its own attempt.
    expect(syncer.calls).toHaveLength(2);
    expect(await stateOf(waiting)).toBe("pending");
    syncer.calls[1]!.resolve();
    expect(await stateOf(waiting)).toBe("resolved");
  });

  test("a new turn after an idle period starts a new batch", async () => {
    const { turns, syncer, sync } = setup(1);
    const first = sync.sync(new FakeFile());
    turns.end();
    syncer.calls[0]!.resolve();
    expect(await stateOf(first)).toBe("resolved");
    const next = sync.sync(new FakeFile());
    expect(syncer.calls).toHaveLength(1);
    expect(turns.waiting).toBe(1);
    turns.end();
    expect(syncer.calls).toHaveLength(2);
    syncer.calls[1]!.resolve();
    expect(await stateOf(next)).toBe("resolved");
  });
});
