/**
 * Who should own each resource of one kind (the partitions, or the 50 transaction slots, or the 50 group
 * slots) given the live brokers and the current owners (docs/architecture.md, "Ownership and cluster
 * mode"). Pure and deterministic: every broker computing it from the same inputs gets the same answer.
 *
 * Two goals, in this order:
 * - balance: every broker's share is within one of every other's (n resources, b brokers: n mod b brokers
 *   get ceil(n / b), the others floor(n / b));
 * - fewest moves: a resource whose owner is live stays with it unless that owner holds more than its
 *   share. The larger shares go to the brokers holding the most already, which is what makes the number
 *   of moves the least any balanced assignment allows: a broker keeps min(held, share), and giving a
 *   larger share to a broker that holds less could only make a larger holder give up one more.
 *
 * So when one of three brokers dies, only its resources move, spread over the survivors; when a broker
 * comes back, it takes its fair share, each survivor giving up only what it holds over its new share.
 * Resources whose owner is dead or unknown, and the ones given up, are dealt out round-robin among the
 * brokers below their share, in the order the resources were given, so that consecutive resources (the
 * partitions of one topic) land on different brokers.
 */

export interface AssignmentInput {
  /** Every resource of the kind, each once, in a stable order (the order decides ties). */
  resources: readonly string[];
  /** The live brokers. */
  brokers: readonly number[];
  /** The current owner of each resource that has one; owners that are not live are ignored. */
  owners: ReadonlyMap<string, number>;
}

/** The target owner of every resource; empty when no broker is live. */
export function assignOwners(input: AssignmentInput): Map<string, number> {
  const resources = [...new Set(input.resources)];
  const brokers = [...new Set(input.brokers)].sort((a, b) => a - b);
  const targets = new Map<string, number>();
  if (brokers.length === 0) return targets;

  const live = new Set(brokers);
  const held = new Map<number, string[]>(brokers.map((broker) => [broker, []]));
  for (const resource of resources) {
    const owner = input.owners.get(resource);
    if (owner !== undefined && live.has(owner)) held.get(owner)!.push(resource);
  }

  const base = Math.floor(resources.length / brokers.length);
  const larger = resources.length % brokers.length;
  // The larger shares go to the largest holders; equal holders by broker id, so that it is deterministic.
  const byHeld = [...brokers].sort((a, b) => held.get(b)!.length - held.get(a)!.length || a - b);
  const share = new Map<number, number>(byHeld.map((broker, rank) => [broker, base + (rank < larger ? 1 : 0)]));

  for (const broker of brokers) {
    for (const resource of held.get(broker)!.slice(0, share.get(broker)!)) targets.set(resource, broker);
  }
  const below = brokers.filter((broker) => held.get(broker)!.length < share.get(broker)!);
  const room = new Map<number, number>(below.map((broker) => [broker, share.get(broker)! - held.get(broker)!.length]));
  let turn = 0;
  for (const resource of resources) {
    if (targets.has(resource)) continue;
    // Some broker below its share always has room: the shares add up to the number of resources.
    while (room.get(below[turn % below.length]!)! === 0) turn++;
    const broker = below[turn % below.length]!;
    targets.set(resource, broker);
    room.set(broker, room.get(broker)! - 1);
    turn++;
  }
  return targets;
}

/** Resources whose live owner would change: the cost of an assignment. */
export function movesBetween(owners: ReadonlyMap<string, number>, targets: ReadonlyMap<string, number>, brokers: readonly number[]): number {
  const live = new Set(brokers);
  let moves = 0;
  for (const [resource, target] of targets) {
    const owner = owners.get(resource);
    if (owner !== undefined && live.has(owner) && owner !== target) moves++;
  }
  return moves;
}
