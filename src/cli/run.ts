/**
 * The command line: dispatches `serve`, `topics`, `txn`, `cluster` (inspect.ts: a running broker over its
 * HTTP side-port), `version` and `help`. Everything the process touches comes in through `CliDeps`, so that the
 * CLI runs in tests without a process, a terminal, a disk or a socket.
 *
 * Errors in what the user typed (flags, environment, config file, data directory) print one line,
 * `bunka: <message>`, on stderr and exit 2; no stack trace, since the message names what to fix.
 * Any other failure while starting prints the same one line and exits 1.
 */
import { join } from "node:path";
import type { BrokerConfig } from "../broker/config.ts";
import { ConfigError } from "../errors/errors.ts";
import type { Fs } from "../platform/fs.ts";
import { parseServeArgs } from "./config.ts";
import { clusterHelp, mainHelp, serveHelp, topicsHelp, txnHelp, versionText } from "./help.ts";
import { runInspect } from "./inspect.ts";
import type { FetchLike } from "./side-port.ts";

export interface CliDeps {
  env: Record<string, string | undefined>;
  /** Reads a text file (the config file); throws when it cannot. */
  readFile(path: string): string;
  stdout(text: string): void;
  stderr(text: string): void;
  /** For the data-directory check. */
  fs: Fs;
  /** Runs the broker until it is told to stop; resolves with the exit code. */
  serve(config: BrokerConfig): Promise<number>;
  /** HTTP client for the side-port commands (topics, txn, cluster). */
  fetch: FetchLike;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

function oneLine(message: string): string {
  return message.split(/\r?\n/, 1)[0] ?? "";
}

function messageOf(error: unknown): string {
  return oneLine(error instanceof Error ? error.message : String(error));
}

export async function runCli(argv: string[], deps: CliDeps): Promise<number> {
  const fail = (message: string, code: number) => {
    deps.stderr(`bunka: ${oneLine(message)}\n`);
    return code;
  };
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case "help":
    case "--help":
    case "-h":
      if (rest[0] === "serve") deps.stdout(serveHelp());
      else if (rest[0] === "txn") deps.stdout(txnHelp());
      else if (rest[0] === "topics") deps.stdout(topicsHelp());
      else if (rest[0] === "cluster") deps.stdout(clusterHelp());
      else deps.stdout(mainHelp());
      return EXIT_OK;
    case "topics":
    case "txn":
    case "cluster":
      return runInspect(command, rest, deps);
    case "version":
    case "--version":
    case "-v":
      deps.stdout(versionText());
      return EXIT_OK;
    case "serve":
      break;
    default:
      return fail(
        command.startsWith("-") ? `unknown flag "${command}" (try bunka --help)` : `unknown command "${command}" (try bunka --help)`,
        EXIT_USAGE,
      );
  }

  if (rest.includes("--help") || rest.includes("-h")) {
    deps.stdout(serveHelp());
    return EXIT_OK;
  }
  let config: BrokerConfig;
  try {
    config = parseServeArgs(rest, deps.env, deps.readFile);
    await checkDataDir(deps.fs, config.dataDir);
  } catch (error) {
    if (error instanceof ConfigError) return fail(error.message, EXIT_USAGE);
    throw error;
  }
  try {
    return await deps.serve(config);
  } catch (error) {
    if (error instanceof ConfigError) return fail(error.message, EXIT_USAGE);
    return fail(messageOf(error), EXIT_FAILURE);
  }
}

/**
 * The data directory must be a writable directory: created when missing, then proven writable by creating
 * and removing a probe file. Doing this before anything else turns a permission problem into one clear
 * line at start-up rather than a fatal error at the first write. The probe's name is unique because
 * several brokers may share the directory and start at the same moment.
 */
export async function checkDataDir(fs: Fs, dir: string): Promise<void> {
  const fail = (what: string, error?: unknown) =>
    new ConfigError(`data directory ${JSON.stringify(dir)} ${what}${error === undefined ? "" : `: ${messageOf(error)}`}`);
  let stat;
  try {
    stat = await fs.stat(dir);
  } catch (error) {
    throw fail("cannot be read", error);
  }
  if (stat !== undefined && !stat.isDirectory) throw fail("is not a directory");
  if (stat === undefined) {
    try {
      await fs.mkdirp(dir);
    } catch (error) {
      throw fail("cannot be created", error);
    }
  }
  const probe = join(dir, `.bunka-write-probe-${crypto.randomUUID()}`);
  try {
    const handle = await fs.open(probe, "w");
    try {
      await handle.write(new Uint8Array([0]));
    } finally {
      await handle.close();
    }
    await fs.unlink(probe);
  } catch (error) {
    throw fail("is not writable", error);
  }
}
