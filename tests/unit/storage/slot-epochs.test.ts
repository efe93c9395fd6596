/**
 * Slot files per coordinator epoch (storage/slot-files.ts), for both slot stores (transaction state and
 * group offsets) in explicit-load mode: a take-over at epoch E reads the newest epoch's files and writes
 * its own, so that a former owner that writes on after its successor loaded the slot (an append, a fold,
 * its clean-shutdown record at release or close) is never read again, by the successor or anyone after.
 * Loads at a lower epoch are refused; the damage checks apply to the current epoch's files; single-broker
 * mode keeps epoch 0's names and refuses a directory cluster mode wrote.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { slotOf } from "../../../src/cluster/ownership.ts";
import type { OffsetCommitEntry } from "../../../src/domain/groups/offsets.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import type { Fs } from "../../../src/platform/fs.ts";
import { nodeFs } from "../../../src/platform/node-fs.ts";
import { cleanShutdownPath } from "../../../src/storage/clean-shutdown.ts";
import {
  OffsetStore,
  offsetsCleanShutdownPathAt,
  offsetsDir,
  offsetsJournalPath,
  offsetsJournalPathAt,
  offsetsSlotPath,
  offsetsSlotPathAt,
} from "../../../src/storage/offset-store.ts";
import { NewerSlotEpochError, parseSlotFileName, readRacingWriter } from "../../../src/storage/slot-files.ts";
import {
  TxnStateStore,
  txnCleanShutdownPathAt,
  txnJournalPath,
  txnJournalPathAt,
  txnSlotPath,
  txnSlotPathAt,
  txnStateDir,
} from "../../../src/storage/txn-state-store.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { txnEntryIn } from "../../support/txn-entry.ts";

const TXN_SLOT = slotOf("tx");
/** Transactional ids of one slot, so that every write below lands in it. */
const TXN_IDS = Array.from({ length: 5000 }, (_, i) => `tx-${i}`)
  .filter((id) => slotOf(id) === TXN_SLOT)
  .slice(0, 6);
const OFFSET_SLOT = 4;

interface OpenOptions {
  /** Every write folds the journal into the checkpoint (compaction thresholds of 0). */
  foldEveryWrite?: boolean;
  /** Single-broker mode (load-all, epoch 0). */
  single?: boolean;
}

/** One store instance on one slot, as a test sees it: keys with small integer values. */
interface Instance {
  load(epoch?: number): Promise<void>;
  write(key: number, value: number): Promise<void>;
  /** The slot's durable state: key -> value. */
  state(): Promise<Map<number, number>>;
  release(): Promise<void>;
  close(): Promise<void>;
  verify(): ReturnType<TxnStateStore["verify"]>;
  repair(path: string): Promise<boolean>;
}

interface Kind {
  readonly name: string;
  readonly slot: number;
  dir(data: string): string;
  checkpoint(data: string, epoch: number): string;
  journal(data: string, epoch: number): string;
  record(data: string, epoch: number): string;
  open(fs: Fs, data: string, options?: OpenOptions): Promise<Instance>;
}

const compaction = (options: OpenOptions) => (options.foldEveryWrite === true ? { compactBytesMin: 0, compactRatio: 0 } : {});

const TXN: Kind = {
  name: "transaction state",
  slot: TXN_SLOT,
  dir: txnStateDir,
  checkpoint: (data, epoch) => (epoch === 0 ? txnSlotPath(data, TXN_SLOT) : txnSlotPathAt(data, TXN_SLOT, epoch)),
  journal: (data, epoch) => (epoch === 0 ? txnJournalPath(data, TXN_SLOT) : txnJournalPathAt(data, TXN_SLOT, epoch)),
  record: (data, epoch) => txnCleanShutdownPathAt(data, TXN_SLOT, epoch),
  async open(fs, data, options = {}) {
    const store = await TxnStateStore.open(fs, data, { slotOf, explicitLoad: options.single !== true, ...compaction(options) });
    return {
      load: async (epoch) => void (await store.loadSlot(TXN_SLOT, epoch)),
      write: async (key, value) => void (await store.update(TXN_IDS[key]!, () => txnEntryIn("Empty", { transactionalId: TXN_IDS[key]!, epoch: value }))),
      state: async () => new Map((await store.list()).map((entry) => [TXN_IDS.indexOf(entry.transactionalId), entry.epoch])),
      release: () => store.releaseSlot(TXN_SLOT),
      close: () => store.close(),
      verify: () => store.verify(),
      repair: (path) => store.repair(path),
    };
  },
};

const commit = (partition: number, offset: number): OffsetCommitEntry => ({
  topic: "t",
  partition,
  offset,
  leaderEpoch: 1,
  metadata: "",
  commitTimestampMs: 1_700_000_000_000,
  expireTimestampMs: null,
});

const OFFSETS: Kind = {
  name: "group offsets",
  slot: OFFSET_SLOT,
  dir: offsetsDir,
  checkpoint: (data, epoch) => (epoch === 0 ? offsetsSlotPath(data, OFFSET_SLOT) : offsetsSlotPathAt(data, OFFSET_SLOT, epoch)),
  journal: (data, epoch) => (epoch === 0 ? offsetsJournalPath(data, OFFSET_SLOT) : offsetsJournalPathAt(data, OFFSET_SLOT, epoch)),
  record: (data, epoch) => offsetsCleanShutdownPathAt(data, OFFSET_SLOT, epoch),
  async open(fs, data, options = {}) {
    const store = await OffsetStore.open(fs, data, { explicitLoad: options.single !== true, ...compaction(options) });
    return {
      load: (epoch) => store.loadSlot(OFFSET_SLOT, epoch),
      write: async (key, value) => void (await store.mutate(OFFSET_SLOT, (d) => d.commit("g", [commit(key, value)]))),
      state: async () => {
        const out = new Map<number, number>();
        for (const [partition, offset] of store.slot(OFFSET_SLOT).committedOfGroup("g").get("t") ?? new Map()) out.set(partition, offset.offset);
        return out;
      },
      release: () => store.releaseSlot(OFFSET_SLOT),
      close: () => store.close(),
      verify: () => store.verify(),
      repair: (path) => store.repair(path),
    };
  },
};

const text = new TextDecoder();
const bytes = (s: string) => new TextEncoder().encode(s);

async function appendRaw(fs: Fs, path: string, s: string): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.write(bytes(s), await handle.size());
  await handle.fsync();
  await handle.close();
}

async function truncateTo(fs: Fs, path: string, length: number): Promise<void> {
  const handle = await fs.open(path, "rw");
  await handle.truncate(length);
  await handle.fsync();
  await handle.close();
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

/** The slot's files in the store directory (no tmp files), sorted. */
async function slotFiles(fs: Fs, kind: Kind, data: string): Promise<string[]> {
  return (await fs.readdir(kind.dir(data))).filter((name) => parseSlotFileName(name)?.slot === kind.slot).sort();
}

const realDirs: string[] = [];
afterAll(async () => {
  for (const dir of realDirs) await rm(dir, { recursive: true, force: true });
});

const FILE_SYSTEMS: Array<{ name: string; make: () => Promise<{ fs: Fs; data: string }> }> = [
  { name: "memory fs", make: async () => ({ fs: new MemoryFs(), data: "/data" }) },
  {
    name: "real directory",
    make: async () => {
      const data = await mkdtemp(join(tmpdir(), "bunka-slot-epochs-"));
      realDirs.push(data);
      return { fs: nodeFs, data };
    },
  },
];

type LateAction = "append" | "fold" | "release" | "close";

for (const kind of [TXN, OFFSETS]) {
  describe(`${kind.name}: slot files per coordinator epoch`, () => {
    for (const { name: fsName, make } of FILE_SYSTEMS) {
      for (const late of ["append", "fold", "release", "close"] as LateAction[]) {
        test(`${fsName}: what a former owner writes after the take-over (${late}) is never read`, async () => {
          const { fs, data } = await make();
          const a = await kind.open(fs, data, { foldEveryWrite: late === "fold" });
          await a.load(1);
          await a.write(0, 1);
          await a.write(1, 1);

          const b = await kind.open(fs, data);
          await b.load(2);
          expect(await b.state()).toEqual(new Map([[0, 1], [1, 1]]));

          // A was frozen past its lease and goes on as if it still owned the slot.
          await a.write(0, 99);
          await a.write(2, 99);
          const journalOfA = text.decode(await fs.readFile(kind.journal(data, 1)));
          if (late === "fold") {
            // Its folds rewrote its own checkpoint and journal.
            expect(text.decode(await fs.readFile(kind.checkpoint(data, 1)))).toContain("99");
          } else {
            expect(journalOfA).toContain("99");
          }
          if (late === "release") await a.release();
          if (late === "close") await a.close();
          if (late === "release" || late === "close") expect(await fs.stat(kind.record(data, 1))).toBeDefined();

          await b.write(1, 2);
          await b.write(3, 2);
          const expected = new Map([[0, 1], [1, 2], [3, 2]]);
          expect(await b.state()).toEqual(expected);
          // B wrote only its own epoch's files.
          expect(text.decode(await fs.readFile(kind.journal(data, 2)))).not.toContain("99");

          const c = await kind.open(fs, data);
          await c.load(3);
          expect(await c.state()).toEqual(expected);
          // And B, loading its own files again after a release, reads the same.
          await b.release();
          const b2 = await kind.open(fs, data);
          await expect(b2.load(2)).rejects.toBeInstanceOf(NewerSlotEpochError);
          await c.write(4, 3);
          await c.release();
          const d = await kind.open(fs, data);
          await d.load(4);
          expect(await d.state()).toEqual(new Map([...expected, [4, 3]]));
          await a.close();
          await d.close();
        });
      }

      test(`${fsName}: a load at a lower epoch than the newest present is refused and writes nothing`, async () => {
        const { fs, data } = await make();
        const b = await kind.open(fs, data);
        await b.load(2);
        await b.write(0, 2);
        const before = await slotFiles(fs, kind, data);
        const journal = await fs.readFile(kind.journal(data, 2));
        const a = await kind.open(fs, data);
        for (const epoch of [1, 0, undefined]) {
          const error = await errorOf(a.load(epoch));
          expect(error).toBeInstanceOf(NewerSlotEpochError);
          expect((error as NewerSlotEpochError).newest).toBe(2);
          expect((error as NewerSlotEpochError).epoch).toBe(epoch ?? 0);
        }
        // Refused, not loaded: a later write is refused too, and the files are as B left them.
        await expect(a.write(0, 1)).rejects.toThrow(/not loaded/);
        expect(await slotFiles(fs, kind, data)).toEqual(before);
        expect(await fs.readFile(kind.journal(data, 2))).toEqual(journal);
        // The same epoch is B's own: loading it again in another instance reads B's files as they are.
        await b.release();
        const again = await kind.open(fs, data);
        await again.load(2);
        expect(await again.state()).toEqual(new Map([[0, 2]]));
        await again.close();
      });
    }

    test("a take-over writes its checkpoint at once: a successor that never writes still fences its predecessor", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      const b = await kind.open(fs, "/data");
      await b.load(2);
      expect(await fs.stat(kind.checkpoint("/data", 2))).toBeDefined();
      expect(await fs.stat(kind.journal("/data", 2))).toBeDefined();
      // A never wrote before B's take-over; its first write comes after it.
      await a.write(0, 99);
      expect(await a.state()).toEqual(new Map([[0, 99]]));
      await a.close();
      const c = await kind.open(fs, "/data");
      await c.load(3);
      expect(await c.state()).toEqual(new Map());
    });

    test("epoch 0 files (single-broker mode) are taken over unchanged; files two owners back are removed", async () => {
      const fs = new MemoryFs();
      const single = await kind.open(fs, "/data", { single: true });
      await single.load();
      await single.write(0, 7);
      await single.close();
      const legacy = await fs.readFile(kind.journal("/data", 0));
      // Today's names in single-broker mode, and its store-wide clean-shutdown record.
      expect(await slotFiles(fs, kind, "/data")).toEqual([`slot-${kind.slot}.journal`, `slot-${kind.slot}.json`].sort());
      const a = await kind.open(fs, "/data");
      await a.load(1);
      expect(await a.state()).toEqual(new Map([[0, 7]]));
      expect(await fs.readFile(kind.journal("/data", 0))).toEqual(legacy);
      await a.write(1, 1);
      await a.release();
      const b = await kind.open(fs, "/data");
      await b.load(2);
      expect(await b.state()).toEqual(new Map([[0, 7], [1, 1]]));
      // Epoch 0 is two owners back now; epoch 1 (the source) stays.
      const s = kind.slot;
      expect(await slotFiles(fs, kind, "/data")).toEqual(
        [`slot-${s}.e1.json`, `slot-${s}.e1.journal`, `slot-${s}.e1.clean-shutdown.json`, `slot-${s}.e2.json`, `slot-${s}.e2.journal`].sort(),
      );
      await b.close();
      const c = await kind.open(fs, "/data");
      await c.load(3);
      expect(await slotFiles(fs, kind, "/data")).toEqual(
        [`slot-${s}.e2.json`, `slot-${s}.e2.journal`, `slot-${s}.e2.clean-shutdown.json`, `slot-${s}.e3.json`, `slot-${s}.e3.journal`].sort(),
      );
      expect(await c.state()).toEqual(new Map([[0, 7], [1, 1]]));
    });

    test("single-broker mode refuses a directory with files of a coordinator epoch, and writes nothing", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.close();
      const before = await slotFiles(fs, kind, "/data");
      const error = await errorOf(kind.open(fs, "/data", { single: true }).then((store) => store.load()));
      expect(error).toBeInstanceOf(NewerSlotEpochError);
      expect(parseSlotFileName((error as NewerSlotEpochError).path.split("/").pop()!)).toMatchObject({ slot: kind.slot, epoch: 1 });
      expect(await slotFiles(fs, kind, "/data")).toEqual(before);
    });

    test("a tmp file of a higher epoch is a newer owner's write in flight: refused", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.release();
      await appendRaw(fs, `${kind.checkpoint("/data", 5)}.0123456789abcdef.tmp`, "x");
      const b = await kind.open(fs, "/data");
      const error = await errorOf(b.load(4));
      expect(error).toBeInstanceOf(NewerSlotEpochError);
      expect((error as NewerSlotEpochError).newest).toBe(5);
      // Explicit-load mode does not clean tmp files at open: they may be another broker's writes in flight.
      expect(await fs.stat(`${kind.checkpoint("/data", 5)}.0123456789abcdef.tmp`)).toBeDefined();
    });

    test("a slot loaded at one epoch is not loaded at another until released", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await expect(a.load(2)).rejects.toThrow(/loaded at coordinator epoch 1, not 2/);
      await a.load(1);
      await a.release();
      await a.load(2);
      expect(await fs.stat(kind.checkpoint("/data", 2))).toBeDefined();
    });

    test("a crash at any point of a take-over leaves files a later load reads as the former owner left them", async () => {
      const prepare = async () => {
        const fs = new MemoryFs();
        const a = await kind.open(fs, "/data");
        await a.load(1);
        await a.write(0, 1);
        await a.write(1, 1);
        await a.release();
        return fs;
      };
      const expected = new Map([[0, 1], [1, 1]]);
      let completed = false;
      for (let ops = 0; !completed; ops++) {
        const fs = await prepare();
        const b = await kind.open(fs, "/data");
        fs.haltAfterOps(ops);
        completed = await b.load(2).then(
          () => true,
          () => false,
        );
        fs.crash();
        // The same epoch again (the take-over retried), or the next one.
        const again = await kind.open(fs, "/data");
        await again.load(2);
        expect(await again.state()).toEqual(expected);
        await again.write(2, 2);
        await again.close();
        const next = await kind.open(fs, "/data");
        await next.load(3);
        expect(await next.state()).toEqual(new Map([...expected, [2, 2]]));
        expect(ops).toBeLessThan(200);
      }
    });

    test("a take-over's journal without its checkpoint: a header alone is passed over, records in it are damage", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      await a.release();
      const b = await kind.open(fs, "/data");
      await b.load(2);
      await b.release();
      // A take-over that stopped after its journal's header: epoch 2 never served.
      await fs.unlink(kind.checkpoint("/data", 2));
      await fs.unlink(kind.record("/data", 2));
      const c = await kind.open(fs, "/data");
      await c.load(3);
      expect(await c.state()).toEqual(new Map([[0, 1]]));
      await c.write(1, 3);
      await c.release();
      // Epoch 3 served and wrote a record; its checkpoint lost is damage, not a take-over that stopped.
      await fs.unlink(kind.checkpoint("/data", 3));
      await fs.unlink(kind.record("/data", 3));
      const d = await kind.open(fs, "/data");
      const error = await errorOf(d.load(4));
      expect(error).toBeInstanceOf(CorruptStateError);
      expect((error as CorruptStateError).path).toStartWith(kind.journal("/data", 3));
      expect(await fs.stat(kind.checkpoint("/data", 4))).toBeUndefined();
    });

    test("a torn last line of the own epoch's journal is cut off at a load after a crash", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      await a.write(1, 1);
      // A crash (no release, no record) in the middle of an append.
      const path = kind.journal("/data", 1);
      const length = (await fs.stat(path))!.size;
      await appendRaw(fs, path, '{"format":"torn');
      const again = await kind.open(fs, "/data");
      await again.load(1);
      expect(await again.state()).toEqual(new Map([[0, 1], [1, 1]]));
      expect((await fs.stat(path))!.size).toBe(length);
    });

    test("a torn last line of a former owner's journal is left in place; the successor reads the records before it", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      const path = kind.journal("/data", 1);
      await appendRaw(fs, path, '{"format":"torn');
      const torn = await fs.readFile(path);
      const b = await kind.open(fs, "/data");
      await b.load(2);
      expect(await b.state()).toEqual(new Map([[0, 1]]));
      expect(await fs.readFile(path)).toEqual(torn);
    });

    test("the clean-shutdown record of an epoch checks that epoch's journal, at a take-over and at a load of the own epoch", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      await a.write(1, 1);
      await a.release();
      const path = kind.journal("/data", 1);
      const good = await fs.readFile(path);
      const lastLine = good.lastIndexOf(0x0a, good.length - 2) + 1;

      // The last record lost at a record boundary: only the record can tell.
      await truncateTo(fs, path, lastLine);
      for (const epoch of [1, 2]) {
        const error = await errorOf((await kind.open(fs, "/data")).load(epoch));
        expect(error).toBeInstanceOf(CorruptStateError);
        expect((error as CorruptStateError).path).toBe(path);
        expect((error as CorruptStateError).reason).toMatch(/records were lost/);
      }
      // A torn line after a clean release is damage too.
      await fs.unlink(path);
      await appendRaw(fs, path, text.decode(good) + '{"format":"torn');
      for (const epoch of [1, 2]) expect(await errorOf((await kind.open(fs, "/data")).load(epoch))).toBeInstanceOf(CorruptStateError);
      expect(await fs.stat(kind.checkpoint("/data", 2))).toBeUndefined();

      // Sound again: the own epoch loads, and its record goes before its next write.
      await fs.unlink(path);
      await appendRaw(fs, path, text.decode(good));
      const again = await kind.open(fs, "/data");
      await again.load(1);
      expect(await again.state()).toEqual(new Map([[0, 1], [1, 1]]));
      expect(await fs.stat(kind.record("/data", 1))).toBeDefined();
      await again.write(2, 1);
      expect(await fs.stat(kind.record("/data", 1))).toBeUndefined();
      await again.close();
      expect(await fs.stat(kind.record("/data", 1))).toBeDefined();
      const next = await kind.open(fs, "/data");
      await next.load(2);
      expect(await next.state()).toEqual(new Map([[0, 1], [1, 1], [2, 1]]));
    });

    test("a damaged record in a former owner's journal fails the take-over, and nothing of the new epoch is written", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      await a.write(1, 1);
      const path = kind.journal("/data", 1);
      const good = text.decode(await fs.readFile(path));
      // A checksum of the first record changed (not the last line, which could pass for a torn write).
      const first = good.indexOf("\n") + 1;
      const at = good.indexOf('"crc32":', first) + '"crc32":'.length;
      const damaged = good.slice(0, at) + (good[at] === "1" ? "2" : "1") + good.slice(at + 1);
      await fs.unlink(path);
      await appendRaw(fs, path, damaged);
      const b = await kind.open(fs, "/data");
      const error = await errorOf(b.load(2));
      expect(error).toBeInstanceOf(CorruptStateError);
      expect((error as CorruptStateError).path).toStartWith(path);
      expect(await fs.stat(kind.checkpoint("/data", 2))).toBeUndefined();
      expect(await fs.stat(kind.journal("/data", 2))).toBeUndefined();
    });

    test("verify and repair cover the current epoch's files of loaded slots only", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      const b = await kind.open(fs, "/data");
      await b.load(2);
      await b.write(1, 2);
      expect((await b.verify()).problems).toEqual([]);
      expect((await b.verify()).checked).toBe(1);
      // Damage to the former owner's files is not B's business: they are never read again.
      await truncateTo(fs, kind.journal("/data", 1), 0);
      expect((await b.verify()).problems).toEqual([]);
      expect(await b.repair(kind.journal("/data", 1))).toBe(false);
      // B's own journal losing its last record is found, and repaired from memory.
      const path = kind.journal("/data", 2);
      await truncateTo(fs, path, (await fs.stat(path))!.size - 5);
      const report = await b.verify();
      expect(report.problems.map((p) => p.path)).toEqual([path]);
      expect(await b.repair(path)).toBe(true);
      expect((await b.verify()).problems).toEqual([]);
      await b.close();
      const c = await kind.open(fs, "/data");
      await c.load(3);
      expect(await c.state()).toEqual(new Map([[0, 1], [1, 2]]));
    });

    test("two brokers' clean-shutdown records never meet: one per slot epoch, none store-wide", async () => {
      const fs = new MemoryFs();
      const a = await kind.open(fs, "/data");
      await a.load(1);
      await a.write(0, 1);
      const b = await kind.open(fs, "/data");
      await b.load(2);
      await b.write(0, 2);
      await b.close();
      await a.close();
      expect(await fs.stat(cleanShutdownPath(kind.dir("/data")))).toBeUndefined();
      const recordOfB = await fs.readFile(kind.record("/data", 2));
      // A's record (written late) names epoch 1's journal; B's names epoch 2's and is unchanged by A.
      expect(text.decode(await fs.readFile(kind.record("/data", 1)))).not.toEqual(text.decode(recordOfB));
      const c = await kind.open(fs, "/data");
      await c.load(3);
      expect(await c.state()).toEqual(new Map([[0, 2]]));
    });
  });
}

describe("slot file names and reads of a former owner's files", () => {
  test("names per epoch: epoch 0 keeps today's names; anything else is not a slot file", () => {
    expect(parseSlotFileName("slot-7.json")).toEqual({ slot: 7, epoch: 0, kind: "checkpoint", tmp: false });
    expect(parseSlotFileName("slot-7.journal")).toEqual({ slot: 7, epoch: 0, kind: "journal", tmp: false });
    expect(parseSlotFileName("slot-7.e4.json")).toEqual({ slot: 7, epoch: 4, kind: "checkpoint", tmp: false });
    expect(parseSlotFileName("slot-7.e4.journal")).toEqual({ slot: 7, epoch: 4, kind: "journal", tmp: false });
    expect(parseSlotFileName("slot-7.e4.clean-shutdown.json")).toEqual({ slot: 7, epoch: 4, kind: "clean-shutdown", tmp: false });
    expect(parseSlotFileName("slot-7.e4.json.0123456789abcdef.tmp")).toEqual({ slot: 7, epoch: 4, kind: "checkpoint", tmp: true });
    for (const name of ["slot-7.e0.json", "slot-7.clean-shutdown.json", "slot-07.json", "slot-7.e04.json", "slot-7.e4.txt", "clean-shutdown.json", "slot-7.e99999999999.json"]) {
      expect(parseSlotFileName(name)).toBeUndefined();
    }
  });

  test("a read of a former owner's files is tried again while its error changes, and fails when it repeats", async () => {
    const damage = (reason: string) => new CorruptStateError("/data/x", reason);
    let calls = 0;
    // A fold of the former owner met half way, then the files as it left them.
    await readRacingWriter(async () => {
      calls += 1;
      if (calls === 1) throw damage("of generation 3, but the checkpoint is of generation 2");
    });
    expect(calls).toBe(2);
    calls = 0;
    const same = await errorOf(
      readRacingWriter(async () => {
        calls += 1;
        throw damage("record 4 follows record 2");
      }),
    );
    expect(same).toBeInstanceOf(CorruptStateError);
    expect(calls).toBe(2);
    calls = 0;
    const changing = await errorOf(
      readRacingWriter(async () => {
        calls += 1;
        throw damage(`reason ${calls}`);
      }),
    );
    expect((changing as CorruptStateError).reason).toBe("reason 3");
    expect(calls).toBe(3);
    // Anything but damage is not a race with a writer: no second read.
    calls = 0;
    await expect(
      readRacingWriter(async () => {
        calls += 1;
        throw new Error("EIO");
      }),
    ).rejects.toThrow("EIO");
    expect(calls).toBe(1);
  });

  test("an epoch other than 0 needs explicit-load mode", async () => {
    const fs = new MemoryFs();
    const txn = await TxnStateStore.open(fs, "/data", { slotOf });
    await expect(txn.loadSlot(TXN_SLOT, 1)).rejects.toThrow(/only in explicit-load mode/);
    const offsets = await OffsetStore.open(fs, "/data");
    await expect(offsets.loadSlot(OFFSET_SLOT, 1)).rejects.toThrow(/only in explicit-load mode/);
    await expect((await OffsetStore.open(fs, "/data", { explicitLoad: true })).loadSlot(OFFSET_SLOT, -1)).rejects.toBeInstanceOf(RangeError);
    expect(await fs.stat(txnSlotPathAt("/data", TXN_SLOT, 1))).toBeUndefined();
  });
});
