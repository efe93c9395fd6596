/**
 * ApiVersions (key 18), versions 0-4.
 *
 * Answers the API keys and version ranges of every registered handler (the registry derives it). v3+ carries
 * the client's software name and version, which must match Apache's pattern or the answer is INVALID_REQUEST.
 * A request in a version beyond 4 never reaches this handler: the dispatcher answers it in v0 with
 * UNSUPPORTED_VERSION and the list, as Apache does, so the client retries with a version we speak.
 * v3+ also carries the feature flags (KIP-584) of domain/features.ts: the features bunka supports, each at
 * level 0 (before v4 a feature whose minimum is 0 is left out, as Apache does), none finalized above 0, at a
 * fixed epoch. `transaction.version` stays 0 until EndTxn v5 is served: at 2 the Java producer would use it.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { ApiVersionsRequest } from "../protocol/generated/api-versions-request.ts";
import type { ApiVersionsResponseInit } from "../protocol/generated/api-versions-response.ts";
import { FINALIZED_FEATURES_EPOCH, finalizedFeatures, supportedFeaturesFor } from "../domain/features.ts";
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
      return {
        errorCode: ErrorCode.NONE,
        apiKeys: registry.apiVersions(),
        throttleTimeMs: 0,
        supportedFeatures: supportedFeaturesFor(ctx.apiVersion),
        finalizedFeaturesEpoch: FINALIZED_FEATURES_EPOCH,
        finalizedFeatures: finalizedFeatures(),
      };
    },
    errorResponse(_request, errorCode) {
      return { errorCode, apiKeys: registry.apiVersions() };
    },
  };
}
