/**
 * Decoder fuzz, in process: every request and response of every API and version we have codecs for (random
 * field values from an independent reading of the JSON schema, plus the real client frames in
 * tests/fixtures/golden when present) is mutated with a seeded generator and decoded with the request header
 * parser and the API's body decoder, as the dispatcher does.
 *
 * What must hold for every case:
 * - the only exception is DecodeError (a RangeError, TypeError, ... is a decoder bug);
 * - every count or length the Reader accepts fits in the bytes that remain, and every byte field it returns
 *   is a view into the frame, not a copy;
 * - the decoded object is never bigger than the frame: the total of its array elements, string characters
 *   and byte-field lengths is at most the frame's length, because each of
 *   those takes at least one byte of the frame of its own (uuids are fixed-size and not counted).
 *
 * The seeds are mutated with bit flips, bytes set to 0x00/0xff/0x7f/0x80 and friends, int16/int32/varint
 * length fields and plain fields set to huge, negative or off-by-one values (the positions come from
 * recording where the Reader read them while decoding the seed), truncation at random points, at field
 * boundaries and inside the header, insertion and duplication of bytes, deletion of ranges, garbage
 * appended, overlong varints, and request headers pointing the body at another version or another API.
 *
 *   FUZZ_CASES=500000 bun test tests/fuzz/decoder.fuzz.test.ts   # more cases (default 100,000)
 *   FUZZ_SEED=1234 ...                                            # another seed ("random" picks one)
 *   FUZZ_CASE=4711 ...                                            # replay one case of that seed
 * A failure prints the seed, the case index, the mutations and the mutated frame in hex.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DecodeError } from "../../src/errors/errors.ts";
import { apiCodecs, apiCodecsByKey, type ApiCodecs } from "../../src/protocol/generated/index.ts";
import { encodeRequestHeader } from "../../src/protocol/generated/request-header.ts";
import { decodeResponseHeader, encodeResponseHeader } from "../../src/protocol/generated/response-header.ts";
import { parseRequestFrame, requestHeaderVersion, responseHeaderVersion } from "../../src/protocol/header.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { Writer } from "../../src/protocol/writer.ts";
import { caseRandom, envSeed, fromHex, goldenEntries, ONLY_CASE, splice, toHex } from "../support/fuzz-support.ts";
import { seededRandom } from "../support/random.ts";
import { SchemaMessage, uniformValues, type Random, type ValueSource } from "../support/schema-messages.ts";

const TOTAL_CASES = Number(process.env.FUZZ_CASES ?? 100_000);
const SEED = envSeed("FUZZ_SEED", 0x5eed_f022);
/** Random messages per (API, version, direction), besides the all-defaults one. */
const RANDOM_SEEDS_PER_VERSION = 3;
/** Failures reported per API before its test stops looking (one bug tends to fail thousands of cases). */
const MAX_FAILURES_REPORTED = 8;

// ------------------------------------------------------------------------------------------ instrumentation

/** A primitive read while decoding a seed: where it started and how it is encoded. */
interface FieldAt {
  at: number;
  encoding: Encoding;
  /** True for string/bytes/array lengths, tagged-field counts, tags and sizes. */
  isLength: boolean;
}
type Encoding = "int8" | "int16" | "int32" | "int64" | "uvarint" | "varint" | "varlong" | "bool" | "uuid";

/** The invariant checks raise this; it is never a DecodeError, so it fails the case. */
class FuzzViolation extends Error {
  override readonly name = "FuzzViolation";
}

/** Set while decoding a seed to learn its field positions; null while fuzzing. */
let recording: { fields: FieldAt[]; lengthDepth: number } | null = null;

const arrayLengthMethods = ["arrayLength", "nullableArrayLength", "compactArrayLength", "compactNullableArrayLength"];
const stringMethods = ["string", "nullableString", "compactString", "compactNullableString"];
const bytesMethods = ["bytes", "nullableBytes", "compactBytes", "compactNullableBytes"];
const primitiveMethods: Record<string, Encoding> = {
  int8: "int8",
  int16: "int16",
  uint16: "int16",
  int32: "int32",
  uint32: "int32",
  int64: "int64",
  float64: "int64",
  bool: "bool",
  uvarint: "uvarint",
  varint: "varint",
  varlong: "varlong",
  uuid: "uuid",
};

/**
 * Wraps Reader's methods on its prototype (so the sub-readers of tagged fields are covered too): the checks
 * that every accepted count and length fits in what remains, and, while `recording` is set, the positions of
 * every primitive read. Returns the function that puts the originals back.
 */
function instrumentReader(): () => void {
  const proto = Reader.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  const wrap = (name: string, make: (original: (...args: unknown[]) => unknown) => (...args: unknown[]) => unknown) => {
    const original = proto[name];
    if (typeof original !== "function") throw new Error(`Reader has no method ${name}`);
    originals.set(name, original);
    proto[name] = make(original);
  };
  const asLength = <T>(body: () => T): T => {
    if (recording === null) return body();
    recording.lengthDepth++;
    try {
      return body();
    } finally {
      recording.lengthDepth--;
    }
  };

  for (const [name, encoding] of Object.entries(primitiveMethods)) {
    wrap(name, (original) =>
      function (this: Reader, ...args: unknown[]) {
        if (recording !== null) recording.fields.push({ at: this.offset, encoding, isLength: recording.lengthDepth > 0 });
        return original.apply(this, args);
      },
    );
  }
  for (const name of arrayLengthMethods) {
    wrap(name, (original) =>
      function (this: Reader) {
        const n = asLength(() => original.call(this)) as number;
        if (n > this.remaining) throw new FuzzViolation(`${name} accepted ${n} elements with ${this.remaining} bytes left`);
        return n;
      },
    );
  }
  for (const name of stringMethods) {
    wrap(name, (original) =>
      function (this: Reader) {
        const before = this.remaining;
        const s = asLength(() => original.call(this)) as string | null;
        const consumed = before - this.remaining;
        if (consumed > before || (s !== null && s.length > consumed)) {
          throw new FuzzViolation(`${name} returned ${s?.length} characters for ${consumed} bytes with ${before} left`);
        }
        return s;
      },
    );
  }
  for (const name of bytesMethods) {
    wrap(name, (original) =>
      function (this: Reader) {
        const before = this.remaining;
        const b = asLength(() => original.call(this)) as Uint8Array | null;
        if (b !== null && b.byteLength > before) throw new FuzzViolation(`${name} returned ${b.byteLength} bytes with ${before} left`);
        if (b !== null && b.byteLength > 0 && b.buffer !== this.buffer.buffer) throw new FuzzViolation(`${name} copied its bytes`);
        return b;
      },
    );
  }
  wrap("taggedFields", (original) =>
    function (this: Reader, known: unknown) {
      const inner = known as (tag: number, reader: Reader, size: number) => boolean;
      // The count, tags and sizes are lengths; the fields inside are not.
      return asLength(() =>
        original.call(this, (tag: number, reader: Reader, size: number) => {
          if (size > reader.remaining) throw new FuzzViolation(`tagged field ${tag} of ${size} bytes with ${reader.remaining} left`);
          if (recording === null) return inner(tag, reader, size);
          recording.lengthDepth--;
          try {
            return inner(tag, reader, size);
          } finally {
            recording.lengthDepth++;
          }
        }),
      );
    },
  );
  return () => {
    for (const [name, original] of originals) proto[name] = original;
  };
}

// ------------------------------------------------------------------------------------------ seeds

interface Seed {
  direction: "request" | "response";
  /** For responses, the API and version the frame is decoded as (a response does not say). */
  apiKey: number;
  apiVersion: number;
  origin: string;
  bytes: Uint8Array;
  fields: FieldAt[];
}

/** Field values for the random seeds: the uniform ones, but 0, 1 and -1 often, and strings up to 40 characters. */
const seedValues: ValueSource = {
  ...uniformValues,
  int16: (rnd) => rnd.pick([0, 1, -1, rnd.int(-32768, 32767)]),
  int32: (rnd) => rnd.pick([0, 1, -1, 3, rnd.int(-2147483648, 2147483647)]),
  int64: (rnd) => rnd.pick([0, -1, rnd.int(-(2 ** 52), 2 ** 52)]),
  string: (rnd) => rnd.pick(["", "a", "topic-1", "ünïcødé-✓", "x".repeat(rnd.int(0, 40))]),
};

function encodeRequestSeed(api: ApiCodecs, version: number, body: unknown, rnd: Random): Uint8Array {
  const w = new Writer(128);
  encodeRequestHeader(w, requestHeaderVersion(api.apiKey, version), {
    requestApiKey: api.apiKey,
    requestApiVersion: version,
    correlationId: rnd.int(0, 2 ** 31 - 1),
    clientId: rnd.pick(["bunka-fuzz", "", null, "ünï-client"]),
  });
  api.encodeRequest(w, version, body);
  return w.finish().slice();
}

function encodeResponseSeed(api: ApiCodecs, version: number, body: unknown, rnd: Random): Uint8Array {
  const w = new Writer(128);
  encodeResponseHeader(w, responseHeaderVersion(api.apiKey, version), { correlationId: rnd.int(0, 2 ** 31 - 1) });
  api.encodeResponse(w, version, body);
  return w.finish().slice();
}

/** Tags far above the schemas' own, sorted, as a client of a newer protocol might send. */
function unknownTaggedFields(rnd: Random): { tag: number; data: Uint8Array }[] {
  const n = rnd.int(1, 2);
  let tag = 90;
  return Array.from({ length: n }, () => {
    tag += rnd.int(1, 200);
    return { tag, data: new Uint8Array(Array.from({ length: rnd.int(0, 6) }, () => rnd.int(0, 255))) };
  });
}

/** Decodes an intact seed with `recording` on, to learn where its fields are; empty when it does not decode. */
function recordFields(seed: Omit<Seed, "fields">): FieldAt[] {
  recording = { fields: [], lengthDepth: 0 };
  try {
    decodeCase(seed.direction, seed.apiKey, seed.apiVersion, seed.bytes);
    return recording.fields;
  } catch {
    return recording.fields;
  } finally {
    recording = null;
  }
}

function generatedSeeds(api: ApiCodecs, rnd: Random): Seed[] {
  const seeds: Seed[] = [];
  const models = { request: SchemaMessage.load(`${api.name}Request`), response: SchemaMessage.load(`${api.name}Response`) };
  for (let version = api.minVersion; version <= api.maxVersion; version++) {
    const flexible = api.flexibleMinVersion >= 0 && version >= api.flexibleMinVersion;
    for (const direction of ["request", "response"] as const) {
      const model = models[direction];
      for (let i = 0; i <= RANDOM_SEEDS_PER_VERSION; i++) {
        // The first message of each version has every field at its default (empty arrays, empty strings).
        const body: Record<string, unknown> = i === 0 ? {} : model.random(version, rnd, seedValues);
        if (flexible && i > 0 && rnd.next() < 0.3) body._unknownTaggedFields = unknownTaggedFields(rnd);
        const bytes =
          direction === "request" ? encodeRequestSeed(api, version, body, rnd) : encodeResponseSeed(api, version, body, rnd);
        const seed = { direction, apiKey: api.apiKey, apiVersion: version, origin: `generated #${i}`, bytes };
        seeds.push({ ...seed, fields: recordFields(seed) });
      }
    }
  }
  return seeds;
}

/** Real client frames by API key (requests even for versions we lack, which test the rejection path). */
function goldenSeeds(): Map<number, Seed[]> {
  const byKey = new Map<number, Seed[]>();
  for (const { file, entry: e } of goldenEntries()) {
    const api = apiCodecsByKey.get(e.apiKey);
    if (!api) continue;
    const list = byKey.get(e.apiKey) ?? [];
    const origin = `golden ${file} ${e.client}`;
    const request = { direction: "request" as const, apiKey: e.apiKey, apiVersion: e.apiVersion, origin, bytes: fromHex(e.request) };
    list.push({ ...request, fields: recordFields(request) });
    if (e.response !== null && e.apiVersion >= api.minVersion && e.apiVersion <= api.maxVersion) {
      const response = { ...request, direction: "response" as const, bytes: fromHex(e.response) };
      list.push({ ...response, fields: recordFields(response) });
    }
    byKey.set(e.apiKey, list);
  }
  return byKey;
}

// ------------------------------------------------------------------------------------------ decoding

type Outcome = "decoded" | "decode-error" | "unsupported";

/**
 * What the dispatcher does with a request frame, up to the handler: the header, then (for a known API in a
 * schema version) the body. A response frame is decoded as the client would, knowing what it asked.
 */
function decodeCase(direction: "request" | "response", apiKey: number, apiVersion: number, frame: Uint8Array): { outcome: Outcome; decoded: unknown } {
  if (direction === "request") {
    const { header, body } = parseRequestFrame(frame);
    const api = apiCodecsByKey.get(header.requestApiKey);
    if (!api || header.requestApiVersion < api.minVersion || header.requestApiVersion > api.maxVersion) {
      return { outcome: "unsupported", decoded: header };
    }
    return { outcome: "decoded", decoded: { header, body: api.decodeRequest(body, header.requestApiVersion) } };
  }
  const r = new Reader(frame);
  const header = decodeResponseHeader(r, responseHeaderVersion(apiKey, apiVersion));
  return { outcome: "decoded", decoded: { header, body: apiCodecsByKey.get(apiKey)!.decodeResponse(r, apiVersion) } };
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The size of a decoded object in frame bytes it must have consumed at least: one per array element, one per
 * string character (none for a uuid), one per byte of a byte field. Also checks that byte fields are views.
 */
function decodedSize(value: unknown, frame: Uint8Array, path: string): number {
  if (value === null || value === undefined || typeof value === "number" || typeof value === "boolean") return 0;
  // A uuid is fixed-size and may be a default that the frame never carried (a field absent in the version).
  if (typeof value === "string") return value.length === 36 && uuidPattern.test(value) ? 0 : value.length;
  if (value instanceof Uint8Array) {
    if (value.byteLength > 0 && value.buffer !== frame.buffer) throw new FuzzViolation(`${path} is a copy, not a view of the frame`);
    return value.byteLength;
  }
  if (Array.isArray(value)) {
    let total = value.length;
    for (let i = 0; i < value.length; i++) total += decodedSize(value[i], frame, `${path}[${i}]`);
    return total;
  }
  if (typeof value === "object") {
    let total = 0;
    for (const [k, v] of Object.entries(value)) total += decodedSize(v, frame, `${path}.${k}`);
    return total;
  }
  throw new FuzzViolation(`${path} has unexpected type ${typeof value}`);
}

// ------------------------------------------------------------------------------------------ mutations

const interestingBytes = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe, 0x81];
const interesting16 = [-1, -2, -32768, 32767, 0, 1, 0x100];
const interesting32 = [-1, -2, -(2 ** 31), 2 ** 31 - 1, 2 ** 30, 0x10000, 0, 1, 0x7fff];
const interestingVarint = [0, 1, 2, 0x7f, 0x80, 0x3fff, 0x4000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1];

function uvarintBytes(value: number): number[] {
  const out: number[] = [];
  let v = value >>> 0;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

function varintWidth(bytes: Uint8Array, at: number): number {
  let n = 1;
  while (at + n - 1 < bytes.length && (bytes[at + n - 1]! & 0x80) !== 0 && n < 10) n++;
  return n;
}

const widths: Record<Encoding, number> = { int8: 1, bool: 1, int16: 2, int32: 4, int64: 8, uuid: 16, uvarint: 0, varint: 0, varlong: 0 };

function writeInt(bytes: Uint8Array, at: number, width: number, value: number): void {
  if (at + width > bytes.length) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (width === 1) view.setInt8(at, value);
  else if (width === 2) view.setInt16(at, value);
  else if (width === 4) view.setInt32(at, value);
  else for (let i = 0; i < width; i++) bytes[at + i] = value < 0 ? 0xff : i === 0 ? 0x7f : 0xff;
}

/** The value a length field would need to claim exactly what remains (or one more), for off-by-one cases. */
function remainingAfter(bytes: Uint8Array, at: number, width: number): number {
  return Math.max(0, bytes.length - at - width);
}

interface Mutated {
  bytes: Uint8Array;
  what: string;
}

/** One mutation of `bytes`; `seed` gives field positions (valid for the unmutated frame) and the direction. */
function mutateOnce(bytes: Uint8Array, seed: Seed, rnd: Random): Mutated {
  const n = bytes.length;
  const pos = () => rnd.int(0, Math.max(0, n - 1));
  const field = (lengthsOnly: boolean): FieldAt | undefined => {
    const candidates = lengthsOnly ? seed.fields.filter((f) => f.isLength) : seed.fields;
    return candidates.length === 0 ? undefined : rnd.pick(candidates);
  };
  const kind = rnd.int(0, 15);
  switch (kind) {
    case 0: {
      const out = bytes.slice();
      const flips = rnd.int(1, 4);
      for (let i = 0; i < flips && n > 0; i++) out[pos()]! ^= 1 << rnd.int(0, 7);
      return { bytes: out, what: `flip ${flips} bit(s)` };
    }
    case 1: {
      const out = bytes.slice();
      const at = pos();
      const value = rnd.pick(interestingBytes);
      if (n > 0) out[at] = value;
      return { bytes: out, what: `byte ${at} = 0x${value.toString(16)}` };
    }
    case 2:
    case 3:
    case 4: {
      // A length, count, tag or size set to something huge, negative or off by one.
      const f = field(true) ?? field(false);
      if (!f) return mutateOnce(bytes, { ...seed, fields: [] }, rnd);
      return setField(bytes, f, rnd, true);
    }
    case 5: {
      const f = field(false);
      if (!f) return { bytes: bytes.slice(), what: "no fields" };
      return setField(bytes, f, rnd, false);
    }
    case 6: {
      const width = rnd.pick([2, 4]);
      const at = pos();
      const out = bytes.slice();
      const value = width === 2 ? rnd.pick(interesting16) : rnd.pick(interesting32);
      writeInt(out, at, width, value);
      return { bytes: out, what: `int${width * 8} at ${at} = ${value}` };
    }
    case 7:
    case 8: {
      // Truncation: anywhere, at a field boundary (or one byte into it), or inside the header.
      const how = rnd.int(0, 2);
      const f = field(false);
      const at = how === 0 || !f ? rnd.int(0, n) : how === 1 ? f.at + rnd.int(0, 1) : rnd.int(0, Math.min(n, 12));
      return { bytes: bytes.slice(0, Math.min(at, n)), what: `truncate to ${Math.min(at, n)}` };
    }
    case 9: {
      const f = field(false);
      const at = f && rnd.next() < 0.5 ? f.at : rnd.int(0, n);
      const insert = Array.from({ length: rnd.int(1, 8) }, () => (rnd.next() < 0.5 ? rnd.pick(interestingBytes) : rnd.int(0, 255)));
      return { bytes: splice(bytes, at, 0, insert), what: `insert ${insert.length} byte(s) at ${at}` };
    }
    case 10: {
      const from = rnd.int(0, n);
      const to = Math.min(n, from + rnd.int(1, 32));
      const at = rnd.int(0, n);
      return { bytes: splice(bytes, at, 0, bytes.slice(from, to)), what: `duplicate ${from}..${to} at ${at}` };
    }
    case 11: {
      const at = rnd.int(0, n);
      const count = rnd.int(1, 16);
      return { bytes: splice(bytes, at, count, []), what: `delete ${count} byte(s) at ${at}` };
    }
    case 12: {
      const garbage = Array.from({ length: rnd.int(1, 32) }, () => rnd.int(0, 255));
      return { bytes: splice(bytes, n, 0, garbage), what: `append ${garbage.length} byte(s)` };
    }
    case 13: {
      // An overlong varint: continuation bytes in front of a varint field.
      const varints = seed.fields.filter((f) => f.encoding === "uvarint" || f.encoding === "varint" || f.encoding === "varlong");
      const at = varints.length > 0 ? rnd.pick(varints).at : pos();
      const extra = Array.from({ length: rnd.int(1, 10) }, () => rnd.pick([0x80, 0xff]));
      return { bytes: splice(bytes, at, 0, extra), what: `overlong varint at ${at} (+${extra.length})` };
    }
    default: {
      if (seed.direction === "response" || n < 4) return { bytes: bytes.slice(0, rnd.int(0, n)), what: "truncate (response)" };
      // The header points the body at another version or another API.
      const out = bytes.slice();
      const view = new DataView(out.buffer);
      if (rnd.next() < 0.6) {
        const api = apiCodecsByKey.get(view.getInt16(0));
        const version = api && rnd.next() < 0.8 ? rnd.int(api.minVersion - 1, api.maxVersion + 1) : rnd.pick([-1, 0x7fff, rnd.int(0, 40)]);
        view.setInt16(2, version);
        return { bytes: out, what: `apiVersion = ${version}` };
      }
      const other = rnd.pick(apiCodecs);
      const key = rnd.next() < 0.9 ? other.apiKey : rnd.pick([-1, 0x7fff, 1000, 67]);
      view.setInt16(0, key);
      if (rnd.next() < 0.7) view.setInt16(2, rnd.int(other.minVersion, other.maxVersion));
      return { bytes: out, what: `apiKey = ${key}, apiVersion = ${view.getInt16(2)}` };
    }
  }
}

function setField(bytes: Uint8Array, f: FieldAt, rnd: Random, isLength: boolean): Mutated {
  const label = isLength ? "length" : "field";
  if (f.encoding === "uvarint" || f.encoding === "varint" || f.encoding === "varlong") {
    const width = varintWidth(bytes, f.at);
    const value = rnd.next() < 0.3 ? remainingAfter(bytes, f.at, width) + rnd.int(0, 2) : rnd.pick(interestingVarint);
    return { bytes: splice(bytes, f.at, width, uvarintBytes(value)), what: `${label} ${f.encoding} at ${f.at} = ${value}` };
  }
  const out = bytes.slice();
  const width = widths[f.encoding];
  if (width === 16 || width === 8 || width === 1) {
    const fill = rnd.pick(interestingBytes);
    for (let i = 0; i < width && f.at + i < out.length; i++) out[f.at + i] = i === 0 && width === 8 && rnd.next() < 0.5 ? 0x80 : fill;
    return { bytes: out, what: `${label} ${f.encoding} at ${f.at} filled with 0x${fill.toString(16)}` };
  }
  const value =
    rnd.next() < 0.3 ? remainingAfter(bytes, f.at, width) + rnd.int(0, 2) : width === 2 ? rnd.pick(interesting16) : rnd.pick(interesting32);
  writeInt(out, f.at, width, value);
  return { bytes: out, what: `${label} ${f.encoding} at ${f.at} = ${value}` };
}

function mutate(seed: Seed, rnd: Random): Mutated {
  const r = rnd.next();
  const count = r < 0.6 ? 1 : r < 0.85 ? 2 : rnd.int(3, 4);
  let bytes = seed.bytes;
  const what: string[] = [];
  for (let i = 0; i < count; i++) {
    const m = mutateOnce(bytes, seed, rnd);
    bytes = m.bytes;
    what.push(m.what);
  }
  return { bytes, what: what.join("; ") };
}

/** `bytes` as a view into a larger buffer padded with 0x7f (a plausible length byte) on both sides. */
function embedded(bytes: Uint8Array): Uint8Array {
  const padded = new Uint8Array(bytes.length + 16).fill(0x7f);
  padded.set(bytes, 7);
  return padded.subarray(7, 7 + bytes.length);
}

// ------------------------------------------------------------------------------------------ the test

interface Failure {
  index: number;
  seed: Seed;
  mutated: Mutated;
  error: unknown;
}

function describeFailure(f: Failure): string {
  const error = f.error instanceof Error ? `${f.error.name}: ${f.error.message}\n${f.error.stack?.split("\n").slice(1, 4).join("\n")}` : String(f.error);
  return [
    `case ${f.index} (replay: FUZZ_SEED=${SEED} FUZZ_CASE=${f.index}), ${f.seed.direction} of API ${f.seed.apiKey} v${f.seed.apiVersion} (${f.seed.origin})`,
    `  mutations: ${f.mutated.what}`,
    `  frame (${f.mutated.bytes.length} bytes): ${toHex(f.mutated.bytes)}`,
    `  ${error}`,
  ].join("\n");
}

const stats = { cases: 0, decoded: 0, decodeErrors: 0, unsupported: 0, seeds: 0, goldenSeeds: 0, startedMs: 0 };
const seedsByKey = new Map<number, Seed[]>();
let restoreReader: (() => void) | undefined;

beforeAll(() => {
  stats.startedMs = performance.now();
  restoreReader = instrumentReader();
  const rnd = seededRandom(SEED);
  const golden = goldenSeeds();
  for (const api of apiCodecs) {
    const seeds = generatedSeeds(api, rnd);
    const real = golden.get(api.apiKey) ?? [];
    stats.goldenSeeds += real.length;
    seedsByKey.set(api.apiKey, [...seeds, ...real]);
    stats.seeds += seeds.length + real.length;
  }
});

afterAll(() => {
  restoreReader?.();
  const seconds = ((performance.now() - stats.startedMs) / 1000).toFixed(1);
  console.log(
    `decoder fuzz: seed ${SEED}, ${stats.cases} cases from ${stats.seeds} seed frames (${stats.goldenSeeds} golden) in ${seconds} s: ` +
      `${stats.decoded} decoded, ${stats.decodeErrors} DecodeError, ${stats.unsupported} unsupported API/version`,
  );
});

/** Cases are shared out over the APIs by their number of versions; each API owns a range of case indices. */
const totalVersions = apiCodecs.reduce((sum, api) => sum + api.maxVersion - api.minVersion + 1, 0);
let nextIndex = 0;
const ranges = apiCodecs.map((api) => {
  const count = Math.ceil((TOTAL_CASES * (api.maxVersion - api.minVersion + 1)) / totalVersions);
  const range = { api, first: nextIndex, count };
  nextIndex += count;
  return range;
});

describe(`decoders survive mutated frames (seed ${SEED})`, () => {
  test("the seed frames decode intact, so that mutations start from valid input", () => {
    for (const [apiKey, seeds] of seedsByKey) {
      for (const seed of seeds) {
        const api = apiCodecsByKey.get(apiKey)!;
        if (seed.apiVersion < api.minVersion || seed.apiVersion > api.maxVersion) continue;
        let ok: string | true = true;
        try {
          decodeCase(seed.direction, seed.apiKey, seed.apiVersion, seed.bytes);
        } catch (error) {
          ok = `${seed.direction} of ${api.name} v${seed.apiVersion} (${seed.origin}): ${String(error)} ${toHex(seed.bytes)}`;
        }
        expect(ok).toBe(true);
      }
    }
  });

  for (const { api, first, count } of ranges) {
    test(
      `${api.name} (key ${api.apiKey}, v${api.minVersion}-${api.maxVersion}): ${count} cases`,
      () => {
        const seeds = seedsByKey.get(api.apiKey)!;
        const failures: Failure[] = [];
        let failed = 0;
        for (let index = first; index < first + count; index++) {
          if (ONLY_CASE !== undefined && index !== ONLY_CASE) continue;
          const rnd = caseRandom(SEED, index);
          const seed = seeds[(index - first) % seeds.length]!;
          const mutated = mutate(seed, rnd);
          // Every other frame is a view inside a bigger buffer, as the listener hands them over: a read past
          // the view's end would then find bytes instead of failing, unless the Reader keeps to the view.
          const frame = index % 2 === 0 ? mutated.bytes : embedded(mutated.bytes);
          stats.cases++;
          try {
            const { outcome, decoded } = decodeCase(seed.direction, seed.apiKey, seed.apiVersion, frame);
            const size = decodedSize(decoded, frame, "frame");
            if (size > mutated.bytes.length) {
              throw new FuzzViolation(`decoded ${size} elements/characters/bytes from a frame of ${mutated.bytes.length} bytes`);
            }
            if (outcome === "unsupported") stats.unsupported++;
            else stats.decoded++;
          } catch (error) {
            if (error instanceof DecodeError) {
              stats.decodeErrors++;
              continue;
            }
            failed++;
            if (failures.length < MAX_FAILURES_REPORTED) failures.push({ index, seed, mutated, error });
          }
        }
        if (failures.length > 0) {
          throw new Error(`${failed} of ${count} cases failed (seed ${SEED}); first ones:\n${failures.map(describeFailure).join("\n")}`);
        }
      },
      120_000,
    );
  }
});
