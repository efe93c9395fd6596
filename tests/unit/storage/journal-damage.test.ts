/**
 * Damage to the slot stores' files (transaction state, group offsets) is never taken for less state:
 * each case below is what a disk, a backup restore or a hand edit can do to a journal, and each must fail
 * the load with a CorruptStateError naming the file, except the one damage a crash itself leaves (a torn
 * last line), which is cut off. Run against both stores, which share journal-file.ts and clean-shutdown.ts.
 */
import { describe, expect, test } from "bun:test";
import { slotOf } from "../../../src/cluster/ownership.ts";
import type { TxnEntry } from "../../../src/domain/txn/txn-state.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { cleanShutdownPath } from "../../../src/storage/clean-shutdown.ts";
import { OffsetStore, offsetsDir, offsetsJournalPath, offsetsSlotPath } from "../../../src/storage/offset-store.ts";
import { encodeState } from "../../../src/storage/state-file.ts";
import { TXN_JOURNAL_FORMAT, TXN_SLOT_FORMAT, TxnStateStore, txnJournalPath, txnSlotPath, txnStateDir } from "../../../src/storage/txn-state-store.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const T0 = 1_700_000_000_000;
const utf8 = new TextEncoder();
const text = new TextDecoder();

/** One store behind the same few operations: open (loading the slot), write value n, read the value. */
interface Subject {
  name: string;
  dir: string;
  journal: string;
  checkpoint: string;
  /** `compactEveryWrite`: fold after every write (thresholds 0). */
  open(fs: MemoryFs, compactEveryWrite?: boolean): Promise<Handle>;
}

interface Handle {
  write(n: number): Promise<void>;
  read(): Promise<number | undefined>;
  verify(): Promise<{ checked: number; skipped: number; problems: readonly CorruptStateError[] }>;
  repair(path: string): Promise<boolean>;
  close(): Promise<void>;
}

function txnEntry(n: number): TxnEntry {
  return {
    transactionalId: "tx",
    producerId: 1000 + n,
    lastProducerId: 1000,
    epoch: n,
    lastEpoch: -1,
    timeoutMs: 60_000,
    state: "Empty",
    partitions: [],
    groups: [],
    ongoingSinceMs: -1,
    updatedMs: T0 + n,
  };
}

const TXN: Subject = {
  name: "transaction state",
  dir: txnStateDir(DATA),
  journal: txnJournalPath(DATA, slotOf("tx")),
  checkpoint: txnSlotPath(DATA, slotOf("tx")),
  async open(fs, compactEveryWrite) {
    const store = await TxnStateStore.open(fs, DATA, { slotOf, ...(compactEveryWrite === true ? { compactBytesMin: 0, compactRatio: 0 } : {}) });
    await store.loadAll();
    return {
      write: async (n) => void (await store.update("tx", () => txnEntry(n))),
      read: async () => (await store.get("tx"))?.epoch,
      verify: () => store.verify(),
      repair: (path) => store.repair(path),
      close: () => store.close(),
    };
  },
};

const OFFSETS_SLOT = 3;
const OFFSETS: Subject = {
  name: "group offsets",
  dir: offsetsDir(DATA),
  journal: offsetsJournalPath(DATA, OFFSETS_SLOT),
  checkpoint: offsetsSlotPath(DATA, OFFSETS_SLOT),
  async open(fs, compactEveryWrite) {
    const store = await OffsetStore.open(fs, DATA, compactEveryWrite === true ? { compactBytesMin: 0, compactRatio: 0 } : {});
    return {
      write: async (n) => void await store.mutate(OFFSETS_SLOT, (d) => d.commit("g", [{ topic: "t", partition: 0, offset: n, leaderEpoch: 0, metadata: "", commitTimestampMs: T0, expireTimestampMs: null }])),
      read: async () => store.slot(OFFSETS_SLOT).committed("g", "t", 0)?.offset,
      verify: () => store.verify(),
      repair: (path) => store.repair(path),
      close: () => store.close(),
    };
  },
};

async function overwrite(fs: MemoryFs, path: string, bytes: Uint8Array | string): Promise<void> {
  const handle = await fs.open(path, "w");
  await handle.write(typeof bytes === "string" ? utf8.encode(bytes) : bytes, 0);
  await handle.fsync();
  await handle.close();
}

async function append(fs: MemoryFs, path: string, bytes: Uint8Array | string): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.write(typeof bytes === "string" ? utf8.encode(bytes) : bytes, await handle.size());
  await handle.fsync();
  await handle.close();
}

/** The journal's lines (newline included). */
async function linesOf(fs: MemoryFs, path: string): Promise<string[]> {
  return text.decode(await fs.readFile(path)).split(/(?<=\n)/).filter((line) => line.length > 0);
}

/** As after a crash: the clean-shutdown record is gone, so only the journal's own checks apply. */
async function forgetCleanShutdown(fs: MemoryFs, subject: Subject): Promise<void> {
  await fs.unlink(cleanShutdownPath(subject.dir));
}

async function openError(subject: Subject, fs: MemoryFs): Promise<CorruptStateError> {
  const error = await subject.open(fs).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CorruptStateError);
  return error as CorruptStateError;
}

/** A store with values 1, 2, 3 written (a header and three records after the slot's first checkpoint), closed cleanly. */
async function written(subject: Subject): Promise<MemoryFs> {
  const fs = new MemoryFs();
  const store = await subject.open(fs);
  for (const n of [1, 2, 3]) await store.write(n);
  await store.close();
  expect(await fs.stat(cleanShutdownPath(subject.dir))).toBeDefined();
  expect((await linesOf(fs, subject.journal)).length).toBe(4);
  return fs;
}

for (const subject of [TXN, OFFSETS]) {
  describe(`${subject.name}: damaged journals are caught`, () => {
    test("a clean restart reads everything", async () => {
      const fs = await written(subject);
      expect(await (await subject.open(fs)).read()).toBe(3);
    });

    test("an emptied journal is caught, after a clean shutdown and after a crash (its checkpoint says a journal with a header follows)", async () => {
      const fs = await written(subject);
      await overwrite(fs, subject.journal, "");
      let error = await openError(subject, fs);
      expect(error.path).toBe(subject.journal);
      expect(error.message).toMatch(/records were lost/);
      await forgetCleanShutdown(fs, subject);
      error = await openError(subject, fs);
      expect(error.path).toBe(subject.journal);
      expect(error.message).toMatch(/is empty, but .* is always followed by a journal with a header/);
      await fs.unlink(subject.journal);
      expect((await openError(subject, fs)).message).toMatch(/is missing, but/);
    });

    test("records lost at a record boundary are caught after a clean shutdown, and a retried start fails again", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      await overwrite(fs, subject.journal, lines.slice(0, 3).join(""));
      const error = await openError(subject, fs);
      expect(error.path).toBe(subject.journal);
      expect(error.message).toMatch(/ending in record 2\), but the clean shutdown .* left it at \d+ bytes, generation \d+, ending in record 3: records were lost/);
      // The record is kept until the first write: the next start is refused too.
      expect((await openError(subject, fs)).message).toMatch(/records were lost/);
    });

    test("after a crash, records lost at a record boundary look like writes never made (the limit of what the files can show)", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      await overwrite(fs, subject.journal, lines.slice(0, 3).join(""));
      await forgetCleanShutdown(fs, subject);
      expect(await (await subject.open(fs)).read()).toBe(2);
    });

    test("a different last record of the same number is caught after a clean shutdown", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      // The second record renumbered as the third: well-formed, in sequence, same length or not.
      const renumbered = lines[2]!.replace('"seq":2', '"seq":3');
      const body = JSON.parse(renumbered) as { format: string; version: number; body: unknown };
      await overwrite(fs, subject.journal, lines.slice(0, 3).join("") + text.decode(encodeState(body.format, body.version, body.body)));
      const error = await openError(subject, fs);
      expect(error.path).toBe(subject.journal);
      expect(error.message).toMatch(/but the clean shutdown/);
    });

    test("a gap or a reordering in the sequence is caught, with or without the clean-shutdown record", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      await forgetCleanShutdown(fs, subject);
      await overwrite(fs, subject.journal, [lines[0], lines[1], lines[3]].join(""));
      expect((await openError(subject, fs)).message).toMatch(/record 3 follows record 1/);
      await overwrite(fs, subject.journal, [lines[0], lines[2], lines[1], lines[3]].join(""));
      expect((await openError(subject, fs)).message).toMatch(/record 2 is first after a header at record \d+/);
    });

    test("a complete line in the middle that does not decode is caught", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      await forgetCleanShutdown(fs, subject);
      await overwrite(fs, subject.journal, [lines[0], lines[1], lines[2]!.replace('"seq":2', '"seq":7'), lines[3]].join(""));
      const error = await openError(subject, fs);
      expect(error.path).toContain(subject.journal);
      expect(error.message).toMatch(/checksum mismatch/);
    });

    test("a journal of another generation or another base is caught", async () => {
      const fs = await written(subject);
      const lines = await linesOf(fs, subject.journal);
      await forgetCleanShutdown(fs, subject);
      const header = JSON.parse(lines[0]!) as { format: string; version: number; body: { generation: number; baseSeq: number; journal: string } };
      const reheaded = (body: object) => text.decode(encodeState(header.format, header.version, { ...header.body, ...body }));
      await overwrite(fs, subject.journal, [reheaded({ generation: header.body.generation + 5 }), ...lines.slice(1)].join(""));
      expect((await openError(subject, fs)).message).toMatch(new RegExp(`is of generation ${header.body.generation + 5}, but .* is of generation ${header.body.generation}`));
      await overwrite(fs, subject.journal, reheaded({ baseSeq: 5 }));
      expect((await openError(subject, fs)).message).toMatch(/follows record 5, but .* holds up to record 0/);
    });

    test("a torn last line after a crash is cut off and the store starts; after a clean shutdown it is damage", async () => {
      const fs = new MemoryFs();
      const store = await subject.open(fs);
      for (const n of [1, 2, 3]) await store.write(n);
      const before = await fs.readFile(subject.journal);
      await append(fs, subject.journal, (await linesOf(fs, subject.journal))[3]!.slice(0, 30));
      fs.crash();
      const reopened = await subject.open(fs);
      expect(await reopened.read()).toBe(3);
      expect(await fs.readFile(subject.journal)).toEqual(before);
      await reopened.write(4);
      await reopened.close();
      await append(fs, subject.journal, '{"format":');
      const error = await openError(subject, fs);
      expect(error.message).toMatch(/ends in 10 bytes of an unterminated record after byte \d+, after a clean shutdown/);
    });

    test("the clean-shutdown record is removed before the first write, and a damaged one is refused", async () => {
      const fs = await written(subject);
      const reopened = await subject.open(fs);
      expect(await fs.stat(cleanShutdownPath(subject.dir))).toBeDefined();
      await reopened.write(4);
      expect(await fs.stat(cleanShutdownPath(subject.dir))).toBeUndefined();
      // Durably: a crash now does not bring it back to vouch for a journal it does not describe.
      fs.crash();
      expect(await fs.stat(cleanShutdownPath(subject.dir))).toBeUndefined();
      expect(await (await subject.open(fs)).read()).toBe(4);
      const closed = await written(subject);
      await overwrite(closed, cleanShutdownPath(subject.dir), "{}");
      const error = await openError(subject, closed);
      expect(error.path).toBe(cleanShutdownPath(subject.dir));
    });

    test("a crash at any step of a slot's first write, or of a write and its fold after a clean start, leaves files that load: never a false alarm", async () => {
      for (const start of ["fresh", "written"] as const) {
        let completed = false;
        for (let ops = 0; !completed; ops++) {
          const fs = start === "fresh" ? new MemoryFs() : await written(subject);
          const store = await subject.open(fs, true);
          fs.haltAfterOps(ops);
          completed = await store.write(4).then(
            () => true,
            () => false,
          );
          fs.crash();
          const reopened = await subject.open(fs);
          const value = await reopened.read();
          if (completed) expect(value).toBe(4);
          else expect(start === "fresh" ? [undefined, 4] : [3, 4]).toContain(value);
          // And the slot goes on from there.
          await reopened.write(5);
          fs.crash();
          expect(await (await subject.open(fs)).read()).toBe(5);
        }
      }
    });

    test("verify while writes and folds run reports nothing on intact files", async () => {
      const fs = new MemoryFs();
      const store = await subject.open(fs, true);
      await store.write(0);
      const reports: Awaited<ReturnType<Handle["verify"]>>[] = [];
      for (let n = 1; n <= 30; n++) {
        const [report] = await Promise.all([store.verify(), store.write(n), store.verify().then((r) => reports.push(r))]);
        reports.push(report);
      }
      expect(reports.flatMap((r) => r.problems)).toEqual([]);
      // The calls met a fold and skipped the slot (the next call checks it).
      expect(reports.some((r) => r.skipped === 1)).toBe(true);
      // The last fold runs after its write was answered; once it is over, the slot is checked.
      let last = await store.verify();
      for (let i = 0; i < 100 && last.skipped > 0; i++) last = await store.verify();
      expect(last).toEqual({ checked: 1, skipped: 0, problems: [] });
    });

    test("repair: a slot whose journal was cut or whose checkpoint went is rewritten from memory; verify and a restart see every write", async () => {
      for (const damage of ["journal cut", "journal emptied", "checkpoint gone"] as const) {
        const fs = new MemoryFs();
        let store = await subject.open(fs);
        for (const n of [1, 2, 3]) await store.write(n);
        const lines = await linesOf(fs, subject.journal);
        if (damage === "journal cut") await overwrite(fs, subject.journal, lines.slice(0, 2).join(""));
        else if (damage === "journal emptied") await overwrite(fs, subject.journal, "");
        else await fs.unlink(subject.checkpoint);
        const found = await store.verify();
        expect(found.problems.length, damage).toBe(1);
        expect(await store.repair(found.problems[0]!.path)).toBe(true);
        expect(await store.verify(), damage).toEqual({ checked: 1, skipped: 0, problems: [] });
        // Writes go on after the repair, and a clean restart loads everything (the cut files would be refused).
        await store.write(4);
        await store.close();
        store = await subject.open(fs);
        expect(await store.read(), damage).toBe(4);
        await store.close();
      }
    });

    test("repair waits for a write in flight and holds the next ones until it is done; a path that is not the store's is refused", async () => {
      const fs = new MemoryFs();
      const store = await subject.open(fs);
      await store.write(1);
      const writes = [store.write(2), store.repair(subject.journal), store.write(3)];
      await Promise.all(writes);
      expect(await store.verify()).toEqual({ checked: 1, skipped: 0, problems: [] });
      expect(await store.read()).toBe(3);
      expect(await store.repair("/nowhere/slot-0.journal")).toBe(false);
      await store.close();
      const again = await subject.open(fs);
      expect(await again.read()).toBe(3);
      await again.close();
    });

    test("verify: the files match what this process wrote; a journal cut, emptied or changed, or a checkpoint gone, is reported", async () => {
      const fs = new MemoryFs();
      const store = await subject.open(fs);
      expect(await store.verify()).toEqual({ checked: 0, skipped: 0, problems: [] });
      for (const n of [1, 2, 3]) await store.write(n);
      expect(await store.verify()).toEqual({ checked: 1, skipped: 0, problems: [] });
      const good = await fs.readFile(subject.journal);
      const lines = await linesOf(fs, subject.journal);
      const expectProblem = async (pattern: RegExp, path = subject.journal) => {
        const report = await store.verify();
        expect(report.checked).toBe(0);
        expect(report.problems.length).toBe(1);
        expect(report.problems[0]).toBeInstanceOf(CorruptStateError);
        expect(report.problems[0]!.path).toContain(path);
        expect(report.problems[0]!.message).toMatch(pattern);
      };
      await overwrite(fs, subject.journal, lines.slice(0, 3).join(""));
      await expectProblem(/shorter than the \d+ this broker wrote \(up to record 3\)/);
      await overwrite(fs, subject.journal, "");
      await expectProblem(/is 0 bytes, shorter than/);
      const renumbered = JSON.parse(lines[2]!.replace('"seq":2', '"seq":3')) as { format: string; version: number; body: unknown };
      const changed = lines.slice(0, 3).join("") + text.decode(encodeState(renumbered.format, renumbered.version, renumbered.body));
      // Padded to the same length, so that only the content differs.
      await overwrite(fs, subject.journal, changed.length <= good.length ? changed.padEnd(good.length, " ") : changed);
      await expectProblem(/record|byte/);
      await overwrite(fs, subject.journal, good);
      const checkpoint = await fs.readFile(subject.checkpoint);
      await fs.unlink(subject.checkpoint);
      await expectProblem(/is missing; this broker wrote it at generation/, subject.checkpoint);
      await overwrite(fs, subject.checkpoint, checkpoint);
      // Intact again, and writes go on; bytes past the last record written (an append in flight) are not judged.
      expect((await store.verify()).problems).toEqual([]);
      await store.write(4);
      await append(fs, subject.journal, '{"form');
      expect(await store.verify()).toEqual({ checked: 1, skipped: 0, problems: [] });
    });
  });
}

describe("transaction state: files of the previous version", () => {
  const slot = slotOf("tx");
  const oldRecord = (seq: number, n: number) => text.decode(encodeState(TXN_JOURNAL_FORMAT, 1, { seq, put: [txnEntry(n)], del: [] }));

  test("a journal without a header (and no checkpoint) is read, then rewritten in the current format", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(txnStateDir(DATA));
    await overwrite(fs, txnJournalPath(DATA, slot), oldRecord(1, 1) + oldRecord(2, 2));
    for (const dir of ["/", DATA, `${DATA}/__cluster`, txnStateDir(DATA)]) await fs.fsyncDir(dir);
    const store = await TXN.open(fs);
    expect(await store.read()).toBe(2);
    const lines = await linesOf(fs, txnJournalPath(DATA, slot));
    expect(lines.length).toBe(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ format: "journal-header", body: { generation: 1, baseSeq: 2 } });
    expect(JSON.parse(text.decode(await fs.readFile(txnSlotPath(DATA, slot))))).toMatchObject({ version: 2, body: { generation: 1, lastSeq: 2 } });
    await store.write(3);
    fs.crash();
    expect(await (await TXN.open(fs)).read()).toBe(3);
  });

  test("a checkpoint of version 1 with the journal after it is read; a crash at any step of the rewrite leaves files that read again", async () => {
    const oldFiles = async () => {
      const fs = new MemoryFs();
      await fs.mkdirp(txnStateDir(DATA));
      await overwrite(fs, txnSlotPath(DATA, slot), encodeState(TXN_SLOT_FORMAT, 1, { lastSeq: 4, entries: [txnEntry(4)] }));
      // Records 3 and 4 are in the checkpoint already (a crash before the old journal was emptied).
      await overwrite(fs, txnJournalPath(DATA, slot), oldRecord(3, 3) + oldRecord(4, 4) + oldRecord(5, 5));
      for (const dir of ["/", DATA, `${DATA}/__cluster`, txnStateDir(DATA)]) await fs.fsyncDir(dir);
      return fs;
    };
    let completed = false;
    for (let ops = 0; !completed; ops++) {
      const fs = await oldFiles();
      fs.haltAfterOps(ops);
      completed = await TXN.open(fs).then(
        () => true,
        () => false,
      );
      fs.crash();
      const store = await TXN.open(fs);
      expect(await store.read()).toBe(5);
      expect(JSON.parse(text.decode(await fs.readFile(txnSlotPath(DATA, slot))))).toMatchObject({ version: 2, body: { generation: 1, lastSeq: 5 } });
      if (completed) {
        // A version 1 checkpoint never has a generation.
        await overwrite(fs, txnSlotPath(DATA, slot), encodeState(TXN_SLOT_FORMAT, 1, { lastSeq: 5, entries: [txnEntry(5)], generation: 1 }));
        expect((await openError(TXN, fs)).message).toMatch(/generation is not a field of version 1/);
      }
    }
  });
});

describe("transaction state in cluster mode (slots loaded explicitly, moving between brokers)", () => {
  test("no clean-shutdown record is written, and one left by a single-broker run is removed at open", async () => {
    const fs = await written(TXN);
    const record = cleanShutdownPath(TXN.dir);
    const store = await TxnStateStore.open(fs, DATA, { slotOf, explicitLoad: true });
    // Another broker may change a slot after this one released it: no record of this broker's vouches for it.
    expect(await fs.stat(record)).toBeUndefined();
    await store.loadSlot(slotOf("tx"));
    await store.update("tx", () => txnEntry(9));
    await store.close();
    expect(await fs.stat(record)).toBeUndefined();
    // The header and sequence checks still apply when a slot is taken over.
    await overwrite(fs, TXN.journal, "");
    const again = await TxnStateStore.open(fs, DATA, { slotOf, explicitLoad: true });
    await expect(again.loadSlot(slotOf("tx"))).rejects.toThrow(/is empty, but .* is always followed by a journal with a header/);
  });
});
