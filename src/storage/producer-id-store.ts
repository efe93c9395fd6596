/**
 * Cluster-unique producer ids, handed out from blocks of PRODUCER_ID_BLOCK_SIZE (1000, as Apache) that
 * are reserved durably before any id in them is handed out. Ids are never reused, across brokers and
 * across restarts: a restart reserves a new block and abandons the rest of the old one.
 *
 * Several brokers may share the data directory, so reservation must be safe between processes without
 * a lock server. It works by claims:
 *
 *   <data>/__cluster/producer_ids/claims/<block index, 16 digits>.<broker>.<16 hex nonce>.claim
 *   <data>/__cluster/producer_ids/<broker>.json     the broker's current block (a state file)
 *
 * To reserve, a broker lists the claims, picks the block index one above the highest it sees (and above
 * every index it tried before), creates its own uniquely named, empty claim file for that index and
 * makes it durable (fsync file, fsync directory), then lists the claims again. It wins only if no
 * other claim at that index or above is listed; otherwise it tries again one higher (the lost index is
 * abandoned). The winner records its block in `<broker>.json`, durably, and only then hands out ids.
 *
 * Why two winners are impossible: take two claims A and B at the same index, A created first. B lists
 * after creating its claim, so after A's was created. Claims are removed only by a winner of a higher
 * index, removing only claims below its own, so once A's claim exists there is, at every later moment,
 * either A's claim or some claim above it. B's second listing therefore shows a claim at or above its
 * index that is not its own, and B does not win. (Both may lose; the next attempt goes higher.) The
 * argument needs only that a listing shows every file whose creation finished before the listing
 * started, which a local file system gives; on NFS the client must not serve directory listings from
 * its attribute cache (mount with `actimeo=0` or `lookupcache=none`).
 *
 * Why not an exclusive lock file (O_EXCL) around a shared counter: a broker killed while holding the
 * lock stops every broker from getting producer ids until someone breaks the lock, and breaking a lock
 * safely needs leases and fencing. Claims leave nothing to clean up after a crash: an abandoned claim
 * only burns its block. Nor does this need any capability the Fs port lacks.
 *
 * Crashes: a claim counts only once durable, and a block is used only after its claim won. After a
 * crash, a claim that was not durable may vanish and its index be claimed again, but no id of it was
 * handed out. The highest claim is never removed, so a restarted broker always reserves above every
 * block any broker ever used; `<broker>.json` is a second floor for this broker.
 *
 * Failures: if the reservation cannot be made durable (a failed write or fsync, a full disk), allocate
 * answers a retriable failure, which the InitProducerId handler maps to COORDINATOR_LOAD_IN_PROGRESS,
 * as Apache's RPCProducerIdManager does while it has no block ("older clients treat REQUEST_TIMED_OUT as
 * fatal"). It never falls back to an id that is not durably reserved, and it never retries an index it
 * tried before: after a failed fsync nobody knows whether that claim reached the disk. This deliberately
 * departs from "a failed fsync is fatal" (docs/architecture.md, "Conventions"): nothing in memory depends on
 * the failed write, so refusing the request is enough. Calls to `allocate` are serialized.
 */
import { join } from "node:path";
import { FatalError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { ensureDir } from "./atomic-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const PRODUCER_ID_BLOCK_SIZE = 1000;
export const PRODUCER_ID_BLOCK_FORMAT = "producer-id-block";
export const PRODUCER_ID_BLOCK_VERSION = 1;
/** Attempts at a block when other brokers keep winning; then the caller gets a retriable failure. */
export const PRODUCER_ID_CLAIM_ATTEMPTS_MAX = 16;

const CLAIM_NAME = /^(\d{16})\.(\d+)\.([0-9a-f]{16})\.claim$/;

export interface ProducerIdBlock {
  readonly blockIndex: number;
  readonly firstProducerId: number;
  /** Inclusive. */
  readonly lastProducerId: number;
}

export type AllocateResult =
  | { readonly ok: true; readonly producerId: number }
  | { readonly ok: false; readonly retriable: true; readonly reason: string };

export interface ProducerIdStoreOptions {
  /** Ids per block; PRODUCER_ID_BLOCK_SIZE unless a test wants many reservations. */
  blockSize?: number;
  /** Where lost races and abandoned blocks are reported (one line each); console.warn by default. */
  log?: (line: string) => void;
}

interface BrokerBlockRecord extends ProducerIdBlock {
  readonly brokerId: number;
  readonly blockSize: number;
  readonly claim: string;
}

interface Claim {
  readonly name: string;
  readonly blockIndex: number;
}

export function producerIdsDir(dataDir: string): string {
  return join(dataDir, "__cluster", "producer_ids");
}

export class ProducerIdStore {
  private block: ProducerIdBlock | undefined;
  private nextProducerId = 0;
  /** Every block index at or below this one was tried by this store (or recorded before a restart). */
  private triedIndex: number;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly fs: Fs,
    private readonly dir: string,
    readonly brokerId: number,
    private readonly blockSize: number,
    private readonly log: (line: string) => void,
    recorded: BrokerBlockRecord | undefined,
  ) {
    // Whatever the block size, the next block must start above the last id this broker recorded.
    this.triedIndex = recorded === undefined ? -1 : Math.ceil((recorded.lastProducerId + 1) / blockSize) - 1;
  }

  /**
   * Opens the store of `brokerId` under `dataDir`. No block is reserved until the first `allocate`. A
   * corrupt `<broker>.json` raises CorruptStateError: it is never taken for absent.
   */
  static async open(fs: Fs, dataDir: string, brokerId: number, options: ProducerIdStoreOptions = {}): Promise<ProducerIdStore> {
    if (!Number.isSafeInteger(brokerId) || brokerId < 0) throw new RangeError(`invalid broker id ${brokerId}`);
    const blockSize = options.blockSize ?? PRODUCER_ID_BLOCK_SIZE;
    if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new RangeError(`invalid producer id block size ${blockSize}`);
    const dir = producerIdsDir(dataDir);
    await ensureDir(fs, join(dir, "claims"));
    const recorded = await loadState(fs, join(dir, `${brokerId}.json`), PRODUCER_ID_BLOCK_FORMAT, {
      current: PRODUCER_ID_BLOCK_VERSION,
      parse: parseRecord,
    });
    const log = options.log ?? ((line: string) => console.warn(line));
    return new ProducerIdStore(fs, dir, brokerId, blockSize, log, recorded);
  }

  /** The block ids are being handed out from, if any. */
  get currentBlock(): ProducerIdBlock | undefined {
    return this.block;
  }

  /** The next producer id, from a durably reserved block; a retriable failure when none can be reserved. */
  allocate(): Promise<AllocateResult> {
    const result = this.queue.then(() => this.allocateNow());
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async allocateNow(): Promise<AllocateResult> {
    if (this.block === undefined || this.nextProducerId > this.block.lastProducerId) {
      this.block = undefined;
      const reserved = await this.reserveBlock();
      if (!reserved.ok) return reserved;
      this.block = reserved.block;
      this.nextProducerId = reserved.block.firstProducerId;
    }
    const producerId = this.nextProducerId;
    this.nextProducerId += 1;
    return { ok: true, producerId };
  }

  private async reserveBlock(): Promise<{ ok: true; block: ProducerIdBlock } | Extract<AllocateResult, { ok: false }>> {
    const claimsDir = join(this.dir, "claims");
    for (let attempt = 1; attempt <= PRODUCER_ID_CLAIM_ATTEMPTS_MAX; attempt++) {
      let blockIndex: number | undefined;
      try {
        const before = await this.listClaims(claimsDir);
        let highest = this.triedIndex;
        for (const claim of before) highest = Math.max(highest, claim.blockIndex);
        // After a lost race, skip a random number of indices: racers that lost together would
        // otherwise pick the same index again and keep losing together. The highest claim wins, so
        // spreading the retries out lets one of them through; the skipped blocks are simply unused.
        const index = highest + 1 + (attempt === 1 ? 0 : randomInt(2 * attempt));
        blockIndex = index;
        // Never try an index twice, whatever happens next: after a failed fsync, nobody knows whether
        // the claim reached the disk.
        this.triedIndex = index;
        const block = this.blockAt(index);
        const name = `${String(blockIndex).padStart(16, "0")}.${this.brokerId}.${nonce()}.claim`;
        await this.createDurably(claimsDir, name);

        const rivals = (await this.listClaims(claimsDir)).filter((c) => c.name !== name && c.blockIndex >= index);
        if (rivals.length > 0) {
          this.log(`producer ids: broker ${this.brokerId} lost block ${blockIndex} to ${rivals[0]!.name}, trying the next one`);
          continue;
        }
        const record: BrokerBlockRecord = { ...block, brokerId: this.brokerId, blockSize: this.blockSize, claim: name };
        await saveState(this.fs, join(this.dir, `${this.brokerId}.json`), PRODUCER_ID_BLOCK_FORMAT, PRODUCER_ID_BLOCK_VERSION, record);
        await this.removeClaimsBelow(claimsDir, blockIndex, before);
        return { ok: true, block };
      } catch (error) {
        if (error instanceof ProducerIdsExhaustedError) throw error;
        const reason =
          `could not durably reserve producer id block ${blockIndex ?? "(none chosen)"}: ` +
          (error instanceof Error ? error.message : String(error));
        this.log(`producer ids: broker ${this.brokerId} ${reason}; the block is abandoned`);
        return { ok: false, retriable: true, reason };
      }
    }
    return {
      ok: false,
      retriable: true,
      reason: `other brokers won the producer id block ${PRODUCER_ID_CLAIM_ATTEMPTS_MAX} times in a row`,
    };
  }

  private blockAt(blockIndex: number): ProducerIdBlock {
    const firstProducerId = blockIndex * this.blockSize;
    const lastProducerId = firstProducerId + this.blockSize - 1;
    // Producer ids are int64 on the wire, but bunka keeps them as numbers; past 2^53 they would collide.
    if (!Number.isSafeInteger(lastProducerId)) throw new ProducerIdsExhaustedError(`producer ids exhausted: block ${blockIndex} ends past 2^53`);
    return { blockIndex, firstProducerId, lastProducerId };
  }

  /** An empty file whose name is the claim, durable in name and content before this returns. */
  private async createDurably(dir: string, name: string): Promise<void> {
    const handle = await this.fs.open(join(dir, name), "w");
    try {
      await handle.fsync();
    } finally {
      await handle.close().catch(() => undefined);
    }
    await this.fs.fsyncDir(dir);
  }

  private async listClaims(dir: string): Promise<Claim[]> {
    const claims: Claim[] = [];
    for (const name of await this.fs.readdir(dir)) {
      const match = CLAIM_NAME.exec(name);
      if (match !== null) claims.push({ name, blockIndex: Number(match[1]) });
    }
    return claims;
  }

  /**
   * Keeps the claims directory small. Only claims below the index just won are removed, so the highest
   * claim always survives (the safety argument above relies on it). Best effort: another winner may
   * have removed them already, and a claim that comes back after a crash is harmless.
   */
  private async removeClaimsBelow(dir: string, blockIndex: number, claims: readonly Claim[]): Promise<void> {
    for (const claim of claims) {
      if (claim.blockIndex >= blockIndex) continue;
      await this.fs.unlink(join(dir, claim.name)).catch(() => undefined);
    }
  }
}

/** Not retriable: no later attempt can succeed. */
export class ProducerIdsExhaustedError extends FatalError {}

/** A uniform integer in [0, bound). */
function randomInt(bound: number): number {
  const random = new Uint32Array(1);
  crypto.getRandomValues(random);
  return random[0]! % bound;
}

function nonce(): string {
  const random = new Uint8Array(8);
  crypto.getRandomValues(random);
  return Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
}

function parseRecord(body: unknown): BrokerBlockRecord {
  if (typeof body !== "object" || body === null) throw new Error("body is not an object");
  const fields = body as Record<string, unknown>;
  const integer = (key: string): number => {
    const value = fields[key];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new Error(`${key} is not a non-negative integer`);
    return value;
  };
  const record = {
    brokerId: integer("brokerId"),
    blockIndex: integer("blockIndex"),
    blockSize: integer("blockSize"),
    firstProducerId: integer("firstProducerId"),
    lastProducerId: integer("lastProducerId"),
    claim: fields.claim,
  };
  if (typeof record.claim !== "string" || !CLAIM_NAME.test(record.claim)) throw new Error("claim is not a claim file name");
  if (record.lastProducerId < record.firstProducerId) throw new Error("lastProducerId is below firstProducerId");
  return record as BrokerBlockRecord;
}
