/**
 * SASL/PLAIN (RFC 4616) as Apache Kafka's PlainSaslServer serves it: one message,
 * `[authzid] NUL authcid NUL passwd`, checked against the users the broker was given, with Apache's
 * messages to the client. Pure: the password check is injected (sasl-plain-users.ts reads the users file).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { SaslServerExchange, SaslStep } from "./scram.ts";

export interface PlainMessage {
  readonly authzid: string;
  readonly username: string;
  readonly password: string;
}

/**
 * Splits a PLAIN message into its three parts, or says why it is not one (Apache's wording: the message
 * is read as UTF-8 and must have exactly three NUL-separated tokens).
 */
export function parsePlainMessage(bytes: Uint8Array): { ok: true; value: PlainMessage } | { ok: false; reason: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, reason: "Invalid SASL/PLAIN response: not UTF-8" };
  }
  const tokens = text.split("\u0000");
  if (tokens.length !== 3) return { ok: false, reason: `Invalid SASL/PLAIN response: expected 3 tokens, got ${Math.min(tokens.length, 4)}` };
  return { ok: true, value: { authzid: tokens[0]!, username: tokens[1]!, password: tokens[2]! } };
}

/** Compares two passwords in time that does not depend on where they differ (both hashed first). */
export function passwordsEqual(a: string, b: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();
  return timingSafeEqual(digest(a), digest(b));
}

export interface PlainServerOptions {
  /** Whether `password` is the user's; false for an unknown user. */
  verify(username: string, password: string): boolean;
}

/** One PLAIN exchange: a single token, answered with an empty one. */
export class PlainServer implements SaslServerExchange {
  readonly mechanism = "PLAIN";
  private done = false;

  constructor(private readonly options: PlainServerOptions) {}

  evaluate(token: Uint8Array): SaslStep {
    if (this.done) return { kind: "failed", reason: "a PLAIN token after the exchange ended" };
    this.done = true;
    const parsed = parsePlainMessage(token);
    if (!parsed.ok) return { kind: "failed", reason: parsed.reason, clientMessage: parsed.reason };
    const { authzid, username, password } = parsed.value;
    if (username === "") return refused("no user name", "Authentication failed: username not specified");
    if (password === "") return refused("no password", "Authentication failed: password not specified");
    if (!this.options.verify(username, password)) return refused("unknown user or wrong password", "Authentication failed: Invalid username or password");
    if (authzid !== "" && authzid !== username) {
      return refused("authorization id differs from the user name", "Authentication failed: Client requested an authorization id that is different from username");
    }
    return { kind: "complete", token: new Uint8Array(0), username };
  }
}

const refused = (reason: string, clientMessage: string): SaslStep => ({ kind: "failed", reason, clientMessage });

/**
 * The PLAIN users file (sasl.plain.users.file): one `name=password` a line, split at the first `=` (so a
 * name has no `=`; a password may), the name trimmed, the password kept as written but for a trailing
 * "\r"; blank lines and lines starting with `#` are skipped. A line without `=`, an empty name or
 * password, or a name given twice is an error naming the line (never a password).
 */
export function parsePlainUsers(text: string): { ok: true; users: Map<string, string> } | { ok: false; reason: string } {
  const users = new Map<string, string>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.endsWith("\r") ? lines[i]!.slice(0, -1) : lines[i]!;
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const eq = line.indexOf("=");
    const where = `line ${i + 1}`;
    if (eq < 0) return { ok: false, reason: `${where}: expected name=password` };
    const name = line.slice(0, eq).trim();
    const password = line.slice(eq + 1);
    if (name === "") return { ok: false, reason: `${where}: empty user name` };
    if (password === "") return { ok: false, reason: `${where}: empty password for ${JSON.stringify(name)}` };
    if (users.has(name)) return { ok: false, reason: `${where}: user ${JSON.stringify(name)} given twice` };
    users.set(name, password);
  }
  return { ok: true, users };
}
