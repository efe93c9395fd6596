/**
 * The JSON of etcd's v3 gRPC gateway (docs/architecture.md, "Ownership and cluster mode"): what the client
 * sends and how it reads the answers, kept pure so that it is tested without an etcd.
 *
 * The gateway speaks protobuf's JSON mapping: bytes fields (keys, values) are base64, int64 fields
 * (revisions, lease ids, TTLs) are decimal strings, because a lease id is a random 63-bit number that a
 * JavaScript number would round. They are bigints here and never pass through a number. Fields at their
 * default value are left out of the answers (`succeeded: false`, a PUT event's type, a zero TTL), so every
 * decoder reads a missing field as its default. Keys and values are text (UTF-8): bunka writes nothing else
 * under its prefix, and a key or value that is not UTF-8 is refused as malformed.
 */
import { DecodeError } from "../../errors/errors.ts";

export interface ResponseHeader {
  clusterId: bigint;
  memberId: bigint;
  /** The store's revision when the request was served (for a write: the revision it created). */
  revision: bigint;
  raftTerm: bigint;
}

export interface KeyValue {
  key: string;
  value: string;
  /** Revision of the write that created the key (0 for a key that does not exist). */
  createRevision: bigint;
  /** Revision of the last write to the key. */
  modRevision: bigint;
  /** Number of writes since the key was created. */
  version: bigint;
  /** The lease the key is attached to, 0n for none. */
  lease: bigint;
}

export interface RangeOptions {
  /** Every key that starts with `key`. */
  prefix?: boolean;
  /** The store as of this revision (0n or absent: the latest). */
  revision?: bigint;
  limit?: number;
}

export interface RangeResult {
  header: ResponseHeader;
  kvs: KeyValue[];
  /** More keys matched than `limit` allowed. */
  more: boolean;
  count: bigint;
}

export interface PutResult {
  header: ResponseHeader;
  prevKv: KeyValue | null;
}

export interface DeleteResult {
  header: ResponseHeader;
  deleted: bigint;
  prevKvs: KeyValue[];
}

export type CompareResult = "equal" | "not_equal" | "greater" | "less";

/** One condition of a txn; a key that does not exist compares as revision 0, version 0, lease 0. */
export type Compare =
  | { key: string; target: "create"; createRevision: bigint; result?: CompareResult }
  | { key: string; target: "mod"; modRevision: bigint; result?: CompareResult }
  | { key: string; target: "version"; version: bigint; result?: CompareResult }
  | { key: string; target: "lease"; lease: bigint; result?: CompareResult }
  | { key: string; target: "value"; value: string; result?: CompareResult };

export type TxnOp =
  | { op: "range"; key: string; options?: RangeOptions }
  | { op: "put"; key: string; value: string; lease?: bigint; prevKv?: boolean }
  | { op: "delete"; key: string; prefix?: boolean; prevKv?: boolean };

export type TxnOpResult =
  | ({ op: "range" } & Omit<RangeResult, "header">)
  | ({ op: "put" } & Omit<PutResult, "header">)
  | ({ op: "delete" } & Omit<DeleteResult, "header">);

export interface TxnRequest {
  compare: Compare[];
  success: TxnOp[];
  failure?: TxnOp[];
}

/** A txn's answer: whether every compare held, and the results of the branch that ran. */
export interface TxnResult {
  header: ResponseHeader;
  succeeded: boolean;
  responses: TxnOpResult[];
}

export interface LeaseGrantResult {
  header: ResponseHeader;
  id: bigint;
  ttlSeconds: number;
}

/** A keep-alive's answer. `alive: false` (the lease is gone: expired or revoked) is an outcome, not an error. */
export interface LeaseKeepAliveResult {
  id: bigint;
  alive: boolean;
  /** The TTL the lease was refreshed to; 0 when it is gone. */
  ttlSeconds: number;
}

export interface LeaseTimeToLiveResult {
  id: bigint;
  /** Seconds left, -1 when the lease is gone. */
  ttlSeconds: number;
  grantedTtlSeconds: number;
  keys: string[];
}

export interface WatchRequest {
  key: string;
  prefix?: boolean;
  /** First revision to deliver; absent: changes after the watch is created. */
  startRevision?: bigint;
  /** Deliver each event's previous key-value (a DELETE event then says what was deleted). */
  prevKv?: boolean;
  /** Ask for empty answers that carry the revision reached while nothing changes. */
  progressNotify?: boolean;
}

export interface WatchEvent {
  type: "put" | "delete";
  /** A DELETE event's kv carries only the key and the revision of the delete. */
  kv: KeyValue;
  prevKv: KeyValue | null;
}

/** One message of a watch stream. */
export interface WatchResponse {
  header: ResponseHeader;
  created: boolean;
  canceled: boolean;
  /** Set when the watch was canceled because its start revision was compacted away. */
  compactRevision: bigint;
  cancelReason: string;
  events: WatchEvent[];
}

/** The error body the gateway answers with a non-2xx status, or inside a stream. */
export interface GatewayError {
  /** The gRPC status code (5 NOT_FOUND, 9 FAILED_PRECONDITION, 14 UNAVAILABLE, ...). */
  code: number;
  message: string;
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

export function bytesToBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

export function textToBase64(text: string): string {
  return bytesToBase64(utf8Encoder.encode(text));
}

/** An int64 as protobuf's JSON writes it. Refuses what does not fit, so that nothing is silently wrapped. */
export function int64ToJson(value: bigint): string {
  if (value < -(1n << 63n) || value >= 1n << 63n) throw new RangeError(`${value} does not fit an int64`);
  return value.toString();
}

/**
 * The end of the range of every key starting with `prefix`: the prefix with its last byte below 0xff
 * incremented and what follows dropped, as etcd's clientv3 computes it. A prefix of only 0xff bytes (or the
 * empty prefix) ranges to the end of the key space, which etcd spells "\0".
 */
export function prefixRangeEnd(prefix: Uint8Array): Uint8Array {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i]! < 0xff) {
      const end = prefix.slice(0, i + 1);
      end[i]! += 1;
      return end;
    }
  }
  return new Uint8Array([0]);
}

function rangeFields(key: string, options: RangeOptions | undefined): Record<string, unknown> {
  const keyBytes = utf8Encoder.encode(key);
  const body: Record<string, unknown> = { key: bytesToBase64(keyBytes) };
  if (options?.prefix) body.range_end = bytesToBase64(prefixRangeEnd(keyBytes));
  if (options?.revision !== undefined) body.revision = int64ToJson(options.revision);
  if (options?.limit !== undefined) body.limit = int64ToJson(BigInt(options.limit));
  return body;
}

export function encodeRange(key: string, options?: RangeOptions): Record<string, unknown> {
  return rangeFields(key, options);
}

export function encodePut(key: string, value: string, lease?: bigint, prevKv?: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { key: textToBase64(key), value: textToBase64(value) };
  if (lease !== undefined && lease !== 0n) body.lease = int64ToJson(lease);
  if (prevKv) body.prev_kv = true;
  return body;
}

export function encodeDelete(key: string, prefix?: boolean, prevKv?: boolean): Record<string, unknown> {
  const body = rangeFields(key, { prefix: prefix ?? false });
  if (prevKv) body.prev_kv = true;
  return body;
}

const compareResultNames: Record<CompareResult, string> = { equal: "EQUAL", not_equal: "NOT_EQUAL", greater: "GREATER", less: "LESS" };

function encodeCompare(compare: Compare): Record<string, unknown> {
  const body: Record<string, unknown> = { key: textToBase64(compare.key), result: compareResultNames[compare.result ?? "equal"] };
  switch (compare.target) {
    case "create":
      return { ...body, target: "CREATE", create_revision: int64ToJson(compare.createRevision) };
    case "mod":
      return { ...body, target: "MOD", mod_revision: int64ToJson(compare.modRevision) };
    case "version":
      return { ...body, target: "VERSION", version: int64ToJson(compare.version) };
    case "lease":
      return { ...body, target: "LEASE", lease: int64ToJson(compare.lease) };
    case "value":
      return { ...body, target: "VALUE", value: textToBase64(compare.value) };
  }
}

function encodeTxnOp(op: TxnOp): Record<string, unknown> {
  switch (op.op) {
    case "range":
      return { request_range: encodeRange(op.key, op.options) };
    case "put":
      return { request_put: encodePut(op.key, op.value, op.lease, op.prevKv) };
    case "delete":
      return { request_delete_range: encodeDelete(op.key, op.prefix, op.prevKv) };
  }
}

export function encodeTxn(txn: TxnRequest): Record<string, unknown> {
  return {
    compare: txn.compare.map(encodeCompare),
    success: txn.success.map(encodeTxnOp),
    failure: (txn.failure ?? []).map(encodeTxnOp),
  };
}

export function encodeWatchCreate(watch: WatchRequest): Record<string, unknown> {
  const body = rangeFields(watch.key, { prefix: watch.prefix ?? false });
  if (watch.startRevision !== undefined) body.start_revision = int64ToJson(watch.startRevision);
  if (watch.prevKv) body.prev_kv = true;
  if (watch.progressNotify) body.progress_notify = true;
  return { create_request: body };
}

// ---------------------------------------------------------------------------------------------------------
// Decoding: every field is checked, a missing one is its protobuf default, anything else is a DecodeError.

type Json = Record<string, unknown>;

function object(value: unknown, what: string): Json {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new DecodeError(`etcd answer: ${what} is not an object`);
  return value as Json;
}

function optionalObject(value: unknown, what: string): Json | null {
  return value === undefined || value === null ? null : object(value, what);
}

function array(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new DecodeError(`etcd answer: ${what} is not an array`);
  return value;
}

function bool(value: unknown, what: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw new DecodeError(`etcd answer: ${what} is not a boolean`);
  return value;
}

function text(value: unknown, what: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new DecodeError(`etcd answer: ${what} is not a string`);
  return value;
}

const int64Text = /^-?(0|[1-9][0-9]{0,18})$/;
const uint64Text = /^(0|[1-9][0-9]{0,19})$/;

/**
 * An int64 field: a decimal string (what the gateway writes), or a JSON number only while it is a safe
 * integer. A larger number has already been rounded by JSON.parse, so it is refused rather than used.
 */
export function decodeInt64(value: unknown, what: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (typeof value === "string") {
    if (!int64Text.test(value)) throw new DecodeError(`etcd answer: ${what} is not an int64 (${JSON.stringify(value)})`);
    const parsed = BigInt(value);
    if (parsed < -(1n << 63n) || parsed >= 1n << 63n) throw new DecodeError(`etcd answer: ${what} overflows an int64 (${value})`);
    return parsed;
  }
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  throw new DecodeError(`etcd answer: ${what} is not an exact int64 (${String(value)})`);
}

/** A uint64 field (the header's cluster and member ids, which use all 64 bits, and the raft term). */
export function decodeUint64(value: unknown, what: string): bigint {
  if (value === undefined || value === null) return 0n;
  if (typeof value === "string") {
    if (!uint64Text.test(value)) throw new DecodeError(`etcd answer: ${what} is not a uint64 (${JSON.stringify(value)})`);
    const parsed = BigInt(value);
    if (parsed >= 1n << 64n) throw new DecodeError(`etcd answer: ${what} overflows a uint64 (${value})`);
    return parsed;
  }
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new DecodeError(`etcd answer: ${what} is not an exact uint64 (${String(value)})`);
}

/** A count or TTL that the protocol bounds far below 2^53 (seconds, small counts). */
function smallInt(value: unknown, what: string): number {
  const parsed = decodeInt64(value, what);
  if (parsed > BigInt(Number.MAX_SAFE_INTEGER) || parsed < BigInt(Number.MIN_SAFE_INTEGER)) throw new DecodeError(`etcd answer: ${what} is out of range (${parsed})`);
  return Number(parsed);
}

const base64Text = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A bytes field, which bunka only ever fills with UTF-8 text. */
export function decodeBase64Text(value: unknown, what: string): string {
  const encoded = text(value, what);
  if (!base64Text.test(encoded)) throw new DecodeError(`etcd answer: ${what} is not base64`);
  try {
    return utf8Decoder.decode(Buffer.from(encoded, "base64"));
  } catch {
    throw new DecodeError(`etcd answer: ${what} is not UTF-8 text`);
  }
}

export function decodeHeader(value: unknown): ResponseHeader {
  const header = optionalObject(value, "header") ?? {};
  return {
    clusterId: decodeUint64(header.cluster_id, "header.cluster_id"),
    memberId: decodeUint64(header.member_id, "header.member_id"),
    revision: decodeInt64(header.revision, "header.revision"),
    raftTerm: decodeUint64(header.raft_term, "header.raft_term"),
  };
}

export function decodeKeyValue(value: unknown, what = "kv"): KeyValue {
  const kv = object(value, what);
  return {
    key: decodeBase64Text(kv.key, `${what}.key`),
    value: decodeBase64Text(kv.value, `${what}.value`),
    createRevision: decodeInt64(kv.create_revision, `${what}.create_revision`),
    modRevision: decodeInt64(kv.mod_revision, `${what}.mod_revision`),
    version: decodeInt64(kv.version, `${what}.version`),
    lease: decodeInt64(kv.lease, `${what}.lease`),
  };
}

function decodeRangeBody(body: Json): Omit<RangeResult, "header"> {
  return {
    kvs: array(body.kvs, "kvs").map((kv, i) => decodeKeyValue(kv, `kvs[${i}]`)),
    more: bool(body.more, "more"),
    count: decodeInt64(body.count, "count"),
  };
}

function decodePutBody(body: Json): Omit<PutResult, "header"> {
  const prev = optionalObject(body.prev_kv, "prev_kv");
  return { prevKv: prev === null ? null : decodeKeyValue(prev, "prev_kv") };
}

function decodeDeleteBody(body: Json): Omit<DeleteResult, "header"> {
  return {
    deleted: decodeInt64(body.deleted, "deleted"),
    prevKvs: array(body.prev_kvs, "prev_kvs").map((kv, i) => decodeKeyValue(kv, `prev_kvs[${i}]`)),
  };
}

export function decodeRange(value: unknown): RangeResult {
  const body = object(value, "range answer");
  return { header: decodeHeader(body.header), ...decodeRangeBody(body) };
}

export function decodePut(value: unknown): PutResult {
  const body = object(value, "put answer");
  return { header: decodeHeader(body.header), ...decodePutBody(body) };
}

export function decodeDelete(value: unknown): DeleteResult {
  const body = object(value, "delete answer");
  return { header: decodeHeader(body.header), ...decodeDeleteBody(body) };
}

function decodeTxnOpResult(value: unknown, what: string): TxnOpResult {
  const op = object(value, what);
  if (op.response_range !== undefined) return { op: "range", ...decodeRangeBody(object(op.response_range, `${what}.response_range`)) };
  if (op.response_put !== undefined) return { op: "put", ...decodePutBody(object(op.response_put, `${what}.response_put`)) };
  if (op.response_delete_range !== undefined) return { op: "delete", ...decodeDeleteBody(object(op.response_delete_range, `${what}.response_delete_range`)) };
  throw new DecodeError(`etcd answer: ${what} is not a range, put or delete result`);
}

export function decodeTxn(value: unknown): TxnResult {
  const body = object(value, "txn answer");
  return {
    header: decodeHeader(body.header),
    succeeded: bool(body.succeeded, "succeeded"),
    responses: array(body.responses, "responses").map((op, i) => decodeTxnOpResult(op, `responses[${i}]`)),
  };
}

export function decodeLeaseGrant(value: unknown): LeaseGrantResult {
  const body = object(value, "lease grant answer");
  const error = text(body.error, "error");
  if (error !== "") throw new DecodeError(`etcd answer: lease grant failed: ${error}`);
  return { header: decodeHeader(body.header), id: decodeInt64(body.ID, "ID"), ttlSeconds: smallInt(body.TTL, "TTL") };
}

/**
 * One keep-alive answer (the `result` of its stream message). A lease that no longer exists is answered
 * with its id and no TTL (0), which is the outcome "gone".
 */
export function decodeLeaseKeepAlive(value: unknown): LeaseKeepAliveResult {
  const result = object(value, "keep-alive result");
  const ttlSeconds = smallInt(result.TTL, "TTL");
  return { id: decodeInt64(result.ID, "ID"), alive: ttlSeconds > 0, ttlSeconds: Math.max(0, ttlSeconds) };
}

export function decodeLeaseTimeToLive(value: unknown): LeaseTimeToLiveResult {
  const body = object(value, "lease time-to-live answer");
  return {
    id: decodeInt64(body.ID, "ID"),
    ttlSeconds: smallInt(body.TTL, "TTL"),
    grantedTtlSeconds: smallInt(body.grantedTTL, "grantedTTL"),
    keys: array(body.keys, "keys").map((key, i) => decodeBase64Text(key, `keys[${i}]`)),
  };
}

export function decodeWatchEvent(value: unknown, what: string): WatchEvent {
  const event = object(value, what);
  const type = text(event.type, `${what}.type`);
  if (type !== "" && type !== "PUT" && type !== "DELETE") throw new DecodeError(`etcd answer: ${what}.type is ${JSON.stringify(type)}`);
  const prev = optionalObject(event.prev_kv, `${what}.prev_kv`);
  return {
    type: type === "DELETE" ? "delete" : "put",
    kv: decodeKeyValue(event.kv, `${what}.kv`),
    prevKv: prev === null ? null : decodeKeyValue(prev, `${what}.prev_kv`),
  };
}

/**
 * One message of a streaming endpoint (watch, keep-alive): `{"result": {...}}`, or `{"error": {...}}` when
 * the server ended the stream with an error.
 */
export function decodeStreamMessage(value: unknown): { kind: "result"; result: unknown } | { kind: "error"; error: GatewayError } {
  const message = object(value, "stream message");
  if (message.error !== undefined) return { kind: "error", error: decodeGatewayError(message.error) };
  if (message.result === undefined) throw new DecodeError("etcd answer: stream message without a result or an error");
  return { kind: "result", result: message.result };
}

/** The `result` of one watch stream message. */
export function decodeWatchResponse(value: unknown): WatchResponse {
  const result = object(value, "watch result");
  return {
    header: decodeHeader(result.header),
    created: bool(result.created, "created"),
    canceled: bool(result.canceled, "canceled"),
    compactRevision: decodeInt64(result.compact_revision, "compact_revision"),
    cancelReason: text(result.cancel_reason, "cancel_reason"),
    events: array(result.events, "events").map((event, i) => decodeWatchEvent(event, `events[${i}]`)),
  };
}

/**
 * An error body: `{"error": "...", "message": "...", "code": 5}` as a unary answer, or inside a stream
 * `{"grpc_code": 14, "message": "...", "http_code": 503}`.
 */
export function decodeGatewayError(value: unknown): GatewayError {
  const body = object(value, "error");
  const code = body.code ?? body.grpc_code;
  if (typeof code !== "number" || !Number.isInteger(code)) throw new DecodeError("etcd answer: error without a gRPC code");
  const message = text(body.message, "message") || text(body.error, "error");
  return { code, message };
}
