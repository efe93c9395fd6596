/**
 * What Metadata and DescribeTopicPartitions say about one partition: its leader (-1 when nobody a client
 * can be sent to owns it), leader epoch, replicas and in-sync replicas. One function for both, so that
 * the two APIs name the same leaders in cluster mode (docs/architecture.md, "Describing partitions").
 */
import type { Ownership } from "../cluster/ownership.ts";

export interface PartitionMetadata {
  leaderId: number;
  leaderEpoch: number;
  /** The one replica, the leader; none without a leader. */
  replicaNodes: number[];
  isrNodes: number[];
}

export function partitionMetadata(ownership: Ownership, topic: string, partition: number): PartitionMetadata {
  const leaderId = ownership.partitionLeader(topic, partition);
  // The leader epoch: this broker's for a partition it leads (0 in single-broker mode), the owner key's
  // for one another broker leads (what that broker leads it at), -1 when not known: a client then asks the
  // leader with no epoch check.
  const standing = ownership.standing({ kind: "partition", topic, partition });
  return {
    leaderId,
    leaderEpoch: standing.state === "elsewhere" ? (leaderId < 0 ? -1 : (standing.epoch ?? -1)) : standing.epoch,
    replicaNodes: leaderId < 0 ? [] : [leaderId],
    isrNodes: leaderId < 0 ? [] : [leaderId],
  };
}
