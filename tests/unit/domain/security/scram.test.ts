/**
 * SCRAM (domain/security/scram.ts): the math against RFC 5802's (SHA-1) and RFC 7677's (SHA-256) worked
 * examples, SHA-512 against the definitions, every malformed message, and the server exchange's checks.
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import {
  clientKey,
  clientProof,
  credentialOf,
  formatServerFirst,
  parseClientFinal,
  parseClientFirst,
  parseServerFinal,
  parseServerFirst,
  proofMatches,
  saltedPassword,
  saslNameOf,
  scramMechanism,
  scramMechanismOfType,
  ScramServer,
  serverKey,
  serverSignature,
  storedKey,
  usernameOfSaslName,
  type ScramCredential,
  type ScramMechanismInfo,
} from "../../../../src/domain/security/scram.ts";
import { ScramTestClient } from "../../../support/sasl-client.ts";

const utf8 = new TextEncoder();
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
const fromB64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

const SHA1: ScramMechanismInfo = { name: "SCRAM-SHA-1", type: 0, hash: "sha1", hashBytes: 20, minIterations: 4096, maxIterations: 16384 };
const SHA256 = scramMechanism("SCRAM-SHA-256")!;
const SHA512 = scramMechanism("SCRAM-SHA-512")!;

/** RFC 5802 section 5 and RFC 7677 section 3: user "user", password "pencil". */
const vectors = [
  {
    rfc: "RFC 5802 (SCRAM-SHA-1)",
    mechanism: SHA1,
    clientFirst: "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    serverNonce: "3rfcNHYJY1ZVvWVs7j",
  },
  {
    rfc: "RFC 7677 (SCRAM-SHA-256)",
    mechanism: SHA256,
    clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    serverNonce: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
  },
];

function credentialFor(mechanism: ScramMechanismInfo, password: string, salt: Uint8Array, iterations: number): ScramCredential {
  return credentialOf(mechanism, salt, saltedPassword(mechanism, password, salt, iterations), iterations);
}

describe("RFC test vectors", () => {
  for (const v of vectors) {
    test(`${v.rfc}: client proof and server signature`, () => {
      const first = parseServerFirst(utf8.encode(v.serverFirst));
      if (!first.ok) throw new Error(first.reason);
      const salted = saltedPassword(v.mechanism, "pencil", first.value.salt, first.value.iterations);
      const withoutProof = v.clientFinal.slice(0, v.clientFinal.indexOf(",p="));
      const authMessage = `${v.clientFirst.slice(3)},${v.serverFirst},${withoutProof}`;
      expect(`p=${b64(clientProof(v.mechanism, salted, authMessage))}`).toBe(v.clientFinal.slice(v.clientFinal.indexOf("p=")));
      expect(`v=${b64(serverSignature(v.mechanism, serverKey(v.mechanism, salted), authMessage))}`).toBe(v.serverFinal);
    });

    test(`${v.rfc}: the server exchange answers the RFC's messages`, () => {
      const first = parseServerFirst(utf8.encode(v.serverFirst));
      if (!first.ok) throw new Error(first.reason);
      const credential = credentialFor(v.mechanism, "pencil", first.value.salt, first.value.iterations);
      const server = new ScramServer({ mechanism: v.mechanism, credentialOf: (u) => (u === "user" ? credential : undefined), serverNonce: () => v.serverNonce });
      const step1 = server.evaluate(utf8.encode(v.clientFirst));
      expect(step1.kind).toBe("challenge");
      expect(text((step1 as { token: Uint8Array }).token)).toBe(v.serverFirst);
      const step2 = server.evaluate(utf8.encode(v.clientFinal));
      expect(step2).toEqual({ kind: "complete", token: utf8.encode(v.serverFinal), username: "user" });
      // Nothing after the end.
      expect(server.evaluate(utf8.encode(v.clientFinal)).kind).toBe("failed");
    });
  }

  test("Hi is the HMAC chain of RFC 5802 for SHA-512 (and the other two)", () => {
    for (const m of [SHA1, SHA256, SHA512]) {
      const salt = utf8.encode("salt-bytes");
      let u = createHmac(m.hash, "pencil").update(Buffer.concat([salt, Buffer.from([0, 0, 0, 1])])).digest();
      const result = Buffer.from(u);
      for (let i = 2; i <= 4096; i++) {
        u = createHmac(m.hash, "pencil").update(u).digest();
        for (let j = 0; j < result.length; j++) result[j]! ^= u[j]!;
      }
      expect(b64(saltedPassword(m, "pencil", salt, 4096))).toBe(result.toString("base64"));
    }
  });

  test("credentialOf: StoredKey = H(HMAC(salted, 'Client Key')), ServerKey = HMAC(salted, 'Server Key')", () => {
    const salted = saltedPassword(SHA512, "pencil", utf8.encode("s"), 4096);
    const c = credentialOf(SHA512, utf8.encode("s"), salted, 4096);
    expect(b64(c.storedKey)).toBe(b64(storedKey(SHA512, clientKey(SHA512, salted))));
    expect(b64(c.serverKey)).toBe(createHmac("sha512", salted).update("Server Key").digest("base64"));
    expect(c.storedKey.length).toBe(64);
  });

  test("mechanisms and their type bytes are Apache's", () => {
    expect(scramMechanismOfType(1)?.name).toBe("SCRAM-SHA-256");
    expect(scramMechanismOfType(2)?.name).toBe("SCRAM-SHA-512");
    expect(scramMechanismOfType(0)).toBeUndefined();
    expect(scramMechanism("SCRAM-SHA-1")).toBeUndefined();
  });
});

describe("client-first", () => {
  test("parses user, nonce, authzid, extensions and keeps the bare message as received", () => {
    const parsed = parseClientFirst(utf8.encode("n,a=al=2Cice,n=al=2Cice,r=abc,tokenauth=false,x=y=z"));
    expect(parsed).toEqual({
      ok: true,
      value: {
        gs2Header: "n,a=al=2Cice,",
        authzid: "al,ice",
        username: "al,ice",
        nonce: "abc",
        bare: "n=al=2Cice,r=abc,tokenauth=false,x=y=z",
        extensions: new Map([["tokenauth", "false"], ["x", "y=z"]]),
      },
    });
  });

  test("saslname escapes", () => {
    expect(usernameOfSaslName("a=3Db=2Cc")).toBe("a=b,c");
    expect(saslNameOf("a=b,c")).toBe("a=3Db=2Cc");
  });

  const malformed: [string, string][] = [
    ["empty", ""],
    ["channel binding asked for (y)", "y,,n=user,r=abc"],
    ["channel binding asked for (p=)", "p=tls-unique,,n=user,r=abc"],
    ["no gs2 header", "n=user,r=abc"],
    ["reserved m= attribute", "n,,m=ext,n=user,r=abc"],
    ["no user", "n,,r=abc"],
    ["empty user", "n,,n=,r=abc"],
    ["bad escape in the user", "n,,n=us=er,r=abc"],
    ["no nonce", "n,,n=user"],
    ["empty nonce", "n,,n=user,r="],
    ["nonce with a space", "n,,n=user,r=a b"],
    ["attributes out of order", "n,,r=abc,n=user"],
    ["extension without a value", "n,,n=user,r=abc,ext"],
    ["extension with a digit in its name", "n,,n=user,r=abc,e1=x"],
    ["trailing comma", "n,,n=user,r=abc,"],
    ["non-ASCII user", "n,,n=üser,r=abc"],
  ];
  for (const [what, message] of malformed) {
    test(`refused: ${what}`, () => {
      expect(parseClientFirst(utf8.encode(message)).ok).toBe(false);
    });
  }

  test("refused: not UTF-8", () => {
    expect(parseClientFirst(new Uint8Array([0x6e, 0x2c, 0x2c, 0xff])).ok).toBe(false);
  });
});

describe("client-final", () => {
  test("parses binding, nonce, proof and the part the auth message takes", () => {
    const parsed = parseClientFinal(utf8.encode("c=biws,r=abcdef,p=dGVzdA=="));
    expect(parsed).toEqual({ ok: true, value: { channelBinding: utf8.encode("n,,"), nonce: "abcdef", proof: utf8.encode("test"), withoutProof: "c=biws,r=abcdef" } });
  });

  const malformed: [string, string][] = [
    ["empty", ""],
    ["no proof", "c=biws,r=abc"],
    ["no channel binding", "r=abc,p=dGVzdA=="],
    ["bad base64 proof", "c=biws,r=abc,p=dGVzdA="],
    ["bad base64 binding", "c=biw,r=abc,p=dGVzdA=="],
    ["no nonce", "c=biws,p=dGVzdA=="],
    ["proof not last", "c=biws,p=dGVzdA==,r=abc"],
    ["trailing comma", "c=biws,r=abc,p=dGVzdA==,"],
  ];
  for (const [what, message] of malformed) {
    test(`refused: ${what}`, () => {
      expect(parseClientFinal(utf8.encode(message)).ok).toBe(false);
    });
  }
});

describe("server messages (the test client's side)", () => {
  test("server-first round trip, iterations checked", () => {
    const message = formatServerFirst({ nonce: "ab", salt: utf8.encode("salt"), iterations: 4096 });
    expect(message).toBe("r=ab,s=c2FsdA==,i=4096");
    expect(parseServerFirst(utf8.encode(message))).toEqual({ ok: true, value: { nonce: "ab", salt: utf8.encode("salt"), iterations: 4096 } });
    expect(parseServerFirst(utf8.encode("r=ab,s=c2FsdA==,i=0")).ok).toBe(false);
    expect(parseServerFirst(utf8.encode("r=ab,s=c2FsdA==")).ok).toBe(false);
  });

  test("server-final: a signature or an error", () => {
    expect(parseServerFinal(utf8.encode("v=dGVzdA=="))).toEqual({ ok: true, value: { signature: utf8.encode("test") } });
    expect(parseServerFinal(utf8.encode("e=invalid-proof"))).toEqual({ ok: true, value: { error: "invalid-proof" } });
    expect(parseServerFinal(utf8.encode("x=1")).ok).toBe(false);
  });
});

describe("ScramServer", () => {
  const salt = utf8.encode("0123456789abcdef");
  const alice = credentialFor(SHA512, "alice-secret", salt, 4096);
  const server = (credentials: Record<string, ScramCredential> = { alice }, mechanism = SHA512) =>
    new ScramServer({ mechanism, credentialOf: (u) => credentials[u], serverNonce: () => "server-nonce" });

  test("a full exchange: the client verifies the server's signature", () => {
    const s = server();
    const client = new ScramTestClient(SHA512, "alice", "alice-secret");
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    expect(text(first.token)).toBe(`r=${client.clientNonce}server-nonce,s=${b64(salt)},i=4096`);
    const final = s.evaluate(client.clientFinal(first.token));
    if (final.kind !== "complete") throw new Error(JSON.stringify(final));
    expect(final.username).toBe("alice");
    expect(client.verifyServerFinal(final.token)).toBe(true);
  });

  test("a user with = and , in the name", () => {
    const s = server({ "a=b,c": alice });
    const client = new ScramTestClient(SHA512, "a=b,c", "alice-secret");
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    expect(s.evaluate(client.clientFinal(first.token))).toMatchObject({ kind: "complete", username: "a=b,c" });
  });

  function failedFinal(options: Parameters<ScramTestClient["clientFinal"]>[1], gs2Header?: string) {
    const s = server();
    const client = new ScramTestClient(SHA512, "alice", "alice-secret", undefined, gs2Header);
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    return s.evaluate(client.clientFinal(first.token, options));
  }

  test("wrong password: failed, with no message for the client (Apache's generic one)", () => {
    const step = failedFinal({ password: "wrong" });
    expect(step).toEqual({ kind: "failed", reason: "Invalid client credentials" });
  });

  test("a nonce that does not end with the server's part fails", () => {
    expect(failedFinal({ nonce: "other" }).kind).toBe("failed");
    expect(failedFinal({ nonce: "Xfyko+d2lbbFgONRv9qkxdawLserver-nonc" }).kind).toBe("failed");
    expect(failedFinal({ nonce: "server-nonceXfyko+d2lbbFgONRv9qkxdawL" }).kind).toBe("failed");
  });

  test("a nonce that only ends with the server's part completes, as in Apache (librdkafka 2.0.x sends its own part twice)", () => {
    const s = server();
    const client = new ScramTestClient(SHA512, "alice", "alice-secret");
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    const step = s.evaluate(client.clientFinal(first.token, { nonce: `${client.clientNonce}${client.clientNonce}server-nonce` }));
    expect(step).toMatchObject({ kind: "complete", username: "alice" });
  });

  test("a channel binding other than the gs2 header fails", () => {
    expect(failedFinal({ channelBinding: b64(utf8.encode("y,,")) }).kind).toBe("failed");
    expect(failedFinal({ channelBinding: b64(utf8.encode("n,,")) }, "n,a=alice,").kind).toBe("failed");
    // The gs2 header with an authzid, repeated: fine.
    expect(failedFinal({}, "n,a=alice,").kind).toBe("complete");
  });

  test("a proof of the wrong length fails", () => {
    const s = server();
    const client = new ScramTestClient(SHA512, "alice", "alice-secret");
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    expect(s.evaluate(utf8.encode(`c=biws,r=${client.clientNonce}server-nonce,p=dGVzdA==`)).kind).toBe("failed");
  });

  test("unknown user: failed with the generic message, as for a wrong password", () => {
    const step = server().evaluate(new ScramTestClient(SHA512, "bob", "x").clientFirst());
    expect(step.kind).toBe("failed");
    expect((step as { clientMessage?: string }).clientMessage).toBeUndefined();
  });

  test("authzid other than the user: Apache's message for the client", () => {
    const step = server().evaluate(new ScramTestClient(SHA512, "alice", "alice-secret", undefined, "n,a=bob,").clientFirst());
    expect(step).toMatchObject({ kind: "failed", clientMessage: "Authentication failed: Client requested an authorization id that is different from username" });
  });

  test("tokenauth=true (delegation tokens) is refused; other extensions are ignored", () => {
    expect(server().evaluate(new ScramTestClient(SHA512, "alice", "x", undefined, undefined, ",tokenauth=true").clientFirst()).kind).toBe("failed");
    expect(server().evaluate(new ScramTestClient(SHA512, "alice", "x", undefined, undefined, ",tokenauth=TRUE").clientFirst()).kind).toBe("failed");
    expect(server().evaluate(new ScramTestClient(SHA512, "alice", "x", undefined, undefined, ",foo=bar").clientFirst()).kind).toBe("challenge");
  });

  test("a credential below the mechanism's minimum iterations fails", () => {
    const weak = credentialFor(SHA512, "alice-secret", salt, 4095);
    expect(server({ alice: weak }).evaluate(new ScramTestClient(SHA512, "alice", "alice-secret").clientFirst()).kind).toBe("failed");
  });

  test("a malformed first or final message fails the exchange", () => {
    expect(server().evaluate(utf8.encode("garbage")).kind).toBe("failed");
    const s = server();
    expect(s.evaluate(new ScramTestClient(SHA512, "alice", "alice-secret").clientFirst()).kind).toBe("challenge");
    expect(s.evaluate(utf8.encode("garbage")).kind).toBe("failed");
  });

  test("a credential of the other mechanism's size does not verify", () => {
    const sha256Credential = credentialFor(SHA256, "alice-secret", salt, 4096);
    const s = server({ alice: sha256Credential }, SHA512);
    const client = new ScramTestClient(SHA512, "alice", "alice-secret");
    const first = s.evaluate(client.clientFirst());
    if (first.kind !== "challenge") throw new Error(first.kind);
    expect(s.evaluate(client.clientFinal(first.token)).kind).toBe("failed");
  });

  test("proofMatches refuses a proof of the wrong length", () => {
    expect(proofMatches(SHA256, alice, "m", fromB64("dGVzdA=="))).toBe(false);
  });
});
