/**
 * The cleaner's key -> latest offset map (Apache's SkimpyOffsetMap): a fixed-size open-addressing table
 * of 128-bit key hashes and offsets, 24 bytes per slot, so that its memory is bounded by
 * log.cleaner.dedupe.buffer.size whatever the keys look like. A key is never stored, only its hash
 * (key-hash.ts, which says why it is not Apache's MD5): two keys colliding on all 128 bits would make the
 * cleaner drop the older one's latest record, which is no likelier here than in Apache's map. Keys are
 * given as a range of a byte array (the decompressed records section the cleaner walks).
 *
 * The table starts small and doubles (rehashing) up to the slot count the memory bound allows, so a
 * partition with few keys costs little. `isFull` tells the cleaner to stop mapping at the current batch:
 * the map then covers a prefix of the dirty section, and the next pass continues from there.
 */

import { murmur3x86_128 } from "./key-hash.ts";

export const OFFSET_MAP_BYTES_PER_SLOT = 24;
const INITIAL_SLOTS = 1024;
const EMPTY = -1;

export class OffsetMap {
  private slots: number;
  private hashes: Uint32Array;
  private offsets: Float64Array;
  private used = 0;
  private readonly maxSlots: number;
  /** The largest offset put since the last clear (-1 when none). */
  latestOffset = -1;
  private readonly h = new Uint32Array(4);
  private readonly seed: number;

  /**
   * @param memoryBytes the most the table may use (its share of log.cleaner.dedupe.buffer.size)
   * @param loadFactor log.cleaner.io.buffer.load.factor: the fill at which the table counts as full
   * @param seed the key hash's seed (drawn at random when not given)
   */
  constructor(
    memoryBytes: number,
    private readonly loadFactor: number,
    seed?: number,
  ) {
    this.seed = seed ?? crypto.getRandomValues(new Uint32Array(1))[0]!;
    if (!(loadFactor > 0 && loadFactor <= 1)) throw new RangeError(`load factor must be in (0, 1], got ${loadFactor}`);
    let max = INITIAL_SLOTS;
    while (max * 2 * OFFSET_MAP_BYTES_PER_SLOT <= memoryBytes) max *= 2;
    this.maxSlots = max;
    this.slots = Math.min(INITIAL_SLOTS, max);
    this.hashes = new Uint32Array(this.slots * 4);
    this.offsets = new Float64Array(this.slots).fill(EMPTY);
  }

  get size(): number {
    return this.used;
  }

  /** Entries the table can hold at its largest before it counts as full. */
  get capacity(): number {
    return Math.floor(this.maxSlots * this.loadFactor);
  }

  /** No more keys may be added (putting a key already present is still fine, but the caller stops). */
  get isFull(): boolean {
    return this.used >= this.capacity;
  }

  /** Bytes the table holds now. */
  get memoryBytes(): number {
    return this.slots * OFFSET_MAP_BYTES_PER_SLOT;
  }

  clear(): void {
    this.used = 0;
    this.latestOffset = -1;
    this.slots = Math.min(INITIAL_SLOTS, this.maxSlots);
    this.hashes = new Uint32Array(this.slots * 4);
    this.offsets = new Float64Array(this.slots).fill(EMPTY);
  }

  /** Records `offset` as the latest for `key` (later puts win; offsets arrive in increasing order). */
  put(key: Uint8Array, offset: number): void {
    this.putKey(key, 0, key.length, offset);
  }

  /** put() for the key bytes[start, start + length). */
  putKey(bytes: Uint8Array, start: number, length: number, offset: number): void {
    murmur3x86_128(bytes, start, length, this.seed, this.h);
    if ((this.used + 1) > this.slots * this.loadFactor && this.slots < this.maxSlots) this.grow();
    const slot = this.find(this.h[0]!, this.h[1]!, this.h[2]!, this.h[3]!);
    if (this.offsets[slot] === EMPTY) {
      if (this.used >= this.capacity) throw new RangeError("offset map is full");
      this.used++;
      const at = slot * 4;
      this.hashes[at] = this.h[0]!;
      this.hashes[at + 1] = this.h[1]!;
      this.hashes[at + 2] = this.h[2]!;
      this.hashes[at + 3] = this.h[3]!;
    }
    this.offsets[slot] = offset;
    if (offset > this.latestOffset) this.latestOffset = offset;
  }

  /** The latest offset put for `key`, or -1. */
  get(key: Uint8Array): number {
    return this.getKey(key, 0, key.length);
  }

  /** get() for the key bytes[start, start + length). */
  getKey(bytes: Uint8Array, start: number, length: number): number {
    murmur3x86_128(bytes, start, length, this.seed, this.h);
    return this.offsets[this.find(this.h[0]!, this.h[1]!, this.h[2]!, this.h[3]!)]!;
  }

  /** Raises latestOffset without a key (a batch whose records all lacked keys or were skipped). */
  updateLatestOffset(offset: number): void {
    if (offset > this.latestOffset) this.latestOffset = offset;
  }

  /** The slot holding the hash, or the empty slot where it would go (linear probing). */
  private find(a: number, b: number, c: number, d: number): number {
    const mask = this.slots - 1;
    let slot = (a ^ c) & mask;
    for (;;) {
      if (this.offsets[slot] === EMPTY) return slot;
      const at = slot * 4;
      if (this.hashes[at] === a && this.hashes[at + 1] === b && this.hashes[at + 2] === c && this.hashes[at + 3] === d) return slot;
      slot = (slot + 1) & mask;
    }
  }

  private grow(): void {
    const oldHashes = this.hashes;
    const oldOffsets = this.offsets;
    const oldSlots = this.slots;
    this.slots = oldSlots * 2;
    this.hashes = new Uint32Array(this.slots * 4);
    this.offsets = new Float64Array(this.slots).fill(EMPTY);
    for (let i = 0; i < oldSlots; i++) {
      const offset = oldOffsets[i]!;
      if (offset === EMPTY) continue;
      const at = i * 4;
      const slot = this.find(oldHashes[at]!, oldHashes[at + 1]!, oldHashes[at + 2]!, oldHashes[at + 3]!);
      const to = slot * 4;
      this.hashes[to] = oldHashes[at]!;
      this.hashes[to + 1] = oldHashes[at + 1]!;
      this.hashes[to + 2] = oldHashes[at + 2]!;
      this.hashes[to + 3] = oldHashes[at + 3]!;
      this.offsets[slot] = offset;
    }
  }
}

