/**
 * DescribeCluster (key 60), versions 0-1.
 *
 * The cluster id, the controller and every live broker. v1 names the endpoint type asked for: brokers (1)
 * are answered; controllers (2) get MISMATCHED_ENDPOINT_TYPE, because bunka has no separate controller
 * endpoint (Apache's broker answers the same); any other type UNSUPPORTED_ENDPOINT_TYPE.
 * Authorization (broker/authorizer.ts), as Apache's AuthHelper: the cluster's authorized operations are
 * the principal's, and 0 without DESCRIBE on the cluster; the answer itself needs no ACL.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeClusterRequest } from "../protocol/generated/describe-cluster-request.ts";
import type { DescribeClusterResponseInit } from "../protocol/generated/describe-cluster-response.ts";
import type { Handler } from "./handler.ts";
import { AUTHORIZED_OPERATIONS_OMITTED, type BrokerServices } from "./services.ts";

const BROKER_ENDPOINT = 1;
const CONTROLLER_ENDPOINT = 2;

export function describeClusterHandler(services: BrokerServices): Handler<DescribeClusterRequest, DescribeClusterResponseInit> {
  const { ownership } = services;
  return {
    apiKey: 60,
    minVersion: 0,
    maxVersion: 1,
    handle(request, ctx) {
      const endpointType = ctx.apiVersion >= 1 ? request.endpointType : BROKER_ENDPOINT;
      if (endpointType === CONTROLLER_ENDPOINT) {
        return {
          errorCode: ErrorCode.MISMATCHED_ENDPOINT_TYPE,
          errorMessage: "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
          endpointType,
        };
      }
      if (endpointType !== BROKER_ENDPOINT) {
        return { errorCode: ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, errorMessage: `Unsupported endpoint type ${endpointType}`, endpointType };
      }
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.NONE,
        errorMessage: null,
        endpointType,
        clusterId: services.clusterId,
        controllerId: ownership.controllerId(),
        // At their addresses on the listener this request came in on, as Metadata.
        brokers: ownership.brokers(ctx.connection.security?.listenerName).map((b) => ({ brokerId: b.brokerId, host: b.host, port: b.port, rack: b.rack })),
        clusterAuthorizedOperations: request.includeClusterAuthorizedOperations
          ? services.authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
            ? services.authorizer.authorizedOperations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            : 0
          : AUTHORIZED_OPERATIONS_OMITTED,
      };
    },
    errorResponse(_request, errorCode) {
      return { errorCode };
    },
  };
}
