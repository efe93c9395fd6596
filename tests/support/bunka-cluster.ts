/**
 * A real bunka cluster for tests: one etcd (tests/support/etcd.ts) and N compiled-binary brokers
 * (tests/support/binary.ts) sharing ONE data directory, as `bunka serve --broker-id N --data-dir SHARED
 * --etcd URL` runs them in production.
 *
 *   const cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: 3000 });
 *   await cluster.createTopic("orders", 6);
 *   await cluster.waitForBalanced(["orders"]);
 *   await cluster.kill(2);                   // SIGKILL, waits for the exit
 *   await cluster.restart(2);                // same id, same Kafka port
 *   cluster.pause(1); cluster.resume(1);     // SIGSTOP / SIGCONT
 *   await cluster.restartEtcd();
 *   const { unavailableMs } = await cluster.measureFailover("orders", 0, "SIGKILL");
 *   await cluster.close();
 *
 * Two variants of etcd: `etcdMembers: 3` runs an etcd cluster (cluster.etcdCluster, a member killed and
 * launched again) whose every client URL each broker lists; `etcdProxies: true` gives each broker its own
 * TcpProxy to the single etcd (cluster.etcdProxy(id).cut() / .resume() / .dropResponses), to cut one
 * broker off etcd while its Kafka clients stay connected.
 *
 * Each broker id keeps its Kafka port for the life of the cluster (picked free once, at start): a client's
 * bootstrap list (`bootstrap`, every broker) stays valid across restarts, as it does for a real cluster
 * behind fixed addresses. The port of a broker that was just killed can be briefly unavailable, which
 * BunkaProcess.start retries. Each broker's stderr goes to its own file (broker-<id>.log, appended across
 * restarts), so a failure can be read broker by broker.
 *
 * Waits are conditions (Metadata and FindCoordinator answered by every live broker), never sleeps.
 */
import { mkdirSync, mkdtempSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { simpleBatch } from "./batch-builder.ts";
import { BunkaProcess, privateBinaryCopy, removeTempDir } from "./binary.ts";
import { EtcdCluster, EtcdServer, freePort } from "./etcd.ts";
import { type PartitionContents, readPartitionFully } from "./record-decoder.ts";
import { TcpProxy } from "./tcp-proxy.ts";
import { WireClient } from "./wire-client.ts";

const ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA";

export interface BunkaClusterOptions {
  brokers: number;
  /** broker.session.timeout.ms: the TTL of each broker's etcd lease (whole seconds). Default 3000. */
  sessionTimeoutMs?: number;
  /** Extra `serve` flags for every broker. */
  extraArgs?: string[];
  /** Extra lines of every broker's config file (`key=value`). */
  configLines?: string[];
  /** The directory for the data, logs and config files; a fresh temp dir by default (removed by close()). */
  dir?: string;
  /** The binary; a private copy of the fresh build (privateBinaryCopy) in `dir` by default. */
  binary?: string;
  /**
   * An etcd cluster of this many members (EtcdCluster) instead of a single etcd; every broker lists every
   * member's client URL, in member order. `etcd` is then the first member.
   */
  etcdMembers?: number;
  /**
   * Each broker reaches etcd only through its own TcpProxy (`etcdProxy(id)`), so that one broker can be cut
   * off from etcd while the others and its Kafka clients are not. Only with a single etcd.
   */
  etcdProxies?: boolean;
}

export interface PartitionLeaders {
  /** "topic-partition" -> leader id. */
  leaders: Map<string, number>;
  /** Partitions led per broker id. */
  shares: Map<number, number>;
}

export interface FailoverFigure {
  topic: string;
  partition: number;
  signal: "SIGKILL" | "SIGTERM";
  formerLeader: number;
  newLeader: number;
  /** From the signal to a successful Produce acks=-1 on the partition through its new leader. */
  unavailableMs: number;
}

type MetadataAnswer = {
  brokers: { nodeId: number; host: string; port: number }[];
  topics: { errorCode: number; name: string; partitions: { errorCode: number; partitionIndex: number; leaderId: number; leaderEpoch: number }[] }[];
};

export class BunkaCluster {
  /** Figures of every measureFailover, for the report. */
  readonly failovers: FailoverFigure[] = [];
  private readonly processes = new Map<number, BunkaProcess | undefined>();
  private readonly paused = new Set<number>();
  /** The etcd cluster when started with `etcdMembers`. */
  etcdCluster: EtcdCluster | undefined;
  private readonly etcdProxies = new Map<number, TcpProxy>();

  private constructor(
    readonly dir: string,
    readonly dataDir: string,
    readonly binary: string,
    readonly etcd: EtcdServer,
    /** Broker id -> its fixed Kafka port. */
    readonly ports: Map<number, number>,
    readonly sessionTimeoutMs: number,
    private readonly extraArgs: string[],
    private readonly ownDir: boolean,
  ) {}

  static async start(opts: BunkaClusterOptions): Promise<BunkaCluster> {
    const ownDir = opts.dir === undefined;
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "bunka-cluster-"));
    mkdirSync(dir, { recursive: true });
    const binary = opts.binary ?? (await privateBinaryCopy(dir));
    const sessionTimeoutMs = opts.sessionTimeoutMs ?? 3000;
    if (opts.etcdMembers !== undefined && opts.etcdProxies) throw new Error("etcdProxies is for a single etcd, not with etcdMembers");
    const etcdCluster = opts.etcdMembers === undefined ? undefined : await EtcdCluster.start(opts.etcdMembers);
    const etcd = etcdCluster?.member(0) ?? (await EtcdServer.start());
    const ports = new Map<number, number>();
    for (let id = 1; id <= opts.brokers; id++) ports.set(id, freePort());
    const cluster = new BunkaCluster(dir, join(dir, "shared-data"), binary, etcd, ports, sessionTimeoutMs, opts.extraArgs ?? [], ownDir);
    cluster.etcdCluster = etcdCluster;
    if (opts.etcdProxies) for (const id of ports.keys()) cluster.etcdProxies.set(id, TcpProxy.start(etcd.clientPort));
    for (let id = 1; id <= opts.brokers; id++) {
      writeFileSync(cluster.configFile(id), [`broker.session.timeout.ms=${sessionTimeoutMs}`, ...(opts.configLines ?? [])].join("\n") + "\n");
    }
    try {
      // One after the other: the first creates the cluster id file of the shared data directory.
      for (const id of ports.keys()) await cluster.startBroker(id);
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  /** Every broker id, live or not. */
  get ids(): number[] {
    return [...this.ports.keys()];
  }

  /** host:port of every broker (live or not), comma-separated: a bootstrap list valid across restarts. */
  get bootstrap(): string {
    return this.ids.map((id) => this.bootstrapOf(id)).join(",");
  }

  bootstrapOf(id: number): string {
    return `127.0.0.1:${this.port(id)}`;
  }

  port(id: number): number {
    const port = this.ports.get(id);
    if (port === undefined) throw new Error(`no broker ${id}`);
    return port;
  }

  logFile(id: number): string {
    return join(this.dir, `broker-${id}.log`);
  }

  configFile(id: number): string {
    return join(this.dir, `broker-${id}.properties`);
  }

  /** The running process of broker `id`, or undefined when it is stopped. */
  process(id: number): BunkaProcess | undefined {
    return this.processes.get(id);
  }

  /** Brokers whose process runs and is not paused. */
  liveIds(): number[] {
    return this.ids.filter((id) => this.processes.get(id) !== undefined && !this.paused.has(id));
  }

  isPaused(id: number): boolean {
    return this.paused.has(id);
  }

  /** The TcpProxy through which broker `id` reaches etcd (started with `etcdProxies`). */
  etcdProxy(id: number): TcpProxy {
    const proxy = this.etcdProxies.get(id);
    if (proxy === undefined) throw new Error(`broker ${id} has no etcd proxy (start the cluster with etcdProxies)`);
    return proxy;
  }

  /** What broker `id` is given as --etcd: its proxy, every member of the etcd cluster, or the etcd. */
  etcdEndpointsOf(id: number): string {
    const proxy = this.etcdProxies.get(id);
    if (proxy !== undefined) return proxy.endpoint;
    if (this.etcdCluster !== undefined) return this.etcdCluster.endpoints.join(",");
    return this.etcd.endpoint;
  }

  private async startBroker(id: number, env?: Record<string, string | undefined>): Promise<BunkaProcess> {
    if (this.processes.get(id) !== undefined) throw new Error(`broker ${id} is already running`);
    const process = await BunkaProcess.start({
      binary: this.binary,
      dataDir: this.dataDir,
      logFile: this.logFile(id),
      port: this.port(id),
      args: ["--broker-id", String(id), "--etcd", this.etcdEndpointsOf(id), "--config", this.configFile(id), ...this.extraArgs],
      // A broker killed -9 leaves its registration until its lease expires; the new process waits for that.
      startTimeoutMs: 60_000 + 3 * this.sessionTimeoutMs,
      bindRetryMs: 30_000,
      ...(env === undefined ? {} : { env }),
    });
    this.processes.set(id, process);
    void process.exited.then(() => {
      if (this.processes.get(id) === process) this.processes.set(id, undefined);
    });
    return process;
  }

  /** Sends `signal` to broker `id` (resumed first if paused, so that it can act on it) and waits for the exit; its code. */
  async kill(id: number, signal: NodeJS.Signals = "SIGKILL"): Promise<number> {
    const process = this.processes.get(id);
    if (process === undefined) throw new Error(`broker ${id} is not running`);
    if (this.paused.has(id) && signal !== "SIGKILL") this.resume(id);
    const code = await process.kill(signal);
    this.paused.delete(id);
    this.processes.set(id, undefined);
    return code;
  }

  /**
   * Starts broker `id` again (it must be stopped) on its port; resolves at its start-up line. `env`: changes
   * to its environment for this start only (test hooks such as BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP).
   */
  restart(id: number, opts: { env?: Record<string, string | undefined> } = {}): Promise<BunkaProcess> {
    return this.startBroker(id, opts.env);
  }

  /** SIGSTOP: the process keeps its sockets and its lease stops being renewed. */
  pause(id: number): void {
    const process = this.processes.get(id);
    if (process === undefined) throw new Error(`broker ${id} is not running`);
    globalThis.process.kill(process.pid, "SIGSTOP");
    this.paused.add(id);
  }

  resume(id: number): void {
    const process = this.processes.get(id);
    if (process === undefined) throw new Error(`broker ${id} is not running`);
    globalThis.process.kill(process.pid, "SIGCONT");
    this.paused.delete(id);
  }

  /** etcd stopped (SIGTERM) and started again on the same ports and data. */
  async restartEtcd(): Promise<void> {
    await this.etcd.restart();
  }

  // ---------------------------------------------------------------------------------------------
  // Requests

  /**
   * `fn` with a fresh connection to broker `id`, closed afterwards; fails after `timeoutMs` (a paused broker
   * accepts connections, its kernel does, and never answers: a caller must not hang on it).
   */
  async withClient<T>(id: number, fn: (client: WireClient) => Promise<T>, timeoutMs = 10_000): Promise<T> {
    const client = await WireClient.connect(this.port(id));
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`broker ${id} did not answer within ${timeoutMs} ms`)), timeoutMs)));
      return await Promise.race([fn(client), timeout]);
    } finally {
      clearTimeout(timer);
      client.close();
    }
  }

  /** Metadata v12 of `topics` from broker `id`. */
  metadata(id: number, topics: string[]): Promise<MetadataAnswer> {
    return this.withClient(id, (c) => c.request(3, 12, { topics: topics.map((name) => ({ name, topicId: ZERO_TOPIC_ID })), allowAutoTopicCreation: false }));
  }

  /** CreateTopics through broker `id` (default: the first live one); fails on any error but TOPIC_ALREADY_EXISTS when `existsOk`. */
  async createTopic(name: string, partitions: number, opts: { through?: number; configs?: Record<string, string>; existsOk?: boolean } = {}): Promise<void> {
    const through = opts.through ?? this.liveIds()[0]!;
    const configs = Object.entries(opts.configs ?? {}).map(([n, value]) => ({ name: n, value }));
    const res = await this.withClient(through, (c) =>
      c.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs }], timeoutMs: 30_000, validateOnly: false }),
    );
    const code = res.topics[0].errorCode as number;
    if (code !== ErrorCode.NONE && !(opts.existsOk && code === ErrorCode.TOPIC_ALREADY_EXISTS)) {
      throw new Error(`CreateTopics ${name} through broker ${through}: error ${code} ${res.topics[0].errorMessage ?? ""}`);
    }
  }

  /**
   * Waits until every live broker's Metadata lists exactly the live brokers, and names for every partition
   * of `topics` the same live leader (no partition error), and FindCoordinator of `coordinatorKeys` (group
   * and transaction keys) answers the same live broker from every live broker. Returns the leaders.
   */
  async waitForBalanced(topics: string[], opts: { timeoutMs?: number; coordinatorKeys?: string[] } = {}): Promise<PartitionLeaders> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const keys = opts.coordinatorKeys ?? ["balance-check-0", "balance-check-1", "balance-check-2", "balance-check-3"];
    const deadline = Date.now() + timeoutMs;
    let last = "nothing asked yet";
    for (;;) {
      try {
        const verdict = await this.balancedNow(topics, keys);
        if (typeof verdict !== "string") return verdict;
        last = verdict;
      } catch (error) {
        last = `a request failed: ${(error as Error).message}`;
      }
      if (Date.now() > deadline) throw new Error(`the cluster did not balance within ${timeoutMs} ms (live ${this.liveIds().join(",")}): ${last}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The leaders if the cluster is balanced now, else why not. */
  private async balancedNow(topics: string[], keys: string[]): Promise<PartitionLeaders | string> {
    const live = this.liveIds();
    if (live.length === 0) return "no live broker";
    let reference: Map<string, number> | undefined;
    let referenceCoordinators: string | undefined;
    for (const id of live) {
      const md = await this.metadata(id, topics);
      const listed = md.brokers.map((b) => b.nodeId).sort((a, b) => a - b);
      if (listed.join() !== live.join()) return `broker ${id} lists brokers [${listed}], live are [${live}]`;
      const leaders = new Map<string, number>();
      for (const t of md.topics) {
        if (t.errorCode !== 0) return `broker ${id}: topic ${t.name} error ${t.errorCode}`;
        for (const p of t.partitions) {
          if (p.errorCode !== 0) return `broker ${id}: ${t.name}-${p.partitionIndex} error ${p.errorCode}`;
          if (!live.includes(p.leaderId)) return `broker ${id}: ${t.name}-${p.partitionIndex} led by ${p.leaderId}, not live`;
          leaders.set(`${t.name}-${p.partitionIndex}`, p.leaderId);
        }
      }
      if (reference === undefined) reference = leaders;
      else if ([...leaders].join() !== [...reference].join()) return `brokers disagree on the leaders: ${[...reference]} vs broker ${id}: ${[...leaders]}`;
      const coordinators: string[] = [];
      for (const keyType of [0, 1]) {
        const res = await this.withClient(id, (c) => c.request(10, 4, { keyType, coordinatorKeys: keys }));
        for (const co of res.coordinators as { key: string; nodeId: number; errorCode: number }[]) {
          if (co.errorCode !== 0) return `broker ${id}: FindCoordinator(${keyType}, ${co.key}) error ${co.errorCode}`;
          if (!live.includes(co.nodeId)) return `broker ${id}: FindCoordinator(${keyType}, ${co.key}) names ${co.nodeId}, not live`;
          coordinators.push(`${keyType}:${co.key}=${co.nodeId}`);
        }
      }
      if (referenceCoordinators === undefined) referenceCoordinators = coordinators.join();
      else if (coordinators.join() !== referenceCoordinators) return `brokers disagree on coordinators: ${referenceCoordinators} vs broker ${id}: ${coordinators}`;
    }
    const shares = new Map<number, number>(live.map((id) => [id, 0]));
    for (const leader of reference!.values()) shares.set(leader, (shares.get(leader) ?? 0) + 1);
    return { leaders: reference!, shares };
  }

  /**
   * The first key `<prefix>-<i>` whose coordinator (FindCoordinator, keyType 0 group / 1 transaction, asked of
   * a live broker) is broker `owner`.
   */
  async keyCoordinatedBy(owner: number, keyType: 0 | 1, prefix: string): Promise<string> {
    const keys = Array.from({ length: 200 }, (_, i) => `${prefix}-${i}`);
    const res = await this.withClient(this.liveIds()[0]!, (c) => c.request(10, 4, { keyType, coordinatorKeys: keys }));
    const found = (res.coordinators as { key: string; nodeId: number; errorCode: number }[]).find((co) => co.errorCode === ErrorCode.NONE && co.nodeId === owner);
    if (found === undefined) throw new Error(`no key ${prefix}-0..199 of type ${keyType} is coordinated by broker ${owner}`);
    return found.key;
  }

  /** The group's stable committed offsets of `topic` (-1: none) from its coordinator, or null while unstable or unanswered. */
  async committedOffsets(group: string, topic: string, partitions: number): Promise<number[] | null> {
    for (const id of this.liveIds()) {
      try {
        const found = await this.withClient(id, (c) => c.request(10, 4, { keyType: 0, coordinatorKeys: [group] }));
        const coordinator = found.coordinators[0];
        if (coordinator.errorCode !== ErrorCode.NONE || !this.liveIds().includes(coordinator.nodeId)) return null;
        const res = await this.withClient(coordinator.nodeId, (c) =>
          c.request(9, 8, { groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: Array.from({ length: partitions }, (_, p) => p) }] }], requireStable: true }),
        );
        const g = res.groups[0];
        if (g.errorCode !== ErrorCode.NONE) return null;
        const out: number[] = [];
        for (const p of g.topics[0].partitions) {
          if (p.errorCode !== ErrorCode.NONE) return null;
          out[p.partitionIndex] = Number(p.committedOffset);
        }
        return out;
      } catch {
        /* a broker going away: ask another */
      }
    }
    return null;
  }

  /** The leader of a partition as a live broker names it (-1 when none does). */
  async leaderOf(topic: string, partition: number, askIds = this.liveIds()): Promise<number> {
    for (const id of askIds) {
      try {
        const md = await this.withClient(id, (c) => c.request<MetadataAnswer>(3, 12, { topics: [{ name: topic, topicId: ZERO_TOPIC_ID }], allowAutoTopicCreation: false }), 3000);
        const p = md.topics[0]?.partitions.find((x) => x.partitionIndex === partition);
        if (p !== undefined && p.errorCode === 0 && p.leaderId >= 0) return p.leaderId;
      } catch {
        /* try the next broker */
      }
    }
    return -1;
  }

  /** One Produce acks=-1 of a plain record to the partition through broker `id`; its error code. */
  async produceOnce(id: number, topic: string, partition: number, timeoutMs = 5000): Promise<number> {
    return await this.withClient(id, async (c) => {
      const res = await c.request(0, 11, {
        transactionalId: null,
        acks: -1,
        timeoutMs,
        topicData: [{ name: topic, partitionData: [{ index: partition, records: simpleBatch(1, { timestampMs: Date.now() }) }] }],
      });
      return res.responses[0].partitionResponses[0].errorCode as number;
    });
  }

  /**
   * Stops the partition's leader with `signal` and measures how long the partition stays unwritable: from the
   * signal to the first Produce acks=-1 answered NONE by the broker the others name as its new leader (asked
   * every 20 ms). The stopped broker is left stopped. The figure is kept in `failovers`.
   */
  async measureFailover(topic: string, partition: number, signal: "SIGKILL" | "SIGTERM", timeoutMs = 60_000): Promise<FailoverFigure> {
    const formerLeader = await this.leaderOf(topic, partition);
    if (formerLeader < 0) throw new Error(`${topic}-${partition} has no leader to stop`);
    const process = this.processes.get(formerLeader)!;
    const signalledMs = performance.now();
    process.proc.kill(signal);
    const exited = process.exited.then((code) => {
      this.processes.set(formerLeader, undefined);
      return code;
    });
    const others = this.liveIds().filter((id) => id !== formerLeader);
    const deadline = signalledMs + timeoutMs;
    let last = "";
    for (;;) {
      const leader = await this.leaderOf(topic, partition, others);
      if (leader >= 0 && leader !== formerLeader && others.includes(leader)) {
        try {
          const code = await this.produceOnce(leader, topic, partition, 2000);
          if (code === ErrorCode.NONE) {
            const figure: FailoverFigure = { topic, partition, signal, formerLeader, newLeader: leader, unavailableMs: Math.round(performance.now() - signalledMs) };
            this.failovers.push(figure);
            const code = await exited;
            if (signal === "SIGTERM" && code !== 0) throw new Error(`broker ${formerLeader} exited ${code} after SIGTERM`);
            return figure;
          }
          last = `produce through ${leader}: error ${code}`;
        } catch (error) {
          last = `produce through ${leader}: ${(error as Error).message}`;
        }
      } else last = `leader named ${leader}`;
      if (performance.now() > deadline) throw new Error(`${topic}-${partition} still unwritable ${timeoutMs} ms after ${signal} of broker ${formerLeader}: ${last}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /**
   * The whole partition (raw Fetch, read_uncommitted) from its leader, asked again while the leader moves or
   * answers a retriable error.
   */
  async readPartition(topic: string, partition: number, timeoutMs = 60_000): Promise<PartitionContents> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const leader = await this.leaderOf(topic, partition);
      let why = `no leader named`;
      if (leader >= 0 && this.liveIds().includes(leader)) {
        try {
          return await this.withClient(leader, (c) => readPartitionFully(c, topic, partition));
        } catch (error) {
          why = `reading from broker ${leader}: ${(error as Error).message}`;
        }
      }
      if (Date.now() > deadline) throw new Error(`could not read ${topic}-${partition} within ${timeoutMs} ms: ${why}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The last `lines` lines of every broker's log, for a failure message. */
  logTails(lines = 30): string {
    return this.ids
      .map((id) => {
        const file = this.logFile(id);
        const tail = existsSync(file) ? readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") : "(no log)";
        return `--- broker ${id} (${file}) ---\n${tail}`;
      })
      .join("\n");
  }

  /** `body`, with every broker's log tail added to any error it throws. */
  async withLogs<T>(body: () => Promise<T>, lines = 30): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof Error) {
        error.message += `\n${this.logTails(lines)}`;
        throw error;
      }
      throw new Error(`${String(error)}\n${this.logTails(lines)}`);
    }
  }

  /** SIGKILLs every broker (resumed first), stops etcd, removes the directory when it made it. */
  async close(): Promise<void> {
    for (const id of this.ids) {
      const process = this.processes.get(id);
      if (process === undefined) continue;
      try {
        globalThis.process.kill(process.pid, "SIGCONT");
      } catch {
        /* gone */
      }
      await process.kill("SIGKILL");
      this.processes.set(id, undefined);
    }
    this.paused.clear();
    for (const proxy of this.etcdProxies.values()) proxy.close();
    await this.etcd.close();
    await this.etcdCluster?.close();
    if (this.ownDir) removeTempDir(this.dir);
  }
}
