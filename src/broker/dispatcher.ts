/**
 * Turns one request frame into one response frame: header, version checks, decode, handler, encode.
 *
 * - A frame whose header does not parse, an unknown API key, or a version outside the schema is malformed
 *   input: DecodeError, and the listener closes the connection (as Apache does).
 * - ApiVersions in a version we do not know is answered in v0 with UNSUPPORTED_VERSION and our list, so the
 *   client can retry with a version we speak.
 * - A known API in a schema version that its handler does not serve is answered with UNSUPPORTED_VERSION in
 *   that version's shape, save the versions ApiVersions lists without serving them as Apache Kafka 4 does
 *   (Produce v0-v2, registry.ts): those close the connection, as Apache's do.
 * - A handler that throws anything but a FatalError answers UNKNOWN_SERVER_ERROR and the broker goes on.
 * - SASL_* connections pass the SASL gate first (broker/sasl-authenticator.ts): a frame after SaslHandshake
 *   v0 is a raw token, not a request; a request other than SaslHandshake and SaslAuthenticate before
 *   authentication, or after the session ended, closes the connection (CloseConnection), as does a frame
 *   past sasl.server.max.receive.size before authentication.
 */
import { DecodeError, FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Logger } from "../platform/logger.ts";
import { apiCodecsByKey } from "../protocol/generated/index.ts";
import { encodeApiVersionsResponse } from "../protocol/generated/api-versions-response.ts";
import { FrameBufferPool } from "../protocol/frame-pool.ts";
import { type GatheredFrame, isGatheredFrame, withAlsoAfterWrite } from "../protocol/gathered-frame.ts";
import { API_VERSIONS_KEY, encodeResponseFrame, parseRequestFrame } from "../protocol/header.ts";
import { CloseConnection, type ConnectionInfo, type Handler, type RequestContext } from "./handler.ts";
import type { HandlerRegistry } from "./registry.ts";

export interface RequestObserver {
  /** Called once per answered request, for metrics. */
  onRequest(apiKey: number, apiVersion: number, durationMs: number, errored: boolean): void;
}

/** What the dispatcher asks of SASL (SaslAuthenticator); absent, no connection is gated. */
export interface SaslGate {
  rawToken(frame: Uint8Array, connection: ConnectionInfo): Promise<Uint8Array> | undefined;
  admit(apiKey: number, connection: ConnectionInfo): void;
}

const SASL_HANDSHAKE_KEY = 17;
const SASL_AUTHENTICATE_KEY = 36;

export class Dispatcher {
  /** Warm memory for large answers (Fetch), handed back by the listener once written (frame-pool.ts). */
  private readonly frames = new FrameBufferPool();

  constructor(
    private readonly registry: HandlerRegistry,
    private readonly log: Logger,
    private readonly observer?: RequestObserver,
    private readonly sasl?: SaslGate,
  ) {}

  async dispatch(frame: Uint8Array, connection: ConnectionInfo): Promise<Uint8Array | GatheredFrame | null> {
    const startedMs = performance.now();
    const rawToken = this.sasl?.rawToken(frame, connection);
    if (rawToken !== undefined) return rawToken;
    const { header, body } = parseRequestFrame(frame);
    const apiKey = header.requestApiKey;
    const apiVersion = header.requestApiVersion;
    const codecs = apiCodecsByKey.get(apiKey);
    const handler = this.registry.get(apiKey);
    if (!codecs || !handler) {
      throw new DecodeError(`unsupported API key ${apiKey} (version ${apiVersion}) from ${connection.remoteAddress}`);
    }
    if (apiVersion < codecs.minVersion || apiVersion > codecs.maxVersion) {
      if (apiKey === API_VERSIONS_KEY) {
        return encodeResponseFrame(apiKey, 0, header.correlationId, (w) =>
          encodeApiVersionsResponse(w, 0, { errorCode: ErrorCode.UNSUPPORTED_VERSION, apiKeys: this.registry.apiVersions() }),
        );
      }
      throw new DecodeError(`unsupported version ${apiVersion} of API key ${apiKey} from ${connection.remoteAddress}`);
    }
    if (this.sasl !== undefined && apiKey !== SASL_HANDSHAKE_KEY && apiKey !== SASL_AUTHENTICATE_KEY) this.sasl.admit(apiKey, connection);
    if (this.registry.listedNotServed(apiKey, apiVersion)) {
      throw new DecodeError(`version ${apiVersion} of API key ${apiKey}, listed but not served, from ${connection.remoteAddress}`);
    }
    const request = codecs.decodeRequest(body, apiVersion);
    const ctx: RequestContext = { header, apiVersion, connection };
    let response: unknown;
    let errored = false;
    if (apiVersion < handler.minVersion || apiVersion > handler.maxVersion) {
      response = handler.errorResponse(request, ErrorCode.UNSUPPORTED_VERSION, apiVersion);
      errored = true;
    } else {
      try {
        response = await handler.handle(request, ctx);
      } catch (error) {
        if (error instanceof FatalError || error instanceof DecodeError || error instanceof CloseConnection) throw error;
        this.log.error("handler failed", { apiKey, apiVersion, error: String((error as Error)?.stack ?? error) });
        response = handler.errorResponse(request, ErrorCode.UNKNOWN_SERVER_ERROR, apiVersion);
        errored = true;
      }
    }
    this.observer?.onRequest(apiKey, apiVersion, performance.now() - startedMs, errored);
    if (response === null) return null;
    // Whether the frame refers to memory the response points into (gathered-frame.ts): the handler is
    // then told only once the frame is written.
    let gathered = false;
    try {
      const sizeHint = handler.responseSizeHint?.(response, apiVersion);
      const frame = encodeResponseFrame(
        apiKey,
        apiVersion,
        header.correlationId,
        (w, v) => codecs.encodeResponse(w, v, response),
        sizeHint,
        this.frames,
        handler.gatherBytesMin,
      );
      if (!isGatheredFrame(frame)) return frame;
      gathered = true;
      return handler.responseEncoded === undefined ? frame : withAlsoAfterWrite(frame, () => handler.responseEncoded!(response));
    } catch (error) {
      // A response the handler built but the version cannot carry is our bug, not the client's: answer
      // UNKNOWN_SERVER_ERROR like any other handler failure. If even that cannot be encoded, the connection closes.
      this.log.error("response could not be encoded", { apiKey, apiVersion, error: String((error as Error)?.stack ?? error) });
      const fallback = handler.errorResponse(request, ErrorCode.UNKNOWN_SERVER_ERROR, apiVersion);
      return encodeResponseFrame(apiKey, apiVersion, header.correlationId, (w, v) => codecs.encodeResponse(w, v, fallback));
    } finally {
      if (!gathered) handler.responseEncoded?.(response);
    }
  }
}

export type { Handler };
