/**
 * The in-memory Fs is the model every crash test relies on, so its durability rules get tests of
 * their own: if the model were too kind, storage tests would pass against code that loses data.
 */
import { describe, expect, test } from "bun:test";
import { MemoryFs, MemoryFsError, SimulatedHaltError } from "../../support/memory-fs.ts";
import { ManualClock } from "../../support/manual-clock.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

async function durableDir(fs: MemoryFs, dir: string): Promise<void> {
  await fs.mkdirp(dir);
  await fs.fsyncDir("/");
  await fs.fsyncDir(dir);
}

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

describe("MemoryFs durability model", () => {
  test("unsynced writes are lost by a crash, synced ones are kept", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    const h = await fs.open("/d/f", "w");
    await h.write(bytes("hello"));
    await h.fsync();
    await fs.fsyncDir("/d");
    await h.write(bytes(" world"));
    expect(text(await fs.readFile("/d/f"))).toBe("hello world");
    fs.crash();
    expect(text(await fs.readFile("/d/f"))).toBe("hello");
  });

  test("a new file fsynced without an fsync of its directory vanishes in a crash", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    const h = await fs.open("/d/f", "w");
    await h.write(bytes("x"));
    await h.fsync();
    fs.crash();
    expect(await fs.stat("/d/f")).toBeUndefined();
  });

  test("a directory fsync without a file fsync keeps the name but not the content", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    const h = await fs.open("/d/f", "w");
    await h.write(bytes("x"));
    await fs.fsyncDir("/d");
    fs.crash();
    expect((await fs.readFile("/d/f")).length).toBe(0);
  });

  test("rename, unlink and rmrf are undone by a crash until the directory is fsynced", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    for (const name of ["a", "b"]) {
      const h = await fs.open(`/d/${name}`, "w");
      await h.write(bytes(name));
      await h.fsync();
    }
    await fs.mkdirp("/d/sub");
    await fs.fsyncDir("/d");

    await fs.rename("/d/a", "/d/b");
    await fs.rmrf("/d/sub");
    expect(await fs.readdir("/d")).toEqual(["b"]);
    fs.crash();
    expect(await fs.readdir("/d")).toEqual(["a", "b", "sub"]);
    expect(text(await fs.readFile("/d/b"))).toBe("b");

    await fs.rename("/d/a", "/d/b");
    await fs.unlink("/d/b");
    await fs.fsyncDir("/d");
    fs.crash();
    expect(await fs.readdir("/d")).toEqual(["sub"]);
  });

  test("a directory that was never made durable disappears with everything in it", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp("/d/e");
    await fs.fsyncDir("/d/e");
    await fs.fsyncDir("/d");
    fs.crash();
    expect(await fs.stat("/d")).toBeUndefined();
  });

  test("handles opened before a crash are dead after it", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    const h = await fs.open("/d/f", "w");
    fs.crash();
    expect(await codeOf(h.write(bytes("x")))).toBe("EBADF");
  });

  test("a closed handle cannot be used", async () => {
    const fs = new MemoryFs();
    const h = await fs.open("/f", "w");
    await h.close();
    expect(await codeOf(h.fsync())).toBe("EBADF");
  });

  test("positional writes, reads, holes and truncate behave like a file", async () => {
    const fs = new MemoryFs();
    const h = await fs.open("/f", "rw");
    await h.write(bytes("abc"));
    await h.write(bytes("Z"), 5);
    expect(await h.size()).toBe(6);
    expect(Array.from(await h.read(10, 2))).toEqual([99, 0, 0, 90]);
    await h.truncate(2);
    expect(text(await fs.readFile("/f"))).toBe("ab");
    const again = await fs.open("/f", "rw");
    expect(await again.size()).toBe(2);
    const truncated = await fs.open("/f", "w");
    expect(await truncated.size()).toBe(0);
  });

  test("errors carry Node's codes", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp("/d");
    expect(await codeOf(fs.open("/missing", "r"))).toBe("ENOENT");
    expect(await codeOf(fs.open("/no/such/dir/f", "w"))).toBe("ENOENT");
    expect(await codeOf(fs.open("/d", "rw"))).toBe("EISDIR");
    expect(await codeOf(fs.readdir("/missing"))).toBe("ENOENT");
    expect(await codeOf(fs.unlink("/d"))).toBe("EISDIR");
    await (await fs.open("/d/f", "w")).close();
    await fs.mkdirp("/e");
    expect(await codeOf(fs.rename("/e", "/d"))).toBe("ENOTEMPTY");
    expect(await codeOf(fs.readdir("/d/f"))).toBe("ENOTDIR");
    expect(await codeOf(fs.mkdirp("/d/f/g"))).toBe("EEXIST");
    await fs.rmrf("/not/there");
  });

  test("relative paths are resolved from the root", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp("data/x");
    expect((await fs.stat("/data/x"))?.isDirectory).toBe(true);
  });

  test("mtimes come from the injected clock", async () => {
    const clock = new ManualClock(1000);
    const fs = new MemoryFs({ nowMs: () => clock.nowMs() });
    const h = await fs.open("/f", "w");
    clock.advance(500);
    await h.write(bytes("x"));
    expect((await fs.stat("/f"))?.mtimeMs).toBe(1500);
  });
});

describe("MemoryFs fault injection", () => {
  test("failNextFsync fails only the next matching fsync, and the data stays volatile", async () => {
    const fs = new MemoryFs();
    await durableDir(fs, "/d");
    const other = await fs.open("/other", "w");
    const h = await fs.open("/d/f", "w");
    await fs.fsyncDir("/d");
    await h.write(bytes("x"));
    fs.failNextFsync("/d/");
    await other.fsync();
    expect(await codeOf(h.fsync())).toBe("EIO");
    fs.crash();
    expect((await fs.readFile("/d/f")).length).toBe(0);
  });

  test("failNextFsync can target directory fsyncs only", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp("/d");
    const h = await fs.open("/d/f", "w");
    fs.failNextFsync("/d", { target: "dir" });
    await h.fsync();
    expect(await codeOf(fs.fsyncDir("/d"))).toBe("EIO");
    await fs.fsyncDir("/d");
  });

  test("failNextWrite with torn lands that many bytes, then fails", async () => {
    const fs = new MemoryFs();
    const h = await fs.open("/f", "w");
    fs.failNextWrite("/f", { torn: 3 });
    expect(await codeOf(h.write(bytes("abcdef")))).toBe("EIO");
    expect(text(await fs.readFile("/f"))).toBe("abc");
    await h.write(bytes("gh"));
    expect(text(await fs.readFile("/f"))).toBe("abcgh");
  });

  test("failNextWrite ignores writes outside its prefix", async () => {
    const fs = new MemoryFs();
    const a = await fs.open("/a", "w");
    const b = await fs.open("/b", "w");
    fs.failNextWrite("/b");
    await a.write(bytes("ok"));
    expect(await codeOf(b.write(bytes("no")))).toBe("EIO");
    expect((await fs.readFile("/b")).length).toBe(0);
  });

  test("failNextTruncate fails only the next matching truncate and leaves the file as it was", async () => {
    const fs = new MemoryFs();
    const a = await fs.open("/a", "w");
    const b = await fs.open("/b", "w");
    await a.write(bytes("abcdef"));
    await b.write(bytes("abcdef"));
    fs.failNextTruncate("/b");
    await a.truncate(2);
    expect(await codeOf(b.truncate(2))).toBe("EIO");
    expect(text(await fs.readFile("/a"))).toBe("ab");
    expect(text(await fs.readFile("/b"))).toBe("abcdef");
    await b.truncate(3);
    expect(text(await fs.readFile("/b"))).toBe("abc");
  });

  test("enospcAfterBytes lets the crossing write land partially and keeps the disk full", async () => {
    const fs = new MemoryFs();
    const h = await fs.open("/f", "w");
    fs.enospcAfterBytes(4);
    await h.write(bytes("ab"));
    expect(await codeOf(h.write(bytes("cdef")))).toBe("ENOSPC");
    expect(text(await fs.readFile("/f"))).toBe("abcd");
    expect(await codeOf(h.write(bytes("g")))).toBe("ENOSPC");
    fs.clearFaults();
    await h.write(bytes("g"));
  });

  test("haltAfterOps kills the process after n operations, until crash()", async () => {
    const fs = new MemoryFs();
    fs.haltAfterOps(1);
    await fs.mkdirp("/a");
    await expect(fs.mkdirp("/b")).rejects.toBeInstanceOf(SimulatedHaltError);
    await expect(fs.stat("/a")).rejects.toBeInstanceOf(SimulatedHaltError);
    fs.crash();
    expect(await fs.stat("/a")).toBeUndefined();
  });

  test("the operation log records fsyncs so tests can prove they happen", async () => {
    const fs = new MemoryFs();
    const h = await fs.open("/f", "w");
    await h.fsync();
    await fs.fsyncDir("/");
    expect(fs.count("fsync")).toBe(1);
    expect(fs.count("fsyncDir")).toBe(1);
    expect(fs.log).toContain("fsync /f");
  });

  test("MemoryFsError names the code, call and path", () => {
    const error = new MemoryFsError("ENOENT", "open", "/x");
    expect(error.message).toBe("ENOENT: open '/x'");
  });
});

describe("ManualClock", () => {
  test("moves only when told, and the monotonic clock never goes back", () => {
    const clock = new ManualClock(10, 5);
    clock.advance(7);
    expect(clock.nowMs()).toBe(17);
    expect(clock.monotonicMs()).toBe(12);
    clock.setNowMs(3);
    expect(clock.nowMs()).toBe(3);
    expect(() => clock.setMonotonicMs(11)).toThrow(RangeError);
    expect(() => clock.advance(-1)).toThrow(RangeError);
  });
});
