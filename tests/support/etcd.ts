/**
 * A real etcd for integration tests: a single member on free loopback ports with a temporary data
 * directory, started by the test and killed at its end; or (EtcdCluster) several members forming one
 * cluster, so that a test can kill a member and keep the quorum.
 *
 * etcd must be installed (Debian's `etcd-server`, which scripts/test installs through
 * scripts/install-etcd.sh). When it is not, `startEtcd` throws an error saying so, so the tests that need
 * it fail rather than skip.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";

const ETCD_LOCATIONS = ["/usr/bin/etcd", "/usr/local/bin/etcd"];
const HEALTH_TIMEOUT_MS = 30_000;

/** The etcd binary: on PATH, else in /usr/bin or /usr/local/bin. Throws a message saying how to get it. */
export function findEtcd(pathLookup: (name: string) => string | null = (name) => Bun.which(name), locations: readonly string[] = ETCD_LOCATIONS): string {
  const onPath = pathLookup("etcd");
  if (onPath !== null) return onPath;
  for (const location of locations) if (existsSync(location)) return location;
  throw new Error(
    `etcd is not installed (not on PATH, not in ${locations.join(" or ")}): the cluster-mode tests need a real etcd. ` +
      "Install Debian's etcd-server (apt-get install -y etcd-server), or run scripts/install-etcd.sh, which scripts/test runs.",
  );
}

/** A port that was free a moment ago: bound on port 0 and closed again. */
export function freePort(): number {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

export class EtcdServer {
  private process: Subprocess<"ignore", "ignore", "pipe"> | undefined;
  private stderrTail = "";
  /** This member's name and the whole cluster's `name=peerURL` list; a single member by default. */
  private memberName = "bunka-test";
  private initialCluster: string | undefined;

  private constructor(
    readonly binary: string,
    readonly dataDir: string,
    readonly clientPort: number,
    readonly peerPort: number,
  ) {}

  /** The client URL, for EtcdClient's endpoints. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get running(): boolean {
    return this.process !== undefined && this.process.exitCode === null && this.process.signalCode === null;
  }

  static async start(): Promise<EtcdServer> {
    const binary = findEtcd();
    const dataDir = mkdtempSync(join(tmpdir(), "bunka-etcd-"));
    // Ports picked by binding port 0 can be taken by someone else before etcd binds them: try again.
    for (let attempt = 1; ; attempt++) {
      const server = new EtcdServer(binary, dataDir, freePort(), freePort());
      try {
        await server.launch();
        return server;
      } catch (error) {
        await server.kill();
        if (attempt >= 3) {
          rmSync(dataDir, { recursive: true, force: true });
          throw error;
        }
      }
    }
  }

  /** Stops etcd as an operator would (SIGTERM), waits for it to exit, and starts it again on the same ports and data. */
  async restart(): Promise<void> {
    await this.stop();
    await this.launch();
  }

  /** SIGTERM and wait. */
  async stop(): Promise<void> {
    const process = this.process;
    if (process === undefined) return;
    process.kill("SIGTERM");
    await process.exited;
    this.process = undefined;
  }

  /** SIGKILL and wait. */
  async kill(): Promise<void> {
    const process = this.process;
    if (process === undefined) return;
    process.kill("SIGKILL");
    await process.exited;
    this.process = undefined;
  }

  /** Kills etcd and removes its data directory. */
  async close(): Promise<void> {
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Starts etcd and resolves once /health says it is healthy (a leader is elected). */
  async launch(): Promise<void> {
    const peer = `http://127.0.0.1:${this.peerPort}`;
    this.stderrTail = "";
    const process = Bun.spawn(
      [
        this.binary,
        `--name=${this.memberName}`,
        `--data-dir=${this.dataDir}`,
        `--listen-client-urls=${this.endpoint}`,
        `--advertise-client-urls=${this.endpoint}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=${this.initialCluster ?? `${this.memberName}=${peer}`}`,
        "--initial-cluster-state=new",
        "--logger=zap",
        "--log-level=warn",
      ],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
    );
    this.process = process;
    void this.collectStderr(process);
    const deadline = performance.now() + HEALTH_TIMEOUT_MS;
    for (;;) {
      if (process.exitCode !== null || process.signalCode !== null) {
        this.process = undefined;
        throw new Error(`etcd exited (${process.exitCode ?? process.signalCode}) before it was healthy:\n${this.stderrTail}`);
      }
      if (await this.healthy()) return;
      if (performance.now() > deadline) throw new Error(`etcd at ${this.endpoint} was not healthy within ${HEALTH_TIMEOUT_MS} ms:\n${this.stderrTail}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** The stderr etcd wrote last (its tail), for a failure message. */
  get stderr(): string {
    return this.stderrTail;
  }

  /** A member of an etcd cluster (EtcdCluster.start), not started yet. */
  static member(binary: string, dataDir: string, name: string, clientPort: number, peerPort: number): EtcdServer {
    const server = new EtcdServer(binary, dataDir, clientPort, peerPort);
    server.memberName = name;
    return server;
  }

  /** Makes this member one of `members` (every member's `name=peerURL`), before its first launch. */
  joinCluster(initialCluster: string): void {
    this.initialCluster = initialCluster;
  }

  get name(): string {
    return this.memberName;
  }

  get peerEndpoint(): string {
    return `http://127.0.0.1:${this.peerPort}`;
  }

  private async healthy(): Promise<boolean> {
    try {
      const response = await fetch(`${this.endpoint}/health`, { signal: AbortSignal.timeout(1_000) });
      const body = (await response.json()) as { health?: unknown };
      return response.ok && body.health === "true";
    } catch {
      return false;
    }
  }

  private async collectStderr(process: Subprocess<"ignore", "ignore", "pipe">): Promise<void> {
    const decoder = new TextDecoder();
    for await (const chunk of process.stderr) {
      this.stderrTail = (this.stderrTail + decoder.decode(chunk, { stream: true })).slice(-4_000);
    }
  }
}

/**
 * An etcd cluster of `size` members on loopback ports (m1, m2, ...), each with its own data directory, for
 * tests of a broker that lists every member's client URL: a member can be killed and started again (it
 * rejoins from its data directory) while the others keep the quorum.
 */
export class EtcdCluster {
  private constructor(readonly members: EtcdServer[]) {}

  /** Every member's client URL, in member order: what `--etcd` lists. */
  get endpoints(): string[] {
    return this.members.map((m) => m.endpoint);
  }

  member(index: number): EtcdServer {
    const member = this.members[index];
    if (member === undefined) throw new Error(`no etcd member ${index} (there are ${this.members.length})`);
    return member;
  }

  static async start(size: number): Promise<EtcdCluster> {
    const binary = findEtcd();
    // Ports picked by binding port 0 can be taken by someone else before etcd binds them: try again.
    for (let attempt = 1; ; attempt++) {
      const members = Array.from({ length: size }, (_, i) => EtcdServer.member(binary, mkdtempSync(join(tmpdir(), `bunka-etcd-m${i + 1}-`)), `m${i + 1}`, freePort(), freePort()));
      const initialCluster = members.map((m) => `${m.name}=${m.peerEndpoint}`).join(",");
      for (const m of members) m.joinCluster(initialCluster);
      const cluster = new EtcdCluster(members);
      // All at once: no member is healthy (has a leader) before a quorum of them runs.
      const started = await Promise.allSettled(members.map((m) => m.launch()));
      const failed = started.find((r) => r.status === "rejected");
      if (failed === undefined) return cluster;
      await cluster.close();
      if (attempt >= 3) throw (failed as PromiseRejectedResult).reason;
    }
  }

  /** Waits until every running member answers /health true (a leader is elected and known to it). */
  async waitHealthy(timeoutMs = HEALTH_TIMEOUT_MS): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const running = this.members.filter((m) => m.running);
      const answers = await Promise.all(
        running.map(async (m) => {
          try {
            const response = await fetch(`${m.endpoint}/health`, { signal: AbortSignal.timeout(1_000) });
            return response.ok && ((await response.json()) as { health?: unknown }).health === "true";
          } catch {
            return false;
          }
        }),
      );
      if (answers.every(Boolean)) return;
      if (performance.now() > deadline) throw new Error(`etcd members ${running.map((m) => m.name).join(",")} not all healthy within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The index of the member that is the raft leader now (asked of the running members), or -1. */
  async leaderIndex(): Promise<number> {
    for (const m of this.members.filter((x) => x.running)) {
      try {
        const response = await fetch(`${m.endpoint}/v3/maintenance/status`, { method: "POST", body: "{}", signal: AbortSignal.timeout(1_000) });
        const status = (await response.json()) as { header?: { member_id?: string }; leader?: string };
        if (status.leader === undefined) continue;
        const list = await fetch(`${m.endpoint}/v3/cluster/member/list`, { method: "POST", body: "{}", signal: AbortSignal.timeout(1_000) });
        const members = ((await list.json()) as { members?: { ID: string; name: string }[] }).members ?? [];
        const name = members.find((x) => x.ID === status.leader)?.name;
        return this.members.findIndex((x) => x.name === name);
      } catch {
        /* ask the next member */
      }
    }
    return -1;
  }

  /** Kills every member and removes their data directories. */
  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.close()));
  }
}
