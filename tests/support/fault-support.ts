/**
 * What the fault tests (tests/fault) share besides the process handling of binary.ts: their temp directory
 * with a private copy of the binary, and the steps of their kill loops.
 *
 *   const fault = faultTestDir("bunka-crash-loop-");            // beforeAll copies the binary, afterAll cleans up
 *   let broker = await BunkaProcess.start(fault.startOptions());
 *   await stopBroker(broker, rng.next() < 0.1, fault.logFile);  // SIGTERM (must exit 0) or SIGKILL
 *   await killDuringStartup(fault.startOptions(broker.port), rng.int(0, 150));
 *   broker = await BunkaProcess.start(fault.startOptions(broker.port));
 */
import { afterAll, beforeAll } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type BunkaProcess,
  type BunkaStartOptions,
  CAN_RUN_BINARY,
  killAllBunkaProcesses,
  privateBinaryCopy,
  removeTempDir,
  startAndKill,
} from "./binary.ts";

export interface FaultTestDir {
  tmpRoot: string;
  /** The broker's data directory (created by the broker). */
  dataDir: string;
  /** The broker's stderr, appended across restarts. */
  logFile: string;
  /** The private copy of the binary; "" until beforeAll has run, and where the binary cannot run. */
  binary: string;
  /** Options for BunkaProcess.start / startAndKill on this directory; port 0 picks a free one. */
  startOptions(port?: number): BunkaStartOptions;
}

/**
 * A fresh temp directory for a fault test, with hooks: beforeAll (where the binary can run) copies the
 * binary into it and then runs `setup`; afterAll runs `cleanup`, SIGKILLs every broker process still
 * running and removes the directory (kept when FAULT_KEEP_DATA is set).
 */
export function faultTestDir(
  prefix: string,
  hooks: { setup?: () => Promise<void>; cleanup?: () => void | Promise<void> } = {},
): FaultTestDir {
  const tmpRoot = mkdtempSync(join(tmpdir(), prefix));
  const dir: FaultTestDir = {
    tmpRoot,
    dataDir: join(tmpRoot, "data"),
    logFile: join(tmpRoot, "bunka.stderr.log"),
    binary: "",
    startOptions: (port = 0) => ({ binary: dir.binary, dataDir: dir.dataDir, logFile: dir.logFile, port }),
  };
  beforeAll(async () => {
    if (!CAN_RUN_BINARY) return;
    dir.binary = await privateBinaryCopy(tmpRoot);
    await hooks.setup?.();
  }, 300_000);
  afterAll(async () => {
    await hooks.cleanup?.();
    await killAllBunkaProcesses();
    removeTempDir(tmpRoot);
  });
  return dir;
}

/**
 * Stops the broker and waits for the exit: SIGTERM when `graceful` (a clean stop, which must exit 0, else
 * this throws with the end of `logFile`), SIGKILL otherwise. `where` prefixes the error ("round 3: ").
 */
export async function stopBroker(broker: BunkaProcess, graceful: boolean, logFile: string, where = ""): Promise<void> {
  if (!graceful) {
    await broker.kill("SIGKILL");
    return;
  }
  const code = await broker.kill("SIGTERM");
  if (code !== 0) throw new Error(`${where}SIGTERM exited ${code}:\n${readFileSync(logFile, "utf8").slice(-3000)}`);
}

/**
 * A crash in the middle of recovery: starts the broker and SIGKILLs it `killAfterMs` after the spawn (see
 * startAndKill). Throws, with its stderr, if it exited on its own before that for another reason than a
 * port still unavailable: it refused the data directory.
 */
export async function killDuringStartup(opts: BunkaStartOptions, killAfterMs: number, where = ""): Promise<void> {
  const interrupted = await startAndKill(opts, killAfterMs);
  if (interrupted.exitedBeforeKill && !interrupted.bindFailed) {
    throw new Error(`${where}the broker exited ${interrupted.exitCode} during start-up:\n${interrupted.stderr.slice(-3000)}`);
  }
}
