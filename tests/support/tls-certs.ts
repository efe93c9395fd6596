/**
 * Certificates made per test run by `openssl`, in a temporary directory: a CA, a server certificate for
 * 127.0.0.1 and localhost, a client certificate, and PEM keystores as Apache's PEM keystore reads them
 * (the private key followed by the certificate chain in one file), one of them with an encrypted PKCS#8
 * key. Nothing is checked in: keys in the repository would be keys anyone could use.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface CertificateSet {
  dir: string;
  /** The CA certificate (PEM): a truststore. */
  caPath: string;
  /** Server key + certificate chain in one PEM file (unencrypted key). */
  serverKeystorePath: string;
  /** The same server certificate with its key as an encrypted PKCS#8 block; the password is `keyPassword`. */
  serverEncryptedKeystorePath: string;
  keyPassword: string;
  /** Client key + certificate in one PEM file, and apart (for clients that want them separately). */
  clientKeystorePath: string;
  clientKeyPath: string;
  clientCertPath: string;
  /** The client certificate's subject as openssl takes it (-subj). */
  clientSubject: string;
  /** Apache's principal for the client certificate: User: + the subject in RFC 2253 order. */
  clientPrincipal: string;
  /** A second CA and a client certificate it signed: one the broker's truststore does not know. */
  strangerKeystorePath: string;
  strangerKeyPath: string;
  strangerCertPath: string;
  /** Makes another server certificate (same CA, new serial and subject CN) into `path`; returns its CN. */
  issueServerKeystore(path: string, commonName: string): string;
  remove(): void;
}

function run(args: string[], cwd: string): void {
  const result = Bun.spawnSync(["openssl", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) throw new Error(`openssl ${args.join(" ")} failed: ${result.stderr.toString()}`);
}

export function makeCertificates(): CertificateSet {
  const dir = mkdtempSync(join(tmpdir(), "bunka-tls-"));
  const at = (name: string) => join(dir, name);
  const keyPassword = "bunka-key-pass";
  writeFileSync(at("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  writeFileSync(at("client.ext"), "extendedKeyUsage=clientAuth\n");

  const makeCa = (name: string, cn: string) => {
    run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "2", "-subj", `/CN=${cn}`], dir);
  };
  const issue = (ca: string, name: string, subject: string, ext: string) => {
    run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject], dir);
    run(["x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}.key`, "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", ext], dir);
    writeFileSync(at(`${name}.keystore.pem`), readFileSync(at(`${name}.key`), "utf8") + readFileSync(at(`${name}.pem`), "utf8"));
  };

  makeCa("ca", "bunka test CA");
  issue("ca", "server", "/CN=127.0.0.1", "server.ext");
  const clientSubject = "/C=NL/O=bunka tests/OU=wire/CN=client-1";
  issue("ca", "client", clientSubject, "client.ext");
  makeCa("stranger-ca", "unknown CA");
  issue("stranger-ca", "stranger", "/CN=stranger", "client.ext");
  // openssl's default for pkcs8 -topk8 with a password is PBES2 (AES-256-CBC), what Apache's PEM keystore reads.
  run(["pkcs8", "-topk8", "-in", "server.key", "-out", "server.enc.key", "-passout", `pass:${keyPassword}`], dir);
  writeFileSync(at("server.enc.keystore.pem"), readFileSync(at("server.enc.key"), "utf8") + readFileSync(at("server.pem"), "utf8"));

  let serial = 0;
  return {
    dir,
    caPath: at("ca.pem"),
    serverKeystorePath: at("server.keystore.pem"),
    serverEncryptedKeystorePath: at("server.enc.keystore.pem"),
    keyPassword,
    clientKeystorePath: at("client.keystore.pem"),
    clientKeyPath: at("client.key"),
    clientCertPath: at("client.pem"),
    clientSubject,
    clientPrincipal: "User:CN=client-1,OU=wire,O=bunka tests,C=NL",
    strangerKeystorePath: at("stranger.keystore.pem"),
    strangerKeyPath: at("stranger.key"),
    strangerCertPath: at("stranger.pem"),
    issueServerKeystore(path, commonName) {
      const name = `reissued-${++serial}`;
      run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${commonName}`], dir);
      run(["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", "server.ext"], dir);
      writeFileSync(path, readFileSync(at(`${name}.key`), "utf8") + readFileSync(at(`${name}.pem`), "utf8"));
      return commonName;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
