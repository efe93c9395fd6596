/**
 * The interop clients that scripts/install-interop-clients.sh installs: librdkafka's Python binding in a venv,
 * the franz-go helpers built from tests/interop/go, and franz-go's own kgo test suite. scripts/test runs the
 * script up front; tests call `ensureInteropClients` so that a bare `bun test` of one file works too.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./apache-kafka.ts";

/** The venv's python, with confluent-kafka (librdkafka) installed. */
export const VENV_PYTHON = join(REPO_ROOT, ".cache/venv/bin/python");
/** A franz-go helper built from tests/interop/go/<package>: "eos-copier", "txn-zombie" or "sasl-check". */
export const goHelper = (name: "eos-copier" | "txn-zombie" | "sasl-check") => join(REPO_ROOT, ".cache/go-bin", name);
/** franz-go's own pkg/kgo test suite, compiled (`go test -c`) at the version tests/interop/go/go.mod pins. */
export const FRANZ_GO_KGO_TESTS = join(REPO_ROOT, ".cache/go-bin/franz-kgo.test");

/** Runs scripts/install-interop-clients.sh (idempotent, serialised by flock) and checks what it made. */
export async function ensureInteropClients(): Promise<void> {
  const proc = Bun.spawn(["bash", join(REPO_ROOT, "scripts/install-interop-clients.sh")], { stdout: "pipe", stderr: "pipe" });
  const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  const missing = [VENV_PYTHON, goHelper("eos-copier"), goHelper("txn-zombie"), goHelper("sasl-check"), FRANZ_GO_KGO_TESTS].filter((path) => !existsSync(path));
  if (code !== 0 || missing.length > 0) {
    throw new Error(`install-interop-clients.sh failed (exit ${code}${missing.length > 0 ? `; missing ${missing.join(", ")}` : ""}):\n${err}`);
  }
}
