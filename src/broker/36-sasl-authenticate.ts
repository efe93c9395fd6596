/**
 * SaslAuthenticate (key 36), versions 0-2.
 *
 * One token of the exchange the handshake chose (PLAIN: one round; SCRAM: two), answered with the
 * server's token. v1+ carries session_lifetime_ms once authenticated: connections.max.reauth.ms, or 0
 * when sessions do not end. A failure is SASL_AUTHENTICATION_FAILED with Apache's message, answered after
 * connection.failed.authentication.delay.ms, and closes the connection. Before a handshake the connection
 * closes without an answer; after authentication (no re-authentication begun) and on PLAINTEXT and SSL
 * listeners it is ILLEGAL_SASL_STATE. The rules: broker/sasl-authenticator.ts and
 * domain/security/sasl-session.ts.
 */
import type { SaslAuthenticateRequest } from "../protocol/generated/sasl-authenticate-request.ts";
import type { SaslAuthenticateResponseInit } from "../protocol/generated/sasl-authenticate-response.ts";
import type { Handler } from "./handler.ts";
import type { SaslAuthenticator } from "./sasl-authenticator.ts";

export function saslAuthenticateHandler(sasl: SaslAuthenticator): Handler<SaslAuthenticateRequest, SaslAuthenticateResponseInit> {
  return {
    apiKey: 36,
    minVersion: 0,
    maxVersion: 2,
    handle(request, ctx) {
      return sasl.authenticate(request.authBytes, ctx.connection);
    },
    errorResponse(_request, errorCode) {
      return { errorCode, errorMessage: null, authBytes: new Uint8Array(0), sessionLifetimeMs: 0 };
    },
  };
}
