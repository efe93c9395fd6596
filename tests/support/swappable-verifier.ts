/**
 * A transaction verifier a test can change while its broker runs: the broker is given `wrap` at
 * construction (BrokerDeps.transactionVerifier), and its partitions then ask the verifier last passed to
 * `use`, or the broker's own until one is (or after `use(undefined)`). It survives restarts.
 */
import { noTransactions, type TransactionVerifier, type TxnBatchVerdict } from "../../src/domain/txn/verifier.ts";

export class SwappableVerifier implements TransactionVerifier {
  private current: TransactionVerifier | undefined;
  private own: TransactionVerifier = noTransactions;

  /** For BrokerDeps.transactionVerifier (and startTestBroker's option of that name). */
  readonly wrap = (own: TransactionVerifier): TransactionVerifier => {
    this.own = own;
    return this;
  };

  use(verifier: TransactionVerifier | undefined): void {
    this.current = verifier;
  }

  verifyBatch(producerId: number, producerEpoch: number, topic: string, partition: number): TxnBatchVerdict {
    return (this.current ?? this.own).verifyBatch(producerId, producerEpoch, topic, partition);
  }
}
