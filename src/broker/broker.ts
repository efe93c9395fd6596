/**
 * Builds a broker from its configuration and ports: loads the cluster identity and the topics, registers
 * one handler per API key, and exposes `dispatch` for the Kafka listener. main.ts constructs it with the
 * real clock and file system; tests construct it with their own.
 */
import type { GatheredFrame } from "../protocol/gathered-frame.ts";
import { FenceWatcher } from "../cluster/fence-watcher.ts";
import { type MarkerSpec, MarkerQueueWatcher } from "../cluster/marker-queue-watcher.ts";
import { peerClientId, peerMarkerWake } from "../cluster/peer-marker-wake.ts";
import { ClusterOwnership, NOTHING_OWNED, type OwnershipSource } from "../cluster/cluster-ownership.ts";
import { type BrokerEndpoint, type NamedEndpoint, SingleBrokerOwnership, slotOf } from "../cluster/ownership.ts";
import type { Clock } from "../platform/clock.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import { ensureDir } from "../storage/atomic-file.ts";
import { BrokerConfigStore } from "../storage/broker-config-store.ts";
import { loadOrCreateClusterMeta } from "../storage/cluster-meta.ts";
import { FenceLogWriter } from "../storage/fence-log.ts";
import { MarkerQueue, type QueuedMarkers } from "../storage/marker-queue.ts";
import { ProducerIdStore } from "../storage/producer-id-store.ts";
import { TopicStore } from "../storage/topic-store.ts";
import { TxnStateStore } from "../storage/txn-state-store.ts";
import { produceHandler } from "./00-produce.ts";
import { fetchHandler } from "./01-fetch.ts";
import { DEFAULT_FETCH_SESSIONS_PER_CONNECTION_MAX, FetchSessionCache } from "../domain/fetch-session.ts";
import { listOffsetsHandler } from "./02-list-offsets.ts";
import { metadataHandler } from "./03-metadata.ts";
import { offsetCommitHandler } from "./08-offset-commit.ts";
import { offsetFetchHandler } from "./09-offset-fetch.ts";
import { findCoordinatorHandler } from "./10-find-coordinator.ts";
import { joinGroupHandler } from "./11-join-group.ts";
import { heartbeatHandler } from "./12-heartbeat.ts";
import { leaveGroupHandler } from "./13-leave-group.ts";
import { syncGroupHandler } from "./14-sync-group.ts";
import { describeGroupsHandler } from "./15-describe-groups.ts";
import { listGroupsHandler } from "./16-list-groups.ts";
import { apiVersionsHandler } from "./18-api-versions.ts";
import { createTopicsHandler } from "./19-create-topics.ts";
import { deleteTopicsHandler } from "./20-delete-topics.ts";
import { deleteRecordsHandler } from "./21-delete-records.ts";
import { initProducerIdHandler } from "./22-init-producer-id.ts";
import { addPartitionsToTxnHandler } from "./24-add-partitions-to-txn.ts";
import { addOffsetsToTxnHandler } from "./25-add-offsets-to-txn.ts";
import { endTxnHandler } from "./26-end-txn.ts";
import { writeTxnMarkersHandler } from "./27-write-txn-markers.ts";
import { txnOffsetCommitHandler } from "./28-txn-offset-commit.ts";
import { describeConfigsHandler } from "./32-describe-configs.ts";
import { alterConfigsHandler } from "./33-alter-configs.ts";
import { createPartitionsHandler } from "./37-create-partitions.ts";
import { deleteGroupsHandler } from "./42-delete-groups.ts";
import { incrementalAlterConfigsHandler } from "./44-incremental-alter-configs.ts";
import { offsetDeleteHandler } from "./47-offset-delete.ts";
import { describeClusterHandler } from "./60-describe-cluster.ts";
import { describeProducersHandler } from "./61-describe-producers.ts";
import { describeTransactionsHandler } from "./65-describe-transactions.ts";
import { listTransactionsHandler } from "./66-list-transactions.ts";
import { describeLogDirsHandler } from "./35-describe-log-dirs.ts";
import { updateFeaturesHandler } from "./57-update-features.ts";
import { describeTopicPartitionsHandler } from "./75-describe-topic-partitions.ts";
import { offsetForLeaderEpochHandler } from "./23-offset-for-leader-epoch.ts";
import { ConfigChanges } from "./config-changes.ts";
import { BrokerAuthorizer } from "./authorizer.ts";
import { describeAclsHandler } from "./29-describe-acls.ts";
import { createAclsHandler } from "./30-create-acls.ts";
import { deleteAclsHandler } from "./31-delete-acls.ts";
import type { BrokerConfig } from "./config.ts";
import { saslHandshakeHandler } from "./17-sasl-handshake.ts";
import { saslAuthenticateHandler } from "./36-sasl-authenticate.ts";
import { describeClientQuotasHandler } from "./48-describe-client-quotas.ts";
import { describeUserScramCredentialsHandler } from "./50-describe-user-scram-credentials.ts";
import { alterUserScramCredentialsHandler } from "./51-alter-user-scram-credentials.ts";
import { SaslAuthenticator } from "./sasl-authenticator.ts";
import { ScramCredentialService } from "./scram-credentials.ts";
import { ScramCredentialStore } from "../storage/scram-credential-store.ts";
import { Dispatcher, type RequestObserver } from "./dispatcher.ts";
import { GroupCoordinator, type GroupCoordinatorOptions } from "./group-coordinator.ts";
import type { ConnectionInfo } from "./handler.ts";
import { PartitionManager, type PartitionManagerOptions } from "./partitions.ts";
import { CleanerThreadPool } from "../storage/log/cleaner-threads.ts";
import { SegmentScrubber, type VerifiedStore } from "../storage/log/segment-scrubber.ts";
import { systemTimers, type Timers } from "../platform/timers.ts";
import { LogCleanerService } from "./log-cleaner-service.ts";
import { RuntimeConfig } from "./runtime-config.ts";
import { HandlerRegistry } from "./registry.ts";
import type { BrokerServices } from "./services.ts";
import { OwnedResources } from "./owned-resources.ts";
import { RemoteTxnVerifier } from "./remote-txn-verifier.ts";
import { noTransactions, type TransactionVerifier } from "../domain/txn/verifier.ts";
import { noopWaker, type Waker } from "../cluster/waker.ts";
import { PeerClients } from "../cluster/peer-client.ts";
import { OffsetCompletionQueue } from "../storage/offset-queue.ts";
import { QUEUED_MARKERS_WAIT_MS_DEFAULT, TxnCoordinator, type TxnCoordinatorOptions, type TxnObserver } from "./txn-coordinator.ts";
import { HangingTransactionDetector } from "./hanging-transactions.ts";

export interface BrokerDeps {
  config: BrokerConfig;
  fs: Fs;
  clock: Clock;
  log: Logger;
  observer?: RequestObserver;
  /** Told the duration of each step of every EndTxn (metrics). */
  txnObserver?: TxnObserver;
  /** Background maintenance (retention, snapshots); tests may shorten or disable it. */
  maintenance?: PartitionManagerOptions | false;
  /** false: the log cleaner runs only when a test calls `services.cleaner.runRound()`. */
  cleaner?: false;
  /** The segment scrubber's settings beyond BrokerConfig (tests shorten its pause, or keep it from starting). */
  scrubber?: { pauseBetweenPassesMs?: number; timers?: Timers } | false;
  /**
   * true: the log cleaner's passes run on threads of their own (storage/log/cleaner-threads.ts), which
   * read and write the partition directories directly, so `fs` must be the real file system. Otherwise
   * they run on the event loop through `fs`.
   */
  cleanerThreads?: boolean;
  /** Group coordinator settings beyond BrokerConfig (tests shorten session timeouts, turn off the sweep). */
  groups?: GroupCoordinatorOptions;
  /** Transaction coordinator settings beyond BrokerConfig (tests turn off its timers, shorten intervals). */
  txn?: Partial<TxnCoordinatorOptions>;
  /**
   * What the partitions ask before a transactional append, given the verifier the broker would use
   * (the coordinator's, or the remote one wrapping it in cluster mode): tests replace or wrap it.
   */
  transactionVerifier?: (coordinators: TransactionVerifier) => TransactionVerifier;
  /** The hanging-transaction detector's settings (tests shorten the grace, drive its timer). */
  hangingTransactions?: { lsoStuckGraceMs?: number; intervalMs?: number; timers?: Timers };
  /** Told how many partitions are recovered at start-up, as they are. */
  onRecoveryProgress?: (done: number, total: number) => void;
  /**
   * Cluster mode: the live brokers from the directory in etcd, for Metadata and DescribeCluster
   * (cluster/cluster-ownership.ts). Absent: single-broker mode. In cluster mode the broker opens no
   * partition and loads no coordinator slot at start: each is taken over when the ownership manager,
   * started by the caller once the broker is registered, gives it this broker (`Broker.owned`,
   * `Broker.useOwnership`).
   */
  liveBrokers?: () => readonly BrokerEndpoint[];
  /**
   * Cluster mode: wakes another broker (or a slot's owner) at once when markers, fences or offset
   * completions are queued for it, and this broker when they are queued for it (cluster/waker.ts).
   */
  waker?: Waker;
}

export interface Broker {
  dispatch(frame: Uint8Array, conn: ConnectionInfo): Promise<Uint8Array | GatheredFrame | null>;
  /**
   * Called once the listener is bound: Metadata tells clients this address (the inter-broker one), or,
   * given `listeners`, each client the address of the listener its request came in on.
   */
  setAdvertisedListener(host: string, port: number, listeners?: readonly NamedEndpoint[]): void;
  readonly services: BrokerServices;
  readonly registry: HandlerRegistry;
  /** Cluster mode: what the ownership manager opens and closes here. Undefined in single-broker mode. */
  readonly owned: OwnedResources | undefined;
  /** Cluster mode: from now on, who owns what comes from `source` (the running ownership manager). */
  useOwnership(source: OwnershipSource): void;
  close(): Promise<void>;
}

export async function createBroker(deps: BrokerDeps): Promise<Broker> {
  const { fs, clock, log } = deps;
  // The static configuration, a copy of the caller's: the dynamic broker configs never change it (they
  // are runtimeConfig's, below), and what a test sets on a running broker stays that broker's.
  const config: BrokerConfig = { ...deps.config };
  await ensureDir(fs, config.dataDir);
  const cluster = await loadOrCreateClusterMeta(fs, config.dataDir, clock.nowMs());
  const clusterMode = deps.liveBrokers !== undefined;
  // In cluster mode a half-done create may be another broker's change in flight: its clean-up waits for
  // the cluster's metadata gate (main.ts).
  const topics = await TopicStore.open(fs, config.dataDir, clock, { log: (line) => log.warn(line), cleanUpOrphans: !clusterMode });
  const brokerConfigs = await BrokerConfigStore.open(fs, config.dataDir, {
    brokerId: config.brokerId,
    staticTopicDefaults: config.topicConfigDefaults,
    staticCleaner: config.cleaner,
  });
  // What is in effect from here on: the dynamic broker configs (topic defaults, cleaner settings) over
  // the static ones. Everything that reads those values reads them here.
  const runtimeConfig = new RuntimeConfig(brokerConfigs);
  // ACLs, when an authorizer is configured: a damaged ACL file refuses the start (CorruptStateError).
  const authorizer = await BrokerAuthorizer.open(fs, config, log, () => clock.monotonicMs());
  // SCRAM credentials (a damaged file refuses the start) and SASL (PLAIN's users file read now).
  const scramCredentials = new ScramCredentialService(await ScramCredentialStore.open(fs, config.dataDir), log);
  const sasl = await SaslAuthenticator.open(fs, config, scramCredentials.store, clock, log);
  const producerIds = await ProducerIdStore.open(fs, config.dataDir, config.brokerId, { log: (line) => log.warn(line) });
  const ownershipArgs = [config.brokerId, config.advertisedHost ?? config.listenHost, config.advertisedPort ?? config.listenPort] as const;
  // Until useOwnership is called, a cluster-mode broker owns nothing: every partition and slot is elsewhere.
  const ownership = deps.liveBrokers === undefined ? new SingleBrokerOwnership(...ownershipArgs) : new ClusterOwnership(...ownershipArgs, deps.liveBrokers, NOTHING_OWNED);
  // Cluster mode: a partition is opened only when taken over, at its leader epoch, and retention and the
  // cleaner check the epoch right before each unlink and rename (file names cannot fence those).
  // The partitions ask the transaction coordinator's verifier, built below (it writes its markers through
  // them): they look it up at each transactional append, and until then no partition is in any transaction.
  let transactionVerifier: TransactionVerifier = noTransactions;
  const partitions = new PartitionManager(
    fs,
    clock,
    log,
    config,
    topics,
    undefined,
    clusterMode ? { clusterMode, mayWrite: (topic, partition, epoch) => ownership.mayAct({ kind: "partition", topic, partition }, epoch) } : {},
    () => transactionVerifier,
    runtimeConfig,
  );
  // Open partitions follow a change of the broker-level topic defaults at once.
  runtimeConfig.onChange(() => void partitions.applyTopicDefaults());
  // Cluster mode recovers a partition when this broker takes it over, not at start.
  if (!clusterMode) await partitions.openAll(deps.onRecoveryProgress);
  if (deps.maintenance !== false) partitions.startMaintenance(deps.maintenance);
  const cleanerThreads = deps.cleanerThreads
    ? new CleanerThreadPool({ fs, log, ioMaxBytesPerSecond: () => runtimeConfig.cleaner().ioMaxBytesPerSecond })
    : undefined;
  const cleaner = new LogCleanerService(clock, log, runtimeConfig, topics, partitions, () => runtimeConfig.cleaner(), undefined, undefined, cleanerThreads);
  if (deps.cleaner !== false) cleaner.start();
  // Verifies every stored batch in the background, and the slot stores' files after each pass
  // (docs/operations.md, "Damaged data"); the stores join once they are open, below.
  const stateStores: VerifiedStore[] = [];
  const scrubber = new SegmentScrubber({
    stateStores: () => stateStores,
    partitions: async () =>
      (await partitions.openPartitions().catch(() => [])).map((p) => ({ partition: `${p.topic}-${p.partition}`, log: p.log })),
    damage: partitions.damage,
    clock,
    timers: (deps.scrubber === false ? undefined : deps.scrubber?.timers) ?? systemTimers,
    log,
    bytesPerSecond: () => config.logScrubberBytesPerSecond,
    ...(deps.scrubber === false || deps.scrubber?.pauseBetweenPassesMs === undefined ? {} : { pauseBetweenPassesMs: deps.scrubber.pauseBetweenPassesMs }),
  });
  if (deps.scrubber !== false) scrubber.start();
  const waker = deps.waker ?? noopWaker;
  const groups = await GroupCoordinator.open({
    fs,
    clock,
    log,
    dataDir: config.dataDir,
    ownership,
    // Cluster mode: a transaction's staged offsets whose group slot another broker serves are completed
    // by that broker from a durable queue on the shared volume.
    ...(clusterMode ? { offsetQueue: new OffsetCompletionQueue(fs, config.dataDir), waker } : {}),
    options: {
      initialRebalanceDelayMs: config.groupInitialRebalanceDelayMs,
      offsetsRetentionMs: config.offsetsRetentionMs,
      ...(clusterMode ? { loadAllSlotsAtStart: false } : {}),
      ...deps.groups,
    },
  });
  // The transaction coordinator: its slot store, the fence log peers read, the marker queue for partitions
  // other brokers lead. Its start-up recovery (entries found in Prepare*) runs in the background; until it
  // is done, transactional requests answer COORDINATOR_LOAD_IN_PROGRESS.
  const txnStore = await TxnStateStore.open(fs, config.dataDir, { slotOf, explicitLoad: clusterMode });
  const fenceLog = await FenceLogWriter.open(fs, config.dataDir, config.brokerId);
  const markerQueue = new MarkerQueue(fs, config.dataDir);
  const txnPartitions = {
    writeMarker: partitions.writeMarker.bind(partitions),
    fenceProducer: partitions.fenceProducer.bind(partitions),
  };
  // Cluster mode: a leader that markers were queued for is asked over the inter-broker client, which is
  // built below (it needs the coordinator's verifier); until then, and when asking fails, etcd wakes it.
  let askPeerToApply: (brokerId: number, markers: QueuedMarkers) => Promise<boolean> = async () => false;
  const txn = new TxnCoordinator({
    store: txnStore,
    allocateProducerId: () => producerIds.allocate(),
    ownership,
    partitions: txnPartitions,
    offsets: groups,
    fenceLog,
    markerQueue,
    waker,
    ...(clusterMode ? { askPeerToApply: (brokerId: number, markers: QueuedMarkers) => askPeerToApply(brokerId, markers) } : {}),
    clock,
    log,
    options: {
      transactionMaxTimeoutMs: config.transactionMaxTimeoutMs,
      ...(clusterMode ? { loadAllSlotsAtStart: false, queuedMarkersWaitMs: QUEUED_MARKERS_WAIT_MS_DEFAULT } : {}),
      ...deps.txn,
    },
    ...(deps.txnObserver === undefined ? {} : { observer: deps.txnObserver }),
  });
  await txn.start();
  stateStores.push(
    { name: "txn_state", verify: () => txnStore.verify(), repair: (path) => txnStore.repair(path) },
    { name: "offsets", verify: () => groups.store.verify(), repair: (path) => groups.store.repair(path) },
  );
  // Cluster mode: a transactional batch whose coordinator is another broker is verified with it
  // (AddPartitionsToTxn verifyOnly, as KIP-890's leaders do) before the append, over a peer connection.
  const peers = clusterMode
    ? new PeerClients({
        resolve: (brokerId) => {
          const endpoint = ownership.brokers().find((b) => b.brokerId === brokerId);
          return endpoint === undefined ? undefined : { host: endpoint.host, port: endpoint.port };
        },
        clientId: peerClientId(config.brokerId),
        log,
      })
    : undefined;
  if (peers !== undefined) askPeerToApply = peerMarkerWake(peers, log);
  const remoteTxnVerifier = peers === undefined ? undefined : new RemoteTxnVerifier({ ownership, peers, local: txn.verifier, log });
  const coordinatorsVerifier = remoteTxnVerifier?.verifier ?? txn.verifier;
  transactionVerifier = deps.transactionVerifier?.(coordinatorsVerifier) ?? coordinatorsVerifier;
  const markerWatcher = new MarkerQueueWatcher({
    queue: markerQueue,
    ownership,
    writeMarker: txnPartitions.writeMarker,
    log,
    waker,
    ...(remoteTxnVerifier === undefined ? {} : { onMarkerWritten: (_topic: string, _partition: number, marker: MarkerSpec) => remoteTxnVerifier.onMarker(marker.producerId, marker.producerEpoch) }),
  });
  const fenceWatcher = new FenceWatcher({
    fs,
    dataDir: config.dataDir,
    selfId: config.brokerId,
    apply: (producerId, epoch) => {
      remoteTxnVerifier?.onFence(producerId, epoch);
      return txnPartitions.fenceProducer(producerId, epoch);
    },
    log,
    waker,
  });
  if (deps.txn?.timers !== false) {
    markerWatcher.start();
    fenceWatcher.start();
  }
  // Its own timer, with the coordinator's: a hanging transaction is logged whether or not anyone scrapes.
  const hangingTransactions = new HangingTransactionDetector({
    ...deps.hangingTransactions,
    entries: () => txn.entries(),
    openPartitions: () => partitions.openPartitions(),
    clock,
    timers: deps.hangingTransactions?.timers ?? systemTimers,
    log,
  });
  if (deps.txn?.timers !== false) hangingTransactions.start();
  const services: BrokerServices = {
    config,
    fs,
    clock,
    log,
    clusterId: cluster.clusterId,
    ownership,
    topics,
    brokerConfigs,
    runtimeConfig,
    partitions,
    cleaner,
    scrubber,
    producerIds,
    groups,
    txn,
    hangingTransactions,
    ...(remoteTxnVerifier === undefined ? {} : { remoteTxnVerifier }),
    ...(clusterMode ? { queuedMarkers: markerWatcher } : {}),
    authorizer,
    sasl,
    scramCredentials,
    fetchSessions: new FetchSessionCache({
      slots: config.maxIncrementalFetchSessionCacheSlots,
      evictionMs: config.minIncrementalFetchSessionEvictionMs,
      sessionsPerConnectionMax: DEFAULT_FETCH_SESSIONS_PER_CONNECTION_MAX,
      random: Math.random,
    }),
  };

  const registry = new HandlerRegistry();
  // AlterConfigs and IncrementalAlterConfigs apply their changes one at a time, together.
  const configChanges = new ConfigChanges(services);
  registry
    .register(produceHandler(services))
    .register(fetchHandler(services))
    .register(listOffsetsHandler(services))
    .register(metadataHandler(services))
    .register(offsetCommitHandler(services))
    .register(offsetFetchHandler(services))
    .register(findCoordinatorHandler(services))
    .register(joinGroupHandler(services))
    .register(heartbeatHandler(services))
    .register(leaveGroupHandler(services))
    .register(syncGroupHandler(services))
    .register(describeGroupsHandler(services))
    .register(listGroupsHandler(services))
    .register(saslHandshakeHandler(sasl))
    .register(apiVersionsHandler(registry))
    .register(createTopicsHandler(services))
    .register(deleteTopicsHandler(services))
    .register(deleteRecordsHandler(services))
    .register(initProducerIdHandler(services))
    .register(offsetForLeaderEpochHandler(services))
    .register(addPartitionsToTxnHandler(services))
    .register(addOffsetsToTxnHandler(services))
    .register(endTxnHandler(services))
    .register(writeTxnMarkersHandler(services))
    .register(txnOffsetCommitHandler(services))
    .register(saslAuthenticateHandler(sasl))
    .register(describeAclsHandler(services))
    .register(createAclsHandler(services))
    .register(deleteAclsHandler(services))
    .register(describeConfigsHandler(services))
    .register(alterConfigsHandler(services, configChanges))
    .register(createPartitionsHandler(services))
    .register(deleteGroupsHandler(services))
    .register(incrementalAlterConfigsHandler(services, configChanges))
    .register(offsetDeleteHandler(services))
    .register(describeClientQuotasHandler(services))
    .register(describeUserScramCredentialsHandler(services, scramCredentials))
    .register(alterUserScramCredentialsHandler(services, scramCredentials))
    .register(describeClusterHandler(services))
    .register(describeProducersHandler(services))
    .register(describeTransactionsHandler(services))
    .register(listTransactionsHandler(services))
    .register(describeLogDirsHandler(services))
    .register(updateFeaturesHandler(services))
    .register(describeTopicPartitionsHandler(services));

  const dispatcher = new Dispatcher(registry, log, deps.observer, sasl);
  log.info("broker ready", { clusterId: cluster.clusterId, brokerId: config.brokerId, topics: topics.list().length });

  return {
    dispatch: (frame, conn) => dispatcher.dispatch(frame, conn),
    setAdvertisedListener(host, port, listeners) {
      ownership.setAdvertised(config.advertisedHost ?? host, config.advertisedPort ?? port, listeners);
    },
    services,
    registry,
    owned: clusterMode ? new OwnedResources({ topics, partitions, txn, groups }) : undefined,
    useOwnership(source) {
      if (!(ownership instanceof ClusterOwnership)) throw new Error("ownership moves only in cluster mode");
      ownership.useSource(source);
    },
    async close() {
      // Topic and config changes are durable before they are answered; the logs flush and write their
      // producer-state snapshots as they close. The group coordinator answers its parked requests and
      // waits for its offset writes. The transaction coordinator goes first: its requests and passes in flight
      // still use the offset store and the partitions. The scrubber stops first: it reads the stores'
      // files and may rewrite a slot, which must not meet a store that is closing.
      await scrubber.stop();
      await hangingTransactions.stop();
      await markerWatcher.stop();
      await fenceWatcher.stop();
      peers?.close();
      await txn.close();
      await fenceLog.close();
      await groups.close();
      await cleaner.stop();
      await partitions.close();
    },
  };
}
