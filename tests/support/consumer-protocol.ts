/**
 * Consumer embedded protocol bytes for tests that speak JoinGroup/SyncGroup with raw frames: a
 * subscription (ConsumerProtocolSubscription) and an assignment (ConsumerProtocolAssignment).
 */
class Bytes {
  readonly parts: number[] = [];
  int16(v: number): this {
    this.parts.push((v >> 8) & 0xff, v & 0xff);
    return this;
  }
  int32(v: number): this {
    this.parts.push((v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
    return this;
  }
  string(s: string): this {
    const bytes = new TextEncoder().encode(s);
    this.int16(bytes.length);
    this.parts.push(...bytes);
    return this;
  }
  finish(): Uint8Array {
    return new Uint8Array(this.parts);
  }
}

/** A subscription of `version` (0-3): topics, null user data, and for v1+ no owned partitions, generation -1, no rack. */
export function subscription(topics: string[], version = 0): Uint8Array {
  const b = new Bytes().int16(version).int32(topics.length);
  for (const t of topics) b.string(t);
  b.int32(-1);
  if (version >= 1) b.int32(0);
  if (version >= 2) b.int32(-1);
  if (version >= 3) b.int16(-1);
  return b.finish();
}

/** A version-0 assignment: partitions by topic, null user data. */
export function assignment(partitions: Record<string, number[]>): Uint8Array {
  const b = new Bytes().int16(0).int32(Object.keys(partitions).length);
  for (const [topic, ps] of Object.entries(partitions)) {
    b.string(topic).int32(ps.length);
    for (const p of ps) b.int32(p);
  }
  b.int32(-1);
  return b.finish();
}
