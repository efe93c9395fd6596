/**
 * Listeners and TLS against an in-process broker: PLAINTEXT, SSL and an SSL listener with
 * ssl.client.auth=required (MTLS), certificates made by openssl for this run. Raw frames travel through a
 * local TLS tunnel (tests/support/tls-tunnel.ts), so the wire client is the plaintext one.
 *
 * - SSL answers ApiVersions and Metadata; Metadata, FindCoordinator and DescribeCluster name the address of
 *   the listener the request came in on (PLAINTEXT to a PLAINTEXT client, SSL to an SSL one), also for
 *   peers in cluster mode, which registered their listeners (one that did not is named by its only address;
 *   one without that listener is left out, as Apache leaves it out);
 * - MTLS refuses a client without a certificate and names one with a certificate by its subject;
 * - a new keystore reaches new connections without a restart;
 * - a plaintext client on the SSL port, and a flood of handshakes that never finish, leave the others served.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker } from "../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../src/broker/config.ts";
import { resolveListeners } from "../../src/broker/listener-config.ts";
import type { BrokerEndpoint } from "../../src/cluster/ownership.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { startKafkaListener, type KafkaListener } from "../../src/net/kafka-listener.ts";
import { TlsMaterialSource } from "../../src/net/tls-material.ts";
import { systemClock } from "../../src/platform/clock.ts";
import { silentLogger } from "../../src/platform/logger.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";
import { readFileSync, statSync } from "node:fs";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { type CertificateSet, makeCertificates } from "../support/tls-certs.ts";
import { startTlsTunnel, type TlsClientFiles, type TlsTunnel, tlsOptions } from "../support/tls-tunnel.ts";
import { waitUntil } from "../support/wait.ts";
import { WireClient } from "../support/wire-client.ts";

let certs: CertificateSet;
let broker: TestBroker;
let keystore: string;
const tunnels: TlsTunnel[] = [];
const clients: WireClient[] = [];

beforeAll(async () => {
  certs = makeCertificates();
  keystore = join(certs.dir, "broker.keystore.pem");
  copyFileSync(certs.serverKeystorePath, keystore);
  broker = await startTestBroker({
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SSL", host: "127.0.0.1", port: 0 },
      { name: "MTLS", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SSL: "SSL", MTLS: "SSL" },
    ssl: { keystoreLocation: keystore, truststoreLocation: certs.caPath },
    listenerSsl: { MTLS: { clientAuth: "required" } },
    sslHandshakeTimeoutMs: 300,
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  for (const t of tunnels) t.close();
  await broker?.stop();
  certs?.remove();
});

const trustOnly = (): TlsClientFiles => ({ caPath: certs.caPath });
const withClientCert = (): TlsClientFiles => ({ caPath: certs.caPath, certPath: certs.clientCertPath, keyPath: certs.clientKeyPath });

/** A wire client on listener `name`: plaintext, or over a TLS tunnel with `files`. */
async function clientOn(name: string, files?: TlsClientFiles): Promise<WireClient> {
  let port = broker.ports[name]!;
  if (files !== undefined) {
    const tunnel = startTlsTunnel(port, files);
    tunnels.push(tunnel);
    port = tunnel.port;
  }
  const client = await WireClient.connect(port);
  clients.push(client);
  return client;
}

const apiVersions = (c: WireClient) => c.request(18, 3, { clientSoftwareName: "bunka-wire", clientSoftwareVersion: "1" });
const metadataBrokers = async (c: WireClient) => (await c.request(3, 12, { topics: null })).brokers.map((b: { nodeId: number; host: string; port: number }) => [b.nodeId, b.host, b.port]);

describe("SSL listener", () => {
  test("answers ApiVersions and Metadata", async () => {
    const ssl = await clientOn("SSL", trustOnly());
    const versions = await apiVersions(ssl);
    expect(versions.errorCode).toBe(ErrorCode.NONE);
    expect(versions.apiKeys.length).toBeGreaterThan(10);
    expect(await metadataBrokers(ssl)).toEqual([[0, "127.0.0.1", broker.ports.SSL]]);
  });

  test("Metadata, FindCoordinator and DescribeCluster name the listener the request came in on", async () => {
    const plain = await clientOn("PLAINTEXT");
    const ssl = await clientOn("SSL", trustOnly());
    expect(await metadataBrokers(plain)).toEqual([[0, "127.0.0.1", broker.ports.PLAINTEXT]]);
    expect(await metadataBrokers(ssl)).toEqual([[0, "127.0.0.1", broker.ports.SSL]]);
    for (const [client, port] of [
      [plain, broker.ports.PLAINTEXT],
      [ssl, broker.ports.SSL],
    ] as const) {
      const coordinator = await client.request(10, 4, { keyType: 0, coordinatorKeys: ["orders-group"] });
      expect(coordinator.coordinators.map((c: { port: number; errorCode: number }) => [c.errorCode, c.port])).toEqual([[ErrorCode.NONE, port]]);
      const old = await client.request(10, 3, { key: "orders-group", keyType: 0 });
      expect(old.port).toBe(port);
      const cluster = await client.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
      expect(cluster.brokers.map((b: { port: number }) => b.port)).toEqual([port]);
    }
  });
});

describe("ssl.client.auth=required", () => {
  test("a client without a certificate is refused; one with a certificate is named by its subject", async () => {
    const anonymous = await clientOn("MTLS", trustOnly());
    await expect(apiVersions(anonymous)).rejects.toThrow("connection closed");

    const named = await clientOn("MTLS", withClientCert());
    expect((await apiVersions(named)).errorCode).toBe(ErrorCode.NONE);
    expect(await metadataBrokers(named)).toEqual([[0, "127.0.0.1", broker.ports.MTLS]]);
    const principals = broker.listener.connectionStats().filter((s) => s.listenerName === "MTLS").map((s) => s.principal);
    expect(principals).toEqual(["User:CN=client-1,OU=wire,O=bunka tests,C=NL"]);
  });
});

/** The subject of the certificate the SSL listener shows a new connection. */
async function serverSubject(port: number): Promise<string | undefined> {
  const done = Promise.withResolvers<string | undefined>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    tls: tlsOptions(trustOnly()),
    socket: {
      handshake: (s, success) => done.resolve(success ? s.getPeerX509Certificate()?.subject : undefined),
      data() {},
      close: () => done.resolve(undefined),
    },
  });
  const subject = await done.promise;
  socket.end();
  return subject;
}

describe("certificate reload", () => {
  test("a new keystore reaches new connections; a connection opened before keeps working", async () => {
    const before = await clientOn("SSL", trustOnly());
    expect((await apiVersions(before)).errorCode).toBe(ErrorCode.NONE);
    expect(await serverSubject(broker.ports.SSL!)).toBe("CN=127.0.0.1");
    certs.issueServerKeystore(keystore, "rotated.example");
    expect(broker.reloadTls()).toBe(true);
    expect(await serverSubject(broker.ports.SSL!)).toBe("CN=rotated.example");
    expect(await serverSubject(broker.ports.MTLS!)).toBe("CN=rotated.example");
    const after = await clientOn("SSL", trustOnly());
    expect((await apiVersions(after)).errorCode).toBe(ErrorCode.NONE);
    expect((await apiVersions(before)).errorCode).toBe(ErrorCode.NONE);
    expect(broker.reloadTls()).toBe(false);
  });
});

describe("errors that lose nothing", () => {
  test("a plaintext client on the SSL port loses its own connection; the others are served", async () => {
    const ssl = await clientOn("SSL", trustOnly());
    const plain = await clientOn("PLAINTEXT");
    const wrong = await WireClient.connect(broker.ports.SSL!);
    clients.push(wrong);
    await expect(apiVersions(wrong)).rejects.toThrow("connection closed");
    expect((await apiVersions(ssl)).errorCode).toBe(ErrorCode.NONE);
    expect((await apiVersions(plain)).errorCode).toBe(ErrorCode.NONE);
  });

  test("a TLS client on the PLAINTEXT port loses its own connection", async () => {
    const wrong = await clientOn("PLAINTEXT", trustOnly());
    await expect(apiVersions(wrong)).rejects.toThrow("connection closed");
    expect((await apiVersions(await clientOn("PLAINTEXT"))).errorCode).toBe(ErrorCode.NONE);
  });

  test("a flood of handshakes that never finish is closed after ssl.handshake.timeout.ms; an SSL client is served meanwhile", async () => {
    const flood: Bun.Socket<undefined>[] = [];
    let closed = 0;
    for (let i = 0; i < 50; i++) flood.push(await Bun.connect({ hostname: "127.0.0.1", port: broker.ports.SSL!, socket: { data() {}, close: () => void closed++ } }));
    await waitUntil(() => broker.listener.connectionStats().filter((s) => s.handshaking).length === 50, "50 handshakes open");
    const ssl = await clientOn("SSL", trustOnly());
    expect((await apiVersions(ssl)).errorCode).toBe(ErrorCode.NONE);
    await waitUntil(() => closed === 50, "the flood closed by the handshake bound", 10_000);
    expect(broker.listener.connectionStats().filter((s) => s.handshaking)).toEqual([]);
    expect((await apiVersions(ssl)).errorCode).toBe(ErrorCode.NONE);
  });
});

describe("cluster mode: peers per listener", () => {
  let dataDir: string;
  let clusterBroker: Broker;
  let listener: KafkaListener;
  const live: BrokerEndpoint[] = [];

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "bunka-tls-cluster-"));
    const config = {
      ...defaultBrokerConfig(),
      dataDir,
      brokerId: 2,
      listenPort: 0,
      httpPort: 0,
      listeners: [
        { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
        { name: "SSL", host: "127.0.0.1", port: 0 },
      ],
      ssl: { keystoreLocation: certs.serverKeystorePath },
    };
    clusterBroker = await createBroker({ config, fs: nodeFs, clock: systemClock, log: silentLogger, maintenance: false, cleaner: false, liveBrokers: () => live });
    const files = { readText: (p: string) => readFileSync(p, "utf8"), version: (p: string) => String(statSync(p).mtimeMs) };
    listener = await startKafkaListener({
      endpoints: resolveListeners(config).map((l) => ({
        name: l.name,
        securityProtocol: l.securityProtocol,
        host: l.host,
        port: 0,
        ...(l.tls === undefined ? {} : { tls: new TlsMaterialSource(l.name, l.tls, files, silentLogger) }),
      })),
      maxRequestBytes: config.socketRequestMaxBytes,
      idleTimeoutMs: 0,
      dispatch: (frame, conn) => clusterBroker.dispatch(frame, conn),
      log: silentLogger,
    });
    const [plain, ssl] = listener.endpoints();
    clusterBroker.setAdvertisedListener(plain!.host, plain!.port, [
      { name: "PLAINTEXT", host: plain!.host, port: plain!.port },
      { name: "SSL", host: "broker-2.example", port: ssl!.port },
    ]);
    live.push(
      { brokerId: 1, host: "broker-1.example", port: 9092, rack: null, listeners: [{ name: "PLAINTEXT", host: "broker-1.example", port: 9092 }, { name: "SSL", host: "broker-1.example", port: 9093 }] },
      { brokerId: 3, host: "broker-3.example", port: 9092, rack: null, listeners: [{ name: "PLAINTEXT", host: "broker-3.example", port: 9092 }] },
      { brokerId: 4, host: "broker-4.example", port: 9092, rack: null },
    );
  });

  afterAll(async () => {
    await listener?.close();
    await clusterBroker?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("an SSL client is told every broker's SSL address; a broker without one is left out, one without listeners keeps its only address", async () => {
    const [plainBound, sslBound] = listener.endpoints();
    const plain = await WireClient.connect(plainBound!.port);
    const tunnel = startTlsTunnel(sslBound!.port, trustOnly());
    tunnels.push(tunnel);
    const ssl = await WireClient.connect(tunnel.port);
    clients.push(plain, ssl);
    expect(await metadataBrokers(plain)).toEqual([
      [1, "broker-1.example", 9092],
      [2, "127.0.0.1", plainBound!.port],
      [3, "broker-3.example", 9092],
      [4, "broker-4.example", 9092],
    ]);
    expect(await metadataBrokers(ssl)).toEqual([
      [1, "broker-1.example", 9093],
      [2, "broker-2.example", sslBound!.port],
      [4, "broker-4.example", 9092],
    ]);
    const cluster = await ssl.request(60, 1, { includeClusterAuthorizedOperations: false, endpointType: 1 });
    expect(cluster.brokers.map((b: { brokerId: number; port: number }) => [b.brokerId, b.port])).toEqual([
      [1, 9093],
      [2, sslBound!.port],
      [4, 9092],
    ]);
  });
});
