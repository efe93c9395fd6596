/**
 * ApiVersions (key 18), versions 0-4.
 *
 * Answers the API keys and version ranges of every registered handler (the registry derives it). v3+ carries
 * the client's software name and version, which must match Apache's pattern or the answer is INVALID_REQUEST.
 * A request in a version beyond 4 never reaches this handler: the dispatcher answers it in v0 with
 * UNSUPPORTED_VERSION and the list, as Apache does, so the client retries with a version we speak.
 * Deliberately not done: feature flags (supported/finalized features are empty; the `transaction.version`
 * feature of KIP-890 comes with EndTxn v5).
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ApiVersionsRequest } from "../protocol/generated/api-versions-request.ts";
import type { ApiVersionsResponseInit } from "../protocol/generated/api-versions-response.ts";
import type { Handler } from "./handler.ts";
import type { HandlerRegistry } from "./registry.ts";

const softwarePattern = /^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$/;

export function apiVersionsHandler(registry: HandlerRegistry): Handler<ApiVersionsRequest, ApiVersionsResponseInit> {
  return {
    apiKey: 18,
    minVersion: 0,
    maxVersion: 4,
    handle(request, ctx) {
      if (
        ctx.apiVersion >= 3 &&
        (!softwarePattern.test(request.clientSoftwareName) || !softwarePattern.test(request.clientSoftwareVersion))
      ) {
        return { errorCode: ErrorCode.INVALID_REQUEST, apiKeys: [] };
      }
      return { errorCode: ErrorCode.NONE, apiKeys: registry.apiVersions(), throttleTimeMs: 0 };
    },
    errorResponse(_request, errorCode) {
      return { errorCode, apiKeys: registry.apiVersions() };
    },
  };
}
