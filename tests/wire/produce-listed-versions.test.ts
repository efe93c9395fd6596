/**
 * Produce v0-v2 as Apache Kafka 4.1.1 treats them: listed in ApiVersions (librdkafka decides from them
 * whether the broker takes gzip, snappy and lz4), not served: a request in one of them closes the
 * connection without an answer (what Apache's broker does, checked with the same frames against it).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker.stop();
});

test("ApiVersions lists Produce from v0 in every version, as Apache Kafka 4.1.1 does", async () => {
  const client = await WireClient.connect(broker.port);
  try {
    for (let v = 0; v <= 4; v++) {
      const res = await client.request(18, v, { clientSoftwareName: "wire-test", clientSoftwareVersion: "1.0" });
      expect(res.errorCode).toBe(ErrorCode.NONE);
      expect(res.apiKeys.find((k: { apiKey: number }) => k.apiKey === 0)).toMatchObject({ apiKey: 0, minVersion: 0, maxVersion: 11 });
    }
  } finally {
    client.close();
  }
});

for (const version of [0, 1, 2]) {
  test(`a Produce v${version} request closes the connection unanswered, and the broker goes on`, async () => {
    const client = await WireClient.connect(broker.port);
    const answer = client.request(0, version, { acks: 1, timeoutMs: 1000, topicData: [] }).then(
      () => "answered",
      (error: Error) => error.message,
    );
    expect(await answer).toBe("connection closed");
    await client.closed;
    const next = await WireClient.connect(broker.port);
    try {
      const res = await next.request(0, 3, { transactionalId: null, acks: 1, timeoutMs: 1000, topicData: [] });
      expect(res.responses).toEqual([]);
    } finally {
      next.close();
    }
  });
}
