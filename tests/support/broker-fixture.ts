/**
 * The set-up many wire and interop test files share: an in-process broker (startTestBroker) and a
 * WireClient connected to it, started in beforeAll and closed in afterAll. `use` receives them once both
 * are up, to keep them in the file's own variables:
 *
 *   let broker: TestBroker;
 *   let client: WireClient;
 *   startBrokerAndClient({ autoCreateTopicsEnable: false }, (b, c) => ((broker = b), (client = c)), TIMEOUT);
 */
import { afterAll, beforeAll } from "bun:test";
import type { BrokerConfig } from "../../src/broker/config.ts";
import { startTestBroker, type TestBroker } from "./test-broker.ts";
import { WireClient } from "./wire-client.ts";

export function startBrokerAndClient(
  overrides: Partial<BrokerConfig>,
  use: (broker: TestBroker, client: WireClient) => void,
  timeoutMs?: number,
  /** startTestBroker's options (a SwappableVerifier's `wrap`, ...). */
  opts?: Parameters<typeof startTestBroker>[1],
): void {
  let broker: TestBroker | undefined;
  let client: WireClient | undefined;
  beforeAll(async () => {
    broker = await startTestBroker(overrides, opts);
    client = await WireClient.connect(broker.port);
    use(broker, client);
  }, timeoutMs);
  afterAll(async () => {
    client?.close();
    await broker?.stop();
  });
}
