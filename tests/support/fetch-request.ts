/**
 * The body of a sessionless Fetch (v4+) of one partition from `fetchOffset`, `maxBytes` for the request and
 * for the partition, read_uncommitted unless told: what tests send when they only want records back.
 */
export function singlePartitionFetch(topic: string, partition: number, fetchOffset: number, maxBytes: number, isolationLevel = 0) {
  return {
    replicaId: -1,
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes,
    isolationLevel,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [{ topic, partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset, lastFetchedEpoch: -1, logStartOffset: -1, partitionMaxBytes: maxBytes }] }],
    forgottenTopicsData: [],
    rackId: "",
  };
}
