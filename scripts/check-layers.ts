#!/usr/bin/env bun
/**
 * Enforces docs/architecture.md, "Layers": imports point down the layer chain only.
 *
 *   platform, errors, protocol  <-  domain  <-  storage  <-  cluster  <-  broker  <-  net, http  <-  cli, main
 *
 * platform imports nothing else from src; errors imports only platform; protocol may use errors. Prints every
 * offending import and exits 1 when there is one.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = join(import.meta.dir, "..");
const src = join(root, "src");

const rank: Record<string, number> = {
  platform: 0,
  errors: 1,
  protocol: 2,
  domain: 3,
  storage: 4,
  cluster: 5,
  broker: 6,
  net: 7,
  http: 7,
  cli: 8,
  "main.ts": 9,
};

function layerOf(path: string): string {
  return relative(src, path).split("/")[0]!;
}

function* sourceFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (name.endsWith(".ts")) yield path;
  }
}

export function layerViolations(): string[] {
  const problems: string[] = [];
  const importPattern = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;
  for (const file of sourceFiles(src)) {
    const from = layerOf(file);
    if (!(from in rank)) {
      problems.push(`${relative(root, file)}: not in a known layer (${Object.keys(rank).join(", ")})`);
      continue;
    }
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(importPattern)) {
      const spec = match[1] ?? match[2]!;
      if (!spec.startsWith(".")) continue;
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(src)) {
        // package.json (the version string) is the only thing outside src that src may read.
        if (relative(root, target) !== "package.json") problems.push(`${relative(root, file)}: imports ${spec} from outside src/`);
        continue;
      }
      const to = layerOf(target);
      if (to === from) continue;
      const sameTierPeers = rank[to] === rank[from];
      if (rank[to]! > rank[from]! || sameTierPeers) {
        problems.push(`${relative(root, file)} (${from}) imports ${spec} (${to}): imports must point down the layer chain`);
      }
    }
  }
  return problems;
}

if (import.meta.main) {
  const problems = layerViolations();
  for (const p of problems) console.error(p);
  if (problems.length > 0) process.exit(1);
  console.log("layer check: imports point down the chain");
}
