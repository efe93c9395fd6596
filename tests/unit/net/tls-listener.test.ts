/**
 * The Kafka listener with several listeners and with TLS (Bun's own), over real loopback sockets and
 * certificates made by openssl for this run. The dispatch answers every frame with the connection's
 * ConnectionSecurity as JSON, so that each test sees what the listener filled in.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ClientAuth, type TlsSettings } from "../../../src/broker/listener-config.ts";
import type { SecurityProtocol } from "../../../src/domain/security/connection-security.ts";
import { type ConnectionInfo, type KafkaListener, type ListenerEndpoint, startKafkaListener } from "../../../src/net/kafka-listener.ts";
import { type TlsFileReader, TlsMaterialSource } from "../../../src/net/tls-material.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import { type CertificateSet, makeCertificates } from "../../support/tls-certs.ts";
import { type TlsClientFiles, tlsOptions } from "../../support/tls-tunnel.ts";
import { waitUntil } from "../../support/wait.ts";
import { readFileSync, statSync } from "node:fs";

let certs: CertificateSet;
beforeAll(() => {
  certs = makeCertificates();
});
afterAll(() => certs.remove());

const files: TlsFileReader = {
  readText: (path) => readFileSync(path, "utf8"),
  version: (path) => {
    const stat = statSync(path);
    return `${stat.mtimeMs}:${stat.size}`;
  },
};

interface Line {
  level: string;
  message: string;
  fields: Record<string, unknown> | undefined;
}
function capturingLogger(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => void lines.push({ level, message, fields });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

function frame(body: string): Uint8Array {
  const bytes = new TextEncoder().encode(body);
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setInt32(0, bytes.length);
  out.set(bytes, 4);
  return out;
}

const echoSecurity = (_frame: Uint8Array, conn: ConnectionInfo) => new TextEncoder().encode(JSON.stringify(conn.security));

function tlsSettings(overrides: Partial<TlsSettings> = {}): TlsSettings {
  return {
    keystoreLocation: certs.serverKeystorePath,
    keyPassword: undefined,
    truststoreLocation: certs.caPath,
    clientAuth: "none",
    keystoreKey: "ssl.keystore.location",
    truststoreKey: "ssl.truststore.location",
    ...overrides,
  };
}

async function listen(
  endpoints: { name: string; securityProtocol: SecurityProtocol; clientAuth?: ClientAuth; tls?: Partial<TlsSettings> }[],
  options: { log?: Logger; tlsHandshakeTimeoutMs?: number; maxConnections?: number } = {},
): Promise<{ listener: KafkaListener; sources: Map<string, TlsMaterialSource>; port: (name: string) => number }> {
  const log = options.log ?? capturingLogger();
  const sources = new Map<string, TlsMaterialSource>();
  const specs: ListenerEndpoint[] = endpoints.map((e) => {
    const tls = e.securityProtocol === "SSL" || e.securityProtocol === "SASL_SSL" ? new TlsMaterialSource(e.name, tlsSettings({ clientAuth: e.clientAuth ?? "none", ...e.tls }), files, log) : undefined;
    if (tls !== undefined) sources.set(e.name, tls);
    return { name: e.name, securityProtocol: e.securityProtocol, host: "127.0.0.1", port: 0, ...(tls === undefined ? {} : { tls }) };
  });
  const listener = await startKafkaListener({
    endpoints: specs,
    maxRequestBytes: 1024 * 1024,
    idleTimeoutMs: 0,
    dispatch: echoSecurity,
    log,
    ...(options.tlsHandshakeTimeoutMs === undefined ? {} : { tlsHandshakeTimeoutMs: options.tlsHandshakeTimeoutMs }),
    ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
  });
  listeners.push(listener);
  return { listener, sources, port: (name) => listener.endpoints().find((e) => e.name === name)!.port };
}
const listeners: KafkaListener[] = [];
afterAll(async () => {
  for (const l of listeners) await l.close();
});

interface Client {
  /** The next response, decoded as JSON; rejects when the connection closes first. */
  ask(): Promise<Record<string, unknown>>;
  closed: Promise<string>;
  peerSubject(): string | undefined;
  end(): void;
}

/** A client on `port`, plaintext or over TLS with `tls` files; resolves once connected (and handshaken). */
async function connect(port: number, tls?: TlsClientFiles): Promise<Client> {
  let buffered = new Uint8Array(0);
  const waiting: { resolve(v: Record<string, unknown>): void; reject(e: Error): void }[] = [];
  let closedResolve!: (why: string) => void;
  const closed = new Promise<string>((resolve) => (closedResolve = resolve));
  const ready = Promise.withResolvers<void>();
  let socket!: Bun.Socket<undefined>;
  const onClose = (why: string) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`closed: ${why}`));
    closedResolve(why);
    ready.resolve();
  };
  socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    ...(tls === undefined ? {} : { tls: tlsOptions(tls) }),
    socket: {
      binaryType: "uint8array",
      open() {
        if (tls === undefined) ready.resolve();
      },
      handshake(_s, success, error) {
        if (success) ready.resolve();
        else onClose(`handshake: ${error?.message}`);
      },
      data(_s, chunk) {
        const joined = new Uint8Array(buffered.length + chunk.length);
        joined.set(buffered);
        joined.set(chunk, buffered.length);
        buffered = joined;
        while (buffered.length >= 4) {
          const size = new DataView(buffered.buffer, buffered.byteOffset).getInt32(0);
          if (buffered.length < 4 + size) break;
          const body = buffered.slice(4, 4 + size);
          buffered = buffered.slice(4 + size);
          waiting.shift()?.resolve(JSON.parse(new TextDecoder().decode(body)));
        }
      },
      close: () => onClose("closed"),
      error: (_s, error) => onClose(`error: ${error.message}`),
    },
  });
  await ready.promise;
  return {
    ask: () =>
      new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        socket.write(frame("request"));
      }),
    closed,
    peerSubject: () => socket.getPeerX509Certificate?.()?.subject,
    end: () => socket.end(),
  };
}

const trustOnly: () => TlsClientFiles = () => ({ caPath: certs.caPath });
const withClientCert: () => TlsClientFiles = () => ({ caPath: certs.caPath, certPath: certs.clientCertPath, keyPath: certs.clientKeyPath });
const withStrangerCert: () => TlsClientFiles = () => ({ caPath: certs.caPath, certPath: certs.strangerCertPath, keyPath: certs.strangerKeyPath });

describe("several listeners", () => {
  test("each binds its own port; every connection carries its listener, protocol and principal", async () => {
    const { listener, port } = await listen([
      { name: "PLAINTEXT", securityProtocol: "PLAINTEXT" },
      { name: "CLIENT", securityProtocol: "SASL_PLAINTEXT" },
      { name: "SSL", securityProtocol: "SSL" },
    ]);
    expect(listener.endpoints().map((e) => [e.name, e.securityProtocol])).toEqual([
      ["PLAINTEXT", "PLAINTEXT"],
      ["CLIENT", "SASL_PLAINTEXT"],
      ["SSL", "SSL"],
    ]);
    expect(new Set(listener.endpoints().map((e) => e.port)).size).toBe(3);
    expect(listener.port).toBe(port("PLAINTEXT"));

    const plain = await connect(port("PLAINTEXT"));
    const sasl = await connect(port("CLIENT"));
    const ssl = await connect(port("SSL"), trustOnly());
    expect(await plain.ask()).toEqual({ listenerName: "PLAINTEXT", securityProtocol: "PLAINTEXT", principal: "User:ANONYMOUS", authenticated: true });
    expect(await sasl.ask()).toEqual({ listenerName: "CLIENT", securityProtocol: "SASL_PLAINTEXT", principal: "User:ANONYMOUS", authenticated: false });
    expect(await ssl.ask()).toEqual({ listenerName: "SSL", securityProtocol: "SSL", principal: "User:ANONYMOUS", authenticated: true });
    // The same object for the connection's life: a second request sees the first's.
    expect(await plain.ask()).toMatchObject({ listenerName: "PLAINTEXT" });
    const stats = listener.connectionStats().map((s) => [s.listenerName, s.securityProtocol, s.principal, s.handshaking]).sort();
    expect(stats).toEqual([
      ["CLIENT", "SASL_PLAINTEXT", "User:ANONYMOUS", false],
      ["PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS", false],
      ["SSL", "SSL", "User:ANONYMOUS", false],
    ]);
    for (const c of [plain, sasl, ssl]) c.end();
  });

  test("a port taken by another listener fails the start with the listener's name, and frees what it bound", async () => {
    const { port } = await listen([{ name: "PLAINTEXT", securityProtocol: "PLAINTEXT" }]);
    const attempt = startKafkaListener({
      endpoints: [
        { name: "FIRST", securityProtocol: "PLAINTEXT", host: "127.0.0.1", port: 0 },
        { name: "SECOND", securityProtocol: "PLAINTEXT", host: "127.0.0.1", port: port("PLAINTEXT") },
      ],
      maxRequestBytes: 1024,
      idleTimeoutMs: 0,
      dispatch: echoSecurity,
      log: capturingLogger(),
    });
    await expect(attempt).rejects.toThrow("the Kafka listener SECOND");
  });
});

describe("TLS", () => {
  test("ssl.client.auth=required: a verified certificate gives User:<subject in RFC 2253 order>", async () => {
    const { port, listener } = await listen([{ name: "SSL", securityProtocol: "SSL", clientAuth: "required" }]);
    const client = await connect(port("SSL"), withClientCert());
    expect(await client.ask()).toMatchObject({ principal: certs.clientPrincipal, authenticated: true, securityProtocol: "SSL" });
    expect(listener.connectionStats()[0]!.principal).toBe("User:CN=client-1,OU=wire,O=bunka tests,C=NL");
    client.end();
  });

  test("required: no certificate, or one of an unknown CA, is refused at the handshake; others go on", async () => {
    const log = capturingLogger();
    const { port, listener } = await listen([{ name: "SSL", securityProtocol: "SSL", clientAuth: "required" }], { log });
    const good = await connect(port("SSL"), withClientCert());
    const none = await connect(port("SSL"), trustOnly());
    // TLS 1.3: the client's handshake ends before the server checks its certificate, so the refusal is a close.
    await expect(none.ask()).rejects.toThrow("closed");
    const stranger = await connect(port("SSL"), withStrangerCert());
    await expect(stranger.ask()).rejects.toThrow("closed");
    expect(await good.ask()).toMatchObject({ principal: certs.clientPrincipal });
    await waitUntil(() => listener.connectionCount() === 1, "the refused connections closed");
    const refusals = log.lines.filter((l) => l.message.startsWith("closing connection"));
    expect(refusals.length).toBe(2);
    good.end();
  });

  test("requested: a client without a certificate is ANONYMOUS; an untrusted certificate is refused", async () => {
    const { port } = await listen([{ name: "SSL", securityProtocol: "SSL", clientAuth: "requested" }]);
    const none = await connect(port("SSL"), trustOnly());
    expect(await none.ask()).toMatchObject({ principal: "User:ANONYMOUS" });
    const good = await connect(port("SSL"), withClientCert());
    expect(await good.ask()).toMatchObject({ principal: certs.clientPrincipal });
    const stranger = await connect(port("SSL"), withStrangerCert());
    await expect(stranger.ask()).rejects.toThrow("closed");
    none.end();
    good.end();
  });

  test("SASL_SSL: TLS, but the principal waits for SASL even with a client certificate", async () => {
    const { port } = await listen([{ name: "SASL_SSL", securityProtocol: "SASL_SSL", clientAuth: "requested" }]);
    const client = await connect(port("SASL_SSL"), withClientCert());
    expect(await client.ask()).toEqual({ listenerName: "SASL_SSL", securityProtocol: "SASL_SSL", principal: "User:ANONYMOUS", authenticated: false });
    client.end();
  });

  test("an encrypted PKCS#8 key with ssl.key.password", async () => {
    const { port } = await listen([{ name: "SSL", securityProtocol: "SSL", tls: { keystoreLocation: certs.serverEncryptedKeystorePath, keyPassword: certs.keyPassword } }]);
    const client = await connect(port("SSL"), trustOnly());
    expect(await client.ask()).toMatchObject({ securityProtocol: "SSL" });
    client.end();
  });

  test("a plaintext client on the TLS port and a TLS client on the plaintext port lose their own connection only", async () => {
    const log = capturingLogger();
    const { port, listener } = await listen(
      [
        { name: "PLAINTEXT", securityProtocol: "PLAINTEXT" },
        { name: "SSL", securityProtocol: "SSL" },
      ],
      { log },
    );
    const tlsClient = await connect(port("SSL"), trustOnly());
    const plainClient = await connect(port("PLAINTEXT"));

    const plainOnTls = await connect(port("SSL"));
    await expect(plainOnTls.ask()).rejects.toThrow("closed");
    // The ClientHello reads as a size prefix of about 369 MB: the connection is closed, the line says why.
    const tlsOnPlain = await connect(port("PLAINTEXT"), trustOnly());
    expect(await tlsOnPlain.closed).not.toBe("");

    expect(await tlsClient.ask()).toMatchObject({ listenerName: "SSL" });
    expect(await plainClient.ask()).toMatchObject({ listenerName: "PLAINTEXT" });
    await waitUntil(() => listener.connectionCount() === 2, "the wrong-protocol connections closed");
    const messages = log.lines.map((l) => l.message);
    expect(messages).toContain("closing connection: TLS handshake failed");
    expect(messages).toContain("closing connection: a TLS handshake on a listener without TLS");
    tlsClient.end();
    plainClient.end();
  });

  test("a flood of half-open handshakes is closed after the bound, and a TLS client is served meanwhile", async () => {
    const log = capturingLogger();
    const { port, listener } = await listen([{ name: "SSL", securityProtocol: "SSL" }], { log, tlsHandshakeTimeoutMs: 300 });
    const silent: Bun.Socket<undefined>[] = [];
    const closedCount = { n: 0 };
    for (let i = 0; i < 40; i++) {
      silent.push(
        await Bun.connect({ hostname: "127.0.0.1", port: port("SSL"), socket: { data() {}, close: () => void closedCount.n++ } }),
      );
    }
    await waitUntil(() => listener.connectionStats().filter((s) => s.handshaking).length === 40, "40 handshakes open");
    const client = await connect(port("SSL"), trustOnly());
    expect(await client.ask()).toMatchObject({ listenerName: "SSL" });
    await waitUntil(() => closedCount.n === 40, "the half-open handshakes closed", 10_000);
    expect(listener.connectionCount()).toBe(1);
    // Rate-limited: 40 connections, at most the listener's 10 lines per 10 s about them (plus the count of the rest).
    const lines = log.lines.filter((l) => l.message.startsWith("closing connection"));
    expect(lines.length).toBeLessThanOrEqual(10);
    expect(lines[0]!.message).toBe("closing connection: TLS handshake not finished in time");
    expect(await client.ask()).toMatchObject({ listenerName: "SSL" });
    client.end();
  });
});

describe("certificate reload", () => {
  test("new files: new connections get the new certificate, open ones keep going; a broken file keeps the old one, logged once", async () => {
    const log = capturingLogger();
    const keystore = join(certs.dir, "reload.keystore.pem");
    copyFileSync(certs.serverKeystorePath, keystore);
    const { port, sources } = await listen([{ name: "SSL", securityProtocol: "SSL", tls: { keystoreLocation: keystore } }], { log });
    const before = await connect(port("SSL"), trustOnly());
    expect(before.peerSubject()).toBe("CN=127.0.0.1");
    const source = sources.get("SSL")!;
    expect(source.checkForChanges()).toBe(false);

    certs.issueServerKeystore(keystore, "renewed.example");
    expect(source.checkForChanges()).toBe(true);
    const after = await connect(port("SSL"), trustOnly());
    expect(after.peerSubject()).toBe("CN=renewed.example");
    expect(await before.ask()).toMatchObject({ listenerName: "SSL" });
    expect(await after.ask()).toMatchObject({ listenerName: "SSL" });

    writeFileSync(keystore, "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n");
    expect(source.checkForChanges()).toBe(false);
    expect(source.checkForChanges()).toBe(false);
    const warnings = log.lines.filter((l) => l.message.startsWith("TLS files changed but cannot be used"));
    expect(warnings.length).toBe(1);
    const still = await connect(port("SSL"), trustOnly());
    expect(still.peerSubject()).toBe("CN=renewed.example");
    expect(await still.ask()).toMatchObject({ listenerName: "SSL" });
    for (const c of [before, after, still]) c.end();
  });
});

describe("max.connections under a flood", () => {
  test("handshakes in progress count; refusals past the bound are rate-limited lines, and the bound frees up", async () => {
    const log = capturingLogger();
    const { port, listener } = await listen([{ name: "SSL", securityProtocol: "SSL" }], { log, tlsHandshakeTimeoutMs: 300, maxConnections: 5 });
    let closed = 0;
    for (let i = 0; i < 30; i++) await Bun.connect({ hostname: "127.0.0.1", port: port("SSL"), socket: { data() {}, close: () => void closed++ } });
    await waitUntil(() => closed >= 25, "the connections past max.connections refused");
    expect(listener.connectionCount()).toBe(5);
    const refusals = log.lines.filter((l) => l.message === "refusing connection: too many connections");
    expect(refusals.length).toBeLessThanOrEqual(10);
    // The half-open five time out, and a real client gets in.
    await waitUntil(() => listener.connectionCount() === 0, "the half-open handshakes closed", 10_000);
    const client = await connect(port("SSL"), trustOnly());
    expect(await client.ask()).toMatchObject({ listenerName: "SSL" });
    client.end();
  });
});
