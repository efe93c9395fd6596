/**
 * How long a partition is unwritable when its leader stops, in a three-broker cluster with a 6 s lease
 * (tests/support/bunka-cluster.ts, measureFailover: from the signal to the first Produce acks=-1 answered
 * NONE by the broker the survivors name as the new leader).
 *
 * - SIGKILL: nobody may claim the partition before the dead leader's lease expires in etcd (it could still be
 *   acting under it, as far as anyone knows), so the figure is at least the lease's TTL less the time since
 *   the last keep-alive (sent every third of the TTL): above 6000 - 2000 ms, and bounded by the TTL plus a
 *   recovery.
 * - SIGTERM: the leader hands over and revokes its lease before it exits, so a survivor leads well before the
 *   TTL would have run out.
 * Each stopped broker is started again and the cluster balanced before the next measurement.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { BunkaCluster, type FailoverFigure } from "../support/bunka-cluster.ts";

const SESSION_TIMEOUT_MS = 6000;
const ROUNDS = 2;
let cluster: BunkaCluster;

beforeAll(async () => {
  cluster = await BunkaCluster.start({ brokers: 3, sessionTimeoutMs: SESSION_TIMEOUT_MS });
}, 180_000);

afterAll(async () => {
  await cluster?.close();
});

test("unavailability of a partition after SIGKILL of its leader (lease expiry) and after SIGTERM (hand-over)", async () => {
  await cluster.withLogs(async () => {
    await cluster.createTopic("failover", 3);
    await cluster.waitForBalanced(["failover"]);
    const figures: FailoverFigure[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const signal of ["SIGKILL", "SIGTERM"] as const) {
        const figure = await cluster.measureFailover("failover", round % 3, signal);
        figures.push(figure);
        await cluster.restart(figure.formerLeader);
        await cluster.waitForBalanced(["failover"]);
      }
    }
    const kills = figures.filter((f) => f.signal === "SIGKILL").map((f) => f.unavailableMs);
    const terms = figures.filter((f) => f.signal === "SIGTERM").map((f) => f.unavailableMs);
    console.log(`failover (lease ${SESSION_TIMEOUT_MS} ms): SIGKILL ${kills.join(", ")} ms; SIGTERM ${terms.join(", ")} ms`);
    for (const ms of kills) {
      expect(ms).toBeGreaterThan(SESSION_TIMEOUT_MS - SESSION_TIMEOUT_MS / 3);
      expect(ms).toBeLessThan(SESSION_TIMEOUT_MS + 10_000);
    }
    for (const ms of terms) expect(ms).toBeLessThan(SESSION_TIMEOUT_MS / 2);
  });
}, 240_000);
