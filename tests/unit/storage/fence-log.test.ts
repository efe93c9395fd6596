/**
 * The producer fence log: durable appends (fsync of the file, the directory once), complete lines only
 * for readers, torn tails cut before the next append, corrupt lines reported and skipped, fsync failure
 * fatal.
 */
import { describe, expect, test } from "bun:test";
import { FatalError } from "../../../src/errors/errors.ts";
import { FenceLogWriter, fenceLogDir, fenceLogPath, listFenceLogs, readFenceLog } from "../../../src/storage/fence-log.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const T0 = 1_700_000_000_000;

describe("fence log", () => {
  test("appends are durable, one line each, and read back in order", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 3);
    await writer.append({ producerId: 1000, epoch: 1, timestampMs: T0 });
    await writer.append({ producerId: 1001, epoch: 7, timestampMs: T0 + 1 });
    fs.crash();
    const read = await readFenceLog(fs, fenceLogPath(DATA, 3), 0);
    expect(read.fences).toEqual([
      { producerId: 1000, epoch: 1, brokerId: 3, timestampMs: T0 },
      { producerId: 1001, epoch: 7, brokerId: 3, timestampMs: T0 + 1 },
    ]);
    expect(read.corrupt).toEqual([]);
    expect(await listFenceLogs(fs, DATA)).toEqual([3]);
    // Reading on from where the last read stopped finds nothing new.
    expect((await readFenceLog(fs, fenceLogPath(DATA, 3), read.nextOffset)).fences).toEqual([]);
  });

  test("an unterminated last line is not read, and the next append cuts it off", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 0);
    await writer.append({ producerId: 1, epoch: 1, timestampMs: T0 });
    const path = fenceLogPath(DATA, 0);
    const good = (await fs.readFile(path)).length;
    const handle = await fs.open(path, "rw");
    await handle.write(new TextEncoder().encode('{"format":"producer-fence","vers'), good);
    await handle.fsync();
    await handle.close();
    const torn = await readFenceLog(fs, path, 0);
    expect(torn.fences).toHaveLength(1);
    expect(torn.nextOffset).toBe(good);
    // A new writer (after a restart) continues after the last complete line.
    const reopened = await FenceLogWriter.open(fs, DATA, 0);
    await reopened.append({ producerId: 2, epoch: 5, timestampMs: T0 });
    const read = await readFenceLog(fs, path, 0);
    expect(read.fences.map((f) => f.producerId)).toEqual([1, 2]);
    expect(read.corrupt).toEqual([]);
  });

  test("a corrupt complete line is reported and skipped; the lines after it are read", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 0);
    await writer.append({ producerId: 1, epoch: 1, timestampMs: T0 });
    await writer.append({ producerId: 2, epoch: 2, timestampMs: T0 });
    await writer.append({ producerId: 3, epoch: 3, timestampMs: T0 });
    const path = fenceLogPath(DATA, 0);
    const bytes = await fs.readFile(path);
    const secondLine = bytes.indexOf(0x0a) + 1;
    // Flip a digit of the second line's epoch: its CRC no longer matches.
    const text = new TextDecoder().decode(bytes);
    const at = text.indexOf('"epoch":2', secondLine) + '"epoch":'.length;
    const handle = await fs.open(path, "rw");
    await handle.write(new TextEncoder().encode("9"), at);
    await handle.close();
    const read = await readFenceLog(fs, path, 0);
    expect(read.fences.map((f) => f.producerId)).toEqual([1, 3]);
    expect(read.corrupt).toHaveLength(1);
    expect(read.corrupt[0]!.offset).toBe(secondLine);
    expect(read.corrupt[0]!.reason).toContain("checksum");
  });

  test("a failed fsync is fatal, for this append and every later one", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 0);
    fs.failNextFsync(fenceLogDir(DATA), { target: "file" });
    await expect(writer.append({ producerId: 1, epoch: 1, timestampMs: T0 })).rejects.toBeInstanceOf(FatalError);
    await expect(writer.append({ producerId: 2, epoch: 1, timestampMs: T0 })).rejects.toBeInstanceOf(FatalError);
  });

  test("a failed write is not acknowledged and leaves no partial line", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 0);
    await writer.append({ producerId: 1, epoch: 1, timestampMs: T0 });
    fs.failNextWrite(fenceLogDir(DATA), { torn: 10 });
    await expect(writer.append({ producerId: 2, epoch: 1, timestampMs: T0 })).rejects.toThrow();
    await writer.append({ producerId: 3, epoch: 1, timestampMs: T0 });
    const read = await readFenceLog(fs, fenceLogPath(DATA, 0), 0);
    expect(read.fences.map((f) => f.producerId)).toEqual([1, 3]);
    expect(read.corrupt).toEqual([]);
  });

  test("a log shorter than the offset read so far is reported as shrunk", async () => {
    const fs = new MemoryFs();
    const writer = await FenceLogWriter.open(fs, DATA, 0);
    await writer.append({ producerId: 1, epoch: 1, timestampMs: T0 });
    const read = await readFenceLog(fs, fenceLogPath(DATA, 0), 10_000);
    expect(read.shrunk).toBe(true);
    expect(read.nextOffset).toBe(0);
  });
});
