/**
 * An Ownership for group coordinator tests of cluster mode: single-broker ownership for everything but the
 * group slots, whose standings a test sets (`groupStandings`; elsewhere until it does). A group slot may be
 * written while this broker's claim stands at that epoch (being taken over, owned or being handed over),
 * as the ownership manager says.
 */
import type { OwnedResource } from "../../src/cluster/cluster-keys.ts";
import { SingleBrokerOwnership, type Ownership, type Standing } from "../../src/cluster/ownership.ts";

export function groupSlotOwnership(selfId: number): Ownership & { groupStandings: Map<number, Standing> } {
  const base = new SingleBrokerOwnership(selfId, "127.0.0.1", 9092);
  const groupStandings = new Map<number, Standing>();
  return {
    selfId,
    groupStandings,
    brokers: () => base.brokers(),
    controllerId: () => base.controllerId(),
    partitionLeader: () => selfId,
    slotOwner: () => selfId,
    standing: (resource: OwnedResource) =>
      resource.kind === "group" ? (groupStandings.get(resource.slot) ?? { state: "elsewhere", brokerId: -1 }) : base.standing(),
    mayAct: (resource: OwnedResource, epoch: number) => {
      if (resource.kind !== "group") return base.mayAct(resource, epoch);
      const standing = groupStandings.get(resource.slot);
      return standing !== undefined && standing.state !== "elsewhere" && standing.epoch === epoch;
    },
  };
}
