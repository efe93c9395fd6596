/**
 * Fetch (key 1), versions 4-17.
 *
 * Reads stored batches (never re-encoded) from each partition's fetch offset up to the high watermark
 * (read_uncommitted) or the last stable offset (read_committed), within the partition's max bytes and the
 * response's max bytes; the first batch of the first partition with data is returned even when it is
 * larger ("first batch may exceed", v3+). A fetch offset below the log start or beyond the log end is
 * OFFSET_OUT_OF_RANGE. While fewer than min_bytes are available the request waits, up to max_wait_ms, and
 * is woken by appends (and by the fsyncs that move the high watermark).
 *
 * Fetch sessions (v7+): bunka never creates one, which the protocol allows: a request with session id 0
 * is answered in full with session id 0, and the client keeps sending full requests. A request naming a
 * session id is FETCH_SESSION_ID_NOT_FOUND; session id 0 with a positive epoch INVALID_FETCH_SESSION_EPOCH.
 * v13+ name topics by id (unknown id: UNKNOWN_TOPIC_ID).
 * read_committed (isolation level 1) reads up to the last stable offset and returns, with the records, the
 * aborted transactions that overlap them (marker at or after the fetch offset, first batch before the end
 * of the fetched data), sorted by first offset, from the partition's aborted-transaction index (a lookup
 * proportional to the overlapping entries); an empty list when no records are returned. The consumer
 * drops those transactions' batches itself; control batches are returned as stored, as Apache does.
 * read_uncommitted reads up to the high watermark and gets a null list.
 * The response is also kept within the room the connection's budget grants (the listener's bounds on
 * response bytes held, docs/architecture.md, "Request path"): each partition's read reserves its limit
 * first and gives back what it did not use, so pipelined fetches on one connection share the room instead
 * of each building max_bytes. The first batch may still go past the grant when nothing else on the
 * connection holds bytes, so a consumer always progresses; otherwise a fetch without room answers without
 * records.
 * Deliberately not done: follower fetching (replica id >= 0 is served like a consumer), diverging-epoch
 * detection (the leader epoch is always 0), preferred read replicas, quotas.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { EMPTY_BYTES, ZERO_UUID } from "../protocol/codec-support.ts";
import type { FetchRequest } from "../protocol/generated/fetch-request.ts";
import type { FetchResponseInit, FetchResponse_PartitionDataInit } from "../protocol/generated/fetch-response.ts";
import type { Partition } from "../storage/partition.ts";
import type { Handler, ResponseBudget } from "./handler.ts";
import type { BrokerServices } from "./services.ts";

const READ_COMMITTED = 1;

interface Wanted {
  topic: string | undefined;
  topicId: string;
  partition: number;
  fetchOffset: number;
  partitionMaxBytes: number;
}

const emptyPartition = (partitionIndex: number, errorCode: number): FetchResponse_PartitionDataInit => ({
  partitionIndex,
  errorCode,
  highWatermark: -1,
  lastStableOffset: -1,
  logStartOffset: -1,
  abortedTransactions: null,
  preferredReadReplica: -1,
  records: EMPTY_BYTES,
});

export function fetchHandler(services: BrokerServices): Handler<FetchRequest, FetchResponseInit> {
  const { topics, partitions, clock } = services;

  return {
    apiKey: 1,
    minVersion: 4,
    maxVersion: 17,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      if (version >= 7) {
        if (request.sessionId !== 0) return sessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, request.sessionId);
        if (request.sessionEpoch > 0) return sessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0);
      }
      const readCommitted = request.isolationLevel === READ_COMMITTED;
      const wanted: Wanted[] = request.topics.flatMap((t) => {
        const name = version >= 13 ? topics.getById(t.topicId)?.name : t.topic;
        return t.partitions.map((p) => ({
          topic: name,
          topicId: t.topicId,
          partition: p.partition,
          fetchOffset: p.fetchOffset,
          partitionMaxBytes: p.partitionMaxBytes,
        }));
      });
      // Resolve partitions once; a missing one is answered with its error and never waited for.
      const resolved = await Promise.all(wanted.map((w) => (w.topic === undefined ? undefined : partitions.get(w.topic, w.partition))));

      const budget = ctx.connection.responseBudget;
      const deadlineMs = clock.monotonicMs() + Math.max(0, request.maxWaitMs);
      let answers = await readAll(wanted, resolved, request.maxBytes, readCommitted, version, budget);
      // A fetch of no partition at all is answered at once, as Apache does: nothing could ever wake it.
      while (wanted.length > 0 && answers.bytes < request.minBytes && !answers.hasError && clock.monotonicMs() < deadlineMs) {
        const woke = await waitForData(resolved, answers.partitions, readCommitted, deadlineMs - clock.monotonicMs());
        if (!woke) break;
        // The answer read before is dropped, and so is its reservation.
        budget?.adjust(-answers.bytes);
        answers = await readAll(wanted, resolved, request.maxBytes, readCommitted, version, budget);
      }

      // Group per topic in request order, as the request named them.
      const byTopic: { topic: string; topicId: string; partitions: FetchResponse_PartitionDataInit[] }[] = [];
      for (const [i, w] of wanted.entries()) {
        const key = version >= 13 ? w.topicId : (w.topic ?? "");
        let group = byTopic[byTopic.length - 1];
        if (!group || (version >= 13 ? group.topicId : group.topic) !== key) {
          group = { topic: w.topic ?? "", topicId: w.topicId, partitions: [] };
          byTopic.push(group);
        }
        group.partitions.push(answers.partitions[i]!);
      }
      return {
        throttleTimeMs: 0,
        errorCode: ErrorCode.NONE,
        sessionId: 0,
        responses: byTopic.map((g) => ({ topic: g.topic, topicId: version >= 13 ? g.topicId : ZERO_UUID, partitions: g.partitions })),
      };
    },
    errorResponse(_request, errorCode) {
      return { errorCode, sessionId: 0, responses: [] };
    },
  };

  function sessionError(errorCode: number, sessionId: number): FetchResponseInit {
    return { throttleTimeMs: 0, errorCode, sessionId, responses: [] };
  }

  async function readAll(
    wanted: Wanted[],
    resolved: (Partition | undefined)[],
    maxBytes: number,
    readCommitted: boolean,
    version: number,
    budget: ResponseBudget | undefined,
  ): Promise<{ partitions: FetchResponse_PartitionDataInit[]; bytes: number; hasError: boolean }> {
    let remaining = maxBytes;
    let total = 0;
    let hasError = false;
    const out: FetchResponse_PartitionDataInit[] = [];
    for (const [i, w] of wanted.entries()) {
      const partition = resolved[i];
      // A partition closing meanwhile is one whose topic is being deleted (or re-created): it is answered
      // as gone, as Apache answers a delayed fetch whose partition disappeared.
      if (!partition || partition.closing) {
        const unknownId = version >= 13 && (w.topic === undefined || partition !== undefined);
        out.push(emptyPartition(w.partition, unknownId ? ErrorCode.UNKNOWN_TOPIC_ID : ErrorCode.UNKNOWN_TOPIC_OR_PARTITION));
        hasError = true;
        continue;
      }
      const log = partition.log;
      const highWatermark = partition.highWatermark;
      const lastStableOffset = partition.lastStableOffset;
      const base: FetchResponse_PartitionDataInit = {
        partitionIndex: w.partition,
        errorCode: ErrorCode.NONE,
        highWatermark,
        lastStableOffset,
        logStartOffset: log.logStartOffset,
        abortedTransactions: readCommitted ? [] : null,
        preferredReadReplica: -1,
        records: EMPTY_BYTES,
      };
      if (w.fetchOffset < log.logStartOffset || w.fetchOffset > log.logEndOffset) {
        out.push({ ...base, errorCode: ErrorCode.OFFSET_OUT_OF_RANGE });
        hasError = true;
        continue;
      }
      const upTo = readCommitted ? lastStableOffset : highWatermark;
      const limit = Math.min(w.partitionMaxBytes, remaining);
      if (w.fetchOffset >= upTo || (limit <= 0 && total > 0)) {
        out.push(base);
        continue;
      }
      const granted = budget === undefined ? Math.max(0, limit) : budget.reserve(Math.max(0, limit));
      const minOneBatch = total === 0 && (granted >= limit || budget!.mayExceed());
      if (granted <= 0 && !minOneBatch) {
        out.push(base);
        continue;
      }
      const read = await log.read(w.fetchOffset, granted, { minOneBatch, upToOffset: upTo });
      budget?.adjust((read.kind === "records" ? read.bytes.length : 0) - granted);
      if (read.kind === "offset-out-of-range") {
        out.push({ ...base, errorCode: ErrorCode.OFFSET_OUT_OF_RANGE, logStartOffset: read.logStartOffset });
        hasError = true;
        continue;
      }
      const abortedTransactions =
        readCommitted && read.bytes.length > 0
          ? partition.abortedTransactions(w.fetchOffset, read.nextOffset).map((t) => ({ producerId: t.producerId, firstOffset: t.firstOffset }))
          : base.abortedTransactions;
      out.push({ ...base, records: read.bytes, abortedTransactions });
      total += read.bytes.length;
      remaining -= read.bytes.length;
    }
    return { partitions: out, bytes: total, hasError };
  }
}

/**
 * Resolves true when what a fetch at this isolation level can read changes on any of the partitions: the
 * end it may read up to (the last stable offset for read_committed, the high watermark otherwise) or the
 * log start moves, the log fails, or the partition starts closing (its topic is deleted); false at the
 * deadline. The log calls back on every write and fsync; for a read_committed consumer most of those (a
 * transaction's records, before its marker) change nothing it can see, and reading every partition again
 * for each would only compete with the writes that will.
 *
 * `seen` are the answers just read: a partition whose readable end or log start moved, or whose log
 * failed, while the others were being read (after its own answer was made) resolves at once, since no
 * call-back will tell of it.
 */
function waitForData(
  partitions: (Partition | undefined)[],
  seen: FetchResponse_PartitionDataInit[],
  readCommitted: boolean,
  waitMs: number,
): Promise<boolean> {
  if (waitMs <= 0) return Promise.resolve(false);
  if (partitions.some((p) => p?.closing === true)) return Promise.resolve(true);
  const readableEnd = (p: Partition) => (readCommitted ? p.lastStableOffset : p.highWatermark);
  const moved = partitions.some((p, i) => {
    if (p === undefined) return false;
    const answer = seen[i]!;
    if (p.log.failed !== undefined || p.log.logStartOffset !== answer.logStartOffset) return true;
    return readableEnd(p) !== (readCommitted ? answer.lastStableOffset : answer.highWatermark);
  });
  if (moved) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const unsubscribes: (() => void)[] = [];
    const finish = (woke: boolean) => {
      clearTimeout(timer);
      for (const u of unsubscribes) u();
      resolve(woke);
    };
    const timer = setTimeout(() => finish(false), waitMs);
    for (const p of partitions) {
      if (!p) continue;
      const end = readableEnd(p);
      const start = p.log.logStartOffset;
      unsubscribes.push(
        p.log.onAppend(() => {
          if (p.log.failed !== undefined || readableEnd(p) !== end || p.log.logStartOffset !== start) finish(true);
        }),
      );
      unsubscribes.push(p.onClose(() => finish(true)));
    }
  });
}
