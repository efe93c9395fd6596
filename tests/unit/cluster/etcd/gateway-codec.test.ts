/**
 * The JSON of etcd's gateway: base64 keys and values, int64 fields exact (a lease id past 2^53 survives),
 * defaults for the fields the gateway leaves out, strict refusal of anything malformed. The answers here
 * are ones etcd 3.4 gave.
 */
import { describe, expect, test } from "bun:test";
import { DecodeError } from "../../../../src/errors/errors.ts";
import {
  decodeBase64Text,
  decodeGatewayError,
  decodeInt64,
  decodeLeaseGrant,
  decodeLeaseKeepAlive,
  decodeLeaseTimeToLive,
  decodeRange,
  decodeStreamMessage,
  decodeTxn,
  decodeUint64,
  decodeWatchResponse,
  encodeDelete,
  encodePut,
  encodeRange,
  encodeTxn,
  encodeWatchCreate,
  int64ToJson,
  prefixRangeEnd,
  textToBase64,
} from "../../../../src/cluster/etcd/gateway-codec.ts";

const HEADER = { cluster_id: "15118495548433857066", member_id: "13668033151171901709", revision: "3", raft_term: "2" };
const LEASE = 4111120384622971915n; // past Number.MAX_SAFE_INTEGER: a number would round it

function bytesOf(base64: string): number[] {
  return [...Buffer.from(base64, "base64")];
}

describe("gateway encoding", () => {
  test("keys and values go as base64 of their UTF-8 bytes", () => {
    expect(encodePut("/bunka/c/brokers/1", "é{}")).toEqual({ key: textToBase64("/bunka/c/brokers/1"), value: Buffer.from("é{}", "utf8").toString("base64") });
    expect(Buffer.from(textToBase64("é"), "base64").toString("utf8")).toBe("é");
  });

  test("int64 fields go as decimal strings, exactly, and what does not fit is refused", () => {
    expect(encodePut("k", "v", LEASE)).toEqual({ key: "aw==", value: "dg==", lease: "4111120384622971915" });
    expect(int64ToJson(-(1n << 63n))).toBe("-9223372036854775808");
    expect(int64ToJson((1n << 63n) - 1n)).toBe("9223372036854775807");
    expect(() => int64ToJson(1n << 63n)).toThrow(RangeError);
  });

  test("a put without a lease leaves the field out (lease 0 means none)", () => {
    expect(encodePut("k", "v", 0n)).toEqual({ key: "aw==", value: "dg==" });
    expect(encodePut("k", "v", undefined, true)).toEqual({ key: "aw==", value: "dg==", prev_kv: true });
  });

  test("a prefix ranges to the prefix with its last byte incremented", () => {
    expect([...prefixRangeEnd(new TextEncoder().encode("/a/"))]).toEqual([0x2f, 0x61, 0x30]);
    expect([...prefixRangeEnd(new Uint8Array([0x61, 0xff, 0xff]))]).toEqual([0x62]);
    expect([...prefixRangeEnd(new Uint8Array([0xff]))]).toEqual([0]);
    expect([...prefixRangeEnd(new Uint8Array([]))]).toEqual([0]);
    const range = encodeRange("/bunka/c/owners/", { prefix: true, revision: 7n, limit: 10 });
    expect(Buffer.from(range.key as string, "base64").toString()).toBe("/bunka/c/owners/");
    expect(Buffer.from(range.range_end as string, "base64").toString()).toBe("/bunka/c/owners0");
    expect(range.revision).toBe("7");
    expect(range.limit).toBe("10");
    expect(encodeDelete("/p/", true, true)).toEqual({ key: textToBase64("/p/"), range_end: textToBase64("/p0"), prev_kv: true });
  });

  test("a txn spells targets, results and operations as the gateway wants them", () => {
    const body = encodeTxn({
      compare: [
        { key: "a", target: "create", createRevision: 0n },
        { key: "a", target: "mod", modRevision: 5n, result: "less" },
        { key: "a", target: "version", version: 2n, result: "greater" },
        { key: "a", target: "lease", lease: LEASE, result: "not_equal" },
        { key: "a", target: "value", value: "x" },
      ],
      success: [{ op: "put", key: "a", value: "1", lease: LEASE }],
      failure: [{ op: "range", key: "a" }, { op: "delete", key: "b" }],
    });
    expect(body).toEqual({
      compare: [
        { key: "YQ==", result: "EQUAL", target: "CREATE", create_revision: "0" },
        { key: "YQ==", result: "LESS", target: "MOD", mod_revision: "5" },
        { key: "YQ==", result: "GREATER", target: "VERSION", version: "2" },
        { key: "YQ==", result: "NOT_EQUAL", target: "LEASE", lease: "4111120384622971915" },
        { key: "YQ==", result: "EQUAL", target: "VALUE", value: "eA==" },
      ],
      success: [{ request_put: { key: "YQ==", value: "MQ==", lease: "4111120384622971915" } }],
      failure: [{ request_range: { key: "YQ==" } }, { request_delete_range: { key: "Yg==" } }],
    });
  });

  test("a watch create request", () => {
    expect(encodeWatchCreate({ key: "/p/", prefix: true, startRevision: 12n, prevKv: true })).toEqual({
      create_request: { key: textToBase64("/p/"), range_end: textToBase64("/p0"), start_revision: "12", prev_kv: true },
    });
    expect(encodeWatchCreate({ key: "k" })).toEqual({ create_request: { key: "aw==" } });
  });
});

describe("gateway decoding", () => {
  test("a range answer, ids past 2^53 exact", () => {
    const answer = decodeRange({
      header: HEADER,
      kvs: [{ key: "YQ==", create_revision: "3", mod_revision: "3", version: "1", value: "MQ==", lease: "4111120384622971915" }],
      count: "1",
    });
    expect(answer.header).toEqual({ clusterId: 15118495548433857066n, memberId: 13668033151171901709n, revision: 3n, raftTerm: 2n });
    expect(answer.kvs).toEqual([{ key: "a", value: "1", createRevision: 3n, modRevision: 3n, version: 1n, lease: LEASE }]);
    expect(answer.count).toBe(1n);
    expect(answer.more).toBe(false);
  });

  test("fields the gateway leaves out are their defaults", () => {
    // An empty range: no kvs, no count. A key without a lease or value.
    expect(decodeRange({ header: HEADER })).toMatchObject({ kvs: [], count: 0n, more: false });
    expect(decodeRange({ header: HEADER, kvs: [{ key: "YQ==", create_revision: "2", mod_revision: "2", version: "1" }], count: "1" }).kvs[0]).toEqual({
      key: "a",
      value: "",
      createRevision: 2n,
      modRevision: 2n,
      version: 1n,
      lease: 0n,
    });
  });

  test("a txn whose compares failed leaves `succeeded` out; its failure branch results are read", () => {
    const failed = decodeTxn({
      header: HEADER,
      responses: [{ response_range: { header: { revision: "3" }, kvs: [{ key: "YQ==", create_revision: "3", mod_revision: "3", version: "1", value: "MQ==", lease: "7" }], count: "1" } }],
    });
    expect(failed.succeeded).toBe(false);
    expect(failed.responses).toEqual([{ op: "range", kvs: [{ key: "a", value: "1", createRevision: 3n, modRevision: 3n, version: 1n, lease: 7n }], more: false, count: 1n }]);
    const succeeded = decodeTxn({ header: HEADER, succeeded: true, responses: [{ response_put: { header: { revision: "3" } } }, { response_delete_range: { header: {}, deleted: "1" } }] });
    expect(succeeded.succeeded).toBe(true);
    expect(succeeded.responses).toEqual([
      { op: "put", prevKv: null },
      { op: "delete", deleted: 1n, prevKvs: [] },
    ]);
  });

  test("leases: a grant, a keep-alive of a live and of a gone lease, time-to-live", () => {
    expect(decodeLeaseGrant({ header: HEADER, ID: "4111120384622971915", TTL: "5" })).toEqual({ header: decodeRange({ header: HEADER }).header, id: LEASE, ttlSeconds: 5 });
    const alive = decodeStreamMessage({ result: { header: HEADER, ID: "4111120384622971915", TTL: "5" } });
    expect(alive.kind).toBe("result");
    expect(decodeLeaseKeepAlive((alive as { result: unknown }).result)).toEqual({ id: LEASE, alive: true, ttlSeconds: 5 });
    // etcd answers a keep-alive of a lease it no longer has with the id and no TTL.
    expect(decodeLeaseKeepAlive({ header: HEADER, ID: "4111120384622971915" })).toEqual({ id: LEASE, alive: false, ttlSeconds: 0 });
    expect(decodeLeaseTimeToLive({ header: HEADER, ID: "4111120384622971915", TTL: "4", grantedTTL: "5", keys: ["YQ=="] })).toEqual({
      id: LEASE,
      ttlSeconds: 4,
      grantedTtlSeconds: 5,
      keys: ["a"],
    });
    expect(decodeLeaseTimeToLive({ header: HEADER, ID: "4111120384622971915", TTL: "-1" }).ttlSeconds).toBe(-1);
  });

  test("watch messages: created, events (a PUT has no type), a compaction cancel, a stream error", () => {
    const created = decodeWatchResponse({ header: HEADER, created: true });
    expect(created).toMatchObject({ created: true, canceled: false, events: [], compactRevision: 0n });
    const events = decodeWatchResponse({
      header: HEADER,
      events: [
        { kv: { key: "YQ==", create_revision: "3", mod_revision: "3", version: "1", value: "MQ==", lease: "4111120384622971915" } },
        { type: "DELETE", kv: { key: "YQ==", mod_revision: "4" }, prev_kv: { key: "YQ==", create_revision: "3", mod_revision: "3", version: "1", value: "MQ==" } },
      ],
    });
    expect(events.events.map((e) => [e.type, e.kv.key, e.kv.modRevision])).toEqual([
      ["put", "a", 3n],
      ["delete", "a", 4n],
    ]);
    expect(events.events[0]!.kv.lease).toBe(LEASE);
    expect(events.events[1]!.prevKv?.value).toBe("1");
    expect(decodeWatchResponse({ header: { raft_term: "2" }, canceled: true, compact_revision: "5" })).toMatchObject({ canceled: true, compactRevision: 5n });
    expect(decodeStreamMessage({ error: { grpc_code: 14, http_code: 503, message: "etcdserver: no leader", http_status: "Service Unavailable" } })).toEqual({
      kind: "error",
      error: { code: 14, message: "etcdserver: no leader" },
    });
  });

  test("unary error bodies", () => {
    expect(decodeGatewayError({ error: "etcdserver: requested lease not found", message: "etcdserver: requested lease not found", code: 5 })).toEqual({
      code: 5,
      message: "etcdserver: requested lease not found",
    });
    expect(() => decodeGatewayError({ message: "no code" })).toThrow(DecodeError);
  });

  test("int64 and uint64: strings exact, safe numbers accepted, rounded numbers and junk refused", () => {
    expect(decodeInt64("9223372036854775807", "x")).toBe((1n << 63n) - 1n);
    expect(decodeInt64("-1", "x")).toBe(-1n);
    expect(decodeInt64(42, "x")).toBe(42n);
    expect(decodeInt64(undefined, "x")).toBe(0n);
    expect(() => decodeInt64("9223372036854775808", "x")).toThrow(DecodeError);
    expect(() => decodeInt64(2 ** 60, "x")).toThrow(DecodeError);
    expect(() => decodeInt64("12a", "x")).toThrow(DecodeError);
    expect(() => decodeInt64("012", "x")).toThrow(DecodeError);
    expect(() => decodeInt64(1.5, "x")).toThrow(DecodeError);
    expect(decodeUint64("18446744073709551615", "x")).toBe((1n << 64n) - 1n);
    expect(() => decodeUint64("18446744073709551616", "x")).toThrow(DecodeError);
    expect(() => decodeUint64("-1", "x")).toThrow(DecodeError);
  });

  test("bytes: base64 of UTF-8 text; bad base64 and non-UTF-8 bytes are refused", () => {
    expect(decodeBase64Text("w6k=", "k")).toBe("é");
    expect(decodeBase64Text(undefined, "k")).toBe("");
    expect(() => decodeBase64Text("!!", "k")).toThrow(DecodeError);
    expect(() => decodeBase64Text("YQ", "k")).toThrow(DecodeError);
    expect(bytesOf("/w==")).toEqual([0xff]);
    expect(() => decodeBase64Text("/w==", "k")).toThrow(DecodeError);
  });

  test("wrong shapes are DecodeErrors naming the field", () => {
    expect(() => decodeRange({ header: HEADER, kvs: {} })).toThrow("kvs is not an array");
    expect(() => decodeRange({ header: HEADER, kvs: [{ key: 5 }] })).toThrow("kvs[0].key is not a string");
    expect(() => decodeTxn({ header: HEADER, succeeded: "yes" })).toThrow("succeeded is not a boolean");
    expect(() => decodeTxn({ header: HEADER, responses: [{ response_other: {} }] })).toThrow(DecodeError);
    expect(() => decodeWatchResponse({ header: HEADER, events: [{ type: "TOUCH", kv: { key: "YQ==" } }] })).toThrow(DecodeError);
    expect(() => decodeStreamMessage({})).toThrow(DecodeError);
    expect(() => decodeStreamMessage([])).toThrow(DecodeError);
  });
});
