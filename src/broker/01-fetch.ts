/**
 * Fetch (key 1), versions 4-17.
 *
 * Reads stored batches (never re-encoded) from each partition's fetch offset up to the high watermark
 * (read_uncommitted) or the last stable offset (read_committed), within the partition's max bytes and the
 * response's max bytes; the first batch of the first partition with data is returned even when it is
 * larger ("first batch may exceed", v3+). A fetch offset below the log start or beyond the log end is
 * OFFSET_OUT_OF_RANGE. While fewer than min_bytes are available the request waits, up to max_wait_ms, and
 * is woken by appends (and by the fsyncs that move the high watermark). The batches are read into an
 * arena reused from one answer to the next (fetch-arena.ts); a partition's records of GATHER_BYTES_MIN or
 * more go from the arena to the socket as pieces of a gathered frame, the rest is encoded into one buffer
 * (docs/architecture.md, "The Fetch read path"). The arena returns to the pool once the frame is written.
 *
 * Fetch sessions (v7+, KIP-227): the rules live in domain/fetch-session.ts (docs/architecture.md, "Fetch
 * sessions"); this handler asks it what a request means, reads the partitions it lists (for an
 * incremental request: every partition of the session, in the session's order) and lets it decide the
 * answer's session id and which partitions an incremental answer carries. Session errors are answered
 * with session id 0 and no partitions.
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
 * Damaged data (docs/operations.md, "Damaged data"): the log checks every batch it returns (framing,
 * offsets, CRC-32C) and stops before a damaged one; what came before is served, and a read that starts
 * at the damaged batch answers KAFKA_STORAGE_ERROR with no records, as does a partition refused at open.
 * Each damage is recorded in the damage registry (logged once), which /ready and /metrics read.
 * Leader epochs (v9+, KIP-320; docs/architecture.md, "Leader epochs"): before each read, as Apache's
 * Partition.fetchRecords, the current-leader-epoch check (-1 asks for none: FENCED_LEADER_EPOCH when the
 * consumer's epoch is older, UNKNOWN_LEADER_EPOCH when newer) and NOT_LEADER_OR_FOLLOWER when this broker
 * does not lead the partition (partition-leadership.ts); such a partition is not opened. With
 * FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER, v12+ names the current leader and its epoch when known
 * (CurrentLeader, KIP-951) and v16+ its endpoint (NodeEndpoints).
 * Deliberately not done: follower fetching (replica id >= 0 is served like a consumer), diverging-epoch
 * detection (lastFetchedEpoch, which only followers send), preferred read replicas, quotas.
 * Authorization (broker/authorizer.ts): READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
 * partitions (a topic id nobody knows is UNKNOWN_TOPIC_ID first); a replica id >= 0 needs CLUSTER_ACTION.
 */
import { AclOperation, CLUSTER_NAME, ResourceType } from "../domain/security/acl.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import {
  type FetchContext,
  type FetchPartitionOutcome,
  type FetchPartitionRequest,
  type ForgottenPartition,
} from "../domain/fetch-session.ts";
import { EMPTY_BYTES, ZERO_UUID } from "../protocol/codec-support.ts";
import { GATHER_BYTES_MIN } from "../protocol/gathered-frame.ts";
import type { FetchRequest } from "../protocol/generated/fetch-request.ts";
import type { FetchResponseInit, FetchResponse_PartitionDataInit } from "../protocol/generated/fetch-response.ts";
import type { Partition } from "../storage/partition.ts";
import { FetchArena, FetchArenaPool } from "./fetch-arena.ts";
import type { Handler, ResponseBudget } from "./handler.ts";
import { partitionLeadership } from "./partition-leadership.ts";
import type { BrokerServices } from "./services.ts";

const READ_COMMITTED = 1;

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

/** The partitions a request lists, with their fetch parameters, in request order. */
function requestedPartitions(request: FetchRequest, usesTopicIds: boolean): FetchPartitionRequest[] {
  const out: FetchPartitionRequest[] = [];
  for (const t of request.topics) {
    const topic = usesTopicIds ? "" : t.topic;
    const topicId = usesTopicIds ? t.topicId : ZERO_UUID;
    for (const p of t.partitions) {
      out.push({
        topic,
        topicId,
        partition: p.partition,
        fetchOffset: p.fetchOffset,
        partitionMaxBytes: p.partitionMaxBytes,
        logStartOffset: p.logStartOffset,
        currentLeaderEpoch: p.currentLeaderEpoch,
        lastFetchedEpoch: p.lastFetchedEpoch,
      });
    }
  }
  return out;
}

function forgottenPartitions(request: FetchRequest, usesTopicIds: boolean): ForgottenPartition[] {
  const out: ForgottenPartition[] = [];
  for (const t of request.forgottenTopicsData) {
    for (const partition of t.partitions) {
      out.push({ topic: usesTopicIds ? "" : t.topic, topicId: usesTopicIds ? t.topicId : ZERO_UUID, partition });
    }
  }
  return out;
}

function outcomeOf(answer: FetchResponse_PartitionDataInit): FetchPartitionOutcome {
  return {
    errorCode: answer.errorCode ?? ErrorCode.NONE,
    highWatermark: answer.highWatermark ?? -1,
    lastStableOffset: answer.lastStableOffset ?? -1,
    logStartOffset: answer.logStartOffset ?? -1,
    recordsBytes: answer.records?.length ?? 0,
  };
}

/** What one partition's read may take beyond its max bytes: the walk from an index entry, a batch header. */
const READ_SLACK_BYTES = 4096 + 61;

/** An upper bound of the encoded answer, so that it is encoded into one buffer (Handler.responseSizeHint). */
function responseSizeOf(response: FetchResponseInit): number {
  let size = 64;
  for (const t of response.responses ?? []) {
    size += 32 + 3 * (t.topic?.length ?? 0);
    for (const p of t.partitions ?? []) {
      // Records long enough to be gathered are written from the arena, not copied into the frame.
      const recordsBytes = p.records?.length ?? 0;
      size += 64 + 16 * (p.abortedTransactions?.length ?? 0) + (recordsBytes >= GATHER_BYTES_MIN ? 0 : recordsBytes);
    }
  }
  return size;
}

export function fetchHandler(services: BrokerServices): Handler<FetchRequest, FetchResponseInit> {
  const { topics, partitions, clock, fetchSessions, ownership } = services;
  const arenas = new FetchArenaPool();
  /** The arena an answer's records are views of, until the answer is written (or encoded, if copied). */
  const arenaOf = new WeakMap<FetchResponseInit, FetchArena>();

  return {
    apiKey: 1,
    minVersion: 4,
    maxVersion: 17,
    async handle(request, ctx) {
      const version = ctx.apiVersion;
      const usesTopicIds = version >= 13;
      const requested = requestedPartitions(request, usesTopicIds);
      const replicaId = version >= 15 ? request.replicaState.replicaId : request.replicaId;
      const context: FetchContext =
        version >= 7
          ? fetchSessions.newContext(
              {
                sessionId: request.sessionId,
                epoch: request.sessionEpoch,
                usesTopicIds,
                privileged: replicaId >= 0,
                connectionId: ctx.connection.id,
                partitions: requested,
                forgotten: forgottenPartitions(request, usesTopicIds),
              },
              clock.monotonicMs(),
            )
          : { kind: "sessionless", partitions: requested };
      if (context.kind === "error") return sessionError(context.errorCode, 0);

      const readCommitted = request.isolationLevel === READ_COMMITTED;
      const wanted = context.partitions;
      // Names are looked up at every request, also for a session's partitions: a topic deleted and
      // re-created under the same name has a new id, and its old id must not reach the new partitions.
      const names = wanted.map((w) => (usesTopicIds ? topics.getById(w.topicId)?.name : w.topic));
      // Resolve partitions once; a missing one is answered with its error and never waited for, and so is
      // one refused at open for damaged data, and one the principal may not read (Apache's KafkaApis: a
      // replica's fetch needs CLUSTER_ACTION, a consumer's READ on each topic).
      const { authorizer } = services;
      const readable = !authorizer.enabled
        ? undefined
        : replicaId >= 0
          ? authorizer.allows(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
            ? undefined
            : new Set<string>()
          : authorizer.allowedNames(ctx, AclOperation.READ, ResourceType.TOPIC, names.filter((n) => n !== undefined));
      const refused = wanted.map((w, i): number | undefined => {
        if (names[i] === undefined) return undefined;
        if (readable !== undefined && !readable.has(names[i]!)) return ErrorCode.TOPIC_AUTHORIZATION_FAILED;
        return partitions.refusal(names[i]!, w.partition) !== undefined ? ErrorCode.KAFKA_STORAGE_ERROR : undefined;
      });
      // A partition this broker does not lead (or whose epoch the consumer disagrees with) is not opened:
      // readAll answers its error.
      const resolved = await Promise.all(
        wanted.map((w, i) =>
          names[i] === undefined || refused[i] !== undefined || leadershipError(names[i]!, w) !== undefined ? undefined : partitions.get(names[i]!, w.partition),
        ),
      );

      const budget = ctx.connection.responseBudget;
      const deadlineMs = clock.monotonicMs() + Math.max(0, request.maxWaitMs);
      let wantedBytes = 0;
      for (const w of wanted) wantedBytes += Math.max(0, w.partitionMaxBytes) + READ_SLACK_BYTES;
      const arena = wanted.length === 0 ? undefined : arenas.acquire(Math.min(wantedBytes, Math.max(0, request.maxBytes) + READ_SLACK_BYTES));
      let handedOver = false;
      try {
        let answers = await readAll(wanted, names, resolved, refused, request.maxBytes, readCommitted, usesTopicIds, budget, arena);
        // A fetch of no partition at all is answered at once, as Apache does: nothing could ever wake it.
        while (wanted.length > 0 && answers.bytes < request.minBytes && !answers.hasError && clock.monotonicMs() < deadlineMs) {
          const woke = await waitForData(resolved, answers.partitions, readCommitted, deadlineMs - clock.monotonicMs());
          if (!woke) break;
          // The answer read before is dropped, and so is its reservation.
          budget?.adjust(-answers.bytes);
          answers = await readAll(wanted, names, resolved, refused, request.maxBytes, readCommitted, usesTopicIds, budget, arena);
        }

        let sessionId = 0;
        let include: boolean[] | undefined;
        if (context.kind === "full") {
          sessionId = fetchSessions.completeFull(context, answers.partitions.map(outcomeOf), clock.monotonicMs());
        } else if (context.kind === "incremental") {
          const answer = fetchSessions.completeIncremental(context, answers.partitions.map(outcomeOf));
          if (answer.kind === "error") {
            // Nothing read goes out: give its reservation back.
            budget?.adjust(-answers.bytes);
            return sessionError(answer.errorCode, answer.sessionId);
          }
          sessionId = answer.sessionId;
          include = answer.include;
        }

        // Group per topic, in the order the partitions were read; consecutive partitions of one topic share
        // an entry.
        const byTopic: { topic: string; topicId: string; partitions: FetchResponse_PartitionDataInit[] }[] = [];
        for (const [i, w] of wanted.entries()) {
          if (include !== undefined && !include[i]) continue;
          const key = usesTopicIds ? w.topicId : w.topic;
          let group = byTopic[byTopic.length - 1];
          if (!group || (usesTopicIds ? group.topicId : group.topic) !== key) {
            group = { topic: usesTopicIds ? "" : w.topic, topicId: w.topicId, partitions: [] };
            byTopic.push(group);
          }
          group.partitions.push(answers.partitions[i]!);
        }
        const response: FetchResponseInit = {
          throttleTimeMs: 0,
          errorCode: ErrorCode.NONE,
          sessionId,
          responses: byTopic.map((g) => ({ topic: g.topic, topicId: usesTopicIds ? g.topicId : ZERO_UUID, partitions: g.partitions })),
        };
        if (version >= 16) response.nodeEndpoints = leaderEndpoints(byTopic.flatMap((g) => g.partitions));
        if (arena !== undefined) {
          arenaOf.set(response, arena);
          handedOver = true;
        }
        return response;
      } finally {
        // An answer that does not go out (a session error, a failure) frees its arena at once.
        if (arena !== undefined && !handedOver) arenas.release(arena);
      }
    },
    errorResponse(_request, errorCode) {
      return { errorCode, sessionId: 0, responses: [] };
    },
    responseSizeHint(response) {
      return responseSizeOf(response);
    },
    gatherBytesMin: GATHER_BYTES_MIN,
    responseEncoded(response) {
      const arena = arenaOf.get(response);
      if (arena === undefined) return;
      arenaOf.delete(response);
      arenas.release(arena);
    },
  };

  /** A partition that exists but may not be read here: its answer (partition-leadership.ts), else undefined. */
  function leadershipError(name: string, w: FetchPartitionRequest): FetchResponse_PartitionDataInit | undefined {
    const record = topics.get(name);
    if (record === undefined || w.partition < 0 || w.partition >= record.partitions) return undefined;
    const leadership = partitionLeadership(ownership, name, w.partition, w.currentLeaderEpoch);
    if (leadership.kind === "leader") return undefined;
    const answer = emptyPartition(w.partition, leadership.errorCode);
    // KIP-951: tell the client who leads, so that it need not ask Metadata first.
    const leaderId = ownership.partitionLeader(name, w.partition);
    if (leadership.errorCode === ErrorCode.FENCED_LEADER_EPOCH || leadership.errorCode === ErrorCode.NOT_LEADER_OR_FOLLOWER) {
      if (leaderId >= 0) answer.currentLeader = { leaderId, leaderEpoch: leaderId === ownership.selfId ? leadership.epoch : -1 };
    }
    return answer;
  }

  /** The endpoints of the leaders the answers name (Fetch v16+, KIP-951). */
  function leaderEndpoints(answers: FetchResponse_PartitionDataInit[]): FetchResponseInit["nodeEndpoints"] {
    const ids = new Set<number>();
    for (const a of answers) if (a.currentLeader?.leaderId !== undefined && a.currentLeader.leaderId >= 0) ids.add(a.currentLeader.leaderId);
    return ownership
      .brokers()
      .filter((b) => ids.has(b.brokerId))
      .map((b) => ({ nodeId: b.brokerId, host: b.host, port: b.port, rack: b.rack }));
  }

  function sessionError(errorCode: number, sessionId: number): FetchResponseInit {
    return { throttleTimeMs: 0, errorCode, sessionId, responses: [] };
  }

  async function readAll(
    wanted: FetchPartitionRequest[],
    names: (string | undefined)[],
    resolved: (Partition | undefined)[],
    /** The error of a partition not read: not authorized, or refused at open. */
    refused: (number | undefined)[],
    maxBytes: number,
    readCommitted: boolean,
    usesTopicIds: boolean,
    budget: ResponseBudget | undefined,
    arena: FetchArena | undefined,
  ): Promise<{ partitions: FetchResponse_PartitionDataInit[]; bytes: number; hasError: boolean }> {
    // A read again (after a wait) replaces what was read before: its memory is reused.
    arena?.reset();
    let remaining = maxBytes;
    let total = 0;
    let hasError = false;
    const out: FetchResponse_PartitionDataInit[] = [];
    for (const [i, w] of wanted.entries()) {
      if (refused[i] !== undefined) {
        out.push(emptyPartition(w.partition, refused[i]!));
        hasError = true;
        continue;
      }
      // Asked at every read: the leadership may change while a fetch waits.
      const notLed = names[i] === undefined ? undefined : leadershipError(names[i]!, w);
      if (notLed !== undefined) {
        out.push(notLed);
        hasError = true;
        continue;
      }
      const partition = resolved[i];
      // A partition closing meanwhile is one whose topic is being deleted (or re-created): it is answered
      // as gone, as Apache answers a delayed fetch whose partition disappeared.
      if (!partition || partition.closing) {
        const unknownId = usesTopicIds && (names[i] === undefined || partition !== undefined);
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
      const read = await log.read(w.fetchOffset, granted, { minOneBatch, upToOffset: upTo, ...(arena === undefined ? {} : { buffers: arena }) });
      budget?.adjust((read.kind === "records" ? read.bytes.length : 0) - granted);
      if (read.kind === "offset-out-of-range") {
        out.push({ ...base, errorCode: ErrorCode.OFFSET_OUT_OF_RANGE, logStartOffset: read.logStartOffset });
        hasError = true;
        continue;
      }
      const damage = read.damage;
      if (damage !== undefined) partitions.damage.record({ partition: `${partition.topic}-${partition.partition}`, ...damage, foundBy: "read" });
      if (read.kind === "damaged") {
        out.push({ ...base, errorCode: ErrorCode.KAFKA_STORAGE_ERROR });
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
