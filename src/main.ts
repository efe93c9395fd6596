#!/usr/bin/env bun
/**
 * The composition root: the only place that constructs the real platform implementations (logger, clock,
 * file system) and wires the broker to its listeners. Everything below takes these as arguments.
 *
 * Process contract (also in `bunka serve --help`):
 * - start-up prints one line on stdout naming every bound address, for people and for scripts that start
 *   the broker with port 0;
 * - SIGTERM / SIGINT: stop accepting, answer in-flight requests, close the broker, exit 0; a second signal
 *   exits at once with 130; in cluster mode the etcd lease is revoked last, which deregisters the broker.
 *   The handlers exist from the first moment of serve(): a signal during recovery exits 0 at once (as
 *   safe as a crash), one while the listeners are being bound closes what is open (stop-signals.ts);
 * - a listen address that is taken or not this machine's prints one line naming the listener and the
 *   address, and exits 2, before recovery (checked first, and again by the real bind);
 * - cluster mode (--etcd) that cannot start (etcd unreachable, the broker id held by another live
 *   process) prints one line and exits 2, before recovery when it can;
 * - a FatalError (a broken invariant, a failed fsync) anywhere is logged and exits 1: recovery runs at the
 *   next start, which is safer than going on with state we cannot trust.
 */
import { crc32cImplementation } from "./protocol/records/crc32c.ts";
import { readFileSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { createBroker } from "./broker/broker.ts";
import type { BrokerConfig } from "./broker/config.ts";
import { type ClusterMetadata, startClusterMetadata } from "./broker/metadata-mutations.ts";
import { ClusterMember, startupFailure } from "./cluster/cluster-member.ts";
import { ENDTXN_PHASES } from "./broker/txn-coordinator.ts";
import { EtcdWaker } from "./cluster/waker.ts";
import { runCli } from "./cli/run.ts";
import { VERSION } from "./cli/help.ts";
import { FatalError } from "./errors/errors.ts";
import { systemClock } from "./platform/clock.ts";
import { type Logger, createLogger } from "./platform/logger.ts";
import { StopSignals } from "./platform/stop-signals.ts";
import { BatchedSync, SYNCFS_MIN_FILES } from "./platform/batched-sync.ts";
import { createNodeFs, nodeFs } from "./platform/node-fs.ts";
import { startSyncfsSyncer, type WorkerSyncer } from "./platform/syncfs-worker.ts";
import { type KafkaListener, startKafkaListener } from "./net/kafka-listener.ts";
import { formatHostPort } from "./errors/listen-errors.ts";
import { checkCanListen } from "./net/listen-check.ts";
import { httpTlsSettings, interBrokerListener, resolveListeners } from "./broker/listener-config.ts";
import { loadTlsMaterial, type TlsFileReader, TlsMaterialSource, TlsReloader } from "./net/tls-material.ts";
import { createHttpApp } from "./http/app.ts";
import { BrokerQueryPorts } from "./http/broker-ports.ts";
import { systemTimers } from "./platform/timers.ts";
import { timedFs } from "./http/fs-timing.ts";
import { BrokerMetrics, meteredDispatch } from "./http/metrics.ts";
import { type HttpServer, startHttpServer } from "./http/server.ts";
import type { Fs } from "./platform/fs.ts";
import type { Clock } from "./platform/clock.ts";
import { loadOrCreateClusterMeta } from "./storage/cluster-meta.ts";

/** Replaced by the configured logger once serve() has built it; until then fatal errors are logged as text. */
let processLog: Logger = createLogger({ format: "text", level: "info" });

function describeError(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { error: `${error.name}: ${error.message}`, stack: error.stack };
  return { error: String(error) };
}

function exitFatal(error: unknown): never {
  processLog.error(error instanceof FatalError ? "fatal error, exiting" : "uncaught error, exiting", describeError(error));
  process.exit(1);
}

process.on("uncaughtException", exitFatal);
process.on("unhandledRejection", exitFatal);

/** The PEM files of the TLS listeners and the side-port, read with node's fs; a change is a new mtime or size. */
const tlsFiles: TlsFileReader = {
  readText: (path) => readFileSync(path, "utf8"),
  version: (path) => {
    const stat = statSync(path);
    return `${stat.mtimeMs}:${stat.size}`;
  },
};

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "";
}

/**
 * Bun runs blocking file work (every fsync) on a thread pool of one thread per core unless the environment
 * variable UV_THREADPOOL_SIZE, read once when the process starts, says otherwise. One thread per core is
 * right for CPU work and wrong for fsync, which mostly waits on the device: on a 2-core machine two fsyncs
 * at a time cap the whole broker at ~6,000 fsyncs/s however many partitions wait, while the same disk does
 * ~18,000/s with 16 threads. So `serve` re-executes itself once (same pid, arguments and environment) with
 * UV_THREADPOOL_SIZE=16 when the variable is unset; an operator's own value is kept as it is.
 */
const IO_THREADS_DEFAULT = 16;

function reexecWithIoThreads(): void {
  if (process.env.UV_THREADPOOL_SIZE !== undefined || typeof process.execve !== "function") return;
  // A compiled executable carries its entry point inside; `bun src/main.ts` needs the script and Bun's flags.
  const compiled = Bun.main.startsWith("/$bunfs/");
  const argv = compiled
    ? [process.execPath, ...process.argv.slice(2)]
    : [process.execPath, ...process.execArgv, Bun.main, ...process.argv.slice(2)];
  try {
    process.execve(process.execPath, argv, { ...process.env, UV_THREADPOOL_SIZE: String(IO_THREADS_DEFAULT) });
  } catch (error) {
    // Not fatal: the broker works with Bun's default pool, only with fewer fsyncs at a time.
    processLog.warn("could not re-execute with more I/O threads; running with Bun's default pool", describeError(error));
  }
}

/**
 * fsync.mode=batched: the syncfs worker for the data directory's file system, or undefined (with a warning
 * naming the reason) when this platform or file system cannot have one; the broker then fsyncs file by file.
 */
async function startBatchedSync(dataDir: string, log: Logger): Promise<WorkerSyncer | undefined> {
  try {
    // The data directory is checked before serve() runs, but may not exist yet.
    await nodeFs.mkdirp(dataDir);
    const start = await startSyncfsSyncer(dataDir);
    if (start.syncer !== undefined) return start.syncer;
    log.warn("fsync.mode=batched is not available here; fsyncing file by file", { reason: start.reason });
  } catch (error) {
    log.warn("fsync.mode=batched is not available here; fsyncing file by file", describeError(error));
  }
  return undefined;
}

/**
 * Cluster mode's first step: the cluster id from the data directory (the directory is the cluster), then
 * etcd reached and this broker id found free. Before createBroker, so that a broker that cannot join
 * says so at once rather than after recovering every partition.
 */
async function connectToCluster(config: BrokerConfig, endpoints: readonly string[], fs: Fs, clock: Clock, log: Logger): Promise<ClusterMember> {
  const { clusterId } = await loadOrCreateClusterMeta(fs, config.dataDir, clock.nowMs());
  return await ClusterMember.connect({ endpoints, clusterId, brokerId: config.brokerId, sessionTimeoutMs: config.brokerSessionTimeoutMs, clock, log });
}

async function serve(config: BrokerConfig): Promise<number> {
  reexecWithIoThreads();
  const log = createLogger({ format: config.logFormat, level: config.logLevel });
  processLog = log;
  // First thing after the logger: from here to the exit, one signal stops the broker (stop-signals.ts).
  const signals = new StopSignals({ log, on: (signal, handler) => void process.on(signal, handler), exit: (code) => process.exit(code) });
  signals.install();
  const clock = systemClock;
  const startedAtMs = clock.nowMs();
  // Metrics are recorded from here on: every fsync the broker makes is timed, every request counted.
  const metrics = new BrokerMetrics();
  // A port that is taken is said now, in one line with exit 2, not after recovering every partition.
  const listeners = resolveListeners(config);
  const interListener = interBrokerListener(listeners, config, config.etcdEndpoints !== undefined);
  const listenerLabel = (name: string) => (listeners.length === 1 && name === "PLAINTEXT" ? "the Kafka listener" : `the Kafka listener ${name}`);
  for (const l of listeners) checkCanListen(listenerLabel(l.name), l.host, l.port);
  checkCanListen("the HTTP side-port", config.httpHost, config.httpPort);
  // The TLS files too, and now: a missing or broken keystore is one line with exit 2 before recovery.
  const tlsSources = new Map(listeners.flatMap((l) => (l.tls === undefined ? [] : [[l.name, new TlsMaterialSource(l.name, l.tls, tlsFiles, log)] as const])));
  const httpTls = httpTlsSettings(config.httpSsl);
  const httpTlsMaterial = httpTls === undefined ? undefined : loadTlsMaterial(httpTls, tlsFiles);
  const syncfs = config.fsyncMode === "batched" ? await startBatchedSync(config.dataDir, log) : undefined;
  const batched =
    syncfs === undefined
      ? undefined
      : new BatchedSync({
          syncer: syncfs,
          minFilesForSyncfs: SYNCFS_MIN_FILES,
          onBatch: (method, files) => metrics.onFsyncBatch(method, files),
        });
  const fs = timedFs(createNodeFs(batched), clock.monotonicMs, (kind, durationMs) => metrics.onFsync(kind, durationMs));
  let member: ClusterMember | undefined;
  if (config.etcdEndpoints !== undefined) {
    try {
      member = await connectToCluster(config, config.etcdEndpoints, fs, clock, log);
    } catch (error) {
      syncfs?.close();
      throw error;
    }
  }
  const clusterMember = member;
  // Cluster mode: markers, fences and offset completions queued on the shared volume wake their target
  // broker at once through etcd (the queues' polls stay as the fallback).
  let waker: EtcdWaker | undefined;
  if (clusterMember !== undefined) {
    try {
      waker = await EtcdWaker.open({ client: clusterMember.etcd, clusterId: clusterMember.clusterId, selfId: config.brokerId, log, nowMs: clock.nowMs });
    } catch (error) {
      await clusterMember.leave();
      syncfs?.close();
      throw startupFailure(error, clusterMember.endpoints);
    }
  }

  // Test hook (tests/interop/transactions-java.test.ts, tests/cluster/endtxn-step-kills.test.ts): die by SIGKILL
  // once the first EndTxn gets past the named phase (prepare, offsets, markers, complete), to test the recovery
  // of a crash in that window. Read here only, never deeper.
  const crashAfterPhase = process.env.BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP;
  if (crashAfterPhase !== undefined && !(ENDTXN_PHASES as readonly string[]).includes(crashAfterPhase)) {
    throw new Error(`BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP must be one of ${ENDTXN_PHASES.join(", ")}`);
  }
  if (crashAfterPhase !== undefined) log.warn(`BUNKA_TEST_CRASH_AFTER_ENDTXN_STEP=${crashAfterPhase}: this process kills itself after that step of the first EndTxn`);
  // Test hook (tests/fault/endtxn-answered-crash.test.ts): the first EndTxn decision is answered and its
  // markers are never written by this process, so that the test can SIGKILL it in that window.
  const holdAfterAnswer = process.env.BUNKA_TEST_HOLD_AFTER_ENDTXN_ANSWER === "1";
  if (holdAfterAnswer) log.warn("BUNKA_TEST_HOLD_AFTER_ENDTXN_ANSWER=1: the first answered EndTxn decision never gets its markers from this process");
  let heldOne = false;
  const txnHooks = {
    ...(crashAfterPhase !== undefined
      ? {
          afterEndTxnStep: (phase: string) => {
            if (phase === crashAfterPhase) process.kill(process.pid, "SIGKILL");
          },
        }
      : {}),
    ...(holdAfterAnswer
      ? {
          afterEndTxnAnswered: (transactionalId: string) => {
            if (heldOne) return Promise.resolve();
            heldOne = true;
            log.warn("test hook: holding the markers of an answered EndTxn", { transactionalId });
            return new Promise<void>(() => undefined);
          },
        }
      : {}),
  };
  const broker = await createBroker({
    config,
    fs,
    clock,
    log,
    observer: metrics,
    txnObserver: metrics,
    cleanerThreads: true,
    ...(crashAfterPhase !== undefined || holdAfterAnswer ? { txn: txnHooks } : {}),
    ...(clusterMember === undefined ? {} : { liveBrokers: () => clusterMember.liveBrokers() }),
    ...(waker === undefined ? {} : { waker }),
    // Large data directories take a while to recover: say how far it got, about every 10% and at the end.
    onRecoveryProgress: (done, total) => {
      if (done === total || done % Math.max(1, Math.ceil(total / 10)) === 0) log.info("recovering partitions", { done, total });
    },
  });
  signals.opening();

  // What start-up has opened so far, closed in this order by a shutdown: a signal while the listeners are
  // being bound stops the broker with whatever of them exists.
  let kafka: KafkaListener | undefined;
  let tlsReloader: TlsReloader | undefined;
  let http: HttpServer | undefined;
  let queryPorts: BrokerQueryPorts | undefined;
  let metadata: ClusterMetadata | undefined;
  let resolveStopped!: (exitCode: number) => void;
  const stopped = new Promise<number>((resolve) => (resolveStopped = resolve));
  const shutdown = (why: Record<string, unknown>, exitCode: number) => {
    signals.markStopping();
    log.info("shutting down", why);
    // /ready turns 503 first, so that load balancers stop sending work while the rest shuts down.
    queryPorts?.markStopping();
    (async () => {
      // Cluster mode: everything this broker owns is closed and released while the listener still
      // answers, so its clients get NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR, find the new owners and
      // go on there, instead of waiting out the lease.
      await clusterMember?.stopOwnership({ handOver: true });
      tlsReloader?.stop();
      await kafka?.close();
      await http?.close();
      await metadata?.close();
      await broker.close();
      await waker?.close();
      // Last: everything the broker did under its lease is done and durable. The revocation removes
      // the registration at once, so the other brokers drop this one now rather than after the TTL.
      await clusterMember?.leave();
      // Only now: the broker's last writes still go through it.
      syncfs?.close();
    })().then(
      () => {
        log.info("stopped");
        resolveStopped(exitCode);
      },
      (error: unknown) => {
        if (error instanceof FatalError) exitFatal(error);
        log.error("shutdown failed", describeError(error));
        resolveStopped(1);
      },
    );
  };
  /** Start-up is over, or cut short by a signal: the shutdown runs on the next signal, or now. */
  const stopIfAsked = (): boolean => {
    if (signals.requested === undefined) return false;
    signals.serve((why) => shutdown(why, 0));
    return true;
  };

  try {
    kafka = await startKafkaListener({
      endpoints: listeners.map((l) => {
        const tls = tlsSources.get(l.name);
        return { name: l.name, securityProtocol: l.securityProtocol, host: l.host, port: l.port, ...(tls === undefined ? {} : { tls }) };
      }),
      tlsHandshakeTimeoutMs: config.sslHandshakeTimeoutMs,
      maxRequestBytes: config.socketRequestMaxBytes,
      idleTimeoutMs: config.connectionsMaxIdleMs,
      maxConnections: config.maxConnections,
      maxHeldResponseBytesPerConnection: config.maxHeldResponseBytesPerConnection,
      maxHeldResponseBytes: config.maxHeldResponseBytes,
      dispatch: meteredDispatch((frame, conn) => broker.dispatch(frame, conn), metrics),
      // Malformed input costs the client its connection (the listener logs it, rate-limited); a FatalError
      // costs the process its life.
      onConnectionError: (error) => {
        if (error instanceof FatalError) exitFatal(error);
      },
      log,
    });
  } catch (error) {
    // The port was free a moment ago (checkCanListen) and was taken since: the broker closes cleanly.
    await broker.close();
    await waker?.close();
    await clusterMember?.leave();
    syncfs?.close();
    throw error;
  }
  if (stopIfAsked()) return await stopped;
  // A wildcard bind is not an address a client can dial: advertise the host name instead, like Apache does
  // for a listener without a host.
  const advertisedListeners = kafka.endpoints().map((bound, i) => ({
    name: bound.name,
    host: listeners[i]!.advertisedHost ?? (isWildcard(bound.host) ? hostname() : bound.host),
    port: listeners[i]!.advertisedPort ?? bound.port,
  }));
  const interAdvertised = advertisedListeners.find((l) => l.name === interListener.name)!;
  const advertisedHost = interAdvertised.host;
  const advertisedPort = interAdvertised.port;
  broker.setAdvertisedListener(advertisedHost, advertisedPort, advertisedListeners);
  // New certificates for new connections when the PEM files change: polled, and at once on SIGHUP.
  tlsReloader = new TlsReloader([...tlsSources.values()]);
  tlsReloader.start(config.sslReloadCheckIntervalMs);
  if (tlsSources.size > 0) process.on("SIGHUP", () => tlsReloader.checkNow());

  // The HTTP side-port: health, readiness, metrics and read-only introspection. Write routes exist only
  // with an admin token, which comes from the environment alone (never a flag: flags show in `ps`).
  queryPorts = new BrokerQueryPorts({
    broker,
    metrics,
    version: VERSION,
    nowMs: clock.nowMs,
    startedAtMs,
    ...(clusterMember === undefined ? {} : { cluster: clusterMember }),
  });
  queryPorts.setListener(kafka);
  // The dashboard's history: one sample a second from now on, five minutes kept (http/live-samples.ts).
  queryPorts.startLive(systemTimers);
  const adminToken = process.env.BUNKA_ADMIN_TOKEN || undefined;
  const app = createHttpApp(queryPorts, {
    ...(adminToken === undefined ? {} : { adminToken }),
    ...(config.httpReadsNeedToken ? { readsNeedToken: true } : {}),
    // The names the side-port goes by; a Host header naming another is refused (DNS rebinding).
    allowedHostNames: [...config.httpAllowedHosts, config.httpHost, ...new Set(advertisedListeners.map((l) => l.host)), hostname()],
    onError: (error, method, path) => log.error("http request failed", { method, path, ...describeError(error) }),
  });
  try {
    http = startHttpServer({ host: config.httpHost, port: config.httpPort, fetch: app.fetch, log, ...(httpTlsMaterial === undefined ? {} : { tls: httpTlsMaterial.options }) });
  } catch (error) {
    await kafka.close();
    await broker.close();
    await waker?.close();
    await clusterMember?.leave();
    syncfs?.close();
    throw error;
  }
  const httpAdvertisedHost = isWildcard(http.host) ? hostname() : http.host;
  queryPorts.setHttpAddress(httpAdvertisedHost, http.port);

  // Cluster mode's second step, now that both addresses are known: the lease, the registration under it,
  // the directory of live brokers.
  if (clusterMember !== undefined) {
    try {
      await clusterMember.join({
        brokerId: config.brokerId,
        kafka: { host: advertisedHost, port: advertisedPort },
        listeners: advertisedListeners,
        http: { host: httpAdvertisedHost, port: http.port },
        rack: null,
      });
    } catch (error) {
      await kafka.close();
      await http.close();
      await broker.close();
      await waker?.close();
      await clusterMember.leave();
      syncfs?.close();
      throw error;
    }
    // Another process registered this broker id while this one's lease had lapsed: it must not go on
    // as that broker. Exit 2, as for the same conflict at start.
    clusterMember.onFailed((error) => {
      if (signals.isStopping) return;
      log.error("leaving the cluster: this broker id is taken", { error: error.message });
      shutdown({ reason: "broker id taken" }, 2);
    });
    // Topic and broker-config changes go through the cluster's gate, and every broker reads the others'.
    metadata = await startClusterMetadata({ client: clusterMember.etcd, clusterId: broker.services.clusterId, lease: () => clusterMember.status().lease, services: broker.services });
    await metadata.mutations.run("start-up clean-up of half-done topic changes", () => broker.services.topics.cleanUpOrphans());
    // Registered: now this broker claims its share of the partitions and coordinator slots.
    const owned = broker.owned!;
    const manager = await clusterMember.startOwnership({
      host: owned,
      resources: (kind) => owned.resources(kind),
      onMove: (move) => metrics.onOwnershipMove(move),
    });
    broker.useOwnership(manager);
    // A topic created, grown or deleted (here or by another broker) changes what there is to own.
    broker.services.topics.onTopicsChanged(() => manager.changed());
  }
  if (stopIfAsked()) return await stopped;
  // Before the start-up line announces the broker: a script that sends SIGTERM as soon as it reads the
  // line gets a clean shutdown.
  signals.serve((why) => shutdown(why, 0));

  const clusterStatus = clusterMember?.status();
  const memberIds = clusterStatus?.members.map((m) => m.brokerId) ?? [];
  // With listeners set, every one of them, after the fields scripts already read.
  const listenersPart = config.listeners === undefined ? "" : ` listeners=${kafka.endpoints().map((e) => `${e.name}://${formatHostPort(e.host, e.port)}`).join(",")}`;
  const clusterPart = clusterStatus === undefined ? "" : ` mode=cluster etcd=${clusterStatus.endpoints.join(",")} members=${memberIds.join(",")}`;
  process.stdout.write(
    `bunka ${VERSION} listening kafka=${formatHostPort(kafka.host, kafka.port)} http=${formatHostPort(http.host, http.port)} data=${config.dataDir} broker=${config.brokerId}${clusterPart}${listenersPart}\n`,
  );
  const crc32c = crc32cImplementation();
  log.info("started", {
    mode: clusterStatus === undefined ? "single" : "cluster",
    ...(clusterStatus === undefined ? {} : { clusterId: broker.services.clusterId, etcd: clusterStatus.endpoints.join(","), members: memberIds }),
    version: VERSION,
    kafka: formatHostPort(kafka.host, kafka.port),
    http: formatHostPort(http.host, http.port),
    adminApi: adminToken !== undefined,
    advertised: formatHostPort(advertisedHost, advertisedPort),
    dataDir: config.dataDir,
    brokerId: config.brokerId,
    crc32c: crc32c.name,
    ...(crc32c.reason === undefined ? {} : { crc32cSoftwareBecause: crc32c.reason }),
  });

  return await stopped;
}

const code = await runCli(process.argv.slice(2), {
  env: process.env,
  readFile: (path) => readFileSync(path, "utf8"),
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  fs: nodeFs,
  serve,
  fetch: (url, init) => fetch(url, init),
});
process.exit(code);
