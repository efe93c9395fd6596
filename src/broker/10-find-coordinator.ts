/**
 * FindCoordinator (key 10), versions 0-6.
 *
 * Names the broker that coordinates a key. Key type 0 (group): the owner of the group's slot
 * (cluster/ownership.ts, slot = fnv1a32(group id) % 50); in single-broker mode, this broker. Key type 1
 * (transaction): the owner of the transactional id's txn slot (the same hash, its own slot ownership).
 * Key type 2 (share group) is INVALID_REQUEST, as Apache
 * answers without a share coordinator; any other key type makes Apache refuse the whole request with
 * INVALID_REQUEST (its CoordinatorType.forId throws), and so do we.
 *
 * By version: v0 has only the key (a group) and no error message; v1 adds the key type and an error
 * message, which Apache sets to the error's message ("NONE" on success); v3 is flexible; v4 batches keys
 * (CoordinatorKeys in, Coordinators out, each with its own error and an empty message); v5 and v6 change
 * nothing here (TRANSACTION_ABORTABLE, share groups).
 *
 * Authorization (broker/authorizer.ts): DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the
 * transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key, before the coordinator is looked up.
 */
import { slotOf } from "../cluster/ownership.ts";
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { FindCoordinatorRequest } from "../protocol/generated/find-coordinator-request.ts";
import type { FindCoordinatorResponseInit } from "../protocol/generated/find-coordinator-response.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

export const CoordinatorKeyType = { GROUP: 0, TRANSACTION: 1, SHARE: 2 } as const;

/** Apache's default messages of the errors this handler gives (Errors.message()). */
const MESSAGES: Record<number, string> = {
  [ErrorCode.NONE]: "NONE",
  [ErrorCode.COORDINATOR_NOT_AVAILABLE]: "The coordinator is not available.",
  [ErrorCode.NOT_COORDINATOR]: "This is not the correct coordinator.",
  [ErrorCode.INVALID_REQUEST]:
    "This most likely occurs because of a request being malformed by the client library or the message was sent " +
    "to an incompatible broker. See the broker logs for more details.",
  [ErrorCode.UNSUPPORTED_VERSION]: "The version of API is not supported.",
  [ErrorCode.GROUP_AUTHORIZATION_FAILED]: "Group authorization failed.",
  [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]: "Transactional Id authorization failed.",
  [ErrorCode.UNKNOWN_SERVER_ERROR]: "The server experienced an unexpected error when processing the request.",
};

interface Found {
  errorCode: number;
  nodeId: number;
  host: string;
  port: number;
}

const NO_NODE = { nodeId: -1, host: "", port: -1 };

export function findCoordinatorHandler(services: BrokerServices): Handler<FindCoordinatorRequest, FindCoordinatorResponseInit> {
  const { ownership } = services;

  /** The coordinator at its address on the request's listener (Apache's rule, as Metadata). */
  const brokerEndpoint = (brokerId: number, listenerName: string | undefined): Found => {
    const endpoint = ownership.brokers(listenerName).find((b) => b.brokerId === brokerId);
    if (endpoint === undefined) return { errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE, ...NO_NODE };
    return { errorCode: ErrorCode.NONE, nodeId: endpoint.brokerId, host: endpoint.host, port: endpoint.port };
  };

  const lookup = (keyType: number, key: string, listenerName: string | undefined): Found => {
    switch (keyType) {
      case CoordinatorKeyType.GROUP:
        return brokerEndpoint(ownership.slotOwner("group", slotOf(key)), listenerName);
      case CoordinatorKeyType.TRANSACTION:
        return brokerEndpoint(ownership.slotOwner("txn", slotOf(key)), listenerName);
      default:
        return { errorCode: ErrorCode.INVALID_REQUEST, ...NO_NODE };
    }
  };

  const oldResponse = (found: Found): FindCoordinatorResponseInit => ({
    throttleTimeMs: 0,
    errorCode: found.errorCode,
    errorMessage: MESSAGES[found.errorCode] ?? null,
    nodeId: found.nodeId,
    host: found.host,
    port: found.port,
  });

  const errorResponse = (request: FindCoordinatorRequest, errorCode: number, version: number): FindCoordinatorResponseInit => {
    if (version < 4) return oldResponse({ errorCode, ...NO_NODE });
    return {
      throttleTimeMs: 0,
      coordinators: request.coordinatorKeys.map((key) => ({ key, errorCode, errorMessage: MESSAGES[errorCode] ?? null, ...NO_NODE })),
    };
  };

  return {
    apiKey: 10,
    minVersion: 0,
    maxVersion: 6,
    handle(request, ctx) {
      const version = ctx.apiVersion;
      const keyType = version >= 1 ? request.keyType : CoordinatorKeyType.GROUP;
      const listenerName = ctx.connection.security?.listenerName;
      const known = keyType === CoordinatorKeyType.GROUP || keyType === CoordinatorKeyType.TRANSACTION || keyType === CoordinatorKeyType.SHARE;
      if (!known) return errorResponse(request, ErrorCode.INVALID_REQUEST, version);
      // Authorization, before the coordinator is looked up (Apache's getCoordinator): DESCRIBE on the group
      // or the transactional id.
      const refusedKey = (key: string): Found | undefined => {
        const { authorizer } = services;
        if (keyType === CoordinatorKeyType.GROUP && !authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key)) {
          return { errorCode: ErrorCode.GROUP_AUTHORIZATION_FAILED, ...NO_NODE };
        }
        if (keyType === CoordinatorKeyType.TRANSACTION && !authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)) {
          return { errorCode: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ...NO_NODE };
        }
        return undefined;
      };
      if (version < 4) {
        const found = refusedKey(request.key) ?? lookup(keyType, request.key, listenerName);
        // Apache answers an error through the request's error response: no node, the error's message.
        return found.errorCode === ErrorCode.NONE ? oldResponse(found) : errorResponse(request, found.errorCode, version);
      }
      return {
        throttleTimeMs: 0,
        coordinators: request.coordinatorKeys.map((key) => {
          const found = refusedKey(key) ?? lookup(keyType, key, listenerName);
          return { key, nodeId: found.nodeId, host: found.host, port: found.port, errorCode: found.errorCode, errorMessage: "" };
        }),
      };
    },
    errorResponse,
  };
}
