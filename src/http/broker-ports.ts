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
 * The listener is not imported (net/ and http/ are peers, DESIGN.md §2): main.ts hands it in as the small
 * structural interface below.
 */
import type { Broker } from "../broker/broker.ts";
import type { Partition } from "../storage/partition.ts";
import type { TopicRecord } from "../storage/topic-store.ts";
import { type BrokerMetrics, PrometheusWriter } from "./metrics.ts";
import type {
  ClusterView,
  HttpQueryPorts,
  PartitionView,
  ProducersLookup,
  ProducersQuery,
  ProducerView,
  Readiness,
  TopicDetailView,
  TopicSummaryView,
} from "./ports.ts";

/** What the HTTP side needs from the Kafka listener (net/kafka-listener.ts KafkaListener satisfies it). */
export interface ListenerStats {
  connectionCount(): number;
}

export interface BrokerQueryPortsOptions {
  /** Resolved by createBroker only after every partition is recovered: its existence means storage is. */
  broker: Broker;
  metrics: BrokerMetrics;
  version: string;
  /** Wall clock, for uptime; the broker's Clock. */
  nowMs: () => number;
  startedAtMs: number;
}

export class BrokerQueryPorts implements HttpQueryPorts {
  private listener: ListenerStats | undefined;
  private stopping = false;

  constructor(private readonly opts: BrokerQueryPortsOptions) {}

  /** The Kafka listener is bound: readiness can turn green. */
  setListener(listener: ListenerStats): void {
    this.listener = listener;
  }

  /** Shutdown began: /ready answers 503 from now on so that load balancers stop sending traffic. */
  markStopping(): void {
    this.stopping = true;
  }

  async readiness(): Promise<Readiness> {
    if (this.stopping) return { ready: false, reason: "the broker is shutting down" };
    if (!this.listener) return { ready: false, reason: "the Kafka listener is not bound yet" };
    const failed = failedPartitions(await this.openPartitions());
    if (failed.length > 0) {
      return { ready: false, reason: `the log of ${failed.length} partition(s) failed, first ${failed[0]}` };
    }
    return { ready: true };
  }

  cluster(): ClusterView {
    const { services } = this.opts.broker;
    const topics = services.topics.list();
    const nowMs = this.opts.nowMs();
    return {
      clusterId: services.clusterId,
      brokerId: services.ownership.selfId,
      controllerId: services.ownership.controllerId(),
      mode: "single-broker",
      version: this.opts.version,
      brokers: services.ownership.brokers().map((b) => ({ brokerId: b.brokerId, host: b.host, port: b.port, rack: b.rack })),
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
    out.sample("bunka_build_info", { version: this.opts.version }, 1);
    out.family("bunka_start_time_seconds", "gauge", "When this broker process started, in seconds since the epoch.");
    out.sample("bunka_start_time_seconds", undefined, this.opts.startedAtMs / 1000);
    out.family("bunka_ready", "gauge", "1 when GET /ready answers 200, else 0.");
    out.sample("bunka_ready", undefined, readiness.ready ? 1 : 0);
    out.family("bunka_connections", "gauge", "Open Kafka connections.");
    out.sample("bunka_connections", undefined, this.listener?.connectionCount() ?? 0);
    this.opts.metrics.writeTo(out);

    const topics = services.topics.list();
    out.family("bunka_topics", "gauge", "Topics in the cluster.");
    out.sample("bunka_topics", undefined, topics.length);
    out.family("bunka_partitions", "gauge", "Partitions of all topics.");
    out.sample("bunka_partitions", undefined, topics.reduce((sum, t) => sum + t.partitions, 0));
    const open = (await this.openPartitions()).sort((a, b) =>
      a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition,
    );
    out.family("bunka_partitions_open", "gauge", "Partitions this broker has open (recovered and serving).");
    out.sample("bunka_partitions_open", undefined, open.length);

    const perPartition: Array<[string, string, (p: Partition) => number]> = [
      ["bunka_partition_log_start_offset", "First offset still in the log.", (p) => p.log.logStartOffset],
      ["bunka_partition_log_end_offset", "Offset the next appended record gets.", (p) => p.log.logEndOffset],
      ["bunka_partition_high_watermark", "Offset up to which records are durable and visible to consumers.", (p) => p.highWatermark],
      ["bunka_partition_last_stable_offset", "Offset up to which read_committed consumers may read.", (p) => p.lastStableOffset],
      ["bunka_partition_size_bytes", "Bytes of the partition's segments on disk.", (p) => p.log.sizeBytes],
      ["bunka_partition_segments", "Segments in the partition's log.", (p) => p.log.segmentCount],
      ["bunka_partition_producers", "Producer ids with a dedupe window in the partition.", (p) => p.producers.size],
    ];
    for (const [name, help, read] of perPartition) {
      out.family(name, "gauge", help);
      for (const p of open) out.sample(name, { topic: p.topic, partition: p.partition }, read(p));
    }
    return out.text();
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
        failure: null,
      };
    }
    const log = open.log;
    return {
      partition,
      leader,
      open: true,
      logStartOffset: log.logStartOffset,
      logEndOffset: log.logEndOffset,
      highWatermark: open.highWatermark,
      lastStableOffset: open.lastStableOffset,
      segmentCount: log.segmentCount,
      segmentBaseOffsets: [...log.segmentBaseOffsets],
      sizeBytes: log.sizeBytes,
      producerCount: open.producers.size,
      failure: log.failed ? log.failed.message : null,
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
