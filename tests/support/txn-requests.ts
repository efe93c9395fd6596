/** Raw requests and marker checks the transaction interop tests share (Java, librdkafka, kafkajs). */
import { expect } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import type { DecodedBatch } from "./record-decoder.ts";
import { until } from "./wait.ts";
import type { WireClient } from "./wire-client.ts";

/** ListOffsets LATEST: the LSO (read_committed) or the high watermark. */
export async function latestOffset(c: WireClient, topic: string, readCommitted: boolean, partition = 0): Promise<number> {
  const res = await c.request(2, 7, {
    replicaId: -1,
    isolationLevel: readCommitted ? 1 : 0,
    topics: [{ name: topic, partitions: [{ partitionIndex: partition, currentLeaderEpoch: -1, timestamp: -1 }] }],
  });
  expect(res.topics[0].partitions[0].errorCode).toBe(ErrorCode.NONE);
  return Number(res.topics[0].partitions[0].offset);
}

/** DescribeTransactions v0 of one transactional id: its TransactionState. */
export async function describeTxn(c: WireClient, transactionalId: string): Promise<any> {
  const res = await c.request(65, 0, { transactionalIds: [transactionalId] });
  return res.transactionStates[0];
}

/**
 * describeTxn once the transaction is no longer PrepareCommit/PrepareAbort. EndTxn is answered once the
 * decision is durable and the markers follow (as in Apache Kafka), so a client's commit may return while
 * DescribeTransactions still shows the Prepare state for a moment.
 */
export async function describeSettledTxn(c: WireClient, transactionalId: string, timeoutMs = 10_000): Promise<any> {
  return await until(`${transactionalId} past its Prepare state`, timeoutMs, async () => {
    const state = await describeTxn(c, transactionalId);
    return state.transactionState === "PrepareCommit" || state.transactionState === "PrepareAbort" ? undefined : state;
  });
}

/** Whether a batch is a COMMIT (control key type 1) or ABORT (type 0) marker. */
export const isCommitMarker = (b: DecodedBatch) => b.header.isControl && b.records[0]!.key![3] === 1;
export const isAbortMarker = (b: DecodedBatch) => b.header.isControl && b.records[0]!.key![3] === 0;
/** The markers of a partition in order: "C" for COMMIT, "A" for ABORT. */
export const markerKinds = (batches: DecodedBatch[]) => batches.filter((b) => b.header.isControl).map((b) => (isCommitMarker(b) ? "C" : "A"));
