/**
 * Gathering in the Writer and in encodeResponseFrame (protocol/gathered-frame.ts): long byte fields are
 * left where they are and the frame comes out in pieces that, put together, are exactly the bytes the
 * copying encoder writes.
 */
import { describe, expect, test } from "bun:test";
import { FrameBufferPool } from "../../../src/protocol/frame-pool.ts";
import { flattenGatheredFrame, GATHER_BYTES_MIN, isGatheredFrame } from "../../../src/protocol/gathered-frame.ts";
import { encodeResponseFrame } from "../../../src/protocol/header.ts";
import { encodeFetchResponse } from "../../../src/protocol/generated/fetch-response.ts";
import type { FetchResponseInit } from "../../../src/protocol/generated/fetch-response.ts";
import { Writer } from "../../../src/protocol/writer.ts";
import { concatBytes } from "../../support/batch-builder.ts";

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 31 + seed) % 256);

describe("Writer gathering", () => {
  test("runs at the threshold are gathered, shorter ones copied; the pieces are the copied output", () => {
    const long = bytes(100, 1);
    const short = bytes(99, 2);
    const gathering = new Writer(16, 100);
    const copying = new Writer(16);
    for (const w of [gathering, copying]) {
      w.int32(7);
      w.bytes(long);
      w.compactBytes(short);
      w.compactNullableBytes(long);
      w.int16(-1);
    }
    expect(gathering.hasGathered).toBe(true);
    expect(gathering.length).toBe(copying.offset);
    expect(gathering.offset).toBe(copying.offset - 2 * long.length);
    const pieces = gathering.pieces();
    expect(pieces.every((p) => p.byteLength > 0)).toBe(true);
    // The gathered runs are the callers' own memory, not copies.
    expect(pieces.filter((p) => p === long)).toHaveLength(2);
    expect(concatBytes(...pieces)).toEqual(copying.finish());
  });

  test("a gathered run first or last leaves no empty piece; finish() refuses a gathering writer", () => {
    const w = new Writer(8, 4);
    w.raw(bytes(10, 3));
    w.int8(1);
    w.raw(bytes(5, 4));
    const pieces = w.pieces();
    expect(pieces.map((p) => p.byteLength)).toEqual([10, 1, 5]);
    expect(() => w.finish()).toThrow(/pieces/);
  });

  test("without a threshold nothing is gathered, however long", () => {
    const w = new Writer(8);
    w.raw(bytes(1 << 20, 5));
    expect(w.hasGathered).toBe(false);
    expect(w.finish().byteLength).toBe(1 << 20);
  });
});

describe("encodeResponseFrame gathering a Fetch answer", () => {
  const big = bytes(GATHER_BYTES_MIN, 6);
  const small = bytes(GATHER_BYTES_MIN - 1, 7);
  const response: FetchResponseInit = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 5,
    responses: [
      {
        topic: "t",
        partitions: [
          { partitionIndex: 0, highWatermark: 10, lastStableOffset: 10, records: big },
          { partitionIndex: 1, highWatermark: 3, lastStableOffset: 3, records: small },
          { partitionIndex: 2, highWatermark: 0, lastStableOffset: 0, records: null },
        ],
      },
    ],
  };

  for (const version of [4, 11, 12, 17]) {
    test(`v${version}: the pieces are the copied frame, its size prefix filled in`, () => {
      const copied = encodeResponseFrame(1, version, 42, (w, v) => encodeFetchResponse(w, v, response));
      const frame = encodeResponseFrame(1, version, 42, (w, v) => encodeFetchResponse(w, v, response), 4096, undefined, GATHER_BYTES_MIN);
      if (!isGatheredFrame(frame)) throw new Error("expected a gathered frame");
      expect(frame.byteLength).toBe(copied.byteLength);
      expect(frame.pieces.filter((p) => p === big)).toHaveLength(1);
      expect(frame.pieces.some((p) => p === small)).toBe(false);
      const flat = flattenGatheredFrame(frame);
      expect(new DataView(flat.buffer).getInt32(0)).toBe(copied.byteLength);
      expect(flat.subarray(4)).toEqual(copied);
    });
  }

  test("nothing long enough: an ordinary frame; a pooled header buffer is released after the write", () => {
    const pool = new FrameBufferPool();
    const plain = encodeResponseFrame(1, 12, 1, (w, v) => encodeFetchResponse(w, v, { ...response, responses: [] }), 256, undefined, GATHER_BYTES_MIN);
    expect(isGatheredFrame(plain)).toBe(false);
    const frame = encodeResponseFrame(1, 12, 1, (w, v) => encodeFetchResponse(w, v, response), 512 * 1024, pool, GATHER_BYTES_MIN);
    if (!isGatheredFrame(frame)) throw new Error("expected a gathered frame");
    expect(pool.idleCount).toBe(0);
    frame.releaseAfterWrite!();
    expect(pool.idleCount).toBe(1);
  });
});
