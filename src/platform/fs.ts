/**
 * The file system as a port. Storage code takes an `Fs` so that tests can substitute an in-memory
 * twin that loses unsynced data on a simulated crash and fails the next write or fsync on demand.
 * Only main.ts (and tests) construct implementations.
 */
export interface FileHandle {
  /** Writes all of `data` at `position` (or at the current end when position is undefined). */
  write(data: Uint8Array, position?: number): Promise<void>;
  /** Reads up to `length` bytes at `position`; returns fewer at end of file. */
  read(length: number, position: number): Promise<Uint8Array>;
  /**
   * Reads up to `target.length` bytes at `position` into `target` (memory the caller reuses, so that a
   * large read lands in pages already mapped); resolves with the bytes read, fewer at end of file.
   * Optional: callers fall back to `read` and a copy.
   */
  readInto?(target: Uint8Array, position: number): Promise<number>;
  truncate(length: number): Promise<void>;
  /** Makes every previous write durable. A failure here is fatal to the caller's invariant. */
  fsync(): Promise<void>;
  size(): Promise<number>;
  close(): Promise<void>;
}

export interface FileStat {
  size: number;
  isDirectory: boolean;
  mtimeMs: number;
}

/** The size of the file system a path is on, and what an unprivileged writer may still use of it. */
export interface DiskSpace {
  totalBytes: number;
  usableBytes: number;
}

export type OpenMode =
  /** read only; the file must exist */
  | "r"
  /** read and write; created if missing */
  | "rw"
  /** read and write; created, truncated if present */
  | "w";

export interface Fs {
  open(path: string, mode: OpenMode): Promise<FileHandle>;
  readFile(path: string): Promise<Uint8Array>;
  rename(from: string, to: string): Promise<void>;
  /** fsyncs a directory so that renames and creations inside it are durable. */
  fsyncDir(path: string): Promise<void>;
  mkdirp(path: string): Promise<void>;
  readdir(path: string): Promise<string[]>;
  unlink(path: string): Promise<void>;
  /** Removes a directory and everything under it. */
  rmrf(path: string): Promise<void>;
  /** undefined when the path does not exist. */
  stat(path: string): Promise<FileStat | undefined>;
  /**
   * statfs(2) of the file system holding `path` (DescribeLogDirs' total and usable bytes). Optional:
   * a file system without it (the tests' in-memory one) has no size to tell.
   */
  diskSpace?(path: string): Promise<DiskSpace>;
}
