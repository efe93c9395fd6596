/**
 * The side-port over HTTPS (http.ssl.*): startHttpServer with the TLS material that net/tls-material.ts
 * reads from PEM files, and a client that trusts the test CA. Certificates made by openssl for this run.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { httpTlsSettings } from "../../../src/broker/listener-config.ts";
import { startHttpServer, type HttpServer } from "../../../src/http/server.ts";
import { loadTlsMaterial } from "../../../src/net/tls-material.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { type CertificateSet, makeCertificates } from "../../support/tls-certs.ts";

let certs: CertificateSet;
let server: HttpServer;

beforeAll(() => {
  certs = makeCertificates();
  const settings = httpTlsSettings({ keystoreLocation: certs.serverEncryptedKeystorePath, keyPassword: certs.keyPassword })!;
  const material = loadTlsMaterial(settings, { readText: (p) => readFileSync(p, "utf8"), version: (p) => String(statSync(p).mtimeMs) });
  server = startHttpServer({ host: "127.0.0.1", port: 0, fetch: () => new Response("ok"), log: silentLogger, tls: material.options });
});

afterAll(async () => {
  await server?.close();
  certs?.remove();
});

test("answers HTTPS to a client that trusts the CA", async () => {
  const res = await fetch(`https://127.0.0.1:${server.port}/health`, { tls: { ca: readFileSync(certs.caPath, "utf8") } });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("ok");
});

test("plain HTTP on the HTTPS port gets no answer", async () => {
  await expect(fetch(`http://127.0.0.1:${server.port}/health`)).rejects.toThrow();
});

test("a broken keystore is a one-line ConfigError naming the key", () => {
  const settings = httpTlsSettings({ keystoreLocation: certs.caPath })!;
  expect(() => loadTlsMaterial(settings, { readText: (p) => readFileSync(p, "utf8"), version: () => "" })).toThrow(
    /^http\.ssl\.keystore\.location: ".*ca\.pem" must hold one PEM private key, found 0$/,
  );
});
