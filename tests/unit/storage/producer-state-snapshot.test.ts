import { describe, expect, test } from "bun:test";
import { decode, encode } from "@msgpack/msgpack";
import {
  applyAppend,
  applyMarker,
  createProducerState,
  NO_COORDINATOR_EPOCH,
  NO_TXN_OFFSET,
  type ProducerEntry,
  type ProducerStateTable,
} from "../../../src/domain/producer-state.ts";
import { ensureDir } from "../../../src/storage/atomic-file.ts";
import { crc32 } from "../../../src/storage/crc32.ts";
import {
  decodeSnapshot,
  encodeEnvelope,
  encodeSnapshot,
  PRODUCER_STATE_SNAPSHOT_FILE,
  PRODUCER_STATE_SNAPSHOT_VERSION,
  readSnapshot,
  writeSnapshot,
} from "../../../src/storage/producer-state-snapshot.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DIR = "/data/orders-0";
const PATH = `${DIR}/${PRODUCER_STATE_SNAPSHOT_FILE}`;
const T0 = 1_700_000_000_000;

/** A state with the shapes that matter: full window, large offsets, open transaction, marker-only entry. */
function sampleState(seed = 0): ProducerStateTable {
  const state = createProducerState();
  for (let i = 0; i < 7; i++) {
    const offset = 9_000_000_000_000 + i * 10 + seed;
    applyAppend(
      state,
      { producerId: 1000, producerEpoch: 2, baseSequence: i * 10, lastSequence: i * 10 + 9, isTransactional: false },
      { firstOffset: offset, lastOffset: offset + 9, timestampMs: T0 + i },
    );
  }
  applyAppend(
    state,
    { producerId: 2_000_000_000_000, producerEpoch: 0, baseSequence: 2_147_483_640, lastSequence: 3, isTransactional: true },
    { firstOffset: 500 + seed, lastOffset: 511 + seed, timestampMs: T0 + 99 },
  );
  applyMarker(state, 3000, 7, { coordinatorEpoch: 4, offset: 600, timestampMs: T0 + 5, isCommit: false });
  return state;
}

function entriesOf(state: ProducerStateTable): Array<[number, ProducerEntry]> {
  return [...state.entries()].sort(([a], [b]) => a - b);
}

async function setup(): Promise<MemoryFs> {
  const fs = new MemoryFs();
  await ensureDir(fs, DIR);
  return fs;
}

async function plant(fs: MemoryFs, bytes: Uint8Array): Promise<void> {
  const handle = await fs.open(PATH, "w");
  await handle.write(bytes);
  await handle.close();
}

describe("encodeSnapshot / decodeSnapshot", () => {
  test("round-trips every field", () => {
    const state = sampleState();
    const decoded = decodeSnapshot(encodeSnapshot(12_345, state));
    expect(decoded.kind).toBe("loaded");
    if (decoded.kind !== "loaded") return;
    expect(decoded.offset).toBe(12_345);
    expect(decoded.version).toBe(PRODUCER_STATE_SNAPSHOT_VERSION);
    expect(entriesOf(decoded.state)).toEqual(entriesOf(state));
    expect(decoded.state.get(1000)!.batches).toHaveLength(5);
    expect(decoded.state.get(2_000_000_000_000)!.currentTxnFirstOffset).toBe(500);
    expect(decoded.state.get(3000)).toMatchObject({ epoch: 7, coordinatorEpoch: 4, batches: [] });
  });

  test("round-trips an empty state", () => {
    const decoded = decodeSnapshot(encodeSnapshot(0, createProducerState()));
    expect(decoded).toMatchObject({ kind: "loaded", offset: 0 });
    if (decoded.kind === "loaded") expect(decoded.state.size).toBe(0);
  });

  test("reads the previous version (1, without transaction fields)", () => {
    const body = encode({
      offset: 77,
      producers: [
        [1000, 3, T0, [0, 9, 40, 49, T0 - 5, 10, 19, 50, 59, T0]],
        [1001, 0, T0 + 1, []],
      ],
    });
    const decoded = decodeSnapshot(encodeEnvelope(1, body));
    expect(decoded).toMatchObject({ kind: "loaded", version: 1, offset: 77 });
    if (decoded.kind !== "loaded") return;
    expect(decoded.state.get(1000)).toEqual({
      epoch: 3,
      batches: [
        { firstSeq: 0, lastSeq: 9, firstOffset: 40, lastOffset: 49, timestampMs: T0 - 5 },
        { firstSeq: 10, lastSeq: 19, firstOffset: 50, lastOffset: 59, timestampMs: T0 },
      ],
      lastTimestampMs: T0,
      currentTxnFirstOffset: NO_TXN_OFFSET,
      coordinatorEpoch: NO_COORDINATOR_EPOCH,
    });
    expect(decoded.state.get(1001)).toMatchObject({ epoch: 0, batches: [] });
  });

  test("refuses an unknown version, a wrong format and a checksum mismatch as corrupt", () => {
    const body = encode({ offset: 1, producers: [] });
    expect(decodeSnapshot(encodeEnvelope(3, body))).toMatchObject({ kind: "corrupt", reason: expect.stringContaining("unknown version 3") });
    expect(decodeSnapshot(encodeEnvelope(0, body))).toMatchObject({ kind: "corrupt" });
    const wrongFormat = encode({ format: "topic", version: 2, crc32: crc32(body), body });
    expect(decodeSnapshot(wrongFormat)).toMatchObject({ kind: "corrupt", reason: expect.stringContaining("wrong format") });
    const badCrc = encode({ format: "producer-state", version: 2, crc32: (crc32(body) + 1) >>> 0, body });
    expect(decodeSnapshot(badCrc)).toMatchObject({ kind: "corrupt", reason: expect.stringContaining("checksum mismatch") });
  });

  test("every single flipped bit is detected", () => {
    const bytes = encodeSnapshot(42, sampleState());
    for (let at = 0; at < bytes.length; at++) {
      for (const bit of [0x01, 0x80]) {
        const damaged = bytes.slice();
        damaged[at]! ^= bit;
        // Envelope bytes fail to parse or name the wrong field; body bytes fail the checksum.
        if (decodeSnapshot(damaged).kind === "loaded") throw new Error(`flip of bit ${bit} at byte ${at} was not detected`);
      }
    }
  });

  test("a truncated file, an empty file and garbage are corrupt", () => {
    const bytes = encodeSnapshot(42, sampleState());
    for (const length of [0, 1, 10, bytes.length - 1]) {
      expect(decodeSnapshot(bytes.subarray(0, length))).toMatchObject({ kind: "corrupt" });
    }
    expect(decodeSnapshot(new TextEncoder().encode('{"format":"producer-state"}'))).toMatchObject({ kind: "corrupt" });
  });

  test("a body that passes its checksum but breaks an invariant is corrupt, not half-loaded", () => {
    const cases = [
      { offset: -1, producers: [] },
      { offset: 1, producers: [[1, 0, T0, -1, -1, [0, 0, 0, 0, T0, 1, 1, 1, 1, T0, 2, 2, 2, 2, T0, 3, 3, 3, 3, T0, 4, 4, 4, 4, T0, 5, 5, 5, 5, T0]]] },
      { offset: 1, producers: [[1, 0, T0, -1, -1, []], [1, 0, T0, -1, -1, []]] },
      { offset: 1, producers: [[1, 99_999, T0, -1, -1, []]] },
      { offset: 1, producers: [[1, 0, T0, -1, -1, [0, 0, 5, 4, T0]]] },
      { offset: 1, producers: [[1, 0, "x", -1, -1, []]] },
      { offset: 1, producers: [[1, 0, T0, []]] },
    ];
    for (const body of cases) {
      expect(decodeSnapshot(encodeEnvelope(2, encode(body)))).toMatchObject({ kind: "corrupt" });
    }
  });

  test("stores positional tuples, not field names per producer", () => {
    const envelope = decode(encodeSnapshot(1, sampleState())) as { body: Uint8Array };
    const body = decode(envelope.body) as { producers: unknown[][] };
    expect(body.producers.find((p) => p[0] === 3000)).toEqual([3000, 7, T0 + 5, -1, 4, []]);
  });
});

describe("writeSnapshot / readSnapshot", () => {
  test("no snapshot reads as undefined", async () => {
    const fs = await setup();
    expect(await readSnapshot(fs, DIR)).toBeUndefined();
  });

  test("round-trips through the file and survives a crash once written", async () => {
    const fs = await setup();
    await writeSnapshot(fs, DIR, 900, sampleState());
    fs.crash();
    const read = await readSnapshot(fs, DIR);
    expect(read).toMatchObject({ kind: "loaded", offset: 900 });
    if (read?.kind === "loaded") expect(entriesOf(read.state)).toEqual(entriesOf(sampleState()));
  });

  test("a corrupt file is a distinct result naming the file, never empty state", async () => {
    const fs = await setup();
    const bytes = encodeSnapshot(900, sampleState());
    bytes[bytes.length - 3]! ^= 0x10;
    await plant(fs, bytes);
    const read = await readSnapshot(fs, DIR);
    expect(read).toMatchObject({ kind: "corrupt", reason: expect.stringContaining(PATH) });
    expect(read).not.toHaveProperty("state");
  });

  test("an I/O error while reading is thrown, not reported as corruption", async () => {
    const fs = await setup();
    await writeSnapshot(fs, DIR, 900, sampleState());
    fs.haltAfterOps(1);
    await expect(readSnapshot(fs, DIR)).rejects.toThrow();
  });

  test("a crash at any step of a write leaves the old snapshot or the new one, never a mix", async () => {
    const oldState = sampleState(0);
    const newState = sampleState(7);
    let sawOld = false;
    let sawNew = false;
    for (let ops = 0; ; ops++) {
      const fs = await setup();
      await writeSnapshot(fs, DIR, 100, oldState);
      fs.haltAfterOps(ops);
      let finished = true;
      await writeSnapshot(fs, DIR, 200, newState).catch(() => {
        finished = false;
      });
      fs.crash();
      const read = await readSnapshot(fs, DIR);
      expect(read?.kind).toBe("loaded");
      if (read?.kind !== "loaded") return;
      if (read.offset === 100) {
        expect(entriesOf(read.state)).toEqual(entriesOf(oldState));
        sawOld = true;
      } else {
        expect(read.offset).toBe(200);
        expect(entriesOf(read.state)).toEqual(entriesOf(newState));
        sawNew = true;
      }
      if (finished) {
        expect(read.offset).toBe(200);
        break;
      }
    }
    expect(sawOld && sawNew).toBe(true);
  });

  test("a crash during the very first write leaves no snapshot or the complete one", async () => {
    for (let ops = 0; ops < 12; ops++) {
      const fs = await setup();
      fs.haltAfterOps(ops);
      await writeSnapshot(fs, DIR, 5, sampleState()).catch(() => undefined);
      fs.crash();
      const read = await readSnapshot(fs, DIR);
      if (read !== undefined) expect(read).toMatchObject({ kind: "loaded", offset: 5 });
    }
  });

  test("a torn write of the tmp file never replaces the old snapshot", async () => {
    const fs = await setup();
    await writeSnapshot(fs, DIR, 100, sampleState(0));
    fs.failNextWrite(DIR, { torn: 20 });
    await expect(writeSnapshot(fs, DIR, 200, sampleState(1))).rejects.toThrow();
    expect(await readSnapshot(fs, DIR)).toMatchObject({ kind: "loaded", offset: 100 });
  });
});
