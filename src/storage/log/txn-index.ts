/**
 * The transaction bookkeeping of a partition log: the aborted-transaction index (`<baseOffset>.txnindex`
 * per segment, and its in-memory form that read_committed fetches consult) and the set of ongoing
 * transactions that pins the last stable offset.
 *
 * `.txnindex` file, one entry per aborted transaction whose abort marker is in that segment, in marker
 * order (so lastOffset strictly increases), 38 bytes each, big-endian:
 *
 *   int16 version (1) | int64 producerId | int64 firstOffset | int64 lastOffset | int64 lastStableOffset
 *   | uint32 crc32c of the 34 bytes before it
 *
 * Apache's entry (version 0, 34 bytes) plus a checksum per entry, so that a torn or damaged file is
 * detected rather than trusted. firstOffset is the offset of the transaction's first batch in this
 * partition, lastOffset that of its abort marker, lastStableOffset the partition's LSO once the
 * transaction completed (the first offset of the earliest other ongoing transaction, else lastOffset + 1).
 * The files are appended to as abort markers are written (each entry fsynced before the marker is
 * acknowledged), created empty with their segment, and rebuilt from the log (control batches plus the
 * producer state they need) when missing or corrupt. Like the offset and time indexes they are derived
 * data, so a damaged file is rebuilt, never refused.
 *
 * Fetch lookups cost what Apache's do: a binary search to the first entry whose marker is at or after the
 * fetch offset, then a walk that stops at the first entry whose lastStableOffset reaches the end of the
 * fetched range. No transaction that started before that LSO can still follow in the index (it had
 * completed by then), and every later one starts at or after it; so the walk touches the overlapping
 * entries and the few transactions that completed while they were open, never the whole index.
 */
import { crc32c } from "../../protocol/records/crc32c.ts";

export interface AbortedTxn {
  readonly producerId: number;
  /** Offset of the transaction's first batch in the partition. */
  readonly firstOffset: number;
  /** Offset of its abort marker. */
  readonly lastOffset: number;
  /** The partition's last stable offset once the transaction completed. */
  readonly lastStableOffset: number;
}

export const TXN_INDEX_VERSION = 1;
export const TXN_INDEX_ENTRY_BYTES = 38;
const CRC_AT = 34;

// ---- file format --------------------------------------------------------------------------------

export function encodeTxnIndexEntries(entries: readonly AbortedTxn[]): Uint8Array {
  const bytes = new Uint8Array(entries.length * TXN_INDEX_ENTRY_BYTES);
  const view = new DataView(bytes.buffer);
  entries.forEach((entry, i) => {
    const at = i * TXN_INDEX_ENTRY_BYTES;
    view.setInt16(at, TXN_INDEX_VERSION);
    view.setBigInt64(at + 2, BigInt(entry.producerId));
    view.setBigInt64(at + 10, BigInt(entry.firstOffset));
    view.setBigInt64(at + 18, BigInt(entry.lastOffset));
    view.setBigInt64(at + 26, BigInt(entry.lastStableOffset));
    view.setUint32(at + CRC_AT, crc32c(bytes, at, at + CRC_AT));
  });
  return bytes;
}

export type TxnIndexDecoded =
  | { readonly kind: "ok"; readonly entries: AbortedTxn[] }
  /**
   * The last entry is cut short or fails its checks: what an append interrupted by a crash leaves (the
   * entries are appended and fsynced one at a time, so only the last can be torn). `entries` is the sound
   * prefix.
   */
  | { readonly kind: "torn"; readonly entries: AbortedTxn[]; readonly reason: string }
  /** Damage before the last entry, or entries that cannot belong to the segment. */
  | { readonly kind: "corrupt"; readonly reason: string };

/**
 * Decodes a segment's `.txnindex` and checks every entry against the segment's offsets
 * [baseOffset, endOffset): version, checksum, lastOffset inside the segment and strictly increasing,
 * 0 <= firstOffset <= lastOffset, 0 <= lastStableOffset <= lastOffset + 1, producer id >= 0.
 */
export function decodeTxnIndex(bytes: Uint8Array, baseOffset: number, endOffset: number): TxnIndexDecoded {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const entries: AbortedTxn[] = [];
  let previousLast = -1;
  for (let at = 0; at < bytes.length; at += TXN_INDEX_ENTRY_BYTES) {
    const isLast = at + TXN_INDEX_ENTRY_BYTES >= bytes.length;
    const problem = entryProblem(bytes, view, at, baseOffset, endOffset, previousLast);
    if (typeof problem === "string") {
      const reason = `entry ${at / TXN_INDEX_ENTRY_BYTES}: ${problem}`;
      return isLast ? { kind: "torn", entries, reason } : { kind: "corrupt", reason };
    }
    entries.push(problem);
    previousLast = problem.lastOffset;
  }
  return { kind: "ok", entries };
}

function entryProblem(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  baseOffset: number,
  endOffset: number,
  previousLast: number,
): AbortedTxn | string {
  if (at + TXN_INDEX_ENTRY_BYTES > bytes.length) return `cut short (${bytes.length - at} of ${TXN_INDEX_ENTRY_BYTES} bytes)`;
  const version = view.getInt16(at);
  if (version !== TXN_INDEX_VERSION) return `version ${version}`;
  const stored = view.getUint32(at + CRC_AT);
  const computed = crc32c(bytes, at, at + CRC_AT);
  if (stored !== computed) return `checksum mismatch (stored ${stored}, computed ${computed})`;
  const producerId = Number(view.getBigInt64(at + 2));
  const firstOffset = Number(view.getBigInt64(at + 10));
  const lastOffset = Number(view.getBigInt64(at + 18));
  const lastStableOffset = Number(view.getBigInt64(at + 26));
  if (!Number.isSafeInteger(producerId) || producerId < 0) return `invalid producer id ${producerId}`;
  if (!Number.isSafeInteger(lastOffset) || lastOffset < baseOffset || lastOffset >= endOffset) {
    return `marker offset ${lastOffset} outside the segment [${baseOffset}, ${endOffset})`;
  }
  if (lastOffset <= previousLast) return `marker offset ${lastOffset} does not follow ${previousLast}`;
  if (!Number.isSafeInteger(firstOffset) || firstOffset < 0 || firstOffset > lastOffset) return `first offset ${firstOffset} after its marker ${lastOffset}`;
  if (!Number.isSafeInteger(lastStableOffset) || lastStableOffset < 0 || lastStableOffset > lastOffset + 1) {
    return `last stable offset ${lastStableOffset} beyond its marker ${lastOffset}`;
  }
  return { producerId, firstOffset, lastOffset, lastStableOffset };
}

// ---- in memory ----------------------------------------------------------------------------------

const INITIAL_CAPACITY = 16;

/**
 * Every aborted transaction of a partition, in marker order, held as four float64 columns (32 bytes an
 * entry). Appended as abort markers are written (and loaded at open); the front is dropped once the log
 * start passes it.
 */
export class AbortedTxnIndex {
  private producerIds = new Float64Array(INITIAL_CAPACITY);
  private firstOffsets = new Float64Array(INITIAL_CAPACITY);
  private lastOffsets = new Float64Array(INITIAL_CAPACITY);
  private lastStableOffsets = new Float64Array(INITIAL_CAPACITY);
  private head = 0;
  private tail = 0;

  get size(): number {
    return this.tail - this.head;
  }

  /** The entries, oldest marker first (for tests and introspection). */
  entries(): AbortedTxn[] {
    const out: AbortedTxn[] = [];
    for (let i = this.head; i < this.tail; i++) out.push(this.at(i));
    return out;
  }

  append(entry: AbortedTxn): void {
    if (this.tail > this.head && entry.lastOffset <= this.lastOffsets[this.tail - 1]!) {
      throw new RangeError(`aborted transaction marker ${entry.lastOffset} does not follow ${this.lastOffsets[this.tail - 1]}`);
    }
    if (this.tail === this.producerIds.length) this.grow();
    const i = this.tail++;
    this.producerIds[i] = entry.producerId;
    this.firstOffsets[i] = entry.firstOffset;
    this.lastOffsets[i] = entry.lastOffset;
    this.lastStableOffsets[i] = entry.lastStableOffset;
  }

  /**
   * Replaces the entries whose marker is in [fromOffset, toOffset) with `entries` (sorted by marker, all
   * inside that range): the log cleaner rewrote the segments holding those markers.
   */
  replaceRange(fromOffset: number, toOffset: number, entries: readonly AbortedTxn[]): void {
    const all = this.entries();
    const before = all.filter((e) => e.lastOffset < fromOffset);
    const after = all.filter((e) => e.lastOffset >= toOffset);
    for (const entry of entries) {
      if (entry.lastOffset < fromOffset || entry.lastOffset >= toOffset) {
        throw new RangeError(`aborted transaction marker ${entry.lastOffset} is outside [${fromOffset}, ${toOffset})`);
      }
    }
    this.head = this.tail = 0;
    for (const entry of [...before, ...entries, ...after]) this.append(entry);
  }

  /** Forgets the transactions whose marker is below `offset` (the log start moved past them). */
  dropBefore(offset: number): number {
    const before = this.size;
    while (this.head < this.tail && this.lastOffsets[this.head]! < offset) this.head++;
    if (this.head === this.tail) this.head = this.tail = 0;
    return before - this.size;
  }

  /**
   * The aborted transactions that overlap the fetched range [fetchOffset, upperBoundOffset): marker at
   * or after the fetch offset and first batch before the end of the fetched data; sorted by first offset.
   */
  collect(fetchOffset: number, upperBoundOffset: number): AbortedTxn[] {
    const out: AbortedTxn[] = [];
    for (let i = this.lowerBound(fetchOffset); i < this.tail; i++) {
      if (this.firstOffsets[i]! < upperBoundOffset) out.push(this.at(i));
      if (this.lastStableOffsets[i]! >= upperBoundOffset) break;
    }
    if (out.length > 1) out.sort((a, b) => a.firstOffset - b.firstOffset);
    return out;
  }

  /** The first entry whose marker is at or after `offset`. */
  private lowerBound(offset: number): number {
    let lo = this.head;
    let hi = this.tail;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.lastOffsets[mid]! < offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private at(i: number): AbortedTxn {
    return {
      producerId: this.producerIds[i]!,
      firstOffset: this.firstOffsets[i]!,
      lastOffset: this.lastOffsets[i]!,
      lastStableOffset: this.lastStableOffsets[i]!,
    };
  }

  private grow(): void {
    const live = this.tail - this.head;
    // Compact in place when at least half of the columns is dropped entries; double otherwise.
    const capacity = live * 2 <= this.producerIds.length ? this.producerIds.length : this.producerIds.length * 2;
    const move = (column: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
      if (capacity === column.length) {
        column.copyWithin(0, this.head, this.tail);
        return column;
      }
      const next = new Float64Array(capacity);
      next.set(column.subarray(this.head, this.tail));
      return next;
    };
    this.producerIds = move(this.producerIds);
    this.firstOffsets = move(this.firstOffsets);
    this.lastOffsets = move(this.lastOffsets);
    this.lastStableOffsets = move(this.lastStableOffsets);
    this.head = 0;
    this.tail = live;
  }
}

/**
 * The transactions open in a partition: producer id -> offset of the transaction's first batch. A
 * transaction opens at the log end offset, so opening order is offset order, and a Map (which iterates
 * in insertion order) keeps them sorted by first offset without any sorting: the earliest is the first
 * entry. Restoring from a snapshot inserts the open transactions sorted.
 */
export class OngoingTxns {
  private readonly byProducer = new Map<number, number>();
  private lastOpenedOffset = -1;

  get size(): number {
    return this.byProducer.size;
  }

  has(producerId: number): boolean {
    return this.byProducer.has(producerId);
  }

  firstOffsetOf(producerId: number): number | undefined {
    return this.byProducer.get(producerId);
  }

  /** Opens a transaction; offsets must not decrease from one call to the next. */
  open(producerId: number, firstOffset: number): void {
    if (this.byProducer.has(producerId)) throw new RangeError(`producer ${producerId} already has an open transaction`);
    if (firstOffset < this.lastOpenedOffset) {
      throw new RangeError(`transaction of producer ${producerId} opens at ${firstOffset}, before ${this.lastOpenedOffset}`);
    }
    this.lastOpenedOffset = firstOffset;
    this.byProducer.set(producerId, firstOffset);
  }

  close(producerId: number): boolean {
    return this.byProducer.delete(producerId);
  }

  /** First offset of the earliest open transaction, or undefined when none is open. */
  earliestFirstOffset(): number | undefined {
    for (const offset of this.byProducer.values()) return offset;
    return undefined;
  }

  /** Every open transaction: [producerId, firstOffset], earliest first. */
  entries(): [number, number][] {
    return [...this.byProducer];
  }
}
