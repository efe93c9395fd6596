/**
 * The project's own error classes. Three kinds, never mixed:
 * - protocol outcomes are data (error codes in responses), not exceptions;
 * - malformed input raises DecodeError (the connection is answered or closed, the broker goes on);
 * - a broken invariant or a failed fsync raises FatalError (the process exits; recovery runs at start).
 */
export class DecodeError extends Error {
  override readonly name = "DecodeError";
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** A persisted file that fails its version or checksum check. Never replaced by empty state. */
export class CorruptStateError extends Error {
  override readonly name = "CorruptStateError";
  constructor(
    readonly path: string,
    /** What is wrong with the file, without its path (the message is `<path>: <reason>`). */
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

export class FatalError extends Error {
  override readonly name = "FatalError";
}
