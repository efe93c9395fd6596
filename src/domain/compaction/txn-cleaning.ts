/**
 * What the log cleaner must know about transactions while it walks a partition's log in offset order
 * (Apache's CleanedTransactionMetadata is the reference; KIP-98's cleaner rules):
 *
 * - a data batch of an aborted transaction can be discarded (the aborted-transaction index says which
 *   transactions aborted, by producer id and first offset);
 * - an abort marker is kept, and its index entry carried into the cleaned segment, while this pass still
 *   met data of its transaction (that data is dropped in this pass; the next pass finds none and may then
 *   drop the marker too), so that read_committed readers are never shown aborted records that a marker
 *   no longer explains;
 * - a commit marker may go once no batch of its transaction is left (none was met in this pass);
 * - a control batch that is already empty was cleaned before and can go.
 *
 * "May go" is only half of the decision: markers also wait for delete.retention.ms (the caller applies the
 * delete horizon) and the producer's last batch is always kept (see batchRetention in cleaning-rules.ts).
 * Pure: no I/O, no clock.
 */

export interface AbortedTxnRange {
  readonly producerId: number;
  readonly firstOffset: number;
  /** Offset of the abort marker. */
  readonly lastOffset: number;
  readonly lastStableOffset: number;
}

interface OpenAbortedTxn {
  readonly txn: AbortedTxnRange;
  /** Data of this transaction was met (and discarded) in this pass. */
  dataSeen: boolean;
}

export type ControlKind = "abort" | "commit" | "other" | "empty";

export interface ControlVerdict {
  /** The marker has no data of its transaction left behind it: it may go (after its delete horizon). */
  discardable: boolean;
  /** The aborted transaction to keep in the cleaned segment's aborted-transaction index, if any. */
  keepInIndex: AbortedTxnRange | undefined;
}

export class CleaningTxnTracker {
  /** Aborted transactions not reached yet, by first offset. */
  private readonly pending: AbortedTxnRange[];
  private next = 0;
  private readonly openAborted = new Map<number, OpenAbortedTxn>();
  private readonly openCommitted = new Set<number>();

  constructor(aborted: readonly AbortedTxnRange[]) {
    this.pending = [...aborted].sort((a, b) => a.firstOffset - b.firstOffset);
  }

  /** A data batch was read. True when it belongs to an aborted transaction (its records go). */
  onDataBatch(producerId: number, isTransactional: boolean, lastOffset: number): boolean {
    this.reach(lastOffset);
    if (!isTransactional) return false;
    const aborted = this.openAborted.get(producerId);
    if (aborted !== undefined) {
      aborted.dataSeen = true;
      return true;
    }
    this.openCommitted.add(producerId);
    return false;
  }

  /** A control batch was read; `kind` is its control record's type ("empty": no record left). */
  onControlBatch(producerId: number, kind: ControlKind, lastOffset: number): ControlVerdict {
    this.reach(lastOffset);
    switch (kind) {
      case "empty":
        return { discardable: true, keepInIndex: undefined };
      case "abort": {
        const aborted = this.openAborted.get(producerId);
        this.openAborted.delete(producerId);
        // Data of the aborted transaction behind this marker is being dropped in this very pass: keep
        // the marker, and the index entry with it, until a pass finds nothing of it left.
        if (aborted !== undefined && aborted.dataSeen) return { discardable: false, keepInIndex: aborted.txn };
        return { discardable: true, keepInIndex: undefined };
      }
      case "commit":
        return { discardable: !this.openCommitted.delete(producerId), keepInIndex: undefined };
      case "other":
        return { discardable: false, keepInIndex: undefined };
    }
  }

  /** Aborted transactions that start at or before `offset` become open. */
  private reach(offset: number): void {
    while (this.next < this.pending.length && this.pending[this.next]!.firstOffset <= offset) {
      const txn = this.pending[this.next++]!;
      this.openAborted.set(txn.producerId, { txn, dataSeen: false });
    }
  }
}
