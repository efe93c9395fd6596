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
  bunka serve [flags]      run a broker (see: bunka serve --help)
  bunka version            print the version (also: --version, -v)
  bunka help               print this help (also: --help, -h)

Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration, 130 second interrupt.
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
  --broker-id N                   this broker's id, 0..2147483647          (default 0)
  --config FILE                   config file, Java-properties syntax
  --log-format text|json          log line format on stderr                (default text)
  --log-level debug|info|warn|error                                        (default info)
  -h, --help                      print this help

Environment variables (empty means unset):
  BUNKA_DATA_DIR  BUNKA_LISTEN  BUNKA_ADVERTISED_LISTENER  BUNKA_HTTP  BUNKA_BROKER_ID
  BUNKA_CONFIG  BUNKA_LOG_FORMAT  BUNKA_LOG_LEVEL

Config file: one key=value per line; blank lines and lines starting with # or ! are ignored. Keys:
  data.dir, listen, advertised.listener, http, broker.id, log.format, log.level, and these
  Apache Kafka properties:
    socket.request.max.bytes          (default 104857600)
    connections.max.idle.ms           (default 600000; -1 never closes idle connections)
    max.connections                   (default 10000)
    auto.create.topics.enable         (default true)
    num.partitions                    (default 1)
    log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms  (topic defaults)
    transaction.max.timeout.ms        (default 900000)
    producer.id.expiration.ms         (default 86400000)
    group.initial.rebalance.delay.ms  (default 3000)
    offsets.retention.minutes         (default 10080)
  An unknown key is an error.

Precedence, highest first: flags > environment variables > config file > defaults.

Stop with SIGTERM or SIGINT: in-flight requests are answered, then the broker exits 0.
A second signal exits at once with code 130.
`;
}
