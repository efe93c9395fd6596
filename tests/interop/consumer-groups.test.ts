/**
 * Consumer groups with real clients against an in-process bunka:
 * - kafkajs: three consumers rebalancing as members come and go while a producer writes; every record is
 *   committed exactly once (a record counts once its offset commit succeeded);
 * - librdkafka (confluent-kafka, tests/interop/python/consumer_group.py): two members, a rebalance, per
 *   message commits, then its AdminClient lists and describes the group and reads its offsets;
 * - the Java console consumer with --group: it resumes from the group's committed offsets;
 * - Apache's kafka-consumer-groups (--list, --describe [--state|--members --verbose], --reset-offsets,
 *   --delete): the same scenario against bunka and against Apache Kafka prints the same output, once host
 *   names, ports, node ids and member ids are normalised.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Kafka, logLevel, type Consumer, type EachMessagePayload } from "kafkajs";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { REPO_ROOT, runKafkaTool, startApacheKafka, type ToolResult } from "../support/apache-kafka.ts";
import { ensureInteropClients, VENV_PYTHON } from "../support/interop-clients.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const SCRIPT = join(REPO_ROOT, "tests/interop/python/consumer_group.py");

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ groupInitialRebalanceDelayMs: 0, autoCreateTopicsEnable: false });
}, 30_000);
afterAll(async () => {
  await broker?.stop();
});

function ok(r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`tool exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}

/** Polls `condition` until it holds (or fails after `timeoutMs`): waits for a state, never for a time. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function createTopic(name: string, partitions: number): Promise<void> {
  const client = await WireClient.connect(broker.port);
  try {
    const res = await client.request(19, 7, { topics: [{ name, numPartitions: partitions, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 5000, validateOnly: false });
    expect(res.topics[0].errorCode).toBe(ErrorCode.NONE);
  } finally {
    client.close();
  }
}

/** The group's committed offsets per partition, by OffsetFetch v8 on the wire. */
async function committedOffsets(groupId: string): Promise<Map<string, number>> {
  const client = await WireClient.connect(broker.port);
  try {
    const res = await client.request(9, 8, { groups: [{ groupId, topics: null }], requireStable: true });
    const out = new Map<string, number>();
    for (const t of res.groups[0].topics) for (const p of t.partitions) out.set(`${t.name}-${p.partitionIndex}`, p.committedOffset);
    return out;
  } finally {
    client.close();
  }
}

describe("kafkajs", () => {
  test("three consumers rebalance as members come and go while a producer writes; every record is committed exactly once", async () => {
    const topic = "kjs-rebalance";
    const groupId = "kjs-group";
    const total = 1500;
    await createTopic(topic, 6);
    const kafka = new Kafka({ clientId: "kjs", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 10, initialRetryTime: 50 } });

    const committedByKey = new Map<string, number>();
    let deliveries = 0;
    let refused = 0;
    const consumers: { name: string; consumer: Consumer; stopping: boolean; inFlight: number; joins: number }[] = [];

    const start = async (name: string) => {
      const entry = {
        name,
        consumer: kafka.consumer({ groupId, sessionTimeout: 10_000, rebalanceTimeout: 20_000, heartbeatInterval: 300 }),
        stopping: false,
        inFlight: 0,
        joins: 0,
        /** Set by a refused commit: later messages of the old generation are left alone until the member rejoins. */
        refusedAtJoin: -1,
      };
      consumers.push(entry);
      entry.consumer.on(entry.consumer.events.GROUP_JOIN, () => entry.joins++);
      await entry.consumer.connect();
      await entry.consumer.subscribe({ topic, fromBeginning: true });
      await entry.consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic: t, partition, message }: EachMessagePayload) => {
          // Left to the next owner (or to this member after it rejoins), which starts from the committed offset:
          // committing a later offset now would skip the message whose commit was refused.
          if (entry.stopping || entry.refusedAtJoin === entry.joins) return;
          entry.inFlight++;
          deliveries++;
          try {
            await entry.consumer.commitOffsets([{ topic: t, partition, offset: String(Number(message.offset) + 1) }]);
            const key = message.key!.toString();
            committedByKey.set(key, (committedByKey.get(key) ?? 0) + 1);
          } catch {
            // Refused by a rebalance (the member's generation is over): not consumed.
            refused++;
            entry.refusedAtJoin = entry.joins;
          } finally {
            entry.inFlight--;
          }
        },
      });
      await waitFor(`${name} to join`, () => entry.joins > 0);
    };
    const stop = async (name: string) => {
      const entry = consumers.find((c) => c.name === name)!;
      entry.stopping = true;
      await waitFor(`${name} to finish its message`, () => entry.inFlight === 0);
      await entry.consumer.disconnect();
    };

    const producer = kafka.producer();
    await producer.connect();
    let produced = 0;
    const producing = (async () => {
      while (produced < total) {
        const batch = Array.from({ length: 25 }, (_, i) => ({ key: `key-${produced + i}`, value: `value-${produced + i}` }));
        await producer.send({ topic, acks: -1, messages: batch });
        produced += batch.length;
        // Spread the writes over the membership changes below.
        await waitFor("consumers to keep up", () => committedByKey.size >= produced - 400 || consumers.length === 0, 60_000);
      }
    })();

    try {
      const committed = () => committedByKey.size;
      await start("c1");
      await waitFor("c1 to consume", () => committed() >= 100);
      await start("c2");
      await waitFor("two members to consume", () => committed() >= 300);
      await start("c3");
      await waitFor("three members to consume", () => committed() >= 500);
      await stop("c1");
      await waitFor("two members after c1 left", () => committed() >= 700);
      await start("c4");
      await waitFor("three members again", () => committed() >= 900);
      await stop("c2");
      await producing;
      await waitFor("every record to be committed", () => committed() >= total, 90_000);

      const duplicates = [...committedByKey].filter(([, n]) => n > 1).map(([k]) => k);
      expect(duplicates).toEqual([]);
      expect(committedByKey.size).toBe(total);
      for (let i = 0; i < total; i++) expect(committedByKey.has(`key-${i}`)).toBe(true);
      // The committed offsets are the ends of the partitions.
      const admin = kafka.admin();
      await admin.connect();
      const ends = await admin.fetchTopicOffsets(topic);
      await admin.disconnect();
      const offsets = await committedOffsets(groupId);
      for (const end of ends) expect(offsets.get(`${topic}-${end.partition}`)).toBe(Number(end.high));
      expect(ends.reduce((sum, e) => sum + Number(e.high), 0)).toBe(total);
      // Every counted delivery is either the one committed record or one whose commit a rebalance refused.
      expect(deliveries).toBe(total + refused);
      console.log(
        `kafkajs group: ${total} records committed once each; ${refused} commits refused by rebalances; ` +
          `joins per member ${consumers.map((c) => `${c.name}=${c.joins}`).join(" ")}`,
      );
    } finally {
      for (const c of consumers) if (!c.stopping) await c.consumer.disconnect().catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
    }
  }, 180_000);
});

describe("librdkafka", () => {
  test("a group of two confluent-kafka consumers rebalances, commits every message once, and its AdminClient sees the group", async () => {
    await ensureInteropClients();

    const topic = "rdk-group";
    const count = 600;
    await createTopic(topic, 4);
    const kafka = new Kafka({ clientId: "rdk-producer", brokers: [broker.bootstrap], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: Array.from({ length: count }, (_, i) => ({ key: `key-${i}`, value: `value-${i}` })) });
    await producer.disconnect();

    const proc = Bun.spawn([VENV_PYTHON, SCRIPT, broker.bootstrap, topic, "rdk-group-id", String(count)], { stdout: "pipe", stderr: "pipe" });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 150_000);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    if (code !== 0) throw new Error(`consumer_group.py exited ${code}\n${err}`);
    const result = JSON.parse(out);
    expect(result.duplicates).toEqual([]);
    expect(result.keys_committed).toBe(count);
    // The second member's arrival rebalanced the group: both got partitions.
    expect(result.assignments.c1.length).toBeGreaterThanOrEqual(2);
    expect(result.assignments.c2.flat().length).toBeGreaterThan(0);
    expect(result.listed).toContain("rdk-group-id");
    expect(result.group_state).toBe("ConsumerGroupState.EMPTY");
    expect(result.group_members).toBe(0);
    const committedTotal = Object.values(result.committed_offsets as Record<string, number>).reduce((a, b) => a + b, 0);
    expect(committedTotal).toBe(count);
    expect(result.errors.filter((e: string) => !/Disconnected|REBALANCE|generation/i.test(e))).toEqual([]);
  }, 180_000);
});

describe("Java console consumer", () => {
  test("--group commits, and a second run resumes from the committed offsets", async () => {
    const topic = "java-group-topic";
    const group = "java-group";
    const base = ["--bootstrap-server", broker.bootstrap];
    ok(await runKafkaTool("kafka-topics", [...base, "--create", "--topic", topic, "--partitions", "2"]));
    const produce = (from: number, to: number) =>
      runKafkaTool("kafka-console-producer", [...base, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:"], {
        stdin: Array.from({ length: to - from }, (_, i) => `k${from + i}:v${from + i}`).join("\n") + "\n",
      });
    const consume = (max: number, fromBeginning: boolean) =>
      runKafkaTool("kafka-console-consumer", [...base, "--topic", topic, "--group", group, ...(fromBeginning ? ["--from-beginning"] : []), "--max-messages", String(max)]);

    ok(await produce(0, 10));
    const first = ok(await consume(10, true));
    expect(first.stdout.trim().split("\n").sort()).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`).sort());
    expect(first.stderr).toContain("Processed a total of 10 messages");
    const afterFirst = await committedOffsets(group);
    expect([...afterFirst.values()].reduce((a, b) => a + b, 0)).toBe(10);

    ok(await produce(10, 15));
    const second = ok(await consume(5, false));
    expect(second.stdout.trim().split("\n").sort()).toEqual(["v10", "v11", "v12", "v13", "v14"]);
    const afterSecond = await committedOffsets(group);
    expect([...afterSecond.values()].reduce((a, b) => a + b, 0)).toBe(15);
  }, 120_000);
});

describe("kafka-consumer-groups", () => {
  /** Strips what differs between brokers and runs: addresses, node ids, member ids, column padding. */
  function normalize(r: ToolResult, bootstrap: string): string {
    const lines = `${r.stdout}\n${r.stderr}`
      .replaceAll(bootstrap, "BOOTSTRAP")
      .replace(/\(\d+\)/g, "(ID)")
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "UUID")
      .split("\n")
      .map((l) => l.replace(/\s+/g, " ").trim())
      .filter((l) => l.length > 0 && !/^(SLF4J|WARNING|at |java\.|Caused by)/.test(l));
    return [`exit ${r.code}`, ...lines].join("\n");
  }

  /** The same commands against a broker; returns their normalised outputs, labelled. */
  async function scenario(bootstrap: string): Promise<[string, string][]> {
    const base = ["--bootstrap-server", bootstrap];
    const topic = "cg-topic";
    const group = "cg";
    ok(await runKafkaTool("kafka-topics", [...base, "--create", "--topic", topic, "--partitions", "2"]));
    ok(
      await runKafkaTool("kafka-console-producer", [...base, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:"], {
        stdin: Array.from({ length: 10 }, (_, i) => `key-${i}:value-${i}`).join("\n") + "\n",
      }),
    );
    ok(await runKafkaTool("kafka-console-consumer", [...base, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "10"]));

    const outputs: [string, string][] = [];
    const groups = async (label: string, args: string[]) => outputs.push([label, normalize(await runKafkaTool("kafka-consumer-groups", [...base, ...args]), bootstrap)]);
    await groups("list", ["--list"]);
    await groups("describe", ["--describe", "--group", group]);
    await groups("describe --state", ["--describe", "--group", group, "--state"]);
    await groups("describe --members", ["--describe", "--group", group, "--members"]);

    // An active member (kafkajs): the group is Stable with one member owning both partitions.
    const kafka = new Kafka({ clientId: "cg-kafkajs", brokers: [bootstrap], logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 500 });
    let joined = false;
    consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
    await consumer.connect();
    await consumer.subscribe({ topic });
    await consumer.run({ eachMessage: async () => undefined });
    try {
      await waitFor("the kafkajs member to join", () => joined);
      await groups("active describe", ["--describe", "--group", group]);
      await groups("active describe --state", ["--describe", "--group", group, "--state"]);
      await groups("active describe --members --verbose", ["--describe", "--group", group, "--members", "--verbose"]);
      await groups("active reset refused", ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"]);
    } finally {
      await consumer.disconnect();
    }

    await groups("reset --to-earliest --execute", ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"]);
    await groups("describe after reset", ["--describe", "--group", group]);
    await groups("reset --to-offset 3 --dry-run", ["--reset-offsets", "--group", group, "--topic", `${topic}:0`, "--to-offset", "3", "--dry-run"]);
    await groups("reset --shift-by 2 --execute", ["--reset-offsets", "--group", group, "--all-topics", "--shift-by", "2", "--execute"]);
    await groups("delete offsets", ["--delete-offsets", "--group", group, "--topic", `${topic}:1`]);
    await groups("describe after delete offsets", ["--describe", "--group", group]);
    await groups("delete", ["--delete", "--group", group]);
    await groups("list after delete", ["--list"]);
    await groups("delete unknown", ["--delete", "--group", "no-such-group"]);
    return outputs;
  }

  test("--list, --describe, --reset-offsets, --delete print what they print against Apache Kafka", async () => {
    const own = await startTestBroker({ groupInitialRebalanceDelayMs: 0, autoCreateTopicsEnable: false });
    let bunkaOutputs: [string, string][];
    try {
      bunkaOutputs = await scenario(own.bootstrap);
    } finally {
      await own.stop();
    }
    const apache = await startApacheKafka({ serverProperties: { "group.initial.rebalance.delay.ms": 0 } });
    let apacheOutputs: [string, string][];
    try {
      apacheOutputs = await scenario(apache.bootstrap);
    } finally {
      await apache.stop();
    }
    for (let i = 0; i < apacheOutputs.length; i++) {
      expect(`${bunkaOutputs[i]![0]}\n${bunkaOutputs[i]![1]}`).toBe(`${apacheOutputs[i]![0]}\n${apacheOutputs[i]![1]}`);
    }
    // Spot checks of what the comparison covers.
    const byLabel = new Map(bunkaOutputs);
    expect(byLabel.get("list")).toBe("exit 0\ncg");
    expect(byLabel.get("active describe --state")).toContain("cg BOOTSTRAP (ID) RoundRobinAssigner Stable 1");
    expect(byLabel.get("delete")).toContain("Deletion of requested consumer groups ('cg') was successful.");
  }, 300_000);

  test("describing a group that does not exist", async () => {
    // Apache 4.1 answers ConsumerGroupDescribe (KIP-848, which bunka does not serve) and DescribeGroups v6
    // with GROUP_ID_NOT_FOUND, so its tool prints "GroupIdNotFoundException: Group nosuch not found."; with
    // DescribeGroups v5 a missing group is Dead, and the same tool prints that it does not exist.
    const r = await runKafkaTool("kafka-consumer-groups", ["--bootstrap-server", broker.bootstrap, "--describe", "--group", "nosuch"]);
    expect(r.stdout + r.stderr).toContain("Consumer group 'nosuch' does not exist.");
  }, 60_000);
});
