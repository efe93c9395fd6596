import { describe, expect, test } from "bun:test";
import { VerifiedRanges } from "../../../../src/storage/log/verified-ranges.ts";

describe("verified ranges", () => {
  test("empty covers nothing", () => {
    const r = new VerifiedRanges();
    expect(r.covers(0, 1)).toBe(false);
    expect(r.covers(0, 0)).toBe(false);
  });

  test("a range covers what is inside it, not what runs past either end", () => {
    const r = new VerifiedRanges();
    r.add(100, 200);
    expect(r.covers(100, 200)).toBe(true);
    expect(r.covers(150, 160)).toBe(true);
    expect(r.covers(99, 150)).toBe(false);
    expect(r.covers(150, 201)).toBe(false);
    expect(r.covers(0, 50)).toBe(false);
    expect(r.covers(300, 400)).toBe(false);
  });

  test("touching and overlapping ranges merge; a gap keeps them apart, and a span over the gap is not covered", () => {
    const r = new VerifiedRanges();
    r.add(0, 100);
    r.add(100, 200);
    expect(r.size).toBe(1);
    expect(r.covers(0, 200)).toBe(true);
    r.add(300, 400);
    expect(r.size).toBe(2);
    expect(r.covers(150, 350)).toBe(false);
    expect(r.covers(310, 390)).toBe(true);
    r.add(150, 320);
    expect(r.size).toBe(1);
    expect(r.covers(0, 400)).toBe(true);
  });

  test("a range added before the others lands in order", () => {
    const r = new VerifiedRanges();
    r.add(500, 600);
    r.add(100, 200);
    r.add(300, 400);
    expect(r.size).toBe(3);
    expect(r.covers(100, 200) && r.covers(300, 400) && r.covers(500, 600)).toBe(true);
    expect(r.covers(200, 300)).toBe(false);
    r.add(50, 700);
    expect(r.size).toBe(1);
    expect(r.covers(50, 700)).toBe(true);
  });

  test("empty and inverted ranges are ignored", () => {
    const r = new VerifiedRanges();
    r.add(10, 10);
    r.add(20, 5);
    expect(r.size).toBe(0);
  });

  test("past the bound of ranges, a new disjoint range is not remembered (checked again later), merges still are", () => {
    const r = new VerifiedRanges();
    for (let i = 0; i < 64; i++) r.add(i * 10, i * 10 + 5);
    expect(r.size).toBe(64);
    r.add(10_000, 10_005);
    expect(r.size).toBe(64);
    expect(r.covers(10_000, 10_005)).toBe(false);
    // Filling a gap merges two ranges into one: allowed.
    r.add(5, 10);
    expect(r.size).toBe(63);
    expect(r.covers(0, 15)).toBe(true);
  });

  test("clear forgets everything", () => {
    const r = new VerifiedRanges();
    r.add(0, 100);
    r.clear();
    expect(r.covers(0, 1)).toBe(false);
  });
});
