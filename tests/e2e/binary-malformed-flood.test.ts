/**
 * A client looping on malformed frames against the compiled binary: the broker's log stays small (one
 * line per connection at most, 10 per 10 s across the broker, no stack traces) and the broker keeps
 * serving. Before, one such client wrote 31 MB of log in 25 s.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BunkaProcess, killAllBunkaProcesses, privateBinaryCopy, removeTempDir } from "../support/binary.ts";
import { WireClient } from "../support/wire-client.ts";

const TIMEOUT = 120_000;
const CONNECTIONS = 300;
let dir: string;
let broker: BunkaProcess;
let logFile: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "bunka-flood-"));
  const binary = await privateBinaryCopy(dir);
  logFile = join(dir, "broker.log");
  broker = await BunkaProcess.start({ binary, dataDir: join(dir, "data"), logFile });
}, TIMEOUT);

afterAll(async () => {
  await killAllBunkaProcesses();
  removeTempDir(dir);
});

/** Connects, sends a frame whose request header names an API key nobody serves, waits for the close. */
async function malformedConnection(port: number): Promise<void> {
  const closed = Promise.withResolvers<void>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: { data() {}, close: () => closed.resolve(), error: () => closed.resolve() },
  });
  // size 12, then api key 999, version 0, correlation id 1, client id length -1 (null), 2 bytes of junk.
  const frame = Uint8Array.of(0, 0, 0, 12, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xde, 0xad);
  socket.write(frame);
  await closed.promise;
}

test(`${CONNECTIONS} connections with a malformed frame each: a handful of log lines, no stack, the broker still serves`, async () => {
  const before = readFileSync(logFile, "utf8").length;
  for (let i = 0; i < CONNECTIONS; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, CONNECTIONS - i) }, () => malformedConnection(broker.port)));
  }
  // The broker answers a well-formed request afterwards.
  const client = await WireClient.connect(broker.port);
  const versions = await client.request(18, 3, { clientSoftwareName: "after-flood", clientSoftwareVersion: "1" });
  expect(versions.errorCode).toBe(0);
  client.close();
  const written = readFileSync(logFile, "utf8").slice(before);
  const lines = written.split("\n").filter((l) => l.includes("closing connection"));
  // The flood took well under 10 s on the test machine, so one window: 10 lines; allow two windows.
  expect(lines.length).toBeGreaterThanOrEqual(1);
  expect(lines.length).toBeLessThanOrEqual(20);
  for (const line of lines) {
    expect(line).toContain("closing connection after a malformed request");
    expect(line).toContain("unsupported API key 999");
    expect(line).not.toContain("stack=");
  }
  expect(written.length).toBeLessThan(20 * 1024);
}, TIMEOUT);
