/**
 * The Bun.serve binding of the HTTP side-port: port 0, a clear error for a taken port, and a close() that
 * does not wait for idle keep-alive connections or for a request that never finishes.
 */
import { afterEach, expect, test } from "bun:test";
import { startHttpServer, type HttpServer } from "../../../src/http/server.ts";
import { silentLogger } from "../../../src/platform/logger.ts";

const servers: HttpServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

function start(fetch: (request: Request) => Response | Promise<Response>, closeTimeoutMs?: number): HttpServer {
  const server = startHttpServer({ host: "127.0.0.1", port: 0, fetch, log: silentLogger, ...(closeTimeoutMs === undefined ? {} : { closeTimeoutMs }) });
  servers.push(server);
  return server;
}

test("binds port 0 to a real port and serves", async () => {
  const server = start(() => new Response("hi"));
  expect(server.host).toBe("127.0.0.1");
  expect(server.port).toBeGreaterThan(0);
  const res = await fetch(`http://127.0.0.1:${server.port}/`);
  expect(await res.text()).toBe("hi");
});

test("regression: a taken port fails (Bun enables SO_REUSEPORT outside development mode) with a message naming the HTTP side-port", () => {
  const first = start(() => new Response("hi"));
  expect(() => startHttpServer({ host: "127.0.0.1", port: first.port, fetch: () => new Response(""), log: silentLogger })).toThrow(
    `the HTTP side-port cannot listen on 127.0.0.1:${first.port}`,
  );
});

test("close() returns with an idle keep-alive connection open, and the port stops answering", async () => {
  const server = start(() => new Response("hi"));
  const res = await fetch(`http://127.0.0.1:${server.port}/`, { keepalive: true });
  await res.text();
  await server.close();
  await expect(fetch(`http://127.0.0.1:${server.port}/`)).rejects.toThrow();
});

test("close() cuts a request that does not finish within the close timeout", async () => {
  let entered!: () => void;
  const inHandler = new Promise<void>((resolve) => (entered = resolve));
  const server = start(() => {
    entered();
    return new Promise<Response>(() => {}); // never answers
  }, 50);
  const pending = fetch(`http://127.0.0.1:${server.port}/`).then(
    () => "answered",
    () => "cut",
  );
  await inHandler;
  await server.close();
  expect(await pending).toBe("cut");
});
