/**
 * The etcd client tries each endpoint once per request, in turn from the one that answered last, even when
 * another request in flight meanwhile found a different endpoint that answers: each request keeps the
 * order it started with, so it never asks one endpoint twice and skips a live one.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { EtcdClient } from "../../src/cluster/etcd/etcd-client.ts";
import { EtcdServer, freePort } from "../support/etcd.ts";
import { until } from "../support/wait.ts";

let etcd: EtcdServer;

beforeAll(async () => {
  etcd = await EtcdServer.start();
});

afterAll(async () => {
  await etcd?.close();
});

test("a request that failed at its first endpoint while another found the live one still tries every endpoint once", async () => {
  // A: takes connections and never answers, until it is closed (its connections then reset); B: refuses; C: etcd.
  const held = new Set<Socket<undefined>>();
  const hung: TCPSocketListener<undefined> = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        held.add(socket);
      },
      data() {},
      close(socket) {
        held.delete(socket);
      },
    },
  });
  const a = `http://127.0.0.1:${hung.port}`;
  const b = `http://127.0.0.1:${freePort()}`;
  const client = new EtcdClient({ endpoints: [a, b, etcd.endpoint] });
  try {
    // The slow request waits at A.
    const slow = client.range("/order/k", undefined, { timeoutMs: 30_000 }).then(
      (answer) => ({ answer }),
      (error: unknown) => ({ error }),
    );
    await until("the slow request held at A", 10_000, async () => (held.size === 1 ? true : undefined));
    // A quick one gives up on A, is refused at B and answered by C, which is tried first from now on.
    await client.range("/order/k", undefined, { timeoutMs: 200 });
    expect(client.activeEndpoint).toBe(etcd.endpoint);
    // A goes away: the slow request moves on from A to B and C, not back to A.
    hung.stop(true);
    for (const socket of held) socket.terminate();
    const outcome = await slow;
    expect("error" in outcome ? String(outcome.error) : "answered").toBe("answered");
  } finally {
    client.close();
    hung.stop(true);
  }
});
