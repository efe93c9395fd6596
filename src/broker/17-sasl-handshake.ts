/**
 * SaslHandshake (key 17), versions 0-1.
 *
 * The client names its SASL mechanism; the answer lists the enabled ones (sasl.enabled.mechanisms).
 * v1 announces SaslAuthenticate requests, v0 raw SASL tokens without Kafka framing (still served by
 * Apache Kafka 4.1 for old clients). An unknown mechanism is UNSUPPORTED_SASL_MECHANISM and closes the
 * connection; a handshake after authentication starts a re-authentication (KIP-368) when sessions end
 * (connections.max.reauth.ms), else it is ILLEGAL_SASL_STATE. On PLAINTEXT and SSL listeners:
 * ILLEGAL_SASL_STATE. The rules: broker/sasl-authenticator.ts and domain/security/sasl-session.ts.
 */
import type { SaslHandshakeRequest } from "../protocol/generated/sasl-handshake-request.ts";
import type { SaslHandshakeResponseInit } from "../protocol/generated/sasl-handshake-response.ts";
import type { Handler } from "./handler.ts";
import type { SaslAuthenticator } from "./sasl-authenticator.ts";

export function saslHandshakeHandler(sasl: SaslAuthenticator): Handler<SaslHandshakeRequest, SaslHandshakeResponseInit> {
  return {
    apiKey: 17,
    minVersion: 0,
    maxVersion: 1,
    handle(request, ctx) {
      return sasl.handshake(request.mechanism, ctx.apiVersion, ctx.connection);
    },
    errorResponse(_request, errorCode) {
      return { errorCode, mechanisms: [] };
    },
  };
}
