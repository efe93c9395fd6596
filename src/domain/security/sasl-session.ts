/**
 * The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Apache Kafka's
 * SaslServerAuthenticator and KafkaChannel keep it (docs/architecture.md, "SASL"). Pure: the time is an
 * argument, the mechanisms' exchanges are made by an injected factory.
 *
 *   initial --ApiVersions--> versions-seen --SaslHandshake(ok)--> authenticating --SaslAuthenticate...--> authenticated
 *   initial --SaslHandshake(ok)--> authenticating
 *   authenticated --SaslHandshake(ok, re-authentication)--> authenticating (the old session still serves)
 *   any failure --> failed (the connection closes once the answer is written)
 *
 * - Before authentication only ApiVersions (once, first), SaslHandshake and SaslAuthenticate are served;
 *   anything else closes the connection, as Apache does ("Unexpected Kafka request of type X during SASL
 *   handshake").
 * - SaslHandshake v0 means the tokens that follow are raw SASL bytes without Kafka framing (Apache 4.1
 *   still serves it for old clients); v1 means SaslAuthenticate requests.
 * - A mechanism that is not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, then close. A
 *   SaslHandshake during an exchange: ILLEGAL_SASL_STATE, then close. A SaslAuthenticate after
 *   authentication without a re-authentication handshake: ILLEGAL_SASL_STATE "SaslAuthenticate request
 *   received after successful authentication" (KafkaApis' answer), the connection stays.
 * - A failed exchange: SASL_AUTHENTICATION_FAILED with the mechanism's message for the client, or Apache's
 *   generic one, which says nothing about whether the user exists.
 * - Re-authentication (KIP-368): with connections.max.reauth.ms > 0 a session lasts that long
 *   (session_lifetime_ms in SaslAuthenticate v1+). A request after it ends closes the connection, except a
 *   SaslHandshake, which starts a re-authentication: the same mechanism (another one fails the exchange,
 *   Apache's message), the same principal ("Cannot change principals during re-authentication ..."), at
 *   most once a second (a sooner one, or one without a session end, is answered ILLEGAL_SASL_STATE as
 *   Apache's KafkaApis answers a handshake it does not take as re-authentication). While a
 *   re-authentication runs, the previous session keeps serving other requests until it ends; Apache's
 *   clients send none meanwhile, and refusing them would only race with requests already in flight.
 */
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import type { SaslServerExchange } from "./scram.ts";

export const API_VERSIONS_KEY = 18;
export const SASL_HANDSHAKE_KEY = 17;
export const SASL_AUTHENTICATE_KEY = 36;

/** Apache's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS. */
export const MIN_REAUTH_INTERVAL_MS = 1000;

export type SaslPhase = "initial" | "versions-seen" | "authenticating" | "authenticated" | "failed";

export interface SaslSessionOptions {
  /** sasl.enabled.mechanisms, in the order the handshake answer lists them. */
  enabledMechanisms: readonly string[];
  /** connections.max.reauth.ms: 0 (or less) means sessions never end and re-authentication is off. */
  maxReauthMs: number;
  /** A new server exchange for an enabled mechanism. */
  newExchange(mechanism: string): SaslServerExchange;
}

/** A session that authenticated: what the connection's ConnectionSecurity takes over. */
export interface SaslAuthenticated {
  principal: string;
  mechanism: string;
  /** Undefined: the session does not end. */
  expiresAtMs: number | undefined;
  reauthentication: boolean;
}

/** A failed exchange, for the failure count and the log (never a secret). */
export interface SaslFailure {
  mechanism: string | undefined;
  reason: string;
  reauthentication: boolean;
}

export interface HandshakeOutcome {
  errorCode: number;
  mechanisms: string[];
  /** Close the connection once the answer is written. */
  close: boolean;
  failure?: SaslFailure;
}

export interface AuthenticateOutcome {
  /** Undefined: close at once without an answer (Apache's answer to SaslAuthenticate before a handshake). */
  response?: { errorCode: number; errorMessage: string | null; authBytes: Uint8Array; sessionLifetimeMs: number };
  close: boolean;
  authenticated?: SaslAuthenticated;
  failure?: SaslFailure;
}

export interface RawTokenOutcome {
  /** The raw token to send back, size-prefixed; undefined when nothing is sent (a failure closes). */
  token?: Uint8Array;
  close: boolean;
  authenticated?: SaslAuthenticated;
  failure?: SaslFailure;
}

interface Reauthentication {
  previousMechanism: string;
  previousPrincipal: string;
  /** Set when the handshake named another mechanism: the exchange fails with this message. */
  badMechanismMessage?: string;
}

const EMPTY = new Uint8Array(0);

export class SaslSession {
  private phaseNow: SaslPhase = "initial";
  private exchange: SaslServerExchange | undefined;
  private rawTokens = false;
  private reauth: Reauthentication | undefined;
  private lastReauthStartMs: number | undefined;
  private session: SaslAuthenticated | undefined;

  constructor(private readonly options: SaslSessionOptions) {}

  get phase(): SaslPhase {
    return this.phaseNow;
  }

  /** True after a SaslHandshake v0: the next frame is a raw SASL token, not a Kafka request. */
  get expectsRawToken(): boolean {
    return this.phaseNow === "authenticating" && this.rawTokens;
  }

  /** The authenticated session (kept while a re-authentication runs), or undefined. */
  get authenticated(): SaslAuthenticated | undefined {
    return this.session;
  }

  /**
   * Whether a request other than SaslHandshake and SaslAuthenticate (ApiVersions included) is served, or
   * closes the connection.
   */
  admit(apiKey: number, nowMs: number): "serve" | "close" {
    switch (this.phaseNow) {
      case "initial":
        if (apiKey !== API_VERSIONS_KEY) return this.closeUnexpected();
        this.phaseNow = "versions-seen";
        return "serve";
      case "versions-seen":
        return this.closeUnexpected();
      case "failed":
        return "close";
      case "authenticating":
        // A re-authentication: the previous session serves until it ends. A first exchange: nothing else.
        if (this.session === undefined) return this.closeUnexpected();
        return this.sessionLive(nowMs) ? "serve" : "close";
      case "authenticated":
        return this.sessionLive(nowMs) ? "serve" : "close";
    }
  }

  handshake(mechanism: string, version: number, nowMs: number): HandshakeOutcome {
    const enabled = [...this.options.enabledMechanisms];
    switch (this.phaseNow) {
      case "failed":
        return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [], close: true };
      case "authenticating":
        this.phaseNow = "failed";
        return {
          errorCode: ErrorCode.ILLEGAL_SASL_STATE,
          mechanisms: [],
          close: true,
          failure: { mechanism: this.exchange?.mechanism, reason: "Unexpected Kafka request of type SASL_HANDSHAKE during SASL authentication.", reauthentication: this.reauth !== undefined },
        };
      case "authenticated": {
        const session = this.session!;
        const tooSoon = this.lastReauthStartMs !== undefined && nowMs - this.lastReauthStartMs < MIN_REAUTH_INTERVAL_MS;
        if (session.expiresAtMs === undefined || tooSoon) return { errorCode: ErrorCode.ILLEGAL_SASL_STATE, mechanisms: [], close: false };
        this.lastReauthStartMs = nowMs;
        this.reauth = { previousMechanism: session.mechanism, previousPrincipal: session.principal };
        if (!enabled.includes(mechanism)) return this.unsupported(mechanism, enabled);
        if (mechanism !== session.mechanism) {
          this.reauth.badMechanismMessage = `SASL mechanism '${mechanism}' requested by client is not supported for re-authentication of mechanism '${session.mechanism}'`;
        }
        this.begin(mechanism, version);
        return { errorCode: ErrorCode.NONE, mechanisms: enabled, close: false };
      }
      case "initial":
      case "versions-seen":
        if (!enabled.includes(mechanism)) return this.unsupported(mechanism, enabled);
        this.begin(mechanism, version);
        return { errorCode: ErrorCode.NONE, mechanisms: enabled, close: false };
    }
  }

  authenticate(token: Uint8Array, nowMs: number): AuthenticateOutcome {
    switch (this.phaseNow) {
      case "initial":
      case "versions-seen":
      case "failed":
        this.phaseNow = "failed";
        return { close: true };
      case "authenticated":
        return {
          response: { errorCode: ErrorCode.ILLEGAL_SASL_STATE, errorMessage: "SaslAuthenticate request received after successful authentication", authBytes: EMPTY, sessionLifetimeMs: 0 },
          close: false,
        };
      case "authenticating": {
        if (this.rawTokens) {
          // Raw tokens were announced (SaslHandshake v0); a framed request is not one.
          this.phaseNow = "failed";
          return { close: true, failure: this.failureOf("a SaslAuthenticate request after a SaslHandshake v0") };
        }
        const step = this.step(token, nowMs);
        if (step.kind === "failed") {
          return {
            response: { errorCode: ErrorCode.SASL_AUTHENTICATION_FAILED, errorMessage: step.clientMessage, authBytes: EMPTY, sessionLifetimeMs: 0 },
            close: true,
            failure: step.failure,
          };
        }
        if (step.kind === "challenge") {
          // "" rather than null on success, as Apache's response data default sends it.
          return { response: { errorCode: ErrorCode.NONE, errorMessage: "", authBytes: step.token, sessionLifetimeMs: 0 }, close: false };
        }
        // Rounded: the clock is fractional, and (now + max) - now can come out a hair below max in floating
        // point, which the int64 field would truncate to max - 1 (Apache answers max exactly).
        const lifetimeMs = step.authenticated.expiresAtMs === undefined ? 0 : Math.round(step.authenticated.expiresAtMs - nowMs);
        return {
          response: { errorCode: ErrorCode.NONE, errorMessage: "", authBytes: step.token, sessionLifetimeMs: lifetimeMs },
          close: false,
          authenticated: step.authenticated,
        };
      }
    }
  }

  /** A raw token after SaslHandshake v0 (only when expectsRawToken). A failure closes without an answer, as in Apache. */
  rawToken(token: Uint8Array, nowMs: number): RawTokenOutcome {
    if (!this.expectsRawToken) {
      this.phaseNow = "failed";
      return { close: true };
    }
    const step = this.step(token, nowMs);
    if (step.kind === "failed") return { close: true, failure: step.failure };
    if (step.kind === "challenge") return { token: step.token, close: false };
    return { token: step.token, close: false, authenticated: step.authenticated };
  }

  private step(token: Uint8Array, nowMs: number):
    | { kind: "challenge"; token: Uint8Array }
    | { kind: "complete"; token: Uint8Array; authenticated: SaslAuthenticated }
    | { kind: "failed"; clientMessage: string; failure: SaslFailure } {
    const reauth = this.reauth;
    const exchange = this.exchange!;
    const failed = (reason: string, clientMessage?: string) => {
      this.phaseNow = "failed";
      this.exchange = undefined;
      const what = reauth === undefined ? "authentication" : "re-authentication";
      return {
        kind: "failed" as const,
        clientMessage: clientMessage ?? `Authentication failed during ${what} due to invalid credentials with SASL mechanism ${exchange.mechanism}`,
        failure: { mechanism: exchange.mechanism, reason, reauthentication: reauth !== undefined },
      };
    };
    if (reauth?.badMechanismMessage !== undefined) return failed(reauth.badMechanismMessage, reauth.badMechanismMessage);
    const step = exchange.evaluate(token);
    if (step.kind === "failed") return failed(step.reason, step.clientMessage);
    if (step.kind === "challenge") return step;
    const principal = `User:${step.username}`;
    if (reauth !== undefined && reauth.previousPrincipal !== principal) {
      const message = `Cannot change principals during re-authentication from ${dotted(reauth.previousPrincipal)}: ${dotted(principal)}`;
      return failed(message, message);
    }
    const maxReauthMs = this.options.maxReauthMs;
    const authenticated: SaslAuthenticated = {
      principal,
      mechanism: exchange.mechanism,
      expiresAtMs: maxReauthMs > 0 ? nowMs + maxReauthMs : undefined,
      reauthentication: reauth !== undefined,
    };
    this.session = authenticated;
    this.phaseNow = "authenticated";
    this.exchange = undefined;
    this.reauth = undefined;
    this.rawTokens = false;
    return { kind: "complete", token: step.token, authenticated };
  }

  private begin(mechanism: string, version: number): void {
    this.exchange = this.options.newExchange(mechanism);
    this.rawTokens = version === 0;
    this.phaseNow = "authenticating";
  }

  private unsupported(mechanism: string, enabled: string[]): HandshakeOutcome {
    const reauthentication = this.reauth !== undefined;
    this.phaseNow = "failed";
    return { errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms: enabled, close: true, failure: { mechanism, reason: `Unsupported SASL mechanism ${mechanism}`, reauthentication } };
  }

  private closeUnexpected(): "close" {
    this.phaseNow = "failed";
    return "close";
  }

  private sessionLive(nowMs: number): boolean {
    const expiresAtMs = this.session?.expiresAtMs;
    if (expiresAtMs === undefined || nowMs < expiresAtMs) return true;
    this.phaseNow = "failed";
    return false;
  }

  private failureOf(reason: string): SaslFailure {
    return { mechanism: this.exchange?.mechanism, reason, reauthentication: this.reauth !== undefined };
  }
}

/** "User:alice" as Apache's message prints a principal: "User.alice". */
function dotted(principal: string): string {
  const colon = principal.indexOf(":");
  return `${principal.slice(0, colon)}.${principal.slice(colon + 1)}`;
}
