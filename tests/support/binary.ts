/**
 * The compiled `bunka` binary for tests that run it as a process (smoke, fault): builds it with
 * scripts/build.ts unless it is newer than every source file, and starts, kills and restarts it.
 *
 *   const binary = await privateBinaryCopy(tmpDir);      // fresh build if stale, then a copy only we run
 *   const broker = await BunkaProcess.start({ binary, dataDir, logFile });   // port 0
 *   await broker.kill("SIGKILL");                         // waits for the exit
 *   const again = await BunkaProcess.start({ binary, dataDir, logFile, port: broker.port });
 *
 * Restarting on the port of a process that was just killed may find it briefly unavailable: `start`
 * retries the bind until a deadline, and only for that error. Any other early exit (recovery refusing
 * the data directory, a bad flag) fails at once with the process's stderr in the message.
 *
 * stderr goes to a file (appended across restarts, so one file tells the whole story) rather than a pipe:
 * a pipe nobody drains would block the broker once its logs fill the pipe buffer. Every process started
 * here is SIGKILLed when the test process exits, and by `killAllBunkaProcesses()` (for afterAll).
 */
import { chmodSync, closeSync, copyFileSync, existsSync, openSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Target, TARGETS, buildTarget, outfileFor } from "../../scripts/build.ts";

const root = join(import.meta.dir, "..", "..");

export const HOST_TARGET = `${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`;
/** Whether scripts/build.ts can build a binary for this machine. */
export const CAN_RUN_BINARY = (TARGETS as readonly string[]).includes(HOST_TARGET);
/** Where scripts/build.ts puts the binary for this machine ("" when it cannot build one). */
export const HOST_BINARY = CAN_RUN_BINARY ? outfileFor(HOST_TARGET as Target) : "";

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

let building: Promise<string> | undefined;

/**
 * The path of dist/bunka-<host target>, built first when any file under src/ (or package.json, whose
 * version is compiled in) is newer than it.
 */
export function ensureBunkaBinary(): Promise<string> {
  if (!CAN_RUN_BINARY) return Promise.reject(new Error(`no bunka binary target for ${HOST_TARGET}`));
  building ??= (async () => {
    const binary = HOST_BINARY;
    const sourcesMtimeMs = Math.max(newestMtimeMs(join(root, "src")), statSync(join(root, "package.json")).mtimeMs);
    if (existsSync(binary) && statSync(binary).mtimeMs > sourcesMtimeMs) return binary;
    const result = await buildTarget(HOST_TARGET as Target);
    if (!result.ok) throw new Error(`building ${HOST_TARGET} failed: ${result.error}`);
    return binary;
  })();
  building.catch(() => (building = undefined));
  return building;
}

/**
 * A copy of the (fresh) binary in `dir`, or of the one named by BUNKA_TEST_BINARY. Fault tests restart the
 * binary many times over minutes; with a copy, a rebuild of dist/ meanwhile (another test file, a developer)
 * neither fails on a busy executable nor swaps the broker's code between two restarts of one run.
 */
export async function privateBinaryCopy(dir: string): Promise<string> {
  // BUNKA_TEST_BINARY runs the tests against another build (an older release, a deliberately broken one).
  const binary = process.env.BUNKA_TEST_BINARY || (await ensureBunkaBinary());
  const copy = join(dir, `bunka-${HOST_TARGET}`);
  copyFileSync(binary, copy);
  chmodSync(copy, 0o755);
  return copy;
}

/** Without BUNKA_* variables from the developer's shell, which would change what is tested. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BUNKA_") && v !== undefined) env[k] = v;
  return { ...env, ...extra };
}

function withChanges(env: Record<string, string>, changes: Record<string, string | undefined> = {}): Record<string, string> {
  const out = { ...env };
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Processes

const live = new Set<BunkaProcess>();
let exitHookInstalled = false;
function track(proc: BunkaProcess): void {
  live.add(proc);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const p of live) p.proc.kill("SIGKILL");
  });
}

/** SIGKILLs every broker process started here that is still running, and waits for them. */
export async function killAllBunkaProcesses(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill("SIGKILL")));
}

export interface BunkaStartOptions {
  binary: string;
  dataDir: string;
  /** stderr of every start is appended here. */
  logFile: string;
  /** 0 (default) picks a free port; a fixed port is retried while it is briefly unavailable. */
  port?: number;
  host?: string;
  /** Extra `serve` flags. */
  args?: string[];
  /** Environment changes on top of cleanEnv(): a value sets the variable, undefined removes it. */
  env?: Record<string, string | undefined>;
  /** How long to wait for the start-up line (recovery included). Default 60 s. */
  startTimeoutMs?: number;
  /** How long to keep retrying a bind that fails. Default 15 s. */
  bindRetryMs?: number;
}

const LISTENING_LINE = /^bunka \S+ listening kafka=(\S+):(\d+) [^\n]*\n/m;
const BIND_FAILURE = /Failed to listen|EADDRINUSE|already in use/i;

export class BunkaProcess {
  /** Settles with the exit code (or 128 + signal number) once the process is gone. */
  readonly exited: Promise<number>;
  exitCode: number | undefined;
  /** How many bind attempts the start needed (1 = the first bind worked). */
  bindAttempts = 1;

  /** Use `BunkaProcess.start`. */
  constructor(
    readonly proc: Bun.Subprocess<"ignore", "pipe", number>,
    readonly host: string,
    readonly port: number,
    readonly startMs: number,
    /** Milliseconds from spawn to the start-up line (includes recovery). */
    readonly startupMs: number,
    /** The HTTP side-port, `http://host:port`, as the start-up line names it. */
    readonly http: string,
  ) {
    this.exited = proc.exited.then((code) => {
      this.exitCode = code;
      live.delete(this);
      return code;
    });
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** host:port for clients (the listener's host as printed on the start-up line). */
  get bootstrap(): string {
    return `${this.host}:${this.port}`;
  }

  /** Sends `signal` (if still running) and waits for the exit. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<number> {
    if (this.exitCode === undefined) this.proc.kill(signal);
    return await this.exited;
  }

  static async start(opts: BunkaStartOptions): Promise<BunkaProcess> {
    const host = opts.host ?? "127.0.0.1";
    const wantedPort = opts.port ?? 0;
    const bindDeadline = Date.now() + (opts.bindRetryMs ?? 15_000);
    for (let attempt = 1; ; attempt++) {
      const outcome = await startOnce(opts, host, wantedPort);
      if (outcome.kind === "started") {
        outcome.process.bindAttempts = attempt;
        return outcome.process;
      }
      if (wantedPort !== 0 && BIND_FAILURE.test(outcome.stderr) && Date.now() < bindDeadline) {
        // The port of a killed process can stay unavailable for a moment; try again shortly.
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      throw new Error(`bunka did not start (${outcome.reason}); its stderr:\n${outcome.stderr.slice(-4000)}`);
    }
  }
}

type StartOutcome = { kind: "started"; process: BunkaProcess } | { kind: "failed"; reason: string; stderr: string };

function fileSize(path: string): number {
  return existsSync(path) ? statSync(path).size : 0;
}

function readFrom(path: string, from: number): string {
  return existsSync(path) ? readFileSync(path).subarray(from).toString("utf8") : "";
}

interface Spawned {
  proc: Bun.Subprocess<"ignore", "pipe", number>;
  /** Settles with the start-up line's match, or undefined when stdout ended without one. */
  announced: Promise<RegExpMatchArray | undefined>;
  stdoutText(): string;
  startMs: number;
  logFrom: number;
}

function spawnBunka(opts: BunkaStartOptions, host: string, port: number): Spawned {
  const logFrom = fileSize(opts.logFile);
  const logFd = openSync(opts.logFile, "a");
  const startMs = Date.now();
  let proc: Bun.Subprocess<"ignore", "pipe", number>;
  try {
    proc = Bun.spawn(
      [opts.binary, "serve", "--listen", `${host}:${port}`, "--http", `${host}:0`, "--data-dir", opts.dataDir, ...(opts.args ?? [])],
      { stdin: "ignore", stdout: "pipe", stderr: logFd, env: withChanges(cleanEnv(), opts.env) },
    );
  } finally {
    closeSync(logFd);
  }
  // Read stdout for the whole life of the process (it prints one line, but a pipe is drained anyway).
  let stdoutText = "";
  let announce!: (match: RegExpMatchArray | undefined) => void;
  const announced = new Promise<RegExpMatchArray | undefined>((resolve) => (announce = resolve));
  void (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of proc.stdout) {
        stdoutText += decoder.decode(chunk, { stream: true });
        const match = stdoutText.match(LISTENING_LINE);
        if (match) announce(match);
      }
    } catch {
      /* the process died */
    }
    announce(undefined);
  })();
  return { proc, announced, stdoutText: () => stdoutText, startMs, logFrom };
}

async function startOnce(opts: BunkaStartOptions, host: string, port: number): Promise<StartOutcome> {
  const { proc, announced, stdoutText, startMs, logFrom } = spawnBunka(opts, host, port);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), opts.startTimeoutMs ?? 60_000)));
  const result = await Promise.race([announced, proc.exited.then(() => "exited" as const), timeout]);
  clearTimeout(timer);
  if (result === "timeout" || result === "exited" || result === undefined) {
    if (result === "timeout") proc.kill("SIGKILL");
    const code = await proc.exited;
    return {
      kind: "failed",
      reason: result === "timeout" ? "no start-up line before the deadline" : `exited with ${code} before the start-up line`,
      stderr: readFrom(opts.logFile, logFrom) + (stdoutText() ? `\n(stdout: ${stdoutText()})` : ""),
    };
  }
  const http = `http://${result[0].match(/ http=(\S+)/)?.[1] ?? "unknown"}`;
  const bunka = new BunkaProcess(proc, result[1]!, Number(result[2]), startMs, Date.now() - startMs, http);
  track(bunka);
  return { kind: "started", process: bunka };
}

/**
 * Starts the broker and SIGKILLs it `killAfterMs` after the spawn, usually in the middle of its start-up
 * (recovery, index rebuilds, checkpoint writes): a crash during recovery must leave a directory that the
 * next start recovers. Resolves once the process is gone, telling whether it had finished starting and
 * whether it had exited on its own before the kill (with its stderr then: it refused to start).
 */
export async function startAndKill(
  opts: BunkaStartOptions,
  killAfterMs: number,
): Promise<{ started: boolean; exitedBeforeKill: boolean; bindFailed: boolean; exitCode: number; stderr: string }> {
  const { proc, announced, logFrom } = spawnBunka(opts, opts.host ?? "127.0.0.1", opts.port ?? 0);
  let started = false;
  void announced.then((m) => (started = m !== undefined));
  let killed = false;
  let exitedBeforeKill = false;
  const exited = proc.exited.then((code) => {
    if (!killed) exitedBeforeKill = true;
    return code;
  });
  await Promise.race([new Promise((r) => setTimeout(r, killAfterMs)), exited]);
  killed = true;
  proc.kill("SIGKILL");
  const exitCode = await exited;
  const stderr = exitedBeforeKill ? readFrom(opts.logFile, logFrom) : "";
  return { started, exitedBeforeKill, bindFailed: BIND_FAILURE.test(stderr), exitCode, stderr };
}

/**
 * `body`, with the last lines of the broker's stderr added to any error it throws: a fault test's failure
 * is mostly explained by what the broker said last.
 */
export async function withBrokerLog<T>(logFile: string, body: () => Promise<T>, lines = 40): Promise<T> {
  try {
    return await body();
  } catch (error) {
    const tail = existsSync(logFile) ? readFileSync(logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n") : "(no log)";
    if (error instanceof Error) {
      error.message += `\n--- broker stderr (last ${lines} lines of ${logFile}) ---\n${tail}`;
      throw error;
    }
    throw new Error(`${String(error)}\n--- broker stderr ---\n${tail}`);
  }
}

/** Removes a fault test's temp dir, unless FAULT_KEEP_DATA is set (then says where it is). */
export function removeTempDir(dir: string): void {
  if (process.env.FAULT_KEEP_DATA) {
    console.log(`FAULT_KEEP_DATA: kept ${dir}`);
    return;
  }
  rmSync(dir, { recursive: true, force: true });
}
