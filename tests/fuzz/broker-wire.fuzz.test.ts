/**
 * Wire fuzz: mutated request frames over real sockets to an in-process broker (port 0).
 *
 * Seeds are requests of every version of every API the broker registers (hand-written realistic ones for
 * ApiVersions, Metadata, CreateTopics, DeleteTopics and DescribeCluster, random ones from the schema for the
 * others), requests with absurd but well-formed values that reach the handlers (negative and giant partition
 * counts, empty and overlong names, unknown ids), the all-defaults request of every API without a handler,
 * and the real client frames of registered APIs in tests/fixtures/golden when present. Each case sends one to four mutated frames (size prefix always right, so that the broker has the
 * whole frame) followed by an ApiVersions sentinel, pipelined, and then requires:
 * - each frame is answered with a well-formed response (response header with the frame's correlation id, body
 *   decodable in the frame's version, no bytes left over, no UNKNOWN_SERVER_ERROR anywhere in it), or the
 *   server closes the connection; once one frame is unanswered, nothing after it is answered. A Produce with
 *   acks=0 that the handler serves is never answered (the protocol has no response for it), and it may close
 *   the connection (when a partition failed, as Apache does);
 * - when the mutated frames are answered, so is the sentinel: the connection still works;
 * - a separate healthy connection answers ApiVersions and Metadata every HEALTH_EVERY cases and is never closed;
 * - no handler fails (the dispatcher logs "handler failed" when one throws).
 * Separately, size prefixes: above socket.request.max.bytes (a 2 GB one with a few bytes behind it) and
 * negative ones close the connection at once, and neither they nor a prefix at the maximum make the broker
 * allocate the announced size.
 *
 *   FUZZ_WIRE_CASES=50000 bun test tests/fuzz/broker-wire.fuzz.test.ts   # more cases (default 5,000)
 *   FUZZ_SEED=1234 ...                                                    # another seed ("random" picks one)
 *   FUZZ_CASE=4711 ...                                                    # replay one case of that seed
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { memoryUsage as jscMemoryUsage } from "bun:jsc";
import { DecodeError } from "../../src/errors/errors.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { apiCodecs, apiCodecsByKey } from "../../src/protocol/generated/index.ts";
import { encodeRequestHeader } from "../../src/protocol/generated/request-header.ts";
import { decodeResponseHeader } from "../../src/protocol/generated/response-header.ts";
import { parseRequestFrame, requestHeaderVersion, responseHeaderVersion } from "../../src/protocol/header.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { Writer } from "../../src/protocol/writer.ts";
import { errorCapturingLogger } from "../support/capturing-logger.ts";
import { caseRandom, envSeed, fromHex, goldenEntries, ONLY_CASE, splice, toHex } from "../support/fuzz-support.ts";
import { seededRandom } from "../support/random.ts";
import { SchemaMessage, type Random, type ValueSource } from "../support/schema-messages.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TOTAL_CASES = Number(process.env.FUZZ_WIRE_CASES ?? 5_000);
const SEED = envSeed("FUZZ_SEED", 0x5eed_f022);
/** Connections fuzzed at the same time; each is replaced when the server closes it. */
const WORKERS = 4;
/** The healthy connection is checked every this many cases. */
const HEALTH_EVERY = 100;
/**
 * Longest a case may take before it counts as a hang: a deadline, not a sleep. Cases take well under a
 * millisecond, except a mutated CreateTopics that creates thousands of partitions (about 5 s for 8,000 here).
 */
const CASE_DEADLINE_MS = 60_000;
const MAX_FAILURES_REPORTED = 10;
const MiB = 1024 * 1024;

const API_VERSIONS = 18;
const PRODUCE = 0;

// ------------------------------------------------------------------------------------------ seeds

interface Seed {
  origin: string;
  /** Header + body, without the size prefix. */
  bytes: Uint8Array;
}

function encodeFrame(apiKey: number, version: number, body: unknown, correlationId: number, clientId: string | null = "bunka-fuzz"): Uint8Array {
  const w = new Writer(128);
  encodeRequestHeader(w, requestHeaderVersion(apiKey, version), { requestApiKey: apiKey, requestApiVersion: version, correlationId, clientId });
  apiCodecsByKey.get(apiKey)!.encodeRequest(w, version, body);
  return w.finish().slice();
}

const TOPIC_ID = "6b3c2f0e-1d2a-4c5b-9e8f-0a1b2c3d4e5f";
const longName = "t".repeat(250);

/** Realistic and absurd request bodies for the APIs the broker serves, by API key. */
const servedBodies: Record<number, { name: string; body: (version: number) => unknown }[]> = {
  18: [
    { name: "ApiVersions", body: () => ({ clientSoftwareName: "bunka-fuzz", clientSoftwareVersion: "1.0.0" }) },
    { name: "ApiVersions empty software", body: () => ({ clientSoftwareName: "", clientSoftwareVersion: "" }) },
  ],
  3: [
    { name: "Metadata two topics", body: () => ({ topics: [{ name: "fuzz-a" }, { name: "fuzz-b" }], allowAutoTopicCreation: true }) },
    { name: "Metadata all topics", body: (v: number) => ({ topics: v === 0 ? [] : null, includeTopicAuthorizedOperations: true }) },
    {
      name: "Metadata absurd topics",
      body: (v: number) => ({
        topics: [{ name: "" }, { name: "." }, { name: ".." }, { name: longName }, { name: "a\u0000b" }, { name: "fuzz-a" }, { name: "fuzz-a" }]
          .concat(v >= 10 ? [{ name: null, topicId: TOPIC_ID } as never, { name: null, topicId: "00000000-0000-0000-0000-000000000000" } as never] : []),
        allowAutoTopicCreation: true,
        includeClusterAuthorizedOperations: true,
      }),
    },
  ],
  19: [
    {
      name: "CreateTopics",
      body: () => ({
        topics: [
          { name: "fuzz-c", numPartitions: 3, replicationFactor: 1, assignments: [], configs: [{ name: "cleanup.policy", value: "delete" }] },
          { name: "fuzz-d", numPartitions: -1, replicationFactor: -1, assignments: [{ partitionIndex: 0, brokerIds: [0] }], configs: [] },
        ],
        timeoutMs: 30000,
        validateOnly: false,
      }),
    },
    {
      name: "CreateTopics absurd counts",
      body: () => ({
        topics: [
          { name: "fuzz-huge", numPartitions: 2 ** 31 - 1, replicationFactor: 32767, assignments: [], configs: [] },
          { name: "fuzz-negative", numPartitions: -(2 ** 31), replicationFactor: -32768, assignments: [], configs: [] },
          { name: "fuzz-above-max", numPartitions: 10_001, replicationFactor: -1, assignments: [], configs: [] },
          { name: "", numPartitions: 0, replicationFactor: 0, assignments: [], configs: [] },
          { name: longName, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [{ name: "", value: null }] },
          {
            name: "fuzz-assign",
            numPartitions: -1,
            replicationFactor: -1,
            assignments: [
              { partitionIndex: 2 ** 31 - 1, brokerIds: [] },
              { partitionIndex: -5, brokerIds: [0, 0, -1, 2 ** 31 - 1] },
            ],
            configs: [{ name: "retention.ms", value: "-99999999999999999999" }, { name: "segment.bytes", value: "\u0000" }],
          },
        ],
        timeoutMs: -1,
        validateOnly: true,
      }),
    },
  ],
  20: [
    {
      name: "DeleteTopics",
      body: (v: number) =>
        v >= 6 ? { topics: [{ name: "fuzz-c" }, { name: null, topicId: TOPIC_ID }], timeoutMs: 30000 } : { topicNames: ["fuzz-c", "fuzz-missing"], timeoutMs: 30000 },
    },
    {
      name: "DeleteTopics absurd",
      body: (v: number) =>
        v >= 6
          ? { topics: [{ name: "" }, { name: null }, { name: longName, topicId: TOPIC_ID }], timeoutMs: -(2 ** 31) }
          : { topicNames: ["", ".", longName, "fuzz-c", "fuzz-c"], timeoutMs: -(2 ** 31) },
    },
  ],
  60: [
    { name: "DescribeCluster", body: () => ({ includeClusterAuthorizedOperations: true, endpointType: 1 }) },
    { name: "DescribeCluster absurd endpoint", body: () => ({ includeClusterAuthorizedOperations: false, endpointType: -1 }) },
  ],
};

/** Field values for random request bodies: small numbers, and names that exist now and then. */
const bodyValues: ValueSource = {
  bool: (rnd) => rnd.next() < 0.5,
  int8: (rnd) => rnd.pick([0, 1, 2, 3, -1, 127]),
  int16: (rnd) => rnd.pick([0, 1, -1, 3]),
  uint16: (rnd) => rnd.pick([0, 1, -1, 3]),
  int32: (rnd) => rnd.pick([0, 1, -1, 3, 1000]),
  int64: (rnd) => rnd.pick([0, -1, 1, 1000]),
  float64: () => 1.5,
  string: (rnd) => rnd.pick(["fuzz-a", "fuzz-c", "retention.ms", "cleanup.policy", "1000", "", "x".repeat(rnd.int(1, 30))]),
  uuid: (rnd) => rnd.pick([TOPIC_ID, "00000000-0000-0000-0000-000000000000"]),
  bytes: (rnd) => new Uint8Array(rnd.int(0, 16)),
  records: (rnd) => new Uint8Array(rnd.int(0, 16)),
};

/** A random request body from the JSON schema, for registered APIs without hand-written seeds above. */
function randomBody(apiName: string, version: number, rnd: Random): Record<string, unknown> {
  return SchemaMessage.load(`${apiName}Request`).random(version, rnd, bodyValues);
}

/**
 * Seeds for every API the broker registers (every schema version, so that unserved versions are covered
 * too): the hand-written bodies above where there are some, random ones from the schema otherwise; the
 * all-defaults request of each API without a handler; and the golden frames of registered APIs.
 */
function buildSeeds(): Seed[] {
  const rnd = seededRandom(SEED);
  const seeds: Seed[] = [];
  let correlationId = 1;
  const served = new Set(broker.broker.registry.apiVersions().map((a) => a.apiKey));
  for (const api of apiCodecs) {
    if (!served.has(api.apiKey)) {
      // No handler: the broker closes the connection at the header; one seed keeps that path covered.
      seeds.push({ origin: `${api.name} v${api.maxVersion} defaults`, bytes: encodeFrame(api.apiKey, api.maxVersion, {}, correlationId++) });
      continue;
    }
    const bodies = servedBodies[api.apiKey] ?? [
      { name: `${api.name} random 1`, body: (v: number) => randomBody(api.name, v, rnd) },
      { name: `${api.name} random 2`, body: (v: number) => randomBody(api.name, v, rnd) },
    ];
    for (let version = api.minVersion; version <= api.maxVersion; version++) {
      for (const { name, body } of bodies) {
        seeds.push({ origin: `${name} v${version}`, bytes: encodeFrame(api.apiKey, version, body(version), correlationId++) });
      }
    }
  }
  for (const { file, entry: e } of goldenEntries()) {
    if (served.has(e.apiKey)) seeds.push({ origin: `golden ${file} ${e.client} key ${e.apiKey} v${e.apiVersion}`, bytes: fromHex(e.request) });
  }
  return seeds;
}

// ------------------------------------------------------------------------------------------ mutations

const interestingBytes = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe];
const interesting16 = [-1, -2, -32768, 32767, 0, 1];
const interesting32 = [-1, -2, -(2 ** 31), 2 ** 31 - 1, 2 ** 30, 10_000, 10_001, 0x10000, 0, 1];

function mutateOnce(bytes: Uint8Array, rnd: Random): { bytes: Uint8Array; what: string } {
  const n = bytes.length;
  const pos = () => rnd.int(0, Math.max(0, n - 1));
  switch (rnd.int(0, 10)) {
    case 0: {
      const out = bytes.slice();
      const flips = rnd.int(1, 3);
      for (let i = 0; i < flips && n > 0; i++) out[pos()]! ^= 1 << rnd.int(0, 7);
      return { bytes: out, what: `flip ${flips} bit(s)` };
    }
    case 1: {
      const out = bytes.slice();
      const at = pos();
      if (n > 0) out[at] = rnd.pick(interestingBytes);
      return { bytes: out, what: `byte ${at} = 0x${out[at]?.toString(16)}` };
    }
    case 2:
    case 3: {
      // Lengths, counts and plain fields alike: the body is small, so random positions hit them often.
      const width = rnd.pick([2, 4]);
      const at = rnd.int(0, Math.max(0, n - width));
      const out = bytes.slice();
      const value = width === 2 ? rnd.pick(interesting16) : rnd.pick(interesting32);
      if (at + width <= n) {
        const view = new DataView(out.buffer);
        if (width === 2) view.setInt16(at, value);
        else view.setInt32(at, value);
      }
      return { bytes: out, what: `int${width * 8} at ${at} = ${value}` };
    }
    case 4: {
      const at = rnd.next() < 0.3 ? rnd.int(0, Math.min(n, 12)) : rnd.int(0, n);
      return { bytes: bytes.slice(0, at), what: `truncate to ${at}` };
    }
    case 5: {
      const at = rnd.int(0, n);
      const insert = Array.from({ length: rnd.int(1, 8) }, () => rnd.int(0, 255));
      return { bytes: splice(bytes, at, 0, insert), what: `insert ${insert.length} byte(s) at ${at}` };
    }
    case 6: {
      const from = rnd.int(0, n);
      const to = Math.min(n, from + rnd.int(1, 24));
      const at = rnd.int(0, n);
      return { bytes: splice(bytes, at, 0, bytes.slice(from, to)), what: `duplicate ${from}..${to} at ${at}` };
    }
    case 7: {
      const at = rnd.int(0, n);
      const count = rnd.int(1, 12);
      return { bytes: splice(bytes, at, count, []), what: `delete ${count} at ${at}` };
    }
    case 8: {
      const garbage = Array.from({ length: rnd.int(1, 24) }, () => rnd.int(0, 255));
      return { bytes: splice(bytes, n, 0, garbage), what: `append ${garbage.length}` };
    }
    case 9: {
      const at = pos();
      const extra = Array.from({ length: rnd.int(1, 6) }, () => rnd.pick([0x80, 0xff]));
      return { bytes: splice(bytes, at, 0, extra), what: `continuation bytes at ${at}` };
    }
    default: {
      if (n < 4) return { bytes: bytes.slice(), what: "nothing" };
      const out = bytes.slice();
      const view = new DataView(out.buffer);
      if (rnd.next() < 0.7) {
        const api = apiCodecsByKey.get(view.getInt16(0));
        const version = api ? rnd.int(api.minVersion - 1, api.maxVersion + 1) : rnd.pick([-1, 0x7fff]);
        view.setInt16(2, version);
        return { bytes: out, what: `apiVersion = ${version}` };
      }
      const key = rnd.pick([3, 18, 19, 20, 60, 0, 1, -1, 0x7fff]);
      view.setInt16(0, key);
      return { bytes: out, what: `apiKey = ${key}` };
    }
  }
}

function mutate(seed: Seed, rnd: Random): { bytes: Uint8Array; what: string } {
  const count = rnd.next() < 0.7 ? 1 : rnd.int(2, 3);
  let bytes = seed.bytes;
  const what: string[] = [];
  for (let i = 0; i < count; i++) {
    const m = mutateOnce(bytes, rnd);
    bytes = m.bytes;
    what.push(m.what);
  }
  return { bytes, what: `${seed.origin}: ${what.join("; ")}` };
}

function framed(frame: Uint8Array): Uint8Array {
  const out = new Uint8Array(frame.length + 4);
  new DataView(out.buffer).setInt32(0, frame.length);
  out.set(frame, 4);
  return out;
}

// ------------------------------------------------------------------------------------------ checks

/** Resolves with the promise, or rejects after `ms` naming what hung. A guard, never the way a test waits. */
function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer and no close within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Paths of every errorCode field equal to UNKNOWN_SERVER_ERROR in a decoded response. */
function unknownServerErrors(value: unknown, path = "response"): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownServerErrors(v, `${path}[${i}]`));
  if (value && typeof value === "object" && !(value instanceof Uint8Array)) {
    return Object.entries(value).flatMap(([k, v]) =>
      k === "errorCode" && v === ErrorCode.UNKNOWN_SERVER_ERROR ? [`${path}.${k}`] : unknownServerErrors(v, `${path}.${k}`),
    );
  }
  return [];
}

/**
 * Checks a response to `request` (header + body as sent): the correlation id it carries, and a body that
 * decodes in the version asked for (v0 for an ApiVersions version the broker does not know) with nothing
 * left over and no UNKNOWN_SERVER_ERROR. Returns the problem, or null.
 */
function responseProblem(request: Uint8Array, response: Uint8Array): string | null {
  if (request.length < 8) return `a ${request.length}-byte request (shorter than a header) was answered`;
  const view = new DataView(request.buffer, request.byteOffset, request.byteLength);
  const apiKey = view.getInt16(0);
  let apiVersion = view.getInt16(2);
  const correlationId = view.getInt32(4);
  const api = apiCodecsByKey.get(apiKey);
  if (!api) return `unknown API key ${apiKey} was answered`;
  if (apiKey === API_VERSIONS && (apiVersion < api.minVersion || apiVersion > api.maxVersion)) apiVersion = 0;
  try {
    const r = new Reader(response);
    const header = decodeResponseHeader(r, responseHeaderVersion(apiKey, apiVersion));
    if (header.correlationId !== correlationId) return `correlation id ${header.correlationId}, asked ${correlationId}`;
    const body = api.decodeResponse(r, apiVersion);
    if (r.remaining !== 0) return `${r.remaining} bytes after the ${api.name} v${apiVersion} response`;
    const unknown = unknownServerErrors(body);
    if (unknown.length > 0) return `UNKNOWN_SERVER_ERROR at ${unknown.join(", ")}`;
  } catch (error) {
    return `response does not decode as ${api.name} v${apiVersion}: ${String(error)}`;
  }
  return null;
}

/**
 * Whether `request` is a Produce with acks=0 in a version its handler serves: the broker sends nothing back
 * (and closes the connection if a partition failed). Anything else about it is answered as usual.
 */
function isSilentProduce(request: Uint8Array, servedVersions: ReadonlyMap<number, { minVersion: number; maxVersion: number }>): boolean {
  try {
    const { header, body } = parseRequestFrame(request);
    const served = servedVersions.get(header.requestApiKey);
    if (header.requestApiKey !== PRODUCE || !served) return false;
    if (header.requestApiVersion < served.minVersion || header.requestApiVersion > served.maxVersion) return false;
    if (broker.broker.registry.listedNotServed(PRODUCE, header.requestApiVersion)) return false;
    return (apiCodecsByKey.get(PRODUCE)!.decodeRequest(body, header.requestApiVersion) as { acks: number }).acks === 0;
  } catch (error) {
    if (error instanceof DecodeError) return false;
    throw error;
  }
}

/** Stands for the response of a frame that gets none (Produce acks=0). */
const SILENT = new Uint8Array(0);

/**
 * Whether the broker owes `request` an answer: its header and body decode (so no DecodeError may close the
 * connection), its API has a handler, and its version is in the schema (an unserved one is answered with
 * UNSUPPORTED_VERSION, save those ApiVersions lists without serving them, which close the connection) or it
 * is ApiVersions (answered in v0).
 */
function mustBeAnswered(request: Uint8Array, served: ReadonlySet<number>): boolean {
  try {
    const { header, body } = parseRequestFrame(request);
    const api = apiCodecsByKey.get(header.requestApiKey);
    if (!api || !served.has(api.apiKey)) return false;
    if (header.requestApiVersion < api.minVersion || header.requestApiVersion > api.maxVersion) return api.apiKey === API_VERSIONS;
    // Listed in ApiVersions but not served (Produce v0-v2, as Apache Kafka 4 lists them): the connection closes.
    if (broker.broker.registry.listedNotServed(api.apiKey, header.requestApiVersion)) return false;
    api.decodeRequest(body, header.requestApiVersion);
  } catch (error) {
    if (error instanceof DecodeError) return false;
    throw error;
  }
  return true;
}

// ------------------------------------------------------------------------------------------ the broker

/** Keeps what matters here: handler failures (the dispatcher logs them at error level). */
const { log: capturingLogger, errors: handlerFailures } = errorCapturingLogger();

let broker: TestBroker;
let healthy: WireClient;

beforeAll(async () => {
  // Mutated JoinGroups carry absurd timeouts; short group bounds keep a parked join from outliving a case's
  // deadline (Apache parks them the same way, for as long as the client asked).
  broker = await startTestBroker(
    {},
    { log: capturingLogger, groups: { initialRebalanceDelayMs: 0, newMemberJoinTimeoutMs: 5_000, maxSessionTimeoutMs: 30_000 } },
  );
  healthy = await WireClient.connect(broker.port, "127.0.0.1", "fuzz-healthy");
});

afterAll(async () => {
  healthy?.close();
  await broker?.stop();
});

async function checkHealthy(): Promise<void> {
  const versions = await withDeadline(
    healthy.request(API_VERSIONS, 3, { clientSoftwareName: "fuzz-healthy", clientSoftwareVersion: "1" }),
    CASE_DEADLINE_MS,
    "healthy ApiVersions",
  );
  expect(versions.errorCode).toBe(ErrorCode.NONE);
  expect(versions.apiKeys.length).toBeGreaterThan(0);
  const metadata = await withDeadline(healthy.request(3, 12, { topics: [{ name: "fuzz-health" }], allowAutoTopicCreation: true }), CASE_DEADLINE_MS, "healthy Metadata");
  expect(metadata.brokers.length).toBe(1);
  expect(metadata.topics[0].errorCode).toBe(ErrorCode.NONE);
  expect(healthy.isClosed).toBe(false);
}

/** Bytes the process has committed (mimalloc's count, which sees a zero-filled allocation RSS would not). */
function committedBytes(): { rss: number; commit: number; peakCommit: number } {
  Bun.gc(true);
  const jsc = jscMemoryUsage();
  return { rss: process.memoryUsage().rss, commit: jsc.currentCommit, peakCommit: jsc.peakCommit };
}

// ------------------------------------------------------------------------------------------ tests

describe("size prefixes", () => {
  // These run first, while the process is small, so that a jump in the peak would show.
  const maxRequestBytes = 104_857_600;

  async function sendAndExpectClose(bytes: number[]): Promise<void> {
    const client = await WireClient.connect(broker.port, "127.0.0.1", "fuzz-prefix");
    client.send(new Uint8Array(bytes));
    await withDeadline(client.closed, CASE_DEADLINE_MS, `close after prefix ${bytes.slice(0, 4)}`);
    expect(client.isClosed).toBe(true);
  }

  test("a 2 GB size prefix with a few bytes behind it closes the connection without allocating it", async () => {
    expect(broker.broker.services.config.socketRequestMaxBytes).toBe(maxRequestBytes);
    const before = committedBytes();
    await sendAndExpectClose([0x7f, 0xff, 0xff, 0xff, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]);
    const after = committedBytes();
    expect(after.rss - before.rss).toBeLessThan(64 * MiB);
    expect(after.peakCommit - before.peakCommit).toBeLessThan(64 * MiB);
    await checkHealthy();
  });

  test("a size prefix one above socket.request.max.bytes closes the connection", async () => {
    const size = maxRequestBytes + 1;
    await sendAndExpectClose([size >>> 24, (size >>> 16) & 0xff, (size >>> 8) & 0xff, size & 0xff, 0, 18, 0, 0]);
    await checkHealthy();
  });

  test("negative size prefixes close the connection", async () => {
    await sendAndExpectClose([0xff, 0xff, 0xff, 0xff, 0, 18, 0, 0, 0, 0, 0, 1]);
    await sendAndExpectClose([0x80, 0x00, 0x00, 0x00]);
    await sendAndExpectClose([0xff, 0xff, 0xff, 0xfe]);
    await checkHealthy();
  });

  test("a prefix at the maximum with a few bytes behind it allocates nothing while the rest is awaited", async () => {
    const before = committedBytes();
    const client = await WireClient.connect(broker.port, "127.0.0.1", "fuzz-prefix");
    const size = maxRequestBytes;
    client.send(new Uint8Array([size >>> 24, (size >>> 16) & 0xff, (size >>> 8) & 0xff, size & 0xff, 0, 18, 0, 0, 0, 0, 0, 7]));
    // A round trip on another connection: the broker has had its turn to read those bytes.
    await checkHealthy();
    const after = committedBytes();
    expect(after.rss - before.rss).toBeLessThan(64 * MiB);
    expect(after.peakCommit - before.peakCommit).toBeLessThan(64 * MiB);
    expect(client.isClosed).toBe(false);
    client.close();
  });

  test("an empty frame (size 0) closes the connection", async () => {
    await sendAndExpectClose([0, 0, 0, 0]);
  });
});

describe(`mutated frames over the wire (seed ${SEED})`, () => {
  test("the absurd but well-formed requests are answered, with errors and without UNKNOWN_SERVER_ERROR", async () => {
    const client = await WireClient.connect(broker.port, "127.0.0.1", "fuzz-absurd");
    for (const seed of buildSeeds().filter((s) => s.origin.includes("absurd"))) {
      const response = await withDeadline(client.requestRaw(0, 0, framed(seed.bytes)), CASE_DEADLINE_MS, seed.origin).catch(
        (error: unknown) => `${String(error)}; request ${toHex(seed.bytes)}`,
      );
      const problem = typeof response === "string" ? response : responseProblem(seed.bytes, response);
      expect(`${seed.origin}: ${problem}`).toBe(`${seed.origin}: null`);
    }
    expect(client.isClosed).toBe(false);
    client.close();
    expect(handlerFailures).toEqual([]);
  }, 60_000);

  // Regression (found by this fuzz): Metadata v10/v11 naming a topic by id only used to close the connection,
  // because the answer echoed a null name that those versions cannot carry. Apache answers INVALID_REQUEST.
  test("metadata-null-name-v10-v11: Metadata v10/v11 naming a topic by id only is answered INVALID_REQUEST", async () => {
    const client = await WireClient.connect(broker.port, "127.0.0.1", "fuzz-known-bug");
    for (const version of [10, 11]) {
      const request = encodeFrame(3, version, { topics: [{ name: null, topicId: TOPIC_ID }], allowAutoTopicCreation: false }, 7);
      const response = await withDeadline(client.requestRaw(3, version, framed(request)), CASE_DEADLINE_MS, `Metadata v${version}`);
      expect(responseProblem(request, response)).toBeNull();
      const decoded = client.decodeResponse(3, version, response) as { topics: { errorCode: number }[] };
      expect(decoded.topics[0]!.errorCode).toBe(ErrorCode.INVALID_REQUEST);
    }
    client.close();
  });

  test(
    `${TOTAL_CASES} cases over ${WORKERS} connections at a time; the broker and a healthy connection keep working`,
    async () => {
      const seeds = buildSeeds();
      const served = new Set(broker.broker.registry.apiVersions().map((a) => a.apiKey));
      const servedVersions = new Map(broker.broker.registry.apiVersions().map((a) => [a.apiKey, a] as const));
      const startedMs = performance.now();
      const stats = { cases: 0, frames: 0, answered: 0, closedConnections: 0 };
      const slowest = { ms: 0, index: -1, what: "" };
      const failures: string[] = [];
      let failed = 0;
      let sinceHealthCheck = 0;
      const fail = (index: number, frames: Uint8Array[], whats: string[], problem: string) => {
        failed++;
        if (failures.length >= MAX_FAILURES_REPORTED) return;
        failures.push(
          [
            `case ${index} (replay: FUZZ_SEED=${SEED} FUZZ_CASE=${index}): ${problem}`,
            ...frames.map((f, i) => `  frame ${i}: ${whats[i]}\n    ${toHex(f)}`),
          ].join("\n"),
        );
      };

      const worker = async (w: number) => {
        let client = await WireClient.connect(broker.port, "127.0.0.1", `fuzz-${w}`);
        for (let index = w; index < TOTAL_CASES; index += WORKERS) {
          if (ONLY_CASE !== undefined && index !== ONLY_CASE) continue;
          const rnd = caseRandom(SEED, index);
          const count = rnd.next() < 0.15 ? rnd.int(2, 4) : 1;
          const mutated = Array.from({ length: count }, () => mutate(rnd.pick(seeds), rnd));
          const frames = mutated.map((m) => m.bytes);
          const sentinel = encodeFrame(API_VERSIONS, rnd.int(0, 3), {}, 0x5e000000 + index);
          // Frames the broker never answers (Produce acks=0) are sent without waiting for a response.
          const silent = frames.map((f) => isSilentProduce(f, servedVersions));
          const pending = [...frames, sentinel].map((f, i) => {
            if (silent[i]) {
              client.send(framed(f));
              return Promise.resolve(SILENT);
            }
            return client.requestRaw(0, 0, framed(f));
          });
          stats.cases++;
          stats.frames += count;
          const caseStartedMs = performance.now();
          let results: PromiseSettledResult<Uint8Array>[];
          try {
            results = await withDeadline(Promise.allSettled(pending), CASE_DEADLINE_MS, `case ${index}`);
          } catch (error) {
            fail(index, frames, mutated.map((m) => m.what), String(error));
            client.close();
            client = await WireClient.connect(broker.port, "127.0.0.1", `fuzz-${w}`);
            continue;
          }
          // Silent frames (Produce acks=0) say nothing by themselves: judge by the frames that get answers.
          const firstUnanswered = results.findIndex((r, i) => !silent[i] && r.status === "rejected");
          const answered = firstUnanswered < 0 ? results.length : firstUnanswered;
          if (results.some((r, i) => i > answered && !silent[i] && r.status === "fulfilled")) {
            fail(index, frames, mutated.map((m) => m.what), "a frame after an unanswered one was answered");
          }
          // The first frame left unanswered is the one that closed the connection (those after it are
          // dropped unread): it must be one that the broker may refuse. Or a silent frame just before it
          // closed the connection, which an acks=0 Produce does when a partition failed (as Apache does).
          let closer = answered;
          while (closer > 0 && silent[closer - 1]) closer--;
          const closedBySilent = closer < answered;
          if (answered < count && !closedBySilent && mustBeAnswered(frames[answered]!, served)) {
            fail(index, frames, mutated.map((m) => m.what), `frame ${answered} decodes and has a handler, but the connection was closed`);
          }
          for (let i = 0; i < Math.min(answered, count); i++) {
            if (silent[i]) continue;
            stats.answered++;
            const problem = responseProblem(frames[i]!, (results[i] as PromiseFulfilledResult<Uint8Array>).value);
            if (problem !== null) fail(index, frames, mutated.map((m) => m.what), `frame ${i}: ${problem}`);
          }
          if (answered === results.length) {
            const problem = responseProblem(sentinel, (results[count] as PromiseFulfilledResult<Uint8Array>).value);
            if (problem !== null) fail(index, frames, mutated.map((m) => m.what), `sentinel: ${problem}`);
          } else {
            if (answered === count && !closedBySilent) {
              fail(index, frames, mutated.map((m) => m.what), "every frame was answered but the sentinel was not");
            }
            await withDeadline(client.closed, CASE_DEADLINE_MS, `close after case ${index}`);
            stats.closedConnections++;
            client = await WireClient.connect(broker.port, "127.0.0.1", `fuzz-${w}`);
          }
          const caseMs = performance.now() - caseStartedMs;
          if (caseMs > slowest.ms) Object.assign(slowest, { ms: caseMs, index, what: mutated.map((m) => m.what).join(" | ") });
          if (++sinceHealthCheck >= HEALTH_EVERY) {
            sinceHealthCheck = 0;
            await checkHealthy();
          }
        }
        client.close();
      };

      await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
      await checkHealthy();
      const seconds = ((performance.now() - startedMs) / 1000).toFixed(1);
      console.log(
        `wire fuzz: seed ${SEED}, ${stats.cases} cases (${stats.frames} mutated frames, ${stats.answered} answered) from ${seeds.length} seeds ` +
          `in ${seconds} s; the server closed ${stats.closedConnections} connections; ${broker.broker.services.topics.list().length} topics exist; slowest case ${slowest.index} took ${slowest.ms.toFixed(0)} ms (${slowest.what})`,
      );
      if (failures.length > 0) throw new Error(`${failed} problems in ${stats.cases} cases (seed ${SEED}); first ones:\n${failures.join("\n")}`);
      expect(handlerFailures).toEqual([]);
      expect(healthy.isClosed).toBe(false);
    },
    600_000,
  );
});
