/**
 * The request between brokers that wakes a partition leader about markers queued for it
 * (docs/architecture.md, "Wake-ups"): once the coordinator's queue file is durable it sends the leader
 * WriteTxnMarkers (v1) naming the producer, its epoch, the result and the partitions, from its inter-broker
 * client (client id `bunka-broker-<id>`). The leader takes it as a wake-up, not as markers to write
 * (broker/27-write-txn-markers.ts): it applies the producer's queued files at once, under the producer's
 * lock, and answers when they are done. The files stay the truth, so a request that is late, repeated or
 * lost changes nothing but latency, and a late one can never end a later transaction: it writes nothing
 * itself. The answer saves both etcd round trips (the wake-up there, the "markers applied" one back).
 */
import type { QueuedMarkers } from "../storage/marker-queue.ts";
import type { Logger } from "../platform/logger.ts";
import type { PeerClients } from "./peer-client.ts";

export const WRITE_TXN_MARKERS_KEY = 27;
const WRITE_TXN_MARKERS_VERSION = 1;

/** The client id prefix of bunka's inter-broker client; a WriteTxnMarkers from it is a wake-up. */
export const PEER_CLIENT_ID_PREFIX = "bunka-broker-";

export const peerClientId = (brokerId: number): string => `${PEER_CLIENT_ID_PREFIX}${brokerId}`;

/** The WriteTxnMarkers body that stands for one queued file. */
export function wakeRequestFor(markers: QueuedMarkers): unknown {
  return {
    markers: [
      {
        producerId: markers.producerId,
        producerEpoch: markers.producerEpoch,
        transactionResult: markers.result === "commit",
        coordinatorEpoch: markers.coordinatorEpoch,
        topics: markers.partitions.map((t) => ({ name: t.topic, partitionIndexes: [...t.partitions] })),
      },
    ],
  };
}

/** The error codes of a WriteTxnMarkers answer, every partition's. */
function errorCodesOf(response: unknown): number[] {
  const markers = (response as { markers?: { topics?: { partitions?: { errorCode?: number }[] }[] }[] }).markers ?? [];
  return markers.flatMap((m) => (m.topics ?? []).flatMap((t) => (t.partitions ?? []).map((p) => p.errorCode ?? -1)));
}

/**
 * Resolves true once the leader answered NONE for every partition (it has applied what it found of the
 * producer's files), false when it could not be asked (no connection, a timeout) or refused (an error
 * code, e.g. CLUSTER_AUTHORIZATION_FAILED when ACLs do not let this broker's principal act on the
 * cluster): the caller falls back to the etcd wake-up. Never rejects.
 */
export function peerMarkerWake(peers: Pick<PeerClients, "request">, log: Logger): (brokerId: number, markers: QueuedMarkers) => Promise<boolean> {
  return async (brokerId, markers) => {
    try {
      const response = await peers.request(brokerId, WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION, wakeRequestFor(markers));
      const refused = errorCodesOf(response).filter((code) => code !== 0);
      if (refused.length === 0) return true;
      log.debug("a leader refused the wake-up request about queued markers; waking it through etcd", { brokerId, errorCode: refused[0] });
      return false;
    } catch (error) {
      log.debug("waking a leader about queued markers by request failed; waking it through etcd", { brokerId, error: String(error) });
      return false;
    }
  };
}
