/**
 * The cleaner's key -> latest offset map (Apache's SkimpyOffsetMap): a fixed-size open-addressing table
 * of 128-bit key hashes (MD5, as Apache's) and offsets, 24 bytes per slot, so that its memory is bounded
 * by log.cleaner.dedupe.buffer.size whatever the keys look like. A key is never stored, only its hash:
 * two keys colliding on all 128 bits would make the cleaner drop the older one's latest record, which
 * is no likelier here than in Apache's map.
 *
 * The table starts small and doubles (rehashing) up to the slot count the memory bound allows, so a
 * partition with few keys costs little. `isFull` tells the cleaner to stop mapping at the current batch:
 * the map then covers a prefix of the dirty section, and the next pass continues from there.
 */

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
  /** The same 16 bytes, where MD5 writes. */
  private readonly h8 = new Uint8Array(this.h.buffer);

  /**
   * @param memoryBytes the most the table may use (its share of log.cleaner.dedupe.buffer.size)
   * @param loadFactor log.cleaner.io.buffer.load.factor: the fill at which the table counts as full
   */
  constructor(
    memoryBytes: number,
    private readonly loadFactor: number,
  ) {
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
    Bun.MD5.hash(key, this.h8);
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
    Bun.MD5.hash(key, this.h8);
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
      this.hashes.set(oldHashes.subarray(at, at + 4), slot * 4);
      this.offsets[slot] = offset;
    }
  }
}

