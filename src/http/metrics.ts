/**
 * The broker's own metrics and the Prometheus text exposition (format 0.0.4) they are served in.
 *
 * Two kinds of number:
 * - recorded as they happen, here: requests and their latency per API key and version (the dispatcher's
 *   RequestObserver), request and response bytes (the listener's dispatch, wrapped by `meteredDispatch`),
 *   fsync latency (the Fs port, wrapped by fs-timing.ts). Recording is a map lookup and a few additions,
 *   cheap enough for the hot path;
 * - read when scraped: connections, topics, partitions, offsets, producer ids. broker-ports.ts collects
 *   them from live state and writes them after these, so nothing is sampled in the background.
 *
 * Hand-written rather than a client library: the dependency rule (docs/architecture.md, "Layers") and the
 * format is small.
 */
import type { GatheredFrame } from "../protocol/gathered-frame.ts";
import type { RequestObserver } from "../broker/dispatcher.ts";
import type { ResourceKind } from "../cluster/cluster-keys.ts";
import type { OwnershipMove } from "../cluster/ownership-manager.ts";
import { ENDTXN_PHASES, type EndTxnPhase, type TxnObserver } from "../broker/txn-coordinator.ts";
import { apiCodecsByKey } from "../protocol/generated/index.ts";

/** API keys whose request and response bytes are counted one by one (Apache's keys are all below it). */
export const API_KEYS_COUNTED = 128;

/** Request latency buckets, in seconds: from sub-millisecond produce acks to long-polling fetches. */
export const REQUEST_DURATION_BUCKETS_SECONDS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
] as const;

/** fsync latency buckets, in seconds: fast NVMe (tens of microseconds) to a struggling network volume. */
export const FSYNC_DURATION_BUCKETS_SECONDS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
] as const;

export type Labels = Readonly<Record<string, string | number>>;

/** A cumulative histogram with fixed upper bounds (Prometheus' `le`), plus +Inf, sum and count. */
export class Histogram {
  private readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly upperBounds: readonly number[]) {
    for (let i = 1; i < upperBounds.length; i++) {
      if (!(upperBounds[i]! > upperBounds[i - 1]!)) throw new RangeError("histogram bounds must increase");
    }
    this.counts = new Float64Array(upperBounds.length);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    // Non-cumulative here (one increment per observation); cumulated when rendered.
    for (let i = 0; i < this.upperBounds.length; i++) {
      if (value <= this.upperBounds[i]!) {
        this.counts[i]!++;
        return;
      }
    }
  }

  /** Cumulative counts per bound, the last entry being +Inf (= count). */
  cumulative(): number[] {
    const out: number[] = [];
    let running = 0;
    for (let i = 0; i < this.counts.length; i++) {
      running += this.counts[i]!;
      out.push(running);
    }
    out.push(this.count);
    return out;
  }
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatLabels(labels: Labels | undefined, extra?: [string, string]): string {
  const parts: string[] = [];
  if (labels) for (const [k, v] of Object.entries(labels)) parts.push(`${k}="${escapeLabelValue(String(v))}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabelValue(extra[1])}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

/**
 * Writes the text exposition format: one `family()` call (HELP and TYPE lines) before the samples of that
 * family. Families must not repeat; `family()` checks it, because Prometheus rejects the whole scrape.
 */
export class PrometheusWriter {
  private readonly lines: string[] = [];
  private readonly families = new Set<string>();

  family(name: string, type: "counter" | "gauge" | "histogram", help: string): this {
    if (this.families.has(name)) throw new Error(`metric family ${name} written twice`);
    this.families.add(name);
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    return this;
  }

  sample(name: string, labels: Labels | undefined, value: number): this {
    this.lines.push(`${name}${formatLabels(labels)} ${formatValue(value)}`);
    return this;
  }

  histogram(name: string, labels: Labels | undefined, histogram: Histogram): this {
    const cumulative = histogram.cumulative();
    histogram.upperBounds.forEach((bound, i) => {
      this.lines.push(`${name}_bucket${formatLabels(labels, ["le", formatValue(bound)])} ${cumulative[i]}`);
    });
    this.lines.push(`${name}_bucket${formatLabels(labels, ["le", "+Inf"])} ${cumulative[cumulative.length - 1]}`);
    this.lines.push(`${name}_sum${formatLabels(labels)} ${formatValue(histogram.sum)}`);
    this.lines.push(`${name}_count${formatLabels(labels)} ${histogram.count}`);
    return this;
  }

  text(): string {
    return this.lines.length === 0 ? "" : `${this.lines.join("\n")}\n`;
  }
}

interface RequestSeries {
  apiKey: number;
  apiVersion: number;
  errors: number;
  duration: Histogram;
}

export type FsyncKind = "file" | "dir";
/** How a batch of fsync requests was made durable (platform/batched-sync.ts). */
export type FsyncBatchMethod = "syncfs" | "fsync";

/** The metrics recorded as things happen. One per process, built by main.ts (no module-level state). */
export class BrokerMetrics implements RequestObserver, TxnObserver {
  private readonly requests = new Map<number, RequestSeries>();
  private readonly fsyncs: Record<FsyncKind, Histogram> = {
    file: new Histogram(FSYNC_DURATION_BUCKETS_SECONDS),
    dir: new Histogram(FSYNC_DURATION_BUCKETS_SECONDS),
  };
  private readonly fsyncBatches: Record<FsyncBatchMethod, { batches: number; files: number }> = {
    syncfs: { batches: 0, files: 0 },
    fsync: { batches: 0, files: 0 },
  };
  // The steps are durable writes, as fsyncs are: the same fine-grained buckets.
  private readonly endTxnPhases = new Map<EndTxnPhase, Histogram>(ENDTXN_PHASES.map((phase) => [phase, new Histogram(FSYNC_DURATION_BUCKETS_SECONDS)]));
  requestBytes = 0;
  responseBytes = 0;
  /**
   * Request and response frame bytes by API key, for the live dashboard's produce and fetch rates (keys
   * beyond API_KEYS_COUNTED are in the totals only, so a client inventing keys cannot grow these).
   */
  readonly requestBytesByApi = new Float64Array(API_KEYS_COUNTED);
  readonly responseBytesByApi = new Float64Array(API_KEYS_COUNTED);
  /** Cluster mode: resources this broker took over and handed over, by kind, and the time each took. */
  private readonly ownershipMoves = new Map<string, { kind: ResourceKind; direction: OwnershipMove["direction"]; count: number; duration: Histogram }>();

  onRequest(apiKey: number, apiVersion: number, durationMs: number, errored: boolean): void {
    // API keys are int16 and versions small: one number keys the pair without building a string.
    const key = apiKey * 65_536 + apiVersion;
    let series = this.requests.get(key);
    if (!series) {
      series = { apiKey, apiVersion, errors: 0, duration: new Histogram(REQUEST_DURATION_BUCKETS_SECONDS) };
      this.requests.set(key, series);
    }
    series.duration.observe(durationMs / 1000);
    if (errored) series.errors++;
  }

  onFsync(kind: FsyncKind, durationMs: number): void {
    this.fsyncs[kind].observe(durationMs / 1000);
  }

  /** A batch of fsync requests for `files` distinct files was made durable by `method`. */
  onFsyncBatch(method: FsyncBatchMethod, files: number): void {
    this.fsyncBatches[method].batches += 1;
    this.fsyncBatches[method].files += files;
  }

  onEndTxnPhase(phase: EndTxnPhase, durationMs: number): void {
    this.endTxnPhases.get(phase)?.observe(durationMs / 1000);
  }

  /**
   * A take-over or hand-over this broker finished (cluster mode). The time of a take-over, from the claim
   * to the resource being served, is time its clients could not use it beyond the former owner's lease.
   */
  onOwnershipMove(move: OwnershipMove): void {
    const key = `${move.resource.kind}/${move.direction}`;
    let series = this.ownershipMoves.get(key);
    if (series === undefined) {
      series = { kind: move.resource.kind, direction: move.direction, count: 0, duration: new Histogram(REQUEST_DURATION_BUCKETS_SECONDS) };
      this.ownershipMoves.set(key, series);
    }
    series.count++;
    series.duration.observe(move.durationMs / 1000);
  }

  /** Size-prefixed request frame bytes handed to the broker (frames closed for their size are not counted). */
  onRequestBytes(bytes: number, apiKey = -1): void {
    this.requestBytes += bytes;
    if (apiKey >= 0 && apiKey < API_KEYS_COUNTED) this.requestBytesByApi[apiKey]! += bytes;
  }

  /** Size-prefixed response frame bytes the broker answered with. */
  onResponseBytes(bytes: number, apiKey = -1): void {
    this.responseBytes += bytes;
    if (apiKey >= 0 && apiKey < API_KEYS_COUNTED) this.responseBytesByApi[apiKey]! += bytes;
  }

  /**
   * The cumulative bucket counts (REQUEST_DURATION_BUCKETS_SECONDS, then +Inf) of one API key's request
   * latency over all its versions, or undefined before its first request.
   */
  requestDurationBuckets(apiKey: number): number[] | undefined {
    let total: number[] | undefined;
    for (const series of this.requests.values()) {
      if (series.apiKey !== apiKey) continue;
      const cumulative = series.duration.cumulative();
      total = total === undefined ? cumulative : total.map((n, i) => n + cumulative[i]!);
    }
    return total;
  }

  /** The cumulative bucket counts (FSYNC_DURATION_BUCKETS_SECONDS, then +Inf) of one kind of fsync. */
  fsyncDurationBuckets(kind: FsyncKind): number[] {
    return this.fsyncs[kind].cumulative();
  }

  writeTo(out: PrometheusWriter): void {
    const series = [...this.requests.values()].sort((a, b) => a.apiKey - b.apiKey || a.apiVersion - b.apiVersion);
    const labelsOf = (s: RequestSeries) => ({
      api_key: s.apiKey,
      api: apiCodecsByKey.get(s.apiKey)?.name ?? "unknown",
      api_version: s.apiVersion,
    });
    out.family("bunka_requests_total", "counter", "Kafka requests answered, by API key and version.");
    for (const s of series) out.sample("bunka_requests_total", labelsOf(s), s.duration.count);
    out.family(
      "bunka_request_errors_total",
      "counter",
      "Kafka requests answered with a top-level failure (UNSUPPORTED_VERSION for the handler, or UNKNOWN_SERVER_ERROR).",
    );
    for (const s of series) out.sample("bunka_request_errors_total", labelsOf(s), s.errors);
    out.family("bunka_request_duration_seconds", "histogram", "Time from a request frame to its response, by API key and version.");
    for (const s of series) out.histogram("bunka_request_duration_seconds", labelsOf(s), s.duration);
    out.family("bunka_request_bytes_total", "counter", "Bytes of Kafka request frames received, size prefix included.");
    out.sample("bunka_request_bytes_total", undefined, this.requestBytes);
    out.family("bunka_response_bytes_total", "counter", "Bytes of Kafka response frames sent, size prefix included.");
    out.sample("bunka_response_bytes_total", undefined, this.responseBytes);
    out.family("bunka_fsync_duration_seconds", "histogram", "fsync latency of data files (kind=file) and directories (kind=dir).");
    out.histogram("bunka_fsync_duration_seconds", { kind: "file" }, this.fsyncs.file);
    out.histogram("bunka_fsync_duration_seconds", { kind: "dir" }, this.fsyncs.dir);
    out.family(
      "bunka_fsync_batches_total",
      "counter",
      "Batches of fsync requests (fsync.mode=batched): one syncfs of the data directory's file system (method=syncfs) or one fsync per file (method=fsync).",
    );
    for (const method of ["syncfs", "fsync"] as const) out.sample("bunka_fsync_batches_total", { method }, this.fsyncBatches[method].batches);
    out.family("bunka_fsync_batch_files_total", "counter", "Distinct files in those batches, by method.");
    for (const method of ["syncfs", "fsync"] as const) out.sample("bunka_fsync_batch_files_total", { method }, this.fsyncBatches[method].files);
    out.family(
      "bunka_txn_end_phase_duration_seconds",
      "histogram",
      "The steps of every EndTxn that decided a transaction, in order: prepare (until Prepare* is durable), offsets (the group offset hook, only with offsets), markers (self-led markers durable, peer-led ones queued), complete (until Complete* is durable).",
    );
    for (const [phase, histogram] of this.endTxnPhases) out.histogram("bunka_txn_end_phase_duration_seconds", { phase }, histogram);
    const moves = [...this.ownershipMoves.values()].sort((a, b) => (a.kind + a.direction < b.kind + b.direction ? -1 : 1));
    out.family(
      "bunka_cluster_ownership_moves_total",
      "counter",
      "Cluster mode: partitions (kind=partition) and coordinator slots (kind=txn, kind=group) this broker took over (direction=acquired) or handed over (direction=released).",
    );
    for (const m of moves) out.sample("bunka_cluster_ownership_moves_total", { kind: m.kind, direction: m.direction }, m.count);
    out.family(
      "bunka_cluster_ownership_move_duration_seconds",
      "histogram",
      "Cluster mode: from the claim in etcd to the resource being served (acquired: recovery or loading), or from the decision to hand it over to its release (released).",
    );
    for (const m of moves) out.histogram("bunka_cluster_ownership_move_duration_seconds", { kind: m.kind, direction: m.direction }, m.duration);
  }
}

type DispatchResult = Uint8Array | GatheredFrame | null;
type Dispatch<C> = (frame: Uint8Array, conn: C) => Promise<DispatchResult> | DispatchResult;

/** The 4-byte size prefix the listener adds in front of each frame. */
const SIZE_PREFIX_BYTES = 4;

/**
 * Wraps the listener's dispatch function to count request and response bytes. The listener itself has no
 * byte counters, and these are exactly the frames the broker saw and answered, which is what matters for
 * capacity; bytes of frames rejected for their size never reach here and are not counted.
 */
export function meteredDispatch<C>(dispatch: Dispatch<C>, metrics: BrokerMetrics): Dispatch<C> {
  return (frame, conn) => {
    // Every request header starts with its API key (int16); a frame too short for one is counted without.
    const apiKey = frame.byteLength >= 2 ? (frame[0]! << 8) | frame[1]! : -1;
    metrics.onRequestBytes(frame.byteLength + SIZE_PREFIX_BYTES, apiKey);
    const answered = (response: DispatchResult) => {
      if (response !== null) metrics.onResponseBytes(response.byteLength + SIZE_PREFIX_BYTES, apiKey);
      return response;
    };
    const result = dispatch(frame, conn);
    return result instanceof Promise ? result.then(answered) : answered(result);
  };
}
