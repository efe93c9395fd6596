/**
 * The SASL numbers in /metrics (BrokerQueryPorts over a real broker, in-memory Fs, manual clock):
 * authentications and failures by mechanism, a mechanism the client made up counted under "".
 */
import { afterEach, expect, test } from "bun:test";
import { createBroker, type Broker } from "../../../src/broker/broker.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { ANONYMOUS_PRINCIPAL } from "../../../src/domain/security/connection-security.ts";
import { BrokerQueryPorts } from "../../../src/http/broker-ports.ts";
import { BrokerMetrics } from "../../../src/http/metrics.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { plainToken } from "../../support/sasl-client.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const brokers: Broker[] = [];
afterEach(async () => {
  for (const b of brokers.splice(0)) await b.close();
});

test("metrics: SASL authentications and failures by mechanism", async () => {
  const clock = new ManualClock();
  const fs = new MemoryFs();
  const h = await fs.open("/users", "w");
  await h.write(new TextEncoder().encode("alice=pw\n"));
  await h.close();
  const config = { ...defaultBrokerConfig(), dataDir: "/data", listenPort: 0, httpPort: 0, saslEnabledMechanisms: ["PLAIN", "SCRAM-SHA-256"], saslPlainUsersFile: "/users", connectionFailedAuthenticationDelayMs: 0 };
  const broker = await createBroker({ config, fs, clock, log: silentLogger, maintenance: false });
  brokers.push(broker);
  const ports = new BrokerQueryPorts({ broker, metrics: new BrokerMetrics(), version: "0.0.0-test", nowMs: () => clock.nowMs(), startedAtMs: 0 });
  const sasl = broker.services.sasl;
  const conn = () => ({ id: 1, remoteAddress: "x", close() {}, security: { listenerName: "SASL", securityProtocol: "SASL_PLAINTEXT" as const, principal: ANONYMOUS_PRINCIPAL, authenticated: false } });

  const ok = conn();
  await sasl.handshake("PLAIN", 1, ok);
  await sasl.authenticate(plainToken("alice", "pw"), ok);
  const wrong = conn();
  await sasl.handshake("PLAIN", 1, wrong);
  await sasl.authenticate(plainToken("alice", "nope"), wrong);
  await sasl.handshake("MADE-UP", 1, conn());

  const text = await ports.metrics();
  for (const line of [
    'bunka_sasl_authentications_total{mechanism="PLAIN"} 1',
    'bunka_sasl_authentications_total{mechanism="SCRAM-SHA-256"} 0',
    'bunka_sasl_authentication_failures_total{mechanism="PLAIN"} 1',
    'bunka_sasl_authentication_failures_total{mechanism=""} 1',
    "bunka_sasl_expired_sessions_closed_total 0",
  ]) {
    expect(text).toContain(line);
  }
  expect(text).not.toContain("MADE-UP");
});
