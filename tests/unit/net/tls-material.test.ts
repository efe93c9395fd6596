/**
 * Reading the PEM keystore and truststore (KIP-651's PEM files): what a good pair gives Bun, and every
 * problem as a one-line ConfigError naming the key and the file. Certificates made by openssl for this run.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TlsSettings } from "../../../src/broker/listener-config.ts";
import { ConfigError } from "../../../src/errors/errors.ts";
import { loadTlsMaterial, type TlsFileReader } from "../../../src/net/tls-material.ts";
import { type CertificateSet, makeCertificates } from "../../support/tls-certs.ts";

let certs: CertificateSet;
beforeAll(() => {
  certs = makeCertificates();
});
afterAll(() => certs.remove());

const files: TlsFileReader = { readText: (p) => readFileSync(p, "utf8"), version: (p) => String(statSync(p).mtimeMs) };
const settings = (overrides: Partial<TlsSettings> = {}): TlsSettings => ({
  keystoreLocation: certs.serverKeystorePath,
  keyPassword: undefined,
  truststoreLocation: undefined,
  clientAuth: "none",
  keystoreKey: "ssl.keystore.location",
  truststoreKey: "ssl.truststore.location",
  ...overrides,
});

function problem(s: TlsSettings): string {
  let caught: unknown;
  try {
    loadTlsMaterial(s, files);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  const message = (caught as Error).message;
  expect(message).not.toContain("\n");
  return message;
}

test("a keystore and truststore give Bun the key, the chain, the CAs and the client-auth mode", () => {
  const none = loadTlsMaterial(settings(), files);
  expect(none.options.requestCert).toBe(false);
  expect(String(none.options.key)).toContain("-----BEGIN PRIVATE KEY-----");
  expect(String(none.options.cert)).toContain("-----BEGIN CERTIFICATE-----");
  expect(none.subject).toBe("CN=127.0.0.1");
  const required = loadTlsMaterial(settings({ truststoreLocation: certs.caPath, clientAuth: "required" }), files);
  expect([required.options.requestCert, required.options.rejectUnauthorized]).toEqual([true, true]);
  expect((required.options.ca as string[]).length).toBe(1);
  const requested = loadTlsMaterial(settings({ truststoreLocation: certs.caPath, clientAuth: "requested" }), files);
  expect([requested.options.requestCert, requested.options.rejectUnauthorized]).toEqual([true, false]);
});

test("an encrypted PKCS#8 key is decrypted with ssl.key.password, and handed to Bun decrypted", () => {
  const material = loadTlsMaterial(settings({ keystoreLocation: certs.serverEncryptedKeystorePath, keyPassword: certs.keyPassword }), files);
  expect(String(material.options.key)).toContain("-----BEGIN PRIVATE KEY-----");
  expect(problem(settings({ keystoreLocation: certs.serverEncryptedKeystorePath }))).toContain("holds an encrypted key and ssl.key.password is not set");
  expect(problem(settings({ keystoreLocation: certs.serverEncryptedKeystorePath, keyPassword: "wrong" }))).toStartWith(`ssl.keystore.location: "${certs.serverEncryptedKeystorePath}": `);
});

test("missing files, no key, no certificate, a key that is not the certificate's, an empty truststore", () => {
  expect(problem(settings({ keystoreLocation: join(certs.dir, "absent.pem") }))).toStartWith(`ssl.keystore.location: cannot read "${join(certs.dir, "absent.pem")}"`);
  expect(problem(settings({ keystoreLocation: certs.caPath }))).toContain("must hold one PEM private key, found 0");
  const keyOnly = join(certs.dir, "key-only.pem");
  writeFileSync(keyOnly, readFileSync(certs.clientKeyPath, "utf8"));
  expect(problem(settings({ keystoreLocation: keyOnly }))).toContain("holds no PEM certificate");
  const mismatched = join(certs.dir, "mismatched.pem");
  writeFileSync(mismatched, readFileSync(certs.clientKeyPath, "utf8") + readFileSync(join(certs.dir, "server.pem"), "utf8"));
  expect(problem(settings({ keystoreLocation: mismatched }))).toContain("the first certificate is not the private key's");
  expect(problem(settings({ truststoreLocation: keyOnly, truststoreKey: "listener.name.ssl.ssl.truststore.location" }))).toStartWith(
    `listener.name.ssl.ssl.truststore.location: "${keyOnly}" holds no PEM certificate`,
  );
});
