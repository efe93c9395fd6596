/**
 * SASL fuzz (seeded): a connection's SASL session (domain/security/sasl-session.ts with the real PLAIN and
 * SCRAM exchanges) driven by random sequences of ApiVersions, other requests, SaslHandshake (v0 and v1,
 * known and unknown mechanisms), SaslAuthenticate and raw tokens whose bytes are right, mutated or random,
 * on a clock that moves. Required of every step: nothing throws; an answer that fails closes; nothing but
 * ApiVersions and the SASL APIs is served before authentication; the session authenticates only with a
 * message a client holding the right password sends (mutations of a right SCRAM proof never pass; a PLAIN
 * message authenticates only when it names a user with their password); a failed session serves nothing.
 *
 *   FUZZ_SASL_CASES=20000 bun test tests/fuzz/sasl.fuzz.test.ts    # more cases (default 2,000)
 *   FUZZ_SEED=1234 ... / FUZZ_CASE=17 ...                         # another seed / replay one case
 */
import { expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { parsePlainMessage, passwordsEqual, PlainServer } from "../../src/domain/security/sasl-plain.ts";
import { SaslSession } from "../../src/domain/security/sasl-session.ts";
import { credentialOf, saltedPassword, scramMechanism, ScramServer } from "../../src/domain/security/scram.ts";
import { caseRandom, envSeed, ONLY_CASE, splice } from "../support/fuzz-support.ts";
import { plainToken, ScramTestClient } from "../support/sasl-client.ts";

const SEED = envSeed("FUZZ_SEED", 20261203);
const CASES = Number(process.env.FUZZ_SASL_CASES ?? 2000);
const SHA256 = scramMechanism("SCRAM-SHA-256")!;
const SHA512 = scramMechanism("SCRAM-SHA-512")!;
const users: Record<string, string> = { alice: "alice-pw", bob: "bob=pw" };
const salt = new TextEncoder().encode("fuzz-salt");
const credentials = Object.fromEntries(
  Object.entries(users).flatMap(([user, password]) => [
    [`${user}/SCRAM-SHA-256`, credentialOf(SHA256, salt, saltedPassword(SHA256, password, salt, 4096), 4096)],
    [`${user}/SCRAM-SHA-512`, credentialOf(SHA512, salt, saltedPassword(SHA512, password, salt, 4096), 4096)],
  ]),
);

test(`SASL sessions under ${CASES} random request sequences (seed ${SEED})`, () => {
  let authenticatedCases = 0;
  for (let index = 0; index < CASES; index++) {
    if (ONLY_CASE !== undefined && index !== ONLY_CASE) continue;
    const rng = caseRandom(SEED, index);
    const session = new SaslSession({
      enabledMechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
      maxReauthMs: rng.pick([0, 500, 5000]),
      newExchange: (m) =>
        m === "PLAIN"
          ? new PlainServer({ verify: (u, p) => users[u] !== undefined && passwordsEqual(users[u]!, p) })
          : new ScramServer({ mechanism: m === "SCRAM-SHA-256" ? SHA256 : SHA512, credentialOf: (u) => credentials[`${u}/${m}`], serverNonce: () => `srv${rng.int(0, 1e9)}` }),
    });
    let nowMs = 0;
    let mechanism: string | undefined;
    let scram: ScramTestClient | undefined;
    let lastServerToken: Uint8Array | undefined;
    let closed = false;
    /** Whether the token just sent is one a client with the right password sends, unmutated. */
    let honest = false;
    const where = () => `case ${index} (FUZZ_SEED=${SEED} FUZZ_CASE=${index})`;

    const token = (): Uint8Array => {
      const user = rng.pick(["alice", "bob", "carol"]);
      const password = rng.next() < 0.7 ? (users[user] ?? "x") : "wrong";
      let bytes: Uint8Array;
      honest = false;
      if (mechanism === "PLAIN") {
        bytes = plainToken(user, password, rng.pick(["", "", user, "other"]));
      } else if (mechanism !== undefined) {
        const info = mechanism === "SCRAM-SHA-256" ? SHA256 : SHA512;
        if (lastServerToken === undefined || scram === undefined) {
          scram = new ScramTestClient(info, user, password, `c${rng.int(0, 1e9)}`);
          bytes = scram.clientFirst();
        } else {
          try {
            bytes = scram.clientFinal(lastServerToken);
            honest = users[scram.username] !== undefined;
          } catch {
            bytes = new TextEncoder().encode("c=biws,r=x,p=AAAA");
          }
        }
      } else {
        bytes = new TextEncoder().encode(`random-${rng.int(0, 1e6)}`);
      }
      if (rng.next() < 0.2) {
        const at = rng.int(0, bytes.length);
        const mutated = splice(bytes, at, rng.int(0, 3), Array.from({ length: rng.int(0, 3) }, () => rng.int(0, 255)));
        if (process.env.FUZZ_DEBUG) console.log("mutated", JSON.stringify(new TextDecoder().decode(bytes)), "->", JSON.stringify(new TextDecoder().decode(mutated)));
        // A mutation that gives the same bytes leaves an honest message honest.
        if (Buffer.compare(Buffer.from(mutated), Buffer.from(bytes)) !== 0) honest = false;
        bytes = mutated;
      }
      return bytes;
    };

    for (let step = 0; step < 12 && !closed; step++) {
      nowMs += rng.pick([0, 1, 100, 600, 2000]);
      const before = session.phase;
      // Mostly the step a client would take next, so that sequences reach authentication and beyond.
      const r = rng.next();
      const action =
        before === "initial" ? (r < 0.4 ? 0 : r < 0.85 ? 2 : rng.int(1, 3))
        : before === "versions-seen" ? (r < 0.8 ? 2 : rng.int(0, 3))
        : before === "authenticating" ? (r < 0.8 ? 3 : rng.int(0, 2))
        : before === "authenticated" ? (r < 0.4 ? 1 : r < 0.7 ? 2 : r < 0.8 ? 0 : 3)
        : rng.int(0, 3);
      if (action === 0 || action === 1) {
        const apiKey = action === 0 ? 18 : rng.pick([0, 1, 3, 19]);
        const verdict = session.admit(apiKey, nowMs);
        if (verdict === "serve" && session.authenticated === undefined) {
          expect(apiKey, where()).toBe(18);
          expect(before, where()).toBe("initial");
        }
        if (before === "failed") expect(verdict, where()).toBe("close");
        closed = verdict === "close";
      } else if (action === 2) {
        const m = rng.next() < 0.9 ? rng.pick(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]) : rng.pick(["GSSAPI", ""]);
        const out = session.handshake(m, rng.pick([0, 1, 1, 1]), nowMs);
        if (out.errorCode === ErrorCode.NONE) {
          mechanism = m;
          scram = undefined;
          lastServerToken = undefined;
        }
        if (out.errorCode === ErrorCode.UNSUPPORTED_SASL_MECHANISM) expect(out.close, where()).toBe(true);
        closed = out.close;
      } else {
        const bytes = token();
        const wasAuthenticated = session.authenticated;
        const out = session.expectsRawToken ? session.rawToken(bytes, nowMs) : session.authenticate(bytes, nowMs);
        const response = "response" in out ? out.response : undefined;
        const serverToken = "token" in out ? out.token : response?.authBytes;
        if (response !== undefined && response.errorCode !== ErrorCode.NONE && response.errorCode !== ErrorCode.ILLEGAL_SASL_STATE) expect(out.close, where()).toBe(true);
        if (out.authenticated !== undefined) {
          authenticatedCases++;
          if (mechanism === "PLAIN") {
            const parsed = parsePlainMessage(bytes);
            expect(parsed.ok, where()).toBe(true);
            if (parsed.ok) expect(users[parsed.value.username], where()).toBe(parsed.value.password);
          } else {
            expect(honest, where()).toBe(true);
          }
          if (wasAuthenticated !== undefined) expect(out.authenticated.principal, where()).toBe(wasAuthenticated.principal);
        }
        lastServerToken = out.close ? undefined : serverToken;
        closed = out.close;
      }
    }
    if (closed) {
      // Nothing more is served on a connection that closes.
      expect(session.admit(3, nowMs + 1), where()).toBe("close");
    }
  }
  // The generator does reach authentication, so the checks above ran on successes too.
  if (ONLY_CASE === undefined) expect(authenticatedCases).toBeGreaterThan(CASES / 50);
});
