import { describe, expect, test } from "bun:test";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import { ensureDir } from "../../../src/storage/atomic-file.ts";
import { crc32 } from "../../../src/storage/crc32.ts";
import { canonicalJson, encodeState, loadState, saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const PATH = "/d/thing.json";
const text = (data: Uint8Array) => new TextDecoder().decode(data);
const bytes = (value: string) => new TextEncoder().encode(value);

async function setup(): Promise<MemoryFs> {
  const fs = new MemoryFs();
  await ensureDir(fs, "/d");
  return fs;
}

/** Writes raw bytes as a file, bypassing saveState, to plant damaged or foreign files. */
async function plant(fs: MemoryFs, content: string): Promise<void> {
  const handle = await fs.open(PATH, "w");
  await handle.write(bytes(content));
  await handle.close();
}

async function corruptReason(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CorruptStateError);
  expect((error as CorruptStateError).path).toBe(PATH);
  expect((error as CorruptStateError).message).toStartWith(`${PATH}: `);
  return (error as CorruptStateError).message;
}

describe("saveState / loadState", () => {
  test("round-trips a body", async () => {
    const fs = await setup();
    const body = { b: [1, 2, { z: null, a: "x" }], a: true, n: -1.5 };
    await saveState(fs, PATH, "thing", 2, body);
    expect(await loadState(fs, PATH, "thing", { current: 2 })).toEqual(body);
  });

  test("survives a crash once saved", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { value: 42 });
    fs.crash();
    expect(await loadState(fs, PATH, "thing", { current: 1 })).toEqual({ value: 42 });
  });

  test("writes one documented line: format, version, crc32 of the canonical body, body", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 3, { b: 1, a: "é" });
    const body = '{"a":"é","b":1}';
    expect(text(await fs.readFile(PATH))).toBe(`{"format":"thing","version":3,"crc32":${crc32(bytes(body))},"body":${body}}\n`);
  });

  test("a missing file loads as undefined", async () => {
    const fs = await setup();
    expect(await loadState(fs, PATH, "thing", { current: 1 })).toBeUndefined();
  });

  test("the checksum does not depend on key order or envelope formatting", async () => {
    const fs = await setup();
    const body = { b: 1, a: { d: 2, c: 3 } };
    const crc = crc32(bytes(canonicalJson(body)));
    await plant(fs, `{\n  "body": {"a": {"c": 3, "d": 2}, "b": 1},\n  "crc32": ${crc},\n  "version": 1,\n  "format": "thing"\n}`);
    expect(await loadState(fs, PATH, "thing", { current: 1 })).toEqual({ a: { c: 3, d: 2 }, b: 1 });
  });

  test("regression: a changed value with the old checksum is a checksum mismatch", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { partitions: 3 });
    await plant(fs, text(await fs.readFile(PATH)).replace('"partitions":3', '"partitions":4'));
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("checksum mismatch");
  });

  test("a torn (truncated) file is corrupt, not absent", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { value: "x".repeat(100) });
    await plant(fs, text(await fs.readFile(PATH)).slice(0, 40));
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("not valid JSON");
  });

  test("an empty file is corrupt, not empty state", async () => {
    const fs = await setup();
    await plant(fs, "");
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("empty");
  });

  test("a file of another format is refused", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "other", 1, {});
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain('wrong format "other"');
  });

  test("an unknown (newer) version is refused, naming the versions this build reads", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 3, {});
    const reason = await corruptReason(loadState(fs, PATH, "thing", { current: 2, accepted: [1] }));
    expect(reason).toContain("unknown version 3");
    expect(reason).toContain("2, 1");
  });

  test("an older version that is not accepted is refused", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, {});
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 3, accepted: [2] }))).toContain("unknown version 1");
  });

  test("the previous version is accepted and migrated", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { timeout: 5 });
    const migrated = await loadState(fs, PATH, "thing", {
      current: 2,
      accepted: [1],
      migrate: (body, version) => {
        expect(version).toBe(1);
        return { timeoutMs: (body as { timeout: number }).timeout * 1000 };
      },
    });
    expect(migrated).toEqual({ timeoutMs: 5000 });
  });

  test("a current-version body is not migrated", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 2, { timeoutMs: 1 });
    const loaded = await loadState(fs, PATH, "thing", {
      current: 2,
      accepted: [1],
      migrate: () => {
        throw new Error("must not be called");
      },
    });
    expect(loaded).toEqual({ timeoutMs: 1 });
  });

  test("parse types the body, and its failure marks the file corrupt", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { count: "three" });
    const parse = (body: unknown): { count: number } => {
      const count = (body as { count: unknown }).count;
      if (typeof count !== "number") throw new Error("count must be a number");
      return { count };
    };
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1, parse }))).toContain("count must be a number");
    await saveState(fs, PATH, "thing", 1, { count: 3 });
    const loaded: { count: number } | undefined = await loadState(fs, PATH, "thing", { current: 1, parse });
    expect(loaded).toEqual({ count: 3 });
  });

  test("missing or malformed envelope fields are corrupt", async () => {
    const fs = await setup();
    await plant(fs, '{"format":"thing","version":1,"crc32":0}');
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("missing body");
    await plant(fs, '{"format":"thing","version":1,"crc32":"x","body":{}}');
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("invalid crc32");
    await plant(fs, "[1,2]");
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("not a JSON object");
  });

  test("invalid UTF-8 is corrupt", async () => {
    const fs = await setup();
    const handle = await fs.open(PATH, "w");
    await handle.write(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]));
    await handle.close();
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("UTF-8");
  });

  test("a directory in place of the file is corrupt", async () => {
    const fs = await setup();
    await fs.mkdirp(PATH);
    expect(await corruptReason(loadState(fs, PATH, "thing", { current: 1 }))).toContain("directory");
  });

  test("an injected fsync failure propagates as FatalError and the old state stays", async () => {
    const fs = await setup();
    await saveState(fs, PATH, "thing", 1, { value: 1 });
    fs.failNextFsync("/d/");
    await expect(saveState(fs, PATH, "thing", 1, { value: 2 })).rejects.toBeInstanceOf(FatalError);
    fs.crash();
    expect(await loadState(fs, PATH, "thing", { current: 1 })).toEqual({ value: 1 });
  });
});

describe("canonicalJson / encodeState", () => {
  test("sorts keys at every depth and omits undefined properties", () => {
    expect(canonicalJson({ b: { y: 1, x: [{ d: 1, c: 2 }] }, a: undefined, c: "s" })).toBe('{"b":{"x":[{"c":2,"d":1}],"y":1},"c":"s"}');
  });

  test("equals a plain sorted-keys serialisation, for awkward keys and values", () => {
    // Not an object rebuilt in sorted order and stringified: objects list integer-like keys ("9", "10")
    // first, in numeric order, whatever the insertion order.
    const reference = (value: unknown): string => {
      if (Array.isArray(value)) return `[${value.map(reference).join(",")}]`;
      if (value === null || typeof value !== "object") return JSON.stringify(value);
      const record = value as Record<string, unknown>;
      return `{${Object.keys(record)
        .sort()
        .map((key) => `${JSON.stringify(key)}:${reference(record[key])}`)
        .join(",")}}`;
    };
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { z: 1, a: [] });
    const values: unknown[] = [
      { zeta: 1, alpha: { b: [3, { y: null, x: "é\u2028\"q" }], a: {} }, 'a"b': true, "10": -0, "9": 1.5e300, é: "", "": [] },
      [{ b: 1, a: 2 }, [], "s", false, null, 0],
      { put: [{ transactionalId: "t", partitions: [{ topic: "t", partition: 3 }], epoch: 0 }], del: ["x"], seq: 7 },
      nullProto,
      "just a string",
      42,
    ];
    for (const value of values) expect(canonicalJson(value)).toBe(reference(value));
    expect(canonicalJson(values[0])).toStartWith('{"":[],"10":0,"9":1.5e+300,');
    // Encoded twice, the same bytes: the key cache changes nothing.
    expect(encodeState("x", 1, values[0])).toEqual(encodeState("x", 1, values[0]));
  });

  test("refuses values JSON would silently change", () => {
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson({ a: Number.POSITIVE_INFINITY })).toThrow(TypeError);
    expect(() => canonicalJson({ a: 1n })).toThrow(TypeError);
    expect(() => canonicalJson({ a: new Date(0) })).toThrow("body.a is not a plain object");
    expect(() => canonicalJson([undefined])).toThrow(TypeError);
    expect(() => canonicalJson(() => 1)).toThrow(TypeError);
  });

  test("refuses bad format names and versions", () => {
    expect(() => encodeState("Bad Name", 1, {})).toThrow(TypeError);
    expect(() => encodeState("ok", -1, {})).toThrow(TypeError);
    expect(() => encodeState("ok", 1.5, {})).toThrow(TypeError);
  });
});
