import { describe, expect, test } from "bun:test";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import type { FileHandle, Fs, OpenMode } from "../../../src/platform/fs.ts";
import {
  PRODUCER_ID_BLOCK_FORMAT,
  PRODUCER_ID_BLOCK_SIZE,
  ProducerIdStore,
  producerIdsDir,
  type AllocateResult,
} from "../../../src/storage/producer-id-store.ts";
import { loadState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";
import { seededRandom } from "../../support/random.ts";

const DATA = "/data";
const DIR = producerIdsDir(DATA);
const CLAIMS = `${DIR}/claims`;
const quiet = { log: () => undefined };

/**
 * An Fs that yields to other tasks a random number of times before and after every operation, so that
 * two stores over one MemoryFs interleave their steps the way two broker processes would.
 */
class JitteryFs implements Fs {
  constructor(
    private readonly inner: Fs,
    private readonly random: ReturnType<typeof seededRandom>,
  ) {}

  async jitter(): Promise<void> {
    for (let n = this.random.int(0, 6); n > 0; n--) await Promise.resolve();
  }

  private async around<T>(operation: () => Promise<T>): Promise<T> {
    await this.jitter();
    const result = await operation();
    await this.jitter();
    return result;
  }

  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const handle = await this.around(() => this.inner.open(path, mode));
    const around = <T>(operation: () => Promise<T>) => this.around(operation);
    return {
      write: (data, position) => around(() => handle.write(data, position)),
      read: (length, position) => around(() => handle.read(length, position)),
      truncate: (length) => around(() => handle.truncate(length)),
      fsync: () => around(() => handle.fsync()),
      size: () => around(() => handle.size()),
      close: () => around(() => handle.close()),
    };
  }
  readFile(path: string) {
    return this.around(() => this.inner.readFile(path));
  }
  rename(from: string, to: string) {
    return this.around(() => this.inner.rename(from, to));
  }
  fsyncDir(path: string) {
    return this.around(() => this.inner.fsyncDir(path));
  }
  mkdirp(path: string) {
    return this.around(() => this.inner.mkdirp(path));
  }
  readdir(path: string) {
    return this.around(() => this.inner.readdir(path));
  }
  unlink(path: string) {
    return this.around(() => this.inner.unlink(path));
  }
  rmrf(path: string) {
    return this.around(() => this.inner.rmrf(path));
  }
  stat(path: string) {
    return this.around(() => this.inner.stat(path));
  }
}

function idOf(result: AllocateResult): number {
  if (!result.ok) throw new Error(`allocation failed: ${result.reason}`);
  return result.producerId;
}

async function allocateMany(store: ProducerIdStore, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push(idOf(await store.allocate()));
  return ids;
}

function expectUnique(ids: readonly number[]): void {
  const seen = new Set<number>();
  for (const id of ids) {
    if (seen.has(id)) throw new Error(`producer id ${id} was handed out twice`);
    seen.add(id);
  }
}

describe("ProducerIdStore", () => {
  test("hands out consecutive ids from blocks of 1000, starting at 0", async () => {
    const fs = new MemoryFs();
    const store = await ProducerIdStore.open(fs, DATA, 1, quiet);
    const ids = await allocateMany(store, PRODUCER_ID_BLOCK_SIZE + 2);
    expect(ids.slice(0, 3)).toEqual([0, 1, 2]);
    expect(ids.at(-1)).toBe(PRODUCER_ID_BLOCK_SIZE + 1);
    expect(store.currentBlock).toEqual({ blockIndex: 1, firstProducerId: 1000, lastProducerId: 1999 });
  });

  test("the block is durable, in the claim and in <broker>.json, before its first id is handed out", async () => {
    const fs = new MemoryFs();
    const store = await ProducerIdStore.open(fs, DATA, 7, quiet);
    expect(idOf(await store.allocate())).toBe(0);
    fs.crash();
    const claims = await fs.readdir(CLAIMS);
    expect(claims).toHaveLength(1);
    expect(claims[0]).toMatch(/^0000000000000000\.7\.[0-9a-f]{16}\.claim$/);
    const record = await loadState(fs, `${DIR}/7.json`, PRODUCER_ID_BLOCK_FORMAT, { current: 1 });
    expect(record).toMatchObject({ brokerId: 7, blockIndex: 0, firstProducerId: 0, lastProducerId: 999, claim: claims[0] });
  });

  test("concurrent allocate() calls on one store are serialized: distinct ids, one reservation per block", async () => {
    const fs = new MemoryFs();
    const store = await ProducerIdStore.open(new JitteryFs(fs, seededRandom(1)), DATA, 1, { ...quiet, blockSize: 10 });
    const ids = (await Promise.all(Array.from({ length: 95 }, () => store.allocate()))).map(idOf);
    expect(ids).toEqual(Array.from({ length: 95 }, (_, i) => i));
    expect(fs.log.filter((line) => line.startsWith("open /data/__cluster/producer_ids/claims/"))).toHaveLength(10);
  });

  test("ids are never reused across restarts: a restart starts a new block", async () => {
    const fs = new MemoryFs();
    const handedOut: number[] = [];
    for (let restart = 0; restart < 5; restart++) {
      const store = await ProducerIdStore.open(fs, DATA, 1, quiet);
      const ids = await allocateMany(store, 3);
      expect(ids[0]).toBe(restart * PRODUCER_ID_BLOCK_SIZE);
      handedOut.push(...ids);
      if (restart % 2 === 0) fs.crash();
    }
    expectUnique(handedOut);
  });

  test("a restart goes past its recorded block even if the claims were lost", async () => {
    const fs = new MemoryFs();
    const first = await ProducerIdStore.open(fs, DATA, 1, quiet);
    await allocateMany(first, 2);
    await fs.rmrf(CLAIMS);
    const second = await ProducerIdStore.open(fs, DATA, 1, quiet);
    expect(idOf(await second.allocate())).toBe(PRODUCER_ID_BLOCK_SIZE);
  });

  test("two brokers sharing the directory never hand out the same id over many interleaved allocations", async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const fs = new MemoryFs();
      const random = seededRandom(seed);
      const options = { ...quiet, blockSize: 3 };
      // Broker 2 twice: a zombie and its replacement with the same broker id must not collide either.
      const stores = [
        await ProducerIdStore.open(new JitteryFs(fs, random), DATA, 1, options),
        await ProducerIdStore.open(new JitteryFs(fs, random), DATA, 2, options),
        await ProducerIdStore.open(new JitteryFs(fs, random), DATA, 2, options),
      ];
      const handedOut: number[] = [];
      let failures = 0;
      await Promise.all(
        stores.map(async (store) => {
          for (let i = 0; i < 150; i++) {
            const result = await store.allocate();
            if (result.ok) handedOut.push(result.producerId);
            else failures++;
          }
        }),
      );
      expectUnique(handedOut);
      // Losing a race is a retriable failure, but it must stay the exception even at this contention
      // (a reservation every third id, three stores); 1000 runs over these seeds never exceeded ~20.
      expect(failures).toBeLessThan(60);
      expect(handedOut.length + failures).toBe(450);
      // Compaction keeps the claims directory small however many blocks were reserved.
      expect((await fs.readdir(CLAIMS)).length).toBeLessThan(10);
    }
  });

  test("stores that race for a block from the start never both win it", async () => {
    for (let seed = 10; seed < 60; seed++) {
      const fs = new MemoryFs();
      const random = seededRandom(seed);
      const a = await ProducerIdStore.open(new JitteryFs(fs, random), DATA, 1, quiet);
      const b = await ProducerIdStore.open(new JitteryFs(fs, random), DATA, 2, quiet);
      const [ra, rb] = await Promise.all([a.allocate(), b.allocate()]);
      if (ra.ok && rb.ok) expect(Math.floor(ra.producerId / 1000)).not.toBe(Math.floor(rb.producerId / 1000));
    }
  });

  describe("a reservation that cannot be made durable is a retriable failure, never an in-memory fallback", () => {
    for (const [name, inject] of [
      ["the claim's fsync fails", (fs: MemoryFs) => fs.failNextFsync(CLAIMS, { target: "file" })],
      ["the claims directory's fsync fails", (fs: MemoryFs) => fs.failNextFsync(CLAIMS, { target: "dir" })],
      ["the fsync of <broker>.json fails", (fs: MemoryFs) => fs.failNextFsync(`${DIR}/1.json`, { target: "file" })],
      ["the disk is full", (fs: MemoryFs) => fs.enospcAfterBytes(0)],
    ] as const) {
      test(name, async () => {
        const fs = new MemoryFs();
        const store = await ProducerIdStore.open(fs, DATA, 1, { ...quiet, blockSize: 10 });
        const handedOut = await allocateMany(store, 10); // block 0, exhausted
        inject(fs);
        const failed = await store.allocate();
        expect(failed).toMatchObject({ ok: false, retriable: true });
        fs.clearFaults();
        // The block that failed (1) is abandoned: nothing from it is ever handed out by this store.
        const after = await allocateMany(store, 5);
        for (const id of after) expect(id).toBeGreaterThanOrEqual(20);
        handedOut.push(...after);
        // After a crash the failed claim may be gone and its block reserved again, by another store,
        // which is safe exactly because no id of it was handed out.
        fs.crash();
        const next = await ProducerIdStore.open(fs, DATA, 2, { ...quiet, blockSize: 10 });
        handedOut.push(...(await allocateMany(next, 25)));
        expectUnique(handedOut);
      });
    }
  });

  test("a crash at any step of a reservation never leads to an id being handed out twice", async () => {
    for (let ops = 0; ; ops++) {
      const fs = new MemoryFs();
      const options = { ...quiet, blockSize: 4 };
      const first = await ProducerIdStore.open(fs, DATA, 1, options);
      const handedOut = await allocateMany(first, 4); // block 0, exhausted
      fs.haltAfterOps(ops);
      const during = await first.allocate();
      if (during.ok) handedOut.push(during.producerId);
      fs.crash();
      // The same broker restarts, and another broker shares the directory.
      for (const brokerId of [1, 2]) {
        const store = await ProducerIdStore.open(fs, DATA, brokerId, options);
        handedOut.push(...(await allocateMany(store, 6)));
      }
      expectUnique(handedOut);
      if (during.ok && ops > 40) break;
    }
  });

  test("a corrupt <broker>.json is refused at open, never taken for absent", async () => {
    const fs = new MemoryFs();
    const store = await ProducerIdStore.open(fs, DATA, 1, quiet);
    await store.allocate();
    const handle = await fs.open(`${DIR}/1.json`, "rw");
    await handle.write(new TextEncoder().encode("9"), 60);
    await handle.close();
    await expect(ProducerIdStore.open(fs, DATA, 1, quiet)).rejects.toBeInstanceOf(CorruptStateError);
  });
});
