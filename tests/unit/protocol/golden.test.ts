/**
 * Golden bytes captured from real clients talking to Apache Kafka 4.1.1 (scripts/capture-golden.ts):
 * every captured request and response frame must decode with our codecs and re-encode to the very same
 * bytes. This catches what a round trip of our own encoder cannot: a wrong reading of the schema that the
 * encoder and decoder share.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { apiCodecsByKey } from "../../../src/protocol/generated/index.ts";
import { decodeRequestHeader, encodeRequestHeader } from "../../../src/protocol/generated/request-header.ts";
import { decodeResponseHeader, encodeResponseHeader } from "../../../src/protocol/generated/response-header.ts";
import { requestHeaderVersion, responseHeaderVersion } from "../../../src/protocol/header.ts";
import { Reader } from "../../../src/protocol/reader.ts";
import { Writer } from "../../../src/protocol/writer.ts";

interface Capture {
  apiKey: number;
  apiVersion: number;
  client: string;
  request: string;
  response: string | null;
}

const dir = join(import.meta.dir, "../../fixtures/golden");
const captures: { file: string; entry: Capture }[] = readdirSync(dir)
  .filter((f) => f.endsWith(".json"))
  .flatMap((file) => (JSON.parse(readFileSync(join(dir, file), "utf8")) as Capture[]).map((entry) => ({ file, entry })));

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("golden frames from real clients and Apache Kafka", () => {
  test("there are captures for the APIs of the foundation", () => {
    const keys = new Set(captures.map((c) => c.entry.apiKey));
    for (const key of [0, 1, 2, 3, 18, 19, 20, 32]) expect(keys.has(key)).toBe(true);
  });

  // Apache Kafka 4.1's clients speak some versions newer than our schema snapshot (Metadata v13, Produce
  // v13): against bunka they negotiate down, so only versions within the schema are compared.
  const served = captures.filter((c) => {
    const codecs = apiCodecsByKey.get(c.entry.apiKey);
    return codecs !== undefined && c.entry.apiVersion <= codecs.maxVersion;
  });
  test("most captured frames are in versions bunka's codecs speak", () => {
    expect(served.length).toBeGreaterThan(100);
  });
  for (const { file, entry } of served) {
    const codecs = apiCodecsByKey.get(entry.apiKey)!;
    const label = `${file} ${codecs.name} v${entry.apiVersion} (${entry.client}) ${entry.request.length / 2} bytes`;
    test(label, () => {
      const request = Buffer.from(entry.request, "hex");
      const r = new Reader(new Uint8Array(request));
      const headerVersion = requestHeaderVersion(entry.apiKey, entry.apiVersion);
      const header = decodeRequestHeader(r, headerVersion);
      expect(header.requestApiKey).toBe(entry.apiKey);
      const body = codecs.decodeRequest(r, entry.apiVersion);
      expect(r.offset).toBe(request.length);
      const w = new Writer();
      encodeRequestHeader(w, headerVersion, header);
      codecs.encodeRequest(w, entry.apiVersion, body);
      expect(hex(w.finish())).toBe(entry.request);

      if (entry.response === null) return;
      const response = Buffer.from(entry.response, "hex");
      const rr = new Reader(new Uint8Array(response));
      const responseVersion = responseHeaderVersion(entry.apiKey, entry.apiVersion);
      const responseHeader = decodeResponseHeader(rr, responseVersion);
      expect(responseHeader.correlationId).toBe(header.correlationId);
      const decoded = codecs.decodeResponse(rr, entry.apiVersion);
      expect(rr.offset).toBe(response.length);
      const rw = new Writer();
      encodeResponseHeader(rw, responseVersion, responseHeader);
      codecs.encodeResponse(rw, entry.apiVersion, decoded);
      expect(hex(rw.finish())).toBe(entry.response);
    });
  }
});
