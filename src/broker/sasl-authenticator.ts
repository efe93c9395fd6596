/**
 * SASL on the broker (docs/architecture.md, "SASL"): the gate the dispatcher asks before every request on
 * a SASL_PLAINTEXT or SASL_SSL connection, and what SaslHandshake (17) and SaslAuthenticate (36) do. The
 * rules are the per-connection state machine (domain/security/sasl-session.ts); this module keeps one
 * session per connection (by its ConnectionSecurity, so nothing is left behind when the connection goes),
 * makes the mechanisms' exchanges (PLAIN against sasl.plain.users.file, SCRAM against the credential
 * store), and does what the state machine asks of the connection. The PLAIN users file is read at start
 * (a bad one refuses it) and again when it changed (modification time or size, looked at by a PLAIN
 * handshake at most once a second); a changed file that cannot be used is logged once and the users held
 * are kept, so that a half-written file never locks everyone out.
 *
 *
 * - success: the ConnectionSecurity gets the principal (User:<name>), `authenticated`, the mechanism and
 *   the session's end (connections.max.reauth.ms);
 * - a failure: counted (`/metrics`), logged at info without the secret (rate-limited across the broker),
 *   answered after connection.failed.authentication.delay.ms (Apache's delay against guessing), and the
 *   connection closed once that answer is written;
 * - a request the gate refuses (before authentication, or after the session ended): the connection closes
 *   (CloseConnection) without an answer, as Apache closes it. So does a frame larger than
 *   sasl.server.max.receive.size (512 KiB) before authentication, Apache's bound on what an
 *   unauthenticated client may make the broker hold; the listener has read it whole by then (its own bound
 *   is socket.request.max.bytes), so this keeps such a client from doing it twice, not once.
 *
 * Connections on PLAINTEXT and SSL listeners have no session: SaslHandshake and SaslAuthenticate are
 * answered ILLEGAL_SASL_STATE there, as Apache's KafkaApis answers them.
 */
import { randomBytes } from "node:crypto";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { ConfigError } from "../errors/errors.ts";
import type { ConnectionSecurity } from "../domain/security/connection-security.ts";
import { usesSasl } from "../domain/security/connection-security.ts";
import { parsePlainUsers, passwordsEqual, PlainServer } from "../domain/security/sasl-plain.ts";
import { SaslSession, type SaslAuthenticated, type SaslFailure } from "../domain/security/sasl-session.ts";
import { scramMechanism, ScramServer, type SaslServerExchange } from "../domain/security/scram.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import { LogRateLimit } from "../platform/log-rate-limit.ts";
import type { Logger } from "../platform/logger.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import type { SaslAuthenticateResponseInit } from "../protocol/generated/sasl-authenticate-response.ts";
import type { SaslHandshakeResponseInit } from "../protocol/generated/sasl-handshake-response.ts";
import type { ScramCredentialStore } from "../storage/scram-credential-store.ts";
import type { BrokerConfig } from "./config.ts";
import { CloseConnection, type ConnectionInfo } from "./handler.ts";

export type SaslSettings = Pick<
  BrokerConfig,
  "saslEnabledMechanisms" | "listenerSaslEnabledMechanisms" | "saslPlainUsersFile" | "connectionsMaxReauthMs" | "connectionFailedAuthenticationDelayMs" | "saslServerMaxReceiveSize"
>;

/** The mechanisms a listener serves: its listener.name.<name>.sasl.enabled.mechanisms, else sasl.enabled.mechanisms. */
export function mechanismsOf(settings: Pick<SaslSettings, "saslEnabledMechanisms" | "listenerSaslEnabledMechanisms">, listenerName: string): readonly string[] {
  return settings.listenerSaslEnabledMechanisms[listenerName.toUpperCase()] ?? settings.saslEnabledMechanisms;
}

/** Every mechanism some listener serves (sasl.enabled.mechanisms first), for the metrics' labels and PLAIN's file. */
export function mechanismsServed(settings: Pick<SaslSettings, "saslEnabledMechanisms" | "listenerSaslEnabledMechanisms">): string[] {
  return [...new Set([...settings.saslEnabledMechanisms, ...Object.values(settings.listenerSaslEnabledMechanisms).flat()])];
}

/** Counts for `/metrics`, by mechanism ("" when the client named none that exists). */
export interface SaslCounts {
  authenticated: Map<string, number>;
  reauthenticated: Map<string, number>;
  failed: Map<string, number>;
  failedReauthentication: Map<string, number>;
  /** Connections closed because a request came after their session ended. */
  expiredSessionsClosed: number;
}

export interface SaslAuthenticatorOptions {
  settings: SaslSettings;
  /** The PLAIN users (name -> password); needed when PLAIN is enabled. */
  plainUsers: ReadonlyMap<string, string> | undefined;
  /** Where sasl.plain.users.file is read again from when it changes; absent, never. */
  fs?: Fs;
  /** The users file's version (modification time and size) when `plainUsers` was read. */
  plainUsersVersion?: string;
  credentials: Pick<ScramCredentialStore, "get">;
  clock: Clock;
  log: Logger;
  timers?: Timers;
  /** The server's part of a SCRAM nonce; default 24 random bytes in base64. */
  serverNonce?: () => string;
}

const EMPTY = new Uint8Array(0);

export class SaslAuthenticator {
  private readonly sessions = new WeakMap<ConnectionSecurity, SaslSession>();
  private readonly failureLines: LogRateLimit;
  private plainUsers: ReadonlyMap<string, string> | undefined;
  private plainUsersVersion: string | undefined;
  private plainUsersCheckedAtMs = Number.NEGATIVE_INFINITY;
  readonly counts: SaslCounts = { authenticated: new Map(), reauthenticated: new Map(), failed: new Map(), failedReauthentication: new Map(), expiredSessionsClosed: 0 };

  constructor(private readonly options: SaslAuthenticatorOptions) {
    this.failureLines = new LogRateLimit(20, 10_000, () => options.clock.monotonicMs());
    this.plainUsers = options.plainUsers;
    this.plainUsersVersion = options.plainUsersVersion;
    this.plainUsersCheckedAtMs = options.clock.monotonicMs();
  }

  /**
   * Reads sasl.plain.users.file when PLAIN is enabled. A missing setting, an unreadable or malformed file
   * is a ConfigError (the start is refused with one line).
   */
  static async open(fs: Fs, settings: SaslSettings, credentials: Pick<ScramCredentialStore, "get">, clock: Clock, log: Logger): Promise<SaslAuthenticator> {
    let plainUsers: Map<string, string> | undefined;
    let plainUsersVersion: string | undefined;
    if (mechanismsServed(settings).includes("PLAIN")) {
      const path = settings.saslPlainUsersFile;
      if (path === undefined) throw new ConfigError("PLAIN is enabled (sasl.enabled.mechanisms or listener.name.<name>.sasl.enabled.mechanisms) but sasl.plain.users.file is not set");
      let text: string;
      try {
        plainUsersVersion = versionOf(await fs.stat(path));
        text = new TextDecoder("utf-8", { fatal: true }).decode(await fs.readFile(path));
      } catch (error) {
        throw new ConfigError(`sasl.plain.users.file ${JSON.stringify(path)} cannot be read: ${(error as Error).message ?? String(error)}`);
      }
      const parsed = parsePlainUsers(text);
      if (!parsed.ok) throw new ConfigError(`sasl.plain.users.file ${JSON.stringify(path)}: ${parsed.reason}`);
      plainUsers = parsed.users;
    }
    return new SaslAuthenticator({ settings, plainUsers, credentials, clock, log, fs, ...(plainUsersVersion === undefined ? {} : { plainUsersVersion }) });
  }

  /** The SASL session of a connection on a SASL_* listener, made at its first request; undefined for others. */
  sessionOf(connection: ConnectionInfo): SaslSession | undefined {
    const security = connection.security;
    if (security === undefined || !usesSasl(security.securityProtocol)) return undefined;
    let session = this.sessions.get(security);
    if (session === undefined) {
      session = new SaslSession({
        enabledMechanisms: mechanismsOf(this.options.settings, security.listenerName),
        maxReauthMs: this.options.settings.connectionsMaxReauthMs,
        newExchange: (mechanism) => this.newExchange(mechanism),
      });
      this.sessions.set(security, session);
    }
    return session;
  }

  /**
   * The gate, for every request but SaslHandshake and SaslAuthenticate: throws CloseConnection when the
   * connection may not send it (not authenticated yet, or its session ended).
   */
  admit(apiKey: number, connection: ConnectionInfo): void {
    const session = this.sessionOf(connection);
    if (session === undefined) return;
    const before = session.phase;
    if (session.admit(apiKey, this.options.clock.monotonicMs()) === "serve") return;
    const expired = before === "authenticated" || (before === "authenticating" && session.authenticated !== undefined);
    if (expired) {
      this.counts.expiredSessionsClosed++;
      connection.security!.authenticated = false;
      throw new CloseConnection(`SASL: a request (API key ${apiKey}) after the authentication session ended`);
    }
    throw new CloseConnection(`SASL: a request (API key ${apiKey}) before authentication`);
  }

  async handshake(mechanism: string, version: number, connection: ConnectionInfo): Promise<SaslHandshakeResponseInit> {
    const session = this.sessionOf(connection);
    if (session === undefined) return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [] };
    const outcome = session.handshake(mechanism, version, this.options.clock.monotonicMs());
    const response = { errorCode: outcome.errorCode, mechanisms: outcome.mechanisms };
    // After the state moved (a pipelined SaslAuthenticate finds it moved), before the answer (the
    // client's token comes after it, and is checked against the file as it is now).
    if (outcome.errorCode === ErrorCode.NONE && mechanism === "PLAIN") await this.refreshPlainUsers();
    if (outcome.close) await this.refuse(connection, outcome.failure);
    return response;
  }

  async authenticate(authBytes: Uint8Array, connection: ConnectionInfo): Promise<SaslAuthenticateResponseInit> {
    const session = this.sessionOf(connection);
    if (session === undefined) {
      return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, errorMessage: "SaslAuthenticate request received after successful authentication", authBytes: EMPTY, sessionLifetimeMs: 0 };
    }
    const outcome = session.authenticate(authBytes, this.options.clock.monotonicMs());
    if (outcome.authenticated !== undefined) this.succeeded(connection, outcome.authenticated);
    if (outcome.response === undefined) {
      this.fail(connection, outcome.failure);
      throw new CloseConnection("SASL: SaslAuthenticate before SaslHandshake");
    }
    if (outcome.close) await this.refuse(connection, outcome.failure);
    return outcome.response;
  }

  /**
   * A frame after SaslHandshake v0 is a raw SASL token: answered with the raw token, or, on a failure,
   * not at all (the connection closes, as Apache's does for these old clients). Undefined when the
   * connection expects no raw token and the frame is a Kafka request.
   */
  rawToken(frame: Uint8Array, connection: ConnectionInfo): Promise<Uint8Array> | undefined {
    const session = this.sessionOf(connection);
    if (session === undefined) return undefined;
    if (frame.byteLength > this.options.settings.saslServerMaxReceiveSize && session.authenticated === undefined) {
      this.fail(connection, { mechanism: undefined, reason: `a frame of ${frame.byteLength} bytes before authentication (sasl.server.max.receive.size ${this.options.settings.saslServerMaxReceiveSize})`, reauthentication: false });
      throw new CloseConnection("SASL: Failing SASL authentication due to invalid receive size");
    }
    if (!session.expectsRawToken) return undefined;
    const outcome = session.rawToken(frame, this.options.clock.monotonicMs());
    if (outcome.authenticated !== undefined) this.succeeded(connection, outcome.authenticated);
    if (outcome.token !== undefined) return Promise.resolve(outcome.token.slice());
    this.fail(connection, outcome.failure);
    return this.delay().then(() => {
      throw new CloseConnection("SASL: authentication with raw tokens (SaslHandshake v0) failed");
    });
  }

  private newExchange(mechanism: string): SaslServerExchange {
    if (mechanism === "PLAIN") {
      return new PlainServer({
        verify: (user, password) => {
          const users = this.plainUsers;
          return users !== undefined && users.has(user) && passwordsEqual(users.get(user)!, password);
        },
      });
    }
    const info = scramMechanism(mechanism);
    if (info === undefined) throw new Error(`no exchange for the SASL mechanism ${mechanism}`);
    return new ScramServer({
      mechanism: info,
      credentialOf: (user) => this.options.credentials.get(user, mechanism),
      serverNonce: this.options.serverNonce ?? (() => randomBytes(24).toString("base64")),
    });
  }

  /** Reads sasl.plain.users.file again when it changed; at most once a second. */
  private async refreshPlainUsers(): Promise<void> {
    const { fs, settings, clock, log } = this.options;
    const path = settings.saslPlainUsersFile;
    if (fs === undefined || path === undefined) return;
    const nowMs = clock.monotonicMs();
    if (nowMs - this.plainUsersCheckedAtMs < 1000) return;
    this.plainUsersCheckedAtMs = nowMs;
    let version: string;
    try {
      version = versionOf(await fs.stat(path));
    } catch (error) {
      version = `unreadable: ${String(error)}`;
    }
    if (version === this.plainUsersVersion) return;
    this.plainUsersVersion = version;
    let parsed: ReturnType<typeof parsePlainUsers>;
    try {
      parsed = parsePlainUsers(new TextDecoder("utf-8", { fatal: true }).decode(await fs.readFile(path)));
    } catch (error) {
      parsed = { ok: false, reason: `cannot be read: ${(error as Error).message ?? String(error)}` };
    }
    if (!parsed.ok) {
      log.warn("sasl.plain.users.file changed but cannot be used; keeping the previous PLAIN users", { path, reason: parsed.reason });
      return;
    }
    this.plainUsers = parsed.users;
    log.info("sasl.plain.users.file read again", { path, users: parsed.users.size });
  }

  private succeeded(connection: ConnectionInfo, session: SaslAuthenticated): void {
    const security = connection.security!;
    security.principal = session.principal;
    security.authenticated = true;
    security.saslMechanism = session.mechanism;
    // The session is timed by the monotonic clock (a wall-clock step must not end or lengthen it, as
    // Apache times it by nanoTime); the connection's record says when that is by the wall clock.
    if (session.expiresAtMs === undefined) delete security.sessionExpiresAtMs;
    else security.sessionExpiresAtMs = this.options.clock.nowMs() + (session.expiresAtMs - this.options.clock.monotonicMs());
    bump(session.reauthentication ? this.counts.reauthenticated : this.counts.authenticated, session.mechanism);
    this.options.log.debug(session.reauthentication ? "SASL re-authentication succeeded" : "SASL authentication succeeded", {
      conn: connection.id,
      remote: connection.remoteAddress,
      listener: security.listenerName,
      principal: session.principal,
      mechanism: session.mechanism,
    });
  }

  /** A failure that is answered: counted and logged, the answer delayed, the connection closed after it. */
  private async refuse(connection: ConnectionInfo, failure: SaslFailure | undefined): Promise<void> {
    this.fail(connection, failure);
    await this.delay();
    // The answer is written when this request's promise settles; the close comes after it.
    (this.options.timers ?? systemTimers).after(0, () => connection.close());
  }

  private fail(connection: ConnectionInfo, failure: SaslFailure | undefined): void {
    const security = connection.security;
    if (security !== undefined && failure?.reauthentication) security.authenticated = false;
    if (failure === undefined) return;
    // The label is an enabled mechanism or "": a client's made-up names must not grow the metrics.
    const label = failure.mechanism !== undefined && mechanismsServed(this.options.settings).includes(failure.mechanism) ? failure.mechanism : "";
    bump(failure.reauthentication ? this.counts.failedReauthentication : this.counts.failed, label);
    const dropped = this.failureLines.admit();
    if (dropped === undefined) return;
    this.options.log.info(failure.reauthentication ? "SASL re-authentication failed" : "SASL authentication failed", {
      conn: connection.id,
      remote: connection.remoteAddress,
      listener: security?.listenerName,
      mechanism: failure.mechanism,
      reason: failure.reason,
      ...(dropped > 0 ? { linesDropped: dropped } : {}),
    });
  }

  private delay(): Promise<void> {
    const delayMs = this.options.settings.connectionFailedAuthenticationDelayMs;
    if (delayMs <= 0) return Promise.resolve();
    return new Promise((resolve) => (this.options.timers ?? systemTimers).after(delayMs, resolve));
  }
}

function versionOf(stat: { mtimeMs: number; size: number } | undefined): string {
  return stat === undefined ? "missing" : `${stat.mtimeMs}:${stat.size}`;
}

function bump(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}
