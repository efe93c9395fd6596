/**
 * Durable ACLs (CreateAcls / DeleteAcls), in one state file, `<data>/__cluster/acls.json`: a list of
 * bindings, each once (Apache's AclControlManager keeps a set: creating an ACL that exists is a success
 * that adds nothing).
 *
 * A change is answered only once the file is durable, changes run one at a time, and a failed write
 * poisons the store (storage/shared-state-file.ts). A file that exists but fails its checks is a
 * CorruptStateError at open, never an empty list: forgetting a DENY would open what an operator closed.
 *
 * Brokers sharing the data directory share the file: `refresh` reads it again (another broker changed it,
 * announced through etcd, and before every change under the metadata gate so that the change merges with
 * the latest list); `onChange` reports this store's own changes.
 */
import { join } from "node:path";
import {
  type AclBinding,
  type AclBindingFilter,
  filterMatches,
  newBindingProblem,
  sameBinding,
} from "../domain/security/acl.ts";
import type { Fs } from "../platform/fs.ts";
import { ensureDir } from "./atomic-file.ts";
import { SharedStateFile } from "./shared-state-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const ACLS_FORMAT = "acls";
export const ACLS_VERSION = 1;
export const ACLS_FILE = "acls.json";

export interface AclsBody {
  acls: AclBinding[];
}

export class AclStore {
  private readonly file: SharedStateFile<readonly AclBinding[]>;

  private constructor(
    fs: Fs,
    readonly path: string,
    acls: readonly AclBinding[],
  ) {
    this.file = new SharedStateFile(acls, {
      what: "the ACL store",
      save: (next) => saveState(fs, path, ACLS_FORMAT, ACLS_VERSION, { acls: [...next] } satisfies AclsBody),
      load: () => load(fs, path),
      same: sameList,
    });
  }

  /** Loads the file (absent: no ACLs yet); CorruptStateError when it is damaged. */
  static async open(fs: Fs, dataDir: string): Promise<AclStore> {
    await ensureDir(fs, join(dataDir, "__cluster"));
    const path = join(dataDir, "__cluster", ACLS_FILE);
    return new AclStore(fs, path, await load(fs, path));
  }

  /** Every ACL held, in the order they were created. */
  list(): readonly AclBinding[] {
    return this.file.value;
  }

  /**
   * Adds the bindings not held yet and makes the change durable before resolving. Each must be valid
   * (the handler answers a client's mistakes); an invalid one is a caller bug and throws, changing nothing.
   */
  create(bindings: readonly AclBinding[]): Promise<void> {
    for (const binding of bindings) {
      const problem = newBindingProblem(binding);
      if (problem !== null) return Promise.reject(new TypeError(`invalid ACL: ${problem}`));
    }
    return this.file.change((current) => {
      const next = [...current];
      for (const binding of bindings) if (!next.some((held) => sameBinding(held, binding))) next.push({ ...binding });
      return next;
    });
  }

  /**
   * Removes every ACL each filter matches, durably, and resolves with what each filter removed (an ACL
   * two filters match is reported under both, as Apache's AclControlManager does).
   */
  delete(filters: readonly AclBindingFilter[]): Promise<AclBinding[][]> {
    let removed: AclBinding[][] = [];
    return this.file
      .change((current) => {
        removed = filters.map((filter) => current.filter((acl) => filterMatches(filter, acl)));
        return current.filter((acl) => !filters.some((filter) => filterMatches(filter, acl)));
      })
      .then(() => removed);
  }

  /**
   * Reads the file again, in turn with this store's changes. Resolves whether the ACLs differ from what
   * was held. A damaged file is a CorruptStateError naming it, and the ACLs held are kept.
   */
  refresh(): Promise<boolean> {
    return this.file.refresh();
  }

  /** Calls `listener` after each change this store makes is durable. Returns the function that stops it. */
  onChange(listener: () => void): () => void {
    return this.file.onChange(listener);
  }
}

async function load(fs: Fs, path: string): Promise<AclBinding[]> {
  const body = await loadState(fs, path, ACLS_FORMAT, { current: ACLS_VERSION, parse: parseAclsBody });
  return body?.acls ?? [];
}

function sameList(a: readonly AclBinding[], b: readonly AclBinding[]): boolean {
  return a.length === b.length && a.every((acl, i) => sameBinding(acl, b[i]!));
}

const BINDING_FIELDS = ["resourceType", "resourceName", "patternType", "principal", "host", "operation", "permissionType"] as const;

/** Checks a stored body; throws with the reason (loadState names the file and marks it corrupt). */
export function parseAclsBody(body: unknown): AclsBody {
  if (typeof body !== "object" || body === null || !Array.isArray((body as { acls?: unknown }).acls)) throw new Error("acls must be an array");
  const acls: AclBinding[] = [];
  for (const [i, entry] of ((body as { acls: unknown[] }).acls).entries()) {
    if (typeof entry !== "object" || entry === null) throw new Error(`acls[${i}] is not an object`);
    const e = entry as Record<string, unknown>;
    for (const field of BINDING_FIELDS) {
      const numeric = field === "resourceType" || field === "patternType" || field === "operation" || field === "permissionType";
      if (numeric ? !Number.isInteger(e[field]) : typeof e[field] !== "string") throw new Error(`acls[${i}].${field} is missing or of the wrong type`);
    }
    const binding = Object.fromEntries(BINDING_FIELDS.map((field) => [field, e[field]])) as unknown as AclBinding;
    const problem = newBindingProblem(binding);
    if (problem !== null) throw new Error(`acls[${i}]: ${problem}`);
    acls.push(binding);
  }
  return { acls };
}
