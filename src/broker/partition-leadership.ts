/**
 * Whether this broker may answer for a partition as its leader, and at which leader epoch: the check
 * Fetch, ListOffsets and OffsetForLeaderEpoch make before they read (Apache's Partition.getLocalLog with
 * checkCurrentLeaderEpoch, KIP-320). The epoch is the ownership's fencing epoch (cluster/ownership.ts,
 * standing), 0 for every partition in single-broker mode (docs/architecture.md, "Leader epochs").
 */
import type { Ownership } from "../cluster/ownership.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";

/** Apache's RecordBatch.NO_PARTITION_LEADER_EPOCH: a request that asks for no epoch check. */
export const NO_LEADER_EPOCH = -1;

export type Leadership =
  | { kind: "leader"; epoch: number }
  /** `epoch`: this broker's epoch for the partition when it has one (loading, leaving), else -1. */
  | { kind: "refused"; errorCode: number; epoch: number };

/**
 * Apache's checkCurrentLeaderEpoch: NONE when the client asked for no check (-1) or names the epoch this
 * broker has; FENCED_LEADER_EPOCH when the client's is older (its metadata is stale: refresh it),
 * UNKNOWN_LEADER_EPOCH when newer (this broker has not caught up with the leadership change yet).
 */
export function checkCurrentLeaderEpoch(requested: number, local: number): number {
  if (requested === NO_LEADER_EPOCH) return ErrorCode.NONE;
  if (local > requested) return ErrorCode.FENCED_LEADER_EPOCH;
  if (local < requested) return ErrorCode.UNKNOWN_LEADER_EPOCH;
  return ErrorCode.NONE;
}

/**
 * The partition's leadership here for a request naming `currentLeaderEpoch`, in Apache's order: the epoch
 * check first, where this broker has an epoch for the partition, then whether it leads it
 * (NOT_LEADER_OR_FOLLOWER while it takes the partition over or hands it on, or when another broker owns it).
 * The caller has checked that the partition exists.
 */
export function partitionLeadership(ownership: Ownership, topic: string, partition: number, currentLeaderEpoch: number): Leadership {
  const standing = ownership.standing({ kind: "partition", topic, partition });
  if (standing.state === "elsewhere") return { kind: "refused", errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch: NO_LEADER_EPOCH };
  const epochError = checkCurrentLeaderEpoch(currentLeaderEpoch, standing.epoch);
  if (epochError !== ErrorCode.NONE) return { kind: "refused", errorCode: epochError, epoch: standing.epoch };
  if (standing.state !== "owned") return { kind: "refused", errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch: standing.epoch };
  return { kind: "leader", epoch: standing.epoch };
}
