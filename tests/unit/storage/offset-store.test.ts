/**
 * The offsets store: one serial writer per slot with group commit, durable before answering, only durable
 * state visible, crash safety on the in-memory Fs, refusal of damaged files, staged transactional offsets,
 * journal records of changes replayed at load, the previous version's files, compaction.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import type { OffsetCommitEntry, OffsetSlotDraft } from "../../../src/domain/groups/offsets.ts";
import type { FileHandle, Fs } from "../../../src/platform/fs.ts";
import { bodyFromSlot, type SlotBody } from "../../../src/storage/offset-journal.ts";
import {
  OFFSETS_JOURNAL_FORMAT,
  OFFSETS_SLOT_FORMAT,
  OffsetStore,
  offsetsJournalPath,
  offsetsSlotPath,
} from "../../../src/storage/offset-store.ts";
import { encodeState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { cleanShutdownPath } from "../../../src/storage/clean-shutdown.ts";
import { encodeJournalHeader } from "../../../src/storage/journal-file.ts";

const DATA = "/data";

/** As after a crash: no clean-shutdown record, so that only the journal's own checks apply. */
async function forgetCleanShutdown(fs: Fs): Promise<void> {
  const path = cleanShutdownPath(`${DATA}/__cluster/offsets`);
  if ((await fs.stat(path)) !== undefined) await fs.unlink(path);
}

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
    // The slot's first write also writes its first checkpoint and journal header.
    await store.mutate(3, (d) => d.commit("first", [entry("t", 0, 0)]));
    const before = fs.fsyncs;
    const commits = Array.from({ length: 50 }, (_, i) => store.mutate(3, (d) => d.commit(`g${i}`, [entry("t", 0, i)])));
    await Promise.all(commits);
    expect(store.writesOf(3)).toBe(2);
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
    // Compaction after every write: the state is in the checkpoint and the journal is a header.
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 0, compactRatio: 0 });
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 1)]));
    // Compaction runs after the answer, before the slot's next write.
    await store.idle();
    expect(new TextDecoder().decode(await fs.readFile(offsetsJournalPath(DATA, 9)))).toMatch(/^\{"format":"journal-header"[^\n]*\n$/);
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

  test("the journal: every record is replayed; a torn last record is cut off; a damaged one is refused", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 1)]));
    await store.mutate(9, (d) => d.commit("g", [entry("t", 0, 2)]));
    await store.close();
    await forgetCleanShutdown(fs);
    const path = offsetsJournalPath(DATA, 9);
    const good = await fs.readFile(path);
    // The header, then the two records.
    const [header, ...lines] = new TextDecoder().decode(good).split("\n").filter(Boolean);
    expect(lines.length).toBe(2);
    expect((await OffsetStore.open(fs, DATA)).slot(9).committed("g", "t", 0)!.offset).toBe(2);
    const overwrite = async (text: string, withHeader = true) => {
      const h = await fs.open(path, "w");
      await h.write(new TextEncoder().encode(withHeader ? `${header}\n${text}` : text), 0);
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
    expect(new TextDecoder().decode(await fs.readFile(path))).toBe(`${header}\n${lines[0]}\n`);
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
    // Another slot's record, of either version.
    await overwrite(
      new TextDecoder().decode(encodeState(OFFSETS_JOURNAL_FORMAT, 1, { seq: 1, slot: { slot: 8, nextSeq: 0, groups: [], offsets: [], staged: [] } })),
    );
    error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toMatch(/holds slot 8/);
    await overwrite(new TextDecoder().decode(encodeState(OFFSETS_JOURNAL_FORMAT, 2, { seq: 1, slot: 8, nextSeq: 0, groups: [] })));
    error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toMatch(/holds slot 8/);
    // A version this build does not read.
    await overwrite(new TextDecoder().decode(encodeState(OFFSETS_JOURNAL_FORMAT, 3, { seq: 1, slot: 9, nextSeq: 0, groups: [] })));
    error = await openError();
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toMatch(/unknown version 3 of format group-offsets-journal \(this build reads versions 2, 1\)/);
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

  // ---- journal records of changes (version 2), recovery, the previous version, compaction -------------

  const text = new TextDecoder();
  const utf8 = new TextEncoder();
  const overwriteFile = async (fs: Fs, path: string, bytes: Uint8Array | string) => {
    const h = await fs.open(path, "w");
    await h.write(typeof bytes === "string" ? utf8.encode(bytes) : bytes, 0);
    await h.fsync();
    await h.close();
  };
  const openError = (fs: Fs, options = {}) =>
    OffsetStore.open(fs, DATA, options).then(
      () => undefined,
      (e: unknown) => e,
    );
  const record = (groupId: string, generationId: number) => ({
    groupId,
    protocolType: "consumer",
    protocolName: "range",
    generationId,
    leaderId: "m",
    state: "Stable" as const,
    stateTimestampMs: 5,
  });

  test("a journal record carries what its write changed, not the slot: one staged offset in a slot of 20 groups x 50 partitions", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    for (let g = 0; g < 20; g++) await store.mutate(3, (d) => d.commit(`group-${g}`, Array.from({ length: 50 }, (_, p) => entry("input", p, p))));
    const journal = offsetsJournalPath(DATA, 3);
    const size = async () => (await fs.stat(journal))!.size;
    const before = await size();
    await store.mutate(3, (d) => d.stage("group-7", 4242, [entry("input", 3, 1000)]));
    const staged = await size();
    await store.mutate(3, (d) => d.completeTransaction("group-7", 4242, true));
    const committed = await size();
    // The whole slot is ~1000 offsets (> 100 KiB as JSON); the two records are a few hundred bytes.
    expect(staged - before).toBeLessThan(500);
    expect(committed - staged).toBeLessThan(300);
    expect(before).toBeGreaterThan(100_000);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(bodyFromSlot(3, 0, reopened.slot(3))).toEqual(bodyFromSlot(3, 0, store.slot(3)));
    expect(reopened.slot(3).committed("group-7", "input", 3)!.offset).toBe(1000);
  });

  /** One write of every kind of change, each its own record; returns the slot's body after each (index 0: before any). */
  async function writeEveryKind(store: OffsetStore, slot: number): Promise<SlotBody[]> {
    const states: SlotBody[] = [bodyFromSlot(slot, 0, store.slot(slot))];
    const writes: ((d: OffsetSlotDraft) => unknown)[] = [
      (d) => (d.setRecord("g", record("g", 1)), d.commit("g", [entry("t", 0, 1), entry("t", 1, 2), entry("u", 0, 3)])),
      (d) => d.commit("h", [entry("t", 0, 100), entry("t", 1, 101)]),
      (d) => d.stage("g", 5, [entry("t", 0, 10), entry("t", 1, 11)]),
      (d) => d.stage("g", 6, [entry("u", 0, 30), entry("u", 1, 31)]),
      (d) => d.commit("g", [entry("t", 1, 12, "newer than the staged one")]),
      (d) => d.completeTransaction("g", 5, true),
      (d) => d.completeTransaction("g", 6, false),
      (d) => d.stage("g", 5, [entry("u", 0, 40), entry("u", 2, 41)]),
      (d) => d.deleteOffsets("g", [{ topic: "u", partition: 0 }]),
      (d) => d.setRecord("g", record("g", 2)),
      (d) => d.expireGroupOffsets("h", undefined, 1_800_000_000_000, 1000, 1),
      (d) => d.deleteGroup("h"),
      (d) => d.commit("i", [entry("t", 0, 7)]),
    ];
    for (const write of writes) {
      await store.mutate(slot, write);
      states.push(bodyFromSlot(slot, 0, store.slot(slot)));
    }
    return states;
  }

  test("recovery replays records of every kind of change; a torn tail after any record loses only the torn one", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    const states = await writeEveryKind(store, 1);
    await store.close();
    await forgetCleanShutdown(fs);
    const path = offsetsJournalPath(DATA, 1);
    const [header, ...lines] = text.decode(await fs.readFile(path)).split("\n").filter(Boolean);
    expect(header).toContain('"format":"journal-header"');
    expect(lines.length).toBe(states.length - 1);
    expect(lines.every((line) => line.includes('"version":2'))).toBe(true);
    for (let k = 0; k < lines.length; k++) {
      const complete = [header, ...lines.slice(0, k)].map((line) => `${line}\n`).join("");
      await overwriteFile(fs, path, complete + lines[k]!.slice(0, Math.floor(lines[k]!.length / 2)));
      const reopened = await OffsetStore.open(fs, DATA);
      expect(bodyFromSlot(1, 0, reopened.slot(1))).toEqual(states[k]!);
      // The torn tail is cut off, durably, and the next write lands on a clean end.
      expect(text.decode(await fs.readFile(path))).toBe(complete);
      await reopened.close();
      await forgetCleanShutdown(fs);
    }
    await overwriteFile(fs, path, [header, ...lines].map((line) => `${line}\n`).join(""));
    expect(bodyFromSlot(1, 0, (await OffsetStore.open(fs, DATA)).slot(1))).toEqual(states.at(-1)!);
  });

  test("a damaged record before the last one is refused with its position, never skipped", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await writeEveryKind(store, 1);
    await store.close();
    await forgetCleanShutdown(fs);
    const path = offsetsJournalPath(DATA, 1);
    // lines[0] is the header, lines[k] record k.
    const lines = text.decode(await fs.readFile(path)).split("\n").filter(Boolean);
    const position = lines.slice(0, 2).reduce((n, line) => n + utf8.encode(line).length + 1, 0);
    const damaged = [...lines];
    damaged[2] = damaged[2]!.replace('"offset":10', '"offset":19');
    expect(damaged[2]).not.toBe(lines[2]);
    await overwriteFile(fs, path, damaged.map((line) => `${line}\n`).join(""));
    const error = await openError(fs);
    expect(error).toBeInstanceOf(CorruptStateError);
    expect((error as Error).message).toContain(`${path} (record at byte ${position})`);
    expect((error as Error).message).toMatch(/checksum mismatch/);
    // A record missing from the middle: the next one does not follow.
    await overwriteFile(fs, path, [lines[0], lines[1], lines[3]].map((line) => `${line}\n`).join(""));
    expect(((await openError(fs)) as Error).message).toMatch(/record 3 follows record 1/);
    // Records reordered.
    await overwriteFile(fs, path, [lines[0], lines[2], lines[1]].map((line) => `${line}\n`).join(""));
    expect(((await openError(fs)) as Error).message).toMatch(/record 2 is first after a header at record 0/);
    // A journal that starts after its header: the records before are missing.
    await overwriteFile(fs, path, [lines[0], ...lines.slice(2)].map((line) => `${line}\n`).join(""));
    expect(((await openError(fs)) as Error).message).toMatch(/record 2 is first after a header at record 0/);
    // A journal of the old format (no header) that starts after its checkpoint.
    await overwriteFile(fs, path, lines.slice(2).map((line) => `${line}\n`).join(""));
    expect(((await openError(fs)) as Error).message).toMatch(/record 2 continues a checkpoint at record 0 .*slot-1\.json missing or older/);
    // A well-formed record that changes what the state does not hold.
    const stray = encodeState(OFFSETS_JOURNAL_FORMAT, 2, { seq: 2, slot: 1, nextSeq: 50, groups: [{ groupId: "g", uncommit: [{ topic: "t", partitions: [9] }] }] });
    await overwriteFile(fs, path, `${lines[0]}\n${lines[1]}\n${text.decode(stray)}`);
    const strayError = await openError(fs);
    expect(strayError).toBeInstanceOf(CorruptStateError);
    expect((strayError as Error).message).toMatch(/does not continue the slot's state: it removes the committed offset of group "g" t-9, which does not exist/);
  });

  test("a data directory of the previous version (whole-state records) loads and goes on in the new version", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/__cluster/offsets`);
    const committed = (topic: string, partition: number, offset: number, seq: number) => ({
      groupId: "g",
      topic,
      partition,
      offset,
      leaderEpoch: 3,
      metadata: "",
      commitTimestampMs: 1_700_000_000_000,
      expireTimestampMs: null,
      seq,
    });
    const staged = { groupId: "g", producerId: 9, topic: "t", partition: 1, offset: 50, leaderEpoch: 3, metadata: "", commitTimestampMs: 1_700_000_000_000, seq: 2 };
    const v1Checkpoint = { slot: 4, nextSeq: 2, groups: [record("g", 1)], offsets: [committed("t", 0, 1, 0), committed("t", 1, 2, 1)], staged: [] };
    const v1States = [
      { slot: 4, nextSeq: 3, groups: [record("g", 1)], offsets: [committed("t", 0, 1, 0), committed("t", 1, 2, 1)], staged: [staged] },
      { slot: 4, nextSeq: 4, groups: [record("g", 2)], offsets: [committed("t", 0, 5, 3), committed("t", 1, 2, 1)], staged: [staged] },
    ];
    const v1Journal = v1States.map((slot, i) => text.decode(encodeState(OFFSETS_JOURNAL_FORMAT, 1, { seq: i + 1, slot }))).join("");
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 1, v1Checkpoint));
    await overwriteFile(fs, offsetsJournalPath(DATA, 4), v1Journal);
    for (const dir of ["/", DATA, `${DATA}/__cluster`, `${DATA}/__cluster/offsets`]) await fs.fsyncDir(dir);

    // The last whole state is the slot.
    const store = await OffsetStore.open(fs, DATA);
    expect(bodyFromSlot(4, 0, store.slot(4))).toEqual({ ...v1States[1]!, lastSeq: 0 });
    // Rewritten at once in the current format: a checkpoint of version 3 up to record 2, then a journal
    // header; the next write appends a record of changes (version 2, numbered on).
    const upgraded = JSON.parse(text.decode(await fs.readFile(offsetsSlotPath(DATA, 4)))) as { version: number; body: { lastSeq: number; generation: number } };
    expect([upgraded.version, upgraded.body.lastSeq, upgraded.body.generation]).toEqual([3, 2, 1]);
    await store.mutate(4, (d) => d.completeTransaction("g", 9, true));
    const lines = text.decode(await fs.readFile(offsetsJournalPath(DATA, 4))).split("\n").filter(Boolean);
    type Line = { format: string; version: number; body: { seq?: number; baseSeq?: number; generation?: number } };
    expect(lines.map((line) => JSON.parse(line) as Line).map((r) => [r.format, r.version, r.body.seq ?? r.body.baseSeq])).toEqual([
      ["journal-header", 1, 2],
      [OFFSETS_JOURNAL_FORMAT, 2, 3],
    ]);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA, { compactBytesMin: 0, compactRatio: 0 });
    expect(reopened.slot(4).committed("g", "t", 1)!.offset).toBe(50);
    expect(reopened.slot(4).committed("g", "t", 0)!.offset).toBe(5);
    expect(reopened.slot(4).groups.get("g")!.record!.generationId).toBe(2);
    expect(reopened.slot(4).hasOpenTransactions("g")).toBe(false);
    // The next compaction writes a version 3 checkpoint of the next generation, which includes every record so far.
    await reopened.mutate(4, (d) => d.commit("g", [entry("t", 2, 9)]));
    await reopened.idle();
    const expected = bodyFromSlot(4, 0, reopened.slot(4));
    const checkpoint = JSON.parse(text.decode(await fs.readFile(offsetsSlotPath(DATA, 4)))) as { version: number; body: { lastSeq: number; generation: number } };
    expect([checkpoint.version, checkpoint.body.lastSeq, checkpoint.body.generation]).toEqual([3, 4, 2]);
    expect(text.decode(await fs.readFile(offsetsJournalPath(DATA, 4))).split("\n").filter(Boolean).length).toBe(1);
    fs.crash();
    const compacted = await OffsetStore.open(fs, DATA);
    expect(compacted.slot(4).committed("g", "t", 2)!.offset).toBe(9);
    expect(bodyFromSlot(4, 0, compacted.slot(4))).toEqual(expected);

    // A version 1 checkpoint alone loads too; one of version 1 that has a lastSeq is not one.
    await overwriteFile(fs, offsetsJournalPath(DATA, 4), "");
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 1, v1Checkpoint));
    expect(bodyFromSlot(4, 0, (await OffsetStore.open(fs, DATA)).slot(4))).toEqual({ ...v1Checkpoint, lastSeq: 0 });
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 1, { ...v1Checkpoint, lastSeq: 3 }));
    expect(((await openError(fs)) as Error).message).toMatch(/lastSeq is not a field of version 1/);
    // A version 2 checkpoint (no generation) with a journal of version 2 records and no header loads too.
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 2, { ...v1Checkpoint, lastSeq: 0 }));
    const v2Record = encodeState(OFFSETS_JOURNAL_FORMAT, 2, { seq: 1, slot: 4, nextSeq: 3, groups: [{ groupId: "g", commit: [{ topic: "t", partitions: [{ partition: 0, offset: 8, leaderEpoch: 3, metadata: "", commitTimestampMs: 1_700_000_000_000, expireTimestampMs: null, seq: 2 }] }] }] });
    await overwriteFile(fs, offsetsJournalPath(DATA, 4), v2Record);
    expect((await OffsetStore.open(fs, DATA)).slot(4).committed("g", "t", 0)!.offset).toBe(8);
    // A version 2 checkpoint never has a generation, a version 3 one always does.
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 2, { ...v1Checkpoint, lastSeq: 0, generation: 1 }));
    expect(((await openError(fs)) as Error).message).toMatch(/generation is not a field of versions 1 and 2/);
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 3, { ...v1Checkpoint, lastSeq: 3 }));
    expect(((await openError(fs)) as Error).message).toMatch(/invalid generation/);
    await overwriteFile(fs, offsetsSlotPath(DATA, 4), encodeState(OFFSETS_SLOT_FORMAT, 4, { ...v1Checkpoint, lastSeq: 3 }));
    expect(((await openError(fs)) as Error).message).toMatch(/unknown version 4 of format group-offsets-slot \(this build reads versions 3, 2, 1\)/);
  });

  test("compaction: the checkpoint names its last record and generation; a crash before the journal was replaced leaves the previous journal, which must end at that record", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 0, compactRatio: 0 });
    const journal = offsetsJournalPath(DATA, 5);
    const checkpointPath = offsetsSlotPath(DATA, 5);
    await store.mutate(5, (d) => d.commit("g", [entry("t", 0, 100)]));
    await store.idle();
    // Generation 1 is the slot's first (empty) checkpoint, generation 2 the fold after record 1.
    const header = (bytes: Uint8Array) => (JSON.parse(text.decode(bytes).split("\n")[0]!) as { body: { generation: number; baseSeq: number } }).body;
    expect(header(await fs.readFile(journal))).toEqual({ generation: 2, baseSeq: 1, journal: OFFSETS_JOURNAL_FORMAT } as never);
    // The next fold writes its checkpoint, and the journal's replacement fails (its tmp file's write):
    // the journal is the previous generation's, as after a crash between the two.
    fs.failNextWrite(`${journal}.`);
    await store.mutate(5, (d) => d.stage("g", 77, [entry("t", 0, 20), entry("t", 1, 21)]));
    await store.idle();
    const checkpoint = JSON.parse(text.decode(await fs.readFile(checkpointPath))) as { body: { lastSeq: number; generation: number } };
    expect([checkpoint.body.generation, checkpoint.body.lastSeq]).toEqual([3, 2]);
    const previous = await fs.readFile(journal);
    expect(header(previous)).toMatchObject({ generation: 2, baseSeq: 1 });
    const expected = bodyFromSlot(5, 0, store.slot(5));
    fs.crash();
    // Its records are all in the checkpoint: skipped, and the journal is replaced at load.
    const resumed = await OffsetStore.open(fs, DATA);
    expect(bodyFromSlot(5, 0, resumed.slot(5))).toEqual(expected);
    expect(header(await fs.readFile(journal))).toMatchObject({ generation: 3, baseSeq: 2 });
    // The same previous journal without its last record lost what the checkpoint was folded from.
    await overwriteFile(fs, journal, previous.subarray(0, text.decode(previous).indexOf("\n") + 1));
    expect(((await openError(fs)) as Error).message).toMatch(/of generation 2 ends at record 1, but .*slot-5\.json \(generation 3\) was folded from it up to record 2/);
    // A journal of another generation, and one emptied, are refused too.
    await overwriteFile(fs, journal, encodeJournalHeader({ journal: OFFSETS_JOURNAL_FORMAT, generation: 7, baseSeq: 2 }));
    expect(((await openError(fs)) as Error).message).toMatch(/is of generation 7, but .*slot-5\.json is of generation 3/);
    await overwriteFile(fs, journal, "");
    expect(((await openError(fs)) as Error).message).toMatch(/slot-5\.journal: is empty, but .*slot-5\.json \(generation 3, up to record 2\) is always followed by a journal with a header/);
    await fs.unlink(journal);
    expect(((await openError(fs)) as Error).message).toMatch(/slot-5\.journal: is missing, but/);
    // A journal whose checkpoint is gone.
    await overwriteFile(fs, journal, encodeJournalHeader({ journal: OFFSETS_JOURNAL_FORMAT, generation: 3, baseSeq: 2 }));
    await fs.unlink(checkpointPath);
    expect(((await openError(fs)) as Error).message).toMatch(/is of generation 3, but its checkpoint .*slot-5\.json is missing/);
  });

  test("a fold whose journal replacement failed replaces it before the next append", async () => {
    const fs = new MemoryFs();
    // Folds once the journal has a header and two records, not one (a header and a record are about 420 bytes).
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 560, compactRatio: 0 });
    const journal = offsetsJournalPath(DATA, 5);
    await store.mutate(5, (d) => d.commit("g", [entry("t", 0, 1)]));
    expect((await fs.readFile(journal)).length).toBeLessThan(560);
    fs.failNextWrite(`${journal}.`);
    await store.mutate(5, (d) => d.commit("g", [entry("t", 0, 2)]));
    await store.idle();
    // The checkpoint of generation 2 is written, the journal is still generation 1's: the next append
    // goes to a new journal of generation 2, not after the records the checkpoint holds.
    await store.mutate(5, (d) => d.commit("g", [entry("t", 0, 3)]));
    await store.idle();
    const lines = text.decode(await fs.readFile(journal)).split("\n").filter(Boolean);
    expect(lines.length).toBe(2);
    expect((JSON.parse(lines[0]!) as { body: { generation: number } }).body.generation).toBe(2);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(5).committed("g", "t", 0)!.offset).toBe(3);
  });

  test("a write whose changes cancel out writes the slot's sequence counter only", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA);
    await store.mutate(0, (d) => {
      d.commit("g", [entry("t", 0, 1), entry("t", 1, 1)]);
      d.deleteGroup("g");
    });
    expect(store.writesOf(0)).toBe(1);
    expect(store.slot(0).nextSeq).toBe(2);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(0).nextSeq).toBe(2);
    expect(reopened.slot(0).groups.size).toBe(0);
  });

  test("a failed fsync while compacting is fatal; what was acknowledged survives the crash", async () => {
    const fs = new MemoryFs();
    const store = await OffsetStore.open(fs, DATA, { compactBytesMin: 0, compactRatio: 0 });
    await store.mutate(2, (d) => d.commit("g", [entry("t", 0, 1)]));
    await store.idle();
    // The checkpoint's tmp file (slot-2.json.<nonce>.tmp) fails its fsync in the compaction after the next write.
    fs.failNextFsync(offsetsSlotPath(DATA, 2), { target: "file" });
    await store.mutate(2, (d) => d.stage("g", 3, [entry("t", 0, 2)]));
    await store.idle();
    await expect(store.mutate(2, (d) => d.completeTransaction("g", 3, true))).rejects.toBeInstanceOf(FatalError);
    await expect(store.mutate(0, (d) => d.commit("h", [entry("t", 0, 1)]))).rejects.toBeInstanceOf(FatalError);
    fs.crash();
    const reopened = await OffsetStore.open(fs, DATA);
    expect(reopened.slot(2).committed("g", "t", 0)!.offset).toBe(1);
    expect(reopened.slot(2).stagedOf("g", 3).get("t")!.get(0)!.offset).toBe(2);
  });
});
