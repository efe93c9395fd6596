/**
 * An in-memory twin of the `Fs` port that models what survives a power loss, so that storage code can be
 * crashed at every step in tests.
 *
 * The model (deliberately as pessimistic as POSIX allows):
 * - A file is an inode with volatile content (what reads see) and durable content (what survives a
 *   crash). `fsync` on a handle copies the volatile content to the durable content of that inode only.
 * - A directory has volatile entries and durable entries (name -> inode). Creating, renaming and
 *   unlinking change only the volatile entries; `fsyncDir` on the directory makes its current entries
 *   durable. An fsync of a file never makes its name durable, and an fsync of a directory never makes
 *   the content of its files durable.
 * - `crash()` walks the tree from the root through durable entries only: every reachable directory gets
 *   its durable entries back and every reachable file its durable content; anything else is gone.
 *   Handles opened before the crash are dead (EBADF), as they would be in a new process.
 * - `rmrf` detaches the directory from its parent (volatile, like an unlink); until the parent is
 *   fsynced, a crash brings the whole directory back with its durable content.
 *
 * Fault injection: `failNextFsync`, `failNextWrite` (optionally torn: some bytes land before the error),
 * `failNextTruncate`,
 * `enospcAfterBytes` (a full disk), and `haltAfterOps` (the process dies after N more operations: every
 * later call throws, so a test can crash between any two steps of an algorithm and check what survived).
 *
 * Errors carry Node's `code` (ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EBADF, EIO, ENOSPC) so code
 * that inspects `code` behaves the same against this twin and against node-fs.
 */
import * as posix from "node:path/posix";
import type { FileHandle, FileStat, Fs, OpenMode } from "../../src/platform/fs.ts";

interface FileNode {
  kind: "file";
  /** Volatile content: bytes [0, length) of `data`. */
  data: Uint8Array;
  length: number;
  durable: Uint8Array;
  mtimeMs: number;
}

interface DirNode {
  kind: "dir";
  entries: Map<string, Node>;
  durableEntries: Map<string, Node>;
  mtimeMs: number;
}

type Node = FileNode | DirNode;

export type FsErrorCode = "ENOENT" | "EEXIST" | "ENOTDIR" | "EISDIR" | "ENOTEMPTY" | "EBADF" | "EIO" | "ENOSPC" | "EINVAL";

/** The error thrown by every operation after `haltAfterOps` ran out: the simulated process is dead. */
export class SimulatedHaltError extends Error {
  override readonly name = "SimulatedHaltError";
}

export class MemoryFsError extends Error {
  override readonly name = "MemoryFsError";
  constructor(readonly code: FsErrorCode, readonly syscall: string, readonly path: string) {
    super(`${code}: ${syscall} '${path}'`);
  }
}

interface PendingFault {
  pathPrefix: string | undefined;
}

interface PendingWriteFault extends PendingFault {
  tornBytes: number;
}

interface PendingFsyncFault extends PendingFault {
  target: FsyncTarget;
}

/** Which fsync calls a `failNextFsync` applies to: handle fsyncs, directory fsyncs, or either. */
export type FsyncTarget = "file" | "dir" | "any";

export interface MemoryFsOptions {
  /** Source of mtimes; defaults to a constant so tests never read the real clock. */
  nowMs?: () => number;
}

function newDir(nowMs: number): DirNode {
  return { kind: "dir", entries: new Map(), durableEntries: new Map(), mtimeMs: nowMs };
}

export class MemoryFs implements Fs {
  private readonly root: DirNode;
  private readonly nowMs: () => number;
  /** Increases at every crash; handles from an older generation are dead. */
  private generation = 0;
  private writeFaults: PendingWriteFault[] = [];
  private fsyncFaults: PendingFsyncFault[] = [];
  private truncateFaults: PendingFault[] = [];
  private bytesUntilEnospc: number | undefined;
  private opsUntilHalt: number | undefined;
  /** Every operation, in order ("fsync /d/f", "rename /a /b", ...), so tests can assert ordering. */
  readonly log: string[] = [];

  constructor(options: MemoryFsOptions = {}) {
    this.nowMs = options.nowMs ?? (() => 0);
    this.root = newDir(this.nowMs());
  }

  // ---- fault injection -------------------------------------------------------------------------

  /** The next fsync (of a file handle or a directory, see `target`) under `pathPrefix` fails with EIO. */
  failNextFsync(pathPrefix?: string, options: { target?: FsyncTarget } = {}): void {
    this.fsyncFaults.push({ pathPrefix: pathPrefix === undefined ? undefined : norm(pathPrefix), target: options.target ?? "any" });
  }

  /**
   * The next handle write under `pathPrefix` fails with EIO. With `torn`, that many bytes of it (at most
   * the whole write) reach the file before the error, like a short write followed by a failure.
   */
  failNextWrite(pathPrefix?: string, options: { torn?: number } = {}): void {
    this.writeFaults.push({ pathPrefix: pathPrefix === undefined ? undefined : norm(pathPrefix), tornBytes: options.torn ?? 0 });
  }

  /** The next handle truncate under `pathPrefix` fails with EIO, leaving the file as it was. */
  failNextTruncate(pathPrefix?: string): void {
    this.truncateFaults.push({ pathPrefix: pathPrefix === undefined ? undefined : norm(pathPrefix) });
  }

  /**
   * After `n` more bytes have been written (over all files), writes fail with ENOSPC; the write that
   * crosses the limit lands partially. Stays full until `clearFaults()` (or a new call).
   */
  enospcAfterBytes(n: number): void {
    this.bytesUntilEnospc = n;
  }

  /** After `n` more operations succeed, every call throws SimulatedHaltError until `crash()`. */
  haltAfterOps(n: number): void {
    this.opsUntilHalt = n;
  }

  clearFaults(): void {
    this.writeFaults = [];
    this.fsyncFaults = [];
    this.truncateFaults = [];
    this.bytesUntilEnospc = undefined;
    this.opsUntilHalt = undefined;
  }

  /** Loses everything that was not made durable, and kills every open handle and any pending halt. */
  crash(): void {
    this.generation += 1;
    this.opsUntilHalt = undefined;
    revert(this.root);
    this.log.push("crash");
  }

  /** Operation counts by kind, from the log (e.g. `count("fsync")`). */
  count(kind: string): number {
    return this.log.filter((line) => line === kind || line.startsWith(`${kind} `)).length;
  }

  // ---- the Fs port -----------------------------------------------------------------------------

  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const p = norm(path);
    this.step(`open ${p} ${mode}`);
    const { parent, name } = this.parentOf(p, "open");
    let node = parent.entries.get(name);
    if (node === undefined) {
      if (mode === "r") throw new MemoryFsError("ENOENT", "open", p);
      node = { kind: "file", data: new Uint8Array(0), length: 0, durable: new Uint8Array(0), mtimeMs: this.nowMs() };
      parent.entries.set(name, node);
    } else if (node.kind === "dir") {
      throw new MemoryFsError("EISDIR", "open", p);
    } else if (mode === "w") {
      node.length = 0;
      node.mtimeMs = this.nowMs();
    }
    return new MemoryFileHandle(this, node, p, this.generation);
  }

  async readFile(path: string): Promise<Uint8Array> {
    const p = norm(path);
    this.step(`readFile ${p}`);
    const node = this.lookup(p, "open");
    if (node.kind === "dir") throw new MemoryFsError("EISDIR", "read", p);
    return node.data.slice(0, node.length);
  }

  async rename(from: string, to: string): Promise<void> {
    const src = norm(from);
    const dst = norm(to);
    this.step(`rename ${src} ${dst}`);
    const a = this.parentOf(src, "rename");
    const node = a.parent.entries.get(a.name);
    if (node === undefined) throw new MemoryFsError("ENOENT", "rename", src);
    const b = this.parentOf(dst, "rename");
    if (src === dst) return;
    if (node.kind === "dir" && (dst + "/").startsWith(src + "/")) throw new MemoryFsError("EINVAL", "rename", dst);
    const existing = b.parent.entries.get(b.name);
    if (existing !== undefined) {
      if (node.kind === "file" && existing.kind === "dir") throw new MemoryFsError("EISDIR", "rename", dst);
      if (node.kind === "dir" && existing.kind === "file") throw new MemoryFsError("ENOTDIR", "rename", dst);
      if (existing.kind === "dir" && existing.entries.size > 0) throw new MemoryFsError("ENOTEMPTY", "rename", dst);
    }
    a.parent.entries.delete(a.name);
    b.parent.entries.set(b.name, node);
  }

  async fsyncDir(path: string): Promise<void> {
    const p = norm(path);
    this.step(`fsyncDir ${p}`);
    const node = this.lookup(p, "open");
    if (node.kind !== "dir") throw new MemoryFsError("ENOTDIR", "fsync", p);
    this.maybeFailFsync(p, "dir");
    node.durableEntries = new Map(node.entries);
  }

  async mkdirp(path: string): Promise<void> {
    const p = norm(path);
    this.step(`mkdirp ${p}`);
    let dir = this.root;
    for (const part of parts(p)) {
      const next = dir.entries.get(part);
      if (next === undefined) {
        const created = newDir(this.nowMs());
        dir.entries.set(part, created);
        dir = created;
      } else if (next.kind === "file") {
        throw new MemoryFsError("EEXIST", "mkdir", p);
      } else {
        dir = next;
      }
    }
  }

  async readdir(path: string): Promise<string[]> {
    const p = norm(path);
    this.step(`readdir ${p}`);
    const node = this.lookup(p, "scandir");
    if (node.kind !== "dir") throw new MemoryFsError("ENOTDIR", "scandir", p);
    return [...node.entries.keys()].sort();
  }

  async unlink(path: string): Promise<void> {
    const p = norm(path);
    this.step(`unlink ${p}`);
    const { parent, name } = this.parentOf(p, "unlink");
    const node = parent.entries.get(name);
    if (node === undefined) throw new MemoryFsError("ENOENT", "unlink", p);
    if (node.kind === "dir") throw new MemoryFsError("EISDIR", "unlink", p);
    parent.entries.delete(name);
  }

  async rmrf(path: string): Promise<void> {
    const p = norm(path);
    this.step(`rmrf ${p}`);
    if (p === "/") throw new MemoryFsError("EINVAL", "rm", p);
    const found = this.tryParentOf(p);
    // Like fs.rm with force: a missing path is not an error.
    if (found === undefined) return;
    found.parent.entries.delete(found.name);
  }

  async stat(path: string): Promise<FileStat | undefined> {
    const p = norm(path);
    this.step(`stat ${p}`);
    const node = this.tryLookup(p);
    if (node === undefined) return undefined;
    if (node.kind === "dir") return { size: 0, isDirectory: true, mtimeMs: node.mtimeMs };
    return { size: node.length, isDirectory: false, mtimeMs: node.mtimeMs };
  }

  // ---- used by handles -------------------------------------------------------------------------

  /** @internal Counts an operation against the halt budget; throws when the process is "dead". */
  step(description: string): void {
    if (this.opsUntilHalt !== undefined) {
      if (this.opsUntilHalt <= 0) throw new SimulatedHaltError(`halted before: ${description}`);
      this.opsUntilHalt -= 1;
    }
    this.log.push(description);
  }

  /** @internal */
  checkAlive(generation: number, path: string, syscall: string): void {
    if (generation !== this.generation) throw new MemoryFsError("EBADF", syscall, path);
  }

  /** @internal Applies write faults; returns how many bytes may land and the error to throw after. */
  admitWrite(path: string, length: number): { allowed: number; error?: MemoryFsError } {
    const faultIndex = this.writeFaults.findIndex((f) => matches(f, path));
    if (faultIndex >= 0) {
      const fault = this.writeFaults[faultIndex]!;
      this.writeFaults.splice(faultIndex, 1);
      return { allowed: this.spend(Math.min(fault.tornBytes, length)), error: new MemoryFsError("EIO", "write", path) };
    }
    const allowed = this.spend(length);
    if (allowed < length) return { allowed, error: new MemoryFsError("ENOSPC", "write", path) };
    return { allowed };
  }

  /** @internal */
  maybeFailFsync(path: string, kind: "file" | "dir"): void {
    const index = this.fsyncFaults.findIndex((f) => (f.target === "any" || f.target === kind) && matches(f, path));
    if (index < 0) return;
    this.fsyncFaults.splice(index, 1);
    throw new MemoryFsError("EIO", "fsync", path);
  }

  /** @internal */
  maybeFailTruncate(path: string): void {
    const index = this.truncateFaults.findIndex((f) => matches(f, path));
    if (index < 0) return;
    this.truncateFaults.splice(index, 1);
    throw new MemoryFsError("EIO", "ftruncate", path);
  }

  /** @internal */
  now(): number {
    return this.nowMs();
  }

  private spend(length: number): number {
    if (this.bytesUntilEnospc === undefined) return length;
    const allowed = Math.min(length, this.bytesUntilEnospc);
    this.bytesUntilEnospc -= allowed;
    return allowed;
  }

  private tryLookup(p: string): Node | undefined {
    let node: Node = this.root;
    for (const part of parts(p)) {
      if (node.kind !== "dir") return undefined;
      const next: Node | undefined = node.entries.get(part);
      if (next === undefined) return undefined;
      node = next;
    }
    return node;
  }

  private lookup(p: string, syscall: string): Node {
    let node: Node = this.root;
    for (const part of parts(p)) {
      if (node.kind !== "dir") throw new MemoryFsError("ENOTDIR", syscall, p);
      const next: Node | undefined = node.entries.get(part);
      if (next === undefined) throw new MemoryFsError("ENOENT", syscall, p);
      node = next;
    }
    return node;
  }

  private tryParentOf(p: string): { parent: DirNode; name: string } | undefined {
    const parent = this.tryLookup(posix.dirname(p));
    if (parent === undefined || parent.kind !== "dir") return undefined;
    const name = posix.basename(p);
    return parent.entries.has(name) ? { parent, name } : undefined;
  }

  private parentOf(p: string, syscall: string): { parent: DirNode; name: string } {
    if (p === "/") throw new MemoryFsError("EINVAL", syscall, p);
    const parent = this.lookup(posix.dirname(p), syscall);
    if (parent.kind !== "dir") throw new MemoryFsError("ENOTDIR", syscall, p);
    return { parent, name: posix.basename(p) };
  }
}

class MemoryFileHandle implements FileHandle {
  private closed = false;

  constructor(
    private readonly fs: MemoryFs,
    private readonly node: FileNode,
    private readonly path: string,
    private readonly generation: number,
  ) {}

  async write(data: Uint8Array, position?: number): Promise<void> {
    this.enter(`write ${this.path} ${data.length}@${position ?? "end"}`, "write");
    const at = position ?? this.node.length;
    const { allowed, error } = this.fs.admitWrite(this.path, data.length);
    if (allowed > 0) this.put(data.subarray(0, allowed), at);
    if (error !== undefined) throw error;
  }

  async read(length: number, position: number): Promise<Uint8Array> {
    this.enter(`read ${this.path} ${length}@${position}`, "read");
    const end = Math.min(this.node.length, position + length);
    return end <= position ? new Uint8Array(0) : this.node.data.slice(position, end);
  }

  async readInto(target: Uint8Array, position: number): Promise<number> {
    this.enter(`read ${this.path} ${target.length}@${position}`, "read");
    const end = Math.min(this.node.length, position + target.length);
    if (end <= position) return 0;
    target.set(this.node.data.subarray(position, end));
    return end - position;
  }

  async truncate(length: number): Promise<void> {
    this.enter(`truncate ${this.path} ${length}`, "ftruncate");
    this.fs.maybeFailTruncate(this.path);
    if (length > this.node.length) {
      this.reserve(length);
      this.node.data.fill(0, this.node.length, length);
    }
    this.node.length = length;
    this.node.mtimeMs = this.fs.now();
  }

  async fsync(): Promise<void> {
    this.enter(`fsync ${this.path}`, "fsync");
    this.fs.maybeFailFsync(this.path, "file");
    this.node.durable = this.node.data.slice(0, this.node.length);
  }

  async size(): Promise<number> {
    this.enter(`size ${this.path}`, "fstat");
    return this.node.length;
  }

  async close(): Promise<void> {
    this.enter(`close ${this.path}`, "close");
    this.closed = true;
  }

  private enter(description: string, syscall: string): void {
    this.fs.step(description);
    this.fs.checkAlive(this.generation, this.path, syscall);
    if (this.closed) throw new MemoryFsError("EBADF", syscall, this.path);
  }

  private put(bytes: Uint8Array, at: number): void {
    const end = at + bytes.length;
    this.reserve(end);
    // A write past the end leaves a hole of zeros, as a sparse file reads.
    if (at > this.node.length) this.node.data.fill(0, this.node.length, at);
    this.node.data.set(bytes, at);
    if (end > this.node.length) this.node.length = end;
    this.node.mtimeMs = this.fs.now();
  }

  private reserve(capacity: number): void {
    if (capacity <= this.node.data.length) return;
    const grown = new Uint8Array(Math.max(capacity, this.node.data.length * 2, 64));
    grown.set(this.node.data.subarray(0, this.node.length));
    this.node.data = grown;
  }
}

function revert(dir: DirNode): void {
  dir.entries = new Map(dir.durableEntries);
  for (const child of dir.entries.values()) {
    if (child.kind === "dir") {
      revert(child);
    } else {
      child.data = child.durable.slice();
      child.length = child.durable.length;
    }
  }
}

function matches(fault: PendingFault, path: string): boolean {
  return fault.pathPrefix === undefined || path.startsWith(fault.pathPrefix);
}

/** Relative paths are taken from the root, so "data/x" and "/data/x" name the same file. */
function norm(path: string): string {
  return posix.resolve("/", path);
}

function parts(p: string): string[] {
  return p.split("/").filter((part) => part.length > 0);
}
