/**
 * DescribeLogDirs (key 35), versions 0-4.
 *
 * One log dir: the data directory, by its absolute path, with the partitions this broker hosts (every
 * partition in single-broker mode, the ones it leads in cluster mode), each with its size (the bytes of
 * its segments' .log files, as Apache's UnifiedLog.size counts them: indexes, snapshots and state files
 * are left out), its offset lag (the high watermark minus the log end offset, never below 0: 0 for a
 * leader, which every hosted partition is) and isFuture false (bunka never moves a partition between
 * dirs). A null topic list asks for every partition; a list asks for the named partitions only, and a
 * partition not hosted here, or of no topic, is left out, as Apache does. v4 adds the file system's total
 * and usable bytes (statfs(2) of the data directory; -1 where the file system cannot tell, Apache's
 * default). A statfs failure answers the dir with KAFKA_STORAGE_ERROR and no partitions.
 * Authorization (broker/authorizer.ts), as Apache's KafkaApis: DESCRIBE on the cluster, else no dirs and,
 * from v3, CLUSTER_AUTHORIZATION_FAILED.
 * Not done: several log dirs (bunka has one data directory), a partition refused for damaged files is
 * left out rather than answered with its dir offline.
 */
import { resolve } from "node:path";
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { DescribeLogDirsRequest } from "../protocol/generated/describe-log-dirs-request.ts";
import type {
  DescribeLogDirsResponse_DescribeLogDirsPartitionInit,
  DescribeLogDirsResponse_DescribeLogDirsResultInit,
  DescribeLogDirsResponse_DescribeLogDirsTopicInit,
  DescribeLogDirsResponseInit,
} from "../protocol/generated/describe-log-dirs-response.ts";
import type { Partition } from "../storage/partition.ts";
import type { Handler } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

/** The size the file system could not tell (the schema's default). */
const UNKNOWN_BYTES = -1;

export function describeLogDirsHandler(services: BrokerServices): Handler<DescribeLogDirsRequest, DescribeLogDirsResponseInit> {
  const logDir = resolve(services.config.dataDir);

  /** The partition if this broker hosts it; a partition refused at open is not hosted. */
  const hosted = (topic: string, partition: number): Promise<Partition | undefined> =>
    services.partitions.get(topic, partition).catch(() => undefined);

  const describePartition = (p: Partition): DescribeLogDirsResponse_DescribeLogDirsPartitionInit => ({
    partitionIndex: p.partition,
    partitionSize: p.log.sizeBytes,
    offsetLag: Math.max(p.highWatermark - p.log.logEndOffset, 0),
    isFutureKey: false,
  });

  /** The wanted partitions by topic, sorted: every partition of every topic when `topics` is null. */
  const wanted = (request: DescribeLogDirsRequest): Map<string, number[]> => {
    const byTopic = new Map<string, number[]>();
    if (request.topics === null) {
      for (const topic of services.topics.list()) byTopic.set(topic.name, Array.from({ length: topic.partitions }, (_, i) => i));
    } else {
      for (const t of request.topics) {
        const partitions = byTopic.get(t.topic) ?? [];
        partitions.push(...t.partitions);
        byTopic.set(t.topic, partitions);
      }
    }
    for (const [name, partitions] of byTopic) byTopic.set(name, [...new Set(partitions)].sort((a, b) => a - b));
    return new Map([...byTopic].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  };

  return {
    apiKey: 35,
    minVersion: 0,
    maxVersion: 4,
    async handle(request, ctx) {
      if (!services.authorizer.allows(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)) {
        return this.errorResponse(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.apiVersion);
      }
      let space = { totalBytes: UNKNOWN_BYTES, usableBytes: UNKNOWN_BYTES };
      if (services.fs.diskSpace !== undefined) {
        try {
          space = await services.fs.diskSpace(logDir);
        } catch (error) {
          services.log.warn("cannot describe the log dir's file system", { logDir, error: String(error) });
          const result: DescribeLogDirsResponse_DescribeLogDirsResultInit = { errorCode: ErrorCode.KAFKA_STORAGE_ERROR, logDir, topics: [] };
          return { throttleTimeMs: 0, errorCode: ErrorCode.NONE, results: [result] };
        }
      }
      const topics: DescribeLogDirsResponse_DescribeLogDirsTopicInit[] = [];
      for (const [name, indexes] of wanted(request)) {
        const partitions: DescribeLogDirsResponse_DescribeLogDirsPartitionInit[] = [];
        for (const index of indexes) {
          const partition = await hosted(name, index);
          if (partition !== undefined) partitions.push(describePartition(partition));
        }
        if (partitions.length > 0) topics.push({ name, partitions });
      }
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.NONE,
        results: [{ errorCode: ErrorCode.NONE, logDir, topics, totalBytes: space.totalBytes, usableBytes: space.usableBytes }],
      };
    },
    errorResponse(_request, errorCode) {
      return { throttleTimeMs: 0, errorCode, results: [] };
    },
  };
}
