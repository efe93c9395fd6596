/**
 * broker/partition-leadership.ts: Apache's checkCurrentLeaderEpoch, and the order of the checks against
 * each ownership standing (the epoch check wherever this broker has an epoch, then leadership).
 */
import { describe, expect, test } from "bun:test";
import { SingleBrokerOwnership, type Ownership, type Standing } from "../../../src/cluster/ownership.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { checkCurrentLeaderEpoch, partitionLeadership } from "../../../src/broker/partition-leadership.ts";

function standingAs(standing: Standing): Ownership {
  const ownership = new SingleBrokerOwnership(1, "127.0.0.1", 9092);
  ownership.standing = () => standing;
  return ownership;
}

describe("checkCurrentLeaderEpoch", () => {
  test("-1 is no check; older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, equal NONE", () => {
    expect(checkCurrentLeaderEpoch(-1, 7)).toBe(ErrorCode.NONE);
    expect(checkCurrentLeaderEpoch(7, 7)).toBe(ErrorCode.NONE);
    expect(checkCurrentLeaderEpoch(6, 7)).toBe(ErrorCode.FENCED_LEADER_EPOCH);
    expect(checkCurrentLeaderEpoch(8, 7)).toBe(ErrorCode.UNKNOWN_LEADER_EPOCH);
  });
});

describe("partitionLeadership", () => {
  test("single-broker mode leads everything at epoch 0", () => {
    const ownership = new SingleBrokerOwnership(1, "127.0.0.1", 9092);
    expect(partitionLeadership(ownership, "t", 0, -1)).toEqual({ kind: "leader", epoch: 0 });
    expect(partitionLeadership(ownership, "t", 0, 0)).toEqual({ kind: "leader", epoch: 0 });
    expect(partitionLeadership(ownership, "t", 0, 1)).toEqual({ kind: "refused", errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, epoch: 0 });
  });

  test("owned at 5: the epoch check alone decides", () => {
    const ownership = standingAs({ state: "owned", epoch: 5 });
    expect(partitionLeadership(ownership, "t", 0, 5)).toEqual({ kind: "leader", epoch: 5 });
    expect(partitionLeadership(ownership, "t", 0, 4)).toEqual({ kind: "refused", errorCode: ErrorCode.FENCED_LEADER_EPOCH, epoch: 5 });
  });

  test("loading or leaving: the epoch check first, then NOT_LEADER_OR_FOLLOWER", () => {
    for (const state of ["loading", "leaving"] as const) {
      const ownership = standingAs({ state, epoch: 5 });
      expect(partitionLeadership(ownership, "t", 0, 4)).toEqual({ kind: "refused", errorCode: ErrorCode.FENCED_LEADER_EPOCH, epoch: 5 });
      expect(partitionLeadership(ownership, "t", 0, 6)).toEqual({ kind: "refused", errorCode: ErrorCode.UNKNOWN_LEADER_EPOCH, epoch: 5 });
      expect(partitionLeadership(ownership, "t", 0, 5)).toEqual({ kind: "refused", errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch: 5 });
      expect(partitionLeadership(ownership, "t", 0, -1)).toEqual({ kind: "refused", errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch: 5 });
    }
  });

  test("elsewhere: NOT_LEADER_OR_FOLLOWER whatever epoch is named (this broker has none)", () => {
    const ownership = standingAs({ state: "elsewhere", brokerId: 2 });
    for (const epoch of [-1, 0, 9]) {
      expect(partitionLeadership(ownership, "t", 0, epoch)).toEqual({ kind: "refused", errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, epoch: -1 });
    }
  });
});
