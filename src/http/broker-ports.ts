/**
 * The query ports of ports.ts, answered from a live broker: its topic store, its open partitions (logs
 * and producer state), its ownership port and cluster id, plus the Kafka listener's connection count and
 * the metrics recorded in metrics.ts.
 *
 * Read-only in the strict sense: nothing here opens a partition, takes a lock or writes a byte. A
 * partition that no request has opened yet is reported as not open rather than opened to be looked at.
 * Everything runs on the event loop between appends, so each partition's numbers are consistent with
 * each other (no append is half-applied while they are read).
 *
 * The listener is not imported (net/ and http/ are peers, docs/architecture.md, "Layers"): main.ts hands it in
 * as the small structural interface below.
 *
 * Transactions come from the transaction coordinator's read-only accessors (its durable entries and the
 * markers it has not written yet), staged offsets from the group coordinator's offset slots, and markers
 * waiting for another broker from the shared-volume queue files (read, never changed). The one write, the
 * admin abort, goes through the coordinator's own abort path.
 *
 * Hanging transactions, as the dashboard and `bunka_transaction_hanging_warnings` report them, are the
 * broker's detector's (broker/hanging-transactions.ts, on a timer of its own): a read asks it for a pass
 * now, so what is shown is never older than the request.
 */
import { relative } from "node:path";
import type { Broker } from "../broker/broker.ts";
import type { PartitionCleanerStats } from "../broker/log-cleaner-service.ts";
import type { PendingTxnMarkers } from "../broker/txn-coordinator.ts";
import type { ClusterStatusSource, OwnershipStatus } from "../cluster/cluster-member.ts";
import { resourceId, type OwnedResource } from "../cluster/cluster-keys.ts";
import { SLOT_COUNT, slotOf } from "../cluster/ownership.ts";
import { GROUP_STATES } from "../domain/groups/classic-group.ts";
import { isTimedOut } from "../domain/txn/coordinator.ts";
import type { TxnEntry } from "../domain/txn/txn-state.ts";
import type { TxnTimelineEvent } from "../domain/txn/txn-timeline.ts";
import type { Timers } from "../platform/timers.ts";
import { FSYNC_DURATION_BUCKETS_SECONDS, REQUEST_DURATION_BUCKETS_SECONDS } from "./metrics.ts";
import { LiveSampler, type LiveCounters, type LivePartitionSample } from "./live-samples.ts";
import { errorInfoByCode } from "../errors/generated/error-codes.ts";
import { MarkerQueue, markerQueueDir } from "../storage/marker-queue.ts";
import type { Partition } from "../storage/partition.ts";
import type { TopicRecord } from "../storage/topic-store.ts";
import { lz4Kernels, snappyKernels } from "../protocol/records/kernels.ts";
import { type BrokerMetrics, PrometheusWriter } from "./metrics.ts";
import { mechanismsServed } from "../broker/sasl-authenticator.ts";
import { resolveListeners } from "../broker/listener-config.ts";
import { usesSasl } from "../domain/security/connection-security.ts";
import {
  OPEN_TRANSACTION_STATES,
  STORED_TRANSACTION_STATES,
  type AdminOutcome,
  type ClusterMemberView,
  type ClusterView,
  type GroupOffsetView,
  type GroupView,
  type LiveFeedPort,
  type TimelineEventView,
  type HostPortView,
  type LeaseView,
  type OwnershipView,
  type HttpQueryPorts,
  type MarkerQueryPort,
  type MarkerQueueView,
  type MarkerView,
  type PartitionCleanerView,
  type PartitionView,
  type ProducersLookup,
  type ProducersQuery,
  type ProducerView,
  type Readiness,
  type ScrubberView,
  type SecurityView,
  type StagedOffsetView,
  type TopicDetailView,
  type TopicSummaryView,
  type TransactionAdminPort,
  type TransactionDetailView,
  type TransactionFilter,
  type TransactionOverview,
  type TransactionQueryPort,
  type TransactionView,
} from "./ports.ts";

/** Committed offsets listed per group (GroupView.offsetCount counts them all). */
export const GROUP_OFFSETS_MAX = 500;
/** API keys whose bytes the live dashboard draws. */
const PRODUCE_API_KEY = 0;
const FETCH_API_KEY = 1;
const END_TXN_API_KEY = 26;
/** Queue files read per request (the depths count every file; the marker lists stop here). */
export const MARKER_QUEUE_FILES_READ_MAX = 1_000;

/** What the HTTP side needs from the Kafka listener (net/kafka-listener.ts KafkaListener satisfies it). */
export interface ListenerStats {
  connectionCount(): number;
  /** Response bytes held for all connections (queued output, responses waiting for their turn, reservations). */
  heldResponseBytes?(): number;
  /** Connections not reading, by reason (output, in-flight, connection-bytes, broker-bytes). */
  pausedConnections?(): Readonly<Record<string, number>>;
}

export interface BrokerQueryPortsOptions {
  /** Resolved by createBroker only after every partition is recovered: its existence means storage is. */
  broker: Broker;
  metrics: BrokerMetrics;
  version: string;
  /** Wall clock, for uptime; the broker's Clock. */
  nowMs: () => number;
  startedAtMs: number;
  /** Cluster mode's membership (etcd, the lease, the live brokers); absent in single-broker mode. */
  cluster?: ClusterStatusSource;
}

/** `partition/<topic>-<n>`, `txn/<slot>`, `group/<slot>`: the owner keys' own names. */
function resourceName(resource: OwnedResource): string {
  return `${resource.kind}/${resourceId(resource)}`;
}

/** The ownership manager's view as /v1/cluster shows it: shares per broker, what is unowned, what is held here. */
export function ownershipViewOf(status: OwnershipStatus, partitionCount: number): OwnershipView {
  const shares = new Map<number, { brokerId: number; partitions: number; txnSlots: number; groupSlots: number }>();
  const owned = { partitions: 0, txnSlots: 0, groupSlots: 0 };
  for (const owner of status.owners) {
    let share = shares.get(owner.brokerId);
    if (share === undefined) shares.set(owner.brokerId, (share = { brokerId: owner.brokerId, partitions: 0, txnSlots: 0, groupSlots: 0 }));
    const field = owner.resource.kind === "partition" ? "partitions" : owner.resource.kind === "txn" ? "txnSlots" : "groupSlots";
    share[field]++;
    owned[field]++;
  }
  return {
    shares: [...shares.values()].sort((a, b) => a.brokerId - b.brokerId),
    unowned: {
      partitions: Math.max(0, partitionCount - owned.partitions),
      txnSlots: SLOT_COUNT - owned.txnSlots,
      groupSlots: SLOT_COUNT - owned.groupSlots,
    },
    held: status.held.map((h) => ({ resource: resourceName(h.resource), state: h.state, epoch: h.epoch })).sort((a, b) => (a.resource < b.resource ? -1 : 1)),
    owners: status.owners.map((o) => ({ resource: resourceName(o.resource), brokerId: o.brokerId, epoch: o.epoch })).sort((a, b) => (a.resource < b.resource ? -1 : 1)),
  };
}

export class BrokerQueryPorts implements HttpQueryPorts {
  private listener: ListenerStats | undefined;
  /** The side-port's own advertised address, for the members list in single-broker mode. */
  private httpAddress: HostPortView | null = null;
  private stopping = false;
  private sampler: LiveSampler | undefined;
  private readonly markerQueue: MarkerQueue;
  readonly transactions: TransactionQueryPort;
  readonly markers: MarkerQueryPort;
  readonly transactionAdmin: TransactionAdminPort;

  constructor(private readonly opts: BrokerQueryPortsOptions) {
    const { services } = opts.broker;
    // A reader of the same files the coordinator and the watcher use; it never writes (no enqueue here).
    this.markerQueue = new MarkerQueue(services.fs, services.config.dataDir);
    this.transactions = {
      list: (filter) => this.listTransactions(filter),
      get: (transactionalId) => this.describeTransaction(transactionalId),
      overview: () => this.transactionOverview(),
    };
    this.markers = { pending: (limit) => this.pendingMarkers(limit) };
    this.transactionAdmin = { abort: (transactionalId) => this.abortTransaction(transactionalId) };
  }

  /** The Kafka listener is bound: readiness can turn green. */
  setListener(listener: ListenerStats): void {
    this.listener = listener;
  }

  /** The side-port is bound at this advertised address. */
  setHttpAddress(host: string, port: number): void {
    this.httpAddress = { host, port };
  }

  /** Shutdown began: /ready answers 503 from now on so that load balancers stop sending traffic. */
  markStopping(): void {
    this.stopping = true;
    // The dashboard's event streams end now, so that closing the side-port does not wait for them.
    void this.sampler?.stop();
  }

  /**
   * Starts the live dashboard's sampler (live-samples.ts) on `timers`: main.ts and the end-to-end tests do,
   * the unit tests leave it off. Stopped by markStopping.
   */
  startLive(timers: Timers, opts: { intervalMs?: number; capacity?: number } = {}): void {
    if (this.sampler !== undefined || this.stopping) return;
    const clock = { nowMs: this.opts.nowMs, monotonicMs: () => this.opts.broker.services.clock.monotonicMs() };
    this.sampler = new LiveSampler({
      read: () => this.liveCounters(),
      endTxnBoundsSeconds: REQUEST_DURATION_BUCKETS_SECONDS,
      fsyncBoundsSeconds: FSYNC_DURATION_BUCKETS_SECONDS,
      clock,
      timers,
      ...opts,
    });
    this.sampler.start();
  }

  /** The live feed, once startLive ran. */
  get live(): LiveFeedPort | undefined {
    return this.sampler;
  }

  /** What one live sample is made of: the byte and transaction counters, and the partitions' state now. */
  private async liveCounters(): Promise<LiveCounters> {
    const { metrics } = this.opts;
    const { services } = this.opts.broker;
    const nowMs = this.opts.nowMs();
    // The oldest open transaction of this coordinator on each partition, from its entries.
    const oldestByPartition = new Map<string, number>();
    for (const entry of await services.txn.entries((e) => OPEN_TRANSACTION_STATES.includes(e.state) && e.ongoingSinceMs >= 0)) {
      for (const t of entry.partitions) {
        for (const p of t.partitions) {
          const key = `${t.topic}\u0000${p}`;
          const since = oldestByPartition.get(key);
          if (since === undefined || entry.ongoingSinceMs < since) oldestByPartition.set(key, entry.ongoingSinceMs);
        }
      }
    }
    const partitions: LivePartitionSample[] = [];
    for (const p of await this.openPartitions()) {
      const lsoLag = p.highWatermark - p.lastStableOffset;
      const since = oldestByPartition.get(`${p.topic}\u0000${p.partition}`);
      if (lsoLag <= 0 && p.openTransactionCount === 0 && since === undefined) continue;
      partitions.push({
        topic: p.topic,
        partition: p.partition,
        lsoLag,
        openTransactions: p.openTransactionCount,
        oldestOpenTxnAgeMs: since === undefined ? null : Math.max(0, nowMs - since),
      });
    }
    return {
      produceBytes: metrics.requestBytesByApi[PRODUCE_API_KEY]!,
      fetchBytes: metrics.responseBytesByApi[FETCH_API_KEY]!,
      txnCommitted: services.txn.timeline.completed.commit,
      txnAborted: services.txn.timeline.completed.abort,
      endTxnBuckets: metrics.requestDurationBuckets(END_TXN_API_KEY),
      fsyncBuckets: metrics.fsyncDurationBuckets("file"),
      partitions,
    };
  }

  /** The groups this broker coordinates, with their members and each committed offset's lags. */
  async groups(limit: number): Promise<{ total: number; groups: GroupView[] }> {
    const { groups } = this.opts.broker.services;
    const listed = groups.listGroups([], []).sort((a, b) => compare(a.groupId, b.groupId));
    const open = byTopicOf(await this.openPartitions());
    const views: GroupView[] = [];
    for (const g of listed.slice(0, limit)) {
      const described = groups.describeGroup(g.groupId);
      if (described.group === null) continue; // handed over since the list
      const offsets: GroupOffsetView[] = [];
      let offsetCount = 0;
      for (const [topic, partitions] of groups.offsetsSlot(g.groupId).committedOfGroup(g.groupId)) {
        for (const [partition, committed] of partitions) {
          offsetCount += 1;
          if (offsets.length >= GROUP_OFFSETS_MAX) continue;
          const p = open.get(topic)?.get(partition);
          offsets.push({
            topic,
            partition,
            committedOffset: committed.offset,
            highWatermark: p === undefined ? null : p.highWatermark,
            lastStableOffset: p === undefined ? null : p.lastStableOffset,
            hwLag: p === undefined ? null : Math.max(0, p.highWatermark - committed.offset),
            lsoLag: p === undefined ? null : Math.max(0, p.lastStableOffset - committed.offset),
          });
        }
      }
      offsets.sort((a, b) => compare(a.topic, b.topic) || a.partition - b.partition);
      views.push({
        groupId: g.groupId,
        state: described.group.groupState,
        protocolType: described.group.protocolType,
        protocol: described.group.protocolData,
        members: described.group.members.map((m) => ({ memberId: m.memberId, groupInstanceId: m.groupInstanceId, clientId: m.clientId, clientHost: m.clientHost })),
        offsets,
        offsetCount,
      });
    }
    return { total: listed.length, groups: views };
  }

  async readiness(): Promise<Readiness> {
    if (this.stopping) return { ready: false, reason: "the broker is shutting down" };
    if (!this.listener) return { ready: false, reason: "the Kafka listener is not bound yet" };
    const clusterProblem = this.opts.cluster?.status().problem;
    if (clusterProblem !== undefined) return { ready: false, reason: clusterProblem };
    const failed = failedPartitions(await this.openPartitions());
    if (failed.length > 0) {
      return { ready: false, reason: `the log of ${failed.length} partition(s) failed, first ${failed[0]}` };
    }
    // Damaged data (docs/operations.md, "Damaged data"): the other partitions are served, so the broker
    // stays in rotation, and says which ones are not.
    const damage = this.opts.broker.services.partitions.damage;
    const damaged = damage.damagedPartitions();
    if (damaged.length > 0) {
      const first = damaged[0]!;
      const finding = damage.findings(first)[0]!;
      const where = finding.position >= 0 ? `${finding.file} at position ${finding.position}` : finding.file;
      const what = finding.refused ? "not served" : "served up to the damage";
      const named = damaged.length <= 10 ? damaged.join(", ") : `${damaged.slice(0, 10).join(", ")} and ${damaged.length - 10} more`;
      return { ready: true, degraded: `damaged data in ${damaged.length} partition(s): ${named}; first ${first} (${what}): ${where}: ${finding.reason}` };
    }
    // A state file that no longer holds what this broker wrote: it serves from memory, but would not start.
    const stateFiles = damage.unrepairedStateFiles();
    if (stateFiles.length > 0) {
      const first = stateFiles[0]!;
      return { ready: true, degraded: `${stateFiles.length} damaged state file(s) not rewritten; first ${first.file}: ${first.reason}; the broker serves from memory, and the next start will refuse the file` };
    }
    return { ready: true };
  }

  scrubber(): ScrubberView {
    const { services } = this.opts.broker;
    const stats = services.scrubber.statistics;
    return {
      bytesPerSecond: services.config.logScrubberBytesPerSecond,
      passesCompleted: stats.passesCompleted,
      lastFullPassEndMs: stats.lastFullPassEndMs < 0 ? null : stats.lastFullPassEndMs,
      lastFullPassAgeMs: stats.lastFullPassEndMs < 0 ? null : Math.max(0, this.opts.nowMs() - stats.lastFullPassEndMs),
      lastFullPassDurationMs: stats.lastFullPassDurationMs,
      batchesVerified: stats.batchesVerified,
      damagedPartitions: services.partitions.damage.damagedPartitions().length,
      damagedStateFiles: services.partitions.damage.unrepairedStateFiles().length,
      repairedStateFiles: services.scrubber.statistics.stateFilesRepaired,
    };
  }

  cluster(): ClusterView {
    const { services } = this.opts.broker;
    const topics = services.topics.list();
    const nowMs = this.opts.nowMs();
    const brokers = services.ownership.brokers().map((b) => ({ brokerId: b.brokerId, host: b.host, port: b.port, rack: b.rack }));
    const selfId = services.ownership.selfId;
    const status = this.opts.cluster?.status();
    let members: ClusterMemberView[];
    let lease: LeaseView | null = null;
    if (status === undefined) {
      const self = brokers.find((b) => b.brokerId === selfId)!;
      members = [{ brokerId: selfId, kafka: { host: self.host, port: self.port }, http: this.httpAddress, rack: self.rack, self: true }];
    } else {
      members = status.members.map((m) => ({ brokerId: m.brokerId, kafka: { ...m.kafka }, http: m.http === null ? null : { ...m.http }, rack: m.rack, self: m.brokerId === selfId }));
      lease = {
        id: status.lease.id === undefined ? null : String(status.lease.id),
        ttlMs: status.lease.ttlSeconds * 1000,
        validForMs: status.lease.validForMs,
        state: status.lease.valid ? "valid" : "lapsed",
        lapses: status.lease.lapses,
        lastError: status.lease.lastError ?? null,
      };
    }
    return {
      clusterId: services.clusterId,
      brokerId: selfId,
      controllerId: services.ownership.controllerId(),
      mode: status === undefined ? "single" : "cluster",
      version: this.opts.version,
      brokers,
      etcd: status === undefined ? null : { endpoints: [...status.endpoints] },
      lease,
      members,
      startedAtMs: this.opts.startedAtMs,
      uptimeMs: Math.max(0, nowMs - this.opts.startedAtMs),
      connections: this.listener?.connectionCount() ?? 0,
      topicCount: topics.length,
      partitionCount: topics.reduce((sum, t) => sum + t.partitions, 0),
      // Registered handlers are the truth about what this build serves: InitProducerId means idempotence,
      // EndTxn (26) means transactions, JoinGroup (11) means consumer groups.
      features: {
        idempotentProducer: this.opts.broker.registry.get(22) !== undefined,
        transactions: this.opts.broker.registry.get(26) !== undefined,
        consumerGroups: this.opts.broker.registry.get(11) !== undefined,
      },
      ownership: status?.ownership === undefined ? null : ownershipViewOf(status.ownership, topics.reduce((sum, t) => sum + t.partitions, 0)),
      security: this.security(),
    };
  }

  private security(): SecurityView {
    const { config, authorizer, scramCredentials } = this.opts.broker.services;
    return {
      listeners: resolveListeners(config).map((l) => ({
        name: l.name,
        securityProtocol: l.securityProtocol,
        saslMechanisms: usesSasl(l.securityProtocol) ? [...(config.listenerSaslEnabledMechanisms[l.name] ?? config.saslEnabledMechanisms)] : null,
      })),
      authorizer: {
        enabled: authorizer.enabled,
        acls: authorizer.aclCount,
        superUsers: authorizer.enabled ? [...config.superUsers] : [],
        allowEveryoneIfNoAclFound: authorizer.enabled && config.allowEveryoneIfNoAclFound,
      },
      scramUsers: [...scramCredentials.store.all().keys()].sort(),
      sidePortReadsNeedToken: config.httpReadsNeedToken,
    };
  }

  async topics(): Promise<TopicSummaryView[]> {
    const byTopic = byTopicOf(await this.openPartitions());
    return this.opts.broker.services.topics
      .list()
      .slice()
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((t) => summaryOf(t, byTopic.get(t.name)));
  }

  async topic(name: string): Promise<TopicDetailView | undefined> {
    const record = this.opts.broker.services.topics.get(name);
    if (!record) return undefined;
    const open = byTopicOf(await this.openPartitions()).get(name);
    const partitionDetails: PartitionView[] = [];
    for (let p = 0; p < record.partitions; p++) {
      partitionDetails.push(this.partitionView(record, p, open?.get(p)));
    }
    return { ...summaryOf(record, open), partitionDetails };
  }

  async producers(topic: string, partition: number, query: ProducersQuery): Promise<ProducersLookup> {
    const record = this.opts.broker.services.topics.get(topic);
    if (!record) return { kind: "unknown-topic" };
    if (partition >= record.partitions) return { kind: "unknown-partition", partitions: record.partitions };
    const open = byTopicOf(await this.openPartitions()).get(topic)?.get(partition);
    if (!open) return { kind: "ok", view: { topic, partition, open: false, total: 0, truncated: false, producers: [] } };
    const table = open.producers;
    let ids: number[];
    if (query.producerId !== undefined) {
      ids = table.has(query.producerId) ? [query.producerId] : [];
    } else {
      // Ids only (no entry objects) for the whole table, then entries for the page that is returned.
      ids = table.producerIdsWhere(() => true).sort((a, b) => a - b);
    }
    const page = ids.slice(0, query.limit);
    const producers: ProducerView[] = [];
    for (const producerId of page) {
      const entry = table.get(producerId);
      if (!entry) continue;
      producers.push({
        producerId,
        epoch: entry.epoch,
        batches: entry.batches.map((b) => ({
          firstSeq: b.firstSeq,
          lastSeq: b.lastSeq,
          firstOffset: b.firstOffset,
          lastOffset: b.lastOffset,
          timestampMs: b.timestampMs,
        })),
        lastTimestampMs: entry.lastTimestampMs,
        currentTxnFirstOffset: entry.currentTxnFirstOffset < 0 ? null : entry.currentTxnFirstOffset,
        coordinatorEpoch: entry.coordinatorEpoch < 0 ? null : entry.coordinatorEpoch,
      });
    }
    return { kind: "ok", view: { topic, partition, open: true, total: table.size, truncated: ids.length > page.length, producers } };
  }

  async metrics(): Promise<string> {
    const out = new PrometheusWriter();
    const { services } = this.opts.broker;
    const readiness = await this.readiness();
    out.family("bunka_build_info", "gauge", "Always 1; the labels name the build.");
    out.sample("bunka_build_info", { version: this.opts.version, lz4_kernel: lz4Kernels === null ? "typescript" : "wasm", snappy_kernel: snappyKernels === null ? "typescript" : "wasm" }, 1);
    out.family("bunka_start_time_seconds", "gauge", "When this broker process started, in seconds since the epoch.");
    out.sample("bunka_start_time_seconds", undefined, this.opts.startedAtMs / 1000);
    out.family("bunka_ready", "gauge", "1 when GET /ready answers 200, else 0.");
    out.sample("bunka_ready", undefined, readiness.ready ? 1 : 0);
    const cluster = this.opts.cluster?.status();
    out.family("bunka_cluster_members", "gauge", "Live brokers: in cluster mode the registrations in etcd (this broker's included while its lease holds), in single mode 1.");
    out.sample("bunka_cluster_members", undefined, cluster === undefined ? 1 : cluster.members.length);
    if (cluster !== undefined) {
      out.family("bunka_cluster_lease_valid", "gauge", "1 while this broker's etcd lease is valid by its own monotonic clock, 0 once it lapsed (cluster mode only).");
      out.sample("bunka_cluster_lease_valid", undefined, cluster.lease.valid ? 1 : 0);
      out.family("bunka_cluster_lease_lapses_total", "counter", "Times this broker's etcd lease lapsed: no keep-alive confirmed in time, or etcd dropped the lease (cluster mode only).");
      out.sample("bunka_cluster_lease_lapses_total", undefined, cluster.lease.lapses);
    }
    out.family("bunka_connections", "gauge", "Open Kafka connections.");
    out.sample("bunka_connections", undefined, this.listener?.connectionCount() ?? 0);
    out.family(
      "bunka_response_bytes_held",
      "gauge",
      "Kafka response bytes held for all connections: output the clients have not read, responses waiting for an earlier one, and what fetches being answered reserved.",
    );
    out.sample("bunka_response_bytes_held", undefined, this.listener?.heldResponseBytes?.() ?? 0);
    out.family(
      "bunka_connections_paused",
      "gauge",
      "Kafka connections not reading, by reason: output (the client does not read fast enough), in_flight (too many requests pending), connection_bytes (the connection holds its bound of response bytes), broker_bytes (all connections together hold theirs and this one at least its share).",
    );
    const paused = this.listener?.pausedConnections?.() ?? {};
    for (const reason of ["output", "in-flight", "connection-bytes", "broker-bytes"]) {
      out.sample("bunka_connections_paused", { reason: reason.replace("-", "_") }, paused[reason] ?? 0);
    }
    this.opts.metrics.writeTo(out);

    const topics = services.topics.list();
    out.family("bunka_topics", "gauge", "Topics in the cluster.");
    out.sample("bunka_topics", undefined, topics.length);
    out.family("bunka_partitions", "gauge", "Partitions of all topics.");
    out.sample("bunka_partitions", undefined, topics.reduce((sum, t) => sum + t.partitions, 0));
    // SASL on SASL_* listeners (broker/sasl-authenticator.ts), by mechanism ("" for one not enabled).
    const sasl = this.opts.broker.services.sasl.counts;
    const saslFamilies: [string, string, Map<string, number>][] = [
      ["bunka_sasl_authentications_total", "Successful SASL authentications, by mechanism.", sasl.authenticated],
      ["bunka_sasl_reauthentications_total", "Successful SASL re-authentications (KIP-368), by mechanism.", sasl.reauthenticated],
      ["bunka_sasl_authentication_failures_total", "Failed SASL authentications (wrong password, unknown user, unsupported mechanism, bad message), by mechanism.", sasl.failed],
      ["bunka_sasl_reauthentication_failures_total", "Failed SASL re-authentications, by mechanism.", sasl.failedReauthentication],
    ];
    for (const [name, help, counts] of saslFamilies) {
      out.family(name, "counter", help);
      for (const mechanism of mechanismsServed(this.opts.broker.services.config)) out.sample(name, { mechanism }, counts.get(mechanism) ?? 0);
      if (counts.has("")) out.sample(name, { mechanism: "" }, counts.get("")!);
    }
    out.family("bunka_sasl_expired_sessions_closed_total", "counter", "Connections closed because a request came after their SASL session ended (connections.max.reauth.ms).");
    out.sample("bunka_sasl_expired_sessions_closed_total", undefined, sasl.expiredSessionsClosed);
    // Fetch sessions (KIP-227): how many the cache holds, and how Fetch v7+ requests used them.
    const sessions = this.opts.broker.services.fetchSessions.stats();
    out.family("bunka_fetch_sessions", "gauge", "Incremental fetch sessions in the cache (max.incremental.fetch.session.cache.slots bounds them).");
    out.sample("bunka_fetch_sessions", undefined, sessions.sessions);
    out.family("bunka_fetch_session_partitions", "gauge", "Partitions remembered by all fetch sessions together.");
    out.sample("bunka_fetch_session_partitions", undefined, sessions.partitions);
    out.family("bunka_fetch_sessions_created_total", "counter", "Fetch sessions created (a full request with epoch 0 that found room).");
    out.sample("bunka_fetch_sessions_created_total", undefined, sessions.sessionsCreated);
    out.family("bunka_fetch_session_evictions_total", "counter", "Fetch sessions removed to make room for a new one.");
    out.sample("bunka_fetch_session_evictions_total", undefined, sessions.evictions);
    out.family(
      "bunka_fetch_requests_total",
      "counter",
      "Fetch v7+ requests by what they were: full (may open a session), incremental (served from a session), sessionless (epoch -1, or no room), error (a session error: 70, 71 or 106).",
    );
    out.sample("bunka_fetch_requests_total", { session: "full" }, sessions.fullRequests);
    out.sample("bunka_fetch_requests_total", { session: "incremental" }, sessions.incrementalRequests);
    out.sample("bunka_fetch_requests_total", { session: "sessionless" }, sessions.sessionlessRequests);
    out.sample("bunka_fetch_requests_total", { session: "error" }, sessions.sessionErrors);
    const open = (await this.openPartitions()).sort((a, b) =>
      a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition,
    );
    out.family("bunka_partitions_open", "gauge", "Partitions this broker has open (recovered and serving).");
    out.sample("bunka_partitions_open", undefined, open.length);

    // Damaged data: the registry Fetch and /ready read, and the scrubber's work (docs/operations.md).
    const damage = services.partitions.damage;
    const damaged = damage.damagedPartitions();
    out.family("bunka_partitions_damaged", "gauge", "Partitions with damaged data found (at open, by a read or by the scrubber); /ready says degraded while any.");
    out.sample("bunka_partitions_damaged", undefined, damaged.length);
    out.family("bunka_partitions_refused", "gauge", "Partitions refused at open for damaged data: they answer KAFKA_STORAGE_ERROR to everything.");
    out.sample("bunka_partitions_refused", undefined, damaged.filter((key) => damage.refusal(key) !== undefined).length);
    out.family("bunka_partition_damaged_batches", "gauge", "Damaged batches known in the partition (each found once, whoever found it).");
    for (const key of damaged) {
      const cut = key.lastIndexOf("-");
      out.sample("bunka_partition_damaged_batches", { topic: key.slice(0, cut), partition: key.slice(cut + 1) }, damage.findings(key).length);
    }
    const scrub = services.scrubber.statistics;
    out.family("bunka_log_scrubber_bytes_total", "counter", "Segment bytes the scrubber read and verified.");
    out.sample("bunka_log_scrubber_bytes_total", undefined, scrub.bytesScrubbed);
    out.family("bunka_log_scrubber_batches_verified_total", "counter", "Batches the scrubber verified sound (framing, CRC-32C, offsets).");
    out.sample("bunka_log_scrubber_batches_verified_total", undefined, scrub.batchesVerified);
    out.family("bunka_log_scrubber_damaged_batches_total", "counter", "Damaged batches the scrubber found that were not known before.");
    out.sample("bunka_log_scrubber_damaged_batches_total", undefined, scrub.damagedBatchesFound);
    out.family("bunka_state_files_damaged", "gauge", "State files (transaction and group slot checkpoints and journals) found damaged while the broker ran and not rewritten; /ready says degraded while any.");
    out.sample("bunka_state_files_damaged", undefined, damage.unrepairedStateFiles().length);
    out.family("bunka_state_files_damage_found_total", "counter", "Damage the scrubber found in state files (each found once until it is rewritten).");
    out.sample("bunka_state_files_damage_found_total", undefined, scrub.stateFileDamageFound);
    out.family("bunka_state_files_repaired_total", "counter", "Damaged state files rewritten from memory (the slot's durable state, a fold to the next generation).");
    out.sample("bunka_state_files_repaired_total", undefined, scrub.stateFilesRepaired);
    out.family("bunka_log_scrubber_state_slots_checked_total", "counter", "Slot stores' files the scrubber compared with memory (one per loaded slot per pass).");
    out.sample("bunka_log_scrubber_state_slots_checked_total", undefined, scrub.stateSlotsChecked);
    out.family("bunka_log_scrubber_passes_total", "counter", "Full passes the scrubber completed over every partition.");
    out.sample("bunka_log_scrubber_passes_total", undefined, scrub.passesCompleted);
    out.family("bunka_log_scrubber_last_full_pass_timestamp_seconds", "gauge", "When the scrubber's last full pass ended, in seconds since the epoch (0 before the first).");
    out.sample("bunka_log_scrubber_last_full_pass_timestamp_seconds", undefined, scrub.lastFullPassEndMs < 0 ? 0 : scrub.lastFullPassEndMs / 1000);
    out.family("bunka_log_scrubber_last_full_pass_duration_seconds", "gauge", "How long the scrubber's last full pass took.");
    out.sample("bunka_log_scrubber_last_full_pass_duration_seconds", undefined, scrub.lastFullPassDurationMs / 1000);

    const perPartition: Array<[string, string, (p: Partition) => number]> = [
      ["bunka_partition_log_start_offset", "First offset still in the log.", (p) => p.log.logStartOffset],
      ["bunka_partition_log_end_offset", "Offset the next appended record gets.", (p) => p.log.logEndOffset],
      ["bunka_partition_high_watermark", "Offset up to which records are durable and visible to consumers.", (p) => p.highWatermark],
      ["bunka_partition_last_stable_offset", "Offset up to which read_committed consumers may read.", (p) => p.lastStableOffset],
      ["bunka_partition_size_bytes", "Bytes of the partition's segments on disk.", (p) => p.log.sizeBytes],
      ["bunka_partition_segments", "Segments in the partition's log.", (p) => p.log.segmentCount],
      ["bunka_partition_producers", "Producer ids with a dedupe window in the partition.", (p) => p.producers.size],
      ["bunka_partition_open_transactions", "Transactions open in the partition (a transactional batch appended, no marker yet).", (p) => p.openTransactionCount],
      ["bunka_partition_lso_lag", "High watermark minus last stable offset: records read_committed consumers cannot read yet.", (p) => p.highWatermark - p.lastStableOffset],
    ];
    for (const [name, help, read] of perPartition) {
      out.family(name, "gauge", help);
      for (const p of open) out.sample(name, { topic: p.topic, partition: p.partition }, read(p));
    }

    // The log cleaner, per partition it has looked at (cleanup.policy=compact topics).
    const cleanerStats = services.cleaner.partitionStats().sort((a, b) =>
      a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition,
    );
    const perCleaned: Array<[string, "counter" | "gauge", string, (s: PartitionCleanerStats) => number]> = [
      ["bunka_log_cleaner_dirty_ratio", "gauge", "Dirty bytes over clean plus dirty bytes of the cleanable part of the log, at the cleaner's last look.", (c) => c.dirtyRatio],
      ["bunka_log_cleaner_dirty_bytes", "gauge", "Bytes of the cleanable part of the log not cleaned yet.", (c) => c.dirtyBytes],
      ["bunka_log_cleaner_cleaned_up_to_offset", "gauge", "Offsets below this are clean (the cleaner checkpoint; -1 before the first pass).", (c) => c.cleanedUpToOffset],
      ["bunka_log_cleaner_passes_total", "counter", "Cleaning passes run.", (c) => c.passes],
      ["bunka_log_cleaner_read_bytes_total", "counter", "Bytes the cleaner read (mapping and copying).", (c) => c.bytesRead],
      ["bunka_log_cleaner_written_bytes_total", "counter", "Bytes the cleaner wrote into cleaned segments.", (c) => c.bytesWritten],
      ["bunka_log_cleaner_reclaimed_bytes_total", "counter", "Bytes by which cleaning shrank the log.", (c) => c.bytesReclaimed],
      ["bunka_log_cleaner_removed_records_total", "counter", "Records removed by cleaning (superseded, tombstones past their horizon, aborted).", (c) => c.recordsRemoved],
      ["bunka_log_cleaner_last_pass_duration_seconds", "gauge", "How long the last pass took.", (c) => c.lastPassDurationMs / 1000],
      ["bunka_log_cleaner_last_pass_failed", "gauge", "1 when the last pass failed (the partition is skipped until the next round).", (c) => (c.lastError === undefined ? 0 : 1)],
    ];
    for (const [name, type, help, read] of perCleaned) {
      out.family(name, type, help);
      for (const c of cleanerStats) out.sample(name, { topic: c.topic, partition: c.partition }, read(c));
    }

    // Transactions: one pass over the coordinator's entries (owned slots) for the counts and the warnings.
    const overview = await services.hangingTransactions.check();
    out.family("bunka_transactions", "gauge", "Transactional ids of this coordinator, by state.");
    for (const state of STORED_TRANSACTION_STATES) out.sample("bunka_transactions", { state }, overview.byState[state] ?? 0);
    out.family("bunka_transactions_completed_total", "counter", "Transactions this coordinator completed since start (Complete* applied), by result.");
    for (const result of ["commit", "abort"] as const) out.sample("bunka_transactions_completed_total", { result }, services.txn.timeline.completed[result]);
    out.family("bunka_transaction_oldest_ongoing_age_seconds", "gauge", "Age of the oldest Ongoing transaction (0 when none is Ongoing).");
    out.sample("bunka_transaction_oldest_ongoing_age_seconds", undefined, (overview.oldestOngoingAgeMs ?? 0) / 1000);
    out.family("bunka_transactions_timed_out", "gauge", "Ongoing transactions older than their timeout (the reaper aborts them every 10 s).");
    out.sample("bunka_transactions_timed_out", undefined, overview.warnings.filter((w) => w.kind === "timed-out-transaction").length);
    out.family("bunka_transaction_hanging_warnings", "gauge", "Hanging-transaction warnings of the dashboard: timed-out transactions and partitions with a stuck, unaccounted LSO.");
    out.sample("bunka_transaction_hanging_warnings", undefined, overview.warnings.length);
    const pending = await services.txn.pendingMarkers();
    out.family("bunka_transaction_markers_pending", "gauge", "Markers of decided transactions this coordinator has not yet written or queued (retried every 10 s).");
    out.sample("bunka_transaction_markers_pending", undefined, pending.reduce((sum, m) => sum + m.partitions.reduce((n, t) => n + t.partitions.length, 0), 0));
    out.family("bunka_marker_queue_depth", "gauge", "Marker files queued on the shared volume for a broker to apply (one per transaction and broker).");
    for (const q of await this.markerQueueDepths()) out.sample("bunka_marker_queue_depth", { target_broker: q.targetBrokerId }, q.files);

    const groups = services.groups.listGroups([], []);
    out.family("bunka_consumer_groups", "gauge", "Consumer groups of this coordinator, by state.");
    for (const state of GROUP_STATES) out.sample("bunka_consumer_groups", { state }, groups.filter((g) => g.groupState === state).length);
    return out.text();
  }

  // ---- transactions ------------------------------------------------------------------------------

  private transactionView(entry: TxnEntry, nowMs: number): TransactionView {
    const since = entry.ongoingSinceMs < 0 ? null : entry.ongoingSinceMs;
    const open = OPEN_TRANSACTION_STATES.includes(entry.state);
    const slot = slotOf(entry.transactionalId);
    return {
      transactionalId: entry.transactionalId,
      producerId: entry.producerId,
      lastProducerId: entry.lastProducerId,
      epoch: entry.epoch,
      lastEpoch: entry.lastEpoch,
      timeoutMs: entry.timeoutMs,
      state: entry.state,
      partitions: entry.partitions.flatMap((t) => t.partitions.map((partition) => ({ topic: t.topic, partition }))),
      groups: [...entry.groups],
      ongoingSinceMs: since,
      ageMs: open && since !== null ? Math.max(0, nowMs - since) : null,
      timedOut: isTimedOut(entry, nowMs),
      updatedMs: entry.updatedMs,
      slot,
      coordinatorBrokerId: this.opts.broker.services.ownership.slotOwner("txn", slot),
    };
  }

  private async listTransactions(filter: TransactionFilter): Promise<{ total: number; transactions: TransactionView[] }> {
    const nowMs = this.opts.nowMs();
    const matching = await this.opts.broker.services.txn.entries((entry) => {
      if (filter.state !== undefined && entry.state !== filter.state) return false;
      if (filter.producerId !== undefined && entry.producerId !== filter.producerId) return false;
      if (filter.minAgeMs !== undefined) {
        if (!OPEN_TRANSACTION_STATES.includes(entry.state) || entry.ongoingSinceMs < 0) return false;
        if (nowMs - entry.ongoingSinceMs < filter.minAgeMs) return false;
      }
      return true;
    });
    return { total: matching.length, transactions: matching.slice(0, filter.limit).map((e) => this.transactionView(e, nowMs)) };
  }

  private async describeTransaction(transactionalId: string): Promise<TransactionDetailView | undefined> {
    const { services } = this.opts.broker;
    const entry = await services.txn.entry(transactionalId);
    if (entry === undefined) return undefined;
    const nowMs = this.opts.nowMs();
    const stagedOffsets: StagedOffsetView[] = [];
    for (const groupId of entry.groups) {
      if (!services.groups.isCoordinatorFor(groupId)) continue; // another broker's group: its offsets are there
      for (const [topic, partitions] of services.groups.offsetsSlot(groupId).stagedOf(groupId, entry.producerId)) {
        for (const [partition, o] of partitions) {
          stagedOffsets.push({ groupId, topic, partition, offset: o.offset, leaderEpoch: o.leaderEpoch, metadata: o.metadata, commitTimestampMs: o.commitTimestampMs });
        }
      }
    }
    stagedOffsets.sort((a, b) => compare(a.groupId, b.groupId) || compare(a.topic, b.topic) || a.partition - b.partition);
    const pending = (await services.txn.pendingMarkers()).filter((m) => m.transactionalId === transactionalId);
    const queued = await this.queuedMarkers(MARKER_QUEUE_FILES_READ_MAX, (m) => m.transactionalId === transactionalId);
    return {
      ...this.transactionView(entry, nowMs),
      stagedOffsets,
      pendingMarkers: sortMarkers([...pending.flatMap((m) => this.coordinatorMarkerViews(m)), ...queued.markers]),
      timeline: services.txn.timeline.eventsOf(transactionalId).map(timelineEventView),
    };
  }

  /** Counts by state, the oldest Ongoing age and the hanging-transaction warnings: the detector's pass, now. */
  private async transactionOverview(): Promise<TransactionOverview> {
    const { byState, oldestOngoingAgeMs, warnings } = await this.opts.broker.services.hangingTransactions.check();
    return { byState, oldestOngoingAgeMs, warnings };
  }

  private async abortTransaction(transactionalId: string): Promise<AdminOutcome> {
    const outcome = await this.opts.broker.services.txn.abortTransaction(transactionalId);
    const nowMs = this.opts.nowMs();
    switch (outcome.kind) {
      case "unknown":
        return { ok: false, status: 404, error: "unknown_transactional_id", message: `no transaction state for ${JSON.stringify(transactionalId)}` };
      case "not-ongoing":
        return {
          ok: false,
          status: 409,
          error: "not_ongoing",
          message: `transaction ${JSON.stringify(transactionalId)} is ${outcome.entry.state}: only an Ongoing transaction can be aborted`,
        };
      case "unavailable": {
        const name = errorInfoByCode.get(outcome.errorCode)?.name ?? String(outcome.errorCode);
        return { ok: false, status: 503, error: "coordinator_unavailable", message: `the transaction coordinator cannot serve ${JSON.stringify(transactionalId)} now (${name}); retry` };
      }
      case "aborted":
        return { ok: true, body: { aborted: true, completed: outcome.completed, transaction: this.transactionView(outcome.entry, nowMs) } };
    }
  }

  // ---- markers -----------------------------------------------------------------------------------

  private coordinatorMarkerViews(m: PendingTxnMarkers): MarkerView[] {
    const { ownership } = this.opts.broker.services;
    return m.partitions.flatMap((t) =>
      t.partitions.map((partition) => ({
        transactionalId: m.transactionalId,
        producerId: m.producerId,
        producerEpoch: m.producerEpoch,
        coordinatorEpoch: m.coordinatorEpoch,
        result: m.result === "commit" ? ("COMMIT" as const) : ("ABORT" as const),
        topic: t.topic,
        partition,
        targetBrokerId: ownership.partitionLeader(t.topic, partition),
        source: "coordinator" as const,
        sinceMs: m.decidedMs,
        file: null,
      })),
    );
  }

  private async pendingMarkers(limit: number): Promise<{ total: number; markers: MarkerView[]; queues: MarkerQueueView[] }> {
    const pending = await this.opts.broker.services.txn.pendingMarkers();
    const queued = await this.queuedMarkers(MARKER_QUEUE_FILES_READ_MAX);
    const all = sortMarkers([...pending.flatMap((m) => this.coordinatorMarkerViews(m)), ...queued.markers]);
    return { total: all.length, markers: all.slice(0, limit), queues: queued.queues };
  }

  /** Files per `to-<broker>` queue directory; this broker's own queue is always listed. */
  private async markerQueueDepths(): Promise<MarkerQueueView[]> {
    const { fs, ownership } = this.opts.broker.services;
    const root = markerQueueDir(this.opts.broker.services.config.dataDir);
    const ids = new Set<number>([ownership.selfId]);
    if ((await fs.stat(root)) !== undefined) {
      for (const name of await fs.readdir(root)) {
        const match = /^to-(\d+)$/.exec(name);
        if (match) ids.add(Number(match[1]));
      }
    }
    const queues: MarkerQueueView[] = [];
    for (const targetBrokerId of [...ids].sort((a, b) => a - b)) {
      queues.push({ targetBrokerId, files: (await this.markerQueue.list(targetBrokerId)).length });
    }
    return queues;
  }

  /**
   * The markers in the queue files (at most `filesMax` files read), one view per partition. A file that
   * disappears meanwhile (applied by the watcher) or fails its checks (the watcher logs it) is skipped.
   */
  private async queuedMarkers(filesMax: number, keep: (m: { transactionalId: string }) => boolean = () => true): Promise<{ markers: MarkerView[]; queues: MarkerQueueView[] }> {
    const { fs, config } = this.opts.broker.services;
    const queues = await this.markerQueueDepths();
    const markers: MarkerView[] = [];
    let read = 0;
    for (const q of queues) {
      for (const path of await this.markerQueue.list(q.targetBrokerId)) {
        if (read >= filesMax) break;
        read += 1;
        const [queued, stat] = await Promise.all([this.markerQueue.read(path).catch(() => undefined), fs.stat(path).catch(() => undefined)]);
        if (queued === undefined || !keep(queued)) continue;
        for (const t of queued.partitions) {
          for (const partition of t.partitions) {
            markers.push({
              transactionalId: queued.transactionalId,
              producerId: queued.producerId,
              producerEpoch: queued.producerEpoch,
              coordinatorEpoch: queued.coordinatorEpoch,
              result: queued.result === "commit" ? "COMMIT" : "ABORT",
              topic: t.topic,
              partition,
              targetBrokerId: q.targetBrokerId,
              source: "queue",
              sinceMs: stat?.mtimeMs ?? 0,
              file: relative(config.dataDir, path),
            });
          }
        }
      }
    }
    return { markers, queues };
  }

  // ---- helpers -----------------------------------------------------------------------------------

  private partitionView(record: TopicRecord, partition: number, open: Partition | undefined): PartitionView {
    const leader = this.opts.broker.services.ownership.partitionLeader(record.name, partition);
    if (!open) {
      return {
        partition,
        leader,
        open: false,
        logStartOffset: null,
        logEndOffset: null,
        highWatermark: null,
        lastStableOffset: null,
        segmentCount: null,
        segmentBaseOffsets: null,
        sizeBytes: null,
        producerCount: null,
        openTransactionCount: null,
        lsoLag: null,
        failure: null,
        cleaner: null,
      };
    }
    const log = open.log;
    const lastStableOffset = open.lastStableOffset;
    return {
      partition,
      leader,
      open: true,
      logStartOffset: log.logStartOffset,
      logEndOffset: log.logEndOffset,
      highWatermark: open.highWatermark,
      lastStableOffset,
      segmentCount: log.segmentCount,
      segmentBaseOffsets: [...log.segmentBaseOffsets],
      sizeBytes: log.sizeBytes,
      producerCount: open.producers.size,
      openTransactionCount: open.openTransactionCount,
      lsoLag: open.highWatermark - lastStableOffset,
      failure: log.failed ? log.failed.message : null,
      cleaner: this.cleanerView(open),
    };
  }

  private cleanerView(partition: Partition): PartitionCleanerView | null {
    const cleaner = this.opts.broker.services.cleaner;
    if (cleaner.compactionConfigOf(partition.topic) === undefined) return null;
    const stats = cleaner.statsOf(partition.topic, partition.partition);
    return {
      cleanedUpToOffset: partition.log.cleanerCheckpoint.firstDirtyOffset,
      dirtyRatio: stats?.dirtyRatio ?? 0,
      dirtyBytes: stats?.dirtyBytes ?? 0,
      passes: stats?.passes ?? 0,
      bytesRead: stats?.bytesRead ?? 0,
      bytesReclaimed: stats?.bytesReclaimed ?? 0,
      recordsRemoved: stats?.recordsRemoved ?? 0,
      lastPassMs: stats !== undefined && stats.lastPassMs >= 0 ? stats.lastPassMs : null,
      lastPassDurationMs: stats !== undefined && stats.lastPassMs >= 0 ? stats.lastPassDurationMs : null,
      lastError: stats?.lastError ?? null,
    };
  }

  /**
   * The partitions that are open. A partition still being opened (a topic's first request, right now) is
   * waited for, which is short: the long recoveries happen at start-up, before the HTTP side-port binds.
   */
  private openPartitions(): Promise<Partition[]> {
    return this.opts.broker.services.partitions.openPartitions();
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A timeline step as the side-port shows it: every field present, null where the step has none. */
function timelineEventView(e: TxnTimelineEvent): TimelineEventView {
  const view: TimelineEventView = {
    kind: e.kind,
    atMs: e.atMs,
    producerId: null,
    epoch: null,
    state: null,
    result: null,
    fenced: null,
    partitions: [],
    groups: [],
    topic: null,
    partition: null,
    outcome: null,
  };
  switch (e.kind) {
    case "loaded":
      return { ...view, state: e.state, producerId: e.producerId, epoch: e.epoch };
    case "initialized":
      return { ...view, producerId: e.producerId, epoch: e.epoch };
    case "began":
      return { ...view, producerId: e.producerId, epoch: e.epoch, partitions: [...e.partitions], groups: [...e.groups] };
    case "added":
      return { ...view, partitions: [...e.partitions], groups: [...e.groups] };
    case "decided":
      return { ...view, result: e.result, fenced: e.fenced };
    case "marker":
      return { ...view, result: e.result, topic: e.topic, partition: e.partition, outcome: e.outcome };
    case "completed":
      return { ...view, result: e.result };
    case "restored":
      return { ...view, state: e.state };
    case "forgotten":
      return view;
  }
}

function sortMarkers(markers: MarkerView[]): MarkerView[] {
  return markers.sort(
    (a, b) => a.sinceMs - b.sinceMs || compare(a.transactionalId, b.transactionalId) || compare(a.topic, b.topic) || a.partition - b.partition || compare(a.source, b.source),
  );
}

function byTopicOf(partitions: Partition[]): Map<string, Map<number, Partition>> {
  const byTopic = new Map<string, Map<number, Partition>>();
  for (const p of partitions) {
    let forTopic = byTopic.get(p.topic);
    if (!forTopic) byTopic.set(p.topic, (forTopic = new Map()));
    forTopic.set(p.partition, p);
  }
  return byTopic;
}

function failedPartitions(partitions: Partition[]): string[] {
  const failed: string[] = [];
  for (const p of partitions) if (p.log.failed) failed.push(`${p.topic}-${p.partition}: ${p.log.failed.message}`);
  return failed;
}

function summaryOf(record: TopicRecord, open: Map<number, Partition> | undefined): TopicSummaryView {
  let sizeBytes = 0;
  if (open) for (const p of open.values()) sizeBytes += p.log.sizeBytes;
  return {
    name: record.name,
    topicId: record.topicId,
    partitions: record.partitions,
    createdMs: record.createdMs,
    configs: { ...record.configs },
    sizeBytes,
  };
}
