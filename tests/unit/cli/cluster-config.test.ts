/**
 * Cluster mode's settings of `bunka serve`: the etcd endpoints (`--etcd`, BUNKA_ETCD, `etcd.endpoints`)
 * and the lease TTL (`broker.session.timeout.ms`, config file only, as Apache's property names are), with
 * the usual precedence and one-line errors naming where a bad value came from; and the help that lists
 * them. Without any of them the broker stays in single-broker mode.
 */
import { describe, expect, test } from "bun:test";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { parseServeArgs } from "../../../src/cli/config.ts";
import { type CliDeps, runCli } from "../../../src/cli/run.ts";
import { ConfigError } from "../../../src/errors/errors.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const noFile = (path: string): string => {
  throw new Error(`ENOENT: no such file or directory, open '${path}'`);
};
const files = (contents: Record<string, string>) => (path: string) => contents[path] ?? noFile(path);
const parse = (argv: string[], env: Record<string, string | undefined> = {}, readFile = noFile) => parseServeArgs(argv, env, readFile);

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

describe("cluster mode settings", () => {
  test("by default: single-broker mode (no etcd) and Apache's 9000 ms session timeout", () => {
    const config = parse([]);
    expect(config.etcdEndpoints).toBeUndefined();
    expect(config.brokerSessionTimeoutMs).toBe(9000);
    expect(defaultBrokerConfig().etcdEndpoints).toBeUndefined();
  });

  test("--etcd, BUNKA_ETCD and etcd.endpoints: one URL or several, trimmed, reduced to scheme, host and port", () => {
    expect(parse(["--etcd", "http://10.0.0.5:2379"]).etcdEndpoints).toEqual(["http://10.0.0.5:2379"]);
    expect(parse(["--etcd=http://a:2379, http://b:2379 ,https://c:2379/"]).etcdEndpoints).toEqual(["http://a:2379", "http://b:2379", "https://c:2379"]);
    expect(parse([], { BUNKA_ETCD: "http://127.0.0.1:2379" }).etcdEndpoints).toEqual(["http://127.0.0.1:2379"]);
    const file = files({ "/etc/bunka.properties": "broker.id=3\netcd.endpoints = http://e1:2379,http://e2:2379\n" });
    const fromFile = parse(["--config", "/etc/bunka.properties"], {}, file);
    expect(fromFile.etcdEndpoints).toEqual(["http://e1:2379", "http://e2:2379"]);
    expect(fromFile.brokerId).toBe(3);
  });

  test("precedence: the flag over the environment over the file", () => {
    const file = files({ "/c": "etcd.endpoints=http://file:2379\n" });
    expect(parse(["--config", "/c"], {}, file).etcdEndpoints).toEqual(["http://file:2379"]);
    expect(parse(["--config", "/c"], { BUNKA_ETCD: "http://env:2379" }, file).etcdEndpoints).toEqual(["http://env:2379"]);
    expect(parse(["--config", "/c", "--etcd", "http://flag:2379"], { BUNKA_ETCD: "http://env:2379" }, file).etcdEndpoints).toEqual(["http://flag:2379"]);
    // An empty variable counts as unset, as for every other BUNKA_* variable.
    expect(parse([], { BUNKA_ETCD: "" }).etcdEndpoints).toBeUndefined();
  });

  test("bad endpoints are one line naming where they came from and what is wrong", () => {
    expect(configError(() => parse(["--etcd", "127.0.0.1:2379"]))).toBe('--etcd: etcd endpoint "127.0.0.1:2379" is not a URL (expected e.g. http://127.0.0.1:2379)');
    expect(configError(() => parse(["--etcd", "ftp://e:2379"]))).toBe("--etcd: etcd endpoint ftp://e:2379: only http and https are supported");
    expect(configError(() => parse(["--etcd", "http://e:2379/v3"]))).toBe("--etcd: etcd endpoint http://e:2379/v3: give the scheme, host and port only");
    expect(configError(() => parse([], { BUNKA_ETCD: " , " }))).toBe("BUNKA_ETCD: etcd endpoints: none given (expected e.g. http://127.0.0.1:2379)");
    const many = Array.from({ length: 17 }, (_, i) => `http://e${i}:2379`).join(",");
    expect(configError(() => parse(["--etcd", many]))).toBe("--etcd: etcd endpoints: 17 given, at most 16");
    const file = files({ "/c": "# cluster\netcd.endpoints=nope\n" });
    expect(configError(() => parse(["--config", "/c"], {}, file))).toBe('/c line 2 (etcd.endpoints): etcd endpoint "nope" is not a URL (expected e.g. http://127.0.0.1:2379)');
  });

  test("credentials in an endpoint are refused without being repeated", () => {
    const message = configError(() => parse(["--etcd", "http://root:s3cret@e:2379"]));
    expect(message).toBe("--etcd: etcd endpoint http://e:2379: a user name or password in the URL is not supported (bunka does not use etcd authentication)");
    expect(message).not.toContain("s3cret");
    expect(configError(() => parse(["--etcd", "http://root@e:2379"]))).toContain("a user name or password in the URL is not supported");
  });

  test("broker.session.timeout.ms: whole seconds from 1000 ms, in the config file only", () => {
    const at = (value: string) => parse(["--config", "/c"], {}, files({ "/c": `broker.session.timeout.ms=${value}\n` }));
    expect(at("2000").brokerSessionTimeoutMs).toBe(2000);
    expect(at("30000").brokerSessionTimeoutMs).toBe(30000);
    expect(configError(() => at("2500"))).toBe("/c line 1 (broker.session.timeout.ms): etcd leases last whole seconds, so 2500 ms cannot be one (use 2000 or 3000)");
    expect(configError(() => at("999"))).toBe('/c line 1 (broker.session.timeout.ms): "999" is out of range (1000..2147483647)');
    expect(configError(() => at("0"))).toContain("out of range");
    expect(configError(() => at("9s"))).toBe('/c line 1 (broker.session.timeout.ms): expected an integer, got "9s"');
    expect(configError(() => parse(["--broker-session-timeout-ms", "2000"]))).toBe('unknown flag "--broker-session-timeout-ms"');
  });
});

function cli(env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const served: unknown[] = [];
  const deps: CliDeps = {
    env,
    readFile: noFile,
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    fs: new MemoryFs(),
    serve: async (config) => {
      served.push(config);
      return 0;
    },
    fetch: async () => {
      throw new Error("no fetch in these tests");
    },
  };
  return { deps, stdout: () => out.join(""), stderr: () => err.join(""), served };
}

describe("runCli", () => {
  test("serve --help documents the cluster flag, its variable, its file keys and the session timeout", async () => {
    const c = cli();
    expect(await runCli(["serve", "--help"], c.deps)).toBe(0);
    for (const word of ["--etcd URL", "BUNKA_ETCD", "etcd.endpoints", "broker.session.timeout.ms", "claims an even share", "share over first", "exit 2"]) {
      expect(c.stdout()).toContain(word);
    }
  });

  test("a bad endpoint exits 2 with one line and does not serve", async () => {
    const c = cli();
    expect(await runCli(["serve", "--etcd", "etcd:2379"], c.deps)).toBe(2);
    // "etcd:" reads as a URL scheme.
    expect(c.stderr()).toBe("bunka: --etcd: etcd endpoint etcd:2379: only http and https are supported\n");
    expect(c.served).toEqual([]);
  });

  test("a failure to join, reported by serve() as a ConfigError, exits 2 with its one line", async () => {
    const c = cli();
    c.deps.serve = async () => {
      throw new ConfigError("cannot reach etcd at http://127.0.0.1:1 (connection refused): cluster mode needs etcd to start");
    };
    expect(await runCli(["serve", "--etcd", "http://127.0.0.1:1", "--data-dir", "/d"], c.deps)).toBe(2);
    expect(c.stderr()).toBe("bunka: cannot reach etcd at http://127.0.0.1:1 (connection refused): cluster mode needs etcd to start\n");
  });
});

describe("http.allowed.hosts", () => {
  test("a comma-separated list of names from the flag, the environment or the file; none by default", () => {
    expect(parse([]).httpAllowedHosts).toEqual([]);
    expect(parse(["--http-allowed-hosts", "bunka-1.example, metrics.internal"]).httpAllowedHosts).toEqual(["bunka-1.example", "metrics.internal"]);
    expect(parse([], { BUNKA_HTTP_ALLOWED_HOSTS: "a.example" }).httpAllowedHosts).toEqual(["a.example"]);
    expect(parse(["--config", "/c"], {}, files({ "/c": "http.allowed.hosts=b.example\n" })).httpAllowedHosts).toEqual(["b.example"]);
  });

  test("a port, a scheme or an empty entry is one line naming the setting", () => {
    for (const value of ["bunka:9644", "http://bunka", "a.example,,b.example", ""]) {
      expect(configError(() => parse(["--http-allowed-hosts", value]))).toContain("is not a host name");
    }
  });
});
