/**
 * The side-port refuses a Host header naming a host it does not go by (a DNS-rebinding page), and answers
 * IP literals, localhost, its configured names, and requests without a Host header.
 */
import { describe, expect, test } from "bun:test";
import { createHttpApp } from "../../../src/http/app.ts";
import { allowedHostNames, hostAllowed, hostNameOf } from "../../../src/http/host-check.ts";
import type { HttpQueryPorts } from "../../../src/http/ports.ts";

describe("host names of Host headers", () => {
  test("name, name:port, [v6]:port, upper case and a trailing dot", () => {
    expect(hostNameOf("Bunka-1.Example:9644")).toBe("bunka-1.example");
    expect(hostNameOf("bunka-1.example.")).toBe("bunka-1.example");
    expect(hostNameOf("127.0.0.1:80")).toBe("127.0.0.1");
    expect(hostNameOf("[::1]:9644")).toBe("[::1]");
    expect(hostNameOf("[::1]")).toBe("[::1]");
  });

  test("IP literals, localhost, configured names and a missing header pass; other names do not", () => {
    const allowed = allowedHostNames(["Bunka-1.example", "metrics.internal:9644"]);
    for (const host of [undefined, "", "127.0.0.1:9644", "10.1.2.3", "[::1]:9644", "[fe80::1]", "localhost:9644", "LOCALHOST", "bunka-1.example:9644", "metrics.internal"]) {
      expect(hostAllowed(host, allowed)).toBe(true);
    }
    for (const host of ["attacker.example", "attacker.example:9644", "127.0.0.1.nip.io", "localhost.attacker.example", "999.1.1.1", "bunka-1.example.attacker.example"]) {
      expect(hostAllowed(host, allowed)).toBe(false);
    }
  });
});

describe("the side-port app", () => {
  const ports = { readiness: async () => ({ ready: true }) } as unknown as HttpQueryPorts;
  const app = createHttpApp(ports, { allowedHostNames: ["bunka-1.example"] });
  const get = (host: string | undefined) => app.request("/ready", host === undefined ? {} : { headers: { Host: host } });

  test("a request naming another host is 403 host_not_allowed, saying which setting to change", async () => {
    const res = await get("rebound.attacker.example:9644");
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe("host_not_allowed");
    expect(body.message).toContain("http.allowed.hosts");
    expect(body.message).toContain("rebound.attacker.example:9644");
  });

  test("its own names, localhost, addresses and no Host at all are answered", async () => {
    for (const host of ["bunka-1.example:9644", "localhost:9644", "127.0.0.1:9644", "[::1]:9644", undefined]) {
      expect((await get(host)).status).toBe(200);
    }
  });
});

describe("over a real socket", () => {
  test("a browser-like request naming a rebound host gets 403, one by address gets 200", async () => {
    const { startHttpServer } = await import("../../../src/http/server.ts");
    const { silentLogger } = await import("../../../src/platform/logger.ts");
    const ports = { readiness: async () => ({ ready: true }) } as unknown as HttpQueryPorts;
    const server = startHttpServer({ host: "127.0.0.1", port: 0, fetch: createHttpApp(ports, { allowedHostNames: ["127.0.0.1"] }).fetch, log: silentLogger });
    try {
      const url = `http://127.0.0.1:${server.port}/ready`;
      expect((await fetch(url, { headers: { Host: `rebound.attacker.example:${server.port}` } })).status).toBe(403);
      expect((await fetch(url)).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
