/**
 * Growable big-endian writer. Encoders write straight into one buffer; `finish()` returns a view of the
 * bytes written, without copying.
 *
 * Gathering (`gatherBytesMin`): raw byte runs at least that long are not copied but remembered where they
 * fall in the output (protocol/gathered-frame.ts); `pieces()` then returns the output as the buffer's
 * stretches between them and the runs themselves. `offset` and `patchInt32` address the buffer only, which
 * holds everything but the gathered runs; `length` is the whole output.
 */
import type { TaggedField } from "./reader.ts";

const textEncoder = new TextEncoder();

export function utf8Length(s: string): number {
  // Fast path for ASCII, which is nearly every topic name, client id and group id.
  let ascii = true;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  return ascii ? s.length : textEncoder.encode(s).length;
}

export function uvarintSize(value: number): number {
  let v = value >>> 0;
  let size = 1;
  while (v >= 0x80) {
    v >>>= 7;
    size++;
  }
  return size;
}

/** A byte run left where it is: it belongs in the output at buffer offset `at`. */
interface GatheredRun {
  readonly at: number;
  readonly bytes: Uint8Array;
}

export class Writer {
  private buffer: Uint8Array;
  private view: DataView;
  offset = 0;
  private readonly gatherBytesMin: number;
  private readonly gathered: GatheredRun[] = [];
  private gatheredBytes = 0;

  /**
   * @param initial a capacity, or a buffer to write into from its start (it is replaced if it fills up)
   * @param gatherBytesMin raw runs of at least this many bytes are gathered, not copied (see above);
   *   absent: everything is copied
   */
  constructor(initial: number | Uint8Array = 256, gatherBytesMin = Infinity) {
    this.buffer = typeof initial === "number" ? new Uint8Array(initial) : initial;
    this.view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength);
    this.gatherBytesMin = gatherBytesMin;
  }

  /** The whole output's length: the buffer's bytes and the gathered runs. */
  get length(): number {
    return this.offset + this.gatheredBytes;
  }

  /** True when some runs were gathered: the output is then `pieces()`, not `finish()`. */
  get hasGathered(): boolean {
    return this.gathered.length > 0;
  }

  /**
   * The output in order as views: the buffer's stretches and the gathered runs, none empty. The views are
   * the writer's buffer and the callers' runs, not copies.
   */
  pieces(): Uint8Array[] {
    const out: Uint8Array[] = [];
    let from = 0;
    for (const run of this.gathered) {
      if (run.at > from) out.push(this.buffer.subarray(from, run.at));
      out.push(run.bytes);
      from = run.at;
    }
    if (this.offset > from) out.push(this.buffer.subarray(from, this.offset));
    return out;
  }

  /** The buffer written into now (the one given, unless it filled up). */
  get currentBuffer(): Uint8Array {
    return this.buffer;
  }

  private ensure(bytes: number): number {
    const at = this.offset;
    const needed = at + bytes;
    if (needed > this.buffer.length) {
      let capacity = this.buffer.length * 2;
      while (capacity < needed) capacity *= 2;
      const next = new Uint8Array(capacity);
      next.set(this.buffer.subarray(0, at));
      this.buffer = next;
      this.view = new DataView(next.buffer);
    }
    this.offset = needed;
    return at;
  }

  /** The output as one view. A writer that gathered runs has no such view: use `pieces()`. */
  finish(): Uint8Array {
    if (this.gathered.length > 0) throw new Error("Writer.finish() on a writer that gathered runs: use pieces()");
    return this.buffer.subarray(0, this.offset);
  }

  /** Overwrites an int32 written earlier (frame sizes, batch lengths). */
  patchInt32(at: number, value: number): void {
    this.view.setInt32(at, value);
  }

  int8(v: number): void {
    const at = this.ensure(1);
    this.view.setInt8(at, v);
  }
  int16(v: number): void {
    const at = this.ensure(2);
    this.view.setInt16(at, v);
  }
  uint16(v: number): void {
    const at = this.ensure(2);
    this.view.setUint16(at, v);
  }
  int32(v: number): void {
    const at = this.ensure(4);
    this.view.setInt32(at, v);
  }
  uint32(v: number): void {
    const at = this.ensure(4);
    this.view.setUint32(at, v);
  }
  int64(v: number): void {
    const at = this.ensure(8);
    const high = Math.floor(v / 4294967296);
    this.view.setInt32(at, high);
    this.view.setUint32(at + 4, v - high * 4294967296);
  }
  float64(v: number): void {
    const at = this.ensure(8);
    this.view.setFloat64(at, v);
  }
  bool(v: boolean): void {
    const at = this.ensure(1);
    this.buffer[at] = v ? 1 : 0;
  }
  uvarint(value: number): void {
    let v = value >>> 0;
    while (v >= 0x80) {
      const at = this.ensure(1);
      this.buffer[at] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    const at = this.ensure(1);
    this.buffer[at] = v;
  }
  varint(v: number): void {
    this.uvarint((v << 1) ^ (v >> 31));
  }
  varlong(v: number): void {
    // zigzag in float arithmetic so values beyond 32 bits survive
    let z = v >= 0 ? v * 2 : -v * 2 - 1;
    while (z >= 0x80) {
      const at = this.ensure(1);
      this.buffer[at] = (z % 128) | 0x80;
      z = Math.floor(z / 128);
    }
    const last = this.ensure(1);
    this.buffer[last] = z;
  }
  uuid(v: string): void {
    const at = this.ensure(16);
    const digits = v.replaceAll("-", "");
    for (let i = 0; i < 16; i++) this.buffer[at + i] = parseInt(digits.substr(i * 2, 2), 16) || 0;
  }
  raw(bytes: Uint8Array): void {
    if (bytes.length >= this.gatherBytesMin) {
      this.gathered.push({ at: this.offset, bytes });
      this.gatheredBytes += bytes.length;
      return;
    }
    const at = this.ensure(bytes.length);
    this.buffer.set(bytes, at);
  }
  private utf8(s: string): void {
    const length = utf8Length(s);
    const at = this.ensure(length);
    if (length === s.length) {
      for (let i = 0; i < length; i++) this.buffer[at + i] = s.charCodeAt(i);
    } else {
      textEncoder.encodeInto(s, this.buffer.subarray(at, at + length));
    }
  }
  string(s: string): void {
    this.int16(utf8Length(s));
    this.utf8(s);
  }
  nullableString(s: string | null): void {
    if (s === null) this.int16(-1);
    else this.string(s);
  }
  compactString(s: string): void {
    this.uvarint(utf8Length(s) + 1);
    this.utf8(s);
  }
  compactNullableString(s: string | null): void {
    if (s === null) this.uvarint(0);
    else this.compactString(s);
  }
  bytes(b: Uint8Array): void {
    this.int32(b.length);
    this.raw(b);
  }
  nullableBytes(b: Uint8Array | null): void {
    if (b === null) this.int32(-1);
    else this.bytes(b);
  }
  compactBytes(b: Uint8Array): void {
    this.uvarint(b.length + 1);
    this.raw(b);
  }
  compactNullableBytes(b: Uint8Array | null): void {
    if (b === null) this.uvarint(0);
    else this.compactBytes(b);
  }

  /** Writes one tagged field whose body is produced by `body` into a scratch writer. */
  taggedField(tag: number, body: (w: Writer) => void): void {
    const scratch = new Writer(32);
    body(scratch);
    const data = scratch.finish();
    this.uvarint(tag);
    this.uvarint(data.length);
    this.raw(data);
  }

  unknownTaggedField(field: TaggedField): void {
    this.uvarint(field.tag);
    this.uvarint(field.data.length);
    this.raw(field.data);
  }
}
