/**
 * Fetch sessions (KIP-227, Fetch v7+): the broker remembers what a fetcher asked for, so that its next
 * requests name only what changed and its answers carry only partitions with something new.
 *
 * Pure: no I/O, no clock reads (`nowMs` is an argument), no randomness of its own (session ids come from
 * the injected `random`). The Fetch handler asks `newContext` what a request means, reads the partitions
 * the context lists, and hands the answers back (`completeFull`, `completeIncremental`), which decides the
 * session id of the answer and which partitions it carries. docs/architecture.md, "Fetch sessions", has
 * the rules in prose; Apache Kafka's FetchManager, FetchSession and FetchSessionCache are the reference.
 *
 * The request's (session id, epoch):
 * - epoch 0 (INITIAL) or -1 (FINAL) is a full request: it lists every partition it wants. A session id
 *   other than 0 closes that session first. INITIAL then creates a new session when the cache has room
 *   (or can make some); FINAL never does. A full answer carries every partition it was asked for;
 * - any other epoch is incremental: the session must exist (else FETCH_SESSION_ID_NOT_FOUND), the epoch
 *   must be the one the session expects next (else INVALID_FETCH_SESSION_EPOCH), and the request must
 *   name topics the way the session does, by id from v13 or by name before (else
 *   FETCH_SESSION_TOPIC_ID_ERROR). The partitions it lists are added or their fetch parameters updated,
 *   the forgotten ones removed; the others keep what the session remembers (their fetch offset too: a
 *   fetcher lists a partition whenever its position moved). A session left without partitions is
 *   closed and the request answered in full without a session.
 * - Errors are answered with session id 0 and no partitions.
 *
 * An incremental answer carries a partition only when it has records, an error, or a high watermark,
 * last stable offset or log start offset other than the one last sent (a partition just added has none
 * yet, so it is always sent once). After an error the remembered high watermark is reset, so the
 * partition is sent again once the error is gone. A partition that returned records moves to the end of
 * the session's order, which is the order the next request reads partitions in: under a response size
 * limit, every partition gets its turn.
 *
 * The cache holds at most `slots` sessions. When it is full a new session may take the place of, in this
 * order of preference, (1) the least recently used session if it was unused for longer than `evictionMs`,
 * or else (2) the least valuable of the sessions created more than `evictionMs` ago, where a follower's
 * session (privileged) is worth more than a consumer's and a larger one more than a smaller one; a
 * follower's new session may also take a consumer session's place however young it is. A session no
 * other may replace is not created: the fetcher is answered without one and keeps sending full requests.
 * Whether a session may be replaced is decided when it is used, as Apache does.
 *
 * One connection holds at most `sessionsPerConnectionMax` sessions (Apache has no such bound): a client
 * that opens a session with every request and never uses one replaces its own oldest session instead of
 * filling the cache for everyone. Sessions are not tied to the connection otherwise; any connection may
 * use one, and a session outlives its connection until it is evicted.
 */
import { ErrorCode } from "../errors/generated/error-codes.ts";

export const INVALID_SESSION_ID = 0;
/** The epoch of a full request that asks for a new session. */
export const INITIAL_EPOCH = 0;
/** The epoch of a full request that wants no session. */
export const FINAL_EPOCH = -1;

const INT32_MAX = 0x7fffffff;

/** The epoch that follows `epoch` (after 2147483647 comes 1; FINAL stays FINAL), as the clients count. */
export function nextEpoch(epoch: number): number {
  if (epoch < 0) return FINAL_EPOCH;
  if (epoch === INT32_MAX) return 1;
  return epoch + 1;
}

export interface FetchSessionOptions {
  /** max.incremental.fetch.session.cache.slots */
  slots: number;
  /** min.incremental.fetch.session.eviction.ms: how long a session is safe from being replaced. */
  evictionMs: number;
  /** Sessions one connection may hold; its oldest is closed when it opens one more. */
  sessionsPerConnectionMax: number;
  /** Session ids this cache hands out are below this (tests use a small range to force collisions). */
  sessionIdLimit?: number;
  /** A number in [0, 1), for session ids. */
  random: () => number;
}

export const DEFAULT_FETCH_SESSION_SLOTS = 1000;
export const DEFAULT_FETCH_SESSION_EVICTION_MS = 120_000;
export const DEFAULT_FETCH_SESSIONS_PER_CONNECTION_MAX = 8;

/** One partition as a fetch request names it, with its fetch parameters. */
export interface FetchPartitionRequest {
  /** The topic's name; "" when the request names topics by id (v13+). */
  topic: string;
  /** The topic's id (v13+); the zero uuid before. */
  topicId: string;
  partition: number;
  fetchOffset: number;
  partitionMaxBytes: number;
  /** The fetcher's own log start offset (followers; -1 from consumers). */
  logStartOffset: number;
  currentLeaderEpoch: number;
  lastFetchedEpoch: number;
}

/** A partition a request asks the session to forget. */
export interface ForgottenPartition {
  topic: string;
  topicId: string;
  partition: number;
}

/** What the incremental rule looks at in one partition's answer. */
export interface FetchPartitionOutcome {
  errorCode: number;
  highWatermark: number;
  lastStableOffset: number;
  logStartOffset: number;
  /** Bytes of records returned. */
  recordsBytes: number;
}

export interface FetchSessionRequest {
  sessionId: number;
  epoch: number;
  /** The request names topics by id (Fetch v13+). */
  usesTopicIds: boolean;
  /** From a follower (replica id >= 0): its sessions are worth more. */
  privileged: boolean;
  connectionId: number;
  partitions: FetchPartitionRequest[];
  forgotten: ForgottenPartition[];
}

/** What a request means, and the partitions to read for it, in the order to read them. */
export type FetchContext =
  | { kind: "error"; errorCode: number }
  /** Answered in full, with session id 0. */
  | { kind: "sessionless"; partitions: FetchPartitionRequest[] }
  /** Answered in full; `completeFull` decides whether a session is created. */
  | { kind: "full"; partitions: FetchPartitionRequest[]; request: FetchSessionRequest }
  /** Answered through `completeIncremental`. */
  | { kind: "incremental"; partitions: FetchPartitionRequest[]; session: FetchSession; expectedEpoch: number };

export type IncrementalAnswer =
  | { kind: "error"; errorCode: number; sessionId: number }
  /** `include[i]` says whether the context's i-th partition goes into the answer. */
  | { kind: "ok"; sessionId: number; include: boolean[] };

export interface FetchSessionStats {
  /** Sessions in the cache. */
  sessions: number;
  /** Partitions remembered by all sessions together. */
  partitions: number;
  sessionsCreated: number;
  /** Sessions removed to make room for another (including a connection's own oldest). */
  evictions: number;
  fullRequests: number;
  incrementalRequests: number;
  sessionlessRequests: number;
  /** Requests answered with a session error (70, 71, 106). */
  sessionErrors: number;
}

/** One remembered partition: the last fetch parameters and what the last answer carrying it said. */
interface CachedPartition {
  request: FetchPartitionRequest;
  highWatermark: number;
  lastStableOffset: number;
  logStartOffset: number;
}

export class FetchSession {
  /** Partitions by key (topic id or name, and partition), in the order they are read. */
  readonly partitions = new Map<string, CachedPartition>();
  /** The epoch the next incremental request must carry. */
  epoch = nextEpoch(INITIAL_EPOCH);
  lastUsedMs: number;
  /** The partition count when the session was last used: what eviction compares. */
  cachedSize = 0;
  /** Whether a consumer's new session may replace this one (decided when it was last used). */
  evictableByAll = false;
  /** Whether a follower's new session may replace this one (decided when it was last used). */
  evictableByPrivileged = false;
  closed = false;

  constructor(
    readonly id: number,
    readonly privileged: boolean,
    readonly usesTopicIds: boolean,
    readonly connectionId: number,
    readonly creationMs: number,
  ) {
    this.lastUsedMs = creationMs;
  }
}

function partitionKey(usesTopicIds: boolean, topic: string, topicId: string, partition: number): string {
  return `${usesTopicIds ? topicId : topic}\u0000${partition}`;
}

export class FetchSessionCache {
  private readonly sessions = new Map<number, FetchSession>();
  private readonly byConnection = new Map<number, FetchSession[]>();
  private readonly options: Required<FetchSessionOptions>;
  private cachedPartitions = 0;
  private readonly counters = {
    sessionsCreated: 0,
    evictions: 0,
    fullRequests: 0,
    incrementalRequests: 0,
    sessionlessRequests: 0,
    sessionErrors: 0,
  };

  constructor(options: FetchSessionOptions) {
    const limit = options.sessionIdLimit ?? INT32_MAX;
    if (!Number.isInteger(options.slots) || options.slots < 0) throw new RangeError(`fetch session slots must be a non-negative integer, got ${options.slots}`);
    if (!Number.isInteger(limit) || limit < 2 || limit > INT32_MAX) throw new RangeError(`session id limit out of range: ${limit}`);
    if (options.slots >= limit) throw new RangeError("more fetch session slots than session ids");
    if (!(options.sessionsPerConnectionMax >= 1)) throw new RangeError("sessionsPerConnectionMax must be at least 1");
    this.options = { ...options, sessionIdLimit: limit };
  }

  /** What `request` means: an error, or the partitions to read and how the answer is to be made. */
  newContext(request: FetchSessionRequest, nowMs: number): FetchContext {
    const isFull = request.epoch === INITIAL_EPOCH || request.epoch === FINAL_EPOCH;
    if (isFull) {
      // Any session a full request names is closed, whatever follows.
      if (request.sessionId !== INVALID_SESSION_ID) {
        const named = this.sessions.get(request.sessionId);
        if (named !== undefined) this.remove(named);
      }
      if (request.epoch === FINAL_EPOCH || this.options.slots === 0) {
        this.counters.sessionlessRequests++;
        return { kind: "sessionless", partitions: request.partitions };
      }
      this.counters.fullRequests++;
      return { kind: "full", partitions: request.partitions, request };
    }

    const session = this.sessions.get(request.sessionId);
    if (session === undefined) return this.sessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND);
    if (session.epoch !== request.epoch) return this.sessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH);
    if (session.usesTopicIds !== request.usesTopicIds) return this.sessionError(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR);

    for (const p of request.partitions) {
      const key = partitionKey(session.usesTopicIds, p.topic, p.topicId, p.partition);
      const cached = session.partitions.get(key);
      if (cached === undefined) session.partitions.set(key, { request: p, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1 });
      else cached.request = p;
    }
    for (const f of request.forgotten) session.partitions.delete(partitionKey(session.usesTopicIds, f.topic, f.topicId, f.partition));

    if (session.partitions.size === 0) {
      this.remove(session);
      this.counters.sessionlessRequests++;
      return { kind: "sessionless", partitions: request.partitions };
    }
    this.touch(session, nowMs);
    session.epoch = nextEpoch(session.epoch);
    this.counters.incrementalRequests++;
    const partitions: FetchPartitionRequest[] = [];
    for (const cached of session.partitions.values()) partitions.push(cached.request);
    return { kind: "incremental", partitions, session, expectedEpoch: session.epoch };
  }

  /**
   * A full request was read: creates its session if the cache has room or can make some, remembering
   * what `outcomes` (one per context partition, in order) said. Returns the session id to answer with,
   * 0 when none was created.
   */
  completeFull(context: Extract<FetchContext, { kind: "full" }>, outcomes: readonly FetchPartitionOutcome[], nowMs: number): number {
    const { request } = context;
    const size = context.partitions.length;
    // The connection's own oldest session goes first when it holds its share already.
    const own = this.byConnection.get(request.connectionId);
    if (own !== undefined && own.length >= this.options.sessionsPerConnectionMax) {
      this.remove(own[0]!);
      this.counters.evictions++;
    }
    if (this.sessions.size >= this.options.slots && !this.tryEvict(request.privileged, size, nowMs)) return INVALID_SESSION_ID;

    const session = new FetchSession(this.newSessionId(), request.privileged, request.usesTopicIds, request.connectionId, nowMs);
    context.partitions.forEach((p, i) => {
      const outcome = outcomes[i]!;
      const failed = outcome.errorCode !== ErrorCode.NONE;
      session.partitions.set(partitionKey(session.usesTopicIds, p.topic, p.topicId, p.partition), {
        request: p,
        highWatermark: failed ? -1 : outcome.highWatermark,
        lastStableOffset: failed ? -1 : outcome.lastStableOffset,
        logStartOffset: failed ? -1 : outcome.logStartOffset,
      });
    });
    this.sessions.set(session.id, session);
    const list = this.byConnection.get(request.connectionId);
    if (list === undefined) this.byConnection.set(request.connectionId, [session]);
    else list.push(session);
    this.touch(session, nowMs);
    this.counters.sessionsCreated++;
    return session.id;
  }

  /**
   * An incremental request was read: applies the incremental rule to `outcomes` (one per context
   * partition, in order), remembers what is sent and moves the partitions that returned records to the
   * end of the session's order. A request whose session moved on meanwhile (a newer request of the
   * same session was answered first) is INVALID_FETCH_SESSION_EPOCH, as a duplicate.
   */
  completeIncremental(context: Extract<FetchContext, { kind: "incremental" }>, outcomes: readonly FetchPartitionOutcome[]): IncrementalAnswer {
    const { session } = context;
    if (session.epoch !== context.expectedEpoch) {
      this.counters.sessionErrors++;
      return { kind: "error", errorCode: ErrorCode.INVALID_FETCH_SESSION_EPOCH, sessionId: session.id };
    }
    const include: boolean[] = [];
    const rotate: [string, CachedPartition][] = [];
    context.partitions.forEach((p, i) => {
      const outcome = outcomes[i]!;
      const key = partitionKey(session.usesTopicIds, p.topic, p.topicId, p.partition);
      const cached = session.partitions.get(key);
      // Forgotten by a later request meanwhile: nothing to send for it.
      if (cached === undefined) {
        include.push(false);
        return;
      }
      let send = outcome.recordsBytes > 0;
      if (cached.highWatermark !== outcome.highWatermark) {
        send = true;
        cached.highWatermark = outcome.highWatermark;
      }
      if (cached.lastStableOffset !== outcome.lastStableOffset) {
        send = true;
        cached.lastStableOffset = outcome.lastStableOffset;
      }
      if (cached.logStartOffset !== outcome.logStartOffset) {
        send = true;
        cached.logStartOffset = outcome.logStartOffset;
      }
      if (outcome.errorCode !== ErrorCode.NONE) {
        send = true;
        cached.highWatermark = -1;
      }
      include.push(send);
      if (outcome.recordsBytes > 0) rotate.push([key, cached]);
    });
    for (const [key, cached] of rotate) {
      session.partitions.delete(key);
      session.partitions.set(key, cached);
    }
    return { kind: "ok", sessionId: session.id, include };
  }

  stats(): FetchSessionStats {
    return { sessions: this.sessions.size, partitions: this.cachedPartitions, ...this.counters };
  }

  /** The session with this id, for tests and introspection. */
  get(sessionId: number): FetchSession | undefined {
    return this.sessions.get(sessionId);
  }

  private sessionError(errorCode: number): FetchContext {
    this.counters.sessionErrors++;
    return { kind: "error", errorCode };
  }

  private newSessionId(): number {
    const limit = this.options.sessionIdLimit;
    // Ids are 1..limit-1; the cache never holds more than slots < limit sessions, so a free one exists.
    for (;;) {
      const id = 1 + Math.floor(this.options.random() * (limit - 1));
      if (id >= 1 && id < limit && !this.sessions.has(id)) return id;
    }
  }

  /** Records a use: when, how large, and whether a new session may now replace this one. */
  private touch(session: FetchSession, nowMs: number): void {
    session.lastUsedMs = nowMs;
    this.cachedPartitions += session.partitions.size - session.cachedSize;
    session.cachedSize = session.partitions.size;
    const old = nowMs - session.creationMs > this.options.evictionMs;
    session.evictableByAll = old;
    session.evictableByPrivileged = !session.privileged || old;
  }

  private remove(session: FetchSession): void {
    if (session.closed) return;
    session.closed = true;
    this.sessions.delete(session.id);
    this.cachedPartitions -= session.cachedSize;
    const list = this.byConnection.get(session.connectionId);
    if (list !== undefined) {
      const at = list.indexOf(session);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) this.byConnection.delete(session.connectionId);
    }
  }

  /**
   * Makes room for a new session of `size` partitions: the stalest session if it was unused for longer
   * than evictionMs, else the least valuable replaceable one if the new one is worth more. A linear
   * scan: it runs only when the cache is full and a session is being created.
   */
  private tryEvict(privileged: boolean, size: number, nowMs: number): boolean {
    let stalest: FetchSession | undefined;
    let cheapest: FetchSession | undefined;
    for (const s of this.sessions.values()) {
      if (stalest === undefined || s.lastUsedMs < stalest.lastUsedMs || (s.lastUsedMs === stalest.lastUsedMs && s.id < stalest.id)) stalest = s;
      const replaceable = privileged ? s.evictableByPrivileged : s.evictableByAll;
      if (replaceable && (cheapest === undefined || compareWorth(s, cheapest) < 0)) cheapest = s;
    }
    if (stalest === undefined) return false;
    if (nowMs - stalest.lastUsedMs > this.options.evictionMs) {
      this.remove(stalest);
      this.counters.evictions++;
      return true;
    }
    // The new session (id 0, below every real id) must be worth strictly more than the one it replaces.
    if (cheapest === undefined || compareWorth({ privileged, cachedSize: size, id: 0 }, cheapest) < 0) return false;
    this.remove(cheapest);
    this.counters.evictions++;
    return true;
  }
}

/** Orders sessions by worth: a consumer's below a follower's, then by size, then by id. */
function compareWorth(
  a: { privileged: boolean; cachedSize: number; id: number },
  b: { privileged: boolean; cachedSize: number; id: number },
): number {
  if (a.privileged !== b.privileged) return a.privileged ? 1 : -1;
  if (a.cachedSize !== b.cachedSize) return a.cachedSize - b.cachedSize;
  return a.id - b.id;
}
