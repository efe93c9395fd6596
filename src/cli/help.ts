/**
 * Help texts and the version. The version comes from package.json at build time: `bun build --compile`
 * inlines the JSON import, so the binary carries its own version and reads no file at run time.
 */
import pkg from "../../package.json";

export const VERSION: string = pkg.version;

export function versionText(): string {
  return `bunka ${VERSION}\n`;
}

export function mainHelp(): string {
  return `bunka ${VERSION} — an Apache-Kafka-wire-compatible broker with exactly-once semantics

Usage:
  bunka serve [flags]          run a broker (see: bunka serve --help)
  bunka topics [TOPIC]         a running broker's topics, or one topic's partitions
  bunka txn list [filters]     its transactions (--state, --min-age, --producer-id, --limit)
  bunka txn describe ID        one transaction: partitions, groups, staged offsets, pending markers
  bunka txn abort ID           abort an Ongoing (hanging) transaction; needs BUNKA_ADMIN_TOKEN
  bunka cluster                the cluster as a running broker sees it: mode, etcd, its lease, members
  bunka version                print the version (also: --version, -v)
  bunka help [COMMAND]         print this help, or a command's (also: --help, -h)

topics, txn and cluster talk to the broker's HTTP side-port: --http HOST:PORT (default: BUNKA_HTTP, then
127.0.0.1:9644); --json prints the side-port's JSON instead of a table.

Exit codes: 0 success, 1 runtime failure (for topics, txn and cluster: the broker cannot be reached or
answered an error), 2 bad usage or configuration (serve: also etcd unreachable at start, or the broker id
taken), 130 second interrupt.
`;
}

const SIDE_PORT_FLAGS = `  --http HOST:PORT   the broker's HTTP side-port (default: BUNKA_HTTP, then 127.0.0.1:9644);
                     also http://HOST:PORT; a wildcard host (0.0.0.0, ::) means this machine
  --json             the side-port's JSON, unchanged, instead of a table
  -h, --help         print this help`;

export function topicsHelp(): string {
  return `Usage: bunka topics [TOPIC] [--http HOST:PORT] [--json]

Without TOPIC: every topic of a running broker (partitions, size on disk, configs set on it, id).
With TOPIC: each of its partitions: leader, log start and end offsets, high watermark (HW), last stable
offset (LSO), LSO lag (HW - LSO: what read_committed consumers cannot read yet), open transactions,
segments, size, producer ids. A partition no request has opened since the broker started shows "-".

Flags:
${SIDE_PORT_FLAGS}

Exit codes: 0 success, 1 the broker cannot be reached or answered an error (an unknown topic), 2 bad usage.
`;
}

export function clusterHelp(): string {
  return `Usage: bunka cluster [--http HOST:PORT] [--json]

The cluster as a running broker sees it: cluster id, this broker's id, mode (single or cluster), the
controller Metadata names (the lowest live broker id), the etcd endpoints, this broker's etcd lease (id,
TTL, how long it stays valid by the broker's own clock, valid or lapsed, lapses since start), and the
live members with their Kafka listeners and side-ports. Single mode shows the one broker.

Flags:
${SIDE_PORT_FLAGS}

Exit codes: 0 success, 1 the broker cannot be reached or answered an error, 2 bad usage.
`;
}

export function txnHelp(): string {
  return `Usage:
  bunka txn list [--state STATE] [--min-age DURATION] [--producer-id N] [--limit N] [--http HOST:PORT] [--json]
  bunka txn describe ID [--http HOST:PORT] [--json]
  bunka txn abort ID [--http HOST:PORT] [--json]

The transaction coordinator's state on a running broker, over its HTTP side-port.

list       every transactional id: producer id, epoch, state, age of the open transaction, timeout,
           partitions, groups. "(timed out)" marks an Ongoing transaction past its timeout, which the
           broker aborts within 10 s: one that stays is hanging.
  --state STATE        Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort
                       (any case)
  --min-age DURATION   only open transactions (Ongoing, Prepare*) running at least this long:
                       30s, 5m, 1h, 1d, or milliseconds (--min-age 0: every open transaction)
  --producer-id N      only this producer id
  --limit N            at most N rows, 1..10000 (default 1000)
describe   one transactional id: everything above, the offsets it staged for its groups, and the markers
           of its decision not yet written.
abort      fence and abort an Ongoing transaction, as the timeout reaper would (the producer's next
           request fails with PRODUCER_FENCED; read_committed consumers move past its records). Needs the
           broker's admin token in BUNKA_ADMIN_TOKEN.

Flags:
${SIDE_PORT_FLAGS}

Exit codes: 0 success, 1 the broker cannot be reached or answered an error (an unknown id: 404; abort of a
transaction that is not Ongoing: 409), 2 bad usage.
`;
}

export function serveHelp(): string {
  return `Usage: bunka serve [flags]

Runs a broker. With no flags: Kafka on 127.0.0.1:9092, data in ./data, HTTP side-port on 127.0.0.1:9644.

Flags (each also accepted as --flag=value):
  --data-dir DIR                  data directory, created if missing      (default ./data)
  --listen HOST:PORT              Kafka listener; port 0 picks a free one  (default 127.0.0.1:9092)
  --advertised-listener HOST:PORT address clients are told to connect to  (default: the bound listener)
  --http HOST:PORT                HTTP side-port; port 0 picks a free one  (default 127.0.0.1:9644)
  --http-allowed-hosts NAMES      more names (comma-separated) the side-port may be reached by; a
                                  Host header naming another is refused  (default: its own host,
                                  the advertised host, this machine's name, localhost, addresses)
  --broker-id N                   this broker's id, 0..2147483647          (default 0)
  --config FILE                   config file, Java-properties syntax
  --log-format text|json          log line format on stderr                (default text)
  --log-level debug|info|warn|error                                        (default info)
  --fsync-mode batched|per-file   batched: fsyncs requested together share one syncfs of the data
                                  directory's file system (Linux); per-file: one fsync per file
                                                                           (default batched)
  --etcd URL[,URL...]             cluster mode: join the cluster of the data directory through this
                                  etcd (e.g. http://10.0.0.5:2379); without it, a single broker
                                  that needs no etcd
  --log-scrubber-bytes-per-second N
                                  read rate of the background scrubber that verifies every stored
                                  batch; 0 turns it off                    (default 8388608)
  -h, --help                      print this help

Environment variables (empty means unset):
  BUNKA_DATA_DIR  BUNKA_LISTEN  BUNKA_ADVERTISED_LISTENER  BUNKA_HTTP  BUNKA_HTTP_ALLOWED_HOSTS
  BUNKA_BROKER_ID  BUNKA_CONFIG  BUNKA_LOG_FORMAT  BUNKA_LOG_LEVEL  BUNKA_FSYNC_MODE  BUNKA_ETCD
  BUNKA_LOG_SCRUBBER_BYTES_PER_SECOND
  UV_THREADPOOL_SIZE  threads for file work, every fsync among it (when unset, serve re-executes
                      itself once with 16; Bun's own default is one per core)

Config file: one key=value per line; blank lines and lines starting with # or ! are ignored. Keys:
  data.dir, listen, advertised.listener, http, broker.id, log.format, log.level, fsync.mode,
  etcd.endpoints, log.scrubber.bytes.per.second, and these Apache Kafka properties:
    broker.session.timeout.ms         (default 9000: the TTL of the broker's etcd lease in cluster
                                      mode, whole seconds)
    socket.request.max.bytes          (default 104857600)
    connections.max.idle.ms           (default 600000; -1 never closes idle connections)
    max.connections                   (default 10000)
    auto.create.topics.enable         (default true)
    num.partitions                    (default 1)
    log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms, log.cleanup.policy,
    log.cleaner.min.cleanable.ratio, log.cleaner.delete.retention.ms, log.cleaner.min.compaction.lag.ms,
    log.cleaner.max.compaction.lag.ms, compression.type, message.max.bytes, min.insync.replicas, ...
                                      (the broker-level default of every topic config; see the README)
    log.cleaner.enable, log.cleaner.threads, log.cleaner.io.max.bytes.per.second,
    log.cleaner.dedupe.buffer.size, log.cleaner.io.buffer.size, log.cleaner.io.buffer.load.factor,
    log.cleaner.backoff.ms            (the log cleaner; Apache's defaults)
    transaction.max.timeout.ms        (default 900000)
    producer.id.expiration.ms         (default 86400000)
    group.initial.rebalance.delay.ms  (default 3000)
    offsets.retention.minutes         (default 10080)
    max.incremental.fetch.session.cache.slots  (default 1000; 0 creates no fetch session)
    min.incremental.fetch.session.eviction.ms  (default 120000)
  and bunka's own, the response bytes held in memory before connections stop being read (-1: no bound):
    max.held.response.bytes.per.connection  (default 104857600)
    max.held.response.bytes           (default 536870912, all connections together)
  Security, Apache's keys (README: "Listeners and TLS", "SASL", "Authorization"):
    listeners, advertised.listeners, listener.security.protocol.map, inter.broker.listener.name
                                      (several listeners: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
    ssl.keystore.type, ssl.keystore.location, ssl.key.password, ssl.truststore.type,
    ssl.truststore.location, ssl.client.auth, listener.name.<name>.ssl.*
                                      (TLS with PEM files; reloaded without a restart)
    sasl.enabled.mechanisms           (default SCRAM-SHA-256,SCRAM-SHA-512; PLAIN too)
    listener.name.<name>.sasl.enabled.mechanisms, sasl.server.max.receive.size
    connections.max.reauth.ms, connection.failed.authentication.delay.ms
    authorizer.class.name, super.users, allow.everyone.if.no.acl.found
                                      (ACLs, off unless authorizer.class.name is set)
  and bunka's own: ssl.handshake.timeout.ms, ssl.reload.check.interval.ms, http.ssl.keystore.location,
    http.ssl.key.password, http.ssl.truststore.location, http.ssl.client.auth, sasl.plain.users.file,
    http.reads.need.token (every side-port route but /health and /ready needs BUNKA_ADMIN_TOKEN)
  An unknown key is an error.

Precedence, highest first: flags > environment variables > config file > defaults.

Cluster mode (--etcd): several brokers share one data directory; each registers in etcd under a lease
(broker.session.timeout.ms), claims an even share of the partitions and coordinator slots, and serves
them; Metadata and FindCoordinator name the owners, so clients may connect to any broker. SIGTERM hands
this broker's share over first. An unreachable etcd or a broker id another live process holds at start:
one line, exit 2.

Stop with SIGTERM or SIGINT: in-flight requests are answered, then the broker exits 0 (in cluster mode
after revoking its etcd lease, which deregisters it). A second signal exits at once with code 130. A
signal during recovery exits 0 at once (the next start goes on recovering). A listen address that is
taken or not this machine's: one line naming it, exit 2, before recovery.
`;
}
