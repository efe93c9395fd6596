/**
 * The offline checker of a Jepsen-style history (docs/checker.md; the format is history.ts). It takes the
 * final read (read_committed, every partition from 0 to its end) as the ground truth of each partition's
 * order and finds:
 *
 * - aborted-read: a read (a poll, or the final read) saw a value written by a transaction that aborted: one
 *   that ended "fail", or ended "info" (or never ended: a crashed client) with none of its writes in the
 *   final read;
 * - lost-write: a write of a committed transaction ("ok", or "info" with some of its writes in the final
 *   read, which proves it committed) missing from the final read;
 * - duplicate: one value at two offsets; inconsistent-offset: one offset of a partition with two values
 *   (over acknowledged sends, polls and the final read);
 * - phantom: a value read that no transaction ever wrote;
 * - poll-skip: a process's successive polls of a partition passed over an offset that holds a committed
 *   record (from the last record it consumed, or from the position it last sought to);
 * - nonmonotonic-poll: a process's poll of a partition returned an offset at or below one it had consumed
 *   since its last seek (or below the seek's position);
 * - nonmonotonic-send: a process's acknowledged sends to one partition went backwards (or repeated an offset);
 * - committed-offsets: a process's consumer started at other positions than the offsets its lineage's last
 *   committed transaction carried (0 before any), or than those of a later transaction of unknown outcome
 *   (the offsets commit with the transaction, so a new process resumes exactly there); the same for the
 *   group's offsets as a process read them back (a "committed" line);
 * - G0: a cycle of write-write dependencies between committed transactions, and G1c: a cycle of write-write
 *   and write-read dependencies with at least one write-read edge. T1 -ww-> T2 when a record of T2 follows a
 *   record of T1 at the next committed offset of a partition; T1 -wr-> T2 when T2 read a value T1 wrote.
 *   Cycles are found per strongly connected component (Tarjan), one reported per component.
 *
 * A history's lines of one process must be in the order the process printed them (the harness keeps that).
 */
import { type HistoryEvent, type MicroOp, type PolledRecord, type SendOp, type TxnEvent, tpKey } from "./history.ts";

export const ANOMALY_KINDS = [
  "aborted-read",
  "lost-write",
  "duplicate",
  "inconsistent-offset",
  "phantom",
  "poll-skip",
  "nonmonotonic-poll",
  "nonmonotonic-send",
  "committed-offsets",
  "G0",
  "G1c",
] as const;
export type AnomalyKind = (typeof ANOMALY_KINDS)[number];

export interface Anomaly {
  kind: AnomalyKind;
  message: string;
  /** The transactions involved, as "<process>:<txn>" (a cycle's, in cycle order). */
  txns?: string[];
}

export type TxnOutcome = "committed" | "aborted" | "unknown";

export interface CheckStats {
  txns: number;
  ok: number;
  fail: number;
  /** Ended "info", or never ended (the client was killed). */
  info: number;
  /** Info transactions that the final read shows committed. */
  infoCommitted: number;
  /** Sends acknowledged with an offset. */
  sendsAcked: number;
  /** Acknowledged sends of transactions that aborted (what aborted-read checks can catch). */
  sendsAborted: number;
  /** Starts of processes and read-backs of the group's offsets that were compared with the committed offsets. */
  offsetChecks: number;
  /** Records returned by polls (in any transaction). */
  recordsPolled: number;
  /** Records of the final read. */
  finalRecords: number;
  faults: Record<string, number>;
  /** Edges of the dependency graph between committed transactions. */
  wwEdges: number;
  wrEdges: number;
}

export interface CheckResult {
  valid: boolean;
  anomalies: Anomaly[];
  counts: Record<AnomalyKind, number>;
  stats: CheckStats;
}

interface Txn {
  id: string;
  process: number;
  invoke: TxnEvent;
  end?: TxnEvent;
  /** The planned sends (from the invoke). */
  planned: SendOp[];
  outcome: TxnOutcome;
}

const txnId = (e: { process: number; txn: number }) => `${e.process}:${e.txn}`;
const isSend = (op: MicroOp): op is SendOp => op.f === "send";
const pollRecords = (ops: readonly MicroOp[]): PolledRecord[] => ops.flatMap((op) => (op.f === "poll" ? (op.records ?? []) : []));

/** Sorted committed offsets of one partition (from the final read), for range questions. */
class OffsetSet {
  private readonly sorted: number[];
  constructor(offsets: number[]) {
    this.sorted = [...offsets].sort((a, b) => a - b);
  }
  /** Committed offsets o with from <= o < to. */
  between(from: number, to: number): number[] {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.sorted[mid]! < from) lo = mid + 1;
      else hi = mid;
    }
    const out: number[] = [];
    for (let i = lo; i < this.sorted.length && this.sorted[i]! < to; i++) out.push(this.sorted[i]!);
    return out;
  }
}

export function checkHistory(history: readonly HistoryEvent[]): CheckResult {
  const anomalies: Anomaly[] = [];
  const report = (kind: AnomalyKind, message: string, txns?: string[]) => anomalies.push(txns ? { kind, message, txns } : { kind, message });

  // ---------------------------------------------------------------------------------------------
  // Transactions, writers, the final read

  const txns = new Map<string, Txn>();
  const writerOf = new Map<string, Txn>(); // value -> the transaction that planned to write it
  const finalByTp = new Map<string, PolledRecord[]>();
  const faults: Record<string, number> = {};
  for (const e of history) {
    if (e.type === "invoke") {
      const planned = e.ops.filter(isSend);
      const txn: Txn = { id: txnId(e), process: e.process, invoke: e, planned, outcome: "unknown" };
      if (txns.has(txn.id)) throw new Error(`history: transaction ${txn.id} invoked twice`);
      txns.set(txn.id, txn);
      for (const s of planned) {
        if (writerOf.has(s.value)) throw new Error(`history: value ${s.value} planned twice (values must be unique)`);
        writerOf.set(s.value, txn);
      }
    } else if (e.type === "ok" || e.type === "fail" || e.type === "info") {
      const txn = txns.get(txnId(e));
      if (!txn) throw new Error(`history: ${e.type} of ${txnId(e)} without an invoke`);
      if (txn.end) throw new Error(`history: transaction ${txn.id} completed twice`);
      txn.end = e;
    } else if (e.type === "final") {
      const key = tpKey(e);
      if (!finalByTp.has(key)) finalByTp.set(key, []);
      finalByTp.get(key)!.push(e);
    } else if (e.type === "nemesis") {
      faults[e.f] = (faults[e.f] ?? 0) + 1;
    }
  }
  for (const records of finalByTp.values()) records.sort((a, b) => a.offset - b.offset);
  const finalValues = new Set<string>();
  for (const records of finalByTp.values()) for (const r of records) finalValues.add(r.value);
  const committedOffsets = new Map<string, OffsetSet>();
  for (const [key, records] of finalByTp) committedOffsets.set(key, new OffsetSet(records.map((r) => r.offset)));

  // Outcomes: ok committed, fail aborted; info (or unfinished) committed exactly when its writes were read at
  // the end, aborted when it wrote and none were, unknown when it wrote nothing.
  for (const txn of txns.values()) {
    const kind = txn.end?.type ?? "info";
    if (kind === "ok") txn.outcome = "committed";
    else if (kind === "fail") txn.outcome = "aborted";
    else if (txn.planned.length === 0) txn.outcome = "unknown";
    else txn.outcome = txn.planned.some((s) => finalValues.has(s.value)) ? "committed" : "aborted";
  }

  // ---------------------------------------------------------------------------------------------
  // Values and offsets: every observation of (partition, offset, value)

  interface Observation {
    tp: string;
    offset: number;
    value: string;
    by: string;
  }
  const observations: Observation[] = [];
  for (const txn of txns.values()) {
    for (const op of txn.end?.ops ?? []) {
      if (isSend(op) && op.offset !== undefined) observations.push({ tp: tpKey(op), offset: op.offset, value: op.value, by: `send of ${txn.id}` });
    }
    for (const r of pollRecords(txn.end?.ops ?? [])) observations.push({ tp: tpKey(r), offset: r.offset, value: r.value, by: `poll of ${txn.id}` });
  }
  for (const [key, records] of finalByTp) for (const r of records) observations.push({ tp: key, offset: r.offset, value: r.value, by: "final read" });

  const valueAt = new Map<string, Observation>(); // "tp@offset" -> first observation
  const offsetOf = new Map<string, Observation>(); // value -> first observation
  const reportedOffsets = new Set<string>();
  const reportedValues = new Set<string>();
  for (const o of observations) {
    const at = `${o.tp}@${o.offset}`;
    const seenAt = valueAt.get(at);
    if (!seenAt) valueAt.set(at, o);
    else if (seenAt.value !== o.value && !reportedOffsets.has(at)) {
      reportedOffsets.add(at);
      report("inconsistent-offset", `${at} holds ${JSON.stringify(seenAt.value)} (${seenAt.by}) and ${JSON.stringify(o.value)} (${o.by})`);
    }
    const seenValue = offsetOf.get(o.value);
    if (!seenValue) offsetOf.set(o.value, o);
    else if ((seenValue.tp !== o.tp || seenValue.offset !== o.offset) && !reportedValues.has(o.value)) {
      reportedValues.add(o.value);
      report("duplicate", `${JSON.stringify(o.value)} at ${seenValue.tp}@${seenValue.offset} (${seenValue.by}) and at ${o.tp}@${o.offset} (${o.by})`);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reads of values nobody wrote, or that an aborted transaction wrote

  const checkRead = (value: string, where: string, reader?: string) => {
    const writer = writerOf.get(value);
    if (!writer) report("phantom", `${where} read ${JSON.stringify(value)}, which no transaction wrote`, reader ? [reader] : undefined);
    else if (writer.outcome === "aborted") {
      const how = writer.end?.type ?? "unfinished";
      report("aborted-read", `${where} read ${JSON.stringify(value)}, written by ${writer.id} (${how}, aborted)`, reader ? [writer.id, reader] : [writer.id]);
    }
  };
  for (const txn of txns.values()) for (const r of pollRecords(txn.end?.ops ?? [])) checkRead(r.value, `a poll of ${txn.id} at ${tpKey(r)}@${r.offset}`, txn.id);
  for (const [key, records] of finalByTp) for (const r of records) checkRead(r.value, `the final read at ${key}@${r.offset}`);

  // ---------------------------------------------------------------------------------------------
  // Committed writes missing at the end

  for (const txn of txns.values()) {
    if (txn.outcome !== "committed") continue;
    const sends = txn.end?.type === "ok" ? txn.end.ops.filter(isSend) : txn.planned;
    for (const s of sends) {
      if (finalValues.has(s.value)) continue;
      const acked = s.offset !== undefined ? ` (acknowledged at ${tpKey(s)}@${s.offset})` : "";
      const why = txn.end?.type === "ok" ? "committed" : "proven committed by its other writes";
      report("lost-write", `${JSON.stringify(s.value)} of ${txn.id} (${why})${acked} is missing from the final read`, [txn.id]);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Per process: polls (skips, going backwards) and sends (going backwards)

  interface PollState {
    /** The position of the last seek: the next record may not be below it. */
    position: number;
    /** The last offset consumed since that seek. */
    last?: number;
  }
  const pollStates = new Map<number, Map<string, PollState>>();
  const lastSend = new Map<string, { offset: number; txn: string }>(); // "process tp" -> last acknowledged send
  for (const e of history) {
    if (e.type === "seek") {
      const states = new Map<string, PollState>();
      for (const p of e.positions) states.set(tpKey(p), { position: p.offset });
      pollStates.set(e.process, states);
      continue;
    }
    if (e.type !== "ok" && e.type !== "fail" && e.type !== "info") continue;
    const id = txnId(e);
    const states = pollStates.get(e.process) ?? new Map<string, PollState>();
    pollStates.set(e.process, states);
    for (const r of pollRecords(e.ops)) {
      const key = tpKey(r);
      const state = states.get(key);
      if (!state) {
        states.set(key, { position: r.offset, last: r.offset }); // no seek known: nothing to compare with
        continue;
      }
      if (state.last !== undefined ? r.offset <= state.last : r.offset < state.position) {
        const after = state.last !== undefined ? `after consuming offset ${state.last}` : `after seeking to ${state.position}`;
        report("nonmonotonic-poll", `process ${e.process} polled ${key}@${r.offset} ${after} (${id})`, [id]);
      } else {
        const from = state.last !== undefined ? state.last + 1 : state.position;
        const skipped = committedOffsets.get(key)?.between(from, r.offset) ?? [];
        if (skipped.length > 0) {
          const head = skipped.slice(0, 5).join(", ") + (skipped.length > 5 ? ", ..." : "");
          report("poll-skip", `process ${e.process} polled ${key}@${r.offset} next (${id}), skipping ${skipped.length} committed record(s) at ${head}`, [id]);
        }
      }
      state.last = r.offset;
    }
    for (const op of e.ops) {
      if (!isSend(op) || op.offset === undefined) continue;
      const key = `${e.process} ${tpKey(op)}`;
      const previous = lastSend.get(key);
      if (previous && op.offset <= previous.offset) {
        report("nonmonotonic-send", `process ${e.process} was acknowledged ${tpKey(op)}@${op.offset} (${id}) after ${tpKey(op)}@${previous.offset} (${previous.txn})`, [previous.txn, id]);
      }
      lastSend.set(key, { offset: op.offset, txn: id });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Per lineage (transactional id and consumer group): where each new process's consumer starts

  type Offsets = Map<string, number> | "unknown";
  const toOffsets = (list: TxnEvent["offsets"]): Offsets => (list ? new Map(list.map((o) => [tpKey(o), o.offset])) : "unknown");
  interface LineageState {
    /** Carried by the latest committed transaction (undefined: none yet, so 0 everywhere). */
    committed?: Offsets;
    /** Carried by later transactions of unknown outcome. */
    maybe: Offsets[];
  }
  const lineageOf = new Map<number, number>();
  const lineages = new Map<number, LineageState>();
  const started = new Set<number>();
  let offsetChecks = 0;
  for (const e of history) {
    if (e.type === "start" && e.lineage !== undefined) {
      lineageOf.set(e.process, e.lineage);
      if (!lineages.has(e.lineage)) lineages.set(e.lineage, { maybe: [] });
      continue;
    }
    const lineage = "process" in e && e.process !== undefined ? lineageOf.get(e.process) : undefined;
    if (lineage === undefined) continue;
    const state = lineages.get(lineage)!;
    if (e.type === "ok" || e.type === "fail" || e.type === "info") {
      const txn = txns.get(txnId(e))!;
      if (txn.outcome === "committed") {
        state.committed = toOffsets(e.offsets);
        state.maybe = [];
      } else if (txn.outcome === "unknown") state.maybe.push(toOffsets(e.offsets));
    } else if ((e.type === "seek" && !started.has(e.process)) || e.type === "committed") {
      if (e.type === "seek") started.add(e.process);
      const candidates: Offsets[] = [state.committed ?? new Map(), ...state.maybe];
      if (candidates.includes("unknown")) continue; // a killed process's last transaction committed: offsets unknown
      offsetChecks++;
      const matches = (c: Map<string, number>) => e.positions.every((p) => p.offset === (c.get(tpKey(p)) ?? 0));
      if (!candidates.some((c) => c !== "unknown" && matches(c))) {
        const expected = candidates.map((c) => (c === "unknown" ? "?" : e.positions.map((p) => `${tpKey(p)}@${c.get(tpKey(p)) ?? 0}`).join(" ")));
        const got = e.positions.map((p) => `${tpKey(p)}@${p.offset}`).join(" ");
        const what = e.type === "seek" ? "started at" : "read the group's committed offsets as";
        report("committed-offsets", `process ${e.process} (lineage ${lineage}) ${what} ${got}, its lineage's committed offsets being ${expected.join(" or ")}`);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Dependency cycles between committed transactions

  const committed = [...txns.values()].filter((t) => t.outcome === "committed");
  const ww = new Map<string, Set<string>>();
  const wr = new Map<string, Set<string>>();
  const addEdge = (edges: Map<string, Set<string>>, from: string, to: string) => {
    if (from === to) return;
    if (!edges.has(from)) edges.set(from, new Set());
    edges.get(from)!.add(to);
  };
  for (const records of finalByTp.values()) {
    let previous: Txn | undefined;
    for (const r of records) {
      const writer = writerOf.get(r.value);
      if (!writer || writer.outcome !== "committed") continue; // reported above
      if (previous) addEdge(ww, previous.id, writer.id);
      previous = writer;
    }
  }
  for (const reader of committed) {
    for (const r of pollRecords(reader.end?.ops ?? [])) {
      const writer = writerOf.get(r.value);
      if (writer && writer.outcome === "committed") addEdge(wr, writer.id, reader.id);
    }
  }
  const countEdges = (edges: Map<string, Set<string>>) => [...edges.values()].reduce((n, s) => n + s.size, 0);
  const nodes = committed.map((t) => t.id);

  for (const scc of stronglyConnected(nodes, (n) => ww.get(n) ?? new Set())) {
    const cycle = findCycle(scc, (n) => ww.get(n) ?? new Set());
    report("G0", `write cycle: ${cycle.join(" -ww-> ")} -ww-> ${cycle[0]}`, cycle);
  }
  const both = (n: string) => new Set([...(ww.get(n) ?? []), ...(wr.get(n) ?? [])]);
  for (const scc of stronglyConnected(nodes, both)) {
    const inside = new Set(scc);
    // A cycle through one of the component's write-read edges (u -wr-> v, then back from v to u).
    let reported = false;
    for (const u of scc) {
      for (const v of wr.get(u) ?? []) {
        if (!inside.has(v) || reported) continue;
        const path = shortestPath(v, u, (n) => [...both(n)].filter((m) => inside.has(m)));
        if (!path) continue;
        const cycle = [u, ...path.slice(0, -1)];
        const labels = cycle.map((from, i) => {
          const to = cycle[(i + 1) % cycle.length]!;
          return `${from} -${wr.get(from)?.has(to) ? "wr" : "ww"}->`;
        });
        report("G1c", `cycle: ${labels.join(" ")} ${u}`, cycle);
        reported = true;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Figures

  const ends = [...txns.values()].map((t) => t.end?.type ?? "info");
  const stats: CheckStats = {
    txns: txns.size,
    ok: ends.filter((k) => k === "ok").length,
    fail: ends.filter((k) => k === "fail").length,
    info: ends.filter((k) => k === "info").length,
    infoCommitted: [...txns.values()].filter((t) => (t.end?.type ?? "info") === "info" && t.outcome === "committed").length,
    sendsAcked: [...txns.values()].reduce((n, t) => n + (t.end?.ops ?? []).filter((op) => isSend(op) && op.offset !== undefined).length, 0),
    sendsAborted: [...txns.values()].reduce((n, t) => n + (t.outcome === "aborted" ? (t.end?.ops ?? []).filter((op) => isSend(op) && op.offset !== undefined).length : 0), 0),
    offsetChecks,
    recordsPolled: [...txns.values()].reduce((n, t) => n + pollRecords(t.end?.ops ?? []).length, 0),
    finalRecords: [...finalByTp.values()].reduce((n, r) => n + r.length, 0),
    faults,
    wwEdges: countEdges(ww),
    wrEdges: countEdges(wr),
  };
  const counts = Object.fromEntries(ANOMALY_KINDS.map((k) => [k, 0])) as Record<AnomalyKind, number>;
  for (const a of anomalies) counts[a.kind]++;
  return { valid: anomalies.length === 0, anomalies, counts, stats };
}

/** The strongly connected components with more than one node (Tarjan, iterative: histories are large). */
export function stronglyConnected(nodes: readonly string[], next: (n: string) => Iterable<string>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;
  for (const root of nodes) {
    if (index.has(root)) continue;
    const work: { node: string; successors: Iterator<string> }[] = [];
    const visit = (n: string) => {
      index.set(n, counter);
      low.set(n, counter);
      counter++;
      stack.push(n);
      onStack.add(n);
      work.push({ node: n, successors: next(n)[Symbol.iterator]() });
    };
    visit(root);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const step = frame.successors.next();
      if (!step.done) {
        const m = step.value;
        if (!index.has(m)) visit(m);
        else if (onStack.has(m)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(m)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let m: string;
        do {
          m = stack.pop()!;
          onStack.delete(m);
          component.push(m);
        } while (m !== frame.node);
        if (component.length > 1) out.push(component.reverse());
      }
    }
  }
  return out;
}

/** The nodes of a path from `from` to `to` (both included), breadth first; undefined when there is none. */
function shortestPath(from: string, to: string, next: (n: string) => Iterable<string>): string[] | undefined {
  const parent = new Map<string, string | null>([[from, null]]);
  const queue = [from];
  for (let i = 0; i < queue.length; i++) {
    const n = queue[i]!;
    if (n === to) {
      const path: string[] = [];
      for (let m: string | null = n; m !== null; m = parent.get(m)!) path.push(m);
      return path.reverse();
    }
    for (const m of next(n)) {
      if (parent.has(m)) continue;
      parent.set(m, n);
      queue.push(m);
    }
  }
  return undefined;
}

/** A cycle inside a strongly connected component (its nodes in order; the edge back to the first implied). */
function findCycle(component: readonly string[], next: (n: string) => Iterable<string>): string[] {
  const inside = new Set(component);
  const start = component[0]!;
  for (const m of next(start)) {
    if (!inside.has(m)) continue;
    const path = shortestPath(m, start, (n) => [...next(n)].filter((x) => inside.has(x)));
    if (path) return [start, ...path.slice(0, -1)];
  }
  return [...component];
}

/** One line per anomaly kind found, then the anomalies (at most `limit` per kind). */
export function formatAnomalies(result: CheckResult, limit = 10): string {
  const lines: string[] = [];
  for (const kind of ANOMALY_KINDS) {
    const found = result.anomalies.filter((a) => a.kind === kind);
    if (found.length === 0) continue;
    lines.push(`${kind}: ${found.length}`);
    for (const a of found.slice(0, limit)) lines.push(`  ${a.message}`);
    if (found.length > limit) lines.push(`  ... ${found.length - limit} more`);
  }
  return lines.length === 0 ? "no anomalies" : lines.join("\n");
}
