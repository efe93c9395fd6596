/**
 * TxnOffsetCommit (key 28), versions 0-4.
 *
 * Stages a transactional producer's consumer offsets (sendOffsetsToTransaction) in the group's offset slot,
 * durably, keyed by (group, producer id): invisible to OffsetFetch until EndTxn commits them (OffsetFetch
 * with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile), dropped if it aborts. Served by the group's
 * coordinator, like OffsetCommit. Checks, in Apache's order (KafkaApis, GroupCoordinatorService,
 * CoordinatorRuntime's transactional write, OffsetMetadataManager):
 * - per topic and partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION;
 * - an empty group id: INVALID_GROUP_ID; a group this broker does not coordinate: NOT_COORDINATOR;
 * - the transaction (Apache's verification of the group's offsets partition, KIP-890): an unknown
 *   transactional id or another producer id is INVALID_PRODUCER_ID_MAPPING, another epoch
 *   INVALID_PRODUCER_EPOCH (TxnOffsetCommit never answers PRODUCER_FENCED), a decision in progress
 *   CONCURRENT_TRANSACTIONS, and a group that was not added with AddOffsetsToTxn TRANSACTION_ABORTABLE
 *   (INVALID_TXN_STATE before v4); COORDINATOR_LOAD_IN_PROGRESS while the transaction coordinator loads
 *   (COORDINATOR_NOT_AVAILABLE before v2);
 * - the group (KIP-447): with a generation or a member id, the member must be known (UNKNOWN_MEMBER_ID,
 *   FENCED_INSTANCE_ID) and the generation current (ILLEGAL_GENERATION); a generation for an unknown group
 *   is ILLEGAL_GENERATION; unlike OffsetCommit, a rebalance in progress does not refuse the commit;
 * - per partition: metadata over offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE.
 * The staging runs under the transaction's lock, so it cannot land after EndTxn's offset hook ran. In
 * cluster mode, when the transaction's coordinator is another broker, the check is asked of it (a
 * verifyOnly AddPartitionsToTxn for the group's offsets partition, as Apache's group coordinators verify;
 * COORDINATOR_NOT_AVAILABLE when it cannot answer) and the offsets are staged here; a completion the
 * coordinator queued meanwhile is applied before the staging (broker/group-coordinator.ts).
 *
 * By version: v1 is v0 (throttling), v2 may answer COORDINATOR_LOAD_IN_PROGRESS, v3 adds the generation,
 * member id and group instance id (KIP-447) and is flexible, v4 answers TRANSACTION_ABORTABLE.
 *
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: WRITE on the transactional id (every
 * partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (GROUP_AUTHORIZATION_FAILED),
 * then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, before the topic is looked up).
 */
import { AclOperation, ResourceType } from "../domain/security/acl.ts";
import { API_KEY, rewriteForVersion } from "../domain/txn/coordinator.ts";
import { FatalError } from "../errors/errors.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { TxnOffsetCommitRequest } from "../protocol/generated/txn-offset-commit-request.ts";
import type { TxnOffsetCommitResponseInit } from "../protocol/generated/txn-offset-commit-response.ts";
import type { StagedOffsetInput } from "./group-coordinator.ts";
import type { Handler } from "./handler.ts";
import type { RemoteTxnVerifier } from "./remote-txn-verifier.ts";
import { slotOf } from "../cluster/ownership.ts";
import type { BrokerServices } from "./services.ts";

async function verifiedRemotely(
  remote: RemoteTxnVerifier,
  ref: { transactionalId: string; producerId: number; producerEpoch: number },
  groupId: string,
  stage: () => Promise<number[]>,
): Promise<{ errorCode: number; value?: number[] }> {
  const errorCode = await remote.verifyGroup(ref, groupId);
  if (errorCode !== ErrorCode.NONE) return { errorCode };
  return { errorCode, value: await stage() };
}

export function txnOffsetCommitHandler(services: BrokerServices): Handler<TxnOffsetCommitRequest, TxnOffsetCommitResponseInit> {
  const { topics, groups, txn } = services;

  const errorResponse = (request: TxnOffsetCommitRequest, errorCode: number): TxnOffsetCommitResponseInit => ({
    throttleTimeMs: 0,
    topics: request.topics.map((t) => ({ name: t.name, partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode })) })),
  });

  return {
    apiKey: 28,
    minVersion: 0,
    maxVersion: 4,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      const { authorizer } = services;
      if (!authorizer.allows(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactionalId)) return errorResponse(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
      if (!authorizer.allows(ctx, AclOperation.READ, ResourceType.GROUP, request.groupId)) return errorResponse(request, ErrorCode.GROUP_AUTHORIZATION_FAILED);
      const readable = authorizer.allowedNames(ctx, AclOperation.READ, ResourceType.TOPIC, request.topics.map((t) => t.name));
      // One code per requested partition, in request order; the ones that exist go on to the coordinators.
      const answer = request.topics.map((t) => t.partitions.map((): number => ErrorCode.NONE));
      const valid: StagedOffsetInput[] = [];
      const positions: [number, number][] = [];
      request.topics.forEach((t, ti) => {
        const topic = topics.get(t.name);
        t.partitions.forEach((p, pi) => {
          if (!readable.has(t.name)) {
            answer[ti]![pi] = ErrorCode.TOPIC_AUTHORIZATION_FAILED;
            return;
          }
          if (topic === undefined || p.partitionIndex < 0 || p.partitionIndex >= topic.partitions) {
            answer[ti]![pi] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
            return;
          }
          valid.push({
            topic: t.name,
            partition: p.partitionIndex,
            offset: p.committedOffset,
            leaderEpoch: version >= 2 ? p.committedLeaderEpoch : -1,
            metadata: p.committedMetadata,
          });
          positions.push([ti, pi]);
        });
      });
      const setAll = (code: number) => positions.forEach(([ti, pi]) => (answer[ti]![pi] = code));
      if (valid.length > 0) {
        if (request.groupId.length === 0) setAll(ErrorCode.INVALID_GROUP_ID);
        else if (!groups.isCoordinatorFor(request.groupId)) setAll(ErrorCode.NOT_COORDINATOR);
        else {
          const ref = { transactionalId: request.transactionalId, producerId: request.producerId, producerEpoch: request.producerEpoch };
          const stage = async (): Promise<number[]> => {
            const groupError = groups.validateTransactionalOffsetCommit({
              groupId: request.groupId,
              memberId: version >= 3 ? request.memberId : "",
              groupInstanceId: version >= 3 ? request.groupInstanceId : null,
              generationId: version >= 3 ? request.generationId : -1,
              apiVersion: version,
            });
            if (groupError !== ErrorCode.NONE) return valid.map(() => groupError);
            try {
              return await groups.stageTransactionalOffsets(request.groupId, request.producerId, valid);
            } catch (error) {
              if (error instanceof FatalError) throw error;
              // Apache answers a failed write to its coordinator log (KAFKA_STORAGE_ERROR) with NOT_COORDINATOR.
              return valid.map(() => ErrorCode.NOT_COORDINATOR);
            }
          };
          // Cluster mode: the transaction's coordinator may be another broker; it is asked, then the
          // offsets are staged here. Otherwise the local coordinator verifies under the transaction's lock.
          const remote = services.remoteTxnVerifier;
          const coordinatedElsewhere = remote !== undefined && request.transactionalId.length > 0 && services.ownership.slotOwner("txn", slotOf(request.transactionalId)) !== services.ownership.selfId;
          const verified = coordinatedElsewhere ? await verifiedRemotely(remote, ref, request.groupId, stage) : await txn.withVerifiedGroup(ref, request.groupId, stage);
          if (verified.errorCode !== ErrorCode.NONE) setAll(verified.errorCode);
          else verified.value!.forEach((code, i) => {
            const [ti, pi] = positions[i]!;
            answer[ti]![pi] = code;
          });
        }
      }
      return {
        throttleTimeMs: 0,
        topics: request.topics.map((t, ti) => ({
          name: t.name,
          partitions: t.partitions.map((p, pi) => ({
            partitionIndex: p.partitionIndex,
            errorCode: rewriteForVersion(API_KEY.TXN_OFFSET_COMMIT, version, answer[ti]![pi]!),
          })),
        })),
      };
    },
    errorResponse,
  };
}
