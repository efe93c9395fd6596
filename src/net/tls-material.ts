/**
 * The certificate, key and CA certificates of a TLS listener, read from PEM files as Apache's PEM
 * keystore and truststore are (KIP-651): the keystore file holds the private key (PKCS#8, encrypted with
 * ssl.key.password or not; PKCS#1 and SEC1 keys are read too) and the certificate chain, the truststore
 * file the CA certificates that client certificates are checked against.
 *
 * Reload: `checkForChanges` looks at the files' modification times and sizes and, when one changed, reads
 * and checks them again (the key decrypts, the first certificate is the key's, the CA certificates parse).
 * Good new files replace the material and tell the listener, which re-binds so that new connections get
 * the new certificate (connections already open keep theirs). A bad new file is logged once, with the
 * reason, and the previous material stays in use until the files change again.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { ClientAuth, TlsSettings } from "../broker/listener-config.ts";
import { ConfigError } from "../errors/errors.ts";
import type { Logger } from "../platform/logger.ts";

/** How the files are read: main.ts hands in node's; tests may count or fail reads. */
export interface TlsFileReader {
  readText(path: string): string;
  /** A value that changes whenever the file does (modification time and size). Throws when unreadable. */
  version(path: string): string;
}

export interface TlsServerMaterial {
  /** Bun.listen's (and Bun.serve's) `tls` option. */
  readonly options: Bun.TLSOptions;
  readonly clientAuth: ClientAuth;
  /** The subject of the server certificate, for the log. */
  readonly subject: string;
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?-----END \1-----/g;
const KEY_LABELS = new Set(["PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]);

function pemBlocks(text: string): { label: string; pem: string }[] {
  return [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1]!, pem: `${m[0]}\n` }));
}

const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error)).split(/\r?\n/, 1)[0]!;

/** Reads and checks the files of `settings`; a problem is a one-line ConfigError naming the key and file. */
export function loadTlsMaterial(settings: TlsSettings, files: TlsFileReader): TlsServerMaterial {
  const keystorePath = settings.keystoreLocation;
  let keystore: string;
  try {
    keystore = files.readText(keystorePath);
  } catch (error) {
    throw new ConfigError(`${settings.keystoreKey}: cannot read ${JSON.stringify(keystorePath)}: ${reasonOf(error)}`);
  }
  const blocks = pemBlocks(keystore);
  const keys = blocks.filter((b) => KEY_LABELS.has(b.label));
  const chain = blocks.filter((b) => b.label === "CERTIFICATE").map((b) => b.pem);
  const where = `${settings.keystoreKey}: ${JSON.stringify(keystorePath)}`;
  if (keys.length !== 1) throw new ConfigError(`${where} must hold one PEM private key, found ${keys.length}`);
  if (chain.length === 0) throw new ConfigError(`${where} holds no PEM certificate (the key's certificate chain belongs in the same file)`);
  const keyBlock = keys[0]!;
  if (keyBlock.label === "ENCRYPTED PRIVATE KEY" && settings.keyPassword === undefined) {
    throw new ConfigError(`${where} holds an encrypted key and ssl.key.password is not set`);
  }
  let keyPem: string;
  let certificate: X509Certificate;
  try {
    const key = createPrivateKey({ key: keyBlock.pem, format: "pem", ...(settings.keyPassword === undefined ? {} : { passphrase: settings.keyPassword }) });
    certificate = new X509Certificate(chain[0]!);
    if (!certificate.checkPrivateKey(key)) throw new Error("the first certificate is not the private key's");
    // Bun gets the key decrypted: one less place for the password to go wrong.
    keyPem = key.export({ type: "pkcs8", format: "pem" }).toString();
  } catch (error) {
    throw new ConfigError(`${where}: ${reasonOf(error)}`);
  }
  let ca: string[] | undefined;
  if (settings.truststoreLocation !== undefined) {
    const path = settings.truststoreLocation;
    const at = `${settings.truststoreKey}: ${JSON.stringify(path)}`;
    let text: string;
    try {
      text = files.readText(path);
    } catch (error) {
      throw new ConfigError(`${settings.truststoreKey}: cannot read ${JSON.stringify(path)}: ${reasonOf(error)}`);
    }
    ca = pemBlocks(text).filter((b) => b.label === "CERTIFICATE").map((b) => b.pem);
    if (ca.length === 0) throw new ConfigError(`${at} holds no PEM certificate`);
    for (const pem of ca) {
      try {
        new X509Certificate(pem);
      } catch (error) {
        throw new ConfigError(`${at}: ${reasonOf(error)}`);
      }
    }
  }
  const mode = settings.clientAuth;
  return {
    options: {
      key: keyPem,
      cert: chain.join(""),
      ...(ca === undefined ? {} : { ca }),
      // required: a client without a trusted certificate fails the handshake; requested: one without any
      // certificate is let in as ANONYMOUS (the listener refuses an untrusted one after the handshake).
      requestCert: mode !== "none",
      rejectUnauthorized: mode === "required",
    },
    clientAuth: mode,
    subject: certificate.subject.replace(/\n/g, ", "),
  };
}

/** One listener's material, kept current by `checkForChanges`. */
export class TlsMaterialSource {
  private material: TlsServerMaterial;
  private versions: string;
  /** The file versions whose failure was logged, so that a broken file is logged once. */
  private failedVersions: string | undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(
    readonly name: string,
    private readonly settings: TlsSettings,
    private readonly files: TlsFileReader,
    private readonly log: Logger,
  ) {
    this.versions = this.readVersions();
    this.material = loadTlsMaterial(settings, files);
  }

  current(): TlsServerMaterial {
    return this.material;
  }

  get clientAuth(): ClientAuth {
    return this.settings.clientAuth;
  }

  /** `listener` is called after every change of the material. */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Re-reads the files when they changed; true when new material took over. */
  checkForChanges(): boolean {
    let versions: string;
    try {
      versions = this.readVersions();
    } catch (error) {
      versions = `unreadable: ${reasonOf(error)}`;
    }
    if (versions === this.versions || versions === this.failedVersions) return false;
    let next: TlsServerMaterial;
    try {
      next = loadTlsMaterial(this.settings, this.files);
    } catch (error) {
      this.failedVersions = versions;
      this.log.warn("TLS files changed but cannot be used; keeping the previous certificate", { listener: this.name, error: reasonOf(error) });
      return false;
    }
    this.material = next;
    this.versions = versions;
    this.failedVersions = undefined;
    this.log.info("TLS certificate reloaded", { listener: this.name, subject: next.subject });
    for (const listener of this.listeners) listener();
    return true;
  }

  private readVersions(): string {
    const paths = [this.settings.keystoreLocation, this.settings.truststoreLocation].filter((p): p is string => p !== undefined);
    return paths.map((p) => this.files.version(p)).join("|");
  }
}

/**
 * Checks every source every `intervalMs` (and whenever `checkNow` is called: SIGHUP in main.ts). The timer
 * does not keep the process alive.
 */
export class TlsReloader {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly sources: readonly TlsMaterialSource[]) {}

  start(intervalMs: number): void {
    if (intervalMs <= 0 || this.sources.length === 0) return;
    this.timer = setInterval(() => this.checkNow(), intervalMs);
    this.timer.unref?.();
  }

  checkNow(): void {
    for (const source of this.sources) source.checkForChanges();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
