/**
 * What handlers share: configuration, stores and ports, built once by createBroker and passed to each
 * handler factory. No module-level state anywhere.
 */
import type { Ownership } from "../cluster/ownership.ts";
import type { FetchSessionCache } from "../domain/fetch-session.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import type { BrokerConfigStore } from "../storage/broker-config-store.ts";
import type { ProducerIdStore } from "../storage/producer-id-store.ts";
import type { TopicStore } from "../storage/topic-store.ts";
import type { BrokerAuthorizer } from "./authorizer.ts";
import type { SaslAuthenticator } from "./sasl-authenticator.ts";
import type { ScramCredentialService } from "./scram-credentials.ts";
import type { BrokerConfig } from "./config.ts";
import type { GroupCoordinator } from "./group-coordinator.ts";
import type { LogCleanerService } from "./log-cleaner-service.ts";
import type { MetadataMutations } from "./metadata-mutations.ts";
import type { RemoteTxnVerifier } from "./remote-txn-verifier.ts";
import type { PartitionManager } from "./partitions.ts";
import type { SegmentScrubber } from "../storage/log/segment-scrubber.ts";
import type { TxnCoordinator } from "./txn-coordinator.ts";
import type { RuntimeConfig } from "./runtime-config.ts";
import type { HangingTransactionDetector } from "./hanging-transactions.ts";
import { AclOperation } from "../domain/security/acl.ts";

export interface BrokerServices {
  /** The static configuration (config file and flags): never changed at runtime. */
  config: BrokerConfig;
  fs: Fs;
  clock: Clock;
  log: Logger;
  clusterId: string;
  ownership: Ownership;
  topics: TopicStore;
  /** Dynamic broker configs, by layer (what DescribeConfigs names as their sources). */
  brokerConfigs: BrokerConfigStore;
  /** The broker-level configs in effect (static overlaid with dynamic); changes go through it. */
  runtimeConfig: RuntimeConfig;
  /** The partitions this broker leads: logs and producer state. */
  partitions: PartitionManager;
  /** The log cleaner of cleanup.policy=compact topics. */
  cleaner: LogCleanerService;
  /** Verifies every stored batch in the background; its findings go to `partitions.damage`. */
  scrubber: SegmentScrubber;
  /** Cluster-unique producer ids (InitProducerId). */
  producerIds: ProducerIdStore;
  /** Consumer groups and their committed offsets (the classic group protocol). */
  groups: GroupCoordinator;
  /** The transaction coordinator (transactional InitProducerId, AddPartitions/Offsets, EndTxn, ...). */
  txn: TxnCoordinator;
  /** Looks for hanging transactions on a timer; /metrics and the dashboard read its result. */
  hangingTransactions: HangingTransactionDetector;
  /** Incremental fetch sessions (KIP-227), shared by every connection. */
  fetchSessions: FetchSessionCache;
  /**
   * The gate every topic and broker-config change runs under (broker/metadata-mutations.ts). Absent:
   * single-broker mode, changes run at once. Cluster mode installs one (startClusterMetadata); handlers
   * read it at each request, so it may be installed after the broker is built.
   */
  mutations?: MetadataMutations;
  /**
   * Cluster mode: verifies a transactional batch with its coordinator when that is another broker
   * (broker/remote-txn-verifier.ts); Produce asks it before the append. Absent in single-broker mode.
   */
  remoteTxnVerifier?: RemoteTxnVerifier;
  /**
   * Cluster mode: the watcher of the markers other brokers' coordinators queued for this one; a peer's
   * WriteTxnMarkers asks it to apply a producer's files now (cluster/peer-marker-wake.ts). Absent in
   * single-broker mode.
   */
  queuedMarkers?: { applyProducer(producerId: number): Promise<unknown> };
  /** ACL checks (broker/authorizer.ts); allows everything when no authorizer is configured. */
  authorizer: BrokerAuthorizer;
  /** SASL on SASL_* listeners: the gate, SaslHandshake and SaslAuthenticate (broker/sasl-authenticator.ts). */
  sasl: SaslAuthenticator;
  /** SCRAM credentials: read by SASL, altered and described by keys 50 and 51 (broker/scram-credentials.ts). */
  scramCredentials: ScramCredentialService;
}

/** ACL operation codes (Apache's AclOperation) for the authorized-operations bitfields. */
const aclOperation = AclOperation;

const bits = (ops: number[]) => ops.reduce((acc, op) => acc | (1 << op), 0);

/** With no authorizer, Apache reports every operation the resource type supports; so do we. */
export const TOPIC_AUTHORIZED_OPERATIONS = bits([
  aclOperation.READ,
  aclOperation.WRITE,
  aclOperation.CREATE,
  aclOperation.DELETE,
  aclOperation.ALTER,
  aclOperation.DESCRIBE,
  aclOperation.DESCRIBE_CONFIGS,
  aclOperation.ALTER_CONFIGS,
]);
export const CLUSTER_AUTHORIZED_OPERATIONS = bits([
  aclOperation.CREATE,
  aclOperation.ALTER,
  aclOperation.DESCRIBE,
  aclOperation.CLUSTER_ACTION,
  aclOperation.DESCRIBE_CONFIGS,
  aclOperation.ALTER_CONFIGS,
  aclOperation.IDEMPOTENT_WRITE,
]);
/** The "not requested" value of an authorized-operations field. */
export const AUTHORIZED_OPERATIONS_OMITTED = -2147483648;
