/**
 * The byte ranges of one segment file whose batches this process has checked (framing, offsets, CRC-32C)
 * since it opened the segment: what it appended (every produced batch's CRC is checked before the append,
 * and the batches the broker builds itself are computed here), what recovery scanned, what a read already
 * checked. A read checks the CRC of the batches outside these ranges only, so a consumer reading what was
 * just produced costs no CRC pass, while damage that recovery trusted past (a segment below the recovery
 * point) is still caught by the first read that reaches it (docs/operations.md, "Damaged data").
 *
 * What this lets through: bytes that change on disk after they were checked (another process writing into
 * the file, the device returning other bytes once the page cache let them go). The background scrubber
 * re-reads everything at its rate, and a finding of it forgets the segment's ranges, so that reads check
 * it again from then on.
 *
 * Disjoint, sorted, merged when they touch. Reads are mostly sequential, so there are few ranges; random
 * reads could split them without end, so past RANGES_MAX the new range is not remembered (it is checked
 * again next time: correct, only slower).
 */
const RANGES_MAX = 64;

export class VerifiedRanges {
  /** [start0, end0, start1, end1, ...], starts increasing, no two ranges touching. */
  private bounds: number[] = [];

  /** Whether [start, end) lies inside one checked range. */
  covers(start: number, end: number): boolean {
    const b = this.bounds;
    // The last range whose start is <= start (binary search over the starts).
    let lo = 0;
    let hi = b.length / 2 - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (b[2 * mid]! <= start) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found >= 0 && end <= b[2 * found + 1]!;
  }

  /** Records [start, end) as checked, merging it with the ranges it touches or overlaps. */
  add(start: number, end: number): void {
    if (!(end > start)) return;
    const b = this.bounds;
    const merged: number[] = [];
    let s = start;
    let e = end;
    let placed = false;
    for (let i = 0; i < b.length; i += 2) {
      const rs = b[i]!;
      const re = b[i + 1]!;
      if (re < s) merged.push(rs, re);
      else if (rs > e) {
        if (!placed) {
          merged.push(s, e);
          placed = true;
        }
        merged.push(rs, re);
      } else {
        s = Math.min(s, rs);
        e = Math.max(e, re);
      }
    }
    if (!placed) merged.push(s, e);
    if (merged.length / 2 > RANGES_MAX) return;
    this.bounds = merged;
  }

  /** Forgets every range: the next reads check everything again. */
  clear(): void {
    this.bounds = [];
  }

  /** The number of ranges (for tests). */
  get size(): number {
    return this.bounds.length / 2;
  }
}
