/**
 * Bounded reader over one frame. Every length and count is checked against the bytes that remain, so a
 * hostile frame can neither read past its end nor make us allocate more than its own size. Any violation
 * raises DecodeError and nothing else.
 */
import { DecodeError } from "../errors/errors.ts";

const textDecoder = new TextDecoder();
const hex: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

export interface TaggedField {
  tag: number;
  data: Uint8Array;
}

export class Reader {
  private readonly view: DataView;
  offset: number;
  readonly end: number;

  constructor(readonly buffer: Uint8Array, offset = 0, end = buffer.length) {
    this.view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    this.offset = offset;
    this.end = end;
  }

  get remaining(): number {
    return this.end - this.offset;
  }

  private need(bytes: number): number {
    const at = this.offset;
    if (bytes < 0 || at + bytes > this.end) {
      throw new DecodeError(`need ${bytes} bytes at offset ${at}, frame has ${this.end - at} left`);
    }
    this.offset = at + bytes;
    return at;
  }

  int8(): number {
    return this.view.getInt8(this.need(1));
  }
  int16(): number {
    return this.view.getInt16(this.need(2));
  }
  uint16(): number {
    return this.view.getUint16(this.need(2));
  }
  int32(): number {
    return this.view.getInt32(this.need(4));
  }
  uint32(): number {
    return this.view.getUint32(this.need(4));
  }
  /** int64 as a JS number: exact within ±2^53, which covers every offset, id and timestamp in practice. */
  int64(): number {
    const at = this.need(8);
    return this.view.getInt32(at) * 4294967296 + this.view.getUint32(at + 4);
  }
  float64(): number {
    return this.view.getFloat64(this.need(8));
  }
  bool(): boolean {
    return this.view.getUint8(this.need(1)) !== 0;
  }

  uvarint(): number {
    let result = 0;
    let shift = 0;
    for (let i = 0; i < 5; i++) {
      const b = this.view.getUint8(this.need(1));
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result >>> 0;
      shift += 7;
    }
    throw new DecodeError("unsigned varint longer than 5 bytes");
  }
  varint(): number {
    const raw = this.uvarint();
    return (raw >>> 1) ^ -(raw & 1);
  }
  /** zigzag varlong as a JS number (exact within ±2^53). */
  varlong(): number {
    let result = 0;
    let multiplier = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.view.getUint8(this.need(1));
      result += (b & 0x7f) * multiplier;
      if ((b & 0x80) === 0) {
        // zigzag decode without 32-bit truncation
        return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
      }
      multiplier *= 128;
    }
    throw new DecodeError("varlong longer than 10 bytes");
  }

  uuid(): string {
    const at = this.need(16);
    const b = this.buffer;
    let s = "";
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) s += "-";
      s += hex[b[at + i]!]!;
    }
    return s;
  }

  private utf8(length: number): string {
    const at = this.need(length);
    return textDecoder.decode(this.buffer.subarray(at, at + length));
  }
  string(): string {
    const length = this.int16();
    if (length < 0) throw new DecodeError(`non-nullable string has length ${length}`);
    return this.utf8(length);
  }
  nullableString(): string | null {
    const length = this.int16();
    if (length === -1) return null;
    if (length < 0) throw new DecodeError(`string has length ${length}`);
    return this.utf8(length);
  }
  compactString(): string {
    const length = this.uvarint() - 1;
    if (length < 0) throw new DecodeError("non-nullable compact string is null");
    return this.utf8(length);
  }
  compactNullableString(): string | null {
    const length = this.uvarint() - 1;
    return length < 0 ? null : this.utf8(length);
  }

  /** A view into the frame, not a copy: record sets are stored as received. */
  raw(length: number): Uint8Array {
    const at = this.need(length);
    return this.buffer.subarray(at, at + length);
  }
  bytes(): Uint8Array {
    const length = this.int32();
    if (length < 0) throw new DecodeError(`non-nullable bytes have length ${length}`);
    return this.raw(length);
  }
  nullableBytes(): Uint8Array | null {
    const length = this.int32();
    if (length === -1) return null;
    if (length < 0) throw new DecodeError(`bytes have length ${length}`);
    return this.raw(length);
  }
  compactBytes(): Uint8Array {
    const length = this.uvarint() - 1;
    if (length < 0) throw new DecodeError("non-nullable compact bytes are null");
    return this.raw(length);
  }
  compactNullableBytes(): Uint8Array | null {
    const length = this.uvarint() - 1;
    return length < 0 ? null : this.raw(length);
  }

  /** Array length (int32). Every element takes at least one byte, so a count above what remains is a lie. */
  arrayLength(): number {
    const n = this.int32();
    if (n < 0) throw new DecodeError(`non-nullable array has length ${n}`);
    return this.checkCount(n);
  }
  nullableArrayLength(): number {
    const n = this.int32();
    if (n === -1) return -1;
    if (n < 0) throw new DecodeError(`array has length ${n}`);
    return this.checkCount(n);
  }
  compactArrayLength(): number {
    const n = this.uvarint() - 1;
    if (n < 0) throw new DecodeError("non-nullable compact array is null");
    return this.checkCount(n);
  }
  compactNullableArrayLength(): number {
    const n = this.uvarint() - 1;
    return n < 0 ? -1 : this.checkCount(n);
  }
  private checkCount(n: number): number {
    if (n > this.remaining) {
      throw new DecodeError(`array claims ${n} elements but only ${this.remaining} bytes remain`);
    }
    return n;
  }

  /**
   * Reads a tagged-field section. Known tags are handed to `known`, which returns false for a tag it does
   * not know; those are kept (in order) so that re-encoding preserves them.
   */
  taggedFields(known: (tag: number, reader: Reader, size: number) => boolean): TaggedField[] | undefined {
    const count = this.uvarint();
    if (count > this.remaining) throw new DecodeError(`${count} tagged fields but ${this.remaining} bytes remain`);
    let unknown: TaggedField[] | undefined;
    let previousTag = -1;
    for (let i = 0; i < count; i++) {
      const tag = this.uvarint();
      if (tag <= previousTag) throw new DecodeError(`tagged field ${tag} out of order after ${previousTag}`);
      previousTag = tag;
      const size = this.uvarint();
      const start = this.need(size);
      const sub = new Reader(this.buffer, start, start + size);
      if (known(tag, sub, size)) {
        if (sub.offset !== sub.end) throw new DecodeError(`tagged field ${tag} has ${sub.end - sub.offset} trailing bytes`);
      } else {
        (unknown ??= []).push({ tag, data: this.buffer.subarray(start, start + size) });
      }
    }
    return unknown;
  }
}
