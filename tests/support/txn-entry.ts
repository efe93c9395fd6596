/** Transaction coordinator entries for unit tests: a well-formed TxnEntry in any state. */
import type { TxnEntry, TxnState } from "../../src/domain/txn/txn-state.ts";

/** States that hold an open or decided transaction (partitions and groups present). */
const IN_TRANSACTION: readonly TxnState[] = ["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"];

/**
 * An entry of "tx" in `state` at producer id 4000, epoch 5 (last epoch 4); in a transaction over t-0, t-1
 * and group g when the state holds one. `overrides` replace any field.
 */
export function txnEntryIn(state: TxnState, overrides: Partial<TxnEntry> = {}): TxnEntry {
  const inTxn = IN_TRANSACTION.includes(state);
  return {
    transactionalId: "tx",
    producerId: 4000,
    lastProducerId: overrides.producerId ?? 4000,
    epoch: 5,
    lastEpoch: 4,
    timeoutMs: 60_000,
    state,
    partitions: inTxn ? [{ topic: "t", partitions: [0, 1] }] : [],
    groups: inTxn ? ["g"] : [],
    ongoingSinceMs: state === "Empty" ? -1 : 1,
    updatedMs: 1,
    ...overrides,
  };
}
