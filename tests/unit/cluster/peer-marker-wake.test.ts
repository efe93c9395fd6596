/**
 * The wake-up request a coordinator sends a leader about markers it queued (cluster/peer-marker-wake.ts):
 * WriteTxnMarkers v1 naming the queued file's producer, epoch, result and partitions; true only when the
 * leader answered NONE for every partition, false (the caller then wakes it through etcd) on any error code,
 * a failed request or an answer of another shape.
 */
import { describe, expect, test } from "bun:test";
import { peerMarkerWake, wakeRequestFor } from "../../../src/cluster/peer-marker-wake.ts";
import { type PeerClients, PeerRequestError } from "../../../src/cluster/peer-client.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import type { QueuedMarkers } from "../../../src/storage/marker-queue.ts";

const queued: QueuedMarkers = {
  transactionalId: "tx",
  producerId: 4000,
  producerEpoch: 3,
  coordinatorEpoch: 2,
  result: "abort",
  partitions: [
    { topic: "orders", partitions: [0, 2] },
    { topic: "audit", partitions: [1] },
  ],
  decidedMs: 1_700_000_000_000,
};

/** Peers whose request is `fn` (PeerClients' generic answer type made plain). */
const peersAnswering = (fn: (brokerId: number, apiKey: number, apiVersion: number, body: unknown) => Promise<unknown>) => ({ request: fn }) as unknown as Pick<PeerClients, "request">;

const answer = (codes: number[]) => ({
  markers: [{ producerId: 4000, topics: [{ name: "orders", partitions: codes.map((errorCode, i) => ({ partitionIndex: i, errorCode })) }] }],
});

describe("peer marker wake-up", () => {
  test("the request is WriteTxnMarkers v1 for the queued file's producer, epoch, result, coordinator epoch and partitions", async () => {
    const sent: unknown[] = [];
    const wake = peerMarkerWake(peersAnswering(async (brokerId, apiKey, apiVersion, body) => (sent.push({ brokerId, apiKey, apiVersion, body }), answer([0, 0, 0]))), silentLogger);
    expect(await wake(3, queued)).toBe(true);
    expect(sent).toEqual([
      {
        brokerId: 3,
        apiKey: 27,
        apiVersion: 1,
        body: {
          markers: [
            {
              producerId: 4000,
              producerEpoch: 3,
              transactionResult: false,
              coordinatorEpoch: 2,
              topics: [
                { name: "orders", partitionIndexes: [0, 2] },
                { name: "audit", partitionIndexes: [1] },
              ],
            },
          ],
        },
      },
    ]);
    expect((wakeRequestFor({ ...queued, result: "commit" }) as { markers: { transactionResult: boolean }[] }).markers[0]!.transactionResult).toBe(true);
  });

  test("an error code for any partition, a failed request or an answer without codes is false: the caller wakes through etcd", async () => {
    const answering = (response: unknown) => peerMarkerWake(peersAnswering(async () => response), silentLogger);
    expect(await answering(answer([ErrorCode.NONE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED]))(3, queued)).toBe(false);
    expect(await answering(answer([ErrorCode.NOT_LEADER_OR_FOLLOWER]))(3, queued)).toBe(false);
    expect(await answering({ markers: [{ producerId: 4000, topics: [{ name: "orders", partitions: [{ partitionIndex: 0 }] }] }] })(3, queued)).toBe(false);
    const failing = peerMarkerWake(peersAnswering(async () => Promise.reject(new PeerRequestError(3, "timeout", "no answer"))), silentLogger);
    expect(await failing(3, queued)).toBe(false);
  });
});
