/**
 * kcat (Debian 12's, librdkafka 2.0) produces with gzip, snappy, lz4 and zstd, and the batches stored carry
 * that codec. That librdkafka decides from ApiVersions whether the broker takes gzip, snappy and lz4: only
 * when Produce v0-v2 are listed, which Apache Kafka 4 lists for it without serving them (and bunka since,
 * src/broker/registry.ts). Without them it sent those three codecs' batches uncompressed, without a word.
 *
 * librdkafka itself sends a batch uncompressed when compressing makes it larger, which a batch of one short
 * record does (gzip's header alone is 18 bytes): kcat lingers so that the lines form one batch, and a
 * one-record batch that it still split off may be uncompressed; every batch of several records carries the
 * codec.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { CompressionCodec } from "../../src/protocol/records/record-batch.ts";
import { ensureInteropClients } from "../support/interop-clients.ts";
import { readPartitionFully, utf8 } from "../support/record-decoder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
const COUNT = 200;
const CODECS = ["gzip", "snappy", "lz4", "zstd"] as const;

let broker: TestBroker;
let client: WireClient;

beforeAll(async () => {
  await ensureInteropClients();
  // kcat must be there: the interop clients' script installs the Debian package; nothing is skipped.
  if (Bun.which("kcat") === null) throw new Error("kcat is not installed: run scripts/install-interop-clients.sh as root, or `apt-get install kcat`");
  broker = await startTestBroker();
  client = await WireClient.connect(broker.port);
}, TIMEOUT);

afterAll(async () => {
  client?.close();
  await broker?.stop();
});

for (const codec of CODECS) {
  test(`kcat -z ${codec}: ${COUNT} records stored in ${codec} batches`, async () => {
    const topic = `kcat-${codec}`;
    const lines = Array.from({ length: COUNT }, (_, i) => `record ${i} of a value that compresses well, well, well`);
    const proc = Bun.spawn(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-z", codec, "-X", "message.timeout.ms=30000", "-X", "linger.ms=200"], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    proc.stdin.write(lines.join("\n") + "\n");
    await proc.stdin.end();
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`kcat exited ${code}\n${stderr}`);
    const contents = await readPartitionFully(client, topic, 0);
    expect(contents.records.map((r) => utf8(r.value))).toEqual(lines);
    const layout = JSON.stringify(contents.batches.map((b) => [b.header.recordsCount, b.header.compression]));
    const compressed = contents.batches.filter((b) => b.header.compression === CompressionCodec[codec]);
    const uncompressedSingles = contents.batches.filter((b) => b.header.compression === CompressionCodec.none && b.header.recordsCount === 1);
    expect(compressed.length + uncompressedSingles.length, layout).toBe(contents.batches.length);
    expect(compressed.length, layout).toBeGreaterThan(0);
  }, TIMEOUT);
}
