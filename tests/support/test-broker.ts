/**
 * An in-process broker on a real socket (port 0) over a temporary data directory, for wire and interop
 * tests. `restart()` closes and reopens it on the same data directory, as a process restart would.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBroker, type Broker } from "../../src/broker/broker.ts";
import type { GroupCoordinatorOptions } from "../../src/broker/group-coordinator.ts";
import { defaultBrokerConfig, type BrokerConfig } from "../../src/broker/config.ts";
import { startKafkaListener, type KafkaListener } from "../../src/net/kafka-listener.ts";
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
  } = {},
): Promise<TestBroker> {
  const dataDir = overrides.dataDir ?? mkdtempSync(join(tmpdir(), "bunka-test-"));
  const log = opts.log ?? (process.env.BUNKA_TEST_LOG ? createLogger({ format: "text", level: "debug" }) : silentLogger);
  const config: BrokerConfig = { ...defaultBrokerConfig(), listenPort: 0, httpPort: 0, ...overrides, dataDir };
  let port = 0;

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
    });
    const listener = await startKafkaListener({
      host: config.listenHost,
      port,
      maxRequestBytes: config.socketRequestMaxBytes,
      idleTimeoutMs: config.connectionsMaxIdleMs,
      maxHeldResponseBytesPerConnection: config.maxHeldResponseBytesPerConnection,
      maxHeldResponseBytes: config.maxHeldResponseBytes,
      dispatch: (frame, conn) => broker.dispatch(frame, conn),
      log,
    });
    port = listener.port;
    broker.setAdvertisedListener(listener.host, listener.port);
    return { broker, listener };
  };

  let current = await start();
  const handle: TestBroker = {
    port,
    bootstrap: `127.0.0.1:${port}`,
    dataDir,
    broker: current.broker,
    listener: current.listener,
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
