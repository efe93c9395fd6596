/**
 * The WebAssembly kernels (kernels/, Rust; docs/architecture.md, "Codecs and kernels"): LZ4's block decoder
 * and compressor, and snappy's element decoder and fragment compressor, each several times as fast as its
 * TypeScript twin in lz4.ts and snappy.ts (docs/benchmarks.md, "Record-batch codecs"). The module is
 * embedded in the binary (generated/kernels-wasm.ts) and instantiated once per thread; it needs no
 * imports. Where WebAssembly is missing or the module does not instantiate, `lz4Kernels` and
 * `snappyKernels` are null and the codecs use their TypeScript twins, which give the same results.
 *
 * A kernel works on the module's linear memory: the caller's bytes are copied in, the kernel runs, the
 * result is copied out. Each call lays its ranges out from the heap base up, with KERNEL_SLACK_BYTES
 * after every range (the decoders copy 16 bytes at a time and may overrun by that much), and grows
 * the memory when a call needs more. Both codecs share the one memory (KernelHeap).
 */
import { KERNELS_WASM_BASE64 } from "./generated/kernels-wasm.ts";

export const KERNEL_SLACK_BYTES = 32;
const PAGE_BYTES = 65536;
/** LZ4's largest match offset: the most of the earlier output a block may refer to. */
const LZ4_WINDOW_BYTES = 65535;
/** The kernel's codes besides a position (kernels/src/lz4.rs). */
export const KERNEL_OUTPUT_LIMIT = -1;
export const KERNEL_MALFORMED = -2;

interface KernelExports {
  memory: WebAssembly.Memory;
  __heap_base: WebAssembly.Global;
  lz4_decode_block(src: number, srcLength: number, out: number, outLimit: number, window: number): number;
  lz4_compress_block(src: number, length: number, out: number): number;
  snappy_decode_elements(src: number, srcLength: number, out: number, length: number): number;
  snappy_compress_fragment(src: number, length: number, out: number): number;
}

export interface Lz4Kernels {
  /**
   * lz4DecodeBlock's contract (lz4.ts), except that a malformed block returns KERNEL_MALFORMED instead of
   * throwing: the caller asks the TypeScript decoder for the reason.
   */
  decodeBlock(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, outLimit: number, windowStart: number): number;
  /** lz4CompressBlock's contract: `out` has room for lz4MaxCompressedLength(end - start) from `o`. */
  compressBlock(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number): number;
}

export interface SnappyKernels {
  /**
   * decodeElements' contract (snappy.ts): the elements `src[at, end)` produce exactly `length` bytes at
   * `out[o, o + length)`, copies reaching back to `o` and no further. Returns false for malformed
   * elements instead of throwing (the caller asks the TypeScript decoder for the reason), with `out`
   * then undefined in that range.
   */
  decodeElements(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, length: number): boolean;
  /** compressFragment's contract: `out` has room for snappyMaxCompressedLength(end - start) from `o`. */
  compressFragment(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number): number;
}

function align8(n: number): number {
  return (n + 7) & ~7;
}

/** The module's memory, shared by every kernel of the thread: one view, renewed when the memory grows. */
class KernelHeap {
  private view: Uint8Array;
  readonly base: number;

  constructor(readonly exports: KernelExports) {
    this.base = align8(Number(exports.__heap_base.value));
    this.view = new Uint8Array(exports.memory.buffer);
  }

  /** Makes memory[0, bytes) exist; returns the current view of it. */
  reserve(bytes: number): Uint8Array {
    if (bytes > this.view.length) {
      this.exports.memory.grow(Math.ceil((bytes - this.view.length) / PAGE_BYTES));
      this.view = new Uint8Array(this.exports.memory.buffer);
    }
    return this.view;
  }
}

class WasmLz4Kernels implements Lz4Kernels {
  private readonly exports: KernelExports;
  private readonly heapBase: number;

  constructor(private readonly memory: KernelHeap) {
    this.exports = memory.exports;
    this.heapBase = memory.base;
  }

  private reserve(bytes: number): Uint8Array {
    return this.memory.reserve(bytes);
  }

  decodeBlock(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, outLimit: number, windowStart: number): number {
    const windowBytes = Math.min(o - windowStart, LZ4_WINDOW_BYTES);
    const window = this.heapBase;
    const cursor = window + windowBytes;
    const limit = cursor + (outLimit - o);
    const input = align8(limit + KERNEL_SLACK_BYTES);
    const heap = this.reserve(input + (end - at) + KERNEL_SLACK_BYTES);
    if (windowBytes > 0) heap.set(out.subarray(o - windowBytes, o), window);
    heap.set(src.subarray(at, end), input);
    const result = this.exports.lz4_decode_block(input, end - at, cursor, limit, window);
    if (result < 0) return result;
    out.set(heap.subarray(cursor, result), o);
    return o + (result - cursor);
  }

  compressBlock(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number): number {
    const length = end - start;
    const input = this.heapBase;
    const output = align8(input + length + KERNEL_SLACK_BYTES);
    const heap = this.reserve(output + length + Math.floor(length / 255) + 16 + KERNEL_SLACK_BYTES);
    heap.set(src.subarray(start, end), input);
    const size = this.exports.lz4_compress_block(input, length, output);
    out.set(heap.subarray(output, output + size), o);
    return o + size;
  }
}

class WasmSnappyKernels implements SnappyKernels {
  private readonly exports: KernelExports;

  constructor(private readonly memory: KernelHeap) {
    this.exports = memory.exports;
  }

  decodeElements(src: Uint8Array, at: number, end: number, out: Uint8Array, o: number, length: number): boolean {
    const output = this.memory.base;
    const input = align8(output + length + KERNEL_SLACK_BYTES);
    const heap = this.memory.reserve(input + (end - at) + KERNEL_SLACK_BYTES);
    heap.set(src.subarray(at, end), input);
    if (this.exports.snappy_decode_elements(input, end - at, output, length) < 0) return false;
    out.set(heap.subarray(output, output + length), o);
    return true;
  }

  compressFragment(src: Uint8Array, start: number, end: number, out: Uint8Array, o: number): number {
    const length = end - start;
    const input = this.memory.base;
    const output = align8(input + length + KERNEL_SLACK_BYTES);
    const heap = this.memory.reserve(output + 32 + length + Math.floor(length / 6) + KERNEL_SLACK_BYTES);
    heap.set(src.subarray(start, end), input);
    const size = this.exports.snappy_compress_fragment(input, length, output);
    out.set(heap.subarray(output, output + size), o);
    return o + size;
  }
}

function instantiate(): KernelHeap | null {
  if (typeof WebAssembly === "undefined") return null;
  try {
    const module = new WebAssembly.Module(Buffer.from(KERNELS_WASM_BASE64, "base64"));
    const instance = new WebAssembly.Instance(module, {});
    return new KernelHeap(instance.exports as unknown as KernelExports);
  } catch {
    return null;
  }
}

const heap = instantiate();

/** The kernels of this thread, or null when WebAssembly cannot run them here. */
export const lz4Kernels: Lz4Kernels | null = heap === null ? null : new WasmLz4Kernels(heap);
export const snappyKernels: SnappyKernels | null = heap === null ? null : new WasmSnappyKernels(heap);
