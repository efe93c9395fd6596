#!/usr/bin/env bun
/**
 * The long version of the cluster's kill loops (docs/checker.md, "Kill loops against a cluster"): the
 * broker-kills test of the suite (tests/cluster/broker-kills.test.ts) with 20 SIGKILLs of a random broker per
 * run instead of 6 and 3. One run of the Java and librdkafka idempotent producers, then one of each EOS
 * copier (Java, librdkafka, franz-go), each on a fresh three-broker cluster with one etcd; the load is sized
 * so that the clients outlast the kills. Prints the test's own figures and exits with its status.
 *
 *   bun scripts/cluster-kill-loops.ts [--kills 20] [--eos-kills 20] [--seed N|random]
 */
import { join } from "node:path";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const kills = flag("kills", "20");
const eosKills = flag("eos-kills", "20");
const seed = flag("seed", "");
for (const [name, value] of [["kills", kills], ["eos-kills", eosKills]] as const) {
  if (!/^[1-9][0-9]*$/.test(value)) {
    process.stderr.write(`cluster-kill-loops: --${name} must be a positive integer, got ${JSON.stringify(value)}\n`);
    process.exit(2);
  }
}

const root = join(import.meta.dir, "..");
const startedMs = Date.now();
const proc = Bun.spawn([process.execPath, "test", "--timeout", String(3 * 3600_000), "tests/cluster/broker-kills.test.ts"], {
  cwd: root,
  env: { ...process.env, CLUSTER_KILLS: kills, CLUSTER_EOS_KILLS: eosKills, ...(seed === "" ? {} : { CLUSTER_SEED: seed }) },
  stdout: "pipe",
  stderr: "pipe",
});
const figures: string[] = [];
const relay = async (stream: ReadableStream<Uint8Array>, out: NodeJS.WriteStream) => {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    const text = pending + decoder.decode(chunk, { stream: true });
    const lines = text.split("\n");
    pending = lines.pop()!;
    for (const line of lines) {
      out.write(`${line}\n`);
      if (/^broker-kills[: ]|^\((pass|fail)\)/.test(line)) figures.push(line);
    }
  }
  if (pending !== "") out.write(pending);
};
await Promise.all([relay(proc.stdout, process.stdout), relay(proc.stderr, process.stderr), proc.exited]);
process.stdout.write(
  `\n==== cluster kill loops: ${kills} kills (idempotent producers), ${eosKills} kills per EOS copier, ${((Date.now() - startedMs) / 1000).toFixed(0)} s, exit ${proc.exitCode}\n${figures.join("\n")}\n`,
);
process.exit(proc.exitCode ?? 1);
