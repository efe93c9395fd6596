/**
 * Versioned, checksummed JSON state files (topic metadata, partition metadata, and the other small
 * files under __cluster/).
 *
 * On disk, one line of JSON, keys in this order:
 *
 *   {"format":"<name>","version":<N>,"crc32":<uint32>,"body":<canonical body>}\n
 *
 * - `format` names what the file is, so a file put in the wrong place is refused rather than misread.
 * - `version` is the body's schema version. A loader accepts its current version and the versions it
 *   lists as accepted (normally the previous one, with a `migrate` step) and refuses anything else:
 *   a file written by a newer bunka is never half-understood.
 * - `crc32` is the CRC-32 (IEEE) of the UTF-8 bytes of the canonical body string: JSON.stringify with
 *   the keys of every object sorted, no whitespace. The loader re-canonicalises the parsed body and
 *   compares, so a checksum does not depend on how the envelope around it was formatted, while any
 *   change to a value (bit rot, a torn or hand-edited file) is detected.
 * - Plain JSON rather than a binary format because these files are small, rarely written, and an
 *   operator in an incident should be able to read them with `cat`.
 *
 * A file that exists but fails any check raises CorruptStateError naming the file and the problem; it is
 * never treated as absent or empty, because silently starting from empty state would forget producer
 * ids, transactions or topics.
 */
import { CorruptStateError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { writeFileAtomic } from "./atomic-file.ts";
import { crc32 } from "./crc32.ts";

/** State files are small; anything bigger than this is not one of ours and is refused unread. */
export const STATE_FILE_BYTES_MAX = 64 * 1024 * 1024;

const FORMAT_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export interface LoadStateOptions<T> {
  /** The version this build writes. */
  current: number;
  /** Older versions this build still reads (normally just the previous one). */
  accepted?: readonly number[];
  /** Turns the body of an accepted older version into a current body; identity when omitted. */
  migrate?: (body: unknown, version: number) => unknown;
  /**
   * Checks the shape of the (migrated) body and returns it typed. Throwing any error marks the file
   * corrupt, with the error's message as the reason.
   */
  parse?: (body: unknown) => T;
}

/**
 * Serialises `body` as the canonical JSON of the file: object keys sorted, no whitespace. Throws a
 * TypeError for anything JSON cannot represent faithfully (NaN, Infinity, bigint, functions, class
 * instances other than plain objects and arrays, undefined in arrays), because writing it would
 * silently change it. Properties whose value is undefined are omitted, as JSON.stringify does.
 */
export function canonicalJson(body: unknown): string {
  try {
    return canonicalFast(body);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    // Refused: the slow walk names where (body.a[2].b), which the fast one does not keep track of.
    canonical(body, "body");
    throw error;
  }
}

const utf8 = new TextEncoder();

/** JSON.stringify of each object key, kept for the few key names state files use. */
const quotedKeys = new Map<string, string>();
const QUOTED_KEYS_MAX = 4096;

/**
 * The same output and refusals as `canonical`, with the work per value kept small: transaction and offset
 * journals encode a record on every transition. String concatenation instead of arrays joined, keys
 * sorted only when they are not in order already, each key quoted once per process.
 */
function canonicalFast(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("a number JSON cannot represent");
      return JSON.stringify(value);
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        let out = "[";
        for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + canonicalFast(value[i]);
        return `${out}]`;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) throw new TypeError("not a plain object");
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record);
      for (let i = 1; i < keys.length; i++) {
        if (keys[i - 1]! > keys[i]!) {
          keys.sort();
          break;
        }
      }
      let out = "{";
      let first = true;
      for (const key of keys) {
        const field = record[key];
        if (field === undefined) continue;
        let quoted = quotedKeys.get(key);
        if (quoted === undefined) {
          quoted = JSON.stringify(key);
          if (quotedKeys.size < QUOTED_KEYS_MAX) quotedKeys.set(key, quoted);
        }
        out += `${first ? "" : ","}${quoted}:${canonicalFast(field)}`;
        first = false;
      }
      return `${out}}`;
    }
    default:
      throw new TypeError(`a ${typeof value}, which JSON cannot represent`);
  }
}

/** The reference walk: slower, and names the place of anything it refuses. */
function canonical(value: unknown, where: string): string {
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${where} is ${value}, which JSON cannot represent`);
      return JSON.stringify(value);
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        return `[${value.map((item, i) => canonical(item, `${where}[${i}]`)).join(",")}]`;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`${where} is not a plain object`);
      }
      const record = value as Record<string, unknown>;
      const fields: string[] = [];
      for (const key of Object.keys(record).sort()) {
        const field = record[key];
        if (field === undefined) continue;
        fields.push(`${JSON.stringify(key)}:${canonical(field, `${where}.${key}`)}`);
      }
      return `{${fields.join(",")}}`;
    }
    default:
      throw new TypeError(`${where} is a ${typeof value}, which JSON cannot represent`);
  }
}

/** The bytes of a state file, exactly as `saveState` writes them. */
export function encodeState(format: string, version: number, body: unknown): Uint8Array {
  if (!FORMAT_NAME.test(format)) throw new TypeError(`invalid state format name ${JSON.stringify(format)}`);
  if (!Number.isSafeInteger(version) || version < 0) throw new TypeError(`invalid state version ${version}`);
  const bodyJson = canonicalJson(body);
  const checksum = crc32(utf8.encode(bodyJson));
  return utf8.encode(
    `{"format":${JSON.stringify(format)},"version":${version},"crc32":${checksum},"body":${bodyJson}}\n`,
  );
}

/** Writes the state file atomically (see atomic-file.ts for the failure contract). */
export async function saveState(fs: Fs, path: string, format: string, version: number, body: unknown): Promise<void> {
  await writeFileAtomic(fs, path, encodeState(format, version, body));
}

/**
 * Reads a state file: undefined when it does not exist, the (migrated, parsed) body when it is valid,
 * CorruptStateError otherwise.
 */
export async function loadState<T>(
  fs: Fs,
  path: string,
  format: string,
  options: LoadStateOptions<T> & { parse: (body: unknown) => T },
): Promise<T | undefined>;
export async function loadState(fs: Fs, path: string, format: string, options: LoadStateOptions<unknown>): Promise<unknown>;
export async function loadState<T>(fs: Fs, path: string, format: string, options: LoadStateOptions<T>): Promise<T | unknown> {
  const stat = await fs.stat(path);
  if (stat === undefined) return undefined;
  if (stat.isDirectory) throw new CorruptStateError(path, "is a directory, expected a state file");
  if (stat.size > STATE_FILE_BYTES_MAX) {
    throw new CorruptStateError(path, `is ${stat.size} bytes, more than the ${STATE_FILE_BYTES_MAX} a state file may have`);
  }
  return decodeState(path, await fs.readFile(path), format, options);
}

/** The checks of `loadState` on bytes already read; `path` only names the file in errors. */
export function decodeState<T>(path: string, bytes: Uint8Array, format: string, options: LoadStateOptions<T>): T | unknown {
  if (bytes.length === 0) throw new CorruptStateError(path, "file is empty");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new CorruptStateError(path, "file is not valid UTF-8");
  }
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch (error) {
    throw new CorruptStateError(path, `file is not valid JSON (${messageOf(error)})`);
  }
  if (typeof envelope !== "object" || envelope === null || Array.isArray(envelope)) {
    throw new CorruptStateError(path, "file is not a JSON object");
  }
  const fields = envelope as Record<string, unknown>;
  if (fields.format !== format) {
    throw new CorruptStateError(path, `wrong format ${JSON.stringify(fields.format)}, expected ${JSON.stringify(format)}`);
  }
  const version = fields.version;
  const accepted = [options.current, ...(options.accepted ?? [])];
  if (typeof version !== "number" || !accepted.includes(version)) {
    throw new CorruptStateError(
      path,
      `unknown version ${JSON.stringify(version)} of format ${format} (this build reads versions ${accepted.join(", ")})`,
    );
  }
  if (!("body" in fields)) throw new CorruptStateError(path, "missing body");
  const stored = fields.crc32;
  if (typeof stored !== "number" || !Number.isInteger(stored) || stored < 0 || stored > 0xffffffff) {
    throw new CorruptStateError(path, `missing or invalid crc32 ${JSON.stringify(stored)}`);
  }
  const computed = crc32(new TextEncoder().encode(canonicalJson(fields.body)));
  if (computed !== stored) {
    throw new CorruptStateError(path, `checksum mismatch: stored crc32 ${stored}, computed ${computed}`);
  }
  let body: unknown = fields.body;
  try {
    if (version !== options.current && options.migrate !== undefined) body = options.migrate(body, version);
    return options.parse === undefined ? body : options.parse(body);
  } catch (error) {
    throw new CorruptStateError(path, `invalid body for ${format} version ${version}: ${messageOf(error)}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
