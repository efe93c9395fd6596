/**
 * An in-process broker on a real socket (port 0) over a temporary data directory, for wire and interop
 * tests. `restart()` closes and reopens it on the same data directory, as a process restart would.
 *
 * Listeners: the overrides may set `listeners`, `listener.security.protocol.map`, `ssl.*` and the rest
 * (BrokerConfig's fields), resolved as `bunka serve` resolves them (port 0 everywhere); `ports` names each
 * bound port, `reloadTls()` checks the PEM files for changes now instead of waiting for a poll.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker, type BrokerDeps } from "../../src/broker/broker.ts";
import type { GroupCoordinatorOptions } from "../../src/broker/group-coordinator.ts";
import { defaultBrokerConfig, type BrokerConfig } from "../../src/broker/config.ts";
import { interBrokerListener, resolveListeners } from "../../src/broker/listener-config.ts";
import { startKafkaListener, type KafkaListener } from "../../src/net/kafka-listener.ts";
import { type TlsFileReader, TlsMaterialSource } from "../../src/net/tls-material.ts";
import { systemClock, type Clock } from "../../src/platform/clock.ts";
import type { Fs } from "../../src/platform/fs.ts";
import { silentLogger, createLogger, type Logger } from "../../src/platform/logger.ts";
import { nodeFs } from "../../src/platform/node-fs.ts";

export interface TestBroker {
  port: number;
  bootstrap: string;
  dataDir: string;
  broker: Broker;
  listener: KafkaListener;
  /** Each listener's bound port, by name (PLAINTEXT alone without `listeners`). */
  ports: Record<string, number>;
  /** Checks every TLS listener's files now; true when one took new material. */
  reloadTls(): boolean;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTestBroker(
  overrides: Partial<BrokerConfig> = {},
  opts: {
    fs?: Fs;
    clock?: Clock;
    log?: Logger;
    keepDataDir?: boolean;
    groups?: GroupCoordinatorOptions;
    /** false: the broker's own log cleaner never runs a round by itself (the test runs them). */
    cleaner?: false;
    /** false: the cleaner's passes run on the event loop even on the real file system. */
    cleanerThreads?: false;
    /** BrokerDeps.transactionVerifier: replaces or wraps what the partitions ask (a SwappableVerifier's `wrap`). */
    transactionVerifier?: BrokerDeps["transactionVerifier"];
  } = {},
): Promise<TestBroker> {
  const dataDir = overrides.dataDir ?? mkdtempSync(join(tmpdir(), "bunka-test-"));
  const log = opts.log ?? (process.env.BUNKA_TEST_LOG ? createLogger({ format: "text", level: "debug" }) : silentLogger);
  const config: BrokerConfig = { ...defaultBrokerConfig(), listenPort: 0, httpPort: 0, ...overrides, dataDir };
  const tlsFiles: TlsFileReader = {
    readText: (path) => readFileSync(path, "utf8"),
    version: (path) => {
      const stat = statSync(path);
      return `${stat.mtimeMs}:${stat.size}`;
    },
  };
  const listeners = resolveListeners(config);
  const inter = interBrokerListener(listeners, config, false);
  // Each listener keeps its port across restarts (port 0 only the first time).
  const ports: Record<string, number> = Object.fromEntries(listeners.map((l) => [l.name, l.port]));
  let port = 0;
  let tlsSources: TlsMaterialSource[] = [];

  const start = async () => {
    const broker = await createBroker({
      config: { ...config, listenPort: port },
      fs: opts.fs ?? nodeFs,
      clock: opts.clock ?? systemClock,
      log,
      groups: opts.groups,
      ...(opts.cleaner === false ? { cleaner: false as const } : {}),
      // On the real file system the cleaner runs on its threads, as in the binary.
      cleanerThreads: opts.fs === undefined && opts.cleanerThreads !== false,
      ...(opts.transactionVerifier === undefined ? {} : { transactionVerifier: opts.transactionVerifier }),
    });
    tlsSources = [];
    const listener = await startKafkaListener({
      endpoints: listeners.map((l) => {
        const tls = l.tls === undefined ? undefined : new TlsMaterialSource(l.name, l.tls, tlsFiles, log);
        if (tls !== undefined) tlsSources.push(tls);
        return { name: l.name, securityProtocol: l.securityProtocol, host: l.host, port: ports[l.name]!, ...(tls === undefined ? {} : { tls }) };
      }),
      tlsHandshakeTimeoutMs: config.sslHandshakeTimeoutMs,
      maxRequestBytes: config.socketRequestMaxBytes,
      idleTimeoutMs: config.connectionsMaxIdleMs,
      maxHeldResponseBytesPerConnection: config.maxHeldResponseBytesPerConnection,
      maxHeldResponseBytes: config.maxHeldResponseBytes,
      dispatch: (frame, conn) => broker.dispatch(frame, conn),
      log,
    });
    for (const bound of listener.endpoints()) ports[bound.name] = bound.port;
    const advertised = listener.endpoints().map((bound, i) => ({
      name: bound.name,
      host: listeners[i]!.advertisedHost ?? bound.host,
      port: listeners[i]!.advertisedPort ?? bound.port,
    }));
    const interAdvertised = advertised.find((a) => a.name === inter.name)!;
    port = listener.port;
    broker.setAdvertisedListener(interAdvertised.host, interAdvertised.port, advertised);
    return { broker, listener };
  };

  let current = await start();
  const handle: TestBroker = {
    port,
    bootstrap: `127.0.0.1:${port}`,
    dataDir,
    broker: current.broker,
    listener: current.listener,
    ports,
    reloadTls: () => tlsSources.map((source) => source.checkForChanges()).some(Boolean),
    async restart() {
      await current.listener.close();
      await current.broker.close();
      current = await start();
      handle.broker = current.broker;
      handle.listener = current.listener;
    },
    async stop() {
      await current.listener.close();
      await current.broker.close();
      if (!opts.keepDataDir && !overrides.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return handle;
}
