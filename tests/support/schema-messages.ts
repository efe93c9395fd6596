/**
 * Messages built from the Kafka JSON schemas (schemas/kafka/message/*.json), for the codec round-trip test
 * and the fuzzers: a seeded random value for every field a version has (null now and then where the field
 * is nullable), and what decoding must give back (fields absent in the version at their schema default).
 *
 * This is the tests' own reading of the schema, independent of scripts/gen-protocol.ts's (its version
 * ranges, nullability and defaults): the generated codecs are checked against the schema, not against the
 * generator. Only the JSON-with-comments file reader (readSchema) is shared.
 *
 *   const model = SchemaMessage.load("FetchRequest");
 *   const message = model.random(version, rnd);                  // uniformValues: the whole value range
 *   const expected = model.expected(message, version);           // what decode(encode(message)) must equal
 *   model.random(version, rnd, { ...uniformValues, int32: (rnd) => rnd.pick([0, -1]) });   // other leaves
 */
import { join } from "node:path";
import { readSchema } from "../../scripts/gen-protocol.ts";
import type { seededRandom } from "./random.ts";

export const SCHEMA_DIR = join(import.meta.dir, "../../schemas/kafka/message");

export type Random = ReturnType<typeof seededRandom>;
export type MessageSpec = ReturnType<typeof readSchema>;

export interface SchemaField {
  name: string;
  type: string;
  versions?: string;
  nullableVersions?: string;
  taggedVersions?: string;
  fields?: SchemaField[];
  default?: unknown;
}

/** Whether version `v` is in a schema version range ("3+", "1-4", "2", "none"; undefined is none). */
export function inRange(text: string | undefined, v: number): boolean {
  if (text === undefined || text === "none") return false;
  if (text.endsWith("+")) return v >= Number(text.slice(0, -1));
  const dash = text.indexOf("-");
  if (dash >= 0) return v >= Number(text.slice(0, dash)) && v <= Number(text.slice(dash + 1));
  return v === Number(text);
}

/** The property name of a schema field ("TopicName" -> "topicName"). */
export const camel = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

/** The first and last version a message has ("0-11" -> [0, 11], "3" -> [3, 3]). */
export function versionBounds(spec: MessageSpec): [number, number] {
  const [lo, hi] = spec.validVersions.split("-").map(Number) as [number, number | undefined];
  return [lo, hi ?? lo];
}

export type ScalarType = "bool" | "int8" | "int16" | "uint16" | "int32" | "int64" | "float64" | "string" | "uuid" | "bytes" | "records";

/** How a random value of each scalar type is made (structs and arrays are walked by SchemaMessage). */
export type ValueSource = Record<ScalarType, (rnd: Random) => unknown>;

const randomUuid = (rnd: Random): string => {
  const hex = Array.from({ length: 32 }, () => rnd.int(0, 15).toString(16)).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};
const randomBytes = (rnd: Random) => new Uint8Array(Array.from({ length: rnd.int(0, 40) }, () => rnd.int(0, 255)));

/** Values from each type's whole range, strings up to 300 characters, bytes up to 40. */
export const uniformValues: ValueSource = {
  bool: (rnd) => rnd.next() < 0.5,
  int8: (rnd) => rnd.int(-128, 127),
  int16: (rnd) => rnd.int(-32768, 32767),
  uint16: (rnd) => rnd.int(0, 65535),
  int32: (rnd) => rnd.int(-2147483648, 2147483647),
  int64: (rnd) => rnd.int(-(2 ** 52), 2 ** 52),
  float64: (rnd) => rnd.next() * 1e6,
  string: (rnd) => rnd.pick(["", "a", "topic-1", "ünïcødé-✓", "x".repeat(rnd.int(0, 300))]),
  uuid: randomUuid,
  bytes: randomBytes,
  records: randomBytes,
};

const ZERO_UUID = "00000000-0000-0000-0000-000000000000";
const loaded = new Map<string, SchemaMessage>();

/** One message schema: its fields and the struct types it defines (its own and its common structs). */
export class SchemaMessage {
  private readonly structs = new Map<string, SchemaField[]>();
  readonly fields: SchemaField[];

  /** The message `name` ("ProduceRequest") from SCHEMA_DIR, read once per process. */
  static load(name: string): SchemaMessage {
    let model = loaded.get(name);
    if (!model) loaded.set(name, (model = new SchemaMessage(readSchema(join(SCHEMA_DIR, `${name}.json`)))));
    return model;
  }

  constructor(readonly spec: MessageSpec) {
    this.fields = spec.fields as SchemaField[];
    for (const s of spec.commonStructs ?? []) this.structs.set(s.name, s.fields as SchemaField[]);
    const collect = (fields: SchemaField[]) => {
      for (const f of fields) {
        if (!f.fields) continue;
        this.structs.set(f.type.replace("[]", ""), f.fields);
        collect(f.fields);
      }
    };
    for (const s of spec.commonStructs ?? []) collect(s.fields as SchemaField[]);
    collect(this.fields);
  }

  /** A random message of `version`: a value for every field present in it (from `values`); no others. */
  random(version: number, rnd: Random, values: ValueSource = uniformValues): Record<string, unknown> {
    return this.struct(this.fields, rnd, version, 0, values);
  }

  /** What decoding `message` (written in `version`) must give: its fields, every other field at its default. */
  expected(message: Record<string, unknown>, version: number): Record<string, unknown> {
    return this.fill(this.fields, message, version);
  }

  private struct(fields: SchemaField[], rnd: Random, version: number, depth: number, values: ValueSource): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const f of fields) {
      if (!inRange(f.versions ?? "0+", version)) continue;
      if (inRange(f.nullableVersions, version) && rnd.next() < 0.2) {
        out[camel(f.name)] = null;
        continue;
      }
      if (f.type.startsWith("[]")) {
        const n = depth > 3 ? 0 : rnd.int(0, 3);
        out[camel(f.name)] = Array.from({ length: n }, () => this.value(f.type.slice(2), rnd, version, depth, values));
      } else {
        out[camel(f.name)] = this.value(f.type, rnd, version, depth, values);
      }
    }
    return out;
  }

  private value(type: string, rnd: Random, version: number, depth: number, values: ValueSource): unknown {
    if (Object.hasOwn(values, type)) return values[type as ScalarType](rnd);
    return this.struct(this.structs.get(type)!, rnd, version, depth + 1, values);
  }

  /** The schema's default for a field. */
  private defaultOf(f: SchemaField): unknown {
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
        return ZERO_UUID;
      case "bytes":
        return new Uint8Array(0);
      case "records":
        return f.nullableVersions ? null : new Uint8Array(0);
      default:
        return this.fill(this.structs.get(f.type)!, {}, -1);
    }
  }

  /** Fields present in `version` as in `value`, every other field at its default (version -1: all defaults). */
  private fill(fields: SchemaField[], value: Record<string, unknown>, version: number): Record<string, unknown> {
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
  private live(f: SchemaField): boolean {
    const [lo, hi] = versionBounds(this.spec);
    for (let v = lo; v <= hi; v++) if (inRange(f.versions ?? "0+", v)) return true;
    return false;
  }
}
