/**
 * What an operator reads when a listener cannot bind: which listener, which address and port, and why in
 * words, as a ConfigError (exit 2: the configuration or the machine must change before a restart helps).
 * Bun's own messages ("Failed to listen at 127.0.0.1", "Is port 9644 in use?") name neither the listener
 * nor the port. Errors that are not about the address stay what they are.
 */
import { ConfigError } from "./errors.ts";

const REASONS: Record<string, string> = {
  EADDRINUSE: "the address is already in use (another broker or process listens there)",
  EADDRNOTAVAIL: "the address is not one of this machine's",
  EACCES: "permission denied (ports below 1024 need privileges)",
};

export function formatHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The error to throw for `error`, raised by binding `what` (e.g. "the Kafka listener") to host:port. */
export function listenError(what: string, host: string, port: number, error: unknown): Error {
  const code = (error as { code?: unknown } | null)?.code;
  const reason = typeof code === "string" ? REASONS[code] : undefined;
  const where = `${what} cannot listen on ${formatHostPort(host, port)}`;
  if (reason !== undefined) return new ConfigError(`${where}: ${reason}`);
  return new Error(`${where}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}
