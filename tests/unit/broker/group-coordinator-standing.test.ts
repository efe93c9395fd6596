/**
 * The group coordinator answers by its slot's standing (cluster/ownership.ts): owned serves, loading answers
 * COORDINATOR_LOAD_IN_PROGRESS, leaving and elsewhere NOT_COORDINATOR.
 */
import { describe, expect, test } from "bun:test";
import { GroupCoordinator } from "../../../src/broker/group-coordinator.ts";
import type { OwnedResource } from "../../../src/cluster/cluster-keys.ts";
import { SingleBrokerOwnership, slotOf, type Ownership, type Standing } from "../../../src/cluster/ownership.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { ManualClock } from "../../support/manual-clock.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

/** Single-broker ownership, except for the group slots' standings the test sets. */
function standingOwnership(): Ownership & { groupStandings: Map<number, Standing> } {
  const base = new SingleBrokerOwnership(0, "127.0.0.1", 9092);
  const groupStandings = new Map<number, Standing>();
  return {
    selfId: base.selfId,
    groupStandings,
    brokers: () => base.brokers(),
    controllerId: () => base.controllerId(),
    partitionLeader: () => base.partitionLeader(),
    slotOwner: () => base.slotOwner(),
    standing: (resource: OwnedResource) => (resource.kind === "group" ? groupStandings.get(resource.slot) : undefined) ?? base.standing(),
    mayAct: (resource: OwnedResource, epoch: number) => base.mayAct(resource, epoch),
  };
}

describe("group coordinator and slot standing", () => {
  test("owned serves, loading answers COORDINATOR_LOAD_IN_PROGRESS, leaving and elsewhere NOT_COORDINATOR", async () => {
    const ownership = standingOwnership();
    const groups = await GroupCoordinator.open({ fs: new MemoryFs(), clock: new ManualClock(), log: silentLogger, dataDir: "/data", ownership, options: { sweep: false } });
    const slot = slotOf("g");
    const heartbeat = () => groups.heartbeat({ groupId: "g", memberId: "m", groupInstanceId: null, generationId: 1 });
    const described = async () => (await groups.describeGroup("g")).errorCode;
    expect(await described()).toBe(ErrorCode.NONE);
    ownership.groupStandings.set(slot, { state: "loading", epoch: 1 });
    expect(await described()).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect(await heartbeat()).toBe(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS);
    expect(groups.isCoordinatorFor("g")).toBe(false);
    ownership.groupStandings.set(slot, { state: "leaving", epoch: 1 });
    expect(await heartbeat()).toBe(ErrorCode.NOT_COORDINATOR);
    expect((await groups.fetchOffsets("g", null, false)).errorCode).toBe(ErrorCode.NOT_COORDINATOR);
    ownership.groupStandings.set(slot, { state: "elsewhere", brokerId: 3 });
    expect(await described()).toBe(ErrorCode.NOT_COORDINATOR);
    ownership.groupStandings.set(slot, { state: "owned", epoch: 1 });
    expect(await described()).toBe(ErrorCode.NONE);
    await groups.close();
  });
});
