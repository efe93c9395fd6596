/**
 * Wake-ups between brokers (docs/architecture.md, "Wake-ups"): the durable hand-offs on the shared volume
 * (markers queued for a broker, producer fences, offset completions queued for a group slot) are found by
 * their target's poll every 2 s; a wake-up tells the target at once. It carries nothing but "look now":
 * the files are the truth, so a wake-up lost, repeated or early changes nothing but latency, and the poll
 * stays as the fallback.
 *
 * In cluster mode (`EtcdWaker`) a wake-up is a put of one key per target, which every broker watches:
 *
 *   /bunka/<clusterId>/wake/broker/<brokerId>   markers queued for that broker
 *   /bunka/<clusterId>/wake/markers-applied/<brokerId>
 *                                               a peer applied markers that broker's coordinator queued
 *                                               (its transactions waiting to complete look again)
 *   /bunka/<clusterId>/wake/group-slot/<slot>   offset completions queued for that group slot (its owner
 *                                               drains it; the others ignore it)
 *   /bunka/<clusterId>/wake/fences              a producer fence was published (every broker reads)
 *
 * The keys are bounded in number (one per broker, per group slot, and one) and each put only replaces the
 * value. A watch that missed events (compaction) wakes every target of this broker once. Single-broker
 * mode has no one to wake (`noopWaker`).
 */
import type { Logger } from "../platform/logger.ts";
import { clusterPrefix } from "./cluster-keys.ts";
import type { EtcdClient } from "./etcd/etcd-client.ts";
import { EtcdWatch } from "./etcd/etcd-watch.ts";
import { SLOT_COUNT } from "./ownership.ts";

export type WakeTarget =
  | { kind: "broker"; brokerId: number }
  | { kind: "markers-applied"; brokerId: number }
  | { kind: "group-slot"; slot: number }
  | { kind: "fences" };

export interface Waker {
  /** Tells the target to look at its queue now. Never throws; a failure is logged (the poll finds the work). */
  wake(target: WakeTarget): void;
  /** Calls `listener` for each wake-up meant for this broker; returns a function that stops it. */
  onWake(listener: (target: WakeTarget) => void): () => void;
  close(): Promise<void>;
}

/** Single-broker mode: nobody else to wake, and nothing ever wakes this broker. */
export const noopWaker: Waker = {
  wake: () => undefined,
  onWake: () => () => undefined,
  close: async () => undefined,
};

export function wakePrefix(clusterId: string): string {
  return `${clusterPrefix(clusterId)}wake/`;
}

export function wakeKey(clusterId: string, target: WakeTarget): string {
  switch (target.kind) {
    case "broker":
    case "markers-applied":
      if (!Number.isInteger(target.brokerId) || target.brokerId < 0) throw new RangeError(`invalid broker id ${target.brokerId}`);
      return `${wakePrefix(clusterId)}${target.kind}/${target.brokerId}`;
    case "group-slot":
      if (!Number.isInteger(target.slot) || target.slot < 0 || target.slot >= SLOT_COUNT) throw new RangeError(`invalid group slot ${target.slot}`);
      return `${wakePrefix(clusterId)}group-slot/${target.slot}`;
    case "fences":
      return `${wakePrefix(clusterId)}fences`;
  }
}

/** The target a wake key names, or undefined for a key that is not one. */
export function wakeTargetOfKey(clusterId: string, key: string): WakeTarget | undefined {
  const prefix = wakePrefix(clusterId);
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  if (rest === "fences") return { kind: "fences" };
  const match = /^(broker|markers-applied|group-slot)\/(0|[1-9][0-9]{0,9})$/.exec(rest);
  if (match === null) return undefined;
  const n = Number(match[2]);
  if (match[1] === "broker" || match[1] === "markers-applied") return n <= 0x7fffffff ? { kind: match[1], brokerId: n } : undefined;
  return n < SLOT_COUNT ? { kind: "group-slot", slot: n } : undefined;
}

export interface EtcdWakerOptions {
  client: EtcdClient;
  clusterId: string;
  selfId: number;
  log: Logger;
  nowMs(): number;
}

export class EtcdWaker implements Waker {
  private readonly listeners = new Set<(target: WakeTarget) => void>();
  private watch: EtcdWatch | undefined;
  private closed = false;
  /** Puts in flight, so that close waits for them. */
  private readonly puts = new Set<Promise<unknown>>();

  private constructor(private readonly options: EtcdWakerOptions) {}

  /** Starts watching from now: work queued before is found by the first poll. */
  static async open(options: EtcdWakerOptions): Promise<EtcdWaker> {
    const waker = new EtcdWaker(options);
    const { client, clusterId, log } = options;
    const prefix = wakePrefix(clusterId);
    const now = await client.range(prefix, { prefix: true, limit: 1 });
    waker.watch = new EtcdWatch(
      client,
      { key: prefix, prefix: true, startRevision: now.header.revision + 1n },
      {
        onEvents: (events) => {
          for (const event of events) {
            if (event.type !== "put") continue;
            const target = wakeTargetOfKey(clusterId, event.kv.key);
            if (target !== undefined) waker.deliver(target);
          }
        },
        onCompacted: async () => {
          // Wake-ups were missed: look at everything this broker may have to do, once.
          const read = await client.range(prefix, { prefix: true, limit: 1 });
          waker.deliver({ kind: "broker", brokerId: options.selfId });
          waker.deliver({ kind: "markers-applied", brokerId: options.selfId });
          waker.deliver({ kind: "fences" });
          for (let slot = 0; slot < SLOT_COUNT; slot++) waker.deliver({ kind: "group-slot", slot });
          return read.header.revision + 1n;
        },
      },
      { log },
    );
    return waker;
  }

  wake(target: WakeTarget): void {
    if (this.closed) return;
    const { client, clusterId, selfId, log, nowMs } = this.options;
    let key: string;
    try {
      key = wakeKey(clusterId, target);
    } catch (error) {
      log.warn("a wake-up names no valid target", { target: JSON.stringify(target), error: String(error) });
      return;
    }
    const put = client
      .put(key, JSON.stringify({ from: selfId, atMs: nowMs() }))
      .catch((error: unknown) => log.debug("a wake-up could not be sent; the target's poll finds the work", { key, error: String(error) }))
      .finally(() => this.puts.delete(put));
    this.puts.add(put);
  }

  onWake(listener: (target: WakeTarget) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.puts]);
    await this.watch?.close();
    this.listeners.clear();
  }

  private deliver(target: WakeTarget): void {
    // Markers are woken for their broker only; group slots and fences concern whoever serves them.
    if ((target.kind === "broker" || target.kind === "markers-applied") && target.brokerId !== this.options.selfId) return;
    for (const listener of [...this.listeners]) {
      try {
        listener(target);
      } catch (error) {
        this.options.log.warn("a wake-up listener failed", { target: JSON.stringify(target), error: String(error) });
      }
    }
  }
}
