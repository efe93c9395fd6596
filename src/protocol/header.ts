/**
 * Request and response headers: which header version goes with which API version, and the framing of a
 * response (header + body) in one buffer.
 */
import { DecodeError } from "../errors/errors.ts";
import { apiCodecsByKey } from "./generated/index.ts";
import { decodeRequestHeader, type RequestHeader } from "./generated/request-header.ts";
import { encodeResponseHeader } from "./generated/response-header.ts";
import { Reader } from "./reader.ts";
import { type FrameBufferPool, POOLED_FRAME_BYTES_MAX, POOLED_FRAME_BYTES_MIN, releaseFrameAfterWrite, type ReleasableFrame } from "./frame-pool.ts";
import type { GatheredFrame } from "./gathered-frame.ts";
import { Writer } from "./writer.ts";

export const API_VERSIONS_KEY = 18;

/** Header v2 for flexible request versions, v1 otherwise (v0 only for ControlledShutdown v0, not served). */
export function requestHeaderVersion(apiKey: number, apiVersion: number): number {
  const api = apiCodecsByKey.get(apiKey);
  return api && api.flexibleMinVersion >= 0 && apiVersion >= api.flexibleMinVersion ? 2 : 1;
}

/**
 * Header v1 for flexible response versions, v0 otherwise. ApiVersions responses always use v0, because a
 * client must be able to read the answer before it knows which versions the broker speaks.
 */
export function responseHeaderVersion(apiKey: number, apiVersion: number): number {
  if (apiKey === API_VERSIONS_KEY) return 0;
  const api = apiCodecsByKey.get(apiKey);
  return api && api.flexibleMinVersion >= 0 && apiVersion >= api.flexibleMinVersion ? 1 : 0;
}

export interface ParsedRequest {
  header: RequestHeader;
  /** Reader positioned at the start of the request body. */
  body: Reader;
}

/** Parses the request header; the caller decodes the body with the API's codec. */
export function parseRequestFrame(frame: Uint8Array): ParsedRequest {
  if (frame.length < 8) throw new DecodeError(`request of ${frame.length} bytes is shorter than a header`);
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const apiKey = view.getInt16(0);
  const apiVersion = view.getInt16(2);
  const reader = new Reader(frame);
  const header = decodeRequestHeader(reader, requestHeaderVersion(apiKey, apiVersion));
  return { header, body: reader };
}

/**
 * The listener's mark for a response whose 4 bytes before the view are reserved for the size prefix, so that
 * prefix and body leave in one write without a copy (net/kafka-listener.ts, withReservedSizePrefix).
 */
const reservedSizePrefix = Symbol.for("bunka.reservedSizePrefix");

/**
 * Encodes header + body into one buffer, the view starting after 4 bytes reserved for the size prefix.
 * With a `pool` and a `sizeHint` (an upper bound of the frame) from POOLED_FRAME_BYTES_MIN to _MAX, the frame
 * is encoded into a pooled buffer and carries the function that gives it back once written
 * (frame-pool.ts). With `gatherBytesMin`, byte fields at least that long are gathered instead of copied
 * (gathered-frame.ts): the result is then a GatheredFrame whenever one was, and its pieces refer to those
 * fields' memory until written; `sizeHint` should then leave those fields out.
 */
export function encodeResponseFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  encodeBody: (w: Writer, version: number) => void,
  sizeHint?: number,
  pool?: FrameBufferPool,
): Uint8Array;
export function encodeResponseFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  encodeBody: (w: Writer, version: number) => void,
  sizeHint: number | undefined,
  pool: FrameBufferPool | undefined,
  gatherBytesMin: number | undefined,
): Uint8Array | GatheredFrame;
export function encodeResponseFrame(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  encodeBody: (w: Writer, version: number) => void,
  sizeHint = 256,
  pool?: FrameBufferPool,
  gatherBytesMin?: number,
): Uint8Array | GatheredFrame {
  const pooled = pool !== undefined && sizeHint >= POOLED_FRAME_BYTES_MIN && sizeHint <= POOLED_FRAME_BYTES_MAX ? pool.acquire(sizeHint) : undefined;
  const w = new Writer(pooled ?? sizeHint, gatherBytesMin);
  w.int32(0);
  encodeResponseHeader(w, responseHeaderVersion(apiKey, apiVersion), { correlationId });
  try {
    encodeBody(w, apiVersion);
  } catch (error) {
    if (pooled !== undefined) pool!.release(pooled);
    throw error;
  }
  // The hint was short and the writer moved to fresh memory: the pooled buffer is free at once.
  const stillPooled = pooled !== undefined && w.currentBuffer === pooled;
  if (pooled !== undefined && !stillPooled) pool!.release(pooled);
  if (w.hasGathered) {
    w.patchInt32(0, w.length - 4);
    return {
      kind: "gathered",
      pieces: w.pieces(),
      byteLength: w.length - 4,
      ...(stillPooled ? { releaseAfterWrite: () => pool!.release(pooled) } : {}),
    };
  }
  const body = w.finish().subarray(4) as Uint8Array & { [reservedSizePrefix]?: true } & ReleasableFrame;
  body[reservedSizePrefix] = true;
  if (stillPooled) body[releaseFrameAfterWrite] = () => pool!.release(pooled);
  return body;
}
