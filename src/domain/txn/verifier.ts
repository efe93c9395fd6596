/**
 * What a partition leader asks the transaction coordinator before it appends a transactional batch:
 * is this partition part of the producer's ongoing transaction, at this producer epoch? (Apache's
 * KIP-890 part 1 verification, AddPartitionsToTxn with verifyOnly.) Only a batch the coordinator vouches
 * for is appended; otherwise a late or zombie batch would open a transaction in the partition that no
 * marker will ever end, pinning the last stable offset forever (a "hanging transaction").
 *
 * Synchronous and pure from the partition's point of view: the partition asks under its single writer,
 * between classification and append, so the answer must not need an await. The broker gives the
 * PartitionManager a lookup of the coordinator's implementation; until the coordinator exists, the lookup
 * answers `noTransactions`, which refuses every transactional batch.
 */

/**
 * The coordinator's answer about one transactional batch, in the order Apache's coordinator checks
 * (TransactionCoordinator.handleVerifyPartitionsInTransaction):
 * - "unknown-producer": no transactional id has this producer id now (never had, expired, or rotated
 *   away): INVALID_PRODUCER_ID_MAPPING;
 * - "fenced": the producer id's current epoch is another one (a zombie): PRODUCER_FENCED, which Produce
 *   answers as INVALID_PRODUCER_EPOCH;
 * - "deciding": the transaction is in PrepareCommit/PrepareAbort: CONCURRENT_TRANSACTIONS, which Produce
 *   answers as the retriable NOT_ENOUGH_REPLICAS;
 * - "not-in-transaction": the partition was not added to an ongoing transaction: INVALID_TXN_STATE, or
 *   TRANSACTION_ABORTABLE from Produce v11;
 * - "in-transaction": append.
 */
export type TxnBatchVerdict = "in-transaction" | "unknown-producer" | "fenced" | "deciding" | "not-in-transaction";

export interface TransactionVerifier {
  /** What the coordinator says about a transactional batch of `producerId` at `producerEpoch` for `topic`-`partition`. */
  verifyBatch(producerId: number, producerEpoch: number, topic: string, partition: number): TxnBatchVerdict;
}

/** No transaction coordinator: no partition is ever in an ongoing transaction. */
export const noTransactions: TransactionVerifier = {
  verifyBatch: () => "not-in-transaction",
};
