/**
 * The principal of a client certificate, as Apache's DefaultKafkaPrincipalBuilder gives it: User: + the
 * subject in Java's RFC 2253 form (last relative name first, special characters escaped, attributes
 * without an RFC 2253 keyword as OID=#hex). Certificates made by openssl for this run.
 */
import { afterAll, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CertificateParseError, principalOfCertificate, subjectRfc2253 } from "../../../src/net/tls-principal.ts";

const dir = mkdtempSync(join(tmpdir(), "bunka-principal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function certificateWithSubject(subject: string, extraArgs: string[] = []): Uint8Array {
  const name = `c${Math.random().toString(36).slice(2)}`;
  const result = Bun.spawnSync(
    ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "1", "-subj", subject, ...extraArgs],
    { cwd: dir, stderr: "pipe" },
  );
  if (result.exitCode !== 0) throw new Error(result.stderr.toString());
  return new Uint8Array(new X509Certificate(readFileSync(join(dir, `${name}.pem`))).raw);
}

test("relative names from the last to the first, joined by commas", () => {
  const der = certificateWithSubject("/C=NL/ST=Noord-Holland/L=Amsterdam/O=bunka/OU=wire/CN=client-1");
  expect(subjectRfc2253(der)).toBe("CN=client-1,OU=wire,O=bunka,L=Amsterdam,ST=Noord-Holland,C=NL");
  expect(principalOfCertificate(der)).toBe("User:CN=client-1,OU=wire,O=bunka,L=Amsterdam,ST=Noord-Holland,C=NL");
});

test("special characters are escaped; attributes without a keyword are OID=#hex of their DER value", () => {
  const der = certificateWithSubject("/C=US/O=Acme, Inc./CN=a=b;c<d/emailAddress=ops@acme.example");
  const email = new TextEncoder().encode("ops@acme.example");
  const emailDer = Array.from([0x16, email.length, ...email], (b) => b.toString(16).padStart(2, "0")).join("");
  expect(subjectRfc2253(der)).toBe(`1.2.840.113549.1.9.1=#${emailDer},CN=a\\=b\\;c\\<d,O=Acme\\, Inc.,C=US`);
});

test("a multi-valued relative name joins its attributes with +", () => {
  const der = certificateWithSubject("/O=bunka/CN=client+UID=u-7", ["-multivalue-rdn"]);
  expect(subjectRfc2253(der)).toBe("CN=client+UID=u-7,O=bunka");
});

test("what is not a certificate is a CertificateParseError", () => {
  expect(() => subjectRfc2253(new Uint8Array([0x30, 0x05, 0x02]))).toThrow(CertificateParseError);
  expect(() => subjectRfc2253(new Uint8Array([0x04, 0x00]))).toThrow(CertificateParseError);
});
