import { describe, expect, test } from "bun:test";
import { slotOf } from "../../../src/cluster/ownership.ts";
import { transition, type TxnEntry } from "../../../src/domain/txn/txn-state.ts";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import type { FileHandle, Fs, OpenMode } from "../../../src/platform/fs.ts";
import { encodeState } from "../../../src/storage/state-file.ts";
import {
  TXN_JOURNAL_FORMAT,
  TXN_SLOT_FORMAT,
  TxnStateStore,
  isTxnRejection,
  txnJournalPath,
  txnRejection,
  txnSlotPath,
  type TxnStateStoreOptions,
} from "../../../src/storage/txn-state-store.ts";
import { MemoryFs, SimulatedHaltError } from "../../support/memory-fs.ts";

const DATA = "/data";
const T0 = 1_700_000_000_000;

function open(fs: MemoryFs, options: Partial<TxnStateStoreOptions> = {}): Promise<TxnStateStore> {
  return TxnStateStore.open(fs, DATA, { slotOf, ...options });
}

function entry(transactionalId: string, epoch = 0, overrides: Partial<TxnEntry> = {}): TxnEntry {
  return {
    transactionalId,
    producerId: 1000,
    lastProducerId: 1000,
    epoch,
    lastEpoch: -1,
    timeoutMs: 60_000,
    state: "Empty",
    partitions: [],
    groups: [],
    ongoingSinceMs: -1,
    updatedMs: T0,
    ...overrides,
  };
}

/** `count` transactional ids that all hash to `slot`. */
function idsInSlot(slot: number, count: number, prefix = "tx"): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++) if (slotOf(`${prefix}-${i}`) === slot) ids.push(`${prefix}-${i}`);
  return ids;
}

function fsyncsOf(fs: MemoryFs, path: string): number {
  return fs.log.filter((line) => line === `fsync ${path}`).length;
}

function bumpEpoch(current: TxnEntry | undefined): TxnEntry {
  if (current === undefined) throw new Error("expected an entry");
  const result = transition(current, "Empty", { epoch: current.epoch + 1 }, current.updatedMs + 1);
  if (!result.ok) throw new Error(result.reason);
  return result.entry;
}

/** An Fs over MemoryFs that can hold one fsync of a file until the test releases it. */
class GatedFs implements Fs {
  holding = false;
  private gate: { path: string; released: Promise<void> } | undefined;

  constructor(private readonly inner: MemoryFs) {}

  holdNextFsync(path: string): () => void {
    let release!: () => void;
    this.gate = { path, released: new Promise<void>((resolve) => (release = resolve)) };
    return release;
  }

  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const handle = await this.inner.open(path, mode);
    return {
      write: (data, position) => handle.write(data, position),
      read: (length, position) => handle.read(length, position),
      truncate: (length) => handle.truncate(length),
      fsync: async () => {
        const gate = this.gate;
        if (gate !== undefined && gate.path === path) {
          this.gate = undefined;
          this.holding = true;
          await gate.released;
          this.holding = false;
        }
        await handle.fsync();
      },
      size: () => handle.size(),
      close: () => handle.close(),
    };
  }
  readFile(path: string) {
    return this.inner.readFile(path);
  }
  rename(from: string, to: string) {
    return this.inner.rename(from, to);
  }
  fsyncDir(path: string) {
    return this.inner.fsyncDir(path);
  }
  mkdirp(path: string) {
    return this.inner.mkdirp(path);
  }
  readdir(path: string) {
    return this.inner.readdir(path);
  }
  unlink(path: string) {
    return this.inner.unlink(path);
  }
  rmrf(path: string) {
    return this.inner.rmrf(path);
  }
  stat(path: string) {
    return this.inner.stat(path);
  }
}

describe("basic operation", () => {
  test("an update is durable when it resolves and survives a reopen", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    expect(await store.update("a", () => entry("a"))).toEqual(entry("a"));
    expect(await store.get("a")).toEqual(entry("a"));
    fs.crash();
    const reopened = await open(fs);
    expect(await reopened.get("a")).toEqual(entry("a"));
    expect(await reopened.get("b")).toBeUndefined();
  });

  test("files are where docs/architecture.md (Storage rules) says: txn_state/slot-N.json (plus its journal), N = slotOf(id)", async () => {
    const fs = new MemoryFs();
    const store = await open(fs, { compactBytesMin: 0, compactRatio: 0 });
    await store.update("a", () => entry("a"));
    await store.close(); // compaction runs after the update is acknowledged
    const n = slotOf("a");
    expect(await fs.readdir(`${DATA}/__cluster/txn_state`)).toEqual(["clean-shutdown.json", `slot-${n}.journal`, `slot-${n}.json`].sort());
    expect(txnSlotPath(DATA, n)).toBe(`${DATA}/__cluster/txn_state/slot-${n}.json`);
  });

  test("removing an id (the update returns undefined) is durable too", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a"));
    expect(await store.update("a", () => undefined)).toBeUndefined();
    expect(await store.get("a")).toBeUndefined();
    fs.crash();
    expect(await (await open(fs)).get("a")).toBeUndefined();
  });

  test("a rejection writes nothing and is returned as it is", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a"));
    const before = fs.count("fsync");
    const result = await store.update("a", () => txnRejection(51, "busy"));
    expect(isTxnRejection(result)).toBe(true);
    expect(result).toEqual({ rejected: true, errorCode: 51, reason: "busy" });
    expect(fs.count("fsync")).toBe(before);
    expect(await store.get("a")).toEqual(entry("a"));
  });

  test("returning the current entry is no change: no write", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a"));
    const before = fs.log.length;
    expect(await store.update("a", (current) => current)).toEqual(entry("a"));
    expect(fs.log.slice(before).filter((line) => line.startsWith("write") || line.startsWith("fsync"))).toEqual([]);
  });

  test("an update returning another id's entry is a programming error", async () => {
    const store = await open(new MemoryFs());
    await expect(store.update("a", () => entry("b"))).rejects.toThrow(TypeError);
  });

  test("list, entriesInPrepare and loadAll see every slot's durable entries, ordered by id", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const prepared = entry("p", 0, { state: "PrepareCommit", partitions: [{ topic: "t", partitions: [0] }], ongoingSinceMs: T0 });
    await Promise.all([store.update("c", () => entry("c")), store.update("p", () => prepared), store.update("a", () => entry("a"))]);
    expect((await store.list()).map((e) => e.transactionalId)).toEqual(["a", "c", "p"]);
    expect(await store.list((e) => e.transactionalId !== "a")).toEqual([entry("c"), prepared]);
    expect(await store.entriesInPrepare()).toEqual([prepared]);
    fs.crash();
    const reopened = await open(fs);
    await reopened.loadAll();
    expect(await reopened.entriesInPrepare()).toEqual([prepared]);
  });
});

describe("one serial writer per slot, with group commit", () => {
  test("N concurrent updates to one slot take fewer fsyncs than updates, and all are durable when they resolve", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const ids = idsInSlot(7, 100);
    const journal = txnJournalPath(DATA, 7);
    const results = await Promise.all(ids.map((id) => store.update(id, () => entry(id))));
    expect(results).toEqual(ids.map((id) => entry(id)));
    const fsyncs = fsyncsOf(fs, journal);
    expect(fsyncs).toBeLessThan(ids.length);
    // Issued together, they share one write.
    expect(fsyncs).toBe(1);
    fs.crash();
    const reopened = await open(fs);
    for (const id of ids) expect(await reopened.get(id)).toEqual(entry(id));
  });

  test("updates that arrive while a write is in flight are coalesced into the next single write", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const ids = idsInSlot(3, 41);
    const journal = txnJournalPath(DATA, 3);
    const first = store.update(ids[0]!, () => entry(ids[0]!));
    // Let the first write start, then pile on while it is in flight.
    while (!fs.log.some((line) => line.startsWith(`write ${journal} `))) await Promise.resolve();
    const rest = ids.slice(1).map((id) => store.update(id, () => entry(id)));
    await Promise.all([first, ...rest]);
    expect(fsyncsOf(fs, journal)).toBe(2);
  });

  test("a deferred write waits one turn of the event loop: updates its caller's continuation makes share it", async () => {
    for (const deferWrite of [true, false]) {
      const fs = new MemoryFs();
      const store = await open(fs);
      const [a, b] = idsInSlot(5, 2, `defer-${deferWrite}`);
      const journal = txnJournalPath(DATA, 5);
      await store.update(a!, () => entry(a!));
      const before = fsyncsOf(fs, journal);
      // The second update is made a few microtasks later, as a released request makes it.
      const first = store.update(a!, bumpEpoch, { deferWrite });
      for (let i = 0; i < 10; i++) await Promise.resolve();
      await Promise.all([first, store.update(b!, () => entry(b!))]);
      expect([deferWrite, fsyncsOf(fs, journal) - before]).toEqual([deferWrite, deferWrite ? 1 : 2]);
    }
  });

  test("updates of one id apply in call order, each seeing the previous one's result", async () => {
    const store = await open(new MemoryFs());
    await store.update("a", () => entry("a", 0));
    const seen: number[] = [];
    const updates = Array.from({ length: 20 }, () =>
      store.update("a", (current) => {
        seen.push(current!.epoch);
        return bumpEpoch(current);
      }),
    );
    const results = await Promise.all(updates);
    expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(results.map((r) => (r as TxnEntry).epoch)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect((await store.get("a"))!.epoch).toBe(20);
  });

  test("call order holds for updates issued before the slot is loaded and just after", async () => {
    const fs = new MemoryFs();
    const first = await open(fs);
    await first.update("a", () => entry("a", 0));
    const store = await open(fs);
    const seen: number[] = [];
    const bump = (current: TxnEntry | undefined) => {
      seen.push(current!.epoch);
      return bumpEpoch(current);
    };
    const early = [store.update("a", bump), store.update("a", bump)];
    await Promise.resolve();
    const late = store.update("a", bump);
    await Promise.all([...early, late]);
    expect(seen).toEqual([0, 1, 2]);
  });

  test("slots write independently: one write per slot touched", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const ids = [...idsInSlot(1, 10, "x"), ...idsInSlot(2, 10, "y")];
    await Promise.all(ids.map((id) => store.update(id, () => entry(id))));
    expect(fsyncsOf(fs, txnJournalPath(DATA, 1))).toBe(1);
    expect(fsyncsOf(fs, txnJournalPath(DATA, 2))).toBe(1);
  });

  test("reads see only durable state; a no-change update waits until what it read is durable", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a", 0));
    const order: string[] = [];
    const change = store.update("a", bumpEpoch).then(() => order.push("change durable"));
    // While the change is in flight, a reader still sees the durable entry...
    expect((await store.get("a"))!.epoch).toBe(0);
    // ...but an update's function sees the latest state, and its "no change" answer waits for it.
    let sawEpoch = -1;
    const noChange = store
      .update("a", (current) => {
        sawEpoch = current!.epoch;
        return current;
      })
      .then(() => order.push("no-change answered"));
    await Promise.all([change, noChange]);
    expect(sawEpoch).toBe(1);
    expect(order).toEqual(["change durable", "no-change answered"]);
  });
});

describe("crashes", () => {
  test("acknowledged updates survive a crash; unacknowledged ones may not", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const ids = idsInSlot(5, 30);
    const acked = ids.slice(0, 20);
    await Promise.all(acked.map((id) => store.update(id, () => entry(id))));
    const unacked = ids.slice(20).map((id) => store.update(id, () => entry(id)).catch(() => "lost"));
    fs.crash();
    await Promise.all(unacked);
    const reopened = await open(fs);
    for (const id of acked) expect(await reopened.get(id)).toEqual(entry(id));
  });

  test("a crash at every step of a write (and of compactions) never loses an acknowledged update or corrupts the slot", async () => {
    const ids = idsInSlot(9, 12);
    const again = idsInSlot(9, 13)[12]!;
    const seen = new Set<string>();
    for (let haltAfter = 0; haltAfter < 60; haltAfter++) {
      const fs = new MemoryFs();
      // Compaction after every write, so crashes also land between the checkpoint and the journal reset.
      const store = await open(fs, { compactBytesMin: 0, compactRatio: 0 });
      for (const id of ids.slice(0, 6)) await store.update(id, () => entry(id));
      fs.haltAfterOps(haltAfter);
      const outcomes = await Promise.all(
        ids.slice(6).map((id) =>
          store.update(id, () => entry(id)).then(
            () => "acked" as const,
            (error: unknown) => {
              if (!(error instanceof SimulatedHaltError) && !(error instanceof FatalError)) throw error;
              return "failed" as const;
            },
          ),
        ),
      );
      fs.crash();
      const reopened = await open(fs);
      for (const id of ids.slice(0, 6)) expect(await reopened.get(id)).toEqual(entry(id));
      for (const [i, id] of ids.slice(6).entries()) {
        if (outcomes[i] === "acked") expect(await reopened.get(id)).toEqual(entry(id));
      }
      seen.add(outcomes.join(","));
      // And the slot keeps working after recovery.
      await reopened.update(again, () => entry(again));
      fs.crash();
      expect(await (await open(fs)).get(again)).toEqual(entry(again));
    }
    // The sweep covered crashes before the write was acknowledged and after it.
    expect(seen).toEqual(new Set(["failed,failed,failed,failed,failed,failed", "acked,acked,acked,acked,acked,acked"]));
  });

  test("a torn (unterminated) last journal record is cut off, and appends continue after the good ones", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a"));
    const journal = txnJournalPath(DATA, slotOf("a"));
    fs.failNextWrite(journal, { torn: 25 });
    await expect(store.update("a", bumpEpoch)).rejects.toThrow(/EIO/);
    fs.crash();
    // The torn bytes reached the volatile file only if fsynced; make them durable to simulate the worst case.
    const handle = await fs.open(journal, "rw");
    const good = await handle.size();
    await handle.write(new TextEncoder().encode('{"format":"txn-state-jour'), good);
    await handle.fsync();
    await handle.close();
    const reopened = await open(fs);
    expect(await reopened.get("a")).toEqual(entry("a"));
    expect((await fs.stat(journal))!.size).toBe(good);
    await reopened.update("a", bumpEpoch);
    fs.crash();
    expect((await (await open(fs)).get("a"))!.epoch).toBe(1);
  });
});

describe("corrupt files are refused, never taken for empty", () => {
  async function storeWithEntries(fs: MemoryFs, options: Partial<TxnStateStoreOptions> = {}): Promise<number> {
    const store = await open(fs, options);
    const ids = idsInSlot(4, 3);
    for (const id of ids) await store.update(id, () => entry(id));
    await store.close();
    return 4;
  }

  test("a corrupt checkpoint raises CorruptStateError naming the file, on every use of the slot", async () => {
    const fs = new MemoryFs();
    const slot = await storeWithEntries(fs, { compactBytesMin: 0, compactRatio: 0 });
    const path = txnSlotPath(DATA, slot);
    const bytes = await fs.readFile(path);
    bytes[bytes.length - 10] = bytes[bytes.length - 10]! ^ 0x01;
    const handle = await fs.open(path, "w");
    await handle.write(bytes, 0);
    await handle.close();
    const store = await open(fs);
    const id = idsInSlot(slot, 1)[0]!;
    await expect(store.get(id)).rejects.toThrow(CorruptStateError);
    await expect(store.get(id)).rejects.toThrow(path);
    await expect(store.update(id, () => entry(id))).rejects.toThrow(CorruptStateError);
    await expect(store.list()).rejects.toThrow(CorruptStateError);
    // Other slots are unaffected.
    const other = idsInSlot(slot + 1, 1)[0]!;
    await store.update(other, () => entry(other));
  });

  test("a corrupt complete journal record raises CorruptStateError naming the journal", async () => {
    const fs = new MemoryFs();
    const slot = await storeWithEntries(fs);
    const path = txnJournalPath(DATA, slot);
    const bytes = await fs.readFile(path);
    const firstNewline = bytes.indexOf(0x0a);
    bytes[firstNewline - 5] = bytes[firstNewline - 5]! ^ 0x01; // inside the first record, which is followed by good ones
    const handle = await fs.open(path, "w");
    await handle.write(bytes, 0);
    await handle.close();
    await expect((await open(fs)).get(idsInSlot(slot, 1)[0]!)).rejects.toThrow(path);
  });

  test("a journal whose checkpoint is missing (a gap in the sequence) is refused", async () => {
    const fs = new MemoryFs();
    const slot = await storeWithEntries(fs, { compactBytesMin: 0, compactRatio: 0 });
    const store = await open(fs);
    const id = idsInSlot(slot, 1)[0]!;
    await store.update(id, bumpEpoch); // a journal record after the checkpoint
    await fs.unlink(txnSlotPath(DATA, slot));
    await expect((await open(fs)).get(id)).rejects.toThrow(/continues a checkpoint/);
  });

  test("an entry stored in the wrong slot is refused", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/__cluster/txn_state`);
    const wrongSlot = (slotOf("a") + 1) % 50;
    const handle = await fs.open(txnSlotPath(DATA, wrongSlot), "w");
    await handle.write(encodeState(TXN_SLOT_FORMAT, 1, { lastSeq: 0, entries: [entry("a")] }), 0);
    await handle.close();
    await expect((await open(fs)).list()).rejects.toThrow(/belongs in slot/);
  });

  test("an unknown version, and records out of sequence, are refused", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp(`${DATA}/__cluster/txn_state`);
    const slot = slotOf("a");
    let handle = await fs.open(txnSlotPath(DATA, slot), "w");
    await handle.write(encodeState(TXN_SLOT_FORMAT, 99, { lastSeq: 0, entries: [] }), 0);
    await handle.close();
    await expect((await open(fs)).get("a")).rejects.toThrow(/unknown version/);

    await fs.unlink(txnSlotPath(DATA, slot));
    handle = await fs.open(txnJournalPath(DATA, slot), "w");
    const record = (seq: number) => encodeState(TXN_JOURNAL_FORMAT, 1, { seq, put: [entry("a", seq)], del: [] });
    await handle.write(new Uint8Array([...record(1), ...record(3)]), 0);
    await handle.close();
    await expect((await open(fs)).get("a")).rejects.toThrow(/record 3 follows record 1/);
  });
});

describe("write failures", () => {
  test("a failed fsync is fatal: no acknowledgment, the store refuses every later write", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a"));
    fs.failNextFsync(txnJournalPath(DATA, slotOf("a")));
    await expect(store.update("a", bumpEpoch)).rejects.toThrow(FatalError);
    expect((await store.get("a"))!.epoch).toBe(0);
    await expect(store.update("a", bumpEpoch)).rejects.toThrow(FatalError);
    await expect(store.update("zzz-other-slot", () => entry("zzz-other-slot"))).rejects.toThrow(FatalError);
    fs.crash();
    expect((await (await open(fs)).get("a"))!.epoch).toBe(0);
  });

  test("a fatal fsync also refuses the writes waiting in other slots", async () => {
    const memory = new MemoryFs();
    const fs = new GatedFs(memory);
    const store = await TxnStateStore.open(fs, DATA, { slotOf });
    const [a] = idsInSlot(1, 1);
    const [b] = idsInSlot(2, 1);
    await store.update(a!, () => entry(a!));
    await store.update(b!, () => entry(b!));
    // b's next write is held in its fsync while a second change of b waits behind it.
    const release = fs.holdNextFsync(txnJournalPath(DATA, 2));
    const bInFlight = store.update(b!, bumpEpoch);
    while (!fs.holding) await Promise.resolve();
    const bWaiting = store.update(b!, bumpEpoch);
    memory.failNextFsync(txnJournalPath(DATA, 1));
    await expect(store.update(a!, bumpEpoch)).rejects.toThrow(FatalError);
    release();
    // The held fsync succeeded, so that change is durable; nothing after the failure is written.
    expect(await bInFlight).toMatchObject({ epoch: 1 });
    await expect(bWaiting).rejects.toThrow(FatalError);
    memory.crash();
    expect((await (await open(memory)).get(b!))!.epoch).toBe(1);
  });

  test("a failed fsync of the directory when the journal is created is fatal too", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    fs.failNextFsync(`${DATA}/__cluster/txn_state`, { target: "dir" });
    await expect(store.update("a", () => entry("a"))).rejects.toThrow(FatalError);
  });

  test("a failed write (not fsync) refuses its callers, rolls memory back, and the store goes on", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a", 0));
    fs.failNextWrite(txnJournalPath(DATA, slotOf("a")), { torn: 40 });
    const failed = store.update("a", bumpEpoch);
    await expect(failed).rejects.toThrow(/EIO/);
    // The next update sees the durable entry, not the refused change.
    let seen = -1;
    await store.update("a", (current) => {
      seen = current!.epoch;
      return bumpEpoch(current);
    });
    expect(seen).toBe(0);
    fs.crash();
    expect((await (await open(fs)).get("a"))!.epoch).toBe(1);
  });

  test("a failed write whose bytes could not be cut off is cut before the next record (no false corruption)", async () => {
    const fs = new MemoryFs();
    const store = await TxnStateStore.open(fs, DATA, { slotOf });
    await store.update("a", () => entry("a", 0));
    // A long record (an id of 400 characters in the same slot) lands whole, then the write reports EIO,
    // and the cut-off fails too.
    const [long] = idsInSlot(slotOf("a"), 1, "x".repeat(400));
    fs.failNextWrite(txnJournalPath(DATA, slotOf("a")), { torn: 1 << 20 });
    fs.failNextTruncate(txnJournalPath(DATA, slotOf("a")));
    await expect(store.update(long!, () => entry(long!, 0))).rejects.toThrow(/EIO/);
    // A shorter record next: written over the failed one's first bytes, with its tail cut first.
    await store.update("a", bumpEpoch);
    await store.close();
    fs.crash();
    const reopened = await open(fs);
    expect((await reopened.get("a"))!.epoch).toBe(1);
  });

  test("a full disk is an ordinary failure too", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    await store.update("a", () => entry("a", 0));
    fs.enospcAfterBytes(10);
    await expect(store.update("a", bumpEpoch)).rejects.toThrow(/ENOSPC/);
    fs.clearFaults();
    await store.update("a", bumpEpoch);
    fs.crash();
    expect((await (await open(fs)).get("a"))!.epoch).toBe(1);
  });
});

describe("compaction", () => {
  test("folds the journal into the checkpoint once it is large enough, keeping every entry", async () => {
    const fs = new MemoryFs();
    const store = await open(fs, { compactBytesMin: 4096, compactRatio: 2 });
    const ids = idsInSlot(6, 50);
    for (const id of ids) await store.update(id, () => entry(id));
    for (let round = 0; round < 5; round++) for (const id of ids) await store.update(id, bumpEpoch);
    const journal = txnJournalPath(DATA, 6);
    const checkpoint = txnSlotPath(DATA, 6);
    const checkpointBytes = (await fs.stat(checkpoint))!.size;
    expect(checkpointBytes).toBeGreaterThan(0);
    // The journal stays below the compaction threshold.
    expect((await fs.stat(journal))!.size).toBeLessThan(Math.max(4096, 2 * checkpointBytes) + 1024);
    fs.crash();
    const reopened = await open(fs);
    for (const id of ids) expect((await reopened.get(id))!.epoch).toBe(5);
  });

  test("the bytes written per transition do not grow with the ids in the slot (flat EndTxn cost)", async () => {
    async function bytesPerTransition(idCount: number): Promise<number> {
      const fs = new MemoryFs();
      const store = await open(fs, { compactBytesMin: 1 << 30 });
      const ids = idsInSlot(8, idCount);
      await Promise.all(ids.map((id) => store.update(id, () => entry(id))));
      const before = fs.log.length;
      await store.update(ids[0]!, bumpEpoch);
      return fs.log
        .slice(before)
        .filter((line) => line.startsWith("write "))
        .reduce((sum, line) => sum + Number(line.split(" ")[2]!.split("@")[0]), 0);
    }
    const small = await bytesPerTransition(1);
    const large = await bytesPerTransition(2000);
    expect(large).toBe(small);
    expect(small).toBeLessThan(1024);
  });
});

describe("close", () => {
  test("waits for writes in flight and refuses later updates", async () => {
    const fs = new MemoryFs();
    const store = await open(fs);
    const pending = store.update("a", () => entry("a"));
    await store.close();
    await pending;
    await expect(store.update("a", bumpEpoch)).rejects.toThrow(/closed/);
    fs.crash();
    expect(await (await open(fs)).get("a")).toEqual(entry("a"));
  });
});
