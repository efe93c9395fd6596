import { afterEach, describe, expect, test } from "bun:test";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FatalError } from "../../../src/errors/errors.ts";
import { nodeFs } from "../../../src/platform/node-fs.ts";
import { cleanTmpFiles, ensureDir, isTmpFileName, writeFileAtomic } from "../../../src/storage/atomic-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

/** A fresh fs with a durable /d, optionally holding a durable /d/state with `old`. */
async function setup(old?: string): Promise<MemoryFs> {
  const fs = new MemoryFs();
  await ensureDir(fs, "/d");
  if (old !== undefined) await writeFileAtomic(fs, "/d/state", bytes(old));
  fs.log.length = 0;
  return fs;
}

async function contentOf(fs: MemoryFs, path: string): Promise<string | undefined> {
  return (await fs.stat(path)) === undefined ? undefined : text(await fs.readFile(path));
}

/**
 * Runs writeFileAtomic with the process dying after k operations, for every k until it completes, then
 * crashes and returns what survived at each k (plus the tmp files left behind).
 */
async function survivorsAtEveryStep(old: string | undefined, next: string) {
  const outcomes: { k: number; content: string | undefined; completed: boolean; leftovers: string[] }[] = [];
  for (let k = 0; ; k++) {
    const fs = await setup(old);
    fs.haltAfterOps(k);
    const completed = await writeFileAtomic(fs, "/d/state", bytes(next)).then(
      () => true,
      () => false,
    );
    fs.crash();
    const leftovers = (await fs.readdir("/d")).filter(isTmpFileName);
    outcomes.push({ k, content: await contentOf(fs, "/d/state"), completed, leftovers });
    if (completed) return outcomes;
    if (k > 50) throw new Error("writeFileAtomic never completed");
  }
}

describe("writeFileAtomic", () => {
  test("follows tmp write -> fsync -> rename -> fsync(dir), in that order", async () => {
    const fs = await setup("old");
    await writeFileAtomic(fs, "/d/state", bytes("new"));
    const steps = fs.log.map((line) => line.replace(/state\.[0-9a-f]{16}\.tmp/, "state.TMP").replace(/ \d+@\S+$/, ""));
    expect(steps).toEqual([
      "open /d/state.TMP w",
      "write /d/state.TMP",
      "fsync /d/state.TMP",
      "close /d/state.TMP",
      "rename /d/state.TMP /d/state",
      "fsyncDir /d",
    ]);
    expect(await contentOf(fs, "/d/state")).toBe("new");
  });

  test("a crash at any step leaves the old content or the new one, never a mix or nothing", async () => {
    const outcomes = await survivorsAtEveryStep("old content", "new content, longer");
    expect(outcomes.length).toBeGreaterThan(5);
    for (const outcome of outcomes) {
      expect(["old content", "new content, longer"]).toContain(outcome.content!);
      expect(outcome.leftovers).toEqual([]);
    }
    expect(outcomes.at(-1)!.content).toBe("new content, longer");
  });

  test("a crash at any step of a first write leaves no file or the whole new one", async () => {
    const outcomes = await survivorsAtEveryStep(undefined, "first");
    for (const outcome of outcomes) expect([undefined, "first"]).toContain(outcome.content);
    expect(outcomes.at(-1)!.content).toBe("first");
  });

  test("once writeFileAtomic returns, the new content survives a crash", async () => {
    const fs = await setup("old");
    await writeFileAtomic(fs, "/d/state", bytes("new"));
    fs.crash();
    expect(await contentOf(fs, "/d/state")).toBe("new");
  });

  test("a failed fsync of the tmp file is fatal and leaves the old content and no tmp file", async () => {
    const fs = await setup("old");
    fs.failNextFsync("/d/state.", { target: "file" });
    const error = await writeFileAtomic(fs, "/d/state", bytes("new")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FatalError);
    expect(((error as FatalError).cause as { code: string }).code).toBe("EIO");
    expect(await contentOf(fs, "/d/state")).toBe("old");
    expect(await fs.readdir("/d")).toEqual(["state"]);
  });

  test("a failed fsync of the directory is fatal", async () => {
    const fs = await setup("old");
    fs.failNextFsync("/d", { target: "dir" });
    await expect(writeFileAtomic(fs, "/d/state", bytes("new"))).rejects.toBeInstanceOf(FatalError);
    fs.crash();
    expect(await contentOf(fs, "/d/state")).toBe("old");
  });

  test("a torn write throws the write's error and removes the tmp file", async () => {
    const fs = await setup("old");
    fs.failNextWrite("/d/", { torn: 2 });
    const error = await writeFileAtomic(fs, "/d/state", bytes("new")).catch((e: unknown) => e);
    expect((error as { code: string }).code).toBe("EIO");
    expect(await fs.readdir("/d")).toEqual(["state"]);
    expect(await contentOf(fs, "/d/state")).toBe("old");
  });

  test("a full disk throws ENOSPC and keeps the old content", async () => {
    const fs = await setup("old");
    fs.enospcAfterBytes(1);
    const error = await writeFileAtomic(fs, "/d/state", bytes("new")).catch((e: unknown) => e);
    expect((error as { code: string }).code).toBe("ENOSPC");
    expect(await contentOf(fs, "/d/state")).toBe("old");
    expect(await fs.readdir("/d")).toEqual(["state"]);
  });

  test("uses a different tmp name for every write", async () => {
    const fs = await setup();
    await writeFileAtomic(fs, "/d/state", bytes("1"));
    await writeFileAtomic(fs, "/d/state", bytes("2"));
    const tmpNames = new Set(fs.log.filter((line) => line.startsWith("open ")));
    expect(tmpNames.size).toBe(2);
  });

  test("works against the real file system", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bunka-atomic-"));
    try {
      const path = join(dir, "state.json");
      await writeFileAtomic(nodeFs, path, bytes("one"));
      await writeFileAtomic(nodeFs, path, bytes("two"));
      expect(text(await nodeFs.readFile(path))).toBe("two");
      expect(await readdir(dir)).toEqual(["state.json"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("cleanTmpFiles", () => {
  test("removes leftover tmp files and nothing else", async () => {
    const fs = await setup("old");
    for (const name of ["state.0123456789abcdef.tmp", "notes.tmp", "state.0123456789abcdef.tmp.keep"]) {
      await (await fs.open(`/d/${name}`, "w")).close();
    }
    await fs.mkdirp("/d/dir.fedcba9876543210.tmp");
    expect(await cleanTmpFiles(fs, "/d")).toEqual(["state.0123456789abcdef.tmp"]);
    expect(await fs.readdir("/d")).toEqual([
      "dir.fedcba9876543210.tmp",
      "notes.tmp",
      "state",
      "state.0123456789abcdef.tmp.keep",
    ]);
  });
});

describe("ensureDir", () => {
  const cleanups: string[] = [];
  afterEach(async () => {
    for (const dir of cleanups.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  test("creates missing ancestors durably", async () => {
    const fs = new MemoryFs();
    await ensureDir(fs, "/a/b/c");
    fs.crash();
    expect((await fs.stat("/a/b/c"))?.isDirectory).toBe(true);
  });

  test("does nothing for an existing directory", async () => {
    const fs = new MemoryFs();
    await ensureDir(fs, "/a");
    fs.log.length = 0;
    await ensureDir(fs, "/a");
    expect(fs.count("mkdirp")).toBe(0);
  });

  test("refuses a path that is a file", async () => {
    const fs = new MemoryFs();
    await (await fs.open("/a", "w")).close();
    await expect(ensureDir(fs, "/a/b")).rejects.toThrow("not a directory");
  });

  test("works against the real file system", async () => {
    const root = await mkdtemp(join(tmpdir(), "bunka-ensure-"));
    cleanups.push(root);
    await ensureDir(nodeFs, join(root, "x", "y"));
    expect((await nodeFs.stat(join(root, "x", "y")))?.isDirectory).toBe(true);
  });
});
