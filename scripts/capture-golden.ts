#!/usr/bin/env bun
/**
 * Golden-byte captures from real clients talking to real Apache Kafka, for the codec tests
 * (decode a real frame, re-encode it, compare bytes).
 *
 * A recording TCP proxy sits between the clients and Apache Kafka: the broker advertises the proxy's
 * port, so every connection a client opens (bootstrap and broker connections alike) goes through it.
 * The proxy forwards bytes untouched and, on the side, cuts both directions into size-prefixed frames,
 * reads each request header (apiKey, apiVersion, correlationId, clientId) and pairs each response with
 * its request by correlation id (responses come in request order on a connection; a request that never
 * gets an answer, such as Produce with acks=0, is kept with response null).
 *
 *   bun scripts/capture-golden.ts                       # all captures -> tests/fixtures/golden/*.json
 *   bun scripts/capture-golden.ts --only kafkajs        # one of java-admin, java-console, java-transactions, kafkajs
 *   bun scripts/capture-golden.ts proxy --upstream 127.0.0.1:9092 --out rec.json [--client label]
 *                                                       # just the proxy, until Ctrl-C (prints PROXY=host:port)
 *
 * Fixture format: a JSON array, one entry per line:
 *   {"apiKey":3,"apiVersion":12,"client":"java-admin","clientId":"...","correlationId":5,
 *    "request":"<hex>","response":"<hex>"|null}
 * request/response are the frame payloads WITHOUT the 4-byte size prefix: request header + body,
 * response header + body, exactly as on the wire.
 *
 * Size limits per file (about 300 KB): frames over 32 KiB are left out, and at most 5 exchanges are kept
 * per (apiKey, apiVersion, client), preferring exchanges whose request/response sizes differ from those
 * already kept (so an empty Fetch and a Fetch with records are both kept).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Socket, TCPSocketListener } from "bun";
import { REPO_ROOT, runKafkaTool, startApacheKafka, type ToolResult } from "../tests/support/apache-kafka.ts";

export interface Exchange {
  apiKey: number;
  apiVersion: number;
  client: string;
  clientId: string | null;
  correlationId: number;
  request: string;
  response: string | null;
}

// ---------------------------------------------------------------------------------------------
// Framing helpers

/** Accumulates bytes and yields complete size-prefixed frame payloads. */
class FrameSplitter {
  private buf: Buffer = Buffer.alloc(0);
  push(chunk: Uint8Array): Buffer[] {
    this.buf = this.buf.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.buf, chunk]);
    const out: Buffer[] = [];
    while (this.buf.length >= 4) {
      const size = this.buf.readInt32BE(0);
      if (size < 0 || this.buf.length < 4 + size) break;
      out.push(Buffer.from(this.buf.subarray(4, 4 + size)));
      this.buf = this.buf.subarray(4 + size);
    }
    return out;
  }
}

/** Writes to a Bun socket, queueing what the kernel does not take until `drain`. */
class Writer {
  private queue: Buffer[] = [];
  private closeWhenDrained = false;
  constructor(private sock: Socket<unknown> | undefined = undefined) {}
  attach(sock: Socket<unknown>): void {
    this.sock = sock;
    this.flush();
  }
  write(data: Uint8Array): void {
    this.queue.push(Buffer.from(data));
    this.flush();
  }
  end(): void {
    this.closeWhenDrained = true;
    this.flush();
  }
  flush(): void {
    const sock = this.sock;
    if (!sock) return;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const n = sock.write(head);
      if (n < head.length) {
        this.queue[0] = head.subarray(Math.max(n, 0));
        return;
      }
      this.queue.shift();
    }
    if (this.closeWhenDrained) sock.end();
  }
}

interface Pending {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  clientId: string | null;
  request: Buffer;
  client: string;
}

interface ConnState {
  client: string;
  toUpstream: Writer;
  toClient: Writer;
  upstream?: Socket<unknown>;
  reqSplit: FrameSplitter;
  respSplit: FrameSplitter;
  pending: Pending[];
  closed: boolean;
}

// ---------------------------------------------------------------------------------------------
// Proxy

/** Client ids of Apache Kafka's broker-internal clients (kafka 4.1). */
const BROKER_CLIENT_ID = /^(broker-\d+-|AddPartitionsManager-)/;
export const BROKER_CLIENT = "apache-kafka-broker";

export class RecordingProxy {
  readonly exchanges: Exchange[] = [];
  /** Label stamped on connections accepted from now on. */
  client = "unlabelled";
  private server: TCPSocketListener<ConnState> | undefined;
  private conns = new Set<ConnState>();

  constructor(
    private upstreamHost: string,
    private upstreamPort: number,
  ) {}

  get port(): number {
    if (!this.server) throw new Error("proxy not started");
    return this.server.port;
  }

  /** Re-point at the real broker (it is started after the proxy, because it advertises the proxy's port). */
  setUpstream(host: string, port: number): void {
    this.upstreamHost = host;
    this.upstreamPort = port;
  }

  start(port = 0): this {
    const self = this;
    this.server = Bun.listen<ConnState>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          const st: ConnState = {
            client: self.client,
            toUpstream: new Writer(),
            toClient: new Writer(client as Socket<unknown>),
            reqSplit: new FrameSplitter(),
            respSplit: new FrameSplitter(),
            pending: [],
            closed: false,
          };
          client.data = st;
          self.conns.add(st);
          Bun.connect({
            hostname: self.upstreamHost,
            port: self.upstreamPort,
            socket: {
              open(up) {
                st.upstream = up as Socket<unknown>;
                st.toUpstream.attach(up as Socket<unknown>);
              },
              data(_up, chunk) {
                st.toClient.write(chunk);
                for (const frame of st.respSplit.push(chunk)) self.onResponse(st, frame);
              },
              drain() {
                st.toUpstream.flush();
              },
              close() {
                st.toClient.end();
                self.finish(st);
              },
              error() {
                st.toClient.end();
              },
              connectError() {
                client.end();
                self.finish(st);
              },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          const st = client.data;
          st.toUpstream.write(chunk);
          for (const frame of st.reqSplit.push(chunk)) self.onRequest(st, frame);
        },
        drain(client) {
          client.data.toClient.flush();
        },
        close(client) {
          const st = client.data;
          st.toUpstream.end();
          self.finish(st);
        },
        error() {},
      },
    });
    return this;
  }

  private onRequest(st: ConnState, frame: Buffer): void {
    if (frame.length < 8) return;
    const apiKey = frame.readInt16BE(0);
    const apiVersion = frame.readInt16BE(2);
    const correlationId = frame.readInt32BE(4);
    let clientId: string | null = null;
    if (frame.length >= 10) {
      const len = frame.readInt16BE(8);
      if (len >= 0 && frame.length >= 10 + len) clientId = frame.toString("utf8", 10, 10 + len);
    }
    // The broker talks to itself through its advertised listener too (transaction markers, KIP-890
    // AddPartitionsToTxn verification): label those connections by who really sends them.
    if (clientId !== null && BROKER_CLIENT_ID.test(clientId)) st.client = BROKER_CLIENT;
    st.pending.push({ apiKey, apiVersion, correlationId, clientId, request: frame, client: st.client });
  }

  private onResponse(st: ConnState, frame: Buffer): void {
    if (frame.length < 4) return;
    const corr = frame.readInt32BE(0);
    const idx = st.pending.findIndex((p) => p.correlationId === corr);
    if (idx < 0) return;
    // Requests before it never got an answer (acks=0 produce).
    for (const p of st.pending.splice(0, idx + 1)) this.record(p, p.correlationId === corr ? frame : null);
  }

  private record(p: Pending, response: Buffer | null): void {
    this.exchanges.push({
      apiKey: p.apiKey,
      apiVersion: p.apiVersion,
      client: p.client,
      clientId: p.clientId,
      correlationId: p.correlationId,
      request: p.request.toString("hex"),
      response: response ? response.toString("hex") : null,
    });
  }

  private finish(st: ConnState): void {
    if (st.closed) return;
    st.closed = true;
    st.upstream?.end();
    for (const p of st.pending.splice(0)) this.record(p, null);
    this.conns.delete(st);
  }

  /** Drop everything recorded under this label (setup traffic). */
  discard(client: string): void {
    for (let i = this.exchanges.length - 1; i >= 0; i--) if (this.exchanges[i]!.client === client) this.exchanges.splice(i, 1);
  }

  /**
   * Waits until every client connection has closed and every request has its answer, or the deadline
   * passes. The broker's own connections stay open; only their outstanding requests are waited for.
   */
  async idle(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const busy = () => [...this.conns].some((c) => c.client !== BROKER_CLIENT || c.pending.length > 0);
    while (busy() && Date.now() < deadline) await Bun.sleep(20);
  }

  stop(): void {
    this.server?.stop(true);
  }
}

// ---------------------------------------------------------------------------------------------
// Selection and output

const MAX_FRAME_BYTES = 32 * 1024;
const MAX_PER_KEY = 5;

export function selectExchanges(all: Exchange[]): Exchange[] {
  const groups = new Map<string, Exchange[]>();
  for (const e of all) {
    if (e.request.length / 2 > MAX_FRAME_BYTES) continue;
    if (e.response !== null && e.response.length / 2 > MAX_FRAME_BYTES) continue;
    const k = `${e.apiKey}/${e.apiVersion}/${e.client}`;
    let g = groups.get(k);
    if (!g) groups.set(k, (g = []));
    g.push(e);
  }
  const keep = new Set<Exchange>();
  for (const g of groups.values()) {
    const seen = new Set<string>();
    const picked: Exchange[] = [];
    for (const e of g) {
      const sig = `${e.request.length}/${e.response?.length ?? -1}`;
      if (picked.length < MAX_PER_KEY && !seen.has(sig)) {
        seen.add(sig);
        picked.push(e);
      }
    }
    for (const e of g) if (picked.length < MAX_PER_KEY && !picked.includes(e)) picked.push(e);
    for (const e of picked) keep.add(e);
  }
  return all
    .filter((e) => keep.has(e))
    .sort((a, b) => a.apiKey - b.apiKey || a.apiVersion - b.apiVersion || a.client.localeCompare(b.client));
}

export function writeFixture(path: string, exchanges: Exchange[]): number {
  const text = exchanges.length === 0 ? "[]\n" : `[\n${exchanges.map((e) => "  " + JSON.stringify(e)).join(",\n")}\n]\n`;
  writeFileSync(path, text);
  return text.length;
}

// ---------------------------------------------------------------------------------------------
// Scenarios

function ok(what: string, r: ToolResult): ToolResult {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

async function javaAdmin(proxy: RecordingProxy, bootstrap: string): Promise<void> {
  proxy.client = "java-admin";
  const t = "golden-java-admin";
  const bs = ["--bootstrap-server", bootstrap];
  ok("create", await runKafkaTool("kafka-topics", [...bs, "--create", "--topic", t, "--partitions", "3", "--replication-factor", "1"]));
  ok("describe", await runKafkaTool("kafka-topics", [...bs, "--describe", "--topic", t]));
  ok("list", await runKafkaTool("kafka-topics", [...bs, "--list"]));
  ok("delete", await runKafkaTool("kafka-topics", [...bs, "--delete", "--topic", t]));
}

async function createTopicUnrecorded(proxy: RecordingProxy, bootstrap: string, topic: string): Promise<void> {
  proxy.client = "setup";
  ok(
    "setup create",
    await runKafkaTool("kafka-topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1"]),
  );
  await proxy.idle();
  proxy.discard("setup");
}

async function javaConsole(proxy: RecordingProxy, bootstrap: string): Promise<void> {
  const t = "golden-java-console";
  await createTopicUnrecorded(proxy, bootstrap, t);
  proxy.client = "java-console-producer";
  const lines = Array.from({ length: 10 }, (_, i) => `key-${i}:value-${i}`).join("\n") + "\n";
  ok(
    "console producer",
    await runKafkaTool(
      "kafka-console-producer",
      ["--bootstrap-server", bootstrap, "--topic", t, "--property", "parse.key=true", "--property", "key.separator=:"],
      { stdin: lines },
    ),
  );
  await proxy.idle();
  proxy.client = "java-console-consumer";
  const r = ok(
    "console consumer",
    await runKafkaTool("kafka-console-consumer", [
      "--bootstrap-server",
      bootstrap,
      "--topic",
      t,
      "--group",
      "golden-java-console-group",
      "--from-beginning",
      "--max-messages",
      "10",
      "--timeout-ms",
      "30000",
    ]),
  );
  const n = r.stdout.trim().split("\n").length;
  if (n !== 10) throw new Error(`console consumer read ${n} records:\n${r.stdout}`);
}

async function javaTransactions(proxy: RecordingProxy, bootstrap: string): Promise<void> {
  const t = "golden-java-txn";
  await createTopicUnrecorded(proxy, bootstrap, t);
  proxy.client = "java-perf-producer-txn";
  ok(
    "transactional perf producer",
    await runKafkaTool("kafka-producer-perf-test", [
      "--topic",
      t,
      "--num-records",
      "20",
      "--record-size",
      "32",
      "--throughput",
      "-1",
      "--transactional-id",
      "golden-java-txn-id",
      "--transaction-duration-ms",
      "100",
      "--producer-props",
      `bootstrap.servers=${bootstrap}`,
    ]),
  );
  await proxy.idle();
  proxy.client = "java-console-consumer-read-committed";
  ok(
    "read_committed consumer",
    await runKafkaTool("kafka-console-consumer", [
      "--bootstrap-server",
      bootstrap,
      "--topic",
      t,
      "--from-beginning",
      "--isolation-level",
      "read_committed",
      "--max-messages",
      "20",
      "--timeout-ms",
      "30000",
    ]),
  );
}

async function kafkajsScenario(proxy: RecordingProxy, bootstrap: string): Promise<void> {
  // kafkajs 2.2.4 sometimes arms a timer with a large negative delay (a 0 timestamp minus now), which
  // Bun answers with a TimeoutNegativeWarning on stderr; clamp the delay to 0, which is what Bun does.
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...rest: unknown[]) =>
    realSetTimeout(fn, ms !== undefined && ms < 0 ? 0 : ms, ...rest)) as typeof setTimeout;
  const { Kafka, logLevel, Partitioners } = await import("kafkajs");
  const kafka = new Kafka({ clientId: "bunka-golden-kafkajs", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const t = "golden-kafkajs";

  proxy.client = "kafkajs-admin";
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: t, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
  await admin.fetchTopicMetadata({ topics: [t] });

  proxy.client = "kafkajs-producer";
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  await producer.send({
    topic: t,
    messages: Array.from({ length: 10 }, (_, i) => ({ key: `key-${i}`, value: `value-${i}`, headers: { h: `${i}` } })),
  });
  await producer.disconnect();

  proxy.client = "kafkajs-producer-txn";
  const txProducer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    transactionalId: "golden-kafkajs-txn-id",
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await txProducer.connect();
  const tx = await txProducer.transaction();
  await tx.send({ topic: t, messages: [{ key: "tx-0", value: "committed" }] });
  await tx.commit();
  const tx2 = await txProducer.transaction();
  await tx2.send({ topic: t, messages: [{ key: "tx-1", value: "aborted" }] });
  await tx2.abort();
  await txProducer.disconnect();

  proxy.client = "kafkajs-consumer";
  const consumer = kafka.consumer({ groupId: "golden-kafkajs-group", readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: t, fromBeginning: true });
  const want = 11; // 10 plain + 1 committed transactional record
  let got = 0;
  const deadline = Date.now() + 60_000;
  await new Promise<void>((resolveRun, rejectRun) => {
    consumer
      .run({
        eachMessage: async () => {
          got++;
          if (got >= want) resolveRun();
        },
      })
      .catch(rejectRun);
    const poll = setInterval(() => {
      if (got >= want) clearInterval(poll);
      else if (Date.now() > deadline) {
        clearInterval(poll);
        rejectRun(new Error(`kafkajs consumer got ${got}/${want} records`));
      }
    }, 50);
  });
  await consumer.disconnect();

  proxy.client = "kafkajs-admin";
  await admin.deleteTopics({ topics: [t] });
  await admin.disconnect();
}

const SCENARIOS = {
  "java-admin": javaAdmin,
  "java-console": javaConsole,
  "java-transactions": javaTransactions,
  kafkajs: kafkajsScenario,
} as const;
type ScenarioName = keyof typeof SCENARIOS;

async function captureAll(outDir: string, only: ScenarioName[]): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  const proxy = new RecordingProxy("127.0.0.1", 1).start();
  const kafka = await startApacheKafka({ advertisedPort: proxy.port });
  proxy.setUpstream("127.0.0.1", kafka.port);
  try {
    for (const name of only) {
      const started = Date.now();
      proxy.exchanges.length = 0;
      await SCENARIOS[name](proxy, kafka.bootstrap);
      await proxy.idle();
      const selected = selectExchanges(proxy.exchanges);
      const path = join(outDir, `${name}.json`);
      const bytes = writeFixture(path, selected);
      console.log(
        `${name}: ${selected.length}/${proxy.exchanges.length} exchanges, ${(bytes / 1024).toFixed(0)} KiB -> ${path} (${Date.now() - started} ms)`,
      );
    }
  } finally {
    proxy.stop();
    await kafka.stop();
  }
}

async function proxyOnly(args: string[]): Promise<void> {
  let upstream = "";
  let out = "";
  let client = "proxy";
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--upstream") upstream = args[++i] ?? "";
    else if (args[i] === "--out") out = args[++i] ?? "";
    else if (args[i] === "--client") client = args[++i] ?? client;
  }
  const m = /^(.+):(\d+)$/.exec(upstream);
  if (!m || !out) throw new Error("usage: capture-golden.ts proxy --upstream host:port --out file.json [--client label]");
  const proxy = new RecordingProxy(m[1]!, Number(m[2])).start();
  proxy.client = client;
  console.log(`PROXY=127.0.0.1:${proxy.port}`);
  const save = () => {
    proxy.stop();
    const n = writeFixture(out, selectExchanges(proxy.exchanges));
    console.error(`wrote ${out} (${n} bytes)`);
    process.exit(0);
  };
  process.on("SIGINT", save);
  process.on("SIGTERM", save);
  await new Promise(() => {});
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  if (args[0] === "proxy") {
    await proxyOnly(args.slice(1));
  } else {
    let only = Object.keys(SCENARIOS) as ScenarioName[];
    let outDir = join(REPO_ROOT, "tests/fixtures/golden");
    for (let i = 0; i < args.length; i++) {
      if (args[i] === "--only") {
        const names = (args[++i] ?? "").split(",").filter(Boolean);
        for (const n of names) if (!(n in SCENARIOS)) throw new Error(`unknown scenario ${n}; known: ${Object.keys(SCENARIOS).join(", ")}`);
        only = names as ScenarioName[];
      } else if (args[i] === "--out") outDir = args[++i] ?? outDir;
      else throw new Error(`unknown argument ${args[i]}`);
    }
    await captureAll(outDir, only);
  }
}
