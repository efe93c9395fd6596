/**
 * The read-only query ports the HTTP side-port is built on (docs/architecture.md, "HTTP side-port"). The Hono
 * app (app.ts) knows nothing but these interfaces, so it is tested with `app.request()` against plain objects,
 * and the broker side (broker-ports.ts) is the only place that reads live broker state.
 *
 * Views are plain data: numbers, strings, arrays, objects, null. They are encoded as JSON or MessagePack
 * as they are, so they never carry bigint, Map, class instances or undefined fields.
 *
 * Views here are the http layer's own; live-samples.ts defines the live feed's sample shape.
 *
 * The transaction ports are optional: a build (or a test double) without a transaction coordinator leaves
 * them out, and their endpoints answer 501 with a JSON error that says so, rather than an empty list that
 * would look like "nothing is wrong". The live broker (broker-ports.ts) always provides them.
 */

import type { HangingWarning } from "../broker/hanging-transactions.ts";
import type { LiveSample } from "./live-samples.ts";

/**
 * Why the broker is not ready to take traffic; absent when it is. Ready but `degraded`: it serves, but not
 * everything (partitions with damaged data, which answer KAFKA_STORAGE_ERROR), and says which.
 */
export type Readiness = { ready: true; degraded?: string } | { ready: false; reason: string };

export interface BrokerEndpointView {
  brokerId: number;
  host: string;
  port: number;
  rack: string | null;
}

/** Which parts of Kafka's surface this build implements, so that tools can tell "none" from "unsupported". */
export interface FeatureView {
  idempotentProducer: boolean;
  transactions: boolean;
  consumerGroups: boolean;
}

export interface HostPortView {
  host: string;
  port: number;
}

/** A live broker as cluster mode's directory in etcd has it (single mode: this broker alone). */
export interface ClusterMemberView {
  brokerId: number;
  /** Its advertised Kafka listener. */
  kafka: HostPortView;
  /** Its HTTP side-port, null when unknown. */
  http: HostPortView | null;
  rack: string | null;
  /** The broker answering. */
  self: boolean;
}

/** This broker's etcd lease (cluster mode). */
export interface LeaseView {
  /** etcd's lease id in decimal (a 63-bit number, too large for a JSON number); null before the first grant. */
  id: string | null;
  ttlMs: number;
  /** How long the lease stays valid by this broker's monotonic clock, from the moment of the answer; 0 when lapsed. */
  validForMs: number;
  /** "lapsed": no keep-alive confirmed in time (etcd unreachable) or etcd dropped the lease; renewal goes on. */
  state: "valid" | "lapsed";
  /** Times the lease lapsed since the broker started. */
  lapses: number;
  /** Why the last keep-alive or grant failed, while failures go on; null once one succeeds. */
  lastError: string | null;
}

/** The background scrubber that verifies every stored batch (docs/operations.md, "Damaged data"). */
export interface ScrubberView {
  /** log.scrubber.bytes.per.second; 0: off. */
  bytesPerSecond: number;
  passesCompleted: number;
  /** When the last full pass ended; null before the first. */
  lastFullPassEndMs: number | null;
  /** How long ago that was, at the moment of the answer; null before the first. */
  lastFullPassAgeMs: number | null;
  lastFullPassDurationMs: number;
  batchesVerified: number;
  /** Partitions with damaged data known (found at start, by a read or by the scrubber). */
  damagedPartitions: number;
  /** State files the scrubber found no longer holding what this broker wrote, not rewritten. */
  damagedStateFiles: number;
  /** Damaged state files rewritten from memory since start. */
  repairedStateFiles: number;
}

export interface ClusterView {
  clusterId: string;
  /** The broker answering. */
  brokerId: number;
  /** What Metadata and DescribeCluster name: the lowest live broker id. */
  controllerId: number;
  /** "single": no etcd, one broker; "cluster": membership in etcd (--etcd). */
  mode: "single" | "cluster";
  version: string;
  /** What Metadata and DescribeCluster answer. */
  brokers: BrokerEndpointView[];
  /** The etcd endpoints (cluster mode), null in single mode. */
  etcd: { endpoints: string[] } | null;
  /** This broker's lease (cluster mode), null in single mode. */
  lease: LeaseView | null;
  /** The live brokers, lowest id first. */
  members: ClusterMemberView[];
  startedAtMs: number;
  uptimeMs: number;
  /** Open Kafka connections on this broker. */
  connections: number;
  topicCount: number;
  /** Partitions of all topics (whether opened yet or not). */
  partitionCount: number;
  features: FeatureView;
  /** Cluster mode, once this broker runs its ownership manager; null otherwise. */
  ownership: OwnershipView | null;
  security: SecurityView;
}

/**
 * How this broker lets clients in: its listeners, SASL, the authorizer and the side-port's token rule,
 * with the principals that matter (super users) and never a secret (no password, key, salt or token).
 */
export interface SecurityView {
  /** The Kafka listeners with their security protocols, and the SASL mechanisms of the SASL_* ones. */
  listeners: { name: string; securityProtocol: string; saslMechanisms: string[] | null }[];
  authorizer: { enabled: boolean; acls: number; superUsers: string[]; allowEveryoneIfNoAclFound: boolean };
  /** Users with SCRAM credentials (their names only, sorted). */
  scramUsers: string[];
  /** http.reads.need.token: the side-port's reads need the admin token. */
  sidePortReadsNeedToken: boolean;
}

/** Who owns what in cluster mode, as this broker sees the owner keys in etcd. */
export interface OwnershipView {
  /** Per live or owning broker, lowest id first: how many partitions and coordinator slots it owns. */
  shares: { brokerId: number; partitions: number; txnSlots: number; groupSlots: number }[];
  /** Resources nobody owns right now (their owner's lease has not expired yet, or a claim is due). */
  unowned: { partitions: number; txnSlots: number; groupSlots: number };
  /** Every resource this broker holds, with its fencing epoch; `loading` / `leaving` are moves in progress. */
  held: { resource: string; state: "loading" | "owned" | "leaving"; epoch: number }[];
  /** Every owner key: `partition/<topic>-<n>`, `txn/<slot>` or `group/<slot>`, its owner and epoch. */
  owners: { resource: string; brokerId: number; epoch: number }[];
}

export interface TopicSummaryView {
  name: string;
  topicId: string;
  partitions: number;
  createdMs: number;
  /** Only the configs set on the topic; broker defaults are not repeated here. */
  configs: Record<string, string>;
  /** Bytes on disk over the partitions that are open. */
  sizeBytes: number;
}

export interface PartitionView {
  partition: number;
  /** Broker id of the leader, or -1 when none is known. */
  leader: number;
  /**
   * False for a partition this broker has not opened yet (no request touched it since the topic was
   * created or grew). Reading its state would open its files, which a read-only query must not do, so its
   * offsets are null until something opens it.
   */
  open: boolean;
  logStartOffset: number | null;
  logEndOffset: number | null;
  highWatermark: number | null;
  lastStableOffset: number | null;
  segmentCount: number | null;
  segmentBaseOffsets: number[] | null;
  sizeBytes: number | null;
  /** Producer ids with a dedupe window in this partition. */
  producerCount: number | null;
  /** Transactions open here (a transactional batch appended, no marker yet). */
  openTransactionCount: number | null;
  /** highWatermark - lastStableOffset: what read_committed consumers cannot read yet. */
  lsoLag: number | null;
  /** The fatal error that stopped this partition's log, or null. */
  failure: string | null;
  /** The log cleaner's view, for a partition of a cleanup.policy=compact topic (null otherwise). */
  cleaner: PartitionCleanerView | null;
}

export interface PartitionCleanerView {
  /** Offsets below this are clean (-1 before the first pass). */
  cleanedUpToOffset: number;
  /** Dirty bytes / (clean + dirty bytes) of the cleanable part of the log, at the cleaner's last look. */
  dirtyRatio: number;
  dirtyBytes: number;
  passes: number;
  bytesRead: number;
  bytesReclaimed: number;
  recordsRemoved: number;
  /** When the last pass ended (epoch ms), null before the first one. */
  lastPassMs: number | null;
  lastPassDurationMs: number | null;
  /** Why the last pass failed, null when it did not. */
  lastError: string | null;
}

export interface TopicDetailView extends TopicSummaryView {
  partitionDetails: PartitionView[];
}

export interface ProducerBatchView {
  firstSeq: number;
  lastSeq: number;
  firstOffset: number;
  lastOffset: number;
  timestampMs: number;
}

export interface ProducerView {
  producerId: number;
  epoch: number;
  /** Oldest first; at most five (the dedupe window). */
  batches: ProducerBatchView[];
  lastTimestampMs: number;
  /** First offset of the producer's open transaction in this partition, or null. */
  currentTxnFirstOffset: number | null;
  /** Coordinator epoch of the last transaction marker, or null before any. */
  coordinatorEpoch: number | null;
}

export interface ProducersQuery {
  /** At most this many producers, lowest producer id first. */
  limit: number;
  /** Only this producer id. */
  producerId?: number;
}

export interface ProducersView {
  topic: string;
  partition: number;
  open: boolean;
  /** Producer ids with state in the partition, whatever the query selected. */
  total: number;
  truncated: boolean;
  producers: ProducerView[];
}

export type ProducersLookup =
  | { kind: "ok"; view: ProducersView }
  | { kind: "unknown-topic" }
  | { kind: "unknown-partition"; partitions: number };

// ---- transactions, markers, groups ------------------------------------------------------------

/**
 * Kafka's transaction state names (TransactionState.java), the states an entry can be stored in (Dead and
 * PrepareEpochFence are only steps inside one decision), and those in which a transaction is open (begun,
 * not yet completed: it holds partitions' LSO). The domain's lists (domain/txn/txn-state.ts), named here
 * as the side-port names them.
 */
export {
  TXN_STATES as TRANSACTION_STATES,
  PERSISTED_TXN_STATES as STORED_TRANSACTION_STATES,
  OPEN_TXN_STATES as OPEN_TRANSACTION_STATES,
} from "../domain/txn/txn-state.ts";
export type TransactionStateName = import("../domain/txn/txn-state.ts").TxnState;

export interface TransactionPartitionView {
  topic: string;
  partition: number;
}

/** One transactional id's coordinator entry (TxnEntry), with what the side-port derives from it. */
export interface TransactionView {
  transactionalId: string;
  producerId: number;
  /** The producer id before the last InitProducerId (equal unless it rotated), -1 before the first. */
  lastProducerId: number;
  epoch: number;
  /** The epoch a producer that asked for a bump had before it, -1 when the last bump fenced its holder. */
  lastEpoch: number;
  timeoutMs: number;
  state: TransactionStateName;
  partitions: TransactionPartitionView[];
  groups: string[];
  /** When the current (or last) transaction began, or null when none has since the last InitProducerId. */
  ongoingSinceMs: number | null;
  /** How long the open transaction has run (Ongoing, PrepareCommit, PrepareAbort); null for the others. */
  ageMs: number | null;
  /**
   * Ongoing and older than its timeout. The reaper aborts those every 10 s, so one seen for longer is a
   * hanging transaction (or a coordinator that cannot write its slot).
   */
  timedOut: boolean;
  /** The time of the last transition. */
  updatedMs: number;
  /** Coordinator slot (fnv1a32(transactionalId) % 50) and the broker that owns it. */
  slot: number;
  coordinatorBrokerId: number;
}

/** An offset staged by the transaction (TxnOffsetCommit), invisible to consumers until it commits. */
export interface StagedOffsetView {
  groupId: string;
  topic: string;
  partition: number;
  offset: number;
  leaderEpoch: number;
  metadata: string;
  commitTimestampMs: number;
}

export interface TransactionDetailView extends TransactionView {
  /** Staged offsets of its groups for its producer id (the group coordinator's; groups of owned slots). */
  stagedOffsets: StagedOffsetView[];
  /** Markers of its decision that are not durable on their partitions yet. */
  pendingMarkers: MarkerView[];
  /**
   * The coordinator's recent steps for this id, oldest first, each with its time (in memory only: a restart
   * starts it again, with a "loaded" step for an open transaction). See TimelineEventView.
   */
  timeline: TimelineEventView[];
}

/**
 * One step of a transactional id's timeline: `loaded` (found in `state` at start-up or a take-over),
 * `initialized` (InitProducerId), `began` (with its first partitions and groups), `added`, `decided`
 * (`result`; `fenced` when the epoch was bumped: the reaper's or an operator's abort), `marker` (one
 * partition's, with its `outcome`: written, queued for broker N, dropped, superseded, failed, retried),
 * `completed`, `restored` (a failed write rolled it back to `state`), `forgotten` (expired or handed over).
 */
export interface TimelineEventView {
  kind: "loaded" | "initialized" | "began" | "added" | "decided" | "marker" | "completed" | "restored" | "forgotten";
  atMs: number;
  producerId: number | null;
  epoch: number | null;
  state: string | null;
  result: "commit" | "abort" | null;
  fenced: boolean | null;
  /** `topic-partition` names (began, added). */
  partitions: string[];
  groups: string[];
  /** The marker's partition (marker). */
  topic: string | null;
  partition: number | null;
  outcome: string | null;
}

export interface TransactionFilter {
  state?: TransactionStateName;
  /** Only open transactions (Ongoing, Prepare*) running at least this long (the hanging-transaction hunt). */
  minAgeMs?: number;
  producerId?: number;
  limit: number;
}

/** Something that looks like a hanging transaction, for the dashboard (and people): the broker's detector finds them. */
export type { HangingWarning };

export interface TransactionOverview {
  /** Entries per stored state (every state listed, 0 included). */
  byState: Record<string, number>;
  /** Age of the oldest Ongoing transaction, null when none is Ongoing. */
  oldestOngoingAgeMs: number | null;
  warnings: HangingWarning[];
}

export interface TransactionQueryPort {
  list(filter: TransactionFilter): Promise<{ total: number; transactions: TransactionView[] }>;
  get(transactionalId: string): Promise<TransactionDetailView | undefined>;
  overview(): Promise<TransactionOverview>;
}

export interface MarkerView {
  transactionalId: string;
  producerId: number;
  producerEpoch: number;
  coordinatorEpoch: number;
  result: "COMMIT" | "ABORT";
  topic: string;
  partition: number;
  /** The broker that must append it (the partition's leader when known, else -1). */
  targetBrokerId: number;
  /**
   * "coordinator": decided, not yet written or queued by this broker's coordinator (retried every 10 s);
   * "queue": in a shared-volume queue file, waiting for the target broker's watcher (polls every 2 s).
   */
  source: "coordinator" | "queue";
  /** When the decision became durable (coordinator), or when the queue file was written (queue). */
  sinceMs: number;
  /** The queue file's path relative to the data directory, for "queue" markers; else null. */
  file: string | null;
}

export interface MarkerQueueView {
  targetBrokerId: number;
  /** Queue files (one per transaction and target broker). */
  files: number;
}

export interface MarkerQueryPort {
  /** Markers decided and not yet durable on their partitions, oldest first, and the queues' depths. */
  pending(limit: number): Promise<{ total: number; markers: MarkerView[]; queues: MarkerQueueView[] }>;
}

/** Write operations, reachable only with the admin token. */
export type AdminOutcome =
  | { ok: true; body: Record<string, unknown> }
  | { ok: false; status: 404 | 409 | 503; error: string; message: string };

export interface TransactionAdminPort {
  /** Aborts an ongoing transaction (a hanging one, typically). */
  abort(transactionalId: string): Promise<AdminOutcome>;
}

// ---- consumer groups -------------------------------------------------------------------------

export interface GroupMemberView {
  memberId: string;
  groupInstanceId: string | null;
  clientId: string;
  clientHost: string;
}

/**
 * A group's committed offset on one partition, against the partition's high watermark and last stable
 * offset (null when this broker does not have the partition open). The dashboard cannot know a consumer's
 * isolation level, so it shows both lags: `hwLag` for read_uncommitted consumers, `lsoLag` for
 * read_committed ones.
 */
export interface GroupOffsetView {
  topic: string;
  partition: number;
  committedOffset: number;
  highWatermark: number | null;
  lastStableOffset: number | null;
  hwLag: number | null;
  lsoLag: number | null;
}

export interface GroupView {
  groupId: string;
  state: string;
  protocolType: string;
  /** The assignor the members chose (the consumer protocol's name), "" before a generation. */
  protocol: string;
  members: GroupMemberView[];
  /** Committed offsets, by topic then partition; at most GROUP_OFFSETS_MAX. */
  offsets: GroupOffsetView[];
  /** Committed offsets the group has in all. */
  offsetCount: number;
}

// ---- the live feed ----------------------------------------------------------------------------

/** The live dashboard's samples (live-samples.ts) and their subscription. */
export interface LiveFeedPort {
  readonly intervalMs: number;
  /** The span of the history when full (its capacity of intervals): the charts' width in time. */
  readonly windowMs: number;
  /** Oldest first. */
  samples(): LiveSample[];
  /** See LiveSampler.subscribe: undefined when too many are subscribed or the feed has stopped. */
  subscribe(onSample: () => void, onEnd: () => void): (() => void) | undefined;
}

// ---- the whole set -----------------------------------------------------------------------------

export interface HttpQueryPorts {
  readiness(): Promise<Readiness>;
  cluster(): ClusterView;
  /** Absent in a build (or a test double) without a scrubber: the dashboard leaves its line out. */
  scrubber?(): ScrubberView;
  topics(): Promise<TopicSummaryView[]>;
  topic(name: string): Promise<TopicDetailView | undefined>;
  producers(topic: string, partition: number, query: ProducersQuery): Promise<ProducersLookup>;
  /** Prometheus text exposition format 0.0.4, complete (ends with a newline). */
  metrics(): Promise<string>;
  /** Absent in a build without a transaction coordinator: its endpoints answer 501. */
  transactions?: TransactionQueryPort;
  /** Absent without marker queues: GET /v1/markers answers 501. */
  markers?: MarkerQueryPort;
  /** Absent without a transaction coordinator: the abort endpoint answers 501 (with a valid token). */
  transactionAdmin?: TransactionAdminPort;
  /** The groups this broker coordinates, by group id; absent in a build without groups (GET /v1/groups 501). */
  groups?(limit: number): Promise<{ total: number; groups: GroupView[] }>;
  /** The live dashboard's history and updates; absent: the dashboard is drawn once, without charts' history. */
  live?: LiveFeedPort;
}
