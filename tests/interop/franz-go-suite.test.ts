/**
 * franz-go's own integration tests against bunka: pkg/kgo's test suite at the version tests/interop/go/go.mod
 * pins, compiled by scripts/install-interop-clients.sh from the Go module cache (`go test -c`), run with the
 * environment its helpers_test.go reads against an in-process bunka with a PLAINTEXT listener and a
 * SASL_PLAINTEXT one serving SCRAM-SHA-256 and SCRAM-SHA-512:
 *
 * - KGO_TEST_SCRAM_SEEDS (the SASL listener) and KGO_TEST_SCRAM ("user:pass", ":512" for SHA-512) for the
 *   SCRAM tests, once per mechanism, each with a user that has only that mechanism's credential (made with
 *   AlterUserScramCredentials);
 * - KGO_SEEDS for the integration tests. In this version every other test's client is built by
 *   `testClientOpts`, which adds the seeds and TLS (KGO_TEST_TLS) but never SASL: pointed at the SASL
 *   listener they would not authenticate, so they run over PLAINTEXT, and only the SCRAM tests use SASL.
 * - KGO_TEST_RF=1 (bunka keeps one copy of each partition), KGO_TEST_RECORDS small enough for a busy
 *   2-core machine.
 *
 * A run counts only when each test named below reports PASS in `-test.v`'s output: a skipped test checked
 * nothing, and a test renamed or removed in a newer franz-go would otherwise go unnoticed.
 *
 * FRANZ_GO_REFERENCE=1 also runs the same against Apache Kafka 4.1.1 configured alike ("[reference]" tests),
 * to check that the list below passes there too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { saltedPassword, scramMechanism } from "../../src/domain/security/scram.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { ensureKafkaLibs, freePort, startApacheKafka, type ApacheKafka } from "../support/apache-kafka.ts";
import { ensureInteropClients, FRANZ_GO_KGO_TESTS } from "../support/interop-clients.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const REFERENCE = process.env.FRANZ_GO_REFERENCE === "1";
/** The go test binary's own deadline: past it, it panics with every goroutine's stack. */
const SUITE_TIMEOUT = "180s";
/** Records per ETL chain (TestGroupETL, TestTxnEtl); the suite's default is 500,000. */
const RECORDS = 2000;

/** A test of the suite that must PASS, with the subtests that must PASS too (others may skip, and why). */
interface KgoTest {
  name: string;
  subtests?: string[];
}

/**
 * The integration tests run against bunka, over PLAINTEXT (see above). They are every test of pkg/kgo
 * v1.22.3 that talks to a broker, except these, left out:
 *
 * - TestConsumeRegex: it waits for `__consumer_offsets` to appear in Metadata as an internal topic once a
 *   group coordinator has been looked up. bunka keeps group offsets in its own files and has no internal
 *   topics (README, "Internal topics"), so the topic never appears and the test fails after 45 s; against
 *   Apache Kafka 4.1.1 it passes.
 * - Test848RegexBrokerResolves and the "/848" subtests of TestGroupETL, TestTxnEtl and TestGroupSimple:
 *   the KIP-848 consumer group protocol (ConsumerGroupHeartbeat), which bunka does not serve; they skip.
 * - TestShareGroup, TestShareGroupETL, TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin,
 *   TestConsumeRegexShareSkipsInternal: share groups need ShareFetch v2 (Kafka 4.2); they skip, as against
 *   Apache Kafka 4.1.1.
 * - TestOAuthAuth: SASL/OAUTHBEARER, which bunka does not serve.
 * - TestIssueProduceBrokerTooOldFailsRecords: it runs only against a broker that does not list Produce
 *   v0-v2 in ApiVersions; Apache Kafka 4.1.1 and bunka list them (for librdkafka's sake, though neither
 *   serves them: src/broker/registry.ts), so it skips against both.
 * The rest of the suite are unit tests of the client (no broker), which say nothing about bunka.
 */
const INTEGRATION_TESTS: readonly KgoTest[] = [
  // The client's connection basics: ApiVersions and Metadata, batched FindCoordinator, OffsetFetch of an unknown group.
  { name: "TestPing" },
  { name: "TestIssue1034" },
  { name: "TestUnknownGroupOffsetFetchPinned" },
  // Producing: concurrent producers' offsets in order, large messages refused by the client and by the
  // broker (MESSAGE_TOO_LARGE), records cancelled before and while a produce hangs, a bad manual partition.
  { name: "TestClient_Produce" },
  { name: "TestClient_ProduceLargeMessages", subtests: ["TestClient_ProduceLargeMessages/LargeMessage_FailureClient", "TestClient_ProduceLargeMessages/LargeMessage_FailureBroker"] },
  { name: "TestIssue769" },
  { name: "TestIssue831" },
  { name: "TestIssueProduceSyncManualPartitionNegativeDoesNotPanic" },
  // Consuming: topics and partitions added at runtime, one partition of several, purging, regex consumers
  // of a deleted topic, pausing and resuming, 10,000 records from two topics, a fetch response larger than
  // the client reads, pooled buffers, a compressed batch past the client's bound, poll hooks.
  { name: "TestIssue325" },
  { name: "TestConsumeTopicRetrieval" },
  { name: "TestConsumeTopicRetrieval_Many" },
  { name: "TestIssue337" },
  { name: "TestDirectPartitionPurge" },
  { name: "TestIssue434" },
  { name: "TestAddRemovePartitions" },
  { name: "TestPauseIssue489" },
  { name: "TestPauseIssueOct2023" },
  { name: "TestIssue648" },
  { name: "TestIssue810" },
  { name: "TestIssue865" },
  { name: "TestIssueFetchLargerThanBrokerMaxReadBytes" },
  { name: "TestPooling" },
  { name: "TestConsumeMaxDecompressBatchBytes" },
  { name: "TestHookPollStart", subtests: ["TestHookPollStart/PollRecords", "TestHookPollStart/PollFetches"] },
  // Consumer groups (classic protocol): a regex group whose topic is deleted, a simple group, and the ETL
  // chain of three groups with members joining and leaving, every record consumed once and in order.
  { name: "TestIssue523", subtests: ["TestIssue523/roundrobin", "TestIssue523/sticky"] },
  { name: "TestGroupSimple", subtests: ["TestGroupSimple/classic"] },
  { name: "TestGroupETL", subtests: ["TestGroupETL/range", "TestGroupETL/cooperative-sticky", "TestGroupETL/cooperative-sticky/static"] },
  // Transactions: the same chain with each hop a consume-transform-produce transaction (EOS), read_committed.
  { name: "TestTxnEtl", subtests: ["TestTxnEtl/range", "TestTxnEtl/cooperative-sticky", "TestTxnEtl/cooperative-sticky/static"] },
];

/** Password of both SCRAM users; each user has one mechanism's credential only. */
const PASSWORD = "kgo-secret";
const SHA256_USER = "kgo-256";
const SHA512_USER = "kgo-512";

/** Where a run points the suite: the PLAINTEXT listener and the SASL_PLAINTEXT one. */
interface Target {
  plaintext: string;
  sasl: string;
}

let workDir: string;
let broker: TestBroker;
let bunka: Target;

beforeAll(async () => {
  await ensureInteropClients();
  workDir = mkdtempSync(join(tmpdir(), "bunka-franz-suite-"));
  broker = await startTestBroker({
    listeners: [
      { name: "PLAINTEXT", host: "127.0.0.1", port: 0 },
      { name: "SASL_PLAINTEXT", host: "127.0.0.1", port: 0 },
    ],
    listenerSecurityProtocolMap: { PLAINTEXT: "PLAINTEXT", SASL_PLAINTEXT: "SASL_PLAINTEXT" },
    saslEnabledMechanisms: ["SCRAM-SHA-256", "SCRAM-SHA-512"],
  });
  bunka = { plaintext: `127.0.0.1:${broker.ports.PLAINTEXT}`, sasl: `127.0.0.1:${broker.ports.SASL_PLAINTEXT}` };
  await addScramUsers(broker.ports.PLAINTEXT!);
}, TIMEOUT);

afterAll(async () => {
  await broker?.stop();
  if (workDir !== undefined) rmSync(workDir, { recursive: true, force: true });
});

/** The two SCRAM users, each with its one mechanism, through AlterUserScramCredentials (the client salts). */
async function addScramUsers(plaintextPort: number): Promise<void> {
  const admin = await WireClient.connect(plaintextPort);
  try {
    // One request each: a user named twice in one request is refused, by Apache as by bunka.
    for (const [name, mechanismName] of [[SHA256_USER, "SCRAM-SHA-256"], [SHA512_USER, "SCRAM-SHA-512"]] as const) {
      const mechanism = scramMechanism(mechanismName)!;
      const salt = crypto.getRandomValues(new Uint8Array(16));
      const res = await admin.request(51, 0, {
        deletions: [],
        upsertions: [{ name, mechanism: mechanism.type, iterations: 4096, salt, saltedPassword: saltedPassword(mechanism, PASSWORD, salt, 4096) }],
      });
      expect(res.results[0].errorCode).toBe(ErrorCode.NONE);
    }
  } finally {
    admin.close();
  }
}

interface SuiteRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the compiled suite with `-test.run ^(names)$` and the KGO_ environment given (and no other KGO_ variable). */
async function runSuite(names: readonly string[], kgoEnv: Record<string, string>): Promise<SuiteRun> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("KGO_") && value !== undefined) env[key] = value;
  Object.assign(env, { KGO_TEST_RF: "1", KGO_TEST_RECORDS: String(RECORDS), KGO_LOG_LEVEL: "none" }, kgoEnv);
  // The suite's working directory: a few of its unit tests read source files from it; none of those runs here.
  const cwd = mkdtempSync(join(workDir, "cwd-"));
  const proc = Bun.spawn([FRANZ_GO_KGO_TESTS, "-test.v", "-test.timeout", SUITE_TIMEOUT, "-test.run", `^(${names.join("|")})$`], { cwd, env, stdout: "pipe", stderr: "pipe" });
  // A bound of our own as well, should the binary's deadline not end it.
  const killer = setTimeout(() => proc.kill("SIGKILL"), TIMEOUT - 30_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(killer);
  return { code, stdout, stderr };
}

type Outcome = "PASS" | "FAIL" | "SKIP";

/** Every test's and subtest's outcome as `-test.v` reports it ("--- PASS: TestX/sub (1.23s)", indented for subtests). */
function outcomesOf(stdout: string): Map<string, Outcome> {
  const outcomes = new Map<string, Outcome>();
  for (const m of stdout.matchAll(/^\s*--- (PASS|FAIL|SKIP): (\S+) \(/gm)) outcomes.set(m[2]!, m[1] as Outcome);
  return outcomes;
}

/** Fails with the suite's output unless it exited 0, nothing failed, and every test named passed. */
function expectPassed(run: SuiteRun, tests: readonly KgoTest[]): Map<string, Outcome> {
  const outcomes = outcomesOf(run.stdout);
  const problems: string[] = [];
  if (run.code !== 0) problems.push(`the suite exited ${run.code}`);
  for (const [name, outcome] of outcomes) if (outcome === "FAIL") problems.push(`${name} failed`);
  for (const name of tests.flatMap((t) => [t.name, ...(t.subtests ?? [])])) {
    const outcome = outcomes.get(name);
    if (outcome !== "PASS") problems.push(`${name}: ${outcome ?? "did not run"}, not PASS`);
  }
  if (problems.length > 0) {
    throw new Error(`franz-go's kgo tests:\n${problems.join("\n")}\n--- stdout (tail) ---\n${run.stdout.slice(-12_000)}\n--- stderr (tail) ---\n${run.stderr.slice(-4000)}`);
  }
  return outcomes;
}

const SCRAM_256_TITLE = "SCRAM-SHA-256: TestSCRAMAuth (Ping, Metadata) and TestSCRAMAuthBadCredentials (an unknown user is refused)";
const SCRAM_512_TITLE = "SCRAM-SHA-512: TestSCRAMAuth (TestSCRAMAuthBadCredentials always uses SHA-256)";
const INTEGRATION_TITLE = `${INTEGRATION_TESTS.length} tests over PLAINTEXT: produce, consume, classic groups and transactions (ETL chains of ${RECORDS} records)`;

async function scramSha256(target: Target): Promise<void> {
  const run = await runSuite(["TestSCRAMAuth", "TestSCRAMAuthBadCredentials"], { KGO_SEEDS: target.plaintext, KGO_TEST_SCRAM_SEEDS: target.sasl, KGO_TEST_SCRAM: `${SHA256_USER}:${PASSWORD}` });
  expectPassed(run, [{ name: "TestSCRAMAuth" }, { name: "TestSCRAMAuthBadCredentials" }]);
  expect(run.stdout).toContain("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256");
}

async function scramSha512(target: Target): Promise<void> {
  const run = await runSuite(["TestSCRAMAuth"], { KGO_SEEDS: target.plaintext, KGO_TEST_SCRAM_SEEDS: target.sasl, KGO_TEST_SCRAM: `${SHA512_USER}:${PASSWORD}:512` });
  expectPassed(run, [{ name: "TestSCRAMAuth" }]);
}

async function integration(target: Target): Promise<void> {
  const started = performance.now();
  const run = await runSuite(
    INTEGRATION_TESTS.map((t) => t.name),
    { KGO_SEEDS: target.plaintext },
  );
  const outcomes = expectPassed(run, INTEGRATION_TESTS);
  const passed = [...outcomes.values()].filter((o) => o === "PASS").length;
  console.log(`franz-go kgo suite against ${target.plaintext}: ${passed} tests and subtests passed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

const authenticated = (mechanism: string) => broker.broker.services.sasl.counts.authenticated.get(mechanism) ?? 0;
const failed = (mechanism: string) => broker.broker.services.sasl.counts.failed.get(mechanism) ?? 0;

describe("franz-go's own kgo tests against bunka", () => {
  test(SCRAM_256_TITLE, async () => {
    const [before, failedBefore] = [authenticated("SCRAM-SHA-256"), failed("SCRAM-SHA-256")];
    await scramSha256(bunka);
    // The tests' clients authenticated on bunka's SASL listener, and the bad one failed there.
    expect(authenticated("SCRAM-SHA-256")).toBeGreaterThan(before);
    expect(failed("SCRAM-SHA-256")).toBeGreaterThan(failedBefore);
  }, TIMEOUT);

  test(SCRAM_512_TITLE, async () => {
    const before = authenticated("SCRAM-SHA-512");
    await scramSha512(bunka);
    expect(authenticated("SCRAM-SHA-512")).toBeGreaterThan(before);
  }, TIMEOUT);

  test(INTEGRATION_TITLE, () => integration(bunka), TIMEOUT);
});

// "[reference]" opens these names: scripts/test counts their passes apart from bunka's.
describe.if(REFERENCE)("[reference] the same against Apache Kafka 4.1.1", () => {
  let apache: ApacheKafka;
  let reference: Target;
  beforeAll(async () => {
    await ensureKafkaLibs();
    const saslPort = freePort();
    apache = await startApacheKafka({
      serverProperties: {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
      },
      extraListeners: [{ name: "SASL_PLAINTEXT", port: saslPort, protocol: "SASL_PLAINTEXT" }],
    });
    reference = { plaintext: apache.bootstrap, sasl: `127.0.0.1:${saslPort}` };
    await addScramUsers(apache.port);
  }, TIMEOUT);
  afterAll(async () => {
    await apache?.stop();
  });

  test(SCRAM_256_TITLE, () => scramSha256(reference), TIMEOUT);
  test(SCRAM_512_TITLE, () => scramSha512(reference), TIMEOUT);
  test(INTEGRATION_TITLE, () => integration(reference), TIMEOUT);
});
