/**
 * Smoke test of the shipped artefact: the compiled single-file binary for this machine (built by
 * scripts/build.ts unless it is newer than every source file) and `bun src/main.ts`, which must behave the
 * same. Checks the process contract: version, help, one-line usage errors with exit 2, start-up line with
 * the chosen port, a working Kafka listener, and a clean exit 0 on SIGTERM.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json";
import { CAN_RUN_BINARY, HOST_BINARY, HOST_TARGET, cleanEnv, ensureBunkaBinary } from "../support/binary.ts";

const root = join(import.meta.dir, "..", "..");

const tmpRoot = mkdtempSync(join(tmpdir(), "bunka-smoke-"));
const children = new Set<Bun.Subprocess>();

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(tmpRoot, { recursive: true, force: true });
});

beforeAll(async () => {
  // Builds it unless it is newer than every file under src/ and package.json.
  if (CAN_RUN_BINARY) await ensureBunkaBinary();
});

/** The two ways to run bunka; they must behave identically. */
const launchers: Array<{ name: string; cmd: string[]; enabled: boolean }> = [
  { name: `binary (${HOST_TARGET})`, cmd: [HOST_BINARY], enabled: CAN_RUN_BINARY },
  { name: "bun src/main.ts", cmd: [process.execPath, join(root, "src/main.ts")], enabled: true },
];

async function run(cmd: string[], args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([...cmd, ...args], { cwd: tmpRoot, stdout: "pipe", stderr: "pipe", env: cleanEnv() });
  children.add(proc);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  children.delete(proc);
  return { code, stdout, stderr };
}

/** Reads a stream until `pattern` matches what has arrived, or fails after the deadline. */
async function readUntil(stream: ReadableStream<Uint8Array>, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} in ${JSON.stringify(text)}`)), timeoutMs);
  });
  try {
    for (;;) {
      const match = text.match(pattern);
      if (match) return match;
      const { value, done } = await Promise.race([reader.read(), deadline]);
      if (done) throw new Error(`stream ended before ${pattern}: ${JSON.stringify(text)}`);
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}

/** ApiVersions v0 with correlation id 42: request header v1, empty body. */
function apiVersionsRequest(): Uint8Array {
  const clientId = new TextEncoder().encode("smoke");
  const body = new Uint8Array(2 + 2 + 4 + 2 + clientId.length);
  const view = new DataView(body.buffer);
  view.setInt16(0, 18); // ApiVersions
  view.setInt16(2, 0);
  view.setInt32(4, 42);
  view.setInt16(8, clientId.length);
  body.set(clientId, 10);
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setInt32(0, body.length);
  frame.set(body, 4);
  return frame;
}

/** Connects, sends ApiVersions, and resolves with the correlation id of the response. */
async function askApiVersions(port: number): Promise<{ correlationId: number; errorCode: number; socket: Bun.Socket<undefined> }> {
  let received = new Uint8Array(0);
  let resolveResponse!: (value: { correlationId: number; errorCode: number }) => void;
  let rejectResponse!: (error: Error) => void;
  const response = new Promise<{ correlationId: number; errorCode: number }>((resolve, reject) => {
    resolveResponse = resolve;
    rejectResponse = reject;
  });
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      binaryType: "uint8array",
      data(_s, chunk) {
        const next = new Uint8Array(received.length + chunk.length);
        next.set(received);
        next.set(chunk, received.length);
        received = next;
        if (received.length < 4) return;
        const view = new DataView(received.buffer);
        const size = view.getInt32(0);
        if (received.length >= 4 + size) resolveResponse({ correlationId: view.getInt32(4), errorCode: view.getInt16(8) });
      },
      close() {
        rejectResponse(new Error("connection closed before the response"));
      },
    },
  });
  socket.write(apiVersionsRequest());
  return { ...(await response), socket };
}

for (const launcher of launchers) {
  describe.skipIf(!launcher.enabled)(launcher.name, () => {
    test("--version prints the version and exits 0", async () => {
      const r = await run(launcher.cmd, ["--version"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`bunka ${pkg.version}\n`);
      expect(r.stderr).toBe("");
    });

    test("--help exits 0", async () => {
      const r = await run(launcher.cmd, ["--help"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("bunka serve");
      const serve = await run(launcher.cmd, ["serve", "--help"]);
      expect(serve.code).toBe(0);
      expect(serve.stdout).toContain("--advertised-listener");
    });

    test("a bad flag exits 2 with a one-line error on stderr", async () => {
      for (const args of [["--bogus"], ["serve", "--bogus"], ["serve", "--listen", "not-a-host-port"], ["serve", "--broker-id", "x"]]) {
        const r = await run(launcher.cmd, args);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/^bunka: [^\n]+\n$/);
        expect(r.stdout).toBe("");
      }
    });

    test("an unusable data directory exits 2 with a one-line error", async () => {
      const file = join(mkdtempSync(join(tmpRoot, "file-")), "not-a-dir");
      await Bun.write(file, "x");
      const r = await run(launcher.cmd, ["serve", "--listen", "127.0.0.1:0", "--data-dir", file]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^bunka: data directory [^\n]+\n$/);
    });

    test.each(["SIGTERM", "SIGINT"] as const)("serve on port 0 prints the chosen port, answers on it, and exits 0 on %s", async (signal) => {
      const dataDir = mkdtempSync(join(tmpRoot, "data-"));
      const proc = Bun.spawn(
        [...launcher.cmd, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dataDir],
        { cwd: tmpRoot, stdout: "pipe", stderr: "pipe", env: cleanEnv() },
      );
      children.add(proc);
      const stderrText = new Response(proc.stderr).text();
      try {
        const match = await readUntil(proc.stdout, /^bunka \S+ listening kafka=127\.0\.0\.1:(\d+) [^\n]*\n/m, 30_000);
        const line = match[0];
        expect(line.startsWith(`bunka ${pkg.version} listening `)).toBe(true);
        expect(line).toContain(`data=${dataDir}`);
        expect(line).toContain("broker=0");
        const port = Number(match[1]);
        expect(port).toBeGreaterThan(0);

        const answer = await askApiVersions(port);
        expect(answer.correlationId).toBe(42);
        expect(answer.errorCode).toBe(0);

        // The connection stays open across the signal: shutdown must close it, not wait for the client.
        proc.kill(signal);
        expect(await proc.exited).toBe(0);
        answer.socket.end();
      } catch (error) {
        proc.kill("SIGKILL");
        await proc.exited;
        throw new Error(`${(error as Error).message}\nstderr: ${await stderrText}`);
      } finally {
        children.delete(proc);
      }
    });
  });
}
