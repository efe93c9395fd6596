/**
 * The history of a Jepsen-style run (docs/checker.md): one JSON object per line, as the workload clients
 * (tests/interop/java/JepsenWorkload.java) print them, plus the harness's own lines (faults, crashed clients'
 * unfinished transactions, the final read).
 *
 * A transaction is an "invoke" line, then one completion with the same (process, txn): "ok" (committed),
 * "fail" (definitely aborted) or "info" (unknown: it may or may not have committed). A completion lists the
 * micro-ops that finished, with their results: a send's offset, a poll's records.
 */

export interface TopicPartition {
  topic: string;
  partition: number;
}

export interface SendOp extends TopicPartition {
  f: "send";
  key: string;
  value: string;
  /** The offset the broker acknowledged (absent in an invoke, and for a send that did not finish). */
  offset?: number;
}

export interface PolledRecord extends TopicPartition {
  offset: number;
  key: string;
  value: string;
}

export interface PollOp {
  f: "poll";
  /** Absent in an invoke. */
  records?: PolledRecord[];
}

export type MicroOp = SendOp | PollOp;

export interface TxnEvent {
  type: "invoke" | "ok" | "fail" | "info";
  process: number;
  /** The transaction's number within its process. */
  txn: number;
  time: number;
  ops: MicroOp[];
  /** The consumer offsets the transaction carried (sendOffsetsToTransaction), once it got that far. */
  offsets?: (TopicPartition & { offset: number })[];
  error?: string;
}

/** The consumer's positions were set: at the process's start, and after a fail or info (back to the txn's start). */
export interface SeekEvent {
  type: "seek";
  process: number;
  time: number;
  positions: (TopicPartition & { offset: number })[];
}

/** The consumer group's committed offsets as a process read them back (after a planned abort). */
export interface CommittedEvent {
  type: "committed";
  process: number;
  time: number;
  positions: (TopicPartition & { offset: number })[];
}

/** A client process started (lineage = its transactional id), got a producer, or stopped on request. */
export interface ProcessEvent {
  type: "start" | "producer" | "stop";
  process: number;
  lineage?: number;
  time: number;
}

/** A fault the harness injected (or ended). */
export interface NemesisEvent {
  type: "nemesis";
  f: "broker-kill" | "broker-restart" | "broker-pause" | "broker-resume" | "client-crash";
  time: number;
  process?: number;
}

/** A record of the final read (read_committed, every partition from offset 0 to its end). */
export interface FinalRecord extends PolledRecord {
  type: "final";
}

/** Where the final read of one partition ended (its last stable offset). */
export interface FinalEnd extends TopicPartition {
  type: "final-end";
  end: number;
}

/** A partition with a transaction still open when the final read looked: its LSO below its high watermark. */
export interface OpenPartition extends TopicPartition {
  stable: number;
  high: number;
}

/**
 * Printed before the final read: how long it waited for every transaction to be settled (each LSO at its high
 * watermark), and which partitions were still open when it first looked (markers on their way).
 */
export interface FinalSettled {
  type: "final-settled";
  waitedMs: number;
  openAtFirst: OpenPartition[];
}

/** A partition still open at the final read's deadline (then the read fails). */
export interface FinalOpen extends OpenPartition {
  type: "final-open";
}

export type HistoryEvent = TxnEvent | SeekEvent | CommittedEvent | ProcessEvent | NemesisEvent | FinalSettled | FinalOpen | FinalRecord | FinalEnd;

export const tpKey = (tp: TopicPartition): string => `${tp.topic}/${tp.partition}`;

/** Parses JSON lines (blank lines and lines not starting with "{" are skipped: a client's other output). */
export function parseHistory(text: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (!trimmed.startsWith("{")) continue;
    events.push(JSON.parse(trimmed) as HistoryEvent);
  }
  return events;
}

export function formatHistory(events: readonly HistoryEvent[]): string {
  return events.map((e) => JSON.stringify(e)).join("\n") + "\n";
}
