/**
 * `bunka serve` configuration (flags, environment, config file, precedence, errors) and the CLI around it
 * (commands, exit codes, the one-line error format, the data-directory check).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrokerConfig, defaultBrokerConfig } from "../../../src/broker/config.ts";
import { parseServeArgs } from "../../../src/cli/config.ts";
import { VERSION } from "../../../src/cli/help.ts";
import { type CliDeps, runCli } from "../../../src/cli/run.ts";
import { ConfigError } from "../../../src/errors/errors.ts";
import { nodeFs } from "../../../src/platform/node-fs.ts";
import pkg from "../../../package.json";

const noFile = (path: string): string => {
  throw new Error(`ENOENT: no such file or directory, open '${path}'`);
};
const files = (contents: Record<string, string>) => (path: string) => {
  const text = contents[path];
  if (text === undefined) return noFile(path);
  return text;
};
const parse = (argv: string[], env: Record<string, string | undefined> = {}, readFile = noFile) =>
  parseServeArgs(argv, env, readFile);

/** Runs `fn`, expects a ConfigError, and returns its message (checked to be one line). */
function configError(fn: () => unknown): string {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  const message = (caught as ConfigError).message;
  expect(message).not.toContain("\n");
  return message;
}

describe("defaults", () => {
  test("no flags, no environment, no file: the documented defaults", () => {
    const config = parse([]);
    expect(config).toEqual(defaultBrokerConfig());
    expect(config.dataDir).toBe("./data");
    expect([config.listenHost, config.listenPort]).toEqual(["127.0.0.1", 9092]);
    expect([config.httpHost, config.httpPort]).toEqual(["127.0.0.1", 9644]);
    expect(config.brokerId).toBe(0);
    expect(config.advertisedHost).toBeUndefined();
    expect(config.advertisedPort).toBeUndefined();
  });
});

describe("flags", () => {
  test("--data-dir", () => {
    expect(parse(["--data-dir", "/var/lib/bunka"]).dataDir).toBe("/var/lib/bunka");
    expect(parse(["--data-dir=/srv/b"]).dataDir).toBe("/srv/b");
  });

  test("--listen, including port 0 and a bracketed IPv6 host", () => {
    const c = parse(["--listen", "0.0.0.0:19092"]);
    expect([c.listenHost, c.listenPort]).toEqual(["0.0.0.0", 19092]);
    const zero = parse(["--listen=localhost:0"]);
    expect([zero.listenHost, zero.listenPort]).toEqual(["localhost", 0]);
    const v6 = parse(["--listen", "[::1]:9093"]);
    expect([v6.listenHost, v6.listenPort]).toEqual(["::1", 9093]);
  });

  test("--advertised-listener", () => {
    const c = parse(["--advertised-listener", "kafka.example.com:9092"]);
    expect([c.advertisedHost, c.advertisedPort]).toEqual(["kafka.example.com", 9092]);
  });

  test("--http", () => {
    const c = parse(["--http", "127.0.0.1:0"]);
    expect([c.httpHost, c.httpPort]).toEqual(["127.0.0.1", 0]);
  });

  test("--broker-id", () => {
    expect(parse(["--broker-id", "7"]).brokerId).toBe(7);
    expect(parse(["--broker-id=2147483647"]).brokerId).toBe(2147483647);
  });

  test("--config", () => {
    const c = parse(["--config", "/etc/bunka.properties"], {}, files({ "/etc/bunka.properties": "broker.id=3\n" }));
    expect(c.brokerId).toBe(3);
  });

  test("--log-format and --log-level", () => {
    const c = parse(["--log-format", "json", "--log-level=debug"]);
    expect(c.logFormat).toBe("json");
    expect(c.logLevel).toBe("debug");
    for (const level of ["debug", "info", "warn", "error"] as const) expect(parse(["--log-level", level]).logLevel).toBe(level);
  });

  test("fsync.mode: batched by default, per-file from the flag, the environment or the file; nothing else", () => {
    expect(parse([]).fsyncMode).toBe("batched");
    expect(parse(["--fsync-mode", "per-file"]).fsyncMode).toBe("per-file");
    expect(parse([], { BUNKA_FSYNC_MODE: "per-file" }).fsyncMode).toBe("per-file");
    expect(parse(["--config", "/c"], {}, files({ "/c": "fsync.mode=per-file\n" })).fsyncMode).toBe("per-file");
    expect(parse(["--fsync-mode=batched"], { BUNKA_FSYNC_MODE: "per-file" }).fsyncMode).toBe("batched");
    expect(configError(() => parse(["--fsync-mode", "never"]))).toContain("batched|per-file");
  });

  test("log.scrubber.bytes.per.second: 8 MiB/s by default, 0 turns the scrubber off; from the flag, the environment or the file", () => {
    expect(parse([]).logScrubberBytesPerSecond).toBe(8 * 1024 * 1024);
    expect(parse(["--log-scrubber-bytes-per-second", "0"]).logScrubberBytesPerSecond).toBe(0);
    expect(parse([], { BUNKA_LOG_SCRUBBER_BYTES_PER_SECOND: "1048576" }).logScrubberBytesPerSecond).toBe(1048576);
    expect(parse(["--config", "/c"], {}, files({ "/c": "log.scrubber.bytes.per.second=4096\n" })).logScrubberBytesPerSecond).toBe(4096);
    expect(parse(["--log-scrubber-bytes-per-second=5"], { BUNKA_LOG_SCRUBBER_BYTES_PER_SECOND: "7" }).logScrubberBytesPerSecond).toBe(5);
    expect(configError(() => parse(["--log-scrubber-bytes-per-second", "-1"]))).toContain("--log-scrubber-bytes-per-second");
  });

  test("the last of a repeated flag wins", () => {
    expect(parse(["--broker-id", "1", "--broker-id", "2"]).brokerId).toBe(2);
  });

  test("all flags together", () => {
    const c = parse([
      "--data-dir", "d",
      "--listen", "h1:1",
      "--advertised-listener", "h2:2",
      "--http", "h3:3",
      "--broker-id", "4",
      "--log-format", "json",
      "--log-level", "warn",
    ]);
    expect(c).toMatchObject({
      dataDir: "d",
      listenHost: "h1",
      listenPort: 1,
      advertisedHost: "h2",
      advertisedPort: 2,
      httpHost: "h3",
      httpPort: 3,
      brokerId: 4,
      logFormat: "json",
      logLevel: "warn",
    });
  });
});

describe("environment", () => {
  test("every BUNKA_* variable", () => {
    const c = parse([], {
      BUNKA_DATA_DIR: "/env/data",
      BUNKA_LISTEN: "10.0.0.1:9000",
      BUNKA_ADVERTISED_LISTENER: "public.example:9001",
      BUNKA_HTTP: "10.0.0.1:9002",
      BUNKA_BROKER_ID: "5",
      BUNKA_LOG_FORMAT: "json",
      BUNKA_LOG_LEVEL: "error",
    });
    expect(c).toMatchObject({
      dataDir: "/env/data",
      listenHost: "10.0.0.1",
      listenPort: 9000,
      advertisedHost: "public.example",
      advertisedPort: 9001,
      httpHost: "10.0.0.1",
      httpPort: 9002,
      brokerId: 5,
      logFormat: "json",
      logLevel: "error",
    });
  });

  test("BUNKA_CONFIG names the config file", () => {
    const c = parse([], { BUNKA_CONFIG: "/c.properties" }, files({ "/c.properties": "num.partitions=6" }));
    expect(c.numPartitions).toBe(6);
  });

  test("an empty variable counts as unset", () => {
    expect(parse([], { BUNKA_BROKER_ID: "", BUNKA_LISTEN: "" })).toEqual(defaultBrokerConfig());
  });

  test("unrelated variables are ignored", () => {
    expect(parse([], { PATH: "/bin", BUNKA_UNKNOWN: "x" })).toEqual(defaultBrokerConfig());
  });

  test("a bad value names the variable", () => {
    expect(configError(() => parse([], { BUNKA_BROKER_ID: "one" }))).toContain("BUNKA_BROKER_ID");
    expect(configError(() => parse([], { BUNKA_LISTEN: "nope" }))).toContain("BUNKA_LISTEN");
    expect(configError(() => parse([], { BUNKA_LOG_LEVEL: "loud" }))).toContain("BUNKA_LOG_LEVEL");
  });
});

describe("config file", () => {
  const fullFile = [
    "# bunka configuration",
    "! also a comment",
    "",
    "data.dir = /file/data",
    "listen=0.0.0.0:29092",
    "advertised.listener: broker-0.internal:29092",
    "http=0.0.0.0:29644",
    "broker.id=9",
    "log.format=json",
    "log.level=debug",
    "socket.request.max.bytes=1048576",
    "connections.max.idle.ms=30000",
    "max.connections=50",
    "auto.create.topics.enable=FALSE",
    "num.partitions=3",
    "log.retention.ms=-1",
    "log.retention.bytes=1073741824",
    "log.segment.bytes=16777216",
    "log.roll.ms=3600000",
    "transaction.max.timeout.ms=60000",
    "producer.id.expiration.ms=120000",
    "group.initial.rebalance.delay.ms=0",
    "offsets.retention.minutes=60",
    "   ",
  ].join("\r\n");

  test("every key, flag names and Apache names, with comments, blank lines, ':' and CRLF", () => {
    const c = parse(["--config", "f"], {}, files({ f: fullFile }));
    const expected: BrokerConfig = {
      ...defaultBrokerConfig(),
      dataDir: "/file/data",
      listenHost: "0.0.0.0",
      listenPort: 29092,
      advertisedHost: "broker-0.internal",
      advertisedPort: 29092,
      httpHost: "0.0.0.0",
      httpPort: 29644,
      brokerId: 9,
      logFormat: "json",
      logLevel: "debug",
      socketRequestMaxBytes: 1048576,
      connectionsMaxIdleMs: 30000,
      maxConnections: 50,
      autoCreateTopicsEnable: false,
      numPartitions: 3,
      topicConfigDefaults: {
        "retention.ms": "-1",
        "retention.bytes": "1073741824",
        "segment.bytes": "16777216",
        "segment.ms": "3600000",
      },
      transactionMaxTimeoutMs: 60000,
      producerIdExpirationMs: 120000,
      groupInitialRebalanceDelayMs: 0,
      offsetsRetentionMs: 60 * 60_000,
    };
    expect(c).toEqual(expected);
  });

  test("the last of a repeated key wins", () => {
    expect(parse(["--config", "f"], {}, files({ f: "broker.id=1\nbroker.id=2\n" })).brokerId).toBe(2);
  });

  test("an unknown key is an error naming the key and the line", () => {
    const message = configError(() => parse(["--config", "f"], {}, files({ f: "# ok\nbroker.id=1\nlog.dirs=/x\n" })));
    expect(message).toContain("log.dirs");
    expect(message).toContain("line 3");
    expect(message).toContain("f");
  });

  test("--config inside the file is not a key", () => {
    expect(configError(() => parse(["--config", "f"], {}, files({ f: "config=other" })))).toContain("unknown key");
  });

  test("a line without a separator is an error naming the line", () => {
    const message = configError(() => parse(["--config", "f"], {}, files({ f: "broker.id=1\njust words\n" })));
    expect(message).toContain("line 2");
    expect(message).toContain("key=value");
  });

  test("a bad value names the file, line and key", () => {
    const message = configError(() => parse(["--config", "f"], {}, files({ f: "\n\nauto.create.topics.enable=yes" })));
    expect(message).toContain("f line 3");
    expect(message).toContain("auto.create.topics.enable");
    expect(configError(() => parse(["--config", "f"], {}, files({ f: "num.partitions=0" })))).toContain("out of range");
    expect(configError(() => parse(["--config", "f"], {}, files({ f: "socket.request.max.bytes=1e6" })))).toContain("integer");
  });

  test("the response byte bounds: a positive count, or -1 for no bound; 0 and other negatives are refused", () => {
    const read = (text: string) => parse(["--config", "f"], {}, files({ f: text }));
    expect(read("").maxHeldResponseBytesPerConnection).toBe(104857600);
    expect(read("").maxHeldResponseBytes).toBe(536870912);
    const set = read("max.held.response.bytes.per.connection=1048576\nmax.held.response.bytes=8589934592");
    expect(set.maxHeldResponseBytesPerConnection).toBe(1048576);
    expect(set.maxHeldResponseBytes).toBe(8589934592);
    const unbounded = read("max.held.response.bytes.per.connection=-1\nmax.held.response.bytes=-1");
    expect(unbounded.maxHeldResponseBytesPerConnection).toBe(Number.POSITIVE_INFINITY);
    expect(unbounded.maxHeldResponseBytes).toBe(Number.POSITIVE_INFINITY);
    const refusal = (line: string) => configError(() => read(line));
    expect(refusal("max.held.response.bytes=0")).toBe(
      'f line 1 (max.held.response.bytes): expected a positive number of bytes or -1 (no bound), got "0"',
    );
    expect(refusal("max.held.response.bytes.per.connection=-2")).toContain("out of range");
    expect(refusal("max.held.response.bytes=100MB")).toContain("integer");
  });

  test("broker-level topic defaults are checked with the topic config rules, in Apache's words", () => {
    const refusal = (line: string) => configError(() => parse(["--config", "f"], {}, files({ f: line })));
    expect(refusal("log.segment.bytes=13")).toBe("f line 1 (log.segment.bytes): Invalid value 13 for configuration log.segment.bytes: Value must be at least 14");
    expect(refusal("log.retention.ms=-2")).toBe("f line 1 (log.retention.ms): Invalid value -2 for configuration log.retention.ms: Value must be at least -1");
    expect(refusal("log.cleanup.policy=shred")).toBe(
      "f line 1 (log.cleanup.policy): Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete",
    );
    expect(refusal("log.cleaner.min.cleanable.ratio=1.5")).toBe(
      "f line 1 (log.cleaner.min.cleanable.ratio): Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1",
    );
    expect(refusal("compression.type=brotli")).toContain("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer");
    expect(refusal("min.insync.replicas=0")).toContain("Value must be at least 1");
    expect(refusal("log.message.timestamp.after.max.ms=-5")).toContain("Value must be at least 0");
    expect(refusal("log.cleaner.min.compaction.lag.ms=10\nlog.cleaner.max.compaction.lag.ms=5")).toBe(
      'config file "f": conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)',
    );
    // Configs without a broker-level synonym in Apache have no config file key either.
    expect(refusal("remote.storage.enable=false")).toContain("unknown key");
  });

  test("the compaction defaults and the accepted-only topic defaults, under Apache's names", () => {
    const file = [
      "log.cleanup.policy=compact,delete",
      "log.cleaner.min.cleanable.ratio=0.25",
      "log.cleaner.delete.retention.ms=1000",
      "log.cleaner.min.compaction.lag.ms=2000",
      "log.cleaner.max.compaction.lag.ms=3000",
      "compression.type=zstd",
      "compression.zstd.level=5",
      "message.max.bytes=2000000",
      "min.insync.replicas=2",
      "unclean.leader.election.enable=true",
      "log.preallocate=true",
      "log.flush.interval.messages=1",
    ].join("\n");
    expect(parse(["--config", "f"], {}, files({ f: file })).topicConfigDefaults).toEqual({
      "cleanup.policy": "compact,delete",
      "min.cleanable.dirty.ratio": "0.25",
      "delete.retention.ms": "1000",
      "min.compaction.lag.ms": "2000",
      "max.compaction.lag.ms": "3000",
      "compression.type": "zstd",
      "compression.zstd.level": "5",
      "max.message.bytes": "2000000",
      "min.insync.replicas": "2",
      "unclean.leader.election.enable": "true",
      preallocate: "true",
      "flush.messages": "1",
    });
  });

  test("the log cleaner's settings, with Apache's defaults and bounds", () => {
    expect(parse([]).cleaner).toEqual({
      enabled: true,
      threads: 1,
      ioMaxBytesPerSecond: 1.7976931348623157e308,
      dedupeBufferSizeBytes: 134217728,
      ioBufferSizeBytes: 524288,
      ioBufferLoadFactor: 0.9,
      backoffMs: 15000,
    });
    const file = [
      "log.cleaner.enable=FALSE",
      "log.cleaner.threads=4",
      "log.cleaner.io.max.bytes.per.second=1048576.5",
      "log.cleaner.dedupe.buffer.size=67108864",
      "log.cleaner.io.buffer.size=65536",
      "log.cleaner.io.buffer.load.factor=0.75",
      "log.cleaner.backoff.ms=100",
    ].join("\n");
    expect(parse(["--config", "f"], {}, files({ f: file })).cleaner).toEqual({
      enabled: false,
      threads: 4,
      ioMaxBytesPerSecond: 1048576.5,
      dedupeBufferSizeBytes: 67108864,
      ioBufferSizeBytes: 65536,
      ioBufferLoadFactor: 0.75,
      backoffMs: 100,
    });
    const refusal = (text: string) => configError(() => parse(["--config", "f"], {}, files({ f: text })));
    expect(refusal("log.cleaner.enable=yes")).toBe(
      "f line 1 (log.cleaner.enable): Invalid value yes for configuration log.cleaner.enable: Expected value to be either true or false",
    );
    expect(refusal("log.cleaner.threads=-1")).toBe("f line 1 (log.cleaner.threads): Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0");
    expect(refusal("log.cleaner.backoff.ms=-1")).toContain("Value must be at least 0");
    expect(refusal("log.cleaner.io.buffer.size=x")).toContain("Not a number of type INT");
    expect(refusal("log.cleaner.io.buffer.load.factor=x")).toContain("Not a number of type DOUBLE");
    // Apache accepts 0 threads in the file and then fails to start (it divides by the thread count).
    expect(refusal("log.cleaner.threads=0")).toBe('config file "f": log.cleaner.threads must be at least 1, got 0');
    expect(refusal("log.cleaner.threads=128")).toBe(
      'config file "f": requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread. (log.cleaner.dedupe.buffer.size=134217728, log.cleaner.threads=128)',
    );
  });

  test("an unreadable config file is one line naming the file", () => {
    const message = configError(() => parse(["--config", "/missing.properties"]));
    expect(message).toContain("/missing.properties");
    expect(message).toContain("cannot read config file");
    const multiline = () => {
      throw new Error("first line\nsecond line");
    };
    expect(configError(() => parse(["--config", "x"], {}, multiline))).not.toContain("second line");
  });

  test("no config file is read unless one is named", () => {
    let reads = 0;
    parse([], {}, () => {
      reads++;
      return "";
    });
    expect(reads).toBe(0);
  });
});

describe("precedence: flags > environment > config file > defaults", () => {
  const file = files({ f: "broker.id=1\nlisten=file:1\nhttp=file:1\ndata.dir=file\n" });

  test("the file overrides defaults", () => {
    const c = parse(["--config", "f"], {}, file);
    expect([c.brokerId, c.listenHost, c.httpHost, c.dataDir]).toEqual([1, "file", "file", "file"]);
  });

  test("the environment overrides the file", () => {
    const c = parse(["--config", "f"], { BUNKA_BROKER_ID: "2", BUNKA_LISTEN: "env:2" }, file);
    expect([c.brokerId, c.listenHost, c.httpHost]).toEqual([2, "env", "file"]);
  });

  test("flags override the environment and the file", () => {
    const c = parse(["--config", "f", "--broker-id", "3", "--data-dir", "flag"], { BUNKA_BROKER_ID: "2", BUNKA_DATA_DIR: "env" }, file);
    expect([c.brokerId, c.dataDir, c.listenHost]).toEqual([3, "flag", "file"]);
  });

  test("--config overrides BUNKA_CONFIG", () => {
    const c = parse(["--config", "a"], { BUNKA_CONFIG: "b" }, files({ a: "broker.id=10", b: "broker.id=20" }));
    expect(c.brokerId).toBe(10);
  });

  test("a flag that is valid does not excuse an invalid lower-precedence value", () => {
    // Every source is validated, so a broken environment is found now rather than when the flag is dropped.
    expect(configError(() => parse(["--broker-id", "1"], { BUNKA_BROKER_ID: "x" }))).toContain("BUNKA_BROKER_ID");
  });
});

describe("errors", () => {
  test("unknown flag", () => {
    expect(configError(() => parse(["--bogus", "1"]))).toBe('unknown flag "--bogus"');
    expect(configError(() => parse(["-x"]))).toContain("unknown flag");
  });

  test("unexpected positional argument", () => {
    expect(configError(() => parse(["extra"]))).toContain("unexpected argument");
  });

  test("missing value at the end, or followed by another flag", () => {
    expect(configError(() => parse(["--data-dir"]))).toBe("missing value for --data-dir");
    expect(configError(() => parse(["--listen", "--http", "a:1"]))).toBe("missing value for --listen");
    expect(configError(() => parse(["--config"]))).toBe("missing value for --config");
  });

  test("bad HOST:PORT", () => {
    for (const bad of ["localhost", ":9092", "host:", "host:port", "host:-1", "ho st:1", "::1:9092", "[::1]9092", "[zz]:1"]) {
      expect(configError(() => parse(["--listen", bad]))).toContain("--listen");
    }
  });

  test("port out of range", () => {
    expect(configError(() => parse(["--http", "127.0.0.1:65536"]))).toContain("out of range");
    expect(configError(() => parse(["--listen", "127.0.0.1:99999"]))).toContain("out of range");
    // Clients cannot be told to connect to port 0.
    expect(configError(() => parse(["--advertised-listener", "h:0"]))).toContain("out of range");
  });

  test("non-integer or negative broker id", () => {
    for (const bad of ["abc", "1.5", "-1", "", "2147483648", "0x10"]) {
      expect(configError(() => parse([`--broker-id=${bad}`]))).toContain("--broker-id");
    }
  });

  test("bad log format or level", () => {
    expect(configError(() => parse(["--log-format", "xml"]))).toContain("text|json");
    expect(configError(() => parse(["--log-level", "verbose"]))).toContain("debug|info|warn|error");
  });

  test("empty data dir", () => {
    expect(configError(() => parse(["--data-dir="]))).toContain("--data-dir");
  });

  test("a value with a newline still gives a one-line message", () => {
    configError(() => parse(["--listen", "a\nb:1"]));
  });
});

// ---- the CLI around it -------------------------------------------------------------------------------------

const tmpRoot = mkdtempSync(join(tmpdir(), "bunka-cli-test-"));
afterAll(() => rmSync(tmpRoot, { recursive: true, force: true }));

function cli(overrides: Partial<CliDeps> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const served: BrokerConfig[] = [];
  const deps: CliDeps = {
    env: {},
    readFile: noFile,
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    fs: nodeFs,
    serve: async (config) => {
      served.push(config);
      return 0;
    },
    fetch: async () => {
      throw new Error("serve tests make no HTTP requests");
    },
    ...overrides,
  };
  return { deps, out, err, served, stdout: () => out.join(""), stderr: () => err.join("") };
}

describe("runCli", () => {
  test("version, --version and -v print the package version", async () => {
    expect(VERSION).toBe(pkg.version);
    for (const arg of ["version", "--version", "-v"]) {
      const c = cli();
      expect(await runCli([arg], c.deps)).toBe(0);
      expect(c.stdout()).toBe(`bunka ${pkg.version}\n`);
      expect(c.stderr()).toBe("");
    }
  });

  test("help, --help, -h and no command print the main help", async () => {
    for (const argv of [["help"], ["--help"], ["-h"], []]) {
      const c = cli();
      expect(await runCli(argv, c.deps)).toBe(0);
      expect(c.stdout()).toContain("bunka serve");
    }
  });

  test("serve --help documents every flag, variable and the precedence", async () => {
    for (const argv of [["serve", "--help"], ["serve", "-h"], ["help", "serve"], ["serve", "--listen", "x", "--help"]]) {
      const c = cli();
      expect(await runCli(argv, c.deps)).toBe(0);
      const help = c.stdout();
      for (const flag of ["--data-dir", "--listen", "--advertised-listener", "--http", "--broker-id", "--config", "--log-format", "--log-level", "--fsync-mode", "--log-scrubber-bytes-per-second"]) {
        expect(help).toContain(flag);
      }
      for (const v of ["BUNKA_DATA_DIR", "BUNKA_LISTEN", "BUNKA_ADVERTISED_LISTENER", "BUNKA_HTTP", "BUNKA_BROKER_ID", "BUNKA_CONFIG", "BUNKA_LOG_FORMAT", "BUNKA_LOG_LEVEL", "BUNKA_FSYNC_MODE", "BUNKA_LOG_SCRUBBER_BYTES_PER_SECOND"]) {
        expect(help).toContain(v);
      }
      expect(help).toContain("flags > environment variables > config file > defaults");
      expect(c.served.length).toBe(0);
    }
  });

  test("an unknown command or flag exits 2 with one line on stderr", async () => {
    for (const argv of [["frobnicate"], ["--bogus"]]) {
      const c = cli();
      expect(await runCli(argv, c.deps)).toBe(2);
      expect(c.stderr()).toMatch(/^bunka: [^\n]+\n$/);
      expect(c.stdout()).toBe("");
    }
  });

  test("a configuration error exits 2 with one line and does not serve", async () => {
    const c = cli();
    expect(await runCli(["serve", "--listen", "nope"], c.deps)).toBe(2);
    expect(c.stderr()).toBe('bunka: --listen: expected HOST:PORT, got "nope"\n');
    expect(c.served.length).toBe(0);
  });

  test("serve hands the parsed configuration to serve() and returns its exit code", async () => {
    const dataDir = join(tmpRoot, "served");
    const c = cli({ env: { BUNKA_BROKER_ID: "4" }, serve: async () => 0 });
    let seen: BrokerConfig | undefined;
    c.deps.serve = async (config) => {
      seen = config;
      return 0;
    };
    expect(await runCli(["serve", "--data-dir", dataDir], c.deps)).toBe(0);
    expect(seen?.dataDir).toBe(dataDir);
    expect(seen?.brokerId).toBe(4);
  });

  test("a start-up failure in serve() exits 1 with one line", async () => {
    const c = cli({
      serve: async () => {
        throw new Error("Failed to listen at 127.0.0.1\nmore detail");
      },
    });
    expect(await runCli(["serve", "--data-dir", join(tmpRoot, "fails")], c.deps)).toBe(1);
    expect(c.stderr()).toBe("bunka: Failed to listen at 127.0.0.1\n");
  });
});

describe("data directory check", () => {
  test("a missing data directory is created, and the write probe is removed", async () => {
    const dataDir = join(tmpRoot, "new", "nested", "data");
    const c = cli();
    expect(await runCli(["serve", "--data-dir", dataDir], c.deps)).toBe(0);
    expect(statSync(dataDir).isDirectory()).toBe(true);
    expect(readdirSync(dataDir)).toEqual([]);
    expect(c.served.length).toBe(1);
  });

  test("an existing directory is accepted as is", async () => {
    const dataDir = mkdtempSync(join(tmpRoot, "existing-"));
    writeFileSync(join(dataDir, "keep"), "x");
    const c = cli();
    expect(await runCli(["serve", "--data-dir", dataDir], c.deps)).toBe(0);
    expect(readdirSync(dataDir)).toEqual(["keep"]);
  });

  test("a data directory that is a file exits 2 with one line", async () => {
    const file = join(tmpRoot, "a-file");
    writeFileSync(file, "x");
    const c = cli();
    expect(await runCli(["serve", "--data-dir", file], c.deps)).toBe(2);
    expect(c.stderr()).toMatch(/^bunka: data directory "[^"]+" is not a directory\n$/);
    expect(c.served.length).toBe(0);
  });

  test("a data directory that cannot be created exits 2 with one line", async () => {
    const file = join(tmpRoot, "blocker");
    writeFileSync(file, "x");
    const c = cli();
    expect(await runCli(["serve", "--data-dir", join(file, "sub")], c.deps)).toBe(2);
    expect(c.stderr()).toMatch(/^bunka: data directory "[^"]+" (cannot be created|cannot be read)[^\n]*\n$/);
    expect(c.served.length).toBe(0);
  });

  test("a data directory that is not writable exits 2 with one line", async () => {
    // Root ignores permission bits, so the failure is injected through the Fs port.
    const dataDir = mkdtempSync(join(tmpRoot, "readonly-"));
    const c = cli({
      fs: {
        ...nodeFs,
        open: async () => {
          throw new Error(`EACCES: permission denied, open '${dataDir}/probe'`);
        },
      },
    });
    expect(await runCli(["serve", "--data-dir", dataDir], c.deps)).toBe(2);
    expect(c.stderr()).toMatch(/^bunka: data directory "[^"]+" is not writable: EACCES[^\n]*\n$/);
    expect(c.served.length).toBe(0);
  });
});

describe("http.reads.need.token", () => {
  test("off by default; on only with BUNKA_ADMIN_TOKEN, else one line naming both", () => {
    expect(parse([]).httpReadsNeedToken).toBe(false);
    const withToken = parse(["--config", "/c"], { BUNKA_ADMIN_TOKEN: "s3cret" }, files({ "/c": "http.reads.need.token=true\n" }));
    expect(withToken.httpReadsNeedToken).toBe(true);
    const message = configError(() => parse(["--config", "/c"], {}, files({ "/c": "http.reads.need.token=true\n" })));
    expect(message).toContain("http.reads.need.token needs BUNKA_ADMIN_TOKEN");
    expect(configError(() => parse(["--config", "/c"], { BUNKA_ADMIN_TOKEN: "s3cret" }, files({ "/c": "http.reads.need.token=maybe\n" })))).toContain("http.reads.need.token");
  });
});
