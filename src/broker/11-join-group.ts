/**
 * JoinGroup (key 11), versions 0-9.
 *
 * The first phase of a classic group rebalance, answered by the group coordinator (group-coordinator.ts,
 * domain/groups): a new member gets a member id and the group rebalances; the answer is parked until the
 * join phase completes (every member rejoined, the rebalance timeout passed, or, for a new group, the
 * group.initial.rebalance.delay.ms delay, extended while members keep joining). The leader's answer carries
 * every member's metadata for the selected protocol. Errors as Apache's GroupMetadataManager gives them:
 * INVALID_GROUP_ID (empty id), INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms, 6 s and
 * 30 min), UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
 * NOT_COORDINATOR for a group another broker coordinates.
 *
 * By version: v0 has no rebalance timeout (the session timeout is used, as Apache's JoinGroupRequest
 * does); v4+ requires a known member id: a first join without one is answered MEMBER_ID_REQUIRED with the
 * id to rejoin with (KIP-394); v5 adds group.instance.id (static membership, KIP-345); v6 is flexible; v7
 * returns the protocol type and makes the protocol name nullable (Apache sends "" before v7 where it has
 * none, null from v7); v8 adds the join reason (ignored); v9 adds SkipAssignment (a static leader that
 * rejoins a Stable group without changing the protocol keeps the current assignment).
 *
 * Authorization (broker/authorizer.ts): READ on the group, else GROUP_AUTHORIZATION_FAILED.
 * Deliberately not done: the KIP-848 consumer protocol (groups
 * here are all classic), and the check of group.instance.id characters (Apache 4 does not check either).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { JoinGroupRequest } from "../protocol/generated/join-group-request.ts";
import type { JoinGroupResponseInit } from "../protocol/generated/join-group-response.ts";
import type { JoinGroupOutcome } from "../domain/groups/group-coordinator-state.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

/** Apache's InetAddress.toString() of the client: "/" and the address. */
export function clientHostOf(remoteAddress: string): string {
  return `/${remoteAddress}`;
}

function toWire(outcome: JoinGroupOutcome, version: number): JoinGroupResponseInit {
  // Before v7 the protocol name cannot be null: Apache sends "" instead; from v7 an empty one is null.
  const protocolName = version < 7 ? (outcome.protocolName ?? "") : outcome.protocolName === "" ? null : outcome.protocolName;
  return {
    throttleTimeMs: 0,
    errorCode: outcome.errorCode,
    generationId: outcome.generationId,
    protocolType: outcome.protocolType,
    protocolName,
    leader: outcome.leader,
    skipAssignment: outcome.skipAssignment,
    memberId: outcome.memberId,
    members: outcome.members.map((m) => ({ memberId: m.memberId, groupInstanceId: m.groupInstanceId, metadata: m.metadata })),
  };
}

export function joinGroupHandler(services: BrokerServices): Handler<JoinGroupRequest, JoinGroupResponseInit> {
  return {
    apiKey: 11,
    minVersion: 0,
    maxVersion: 9,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      // Authorization (broker/authorizer.ts): READ on the group, as Apache's KafkaApis.
      if (!services.authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return this.errorResponse(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, ctx.apiVersion);
      const outcome = await services.groups.joinGroup({
        groupId: request.groupId,
        memberId: request.memberId,
        groupInstanceId: version >= 5 ? request.groupInstanceId : null,
        protocolType: request.protocolType,
        // Copies: the decoded bytes are views into the request frame, and members outlive it.
        protocols: request.protocols.map((p) => ({ name: p.name, metadata: p.metadata.slice() })),
        sessionTimeoutMs: request.sessionTimeoutMs,
        rebalanceTimeoutMs: version === 0 ? request.sessionTimeoutMs : request.rebalanceTimeoutMs,
        clientId: ctx.header.clientId ?? "",
        clientHost: clientHostOf(ctx.connection.remoteAddress),
        apiVersion: version,
      });
      return toWire(outcome, version);
    },
    errorResponse(request, errorCode, version) {
      return toWire(
        { errorCode, generationId: -1, protocolType: null, protocolName: null, leader: "", skipAssignment: false, memberId: request.memberId, members: [] },
        version,
      );
    },
  };
}
