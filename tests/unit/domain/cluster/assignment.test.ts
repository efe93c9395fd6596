/**
 * The assignment of owners: every resource to a live broker, shares within one of each other, and the
 * fewest moves any balanced assignment allows: checked on the named scenarios (a broker lost, a broker
 * back), against brute force on small cases, and on seeded random ones.
 */
import { describe, expect, test } from "bun:test";
import { assignOwners, movesBetween, type AssignmentInput } from "../../../../src/domain/cluster/assignment.ts";
import { seededRandom } from "../../../support/random.ts";

const slots = (n: number) => Array.from({ length: n }, (_, i) => String(i));

function counts(targets: Map<string, number>, brokers: readonly number[]): Map<number, number> {
  const result = new Map<number, number>(brokers.map((b) => [b, 0]));
  for (const broker of targets.values()) result.set(broker, (result.get(broker) ?? 0) + 1);
  return result;
}

/**
 * The fewest moves of any balanced assignment, from the counts alone: the brokers holding the most get the
 * larger shares; each gives up what it holds beyond its share.
 */
function fewestMoves(input: AssignmentInput): number {
  const live = new Set(input.brokers);
  const held = new Map<number, number>([...live].map((b) => [b, 0]));
  for (const resource of input.resources) {
    const owner = input.owners.get(resource);
    if (owner !== undefined && live.has(owner)) held.set(owner, held.get(owner)! + 1);
  }
  const sorted = [...held.values()].sort((a, b) => b - a);
  const base = Math.floor(input.resources.length / live.size);
  const larger = input.resources.length % live.size;
  return sorted.reduce((sum, count, rank) => sum + Math.max(0, count - (base + (rank < larger ? 1 : 0))), 0);
}

/** The fewest moves over every balanced assignment, by enumerating them all (small cases only). */
function bruteForceFewestMoves(input: AssignmentInput): number {
  const brokers = input.brokers;
  let best = Infinity;
  const choice = new Array<number>(input.resources.length).fill(0);
  const visit = (i: number) => {
    if (i === input.resources.length) {
      const perBroker = new Map<number, number>(brokers.map((b) => [b, 0]));
      let moves = 0;
      choice.forEach((b, r) => {
        perBroker.set(brokers[b]!, perBroker.get(brokers[b]!)! + 1);
        const owner = input.owners.get(input.resources[r]!);
        if (owner !== undefined && brokers.includes(owner) && owner !== brokers[b]) moves++;
      });
      const values = [...perBroker.values()];
      if (Math.max(...values) - Math.min(...values) <= 1) best = Math.min(best, moves);
      return;
    }
    for (let b = 0; b < brokers.length; b++) {
      choice[i] = b;
      visit(i + 1);
    }
  };
  visit(0);
  return best;
}

function checkAssignment(input: AssignmentInput): Map<string, number> {
  const targets = assignOwners(input);
  // Every resource, each to a live broker.
  expect([...targets.keys()].sort()).toEqual([...new Set(input.resources)].sort());
  for (const broker of targets.values()) expect(input.brokers).toContain(broker);
  // Balanced within one.
  const perBroker = [...counts(targets, input.brokers).values()];
  expect(Math.max(...perBroker) - Math.min(...perBroker)).toBeLessThanOrEqual(1);
  // The fewest moves.
  expect(movesBetween(input.owners, targets, input.brokers)).toBe(fewestMoves(input));
  // Stable: assigning again from the result moves nothing.
  expect(assignOwners({ ...input, owners: targets })).toEqual(targets);
  return targets;
}

function randomInput(random: ReturnType<typeof seededRandom>, resourcesMax: number, brokersMax: number): AssignmentInput {
  const resources = slots(random.int(0, resourcesMax));
  const pool = Array.from({ length: brokersMax + 2 }, (_, i) => i * 3 + random.int(0, 2));
  const brokers = pool.filter(() => random.next() < 0.6).slice(0, brokersMax);
  if (brokers.length === 0) brokers.push(pool[0]!);
  const owners = new Map<string, number>();
  for (const resource of resources) {
    const roll = random.next();
    // Owned by a live broker, by a dead one (of the pool but not live), or by nobody.
    if (roll < 0.6) owners.set(resource, random.pick(brokers));
    else if (roll < 0.85) owners.set(resource, random.pick(pool));
  }
  return { resources, brokers, owners };
}

describe("assignment of owners", () => {
  test("no live broker: nobody is the target of anything", () => {
    expect(assignOwners({ resources: slots(5), brokers: [], owners: new Map() }).size).toBe(0);
  });

  test("from nothing: 50 slots over 3 brokers is 17, 17, 16, consecutive slots on different brokers", () => {
    const targets = checkAssignment({ resources: slots(50), brokers: [3, 1, 2], owners: new Map() });
    expect([...counts(targets, [1, 2, 3]).values()]).toEqual([17, 17, 16]);
    expect([0, 1, 2].map((i) => targets.get(String(i)))).toEqual([1, 2, 3]);
  });

  test("losing one of three brokers moves only its share, spread over the two others", () => {
    const start = assignOwners({ resources: slots(50), brokers: [1, 2, 3], owners: new Map() });
    const after = checkAssignment({ resources: slots(50), brokers: [1, 2], owners: start });
    let moved = 0;
    for (const [slot, owner] of start) {
      if (owner === 3) moved++;
      else expect(after.get(slot)).toBe(owner);
    }
    expect(moved).toBe(16);
    expect([...counts(after, [1, 2]).values()]).toEqual([25, 25]);
  });

  test("a broker coming back gets a fair share with the fewest moves, taken from the larger holders", () => {
    const two = assignOwners({ resources: slots(50), brokers: [1, 2], owners: new Map() });
    const three = checkAssignment({ resources: slots(50), brokers: [1, 2, 3], owners: two });
    expect(counts(three, [1, 2, 3]).get(3)).toBe(16);
    // Each of the two gives up 8: 25 - 17.
    expect(movesBetween(two, three, [1, 2, 3])).toBe(16);
    for (const [slot, owner] of three) if (owner !== 3) expect(two.get(slot)).toBe(owner);
  });

  test("the larger shares go to the brokers that hold the most, so the fewest move", () => {
    // 7 resources, 3 brokers: shares 3, 2, 2. Broker 3 holds 3 and keeps all of them.
    const owners = new Map([
      ["0", 3], ["1", 3], ["2", 3], ["3", 1], ["4", 1], ["5", 2], ["6", 2],
    ]);
    const targets = checkAssignment({ resources: slots(7), brokers: [1, 2, 3], owners });
    expect(movesBetween(owners, targets, [1, 2, 3])).toBe(0);
  });

  test("a lopsided start is rebalanced by moving only the excess", () => {
    const owners = new Map(slots(12).map((s) => [s, 1]));
    const targets = checkAssignment({ resources: slots(12), brokers: [1, 2, 3, 4], owners });
    expect(movesBetween(owners, targets, [1, 2, 3, 4])).toBe(9);
  });

  test("owners that are not live and resources without an owner are dealt out; unknown owned resources are ignored", () => {
    const owners = new Map([["0", 9], ["1", 9], ["gone-topic-0", 1]]);
    const targets = checkAssignment({ resources: slots(4), brokers: [1, 2], owners });
    expect(targets.has("gone-topic-0")).toBe(false);
  });

  test("more brokers than resources: each resource once, nobody with two", () => {
    const owners = new Map([["0", 1], ["1", 1]]);
    const targets = checkAssignment({ resources: slots(2), brokers: [1, 2, 3, 4, 5], owners });
    expect(targets.get("0")).toBe(1);
    expect(new Set(targets.values()).size).toBe(2);
  });

  test("the same inputs in another order give the same brokers' shares", () => {
    const a = assignOwners({ resources: slots(10), brokers: [1, 2, 3], owners: new Map() });
    const b = assignOwners({ resources: slots(10), brokers: [3, 2, 1, 2], owners: new Map() });
    expect(b).toEqual(a);
  });

  test("property: small cases match brute force over every balanced assignment", () => {
    const random = seededRandom(2024);
    for (let i = 0; i < 300; i++) {
      const input = randomInput(random, 7, 3);
      const targets = checkAssignment(input);
      expect(movesBetween(input.owners, targets, input.brokers)).toBe(bruteForceFewestMoves(input));
    }
  });

  test("property: random cases are balanced within one with the fewest moves", () => {
    const random = seededRandom(7);
    for (let i = 0; i < 500; i++) checkAssignment(randomInput(random, 300, 9));
  });

  test("property: a sequence of brokers dying and returning moves only what each change requires", () => {
    const random = seededRandom(99);
    const resources = slots(50);
    let live = [1, 2, 3];
    let owners = assignOwners({ resources, brokers: live, owners: new Map() });
    for (let step = 0; step < 200; step++) {
      const all = [1, 2, 3, 4, 5];
      const next = all.filter((b) => (live.includes(b) ? random.next() < 0.85 : random.next() < 0.3));
      if (next.length === 0) continue;
      const input = { resources, brokers: next, owners };
      const targets = checkAssignment(input);
      // A broker that stayed gives a resource up only when it held more than its new share.
      const before = counts(owners, next);
      const after = counts(targets, next);
      for (const [resource, owner] of owners) {
        if (next.includes(owner) && targets.get(resource) !== owner) expect(after.get(owner)!).toBeLessThan(before.get(owner)!);
      }
      owners = targets;
      live = next;
    }
  });
});
