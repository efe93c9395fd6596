/**
 * A load that asks a broker for many fsyncs at once: `rounds` rounds of one 1 KiB record to each partition
 * of a new topic, one connection per partition, every partition of a round at the same time, acks=-1.
 * Used by the e2e tests of the file-work threads and of fsync.mode.
 */
import { expect } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "./batch-builder.ts";
import { WireClient } from "./wire-client.ts";

export async function produceToEveryPartitionAtOnce(port: number, topic: string, partitions: number, rounds: number): Promise<void> {
  const client = await WireClient.connect(port);
  const clients: WireClient[] = [];
  try {
    const created = await client.request(19, 7, {
      topics: [{ name: topic, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 5000,
    });
    expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
    clients.push(...(await Promise.all(Array.from({ length: partitions }, () => WireClient.connect(port)))));
    for (let round = 0; round < rounds; round++) {
      const answers = await Promise.all(
        clients.map((c, partition) =>
          c.request(0, 9, {
            transactionalId: null,
            acks: -1,
            timeoutMs: 5000,
            topicData: [{ name: topic, partitionData: [{ index: partition, records: buildBatch({ records: [{ value: "x".repeat(1024) }] }) }] }],
          }),
        ),
      );
      for (const answer of answers) expect(answer.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
    }
    // Every record is there: each partition ends at offset `rounds`.
    const listed = await client.request(2, 7, {
      replicaId: -1,
      isolationLevel: 0,
      topics: [{ name: topic, partitions: Array.from({ length: partitions }, (_, index) => ({ partitionIndex: index, currentLeaderEpoch: -1, timestamp: -1 })) }],
    });
    for (const p of listed.topics[0].partitions) expect(Number(p.offset)).toBe(rounds);
  } finally {
    for (const c of clients) c.close();
    client.close();
  }
}
