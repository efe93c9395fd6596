/**
 * SCRAM credentials, `__cluster/scram-credentials.json` in the data directory (docs/architecture.md,
 * "SASL"): per user and mechanism the salt, the stored key, the server key and the iterations, never the
 * password or the salted password. One state file (state-file.ts: format, version, CRC, written tmp ->
 * fsync -> rename -> fsync of the directory), rewritten whole by each alteration: a few hundred bytes per
 * user, changed by an administrator, read at every SCRAM authentication from memory.
 *
 * - A damaged file refuses the start (CorruptStateError naming it), and is never replaced by an empty one.
 * - Several brokers share the data directory: `refresh` reads the file again (another broker altered it;
 *   cluster mode's feed says when, broker/scram-credentials.ts), in turn with this store's own writes. A
 *   file that disappeared while credentials were held is damage too, and the held ones are kept.
 * - A write that fails poisons the store (storage/shared-state-file.ts: the next write is a FatalError),
 *   because what is on disk is then unknown.
 */
import { join } from "node:path";
import { CorruptStateError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { applyPlan, type AlterationPlan, type ScramCredentialMap } from "../domain/security/scram-credentials.ts";
import { SCRAM_MECHANISMS, type ScramCredential, type ScramMechanismName } from "../domain/security/scram.ts";
import { ensureDir } from "./atomic-file.ts";
import { SharedStateFile } from "./shared-state-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const SCRAM_CREDENTIALS_FORMAT = "scram-credentials";
export const SCRAM_CREDENTIALS_VERSION = 1;
export const SCRAM_CREDENTIALS_FILE = "scram-credentials.json";

interface StoredCredential {
  salt: string;
  storedKey: string;
  serverKey: string;
  iterations: number;
}

/** The body: user -> mechanism name -> credential, binary fields in base64. */
interface Body {
  users: Record<string, Record<string, StoredCredential>>;
}

type Credentials = Map<string, Map<ScramMechanismName, ScramCredential>>;

export class ScramCredentialStore {
  private readonly file: SharedStateFile<Credentials>;

  private constructor(
    fs: Fs,
    readonly path: string,
    credentials: Credentials,
  ) {
    this.file = new SharedStateFile(credentials, {
      what: "the SCRAM credential store",
      save: (next) => saveState(fs, path, SCRAM_CREDENTIALS_FORMAT, SCRAM_CREDENTIALS_VERSION, bodyOf(next)),
      load: async (held) => {
        const loaded = await load(fs, path);
        if (loaded !== undefined) return loaded;
        if (held.size === 0) return held;
        throw new CorruptStateError(path, "the SCRAM credentials file is gone while credentials were held");
      },
      same: sameCredentials,
    });
  }

  /** Loads the file (absent: no credentials yet); CorruptStateError if it is damaged. */
  static async open(fs: Fs, dataDir: string): Promise<ScramCredentialStore> {
    await ensureDir(fs, join(dataDir, "__cluster"));
    const path = join(dataDir, "__cluster", SCRAM_CREDENTIALS_FILE);
    return new ScramCredentialStore(fs, path, (await load(fs, path)) ?? new Map());
  }

  /** The user's credential for a mechanism, or undefined. */
  get(user: string, mechanism: string): ScramCredential | undefined {
    return this.file.value.get(user)?.get(mechanism as ScramMechanismName);
  }

  /** Every credential held (a snapshot the caller must not change). */
  all(): ScramCredentialMap {
    return this.file.value;
  }

  /** Makes a plan's changes durable, then serves them. Resolves once the file is renamed into place and fsynced. */
  apply(plan: Pick<AlterationPlan, "deletions" | "upsertions">): Promise<void> {
    return this.file.change((current) => applyPlan(current, plan));
  }

  /**
   * Reads the file again (another broker may have changed it), in turn with this store's writes. Resolves
   * whether anything changed. A damaged or vanished file is a CorruptStateError; the credentials held stay.
   */
  refresh(): Promise<boolean> {
    return this.file.refresh();
  }

  /** Calls `listener` after each change this store makes is durable. Returns the function that stops it. */
  onChange(listener: () => void): () => void {
    return this.file.onChange(listener);
  }
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

function bodyOf(credentials: Credentials): Body {
  const users: Body["users"] = {};
  for (const [user, byMechanism] of credentials) {
    users[user] = {};
    for (const [mechanism, c] of byMechanism) {
      users[user][mechanism] = { salt: b64(c.salt), storedKey: b64(c.storedKey), serverKey: b64(c.serverKey), iterations: c.iterations };
    }
  }
  return { users };
}

async function load(fs: Fs, path: string): Promise<Credentials | undefined> {
  return loadState(fs, path, SCRAM_CREDENTIALS_FORMAT, { current: SCRAM_CREDENTIALS_VERSION, parse: parseBody });
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function bytesField(value: unknown, where: string, length?: number): Uint8Array {
  if (typeof value !== "string" || !BASE64.test(value)) throw new Error(`${where} is not base64`);
  const bytes = new Uint8Array(Buffer.from(value, "base64"));
  if (length !== undefined && bytes.length !== length) throw new Error(`${where} has ${bytes.length} bytes, expected ${length}`);
  return bytes;
}

function parseBody(body: unknown): Credentials {
  if (typeof body !== "object" || body === null) throw new Error("body is not an object");
  const users = (body as { users?: unknown }).users;
  if (typeof users !== "object" || users === null || Array.isArray(users)) throw new Error("users is not an object");
  const out: Credentials = new Map();
  for (const [user, byMechanism] of Object.entries(users as Record<string, unknown>)) {
    if (user === "") throw new Error("a user without a name");
    if (typeof byMechanism !== "object" || byMechanism === null || Array.isArray(byMechanism)) throw new Error(`users.${user} is not an object`);
    const map = new Map<ScramMechanismName, ScramCredential>();
    for (const [mechanism, value] of Object.entries(byMechanism as Record<string, unknown>)) {
      const info = SCRAM_MECHANISMS.find((m) => m.name === mechanism);
      if (info === undefined) throw new Error(`users.${user}: unknown mechanism ${JSON.stringify(mechanism)}`);
      const where = `users.${user}.${mechanism}`;
      if (typeof value !== "object" || value === null) throw new Error(`${where} is not an object`);
      const v = value as Record<string, unknown>;
      const iterations = v.iterations;
      if (typeof iterations !== "number" || !Number.isInteger(iterations) || iterations < 1) throw new Error(`${where}.iterations is not a positive integer`);
      map.set(info.name as ScramMechanismName, {
        salt: bytesField(v.salt, `${where}.salt`),
        storedKey: bytesField(v.storedKey, `${where}.storedKey`, info.hashBytes),
        serverKey: bytesField(v.serverKey, `${where}.serverKey`, info.hashBytes),
        iterations,
      });
    }
    if (map.size === 0) throw new Error(`users.${user} has no credential`);
    out.set(user, map);
  }
  return out;
}

function sameCredentials(a: Credentials, b: Credentials): boolean {
  const encode = (c: Credentials) => JSON.stringify(Object.entries(bodyOf(c).users).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([u, m]) => [u, Object.entries(m).sort()]));
  return encode(a) === encode(b);
}
