/**
 * The read-only query ports the HTTP side-port is built on (DESIGN.md §7). The Hono app (app.ts) knows
 * nothing but these interfaces, so it is tested with `app.request()` against plain objects, and the broker
 * side (broker-ports.ts) is the only place that reads live broker state.
 *
 * Views are plain data: numbers, strings, arrays, objects, null. They are encoded as JSON or MessagePack
 * as they are, so they never carry bigint, Map, class instances or undefined fields.
 *
 * Subsystems that do not exist yet (the transaction coordinator, its marker queues) are optional ports:
 * when one is absent, its endpoints answer 501 with a JSON error that says so, rather than an empty list
 * that would look like "nothing is wrong". Adding the subsystem means implementing its port here and
 * passing it in; the routes, filters and their validation already exist.
 */

/** Why the broker is not ready to take traffic; absent when it is. */
export type Readiness = { ready: true } | { ready: false; reason: string };

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

export interface ClusterView {
  clusterId: string;
  /** The broker answering. */
  brokerId: number;
  controllerId: number;
  /** "single-broker" today; the shared-volume cluster mode will report itself here. */
  mode: string;
  version: string;
  brokers: BrokerEndpointView[];
  startedAtMs: number;
  uptimeMs: number;
  /** Open Kafka connections on this broker. */
  connections: number;
  topicCount: number;
  /** Partitions of all topics (whether opened yet or not). */
  partitionCount: number;
  features: FeatureView;
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
  /** The fatal error that stopped this partition's log, or null. */
  failure: string | null;
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

// ---- ports of subsystems that are still being built ---------------------------------------------

/** Kafka's transaction state names (TransactionState.java). */
export const TRANSACTION_STATES = [
  "Empty",
  "Ongoing",
  "PrepareCommit",
  "PrepareAbort",
  "CompleteCommit",
  "CompleteAbort",
  "Dead",
  "PrepareEpochFence",
] as const;
export type TransactionStateName = (typeof TRANSACTION_STATES)[number];

export interface TransactionPartitionView {
  topic: string;
  partition: number;
}

export interface TransactionView {
  transactionalId: string;
  producerId: number;
  lastProducerId: number;
  epoch: number;
  lastEpoch: number;
  timeoutMs: number;
  state: TransactionStateName;
  partitions: TransactionPartitionView[];
  groups: string[];
  /** When the current transaction started, or null when none is ongoing. */
  ongoingSinceMs: number | null;
  updatedMs: number;
  /** Coordinator slot (fnv1a32(transactionalId) % 50) and the broker that owns it. */
  slot: number;
  coordinatorBrokerId: number;
}

export interface TransactionFilter {
  state?: TransactionStateName;
  /** Only transactions whose current transaction started at least this long ago (hanging-transaction hunt). */
  minAgeMs?: number;
  limit: number;
}

export interface TransactionQueryPort {
  list(filter: TransactionFilter): Promise<{ total: number; transactions: TransactionView[] }>;
  get(transactionalId: string): Promise<TransactionView | undefined>;
}

export interface MarkerView {
  transactionalId: string;
  producerId: number;
  epoch: number;
  result: "COMMIT" | "ABORT";
  topic: string;
  partition: number;
  /** Broker whose queue holds the marker (the partition's leader). */
  targetBrokerId: number;
  enqueuedMs: number;
}

export interface MarkerQueryPort {
  /** Transaction markers written to the shared-volume queues and not yet applied. */
  pending(limit: number): Promise<{ total: number; markers: MarkerView[] }>;
}

/** Write operations, reachable only with the admin token. */
export type AdminOutcome = { ok: true; body: Record<string, unknown> } | { ok: false; status: 404 | 409; error: string; message: string };

export interface TransactionAdminPort {
  /** Aborts an ongoing transaction (a hanging one, typically). */
  abort(transactionalId: string): Promise<AdminOutcome>;
}

// ---- the whole set -----------------------------------------------------------------------------

export interface HttpQueryPorts {
  readiness(): Promise<Readiness>;
  cluster(): ClusterView;
  topics(): Promise<TopicSummaryView[]>;
  topic(name: string): Promise<TopicDetailView | undefined>;
  producers(topic: string, partition: number, query: ProducersQuery): Promise<ProducersLookup>;
  /** Prometheus text exposition format 0.0.4, complete (ends with a newline). */
  metrics(): Promise<string>;
  /** Absent until the transaction coordinator exists: its endpoints answer 501. */
  transactions?: TransactionQueryPort;
  /** Absent until the marker queues exist: GET /v1/markers answers 501. */
  markers?: MarkerQueryPort;
  /** Absent until the transaction coordinator exists: the abort endpoint answers 501 (with a valid token). */
  transactionAdmin?: TransactionAdminPort;
}
