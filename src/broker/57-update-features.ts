/**
 * UpdateFeatures (key 57), versions 0-2.
 *
 * Served so that `kafka-features upgrade/downgrade/disable` gets Apache's answer instead of "The node does
 * not support UPDATE_FEATURES": bunka's feature levels are fixed (domain/features.ts), so a level that
 * would change one is refused with INVALID_UPDATE_VERSION and the message Apache's controller gives
 * ("The update failed for all features since the following feature had an error: Invalid update version 2
 * for feature transaction.version. Local controller 0 does not support this feature."), the first refused
 * update failing the whole request; an update to the level a feature is at succeeds and changes nothing,
 * as with Apache. v0's AllowDowngrade is a safe downgrade. Per-feature results are answered only on
 * success and before v2 (Apache's rule).
 * Authorization (broker/authorizer.ts), as Apache's ControllerApis: ALTER on the cluster, else
 * CLUSTER_AUTHORIZATION_FAILED.
 */
import { updateRefusal, UpgradeType } from "../domain/features.ts";
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { UpdateFeaturesRequest } from "../protocol/generated/update-features-request.ts";
import type { UpdateFeaturesResponseInit } from "../protocol/generated/update-features-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export function updateFeaturesHandler(services: BrokerServices): Handler<UpdateFeaturesRequest, UpdateFeaturesResponseInit> {
  return {
    apiKey: 57,
    minVersion: 0,
    maxVersion: 2,
    handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return this.errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.apiVersion);
      }
      const controllerId = services.ownership.controllerId();
      for (const update of request.featureUpdates) {
        const upgradeType =
          ctx.apiVersion === 0 ? (update.allowDowngrade ? UpgradeType.SAFE_DOWNGRADE : UpgradeType.UPGRADE) : update.upgradeType;
        const refusal = updateRefusal({ feature: update.feature, maxVersionLevel: update.maxVersionLevel, upgradeType }, controllerId);
        if (refusal !== null) {
          return {
            throttleTimeMs: 0,
            errorCode: ErrorCode.INVALID_UPDATE_VERSION,
            errorMessage: `The update failed for all features since the following feature had an error: ${refusal}`,
            results: [],
          };
        }
      }
      // Every update names the level its feature is at: nothing changes, validateOnly or not.
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        results: ctx.apiVersion <= 1 ? request.featureUpdates.map((u) => ({ feature: u.feature, errorCode: ErrorCode.NONE, errorMessage: null })) : [],
      };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, errorMessage: null, results: [] };
    },
  };
}
