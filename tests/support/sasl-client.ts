/**
 * The client's side of SASL/PLAIN and SCRAM for tests: builds the messages a Kafka client sends and checks
 * the server's signature, with the math of src/domain/security/scram.ts (whose RFC vectors pin it).
 */
import {
  clientProof,
  parseServerFinal,
  parseServerFirst,
  saltedPassword,
  saslNameOf,
  serverKey,
  serverSignature,
  type ScramMechanismInfo,
} from "../../src/domain/security/scram.ts";

const utf8 = new TextEncoder();
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

export function plainToken(username: string, password: string, authzid = ""): Uint8Array {
  return utf8.encode(`${authzid}\u0000${username}\u0000${password}`);
}

export class ScramTestClient {
  readonly clientFirstBare: string;
  private authMessage = "";
  private salted: Uint8Array | undefined;

  constructor(
    private readonly mechanism: ScramMechanismInfo,
    readonly username: string,
    private readonly password: string,
    readonly clientNonce = "fyko+d2lbbFgONRv9qkxdawL",
    private readonly gs2Header = "n,,",
    extensions = "",
  ) {
    this.clientFirstBare = `n=${saslNameOf(username)},r=${clientNonce}${extensions}`;
  }

  clientFirst(): Uint8Array {
    return utf8.encode(this.gs2Header + this.clientFirstBare);
  }

  /** The client-final for the server-first received; `tamper` changes the proof (a wrong password's proof). */
  clientFinal(serverFirst: Uint8Array, options: { password?: string; nonce?: string; channelBinding?: string } = {}): Uint8Array {
    const parsed = parseServerFirst(serverFirst);
    if (!parsed.ok) throw new Error(parsed.reason);
    const { nonce, salt, iterations } = parsed.value;
    const binding = options.channelBinding ?? Buffer.from(this.gs2Header).toString("base64");
    const withoutProof = `c=${binding},r=${options.nonce ?? nonce}`;
    this.authMessage = `${this.clientFirstBare},${text(serverFirst)},${withoutProof}`;
    this.salted = saltedPassword(this.mechanism, options.password ?? this.password, salt, iterations);
    const proof = clientProof(this.mechanism, this.salted, this.authMessage);
    return utf8.encode(`${withoutProof},p=${Buffer.from(proof).toString("base64")}`);
  }

  /** Whether server-final carries the signature only the holder of the server key can make. */
  verifyServerFinal(serverFinal: Uint8Array): boolean {
    const parsed = parseServerFinal(serverFinal);
    if (!parsed.ok || parsed.value.signature === undefined || this.salted === undefined) return false;
    const expected = serverSignature(this.mechanism, serverKey(this.mechanism, this.salted), this.authMessage);
    return Buffer.from(expected).equals(Buffer.from(parsed.value.signature));
  }
}
