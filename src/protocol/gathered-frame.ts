/**
 * A response frame in pieces: the bytes the encoder wrote, with large byte fields left where they already
 * are (a Fetch answer's record batches, read from the log) instead of copied into the frame.
 *
 * Why: copying a Fetch answer's batches into its frame was the largest single cost of serving a consumer
 * (docs/architecture.md, "The Fetch read path"), and while the frame existed each answer was in memory
 * twice. Gathered, the listener writes the pieces one after the other; the batches go from the memory
 * they were read into straight to the socket. Fields shorter than the encoder's `gatherBytesMin` are still
 * copied, since a write per small piece costs more than the copy.
 */

/** Byte fields at least this long are gathered rather than copied (when the encoder is asked to gather). */
export const GATHER_BYTES_MIN = 64 * 1024;

export interface GatheredFrame {
  readonly kind: "gathered";
  /**
   * The frame's pieces in order. The first starts with the 4-byte size prefix, already filled in; no piece
   * is empty. Nothing may change any piece until `releaseAfterWrite` is called.
   */
  readonly pieces: readonly Uint8Array[];
  /** The response's size without its size prefix: what the prefix says. */
  readonly byteLength: number;
  /**
   * Called once the kernel has taken every byte of every piece, and only then; never when the connection
   * closes first (the memory is then left to the garbage collector).
   */
  readonly releaseAfterWrite?: () => void;
}

export function isGatheredFrame(value: unknown): value is GatheredFrame {
  return typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "gathered";
}

/** The frame as one buffer, its size prefix included: for tests and tools, not for the hot path. */
export function flattenGatheredFrame(frame: GatheredFrame): Uint8Array {
  const out = new Uint8Array(frame.byteLength + 4);
  let at = 0;
  for (const piece of frame.pieces) {
    out.set(piece, at);
    at += piece.byteLength;
  }
  if (at !== out.byteLength) throw new RangeError(`gathered frame of ${at} bytes, its prefix says ${frame.byteLength} + 4`);
  return out;
}

/** The same frame, `alsoAfterWrite` called after its own release (when the kernel took every piece). */
export function withAlsoAfterWrite(frame: GatheredFrame, alsoAfterWrite: () => void): GatheredFrame {
  const own = frame.releaseAfterWrite;
  return {
    ...frame,
    releaseAfterWrite: () => {
      own?.();
      alsoAfterWrite();
    },
  };
}
