/**
 * The Kafka listener over real loopback sockets, with a fake dispatch whose completion the tests control
 * through promises. No sleeps: every wait is for a condition, with a deadline.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { DecodeError } from "../../../src/errors/errors.ts";
import {
  type ConnectionInfo,
  type DispatchResult,
  type KafkaListener,
  type KafkaListenerOptions,
  type ResponseBudget,
  FrameAssembler,
  startKafkaListener,
  withReservedSizePrefix,
} from "../../../src/net/kafka-listener.ts";
import type { Logger } from "../../../src/platform/logger.ts";
import type { GatheredFrame } from "../../../src/protocol/gathered-frame.ts";
import { waitUntil } from "../../support/wait.ts";

// ---- helpers -------------------------------------------------------------------------------------------

/** Lets every pending callback and microtask run once (a few event-loop turns), without waiting on time. */
async function settleEventLoop(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function frame(payload: Uint8Array | string): Uint8Array {
  const body = typeof payload === "string" ? new TextEncoder().encode(payload) : payload;
  const out = new Uint8Array(4 + body.byteLength);
  new DataView(out.buffer).setInt32(0, body.byteLength);
  out.set(body, 4);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

interface CapturedLog {
  level: string;
  message: string;
  fields: Record<string, unknown> | undefined;
}
function capturingLogger(): Logger & { lines: CapturedLog[] } {
  const lines: CapturedLog[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push({ level, message, fields });
  };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A raw Kafka-framed client: collects response frames, knows when the server closed. */
interface TestClient {
  socket: Bun.Socket<undefined>;
  responses: Uint8Array[];
  receivedBytes: () => number;
  closed: Promise<void>;
  isClosed: () => boolean;
  write(bytes: Uint8Array): void;
}

const openClients: TestClient[] = [];
const openListeners: KafkaListener[] = [];

async function connect(port: number): Promise<TestClient> {
  const assembler = new FrameAssembler();
  const responses: Uint8Array[] = [];
  let received = 0;
  let closed = false;
  let resolveClosed!: () => void;
  const closedPromise = new Promise<void>((resolve) => (resolveClosed = resolve));
  const pendingWrites: Uint8Array[] = [];
  const flush = (s: Bun.Socket<undefined>) => {
    while (pendingWrites.length > 0) {
      const head = pendingWrites[0]!;
      const n = s.write(head);
      if (n < 0) return;
      if (n < head.byteLength) {
        pendingWrites[0] = head.subarray(n);
        return;
      }
      pendingWrites.shift();
    }
  };
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      binaryType: "uint8array",
      data(_s, chunk) {
        received += chunk.byteLength;
        assembler.push(chunk);
        for (;;) {
          const size = assembler.peekSize();
          if (size === undefined || assembler.buffered < 4 + size) break;
          assembler.take(4);
          responses.push(assembler.take(size));
        }
      },
      drain(s) {
        flush(s);
      },
      close() {
        closed = true;
        resolveClosed();
      },
      error() {},
    },
  });
  socket.setNoDelay(true);
  const client: TestClient = {
    socket,
    responses,
    receivedBytes: () => received,
    closed: closedPromise,
    isClosed: () => closed,
    write(bytes) {
      pendingWrites.push(bytes);
      if (pendingWrites.length === 1) flush(socket);
    },
  };
  openClients.push(client);
  return client;
}

async function listen(
  dispatch: KafkaListenerOptions["dispatch"],
  extra: Partial<KafkaListenerOptions> = {},
): Promise<KafkaListener> {
  const listener = await startKafkaListener({
    host: "127.0.0.1",
    port: 0,
    maxRequestBytes: 1024 * 1024,
    idleTimeoutMs: 60_000,
    log: capturingLogger(),
    dispatch,
    ...extra,
  });
  openListeners.push(listener);
  return listener;
}

const echo = (frameBytes: Uint8Array): DispatchResult => frameBytes.slice();

/** Waits until the closing side is observed as closed, with a deadline. */
async function expectClosed(client: TestClient, what: string): Promise<void> {
  await waitUntil(client.isClosed, what);
}

afterEach(async () => {
  for (const client of openClients.splice(0)) client.socket.end();
  for (const listener of openListeners.splice(0)) await listener.close();
});

// ---- framing -------------------------------------------------------------------------------------------

describe("FrameAssembler", () => {
  test("reassembles frames pushed one byte at a time, prefix included", () => {
    const a = new FrameAssembler();
    const wire = concat([frame("first"), frame(""), frame("third one")]);
    const out: string[] = [];
    for (const byte of wire) {
      a.push(Uint8Array.of(byte));
      for (;;) {
        const size = a.peekSize();
        if (size === undefined || a.buffered < 4 + size) break;
        a.take(4);
        out.push(text(a.take(size)));
      }
    }
    expect(out).toEqual(["first", "", "third one"]);
    expect(a.buffered).toBe(0);
  });

  test("a frame inside one chunk is a view, not a copy", () => {
    const a = new FrameAssembler();
    const chunk = concat([frame("abc"), frame("defg")]);
    a.push(chunk);
    a.take(4);
    const first = a.take(3);
    expect(first.buffer).toBe(chunk.buffer);
    expect(text(first)).toBe("abc");
  });

  test("reads a negative size prefix as negative", () => {
    const a = new FrameAssembler();
    a.push(Uint8Array.of(0xff, 0xff));
    a.push(Uint8Array.of(0xff, 0xfe));
    expect(a.peekSize()).toBe(-2);
  });

  test("a large frame split into many chunks is assembled in linear time", () => {
    const a = new FrameAssembler();
    const size = 200_000;
    const wire = frame(new Uint8Array(size).fill(7));
    for (let i = 0; i < wire.byteLength; i += 3) a.push(wire.subarray(i, i + 3));
    expect(a.peekSize()).toBe(size);
    a.take(4);
    const body = a.take(size);
    expect(body.byteLength).toBe(size);
    expect(body.every((b) => b === 7)).toBe(true);
  });
});

describe("startKafkaListener", () => {
  test("binds a free port when asked for port 0", async () => {
    const listener = await listen(echo);
    expect(listener.port).toBeGreaterThan(0);
    expect(listener.host).toBe("127.0.0.1");
  });

  test("a request sent byte by byte is dispatched once, whole", async () => {
    const seen: string[] = [];
    const listener = await listen((f) => {
      seen.push(text(f));
      return f.slice();
    });
    const client = await connect(listener.port);
    const payload = "a request that arrives one byte per TCP segment";
    for (const byte of frame(payload)) {
      client.write(Uint8Array.of(byte));
      // Yield so that each byte leaves as its own segment (no Nagle: setNoDelay).
      await settleEventLoop(1);
    }
    await waitUntil(() => client.responses.length === 1, "the echoed response");
    expect(seen).toEqual([payload]);
    expect(text(client.responses[0]!)).toBe(payload);
  });

  test("many frames in one write are each dispatched and answered in order", async () => {
    const listener = await listen(echo);
    const client = await connect(listener.port);
    const payloads = Array.from({ length: 200 }, (_, i) => `request-${i}`);
    client.write(concat(payloads.map(frame)));
    await waitUntil(() => client.responses.length === payloads.length, "200 responses");
    expect(client.responses.map(text)).toEqual(payloads);
  });

  test("frames straddling chunk boundaries in odd places", async () => {
    const listener = await listen(echo);
    const client = await connect(listener.port);
    const payloads = ["x".repeat(10), "y".repeat(1000), "", "z".repeat(5)];
    const wire = concat(payloads.map(frame));
    for (let i = 0; i < wire.byteLength; i += 7) {
      client.write(wire.subarray(i, i + 7));
      await settleEventLoop(1);
    }
    await waitUntil(() => client.responses.length === payloads.length, "4 responses");
    expect(client.responses.map(text)).toEqual(payloads);
  });

  test("out-of-order completion still answers in request order", async () => {
    const gates: Deferred<DispatchResult>[] = [];
    const listener = await listen((f) => {
      const gate = deferred<DispatchResult>();
      gates.push(gate);
      const copy = f.slice();
      return gate.promise.then(() => copy);
    });
    const client = await connect(listener.port);
    client.write(concat([frame("one"), frame("two"), frame("three")]));
    await waitUntil(() => gates.length === 3, "three concurrent dispatches");

    gates[2]!.resolve(null);
    gates[1]!.resolve(null);
    // Barrier: a full round trip on another connection, after which the settled dispatches have been
    // handled; nothing may have been written for "two" and "three" while "one" is pending.
    const other = await listen(echo);
    const probe = await connect(other.port);
    probe.write(frame("barrier"));
    await waitUntil(() => probe.responses.length === 1, "barrier response");
    await settleEventLoop();
    expect(client.responses.length).toBe(0);
    expect(listener.connectionStats()[0]!.inFlight).toBe(3);

    gates[0]!.resolve(null);
    await waitUntil(() => client.responses.length === 3, "three responses");
    expect(client.responses.map(text)).toEqual(["one", "two", "three"]);
  });

  test("a null response writes nothing and does not hold back later responses", async () => {
    const listener = await listen((f) => (text(f) === "acks=0" ? null : f.slice()));
    const client = await connect(listener.port);
    client.write(concat([frame("acks=0"), frame("answered"), frame("acks=0"), frame("also answered")]));
    await waitUntil(() => client.responses.length === 2, "two responses");
    await settleEventLoop();
    expect(client.responses.map(text)).toEqual(["answered", "also answered"]);
    expect(client.receivedBytes()).toBe(4 + 8 + 4 + 13);
  });

  test("an async null response writes nothing", async () => {
    const listener = await listen(async (f) => (text(f) === "acks=0" ? null : f.slice()));
    const client = await connect(listener.port);
    client.write(concat([frame("acks=0"), frame("answered")]));
    await waitUntil(() => client.responses.length === 1, "one response");
    expect(client.responses.map(text)).toEqual(["answered"]);
    expect(client.receivedBytes()).toBe(4 + 8);
  });

  test("a response with a reserved prefix goes out intact (zero-copy path)", async () => {
    const listener = await listen((f) => {
      const framed = new Uint8Array(4 + f.byteLength);
      framed.set(f, 4);
      return withReservedSizePrefix(framed);
    });
    const client = await connect(listener.port);
    client.write(concat([frame("reserved"), frame("prefix")]));
    await waitUntil(() => client.responses.length === 2, "two responses");
    expect(client.responses.map(text)).toEqual(["reserved", "prefix"]);
  });

  test("a response larger than the copy threshold goes out intact (prefix and body written apart)", async () => {
    const big = new Uint8Array(300_000).map((_, i) => i % 251);
    const listener = await listen(() => big);
    const client = await connect(listener.port);
    client.write(concat([frame("a"), frame("b")]));
    await waitUntil(() => client.responses.length === 2, "two big responses");
    expect(client.responses[0]).toEqual(big);
    expect(client.responses[1]).toEqual(big);
  });
});

describe("size limits", () => {
  test("a frame over maxRequestBytes closes that connection; another connection is still served", async () => {
    const log = capturingLogger();
    let dispatched = 0;
    const listener = await listen(
      (f) => {
        dispatched++;
        return f.slice();
      },
      { maxRequestBytes: 1024, log },
    );
    const bad = await connect(listener.port);
    const good = await connect(listener.port);
    // Only the prefix is sent: the listener must not wait for (or allocate) the announced size.
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setInt32(0, 1025);
    bad.write(prefix);
    await expectClosed(bad, "the oversize connection to close");
    expect(dispatched).toBe(0);
    expect(log.lines.some((l) => l.level === "warn" && l.fields?.size === 1025)).toBe(true);

    good.write(frame("x".repeat(1024)));
    await waitUntil(() => good.responses.length === 1, "the other connection's response");
    expect(good.responses[0]!.byteLength).toBe(1024);
    expect(listener.connectionCount()).toBe(1);
  });

  test("a huge announced size is refused without allocating it", async () => {
    const listener = await listen(echo, { maxRequestBytes: 100 * 1024 * 1024 });
    const client = await connect(listener.port);
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setInt32(0, 0x7fffffff);
    client.write(prefix);
    await expectClosed(client, "the connection to close");
  });

  test("a negative size closes the connection", async () => {
    const log = capturingLogger();
    const listener = await listen(echo, { log });
    const client = await connect(listener.port);
    client.write(Uint8Array.of(0xff, 0xff, 0xff, 0xff));
    await expectClosed(client, "the connection to close");
    expect(log.lines.some((l) => l.level === "warn" && l.fields?.size === -1)).toBe(true);
  });

  test("an oversize frame right after a valid one in the same write closes the connection", async () => {
    // The close is immediate, like Apache's InvalidReceiveException: whatever was in flight is dropped.
    const listener = await listen(echo, { maxRequestBytes: 16 });
    const client = await connect(listener.port);
    client.write(concat([frame("ok"), frame("x".repeat(17))]));
    await expectClosed(client, "the connection to close");
  });
});

describe("failing dispatch", () => {
  test("a throw closes the connection after the earlier responses are flushed", async () => {
    const errors: unknown[] = [];
    const first = deferred<DispatchResult>();
    let thirdDispatched = false;
    const listener = await listen(
      (f) => {
        const t = text(f);
        if (t === "first") return first.promise;
        if (t === "bad") throw new DecodeError("malformed request header");
        thirdDispatched = true;
        return f.slice();
      },
      { onConnectionError: (error) => errors.push(error) },
    );
    const client = await connect(listener.port);
    client.write(concat([frame("first"), frame("bad"), frame("third")]));
    await waitUntil(() => errors.length === 1 && listener.connectionStats()[0]?.inFlight === 2, "the failure reported");
    // Nothing after the failed request is dispatched, and the connection stays open for the earlier answer.
    expect(thirdDispatched).toBe(false);
    expect(client.isClosed()).toBe(false);

    first.resolve(new TextEncoder().encode("first answered"));
    await expectClosed(client, "the connection to close");
    expect(client.responses.map(text)).toEqual(["first answered"]);
    expect(errors.length).toBe(1);
    expect(errors[0]).toBeInstanceOf(DecodeError);
    expect(thirdDispatched).toBe(false);
  });

  test("a rejected promise closes the connection too; other connections are unaffected", async () => {
    const errors: unknown[] = [];
    const listener = await listen(
      async (f) => {
        if (text(f) === "bad") throw new DecodeError("bad");
        return f.slice();
      },
      { onConnectionError: (error) => errors.push(error) },
    );
    const bad = await connect(listener.port);
    const good = await connect(listener.port);
    bad.write(concat([frame("fine"), frame("bad")]));
    await expectClosed(bad, "the failing connection to close");
    expect(bad.responses.map(text)).toEqual(["fine"]);
    good.write(frame("still served"));
    await waitUntil(() => good.responses.length === 1, "the other connection's response");
    expect(text(good.responses[0]!)).toBe("still served");
    expect(errors.length).toBe(1);
  });

  test("a malformed frame logs one line without a stack; many on one connection still log one", async () => {
    const log = capturingLogger();
    const errors: unknown[] = [];
    const listener = await listen(
      async (f) => {
        if (text(f).startsWith("bad")) throw new DecodeError(`malformed ${text(f)}`);
        return f.slice();
      },
      { log, onConnectionError: (error) => errors.push(error) },
    );
    const client = await connect(listener.port);
    client.write(concat([frame("bad1"), frame("bad2"), frame("bad3")]));
    await expectClosed(client, "the connection to close");
    await waitUntil(() => errors.length >= 1, "the failure reported");
    const lines = log.lines.filter((l) => l.level === "warn");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.message).toBe("closing connection after a malformed request");
    expect(lines[0]!.fields?.error).toBe("DecodeError: malformed bad1");
    expect(lines[0]!.fields?.stack).toBeUndefined();
  });

  test("a failure that is not malformed input keeps its stack", async () => {
    const log = capturingLogger();
    const listener = await listen(
      () => {
        throw new TypeError("a bug of ours");
      },
      { log },
    );
    const client = await connect(listener.port);
    client.write(frame("x"));
    await expectClosed(client, "the connection to close");
    await waitUntil(() => log.lines.some((l) => l.level === "warn"), "the line");
    const line = log.lines.find((l) => l.level === "warn")!;
    expect(line.message).toBe("closing connection after a failed request");
    expect(String(line.fields?.stack)).toContain("a bug of ours");
  });

  test("connections failing in a loop write at most the limit's lines per interval, the next line counts the dropped", async () => {
    const log = capturingLogger();
    let nowMs = 0;
    const errors: unknown[] = [];
    const listener = await listen(
      () => {
        throw new DecodeError("malformed");
      },
      { log, connectionErrorLogLimit: { lines: 3, perMs: 1000 }, monotonicMs: () => nowMs, onConnectionError: (e) => errors.push(e) },
    );
    const flood = async (connections: number) => {
      for (let i = 0; i < connections; i++) {
        const client = await connect(listener.port);
        client.write(frame("x"));
        await expectClosed(client, "the connection to close");
      }
    };
    await flood(20);
    await waitUntil(() => errors.length === 20, "every failure reported to the callback");
    const warned = () => log.lines.filter((l) => l.level === "warn");
    expect(warned()).toHaveLength(3);
    nowMs = 1000;
    await flood(1);
    await waitUntil(() => warned().length === 4, "a line in the next interval");
    expect(warned()[3]!.fields?.linesDropped).toBe(17);
    expect(warned()[0]!.fields?.linesDropped).toBeUndefined();
  });

  test("ConnectionInfo.close() closes the connection from the dispatcher", async () => {
    let seenConn: ConnectionInfo | undefined;
    const listener = await listen((_f, conn) => {
      seenConn = conn;
      conn.close();
      return null;
    });
    const client = await connect(listener.port);
    client.write(frame("close me"));
    await expectClosed(client, "the connection to close");
    expect(seenConn?.remoteAddress).toBe("127.0.0.1");
    expect(seenConn?.id).toBeGreaterThan(0);
    expect(listener.connectionCount()).toBe(0);
  });
});

describe("idle connections", () => {
  test("a connection with no traffic is closed after idleTimeoutMs", async () => {
    const listener = await listen(echo, { idleTimeoutMs: 30 });
    const client = await connect(listener.port);
    await client.closed;
    await waitUntil(() => listener.connectionCount() === 0, "the listener to forget the connection");
  });

  test("a request being worked on keeps its connection open; it closes once idle again", async () => {
    const gate = deferred<DispatchResult>();
    const listener = await listen(() => gate.promise, { idleTimeoutMs: 30 });
    const busy = await connect(listener.port);
    busy.write(frame("slow"));
    await waitUntil(() => listener.connectionStats()[0]?.inFlight === 1, "the request in flight");
    // A second connection opened after the busy one's last byte: once it has idled out, so would have the
    // busy one, were its pending request not counted.
    const idle = await connect(listener.port);
    await idle.closed;
    expect(busy.isClosed()).toBe(false);

    gate.resolve(new TextEncoder().encode("done"));
    await waitUntil(() => busy.responses.length === 1, "the slow response");
    await busy.closed;
  });
});

describe("idle connections with stuck output", () => {
  test("a client that stops reading for idleTimeoutMs is closed even with responses queued", async () => {
    const response = new Uint8Array(16 * 1024 * 1024);
    const listener = await listen(() => response, { idleTimeoutMs: 30 });
    const client = await connect(listener.port);
    client.socket.pause();
    client.write(frame("big please"));
    await waitUntil(() => (listener.connectionStats()[0]?.queuedOutputBytes ?? 0) > 0, "queued output");
    await waitUntil(() => listener.connectionCount() === 0, "the stuck connection to be closed");
  });
});

describe("pooled frames", () => {
  /** A reserved-prefix frame marked with a release function, as protocol/header.ts marks pooled ones. */
  function releasable(body: Uint8Array, onRelease: () => void): Uint8Array {
    const framed = new Uint8Array(4 + body.byteLength);
    framed.set(body, 4);
    const view = withReservedSizePrefix(framed) as Uint8Array & { [key: symbol]: unknown };
    view[Symbol.for("bunka.releaseFrameAfterWrite")] = onRelease;
    return view;
  }

  test("a frame the kernel takes at once is given back once, right after the write", async () => {
    let releases = 0;
    const listener = await listen((f) => releasable(f.slice(), () => releases++));
    const client = await connect(listener.port);
    client.write(frame("small"));
    await waitUntil(() => client.responses.length === 1, "the response");
    expect(text(client.responses[0]!)).toBe("small");
    expect(releases).toBe(1);
  });

  test("a frame the kernel takes in parts is given back only once its last byte is taken", async () => {
    const body = new Uint8Array(16 * 1024 * 1024).map((_, i) => i % 253);
    let releases = 0;
    let receivedAtRelease = -1;
    let client!: TestClient;
    const listener = await listen(() =>
      releasable(body, () => {
        releases++;
        receivedAtRelease = client.receivedBytes();
      }),
    );
    client = await connect(listener.port);
    client.socket.pause();
    client.write(frame("big"));
    await waitUntil(() => (listener.connectionStats()[0]?.queuedOutputBytes ?? 0) > 0, "output queued behind a client that does not read");
    await settleEventLoop(20);
    expect(releases).toBe(0);
    client.socket.resume();
    await waitUntil(() => client.responses.length === 1, "the whole response", 30_000);
    expect(releases).toBe(1);
    // Released after the listener's last write, which the client may not have read yet, but never before
    // the queue was empty.
    expect(receivedAtRelease).toBeGreaterThan(0);
    expect(listener.connectionStats()[0]!.queuedOutputBytes).toBe(0);
    expect(Buffer.compare(client.responses[0]!, body)).toBe(0);
  });

  test("a frame whose connection closes before it is written is never given back", async () => {
    const body = new Uint8Array(16 * 1024 * 1024).fill(9);
    expect(await releasesWhenClosedBeforeWritten((onRelease) => releasable(body, onRelease))).toBe(0);
  });
});

/**
 * Answers one large request with `respond`'s response behind a client that does not read, closes the
 * client, and returns how often the response's release was called (and checks nothing stays held).
 */
async function releasesWhenClosedBeforeWritten(respond: (onRelease: () => void) => DispatchResult): Promise<number> {
  let releases = 0;
  const listener = await listen(() => respond(() => releases++));
  const client = await connect(listener.port);
  client.socket.pause();
  client.write(frame("big"));
  await waitUntil(() => (listener.connectionStats()[0]?.queuedOutputBytes ?? 0) > 0, "output queued");
  client.socket.terminate();
  await waitUntil(() => listener.connectionStats().length === 0, "the server to drop the connection");
  await settleEventLoop(10);
  expect(listener.heldResponseBytes()).toBe(0);
  return releases;
}

describe("gathered frames", () => {
  /** A gathered frame of `parts` (protocol/gathered-frame.ts): the prefix in front of the first piece. */
  function gathered(parts: Uint8Array[], onRelease?: () => void): GatheredFrame {
    const byteLength = parts.reduce((n, p) => n + p.byteLength, 0);
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setInt32(0, byteLength);
    return { kind: "gathered", pieces: [prefix, ...parts], byteLength, ...(onRelease ? { releaseAfterWrite: onRelease } : {}) };
  }

  test("the pieces arrive as one response, in order, and requests after it keep their order", async () => {
    const a = new Uint8Array(200_000).map((_, i) => i % 251);
    const b = new TextEncoder().encode("-middle-");
    const c = new Uint8Array(300_000).map((_, i) => (i * 7) % 253);
    const listener = await listen((f) => (text(f) === "gathered" ? gathered([a, b, c]) : f.slice()));
    const client = await connect(listener.port);
    client.write(concat([frame("before"), frame("gathered"), frame("after")]));
    await waitUntil(() => client.responses.length === 3, "three responses");
    expect(text(client.responses[0]!)).toBe("before");
    expect(Buffer.compare(client.responses[1]!, concat([a, b, c]))).toBe(0);
    expect(text(client.responses[2]!)).toBe("after");
  });

  test("its release waits for the last piece; the held bytes count the whole frame until written", async () => {
    const pieces = [new Uint8Array(8 * 1024 * 1024).fill(1), new Uint8Array(10).fill(2), new Uint8Array(8 * 1024 * 1024).fill(3)];
    let releases = 0;
    const listener = await listen(() => gathered(pieces, () => releases++));
    const client = await connect(listener.port);
    client.socket.pause();
    client.write(frame("big"));
    await waitUntil(() => (listener.connectionStats()[0]?.queuedOutputBytes ?? 0) > 0, "output queued behind a client that does not read");
    await settleEventLoop(20);
    expect(releases).toBe(0);
    const stats = listener.connectionStats()[0]!;
    // Whatever the kernel has not taken is held (the pieces after the one it refused included).
    expect(stats.heldResponseBytes).toBe(stats.queuedOutputBytes);
    expect(stats.queuedOutputBytes).toBeGreaterThan(8 * 1024 * 1024);
    client.socket.resume();
    await waitUntil(() => client.responses.length === 1, "the whole response", 30_000);
    expect(releases).toBe(1);
    expect(listener.connectionStats()[0]!.heldResponseBytes).toBe(0);
    expect(Buffer.compare(client.responses[0]!, concat(pieces))).toBe(0);
  });

  test("a gathered frame whose connection closes before it is written is never released", async () => {
    const pieces = [new Uint8Array(16 * 1024 * 1024).fill(5), new Uint8Array(1)];
    expect(await releasesWhenClosedBeforeWritten((onRelease) => gathered(pieces, onRelease))).toBe(0);
  });
});

describe("backpressure", () => {
  test("a client that does not read stops dispatch on its connection; reading resumes it", async () => {
    // Large enough that one response cannot fit in the loopback socket buffers of both ends.
    const responseBytes = 16 * 1024 * 1024;
    const response = new Uint8Array(responseBytes).fill(1);
    let dispatched = 0;
    const listener = await listen(() => {
      dispatched++;
      return response;
    });
    const client = await connect(listener.port);
    client.socket.pause(); // Stop reading: the server's writes back up.
    const requests = 8;
    client.write(concat(Array.from({ length: requests }, (_, i) => frame(`r${i}`))));
    await waitUntil(() => {
      const stats = listener.connectionStats()[0];
      return stats !== undefined && stats.readingPaused && stats.queuedOutputBytes > 0;
    }, "the server to hold queued output and pause reading");
    const dispatchedWhileBlocked = dispatched;
    expect(dispatchedWhileBlocked).toBeGreaterThanOrEqual(1);
    expect(dispatchedWhileBlocked).toBeLessThan(requests);
    // Nothing more is dispatched while the output is stuck, however much the event loop turns.
    await settleEventLoop(20);
    expect(dispatched).toBe(dispatchedWhileBlocked);

    client.socket.resume();
    await waitUntil(() => client.responses.length === requests, "every response once the client reads", 30_000);
    expect(dispatched).toBe(requests);
    expect(client.responses.every((r) => r.byteLength === responseBytes)).toBe(true);
    const stats = listener.connectionStats()[0]!;
    expect(stats.readingPaused).toBe(false);
    expect(stats.queuedOutputBytes).toBe(0);
  });

  test("in-flight requests per connection are bounded; reading resumes as they finish", async () => {
    const gates: Deferred<DispatchResult>[] = [];
    const listener = await listen(
      (f) => {
        const gate = deferred<DispatchResult>();
        gates.push(gate);
        const copy = f.slice();
        return gate.promise.then(() => copy);
      },
      { maxInFlightPerConnection: 3 },
    );
    const client = await connect(listener.port);
    const payloads = Array.from({ length: 10 }, (_, i) => `q${i}`);
    client.write(concat(payloads.map(frame)));
    await waitUntil(() => gates.length === 3 && listener.connectionStats()[0]?.readingPaused === true, "3 in flight, paused");
    await settleEventLoop(20);
    expect(gates.length).toBe(3);

    // Release requests as they are dispatched until all ten are answered.
    let released = 0;
    await waitUntil(() => {
      while (released < gates.length) gates[released++]!.resolve(null);
      return client.responses.length === payloads.length;
    }, "all ten responses");
    expect(client.responses.map(text)).toEqual(payloads);
  });

  test("a slow connection does not hold up another one", async () => {
    const gate = deferred<DispatchResult>();
    const listener = await listen((f) => (text(f) === "slow" ? gate.promise : f.slice()));
    const slow = await connect(listener.port);
    const fast = await connect(listener.port);
    slow.write(frame("slow"));
    fast.write(frame("fast"));
    await waitUntil(() => fast.responses.length === 1, "the fast response");
    expect(slow.responses.length).toBe(0);
    gate.resolve(new TextEncoder().encode("slow done"));
    await waitUntil(() => slow.responses.length === 1, "the slow response");
  });
});

describe("response bytes held", () => {
  /** Requests answered through gates the test opens; each request's budget is kept by its payload. */
  function gatedDispatch() {
    const gates = new Map<string, Deferred<DispatchResult>>();
    const budgets = new Map<string, ResponseBudget>();
    const dispatched: string[] = [];
    const dispatch = (f: Uint8Array, conn: ConnectionInfo) => {
      const name = text(f);
      dispatched.push(name);
      budgets.set(name, conn.responseBudget);
      const gate = deferred<DispatchResult>();
      gates.set(name, gate);
      return gate.promise;
    };
    return { gates, budgets, dispatched, dispatch };
  }
  const statsOf = (listener: KafkaListener) => listener.connectionStats()[0]!;

  test("finished responses waiting behind an earlier one count; at the bound the connection stops dispatching", async () => {
    const gate = deferred<DispatchResult>();
    const responseBytes = 300 * 1024;
    let dispatched = 0;
    const listener = await listen(
      (f) => {
        dispatched++;
        return text(f) === "slow" ? gate.promise : new Uint8Array(responseBytes);
      },
      { maxHeldResponseBytesPerConnection: 1024 * 1024 },
    );
    const client = await connect(listener.port);
    client.write(concat([frame("slow"), ...Array.from({ length: 10 }, (_, i) => frame(`fast-${i}`))]));
    // 300 KiB each, prefix included: the fourth takes the connection past 1 MiB, and nothing follows it.
    await waitUntil(() => statsOf(listener).pauseReason === "connection-bytes", "paused at the byte bound");
    await settleEventLoop(20);
    expect(dispatched).toBe(5);
    expect(statsOf(listener)).toMatchObject({ inFlight: 5, heldResponseBytes: 4 * (responseBytes + 4), queuedOutputBytes: 0, readingPaused: true });
    expect(listener.heldResponseBytes()).toBe(4 * (responseBytes + 4));
    expect(listener.pausedConnections()).toEqual({ output: 0, "in-flight": 0, "connection-bytes": 1, "broker-bytes": 0 });

    gate.resolve(new TextEncoder().encode("slow done"));
    await waitUntil(() => client.responses.length === 11, "every response once the head is answered");
    expect(text(client.responses[0]!)).toBe("slow done");
    expect(dispatched).toBe(11);
    await waitUntil(() => listener.heldResponseBytes() === 0, "nothing held once everything is written");
    expect(statsOf(listener)).toMatchObject({ heldResponseBytes: 0, readingPaused: false });
    expect(listener.pausedConnections()["connection-bytes"]).toBe(0);
  });

  test("a budget grants what the connection has room for, shared by its requests, and gives way to the response", async () => {
    const { gates, budgets, dispatch } = gatedDispatch();
    const listener = await listen(dispatch, { maxHeldResponseBytesPerConnection: 1000 });
    const client = await connect(listener.port);
    client.write(concat([frame("a"), frame("b")]));
    await waitUntil(() => budgets.size === 2, "both requests dispatched");
    const a = budgets.get("a")!;
    const b = budgets.get("b")!;
    expect(a.mayExceed()).toBe(true);
    expect(a.reserve(600)).toBe(600);
    // Another request now holds bytes on the connection: b may not go past its grant.
    expect(b.mayExceed()).toBe(false);
    expect(b.reserve(600)).toBe(400);
    expect(b.reserve(1)).toBe(0);
    expect(listener.heldResponseBytes()).toBe(1000);
    a.adjust(-100);
    expect(listener.heldResponseBytes()).toBe(900);
    // Giving back more than was reserved stops at nothing; a positive adjustment (a first batch past the
    // grant) is counted whatever the room.
    b.adjust(-10_000);
    expect(b.mayExceed()).toBe(false);
    expect(listener.heldResponseBytes()).toBe(500);
    b.adjust(2000);
    expect(listener.heldResponseBytes()).toBe(2500);

    // b is answered first but waits for a: its reservation gives way to its response (prefix included).
    gates.get("b")!.resolve(new Uint8Array(50));
    await waitUntil(() => listener.heldResponseBytes() === 500 + 54, "b's response instead of its reservation");
    // A budget whose request is answered no longer counts.
    b.adjust(1000);
    expect(b.reserve(10)).toBe(0);
    expect(listener.heldResponseBytes()).toBe(554);
    gates.get("a")!.resolve(null);
    await waitUntil(() => client.responses.length === 1, "b's response");
    await waitUntil(() => listener.heldResponseBytes() === 0, "nothing held");
  });

  test("reservations count toward the bound: a connection holding its bound dispatches nothing more", async () => {
    const { gates, budgets, dispatched, dispatch } = gatedDispatch();
    const listener = await listen(dispatch, { maxHeldResponseBytesPerConnection: 1000 });
    const client = await connect(listener.port);
    client.write(frame("a"));
    await waitUntil(() => budgets.has("a"), "a dispatched");
    expect(budgets.get("a")!.reserve(5000)).toBe(1000);
    client.write(frame("b"));
    await waitUntil(() => statsOf(listener).pauseReason === "connection-bytes", "paused by the reservation");
    await settleEventLoop(20);
    expect(dispatched).toEqual(["a"]);
    // Its answer (nothing) releases the reservation and resumes the connection.
    gates.get("a")!.resolve(null);
    await waitUntil(() => dispatched.length === 2, "b dispatched once a is answered");
    gates.get("b")!.resolve(null);
    await waitUntil(() => listener.heldResponseBytes() === 0 && !statsOf(listener).readingPaused, "reading again");
  });

  test("across connections: one holding its equal share stops, one holding nothing is served, and release wakes the first", async () => {
    const hog = gatedDispatch();
    const served: string[] = [];
    let readerBudget: ResponseBudget | undefined;
    const listener = await listen(
      (f, conn) => {
        const name = text(f);
        if (name.startsWith("hog")) return hog.dispatch(f, conn);
        served.push(name);
        readerBudget = conn.responseBudget;
        return f.slice();
      },
      { maxHeldResponseBytes: 1024 * 1024, maxHeldResponseBytesPerConnection: 8 * 1024 * 1024 },
    );
    const hogClient = await connect(listener.port);
    hogClient.write(frame("hog-1"));
    await waitUntil(() => hog.budgets.has("hog-1"), "the hog's first request");
    // Alone, the hog may take the whole broker-wide bound, not its per-connection one.
    expect(hog.budgets.get("hog-1")!.reserve(4 * 1024 * 1024)).toBe(1024 * 1024);
    hogClient.write(frame("hog-2"));
    const hogStats = () => listener.connectionStats().find((s) => s.id === 1)!;
    await waitUntil(() => hogStats().pauseReason === "broker-bytes", "the hog paused by the broker-wide bound");
    expect(listener.pausedConnections()["broker-bytes"]).toBe(1);

    // A client holding nothing is served at once, and its budget gets an equal share of the bound.
    const reader = await connect(listener.port);
    reader.write(frame("reader-1"));
    await waitUntil(() => reader.responses.length === 1, "the reader answered while the bound is passed");
    expect(readerBudget!.reserve(4 * 1024 * 1024)).toBe(0); // answered already: its budget is spent
    reader.write(frame("reader-2"));
    await waitUntil(() => reader.responses.length === 2, "the reader's second request");
    expect(served).toEqual(["reader-1", "reader-2"]);
    await settleEventLoop(20);
    expect(hog.dispatched).toEqual(["hog-1"]);

    // The hog's bytes released: it holds nothing, so it is woken and its next request dispatched.
    hog.gates.get("hog-1")!.resolve(null);
    await waitUntil(() => hog.dispatched.length === 2, "the hog's second request once it holds nothing");
    hog.gates.get("hog-2")!.resolve(null);
    await waitUntil(() => listener.heldResponseBytes() === 0, "nothing held");
    expect(listener.pausedConnections()["broker-bytes"]).toBe(0);
  });

  test("while the bound is passed, a new connection's budget is an equal share; the share holder goes on until it holds it", async () => {
    const { budgets, gates, dispatched, dispatch } = gatedDispatch();
    const listener = await listen(dispatch, { maxHeldResponseBytes: 1000, maxHeldResponseBytesPerConnection: 10_000 });
    const first = await connect(listener.port);
    first.write(frame("first"));
    await waitUntil(() => budgets.has("first"), "first dispatched");
    expect(budgets.get("first")!.reserve(1500)).toBe(1000);
    const second = await connect(listener.port);
    second.write(frame("second-1"));
    await waitUntil(() => budgets.has("second-1"), "second dispatched");
    // Two connections share the bound: 500 each, although the total is already at 1000.
    expect(budgets.get("second-1")!.reserve(400)).toBe(400);
    second.write(frame("second-2"));
    await waitUntil(() => budgets.has("second-2"), "below its share, the second connection goes on");
    expect(budgets.get("second-2")!.reserve(400)).toBe(100);
    second.write(frame("second-3"));
    await waitUntil(() => listener.pausedConnections()["broker-bytes"] === 1, "at its share it stops too");
    await settleEventLoop(20);
    expect(dispatched).toEqual(["first", "second-1", "second-2"]);
    expect(listener.heldResponseBytes()).toBe(1500);
    // The first connection's bytes released: the total is back under the bound and the second goes on.
    gates.get("first")!.resolve(null);
    await waitUntil(() => dispatched.length === 4, "second-3 dispatched");
    for (const name of ["second-1", "second-2", "second-3"]) gates.get(name)!.resolve(null);
    await waitUntil(() => listener.heldResponseBytes() === 0, "nothing held");
  });

  test("a connection that closes gives back its queued output, waiting responses and reservations", async () => {
    const responseBytes = 16 * 1024 * 1024;
    const gate = deferred<DispatchResult>();
    let budget: ResponseBudget | undefined;
    const listener = await listen((f, conn) => {
      if (text(f) === "pending") {
        budget = conn.responseBudget;
        budget.reserve(1234);
        return gate.promise;
      }
      return new Uint8Array(responseBytes);
    });
    const client = await connect(listener.port);
    client.socket.pause();
    client.write(frame("big"));
    await waitUntil(() => statsOf(listener).queuedOutputBytes > 0, "output stuck in the kernel's buffers");
    expect(statsOf(listener).pauseReason).toBe("output");
    expect(listener.pausedConnections().output).toBe(1);
    expect(listener.heldResponseBytes()).toBe(statsOf(listener).queuedOutputBytes);
    client.socket.end();
    await waitUntil(() => listener.connectionCount() === 0, "the server saw the close");
    expect(listener.heldResponseBytes()).toBe(0);
    expect(listener.pausedConnections().output).toBe(0);

    // A reservation of a request still being answered, dropped with its connection; the late answer and
    // the budget count for nothing afterwards.
    const other = await connect(listener.port);
    other.write(frame("pending"));
    await waitUntil(() => listener.heldResponseBytes() === 1234, "the reservation");
    other.socket.end();
    await waitUntil(() => listener.connectionCount() === 0, "the second close");
    expect(listener.heldResponseBytes()).toBe(0);
    budget!.adjust(5000);
    expect(budget!.reserve(10)).toBe(0);
    gate.resolve(new Uint8Array(100));
    await settleEventLoop();
    expect(listener.heldResponseBytes()).toBe(0);
  });

  test("a failed request drops the ones after it, and what they held", async () => {
    const { gates, budgets, dispatch } = gatedDispatch();
    const listener = await listen(dispatch, { onConnectionError: () => {} });
    const client = await connect(listener.port);
    client.write(concat([frame("first"), frame("second"), frame("third")]));
    await waitUntil(() => budgets.size === 3, "three dispatched");
    budgets.get("second")!.reserve(700);
    budgets.get("third")!.reserve(300);
    gates.get("third")!.resolve(new Uint8Array(10)); // finished, waiting for its turn
    await waitUntil(() => listener.heldResponseBytes() === 700 + 14, "second's reservation and third's response");
    gates.get("first")!.reject(new DecodeError("malformed"));
    await expectClosed(client, "the connection closed after the failure");
    expect(listener.heldResponseBytes()).toBe(0);
    gates.get("second")!.resolve(new Uint8Array(10));
    await settleEventLoop();
    expect(listener.heldResponseBytes()).toBe(0);
  });

  test("no bound: 0 or less turns a bound off", async () => {
    const { budgets, gates, dispatch } = gatedDispatch();
    const listener = await listen(dispatch, { maxHeldResponseBytes: 0, maxHeldResponseBytesPerConnection: -1 });
    const client = await connect(listener.port);
    client.write(frame("a"));
    await waitUntil(() => budgets.has("a"), "a dispatched");
    expect(budgets.get("a")!.reserve(1e12)).toBe(1e12);
    expect(budgets.get("a")!.mayExceed()).toBe(true);
    gates.get("a")!.resolve(null);
    await waitUntil(() => listener.heldResponseBytes() === 0, "nothing held");
  });
});

describe("connections", () => {
  test("connections beyond maxConnections are closed at once", async () => {
    const listener = await listen(echo, { maxConnections: 1 });
    const first = await connect(listener.port);
    await waitUntil(() => listener.connectionCount() === 1, "the first connection");
    const second = await connect(listener.port);
    await expectClosed(second, "the second connection to be refused");
    first.write(frame("still here"));
    await waitUntil(() => first.responses.length === 1, "the first connection's response");
  });

  test("connectionCount follows clients closing", async () => {
    const listener = await listen(echo);
    const a = await connect(listener.port);
    await connect(listener.port);
    await waitUntil(() => listener.connectionCount() === 2, "two connections");
    a.socket.end();
    await waitUntil(() => listener.connectionCount() === 1, "one connection");
  });
});

describe("close()", () => {
  test("waits for in-flight requests, flushes their responses, then closes", async () => {
    const gate = deferred<DispatchResult>();
    const listener = await listen(() => gate.promise);
    const client = await connect(listener.port);
    const idleClient = await connect(listener.port);
    client.write(frame("in flight"));
    await waitUntil(() => listener.connectionStats().some((s) => s.inFlight === 1), "the request in flight");

    let closed = false;
    const closing = listener.close().then(() => {
      closed = true;
    });
    // The connection without work is closed straight away, and no new connection is accepted.
    await idleClient.closed;
    await expect(connect(listener.port)).rejects.toThrow();
    await settleEventLoop(20);
    expect(closed).toBe(false);
    expect(client.isClosed()).toBe(false);

    gate.resolve(new TextEncoder().encode("answered before shutdown"));
    await closing;
    await client.closed;
    expect(client.responses.map(text)).toEqual(["answered before shutdown"]);
    expect(listener.connectionCount()).toBe(0);
  });

  test("gives up on requests that never finish after closeTimeoutMs", async () => {
    const never = deferred<DispatchResult>();
    const log = capturingLogger();
    const listener = await listen(() => never.promise, { closeTimeoutMs: 50, log });
    const client = await connect(listener.port);
    client.write(frame("stuck"));
    await waitUntil(() => listener.connectionStats()[0]?.inFlight === 1, "the request in flight");
    await listener.close();
    await client.closed;
    expect(client.responses.length).toBe(0);
    expect(log.lines.some((l) => l.level === "warn")).toBe(true);
  });

  test("close() twice returns the same completion", async () => {
    const listener = await listen(echo);
    const a = listener.close();
    const b = listener.close();
    expect(a).toBe(b);
    await a;
  });
});
