/**
 * Apache's console tools through a secured listener: kafka-console-producer writes `count` keyed lines
 * (acks=all) with a client properties file, kafka-console-consumer reads them back in a group with the same
 * file, and the group's committed offset (OffsetFetch require_stable, asked over `client`) is the count.
 * Shared by the TLS and SASL interop tests.
 */
import { expect } from "bun:test";
import { runKafkaTool, type ToolResult } from "./apache-kafka.ts";
import type { WireClient } from "./wire-client.ts";

function ok(result: ToolResult): ToolResult {
  if (result.code !== 0) throw new Error(`tool exited ${result.code}\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-4000)}`);
  return result;
}

export async function consoleRoundTrip(o: { bootstrap: string; topic: string; clientConfig: string; label: string; count: number; client: WireClient }): Promise<void> {
  const { bootstrap, topic, clientConfig, label, count, client } = o;
  const lines = Array.from({ length: count }, (_, i) => `key-${i}:${label} value ${i}`);
  ok(
    await runKafkaTool(
      "kafka-console-producer",
      ["--bootstrap-server", bootstrap, "--topic", topic, "--producer.config", clientConfig, "--producer-property", "acks=all", "--property", "parse.key=true", "--property", "key.separator=:"],
      { stdin: lines.join("\n") + "\n", timeoutMs: 90_000 },
    ),
  );
  const consumed = ok(
    await runKafkaTool(
      "kafka-console-consumer",
      [
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--group", `${topic}-group`,
        "--consumer.config", clientConfig,
        "--consumer-property", "auto.offset.reset=earliest",
        "--max-messages", String(count),
        "--timeout-ms", "60000",
        "--property", "print.key=true",
        "--property", "key.separator=:",
      ],
      { timeoutMs: 120_000 },
    ),
  );
  expect(consumed.stdout.trimEnd().split("\n")).toEqual(lines);
  // The group's offsets were committed through the same listener.
  const fetched = await client.request(9, 8, { groups: [{ groupId: `${topic}-group`, topics: [{ name: topic, partitionIndexes: [0] }] }], requireStable: true });
  expect(fetched.groups[0].topics[0].partitions[0].committedOffset).toBe(count);
}
