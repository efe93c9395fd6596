/**
 * `__cluster/cluster.json`: the cluster id, made once when a data directory is first used and kept for
 * ever. Every broker that shares the directory reads the same id.
 */
import { join } from "node:path";
import type { Fs } from "../platform/fs.ts";
import { ensureDir } from "./atomic-file.ts";
import { loadState, saveState } from "./state-file.ts";

const FORMAT = "cluster";
const VERSION = 1;

export interface ClusterMeta {
  clusterId: string;
  createdMs: number;
}

function parse(body: unknown): ClusterMeta {
  const b = body as Partial<ClusterMeta>;
  if (typeof b?.clusterId !== "string" || b.clusterId.length === 0 || typeof b.createdMs !== "number") {
    throw new Error("clusterId or createdMs missing");
  }
  return { clusterId: b.clusterId, createdMs: b.createdMs };
}

/** Apache prints cluster ids as 22 characters of URL-safe base64 of a random UUID; so do we. */
export function randomClusterId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Buffer.from(bytes).toString("base64url");
}

export async function loadOrCreateClusterMeta(fs: Fs, dataDir: string, nowMs: number): Promise<ClusterMeta> {
  const dir = join(dataDir, "__cluster");
  const path = join(dir, "cluster.json");
  const existing = await loadState(fs, path, FORMAT, { current: VERSION, parse });
  if (existing) return existing;
  await ensureDir(fs, dir);
  const meta: ClusterMeta = { clusterId: randomClusterId(), createdMs: nowMs };
  await saveState(fs, path, FORMAT, VERSION, meta);
  return meta;
}
