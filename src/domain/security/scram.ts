/**
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Apache Kafka serves them: the key derivation,
 * the four messages, and the server's side of one exchange. Pure: no I/O, the randomness of the server
 * nonce injected (tests use the RFCs' nonces).
 *
 * What the server accepts, as Apache's ScramMessages do, with RFC 5802's stricter rules where Apache is
 * looser and no client is known to depend on it:
 * - client-first: `n,[a=authzid],n=saslname,r=nonce[,ext=value...]`. Only the gs2 header `n` (no channel
 *   binding): `y` and `p=` are malformed, as in Apache. The reserved `m=` attribute is refused (RFC 5802
 *   says its presence must fail the exchange; Apache ignores it). A saslname is ASCII without `,` and `=`,
 *   except `=2C` and `=3D`, which stand for them. Extensions are read; `tokenauth=true` (delegation
 *   tokens, which bunka does not have) fails the exchange, any other extension is ignored, as in Apache.
 * - client-final: `c=base64,r=nonce[,ext...],p=base64`. The channel binding must be the client-first's
 *   gs2 header, base64 (`biws` for `n,,`; Apache ignores `c=`). The nonce need only end with the server's
 *   part, as in Apache: librdkafka 2.0.x (Debian 12's kcat) sends its own part twice before it.
 * - The auth message is built from the messages as received (RFC 5802), which is what Apache's
 *   re-formatting gives for every message its clients send.
 * - The password is used as UTF-8 without SASLprep, as Apache's ScramFormatter does (clients that apply
 *   SASLprep give the same bytes for ASCII passwords).
 */
import { createHash, createHmac, pbkdf2Sync, timingSafeEqual } from "node:crypto";

export type ScramMechanismName = "SCRAM-SHA-256" | "SCRAM-SHA-512";

export interface ScramMechanismInfo {
  /** One of ScramMechanismName for the mechanisms served; SCRAM-SHA-1 exists only for RFC 5802's test vectors. */
  readonly name: string;
  /** The type byte of AlterUserScramCredentials / DescribeUserScramCredentials (Apache's ScramMechanism). */
  readonly type: number;
  readonly hash: "sha1" | "sha256" | "sha512";
  readonly hashBytes: number;
  readonly minIterations: number;
  readonly maxIterations: number;
}

export const SCRAM_MECHANISMS: readonly ScramMechanismInfo[] = [
  { name: "SCRAM-SHA-256", type: 1, hash: "sha256", hashBytes: 32, minIterations: 4096, maxIterations: 16384 },
  { name: "SCRAM-SHA-512", type: 2, hash: "sha512", hashBytes: 64, minIterations: 4096, maxIterations: 16384 },
];

export function scramMechanism(name: string): ScramMechanismInfo | undefined {
  return SCRAM_MECHANISMS.find((m) => m.name === name);
}

export function scramMechanismOfType(type: number): ScramMechanismInfo | undefined {
  return SCRAM_MECHANISMS.find((m) => m.type === type);
}

/** What the broker keeps of a user's password for one mechanism: never the password itself. */
export interface ScramCredential {
  readonly salt: Uint8Array;
  readonly storedKey: Uint8Array;
  readonly serverKey: Uint8Array;
  readonly iterations: number;
}

const utf8 = new TextEncoder();
const bytesOf = (text: string) => utf8.encode(text);

function hmac(m: ScramMechanismInfo, key: Uint8Array, data: Uint8Array): Uint8Array {
  return new Uint8Array(createHmac(m.hash, key).update(data).digest());
}

function hash(m: ScramMechanismInfo, data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash(m.hash).update(data).digest());
}

function xor(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length !== b.length) throw new RangeError(`xor of ${a.length} and ${b.length} bytes`);
  const out = new Uint8Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}

/** Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC, one block. */
export function saltedPassword(m: ScramMechanismInfo, password: string, salt: Uint8Array, iterations: number): Uint8Array {
  return new Uint8Array(pbkdf2Sync(bytesOf(password), salt, iterations, m.hashBytes, m.hash));
}

export const clientKey = (m: ScramMechanismInfo, salted: Uint8Array) => hmac(m, salted, bytesOf("Client Key"));
export const serverKey = (m: ScramMechanismInfo, salted: Uint8Array) => hmac(m, salted, bytesOf("Server Key"));
export const storedKey = (m: ScramMechanismInfo, key: Uint8Array) => hash(m, key);

/** The credential a salted password gives (AlterUserScramCredentials sends salt and salted password). */
export function credentialOf(m: ScramMechanismInfo, salt: Uint8Array, salted: Uint8Array, iterations: number): ScramCredential {
  return { salt, storedKey: storedKey(m, clientKey(m, salted)), serverKey: serverKey(m, salted), iterations };
}

/** ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage): what a client sends (tests, the test client). */
export function clientProof(m: ScramMechanismInfo, salted: Uint8Array, authMessage: string): Uint8Array {
  const key = clientKey(m, salted);
  return xor(key, hmac(m, storedKey(m, key), bytesOf(authMessage)));
}

/** ServerSignature = HMAC(ServerKey, AuthMessage). */
export function serverSignature(m: ScramMechanismInfo, key: Uint8Array, authMessage: string): Uint8Array {
  return hmac(m, key, bytesOf(authMessage));
}

/** Whether `proof` proves knowledge of the password behind `credential`: H(proof XOR ClientSignature) = StoredKey. */
export function proofMatches(m: ScramMechanismInfo, credential: ScramCredential, authMessage: string, proof: Uint8Array): boolean {
  if (proof.length !== m.hashBytes) return false;
  const signature = hmac(m, credential.storedKey, bytesOf(authMessage));
  const computed = hash(m, xor(proof, signature));
  return computed.length === credential.storedKey.length && timingSafeEqual(computed, credential.storedKey);
}

// ------------------------------------------------------------------------------------------- messages

// Apache's character classes (ScramMessages), spelled without Java's class intersection.
const VALUE = "[\\x01-\\x2B\\x2D-\\x7F]+"; // any ASCII but NUL and ","
const PRINTABLE = "[\\x21-\\x2B\\x2D-\\x7E]+"; // printable ASCII but ","
const SASLNAME = "(?:[\\x01-\\x2B\\x2D-\\x3C\\x3E-\\x7F]|=2C|=3D)+";
const BASE64 = "(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?";
const EXTENSIONS = `(?:,[A-Za-z]+=${VALUE})*`;

const CLIENT_FIRST = new RegExp(`^n,(?:a=(${SASLNAME}))?,(m=${VALUE},)?n=(${SASLNAME}),r=(${PRINTABLE})(${EXTENSIONS})$`);
const CLIENT_FINAL = new RegExp(`^(c=(${BASE64}),r=(${PRINTABLE})${EXTENSIONS}),p=(${BASE64})$`);
const SERVER_FIRST = new RegExp(`^r=(${PRINTABLE}),s=(${BASE64}),i=([0-9]+)${EXTENSIONS}$`);
const SERVER_FINAL = new RegExp(`^(?:e=([\\x01-\\x2B\\x2D-\\x3C\\x3E-\\x7F]+)|v=(${BASE64}))${EXTENSIONS}$`);

export interface ClientFirstMessage {
  /** "n,," or "n,a=<authzid>,": what the client-final's channel binding must repeat. */
  readonly gs2Header: string;
  /** The authorization id asked for ("" when none), decoded. */
  readonly authzid: string;
  /** The user name, decoded from its saslname. */
  readonly username: string;
  readonly nonce: string;
  /** The message after the gs2 header, as received: the first part of the auth message. */
  readonly bare: string;
  readonly extensions: ReadonlyMap<string, string>;
}

export interface ClientFinalMessage {
  readonly channelBinding: Uint8Array;
  readonly nonce: string;
  readonly proof: Uint8Array;
  /** Everything before ",p=": the last part of the auth message. */
  readonly withoutProof: string;
}

export interface ServerFirstMessage {
  readonly nonce: string;
  readonly salt: Uint8Array;
  readonly iterations: number;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

const fail = <T>(reason: string): Parsed<T> => ({ ok: false, reason });

function decodeText(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** RFC 5802's saslname: "=2C" is ",", "=3D" is "=", any other "=" is malformed (the pattern admits none). */
export function usernameOfSaslName(saslName: string): string {
  return saslName.replaceAll("=2C", ",").replaceAll("=3D", "=");
}

/** The saslname of a user name (for the client side: tests and the test client). */
export function saslNameOf(username: string): string {
  return username.replaceAll("=", "=3D").replaceAll(",", "=2C");
}

function extensionsOf(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of text.split(",")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    map.set(part.slice(0, eq), part.slice(eq + 1));
  }
  return map;
}

export function parseClientFirst(bytes: Uint8Array): Parsed<ClientFirstMessage> {
  const text = decodeText(bytes);
  if (text === undefined) return fail("Invalid SCRAM client first message format: not UTF-8");
  const match = CLIENT_FIRST.exec(text);
  if (match === null) return fail("Invalid SCRAM client first message format");
  const [, authzid, reserved, saslName, nonce, extensions] = match;
  if (reserved !== undefined) return fail("Invalid SCRAM client first message: the reserved m= attribute is not supported");
  const gs2Header = authzid === undefined ? "n,," : `n,a=${authzid},`;
  return {
    ok: true,
    value: {
      gs2Header,
      authzid: authzid === undefined ? "" : usernameOfSaslName(authzid),
      username: usernameOfSaslName(saslName!),
      nonce: nonce!,
      bare: text.slice(gs2Header.length),
      extensions: extensionsOf(extensions!),
    },
  };
}

export function parseClientFinal(bytes: Uint8Array): Parsed<ClientFinalMessage> {
  const text = decodeText(bytes);
  if (text === undefined) return fail("Invalid SCRAM client final message format: not UTF-8");
  const match = CLIENT_FINAL.exec(text);
  if (match === null) return fail("Invalid SCRAM client final message format");
  const [, withoutProof, channel, nonce, proof] = match;
  return {
    ok: true,
    value: {
      channelBinding: new Uint8Array(Buffer.from(channel!, "base64")),
      nonce: nonce!,
      proof: new Uint8Array(Buffer.from(proof!, "base64")),
      withoutProof: withoutProof!,
    },
  };
}

/** The client's reading of server-first (tests and the test client). */
export function parseServerFirst(bytes: Uint8Array): Parsed<ServerFirstMessage> {
  const text = decodeText(bytes);
  const match = text === undefined ? null : SERVER_FIRST.exec(text);
  if (match === null) return fail("Invalid SCRAM server first message format");
  const iterations = Number(match[3]);
  if (!Number.isSafeInteger(iterations) || iterations <= 0) return fail("Invalid SCRAM server first message format: invalid iterations");
  return { ok: true, value: { nonce: match[1]!, salt: new Uint8Array(Buffer.from(match[2]!, "base64")), iterations } };
}

/** The client's reading of server-final: the signature, or the server's error (tests and the test client). */
export function parseServerFinal(bytes: Uint8Array): Parsed<{ signature?: Uint8Array; error?: string }> {
  const text = decodeText(bytes);
  const match = text === undefined ? null : SERVER_FINAL.exec(text);
  if (match === null) return fail("Invalid SCRAM server final message format");
  if (match[1] !== undefined) return { ok: true, value: { error: match[1] } };
  return { ok: true, value: { signature: new Uint8Array(Buffer.from(match[2]!, "base64")) } };
}

export function formatServerFirst(message: ServerFirstMessage): string {
  return `r=${message.nonce},s=${Buffer.from(message.salt).toString("base64")},i=${message.iterations}`;
}

export function formatServerFinal(signature: Uint8Array): string {
  return `v=${Buffer.from(signature).toString("base64")}`;
}

// ------------------------------------------------------------------------------------------- exchange

/** What one step of a server exchange gives (PLAIN's exchange answers in the same shape: sasl-plain.ts). */
export type SaslStep =
  | { kind: "challenge"; token: Uint8Array }
  | { kind: "complete"; token: Uint8Array; username: string }
  /**
   * `clientMessage`: the message the client is told, when Apache tells it one (its
   * SaslAuthenticationException); absent, the client gets Apache's generic "Authentication failed during
   * authentication due to invalid credentials with SASL mechanism X". `reason` is for the log only, and
   * carries no secret.
   */
  | { kind: "failed"; reason: string; clientMessage?: string };

/** The server's side of one SASL exchange. */
export interface SaslServerExchange {
  readonly mechanism: string;
  evaluate(token: Uint8Array): SaslStep;
}

export interface ScramServerOptions {
  mechanism: ScramMechanismInfo;
  /** The user's credential for this mechanism, or undefined for a user without one. */
  credentialOf(username: string): ScramCredential | undefined;
  /** The server's part of the nonce: printable ASCII without ",". */
  serverNonce(): string;
}

type ScramServerState =
  | { phase: "client-first" }
  | { phase: "client-final"; first: ClientFirstMessage; serverFirst: string; nonce: string; credential: ScramCredential }
  | { phase: "done" };

/**
 * One SCRAM exchange on the server (Apache's ScramSaslServer): client-first -> server-first,
 * client-final -> server-final. Any failure ends it; a token after the end fails too.
 */
export class ScramServer implements SaslServerExchange {
  private state: ScramServerState = { phase: "client-first" };

  constructor(private readonly options: ScramServerOptions) {}

  get mechanism(): string {
    return this.options.mechanism.name;
  }

  evaluate(token: Uint8Array): SaslStep {
    const state = this.state;
    this.state = { phase: "done" };
    switch (state.phase) {
      case "client-first":
        return this.clientFirst(token);
      case "client-final":
        return this.clientFinal(token, state);
      case "done":
        return { kind: "failed", reason: "a SCRAM token after the exchange ended" };
    }
  }

  private clientFirst(token: Uint8Array): SaslStep {
    const { mechanism, credentialOf } = this.options;
    const parsed = parseClientFirst(token);
    if (!parsed.ok) return { kind: "failed", reason: parsed.reason };
    const first = parsed.value;
    if (/^true$/i.test(first.extensions.get("tokenauth") ?? "")) {
      return { kind: "failed", reason: "delegation token authentication (tokenauth) is not supported" };
    }
    const credential = credentialOf(first.username);
    if (credential === undefined) return { kind: "failed", reason: `no ${mechanism.name} credential for the user` };
    if (first.authzid !== "" && first.authzid !== first.username) {
      return {
        kind: "failed",
        reason: "authorization id differs from the user name",
        clientMessage: "Authentication failed: Client requested an authorization id that is different from username",
      };
    }
    if (credential.iterations < mechanism.minIterations) {
      return { kind: "failed", reason: `Iterations ${credential.iterations} is less than the minimum ${mechanism.minIterations} for ${mechanism.name}` };
    }
    const nonce = first.nonce + this.options.serverNonce();
    const serverFirst = formatServerFirst({ nonce, salt: credential.salt, iterations: credential.iterations });
    this.state = { phase: "client-final", first, serverFirst, nonce, credential };
    return { kind: "challenge", token: bytesOf(serverFirst) };
  }

  private clientFinal(token: Uint8Array, state: Extract<ScramServerState, { phase: "client-final" }>): SaslStep {
    const { mechanism } = this.options;
    const parsed = parseClientFinal(token);
    if (!parsed.ok) return { kind: "failed", reason: parsed.reason };
    const final = parsed.value;
    // Apache's rule: the nonce need only end with the server's part (librdkafka 2.0.x repeats its own part).
    if (!final.nonce.endsWith(state.nonce.slice(state.first.nonce.length))) return { kind: "failed", reason: "Invalid client nonce in the final client message." };
    if (Buffer.from(final.channelBinding).toString("latin1") !== state.first.gs2Header) {
      return { kind: "failed", reason: "the channel binding of the final client message is not the first message's gs2 header" };
    }
    const authMessage = `${state.first.bare},${state.serverFirst},${final.withoutProof}`;
    if (!proofMatches(mechanism, state.credential, authMessage, final.proof)) return { kind: "failed", reason: "Invalid client credentials" };
    const signature = serverSignature(mechanism, state.credential.serverKey, authMessage);
    return { kind: "complete", token: bytesOf(formatServerFinal(signature)), username: state.first.username };
  }
}
