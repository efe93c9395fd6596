import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeFs, readsRecentWrite, RECENT_WRITE_BYTES } from "../../../src/platform/node-fs.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bunka-node-fs-read-"));
  dirs.push(dir);
  return dir;
}

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

describe("which reads are served synchronously", () => {
  test("only the handle's own writes, and only their last RECENT_WRITE_BYTES", () => {
    // Opened on a 100-byte file, then wrote up to 10 MiB.
    const end = 10 * 1024 * 1024;
    expect(readsRecentWrite(end - 1, 100, end)).toBe(true);
    expect(readsRecentWrite(end - RECENT_WRITE_BYTES, 100, end)).toBe(true);
    expect(readsRecentWrite(end - RECENT_WRITE_BYTES - 1, 100, end)).toBe(false);
    // What the file held at open may have to come from the device, however close to the end.
    expect(readsRecentWrite(99, 100, 150)).toBe(false);
    expect(readsRecentWrite(100, 100, 150)).toBe(true);
    // Past the end: nothing to wait for either way.
    expect(readsRecentWrite(end + 5, 100, end)).toBe(true);
  });
});

describe("reads of the real file system", () => {
  test("return the same bytes from fresh writes, from older content, and short at the end", async () => {
    const dir = tempDir();
    const path = join(dir, "segment");
    writeFileSync(path, "old-content:");
    const handle = await nodeFs.open(path, "rw");
    await handle.write(bytes("fresh-1,"));
    await handle.write(bytes("fresh-2"));

    expect(text(await handle.read(12, 0))).toBe("old-content:"); // found at open: asynchronous
    expect(text(await handle.read(8, 12))).toBe("fresh-1,"); // own write: synchronous
    expect(text(await handle.read(10, 4))).toBe("content:fr"); // starts in the old content
    expect(text(await handle.read(100, 20))).toBe("fresh-2"); // short at the end
    expect((await handle.read(10, 27)).length).toBe(0);
    await handle.close();
  });

  test("after a truncation, reads see the new writes and not the cut bytes", async () => {
    const dir = tempDir();
    const handle = await nodeFs.open(join(dir, "segment"), "w");
    await handle.write(bytes("0123456789"));
    await handle.truncate(4);
    expect(text(await handle.read(10, 0))).toBe("0123");
    await handle.write(bytes("abc"));
    expect(text(await handle.read(10, 0))).toBe("0123abc");
    expect(text(await handle.read(3, 4))).toBe("abc");
    await handle.close();
  });

  test("reads beyond the synchronous window return the same bytes", async () => {
    const dir = tempDir();
    const handle = await nodeFs.open(join(dir, "segment"), "w");
    const chunk = new Uint8Array(1024 * 1024);
    const total = RECENT_WRITE_BYTES + 2 * chunk.length;
    for (let at = 0; at < total; at += chunk.length) {
      chunk.fill((at / chunk.length) & 0xff);
      await handle.write(chunk);
    }
    // The first chunk is older than the window (asynchronous), the last one inside it (synchronous).
    expect(readsRecentWrite(0, 0, total)).toBe(false);
    expect(readsRecentWrite(total - 16, 0, total)).toBe(true);
    expect([...(await handle.read(16, 0))]).toEqual(new Array(16).fill(0));
    expect([...(await handle.read(16, total - 16))]).toEqual(new Array(16).fill(total / chunk.length - 1));
    await handle.close();
  });
});
