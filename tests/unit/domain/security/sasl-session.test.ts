/**
 * SASL/PLAIN's parser and server (domain/security/sasl-plain.ts) and the per-connection SASL state
 * machine (domain/security/sasl-session.ts): every valid and invalid transition.
 */
import { describe, expect, test } from "bun:test";
import { ErrorCode } from "../../../../src/errors/generated/error-codes.ts";
import { parsePlainMessage, passwordsEqual, PlainServer } from "../../../../src/domain/security/sasl-plain.ts";
import { SaslSession, type SaslSessionOptions } from "../../../../src/domain/security/sasl-session.ts";
import { credentialOf, saltedPassword, scramMechanism, ScramServer } from "../../../../src/domain/security/scram.ts";
import { plainToken, ScramTestClient } from "../../../support/sasl-client.ts";

const utf8 = new TextEncoder();
const users: Record<string, string> = { alice: "alice-secret", bob: "bob-secret" };
const plain = () => new PlainServer({ verify: (u, p) => users[u] !== undefined && passwordsEqual(users[u]!, p) });

describe("PLAIN", () => {
  test("parses authzid, user and password", () => {
    expect(parsePlainMessage(plainToken("alice", "pw", "alice"))).toEqual({ ok: true, value: { authzid: "alice", username: "alice", password: "pw" } });
    expect(parsePlainMessage(plainToken("ü", "pä"))).toEqual({ ok: true, value: { authzid: "", username: "ü", password: "pä" } });
  });

  test("a message without exactly three tokens: Apache's message", () => {
    expect(parsePlainMessage(utf8.encode("alice"))).toEqual({ ok: false, reason: "Invalid SASL/PLAIN response: expected 3 tokens, got 1" });
    expect(parsePlainMessage(utf8.encode("\u0000alice"))).toEqual({ ok: false, reason: "Invalid SASL/PLAIN response: expected 3 tokens, got 2" });
    expect(parsePlainMessage(utf8.encode("a\u0000b\u0000c\u0000d\u0000e"))).toEqual({ ok: false, reason: "Invalid SASL/PLAIN response: expected 3 tokens, got 4" });
    expect(parsePlainMessage(new Uint8Array([0, 0x61, 0, 0xff])).ok).toBe(false);
  });

  const cases: [string, Uint8Array, string][] = [
    ["wrong password", plainToken("alice", "wrong"), "Authentication failed: Invalid username or password"],
    ["unknown user", plainToken("carol", "alice-secret"), "Authentication failed: Invalid username or password"],
    ["empty user", plainToken("", "x"), "Authentication failed: username not specified"],
    ["empty password", plainToken("alice", ""), "Authentication failed: password not specified"],
    ["another authzid", plainToken("alice", "alice-secret", "bob"), "Authentication failed: Client requested an authorization id that is different from username"],
    ["malformed", utf8.encode("alice"), "Invalid SASL/PLAIN response: expected 3 tokens, got 1"],
  ];
  for (const [what, token, message] of cases) {
    test(`refused: ${what}`, () => {
      expect(plain().evaluate(token)).toMatchObject({ kind: "failed", clientMessage: message });
    });
  }

  test("accepted: empty authzid or the user's own; a second token fails", () => {
    expect(plain().evaluate(plainToken("alice", "alice-secret"))).toEqual({ kind: "complete", token: new Uint8Array(0), username: "alice" });
    const server = plain();
    expect(server.evaluate(plainToken("bob", "bob-secret", "bob")).kind).toBe("complete");
    expect(server.evaluate(plainToken("bob", "bob-secret")).kind).toBe("failed");
  });
});

const SHA256 = scramMechanism("SCRAM-SHA-256")!;
const salt = utf8.encode("salt-of-alice");
const aliceScram = credentialOf(SHA256, salt, saltedPassword(SHA256, "alice-secret", salt, 4096), 4096);
const bobScram = credentialOf(SHA256, salt, saltedPassword(SHA256, "bob-secret", salt, 4096), 4096);

function session(over: Partial<SaslSessionOptions> = {}): SaslSession {
  return new SaslSession({
    enabledMechanisms: ["PLAIN", "SCRAM-SHA-256"],
    maxReauthMs: 0,
    newExchange: (m) =>
      m === "PLAIN" ? plain() : new ScramServer({ mechanism: SHA256, credentialOf: (u) => ({ alice: aliceScram, bob: bobScram })[u], serverNonce: () => "srv" }),
    ...over,
  });
}

function plainLogin(s: SaslSession, nowMs = 0, user = "alice", password = users[user]!) {
  expect(s.handshake("PLAIN", 1, nowMs).errorCode).toBe(ErrorCode.NONE);
  return s.authenticate(plainToken(user, password), nowMs);
}

describe("SaslSession: first authentication", () => {
  test("ApiVersions, SaslHandshake, SaslAuthenticate (PLAIN): authenticated as User:alice", () => {
    const s = session();
    expect(s.admit(18, 0)).toBe("serve");
    expect(s.phase).toBe("versions-seen");
    expect(s.handshake("PLAIN", 1, 0)).toEqual({ errorCode: ErrorCode.NONE, mechanisms: ["PLAIN", "SCRAM-SHA-256"], close: false });
    expect(s.phase).toBe("authenticating");
    const out = s.authenticate(plainToken("alice", "alice-secret"), 5);
    expect(out).toEqual({
      response: { errorCode: ErrorCode.NONE, errorMessage: "", authBytes: new Uint8Array(0), sessionLifetimeMs: 0 },
      close: false,
      authenticated: { principal: "User:alice", mechanism: "PLAIN", expiresAtMs: undefined, reauthentication: false },
    });
    expect(s.phase).toBe("authenticated");
    expect(s.admit(0, 10)).toBe("serve");
    expect(s.admit(18, 10)).toBe("serve");
  });

  test("SCRAM without ApiVersions first: two SaslAuthenticate rounds", () => {
    const s = session();
    expect(s.handshake("SCRAM-SHA-256", 1, 0).errorCode).toBe(ErrorCode.NONE);
    const client = new ScramTestClient(SHA256, "alice", "alice-secret");
    const first = s.authenticate(client.clientFirst(), 0);
    expect(first.close).toBe(false);
    expect(first.authenticated).toBeUndefined();
    expect(s.admit(3, 0)).toBe("close"); // nothing else during the exchange
  });

  test("SCRAM exchange completes and the server signature verifies", () => {
    const s = session();
    s.handshake("SCRAM-SHA-256", 1, 0);
    const client = new ScramTestClient(SHA256, "alice", "alice-secret");
    const first = s.authenticate(client.clientFirst(), 0);
    const final = s.authenticate(client.clientFinal(first.response!.authBytes), 0);
    expect(final.authenticated?.principal).toBe("User:alice");
    expect(client.verifyServerFinal(final.response!.authBytes)).toBe(true);
  });

  test("a request other than ApiVersions/SASL before authentication closes", () => {
    for (const key of [0, 1, 3, 19]) {
      const s = session();
      expect(s.admit(key, 0)).toBe("close");
      expect(s.phase).toBe("failed");
    }
    const s = session();
    s.admit(18, 0);
    expect(s.admit(3, 0)).toBe("close");
  });

  test("ApiVersions twice before the handshake closes (Apache's HANDSHAKE_REQUEST state)", () => {
    const s = session();
    expect(s.admit(18, 0)).toBe("serve");
    expect(s.admit(18, 0)).toBe("close");
  });

  test("an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then close", () => {
    const s = session();
    const out = s.handshake("GSSAPI", 1, 0);
    expect(out).toMatchObject({ errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: ["PLAIN", "SCRAM-SHA-256"], close: true });
    expect(out.failure?.reason).toBe("Unsupported SASL mechanism GSSAPI");
    expect(s.phase).toBe("failed");
    expect(s.admit(18, 0)).toBe("close");
  });

  test("a mechanism bunka serves but the config does not enable is unsupported too", () => {
    const s = session({ enabledMechanisms: ["SCRAM-SHA-256"] });
    expect(s.handshake("PLAIN", 1, 0)).toMatchObject({ errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: ["SCRAM-SHA-256"] });
  });

  test("SaslAuthenticate before a handshake closes without an answer", () => {
    const s = session();
    expect(s.authenticate(plainToken("alice", "alice-secret"), 0)).toEqual({ close: true });
    expect(s.phase).toBe("failed");
  });

  test("SaslHandshake during the exchange: ILLEGAL_SASL_STATE, then close", () => {
    const s = session();
    s.handshake("PLAIN", 1, 0);
    expect(s.handshake("PLAIN", 1, 0)).toMatchObject({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [], close: true });
    expect(s.phase).toBe("failed");
  });

  test("a failed PLAIN exchange: SASL_AUTHENTICATION_FAILED with Apache's message, then close", () => {
    const s = session();
    const out = plainLogin(s, 0, "alice", "wrong");
    expect(out.response).toEqual({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Authentication failed: Invalid username or password", authBytes: new Uint8Array(0), sessionLifetimeMs: 0 });
    expect(out.close).toBe(true);
    expect(out.failure).toEqual({ mechanism: "PLAIN", reason: "unknown user or wrong password", reauthentication: false });
    expect(s.phase).toBe("failed");
    expect(s.admit(18, 0)).toBe("close");
    expect(s.authenticate(plainToken("alice", "alice-secret"), 0).close).toBe(true);
  });

  test("a failed SCRAM exchange: Apache's generic message, which does not say whether the user exists", () => {
    for (const user of ["alice", "nobody"]) {
      const s = session();
      s.handshake("SCRAM-SHA-256", 1, 0);
      const client = new ScramTestClient(SHA256, user, "wrong");
      const first = s.authenticate(client.clientFirst(), 0);
      const out = first.close ? first : s.authenticate(client.clientFinal(first.response!.authBytes), 0);
      expect(out.response?.errorMessage).toBe("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256");
      expect(out.close).toBe(true);
    }
  });

  test("SaslAuthenticate after authentication: ILLEGAL_SASL_STATE, the connection stays", () => {
    const s = session();
    plainLogin(s);
    const out = s.authenticate(plainToken("alice", "alice-secret"), 1);
    expect(out).toMatchObject({ response: { errorCode: ErrorCode.ILLEGAL_SASL_STATE, errorMessage: "SaslAuthenticate request received after successful authentication" }, close: false });
    expect(s.phase).toBe("authenticated");
  });

  test("SaslHandshake after authentication without a session end: ILLEGAL_SASL_STATE, no re-authentication", () => {
    const s = session();
    plainLogin(s);
    expect(s.handshake("PLAIN", 1, 5000)).toEqual({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [], close: false });
    expect(s.phase).toBe("authenticated");
  });
});

describe("SaslSession: SaslHandshake v0 (raw tokens)", () => {
  test("PLAIN: the next frame is the raw token, answered with an empty raw token", () => {
    const s = session();
    s.handshake("PLAIN", 0, 0);
    expect(s.expectsRawToken).toBe(true);
    const out = s.rawToken(plainToken("alice", "alice-secret"), 0);
    expect(out).toMatchObject({ token: new Uint8Array(0), close: false, authenticated: { principal: "User:alice" } });
    expect(s.expectsRawToken).toBe(false);
    expect(s.admit(3, 0)).toBe("serve");
  });

  test("SCRAM over raw tokens", () => {
    const s = session();
    s.handshake("SCRAM-SHA-256", 0, 0);
    const client = new ScramTestClient(SHA256, "alice", "alice-secret");
    const first = s.rawToken(client.clientFirst(), 0);
    expect(s.expectsRawToken).toBe(true);
    const final = s.rawToken(client.clientFinal(first.token!), 0);
    expect(client.verifyServerFinal(final.token!)).toBe(true);
    expect(final.authenticated?.mechanism).toBe("SCRAM-SHA-256");
  });

  test("a failure closes without an answer", () => {
    const s = session();
    s.handshake("PLAIN", 0, 0);
    const out = s.rawToken(plainToken("alice", "wrong"), 0);
    expect(out.close).toBe(true);
    expect(out.token).toBeUndefined();
    expect(s.phase).toBe("failed");
  });

  test("a raw token when none is expected closes", () => {
    expect(session().rawToken(plainToken("alice", "alice-secret"), 0)).toEqual({ close: true });
  });

  test("a SaslAuthenticate request after a v0 handshake closes", () => {
    const s = session();
    s.handshake("PLAIN", 0, 0);
    expect(s.authenticate(plainToken("alice", "alice-secret"), 0).close).toBe(true);
  });
});

describe("SaslSession: sessions and re-authentication (KIP-368)", () => {
  const reauthing = () => session({ maxReauthMs: 10_000 });

  test("session_lifetime_ms is connections.max.reauth.ms; a request after it closes", () => {
    const s = reauthing();
    const out = plainLogin(s, 1000);
    expect(out.response?.sessionLifetimeMs).toBe(10_000);
    expect(out.authenticated?.expiresAtMs).toBe(11_000);
    expect(s.admit(0, 10_999)).toBe("serve");
    expect(s.admit(0, 11_000)).toBe("close");
    expect(s.phase).toBe("failed");
  });

  test("re-authentication with the same mechanism and principal renews the session", () => {
    const s = reauthing();
    plainLogin(s, 0);
    expect(s.handshake("PLAIN", 1, 9000).errorCode).toBe(ErrorCode.NONE);
    expect(s.admit(0, 9500)).toBe("serve"); // the old session serves meanwhile
    const out = s.authenticate(plainToken("alice", "alice-secret"), 9500);
    expect(out.authenticated).toEqual({ principal: "User:alice", mechanism: "PLAIN", expiresAtMs: 19_500, reauthentication: true });
    expect(s.admit(0, 15_000)).toBe("serve");
  });

  test("re-authentication after the session ended is still accepted (only other requests close)", () => {
    const s = reauthing();
    plainLogin(s, 0);
    expect(s.handshake("PLAIN", 1, 20_000).errorCode).toBe(ErrorCode.NONE);
    expect(s.admit(0, 20_000)).toBe("close");
  });

  test("the expired session does not serve during the re-authentication", () => {
    const s = reauthing();
    plainLogin(s, 0);
    s.handshake("PLAIN", 1, 20_000);
    expect(s.authenticate(plainToken("alice", "alice-secret"), 20_001).authenticated?.expiresAtMs).toBe(30_001);
  });

  test("another principal: refused with Apache's message, then close", () => {
    const s = reauthing();
    plainLogin(s, 0);
    s.handshake("PLAIN", 1, 5000);
    const out = s.authenticate(plainToken("bob", "bob-secret"), 5000);
    expect(out.response).toMatchObject({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Cannot change principals during re-authentication from User.alice: User.bob" });
    expect(out.close).toBe(true);
    expect(out.failure?.reauthentication).toBe(true);
    expect(s.admit(0, 5000)).toBe("close");
  });

  test("another mechanism: the handshake is answered, the exchange fails with Apache's message", () => {
    const s = reauthing();
    plainLogin(s, 0);
    expect(s.handshake("SCRAM-SHA-256", 1, 5000).errorCode).toBe(ErrorCode.NONE);
    const out = s.authenticate(new ScramTestClient(SHA256, "alice", "alice-secret").clientFirst(), 5000);
    expect(out.response?.errorMessage).toBe("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism 'PLAIN'");
    expect(out.close).toBe(true);
  });

  test("a wrong password at re-authentication: the re-authentication message, then close", () => {
    const s = new SaslSession({
      enabledMechanisms: ["SCRAM-SHA-256"],
      maxReauthMs: 10_000,
      newExchange: () => new ScramServer({ mechanism: SHA256, credentialOf: () => aliceScram, serverNonce: () => "n" }),
    });
    s.handshake("SCRAM-SHA-256", 1, 0);
    const c1 = new ScramTestClient(SHA256, "alice", "alice-secret");
    s.authenticate(c1.clientFinal(s.authenticate(c1.clientFirst(), 0).response!.authBytes), 0);
    expect(s.phase).toBe("authenticated");
    s.handshake("SCRAM-SHA-256", 1, 5000);
    const c2 = new ScramTestClient(SHA256, "alice", "wrong");
    const out = s.authenticate(c2.clientFinal(s.authenticate(c2.clientFirst(), 5000).response!.authBytes), 5000);
    expect(out.response?.errorMessage).toBe("Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256");
  });

  test("an unknown mechanism at re-authentication: UNSUPPORTED_SASL_MECHANISM, close", () => {
    const s = reauthing();
    plainLogin(s, 0);
    expect(s.handshake("GSSAPI", 1, 5000)).toMatchObject({ errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, close: true });
  });

  test("at most one re-authentication a second; a sooner handshake is ILLEGAL_SASL_STATE", () => {
    const s = reauthing();
    plainLogin(s, 0);
    s.handshake("PLAIN", 1, 5000);
    s.authenticate(plainToken("alice", "alice-secret"), 5000);
    expect(s.handshake("PLAIN", 1, 5999)).toEqual({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [], close: false });
    expect(s.handshake("PLAIN", 1, 6000).errorCode).toBe(ErrorCode.NONE);
  });
});
