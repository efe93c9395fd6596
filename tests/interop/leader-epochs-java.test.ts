/**
 * Apache Kafka's Java consumer (4.1.1) validating its position with leader epochs (KIP-320) against
 * bunka (tests/interop/java/EpochValidation.java, compiled here with javac into
 * .cache/java-classes/epoch-validation/): a committed offset carrying leader epoch 0, and a seek with
 * one, are validated through OffsetForLeaderEpoch before the consumer fetches, and it reads on from
 * there. The consumers run with auto.offset.reset=none, so a validation that failed would be an exception
 * (the program's exit code), never a silent reset; the broker counts the OffsetForLeaderEpoch requests.
 *
 *   bun test --timeout 300000 tests/interop/leader-epochs-java.test.ts
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { LOG4J_CONFIG, REPO_ROOT, ensureKafkaLibs, javaBin } from "../support/apache-kafka.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { LineChild, killLiveChildren } from "../support/line-child.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 240_000;
const TOPIC = "epoch-validation";
const RECORDS = 10;
const FROM = 3;
const COUNT = 5;
const JAVA_SOURCE = join(import.meta.dir, "java", "EpochValidation.java");
const JAVA_CLASSES = join(REPO_ROOT, ".cache", "java-classes", "epoch-validation");
const JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xmx256m", `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`];

let broker: TestBroker;
let client: WireClient;
let libs = "";
/** OffsetForLeaderEpoch requests the broker answered, and what it answered. */
const answered: { leaderEpoch: number; endOffset: number; errorCode: number }[] = [];

async function run(label: string, cmd: string[], timeoutMs: number): Promise<string> {
  const child = new LineChild(label, cmd);
  const code = await child.exitWithin(timeoutMs);
  if (code !== 0) throw new Error(`${label} exited ${code}\n${child.output()}`);
  return child.stdout;
}

async function compileJava(): Promise<void> {
  const cls = join(JAVA_CLASSES, "EpochValidation.class");
  if (existsSync(cls) && statSync(cls).mtimeMs >= statSync(JAVA_SOURCE).mtimeMs) return;
  mkdirSync(JAVA_CLASSES, { recursive: true });
  await run("javac EpochValidation.java", ["javac", "-nowarn", "-d", JAVA_CLASSES, "-cp", `${libs}/*`, JAVA_SOURCE], 120_000);
}

beforeAll(async () => {
  libs = await ensureKafkaLibs();
  await compileJava();
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
  const created = await client.request(19, 7, {
    topics: [{ name: TOPIC, numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }],
    timeoutMs: 10_000,
    validateOnly: false,
  });
  expect(created.topics[0].errorCode).toBe(ErrorCode.NONE);
  const records = Array.from({ length: RECORDS }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));
  const produced = await client.request(0, 11, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: buildBatch({ records }) }] }],
  });
  expect(produced.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.NONE);
  // Counts what the Java client asks: the handler object is the one the dispatcher calls.
  const handler = broker.broker.registry.get(23)!;
  const handle = handler.handle.bind(handler);
  handler.handle = async (request, ctx) => {
    const response = await handle(request, ctx);
    for (const t of response.topics) for (const p of t.partitions) answered.push({ leaderEpoch: p.leaderEpoch, endOffset: p.endOffset, errorCode: p.errorCode });
    return response;
  };
}, TIMEOUT);

afterAll(async () => {
  await killLiveChildren();
  client?.close();
  await broker?.stop();
});

describe("the Java consumer validates its position with OffsetForLeaderEpoch (KIP-320)", () => {
  test("a committed offset with leader epoch 0 and a seek with one are validated, and the consumer reads on", async () => {
    const stdout = await run(
      "java EpochValidation",
      [javaBin(), ...JVM_FLAGS, "-cp", `${JAVA_CLASSES}:${libs}/*`, "EpochValidation", broker.bootstrap, TOPIC, "epoch-group", String(FROM), String(COUNT)],
      TIMEOUT - 60_000,
    );
    expect(stdout).toContain(`COMMITTED ${FROM} 0`);
    for (const label of ["committed", "seek"]) {
      const read = stdout
        .split("\n")
        .filter((line) => line.startsWith(`R ${label} `))
        .map((line) => line.split(" ").slice(2));
      expect(read).toEqual(Array.from({ length: COUNT }, (_, i) => [String(FROM + i), `v${FROM + i}`, "0"]));
    }
    expect(stdout).toContain("DONE");
    // One validation per consumer at least, each answered with epoch 0 ending at the log end.
    expect(answered.length).toBeGreaterThanOrEqual(2);
    expect(answered).toEqual(answered.map(() => ({ leaderEpoch: 0, endOffset: RECORDS, errorCode: ErrorCode.NONE })));
  }, TIMEOUT);
});
