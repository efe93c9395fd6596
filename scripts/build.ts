/**
 * Builds the single-file `bunka` executables into dist/: `bun scripts/build.ts` builds every platform,
 * `bun scripts/build.ts linux-x64 darwin-arm64` only those.
 *
 * Cross-compiling needs the Bun runtime of each target, which `bun build --compile` downloads from the npm
 * registry on first use (and caches). A target that cannot be fetched or built is reported and the others
 * still build; the exit code is 1 if any target failed.
 */
import { statSync } from "node:fs";
import { join } from "node:path";

export const TARGETS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "windows-x64"] as const;
export type Target = (typeof TARGETS)[number];

const root = join(import.meta.dir, "..");

/** The executable's entry points: the broker, and the code of the threads it starts by path. */
export const ENTRY_POINTS = ["src/main.ts", "src/storage/log/cleaner-worker.ts"] as const;

export function outfileFor(target: Target): string {
  return join(root, "dist", `bunka-${target}${target.startsWith("windows-") ? ".exe" : ""}`);
}

export interface BuildResult {
  target: Target;
  outfile: string;
  ok: boolean;
  sizeBytes?: number;
  error?: string;
}

export async function buildTarget(target: Target): Promise<BuildResult> {
  const outfile = outfileFor(target);
  const proc = Bun.spawn(
    // The log cleaner's thread is an entry point of its own: Bun bundles a `new Worker(...)` target only
    // when it is listed. Its path under src/ is where storage/log/cleaner-threads.ts looks for it.
    [process.execPath, "build", "--compile", `--target=bun-${target}`, ...ENTRY_POINTS.map((e) => join(root, e)), "--outfile", outfile],
    { cwd: root, stdout: "pipe", stderr: "pipe" },
  );
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (exitCode !== 0) {
    const detail = (stderr.trim() || stdout.trim()).split("\n").filter(Boolean).slice(-3).join(" | ");
    return { target, outfile, ok: false, error: `bun build exited ${exitCode}: ${detail}` };
  }
  return { target, outfile, ok: true, sizeBytes: statSync(outfile).size };
}

function formatSize(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

if (import.meta.main) {
  const asked = process.argv.slice(2);
  const unknown = asked.filter((t) => !(TARGETS as readonly string[]).includes(t));
  if (unknown.length > 0) {
    process.stderr.write(`build: unknown target ${unknown.join(", ")} (known: ${TARGETS.join(", ")})\n`);
    process.exit(2);
  }
  const targets = (asked.length > 0 ? asked : [...TARGETS]) as Target[];
  let failed = 0;
  // One at a time: each build is CPU- and download-bound, and the output stays readable.
  for (const target of targets) {
    const result = await buildTarget(target);
    if (result.ok) {
      process.stdout.write(`${target.padEnd(13)} ${formatSize(result.sizeBytes!).padStart(10)}  ${result.outfile}\n`);
    } else {
      failed++;
      process.stdout.write(`${target.padEnd(13)} FAILED      ${result.error}\n`);
    }
  }
  if (failed > 0) {
    process.stderr.write(`build: ${failed} of ${targets.length} targets failed\n`);
    process.exit(1);
  }
}
