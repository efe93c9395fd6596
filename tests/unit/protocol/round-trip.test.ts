/**
 * Round trip of every generated message in every version: a seeded random message is built from an
 * independent reading of the JSON schema (which fields exist, which are nullable, which are tagged in that
 * version), encoded, decoded, and compared with what the schema says must come back; re-encoding the decoded
 * message must give the same bytes, and decoding must consume exactly the encoded bytes.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { servedApis, kebab } from "../../../scripts/gen-protocol.ts";
import { Reader } from "../../../src/protocol/reader.ts";
import { Writer } from "../../../src/protocol/writer.ts";
import { seededRandom } from "../../support/random.ts";
import { SchemaMessage, versionBounds } from "../../support/schema-messages.ts";

const generatedDir = join(import.meta.dir, "../../../src/protocol/generated");

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
        const model = SchemaMessage.load(name);
        const mod = (await import(join(generatedDir, `${kebab(name)}.ts`))) as Record<string, (...args: any[]) => any>;
        const encode = mod[`encode${name}`]!;
        const decode = mod[`decode${name}`]!;
        const [lo, hi] = versionBounds(model.spec);
        const rnd = seededRandom(0xb0ca ^ (model.spec.apiKey ?? 0));
        for (let version = lo; version <= hi; version++) {
          for (let iteration = 0; iteration < 20; iteration++) {
            const message = model.random(version, rnd);
            const w = new Writer(64);
            encode(w, version, message);
            const bytes = w.finish().slice();
            const r = new Reader(bytes);
            const decoded = decode(r, version);
            expect(r.offset).toBe(bytes.length);
            const expected = model.expected(message, version);
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
