/**
 * The offsets store: one serial writer per slot with group commit, durable before answering, only durable
 * state visible, crash safety on the in-memory Fs, refusal of damaged files, staged transactional offsets.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import type { OffsetCommitEntry } from "../../../src/domain/groups/offsets.ts";
import type { FileHandle, Fs } from "../../../src/platform/fs.ts";
import {
  OFFSETS_JOURNAL_FORMAT,
  OFFSETS_SLOT_FORMAT,
  OffsetStore,
  offsetsJournalPath,
  offsetsSlotPath,
} from "../../../src/storage/offset-store.ts";
import { encodeState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";

const entry = (topic: string, partition: number, offset: number, metadata = ""): OffsetCommitEntry => ({
  topic,
  partition,
  offset,
  leaderEpoch: 3,
  metadata,
  commitTimestampMs: 1_700_000_000_000,
  expireTimestampMs: null,
});

/** An Fs that counts handle fsyncs and can hold them until released, to keep a write in flight. */
class GatedFs implements Fs {
  fsyncs = 0;
  private gate: Promise<void> | undefined;
  private release: (() => void) | undefined;
  /** Resolves when a held fsync is waiting at the gate. */
  waiting: Promise<void> = new Promise(() => undefined);
  private signalWaiting: () => void = () => undefined;

  constructor(readonly inner: MemoryFs) {}

  hold(): void {
    this.gate = new Promise((resolve) => (this.release = resolve));
    this.waiting = new Promise((resolve) => (this.signalWaiting = resolve));
  }

  open(path: string, mode: "r" | "rw" | "w"): Promise<FileHandle> {
    return this.inner.open(path, mode).then((handle) => ({
      write: (data, position) => handle.write(data, position),
      read: (length, position) => handle.read(length, position),
      truncate: (length) => handle.truncate(length),
      size: () => handle.size(),
      close: () => handle.close(),
      fsync: async () => {
        this.fsyncs += 1;
        if (this.gate !== undefined) {
          const gate = this.gate;
          this.gate = undefined;
          this.signalWaiting();
          await gate;
        }
        await handle.fsync();
      },
    }));
  }
  readFile = (path: string) => this.inner.readFile(path);
  rename = (from: string, to: string) => this.inner.rename(from, to);
  fsyncDir = (path: string) => this.inner.fsyncDir(path);
  mkdirp = (path: string) => this.inner.mkdirp(path);
  readdir = (path: string) => this.inner.readdir(path);
  unlink = (path: string) => this.inner.unlink(path);
  rmrf = (path: string) => this.inner.rmrf(path);
  stat = (path: string) => this.inner.stat(path);

  unhold(): void {
    this.release?.();
  }
}

describe("OffsetStore", () => {
  test("commits are durable and come back after a reopen, with the group record and staged offsets", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    const record = { groupId: "g", protocolType: "consumer", protocolName: null, generationId: 3, leaderId: null, state: "Empty" as const, stateTimestampMs: 42 };
    const codes = await store.mutate(7, (d) => {
      d.setRecord("g", record);
      const codes = d.commit("g", [entry("t", 0, 10, "meta"), entry("t", 1, 11)]);
      d.stage("g", 1000, [entry("t", 1, 99)]);
      return codes;
    });
    expect(codes).toEqual([0, 0]);
    expect(store.slot(7).committed("g", "t", 0)!.offset).toBe(10);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    const slot = reopened.slot(7);
    expect(slot.groups.get("g")!.record).toEqual(record);
    expect(slot.committed("g", "t", 0)).toMatchObject({ offset: 10, leaderEpoch: 3, metadata: "meta", commitTimestampMs: 1_700_000_000_000, expireTimestampMs: null });
    expect(slot.committed("g", "t", 1)!.offset).toBe(11);
    expect(slot.stagedOf("g", 1000).get("t")!.get(1)!.offset).toBe(99);
    expect(slot.nextSeq).toBe(store.slot(7).nextSeq);
    // Staged offsets commit after the reopen; the rule "most recent wins" survived with the sequence numbers.
    await reopened.mutate(7, (d) => d.completeTransaction("g", 1000, true));
    expect(reopened.slot(7).committed("g", "t", 1)!.offset).toBe(99);
    expect(reopened.slot(0).groups.size).toBe(0);
  });

  test("group commit: 50 concurrent commits cost far fewer fsyncs than 50 writes", async () => {
    const fs = new GatedFs(new MemoryFs());
    const store = await OffsetStore.open(fs, DATA);
    const before = fs.fsyncs;
    const commits = Array.from({ length: 50 }, (_, i) => store.mutate(3, (d) => d.commit(`g${i}`, [entry("t", 0, i)])));
    await Promise.all(commits);
    expect(store.writesOf(3)).toBe(1);
    expect(fs.fsyncs - before).toBe(1); // one tmp-file fsync (the directory fsync is separate)
    for (let i = 0; i < 50; i++) expect(store.slot(3).committed(`g${i}`, "t", 0)!.offset).toBe(i);
  });

  test("commits that arrive while a write is in flight share the next write, and nobody is answered early", async () => {
    const fs = new GatedFs(new MemoryFs());
    const store = await OffsetStore.open(fs, DATA);
    fs.hold();
    let firstDone = false;
    const first = store.mutate(0, (d) => d.commit("a", [entry("t", 0, 1)])).then(() => (firstDone = true));
    await fs.waiting; // the first write is now waiting for its fsync
    const late = Array.from({ length: 20 }, (_, i) => store.mutate(0, (d) => d.commit(`b${i}`, [entry("t", 0, i)])));
    await Promise.resolve();
    expect(firstDone).toBe(false);
    // Readers see only durable state: nothing yet.
    expect(store.slot(0).committed("a", "t", 0)).toBeUndefined();
    fs.unhold();
    await first;
    await Promise.all(late);
    expect(store.writesOf(0)).toBe(2);
    expect(fs.fsyncs).toBeLessThan(21);
  });

  test("a batch that changes nothing writes nothing", async () => {
    const fs = new GatedFs(new MemoryFs());
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(1, (d) => d.completeTransaction("g", 5, true));
    await store.mutate(1, () => undefined);
    expect(store.writesOf(1)).toBe(0);
    expect(fs.fsyncs).toBe(0);
  });

  test.each([
    ["journal only", {}],
    ["compacting after every write", { compactBytesMin: 0, compactRatio: 0 }],
  ])("crash at every step (%s): acknowledged commits survive; unacknowledged ones may not", async (_, compaction) => {
    for (let haltAfter = 0; haltAfter < 60; haltAfter++) {
      const fs = new MemoryFs();
      const store = await OffsetStore.open(fs, DATA, compaction);
      await store.mutate(2, (d) => d.commit("g", [entry("t", 0, 1)]));
      const acknowledged: number[] = [1];
      fs.haltAfterOps(haltAfter);
      for (let i = 2; i <= 6; i++) {
        try {
          await store.mutate(2, (d) => d.commit("g", [entry("t", 0, i)]));
          acknowledged.push(i);
        } catch {
          break;
        }
      }
      fs.crash();
      const reopened = await OffsetStore.open(fs, DATA);
      const offset = reopened.slot(2).committed("g", "t", 0)!.offset;
      // The last acknowledged commit, or a later one that reached the disk without its answer.
      expect(offset).toBeGreaterThanOrEqual(acknowledged.at(-1)!);
      expect(offset).toBeLessThanOrEqual(acknowledged.at(-1)! + 1);
    }
  });

  test("a failed fsync is fatal: the batch and every later change are refused", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    fs.failNextFsync();
    await expect(store.mutate(0, (d) => d.commit("g", [entry("t", 0, 1)]))).rejects.toBeInstanceOf(FatalError);
    await expect(store.mutate(1, (d) => d.commit("h", [entry("t", 0, 1)]))).rejects.toBeInstanceOf(FatalError);
  });

  test("any other failed write refuses its batch, keeps the durable state, and the store goes on", async () => {
    const fs = new MemoryFs();
    const failed: number[] = [];
    const store = await OffsetStore.open(fs, DATA, { onWriteFailed: (slot) => failed.push(slot) });
    await store.mutate(4, (d) => d.commit("g", [entry("t", 0, 1)]));
    fs.failNextWrite();
    await expect(store.mutate(4, (d) => d.commit("g", [entry("t", 0, 2)]))).rejects.toThrow();
    expect(failed).toEqual([4]);
    expect(store.slot(4).committed("g", "t", 0)!.offset).toBe(1);
    await store.mutate(4, (d) => d.commit("g", [entry("t", 0, 3)]));
    expect(store.slot(4).committed("g", "t", 0)!.offset).toBe(3);
    fs.crash();
    expect((await OffsetStore.open(fs, DATA)).slot(4).committed("g", "t", 0)!.offset).toBe(3);
  });

  test("a damaged checkpoint is refused with CorruptStateError naming it, never taken for empty", async () => {
    const fs = new MemoryFs();
    // Compaction after every write: the state is in the checkpoint and the journal is empty.
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 0, compactRatio: 0 });
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 1)]));
    // Compaction runs after the answer, before the slot's next write.
    await store.idle();
    expect((await fs.readFile(offsetsJournalPath(DATA, 9))).length).toBe(0);
    const path = offsetsSlotPath(DATA, 9);
    const good = await fs.readFile(path);
    const overwrite = async (bytes: Uint8Array) => {
      const h = await fs.open(path, "w");
      await h.write(bytes, 0);
      await h.fsync();
      await h.close();
    };
    const expectCorrupt = async (pattern: RegExp) => {
      const error = await OffsetStore.open(fs, DATA).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CorruptStateError);
      expect((error as CorruptStateError).path).toBe(path);
      expect((error as Error).message).toMatch(pattern);
    };

    // One flipped digit in an offset: the checksum catches it.
    const text = new TextDecoder().decode(good);
    await overwrite(new TextEncoder().encode(text.replace('"offset":1', '"offset":7')));
    await expectCorrupt(/checksum mismatch/);
    // Torn (truncated) file.
    await overwrite(good.subarray(0, good.length - 10));
    await expectCorrupt(/not valid JSON/);
    // Empty file.
    await overwrite(new Uint8Array());
    await expectCorrupt(/empty/);
    // A newer version than this build reads.
    await overwrite(encodeState(OFFSETS_SLOT_FORMAT, 99, {}));
    await expectCorrupt(/unknown version 99/);
    // Valid envelope, invalid body.
    await overwrite(encodeState(OFFSETS_SLOT_FORMAT, 1, { slot: 9, nextSeq: 1, groups: [], offsets: [{ groupId: "g" }], staged: [] }));
    await expectCorrupt(/offsets\[0\]/);
    // Another slot's content.
    await overwrite(encodeState(OFFSETS_SLOT_FORMAT, 1, { slot: 8, nextSeq: 0, groups: [], offsets: [], staged: [] }));
    await expectCorrupt(/holds slot 8/);
  });

  test("the journal: the last record is the state; a torn last record is cut off; a damaged one is refused", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 1)]));
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 2)]));
    await store.close();
    const path = offsetsJournalPath(DATA, 9);
    const good = await fs.readFile(path);
    const lines = new TextDecoder().decode(good).split("\n").filter(Boolean);
    expect(lines.length).toBe(2);
    expect((await OffsetStore.open(fs, DATA)).slot(9).committed("g", "t", 0)!.offset).toBe(2);
    const overwrite = async (text: string) => {
      const h = await fs.open(path, "w");
      await h.write(new TextEncoder().encode(text), 0);
      await h.fsync();
      await h.close();
    };
    const openError = () =>
      OffsetStore.open(fs, DATA).then(
        () => undefined,
        (e: unknown) => e,
      );

    // A torn last record (a write that never completed, never acknowledged): the one before it is the
    // state, and the tail is cut so that the next write lands on a clean end.
    await overwrite(`${lines[0]}\n${lines[1]!.slice(0, 40)}`);
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(9).committed("g", "t", 0)!.offset).toBe(1);
    expect(new TextDecoder().decode(await fs.readFile(path))).toBe(`${lines[0]}\n`);
    await reopened.mutate(9, (d) => d.commit("g", [entry("t", 0, 3)]));
    expect((await OffsetStore.open(fs, DATA)).slot(9).committed("g", "t", 0)!.offset).toBe(3);

    // A complete record that fails its checksum is corruption, even when a later one is intact.
    await overwrite(`${lines[0]!.replace('"offset":1', '"offset":7')}\n${lines[1]}\n`);
    let error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as CorruptStateError).path).toContain(path);
    expect((error as Error).message).toMatch(/checksum mismatch/);
    // Records out of sequence (a record repeated).
    await overwrite(`${lines[0]}\n${lines[0]}\n`);
    error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toMatch(/record 1 follows record 1/);
    // Another slot's state.
    await overwrite(
      new TextDecoder().decode(encodeState(OFFSETS_JOURNAL_FORMAT, 1, { seq: 1, slot: { slot: 8, nextSeq: 0, groups: [], offsets: [], staged: [] } })),
    );
    error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toMatch(/holds slot 8/);
  });

  test("a failed write whose bytes could not be cut off is cut before the next record (no false corruption)", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(6, (d) => d.commit("g", [entry("t", 0, 1)]));
    // A long record lands whole, then the write reports EIO, and the cut-off fails too.
    fs.failNextWrite(offsetsJournalPath(DATA, 6), { torn: 1 << 20 });
    fs.failNextTruncate(offsetsJournalPath(DATA, 6));
    await expect(store.mutate(6, (d) => d.commit("g", [entry("t", 0, 2, "m".repeat(400))]))).rejects.toThrow();
    // A shorter record next: written over the failed one's first bytes, with its tail cut first.
    await store.mutate(6, (d) => d.commit("g", [entry("t", 0, 3)]));
    await store.close();
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(6).committed("g", "t", 0)!.offset).toBe(3);
  });

  test("compaction folds the journal into the checkpoint and keeps the journal bounded", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 4096, compactRatio: 4 });
    let largest = 0;
    for (let i = 1; i <= 200; i++) {
      await store.mutate(3, (d) => d.commit("g", [entry("t", i % 7, i)]));
      largest = Math.max(largest, (await fs.readFile(offsetsJournalPath(DATA, 3))).length);
    }
    // Bounded near the threshold (a record is ~1 KiB here): without compaction it would reach ~200 KiB.
    expect(largest).toBeLessThan(2 * 4096);
    expect((await fs.stat(offsetsSlotPath(DATA, 3)))?.size ?? 0).toBeGreaterThan(0);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    for (let p = 0; p < 7; p++) expect(reopened.slot(3).committed("g", "t", p)!.offset).toBe(200 - ((200 - p) % 7));
  });

  test("tmp files left by a crash are ignored and removed", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(0, (d) => d.commit("g", [entry("t", 0, 1)]));
    const h = await fs.open(`${offsetsSlotPath(DATA, 0)}.0123456789abcdef.tmp`, "w");
    await h.write(new TextEncoder().encode("garbage"), 0);
    await h.close();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(0).committed("g", "t", 0)!.offset).toBe(1);
    expect((await fs.readdir(`${DATA}/__cluster/offsets`)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  test("staged offsets: stage, commit and discard are durable", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(5, (d) => d.stage("g", 1, [entry("t", 0, 10)]));
    await store.mutate(5, (d) => d.stage("g", 2, [entry("t", 1, 20)]));
    fs.crash();
    const s1 = await OffsetStore.open(fs, DATA);
    expect(s1.slot(5).hasPendingTransactionalOffset("g", "t", 0)).toBe(true);
    expect(await s1.mutate(5, (d) => d.completeTransaction("g", 1, true))).toBe(1);
    expect(await s1.mutate(5, (d) => d.completeTransaction("g", 2, false))).toBe(1);
    fs.crash();
    const s2 = await OffsetStore.open(fs, DATA);
    expect(s2.slot(5).committed("g", "t", 0)!.offset).toBe(10);
    expect(s2.slot(5).committed("g", "t", 1)).toBeUndefined();
    expect(s2.slot(5).hasOpenTransactions("g")).toBe(false);
  });

  test("closing waits for every slot's writes, also one that starts while it waits, then closes the journals", async () => {
    const fs = new MemoryFs();
    // Like a real file descriptor, a handle refuses every operation once closed; open ones are counted.
    // The fsync of a journal whose path is in `held` waits until its release is called.
    let open = 0;
    const held = new Map<string, { release: () => void; reached: () => void; gate: Promise<void>; waiting: Promise<void> }>();
    const hold = (path: string) => {
      let release!: () => void;
      let reached!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const waiting = new Promise<void>((r) => (reached = r));
      held.set(path, { release, reached, gate, waiting });
      return held.get(path)!;
    };
    const strict: Fs = Object.create(fs, {
      open: {
        value: async (path: string, mode: "r" | "rw" | "w"): Promise<FileHandle> => {
          const handle = await fs.open(path, mode);
          open += 1;
          let closed = false;
          const live = <T>(op: () => Promise<T>) => (closed ? Promise.reject(new Error(`EBADF: ${path} is closed`)) : op());
          return {
            write: (data, position) => live(() => handle.write(data, position)),
            read: (length, position) => live(() => handle.read(length, position)),
            truncate: (length) => live(() => handle.truncate(length)),
            fsync: () =>
              live(async () => {
                const gate = held.get(path);
                if (gate !== undefined) {
                  held.delete(path);
                  gate.reached();
                  await gate.gate;
                }
                await handle.fsync();
              }),
            size: () => live(() => handle.size()),
            close: () => live(() => ((closed = true), (open -= 1), handle.close())),
          };
        },
      },
    });
    const store = await OffsetStore.open(strict, DATA);
    const slot7 = hold(offsetsJournalPath(DATA, 7));
    const first = store.mutate(7, (d) => d.commit("g", [entry("t", 0, 1)]));
    await slot7.waiting;
    let closed = false;
    const closing = store.close().then(() => (closed = true));
    // A turn of the event loop: the close gets past the idle slots and waits on slot 7.
    await new Promise((resolve) => setImmediate(resolve));
    // The close now waits for slot 7. A write to slot 2 (which the close has already looked at) starts
    // and is held in its fsync while slot 7's write finishes.
    const slot2 = hold(offsetsJournalPath(DATA, 2));
    const late = store.mutate(2, (d) => d.commit("h", [entry("t", 0, 2)]));
    await slot2.waiting;
    slot7.release();
    await first;
    // Let everything that can run run (turns of the event loop, not a timer): the close must still wait.
    for (let turn = 0; turn < 20 && !closed; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    slot2.release();
    await late;
    await closing;
    // Every journal the store opened is closed.
    expect(open).toBe(0);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(7).committed("g", "t", 0)!.offset).toBe(1);
    expect(reopened.slot(2).committed("h", "t", 0)!.offset).toBe(2);
  });

  test("closing waits for the writes in flight and refuses later ones", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    const pending = store.mutate(0, (d) => d.commit("g", [entry("t", 0, 1)]));
    await store.close();
    await pending;
    expect(store.slot(0).committed("g", "t", 0)!.offset).toBe(1);
    await expect(store.mutate(0, () => undefined)).rejects.toThrow(/closed/);
  });
});
