/**
 * The two sparse indexes of a segment, held in memory as flat typed arrays and written to disk as
 * big-endian fixed-size entries (no header): they are caches derived from the log, rebuilt whenever they
 * are missing or fail their structural checks, so they carry no version or checksum of their own.
 *
 * - Offset index (`.index`, 8 bytes an entry): relative offset int32 -> file position int32 of the batch
 *   whose *base* offset that is. An entry is added about every index.interval.bytes, so a lookup lands at
 *   most one interval (plus one batch) before the batch it looks for.
 * - Time index (`.timeindex`, 12 bytes an entry): timestamp int64 -> relative offset int32. Entry (T, O)
 *   says: the segment's max timestamp first reached T in the batch based at O, so every batch before O
 *   has a max timestamp below T. Timestamps and offsets strictly increase. The last entry of an inactive
 *   segment is its max timestamp (written when the segment is rolled or the log is closed).
 */

export const OFFSET_INDEX_ENTRY_BYTES = 8;
export const TIME_INDEX_ENTRY_BYTES = 12;
const INITIAL_ENTRIES = 16;

export class OffsetIndex {
  /** [relOffset0, position0, relOffset1, position1, ...] */
  private data: Int32Array;
  private length = 0;

  constructor(capacityEntries = INITIAL_ENTRIES) {
    this.data = new Int32Array(Math.max(2, capacityEntries * 2));
  }

  get entries(): number {
    return this.length;
  }
  relOffsetAt(i: number): number {
    return this.data[i * 2]!;
  }
  positionAt(i: number): number {
    return this.data[i * 2 + 1]!;
  }
  get lastPosition(): number {
    return this.length === 0 ? 0 : this.positionAt(this.length - 1);
  }

  append(relOffset: number, position: number): void {
    if (this.length > 0 && (relOffset <= this.relOffsetAt(this.length - 1) || position <= this.positionAt(this.length - 1))) {
      throw new RangeError(`offset index entry (${relOffset}, ${position}) does not follow the last one`);
    }
    if ((this.length + 1) * 2 > this.data.length) {
      const grown = new Int32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length * 2] = relOffset;
    this.data[this.length * 2 + 1] = position;
    this.length++;
  }

  /** The last entry whose relative offset is <= `relOffset`, or -1 when every entry is above it. */
  floor(relOffset: number): number {
    return floorEntry(this.length, (i) => this.relOffsetAt(i), relOffset);
  }

  encode(): Uint8Array {
    const bytes = new Uint8Array(this.length * OFFSET_INDEX_ENTRY_BYTES);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < this.length; i++) {
      view.setInt32(i * 8, this.relOffsetAt(i));
      view.setInt32(i * 8 + 4, this.positionAt(i));
    }
    return bytes;
  }

  /**
   * Decodes an index file and checks it against the segment it belongs to: whole entries, strictly
   * increasing offsets and positions, offsets inside the segment's range and positions inside its file.
   * Returns the reason when the file is not a sound index (the caller rebuilds it from the log).
   */
  static decode(bytes: Uint8Array, segmentBytes: number, offsetSpan: number): OffsetIndex | string {
    if (bytes.length % OFFSET_INDEX_ENTRY_BYTES !== 0) {
      return `size ${bytes.length} is not a multiple of ${OFFSET_INDEX_ENTRY_BYTES}`;
    }
    const count = bytes.length / OFFSET_INDEX_ENTRY_BYTES;
    const index = new OffsetIndex(count);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let previousOffset = -1;
    let previousPosition = -1;
    for (let i = 0; i < count; i++) {
      const relOffset = view.getInt32(i * 8);
      const position = view.getInt32(i * 8 + 4);
      if (relOffset <= previousOffset || relOffset >= offsetSpan) return `entry ${i} has relative offset ${relOffset} out of order or range`;
      if (position <= previousPosition || position >= segmentBytes) return `entry ${i} has position ${position} out of order or range`;
      index.data[i * 2] = relOffset;
      index.data[i * 2 + 1] = position;
      previousOffset = relOffset;
      previousPosition = position;
    }
    index.length = count;
    return index;
  }
}

export class TimeIndex {
  /** [timestamp0, relOffset0, timestamp1, relOffset1, ...]; float64 holds both exactly. */
  private data: Float64Array;
  private length = 0;

  constructor(capacityEntries = INITIAL_ENTRIES) {
    this.data = new Float64Array(Math.max(2, capacityEntries * 2));
  }

  get entries(): number {
    return this.length;
  }
  timestampAt(i: number): number {
    return this.data[i * 2]!;
  }
  relOffsetAt(i: number): number {
    return this.data[i * 2 + 1]!;
  }
  /** -1 (no timestamp) when empty. */
  get lastTimestamp(): number {
    return this.length === 0 ? -1 : this.timestampAt(this.length - 1);
  }

  /** Appends (timestamp, relOffset) only when the timestamp is above the last one's. */
  maybeAppend(timestampMs: number, relOffset: number): void {
    if (timestampMs <= this.lastTimestamp) return;
    if (this.length > 0 && relOffset <= this.relOffsetAt(this.length - 1)) {
      throw new RangeError(`time index entry (${timestampMs}, ${relOffset}) does not follow the last one`);
    }
    if ((this.length + 1) * 2 > this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length * 2] = timestampMs;
    this.data[this.length * 2 + 1] = relOffset;
    this.length++;
  }

  /** The last entry whose timestamp is <= `timestampMs`, or -1. */
  floor(timestampMs: number): number {
    return floorEntry(this.length, (i) => this.timestampAt(i), timestampMs);
  }

  encode(): Uint8Array {
    const bytes = new Uint8Array(this.length * TIME_INDEX_ENTRY_BYTES);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < this.length; i++) {
      const ts = this.timestampAt(i);
      const high = Math.floor(ts / 4294967296);
      view.setInt32(i * 12, high);
      view.setUint32(i * 12 + 4, ts - high * 4294967296);
      view.setInt32(i * 12 + 8, this.relOffsetAt(i));
    }
    return bytes;
  }

  /** Like OffsetIndex.decode: the reason when the file is not a sound time index. */
  static decode(bytes: Uint8Array, offsetSpan: number): TimeIndex | string {
    if (bytes.length % TIME_INDEX_ENTRY_BYTES !== 0) return `size ${bytes.length} is not a multiple of ${TIME_INDEX_ENTRY_BYTES}`;
    const count = bytes.length / TIME_INDEX_ENTRY_BYTES;
    const index = new TimeIndex(count);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let previousTimestamp = -1;
    let previousOffset = -1;
    for (let i = 0; i < count; i++) {
      const timestampMs = view.getInt32(i * 12) * 4294967296 + view.getUint32(i * 12 + 4);
      const relOffset = view.getInt32(i * 12 + 8);
      if (timestampMs <= previousTimestamp) return `entry ${i} has timestamp ${timestampMs} out of order`;
      if (relOffset <= previousOffset || relOffset >= offsetSpan) return `entry ${i} has relative offset ${relOffset} out of order or range`;
      index.data[i * 2] = timestampMs;
      index.data[i * 2 + 1] = relOffset;
      previousTimestamp = timestampMs;
      previousOffset = relOffset;
    }
    index.length = count;
    return index;
  }
}

/** Binary search over ascending keys: the last entry in [0, length) whose key is <= `key`, or -1. */
function floorEntry(length: number, keyAt: (i: number) => number, key: number): number {
  let lo = 0;
  let hi = length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (keyAt(mid) <= key) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}
