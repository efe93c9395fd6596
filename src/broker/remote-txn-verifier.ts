/**
 * Transactional batches verified with a remote coordinator (docs/architecture.md, "Transactional batches
 * verified with a remote coordinator"): when the slot of a Produce request's transactional id is owned by
 * another broker, this leader asks that broker, as Apache's leaders do (KIP-890 part 1): AddPartitionsToTxn
 * v4 with verifyOnly, over the inter-broker client (cluster/peer-client.ts).
 *
 * The partition's check (TransactionVerifier.verifyBatch) is synchronous, so the asking happens before it:
 * the Produce handler awaits `prepare(request)` before appending, which verifies the request's
 * transactional batches whose coordinator is remote and records the answers; `verifier` (what the
 * PartitionManager's partitions ask in place of the coordinator's own) then answers from them, and from
 * the local coordinator for everything else.
 *
 * - A positive answer is cached per (producer id, epoch, partition) until this leader sees that
 *   producer's marker (`onMarker`: the transaction ended here; the next one is asked again) or an epoch
 *   bump (`onFence`). Apache keeps its verification state per partition until the marker, likewise.
 * - A negative answer (unknown producer, fenced, deciding, not in the transaction) is kept only for the
 *   append that follows, so that the partition answers it with Apache's error for that verdict.
 * - No answer (the coordinator unreachable, a timeout, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, no
 *   owner known for the slot): the partition is not appended and `prepare` returns it with
 *   NOT_ENOUGH_REPLICAS, the retriable error Apache's leader answers when verification cannot complete
 *   (AddPartitionsToTxnManager turns the coordinator's unavailability into NOT_ENOUGH_REPLICAS so that
 *   every producer version retries it without a metadata refresh; NOT_LEADER_OR_FOLLOWER would be untrue,
 *   this broker is the leader, and would send the producer to look for another one).
 *
 * Bounded: at most `maxCachedProducers` producers are cached (the oldest forgotten first: a forgotten
 * producer's next batch is only asked again).
 */
import { slotOf, type Ownership } from "../cluster/ownership.ts";
import { PeerRequestError } from "../cluster/peer-client.ts";
import type { TransactionVerifier, TxnBatchVerdict } from "../domain/txn/verifier.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Logger } from "../platform/logger.ts";
import type { AddPartitionsToTxnRequestInit } from "../protocol/generated/add-partitions-to-txn-request.ts";
import type { AddPartitionsToTxnResponse } from "../protocol/generated/add-partitions-to-txn-response.ts";
import type { ProduceRequest } from "../protocol/generated/produce-request.ts";
import { ATTRIBUTES_AT, BATCH_HEADER_BYTES, MAGIC_AT, MAGIC_V2, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, TRANSACTIONAL_BIT } from "../protocol/records/record-batch.ts";

export const ADD_PARTITIONS_TO_TXN_KEY = 24;
/** The first version with verifyOnly (KIP-890). */
export const VERIFY_ONLY_VERSION = 4;
export const REMOTE_VERIFIER_PRODUCERS_MAX_DEFAULT = 100_000;
/**
 * The topic name a verifyOnly AddPartitionsToTxn uses for a group's offsets, with the group's slot as the
 * partition: Apache's name for the topic whose partitions its group coordinators verify (bunka has no such
 * topic; only brokers send this).
 */
export const GROUP_OFFSETS_TOPIC = "__consumer_offsets";

/** What the remote coordinator said about one partition; "unverified" when it could not say. */
export type RemoteVerdict = TxnBatchVerdict | "unverified";

/** A partition `prepare` refuses without appending: the Produce handler answers it with this. */
export interface RefusedPartition {
  errorCode: number;
  message: string;
}

/** What the verifier needs of the inter-broker client (PeerClients implements it). */
export interface PeerRequester {
  request<T = unknown>(brokerId: number, apiKey: number, apiVersion: number, body: unknown): Promise<T>;
}

export interface RemoteTxnVerifierDeps {
  ownership: Ownership;
  peers: PeerRequester;
  /** The local coordinator's verifier (TxnCoordinator.verifier), for producers coordinated here. */
  local: TransactionVerifier;
  log: Logger;
  maxCachedProducers?: number;
}

/** `topic-partition`, the key of the maps `verify` and `prepare` answer. */
export function partitionKey(topic: string, partition: number): string {
  return `${topic}-${partition}`;
}

export class RemoteTxnVerifier {
  /** Verified partitions, per producer id, at one epoch. */
  private readonly positive = new Map<number, { epoch: number; partitions: Set<string> }>();
  /** The last negative answer per producer id, epoch and partition: for the append right after `prepare`. */
  private readonly negative = new Map<number, { epoch: number; verdicts: Map<string, TxnBatchVerdict> }>();
  private readonly maxProducers: number;

  /** What the partitions ask (broker.ts hands it to the PartitionManager): the remote answers, else the local coordinator's. */
  readonly verifier: TransactionVerifier = {
    verifyBatch: (producerId, producerEpoch, topic, partition) => {
      const key = partitionKey(topic, partition);
      const cached = this.positive.get(producerId);
      if (cached !== undefined && cached.epoch === producerEpoch && cached.partitions.has(key)) return "in-transaction";
      const refused = this.negative.get(producerId);
      if (refused !== undefined && refused.epoch === producerEpoch) {
        const verdict = refused.verdicts.get(key);
        if (verdict !== undefined) return verdict;
      }
      return this.deps.local.verifyBatch(producerId, producerEpoch, topic, partition);
    },
  };

  constructor(private readonly deps: RemoteTxnVerifierDeps) {
    this.maxProducers = deps.maxCachedProducers ?? REMOTE_VERIFIER_PRODUCERS_MAX_DEFAULT;
  }

  /**
   * Asks the coordinator of `transactionalId` whether these partitions are in the producer's ongoing
   * transaction at `producerEpoch`. Cached positive answers are not asked again. When the coordinator is
   * this broker, answers from the local coordinator. Never rejects: what cannot be answered is "unverified".
   */
  async verify(transactionalId: string, producerId: number, producerEpoch: number, partitions: readonly { topic: string; partition: number }[]): Promise<Map<string, RemoteVerdict>> {
    const out = new Map<string, RemoteVerdict>();
    const { ownership, local } = this.deps;
    const owner = ownership.slotOwner("txn", slotOf(transactionalId));
    if (owner === ownership.selfId) {
      for (const { topic, partition } of partitions) out.set(partitionKey(topic, partition), local.verifyBatch(producerId, producerEpoch, topic, partition));
      return out;
    }
    const cached = this.positive.get(producerId);
    const ask: { topic: string; partition: number }[] = [];
    for (const tp of partitions) {
      const key = partitionKey(tp.topic, tp.partition);
      if (cached !== undefined && cached.epoch === producerEpoch && cached.partitions.has(key)) out.set(key, "in-transaction");
      else if (!out.has(key)) {
        out.set(key, "unverified");
        ask.push(tp);
      }
    }
    if (ask.length === 0 || owner < 0) return out;
    const byTopic = new Map<string, number[]>();
    for (const { topic, partition } of ask) byTopic.set(topic, [...(byTopic.get(topic) ?? []), partition]);
    const request: AddPartitionsToTxnRequestInit = {
      transactions: [{ transactionalId, producerId, producerEpoch, verifyOnly: true, topics: [...byTopic].map(([name, ps]) => ({ name, partitions: ps })) }],
    };
    let response: AddPartitionsToTxnResponse;
    try {
      response = await this.deps.peers.request<AddPartitionsToTxnResponse>(owner, ADD_PARTITIONS_TO_TXN_KEY, VERIFY_ONLY_VERSION, request);
    } catch (error) {
      if (!(error instanceof PeerRequestError)) throw error;
      this.deps.log.debug("a transactional batch could not be verified with its coordinator", { transactionalId, coordinator: owner, error: error.message });
      return out;
    }
    if (response.errorCode !== ErrorCode.NONE) return out;
    const result = response.resultsByTransaction.find((t) => t.transactionalId === transactionalId);
    for (const topic of result?.topicResults ?? []) {
      for (const p of topic.resultsByPartition) {
        const key = partitionKey(topic.name, p.partitionIndex);
        if (!out.has(key)) continue; // not asked
        out.set(key, verdictOf(p.partitionErrorCode));
      }
    }
    this.record(producerId, producerEpoch, out);
    return out;
  }

  /**
   * Call before appending a Produce request (the handler awaits it). Verifies the request's transactional
   * batches whose coordinator is another broker and records the answers for the partitions' check; returns
   * the partitions that must be answered without being appended (verification could not complete), keyed
   * `topic-partition`. Requests without a transactional id, and batches that are not transactional RecordBatch
   * v2, are left to the handler's own checks.
   */
  async prepare(request: ProduceRequest): Promise<Map<string, RefusedPartition>> {
    const refused = new Map<string, RefusedPartition>();
    const transactionalId = request.transactionalId;
    if (transactionalId === null || transactionalId.length === 0) return refused;
    if (this.deps.ownership.slotOwner("txn", slotOf(transactionalId)) === this.deps.ownership.selfId) return refused;
    // The producers of the request's transactional batches (one in practice), with their partitions.
    const byProducer = new Map<string, { producerId: number; producerEpoch: number; partitions: { topic: string; partition: number }[] }>();
    for (const topic of request.topicData) {
      for (const data of topic.partitionData) {
        const header = transactionalHeader(data.records);
        if (header === undefined) continue;
        const key = `${header.producerId}:${header.producerEpoch}`;
        let entry = byProducer.get(key);
        if (entry === undefined) byProducer.set(key, (entry = { ...header, partitions: [] }));
        entry.partitions.push({ topic: topic.name, partition: data.index });
      }
    }
    await Promise.all(
      [...byProducer.values()].map(async ({ producerId, producerEpoch, partitions }) => {
        const verdicts = await this.verify(transactionalId, producerId, producerEpoch, partitions);
        for (const [key, verdict] of verdicts) {
          if (verdict !== "unverified") continue;
          refused.set(key, {
            errorCode: ErrorCode.NOT_ENOUGH_REPLICAS,
            message: "Unable to verify the partition has been added to the transaction. Underlying error: COORDINATOR_NOT_AVAILABLE",
          });
        }
      }),
    );
    return refused;
  }

  /** This leader appended a marker of `producerId` at `producerEpoch`: its transaction here ended. */
  onMarker(producerId: number, producerEpoch: number): void {
    const cached = this.positive.get(producerId);
    if (cached !== undefined && cached.epoch <= producerEpoch) this.positive.delete(producerId);
    const refused = this.negative.get(producerId);
    if (refused !== undefined && refused.epoch <= producerEpoch) this.negative.delete(producerId);
  }

  /** `producerId`'s epoch was raised to `epoch` (a fence): every answer about an older epoch is stale. */
  onFence(producerId: number, epoch: number): void {
    const cached = this.positive.get(producerId);
    if (cached !== undefined && cached.epoch < epoch) this.positive.delete(producerId);
    const refused = this.negative.get(producerId);
    if (refused !== undefined && refused.epoch < epoch) this.negative.delete(producerId);
  }

  /**
   * TxnOffsetCommit's check when the transaction's coordinator is another broker: asks it, with a
   * verifyOnly AddPartitionsToTxn for the group's offsets partition (`__consumer_offsets` and the group's
   * slot, as Apache's group coordinators verify with KIP-890), whether the producer's ongoing transaction at
   * this epoch added a group of that slot with AddOffsetsToTxn. Answers the coordinator's error code (NONE
   * when it may stage), or COORDINATOR_NOT_AVAILABLE (retriable: the client finds the coordinator again and
   * retries) when the coordinator is not known or does not answer. Nothing is cached: a TxnOffsetCommit is
   * one request per transaction and group.
   */
  async verifyGroup(ref: { transactionalId: string; producerId: number; producerEpoch: number }, groupId: string): Promise<number> {
    const { ownership } = this.deps;
    const owner = ownership.slotOwner("txn", slotOf(ref.transactionalId));
    if (owner < 0) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    const request: AddPartitionsToTxnRequestInit = {
      transactions: [
        { ...ref, verifyOnly: true, topics: [{ name: GROUP_OFFSETS_TOPIC, partitions: [slotOf(groupId)] }] },
      ],
    };
    let response: AddPartitionsToTxnResponse;
    try {
      response = await this.deps.peers.request<AddPartitionsToTxnResponse>(owner, ADD_PARTITIONS_TO_TXN_KEY, VERIFY_ONLY_VERSION, request);
    } catch (error) {
      if (!(error instanceof PeerRequestError)) throw error;
      this.deps.log.debug("a transactional offset commit could not be verified with its coordinator", { transactionalId: ref.transactionalId, coordinator: owner, error: error.message });
      return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    }
    if (response.errorCode !== ErrorCode.NONE) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    const result = response.resultsByTransaction.find((t) => t.transactionalId === ref.transactionalId);
    const code = result?.topicResults.find((t) => t.name === GROUP_OFFSETS_TOPIC)?.resultsByPartition[0]?.partitionErrorCode;
    if (code === undefined) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    // A coordinator that moved meanwhile: the client looks it up again.
    if (code === ErrorCode.NOT_COORDINATOR || code === ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) return ErrorCode.COORDINATOR_NOT_AVAILABLE;
    return code;
  }

  /** Producers with cached positive answers (tests, introspection). */
  get cachedProducers(): number {
    return this.positive.size;
  }

  private record(producerId: number, producerEpoch: number, verdicts: Map<string, RemoteVerdict>): void {
    let cached = this.positive.get(producerId);
    // Answers about an epoch older than one already verified are not cached as positive: that epoch is fenced.
    const stale = cached !== undefined && cached.epoch > producerEpoch;
    if (cached !== undefined && cached.epoch < producerEpoch) {
      this.positive.delete(producerId);
      cached = undefined;
    }
    let refused = this.negative.get(producerId);
    if (refused !== undefined && refused.epoch !== producerEpoch) {
      this.negative.delete(producerId);
      refused = undefined;
    }
    for (const [key, verdict] of verdicts) {
      if (verdict === "unverified") continue;
      if (verdict === "in-transaction" && !stale) {
        if (cached === undefined) {
          cached = { epoch: producerEpoch, partitions: new Set() };
          this.positive.set(producerId, cached);
          this.evict(this.positive);
        }
        cached.partitions.add(key);
        refused?.verdicts.delete(key);
        continue;
      }
      if (!stale) cached?.partitions.delete(key);
      if (refused === undefined) {
        refused = { epoch: producerEpoch, verdicts: new Map() };
        this.negative.set(producerId, refused);
        this.evict(this.negative);
      }
      refused.verdicts.set(key, verdict === "in-transaction" ? "fenced" : verdict);
    }
  }

  private evict(map: Map<number, unknown>): void {
    while (map.size > this.maxProducers) map.delete(map.keys().next().value!);
  }
}

/** The coordinator's per-partition answer to a verifyOnly AddPartitionsToTxn, as a verdict. */
export function verdictOf(errorCode: number): RemoteVerdict {
  switch (errorCode) {
    case ErrorCode.NONE:
      return "in-transaction";
    case ErrorCode.INVALID_PRODUCER_ID_MAPPING:
      return "unknown-producer";
    case ErrorCode.PRODUCER_FENCED:
    case ErrorCode.INVALID_PRODUCER_EPOCH:
      return "fenced";
    case ErrorCode.CONCURRENT_TRANSACTIONS:
      return "deciding";
    case ErrorCode.TRANSACTION_ABORTABLE:
    case ErrorCode.INVALID_TXN_STATE:
      return "not-in-transaction";
    default:
      // NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, an unknown partition on
      // the coordinator's side (its topics not refreshed yet), ...: no answer, asked again next time.
      return "unverified";
  }
}

/** The producer of a transactional RecordBatch v2 at the start of `records`, or undefined. */
function transactionalHeader(records: Uint8Array | null): { producerId: number; producerEpoch: number } | undefined {
  if (records === null || records.length < BATCH_HEADER_BYTES) return undefined;
  const view = new DataView(records.buffer, records.byteOffset, records.byteLength);
  if (view.getInt8(MAGIC_AT) !== MAGIC_V2) return undefined;
  if ((view.getInt16(ATTRIBUTES_AT) & TRANSACTIONAL_BIT) === 0) return undefined;
  const producerId = Number(view.getBigInt64(PRODUCER_ID_AT));
  const producerEpoch = view.getInt16(PRODUCER_EPOCH_AT);
  if (producerId < 0 || producerEpoch < 0) return undefined;
  return { producerId, producerEpoch };
}
