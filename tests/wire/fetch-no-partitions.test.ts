/**
 * Regression (found by the wire fuzz, case 3089 of seed 0x5eedf022 at the time: a mutated Fetch v6 with
 * max_wait_ms 2054815744 and no topics): a Fetch that names no partition waited out max_wait_ms, since
 * nothing could wake it, and the connection hung behind it. Apache answers such a fetch at once
 * (ReplicaManager.fetchMessages responds immediately when fetchInfos is empty).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;
let client: WireClient;

beforeAll(async () => {
  broker = await startTestBroker({ autoCreateTopicsEnable: false });
  client = await WireClient.connect(broker.port);
});
afterAll(async () => {
  client?.close();
  await broker?.stop();
});

test("fetch-no-partitions-long-poll: a Fetch naming no partition is answered at once, whatever max_wait_ms and min_bytes", async () => {
  for (const version of [4, 6, 12, 17]) {
    const startedMs = performance.now();
    const response = await client.request(1, version, {
      replicaId: -1,
      maxWaitMs: 2_054_815_744,
      minBytes: 65_535,
      maxBytes: 1 << 20,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [],
      forgottenTopicsData: [],
      rackId: "",
    });
    expect(response.errorCode ?? ErrorCode.NONE).toBe(ErrorCode.NONE);
    expect(response.responses).toEqual([]);
    // Not a measure of speed: without the fix this waits ~24 days, so the test's own deadline fails it.
    expect(performance.now() - startedMs).toBeLessThan(10_000);
  }
}, 15_000);
