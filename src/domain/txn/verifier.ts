/**
 * What a partition leader asks the transaction coordinator before it appends a transactional batch:
 * is this partition part of the producer's ongoing transaction, at this producer epoch? (Apache's
 * KIP-890 part 1 verification, AddPartitionsToTxn with verifyOnly.) Only a batch the coordinator vouches
 * for is appended; otherwise a late or zombie batch would open a transaction in the partition that no
 * marker will ever end, pinning the last stable offset forever (a "hanging transaction").
 *
 * Synchronous and pure from the partition's point of view: the partition asks under its single writer,
 * between classification and append, so the answer must not need an await. The broker installs the
 * coordinator's implementation (PartitionManager.setTransactionVerifier); until it does, `noTransactions`
 * refuses every transactional batch.
 */

export interface TransactionVerifier {
  /**
   * True when `topic`-`partition` was added (AddPartitionsToTxn) to the ongoing transaction of
   * `producerId` and `producerEpoch` is that transaction's current epoch.
   */
  isPartitionInOngoingTransaction(producerId: number, producerEpoch: number, topic: string, partition: number): boolean;
}

/** No transaction coordinator: no partition is ever in an ongoing transaction. */
export const noTransactions: TransactionVerifier = {
  isPartitionInOngoingTransaction: () => false,
};
