/**
 * Who is on the other end of a Kafka connection, as the listener, the SASL exchange and the authorizer
 * share it (docs/architecture.md, "Security"). One object per connection, created by the listener when the
 * connection is accepted and kept for its life: the listener sets what TLS established, SaslAuthenticate
 * sets the principal and the session's end, every handler reads the principal through its RequestContext.
 *
 * A connection without such an object (a test that calls dispatch directly) is PLAINTEXT and anonymous.
 */

/** Apache Kafka's security protocols (listener.security.protocol.map values). */
export type SecurityProtocol = "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL";

export const SECURITY_PROTOCOLS: readonly SecurityProtocol[] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/** The principal of a connection nobody authenticated (Apache's KafkaPrincipal.ANONYMOUS). */
export const ANONYMOUS_PRINCIPAL = "User:ANONYMOUS";

/** True for the protocols whose connections must complete SASL before any other request. */
export const usesSasl = (p: SecurityProtocol): boolean => p === "SASL_PLAINTEXT" || p === "SASL_SSL";

/** True for the protocols that run over TLS. */
export const usesTls = (p: SecurityProtocol): boolean => p === "SSL" || p === "SASL_SSL";

export interface ConnectionSecurity {
  /** The listener's name (PLAINTEXT, SSL, CLIENT, INTERNAL, ...), as in `listeners`. */
  readonly listenerName: string;
  readonly securityProtocol: SecurityProtocol;
  /**
   * The Kafka principal, "User:<name>": ANONYMOUS until SASL authenticates (SASL_*), or from the client
   * certificate's distinguished name on SSL with a client certificate (Apache's default principal builder).
   */
  principal: string;
  /** SASL_*: true once SaslAuthenticate succeeded (and until the session expires). Others: always true. */
  authenticated: boolean;
  /** SASL_*: the mechanism the session authenticated with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). */
  saslMechanism?: string;
  /**
   * SASL_*: when the session ends by the broker's wall clock (KIP-368, connections.max.reauth.ms); a request
   * after it, other than a re-authentication, closes the connection. Undefined: no end.
   */
  sessionExpiresAtMs?: number;
}

/** What a connection that carries no ConnectionSecurity is. */
export function plaintextAnonymous(listenerName = "PLAINTEXT"): ConnectionSecurity {
  return { listenerName, securityProtocol: "PLAINTEXT", principal: ANONYMOUS_PRINCIPAL, authenticated: true };
}
