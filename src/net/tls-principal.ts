/**
 * The Kafka principal of a TLS client certificate, as Apache's DefaultKafkaPrincipalBuilder makes it with
 * the default ssl.principal.mapping.rules: `User:` + the subject's distinguished name as Java's
 * X500Principal.getName() gives it (RFC 2253): the relative names from the last to the first, joined by
 * commas; CN, C, L, ST, O, OU, STREET, DC and UID by keyword, any other attribute (emailAddress,
 * serialNumber, ...) as its dotted OID and `#` + the hex of its DER value; the characters , = + < > # ; " \
 * escaped with a backslash, and so are leading and trailing spaces.
 *
 * Read from the certificate's DER, not from a library's display string, whose order and escapes differ.
 */

const RFC2253_KEYWORDS: Record<string, string> = {
  "2.5.4.3": "CN",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "2.5.4.9": "STREET",
  "0.9.2342.19200300.100.1.25": "DC",
  "0.9.2342.19200300.100.1.1": "UID",
};

const TAG_SEQUENCE = 0x30;
const TAG_SET = 0x31;
const TAG_OID = 0x06;
/** The string types Java prints as text (DerValue.isDerString, non-canonical). */
const STRING_TAGS = new Set([0x0c /* UTF8 */, 0x13 /* Printable */, 0x14 /* T61 */, 0x16 /* IA5 */, 0x1b /* General */, 0x1e /* BMP */]);
const ESCAPED = ',=+<>#;"\\';

interface Tlv {
  tag: number;
  /** Where the whole element starts and its content starts and ends, in the buffer. */
  start: number;
  contentStart: number;
  end: number;
}

export class CertificateParseError extends Error {
  override readonly name = "CertificateParseError";
}

function readTlv(der: Uint8Array, at: number, limit: number): Tlv {
  if (at + 2 > limit) throw new CertificateParseError("truncated DER element");
  const tag = der[at]!;
  let length = der[at + 1]!;
  let contentStart = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || contentStart + bytes > limit) throw new CertificateParseError("bad DER length");
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[contentStart + i]!;
    contentStart += bytes;
  }
  const end = contentStart + length;
  if (end > limit) throw new CertificateParseError("DER element runs past its parent");
  return { tag, start: at, contentStart, end };
}

function children(der: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.contentStart; at < parent.end; ) {
    const child = readTlv(der, at, parent.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

function oidText(der: Uint8Array, tlv: Tlv): string {
  const parts: number[] = [];
  let value = 0;
  for (let i = tlv.contentStart; i < tlv.end; i++) {
    const byte = der[i]!;
    value = value * 128 + (byte & 0x7f);
    if ((byte & 0x80) === 0) {
      if (parts.length === 0) parts.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
      else parts.push(value);
      value = 0;
    }
  }
  return parts.join(".");
}

/** Java reads every string type's bytes as UTF-8 here (BMPString too), and so do we, to give the same name. */
function stringValue(der: Uint8Array, tlv: Tlv): string {
  return new TextDecoder().decode(der.subarray(tlv.contentStart, tlv.end));
}

function escapeValue(value: string): string {
  let escaped = "";
  for (const c of value) escaped += c === "\u0000" ? "\\00" : ESCAPED.includes(c) ? `\\${c}` : c;
  // Leading and trailing spaces (and carriage returns) are escaped too.
  const chars = [...escaped];
  let lead = 0;
  while (lead < chars.length && (chars[lead] === " " || chars[lead] === "\r")) lead++;
  let trail = chars.length - 1;
  while (trail >= 0 && (chars[trail] === " " || chars[trail] === "\r")) trail--;
  return chars.map((c, i) => (i < lead || i > trail ? `\\${c}` : c)).join("");
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** One AttributeTypeAndValue in RFC 2253 form. */
function attribute(der: Uint8Array, ava: Tlv): string {
  const [type, value] = children(der, ava);
  if (type === undefined || value === undefined || type.tag !== TAG_OID) throw new CertificateParseError("bad AttributeTypeAndValue");
  const oid = oidText(der, type);
  const keyword = RFC2253_KEYWORDS[oid];
  if (keyword === undefined || !STRING_TAGS.has(value.tag)) return `${keyword ?? oid}=#${hex(der.subarray(value.start, value.end))}`;
  return `${keyword}=${escapeValue(stringValue(der, value))}`;
}

/** The subject of a DER certificate in RFC 2253 form (Java's X500Principal.getName()). */
export function subjectRfc2253(der: Uint8Array): string {
  const certificate = readTlv(der, 0, der.length);
  if (certificate.tag !== TAG_SEQUENCE) throw new CertificateParseError("not a certificate");
  const tbs = children(der, certificate)[0];
  if (tbs === undefined || tbs.tag !== TAG_SEQUENCE) throw new CertificateParseError("no TBSCertificate");
  const fields = children(der, tbs);
  // [0] version is optional; then serial, signature algorithm, issuer, validity, subject.
  const first = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[first + 4];
  if (subject === undefined || subject.tag !== TAG_SEQUENCE) throw new CertificateParseError("no subject");
  const rdns = children(der, subject).map((rdn) => {
    if (rdn.tag !== TAG_SET) throw new CertificateParseError("bad RelativeDistinguishedName");
    return children(der, rdn).map((ava) => attribute(der, ava)).join("+");
  });
  return rdns.reverse().join(",");
}

/** Apache's default principal for a verified client certificate. */
export function principalOfCertificate(der: Uint8Array): string {
  return `User:${subjectRfc2253(der)}`;
}
