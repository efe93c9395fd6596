/**
 * The compiled binary with a PLAINTEXT and an SSL listener from a config file (Apache's keys; `--listen`
 * is the PLAINTEXT listener's address): the start-up line names both, the SSL listener answers over TLS
 * and advertises itself to an SSL client, SIGHUP gives new connections a new certificate, and a keystore
 * that cannot be used stops the start with one line and exit 2, before recovery.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { freePort } from "../support/apache-kafka.ts";
import { BunkaProcess, cleanEnv, ensureBunkaBinary, killAllBunkaProcesses, removeTempDir } from "../support/binary.ts";
import { type CertificateSet, makeCertificates } from "../support/tls-certs.ts";
import { startTlsTunnel, tlsOptions } from "../support/tls-tunnel.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 180_000;
let binary: string;
let dir: string;
let certs: CertificateSet;

beforeAll(async () => {
  binary = await ensureBunkaBinary();
  dir = mkdtempSync(join(tmpdir(), "bunka-binary-tls-"));
  certs = makeCertificates();
}, TIMEOUT);
afterAll(async () => {
  await killAllBunkaProcesses();
  certs?.remove();
  removeTempDir(dir);
});

async function serverSubject(port: number): Promise<string | undefined> {
  const done = Promise.withResolvers<string | undefined>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    tls: tlsOptions({ caPath: certs.caPath }),
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

test("PLAINTEXT and SSL from a config file; SIGHUP reloads the certificate; SIGTERM exits 0", async () => {
  const sslPort = freePort();
  const keystore = join(dir, "broker.pem");
  copyFileSync(certs.serverEncryptedKeystorePath, keystore);
  const config = join(dir, "tls.properties");
  writeFileSync(
    config,
    [
      `listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:${sslPort}`,
      "ssl.keystore.type=PEM",
      `ssl.keystore.location=${keystore}`,
      `ssl.key.password=${certs.keyPassword}`,
      // Only SIGHUP reloads here, so that the test knows what made the reload.
      "ssl.reload.check.interval.ms=0",
    ].join("\n") + "\n",
  );
  const logFile = join(dir, "tls.log");
  const broker = await BunkaProcess.start({ binary, dataDir: join(dir, "data"), logFile, args: ["--config", config] });

  const plain = await WireClient.connect(broker.port);
  const tunnel = startTlsTunnel(sslPort, { caPath: certs.caPath });
  const ssl = await WireClient.connect(tunnel.port);
  try {
    expect((await ssl.request(18, 3, { clientSoftwareName: "e2e", clientSoftwareVersion: "1" })).errorCode).toBe(ErrorCode.NONE);
    expect((await ssl.request(3, 12, { topics: null })).brokers.map((b: { port: number }) => b.port)).toEqual([sslPort]);
    expect((await plain.request(3, 12, { topics: null })).brokers.map((b: { port: number }) => b.port)).toEqual([broker.port]);

    expect(await serverSubject(sslPort)).toBe("CN=127.0.0.1");
    certs.issueServerKeystore(keystore, "after-sighup.example");
    broker.proc.kill("SIGHUP");
    const deadline = Date.now() + 10_000;
    // The reload binds the port again, so a connection attempt at that instant can be refused, or reset
    // when it was still queued on the port's old socket; a client reconnects, and so does this loop
    // (docs/operations.md, "TLS").
    const subjectOrRefused = () =>
      serverSubject(sslPort).catch((error: { code?: string }) => (error.code === "ECONNREFUSED" || error.code === "ECONNRESET" ? "refused" : Promise.reject(error)));
    let subject = await subjectOrRefused();
    while (subject !== "CN=after-sighup.example" && Date.now() < deadline) subject = await subjectOrRefused();
    expect(subject).toBe("CN=after-sighup.example");
    // The connection opened before the reload is still served.
    expect((await ssl.request(18, 3, { clientSoftwareName: "e2e", clientSoftwareVersion: "1" })).errorCode).toBe(ErrorCode.NONE);
  } finally {
    plain.close();
    ssl.close();
    tunnel.close();
  }
  expect(await broker.kill("SIGTERM")).toBe(0);
  const log = await Bun.file(logFile).text();
  expect(log).toContain("TLS certificate reloaded");
}, TIMEOUT);

test("a keystore that cannot be used: one line naming the key and file, exit 2", async () => {
  const config = join(dir, "broken.properties");
  writeFileSync(config, `listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\nssl.keystore.location=${certs.caPath}\n`);
  const proc = Bun.spawn([binary, "serve", "--config", config, "--data-dir", join(dir, "broken-data"), "--http", "127.0.0.1:0"], {
    stdout: "pipe",
    stderr: "pipe",
    env: cleanEnv(),
  });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  expect(code).toBe(2);
  const lines = stderr.trim().split("\n").filter((l) => l.startsWith("bunka: "));
  expect(lines).toEqual([`bunka: ssl.keystore.location: ${JSON.stringify(certs.caPath)} must hold one PEM private key, found 0`]);
}, TIMEOUT);
