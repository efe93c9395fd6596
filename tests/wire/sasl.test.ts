/**
 * SASL against an in-process broker: SaslHandshake (17) and SaslAuthenticate (36) through the dispatcher
 * with a SASL_PLAINTEXT ConnectionSecurity, then over a real SASL_PLAINTEXT listener (the gate closes
 * connections that skip authentication, PLAIN and SCRAM succeed and fail as Apache answers, KIP-368
 * re-authentication), SCRAM credentials managed with AlterUserScramCredentials (51) and
 * DescribeUserScramCredentials (50) durable across a restart, a damaged credentials file refusing the
 * start, and DescribeClientQuotas (48) answering no quotas.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ANONYMOUS_PRINCIPAL, type ConnectionSecurity } from "../../src/domain/security/connection-security.ts";
import { saltedPassword, scramMechanism } from "../../src/domain/security/scram.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import type { ConnectionInfo } from "../../src/broker/handler.ts";
import { CloseConnection } from "../../src/broker/handler.ts";
import { apiCodecsByKey } from "../../src/protocol/generated/index.ts";
import { encodeRequestHeader } from "../../src/protocol/generated/request-header.ts";
import { decodeResponseHeader } from "../../src/protocol/generated/response-header.ts";
import { requestHeaderVersion, responseHeaderVersion } from "../../src/protocol/header.ts";
import { Reader } from "../../src/protocol/reader.ts";
import { Writer } from "../../src/protocol/writer.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { plainToken, ScramTestClient } from "../support/sasl-client.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const SHA256 = scramMechanism("SCRAM-SHA-256")!;
const SHA512 = scramMechanism("SCRAM-SHA-512")!;
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

let usersDir: string;
let usersFile: string;
beforeAll(() => {
  usersDir = mkdtempSync(join(tmpdir(), "bunka-sasl-users-"));
  usersFile = join(usersDir, "plain-users.properties");
  writeFileSync(usersFile, "# PLAIN users\nalice=alice-plain\nbob=b=ob\n");
});
afterAll(() => rmSync(usersDir, { recursive: true, force: true }));

const saslConfig = () => ({
  saslEnabledMechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
  saslPlainUsersFile: usersFile,
  connectionFailedAuthenticationDelayMs: 0,
});

/** A SCRAM upsertion as the Java admin client builds it: its own salt, the salted password. */
function upsertion(name: string, mechanism: typeof SHA256, password: string, iterations = 4096) {
  const salt = crypto.getRandomValues(new Uint8Array(16));
  return { name, mechanism: mechanism.type, iterations, salt, saltedPassword: saltedPassword(mechanism, password, salt, iterations) };
}

describe("through the dispatcher, a SASL_PLAINTEXT connection", () => {
  let tb: TestBroker;
  beforeAll(async () => {
    tb = await startTestBroker(saslConfig());
  });
  afterAll(async () => {
    await tb?.stop();
  });

  let nextId = 1000;
  function connection(): ConnectionInfo & { closes: number; closed: Promise<void>; security: ConnectionSecurity } {
    let closed!: () => void;
    const conn = {
      id: nextId++,
      remoteAddress: "127.0.0.1:1",
      closes: 0,
      closed: new Promise<void>((resolve) => (closed = resolve)),
      close() {
        conn.closes++;
        closed();
      },
      security: { listenerName: "SASL", securityProtocol: "SASL_PLAINTEXT" as const, principal: ANONYMOUS_PRINCIPAL, authenticated: false },
    };
    return conn;
  }
  function frame(apiKey: number, apiVersion: number, body: unknown): Uint8Array {
    const w = new Writer();
    encodeRequestHeader(w, requestHeaderVersion(apiKey, apiVersion), { requestApiKey: apiKey, requestApiVersion: apiVersion, correlationId: 7, clientId: "t" });
    apiCodecsByKey.get(apiKey)!.encodeRequest(w, apiVersion, body);
    return w.finish();
  }
  async function call(conn: ConnectionInfo, apiKey: number, apiVersion: number, body: unknown): Promise<any> {
    const out = await tb.broker.dispatch(frame(apiKey, apiVersion, body), conn);
    const r = new Reader(out! as Uint8Array);
    decodeResponseHeader(r, responseHeaderVersion(apiKey, apiVersion));
    return apiCodecsByKey.get(apiKey)!.decodeResponse(r, apiVersion);
  }

  test("ApiVersions advertises 17 v0-1, 36 v0-2, 48, 50 and 51", async () => {
    const versions = await call(connection(), 18, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" });
    const range = (key: number) => versions.apiKeys.find((k: { apiKey: number }) => k.apiKey === key);
    expect(range(17)).toMatchObject({ minVersion: 0, maxVersion: 1 });
    expect(range(36)).toMatchObject({ minVersion: 0, maxVersion: 2 });
    expect(range(48)).toMatchObject({ minVersion: 0, maxVersion: 1 });
    expect(range(50)).toMatchObject({ minVersion: 0, maxVersion: 0 });
    expect(range(51)).toMatchObject({ minVersion: 0, maxVersion: 0 });
  });

  test("PLAIN: the principal, authenticated, the mechanism; then any request is served", async () => {
    const conn = connection();
    expect(await call(conn, 18, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" })).toMatchObject({ errorCode: 0 });
    expect(await call(conn, 17, 1, { mechanism: "PLAIN" })).toEqual({ errorCode: 0, mechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] });
    const auth = await call(conn, 36, 2, { authBytes: plainToken("alice", "alice-plain") });
    expect(auth).toMatchObject({ errorCode: 0, errorMessage: "", sessionLifetimeMs: 0 });
    expect(conn.security).toMatchObject({ principal: "User:alice", authenticated: true, saslMechanism: "PLAIN" });
    expect(conn.security.sessionExpiresAtMs).toBeUndefined();
    expect((await call(conn, 3, 12, { topics: [], allowAutoTopicCreation: false })).topics).toEqual([]);
  });

  test("a request before authentication closes the connection (CloseConnection)", async () => {
    const conn = connection();
    await expect(tb.broker.dispatch(frame(3, 12, { topics: [] }), conn)).rejects.toBeInstanceOf(CloseConnection);
    expect(conn.security.authenticated).toBe(false);
  });

  test("a wrong PLAIN password: SASL_AUTHENTICATION_FAILED with Apache's message, the connection closed after it", async () => {
    const conn = connection();
    await call(conn, 17, 1, { mechanism: "PLAIN" });
    const auth = await call(conn, 36, 1, { authBytes: plainToken("alice", "wrong") });
    expect(auth).toMatchObject({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Authentication failed: Invalid username or password" });
    expect(conn.security).toMatchObject({ principal: ANONYMOUS_PRINCIPAL, authenticated: false });
    await conn.closed;
    expect(conn.closes).toBe(1);
    expect(tb.broker.services.sasl.counts.failed.get("PLAIN")).toBeGreaterThanOrEqual(1);
  });

  test("an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list", async () => {
    const conn = connection();
    expect(await call(conn, 17, 1, { mechanism: "GSSAPI" })).toEqual({ errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] });
    expect(tb.broker.services.sasl.counts.failed.get("")).toBeGreaterThanOrEqual(1);
  });

  test("SaslHandshake v0: raw PLAIN token, answered with an empty raw token", async () => {
    const conn = connection();
    expect(await call(conn, 17, 0, { mechanism: "PLAIN" })).toMatchObject({ errorCode: 0 });
    const raw = await tb.broker.dispatch(plainToken("bob", "b=ob"), conn);
    expect(raw).toEqual(new Uint8Array(0));
    expect(conn.security.principal).toBe("User:bob");
  });

  test("before authentication a frame past sasl.server.max.receive.size closes; after it, large frames are served", async () => {
    const big = new Uint8Array(524_289);
    const before = connection();
    await call(before, 17, 1, { mechanism: "PLAIN" });
    await expect(tb.broker.dispatch(frame(36, 2, { authBytes: big }), before)).rejects.toBeInstanceOf(CloseConnection);
    const after = connection();
    await call(after, 17, 1, { mechanism: "PLAIN" });
    await call(after, 36, 2, { authBytes: plainToken("alice", "alice-plain") });
    const topics = Array.from({ length: 2600 }, (_, i) => ({ name: `${i}-${"x".repeat(200)}`, topicId: "00000000-0000-0000-0000-000000000000" }));
    const large = frame(3, 12, { topics, allowAutoTopicCreation: false });
    expect(large.byteLength).toBeGreaterThan(524_288);
    expect(await tb.broker.dispatch(large, after)).not.toBeNull();
  });

  test("on a PLAINTEXT connection SaslHandshake and SaslAuthenticate are ILLEGAL_SASL_STATE", async () => {
    const plain = { id: 1, remoteAddress: "x", close() {} };
    expect(await call(plain, 17, 1, { mechanism: "PLAIN" })).toEqual({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [] });
    expect(await call(plain, 36, 2, { authBytes: new Uint8Array(0) })).toMatchObject({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, errorMessage: "SaslAuthenticate request received after successful authentication" });
  });
});

describe("over a SASL_PLAINTEXT listener", () => {
  let tb: TestBroker;
  const clients: WireClient[] = [];
  beforeAll(async () => {
    tb = await startTestBroker({
      ...saslConfig(),
      listeners: [
        { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
        { name: "SASL", host: "127.0.0.1", port: 0 },
      ],
      listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL: "SASL_PLAINTEXT" },
      connectionsMaxReauthMs: 60_000,
    });
    const admin = await connect("PLAINTEXT");
    const altered = await admin.request(51, 0, {
      deletions: [],
      upsertions: [upsertion("alice", SHA512, "alice-secret"), upsertion("carol", SHA256, "carol-secret", 8192)],
    });
    expect(altered.results.map((r: { errorCode: number }) => r.errorCode)).toEqual([0, 0]);
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await tb?.stop();
  });

  async function connect(listener: string): Promise<WireClient> {
    const client = await WireClient.connect(tb.ports[listener]!);
    clients.push(client);
    return client;
  }

  async function scramLogin(client: WireClient, mechanism: typeof SHA256, user: string, password: string) {
    expect((await client.request(17, 1, { mechanism: mechanism.name })).errorCode).toBe(0);
    const scram = new ScramTestClient(mechanism, user, password, `nonce-${Math.random().toString(36).slice(2)}`);
    const first = await client.request(36, 2, { authBytes: scram.clientFirst() });
    if (first.errorCode !== 0) return { first, final: undefined, scram };
    const final = await client.request(36, 2, { authBytes: scram.clientFinal(first.authBytes) });
    return { first, final, scram };
  }

  test("Metadata before authentication: the connection is closed, nothing answered", async () => {
    const client = await connect("SASL");
    const answer = client.request(3, 12, { topics: [], allowAutoTopicCreation: false });
    await expect(answer).rejects.toThrow("connection closed");
  });

  test("SCRAM-SHA-512: server-first carries salt and iterations, server-final the signature, session_lifetime_ms the reauth bound", async () => {
    const client = await connect("SASL");
    expect((await client.request(18, 3, { clientSoftwareName: "t", clientSoftwareVersion: "1" })).errorCode).toBe(0);
    const { first, final, scram } = await scramLogin(client, SHA512, "alice", "alice-secret");
    expect(text(first.authBytes)).toMatch(/^r=nonce-[a-z0-9]+[A-Za-z0-9+/=]+,s=[A-Za-z0-9+/=]+,i=4096$/);
    expect(final).toMatchObject({ errorCode: 0, errorMessage: "", sessionLifetimeMs: 60_000 });
    expect(scram.verifyServerFinal(final.authBytes)).toBe(true);
    const metadata = await client.request(3, 12, { topics: [], allowAutoTopicCreation: false });
    expect(metadata.brokers.length).toBeGreaterThan(0);

    // KIP-368: the same user re-authenticates on the same connection and keeps going.
    const again = await scramLogin(client, SHA512, "alice", "alice-secret");
    expect(again.final).toMatchObject({ errorCode: 0, sessionLifetimeMs: 60_000 });
    expect((await client.request(3, 12, { topics: [], allowAutoTopicCreation: false })).brokers.length).toBeGreaterThan(0);
  });

  test("SCRAM-SHA-256 at 8192 iterations", async () => {
    const client = await connect("SASL");
    const { first, final } = await scramLogin(client, SHA256, "carol", "carol-secret");
    expect(text(first.authBytes)).toEndWith(",i=8192");
    expect(final.errorCode).toBe(0);
  });

  test("a wrong SCRAM password: Apache's generic message, then the connection closes; others are unaffected", async () => {
    const good = await connect("SASL");
    await scramLogin(good, SHA512, "alice", "alice-secret");
    const bad = await connect("SASL");
    const { final } = await scramLogin(bad, SHA512, "alice", "wrong");
    expect(final).toMatchObject({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" });
    await bad.closed;
    expect((await good.request(3, 12, { topics: [], allowAutoTopicCreation: false })).brokers.length).toBeGreaterThan(0);
  });

  test("a user without a credential for the mechanism fails like a wrong password", async () => {
    const client = await connect("SASL");
    const { first } = await scramLogin(client, SHA256, "alice", "alice-secret");
    expect(first).toMatchObject({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" });
    await client.closed;
  });

  test("re-authentication as another user is refused and closes the connection", async () => {
    const client = await connect("SASL");
    await client.request(17, 1, { mechanism: "PLAIN" });
    expect((await client.request(36, 2, { authBytes: plainToken("alice", "alice-plain") })).errorCode).toBe(0);
    expect((await client.request(17, 1, { mechanism: "PLAIN" })).errorCode).toBe(0);
    const refused = await client.request(36, 2, { authBytes: plainToken("bob", "b=ob") });
    expect(refused).toMatchObject({ errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: "Cannot change principals during re-authentication from User.alice: User.bob" });
    await client.closed;
  });

  test("SaslHandshake v0: the SCRAM exchange as raw size-prefixed tokens, then Kafka requests again", async () => {
    const client = await connect("SASL");
    expect((await client.request(17, 0, { mechanism: "SCRAM-SHA-512" })).errorCode).toBe(0);
    const framed = (token: Uint8Array) => {
      const out = new Uint8Array(4 + token.length);
      new DataView(out.buffer).setInt32(0, token.length);
      out.set(token, 4);
      return out;
    };
    const scram = new ScramTestClient(SHA512, "alice", "alice-secret");
    const serverFirst = await client.requestRaw(0, 0, framed(scram.clientFirst()));
    expect(text(serverFirst)).toEndWith(",i=4096");
    const serverFinal = await client.requestRaw(0, 0, framed(scram.clientFinal(serverFirst)));
    expect(scram.verifyServerFinal(serverFinal)).toBe(true);
    expect((await client.request(3, 12, { topics: [], allowAutoTopicCreation: false })).brokers.length).toBeGreaterThan(0);
  });

  test("SaslHandshake on the PLAINTEXT listener is ILLEGAL_SASL_STATE", async () => {
    const client = await connect("PLAINTEXT");
    expect(await client.request(17, 1, { mechanism: "PLAIN" })).toEqual({ errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [] });
  });
});

describe("session expiry (connections.max.reauth.ms), on a manual clock", () => {
  let tb: TestBroker;
  const clock = new ManualClock();
  beforeAll(async () => {
    tb = await startTestBroker({ ...saslConfig(), connectionsMaxReauthMs: 1000 }, { clock });
  });
  afterAll(async () => {
    await tb?.stop();
  });

  const security = (): ConnectionSecurity => ({ listenerName: "SASL", securityProtocol: "SASL_PLAINTEXT", principal: ANONYMOUS_PRINCIPAL, authenticated: false });
  const frame = (apiKey: number, apiVersion: number, body: unknown) => {
    const w = new Writer();
    encodeRequestHeader(w, requestHeaderVersion(apiKey, apiVersion), { requestApiKey: apiKey, requestApiVersion: apiVersion, correlationId: 1, clientId: "t" });
    apiCodecsByKey.get(apiKey)!.encodeRequest(w, apiVersion, body);
    return w.finish();
  };
  const metadata = () => frame(3, 12, { topics: [], allowAutoTopicCreation: false });

  test("served until the session's end by the monotonic clock, closed after it; a wall-clock step changes nothing", async () => {
    const conn = { id: 1, remoteAddress: "x", close() {}, security: security() };
    await tb.broker.dispatch(frame(17, 1, { mechanism: "PLAIN" }), conn);
    await tb.broker.dispatch(frame(36, 2, { authBytes: plainToken("alice", "alice-plain") }), conn);
    expect(conn.security.sessionExpiresAtMs).toBe(clock.nowMs() + 1000);
    clock.setNowMs(clock.nowMs() + 3_600_000); // NTP steps the wall clock an hour ahead
    clock.setMonotonicMs(clock.monotonicMs() + 999);
    expect(await tb.broker.dispatch(metadata(), conn)).not.toBeNull();
    clock.advance(1);
    const closedBefore = tb.broker.services.sasl.counts.expiredSessionsClosed;
    await expect(tb.broker.dispatch(metadata(), conn)).rejects.toBeInstanceOf(CloseConnection);
    expect(conn.security.authenticated).toBe(false);
    expect(tb.broker.services.sasl.counts.expiredSessionsClosed).toBe(closedBefore + 1);
  });

  test("re-authentication before the end renews the session", async () => {
    const conn = { id: 2, remoteAddress: "x", close() {}, security: security() };
    await tb.broker.dispatch(frame(17, 1, { mechanism: "PLAIN" }), conn);
    await tb.broker.dispatch(frame(36, 2, { authBytes: plainToken("alice", "alice-plain") }), conn);
    clock.advance(1000 - 1);
    await tb.broker.dispatch(frame(17, 1, { mechanism: "PLAIN" }), conn);
    await tb.broker.dispatch(frame(36, 2, { authBytes: plainToken("alice", "alice-plain") }), conn);
    clock.advance(999);
    expect(await tb.broker.dispatch(metadata(), conn)).not.toBeNull();
    expect(tb.broker.services.sasl.counts.reauthenticated.get("PLAIN")).toBe(1);
  });
});

test("a failed authentication is logged at info with the mechanism and reason, never the password", async () => {
  const lines: { level: string; message: string; fields: string }[] = [];
  const record = (level: string) => (message: string, fields?: Record<string, unknown>) => void lines.push({ level, message, fields: JSON.stringify(fields ?? {}) });
  const log = { debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error") };
  const tb = await startTestBroker({ ...saslConfig(), listeners: [{ name: "SASL", host: "127.0.0.1", port: 0 }], listenerSecurityProtocolMap: { SASL: "SASL_PLAINTEXT" } }, { log });
  try {
    const client = await WireClient.connect(tb.ports.SASL!);
    await client.request(17, 1, { mechanism: "PLAIN" });
    await client.request(36, 2, { authBytes: plainToken("alice", "hunter2-guess") });
    await client.closed;
    const failed = lines.filter((l) => l.message === "SASL authentication failed");
    expect(failed.map((l) => l.level)).toEqual(["info"]);
    expect(failed[0]!.fields).toContain('"mechanism":"PLAIN"');
    expect(failed[0]!.fields).toContain('"reason":"unknown user or wrong password"');
    expect(JSON.stringify(lines)).not.toContain("hunter2");
    expect(JSON.stringify(lines)).not.toContain("alice-plain");
  } finally {
    await tb.stop();
  }
});

test("sasl.plain.users.file is read again when it changes (at most once a second); a broken change keeps the users held", async () => {
  const file = join(usersDir, "reloaded-users");
  writeFileSync(file, "alice=one\n");
  const clock = new ManualClock();
  const warnings: string[] = [];
  const log = { debug() {}, info() {}, warn: (m: string) => void warnings.push(m), error() {} };
  const tb = await startTestBroker({ ...saslConfig(), saslPlainUsersFile: file }, { clock, log });
  let id = 1;
  const login = async (user: string, password: string) => {
    const conn = { id: id++, remoteAddress: "x", close() {}, security: { listenerName: "SASL", securityProtocol: "SASL_PLAINTEXT" as const, principal: ANONYMOUS_PRINCIPAL, authenticated: false } };
    const w = new Writer();
    encodeRequestHeader(w, requestHeaderVersion(17, 1), { requestApiKey: 17, requestApiVersion: 1, correlationId: 1, clientId: "t" });
    apiCodecsByKey.get(17)!.encodeRequest(w, 1, { mechanism: "PLAIN" });
    await tb.broker.dispatch(w.finish(), conn);
    await tb.broker.services.sasl.authenticate(plainToken(user, password), conn);
    return conn.security.authenticated;
  };
  try {
    expect(await login("alice", "one")).toBe(true);
    writeFileSync(file, "alice=two\nbob=bob-pw\n");
    expect(await login("bob", "bob-pw")).toBe(false); // not looked at again within the second
    clock.advance(1000);
    expect(await login("bob", "bob-pw")).toBe(true);
    expect(await login("alice", "one")).toBe(false);
    writeFileSync(file, "alice=two\nbroken line\n");
    clock.advance(1000);
    expect(await login("alice", "two")).toBe(true);
    expect(warnings).toEqual(["sasl.plain.users.file changed but cannot be used; keeping the previous PLAIN users"]);
  } finally {
    await tb.stop();
  }
});

test("PLAIN enabled without sasl.plain.users.file, or with a malformed one, refuses the start with one line", async () => {
  await expect(startTestBroker({ saslEnabledMechanisms: ["PLAIN"] })).rejects.toThrow("PLAIN is enabled (sasl.enabled.mechanisms or listener.name.<name>.sasl.enabled.mechanisms) but sasl.plain.users.file is not set");
  const bad = join(usersDir, "bad-users");
  writeFileSync(bad, "alice\n");
  await expect(startTestBroker({ saslEnabledMechanisms: ["PLAIN"], saslPlainUsersFile: bad })).rejects.toThrow(/bad-users": line 1: expected name=password/);
});

test("listener.name.<name>.sasl.enabled.mechanisms: each SASL listener serves its own mechanisms", async () => {
  const tb = await startTestBroker({
    ...saslConfig(),
    listeners: [
      { name: "EXTERNAL", host: "127.0.0.1", port: 0 },
      { name: "INTERNAL", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { EXTERNAL: "SASL_PLAINTEXT", INTERNAL: "SASL_PLAINTEXT" },
    saslEnabledMechanisms: ["SCRAM-SHA-512"],
    listenerSaslEnabledMechanisms: { EXTERNAL: ["PLAIN"] },
  });
  try {
    const external = await WireClient.connect(tb.ports.EXTERNAL!);
    expect(await external.request(17, 1, { mechanism: "PLAIN" })).toEqual({ errorCode: 0, mechanisms: ["PLAIN"] });
    expect((await external.request(36, 2, { authBytes: plainToken("alice", "alice-plain") })).errorCode).toBe(0);
    const internal = await WireClient.connect(tb.ports.INTERNAL!);
    expect(await internal.request(17, 1, { mechanism: "PLAIN" })).toEqual({ errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: ["SCRAM-SHA-512"] });
    external.close();
  } finally {
    await tb.stop();
  }
});

describe("the failed-authentication delay", () => {
  test("connection.failed.authentication.delay.ms holds the failure's answer back", async () => {
    const tb = await startTestBroker({ ...saslConfig(), connectionFailedAuthenticationDelayMs: 300, listeners: [{ name: "SASL", host: "127.0.0.1", port: 0 }], listenerSecurityProtocolMap: { SASL: "SASL_PLAINTEXT" } });
    try {
      const client = await WireClient.connect(tb.ports.SASL!);
      await client.request(17, 1, { mechanism: "PLAIN" });
      const startedMs = performance.now();
      const answer = await client.request(36, 2, { authBytes: plainToken("alice", "wrong") });
      expect(answer.errorCode).toBe(ErrorCode.SASL_AUTHENTICATION_FAILED);
      expect(performance.now() - startedMs).toBeGreaterThanOrEqual(290);
      await client.closed;
    } finally {
      await tb.stop();
    }
  });
});

describe("AlterUserScramCredentials and DescribeUserScramCredentials", () => {
  let tb: TestBroker;
  let client: WireClient;
  beforeAll(async () => {
    tb = await startTestBroker({}, { keepDataDir: true });
    client = await WireClient.connect(tb.port);
  });
  afterAll(async () => {
    client?.close();
    await tb?.stop();
    rmSync(tb.dataDir, { recursive: true, force: true });
  });

  const results = (answer: { results: { user: string; errorCode: number; errorMessage: string | null }[] }) => answer.results.map((r) => [r.user, r.errorCode, r.errorMessage]);

  test("Apache's validation, one answer per user", async () => {
    const answer = await client.request(51, 0, {
      deletions: [{ name: "ghost", mechanism: 1 }, { name: "dup", mechanism: 1 }],
      upsertions: [
        upsertion("alice", SHA256, "a"),
        upsertion("dup", SHA256, "d"),
        { ...upsertion("few", SHA256, "x"), iterations: 4095 },
        { ...upsertion("many", SHA256, "x"), iterations: 16385 },
        { ...upsertion("", SHA256, "x") },
        { ...upsertion("md5", SHA256, "x"), mechanism: 3 },
        upsertion("twice", SHA256, "x"),
        upsertion("twice", SHA512, "x"),
      ],
    });
    expect(results(answer)).toEqual([
      ["alice", 0, null],
      ["ghost", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"],
      ["dup", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"],
      ["few", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"],
      ["many", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"],
      ["", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"],
      ["md5", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"],
      ["twice", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"],
    ]);
  });

  test("describe: every user, one user, an unknown user, a user twice", async () => {
    await client.request(51, 0, { deletions: [], upsertions: [upsertion("bob", SHA512, "b", 8192)] });
    await client.request(51, 0, { deletions: [], upsertions: [upsertion("bob", SHA256, "b", 4096)] });
    const all = await client.request(50, 0, { users: null });
    expect(all.errorCode).toBe(0);
    expect(all.results).toEqual([
      { user: "alice", errorCode: 0, errorMessage: "", credentialInfos: [{ mechanism: 1, iterations: 4096 }] },
      { user: "bob", errorCode: 0, errorMessage: "", credentialInfos: [{ mechanism: 1, iterations: 4096 }, { mechanism: 2, iterations: 8192 }] },
    ]);
    const some = await client.request(50, 0, { users: [{ name: "nobody" }, { name: "bob" }, { name: "alice" }, { name: "alice" }] });
    expect(results(some)).toEqual([
      ["nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"],
      ["bob", 0, ""],
      ["alice", ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single request: alice"],
    ]);
  });

  test("durable across a restart; the file holds no password; a deletion", async () => {
    await tb.restart();
    client.close();
    client = await WireClient.connect(tb.port);
    const described = await client.request(50, 0, { users: [{ name: "bob" }] });
    expect(described.results[0].credentialInfos).toEqual([{ mechanism: 1, iterations: 4096 }, { mechanism: 2, iterations: 8192 }]);
    const file = await Bun.file(join(tb.dataDir, "__cluster", "scram-credentials.json")).text();
    expect(file).toContain("storedKey");
    expect(file).not.toContain("saltedPassword");
    const deleted = await client.request(51, 0, { deletions: [{ name: "bob", mechanism: 2 }], upsertions: [] });
    expect(results(deleted)).toEqual([["bob", 0, null]]);
    expect((await client.request(50, 0, { users: [{ name: "bob" }] })).results[0].credentialInfos).toEqual([{ mechanism: 1, iterations: 4096 }]);
  });

  test("a damaged credentials file refuses the start", async () => {
    await tb.stop();
    const path = join(tb.dataDir, "__cluster", "scram-credentials.json");
    const original = await Bun.file(path).text();
    writeFileSync(path, original.replace('"iterations":4096', '"iterations":4097'));
    await expect(startTestBroker({ dataDir: tb.dataDir }, { keepDataDir: true })).rejects.toThrow(/scram-credentials\.json.*checksum mismatch/);
    writeFileSync(path, original);
    tb = await startTestBroker({ dataDir: tb.dataDir }, { keepDataDir: true });
    client.close();
    client = await WireClient.connect(tb.port);
    expect((await client.request(50, 0, { users: null })).results.length).toBe(2);
  });

  test("DescribeClientQuotas: no quotas; Apache's refusals of bad filters", async () => {
    const none = await client.request(48, 1, { components: [{ entityType: "user", matchType: 0, match: "alice" }], strict: false });
    expect(none).toMatchObject({ errorCode: 0, errorMessage: "", entries: [] });
    const bad = await client.request(48, 1, { components: [{ entityType: "user", matchType: 0, match: null }], strict: false });
    expect(bad).toMatchObject({ errorCode: ErrorCode.INVALID_REQUEST, errorMessage: "Request specified MATCH_TYPE_EXACT, but set match string to null." });
    const unknown = await client.request(48, 1, { components: [{ entityType: "group", matchType: 2, match: null }], strict: false });
    expect(unknown).toMatchObject({ errorCode: ErrorCode.UNSUPPORTED_VERSION, errorMessage: "Unsupported entity type group" });
  });
});
