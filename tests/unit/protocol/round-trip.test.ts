/**
 * Round trip of every generated message in every version: a seeded random message is built from an
 * independent reading of the JSON schema (which fields exist, which are nullable, which are tagged in that
 * version), encoded, decoded, and compared with what the schema says must come back; re-encoding the decoded
 * message must give the same bytes, and decoding must consume exactly the encoded bytes.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readSchema, servedApis, kebab } from "../../../scripts/gen-protocol.ts";
import { Reader } from "../../../src/protocol/reader.ts";
import { Writer } from "../../../src/protocol/writer.ts";
import { seededRandom } from "../../support/random.ts";

const schemaDir = join(import.meta.dir, "../../../schemas/kafka/message");
const generatedDir = join(import.meta.dir, "../../../src/protocol/generated");

interface Field {
  name: string;
  type: string;
  versions?: string;
  nullableVersions?: string;
  taggedVersions?: string;
  fields?: Field[];
  default?: unknown;
}

function inRange(text: string | undefined, v: number): boolean {
  if (text === undefined || text === "none") return false;
  if (text.endsWith("+")) return v >= Number(text.slice(0, -1));
  const dash = text.indexOf("-");
  if (dash >= 0) return v >= Number(text.slice(0, dash)) && v <= Number(text.slice(dash + 1));
  return v === Number(text);
}
const camel = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

type Random = ReturnType<typeof seededRandom>;

class MessageModel {
  private readonly structs = new Map<string, Field[]>();
  constructor(readonly spec: ReturnType<typeof readSchema>) {
    for (const s of spec.commonStructs ?? []) this.structs.set(s.name, s.fields as Field[]);
    const collect = (fields: Field[]) => {
      for (const f of fields) {
        if (f.fields) {
          this.structs.set(f.type.replace("[]", ""), f.fields);
          collect(f.fields);
        }
      }
    };
    for (const s of spec.commonStructs ?? []) collect(s.fields as Field[]);
    collect(spec.fields as Field[]);
  }

  private scalar(type: string, rnd: Random, version: number, depth: number): unknown {
    switch (type) {
      case "bool":
        return rnd.next() < 0.5;
      case "int8":
        return rnd.int(-128, 127);
      case "int16":
        return rnd.int(-32768, 32767);
      case "uint16":
        return rnd.int(0, 65535);
      case "int32":
        return rnd.int(-2147483648, 2147483647);
      case "int64":
        return rnd.int(-(2 ** 52), 2 ** 52);
      case "float64":
        return rnd.next() * 1e6;
      case "string":
        return rnd.pick(["", "a", "topic-1", "ünïcødé-✓", "x".repeat(rnd.int(0, 300))]);
      case "uuid": {
        const hex = Array.from({ length: 32 }, () => rnd.int(0, 15).toString(16)).join("");
        return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
      }
      case "bytes":
      case "records":
        return new Uint8Array(Array.from({ length: rnd.int(0, 40) }, () => rnd.int(0, 255)));
      default:
        return this.struct(this.structs.get(type)!, rnd, version, depth + 1);
    }
  }

  /** A random value for every field present in `version`; the default for every other field. */
  struct(fields: Field[], rnd: Random, version: number, depth = 0): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      if (!inRange(f.versions ?? "0+", version)) continue;
      const nullable = inRange(f.nullableVersions, version);
      if (nullable && rnd.next() < 0.2) {
        out[camel(f.name)] = null;
        continue;
      }
      if (f.type.startsWith("[]")) {
        const n = depth > 3 ? 0 : rnd.int(0, 3);
        out[camel(f.name)] = Array.from({ length: n }, () => this.scalar(f.type.slice(2), rnd, version, depth));
      } else {
        out[camel(f.name)] = this.scalar(f.type, rnd, version, depth);
      }
    }
    return out;
  }

  /** The schema's default for a field (independent of the generator's reading of it). */
  private defaultOf(f: Field): unknown {
    const d = f.default;
    if (d === "null") return null;
    if (f.type.startsWith("[]")) return [];
    switch (f.type) {
      case "bool":
        return d === true || d === "true";
      case "int8":
      case "int16":
      case "uint16":
      case "int32":
      case "int64":
      case "float64":
        return d === undefined || d === "" ? 0 : String(d).startsWith("0x") ? parseInt(String(d), 16) : Number(d);
      case "string":
        return d === undefined ? "" : String(d);
      case "uuid":
        return "00000000-0000-0000-0000-000000000000";
      case "bytes":
        return new Uint8Array(0);
      case "records":
        return f.nullableVersions ? null : new Uint8Array(0);
      default:
        return this.fill(this.structs.get(f.type)!, {}, -1);
    }
  }

  /** What decoding must give back: fields present in `version` as written, every other field at its default. */
  fill(fields: Field[], value: Record<string, unknown>, version: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      if (!this.live(f)) continue;
      const key = camel(f.name);
      if (version < 0 || !inRange(f.versions ?? "0+", version)) {
        out[key] = this.defaultOf(f);
        continue;
      }
      const v = value[key];
      const element = f.type.startsWith("[]") ? f.type.slice(2) : f.type;
      const nested = this.structs.get(element);
      if (nested && v !== null && v !== undefined) {
        out[key] = Array.isArray(v)
          ? v.map((e) => this.fill(nested, e as Record<string, unknown>, version))
          : this.fill(nested, v as Record<string, unknown>, version);
      } else {
        out[key] = v;
      }
    }
    return out;
  }

  /** Fields that exist in some valid version of the message (the generated types carry only those). */
  private live(f: Field): boolean {
    const [lo, hi] = this.spec.validVersions.split("-").map(Number) as [number, number | undefined];
    for (let v = lo; v <= (hi ?? lo); v++) if (inRange(f.versions ?? "0+", v)) return true;
    return false;
  }
}

/** Drops the bookkeeping property so that comparisons look at fields only. */
function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value instanceof Uint8Array) return Array.from(value);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (k !== "_unknownTaggedFields") out[k] = strip(v);
    return out;
  }
  return value;
}

const kinds = ["Request", "Response"] as const;

describe("generated codecs round-trip every message and version", () => {
  for (const api of servedApis) {
    for (const kind of kinds) {
      const name = `${api}${kind}`;
      test(name, async () => {
        const spec = readSchema(join(schemaDir, `${name}.json`));
        const mod = (await import(join(generatedDir, `${kebab(name)}.ts`))) as Record<string, (...args: any[]) => any>;
        const encode = mod[`encode${name}`]!;
        const decode = mod[`decode${name}`]!;
        const model = new MessageModel(spec);
        const [lo, hi] = spec.validVersions.split("-").map(Number) as [number, number];
        const rnd = seededRandom(0xb0ca ^ (spec.apiKey ?? 0));
        for (let version = lo; version <= (hi ?? lo); version++) {
          for (let iteration = 0; iteration < 20; iteration++) {
            const message = model.struct(spec.fields as Field[], rnd, version);
            const w = new Writer(64);
            encode(w, version, message);
            const bytes = w.finish().slice();
            const r = new Reader(bytes);
            const decoded = decode(r, version);
            expect(r.offset).toBe(bytes.length);
            const expected = model.fill(spec.fields as Field[], message, version);
            expect(strip(decoded)).toEqual(strip(expected));
            const again = new Writer(64);
            encode(again, version, decoded);
            expect(Array.from(again.finish())).toEqual(Array.from(bytes));
          }
        }
      });
    }
  }
});

describe("tagged fields", () => {
  test("unknown tagged fields survive a round trip in order with known ones", async () => {
    const { decodeApiVersionsResponse, encodeApiVersionsResponse } = await import(
      "../../../src/protocol/generated/api-versions-response.ts"
    );
    const message = {
      errorCode: 0,
      apiKeys: [],
      throttleTimeMs: 0,
      finalizedFeaturesEpoch: 7, // tag 1 (known)
      _unknownTaggedFields: [
        { tag: 2 + 100, data: new Uint8Array([1, 2, 3]) },
        { tag: 9, data: new Uint8Array([]) },
      ].sort((a, b) => a.tag - b.tag),
    };
    const w = new Writer();
    encodeApiVersionsResponse(w, 3, message);
    const decoded = decodeApiVersionsResponse(new Reader(w.finish()), 3);
    expect(decoded.finalizedFeaturesEpoch).toBe(7);
    expect(decoded._unknownTaggedFields?.map((f: { tag: number }) => f.tag)).toEqual([9, 102]);
    const again = new Writer();
    encodeApiVersionsResponse(again, 3, decoded);
    expect(Array.from(again.finish())).toEqual(Array.from(w.finish()));
  });
});
